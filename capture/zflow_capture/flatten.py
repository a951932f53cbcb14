"""Flattening call arguments and results into named ports.

A value becomes tensors and scalars under dotted port names: containers add
".<index>" (tuple, list) or ".<field>" (dict, dataclass) to the port of their
parent, so `kw.image_rotary_emb` holding a pair gives `kw.image_rotary_emb.0`
and `kw.image_rotary_emb.1`, and a result `{"sample": t}` gives `out.sample`.
"""

import dataclasses
import enum
import math
from collections.abc import Mapping

import numpy as np
import torch

from .errors import CaptureError

MAX_DEPTH = 32  # deeper nesting is almost surely a cycle


def flatten(port, value, tensors, scalars, depth=0):
    """Append (port, tensor) pairs to tensors and set JSON scalars in scalars."""
    if depth > MAX_DEPTH:
        raise CaptureError(f"port {port!r}: nested deeper than {MAX_DEPTH} levels")
    if isinstance(value, torch.Tensor):
        tensors.append((port, value))
    elif value is None or isinstance(value, (bool, int, str)):
        scalars[port] = value
    elif isinstance(value, float):
        scalars[port] = float(value) if math.isfinite(value) else repr(float(value))  # JSON has no NaN/Inf
    elif isinstance(value, np.generic):
        flatten(port, value.item(), tensors, scalars, depth + 1)
    elif isinstance(value, np.ndarray):
        tensors.append((port, torch.from_numpy(np.ascontiguousarray(value))))
    elif isinstance(value, enum.Enum):
        scalars[port] = value.name
    elif isinstance(value, (torch.dtype, torch.device)):
        scalars[port] = str(value)
    elif isinstance(value, Mapping):
        # Before dataclasses: output classes that are both (diffusers' BaseOutput)
        # expose only their set fields through the mapping.
        for k, v in value.items():
            flatten(f"{port}.{k}", v, tensors, scalars, depth + 1)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for f in dataclasses.fields(value):
            flatten(f"{port}.{f.name}", getattr(value, f.name), tensors, scalars, depth + 1)
    elif isinstance(value, (tuple, list)):
        for i, v in enumerate(value):
            flatten(f"{port}.{i}", v, tensors, scalars, depth + 1)
    else:
        # Opaque objects (a cache, a processor) have no trace form; name the type
        # so the record says something was passed.
        scalars[port] = f"<{type(value).__name__}>"


def flatten_call(args, kwargs):
    """Ports of a call's arguments: arg<i> and kw.<name>."""
    tensors, scalars = [], {}
    for i, a in enumerate(args):
        flatten(f"arg{i}", a, tensors, scalars)
    for k, v in kwargs.items():
        flatten(f"kw.{k}", v, tensors, scalars)
    return tensors, scalars


def flatten_result(value):
    """Ports of a call's result: out, out.<index>, out.<field>."""
    tensors, scalars = [], {}
    flatten("out", value, tensors, scalars)
    return tensors, scalars
