package synth

import (
	"fmt"
	"maps"
	"math"
	"slices"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/precision"
	"github.com/zflow/zflow/semantics"
)

// maxScanVectors bounds the vectors of one length a scan's A, dt bias and
// D are chosen from (a Mamba-2 mixer holds three).
const maxScanVectors = 6

// ssmScanned explains t [B, L, W] as a selective state-space scan
// (program.OpSSMScan) of W/H channels in each of H heads: x, B and C
// contiguous pieces of one value of the scope [B, L, W + 2·G·N] (x of
// width W, B and C of G·N each, in any order), dt the first or last H
// columns of a value [B, L, ≥ H] through softplus(dt + bias) (bias a
// vector [H] of the scope or none), A = −exp(a) for a vector a [H], and
// the skip D a vector [H] or none, the three vectors distinct. Tried
// after every other form fails; H is the length of the scope's vectors
// (at most maxScanVectors of it), each head count tried in turn.
func (s *synth) ssmScanned(t *val, sc *scope, vals []*val) *val {
	if t.reshapedFrom || len(t.shape) != 3 {
		return nil
	}
	bs, l, w := t.shape[0], t.shape[1], t.shape[2]
	byLen := map[int][]*val{}
	for _, v := range vals {
		if !v.opaque && len(v.shape) == 1 && v.shape[0] > 1 && v.shape[0] < w && w%v.shape[0] == 0 {
			byLen[v.shape[0]] = append(byLen[v.shape[0]], v)
		}
	}
	rows := func(v *val) bool { return !v.opaque && len(v.shape) == 3 && v.shape[0] == bs && v.shape[1] == l }
	cands := map[int][]*expr{}
	heads := slices.Sorted(maps.Keys(byLen))
	for _, h := range heads {
		vecs := byLen[h]
		if len(vecs) > maxScanVectors {
			// A, dt's bias and D are each any of them: the assignments
			// grow as the cube; a scope this full is not a mixer's
			continue
		}
		p := w / h
		var as []*val // A = −exp(a)
		for _, a := range vecs {
			e := s.derive(&expr{op: program.OpAct, attrs: program.Attrs{Act: exec.ActExp}, args: []*val{a}, out: precision.F32, label: "exp"})
			as = append(as, s.derive(&expr{op: program.OpMul, args: []*val{e, s.constant(-1)}, out: precision.F32, label: "A = −exp(" + a.origin + ")"}))
		}
		type dtChoice struct {
			v     *val
			bias  *val
			label string
		}
		var dts []dtChoice
		for _, d := range vals {
			if !rows(d) || d.shape[2] < h {
				continue
			}
			for _, off := range slices.Compact([]int{0, d.shape[2] - h}) {
				raw := d
				if d.shape[2] != h {
					raw = s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: 2, Start: off, End: off + h}, args: []*val{d}, out: d.format, label: "dt columns"})
				}
				if raw == nil {
					continue
				}
				for _, bias := range append([]*val{nil}, vecs...) {
					z := raw
					if bias != nil {
						z = s.derive(&expr{op: program.OpAdd, args: []*val{raw, bias}, out: precision.F32, label: "dt + " + bias.origin})
					}
					if z == nil {
						continue
					}
					if sp := s.softplus(z); sp != nil {
						dts = append(dts, dtChoice{sp, bias, fmt.Sprintf("dt = softplus(%s[%d:%d] + %s)", d.origin, off, off+h, originOr(bias, "0"))})
					}
				}
			}
		}
		for _, u := range vals {
			if !rows(u) || u.shape[2] <= w || (u.shape[2]-w)%2 != 0 {
				continue
			}
			gn := (u.shape[2] - w) / 2
			piece := func(off, width int) *val {
				return s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: 2, Start: off, End: off + width}, args: []*val{u}, out: u.format, label: "piece"})
			}
			for _, order := range [][3]int{{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {2, 0, 1}, {1, 2, 0}, {2, 1, 0}} { // x, B, C's places
				widths := [3]int{w, gn, gn}
				var offs [3]int
				for k := range 3 {
					for j := range 3 {
						if order[j] < order[k] {
							offs[k] += widths[j]
						}
					}
				}
				x := s.reshape(piece(offs[0], w), []int{bs, l, h, p})
				for g := 1; g <= h; g++ {
					if h%g != 0 || gn%g != 0 {
						continue
					}
					bm := s.reshape(piece(offs[1], gn), []int{bs, l, g, gn / g})
					cm := s.reshape(piece(offs[2], gn), []int{bs, l, g, gn / g})
					if x == nil || bm == nil || cm == nil {
						continue
					}
					for ai, a := range as {
						for _, dt := range dts {
							if a == nil || dt.bias == vecs[ai] {
								continue
							}
							for _, d := range append([]*val{nil}, vecs...) {
								if d != nil && (d == vecs[ai] || d == dt.bias) {
									continue
								}
								cands[h] = append(cands[h], &expr{op: program.OpSSMScan, args: []*val{x, dt.v, a, bm, cm, d}, out: t.format,
									label: fmt.Sprintf("ssm scan heads=%d groups=%d state=%d, x, B, C of %s at %v, %s, A = −exp(%s), D %s", h, g, gn/g, u.origin, offs, dt.label, vecs[ai].origin, originOr(d, "none"))})
							}
						}
					}
				}
			}
		}
	}
	if s.late {
		return s.gatedScan(t, sc, vals, heads, cands)
	}
	for _, h := range heads {
		if len(cands[h]) == 0 {
			continue
		}
		// the scan's [B, L, H, P] against the target read so, then joined
		proxy := *t
		proxy.shape = []int{bs, l, h, w / h}
		scan, ev := s.best(&proxy, cands[h])
		if scan == nil {
			continue
		}
		s.scans = append(s.scans, scanRecord(sc.module, t.origin, scan, cands[h], ev))
		return s.reshape(scan, t.shape)
	}
	return nil
}

