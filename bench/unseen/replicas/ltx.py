"""LTX-Video (LTXVideoTransformer3DModel), reimplemented for torch 1.13 (no diffusers here), captured small.

Follows huggingface/diffusers src/diffusers/models/transformers/transformer_ltx.py at
061bc7f9dcaf23ad84a8f36f93bc586c2f3f8191 (LTXVideoTransformer3DModel, LTXVideoTransformerBlock, LTXAttention with
LTXVideoAttnProcessor's __call__ as its forward, LTXVideoRotaryPosEmbed, apply_rotary_emb) with the parts it
imports: attention.py (FeedForward "gelu-approximate", GELU), embeddings.py (Timesteps, TimestepEmbedding,
PixArtAlphaCombinedTimestepSizeEmbeddings, PixArtAlphaTextProjection) and normalization.py (RMSNorm,
AdaLayerNormSingle, AdaLayerNorm): the same module tree, parameter names and shapes, and call boundaries; the
arithmetic line for line. Stand-ins for what torch 1.13 lacks, used only there: torch.nn.RMSNorm (eps given) and
dispatch_attention_fn (SDPA's math on [B, L, H, D], the mask additive).

The constructs it shows: RoPE tables the model makes from the request's shape alone (num_frames, height, width
passed as numbers, the grid scaled per axis by rope_interpolation_scale·patch/base, frequencies θ^linspace(0, 1,
D/6)·π/2 times (2·coord − 1), each repeated for an interleaved pair, the first D mod 6 channels padded with cos 1
and sin 0); q/k RMSNorm across heads with weights; a caption mask made additive, (1 − m)·−10000; per-block 6-way
scale_shift_table + timestep modulation of weightless RMSNorms; the final AdaLayerNorm (shift, scale) from the
embedded timestep.

Pipeline as LTXPipeline calls it: latents packed [B, F·H·W, C] (patch 1), timestep σ·1000 (t.expand(B)),
rope_interpolation_scale (8/25, 32, 32) (the VAE's compression over the frame rate 25), velocity the output as is.

usage: /usr/bin/python3 bench/unseen/replicas/ltx.py OUTDIR
"""
import math
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

from parts import FeedForward, PixArtAlphaTextProjection, TimestepEmbedding, Timesteps, TorchRMSNorm
from run import capture, sdpa


NNRMSNorm = getattr(torch.nn, "RMSNorm", TorchRMSNorm)


class RMSNorm(nn.Module):
    """diffusers.models.normalization.RMSNorm."""

    def __init__(self, dim, eps, elementwise_affine=False):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim)) if elementwise_affine else None

    def forward(self, hidden_states):
        input_dtype = hidden_states.dtype
        variance = hidden_states.to(torch.float32).pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.eps)
        if self.weight is not None:
            if self.weight.dtype in (torch.float16, torch.bfloat16):
                hidden_states = hidden_states.to(self.weight.dtype)
            hidden_states = hidden_states * self.weight
        else:
            hidden_states = hidden_states.to(input_dtype)
        return hidden_states


class PixArtAlphaCombinedTimestepSizeEmbeddings(nn.Module):
    """use_additional_conditions=False: the timestep alone."""

    def __init__(self, embedding_dim, size_emb_dim):
        super().__init__()
        self.outdim = size_emb_dim
        self.time_proj = Timesteps(num_channels=256, flip_sin_to_cos=True, downscale_freq_shift=0)
        self.timestep_embedder = TimestepEmbedding(in_channels=256, time_embed_dim=embedding_dim)

    def forward(self, timestep, resolution, aspect_ratio, batch_size, hidden_dtype):
        timesteps_proj = self.time_proj(timestep)
        return self.timestep_embedder(timesteps_proj.to(dtype=hidden_dtype))


