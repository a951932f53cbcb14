#!/usr/bin/env python3
"""Write the planted-construct traces the program search is tested on.

    /usr/bin/python3 capture/examples/planted_constructs.py [OUT_DIR]

OUT_DIR defaults to fixtures/constructs. Constructs common in real models that
no shared conformance trace shows (issue 11), each in a tiny model of plain torch
modules with seeded random weights, float32 on CPU:

- lm.npz: a decoder with partial rotary (RoPE on the first 4 of each head's 8
  channels, rotate-half), one fused q/k/v projection laid out per head [q k v],
  a fused gate/up projection (SwiGLU), and parallel residuals from two norms
  (x + attn(ln1 x) + mlp(ln2 x)); one forward over 10 ids.
- lm_inline.npz: a decoder whose RoPE tables are made inside the attention
  (a sin/cos buffer indexed by the position ids it is given, rotate-every-two
  on the first 4 of each head's 8 channels), attention and MLP in parallel
  from one norm (x + attn(ln x) + mlp(ln x)).
- dit.npz: a DiT block whose modulation has no shift (scale and gate only,
  4 chunks) and tanh gates; a 2-step flow-matching Euler loop.
- dit_narrow.npz: dit.npz's model with 8 heads of 4 channels (no RoPE: the
  head width shows only in the attention's output).
- pooled.npz: text rows past a mask replaced by a learned padding
  (torch.where), the text pooled by attention (F.multi_head_attention_forward
  over projections the pooler never calls) into the conditioning, image rows
  attending to the text.
- two_latents.npz: one model denoising two latents together (rows of 8 and of
  6 channels), each stream its own embedder and block, then cross-attention
  each way (q from one stream, k/v from the other); the call returns both
  velocities and the loop steps each latents by its own.
- own_tables.npz: two_latents.npz's model with positions: each stream's rows
  their own times (request inputs), each cross-attention's q rotated by its
  stream's table and k by the other stream's (rotate-half, one Rotary).
- table_run.npz: a DiT whose blocks keep a table of 5 rows: rows [:4] plus
  a shared projection's 4 chunks are the two norms' shift and scale, row 4
  plus another projection is the attention's gate; a 2-step Euler loop.
- per_sample_rope.npz: a DiT over a batch of two whose samples' rows sit at
  positions of their own (a request input [2, 12]): the RoPE tables made in
  the forward, one per sample ([2, 12, 8], rotate-half), handed to each block,
  whose self-attention turns each sample's q and k by its own table.
"""

import math
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # run in place, without installing

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from zflow_capture import Capture  # noqa: E402

DEFAULT_OUT = os.path.normpath(os.path.join(HERE, "..", "..", "fixtures", "constructs"))


def rotate_half(x):
    a, b = x.chunk(2, dim=-1)
    return torch.cat([-b, a], dim=-1)


class Rotary(nn.Module):
    def __init__(self, dim, theta=10000.0):
        super().__init__()
        self.register_buffer("inv_freq", 1.0 / theta ** (torch.arange(0, dim, 2).float() / dim), persistent=False)

    def forward(self, positions):
        f = positions.float()[:, None] * self.inv_freq[None, :]
        emb = torch.cat([f, f], dim=-1)
        return emb.cos(), emb.sin()


class Attention(nn.Module):
    def __init__(self, hidden, heads, rotary):
        super().__init__()
        self.heads, self.d, self.rotary = heads, hidden // heads, rotary
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.dense = nn.Linear(hidden, hidden)

    def forward(self, x, cos, sin):
        b, s, _ = x.shape
        qkv = self.qkv(x).view(b, s, self.heads, 3, self.d)
        q, k, v = (qkv[:, :, :, i].transpose(1, 2) for i in range(3))  # [b, h, s, d]
        r = self.rotary

        def rope(t):
            rot, rest = t[..., :r], t[..., r:]
            return torch.cat([rot * cos + rotate_half(rot) * sin, rest], dim=-1)

        q, k = rope(q), rope(k)
        scores = q @ k.transpose(-1, -2) / math.sqrt(self.d)
        causal = torch.ones(s, s, dtype=torch.bool).tril()
        scores = scores.masked_fill(~causal, float("-inf"))
        out = scores.softmax(-1) @ v
        return self.dense(out.transpose(1, 2).reshape(b, s, -1))


