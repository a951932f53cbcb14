package reports

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Element-wise tolerance, as torch.testing.assert_close states it: a pair
// of elements is close when
//
//	|ours - ref| <= atol + rtol·|ref|
//
// or both are equal (the same infinity included); a NaN is close to
// nothing unless EqualNaN, and then only to a NaN. The gate is written
// "allclose" (the defaults for the pair's dtypes) or
// "allclose(atol=A,rtol=R)" (both or neither, as assert_close wants), with
// an optional ",equal_nan=true"; it passes when no element mismatches.

// Tolerance is an allclose gate's parameters.
type Tolerance struct {
	Atol, Rtol float64
	Given      bool // false: the defaults for the pair's dtypes (DefaultTolerance)
	EqualNaN   bool
}

// DefaultTolerance is assert_close's default (rtol, atol) for a dtype
// (manifest names); integers and booleans must match exactly. A pair of
// two dtypes takes the larger of each, as assert_close does.
func DefaultTolerance(ours, ref string) (rtol, atol float64) {
	one := func(dt string) (float64, float64) {
		switch dt {
		case "float16":
			return 1e-3, 1e-5
		case "bfloat16":
			return 1.6e-2, 1e-5
		case "float32", "complex64":
			return 1.3e-6, 1e-5
		case "float64", "complex128":
			return 1e-7, 1e-7
		}
		return 0, 0
	}
	r1, a1 := one(ours)
	r2, a2 := one(ref)
	return max(r1, r2), max(a1, a2)
}

// parseAllClose reads "allclose" or "allclose(atol=A,rtol=R[,equal_nan=B])".
func parseAllClose(s, expr string) (Gate, error) {
	g := Gate{Metric: "allclose", Op: "=="}
	rest := strings.TrimSpace(strings.TrimPrefix(expr, "allclose"))
	if rest == "" {
		return g, nil
	}
	if !strings.HasPrefix(rest, "(") || !strings.HasSuffix(rest, ")") {
		return g, fmt.Errorf("gate %q: want allclose or allclose(atol=A,rtol=R)", s)
	}
	seen := map[string]bool{}
	for _, kv := range strings.Split(rest[1:len(rest)-1], ",") {
		k, v, ok := strings.Cut(kv, "=")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if !ok || seen[k] {
			return g, fmt.Errorf("gate %q: %q: want atol=A, rtol=R or equal_nan=true, each once", s, kv)
		}
		seen[k] = true
		switch k {
		case "atol", "rtol":
			x, err := strconv.ParseFloat(v, 64)
			if err != nil || math.IsNaN(x) || math.IsInf(x, 0) || x < 0 {
				return g, fmt.Errorf("gate %q: %s %q is not a finite number >= 0", s, k, v)
			}
			if k == "atol" {
				g.Tol.Atol = x
			} else {
				g.Tol.Rtol = x
			}
		case "equal_nan":
			b, err := strconv.ParseBool(v)
			if err != nil {
				return g, fmt.Errorf("gate %q: equal_nan %q is not true or false", s, v)
			}
			g.Tol.EqualNaN = b
		default:
			return g, fmt.Errorf("gate %q: unknown parameter %q (want atol, rtol, equal_nan)", s, k)
		}
	}
	if seen["atol"] != seen["rtol"] {
		return g, fmt.Errorf("gate %q: give both atol and rtol or neither (the dtypes' defaults), as torch.testing.assert_close wants", s)
	}
	g.Tol.Given = seen["atol"]
	return g, nil
}

// allCloseString writes an allclose gate back in the form ParseGate reads.
func (g Gate) allCloseString() string {
	var args []string
	if g.Tol.Given {
		args = append(args, "atol="+strconv.FormatFloat(g.Tol.Atol, 'g', -1, 64), "rtol="+strconv.FormatFloat(g.Tol.Rtol, 'g', -1, 64))
	}
	if g.Tol.EqualNaN {
		args = append(args, "equal_nan=true")
	}
	if len(args) == 0 {
		return "allclose"
	}
	return "allclose(" + strings.Join(args, ",") + ")"
}

// resolve is the tolerance a gate applies to a pair of dtypes.
func (t Tolerance) resolve(ours, ref string) Tolerance {
	if !t.Given {
		t.Rtol, t.Atol = DefaultTolerance(ours, ref)
		t.Given = true
	}
	return t
}

