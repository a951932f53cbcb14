package synth

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// TestLateMultiplierForms: what glue's late pass reads where a muP model
// multiplies (falcon_h1_mup's constructs, planted): a residual plus two
// branches scaled by multipliers of their own, each multiplier found and
// snapped; a projection's cut scaled in runs of columns (mup_vector over
// [x | B | C]), each run's multiplier found. Both reproduce the target at
// every step and name their multipliers.
func TestLateMultiplierForms(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	rnd := func(shape ...int) *val {
		n := 1
		for _, d := range shape {
			n *= d
		}
		v := &val{shape: shape, data: make([]float32, n), format: f32, param: true}
		for i := range v.data {
			v.data[i] = float32(r.NormFloat64())
		}
		return v
	}
	t.Run("weighted sum", func(t *testing.T) {
		a, b, c := rnd(1, 4, 6), rnd(1, 4, 6), rnd(1, 4, 6)
		data := func(int) []float32 {
			d := make([]float32, 24)
			for i := range d {
				d[i] = c.data[i] + (float32(a.data[i]*0.24) + float32(b.data[i]*0.94))
			}
			return d
		}
		s, sc, target := plantedSteps(t, []int{1, 4, 6}, data, a, b, c)
		v := s.glue(target, sc)
		if v == nil {
			t.Fatal("not explained")
		}
		d := describe(v)
		if !strings.Contains(d, "0.24") || !strings.Contains(d, "0.94") {
			t.Errorf("explained as %s: want the multipliers 0.24 and 0.94", d)
		}
		for st := range stepSigmas {
			if got, ok := s.at(v, st); !ok || relRMS(f32, got, data(st)) > tolerance(f32) {
				t.Errorf("%s does not reproduce step %d", d, st)
			}
		}
	})
	t.Run("runs of columns", func(t *testing.T) {
		u := rnd(1, 4, 10)
		mult := []float32{0.25, 0.25, 0.25, 0.25, 0.5, 0.5, 0.75}
		data := func(int) []float32 {
			d := make([]float32, 4*7)
			for row := range 4 {
				for j, m := range mult {
					d[row*7+j] = u.data[row*10+2+j] * m
				}
			}
			return d
		}
		s, sc, target := plantedSteps(t, []int{1, 4, 7}, data, u)
		v := s.glue(target, sc)
		if v == nil {
			t.Fatal("not explained")
		}
		d := describe(v)
		for _, m := range []string{"0.25", "0.5", "0.75"} {
			if !strings.Contains(d, m) {
				t.Errorf("explained as %s: want the multiplier %s", d, m)
			}
		}
		for st := range stepSigmas {
			if got, ok := s.at(v, st); !ok || relRMS(f32, got, data(st)) > tolerance(f32) {
				t.Errorf("%s does not reproduce step %d", d, st)
			}
		}
	})
}
