package reports

import (
	"encoding/json"
	"math"
	"testing"
)

func TestParseGate(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Gate
		str  string
	}{
		{"rel_rms<=2e-3", Gate{Metric: "rel_rms", Op: "<=", Value: 2e-3}, "rel_rms<=0.002"},
		{" exact >= 0.999 ", Gate{Metric: "exact", Op: ">=", Value: 0.999}, "exact>=0.999"},
		{"exact_fraction>0.5", Gate{Metric: "exact", Op: ">", Value: 0.5}, "exact>0.5"},
		{"transformer.blocks.*:rel_rms<=1e-2", Gate{Glob: "transformer.blocks.*", Metric: "rel_rms", Op: "<=", Value: 1e-2}, "transformer.blocks.*:rel_rms<=0.01"},
		{"s2/*/out:cosine>=0.999", Gate{Glob: "s2/*/out", Metric: "cosine", Op: ">=", Value: 0.999}, "s2/*/out:cosine>=0.999"},
		{"rel_rms<=auto", Gate{Metric: "rel_rms", Op: "<=", Auto: true}, "rel_rms<=auto"},
		{"nonfinite==0", Gate{Metric: "nonfinite", Op: "==", Value: 0}, "nonfinite==0"},
		{"psnr>40", Gate{Metric: "psnr", Op: ">", Value: 40}, "psnr>40"},
		{"ulp_max<4", Gate{Metric: "ulp_max", Op: "<", Value: 4}, "ulp_max<4"},
		{"max_abs<=inf", Gate{Metric: "max_abs", Op: "<=", Value: math.Inf(1)}, "max_abs<=+Inf"},
	} {
		g, err := ParseGate(c.in)
		if err != nil {
			t.Errorf("%q: %v", c.in, err)
			continue
		}
		if g != c.want {
			t.Errorf("%q: %+v, want %+v", c.in, g, c.want)
		}
		if g.String() != c.str {
			t.Errorf("%q: String %q, want %q", c.in, g.String(), c.str)
		}
		if g2, err := ParseGate(g.String()); err != nil || g2 != g {
			t.Errorf("%q: String does not parse back: %+v %v", c.in, g2, err)
		}
	}
	for _, bad := range []string{"", "rel_rms", "rel_rms<", "rel_rms<=x", "rel_rms<=nan", "relrms<=1",
		"rel_rms=>1", "rel_rms!=1", ":rel_rms<=1", "[x:rel_rms<=1", "cosine>=auto", "rel_rms>=auto", "<=1"} {
		if g, err := ParseGate(bad); err == nil {
			t.Errorf("%q accepted as %+v", bad, g)
		}
	}
}

func TestGateApplies(t *testing.T) {
	b := Boundary{Key: "s0/transformer.blocks.3.attn/out", Scope: "s0", Module: "transformer.blocks.3.attn", Port: "out"}
	out := Boundary{Key: "output/latents", Scope: "output", Port: "latents"}
	for _, c := range []struct {
		glob string
		b    Boundary
		want bool
	}{
		{"", b, true},
		{"transformer.blocks.*", b, true},
		{"transformer.blocks.3", b, false},
		{"s0/*/out", b, true},
		{"s1/*", b, false},
		{"*", b, true},
		{"output/*", out, true},
		{"*", out, false}, // '*' does not cross the slash of output/latents, and outputs have no module
		{"transformer.*", out, false},
	} {
		if got := (Gate{Glob: c.glob}).Applies(c.b); got != c.want {
			t.Errorf("%q on %s: %v, want %v", c.glob, c.b.Key, got, c.want)
		}
	}
}

func TestGateEvaluate(t *testing.T) {
	m := &Metrics{RelRMS: 0.01, Cosine: 0.999, PSNR: math.Inf(1), ExactFraction: 0.9, MaxAbs: 0.5,
		ULP: ULPStats{Median: 1, P99: 3, Max: 7}, Ours: Side{NaN: 2, PosInf: 1}}
	gate := func(s string) Gate {
		g, err := ParseGate(s)
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	for _, c := range []struct {
		gate      string
		ours, ref string // dtypes
		pass      bool
		threshold float64
	}{
		{"rel_rms<=0.01", "float32", "float32", true, 0.01},
		{"rel_rms<0.01", "float32", "float32", false, 0.01},
		{"rel_rms<=auto", "bfloat16", "bfloat16", true, AutoRelRMSBF16},
		{"rel_rms<=auto", "bfloat16", "float32", true, AutoRelRMSBF16}, // the coarser side
		{"rel_rms<=auto", "float32", "float16", true, AutoRelRMSF16},
		{"rel_rms<=auto", "float32", "float32", false, AutoRelRMSF32},
		{"rel_rms<=auto", "int64", "int64", false, 0},
		{"psnr>=100", "float32", "float32", true, 100},
		{"cosine>0.9999", "float32", "float32", false, 0.9999},
		{"exact>=0.9", "float32", "float32", true, 0.9},
		{"ulp_median<=1", "float32", "float32", true, 1},
		{"ulp_p99<3", "float32", "float32", false, 3},
		{"ulp_max==7", "float32", "float32", true, 7},
		{"nan==0", "float32", "float32", false, 0},
		{"inf<=1", "float32", "float32", true, 1},
		{"nonfinite==0", "float32", "float32", false, 0},
		{"max_abs>0.5", "float32", "float32", false, 0.5},
		{"other.*:rel_rms<=0", "float32", "float32", true, -1}, // does not apply
	} {
		d := &BoundaryDiff{Boundary: Boundary{Key: "s0/m/out", Module: "m"}, Metrics: m,
			OursDType: c.ours, DType: c.ref, NonFiniteMismatch: 3}
		d.evaluate([]Gate{gate(c.gate)})
		if d.Pass != c.pass {
			t.Errorf("%s (%s vs %s): pass %v, want %v (%v)", c.gate, c.ours, c.ref, d.Pass, c.pass, d.Checks)
		}
		if c.threshold < 0 {
			if len(d.Checks) != 0 {
				t.Errorf("%s: applied", c.gate)
			}
			continue
		}
		if len(d.Checks) != 1 || d.Checks[0].Threshold != c.threshold {
			t.Errorf("%s: checks %+v, want threshold %v", c.gate, d.Checks, c.threshold)
		}
	}
	// A NaN metric fails every comparison.
	d := &BoundaryDiff{Metrics: &Metrics{RelRMS: math.NaN()}, DType: "float32", OursDType: "float32"}
	d.evaluate([]Gate{gate("rel_rms<=1"), gate("rel_rms>=1")})
	if d.Pass || d.Checks[0].Pass || d.Checks[1].Pass {
		t.Errorf("NaN passed: %+v", d.Checks)
	}
}

func TestFloatJSON(t *testing.T) {
	for _, c := range []struct {
		x    float64
		want string
	}{{1.5, "1.5"}, {0, "0"}, {-2e-300, "-2e-300"}, {math.Inf(1), `"inf"`}, {math.Inf(-1), `"-inf"`}, {math.NaN(), `"nan"`}} {
		b, err := json.Marshal(Float(c.x))
		if err != nil || string(b) != c.want {
			t.Errorf("%v: %s %v, want %s", c.x, b, err, c.want)
		}
		var back Float
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		if float64(back) != c.x && !(math.IsNaN(c.x) && math.IsNaN(float64(back))) {
			t.Errorf("%s reads back as %v", b, back)
		}
	}
	var f Float
	if err := json.Unmarshal([]byte(`"infinity"`), &f); err == nil {
		t.Error(`"infinity" accepted`)
	}
}
