package synth

import (
	"math"
	"testing"
)

// TestMarginRange: the margins a stepwise router's weights allow, read
// off one row [2, 1.9, −1, 0.5] picked 0 then 1 (distances below 2:
// 0.05, 0.75, 1.5; below 1.9: 0.737, 1.526).
func TestMarginRange(t *testing.T) {
	logits := []float32{2, 1.9, -1, 0.5}
	near := float32(1 / (1 + math.Exp(-0.1)))
	three := float32(1 / (1 + math.Exp(-0.1) + math.Exp(-1.5)))
	two := float32(1 / (1 + math.Exp(-1.4)))
	for _, c := range []struct {
		name   string
		w, idx []float32
		lo, hi float64
		ok     bool
	}{
		{"weights of one: below the nearest distance", []float32{1, 1}, []float32{0, 1}, 0, 0.05, true},
		{"the near logit shared", []float32{near, 1}, []float32{0, 1}, 0.05, 0.737, true},
		{"three kept, then two", []float32{three, two}, []float32{0, 1}, 0.75, 1.5, true},
		{"a weight no margin gives", []float32{0.3, 1}, []float32{0, 1}, 0, 0, false},
		{"a pick not the largest left", []float32{1, 1}, []float32{1, 0}, 0, 0, false},
		{"picks that meet in a narrow interval", []float32{near, two}, []float32{0, 1}, 0.737, 0.75, true},
		{"picks that disagree", []float32{three, 1}, []float32{0, 1}, 0, 0, false},
	} {
		lo, hi, ok := marginRange(logits, c.w, c.idx, 4, 2, 1e-4)
		if ok != c.ok {
			t.Errorf("%s: ok %v, want %v (interval [%g, %g))", c.name, ok, c.ok, lo, hi)
			continue
		}
		if ok && (math.Abs(lo-c.lo) > 2e-3 || math.Abs(hi-c.hi) > 2e-3) {
			t.Errorf("%s: [%g, %g), want [%g, %g)", c.name, lo, hi, c.lo, c.hi)
		}
	}
}
