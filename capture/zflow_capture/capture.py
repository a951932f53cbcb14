"""Capture: record a live PyTorch run as a zflow trace (format version 1).

Every module of every added model is hooked. Each call becomes a record in
entry order (a parent before its children) with its arguments and result
flattened into ports; tensors stream to the trace file as they arrive, and the
manifest is written last, when the `with` block ends without an error.
"""

import contextlib
import fnmatch
import json
import os
from collections import Counter

import torch

from . import hooks
from ._version import FORMAT, VERSION, __version__
from .errors import CaptureBudgetError, CaptureError
from .flatten import flatten_call, flatten_result
from .tensors import dtype_name, to_host
from .writer import open_writer


def _check_name(kind, name):
    if not isinstance(name, str) or not name or any(c in name for c in "/#") or name != name.strip():
        raise ValueError(f"{kind} name {name!r}: need a non-empty string without '/', '#' or edge spaces")
    return name


class _Module:
    """What a call record says about its module, computed once at attach time."""

    def __init__(self, path, module, params):
        self.path = path
        self.module = module
        self.type = type(module).__name__
        self.params = params  # full names of its direct parameters


class _Frame:
    """A module call in progress; record is None when the call is not recorded."""

    def __init__(self, module, record, prefix):
        self.module = module
        self.record = record
        self.prefix = prefix  # key prefix of its tensors: <scope>/<module>[#<ordinal>]


