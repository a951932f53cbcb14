#!/usr/bin/env python3
"""The wide fixture's DiT (fixtures/wide: capture/zflow_capture/example.py's
model at any width, any number of blocks and Euler steps; gen -wide) in
PyTorch eager, built from a trace's parameters and request, run step by
step with the device synchronised around each step, beside `zflow generate
--timings` on the same trace (issue 15, item 4).

The model's semantics are hard-wired here as the fixture writes them (this
is a benchmark, not a port): text rows first, LayerNorm without affine and
norm(x)*(1 + scale) + shift, chunks shift, scale, gate (twice), per-head
RMSNorm of q and k, interleaved RoPE over (row, column) ids read from the
trace, attention softmax(q k^T / sqrt(d)) v (F.scaled_dot_product_attention
by default, as the bf16 fixture rounds it: flash's bf16 weights), GELU-tanh
MLP, final norm scale then shift, Euler x + (s[i+1] - s[i]) v in f32 rounded
to the model's dtype. Sizes come from the parameters' shapes.

It prints each step's milliseconds (and zflow's, with --ours-timings), and
compares the final latents with zflow's (--ours, the -o of zflow generate)
and both with the trace's own output/latents (the fixture's run, on the backend
its producer names):
rel-RMS and the fraction of identical values in the model's dtype.

    python3 bench/model_torch.py --trace /tmp/model.npz --ours /tmp/ours.npz --ours-timings /tmp/timings.json
    /usr/bin/python3 bench/model_torch.py --trace /tmp/model8.npz --device cpu   # torch 1.13, no GPU
"""
import argparse
import ast
import json
import math
import os
import re
import statistics
import sys
import time
import zipfile

import torch
import torch.nn.functional as F

try:
    import numpy as np
except ImportError:  # torch's wheels do not need numpy, and the GPU machine cannot install it
    np = None
if os.environ.get("MODEL_TORCH_NO_NUMPY"):  # to test the reader numpy is not there for
    np = None

EPS = 1e-6
THETA = 10000.0


# npy descr -> torch dtype, for reading without numpy (<u2 as int16: bf16 bits).
NPY_TORCH = {"<f4": torch.float32, "<f8": torch.float64, "<f2": torch.float16, "<u2": torch.int16, "<i2": torch.int16,
             "<i4": torch.int32, "<i8": torch.int64, "|u1": torch.uint8, "|i1": torch.int8, "|b1": torch.bool}


def read_npy(data, what):
    """One .npy file's bytes as a CPU tensor (C order, little-endian)."""
    if data[:6] != b"\x93NUMPY":
        sys.exit(f"{what}: not an npy entry")
    n, start = (int.from_bytes(data[8:10], "little"), 10) if data[6] == 1 else (int.from_bytes(data[8:12], "little"), 12)
    h = ast.literal_eval(data[start:start + n].decode("latin1"))
    if h["fortran_order"] or h["descr"] not in NPY_TORCH:
        sys.exit(f"{what}: npy {h['descr']} fortran_order={h['fortran_order']}: not read here")
    body = bytearray(data[start + n:])
    dt = NPY_TORCH[h["descr"]]
    t = torch.frombuffer(body, dtype=dt) if body else torch.empty(0, dtype=dt)
    return t.reshape(h["shape"])


class Trace:
    """A zflow trace v1 npz, read with numpy (or, without it, zipfile): the
    manifest and any tensor (bf16 entries are <u2 bit patterns, named in
    the manifest's dtypes)."""

    def __init__(self, path):
        self.path = path
        self.npz = np.load(path) if np is not None else None
        self.zip = zipfile.ZipFile(path) if np is None else None
        self.manifest = json.loads(bytes(self.cpu("__zflow__").tolist()).decode())
        self.dtypes = self.manifest.get("dtypes") or {}

    def cpu(self, key):
        try:
            if self.npz is not None:
                a = np.ascontiguousarray(self.npz[key])
                return torch.from_numpy(a.view(np.int16) if a.dtype == np.uint16 else a)
            return read_npy(self.zip.read(key + ".npy"), f"{self.path}: {key}")
        except KeyError:
            sys.exit(f"{self.path}: no tensor {key!r}" + (" (no manifest: not a zflow trace)" if key == "__zflow__" else ""))

    def tensor(self, key, device):
        t = self.cpu(key)
        if self.dtypes.get(key) == "bfloat16":
            t = t.view(torch.bfloat16)
        return t.to(device)

    def param(self, name, device):
        return self.tensor(self.manifest["params"][name], device)


def load_model(tr, device):
    """Every parameter by name, and the sizes read from their shapes."""
    p = {name: tr.param(name, device) for name in tr.manifest["params"]}
    blocks = sorted({int(m.group(1)) for n in p for m in [re.match(r"transformer\.blocks\.(\d+)\.", n)] if m})
    hidden = p["transformer.x_embedder.weight"].shape[0]
    head_dim = p["transformer.blocks.0.attn.norm_q.weight"].shape[0]
    return p, {"blocks": len(blocks), "hidden": hidden, "heads": hidden // head_dim, "head_dim": head_dim,
               "freq_dim": p["transformer.time_embed.linear_1.weight"].shape[1]}


