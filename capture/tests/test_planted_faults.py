"""The planted-fault traces (capture/examples/planted_faults.py, fixtures/faults/):
each fault differs from the reference exactly from its documented boundary on,
is the change it claims to be, and the clean port equals the reference."""

import os
import sys

import numpy as np
import pytest
import torch

import tracefile
from zflow_capture import example

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "examples"))

import planted_faults as pf  # noqa: E402

COMMITTED = os.path.normpath(os.path.join(HERE, "..", "..", "fixtures", "faults"))
ALL_FAULTS = pf.DEFAULT_FAULTS + pf.EXTRA_FAULTS


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """Run the script into a temp dir (ref, clean, the default faults, README),
    and capture the extra faults next to them."""
    out = tmp_path_factory.mktemp("faults")
    assert pf.main([str(out)]) == 0
    for f in pf.EXTRA_FAULTS:
        pf.capture(str(out / f"{f}.npz"), f)
    return out


def test_files(made):
    names = {"ref", "clean", *ALL_FAULTS}
    assert {p.stem for p in made.glob("*.npz")} == names
    total = 0
    for name in names:
        path = made / f"{name}.npz"
        manifest, _ = tracefile.check(path)
        assert manifest["producer"]["fault"] == (name if name in ALL_FAULTS else "none")
        assert manifest["producer"]["dtype"] == "float32" and manifest["producer"]["device"] == "cpu"
        assert {c["step"] for c in manifest["calls"]} == {0}
        assert path.stat().st_size <= 480_000
        total += path.stat().st_size if name in pf.DEFAULT_FAULTS + ("ref", "clean") else 0
    assert total <= 3_300_000
    assert (made / "README.md").exists() and (made / "numbers.json").exists()


def test_clean_equals_ref(made):
    order, differing, unpaired = pf.compare(made / "clean.npz", made / "ref.npz")
    assert differing == [] and unpaired == []
    cm, ca = pf.load(made / "clean.npz")
    rm, ra = pf.load(made / "ref.npz")
    assert cm["calls"] == rm["calls"] and set(ca) == set(ra)
    for key in ra:
        assert pf.same_bits(ca[key], ra[key]), key


@pytest.mark.parametrize("fault", ALL_FAULTS)
def test_first_difference(made, fault):
    order, differing, unpaired = pf.compare(made / f"{fault}.npz", made / "ref.npz")  # also: same parameters
    assert unpaired == []
    first = pf.EXPECTED[fault][0]
    assert differing[0] == first
    _, ours = pf.load(made / f"{fault}.npz")
    _, ref = pf.load(made / "ref.npz")
    i = order.index(first)
    for key in order[:i]:
        assert pf.same_bits(ours[key], ref[key]), f"{key} precedes {first} but differs"
    assert not pf.same_bits(ours[first], ref[first])
    assert not pf.same_bits(ours["output/latents"], ref["output/latents"])


def test_boundary_order_is_execution_order(made):
    manifest, _ = pf.load(made / "ref.npz")
    order = pf.boundary_order(manifest)
    assert len(order) == len(set(order))
    assert order[:3] == ["input/noise", "input/encoder_hidden_states", "input/sigmas"]
    assert order[3] == "s0/transformer/kw.hidden_states"
    assert order[-3:] == ["s0/transformer.proj_out/out", "s0/transformer/out.0", "output/latents"]
    # a container's result comes after its children's ports
    assert order.index("s0/transformer.blocks.0/out") > order.index("s0/transformer.blocks.0.ff.proj_out/out")
    assert order.index("s0/transformer.blocks.0/out") < order.index("s0/transformer.blocks.1/arg0")


def _modulation(ref, block=0):
    return np.split(ref[f"s0/transformer.blocks.{block}.modulation/out"][:, None], 6, axis=-1)


def test_swap_shift_scale_is_the_swap(made):
    _, ours = pf.load(made / "swap_shift_scale.npz")
    _, ref = pf.load(made / "ref.npz")
    n = ref["s0/transformer.blocks.0.norm1/out"]
    shift, scale = _modulation(ref)[:2]
    np.testing.assert_array_equal(ref["s0/transformer.blocks.0.attn/arg0"], n * (1 + scale) + shift)
    np.testing.assert_array_equal(ours["s0/transformer.blocks.0.attn/arg0"], n * (1 + shift) + scale)


def test_no_norm_offset_is_the_missing_one(made):
    _, ours = pf.load(made / "no_norm_offset.npz")
    _, ref = pf.load(made / "ref.npz")
    n = ref["s0/transformer.blocks.0.norm1/out"]
    shift, scale = _modulation(ref)[:2]
    np.testing.assert_array_equal(ours["s0/transformer.blocks.0.attn/arg0"], n * scale + shift)


@pytest.mark.parametrize("fault,act", [("wrong_activation", torch.nn.functional.silu),
                                       ("wrong_activation_erf", torch.nn.functional.gelu)])
