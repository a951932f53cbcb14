package reports

import (
	"math"
	"strings"
	"testing"
)

func TestParseAllClose(t *testing.T) {
	for _, c := range []struct {
		in   string
		want string // String() of the gate; "" for an error
		tol  Tolerance
	}{
		{"allclose", "allclose", Tolerance{}},
		{"allclose(atol=1e-5,rtol=1.3e-6)", "allclose(atol=1e-05,rtol=1.3e-06)", Tolerance{Atol: 1e-5, Rtol: 1.3e-6, Given: true}},
		{"s0/*:allclose(rtol=0, atol=0, equal_nan=true)", "s0/*:allclose(atol=0,rtol=0,equal_nan=true)", Tolerance{Given: true, EqualNaN: true}},
		{"allclose(atol=1e-5)", "", Tolerance{}},               // both or neither
		{"allclose(atol=1e-5,atol=1,rtol=0)", "", Tolerance{}}, // twice
		{"allclose(atol=-1,rtol=0)", "", Tolerance{}},
		{"allclose(atol=nan,rtol=0)", "", Tolerance{}},
		{"allclose(tol=1)", "", Tolerance{}},
		{"allclose[atol=1]", "", Tolerance{}},
	} {
		g, err := ParseGate(c.in)
		switch {
		case c.want == "" && err == nil:
			t.Errorf("%q: accepted as %s", c.in, g)
		case c.want != "" && err != nil:
			t.Errorf("%q: %v", c.in, err)
		case c.want != "" && (g.String() != c.want || g.Tol != c.tol):
			t.Errorf("%q: %s %+v, want %s %+v", c.in, g, g.Tol, c.want, c.tol)
		}
		if c.want != "" {
			if back, err := ParseGate(g.String()); err != nil || back != g {
				t.Errorf("%q: does not read back: %v", c.in, err)
			}
		}
	}
}

func TestDefaultTolerance(t *testing.T) {
	for _, c := range []struct {
		ours, ref  string
		rtol, atol float64
	}{
		{"bfloat16", "bfloat16", 1.6e-2, 1e-5},
		{"float16", "float16", 1e-3, 1e-5},
		{"float32", "float32", 1.3e-6, 1e-5},
		{"bfloat16", "float32", 1.6e-2, 1e-5}, // the larger of each
		{"int64", "int64", 0, 0},
		{"bool", "bool", 0, 0},
	} {
		if r, a := DefaultTolerance(c.ours, c.ref); r != c.rtol || a != c.atol {
			t.Errorf("%s/%s: rtol %g atol %g, want %g %g", c.ours, c.ref, r, a, c.rtol, c.atol)
		}
	}
}

// TestCloseStats: assert_close's test by hand, element by element.
func TestCloseStats(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	ref := []float32{1, 2, 0, float32(nan), float32(inf), -4, 10}
	ours := []float32{1, 2.01, 1e-6, float32(nan), float32(inf), -4.5, 10.05}
	// atol 1e-5, rtol 1e-2: |d| <= 1e-5 + 1e-2·|ref|
	//   0: equal; 1: 0.01 <= 0.02001 ok; 2: 1e-6 <= 1e-5 ok; 3: NaN/NaN mismatch
	//   (not equal_nan); 4: inf == inf ok; 5: 0.5 > 0.04001 mismatch;
	//   6: 0.05 <= 0.10001 ok
	for _, c := range []struct {
		equalNaN   bool
		mismatched int
	}{{false, 2}, {true, 1}} {
		s := newCloseStats(Tolerance{Atol: 1e-5, Rtol: 1e-2, Given: true, EqualNaN: c.equalNaN})
		s.f32(ours[:3], ref[:3], 0)
		q := newCloseStats(s.Tol)
		q.f32(ours[3:], ref[3:], 3)
		s.merge(&q)
		if s.Mismatched != c.mismatched || s.Total != 7 {
			t.Errorf("equal_nan %v: %d / %d mismatched, want %d / 7", c.equalNaN, s.Mismatched, s.Total, c.mismatched)
		}
		if s.MaxAbsAt != 5 || math.Abs(s.MaxAbs-0.5) > 1e-12 {
			t.Errorf("greatest absolute difference %g at %d, want 0.5 at 5", s.MaxAbs, s.MaxAbsAt)
		}
		if s.MaxRelAt != 2 || !math.IsInf(s.MaxRel, 1) {
			t.Errorf("greatest relative difference %g at %d, want +Inf at 2 (ref 0)", s.MaxRel, s.MaxRelAt)
		}
		txt := s.text([]int{7})
		if want := "mismatched elements: " + map[bool]string{false: "2 / 7 (28.6%)", true: "1 / 7 (14.3%)"}[c.equalNaN]; !strings.HasPrefix(txt, want) ||
			!strings.Contains(txt, "greatest absolute difference 0.5 at index (5,)") {
			t.Errorf("text %q", txt)
		}
	}
	if got := indexText(37, []int{2, 4, 5}); got != "(1, 3, 2)" {
		t.Errorf("indexText: %s", got)
	}
}

// TestCloseStatsBF16Bits: the stored-bits path reads the same values.
func TestCloseStatsBF16Bits(t *testing.T) {
	s := newCloseStats(Tolerance{Atol: 0.5, Given: true})
	s.bf16([]uint16{0x3F80, 0x4000, 0x7FC0}, []uint16{0x3F80, 0x3F80, 0x7FC0}, 10) // 1 vs 1, 2 vs 1, NaN vs NaN
	if s.Mismatched != 2 || s.Total != 3 || s.MaxAbs != 1 || s.MaxAbsAt != 11 {
		t.Errorf("%+v, want 2 / 3 mismatched, greatest |d| 1 at 11", s)
	}
}
