package program_test

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/semantics"
	"github.com/zflow/zflow/trace"
)

// TestRecipeNodes pins each block kind's nodes (op:role under the block's
// address, in order) as the builder emits them from the kind's recipe:
// the nodes the per-kind Go builders emitted before the recipes (9e77eb2),
// so a recipe edit that changes a document's program, and with it its
// bits, fails here. flux and llama are conformance traces (skipped
// without ../shared).
func TestRecipeNodes(t *testing.T) {
	for _, tc := range []struct {
		doc, trace, addr, kind, want string
	}{
		{"../../semantics/testdata/dit-f32.json", "../../fixtures/dit/dit-f32.npz", "blocks.0", "single_stream",
			"concat:join act:modulation_act linear:modulation chunk:chunks norm:norm1 modulate:modulate1 linear:q linear:k linear:v norm:q_norm norm:k_norm rope:rope_q rope:rope_k attention:attention linear:out gated_residual:residual1 norm:norm2 modulate:modulate2 linear:mlp_in act:mlp_act linear:mlp_out gated_residual:residual2 slice:split.0 slice:split.1"},
		{"../../semantics/testdata/flux-f32.json", conformanceDir + "/flux-f32.npz", "blocks.0", "dual_stream",
			"act:text.modulation_act linear:text.modulation chunk:text.chunks norm:text.norm1 modulate:text.modulate1 act:image.modulation_act linear:image.modulation chunk:image.chunks norm:image.norm1 modulate:image.modulate1 linear:text.q linear:text.k linear:text.v norm:text.q_norm norm:text.k_norm linear:image.q linear:image.k linear:image.v norm:image.q_norm norm:image.k_norm concat:joint_q concat:joint_k concat:joint_v rope:rope_q rope:rope_k attention:attention slice:attention_rows.0 slice:attention_rows.1 linear:text.out gated_residual:text.residual1 norm:text.norm2 modulate:text.modulate2 linear:text.mlp_in act:text.mlp_act linear:text.mlp_out gated_residual:text.residual2 linear:image.out gated_residual:image.residual1 norm:image.norm2 modulate:image.modulate2 linear:image.mlp_in act:image.mlp_act linear:image.mlp_out gated_residual:image.residual2"},
		{"../../semantics/testdata/flux-f32.json", conformanceDir + "/flux-f32.npz", "blocks.2", "single_stream_parallel",
			"concat:join act:modulation_act linear:modulation chunk:chunks norm:norm modulate:modulate1 linear:q linear:k linear:v norm:q_norm norm:k_norm rope:rope_q rope:rope_k attention:attention linear:mlp_in act:mlp_act concat:parallel linear:out gated_residual:residual1 slice:split.0 slice:split.1"},
		{"../../semantics/testdata/llama-f32.json", conformanceDir + "/llama-f32.npz", "blocks.0", "decoder",
			"norm:attn_norm linear:q linear:k linear:v rope:rope_q rope:rope_k attention:attention linear:out add:residual1 norm:mlp_norm linear:mlp_in linear:mlp_gate glu:mlp_act linear:mlp_out add:residual2"},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			if _, err := os.Stat(tc.trace); err != nil {
				t.Skipf("%s: %v", tc.trace, err)
			}
			tr, err := trace.Open(tc.trace)
			if err != nil {
				t.Fatal(err)
			}
			defer tr.Close()
			doc, err := semantics.Read(tc.doc)
			if err != nil {
				t.Fatal(err)
			}
			var i int
			for i = range doc.Structure.Blocks {
				if semantics.BlockAddress(i) == tc.addr {
					break
				}
			}
			if k := doc.Structure.Blocks[i].Kind; k != tc.kind {
				t.Fatalf("%s is a %s block, want %s", tc.addr, k, tc.kind)
			}
			p, err := program.Build(doc, shapesOf(t, doc, tr))
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, s := range p.Segments {
				if s.Address != tc.addr {
					continue
				}
				for _, n := range p.Nodes[s.Start:s.End] {
					got = append(got, n.Op.String()+":"+strings.TrimPrefix(n.Role, tc.addr+"."))
				}
			}
			if g := strings.Join(got, " "); g != tc.want {
				t.Errorf("%s nodes:\n got  %s\n want %s", tc.addr, g, tc.want)
			}
			// The block built alone (BuildBlock, what the factor search
			// runs) is the same nodes with the same attributes and specs.
			in := blockInputs(p, &doc.Structure, doc.Structure.Blocks[i])
			alone, err := program.BuildBlock(doc, shapesOf(t, doc, tr), i, in)
			if err != nil {
				t.Fatal(err)
			}
			var whole []program.Node
			for _, s := range p.Segments {
				if s.Address == tc.addr {
					whole = p.Nodes[s.Start:s.End]
				}
			}
			if len(alone.Nodes) != len(whole) {
				t.Fatalf("%s built alone: %d nodes, in the model %d", tc.addr, len(alone.Nodes), len(whole))
			}
			for j, n := range alone.Nodes {
				w := whole[j]
				if n.Op != w.Op || n.Role != w.Role || fmt.Sprint(n.Attrs) != fmt.Sprint(w.Attrs) || n.Spec != w.Spec {
					t.Errorf("%s built alone: node %d is %s %s %v %v, in the model %s %s %v %v", tc.addr, j, n.Op, n.Role, n.Attrs, n.Spec, w.Op, w.Role, w.Attrs, w.Spec)
				}
			}
		})
	}
}

