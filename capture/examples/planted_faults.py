#!/usr/bin/env python3
"""Write the planted-fault traces that `zflow diff`'s diagnosis is tested on.

    /usr/bin/python3 capture/examples/planted_faults.py [OUT_DIR] [--faults F,...]

OUT_DIR defaults to fixtures/faults. It receives, all float32 on CPU, one Euler
step of the DiT-style example (zflow_capture/example.py, seed 0):

- ref.npz: the reference (no fault);
- clean.npz: the same computation run again, as a port that is right would
  record it (its tensors are bit-identical to ref.npz; only the manifest's
  producer.fault differs);
- <fault>.npz for each fault in DEFAULT_FAULTS: one planted change each, the
  weights, inputs, module paths and ports unchanged, so that boundaries pair
  up by key;
- README.md: for each fault the first boundary that differs, in execution
  order, the signature it should produce, and the per-channel numbers there,
  all computed here by comparing the traces (nothing in it is typed by hand).

Faults outside DEFAULT_FAULTS (wrong_activation_erf) are analysed in a
temporary folder and reported in the README, but not written to OUT_DIR unless
named with --faults.

The comparison helpers (boundary order, first difference, per-channel
statistics) are importable: capture/tests/test_planted_faults.py uses them.
"""

import argparse
import io
import json
import math
import os
import sys
import tempfile
import zipfile
from collections import defaultdict

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # run in place, without installing

DEFAULT_OUT = os.path.normpath(os.path.join(HERE, "..", "..", "fixtures", "faults"))
DEFAULT_FAULTS = ("swap_shift_scale", "wrong_activation", "transposed_unpatchify", "no_norm_offset", "f16_overflow")
EXTRA_FAULTS = ("wrong_activation_erf",)
N_STEPS = 1
MANIFEST = "__zflow__.npy"

# The documented truth for each fault: the first boundary (in execution order,
# see boundary_order) whose tensor differs from the reference's, and the
# signature DESIGN.md's taxonomy gives the fault. The tests check the first
# against freshly made traces; the README reports what the numbers show.
EXPECTED = {
    "swap_shift_scale": ("s0/transformer.blocks.0.attn/arg0", "bias",
                         "blocks read the 6 modulation chunks as scale, shift, gate (twice) instead of "
                         "shift, scale, gate: `norm(x)·(1 + shift) + scale`"),
    "wrong_activation": ("s0/transformer.blocks.0.ff.act/out", "activation",
                         "MLP activation SiLU instead of GELU-tanh"),
    "wrong_activation_erf": ("s0/transformer.blocks.0.ff.act/out", "activation",
                             "MLP activation exact (erf) GELU instead of GELU-tanh"),
    "transposed_unpatchify": ("s0/transformer/out.0", "topology",
                              "model output's 3×4 token grid read as 4×3: output token (r, c) = "
                              "reference token c·3 + r"),
    "no_norm_offset": ("s0/transformer.blocks.0.attn/arg0", "magnitude",
                       "every modulation is `norm(x)·scale + shift` (blocks and final norm), the `1 +` missing"),
    "f16_overflow": ("s0/transformer.blocks.0.ff.proj_in/out", "numerics",
                     "the MLP's first linear is an f16 GEMM (f16 inputs and weights, f32 accumulation, f16 "
                     "result) with alpha = 2^15, divided by 2^15 after: |x·Wᵀ| > 1.999 overflows to ±Inf"),
}


# --- reading and ordering traces -----------------------------------------------


def load(path):
    """(manifest, {key: array}) of an npz trace, with numpy and zipfile only."""
    with zipfile.ZipFile(path) as z:
        manifest = json.loads(np.load(io.BytesIO(z.read(MANIFEST))).tobytes().decode("utf-8"))
        arrays = {n[:-4]: np.load(io.BytesIO(z.read(n))) for n in z.namelist() if n != MANIFEST}
    return manifest, arrays


def is_result(port):
    return port == "out" or port.startswith("out.")


