package plan

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/cpu"
	"github.com/zflow/zflow/precision"
	"github.com/zflow/zflow/search/synth"
	"github.com/zflow/zflow/semantics"
	"github.com/zflow/zflow/trace"
)

// candidatePlans is the document's plan and, for each op class, the plan
// with each of the class's candidates put first: the plans a search runs,
// in the order it might.
func candidatePlans(doc *semantics.Document) []semantics.Precision {
	start := doc.Precision
	Prepare(&semantics.Document{Structure: doc.Structure, Precision: start})
	out := []semantics.Precision{start, {Status: "placeholder", Activations: start.Activations, RopeTable: start.RopeTable}}
	for _, class := range Classes() {
		for _, c := range classCandidates(class, start.Activations) {
			p := start
			p.Rules = append(append([]semantics.PrecisionRule(nil), c.Rules...), start.Rules...)
			if c.Table != nil {
				t := *c.Table
				p.RopeTable = &t
			}
			out = append(out, p)
		}
	}
	return out
}

// TestEvaluatorMatchesReference: the lazy evaluator's records are the
// plain interpreter run's (referenceRun), record by record, for every
// plan a search tries, run one after the other on one evaluator (so what
// it keeps from run to run is tested too), teacher forced and free
// running, with the default cache and with one too small to keep
// anything.
func TestEvaluatorMatchesReference(t *testing.T) {
	cases := []planCase{ditCase(), {"dit-f32", "../../fixtures/dit/dit-f32.npz", "../../semantics/testdata/dit-f32.json"}}
	{
		for _, m := range []string{"llama", "flux"} {
			p := filepath.Join(conformanceDir, m+"-bf16.npz")
			cases = append(cases, planCase{m + "-bf16", p, "../../semantics/testdata/" + m + "-bf16.json"})
		}
	}
	for _, c := range cases {
		for _, mode := range []struct {
			name  string
			opt   Options
			plans int // how many of the candidate plans (0: all)
		}{
			{"teacher forced", Options{}, 0},
			{"teacher forced, no cache", Options{CacheBytes: 1 << 10}, 12},
			{"free running", Options{FreeRunning: true}, 6},
			{"one step", Options{Steps: 1}, 6},
		} {
			t.Run(c.name+"/"+mode.name, func(t *testing.T) {
				if c.name != "dit-bf16" && c.name != "dit-f32" {
					skipWithoutShared(t)
				}
				tr, doc := load(t, c)
				Prepare(doc)
				e, err := NewEvaluator(cpu.New(1), tr, doc, mode.opt)
				if err != nil {
					t.Fatal(err)
				}
				defer e.Close()
				plans := candidatePlans(doc)
				if mode.plans > 0 {
					plans = plans[:min(len(plans), mode.plans)]
				}
				compared := 0
				for i, pr := range plans {
					got, gerr := e.Run(pr)
					want, werr := referenceRun(cpu.New(1), tr, doc, pr, mode.opt.FreeRunning, mode.opt.Steps)
					if (gerr != nil) != (werr != nil) {
						t.Fatalf("plan %d: error %v, the reference's %v", i, gerr, werr)
					}
					if gerr != nil {
						if !errors.Is(gerr, exec.ErrUnsupported) {
							t.Logf("plan %d: both refuse it: %v", i, gerr)
						}
						continue
					}
					if d := sameRecords(got, want); d != "" {
						t.Fatalf("plan %d (%+v): %s", i, pr.Rules, d)
					}
					compared += len(got)
				}
				if compared == 0 {
					t.Fatal("no record compared")
				}
				t.Logf("%d plans, %d records equal to the reference's", len(plans), compared)
			})
		}
	}
}

func skipWithoutShared(t *testing.T) {
	t.Helper()
	conformanceCases(t) // skips without ../shared
}

