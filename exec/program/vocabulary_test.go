package program

import (
	"math"
	"slices"
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

// TestTimestepFreqOverridesInSemantics: a timestep table's frequency
// overrides go into a document's node and come back bit for bit; one
// outside the table is refused when the document is read.
func TestTimestepFreqOverridesInSemantics(t *testing.T) {
	a := Attrs{Timestep: exec.TimestepParams{Dim: 8, Scale: 1, MaxPeriod: 10000,
		FreqOverrides: []exec.FreqOverride{{Index: 1, Value: math.Nextafter32(0.1, 1)}, {Index: 3, Value: 0.001}}}}
	d := attrsToDoc(OpTimestepEmbed, &a)
	n, err := nodeFromDoc(&semantics.Precision{Activations: "f32"}, semantics.ProgramNode{Op: "timestep_embed", In: []string{"t"}, Out: []string{"e"}, Attrs: d})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(n.Attrs.Timestep.FreqOverrides, a.Timestep.FreqOverrides) {
		t.Errorf("read back %v, want %v", n.Attrs.Timestep.FreqOverrides, a.Timestep.FreqOverrides)
	}
	d.Timestep.FreqOverrides[0].Index = 4
	if _, err := nodeFromDoc(&semantics.Precision{Activations: "f32"}, semantics.ProgramNode{Op: "timestep_embed", In: []string{"t"}, Out: []string{"e"}, Attrs: d}); err == nil {
		t.Error("an override outside the table accepted")
	}
}
