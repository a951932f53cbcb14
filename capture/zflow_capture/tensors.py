"""Tensors to host bytes, bit for bit.

A tensor is reduced to its raw little-endian bytes by viewing it as uint8, so
no value ever passes through a float conversion: bf16 NaN payloads, -0 and
subnormals survive, and bf16 (which NumPy has no dtype for) is stored as its
uint16 bit patterns and named in the manifest.
"""

import sys

import numpy as np
import torch

from .errors import CaptureError
from .host import HostTensor  # noqa: F401 - re-exported: writers import it from here too

# torch dtype -> (npy descr, safetensors dtype). None: safetensors has no name.
_DTYPES = {
    torch.bool: ("|b1", "BOOL"),
    torch.uint8: ("|u1", "U8"),
    torch.int8: ("|i1", "I8"),
    torch.int16: ("<i2", "I16"),
    torch.int32: ("<i4", "I32"),
    torch.int64: ("<i8", "I64"),
    torch.float16: ("<f2", "F16"),
    torch.bfloat16: ("<u2", "BF16"),
    torch.float32: ("<f4", "F32"),
    torch.float64: ("<f8", "F64"),
    torch.complex64: ("<c8", "C64"),
    torch.complex128: ("<c16", None),
}
# Unsigned wide ints exist only in newer torch (2.3+).
for _name, _descr, _st in (("uint16", "<u2", "U16"), ("uint32", "<u4", "U32"), ("uint64", "<u8", "U64")):
    if hasattr(torch, _name):
        _DTYPES[getattr(torch, _name)] = (_descr, _st)


def dtype_name(dtype):
    return str(dtype).replace("torch.", "")


def to_host(t):
    """Return t's bytes on the host, in C order, with its bits unchanged.

    For a CPU tensor the bytes may alias t's storage: the caller writes them out
    before returning to the model, which is what makes the record a copy taken
    at hook time.
    """
    if sys.byteorder != "little":
        raise CaptureError("trace v1 is little-endian; this host is big-endian")
    if t.layout != torch.strided:
        raise CaptureError(f"{t.layout} tensors are not supported (only dense tensors)")
    if t.device.type == "meta":
        raise CaptureError("a tensor on the meta device has no data to record")
    spec = _DTYPES.get(t.dtype)
    if spec is None:
        raise CaptureError(f"dtype {dtype_name(t.dtype)} cannot be stored in a trace")
    t = t.detach()
    if t.is_conj():
        t = t.resolve_conj()
    if t.is_neg():
        t = t.resolve_neg()
    if t.device.type != "cpu":
        t = t.to("cpu")  # a byte copy: the bits do not change
    t = t.contiguous()
    shape = tuple(int(d) for d in t.shape)
    flat = t.reshape(-1)
    if flat.numel() and flat.stride(0) != 1:
        # a broadcast view of one element (t.expand(1)) counts as contiguous yet has stride 0
        flat = flat.clone(memory_format=torch.contiguous_format)
    data = flat.view(torch.uint8).numpy()
    return HostTensor(dtype_name(t.dtype), spec[0], spec[1], shape, data)

