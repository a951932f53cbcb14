"""What a writer stores for one tensor: its bytes and dtype names. No torch, no NumPy."""

from dataclasses import dataclass


@dataclass(frozen=True)
class HostTensor:
    """A tensor's bytes on the host, with what a writer needs to store it."""

    dtype: str  # torch-style name: "float32", "bfloat16", ...
    descr: str  # npy descr it is stored as ("<u2" for bfloat16)
    safetensors: str  # safetensors dtype, or None where it has none
    shape: tuple
    data: object  # a 1-D uint8 numpy array, C order

    @property
    def nbytes(self):
        return int(self.data.size)
