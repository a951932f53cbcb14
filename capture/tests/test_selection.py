"""include= / exclude= / steps=, and several models in one trace."""

import pytest
import torch

import tracefile
from models import MLP, Net
from zflow_capture import Capture, CaptureError


def run(path, **options):
    net = Net()
    with Capture(net, name="net", path=path, **options) as cap:
        net(torch.randn(1, 4))
        for i in range(3):
            with cap.step(i):
                net(torch.randn(1, 4))
    return tracefile.check(path)


def test_include(tmp_path):
    manifest, arrays = run(tmp_path / "t.npz", include=["net.blocks.*"])
    modules = {c["module"] for c in manifest["calls"]}
    assert modules == {f"net.blocks.{b}{s}" for b in (0, 1) for s in ("", ".fc1", ".act", ".fc2")}
    blocks = [c for c in manifest["calls"] if c["module"] in ("net.blocks.0", "net.blocks.1")]
    assert all(c["parent"] is None for c in blocks)  # net itself is not recorded
    assert set(manifest["params"]) == {f"net.blocks.{b}.fc{i}.{w}" for b in (0, 1) for i in (1, 2) for w in ("weight", "bias")}


def test_exclude(tmp_path):
    manifest, _ = run(tmp_path / "t.npz", exclude=["net.shared*", "*.act"])
    modules = {c["module"] for c in manifest["calls"]}
    assert "net" in modules and "net.blocks.0.fc1" in modules
    assert not any(m.startswith("net.shared") or m.endswith(".act") for m in modules)
    fc1 = next(c for c in manifest["calls"] if c["module"] == "net.blocks.0.fc2")
    assert manifest["calls"][fc1["parent"]]["module"] == "net.blocks.0"
    assert not any(k.startswith("net.shared") for k in manifest["params"])


def test_steps_subset(tmp_path):
    manifest, arrays = run(tmp_path / "t.npz", steps=[1])
    assert {c["step"] for c in manifest["calls"]} == {None, 1}
    assert not any(k.startswith(("s0/", "s2/")) for k in arrays)


def test_several_models(tmp_path):
    te, tr, dec = MLP(), Net(), MLP()
    path = tmp_path / "t.npz"
    with Capture(models={"text_encoder": te, "transformer": tr}, path=path) as cap:
        ctx = te(torch.randn(1, 4))
        with cap.step(0):
            x = tr(ctx)
        cap.add(dec, "decoder")
        dec(x)
    manifest, _ = tracefile.check(path)
    roots = [(c["module"], c["step"]) for c in manifest["calls"] if c["parent"] is None]
    assert roots == [("text_encoder", None), ("transformer", 0), ("decoder", None)]
    assert "decoder.fc1.weight" in manifest["params"] and "text_encoder.fc2.bias" in manifest["params"]
    assert "transformer.blocks.0.fc1.weight" in manifest["params"]


def test_model_names_and_sharing_are_checked(tmp_path):
    m = MLP()
    with pytest.raises(ValueError, match="used twice"):
        Capture(m, name="a", models={"a": MLP()}, path=tmp_path / "t.npz")
    with pytest.raises(ValueError, match="without '/'"):
        Capture(m, name="a/b", path=tmp_path / "t.npz")
    with pytest.raises(CaptureError, match="already hooked"):
        with Capture(models={"a": m, "b": m}, path=tmp_path / "t.npz"):
            pass
    assert list(tmp_path.iterdir()) == []


def test_shared_parameter_is_stored_once(tmp_path):
    class Tied(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = torch.nn.Embedding(5, 4)
            self.head = torch.nn.Linear(4, 5, bias=False)
            self.head.weight = self.embed.weight

        def forward(self, ids):
            return self.head(self.embed(ids))

    m = Tied()
    path = tmp_path / "t.npz"
    with Capture(m, name="lm", path=path):
        m(torch.tensor([1, 2]))
    manifest, arrays = tracefile.check(path)
    assert manifest["params"] == {"lm.embed.weight": "param/lm.embed.weight", "lm.head.weight": "param/lm.embed.weight"}
    head = next(c for c in manifest["calls"] if c["module"] == "lm.head")
    assert head["params"] == ["lm.head.weight"]
