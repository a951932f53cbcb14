package factors

import (
	"context"
	"slices"
	"testing"

	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/search"
	"github.com/zflow/zflow/search/internal/attn"
	"github.com/zflow/zflow/search/structure"
	"github.com/zflow/zflow/trace"
)

// TestFragmentEvidence runs each block's fragment under its search's
// winners and checks what the search's scores rest on: every value the
// fragment computes at sampled rows (attention on some query rows with
// every key, causal ones through an explicit mask; pointwise nodes, joins
// and slices of rows) is bit for bit those rows of the value computed
// whole; no linear layer runs (the trace holds every projection's
// result); and the winners' fragment reproduces the captured attention
// output closely.
func TestFragmentEvidence(t *testing.T) {
	cases := []struct {
		path   string
		causal bool
	}{
		{"../../fixtures/dit/dit-f32.npz", false},
		{"../../fixtures/dit/dit-bf16.npz", false},
		{"../../fixtures/unseen/gemma-f32.npz", true},
	}
	for _, c := range cases {
		t.Run(c.path, func(t *testing.T) {
			tr, err := trace.Open(c.path)
			if err != nil {
				t.Fatal(err)
			}
			defer tr.Close()
			st, _, err := structure.Discover(tr)
			if err != nil {
				t.Fatal(err)
			}
			for i := range st.Blocks {
				b, fs, err := newBlock(tr, &st, i)
				if err != nil {
					t.Fatal(err)
				}
				r, err := search.Run(context.Background(), fs, search.ObjectiveFunc(b.score), nil, search.Options{})
				if err != nil {
					t.Fatal(err)
				}
				a := search.Assignment{}
				for _, f := range r.Factors {
					a[f.Name] = f.Value
				}
				if got := a["attention_causal"] == true; got != c.causal {
					t.Errorf("block %d: attention_causal %v, want %v", i, a["attention_causal"], c.causal)
				}
				p, ok, err := b.fragment(a)
				if err != nil || !ok {
					t.Fatalf("block %d: the winners' fragment: %v", i, err)
				}
				compared := 0
				for _, name := range p.Order {
					v := p.Values[name]
					n := producer(p, name)
					if v.Kind != program.Temp || len(v.Shape) != 3 || len(v.Taps) == 0 || n == nil || n.Op == program.OpLinear || joinsInputs(p, n) {
						continue
					}
					rows := attn.Spread(v.Shape[1], max(2, v.Shape[1]/3))
					part, shape, err := b.frag.Eval(p, name, rows)
					if err != nil {
						t.Fatalf("block %d: %s at rows: %v", i, name, err)
					}
					whole, _, err := b.frag.Eval(p, name, nil)
					if err != nil {
						t.Fatalf("block %d: %s whole: %v", i, name, err)
					}
					if shape[1] != len(rows) || !slices.Equal(part, pickRows(whole, v.Shape, rows)) {
						t.Errorf("block %d: %s (%s) at %d rows is not those rows of it computed whole", i, name, n.Op, len(rows))
					}
					compared++
				}
				if compared < 3 {
					t.Errorf("block %d: %d values compared", i, compared)
				}
				if n, _ := b.frag.Ran(program.OpLinear); n != 0 {
					t.Errorf("block %d: %d linear layers ran", i, n)
				}
				if n, _ := b.frag.Ran(program.OpAttention); n == 0 {
					t.Errorf("block %d: no attention ran", i)
				}
				s, err := b.scoreAttention(a)
				if err != nil || s.Err > 1e-2 {
					t.Errorf("block %d: the winners' attention scores %v (%v) at %s", i, s.Err, err, s.Boundary)
				}
				t.Logf("block %d: %d values sampled = whole; attention %.3g at %s", i, compared, s.Err, s.Boundary)
			}
		})
	}
}

// pickRows gathers rows of the second axis of a [B, L, W] value.
func pickRows(v []float32, shape []int, rows []int) []float32 {
	var out []float32
	for b := range shape[0] {
		for _, r := range rows {
			o := (b*shape[1] + r) * shape[2]
			out = append(out, v[o:o+shape[2]]...)
		}
	}
	return out
}

// joinsInputs: the block's rows joined from its inputs (given joined, so
// the streams are not).
func joinsInputs(p *program.Program, n *program.Node) bool {
	if n.Op != program.OpConcat {
		return false
	}
	for _, in := range n.In {
		if p.Values[in].Kind != program.Input {
			return false
		}
	}
	return true
}
