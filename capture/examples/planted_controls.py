#!/usr/bin/env python3
"""Write the planted-control traces that discovery is tested on.

    /usr/bin/python3 capture/examples/planted_controls.py [OUT_DIR]

OUT_DIR defaults to fixtures/controls. It receives, float32 on CPU, one Euler
step of the DiT-style example (zflow_capture/example.py, seed 0) per control:
the reference itself written with one semantic factor flipped (CONTROLS below:
the factor, its value in the control and in the plain reference), and a
README.md listing them. The weights and inputs are those of fixtures/dit;
only the computation changes. search/discover's controls test discovers each
trace and checks that the flip is found, decisively, and that the document
found generates the trace's output.
"""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # run in place, without installing

import torch  # noqa: E402

from zflow_capture import example  # noqa: E402

DEFAULT_OUT = os.path.normpath(os.path.join(HERE, "..", "..", "fixtures", "controls"))
N_STEPS = 1

# control -> (factor, scope, value in the control, value in the reference, what the code does)
CONTROLS = {
    "tanh_gate": ("gate_fn", "blocks.*", "tanh", "identity",
                  "both residuals are `x + tanh(gate)·y`"),
    "half_rope": ("rope_layout", "positions", "half", "interleaved",
                  "RoPE rotates the two halves of each head (`[x1, x2] → [−x2, x1]`), over one position axis "
                  "of 16 channels (text rows at 0, image rows at their row-major index): also `rope_axes` [16]"),
    "image_first": ("joint_order", "model", "image_first", "text_first",
                    "the joint sequence is `cat([image, text])`, positions likewise"),
    "final_shift_scale": ("final_norm_order", "final", "shift,scale", "scale,shift",
                          "the final norm's 2 chunks are read as shift, scale"),
    "euler_minus": ("euler_sign", "sampler", -1, 1,
                    "the sampler steps `x ← x − (σ[i+1] − σ[i])·v`"),
    "rms_norm": ("norm_kind", "blocks.*.norm1, blocks.*.norm2", "rms", "layer",
                 "norm1 and norm2 are RMS norms without affine (eps 1e-6) instead of LayerNorm"),
    "patchify": ("patch_layout", "embed.image", "c_ph_pw", "none",
                 "the latents are `[1, 4, 6, 8]`, packed into 12 rows of 16 by a 2×2 patchify like diffusers' "
                 "`_pack_latents` (features `(c, ph, pw)`, rows `(h, w)`) before `x_embedder`, unpacked after "
                 "`proj_out`; the Euler loop runs on `[1, 4, 6, 8]`"),
}


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    out = argv[0] if argv else DEFAULT_OUT
    os.makedirs(out, exist_ok=True)
    rows = []
    for control, (factor, scope, value, ref, what) in CONTROLS.items():
        path = os.path.join(out, control + ".npz")
        example.capture(path, dtype=torch.float32, device="cpu", control=control, n_steps=N_STEPS,
                        producer={"control": control})
        size = os.path.getsize(path)
        print(f"wrote {path}: {size} bytes")
        rows.append(f"| `{control}.npz` | {size} | `{factor}` at `{scope}` | `{value}` (reference: `{ref}`) | {what} |")
    with open(os.path.join(out, "README.md"), "w", encoding="utf-8") as f:
        f.write("# Planted controls\n\n")
        f.write("Traces for testing discovery (issue 6): the DiT-style reference of\n"
                "`capture/zflow_capture/example.py` (seed 0, the weights and inputs of `fixtures/dit`), float32\n"
                f"on CPU, {N_STEPS} Euler step (`s0`, σ 1.0 → 0.75), each written with **one semantic factor\n"
                "flipped** (`build(control=...)`). Made by\n\n"
                "    /usr/bin/python3 capture/examples/planted_controls.py\n\n"
                f"with torch {torch.__version__} (the same torch gives the same bytes); this README is written\n"
                "by the script. `producer.control` in the manifest names the control. The test\n"
                "(`search/discover/controls_test.go`) discovers each trace and requires the flipped factor\n"
                "at its value, decisively, and generation from the discovered document to reproduce\n"
                "`output/latents` (rel-RMS ≤ 1e-5).\n\n")
        f.write("| file | bytes | factor | value | what the code does |\n| --- | ---: | --- | --- | --- |\n")
        f.write("\n".join(rows) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
