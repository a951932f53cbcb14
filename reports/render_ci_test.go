package reports

import (
	"bytes"
	"encoding/xml"
	"strconv"
	"testing"

	"github.com/zflow/zflow/trace"
)

// junitDoc is what a CI system reads of WriteJUnit's output.
type junitDoc struct {
	Tests    int    `xml:"tests,attr"`
	Failures int    `xml:"failures,attr"`
	Errors   int    `xml:"errors,attr"`
	Skipped  int    `xml:"skipped,attr"`
	Time     string `xml:"time,attr"`
	Suites   []struct {
		Name     string `xml:"name,attr"`
		Tests    int    `xml:"tests,attr"`
		Failures int    `xml:"failures,attr"`
		Errors   int    `xml:"errors,attr"`
		Skipped  int    `xml:"skipped,attr"`
		Time     string `xml:"time,attr"`
		Cases    []struct {
			Name    string `xml:"name,attr"`
			Time    string `xml:"time,attr"`
			Failure *struct {
				Type string `xml:"type,attr"`
			} `xml:"failure"`
			Error *struct {
				Type    string `xml:"type,attr"`
				Message string `xml:"message,attr"`
			} `xml:"error"`
			Skipped *struct{} `xml:"skipped"`
		} `xml:"testcase"`
	} `xml:"testsuite"`
}

func TestJUnitErrorsAndTime(t *testing.T) {
	ref := []tcall{{"m", -1, 0, []tport{
		{"arg0", trace.Float32, []int{2, 3}, []float32{1, 2, 3, 4, 5, 6}},
		{"kw.f64", trace.Float64, []int{2}, []float32{1, 2}},
		{"kw.y", trace.Float32, []int{2, 3}, []float32{1, 2, 3, 4, 5, 6}},
		{"out", trace.Float32, []int{2, 3}, []float32{1, 2, 3, 4, 5, 6}},
	}}}
	ours := []tcall{{"m", -1, 0, []tport{
		{"arg0", trace.Float32, []int{3, 2}, []float32{1, 2, 3, 4, 5, 6}}, // another shape: an error
		{"kw.f64", trace.Float64, []int{2}, []float32{1, 2}},              // not compared by design: skipped
		{"kw.y", trace.Float32, []int{2, 3}, []float32{1, 2, 3, 4, 5, 6}}, // passes
		{"out", trace.Float32, []int{2, 3}, []float32{2, 2, 3, 4, 5, 6}},  // fails its gate
	}}}
	r, err := Diff(open(t, writeTrace(t, "o.npz", ours, nil, nil)), open(t, writeTrace(t, "r.npz", ref, nil, nil)), DiffOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r.Unpaired = append(r.Unpaired,
		Unpaired{Boundary: Boundary{Key: "s0/m/kw.z"}, Side: "ref", Reason: "not compared: shapes differ", ShapeMismatch: true},
		Unpaired{Boundary: Boundary{Key: "s0/m/kw.w"}, Side: "ref"})
	var buf bytes.Buffer
	if err := r.WriteJUnit(&buf, RenderOptions{}); err != nil {
		t.Fatal(err)
	}
	var doc junitDoc
	if err := xml.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatalf("%v\n%s", err, buf.String())
	}
	if doc.Tests != 6 || doc.Failures != 1 || doc.Errors != 2 || doc.Skipped != 2 {
		t.Errorf("document: tests %d failures %d errors %d skipped %d, want 6 1 2 2", doc.Tests, doc.Failures, doc.Errors, doc.Skipped)
	}
	if doc.Time != junitSeconds(r.Elapsed) || r.Elapsed <= 0 {
		t.Errorf("document time %q, report elapsed %v", doc.Time, r.Elapsed)
	}
	type want struct {
		outcome string // failure, error:<type>, skipped, pass
		timed   bool   // compared: a time > 0
	}
	wants := map[string]want{
		"s0/m/arg0":   {"error:" + JUnitShapeMismatch, false},
		"s0/m/kw.f64": {"skipped", false},
		"s0/m/kw.y":   {"pass", true},
		"s0/m/out":    {"failure", true},
		"s0/m/kw.z":   {"error:" + JUnitShapeMismatch, false},
		"s0/m/kw.w":   {"skipped", false},
	}
	for _, s := range doc.Suites {
		if _, err := strconv.ParseFloat(s.Time, 64); err != nil {
			t.Errorf("suite %s: time %q", s.Name, s.Time)
		}
		for _, c := range s.Cases {
			w, ok := wants[c.Name]
			if !ok {
				t.Errorf("unexpected case %s", c.Name)
				continue
			}
			got := "pass"
			switch {
			case c.Error != nil:
				got = "error:" + c.Error.Type
			case c.Failure != nil:
				got = "failure"
			case c.Skipped != nil:
				got = "skipped"
			}
			if got != w.outcome {
				t.Errorf("%s: %s, want %s", c.Name, got, w.outcome)
			}
			sec, err := strconv.ParseFloat(c.Time, 64)
			if err != nil || w.timed != (sec > 0) {
				t.Errorf("%s: time %q (compared: %v)", c.Name, c.Time, w.timed)
			}
		}
	}
}

