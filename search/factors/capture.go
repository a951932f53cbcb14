package factors

import (
	"fmt"
	"slices"

	"github.com/zflow/zflow/precision"
	"github.com/zflow/zflow/semantics"
	"github.com/zflow/zflow/trace"
)

// capture reads the reference's tensors at the boundaries a structure
// names, at the first step the model is called in.
type capture struct {
	tr    *trace.Trace
	st    *semantics.Structure
	calls map[string]trace.Call // module → its first call at the step
	cache map[string]tensor
}

// tensor is one captured tensor: values widened to f32, its format and
// shape.
type tensor struct {
	v     []float32
	f     precision.Format
	shape []int
	dt    trace.DType
}

func (t tensor) width() int {
	if len(t.shape) == 0 {
		return 1
	}
	return t.shape[len(t.shape)-1]
}

// rows counts rows of the last axis's width.
func (t tensor) rows() int { return len(t.v) / max(t.width(), 1) }

// tokens is the second-to-last axis.
func (t tensor) tokens() int {
	if len(t.shape) < 2 {
		return 1
	}
	return t.shape[len(t.shape)-2]
}

func newCapture(tr *trace.Trace, st *semantics.Structure) (*capture, error) {
	c := &capture{tr: tr, st: st, calls: map[string]trace.Call{}, cache: map[string]tensor{}}
	var step *int
	for _, call := range tr.Tree().Calls() {
		if call.Parent == nil && call.Module == st.Model.Module {
			step = call.Step
			break
		}
	}
	for _, call := range tr.Tree().Calls() {
		if !sameStep(call.Step, step) {
			continue
		}
		if _, ok := c.calls[call.Module]; !ok {
			c.calls[call.Module] = call
		}
	}
	if _, ok := c.calls[st.Model.Module]; !ok {
		return nil, fmt.Errorf("%s: no call of the model %s", tr.Path, st.Model.Module)
	}
	return c, nil
}

func sameStep(a, b *int) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// port reads a module's port.
func (c *capture) port(module, name string) (tensor, error) {
	call, ok := c.calls[module]
	if !ok {
		return tensor{}, fmt.Errorf("no call of %s", module)
	}
	key, ok := call.Tensors.Key(name)
	if !ok {
		return tensor{}, fmt.Errorf("%s has no port %s", module, name)
	}
	return c.key(key)
}

func (c *capture) key(key string) (tensor, error) {
	if t, ok := c.cache[key]; ok {
		return t, nil
	}
	tn, err := c.tr.Tensor(key)
	if err != nil {
		return tensor{}, err
	}
	v, err := tn.Float32()
	if err != nil {
		return tensor{}, err
	}
	info, _ := c.tr.Info(key)
	f := precision.F32
	switch tn.DType {
	case trace.BFloat16:
		f = precision.BF16
	case trace.Float16:
		f = precision.F16
	}
	t := tensor{v: v, f: f, shape: slices.Clone(info.Shape), dt: tn.DType}
	c.cache[key] = t
	return t, nil
}

// arg is a module's first real floating argument; out its first real
// floating result.
func (c *capture) arg(module string) (tensor, error) { return c.first(module, false) }
func (c *capture) out(module string) (tensor, error) { return c.first(module, true) }

func (c *capture) first(module string, result bool) (tensor, error) {
	call, ok := c.calls[module]
	if !ok {
		return tensor{}, fmt.Errorf("no call of %s", module)
	}
	for _, p := range call.Tensors {
		if trace.IsResult(p.Name) != result {
			continue
		}
		info, err := c.tr.Info(p.Key)
		if err == nil && info.DType.IsFloat() && info.DType.Components() == 1 {
			return c.key(p.Key)
		}
	}
	return tensor{}, fmt.Errorf("%s has no floating %s", module, map[bool]string{true: "result", false: "argument"}[result])
}

// roleOut is a role's result (its port, "out" by default, falling back to
// the first result).
func (c *capture) roleOut(r semantics.Role) (tensor, error) {
	if t, err := c.port(r.Module, r.OutPort()); err == nil {
		return t, nil
	}
	return c.out(r.Module)
}
