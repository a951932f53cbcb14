package semantics

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
)

// Document statuses (Document.Status).
const (
	// StatusComplete: the self-check reproduced every captured boundary
	// within its tolerance, and every part of the structure is expressed.
	StatusComplete = "complete"
	// StatusIncomplete: some boundary is not reproduced, some part of the
	// structure could not be expressed, or the check could not run; the
	// undetermined list says which. Generators refuse such a document
	// unless asked otherwise.
	StatusIncomplete = "incomplete"
)

// UndeterminedBoundary is the name of an undetermined entry for a boundary
// the self-check does not reproduce.
const UndeterminedBoundary = "boundary"

// UndeterminedNotComputed is the name of an undetermined entry for a
// boundary a program does not compute: nothing of the vocabulary makes it
// and the program makes its output without reading it (an attention's
// probabilities, a mask no op reads, what a call explained as a whole
// computes inside). It does not make a document incomplete; the status
// line counts it.
const UndeterminedNotComputed = "boundary_not_computed"

// Signatures are the diagnoses a not-reproduced boundary can carry: the
// signatures of reports.Diagnose, by name.
var Signatures = []string{"numerics", "topology", "magnitude", "bias", "activation"}

// Check is how a document's self-check ran: its program teacher forced on
// the trace it was made from, every captured boundary compared.
type Check struct {
	Mode string `json:"mode"` // "teacher_forced"
	// Boundaries counts the boundary values compared (a boundary once per
	// step); NotReproduced the distinct boundaries beyond their tolerance;
	// Skipped the boundary values inside parts the document leaves
	// undetermined (not computed, so not compared).
	Boundaries    int `json:"boundaries"`
	NotReproduced int `json:"not_reproduced"`
	Skipped       int `json:"skipped"`
	// Tolerances: the reference's storage format → the rel-RMS a boundary
	// stored in it must be within.
	Tolerances map[string]float64 `json:"tolerances"`
	// NotRun says why the check could not run (empty when it ran).
	NotRun string `json:"not_run,omitempty"`
}

// Number is a measurement that may be infinite or NaN: written as a JSON
// number, or as the string "inf", "-inf" or "nan".
type Number float64

// NumberOf is a pointer to x as a Number.
func NumberOf(x float64) *Number { n := Number(x); return &n }

// MarshalJSON writes non-finite values as strings.
func (n Number) MarshalJSON() ([]byte, error) {
	switch f := float64(n); {
	case math.IsNaN(f):
		return []byte(`"nan"`), nil
	case math.IsInf(f, 1):
		return []byte(`"inf"`), nil
	case math.IsInf(f, -1):
		return []byte(`"-inf"`), nil
	}
	return json.Marshal(float64(n))
}

// UnmarshalJSON reads a number, "inf", "-inf" or "nan".
func (n *Number) UnmarshalJSON(b []byte) error {
	var s string
	if json.Unmarshal(b, &s) == nil {
		switch s {
		case "nan":
			*n = Number(math.NaN())
		case "inf":
			*n = Number(math.Inf(1))
		case "-inf":
			*n = Number(math.Inf(-1))
		default:
			return fmt.Errorf("%q is neither a number nor inf, -inf, nan", s)
		}
		return nil
	}
	var f float64
	if err := json.Unmarshal(b, &f); err != nil {
		return err
	}
	*n = Number(f)
	return nil
}

// Incomplete reports whether the document says it is incomplete.
func (d *Document) Incomplete() bool { return d.Status == StatusIncomplete }

// NotReproduced lists the undetermined entries of boundaries the
// self-check does not reproduce, in the order written (execution order).
func (d *Document) NotReproduced() []Undetermined {
	var out []Undetermined
	for _, u := range d.Undetermined {
		if u.Boundary != "" {
			out = append(out, u)
		}
	}
	return out
}

// NotComputed counts the boundaries the document's program does not
// compute (UndeterminedNotComputed entries).
func (d *Document) NotComputed() int {
	n := 0
	for _, u := range d.Undetermined {
		if u.Name == UndeterminedNotComputed {
			n++
		}
	}
	return n
}

// Hole is a part of the structure a document leaves out or cannot
// express: a block whose dataflow was not read, a stream without an
// embedder, a final stage without a stream. Only an incomplete document
// may have holes, each named by an undetermined entry at its address; no
// program can be built from it.
type Hole struct {
	Address string // the part's address ("blocks.0", "embed.image", "final", "model")
	Problem string // what is missing, naming the field
}

// Holes lists the structure's holes, in the order of the structure.
func (d *Document) Holes() []Hole {
	if d.Program != nil {
		return nil // the program carries the model; the structure only drives it
	}
	var p problems
	d.Structure.validate(&p)
	return slices.Clone(p.holes)
}