// blockInputs are the shapes a block reads inside the model program p:
// its boundary's stream and conditioning values, and its RoPE tables.
func blockInputs(p *program.Program, st *semantics.Structure, blk semantics.Block) program.BlockInputs {
	in := program.BlockInputs{Streams: map[string][]int{}}
	tapped := func(module, port string) []int {
		for _, v := range p.Values {
			for _, tp := range v.Taps {
				if tp.Module == module && tp.Port == port {
					return v.Shape
				}
			}
		}
		return nil
	}
	bd := blk.Boundary
	for _, s := range blk.Streams {
		in.Streams[s] = tapped(bd.Module, bd.Inputs[s])
	}
	if port, ok := bd.Inputs["joint"]; ok {
		j := tapped(bd.Module, port)
		for _, s := range st.Streams {
			in.Streams[s.Name] = []int{j[0], s.Tokens, j[2]}
		}
	}
	if port, ok := bd.Inputs["cond"]; ok {
		in.Cond = tapped(bd.Module, port)
	}
	for _, n := range p.Nodes {
		if n.Op == program.OpRopeTable {
			in.Tables = p.Values[n.Out[0]].Shape
		}
	}
	return in
}

// TestFinalRecipeNodes pins the final stage's nodes as the builder emits
// them from its recipe (recipes/stages/final.json): the nodes the Go
// builder emitted before it, with the final boundary's segment ending at
// the rows before the head. llama is a conformance trace (skipped without
// ../shared).
func TestFinalRecipeNodes(t *testing.T) {
	for _, tc := range []struct {
		doc, trace, nodes, segment string
	}{
		{"../../semantics/testdata/dit-f32.json", "../../fixtures/dit/dit-f32.npz",
			"act:modulation_act linear:modulation chunk:chunks norm:norm modulate:modulate linear:head", "act chunk linear modulate norm"},
		{"../../semantics/testdata/llama-f32.json", conformanceDir + "/llama-f32.npz", "norm:norm", ""},
	} {
		t.Run(tc.doc, func(t *testing.T) {
			if _, err := os.Stat(tc.trace); err != nil {
				t.Skipf("%s: %v", tc.trace, err)
			}
			tr, err := trace.Open(tc.trace)
			if err != nil {
				t.Fatal(err)
			}
			defer tr.Close()
			doc, err := semantics.Read(tc.doc)
			if err != nil {
				t.Fatal(err)
			}
			p, err := program.Build(doc, shapesOf(t, doc, tr))
			if err != nil {
				t.Fatal(err)
			}
			var got, seg []string
			for i, n := range p.Nodes {
				if !strings.HasPrefix(n.Role, "final.") {
					continue
				}
				got = append(got, n.Op.String()+":"+strings.TrimPrefix(n.Role, "final."))
				for _, s := range p.Segments {
					if s.Address == "final" && i >= s.Start && i < s.End {
						seg = append(seg, n.Op.String())
					}
				}
			}
			slices.Sort(seg)
			if g := strings.Join(got, " "); g != tc.nodes {
				t.Errorf("final nodes:\n got  %s\n want %s", g, tc.nodes)
			}
			if doc.Structure.Final.Boundary != nil {
				if g := strings.Join(seg, " "); g != tc.segment {
					t.Errorf("final segment holds %s, want %s (the head after it)", g, tc.segment)
				}
			}
		})
	}
}
