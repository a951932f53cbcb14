package synth

import (
	"context"
	"path/filepath"
	"testing"

	"zflow/trace"
)

// TestPlantedControls: on the project's own planted controls
// (fixtures/controls, one semantic factor flipped in each, see its
// README.md) the program search finds the flipped value, decisively
// where the program measures it, and the plain fixture's value where the
// control keeps it. No ../shared needed.
func TestPlantedControls(t *testing.T) {
	for _, tc := range []struct {
		control, factor string
		want            any
	}{
		{"tanh_gate", "gate_fn", "tanh"},
		{"half_rope", "rope_layout", "half"},
		{"image_first", "joint_order", "image_first"},
		{"final_shift_scale", "final_norm_order", "shift,scale"},
		{"euler_minus", "euler_sign", -1},
		{"rms_norm", "norm_kind", "rms"},
		{"patchify", "patch_layout", "c_ph_pw"},
		// unflipped, in every control: the reference's own
		{"tanh_gate", "final_norm_order", "scale,shift"},
		{"euler_minus", "gate_fn", "identity"},
	} {
		t.Run(tc.control+"/"+tc.factor, func(t *testing.T) {
			path := filepath.Join("..", "..", "fixtures", "controls", tc.control+".npz")
			tr, err := trace.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer tr.Close()
			res, err := Discover(context.Background(), tr, path)
			if err != nil {
				t.Fatal(err)
			}
			if err := res.Doc.Validate(); err != nil {
				t.Fatal(err)
			}
			var got []any
			found := false
			for _, f := range res.Doc.Factors {
				if f.Name != tc.factor {
					continue
				}
				got = append(got, f.Value)
				if sameValue(f.Value, tc.want) {
					found = true
					if f.Evidence.Metric != "declared" && !f.Decisive {
						t.Errorf("%s at %s = %v, margin %v: not decisive", f.Name, f.Scope, f.Value, float64(f.Margin))
					}
				}
			}
			if !found {
				t.Errorf("%s: %v, want %v", tc.factor, got, tc.want)
			}
		})
	}
}
