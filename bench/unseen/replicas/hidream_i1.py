"""HiDream-I1 text-to-image DiT (HiDreamImageTransformer2DModel), reimplemented for torch 1.13 (no diffusers here),
captured small in f32 on CPU.

Follows huggingface/diffusers src/diffusers/models/transformers/transformer_hidream_image.py at
38c0cb3ab52607557942f640d175c71c1431a6f9 (HiDreamImageTransformer2DModel, HiDreamBlock, HiDreamImageTransformerBlock,
HiDreamImageSingleTransformerBlock, HiDreamAttention with HiDreamAttnProcessor, MOEFeedForwardSwiGLU with its
moe_infer, MoEGate, HiDreamImageFeedForwardSwiGLU, TextProjection, HiDreamImageEmbedND with rope/apply_rope,
HiDreamImagePatchEmbed, HiDreamImageTimestepEmbed, HiDreamImagePooledEmbed, HiDreamImageOutEmbed, patchify and
unpatchify) with the parts it imports from embeddings.py (Timesteps, TimestepEmbedding): the same module tree,
parameter names and shapes, and call boundaries; the arithmetic line for line. The attention processor stays a
plain object the HiDreamAttention module calls, as upstream. Stand-ins for what torch 1.13 lacks: torch.nn.RMSNorm
(parts.TorchRMSNorm) and F.scaled_dot_product_attention (run.sdpa, its math path).

The constructs it shows: a mixture-of-experts SwiGLU feed-forward on the image stream (MoEGate: softmax over a
bias-free [E, D] gate, top-2 of 4 unsorted, no renormalisation; moe_infer: the token-expert pairs argsorted by
expert, each expert run on its gathered tokens, scaled by its gate weight and scatter_reduce'd (sum) back into a
zero buffer; plus a shared expert on every token); SwiGLU widths rounded up to multiple_of 256; per-block text
inputs: the T5 projection and the last Llama layer's projection joined once as the running text stream, each
block appending its own projected Llama layer (cut off again after the block); q/k RMSNorm over the whole
inner dim (not per head); RoPE as 2x2 rotation matrices [cos, -sin; sin, cos] from 3-axis ids (0, h, w) for
image rows, all-zero ids for text rows, in float64 then f32; image rows first in the joint attention; adaLN
modulation per block from temb = t_embedder(t) + p_embedder(pooled).

Pipeline as HiDreamImagePipeline (src/diffusers/pipelines/hidream_image/pipeline_hidream_image.py at
035aadae99151e6538dd4bcb11b895ca99bdc8c2) calls it: timesteps = t.expand(B) with t = σ·1000 (float32, the
scheduler's timesteps), square latents (no masks, no padding to max_seq), encoder_hidden_states_llama3 the
stacked Llama hidden states [layers, B, L, D], and the velocity the NEGATED model output (noise_pred = -noise_pred
before scheduler.step).

usage: /usr/bin/python3 bench/unseen/replicas/hidream_i1.py OUTDIR [--equal-rows]
--equal-rows: a 6-token T5 caption, so the text stream holds 6 + 5 + 5 = 16 rows, as many as the image's 16
patches (the case hidream_i1_equal): two streams of equal rows in every joint attention.
REPLICA_DTYPE=bf16 as run.py's replicas: the bf16 run, beside the f32 one.
"""
import sys
from typing import List, Optional, Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F

from parts import TimestepEmbedding, Timesteps, TorchRMSNorm
from run import capture, sdpa


class RMSNorm(TorchRMSNorm):
    """torch.nn.RMSNorm(dim, eps) (torch >= 2.4)."""