func TestUnpairedSummary(t *testing.T) {
	unpaired := func(ref, ours int) []Unpaired {
		var out []Unpaired
		for i := range ref {
			out = append(out, Unpaired{Boundary: Boundary{Key: "r" + strconv.Itoa(i)}, Side: "ref"})
		}
		for i := range ours {
			out = append(out, Unpaired{Boundary: Boundary{Key: "o" + strconv.Itoa(i)}, Side: "ours"})
		}
		return out
	}
	for _, c := range []struct {
		name      string
		ref, ours int
		list      bool
		shown     int
		head      string
	}{
		{"a few, all listed", 3, 0, false, 3, "unpaired (3: 3 only in ref)"},
		{"exactly the limit", 4, 1, false, 5, "unpaired (5: 4 only in ref, 1 only in ours)"},
		{"one over", 6, 0, false, 5, "unpaired (6: 6 only in ref), the first 5 (--list-unpaired lists them all)"},
		{"many", 105, 2, false, 5, "unpaired (107: 105 only in ref, 2 only in ours), the first 5 (--list-unpaired lists them all)"},
		{"many, --list-unpaired", 105, 2, true, 107, "unpaired (107: 105 only in ref, 2 only in ours)"},
	} {
		r := &DiffReport{Unpaired: unpaired(c.ref, c.ours), FirstFailing: -1}
		shown, head := r.unpairedShown(RenderOptions{ListUnpaired: c.list})
		if len(shown) != c.shown || head != c.head {
			t.Errorf("%s: %d shown, %q; want %d, %q", c.name, len(shown), head, c.shown, c.head)
		}
		for _, write := range []func(*DiffReport, *bytes.Buffer) error{
			func(r *DiffReport, b *bytes.Buffer) error {
				return r.WriteTable(b, RenderOptions{ListUnpaired: c.list})
			},
			func(r *DiffReport, b *bytes.Buffer) error {
				return r.WriteMarkdown(b, RenderOptions{ListUnpaired: c.list})
			},
		} {
			var b bytes.Buffer
			if err := write(r, &b); err != nil {
				t.Fatal(err)
			}
			listed := bytes.Count(b.Bytes(), []byte("only in ref")) + bytes.Count(b.Bytes(), []byte("only in ours"))
			// the head line names each side once
			sides := 0
			if c.ref > 0 {
				sides++
			}
			if c.ours > 0 {
				sides++
			}
			if listed != c.shown+sides {
				t.Errorf("%s: %d lines name a side, want %d listed + %d in the count:\n%s", c.name, listed, c.shown, sides, b.String())
			}
			if more := c.ref + c.ours - c.shown; more > 0 && !bytes.Contains(b.Bytes(), []byte("and "+strconv.Itoa(more)+" more")) {
				t.Errorf("%s: no '... and %d more':\n%s", c.name, more, b.String())
			}
		}
	}
}
