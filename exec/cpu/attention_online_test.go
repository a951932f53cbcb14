package cpu

import (
	"math"
	"testing"

	"codeberg.org/sbinet/npyio/npz"
	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/precision"
)

// TestOnlineSoftmaxIsCuDNN runs two attentions whose outputs PyTorch 2.11's
// default SDPA (cuDNN) wrote on an H200 (bench/sdpa_study.py; testdata
// sdpa_h200.npz holds one head's first 48 query rows, all keys, bf16):
// a plain chain (head dim 32, 333 keys, three key tiles), one with a
// finite additive bias (head dim 64, 200 keys) and one of head dim 96
// (300 keys), whose default scale rounds apart from 1/f32(√96). MathOnlineSoftmax with the
// tensor cores' sums and rounded weights reproduces them (the measured
// fraction, every output of the three here); the one-tile model that
// precedes it does not on more than one key tile.
func TestOnlineSoftmaxIsCuDNN(t *testing.T) {
	r, err := npz.Open("testdata/sdpa_h200.npz")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	read := func(name string) []float32 {
		var u []uint16
		if err := r.Read(name+".npy", &u); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		f := make([]float32, len(u))
		for i, h := range u {
			f[i] = precision.BF16ToF32(h)
		}
		return f
	}
	bk := New(2)
	bf := precision.BF16
	for _, c := range []struct {
		name        string
		d, sq, sk   int
		bias        bool
		online, old float64 // the least exact fraction accepted; the most
	}{
		{"plain", 32, 48, 333, false, 1, 0.95},
		{"bias", 64, 48, 200, true, 1, 0.95},
		{"d96", 96, 48, 300, false, 1, 0.95}, // the default scale f32(1/√96) in float64
	} {
		q := up(t, bk, bf, []int{1, c.sq, c.d}, read(c.name+"_q")...)
		k := up(t, bk, bf, []int{1, c.sk, c.d}, read(c.name+"_k")...)
		v := up(t, bk, bf, []int{1, c.sk, c.d}, read(c.name+"_v")...)
		var bias exec.Tensor
		if c.bias {
			bias = up(t, bk, bf, []int{1, 1, c.sq, c.sk}, read(c.name+"_bias")...)
		}
		want := read(c.name + "_out")
		exact := func(m exec.Math) float64 {
			s := exec.Spec{Out: bf, Round: exec.RoundWeights, Math: m}
			y, err := bk.Attention(q, k, v, nil, bias, nil, exec.AttentionParams{Heads: 1}, s)
			got := values(t, bk, y, err)
			fr, err := precision.ExactFraction(bf, got, want)
			if err != nil {
				t.Fatal(err)
			}
			return fr
		}
		if fr := exact(exec.MathTensorCore | exec.MathOnlineSoftmax); fr < c.online {
			t.Errorf("%s: online softmax %.5f exact, want ≥ %v", c.name, fr, c.online)
		}
		if fr := exact(exec.MathTensorCore); fr > c.old {
			t.Errorf("%s: one key tile %.5f exact: the data no longer tells the two apart", c.name, fr)
		}
	}
}

// TestOnlineSoftmaxShortRows: with every key in one tile and no weight
// rounded, the online softmax is the plain one up to the units of the
// scores (a few f32 ulps), and a row whose keys are all masked is NaN.
func TestOnlineSoftmaxShortRows(t *testing.T) {
	bk := New(2)
	q := up(t, bk, f32, []int{1, 3, 2}, 0.5, -1, 2, 0.25, -0.75, 1.5)
	k := up(t, bk, f32, []int{1, 3, 2}, 1, 0, -0.5, 2, 0.125, -1)
	v := up(t, bk, f32, []int{1, 3, 2}, 1, 2, -3, 4, 0.5, -8)
	p := exec.AttentionParams{Heads: 1, Mask: exec.MaskCausal}
	y, err := bk.Attention(q, k, v, nil, nil, nil, p, exec.Out(f32))
	plain := values(t, bk, y, err)
	y, err = bk.Attention(q, k, v, nil, nil, nil, p, exec.Spec{Out: f32, Math: exec.MathOnlineSoftmax})
	online := values(t, bk, y, err)
	for i := range plain {
		if d := math.Abs(float64(plain[i] - online[i])); d > 4e-6*math.Max(1, math.Abs(float64(plain[i]))) {
			t.Errorf("output %d: online %v, plain %v", i, online[i], plain[i])
		}
	}
	none := up(t, bk, f32, []int{1, 3, 3}, make([]float32, 9)...)
	y, err = bk.Attention(q, k, v, none, nil, nil, exec.AttentionParams{Heads: 1, Mask: exec.MaskExplicit}, exec.Spec{Out: f32, Math: exec.MathOnlineSoftmax})
	for i, x := range values(t, bk, y, err) {
		if !math.IsNaN(float64(x)) {
			t.Errorf("fully masked row, output %d: %v, want NaN", i, x)
		}
	}
	// what a flash kernel does not do is refused, not approximated
	for _, r := range []exec.Round{exec.RoundProbs, exec.RoundEach, exec.RoundScores | exec.RoundProbs | exec.RoundAccum} {
		if _, err := bk.Attention(q, k, v, nil, nil, nil, p, exec.Spec{Out: f32, Round: r, Math: exec.MathOnlineSoftmax}); err == nil {
			t.Errorf("online softmax with %v: accepted", r)
		}
	}
}
