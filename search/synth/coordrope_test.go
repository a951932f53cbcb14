package synth

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/cpu"
	"github.com/zflow/zflow/precision"
)

// coordSpec makes RoPE tables from float coordinates as the LTX family
// does, f32 step by step: m = (start + end)/2 (or the points), u =
// (m/max)·2 − 1, f_i = low·θ^(e_i) in f64 cast to f32 (e_i = i/(F−1),
// or (F−1−i)/(F−1) for a ladder that descends), angles u·f_i laid out
// frequency-major (i·A + a) or axis-major, interleaved or halves, after
// pad still channels.
type coordSpec struct {
	name      string
	coords    [][]float32 // [A][N] starts (bounds: end = start + step[a])
	step      []float32   // nil: points, no bounds
	maxes     []float32
	theta     float64
	low       float64
	f, pad    int
	half      bool
	axisMajor bool
	descend   bool
	gpu       bool // cos and sin as a GPU's cosf and sinf (exec.CosCUDA, SinCUDA)
}

func (c coordSpec) tables() (x, cosT, sinT *val) {
	a, n := len(c.coords), len(c.coords[0])
	freqs := make([]float32, c.f)
	for i := range freqs {
		e := float64(i) / float64(c.f-1)
		if c.descend {
			e = float64(c.f-1-i) / float64(c.f-1)
		}
		freqs[i] = float32(c.low * math.Pow(c.theta, e))
	}
	k := a * c.f
	w := 2 * k
	d := c.pad + w
	cosT = &val{shape: []int{1, n, d}, data: make([]float32, n*d), format: precision.F32, origin: "t/out.0"}
	sinT = &val{shape: []int{1, n, d}, data: make([]float32, n*d), format: precision.F32, origin: "t/out.1"}
	if c.step != nil {
		x = &val{shape: []int{1, a, n, 2}, format: precision.F32, origin: "t/arg0"}
	} else {
		x = &val{shape: []int{1, a, n}, format: precision.F32, origin: "t/arg0"}
	}
	for ax := range a {
		for r := range n {
			st := c.coords[ax][r]
			m := st
			if c.step != nil {
				en := st + c.step[ax]
				x.data = append(x.data, st, en)
				m = (st + en) / 2
			} else {
				x.data = append(x.data, st)
			}
			u := float32(float32(m/c.maxes[ax])*2) - 1
			for i := range c.f {
				j := i*a + ax
				if c.axisMajor {
					j = ax*c.f + i
				}
				ang := float64(float32(u * freqs[i]))
				cs, sn := float32(math.Cos(ang)), float32(math.Sin(ang))
				if c.gpu {
					cs, sn = exec.CosCUDA(float32(ang)), exec.SinCUDA(float32(ang))
				}
				for _, ch := range c.channels(j, k) {
					cosT.data[r*d+ch], sinT.data[r*d+ch] = cs, sn
				}
			}
		}
	}
	for r := range n {
		for ch := range c.pad {
			cosT.data[r*d+ch] = 1
		}
	}
	return x, cosT, sinT
}

// channels are the two channels holding angle slot j of k.
func (c coordSpec) channels(j, k int) []int {
	if c.half {
		return []int{c.pad + j, c.pad + k + j}
	}
	return []int{c.pad + 2*j, c.pad + 2*j + 1}
}

// grid3 is a (t, h, w) grid of latent starts in pixel units (t in
// seconds at fps), row-major, as LTX-2's video coordinates are.
func grid3(ft, fh, fw int, fps float32) [][]float32 {
	out := make([][]float32, 3)
	for t := range ft {
		for h := range fh {
			for w := range fw {
				out[0] = append(out[0], float32(max(0, 8*t+1-8))/fps)
				out[1] = append(out[1], float32(32*h))
				out[2] = append(out[2], float32(32*w))
			}
		}
	}
	return out
}

