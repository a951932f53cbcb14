package synth

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/zflow/zflow/semantics"
)

// TestUnseenHeadsLastBias: T5's first attention computes its relative
// position bias itself (buckets → the attention's own [32, heads] table
// → [S, S, heads], permuted to heads first in the forward): each
// attention's bias is a table's gather moved to [1, H, S, S]; in t5 both
// read the first attention's one table (the later block is handed the
// bias the first returned), in umt5 each its own.
func TestUnseenHeadsLastBias(t *testing.T) {
	for _, c := range []struct {
		name   string
		tables int // bucket tables the attentions' biases are gathered from
	}{{"t5", 1}, {"umt5", 2}} {
		t.Run(c.name, func(t *testing.T) {
			res, _ := discoverComplete(t, filepath.Join("..", "..", "fixtures", "unseen", c.name+"-f32.npz"))
			nodes := res.Doc.Program.Nodes
			made := map[string]semantics.ProgramNode{}
			for _, n := range nodes {
				for _, o := range n.Out {
					made[o] = n
				}
			}
			// follow reshapes back from a value to what made it
			origin := func(v string) semantics.ProgramNode {
				n := made[v]
				for n.Op == "reshape" {
					n = made[n.In[0]]
				}
				return n
			}
			attns, fromTable := 0, 0
			tables := map[string]bool{}
			for _, n := range nodes {
				if n.Op != "attention" {
					continue
				}
				attns++
				if len(n.In) < 5 || n.In[4] == "" {
					t.Errorf("attention %v has no bias", n.Out)
					continue
				}
				if a := n.Attrs.Attention; a == nil || a.Scale != 1 {
					t.Errorf("attention %v: scale %+v, want 1 (no 1/√d)", n.Out, a)
				}
				p := origin(n.In[4])
				if g := made[p.In[0]]; p.Op == "permute" && slices.Equal(p.Attrs.Perm, []int{2, 0, 1}) && g.Op == "gather" && made[g.In[1]].Op == "rel_bucket" {
					fromTable++
					tables[g.In[0]] = true
				}
			}
			if attns != 2 || fromTable != 2 || len(tables) != c.tables {
				t.Errorf("%d attentions, %d with a bias from a bucket table moved heads first, %d tables; want 2, 2 and %d", attns, fromTable, len(tables), c.tables)
			}
		})
	}
}

// TestUnseenSwishBeta: CLIP's quick GELU, x·σ(1.702·x), is spelled out
// as its reference computes it: β·x, a sigmoid, times x.
func TestUnseenSwishBeta(t *testing.T) {
	res, _ := discoverComplete(t, filepath.Join("..", "..", "fixtures", "unseen", "clip_text_model-f32.npz"))
	found := 0
	for _, f := range res.Doc.Factors {
		if f.Name == "mlp_swish_beta" {
			found++
			if !sameValue(f.Value, 1.702) || !f.Decisive {
				t.Errorf("%s: β %v (decisive %v), want 1.702, decisive", f.Scope, f.Value, f.Decisive)
			}
		}
	}
	sigmoids := 0
	for _, n := range res.Doc.Program.Nodes {
		if n.Op == "act" && n.Attrs.Act == "sigmoid" {
			sigmoids++
		}
	}
	if found != 2 || sigmoids != 2 {
		t.Errorf("%d Swish-β factors and %d sigmoids, want 2 of each (one per layer)", found, sigmoids)
	}
}

// TestUnseenMadeIDs: DPR's question encoder makes the token types (zeros)
// and the mask (ids ≠ pad: ones) from the ids. Integer tensors are no
// float function's output: the token types are a constant made from the
// request's shape, not a norm of tanh(ids) (1 to the last bit from id 9
// on, which the trace's ids 7 and 8 are not).
func TestUnseenMadeIDs(t *testing.T) {
	res, _ := discoverComplete(t, filepath.Join("..", "..", "fixtures", "unseen", "dpr-f32.npz"))
	for _, n := range res.Doc.Program.Nodes {
		if (n.Op == "act" || n.Op == "norm") && slices.Contains(n.In, "input:input_ids") {
			t.Errorf("%s node %v reads the token ids", n.Op, n.Out)
		}
		if n.Op == "gather" && strings.Contains(n.In[0], "token_type_embeddings") && !strings.HasPrefix(n.In[1], "const:") {
			t.Errorf("token types %q are not a constant", n.In[1])
		}
	}
}

// TestUnseenOwnBiases: DeBERTa's self-attention adds q_bias and v_bias,
// parameters of its own module, to the q and v pieces of a bias-free
// per-head fused in_proj: each attention reads q and v as a piece plus
// its own bias, and k as the piece itself.
func TestUnseenOwnBiases(t *testing.T) {
	res, _ := discoverComplete(t, filepath.Join("..", "..", "fixtures", "unseen", "deberta-f32.npz"))
	made := map[string]semantics.ProgramNode{}
	for _, n := range res.Doc.Program.Nodes {
		for _, o := range n.Out {
			made[o] = n
		}
	}
	biasOf := func(v string) string {
		if n := made[v]; n.Op == "add" && strings.HasPrefix(n.In[1], "param:") {
			return n.In[1][strings.LastIndex(n.In[1], ".")+1:]
		}
		return ""
	}
	attns := 0
	for _, n := range res.Doc.Program.Nodes {
		if n.Op != "attention" {
			continue
		}
		attns++
		if q, k, v := biasOf(n.In[0]), biasOf(n.In[1]), biasOf(n.In[2]); q != "q_bias" || k != "" || v != "v_bias" {
			t.Errorf("attention %v: biases q %q, k %q, v %q; want q_bias, none, v_bias", n.Out, q, k, v)
		}
	}
	if attns != 2 {
		t.Errorf("%d attentions, want 2", attns)
	}
}
