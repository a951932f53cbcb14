package factors

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zflow/zflow/search"
	"github.com/zflow/zflow/search/structure"
	"github.com/zflow/zflow/trace"
)

const conformanceDir = "../../../shared/conformance"

// truth is what the READMEs say each model's blocks do.
var truth = map[string]map[string]any{
	"flux": {"rope_layout": "interleaved", "joint_order": "text_first", "attention_causal": false,
		"modulation_order": "shift,scale,gate", "modulation_plus_one": true, "modulation_act": "silu",
		"gate_fn": "identity", "mlp_act": "gelu_tanh", "parallel_order": "attention_first", "qk_norm": "rms", "attention_scale": 0.0},
	"qwenimage": {"rope_layout": "interleaved", "joint_order": "text_first", "attention_causal": false,
		"modulation_order": "shift,scale,gate", "modulation_plus_one": true, "modulation_act": "silu",
		"gate_fn": "identity", "mlp_act": "gelu_tanh", "qk_norm": "rms", "attention_scale": 0.0},
	"llama": {"rope_layout": "half", "attention_causal": true, "mlp_act": "silu", "mlp_glu": true, "attention_scale": 0.0},
	"dit": {"rope_layout": "interleaved", "joint_order": "text_first", "attention_causal": false,
		"modulation_order": "shift,scale,gate", "modulation_plus_one": true, "modulation_act": "silu",
		"gate_fn": "identity", "mlp_act": "gelu_tanh", "qk_norm": "rms", "attention_scale": 0.0},
}

// mustDecide: factors every trace shows clearly wherever they apply.
var mustDecide = map[string]bool{"rope_layout": true, "attention_causal": true, "attention_scale": true, "modulation_order": true,
	"modulation_plus_one": true, "gate_fn": true, "mlp_glu": true, "qk_norm": true, "parallel_order": true}

func traces(t *testing.T) []string {
	paths := []string{"../../fixtures/dit/dit-f32.npz", "../../fixtures/dit/dit-bf16.npz"}
	if _, err := os.Stat(conformanceDir); err != nil {
		t.Logf("conformance traces not available (%s): testing the DiT fixtures only", conformanceDir)
		return paths
	}
	for _, m := range []string{"flux", "qwenimage", "llama"} {
		for _, p := range []string{"f32", "bf16"} {
			paths = append(paths, filepath.Join(conformanceDir, m+"-"+p+".npz"))
		}
	}
	return paths
}

// TestBlockFactors discovers each trace's structure, then searches every
// block's factors and checks them against the READMEs: a decisive winner
// must be the truth; a factor every trace shows must be decisive; an
// undecided one must score the truth within the margin of its winner.
func TestBlockFactors(t *testing.T) {
	for _, path := range traces(t) {
		model := strings.SplitN(filepath.Base(path), "-", 2)[0]
		t.Run(filepath.Base(path), func(t *testing.T) {
			tr, err := trace.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer tr.Close()
			st, _, err := structure.Discover(tr)
			if err != nil {
				t.Fatal(err)
			}
			for i := range st.Blocks {
				fs, obj, err := Block(tr, &st, i)
				if err != nil {
					t.Fatal(err)
				}
				r, err := search.Run(context.Background(), fs, obj, nil, search.Options{})
				if err != nil {
					t.Fatal(err)
				}
				for _, f := range r.Factors {
					t.Logf("block %d %-20s %-18v margin %-9.3g decisive %-5v at %s", i, f.Name, f.Value, float64(f.Margin), f.Decisive, f.Evidence.Boundary)
					w, ok := truth[model][f.Name]
					switch {
					case !ok:
					case f.Decisive && f.Value != w:
						t.Errorf("block %d: %s = %v decisively, want %v", i, f.Name, f.Value, w)
					case !f.Decisive && mustDecide[f.Name]:
						t.Errorf("block %d: %s not decided (margin %v)", i, f.Name, float64(f.Margin))
					case !f.Decisive:
						var win, tru float64
						for _, c := range f.Candidates {
							if c.Value == f.Value {
								win = c.Score
							}
							if c.Value == w {
								tru = c.Score
							}
						}
						if tru > 2*win {
							t.Errorf("block %d: %s undecided, yet the truth %v scores %v against the winner's %v", i, f.Name, w, tru, win)
						}
					}
				}
				for _, u := range r.Undetermined {
					t.Errorf("block %d: undetermined %s: %s", i, u.Name, u.Reason)
				}
			}
		})
	}
}

