"""Stable Audio Open's DiT (1-D audio latents), reimplemented for torch 1.13 (no diffusers here), captured small in
f32 on CPU.

Follows huggingface/diffusers src/diffusers/models/transformers/stable_audio_transformer.py at
06d4fb510fee2d769d19abf3b7eeb21d6dcf2590 (StableAudioDiTModel, StableAudioDiTBlock,
StableAudioGaussianFourierProjection) with the parts it imports: attention_processor.py (Attention with kv_heads,
StableAudioAttnProcessor2_0 as its forward), attention.py (FeedForward with activation_fn "swiglu", SwiGLU),
embeddings.py (apply_rotary_emb with use_real and use_real_unbind_dim -2; get_1d_rotary_pos_embed with use_real and
repeat_interleave_real False, as StableAudioPipeline builds the table): the same module tree, parameter names and
shapes, and call boundaries; the arithmetic line for line. Stand-in for what torch 1.13 lacks:
F.scaled_dot_product_attention (its math path, default scale, no mask).

The constructs it shows: 1-D latents [B, C, L] through a residual 1×1 Conv1d (x + conv(x)) and back through
another after proj_out; the timestep as Gaussian-Fourier features (2π·t·W against a frequency vector W that is a
parameter, [cos, sin]: flip_sin_to_cos, log off), in the model's dtype, through a SiLU MLP; a global condition
projected by a bias-free SiLU MLP plus the timestep embedding, PREPENDED to the sequence as one token (the
sequence is L + 1 throughout the blocks) and dropped at the end ([:, :, 1:] after proj_out); plain pre-LayerNorm
blocks (affine LayerNorms, no modulation, ungated residuals): self-attention with partial RoPE (the rotary table
covers the first half of each head's dims, rotate_half layout: [x1, x2] → [−x2, x1], applied in f32 to q and k,
the other half passed through, then cast back), GQA cross-attention (4 query heads over 2 kv heads,
repeat_interleave per head, the context not rotated) over a text condition projected by a bias-free SiLU MLP; a
SwiGLU feed-forward (proj to 2·inner, value·silu(gate)); bias-free attention projections and convs.

Pipeline as StableAudioPipeline (pipeline_stable_audio.py) calls it, guidance off: latents (B, C, L); the rotary
table get_1d_rotary_pos_embed(attention_head_dim // 2, L + 1, use_real=True, repeat_interleave_real=False) in f32
made once and passed in; encoder_hidden_states (text plus the two seconds tokens, here drawn) and
global_hidden_states [B, 1, ·] (the seconds_start/seconds_end pair, here drawn). Simplified: the capture loop's
flow-matching Euler steps stand in for the CosineDPMSolverMultistepScheduler's v-prediction (no input scaling, no
output preconditioning): timestep = sigma as is (float32, in [0, 1]), velocity the output as is.

usage: /usr/bin/python3 bench/unseen/replicas/stable_audio.py OUTDIR
"""
import math
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from run import capture, sdpa


