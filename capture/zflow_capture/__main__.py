"""Command line: python3 -m zflow_capture example OUT.npz [--dtype bfloat16]."""

import argparse
import sys

from ._version import __version__

DESCRIPTION = """\
Write zflow traces (format version 1) from a live PyTorch run.

The capture is a library; use it around your own reference:

    from zflow_capture import Capture
    with Capture(model, name="transformer", path="ref.npz") as cap:
        cap.input("noise", x)
        for i in range(steps):
            with cap.step(i):
                v = model(x, t[i])
            x = x + (t[i + 1] - t[i]) * v
        cap.output("latents", x)

This command runs the bundled example: a small DiT-style reference (plain torch
modules, seeded random weights) sampled with a 3-step Euler loop.
"""

EXAMPLES = """\
examples:
  python3 -m zflow_capture example dit-f32.npz
  python3 -m zflow_capture example dit-bf16.npz --dtype bfloat16
  python3 -m zflow_capture example dit.safetensors
"""


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="python3 -m zflow_capture", description=DESCRIPTION, epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"zflow_capture {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    example = commands.add_parser("example", help="capture the bundled DiT-style example into OUT")
    example.add_argument("out", metavar="OUT", help="trace path ending in .npz or .safetensors")
    example.add_argument("--dtype", choices=["float32", "bfloat16", "float16"], default="float32")
    example.add_argument("--device", default="cpu", help="torch device (default cpu)")
    example.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stderr)
        return 2

    import torch  # imported late: --help works without it

    from . import example as dit
    from .errors import CaptureError

    try:
        s = dit.capture(args.out, dtype=getattr(torch, args.dtype), device=args.device, seed=args.seed)
    except (CaptureError, ValueError, OSError) as e:
        print(f"zflow_capture: {e}", file=sys.stderr)
        return 2
    print(f"wrote {s['path']}: {s['calls']} calls, {s['tensors']} tensors, "
          f"{s['params']} params, {s['steps']} steps, {s['bytes']} bytes of tensor data")
    return 0


if __name__ == "__main__":
    sys.exit(main())
