"""MAGI-1 (diffusers' first port of it), reimplemented for torch 1.13 (no diffusers here), captured small in f32 on
CPU.

Follows huggingface/diffusers src/diffusers/models/transformers/transformer_magi.py at
9b4531746fc7c09d295d8d78153123f943810956 (MagiAttention, MagiTransformerBlock, LearnableRotaryEmbedding,
MagiTransformer3DModel) with the parts it imports from embeddings.py (Timesteps, TimestepEmbedding): the same
module tree, parameter names and shapes, buffers and call boundaries; the arithmetic line for line. Stand-in for
what torch 1.13 lacks: F.scaled_dot_product_attention (its math path, no mask; the file's own manual fallback is
the branch torch 2 never takes). Upstream cannot run on a bf16 placement: it hands the f32 sinusoid to a bf16
time_embedding.linear_1, and f32 head-split q/k to bf16-placed q/k LayerNorms (both dtype errors). The bf16 run
departs there only: the sinusoid cast to the layer's dtype, the q/k norms' affine taken in f32 (no-ops in f32).

The constructs it shows: the timestep embedding added to every token (no modulation, no gates at all); q/k
LayerNorms with affine over each head's dim_head, run in f32 on the head-split q/k; a 3-D RoPE whose positions
are linspace(-1, 1) along frames, height and width, its bands 1/10000^(i/(d/2))·π, the same first d//6 bands used
for all three axes, and the remaining d/2 − 3·(d//6) complex pairs padded with cos = sin = 0 (so those q/k
channels are multiplied by zero); the same RoPE applied in the cross-attention to the queries and to the caption's
keys (the caption as long as the video's token count, as the broadcast requires); bias-free q/k/v, a biased output
projection; a plain exact-GELU 4x MLP; a channels-last 1x1x1 Conv3d input and output projection; the model's
input added back to its output (a residual over the whole network).

Pipeline (pipeline_magi.py at 4bc62593e64b): one call per step, timestep = t expanded over the batch (the
flow-matching scheduler's t = sigma·1000), the prompt embeddings as encoder_hidden_states, the output taken as
the velocity of scheduler.step. That pipeline passes `timestep=`; this file's forward names it `timesteps`, so the
replica passes it by that name.

usage: /usr/bin/python3 bench/unseen/replicas/magi.py OUTDIR
"""
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

from parts import TimestepEmbedding, Timesteps
from run import capture, sdpa


class LayerNorm(nn.LayerNorm):
    """nn.LayerNorm; the bf16 run's departure: a bf16-placed norm given an f32 input (a dtype error upstream)
    takes its affine in f32. Identical to nn.LayerNorm whenever the dtypes agree."""

    def forward(self, x):
        if self.weight.dtype == x.dtype:
            return super().forward(x)
        return F.layer_norm(x, self.normalized_shape, self.weight.float(), self.bias.float(), self.eps)