def get_1d_rotary_pos_embed(dim, pos, theta=10000.0, use_real=False, linear_factor=1.0, ntk_factor=1.0,
                            repeat_interleave_real=True, freqs_dtype=torch.float32):
    """embeddings.get_1d_rotary_pos_embed, its use_real branches."""
    assert dim % 2 == 0 and use_real
    if isinstance(pos, int):
        pos = torch.arange(pos)
    if isinstance(pos, np.ndarray):
        pos = torch.from_numpy(pos)
    theta = theta * ntk_factor
    freqs = (1.0 / (theta ** (torch.arange(0, dim, 2, dtype=freqs_dtype, device=pos.device)[: (dim // 2)] / dim))
             / linear_factor)
    freqs = torch.outer(pos, freqs)  # [S, D/2]
    if repeat_interleave_real:
        freqs_cos = freqs.cos().repeat_interleave(2, dim=1).float()
        freqs_sin = freqs.sin().repeat_interleave(2, dim=1).float()
        return freqs_cos, freqs_sin
    freqs_cos = torch.cat([freqs.cos(), freqs.cos()], dim=-1).float()
    freqs_sin = torch.cat([freqs.sin(), freqs.sin()], dim=-1).float()
    return freqs_cos, freqs_sin


def apply_rotary_emb(x, freqs_cis, use_real=True, use_real_unbind_dim=-1, sequence_dim=2):
    """embeddings.apply_rotary_emb, its use_real branch."""
    assert use_real
    cos, sin = freqs_cis  # [S, D]
    if sequence_dim == 2:
        cos = cos[None, None, :, :]
        sin = sin[None, None, :, :]
    elif sequence_dim == 1:
        cos = cos[None, :, None, :]
        sin = sin[None, :, None, :]
    else:
        raise ValueError(f"Invalid sequence_dim: {sequence_dim}")
    cos, sin = cos.to(x.device), sin.to(x.device)
    if use_real_unbind_dim == -1:
        x_real, x_imag = x.reshape(*x.shape[:-1], -1, 2).unbind(-1)
        x_rotated = torch.stack([-x_imag, x_real], dim=-1).flatten(3)
    elif use_real_unbind_dim == -2:
        # Used for Stable Audio, OmniGen, CogView4 and Cosmos
        x_real, x_imag = x.reshape(*x.shape[:-1], 2, -1).unbind(-2)
        x_rotated = torch.cat([-x_imag, x_real], dim=-1)
    else:
        raise ValueError(f"`use_real_unbind_dim={use_real_unbind_dim}` but should be -1 or -2.")
    out = (x.float() * cos + x_rotated.float() * sin).to(x.dtype)
    return out


def stable_audio_attn(attn, hidden_states, encoder_hidden_states=None, attention_mask=None, rotary_emb=None):
    """attention_processor.StableAudioAttnProcessor2_0.__call__."""
    residual = hidden_states
    input_ndim = hidden_states.ndim
    if input_ndim == 4:
        batch_size, channel, height, width = hidden_states.shape
        hidden_states = hidden_states.view(batch_size, channel, height * width).transpose(1, 2)
    batch_size, sequence_length, _ = (
        hidden_states.shape if encoder_hidden_states is None else encoder_hidden_states.shape)
    if attention_mask is not None:
        raise NotImplementedError("no mask in this replica (the pipeline passes none)")
    query = attn.to_q(hidden_states)
    if encoder_hidden_states is None:
        encoder_hidden_states = hidden_states
    elif attn.norm_cross:
        encoder_hidden_states = attn.norm_encoder_hidden_states(encoder_hidden_states)
    key = attn.to_k(encoder_hidden_states)
    value = attn.to_v(encoder_hidden_states)
    head_dim = query.shape[-1] // attn.heads
    kv_heads = key.shape[-1] // head_dim
    query = query.view(batch_size, -1, attn.heads, head_dim).transpose(1, 2)
    key = key.view(batch_size, -1, kv_heads, head_dim).transpose(1, 2)
    value = value.view(batch_size, -1, kv_heads, head_dim).transpose(1, 2)
    if kv_heads != attn.heads:
        # if GQA or MQA, repeat the key/value heads to reach the number of query heads.
        heads_per_kv_head = attn.heads // kv_heads
        key = torch.repeat_interleave(key, heads_per_kv_head, dim=1)
        value = torch.repeat_interleave(value, heads_per_kv_head, dim=1)
    if attn.norm_q is not None:
        query = attn.norm_q(query)
    if attn.norm_k is not None:
        key = attn.norm_k(key)
    # Apply RoPE if needed
    if rotary_emb is not None:
        query_dtype = query.dtype
        key_dtype = key.dtype
        query = query.to(torch.float32)
        key = key.to(torch.float32)
        rot_dim = rotary_emb[0].shape[-1]
        query_to_rotate, query_unrotated = query[..., :rot_dim], query[..., rot_dim:]
        query_rotated = apply_rotary_emb(query_to_rotate, rotary_emb, use_real=True, use_real_unbind_dim=-2)
        query = torch.cat((query_rotated, query_unrotated), dim=-1)
        if not attn.is_cross_attention:
            key_to_rotate, key_unrotated = key[..., :rot_dim], key[..., rot_dim:]
            key_rotated = apply_rotary_emb(key_to_rotate, rotary_emb, use_real=True, use_real_unbind_dim=-2)
            key = torch.cat((key_rotated, key_unrotated), dim=-1)
        query = query.to(query_dtype)
        key = key.to(key_dtype)
    hidden_states = sdpa(query, key, value, mask=attention_mask)
    hidden_states = hidden_states.transpose(1, 2).reshape(batch_size, -1, attn.heads * head_dim)
    hidden_states = hidden_states.to(query.dtype)
    hidden_states = attn.to_out[0](hidden_states)
    hidden_states = attn.to_out[1](hidden_states)
    if input_ndim == 4:
        hidden_states = hidden_states.transpose(-1, -2).reshape(batch_size, channel, height, width)
    if attn.residual_connection:
        hidden_states = hidden_states + residual
    hidden_states = hidden_states / attn.rescale_output_factor
    return hidden_states


class Attention(nn.Module):
    """attention_processor.Attention(query_dim, cross_attention_dim, heads, dim_head, kv_heads, dropout, bias False,
    out_bias False) with StableAudioAttnProcessor2_0's __call__ as its forward."""

    def __init__(self, query_dim, cross_attention_dim=None, heads=8, kv_heads=None, dim_head=64, dropout=0.0,
                 bias=False, upcast_attention=False, out_bias=True, processor=None):
        super().__init__()
        self.inner_dim = dim_head * heads
        self.inner_kv_dim = self.inner_dim if kv_heads is None else dim_head * kv_heads
        self.query_dim = query_dim
        self.is_cross_attention = cross_attention_dim is not None
        self.cross_attention_dim = cross_attention_dim if cross_attention_dim is not None else query_dim
        self.rescale_output_factor = 1.0
        self.residual_connection = False
        self.scale = dim_head ** -0.5
        self.heads = heads
        self.norm_q = None
        self.norm_k = None
        self.norm_cross = None
        self.to_q = nn.Linear(query_dim, self.inner_dim, bias=bias)
        self.to_k = nn.Linear(self.cross_attention_dim, self.inner_kv_dim, bias=bias)
        self.to_v = nn.Linear(self.cross_attention_dim, self.inner_kv_dim, bias=bias)
        self.to_out = nn.ModuleList([nn.Linear(self.inner_dim, query_dim, bias=out_bias), nn.Dropout(dropout)])
        self.processor = processor

    def forward(self, hidden_states, encoder_hidden_states=None, attention_mask=None, **kwargs):
        return self.processor(self, hidden_states, encoder_hidden_states=encoder_hidden_states,
                              attention_mask=attention_mask, **kwargs)


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
    """attention.FeedForward(dim, activation_fn="swiglu", final_dropout=False, inner_dim, bias=True)."""

    def __init__(self, dim, dim_out=None, mult=4, dropout=0.0, activation_fn="swiglu", final_dropout=False,
                 inner_dim=None, bias=True):
        super().__init__()
        if inner_dim is None:
            inner_dim = int(dim * mult)
        dim_out = dim_out if dim_out is not None else dim
        assert activation_fn == "swiglu" and not final_dropout
        act_fn = SwiGLU(dim, inner_dim, bias=bias)
        self.net = nn.ModuleList([act_fn, nn.Dropout(dropout), nn.Linear(inner_dim, dim_out, bias=bias)])

    def forward(self, hidden_states):
        for module in self.net:
            hidden_states = module(hidden_states)
        return hidden_states


class StableAudioGaussianFourierProjection(nn.Module):
    """Gaussian Fourier embeddings for noise levels."""

    def __init__(self, embedding_size=256, scale=1.0, set_W_to_weight=True, log=True, flip_sin_to_cos=False):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(embedding_size) * scale, requires_grad=False)
        self.log = log
        self.flip_sin_to_cos = flip_sin_to_cos
        if set_W_to_weight:
            # to delete later
            del self.weight
            self.W = nn.Parameter(torch.randn(embedding_size) * scale, requires_grad=False)
            self.weight = self.W
            del self.W

    def forward(self, x):
        if self.log:
            x = torch.log(x)
        x_proj = 2 * np.pi * x[:, None] @ self.weight[None, :]
        if self.flip_sin_to_cos:
            out = torch.cat([torch.cos(x_proj), torch.sin(x_proj)], dim=-1)
        else:
            out = torch.cat([torch.sin(x_proj), torch.cos(x_proj)], dim=-1)
        return out


class StableAudioDiTBlock(nn.Module):
    def __init__(self, dim, num_attention_heads, num_key_value_attention_heads, attention_head_dim, dropout=0.0,
                 cross_attention_dim=None, upcast_attention=False, norm_eps=1e-5, ff_inner_dim=None):
        super().__init__()
        # 1. Self-Attn
        self.norm1 = nn.LayerNorm(dim, elementwise_affine=True, eps=norm_eps)
        self.attn1 = Attention(query_dim=dim, heads=num_attention_heads, dim_head=attention_head_dim,
                               dropout=dropout, bias=False, upcast_attention=upcast_attention, out_bias=False,
                               processor=stable_audio_attn)
        # 2. Cross-Attn
        self.norm2 = nn.LayerNorm(dim, norm_eps, True)
        self.attn2 = Attention(query_dim=dim, cross_attention_dim=cross_attention_dim, heads=num_attention_heads,
                               dim_head=attention_head_dim, kv_heads=num_key_value_attention_heads, dropout=dropout,
                               bias=False, upcast_attention=upcast_attention, out_bias=False,
                               processor=stable_audio_attn)
        # 3. Feed-forward
        self.norm3 = nn.LayerNorm(dim, norm_eps, True)
        self.ff = FeedForward(dim, dropout=dropout, activation_fn="swiglu", final_dropout=False,
                              inner_dim=ff_inner_dim, bias=True)

    def forward(self, hidden_states, attention_mask=None, encoder_hidden_states=None, encoder_attention_mask=None,
                rotary_embedding=None):
        # 0. Self-Attention
        norm_hidden_states = self.norm1(hidden_states)
        attn_output = self.attn1(norm_hidden_states, attention_mask=attention_mask, rotary_emb=rotary_embedding)
        hidden_states = attn_output + hidden_states
        # 2. Cross-Attention
        norm_hidden_states = self.norm2(hidden_states)
        attn_output = self.attn2(norm_hidden_states, encoder_hidden_states=encoder_hidden_states,
                                 attention_mask=encoder_attention_mask)
        hidden_states = attn_output + hidden_states
        # 3. Feed-forward
        norm_hidden_states = self.norm3(hidden_states)
        ff_output = self.ff(norm_hidden_states)
        hidden_states = ff_output + hidden_states
        return hidden_states


class StableAudioDiTModel(nn.Module):
    def __init__(self, sample_size=1024, in_channels=64, num_layers=24, attention_head_dim=64, num_attention_heads=24,
                 num_key_value_attention_heads=12, out_channels=64, cross_attention_dim=768, time_proj_dim=256,
                 global_states_input_dim=1536, cross_attention_input_dim=768):
        super().__init__()
        self.sample_size = sample_size
        self.out_channels = out_channels
        self.inner_dim = num_attention_heads * attention_head_dim
        self.time_proj = StableAudioGaussianFourierProjection(embedding_size=time_proj_dim // 2, flip_sin_to_cos=True,
                                                              log=False, set_W_to_weight=False)
        self.timestep_proj = nn.Sequential(nn.Linear(time_proj_dim, self.inner_dim, bias=True), nn.SiLU(),
                                           nn.Linear(self.inner_dim, self.inner_dim, bias=True))
        self.global_proj = nn.Sequential(nn.Linear(global_states_input_dim, self.inner_dim, bias=False), nn.SiLU(),
                                         nn.Linear(self.inner_dim, self.inner_dim, bias=False))
        self.cross_attention_proj = nn.Sequential(nn.Linear(cross_attention_input_dim, cross_attention_dim, bias=False),
                                                  nn.SiLU(),
                                                  nn.Linear(cross_attention_dim, cross_attention_dim, bias=False))
        self.preprocess_conv = nn.Conv1d(in_channels, in_channels, 1, bias=False)
        self.proj_in = nn.Linear(in_channels, self.inner_dim, bias=False)
        self.transformer_blocks = nn.ModuleList([
            StableAudioDiTBlock(dim=self.inner_dim, num_attention_heads=num_attention_heads,
                                num_key_value_attention_heads=num_key_value_attention_heads,
                                attention_head_dim=attention_head_dim, cross_attention_dim=cross_attention_dim)
            for i in range(num_layers)])
        self.proj_out = nn.Linear(self.inner_dim, self.out_channels, bias=False)
        self.postprocess_conv = nn.Conv1d(self.out_channels, self.out_channels, 1, bias=False)

    @property
    def dtype(self):
        """ModelMixin.dtype: the parameters' floating dtype."""
        return next(p.dtype for p in self.parameters() if p.is_floating_point())

    def forward(self, hidden_states, timestep=None, encoder_hidden_states=None, global_hidden_states=None,
                rotary_embedding=None, return_dict=True, attention_mask=None, encoder_attention_mask=None):
        cross_attention_hidden_states = self.cross_attention_proj(encoder_hidden_states)
        global_hidden_states = self.global_proj(global_hidden_states)
        time_hidden_states = self.timestep_proj(self.time_proj(timestep.to(self.dtype)))
        global_hidden_states = global_hidden_states + time_hidden_states.unsqueeze(1)
        hidden_states = self.preprocess_conv(hidden_states) + hidden_states
        # (batch_size, dim, sequence_length) -> (batch_size, sequence_length, dim)
        hidden_states = hidden_states.transpose(1, 2)
        hidden_states = self.proj_in(hidden_states)
        # prepend global states to hidden states
        hidden_states = torch.cat([global_hidden_states, hidden_states], dim=-2)
        if attention_mask is not None:
            prepend_mask = torch.ones((hidden_states.shape[0], 1), device=hidden_states.device, dtype=torch.bool)
            attention_mask = torch.cat([prepend_mask, attention_mask], dim=-1)
        for block in self.transformer_blocks:
            hidden_states = block(hidden_states=hidden_states, attention_mask=attention_mask,
                                  encoder_hidden_states=cross_attention_hidden_states,
                                  encoder_attention_mask=encoder_attention_mask, rotary_embedding=rotary_embedding)
        hidden_states = self.proj_out(hidden_states)
        # (batch_size, sequence_length, dim) -> (batch_size, dim, sequence_length)
        # remove prepend length that has been added by global hidden states
        hidden_states = hidden_states.transpose(1, 2)[:, :, 1:]
        hidden_states = self.postprocess_conv(hidden_states) + hidden_states
        return (hidden_states,)


ATTENTION_HEAD_DIM = 16


def build():
    # 4 query heads of 16 (d 64) over 2 kv heads in the cross-attention, 2 blocks, 8 latent channels, a 32-wide
    # cross-attention context from 24-wide text rows, a 48-wide global condition, 32 Fourier features (16 freqs).
    return StableAudioDiTModel(sample_size=16, in_channels=8, num_layers=2, attention_head_dim=ATTENTION_HEAD_DIM,
                               num_attention_heads=4, num_key_value_attention_heads=2, out_channels=8,
                               cross_attention_dim=32, time_proj_dim=32, global_states_input_dim=48,
                               cross_attention_input_dim=24)


def inputs(g):
    length = 16
    # StableAudioPipeline: rotary_embed_dim = attention_head_dim // 2, over the latent length + the global token
    cos, sin = get_1d_rotary_pos_embed(ATTENTION_HEAD_DIM // 2, length + 1, use_real=True,
                                       repeat_interleave_real=False)
    return {"encoder_hidden_states": torch.randn((1, 6, 24), generator=g),
            "global_hidden_states": torch.randn((1, 1, 48), generator=g),
            "rotary_cos": cos, "rotary_sin": sin,
            "noise": torch.randn((1, 8, length), generator=g)}


def call(model, x, sigma, c):
    t = torch.tensor([sigma], dtype=torch.float32)
    return model(x, t, encoder_hidden_states=c["encoder_hidden_states"],
                 global_hidden_states=c["global_hidden_states"],
                 rotary_embedding=(c["rotary_cos"], c["rotary_sin"]), return_dict=False)[0]


PRODUCER = dict(
    library_source="replica of huggingface/diffusers stable_audio_transformer.py@06d4fb510fee and the parts it "
                   "imports (torch 1.13)",
    timestep="sigma as is (float32; stands in for the cosine DPM scheduler's t in [0, 1])",
    velocity="model output as is, not negated (the v-prediction preconditioning left out)",
    note="Stable Audio DiT, 2 blocks on 1-D latents [1, 8, 16]: residual 1x1 Conv1d in and out; Gaussian-Fourier "
         "timestep features (2π·t·W, [cos, sin]) in the model dtype through a SiLU MLP; global condition "
         "(bias-free SiLU MLP) + timestep embedding prepended as one token and dropped after proj_out; "
         "pre-LayerNorm blocks without modulation or gates; self-attention with partial RoPE (first 8 of 16 head "
         "dims, rotate_half layout, f32, table passed in); GQA cross-attention (4 q heads over 2 kv heads, "
         "repeat_interleave) over a bias-free SiLU MLP projection of the text; SwiGLU feed-forward; no masks")

if __name__ == "__main__":
    capture("stable_audio", build, inputs, call, sys.argv[1], PRODUCER)
