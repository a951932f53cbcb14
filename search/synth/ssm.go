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
//
// In glue's late pass the [x | B | C] value may also be made in the
// forward (silu of a causal depthwise convolution of a value's columns
// by an uncalled sub-module's weights: mixerConvs), and the scan may be
// multiplied by a gate f(g) (g a value [B, L, W] or the first W columns
// of one, f in gateActs: a Mamba-2 mixer without its norm).
//
// The assignments are ranked first at each row's first position, where
// the scan needs no A and no recurrence: y₀ = x₀·(dt₀·⟨C₀, B₀⟩ + D), so
// the search runs the scan only for the best few with D and without
// (maxScanPartials each), with every A.
func (s *synth) ssmScanned(t *val, sc *scope, vals []*val) *val {
	if t.reshapedFrom || len(t.shape) != 3 {
		return nil
	}
	bs, l, w := t.shape[0], t.shape[1], t.shape[2]
	byLen := map[int][]*val{}
	for _, v := range vals {
		if !v.opaque && len(v.shape) == 1 && v.shape[0] > 1 && v.shape[0] <= w && w%v.shape[0] == 0 {
			byLen[v.shape[0]] = append(byLen[v.shape[0]], v)
		}
	}
	rows := func(v *val) bool { return !v.opaque && len(v.shape) == 3 && v.shape[0] == bs && v.shape[1] == l }
	heads := slices.Sorted(maps.Keys(byLen))
	// the [x | B | C] holders: captured, or (late) made by a convolution
	var us []*val
	for _, u := range vals {
		if rows(u) && u.shape[2] > w && (u.shape[2]-w)%2 == 0 {
			us = append(us, u)
		}
	}
	gates := []scanGate{{nil, ""}}
	if s.late {
		us = append(us, s.mixerConvs(t, vals, heads)...)
		gates = append(gates, s.scanGates(t, vals)...)
	}
	for _, h := range heads {
		vecs := byLen[h]
		if len(vecs) > maxScanVectors {
			// A, dt's bias and D are each any of them: the assignments
			// grow as the cube; a scope this full is not a mixer's
			continue
		}
		p := w / h
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
						// in the wider of the two formats, as torch adds them (bf16 + bf16 stays bf16)
						z = s.derive(&expr{op: program.OpAdd, args: []*val{raw, bias}, out: wider(raw.format, bias.format), label: "dt + " + bias.origin})
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
		// an assignment but A, ranked at the first position
		type partial struct {
			u      *val
			offs   [3]int
			groups int
			dt     dtChoice
			d      *val
			gate   scanGate
			score  float64
			skip   bool
		}
		// the best maxScanPartials with D and as many without, in order
		best := map[bool][]partial{}
		keep := func(pt partial) {
			b := best[pt.skip]
			if len(b) == maxScanPartials && !(pt.score < b[len(b)-1].score) {
				return
			}
			i, _ := slices.BinarySearchFunc(b, pt.score, func(q partial, sc float64) int { return cmpFloat(q.score, sc) })
			b = slices.Insert(b, i, pt)
			if len(b) > maxScanPartials {
				b = b[:maxScanPartials]
			}
			best[pt.skip] = b
		}
		for _, u := range us {
			gn := (u.shape[2] - w) / 2
			wu := u.shape[2]
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
				for g := 1; g <= h; g++ {
					if h%g != 0 || gn%g != 0 {
						continue
					}
					n := gn / g
					// ⟨C₀, B₀⟩ per batch row and group
					kb := make([]float64, bs*g)
					for b := range bs {
						row := u.data[b*l*wu : b*l*wu+wu]
						for gi := range g {
							var acc float64
							for q := range n {
								acc += float64(row[offs[1]+gi*n+q]) * float64(row[offs[2]+gi*n+q])
							}
							kb[b*g+gi] = acc
						}
					}
					for _, dt := range dts {
						for _, d := range append([]*val{nil}, vecs...) {
							if d != nil && d == dt.bias {
								continue
							}
							for _, gate := range gates {
								var num, den float64
								for b := range bs {
									row := u.data[b*l*wu : b*l*wu+wu]
									for hh := range h {
										c := float64(dt.v.data[b*l*h+hh]) * kb[b*g+hh/(h/g)]
										if d != nil {
											c += float64(d.data[hh])
										}
										for q := range p {
											pred := float64(row[offs[0]+hh*p+q]) * c
											if gate.v != nil {
												pred *= float64(gate.v.data[b*l*w+hh*p+q])
											}
											want := float64(t.data[b*l*w+hh*p+q])
											num += (pred - want) * (pred - want)
											den += want * want
										}
									}
								}
								sc := math.Inf(1)
								if den > 0 {
									sc = math.Sqrt(num / den)
								}
								keep(partial{u: u, offs: offs, groups: g, dt: dt, d: d, gate: gate, score: sc, skip: d != nil})
							}
						}
					}
				}
			}
		}
		var cands []*expr
		var withD []bool
		for _, pt := range append(best[true], best[false]...) {
			gn := (pt.u.shape[2] - w) / 2
			n := gn / pt.groups
			piece := func(off, width int) *val {
				return s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: 2, Start: off, End: off + width}, args: []*val{pt.u}, out: pt.u.format, label: "piece"})
			}
			x := s.reshape(piece(pt.offs[0], w), []int{bs, l, h, p})
			bm := s.reshape(piece(pt.offs[1], gn), []int{bs, l, pt.groups, n})
			cm := s.reshape(piece(pt.offs[2], gn), []int{bs, l, pt.groups, n})
			if x == nil || bm == nil || cm == nil {
				continue
			}
			for _, a := range vecs {
				if a == pt.dt.bias || a == pt.d {
					continue
				}
				e := s.derive(&expr{op: program.OpAct, attrs: program.Attrs{Act: exec.ActExp}, args: []*val{a}, out: precision.F32, label: "exp"})
				rate := s.derive(&expr{op: program.OpMul, args: []*val{e, s.constant(-1)}, out: precision.F32, label: "A = −exp(" + a.origin + ")"})
				label := fmt.Sprintf("ssm scan heads=%d groups=%d state=%d, x, B, C of %s at %v, %s, A = −exp(%s), D %s", h, pt.groups, n, nameOf(pt.u), pt.offs, pt.dt.label, a.origin, originOr(pt.d, "none"))
				scan := s.derive(&expr{op: program.OpSSMScan, args: []*val{x, pt.dt.v, rate, bm, cm, pt.d}, out: t.format, label: label})
				y := s.reshape(scan, t.shape)
				if rate == nil || y == nil {
					continue
				}
				if pt.gate.v == nil {
					cands = append(cands, y.from)
				} else {
					cands = append(cands, &expr{op: program.OpMul, args: []*val{y, pt.gate.v}, out: t.format, label: label + ", times " + pt.gate.label})
				}
				withD = append(withD, pt.d != nil)
			}
		}
		win, ev := s.best(t, cands)
		if win == nil {
			continue
		}
		s.scans = append(s.scans, scanRecordOf(sc.module, t.origin, slices.Index(cands, win.from), cands, withD, ev))
		return win
	}
	return nil
}

