package structure

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/zflow/zflow/semantics"
	"github.com/zflow/zflow/trace"
)

// conformanceDir holds the traces of real third-party models (../shared).
const conformanceDir = "../../../shared/conformance"

// tcase is one trace and the hand-written document of its model.
type tcase struct {
	name  string // model-precision, e.g. flux-bf16
	model string // flux, qwenimage, llama, dit
	trace string
	doc   string
}

// cases lists the DiT fixtures, plus the conformance traces when
// ../shared is present.
func cases(t *testing.T) []tcase {
	t.Helper()
	var out []tcase
	for _, p := range []string{"f32", "bf16"} {
		out = append(out, tcase{"dit-" + p, "dit", "../../fixtures/dit/dit-" + p + ".npz", "../../semantics/testdata/dit-" + p + ".json"})
	}
	if _, err := os.Stat(conformanceDir); err != nil {
		t.Logf("conformance traces not available (%s): testing the DiT fixtures only", conformanceDir)
		return out
	}
	for _, m := range []string{"flux", "qwenimage", "llama"} {
		for _, p := range []string{"f32", "bf16"} {
			out = append(out, tcase{m + "-" + p, m, filepath.Join(conformanceDir, m+"-"+p+".npz"), "../../semantics/testdata/" + m + "-" + p + ".json"})
		}
	}
	return out
}

func openTrace(t *testing.T, path string) *trace.Trace {
	t.Helper()
	tr, err := trace.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	return tr
}

