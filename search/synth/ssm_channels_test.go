package synth

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/cpu"
	"github.com/zflow/zflow/precision"
)

// TestChannelScanError: the host ranking of a scan over channels gives the
// CPU backend's ssm_scan (times a gate) a rel-RMS at f32's rounding, and
// an assignment whose time step is another value's a large one: it ranks
// by the whole recurrence, not the first position alone.
func TestChannelScanError(t *testing.T) {
	const bs, l, w, n = 1, 7, 6, 4
	rng := rand.New(rand.NewPCG(5, 8))
	mk := func(shape ...int) *val {
		v := &val{shape: shape, format: precision.F32}
		size := 1
		for _, d := range shape {
			size *= d
		}
		v.data = make([]float32, size)
		for i := range v.data {
			v.data[i] = float32(rng.NormFloat64())
		}
		return v
	}
	x, g, b, c, d := mk(bs, l, w), mk(bs, l, w), mk(bs, l, 1, n), mk(bs, l, 1, n), mk(w)
	dt, other, a := mk(bs, l, w), mk(bs, l, w), mk(w, n)
	for i := range dt.data {
		dt.data[i] = float32(math.Log1p(math.Exp(float64(dt.data[i]))))
		other.data[i] = float32(math.Log1p(math.Exp(float64(other.data[i]))))
	}
	for i := range a.data {
		a.data[i] = -float32(math.Exp(float64(a.data[i])))
	}
	bk := cpu.New(1)
	up := func(v *val, shape ...int) exec.Tensor {
		tt, err := bk.Upload(v.data, shape, precision.F32)
		if err != nil {
			t.Fatal(err)
		}
		return tt
	}
	out, err := bk.SSMScan(up(x, bs, l, w, 1), up(dt, bs, l, w), up(a, w, n), up(b, bs, l, 1, n), up(c, bs, l, 1, n), up(d, w), exec.Spec{Out: precision.F32})
	if err != nil {
		t.Fatal(err)
	}
	y, err := bk.Download(out)
	if err != nil {
		t.Fatal(err)
	}
	target := &val{shape: []int{bs, l, w}, format: precision.F32, data: make([]float32, len(y))}
	for i := range y {
		target.data[i] = y[i] * g.data[i]
	}
	if e := channelScanError(target, x, dt, channelDecays(dt, a), b, c, d, g); !(e < 1e-6) {
		t.Errorf("the scan's own output ranks at %.3g, want < 1e-6", e)
	}
	if e := channelScanError(target, x, other, channelDecays(other, a), b, c, d, g); !(e > 0.1) {
		t.Errorf("another time step ranks at %.3g, want > 0.1", e)
	}
	if e := channelScanError(target, x, dt, channelDecays(dt, a), c, b, d, g); !(e > 0.1) {
		t.Errorf("B and C swapped rank at %.3g, want > 0.1", e)
	}
}
