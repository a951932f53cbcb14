"""A .safetensors trace: header, manifest in __metadata__, data offsets."""

import json

import numpy as np
import pytest
import torch

import tracefile
from models import Net
from zflow_capture import Capture


def test_safetensors_layout(tmp_path):
    torch.manual_seed(0)
    net = Net().to(torch.bfloat16)
    x = torch.randn(2, 4).to(torch.bfloat16)
    path = tmp_path / "t.safetensors"
    with Capture(net, name="net", path=path) as cap:
        cap.input("x", x)
        cap.input("ids", torch.arange(3))
        with cap.step(0):
            y = net(x)
        cap.output("y", y)
    header, start = tracefile.read_safetensors_header(path)
    assert start % 64 == 0
    manifest = json.loads(header["__metadata__"]["zflow"])
    assert set(header["__metadata__"]) == {"zflow"}
    assert header["input/x"]["dtype"] == "BF16" and header["input/x"]["shape"] == [2, 4]
    assert header["input/ids"]["dtype"] == "I64"
    # Offsets tile the data section without holes, as safetensors requires.
    spans = sorted(e["data_offsets"] for k, e in header.items() if k != "__metadata__")
    assert spans[0][0] == 0 and all(a[1] == b[0] for a, b in zip(spans, spans[1:]))
    assert spans[-1][1] == path.stat().st_size - start

    manifest, arrays = tracefile.check(path)
    assert manifest["dtypes"]["input/x"] == "bfloat16"
    np.testing.assert_array_equal(arrays["input/x"], x.view(torch.int16).numpy().view(np.uint16))
    np.testing.assert_array_equal(arrays["output/y"], y.view(torch.int16).numpy().view(np.uint16))
    assert cap.summary["tensors"] == len(arrays)


def test_safetensors_library_reads_it(tmp_path):
    st = pytest.importorskip("safetensors.torch", reason="the safetensors package is not installed")
    net = Net()
    path = tmp_path / "t.safetensors"
    with Capture(net, name="net", path=path) as cap:
        cap.input("x", torch.randn(2, 4).to(torch.bfloat16))
        net(torch.randn(2, 4))
    loaded = st.load_file(str(path))
    _, arrays = tracefile.check(path)
    assert set(loaded) == set(arrays)
    assert loaded["input/x"].dtype == torch.bfloat16
    torch.testing.assert_close(loaded["param/net.norm.weight"], net.norm.weight.detach())


def test_complex128_is_refused_in_safetensors(tmp_path):
    from zflow_capture import CaptureError

    with pytest.raises(CaptureError, match="no safetensors name"):
        with Capture(torch.nn.Identity(), name="m", path=tmp_path / "t.safetensors") as cap:
            cap.input("z", torch.zeros(2, dtype=torch.complex128))
    assert list(tmp_path.iterdir()) == []
