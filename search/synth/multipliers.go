package synth

import (
	"fmt"
	"math"

	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/precision"
)

// weightedSum explains t as c + w₁·a + w₂·b over values of its shape (a
// residual plus two branches each scaled by a multiplier of its own:
// muP's ssm_out and attention_out multipliers), w₁ and w₂ fitted jointly
// by least squares and each snapped to a simple number that fits as well;
// c may be absent. Tried once every other form failed.
func (s *synth) weightedSum(t *val, vals []*val) *val {
	ops := sameShape(t, vals)
	if len(ops) > maxOperands {
		ops = ops[:maxOperands]
	}
	tol := tolerance(t.format)
	rest := make([]float64, len(t.data))
	for _, c := range append([]*val{nil}, ops...) {
		for k := range rest {
			rest[k] = float64(t.data[k])
			if c != nil {
				rest[k] -= float64(c.data[k])
			}
		}
		for i := range ops {
			for j := i + 1; j < len(ops); j++ {
				a, b := ops[i], ops[j]
				if a == c || b == c {
					continue
				}
				var aa, ab, bb, ar, br float64
				for k, r := range rest {
					x, y := float64(a.data[k]), float64(b.data[k])
					aa, ab, bb, ar, br = aa+x*x, ab+x*y, bb+y*y, ar+x*r, br+y*r
				}
				det := aa*bb - ab*ab
				if !(math.Abs(det) > 1e-9*aa*bb) {
					continue
				}
				w1, w2 := (ar*bb-br*ab)/det, (br*aa-ar*ab)/det
				if w1 == 0 || w2 == 0 || (math.Abs(w1-1) < 1e-6 && math.Abs(w2-1) < 1e-6) {
					continue
				}
				miss := func(x, y float64) float64 {
					var num, den float64
					for k, r := range rest {
						d := float64(float32(x*float64(a.data[k])+y*float64(b.data[k]))) - r
						num, den = num+d*d, den+float64(t.data[k])*float64(t.data[k])
					}
					return math.Sqrt(num / den)
				}
				at := miss(w1, w2)
				if at > 2*tol {
					continue
				}
				w1 = snap(w1, func(x float64) bool { return miss(x, w2) <= 1.01*at+1e-9 })
				w2 = snap(w2, func(y float64) bool { return miss(w1, y) <= 1.01*at+1e-9 })
				sa := s.derive(&expr{op: program.OpMul, args: []*val{a, s.constant(w1)}, out: t.format, label: fmt.Sprintf("×%g", w1)})
				sb := s.derive(&expr{op: program.OpMul, args: []*val{b, s.constant(w2)}, out: t.format, label: fmt.Sprintf("×%g", w2)})
				if sa == nil || sb == nil {
					continue
				}
				e := &expr{op: program.OpAdd, args: []*val{sa, sb}, out: t.format, label: fmt.Sprintf("two branches ×%g and ×%g", w1, w2)}
				if c != nil {
					sum := s.derive(e)
					if sum == nil {
						continue
					}
					e = &expr{op: program.OpAdd, args: []*val{c, sum}, out: t.format, label: fmt.Sprintf("a value plus two branches ×%g and ×%g", w1, w2)}
				}
				if v := s.derive(e); v != nil && relRMS(t.format, v.data, t.data) <= tol && s.everyStep(v, t, tol) {
					return v
				}
			}
		}
	}
	return nil
}

// maxRuns bounds the runs of one multiplier scaledRuns accepts across a
// cut's columns (muP's mup_vector holds five: gate, x, B, C, dt).
const maxRuns = 6

// scaledRuns explains t [..., C] as a cut of a value v [..., W ≥ C] (v's
// leading axes t's) whose columns are multiplied by constants that run
// in at most maxRuns contiguous blocks of one value each (a projection's
// output times a per-piece multiplier vector, muP's mup_vector, read
// before a split): each block's multiplier read off t/v, the same down
// every row, snapped to a simple number; the cut's blocks scaled, then
// joined. Tried once every other form failed.
func (s *synth) scaledRuns(t *val, vals []*val) *val {
	if len(t.shape) < 2 {
		return nil
	}
	nd := len(t.shape)
	c := t.shape[nd-1]
	rows := t.numel() / c
	if rows < 2 {
		return nil
	}
	// per column, the row where t is largest: the ratio read there
	at := make([]int, c)
	for j := range c {
		best := float32(-1)
		for r := range rows {
			if x := float32(math.Abs(float64(t.data[r*c+j]))); x > best {
				best, at[j] = x, r
			}
		}
	}
	bits := map[precision.Format]float64{precision.BF16: 8, precision.F16: 11}[t.format]
	if bits == 0 {
		bits = 24
	}
	relTol := 4 * math.Pow(2, -bits)
	tol := tolerance(t.format)
	for _, v := range vals {
		if v.opaque || len(v.shape) != nd || v.numel()/v.shape[nd-1] != rows || v.shape[nd-1] < c {
			continue
		}
		lead := true
		for k := range nd - 1 {
			lead = lead && v.shape[k] == t.shape[k]
		}
		if !lead {
			continue
		}
		w := v.shape[nd-1]
		for off := 0; off+c <= w; off++ {
			var runs [][2]int // [start, end) column blocks of one ratio
			var first float64
			ok := true
			for j := 0; j < c && ok; j++ {
				x := float64(v.data[at[j]*w+off+j])
				if x == 0 {
					ok = false
					break
				}
				q := float64(t.data[at[j]*c+j]) / x
				if len(runs) > 0 && math.Abs(q-first) <= relTol*math.Abs(first) {
					runs[len(runs)-1][1] = j + 1
					continue
				}
				if len(runs) == maxRuns || q == 0 {
					ok = false
					break
				}
				runs, first = append(runs, [2]int{j, j + 1}), q
			}
			if !ok || (len(runs) == 1 && math.Abs(first-1) <= relTol) {
				continue
			}
			var pieces []*val
			for _, run := range runs {
				piece := s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: nd - 1, Start: off + run[0], End: off + run[1]}, args: []*val{v}, out: v.format, label: "a block of columns"})
				if piece == nil {
					break
				}
				want := s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: nd - 1, Start: run[0], End: run[1]}, args: []*val{t}, out: t.format, label: "the target's block"})
				if want == nil {
					break
				}
				m, fits := fitScalar(piece, want)
				if !fits {
					break
				}
				if p := s.derive(&expr{op: program.OpMul, args: []*val{piece, s.constant(m)}, out: t.format, label: fmt.Sprintf("×%g", m)}); p != nil {
					pieces = append(pieces, p)
				}
			}
			if len(pieces) != len(runs) {
				continue
			}
			out := pieces[0]
			if len(pieces) > 1 {
				out = s.derive(&expr{op: program.OpConcat, attrs: program.Attrs{Axis: nd - 1}, args: pieces, out: t.format, label: "blocks, each scaled, joined"})
			}
			if out != nil && relRMS(t.format, out.data, t.data) <= tol && s.everyStep(out, t, tol) {
				return out
			}
		}
	}
	return nil
}
