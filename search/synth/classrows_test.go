package synth

import (
	"math/rand/v2"
	"testing"

	"github.com/zflow/zflow/precision"
)

// TestClassRowsApart: a divided space-time block (TimeSformer's), T = 3
// frames of N = 4 patches after one class row, x [1, 1 + N·T, C] with the
// patches' rows patch-major. The spatial attention's input is, per frame,
// the class row then that frame's patches of x's rest plus a temporal
// branch d [1, N·T, C] (the class row repeated for each frame, the rows
// frame-major); the block's sum is x plus the class row averaged over the
// frames' rows of the spatial branch r [T, 1 + N, C] joined before d plus
// r's patches back in x's order. The first forms alone explain neither;
// classRowsApart explains both, in f32 and bf16.
func TestClassRowsApart(t *testing.T) {
	const frames, patches, c = 3, 4, 16
	for _, f := range []precision.Format{precision.F32, precision.BF16} {
		rng := rand.New(rand.NewPCG(8, uint64(f)))
		fill := func(n int) []float32 {
			out := make([]float32, n)
			for i := range out {
				out[i] = f.Round(float32(rng.NormFloat64()))
			}
			return out
		}
		rows := 1 + patches*frames
		x := &val{shape: []int{1, rows, c}, data: fill(rows * c), format: f, origin: "x", seq: 1}
		d := &val{shape: []int{1, patches * frames, c}, data: fill(patches * frames * c), format: f, origin: "d", seq: 2}
		r := &val{shape: []int{frames, 1 + patches, c}, data: fill(frames * (1 + patches) * c), format: f, origin: "r", seq: 3}
		temporal := make([]float32, patches*frames*c) // x's rest + d
		for i := range temporal {
			temporal[i] = f.Round(x.data[c+i] + d.data[i])
		}
		spatial := make([]float32, 0, frames*(1+patches)*c)
		for fr := range frames {
			spatial = append(spatial, x.data[:c]...)
			for p := range patches {
				spatial = append(spatial, temporal[(p*frames+fr)*c:][:c]...)
			}
		}
		sum := make([]float32, rows*c)
		for k := range c {
			var m float32
			for fr := range frames {
				m += r.data[fr*(1+patches)*c+k]
			}
			sum[k] = f.Round(x.data[k] + f.Round(m/frames))
		}
		for p := range patches {
			for fr := range frames {
				for k := range c {
					i := (p*frames + fr) * c
					sum[c+i+k] = f.Round(temporal[i+k] + r.data[(fr*(1+patches)+1+p)*c+k])
				}
			}
		}
		for _, tc := range []struct {
			name  string
			shape []int
			data  []float32
		}{
			{"spatial input", []int{frames, 1 + patches, c}, spatial},
			{"block sum", []int{1, rows, c}, sum},
		} {
			s, sc, target := planted(t, f, tc.shape, tc.data)
			sc.add(x, false)
			sc.arg[x] = true
			sc.add(d, true)
			sc.add(r, true)
			s.splitting = true // glue's forms, classRowsApart left out
			if got := s.glueIn(target, sc); got != nil {
				t.Fatalf("%v %s: explained without the split (%s): the plant does not need it", f, tc.name, got.from.label)
			}
			s.splitting = false
			got := s.classRowsApart(target, sc)
			if got == nil {
				t.Fatalf("%v %s: not explained", f, tc.name)
			}
			if e := relRMS(f, got.data, target.data); e > tolerance(f) {
				t.Errorf("%v %s: rel-RMS %.3g", f, tc.name, e)
			}
		}
	}
}
