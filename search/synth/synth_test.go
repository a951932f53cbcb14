package synth

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/zflow/zflow/exec/cpu"
	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/semantics"
	"github.com/zflow/zflow/trace"
)

func TestSnap(t *testing.T) {
	for _, tc := range []struct {
		c, want float64
	}{
		{0.06248, 0.0625},             // 1/√256 (an attention multiplier)
		{0.20412, 0.2041241452319315}, // 24**-0.5, correctly rounded
		{7.9999, 8},                   // √64 (an embedding scale)
		{0.2200, 0.22},                // a residual multiplier
		{12.0003, 12},
	} {
		// keep stands for the fit: it accepts what reproduces as well as the
		// true value does
		keep := func(x float64) bool { return math.Abs(x-tc.want) <= 1e-7*math.Abs(tc.want) }
		if got := snap(tc.c, keep); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("snap(%v) = %v, want %v", tc.c, got, tc.want)
		}
	}
	// a keep that refuses the simple numbers leaves c as it is
	if got := snap(0.06248, func(float64) bool { return false }); got != 0.06248 {
		t.Errorf("snap with nothing kept = %v", got)
	}
}

func TestIsIota(t *testing.T) {
	for _, tc := range []struct {
		shape []int
		data  []float32
		want  bool
	}{
		{[]int{1, 4}, []float32{0, 1, 2, 3}, true},
		{[]int{2, 3}, []float32{0, 1, 2, 0, 1, 2}, true},
		{[]int{1, 4}, []float32{2, 3, 4, 5}, true}, // an offset (a learned table read from 2)
		{[]int{1, 4}, []float32{0, 2, 4, 6}, false},
		{[]int{1, 1}, []float32{0}, false},
	} {
		if got := isIota(&val{shape: tc.shape, data: tc.data}); got != tc.want {
			t.Errorf("isIota(%v %v) = %v", tc.shape, tc.data, got)
		}
	}
}

func TestPermuteAndSliceData(t *testing.T) {
	v := &val{shape: []int{2, 3}, data: []float32{0, 1, 2, 3, 4, 5}}
	if got := permuteData(v, []int{1, 0}); !slices.Equal(got, []float32{0, 3, 1, 4, 2, 5}) {
		t.Errorf("transpose = %v", got)
	}
	if got := sliceData(v, 1, 1, 3); !slices.Equal(got, []float32{1, 2, 4, 5}) {
		t.Errorf("slice = %v", got)
	}
	if n := len(permutations(4)); n != 24 {
		t.Errorf("%d permutations of 4", n)
	}
}

// conformance opens a shared conformance trace. Tests over the shared
// traces are named TestShared* and run in `make conformance`
// (ZFLOW_CONFORMANCE=1), not in `make test`, which they would take past
// its time; they skip without ../shared.
func conformance(t *testing.T, name string) (*trace.Trace, string) {
	t.Helper()
	if !strings.HasPrefix(t.Name(), "TestShared") {
		t.Fatalf("%s reads ../shared/conformance: name it TestShared* so that make conformance runs it", t.Name())
	}
	if os.Getenv("ZFLOW_CONFORMANCE") == "" {
		t.Skip("a shared-trace test: make conformance runs it (ZFLOW_CONFORMANCE=1 go test -run '^TestShared' ./search/synth/)")
	}
	path := filepath.Join("..", "..", "..", "shared", "conformance", name)
	if _, err := os.Stat(path); err != nil {
		t.Skipf("%s not present (../shared/conformance is beside the checkout in CI only)", path)
	}
	tr, err := trace.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	return tr, path
}