// maxScanPartials is how many assignments with the skip D, and as many
// without, ssmScanned runs the scan for (every A each), the best at the
// first position.
const maxScanPartials = 3

// scanGate is a gate a scan is multiplied by (nil: none).
type scanGate struct {
	v     *val // f(g), t's shape
	label string
}

// scanGates are the gates a scan may be multiplied by: f(g), g a value
// [B, L, W] or the first W columns of a wider one, f in gateActs.
func (s *synth) scanGates(t *val, vals []*val) []scanGate {
	bs, l, w := t.shape[0], t.shape[1], t.shape[2]
	var out []scanGate
	for _, v := range vals {
		if v.opaque || len(v.shape) != 3 || v.shape[0] != bs || v.shape[1] != l || v.shape[2] < w {
			continue
		}
		name := v.origin
		if v.shape[2] > w {
			name = fmt.Sprintf("%s[:%d]", v.origin, w)
			v = s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: 2, Start: 0, End: w}, args: []*val{v}, out: v.format, label: "the gate's columns"})
		}
		if v == nil {
			continue
		}
		for _, f := range gateActs {
			if a := s.derive(&expr{op: program.OpAct, attrs: program.Attrs{Act: f}, args: []*val{v}, out: t.format, label: "the scan's gate"}); a != nil {
				out = append(out, scanGate{a, fmt.Sprintf("%v(%s)", f, name)})
			}
		}
	}
	return out
}

// mixerConvs are the [x | B | C] values a Mamba-2 mixer makes in its
// forward where no call sees them: silu of a causal depthwise convolution
// (causalConvOf) by a weight [C, 1, k] of the scope (an uncalled
// sub-module's), C wider than t by an even count, over C columns of a
// value of t's rows: the first, the last, those after t's width (a gate
// before them) and those before a head count's (dt after them).
func (s *synth) mixerConvs(t *val, vals []*val, heads []int) []*val {
	bs, l, w := t.shape[0], t.shape[1], t.shape[2]
	var out []*val
	for _, wt := range vals {
		if wt.opaque || len(wt.shape) != 3 || wt.shape[1] != 1 || wt.shape[2] < 2 || wt.shape[0] <= w || (wt.shape[0]-w)%2 != 0 {
			continue
		}
		c := wt.shape[0]
		var bias *val
		for _, b := range vals {
			if !b.opaque && len(b.shape) == 1 && b.shape[0] == c {
				bias = b
				break
			}
		}
		for _, v := range vals {
			if v.opaque || len(v.shape) != 3 || v.shape[0] != bs || v.shape[1] != l || v.shape[2] < c {
				continue
			}
			offs := []int{0, v.shape[2] - c, w}
			for _, h := range heads {
				offs = append(offs, v.shape[2]-c-h)
			}
			slices.Sort(offs)
			for _, off := range slices.Compact(offs) {
				if off < 0 || off+c > v.shape[2] {
					continue
				}
				for _, b := range []*val{bias, nil} {
					// in the input's format, as the forward convolves it
					if conv := s.causalConvOf(v, off, wt, b, v.format); conv != nil {
						if a := s.derive(&expr{op: program.OpAct, attrs: program.Attrs{Act: exec.ActSiLU}, args: []*val{conv}, out: v.format,
							label: fmt.Sprintf("silu(causal conv of %s[%d:%d])", v.origin, off, off+c)}); a != nil {
							out = append(out, a)
						}
					}
					if bias == nil {
						break
					}
				}
			}
		}
	}
	return out
}

// wider is the format of a torch op on values of formats a and b: f32
// where either is, else a.
func wider(a, b precision.Format) precision.Format {
	if a == precision.F32 || b == precision.F32 {
		return precision.F32
	}
	return a
}

// nameOf names v in a label: its origin, or how it is made.
func nameOf(v *val) string {
	if v.origin == "" && v.from != nil {
		return v.from.label
	}
	return v.origin
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
