package synth

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/zflow/zflow/semantics"
)

// coordRopeRecord is a coordinate RoPE table the search fitted, with the
// scores the factors' margins come from.
type coordRopeRecord struct {
	scope, boundary string
	best            *coordCand
	theta           float64 // the ladder's θ where one reproduces the tables (else 0)
	thetaForm       string  // how the ladder spreads its exponents (ladderForm.note)
	thetaCands      []semantics.Candidate
	maxCands        []semantics.Candidate
	otherForm       float64 // the score of the map's other op order
}

// coordRecord scores what the factors compare: the ladder recomputed as
// low·θ^(i/(F−1)) or low·θ^(i/F) (ladderForms; in f64, cast to f32, or in
// f32 as torch's θ ** exponents makes it, the better) for the θ the read
// ladder spans in each form and the common ones; every axis's maximum one step away (±1 where it
// is an integer, ±0.1 % else); the map's other op order.
func (s *synth) coordRecord(best *coordCand, cosT, sinT *val) coordRopeRecord {
	r := coordRopeRecord{scope: s.scopeOf, boundary: cosT.origin, best: best}
	score := func(read coordReading, mul bool) float64 {
		c := *best
		c.read, c.mul, c.consts = read, mul, nil
		if !s.coordTables(&c, cosT, sinT) {
			return math.Inf(1)
		}
		return c.score
	}
	r.otherForm = score(best.read, !best.mul)
	maxes := func(m []float32) []float64 {
		out := make([]float64, len(m))
		for i, x := range m {
			out[i] = snap(float64(x), func(y float64) bool { return float32(y) == x })
		}
		return out
	}
	if slices.ContainsFunc(best.read.maxes, func(x float32) bool { return x != 0 }) {
		r.maxCands = append(r.maxCands, semantics.Candidate{Value: maxes(best.read.maxes), Score: finite(best.score)})
		for ax, mx := range best.read.maxes {
			steps := []float32{mx * (1 - 1e-3), mx * (1 + 1e-3)}
			if mx == float32(math.Round(float64(mx))) && mx > 1 {
				steps = []float32{mx - 1, mx + 1}
			}
			for _, v := range steps {
				rd := best.read
				rd.maxes = slices.Clone(rd.maxes)
				rd.maxes[ax] = v
				r.maxCands = append(r.maxCands, semantics.Candidate{Value: maxes(rd.maxes), Score: finite(score(rd, best.mul))})
			}
		}
	}
	f, a := best.f, best.in.axes
	if f < 2 {
		return r
	}
	lowIdx := 0
	if math.Abs(float64(best.read.freqs[best.slot(f-1, 0)])) < math.Abs(float64(best.read.freqs[best.slot(0, 0)])) {
		lowIdx = f - 1
	}
	span := math.Abs(float64(best.read.freqs[best.slot(f-1-lowIdx, 0)]) / float64(best.read.freqs[best.slot(lowIdx, 0)]))
	// the θ the read ladder spans in each form, as read and at 3 and 2
	// significant digits (tables stored in a narrow format move the read
	// ladder), then the common ones. The forms' ladders are one where
	// θ_a^(1/den_a) = θ_b^(1/den_b) (θ = 31.6 over F − 1 steps is θ = 100
	// over F): of such aliases only the shortest decimal is scored, the
	// first form's where both are as short (10⁴ over 4 steps is 10³ over
	// 3: the tables cannot tell them apart).
	type thetaCand struct {
		th   float64
		form int
	}
	var cands []thetaCand
	for fi, form := range ladderForms {
		den := form.den(f)
		th0 := math.Pow(span, den/float64(f-1))
		for _, t := range []float64{snapShort(th0), sigDigits(th0, 3), sigDigits(th0, 2), 1e4, 1e3, 1e5, 1e6} {
			if !(t > 1) || math.IsInf(t, 0) {
				continue
			}
			c := thetaCand{t, fi}
			alias := slices.IndexFunc(cands, func(o thetaCand) bool {
				x, y := math.Log(o.th)/ladderForms[o.form].den(f), math.Log(t)/den
				return math.Abs(x-y) <= 1e-9*math.Abs(x)
			})
			switch {
			case alias < 0:
				cands = append(cands, c)
			case digits(t) < digits(cands[alias].th):
				cands[alias] = c
			}
		}
	}
	win := math.Inf(1)
	for _, tc := range cands {
		th, form := tc.th, ladderForms[tc.form]
		den := form.den(f)
		// the ladder in f64, or as torch makes it in f32 (θ ** the
		// exponents, then · the low end, each step rounded): the better
		sc := math.Inf(1)
		for _, inF32 := range []bool{false, true} {
			rd := best.read
			rd.freqs = make([]float32, len(best.read.freqs))
			for ax := range a {
				low := snapPi(best.read.freqs[best.slot(lowIdx, ax)])
				lad := ladderF32(th, low, f, form.exps(f))
				for i := range f {
					e := float64(abs(i-lowIdx)) / den
					rd.freqs[best.slot(i, ax)] = float32(low * math.Pow(th, e))
					if inF32 {
						rd.freqs[best.slot(i, ax)] = lad[abs(i-lowIdx)]
					}
				}
			}
			sc = min(sc, score(rd, best.mul))
		}
		r.thetaCands = append(r.thetaCands, semantics.Candidate{Value: th, Score: finite(sc)})
		if sc <= tolerance(cosT.format) && sc < win {
			r.theta, r.thetaForm, win = th, form.note, sc
		}
	}
	return r
}

