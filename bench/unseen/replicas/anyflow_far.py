"""AnyFlow-FAR (the frame-autoregressive flow-map Wan2.1 DiT), reimplemented for torch 1.13 (no diffusers here),
captured small in f32 on CPU: the first chunk's denoising loop.

Follows huggingface/diffusers src/diffusers/models/transformers/transformer_anyflow_far.py at
1867e98f03c6ed9921609389469abb7f135bce8a (apply_rotary_emb, AnyFlowCausalAttnProcessor, AnyFlowCrossAttnProcessor,
AnyFlowAttention, AnyFlowDualTimestepTextImageEmbeddingCausal, AnyFlowTransformerBlock, AnyFlowCausalRotaryPosEmbed,
AnyFlowFARTransformer3DModel with its _forward_inference path) with the parts it imports: attention.py
(FeedForward "gelu-approximate", GELU), embeddings.py (Timesteps, TimestepEmbedding, PixArtAlphaTextProjection act_fn
"gelu_tanh", get_1d_rotary_pos_embed with use_real=False) and normalization.py (FP32LayerNorm, diffusers' RMSNorm):
the same module tree, parameter names and shapes, buffers and call boundaries; the arithmetic line for line.
Stand-ins for what torch 1.13 lacks: dispatch_attention_fn's flex backend with no block mask (SDPA's math on [B, H,
L, D], default scale: with no mask, flex attends every key), torch.compiler.is_compiling() (False), and the
processors' backend checks. The far_patch_embedding's trilinear warm start runs as upstream (every weight is redrawn
after).

The constructs it shows: the causal processor's inference path pads q, k and v with zero rows to a multiple of 128
and attends with no mask, so the padding keys (q·0 = 0 logits, zero values) take part in every softmax: here 32
tokens padded to 128, 96 zero keys per query; the KV cache read path (the first chunk reads zero cached rows: its
keys are its own); complex RoPE in f64 from a t/h/w table, the query's rows the last S of the table; a dual-timestep
(flow-map) embedding, rt = (1 − g)·time_embedder(sin t) + g·delta_embedder(sin r) with the gate g = 0.25 a
non-persistent buffer, then per-frame projections repeated over each frame's tokens (per-token modulation, [B, S, 6,
D]); the compressed-prefix branch computed on zero frames (empty tensors through the same embedders, as upstream);
rms_norm_across_heads q/k norms (diffusers' RMSNorm); FP32 LayerNorm modulation with f32 residual adds; latents
(B, F, C, H, W) in and out.

Pipeline (pipeline_anyflow_far.py at 04c8621e7b7b), one chunk: AnyFlowFARPipeline rolls the video out chunk by
chunk (chunk_partition), each chunk's denoising loop followed by a KV-cache prefill call on the clean chunk; the 3-step
loop here is the first chunk's loop only (chunk_partition [2, 2]: this_chunk_partition [2], two latent frames), so
no prefill call and no cache read with rows in it are captured. Per step: t = σ_i·1000 and r = σ_{i+1}·1000 repeated
over the chunk's frames ([B, F] float), the cache allocated once by the pipeline (zeros, full_chunk_limit ·
max(chunk) · tokens per frame rows), kv_cache_flag {num_cached_chunks: 0, is_cache_step: False}, guidance 1 (no
CFG: the released checkpoints fuse it), the output the flow-map velocity of the Euler step x + (σ_{i+1} − σ_i)·u.

usage: /usr/bin/python3 bench/unseen/replicas/anyflow_far.py OUTDIR
"""
import copy
import math
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

from parts import GELU, PixArtAlphaTextProjection, TimestepEmbedding, Timesteps
from run import SIGMAS, capture, sdpa


class RMSNorm(nn.Module):
    """diffusers.models.normalization.RMSNorm(dim, eps, elementwise_affine=True)."""

    def __init__(self, dim, eps, elementwise_affine=True):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim)) if elementwise_affine else None

    def forward(self, hidden_states):
        input_dtype = hidden_states.dtype
        variance = hidden_states.to(torch.float32).pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.eps)
        if self.weight is not None:
            if self.weight.dtype in [torch.float16, torch.bfloat16]:
                hidden_states = hidden_states.to(self.weight.dtype)
            hidden_states = hidden_states * self.weight
        else:
            hidden_states = hidden_states.to(input_dtype)
        return hidden_states


class FP32LayerNorm(nn.LayerNorm):
    def forward(self, inputs):
        origin_dtype = inputs.dtype
        return F.layer_norm(inputs.float(), self.normalized_shape,
                            self.weight.float() if self.weight is not None else None,
                            self.bias.float() if self.bias is not None else None, self.eps).to(origin_dtype)


