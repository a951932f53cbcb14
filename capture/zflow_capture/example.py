"""A small DiT-style reference, written with plain torch modules, and its capture.

What it computes (fixtures/dit/README.md lists these as the truths a
discovery must find):

- timestep: sigma arrives in the model dtype, is multiplied by 1000 in f32 and
  embedded as a 64-channel sinusoid, cos half first (flip_sin_to_cos), no
  frequency shift, max period 10000; then linear -> SiLU -> linear;
- text rows (encoder_hidden_states -> linear) come first in one joint sequence
  with the image rows (latent tokens -> linear); both pass through the same blocks;
- each block: SiLU(temb) -> linear -> 6 chunks in order shift, scale, gate
  (attention) and shift, scale, gate (MLP); LayerNorm without affine, eps 1e-6;
  norm(x) * (1 + scale) + shift; gated residual x + gate * y (identity gate);
- attention: 2 heads of 16, per-head RMSNorm on q and k (eps 1e-6, normalised
  in f32, cast back, then times the weight), interleaved RoPE over 2 axes of 8
  channels (image row, image column; text rows at position 0), theta 10000,
  applied in f32 and rounded after; softmax(q k^T / 4) v;
- MLP: linear (4x) -> GELU tanh approximation -> linear, not gated;
- final norm: SiLU(temb) -> linear -> 2 chunks scale, shift; then linear out;
- sampler: flow-matching Euler over sigmas [1.0, 0.75, 0.4, 0.0],
  x <- x + (sigma[i+1] - sigma[i]) * v, computed in f32 (sigmas are f32) and
  rounded to the model dtype.
"""

import math
from dataclasses import dataclass

import torch
from torch import nn

from .capture import Capture

SIGMAS = [1.0, 0.75, 0.4, 0.0]
HIDDEN, HEADS, GRID, IN_CHANNELS = 32, 2, (3, 4), 16  # GRID: image rows x columns
TEXT_LEN, TEXT_DIM, FREQ_DIM = 4, 24, 64
AXES = (8, 8)  # RoPE channels per position axis (row, column); sum = head dim


@dataclass
class DiTOutput:
    sample: torch.Tensor


class Timesteps(nn.Module):
    def __init__(self, dim=FREQ_DIM, max_period=10000.0):
        super().__init__()
        self.dim, self.max_period = dim, max_period

    def forward(self, t):
        half = self.dim // 2
        freqs = torch.exp(-math.log(self.max_period) * torch.arange(half, dtype=torch.float32, device=t.device) / half)
        args = (t.float() * 1000.0)[:, None] * freqs[None]
        return torch.cat([torch.cos(args), torch.sin(args)], dim=-1)


class TimestepEmbedding(nn.Module):
    def __init__(self, dim_in, dim):
        super().__init__()
        self.linear_1 = nn.Linear(dim_in, dim)
        self.act = nn.SiLU()
        self.linear_2 = nn.Linear(dim, dim)

    def forward(self, emb):
        return self.linear_2(self.act(self.linear_1(emb.to(self.linear_1.weight.dtype))))


def positions(grid, text_len, device):
    """(row, column) of each row of the joint sequence: text rows at 0, then the image grid."""
    rows, cols = grid
    r, c = torch.meshgrid(torch.arange(rows, device=device), torch.arange(cols, device=device), indexing="ij")
    image = torch.stack([r.reshape(-1), c.reshape(-1)], dim=-1)
    return torch.cat([torch.zeros(text_len, 2, dtype=image.dtype, device=device), image]).float()


class RotaryEmbedding(nn.Module):
    """cos and sin per row of the joint sequence, pairs interleaved, in f32."""

    def __init__(self, axes=AXES, theta=10000.0):
        super().__init__()
        self.axes, self.theta = axes, theta

    def forward(self, ids):
        angles = []
        for axis, dim in enumerate(self.axes):
            inv = 1.0 / self.theta ** (torch.arange(0, dim, 2, dtype=torch.float32, device=ids.device) / dim)
            angles.append((ids[:, axis:axis + 1] * inv[None]).repeat_interleave(2, dim=-1))
        angles = torch.cat(angles, dim=-1)
        return torch.cos(angles), torch.sin(angles)


def apply_rope(x, cos, sin):
    xf = x.float()
    pairs = xf.unflatten(-1, (-1, 2))
    rotated = torch.stack([-pairs[..., 1], pairs[..., 0]], dim=-1).flatten(-2)
    return (xf * cos + rotated * sin).to(x.dtype)


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        xf = x.float()
        normed = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * normed.to(x.dtype)


class Attention(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads, self.head_dim = heads, dim // heads
        self.to_q, self.to_k, self.to_v = nn.Linear(dim, dim), nn.Linear(dim, dim), nn.Linear(dim, dim)
        self.norm_q, self.norm_k = RMSNorm(self.head_dim), RMSNorm(self.head_dim)
        self.to_out = nn.Linear(dim, dim)

    def forward(self, hidden_states, rotary_emb):
        b, s, _ = hidden_states.shape

        def heads(t):
            return t.view(b, s, self.heads, self.head_dim).transpose(1, 2)

        q = apply_rope(self.norm_q(heads(self.to_q(hidden_states))), *rotary_emb)
        k = apply_rope(self.norm_k(heads(self.to_k(hidden_states))), *rotary_emb)
        v = heads(self.to_v(hidden_states))
        weights = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(self.head_dim), dim=-1)
        out = (weights @ v).transpose(1, 2).reshape(b, s, -1)
        return self.to_out(out)


