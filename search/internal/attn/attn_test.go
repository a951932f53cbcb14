package attn

import (
	"math"
	"testing"
)

// Hand-computed cases: a causal first row is v's first row; equal scores
// average v; RoPE rotates the pairs of its layout by the table's angle.
func TestAttend(t *testing.T) {
	s := Set{Q: []float32{1, 0, 0, 1}, K: []float32{1, 0, 0, 1}, V: []float32{2, 4, 6, 8}, Rows: 2}
	out := Attend([]Set{s}, []int{0}, Tables{}, Params{Heads: 1, KVHeads: 1, D: 2, Layout: None, Causal: true}, Sample{Rows: [][]int{{0}}, Heads: []int{0}})
	if out[0][0] != 2 || out[0][1] != 4 {
		t.Errorf("causal row 0 = %v, want v[0] = [2 4]", out[0])
	}
	z := Set{Q: []float32{0, 0}, K: []float32{1, 0, 0, 1}, V: []float32{2, 4, 6, 8}, Rows: 1}
	kv := Set{Q: []float32{0, 0}, K: z.K, V: z.V, Rows: 2}
	out = Attend([]Set{{Q: z.Q, K: kv.K[:2], V: kv.V[:2], Rows: 1}, {Q: z.Q, K: kv.K[2:], V: kv.V[2:], Rows: 1}}, []int{1, 0}, Tables{}, Params{Heads: 1, KVHeads: 1, D: 2, Layout: None}, Sample{Rows: [][]int{{0}, {0}}, Heads: []int{0}})
	if out[0][0] != 4 || out[0][1] != 6 {
		t.Errorf("equal scores give %v, want the mean [4 6]", out[0])
	}
}

func TestRope(t *testing.T) {
	c, s := math.Cos(0.5), math.Sin(0.5)
	tab := Tables{Cos: []float64{c, c, c, c}, Sin: []float64{s, s, s, s}, W: 4}
	x := []float64{1, 0, 0, 0}
	Rope(x, tab, 0, Interleaved) // pair (0, 1) rotates
	if math.Abs(x[0]-c) > 1e-15 || math.Abs(x[1]-s) > 1e-15 || x[2] != 0 {
		t.Errorf("interleaved: %v", x)
	}
	x = []float64{1, 0, 0, 0}
	Rope(x, tab, 0, Half) // pair (0, 2) rotates
	if math.Abs(x[0]-c) > 1e-15 || math.Abs(x[2]-s) > 1e-15 || x[1] != 0 {
		t.Errorf("half: %v", x)
	}
	cos, sin, w := Complex([]float32{1, 0, 0, 1}, 2, Half)
	if w != 4 || cos[0] != 1 || cos[2] != 1 || sin[1] != 1 || sin[3] != 1 {
		t.Errorf("complex half: cos %v sin %v", cos, sin)
	}
}
