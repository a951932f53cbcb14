package synth

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/precision"
)

// maxQuotientSample bounds the entries of the target a quotient's divisor
// is fitted on; the winner is then scored on every entry.
const maxQuotientSample = 2048

// quotientFit is the residual (relative to the divisor's size) above
// which a divisor form is not tried further: the fit is on d = n/t,
// whose rounding in a narrow format is a few parts in a thousand.
const quotientFit = 0.05

// divisorForm is a map g of a value that a head divides by, made in the
// target's format as torch rounds each op.
type divisorForm struct {
	label string
	make  func(s *synth, r *val, f precision.Format) *val
}

// divisorForms are the maps a positive divisor is made by: a value as it
// is, its magnitude, |1 − r| (Würstchen's prior: (x − a)/(|1 − b| + ε)),
// σ(r) (its decoder: (x − a)/(σ(b)·(1 − 2ε) + ε)), e^r and softplus(r).
var divisorForms = []divisorForm{
	{"r", func(_ *synth, r *val, _ precision.Format) *val { return r }},
	{"|r|", func(s *synth, r *val, f precision.Format) *val { return s.activated(r, exec.ActAbs, f) }},
	{"|1 − r|", func(s *synth, r *val, f precision.Format) *val {
		d := s.derive(&expr{op: program.OpSub, args: []*val{s.constant(1), r}, out: f, label: "1 − r"})
		if d == nil {
			return nil
		}
		return s.activated(d, exec.ActAbs, f)
	}},
	{"σ(r)", func(s *synth, r *val, f precision.Format) *val { return s.activated(r, exec.ActSigmoid, f) }},
	{"exp(r)", func(s *synth, r *val, f precision.Format) *val { return s.activated(r, exec.ActExp, f) }},
	{"softplus(r)", func(s *synth, r *val, f precision.Format) *val { return s.activated(r, exec.ActSoftplus, f) }},
}

func (s *synth) activated(v *val, a exec.ActKind, f precision.Format) *val {
	return s.derive(&expr{op: program.OpAct, attrs: program.Attrs{Act: a}, args: []*val{v}, out: f, label: a.String()})
}

// quotientTerm is one reading of t as (p − q)/(α·g(r) + β), q optional,
// with its fitted residual on the sample.
type quotientTerm struct {
	p, q, g     *val
	label       string
	alpha, beta float64
	fit         float64
}

// quotient explains t as (p − q)/(α·g(r) + β): an output head that
// divides the model's input less one half of a projection by a positive
// map of the other half (Würstchen's prior and decoder). p, q and r are
// values of t's shape or pieces of a wider one (chunksOf); the divisor's
// α and β are fitted by least squares on d = (p − q)/t at the entries
// where t is not small, its map chosen among divisorForms by the fit,
// then α and β are made simple numbers where those reproduce t as well
// (1 − 2·10⁻³, 10⁻⁵) and the expression is scored on every entry and
// step. Tried once the forms before it failed.
func (s *synth) quotient(t *val, vals []*val) *val {
	if len(t.shape) < 2 || t.integral() || t.numel() < 8 {
		return nil
	}
	ops := s.likeShape(t, vals)
	if len(ops) > maxOperands {
		ops = ops[:maxOperands]
	}
	ops = append(ops, s.chunksOf(t, vals)...)
	if len(ops) < 2 {
		return nil
	}
	idx := quotientSample(t.data)
	if len(idx) < 8 {
		return nil
	}
	divisors := map[*val][]*val{} // r → g(r) per form, made once
	divisorsOf := func(r *val) []*val {
		if gs, ok := divisors[r]; ok {
			return gs
		}
		gs := make([]*val, len(divisorForms))
		for i, f := range divisorForms {
			gs[i] = f.make(s, r, t.format)
		}
		divisors[r] = gs
		return gs
	}
	best := quotientTerm{fit: quotientFit}
	d := make([]float64, len(idx))
	g := make([]float64, len(idx))
	for _, p := range ops {
		for _, q := range append([]*val{nil}, ops...) {
			if q == p {
				continue
			}
			for k, i := range idx {
				n := float64(p.data[i])
				if q != nil {
					n -= float64(q.data[i])
				}
				d[k] = n / float64(t.data[i])
			}
			for _, r := range ops {
				if r == p || r == q {
					continue
				}
				for fi, gv := range divisorsOf(r) {
					if gv == nil {
						continue
					}
					for k, i := range idx {
						g[k] = float64(gv.data[i])
					}
					alpha, beta, fit := affineFit(g, d)
					if fit < best.fit && alpha != 0 {
						best = quotientTerm{p: p, q: q, g: gv, label: divisorForms[fi].label, alpha: alpha, beta: beta, fit: fit}
					}
				}
			}
		}
	}
	if best.p == nil {
		return nil
	}
	return s.quotientOf(t, best, idx)
}

// quotientSample are up to maxQuotientSample entries of t, evenly
// strided, whose magnitude is at least the sample's median: where t is
// near 0, n/t carries the rounding of both and no fit.
func quotientSample(t []float32) []int {
	stride := max(1, len(t)/maxQuotientSample)
	var idx []int
	for i := 0; i < len(t); i += stride {
		if x := float64(t[i]); x != 0 && !math.IsNaN(x) && !math.IsInf(x, 0) {
			idx = append(idx, i)
		}
	}
	mags := make([]float64, len(idx))
	for k, i := range idx {
		mags[k] = math.Abs(float64(t[i]))
	}
	slices.Sort(mags)
	if len(mags) == 0 {
		return nil
	}
	med := mags[len(mags)/2]
	return slices.DeleteFunc(idx, func(i int) bool { return math.Abs(float64(t[i])) < med })
}

