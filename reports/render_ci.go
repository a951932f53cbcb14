package reports

import (
	"encoding/csv"
	"encoding/xml"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// JUnit error types: a pair that could not be compared is an error of
// the run's inputs, not a gate's failure.
const (
	JUnitShapeMismatch = "shape-mismatch" // the two sides hold tensors of different shapes
	JUnitDTypeMismatch = "dtype-mismatch" // bf16 bits against integers (no manifest dtypes entry)
)

// junitSeconds is a duration as JUnit's time attribute: seconds, to the
// nanosecond (a small pair compares in microseconds).
func junitSeconds(d time.Duration) string { return strconv.FormatFloat(d.Seconds(), 'f', 9, 64) }

// WriteJUnit writes JUnit XML: suite "boundaries" has one test case per
// paired boundary (a failure for each one failing a gate, its message the
// failed gates, its text the metrics and, for the first failing
// boundary, the diagnosis; an error, type JUnitShapeMismatch or
// JUnitDTypeMismatch, for a pair that could not be compared; a skipped
// element for pairs not compared by design), and suite "unpaired" one
// skipped test case per unpaired boundary (an error where Unpaired says
// the shapes differ). Each test case's time is the time spent comparing
// it; the suites' and the document's, the report's Elapsed.
func (r *DiffReport) WriteJUnit(w io.Writer, o RenderOptions) error {
	type failure struct {
		Message string `xml:"message,attr"`
		Type    string `xml:"type,attr"`
		Text    string `xml:",chardata"`
	}
	type skipped struct {
		Message string `xml:"message,attr"`
	}
	type testcase struct {
		Name      string   `xml:"name,attr"`
		Classname string   `xml:"classname,attr"`
		Time      string   `xml:"time,attr"`
		Failure   *failure `xml:"failure,omitempty"`
		Error     *failure `xml:"error,omitempty"`
		Skipped   *skipped `xml:"skipped,omitempty"`
		SystemOut string   `xml:"system-out,omitempty"`
	}
	type property struct {
		Name  string `xml:"name,attr"`
		Value string `xml:"value,attr"`
	}
	type testsuite struct {
		Name       string     `xml:"name,attr"`
		Tests      int        `xml:"tests,attr"`
		Failures   int        `xml:"failures,attr"`
		Errors     int        `xml:"errors,attr"`
		Skipped    int        `xml:"skipped,attr"`
		Time       string     `xml:"time,attr"`
		Properties []property `xml:"properties>property,omitempty"`
		Cases      []testcase `xml:"testcase"`
	}
	type testsuites struct {
		XMLName  xml.Name    `xml:"testsuites"`
		Name     string      `xml:"name,attr"`
		Tests    int         `xml:"tests,attr"`
		Failures int         `xml:"failures,attr"`
		Errors   int         `xml:"errors,attr"`
		Skipped  int         `xml:"skipped,attr"`
		Time     string      `xml:"time,attr"`
		Suites   []testsuite `xml:"testsuite"`
	}
	total := junitSeconds(r.Elapsed)
	b := testsuite{Name: "boundaries", Time: total, Properties: []property{
		{"ours", r.Ours}, {"ref", r.Ref}, {"gates", r.gateList()}}}
	for i := range r.Boundaries {
		d := &r.Boundaries[i]
		tc := testcase{Name: d.Key, Classname: "zflow.diff." + d.Scope, Time: junitSeconds(d.Elapsed), SystemOut: d.metricsText()}
		switch {
		case d.Error != "":
			typ := JUnitDTypeMismatch
			if !sameLayout(d.OursShape, d.Shape) {
				typ = JUnitShapeMismatch
			}
			tc.Error = &failure{Message: d.Error, Type: typ, Text: d.metricsText()}
			b.Errors++
		case !d.Pass:
			text := d.metricsText()
			if i == r.FirstFailing {
				text = "first failing boundary\n" + text
				if f := r.Finding; f != nil {
					text += fmt.Sprintf("\nsignature: %s: %s\n", f.Diagnosis.Signature, f.Diagnosis.Reason)
					for _, s := range f.channelSummary() {
						text += s + "\n"
					}
				}
			}
			tc.Failure = &failure{Message: d.failedChecks(), Type: "gate", Text: text}
			b.Failures++
		case d.Skipped != "":
			tc.Skipped = &skipped{Message: d.Skipped}
			b.Skipped++
		}
		b.Cases = append(b.Cases, tc)
	}
	if r.NothingPaired() {
		b.Cases = append(b.Cases, testcase{Name: "no boundary compared", Classname: "zflow.diff", Time: total,
			Failure: &failure{Message: r.nothingPairedText(), Type: "nothing-compared"}})
		b.Failures++
	}
	b.Tests = len(b.Cases)
	u := testsuite{Name: "unpaired", Time: "0"}
	for _, x := range r.Unpaired {
		tc := testcase{Name: x.Key, Classname: "zflow.diff.unpaired", Time: "0"}
		if x.ShapeMismatch {
			tc.Error = &failure{Message: "only in " + x.Side + x.reasonSuffix(), Type: JUnitShapeMismatch}
			u.Errors++
		} else {
			tc.Skipped = &skipped{Message: "only in " + x.Side + x.reasonSuffix()}
			u.Skipped++
		}
		u.Cases = append(u.Cases, tc)
	}
	u.Tests = len(u.Cases)
	doc := testsuites{Name: "zflow diff", Tests: b.Tests + u.Tests, Failures: b.Failures, Errors: b.Errors + u.Errors,
		Skipped: b.Skipped + u.Skipped, Time: total, Suites: []testsuite{b, u}}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}

// metricsText is a boundary's metrics and checks on a few lines.
func (d *BoundaryDiff) metricsText() string {
	var s strings.Builder
	fmt.Fprintf(&s, "shape %s %s\n", shapeString(d.Shape), dtypePair(d))
	if m := d.Metrics; m != nil {
		fmt.Fprintf(&s, "max_abs %s mean_abs %s rel_rms %s cosine %s psnr %s exact %s ulp %d/%d/%d nan %d/%d inf %d/%d\n",
			num(m.MaxAbs), num(m.MeanAbs), num(m.RelRMS), num(m.Cosine), num(m.PSNR), num(m.ExactFraction),
			m.ULP.Median, m.ULP.P99, m.ULP.Max, m.Ours.NaN, m.Ref.NaN, m.Ours.PosInf+m.Ours.NegInf, m.Ref.PosInf+m.Ref.NegInf)
	}
	for _, c := range d.Checks {
		s.WriteString(c.String() + "\n")
	}
	if d.Error != "" {
		s.WriteString(d.Error + "\n")
	}
	if d.Skipped != "" {
		s.WriteString(d.Skipped + "\n")
	}
	return s.String()
}

// CSVHeader is the header row of WriteCSV.
var CSVHeader = []string{"index", "key", "scope", "module", "ordinal", "port", "shape", "dtype", "ours_dtype",
	"count", "finite", "max_abs", "mean_abs", "rel_rms", "cosine", "psnr", "exact_fraction",
	"ulp_median", "ulp_p99", "ulp_max", "nan_ours", "nan_ref", "inf_ours", "inf_ref", "nonfinite_mismatch",
	"worst_row", "status", "failed_checks"}

// WriteCSV writes one row per paired boundary (status pass, fail or skip)
// and one per unpaired boundary (status unpaired-ours or unpaired-ref,
// metrics empty). Numbers use the JSON spellings ("inf", "nan"); shapes are
// "1x16x32".
func (r *DiffReport) WriteCSV(w io.Writer, o RenderOptions) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(CSVHeader); err != nil {
		return err
	}
	shape := func(s []int) string {
		p := make([]string, len(s))
		for i, d := range s {
			p[i] = strconv.Itoa(d)
		}
		return strings.Join(p, "x")
	}
	f := func(x float64) string {
		b, _ := Float(x).MarshalJSON()
		return strings.Trim(string(b), `"`)
	}
	for i := range r.Boundaries {
		d := &r.Boundaries[i]
		status := map[string]string{"ok": "pass", "FAIL": "fail", "skip": "skip"}[d.verdict()]
		row := []string{strconv.Itoa(i), d.Key, d.Scope, d.Module, strconv.Itoa(d.Ordinal), d.Port, shape(d.Shape), d.DType, d.OursDType}
		if m := d.Metrics; m != nil {
			row = append(row, strconv.Itoa(m.Count), strconv.Itoa(m.Finite), f(m.MaxAbs), f(m.MeanAbs), f(m.RelRMS),
				f(m.Cosine), f(m.PSNR), f(m.ExactFraction),
				strconv.FormatUint(m.ULP.Median, 10), strconv.FormatUint(m.ULP.P99, 10), strconv.FormatUint(m.ULP.Max, 10),
				strconv.Itoa(m.Ours.NaN), strconv.Itoa(m.Ref.NaN), strconv.Itoa(m.Ours.PosInf+m.Ours.NegInf),
				strconv.Itoa(m.Ref.PosInf+m.Ref.NegInf), strconv.Itoa(d.NonFiniteMismatch), strconv.Itoa(m.WorstRow))
		} else {
			row = append(row, make([]string, 16)...)
		}
		row = append(row, status, d.failedChecks())
		if err := cw.Write(row); err != nil {
			return err
		}
	}
	for _, u := range r.Unpaired {
		row := []string{"", u.Key, u.Scope, u.Module, strconv.Itoa(u.Ordinal), u.Port}
		row = append(row, make([]string, len(CSVHeader)-len(row)-2)...)
		row = append(row, "unpaired-"+u.Side, u.Reason)
		if err := cw.Write(row); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}