class MagiAttention(nn.Module):
    def __init__(self, query_dim, cross_attention_dim=None, heads=8, dim_head=64, dropout=0.0, bias=False):
        super().__init__()
        inner_dim = dim_head * heads
        cross_attention_dim = cross_attention_dim if cross_attention_dim is not None else query_dim
        self.scale = dim_head ** -0.5
        self.heads = heads
        self.dim_head = dim_head
        self.to_q = nn.Linear(query_dim, inner_dim, bias=bias)
        self.to_k = nn.Linear(cross_attention_dim, inner_dim, bias=bias)
        self.to_v = nn.Linear(cross_attention_dim, inner_dim, bias=bias)
        self.norm_q = LayerNorm(dim_head, eps=1e-5)
        self.norm_k = LayerNorm(dim_head, eps=1e-5)
        self.to_out = nn.Sequential(nn.Linear(inner_dim, query_dim), nn.Dropout(dropout))

    def forward(self, hidden_states, encoder_hidden_states=None, attention_mask=None, rotary_pos_emb=None):
        batch_size, sequence_length, _ = hidden_states.shape
        encoder_hidden_states = encoder_hidden_states if encoder_hidden_states is not None else hidden_states
        query = self.to_q(hidden_states)
        key = self.to_k(encoder_hidden_states)
        value = self.to_v(encoder_hidden_states)
        query = query.reshape(batch_size, sequence_length, self.heads, self.dim_head)
        key = key.reshape(batch_size, -1, self.heads, self.dim_head)
        value = value.reshape(batch_size, -1, self.heads, self.dim_head)
        orig_dtype = query.dtype
        query = self.norm_q(query.float()).to(orig_dtype)
        key = self.norm_k(key.float()).to(orig_dtype)
        query = query.transpose(1, 2)
        key = key.transpose(1, 2)
        value = value.transpose(1, 2)
        if rotary_pos_emb is not None:
            def apply_rotary_emb(hidden_states, freqs):
                x_complex = torch.view_as_complex(hidden_states.to(torch.float64).unflatten(-1, (-1, 2)))
                x_rotated = x_complex * freqs
                x_out = torch.view_as_real(x_rotated).flatten(-2)
                return x_out.type_as(hidden_states)

            query = apply_rotary_emb(query, rotary_pos_emb)
            key = apply_rotary_emb(key, rotary_pos_emb)
        if attention_mask is not None:
            raise NotImplementedError("no mask in this replica (the pipeline passes none)")
        hidden_states = sdpa(query, key, value)
        hidden_states = hidden_states.transpose(1, 2).reshape(batch_size, sequence_length, -1)
        return self.to_out(hidden_states)


class MagiTransformerBlock(nn.Module):
    def __init__(self, dim, num_attention_heads, attention_head_dim, cross_attention_dim=None, norm_eps=1e-5,
                 attention_bias=False):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, eps=norm_eps, elementwise_affine=True)
        self.attn1 = MagiAttention(query_dim=dim, heads=num_attention_heads, dim_head=attention_head_dim,
                                   bias=attention_bias)
        self.norm2 = nn.LayerNorm(dim, eps=norm_eps, elementwise_affine=True)
        self.attn2 = MagiAttention(query_dim=dim, cross_attention_dim=cross_attention_dim,
                                   heads=num_attention_heads, dim_head=attention_head_dim, bias=attention_bias)
        self.norm3 = nn.LayerNorm(dim, eps=norm_eps, elementwise_affine=True)
        self.ff = nn.Sequential(nn.Linear(dim, dim * 4), nn.GELU(), nn.Identity(), nn.Linear(dim * 4, dim))
        self.final_dropout = nn.Identity()

    def forward(self, hidden_states, encoder_hidden_states=None, timestep=None, attention_mask=None,
                cross_attention_kwargs=None, rotary_pos_emb=None):
        norm_hidden_states = self.norm1(hidden_states)
        hidden_states = hidden_states + self.attn1(norm_hidden_states, attention_mask=attention_mask,
                                                   rotary_pos_emb=rotary_pos_emb)
        norm_hidden_states = self.norm2(hidden_states)
        hidden_states = hidden_states + self.attn2(norm_hidden_states, encoder_hidden_states=encoder_hidden_states,
                                                   attention_mask=attention_mask, rotary_pos_emb=rotary_pos_emb)
        norm_hidden_states = self.norm3(hidden_states)
        ff_output = self.ff(norm_hidden_states)
        hidden_states = hidden_states + self.final_dropout(ff_output)
        return hidden_states


