"""Reading a trace back without zflow_capture, and checking it against DESIGN.md."""

import io
import json
import struct
import zipfile

import numpy as np

MANIFEST = "__zflow__.npy"
TOP_FIELDS = ["format", "version", "producer", "dtypes", "params", "inputs", "outputs", "calls"]
CALL_FIELDS = ["id", "step", "module", "ordinal", "parent", "type", "params", "tensors", "scalars"]
ST_DTYPES = {"BOOL": "|b1", "U8": "|u1", "I8": "|i1", "I16": "<i2", "I32": "<i4", "I64": "<i8",
             "F16": "<f2", "BF16": "<u2", "F32": "<f4", "F64": "<f8", "C64": "<c8",
             "U16": "<u2", "U32": "<u4", "U64": "<u8"}


def read_safetensors_header(path):
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
    return header, 8 + n


def load(path):
    """(manifest, {key: array}); bf16 arrives as uint16 bit patterns."""
    if str(path).endswith(".safetensors"):
        header, start = read_safetensors_header(path)
        raw = open(path, "rb").read()[start:]
        meta = header.pop("__metadata__")
        arrays = {}
        for key, e in header.items():
            a, b = e["data_offsets"]
            arrays[key] = np.frombuffer(raw[a:b], dtype=ST_DTYPES[e["dtype"]]).reshape(e["shape"])
        return json.loads(meta["zflow"]), arrays
    with zipfile.ZipFile(path) as z:
        manifest = json.loads(np.load(io.BytesIO(z.read(MANIFEST))).tobytes().decode("utf-8"))
        arrays = {n[:-4]: np.load(io.BytesIO(z.read(n))) for n in z.namelist() if n != MANIFEST}
    return manifest, arrays


def data_offsets(path):
    """File offset of each npz entry's tensor data (after the zip and npy headers)."""
    out = {}
    with zipfile.ZipFile(path) as z, open(path, "rb") as f:
        for info in z.infolist():
            f.seek(info.header_offset)
            local = f.read(30)
            name_len, extra_len = struct.unpack("<HH", local[26:30])
            start = info.header_offset + 30 + name_len + extra_len
            f.seek(start)
            pre = f.read(12)
            assert pre[:6] == b"\x93NUMPY", info.filename
            hlen = struct.unpack("<H", pre[8:10])[0] if pre[6] == 1 else struct.unpack("<I", pre[8:12])[0]
            out[info.filename] = start + (10 if pre[6] == 1 else 12) + hlen
    return out


def referenced(manifest):
    keys = list(manifest["params"].values()) + list(manifest["inputs"].values()) + list(manifest["outputs"].values())
    for c in manifest["calls"]:
        keys += list(c["tensors"].values())
    return keys


def check(path):
    """Assert that path is a valid trace v1; return (manifest, arrays)."""
    manifest, arrays = load(path)
    assert list(manifest) == TOP_FIELDS
    assert manifest["format"] == "zflow-trace" and manifest["version"] == 1
    for field in ("framework", "framework_version", "device", "dtype"):
        assert isinstance(manifest["producer"][field], str), field

    # Every key named exists, and every tensor stored is named.
    keys = referenced(manifest)
    assert set(keys) == set(arrays), (set(keys) ^ set(arrays))
    call_keys = [k for c in manifest["calls"] for k in c["tensors"].values()]
    assert len(call_keys) == len(set(call_keys)), "a call key used twice"
    for name, key in manifest["params"].items():
        assert key.startswith("param/"), key
    for kind in ("inputs", "outputs"):
        for name, key in manifest[kind].items():
            assert key == f"{kind[:-1]}/{name}"
    for key, dt in manifest["dtypes"].items():
        assert dt == "bfloat16" and arrays[key].dtype == np.uint16, key

    # Calls: ids in entry order, parents earlier and enclosing, keys well formed.
    ordinals = {}
    for i, c in enumerate(manifest["calls"]):
        assert list(c) == CALL_FIELDS
        assert c["id"] == i
        scope = "pre" if c["step"] is None else f"s{c['step']}"
        if c["parent"] is not None:
            p = manifest["calls"][c["parent"]]
            assert p["id"] < c["id"] and p["step"] == c["step"]
            assert c["module"].startswith(p["module"] + ".")
        seen = ordinals.setdefault((scope, c["module"]), [])
        assert c["ordinal"] == len(seen), (c["module"], c["ordinal"])
        seen.append(c["id"])
        prefix = f"{scope}/{c['module']}" + (f"#{c['ordinal']}" if c["ordinal"] else "")
        for port, key in c["tensors"].items():
            assert key == f"{prefix}/{port}"
        for name in c["params"]:
            assert name.startswith(c["module"] + ".")
        for port, v in c["scalars"].items():
            assert v is None or isinstance(v, (bool, int, float, str)), port

    if str(path).endswith(".npz"):
        with zipfile.ZipFile(path) as z:
            infos = z.infolist()
        assert infos[-1].filename == MANIFEST, "the manifest is the last entry"
        assert all(i.compress_type == zipfile.ZIP_STORED for i in infos)
        for name, off in data_offsets(path).items():
            assert off % 64 == 0, f"{name}: data at {off} is not 64-byte aligned"
    return manifest, arrays
