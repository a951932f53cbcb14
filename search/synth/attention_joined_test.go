package synth

import (
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/cpu"
	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/precision"
)

// TestUnseenJoinedKeys: prx (fixtures/unseen, a replica of diffusers'
// transformer_prx.py) queries its image rows alone over keys and values
// joined from the text and the image, its caption mask joined with ones
// for the image keys, RoPE on the image q and k only. The program must
// read its attention that way (one node: q of the image's rows, keys of
// both streams', an explicit mask) and say the keys' order is not
// decided by the trace.
func TestUnseenJoinedKeys(t *testing.T) {
	res, _ := discoverComplete(t, filepath.Join("..", "..", "fixtures", "unseen", "prx-f32.npz"))
	pg := res.Doc.Program
	attn := 0
	for _, n := range pg.Nodes {
		if n.Op != "attention" {
			continue
		}
		attn++
		if n.Attrs.Attention.Mask != exec.MaskExplicit.String() || len(n.In) < 4 || n.In[3] == "" {
			t.Errorf("attention %v: mask %v, want the caption's mask joined with ones", n.In, n.Attrs.Attention.Mask)
		}
	}
	if attn != 1 {
		t.Errorf("%d attention nodes, want 1 (one block)", attn)
	}
	found := false
	for _, f := range res.Doc.Factors {
		if f.Name == "joint_order" && strings.HasSuffix(f.Scope, ".attention") {
			found = true
			if f.Decisive || f.Value != "text_first" {
				t.Errorf("joint_order %v decisive=%v, want text_first and not decisive (the keys' order leaves the result unchanged)", f.Value, f.Decisive)
			}
		}
	}
	if !found {
		t.Error("no joint_order for the attention over joined keys")
	}
}