class MLP(nn.Module):
    def __init__(self, hidden, inner):
        super().__init__()
        self.gate_up = nn.Linear(hidden, 2 * inner, bias=False)
        self.down = nn.Linear(inner, hidden, bias=False)

    def forward(self, x):
        g, u = self.gate_up(x).chunk(2, dim=-1)
        return self.down(F.silu(g) * u)


class Layer(nn.Module):
    def __init__(self, hidden, heads, rotary):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(hidden), nn.LayerNorm(hidden)
        self.attn, self.mlp = Attention(hidden, heads, rotary), MLP(hidden, 2 * hidden)

    def forward(self, x, cos, sin):
        return x + self.attn(self.ln1(x), cos, sin) + self.mlp(self.ln2(x))


class LM(nn.Module):
    def __init__(self, vocab=50, hidden=32, heads=4, layers=2, rotary=4):
        super().__init__()
        self.embed = nn.Embedding(vocab, hidden)
        self.rotary = Rotary(rotary)
        self.layers = nn.ModuleList(Layer(hidden, heads, rotary) for _ in range(layers))
        self.norm = nn.LayerNorm(hidden)

    def forward(self, ids):
        x = self.embed(ids)
        cos, sin = self.rotary(torch.arange(ids.shape[1]))
        for layer in self.layers:
            x = layer(x, cos, sin)
        return self.norm(x)


def rotate_every_two(x):
    a, b = x[..., ::2], x[..., 1::2]
    return torch.stack([-b, a], dim=-1).flatten(-2)


class InlineAttention(nn.Module):
    """RoPE tables made inside, from a non-persistent buffer and the position ids."""

    def __init__(self, hidden, heads, rotary, max_pos=64, theta=10000.0):
        super().__init__()
        self.heads, self.d, self.rotary = heads, hidden // heads, rotary
        inv = 1.0 / theta ** (torch.arange(0, rotary, 2).float() / rotary)
        f = torch.arange(max_pos).float()[:, None] * inv[None, :]
        self.register_buffer("sincos", torch.cat([f.sin(), f.cos()], dim=-1), persistent=False)
        self.q, self.k, self.v = (nn.Linear(hidden, hidden, bias=False) for _ in range(3))
        self.out = nn.Linear(hidden, hidden, bias=False)

    def forward(self, x, position_ids):
        b, s, w = x.shape
        q, k, v = (p(x).view(b, s, self.heads, self.d) for p in (self.q, self.k, self.v))
        sc = self.sincos[position_ids]  # [b, s, rotary]
        sin, cos = sc.chunk(2, dim=-1)
        sin = sin.repeat_interleave(2, dim=-1)[:, :, None, :]
        cos = cos.repeat_interleave(2, dim=-1)[:, :, None, :]
        r = self.rotary

        def rope(t):
            rot, rest = t[..., :r], t[..., r:]
            return torch.cat([rot * cos + rotate_every_two(rot) * sin, rest], dim=-1)

        q, k, v = rope(q).transpose(1, 2), rope(k).transpose(1, 2), v.transpose(1, 2)
        scores = q @ k.transpose(-1, -2) / math.sqrt(self.d)
        scores = scores.masked_fill(~torch.ones(s, s, dtype=torch.bool).tril(), float("-inf"))
        return self.out((scores.softmax(-1) @ v).transpose(1, 2).reshape(b, s, w))


class ParallelLayer(nn.Module):
    def __init__(self, hidden, heads, rotary):
        super().__init__()
        self.ln = nn.LayerNorm(hidden)
        self.attn = InlineAttention(hidden, heads, rotary)
        self.fc_in, self.fc_out = nn.Linear(hidden, 4 * hidden), nn.Linear(4 * hidden, hidden)

    def forward(self, x, position_ids):
        h = self.ln(x)
        return x + self.attn(h, position_ids) + self.fc_out(F.gelu(self.fc_in(h), approximate="tanh"))


