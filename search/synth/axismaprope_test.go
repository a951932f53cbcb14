package synth

import (
	"slices"
	"testing"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/precision"
)

// TestReadFreqAxes: the column turning each frequency of one ladder is
// read back from f32 tables made by rope_table with that map (interleaved
// t h w, sectioned, mixed; both layouts; θ read from frequency 1) over ids
// of text rows (every column equal) and an image grid far from zero (t
// fixed, h and w running, offset 65536); every frequency shown (margin ≥ 2).
// Over the text rows alone no column is shown (margin 1 everywhere).
func TestReadFreqAxes(t *testing.T) {
	const d = 16
	var ids []float32
	for i := range 4 {
		ids = append(ids, float32(i), float32(i), float32(i))
	}
	for h := range 2 {
		for w := range 4 {
			ids = append(ids, 65536, float32(65536+h), float32(65536+w))
		}
	}
	rows := len(ids) / 3
	for _, c := range []struct {
		name  string
		theta float64
		axes  []int
	}{
		{"interleaved", 5e6, []int{0, 1, 2, 0, 1, 2, 0, 1}},
		{"sectioned", 10000, []int{0, 0, 1, 1, 1, 2, 2, 2}},
		{"mixed", 1e6, []int{2, 0, 2, 1, 0, 1, 1, 0}},
	} {
		for _, layout := range []exec.RopeLayout{exec.RopeHalf, exec.RopeInterleaved} {
			p := exec.RopeTableParams{Theta: c.theta, AxesDims: []int{d}, Layout: layout, FreqFormat: precision.F32, AngleFormat: precision.F32, FreqAxes: c.axes}
			cos, sin, err := exec.RopeTables(ids, rows, p, exec.MathPrecise)
			if err != nil {
				t.Fatal(err)
			}
			cosT := &val{shape: []int{rows, d}, data: cos, format: precision.F32}
			sinT := &val{shape: []int{rows, d}, data: sin, format: precision.F32}
			p2 := &val{shape: []int{rows, 3}, data: ids, format: precision.F32}
			angles := tableAngles(cosT, sinT, layout)
			if th := ladderThetas(angles, p2, d); !slices.Contains(th, c.theta) {
				t.Errorf("%s %v: θ %g not among those read, %v", c.name, layout, c.theta, th)
			}
			axes, margins := readFreqAxes(angles, p2, ladder(c.theta, d))
			if !slices.Equal(axes, c.axes) || shown(margins) != len(axes) {
				t.Errorf("%s %v: read %v (margins %v), want %v", c.name, layout, axes, margins, c.axes)
			}
			text := &val{shape: []int{4, 3}, data: ids[:12], format: precision.F32}
			if _, m := readFreqAxes(angles[:4], text, ladder(c.theta, d)); shown(m) != 0 {
				t.Errorf("%s %v: text rows alone (every column equal) show axes, margins %v", c.name, layout, m)
			}
		}
	}
}
