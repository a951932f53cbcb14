package program

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/cpu"
	"github.com/zflow/zflow/internal/backendtest"
	"github.com/zflow/zflow/precision"
)

// TestRegions builds small programs by hand and checks which regions the
// interpreter offers, and that the fused run equals the plain one.
func TestRegions(t *testing.T) {
	bf := precision.BF16
	s := exec.Out(bf)
	lin := func(x, w, b, out string) Node {
		return Node{Op: OpLinear, In: []string{x, w, b}, Out: []string{out}, Spec: s}
	}
	act := func(x, out string, f exec.ActKind) Node {
		return Node{Op: OpAct, In: []string{x}, Out: []string{out}, Spec: s, Attrs: Attrs{Act: f}}
	}
	cases := []struct {
		name    string
		nodes   []Node
		outputs []string
		taps    []string // temps with a tap (watched when observe is set)
		observe bool
		segs    []Segment
		want    []string
	}{
		{"linear, act", []Node{lin("x", "w", "b", "h"), act("h", "y", exec.ActGELUTanh)}, []string{"y"}, nil, false, nil,
			[]string{"linear → act(gelu_tanh)"}},
		{"linear, act, gated residual on y", []Node{lin("x", "w", "", "h"), act("h", "a", exec.ActSiLU),
			{Op: OpGatedResidual, In: []string{"r", "a", "g"}, Out: []string{"y"}, Spec: s, Attrs: Attrs{Act: exec.ActTanh}}},
			[]string{"y"}, nil, false, nil, []string{"linear → act(silu) → gated_residual(tanh)"}},
		{"norm, modulate, cast", []Node{{Op: OpNorm, In: []string{"x", "", ""}, Out: []string{"n"}, Spec: s, Attrs: Attrs{Norm: exec.NormParams{Kind: exec.NormLayer, Eps: 1e-6}}},
			{Op: OpModulate, In: []string{"n", "sh", "sc"}, Out: []string{"m"}, Spec: s, Attrs: Attrs{Modulate: exec.ModulateParams{PlusOne: true}}},
			{Op: OpCast, In: []string{"m"}, Out: []string{"y"}, Attrs: Attrs{Format: precision.F32}}},
			[]string{"y"}, nil, false, nil, []string{"norm → modulate → cast(f32)"}},
		{"two linears into a GLU: the second heads it", []Node{lin("x", "w", "b", "g"), lin("x", "w", "b", "u"),
			{Op: OpGLU, In: []string{"g", "u"}, Out: []string{"y"}, Spec: s, Attrs: Attrs{Act: exec.ActSiLU}}},
			[]string{"y"}, nil, false, nil, []string{"linear → glu(silu)"}},
		{"an intermediate read twice", []Node{lin("x", "w", "b", "h"), {Op: OpMul, In: []string{"h", "h"}, Out: []string{"y"}, Spec: s}},
			[]string{"y"}, nil, false, nil, nil},
		{"an intermediate that is an output", []Node{lin("x", "w", "b", "h"), act("h", "y", exec.ActReLU)},
			[]string{"h", "y"}, nil, false, nil, nil},
		{"an intermediate read later too", []Node{lin("x", "w", "b", "h"), act("h", "a", exec.ActReLU), {Op: OpAdd, In: []string{"a", "h"}, Out: []string{"y"}, Spec: s}},
			[]string{"y"}, nil, false, nil, nil},
		{"a watched boundary cuts the chain", []Node{lin("x", "w", "b", "h"), act("h", "a", exec.ActSiLU), act("a", "y", exec.ActTanh)},
			[]string{"y"}, []string{"a"}, true, nil, []string{"linear → act(silu)"}},
		{"an unwatched boundary does not", []Node{lin("x", "w", "b", "h"), act("h", "a", exec.ActSiLU), act("a", "y", exec.ActTanh)},
			[]string{"y"}, []string{"a"}, false, nil, []string{"linear → act(silu) → act(tanh)"}},
		{"a segment's start cuts it", []Node{lin("x", "w", "b", "h"), act("h", "a", exec.ActSiLU), act("a", "y", exec.ActTanh)},
			[]string{"y"}, nil, false, []Segment{{Address: "s", Module: "m", Start: 2, End: 3}}, []string{"linear → act(silu)"}},
		{"at most MaxRegionSteps steps", []Node{lin("x", "w", "b", "h"), act("h", "a1", exec.ActSiLU), act("a1", "a2", exec.ActTanh),
			act("a2", "a3", exec.ActReLU), act("a3", "a4", exec.ActSiLU), act("a4", "y", exec.ActTanh)},
			[]string{"y"}, nil, false, nil, []string{"linear → act(silu) → act(tanh) → act(relu) → act(silu)"}},
	}
	r := rand.New(rand.NewPCG(5, 6))
	rnd := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(r.NormFloat64())
		}
		return v
	}
	inputs := map[string]*Value{
		"x": in("x", Input, bf, []int{2, 3, 8}, rnd(48)...), "w": in("w", Weight, bf, []int{8, 8}, rnd(64)...),
		"b": in("b", Weight, bf, []int{8}, rnd(8)...), "r": in("r", Input, bf, []int{2, 3, 8}, rnd(48)...),
		"g": in("g", Input, precision.F32, []int{2, 8}, rnd(16)...), "sh": in("sh", Input, bf, []int{2, 8}, rnd(16)...),
		"sc": in("sc", Input, bf, []int{2, 8}, rnd(16)...),
	}
	for _, c := range cases {
		build := func() *Program {
			p := &Program{Values: map[string]*Value{}, Outputs: c.outputs, Segments: c.segs}
			for _, n := range c.nodes {
				for _, name := range n.In {
					if v, ok := inputs[name]; ok && p.Values[name] == nil {
						p.Values[name], p.Order = v, append(p.Order, name)
					}
				}
				for _, o := range n.Out {
					v := &Value{Name: o, Kind: Temp, Shape: []int{2, 3, 8}}
					if slices.Contains(c.taps, o) {
						v.Taps = []Tap{{Module: "m", Port: "out"}}
					}
					p.Values[o], p.Order = v, append(p.Order, o)
				}
			}
			p.Nodes = c.nodes
			if err := p.finalize(); err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			return p
		}
		run := func(b exec.Backend) ([][]float32, int) {
			env := map[string]exec.Tensor{}
			for name, v := range inputs {
				x, err := b.Upload(v.Data, v.Shape, v.Format)
				if err != nil {
					t.Fatal(err)
				}
				env[name] = x
			}
			it := &Interpreter{B: b, P: build()}
			if c.observe {
				it.Hooks.Observe = func(int, Tap, exec.Tensor) error { return nil }
			}
			outs, err := it.Forward(0, env)
			if err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			var got [][]float32
			for _, o := range outs {
				d, err := b.Download(o)
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, d)
				b.Free(o)
			}
			for _, x := range env {
				b.Free(x)
			}
			live := 0
			if cb, ok := b.(*backendtest.Fuser); ok {
				live = cb.Live
			}
			return got, live
		}
		want, _ := run(cpu.New(1))
		for _, decline := range []bool{false, true} {
			f := backendtest.NewFuser(cpu.New(1))
			f.Decline = decline
			got, live := run(f)
			if !slices.Equal(f.Offered, c.want) {
				t.Errorf("%s: offered %q, want %q", c.name, f.Offered, c.want)
			}
			if live != 0 {
				t.Errorf("%s (decline %v): %d tensors left alive", c.name, decline, live)
			}
			for k := range want {
				for i := range want[k] {
					if math.Float32bits(got[k][i]) != math.Float32bits(want[k][i]) {
						t.Fatalf("%s (decline %v): output %d [%d] = %v, unfused %v", c.name, decline, k, i, got[k][i], want[k][i])
					}
				}
			}
		}
	}
}