class FeedForward(nn.Module):
    def __init__(self, dim, mult=4):
        super().__init__()
        self.proj_in = nn.Linear(dim, dim * mult)
        self.act = nn.GELU(approximate="tanh")
        self.proj_out = nn.Linear(dim * mult, dim)

    def forward(self, x):
        return self.proj_out(self.act(self.proj_in(x)))


class DiTBlock(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.modulation = nn.Sequential(nn.SiLU(), nn.Linear(dim, 6 * dim))
        self.norm1 = nn.LayerNorm(dim, elementwise_affine=False, eps=1e-6)
        self.attn = Attention(dim, heads)
        self.norm2 = nn.LayerNorm(dim, elementwise_affine=False, eps=1e-6)
        self.ff = FeedForward(dim)

    def forward(self, hidden_states, temb, rotary_emb):
        shift_msa, scale_msa, gate_msa, shift_mlp, scale_mlp, gate_mlp = self.modulation(temb)[:, None].chunk(6, dim=-1)
        x = hidden_states
        h = self.norm1(x) * (1 + scale_msa) + shift_msa
        x = x + gate_msa * self.attn(h, rotary_emb=rotary_emb)
        h = self.norm2(x) * (1 + scale_mlp) + shift_mlp
        return x + gate_mlp * self.ff(h)


class AdaNormOut(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.act = nn.SiLU()
        self.linear = nn.Linear(dim, 2 * dim)
        self.norm = nn.LayerNorm(dim, elementwise_affine=False, eps=1e-6)

    def forward(self, x, temb):
        scale, shift = self.linear(self.act(temb))[:, None].chunk(2, dim=-1)
        return self.norm(x) * (1 + scale) + shift


class TinyDiT(nn.Module):
    def __init__(self, dim=HIDDEN, heads=HEADS, depth=2):
        super().__init__()
        self.grid = GRID
        self.x_embedder = nn.Linear(IN_CHANNELS, dim)
        self.context_embedder = nn.Linear(TEXT_DIM, dim)
        self.time_proj = Timesteps()
        self.time_embed = TimestepEmbedding(FREQ_DIM, dim)
        self.pos_embed = RotaryEmbedding()
        self.blocks = nn.ModuleList(DiTBlock(dim, heads) for _ in range(depth))
        self.norm_out = AdaNormOut(dim)
        self.proj_out = nn.Linear(dim, IN_CHANNELS)

    def forward(self, hidden_states, encoder_hidden_states, timestep, return_dict=True):
        img = self.x_embedder(hidden_states)
        txt = self.context_embedder(encoder_hidden_states)
        temb = self.time_embed(self.time_proj(timestep))
        rope = self.pos_embed(positions(self.grid, txt.shape[1], hidden_states.device))
        x = torch.cat([txt, img], dim=1)  # text rows first
        for block in self.blocks:
            x = block(x, temb=temb, rotary_emb=rope)
        out = self.proj_out(self.norm_out(x[:, txt.shape[1]:], temb))
        return DiTOutput(sample=out) if return_dict else (out,)


def randomize(model, generator):
    """1-D weights in 1 +- 0.2, biases 0.1 N(0,1), matrices N(0,1)/sqrt(fan_in):
    no factor can hide behind a zero or a one."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("bias"):
                p.copy_(0.1 * torch.randn(p.shape, generator=generator))
            elif p.ndim == 1:
                p.copy_(1 + 0.2 * (2 * torch.rand(p.shape, generator=generator) - 1))
            else:
                p.copy_(torch.randn(p.shape, generator=generator) / math.sqrt(p.shape[1]))


def build(seed=0, dtype=torch.float32, device="cpu"):
    """The model and its inputs (noise, encoder_hidden_states), seeded."""
    g = torch.Generator().manual_seed(seed)
    model = TinyDiT()
    randomize(model, g)
    noise = torch.randn(1, GRID[0] * GRID[1], IN_CHANNELS, generator=g)
    text = torch.randn(1, TEXT_LEN, TEXT_DIM, generator=g)
    return model.to(device, dtype).eval(), noise.to(device, dtype), text.to(device, dtype)


@torch.no_grad()
def capture(path, dtype=torch.float32, device="cpu", seed=0, **options):
    """Run the 3-step Euler sampler under a Capture; returns the capture's summary."""
    model, x, text = build(seed, dtype, device)
    sigmas = torch.tensor(SIGMAS, dtype=torch.float32)
    with Capture(model, name="transformer", path=path, **options) as cap:
        cap.input("noise", x)
        cap.input("encoder_hidden_states", text)
        cap.input("sigmas", sigmas)
        for i in range(len(SIGMAS) - 1):
            timestep = sigmas[i:i + 1].to(device, dtype)
            with cap.step(i):
                v = model(hidden_states=x, encoder_hidden_states=text, timestep=timestep, return_dict=False)[0]
            x = (x.float() + (sigmas[i + 1] - sigmas[i]) * v.float()).to(dtype)
        cap.output("latents", x)
    return cap.summary
