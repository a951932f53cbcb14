package discover

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/zflow/zflow/search"
	"github.com/zflow/zflow/semantics"
)

// measured is an entry as a search reports it: candidate scores in order,
// the winner the lowest.
func measured(name, addr string, vals []any, scores ...float64) entry {
	f := semantics.Factor{Name: name, Scope: addr, Evidence: semantics.Evidence{Boundary: addr + "/out", Metric: "rel_rms"}}
	win := 0
	for i, s := range scores {
		f.Candidates = append(f.Candidates, semantics.Candidate{Value: vals[i], Score: s})
		if s < scores[win] {
			win = i
		}
	}
	f.Value = vals[win]
	e := entry{addr: addr, f: f}
	f.Margin = semantics.Margin(e.marginAt(f.Value))
	f.Decisive = float64(f.Margin) >= 2
	e.f = f
	return e
}

func TestMerge(t *testing.T) {
	gates := []any{"identity", "tanh", "sigmoid"}
	eps := []any{1e-6, 1e-5}
	st := &semantics.Structure{}
	for _, c := range []struct {
		name    string
		entries []entry
		want    string // "name scope value margin decisive" per factor
		und     int
	}{
		{"blocks agree: one blocks.* factor with the smallest margin", []entry{
			measured("gate_fn", "blocks.0", gates, 1e-7, 1e-2, 1e-1),
			measured("gate_fn", "blocks.1", gates, 1e-6, 1e-3, 1e-1),
		}, "gate_fn blocks.* identity 1e+03 true", 0},
		{"blocks disagree decisively: per-block factors", []entry{
			measured("gate_fn", "blocks.0", gates, 1e-7, 1e-2, 1e-1),
			measured("gate_fn", "blocks.1", gates, 1e-2, 1e-7, 1e-1),
		}, "gate_fn blocks.0 identity 1e+05 true|gate_fn blocks.1 tanh 1e+05 true", 0},
		{"an undecided block that scores the decided value within the margin joins it", []entry{
			measured("norm_eps", "blocks.0.norm1", eps, 1e-8, 1e-6),
			measured("norm_eps", "blocks.1.norm1", eps, 2e-3, 1.5e-3),
		}, "norm_eps blocks.*.norm1 1e-06 0.75 false", 0},
		{"roles of two kinds that agree: the shortest suffix", []entry{
			measured("norm_eps", "blocks.0.image.q_norm", eps, 1e-8, 1e-6),
			measured("norm_eps", "blocks.0.text.q_norm", eps, 1e-8, 1e-6),
			measured("norm_eps", "blocks.1.q_norm", eps, 1e-8, 1e-5),
		}, "norm_eps blocks.*.q_norm 1e-06 100 true", 0},
		{"roles of two kinds that disagree: no glob overlaps another", []entry{
			measured("norm_eps", "blocks.0.image.q_norm", eps, 1e-8, 1e-6),
			measured("norm_eps", "blocks.0.text.q_norm", eps, 1e-8, 1e-6),
			measured("norm_eps", "blocks.1.q_norm", eps, 1e-5, 1e-8),
		}, "norm_eps blocks.*.image.q_norm 1e-06 100 true|norm_eps blocks.*.text.q_norm 1e-06 100 true|norm_eps blocks.1.q_norm 1e-05 1e+03 true", 0},
		{"components that agree: *", []entry{
			measured("norm_eps", "blocks.0.norm1", eps, 1e-8, 1e-6),
			measured("norm_eps", "final.norm", eps, 1e-8, 1e-5),
		}, "norm_eps * 1e-06 100 true", 0},
		{"measurements of one address that disagree: undetermined", []entry{
			{addr: "model", from: "blocks.0", f: measured("joint_order", "model", []any{"text_first", "image_first"}, 1e-7, 1e-2).f},
			{addr: "model", from: "blocks.1", f: measured("joint_order", "model", []any{"text_first", "image_first"}, 1e-2, 1e-8).f},
		}, "joint_order model image_first 1e-05 false", 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			fs, und := merge(c.entries, st, search.Options{}, nil)
			var got []string
			for _, f := range fs {
				got = append(got, fmt.Sprintf("%s %s %v %.3g %v", f.Name, f.Scope, f.Value, float64(f.Margin), f.Decisive))
			}
			if strings.Join(got, "|") != c.want || len(und) != c.und {
				t.Errorf("got %s (%d undetermined)\nwant %s (%d)", strings.Join(got, "|"), len(und), c.want, c.und)
			}
			for _, f := range fs {
				n := 0
				for _, e := range c.entries {
					if semantics.MatchScope(f.Scope, e.addr) {
						n++
					}
				}
				if n > 1 && !strings.Contains(f.Evidence.Note, fmt.Sprintf("%d measurements", n)) {
					t.Errorf("%s %s: note %q does not say it merges %d measurements", f.Name, f.Scope, f.Evidence.Note, n)
				}
			}
		})
	}
}

func TestMarginText(t *testing.T) {
	for m, want := range map[float64]string{18834.4: "×18,834", 2.2357: "×2.24", math.Inf(1): "×∞", 1234567: "×1,234,567", 100: "×100"} {
		if got := Margin(m); got != want {
			t.Errorf("Margin(%v) = %q, want %q", m, got, want)
		}
	}
}

// TestPlaced: readings at an address the structure lacks are not written
// (so the document validates); "no RoPE" where the structure has no
// positions agrees and says nothing, any other reading is undetermined.
func TestPlaced(t *testing.T) {
	layouts := []any{"none", "interleaved", "half"}
	st := &semantics.Structure{Blocks: []semantics.Block{{}}}
	none := measured("rope_layout", "positions", layouts, 1e-7, 1, 1)
	none.from = "blocks.0"
	half := measured("rope_layout", "positions", layouts, 1, 1, 1e-7)
	gate := measured("gate_fn", "blocks.0", []any{"identity", "tanh"}, 1e-7, 1e-2)
	for _, c := range []struct {
		name    string
		entries []entry
		kept    int
		und     string
	}{
		{"no RoPE, no positions", []entry{none, gate}, 1, ""},
		{"a layout, no positions", []entry{half, half, gate}, 1, "rope_layout positions"},
		{"every address present", []entry{gate}, 1, ""},
	} {
		kept, und := placed(c.entries, st)
		var got []string
		for _, u := range und {
			got = append(got, u.Name+" "+u.Scope)
			if !strings.Contains(u.Reason, "not written") {
				t.Errorf("%s: reason %q", c.name, u.Reason)
			}
		}
		if len(kept) != c.kept || strings.Join(got, "|") != c.und {
			t.Errorf("%s: kept %d, undetermined %v; want %d, %q", c.name, len(kept), got, c.kept, c.und)
		}
	}
}