// TestSampledRows: a sampled run compares, at every boundary of a linear
// or an attention that it samples, exactly the reference run's values of
// those rows (the op run on the rows alone gives the same bits), and the
// boundaries it does not sample as the reference does.
func TestSampledRows(t *testing.T) {
	tr, doc := load(t, ditCase())
	Prepare(doc)
	e, err := NewEvaluator(cpu.New(1), tr, doc, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	for i, pr := range candidatePlans(doc)[:8] {
		got, err := e.run(pr, runOpts{sample: 4})
		if err != nil {
			t.Fatal(err)
		}
		want, err := referenceRun(cpu.New(1), tr, doc, pr, false, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(want) {
			t.Fatalf("plan %d: %d records, want %d", i, len(got), len(want))
		}
		sampled := map[string]int{}
		for j := range got {
			g, w := &got[j], &want[j]
			if !g.Sampled() {
				if d := sameRecords(got[j:j+1], want[j:j+1]); d != "" {
					t.Fatalf("plan %d: %s", i, d)
				}
				continue
			}
			sampled[g.OpClass]++
			rowLen := g.Shape[len(g.Shape)-1]
			if g.OfRows != len(w.Ref)/rowLen || g.Rows != len(g.rows) || g.N != g.Rows*rowLen || g.Rows >= g.OfRows {
				t.Fatalf("plan %d: %s: %d of %d rows, N %d (row %d)", i, g.Key, g.Rows, g.OfRows, g.N, rowLen)
			}
			var ours, ref []float32
			for _, r := range g.rows {
				ours = append(ours, w.Ours[r*rowLen:(r+1)*rowLen]...)
				ref = append(ref, w.Ref[r*rowLen:(r+1)*rowLen]...)
			}
			c := compareValues(ours, ref, w.OursFormat, w.Format)
			if g.Exact != c.exact || g.SumD2 != c.s.D2 || g.SumR2 != c.s.R2 {
				t.Fatalf("plan %d: %s: sampled rows %d exact, sums %g %g; the reference's same rows %d, %g %g",
					i, g.Key, g.Exact, g.SumD2, g.SumR2, c.exact, c.s.D2, c.s.R2)
			}
		}
		if sampled["linear"] == 0 || sampled["attention"] == 0 {
			t.Fatalf("plan %d: sampled boundaries by class %v: want linear and attention", i, sampled)
		}
	}
}

// TestCompareValues: the counts and sums of a comparison, by hand.
func TestCompareValues(t *testing.T) {
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	fmin := float32(-math.MaxFloat32)
	for _, tc := range []struct {
		name               string
		ours, ref          []float32
		of, f              precision.Format
		exact              int
		sd, sr             float64
		masked, mismatched int
	}{
		{"equal f32", []float32{1, 2, -0}, []float32{1, 2, 0}, precision.F32, precision.F32, 3, 0, 5, 0, 0},
		{"one off", []float32{1, 2.5}, []float32{1, 2}, precision.F32, precision.F32, 1, 0.25, 5, 0, 0},
		// ours kept in f32 where the reference stores bf16: a consumer reads
		// ours unrounded, so only the stored value itself is exact
		{"f32 against bf16 is not rounded", []float32{1 + 1.0/512, 1 + 1.0/64, 1}, []float32{1, 1, 1}, precision.F32, precision.BF16, 1,
			1.0/512/512 + 1.0/64/64, 3, 0, 0},
		{"f16 against bf16 rounds ours", []float32{1 + 1.0/512, 1 + 1.0/64}, []float32{1, 1}, precision.F16, precision.BF16, 1,
			1.0/512/512 + 1.0/64/64, 2, 0, 0},
		{"NaN never exact, both NaN add nothing", []float32{nan, 1}, []float32{nan, 1}, precision.F32, precision.F32, 1, 0, 1, 0, 0},
		{"a NaN against a number", []float32{nan}, []float32{1}, precision.F32, precision.F32, 0, 0, 0, 0, 1},
		{"same infinity", []float32{inf}, []float32{inf}, precision.F32, precision.F32, 1, 0, 0, 1, 0},
		// an attention bias: masks compared apart, the wrong small entry shows
		{"masks apart", []float32{fmin, 0, fmin}, []float32{fmin, 0.25, -inf}, precision.F32, precision.F32, 1, 0.0625, 0.0625, 2, 0},
		{"a mask against a number", []float32{fmin, 1}, []float32{0, 1}, precision.F32, precision.F32, 1, 0, 1, 0, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := compareValues(tc.ours, tc.ref, tc.of, tc.f)
			if c.n != len(tc.ref) || c.exact != tc.exact || c.s.D2 != tc.sd || c.s.R2 != tc.sr ||
				c.s.Masked != tc.masked || c.s.Mismatched != tc.mismatched {
				t.Errorf("n %d exact %d sums %+v, want %d %d %g %g masked %d mismatched %d", c.n, c.exact, c.s,
					len(tc.ref), tc.exact, tc.sd, tc.sr, tc.masked, tc.mismatched)
			}
			want := 0
			for i := range tc.ref {
				if exactIn(tc.of, tc.f, tc.ours[i], tc.ref[i]) {
					want++
				}
			}
			if c.exact != want {
				t.Errorf("exact %d, exactIn says %d", c.exact, want)
			}
		})
	}
}

// exactIn is compareValues' exactness of one pair, spelled plainly: equal
// floats where either side is f32 (or wider), else equal once rounded to f.
func exactIn(of, f precision.Format, o, r float32) bool {
	if of == precision.F32 || f == precision.F32 || of == f {
		return o == r
	}
	return precision.BitExact(f, o, r)
}

func inf64() float64 { return math.Inf(1) }

// TestSpreadBlocks: blocks of the sample, in order, apart, inside the rows.
func TestSpreadBlocks(t *testing.T) {
	for _, tc := range []struct{ n, k, blocks, rows int }{
		{4608, 128, 8, 128}, {1152, 128, 8, 128}, {257, 128, 8, 128}, {16, 4, 4, 4}, {100, 8, 4, 8}, {9, 1, 1, 1},
	} {
		t.Run(fmt.Sprint(tc.n, "/", tc.k), func(t *testing.T) {
			bs := spreadBlocks(tc.n, tc.k)
			rows, last := 0, -1
			for _, b := range bs {
				if b[0] <= last || b[1] <= b[0] || b[1] > tc.n {
					t.Fatalf("blocks %v", bs)
				}
				last = b[1] - 1
				rows += b[1] - b[0]
			}
			if len(bs) != tc.blocks || rows != tc.rows {
				t.Errorf("%d blocks of %d rows (%v), want %d, %d", len(bs), rows, bs, tc.blocks, tc.rows)
			}
		})
	}
}

// TestEvaluatorMatchesReferenceOnPrograms: the same on version 2
// documents (the program search's: gathers, experts, concatenations of
// mixed formats, ops the recipes never build), on the planted constructs
// and, with ../shared, language models of the conformance set.
func TestEvaluatorMatchesReferenceOnPrograms(t *testing.T) {
	traces := []string{"../../fixtures/constructs/lm.npz", "../../fixtures/constructs/dit.npz"}
	if _, err := os.Stat(conformanceDir); err == nil {
		for _, m := range []string{"gpt2", "bloom", "gemma2"} {
			traces = append(traces, filepath.Join(conformanceDir, m+"-bf16.npz"))
		}
	}
	for _, path := range traces {
		t.Run(filepath.Base(path), func(t *testing.T) {
			tr, err := trace.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer tr.Close()
			res, err := synth.Discover(context.Background(), tr, path, synth.Options{})
			if err != nil {
				t.Fatal(err)
			}
			doc := res.Doc
			Prepare(doc)
			e, err := NewEvaluator(cpu.New(1), tr, doc, Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			compared := 0
			for i, pr := range candidatePlans(doc) {
				got, gerr := e.Run(pr)
				want, werr := referenceRun(cpu.New(1), tr, doc, pr, false, 0)
				if (gerr != nil) != (werr != nil) {
					t.Fatalf("plan %d: error %v, the reference's %v", i, gerr, werr)
				}
				if gerr != nil {
					continue
				}
				if d := sameRecords(got, want); d != "" {
					t.Fatalf("plan %d (%+v): %s", i, pr.Rules, d)
				}
				compared += len(got)
			}
			if compared == 0 {
				t.Fatal("no record compared")
			}
			t.Logf("%d records equal to the reference's", compared)
		})
	}
}

// TestCompareValuesChunked: a tensor long enough to be compared on every
// core counts what BitExact counts and sums chunk by chunk, in order.
func TestCompareValuesChunked(t *testing.T) {
	n := 5*compareChunk + 7
	ours, ref := make([]float32, n), make([]float32, n)
	for i := range ref {
		ref[i] = precision.RoundBF16(float32(math.Sin(float64(i))))
		ours[i] = ref[i]
		if i%3 == 0 {
			ours[i] = float32(math.Sin(float64(i)))
		}
	}
	ours[17], ref[17] = float32(math.NaN()), float32(math.NaN()) // adds nothing, and is not exact
	c := compareValues(ours, ref, precision.F32, precision.BF16)
	exact := 0
	var sd, sr float64
	for lo := 0; lo < n; lo += compareChunk {
		p := compareRun(ours[lo:min(n, lo+compareChunk)], ref[lo:min(n, lo+compareChunk)], precision.F32, precision.BF16)
		sd, sr = sd+p.s.D2, sr+p.s.R2
	}
	for i := range ref {
		if exactIn(precision.F32, precision.BF16, ours[i], ref[i]) {
			exact++
		}
	}
	if c.n != n || c.exact != exact || c.s.D2 != sd || c.s.R2 != sr || math.IsInf(sd, 0) || sd == 0 {
		t.Errorf("n %d exact %d sums %g %g; want %d %d %g %g", c.n, c.exact, c.s.D2, c.s.R2, n, exact, sd, sr)
	}
}
