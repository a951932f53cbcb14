package synth

import (
	"math"
	"testing"

	"github.com/zflow/zflow/exec/cpu"
	"github.com/zflow/zflow/precision"
)

// TestSnake: the Snake activation with per-channel α and β kept [1, C, 1]
// is read in each form, with its parameters' order and scale; a value
// that is no Snake is not.
func TestSnake(t *testing.T) {
	const b, c, l = 1, 3, 16
	x := &val{shape: []int{b, c, l}, data: make([]float32, b*c*l), format: precision.F32}
	for i := range x.data {
		x.data[i] = float32(math.Sin(float64(i)*0.7)) * 2
	}
	a := &val{shape: []int{1, c, 1}, data: []float32{0.3, -0.2, 0.5}, format: precision.F32}
	be := &val{shape: []int{1, c, 1}, data: []float32{-0.4, 0.1, 0.25}, format: precision.F32}
	snake := func(logscale, one bool) []float32 {
		out := make([]float32, len(x.data))
		for i, v := range x.data {
			ch := (i / l) % c
			al, bt := a.data[ch], be.data[ch]
			if one {
				bt = al
			}
			if logscale {
				al, bt = float32(math.Exp(float64(al))), float32(math.Exp(float64(bt)))
			}
			s := float32(math.Sin(float64(al * v)))
			out[i] = v + 1/(bt+1e-9)*(s*s)
		}
		return out
	}
	for _, tc := range []struct {
		name          string
		logscale, one bool
	}{{"α and β, logscale", true, false}, {"α and β", false, false}, {"α alone", false, true}} {
		t.Run(tc.name, func(t *testing.T) {
			params := []*val{a, be}
			if tc.one {
				params = params[:1]
			}
			target := &val{shape: x.shape, data: snake(tc.logscale, tc.one), format: precision.F32}
			s := &synth{tr: oneStepTrace(t), ev: &evaluator{b: cpu.New(1)}, em: newEmitter(precision.F32)}
			v := s.fitSnake(x, params, target)
			if v == nil {
				t.Fatal("not explained")
			}
			if e := relRMS(precision.F32, v.data, target.data); e > 1e-6 {
				t.Errorf("rel-RMS %g: %s", e, v.from.label)
			}
		})
	}
	other := &val{shape: x.shape, data: make([]float32, len(x.data)), format: precision.F32}
	for i, v := range x.data {
		other.data[i] = v + float32(math.Cos(float64(v)))
	}
	s := &synth{tr: oneStepTrace(t), ev: &evaluator{b: cpu.New(1)}, em: newEmitter(precision.F32)}
	if v := s.fitSnake(x, []*val{a, be}, other); v != nil {
		t.Errorf("x + cos x explained as %s", v.from.label)
	}
}

// TestWeightNormed: a gain [O, 1, 1] and a direction [O, I, K] among a
// call's parameters are replaced by g · v / ‖v‖ (the norm over each row),
// put first, the bias kept after it; a gain [1, 1, K] normalises over
// every axis but the last; parameters without such a pair give nil.
func TestWeightNormed(t *testing.T) {
	const o, in, k = 3, 2, 4
	bias := &val{shape: []int{o}, data: []float32{0.1, 0.2, 0.3}, format: precision.F32}
	g := &val{shape: []int{o, 1, 1}, data: []float32{2, -1, 0.5}, format: precision.F32}
	v := &val{shape: []int{o, in, k}, data: make([]float32, o*in*k), format: precision.F32}
	for i := range v.data {
		v.data[i] = float32(i%5) - 1.5
	}
	s := &synth{tr: oneStepTrace(t), ev: &evaluator{b: cpu.New(1)}, em: newEmitter(precision.F32)}
	got := s.weightNormed([]*val{bias, g, v})
	if len(got) != 2 || got[1] != bias {
		t.Fatalf("got %d parameters", len(got))
	}
	n := in * k
	for r := range o {
		var ss float64
		for _, x := range v.data[r*n : (r+1)*n] {
			ss += float64(x) * float64(x)
		}
		for j, x := range v.data[r*n : (r+1)*n] {
			want := float64(g.data[r]) * float64(x) / math.Sqrt(ss)
			if d := math.Abs(float64(got[0].data[r*n+j]) - want); d > 1e-6*math.Max(1, math.Abs(want)) {
				t.Fatalf("w[%d][%d] = %g, want %g", r, j, got[0].data[r*n+j], want)
			}
		}
	}
	if got := s.weightNormed([]*val{bias, v}); got != nil {
		t.Errorf("no gain, yet %d parameters", len(got))
	}
	// over dim 2 (wav2vec2's positional convolution): a gain [1, 1, K]
	g2 := &val{shape: []int{1, 1, k}, data: []float32{1, 2, 3, 4}, format: precision.F32}
	got = s.weightNormed([]*val{g2, v})
	if len(got) != 1 {
		t.Fatalf("dim 2: got %d parameters", len(got))
	}
	for c := range k {
		var ss float64
		for r := range o * in {
			x := float64(v.data[r*k+c])
			ss += x * x
		}
		for r := range o * in {
			want := float64(g2.data[c]) * float64(v.data[r*k+c]) / math.Sqrt(ss)
			if d := math.Abs(float64(got[0].data[r*k+c]) - want); d > 1e-6*math.Max(1, math.Abs(want)) {
				t.Fatalf("dim 2: w[%d][%d] = %g, want %g", r, c, got[0].data[r*k+c], want)
			}
		}
	}
}
