package factors

import (
	"context"
	"fmt"
	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/search/plan"
	"math"
	"slices"
	"strings"

	"github.com/zflow/zflow/precision"
	"github.com/zflow/zflow/search"
	"github.com/zflow/zflow/search/internal/attn"
	"github.com/zflow/zflow/semantics"
	"github.com/zflow/zflow/trace"
)

// Stages of a block's factors: each is scored where it is first
// observable, on the reference's own inputs to that boundary, after the
// stages before it are decided.
const (
	stageAttention  = 1 + iota // rope_layout × joint_order × attention_causal, at the out projection's argument
	stageModulation            // modulation_order × modulation_plus_one at q's (and mlp_in's) argument; modulation_act
	stageGate                  // gate_fn (× joint_order) at the residual after the attention
	stageMLP                   // mlp_act (× mlp_glu, parallel_order) at the MLP's output projection
	stageNorms                 // qk_norm at the per-head norms
)

// set is one weight set of the block as the attention sees it.
type set struct {
	prefix string // role prefix ("image.", "text.", "")
	stream string // its stream, or "" when it holds the joined rows
	rows   int    // q's rows
	qw     int    // q's width
}

// block holds what the objective reads.
type block struct {
	st     *semantics.Structure
	blk    semantics.Block
	rc     *semantics.Recipe // the block kind's
	i      int
	addr   string
	cp     *capture
	sets   []set
	tables []tableSrc
	memo   map[string]search.Score
	// The candidates' fragments: built by program.BuildBlock from the
	// block's inputs (shapes, and their captured values in frag.Given),
	// run by frag.
	shapes program.Shapes
	inputs program.BlockInputs
	frag   *plan.Fragment
}

// tableSrc is a RoPE table the block reads: a real cos/sin pair, or one
// complex tensor.
type tableSrc struct {
	cos, sin []float32
	w        int // real width, or pairs for complex
	rows     int
	complex  bool
	f        precision.Format // the captured tables' format
}

// Block returns the factors of block i of st that the trace shows, in
// stages, and the objective that scores them, teacher-forced on the
// captured tensors at each factor's boundary. Run them with search.Run;
// the results' scopes are block i's address (and "model"/"positions" for
// joint_order and rope_layout, which are read per block here and merged
// by the caller).
func Block(tr *trace.Trace, st *semantics.Structure, i int) ([]search.Factor, search.Objective, error) {
	b, fs, err := newBlock(tr, st, i)
	if err != nil {
		return nil, nil, err
	}
	return fs, search.ObjectiveFunc(b.score), nil
}

// newBlock reads block i's inputs and lists its factors.
func newBlock(tr *trace.Trace, st *semantics.Structure, i int) (*block, []search.Factor, error) {
	if i < 0 || i >= len(st.Blocks) {
		return nil, nil, fmt.Errorf("factors: block %d of %d", i, len(st.Blocks))
	}
	cp, err := newCapture(tr, st)
	if err != nil {
		return nil, nil, err
	}
	rc, ok := semantics.LookupRecipe(st.Blocks[i].Kind)
	if !ok {
		return nil, nil, fmt.Errorf("factors: block %d: kind %q has no recipe", i, st.Blocks[i].Kind)
	}
	b := &block{st: st, blk: st.Blocks[i], rc: rc, i: i, addr: semantics.BlockAddress(i), cp: cp, memo: map[string]search.Score{}}
	if err := b.load(); err != nil {
		return nil, nil, fmt.Errorf("factors: %s: %w", b.addr, err)
	}
	if err := b.loadInputs(); err != nil {
		return nil, nil, fmt.Errorf("factors: %s: %w", b.addr, err)
	}
	fs := b.factors()
	if err := b.buildable(fs); err != nil {
		b.frag.Close()
		return nil, nil, fmt.Errorf("factors: %s: %w", b.addr, err)
	}
	return b, fs, nil
}

func (b *block) role(name string) (semantics.Role, bool) {
	r, ok := b.blk.Roles[name]
	return r, ok && r.Module != ""
}

