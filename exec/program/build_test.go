package program_test

import (
	"strings"
	"testing"

	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/semantics"
	"github.com/zflow/zflow/trace"
)

// shapesOf reads a request's shapes for doc from a trace.
func shapesOf(t *testing.T, doc *semantics.Document, tr *trace.Trace) program.Shapes {
	t.Helper()
	s := program.Shapes{Weights: map[string][]int{}, Inputs: map[string][]int{}}
	params, inputs := program.TraceParams(tr), program.TraceInputs(tr)
	for _, p := range doc.Structure.ParamPaths() {
		sh, err := params.Shape(p)
		if err != nil {
			t.Fatal(err)
		}
		s.Weights[p] = sh
	}
	for _, in := range doc.Structure.Inputs {
		sh, err := inputs.Shape(in.Name)
		if err != nil {
			t.Fatal(err)
		}
		s.Inputs[in.Role] = sh
	}
	return s
}

func dropFactor(d *semantics.Document, name string) {
	out := d.Factors[:0]
	for _, f := range d.Factors {
		if f.Name != name {
			out = append(out, f)
		}
	}
	d.Factors = out
}

func setFactor(d *semantics.Document, name string, v any) {
	for i := range d.Factors {
		if d.Factors[i].Name == name {
			d.Factors[i].Value = v
		}
	}
}

// TestBuildRefuses: requests outside what the builder supports are refused
// with an error naming the part and the reason.
func TestBuildRefuses(t *testing.T) {
	c := fixtureCases()[0]
	for _, tc := range []struct {
		name   string
		break_ func(d *semantics.Document, s *program.Shapes)
		want   string
	}{
		{"missing factor", func(d *semantics.Document, _ *program.Shapes) { dropFactor(d, "gate_fn") }, `no factor "gate_fn" covers blocks.0`},
		{"patches without a size", func(d *semantics.Document, _ *program.Shapes) { setFactor(d, "patch_layout", "c_ph_pw") }, "needs the embedder's patch size"},
		{"patches of tokens", func(d *semantics.Document, _ *program.Shapes) {
			setFactor(d, "patch_layout", "c_ph_pw")
			d.Structure.Embedders[0].Patch = 2
		}, "needs latents [batch, channels, height, width]"},
		{"patches of the wrong width", func(d *semantics.Document, s *program.Shapes) {
			setFactor(d, "patch_layout", "c_ph_pw")
			d.Structure.Embedders[0].Patch = 2
			s.Inputs["latents"] = []int{1, 8, 6, 8}
		}, "have 32 features, the embedder reads 16"},
		{"partial patches", func(d *semantics.Document, s *program.Shapes) {
			setFactor(d, "patch_layout", "c_ph_pw")
			d.Structure.Embedders[0].Patch = 2
			s.Inputs["latents"] = []int{1, 4, 5, 8}
		}, "are not whole 2×2 patches"},
		{"patch layout", func(d *semantics.Document, _ *program.Shapes) { setFactor(d, "patch_layout", "ph_pw_c") }, `patch_layout "ph_pw_c" is not supported`},
		{"weight shape", func(d *semantics.Document, s *program.Shapes) {
			s.Weights[d.Structure.Blocks[0].Roles["q"].Weight] = []int{32, 16}
		}, "blocks.0.q (linear)"},
		{"missing weight", func(d *semantics.Document, s *program.Shapes) {
			delete(s.Weights, d.Structure.Blocks[1].Roles["out"].Weight)
		}, "is not in the weights"},
		{"missing input", func(_ *semantics.Document, s *program.Shapes) { delete(s.Inputs, "context") }, "the request has no input"},
		{"qk norm", func(d *semantics.Document, _ *program.Shapes) { setFactor(d, "qk_norm", "none") }, "qk_norm"},
		{"glu without gate", func(d *semantics.Document, _ *program.Shapes) { setFactor(d, "mlp_glu", true) }, "mlp_glu is true"},
		{"subset", func(d *semantics.Document, _ *program.Shapes) { d.Structure.Blocks[0].Streams = []string{"image"} }, "subset"},
		{"grid", func(d *semantics.Document, _ *program.Shapes) {
			d.Structure.Positions.Streams["image"] = semantics.PositionSource{From: "grid", Grid: []int{4, 4}, Origin: []int{0, 0}}
		}, "grid [4 4] holds 16 rows"},
		{"rope width", func(d *semantics.Document, _ *program.Shapes) { setFactor(d, "rope_axes", []any{16.0, 16.0}) }, "more than the head width"},
		{"modulation chunks", func(d *semantics.Document, _ *program.Shapes) { d.Structure.Blocks[1].Kind = "single_stream_parallel" }, "is not 3 chunks"},
		{"mlp width", func(d *semantics.Document, _ *program.Shapes) { d.Structure.Blocks[0].MLPWidth = 64 }, "width 128 is not block.mlp_width (64)"},
		{"forward with timestep", func(d *semantics.Document, _ *program.Shapes) { d.Structure.Run = "forward" }, "has no timestep"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr, doc := open(t, c)
			shapes := shapesOf(t, doc, tr)
			tc.break_(doc, &shapes)
			_, err := program.Build(doc, shapes)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want it to mention %q", err, tc.want)
			}
		})
	}
}

// TestBuildTaps: the program's values carry the reference's boundaries.
func TestBuildTaps(t *testing.T) {
	tr, doc := open(t, fixtureCases()[0])
	p, err := program.Build(doc, shapesOf(t, doc, tr))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{
		"transformer/kw.hidden_states": false, "transformer/out.0": false,
		"transformer.blocks.0/arg0": false, "transformer.blocks.1/out": false, "transformer.blocks.1/kw.temb": false,
		"transformer.blocks.0.attn.to_q/out": false, "transformer.norm_out/out": false, "transformer.pos_embed/out.0": false,
	}
	for _, v := range p.Values {
		for _, tp := range v.Taps {
			key := tp.Module + "/" + tp.Port
			if _, ok := want[key]; ok {
				want[key] = true
			}
			// every tap names a key the reference holds
			if _, err := tr.Info(tp.Key(0)); err != nil {
				t.Errorf("tap %s is not in the reference", tp.Key(0))
			}
		}
	}
	for k, seen := range want {
		if !seen {
			t.Errorf("no value is tapped at %s", k)
		}
	}
	for _, s := range p.Segments {
		if s.End <= s.Start {
			t.Errorf("segment %s is empty", s.Address)
		}
	}
}
