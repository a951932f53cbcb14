package cpu

import (
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/precision"
)

// Hand-computed answers for attention's window, soft-cap, ALiBi and bias.
// Most cases use D = 1 and q = 0 (or scale 1), so that the scores are what
// the case puts in by hand and the output is a softmax-weighted mean of v.

func sigmoid(x float64) float64 { return 1 / (1 + math.Exp(-x)) }

func TestAttentionWindow(t *testing.T) {
	bk := New(2)
	// q = 0: every visible key weighs the same; v = 1, 2, 4, 8 by key.
	q := up(t, bk, f32, []int{1, 4, 1}, 0, 0, 0, 0)
	k := up(t, bk, f32, []int{1, 4, 1}, 1, 1, 1, 1)
	v := up(t, bk, f32, []int{1, 4, 1}, 1, 2, 4, 8)
	cases := []struct {
		window int
		want   []float64
	}{
		{0, []float64{1, 1.5, 7.0 / 3, 15.0 / 4}}, // causal
		{1, []float64{1, 2, 4, 8}},                // each query sees itself
		{2, []float64{1, 1.5, 3, 6}},              // i−2 < j ≤ i
		{3, []float64{1, 1.5, 7.0 / 3, 14.0 / 3}},
		{4, []float64{1, 1.5, 7.0 / 3, 15.0 / 4}}, // as wide as the sequence: causal
	}
	for _, c := range cases {
		p := exec.AttentionParams{Heads: 1, Mask: exec.MaskCausal, Window: c.window}
		y, err := bk.Attention(q, k, v, nil, nil, nil, p, exec.Out(f32))
		near(t, "window "+string(rune('0'+c.window)), values(t, bk, y, err), c.want, 3e-7)
	}
	// Without a causal mask the window is a band: |i − j| < window.
	bands := []struct {
		window int
		want   []float64
	}{
		{1, []float64{1, 2, 4, 8}},                             // each query sees itself
		{2, []float64{1.5, 7.0 / 3, 14.0 / 3, 6}},              // i−1 ≤ j ≤ i+1
		{3, []float64{7.0 / 3, 15.0 / 4, 15.0 / 4, 14.0 / 3}},  // i−2 ≤ j ≤ i+2
		{4, []float64{15.0 / 4, 15.0 / 4, 15.0 / 4, 15.0 / 4}}, // every key
	}
	for _, c := range bands {
		p := exec.AttentionParams{Heads: 1, Window: c.window}
		y, err := bk.Attention(q, k, v, nil, nil, nil, p, exec.Out(f32))
		near(t, "band "+string(rune('0'+c.window)), values(t, bk, y, err), c.want, 3e-7)
	}
	// An explicit mask takes no window.
	mt := up(t, bk, f32, []int{1, 4, 4}, make([]float32, 16)...)
	if _, err := bk.Attention(q, k, v, mt, nil, nil, exec.AttentionParams{Heads: 1, Mask: exec.MaskExplicit, Window: 2}, exec.Out(f32)); !errors.Is(err, exec.ErrUnsupported) {
		t.Errorf("window on an explicit mask: %v, want ErrUnsupported", err)
	}
}

// Blocks: the keys past the queries' count first, seen by every query,
// then the queries' own block of the rest.
func TestAttentionBlock(t *testing.T) {
	bk := New(2)
	q := up(t, bk, f32, []int{1, 4, 1}, 0, 0, 0, 0)
	cases := []struct {
		name  string
		block int
		kv    []float32 // v by key (k = 1 throughout)
		want  []float64
	}{
		{"blocks of 2, no prefix", 2, []float32{1, 2, 4, 8}, []float64{1.5, 1.5, 6, 6}},
		{"blocks of 1, no prefix", 1, []float32{1, 2, 4, 8}, []float64{1, 2, 4, 8}},
		{"blocks of 4: every key", 4, []float32{1, 2, 4, 8}, []float64{15.0 / 4, 15.0 / 4, 15.0 / 4, 15.0 / 4}},
		// one global key (16) first, seen by every block
		{"blocks of 2 after a global key", 2, []float32{16, 1, 2, 4, 8}, []float64{19.0 / 3, 19.0 / 3, 28.0 / 3, 28.0 / 3}},
	}
	for _, c := range cases {
		n := len(c.kv)
		ones := make([]float32, n)
		for i := range ones {
			ones[i] = 1
		}
		k := up(t, bk, f32, []int{1, n, 1}, ones...)
		v := up(t, bk, f32, []int{1, n, 1}, c.kv...)
		y, err := bk.Attention(q, k, v, nil, nil, nil, exec.AttentionParams{Heads: 1, Block: c.block}, exec.Out(f32))
		near(t, c.name, values(t, bk, y, err), c.want, 3e-7)
	}
	k := up(t, bk, f32, []int{1, 2, 1}, 1, 1)
	if _, err := bk.Attention(q, k, k, nil, nil, nil, exec.AttentionParams{Heads: 1, Block: 2}, exec.Out(f32)); err == nil {
		t.Error("blocks over fewer keys than queries: no error")
	}
	if _, err := bk.Attention(q, q, q, nil, nil, nil, exec.AttentionParams{Heads: 1, Mask: exec.MaskCausal, Block: 2}, exec.Out(f32)); !errors.Is(err, exec.ErrUnsupported) {
		t.Errorf("blocks on a causal mask: %v, want ErrUnsupported", err)
	}
}

