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

Planted controls (`build(control=...)`, `capture(control=...)`): the reference
itself written differently, one semantic factor flipped, for testing that
discovery finds each flip (capture/examples/planted_controls.py writes them to
fixtures/controls/, whose README.md lists the factor each one flips):

- "tanh_gate": both residuals are x + tanh(gate) * y (gate_fn tanh);
- "half_rope": RoPE rotates the two halves of each head ("rotate half")
  instead of adjacent pairs, over one position axis of 16 channels (text rows
  at 0, image rows at their row-major index): rope_layout half, rope_axes [16]
  (exec's half layout is per axis, so one axis keeps the model coherent);
- "image_first": the joint sequence is cat([image, text]) (and the positions
  likewise): joint_order image_first;
- "final_shift_scale": the final norm's 2 chunks are shift, scale
  (final_norm_order "shift,scale");
- "euler_minus": the sampler steps x <- x - (sigma[i+1] - sigma[i]) * v
  (euler_sign -1);
- "rms_norm": norm1 and norm2 are RMS norms without affine, eps 1e-6, instead
  of LayerNorm (norm_kind rms at blocks.*.norm1 and blocks.*.norm2);
- "patchify": the latents are an image [1, C, H, W] (C = 4, H = 6, W = 8: the
  reference's 12 noise tokens of 16 features unpacked, so the same values),
  packed by a 2x2 patchify exactly like diffusers' _pack_latents (features
  (c, ph, pw), rows (h, w)) before x_embedder and unpacked by the inverse
  after proj_out; the Euler loop runs on [1, C, H, W] (patch_layout c_ph_pw).
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
CONTROLS = (None, "tanh_gate", "half_rope", "image_first", "final_shift_scale", "euler_minus", "rms_norm",
            "patchify")
PATCH = 2  # the "patchify" control's patch size: IN_CHANNELS = LATENT_CHANNELS * PATCH^2
LATENT_CHANNELS = IN_CHANNELS // (PATCH * PATCH)
F16_ALPHA = 2.0 ** 15  # the "f16_overflow" GEMM's scale: |x W^T| > 65504 / 2^15 overflows


def check_fault(fault):
    if fault not in FAULTS:
        raise ValueError(f"fault {fault!r}: need one of {', '.join(map(repr, FAULTS))}")
    return fault


def check_control(control):
    if control not in CONTROLS:
        raise ValueError(f"control {control!r}: need one of {', '.join(map(repr, CONTROLS))}")
    return control


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


def positions(grid, text_len, device, control=None):
    """(row, column) of each row of the joint sequence: text rows at 0, then the image grid.

    Controls: "image_first" puts the image rows first; "half_rope" has one axis,
    the image rows' row-major index."""
    rows, cols = grid
    r, c = torch.meshgrid(torch.arange(rows, device=device), torch.arange(cols, device=device), indexing="ij")
    image = torch.stack([r.reshape(-1), c.reshape(-1)], dim=-1)
    if control == "half_rope":
        image = (r * cols + c).reshape(-1, 1)
    text = torch.zeros(text_len, image.shape[1], dtype=image.dtype, device=device)
    if control == "image_first":
        return torch.cat([image, text]).float()
    return torch.cat([text, image]).float()


class RotaryEmbedding(nn.Module):
    """cos and sin per row of the joint sequence, pairs interleaved (half: each
    axis's angles twice, [a, a]), in f32."""

    def __init__(self, axes=AXES, theta=10000.0, half=False):
        super().__init__()
        self.axes, self.theta, self.half = axes, theta, half

    def forward(self, ids):
        angles = []
        for axis, dim in enumerate(self.axes):
            inv = 1.0 / self.theta ** (torch.arange(0, dim, 2, dtype=torch.float32, device=ids.device) / dim)
            a = ids[:, axis:axis + 1] * inv[None]
            angles.append(torch.cat([a, a], dim=-1) if self.half else a.repeat_interleave(2, dim=-1))
        angles = torch.cat(angles, dim=-1)
        return torch.cos(angles), torch.sin(angles)


def apply_rope(x, cos, sin, half=False):
    xf = x.float()
    if half:
        x1, x2 = xf.chunk(2, dim=-1)
        rotated = torch.cat([-x2, x1], dim=-1)
    else:
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


class ParameterFreeRMSNorm(nn.Module):
    """The "rms_norm" control's norm1/norm2: x / sqrt(mean(x^2) + eps), no affine."""

    def __init__(self, eps=1e-6):
        super().__init__()
        self.eps = eps

    def forward(self, x):
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)).to(x.dtype)


