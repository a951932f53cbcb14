package semantics

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
)

// Format name and the schema version this package reads and writes.
const (
	FormatName = "zflow-semantics"
	Version    = 1
	// ProgramVersion is the version of a document that carries its
	// program (Program): version 1 documents name a block kind per block
	// and are built by recipe.
	ProgramVersion = 2
)

// Document is a semantics document.
type Document struct {
	Format    string    `json:"format"`
	Version   int       `json:"version"`
	Source    Source    `json:"source"`
	Structure Structure `json:"structure"`
	// Program is the model's dataflow (version 2); nil in a version 1
	// document, whose blocks are built by the recipe of their kind.
	Program      *Program       `json:"program,omitempty"`
	Factors      []Factor       `json:"factors"`
	Precision    Precision      `json:"precision"`
	Undetermined []Undetermined `json:"undetermined"`
	// Status is what the producer's self-check found (check.go):
	// StatusComplete, StatusIncomplete, or empty for a document nobody
	// checked (hand-written, or older than the self-check).
	Status string `json:"status,omitempty"`
	// Check is how the self-check ran; absent when Status is empty.
	Check *Check `json:"check,omitempty"`
}

// Source names the trace the document was made from.
type Source struct {
	Trace    string         `json:"trace"`  // path as given to the producer
	SHA256   string         `json:"sha256"` // of the trace file, lower-case hex
	Producer map[string]any `json:"producer,omitempty"`
}

// ProducerZflowVersion is the source.producer entry naming the zflow that
// wrote the document (the string `zflow --version` prints); documents
// older than it lack it.
const ProducerZflowVersion = "zflow_version"

// StampZflowVersion records in the producer which zflow writes the
// document. The producer is copied first: a discovery's producer may be
// the trace manifest's own map.
func (s *Source) StampZflowVersion(v string) {
	p := make(map[string]any, len(s.Producer)+1)
	maps.Copy(p, s.Producer)
	p[ProducerZflowVersion] = v
	s.Producer = p
}

// Factor is one fact the weights cannot show, with its evidence.
type Factor struct {
	Name       string      `json:"name"`  // canonical name (catalogue.go)
	Scope      string      `json:"scope"` // address glob (address.go)
	Value      any         `json:"value"`
	Margin     Margin      `json:"margin"` // runner-up error / winner error
	Decisive   bool        `json:"decisive"`
	Candidates []Candidate `json:"candidates"`
	Evidence   Evidence    `json:"evidence"`
}

// Candidate is one value a search tried and its error.
type Candidate struct {
	Value any     `json:"value"`
	Score float64 `json:"score"` // the evidence metric; lower is better
	// AtLeast: Score is a lower bound. The search stopped scoring the
	// candidate once it could not beat the winner (an exact fraction only
	// grows worse with the values seen), and the bound already decides
	// the margin.
	AtLeast bool `json:"at_least,omitempty"`
	// Pruned: the candidate was not scored, and why: the search saw,
	// before running it, that it could not beat the winner (for a rounding
	// plan: every value it could change is bit-exact already). Score is
	// then the winner's, as the bound that argument gives (AtLeast set);
	// margins and equivalences are over the candidates scored.
	Pruned string `json:"pruned,omitempty"`
}

// Evidence says where and how a factor was decided.
type Evidence struct {
	Boundary string `json:"boundary"` // trace boundary "<module>/<port>" scored at
	Metric   string `json:"metric"`   // rel_rms | exact_fraction | declared
	Note     string `json:"note,omitempty"`
}

// Undetermined is what the trace could not decide, or a part the document
// does not reproduce, and why.
type Undetermined struct {
	Name   string `json:"name"`
	Scope  string `json:"scope"`
	Reason string `json:"reason"`
	// The fields below are set on a boundary the self-check does not
	// reproduce (Name UndeterminedBoundary) and absent otherwise.
	Boundary  string  `json:"boundary,omitempty"`  // "<module>/<port>" (the trace key without its scope) or "output/<name>"
	Step      *int    `json:"step,omitempty"`      // the first step at which it was not reproduced
	Steps     int     `json:"steps,omitempty"`     // how many steps were not reproduced
	Signature string  `json:"signature,omitempty"` // the diagnosis (Signatures)
	RelRMS    *Number `json:"rel_rms,omitempty"`   // at Step
	Cosine    *Number `json:"cosine,omitempty"`    // at Step
	Tolerance float64 `json:"tolerance,omitempty"` // the rel-RMS it had to be within
}

// Margin is runner-up error / winner error: ≥ 1 when the winner is better,
// +Inf when the winner's error is zero (written "inf" in JSON), 0 when
// nothing was measured (a declared factor).
type Margin float64

// MarshalJSON writes +Inf as the string "inf".
func (m Margin) MarshalJSON() ([]byte, error) {
	if math.IsInf(float64(m), 1) {
		return []byte(`"inf"`), nil
	}
	if math.IsNaN(float64(m)) || math.IsInf(float64(m), -1) {
		return nil, fmt.Errorf("margin %v is not a number a document can hold", float64(m))
	}
	return json.Marshal(float64(m))
}

// UnmarshalJSON reads a number or "inf".
func (m *Margin) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	var s string
	if json.Unmarshal(b, &s) == nil {
		if s != "inf" {
			return fmt.Errorf("margin: %q is neither a number nor \"inf\"", s)
		}
		*m = Margin(math.Inf(1))
		return nil
	}
	var f float64
	if err := json.Unmarshal(b, &f); err != nil {
		return fmt.Errorf("margin: %v", err)
	}
	*m = Margin(f)
	return nil
}
