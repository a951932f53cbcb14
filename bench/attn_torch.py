#!/usr/bin/env python3
"""PyTorch SDPA at the shapes cuda's TestAttentionTiming times, the same
way (bf16, the median over 10 event-timed runs of 5 calls back to back,
after 3 warm-ups), beside zflow's kernels read from that test's JSON, with
the ratios zflow/SDPA:

    ZFLOW_ATTN_BENCH=ours.json ./cuda.test -test.run TestAttentionTiming
    python3 bench/attn_torch.py --ours ours.json

Inputs are [B, S, H·D] viewed as [B, H, S, D] (a transpose, as diffusers
and transformers pass them). For grouped KV heads SDPA is timed with
enable_gqa=True and with K/V repeated to every head; the faster counts.
"""
import argparse
import json
import statistics

import torch
import torch.nn.functional as F


def bench(fn, warmup=3, iters=10, calls=5):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(iters):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(calls):
            fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) / calls)
    return statistics.median(times)


def sdpa_ms(seq, h, kv, d, causal):
    g = torch.Generator(device="cuda").manual_seed(0)

    def t(heads):
        x = torch.randn(1, seq, heads * d, device="cuda", generator=g).to(torch.bfloat16)
        return x.view(1, seq, heads, d).transpose(1, 2)

    q, k, v = t(h), t(kv), t(kv)
    out = {}
    with torch.no_grad():
        if kv == h:
            out["sdpa"] = bench(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal))
        else:
            out["sdpa enable_gqa"] = bench(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True))
            kr, vr = k.repeat_interleave(h // kv, dim=1), v.repeat_interleave(h // kv, dim=1)
            out["sdpa kv repeated"] = bench(lambda: F.scaled_dot_product_attention(q, kr, vr, is_causal=causal))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ours", required=True, help="TestAttentionTiming's JSON")
    args = ap.parse_args()
    print("torch", torch.__version__, torch.cuda.get_device_name(0))
    with open(args.ours) as f:
        ours = json.load(f)
    shapes = []
    for r in ours:
        key = (r["shape"], r["seq"], r["heads"], r["kv_heads"], r["head_dim"], r["causal"])
        if key not in shapes:
            shapes.append(key)
    for name, seq, h, kv, d, causal in shapes:
        flops = 4 * seq * seq * h * d / (2 if causal else 1)
        torch_ms = sdpa_ms(seq, h, kv, d, causal)
        best = min(torch_ms.values())
        print(f"\n{name}")
        for kname, ms in torch_ms.items():
            print(f"  {kname:20s} {ms:8.3f} ms {flops / ms / 1e9:7.1f} TFLOP/s")
        for r in ours:
            if r["shape"] == name:
                print(f"  zflow {r['kernel']:14s} {r['ms']:8.3f} ms {r['tflops']:7.1f} TFLOP/s  {r['ms'] / best:6.2f}x SDPA")


if __name__ == "__main__":
    main()
