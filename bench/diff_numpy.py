#!/usr/bin/python3
"""The NumPy baseline for `make bench`: the per-boundary metrics of
`zflow diff OURS REF` (reports/doc.go defines them), computed the way a
careful NumPy user would: each tensor pair loaded whole from the npz,
vectorised, float64 sums, exact quantiles from a histogram.

    /usr/bin/python3 bench/diff_numpy.py OURS.npz REF.npz > numpy.json

It prints {"boundaries": [{key, shape, max_abs, mean_abs, rel_rms, cosine,
psnr, exact_fraction, ulp: {median, p99, max}, nan, inf}], "unpaired": [...]}
with the field names of zflow's JSON, so scripts/bench.sh can check that
both tools agree. Boundaries are the tensors of the reference's calls in
execution order (a call's inputs, its children, its outputs), then the
run's outputs. Only what Debian's python3-numpy provides is used.
"""
import json
import math
import sys
import zipfile

import numpy as np


def manifest(path):
    with zipfile.ZipFile(path) as z:
        with z.open("__zflow__.npy") as f:
            return json.loads(np.lib.format.read_array(f).tobytes())


def boundaries(m):
    """Keys in execution order, as zflow orders them."""
    calls = m["calls"]
    children = {}
    roots = []
    for c in calls:
        if c["parent"] is None:
            roots.append(c)
        else:
            children.setdefault(c["parent"], []).append(c)
    out = []

    def visit(c):
        ports = list(c["tensors"].items())
        out.extend(k for n, k in ports if not (n == "out" or n.startswith("out.")))
        for child in children.get(c["id"], []):
            visit(child)
        out.extend(k for n, k in ports if n == "out" or n.startswith("out."))

    for r in roots:
        visit(r)
    out.extend(m["outputs"][n] for n in sorted(m["outputs"]))
    seen = set()
    return [k for k in out if not (k in seen or seen.add(k))]


def values(z, m, key):
    """The tensor, its format ('bf16', 'f16', 'f32') and its lattice bits."""
    a = z[key]
    if m.get("dtypes", {}).get(key) == "bfloat16":
        return (a.astype(np.uint32) << 16).view(np.float32), "bf16"
    if a.dtype == np.float16:
        return a.astype(np.float32), "f16"
    return a.astype(np.float32, copy=False), "f32"


def lattice(x, fmt):
    """Each value's place on fmt's monotone integer line (after rounding
    to fmt, round to nearest even), as int64."""
    if fmt == "f32":
        u = x.view(np.uint32).astype(np.int64)
        mag, neg = u & 0x7FFFFFFF, (u >> 31) == 1
    else:
        if fmt == "bf16":
            u = x.view(np.uint32)
            b = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.int64)
        else:
            b = x.astype(np.float16).view(np.uint16).astype(np.int64)
        mag, neg = b & 0x7FFF, (b >> 15) == 1
    return np.where(neg, -mag, mag)


def nearest_rank(sorted_or_hist, n, q, hist):
    rank = max(1, math.ceil(q * n))
    if hist:
        return int(np.searchsorted(np.cumsum(sorted_or_hist), rank))
    return int(np.partition(sorted_or_hist, rank - 1)[rank - 1])


def metrics(o, r, fmt):
    fin = np.isfinite(o) & np.isfinite(r)
    of, rf = o[fin].astype(np.float64), r[fin].astype(np.float64)
    d = of - rf
    ad = np.abs(d)
    n = d.size
    sd2, so2, sr2, dot = d @ d, of @ of, rf @ rf, of @ rf
    res = {"count": int(o.size), "finite": int(n)}
    res["max_abs"] = float(ad.max()) if n else 0.0
    res["mean_abs"] = float(ad.mean()) if n else 0.0
    res["rel_rms"] = math.sqrt(sd2 / sr2) if sr2 > 0 else (0.0 if sd2 == 0 else math.inf)
    if so2 == 0 and sr2 == 0:
        res["cosine"] = 1.0
    elif so2 == 0 or sr2 == 0:
        res["cosine"] = 0.0
    else:
        res["cosine"] = max(-1.0, min(1.0, dot / math.sqrt(so2 * sr2)))
    if n == 0 or sd2 == 0:
        res["psnr"] = math.inf
    else:
        mref = float(np.abs(rf).max())
        res["psnr"] = 20 * math.log10(mref / math.sqrt(sd2 / n)) if mref > 0 else -math.inf
    notnan = ~(np.isnan(o) | np.isnan(r))
    ulp = np.abs(lattice(o[notnan], fmt) - lattice(r[notnan], fmt))
    res["exact_fraction"] = float((ulp == 0).sum() / o.size) if o.size else 1.0
    if ulp.size == 0:
        res["ulp"] = {"median": 0, "p99": 0, "max": 0}
    elif fmt == "f32":
        res["ulp"] = {"median": nearest_rank(ulp, ulp.size, 0.5, False),
                      "p99": nearest_rank(ulp, ulp.size, 0.99, False), "max": int(ulp.max())}
    else:
        h = np.bincount(ulp)
        res["ulp"] = {"median": nearest_rank(h, ulp.size, 0.5, True),
                      "p99": nearest_rank(h, ulp.size, 0.99, True), "max": int(h.size - 1)}
    res["nan"] = {"ours": int(np.isnan(o).sum()), "ref": int(np.isnan(r).sum())}
    res["inf"] = {"ours": int(np.isinf(o).sum()), "ref": int(np.isinf(r).sum())}
    return res


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: diff_numpy.py OURS.npz REF.npz")
    ours_path, ref_path = sys.argv[1:]
    mo, mr = manifest(ours_path), manifest(ref_path)
    ko, kr = boundaries(mo), boundaries(mr)
    zo, zr = np.load(ours_path), np.load(ref_path)
    have = set(ko)
    report = {"boundaries": [], "unpaired": [k for k in kr if k not in have] + [k for k in ko if k not in set(kr)]}
    for key in kr:
        if key not in have:
            continue
        o, _ = values(zo, mo, key)
        r, fmt = values(zr, mr, key)
        b = {"key": key, "shape": list(r.shape)}
        if o.shape != r.shape:
            b["error"] = "shapes differ"
        else:
            b.update(metrics(o.ravel(), r.ravel(), fmt))
        report["boundaries"].append(b)
        del o, r
    json.dump(report, sys.stdout, indent=1, default=str)
    print()


if __name__ == "__main__":
    main()
