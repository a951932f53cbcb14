package semantics

import (
	"math"
	"path/filepath"
	"strings"
	"testing"
)

// TestRuleEvidence: a searched rule's evidence round-trips (margin "inf"
// included) and is validated.
func TestRuleEvidence(t *testing.T) {
	d, err := Read("testdata/dit-bf16.json")
	if err != nil {
		t.Fatal(err)
	}
	d.Precision.Status = "searched"
	d.Precision.Rules = append([]PrecisionRule{{Op: "norm", Role: "blocks.*.norm1", Round: "stats", Evidence: &RuleEvidence{
		Metric: "exact_fraction", Boundaries: 6, Exact: 1, Margin: Margin(math.Inf(1)), Decisive: true,
		Equivalent: []string{"round=stats|normalized"}, Candidates: []Candidate{{Value: "plain", Score: 0.57}, {Value: "round=stats", Score: 0}},
	}}, {Op: "attention", Round: "scores|probs|accum"}, {Op: "norm", Math: "welford"}}, d.Precision.Rules...)
	path := filepath.Join(t.TempDir(), "d.json")
	if err := d.Write(path); err != nil {
		t.Fatal(err)
	}
	back, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	ev := back.Precision.Rules[0].Evidence
	if ev == nil || !math.IsInf(float64(ev.Margin), 1) || len(ev.Candidates) != 2 || ev.Equivalent[0] != "round=stats|normalized" {
		t.Fatalf("evidence after a round trip: %+v", ev)
	}
	ev.Exact = 1.5
	if err := back.Validate(); err == nil || !strings.Contains(err.Error(), "precision.rules[0].evidence.exact") {
		t.Errorf("exact 1.5: %v", err)
	}
}
