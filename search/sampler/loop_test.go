package sampler

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zflow/zflow/search"
	"github.com/zflow/zflow/semantics"
	"github.com/zflow/zflow/trace"
)

const conformanceDir = "../../../shared/conformance"

func openTrace(t *testing.T, path string) *trace.Trace {
	t.Helper()
	tr, err := trace.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	return tr
}

// samplerTraces: the project's own DiT fixtures, plus the conformance
// diffusion traces when ../shared is present.
func samplerTraces(t *testing.T) []string {
	paths := []string{"../../fixtures/dit/dit-f32.npz", "../../fixtures/dit/dit-bf16.npz"}
	for _, m := range []string{"flux", "qwenimage"} {
		for _, p := range []string{"f32", "bf16"} {
			path := filepath.Join(conformanceDir, m+"-"+p+".npz")
			if _, err := trace.Open(path); err == nil {
				paths = append(paths, path)
			}
		}
	}
	if len(paths) == 2 {
		t.Logf("no conformance traces at %s: testing the fixtures only", conformanceDir)
	}
	return paths
}

func TestFindLoopAndEulerSign(t *testing.T) {
	for _, path := range samplerTraces(t) {
		t.Run(filepath.Base(path), func(t *testing.T) {
			tr := openTrace(t, path)
			l, err := FindLoop(tr)
			if err != nil {
				t.Fatal(err)
			}
			if l.Noise != "noise" || l.Sigmas != "sigmas" || l.Final != "latents" || len(l.Steps) != 3 {
				t.Errorf("loop: %+v", l)
			}
			fs, obj, err := EulerFactors(tr, l)
			if err != nil {
				t.Fatal(err)
			}
			r, err := search.Run(context.Background(), fs, obj, nil, search.Options{})
			if err != nil {
				t.Fatal(err)
			}
			f := r.Factors[0]
			t.Logf("model %s latents %s velocity %s timestep %s (×%.4g σ); euler_sign %v margin %.3g, candidates %+v",
				l.Model, l.Latents, l.Velocity, l.Timestep, l.TimestepRatio, f.Value, float64(f.Margin), f.Candidates)
			if f.Value != 1.0 || !f.Decisive {
				t.Errorf("euler_sign = %v (decisive %v), want +1", f.Value, f.Decisive)
			}
		})
	}
}

func TestTimestepFactors(t *testing.T) {
	// What each trace's model code does (fixtures/dit/README.md and
	// ../shared/conformance/README.md).
	want := map[string]map[string]any{
		"flux":      {"timestep_scale": 1000.0, "timestep_scale_at": "input", "timestep_scale_rounded": true, "timestep_flip_sin_to_cos": true, "timestep_freq_shift": 0.0},
		"qwenimage": {"timestep_scale": 1000.0, "timestep_scale_at": "sinusoid", "timestep_flip_sin_to_cos": true, "timestep_freq_shift": 0.0},
		"dit":       {"timestep_scale": 1000.0, "timestep_scale_at": "input", "timestep_scale_rounded": false, "timestep_flip_sin_to_cos": true, "timestep_freq_shift": 0.0},
	}
	for _, path := range samplerTraces(t) {
		t.Run(filepath.Base(path), func(t *testing.T) {
			tr := openTrace(t, path)
			l, err := FindLoop(tr)
			if err != nil {
				t.Fatal(err)
			}
			fs, obj, err := TimestepFactors(tr, l)
			if err != nil {
				t.Fatal(err)
			}
			r, err := search.Run(context.Background(), fs, obj, nil, search.Options{})
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range r.Factors {
				t.Logf("%-26s %-9v margin %-10.4g decisive %-5v at %s", f.Name, f.Value, float64(f.Margin), f.Decisive, f.Evidence.Boundary)
			}
			if len(r.Undetermined) > 0 {
				t.Errorf("undetermined: %+v", r.Undetermined)
			}
			model := strings.SplitN(filepath.Base(path), "-", 2)[0]
			if want[model] == nil {
				t.Fatalf("no expectations for %s", model)
			}
			// Scale, layout and shift show in every trace. Where the multiply
			// happens and whether it is rounded show only through rounding,
			// which an f32 or bf16-output trace may hide: there the search must
			// not claim a winner, and the truth must score as well as it.
			mustDecide := map[string]bool{"timestep_scale": true, "timestep_flip_sin_to_cos": true, "timestep_freq_shift": true}
			for _, f := range r.Factors {
				w, ok := want[model][f.Name]
				switch {
				case !ok:
				case f.Decisive && f.Value != w:
					t.Errorf("%s = %v decisively, want %v", f.Name, f.Value, w)
				case !f.Decisive && mustDecide[f.Name]:
					t.Errorf("%s not decided (margin %v)", f.Name, float64(f.Margin))
				case !f.Decisive:
					for _, c := range f.Candidates {
						if c.Value == w && c.Score > 2*f.Candidates[indexOf(f.Candidates, f.Value)].Score {
							t.Errorf("%s: undecided, yet the truth %v scores %v, worse than the margin allows", f.Name, w, c.Score)
						}
					}
				}
			}
		})
	}
}

func indexOf(cs []semantics.Candidate, v any) int {
	for i, c := range cs {
		if c.Value == v {
			return i
		}
	}
	return -1
}
