package program

import (
	"testing"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/semantics"
)

// The semantics package spells the vocabulary's names without importing
// exec; these tests keep the two lists in step.
func TestSemanticsNamesParseInExec(t *testing.T) {
	for _, r := range semantics.RoundPoints() {
		if _, err := exec.ParseRound(r); err != nil {
			t.Errorf("rounding point %q: %v", r, err)
		}
	}
	for _, m := range semantics.MathVariants() {
		if m == "precise" {
			continue
		}
		if _, err := exec.ParseMath(m); err != nil {
			t.Errorf("math variant %q: %v", m, err)
		}
	}
	for _, spec := range semantics.Catalogue() {
		if spec.Name != "mlp_act" && spec.Name != "gate_fn" && spec.Name != "modulation_act" && spec.Name != "embed_act" {
			continue
		}
		for _, v := range spec.Values() {
			if _, err := exec.ParseAct(v); err != nil {
				t.Errorf("%s value %q: %v", spec.Name, v, err)
			}
		}
	}
	for _, op := range semantics.PrecisionOps() {
		found := false
		for o := Op(1); o < opEnd; o++ {
			found = found || o.String() == op
		}
		if !found {
			t.Errorf("precision op %q is no program op", op)
		}
	}
}

// Every rounding point exec knows is one a document may name.
func TestExecRoundPointsInSemantics(t *testing.T) {
	known := map[string]bool{}
	for _, r := range semantics.RoundPoints() {
		known[r] = true
	}
	for bit := exec.Round(1); bit != 0 && bit <= exec.RoundEach<<30; bit <<= 1 {
		if err := (exec.Spec{Out: 1, Round: bit}).Check(); err != nil {
			break
		}
		if name := bit.String(); !known[name] {
			t.Errorf("exec rounding point %q is missing from semantics", name)
		}
	}
}
