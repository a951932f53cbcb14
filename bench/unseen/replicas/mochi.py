"""Genmo Mochi-1 video DiT, reimplemented for torch 1.13 (no diffusers here), captured small in f32 on CPU.

Follows huggingface/diffusers src/diffusers/models/transformers/transformer_mochi.py at
03002a9141f2b42197a7210d60e8801d0d4f628e (MochiTransformer3DModel, MochiTransformerBlock, MochiAttention,
MochiModulatedRMSNorm, MochiLayerNormContinuous, MochiRMSNormZero, MochiRoPE) with the parts it imports:
embeddings.py (MochiCombinedTimestepCaptionEmbedding, MochiAttentionPool, Timesteps, TimestepEmbedding, PatchEmbed
with pos_embed_type None), attention.py (FeedForward "swiglu", bias-free), normalization.py
(AdaLayerNormContinuous "layer_norm") and attention_processor.py's MochiAttnProcessor2_0 (per sample: the video
tokens joined with the caption tokens whose mask is set, attention, the output padded back to the full length):
the same module tree, parameter names and shapes, and call boundaries; the arithmetic line for line. The caption
mask reaches the processor as diffusers' later plumbing passes it (the model's encoder_attention_mask given to
every block as the attention mask; the file at that commit names it joint_attention_mask). Stand-ins for what
torch 1.13 lacks: F.scaled_dot_product_attention (its math, default scale, boolean mask) and torch.autocast
("cuda", enabled=False) around the RoPE einsum (a no-op on CPU).

Pipeline as MochiPipeline calls it (bench/unseen/capture_dit.py's mochi case, --small sizes): timestep
(1 - sigma) * 1000 float32 (inverted sigmas: Mochi's t = 0 is noise), velocity the negated output.

usage: /usr/bin/python3 bench/unseen/replicas/mochi.py OUTDIR
"""
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

from run import capture, get_timestep_embedding, sdpa


class Timesteps(nn.Module):
    def __init__(self, num_channels, flip_sin_to_cos, downscale_freq_shift, scale=1):
        super().__init__()
        self.num_channels, self.flip_sin_to_cos = num_channels, flip_sin_to_cos
        self.downscale_freq_shift, self.scale = downscale_freq_shift, scale

    def forward(self, timesteps):
        return get_timestep_embedding(timesteps, self.num_channels, flip_sin_to_cos=self.flip_sin_to_cos,
                                      downscale_freq_shift=self.downscale_freq_shift, scale=self.scale)


class TimestepEmbedding(nn.Module):
    def __init__(self, in_channels, time_embed_dim, sample_proj_bias=True):
        super().__init__()
        self.linear_1 = nn.Linear(in_channels, time_embed_dim, sample_proj_bias)
        self.act = nn.SiLU()
        self.linear_2 = nn.Linear(time_embed_dim, time_embed_dim, sample_proj_bias)

    def forward(self, sample):
        return self.linear_2(self.act(self.linear_1(sample)))


class MochiAttentionPool(nn.Module):
    def __init__(self, num_attention_heads, embed_dim, output_dim=None):
        super().__init__()
        self.output_dim = output_dim or embed_dim
        self.num_attention_heads = num_attention_heads
        self.to_kv = nn.Linear(embed_dim, 2 * embed_dim)
        self.to_q = nn.Linear(embed_dim, embed_dim)
        self.to_out = nn.Linear(embed_dim, self.output_dim)

    @staticmethod
    def pool_tokens(x, mask, *, keepdim=False):
        assert x.size(1) == mask.size(1)
        assert x.size(0) == mask.size(0)
        mask = mask[:, :, None].to(dtype=x.dtype)
        mask = mask / mask.sum(dim=1, keepdim=True).clamp(min=1)
        pooled = (x * mask).sum(dim=1, keepdim=keepdim)
        return pooled

    def forward(self, x, mask):
        D = x.size(2)
        attn_mask = mask[:, None, None, :].bool()
        attn_mask = F.pad(attn_mask, (1, 0), value=True)
        x_pool = self.pool_tokens(x, mask, keepdim=True)
        x = torch.cat([x_pool, x], dim=1)
        kv = self.to_kv(x)
        q = self.to_q(x[:, 0])
        head_dim = D // self.num_attention_heads
        kv = kv.unflatten(2, (2, self.num_attention_heads, head_dim))
        kv = kv.transpose(1, 3)
        k, v = kv.unbind(2)
        q = q.unflatten(1, (self.num_attention_heads, head_dim))
        q = q.unsqueeze(2)
        x = sdpa(q, k, v, mask=attn_mask)
        x = x.squeeze(2).flatten(1, 2)
        x = self.to_out(x)
        return x


