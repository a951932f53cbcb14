#!/usr/bin/env python3
"""One real-width dual-stream DiT block (diffusers' FluxTransformerBlock:
hidden 3072, 24 heads x 128, 4096 image + 512 text rows) in PyTorch eager
bf16, timed on the GPU, beside the same block run by zflow's CUDA backend
(bench/block, a Go program, which writes its timings as JSON and its
outputs as bf16 bits).

The weights and inputs are the integer hash of bench/block/weights.go, so
both sides hold bit-identical tensors; the script checks the two outputs
against each other (rel-RMS) and prints the timing ratio, the GEMM TFLOP/s
of torch.matmul (cuBLAS) beside zflow's cuBLASLt calls, and SDPA beside
zflow's flash kernel.

    python3 bench/block_torch.py --ours ours.json --ours-out block_out.bin
"""
import argparse
import json
import math
import statistics

import torch
import torch.nn.functional as F

HIDDEN, HEADS, HEAD_D, MLP = 3072, 24, 128, 4 * 3072
IMG, TXT = 4096, 512


def hash_values(n, seed, scale, device):
    """bench/block/weights.go's hashValues, in int64 and float64."""
    m = 1 << 32
    h = (torch.arange(n, dtype=torch.int64, device=device) * 40503 + seed * 7919) % m
    h = h ^ (h >> 16)
    h = (h * 40503) % m
    h = h ^ (h >> 13)
    h = (h * 48271) % m
    h = h ^ (h >> 16)
    u = (h.double() + 0.5) / m
    return (((u - 0.5) * math.sqrt(12)) * scale).float()


def tensors():
    s = []

    def lin(name, out, inp):
        s.append((name + ".w", (out, inp), 1 / math.sqrt(inp), 0.0))
        s.append((name + ".b", (out,), 0.02, 0.0))

    for st in ("img", "txt"):
        lin(st + ".mod", 6 * HIDDEN, HIDDEN)
        lin(st + ".q", HIDDEN, HIDDEN)
        lin(st + ".k", HIDDEN, HIDDEN)
        lin(st + ".v", HIDDEN, HIDDEN)
        s.append((st + ".norm_q", (HEAD_D,), 0.1, 1.0))
        s.append((st + ".norm_k", (HEAD_D,), 0.1, 1.0))
        lin(st + ".out", HIDDEN, HIDDEN)
        lin(st + ".ff1", MLP, HIDDEN)
        lin(st + ".ff2", HIDDEN, MLP)
    s.append(("in.img", (1, IMG, HIDDEN), 1.0, 0.0))
    s.append(("in.txt", (1, TXT, HIDDEN), 1.0, 0.0))
    s.append(("in.temb", (1, HIDDEN), 1.0, 0.0))
    return s


def build(device):
    w = {}
    for i, (name, shape, scale, add) in enumerate(tensors()):
        v = hash_values(math.prod(shape), i + 1, scale, device)
        if add:
            v = v + add  # in f32, as the Go side
        w[name] = v.reshape(shape).to(torch.bfloat16)
    return w