func TestAttentionSoftcap(t *testing.T) {
	bk := New(2)
	// Scale 1, q = 1: the scores are k, here 10 and 0; v = 1, 0 picks p0.
	q := up(t, bk, f32, []int{1, 1, 1}, 1)
	k := up(t, bk, f32, []int{1, 2, 1}, 10, 0)
	v := up(t, bk, f32, []int{1, 2, 1}, 1, 0)
	bias := up(t, bk, f32, []int{1, 1, 1, 2}, 0, 5)
	cases := []struct {
		name string
		cap  float32
		bias exec.Tensor
		want float64
	}{
		{"uncapped", 0, nil, sigmoid(10)},
		{"cap 5", 5, nil, sigmoid(5 * math.Tanh(2))},
		{"cap 50", 50, nil, sigmoid(50 * math.Tanh(0.2))},
		// The cap comes before the bias: 1·tanh(10) vs 0 + 5, not tanh(10 − 5).
		{"cap 1, then bias", 1, bias, sigmoid(math.Tanh(10) - 5)},
	}
	for _, c := range cases {
		p := exec.AttentionParams{Heads: 1, Scale: 1, Softcap: c.cap}
		y, err := bk.Attention(q, k, v, nil, c.bias, nil, p, exec.Out(f32))
		near(t, c.name, values(t, bk, y, err), []float64{c.want}, 3e-7)
	}
	if _, err := bk.Attention(q, k, v, nil, nil, nil, exec.AttentionParams{Heads: 1, Softcap: -1}, exec.Out(f32)); err == nil {
		t.Error("a negative cap accepted")
	}
	// RoundEach rounds s/c, tanh and c·tanh separately (eager attention on
	// bf16 tensors). Keys of scores −2.75 and 0, cap 3, v = 1, 0: y = p0 =
	// σ(capped score). Rounded at each step, −2.75/3 → −0.916015625, tanh →
	// −0.7265625, ·3 → −2.1875 and y = 0.10107421875; leaving out any one of
	// the three roundings gives −2.171875 or −2.1796875 and another y.
	s3 := func(s exec.Spec) float64 {
		y, err := bk.Attention(up(t, bk, bf16, []int{1, 1, 1}, 1), up(t, bk, bf16, []int{1, 2, 1}, -2.75, 0), v, nil, nil, nil,
			exec.AttentionParams{Heads: 1, Scale: 1, Softcap: 3}, s)
		return float64(values(t, bk, y, err)[0])
	}
	r := func(x float64) float64 { return float64(precision.RoundBF16(float32(x))) }
	if got, want := s3(exec.Composed(bf16)), 0.10107421875; got != want {
		t.Errorf("cap under RoundEach: %v, want %v", got, want)
	}
	if got, want := s3(exec.Out(bf16)), r(sigmoid(3*math.Tanh(-2.75/3))); got != want {
		t.Errorf("cap in f32: %v, want %v", got, want)
	}
}