// load reads each weight set's q rows and width, and the RoPE tables.
func (b *block) load() error {
	prefixes := []string{""}
	if b.rc.Sets == semantics.SetsStreams {
		prefixes = nil
		for _, s := range b.blk.Streams {
			prefixes = append(prefixes, b.rc.RolePrefix(s))
		}
	}
	for _, p := range prefixes {
		s := set{prefix: p, stream: strings.TrimSuffix(p, ".")}
		q, ok := b.role(p + "q")
		if !ok {
			return fmt.Errorf("no %sq role", p)
		}
		qt, err := b.cp.roleOut(q)
		if err != nil {
			return err
		}
		s.rows, s.qw = qt.tokens(), qt.width()
		if _, ok := b.role(p + "out"); !ok {
			return fmt.Errorf("no %sout role", p)
		}
		b.sets = append(b.sets, s)
	}
	return b.loadTables()
}

// loadTables: the block's arguments that are not its streams or the
// conditioning vector are RoPE tables (real pairs, cos of larger mean, or
// complex ones).
func (b *block) loadTables() error {
	bd := b.blk.Boundary
	if bd == nil {
		return nil
	}
	named := map[string]bool{}
	for _, p := range bd.Inputs {
		named[p] = true
	}
	call, ok := b.cp.calls[bd.Module]
	if !ok {
		return fmt.Errorf("no call of %s", bd.Module)
	}
	var reals []tensor
	for _, p := range call.Tensors {
		if trace.IsResult(p.Name) || named[p.Name] {
			continue
		}
		info, err := b.cp.tr.Info(p.Key)
		if err != nil || !info.DType.IsFloat() {
			continue
		}
		t, err := b.cp.key(p.Key)
		if err != nil {
			return err
		}
		if t.dt == trace.Complex64 || t.dt == trace.Complex128 {
			b.tables = append(b.tables, tableSrc{cos: t.v, w: t.width(), rows: t.tokens(), complex: true, f: t.f})
			continue
		}
		if unitBounded(t.v) {
			reals = append(reals, t)
		}
	}
	// Consecutive real arguments of one shape are a pair (an attention
	// mask, a position id array or anything else between them is not a
	// table: tables are bounded by 1 and come in pairs).
	for j := 0; j+1 < len(reals); j++ {
		c, s := reals[j], reals[j+1]
		if !slices.Equal(c.shape, s.shape) || len(c.v)%max(c.width(), 1) != 0 {
			continue
		}
		if mean(s.v) > mean(c.v) {
			c, s = s, c
		}
		b.tables = append(b.tables, tableSrc{cos: c.v, sin: s.v, w: c.width(), rows: c.tokens(), f: c.f})
		j++
	}
	return nil
}

// unitBounded: every value finite and within [−1, 1] (and the rounding of
// a stored format), as cos and sin tables are.
func unitBounded(x []float32) bool {
	const tol = 1.0 / 128 // bf16 rounds 1 − ε up to at most 1 + 2⁻⁸
	for _, v := range x {
		if !(v >= -1-tol && v <= 1+tol) {
			return false
		}
	}
	return len(x) > 0
}

func mean(x []float32) float64 {
	var s float64
	for _, v := range x {
		s += float64(v)
	}
	return s / math.Max(1, float64(len(x)))
}