class AdaLayerNormSingle(nn.Module):
    def __init__(self, embedding_dim):
        super().__init__()
        self.emb = PixArtAlphaCombinedTimestepSizeEmbeddings(embedding_dim, size_emb_dim=embedding_dim // 3)
        self.silu = nn.SiLU()
        self.linear = nn.Linear(embedding_dim, 6 * embedding_dim, bias=True)

    def forward(self, timestep, added_cond_kwargs=None, batch_size=None, hidden_dtype=None):
        added_cond_kwargs = added_cond_kwargs or {"resolution": None, "aspect_ratio": None}
        embedded_timestep = self.emb(timestep, **added_cond_kwargs, batch_size=batch_size, hidden_dtype=hidden_dtype)
        return self.linear(self.silu(embedded_timestep)), embedded_timestep


class AdaLayerNorm(nn.Module):
    """AdaLayerNorm(embedding_dim, output_dim=2·dim, norm_elementwise_affine=False, norm_eps=1e-6, chunk_dim=1)."""

    def __init__(self, embedding_dim, output_dim, norm_elementwise_affine, norm_eps, chunk_dim):
        super().__init__()
        self.chunk_dim = chunk_dim
        self.emb = None
        self.silu = nn.SiLU()
        self.linear = nn.Linear(embedding_dim, output_dim)
        self.norm = nn.LayerNorm(output_dim // 2, norm_eps, norm_elementwise_affine)

    def forward(self, x, timestep=None, temb=None):
        temb = self.linear(self.silu(temb))
        if self.chunk_dim == 1:
            shift, scale = temb.chunk(2, dim=1)
            shift = shift[:, None, :]
            scale = scale[:, None, :]
        else:
            scale, shift = temb.chunk(2, dim=0)
        return self.norm(x) * (1 + scale) + shift


def apply_rotary_emb(x, freqs):
    cos, sin = freqs
    x_real, x_imag = x.unflatten(2, (-1, 2)).unbind(-1)
    x_rotated = torch.stack([-x_imag, x_real], dim=-1).flatten(2)
    return (x.float() * cos + x_rotated.float() * sin).to(x.dtype)


def attention(q, k, v, mask):
    """dispatch_attention_fn on [B, L, H, D]: SDPA over heads, the mask additive."""
    q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
    if hasattr(F, "scaled_dot_product_attention"):
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=0.0, is_causal=False)
    else:
        out = sdpa(q, k, v, mask=mask)
    return out.transpose(1, 2)


class LTXAttention(nn.Module):
    def __init__(self, query_dim, heads=8, kv_heads=8, dim_head=64, bias=True, cross_attention_dim=None,
                 out_bias=True):
        super().__init__()
        self.head_dim = dim_head
        self.inner_dim = dim_head * heads
        self.inner_kv_dim = self.inner_dim if kv_heads is None else dim_head * kv_heads
        self.cross_attention_dim = cross_attention_dim if cross_attention_dim is not None else query_dim
        self.heads = heads
        self.norm_q = NNRMSNorm(dim_head * heads, eps=1e-5, elementwise_affine=True)
        self.norm_k = NNRMSNorm(dim_head * kv_heads, eps=1e-5, elementwise_affine=True)
        self.to_q = nn.Linear(query_dim, self.inner_dim, bias=bias)
        self.to_k = nn.Linear(self.cross_attention_dim, self.inner_kv_dim, bias=bias)
        self.to_v = nn.Linear(self.cross_attention_dim, self.inner_kv_dim, bias=bias)
        self.to_out = nn.ModuleList([nn.Linear(self.inner_dim, query_dim, bias=out_bias), nn.Dropout(0.0)])

    def prepare_attention_mask(self, attention_mask, target_length, batch_size):
        """Attention.prepare_attention_mask (out_dim 3): the mask repeated per head."""
        current_length = attention_mask.shape[-1]
        if current_length != target_length:
            attention_mask = F.pad(attention_mask, (0, target_length), value=0.0)
        return attention_mask.repeat_interleave(self.heads, dim=0)

    def forward(self, hidden_states, encoder_hidden_states=None, attention_mask=None, image_rotary_emb=None):
        batch_size, sequence_length, _ = (
            hidden_states.shape if encoder_hidden_states is None else encoder_hidden_states.shape)
        if attention_mask is not None:
            attention_mask = self.prepare_attention_mask(attention_mask, sequence_length, batch_size)
            attention_mask = attention_mask.view(batch_size, self.heads, -1, attention_mask.shape[-1])
        if encoder_hidden_states is None:
            encoder_hidden_states = hidden_states
        query = self.to_q(hidden_states)
        key = self.to_k(encoder_hidden_states)
        value = self.to_v(encoder_hidden_states)
        query = self.norm_q(query)
        key = self.norm_k(key)
        if image_rotary_emb is not None:
            query = apply_rotary_emb(query, image_rotary_emb)
            key = apply_rotary_emb(key, image_rotary_emb)
        query = query.unflatten(2, (self.heads, -1))
        key = key.unflatten(2, (self.heads, -1))
        value = value.unflatten(2, (self.heads, -1))
        hidden_states = attention(query, key, value, attention_mask)
        hidden_states = hidden_states.flatten(2, 3)
        hidden_states = hidden_states.to(query.dtype)
        hidden_states = self.to_out[0](hidden_states)
        return self.to_out[1](hidden_states)


class LTXVideoRotaryPosEmbed(nn.Module):
    def __init__(self, dim, base_num_frames=20, base_height=2048, base_width=2048, patch_size=1, patch_size_t=1,
                 theta=10000.0):
        super().__init__()
        self.dim = dim
        self.base_num_frames, self.base_height, self.base_width = base_num_frames, base_height, base_width
        self.patch_size, self.patch_size_t, self.theta = patch_size, patch_size_t, theta

    def _prepare_video_coords(self, batch_size, num_frames, height, width, rope_interpolation_scale, device):
        grid_h = torch.arange(height, dtype=torch.float32, device=device)
        grid_w = torch.arange(width, dtype=torch.float32, device=device)
        grid_f = torch.arange(num_frames, dtype=torch.float32, device=device)
        grid = torch.meshgrid(grid_f, grid_h, grid_w, indexing="ij")
        grid = torch.stack(grid, dim=0)
        grid = grid.unsqueeze(0).repeat(batch_size, 1, 1, 1, 1)
        if rope_interpolation_scale is not None:
            grid[:, 0:1] = grid[:, 0:1] * rope_interpolation_scale[0] * self.patch_size_t / self.base_num_frames
            grid[:, 1:2] = grid[:, 1:2] * rope_interpolation_scale[1] * self.patch_size / self.base_height
            grid[:, 2:3] = grid[:, 2:3] * rope_interpolation_scale[2] * self.patch_size / self.base_width
        return grid.flatten(2, 4).transpose(1, 2)

    def forward(self, hidden_states, num_frames=None, height=None, width=None, rope_interpolation_scale=None,
                video_coords=None):
        batch_size = hidden_states.size(0)
        grid = self._prepare_video_coords(batch_size, num_frames, height, width, rope_interpolation_scale,
                                          hidden_states.device)
        start, end = 1.0, self.theta
        freqs = self.theta ** torch.linspace(math.log(start, self.theta), math.log(end, self.theta), self.dim // 6,
                                             device=hidden_states.device, dtype=torch.float32)
        freqs = freqs * math.pi / 2.0
        freqs = freqs * (grid.unsqueeze(-1) * 2 - 1)
        freqs = freqs.transpose(-1, -2).flatten(2)
        cos_freqs = freqs.cos().repeat_interleave(2, dim=-1)
        sin_freqs = freqs.sin().repeat_interleave(2, dim=-1)
        if self.dim % 6 != 0:
            cos_padding = torch.ones_like(cos_freqs[:, :, : self.dim % 6])
            sin_padding = torch.zeros_like(cos_freqs[:, :, : self.dim % 6])
            cos_freqs = torch.cat([cos_padding, cos_freqs], dim=-1)
            sin_freqs = torch.cat([sin_padding, sin_freqs], dim=-1)
        return cos_freqs, sin_freqs


class LTXVideoTransformerBlock(nn.Module):
    def __init__(self, dim, num_attention_heads, attention_head_dim, cross_attention_dim, eps=1e-6,
                 elementwise_affine=False):
        super().__init__()
        self.norm1 = RMSNorm(dim, eps=eps, elementwise_affine=elementwise_affine)
        self.attn1 = LTXAttention(query_dim=dim, heads=num_attention_heads, kv_heads=num_attention_heads,
                                  dim_head=attention_head_dim, cross_attention_dim=None)
        self.norm2 = RMSNorm(dim, eps=eps, elementwise_affine=elementwise_affine)
        self.attn2 = LTXAttention(query_dim=dim, cross_attention_dim=cross_attention_dim, heads=num_attention_heads,
                                  kv_heads=num_attention_heads, dim_head=attention_head_dim)
        self.ff = FeedForward(dim)
        self.scale_shift_table = nn.Parameter(torch.randn(6, dim) / dim ** 0.5)

    def forward(self, hidden_states, encoder_hidden_states, temb, image_rotary_emb=None,
                encoder_attention_mask=None):
        batch_size = hidden_states.size(0)
        norm_hidden_states = self.norm1(hidden_states)
        num_ada_params = self.scale_shift_table.shape[0]
        ada_values = self.scale_shift_table[None, None] + temb.reshape(batch_size, temb.size(1), num_ada_params, -1)
        shift_msa, scale_msa, gate_msa, shift_mlp, scale_mlp, gate_mlp = ada_values.unbind(dim=2)
        norm_hidden_states = norm_hidden_states * (1 + scale_msa) + shift_msa
        attn_hidden_states = self.attn1(hidden_states=norm_hidden_states, encoder_hidden_states=None,
                                        image_rotary_emb=image_rotary_emb)
        hidden_states = hidden_states + attn_hidden_states * gate_msa
        attn_hidden_states = self.attn2(hidden_states, encoder_hidden_states=encoder_hidden_states,
                                        image_rotary_emb=None, attention_mask=encoder_attention_mask)
        hidden_states = hidden_states + attn_hidden_states
        norm_hidden_states = self.norm2(hidden_states) * (1 + scale_mlp) + shift_mlp
        ff_output = self.ff(norm_hidden_states)
        return hidden_states + ff_output * gate_mlp


class LTXVideoTransformer3DModel(nn.Module):
    def __init__(self, in_channels=128, out_channels=128, patch_size=1, patch_size_t=1, num_attention_heads=32,
                 attention_head_dim=64, cross_attention_dim=2048, num_layers=28, norm_eps=1e-6,
                 caption_channels=4096):
        super().__init__()
        out_channels = out_channels or in_channels
        inner_dim = num_attention_heads * attention_head_dim
        self.proj_in = nn.Linear(in_channels, inner_dim)
        self.time_embed = AdaLayerNormSingle(inner_dim)
        self.caption_projection = PixArtAlphaTextProjection(in_features=caption_channels, hidden_size=inner_dim)
        self.rope = LTXVideoRotaryPosEmbed(dim=inner_dim, base_num_frames=20, base_height=2048, base_width=2048,
                                           patch_size=patch_size, patch_size_t=patch_size_t, theta=10000.0)
        self.transformer_blocks = nn.ModuleList([
            LTXVideoTransformerBlock(inner_dim, num_attention_heads, attention_head_dim, cross_attention_dim,
                                     eps=norm_eps) for _ in range(num_layers)])
        self.norm_out = AdaLayerNorm(embedding_dim=inner_dim, output_dim=2 * inner_dim, norm_elementwise_affine=False,
                                     norm_eps=1e-6, chunk_dim=1)
        self.proj_out = nn.Linear(inner_dim, out_channels)

    def forward(self, hidden_states, encoder_hidden_states, timestep, encoder_attention_mask, num_frames=None,
                height=None, width=None, rope_interpolation_scale=None, video_coords=None, attention_kwargs=None,
                return_dict=True):
        image_rotary_emb = self.rope(hidden_states, num_frames, height, width, rope_interpolation_scale, video_coords)
        if encoder_attention_mask is not None and encoder_attention_mask.ndim == 2:
            encoder_attention_mask = (1 - encoder_attention_mask.to(hidden_states.dtype)) * -10000.0
            encoder_attention_mask = encoder_attention_mask.unsqueeze(1)
        batch_size = hidden_states.size(0)
        hidden_states = self.proj_in(hidden_states)
        temb, embedded_timestep = self.time_embed(timestep.flatten(), batch_size=batch_size,
                                                  hidden_dtype=hidden_states.dtype)
        temb = temb.view(batch_size, -1, temb.size(-1))
        embedded_timestep = embedded_timestep.view(batch_size, -1, embedded_timestep.size(-1))
        encoder_hidden_states = self.caption_projection(encoder_hidden_states)
        encoder_hidden_states = encoder_hidden_states.view(batch_size, -1, hidden_states.size(-1))
        for block in self.transformer_blocks:
            hidden_states = block(hidden_states=hidden_states, encoder_hidden_states=encoder_hidden_states, temb=temb,
                                  image_rotary_emb=image_rotary_emb, encoder_attention_mask=encoder_attention_mask)
        hidden_states = self.norm_out(hidden_states, temb=embedded_timestep.squeeze(1))
        output = self.proj_out(hidden_states)
        return (output,)


F_, H_, W_ = 2, 4, 4


def build():
    return LTXVideoTransformer3DModel(in_channels=8, out_channels=8, num_attention_heads=2, attention_head_dim=16,
                                      cross_attention_dim=32, num_layers=2, caption_channels=16)


def inputs(g):
    return {"encoder_hidden_states": torch.randn((1, 4, 16), generator=g),
            "encoder_attention_mask": torch.tensor([[1, 1, 1, 0]], dtype=torch.int64),
            "noise": torch.randn((1, F_ * H_ * W_, 8), generator=g)}


def call(model, x, sigma, c):
    t = torch.tensor([sigma * 1000.0], dtype=torch.float32)
    return model(hidden_states=x, encoder_hidden_states=c["encoder_hidden_states"], timestep=t,
                 encoder_attention_mask=c["encoder_attention_mask"], num_frames=F_, height=H_, width=W_,
                 rope_interpolation_scale=(8 / 25, 32, 32), return_dict=False)[0]


PRODUCER = dict(
    library_source="replica of huggingface/diffusers transformer_ltx.py@061bc7f9dcaf and the parts it imports "
                   "(torch 1.13)",
    timestep="sigma*1000 float32 (LTXPipeline: t.expand(B), FlowMatchEulerDiscrete timesteps)",
    velocity="model output as is (flow prediction), not negated",
    note="LTX-Video, 2 blocks, latents packed [B, F·H·W, C] (F 2, H 4, W 4, patch 1): RoPE tables made from the "
         "request's shape (grid f/h/w times rope_interpolation_scale·patch/base (8/25/20, 32/2048, 32/2048), "
         "θ 10000^linspace(0, 1, D/6)·π/2·(2c − 1), interleaved pairs, the first D mod 6 = 2 channels cos 1 sin 0); "
         "q/k RMSNorm across heads (eps 1e-5, weights); caption mask (1 − m)·−10000 added; weightless RMSNorm with "
         "scale_shift_table + temb 6-way modulation, gated residuals; plain residual after cross-attention; "
         "GELU-tanh FFN; AdaLayerNorm (shift, scale) from the embedded timestep, non-affine LayerNorm")

if __name__ == "__main__":
    capture("ltx", build, inputs, call, sys.argv[1], PRODUCER)
