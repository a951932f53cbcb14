"""cap.step() scopes calls; repeated calls of one module get ordinals."""

import pytest
import torch

import tracefile
from models import Net
from zflow_capture import Capture, CaptureError


def test_step_scopes_and_pre(tmp_path):
    net = Net()
    path = tmp_path / "t.npz"
    with Capture(net, name="net", path=path) as cap:
        net(torch.randn(1, 4))  # outside the loop
        for i in (0, 1, 2):
            with cap.step(i):
                net(torch.randn(1, 4))
    manifest, _ = tracefile.check(path)
    roots = [c for c in manifest["calls"] if c["parent"] is None]
    assert [(c["step"], c["tensors"]["out"]) for c in roots] == [
        (None, "pre/net/out"), (0, "s0/net/out"), (1, "s1/net/out"), (2, "s2/net/out")]
    for c in manifest["calls"]:
        root = c
        while root["parent"] is not None:
            root = manifest["calls"][root["parent"]]
        assert c["step"] == root["step"]


def test_repeated_calls_get_ordinals(tmp_path):
    net = Net()
    path = tmp_path / "t.npz"
    with Capture(net, name="net", path=path) as cap:
        for i in (0, 1):
            with cap.step(i):
                net(torch.randn(1, 4))
    manifest, _ = tracefile.check(path)
    shared = [(c["step"], c["ordinal"], c["tensors"]["out"]) for c in manifest["calls"] if c["module"] == "net.shared"]
    assert shared == [(0, 0, "s0/net.shared/out"), (0, 1, "s0/net.shared#1/out"),
                      (1, 0, "s1/net.shared/out"), (1, 1, "s1/net.shared#1/out")]
    fc2 = [c["tensors"]["arg0"] for c in manifest["calls"] if c["module"] == "net.shared.fc2" and c["step"] == 0]
    assert fc2 == ["s0/net.shared.fc2/arg0", "s0/net.shared.fc2#1/arg0"]


def test_one_step_entered_twice_continues_ordinals(tmp_path):
    lin = torch.nn.Linear(2, 2)
    path = tmp_path / "t.npz"
    with Capture(lin, name="lin", path=path) as cap:
        for _ in range(2):
            with cap.step(0):
                lin(torch.ones(2))
    manifest, _ = tracefile.check(path)
    assert [c["tensors"]["out"] for c in manifest["calls"]] == ["s0/lin/out", "s0/lin#1/out"]


def test_step_misuse(tmp_path):
    with Capture(torch.nn.Identity(), name="m", path=tmp_path / "t.npz") as cap:
        with pytest.raises(ValueError):
            with cap.step(-1):
                pass
        with pytest.raises(ValueError):
            with cap.step(True):
                pass
        with cap.step(0):
            with pytest.raises(CaptureError, match="inside step 0"):
                with cap.step(1):
                    pass
