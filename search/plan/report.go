package plan

import (
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"

	"github.com/zflow/zflow/precision"
	"github.com/zflow/zflow/semantics"
)

// Elementwise reports whether a boundary's value depends on no GEMM-like
// op (linear, attention) and no transcendental table (timestep_embed,
// rope_table) given the reference's earlier boundaries: only rounding-
// point arithmetic (norms, modulation, activations, gated residuals, RoPE,
// adds and muls, the sampler), which a plan can reproduce bit for bit.
func (r *Record) Elementwise() bool {
	for _, c := range strings.Split(r.DependsOn, "+") {
		switch c {
		case "linear", "attention", "timestep_embed", "rope_table":
			return false
		}
	}
	return true
}

// sampledBoundaries counts the boundaries scored on sampled rows, and the
// rows of the first (largest) of them.
func sampledBoundaries(sc map[string]semantics.Scored) (n, rows, of int) {
	for _, s := range sc {
		if s.Rows < s.Of {
			n++
			if s.Of > of {
				rows, of = s.Rows, s.Of
			}
		}
	}
	return n, rows, of
}

// Pool is the pooled exactness of some records.
type Pool struct {
	Boundaries, N, Exact int
	SumD2, SumR2         float64
}

// Add pools a record.
func (p *Pool) Add(r *Record) {
	p.Boundaries++
	p.N += r.N
	p.Exact += r.Exact
	p.SumD2 += r.SumD2
	p.SumR2 += r.SumR2
}

// Fraction is Exact / N (1 when empty).
func (p Pool) Fraction() float64 {
	if p.N == 0 {
		return 1
	}
	return float64(p.Exact) / float64(p.N)
}

// RelRMS is the pooled rel-RMS.
func (p Pool) RelRMS() float64 { return precision.RelRMSFromSums(p.SumD2, p.SumR2) }

// ByClass pools records by OpClass, in Classes() order, then any other
// class names (concatenations, "") in first-seen order.
func ByClass(recs []Record) ([]string, map[string]*Pool) {
	pools := map[string]*Pool{}
	var seen []string
	for i := range recs {
		c := recs[i].OpClass
		if pools[c] == nil {
			pools[c] = &Pool{}
			seen = append(seen, c)
		}
		pools[c].Add(&recs[i])
	}
	var order []string
	for _, c := range Classes() {
		if pools[c] != nil {
			order = append(order, c)
		}
	}
	for _, c := range seen {
		if !containsString(order, c) {
			order = append(order, c)
		}
	}
	return order, pools
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// Pct formats a fraction as a percentage with enough digits to show that
// an inexact fraction is not 100%.
func Pct(f float64) string {
	switch {
	case f == 1:
		return "100%"
	case f > 0.9999:
		return fmt.Sprintf("%.4f%%", 100*f)
	}
	return fmt.Sprintf("%.2f%%", 100*f)
}

// MarginString writes a margin ("inf" for +Inf).
func MarginString(m float64) string {
	if math.IsInf(m, 1) {
		return "inf"
	}
	return fmt.Sprintf("%.3g", m)
}

// WriteTable writes the report as text: one row per op class (the plan
// before and after, the exact fraction over the class's boundaries
// before and after, the margin), the per-role rules, and the boundaries
// still inexact.
func (r *Report) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "op class\tplan before\tplan after\tboundaries\texact before\texact after\tmargin\t")
	for _, c := range r.Classes {
		n := fmt.Sprint(c.Boundaries)
		if c.Boundaries == 0 {
			n = fmt.Sprintf("(%d)", c.Scored)
		}
		m := "-"
		if c.Observed {
			m = MarginString(c.Margin)
			if c.MarginAtLeast {
				m = "≥" + m
			}
			if !c.Decisive {
				m += " (not decisive)"
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", c.Class, c.Before, c.After, n, Pct(c.ExactBefore), Pct(c.ExactAfter), m)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w, "(n): no boundary is made by the class; exact over the n boundaries that depend on it")
	if n, rows, of := sampledBoundaries(r.Scoring); n > 0 {
		fmt.Fprintf(w, "exact before/after: on the rows the candidates were scored on; %d of %d boundaries on sampled rows (%d of %d, precision.scoring), the rest whole\n",
			n, len(r.Scoring), rows, of)
	}
	if len(r.Roles) > 0 {
		fmt.Fprintln(w, "\nper-role rules (the trace shows a difference from the class's plan):")
		for _, rr := range r.Roles {
			class, m := Pct(1-rr.ClassErr), MarginString(rr.Margin)
			if rr.ClassAtLeast { // scored until it could not win
				class = "≤" + class
				if !math.IsInf(rr.Margin, 1) {
					m = "≥" + m
				}
			}
			fmt.Fprintf(w, "  %-10s %-24s %-22s %s → %s exact (class plan %s), margin %s\n", rr.Class, rr.Role, rr.Value,
				class, Pct(1-rr.Err), rr.ClassValue, m)
		}
	}
	var notes []string
	for _, c := range r.Classes {
		if len(c.Equivalent) > 0 {
			notes = append(notes, fmt.Sprintf("  %s: %s ≡ %s here", c.Class, c.After, strings.Join(c.Equivalent, ", ")))
		}
	}
	if len(notes) > 0 {
		fmt.Fprintln(w, "\nequivalent on this trace (the simplest is kept):")
		for _, n := range notes {
			fmt.Fprintln(w, n)
		}
	}
	var pruned []string
	for _, c := range r.Classes {
		pruned = appendPruned(pruned, c.Class, c.Candidates)
	}
	for _, rr := range r.Tried {
		pruned = appendPruned(pruned, rr.Class+" "+rr.Role, rr.Candidates)
	}
	if len(pruned) > 0 {
		fmt.Fprintln(w, "\nnot scored (they could not win; a margin is over the candidates scored):")
		for _, n := range pruned {
			fmt.Fprintln(w, n)
		}
	}
	var inexact []string
	for i := range r.AfterRecords {
		rec := &r.AfterRecords[i]
		if rec.Exact != rec.N {
			inexact = append(inexact, fmt.Sprintf("  %-64s %-16s %s", rec.Key, rec.OpClass, Pct(rec.ExactFraction())))
		}
	}
	fmt.Fprintf(w, "\n%d of %d boundaries bit-exact after, every row (%d program runs, %d stopped once their plan could not win)\n",
		len(r.AfterRecords)-len(inexact), len(r.AfterRecords), r.Evaluations, r.Stopped)
	const show = 20
	for i, s := range inexact {
		if i == show {
			fmt.Fprintf(w, "  … and %d more\n", len(inexact)-show)
			break
		}
		fmt.Fprintln(w, s)
	}
	return nil
}

// appendPruned adds a line for a factor's pruned candidates, if any: their
// labels and the reason (the first one's; one factor's read alike).
func appendPruned(lines []string, name string, cands []semantics.Candidate) []string {
	var labels []string
	reason := ""
	for _, c := range cands {
		if c.Pruned != "" {
			labels = append(labels, fmt.Sprint(c.Value))
			if reason == "" {
				reason = c.Pruned
			}
		}
	}
	if len(labels) == 0 {
		return lines
	}
	return append(lines, fmt.Sprintf("  %s: %s (%s)", name, strings.Join(labels, ", "), reason))
}