class MochiCombinedTimestepCaptionEmbedding(nn.Module):
    def __init__(self, embedding_dim, pooled_projection_dim, text_embed_dim, time_embed_dim=256,
                 num_attention_heads=8):
        super().__init__()
        self.time_proj = Timesteps(num_channels=time_embed_dim, flip_sin_to_cos=True, downscale_freq_shift=0.0)
        self.timestep_embedder = TimestepEmbedding(in_channels=time_embed_dim, time_embed_dim=embedding_dim)
        self.pooler = MochiAttentionPool(num_attention_heads=num_attention_heads, embed_dim=text_embed_dim,
                                         output_dim=embedding_dim)
        self.caption_proj = nn.Linear(text_embed_dim, pooled_projection_dim)

    def forward(self, timestep, encoder_hidden_states, encoder_attention_mask, hidden_dtype=None):
        time_proj = self.time_proj(timestep)
        time_emb = self.timestep_embedder(time_proj.to(dtype=hidden_dtype))
        pooled_projections = self.pooler(encoder_hidden_states, encoder_attention_mask)
        caption_proj = self.caption_proj(encoder_hidden_states)
        conditioning = time_emb + pooled_projections
        return conditioning, caption_proj


class PatchEmbed(nn.Module):
    """embeddings.PatchEmbed(patch_size, in_channels, embed_dim, pos_embed_type=None): conv, flatten, no norm."""

    def __init__(self, patch_size=16, in_channels=3, embed_dim=768, bias=True):
        super().__init__()
        self.proj = nn.Conv2d(in_channels, embed_dim, kernel_size=(patch_size, patch_size), stride=patch_size,
                              bias=bias)

    def forward(self, latent):
        latent = self.proj(latent)
        latent = latent.flatten(2).transpose(1, 2)
        return latent


class SwiGLU(nn.Module):
    def __init__(self, dim_in, dim_out, bias=True):
        super().__init__()
        self.proj = nn.Linear(dim_in, dim_out * 2, bias=bias)
        self.activation = nn.SiLU()

    def forward(self, hidden_states):
        hidden_states = self.proj(hidden_states)
        hidden_states, gate = hidden_states.chunk(2, dim=-1)
        return hidden_states * self.activation(gate)


class FeedForward(nn.Module):
    """attention.FeedForward(dim, inner_dim=..., activation_fn "swiglu", bias False)."""

    def __init__(self, dim, dim_out=None, inner_dim=None, dropout=0.0, bias=True):
        super().__init__()
        dim_out = dim_out if dim_out is not None else dim
        self.net = nn.ModuleList([SwiGLU(dim, inner_dim, bias=bias), nn.Dropout(dropout),
                                  nn.Linear(inner_dim, dim_out, bias=bias)])

    def forward(self, hidden_states):
        for module in self.net:
            hidden_states = module(hidden_states)
        return hidden_states


class AdaLayerNormContinuous(nn.Module):
    def __init__(self, embedding_dim, conditioning_embedding_dim, elementwise_affine=True, eps=1e-5, bias=True):
        super().__init__()
        self.silu = nn.SiLU()
        self.linear = nn.Linear(conditioning_embedding_dim, embedding_dim * 2, bias=bias)
        self.norm = nn.LayerNorm(embedding_dim, eps, elementwise_affine)

    def forward(self, x, conditioning_embedding):
        emb = self.linear(self.silu(conditioning_embedding).to(x.dtype))
        scale, shift = torch.chunk(emb, 2, dim=1)
        return self.norm(x) * (1 + scale)[:, None, :] + shift[:, None, :]


