package synth

import (
	"fmt"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/program"
)

// tableRun is rows [start, start+k) of a table t [k', C] (k < k') plus
// the k chunks of w [B, k·C], chunk i of the sum: a table with more rows
// than the conditioning it is added to, its other rows added to another
// value (a gate's row kept in the scale/shift table).
type tableRun struct {
	t, w        *val
	start, k, i int
}

// nearestTableRun is the tableRun nearest want (after f), scored on the
// host, and its rel-RMS (ok false: none in the scope).
func nearestTableRun(sc *scope, b, c int, want []float64, f exec.ActKind) (best tableRun, be float64, ok bool) {
	var tables, chunked []*val
	for _, v := range recentFirst(sc.vals) {
		switch {
		case v.opaque || v.numel()%c != 0:
		case v.param && len(v.shape) >= 2 && v.shape[len(v.shape)-1] == c && v.numel()/c <= 16:
			tables = append(tables, v)
		case !v.param && v.shape[0] == b && v.numel()%(b*c) == 0 && v.numel() <= 16*b*c &&
			(len(v.shape) == 2 || len(v.shape) == 3 && v.shape[1] == 1):
			chunked = append(chunked, v)
		}
	}
	w32 := make([]float32, len(want))
	for i, x := range want {
		w32[i] = float32(x)
	}
	got := make([]float32, b*c)
	for _, t := range tables {
		kt := t.numel() / c
		for _, w := range chunked {
			k := w.numel() / (b * c)
			if k < 2 || k >= kt {
				continue // one chunk: table + vector; k' = k: table + chunks
			}
			for start := 0; start+k <= kt; start++ {
				for i := range k {
					for bi := range b {
						for ch := range c {
							x := t.data[(start+i)*c+ch] + w.data[bi*k*c+i*c+ch]
							if f != exec.ActIdentity {
								x = exec.Activate(f, x, 0)
							}
							got[bi*c+ch] = x
						}
					}
					if r := relRMS(w.format, got, w32); !ok || r < be {
						best, be, ok = tableRun{t: t, w: w, start: start, k: k, i: i}, r, true
					}
				}
			}
		}
	}
	return best, be, ok
}

// runVector derives a tableRun's chunk.
func (s *synth) runVector(p tableRun, b, c int) vec {
	kt := p.t.numel() / c
	tr := s.reshape(p.t, []int{1, kt, c})
	if tr == nil {
		return vec{}
	}
	rows := s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: 1, Start: p.start, End: p.start + p.k}, args: []*val{tr}, out: p.t.format, label: "table rows"})
	wr := s.reshape(p.w, []int{b, p.k, c})
	if rows == nil || wr == nil {
		return vec{}
	}
	sum := s.derive(&expr{op: program.OpAdd, args: []*val{rows, wr}, out: p.w.format, label: "table rows + chunks"})
	if sum == nil {
		return vec{}
	}
	sl := s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: 1, Start: p.i, End: p.i + 1}, args: []*val{sum}, out: sum.format})
	out := s.reshape(sl, []int{b, c})
	if out == nil {
		return vec{}
	}
	return vec{v: out, label: fmt.Sprintf("%s rows %d.. + %s chunk %d/%d", p.t, p.start, p.w, p.i, p.k), index: p.i, parts: p.k, src: p.w}
}
