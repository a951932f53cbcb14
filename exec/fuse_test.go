package exec_test

import (
	"testing"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/cpu"
	"github.com/zflow/zflow/precision"
)

// TestRegionCheck: malformed regions are refused with an error, before
// anything runs; a well-formed one runs and names itself by its ops.
func TestRegionCheck(t *testing.T) {
	b := cpu.New(1)
	up := func(shape ...int) exec.Tensor {
		n := 1
		for _, d := range shape {
			n *= d
		}
		x, err := b.Upload(make([]float32, n), shape, precision.BF16)
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	x, w, g := up(2, 4), up(4, 4), up(2, 4)
	s := exec.Out(precision.BF16)
	head := exec.Head{Op: exec.HeadLinear, In: [3]exec.Tensor{x, w, nil}, Spec: s}
	act := exec.Step{Op: exec.StepAct, In: []exec.Tensor{nil}, Act: exec.ActGELUTanh, Spec: s}
	cases := []struct {
		name string
		r    exec.Region
		ok   bool
	}{
		{"linear, act", exec.Region{Head: head, Steps: []exec.Step{act}}, true},
		{"glu on the value", exec.Region{Head: head, Steps: []exec.Step{{Op: exec.StepGLU, In: []exec.Tensor{g, nil}, Arg: 1, Act: exec.ActSiLU, Spec: s}}}, true},
		{"modulate without a shift", exec.Region{Head: head, Steps: []exec.Step{{Op: exec.StepModulate, In: []exec.Tensor{nil, nil, g}, Spec: s}}}, true},
		{"no steps", exec.Region{Head: head}, false},
		{"no head", exec.Region{Steps: []exec.Step{act}}, false},
		{"no weight", exec.Region{Head: exec.Head{Op: exec.HeadLinear, In: [3]exec.Tensor{x}}, Steps: []exec.Step{act}}, false},
		{"running value not nil", exec.Region{Head: head, Steps: []exec.Step{{Op: exec.StepAct, In: []exec.Tensor{x}, Spec: s}}}, false},
		{"missing operand", exec.Region{Head: head, Steps: []exec.Step{{Op: exec.StepAdd, In: []exec.Tensor{nil, nil}, Spec: s}}}, false},
		{"wrong arity", exec.Region{Head: head, Steps: []exec.Step{{Op: exec.StepGatedResidual, In: []exec.Tensor{nil, g}, Spec: s}}}, false},
		{"unknown op", exec.Region{Head: head, Steps: []exec.Step{{Op: 99, In: []exec.Tensor{nil}, Spec: s}}}, false},
	}
	for _, c := range cases {
		err := c.r.Check()
		if (err == nil) != c.ok {
			t.Errorf("%s: Check = %v, want ok %v", c.name, err, c.ok)
			continue
		}
		y, err := exec.RunUnfused(b, c.r)
		if (err == nil) != c.ok {
			t.Errorf("%s: RunUnfused = %v, want ok %v", c.name, err, c.ok)
		}
		if err == nil {
			if got := y.Shape(); len(got) != 2 || got[0] != 2 || got[1] != 4 {
				t.Errorf("%s: result %v", c.name, got)
			}
			b.Free(y)
		}
	}
	if got, want := cases[0].r.String(), "linear → act(gelu_tanh)"; got != want {
		t.Errorf("String = %q, want %q", got, want)
	}
}