class Capture:
    """Record the calls of one or more models into a trace file.

    Capture(model, name="transformer", path="ref.npz") hooks one model;
    Capture(models={"text_encoder": te, "transformer": tr}, path=...) several,
    and cap.add(model, name) adds one more, also inside the `with` block.
    Module paths are prefixed by the model's name ("transformer.blocks.0").

    include / exclude: module-path globs (fnmatch; "*" also matches dots). A
      module is recorded when it matches some include (or include is None) and
      no exclude. Parameters are stored for recorded modules only. A recorded
      call's parent is its nearest recorded ancestor.
    steps: sampler steps to record; calls outside any cap.step() are always
      recorded.
    max_bytes: budget for the tensor data (parameters, inputs, outputs, calls).
      Exceeding it raises CaptureBudgetError and writes nothing.
    producer: extra fields merged into the manifest's producer.
    """

    def __init__(self, model=None, name="model", *, path, models=None,
                 include=None, exclude=None, steps=None, max_bytes=None, producer=None):
        self.path = os.fspath(path)
        if not (self.path.endswith(".npz") or self.path.endswith(".safetensors")):
            raise ValueError(f"{self.path}: a trace path must end in .npz or .safetensors")
        self.include = list(include) if include is not None else None
        self.exclude = list(exclude or [])
        self.steps = frozenset(int(s) for s in steps) if steps is not None else None
        self.max_bytes = max_bytes
        self._producer_extra = dict(producer or {})
        self._models = {}
        for n, m in ([(name, model)] if model is not None else []) + list((models or {}).items()):
            self._register(m, n)

        self._entered = False
        self._writer = None
        self._fastpath = None  # torch's MHA fast-path setting before the capture
        self._detach = []
        self._hooked = set()  # id() of every hooked module: each is hooked once
        self._error = None
        self._step = None
        self._stack = []
        self._ordinals = Counter()  # (scope, module path) -> calls so far
        self._calls = []
        self._params = {}  # parameter name -> key
        self._param_keys = {}  # id(parameter) -> key: a shared parameter is stored once
        self._inputs = {}
        self._outputs = {}
        self._dtypes = {}
        self._tensors = 0
        self._bytes = 0
        self._device = None  # of the first tensor recorded
        self._dtype = None  # of the first floating-point tensor recorded
        self.summary = None

    # --- public API -------------------------------------------------------

    def add(self, model, name):
        """Add a model under name; inside the `with` block it is hooked at once."""
        self._register(model, name)
        if self._writer is not None:
            self._attach(model, name)
        return model

    def __enter__(self):
        if self._entered:
            raise CaptureError("a Capture records one run; make a new one")
        self._entered = True
        self._writer = open_writer(self.path)
        self._fastpath = _fastpath_off()
        try:
            for name, model in self._models.items():
                self._attach(model, name)
        except BaseException:
            self._abort()
            raise
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is not None or self._error is not None:
            self._abort()
            if exc_type is None:
                raise self._error  # it was raised inside the block and caught there
            return False
        try:
            self._writer.commit(self._manifest())
        except BaseException:
            self._abort()
            raise
        self._detach_all()
        self._writer = None
        self.summary = {
            "path": self.path,
            "calls": len(self._calls),
            "tensors": self._tensors,
            "params": len(self._params),
            "steps": len({c["step"] for c in self._calls if c["step"] is not None}),
            "bytes": self._bytes,
        }
        return False

    @contextlib.contextmanager
    def step(self, i):
        """Scope the calls inside to sampler step i (keys s<i>/...)."""
        if isinstance(i, bool) or not isinstance(i, int) or i < 0:
            raise ValueError(f"step {i!r}: need a non-negative int")
        if self._step is not None:
            raise CaptureError(f"step {i} opened inside step {self._step}")
        self._step = i
        try:
            yield self
        finally:
            self._step = None

    def input(self, name, tensor):
        """Record a request input as input/<name>."""
        self._record_io("input", self._inputs, name, tensor)

    def output(self, name, tensor):
        """Record a request result as output/<name>."""
        self._record_io("output", self._outputs, name, tensor)

    # --- models and hooks ---------------------------------------------------

    def _register(self, model, name):
        _check_name("model", name)
        if not isinstance(model, torch.nn.Module):
            raise TypeError(f"model {name!r}: need a torch.nn.Module, got {type(model).__name__}")
        if name in self._models:
            raise ValueError(f"model name {name!r} used twice")
        self._models[name] = model

    def _selected(self, path):
        if self.include is not None and not any(fnmatch.fnmatchcase(path, g) for g in self.include):
            return False
        return not any(fnmatch.fnmatchcase(path, g) for g in self.exclude)

    def _attach(self, model, name):
        self._check_live()
        for sub, module in model.named_modules():
            if id(module) in self._hooked:
                raise CaptureError(f"module {name}.{sub}: already hooked (added twice, or shared between models)")
            path = f"{name}.{sub}" if sub else name
            selected = self._selected(path)
            params = []
            for pname, p in module.named_parameters(recurse=False):
                full = f"{path}.{pname}"
                params.append(full)
                if selected:
                    self._store_param(full, p)
            info = _Module(path, module, params)
            self._detach.append(hooks.attach(module, *self._hooks(info, selected)))
            self._hooked.add(id(module))

    def _store_param(self, name, p):
        key = self._param_keys.get(id(p))
        if key is None:
            key = f"param/{name}"
            self._store(key, p)
            self._param_keys[id(p)] = key
        self._params[name] = key

    def _hooks(self, info, selected):
        """The enter / leave / abandon callbacks for one module."""
        def live():
            return self._writer is not None and self._error is None

        def enter(args, kwargs):
            if live():
                self._enter(info, selected, args, kwargs)

        def leave(result):
            if live():
                self._leave(info, result)

        def abandon():
            if live():
                self._leave(info, None, record=False)

        return enter, leave, abandon

    # --- recording ------------------------------------------------------------

    def _enter(self, info, selected, args, kwargs):
        scope = "pre" if self._step is None else f"s{self._step}"
        ordinal = self._ordinals[scope, info.path]
        self._ordinals[scope, info.path] += 1
        frame = _Frame(info.module, None, f"{scope}/{info.path}" + (f"#{ordinal}" if ordinal else ""))
        if selected and (self._step is None or self.steps is None or self._step in self.steps):
            parent = next((f.record["id"] for f in reversed(self._stack) if f.record is not None), None)
            frame.record = {
                "id": len(self._calls), "step": self._step, "module": info.path, "ordinal": ordinal,
                "parent": parent, "type": info.type, "params": list(info.params),
                "tensors": {}, "scalars": {},
            }
            self._calls.append(frame.record)
            self._record_ports(frame, *flatten_call(args, kwargs))
        self._stack.append(frame)

    def _leave(self, info, result, record=True):
        # Pop this module's innermost frame and any above it (calls whose end
        # was never seen; abandon() normally pops those as they raise).
        depth = next((i for i in range(len(self._stack) - 1, -1, -1) if self._stack[i].module is info.module), None)
        if depth is None:
            return  # hooked while this call was already running
        frame = self._stack[depth]
        del self._stack[depth:]
        if record and frame.record is not None:
            self._record_ports(frame, *flatten_result(result))

    def _record_ports(self, frame, tensors, scalars):
        for port, t in tensors:
            key = f"{frame.prefix}/{port}"
            self._store(key, t)
            frame.record["tensors"][port] = key
        frame.record["scalars"].update(scalars)

    def _record_io(self, kind, table, name, tensor):
        self._check_live()
        _check_name(kind, name)
        if not isinstance(tensor, torch.Tensor):
            raise TypeError(f"{kind} {name!r}: need a tensor, got {type(tensor).__name__}")
        if name in table:
            raise CaptureError(f"{kind} {name!r} recorded twice")
        key = f"{kind}/{name}"
        self._store(key, tensor)
        table[name] = key

    def _store(self, key, tensor):
        """Write one tensor now: what is on disk is the value at this moment."""
        try:
            host = to_host(tensor)
        except CaptureError as e:
            self._fail(CaptureError(f"{key}: {e}"))
        if self.max_bytes is not None and self._bytes + host.nbytes > self.max_bytes:
            self._fail(CaptureBudgetError(self.path, self.max_bytes, self._bytes + host.nbytes, key))
        try:
            self._writer.add(key, host)
        except BaseException as e:
            self._fail(e)
        self._bytes += host.nbytes
        self._tensors += 1
        if self._device is None:
            self._device = tensor.device.type
        if self._dtype is None and tensor.is_floating_point():
            self._dtype = tensor.dtype
        if host.dtype == "bfloat16":
            self._dtypes[key] = "bfloat16"

    # --- ending ---------------------------------------------------------------

    def _check_live(self):
        if self._writer is None:
            raise CaptureError("the capture is not running: use it as `with Capture(...) as cap:`")
        if self._error is not None:
            raise CaptureError(f"the capture already failed: {self._error}")

    def _fail(self, error):
        """Throw the partial file away at once, and raise error."""
        self._error = error
        self._writer.abort()
        raise error

    def _abort(self):
        self._detach_all()
        if self._writer is not None:
            self._writer.abort()
            self._writer = None

    def _detach_all(self):
        for detach in reversed(self._detach):
            detach()
        self._detach = []
        self._hooked = set()
        if self._fastpath is not None:
            torch.backends.mha.set_fastpath_enabled(self._fastpath)
            self._fastpath = None

    def _producer(self):
        # The device of the first parameter and the dtype most floating-point
        # parameters hold (by element: a model that keeps its first modules in
        # float32 while the rest runs in bfloat16 is a bfloat16 run) speak for the
        # run; a model without parameters, the first tensor recorded.
        def params():
            return (p for m in self._models.values() for p in m.parameters())

        first = next(params(), None)
        counts = {}
        for p in params():
            if p.is_floating_point():
                counts[p.dtype] = counts.get(p.dtype, 0) + p.numel()
        dtype = max(counts, key=counts.get) if counts else self._dtype or torch.float32
        producer = {
            "framework": "torch", "framework_version": torch.__version__,
            "device": first.device.type if first is not None else self._device or "cpu",
            "dtype": dtype_name(dtype),
            "capture": f"zflow_capture {__version__}",
        }
        if _has_fastpath_flag():
            # torch's fused encoder-layer and attention kernels run a whole
            # layer as one call, so no sub-module boundary would be recorded
            producer["mha_fastpath"] = "off"
        producer.update(self._producer_extra)
        return producer

    def _manifest(self):
        manifest = {
            "format": FORMAT, "version": VERSION, "producer": self._producer(),
            "dtypes": self._dtypes, "params": self._params,
            "inputs": self._inputs, "outputs": self._outputs, "calls": self._calls,
        }
        return json.dumps(manifest, allow_nan=False, separators=(",", ":"))


def _has_fastpath_flag():
    mha = getattr(torch.backends, "mha", None)
    return mha is not None and hasattr(mha, "set_fastpath_enabled")


def _fastpath_off():
    """Turn torch's fused TransformerEncoderLayer / MultiheadAttention fast
    path off (torch >= 2.1) and return the setting to restore, or None where
    torch has no such switch."""
    if not _has_fastpath_flag():
        return None
    was = torch.backends.mha.get_fastpath_enabled()
    torch.backends.mha.set_fastpath_enabled(False)
    return was
