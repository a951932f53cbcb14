"""Round trip through the Go reader: `zflow inspect --json` agrees with what Python wrote."""

import glob
import json
import os
import shutil
import subprocess

import pytest
import torch

import tracefile
from conftest import CAPTURE
from models import Net
from zflow_capture import Capture, example

REPO = os.path.dirname(CAPTURE)


@pytest.fixture(scope="module")
def zflow(tmp_path_factory):
    if shutil.which("go") is None:
        pytest.skip("go is not on PATH: the Go round trip needs it")
    if not glob.glob(os.path.join(REPO, "cmd", "zflow", "*.go")):
        pytest.skip("./cmd/zflow does not exist yet: nothing to round-trip through")
    binary = str(tmp_path_factory.mktemp("bin") / "zflow")
    r = subprocess.run(["go", "build", "-o", binary, "./cmd/zflow"], cwd=REPO, capture_output=True, text=True,
                       timeout=600)
    if r.returncode != 0:
        pytest.fail(f"go build ./cmd/zflow failed:\n{r.stderr}")
    return binary


def inspect(zflow, path):
    r = subprocess.run([zflow, "inspect", "--json", str(path)], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, f"zflow inspect --json {path}: exit {r.returncode}\n{r.stderr}"
    return json.loads(r.stdout)


def write_net(path):
    net = Net().to(torch.bfloat16)
    with Capture(net, name="net", path=path) as cap:
        cap.input("x", torch.randn(2, 4).to(torch.bfloat16))
        for i in range(2):
            with cap.step(i):
                net(torch.randn(2, 4).to(torch.bfloat16))
    return cap.summary


CASES = {
    "dit-f32.npz": lambda p: example.capture(p),
    "dit-bf16.npz": lambda p: example.capture(p, dtype=torch.bfloat16),
    "dit-f32.safetensors": lambda p: example.capture(p),
    "net-bf16.npz": write_net,
    "net-bf16.safetensors": write_net,
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_inspect_counts(zflow, tmp_path, name):
    path = tmp_path / name
    summary = CASES[name](path)
    got = inspect(zflow, path)
    for field in ("calls", "tensors", "params", "steps"):
        assert isinstance(got.get(field), int), f"inspect --json has no integer {field!r}: {got}"
        assert got[field] == summary[field], f"{field}: Go says {got[field]}, Python wrote {summary[field]}"
    assert got.get("bytes") == summary["bytes"], f"bytes of tensor data: Go says {got.get('bytes')}, Python wrote {summary['bytes']}"
    if "file_bytes" in got:
        assert got["file_bytes"] == path.stat().st_size

    # Request inputs and outputs keep their dtype (bf16 by its manifest name) and shape.
    manifest, arrays = tracefile.load(path)
    for kind in ("inputs", "outputs"):
        for entry in got.get(kind, []):
            key = entry["key"]
            want = manifest["dtypes"].get(key, str(arrays[key].dtype))
            assert (entry["dtype"], entry["shape"]) == (want, list(arrays[key].shape)), key