// validateCheck checks the status, the check and the boundary entries,
// and settles the structure's holes: allowed in an incomplete document
// where an undetermined entry names their address, problems otherwise.
func (d *Document) validateCheck(p *problems) {
	switch d.Status {
	case "", StatusComplete, StatusIncomplete:
	default:
		p.add("status", "%q is not one of %s, %s (or absent)", d.Status, StatusComplete, StatusIncomplete)
	}
	if c := d.Check; c != nil {
		if d.Status == "" {
			p.add("check", "a checked document has a status")
		}
		if c.Mode != "teacher_forced" {
			p.add("check.mode", "%q, want teacher_forced", c.Mode)
		}
		if c.Boundaries < 0 || c.NotReproduced < 0 || c.Skipped < 0 {
			p.add("check", "counts %d, %d, %d must be ≥ 0", c.Boundaries, c.NotReproduced, c.Skipped)
		}
		for _, k := range sortedKeys(c.Tolerances) {
			if !contains(formats, k) || !(c.Tolerances[k] > 0) {
				p.add(fmt.Sprintf("check.tolerances[%q]", k), "a format of %v and a tolerance > 0, got %v", formats, c.Tolerances[k])
			}
		}
		if d.Status == StatusComplete && (c.NotReproduced > 0 || c.NotRun != "") {
			p.add("status", "complete, but the check did not reproduce %d boundaries%s", c.NotReproduced, notRun(c.NotRun))
		}
	}
	for i, u := range d.Undetermined {
		f := fmt.Sprintf("undetermined[%d]", i)
		if u.Boundary == "" {
			if u.Signature != "" || u.RelRMS != nil || u.Cosine != nil || u.Step != nil {
				p.add(f, "a diagnosis without a boundary")
			}
			continue
		}
		if d.Status != StatusIncomplete {
			p.add(f+".boundary", "%s is not reproduced, so the document's status is incomplete, not %q", u.Boundary, d.Status)
		}
		if !contains(Signatures, u.Signature) {
			p.add(f+".signature", "%q is not one of %v", u.Signature, Signatures)
		}
		if u.RelRMS == nil {
			p.add(f+".rel_rms", "a boundary not reproduced gives its rel-RMS")
		}
		if u.Step != nil && *u.Step < 0 || u.Steps < 0 {
			p.add(f+".step", "negative")
		}
	}
	for _, h := range p.holes {
		if d.Status == StatusIncomplete && d.names(h.Address) {
			continue
		}
		if d.Status == StatusIncomplete {
			p.add(h.Address, "%s (an incomplete document leaves a part out only with an undetermined entry at its address)", h.Problem)
			continue
		}
		p.list = append(p.list, h.Problem)
	}
}

func notRun(why string) string {
	if why == "" {
		return ""
	}
	return " and did not run: " + why
}

// names reports whether a structure entry of the undetermined list
// (name "structure" or "structure.<part>") covers addr.
func (d *Document) names(addr string) bool {
	for _, u := range d.Undetermined {
		if (u.Name == "structure" || strings.HasPrefix(u.Name, "structure.")) && MatchScope(u.Scope, addr) {
			return true
		}
	}
	return false
}

// StatusLine is one line saying the document's status: "complete: …", or
// "incomplete: N boundaries not reproduced, first <boundary> (<signature>)"
// with the holes and a check that did not run after it; "unchecked" for a
// document without a status.
func (d *Document) StatusLine() string {
	c := d.Check
	switch {
	case d.Status == "":
		return "unchecked: the document has no self-check"
	case d.Status == StatusComplete && c != nil:
		line := fmt.Sprintf("complete: %d boundary values reproduced teacher forced", c.Boundaries)
		if n := d.NotComputed(); n > 0 {
			line += fmt.Sprintf("; %s not computed (the program makes its output without them; undetermined lists them)", plural(n, "boundary", "boundaries"))
		}
		return line
	case d.Status == StatusComplete:
		return StatusComplete
	}
	var parts []string
	if c != nil && c.NotRun != "" {
		parts = append(parts, "not checked: "+c.NotRun)
	} else {
		nr := d.NotReproduced()
		s := plural(len(nr), "boundary", "boundaries") + " not reproduced"
		if len(nr) > 0 {
			s += fmt.Sprintf(", first %s (%s)", nr[0].Boundary, nr[0].Signature)
		}
		parts = append(parts, s)
	}
	if hs := d.Holes(); len(hs) > 0 {
		parts = append(parts, fmt.Sprintf("%s of the structure undetermined, first %s", plural(countAddresses(hs), "part", "parts"), hs[0].Address))
	}
	if d.Program != nil {
		if ft := d.Program.FromTrace(); len(ft) > 0 {
			parts = append(parts, fmt.Sprintf("%s taken from the trace (no expression makes them from the request), first %s", plural(len(ft), "value", "values"), ft[0]))
		}
	}
	return StatusIncomplete + ": " + strings.Join(parts, "; ")
}

// countAddresses counts the distinct addresses of holes.
func countAddresses(hs []Hole) int {
	seen := map[string]bool{}
	for _, h := range hs {
		seen[h.Address] = true
	}
	return len(seen)
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}