// CloseStats is one allclose check over a pair: how many elements
// mismatch, and the greatest absolute and relative differences with the
// first element reaching each (as assert_close reports them).
type CloseStats struct {
	Tol        Tolerance // resolved
	Mismatched int
	Total      int
	MaxAbs     float64
	MaxAbsAt   int // element index; -1 when no pair was measured
	MaxRel     float64
	MaxRelAt   int
}

func newCloseStats(t Tolerance) CloseStats { return CloseStats{Tol: t, MaxAbsAt: -1, MaxRelAt: -1} }

// merge folds q, the segment after s's, into s.
func (s *CloseStats) merge(q *CloseStats) {
	s.Mismatched += q.Mismatched
	s.Total += q.Total
	if q.MaxAbsAt >= 0 && (s.MaxAbsAt < 0 || q.MaxAbs > s.MaxAbs) {
		s.MaxAbs, s.MaxAbsAt = q.MaxAbs, q.MaxAbsAt
	}
	if q.MaxRelAt >= 0 && (s.MaxRelAt < 0 || q.MaxRel > s.MaxRel) {
		s.MaxRel, s.MaxRelAt = q.MaxRel, q.MaxRelAt
	}
}

// add tests one pair; i is its element index.
func (s *CloseStats) add(o, r float64, i int) {
	s.Total++
	if o == r {
		return // equal, the same infinity included: close, difference 0
	}
	on, rn := o != o, r != r
	if on || rn {
		if !(on && rn && s.Tol.EqualNaN) {
			s.Mismatched++
		}
		return
	}
	d := math.Abs(o - r)
	if math.IsInf(o, 0) || math.IsInf(r, 0) {
		d = math.Inf(1)
	}
	if !(d <= s.Tol.Atol+s.Tol.Rtol*math.Abs(r)) {
		s.Mismatched++
	}
	if s.MaxAbsAt < 0 || d > s.MaxAbs {
		s.MaxAbs, s.MaxAbsAt = d, i
	}
	rel := d / math.Abs(r) // +Inf where ref is 0, as assert_close reports it
	if s.MaxRelAt < 0 || rel > s.MaxRel {
		s.MaxRel, s.MaxRelAt = rel, i
	}
}

func (s *CloseStats) f32(ours, ref []float32, base int) {
	ours = ours[:len(ref)]
	for i, r := range ref {
		s.add(float64(ours[i]), float64(r), base+i)
	}
}

func (s *CloseStats) bf16(ours, ref []uint16, base int) {
	ours = ours[:len(ref)]
	for i, r := range ref {
		s.add(float64(math.Float32frombits(uint32(ours[i])<<16)), float64(math.Float32frombits(uint32(r)<<16)), base+i)
	}
}

// text is the check's report, in assert_close's words: "mismatched
// elements: 3 / 4096 (0.1%), greatest absolute difference 0.5 at index
// (0, 7) (up to 1e-05 allowed), greatest relative difference 0.02 at index
// (1, 2) (up to 0.016 allowed)".
func (s *CloseStats) text(shape []int) string {
	out := fmt.Sprintf("mismatched elements: %d / %d (%.3g%%)", s.Mismatched, s.Total, 100*float64(s.Mismatched)/float64(max(1, s.Total)))
	if s.MaxAbsAt >= 0 {
		out += fmt.Sprintf(", greatest absolute difference %s at index %s (up to %s allowed), greatest relative difference %s at index %s (up to %s allowed)",
			num(s.MaxAbs), indexText(s.MaxAbsAt, shape), num(s.Tol.Atol), num(s.MaxRel), indexText(s.MaxRelAt, shape), num(s.Tol.Rtol))
	}
	return out
}

// indexText writes a flat element index as the tuple of shape's axes.
func indexText(i int, shape []int) string {
	if len(shape) == 0 {
		return "()"
	}
	idx := make([]string, len(shape))
	for k := len(shape) - 1; k >= 0; k-- {
		n := max(1, shape[k])
		idx[k] = strconv.Itoa(i % n)
		i /= n
	}
	if len(idx) == 1 {
		return "(" + idx[0] + ",)"
	}
	return "(" + strings.Join(idx, ", ") + ")"
}