func TestAttentionALiBi(t *testing.T) {
	bk := New(2)
	// 4 heads of D = 1, q = 0: head h's scores are slope_h·j, j = 0, 1, 2;
	// v = 0, 1, 2, so the output is the softmax mean of j.
	const sk = 3
	q := up(t, bk, f32, []int{1, 1, 4}, 0, 0, 0, 0)
	k := up(t, bk, f32, []int{1, sk, 4}, make([]float32, sk*4)...)
	v := up(t, bk, f32, []int{1, sk, 4}, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2)
	mean := func(slope float64, bias [sk]float64) float64 {
		var num, den float64
		for j := range sk {
			e := math.Exp(slope*float64(j) + bias[j])
			num += float64(j) * e
			den += e
		}
		return num / den
	}
	want := make([]float64, 4)
	for h, slope := range []float64{0.25, 0.0625, 0.015625, 0.00390625} {
		want[h] = mean(slope, [sk]float64{})
	}
	p := exec.AttentionParams{Heads: 4, ALiBi: true}
	y, err := bk.Attention(q, k, v, nil, nil, nil, p, exec.Out(f32))
	near(t, "alibi 4 heads", values(t, bk, y, err), want, 3e-7)
	// With a bias on top: [1, 1, 1, Sk] adds −j to every head.
	bias := up(t, bk, f32, []int{1, 1, 1, sk}, 0, -1, -2)
	for h, slope := range []float64{0.25, 0.0625, 0.015625, 0.00390625} {
		want[h] = mean(slope, [sk]float64{0, -1, -2})
	}
	y, err = bk.Attention(q, k, v, nil, bias, nil, p, exec.Out(f32))
	near(t, "alibi + bias", values(t, bk, y, err), want, 3e-7)
	// Causal: query 0 sees key 0 only, whatever the bias.
	y, err = bk.Attention(q, k, v, nil, nil, nil, exec.AttentionParams{Heads: 4, ALiBi: true, Mask: exec.MaskCausal}, exec.Out(f32))
	near(t, "alibi causal", values(t, bk, y, err), []float64{0, 0, 0, 0}, 0)
}

// TestAttentionALiBiRounding: the ALiBi bias is rounded to q's format, and
// RoundScores rounds the biased score once (baddbmm), RoundEach after the
// scale and again after the add.
func TestAttentionALiBiRounding(t *testing.T) {
	bk := New(2)
	// 12 heads, D = 1, q = 0: the scores are the bias alone. Head 11's
	// slope is 0x3db504f2 ≈ 0.0884; at key 11 f32(slope·11) ≈ 0.97227
	// rounds to 0.97265625 in bf16.
	const h, sk = 12, 12
	v := make([]float32, sk*h)
	for j := range sk {
		for hh := range h {
			if j == sk-1 {
				v[j*h+hh] = 1 // the output is p(last key)
			}
		}
	}
	slope := float64(math.Float32frombits(0x3db504f2))
	pLast := func(bias func(j int) float64) float64 {
		var den float64
		for j := range sk {
			den += math.Exp(bias(j))
		}
		return math.Exp(bias(sk-1)) / den
	}
	for _, f := range []precision.Format{f32, bf16} {
		q := up(t, bk, f, []int{1, 1, h}, make([]float32, h)...)
		k := up(t, bk, f, []int{1, sk, h}, make([]float32, sk*h)...)
		vt := up(t, bk, f, []int{1, sk, h}, v...)
		y, err := bk.Attention(q, k, vt, nil, nil, nil, exec.AttentionParams{Heads: h, ALiBi: true}, exec.Out(f32))
		got := values(t, bk, y, err)[h-1]
		want := pLast(func(j int) float64 {
			b := float32(float32(slope) * float32(j))
			return float64(f.Round(b))
		})
		if math.Abs(float64(got)-want) > 3e-7 {
			t.Errorf("alibi bias in %v: p(key 11) = %v, want %v", f, got, want)
		}
	}
	// One head (slope 2^-8), f32 q = 1, keys 0 and 1 + 2^-8, scale 1, v = 0, 1:
	// key 1's score is 1 + 2^-8 + alibi 2^-8. RoundScores: round(1 + 2^-7) =
	// 1 + 2^-7 and y = σ(1.0078125) → 0.734375; RoundEach: round(1 + 2^-8) = 1
	// (a tie, to even), + 2^-8 rounds to 1 again, and y = round(σ(1)) =
	// 0.73046875.
	q := up(t, bk, f32, []int{1, 1, 1}, 1)
	k := up(t, bk, f32, []int{1, 2, 1}, 0, 1+1.0/256)
	vv := up(t, bk, f32, []int{1, 2, 1}, 0, 1)
	p := exec.AttentionParams{Heads: 1, Scale: 1, ALiBi: true}
	for _, c := range []struct {
		s    exec.Spec
		want float32
	}{
		{exec.Out(bf16), 0.734375},
		{exec.Spec{Out: bf16, Round: exec.RoundScores}, 0.734375},
		{exec.Composed(bf16), 0.73046875},
	} {
		y, err := bk.Attention(q, k, vv, nil, nil, nil, p, c.s)
		same(t, "alibi "+c.s.String(), values(t, bk, y, err), []float32{c.want})
	}
}

