package sampler

import (
	"context"
	"fmt"
	"github.com/zflow/zflow/search"
	"math"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/precision"
	"github.com/zflow/zflow/trace"
)

// sinusoid is a captured timestep-sinusoid boundary: a parameter-free call
// from N values to [N, D] values bounded by 1.
type sinusoid struct {
	module      string
	in, out     []trace.Port // per step: the call's input and output ports
	dim         int
	tFormat     precision.Format // the model's timestep port's format
	outFormat   precision.Format
	modelT      [][]float32 // per step, the model's timestep
	capturedIn  [][]float32
	capturedOut [][]float32
}

// findSinusoid returns the first call under the model, in entry order,
// that looks like a timestep sinusoid by shape and values.
func findSinusoid(tr *trace.Trace, l *Loop) (*sinusoid, error) {
	first := l.Steps[0]
	calls, _ := tr.Tree().Select(trace.Filter{Step: &first})
	for _, c := range calls {
		if len(c.Params) > 0 || len(c.Tensors) != 2 || trace.IsResult(c.Tensors[0].Name) || !trace.IsResult(c.Tensors[1].Name) {
			continue
		}
		in, _ := tr.Info(c.Tensors[0].Key)
		out, _ := tr.Info(c.Tensors[1].Key)
		if len(out.Shape) != 2 || out.Shape[1]%2 != 0 || out.Shape[1] < 4 || in.Len() != int64(out.Shape[0]) || !in.DType.IsFloat() {
			continue
		}
		v, err := floats(tr, c.Tensors[1].Key)
		if err != nil || !bounded(v, 1) {
			continue
		}
		mc, _ := l.Call(tr, first)
		tkey, _ := mc.Tensors.Key(l.Timestep)
		ti, _ := tr.Info(tkey)
		s := &sinusoid{module: c.Module, dim: out.Shape[1], tFormat: ti.DType.Format(), outFormat: out.DType.Format()}
		if err := s.load(tr, l, c); err != nil {
			return nil, err
		}
		return s, nil
	}
	return nil, fmt.Errorf("no parameter-free call maps N timesteps to [N, D] values bounded by 1: no timestep sinusoid")
}

// load reads, per step, the model's timestep and the sinusoid's ports.
func (s *sinusoid) load(tr *trace.Trace, l *Loop, first trace.Call) error {
	for _, st := range l.Steps {
		mc, _ := l.Call(tr, st)
		tkey, _ := mc.Tensors.Key(l.Timestep)
		t, err := floats(tr, tkey)
		if err != nil {
			return err
		}
		calls, _ := tr.Tree().Select(trace.Filter{Step: &st, Module: s.module})
		if len(calls) == 0 {
			return fmt.Errorf("step %d has no call of %s", st, s.module)
		}
		c := calls[0]
		in, err := floats(tr, c.Tensors[0].Key)
		if err != nil {
			return err
		}
		out, err := floats(tr, c.Tensors[1].Key)
		if err != nil {
			return err
		}
		s.modelT, s.capturedIn, s.capturedOut = append(s.modelT, t), append(s.capturedIn, in), append(s.capturedOut, out)
		s.in, s.out = append(s.in, c.Tensors[0]), append(s.out, c.Tensors[1])
	}
	return nil
}

func bounded(v []float32, limit float32) bool {
	for _, x := range v {
		if !(x >= -limit && x <= limit) {
			return false
		}
	}
	return true
}

// predict computes the sinusoid output from the model's own timestep under
// assignment a, rounded to the captured output's format.
func (s *sinusoid) predict(step int, a search.Assignment) ([]float32, error) {
	scale := float32(a["timestep_scale"].(float64))
	t := make([]float32, len(s.capturedIn[step]))
	for i := range t {
		// The model's timestep is per sample; broadcast it over N.
		t[i] = s.modelT[step][min(i, len(s.modelT[step])-1)]
	}
	inner := float32(1)
	if a["timestep_scale_at"] == "input" {
		round := a["timestep_scale_rounded"].(bool)
		for i := range t {
			if t[i] *= scale; round {
				t[i] = s.tFormat.Round(t[i])
			}
		}
	} else {
		inner = scale
	}
	p := exec.TimestepParams{Dim: s.dim, FlipSinToCos: a["timestep_flip_sin_to_cos"].(bool),
		FreqShift: float32(a["timestep_freq_shift"].(float64)), Scale: inner, MaxPeriod: float32(a["timestep_max_period"].(float64))}
	out, err := exec.TimestepEmbedding(t, p, exec.MathPrecise)
	if err != nil {
		return nil, err
	}
	for i := range out {
		out[i] = s.outFormat.Round(out[i])
	}
	return out, nil
}

// TimestepFactors are the sinusoid's factors, scored jointly at its output
// from the model's own timestep (teacher-forced).
func TimestepFactors(tr *trace.Trace, l *Loop) ([]search.Factor, search.Objective, error) {
	if l.Timestep == "" {
		return nil, nil, fmt.Errorf("%s: the model call has no timestep port", tr.Path)
	}
	s, err := findSinusoid(tr, l)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", tr.Path, err)
	}
	const stage = 1
	factors := []search.Factor{
		{Name: "timestep_scale", Scope: s.module, Values: []any{1.0, 1000.0}, Stage: stage},
		{Name: "timestep_scale_at", Scope: s.module, Values: []any{"input", "sinusoid"}, Stage: stage},
		{Name: "timestep_scale_rounded", Scope: s.module, Values: []any{false, true}, Stage: stage},
		{Name: "timestep_flip_sin_to_cos", Scope: s.module, Values: []any{false, true}, Stage: stage},
		{Name: "timestep_freq_shift", Scope: s.module, Values: []any{0.0, 1.0}, Stage: stage},
		{Name: "timestep_max_period", Scope: s.module, Values: []any{10000.0}, Stage: stage},
	}
	boundary := s.module + "/" + s.out[0].Name
	obj := search.ObjectiveFunc(func(_ context.Context, _ string, a search.Assignment) (search.Score, error) {
		var num, den float64
		for st := range s.capturedOut {
			pred, err := s.predict(st, a)
			if err != nil {
				return search.Score{}, err
			}
			for i, want := range s.capturedOut[st] {
				e := float64(pred[i]) - float64(want)
				num += e * e
				den += float64(want) * float64(want)
			}
		}
		r := precision.RelRMSFromSums(num, den)
		if math.IsNaN(r) {
			r = math.Inf(1)
		}
		return search.Score{Err: r, Boundary: boundary, Metric: search.MetricRelRMS}, nil
	})
	return factors, obj, nil
}
