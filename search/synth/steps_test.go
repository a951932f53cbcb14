package synth

import (
	"fmt"
	"testing"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/precision"
	"github.com/zflow/zflow/trace"
)

// stepSigmas are the σ_i of the planted run: 1 − σ is 0 at step 0 only.
var stepSigmas = []float32{1, 0.75, 0.4}

// plantedSteps writes a trace of len(stepSigmas) steps whose one boundary
// s<i>/m/arg0 holds data(i), and returns a search over it with a scope
// holding 1 − σ_i (a step input made into a value, as a timestep is)
// and nothing else.
func plantedSteps(t *testing.T, shape []int, data func(step int) []float32, extra ...*val) (*synth, *scope, *val) {
	t.Helper()
	pt := newPlanted(t, "steps")
	m := &trace.Manifest{Format: "zflow-trace", Version: 1, Producer: map[string]any{"framework": "test", "dtype": "float32"}}
	for st := range stepSigmas {
		key := fmt.Sprintf("s%d/m/arg0", st)
		pt.f32(key, shape, data(st))
		step := st
		m.Calls = append(m.Calls, trace.Call{ID: st, Step: &step, Module: "m", Type: "T", Tensors: trace.Ports{{Name: "arg0", Key: key}}})
	}
	s, sc := testSearch(pt.open(m), precision.F32)
	sigma := &val{shape: []int{1}, data: stepSigmas[:1], format: f32, request: true,
		perStep: func(st int) []float32 { return stepSigmas[st : st+1] }}
	oneMinus := s.derive(&expr{op: program.OpSub, args: []*val{s.constant(1), sigma}, out: f32, label: "1 − σ"})
	sc.add(oneMinus, false) // alone: no pair of values makes the table's entries
	for _, v := range extra {
		sc.add(v, false)
	}
	target, err := s.capture("s0/m/arg0")
	if err != nil {
		t.Fatal(err)
	}
	return s, sc, target
}

// TestJoinPieceEveryStep: a target whose first entry is 0 at every step
// and the rest a table equal at every step is not 1 − σ (0 at step 0
// only) joined to the table, whatever its size or layout (the piece
// checked against the target's own entry at the other steps); where the
// first entry is 1 − σ_i at each step, the join is found.
func TestJoinPieceEveryStep(t *testing.T) {
	for _, tc := range []struct {
		name   string
		shape  []int
		varies bool // the first entry is 1 − σ_i (else 0 at every step)
	}{
		{"small", []int{1, 8}, false},
		{"large", []int{1, 100}, false},
		{"image", []int{1, 1, 10, 10}, false}, // read as rows [1, 100, 1] first
		{"small holds", []int{1, 8}, true},
		{"large holds", []int{1, 100}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := exec.Numel(tc.shape)
			data := func(st int) []float32 {
				d := make([]float32, n)
				for i := 1; i < n; i++ {
					d[i] = float32(-3 - i%5) // a table: the same at every step
				}
				if tc.varies {
					d[0] = 1 - stepSigmas[st]
				}
				return d
			}
			s, sc, target := plantedSteps(t, tc.shape, data)
			v := s.glue(target, sc)
			if !tc.varies {
				if v != nil {
					t.Fatalf("explained as %s: holds at step 0 only", describe(v))
				}
				return
			}
			if v == nil {
				t.Fatal("not explained")
			}
			for st := range stepSigmas {
				got, ok := s.at(v, st)
				if !ok || relRMS(f32, got, data(st)) > tolerance(f32) {
					t.Errorf("%s does not reproduce step %d", describe(v), st)
				}
			}
		})
	}
}

