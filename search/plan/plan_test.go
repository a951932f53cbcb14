package plan

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/cpu"
	"github.com/zflow/zflow/semantics"
	"github.com/zflow/zflow/trace"
)

// conformanceDir holds the traces of real third-party models (../shared).
const conformanceDir = "../../../shared/conformance"

type planCase struct {
	name, trace, doc string
}

func ditCase() planCase {
	return planCase{"dit-bf16", "../../fixtures/dit/dit-bf16.npz", "../../semantics/testdata/dit-bf16.json"}
}

func conformanceCases(t *testing.T) []planCase {
	t.Helper()
	if _, err := os.Stat(conformanceDir); err != nil {
		t.Skipf("conformance traces not available (%s): %v", conformanceDir, err)
	}
	var out []planCase
	for _, m := range []string{"flux", "qwenimage", "llama"} {
		out = append(out, planCase{m + "-bf16", filepath.Join(conformanceDir, m+"-bf16.npz"), "../../semantics/testdata/" + m + "-bf16.json"})
	}
	return out
}

func load(t *testing.T, c planCase) (*trace.Trace, *semantics.Document) {
	t.Helper()
	tr, err := trace.Open(c.trace)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	doc, err := semantics.Read(c.doc)
	if err != nil {
		t.Fatal(err)
	}
	return tr, doc
}

// emptied is doc with an empty precision section: the activations' format
// and nothing else.
func emptied(doc *semantics.Document) *semantics.Document {
	d := *doc
	d.Precision = semantics.Precision{Status: "placeholder", Activations: doc.Precision.Activations}
	return &d
}

