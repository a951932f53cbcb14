package synth

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/cpu"
	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/precision"
	"github.com/zflow/zflow/trace"
)

// randVal is a value of shape with normal entries.
func randVal(rng *rand.Rand, shape ...int) *val {
	v := &val{shape: shape, data: make([]float32, exec.Numel(shape)), format: precision.F32}
	for i := range v.data {
		v.data[i] = float32(rng.NormFloat64())
	}
	return v
}

// TestEmptyRowsZeroed: attention under a padding mask made pairwise
// (m_i·m_j, as HunyuanVideo 1.5's caption refiner and joint attention
// build it) leaves each padded query no key; torch ≥ 2.5's SDPA gives such
// a row 0. The form reproduces the host's masked softmax with those rows
// 0, and declines a mask every row of which holds a key.
func TestEmptyRowsZeroed(t *testing.T) {
	const S, H, D = 6, 2, 4
	rng := rand.New(rand.NewPCG(8, 2))
	q, k, v := randVal(rng, 1, S, H*D), randVal(rng, 1, S, H*D), randVal(rng, 1, S, H*D)
	valid := []bool{true, true, true, true, false, false}
	mask := &val{shape: []int{1, S, S}, data: make([]float32, S*S), format: precision.F32}
	for i := range S {
		for j := range S {
			if valid[i] && valid[j] {
				mask.data[i*S+j] = 1
			}
		}
	}
	want := &val{shape: []int{1, S, H * D}, data: make([]float32, S*H*D), format: precision.F32}
	for i := range S {
		if !valid[i] {
			continue // no key: 0
		}
		for h := range H {
			w := make([]float64, S)
			var mx, sum float64 = math.Inf(-1), 0
			for j := range S {
				if !valid[j] {
					continue
				}
				var dot float64
				for e := range D {
					dot += float64(q.data[i*H*D+h*D+e]) * float64(k.data[j*H*D+h*D+e])
				}
				w[j] = dot / math.Sqrt(D)
				mx = max(mx, w[j])
			}
			for j := range S {
				if valid[j] {
					w[j] = math.Exp(w[j] - mx)
					sum += w[j]
				}
			}
			for e := range D {
				var acc float64
				for j := range S {
					if valid[j] {
						acc += w[j] / sum * float64(v.data[j*H*D+h*D+e])
					}
				}
				want.data[i*H*D+h*D+e] = float32(acc)
			}
		}
	}
	s := &synth{ev: &evaluator{b: cpu.New(1)}, em: newEmitter(precision.F32)}
	ch := attnChoice{q: q, k: k, v: v, headDim: D, params: exec.AttentionParams{Heads: H, KVHeads: H}, score: math.Inf(1)}
	if !s.emptyRowsZeroed(&ch, want, []*val{mask}) {
		t.Fatal("the pairwise mask's empty rows were not read as zeros")
	}
	if ch.score > 1e-6 || ch.params.Mask != exec.MaskExplicit {
		t.Errorf("score %g, mask %v: want ≤ 1e-6 under the explicit mask", ch.score, ch.params.Mask)
	}
	for i := 4 * H * D; i < S*H*D; i++ {
		if ch.result.data[i] != 0 {
			t.Fatalf("padded query's result %g at %d, want 0", ch.result.data[i], i)
		}
	}
	// a key mask made [B, Sq, Sk] (every query has a key): not this form's
	keyOnly := &val{shape: []int{1, S, S}, data: make([]float32, S*S), format: precision.F32}
	for i := range S {
		for j := range S {
			if valid[j] {
				keyOnly.data[i*S+j] = 1
			}
		}
	}
	c2 := attnChoice{q: q, k: k, v: v, headDim: D, params: exec.AttentionParams{Heads: H, KVHeads: H}, score: math.Inf(1)}
	if s.emptyRowsZeroed(&c2, want, []*val{keyOnly}) {
		t.Error("a mask with a key in every row was taken")
	}
}

// oneStepTrace is an empty trace of one step (everyStep has nothing more
// to check).
func oneStepTrace(t *testing.T) *trace.Trace {
	t.Helper()
	path := filepath.Join(t.TempDir(), "one.npz")
	w, err := trace.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 4)
	binary.LittleEndian.PutUint32(b, math.Float32bits(1))
	for _, key := range []string{"input/x", "output/y", "s0/m/arg0", "s0/m/out"} {
		if err := w.Add(key, trace.Float32, []int{1}, b); err != nil {
			t.Fatal(err)
		}
	}
	step := 0
	m := &trace.Manifest{Format: "zflow-trace", Version: 1, Producer: map[string]any{"framework": "test", "dtype": "float32"},
		Inputs: map[string]string{"x": "input/x"}, Outputs: map[string]string{"y": "output/y"},
		Calls: []trace.Call{{ID: 0, Step: &step, Module: "m", Type: "M", Tensors: trace.Ports{{Name: "arg0", Key: "s0/m/arg0"}, {Name: "out", Key: "s0/m/out"}}}}}
	if err := w.Close(m); err != nil {
		t.Fatal(err)
	}
	tr, err := trace.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	return tr
}

