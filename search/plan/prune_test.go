package plan

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/zflow/zflow/exec/cpu"
	"github.com/zflow/zflow/search"
	"github.com/zflow/zflow/semantics"
)

// TestPruneRule: a costly candidate (a tensor core's sums) is ruled out,
// with a reason naming the value in hand, exactly where every value its
// factor's ops can change is bit-exact (rel-RMS 0 too); a cheap one never
// is, nor a role's class value, nor anything in an exhaustive search.
func TestPruneRule(t *testing.T) {
	var own, other bits
	own.set(0)
	other.set(1)
	rec := func(cone bits, n, exact int, d2 float64) Record {
		return Record{Key: "s0/m/out", N: n, Exact: exact, SumD2: d2, SumR2: 1, cone: cone}
	}
	cands := classCandidates("linear", "bf16")
	class := &factor{name: "linear", class: "linear", cands: cands, cover: own}
	role := &factor{name: "linear@blocks.*.to_q", class: "linear", glob: "blocks.*.to_q", cands: cands, cover: own}
	exactRecs := []Record{rec(own, 64, 64, 0), rec(other, 64, 10, 3)} // another class's inexactness does not count
	cases := []struct {
		name       string
		f          *factor
		value      string
		a          search.Assignment
		recs       []Record
		exhaustive bool
		want       string
	}{
		{"plain plan exact: tensor core pruned", class, "math=tensor_core", search.Assignment{"linear": "plain"}, exactRecs, false,
			"not scored: every value it can change is bit-exact under plain"},
		{"the other tensor-core candidate too", class, "round=before_bias math=tensor_core", search.Assignment{"linear": "round=before_bias"}, exactRecs, false,
			"not scored: every value it can change is bit-exact under round=before_bias"},
		{"plain plan inexact: tensor core scored", class, "math=tensor_core", search.Assignment{"linear": "plain"},
			[]Record{rec(own, 64, 63, 1e-6), rec(other, 64, 64, 0)}, false, ""},
		{"exact fraction 1 but rel-RMS not 0: scored", class, "math=tensor_core", search.Assignment{"linear": "plain"},
			[]Record{rec(own, 64, 64, 1e-9)}, false, ""},
		{"no record depends on the class: scored", class, "math=tensor_core", search.Assignment{"linear": "plain"},
			[]Record{rec(other, 64, 64, 0)}, false, ""},
		{"a cheap candidate is never pruned", class, "round=before_bias", search.Assignment{"linear": "plain"}, exactRecs, false, ""},
		{"exhaustive: scored", class, "math=tensor_core", search.Assignment{"linear": "plain"}, exactRecs, true, ""},
		{"a role's class value is scored", role, "math=tensor_core",
			search.Assignment{"linear": "math=tensor_core", role.name: "plain"}, exactRecs, false, ""},
		{"a role's other tensor-core value is pruned", role, "round=before_bias math=tensor_core",
			search.Assignment{"linear": "math=tensor_core", role.name: "plain"}, exactRecs, false,
			"not scored: every value it can change is bit-exact under plain"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ds := &discovery{acts: "bf16", byName: map[string]*factor{class.name: class, role.name: role},
				order: []*factor{class}, roles: []*factor{role}, cache: map[runKey][]Record{}, sample: DefaultSampleRows,
				opts: DiscoverOptions{Exhaustive: tc.exhaustive}}
			js, err := json.Marshal(ds.precisionOf(tc.a))
			if err != nil {
				t.Fatal(err)
			}
			ds.cache[runKey{plan: string(js), sampled: true}] = tc.recs
			got, err := ds.Prune(context.Background(), tc.f.name, tc.value, tc.a)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("Prune(%s = %s) = %q, want %q", tc.f.name, tc.value, got, tc.want)
			}
			if ds.evals != 0 {
				t.Errorf("%d program runs: the plan in hand's records were known", ds.evals)
			}
		})
	}
}

