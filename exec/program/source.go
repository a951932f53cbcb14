package program

import (
	"fmt"
	"math"
	"slices"

	"github.com/zflow/zflow/precision"
	"github.com/zflow/zflow/trace"
)

// Source gives host tensors by name.
type Source interface {
	// Shape returns a tensor's shape without reading its data.
	Shape(name string) ([]int, error)
	// Read returns the values as f32 (a copy the caller owns) and the
	// format they are exactly values of.
	Read(name string) ([]float32, precision.Format, error)
}

// TraceParams reads a trace's parameters by name.
func TraceParams(t *trace.Trace) Source {
	return traceSource{t: t, what: "parameter", keys: t.Manifest.Params}
}

// TraceInputs reads a trace's request inputs by name.
func TraceInputs(t *trace.Trace) Source {
	return traceSource{t: t, what: "input", keys: t.Manifest.Inputs}
}

type traceSource struct {
	t    *trace.Trace
	what string
	keys map[string]string
}

func (s traceSource) key(name string) (string, error) {
	k, ok := s.keys[name]
	if !ok {
		return "", fmt.Errorf("%s: no %s %q", s.t.Path, s.what, name)
	}
	return k, nil
}

func (s traceSource) Shape(name string) ([]int, error) {
	k, err := s.key(name)
	if err != nil {
		return nil, err
	}
	info, err := s.t.Info(k)
	if err != nil {
		return nil, err
	}
	shape := slices.Clone(info.Shape)
	if c := info.DType.Components(); c > 1 {
		shape = append(shape, c) // complex: (real, imaginary) pairs on a last axis, as discovery reads them
	}
	return shape, nil
}

// Read widens the values (exactly, or refuses) and refuses NaN and Inf.
func (s traceSource) Read(name string) ([]float32, precision.Format, error) {
	k, err := s.key(name)
	if err != nil {
		return nil, 0, err
	}
	t, err := s.t.Tensor(k)
	if err != nil {
		return nil, 0, err
	}
	v, err := t.Float32() // complex: its (real, imaginary) pairs
	if err != nil {
		return nil, 0, err
	}
	v = slices.Clone(v) // a view of the mapping must not outlive the trace
	for i, x := range v {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return nil, 0, fmt.Errorf("%s: %s %q holds %v at element %d", s.t.Path, s.what, name, x, i)
		}
	}
	f := precision.F32
	switch t.DType {
	case trace.BFloat16:
		f = precision.BF16
	case trace.Float16:
		f = precision.F16
	}
	return v, f, nil
}
