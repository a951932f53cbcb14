"""Pass limits for score.sh's lines: each replica's reference bf16-vs-f32 rel-RMS (conformance.py's rule).

usage: python3 bench/unseen/limits.py DIR                 one line per <name>-bf16.npz beside a <name>-f32.npz
       python3 bench/unseen/limits.py GENERATED REF F32REF a generated output against the reference, with the limit
"""
import json, os, sys
import numpy as np

def output(path):
    z = np.load(path)
    m = json.loads(z["__zflow__"].tobytes())
    outs = m.get("outputs") or {}
    key = outs.get("latents") or next(iter(outs.values()))
    a = z[key]
    if (m.get("dtypes") or {}).get(key) == "bfloat16":
        a = (a.astype(np.uint32) << 16).view(np.float32)
    return a.astype(np.float64)

def relrms(a, b):
    a = a.reshape(b.shape)
    return float(np.sqrt(((a - b) ** 2).sum() / max((b ** 2).sum(), 1e-300)))

if __name__ == "__main__":
    d = sys.argv[1]
    if len(sys.argv) == 4:  # GENERATED REFERENCE F32REF: a generated output against the reference
        g, r, f = output(sys.argv[1]), output(sys.argv[2]), output(sys.argv[3])
        print(f"generated vs reference {relrms(g, r):.4e}; limit (bf16 ref vs f32 ref) {relrms(r, f):.4e}")
        sys.exit(0)
    for f in sorted(os.listdir(d)):
        if f.endswith("-bf16.npz") and os.path.exists(os.path.join(d, f[:-9] + "-f32.npz")):
            print(f"{f[:-9]:40s} limit {relrms(output(os.path.join(d, f)), output(os.path.join(d, f[:-9] + '-f32.npz'))):.4e}")
