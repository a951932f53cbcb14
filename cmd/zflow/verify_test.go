package main

import (
	"encoding/csv"
	"encoding/json"
	"encoding/xml"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zflow/zflow/reports"
	"github.com/zflow/zflow/semantics"
	"github.com/zflow/zflow/trace"
)

var (
	ditTrace = filepath.Join(fixtures, "dit", "dit-bf16.npz")
	ditDoc   = filepath.Join(testdata, "dit-bf16.json")
)

func TestVerifyExitCodes(t *testing.T) {
	for _, c := range []struct {
		name string
		args []string
		code int
	}{
		{"default gates pass", nil, 0},
		{"free running", []string{"--free-running"}, 0},
		{"bit-exact gate fails", []string{"--gate", "exact>=1"}, 1},
		{"bad gate", []string{"--gate", "exact>>1"}, 2},
		{"both modes", []string{"--teacher-forced", "--free-running"}, 2},
		{"bad format", []string{"--format", "yaml"}, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			args := append([]string{"verify", "--trace", ditTrace, "--semantics", ditDoc, "--steps", "1"}, c.args...)
			code, _, stderr := zflow(t, args...)
			if code != c.code {
				t.Errorf("exit %d, want %d: %s", code, c.code, stderr)
			}
		})
	}
	code, _, stderr := zflow(t, "verify", "--trace", "no-such.npz", "--semantics", ditDoc)
	if code != 2 || !strings.Contains(stderr, "no-such.npz") {
		t.Errorf("missing trace: exit %d: %s", code, stderr)
	}
}

