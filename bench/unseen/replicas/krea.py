"""Krea realtime video DiT (text to video, the plain non-cached call), reimplemented for torch 1.13 (no diffusers
here), captured small in f32 on CPU.

Follows huggingface/diffusers src/diffusers/models/transformers/transformer_krea.py at
0bd80ed670c8353ae3c677fca88d04a4cb634bbd (KreaTransformerModel, KreaTransformerBlock, KreaAttention with
KreaAttnProcessor's __call__ as its forward, KreaRMSNorm, KreaRotaryPosEmbed, KreaTimeTextImageEmbedding) with the
parts it imports: attention.py (FeedForward "gelu-approximate", GELU) and embeddings.py (Timesteps,
TimestepEmbedding, PixArtAlphaTextProjection "gelu_tanh", get_1d_rotary_pos_embed): the same module tree, parameter
names and shapes, buffers and call boundaries; the arithmetic line for line. Stand-ins for what torch 1.13 lacks:
dispatch_attention_fn (SDPA's math on [B, L, H, D], default scale, no mask). The call without a KV cache
(kv_cache None, clean_latents False), no image context (image_dim None).

The constructs it shows beside Wan's: the RoPE tables are buffers of the model's own rope module (built in float64
on a CPU, cast to f32), cut per axis by split sizes [D - 2·(D//3), D//3, D//3] and broadcast over the (f, h, w)
grid, applied to q/k as interleaved pairs (cos[0::2], sin[1::2] written into even/odd slots); Llama-style RMSNorm on
q and k across all heads (x̂ cast back to the input dtype, then ·weight); plain nn.LayerNorm (not FP32) for the
non-affine pre-norms, an affine LayerNorm before the cross-attention (cross_attn_norm); the modulation a
[1, 6, D] table plus the 6·D timestep projection, the output's (shift, scale) a [1, 2, D] table plus temb; every
residual and modulation cast back with type_as.

Pipeline: no diffusers pipeline file holds it; it is called as the Wan pipelines call their transformer:
timestep sigma*1000 (float32, t.expand(B)), velocity the output as is, no guidance.

usage: /usr/bin/python3 bench/unseen/replicas/krea.py OUTDIR
"""
import math
import sys

import torch
import torch.nn as nn

from parts import GELU, PixArtAlphaTextProjection, TimestepEmbedding, Timesteps
from run import capture, sdpa


def get_1d_rotary_pos_embed(dim, pos, theta=10000.0, use_real=False, linear_factor=1.0, ntk_factor=1.0,
                            repeat_interleave_real=True, freqs_dtype=torch.float32):
    assert dim % 2 == 0
    if isinstance(pos, int):
        pos = torch.arange(pos)
    theta = theta * ntk_factor
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=freqs_dtype, device=pos.device)[: (dim // 2)] / dim)) \
        / linear_factor
    freqs = torch.outer(pos, freqs)
    if use_real and repeat_interleave_real:
        freqs_cos = freqs.cos().repeat_interleave(2, dim=1).float()
        freqs_sin = freqs.sin().repeat_interleave(2, dim=1).float()
        return freqs_cos, freqs_sin
    raise NotImplementedError("only the real, interleaved table is used here")


class FeedForward(nn.Module):
    """FeedForward(dim, inner_dim=..., activation_fn="gelu-approximate")."""

    def __init__(self, dim, inner_dim, dropout=0.0, bias=True):
        super().__init__()
        self.net = nn.ModuleList([GELU(dim, inner_dim, approximate="tanh", bias=bias), nn.Dropout(dropout),
                                  nn.Linear(inner_dim, dim, bias=bias)])

    def forward(self, hidden_states):
        for module in self.net:
            hidden_states = module(hidden_states)
        return hidden_states


class KreaRMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-5):
        super().__init__()
        self.dim = dim
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, hidden_states):
        input_dtype = hidden_states.dtype
        hidden_states = hidden_states.to(torch.float32)
        variance = hidden_states.pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.eps)
        return self.weight * hidden_states.to(input_dtype)