// TestSharedDiscoverLanguageModels: the program search reads real decoders it
// has no recipe for (Conv1D weights and a fused q/k/v; an embedding and
// residual multiplier and a 1/head_dim attention scale) and the program
// reproduces the trace's output from the request alone.
func TestSharedDiscoverLanguageModels(t *testing.T) {
	for _, tc := range []struct {
		trace string
		want  map[string]any
	}{
		{"gpt2-f32.npz", map[string]any{"rope_layout": "none", "mlp_act": "gelu_tanh", "mlp_glu": false, "attention_causal": true, "attention_scale": 0.0}},
		{"granite-f32.npz", map[string]any{"rope_layout": "half", "mlp_act": "silu", "mlp_glu": true, "attention_scale": 0.0625, "rope_theta": 10000.0}},
		// a 24**-0.5 scale and a logit cap of 5, a sliding window on layer 0, sandwich norms, ×√hidden embeddings
		{"gemma2-f32.npz", map[string]any{"rope_layout": "half", "mlp_act": "gelu_tanh", "mlp_glu": true, "attention_scale": 0.2041241452319315}},
		// ALiBi, a per-head fused q/k/v, residual adds inside the modules
		{"bloom-f32.npz", map[string]any{"rope_layout": "none", "mlp_act": "gelu_tanh", "attention_causal": true}},
		// a shared modulation plus a per-block table, cross-attention to the caption,
		// a sin-cos position table, a final modulation on the raw embedding, learned σ
		{"pixart-f32.npz", map[string]any{"modulation_order": "shift,scale,gate", "final_norm_order": "shift,scale", "gate_fn": "identity",
			"modulation_plus_one": true, "timestep_flip_sin_to_cos": true, "embed_act": "silu", "euler_sign": 1.0}},
		// a frame axis, RoPE on a (t, h, w) grid, q/k RMS norms across heads, f32 modulation
		{"wan-f32.npz", map[string]any{"rope_layout": "interleaved", "rope_theta": 10000.0, "qk_norm": "rms", "modulation_order": "shift,scale,gate"}},
		// a sliding window of 8 given as an explicit mask
		{"mistral-f32.npz", map[string]any{"rope_layout": "half", "mlp_glu": true, "attention_causal": true}},
	} {
		t.Run(tc.trace, func(t *testing.T) {
			tr, path := conformance(t, tc.trace)
			res, err := Discover(context.Background(), tr, path, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if err := res.Doc.Validate(); err != nil {
				t.Fatal(err)
			}
			if !res.Complete() {
				t.Fatalf("incomplete: taken from the trace: %v", res.Opaque)
			}
			// each wanted value is found somewhere (a self-attention's RoPE
			// layout is not a cross-attention's)
			for name, want := range tc.want {
				var got []any
				found := false
				for _, f := range res.Doc.Factors {
					if f.Name == name {
						got = append(got, f.Value)
						found = found || sameValue(f.Value, want)
					}
				}
				if !found {
					t.Errorf("%s: %v, want %v", name, got, want)
				}
			}
			if rel := generate(t, res.Doc, tr); rel > 1e-5 {
				t.Errorf("generated output rel-RMS %.3g > 1e-5", rel)
			}
		})
	}
}

func generate(t *testing.T, doc *semantics.Document, tr *trace.Trace) float64 {
	t.Helper()
	rep, err := program.Reproduce(cpu.New(0), doc, tr)
	if err != nil {
		t.Fatal(err)
	}
	return rep.RelRMS
}

func TestMergeAxes(t *testing.T) {
	for _, tc := range []struct {
		shape, perm, wantShape, wantPerm []int
	}{
		{[]int{2, 3, 4}, []int{0, 1, 2}, []int{24}, []int{0}},
		{[]int{2, 3, 4}, []int{0, 2, 1}, []int{2, 3, 4}, []int{0, 2, 1}},
		{[]int{1, 2, 3, 4, 5}, []int{0, 1, 3, 2, 4}, []int{2, 3, 4, 5}, []int{0, 2, 1, 3}},
		// wan's unpatchify [B, F, h, w, 1, p, q, C] → [B, C, F, 1, h, p, w, q]:
		// B and the 1 go, F and h stay together: rank 8 becomes 5
		{[]int{1, 2, 3, 3, 1, 2, 2, 4}, []int{0, 7, 1, 4, 2, 5, 3, 6}, []int{6, 3, 2, 2, 4}, []int{4, 0, 2, 1, 3}},
	} {
		s, p := mergeAxes(tc.shape, tc.perm)
		if !slices.Equal(s, tc.wantShape) || !slices.Equal(p, tc.wantPerm) {
			t.Errorf("mergeAxes(%v, %v) = %v, %v; want %v, %v", tc.shape, tc.perm, s, p, tc.wantShape, tc.wantPerm)
			continue
		}
		// the same elements move: compare the data
		n := 1
		for _, d := range tc.shape {
			n *= d
		}
		data := make([]float32, n)
		for i := range data {
			data[i] = float32(i)
		}
		want := permuteData(&val{shape: tc.shape, data: data}, tc.perm)
		got := permuteData(&val{shape: s, data: data}, p)
		if !slices.Equal(got, want) {
			t.Errorf("mergeAxes(%v, %v) moves other elements", tc.shape, tc.perm)
		}
	}
}

// TestSharedNotComputedBoundaries: what the program does not compute (bloom's
// attention probabilities, which only a dropout reads) is named in the
// document, not silently left out.
func TestSharedNotComputedBoundaries(t *testing.T) {
	tr, path := conformance(t, "bloom-f32.npz")
	res, err := Discover(context.Background(), tr, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, u := range res.Doc.Undetermined {
		if u.Name == semantics.UndeterminedNotComputed && strings.Contains(u.Reason, "attention_dropout/arg0") {
			found = true
		}
	}
	if !found || res.Doc.NotComputed() == 0 {
		t.Errorf("%d boundaries listed as not computed; the dropout's probabilities not among them", res.Doc.NotComputed())
	}
}

// TestDiscoverProgress: the search's counter counts the calls of step 0
// it has explained, never goes back, and reaches the total, every call
// under the model's; the sampler phase comes after.
func TestDiscoverProgress(t *testing.T) {
	path := filepath.Join("..", "..", "fixtures", "dit", "dit-f32.npz")
	tr, err := trace.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	calls := 0
	for _, c := range tr.Manifest.Calls {
		if c.Step != nil && *c.Step == 0 {
			calls++
		}
	}
	type report struct {
		phase       string
		done, total int
	}
	var got []report
	_, err = Discover(context.Background(), tr, path, Options{Progress: func(phase string, done, total int) {
		got = append(got, report{phase, done, total})
	}})
	if err != nil {
		t.Fatal(err)
	}
	last := report{done: -1}
	counted := 0
	for _, r := range got {
		if r.phase != PhaseCalls {
			continue
		}
		counted++
		if r.total != calls || r.done < last.done || r.done > r.total {
			t.Errorf("report %+v after %+v: want a counter rising to %d", r, last, calls)
		}
		last = r
	}
	if counted != calls+1 || last.done != calls {
		t.Errorf("%d reports ending at %+v, want %d ending at %d/%d", counted, last, calls+1, calls, calls)
	}
	if n := len(got); n == 0 || got[n-1].phase != PhaseSampler {
		t.Errorf("the last phase is not %q: %v", PhaseSampler, got[max(0, n-3):])
	}
}