class LearnableRotaryEmbedding(nn.Module):
    def __init__(self, dim, max_seq_len=1024, temperature=10000.0, in_pixels=True, linear_bands=False):
        super().__init__()
        self.dim = dim
        self.max_seq_len = max_seq_len
        self.temperature = temperature
        self.in_pixels = in_pixels
        self.linear_bands = linear_bands
        self.register_buffer("freqs", self._get_default_bands())

    def _get_default_bands(self):
        if self.linear_bands:
            bands = torch.linspace(1.0, self.max_seq_len / 2, self.dim // 2, dtype=torch.float32)
        else:
            bands = 1.0 / (self.temperature ** (torch.arange(0, self.dim // 2, dtype=torch.float32) / (self.dim // 2)))
        return bands * torch.pi

    def get_embed(self, shape):
        frames, height, width = shape
        seq_len = frames * height * width
        if self.in_pixels:
            t = torch.linspace(-1.0, 1.0, steps=frames, device=self.freqs.device)
            h = torch.linspace(-1.0, 1.0, steps=height, device=self.freqs.device)
            w = torch.linspace(-1.0, 1.0, steps=width, device=self.freqs.device)
        else:
            t = torch.arange(frames, device=self.freqs.device, dtype=torch.float32)
            h = torch.arange(height, device=self.freqs.device, dtype=torch.float32)
            w = torch.arange(width, device=self.freqs.device, dtype=torch.float32)
            h = h - (height - 1) / 2
            w = w - (width - 1) / 2
        grid = torch.stack(torch.meshgrid(t, h, w, indexing="ij"), dim=-1)
        grid = grid.reshape(-1, 3)
        freqs = self.freqs.to(grid.device)
        t_emb = torch.outer(grid[:, 0], freqs[: self.dim // 6])
        t_sin = torch.sin(t_emb)
        t_cos = torch.cos(t_emb)
        h_emb = torch.outer(grid[:, 1], freqs[: self.dim // 6])
        h_sin = torch.sin(h_emb)
        h_cos = torch.cos(h_emb)
        w_emb = torch.outer(grid[:, 2], freqs[: self.dim // 6])
        w_sin = torch.sin(w_emb)
        w_cos = torch.cos(w_emb)
        sin_emb = torch.cat([t_sin, h_sin, w_sin], dim=-1)
        cos_emb = torch.cat([t_cos, h_cos, w_cos], dim=-1)
        target_dim = self.dim // 2
        if sin_emb.shape[1] < target_dim:
            pad_size = target_dim - sin_emb.shape[1]
            sin_emb = F.pad(sin_emb, (0, pad_size))
            cos_emb = F.pad(cos_emb, (0, pad_size))
        elif sin_emb.shape[1] > target_dim:
            sin_emb = sin_emb[:, :target_dim]
            cos_emb = cos_emb[:, :target_dim]
        return torch.cat([cos_emb.unsqueeze(-1), sin_emb.unsqueeze(-1)], dim=-1).reshape(seq_len, target_dim, 2)


class MagiTransformer3DModel(nn.Module):
    def __init__(self, in_channels=4, out_channels=4, num_layers=24, num_attention_heads=16, attention_head_dim=64,
                 cross_attention_dim=1280, norm_eps=1e-5, attention_bias=False, patch_size=(1, 1, 1),
                 max_seq_len=1024):
        super().__init__()
        self.patch_size = patch_size
        self.max_seq_len = max_seq_len
        self.in_channels = in_channels
        time_embed_dim = attention_head_dim * num_attention_heads
        self.time_proj = Timesteps(time_embed_dim, flip_sin_to_cos=True, downscale_freq_shift=0)
        self.time_embedding = TimestepEmbedding(time_embed_dim, time_embed_dim)
        self.input_proj = nn.Conv3d(in_channels, time_embed_dim, kernel_size=patch_size, stride=patch_size)
        self.rotary_embedding = LearnableRotaryEmbedding(dim=attention_head_dim, max_seq_len=max_seq_len,
                                                         temperature=10000.0)
        self.transformer_blocks = nn.ModuleList([
            MagiTransformerBlock(dim=time_embed_dim, num_attention_heads=num_attention_heads,
                                 attention_head_dim=attention_head_dim, cross_attention_dim=cross_attention_dim,
                                 norm_eps=norm_eps, attention_bias=attention_bias)
            for _ in range(num_layers)])
        self.out_channels = out_channels
        self.output_proj = nn.Conv3d(time_embed_dim, out_channels, kernel_size=1)

    def forward(self, hidden_states, timesteps=None, encoder_hidden_states=None, attention_mask=None,
                cross_attention_kwargs=None, return_dict=True):
        batch_size, channels, frames, height, width = hidden_states.shape
        residual = hidden_states
        if timesteps is not None:
            timesteps = timesteps.to(hidden_states.device)
            time_embeds = self.time_proj(timesteps)
            # the replica's one departure (bf16 only; a no-op in f32): see the docstring
            time_embeds = time_embeds.to(self.time_embedding.linear_1.weight.dtype)
            time_embeds = self.time_embedding(time_embeds)
        else:
            time_embeds = None
        hidden_states = self.input_proj(hidden_states)
        p_t, p_h, p_w = self.patch_size
        patched_frames = frames // p_t
        patched_height = height // p_h
        patched_width = width // p_w
        hidden_states = hidden_states.permute(0, 2, 3, 4, 1)
        hidden_states = hidden_states.reshape(batch_size, patched_frames * patched_height * patched_width, -1)
        if time_embeds is not None:
            time_embeds = time_embeds.unsqueeze(1)
            hidden_states = hidden_states + time_embeds
        rotary_pos_emb = self.rotary_embedding.get_embed([patched_frames, patched_height, patched_width])
        rotary_pos_emb = rotary_pos_emb.to(hidden_states.device)
        cos_emb = rotary_pos_emb[..., 0]
        sin_emb = rotary_pos_emb[..., 1]
        rotary_pos_emb = torch.complex(cos_emb, sin_emb).unsqueeze(0)
        for block in self.transformer_blocks:
            hidden_states = block(hidden_states, encoder_hidden_states=encoder_hidden_states, timestep=timesteps,
                                  attention_mask=attention_mask, cross_attention_kwargs=cross_attention_kwargs,
                                  rotary_pos_emb=rotary_pos_emb)
        hidden_states = hidden_states.reshape(batch_size, patched_frames, patched_height, patched_width, -1)
        hidden_states = hidden_states.permute(0, 4, 1, 2, 3)
        hidden_states = self.output_proj(hidden_states)
        hidden_states = hidden_states + residual
        return (hidden_states,)


def build():
    # 2 heads of 16 (d//6 = 2 bands per axis, 2 of 8 complex pairs zero-padded), 2 blocks, caption 16 wide,
    # 4 latent channels, patch 1x1x1 (the only size whose output the residual can take).
    return MagiTransformer3DModel(in_channels=4, out_channels=4, num_layers=2, num_attention_heads=2,
                                  attention_head_dim=16, cross_attention_dim=16)


def inputs(g):
    # 2 frames of 4x4: 32 tokens; the caption 32 long (the cross-attention's keys take the video's RoPE)
    return {"encoder_hidden_states": torch.randn((1, 32, 16), generator=g),
            "noise": torch.randn((1, 4, 2, 4, 4), generator=g)}


def call(model, x, sigma, c):
    t = torch.tensor([sigma * 1000], dtype=torch.float32).expand(x.shape[0])
    return model(x, timesteps=t, encoder_hidden_states=c["encoder_hidden_states"], return_dict=False)[0]


PRODUCER = dict(
    library_source="replica of huggingface/diffusers transformer_magi.py@9b4531746fc7 and the parts it imports "
                   "(torch 1.13)",
    timestep="sigma*1000 (float32)",
    velocity="model output as is (flow prediction, the input added back inside), not negated",
    note="MAGI-1 (diffusers' first port), 2 blocks: timestep embedding added to every token, no modulation; "
         "per-head LayerNorm q/k in f32; 3-D RoPE on linspace(-1,1) positions, the same d//6 bands per axis, "
         "trailing pairs zeroed (cos=sin=0); RoPE on the cross-attention's queries and caption keys too; exact "
         "GELU MLP; 1x1x1 conv in/out projections; the input added to the output")

if __name__ == "__main__":
    capture("magi", build, inputs, call, sys.argv[1], PRODUCER)
