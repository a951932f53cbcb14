package discover

import (
	"path/filepath"
	"testing"

	"github.com/zflow/zflow/semantics"
	"github.com/zflow/zflow/trace"
)

// flip is one planted control's changed factors (fixtures/controls/README.md):
// name → address → value.
type flip map[string]map[string]any

// controls are the planted controls and what each flips.
var controls = map[string]flip{
	"tanh_gate":         {"gate_fn": {"blocks.0": "tanh", "blocks.1": "tanh"}},
	"half_rope":         {"rope_layout": {"positions": "half"}, "rope_axes": {"positions": []any{16.0}}},
	"image_first":       {"joint_order": {"model": "image_first"}},
	"final_shift_scale": {"final_norm_order": {"final": "shift,scale"}},
	"euler_minus":       {"euler_sign": {"sampler": -1.0}},
	"rms_norm":          {"norm_kind": {"blocks.0.norm1": "rms", "blocks.0.norm2": "rms", "blocks.1.norm1": "rms", "blocks.1.norm2": "rms", "final.norm": "layer"}},
	"patchify":          {"patch_layout": {"embed.image": "c_ph_pw"}},
}

// TestPlantedControls: each control (the DiT reference written with one
// factor flipped) is discovered; the flipped factor must hold its new value
// decisively, every other factor of the reference's hand-written document
// must be found as there (decisive factors equal, the others within
// margin), and the discovered document must generate the control's output.
func TestPlantedControls(t *testing.T) {
	hand, err := semantics.Read("../../semantics/testdata/dit-f32.json")
	if err != nil {
		t.Fatal(err)
	}
	for name, fl := range controls {
		t.Run(name, func(t *testing.T) {
			tr, err := trace.Open(filepath.Join("../../fixtures/controls", name+".npz"))
			if err != nil {
				t.Fatal(err)
			}
			defer tr.Close()
			doc, _ := discoverDoc(t, tr)
			for _, u := range doc.Undetermined {
				t.Errorf("undetermined %s at %s: %s", u.Name, u.Scope, u.Reason)
			}
			for factor, at := range fl {
				for addr, want := range at {
					f, err := doc.Lookup(factor, addr)
					if err != nil {
						t.Errorf("%s at %s: %v", factor, addr, err)
						continue
					}
					t.Logf("%s at %s (scope %s): %s, margin %s, decisive %v", factor, addr, f.Scope, jsonValue(f.Value), marginText(float64(f.Margin)), f.Decisive)
					if !equalValue(f.Value, want) || !f.Decisive && len(f.Candidates) > 1 {
						t.Errorf("%s at %s: %s (decisive %v, margin %v), want %s decisively", factor, addr, jsonValue(f.Value), f.Decisive, float64(f.Margin), jsonValue(want))
					}
				}
			}
			// Everything else is the reference's.
			rest := &semantics.Document{Structure: hand.Structure}
			for _, hf := range hand.Factors {
				if _, flipped := fl[hf.Name]; !flipped {
					rest.Factors = append(rest.Factors, hf)
				}
			}
			compareHand(t, rest, doc)
			rel, exact := generate(t, tr, doc)
			t.Logf("%s: generate from the discovered document: rel-RMS %.3g, %.2f%% bit-exact", name, rel, 100*exact)
			if !(rel <= 1e-5) {
				t.Errorf("rel-RMS %.3g > 1e-5", rel)
			}
		})
	}
}
