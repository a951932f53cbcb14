"""save_trace: a port's trace from NumPy arrays, written with torch absent, paired by zflow diff."""

import json
import os
import subprocess
import sys
import zipfile

import numpy as np
import pytest

from conftest import CAPTURE
from test_go_roundtrip import zflow  # noqa: F401 - the built binary, a fixture
from zflow_capture import CaptureError, save_trace

REPO = os.path.dirname(CAPTURE)
REF = os.path.join(REPO, "fixtures", "dit", "dit-bf16.npz")
KEYS = ["transformer.x_embedder/arg0", "transformer.x_embedder/out",
        "transformer.blocks.0.attn.to_q/arg0", "transformer.blocks.0.attn.to_q/out"]

# Runs with torch made unimportable: the port side has NumPy only.
NO_TORCH = """
import sys
sys.modules["torch"] = None
import json, numpy as np, zflow_capture
try:
    zflow_capture.Capture
except ImportError as e:
    assert "needs torch" in str(e), e
else:
    raise SystemExit("Capture imported without torch")
out, keys = sys.argv[1], sys.argv[2].split(",")
z = np.load(sys.argv[3])
dtypes = json.loads(bytes(z["__zflow__"]).decode())["dtypes"]
tensors = {k: z["s0/" + k] for k in reversed(keys)}  # file order is not the reference's
bf16 = [k for k in keys if dtypes.get("s0/" + k) == "bfloat16"]
assert bf16, "the fixture's boundaries are bf16"
zflow_capture.save_trace(out, tensors, bf16_keys=bf16, step=0)
"""


@pytest.mark.parametrize("suffix", [".npz", ".safetensors"])
def test_torch_free_port_pairs_with_reference(tmp_path, zflow, suffix):  # noqa: F811
    out = tmp_path / ("ours" + suffix)
    r = subprocess.run([sys.executable, "-c", NO_TORCH, str(out), ",".join(KEYS), REF],
                       env={**os.environ, "PYTHONPATH": CAPTURE}, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    d = subprocess.run([zflow, "diff", str(out), REF, "--step", "0", "--gate", "exact>=1", "--format", "json"],
                       cwd=REPO, capture_output=True, text=True, timeout=120)
    assert d.returncode == 0, d.stderr
    doc = json.loads(d.stdout)
    assert [b["key"] for b in doc["boundaries"]] == ["s0/" + k for k in KEYS]  # the reference's order
    assert all(b["exact_fraction"] == 1 and b["ours_dtype"] == b["dtype"] for b in doc["boundaries"])
    assert d.stderr.count("had no call tree (its manifest names no calls)") == 1
    assert "read as bfloat16" not in d.stderr  # the manifest said so; nothing was guessed


def test_help_without_torch():
    r = subprocess.run([sys.executable, "-c", "import sys, runpy; sys.modules['torch'] = None; "
                        "sys.argv = ['zflow_capture', '--help']; runpy.run_module('zflow_capture', run_name='__main__')"],
                       env={**os.environ, "PYTHONPATH": CAPTURE}, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "usage: python3 -m zflow_capture" in r.stdout, r.stderr


def test_round_trip_dtypes(tmp_path):
    bits = np.array([0x3F80, 0xC000, 0x7FC1], dtype=np.uint16)  # 1, -2, a NaN payload
    f16 = np.array([[1.5, -0.0]], dtype=np.float16)
    be = np.arange(3, dtype=">f4")  # big-endian in, little-endian stored
    p = tmp_path / "t.npz"
    save_trace(p, {"a/out": bits, "b/out": f16, "c/out": be}, bf16_keys=["a/out"])
    with zipfile.ZipFile(p) as z:
        assert sorted(z.namelist()) == ["__zflow__.npy", "a/out.npy", "b/out.npy", "c/out.npy"]
    got = np.load(p)
    assert json.loads(bytes(got["__zflow__"]).decode())["dtypes"] == {"a/out": "bfloat16"}
    assert got["a/out"].dtype == np.uint16 and got["a/out"].tobytes() == bits.tobytes()
    assert got["b/out"].tobytes() == f16.tobytes() and got["c/out"].dtype == np.dtype("<f4")
    np.testing.assert_array_equal(got["c/out"], [0, 1, 2])
    s = tmp_path / "t.safetensors"
    save_trace(s, {"a/out": bits}, bf16_keys=["a/out"], step=2)
    raw = s.read_bytes()
    n = int.from_bytes(raw[:8], "little")
    hdr = json.loads(raw[8:8 + n])
    assert hdr["s2/a/out"] == {"dtype": "BF16", "shape": [3], "data_offsets": [0, 6]}
    assert raw[8 + n:] == bits.tobytes()


def test_ml_dtypes_bfloat16(tmp_path):
    ml_dtypes = pytest.importorskip("ml_dtypes")
    x = np.array([1.0, -2.0], dtype=ml_dtypes.bfloat16)
    p = tmp_path / "t.safetensors"
    save_trace(p, {"x/out": x})
    raw = p.read_bytes()
    n = int.from_bytes(raw[:8], "little")
    assert json.loads(raw[8:8 + n])["x/out"]["dtype"] == "BF16" and raw[8 + n:] == x.view(np.uint16).tobytes()


@pytest.mark.parametrize("tensors, bf16, step, problem", [
    ({"x/out": np.zeros(2, np.float32)}, ["x/out"], None, "bf16 wants uint16"),
    ({"x/out": np.zeros(2, np.float32)}, ["y/out"], None, "not in tensors"),
    ({"x/out": np.array(["a"])}, (), None, "not a trace dtype"),
    ({"": np.zeros(1, np.float32)}, (), None, "non-empty"),
    ({"x/out": np.zeros(1, np.float32)}, (), -1, "step -1"),
])
def test_bad_input_writes_nothing(tmp_path, tensors, bf16, step, problem):
    with pytest.raises(CaptureError, match=problem):
        save_trace(tmp_path / "t.npz", tensors, bf16_keys=bf16, step=step)
    assert os.listdir(tmp_path) == []


def test_other_python_on_path():
    """The python3 first on PATH (often without torch, sometimes without NumPy) imports the package."""
    import shutil
    py = shutil.which("python3")
    if py is None or os.path.realpath(py) == os.path.realpath(sys.executable):
        pytest.skip("no other python3 on PATH")
    env = {**os.environ, "PYTHONPATH": CAPTURE}
    r = subprocess.run([py, "-m", "zflow_capture", "--help"], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "usage:" in r.stdout, r.stderr
    probe = ("import zflow_capture as z\n"
             "try:\n    import numpy\nexcept ImportError:\n"
             "    try:\n        z.save_trace('never.npz', {})\n    except z.CaptureError as e:\n"
             "        assert 'needs numpy' in str(e), e\n        print('no numpy: refused')\n"
             "    else:\n        raise SystemExit('save_trace ran without numpy')\n"
             "else:\n    print('numpy present')\n")
    r = subprocess.run([py, "-c", probe], env=env, cwd=os.environ.get("TMPDIR", "/tmp"), capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.strip() in ("no numpy: refused", "numpy present"), r.stderr
