package synth

import (
	"fmt"
	"slices"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/program"
)

// sharedKVAttention explains t [B, S, H·D] (or [B, S, G, H·D/G]) as
// attention whose keys and values are one value of the scope (a single
// KV head read as both, the values as they are or rotated as the keys
// are), its output as it is or rotated back by one of the scope's RoPE
// tables (the table's sin negated: the inverse rotation, which undoes on
// the output what rotating the values did). The rotated-back form is
// found by reading the target rotated forward by the table (exactly the
// attention's output, where the form holds), explaining that, and
// checking the rotation back against the target. A late form: tried
// only where every other attention form failed.
func (s *synth) sharedKVAttention(t *val, sc *scope) *val {
	tm := t
	if len(t.shape) == 4 && !t.reshapedFrom {
		merged := []int{t.shape[0], t.shape[1], t.shape[2] * t.shape[3]}
		tm = s.readAs(t, merged, slices.Clone)
		tm.reshapedFrom = true
	}
	if len(tm.shape) != 3 {
		return nil
	}
	// only beside a value that could be its queries (S rows of W, or H
	// heads of them)
	if !slices.ContainsFunc(sc.vals, func(v *val) bool {
		return sc.own[v] && !v.opaque && len(v.shape) >= 3 && len(v.shape) <= 4 && v.shape[0] == tm.shape[0] && v.numel() == tm.numel()
	}) {
		return nil
	}
	// and beside one narrower than the rows it would make: a single head's
	// keys and values (so a wide attention that failed for another reason,
	// a trace that does not reproduce, pays nothing more here)
	width := tm.shape[2]
	rows := tm.numel() / width
	if !slices.ContainsFunc(sc.vals, func(v *val) bool {
		if !sc.own[v] || v.opaque || len(v.shape) < 2 {
			return false
		}
		w := v.shape[len(v.shape)-1]
		return w < width && width%w == 0 && v.numel()/w == rows
	}) {
		return nil
	}
	s.sharedKV = true
	defer func() { s.sharedKV = false }()
	back := func(v *val) *val {
		if v == nil || len(t.shape) == 3 {
			return v
		}
		return s.reshape(v, t.shape)
	}
	if v := s.attentionOf(tm, sc, false); v != nil {
		return back(v)
	}
	tol := tolerance(t.format)
	tables := s.ropeTables(sc)
	tables = slices.Concat(tables, s.relaid(tables), s.doubled(tables), s.paired(tables))
	// tables as wide as the heads of a per-head value of the scope ([B, H,
	// S, d]: q after its split) first; the others after
	headWidth := func(tb [2]*val) bool {
		d := tb[0].shape[len(tb[0].shape)-1]
		return slices.ContainsFunc(sc.vals, func(v *val) bool { return sc.own[v] && len(v.shape) == 4 && v.shape[3] == d })
	}
	slices.SortStableFunc(tables, func(a, b [2]*val) int {
		switch ha, hb := headWidth(a), headWidth(b); {
		case ha && !hb:
			return -1
		case hb && !ha:
			return 1
		}
		return 0
	})
	for _, tb := range tables {
		d := tb[0].shape[len(tb[0].shape)-1]
		if d < 2 || width%d != 0 || tableRows(tb[0]) != tm.shape[1] || tb[0].perHead > 0 {
			continue
		}
		neg := s.derive(&expr{op: program.OpMul, args: []*val{tb[1], s.constant(-1)}, out: tb[1].format, label: "sin negated"})
		if neg == nil {
			continue
		}
		inv := [2]*val{tb[0], neg}
		for _, layout := range []exec.RopeLayout{exec.RopeHalf, exec.RopeInterleaved} {
			// the target rotated forward: the attention's output, where
			// the output was rotated back by this table
			forward := func(data []float32) []float32 {
				x := &val{shape: tm.shape, data: data, format: tm.format}
				r := s.rotate(x, tb, layout, width/d, d)
				if r == nil {
					return nil
				}
				return r.data
			}
			fd := forward(tm.data)
			if fd == nil {
				continue
			}
			proxy := s.readAs(tm, tm.shape, forward)
			proxy.data = fd
			proxy.reshapedFrom = true
			a := s.attentionOf(proxy, sc, false)
			if a == nil {
				continue
			}
			out := s.rotate(a, inv, layout, width/d, d)
			if out == nil {
				continue
			}
			if e := relRMS(t.format, out.data, tm.data); e > tol || !s.everyStep(out, tm, tol) {
				continue
			}
			if out.from != nil {
				out.from.label = fmt.Sprintf("attention output rotated back (%s, sin negated)", layout)
			}
			return back(out)
		}
	}
	return nil
}

// paired are tables of one angle per pair of channels ([.., r]: a head of
// 2r), each column repeated for its pair (cos.repeat_interleave(2)), for
// rotation of adjacent pairs.
func (s *synth) paired(tables [][2]*val) [][2]*val {
	var out [][2]*val
	for _, tb := range tables {
		var two [2]*val
		for i, v := range tb {
			n := len(v.shape)
			col := s.reshape(v, append(slices.Clone(v.shape), 1))
			rep := s.derive(&expr{op: program.OpConcat, attrs: program.Attrs{Axis: n}, args: []*val{col, col}, out: v.format, label: "each angle twice"})
			lead := slices.Clone(v.shape[:n-1])
			two[i] = s.reshape(rep, append(lead, 2*v.shape[n-1]))
		}
		if two[0] != nil && two[1] != nil {
			out = append(out, two)
		}
	}
	return out
}