class InlineLM(nn.Module):
    def __init__(self, vocab=50, hidden=32, heads=4, layers=2, rotary=4):
        super().__init__()
        self.embed = nn.Embedding(vocab, hidden)
        self.layers = nn.ModuleList(ParallelLayer(hidden, heads, rotary) for _ in range(layers))
        self.norm = nn.LayerNorm(hidden)

    def forward(self, ids):
        x = self.embed(ids)
        position_ids = torch.arange(ids.shape[1])[None, :]
        for layer in self.layers:
            x = layer(x, position_ids)
        return self.norm(x)


class Timesteps(nn.Module):
    def __init__(self, dim=32):
        super().__init__()
        self.dim = dim

    def forward(self, t):
        half = self.dim // 2
        freqs = torch.exp(-math.log(10000) * torch.arange(half, dtype=torch.float32) / half)
        a = t.float()[:, None] * freqs[None, :]
        return torch.cat([a.cos(), a.sin()], dim=-1)


class Block(nn.Module):
    def __init__(self, hidden, heads):
        super().__init__()
        self.heads = heads
        self.mod = nn.Linear(hidden, 4 * hidden)
        self.norm1 = nn.LayerNorm(hidden, elementwise_affine=False, eps=1e-6)
        self.norm2 = nn.LayerNorm(hidden, elementwise_affine=False, eps=1e-6)
        self.q, self.k, self.v = (nn.Linear(hidden, hidden) for _ in range(3))
        self.out = nn.Linear(hidden, hidden)
        self.fc1, self.fc2 = nn.Linear(hidden, 4 * hidden), nn.Linear(4 * hidden, hidden)

    def forward(self, x, c):
        scale1, gate1, scale2, gate2 = self.mod(F.silu(c)).chunk(4, dim=-1)
        h = self.norm1(x) * (1 + scale1[:, None])
        b, s, w = h.shape
        d = w // self.heads
        q, k, v = (p(h).view(b, s, self.heads, d).transpose(1, 2) for p in (self.q, self.k, self.v))
        a = (q @ k.transpose(-1, -2) / math.sqrt(d)).softmax(-1) @ v
        x = x + torch.tanh(gate1[:, None]) * self.out(a.transpose(1, 2).reshape(b, s, w))
        h = self.norm2(x) * (1 + scale2[:, None])
        return x + torch.tanh(gate2[:, None]) * self.fc2(F.gelu(self.fc1(h), approximate="tanh"))


class DiT(nn.Module):
    def __init__(self, channels=8, hidden=32, heads=4):
        super().__init__()
        self.time_proj = Timesteps(32)
        self.t1, self.t2 = nn.Linear(32, hidden), nn.Linear(hidden, hidden)
        self.embed = nn.Linear(channels, hidden)
        self.blocks = nn.ModuleList(Block(hidden, heads) for _ in range(2))
        self.norm_out = nn.LayerNorm(hidden)
        self.proj_out = nn.Linear(hidden, channels)

    def forward(self, x, timestep):
        c = self.t2(F.silu(self.t1(self.time_proj(timestep * 1000))))
        h = self.embed(x)
        for blk in self.blocks:
            h = blk(h, c)
        return self.proj_out(self.norm_out(h))


class AttentionPool(nn.Module):
    """Attention pooling: the mean token first, a position table added, one
    query against every row, projections called as functions of their weights."""

    def __init__(self, rows, dim, heads):
        super().__init__()
        self.positional_embedding = nn.Parameter(torch.randn(rows + 1, dim) / dim ** 0.5)
        self.k_proj, self.q_proj, self.v_proj, self.c_proj = (nn.Linear(dim, dim) for _ in range(4))
        self.heads = heads

    def forward(self, x):
        x = x.permute(1, 0, 2)
        x = torch.cat([x.mean(dim=0, keepdim=True), x], dim=0)
        x = x + self.positional_embedding[:, None, :]
        x, _ = F.multi_head_attention_forward(
            query=x[:1], key=x, value=x, embed_dim_to_check=x.shape[-1], num_heads=self.heads,
            q_proj_weight=self.q_proj.weight, k_proj_weight=self.k_proj.weight, v_proj_weight=self.v_proj.weight,
            in_proj_weight=None, in_proj_bias=torch.cat([self.q_proj.bias, self.k_proj.bias, self.v_proj.bias]),
            bias_k=None, bias_v=None, add_zero_attn=False, dropout_p=0, out_proj_weight=self.c_proj.weight,
            out_proj_bias=self.c_proj.bias, use_separate_proj_weight=True, training=False, need_weights=False)
        return x.squeeze(0)


