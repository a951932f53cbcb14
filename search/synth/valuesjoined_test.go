package synth

import (
	"math/rand/v2"
	"testing"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/precision"
)

// TestValuesJoined: a joint attention whose q and k are captured over the
// joined rows (norm calls after the two streams' projections are joined)
// while v is captured only per stream (each stream's value projection,
// joined inside the attention and never seen joined). The target is the
// text stream's rows of the result (the first 2 of 6); attention must
// explain it with v joined from the two projections, text first.
func TestValuesJoined(t *testing.T) {
	const text, image, heads, d = 2, 4, 2, 4
	rows, width := text+image, heads*d
	rng := rand.New(rand.NewPCG(17, 4))
	rnd := func(n int) []float32 {
		out := make([]float32, n)
		for i := range out {
			out[i] = float32(rng.NormFloat64())
		}
		return out
	}
	f := precision.F32
	q := &val{shape: []int{1, rows, width}, data: rnd(rows * width), format: f, origin: "q norm/out"}
	k := &val{shape: []int{1, rows, width}, data: rnd(rows * width), format: f, origin: "k norm/out"}
	vText := &val{shape: []int{1, text, width}, data: rnd(text * width), format: f, origin: "text v/out", fit: &leafFit{kind: "linear"}}
	vImage := &val{shape: []int{1, image, width}, data: rnd(image * width), format: f, origin: "image v/out", fit: &leafFit{kind: "linear"}}
	s0, _ := testSearch(nil, f)
	v := s0.derive(&expr{op: program.OpConcat, attrs: program.Attrs{Axis: 1}, args: []*val{vText, vImage}, out: f})
	full, err := s0.ev.run(&expr{op: program.OpAttention, attrs: program.Attrs{Attention: exec.AttentionParams{Heads: heads, KVHeads: heads}}, args: []*val{q, k, v, nil, nil, nil}, out: f})
	if err != nil {
		t.Fatal(err)
	}
	s, sc, target := planted(t, f, []int{1, text, width}, full.data[:text*width])
	for _, x := range []*val{vImage, vText, q, k} {
		sc.add(x, true)
	}
	if got := s.valuesJoined(sc, []*val{k, q}, width); len(got) == 0 {
		t.Fatal("valuesJoined made no triple")
	}
	got := s.attention(target, sc)
	if got == nil {
		t.Fatal("not explained")
	}
	if e := relRMS(f, got.data, target.data); e > tolerance(f) {
		t.Errorf("rel-RMS %.3g", e)
	}
}
