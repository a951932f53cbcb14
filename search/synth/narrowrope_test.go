package synth

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/precision"
)

// TestNarrowRopeInputs: in a bf16 run whose q/k norms run in f32, the
// forward casts q and k to bf16 before rotating them (MAGI-1:
// norm_q(q.float()).to(dtype), then RoPE). A choice that rotates the f32
// norm outputs comes within bf16's tolerance of the attention; the one
// with the cast reproduces it bit for bit, and that is the one kept.
func TestNarrowRopeInputs(t *testing.T) {
	const s, d = 8, 4 // one head
	rng := rand.New(rand.NewPCG(4, 2))
	xq, xk := randVal(rng, 1, s, d), randVal(rng, 1, s, d) // f32: the norms' outputs
	v := roundedVal(randVal(rng, 1, s, d), precision.BF16)
	cos, sin := &val{shape: []int{s, d}, format: precision.F32}, &val{shape: []int{s, d}, format: precision.F32}
	for p := range s {
		for i := range d {
			a := float64(p) * math.Pow(100, -float64(i%(d/2))/float64(d/2))
			cos.data = append(cos.data, float32(math.Cos(a)))
			sin.data = append(sin.data, float32(math.Sin(a)))
		}
	}
	// the reference: q, k rounded to bf16, rotated (half layout) in f32,
	// attention in f32, its output rounded to bf16
	rot := func(x *val) []float32 {
		out := make([]float32, s*d)
		for p := range s {
			for i := range d {
				xi := precision.BF16.Round(x.data[p*d+i])
				pair := precision.BF16.Round(x.data[p*d+(i+d/2)%d])
				if i < d/2 {
					pair = -pair
				}
				out[p*d+i] = xi*cos.data[p*d+i] + pair*sin.data[p*d+i]
			}
		}
		return out
	}
	q, k := rot(xq), rot(xk)
	want := make([]float32, s*d)
	at := func(x []float32) func(r, c int) float64 { return func(r, c int) float64 { return float64(x[r*d+c]) } }
	plantedAttention(s, d, at(q), at(k), at(v.data), func(r, c int, y float64) { want[r*d+c] = float32(y) })
	sy, _, target := planted(t, precision.BF16, []int{1, s, d}, want, xq, xk, v)
	tb := [2]*val{cos, sin}
	ch := attnChoice{q: sy.rotate(xq, tb, exec.RopeHalf, 1, d), k: sy.rotate(xk, tb, exec.RopeHalf, 1, d), v: v, headDim: d, rope: exec.RopeHalf,
		params: exec.AttentionParams{Heads: 1, KVHeads: 1}}
	e := &expr{op: program.OpAttention, attrs: program.Attrs{Attention: ch.params}, args: []*val{ch.q, ch.k, ch.v, nil, nil, nil}, out: target.format}
	ch.result, ch.score = sy.ev.score(e, target)
	if ch.result == nil || ch.score > tolerance(precision.BF16) {
		t.Fatalf("the f32 operands' attention is off by %.3g: the test shows nothing", ch.score)
	}
	before := exactShare(ch.result.data, target.data)
	if before == 1 {
		t.Fatal("the f32 operands reproduce every entry: the test shows nothing")
	}
	sy.narrowRopeInputs(&ch, target)
	if got := exactShare(ch.result.data, target.data); got != 1 {
		t.Errorf("bit-exact share %.3g (before %.3g), want 1", got, before)
	}
}