class HiDreamImageFeedForwardSwiGLU(nn.Module):
    def __init__(self, dim, hidden_dim, multiple_of=256, ffn_dim_multiplier=None):
        super().__init__()
        hidden_dim = int(2 * hidden_dim / 3)
        if ffn_dim_multiplier is not None:
            hidden_dim = int(ffn_dim_multiplier * hidden_dim)
        hidden_dim = multiple_of * ((hidden_dim + multiple_of - 1) // multiple_of)
        self.w1 = nn.Linear(dim, hidden_dim, bias=False)
        self.w2 = nn.Linear(hidden_dim, dim, bias=False)
        self.w3 = nn.Linear(dim, hidden_dim, bias=False)

    def forward(self, x):
        return self.w2(torch.nn.functional.silu(self.w1(x)) * self.w3(x))


class HiDreamImagePooledEmbed(nn.Module):
    def __init__(self, text_emb_dim, hidden_size):
        super().__init__()
        self.pooled_embedder = TimestepEmbedding(in_channels=text_emb_dim, time_embed_dim=hidden_size)

    def forward(self, pooled_embed):
        return self.pooled_embedder(pooled_embed)


class HiDreamImageTimestepEmbed(nn.Module):
    def __init__(self, hidden_size, frequency_embedding_size=256):
        super().__init__()
        self.time_proj = Timesteps(num_channels=frequency_embedding_size, flip_sin_to_cos=True, downscale_freq_shift=0)
        self.timestep_embedder = TimestepEmbedding(in_channels=frequency_embedding_size, time_embed_dim=hidden_size)

    def forward(self, timesteps, wdtype=None):
        t_emb = self.time_proj(timesteps).to(dtype=wdtype)
        t_emb = self.timestep_embedder(t_emb)
        return t_emb


class HiDreamImageOutEmbed(nn.Module):
    def __init__(self, hidden_size, patch_size, out_channels):
        super().__init__()
        self.norm_final = nn.LayerNorm(hidden_size, elementwise_affine=False, eps=1e-6)
        self.linear = nn.Linear(hidden_size, patch_size * patch_size * out_channels, bias=True)
        self.adaLN_modulation = nn.Sequential(nn.SiLU(), nn.Linear(hidden_size, 2 * hidden_size, bias=True))

    def forward(self, hidden_states, temb):
        shift, scale = self.adaLN_modulation(temb).chunk(2, dim=1)
        hidden_states = self.norm_final(hidden_states) * (1 + scale.unsqueeze(1)) + shift.unsqueeze(1)
        hidden_states = self.linear(hidden_states)
        return hidden_states


class HiDreamImagePatchEmbed(nn.Module):
    def __init__(self, patch_size=2, in_channels=4, out_channels=1024):
        super().__init__()
        self.patch_size = patch_size
        self.out_channels = out_channels
        self.proj = nn.Linear(in_channels * patch_size * patch_size, out_channels, bias=True)

    def forward(self, latent):
        latent = self.proj(latent)
        return latent


def rope(pos, dim, theta):
    assert dim % 2 == 0, "The dimension must be even."
    dtype = torch.float64  # CPU (float32 on mps / npu only)
    scale = torch.arange(0, dim, 2, dtype=dtype, device=pos.device) / dim
    omega = 1.0 / (theta ** scale)
    batch_size, seq_length = pos.shape
    out = torch.einsum("...n,d->...nd", pos, omega)
    cos_out = torch.cos(out)
    sin_out = torch.sin(out)
    stacked_out = torch.stack([cos_out, -sin_out, sin_out, cos_out], dim=-1)
    out = stacked_out.view(batch_size, -1, dim // 2, 2, 2)
    return out.float()


class HiDreamImageEmbedND(nn.Module):
    def __init__(self, theta, axes_dim):
        super().__init__()
        self.theta = theta
        self.axes_dim = axes_dim

    def forward(self, ids):
        n_axes = ids.shape[-1]
        emb = torch.cat([rope(ids[..., i], self.axes_dim[i], self.theta) for i in range(n_axes)], dim=-3)
        return emb.unsqueeze(2)


def apply_rope(xq, xk, freqs_cis):
    xq_ = xq.float().reshape(*xq.shape[:-1], -1, 1, 2)
    xk_ = xk.float().reshape(*xk.shape[:-1], -1, 1, 2)
    xq_out = freqs_cis[..., 0] * xq_[..., 0] + freqs_cis[..., 1] * xq_[..., 1]
    xk_out = freqs_cis[..., 0] * xk_[..., 0] + freqs_cis[..., 1] * xk_[..., 1]
    return xq_out.reshape(*xq.shape).type_as(xq), xk_out.reshape(*xk.shape).type_as(xk)


class HiDreamAttnProcessor:
    """Attention processor used typically in processing the SD3-like self-attention projections."""

    def __call__(self, attn, hidden_states, hidden_states_masks=None, encoder_hidden_states=None,
                 image_rotary_emb=None, *args, **kwargs):
        dtype = hidden_states.dtype
        batch_size = hidden_states.shape[0]

        query_i = attn.q_rms_norm(attn.to_q(hidden_states)).to(dtype=dtype)
        key_i = attn.k_rms_norm(attn.to_k(hidden_states)).to(dtype=dtype)
        value_i = attn.to_v(hidden_states)

        inner_dim = key_i.shape[-1]
        head_dim = inner_dim // attn.heads

        query_i = query_i.view(batch_size, -1, attn.heads, head_dim)
        key_i = key_i.view(batch_size, -1, attn.heads, head_dim)
        value_i = value_i.view(batch_size, -1, attn.heads, head_dim)
        if hidden_states_masks is not None:
            key_i = key_i * hidden_states_masks.view(batch_size, -1, 1, 1)

        if not attn.single:
            query_t = attn.q_rms_norm_t(attn.to_q_t(encoder_hidden_states)).to(dtype=dtype)
            key_t = attn.k_rms_norm_t(attn.to_k_t(encoder_hidden_states)).to(dtype=dtype)
            value_t = attn.to_v_t(encoder_hidden_states)

            query_t = query_t.view(batch_size, -1, attn.heads, head_dim)
            key_t = key_t.view(batch_size, -1, attn.heads, head_dim)
            value_t = value_t.view(batch_size, -1, attn.heads, head_dim)

            num_image_tokens = query_i.shape[1]
            num_text_tokens = query_t.shape[1]
            query = torch.cat([query_i, query_t], dim=1)
            key = torch.cat([key_i, key_t], dim=1)
            value = torch.cat([value_i, value_t], dim=1)
        else:
            query = query_i
            key = key_i
            value = value_i

        if query.shape[-1] == image_rotary_emb.shape[-3] * 2:
            query, key = apply_rope(query, key, image_rotary_emb)
        else:
            query_1, query_2 = query.chunk(2, dim=-1)
            key_1, key_2 = key.chunk(2, dim=-1)
            query_1, key_1 = apply_rope(query_1, key_1, image_rotary_emb)
            query = torch.cat([query_1, query_2], dim=-1)
            key = torch.cat([key_1, key_2], dim=-1)

        hidden_states = sdpa(query.transpose(1, 2), key.transpose(1, 2), value.transpose(1, 2))

        hidden_states = hidden_states.transpose(1, 2).reshape(batch_size, -1, attn.heads * head_dim)
        hidden_states = hidden_states.to(query.dtype)

        if not attn.single:
            hidden_states_i, hidden_states_t = torch.split(hidden_states, [num_image_tokens, num_text_tokens], dim=1)
            hidden_states_i = attn.to_out(hidden_states_i)
            hidden_states_t = attn.to_out_t(hidden_states_t)
            return hidden_states_i, hidden_states_t
        else:
            hidden_states = attn.to_out(hidden_states)
            return hidden_states


class HiDreamAttention(nn.Module):
    """Upstream subclasses Attention but initialises it as a plain nn.Module (super(Attention, self).__init__())."""

    def __init__(self, query_dim, heads=8, dim_head=64, upcast_attention=False, upcast_softmax=False,
                 scale_qk=True, eps=1e-5, processor=None, out_dim=None, single=False):
        super().__init__()
        self.inner_dim = out_dim if out_dim is not None else dim_head * heads
        self.query_dim = query_dim
        self.upcast_attention = upcast_attention
        self.upcast_softmax = upcast_softmax
        self.out_dim = out_dim if out_dim is not None else query_dim
        self.scale_qk = scale_qk
        self.scale = dim_head ** -0.5 if self.scale_qk else 1.0
        self.heads = out_dim // dim_head if out_dim is not None else heads
        self.sliceable_head_dim = heads
        self.single = single

        self.to_q = nn.Linear(query_dim, self.inner_dim)
        self.to_k = nn.Linear(self.inner_dim, self.inner_dim)
        self.to_v = nn.Linear(self.inner_dim, self.inner_dim)
        self.to_out = nn.Linear(self.inner_dim, self.out_dim)
        self.q_rms_norm = RMSNorm(self.inner_dim, eps)
        self.k_rms_norm = RMSNorm(self.inner_dim, eps)

        if not single:
            self.to_q_t = nn.Linear(query_dim, self.inner_dim)
            self.to_k_t = nn.Linear(self.inner_dim, self.inner_dim)
            self.to_v_t = nn.Linear(self.inner_dim, self.inner_dim)
            self.to_out_t = nn.Linear(self.inner_dim, self.out_dim)
            self.q_rms_norm_t = RMSNorm(self.inner_dim, eps)
            self.k_rms_norm_t = RMSNorm(self.inner_dim, eps)

        self.processor = processor

    def forward(self, norm_hidden_states, hidden_states_masks=None, norm_encoder_hidden_states=None,
                image_rotary_emb=None):
        return self.processor(self, hidden_states=norm_hidden_states, hidden_states_masks=hidden_states_masks,
                              encoder_hidden_states=norm_encoder_hidden_states, image_rotary_emb=image_rotary_emb)


class MoEGate(nn.Module):
    def __init__(self, embed_dim, num_routed_experts=4, num_activated_experts=2, aux_loss_alpha=0.01,
                 _force_inference_output=False):
        super().__init__()
        self.top_k = num_activated_experts
        self.n_routed_experts = num_routed_experts
        self.scoring_func = "softmax"
        self.alpha = aux_loss_alpha
        self.seq_aux = False
        self.norm_topk_prob = False
        self.gating_dim = embed_dim
        self.weight = nn.Parameter(torch.randn(self.n_routed_experts, self.gating_dim) / embed_dim ** 0.5)
        self._force_inference_output = _force_inference_output

    def forward(self, hidden_states):
        bsz, seq_len, h = hidden_states.shape
        hidden_states = hidden_states.view(-1, h)
        logits = F.linear(hidden_states, self.weight, None)
        if self.scoring_func == "softmax":
            scores = logits.softmax(dim=-1)
        else:
            raise NotImplementedError(f"insupportable scoring function for MoE gating: {self.scoring_func}")

        topk_weight, topk_idx = torch.topk(scores, k=self.top_k, dim=-1, sorted=False)

        if self.top_k > 1 and self.norm_topk_prob:
            denominator = topk_weight.sum(dim=-1, keepdim=True) + 1e-20
            topk_weight = topk_weight / denominator

        if self.training and self.alpha > 0.0 and not self._force_inference_output:
            scores_for_aux = scores
            aux_topk = self.top_k
            topk_idx_for_aux_loss = topk_idx.view(bsz, -1)
            if self.seq_aux:
                scores_for_seq_aux = scores_for_aux.view(bsz, seq_len, -1)
                ce = torch.zeros(bsz, self.n_routed_experts, device=hidden_states.device)
                ce.scatter_add_(1, topk_idx_for_aux_loss,
                                torch.ones(bsz, seq_len * aux_topk, device=hidden_states.device)
                                ).div_(seq_len * aux_topk / self.n_routed_experts)
                aux_loss = (ce * scores_for_seq_aux.mean(dim=1)).sum(dim=1).mean() * self.alpha
            else:
                mask_ce = F.one_hot(topk_idx_for_aux_loss.view(-1), num_classes=self.n_routed_experts)
                ce = mask_ce.float().mean(0)
                Pi = scores_for_aux.mean(0)
                fi = ce * self.n_routed_experts
                aux_loss = (Pi * fi).sum() * self.alpha
        else:
            aux_loss = None
        return topk_idx, topk_weight, aux_loss


class MOEFeedForwardSwiGLU(nn.Module):
    def __init__(self, dim, hidden_dim, num_routed_experts, num_activated_experts, _force_inference_output=False):
        super().__init__()
        self.shared_experts = HiDreamImageFeedForwardSwiGLU(dim, hidden_dim // 2)
        self.experts = nn.ModuleList(
            [HiDreamImageFeedForwardSwiGLU(dim, hidden_dim) for i in range(num_routed_experts)])
        self._force_inference_output = _force_inference_output
        self.gate = MoEGate(embed_dim=dim, num_routed_experts=num_routed_experts,
                            num_activated_experts=num_activated_experts,
                            _force_inference_output=_force_inference_output)
        self.num_activated_experts = num_activated_experts

    def forward(self, x):
        wtype = x.dtype
        identity = x
        orig_shape = x.shape
        topk_idx, topk_weight, aux_loss = self.gate(x)
        x = x.view(-1, x.shape[-1])
        flat_topk_idx = topk_idx.view(-1)
        if self.training and not self._force_inference_output:
            x = x.repeat_interleave(self.num_activated_experts, dim=0)
            y = torch.empty_like(x, dtype=wtype)
            for i, expert in enumerate(self.experts):
                y[flat_topk_idx == i] = expert(x[flat_topk_idx == i]).to(dtype=wtype)
            y = (y.view(*topk_weight.shape, -1) * topk_weight.unsqueeze(-1)).sum(dim=1)
            y = y.view(*orig_shape).to(dtype=wtype)
        else:
            y = self.moe_infer(x, flat_topk_idx, topk_weight.view(-1, 1)).view(*orig_shape)
        y = y + self.shared_experts(identity)
        return y

    @torch.no_grad()
    def moe_infer(self, x, flat_expert_indices, flat_expert_weights):
        expert_cache = torch.zeros_like(x)
        idxs = flat_expert_indices.argsort()
        tokens_per_expert = flat_expert_indices.bincount().cpu().numpy().cumsum(0)
        token_idxs = idxs // self.num_activated_experts
        for i, end_idx in enumerate(tokens_per_expert):
            start_idx = 0 if i == 0 else tokens_per_expert[i - 1]
            if start_idx == end_idx:
                continue
            expert = self.experts[i]
            exp_token_idx = token_idxs[start_idx:end_idx]
            expert_tokens = x[exp_token_idx]
            expert_out = expert(expert_tokens)
            expert_out.mul_(flat_expert_weights[idxs[start_idx:end_idx]])
            expert_cache = expert_cache.to(expert_out.dtype)
            expert_cache.scatter_reduce_(0, exp_token_idx.view(-1, 1).repeat(1, x.shape[-1]), expert_out,
                                         reduce="sum")
        return expert_cache


class TextProjection(nn.Module):
    def __init__(self, in_features, hidden_size):
        super().__init__()
        self.linear = nn.Linear(in_features=in_features, out_features=hidden_size, bias=False)

    def forward(self, caption):
        hidden_states = self.linear(caption)
        return hidden_states


class HiDreamImageSingleTransformerBlock(nn.Module):
    def __init__(self, dim, num_attention_heads, attention_head_dim, num_routed_experts=4, num_activated_experts=2,
                 _force_inference_output=False):
        super().__init__()
        self.num_attention_heads = num_attention_heads
        self.adaLN_modulation = nn.Sequential(nn.SiLU(), nn.Linear(dim, 6 * dim, bias=True))
        self.norm1_i = nn.LayerNorm(dim, eps=1e-06, elementwise_affine=False)
        self.attn1 = HiDreamAttention(query_dim=dim, heads=num_attention_heads, dim_head=attention_head_dim,
                                      processor=HiDreamAttnProcessor(), single=True)
        self.norm3_i = nn.LayerNorm(dim, eps=1e-06, elementwise_affine=False)
        if num_routed_experts > 0:
            self.ff_i = MOEFeedForwardSwiGLU(dim=dim, hidden_dim=4 * dim, num_routed_experts=num_routed_experts,
                                             num_activated_experts=num_activated_experts,
                                             _force_inference_output=_force_inference_output)
        else:
            self.ff_i = HiDreamImageFeedForwardSwiGLU(dim=dim, hidden_dim=4 * dim)

    def forward(self, hidden_states, hidden_states_masks=None, encoder_hidden_states=None, temb=None,
                image_rotary_emb=None):
        wtype = hidden_states.dtype
        shift_msa_i, scale_msa_i, gate_msa_i, shift_mlp_i, scale_mlp_i, gate_mlp_i = self.adaLN_modulation(temb)[
            :, None].chunk(6, dim=-1)

        norm_hidden_states = self.norm1_i(hidden_states).to(dtype=wtype)
        norm_hidden_states = norm_hidden_states * (1 + scale_msa_i) + shift_msa_i
        attn_output_i = self.attn1(norm_hidden_states, hidden_states_masks, image_rotary_emb=image_rotary_emb)
        hidden_states = gate_msa_i * attn_output_i + hidden_states

        norm_hidden_states = self.norm3_i(hidden_states).to(dtype=wtype)
        norm_hidden_states = norm_hidden_states * (1 + scale_mlp_i) + shift_mlp_i
        ff_output_i = gate_mlp_i * self.ff_i(norm_hidden_states.to(dtype=wtype))
        hidden_states = ff_output_i + hidden_states
        return hidden_states


class HiDreamImageTransformerBlock(nn.Module):
    def __init__(self, dim, num_attention_heads, attention_head_dim, num_routed_experts=4, num_activated_experts=2,
                 _force_inference_output=False):
        super().__init__()
        self.num_attention_heads = num_attention_heads
        self.adaLN_modulation = nn.Sequential(nn.SiLU(), nn.Linear(dim, 12 * dim, bias=True))
        self.norm1_i = nn.LayerNorm(dim, eps=1e-06, elementwise_affine=False)
        self.norm1_t = nn.LayerNorm(dim, eps=1e-06, elementwise_affine=False)
        self.attn1 = HiDreamAttention(query_dim=dim, heads=num_attention_heads, dim_head=attention_head_dim,
                                      processor=HiDreamAttnProcessor(), single=False)
        self.norm3_i = nn.LayerNorm(dim, eps=1e-06, elementwise_affine=False)
        if num_routed_experts > 0:
            self.ff_i = MOEFeedForwardSwiGLU(dim=dim, hidden_dim=4 * dim, num_routed_experts=num_routed_experts,
                                             num_activated_experts=num_activated_experts,
                                             _force_inference_output=_force_inference_output)
        else:
            self.ff_i = HiDreamImageFeedForwardSwiGLU(dim=dim, hidden_dim=4 * dim)
        self.norm3_t = nn.LayerNorm(dim, eps=1e-06, elementwise_affine=False)
        self.ff_t = HiDreamImageFeedForwardSwiGLU(dim=dim, hidden_dim=4 * dim)

    def forward(self, hidden_states, hidden_states_masks=None, encoder_hidden_states=None, temb=None,
                image_rotary_emb=None):
        wtype = hidden_states.dtype
        (shift_msa_i, scale_msa_i, gate_msa_i, shift_mlp_i, scale_mlp_i, gate_mlp_i,
         shift_msa_t, scale_msa_t, gate_msa_t, shift_mlp_t, scale_mlp_t, gate_mlp_t,
         ) = self.adaLN_modulation(temb)[:, None].chunk(12, dim=-1)

        norm_hidden_states = self.norm1_i(hidden_states).to(dtype=wtype)
        norm_hidden_states = norm_hidden_states * (1 + scale_msa_i) + shift_msa_i
        norm_encoder_hidden_states = self.norm1_t(encoder_hidden_states).to(dtype=wtype)
        norm_encoder_hidden_states = norm_encoder_hidden_states * (1 + scale_msa_t) + shift_msa_t

        attn_output_i, attn_output_t = self.attn1(norm_hidden_states, hidden_states_masks,
                                                  norm_encoder_hidden_states, image_rotary_emb=image_rotary_emb)

        hidden_states = gate_msa_i * attn_output_i + hidden_states
        encoder_hidden_states = gate_msa_t * attn_output_t + encoder_hidden_states

        norm_hidden_states = self.norm3_i(hidden_states).to(dtype=wtype)
        norm_hidden_states = norm_hidden_states * (1 + scale_mlp_i) + shift_mlp_i
        norm_encoder_hidden_states = self.norm3_t(encoder_hidden_states).to(dtype=wtype)
        norm_encoder_hidden_states = norm_encoder_hidden_states * (1 + scale_mlp_t) + shift_mlp_t

        ff_output_i = gate_mlp_i * self.ff_i(norm_hidden_states)
        ff_output_t = gate_mlp_t * self.ff_t(norm_encoder_hidden_states)
        hidden_states = ff_output_i + hidden_states
        encoder_hidden_states = ff_output_t + encoder_hidden_states
        return hidden_states, encoder_hidden_states


class HiDreamBlock(nn.Module):
    def __init__(self, block):
        super().__init__()
        self.block = block

    def forward(self, hidden_states, hidden_states_masks=None, encoder_hidden_states=None, temb=None,
                image_rotary_emb=None):
        return self.block(hidden_states=hidden_states, hidden_states_masks=hidden_states_masks,
                          encoder_hidden_states=encoder_hidden_states, temb=temb, image_rotary_emb=image_rotary_emb)


class HiDreamImageTransformer2DModel(nn.Module):
    def __init__(self, patch_size=None, in_channels=64, out_channels=None, num_layers=16, num_single_layers=32,
                 attention_head_dim=128, num_attention_heads=20, caption_channels=None, text_emb_dim=2048,
                 num_routed_experts=4, num_activated_experts=2, axes_dims_rope=(32, 32), max_resolution=(128, 128),
                 llama_layers=None, force_inference_output=False):
        super().__init__()
        self.patch_size = patch_size
        self.llama_layers = llama_layers
        self.force_inference_output = force_inference_output
        self.out_channels = out_channels or in_channels
        self.inner_dim = num_attention_heads * attention_head_dim

        self.t_embedder = HiDreamImageTimestepEmbed(self.inner_dim)
        self.p_embedder = HiDreamImagePooledEmbed(text_emb_dim, self.inner_dim)
        self.x_embedder = HiDreamImagePatchEmbed(patch_size=patch_size, in_channels=in_channels,
                                                 out_channels=self.inner_dim)
        self.pe_embedder = HiDreamImageEmbedND(theta=10000, axes_dim=axes_dims_rope)

        self.double_stream_blocks = nn.ModuleList([
            HiDreamBlock(HiDreamImageTransformerBlock(
                dim=self.inner_dim, num_attention_heads=num_attention_heads, attention_head_dim=attention_head_dim,
                num_routed_experts=num_routed_experts, num_activated_experts=num_activated_experts,
                _force_inference_output=force_inference_output))
            for _ in range(num_layers)])

        self.single_stream_blocks = nn.ModuleList([
            HiDreamBlock(HiDreamImageSingleTransformerBlock(
                dim=self.inner_dim, num_attention_heads=num_attention_heads, attention_head_dim=attention_head_dim,
                num_routed_experts=num_routed_experts, num_activated_experts=num_activated_experts,
                _force_inference_output=force_inference_output))
            for _ in range(num_single_layers)])

        self.final_layer = HiDreamImageOutEmbed(self.inner_dim, patch_size, self.out_channels)

        caption_channels = [caption_channels[1]] * (num_layers + num_single_layers) + [caption_channels[0]]
        caption_projection = []
        for caption_channel in caption_channels:
            caption_projection.append(TextProjection(in_features=caption_channel, hidden_size=self.inner_dim))
        self.caption_projection = nn.ModuleList(caption_projection)
        self.max_seq = max_resolution[0] * max_resolution[1] // (patch_size * patch_size)

        self.gradient_checkpointing = False

    def unpatchify(self, x, img_sizes, is_training):
        if is_training and not self.force_inference_output:
            B, S, F_ = x.shape
            C = F_ // (self.patch_size * self.patch_size)
            x = (x.reshape(B, S, self.patch_size, self.patch_size, C).permute(0, 4, 1, 2, 3)
                 .reshape(B, C, S, self.patch_size * self.patch_size))
        else:
            x_arr = []
            p1 = self.patch_size
            p2 = self.patch_size
            for i, img_size in enumerate(img_sizes):
                pH, pW = img_size
                t = x[i, : pH * pW].reshape(1, pH, pW, -1)
                F_token = t.shape[-1]
                C = F_token // (p1 * p2)
                t = t.reshape(1, pH, pW, p1, p2, C)
                t = t.permute(0, 5, 1, 3, 2, 4)
                t = t.reshape(1, C, pH * p1, pW * p2)
                x_arr.append(t)
            x = torch.cat(x_arr, dim=0)
        return x

    def patchify(self, hidden_states):
        batch_size, channels, height, width = hidden_states.shape
        patch_size = self.patch_size
        patch_height, patch_width = height // patch_size, width // patch_size
        device = hidden_states.device
        dtype = hidden_states.dtype

        img_sizes = torch.tensor([patch_height, patch_width], dtype=torch.int64, device=device).reshape(-1)
        img_sizes = img_sizes.unsqueeze(0).repeat(batch_size, 1)

        if hidden_states.shape[-2] != hidden_states.shape[-1]:
            hidden_states_masks = torch.zeros((batch_size, self.max_seq), dtype=dtype, device=device)
            hidden_states_masks[:, : patch_height * patch_width] = 1.0
        else:
            hidden_states_masks = None

        img_ids = torch.zeros(patch_height, patch_width, 3, device=device)
        row_indices = torch.arange(patch_height, device=device)[:, None]
        col_indices = torch.arange(patch_width, device=device)[None, :]
        img_ids[..., 1] = img_ids[..., 1] + row_indices
        img_ids[..., 2] = img_ids[..., 2] + col_indices
        img_ids = img_ids.reshape(patch_height * patch_width, -1)

        if hidden_states.shape[-2] != hidden_states.shape[-1]:
            img_ids_pad = torch.zeros(self.max_seq, 3, device=device)
            img_ids_pad[: patch_height * patch_width, :] = img_ids
            img_ids = img_ids_pad.unsqueeze(0).repeat(batch_size, 1, 1)
        else:
            img_ids = img_ids.unsqueeze(0).repeat(batch_size, 1, 1)

        if hidden_states.shape[-2] != hidden_states.shape[-1]:
            out = torch.zeros((batch_size, channels, self.max_seq, patch_size * patch_size), dtype=dtype,
                              device=device)
            hidden_states = hidden_states.reshape(batch_size, channels, patch_height, patch_size, patch_width,
                                                  patch_size)
            hidden_states = hidden_states.permute(0, 1, 2, 4, 3, 5)
            hidden_states = hidden_states.reshape(batch_size, channels, patch_height * patch_width,
                                                  patch_size * patch_size)
            out[:, :, 0: patch_height * patch_width] = hidden_states
            hidden_states = out
            hidden_states = hidden_states.permute(0, 2, 3, 1).reshape(batch_size, self.max_seq,
                                                                      patch_size * patch_size * channels)
        else:
            hidden_states = hidden_states.reshape(batch_size, channels, patch_height, patch_size, patch_width,
                                                  patch_size)
            hidden_states = hidden_states.permute(0, 2, 4, 3, 5, 1)
            hidden_states = hidden_states.reshape(batch_size, patch_height * patch_width,
                                                  patch_size * patch_size * channels)

        return hidden_states, hidden_states_masks, img_sizes, img_ids

    def forward(self, hidden_states, timesteps=None, encoder_hidden_states_t5=None,
                encoder_hidden_states_llama3=None, pooled_embeds=None, img_ids=None, img_sizes=None,
                hidden_states_masks=None, attention_kwargs=None, return_dict=True):
        batch_size = hidden_states.shape[0]
        hidden_states_type = hidden_states.dtype

        if hidden_states_masks is None:
            hidden_states, hidden_states_masks, img_sizes, img_ids = self.patchify(hidden_states)

        hidden_states = self.x_embedder(hidden_states)

        timesteps = self.t_embedder(timesteps, hidden_states_type)
        p_embedder = self.p_embedder(pooled_embeds)
        temb = timesteps + p_embedder

        encoder_hidden_states = [encoder_hidden_states_llama3[k] for k in self.llama_layers]

        if self.caption_projection is not None:
            new_encoder_hidden_states = []
            for i, enc_hidden_state in enumerate(encoder_hidden_states):
                enc_hidden_state = self.caption_projection[i](enc_hidden_state)
                enc_hidden_state = enc_hidden_state.view(batch_size, -1, hidden_states.shape[-1])
                new_encoder_hidden_states.append(enc_hidden_state)
            encoder_hidden_states = new_encoder_hidden_states
            encoder_hidden_states_t5 = self.caption_projection[-1](encoder_hidden_states_t5)
            encoder_hidden_states_t5 = encoder_hidden_states_t5.view(batch_size, -1, hidden_states.shape[-1])
            encoder_hidden_states.append(encoder_hidden_states_t5)

        txt_ids = torch.zeros(batch_size,
                              encoder_hidden_states[-1].shape[1] + encoder_hidden_states[-2].shape[1]
                              + encoder_hidden_states[0].shape[1],
                              3, device=img_ids.device, dtype=img_ids.dtype)
        ids = torch.cat((img_ids, txt_ids), dim=1)
        image_rotary_emb = self.pe_embedder(ids)

        block_id = 0
        initial_encoder_hidden_states = torch.cat([encoder_hidden_states[-1], encoder_hidden_states[-2]], dim=1)
        initial_encoder_hidden_states_seq_len = initial_encoder_hidden_states.shape[1]
        for bid, block in enumerate(self.double_stream_blocks):
            cur_llama31_encoder_hidden_states = encoder_hidden_states[block_id]
            cur_encoder_hidden_states = torch.cat([initial_encoder_hidden_states, cur_llama31_encoder_hidden_states],
                                                  dim=1)
            hidden_states, initial_encoder_hidden_states = block(
                hidden_states=hidden_states, hidden_states_masks=hidden_states_masks,
                encoder_hidden_states=cur_encoder_hidden_states, temb=temb, image_rotary_emb=image_rotary_emb)
            initial_encoder_hidden_states = initial_encoder_hidden_states[:, :initial_encoder_hidden_states_seq_len]
            block_id += 1

        image_tokens_seq_len = hidden_states.shape[1]
        hidden_states = torch.cat([hidden_states, initial_encoder_hidden_states], dim=1)
        hidden_states_seq_len = hidden_states.shape[1]
        if hidden_states_masks is not None:
            encoder_attention_mask_ones = torch.ones(
                (batch_size, initial_encoder_hidden_states.shape[1] + cur_llama31_encoder_hidden_states.shape[1]),
                device=hidden_states_masks.device, dtype=hidden_states_masks.dtype)
            hidden_states_masks = torch.cat([hidden_states_masks, encoder_attention_mask_ones], dim=1)

        for bid, block in enumerate(self.single_stream_blocks):
            cur_llama31_encoder_hidden_states = encoder_hidden_states[block_id]
            hidden_states = torch.cat([hidden_states, cur_llama31_encoder_hidden_states], dim=1)
            hidden_states = block(hidden_states=hidden_states, hidden_states_masks=hidden_states_masks,
                                  encoder_hidden_states=None, temb=temb, image_rotary_emb=image_rotary_emb)
            hidden_states = hidden_states[:, :hidden_states_seq_len]
            block_id += 1

        hidden_states = hidden_states[:, :image_tokens_seq_len, ...]
        output = self.final_layer(hidden_states, temb)
        output = self.unpatchify(output, img_sizes, self.training)
        if hidden_states_masks is not None:
            hidden_states_masks = hidden_states_masks[:, :image_tokens_seq_len]
        return (output,)


LLAMA_STACK = 4  # hidden states of a 4-layer Llama (outputs.hidden_states[1:] stacked)


def build():
    # Small HiDream-I1: 2 heads of 16 (RoPE axes 8+4+4 = the head), two double-stream blocks and one
    # single-stream block, each image-stream FFN a MoE of 4 routed experts (top 2) + 1 shared; 4 latent channels
    # patchified 2x2; T5 20 wide, Llama 24 wide (4 layers stacked; the blocks read layers 0, 3, 3, the last one
    # twice as the real config repeats its last layer), pooled CLIP 16 wide. Text rows 8 (T5) + 5 + 5 (Llama) = 18,
    # not the image's 16: with equal rows the two streams of the joint attention are not told apart by length.
    return HiDreamImageTransformer2DModel(patch_size=2, in_channels=4, num_layers=2, num_single_layers=1,
                                          attention_head_dim=16, num_attention_heads=2, caption_channels=[20, 24],
                                          text_emb_dim=16, num_routed_experts=4, num_activated_experts=2,
                                          axes_dims_rope=(8, 4, 4), max_resolution=(8, 8) if WIDE else (16, 16),
                                          llama_layers=[0, 3, 3])


EQUAL_ROWS = "--equal-rows" in sys.argv
# --wide: latents 4 high and 8 wide (not square), so the model pads its 8 patch rows to max_seq = 16 rows
# (max_resolution 8×8) with hidden_states_masks, the padding rows' keys multiplied by 0 in every attention
WIDE = "--wide" in sys.argv


def inputs(g):
    # 8 + 5 + 5 text rows, not the 16 image rows; with --equal-rows 6 + 5 + 5, as many
    t5 = torch.randn((1, 6 if EQUAL_ROWS else 8, 20), generator=g)
    llama3 = torch.randn((LLAMA_STACK, 1, 5, 24), generator=g)
    pooled = torch.randn((1, 16), generator=g)
    lat = torch.randn((1, 4, 4, 8) if WIDE else (1, 4, 8, 8), generator=g)
    return {"encoder_hidden_states_t5": t5, "encoder_hidden_states_llama3": llama3, "pooled_embeds": pooled,
            "noise": lat}


def call(model, x, sigma, c):
    t = torch.tensor(sigma * 1000.0, dtype=torch.float32)  # scheduler.timesteps (float32)
    timestep = t.expand(x.shape[0])
    noise_pred = model(hidden_states=x, timesteps=timestep, encoder_hidden_states_t5=c["encoder_hidden_states_t5"],
                       encoder_hidden_states_llama3=c["encoder_hidden_states_llama3"],
                       pooled_embeds=c["pooled_embeds"], img_sizes=None, img_ids=None, return_dict=False)[0]
    noise_pred = -noise_pred
    return noise_pred


PRODUCER = dict(
    library_source="replica of huggingface/diffusers transformer_hidream_image.py@38c0cb3ab526 and "
                   "pipeline_hidream_image.py@035aadae9915 (torch 1.13)",
    timestep="sigma*1000 float32 (HiDreamImagePipeline passes the scheduler's timesteps as they are)",
    velocity="the NEGATED model output (pipeline: noise_pred = -noise_pred before scheduler.step)",
    note="HiDream-I1: two double-stream blocks and one single-stream block, 2 heads of 16; temb = SiLU-MLP(sinusoid(t), "
         "cos-first 256) + SiLU-MLP(pooled); per-block adaLN (12 / 6 chunks of Linear(SiLU(temb))); q/k RMSNorm "
         "over the whole inner dim; RoPE from 3-axis ids (0, h, w) for image rows and zeros for text, axes (8, 4, "
         "4), as 2x2 rotation matrices on adjacent pairs; joint attention over [image, text] rows; text stream = "
         "[T5 proj, last-Llama-layer proj] plus each block's own Llama-layer projection appended before it and cut "
         "after it (single blocks run over [image, text, that block's llama rows]); image FFN a MoE: softmax gate, "
         "top-2 of 4 unsorted and unrenormalised, experts on argsorted gathered tokens scatter-summed back, plus a "
         "shared SwiGLU expert; SwiGLU widths rounded up to 256; final adaLN [shift, scale] + Linear; "
         "patches 2x2 of 4 channels (B, C, H, W) in and out")

if __name__ == "__main__":
    capture("hidream_i1_equal" if EQUAL_ROWS else "hidream_i1_wide" if WIDE else "hidream_i1", build, inputs, call, sys.argv[1], PRODUCER)
