package synth

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/zflow/zflow/exec/cpu"
	"github.com/zflow/zflow/precision"
)

// TestOwnRope: a parameterless module rotates its argument by tables it
// keeps (adjacent pairs; two axes of 4 channels over a 2×3 grid, θ 10000,
// after one identity row), laid out [B, S, H, D], [B, S, D] or [B, H, S, D]:
// fitModuleRope reads the angles back from the argument and the result,
// explains the tables from ids, and reproduces the result; a result that
// is not a rotation of its argument (the same values scaled) is not
// explained.
func TestOwnRope(t *testing.T) {
	const D = 8
	ids := [][2]int{{0, 0}} // the identity row, then the grid
	for i := range 2 {
		for j := range 3 {
			ids = append(ids, [2]int{i, j})
		}
	}
	S := len(ids)
	for _, c := range []struct {
		name        string
		shape       []int
		headsBefore bool
	}{
		{"rows then heads", []int{1, S, 2, D}, false},
		{"one head", []int{2, S, D}, false},
		{"heads then rows", []int{1, 3, S, D}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := &synth{ev: &evaluator{b: cpu.New(1)}, em: newEmitter(precision.F32)}
			n := 1
			for _, k := range c.shape {
				n *= k
			}
			H := n / (c.shape[0] * S * D)
			r := rand.New(rand.NewPCG(2, 9))
			x := &val{shape: c.shape, data: make([]float32, n), format: precision.F32}
			for i := range x.data {
				x.data[i] = float32(r.NormFloat64())
			}
			y := &val{shape: x.shape, data: make([]float32, n), format: precision.F32, origin: "m.rope/out"}
			for b := range c.shape[0] {
				for s := range S {
					for h := range H {
						base := ((b*S+s)*H + h) * D
						if c.headsBefore {
							base = ((b*H+h)*S + s) * D
						}
						for j := range D / 2 {
							axis, k := j/2, j%2 // two pairs per axis
							ang := float64(ids[s][axis]) * math.Pow(10000, -float64(2*k)/4)
							c, sn := float32(math.Cos(ang)), float32(math.Sin(ang))
							a, b := x.data[base+2*j], x.data[base+2*j+1]
							y.data[base+2*j], y.data[base+2*j+1] = a*c-b*sn, b*c+a*sn
						}
					}
				}
			}
			sc := &scope{module: "m"}
			got := s.fitModuleRope([]*val{x}, y, sc)
			if got == nil {
				t.Fatal("the rotation by the module's own tables was not explained")
			}
			if rel := relRMS(precision.F32, got.data, y.data); rel > 1e-6 {
				t.Errorf("rel-RMS %.3g", rel)
			}
			if len(s.ropes) != 1 || s.ropes[0].fit.rope.Theta != 10000 {
				t.Errorf("RoPE record %+v, want one table of θ 10000", s.ropes)
			}
			scaled := &val{shape: x.shape, data: make([]float32, n), format: precision.F32}
			for i, v := range x.data {
				scaled.data[i] = 1.5 * v
			}
			if v := s.fitModuleRope([]*val{x}, scaled, sc); v != nil {
				t.Error("a scaled copy of the argument was explained as a rotation")
			}
		})
	}
}
