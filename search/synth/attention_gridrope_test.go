package synth

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/precision"
)

// TestInlineGridRope: attention whose RoPE the module computes itself from
// the sequence's length (no table, no ids captured): 8 rows read as a
// 2×2×2 grid, heads of 16 whose first 3·4 elements turn, 4 per axis, by
// tables built as [f₀ f₁ f₀ f₁] (each axis's two frequencies repeated)
// and applied to interleaved pairs, so the two elements of a pair turn
// at different frequencies; the last 4 pass. Stated here in float64 as
// the reference's code reads, not through the op.
func TestInlineGridRope(t *testing.T) {
	const rows, heads, d, r = 8, 2, 16, 4
	width := heads * d
	grid := []int{2, 2, 2}
	rng := rand.New(rand.NewPCG(23, 5))
	rnd := func(n int) []float32 {
		out := make([]float32, n)
		for i := range out {
			out[i] = float32(rng.NormFloat64())
		}
		return out
	}
	f := precision.F32
	lin := func(name string) *val {
		return &val{shape: []int{1, rows, width}, data: rnd(rows * width), format: f, origin: name + "/out", fit: &leafFit{kind: "linear"}}
	}
	q, k, v := lin("q"), lin("k"), lin("v")
	turn := func(x *val) *val {
		out := &val{shape: x.shape, data: slices.Clone(x.data), format: f}
		for row := range rows {
			pos := []int{row / 4, row / 2 % 2, row % 2}
			for h := range heads {
				head := x.data[row*width+h*d : row*width+h*d+d]
				for a := range grid {
					for j := range r {
						freq := 1 / math.Pow(1e4, float64(j%(r/2))/(r/2))
						ang := float64(pos[a]) * freq
						e := a*r + j
						rot := -float64(head[e+1])
						if j%2 == 1 {
							rot = float64(head[e-1])
						}
						out.data[row*width+h*d+e] = float32(float64(head[e])*math.Cos(ang) + rot*math.Sin(ang))
					}
				}
			}
		}
		return out
	}
	s0, _ := testSearch(nil, f)
	full, err := s0.ev.run(&expr{op: program.OpAttention, attrs: program.Attrs{Attention: exec.AttentionParams{Heads: heads, KVHeads: heads}}, args: []*val{turn(q), turn(k), v, nil, nil, nil}, out: f})
	if err != nil {
		t.Fatal(err)
	}
	s, sc, target := planted(t, f, []int{1, rows, width}, full.data)
	for _, x := range []*val{q, k, v} {
		sc.add(x, true)
	}
	got := s.attention(target, sc)
	if got == nil {
		t.Fatal("not explained")
	}
	if e := relRMS(f, got.data, target.data); e > tolerance(f) {
		t.Errorf("rel-RMS %.3g", e)
	}
	if len(s.attn) != 1 || s.attn[0].choice.rope != exec.RopeInterleaved {
		t.Fatalf("records %+v: want one attention turning interleaved pairs", s.attn)
	}
	if len(s.ropes) != 1 {
		t.Fatalf("%d RoPE tables recorded, want 1", len(s.ropes))
	}
	if p := s.ropes[0].fit.rope; p.Layout != exec.RopeHalf || !slices.Equal(p.AxesDims, []int{r, r, r}) || p.Theta != 1e4 {
		t.Errorf("tables %+v: want half layout over axes of %d, θ 1e4", p, r)
	}
}