// affineFit is the least-squares d ≈ α·g + β and its residual relative
// to d's size; +Inf where g is constant or a value is not finite.
func affineFit(g, d []float64) (alpha, beta, fit float64) {
	n := float64(len(g))
	var sg, sd, sgg, sgd, sdd float64
	for k := range g {
		sg += g[k]
		sd += d[k]
		sgg += g[k] * g[k]
		sgd += g[k] * d[k]
		sdd += d[k] * d[k]
	}
	den := n*sgg - sg*sg
	if den <= 1e-12*n*sgg || sdd == 0 {
		return 0, 0, math.Inf(1)
	}
	alpha = (n*sgd - sg*sd) / den
	beta = (sd - alpha*sg) / n
	var res float64
	for k := range g {
		e := d[k] - alpha*g[k] - beta
		res += e * e
	}
	fit = math.Sqrt(res / sdd)
	if math.IsNaN(fit) {
		return 0, 0, math.Inf(1)
	}
	return alpha, beta, fit
}

// quotientOf makes the expression of term b with α and β the simplest
// numbers near the fit that reproduce t's sample as well as any (scored
// as the forward rounds: each op to t's format), and keeps it where it
// reproduces t on every entry and step.
func (s *synth) quotientOf(t *val, b quotientTerm, idx []int) *val {
	f := t.format
	round := func(x float64) float32 { return f.Round(float32(x)) }
	num := make([]float32, len(idx))
	for k, i := range idx {
		n := b.p.data[i]
		if b.q != nil {
			n = round(float64(n) - float64(b.q.data[i]))
		}
		num[k] = n
	}
	want := make([]float32, len(idx))
	for k, i := range idx {
		want[k] = t.data[i]
	}
	miss := func(alpha, beta float64) float64 {
		got := make([]float32, len(idx))
		for k, i := range idx {
			den := b.g.data[i]
			if alpha != 1 {
				den = round(float64(float32(alpha) * den))
			}
			if beta != 0 {
				den = round(float64(den) + float64(float32(beta)))
			}
			got[k] = round(float64(num[k]) / float64(den))
		}
		return relRMS(f, got, want)
	}
	type pair struct {
		alpha, beta float64
		miss        float64
		digits      int
	}
	var pairs []pair
	for _, a := range quotientConstants(b.alpha, true) {
		for _, c := range quotientConstants(b.beta, false) {
			pairs = append(pairs, pair{a, c, miss(a, c), len(strconv.FormatFloat(a, 'g', -1, 64)) + len(strconv.FormatFloat(c, 'g', -1, 64))})
		}
	}
	slices.SortStableFunc(pairs, func(x, y pair) int {
		// a simpler pair within a hair of the best is the better reading
		if c := cmp.Compare(x.miss, y.miss); math.Abs(x.miss-y.miss) > 1e-3*max(x.miss, y.miss) && c != 0 {
			return c
		}
		return cmp.Compare(x.digits, y.digits)
	})
	numer := b.p
	if b.q != nil {
		numer = s.derive(&expr{op: program.OpSub, args: []*val{b.p, b.q}, out: f, label: "numerator"})
	}
	if numer == nil {
		return nil
	}
	var cands []*expr
	for _, pr := range pairs[:min(2, len(pairs))] {
		den := b.g
		if pr.alpha != 1 {
			den = s.derive(&expr{op: program.OpMul, args: []*val{den, s.constant(pr.alpha)}, out: f, label: "scaled divisor"})
		}
		if den != nil && pr.beta != 0 {
			den = s.derive(&expr{op: program.OpAdd, args: []*val{den, s.constant(pr.beta)}, out: f, label: "divisor + ε"})
		}
		if den == nil {
			continue
		}
		cands = append(cands, &expr{op: program.OpDiv, args: []*val{numer, den}, out: f,
			label: fmt.Sprintf("(p − q)/(%g·%s + %g)", pr.alpha, b.label, pr.beta)})
	}
	w, ev := s.best(t, cands)
	if w == nil {
		return nil
	}
	w.fit = &leafFit{kind: "glue", candidates: ev}
	return w
}

// quotientConstants are the numbers a fitted constant c may stand for: c, c to
// one to four significant digits, the powers of ten near it, and, for a
// scale, 1 (for an offset, 0).
func quotientConstants(c float64, scale bool) []float64 {
	out := []float64{0}
	if scale {
		out = []float64{1}
	}
	if c == 0 || math.IsNaN(c) || math.IsInf(c, 0) {
		return out
	}
	out = append(out, c)
	e := math.Floor(math.Log10(math.Abs(c)))
	for digits := 1.0; digits <= 4; digits++ {
		p := math.Pow(10, e-digits+1)
		out = append(out, math.Round(c/p)*p)
	}
	if !scale {
		// an ε lost in the fit's noise: the usual ones
		for k := -1; k >= -8; k-- {
			out = append(out, math.Pow(10, float64(k)))
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