// ladderForm is how a ladder of F frequencies spreads its exponents:
// low·θ^(i/den(F)), the exponents as torch makes them in f32 (exps).
type ladderForm struct {
	note string
	den  func(f int) float64
	exps func(f int) []float32
}

// ladderForms: exponents linspace(0, 1, F) (the ladder spans θ), or
// arange(0, 1, 1/F) (θ^(−i/F): the ladder stops one step short of θ, as
// 1/θ^(2i/d) over d/2 frequencies does).
var ladderForms = []ladderForm{
	{"exponents linspace(0, 1, F)", func(f int) float64 { return float64(f - 1) }, func(f int) []float32 {
		out := make([]float32, f)
		step := float32(1) / float32(f-1)
		for i := range f {
			out[i] = step * float32(i)
			if i >= f/2 {
				out[i] = 1 - step*float32(f-1-i)
			}
		}
		return out
	}},
	{"exponents arange(0, 1, 1/F)", func(f int) float64 { return float64(f) }, func(f int) []float32 {
		out := make([]float32, f)
		step := float32(1) / float32(f)
		for i := range f {
			out[i] = step * float32(i)
		}
		return out
	}},
}

// digits is how many significant digits x's shortest decimal takes.
func digits(x float64) int {
	m := strconv.FormatFloat(x, 'e', -1, 64) // 3.1622776601683795e+01
	m = m[:strings.IndexByte(m, 'e')]
	return len(strings.Replace(m, ".", "", 1))
}

// sigDigits is x to n significant digits.
func sigDigits(x float64, n int) float64 {
	if !(x > 0) || math.IsInf(x, 0) {
		return x
	}
	p := math.Pow(10, float64(n)-1-math.Floor(math.Log10(x)))
	return math.Round(x*p) / p
}

// ladderF32 is θ ** exps times low, in f32 as torch computes it (the
// exponents as ladderForm.exps makes them), powf, then the product with
// low (π/2 taken as f32(π) times then over 2, each rounded).
func ladderF32(theta, low float64, n int, exps []float32) []float32 {
	out := make([]float32, n)
	for i := range n {
		x := exps[i]
		p := float32(math.Pow(float64(float32(theta)), float64(x)))
		if q := low / math.Pi; q == math.Round(q*8)/8 {
			// a multiple of π: f·π then the division, as freqs * math.pi / den
			den := math.Round(1 / q)
			if den >= 1 && math.Abs(1/den-q) < 1e-12 {
				out[i] = float32(float64(p*float32(math.Pi)) / den)
				continue
			}
		}
		out[i] = p * float32(low)
	}
	return out
}

func abs(i int) int {
	if i < 0 {
		return -i
	}
	return i
}

// snapPi is f as a simple multiple of π (π/8 steps) where its f32 is f,
// else f as it is: the ladder's low end as configs write it (π/2).
func snapPi(f float32) float64 {
	for _, den := range []float64{1, 2, 4, 8} {
		q := math.Round(float64(f)/math.Pi*den) / den
		if q != 0 && float32(q*math.Pi) == f {
			return q * math.Pi
		}
	}
	return float64(f)
}

// coordRopeFactors are rope_theta (where a θ ladder reproduces the
// tables) and rope_position_max of each coordinate RoPE table.
func (s *synth) coordRopeFactors() []semantics.Factor {
	var out []semantics.Factor
	for _, r := range s.coordRopes {
		b := r.best
		if r.theta != 0 {
			f := factor("rope_theta", r.scope, r.theta, r.thetaCands, r.boundary)
			f.Evidence.Note = fmt.Sprintf("the ladder read off the tables' angles at the coordinates (%d frequencies, %s) is low·θ^(e_i), %s; each θ's ladder in both forms recomputed in f64, cast to f32, and in f32, the tables scored (%.1f%% of the read tables' entries equal to the bit)",
				b.f, b.order, r.thetaForm, 100*b.exact)
			out = append(out, f)
		}
		if r.maxCands != nil {
			f := factor("rope_position_max", r.scope, r.maxCands[0].Value, r.maxCands, r.boundary)
			form, other := "(m/max)·2 − 1", "m·(2/max) − 1"
			if b.mul {
				form, other = other, form
			}
			f.Evidence.Note = fmt.Sprintf("u = %s per axis from the coordinates' midpoints, read off the angles of the ladder's low end; every axis's maximum one step away scored; the other op order %s scores %.3g (the winner %.3g)",
				form, other, r.otherForm, b.score)
			out = append(out, f)
		}
	}
	return out
}
