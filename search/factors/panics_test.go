package factors

import (
	"math"
	"testing"

	"github.com/zflow/zflow/search/internal/attn"
	"github.com/zflow/zflow/search/internal/rotary"
)

// halfTables is a cat([cos, cos]) / cat([sin, sin]) table (rotate-half
// layout, as most language models build it) of rows × dim at θ.
func halfTables(rows, dim int, theta float64) (cos, sin []float32) {
	for r := range rows {
		for c := range dim {
			f := math.Pow(theta, -2*float64(c%(dim/2))/float64(dim))
			cos, sin = append(cos, float32(math.Cos(float64(r)*f))), append(sin, float32(math.Sin(float64(r)*f)))
		}
	}
	return cos, sin
}

// TestThetaOfUnreadTables: Positions reads frequencies off the tables
// only where it can (readAxes: not for rotate-half tables of several
// axes, nor for tables whose angles do not start at the ids); θ is then
// not estimated (0), where it used to index past the frequencies (the
// panic at positions.go:440 on real traces with cat([cos, cos]) tables).
func TestThetaOfUnreadTables(t *testing.T) {
	for _, tc := range []struct {
		name string
		freq []float64
		axes []int
	}{
		{"rotate-half, two axes: nothing read", nil, []int{8, 8}},
		{"one axis, nothing read", nil, []int{16}},
		{"fewer than the axes need", []float64{1, 0.5}, []int{8, 8}},
	} {
		if got := rotary.Theta(tc.freq, tc.axes); got != 0 {
			t.Errorf("%s: θ %v from %d frequencies for axes %v", tc.name, got, len(tc.freq), tc.axes)
		}
	}
	cos, sin := halfTables(12, 16, 10000)
	pt := posTable{src: tableSrc{cos: cos, sin: sin, w: 16, rows: 12}}
	ids := make([]float32, 12)
	for i := range ids {
		ids[i] = float32(i)
	}
	if _, f := readAxes(pt.angles(attn.Half), ids, 1); rotary.Theta(f, []int{16}) != 10000 {
		t.Errorf("cat([cos, cos]) tables read as halves: θ %v, want 10000", rotary.Theta(f, []int{16}))
	}
}

// TestRopeTablesTooShort: a block argument that is not a table of the
// rows (an attention mask [1, 1, T, T] of 0 and −inf beside the cos/sin
// pair) is not loaded as one, and a table shorter than the rows it must
// cover is refused (false), where slicing it used to panic
// (objectives.go:53 on real traces).
func TestRopeTablesTooShort(t *testing.T) {
	if unitBounded([]float32{0, float32(math.Inf(-1))}) || unitBounded([]float32{0, -3.4e38}) || unitBounded(nil) {
		t.Error("a mask reads as a table")
	}
	if cos, sin := halfTables(4, 8, 10000); !unitBounded(cos) || !unitBounded(sin) {
		t.Error("cos/sin tables do not read as tables")
	}
	cos, sin := halfTables(9, 16, 10000) // 144 values: 9 rows where 12 are needed
	b := &block{sets: []set{{rows: 12}}, tables: []tableSrc{{cos: cos, sin: sin, w: 16, rows: 12}}}
	if _, ok := b.ropeTables([]int{0}, attn.Half); ok {
		t.Error("a 9-row table covers 12 rows")
	}
	b = &block{sets: []set{{rows: 12}, {rows: 4}}, tables: []tableSrc{{cos: cos, sin: sin, w: 16, rows: 12}, {cos: cos[:16], sin: sin[:16], w: 16, rows: 4}}}
	if _, ok := b.ropeTables([]int{0, 1}, attn.Half); ok {
		t.Error("per-set tables shorter than their rows cover them")
	}
	full, fsin := halfTables(12, 16, 10000)
	b = &block{sets: []set{{rows: 12}}, tables: []tableSrc{{cos: full, sin: fsin, w: 16, rows: 12}}}
	if tb, ok := b.ropeTables([]int{0}, attn.Half); !ok || len(tb.Cos) != 12*16 {
		t.Errorf("a whole table: ok %v, %d values", ok, len(tb.Cos))
	}
}
