"""torch's fused encoder-layer fast path is off while a capture records."""

import pytest
import torch

import tracefile
from zflow_capture import Capture


def test_encoder_layer_calls_recorded(tmp_path):
    mha = getattr(torch.backends, "mha", None)
    if mha is None or not hasattr(mha, "set_fastpath_enabled"):
        pytest.skip(f"torch {torch.__version__} has no fast-path switch (torch.backends.mha, 2.1+)")
    layer = torch.nn.TransformerEncoderLayer(16, 2, 24, dropout=0.0, batch_first=True).eval()
    enc = torch.nn.TransformerEncoder(layer, 1, enable_nested_tensor=False).eval()
    before = mha.get_fastpath_enabled()
    path = tmp_path / "t.npz"
    with Capture(enc, name="enc", path=path) as cap:
        assert not mha.get_fastpath_enabled()
        with torch.no_grad():
            enc(torch.randn(1, 5, 16))
    assert mha.get_fastpath_enabled() == before
    manifest, _ = tracefile.check(path)
    modules = {c["module"] for c in manifest["calls"]}
    # the fused path would record the layer as one call, none of these
    assert {"enc.layers.0.self_attn", "enc.layers.0.linear1", "enc.layers.0.norm2"} <= modules
    assert manifest["producer"]["mha_fastpath"] == "off"
    assert cap.summary["calls"] == len(manifest["calls"])
