package discover

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zflow/zflow/exec/cpu"
	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/precision"
	"github.com/zflow/zflow/semantics"
	"github.com/zflow/zflow/trace"
)

// conformanceDir holds the traces of real third-party models (../shared).
const conformanceDir = "../../../shared/conformance"

// tcase is one trace, the hand-written document of its model and the
// generation gate.
type tcase struct {
	name  string
	trace string
	hand  string
	tol   float64
}

func cases(t *testing.T) []tcase {
	t.Helper()
	var out []tcase
	add := func(model, dtype, path string) {
		tol := 1e-5
		if dtype == "bf16" {
			tol = 2e-2
		}
		out = append(out, tcase{model + "-" + dtype, path, "../../semantics/testdata/" + model + "-" + dtype + ".json", tol})
	}
	for _, p := range []string{"f32", "bf16"} {
		add("dit", p, "../../fixtures/dit/dit-"+p+".npz")
	}
	if _, err := os.Stat(conformanceDir); err != nil {
		t.Logf("conformance traces not available (%s): testing the DiT fixtures only", conformanceDir)
		return out
	}
	for _, m := range []string{"flux", "qwenimage", "llama"} {
		for _, p := range []string{"f32", "bf16"} {
			add(m, p, filepath.Join(conformanceDir, m+"-"+p+".npz"))
		}
	}
	return out
}

// discoverDoc discovers a trace's document and returns it as a reader of
// the JSON sees it (validated, values in JSON types).
func discoverDoc(t *testing.T, tr *trace.Trace) (*semantics.Document, *Result) {
	t.Helper()
	r, err := Run(t.Context(), tr, Options{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(r.Doc)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := semantics.Parse(b)
	if err != nil {
		t.Fatalf("the discovered document does not read back: %v", err)
	}
	return doc, r
}

// generate runs doc on the trace's own request and returns (rel-RMS,
// fraction bit-exact) of the result against the trace's output.
func generate(t *testing.T, tr *trace.Trace, doc *semantics.Document) (float64, float64) {
	t.Helper()
	b := cpu.New(0)
	r, err := program.NewRunner(b, doc, program.TraceParams(tr), program.TraceInputs(tr))
	if err != nil {
		t.Fatalf("building the discovered document's program: %v", err)
	}
	defer r.Close()
	out, err := r.Run(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Free(out)
	ours, err := b.Download(out)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := tr.Tensor(tr.Manifest.Outputs[doc.Structure.Outputs[0].Name])
	if err != nil {
		t.Fatal(err)
	}
	rv, err := ref.Float32()
	if err != nil {
		t.Fatal(err)
	}
	rel, err := precision.RelRMS(out.Format(), ours, rv)
	if err != nil {
		t.Fatal(err)
	}
	exact, err := precision.ExactFraction(out.Format(), ours, rv)
	if err != nil {
		t.Fatal(err)
	}
	return rel, exact
}

// equalValue compares factor values as JSON reads them (lists of numbers
// included).
func equalValue(a, b any) bool {
	if x, err := semantics.Ints(a); err == nil {
		y, err := semantics.Ints(b)
		return err == nil && fmt.Sprint(x) == fmt.Sprint(y)
	}
	return fmt.Sprint(a) == fmt.Sprint(b)
}

// compareHand checks every factor of the hand-written document against
// the discovered one at every address both cover: a decisive factor must
// hold the hand value; one that is not must score the hand value within
// the decisive margin of its winner. Every hand factor must be covered
// somewhere. It returns one row per hand factor for the log.
func compareHand(t testing.TB, hand, disc *semantics.Document) []string {
	t.Helper()
	var rows []string
	for _, hf := range hand.Factors {
		seen := false
		for _, a := range disc.Structure.Addresses() {
			if !semantics.MatchScope(hf.Scope, a) {
				continue
			}
			df, err := disc.Lookup(hf.Name, a)
			if err != nil {
				continue
			}
			if !seen {
				rows = append(rows, fmt.Sprintf("%-26s %-16s hand %-18v found %-18v margin %-8s decisive %v", hf.Name, df.Scope, jsonValue(hf.Value), jsonValue(df.Value), marginText(float64(df.Margin)), df.Decisive))
			}
			seen = true
			switch {
			case df.Decisive && !equalValue(df.Value, hf.Value):
				t.Errorf("%s at %s: found %v decisively (margin %v), the hand document says %v", hf.Name, a, jsonValue(df.Value), float64(df.Margin), jsonValue(hf.Value))
			case !df.Decisive && !equalValue(df.Value, hf.Value):
				win, tru := math.Inf(1), math.Inf(1)
				for _, c := range df.Candidates {
					if equalValue(c.Value, df.Value) {
						win = c.Score
					}
					if equalValue(c.Value, hf.Value) {
						tru = c.Score
					}
				}
				if !(tru <= 2*win) {
					t.Errorf("%s at %s: not decisive, found %v (%.3g), yet the hand value %v scores %.3g", hf.Name, a, jsonValue(df.Value), win, jsonValue(hf.Value), tru)
				}
			}
		}
		if !seen {
			t.Errorf("the discovered document has no %s where the hand one has it (%s)", hf.Name, hf.Scope)
		}
	}
	return rows
}

func jsonValue(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func marginText(m float64) string {
	if math.IsInf(m, 1) {
		return "inf"
	}
	return fmt.Sprintf("%.3g", m)
}

// TestDiscoverMatchesHandAndGenerates is issue 6's proof: on the DiT
// fixtures and every conformance trace, discovery finds what the READMEs
// (and the hand-written documents) say, and the discovered document
// generates the trace's output within the gate.
func TestDiscoverMatchesHandAndGenerates(t *testing.T) {
	for _, c := range cases(t) {
		t.Run(c.name, func(t *testing.T) {
			tr, err := trace.Open(c.trace)
			if err != nil {
				t.Fatal(err)
			}
			defer tr.Close()
			start := time.Now()
			doc, res := discoverDoc(t, tr)
			took := time.Since(start)
			hand, err := semantics.Read(c.hand)
			if err != nil {
				t.Fatal(err)
			}
			for _, row := range compareHand(t, hand, doc) {
				t.Log(row)
			}
			for _, u := range doc.Undetermined {
				t.Errorf("undetermined %s at %s: %s", u.Name, u.Scope, u.Reason)
			}
			if doc.Source.Trace != c.trace || len(doc.Source.SHA256) != 64 || doc.Source.Producer["written_by"] != Producer {
				t.Errorf("source %+v", doc.Source)
			}
			rel, exact := generate(t, tr, doc)
			var phases []string
			for _, p := range res.Phases {
				phases = append(phases, fmt.Sprintf("%s %.0fms/%d evals", p.Name, p.Duration.Seconds()*1000, p.Evaluations))
			}
			t.Logf("%s: discovered in %.2fs (%s); generate from it: rel-RMS %.3g (gate %.0e), %.2f%% bit-exact",
				c.name, took.Seconds(), strings.Join(phases, ", "), rel, c.tol, 100*exact)
			if !(rel <= c.tol) {
				t.Errorf("generate from the discovered document: rel-RMS %.3g > %.0e", rel, c.tol)
			}
		})
	}
}