class MochiModulatedRMSNorm(nn.Module):
    def __init__(self, eps):
        super().__init__()
        self.eps = eps

    def forward(self, hidden_states, scale=None):
        hidden_states_dtype = hidden_states.dtype
        variance = hidden_states.to(torch.float32).pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states.to(torch.float32) * torch.rsqrt(variance + self.eps)
        if scale is not None:
            hidden_states = hidden_states * scale
        hidden_states = hidden_states.to(hidden_states_dtype)
        return hidden_states


class MochiLayerNormContinuous(nn.Module):
    def __init__(self, embedding_dim, conditioning_embedding_dim, eps=1e-5, bias=True):
        super().__init__()
        self.silu = nn.SiLU()
        self.linear_1 = nn.Linear(conditioning_embedding_dim, embedding_dim, bias=bias)
        self.norm = MochiModulatedRMSNorm(eps=eps)

    def forward(self, x, conditioning_embedding):
        input_dtype = x.dtype
        scale = self.linear_1(self.silu(conditioning_embedding).to(x.dtype))
        x = self.norm(x, (1 + scale.unsqueeze(1).to(torch.float32)))
        return x.to(input_dtype)


class MochiRMSNormZero(nn.Module):
    def __init__(self, embedding_dim, hidden_dim, eps=1e-5, elementwise_affine=False):
        super().__init__()
        self.silu = nn.SiLU()
        self.linear = nn.Linear(embedding_dim, hidden_dim)
        self.norm = MochiModulatedRMSNorm(eps=eps)

    def forward(self, hidden_states, emb):
        hidden_states_dtype = hidden_states.dtype
        emb = self.linear(self.silu(emb))
        scale_msa, gate_msa, scale_mlp, gate_mlp = emb.chunk(4, dim=1)
        hidden_states = self.norm(hidden_states, (1 + scale_msa[:, None].to(torch.float32)))
        hidden_states = hidden_states.to(hidden_states_dtype)
        return hidden_states, gate_msa, scale_mlp, gate_mlp