func discover(t *testing.T, path string) semantics.Structure {
	t.Helper()
	st, und, err := Discover(openTrace(t, path))
	for _, u := range und {
		t.Errorf("undetermined %s at %s: %s", u.Name, u.Scope, u.Reason)
	}
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// validate checks the structure the way a document holding it is checked.
func validate(t *testing.T, st semantics.Structure) {
	t.Helper()
	doc := semantics.Document{Format: semantics.FormatName, Version: semantics.Version,
		Source:    semantics.Source{Trace: "t", SHA256: strings.Repeat("0", 64)},
		Structure: st, Precision: semantics.Precision{Status: "placeholder", Activations: "f32"}}
	if err := doc.Validate(); err != nil {
		t.Errorf("the discovered structure is not a valid document's: %v", err)
	}
}

// TestDiscoverMatchesDocuments: on every trace, the discovered structure
// is the hand-written document's, field for field.
func TestDiscoverMatchesDocuments(t *testing.T) {
	for _, c := range cases(t) {
		t.Run(c.name, func(t *testing.T) {
			st := discover(t, c.trace)
			validate(t, st)
			if _, err := os.Stat(c.doc); err != nil {
				t.Skipf("no hand-written document %s to compare with", c.doc)
			}
			doc, err := semantics.Read(c.doc)
			if err != nil {
				t.Fatal(err)
			}
			diffs := jsonDiff(t, st, doc.Structure)
			for _, d := range diffs {
				t.Errorf("discovered vs %s: %s", filepath.Base(c.doc), d)
			}
			if len(diffs) == 0 {
				t.Logf("%d blocks, %d parameter paths by role: identical to %s", len(st.Blocks), len(st.ParamPaths()), filepath.Base(c.doc))
			}
		})
	}
}

// jsonDiff lists the differences between two values' JSON forms, one line
// per differing leaf, with its path.
func jsonDiff(t *testing.T, got, want any) []string {
	t.Helper()
	var a, b any
	for _, p := range []struct {
		v   any
		dst *any
	}{{got, &a}, {want, &b}} {
		raw, err := json.Marshal(p.v)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(raw, p.dst); err != nil {
			t.Fatal(err)
		}
	}
	var out []string
	var walk func(path string, x, y any)
	walk = func(path string, x, y any) {
		switch xv := x.(type) {
		case map[string]any:
			yv, ok := y.(map[string]any)
			if !ok {
				break
			}
			keys := map[string]bool{}
			for k := range xv {
				keys[k] = true
			}
			for k := range yv {
				keys[k] = true
			}
			sorted := make([]string, 0, len(keys))
			for k := range keys {
				sorted = append(sorted, k)
			}
			sort.Strings(sorted)
			for _, k := range sorted {
				xe, inX := xv[k]
				ye, inY := yv[k]
				switch {
				case !inX:
					out = append(out, fmt.Sprintf("%s.%s missing (want %s)", path, k, short(ye)))
				case !inY:
					out = append(out, fmt.Sprintf("%s.%s = %s, not in the document", path, k, short(xe)))
				default:
					walk(path+"."+k, xe, ye)
				}
			}
			return
		case []any:
			yv, ok := y.([]any)
			if !ok {
				break
			}
			if len(xv) != len(yv) {
				out = append(out, fmt.Sprintf("%s: %d elements, want %d", path, len(xv), len(yv)))
			}
			for i := range min(len(xv), len(yv)) {
				walk(fmt.Sprintf("%s[%d]", path, i), xv[i], yv[i])
			}
			return
		}
		if short(x) != short(y) {
			out = append(out, fmt.Sprintf("%s = %s, want %s", path, short(x), short(y)))
		}
	}
	walk("structure", a, b)
	return out
}

func short(v any) string {
	b, _ := json.Marshal(v)
	if len(b) > 160 {
		return string(b[:160]) + "…"
	}
	return string(b)
}

// TestDiscoverFacts asserts what the READMEs say each model's code does
// (fixtures/dit/README.md, ../shared/conformance/README.md), independent
// of the hand-written documents.
func TestDiscoverFacts(t *testing.T) {
	type blockWant struct {
		kinds                      []string
		hidden, heads, kv, hd, mlp int
		roles                      map[string]string // "blocks.<i>.<role>" or "final.<role>" etc. → weight path
		tokens                     map[string]int
		imageGrid, imageOrigin     []int
		textStart, textStep        []int
		run                        string
		condTimestepDim            int
		pooled                     bool
	}
	dit := blockWant{
		kinds: []string{"single_stream", "single_stream"}, hidden: 32, heads: 2, kv: 2, hd: 16, mlp: 128,
		tokens: map[string]int{"image": 12, "text": 4}, run: "flow_euler", condTimestepDim: 64,
		imageGrid: []int{3, 4}, imageOrigin: []int{0, 0}, textStart: []int{0, 0}, textStep: []int{0, 0},
		roles: map[string]string{
			"blocks.0.q": "transformer.blocks.0.attn.to_q.weight", "blocks.0.k": "transformer.blocks.0.attn.to_k.weight",
			"blocks.0.v": "transformer.blocks.0.attn.to_v.weight", "blocks.1.out": "transformer.blocks.1.attn.to_out.weight",
			"blocks.1.mlp_in": "transformer.blocks.1.ff.proj_in.weight", "blocks.1.mlp_out": "transformer.blocks.1.ff.proj_out.weight",
			"blocks.0.modulation": "transformer.blocks.0.modulation.1.weight", "blocks.0.q_norm": "transformer.blocks.0.attn.norm_q.weight",
			"final.modulation": "transformer.norm_out.linear.weight", "final.head": "transformer.proj_out.weight",
			"conditioning.time_in": "transformer.time_embed.linear_1.weight",
		},
	}
	want := map[string]blockWant{
		"dit": dit,
		"flux": {
			kinds:  []string{"dual_stream", "dual_stream", "single_stream_parallel", "single_stream_parallel"},
			hidden: 64, heads: 4, kv: 4, hd: 16, mlp: 256, tokens: map[string]int{"image": 36, "text": 7}, run: "flow_euler",
			condTimestepDim: 256, pooled: true,
			roles: map[string]string{
				"blocks.0.image.q": "transformer.transformer_blocks.0.attn.to_q.weight", "blocks.0.text.q": "transformer.transformer_blocks.0.attn.add_q_proj.weight",
				"blocks.0.image.v": "transformer.transformer_blocks.0.attn.to_v.weight", "blocks.0.text.k": "transformer.transformer_blocks.0.attn.add_k_proj.weight",
				"blocks.1.text.out": "transformer.transformer_blocks.1.attn.to_add_out.weight", "blocks.1.image.out": "transformer.transformer_blocks.1.attn.to_out.0.weight",
				"blocks.0.text.modulation": "transformer.transformer_blocks.0.norm1_context.linear.weight",
				"blocks.0.image.mlp_in":    "transformer.transformer_blocks.0.ff.net.0.proj.weight", "blocks.0.text.mlp_out": "transformer.transformer_blocks.0.ff_context.net.2.weight",
				"blocks.2.out": "transformer.single_transformer_blocks.0.proj_out.weight", "blocks.2.mlp_in": "transformer.single_transformer_blocks.0.proj_mlp.weight",
				"blocks.3.k_norm":        "transformer.single_transformer_blocks.1.attn.norm_k.weight",
				"conditioning.pooled_in": "transformer.time_text_embed.text_embedder.linear_1.weight",
				"final.modulation":       "transformer.norm_out.linear.weight", "final.head": "transformer.proj_out.weight",
			},
		},
		"qwenimage": {
			kinds: []string{"dual_stream", "dual_stream"}, hidden: 64, heads: 4, kv: 4, hd: 16, mlp: 256,
			tokens: map[string]int{"image": 36, "text": 9}, run: "flow_euler", condTimestepDim: 256,
			imageGrid: []int{1, 6, 6}, imageOrigin: []int{0, -3, -3}, textStart: []int{3, 3, 3}, textStep: []int{1, 1, 1},
			roles: map[string]string{
				"embed.text.norm": "transformer.txt_norm.weight", "embed.text.proj": "transformer.txt_in.weight",
				"blocks.0.image.modulation": "transformer.transformer_blocks.0.img_mod.1.weight", "blocks.0.text.modulation": "transformer.transformer_blocks.0.txt_mod.1.weight",
				"blocks.1.text.q": "transformer.transformer_blocks.1.attn.add_q_proj.weight", "blocks.1.image.mlp_out": "transformer.transformer_blocks.1.img_mlp.net.2.weight",
			},
		},
		"llama": {
			kinds: []string{"decoder", "decoder"}, hidden: 64, heads: 4, kv: 2, hd: 16, mlp: 96,
			tokens: map[string]int{"text": 12}, run: "forward", textStart: []int{0}, textStep: []int{1},
			roles: map[string]string{
				"embed.text.table": "text_encoder.embed_tokens.weight",
				"blocks.0.q":       "text_encoder.layers.0.self_attn.q_proj.weight", "blocks.0.k": "text_encoder.layers.0.self_attn.k_proj.weight",
				"blocks.0.v": "text_encoder.layers.0.self_attn.v_proj.weight", "blocks.0.out": "text_encoder.layers.0.self_attn.o_proj.weight",
				"blocks.1.mlp_gate": "text_encoder.layers.1.mlp.gate_proj.weight", "blocks.1.mlp_in": "text_encoder.layers.1.mlp.up_proj.weight",
				"blocks.1.mlp_out": "text_encoder.layers.1.mlp.down_proj.weight", "blocks.0.attn_norm": "text_encoder.layers.0.input_layernorm.weight",
				"blocks.0.mlp_norm": "text_encoder.layers.0.post_attention_layernorm.weight", "final.norm": "text_encoder.norm.weight",
			},
		},
	}
	for _, c := range cases(t) {
		t.Run(c.name, func(t *testing.T) {
			w := want[c.model]
			st := discover(t, c.trace)
			if st.Run != w.run || st.Hidden != w.hidden {
				t.Errorf("run %s hidden %d, want %s %d", st.Run, st.Hidden, w.run, w.hidden)
			}
			for _, s := range st.Streams {
				if w.tokens[s.Name] != s.Tokens {
					t.Errorf("stream %s: %d tokens, want %d", s.Name, s.Tokens, w.tokens[s.Name])
				}
			}
			if len(st.Streams) != len(w.tokens) {
				t.Errorf("streams %+v, want %v", st.Streams, w.tokens)
			}
			var kinds []string
			for i, b := range st.Blocks {
				kinds = append(kinds, b.Kind)
				if b.Heads != w.heads || b.KVHeads != w.kv || b.HeadDim != w.hd || b.MLPWidth != w.mlp {
					t.Errorf("block %d: heads %d kv %d head_dim %d mlp %d, want %d %d %d %d", i, b.Heads, b.KVHeads, b.HeadDim, b.MLPWidth, w.heads, w.kv, w.hd, w.mlp)
				}
			}
			if !slices.Equal(kinds, w.kinds) {
				t.Errorf("block kinds %v, want %v", kinds, w.kinds)
			}
			got := weightsByAddress(st)
			for addr, path := range w.roles {
				if got[addr] != path {
					t.Errorf("%s: weight %q, want %q", addr, got[addr], path)
				}
			}
			if w.condTimestepDim > 0 {
				if st.Conditioning == nil || st.Conditioning.TimestepDim != w.condTimestepDim {
					t.Errorf("conditioning %+v, want timestep_dim %d", st.Conditioning, w.condTimestepDim)
				} else if _, ok := st.Conditioning.Roles["pooled_in"]; ok != w.pooled {
					t.Errorf("pooled path found: %v, want %v", ok, w.pooled)
				}
			}
			if w.imageGrid != nil {
				src := st.Positions.Streams["image"]
				if src.From != "grid" || !slices.Equal(src.Grid, w.imageGrid) || !slices.Equal(src.Origin, w.imageOrigin) {
					t.Errorf("image positions %+v, want grid %v origin %v", src, w.imageGrid, w.imageOrigin)
				}
			}
			if w.textStart != nil {
				src := st.Positions.Streams["text"]
				if src.From != "sequence" || !slices.Equal(src.Start, w.textStart) || !slices.Equal(src.Step, w.textStep) {
					t.Errorf("text positions %+v, want sequence %v step %v", src, w.textStart, w.textStep)
				}
			}
		})
	}
}

// weightsByAddress maps each role's address to its weight path.
func weightsByAddress(st semantics.Structure) map[string]string {
	out := map[string]string{}
	add := func(prefix string, roles map[string]semantics.Role) {
		for name, r := range roles {
			out[prefix+"."+name] = r.Weight
		}
	}
	for _, e := range st.Embedders {
		add("embed."+e.Stream, e.Roles)
	}
	if st.Conditioning != nil {
		add("conditioning", st.Conditioning.Roles)
	}
	for i, b := range st.Blocks {
		add(semantics.BlockAddress(i), b.Roles)
	}
	add("final", st.Final.Roles)
	return out
}

// TestDiscoverOtherTraces: on every other trace of the repository (toy
// models, fault fixtures), Discover returns a structure or an error, and
// never panics.
func TestDiscoverOtherTraces(t *testing.T) {
	paths, _ := filepath.Glob("../../fixtures/*/*.npz")
	more, _ := filepath.Glob("../../fixtures/*.npz")
	for _, path := range append(paths, more...) {
		t.Run(filepath.Base(path), func(t *testing.T) {
			tr, err := trace.Open(path)
			if err != nil {
				t.Skip(err)
			}
			defer tr.Close()
			st, und, err := Discover(tr)
			t.Logf("%d blocks, %d undetermined, err %v", len(st.Blocks), len(und), err)
		})
	}
}

// TestAttentionEvidence logs, per block, how decisively the teacher-forced
// attention chose q, k, v and the head width (runner-up error / winner
// error over candidates with other roles), and what else it read.
func TestAttentionEvidence(t *testing.T) {
	for _, c := range cases(t) {
		t.Run(c.name, func(t *testing.T) {
			tr := openTrace(t, c.trace)
			d := &discoverer{tr: tr, v: newValues(tr), linears: map[*node]linearInfo{}, tokens: map[string]int{}, used: map[string]bool{}}
			if err := d.discover(); err != nil {
				t.Fatal(err)
			}
			for _, f := range d.facts {
				a := f.attn
				if a.runnerUp < tolMargin*a.err {
					t.Errorf("%s: q/k/v margin %.3g", f.addr, a.runnerUp/a.err)
				}
				t.Logf("%s %-22s q/k/v rel-RMS %.2g, next other roles %.2g (×%.3g, %d candidates); head %d, rope %s, causal %v, modulation act %v, MLP act %v (glu %v)",
					f.addr, f.kind, a.err, a.runnerUp, a.runnerUp/a.err, a.tried, a.cfg.d, a.cfg.layout, a.cfg.causal, f.modAct, f.mlpAct, f.glu)
			}
		})
	}
}
