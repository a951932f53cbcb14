package reports

import (
	"fmt"
	"math"
	"path"
	"strconv"
	"strings"

	"github.com/zflow/zflow/precision"
)

// Gate is one pass/fail condition on a boundary's metrics, written
//
//	[GLOB:]METRIC OP VALUE
//
// METRIC is one of GateMetrics; OP is <=, <, >=, > or ==; VALUE is a
// number, or "auto" for rel_rms (the threshold AutoRelRMS gives for the
// pair's dtypes). GLOB, if given, limits the gate to the boundaries whose
// key or module path it matches (path.Match, where '*' crosses dots but not
// slashes): "transformer.blocks.*:rel_rms<=1e-2" gates every call under
// transformer.blocks, "s2/*/out:cosine>=0.999" the results of step 2,
// "output/*:exact>=1" the run's outputs.
type Gate struct {
	Glob   string
	Metric string
	Op     string
	Value  float64 // unused when Auto
	Auto   bool
	Tol    Tolerance // the allclose gate's (Metric "allclose"; see Tolerance)
}

// GateMetrics names the metrics a gate can test, with what each reads.
var GateMetrics = map[string]string{
	"max_abs":    "largest |ours - ref| over finite pairs",
	"mean_abs":   "mean |ours - ref| over finite pairs",
	"rel_rms":    "sqrt(Σ(ours-ref)² / Σref²) over finite pairs",
	"cosine":     "cosine similarity over finite pairs",
	"psnr":       "peak signal-to-noise ratio in dB (+inf when identical)",
	"exact":      "fraction of elements bit-exact in the reference's dtype (also exact_fraction)",
	"ulp_median": "median ULP distance in the reference's dtype",
	"ulp_p99":    "99th-percentile ULP distance",
	"ulp_max":    "largest ULP distance",
	"nan":        "NaN values on our side",
	"inf":        "Inf values on our side",
	"nonfinite":  "positions that are NaN or Inf on one side and not the same on the other",
	"allclose":   "allclose or allclose(atol=A,rtol=R): no element with |ours-ref| > atol + rtol·|ref| (torch.testing.assert_close; defaults per dtype)",
}

// DefaultGates apply when none are given: rel-RMS within what the pair's
// dtypes allow, and no NaN or Inf that the reference does not have.
var DefaultGates = []Gate{
	{Metric: "rel_rms", Op: "<=", Auto: true},
	{Metric: "nonfinite", Op: "==", Value: 0},
}

// The rel-RMS thresholds of "rel_rms<=auto", by the coarser of the two
// sides' dtypes. They allow rounding drift accumulated over a deep model
// in that format, not a wrong factor: the planted faults of
// fixtures/faults and the conformance pairs (bf16 on a GPU against f32 on
// a CPU) are the calibration.
const (
	AutoRelRMSF32  = 1e-4     // f32 against f32: different summation orders
	AutoRelRMSF16  = 1.0 / 64 // 2^-6: f16's 2^-11 epsilon, with headroom for drift
	AutoRelRMSBF16 = 1.0 / 16 // 2^-4: bf16's 2^-8 epsilon, with headroom for drift
	AutoRelRMSInt  = 0.0      // integers and booleans must match exactly
)

// AutoRelRMS is the threshold of "rel_rms<=auto" for a pair stored as
// ours and ref (dtype names as in the manifest), and the format it
// was chosen for.
func AutoRelRMS(ours, ref string) (float64, string) {
	rank := func(dt string) int { // coarser is larger
		switch dt {
		case "bfloat16":
			return 3
		case "float16":
			return 2
		case "float32", "float64", "complex64", "complex128":
			return 1
		}
		return 0
	}
	switch max(rank(ours), rank(ref)) {
	case 3:
		return AutoRelRMSBF16, "bf16"
	case 2:
		return AutoRelRMSF16, "f16"
	case 1:
		return AutoRelRMSF32, "f32"
	}
	return AutoRelRMSInt, "integer"
}

// ParseGate reads a gate expression; see Gate.
func ParseGate(s string) (Gate, error) {
	var g Gate
	expr := strings.TrimSpace(s)
	if i := strings.LastIndex(expr, ":"); i >= 0 {
		g.Glob, expr = strings.TrimSpace(expr[:i]), strings.TrimSpace(expr[i+1:])
		if g.Glob == "" {
			return g, fmt.Errorf("gate %q: empty glob before ':'", s)
		}
		if _, err := path.Match(g.Glob, ""); err != nil {
			return g, fmt.Errorf("gate %q: glob %q: %w", s, g.Glob, err)
		}
	}
	if strings.HasPrefix(expr, "allclose") {
		a, err := parseAllClose(s, expr)
		a.Glob = g.Glob
		return a, err
	}
	i := strings.IndexAny(expr, "<>=")
	if i < 0 {
		return g, fmt.Errorf("gate %q: no comparison (want METRIC OP VALUE, OP one of <= < >= > ==)", s)
	}
	g.Metric = strings.TrimSpace(expr[:i])
	rest := expr[i:]
	for _, op := range []string{"<=", ">=", "==", "<", ">"} {
		if strings.HasPrefix(rest, op) {
			g.Op, rest = op, strings.TrimSpace(rest[len(op):])
			break
		}
	}
	if g.Op == "" {
		return g, fmt.Errorf("gate %q: unknown comparison %q (want <=, <, >=, > or ==)", s, rest)
	}
	if g.Metric == "exact_fraction" {
		g.Metric = "exact"
	}
	if _, ok := GateMetrics[g.Metric]; !ok {
		return g, fmt.Errorf("gate %q: unknown metric %q (want one of %s)", s, g.Metric, strings.Join(sortedMetricNames(), ", "))
	}
	if rest == "auto" {
		if g.Metric != "rel_rms" || g.Op != "<=" {
			return g, fmt.Errorf("gate %q: \"auto\" is only for rel_rms<=", s)
		}
		g.Auto = true
		return g, nil
	}
	v, err := strconv.ParseFloat(rest, 64)
	if err != nil || math.IsNaN(v) {
		return g, fmt.Errorf("gate %q: value %q is not a number", s, rest)
	}
	g.Value = v
	return g, nil
}

