package synth

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/cpu"
	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/precision"
)

// TestRefineFitsAmongManyVariants: refine probes every variant (each bias
// of the scope, ALiBi or not, a window or not, the mask or not) coarsely
// and fits only the best few. The target is causal attention with a
// sliding window of 7 and a scale of 1.3/√d, beside three biases that do
// not belong to it; from the plain causal choice, refine must find the
// window and the scale, and no bias, no ALiBi, no cap. (A scale and a cap
// together trade off along a valley that refine's coordinate descent does
// not follow to the f32 tolerance, before and after the probe.)
func TestRefineFitsAmongManyVariants(t *testing.T) {
	f := precision.F32
	s := &synth{ev: &evaluator{b: cpu.New(1)}, em: newEmitter(f)}
	r := rand.New(rand.NewPCG(3, 9))
	rnd := func(scale float64, shape ...int) *val {
		v := &val{shape: shape, data: make([]float32, exec.Numel(shape)), format: f}
		for i := range v.data {
			v.data[i] = float32(scale * r.NormFloat64())
		}
		return v
	}
	const sq, heads, d = 40, 2, 16
	q, k, v := rnd(2, 1, sq, heads*d), rnd(2, 1, sq, heads*d), rnd(1, 1, sq, heads*d)
	truth := exec.AttentionParams{Heads: heads, KVHeads: heads, Mask: exec.MaskCausal, Window: 7, Scale: float32(1.3 / math.Sqrt(d))}
	run := func(p exec.AttentionParams, bias *val) *val {
		out, err := s.ev.run(&expr{op: program.OpAttention, attrs: program.Attrs{Attention: p}, args: []*val{q, k, v, nil, bias, nil}, out: f})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	target := run(truth, nil)
	plainParams := exec.AttentionParams{Heads: heads, KVHeads: heads, Mask: exec.MaskCausal}
	plain := run(plainParams, nil)
	ch := attnChoice{q: q, k: k, v: v, headDim: d, params: plainParams, score: relRMS(f, plain.data, target.data), result: plain}
	if ch.score < 0.05 {
		t.Fatalf("the plain choice misses by only %.3g: the case does not test what it says", ch.score)
	}
	decoys := []*val{rnd(1, 1, heads, sq, sq), rnd(0.5, 1, heads, sq, sq), rnd(3, 1, heads, sq, sq)}
	s.refine(&ch, target, decoys, nil)
	if ch.score > tolerance(f) {
		t.Fatalf("refine reached %.3g (tolerance %.3g): %s", ch.score, tolerance(f), ch.label)
	}
	if ch.params.Window != truth.Window || ch.bias != nil || ch.params.ALiBi {
		t.Errorf("refine kept window %d, bias %v, ALiBi %v; want window 7, no bias, no ALiBi (%s)", ch.params.Window, ch.bias != nil, ch.params.ALiBi, ch.label)
	}
	if ch.params.Softcap != 0 || math.Abs(float64(ch.params.Scale/truth.Scale)-1) > 0.01 {
		t.Errorf("refine fitted scale %g and cap %g; want %g and none", ch.params.Scale, ch.params.Softcap, truth.Scale)
	}
}

// TestWindowGrid: every width up to 8, then steps of at most ×1.25 up to
// the keys' count, so that the window search's neighbours of any width
// are a few widths apart.
func TestWindowGrid(t *testing.T) {
	for _, n := range []int{2, 9, 128, 4096} {
		g := windowGrid(n)
		if g[0] != 1 || g[len(g)-1] >= n {
			t.Errorf("windowGrid(%d) = %v: must start at 1 and stay below %d", n, g, n)
			continue
		}
		for i := 1; i < len(g); i++ {
			if g[i] <= g[i-1] || g[i] > 8 && float64(g[i]) > 1.25*float64(g[i-1])+1 || g[i] <= 8 && g[i] != g[i-1]+1 {
				t.Errorf("windowGrid(%d): step %d → %d", n, g[i-1], g[i])
			}
		}
		if len(g) > 8+int(math.Log(float64(n))/math.Log(1.2)) {
			t.Errorf("windowGrid(%d) has %d widths: not geometric", n, len(g))
		}
	}
}

// TestZeroKeysRankUpToRowScale: zero keys shrink each row of each head by
// its own factor, so the right operands can score worse than wrong ones
// as plain attention; bestUpToRowScale must rank them first.
func TestZeroKeysRankUpToRowScale(t *testing.T) {
	f := precision.F32
	r := rand.New(rand.NewPCG(8, 1))
	const rows, heads, d = 16, 2, 8
	target := &val{shape: []int{1, rows, heads * d}, data: make([]float32, rows*heads*d), format: f}
	right := &val{shape: target.shape, data: make([]float32, len(target.data)), format: f}
	wrong := &val{shape: target.shape, data: make([]float32, len(target.data)), format: f}
	for i := range right.data {
		right.data[i] = float32(r.NormFloat64())
		// each row of each head shrunk by its own factor
		target.data[i] = right.data[i] * float32(0.1+0.05*float64(i/d%5))
		wrong.data[i] = target.data[i] + float32(0.05*r.NormFloat64())
	}
	p := exec.AttentionParams{Heads: heads, KVHeads: heads}
	all := []attnChoice{
		{label: "wrong", params: p, result: wrong, score: relRMS(f, wrong.data, target.data)},
		{label: "right", params: p, result: right, score: relRMS(f, right.data, target.data)},
	}
	if all[1].score < all[0].score {
		t.Fatalf("the right operands already score best (%.3g < %.3g): the case does not test what it says", all[1].score, all[0].score)
	}
	if got := bestUpToRowScale(all, target, 1); len(got) != 1 || got[0].label != "right" {
		t.Errorf("bestUpToRowScale ranked %v first, want the right operands", got)
	}
}

// TestRefineFindsBlocks: block-local attention after global keys (the
// keys past the queries' count, seen by every query), from the plain
// unmasked choice: refine must find the block size, short and long (a
// long target's candidates are scored at a sample of its rows, each at
// its own position, and the winner on every row).
func TestRefineFindsBlocks(t *testing.T) {
	f := precision.F32
	for _, c := range []struct{ sq, global, block int }{{40, 3, 8}, {320, 4, 64}} {
		s := &synth{ev: &evaluator{b: cpu.New(1)}, em: newEmitter(f)}
		r := rand.New(rand.NewPCG(5, uint64(c.sq)))
		rnd := func(shape ...int) *val {
			v := &val{shape: shape, data: make([]float32, exec.Numel(shape)), format: f}
			for i := range v.data {
				v.data[i] = float32(2 * r.NormFloat64())
			}
			return v
		}
		const heads, d = 2, 8
		q, k, v := rnd(1, c.sq, heads*d), rnd(1, c.global+c.sq, heads*d), rnd(1, c.global+c.sq, heads*d)
		run := func(p exec.AttentionParams) *val {
			out, err := s.ev.run(&expr{op: program.OpAttention, attrs: program.Attrs{Attention: p}, args: []*val{q, k, v, nil, nil, nil}, out: f})
			if err != nil {
				t.Fatal(err)
			}
			return out
		}
		plainParams := exec.AttentionParams{Heads: heads, KVHeads: heads}
		truth := plainParams
		truth.Block = c.block
		target, plain := run(truth), run(plainParams)
		ch := attnChoice{q: q, k: k, v: v, headDim: d, params: plainParams, score: relRMS(f, plain.data, target.data), result: plain}
		if ch.score < 0.05 {
			t.Fatalf("%d rows: the plain choice misses by only %.3g", c.sq, ch.score)
		}
		s.refine(&ch, target, nil, nil)
		if ch.params.Block != c.block || ch.score > tolerance(f) {
			t.Errorf("%d rows: refine found block %d at %.3g (want %d within %.3g): %s", c.sq, ch.params.Block, ch.score, c.block, tolerance(f), ch.label)
		}
		if want := relRMS(f, ch.result.data, target.data); want != ch.score {
			t.Errorf("%d rows: the choice's score %.3g is not its result's on every row, %.3g", c.sq, ch.score, want)
		}
	}
}