// TestLeadingSumPiece: a caption joined from conditions, each its valid
// rows of the sum of its projection and its kind's embedding (HunyuanVideo
// 1.5's [glyph rows, MLLM rows, ...]): the piece at each offset is the
// leading part of the right sum, as many rows as match; a piece that is a
// whole sum, or no sum, is not this form's.
func TestLeadingSumPiece(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 3))
	a, ka := randVal(rng, 1, 4, 8), randVal(rng, 1, 4, 8)
	b, kb := randVal(rng, 1, 6, 8), randVal(rng, 1, 6, 8)
	sum := func(x, y *val, n int) []float32 {
		out := make([]float32, n*8)
		for i := range out {
			out[i] = x.data[i] + y.data[i]
		}
		return out
	}
	tail := randVal(rng, 1, 2, 8)
	tv := &val{shape: []int{1, 3 + 4 + 2, 8}, format: precision.F32}
	tv.data = slices.Concat(sum(a, ka, 3), sum(b, kb, 4), tail.data)
	s := &synth{tr: oneStepTrace(t), ev: &evaluator{b: cpu.New(1)}, em: newEmitter(precision.F32)}
	vals := []*val{a, ka, b, kb, tail}
	p := s.leadingSumPiece(tv, 1, 0, vals)
	if p == nil || !slices.Equal(p.shape, []int{1, 3, 8}) || relRMS(precision.F32, p.data, sliceData(tv, 1, 0, 3)) > 0 {
		t.Fatalf("offset 0: %v, want the leading 3 rows of a + its kind's rows", p)
	}
	if p = s.leadingSumPiece(tv, 1, 3, vals); p == nil || !slices.Equal(p.shape, []int{1, 4, 8}) {
		t.Fatalf("offset 3: %v, want the leading 4 of 6 rows of b + its kind's rows", p)
	}
	if p = s.leadingSumPiece(tv, 1, 7, vals); p != nil {
		t.Errorf("offset 7 (no sum): %v", p.shape)
	}
	whole := &val{shape: []int{1, 4, 8}, data: sum(a, ka, 4), format: precision.F32}
	if p = s.leadingSumPiece(whole, 1, 0, vals); p != nil {
		t.Errorf("a whole sum was taken as a leading part: %v", p.shape)
	}
}

// TestRankUnderPairwiseMask: a caption's padding mask made pairwise with
// its first key kept for every query (HunyuanVideo's and Step1X-Edit's
// token refiners: the padded queries attend to token 0 alone) moves the
// right operands' score from far off to exact. Ranked under the masks
// the scope holds, they come first among choices that scored better
// without it, so the refinement's few slots reach them.
func TestRankUnderPairwiseMask(t *testing.T) {
	const S, H, D = 5, 2, 4
	rng := rand.New(rand.NewPCG(45, 3))
	q, k, v := randVal(rng, 1, S, H*D), randVal(rng, 1, S, H*D), randVal(rng, 1, S, H*D)
	valid := []bool{true, true, true, false, false}
	mask := &val{shape: []int{1, 1, S, S}, data: make([]float32, S*S), format: precision.F32}
	for i := range S {
		for j := range S {
			if valid[i] && valid[j] || j == 0 {
				mask.data[i*S+j] = 1
			}
		}
	}
	s, sc := testSearch(nil, precision.F32)
	sc.add(mask, false)
	p := exec.AttentionParams{Heads: H, KVHeads: H, Mask: exec.MaskExplicit}
	want, err := s.ev.run(&expr{op: program.OpAttention, attrs: program.Attrs{Attention: p}, args: []*val{q, k, v, s.reshape(mask, []int{1, S, S}), nil, nil}, out: precision.F32})
	if err != nil {
		t.Fatal(err)
	}
	right := attnChoice{q: q, k: k, v: v, headDim: D, params: exec.AttentionParams{Heads: H, KVHeads: H}, score: 0.9, label: "right"}
	all := []attnChoice{}
	for i := range 8 { // decoys the first stage, without the mask, ranked better
		all = append(all, attnChoice{q: q, k: k, v: randVal(rng, 1, S, H*D), headDim: D, params: right.params, score: 0.5 + float64(i)/100, label: "decoy"})
	}
	all = append(all, right)
	s.rankUnderMasks(all, want, sc)
	if all[0].label != "right" {
		t.Errorf("first after ranking: %s; want the right operands, exact under the mask", all[0].label)
	}
}

// TestPerSampleKeyBias: cross-attention of a batch of two samples, two
// heads, under a padding mask made additive per sample ([B, 1, Sk]:
// (1 − m)·−10000, the second sample's caption shorter), as diffusers hands
// encoder_attention_mask to its processors. The attention op reads a
// rank-3 bias as [B·H, …]; the search offers the bias with a heads axis
// ([B, 1, 1, Sk]) too, and explains the target with it.
func TestPerSampleKeyBias(t *testing.T) {
	const B, Sq, Sk, H, D = 2, 5, 4, 2, 4
	rng := rand.New(rand.NewPCG(45, 4))
	q, k, v := randVal(rng, B, Sq, H*D), randVal(rng, B, Sk, H*D), randVal(rng, B, Sk, H*D)
	bias := &val{shape: []int{B, 1, Sk}, data: []float32{0, 0, 0, 0, 0, 0, -10000, -10000}, format: precision.F32}
	s0, _ := testSearch(nil, precision.F32)
	p := exec.AttentionParams{Heads: H, KVHeads: H}
	want, err := s0.ev.run(&expr{op: program.OpAttention, attrs: program.Attrs{Attention: p}, args: []*val{q, k, v, nil, s0.reshape(bias, []int{B, 1, 1, Sk}), nil}, out: precision.F32})
	if err != nil {
		t.Fatal(err)
	}
	for i, x := range []*val{q, k, v} {
		x.origin, x.fit, x.seq = []string{"to_q/out", "to_k/out", "to_v/out"}[i], &leafFit{kind: "linear"}, i+1
	}
	bias.origin = "attention_mask"
	s, sc, target := planted(t, precision.F32, want.shape, want.data, bias)
	for _, x := range []*val{q, k, v} {
		sc.add(x, true)
	}
	got := s.attention(target, sc)
	if got == nil {
		t.Fatal("attention under a per-sample key bias not explained")
	}
	if e := errOf(got, target); e > 1e-6 {
		t.Errorf("rel-RMS %.3g", e)
	}
}
