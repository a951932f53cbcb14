"""Trace writers: stream tensors into a temp file, publish it atomically.

Both writers take tensors one at a time (add), hold none of them, and on
commit write the manifest and rename the temp file over the destination; on
abort they delete every temp file. A reader therefore sees either no file or a
complete one, never a partial one.
"""

import json
import os
import secrets
import shutil
import struct
import zipfile

import numpy as np

from .errors import CaptureError
from .host import HostTensor

MANIFEST_ENTRY = "__zflow__.npy"
ALIGN = 64  # tensor data starts on this boundary so readers can mmap it typed

# Zip extra-field id used for padding (the one Android's zipalign uses).
_PAD_ID = 0xD935
_LOCAL_HEADER = 30  # fixed part of a zip local file header
_ZIP64_LOCAL_EXTRA = 20  # zip64 extra field zipfile appends to a local header


def open_writer(path):
    """The writer for path's format, chosen by its suffix."""
    path = os.fspath(path)
    if path.endswith(".npz"):
        return NpzWriter(path)
    if path.endswith(".safetensors"):
        return SafetensorsWriter(path)
    raise CaptureError(f"{path}: a trace path must end in .npz or .safetensors")


def _temp_path(path, tag):
    # Same directory as the destination, so os.replace is a rename, not a copy.
    head, tail = os.path.split(path)
    return os.path.join(head, f".{tail}.{secrets.token_hex(4)}.{tag}")


def _create(path):
    # Exclusive create with the usual permissions (umask applies).
    return os.fdopen(os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o666), "w+b")


def _unlink(path):
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def _sync_close(f):
    f.flush()
    os.fsync(f.fileno())
    f.close()


def npy_header(descr, shape):
    """An npy v1.0 header whose length is a multiple of ALIGN (as the npy spec asks)."""
    d = "{'descr': %r, 'fortran_order': False, 'shape': %r, }" % (descr, tuple(shape))
    total = -(-(10 + len(d) + 1) // ALIGN) * ALIGN
    hlen = total - 10
    if hlen >= 1 << 16:
        raise CaptureError(f"shape {tuple(shape)} is too long for an npy header")
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", hlen) + (d + " " * (hlen - len(d) - 1) + "\n").encode("latin1")


def _pad_extra(offset):
    """A zip extra field that moves the entry's data from offset to ALIGN."""
    pad = -offset % ALIGN
    if pad == 0:
        return b""
    while pad < 6:  # id, size and a u16 alignment value take 6 bytes
        pad += ALIGN
    return struct.pack("<HHH", _PAD_ID, pad - 4, ALIGN) + bytes(pad - 6)


class NpzWriter:
    """Writes an uncompressed .npz; each tensor's data is ALIGN-aligned in the file."""

    def __init__(self, path):
        self.path = path
        self._tmp = _temp_path(path, "tmp")
        self._file = _create(self._tmp)
        self._zip = zipfile.ZipFile(self._file, "w", zipfile.ZIP_STORED, allowZip64=True)
        self._names = set()

    def add(self, key, t: HostTensor):
        self._entry(key + ".npy", t)

    def commit(self, manifest: str):
        data = np.frombuffer(manifest.encode("utf-8"), dtype=np.uint8)
        self._entry(MANIFEST_ENTRY, HostTensor("uint8", "|u1", "U8", data.shape, data))
        self._zip.close()
        _sync_close(self._file)
        os.replace(self._tmp, self.path)

    def abort(self):
        try:
            self._zip.close()
        except Exception:  # noqa: BLE001 - the file is being thrown away
            pass
        self._file.close()
        _unlink(self._tmp)

    def _entry(self, name, t):
        if name in self._names:
            raise CaptureError(f"{self.path}: entry {name!r} written twice")
        self._names.add(name)
        header = npy_header(t.descr, t.shape)
        info = zipfile.ZipInfo(name)  # fixed 1980 date: the same run gives the same bytes
        info.compress_type = zipfile.ZIP_STORED
        info.external_attr = 0o644 << 16
        info.file_size = len(header) + t.nbytes
        # Decide zip64 the way zipfile does, so the local header's length is known.
        zip64 = info.file_size * 1.05 > zipfile.ZIP64_LIMIT
        try:
            name_len = len(name.encode("ascii"))
        except UnicodeEncodeError:
            name_len = len(name.encode("utf-8"))
        start = self._zip.start_dir + _LOCAL_HEADER + name_len + (_ZIP64_LOCAL_EXTRA if zip64 else 0)
        info.extra = _pad_extra(start)
        with self._zip.open(info, "w", force_zip64=zip64) as w:
            w.write(header)
            w.write(memoryview(t.data))


class SafetensorsWriter:
    """Writes .safetensors: data streams to a temp file, the header is prepended at commit."""

    def __init__(self, path):
        self.path = path
        self._data_tmp = _temp_path(path, "data.tmp")
        self._tmp = _temp_path(path, "tmp")
        self._data = _create(self._data_tmp)
        self._entries = {}
        self._offset = 0

    def add(self, key, t: HostTensor):
        if key in self._entries:
            raise CaptureError(f"{self.path}: tensor {key!r} written twice")
        if t.safetensors is None:
            raise CaptureError(f"{self.path}: {key!r}: dtype {t.dtype} has no safetensors name; write .npz")
        self._data.write(memoryview(t.data))
        end = self._offset + t.nbytes
        self._entries[key] = {"dtype": t.safetensors, "shape": list(t.shape), "data_offsets": [self._offset, end]}
        self._offset = end

    def commit(self, manifest: str):
        header = {"__metadata__": {"zflow": manifest}, **self._entries}
        raw = json.dumps(header, separators=(",", ":")).encode("utf-8")
        raw += b" " * (-(8 + len(raw)) % ALIGN)  # trailing spaces are allowed; data starts aligned
        self._data.flush()
        self._data.seek(0)
        with _create(self._tmp) as out:
            out.write(struct.pack("<Q", len(raw)))
            out.write(raw)
            shutil.copyfileobj(self._data, out, 16 << 20)
            out.flush()
            os.fsync(out.fileno())
        self._data.close()
        os.replace(self._tmp, self.path)
        _unlink(self._data_tmp)

    def abort(self):
        self._data.close()
        _unlink(self._data_tmp)
        _unlink(self._tmp)
