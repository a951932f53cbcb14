package synth

import (
	"fmt"
	"math"
	"strconv"

	"zflow/exec"
	"zflow/exec/program"
	"zflow/precision"
	"zflow/semantics"
)

// fitRopeTable explains a parameterless call whose two results are RoPE
// tables (cos² + sin² = 1) as rope_table over integer positions among its
// arguments: the layout from which channels repeat, θ from the angles of
// position 1, checked by recomputing both tables.
func (s *synth) fitRopeTable(xs []*val, cosT, sinT *val) (*val, *val) {
	if cosT.numel() != sinT.numel() || len(cosT.shape) < 2 || !unitCircle(cosT, sinT) {
		return nil, nil
	}
	d := cosT.shape[len(cosT.shape)-1]
	rows := cosT.numel() / d
	var pos *val
	for _, x := range xs {
		if x.integral() && x.numel() == rows {
			pos = x
		}
	}
	if pos == nil || d%2 != 0 {
		return nil, nil
	}
	p2 := s.reshape(pos, []int{rows, 1})
	if p2 == nil {
		return nil, nil
	}
	var cands []*expr
	var pairs [][2]*expr
	_ = cands
	for _, layout := range []exec.RopeLayout{exec.RopeHalf, exec.RopeInterleaved} {
		for _, theta := range thetaCandidates(cosT, pos, d, layout) {
			for _, ff := range []precision.Format{precision.F32, precision.F64} {
				p := exec.RopeTableParams{Theta: theta, AxesDims: []int{d}, Layout: layout, FreqFormat: ff, AngleFormat: precision.F32}
				label := fmt.Sprintf("%s theta=%g freq=%s", layout, theta, ff)
				c := &expr{op: program.OpRopeTable, attrs: program.Attrs{RopeTable: p}, args: []*val{p2}, out: cosT.format, label: label}
				cands = append(cands, c)
				pairs = append(pairs, [2]*expr{c, pickOf(c, 1)})
			}
		}
	}
	bestI, bestScore := -1, math.Inf(1)
	var ev []semantics.Candidate
	for i, pr := range pairs {
		c, e1 := s.ev.score(pr[0], cosT)
		sn, e2 := s.ev.score(pr[1], sinT)
		sc := math.Max(e1, e2)
		ev = append(ev, semantics.Candidate{Value: pr[0].label, Score: finite(sc)})
		if c != nil && sn != nil && sc < bestScore {
			bestI, bestScore = i, sc
		}
	}
	if bestI < 0 || bestScore > tolerance(cosT.format) {
		return nil, nil
	}
	// One node makes both tables.
	e := cands[bestI]
	c, err := s.ev.run(e)
	if err != nil {
		return nil, nil
	}
	sn, err := s.ev.run(pickOf(e, 1))
	if err != nil {
		return nil, nil
	}
	fit := &leafFit{kind: "rope_table", rope: e.attrs.RopeTable, candidates: ev}
	cosV, sinV := s.reshape(c, cosT.shape), s.reshape(sn, sinT.shape)
	if cosV == nil || sinV == nil {
		return nil, nil
	}
	cosV.fit, sinV.fit = fit, fit
	return cosV, sinV
}

// pickOf is an expression for result i of e's node (sharing its node).
func pickOf(e *expr, i int) *expr {
	if i == e.pick {
		return e
	}
	if e.sibling == nil {
		e.sibling = map[int]*expr{}
	}
	if x, ok := e.sibling[i]; ok {
		return x
	}
	x := &expr{op: e.op, attrs: e.attrs, args: e.args, out: e.out, label: e.label, pick: i, shapes: e.shapes, node: e}
	e.sibling[i] = x
	return x
}

// unitCircle reports whether cos² + sin² ≈ 1 everywhere.
func unitCircle(c, s *val) bool {
	for i := range c.data {
		r := float64(c.data[i])*float64(c.data[i]) + float64(s.data[i])*float64(s.data[i])
		if math.Abs(r-1) > 0.05 {
			return false
		}
	}
	return true
}

// thetaCandidates reads θ from the table's angles at the smallest
// positive position (3 significant digits), with the common bases.
func thetaCandidates(cosT, pos *val, d int, layout exec.RopeLayout) []float64 {
	out := []float64{10000}
	row, p := -1, math.Inf(1)
	for i, x := range pos.data {
		if x > 0 && float64(x) < p {
			row, p = i, float64(x)
		}
	}
	if row < 0 {
		return out
	}
	idx := 1 // frequency 1: channel 1 (half) or channels 2, 3 (interleaved)
	if layout == exec.RopeInterleaved {
		idx = 2
	}
	c := float64(cosT.data[row*d+idx])
	if c >= 1 || c <= -1 {
		return out
	}
	f := math.Acos(c) / p // θ^(−2/d)
	if f <= 0 {
		return out
	}
	theta := math.Pow(f, -float64(d)/2)
	if r, err := strconv.ParseFloat(strconv.FormatFloat(theta, 'g', 3, 64), 64); err == nil && r != 10000 && r > 1 {
		out = append(out, r)
	}
	return out
}