// TestPrunedTensorCoreEvidence: from an empty plan, a class whose plan
// leaves every value bit-exact without a tensor core's sums gets none of
// them scored (the DiT fixture, torch 1.13 on a CPU: linear and attention),
// and its evidence lists each unscored, with the reason and the winner's
// score as the bound, out of margins and equivalences; a class whose plain
// plan is inexact gets them scored, and one wins (flux, captured through
// cuBLAS on an H200: linear's math=tensor_core, scored and exact).
func TestPrunedTensorCoreEvidence(t *testing.T) {
	type want struct {
		class, after string
		pruned       []string // candidates not scored
		scoredTC     bool     // some tensor-core candidate scored
	}
	cases := []struct {
		c    planCase
		want []want
	}{
		{ditCase(), []want{
			{"linear", "plain", []string{"math=tensor_core", "round=before_bias math=tensor_core"}, false},
			{"attention", "round=scores|probs|accum", tcLabels("attention"), false},
		}},
	}
	if _, err := os.Stat(conformanceDir); err == nil {
		cases = append(cases, struct {
			c    planCase
			want []want
		}{planCase{"flux-bf16", filepath.Join(conformanceDir, "flux-bf16.npz"), "../../semantics/testdata/flux-bf16.json"}, []want{
			// plain inexact: the tensor cores' sums scored, and one wins,
			// exact; at the report its costly rivals need not be
			{"linear", "math=tensor_core", []string{"round=before_bias math=tensor_core"}, true},
			{"attention", "round=weights math=tensor_core", without(tcLabels("attention"), "round=weights math=tensor_core"), true},
		}})
	} else {
		t.Logf("flux-bf16 not available (%s): only the exact case", conformanceDir)
	}
	for _, tc := range cases {
		t.Run(tc.c.name, func(t *testing.T) {
			tr, doc := load(t, tc.c)
			rep, err := Discover(context.Background(), cpu.New(1), tr, emptied(doc), DiscoverOptions{})
			if err != nil {
				t.Fatal(err)
			}
			total := 0
			for _, w := range tc.want {
				var row *ClassReport
				for i := range rep.Classes {
					if rep.Classes[i].Class == w.class {
						row = &rep.Classes[i]
					}
				}
				if row == nil {
					t.Fatalf("no %s row", w.class)
				}
				if row.After != w.after {
					t.Errorf("%s: %s, want %s", w.class, row.After, w.after)
				}
				var winner float64
				for _, c := range row.Candidates {
					if c.Value == row.After {
						winner = c.Score
					}
				}
				var pruned []string
				scoredTC := false
				for _, c := range row.Candidates {
					tc := strings.Contains(c.Value.(string), "tensor_core")
					switch {
					case c.Pruned != "":
						pruned = append(pruned, c.Value.(string))
						if !tc || !c.AtLeast || c.Score != winner || !strings.HasPrefix(c.Pruned, PrunedExact+": ") ||
							!strings.HasSuffix(c.Pruned, "bit-exact under "+row.After) {
							t.Errorf("%s: pruned candidate %+v: want a tensor core's, bound by the winner's score %v, the reason naming %s",
								w.class, c, winner, row.After)
						}
					case tc:
						scoredTC = true
					}
				}
				if strings.Join(pruned, "; ") != strings.Join(w.pruned, "; ") {
					t.Errorf("%s: not scored %q, want %q", w.class, pruned, w.pruned)
				}
				if scoredTC != w.scoredTC {
					t.Errorf("%s: a tensor-core candidate scored: %v, want %v", w.class, scoredTC, w.scoredTC)
				}
				for _, e := range row.Equivalent {
					for _, p := range pruned {
						if e == p {
							t.Errorf("%s: %s is both not scored and equivalent", w.class, p)
						}
					}
				}
				total += len(pruned)
				// the rule's evidence in the plan says the same
				for _, r := range rep.After.Rules {
					if r.Op == w.class && r.Role == "" && r.Evidence != nil {
						n := 0
						for _, c := range r.Evidence.Candidates {
							if c.Pruned != "" {
								n++
							}
						}
						if n != len(w.pruned) {
							t.Errorf("%s rule: %d candidates not scored in its evidence, want %d", w.class, n, len(w.pruned))
						}
					}
				}
			}
			if rep.Pruned < total {
				t.Errorf("Report.Pruned %d, below the %d candidates listed unscored", rep.Pruned, total)
			}
			var sb strings.Builder
			if err := rep.WriteTable(&sb); err != nil {
				t.Fatal(err)
			}
			if total > 0 && !strings.Contains(sb.String(), "not scored (") {
				t.Errorf("the table does not list the candidates not scored:\n%s", sb.String())
			}
		})
	}
}

