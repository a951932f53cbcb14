"""A NumPy-only port of two linears of the DiT fixture, writing a trace zflow pairs.

    PYTHONPATH=capture python3 capture/examples/numpy_port.py fixtures/dit/dit-bf16.npz ours.npz
    zflow diff ours.npz fixtures/dit/dit-bf16.npz --step 0

    # the port's own names (embed/in, blk0.q/out), renamed by a --map file
    PYTHONPATH=capture python3 capture/examples/numpy_port.py fixtures/dit/dit-bf16.npz own.safetensors --own-names
    zflow diff own.safetensors fixtures/dit/dit-bf16.npz --step 0 --map fixtures/ports/dit-own-names.map

torch is made unimportable first: the port side needs NumPy and zflow_capture
only. The port computes transformer.x_embedder and the first block's to_q
itself (f32 matmul, rounded to bf16 as the reference stores them) from the
inputs and weights the reference trace holds; save_trace writes them under
step 0.
"""

import json
import sys

sys.modules["torch"] = None  # a port without torch: any import of it fails

import numpy as np  # noqa: E402

import zflow_capture  # noqa: E402


def f32(bits):
    """bf16 bit patterns (uint16) as float32."""
    return (bits.astype(np.uint32) << 16).view(np.float32)


def bf16(x):
    """float32 rounded to bf16 (to nearest, ties to even), as uint16 bit patterns."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def main(argv):
    if len(argv) not in (2, 3) or (len(argv) == 3 and argv[2] != "--own-names"):
        raise SystemExit("usage: numpy_port.py REF.npz OUT(.npz|.safetensors) [--own-names]")
    ref, out, own = argv[0], argv[1], len(argv) == 3
    z = np.load(ref)
    manifest = json.loads(bytes(z["__zflow__"]).decode())

    def linear(x, module):
        w = f32(z[manifest["params"][module + ".weight"]])
        b = f32(z[manifest["params"][module + ".bias"]])
        return bf16(f32(x) @ w.T + b)

    x = z["s0/transformer.x_embedder/arg0"]
    q_in = z["s0/transformer.blocks.0.attn.to_q/arg0"]
    t = {
        "transformer.x_embedder/arg0": x,
        "transformer.x_embedder/out": linear(x, "transformer.x_embedder"),
        "transformer.blocks.0.attn.to_q/arg0": q_in,
        "transformer.blocks.0.attn.to_q/out": linear(q_in, "transformer.blocks.0.attn.to_q"),
    }
    if own:
        names = {"transformer.x_embedder/arg0": "embed/in", "transformer.x_embedder/out": "embed/out",
                 "transformer.blocks.0.attn.to_q/arg0": "blk0.q/in", "transformer.blocks.0.attn.to_q/out": "blk0.q/out"}
        t = {names[k]: v for k, v in t.items()}
    zflow_capture.save_trace(out, t, bf16_keys=list(t), step=0)
    print(f"wrote {out}: {len(t)} tensors")


if __name__ == "__main__":
    main(sys.argv[1:])