// factors lists the block's factors by stage.
func (b *block) factors() []search.Factor {
	f := func(name, scope string, stage int, vals ...any) search.Factor {
		return search.Factor{Name: name, Scope: scope, Values: vals, Stage: stage}
	}
	var fs []search.Factor
	layouts := []any{attn.None}
	if len(b.tables) > 0 {
		layouts = []any{attn.Interleaved, attn.Half, attn.None}
	}
	fs = append(fs, f("rope_layout", "positions", stageAttention, layouts...),
		f("attention_causal", b.addr, stageAttention, false, true),
		f("attention_scale", b.addr, stageAttention, attentionScales(b.blk.HeadDim)...))
	if len(b.sets) == 2 {
		fs = append(fs, f("joint_order", "model", stageAttention, "text_first", "image_first"))
	}
	if _, ok := b.role(b.sets[0].prefix + "modulation"); ok {
		var orders []any
		for _, o := range permutations([]string{"shift", "scale", "gate"}) {
			orders = append(orders, strings.Join(o, ","))
		}
		fs = append(fs, f("modulation_order", b.addr, stageModulation, orders...),
			f("modulation_plus_one", b.addr, stageModulation, true, false),
			f("modulation_act", b.addr, stageModulation, actValues()...),
			f("gate_fn", b.addr, stageGate, "identity", "tanh", "sigmoid"))
		if len(b.sets) == 1 && b.blk.Boundary != nil && b.blk.Boundary.Inputs["joint"] == "" && len(b.blk.Streams) == 2 {
			fs = append(fs, f("joint_order", "model", stageGate, "text_first", "image_first"))
		}
	}
	fs = append(fs, f("mlp_act", b.addr, stageMLP, actValues()[1:]...))
	if _, ok := b.role("mlp_gate"); ok {
		fs = append(fs, f("mlp_glu", b.addr, stageMLP, true, false))
	}
	if b.rc.FusedOut("out") {
		fs = append(fs, f("parallel_order", b.addr, stageMLP, "attention_first", "mlp_first"))
	}
	if _, ok := b.role(b.sets[0].prefix + "q_norm"); ok {
		fs = append(fs, f("qk_norm", b.addr, stageNorms, "rms", "layer"))
	}
	return fs
}

// attentionKeys are the factors the attention score reads.
var attentionKeys = []string{"rope_layout", "attention_causal", "attention_scale", "joint_order"}

// attentionScales are the score scales tried: 0 (the schema's 1/√head_dim),
// 1/head_dim and 1 (no scale).
func attentionScales(headDim int) []any {
	return []any{0.0, 1 / float64(max(headDim, 1)), 1.0}
}

func actValues() []any {
	return []any{"identity", "silu", "gelu_tanh", "gelu_erf", "relu", "tanh", "sigmoid"}
}

func permutations(s []string) [][]string {
	if len(s) <= 1 {
		return [][]string{slices.Clone(s)}
	}
	var out [][]string
	for i := range s {
		rest := append(slices.Clone(s[:i]), s[i+1:]...)
		for _, p := range permutations(rest) {
			out = append(out, append([]string{s[i]}, p...))
		}
	}
	return out
}

// score evaluates the boundary where factor is first observable.
func (b *block) score(_ context.Context, factor string, a search.Assignment) (search.Score, error) {
	var fn func(search.Assignment) (search.Score, error)
	var keys []string
	switch factor {
	case "rope_layout", "attention_causal", "attention_scale":
		fn, keys = b.scoreAttention, attentionKeys
	case "joint_order":
		if len(b.sets) == 2 {
			fn, keys = b.scoreAttention, attentionKeys
		} else {
			fn, keys = b.scoreGate, []string{"modulation_order", "gate_fn", "joint_order"}
		}
	case "modulation_order", "modulation_plus_one":
		fn, keys = b.scoreModulation, []string{"modulation_order", "modulation_plus_one"}
	case "modulation_act":
		fn, keys = b.scoreModAct, []string{"modulation_act"}
	case "gate_fn":
		fn, keys = b.scoreGate, []string{"modulation_order", "gate_fn", "joint_order"}
	case "mlp_act", "mlp_glu", "parallel_order":
		fn, keys = b.scoreMLP, []string{"mlp_act", "mlp_glu", "parallel_order"}
	case "qk_norm":
		fn, keys = b.scoreQKNorm, []string{"qk_norm"}
	default:
		return search.Score{}, fmt.Errorf("factors: %s has no factor %q", b.addr, factor)
	}
	memo := keys[0] + ":" + factor
	if len(keys) > 0 {
		memo = strings.Join(keys, ",")
	}
	for _, k := range keys {
		memo += fmt.Sprintf("|%v", a[k])
	}
	if s, ok := b.memo[memo]; ok {
		return s, nil
	}
	s, err := fn(a)
	if err == nil {
		b.memo[memo] = s
	}
	return s, err
}