def dispatch_attention_fn(query, key, value):
    """SDPA's math on [B, L, H, D], default scale, no mask."""
    return sdpa(query.transpose(1, 2), key.transpose(1, 2), value.transpose(1, 2)).transpose(1, 2)


class KreaAttention(nn.Module):
    """With KreaAttnProcessor's __call__ as its forward (no fused projections, no added k/v, no KV cache)."""

    def __init__(self, dim, heads=8, dim_head=64, eps=1e-5, added_kv_proj_dim=None, cross_attention_dim_head=None):
        super().__init__()
        self.inner_dim = dim_head * heads
        self.heads = heads
        self.added_kv_proj_dim = added_kv_proj_dim
        self.cross_attention_dim_head = cross_attention_dim_head
        self.kv_inner_dim = self.inner_dim if cross_attention_dim_head is None else cross_attention_dim_head * heads
        self.to_q = nn.Linear(dim, self.inner_dim, bias=True)
        self.to_k = nn.Linear(dim, self.kv_inner_dim, bias=True)
        self.to_v = nn.Linear(dim, self.kv_inner_dim, bias=True)
        self.to_out = nn.Linear(self.inner_dim, dim, bias=True)
        self.norm_q = KreaRMSNorm(dim_head * heads, eps=eps)
        self.norm_k = KreaRMSNorm(dim_head * heads, eps=eps)
        self.add_k_proj = self.add_v_proj = None
        assert added_kv_proj_dim is None
        self.is_cross_attention = cross_attention_dim_head is not None
        self.fused_projections = False

    def forward(self, hidden_states, encoder_hidden_states=None, attention_mask=None, rotary_emb=None,
                kv_cache=None):
        attn = self
        if encoder_hidden_states is None:
            encoder_hidden_states = hidden_states
        query = attn.to_q(hidden_states)
        key = attn.to_k(encoder_hidden_states)
        value = attn.to_v(encoder_hidden_states)

        query = attn.norm_q(query)
        key = attn.norm_k(key)

        query = query.unflatten(2, (attn.heads, -1))
        key = key.unflatten(2, (attn.heads, -1))
        value = value.unflatten(2, (attn.heads, -1))

        if rotary_emb is not None:
            def apply_rotary_emb(hidden_states, freqs_cos, freqs_sin, kv_cache):
                block_length = hidden_states.shape[1]
                start_index = kv_cache.local_start_index if kv_cache is not None else 0
                freqs_cos = freqs_cos[:, start_index: start_index + block_length]
                freqs_sin = freqs_sin[:, start_index: start_index + block_length]
                x1, x2 = hidden_states.unflatten(-1, (-1, 2)).unbind(-1)
                cos = freqs_cos[..., 0::2]
                sin = freqs_sin[..., 1::2]
                out = torch.empty_like(hidden_states)
                out[..., 0::2] = x1 * cos - x2 * sin
                out[..., 1::2] = x1 * sin + x2 * cos
                return out.type_as(hidden_states)

            query = apply_rotary_emb(query, *rotary_emb, kv_cache)
            key = apply_rotary_emb(key, *rotary_emb, kv_cache)

        assert attention_mask is None
        hidden_states = dispatch_attention_fn(query, key, value)
        hidden_states = hidden_states.flatten(2, 3)
        hidden_states = hidden_states.type_as(query)
        hidden_states = attn.to_out(hidden_states)
        return hidden_states