// TestBroadcastPieceEveryStep: the same for a piece broadcast over rows
// (a step's features beside a table of slot features): columns 0 at
// every step are not (1 − σ)·[1, 2] repeated over the rows, columns that
// are it at each step are.
func TestBroadcastPieceEveryStep(t *testing.T) {
	feats := func(st int) []float32 { return []float32{1 - stepSigmas[st], 2 * (1 - stepSigmas[st])} }
	for _, varies := range []bool{false, true} {
		t.Run(fmt.Sprintf("varies=%v", varies), func(t *testing.T) {
			const rows, width = 4, 6
			data := func(st int) []float32 {
				d := make([]float32, rows*width)
				for r := range rows {
					for c := 2; c < width; c++ {
						d[r*width+c] = float32(r - c) // a table
					}
					if varies {
						copy(d[r*width:], feats(st))
					}
				}
				return d
			}
			u := &val{shape: []int{1, 2}, data: feats(0), format: f32, perStep: feats}
			s, sc, target := plantedSteps(t, []int{1, rows, width}, data, u)
			v := s.glue(target, sc)
			if !varies {
				if v != nil {
					t.Fatalf("explained as %s: holds at step 0 only", describe(v))
				}
				return
			}
			if v == nil {
				t.Fatal("not explained")
			}
			for st := range stepSigmas {
				if got, ok := s.at(v, st); !ok || relRMS(f32, got, data(st)) > tolerance(f32) {
					t.Errorf("%s does not reproduce step %d", describe(v), st)
				}
			}
		})
	}
}

// describe is v's expression, one level deep.
func describe(v *val) string {
	if v.from == nil {
		return v.String()
	}
	s := v.from.desc() + "("
	for i, a := range v.from.args {
		if i > 0 {
			s += ", "
		}
		if a != nil {
			s += a.String()
		}
	}
	return s + ")"
}

// stepVal is a value of the scope whose entries at step st are f(st).
func stepVal(shape []int, f func(st int) []float32) *val {
	return &val{shape: shape, data: f(0), format: f32, perStep: f}
}

// rowsAt is the data of a [1, n, d] value at step st: entry (r, c) is
// seed + st + r·d + c scaled, distinct everywhere.
func rowsAt(n, d int, seed float32) func(st int) []float32 {
	return func(st int) []float32 {
		out := make([]float32, n*d)
		for i := range out {
			out[i] = seed + 0.37*float32(st) + 0.013*float32(i*i%17) + 0.1*float32(i)
		}
		return out
	}
}

// TestReorderedRows: rows of two values joined valid rows first, then the
// padding of each (cat[a[:2], b[:3], a[2:], b[3:]], two captions joined
// as HunyuanImage-2.1 joins them) are explained as parts of the values,
// at every step.
func TestReorderedRows(t *testing.T) {
	const d = 4
	fa, fb := rowsAt(3, d, 1), rowsAt(4, d, -2)
	data := func(st int) []float32 {
		a, b := fa(st), fb(st)
		var out []float32
		out = append(out, a[:2*d]...)
		out = append(out, b[:3*d]...)
		out = append(out, a[2*d:]...)
		return append(out, b[3*d:]...)
	}
	s, sc, target := plantedSteps(t, []int{1, 7, d}, data, stepVal([]int{1, 3, d}, fa), stepVal([]int{1, 4, d}, fb))
	v := s.glue(target, sc)
	if v == nil {
		t.Fatal("not explained")
	}
	for st := range stepSigmas {
		if got, ok := s.at(v, st); !ok || relRMS(f32, got, data(st)) > tolerance(f32) {
			t.Errorf("%s does not reproduce step %d", describe(v), st)
		}
	}
}

// TestScaledSum: (a + b)/2 + c (two time embeddings averaged, a guidance
// embedding added) is explained, at every step.
func TestScaledSum(t *testing.T) {
	const n = 12
	fa, fb, fc := rowsAt(1, n, 1), rowsAt(1, n, -3), rowsAt(1, n, 0.5)
	data := func(st int) []float32 {
		a, b, c := fa(st), fb(st), fc(st)
		out := make([]float32, n)
		for i := range out {
			out[i] = (a[i]+b[i])/2 + c[i]
		}
		return out
	}
	shape := []int{1, 1, n}
	s, sc, target := plantedSteps(t, shape, data, stepVal(shape, fa), stepVal(shape, fb), stepVal(shape, fc))
	v := s.glue(target, sc)
	if v == nil {
		t.Fatal("not explained")
	}
	for st := range stepSigmas {
		if got, ok := s.at(v, st); !ok || relRMS(f32, got, data(st)) > tolerance(f32) {
			t.Errorf("%s does not reproduce step %d", describe(v), st)
		}
	}
}