class Attention(nn.Module):
    def __init__(self, dim, heads, half_rope=False):
        super().__init__()
        self.half_rope = half_rope
        self.heads, self.head_dim = heads, dim // heads
        self.to_q, self.to_k, self.to_v = nn.Linear(dim, dim), nn.Linear(dim, dim), nn.Linear(dim, dim)
        self.norm_q, self.norm_k = RMSNorm(self.head_dim), RMSNorm(self.head_dim)
        self.to_out = nn.Linear(dim, dim)

    def forward(self, hidden_states, rotary_emb):
        b, s, _ = hidden_states.shape

        def heads(t):
            return t.view(b, s, self.heads, self.head_dim).transpose(1, 2)

        q = apply_rope(self.norm_q(heads(self.to_q(hidden_states))), *rotary_emb, half=self.half_rope)
        k = apply_rope(self.norm_k(heads(self.to_k(hidden_states))), *rotary_emb, half=self.half_rope)
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
    def __init__(self, dim, heads, fault=None, control=None):
        super().__init__()
        self.fault = fault
        self.gate = torch.tanh if control == "tanh_gate" else (lambda g: g)
        self.modulation = nn.Sequential(nn.SiLU(), nn.Linear(dim, 6 * dim))

        def norm():
            if control == "rms_norm":
                return ParameterFreeRMSNorm(eps=1e-6)
            return nn.LayerNorm(dim, elementwise_affine=False, eps=1e-6)

        self.norm1 = norm()
        self.attn = Attention(dim, heads, half_rope=control == "half_rope")
        self.norm2 = norm()
        self.ff = FeedForward(dim, fault=fault)

    def forward(self, hidden_states, temb, rotary_emb):
        chunks = self.modulation(temb)[:, None].chunk(6, dim=-1)
        if self.fault == "swap_shift_scale":
            scale_msa, shift_msa, gate_msa, scale_mlp, shift_mlp, gate_mlp = chunks
        else:
            shift_msa, scale_msa, gate_msa, shift_mlp, scale_mlp, gate_mlp = chunks
        x = hidden_states
        h = modulate(self.norm1(x), shift_msa, scale_msa, self.fault)
        x = x + self.gate(gate_msa) * self.attn(h, rotary_emb=rotary_emb)
        h = modulate(self.norm2(x), shift_mlp, scale_mlp, self.fault)
        return x + self.gate(gate_mlp) * self.ff(h)


class AdaNormOut(nn.Module):
    def __init__(self, dim, fault=None, control=None):
        super().__init__()
        self.fault, self.control = fault, control
        self.act = nn.SiLU()
        self.linear = nn.Linear(dim, 2 * dim)
        self.norm = nn.LayerNorm(dim, elementwise_affine=False, eps=1e-6)

    def forward(self, x, temb):
        scale, shift = self.linear(self.act(temb))[:, None].chunk(2, dim=-1)
        if self.control == "final_shift_scale":
            shift, scale = scale, shift
        return modulate(self.norm(x), shift, scale, self.fault)


def transpose_grid(tokens, grid):
    """[B, rows*cols, C] row-major tokens read as if the grid were (cols, rows):
    output token (r, c) is input token c * rows + r (the "transposed_unpatchify" fault)."""
    rows, cols = grid
    b, n, ch = tokens.shape
    return tokens.reshape(b, cols, rows, ch).transpose(1, 2).reshape(b, n, ch)


