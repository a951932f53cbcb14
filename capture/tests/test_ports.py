"""Arguments and results flatten into ports: kwargs, nested containers, scalars."""

import numpy as np
import torch

import tracefile
from models import Outer
from zflow_capture import Capture


def test_kwargs_and_nested_results(tmp_path, hook_mode):
    torch.manual_seed(0)
    model = Outer()
    x, cos, sin = torch.randn(2, 4), torch.randn(2, 4), torch.randn(2, 4)
    path = tmp_path / "t.npz"
    with Capture(model, name="outer", path=path) as cap:
        with cap.step(0):
            out = model(x, rotary=(cos, sin), return_dict=False)
    manifest, arrays = tracefile.check(path)
    outer, inner, proj = manifest["calls"]

    assert outer["tensors"] == {
        "arg0": "s0/outer/arg0", "kw.rotary.0": "s0/outer/kw.rotary.0", "kw.rotary.1": "s0/outer/kw.rotary.1",
        "out.0": "s0/outer/out.0",
    }
    assert outer["scalars"] == {"kw.return_dict": False, "out.1": None}

    assert inner["module"] == "outer.inner" and inner["parent"] == outer["id"]
    assert sorted(inner["tensors"]) == sorted([
        "arg0", "kw.rotary.0", "kw.rotary.1", "kw.options.t",
        "out.sample", "out.extras.0", "out.extras.1.first",
    ])
    assert inner["scalars"] == {
        "kw.options.mode": "fast", "kw.options.k": 3, "kw.scale": 0.5, "kw.flag": False, "kw.name": "n",
        "kw.nothing": None, "kw.dtype": "torch.float32",
        "out.extras.1.second": 7, "out.flag": False, "out.name": "n",
    }
    np.testing.assert_array_equal(arrays["s0/outer.inner/kw.rotary.1"], sin.numpy())
    np.testing.assert_array_equal(arrays["s0/outer.inner/out.extras.1.first"], (out[0] * 2).detach().numpy())
    np.testing.assert_array_equal(arrays["s0/outer/out.0"], out[0].detach().numpy())
    assert proj["tensors"] == {"arg0": "s0/outer.inner.proj/arg0", "out": "s0/outer.inner.proj/out"}


def test_non_finite_float_scalars_stay_json(tmp_path):
    class Scaled(torch.nn.Module):
        def forward(self, x, scale):
            return x * scale

    m = Scaled()
    path = tmp_path / "t.npz"
    with Capture(m, name="m", path=path):
        m(torch.ones(2), float("inf"))
        m(torch.ones(2), float("nan"))
    manifest, _ = tracefile.check(path)
    assert [c["scalars"]["arg1"] for c in manifest["calls"]] == ["inf", "nan"]


def test_opaque_objects_are_named(tmp_path):
    class Cache:
        pass

    class Takes(torch.nn.Module):
        def forward(self, x, cache=None):
            return x

    m = Takes()
    path = tmp_path / "t.npz"
    with Capture(m, name="m", path=path):
        m(torch.ones(2), cache=Cache())
    manifest, _ = tracefile.check(path)
    assert manifest["calls"][0]["scalars"] == {"kw.cache": "<Cache>"}