// TestRopeRows: where a table of r rows rotates q and k.
func TestRopeRows(t *testing.T) {
	table := func(r int) [2]*val { v := &val{shape: []int{r, 8}, data: make([]float32, r*8)}; return [2]*val{v, v} }
	rows := func(n int) *val { return &val{shape: []int{1, n, 8}} }
	joined := func(a, b int) *val {
		return &val{shape: []int{1, a + b, 8}, from: &expr{label: joinedKeysLabel, args: []*val{rows(a), rows(b)}}}
	}
	for _, tc := range []struct {
		name string
		r    int
		q, k *val
		want []ropeSpan
	}{
		{"self-attention", 16, rows(16), rows(16), []ropeSpan{{}}},
		{"cross-attention", 16, rows(16), rows(4), []ropeSpan{{}}},
		{"cross-attention to more rows", 16, rows(16), rows(20), []ropeSpan{{}}},
		{"keys joined, q's stream last", 16, rows(16), joined(4, 16), []ropeSpan{{}, {k: [2]int{4, 20}, label: " k_last_rows"}}},
		{"keys joined, q's stream first", 16, rows(16), joined(16, 4), []ropeSpan{{}, {k: [2]int{0, 16}, label: " k_first_rows"}}},
		{"one stream of a joint sequence", 16, rows(20), rows(20), []ropeSpan{{q: [2]int{0, 16}, k: [2]int{0, 16}}, {q: [2]int{4, 20}, k: [2]int{4, 20}}}},
		{"no fit", 16, rows(8), rows(8), nil},
	} {
		got := ropeRows(table(tc.r), tc.q, tc.k)
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestJoinedBiases: an additive key mask over one piece of joined keys (a
// caption's padding made (1 − m)·−10000, the map's own keys after it)
// is offered joined with zeros for the other piece, laid out [B, 1, 1,
// Sk], in the order the keys are joined; a mask of an integer dtype is
// not (that is joinedMasks' 0/1 mask).
func TestJoinedBiases(t *testing.T) {
	const b, n, own = 2, 3, 4
	mask := &val{shape: []int{b, 1, n}, data: []float32{0, 0, -10000, 0, -10000, -10000}, format: precision.F32}
	s, sc, _ := planted(t, precision.F32, []int{1, 2}, []float32{1, 2}, mask)
	got := s.joinedBiases(sc, b, [2]int{n, own})
	if len(got) == 0 {
		t.Fatal("no bias offered")
	}
	want := []float32{0, 0, -10000, 0, 0, 0, 0, 0, -10000, -10000, 0, 0, 0, 0}
	if !slices.Equal(got[0].shape, []int{b, 1, 1, n + own}) || !slices.Equal(got[0].data, want) {
		t.Errorf("bias %v %v, want [2 1 1 7] %v", got[0].shape, got[0].data, want)
	}
	after := s.joinedBiases(sc, b, [2]int{own, n})
	if len(after) == 0 || !slices.Equal(after[0].data[:own], []float32{0, 0, 0, 0}) || after[0].data[own+2] != -10000 {
		t.Errorf("the mask's piece second: %v", after)
	}
	ints := &val{shape: mask.shape, data: mask.data, format: precision.F32, intType: true}
	s, sc, _ = planted(t, precision.F32, []int{1, 2}, []float32{1, 2}, ints)
	if got := s.joinedBiases(sc, b, [2]int{n, own}); len(got) != 0 {
		t.Errorf("an integer mask offered as a bias: %v", got[0].data)
	}
}

// TestSameRowsKV: where the other stream has as many rows as the queried
// one (a caption of 16 tokens beside a map of 4×4 cells), its k and v are
// told from the queried stream's by the input they were projected from:
// pairs of one input are offered, and a triple is joined only with a pair
// of another input.
func TestSameRowsKV(t *testing.T) {
	rng := rand.New(rand.NewPCG(47, 3))
	mapRows, text := randVal(rng, 1, 4, 8), randVal(rng, 1, 4, 8)
	proj := func(src *val) *val {
		v := randVal(rng, 1, 4, 8)
		v.from = &expr{op: program.OpLinear, args: []*val{src, randVal(rng, 8, 8), nil}}
		v.fit = &leafFit{kind: "linear"}
		return v
	}
	q, k, v := proj(mapRows), proj(mapRows), proj(mapRows)
	ak, av := proj(text), proj(text)
	target := randVal(rng, 1, 4, 8)
	s := &synth{ev: &evaluator{b: cpu.New(1)}, em: newEmitter(precision.F32)}
	sc := &scope{own: map[*val]bool{}, arg: map[*val]bool{}}
	pairs := s.sameRowsKV(sc, target, []*val{q, k, v, ak, av})
	var theirs, mixed int
	for _, p := range pairs {
		if !sameEntries(projectedFrom(p[0]), projectedFrom(p[1])) {
			mixed++
		}
		if otherSource([3]*val{q, k, v}, p) {
			theirs++
		}
	}
	if mixed != 0 {
		t.Errorf("%d pairs of two inputs offered", mixed)
	}
	if theirs != 2 { // (ak, av) and (av, ak)
		t.Errorf("%d pairs of the other input joinable, want 2", theirs)
	}
	if otherSource([3]*val{q, k, ak}, [2]*val{ak, av}) {
		t.Error("a triple of two inputs joined")
	}

	// the other input's k and v from one fused [k|v] projection, its k
	// normalised after the cut (PRX's caption beside as many image rows):
	// the halves and the normalised k with the v half are offered, and
	// joinable with the queried stream's normalised k
	kv := randVal(rng, 1, 4, 16)
	kv.from = &expr{op: program.OpLinear, args: []*val{text, randVal(rng, 16, 8), nil}}
	kv.fit = &leafFit{kind: "linear"}
	sc.vals, sc.own[kv] = []*val{kv}, true
	nk := randVal(rng, 1, 4, 8)
	cutK := &val{shape: []int{1, 4, 8}, format: precision.F32, from: &expr{op: program.OpSlice, args: []*val{kv}}}
	nk.from = &expr{op: program.OpNorm, args: []*val{cutK, nil, nil}}
	qk := randVal(rng, 1, 4, 8)
	qk.from = &expr{op: program.OpNorm, args: []*val{k, nil, nil}}
	pairs = s.sameRowsKV(sc, target, []*val{q, qk, v, nk})
	var fused, normed int
	for _, p := range pairs {
		if !otherSource([3]*val{q, qk, v}, p) {
			continue
		}
		if p[0] == nk {
			normed++
		} else if madeFrom(p[0], kv) && madeFrom(p[1], kv) {
			fused++
		}
	}
	if normed == 0 || fused == 0 {
		t.Errorf("fused [k|v] of the other input: %d pairs of its halves, %d of its normalised k joinable; want both", fused, normed)
	}
	if otherSource([3]*val{q, qk, v}, [2]*val{qk, v}) {
		t.Error("the queried stream's own normalised k joined as another stream's")
	}
}

// TestRopeRowsJoined: a table of q's rows over keys joined from two
// streams rotates the keys' piece of q's stream; where both pieces have
// q's rows either may be q's, so both spans are offered.
func TestRopeRowsJoined(t *testing.T) {
	joined := func(a, b int) *val {
		k := &val{shape: []int{1, a + b, 8}, format: precision.F32}
		k.from = &expr{op: program.OpConcat, label: joinedKeysLabel, args: []*val{{shape: []int{1, a, 8}}, {shape: []int{1, b, 8}}}}
		return k
	}
	table := &val{shape: []int{4, 8}, format: precision.F32}
	q := &val{shape: []int{1, 4, 8}, format: precision.F32}
	for _, c := range []struct {
		k    *val
		want []string
	}{
		{joined(4, 3), []string{"", " k_first_rows"}},
		{joined(3, 4), []string{"", " k_last_rows"}},
		{joined(4, 4), []string{"", " k_first_rows", " k_last_rows"}},
		{&val{shape: []int{1, 6, 8}}, []string{""}},
	} {
		var got []string
		for _, r := range ropeRows([2]*val{table, table}, q, c.k) {
			got = append(got, r.label)
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("keys %v: spans %q, want %q", joinedParts(c.k), got, c.want)
		}
	}
}