// TestVerifyJSON: zflow diff's document, with op_class and ulp_hist on
// each boundary, totals per op class, the first inexact boundary and the
// run's mode.
func TestVerifyJSON(t *testing.T) {
	code, stdout, stderr := zflow(t, "verify", "--trace", ditTrace, "--semantics", ditDoc, "--format", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var doc struct {
		Format     string `json:"format"`
		Version    int    `json:"version"`
		Pass       bool   `json:"pass"`
		Boundaries []struct {
			Key           string         `json:"key"`
			OpClass       *string        `json:"op_class"`
			ExactFraction any            `json:"exact_fraction"`
			ULPHist       map[string]int `json:"ulp_hist"`
		} `json:"boundaries"`
		Verify struct {
			Mode string `json:"mode"`
		} `json:"verify"`
		Totals []struct {
			OpClass       string         `json:"op_class"`
			Values        int            `json:"values"`
			ExactFraction float64        `json:"exact_fraction"`
			ULPHist       map[string]int `json:"ulp_hist"`
		} `json:"totals"`
		FirstInexact *struct {
			Key     string `json:"key"`
			OpClass string `json:"op_class"`
		} `json:"first_inexact"`
	}
	if err := json.Unmarshal([]byte(stdout), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Format != "zflow-diff" || doc.Version != 1 || !doc.Pass || doc.Verify.Mode != "teacher-forced" {
		t.Errorf("header: %+v", doc)
	}
	classes := map[string]bool{}
	for _, b := range doc.Boundaries {
		if b.OpClass == nil || b.ExactFraction == nil {
			t.Fatalf("%s: no op_class or exact_fraction", b.Key)
		}
		classes[*b.OpClass] = true
	}
	for _, c := range []string{"norm", "modulate", "linear", "attention", "act", "gated_residual", "euler_step"} {
		if !classes[c] {
			t.Errorf("no boundary of op class %s", c)
		}
	}
	if len(doc.Totals) == 0 {
		t.Fatal("no totals")
	}
	for _, tot := range doc.Totals {
		n := 0
		for _, v := range tot.ULPHist {
			n += v
		}
		if n != tot.Values {
			t.Errorf("%s: ULP histogram holds %d of %d values", tot.OpClass, n, tot.Values)
		}
	}
	if doc.FirstInexact == nil || doc.FirstInexact.OpClass != "timestep_embed" {
		t.Errorf("first inexact: %+v (the f32 sinusoid: Sleef's sin/cos against correctly rounded ones)", doc.FirstInexact)
	}
}

func TestVerifyCSVAndMarkdown(t *testing.T) {
	code, stdout, stderr := zflow(t, "verify", "--trace", ditTrace, "--semantics", ditDoc, "--format", "csv", "--steps", "1")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	rows, err := csv.NewReader(strings.NewReader(stdout)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if h := rows[0]; h[len(h)-1] != "op_class" || h[1] != "key" {
		t.Errorf("header %v", h)
	}
	for _, r := range rows[1:] {
		if strings.HasPrefix(r[len(r)-3], "unpaired-") {
			continue // not compared (--steps 1 runs step 0 only): no op class
		}
		if strings.Contains(r[1], ".norm1/out") && r[len(r)-1] != "norm" {
			t.Errorf("%s: op class %q", r[1], r[len(r)-1])
		}
	}
	code, stdout, stderr = zflow(t, "verify", "--trace", ditTrace, "--semantics", ditDoc, "--format", "markdown", "--steps", "1")
	if code != 0 || !strings.Contains(stdout, "### Bit-exactness by op class (teacher-forced)") {
		t.Errorf("markdown: exit %d: %s", code, stderr)
	}
}

// TestPrecisionThenVerify: discovery from scratch on the DiT fixture writes
// a document whose plan makes every block boundary bit-exact teacher
// forced; the hand-written plan does not.
func TestPrecisionThenVerify(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "dit-bf16.json")
	code, stdout, stderr := zflow(t, "precision", "--trace", ditTrace, "--semantics", ditDoc, "--from-scratch", "-o", out)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"op class", "per-role rules", "wrote " + out} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}
	doc, err := semantics.Read(out)
	if err != nil {
		t.Fatal(err)
	}
	if doc.Precision.Status != "searched" || len(doc.Precision.Exact) == 0 {
		t.Errorf("precision: status %q, %d exact fractions", doc.Precision.Status, len(doc.Precision.Exact))
	}
	gate := "transformer.blocks.*:exact>=1"
	if code, _, stderr := zflow(t, "verify", "--trace", ditTrace, "--semantics", out, "--gate", gate); code != 0 {
		t.Errorf("discovered plan: exit %d: %s", code, stderr)
	}
	if code, _, _ := zflow(t, "verify", "--trace", ditTrace, "--semantics", ditDoc, "--gate", gate); code != 1 {
		t.Errorf("hand-written plan: exit %d, want 1 (its layer norms and attention are not bit-exact)", code)
	}
	code, stdout, _ = zflow(t, "precision", "--trace", ditTrace, "--semantics", out, "--format", "json", "--steps", "1")
	var pd struct {
		Format  string `json:"format"`
		Classes []struct {
			Class  string `json:"class"`
			Before string `json:"before"`
		} `json:"classes"`
	}
	if code != 0 || json.Unmarshal([]byte(stdout), &pd) != nil || pd.Format != "zflow-precision" || len(pd.Classes) == 0 {
		t.Errorf("json: exit %d: %.300s", code, stdout)
	}
	if code, _, _ := zflow(t, "precision", "--trace", ditTrace, "--semantics", out, "-o", ditTrace); code != 2 {
		t.Errorf("-o onto the trace: exit %d, want 2", code)
	}
}

// TestVerifyPrecisionExamples runs the commands' examples as written.
func TestVerifyPrecisionExamples(t *testing.T) {
	dir := t.TempDir()
	for _, d := range []string{"fixtures", "semantics"} {
		abs, err := filepath.Abs(filepath.Join("../..", d))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(abs, filepath.Join(dir, d)); err != nil {
			t.Skip("no symlinks:", err)
		}
	}
	t.Chdir(dir)
	for _, ex := range []string{newVerifyCmd().Example, newPrecisionCmd().Example} {
		for _, line := range strings.Split(ex, "\n") {
			var args []string
			for _, f := range strings.Fields(strings.ReplaceAll(line, "/tmp/", dir+"/")) {
				args = append(args, strings.Trim(f, "'"))
			}
			if len(args) < 2 || args[0] != "zflow" {
				t.Fatalf("example line %q is not a zflow command", line)
			}
			if code, _, stderr := zflow(t, args[1:]...); code != 0 {
				t.Errorf("%s: exit %d: %s", line, code, stderr)
			}
		}
	}
}

