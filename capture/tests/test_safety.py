"""Nothing half-written, nothing changed: budget, errors, in-place ops, bf16 bits."""

import numpy as np
import pytest
import torch

import tracefile
from models import Boom, Clone, InPlace, Net
from zflow_capture import Capture, CaptureBudgetError, CaptureError

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def only(tmp_path, *names):
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(names)


@pytest.mark.parametrize("suffix", [".npz", ".safetensors"])
def test_budget_refused_mid_run_writes_nothing(tmp_path, suffix):
    net = Net()
    params = sum(p.numel() * 4 for p in net.parameters())
    path = tmp_path / f"t{suffix}"
    with pytest.raises(CaptureBudgetError) as err:
        with Capture(net, name="net", path=path, max_bytes=params + 200) as cap:
            for i in range(3):
                with cap.step(i):
                    net(torch.randn(4, 4))
    e = err.value
    assert e.budget == params + 200 and e.size > e.budget and str(path) in str(e)
    assert f"max_bytes={params + 200}" in str(e) and "nothing was written" in str(e)
    only(tmp_path)


def test_budget_refused_by_parameters_alone(tmp_path):
    with pytest.raises(CaptureBudgetError, match="param/net"):
        with Capture(Net(), name="net", path=tmp_path / "t.npz", max_bytes=10):
            pass
    only(tmp_path)


def test_budget_error_caught_inside_block_still_refuses(tmp_path):
    net = Net()
    with pytest.raises(CaptureBudgetError):
        with Capture(net, name="net", path=tmp_path / "t.npz", max_bytes=1000) as cap:
            try:
                net(torch.randn(4, 4))
            except CaptureBudgetError:
                pass
            net(torch.randn(4, 4))  # hooks are inert once the capture failed
            with pytest.raises(CaptureError, match="already failed"):
                cap.input("x", torch.ones(1))
    only(tmp_path)


def test_budget_that_fits(tmp_path):
    path = tmp_path / "t.npz"
    net = Net()
    with Capture(net, name="net", path=path, max_bytes=10**6) as cap:
        net(torch.randn(4, 4))
    assert 0 < cap.summary["bytes"] <= 10**6
    tracefile.check(path)


@pytest.mark.parametrize("suffix", [".npz", ".safetensors"])
def test_model_that_raises_leaves_nothing(tmp_path, suffix, hook_mode):
    m = Boom()
    path = tmp_path / f"t{suffix}"
    with pytest.raises(RuntimeError, match="boom"):
        with Capture(m, name="m", path=path) as cap:
            cap.input("x", torch.ones(2, 4))
            with cap.step(0):
                m(torch.ones(2, 4))
    only(tmp_path)
    for sub in m.modules():  # every hook is gone
        assert "forward" not in sub.__dict__ and not sub._forward_hooks and not sub._forward_pre_hooks


def test_failed_capture_keeps_the_old_file(tmp_path):
    path = tmp_path / "t.npz"
    path.write_bytes(b"previous")
    with pytest.raises(RuntimeError):
        with Capture(Boom(), name="m", path=path) as cap:
            with cap.step(0):
                cap._models["m"](torch.ones(1, 4))
    assert path.read_bytes() == b"previous"
    only(tmp_path, "t.npz")