class MochiAttnProcessor2_0:
    """Attention processor used in Mochi (per-sample valid caption tokens)."""

    def __call__(self, attn, hidden_states, encoder_hidden_states, attention_mask, image_rotary_emb=None):
        query = attn.to_q(hidden_states)
        key = attn.to_k(hidden_states)
        value = attn.to_v(hidden_states)

        query = query.unflatten(2, (attn.heads, -1))
        key = key.unflatten(2, (attn.heads, -1))
        value = value.unflatten(2, (attn.heads, -1))

        if attn.norm_q is not None:
            query = attn.norm_q(query)
        if attn.norm_k is not None:
            key = attn.norm_k(key)

        encoder_query = attn.add_q_proj(encoder_hidden_states)
        encoder_key = attn.add_k_proj(encoder_hidden_states)
        encoder_value = attn.add_v_proj(encoder_hidden_states)

        encoder_query = encoder_query.unflatten(2, (attn.heads, -1))
        encoder_key = encoder_key.unflatten(2, (attn.heads, -1))
        encoder_value = encoder_value.unflatten(2, (attn.heads, -1))

        if attn.norm_added_q is not None:
            encoder_query = attn.norm_added_q(encoder_query)
        if attn.norm_added_k is not None:
            encoder_key = attn.norm_added_k(encoder_key)

        if image_rotary_emb is not None:

            def apply_rotary_emb(x, freqs_cos, freqs_sin):
                x_even = x[..., 0::2].float()
                x_odd = x[..., 1::2].float()

                cos = (x_even * freqs_cos - x_odd * freqs_sin).to(x.dtype)
                sin = (x_even * freqs_sin + x_odd * freqs_cos).to(x.dtype)

                return torch.stack([cos, sin], dim=-1).flatten(-2)

            query = apply_rotary_emb(query, *image_rotary_emb)
            key = apply_rotary_emb(key, *image_rotary_emb)

        query, key, value = query.transpose(1, 2), key.transpose(1, 2), value.transpose(1, 2)
        encoder_query, encoder_key, encoder_value = (
            encoder_query.transpose(1, 2),
            encoder_key.transpose(1, 2),
            encoder_value.transpose(1, 2),
        )

        sequence_length = query.size(2)
        encoder_sequence_length = encoder_query.size(2)
        total_length = sequence_length + encoder_sequence_length

        batch_size, heads, _, dim = query.shape
        attn_outputs = []
        for idx in range(batch_size):
            mask = attention_mask[idx][None, :]
            valid_prompt_token_indices = torch.nonzero(mask.flatten(), as_tuple=False).flatten()

            valid_encoder_query = encoder_query[idx: idx + 1, :, valid_prompt_token_indices, :]
            valid_encoder_key = encoder_key[idx: idx + 1, :, valid_prompt_token_indices, :]
            valid_encoder_value = encoder_value[idx: idx + 1, :, valid_prompt_token_indices, :]

            valid_query = torch.cat([query[idx: idx + 1], valid_encoder_query], dim=2)
            valid_key = torch.cat([key[idx: idx + 1], valid_encoder_key], dim=2)
            valid_value = torch.cat([value[idx: idx + 1], valid_encoder_value], dim=2)

            attn_output = sdpa(valid_query, valid_key, valid_value)
            valid_sequence_length = attn_output.size(2)
            attn_output = F.pad(attn_output, (0, 0, 0, total_length - valid_sequence_length))
            attn_outputs.append(attn_output)

        hidden_states = torch.cat(attn_outputs, dim=0)
        hidden_states = hidden_states.transpose(1, 2).flatten(2, 3)

        hidden_states, encoder_hidden_states = hidden_states.split_with_sizes(
            (sequence_length, encoder_sequence_length), dim=1
        )

        hidden_states = attn.to_out[0](hidden_states)
        hidden_states = attn.to_out[1](hidden_states)

        if hasattr(attn, "to_add_out"):
            encoder_hidden_states = attn.to_add_out(encoder_hidden_states)

        return hidden_states, encoder_hidden_states


class MochiAttention(nn.Module):
    def __init__(self, query_dim, processor, heads=8, dim_head=64, dropout=0.0, bias=False, added_kv_proj_dim=None,
                 added_proj_bias=True, out_dim=None, out_context_dim=None, out_bias=True, context_pre_only=False,
                 eps=1e-5, elementwise_affine=True):
        super().__init__()
        self.inner_dim = out_dim if out_dim is not None else dim_head * heads
        self.out_dim = out_dim if out_dim is not None else query_dim
        self.out_context_dim = out_context_dim if out_context_dim else query_dim
        self.context_pre_only = context_pre_only

        self.heads = out_dim // dim_head if out_dim is not None else heads

        self.norm_q = MochiModulatedRMSNorm(eps)
        self.norm_k = MochiModulatedRMSNorm(eps)
        self.norm_added_q = MochiModulatedRMSNorm(eps)
        self.norm_added_k = MochiModulatedRMSNorm(eps)

        self.to_q = nn.Linear(query_dim, self.inner_dim, bias=bias)
        self.to_k = nn.Linear(query_dim, self.inner_dim, bias=bias)
        self.to_v = nn.Linear(query_dim, self.inner_dim, bias=bias)

        self.add_k_proj = nn.Linear(added_kv_proj_dim, self.inner_dim, bias=added_proj_bias)
        self.add_v_proj = nn.Linear(added_kv_proj_dim, self.inner_dim, bias=added_proj_bias)
        if self.context_pre_only is not None:
            self.add_q_proj = nn.Linear(added_kv_proj_dim, self.inner_dim, bias=added_proj_bias)

        self.to_out = nn.ModuleList([])
        self.to_out.append(nn.Linear(self.inner_dim, self.out_dim, bias=out_bias))
        self.to_out.append(nn.Dropout(dropout))

        if not self.context_pre_only:
            self.to_add_out = nn.Linear(self.inner_dim, self.out_context_dim, bias=out_bias)

        self.processor = processor

    def forward(self, hidden_states, encoder_hidden_states=None, attention_mask=None, **kwargs):
        return self.processor(self, hidden_states, encoder_hidden_states=encoder_hidden_states,
                              attention_mask=attention_mask, **kwargs)


