"""zflow_capture: write zflow traces (format version 1, docs/trace-format.md).

From a live PyTorch run (needs torch):

    with zflow_capture.Capture(model, name="transformer", path="ref.npz") as cap:
        cap.input("noise", x)
        for i, sigma in enumerate(sigmas[:-1]):
            with cap.step(i):
                v = model(x, sigma)
            x = x + (sigmas[i + 1] - sigma) * v
        cap.output("latents", x)

From a port's NumPy arrays (no torch; NumPy only):

    zflow_capture.save_trace("ours.npz", {"transformer.x_embedder/out": y}, step=0)

See README.md for the options (several models, selection, byte budget,
.safetensors output).
"""

from ._version import FORMAT, VERSION, __version__
from .errors import CaptureBudgetError, CaptureError
from .save import save_trace

__all__ = ["Capture", "CaptureError", "CaptureBudgetError", "FORMAT", "VERSION", "__version__", "save_trace"]


def __getattr__(name):
    # Capture needs torch; importing the package does not.
    if name == "Capture":
        try:
            from .capture import Capture
        except ModuleNotFoundError as e:
            if e.name != "torch":
                raise
            raise ImportError("zflow_capture.Capture needs torch (pip install torch); "
                              "zflow_capture.save_trace writes a trace from NumPy arrays without it") from e
        return Capture
    raise AttributeError(f"module 'zflow_capture' has no attribute {name!r}")
