package plan

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/semantics"
)

// simplifyByRebuilding is simplify's definition run as written: each rule
// in turn is dropped where every unit's spec stays what the whole plan
// gives it.
func simplifyByRebuilding(units []Unit, p semantics.Precision) []semantics.PrecisionRule {
	specs := func(q semantics.Precision) []exec.Spec {
		out := make([]exec.Spec, len(units))
		for i, u := range units {
			out[i], _ = program.SpecFor(&q, u.Op, u.Role)
		}
		return out
	}
	want := specs(p)
	rules := slices.Clone(p.Rules)
	for i := 0; i < len(rules); {
		q := p
		q.Rules = slices.Delete(slices.Clone(rules), i, i+1)
		if slices.Equal(specs(q), want) {
			rules = q.Rules
			continue
		}
		i++
	}
	return rules
}

// TestSimplify: the rules simplify keeps are those of its definition, on
// random plans over units of a few ops and roles: rules of every scope
// (exact roles, globs, the whole class), shadowed, repeated, restating
// the default, and a rule whose format does not parse.
func TestSimplify(t *testing.T) {
	var units []Unit
	for b := range 3 {
		for _, r := range []string{"attn.to_q", "attn.to_k", "ff.net.0.proj", "norm1"} {
			for _, op := range []string{"linear", "norm"} {
				units = append(units, Unit{Op: op, Role: fmt.Sprintf("blocks.%d.%s", b, r)})
			}
		}
	}
	scopes := []string{"", "blocks.*.attn.to_q", "blocks.1.*", "*.norm1", "blocks.0.ff.net.0.proj", "*attn*", "nothing.*"}
	outs := []string{"", "", "f32", "bf16", "nonsense"}
	rounds := []string{"", "", "before_bias", "moments"}
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 300 {
		p := semantics.Precision{Activations: "bf16"}
		for range rng.IntN(9) {
			p.Rules = append(p.Rules, semantics.PrecisionRule{
				Op:    []string{"linear", "norm", "attention"}[rng.IntN(3)],
				Role:  scopes[rng.IntN(len(scopes))],
				Out:   outs[rng.IntN(len(outs))],
				Round: rounds[rng.IntN(len(rounds))],
			})
		}
		if trial%50 == 7 {
			p.Activations = "no format"
		}
		ds := &discovery{units: units}
		got, want := ds.simplify(p), simplifyByRebuilding(units, p)
		if !slices.Equal(got, want) {
			t.Fatalf("trial %d: rules %+v: simplify kept %+v, want %+v", trial, p.Rules, got, want)
		}
	}
}
