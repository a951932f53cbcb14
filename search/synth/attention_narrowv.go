package synth

import (
	"slices"

	"github.com/zflow/zflow/exec/program"
)

// maxNarrowHeads bounds the head counts narrowValues tries per triple.
const maxNarrowHeads = 4

// narrowValues explains t [B, N, h·dv] as attention whose values are
// narrower per head than its queries and keys (dv < dk: SHViT's
// single-head attention, q and k of 16 channels, v of 8; the converse of
// unequalHeads). The attention op takes one head width, so v is padded
// per head with zeros to dk and the padding cut from the result: the
// scores and the weighted sum of the real columns are what they were.
// The padded attention is searched as any other (attentionOf) against t
// padded the same way, over a scope of q, k and the padded v beside the
// scope's parameters and arguments; only where each column of t lies
// within the range of v's (an attention's output is a convex combination
// of its values' rows).
func (s *synth) narrowValues(t *val, sc *scope) *val {
	if s.narrowing || len(t.shape) != 3 {
		return nil
	}
	s.narrowing = true
	defer func() { s.narrowing = false }()
	b, n, wt := t.shape[0], t.shape[1], t.shape[2]
	own := s.columnSpans(t)
	for _, tr := range s.narrowTriples(sc, t) {
		q, k, v := tr[0], tr[1], tr[2]
		if !columnsWithin(own, s.columnSpans(v)) {
			continue // t's columns are weighted means of v's rows: no attention over this v
		}
		wq := q.shape[2]
		tried := 0
		for h := 1; h <= wt && tried < maxNarrowHeads; h++ {
			if wq%h != 0 || wt%h != 0 || wq/h < minHeadDim {
				continue
			}
			tried++
			d, dv := wq/h, wt/h
			vp := s.padHeads(v, h, dv, d, "zeros padding v to the queries' head width (q·kᵀ and the real columns unchanged; made from the request's shape)")
			if vp == nil {
				continue
			}
			tp := s.readAs(t, []int{b, n, h * d}, func(x []float32) []float32 { return padHeadsData(x, b*n, h, dv, d) })
			tp.reshapedFrom = true
			sub := sc.emptied()
			for _, x := range sc.vals {
				if !sc.own[x] {
					sub.add(x, false)
					sub.arg[x] = sc.arg[x]
				}
			}
			for _, x := range []*val{q, k, vp} {
				sub.add(x, true)
			}
			a := s.attentionOf(tp, sub, false)
			if a == nil {
				continue
			}
			cut := s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: 3, Start: 0, End: dv},
				args: []*val{s.reshape(a, []int{b, n, h, d})}, out: a.format, label: "the padding cut from each head"})
			if r := s.reshape(cut, t.shape); r != nil && relRMS(t.format, r.data, t.data) <= tolerance(t.format) {
				return r
			}
		}
	}
	return nil
}

// narrowTriples are the (q, k, v) triples of narrowValues: from each own
// value of t's rows cut [q | k | v] with v of t's width and q, k wider
// (one fused projection), and each own q of t's rows with an own k of
// its width and an own v of t's width and k's rows (made apart).
func (s *synth) narrowTriples(sc *scope, t *val) [][3]*val {
	b, rows, wt := t.shape[0], t.shape[1], t.shape[2]
	own := func(v *val) bool {
		return sc.own[v] && !v.opaque && !v.integral() && len(v.shape) == 3 && v.shape[0] == b
	}
	var out [][3]*val
	for _, f := range recentFirst(sc.vals) {
		if !own(f) || f.shape[1] != rows {
			continue
		}
		w := f.shape[2]
		if dq := (w - wt) / 2; (w-wt)%2 == 0 && dq > wt {
			var tr [3]*val
			for i, c := range [][2]int{{0, dq}, {dq, 2 * dq}, {2 * dq, w}} {
				tr[i] = s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: 2, Start: c[0], End: c[1]}, args: []*val{f}, out: f.format, label: "q, k, v of one projection"})
			}
			if tr[0] != nil && tr[1] != nil && tr[2] != nil {
				out = append(out, tr)
			}
		}
	}
	for _, v := range sc.vals {
		if !own(v) || v.shape[2] != wt {
			continue
		}
		for _, q := range sc.vals {
			if !own(q) || q == v || q.shape[1] != rows || q.shape[2] <= wt {
				continue
			}
			for _, k := range sc.vals {
				if own(k) && k != q && k != v && k.shape[1] == v.shape[1] && k.shape[2] == q.shape[2] {
					out = append(out, [3]*val{q, k, v})
				}
			}
		}
	}
	return out
}

// padHeads is x [B, N, h·w] with each head padded by zeros to d columns
// ([B, N, h·d]), the zeros a constant noted as note.
func (s *synth) padHeads(x *val, h, w, d int, note string) *val {
	b, n := x.shape[0], x.shape[1]
	x4 := s.reshape(x, []int{b, n, h, w})
	zeros := &val{shape: []int{b, n, h, d - w}, data: make([]float32, b*n*h*(d-w)), format: x.format, origin: x.origin + "/padding", constNote: note}
	j := s.derive(&expr{op: program.OpConcat, attrs: program.Attrs{Axis: 3}, args: []*val{x4, zeros}, out: x.format, label: "padded per head"})
	return s.reshape(j, []int{b, n, h * d})
}

// padHeadsData is rows·h heads of w values each padded with zeros to d.
func padHeadsData(x []float32, rows, h, w, d int) []float32 {
	out := make([]float32, rows*h*d)
	for i := range rows * h {
		copy(out[i*d:i*d+w], x[i*w:(i+1)*w])
	}
	return out
}

// hasNarrowValues reports, from shapes alone, whether narrowTriples may
// find a triple for t in the scope.
func hasNarrowValues(sc *scope, t *val) bool {
	return slices.ContainsFunc(sc.vals, func(v *val) bool {
		return sc.own[v] && len(v.shape) == 3 && v.shape[0] == t.shape[0] && v.shape[2] > 2*t.shape[2]
	})
}