def boundary_order(manifest):
    """Every tensor key in execution order: request inputs; then each call's
    argument ports when it is entered and its result ports when it returns
    (after all its descendants' ports); then request outputs. Parameters are
    not boundaries. Note that the manifest's `calls` are in *entry* order, so a
    container's `out` comes before its children's ports there; in execution
    order it comes after them."""
    children = defaultdict(list)
    for c in manifest["calls"]:
        children[c["parent"]].append(c)
    order = list(manifest["inputs"].values())
    stack = [(c, False) for c in reversed(children[None])]
    while stack:
        call, leaving = stack.pop()
        ports = call["tensors"].items()
        if leaving:
            order += [k for p, k in ports if is_result(p)]
            continue
        order += [k for p, k in ports if not is_result(p)]
        stack.append((call, True))
        stack += [(c, False) for c in reversed(children[call["id"]])]
    return order + list(manifest["outputs"].values())


def same_bits(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def compare(ours_path, ref_path):
    """(order, differing keys in order, unpaired keys); raises if parameters differ."""
    om, oa = load(ours_path)
    rm, ra = load(ref_path)
    for name, key in rm["params"].items():
        if om["params"].get(name) != key or not same_bits(oa[key], ra[key]):
            raise AssertionError(f"{ours_path}: parameter {name} differs from {ref_path}")
    order = boundary_order(rm)
    unpaired = sorted(set(order) ^ set(boundary_order(om)))
    differing = [k for k in order if k in oa and not same_bits(oa[k], ra[k])]
    return order, differing, unpaired


# --- per-channel statistics ---------------------------------------------------


def channel_report(ours, ref):
    """Numbers at one boundary, read as rows × channels (channels = last axis),
    over finite pairs, population statistics (divide by n), computed as
    reports.Diagnose defines them (reports/doc.go)."""
    C = ref.shape[-1]
    o = ours.reshape(-1, C).astype(np.float64)
    r = ref.reshape(-1, C).astype(np.float64)
    fin = np.isfinite(o) & np.isfinite(r)
    out = {"shape": list(ref.shape), "rows": o.shape[0], "channels": C,
           "ours_nan": int(np.isnan(o).sum()), "ours_inf": int(np.isinf(o).sum()),
           "ours_pos_inf": int(np.isposinf(o).sum()), "ours_neg_inf": int(np.isneginf(o).sum()),
           "ref_nan": int(np.isnan(r).sum()), "ref_inf": int(np.isinf(r).sum()),
           "ours_beyond_f16": int((np.abs(o[np.isfinite(o)]) > 65504).sum())}
    d = np.where(fin, o - r, 0.0)
    out["max_abs"] = float(np.abs(d).max())
    out["rel_rms"] = float(math.sqrt((d ** 2).sum() / (np.where(fin, r, 0) ** 2).sum()))
    mo, mr, so, sr, alpha = [], [], [], [], []
    resid = scale = mean_part = unexplained = smooth_resid = 0.0
    bins = min(16, max(1, o.shape[0] // 32))  # reports.Diagnose's SmoothExplained bins
    n_multi = n_pos = n_all = 0
    for ch in range(C):
        f = fin[:, ch]
        oc, rc = o[f, ch], r[f, ch]
        n = len(rc)
        m_o, m_r = oc.mean(), rc.mean()
        v_o, v_r = oc.var(), rc.var()
        cov = ((oc - m_o) * (rc - m_r)).mean()
        a = cov / v_r if v_r > 0 else 1.0
        resid += n * max(0.0, v_o - cov * a) if v_r > 0 else n * v_o
        scale += n * (a - 1) ** 2 * v_r
        mean_part += n * (m_o - m_r) ** 2
        unexplained += n * ((m_o - m_r) - (a - 1) * m_r) ** 2
        mo.append(m_o), mr.append(m_r), so.append(math.sqrt(v_o)), sr.append(math.sqrt(v_r)), alpha.append(a)
        t = math.sqrt(m_r * m_r + v_r) / 256
        n_pos += int((np.abs(oc - rc) <= t).sum())
        n_multi += int((np.abs(np.sort(oc) - np.sort(rc)) <= t).sum())
        n_all += n
        by_ref = np.argsort(rc, kind="stable")
        for b in range(bins):
            part = (oc - rc)[by_ref[b * n // bins:(b + 1) * n // bins]]
            smooth_resid += ((part - part.mean()) ** 2).sum() if len(part) else 0.0
    mo, mr, so, sr, alpha = map(np.array, (mo, mr, so, sr, alpha))
    sum_d2 = (d ** 2).sum()
    dm, ds = mo - mr, so - sr
    out.update({
        "ref_mean_range": [float(mr.min()), float(mr.max())],
        "ref_std_range": [float(sr.min()), float(sr.max())],
        "ours_mean_range": [float(mo.min()), float(mo.max())],
        "ours_std_range": [float(so.min()), float(so.max())],
        "dmean_max_abs": float(np.abs(dm).max()), "dmean_rms": float(math.sqrt((dm ** 2).mean())),
        "dstd_max_abs": float(np.abs(ds).max()), "dstd_rms": float(math.sqrt((ds ** 2).mean())),
        "std_ratio": [float((so / sr).min()), float((so / sr).max())],
        "mean_shift_in_ref_std": float((np.abs(dm) / sr).max()),
        "slope": [float(alpha.min()), float(alpha.max())],
        "affine_explained": float(max(0.0, min(1.0, 1 - resid / sum_d2))) if sum_d2 else 1.0,
        "scale_share": float(scale / (scale + min(mean_part, unexplained))) if scale + min(mean_part, unexplained) else 0.0,
        "mean_share": float(mean_part / (scale + mean_part)) if scale + mean_part else 0.0,
        "multiset_match": n_multi / n_all if n_all else 1.0,
        "position_match": n_pos / n_all if n_all else 1.0,
        "smooth_bins": bins,
        "smooth_explained": float(max(0.0, min(1.0, 1 - smooth_resid / sum_d2))) if sum_d2 else 1.0,
        "per_channel": {name: [float(f"{v:.6g}") for v in arr]
                        for name, arr in (("ref_mean", mr), ("ref_std", sr), ("ours_mean", mo), ("ours_std", so))},
    })
    return out


# --- writing -------------------------------------------------------------------


def capture(path, fault):
    import torch

    from zflow_capture import example
    return example.capture(path, dtype=torch.float32, device="cpu", fault=fault, n_steps=N_STEPS,
                           producer={"fault": fault or "none"})


def write(out, faults):
    """ref.npz, clean.npz and <fault>.npz for each fault, into out."""
    os.makedirs(out, exist_ok=True)
    paths = {}
    for name, fault in [("ref", None), ("clean", None)] + [(f, f) for f in faults]:
        path = os.path.join(out, f"{name}.npz")
        capture(path, fault)
        paths[name] = path
    return paths


def analyse(paths):
    """Per trace: first differing boundary, counts, and the numbers there."""
    rows = {}
    _, ref = load(paths["ref"])
    for name, path in paths.items():
        if name == "ref":
            continue
        order, differing, unpaired = compare(path, paths["ref"])
        row = {"boundaries": len(order), "differing": len(differing), "unpaired": unpaired,
               "first": differing[0] if differing else None}
        if differing:
            _, ours = load(path)
            k = differing[0]
            row["index"] = order.index(k)
            row["previous"] = order[row["index"] - 1]
            row["stats"] = channel_report(ours[k], ref[k])
            row["nonfinite_after"] = {key: {"nan": int(np.isnan(ours[key]).sum()), "inf": int(np.isinf(ours[key]).sum()),
                                            "size": int(ours[key].size)}
                                      for key in differing[1:] if not np.isfinite(ours[key]).all()}
        rows[name] = row
    return rows


# --- README ----------------------------------------------------------------------


def fmt(x):
    return f"{x:.3g}"


def rng(r):
    return f"[{fmt(r[0])}, {fmt(r[1])}]"


def readme(rows, sizes, written):
    import torch

    L = []
    w = L.append
    w("# Planted faults\n")
    w("Traces for testing `zflow diff`'s diagnosis (issue 4): a reference, a clean port, and one port per")
    w("planted fault, each changing exactly one thing. Made by")
    w("")
    w("    /usr/bin/python3 capture/examples/planted_faults.py")
    w("")
    w("from the DiT-style example in `capture/zflow_capture/example.py` (`build(fault=...)`: seed 0, the")
    w("same weights and inputs in every file), float32 on CPU, **one Euler step** (`s0`, σ 1.0 → 0.75;")
    w(f"`input/sigmas` = [1.0, 0.75]), made with torch {torch.__version__} (the same torch gives the same")
    w("bytes). This README and `numbers.json` are written by the script from its own comparison of the")
    w("traces; do not edit them by hand. The tests (`capture/tests/test_planted_faults.py`) remake every")
    w("trace and check the first differing boundary named here.\n")
    w(f"Every file has the same 48 calls, module paths, ports and 44 parameters (bit-identical), so every")
    w(f"boundary pairs up by key ({rows['clean']['boundaries']} call and request tensors; no unpaired keys).")
    w("Only `producer.fault` in the manifest tells the files apart.\n")
    w("| file | bytes | what the port does differently |")
    w("| --- | ---: | --- |")
    w(f"| `ref.npz` | {sizes['ref']} | the reference |")
    w(f"| `clean.npz` | {sizes['clean']} | nothing: the same computation run again (tensors bit-identical to `ref.npz`); must pass |")
    for f in written:
        w(f"| `{f}.npz` | {sizes[f]} | {EXPECTED[f][2]} |")
    w("")
    w("## First differing boundary and expected signature\n")
    w("Execution order: request inputs; a call's argument ports (`arg*`, `kw.*`) when it is entered;")
    w("its result ports (`out*`) when it returns, i.e. after all its children's ports; request outputs")
    w("last. The manifest lists calls in *entry* order, so a container's `out` (the root `transformer`'s")
    w("`out.0` is call 0) must be moved after its children: ordered by entry alone, the root's `out.0`")
    w("would be the first failing boundary of every fault. Every boundary before the one named is")
    w("bit-identical to the reference; the one named differs; \"differing\" counts all boundaries that")
    w("differ (later ones that do not depend on the fault, such as block 1's modulation, stay equal).")
    w("The expected signature is DESIGN.md's taxonomy for the fault; what the numbers show is below.\n")
    w("| fault | first differing boundary (# in order, of N) | previous boundary (identical) | differing | expected signature |")
    w("| --- | --- | --- | ---: | --- |")
    w(f"| clean | none | | 0 of {rows['clean']['boundaries']} | none (must pass) |")
    for f in DEFAULT_FAULTS + EXTRA_FAULTS:
        r = rows[f]
        tag = "" if f in written else " (file not committed)"
        w(f"| {f}{tag} | `{r['first']}` (#{r['index']}, of {r['boundaries']}) | `{r['previous']}` | "
          f"{r['differing']} | {EXPECTED[f][1]} |")
    w("")
    w("## Numbers at the first differing boundary\n")
    w("Read as rows × channels (channels = the last axis), over finite pairs; population mean and std")
    w("(÷ n); Δ = ours − ref, per channel. The other columns use `reports.Diagnose`'s definitions")
    w("(reports/doc.go), recomputed here in NumPy: std ratio = ours std / ref std; slope α of the")
    w("per-channel least-squares fit ours ≈ α·ref + β; affine expl. = share of Σd² that fit removes;")
    w("scale share = scale / (scale + min(mean, unexplained mean)); mean share = mean / (scale + mean);")
    w("smooth expl. = share of Σd² removed by per-channel, per-bin mean differences (bins of ≥ 32 rows,")
    w("so **one bin** at these sizes, where it is simply the share of Σd² in the per-channel Δmean);")
    w("multiset / position match = fraction of pairs within 2⁻⁸ of the channel's reference RMS after")
    w("sorting each channel / in place. Per-channel means and stds of both sides are in `numbers.json`.\n")
    w("| fault | rows × ch | rel-RMS | max abs | NaN / +Inf / −Inf (ours) | max abs Δmean | max abs Δstd | "
      "max abs Δmean / ref std | std ratio | slope α | affine expl. | scale share | mean share | "
      "smooth expl. | multiset / position match |")
    w("| --- | --- | ---: | ---: | --- | ---: | ---: | ---: | --- | --- | ---: | ---: | ---: | ---: | --- |")
    for f in DEFAULT_FAULTS + EXTRA_FAULTS:
        s = rows[f]["stats"]
        w(f"| {f} | {s['rows']} × {s['channels']} | {fmt(s['rel_rms'])} | {fmt(s['max_abs'])} | "
          f"{s['ours_nan']} / {s['ours_pos_inf']} / {s['ours_neg_inf']} | {fmt(s['dmean_max_abs'])} | "
          f"{fmt(s['dstd_max_abs'])} | {fmt(s['mean_shift_in_ref_std'])} | {rng(s['std_ratio'])} | "
          f"{rng(s['slope'])} | {fmt(s['affine_explained'])} | {fmt(s['scale_share'])} | "
          f"{fmt(s['mean_share'])} | {fmt(s['smooth_explained'])} | "
          f"{fmt(s['multiset_match'])} / {fmt(s['position_match'])} |")
    w("")
    w("Reference per-channel statistics there: " + "; ".join(
        f"`{k}` mean {rng(st['ref_mean_range'])}, std {rng(st['ref_std_range'])}"
        for k, st in {rows[f]["first"]: rows[f]["stats"] for f in DEFAULT_FAULTS}.items()) + ".\n")
    w("## What the numbers show\n")
    w(notes(rows))
    return "\n".join(L) + "\n"


def notes(rows):
    sw, wa, we, tu, nn, fo = (rows[f]["stats"] for f in (
        "swap_shift_scale", "wrong_activation", "wrong_activation_erf", "transposed_unpatchify",
        "no_norm_offset", "f16_overflow"))
    act_nf = rows["f16_overflow"]["nonfinite_after"]
    act = act_nf.get("s0/transformer.blocks.0.ff.act/out", {"nan": 0, "inf": 0})
    lat = act_nf.get("output/latents", {"nan": 0, "inf": 0, "size": 0})
    return f"""\
- **swap_shift_scale** (taxonomy: bias, chunk order). At `blocks.0.attn/arg0` the port has
  `n·(1 + shift) + scale` where the reference has `n·(1 + scale) + shift`, per channel, with
  `n = norm1(x)` equal on both sides. That is exactly affine per channel (affine expl.
  {sw['affine_explained']:.4f}) with slope (1 + shift)/(1 + scale) and a mean change
  (scale − shift)·(1 − mean n). **The std is off as much as the mean**: std ratio
  {rng(sw['std_ratio'])}, mean share {sw['mean_share']:.2f}, scale share {sw['scale_share']:.2f}. This is
  generic, not this seed: with per-channel mean n ≈ 0 and std n ≈ 1, Δmean ≈ scale − shift and
  Δstd ≈ shift − scale, so the two energies come out about equal. The numbers do not show "mean off,
  std matched". What separates it from a wrong activation is that it is exactly affine (a wrong
  activation is not: {wa['affine_explained']:.2f} below); a rule that wants "bias" here has to read
  "exactly affine per channel, mean and std both off" as a modulation fault.
- **wrong_activation** (activation). SiLU against GELU-tanh at `ff.act/out`: the error is a smooth
  non-linear function of the value (GELU-tanh ≈ x·σ(1.702x), SiLU = x·σ(x), and SiLU is below it
  everywhere, so the error is one-signed): affine expl. {wa['affine_explained']:.2f}, std ratio
  {rng(wa['std_ratio'])}, mean share {wa['mean_share']:.2f}.
- **wrong_activation_erf** (activation; file not committed, `--faults wrong_activation_erf` writes
  it): erf GELU against tanh GELU is a far smaller error, rel-RMS {we['rel_rms']:.2g}, max abs
  {we['max_abs']:.2g}: below bf16's 2⁻⁸ (3.9e-3), where reports.Diagnose says "none", yet thousands
  of times f32's rounding (2⁻²⁴ ≈ 6e-8; this trace is f32, and the clean port's rel-RMS is 0). Only a
  threshold that knows the reference's dtype sees it; it is here to calibrate against.
- **transposed_unpatchify** (topology). A permutation of the 12 image tokens at the model output:
  per-channel mean and std unchanged (max abs Δmean {tu['dmean_max_abs']:.2g}, Δstd
  {tu['dstd_max_abs']:.2g}; multiset match {tu['multiset_match']:.2f}) while only
  {tu['position_match']:.2f} of the values are in place (tokens (0, 0) and (2, 3) are fixed points
  of the permutation). It is the root call's `out.0` and then `output/latents` (2 boundaries); the
  root call is call 0 in entry order.
- **no_norm_offset** (magnitude). `n·scale + shift` against `n·(1 + scale) + shift`: slope
  scale/(1 + scale) per channel ({rng(nn['slope'])}), std ratio |scale/(1 + scale)|
  ({rng(nn['std_ratio'])}: the std collapses), means moving with the scale: scale share
  {nn['scale_share']:.2f}, affine expl. {nn['affine_explained']:.4f}. Its smooth expl. is only
  {nn['smooth_explained']:.2f}: with one bin that measure sees the per-channel mean shift only, so a
  rule "smooth expl. < 0.8 → random" would call this exactly affine error random at 16 rows.
- **f16_overflow** (numerics). `ff.proj_in/out` has {fo['ours_pos_inf']} +Inf and {fo['ours_neg_inf']}
  −Inf of {fo['rows'] * fo['channels']} values (|x·Wᵀ| > 65504 / 2^15 ≈ 2.0) and f16 rounding elsewhere
  (rel-RMS {fo['rel_rms']:.2g} over the finite pairs; no finite value is beyond ±65504, the Inf are
  the f16 overflow itself). The next boundary, `ff.act/out`, has {act['inf']} Inf and {act['nan']} NaN
  (GELU(+Inf) = +Inf, GELU(−Inf) = −Inf·0 = NaN); NaN then spreads through the MLP's second linear
  and the residual, and `output/latents` is {lat['nan']} NaN and {lat['inf']} Inf of {lat['size']}.
- **Sizes.** The first differing boundaries have 16 rows (12 at the output): any rule that needs
  many rows per channel (bins, row blocks) must say so or degrade gracefully here.
"""


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", nargs="?", default=DEFAULT_OUT)
    parser.add_argument("--faults", default=",".join(DEFAULT_FAULTS),
                        help="comma-separated faults to write (default: %(default)s)")
    args = parser.parse_args(argv)
    faults = [f for f in args.faults.split(",") if f]
    for f in faults:
        if f not in EXPECTED:
            parser.error(f"unknown fault {f!r}: need one of {', '.join(EXPECTED)}")
    out = os.path.abspath(args.out)
    paths = write(out, faults)
    sizes = {n: os.path.getsize(p) for n, p in paths.items()}
    for n, p in paths.items():
        print(f"wrote {p}: {sizes[n]} bytes")
    with tempfile.TemporaryDirectory() as tmp:
        extra = {f: capture(os.path.join(tmp, f"{f}.npz"), f)["path"]
                 for f in DEFAULT_FAULTS + EXTRA_FAULTS if f not in paths}
        rows = analyse({**paths, **extra})
    for name, r in rows.items():
        print(f"{name}: first differing {r['first']}, {r['differing']} of {r['boundaries']} differ")
        if name in EXPECTED and r["first"] != EXPECTED[name][0]:
            print(f"  but EXPECTED says {EXPECTED[name][0]}", file=sys.stderr)
            return 1
        if name == "clean" and r["differing"]:
            print("  but clean must equal ref", file=sys.stderr)
            return 1
    if set(DEFAULT_FAULTS) <= set(faults):
        text = readme(rows, sizes, [f for f in faults if f in DEFAULT_FAULTS + EXTRA_FAULTS])
        with open(os.path.join(out, "README.md"), "w") as fh:
            fh.write(text)
        with open(os.path.join(out, "numbers.json"), "w") as fh:
            json.dump(rows, fh, indent=1, sort_keys=True)
            fh.write("\n")
        print(f"wrote {os.path.join(out, 'README.md')} and numbers.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