def attention_fn(kind):
    if kind == "sdpa" and hasattr(F, "scaled_dot_product_attention"):
        return F.scaled_dot_product_attention, "sdpa"
    if kind == "sdpa":
        print(f"torch {torch.__version__} has no scaled_dot_product_attention: math attention instead", file=sys.stderr)

    def math_attention(q, k, v):  # example.py's Attention
        w = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1]), dim=-1)
        return w @ v
    return math_attention, "math"


class Model:
    def __init__(self, p, size, ids, attention):
        self.p, self.s, self.attn = p, size, attention
        self.cos, self.sin = self.rope_tables(ids)

    def lin(self, name, x):
        return F.linear(x, self.p[name + ".weight"], self.p[name + ".bias"])

    def rope_tables(self, ids):
        """example.py's RotaryEmbedding: two axes of head_dim/2 channels, f32, pairs interleaved."""
        angles = []
        dim = self.s["head_dim"] // 2
        for axis in range(2):
            inv = 1.0 / THETA ** (torch.arange(0, dim, 2, dtype=torch.float32, device=ids.device) / dim)
            angles.append((ids[:, axis:axis + 1] * inv[None]).repeat_interleave(2, dim=-1))
        a = torch.cat(angles, dim=-1)
        return torch.cos(a), torch.sin(a)

    def rope(self, x):
        xf = x.float()
        pairs = xf.unflatten(-1, (-1, 2))
        rotated = torch.stack([-pairs[..., 1], pairs[..., 0]], dim=-1).flatten(-2)
        return (xf * self.cos + rotated * self.sin).to(x.dtype)

    def rms(self, x, w):
        xf = x.float()
        return w * (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + EPS)).to(x.dtype)

    def timestep(self, t):
        half = self.s["freq_dim"] // 2
        freqs = torch.exp(-math.log(10000.0) * torch.arange(half, dtype=torch.float32, device=t.device) / half)
        args = (t.float() * 1000.0)[:, None] * freqs[None]
        return torch.cat([torch.cos(args), torch.sin(args)], dim=-1)

    def block(self, i, x, temb):
        b = f"transformer.blocks.{i}"
        H, heads, hd = self.s["hidden"], self.s["heads"], self.s["head_dim"]
        sh1, sc1, g1, sh2, sc2, g2 = self.lin(b + ".modulation.1", F.silu(temb))[:, None].chunk(6, dim=-1)
        h = F.layer_norm(x, (H,), eps=EPS) * (1 + sc1) + sh1
        B, S, _ = h.shape

        def heads_of(t):
            return t.view(B, S, heads, hd).transpose(1, 2)
        q = self.rope(self.rms(heads_of(self.lin(b + ".attn.to_q", h)), self.p[b + ".attn.norm_q.weight"]))
        k = self.rope(self.rms(heads_of(self.lin(b + ".attn.to_k", h)), self.p[b + ".attn.norm_k.weight"]))
        v = heads_of(self.lin(b + ".attn.to_v", h))
        a = self.attn(q, k, v).transpose(1, 2).reshape(B, S, -1)
        x = x + g1 * self.lin(b + ".attn.to_out", a)
        h = F.layer_norm(x, (H,), eps=EPS) * (1 + sc2) + sh2
        f = self.lin(b + ".ff.proj_out", F.gelu(self.lin(b + ".ff.proj_in", h), approximate="tanh"))
        return x + g2 * f

    def forward(self, noise, text, t):
        img = self.lin("transformer.x_embedder", noise)
        txt = self.lin("transformer.context_embedder", text)
        emb = self.timestep(t).to(img.dtype)
        temb = self.lin("transformer.time_embed.linear_2", F.silu(self.lin("transformer.time_embed.linear_1", emb)))
        x = torch.cat([txt, img], dim=1)
        for i in range(self.s["blocks"]):
            x = self.block(i, x, temb)
        x = x[:, txt.shape[1]:]
        scale, shift = self.lin("transformer.norm_out.linear", F.silu(temb))[:, None].chunk(2, dim=-1)
        x = F.layer_norm(x, (self.s["hidden"],), eps=EPS) * (1 + scale) + shift
        return self.lin("transformer.proj_out", x)


def sync(device):
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def run(model, x, text, sigmas, device):
    """The Euler loop, each step timed with the device synchronised at both ends."""
    dtype, times = x.dtype, []
    for i in range(len(sigmas) - 1):
        sync(device)
        t0 = time.perf_counter()
        t = sigmas[i:i + 1].to(device, dtype)
        v = model.forward(x, text, t)
        x = (x.float() + float(sigmas[i + 1] - sigmas[i]) * v.float()).to(dtype)
        sync(device)
        times.append((time.perf_counter() - t0) * 1e3)
    return x, times