class FeedForward(nn.Module):
    """attention.FeedForward(dim, inner_dim=ffn_dim, activation_fn="gelu-approximate")."""

    def __init__(self, dim, inner_dim, dropout=0.0, bias=True):
        super().__init__()
        self.net = nn.ModuleList([GELU(dim, inner_dim, approximate="tanh", bias=bias), nn.Dropout(dropout),
                                  nn.Linear(inner_dim, dim, bias=bias)])

    def forward(self, hidden_states):
        for module in self.net:
            hidden_states = module(hidden_states)
        return hidden_states


def get_1d_rotary_pos_embed(dim, pos, theta=10000.0, use_real=False, linear_factor=1.0, ntk_factor=1.0,
                            repeat_interleave_real=True, freqs_dtype=torch.float32):
    """embeddings.get_1d_rotary_pos_embed, its complex (use_real=False) branch."""
    assert dim % 2 == 0
    if isinstance(pos, int):
        pos = torch.arange(pos)
    theta = theta * ntk_factor
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=freqs_dtype, device=pos.device)[: (dim // 2)] / dim)) \
        / linear_factor
    freqs = torch.outer(pos, freqs)
    assert not use_real
    return torch.polar(torch.ones_like(freqs), freqs)


def apply_rotary_emb(hidden_states, freqs):
    x_rotated = torch.view_as_complex(hidden_states.to(torch.float64).unflatten(3, (-1, 2)))
    x_out = torch.view_as_real(x_rotated * freqs).flatten(3, 4)
    return x_out.type_as(hidden_states)


class AnyFlowCausalAttnProcessor:
    def __call__(self, attn, hidden_states, encoder_hidden_states=None, attention_mask=None, rotary_emb=None,
                 kv_cache=None, kv_cache_flag=None):
        if encoder_hidden_states is None:
            encoder_hidden_states = hidden_states
        query = attn.to_q(hidden_states)
        key = attn.to_k(encoder_hidden_states)
        value = attn.to_v(encoder_hidden_states)
        if attn.norm_q is not None:
            query = attn.norm_q(query)
        if attn.norm_k is not None:
            key = attn.norm_k(key)
        query = query.unflatten(2, (attn.heads, -1)).transpose(1, 2)
        key = key.unflatten(2, (attn.heads, -1)).transpose(1, 2)
        value = value.unflatten(2, (attn.heads, -1)).transpose(1, 2)
        if kv_cache is not None:
            if kv_cache_flag["is_cache_step"]:
                n_c, n_f = kv_cache_flag["num_compressed_tokens"], kv_cache_flag["num_full_tokens"]
                kv_cache["compressed_cache"][0, :, :, :n_c, :] = key[:, :, :n_c]
                kv_cache["compressed_cache"][1, :, :, :n_c, :] = value[:, :, :n_c]
                kv_cache["full_cache"][0, :, :, :n_f, :] = key[:, :, n_c:]
                kv_cache["full_cache"][1, :, :, :n_f, :] = value[:, :, n_c:]
            else:
                n_c, n_f = kv_cache_flag["num_cached_compressed_tokens"], kv_cache_flag["num_cached_full_tokens"]
                key = torch.cat([kv_cache["compressed_cache"][0, :, :, :n_c, :], kv_cache["full_cache"][0, :, :, :n_f, :],
                                 key], dim=2)
                value = torch.cat([kv_cache["compressed_cache"][1, :, :, :n_c, :],
                                   kv_cache["full_cache"][1, :, :, :n_f, :], value], dim=2)
        if rotary_emb is not None:
            query = apply_rotary_emb(query, rotary_emb["query"])
            key = apply_rotary_emb(key, rotary_emb["key"])
        seq_len = query.shape[2]
        head_dim = query.shape[3]
        padded_length = int(math.ceil(seq_len / 128.0) * 128.0 - seq_len)
        if padded_length > 0:
            pad_shape = [query.shape[0], query.shape[1], padded_length, head_dim]
            query = torch.cat([query, torch.zeros(pad_shape, device=query.device, dtype=query.dtype)], dim=2)
            key = torch.cat([key, torch.zeros(pad_shape, device=key.device, dtype=key.dtype)], dim=2)
            value = torch.cat([value, torch.zeros(pad_shape, device=value.device, dtype=value.dtype)], dim=2)
        head_pad = max(0, 16 - head_dim)
        scale = 1.0 / (head_dim ** 0.5) if head_pad > 0 else None
        if head_pad > 0:
            query = F.pad(query, (0, head_pad))
            key = F.pad(key, (0, head_pad))
            value = F.pad(value, (0, head_pad))
        # dispatch_attention_fn(flex, attn_mask=None) on [B, L, H, D]: every (padded) key attended
        hidden_states = sdpa(query, key, value, mask=attention_mask, scale=scale).transpose(1, 2)
        if head_pad > 0:
            hidden_states = hidden_states[..., :head_dim]
        if padded_length > 0:
            hidden_states = hidden_states[:, :seq_len, :, :]
        hidden_states = hidden_states.flatten(2, 3)
        hidden_states = hidden_states.type_as(query)
        hidden_states = attn.to_out[0](hidden_states)
        hidden_states = attn.to_out[1](hidden_states)
        return hidden_states


class AnyFlowCrossAttnProcessor:
    def __call__(self, attn, hidden_states, encoder_hidden_states=None, attention_mask=None):
        query = attn.to_q(hidden_states)
        key = attn.to_k(encoder_hidden_states)
        value = attn.to_v(encoder_hidden_states)
        if attn.norm_q is not None:
            query = attn.norm_q(query)
        if attn.norm_k is not None:
            key = attn.norm_k(key)
        query = query.unflatten(2, (attn.heads, -1))
        key = key.unflatten(2, (attn.heads, -1))
        value = value.unflatten(2, (attn.heads, -1))
        hidden_states = sdpa(query.transpose(1, 2), key.transpose(1, 2), value.transpose(1, 2),
                             mask=attention_mask).transpose(1, 2)
        hidden_states = hidden_states.flatten(2, 3)
        hidden_states = hidden_states.type_as(query)
        hidden_states = attn.to_out[0](hidden_states)
        hidden_states = attn.to_out[1](hidden_states)
        return hidden_states


class AnyFlowAttention(nn.Module):
    def __init__(self, dim, heads, dim_head, eps=1e-6, processor=None):
        super().__init__()
        self.heads = heads
        self.inner_dim = heads * dim_head
        self.to_q = nn.Linear(dim, self.inner_dim, bias=True)
        self.to_k = nn.Linear(dim, self.inner_dim, bias=True)
        self.to_v = nn.Linear(dim, self.inner_dim, bias=True)
        self.to_out = nn.ModuleList([nn.Linear(self.inner_dim, dim, bias=True), nn.Dropout(0.0)])
        self.norm_q = RMSNorm(self.inner_dim, eps=eps)
        self.norm_k = RMSNorm(self.inner_dim, eps=eps)
        self.processor = processor if processor is not None else AnyFlowCausalAttnProcessor()

    def forward(self, hidden_states, **kwargs):
        return self.processor(self, hidden_states, **kwargs)


class AnyFlowDualTimestepTextImageEmbeddingCausal(nn.Module):
    def __init__(self, dim, gate_value, deltatime_type, time_freq_dim, time_proj_dim, text_embed_dim,
                 image_embed_dim=None):
        super().__init__()
        self.timesteps_proj = Timesteps(num_channels=time_freq_dim, flip_sin_to_cos=True, downscale_freq_shift=0)
        self.time_embedder = TimestepEmbedding(in_channels=time_freq_dim, time_embed_dim=dim)
        self.delta_embedder = TimestepEmbedding(in_channels=time_freq_dim, time_embed_dim=dim)
        self.act_fn = nn.SiLU()
        self.time_proj = nn.Linear(dim, time_proj_dim)
        self.text_embedder = PixArtAlphaTextProjection(text_embed_dim, dim)
        assert image_embed_dim is None
        self.image_embedder = None
        self.register_buffer("delta_emb_gate", torch.tensor([gate_value], dtype=torch.float32), persistent=False)
        self.deltatime_type = deltatime_type

    def forward_timestep(self, timestep, delta_timestep, encoder_hidden_states, token_per_frame):
        batch_size, num_frames = timestep.shape
        timestep = timestep.reshape(-1)
        delta_timestep = delta_timestep.reshape(-1)
        timestep = self.timesteps_proj(timestep)
        time_embedder_dtype = next(iter(self.time_embedder.parameters())).dtype
        if timestep.dtype != time_embedder_dtype and time_embedder_dtype != torch.int8:
            timestep = timestep.to(time_embedder_dtype)
        temb = self.time_embedder(timestep).type_as(encoder_hidden_states)
        delta_timestep = self.timesteps_proj(delta_timestep)
        delta_embedder_dtype = next(iter(self.delta_embedder.parameters())).dtype
        if delta_timestep.dtype != delta_embedder_dtype and delta_embedder_dtype != torch.int8:
            delta_timestep = delta_timestep.to(delta_embedder_dtype)
        delta_emb = self.delta_embedder(delta_timestep).type_as(encoder_hidden_states)
        gate = self.delta_emb_gate.to(delta_embedder_dtype)
        rt_emb = (1 - gate) * temb + gate * delta_emb
        timestep_proj = self.time_proj(self.act_fn(rt_emb))
        rt_emb = rt_emb.unflatten(0, (batch_size, num_frames)).repeat_interleave(token_per_frame, dim=1)
        timestep_proj = timestep_proj.unflatten(0, (batch_size, num_frames)).repeat_interleave(token_per_frame, dim=1)
        return rt_emb, timestep_proj

    def forward(self, timestep, r_timestep, encoder_hidden_states, encoder_hidden_states_image=None, far_cfg=None,
                clean_timestep=None):
        if self.deltatime_type == "r":
            delta_timestep = r_timestep
        elif self.deltatime_type == "t-r":
            delta_timestep = timestep - r_timestep
        else:
            raise NotImplementedError
        full_frame_timestep, full_frame_timestep_proj = self.forward_timestep(
            timestep[:, -far_cfg["num_full_frames"]:], delta_timestep[:, -far_cfg["num_full_frames"]:],
            encoder_hidden_states, far_cfg["full_token_per_frame"])
        compressed_frame_timestep, compressed_frame_timestep_proj = self.forward_timestep(
            timestep[:, : -far_cfg["num_full_frames"]], delta_timestep[:, : -far_cfg["num_full_frames"]],
            encoder_hidden_states, far_cfg["compressed_token_per_frame"])
        assert clean_timestep is None
        timestep = torch.cat([compressed_frame_timestep, full_frame_timestep], dim=1)
        timestep_proj = torch.cat([compressed_frame_timestep_proj, full_frame_timestep_proj], dim=1)
        encoder_hidden_states = self.text_embedder(encoder_hidden_states)
        return timestep, timestep_proj, encoder_hidden_states, encoder_hidden_states_image


class AnyFlowTransformerBlock(nn.Module):
    def __init__(self, dim, ffn_dim, num_heads, cross_attn_norm=False, eps=1e-6, is_causal=False):
        super().__init__()
        self.is_causal = is_causal
        assert is_causal
        self.norm1 = FP32LayerNorm(dim, eps, elementwise_affine=False)
        self.attn1 = AnyFlowAttention(dim=dim, heads=num_heads, dim_head=dim // num_heads, eps=eps,
                                      processor=AnyFlowCausalAttnProcessor())
        self.attn2 = AnyFlowAttention(dim=dim, heads=num_heads, dim_head=dim // num_heads, eps=eps,
                                      processor=AnyFlowCrossAttnProcessor())
        self.norm2 = FP32LayerNorm(dim, eps, elementwise_affine=True) if cross_attn_norm else nn.Identity()
        self.ffn = FeedForward(dim, inner_dim=ffn_dim)
        self.norm3 = FP32LayerNorm(dim, eps, elementwise_affine=False)
        self.scale_shift_table = nn.Parameter(torch.randn(1, 6, dim) / dim ** 0.5)

    def forward(self, hidden_states, encoder_hidden_states, temb, rotary_emb, attention_mask, kv_cache=None,
                kv_cache_flag=None):
        shift_msa, scale_msa, gate_msa, c_shift_msa, c_scale_msa, c_gate_msa = (
            self.scale_shift_table + temb.float()).chunk(6, dim=2)
        shift_msa, scale_msa, gate_msa, c_shift_msa, c_scale_msa, c_gate_msa = (
            shift_msa.squeeze(2), scale_msa.squeeze(2), gate_msa.squeeze(2), c_shift_msa.squeeze(2),
            c_scale_msa.squeeze(2), c_gate_msa.squeeze(2))
        norm_hidden_states = (self.norm1(hidden_states.float()) * (1 + scale_msa) + shift_msa).type_as(hidden_states)
        attn1_kwargs = {"hidden_states": norm_hidden_states, "rotary_emb": rotary_emb,
                        "attention_mask": attention_mask}
        if kv_cache is not None:
            attn1_kwargs["kv_cache"] = kv_cache
            attn1_kwargs["kv_cache_flag"] = kv_cache_flag
        attn_output = self.attn1(**attn1_kwargs)
        hidden_states = (hidden_states.float() + attn_output * gate_msa).type_as(hidden_states)
        norm_hidden_states = self.norm2(hidden_states.float()).type_as(hidden_states)
        attn_output = self.attn2(hidden_states=norm_hidden_states, encoder_hidden_states=encoder_hidden_states)
        hidden_states = hidden_states + attn_output
        norm_hidden_states = (self.norm3(hidden_states.float()) * (1 + c_scale_msa) + c_shift_msa).type_as(
            hidden_states)
        ff_output = self.ffn(norm_hidden_states)
        hidden_states = (hidden_states.float() + ff_output.float() * c_gate_msa).type_as(hidden_states)
        return hidden_states


class AnyFlowCausalRotaryPosEmbed(nn.Module):
    def __init__(self, attention_head_dim, patch_size, compressed_patch_size, max_seq_len, theta=10000.0):
        super().__init__()
        self.attention_head_dim = attention_head_dim
        self.patch_size = patch_size
        self.compressed_patch_size = compressed_patch_size
        self.max_seq_len = max_seq_len
        self.theta = theta
        self._freqs_cache = None

    def _build_freqs(self, device):
        is_compiling = False  # torch.compiler.is_compiling(), which torch 1.13 lacks
        cache_key = (device.type, str(device))
        if not is_compiling and self._freqs_cache is not None and self._freqs_cache[0] == cache_key:
            return self._freqs_cache[1]
        freqs_dtype = torch.float64
        h_dim = w_dim = 2 * (self.attention_head_dim // 6)
        t_dim = self.attention_head_dim - h_dim - w_dim
        freqs_list = []
        for dim in (t_dim, h_dim, w_dim):
            f = get_1d_rotary_pos_embed(dim, self.max_seq_len, self.theta, use_real=False,
                                        repeat_interleave_real=False, freqs_dtype=freqs_dtype)
            freqs_list.append(f.to(device))
        freqs = torch.cat(freqs_list, dim=1)
        if not is_compiling:
            self._freqs_cache = (cache_key, freqs)
        return freqs

    def avg_pool_complex(self, freq, kernel_size, stride):
        real = freq.real
        real = real.transpose(0, 1).unsqueeze(0)
        imag = freq.imag
        imag = imag.transpose(0, 1).unsqueeze(0)
        pr = F.avg_pool1d(real, kernel_size, stride)
        pi = F.avg_pool1d(imag, kernel_size, stride)
        pr = pr.squeeze(0).transpose(0, 1)
        pi = pi.squeeze(0).transpose(0, 1)
        norm = torch.sqrt(pr ** 2 + pi ** 2)
        pr_unit = pr / norm
        pi_unit = pi / norm
        return torch.complex(pr_unit, pi_unit)

    def _split(self, freqs_full):
        return freqs_full.split_with_sizes([self.attention_head_dim // 2 - 2 * (self.attention_head_dim // 6),
                                            self.attention_head_dim // 6, self.attention_head_dim // 6], dim=1)

    def _forward_compressed_frame(self, num_frames, height, width, device):
        ppf, pph, ppw = num_frames, height, width
        freqs_full = self._build_freqs(device)
        if min(ppf, pph, ppw) <= 0:
            freq_channels = self.attention_head_dim // 2
            return torch.empty((ppf, pph, ppw, freq_channels), dtype=freqs_full.dtype, device=device)
        downscale = [self.compressed_patch_size[i] // self.patch_size[i] for i in range(len(self.patch_size))]
        freqs = self._split(freqs_full)
        freqs_f = self.avg_pool_complex(freqs[0], kernel_size=downscale[0], stride=downscale[0])
        freqs_h = self.avg_pool_complex(freqs[1], kernel_size=downscale[1], stride=downscale[1])
        freqs_w = self.avg_pool_complex(freqs[2], kernel_size=downscale[2], stride=downscale[2])
        freqs_f = freqs_f[:ppf].view(ppf, 1, 1, -1).expand(ppf, pph, ppw, -1)
        freqs_h = freqs_h[:pph].view(1, pph, 1, -1).expand(ppf, pph, ppw, -1)
        freqs_w = freqs_w[:ppw].view(1, 1, ppw, -1).expand(ppf, pph, ppw, -1)
        return torch.cat([freqs_f, freqs_h, freqs_w], dim=-1)

    def _forward_full_frame(self, num_frames, height, width, device):
        ppf, pph, ppw = num_frames, height, width
        freqs_full = self._build_freqs(device)
        if min(ppf, pph, ppw) <= 0:
            freq_channels = self.attention_head_dim // 2
            return torch.empty((ppf, pph, ppw, freq_channels), dtype=freqs_full.dtype, device=device)
        freqs = self._split(freqs_full)
        freqs_f = freqs[0][:ppf].view(ppf, 1, 1, -1).expand(ppf, pph, ppw, -1)
        freqs_h = freqs[1][:pph].view(1, pph, 1, -1).expand(ppf, pph, ppw, -1)
        freqs_w = freqs[2][:ppw].view(1, 1, ppw, -1).expand(ppf, pph, ppw, -1)
        return torch.cat([freqs_f, freqs_h, freqs_w], dim=-1)

    def forward(self, far_cfg, device, clean_hidden_states=None):
        full_frame_freqs = self._forward_full_frame(num_frames=far_cfg["total_frames"],
                                                    height=far_cfg["full_frame_shape"][0],
                                                    width=far_cfg["full_frame_shape"][1], device=device)
        compressed_frame_freqs = self._forward_compressed_frame(num_frames=far_cfg["total_frames"],
                                                                height=far_cfg["compressed_frame_shape"][0],
                                                                width=far_cfg["compressed_frame_shape"][1],
                                                                device=device)
        compressed_frame_freqs, full_frame_freqs = (compressed_frame_freqs[: far_cfg["num_compressed_frames"]],
                                                    full_frame_freqs[far_cfg["num_compressed_frames"]:])
        compressed_frame_freqs = compressed_frame_freqs.flatten(start_dim=0, end_dim=2)
        full_frame_freqs = full_frame_freqs.flatten(start_dim=0, end_dim=2)
        if clean_hidden_states is not None:
            freqs = torch.cat([compressed_frame_freqs, full_frame_freqs, full_frame_freqs], dim=0)
        else:
            freqs = torch.cat([compressed_frame_freqs, full_frame_freqs], dim=0)
        freqs = freqs[None, None, ...]
        return {"query": freqs, "key": freqs}


class AnyFlowFARTransformer3DModel(nn.Module):
    _keep_in_fp32_modules = ["time_embedder", "scale_shift_table", "norm1", "norm2", "norm3"]

    def __init__(self, patch_size=(1, 2, 2), compressed_patch_size=(1, 4, 4), full_chunk_limit=3,
                 num_attention_heads=40, attention_head_dim=128, in_channels=16, out_channels=16, text_dim=4096,
                 freq_dim=256, ffn_dim=13824, num_layers=40, cross_attn_norm=True, eps=1e-6, image_dim=None,
                 rope_max_seq_len=1024, gate_value=0.25, deltatime_type="r", chunk_partition=(1, 3, 3, 3, 3, 3, 3, 2)):
        super().__init__()
        self.config = dict(patch_size=patch_size, compressed_patch_size=compressed_patch_size,
                           full_chunk_limit=full_chunk_limit, num_attention_heads=num_attention_heads,
                           attention_head_dim=attention_head_dim, num_layers=num_layers)
        inner_dim = num_attention_heads * attention_head_dim
        out_channels = out_channels or in_channels
        self.rope = AnyFlowCausalRotaryPosEmbed(attention_head_dim, patch_size, compressed_patch_size,
                                                rope_max_seq_len)
        self.patch_embedding = nn.Conv3d(in_channels, inner_dim, kernel_size=patch_size, stride=patch_size)
        self.far_patch_embedding = nn.Conv3d(in_channels, inner_dim, kernel_size=compressed_patch_size,
                                             stride=compressed_patch_size)
        original_weight = self.patch_embedding.weight.data.view(-1, 1, *patch_size)
        new_weight = F.interpolate(original_weight, size=compressed_patch_size, mode="trilinear", align_corners=False)
        new_weight = new_weight.view(inner_dim, in_channels, *compressed_patch_size)
        with torch.no_grad():
            self.far_patch_embedding.weight.copy_(new_weight)
            self.far_patch_embedding.bias.copy_(self.patch_embedding.bias)
        self.condition_embedder = AnyFlowDualTimestepTextImageEmbeddingCausal(
            dim=inner_dim, gate_value=gate_value, deltatime_type=deltatime_type, time_freq_dim=freq_dim,
            time_proj_dim=inner_dim * 6, text_embed_dim=text_dim, image_embed_dim=image_dim)
        self.blocks = nn.ModuleList([
            AnyFlowTransformerBlock(inner_dim, ffn_dim, num_attention_heads, cross_attn_norm, eps, is_causal=True)
            for _ in range(num_layers)])
        self.norm_out = FP32LayerNorm(inner_dim, eps, elementwise_affine=False)
        self.proj_out = nn.Linear(inner_dim, out_channels * math.prod(patch_size))
        self.scale_shift_table = nn.Parameter(torch.randn(1, 2, inner_dim) / inner_dim ** 0.5)

    def forward(self, hidden_states, timestep, r_timestep, encoder_hidden_states, chunk_partition,
                encoder_hidden_states_image=None, clean_hidden_states=None, clean_timestep=None, kv_cache=None,
                kv_cache_flag=None, attention_mask=None, attention_kwargs=None, return_dict=True):
        if kv_cache is None or kv_cache_flag.get("is_cache_step"):
            raise NotImplementedError("only the autoregressive inference path is replicated (see the docstring)")
        return self._forward_inference(hidden_states=hidden_states, chunk_partition=chunk_partition,
                                       timestep=timestep, r_timestep=r_timestep,
                                       encoder_hidden_states=encoder_hidden_states,
                                       encoder_hidden_states_image=encoder_hidden_states_image,
                                       return_dict=return_dict, kv_cache=kv_cache, kv_cache_flag=kv_cache_flag)

    def _unpack_latent_sequence(self, latents, num_frames, height, width, patch_size):
        batch_size, num_patches, channels = latents.shape
        height, width = height // patch_size, width // patch_size
        latents = latents.view(batch_size * num_frames, height, width, patch_size, patch_size,
                               channels // (patch_size * patch_size))
        latents = latents.permute(0, 5, 1, 3, 2, 4)
        latents = latents.reshape(batch_size, num_frames, channels // (patch_size * patch_size),
                                  height * patch_size, width * patch_size)
        return latents

    def _forward_far_patchify_inference(self, hidden_states):
        return self.patch_embedding(hidden_states).flatten(start_dim=2, end_dim=4).transpose(1, 2)

    def _forward_inference(self, hidden_states, chunk_partition, timestep, r_timestep, encoder_hidden_states,
                           encoder_hidden_states_image=None, return_dict=True, kv_cache=None, kv_cache_flag=None):
        cfg = self.config
        hidden_states = hidden_states.permute(0, 2, 1, 3, 4)
        batch_size, num_channels, num_frames, height, width = hidden_states.shape
        full_token_per_frame = (height // cfg["patch_size"][1]) * (width // cfg["patch_size"][2])
        compressed_token_per_frame = (height // cfg["compressed_patch_size"][1]) * (
            width // cfg["compressed_patch_size"][2])
        total_chunks = 1 + kv_cache_flag["num_cached_chunks"]
        if total_chunks >= cfg["full_chunk_limit"]:
            num_full_chunk, num_compressed_chunk = cfg["full_chunk_limit"], total_chunks - cfg["full_chunk_limit"]
        else:
            num_full_chunk, num_compressed_chunk = total_chunks, 0
        kv_cache_flag["num_cached_full_tokens"] = (
            sum(chunk_partition[num_compressed_chunk: num_compressed_chunk + (num_full_chunk - 1)])
            * full_token_per_frame)
        kv_cache_flag["num_cached_compressed_tokens"] = (
            sum(chunk_partition[:num_compressed_chunk]) * compressed_token_per_frame)
        far_cfg = {
            "total_frames": sum(chunk_partition),
            "num_full_frames": sum(chunk_partition[num_compressed_chunk:]),
            "num_compressed_frames": sum(chunk_partition[:num_compressed_chunk]),
            "full_frame_shape": (height // cfg["patch_size"][1], width // cfg["patch_size"][2]),
            "compressed_frame_shape": (height // cfg["compressed_patch_size"][1],
                                       width // cfg["compressed_patch_size"][2]),
            "full_token_per_frame": full_token_per_frame,
            "compressed_token_per_frame": compressed_token_per_frame,
        }
        attention_mask = None
        hidden_states = self._forward_far_patchify_inference(hidden_states)
        rotary_emb = self.rope(far_cfg=far_cfg, device=hidden_states.device)
        rotary_emb["query"] = rotary_emb["query"][:, :, -hidden_states.shape[1]:]
        temb, timestep_proj, encoder_hidden_states, encoder_hidden_states_image = self.condition_embedder(
            timestep, r_timestep, encoder_hidden_states, encoder_hidden_states_image, far_cfg=far_cfg)
        timestep_proj = timestep_proj.unflatten(2, (6, -1))
        if encoder_hidden_states_image is not None:
            encoder_hidden_states = torch.concat([encoder_hidden_states_image, encoder_hidden_states], dim=1)
        for index_block, block in enumerate(self.blocks):
            hidden_states = block(hidden_states, encoder_hidden_states, timestep_proj, rotary_emb, attention_mask,
                                  kv_cache[index_block], kv_cache_flag)
        shift, scale = (self.scale_shift_table + temb.unsqueeze(2)).chunk(2, dim=2)
        shift, scale = shift.squeeze(2), scale.squeeze(2)
        hidden_states = (self.norm_out(hidden_states.float()) * (1 + scale) + shift).type_as(hidden_states)
        output = self.proj_out(hidden_states)
        output = self._unpack_latent_sequence(output, num_frames=chunk_partition[-1], height=height, width=width,
                                              patch_size=cfg["patch_size"][1])
        return output, kv_cache


CHUNK_PARTITION = [2, 2]


def build():
    # 2 heads of 16 (RoPE t/h/w 8/4/4 channels; no head-dim pad, which starts below 16), 2 blocks, text 16 wide,
    # sinusoid 16 wide, FFN 64, 4 latent channels, patch 1x2x2 (compressed 1x4x4, unused by the first chunk).
    return AnyFlowFARTransformer3DModel(patch_size=(1, 2, 2), compressed_patch_size=(1, 4, 4), full_chunk_limit=3,
                                        num_attention_heads=2, attention_head_dim=16, in_channels=4, out_channels=4,
                                        text_dim=16, freq_dim=16, ffn_dim=64, num_layers=2, cross_attn_norm=True,
                                        eps=1e-6, rope_max_seq_len=32, gate_value=0.25, deltatime_type="r",
                                        chunk_partition=tuple(CHUNK_PARTITION))


def inputs(g):
    # the first chunk's latents in the FAR layout (B, F, C, H, W): 2 frames of 8x8 (16 tokens each, 32 in all)
    return {"encoder_hidden_states": torch.randn((1, 6, 16), generator=g),
            "noise": torch.randn((1, CHUNK_PARTITION[0], 4, 8, 8), generator=g)}


_KV = {}


def _kv_cache(model, x):
    """The pipeline's cache, allocated once before the chunks (zeros), reused by every call."""
    if "cache" not in _KV:
        cfg = model.config
        tokens = (x.shape[3] // cfg["patch_size"][1]) * (x.shape[4] // cfg["patch_size"][2])
        ctokens = (x.shape[3] // cfg["compressed_patch_size"][1]) * (x.shape[4] // cfg["compressed_patch_size"][2])
        shape = lambda rows: (2, x.shape[0], cfg["num_attention_heads"], rows, cfg["attention_head_dim"])  # noqa: E731
        _KV["cache"] = {i: {"full_cache": torch.zeros(shape(cfg["full_chunk_limit"] * max(CHUNK_PARTITION) * tokens),
                                                      dtype=x.dtype, device=x.device),
                            "compressed_cache": torch.zeros(
                                shape((len(CHUNK_PARTITION) - cfg["full_chunk_limit"] + 1) * max(CHUNK_PARTITION)
                                      * ctokens), dtype=x.dtype, device=x.device)}
                        for i in range(cfg["num_layers"])}
    return _KV["cache"]


def call(model, x, sigma, c):
    i = SIGMAS.index(sigma)
    t = torch.tensor(sigma * 1000, dtype=torch.float32)
    r = torch.tensor(SIGMAS[i + 1], dtype=torch.float32) * 1000
    timestep = t.expand(x.shape[0]).unsqueeze(-1).repeat((1, x.shape[1]))
    r_timestep = r.expand(x.shape[0]).unsqueeze(-1).repeat((1, x.shape[1]))
    flag = {"num_cached_chunks": 0, "is_cache_step": False}
    out, _ = model(hidden_states=x, timestep=timestep, r_timestep=r_timestep,
                   encoder_hidden_states=c["encoder_hidden_states"], attention_kwargs=None, return_dict=False,
                   chunk_partition=CHUNK_PARTITION[:1], kv_cache=_kv_cache(model, x), kv_cache_flag=copy.deepcopy(flag))
    return out


PRODUCER = dict(
    library_source="replica of huggingface/diffusers transformer_anyflow_far.py@1867e98f03c6 and the parts it "
                   "imports (torch 1.13)",
    timestep="t = sigma_i*1000 and r = sigma_{i+1}*1000 per frame, [B, F] float32",
    velocity="model output as is (the flow-map mean velocity), not negated; latents (B, F, C, H, W)",
    note="AnyFlow-FAR, 2 blocks, the first chunk's loop (inference path, KV cache read with zero cached rows): "
         "q/k/v padded with zero rows to 128 and attended with no mask (96 zero keys in every softmax); complex f64 "
         "RoPE; dual-timestep embedding (1-g)*time(t) + g*delta(r), g = 0.25; per-token modulation; the empty "
         "compressed-prefix branch run through the embedders; rms_norm_across_heads q/k; FP32 LayerNorm modulation")

if __name__ == "__main__":
    capture("anyflow_far", build, inputs, call, sys.argv[1], PRODUCER)