class PooledDiT(nn.Module):
    """Text rows past the mask replaced by a learned padding; the text pooled by
    attention into the conditioning; image rows attend to the text."""

    def __init__(self, channels=8, hidden=16, text=6, heads=2):
        super().__init__()
        self.heads = heads
        self.text_padding = nn.Parameter(torch.randn(text, hidden))
        self.pool = AttentionPool(text, hidden, heads)
        self.time_proj = Timesteps(16)
        self.t1 = nn.Linear(16 + hidden, hidden)
        self.embed = nn.Linear(channels, hidden)
        self.norm = nn.LayerNorm(hidden, elementwise_affine=False, eps=1e-6)
        self.mod = nn.Linear(hidden, 2 * hidden)
        self.q, self.k, self.v, self.o = (nn.Linear(hidden, hidden) for _ in range(4))
        self.proj_out = nn.Linear(hidden, channels)

    def forward(self, x, timestep, text, mask):
        text = torch.where(mask[:, :, None].bool(), text, self.text_padding)
        c = self.t1(torch.cat([self.time_proj(timestep * 1000), self.pool(text)], dim=-1))
        scale, shift = self.mod(F.silu(c)).chunk(2, dim=-1)
        h = self.embed(x)
        n = self.norm(h) * (1 + scale[:, None]) + shift[:, None]
        b, s, w = n.shape
        q = self.q(n).view(b, s, self.heads, -1).transpose(1, 2)
        k = self.k(text).view(b, -1, self.heads, w // self.heads).transpose(1, 2)
        v = self.v(text).view(b, -1, self.heads, w // self.heads).transpose(1, 2)
        a = (q @ k.transpose(-1, -2) / math.sqrt(w // self.heads)).softmax(-1) @ v
        h = h + self.o(a.transpose(1, 2).reshape(b, s, w))
        return self.proj_out(h)


class CrossAttention(nn.Module):
    """q from x, k and v from another stream's rows y."""

    def __init__(self, hidden, heads):
        super().__init__()
        self.heads = heads
        self.q, self.k, self.v = (nn.Linear(hidden, hidden) for _ in range(3))
        self.out = nn.Linear(hidden, hidden)

    def forward(self, x, y):
        b, s, w = x.shape
        d = w // self.heads
        q = self.q(x).view(b, s, self.heads, d).transpose(1, 2)
        k, v = (p(y).view(b, y.shape[1], self.heads, d).transpose(1, 2) for p in (self.k, self.v))
        a = (q @ k.transpose(-1, -2) / math.sqrt(d)).softmax(-1) @ v
        return self.out(a.transpose(1, 2).reshape(b, s, w))


class TwoLatents(nn.Module):
    """Two latents denoised together: each stream embedded and run through its
    own block, then each attends to the other; two velocities."""

    def __init__(self, channels=8, audio_channels=6, hidden=32, heads=4):
        super().__init__()
        self.time_proj = Timesteps(32)
        self.t1, self.t2 = nn.Linear(32, hidden), nn.Linear(hidden, hidden)
        self.embed, self.audio_embed = nn.Linear(channels, hidden), nn.Linear(audio_channels, hidden)
        self.block, self.audio_block = Block(hidden, heads), Block(hidden, heads)
        self.a2v, self.v2a = CrossAttention(hidden, heads), CrossAttention(hidden, heads)
        self.norm_out, self.audio_norm_out = nn.LayerNorm(hidden), nn.LayerNorm(hidden)
        self.proj_out, self.audio_proj_out = nn.Linear(hidden, channels), nn.Linear(hidden, audio_channels)

    def forward(self, x, audio, timestep):
        c = self.t2(F.silu(self.t1(self.time_proj(timestep * 1000))))
        h, g = self.block(self.embed(x), c), self.audio_block(self.audio_embed(audio), c)
        h, g = h + self.a2v(h, g), g + self.v2a(g, h)
        return self.proj_out(self.norm_out(h)), self.audio_proj_out(self.audio_norm_out(g))


class TimedCrossAttention(CrossAttention):
    """CrossAttention whose q and k are rotated by their own rows' tables."""

    def forward(self, x, y, qcos, qsin, kcos, ksin):
        b, s, w = x.shape
        d = w // self.heads
        q = self.q(x).view(b, s, self.heads, d).transpose(1, 2)
        k, v = (p(y).view(b, y.shape[1], self.heads, d).transpose(1, 2) for p in (self.k, self.v))
        q, k = q * qcos + rotate_half(q) * qsin, k * kcos + rotate_half(k) * ksin
        a = (q @ k.transpose(-1, -2) / math.sqrt(d)).softmax(-1) @ v
        return self.out(a.transpose(1, 2).reshape(b, s, w))


class OwnTables(TwoLatents):
    """TwoLatents whose cross-attentions rotate q and k by each stream's times."""

    def __init__(self, hidden=32, heads=4):
        super().__init__(hidden=hidden, heads=heads)
        self.rotary = Rotary(hidden // heads)
        self.a2v, self.v2a = TimedCrossAttention(hidden, heads), TimedCrossAttention(hidden, heads)

    def forward(self, x, audio, timestep, pos, audio_pos):
        c = self.t2(F.silu(self.t1(self.time_proj(timestep * 1000))))
        h, g = self.block(self.embed(x), c), self.audio_block(self.audio_embed(audio), c)
        (vc, vs), (ac, as_) = self.rotary(pos), self.rotary(audio_pos)
        h, g = h + self.a2v(h, g, vc, vs, ac, as_), g + self.v2a(g, h, ac, as_, vc, vs)
        return self.proj_out(self.norm_out(h)), self.audio_proj_out(self.audio_norm_out(g))


class SampleRopeBlock(Block):
    """Block whose self-attention rotates q and k by tables [B, S, d], one per sample."""

    def forward(self, x, c, cos, sin):
        scale1, gate1, scale2, gate2 = self.mod(F.silu(c)).chunk(4, dim=-1)
        h = self.norm1(x) * (1 + scale1[:, None])
        b, s, w = h.shape
        d = w // self.heads
        q, k, v = (p(h).view(b, s, self.heads, d).transpose(1, 2) for p in (self.q, self.k, self.v))
        q, k = q * cos[:, None] + rotate_half(q) * sin[:, None], k * cos[:, None] + rotate_half(k) * sin[:, None]
        a = (q @ k.transpose(-1, -2) / math.sqrt(d)).softmax(-1) @ v
        x = x + torch.tanh(gate1[:, None]) * self.out(a.transpose(1, 2).reshape(b, s, w))
        h = self.norm2(x) * (1 + scale2[:, None])
        return x + torch.tanh(gate2[:, None]) * self.fc2(F.gelu(self.fc1(h), approximate="tanh"))


class PerSampleRope(DiT):
    """DiT over a batch whose samples' rows have positions of their own."""

    def __init__(self, channels=8, hidden=32, heads=4):
        super().__init__(channels=channels, hidden=hidden, heads=heads)
        self.rotary = Rotary(hidden // heads)
        self.blocks = nn.ModuleList(SampleRopeBlock(hidden, heads) for _ in range(2))

    def forward(self, x, timestep, pos):
        c = self.t2(F.silu(self.t1(self.time_proj(timestep * 1000))))
        tables = [self.rotary(p) for p in pos]
        cos, sin = torch.stack([t[0] for t in tables]), torch.stack([t[1] for t in tables])
        h = self.embed(x)
        for blk in self.blocks:
            h = blk(h, c, cos, sin)
        return self.proj_out(self.norm_out(h))


class TableRunBlock(Block):
    """Block modulated by its own table of 5 rows added to shared projections."""

    def __init__(self, hidden, heads):
        super().__init__(hidden, heads)
        del self.mod
        self.table = nn.Parameter(torch.randn(5, hidden) / hidden ** 0.5)

    def forward(self, x, mod, gate):
        b, s, w = x.shape
        shift1, scale1, shift2, scale2 = (self.table[None, :4] + mod.view(b, 4, w)).unbind(1)
        g = (self.table[None, 4:] + gate.view(b, 1, w))[:, 0]
        h = self.norm1(x) * (1 + scale1[:, None]) + shift1[:, None]
        d = w // self.heads
        q, k, v = (p(h).view(b, s, self.heads, d).transpose(1, 2) for p in (self.q, self.k, self.v))
        a = (q @ k.transpose(-1, -2) / math.sqrt(d)).softmax(-1) @ v
        x = x + g[:, None] * self.out(a.transpose(1, 2).reshape(b, s, w))
        h = self.norm2(x) * (1 + scale2[:, None]) + shift2[:, None]
        return x + self.fc2(F.gelu(self.fc1(h), approximate="tanh"))


class TableRun(DiT):
    """DiT whose blocks add their 5-row tables to a 4-chunk and a 1-chunk projection."""

    def __init__(self, hidden=32, heads=4):
        super().__init__(hidden=hidden, heads=heads)
        self.mod, self.gate = nn.Linear(hidden, 4 * hidden), nn.Linear(hidden, hidden)
        self.blocks = nn.ModuleList(TableRunBlock(hidden, heads) for _ in range(2))

    def forward(self, x, timestep):
        c = self.t2(F.silu(self.t1(self.time_proj(timestep * 1000))))
        mod, gate = self.mod(F.silu(c)), self.gate(F.silu(c))
        h = self.embed(x)
        for blk in self.blocks:
            h = blk(h, mod, gate)
        return self.proj_out(self.norm_out(h))


def randomise(model, gen):
    """Every weight redrawn so no factor hides behind a zero (as the shared traces)."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 1:
                p.copy_(1.0 + 0.2 * torch.randn(p.shape, generator=gen) if name.endswith("weight")
                        else 0.1 * torch.randn(p.shape, generator=gen))
            else:
                p.copy_(torch.randn(p.shape, generator=gen) / math.sqrt(p.shape[-1]))


def capture_lm(lm, gen, path):
    """One forward of a randomised decoder over 10 ids, captured."""
    randomise(lm, gen)
    ids = torch.randint(0, 50, (1, 10), generator=gen)
    with torch.no_grad(), Capture(lm, name="lm", path=path) as cap:
        cap.input("input_ids", ids)
        with cap.step(0):
            h = lm(ids)
        cap.output("hidden", h)
    print(f"wrote {path}: {os.path.getsize(path)} bytes")


def capture_dit(dit, gen, path):
    """A randomised DiT over a 2-step flow-matching Euler loop, captured."""
    randomise(dit, gen)
    x = torch.randn(1, 12, 8, generator=gen)
    sigmas = torch.tensor([1.0, 0.6, 0.0])
    with torch.no_grad(), Capture(dit, name="transformer", path=path) as cap:
        cap.input("noise", x)
        cap.input("sigmas", sigmas)
        for i in range(len(sigmas) - 1):
            with cap.step(i):
                v = dit(x, sigmas[i:i + 1])
            x = x + (sigmas[i + 1] - sigmas[i]) * v
        cap.output("latents", x)
    print(f"wrote {path}: {os.path.getsize(path)} bytes")


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    out = argv[0] if argv else DEFAULT_OUT
    os.makedirs(out, exist_ok=True)
    gen = torch.Generator().manual_seed(0)

    for model, name in ((LM(), "lm.npz"), (InlineLM(), "lm_inline.npz")):
        capture_lm(model.eval(), gen, os.path.join(out, name))

    capture_dit(DiT().eval(), gen, os.path.join(out, "dit.npz"))
    # last, so that the traces above keep their weights: heads of 4, no RoPE
    capture_dit(DiT(heads=8).eval(), gen, os.path.join(out, "dit_narrow.npz"))

    pooled = PooledDiT().eval()
    randomise(pooled, gen)
    x = torch.randn(1, 12, 8, generator=gen)
    text = torch.randn(1, 6, 16, generator=gen)
    mask = torch.tensor([[1, 1, 1, 1, 0, 0]])
    sigmas = torch.tensor([1.0, 0.6, 0.0])
    path = os.path.join(out, "pooled.npz")
    with torch.no_grad(), Capture(pooled, name="transformer", path=path) as cap:
        cap.input("noise", x)
        cap.input("sigmas", sigmas)
        cap.input("text", text)
        cap.input("mask", mask)
        for i in range(len(sigmas) - 1):
            with cap.step(i):
                v = pooled(x, sigmas[i:i + 1], text, mask)
            x = x + (sigmas[i + 1] - sigmas[i]) * v
        cap.output("latents", x)
    print(f"wrote {path}: {os.path.getsize(path)} bytes")

    two = TwoLatents().eval()
    randomise(two, gen)
    x, a = torch.randn(1, 12, 8, generator=gen), torch.randn(1, 5, 6, generator=gen)
    path = os.path.join(out, "two_latents.npz")
    with torch.no_grad(), Capture(two, name="transformer", path=path) as cap:
        cap.input("noise", x)
        cap.input("audio_noise", a)
        cap.input("sigmas", sigmas)
        for i in range(len(sigmas) - 1):
            with cap.step(i):
                v, va = two(x, a, sigmas[i:i + 1])
            x, a = x + (sigmas[i + 1] - sigmas[i]) * v, a + (sigmas[i + 1] - sigmas[i]) * va
        cap.output("latents", x)
        cap.output("audio_latents", a)
    print(f"wrote {path}: {os.path.getsize(path)} bytes")

    own = OwnTables().eval()
    randomise(own, gen)
    x, a = torch.randn(1, 12, 8, generator=gen), torch.randn(1, 5, 6, generator=gen)
    pos, audio_pos = torch.arange(12) // 4, torch.arange(5) * 2 + 1
    path = os.path.join(out, "own_tables.npz")
    with torch.no_grad(), Capture(own, name="transformer", path=path) as cap:
        cap.input("noise", x)
        cap.input("audio_noise", a)
        cap.input("sigmas", sigmas)
        cap.input("pos", pos)
        cap.input("audio_pos", audio_pos)
        for i in range(len(sigmas) - 1):
            with cap.step(i):
                v, va = own(x, a, sigmas[i:i + 1], pos, audio_pos)
            x, a = x + (sigmas[i + 1] - sigmas[i]) * v, a + (sigmas[i + 1] - sigmas[i]) * va
        cap.output("latents", x)
        cap.output("audio_latents", a)
    print(f"wrote {path}: {os.path.getsize(path)} bytes")

    capture_dit(TableRun().eval(), gen, os.path.join(out, "table_run.npz"))

    # last, so that the traces above keep their weights
    per = PerSampleRope().eval()
    randomise(per, gen)
    x = torch.randn(2, 12, 8, generator=gen)
    pos = torch.stack([torch.arange(12) // 4, torch.arange(12) % 6 + 2])
    path = os.path.join(out, "per_sample_rope.npz")
    with torch.no_grad(), Capture(per, name="transformer", path=path) as cap:
        cap.input("noise", x)
        cap.input("sigmas", sigmas)
        cap.input("pos", pos)
        for i in range(len(sigmas) - 1):
            with cap.step(i):
                v = per(x, sigmas[i:i + 1].expand(2), pos)
            x = x + (sigmas[i + 1] - sigmas[i]) * v
        cap.output("latents", x)
    print(f"wrote {path}: {os.path.getsize(path)} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
