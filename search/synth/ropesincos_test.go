package synth

import (
	"testing"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/precision"
)

// TestRopeTableSinCos: f32 RoPE tables made with a GPU's sinf and cosf
// (exec.MathCUDASinCos) are fitted with that math, and tables made with
// correctly rounded ones without it; each fit reproduces its tables
// exactly (the rel-RMS fit alone cannot tell an ulp apart).
func TestRopeTableSinCos(t *testing.T) {
	const seq, d = 96, 16
	pos := make([]float32, seq)
	for i := range pos {
		pos[i] = float32(i)
	}
	p := exec.RopeTableParams{Theta: 10000, AxesDims: []int{d}, Layout: exec.RopeHalf, FreqFormat: precision.F32, AngleFormat: precision.F32}
	for _, m := range []exec.Math{exec.MathCUDASinCos, exec.MathPrecise} {
		c, sn, err := exec.RopeTables(pos, seq, p, m)
		if err != nil {
			t.Fatal(err)
		}
		other, _, _ := exec.RopeTables(pos, seq, p, exec.MathCUDASinCos^m)
		if exactCount(precision.F32, other, c) == len(c) {
			t.Fatalf("math %v: the two maths make the same table; the test shows nothing", m)
		}
		tr, _ := writeBF16Trace(t, bf16Call{name: "drop", class: "Dropout", shape: []int{1, 2}, x: []float32{0, 0}, y: []float32{0, 0}})
		s, _ := testSearch(tr, precision.BF16)
		ids := &val{shape: []int{1, seq}, data: pos, format: precision.F32, intType: true, origin: "input/ids"}
		cosT := &val{shape: []int{1, seq, d}, data: c, format: precision.F32, origin: "m.rope/out.0"}
		sinT := &val{shape: []int{1, seq, d}, data: sn, format: precision.F32, origin: "m.rope/out.1"}
		cv, sv := s.fitRopeTable([]*val{ids}, cosT, sinT)
		if cv == nil || sv == nil {
			t.Fatalf("math %v: tables not fitted", m)
		}
		if got := exactCount(precision.F32, cv.data, c) + exactCount(precision.F32, sv.data, sn); got != 2*len(c) {
			t.Errorf("math %v: %d of %d values exact (fit %+v)", m, got, 2*len(c), cv.fit.rope)
		}
		e := cv.from
		for e != nil && e.op.String() != "rope_table" && len(e.args) > 0 && e.args[0].from != nil {
			e = e.args[0].from
		}
		if e == nil || e.op.String() != "rope_table" || e.math != m {
			t.Errorf("math %v: fitted %+v", m, e)
		}
	}
}