// TestPlantedFaults: the fault fixtures (fixtures/faults/README.md) each
// change one thing in the DiT reference; the block factors must find the
// flip, decisively, in every block.
func TestPlantedFaults(t *testing.T) {
	want := map[string]map[string]any{
		"ref":              {"modulation_order": "shift,scale,gate", "modulation_plus_one": true, "mlp_act": "gelu_tanh", "gate_fn": "identity"},
		"swap_shift_scale": {"modulation_order": "scale,shift,gate", "modulation_plus_one": true},
		"wrong_activation": {"mlp_act": "silu", "modulation_order": "shift,scale,gate"},
		"no_norm_offset":   {"modulation_plus_one": false, "modulation_order": "shift,scale,gate"},
	}
	for name, w := range want {
		t.Run(name, func(t *testing.T) {
			tr, err := trace.Open("../../fixtures/faults/" + name + ".npz")
			if err != nil {
				t.Fatal(err)
			}
			defer tr.Close()
			st, _, err := structure.Discover(tr)
			if err != nil {
				t.Fatal(err)
			}
			for i := range st.Blocks {
				fs, obj, err := Block(tr, &st, i)
				if err != nil {
					t.Fatal(err)
				}
				r, err := search.Run(context.Background(), fs, obj, nil, search.Options{})
				if err != nil {
					t.Fatal(err)
				}
				for _, f := range r.Factors {
					if v, ok := w[f.Name]; ok && (f.Value != v || !f.Decisive) {
						t.Errorf("block %d: %s = %v (decisive %v, margin %.3g), want %v", i, f.Name, f.Value, f.Decisive, float64(f.Margin), v)
					}
				}
			}
		})
	}
}

// TestModelFactors: the final norm's order and plus-one, the conditioning
// activation, and (where streams are joined before the blocks) the joint
// order.
func TestModelFactors(t *testing.T) {
	want := map[string]map[string]any{
		"flux": {"final_norm_order": "scale,shift", "modulation_plus_one": true, "embed_act": "silu",
			PooledAct: "silu", "modulation_act": "silu", "patch_layout": "none"},
		"qwenimage": {"final_norm_order": "scale,shift", "modulation_plus_one": true, "embed_act": "silu",
			"modulation_act": "silu", "patch_layout": "none"},
		"dit": {"final_norm_order": "scale,shift", "modulation_plus_one": true, "embed_act": "silu", "joint_order": "text_first",
			"modulation_act": "silu", "patch_layout": "none"},
		"llama": {},
	}
	for _, path := range traces(t) {
		model := strings.SplitN(filepath.Base(path), "-", 2)[0]
		t.Run(filepath.Base(path), func(t *testing.T) {
			tr, err := trace.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer tr.Close()
			st, _, err := structure.Discover(tr)
			if err != nil {
				t.Fatal(err)
			}
			fs, obj, err := Model(tr, &st)
			if err != nil {
				t.Fatal(err)
			}
			r, err := search.Run(context.Background(), fs, obj, nil, search.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if len(r.Factors) != len(want[model]) {
				t.Errorf("%d factors, want %d", len(r.Factors), len(want[model]))
			}
			for _, f := range r.Factors {
				t.Logf("%-20s %-12v margin %-9.3g decisive %-5v at %s", f.Name, f.Value, float64(f.Margin), f.Decisive, f.Evidence.Boundary)
				if w := want[model][f.Name]; f.Value != w || !f.Decisive {
					t.Errorf("%s = %v (decisive %v), want %v", f.Name, f.Value, f.Decisive, w)
				}
			}
		})
	}
}
