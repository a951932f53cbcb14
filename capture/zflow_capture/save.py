"""save_trace: a port's trace from NumPy arrays, without torch.

A NumPy, JAX or plain-Python port writes the tensors it computed under the
reference's keys (docs/trace-format.md, "Keys"); zflow diff pairs them with
the reference's in the reference's execution order. The file has no call
tree: in .npz a manifest names the bf16 entries (npz has no bf16 dtype), in
.safetensors bf16 is the native BF16 and the metadata holds the same
manifest.
"""

import json

from ._version import FORMAT, VERSION, __version__
from .errors import CaptureError
from .host import HostTensor

# numpy dtype name -> (npy descr, safetensors dtype)
_NUMPY = {
    "bool": ("|b1", "BOOL"), "uint8": ("|u1", "U8"), "int8": ("|i1", "I8"),
    "int16": ("<i2", "I16"), "uint16": ("<u2", "U16"), "int32": ("<i4", "I32"),
    "uint32": ("<u4", "U32"), "int64": ("<i8", "I64"), "uint64": ("<u8", "U64"),
    "float16": ("<f2", "F16"), "float32": ("<f4", "F32"), "float64": ("<f8", "F64"),
    "complex64": ("<c8", "C64"),
}


def save_trace(path, tensors, bf16_keys=(), step=None):
    """Write tensors (a mapping key -> array) as a trace at path (.npz or .safetensors).

    bf16_keys: keys whose arrays hold bfloat16, as uint16 bit patterns
    (arrays of ml_dtypes.bfloat16 are recognised without being listed).
    step: when given, each key is taken within sampler step `step`:
    "transformer.x_embedder/out" is written as "s0/transformer.x_embedder/out".
    The file appears whole or not at all (a temp file, then a rename); a bad
    key, dtype or array raises CaptureError and writes nothing.
    """
    try:
        import numpy as np
    except ModuleNotFoundError as e:
        raise CaptureError("save_trace needs numpy (pip install numpy)") from e
    from .writer import open_writer

    if step is not None and (not isinstance(step, int) or isinstance(step, bool) or step < 0):
        raise CaptureError(f"{path}: step {step!r}: want None or an int >= 0")
    bf16 = set(bf16_keys)
    unknown = bf16 - set(tensors)
    if unknown:
        raise CaptureError(f"{path}: bf16_keys names {sorted(unknown)[0]!r}, which is not in tensors")
    hosts, dtypes = [], {}
    for key, value in tensors.items():
        if not isinstance(key, str) or not key or key.startswith("__") or key != key.strip():
            raise CaptureError(f"{path}: key {key!r}: need a non-empty string, no leading '__' or edge spaces")
        name = key if step is None else f"s{step}/{key}"
        a = np.asarray(value)
        kind = a.dtype.name
        if kind == "bfloat16" or key in bf16:
            if kind not in ("bfloat16", "uint16"):
                raise CaptureError(f"{path}: {key!r}: bf16 wants uint16 bit patterns or ml_dtypes.bfloat16, got {kind}")
            a, spec, kind = a.view(np.uint16) if kind == "bfloat16" else a, ("<u2", "BF16"), "bfloat16"
            dtypes[name] = "bfloat16"
        elif kind in _NUMPY:
            spec = _NUMPY[kind]
        else:
            raise CaptureError(f"{path}: {key!r}: dtype {a.dtype} is not a trace dtype")
        a = np.ascontiguousarray(a, dtype=a.dtype.newbyteorder("<"))
        data = a.reshape(-1).view(np.uint8)
        hosts.append((name, HostTensor(kind, spec[0], spec[1], tuple(int(d) for d in a.shape), data)))
    manifest = json.dumps({"format": FORMAT, "version": VERSION,
                           "producer": {"framework": "numpy", "framework_version": np.__version__,
                                        "writer": f"zflow_capture.save_trace {__version__}"},
                           "dtypes": dtypes}, separators=(",", ":"))
    writer = open_writer(path)
    try:
        for name, host in hosts:
            writer.add(name, host)
        writer.commit(manifest)
    except BaseException:
        writer.abort()
        raise
    return path
