package synth

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/zflow/zflow/precision"
)

// fourierRows are sinusoids of each row's d entries at k frequencies
// base^(i/k) (as torch computes base ** (arange(k) / k) · x in f32; in
// bf16 the frequencies cast to it, each product and each sine rounded
// to it), laid out with the axes (frequency, sin or cos, entry) in
// order, outermost first: GLIGEN's get_fourier_embeds_from_boundingbox
// is order (0, 1, 2) with base 100. Written with plain loops.
func fourierRows(x []float32, d, k int, base float64, order [3]int, f precision.Format) []float32 {
	rows := len(x) / d
	w := 2 * d * k
	out := make([]float32, rows*w)
	sizes := [3]int{k, 2, d}
	for r := range rows {
		for i := range k {
			freq := f.Round(float32(math.Pow(base, float64(float32(i)/float32(k)))))
			for e := range d {
				angle := f.Round(freq * x[r*d+e])
				for h, v := range []float64{math.Sin(float64(angle)), math.Cos(float64(angle))} {
					at := [3]int{i, h, e}
					j := 0
					for _, a := range order {
						j = j*sizes[a] + at[a]
					}
					out[r*w+j] = f.Round(float32(v))
				}
			}
		}
	}
	return out
}

// TestNullBlended plants GLIGEN's object features: phrases p [1, n, 16]
// and boxes b [1, n, 4] (coordinates in [0, 1]) of which a mask m [1, n]
// keeps the first few, each blended with a learned null vector where the
// mask is 0 (x·m + (1 − m)·null), then joined: [p | Fourier(b)]. Both
// pieces are read, the Fourier features in every layout of their three
// axes, in f32 and in bf16 (where the frequencies, products and sines
// round: no timestep embedding makes them); a target whose dropped rows are not the null vector is not read
// as a blend, nor one whose mask is not of zeros and ones.
func TestNullBlended(t *testing.T) {
	rng := rand.New(rand.NewPCG(45, 1))
	const n, d, k, width = 6, 4, 8, 16
	mask := &val{shape: []int{1, n}, data: []float32{1, 1, 1, 0, 0, 0}, format: precision.F32}
	phrases := randVal(rng, 1, n, width)
	boxes := &val{shape: []int{1, n, d}, data: make([]float32, n*d), format: precision.F32}
	for i := range boxes.data {
		boxes.data[i] = float32(rng.IntN(9)) / 8 // a pipeline's box fractions
	}
	nullP, nullB := randVal(rng, width), randVal(rng, 2*d*k)
	nullP.param, nullB.param = true, true
	nullP.origin, nullB.origin = "null_positive_feature", "null_position_feature"
	blend := func(x []float32, null *val) []float32 {
		w := len(null.data)
		out := make([]float32, len(x))
		for r := range n {
			for c := range w {
				out[r*w+c] = x[r*w+c]*mask.data[r] + (1-mask.data[r])*null.data[c]
			}
		}
		return out
	}
	for _, f := range []precision.Format{precision.F32, precision.BF16} {
		for _, order := range [][3]int{{0, 1, 2}, {2, 1, 0}, {1, 0, 2}} {
			t.Run(fmt.Sprintf("%s layout %v", f, order), func(t *testing.T) {
				ph := roundedVal(&val{shape: phrases.shape, data: slices.Clone(phrases.data)}, f)
				bx := roundedVal(&val{shape: boxes.shape, data: slices.Clone(boxes.data)}, f)
				nP := roundedVal(&val{shape: nullP.shape, data: slices.Clone(nullP.data), param: true, origin: nullP.origin}, f)
				nB := roundedVal(&val{shape: nullB.shape, data: slices.Clone(nullB.data), param: true, origin: nullB.origin}, f)
				pieceP, pieceB := blend(ph.data, nP), blend(fourierRows(bx.data, d, k, 100, order, f), nB)
				joined := make([]float32, 0, n*(width+2*d*k))
				for r := range n {
					joined = append(joined, pieceP[r*width:(r+1)*width]...)
					joined = append(joined, pieceB[r*2*d*k:(r+1)*2*d*k]...)
				}
				m := roundedVal(&val{shape: mask.shape, data: slices.Clone(mask.data)}, f)
				s, sc, target := planted(t, f, []int{1, n, width + 2*d*k}, joined, ph, bx, m, nP, nB)
				v := s.joined(target, sc, sc.vals)
				if v == nil {
					t.Fatal("the join of two blends is not read")
				}
				if e := errOf(v, target); e != 0 {
					t.Errorf("rel-RMS %.3g, not bit-exact", e)
				}
			})
		}
	}
	t.Run("dropped rows not the null", func(t *testing.T) {
		x := blend(phrases.data, nullP)
		x[(n-1)*width] += 0.5
		s, sc, target := planted(t, precision.F32, []int{1, n, width}, x, phrases, mask, nullP)
		if v := s.nullBlended(target, sc.vals); v != nil {
			t.Errorf("read as a blend, to rel-RMS %.3g", errOf(v, target))
		}
	})
	t.Run("mask not of zeros and ones", func(t *testing.T) {
		soft := &val{shape: []int{1, n}, data: []float32{1, 0.5, 1, 0, 0, 0}, format: precision.F32}
		x := blend(phrases.data, nullP)
		s, sc, target := planted(t, precision.F32, []int{1, n, width}, x, phrases, soft, nullP)
		if v := s.nullBlended(target, sc.vals); v != nil {
			t.Errorf("read as a blend, to rel-RMS %.3g", errOf(v, target))
		}
	})
}