class MochiTransformerBlock(nn.Module):
    def __init__(self, dim, num_attention_heads, attention_head_dim, pooled_projection_dim, qk_norm="rms_norm",
                 activation_fn="swiglu", context_pre_only=False, eps=1e-6):
        super().__init__()
        self.context_pre_only = context_pre_only
        self.ff_inner_dim = (4 * dim * 2) // 3
        self.ff_context_inner_dim = (4 * pooled_projection_dim * 2) // 3

        self.norm1 = MochiRMSNormZero(dim, 4 * dim, eps=eps, elementwise_affine=False)

        if not context_pre_only:
            self.norm1_context = MochiRMSNormZero(dim, 4 * pooled_projection_dim, eps=eps, elementwise_affine=False)
        else:
            self.norm1_context = MochiLayerNormContinuous(embedding_dim=pooled_projection_dim,
                                                          conditioning_embedding_dim=dim, eps=eps)

        self.attn1 = MochiAttention(query_dim=dim, heads=num_attention_heads, dim_head=attention_head_dim, bias=False,
                                    added_kv_proj_dim=pooled_projection_dim, added_proj_bias=False, out_dim=dim,
                                    out_context_dim=pooled_projection_dim, context_pre_only=context_pre_only,
                                    processor=MochiAttnProcessor2_0(), eps=1e-5)

        self.norm2 = MochiModulatedRMSNorm(eps=eps)
        self.norm2_context = MochiModulatedRMSNorm(eps=eps) if not self.context_pre_only else None

        self.norm3 = MochiModulatedRMSNorm(eps)
        self.norm3_context = MochiModulatedRMSNorm(eps=eps) if not self.context_pre_only else None

        self.ff = FeedForward(dim, inner_dim=self.ff_inner_dim, bias=False)
        self.ff_context = None
        if not context_pre_only:
            self.ff_context = FeedForward(pooled_projection_dim, inner_dim=self.ff_context_inner_dim, bias=False)

        self.norm4 = MochiModulatedRMSNorm(eps=eps)
        self.norm4_context = MochiModulatedRMSNorm(eps=eps)

    def forward(self, hidden_states, encoder_hidden_states, temb, image_rotary_emb=None, joint_attention_mask=None):
        norm_hidden_states, gate_msa, scale_mlp, gate_mlp = self.norm1(hidden_states, temb)

        if not self.context_pre_only:
            norm_encoder_hidden_states, enc_gate_msa, enc_scale_mlp, enc_gate_mlp = self.norm1_context(
                encoder_hidden_states, temb)
        else:
            norm_encoder_hidden_states = self.norm1_context(encoder_hidden_states, temb)

        attn_hidden_states, context_attn_hidden_states = self.attn1(
            hidden_states=norm_hidden_states,
            encoder_hidden_states=norm_encoder_hidden_states,
            image_rotary_emb=image_rotary_emb,
            attention_mask=joint_attention_mask,
        )

        hidden_states = hidden_states + self.norm2(attn_hidden_states, torch.tanh(gate_msa).unsqueeze(1))
        norm_hidden_states = self.norm3(hidden_states, (1 + scale_mlp.unsqueeze(1).to(torch.float32)))
        ff_output = self.ff(norm_hidden_states)
        hidden_states = hidden_states + self.norm4(ff_output, torch.tanh(gate_mlp).unsqueeze(1))

        if not self.context_pre_only:
            encoder_hidden_states = encoder_hidden_states + self.norm2_context(
                context_attn_hidden_states, torch.tanh(enc_gate_msa).unsqueeze(1))
            norm_encoder_hidden_states = self.norm3_context(
                encoder_hidden_states, (1 + enc_scale_mlp.unsqueeze(1).to(torch.float32)))
            context_ff_output = self.ff_context(norm_encoder_hidden_states)
            encoder_hidden_states = encoder_hidden_states + self.norm4_context(
                context_ff_output, torch.tanh(enc_gate_mlp).unsqueeze(1))

        return hidden_states, encoder_hidden_states


