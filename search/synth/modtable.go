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
	w32 := float32s(want)
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

// tableSum is a row of a learned table [kt, C] plus chunk i of a
// vectorSum (two per-sample conditioning values summed first): a table
// added to a timestep embedding that is itself two embedders' sum (a
// timestep's and a second time's, added before the table is). With one
// chunk the row is any of the table's; with kt chunks, row i.
type tableSum struct {
	t   *val
	row int
	p   vectorSum
}

// nearestTableSum is the tableSum nearest want (after f), scored on the
// host in the reference's order ((u + w) first, then the row), and its
// rel-RMS (ok false: none in the scope).
func nearestTableSum(sc *scope, b, c int, want []float64, f exec.ActKind) (best tableSum, be float64, ok bool) {
	var tables []*val
	for _, v := range recentFirst(sc.vals) {
		if !v.opaque && v.param && len(v.shape) >= 2 && v.shape[len(v.shape)-1] == c && v.numel()/c <= 16 {
			tables = append(tables, v)
		}
	}
	pairs := sumPairs(sc, b, c)
	if len(tables) == 0 || len(pairs) == 0 {
		return best, 0, false
	}
	w32 := float32s(want)
	got := make([]float32, b*c)
	for _, t := range tables {
		kt := t.numel() / c
		for _, p := range pairs {
			u, w := p[0], p[1]
			k, kw := u.numel()/(b*c), w.numel()/(b*c)
			if k != 1 && k != kt {
				continue
			}
			for i := range k {
				for row := range kt {
					if k == kt && row != i {
						continue
					}
					for bi := range b {
						for ch := range c {
							x := t.data[row*c+ch] + (u.data[bi*k*c+i*c+ch] + w.data[bi*kw*c+i*c+ch])
							if f != exec.ActIdentity {
								x = exec.Activate(f, x, 0)
							}
							got[bi*c+ch] = x
						}
					}
					if r := relRMS(u.format, got, w32); !ok || r < be {
						best, be, ok = tableSum{t: t, row: row, p: vectorSum{u: u, w: w, k: k, i: i}}, r, true
					}
				}
			}
		}
	}
	return best, be, ok
}

// tableSumVector derives a tableSum's vector: the pair's sum chunked,
// then the table's row added (broadcast over the batch).
func (s *synth) tableSumVector(p tableSum, b, c int) vec {
	sv := s.sumVector(p.p, b, c)
	kt := p.t.numel() / c
	tr := s.reshape(p.t, []int{kt, c})
	if sv.v == nil || tr == nil {
		return vec{}
	}
	row := s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: 0, Start: p.row, End: p.row + 1}, args: []*val{tr}, out: p.t.format, label: "table row"})
	if row == nil {
		return vec{}
	}
	out := s.derive(&expr{op: program.OpAdd, args: []*val{row, sv.v}, out: sv.v.format, label: "table row + vector sum"})
	if out == nil {
		return vec{}
	}
	return vec{v: out, label: fmt.Sprintf("%s row %d/%d + %s", p.t, p.row, kt, sv.label), index: p.row, parts: kt, src: sv.src}
}

// float32s is xs rounded to f32.
func float32s(xs []float64) []float32 {
	out := make([]float32, len(xs))
	for i, x := range xs {
		out[i] = float32(x)
	}
	return out
}