class KreaTimeTextImageEmbedding(nn.Module):
    def __init__(self, dim, time_freq_dim, time_proj_dim, text_embed_dim, image_embed_dim=None,
                 pos_embed_seq_len=None):
        super().__init__()
        self.timesteps_proj = Timesteps(num_channels=time_freq_dim, flip_sin_to_cos=True, downscale_freq_shift=0)
        self.time_embedder = TimestepEmbedding(in_channels=time_freq_dim, time_embed_dim=dim)
        self.act_fn = nn.SiLU()
        self.time_proj = nn.Linear(dim, time_proj_dim)
        self.text_embedder = PixArtAlphaTextProjection(text_embed_dim, dim)
        assert image_embed_dim is None
        self.image_embedder = None

    def forward(self, timestep, encoder_hidden_states, encoder_hidden_states_image=None):
        timestep = self.timesteps_proj(timestep)
        time_embedder_dtype = next(iter(self.time_embedder.parameters())).dtype
        if timestep.dtype != time_embedder_dtype and time_embedder_dtype != torch.int8:
            timestep = timestep.to(time_embedder_dtype)
        temb = self.time_embedder(timestep).type_as(encoder_hidden_states)
        timestep_proj = self.time_proj(self.act_fn(temb))
        encoder_hidden_states = self.text_embedder(encoder_hidden_states)
        return temb, timestep_proj, encoder_hidden_states, encoder_hidden_states_image