def test_exception_caught_inside_the_model_keeps_the_tree(tmp_path, hook_mode):
    class Tolerant(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.boom = Boom()
            self.after = torch.nn.Linear(4, 4)

        def forward(self, x):
            try:
                self.boom(x)
            except RuntimeError:
                pass
            return self.after(x)

    m = Tolerant()
    path = tmp_path / "t.npz"
    with Capture(m, name="m", path=path):
        m(torch.ones(1, 4))
    manifest, _ = tracefile.check(path)
    after = next(c for c in manifest["calls"] if c["module"] == "m.after")
    assert manifest["calls"][after["parent"]]["module"] == "m"
    assert [c["module"] for c in manifest["calls"]] == ["m", "m.boom", "m.boom.ok", "m.after"]
    assert "out" not in manifest["calls"][1]["tensors"]  # m.boom raised: no result


def test_in_place_changes_after_the_hook_are_not_recorded(tmp_path, hook_mode):
    torch.manual_seed(0)
    m = InPlace()
    x = torch.randn(2, 4)
    with torch.no_grad():
        a, b = m.a(x), m.b(x)
        path = tmp_path / "t.npz"
        with Capture(m, name="m", path=path) as cap:
            cap.input("x", x)
            y = m(x)
            x.mul_(0)  # an input changed after it was recorded
    _, arrays = tracefile.check(path)
    np.testing.assert_array_equal(arrays["pre/m.a/out"], a.numpy())
    np.testing.assert_array_equal(arrays["pre/m.b/out"], b.numpy())
    np.testing.assert_array_equal(arrays["pre/m/out"], y.numpy())
    np.testing.assert_array_equal(arrays["pre/m/out"], (a + b).numpy())
    assert np.abs(arrays["input/x"]).sum() > 0


def special_bf16():
    """bf16 bit patterns: random values plus NaNs (with payloads), infinities, subnormals, zeros."""
    rng = np.random.default_rng(0)
    bits = rng.integers(0, 1 << 16, size=(16, 16), dtype=np.uint16)
    specials = [0x7FC0, 0xFFC1, 0x7F81, 0x7F80, 0xFF80, 0x0001, 0x807F, 0x0040, 0x8000, 0x0000, 0x7F7F, 0xFF7F]
    bits.reshape(-1)[: len(specials)] = specials
    return bits


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("suffix", [".npz", ".safetensors"])
def test_bf16_bits_exact(tmp_path, device, suffix):
    bits = special_bf16()
    t = torch.from_numpy(bits.view(np.int16)).view(torch.bfloat16).to(device)
    m = Clone().to(device)
    path = tmp_path / f"t{suffix}"
    with Capture(m, name="m", path=path) as cap:
        cap.input("x", t)
        with cap.step(0):
            y = m(t)
        cap.output("y", y)
        cap.output("strided", t.t())  # non-contiguous: stored in C order
    manifest, arrays = tracefile.check(path)
    for key in ("input/x", "s0/m/arg0", "s0/m.inner/out", "s0/m/out", "output/y"):
        assert manifest["dtypes"][key] == "bfloat16"
        assert arrays[key].dtype == np.uint16
        np.testing.assert_array_equal(arrays[key], bits)
    np.testing.assert_array_equal(arrays["output/strided"], bits.T)
    assert manifest["producer"]["device"] == device and manifest["producer"]["dtype"] == "bfloat16"


@pytest.mark.parametrize("dtype", [torch.float16, torch.float64, torch.int8, torch.int32, torch.int64, torch.uint8,
                                   torch.bool, torch.complex64])
def test_other_dtypes_are_their_npy_dtype(tmp_path, dtype):
    t = (torch.arange(-6, 6).reshape(3, 4) * 1.5).to(dtype)
    path = tmp_path / "t.npz"
    with Capture(torch.nn.Identity(), name="m", path=path) as cap:
        cap.input("t", t)
        cap.input("scalar", t[0, 1])  # 0-d
        cap.input("empty", t[:0])
    manifest, arrays = tracefile.check(path)
    assert manifest["dtypes"] == {}
    np.testing.assert_array_equal(arrays["input/t"], t.numpy())
    assert arrays["input/scalar"].shape == () and arrays["input/empty"].shape == (0, 4)
    assert arrays["input/t"].dtype == t.numpy().dtype


def test_unsupported_tensor_is_refused(tmp_path):
    with pytest.raises(CaptureError, match="input/s: .*sparse"):
        with Capture(torch.nn.Identity(), name="m", path=tmp_path / "t.npz") as cap:
            cap.input("s", torch.eye(3).to_sparse())
    only(tmp_path)
