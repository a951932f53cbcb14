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

Planted faults (`build(fault=...)`, `capture(fault=...)`), each one change that
a port might make, everything else (weights from the same seed, inputs, module
paths, ports) unchanged; capture/examples/planted_faults.py writes them to
fixtures/faults/, whose README.md says where each shows first:

- "swap_shift_scale": the blocks read their 6 modulation chunks as scale, shift,
  gate (twice) instead of shift, scale, gate;
- "wrong_activation": the MLP uses SiLU instead of GELU-tanh;
  "wrong_activation_erf": the exact (erf) GELU instead of GELU-tanh;
- "transposed_unpatchify": the model output's image tokens are reordered as if
  the (rows, columns) grid were (columns, rows);
- "no_norm_offset": every modulation computes norm(x) * scale + shift, without
  the 1 + (blocks and final norm);
- "f16_overflow": the MLP's first linear runs as a float16 GEMM (f16 inputs and
  weights, f32 accumulation, f16 result) with alpha = 2^15, unscaled after in
  f32: neutral in exact arithmetic, but products beyond 65504 / 2^15 = 1.999 in
  magnitude become +-Inf (and GELU(-Inf) = NaN); the rest carries f16 rounding.
"""

import math
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F

from .capture import Capture

SIGMAS = [1.0, 0.75, 0.4, 0.0]
HIDDEN, HEADS, GRID, IN_CHANNELS = 32, 2, (3, 4), 16  # GRID: image rows x columns
TEXT_LEN, TEXT_DIM, FREQ_DIM = 4, 24, 64
AXES = (8, 8)  # RoPE channels per position axis (row, column); sum = head dim
FAULTS = (None, "swap_shift_scale", "wrong_activation", "wrong_activation_erf",
          "transposed_unpatchify", "no_norm_offset", "f16_overflow")
F16_ALPHA = 2.0 ** 15  # the "f16_overflow" GEMM's scale: |x W^T| > 65504 / 2^15 overflows


def check_fault(fault):
    if fault not in FAULTS:
        raise ValueError(f"fault {fault!r}: need one of {', '.join(map(repr, FAULTS))}")
    return fault


def modulate(x, shift, scale, fault=None):
    """norm(x) * (1 + scale) + shift; the "no_norm_offset" fault drops the 1 +."""
    if fault == "no_norm_offset":
        return x * scale + shift
    return x * (1 + scale) + shift


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


class F16Linear(nn.Linear):
    """The "f16_overflow" fault: a float16 GEMM with alpha = F16_ALPHA (f16 inputs
    and weights, products summed in f32, the result rounded to f16, where values
    beyond 65504 become +-Inf), then divided by alpha and the bias added in f32.
    Emulated on the host, whose torch may lack f16 matmul; same parameters as
    nn.Linear."""

    def forward(self, x):
        def f16(t):
            return t.to(torch.float16).to(torch.float32)

        y = f16(F16_ALPHA * (f16(x.float()) @ f16(self.weight.float()).t()))
        return (y / F16_ALPHA + self.bias.float()).to(x.dtype)


class FeedForward(nn.Module):
    def __init__(self, dim, mult=4, fault=None):
        super().__init__()
        self.proj_in = (F16Linear if fault == "f16_overflow" else nn.Linear)(dim, dim * mult)
        if fault == "wrong_activation":
            self.act = nn.SiLU()
        elif fault == "wrong_activation_erf":
            self.act = nn.GELU()
        else:
            self.act = nn.GELU(approximate="tanh")
        self.proj_out = nn.Linear(dim * mult, dim)

    def forward(self, x):
        return self.proj_out(self.act(self.proj_in(x)))


class DiTBlock(nn.Module):
    def __init__(self, dim, heads, fault=None):
        super().__init__()
        self.fault = fault
        self.modulation = nn.Sequential(nn.SiLU(), nn.Linear(dim, 6 * dim))
        self.norm1 = nn.LayerNorm(dim, elementwise_affine=False, eps=1e-6)
        self.attn = Attention(dim, heads)
        self.norm2 = nn.LayerNorm(dim, elementwise_affine=False, eps=1e-6)
        self.ff = FeedForward(dim, fault=fault)

    def forward(self, hidden_states, temb, rotary_emb):
        chunks = self.modulation(temb)[:, None].chunk(6, dim=-1)
        if self.fault == "swap_shift_scale":
            scale_msa, shift_msa, gate_msa, scale_mlp, shift_mlp, gate_mlp = chunks
        else:
            shift_msa, scale_msa, gate_msa, shift_mlp, scale_mlp, gate_mlp = chunks
        x = hidden_states
        h = modulate(self.norm1(x), shift_msa, scale_msa, self.fault)
        x = x + gate_msa * self.attn(h, rotary_emb=rotary_emb)
        h = modulate(self.norm2(x), shift_mlp, scale_mlp, self.fault)
        return x + gate_mlp * self.ff(h)


class AdaNormOut(nn.Module):
    def __init__(self, dim, fault=None):
        super().__init__()
        self.fault = fault
        self.act = nn.SiLU()
        self.linear = nn.Linear(dim, 2 * dim)
        self.norm = nn.LayerNorm(dim, elementwise_affine=False, eps=1e-6)

    def forward(self, x, temb):
        scale, shift = self.linear(self.act(temb))[:, None].chunk(2, dim=-1)
        return modulate(self.norm(x), shift, scale, self.fault)


def transpose_grid(tokens, grid):
    """[B, rows*cols, C] row-major tokens read as if the grid were (cols, rows):
    output token (r, c) is input token c * rows + r (the "transposed_unpatchify" fault)."""
    rows, cols = grid
    b, n, ch = tokens.shape
    return tokens.reshape(b, cols, rows, ch).transpose(1, 2).reshape(b, n, ch)


class TinyDiT(nn.Module):
    def __init__(self, dim=HIDDEN, heads=HEADS, depth=2, fault=None):
        super().__init__()
        self.fault = check_fault(fault)
        self.grid = GRID
        self.x_embedder = nn.Linear(IN_CHANNELS, dim)
        self.context_embedder = nn.Linear(TEXT_DIM, dim)
        self.time_proj = Timesteps()
        self.time_embed = TimestepEmbedding(FREQ_DIM, dim)
        self.pos_embed = RotaryEmbedding()
        self.blocks = nn.ModuleList(DiTBlock(dim, heads, fault) for _ in range(depth))
        self.norm_out = AdaNormOut(dim, fault)
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
        if self.fault == "transposed_unpatchify":
            out = transpose_grid(out, self.grid)
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


def build(seed=0, dtype=torch.float32, device="cpu", fault=None):
    """The model and its inputs (noise, encoder_hidden_states), seeded; a fault
    changes the computation only, never the weights or the inputs."""
    g = torch.Generator().manual_seed(seed)
    model = TinyDiT(fault=fault)
    randomize(model, g)
    noise = torch.randn(1, GRID[0] * GRID[1], IN_CHANNELS, generator=g)
    text = torch.randn(1, TEXT_LEN, TEXT_DIM, generator=g)
    return model.to(device, dtype).eval(), noise.to(device, dtype), text.to(device, dtype)


@torch.no_grad()
def capture(path, dtype=torch.float32, device="cpu", seed=0, fault=None, n_steps=None, **options):
    """Run the 3-step Euler sampler under a Capture; returns the capture's summary.

    fault: one of FAULTS (None: the reference). n_steps: run only the first
    n_steps Euler steps (input/sigmas then holds the n_steps + 1 used)."""
    model, x, text = build(seed, dtype, device, fault)
    n = len(SIGMAS) - 1 if n_steps is None else int(n_steps)
    if not 1 <= n <= len(SIGMAS) - 1:
        raise ValueError(f"n_steps {n_steps!r}: need 1..{len(SIGMAS) - 1}")
    sigmas = torch.tensor(SIGMAS[:n + 1], dtype=torch.float32)
    with Capture(model, name="transformer", path=path, **options) as cap:
        cap.input("noise", x)
        cap.input("encoder_hidden_states", text)
        cap.input("sigmas", sigmas)
        for i in range(n):
            timestep = sigmas[i:i + 1].to(device, dtype)
            with cap.step(i):
                v = model(hidden_states=x, encoder_hidden_states=text, timestep=timestep, return_dict=False)[0]
            x = (x.float() + (sigmas[i + 1] - sigmas[i]) * v.float()).to(dtype)
        cap.output("latents", x)
    return cap.summary
