"""The written file is trace v1 exactly: manifest, keys, call tree, entry order, alignment."""

import hashlib
import os
import zipfile

import numpy as np
import pytest
import torch

import tracefile
from models import Net
from zflow_capture import Capture


def run_net(path, **options):
    torch.manual_seed(0)
    net = Net()
    x = torch.randn(3, 4)
    with Capture(net, name="net", path=path, **options) as cap:
        cap.input("x", x)
        for i in range(2):
            with cap.step(i):
                x = net(x)
        cap.output("y", x)
    return cap, net


def test_manifest_and_tree(tmp_path, hook_mode):
    path = tmp_path / "net.npz"
    cap, net = run_net(path)
    manifest, arrays = tracefile.check(path)

    producer = manifest["producer"]
    assert producer["framework"] == "torch" and producer["framework_version"] == torch.__version__
    assert producer["device"] == "cpu" and producer["dtype"] == "float32"
    assert manifest["dtypes"] == {}
    assert manifest["inputs"] == {"x": "input/x"} and manifest["outputs"] == {"y": "output/y"}
    assert manifest["params"]["net.blocks.0.fc1.weight"] == "param/net.blocks.0.fc1.weight"
    assert len(manifest["params"]) == len(list(net.parameters()))
    for name, p in net.named_parameters():
        np.testing.assert_array_equal(arrays[f"param/net.{name}"], p.detach().numpy())

    calls = manifest["calls"]
    per_step = [c for c in calls if c["step"] == 0]
    assert [c["module"] for c in per_step] == [
        "net",
        "net.blocks.0", "net.blocks.0.fc1", "net.blocks.0.act", "net.blocks.0.fc2",
        "net.blocks.1", "net.blocks.1.fc1", "net.blocks.1.act", "net.blocks.1.fc2",
        "net.shared", "net.shared.fc1", "net.shared.act", "net.shared.fc2",
        "net.shared", "net.shared.fc1", "net.shared.act", "net.shared.fc2",
        "net.norm",
    ]
    assert len(calls) == 2 * len(per_step)
    root, fc1 = calls[0], calls[2]
    assert root == {
        "id": 0, "step": 0, "module": "net", "ordinal": 0, "parent": None, "type": "Net", "params": [],
        "tensors": {"arg0": "s0/net/arg0", "out": "s0/net/out"}, "scalars": {},
    }
    assert fc1["parent"] == 1 and fc1["type"] == "Linear"
    assert fc1["params"] == ["net.blocks.0.fc1.weight", "net.blocks.0.fc1.bias"]
    assert fc1["tensors"] == {"arg0": "s0/net.blocks.0.fc1/arg0", "out": "s0/net.blocks.0.fc1/out"}

    # The recorded output is the real one.
    np.testing.assert_array_equal(arrays["s1/net/out"], arrays["output/y"])
    assert cap.summary == {"path": str(path), "calls": len(calls), "tensors": len(arrays),
                           "params": len(manifest["params"]), "steps": 2,
                           "bytes": sum(a.nbytes for a in arrays.values())}


def test_entry_order(tmp_path):
    path = tmp_path / "net.npz"
    run_net(path)
    names = zipfile.ZipFile(path).namelist()
    first_call = next(i for i, n in enumerate(names) if n.startswith("s0/"))
    assert all(n.startswith("param/") for n in names[:first_call - 1])
    assert names[first_call - 1] == "input/x.npy"
    assert names[first_call] == "s0/net/arg0.npy"
    assert names[-2:] == ["output/y.npy", "__zflow__.npy"]


def test_same_run_same_bytes(tmp_path):
    a, b = tmp_path / "a.npz", tmp_path / "b.npz"
    run_net(a)
    run_net(b)
    assert hashlib.sha256(a.read_bytes()).digest() == hashlib.sha256(b.read_bytes()).digest()


def test_numpy_reads_every_entry(tmp_path):
    path = tmp_path / "net.npz"
    run_net(path)
    with np.load(path) as z:
        assert z["s0/net.norm/out"].shape == (3, 4)
        assert z["__zflow__"].dtype == np.uint8


@pytest.mark.parametrize("bad", ["ref.pt", "ref"])
def test_path_suffix_is_checked(tmp_path, bad):
    with pytest.raises(ValueError, match="must end in .npz or .safetensors"):
        Capture(torch.nn.Identity(), path=tmp_path / bad)
    assert os.listdir(tmp_path) == []


def test_producer_extras_and_one_run_per_capture(tmp_path):
    m = torch.nn.Linear(2, 2).to(torch.float64)
    cap = Capture(m, name="m", path=tmp_path / "t.npz", producer={"case": "tiny"})
    with pytest.raises(Exception, match="not running"):
        cap.input("x", torch.ones(2))
    with cap:
        m(torch.ones(2, dtype=torch.float64))
    manifest, _ = tracefile.check(tmp_path / "t.npz")
    assert manifest["producer"]["case"] == "tiny" and manifest["producer"]["dtype"] == "float64"
    assert manifest["producer"]["capture"].startswith("zflow_capture ")
    with pytest.raises(Exception, match="one run"):
        with cap:
            pass


def test_producer_dtype_is_the_bulk_of_the_parameters(tmp_path):
    # a model that keeps its first module in float32 (a timestep embedder, as
    # _keep_in_fp32_modules does) while the rest is bfloat16 is a bfloat16 run
    class Mixed(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = torch.nn.Linear(2, 4)
            self.body = torch.nn.Linear(4, 64).to(torch.bfloat16)

        def forward(self, x):
            return self.body(self.embed(x).to(torch.bfloat16))

    net = Mixed()
    path = tmp_path / "mixed.npz"
    with Capture(net, name="net", path=path) as cap:
        with cap.step(0):
            net(torch.randn(3, 2))
    manifest, _ = tracefile.check(path)
    assert manifest["producer"]["dtype"] == "bfloat16"