def pack_latents(x, p=PATCH):
    """[B, C, H, W] -> [B, (H/p)(W/p), C p p], features (c, ph, pw), rows (h, w):
    diffusers' _pack_latents (the "patchify" control)."""
    b, c, h, w = x.shape
    x = x.view(b, c, h // p, p, w // p, p).permute(0, 2, 4, 1, 3, 5)
    return x.reshape(b, (h // p) * (w // p), c * p * p)


def unpack_latents(x, h, w, p=PATCH):
    """The inverse of pack_latents: [B, (H/p)(W/p), C p p] -> [B, C, H, W]."""
    b, _, f = x.shape
    c = f // (p * p)
    x = x.view(b, h // p, w // p, c, p, p).permute(0, 3, 1, 4, 2, 5)
    return x.reshape(b, c, h, w)


class TinyDiT(nn.Module):
    def __init__(self, dim=HIDDEN, heads=HEADS, depth=2, fault=None, control=None):
        super().__init__()
        self.fault = check_fault(fault)
        self.control = check_control(control)
        self.grid = GRID
        self.x_embedder = nn.Linear(IN_CHANNELS, dim)
        self.context_embedder = nn.Linear(TEXT_DIM, dim)
        self.time_proj = Timesteps()
        self.time_embed = TimestepEmbedding(FREQ_DIM, dim)
        if control == "half_rope":
            self.pos_embed = RotaryEmbedding(axes=(dim // heads,), half=True)
        else:
            self.pos_embed = RotaryEmbedding()
        self.blocks = nn.ModuleList(DiTBlock(dim, heads, fault, control) for _ in range(depth))
        self.norm_out = AdaNormOut(dim, fault, control)
        self.proj_out = nn.Linear(dim, IN_CHANNELS)

    def forward(self, hidden_states, encoder_hidden_states, timestep, return_dict=True):
        if self.control == "patchify":
            height, width = hidden_states.shape[-2:]
            hidden_states = pack_latents(hidden_states)
        img = self.x_embedder(hidden_states)
        txt = self.context_embedder(encoder_hidden_states)
        temb = self.time_embed(self.time_proj(timestep))
        rope = self.pos_embed(positions(self.grid, txt.shape[1], hidden_states.device, self.control))
        if self.control == "image_first":
            x = torch.cat([img, txt], dim=1)
        else:
            x = torch.cat([txt, img], dim=1)  # text rows first
        for block in self.blocks:
            x = block(x, temb=temb, rotary_emb=rope)
        image_rows = x[:, :img.shape[1]] if self.control == "image_first" else x[:, txt.shape[1]:]
        out = self.proj_out(self.norm_out(image_rows, temb))
        if self.fault == "transposed_unpatchify":
            out = transpose_grid(out, self.grid)
        if self.control == "patchify":
            out = unpack_latents(out, height, width)
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


def build(seed=0, dtype=torch.float32, device="cpu", fault=None, control=None):
    """The model and its inputs (noise, encoder_hidden_states), seeded; a fault
    or a control changes the computation only, never the weights or the inputs."""
    g = torch.Generator().manual_seed(seed)
    model = TinyDiT(fault=fault, control=control)
    randomize(model, g)
    noise = torch.randn(1, GRID[0] * GRID[1], IN_CHANNELS, generator=g)
    text = torch.randn(1, TEXT_LEN, TEXT_DIM, generator=g)
    if control == "patchify":  # the same values as an image the model packs back
        noise = unpack_latents(noise, GRID[0] * PATCH, GRID[1] * PATCH)
    return model.to(device, dtype).eval(), noise.to(device, dtype), text.to(device, dtype)


@torch.no_grad()
def capture(path, dtype=torch.float32, device="cpu", seed=0, fault=None, n_steps=None, control=None, **options):
    """Run the 3-step Euler sampler under a Capture; returns the capture's summary.

    fault: one of FAULTS (None: the reference). control: one of CONTROLS
    (None: the reference; "euler_minus" flips the sampler's sign). n_steps: run
    only the first n_steps Euler steps (input/sigmas then holds the n_steps + 1
    used)."""
    model, x, text = build(seed, dtype, device, fault, control)
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
            dsigma = sigmas[i + 1] - sigmas[i]
            if control == "euler_minus":
                dsigma = -dsigma
            x = (x.float() + dsigma * v.float()).to(dtype)
        cap.output("latents", x)
    return cap.summary