func TestAttentionBiasBroadcast(t *testing.T) {
	bk := New(2)
	// B = 2, H = 2, Sq = 1, Sk = 2, D = 1, q = 0: y = softmax(bias)·v with
	// v = 0, 1 is σ(bias₁ − bias₀) for each (b, h).
	q := up(t, bk, f32, []int{2, 1, 2}, 0, 0, 0, 0)
	k := up(t, bk, f32, []int{2, 2, 2}, make([]float32, 8)...)
	v := up(t, bk, f32, []int{2, 2, 2}, 0, 0, 1, 1, 0, 0, 1, 1)
	cases := []struct {
		name  string
		shape []int
		data  []float32
		diff  [4]float64 // bias₁ − bias₀ for (b, h) = (0,0), (0,1), (1,0), (1,1)
	}{
		{"[B, H, Sq, Sk]", []int{2, 2, 1, 2}, []float32{0, 1, 0, 2, 0, 3, 0, 4}, [4]float64{1, 2, 3, 4}},
		{"[B, 1, 1, Sk]", []int{2, 1, 1, 2}, []float32{0, 1, 0, -1}, [4]float64{1, 1, -1, -1}},
		{"[1, H, 1, Sk]", []int{1, 2, 1, 2}, []float32{0, 1, 0, -1}, [4]float64{1, -1, 1, -1}},
		{"[Sk]", []int{2}, []float32{0.5, 0}, [4]float64{-0.5, -0.5, -0.5, -0.5}},
		{"[B·H, 1, Sk]", []int{4, 1, 2}, []float32{0, 1, 0, 2, 0, 3, 0, 4}, [4]float64{1, 2, 3, 4}},
		{"[1, Sq, Sk]", []int{1, 1, 2}, []float32{0, 2}, [4]float64{2, 2, 2, 2}},
		{"−inf hides a key", []int{2, 2, 1, 2}, []float32{0, float32(math.Inf(-1)), float32(math.Inf(-1)), 0, 0, 0, 0, 0},
			[4]float64{math.Inf(-1), math.Inf(1), 0, 0}},
	}
	for _, c := range cases {
		b := up(t, bk, f32, c.shape, c.data...)
		want := make([]float64, 4)
		for i, d := range c.diff {
			want[i] = sigmoid(d)
		}
		y, err := bk.Attention(q, k, v, nil, b, nil, exec.AttentionParams{Heads: 2}, exec.Out(f32))
		near(t, c.name, values(t, bk, y, err), want, 3e-7)
	}
	// A bf16 bias is read exactly: 1/3 in bf16 is 0.333984375.
	b := up(t, bk, bf16, []int{2}, 0, 1.0/3)
	y, err := bk.Attention(q, k, v, nil, b, nil, exec.AttentionParams{Heads: 2}, exec.Out(f32))
	s := sigmoid(0.333984375)
	near(t, "bf16 bias", values(t, bk, y, err), []float64{s, s, s, s}, 3e-7)
	for _, bad := range [][]int{{3, 1, 2}, {2, 3, 1, 2}, {1, 1, 2, 2}, {1, 1, 1, 1, 2}} {
		b := up(t, bk, f32, bad, make([]float32, exec.Numel(bad))...)
		if _, err := bk.Attention(q, k, v, nil, b, nil, exec.AttentionParams{Heads: 2}, exec.Out(f32)); err == nil {
			t.Errorf("bias %v accepted for [2 2 1 2]", bad)
		}
	}
}