class MochiRoPE(nn.Module):
    def __init__(self, base_height=192, base_width=192):
        super().__init__()
        self.target_area = base_height * base_width

    def _centers(self, start, stop, num, device, dtype):
        edges = torch.linspace(start, stop, num + 1, device=device, dtype=dtype)
        return (edges[:-1] + edges[1:]) / 2

    def _get_positions(self, num_frames, height, width, device=None, dtype=None):
        scale = (self.target_area / (height * width)) ** 0.5
        t = torch.arange(num_frames, device=device, dtype=dtype)
        h = self._centers(-height * scale / 2, height * scale / 2, height, device, dtype)
        w = self._centers(-width * scale / 2, width * scale / 2, width, device, dtype)
        grid_t, grid_h, grid_w = torch.meshgrid(t, h, w, indexing="ij")
        positions = torch.stack([grid_t, grid_h, grid_w], dim=-1).view(-1, 3)
        return positions

    def _create_rope(self, freqs, pos):
        freqs = torch.einsum("nd,dhf->nhf", pos.to(freqs), freqs)
        freqs_cos = torch.cos(freqs)
        freqs_sin = torch.sin(freqs)
        return freqs_cos, freqs_sin

    def forward(self, pos_frequencies, num_frames, height, width, device=None, dtype=None):
        pos = self._get_positions(num_frames, height, width, device, dtype)
        rope_cos, rope_sin = self._create_rope(pos_frequencies, pos)
        return rope_cos, rope_sin