def test_wrong_activation_is_the_activation(made, fault, act):
    _, ours = pf.load(made / f"{fault}.npz")
    _, ref = pf.load(made / "ref.npz")
    x = ref["s0/transformer.blocks.0.ff.act/arg0"]
    np.testing.assert_array_equal(ours["s0/transformer.blocks.0.ff.act/out"], act(torch.from_numpy(x)).numpy())
    np.testing.assert_array_equal(
        ref["s0/transformer.blocks.0.ff.act/out"],
        torch.nn.functional.gelu(torch.from_numpy(x), approximate="tanh").numpy())


def test_transposed_unpatchify_is_a_grid_transpose(made):
    _, ours = pf.load(made / "transposed_unpatchify.npz")
    _, ref = pf.load(made / "ref.npz")
    rows, cols = example.GRID
    r = ref["s0/transformer/out.0"]
    o = ours["s0/transformer/out.0"]
    for i in range(rows):
        for j in range(cols):
            np.testing.assert_array_equal(o[0, i * cols + j], r[0, j * rows + i])
    # the same values per channel, most of them moved
    np.testing.assert_array_equal(np.sort(o, axis=1), np.sort(r, axis=1))
    moved = (o != r).any(axis=-1)[0]
    assert moved.sum() == rows * cols - 2


def test_f16_overflow_is_overflow(made):
    _, ours = pf.load(made / "f16_overflow.npz")
    _, ref = pf.load(made / "ref.npz")
    key = pf.EXPECTED["f16_overflow"][0]
    o, r = ours[key], ref[key]
    assert np.isfinite(r).all() and not np.isnan(o).any()
    inf = np.isinf(o)
    assert 0 < inf.sum() < o.size // 4
    # Inf exactly where the scaled product leaves the f16 range, f16 rounding elsewhere
    x = ref["s0/transformer.blocks.0.ff.proj_in/arg0"].astype(np.float64)
    w = ref["param/transformer.blocks.0.ff.proj_in.weight"].astype(np.float64)
    scaled = example.F16_ALPHA * (x @ w.T)
    # (up to the f16 rounding of x and W before the product)
    assert (np.abs(scaled[~inf]) < 65520 * 1.002).all() and (np.abs(scaled[inf]) > 65504 * 0.998).all()
    assert (np.sign(o[inf]) == np.sign(scaled[inf])).all()
    np.testing.assert_allclose(o[~inf], r[~inf], rtol=0, atol=2e-3)
    assert not pf.same_bits(o[~inf], r[~inf])


def test_stats_separate_the_faults(made):
    """The numbers the README reports, as properties of the faults."""
    _, ref = pf.load(made / "ref.npz")
    s = {}
    for f in ALL_FAULTS:
        _, ours = pf.load(made / f"{f}.npz")
        k = pf.EXPECTED[f][0]
        s[f] = pf.channel_report(ours[k], ref[k])
    assert s["transposed_unpatchify"]["multiset_match"] == 1 and s["transposed_unpatchify"]["position_match"] < 0.25
    assert s["transposed_unpatchify"]["dmean_max_abs"] < 1e-6 and s["transposed_unpatchify"]["dstd_max_abs"] < 1e-6
    assert s["no_norm_offset"]["affine_explained"] > 0.999 and s["no_norm_offset"]["scale_share"] > 0.9
    assert s["no_norm_offset"]["std_ratio"][1] < 1
    assert s["swap_shift_scale"]["affine_explained"] > 0.999
    assert s["wrong_activation"]["affine_explained"] < 0.9
    assert s["f16_overflow"]["ours_inf"] > 0 and s["f16_overflow"]["rel_rms"] < 1e-3
    assert s["wrong_activation_erf"]["rel_rms"] < 1 / 256 < s["wrong_activation"]["rel_rms"]


def test_unknown_fault():
    with pytest.raises(ValueError, match="fault 'nope'"):
        example.build(fault="nope")


def test_committed(made):
    """fixtures/faults is this script's output (bit for bit when made by this torch)."""
    if not os.path.exists(os.path.join(COMMITTED, "ref.npz")):
        pytest.skip(f"{COMMITTED} is missing: run capture/examples/planted_faults.py")
    readme = open(os.path.join(COMMITTED, "README.md"), encoding="utf-8").read()
    for f in ALL_FAULTS:
        assert f"| {f}" in readme and f"`{pf.EXPECTED[f][0]}`" in readme, f
    for name in ("ref", "clean") + pf.DEFAULT_FAULTS:
        committed, committed_arrays = tracefile.check(os.path.join(COMMITTED, f"{name}.npz"))
        manifest, arrays = tracefile.load(made / f"{name}.npz")
        assert committed["calls"] == manifest["calls"] and committed["producer"]["fault"] == manifest["producer"]["fault"]
        same_torch = committed["producer"]["framework_version"] == torch.__version__
        assert set(arrays) == set(committed_arrays)
        for key, a in arrays.items():
            if same_torch or key.startswith(("param/", "input/")):
                assert pf.same_bits(a, committed_arrays[key]), (name, key)
        if same_torch:
            assert (made / f"{name}.npz").read_bytes() == open(os.path.join(COMMITTED, f"{name}.npz"), "rb").read()
    if torch.__version__ == committed["producer"]["framework_version"]:
        assert (made / "README.md").read_text(encoding="utf-8") == readme
