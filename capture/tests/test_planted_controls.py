"""The planted-control traces (capture/examples/planted_controls.py,
fixtures/controls/): each control is the reference with one factor flipped,
the same weights and inputs, and the script remakes the committed files."""

import os
import sys

import pytest
import torch

from zflow_capture import example

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "examples"))

import planted_controls as pc  # noqa: E402

COMMITTED = os.path.normpath(os.path.join(HERE, "..", "..", "fixtures", "controls"))


def run(control):
    """The model's velocity and the first block's input rows, at σ = 1."""
    model, x, text = example.build(control=control)
    seen = {}
    model.blocks[0].register_forward_pre_hook(lambda m, args: seen.setdefault("rows", args[0].clone()))
    with torch.no_grad():
        v = model(hidden_states=x, encoder_hidden_states=text, timestep=torch.tensor([1.0]), return_dict=False)[0]
    return v, seen["rows"]


def test_controls_listed():
    assert set(pc.CONTROLS) == set(example.CONTROLS) - {None}


@pytest.mark.parametrize("control", [c for c in example.CONTROLS if c not in (None, "euler_minus")])
def test_control_changes_the_model(control):
    """Same weights and inputs (parameters bit-identical), another computation:
    another output, or (image_first, whose attention is order-equivariant with
    the positions moved along) the same output from rows in another order, or
    (patchify, whose latents are the reference's tokens unpacked) the same
    output in another layout."""
    ref, _, _ = example.build()
    ctl, _, _ = example.build(control=control)
    for (n1, p1), (n2, p2) in zip(ref.named_parameters(), ctl.named_parameters()):
        assert n1 == n2 and torch.equal(p1, p2)
    v_ref, rows_ref = run(None)
    v, rows = run(control)
    if control == "image_first":
        assert torch.allclose(v_ref, v, atol=1e-5)
        n_img = v.shape[1]
        assert torch.equal(rows[:, :n_img], rows_ref[:, -n_img:])
    elif control == "patchify":
        assert v.shape == (1, example.LATENT_CHANNELS, example.GRID[0] * example.PATCH, example.GRID[1] * example.PATCH)
        assert torch.equal(rows, rows_ref)
        assert torch.allclose(example.pack_latents(v), v_ref, atol=1e-6)
    else:
        assert not torch.allclose(v_ref, v, atol=1e-3)


def test_pack_latents_is_diffusers():
    """(c, ph, pw) features, (h, w) rows, as diffusers' _pack_latents; unpack inverts it."""
    x = torch.arange(2 * 3 * 4 * 6, dtype=torch.float32).reshape(2, 3, 4, 6)
    packed = example.pack_latents(x)
    assert packed.shape == (2, 6, 12)
    for b in range(2):
        for h in range(2):
            for w in range(3):
                want = torch.stack([x[b, c, 2 * h + ph, 2 * w + pw] for c in range(3) for ph in range(2) for pw in range(2)])
                assert torch.equal(packed[b, h * 3 + w], want)
    assert torch.equal(example.unpack_latents(packed, 4, 6), x)


def test_unknown_control():
    with pytest.raises(ValueError, match="control"):
        example.build(control="upside_down")


def test_script_remakes_committed(tmp_path):
    """The script's files equal the committed ones byte for byte (with the
    torch that made them)."""
    assert pc.main([str(tmp_path)]) == 0
    if not os.path.isdir(COMMITTED):
        pytest.skip("fixtures/controls not present")
    for name in pc.CONTROLS:
        made = (tmp_path / f"{name}.npz").read_bytes()
        with open(os.path.join(COMMITTED, f"{name}.npz"), "rb") as f:
            committed = f.read()
        if committed != made:
            if torch.__version__ != "1.13.0a0":
                pytest.skip(f"fixtures/controls were made with torch 1.13.0a0, this is {torch.__version__}")
            pytest.fail(f"{name}.npz differs from the committed file")
