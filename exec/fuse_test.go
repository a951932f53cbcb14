package exec_test

import (
	"fmt"
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

// TestJoinRegion: a join of norms followed by a rope runs as the parts'
// norms, their concat and the rope of the joined value; malformed joins
// are refused before anything runs.
func TestJoinRegion(t *testing.T) {
	b := cpu.New(1)
	f := precision.BF16
	up := func(seed float32, shape ...int) exec.Tensor {
		n := 1
		for _, d := range shape {
			n *= d
		}
		v := make([]float32, n)
		for i := range v {
			v[i] = seed * float32((i*7)%13-6) / 5
		}
		x, err := b.Upload(v, shape, f)
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	const heads, d = 2, 4
	a, c := up(1, 1, 3, heads*d), up(2, 1, 5, heads*d)
	g := up(0.5, d)
	cos, sin := up(0.3, 8, d), up(0.7, 8, d)
	s := exec.Out(f)
	norm := func(x exec.Tensor) exec.Head {
		return exec.Head{Op: exec.HeadNorm, In: [3]exec.Tensor{x, g, nil}, Norm: exec.NormParams{Kind: exec.NormRMS, Eps: 1e-6, Group: d},
			Spec: exec.Spec{Out: f, Round: exec.RoundNormalized}}
	}
	rp := exec.RopeParams{Heads: heads, Layout: exec.RopeInterleaved}
	rope := exec.Step{Op: exec.StepRope, In: []exec.Tensor{nil, cos, sin}, Rope: rp, Spec: s}
	r := exec.Region{Head: exec.Head{Op: exec.HeadJoin, Parts: []exec.Head{norm(a), norm(c)}, Axis: 1}, Steps: []exec.Step{rope}}
	if got, want := r.String(), "join(norm, norm) → rope"; got != want {
		t.Errorf("String = %q, want %q", got, want)
	}
	got, err := exec.RunUnfused(b, r)
	if err != nil {
		t.Fatal(err)
	}
	na, _ := b.Norm(a, g, nil, norm(a).Norm, norm(a).Spec)
	nc, _ := b.Norm(c, g, nil, norm(c).Norm, norm(c).Spec)
	j, _ := b.Concat([]exec.Tensor{na, nc}, 1)
	want, err := b.Rope(j, cos, sin, rp, s)
	if err != nil {
		t.Fatal(err)
	}
	gv, _ := b.Download(got)
	wv, _ := b.Download(want)
	if fmt.Sprint(got.Shape()) != "[1 8 8]" || fmt.Sprint(gv) != fmt.Sprint(wv) {
		t.Errorf("join → rope: %v %v, want %v", got.Shape(), gv, wv)
	}
	// A join with no steps is the concat of its parts.
	bare := exec.Region{Head: r.Head}
	jt, err := exec.RunUnfused(b, bare)
	if err != nil {
		t.Fatal(err)
	}
	jv, _ := b.Download(jt)
	cv, _ := b.Download(j)
	if fmt.Sprint(jv) != fmt.Sprint(cv) {
		t.Errorf("join with no steps: %v, want %v", jv, cv)
	}
	if err := (exec.Region{Head: norm(a)}).Check(); err == nil {
		t.Error("a norm with no steps was accepted")
	}
	for _, bad := range []exec.Region{
		{Head: exec.Head{Op: exec.HeadJoin, Axis: 1}, Steps: []exec.Step{rope}},
		{Head: exec.Head{Op: exec.HeadJoin, Parts: []exec.Head{norm(a), {Op: exec.HeadJoin}}, Axis: 1}, Steps: []exec.Step{rope}},
		{Head: exec.Head{Op: exec.HeadJoin, Parts: []exec.Head{norm(a), {Op: exec.HeadNorm}}, Axis: 1}, Steps: []exec.Step{rope}},
		{Head: exec.Head{Op: exec.HeadJoin, Parts: []exec.Head{norm(a)}, Axis: 1}, Steps: []exec.Step{{Op: exec.StepRope, In: []exec.Tensor{nil, cos}, Spec: s}}},
	} {
		if err := bad.Check(); err == nil {
			t.Errorf("%v: accepted", bad)
		}
	}
}