class KreaRotaryPosEmbed(nn.Module):
    def __init__(self, attention_head_dim, patch_size, max_seq_len, theta=10000.0):
        super().__init__()
        self.attention_head_dim = attention_head_dim
        self.patch_size = patch_size
        self.max_seq_len = max_seq_len
        h_dim = w_dim = 2 * (attention_head_dim // 6)
        t_dim = attention_head_dim - h_dim - w_dim
        freqs_dtype = torch.float64  # torch.backends.mps.is_available() is False here
        freqs_cos = []
        freqs_sin = []
        for dim in [t_dim, h_dim, w_dim]:
            freq_cos, freq_sin = get_1d_rotary_pos_embed(dim, max_seq_len, theta, use_real=True,
                                                         repeat_interleave_real=True, freqs_dtype=freqs_dtype)
            freqs_cos.append(freq_cos)
            freqs_sin.append(freq_sin)
        self.register_buffer("freqs_cos", torch.cat(freqs_cos, dim=1), persistent=False)
        self.register_buffer("freqs_sin", torch.cat(freqs_sin, dim=1), persistent=False)

    def forward(self, hidden_states, max_num_frames=None):
        _, _, num_frames, height, width = hidden_states.shape
        num_frames = max_num_frames if max_num_frames is not None else num_frames
        p_t, p_h, p_w = self.patch_size
        ppf, pph, ppw = num_frames // p_t, height // p_h, width // p_w
        split_sizes = [self.attention_head_dim - 2 * (self.attention_head_dim // 3), self.attention_head_dim // 3,
                       self.attention_head_dim // 3]
        freqs_cos = self.freqs_cos.split(split_sizes, dim=1)
        freqs_sin = self.freqs_sin.split(split_sizes, dim=1)
        freqs_cos_f = freqs_cos[0][:ppf].view(ppf, 1, 1, -1).expand(ppf, pph, ppw, -1)
        freqs_cos_h = freqs_cos[1][:pph].view(1, pph, 1, -1).expand(ppf, pph, ppw, -1)
        freqs_cos_w = freqs_cos[2][:ppw].view(1, 1, ppw, -1).expand(ppf, pph, ppw, -1)
        freqs_sin_f = freqs_sin[0][:ppf].view(ppf, 1, 1, -1).expand(ppf, pph, ppw, -1)
        freqs_sin_h = freqs_sin[1][:pph].view(1, pph, 1, -1).expand(ppf, pph, ppw, -1)
        freqs_sin_w = freqs_sin[2][:ppw].view(1, 1, ppw, -1).expand(ppf, pph, ppw, -1)
        freqs_cos = torch.cat([freqs_cos_f, freqs_cos_h, freqs_cos_w], dim=-1).reshape(1, ppf * pph * ppw, 1, -1)
        freqs_sin = torch.cat([freqs_sin_f, freqs_sin_h, freqs_sin_w], dim=-1).reshape(1, ppf * pph * ppw, 1, -1)
        return freqs_cos, freqs_sin


class KreaTransformerBlock(nn.Module):
    def __init__(self, dim, ffn_dim, num_heads, qk_norm="rms_norm_across_heads", cross_attn_norm=False, eps=1e-6,
                 added_kv_proj_dim=None):
        super().__init__()
        self.num_heads = num_heads
        self.dim = dim
        self.encoder_dim = dim
        self.norm1 = nn.LayerNorm(dim, eps, elementwise_affine=False)
        self.attn1 = KreaAttention(dim=dim, heads=num_heads, dim_head=dim // num_heads, eps=eps,
                                   cross_attention_dim_head=None)
        self.attn2 = KreaAttention(dim=dim, heads=num_heads, dim_head=dim // num_heads, eps=eps,
                                   added_kv_proj_dim=added_kv_proj_dim, cross_attention_dim_head=dim // num_heads)
        self.norm3 = nn.LayerNorm(dim, eps, elementwise_affine=True) if cross_attn_norm else nn.Identity()
        self.ffn = FeedForward(dim, inner_dim=ffn_dim)
        self.norm2 = nn.LayerNorm(dim, eps, elementwise_affine=False)
        self.scale_shift_table = nn.Parameter(torch.randn(1, 6, dim) / dim ** 0.5)

    def forward(self, hidden_states, encoder_hidden_states, temb, rotary_emb, clean_latents=False, kv_cache=None):
        shift_msa, scale_msa, gate_msa, c_shift_msa, c_scale_msa, c_gate_msa = (
            self.scale_shift_table + temb).chunk(6, dim=1)

        norm_hidden_states = (self.norm1(hidden_states) * (1 + scale_msa) + shift_msa).type_as(hidden_states)
        attn_output = self.attn1(norm_hidden_states, None, None, rotary_emb, kv_cache)
        hidden_states = (hidden_states + attn_output * gate_msa).type_as(hidden_states)

        norm_hidden_states = self.norm3(hidden_states).type_as(hidden_states)
        attn_output = self.attn2(norm_hidden_states, encoder_hidden_states, None, None)
        hidden_states = hidden_states + attn_output

        norm_hidden_states = (self.norm2(hidden_states) * (1 + c_scale_msa) + c_shift_msa).type_as(hidden_states)
        ff_output = self.ffn(norm_hidden_states)
        hidden_states = (hidden_states + ff_output * c_gate_msa).type_as(hidden_states)
        assert not clean_latents
        return hidden_states


class KreaTransformerModel(nn.Module):
    def __init__(self, patch_size=(1, 2, 2), num_attention_heads=40, attention_head_dim=128, in_channels=16,
                 out_channels=16, text_dim=4096, freq_dim=256, ffn_dim=13824, num_layers=40, cross_attn_norm=True,
                 qk_norm="rms_norm_across_heads", eps=1e-6, image_dim=None, added_kv_proj_dim=None,
                 rope_max_seq_len=1024, pos_embed_seq_len=None):
        super().__init__()
        self.patch_size = patch_size
        inner_dim = num_attention_heads * attention_head_dim
        out_channels = out_channels or in_channels
        self.rope = KreaRotaryPosEmbed(attention_head_dim, patch_size, rope_max_seq_len)
        self.patch_embedding = nn.Conv3d(in_channels, inner_dim, kernel_size=patch_size, stride=patch_size)
        self.condition_embedder = KreaTimeTextImageEmbedding(dim=inner_dim, time_freq_dim=freq_dim,
                                                             time_proj_dim=inner_dim * 6, text_embed_dim=text_dim,
                                                             image_embed_dim=image_dim,
                                                             pos_embed_seq_len=pos_embed_seq_len)
        self.blocks = nn.ModuleList([
            KreaTransformerBlock(inner_dim, ffn_dim, num_attention_heads, qk_norm, cross_attn_norm, eps,
                                 added_kv_proj_dim)
            for _ in range(num_layers)])
        self.norm_out = nn.LayerNorm(inner_dim, eps, elementwise_affine=False)
        self.proj_out = nn.Linear(inner_dim, out_channels * math.prod(patch_size))
        self.scale_shift_table = nn.Parameter(torch.randn(1, 2, inner_dim) / inner_dim ** 0.5)

    def forward(self, hidden_states, timestep, encoder_hidden_states, encoder_hidden_states_image=None,
                max_num_frames=None, clean_latents=False, return_dict=True, attention_kwargs=None):
        batch_size, _, num_frames, height, width = hidden_states.shape
        p_t, p_h, p_w = self.patch_size
        post_patch_num_frames = num_frames // p_t
        post_patch_height = height // p_h
        post_patch_width = width // p_w

        rotary_emb = self.rope(hidden_states, max_num_frames=max_num_frames)

        hidden_states = self.patch_embedding(hidden_states)
        hidden_states = hidden_states.flatten(2).transpose(1, 2)

        temb, timestep_proj, encoder_hidden_states, encoder_hidden_states_image = self.condition_embedder(
            timestep, encoder_hidden_states, encoder_hidden_states_image)
        timestep_proj = timestep_proj.unflatten(1, (6, -1))

        if encoder_hidden_states_image is not None:
            encoder_hidden_states = torch.concat([encoder_hidden_states_image, encoder_hidden_states], dim=1)

        for block in self.blocks:
            hidden_states = block(hidden_states, encoder_hidden_states, timestep_proj, rotary_emb, clean_latents)

        shift, scale = (self.scale_shift_table.to(temb.device) + temb.unsqueeze(1)).chunk(2, dim=1)
        shift = shift.to(hidden_states.device)
        scale = scale.to(hidden_states.device)

        hidden_states = (self.norm_out(hidden_states) * (1 + scale) + shift).type_as(hidden_states)
        hidden_states = self.proj_out(hidden_states)

        hidden_states = hidden_states.reshape(batch_size, post_patch_num_frames, post_patch_height, post_patch_width,
                                              p_t, p_h, p_w, -1)
        hidden_states = hidden_states.permute(0, 7, 1, 4, 2, 5, 3, 6)
        output = hidden_states.flatten(6, 7).flatten(4, 5).flatten(2, 3)
        return (output,)


def build():
    # Wan-sized like the skyreels_v2 replica: 2 heads of 18 (RoPE t/h/w 6/6/6), 2 blocks, text 16 wide, sinusoid
    # 16 wide, rope tables 32 long.
    return KreaTransformerModel(patch_size=(1, 2, 2), num_attention_heads=2, attention_head_dim=18, in_channels=4,
                                out_channels=4, text_dim=16, freq_dim=16, ffn_dim=64, num_layers=2,
                                cross_attn_norm=True, qk_norm="rms_norm_across_heads", eps=1e-6,
                                rope_max_seq_len=32)


def inputs(g):
    return {"encoder_hidden_states": torch.randn((1, 4, 16), generator=g),
            "noise": torch.randn((1, 4, 2, 4, 8), generator=g)}


def call(model, x, sigma, c):
    t = torch.tensor(sigma * 1000, dtype=torch.float32).expand(x.shape[0])
    return model(hidden_states=x, timestep=t, encoder_hidden_states=c["encoder_hidden_states"],
                 return_dict=False)[0]


PRODUCER = dict(
    library_source="replica of huggingface/diffusers transformer_krea.py@0bd80ed670c8 and the parts it imports "
                   "(torch 1.13)",
    timestep="sigma*1000 float32, t.expand(B) (called as the Wan pipelines call their transformer)",
    velocity="model output as is (flow prediction), not negated",
    note="Krea realtime video DiT (Wan-shaped), 2 blocks, no KV cache: 3-D conv patchify; RoPE cos/sin buffers of "
         "the rope module (f64 build, f32), split [D-2(D//3), D//3, D//3] per axis, interleaved pairs on q/k; "
         "Llama-style RMSNorm q/k across heads; plain non-affine LayerNorms, affine LayerNorm before cross-attn; "
         "6-way [1, 6, D] table + timestep_proj modulation; GELU-tanh FFN; final (shift, scale) from a [1, 2, D] "
         "table + temb; 2 latent frames")

if __name__ == "__main__":
    capture("krea", build, inputs, call, sys.argv[1], PRODUCER)
