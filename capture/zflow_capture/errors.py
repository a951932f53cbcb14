"""Errors raised by a capture. Each one means no trace file was written."""


class CaptureError(Exception):
    """A capture could not record what it was asked to; nothing was written."""


class CaptureBudgetError(CaptureError):
    """The recorded tensors would exceed max_bytes; nothing was written."""

    def __init__(self, path, budget, size, key):
        self.path = path
        self.budget = budget
        self.size = size
        self.key = key
        super().__init__(
            f"capture budget exceeded: recording {key!r} brings the tensor data to "
            f"{size} bytes, over max_bytes={budget}; nothing was written to {path} "
            f"(raise max_bytes, or narrow include=/exclude=/steps=)"
        )
