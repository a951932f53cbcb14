package sampler

import (
	"context"
	"fmt"
	"github.com/zflow/zflow/search"

	"github.com/zflow/zflow/precision"
	"github.com/zflow/zflow/trace"
)

// eulerData is what scoring euler_sign needs, read once: per step x, v,
// the next x, and σ.
type eulerData struct {
	x, v, next [][]float32
	dsigma     []float32
	format     precision.Format
	boundary   string
}

// loadEuler reads each step's x and v from the model call and the next x
// from the following step's call (or the final output).
func loadEuler(tr *trace.Trace, l *Loop) (*eulerData, error) {
	sig, err := floats(tr, tr.Manifest.Inputs[l.Sigmas])
	if err != nil {
		return nil, err
	}
	d := &eulerData{}
	port := func(step int, name string) ([]float32, trace.DType, error) {
		c, ok := l.Call(tr, step)
		key, has := c.Tensors.Key(name)
		if !ok || !has {
			return nil, 0, fmt.Errorf("step %d: the model call has no port %s", step, name)
		}
		in, _ := tr.Info(key)
		v, err := floats(tr, key)
		return v, in.DType, err
	}
	for i, st := range l.Steps {
		x, dt, err := port(st, l.Latents)
		if err != nil {
			return nil, err
		}
		v, _, err := port(st, l.Velocity)
		if err != nil {
			return nil, err
		}
		var next []float32
		switch {
		case i+1 < len(l.Steps):
			next, _, err = port(l.Steps[i+1], l.Latents)
		case l.Final != "":
			next, err = floats(tr, tr.Manifest.Outputs[l.Final])
		default:
			continue // the last step's result was not captured
		}
		if err != nil {
			return nil, err
		}
		d.x, d.v, d.next = append(d.x, x), append(d.v, v), append(d.next, next)
		d.dsigma = append(d.dsigma, sig[i+1]-sig[i])
		d.format = dt.Format()
	}
	if len(d.x) == 0 {
		return nil, fmt.Errorf("no step has both x and the next x captured")
	}
	d.boundary = fmt.Sprintf("%s/%s → next %s", l.Model, l.Velocity, l.Latents)
	return d, nil
}

// score predicts every next x as x + sign·Δσ·v (f32, rounded to x's
// format) and returns the rel-RMS against the captured ones.
func (d *eulerData) score(sign float32) search.Score {
	var num, den float64
	for i := range d.x {
		for j, x := range d.x[i] {
			p := d.format.Round(x + sign*d.dsigma[i]*d.v[i][j])
			e := float64(p) - float64(d.next[i][j])
			num += e * e
			den += float64(d.next[i][j]) * float64(d.next[i][j])
		}
	}
	return search.Score{Err: precision.RelRMSFromSums(num, den), Boundary: d.boundary, Metric: search.MetricRelRMS}
}

// EulerFactors is the euler_sign factor of a loop and its objective.
func EulerFactors(tr *trace.Trace, l *Loop) ([]search.Factor, search.Objective, error) {
	d, err := loadEuler(tr, l)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: euler_sign: %w", tr.Path, err)
	}
	f := search.Factor{Name: "euler_sign", Scope: l.Model, Values: []any{1.0, -1.0}}
	obj := search.ObjectiveFunc(func(_ context.Context, _ string, a search.Assignment) (search.Score, error) {
		return d.score(float32(a["euler_sign"].(float64))), nil
	})
	return []search.Factor{f}, obj, nil
}