// tcLabels lists a class's tensor-core candidates in bf16.
func tcLabels(class string) []string {
	var out []string
	for _, c := range classCandidates(class, "bf16") {
		if c.costly {
			out = append(out, c.Label)
		}
	}
	return out
}

func without(list []string, s string) []string {
	var out []string
	for _, x := range list {
		if x != s {
			out = append(out, x)
		}
	}
	return out
}

// TestPinnedTakesArithmetic: a pinned rule (an f32 norm's storage format
// in a bf16 model) takes the rounding points and math variants of the
// first searched rule after it that matches its node; one that names its
// own keeps them, and a rule for another op or role gives none.
func TestPinnedTakesArithmetic(t *testing.T) {
	rules := []semantics.PrecisionRule{
		{Op: "norm", Role: "blocks.0.attn.norm_q.norm3", Out: "f32", Pinned: true},
		{Op: "norm", Role: "blocks.0.mlp.norm9", Out: "f32", Pinned: true},
		{Op: "attention", Role: "blocks.0.attn.attention5", Out: "f32", Round: "probs", Pinned: true},
		{Op: "norm", Role: "blocks.*.attn.*", Math: "welford"},
		{Op: "attention", Round: "each"},
		{Op: "norm", Round: "stats"},
	}
	withArithmetic(rules)
	for i, want := range []struct{ round, math string }{{"", "welford"}, {"stats", ""}, {"probs", ""}} {
		if r := rules[i]; r.Round != want.round || r.Math != want.math || r.Out != "f32" {
			t.Errorf("rule %d: %+v, want out f32 round %q math %q", i, r, want.round, want.math)
		}
	}
}

// TestPruneStoredSums: a convolution's sums stored one product at a time
// (round=accum, costly and scalar) are scored only where the class's own
// outputs are farther than bf16's unit roundoff from the trace (torch
// 1.13's CPU kernels: ~10⁻²); a GPU's convolutions, near it, do not try
// them, however far the boundaries after them are (an attention's miss);
// with no convolution output captured, they are not tried.
func TestPruneStoredSums(t *testing.T) {
	var own bits
	own.set(0)
	rec := func(class string, n, exact int, d2 float64) Record {
		return Record{Key: "s0/" + class + "/out", OpClass: class, N: n, Exact: exact, SumD2: d2, SumR2: 1, cone: own}
	}
	cands := classCandidates("conv2d", "bf16")
	conv := &factor{name: "conv2d", class: "conv2d", cands: cands, cover: own}
	a := search.Assignment{"conv2d": "plain"}
	for _, tc := range []struct {
		name   string
		recs   []Record
		pruned bool
	}{
		{"own outputs 10⁻² off: scored", []Record{rec("conv2d", 64, 10, 1e-4)}, false},
		{"own outputs within a rounding, the attention after them far: pruned",
			[]Record{rec("conv2d", 64, 60, 1e-6), rec("attention", 64, 0, 1e-2)}, true},
		{"no convolution output captured: pruned", []Record{rec("attention", 64, 0, 1e-2)}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ds := &discovery{acts: "bf16", byName: map[string]*factor{conv.name: conv}, order: []*factor{conv},
				cache: map[runKey][]Record{}, sample: DefaultSampleRows}
			js, err := json.Marshal(ds.precisionOf(a))
			if err != nil {
				t.Fatal(err)
			}
			ds.cache[runKey{plan: string(js), sampled: true}] = tc.recs
			got, err := ds.Prune(context.Background(), conv.name, "round=accum", a)
			if err != nil {
				t.Fatal(err)
			}
			if pruned := strings.HasPrefix(got, PrunedExact); pruned != tc.pruned {
				t.Errorf("Prune(round=accum) = %q, want pruned %v", got, tc.pruned)
			}
		})
	}
	if slices.ContainsFunc(classCandidates("conv2d", "f32"), func(c Candidate) bool { return c.Label == "round=accum" }) {
		t.Error("stored sums offered in f32")
	}
}
