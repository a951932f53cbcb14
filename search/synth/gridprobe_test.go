package synth

import (
	"testing"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/precision"
)

// TestGridRopeProbe: fitGridRope still finds a 3×4 grid's tables, and
// rejects without scoring a single candidate tables that never turn (a
// rotary module's solve of an identity) and tables whose first row turns
// (no grid's: position 0 on every axis is cos 1, sin 0).
func TestGridRopeProbe(t *testing.T) {
	s, _ := testSearch(nil, precision.F32)
	p := exec.RopeTableParams{Theta: 10000, AxesDims: []int{4, 4}, Layout: exec.RopeHalf, FreqFormat: precision.F32, AngleFormat: precision.F32}
	e := &expr{op: program.OpRopeTable, attrs: program.Attrs{RopeTable: p}, args: []*val{gridIDs([]int{3, 4})}, out: precision.F32}
	cosT, err := s.ev.run(e)
	if err != nil {
		t.Fatal(err)
	}
	sinT, err := s.ev.run(pickOf(e, 1))
	if err != nil {
		t.Fatal(err)
	}
	if c, _ := s.fitGridRope(cosT, sinT); c == nil {
		t.Fatal("a 3×4 grid's tables not found")
	}
	still := func(rows int) (*val, *val) {
		c := &val{shape: []int{rows, 8}, data: make([]float32, rows*8), format: precision.F32}
		sn := &val{shape: []int{rows, 8}, data: make([]float32, rows*8), format: precision.F32}
		for i := range c.data {
			c.data[i] = 1
		}
		return c, sn
	}
	shifted := func() (*val, *val) { // rows 1… of the grid's, then a still row
		c, sn := still(12)
		copy(c.data, cosT.data[8:])
		copy(sn.data, sinT.data[8:])
		return c, sn
	}
	for name, tables := range map[string]func() (*val, *val){"never turns": func() (*val, *val) { return still(12) }, "first row turns": shifted} {
		c, sn := tables()
		before := s.ev.evals
		if got, _ := s.fitGridRope(c, sn); got != nil {
			t.Errorf("%s: explained as a grid's RoPE", name)
		}
		if n := s.ev.evals - before; n != 0 {
			t.Errorf("%s: %d candidates scored before the rejection", name, n)
		}
	}
}
