package synth

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/zflow/zflow/precision"
)

// TestViewTimesPart plants CoaT's convolutional position encoding: q
// [1, H, 1+N, D] without its class row times three convolutions' maps
// (D·H channels in all, made one after another) joined and laid out as
// heads [1, H, N, D], a zero row padded in front. Explained through the
// zero padding; with the maps made in another order (their join another
// value) the product is not.
func TestViewTimesPart(t *testing.T) {
	rng := rand.New(rand.NewPCG(27, 5))
	const h, d, g = 2, 4, 3
	n := g * g
	q := randVal(rng, 1, h, 1+n, d)
	maps := []*val{randVal(rng, 1, 4, g, g), randVal(rng, 1, 2, g, g), randVal(rng, 1, 2, g, g)}
	at := func(ch, cell int) float32 {
		for _, m := range maps {
			if ch < m.shape[1] {
				return m.data[ch*n+cell]
			}
			ch -= m.shape[1]
		}
		panic("channel out of range")
	}
	want := make([]float32, h*(1+n)*d)
	for hh := range h {
		for i := range n {
			for c := range d {
				want[(hh*(1+n)+1+i)*d+c] = q.data[(hh*(1+n)+1+i)*d+c] * at(hh*d+c, i)
			}
		}
	}
	plant := func(ms ...*val) (*synth, *scope, *val) {
		s, sc, target := planted(t, precision.F32, q.shape, want, q)
		for _, m := range ms {
			sc.add(m, true)
		}
		return s, sc, target
	}
	s, sc, target := plant(maps...)
	got := s.zeroPadded(target, sc, sc.vals)
	if got == nil {
		t.Fatal("not explained")
	}
	if e := relRMS(precision.F32, got.data, want); e != 0 {
		t.Errorf("rel-RMS %.3g, want 0 (a product of two values rounds once)", e)
	}
	s, sc, target = plant(maps[1], maps[0], maps[2])
	if got := s.zeroPadded(target, sc, sc.vals); got != nil {
		t.Errorf("explained from the maps joined in another order: %s", got.from.label)
	}
}

// TestFactorizedAttention plants CoaT's factorized attention over a fused
// projection [1, N, 3·H·D]: per head q·(softmax over the rows of k)ᵀ·v
// times 1/√D, plus a per-head value the scope made, the heads merged.
// Explained; the same without the scale is not (the form reads it).
func TestFactorizedAttention(t *testing.T) {
	rng := rand.New(rand.NewPCG(27, 6))
	const n, h, d = 5, 2, 4
	c := h * d
	qkv := randVal(rng, 1, n, 3*c)
	extra := randVal(rng, 1, h, n, d)
	plant := func(scale float64) []float32 {
		out := make([]float32, n*c)
		at := func(r, piece, hh, e int) float64 { return float64(qkv.data[r*3*c+piece*c+hh*d+e]) }
		for hh := range h {
			// softmax of k over the rows, per channel
			ks := make([][]float64, n)
			for r := range ks {
				ks[r] = make([]float64, d)
			}
			for e := range d {
				top := math.Inf(-1)
				for r := range n {
					top = max(top, at(r, 1, hh, e))
				}
				var sum float64
				for r := range n {
					sum += math.Exp(at(r, 1, hh, e) - top)
				}
				for r := range n {
					ks[r][e] = math.Exp(at(r, 1, hh, e)-top) / sum
				}
			}
			for i := range n {
				for e := range d {
					var y float64
					for a := range d {
						var kv float64
						for r := range n {
							kv += ks[r][a] * at(r, 2, hh, e)
						}
						y += at(i, 0, hh, a) * kv
					}
					out[i*c+hh*d+e] = float32(y*scale + float64(extra.data[(hh*n+i)*d+e]))
				}
			}
		}
		return out
	}
	for _, c := range []struct {
		scale float64
		want  bool
	}{{1 / math.Sqrt(d), true}, {1, false}} {
		s, sc, target := planted(t, precision.F32, []int{1, n, h * d}, plant(c.scale))
		sc.add(qkv, true)
		sc.add(extra, true)
		got := s.factorizedAttention(target, sc)
		if c.want {
			explainedWithin(t, got, target)
		} else if got != nil {
			t.Errorf("unscaled read as scaled: %s", got.from.label)
		}
	}
}

// TestZeroPaddedMap plants TensorFlow's 'same' padding split unevenly, as
// HF MobileNet pads a map before a strided convolution: x [1, 3, 4, 5]
// with one row of zeros at the top, two at the bottom and one column at
// the right. It is x joined with zeros along both axes; the same map
// with one padding cell not zero is not explained so.
func TestZeroPaddedMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 9))
	const c, h, w = 3, 4, 5
	x := randVal(rng, 1, c, h, w)
	want := make([]float32, c*(h+3)*(w+1))
	for ch := range c {
		for i := range h {
			for j := range w {
				want[(ch*(h+3)+1+i)*(w+1)+j] = x.data[(ch*h+i)*w+j]
			}
		}
	}
	shape := []int{1, c, h + 3, w + 1}
	s, sc, target := planted(t, precision.F32, shape, want, x)
	got := s.zeroPadded(target, sc, sc.vals)
	if got == nil {
		t.Fatal("not explained")
	}
	if e := relRMS(precision.F32, got.data, want); e != 0 {
		t.Errorf("rel-RMS %.3g, want 0 (zeros joined)", e)
	}
	bad := slices.Clone(want)
	bad[len(bad)-1] = 0.5 // the bottom-right padding cell of the last channel
	s, sc, target = planted(t, precision.F32, shape, bad, x)
	if got := s.zeroPaddedAxes(target, sc, sc.vals); got != nil {
		t.Errorf("a padding cell that is not zero explained: %s", got.from.label)
	}
}
