package reports

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// RenderOptions shape the human-readable reports.
type RenderOptions struct {
	Channels    int  // channels listed in the per-channel table, worst first (<= 0: all)
	OnlyFailing bool // list only failing boundaries (table and Markdown)
	// ListUnpaired lists every unpaired boundary in table and Markdown
	// output; otherwise they are counted and the first UnpairedShown
	// listed. JSON, CSV and JUnit always list them all.
	ListUnpaired bool
}

// UnpairedShown is how many unpaired boundaries table and Markdown output
// list without RenderOptions.ListUnpaired.
const UnpairedShown = 5

// unpairedShown is the unpaired boundaries a human-readable report lists
// and a line saying how many there are (per side) and, when not all are
// listed, how to list them.
func (r *DiffReport) unpairedShown(o RenderOptions) ([]Unpaired, string) {
	sides := map[string]int{}
	for _, u := range r.Unpaired {
		sides[u.Side]++
	}
	var parts []string
	for _, side := range []string{"ref", "ours"} {
		if n := sides[side]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d only in %s", n, side))
		}
	}
	head := fmt.Sprintf("unpaired (%d: %s)", len(r.Unpaired), strings.Join(parts, ", "))
	shown := r.Unpaired
	if !o.ListUnpaired && len(shown) > UnpairedShown {
		shown = shown[:UnpairedShown]
		head += fmt.Sprintf(", the first %d (--list-unpaired lists them all)", UnpairedShown)
	}
	return shown, head
}

// num formats a metric for people: 4 significant digits, "inf", "-inf",
// "nan".
func num(x float64) string {
	switch {
	case math.IsNaN(x):
		return "nan"
	case math.IsInf(x, 1):
		return "inf"
	case math.IsInf(x, -1):
		return "-inf"
	}
	return strconv.FormatFloat(x, 'g', 4, 64)
}

// RangeString is a range with 3 significant digits, signed as the
// ERNIE-port notes write mean ranges: "[-2.59, +4.65]".
func RangeString(r Range) string {
	return fmt.Sprintf("[%+#.3g, %+#.3g]", r.Min, r.Max)
}

// PositiveRangeString is a range of non-negative numbers (stds) the same
// way, unsigned: "[1.40, 1.91]".
func PositiveRangeString(r Range) string {
	return fmt.Sprintf("[%#.3g, %#.3g]", r.Min, r.Max)
}

func shapeString(s []int) string {
	parts := make([]string, len(s))
	for i, d := range s {
		parts[i] = strconv.Itoa(d)
	}
	return "[" + strings.Join(parts, " ") + "]"
}

var shortDType = map[string]string{"bfloat16": "bf16", "float16": "f16", "float32": "f32", "float64": "f64"}

func dtypePair(d *BoundaryDiff) string {
	short := func(s string) string {
		if v, ok := shortDType[s]; ok {
			return v
		}
		return s
	}
	if d.OursDType == d.DType {
		return short(d.DType)
	}
	return short(d.OursDType) + "/" + short(d.DType)
}

// verdict is a boundary's one-word state.
func (d *BoundaryDiff) verdict() string {
	switch {
	case !d.Pass:
		return "FAIL"
	case d.Skipped != "":
		return "skip"
	}
	return "ok"
}

// failedChecks lists the checks that failed, or the error.
func (d *BoundaryDiff) failedChecks() string {
	if d.Error != "" {
		return d.Error
	}
	var s []string
	for _, c := range d.Checks {
		if !c.Pass {
			s = append(s, c.String())
		}
	}
	return strings.Join(s, "; ")
}

// boundaryRows is the boundaries table: header, alignment and rows.
func (r *DiffReport) boundaryRows(o RenderOptions, md bool) ([]string, string, [][]string) {
	header := []string{"#", "boundary", "shape", "dtype", "max_abs", "mean_abs", "rel_rms", "cosine", "psnr", "exact", "ulp med/p99/max", "nan/inf", "gate"}
	var rows [][]string
	for i := range r.Boundaries {
		d := &r.Boundaries[i]
		if o.OnlyFailing && d.Pass {
			continue
		}
		key := d.Key
		if md {
			key = "`" + strings.ReplaceAll(key, "|", `\|`) + "`"
		}
		row := []string{strconv.Itoa(i), key, shapeString(d.Shape), dtypePair(d)}
		if m := d.Metrics; m != nil {
			row = append(row, num(m.MaxAbs), num(m.MeanAbs), num(m.RelRMS)+maskNote(m), num(m.Cosine), num(m.PSNR),
				num(m.ExactFraction), fmt.Sprintf("%d/%d/%d", m.ULP.Median, m.ULP.P99, m.ULP.Max),
				fmt.Sprintf("%d/%d", m.Ours.NaN, m.Ours.PosInf+m.Ours.NegInf))
		} else {
			row = append(row, "-", "-", "-", "-", "-", "-", "-", "-")
		}
		row = append(row, d.verdict())
		rows = append(rows, row)
	}
	return header, "rllcrrrrrrrrl", rows
}

