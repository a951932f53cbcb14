package synth

import (
	"maps"
	"slices"

	"github.com/zflow/zflow/exec/program"
)

// learnedRopeTable explains t [H, S, 2·F] as one RoPE table of learned
// per-head frequencies made in the forward and handed to the blocks
// (timm's mixed RoPE: cat(sin, cos) of the angles P·W, heads first,
// each column repeated twice when the rotation takes adjacent pairs):
// the halves are read apart as sin and cos tables [S, H, F'] and
// explained by fitLearnedRope over W [k, H, F'], a parameter of an
// uncalled sub-module of the scope or one slice of it along an axis
// (the frequencies of one block of a table stacked by depth); the table
// is then rebuilt from them. Only where t's halves lie on the unit
// circle.
func (s *synth) learnedRopeTable(t *val, sc *scope) *val {
	if len(t.shape) != 3 || t.shape[2]%2 != 0 || t.integral() {
		return nil
	}
	h, n, w := t.shape[0], t.shape[1], t.shape[2]/2
	first, second := s.part(t, 2, 0, w), s.part(t, 2, w, 2*w)
	if !unitCircle(first, second) {
		return nil
	}
	rep := 1 // each column repeated twice: the angles are every other one
	if pairsRepeated(first.data, w) && pairsRepeated(second.data, w) {
		rep = 2
	}
	f := w / rep
	ws := s.frequencyArguments(sc, h, f)
	if len(ws) == 0 {
		return nil
	}
	// a half read as [S, H, F']: every rep-th column, positions first
	tables := func(half *val) *val {
		return s.readAs(half, []int{n, h, f}, func(d []float32) []float32 {
			out := make([]float32, n*h*f)
			for hh := range h {
				for i := range n {
					for c := range f {
						out[(i*h+hh)*f+c] = d[(hh*n+i)*w+c*rep]
					}
				}
			}
			return out
		})
	}
	for _, wv := range ws {
		for _, sinFirst := range []bool{true, false} {
			if v := s.rebuiltRopeTable(t, wv, tables(first), tables(second), sinFirst, rep); v != nil {
				return v
			}
		}
	}
	return nil
}

// rebuiltRopeTable is learnedRopeTable's fit for one argument W and one
// order of the halves: the tables explained by fitLearnedRope, then laid
// back out as t; nil where either step fails.
func (s *synth) rebuiltRopeTable(t, wv, first, second *val, sinFirst bool, rep int) *val {
	h, n, w := t.shape[0], t.shape[1], t.shape[2]/2
	f := w / rep
	sinT, cosT := first, second
	if !sinFirst {
		sinT, cosT = cosT, sinT
	}
	cv, sv := s.fitLearnedRope([]*val{wv}, cosT, sinT)
	if cv == nil {
		return nil
	}
	back := func(x *val) *val { // [S, H, F'] → [H, S, F'·rep]
		if rep == 2 {
			x4 := s.reshape(x, []int{n, h, f, 1})
			x = s.reshape(s.derive(&expr{op: program.OpConcat, attrs: program.Attrs{Axis: 3}, args: []*val{x4, x4}, out: x.format, label: "each angle's column twice"}), []int{n, h, w})
		}
		return s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: []int{1, 0, 2}}, args: []*val{x}, out: x.format, label: "heads first"})
	}
	halves := []*val{back(sv), back(cv)}
	if !sinFirst {
		halves[0], halves[1] = halves[1], halves[0]
	}
	v, _ := s.best(t, []*expr{{op: program.OpConcat, attrs: program.Attrs{Axis: 2}, args: halves, out: t.format, label: "learned RoPE table [sin | cos]"}})
	return v
}

// pairsRepeated reports whether every row of width w holds each column
// twice in a row (x[2i] = x[2i+1]).
func pairsRepeated(x []float32, w int) bool {
	if w%2 != 0 {
		return false
	}
	for i := 0; i+1 < len(x); i += 2 {
		if x[i] != x[i+1] {
			return false
		}
	}
	return true
}

// frequencyArguments are the learned frequency arguments W [k, h, f] (k ≤
// 3 position axes) that the uncalled sub-modules of sc's module hold: a
// parameter of that shape, or each slice along one axis of a parameter
// one axis longer (a stack of them, one per block); each also with its
// position axes reversed.
func (s *synth) frequencyArguments(sc *scope, h, f int) []*val {
	var out []*val
	subs := s.uncalledSubs(sc.module)
	for _, sub := range slices.Sorted(maps.Keys(subs)) {
		for _, name := range subs[sub] {
			p, err := s.param(name)
			if err != nil || p.integral() {
				continue
			}
			switch {
			case len(p.shape) == 3 && p.shape[0] <= 3 && p.shape[1] == h && p.shape[2] == f:
				out = append(out, p)
			case len(p.shape) == 4 && p.shape[0] <= 3 && p.shape[2] == h && p.shape[3] == f:
				for i := range p.shape[1] {
					c := s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: 1, Start: i, End: i + 1}, args: []*val{p}, out: p.format, label: "one block's frequencies"})
					if r := s.reshape(c, []int{p.shape[0], h, f}); r != nil {
						out = append(out, r)
					}
				}
			}
		}
	}
	// the position axes in the other order too: a grid indexed 'xy'
	// pairs W's first row with the fastest axis
	for _, wv := range slices.Clone(out) {
		if k := wv.shape[0]; k > 1 {
			rows := make([]*val, k)
			for a := range k {
				rows[k-1-a] = s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: 0, Start: a, End: a + 1}, args: []*val{wv}, out: wv.format, label: "one axis's frequencies"})
			}
			if r := s.derive(&expr{op: program.OpConcat, attrs: program.Attrs{Axis: 0}, args: rows, out: wv.format, label: "position axes reversed"}); r != nil {
				out = append(out, r)
			}
		}
	}
	return out
}
