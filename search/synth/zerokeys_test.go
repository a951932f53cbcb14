package synth

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/cpu"
	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/precision"
)

// TestZeroKeys: the target is attention over q, k and v each padded with
// 96 zero rows (32 rows up to a block of 128) and attended with no mask,
// the padding rows' results dropped: every softmax counts 96 keys of
// score 0 and value 0. The plain attention of the same operands misses it
// by a per-row factor; zeroKeys must fit the count, 96, and explain the
// target within the f32 tolerance with it.
func TestZeroKeys(t *testing.T) {
	f := precision.F32
	s := &synth{ev: &evaluator{b: cpu.New(1)}, em: newEmitter(f)}
	r := rand.New(rand.NewPCG(5, 23))
	const rows, pad, heads, d = 32, 96, 2, 16
	rnd := func() *val {
		v := &val{shape: []int{1, rows, heads * d}, data: make([]float32, rows*heads*d), format: f}
		for i := range v.data {
			v.data[i] = float32(r.NormFloat64())
		}
		return v
	}
	padded := func(x *val) *val {
		return &val{shape: []int{1, rows + pad, heads * d}, data: append(append([]float32{}, x.data...), make([]float32, pad*heads*d)...), format: f}
	}
	q, k, v := rnd(), rnd(), rnd()
	params := exec.AttentionParams{Heads: heads, KVHeads: heads}
	run := func(q, k, v *val) *val {
		out, err := s.ev.run(&expr{op: program.OpAttention, attrs: program.Attrs{Attention: params}, args: []*val{q, k, v, nil, nil, nil}, out: f})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	full := run(padded(q), padded(k), padded(v))
	target := &val{shape: []int{1, rows, heads * d}, data: full.data[:rows*heads*d], format: f, origin: "planted/out"}
	plain := attnChoice{q: q, k: k, v: v, headDim: d, params: params, label: "plain"}
	plain.score = relRMS(f, run(q, k, v).data, target.data)
	if plain.score < 0.1 {
		t.Fatalf("the plain attention misses the padded one by only %.3g: the case does not test what it says", plain.score)
	}
	var got []attnChoice
	s.zeroKeys([]attnChoice{plain}, target, func(ch attnChoice) {
		e := &expr{op: program.OpAttention, attrs: program.Attrs{Attention: ch.params}, args: []*val{ch.q, ch.k, ch.v, nil, nil, ch.sinks}, out: f}
		_, ch.score = s.ev.score(e, target)
		got = append(got, ch)
	})
	if len(got) != 1 {
		t.Fatalf("zeroKeys tried %d choices, want 1", len(got))
	}
	if !strings.HasSuffix(got[0].label, " zero_keys=96") {
		t.Errorf("fitted %q, want 96 zero keys", got[0].label)
	}
	if got[0].score > tolerance(f) {
		t.Errorf("with the fitted zero keys the attention misses by %.3g (tolerance %.3g)", got[0].score, tolerance(f))
	}
	if got[0].sinks == nil || got[0].sinks.name == "" {
		t.Errorf("the sink logits are not a constant of the program")
	}
	// an output with no padding keys fits no count: nothing is tried
	got = nil
	exact := attnChoice{q: q, k: k, v: v, headDim: d, params: params, label: "plain", score: 0}
	s.zeroKeys([]attnChoice{exact}, run(q, k, v), func(ch attnChoice) { got = append(got, ch) })
	if len(got) != 0 {
		t.Errorf("an attention without padding keys was given %q", got[0].label)
	}
}