func (r *DiffReport) summaryLine() string {
	doc := r.counts()
	return fmt.Sprintf("%d boundaries: %d passed, %d failed, %d skipped; %d unpaired",
		doc.Boundaries, doc.Passed, doc.Failed, doc.Skipped, doc.Unpaired)
}

// reasonSuffix is ": REASON" when the unpaired boundary has one.
func (u Unpaired) reasonSuffix() string {
	if u.Reason == "" {
		return ""
	}
	return ": " + u.Reason
}

// nothingPairedText says why a report that paired no boundary fails.
func (r *DiffReport) nothingPairedText() string {
	return fmt.Sprintf("no boundary compared: none of ours pairs with one of the reference's (%d unpaired)", len(r.Unpaired))
}

func (r *DiffReport) gateList() string {
	var g []string
	for _, x := range r.Gates {
		g = append(g, x.String())
	}
	s := strings.Join(g, ", ")
	for _, x := range r.Gates {
		if x.Auto {
			s += fmt.Sprintf(" (auto rel_rms: bf16 %g, f16 %g, f32 %g, integers %g)", AutoRelRMSBF16, AutoRelRMSF16, AutoRelRMSF32, AutoRelRMSInt)
			break
		}
	}
	return s
}

// keyNumbers are the evidence figures printed with a signature, in the
// order of the rules that read them.
func keyNumbers(e Evidence) [][2]string {
	return [][2]string{
		{"rel_rms", num(e.RelRMS)},
		{"nonfinite_mismatch", strconv.Itoa(e.NonFiniteMismatch)},
		{"f16_range_share", num(e.F16RangeShare)},
		{"top_error_share", num(e.TopErrorShare)},
		{"multiset_match", num(e.MultisetMatch)},
		{"position_match", num(e.PositionMatch)},
		{"row_fraction_90", num(e.RowFraction90)},
		{"systematic", num(e.Systematic())},
		{"affine_explained", num(e.AffineExplained)},
		{"scale_share", num(e.ScaleShare)},
		{"mean_share", num(e.MeanShare)},
		{"std_ratio", PositiveRangeString(e.StdRatio)},
		{"slope", RangeString(e.Slope)},
		{"mean_shift", num(e.MeanShift)},
	}
}

// channelRows is the per-channel table of the finding.
func (f *Finding) channelRows(k int) ([]string, string, [][]string) {
	c := f.Channels
	header := []string{"channel", "ref mean", "ours mean", "Δmean", "ref std", "ours std", "std ratio", "err rms"}
	var rows [][]string
	for _, ch := range f.WorstChannels(k) {
		rows = append(rows, []string{strconv.Itoa(ch),
			num(c.Ref.Channels[ch].Mean), num(c.Ours.Channels[ch].Mean), num(c.MeanDiff[ch]),
			num(c.Ref.Channels[ch].Std), num(c.Ours.Channels[ch].Std), num(c.StdRatio[ch]), num(f.ErrRMS[ch])})
	}
	return header, "rrrrrrrr", rows
}

func (f *Finding) channelSummary() []string {
	c := f.Channels
	return []string{
		fmt.Sprintf("ref:  per-channel mean range %s, std range %s", RangeString(c.Ref.Mean), PositiveRangeString(c.Ref.Std)),
		fmt.Sprintf("ours: per-channel mean range %s, std range %s", RangeString(c.Ours.Mean), PositiveRangeString(c.Ours.Std)),
		fmt.Sprintf("Δ (ours - ref): mean %s, std %s, std ratio %s", RangeString(c.MeanDiffRange), RangeString(c.StdDiffRange), PositiveRangeString(c.Ratio)),
	}
}

func (f *Finding) channelCaption(k int) string {
	shown := len(f.WorstChannels(k))
	s := fmt.Sprintf("%d rows × %d channels (channels: the last dimension)", f.Rows, f.NChannels)
	if shown < f.NChannels {
		s += fmt.Sprintf("; the %d with the largest error RMS", shown)
	}
	if f.OneRow {
		s += "; one row, so the signature reads its values as one channel"
	}
	return s
}