// TestVerifyAccountsForEveryBoundary: issue 12, item 3. With every step-0
// call port of the reference zero-sized, the program's values there have
// another shape: they are listed as not compared, with the reason, and
// the run fails. Either way compared + skipped + not compared is every
// boundary of the reference.
func TestVerifyAccountsForEveryBoundary(t *testing.T) {
	zeroed := filepath.Join(t.TempDir(), "zero-s0.npz")
	mt := loadTrace(t, ditTrace)
	n := 0
	for _, k := range mt.keys {
		if x := mt.ts[k]; strings.HasPrefix(k, "s0/") && len(x.shape) > 0 {
			x.shape[0], x.data = 0, nil
			n++
		}
	}
	if n == 0 || !mt.write(zeroed) {
		t.Fatalf("could not write the zero-sized trace (%d ports)", n)
	}
	for _, c := range []struct {
		name, trace string
		code        int
		misshapen   bool
	}{
		{"the fixture", ditTrace, 0, false},
		{"step-0 ports zero-sized", zeroed, 1, true},
	} {
		code, stdout, stderr := zflow(t, "verify", "--trace", c.trace, "--semantics", ditDoc, "--format", "json")
		if code != c.code {
			t.Fatalf("%s: exit %d, want %d: %s", c.name, code, c.code, stderr)
		}
		var doc struct {
			Counts   struct{ Boundaries int } `json:"counts"`
			Unpaired []struct {
				Side, Reason  string
				ShapeMismatch bool `json:"shape_mismatch"`
			}
			Verify struct {
				Skipped    int `json:"skipped_undetermined"`
				Reference  int `json:"reference_boundaries"`
				NotCompare int `json:"not_compared"`
				Misshapen  int `json:"not_compared_shape"`
			}
		}
		if err := json.Unmarshal([]byte(stdout), &doc); err != nil {
			t.Fatal(err)
		}
		tr, err := trace.Open(c.trace)
		if err != nil {
			t.Fatal(err)
		}
		all, err := reports.Boundaries(tr, reports.Selection{})
		tr.Close()
		if err != nil {
			t.Fatal(err)
		}
		v := doc.Verify
		if v.Reference != len(all) || doc.Counts.Boundaries+v.Skipped+v.NotCompare != len(all) || len(doc.Unpaired) != v.NotCompare {
			t.Errorf("%s: %d reference boundaries, reported %d: %d compared + %d skipped + %d not compared (%d listed)",
				c.name, len(all), v.Reference, doc.Counts.Boundaries, v.Skipped, v.NotCompare, len(doc.Unpaired))
		}
		flagged := 0
		for _, u := range doc.Unpaired {
			if u.Side != "ref" || !strings.HasPrefix(u.Reason, "not compared: ") {
				t.Errorf("%s: unpaired %+v", c.name, u)
			}
			if u.ShapeMismatch {
				flagged++
			}
		}
		if (v.Misshapen > 0) != c.misshapen || c.misshapen && !strings.Contains(stderr, "another shape") || flagged != v.Misshapen {
			t.Errorf("%s: %d misshapen (%d flagged shape_mismatch); stderr %s", c.name, v.Misshapen, flagged, stderr)
		}
		// JUnit: a value of another shape is an error, not a skip
		_, junit, _ := zflow(t, "verify", "--trace", c.trace, "--semantics", ditDoc, "--format", "junit")
		var jd struct {
			Errors int `xml:"errors,attr"`
		}
		if err := xml.Unmarshal([]byte(junit), &jd); err != nil || jd.Errors != v.Misshapen {
			t.Errorf("%s: junit errors %d, want %d (%v)", c.name, jd.Errors, v.Misshapen, err)
		}
	}
}

// TestVerifyNotRunSteps: with --steps, the boundaries of the steps the run
// did not reach are accounted for as not run, not as missing taps.
func TestVerifyNotRunSteps(t *testing.T) {
	code, stdout, stderr := zflow(t, "verify", "--trace", ditTrace, "--semantics", ditDoc, "--steps", "1", "--format", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(stdout, "was not run (--steps 1)") {
		t.Errorf("no boundary listed as not run")
	}
}