// discoverFromEmpty runs precision discovery from an empty plan and checks
// the proof: every elementwise boundary is bit-exact teacher forced; it
// returns the report and the records of the hand-written plan.
func discoverFromEmpty(t *testing.T, c planCase) (*Report, []Record) {
	t.Helper()
	tr, doc := load(t, c)
	rep, err := Discover(context.Background(), cpu.New(1), tr, emptied(doc), DiscoverOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := rep.WriteTable(&buf); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: precision discovery from an empty plan\n%s", c.name, buf.String())
	e, err := NewEvaluator(cpu.New(1), tr, doc, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	hand, err := e.Run(doc.Precision)
	if err != nil {
		t.Fatal(err)
	}
	elementwise, gemm := 0, 0
	for i := range rep.AfterRecords {
		r := &rep.AfterRecords[i]
		if !r.Elementwise() {
			if r.Exact != r.N {
				gemm++
			}
			continue
		}
		elementwise++
		if r.Exact != r.N {
			t.Errorf("%s: elementwise boundary %s (%s, depends on %s) is %s bit-exact", c.name, r.Key, r.OpClass, r.DependsOn, Pct(r.ExactFraction()))
		}
	}
	if elementwise == 0 {
		t.Fatalf("%s: no elementwise boundary", c.name)
	}
	t.Logf("%s: %d elementwise boundaries, all bit-exact; %d boundaries after a GEMM, attention or table not exact", c.name, elementwise, gemm)
	// The plan found is as exact as the hand-written one, class by class.
	_, found := ByClass(rep.AfterRecords)
	order, declared := ByClass(hand)
	var sb strings.Builder
	fmt.Fprintf(&sb, "%-16s %10s %12s %12s\n", "op class", "boundaries", "hand plan", "discovered")
	for _, cl := range order {
		f := found[cl]
		if f == nil {
			continue
		}
		fmt.Fprintf(&sb, "%-16s %10d %12s %12s\n", cl, f.Boundaries, Pct(declared[cl].Fraction()), Pct(f.Fraction()))
		if f.Fraction() < declared[cl].Fraction() {
			t.Errorf("%s: %s boundaries %s exact under the discovered plan, %s under the hand-written one", c.name, cl,
				Pct(f.Fraction()), Pct(declared[cl].Fraction()))
		}
	}
	t.Logf("%s: teacher-forced exact fraction per op class\n%s", c.name, sb.String())
	return rep, hand
}

// TestDiscoverDiT: the project's own DiT fixture (torch 1.13 on CPU, bf16):
// from an empty plan, discovery finds the colleague's plan and the two
// roundings it lacked: the layer norms' statistics in bf16 (torch 1.13's
// CPU kernel) and SiLU/GELU composed of rounded primitives; and the
// attention's P·v accumulated in bf16.
func TestDiscoverDiT(t *testing.T) {
	rep, _ := discoverFromEmpty(t, ditCase())
	want := map[string]string{"blocks.*.norm1": "stats", "blocks.*.norm2": "stats", "final.norm": "stats"}
	for _, r := range rep.After.Rules {
		if r.Op == "norm" && want[r.Role] == r.Round {
			delete(want, r.Role)
		}
	}
	if len(want) > 0 {
		t.Errorf("layer-norm rules not found: %v in %+v", want, rep.After.Rules)
	}
	rows := map[string]ClassReport{}
	for _, c := range rep.Classes {
		rows[c.Class] = c
	}
	for class, after := range map[string]string{"act": "round=each", "modulate": "round=scale|product",
		"gated_residual": "round=product", "attention": "round=scores|probs|accum"} {
		if got := rows[class].After; got != after {
			t.Errorf("%s: found %q, want %q", class, got, after)
		}
		if !rows[class].Decisive {
			t.Errorf("%s: not decisive (margin %v)", class, rows[class].Margin)
		}
	}
	for _, r := range rep.AfterRecords {
		if r.OpClass == "attention" && r.Exact != r.N {
			t.Errorf("attention %s: %s exact", r.Key, Pct(r.ExactFraction()))
		}
	}
	// The document carries the plan and its evidence, and validates.
	_, doc := load(t, ditCase())
	doc.Precision = rep.After
	if err := doc.Validate(); err != nil {
		t.Error(err)
	}
	for _, r := range rep.After.Rules {
		if r.Evidence == nil {
			t.Errorf("rule %+v has no evidence", r)
		}
	}
	if len(rep.After.Exact) == 0 || rep.After.Status != "searched" {
		t.Errorf("status %q, %d exact fractions", rep.After.Status, len(rep.After.Exact))
	}
}

// TestDiscoverConformance: on the bf16 conformance traces (PyTorch 2.11 on
// an H200), from an empty plan, every elementwise boundary is bit-exact
// teacher forced, and the plan is as exact as the hand-written one.
func TestDiscoverConformance(t *testing.T) {
	for _, c := range conformanceCases(t) {
		t.Run(c.name, func(t *testing.T) {
			rep, _ := discoverFromEmpty(t, c)
			for _, cl := range rep.Classes {
				if (cl.Class == "linear" || cl.Class == "attention") && cl.Boundaries > 0 && cl.ExactAfter < 1 {
					t.Logf("%s: %s boundaries %s bit-exact (cuBLAS/flash summation order differs from k order)", c.name, cl.Class, Pct(cl.ExactAfter))
				}
			}
		})
	}
}

// TestDiscoverStartsFromDocument: the search starts from the document's
// plan, which is what the report's "before" column shows.
func TestDiscoverStartsFromDocument(t *testing.T) {
	tr, doc := load(t, ditCase())
	rep, err := Discover(context.Background(), cpu.New(1), tr, doc, DiscoverOptions{Eval: Options{Steps: 1}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range rep.Classes {
		switch c.Class {
		case "act":
			if c.Before != "round=each" {
				t.Errorf("act before: %q, the document says round=each", c.Before)
			}
		case "modulate":
			if c.Before != "round=scale|product" {
				t.Errorf("modulate before: %q", c.Before)
			}
		}
	}
}

// TestEvaluatorModes: runs are deterministic (the memo changes nothing),
// and free running compares the same boundaries.
func TestEvaluatorModes(t *testing.T) {
	tr, doc := load(t, ditCase())
	e, err := NewEvaluator(cpu.New(1), tr, doc, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	a, err := e.Run(doc.Precision)
	if err != nil {
		t.Fatal(err)
	}
	b, err := e.Run(doc.Precision)
	if err != nil {
		t.Fatal(err)
	}
	if len(a) != len(b) {
		t.Fatalf("%d records, then %d", len(a), len(b))
	}
	for i := range a {
		if a[i].Key != b[i].Key || a[i].Exact != b[i].Exact || a[i].SumD2 != b[i].SumD2 {
			t.Fatalf("record %d: %+v then %+v", i, a[i], b[i])
		}
	}
	free, err := NewEvaluator(cpu.New(1), tr, doc, Options{FreeRunning: true, Keep: true})
	if err != nil {
		t.Fatal(err)
	}
	defer free.Close()
	f, err := free.Run(doc.Precision)
	if err != nil {
		t.Fatal(err)
	}
	if len(f) != len(a) {
		t.Errorf("free running compared %d boundaries, teacher forced %d", len(f), len(a))
	}
	for i := range f {
		if len(f[i].Ours) != f[i].N || len(f[i].Ref) != f[i].N {
			t.Fatalf("%s: values not kept", f[i].Key)
		}
	}
}

func TestRoleGroup(t *testing.T) {
	for in, want := range map[string]string{
		"blocks.0.image.q_norm": "blocks.*.q_norm", "blocks.12.norm1": "blocks.*.norm1",
		"final.norm": "final.norm", "embed.text.norm": "embed.*.norm", "conditioning.time_act": "conditioning.time_act",
	} {
		if got := RoleGroup(in); got != want {
			t.Errorf("RoleGroup(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestBlockNode: a program node's role is read as a node of indexed
// blocks (the indices wildcards, the op's counter dropped); a node
// outside any indexed block, or a role without a counter, is not.
func TestBlockNode(t *testing.T) {
	for _, c := range []struct {
		role, pattern, module, op string
		ok                        bool
	}{
		{"transformer.down_blocks.1.resnets.0.norm1.norm14", "transformer.down_blocks.*.resnets.*.norm1.norm", "transformer.down_blocks.1.resnets.0.norm1", "norm", true},
		{"text_encoder.layers.12.mlp.fc2.linear7", "text_encoder.layers.*.mlp.fc2.linear", "text_encoder.layers.12.mlp.fc2", "linear", true},
		{"transformer.time_proj.mul1", "", "", "", false},       // no block index
		{"transformer.blocks.3.attn.q_norm", "", "", "", false}, // no counter: a role of its own
		{"norm3", "", "", "", false},
	} {
		pattern, module, op, ok := blockNode(c.role)
		if ok != c.ok || ok && (pattern != c.pattern || module != c.module || op != c.op) {
			t.Errorf("blockNode(%q) = %q %q %q %v, want %q %q %q %v", c.role, pattern, module, op, ok, c.pattern, c.module, c.op, c.ok)
		}
	}
}

// TestRoleCandidates: a role group is scored against its class's value:
// the class's declared plan (a start that matched no candidate, as when
// some of its nodes are pinned) is among the role's candidates, and a
// candidate for another norm kind is not.
func TestRoleCandidates(t *testing.T) {
	declared := Candidate{Label: "declared plain", Rules: []semantics.PrecisionRule{{Op: "add"}}}
	rms := []Unit{{Op: "norm", Role: "blocks.0.q_norm", Kind: exec.NormRMS}}
	cases := []struct {
		name      string
		class     *factor
		units     []Unit
		want, not []string
	}{
		{"declared add", &factor{class: "add", cands: append(classCandidates("add", "bf16"), declared)},
			[]Unit{{Op: "add", Role: "blocks.0.mod_add"}}, []string{"plain", "out=f32", "declared plain"}, nil},
		// a class of mixed norm kinds offers neither kind's own candidates;
		// its roles do
		{"rms norm", &factor{class: "norm", cands: classCandidates("norm", "bf16")[:5]}, rms,
			[]string{"plain", "round=stats (rms)"}, []string{"math=welford", "round=stats"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var got []string
			for _, cand := range roleCandidates(c.class, "bf16", c.units) {
				got = append(got, cand.Label)
			}
			for _, w := range c.want {
				if !slices.Contains(got, w) {
					t.Errorf("%q missing from %v", w, got)
				}
			}
			for _, n := range c.not {
				if slices.Contains(got, n) {
					t.Errorf("%q offered to %v: %v", n, c.units, got)
				}
			}
		})
	}
}

func TestDecide(t *testing.T) {
	c := []semantics.Candidate{{Value: "plain", Score: 0.4}, {Value: "a", Score: 0}, {Value: "b", Score: 0}, {Value: "c", Score: 0.1}}
	err, m, eq := decide(c, "a")
	if err != 0 || !math.IsInf(m, 1) || len(eq) != 1 || eq[0] != "b" {
		t.Errorf("decide: %v %v %v", err, m, eq)
	}
	_, m, _ = decide(c, "c")
	if m != 4 {
		t.Errorf("margin %v, want 4", m)
	}
	_, m, _ = decide([]semantics.Candidate{{Value: "x", Score: 0.2}, {Value: "y", Score: 0.2}}, "x")
	if m != 1 {
		t.Errorf("all equal: margin %v, want 1", m)
	}
}

// TestStoppedRunsDecideAlike: stopping a candidate's run once its plan
// cannot win changes no decision. From an empty plan, the search with
// stops and the exhaustive one find the same rules, the same decisive
// classes and role rules; every score the stopped search reports whole is
// the exhaustive one's, and every bound it reports (at_least) is at most
// the exhaustive score and already makes its margin decisive or not alike.
func TestStoppedRunsDecideAlike(t *testing.T) {
	cases := []planCase{ditCase()}
	if _, err := os.Stat(conformanceDir); err == nil {
		cases = append(cases, conformanceCases(t)...)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tr, doc := load(t, c)
			var reps [2]*Report
			for i, exhaustive := range []bool{false, true} {
				rep, err := Discover(context.Background(), cpu.New(1), tr, emptied(doc), DiscoverOptions{Exhaustive: exhaustive})
				if err != nil {
					t.Fatal(err)
				}
				reps[i] = rep
			}
			stopped, whole := reps[0], reps[1]
			if whole.Stopped != 0 || stopped.Stopped == 0 {
				t.Errorf("runs stopped: %d with stops, %d exhaustive; want some, and none", stopped.Stopped, whole.Stopped)
			}
			rules := func(p semantics.Precision) string {
				var sb strings.Builder
				for _, r := range p.Rules {
					fmt.Fprintf(&sb, "%s %s %s %s %s; ", r.Op, r.Role, r.Out, r.Round, r.Math)
				}
				return sb.String()
			}
			if a, b := rules(stopped.After), rules(whole.After); a != b {
				t.Fatalf("rules\n  with stops %s\n  exhaustive %s", a, b)
			}
			bounds := 0
			for i, sc := range stopped.Classes {
				wc := whole.Classes[i]
				if sc.Class != wc.Class || sc.After != wc.After || sc.Decisive != wc.Decisive || sc.Observed != wc.Observed {
					t.Errorf("%s: %s decisive %v, exhaustive %s %v", sc.Class, sc.After, sc.Decisive, wc.After, wc.Decisive)
				}
				if sc.MarginAtLeast && sc.Margin > wc.Margin || !sc.MarginAtLeast && sc.Margin != wc.Margin {
					t.Errorf("%s: margin %v (at least: %v), exhaustive %v", sc.Class, sc.Margin, sc.MarginAtLeast, wc.Margin)
				}
				for j, cand := range sc.Candidates {
					want := wc.Candidates[j]
					if cand.AtLeast {
						bounds++
						if cand.Score > want.Score {
							t.Errorf("%s %v: bound %v above the score %v", sc.Class, cand.Value, cand.Score, want.Score)
						}
					} else if cand.Score != want.Score {
						t.Errorf("%s %v: score %v, exhaustive %v", sc.Class, cand.Value, cand.Score, want.Score)
					}
				}
			}
			if len(stopped.Roles) != len(whole.Roles) {
				t.Errorf("%d role rules, exhaustive %d", len(stopped.Roles), len(whole.Roles))
			}
			t.Logf("%d program runs (%d stopped) against %d exhaustive; %d candidate scores are bounds",
				stopped.Evaluations, stopped.Stopped, whole.Evaluations, bounds)
		})
	}
}

// TestSampledRowsDecideAlike: scoring the linears' and attentions'
// candidates on a few of their rows (4 here, of 12 to 64, so that these
// small traces sample at all) finds the plan that scoring every row finds,
// as exact, and the document says which boundaries were sampled and on
// how many rows.
// rowsDependent is a backend that does not say its rows are independent
// (as cuBLASLt's GEMM is not).
type rowsDependent struct{ exec.Backend }

func TestSampledRowsDecideAlike(t *testing.T) {
	cases := []planCase{ditCase()}
	if _, err := os.Stat(conformanceDir); err == nil {
		cases = append(cases, conformanceCases(t)...)
	}
	rules := func(p semantics.Precision) string {
		var sb strings.Builder
		for _, r := range p.Rules {
			fmt.Fprintf(&sb, "%s %s %s %s %s; ", r.Op, r.Role, r.Out, r.Round, r.Math)
		}
		return sb.String()
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tr, doc := load(t, c)
			var reps []*Report
			for _, r := range []struct {
				b    exec.Backend
				rows int
			}{{cpu.New(1), -1}, {cpu.New(1), 4}, {rowsDependent{cpu.New(1)}, 4}} {
				rep, err := Discover(context.Background(), r.b, tr, emptied(doc), DiscoverOptions{SampleRows: r.rows})
				if err != nil {
					t.Fatal(err)
				}
				reps = append(reps, rep)
			}
			whole, sampled := reps[0], reps[1]
			// A backend whose rows are not independent runs each op whole
			// and scores the same rows of it: the same plan, the same
			// figures, the same rows.
			if a, b := rules(reps[2].After), rules(sampled.After); a != b {
				t.Errorf("rules\n  cut from whole results %s\n  sampled               %s", a, b)
			}
			if !reflect.DeepEqual(reps[2].After.Exact, sampled.After.Exact) || !reflect.DeepEqual(reps[2].After.Scoring, sampled.After.Scoring) {
				t.Errorf("cut from whole results: exact %v, scoring %v\nsampled: exact %v, scoring %v",
					reps[2].After.Exact, reps[2].After.Scoring, sampled.After.Exact, sampled.After.Scoring)
			}
			if a, b := rules(sampled.After), rules(whole.After); a != b {
				t.Fatalf("rules\n  sampled %s\n  whole   %s", a, b)
			}
			for k, v := range whole.After.Exact {
				if sampled.After.Exact[k] != v {
					t.Errorf("%s: %v exact, whole %v", k, sampled.After.Exact[k], v)
				}
			}
			n := 0
			for k, s := range sampled.After.Scoring {
				w := whole.After.Scoring[k]
				if w.Rows != w.Of || s.Of != w.Of || s.Rows > s.Of {
					t.Errorf("%s: scored on %d of %d rows, whole run %d of %d", k, s.Rows, s.Of, w.Rows, w.Of)
				}
				if s.Rows < s.Of {
					n++
				}
			}
			if n == 0 || len(sampled.After.Scoring) != len(whole.After.Scoring) {
				t.Errorf("%d of %d boundaries sampled (%d scored whole)", n, len(sampled.After.Scoring), len(whole.After.Scoring))
			}
			t.Logf("%d of %d boundaries scored on 4 rows: the same %d rules", n, len(sampled.After.Scoring), len(whole.After.Rules))
		})
	}
}