// WriteTable writes the report for a terminal.
func (r *DiffReport) WriteTable(w io.Writer, o RenderOptions) error {
	fmt.Fprintf(w, "zflow diff: ours %s against ref %s\n", r.Ours, r.Ref)
	fmt.Fprintf(w, "gates: %s\n", r.gateList())
	header, align, rows := r.boundaryRows(o, false)
	if len(rows) > 0 {
		if err := writeTable(w, false, align, header, rows); err != nil {
			return err
		}
	}
	fmt.Fprintln(w, r.summaryLine())
	if len(r.Unpaired) > 0 {
		shown, head := r.unpairedShown(o)
		fmt.Fprintln(w, head+":")
		for _, u := range shown {
			fmt.Fprintf(w, "  only in %-4s %s%s\n", u.Side, u.Key, u.reasonSuffix())
		}
		if n := len(r.Unpaired) - len(shown); n > 0 {
			fmt.Fprintf(w, "  ... and %d more\n", n)
		}
	}
	if r.NothingPaired() {
		fmt.Fprintln(w, "FAIL: "+r.nothingPairedText())
		return nil
	}
	if r.FirstFailing < 0 {
		fmt.Fprintln(w, "PASS")
		return nil
	}
	d := &r.Boundaries[r.FirstFailing]
	fmt.Fprintf(w, "FAIL: first failing boundary #%d %s: %s\n", r.FirstFailing, d.Key, d.failedChecks())
	f := r.Finding
	if f == nil {
		return nil
	}
	fmt.Fprintf(w, "signature: %s: %s\n", f.Diagnosis.Signature, f.Diagnosis.Reason)
	var nums []string
	for _, kv := range keyNumbers(f.Diagnosis.Evidence) {
		nums = append(nums, kv[0]+" "+kv[1])
	}
	fmt.Fprintf(w, "numbers: %s\n", strings.Join(nums, ", "))
	fmt.Fprintf(w, "per channel: %s\n", f.channelCaption(o.Channels))
	for _, s := range f.channelSummary() {
		fmt.Fprintln(w, "  "+s)
	}
	header, align, rows = f.channelRows(o.Channels)
	return writeTable(w, false, align, header, rows)
}

// WriteMarkdown writes the report as GitHub-flavoured Markdown (a CI job
// summary or a pull-request comment).
func (r *DiffReport) WriteMarkdown(w io.Writer, o RenderOptions) error {
	verdict := "PASS"
	if !r.Pass() {
		verdict = "FAIL"
	}
	fmt.Fprintf(w, "## zflow diff: %s\n\n", verdict)
	fmt.Fprintf(w, "Ours `%s` against ref `%s`. Gates: `%s`.\n\n%s.\n\n", r.Ours, r.Ref, r.gateList(), r.summaryLine())
	if r.NothingPaired() {
		fmt.Fprintf(w, "**FAIL:** %s.\n\n", r.nothingPairedText())
	}
	if r.FirstFailing >= 0 {
		d := &r.Boundaries[r.FirstFailing]
		fmt.Fprintf(w, "**First failing boundary:** #%d `%s`: %s\n\n", r.FirstFailing, d.Key, d.failedChecks())
		if f := r.Finding; f != nil {
			fmt.Fprintf(w, "**Signature: %s.** %s\n\n", f.Diagnosis.Signature, f.Diagnosis.Reason)
			var rows [][]string
			for _, kv := range keyNumbers(f.Diagnosis.Evidence) {
				rows = append(rows, []string{kv[0], kv[1]})
			}
			if err := writeTable(w, true, "lr", []string{"number", "value"}, rows); err != nil {
				return err
			}
			fmt.Fprintf(w, "\n### Per channel at `%s`\n\n%s.\n\n", f.Key, f.channelCaption(o.Channels))
			for _, s := range f.channelSummary() {
				fmt.Fprintf(w, "- %s\n", s)
			}
			fmt.Fprintln(w)
			header, align, rows := f.channelRows(o.Channels)
			if err := writeTable(w, true, align, header, rows); err != nil {
				return err
			}
			fmt.Fprintln(w)
		}
	}
	header, align, rows := r.boundaryRows(RenderOptions{OnlyFailing: true}, true)
	if len(rows) > 0 {
		fmt.Fprintf(w, "### Failing boundaries (%d)\n\n", len(rows))
		if err := writeTable(w, true, align, header, rows); err != nil {
			return err
		}
		fmt.Fprintln(w)
	}
	if !o.OnlyFailing && len(r.Boundaries) > 0 {
		header, align, rows = r.boundaryRows(o, true)
		fmt.Fprintf(w, "<details><summary>All %d boundaries, in execution order</summary>\n\n", len(rows))
		if err := writeTable(w, true, align, header, rows); err != nil {
			return err
		}
		fmt.Fprint(w, "\n</details>\n\n")
	}
	if len(r.Unpaired) > 0 {
		shown, head := r.unpairedShown(o)
		fmt.Fprintf(w, "### Unpaired boundaries (%d)\n\n%s.\n\n", len(r.Unpaired), strings.ToUpper(head[:1])+head[1:])
		for _, u := range shown {
			fmt.Fprintf(w, "- only in %s: `%s`%s\n", u.Side, u.Key, u.reasonSuffix())
		}
		if n := len(r.Unpaired) - len(shown); n > 0 {
			fmt.Fprintf(w, "- ... and %d more\n", n)
		}
		fmt.Fprintln(w)
	}
	return nil
}

// maskNote marks a rel-RMS that leaves mask-sized values out: how many
// matched, and how many did not (precision.MaskSized).
func maskNote(m *Metrics) string {
	switch {
	case m.MaskMismatch > 0:
		return fmt.Sprintf(" (%d masked, %d mask mismatch)", m.Masked, m.MaskMismatch)
	case m.Masked > 0:
		return fmt.Sprintf(" (%d masked)", m.Masked)
	}
	return ""
}
