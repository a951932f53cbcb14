"""zflow_capture: write zflow traces (format version 1) from a live PyTorch run.

    with zflow_capture.Capture(model, name="transformer", path="ref.npz") as cap:
        cap.input("noise", x)
        for i, sigma in enumerate(sigmas[:-1]):
            with cap.step(i):
                v = model(x, sigma)
            x = x + (sigmas[i + 1] - sigma) * v
        cap.output("latents", x)

See README.md for the options (several models, selection, byte budget,
.safetensors output).
"""

from ._version import __version__
from .capture import FORMAT, VERSION, Capture
from .errors import CaptureBudgetError, CaptureError

__all__ = ["Capture", "CaptureError", "CaptureBudgetError", "FORMAT", "VERSION", "__version__"]