def agreement(a, b):
    """rel-RMS of a against b (over b's RMS, in f64) and the fraction of identical values."""
    a64, b64 = a.double().cpu(), b.double().cpu()
    rel = ((a64 - b64).norm() / b64.norm()).item()
    return rel, (a.cpu() == b.cpu()).double().mean().item()


def ours_output(path, device):
    o = Trace(path)
    return o.tensor(next(iter(o.manifest["outputs"].values())), device)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trace", required=True, help="the wide fixture's trace (gen -wide)")
    ap.add_argument("--ours", help="zflow generate's -o on that trace")
    ap.add_argument("--ours-timings", help="zflow generate's --timings JSON")
    ap.add_argument("--device", default="cuda", help="cuda (default) or cpu")
    ap.add_argument("--attention", choices=("sdpa", "math"), default="sdpa")
    ap.add_argument("--warmup", type=int, default=0, help="untimed model calls before the loop (0: both sides start cold)")
    ap.add_argument("--json", help="write the numbers here")
    args = ap.parse_args()
    dev = args.device
    if dev.startswith("cuda"):
        torch.backends.cuda.matmul.allow_tf32 = False
        print("torch", torch.__version__, torch.cuda.get_device_name(0))
    else:
        print("torch", torch.__version__, "cpu")
    tr = Trace(args.trace)
    p, size = load_model(tr, dev)
    ins = tr.manifest["inputs"]
    noise, text = tr.tensor(ins["noise"], dev), tr.tensor(ins["encoder_hidden_states"], dev)
    sigmas = tr.tensor(ins["sigmas"], "cpu").float()
    ids = tr.tensor("s0/transformer.pos_embed/arg0", dev).float()
    attn, attn_kind = attention_fn(args.attention)
    model = Model(p, size, ids, attn)
    print(f"model: {size['blocks']} blocks, hidden {size['hidden']}, {size['heads']} heads x {size['head_dim']}, "
          f"{noise.shape[1]} image + {text.shape[1]} text rows, {len(sigmas) - 1} steps, {noise.dtype}, attention {attn_kind}")
    with torch.no_grad():
        for _ in range(args.warmup):
            model.forward(noise, text, sigmas[:1].to(dev, noise.dtype))
        x, times = run(model, noise, text, sigmas, dev)
    res = {"torch": torch.__version__, "device": dev, "attention": attn_kind, "size": size,
           "steps": [{"step": i, "ms": ms} for i, ms in enumerate(times)]}

    ours_ms = None
    if args.ours_timings:
        with open(args.ours_timings) as f:
            ours_ms = [s["ms"] for s in json.load(f)["steps"]]
        if len(ours_ms) != len(times):
            sys.exit(f"{args.ours_timings}: {len(ours_ms)} steps, torch ran {len(times)}")
    print()
    print(f"{'step':>4s} {'zflow ms':>10s} {'torch ms':>10s} {'zflow/torch':>12s}")
    for i, ms in enumerate(times):
        if ours_ms:
            print(f"{i:4d} {ours_ms[i]:10.2f} {ms:10.2f} {ours_ms[i] / ms:12.3f}")
        else:
            print(f"{i:4d} {'-':>10s} {ms:10.2f} {'-':>12s}")
    if len(times) > 1:
        warm = statistics.median(times[1:])
        line = f"median of steps 1..{len(times) - 1}: torch {warm:.2f} ms"
        if ours_ms:
            zw = statistics.median(ours_ms[1:])
            line += f", zflow {zw:.2f} ms, zflow/torch {zw / warm:.3f}"
            res["zflow_steps_ms"] = ours_ms
        print(line)

    ref = tr.tensor(tr.manifest["outputs"]["latents"], dev) if "latents" in tr.manifest.get("outputs", {}) else None
    pairs = []
    ref_name = f"trace (the fixture's {tr.manifest.get('producer', {}).get('device', '?')} run)"
    if args.ours:
        ours = ours_output(args.ours, dev)
        if ours.shape != x.shape or ours.dtype != x.dtype:
            sys.exit(f"{args.ours}: {tuple(ours.shape)} {ours.dtype}, torch's latents are {tuple(x.shape)} {x.dtype}")
        pairs.append(("zflow vs torch", ours, x))
        if ref is not None:
            pairs.append(("zflow vs " + ref_name, ours, ref))
    if ref is not None:
        pairs.append(("torch vs " + ref_name, x, ref))
    print()
    res["agreement"] = {}
    for name, a, b in pairs:
        rel, same = agreement(a, b)
        res["agreement"][name] = {"rel_rms": rel, "identical": same}
        print(f"final latents, {name}: rel-RMS {rel:.3e}, identical {str(x.dtype).replace('torch.', '')} values {same:.4f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=2)


if __name__ == "__main__":
    main()
