#!/usr/bin/env python3
"""Write the DiT fixtures the Go tests read: fixtures/dit/dit-f32.npz and dit-bf16.npz.

The reference itself (plain torch modules, seeded random weights, a 3-step
flow-matching Euler loop) and its capture are in zflow_capture/example.py, so
that `python3 -m zflow_capture example OUT.npz` runs the same code.

    /usr/bin/python3 capture/examples/dit_reference.py [OUT_DIR]
"""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # run in place, without installing

import torch  # noqa: E402

from zflow_capture import example  # noqa: E402


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "..", "fixtures", "dit")
    os.makedirs(out, exist_ok=True)
    for dtype, tag in ((torch.float32, "f32"), (torch.bfloat16, "bf16")):
        path = os.path.normpath(os.path.join(out, f"dit-{tag}.npz"))
        s = example.capture(path, dtype=dtype)
        print(f"wrote {path}: {s['calls']} calls, {s['tensors']} tensors, "
              f"{s['bytes']} bytes of tensor data, {os.path.getsize(path)} bytes on disk")


if __name__ == "__main__":
    main()
