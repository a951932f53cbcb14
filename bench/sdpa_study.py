# Which SDPA kernel PyTorch runs for each attention case on this GPU, with
# its inputs and outputs, for studying its arithmetic offline (issue 11:
# exec.MathOnlineSoftmax was fitted to these; exec/cpu/testdata/sdpa_h200.npz
# is one head's first 48 query rows of case 12 (`plain`) and of STUDY2's
# case 0 (`bias`)). bf16, [B, H, S, D]. Needs torch 2.x on a CUDA GPU:
#
#   python3 bench/sdpa_study.py OUT            # 57 cases: head dims 8-128, masks, GQA
#   STUDY2=1 python3 bench/sdpa_study.py OUT   # finite biases, head dims 72-256, Sq 1, 1030 keys
#   STUDY3=1 python3 bench/sdpa_study.py OUT   # float16: plain, causal and biased at 300-520 keys
#
# Measured 2026-12-02 on an H200 (torch 2.11.0+cu130): the default is cuDNN
# in every case; flash and efficient equal it only at 64 keys, math never.
import json, sys, os
import numpy as np, torch
import torch.nn.functional as F
from torch.nn.attention import sdpa_kernel, SDPBackend

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
dev = "cuda"
backs = {"flash": SDPBackend.FLASH_ATTENTION, "efficient": SDPBackend.EFFICIENT_ATTENTION,
         "cudnn": SDPBackend.CUDNN_ATTENTION, "math": SDPBackend.MATH}

def bits(t):
    return t.detach().contiguous().view(torch.int16).cpu().numpy().view(np.uint16)

cases = []
for D in (32, 64, 128):
    for sq, sk in ((64, 64), (200, 200), (520, 520), (100, 333)):
        for mask in ("none", "causal", "float", "bool"):
            if mask == "causal" and sq != sk:
                continue
            cases.append(dict(D=D, sq=sq, sk=sk, mask=mask, H=2, KV=2))
for D in (64,):
    for mask in ("none", "causal"):
        cases.append(dict(D=D, sq=200, sk=200, mask=mask, H=4, KV=2))
# small head dims as the tiny conformance models have
for D in (8, 16, 24, 48, 80):
    cases.append(dict(D=D, sq=300, sk=300, mask="none", H=2, KV=2))
    cases.append(dict(D=D, sq=300, sk=300, mask="float", H=2, KV=2))

if os.environ.get("STUDY2"):
    cases = []
    for D in (64, 128):
        for sq, sk in ((200, 200), (520, 520)):
            cases.append(dict(D=D, sq=sq, sk=sk, mask="finite", H=2, KV=2))
    for D in (72, 96, 256):
        cases.append(dict(D=D, sq=300, sk=300, mask="none", H=2, KV=2))
    cases.append(dict(D=64, sq=1, sk=300, mask="none", H=2, KV=2))
    cases.append(dict(D=64, sq=300, sk=1030, mask="none", H=2, KV=2))
dtype = torch.bfloat16
if os.environ.get("STUDY3"):
    dtype = torch.float16
    cases = []
    for D in (64, 128):
        for mask in ("none", "causal", "finite"):
            cases.append(dict(D=D, sq=300, sk=300, mask=mask, H=2, KV=2))
        cases.append(dict(D=D, sq=200, sk=520, mask="float", H=4, KV=2))
    cases.append(dict(D=32, sq=100, sk=333, mask="none", H=2, KV=2))
summary = []
for n, c in enumerate(cases):
    g = torch.Generator(device="cpu").manual_seed(1000 + n)
    B, H, KV, D, sq, sk = 1, c["H"], c["KV"], c["D"], c["sq"], c["sk"]
    q = torch.randn(B, H, sq, D, generator=g).to(dev, dtype)
    k = torch.randn(B, KV, sk, D, generator=g).to(dev, dtype)
    v = torch.randn(B, KV, sk, D, generator=g).to(dev, dtype)
    kw = {}
    m = None
    if c["mask"] == "causal":
        kw["is_causal"] = True
    elif c["mask"] == "float":
        keep = torch.rand(B, 1, sq, sk, generator=g) > 0.3
        keep[..., 0] = True
        m = torch.zeros(B, 1, sq, sk).masked_fill(~keep, float("-inf")).to(dev, dtype)
        kw["attn_mask"] = m
    elif c["mask"] == "finite":
        m = (torch.randn(B, 1, sq, sk, generator=g) * 3).to(dev, dtype)
        kw["attn_mask"] = m
    elif c["mask"] == "bool":
        keep = torch.rand(B, 1, sq, sk, generator=g) > 0.3
        keep[..., 0] = True
        m = keep.to(dev)
        kw["attn_mask"] = m
    if KV != H:
        kw["enable_gqa"] = True
    default = F.scaled_dot_product_attention(q, k, v, **kw)
    res = {"default": bits(default)}
    same = {}
    for name, be in backs.items():
        try:
            with sdpa_kernel([be]):
                o = F.scaled_dot_product_attention(q, k, v, **kw)
            res[name] = bits(o)
            same[name] = bool(np.array_equal(res[name], res["default"]))
        except Exception as e:
            same[name] = "error: " + str(e).split("\n")[0][:80]
    arrs = {"q": bits(q), "k": bits(k), "v": bits(v)}
    if m is not None:
        arrs["mask"] = (m.cpu().numpy() if m.dtype == torch.bool else bits(m))
    for name in ("default", "flash", "efficient", "cudnn"):
        if name in res:
            arrs["out_" + name] = res[name]
    np.savez(os.path.join(out, f"case{n:02d}.npz"), **arrs)
    row = dict(c, case=n, same=same, dtype=str(dtype).replace("torch.", ""))
    summary.append(row)
    print(json.dumps(row), flush=True)
json.dump(summary, open(os.path.join(out, "summary.json"), "w"), indent=1)