func sortedMetricNames() []string {
	return []string{"max_abs", "mean_abs", "rel_rms", "cosine", "psnr", "exact", "ulp_median", "ulp_p99", "ulp_max", "nan", "inf", "nonfinite", "allclose"}
}

// String writes the gate back in the form ParseGate reads.
func (g Gate) String() string {
	v := "auto"
	if !g.Auto {
		v = strconv.FormatFloat(g.Value, 'g', -1, 64)
	}
	s := g.Metric + g.Op + v
	if g.Metric == "allclose" {
		s = g.allCloseString()
	}
	if g.Glob != "" {
		s = g.Glob + ":" + s
	}
	return s
}

// Applies reports whether the gate tests boundary b.
func (g Gate) Applies(b Boundary) bool {
	if g.Glob == "" {
		return true
	}
	if ok, _ := path.Match(g.Glob, b.Key); ok {
		return true
	}
	ok, _ := path.Match(g.Glob, b.Module)
	return ok && b.Module != ""
}

// Check is one gate applied to one boundary.
type Check struct {
	Gate      Gate
	Threshold float64 // the value compared against (resolved for auto)
	Format    string  // for auto: the format the threshold was chosen for
	Got       float64
	Pass      bool
	Close     *CloseStats // an allclose check's counts (Got is Mismatched)
	shape     []int       // the reference's, for Close's indexes
}

// String is the check as a person reads it: "rel_rms<=0.0625 (auto, bf16):
// 0.013 ok".
func (c Check) String() string {
	verdict := "ok"
	if !c.Pass {
		verdict = "FAILED"
	}
	if cs := c.Close; cs != nil {
		g := c.Gate
		g.Tol = cs.Tol
		return fmt.Sprintf("%s: %s %s", g.String(), cs.text(c.shape), verdict)
	}
	s := c.Gate.Metric + c.Gate.Op + strconv.FormatFloat(c.Threshold, 'g', 4, 64)
	if c.Gate.Auto {
		s += " (auto, " + c.Format + ")"
	}
	if c.Gate.Glob != "" {
		s = c.Gate.Glob + ":" + s
	}
	return fmt.Sprintf("%s: %s %s", s, strconv.FormatFloat(c.Got, 'g', 4, 64), verdict)
}

// metric reads a gate metric from a compared boundary.
func (d *BoundaryDiff) metric(name string) float64 {
	m := d.Metrics
	switch name {
	case "max_abs":
		return m.MaxAbs
	case "mean_abs":
		return m.MeanAbs
	case "rel_rms":
		return m.RelRMS
	case "cosine":
		return m.Cosine
	case "psnr":
		return m.PSNR
	case "exact":
		return m.ExactFraction
	case "ulp_median":
		return float64(m.ULP.Median)
	case "ulp_p99":
		return float64(m.ULP.P99)
	case "ulp_max":
		return float64(m.ULP.Max)
	case "nan":
		return float64(m.Ours.NaN)
	case "inf":
		return float64(m.Ours.PosInf + m.Ours.NegInf)
	case "nonfinite":
		return float64(d.NonFiniteMismatch)
	}
	panic("reports: unknown gate metric " + name)
}

// evaluate applies the gates that concern a compared boundary. A NaN
// metric fails every comparison.
func (d *BoundaryDiff) evaluate(gates []Gate) {
	d.Pass = true
	for gi, g := range gates {
		if !g.Applies(d.Boundary) {
			continue
		}
		if g.Metric == "allclose" {
			cs := d.close[gi]
			if cs == nil {
				panic("reports: allclose gate without its counts")
			}
			c := Check{Gate: g, Got: float64(cs.Mismatched), Pass: cs.Mismatched == 0, Close: cs, shape: d.Shape}
			d.Checks = append(d.Checks, c)
			d.Pass = d.Pass && c.Pass
			continue
		}
		c := Check{Gate: g, Threshold: g.Value, Got: d.metric(g.Metric)}
		if g.Auto {
			c.Threshold, c.Format = AutoRelRMS(d.OursDType, d.DType)
		}
		switch g.Op {
		case "<=":
			c.Pass = c.Got <= c.Threshold
		case "<":
			c.Pass = c.Got < c.Threshold
		case ">=":
			c.Pass = c.Got >= c.Threshold
		case ">":
			c.Pass = c.Got > c.Threshold
		case "==":
			c.Pass = c.Got == c.Threshold
		}
		d.Checks = append(d.Checks, c)
		d.Pass = d.Pass && c.Pass
	}
}

// formatOf is the precision format a reference stored in dtype is compared
// in, and false for a dtype that cannot be compared through float32
// (f64 and complex128: narrowing would lose the bits being compared).
func formatOf(dtype string) (precision.Format, bool) {
	switch dtype {
	case "bfloat16":
		return precision.BF16, true
	case "float16":
		return precision.F16, true
	case "float64", "complex128":
		return 0, false
	}
	return precision.F32, true // f32, complex64 (interleaved parts), integers, bool
}