// TestCoordRope: tables of float coordinates, made the LTX way in every
// variation the form allows (bounds or points, pad, layout, slot order,
// θ and low end, a ladder that descends, maxima not powers of two), are
// recomputed by the program to the bit, with θ and the maxima the
// factors report; tables of integer ids on the usual 1/θ^(2i/d) ladder
// beside unrelated coordinates are not taken for them.
func TestCoordRope(t *testing.T) {
	audio := [][]float32{{0, 0.01, 0.05, 0.09, 0.13, 0.17}}
	rng := rand.New(rand.NewPCG(3, 4))
	var scattered [][]float32
	for range 2 {
		var col []float32
		for range 12 {
			col = append(col, float32(rng.Float64()*90))
		}
		scattered = append(scattered, col)
	}
	for _, c := range []coordSpec{
		{name: "video 2x2x2, F 2, pad 4", coords: grid3(2, 2, 2, 24), step: []float32{8.0 / 24, 32, 32}, maxes: []float32{20, 2048, 2048}, theta: 1e4, low: math.Pi / 2, f: 2, pad: 4},
		{name: "audio bounds, F 4", coords: audio, step: []float32{0.04}, maxes: []float32{20}, theta: 1e4, low: math.Pi / 2, f: 4},
		{name: "video 3x2x4 points, F 8, pad 2", coords: grid3(3, 2, 4, 25), maxes: []float32{20, 2048, 2048}, theta: 1e4, low: math.Pi / 2, f: 8, pad: 2},
		{name: "halves, axis-major, θ 500, maxima 90 and 100", coords: scattered, step: []float32{1, 1}, maxes: []float32{90, 100}, theta: 500, low: 1, f: 6, half: true, axisMajor: true},
		{name: "descending ladder", coords: scattered, maxes: []float32{96, 96}, theta: 1e3, low: math.Pi, f: 5, descend: true},
		{name: "video 3x2x4 points, a GPU's cosf and sinf", coords: grid3(3, 2, 4, 25), maxes: []float32{20, 2048, 2048}, theta: 1e4, low: math.Pi / 2, f: 8, pad: 2, gpu: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			x, cosT, sinT := c.tables()
			if c.gpu {
				cpuSpec := c
				cpuSpec.gpu = false
				_, c2, s2 := cpuSpec.tables()
				if slices.Equal(c2.data, cosT.data) && slices.Equal(s2.data, sinT.data) {
					t.Fatal("the GPU's tables equal the correctly rounded ones: the case shows nothing")
				}
			}
			s := &synth{ev: &evaluator{b: cpu.New(1)}, em: newEmitter(precision.F32)}
			cv, sv := s.fitCoordRope([]*val{x}, cosT, sinT)
			if cv == nil {
				t.Fatal("no fit")
			}
			if !slices.Equal(cv.data, cosT.data) || !slices.Equal(sv.data, sinT.data) {
				t.Errorf("tables not equal to the bit: rel-RMS %g, %g", relRMS(precision.F32, cv.data, cosT.data), relRMS(precision.F32, sv.data, sinT.data))
			}
			r := s.coordRopes[0]
			if r.theta != c.theta {
				t.Errorf("θ %g, want %g (candidates %v)", r.theta, c.theta, r.thetaCands)
			}
			want := make([]float64, len(c.maxes))
			for i, m := range c.maxes {
				want[i] = float64(m)
			}
			if got := r.maxCands[0].Value.([]float64); !slices.Equal(got, want) {
				t.Errorf("maxima %v, want %v", got, want)
			}
			for _, f := range s.coordRopeFactors() {
				if !f.Decisive {
					t.Errorf("%s not decisive: margin %v, candidates %v", f.Name, f.Margin, f.Candidates)
				}
			}
		})
	}
	t.Run("integer ids beside coordinates", func(t *testing.T) {
		const n, d = 12, 8
		cosT := &val{shape: []int{n, d}, data: make([]float32, n*d), format: precision.F32, origin: "t/out.0"}
		sinT := &val{shape: []int{n, d}, data: make([]float32, n*d), format: precision.F32, origin: "t/out.1"}
		for r := range n {
			for i := range d / 2 {
				ang := float64(r) * math.Pow(1e4, -2*float64(i)/d)
				for _, ch := range []int{2 * i, 2*i + 1} {
					cosT.data[r*d+ch], sinT.data[r*d+ch] = float32(math.Cos(ang)), float32(math.Sin(ang))
				}
			}
		}
		x := &val{shape: []int{1, 2, n}, data: append(slices.Clone(scattered[0]), scattered[1]...), format: precision.F32, origin: "t/arg0"}
		s := &synth{ev: &evaluator{b: cpu.New(1)}, em: newEmitter(precision.F32)}
		if cv, _ := s.fitCoordRope([]*val{x}, cosT, sinT); cv != nil {
			t.Errorf("tables of ids 0…%d explained by unrelated coordinates", n-1)
		}
	})
}
