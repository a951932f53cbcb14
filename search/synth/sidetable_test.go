package synth

import (
	"slices"
	"testing"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/cpu"
	"github.com/zflow/zflow/precision"
)

// sideTable is one tensor [rows, 2d] holding RoPE tables side by side
// over a 4×4 grid whose positions are scaled by 4 (a grid rescaled to the
// size a model was trained at), per axis d/2 wide, interleaved: [sin |
// cos], or [cos | sin] where cosFirst.
func sideTable(t *testing.T, cosFirst bool) *val {
	const d, rows = 16, 16
	var pos []float32
	for r := range rows {
		pos = append(pos, float32(4*(r/4)), float32(4*(r%4)))
	}
	p := exec.RopeTableParams{Theta: 1e4, AxesDims: []int{d / 2, d / 2}, Layout: exec.RopeInterleaved, FreqFormat: precision.F32, AngleFormat: precision.F32}
	cos, sin, err := exec.RopeTables(pos, rows, p, exec.MathPrecise)
	if err != nil {
		t.Fatal(err)
	}
	v := &val{shape: []int{rows, 2 * d}, format: precision.F32, origin: "blocks.0/kw.rope"}
	for r := range rows {
		a, b := sin[r*d:(r+1)*d], cos[r*d:(r+1)*d]
		if cosFirst {
			a, b = b, a
		}
		v.data = append(append(v.data, a...), b...)
	}
	return v
}

// TestSideBySideTable: one tensor holding a RoPE table's sin and cos side
// by side, made from the request's shape, is explained as the two tables
// fitted and joined in their order ([sin | cos] and [cos | sin]), the
// tables rope_table over the grid's positions at the stride read off the
// angles (θ 10⁴, not a coordinate ladder's alias); a
// tensor whose halves are not on the unit circle is not.
func TestSideBySideTable(t *testing.T) {
	for _, cosFirst := range []bool{false, true} {
		tb := sideTable(t, cosFirst)
		s := &synth{tr: oneStepTrace(t), ev: &evaluator{b: cpu.New(1)}, em: newEmitter(precision.F32)}
		v := s.fitSideBySideTable(tb)
		if v == nil {
			t.Fatalf("cos first %v: no fit", cosFirst)
		}
		if e := relRMS(precision.F32, v.data, tb.data); !slices.Equal(v.shape, tb.shape) || e > 1e-6 {
			t.Errorf("cos first %v: %v not reproduced: rel-RMS %g", cosFirst, v.shape, e)
		}
		if v.fit == nil || v.fit.kind != "rope_table" || v.fit.rope.Theta != 1e4 {
			t.Errorf("cos first %v: not read as rope_table θ 10⁴ over the strided grid: %+v", cosFirst, v.fit)
		}
	}
	tb := sideTable(t, false)
	for i := range tb.data {
		tb.data[i] *= 0.5
	}
	s := &synth{tr: oneStepTrace(t), ev: &evaluator{b: cpu.New(1)}, em: newEmitter(precision.F32)}
	if v := s.fitSideBySideTable(tb); v != nil {
		t.Error("halves off the unit circle taken for tables")
	}
}

// TestSideBySideWholeTables: a side-by-side table whose halves are each a
// whole table for one head (every angle twice already), over fewer rows
// than the sequence (a class token before the patches is not rotated),
// is offered to attention with its halves as they are.
func TestSideBySideWholeTables(t *testing.T) {
	tb := sideTable(t, false)
	s := &synth{tr: oneStepTrace(t), ev: &evaluator{b: cpu.New(1)}, em: newEmitter(precision.F32)}
	sc := &scope{own: map[*val]bool{}, arg: map[*val]bool{}}
	sc.add(tb, false)
	pairs := s.sideBySideTables(sc, nil, nil, 17, 64)
	found := false
	for _, p := range pairs {
		if slices.Equal(p[0].shape, []int{16, 16}) && slices.Equal(p[0].data[:16], tb.data[16:32]) && slices.Equal(p[1].data[:16], tb.data[:16]) {
			found = true
		}
	}
	if !found {
		t.Errorf("the halves as they are not offered (%d pairs)", len(pairs))
	}
}