class MochiTransformer3DModel(nn.Module):
    def __init__(self, patch_size=2, num_attention_heads=24, attention_head_dim=128, num_layers=48,
                 pooled_projection_dim=1536, in_channels=12, out_channels=None, qk_norm="rms_norm",
                 text_embed_dim=4096, time_embed_dim=256, activation_fn="swiglu", max_sequence_length=256):
        super().__init__()
        inner_dim = num_attention_heads * attention_head_dim
        out_channels = out_channels or in_channels
        self.patch_size = patch_size

        self.patch_embed = PatchEmbed(patch_size=patch_size, in_channels=in_channels, embed_dim=inner_dim)

        self.time_embed = MochiCombinedTimestepCaptionEmbedding(
            embedding_dim=inner_dim, pooled_projection_dim=pooled_projection_dim, text_embed_dim=text_embed_dim,
            time_embed_dim=time_embed_dim, num_attention_heads=8)

        self.pos_frequencies = nn.Parameter(torch.full((3, num_attention_heads, attention_head_dim // 2), 0.0))
        self.rope = MochiRoPE()

        self.transformer_blocks = nn.ModuleList([
            MochiTransformerBlock(dim=inner_dim, num_attention_heads=num_attention_heads,
                                  attention_head_dim=attention_head_dim, pooled_projection_dim=pooled_projection_dim,
                                  qk_norm=qk_norm, activation_fn=activation_fn, context_pre_only=i == num_layers - 1)
            for i in range(num_layers)])

        self.norm_out = AdaLayerNormContinuous(inner_dim, inner_dim, elementwise_affine=False, eps=1e-6)
        self.proj_out = nn.Linear(inner_dim, patch_size * patch_size * out_channels)

    def forward(self, hidden_states, encoder_hidden_states, timestep, encoder_attention_mask, return_dict=True):
        batch_size, num_channels, num_frames, height, width = hidden_states.shape
        p = self.patch_size

        post_patch_height = height // p
        post_patch_width = width // p

        temb, encoder_hidden_states = self.time_embed(timestep, encoder_hidden_states, encoder_attention_mask,
                                                      hidden_dtype=hidden_states.dtype)

        hidden_states = hidden_states.permute(0, 2, 1, 3, 4).flatten(0, 1)
        hidden_states = self.patch_embed(hidden_states)
        hidden_states = hidden_states.unflatten(0, (batch_size, -1)).flatten(1, 2)

        image_rotary_emb = self.rope(self.pos_frequencies, num_frames, post_patch_height, post_patch_width,
                                     device=hidden_states.device, dtype=torch.float32)

        for i, block in enumerate(self.transformer_blocks):
            hidden_states, encoder_hidden_states = block(
                hidden_states=hidden_states,
                encoder_hidden_states=encoder_hidden_states,
                temb=temb,
                image_rotary_emb=image_rotary_emb,
                joint_attention_mask=encoder_attention_mask,
            )
        hidden_states = self.norm_out(hidden_states, temb)
        hidden_states = self.proj_out(hidden_states)

        hidden_states = hidden_states.reshape(batch_size, num_frames, post_patch_height, post_patch_width, p, p, -1)
        hidden_states = hidden_states.permute(0, 6, 1, 2, 4, 3, 5)
        output = hidden_states.reshape(batch_size, -1, num_frames, height, width)
        return (output,)


def build():
    # capture_dit.py's mochi case at --small sizes: 2 heads of 16, 2 blocks (the last context_pre_only), text 16
    # wide, pooled projection 16, 16-channel time sinusoid, pooler 8 heads (head width 2).
    return MochiTransformer3DModel(patch_size=2, num_attention_heads=2, attention_head_dim=16, num_layers=2,
                                   pooled_projection_dim=16, in_channels=4, text_embed_dim=16, time_embed_dim=16,
                                   max_sequence_length=4)


def inputs(g):
    # 4 caption tokens, the last one padding; 2 latent frames of 4x8.
    m = torch.ones(1, 4, dtype=torch.int64)
    m[:, 3:] = 0
    return {"encoder_hidden_states": torch.randn((1, 4, 16), generator=g), "encoder_attention_mask": m,
            "noise": torch.randn((1, 4, 2, 4, 8), generator=g)}


def call(model, x, sigma, c):
    t = torch.tensor([(1.0 - sigma) * 1000.0], dtype=torch.float32)
    out = model(hidden_states=x, encoder_hidden_states=c["encoder_hidden_states"], timestep=t,
                encoder_attention_mask=c["encoder_attention_mask"], return_dict=False)[0]
    return -out


PRODUCER = dict(
    library_source="replica of huggingface/diffusers transformer_mochi.py@03002a9141f2 and the parts it imports "
                   "(torch 1.13)",
    timestep="(1 - sigma)*1000 float32 (MochiPipeline: inverted sigmas, t.expand(B).to(latents.dtype), "
             "latents float32)",
    velocity="negated model output (the inverted-sigma Euler step with the raw output)",
    note="asymmetric dual-stream video DiT (text stream 16 wide, video 32): MochiRMSNormZero [scale_msa, gate_msa, "
         "scale_mlp, gate_mlp] per stream (RMSNorm in f32, 1+scale), tanh gates applied through a weightless "
         "RMSNorm of the branch output (sandwich norm), joint attention per sample over [video, valid caption "
         "tokens] (padded prompt tokens removed, output padded back with zeros), weightless per-head RMSNorm q/k "
         "norms on both streams, interleaved 3-D RoPE from a learned (3, heads, head_dim/2) frequency parameter "
         "over centred (t, h, w) positions (per-head angles), video tokens only; last block context_pre_only "
         "(MochiLayerNormContinuous scale-only on text, no text output); t-embedding + masked attention pooler "
         "(a prepended masked-mean token is the only query, 8 heads); per-frame 2x2 patch conv; SwiGLU FFNs "
         "(bias-free); AdaLayerNormContinuous final norm; 2 latent frames")

if __name__ == "__main__":
    capture("mochi", build, inputs, call, sys.argv[1], PRODUCER)