// A sink is one more logit per head in each row's softmax whose
// probability weighs no value: with q = 0 every visible key scores 0, so
// key j weighs 1/(n + e^sink) for n visible keys, and the row's output is
// Σ v_j / (n + e^sink).
func TestAttentionSinks(t *testing.T) {
	bk := New(2)
	// two heads of width 1 over one kv head; v = 1, 2, 4, 8 by key
	q := up(t, bk, f32, []int{1, 4, 2}, make([]float32, 8)...)
	k := up(t, bk, f32, []int{1, 4, 1}, 1, 1, 1, 1)
	v := up(t, bk, f32, []int{1, 4, 1}, 1, 2, 4, 8)
	sinks := up(t, bk, f32, []int{2}, 0, float32(math.Log(3)))
	rows := func(window int, sink float64) []float64 {
		var out []float64
		for i := range 4 {
			var sum, n float64
			for j := 0; j <= i; j++ {
				if window > 0 && j <= i-window {
					continue
				}
				sum += []float64{1, 2, 4, 8}[j]
				n++
			}
			out = append(out, sum/(n+math.Exp(sink)))
		}
		return out
	}
	interleave := func(a, b []float64) []float64 {
		var out []float64
		for i := range a {
			out = append(out, a[i], b[i])
		}
		return out
	}
	cases := []struct {
		name   string
		p      exec.AttentionParams
		window int
	}{
		{"causal", exec.AttentionParams{Heads: 2, KVHeads: 1, Mask: exec.MaskCausal}, 0},
		{"window 2", exec.AttentionParams{Heads: 2, KVHeads: 1, Mask: exec.MaskCausal, Window: 2}, 2},
	}
	for _, c := range cases {
		y, err := bk.Attention(q, k, v, nil, nil, sinks, c.p, exec.Out(f32))
		near(t, c.name, values(t, bk, y, err), interleave(rows(c.window, 0), rows(c.window, math.Log(3))), 3e-7)
	}
	// A row whose keys are all masked weighs nothing (the sink takes it all).
	m := up(t, bk, f32, []int{1, 1, 4}, 0, 0, 0, 0)
	y, err := bk.Attention(up(t, bk, f32, []int{1, 1, 2}, 0, 0), k, v, m, nil, sinks, exec.AttentionParams{Heads: 2, KVHeads: 1, Mask: exec.MaskExplicit}, exec.Out(f32))
	near(t, "every key masked", values(t, bk, y, err), []float64{0, 0}, 0)
	if _, err := bk.Attention(q, k, v, nil, nil, up(t, bk, f32, []int{3}, 0, 0, 0), exec.AttentionParams{Heads: 2, KVHeads: 1}, exec.Out(f32)); err == nil {
		t.Error("three sinks for two heads accepted")
	}
}

// TestAttentionQueryFirst: RoundQuery is q·scale rounded to the storage
// format, then an attention at scale 1 (timm's eager q = q * scale;
// q @ kᵀ), bit for bit; at a scale no power of two it differs from
// scaling the stored q·kᵀ (EfficientViT-M's key dim 8).
func TestAttentionQueryFirst(t *testing.T) {
	bk := New(2)
	const sq, sk, h, d = 5, 7, 2, 8
	scale := float32(1 / math.Sqrt(d))
	r := uint32(7)
	draw := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			r = r*1664525 + 1013904223
			v[i] = bf16.Round(float32(int32(r>>8)-1<<23) / (1 << 21))
		}
		return v
	}
	qv := draw(sq * h * d)
	q := up(t, bk, bf16, []int{1, sq, h * d}, qv...)
	k := up(t, bk, bf16, []int{1, sk, h * d}, draw(sk*h*d)...)
	v := up(t, bk, bf16, []int{1, sk, h * d}, draw(sk*h*d)...)
	scaled := make([]float32, len(qv))
	for i, x := range qv {
		scaled[i] = bf16.Round(x * scale)
	}
	qs := up(t, bk, bf16, []int{1, sq, h * d}, scaled...)
	p := exec.AttentionParams{Heads: h, Scale: scale}
	for _, m := range []exec.Math{0, exec.MathTensorCore} {
		first := exec.Spec{Out: bf16, Round: exec.RoundEach | exec.RoundQuery, Math: m}
		y, err := bk.Attention(q, k, v, nil, nil, nil, p, first)
		got := values(t, bk, y, err)
		y, err = bk.Attention(qs, k, v, nil, nil, nil, exec.AttentionParams{Heads: h, Scale: 1}, exec.Spec{Out: bf16, Round: exec.RoundEach, Math: m})
		same(t, first.String(), got, values(t, bk, y, err))
		y, err = bk.Attention(q, k, v, nil, nil, nil, p, exec.Spec{Out: bf16, Round: exec.RoundEach, Math: m})
		if after := values(t, bk, y, err); slices.Equal(got, after) {
			t.Errorf("%v: the same as scaling q·kᵀ after (the case shows nothing)", first)
		}
	}
	if _, err := bk.Attention(q, k, v, nil, nil, nil, p, exec.Spec{Out: bf16, Round: exec.RoundQuery, Math: exec.MathOnlineSoftmax}); !errors.Is(err, exec.ErrUnsupported) {
		t.Errorf("RoundQuery with an online softmax: %v, want ErrUnsupported", err)
	}
	if r, err := exec.ParseRound("each|query"); err != nil || r != exec.RoundEach|exec.RoundQuery || r.String() != "each|query" {
		t.Errorf("ParseRound(each|query) = %v, %v", r, err)
	}
}