// gatedScan explains t [B, L, W] as one of the scans ssmScanned tried
// (cands, by head count) times f(g): a gate g a value [B, L, W] or the
// first W columns of one, f a gate function (gateActs, in turn; a Mamba-2
// mixer without its norm multiplies y by silu(z)). ssmScanned's form in
// glue's late pass, once every scan alone (the first pass) has failed.
func (s *synth) gatedScan(t *val, sc *scope, vals []*val, heads []int, cands map[int][]*expr) *val {
	bs, l, w := t.shape[0], t.shape[1], t.shape[2]
	var gates []*val
	var names []string
	for _, v := range vals {
		if v.opaque || len(v.shape) != 3 || v.shape[0] != bs || v.shape[1] != l || v.shape[2] < w {
			continue
		}
		name := v.origin
		if v.shape[2] > w {
			name = fmt.Sprintf("%s[:%d]", v.origin, w)
			v = s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: 2, Start: 0, End: w}, args: []*val{v}, out: v.format, label: "the gate's columns"})
		}
		if v != nil {
			gates, names = append(gates, v), append(names, name)
		}
	}
	if len(gates) == 0 {
		return nil
	}
	for _, f := range gateActs {
		var acts []*val
		var actOf []int
		for i, g := range gates {
			if a := s.derive(&expr{op: program.OpAct, attrs: program.Attrs{Act: f}, args: []*val{g}, out: t.format, label: "the scan's gate"}); a != nil {
				acts, actOf = append(acts, a), append(actOf, i)
			}
		}
		for _, h := range heads {
			var gated []*expr
			var withD []bool
			for _, c := range cands[h] {
				y := s.reshape(s.derive(c), t.shape)
				if y == nil {
					continue
				}
				for i, a := range acts {
					gated = append(gated, &expr{op: program.OpMul, args: []*val{y, a}, out: t.format, label: fmt.Sprintf("%s, times %v(%s)", c.label, f, names[actOf[i]])})
					withD = append(withD, len(c.args) > 5 && c.args[5] != nil)
				}
			}
			win, ev := s.best(t, gated)
			if win != nil {
				s.scans = append(s.scans, scanRecordOf(sc.module, t.origin, slices.Index(gated, win.from), gated, withD, ev))
				return win
			}
		}
	}
	return nil
}

// originOr is v's origin, or none where v is nil.
func originOr(v *val, none string) string {
	if v == nil {
		return none
	}
	return v.origin
}

// ssmRecord is a selective scan the search found, for its factor: whether
// it adds the skip D·x, the best score with and without it (the margin
// is their ratio), the winning assignment and how many were scored.
type ssmRecord struct {
	scope, boundary string
	skip            bool
	margin          float64
	candidates      []semantics.Candidate
	winner          string
	scored          int
}

// scanRecord records the winning scan among cands (ev their scores, in
// order): the skip's candidates are the best score with D and without.
func scanRecord(scope, boundary string, win *val, cands []*expr, ev []semantics.Candidate) ssmRecord {
	withD := make([]bool, len(cands))
	for i, c := range cands {
		withD[i] = len(c.args) > 5 && c.args[5] != nil
	}
	return scanRecordOf(scope, boundary, slices.Index(cands, win.from), cands, withD, ev)
}

// scanRecordOf records cands[win] as the winning scan, withD[i] saying
// whether candidate i adds the skip.
func scanRecordOf(scope, boundary string, win int, cands []*expr, withD []bool, ev []semantics.Candidate) ssmRecord {
	skip := win >= 0 && withD[win]
	winScore, other := math.Inf(1), math.Inf(1)
	label := ""
	for i, c := range cands {
		if withD[i] == skip {
			if ev[i].Score < winScore {
				winScore, label = ev[i].Score, c.label
			}
		} else {
			other = min(other, ev[i].Score)
		}
	}
	margin := math.Inf(1)
	if winScore > 0 {
		margin = other / winScore
	}
	return ssmRecord{scope: scope, boundary: boundary, skip: skip, margin: margin, winner: label, scored: len(cands),
		candidates: []semantics.Candidate{{Value: skip, Score: finite(winScore)}, {Value: !skip, Score: finite(other)}}}
}