def rope_tables(device):
    """diffusers Flux: per axis, f64 frequencies and angles, cos/sin to f32;
    interleaved (repeat_interleave 2); text ids 0, image ids (0, row, col)."""
    seq = TXT + IMG
    ids = torch.zeros(seq, 3, dtype=torch.float64, device=device)
    i = torch.arange(IMG, device=device)
    ids[TXT:, 1] = (i // 64).double()
    ids[TXT:, 2] = (i % 64).double()
    cos, sin = [], []
    for a, d in enumerate((16, 56, 56)):
        freqs = 1.0 / (10000 ** (torch.arange(0, d, 2, dtype=torch.float64, device=device) / d))
        ang = torch.outer(ids[:, a], freqs)
        cos.append(ang.cos().float().repeat_interleave(2, dim=1))
        sin.append(ang.sin().float().repeat_interleave(2, dim=1))
    return torch.cat(cos, -1), torch.cat(sin, -1)


def rms(x, w, eps=1e-6):
    """diffusers RMSNorm: f32 statistics, x̂ cast to the weight's dtype, ·γ."""
    v = x.float().pow(2).mean(-1, keepdim=True)
    return (x.float() * torch.rsqrt(v + eps)).to(w.dtype) * w


def rope(x, cos, sin):
    """diffusers apply_rotary_emb, use_real_unbind_dim=-1 (interleaved)."""
    xr, xi = x.reshape(*x.shape[:-1], -1, 2).unbind(-1)
    rot = torch.stack([-xi, xr], dim=-1).flatten(3)
    return (x.float() * cos + rot.float() * sin).to(x.dtype)


def block(w, cos, sin):
    img, txt, temb = w["in.img"], w["in.txt"], w["in.temb"]
    B = img.shape[0]
    mods = {}
    for st in ("img", "txt"):
        e = F.linear(F.silu(temb), w[st + ".mod.w"], w[st + ".mod.b"])
        mods[st] = e.chunk(6, dim=1)
    qkv = {}
    for st, x in (("img", img), ("txt", txt)):
        sh, sc = mods[st][0], mods[st][1]
        n = F.layer_norm(x, (HIDDEN,), eps=1e-6) * (1 + sc[:, None]) + sh[:, None]
        q = F.linear(n, w[st + ".q.w"], w[st + ".q.b"]).view(B, -1, HEADS, HEAD_D).transpose(1, 2)
        k = F.linear(n, w[st + ".k.w"], w[st + ".k.b"]).view(B, -1, HEADS, HEAD_D).transpose(1, 2)
        v = F.linear(n, w[st + ".v.w"], w[st + ".v.b"]).view(B, -1, HEADS, HEAD_D).transpose(1, 2)
        qkv[st] = (rms(q, w[st + ".norm_q"]), rms(k, w[st + ".norm_k"]), v)
    q = torch.cat([qkv["txt"][0], qkv["img"][0]], dim=2)
    k = torch.cat([qkv["txt"][1], qkv["img"][1]], dim=2)
    v = torch.cat([qkv["txt"][2], qkv["img"][2]], dim=2)
    q, k = rope(q, cos, sin), rope(k, cos, sin)
    a = F.scaled_dot_product_attention(q, k, v)
    a = a.transpose(1, 2).reshape(B, -1, HEADS * HEAD_D).to(q.dtype)
    attn = {"txt": a[:, :TXT], "img": a[:, TXT:]}
    out = {}
    for st, x in (("img", img), ("txt", txt)):
        sh1, sc1, g1, sh2, sc2, g2 = mods[st]
        o = F.linear(attn[st], w[st + ".out.w"], w[st + ".out.b"])
        x = x + g1[:, None] * o
        n = F.layer_norm(x, (HIDDEN,), eps=1e-6) * (1 + sc2[:, None]) + sh2[:, None]
        f = F.linear(F.gelu(F.linear(n, w[st + ".ff1.w"], w[st + ".ff1.b"]), approximate="tanh"), w[st + ".ff2.w"], w[st + ".ff2.b"])
        out[st] = x + g2[:, None] * f
    return out["img"], out["txt"]


def kernel_list(fn, calls):
    """Each device kernel's time per call (torch.profiler), largest first."""
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    rows, total = [], 0.0
    for e in prof.key_averages():
        us = getattr(e, "device_time_total", None)
        if us is None:
            us = getattr(e, "cuda_time_total", 0.0)
        if us <= 0:
            continue
        rows.append((us / calls, e.count / calls, e.key))
    rows.sort(reverse=True)
    lines = []
    for us, n, key in rows:
        total += us
        lines.append(f"{us / 1000:9.4f} ms  {n:5.1f}x  {key[:150]}")
    lines.append(f"{total / 1000:9.4f} ms  total (kernels' sum per call)")
    return "\n".join(lines) + "\n"


def bench(fn, warmup, iters):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(iters):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times), times


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ours", help="bench/block's JSON")
    ap.add_argument("--ours-out", help="bench/block's outputs (bf16 bits, img then txt)")
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--json", help="write torch's numbers here")
    ap.add_argument("--profile", help="write torch.profiler's kernel list of eager and compiled calls here")
    ap.add_argument("--no-compile", action="store_true", help="skip the torch.compile timing (the peer a user picks for speed)")
    args = ap.parse_args()
    dev = "cuda"
    torch.backends.cuda.matmul.allow_tf32 = False
    print("torch", torch.__version__, torch.cuda.get_device_name(0))
    w = build(dev)
    cos, sin = rope_tables(dev)
    with torch.no_grad():
        ms, all_ms = bench(lambda: block(w, cos, sin), args.warmup, args.iters)
        img, txt = block(w, cos, sin)
    res = {"block_ms": ms, "block_ms_all": all_ms, "gemm": [], "device": torch.cuda.get_device_name(0), "torch": torch.__version__}
    print(f"torch eager block: median {ms:.3f} ms (min {min(all_ms):.3f})")
    cms = None
    if not args.no_compile:
        # The same block through torch.compile (default mode), timed in the same run after
        # its compile (the warm-up calls); its outputs are compared with eager's.
        compiled = torch.compile(block)
        with torch.no_grad():
            cms, call = bench(lambda: compiled(w, cos, sin), max(args.warmup, 3), args.iters)
            cimg, ctxt = compiled(w, cos, sin)
        res["compiled_ms"], res["compiled_ms_all"] = cms, call
        if args.profile:
            with open(args.profile, "w") as f:
                for label, fn in (("compiled", lambda: compiled(w, cos, sin)), ("eager", lambda: block(w, cos, sin))):
                    f.write(f"== {label}: 5 calls, device time per call\n")
                    f.write(kernel_list(fn, 5))
        crel = max(((a.double() - b.double()).norm() / b.double().norm()).item() for a, b in ((cimg, img), (ctxt, txt)))
        print(f"torch.compile block: median {cms:.3f} ms (min {min(call):.3f}), compiled/eager {cms / ms:.3f}, rel-RMS vs eager {crel:.3e}")

    for m, n, k in ((4096, 3072, 3072), (4096, 12288, 3072), (4096, 3072, 12288), (8192, 8192, 8192)):
        x = hash_values(m * k, 101, 1, dev).reshape(m, k).to(torch.bfloat16)
        wt = hash_values(n * k, 102, 1 / math.sqrt(k), dev).reshape(n, k).to(torch.bfloat16)
        bias = hash_values(n, 103, 0.02, dev).to(torch.bfloat16)
        for with_bias in (False, True):
            fn = (lambda: F.linear(x, wt, bias)) if with_bias else (lambda: torch.matmul(x, wt.t()))
            gm, _ = bench(fn, 3, 20)
            res["gemm"].append({"M": m, "N": n, "K": k, "Bias": with_bias, "ms": gm, "tflops": 2 * m * n * k / gm / 1e9})
    seq = TXT + IMG
    q, k, v = (hash_values(seq * HIDDEN, 201 + i, 1, dev).reshape(1, seq, HEADS, HEAD_D).transpose(1, 2).to(torch.bfloat16) for i in range(3))
    am, _ = bench(lambda: F.scaled_dot_product_attention(q, k, v), 3, 20)
    res["attention_ms"] = am
    res["attention_tflops"] = 4 * seq * seq * HIDDEN / am / 1e9
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=2)

    if not args.ours:
        return
    with open(args.ours) as f:
        ours = json.load(f)
    print()
    print(f"{'':34s} {'zflow cuda':>12s} {'torch eager':>12s} {'zflow/torch':>12s}")
    print(f"{'block forward (ms)':34s} {ours['block_ms']:12.3f} {ms:12.3f} {ours['block_ms'] / ms:12.3f}")
    if cms is not None:
        print(f"{'block forward vs torch.compile (ms)':34s} {ours['block_ms']:12.3f} {cms:12.3f} {ours['block_ms'] / cms:12.3f}")
    if ours.get("block_fused_ms"):
        f = ours["block_fused_ms"]
        print(f"{'block, regions fused (ms)':34s} {f:12.3f} {ms:12.3f} {f / ms:12.3f}")
        if cms is not None:
            print(f"{'block, fused vs torch.compile (ms)':34s} {f:12.3f} {cms:12.3f} {f / cms:12.3f}")
        print(f"fused outputs identical to op by op: {ours.get('block_fused_identical')}")
    print(f"{'attention [1,4608,3072] (ms)':34s} {ours['attention_ms']:12.3f} {am:12.3f} {ours['attention_ms'] / am:12.3f}")
    for g, t in zip(ours.get("gemm") or [], res["gemm"]):  # none under bench/block -block-only
        label = f"GEMM {g['M']}x{g['N']}x{g['K']}{' +bias' if g['Bias'] else ''} TFLOP/s"
        print(f"{label:34s} {g['tflops']:12.1f} {t['tflops']:12.1f} {g['tflops'] / t['tflops']:12.3f}")
    if args.ours_out:
        raw = torch.from_file(args.ours_out, dtype=torch.int16, size=(IMG + TXT) * HIDDEN)
        raw = raw.view(torch.bfloat16).to(dev)
        o_img, o_txt = raw[: IMG * HIDDEN].reshape(img.shape), raw[IMG * HIDDEN :].reshape(txt.shape)
        for name, a, b in (("img", o_img, img), ("txt", o_txt, txt)):
            a, b = a.double(), b.double()
            rel = ((a - b).norm() / b.norm()).item()
            same = (a == b).double().mean().item()
            print(f"block output {name}: rel-RMS zflow vs torch {rel:.3e}, identical bf16 values {same:.4f}, max|diff| {(a - b).abs().max().item():.4g}")


if __name__ == "__main__":
    main()
