package synth

import (
	"math"
	"slices"

	"github.com/zflow/zflow/exec/program"
)

// unequalHeads are (q, k, v) triples whose values are wider per head than
// the queries and keys (LeViT's, EfficientFormer's attention: each head's
// [q k v] of widths dk, dk, dv, or a subsampled attention's keys and
// values [k v] per head beside queries of their own), for a target of
// h·dv columns: q and k padded with zeros to dv per head, which leaves
// q·kᵀ as it was, their scale 1/√dk kept in s.qkScale by q. From each own
// value of the scope, and, for [k v] values, each pooled q; and q, k and
// v made apart (separateHeads).
func (s *synth) unequalHeads(sc *scope, pool []*val, t *val) (out [][3]*val, dvs []int) {
	wt := t.shape[2]
	out, dvs = s.separateHeads(sc, t)
	for _, v := range sc.vals {
		if !sc.own[v] || v.opaque || len(v.shape) != 3 || v.shape[0] != t.shape[0] || v.integral() {
			continue
		}
		w := v.shape[2]
		for h := 1; h <= wt && h <= w; h++ {
			if wt%h != 0 || w%h != 0 {
				continue
			}
			c, dv := w/h, wt/h
			if dk := (c - dv) / 2; c > dv && (c-dv)%2 == 0 && dk < dv && dk > 0 && v.shape[1] == t.shape[1] {
				// per head [q k v]
				if tr, ok := s.splitHeads(v, h, []int{dk, dk, dv}); ok {
					out, dvs = append(out, s.padded3(tr, h, dk, dv)), append(dvs, dv)
					// the split's queries made over again by a module of
					// the scope (EfficientViT-M's depthwise convolution of
					// each head's q): each own value of their shape instead
					for _, q := range sc.vals {
						if sc.own[q] && !q.opaque && q != v && slices.Equal(q.shape, tr[0].shape) {
							out, dvs = append(out, s.padded3([3]*val{q, tr[1], tr[2]}, h, dk, dv)), append(dvs, dv)
						}
					}
				}
			}
			for _, q := range pool {
				if q == v || len(q.shape) != 3 || q.shape[1] != t.shape[1] || q.shape[2]%h != 0 {
					continue
				}
				if dk := q.shape[2] / h; dk+dv == c && dk < dv {
					// per head [k v] beside queries of dk
					if kv, ok := s.splitHeads(v, h, []int{dk, dv}); ok {
						out, dvs = append(out, s.padded3([3]*val{q, kv[0], kv[1]}, h, dk, dv)), append(dvs, dv)
					}
				}
			}
		}
	}
	return out, dvs
}

// separateHeads are (q, k, v) triples the scope made apart, q and k
// narrower than v (EfficientFormer v2's convolutions: q and k of h·dk
// channels, v of h·dv, a subsampled attention's queries of their own
// rows): for each own v of t's width, each own q of t's rows and each own
// k of v's rows and q's width, every head count whose widths dk < dv are
// whole, q and k padded (padded3).
func (s *synth) separateHeads(sc *scope, t *val) (out [][3]*val, dvs []int) {
	b, rows, wt := t.shape[0], t.shape[1], t.shape[2]
	own := func(v *val) bool {
		return sc.own[v] && !v.opaque && !v.integral() && len(v.shape) == 3 && v.shape[0] == b
	}
	for _, v := range sc.vals {
		if !own(v) || v.shape[2] != wt {
			continue
		}
		for _, q := range sc.vals {
			if !own(q) || q == v || q.shape[1] != rows || q.shape[2] >= wt {
				continue
			}
			for _, k := range sc.vals {
				if !own(k) || k == q || k == v || k.shape[1] != v.shape[1] || k.shape[2] != q.shape[2] {
					continue
				}
				wq := q.shape[2]
				for h := 1; h <= wq/minHeadDim; h++ {
					if wq%h == 0 && wt%h == 0 && wq/h < wt/h {
						out, dvs = append(out, s.padded3([3]*val{q, k, v}, h, wq/h, wt/h)), append(dvs, wt/h)
					}
				}
			}
		}
	}
	return out, dvs
}

// hasSeparateHeads reports, from shapes alone, whether separateHeads may
// find a triple in the scope.
func hasSeparateHeads(sc *scope, t *val) bool {
	b, rows, wt := t.shape[0], t.shape[1], t.shape[2]
	var vs, qs bool
	for _, v := range sc.vals {
		if !sc.own[v] || v.opaque || len(v.shape) != 3 || v.shape[0] != b {
			continue
		}
		vs = vs || v.shape[2] == wt
		qs = qs || v.shape[1] == rows && v.shape[2] < wt
	}
	return vs && qs
}

// splitHeads cuts each of h heads of v [B, N, h·Σw] into consecutive
// pieces of the widths w, each returned [B, N, h·w_i].
func (s *synth) splitHeads(v *val, h int, widths []int) ([3]*val, bool) {
	var out [3]*val
	b, n := v.shape[0], v.shape[1]
	c := v.shape[2] / h
	x := s.reshape(v, []int{b, n, h, c})
	at := 0
	for i, w := range widths {
		p := s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: 3, Start: at, End: at + w}, args: []*val{x}, out: v.format, label: "a piece of each head"})
		if out[i] = s.reshape(p, []int{b, n, h * w}); out[i] == nil {
			return out, false
		}
		at += w
	}
	return out, true
}

// padded3 is (q, k, v) with q and k padded per head from dk to dv
// columns of zeros, their scale recorded.
func (s *synth) padded3(tr [3]*val, h, dk, dv int) [3]*val {
	pad := func(x *val) *val {
		return s.padHeads(x, h, dk, dv, "zeros padding q and k to the values' head width (q·kᵀ unchanged; made from the request's shape)")
	}
	q, k := pad(tr[0]), pad(tr[1])
	if q == nil || k == nil {
		return tr
	}
	if s.qkScale == nil {
		s.qkScale, s.qkWidth = map[*val]float32{}, map[*val]int{}
	}
	s.qkScale[q], s.qkWidth[q] = float32(1/math.Sqrt(float64(dk))), dv
	return [3]*val{q, k, tr[2]}
}
