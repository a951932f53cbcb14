package program

import (
	"fmt"
	"slices"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/semantics"
)

// A recipe node's attributes: literals, or bindings to the document's
// factors and the block's structure numbers (semantics.RecipeBinding).

// attrs resolves the attributes of an op that recipeOps emits as it is.
func (run *recipeRun) attrs(n *semantics.RecipeNode, name string, in []string) (Attrs, error) {
	var a Attrs
	act := func() (exec.ActKind, error) {
		s, err := run.str(n, "act", name)
		if err != nil {
			return 0, err
		}
		f, err := exec.ParseAct(s)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", name, err)
		}
		return f, nil
	}
	var err error
	switch n.Op {
	case "act", "glu", "gated_residual":
		a.Act, err = act()
	case "modulate":
		a.Modulate.PlusOne, err = run.boolean(n, "plus_one", name)
	case "concat":
		var ax float64
		ax, err = run.num(n, "axis", name)
		a.Axis = int(ax)
	case "rope":
		a.Rope, err = run.rope(n, name, in)
	case "attention":
		a.Attention, err = run.attention(n, name)
	}
	return a, err
}

// rope resolves a rotation by the model's tables.
func (run *recipeRun) rope(n *semantics.RecipeNode, name string, in []string) (exec.RopeParams, error) {
	b := run.b
	s, err := run.str(n, "layout", name)
	if err != nil {
		return exec.RopeParams{}, err
	}
	var layout exec.RopeLayout
	switch s {
	case "interleaved":
		layout = exec.RopeInterleaved
	case "half":
		layout = exec.RopeHalf
	default:
		return exec.RopeParams{}, fmt.Errorf("rope_layout %q has no tables", s)
	}
	if rows, seq := b.shape(in[1])[0], b.shape(in[0])[1]; rows != seq {
		return exec.RopeParams{}, fmt.Errorf("%s: RoPE tables have %d rows, the joined sequence %d", run.addr, rows, seq)
	}
	if run.blk == nil {
		return exec.RopeParams{}, fmt.Errorf("%s: a stage has no heads to rotate", run.addr)
	}
	rot, hd := b.rotary, run.blk.HeadDim
	if rot > hd {
		return exec.RopeParams{}, fmt.Errorf("%s: RoPE axes cover %d channels, more than the head width %d", run.addr, rot, hd)
	}
	if rot == hd {
		rot = 0
	}
	heads, err := run.num(n, "heads", name)
	return exec.RopeParams{Heads: int(heads), Layout: layout, RotaryDim: rot}, err
}

// attention resolves a scaled dot-product attention.
func (run *recipeRun) attention(n *semantics.RecipeNode, name string) (exec.AttentionParams, error) {
	var p exec.AttentionParams
	heads, err := run.num(n, "heads", name)
	if err != nil {
		return p, err
	}
	kv, err := run.num(n, "kv_heads", name)
	if err != nil {
		return p, err
	}
	causal, err := run.boolean(n, "causal", name)
	if err != nil {
		return p, err
	}
	scale, err := run.num(n, "scale", name)
	if err != nil {
		return p, err
	}
	p = exec.AttentionParams{Heads: int(heads), KVHeads: int(kv), Scale: float32(scale)}
	if causal {
		p.Mask = exec.MaskCausal
	}
	return p, nil
}

// binding parses a bound attribute and says where its factor is read:
// the block's address, the node's (name), or the one it names.
func (run *recipeRun) binding(s, name string) (semantics.RecipeBinding, string, error) {
	bd, err := semantics.ParseRecipeBinding(s)
	switch bd.At {
	case "":
		return bd, run.addr, err
	case "node":
		return bd, name, err
	}
	return bd, bd.At, err
}

// number resolves a binding that is a number: a product of structure
// numbers or a numeric factor.
func (run *recipeRun) number(s, name string) (float64, error) {
	bd, at, err := run.binding(s, name)
	if err != nil {
		return 0, err
	}
	if bd.Factor != "" {
		return run.b.doc.Number(bd.Factor, at)
	}
	if run.blk == nil && len(bd.Fields) > 0 && !slices.Equal(bd.Fields, []string{"model.hidden"}) {
		return 0, fmt.Errorf("%s: %s: a stage has no block numbers", name, s)
	}
	blk := run.blk
	if blk == nil {
		blk = &semantics.Block{}
	}
	fields := map[string]int{"block.heads": blk.Heads, "block.kv_heads": blk.KVHeads, "block.head_dim": blk.HeadDim,
		"block.mlp_width": blk.MLPWidth, "model.hidden": run.b.st.Hidden}
	v := 1
	for _, f := range bd.Fields {
		v *= fields[f]
	}
	return float64(v), nil
}

// num is an attribute that is a number: a literal or a binding (absent:
// 0).
func (run *recipeRun) num(n *semantics.RecipeNode, key, name string) (float64, error) {
	switch v := n.Attrs[key].(type) {
	case nil:
		return 0, nil
	case float64:
		return v, nil
	case string:
		return run.number(v, name)
	}
	return 0, fmt.Errorf("%s: attrs.%s %v is not a number", name, key, n.Attrs[key])
}

// str is an attribute bound to an enum factor.
func (run *recipeRun) str(n *semantics.RecipeNode, key, name string) (string, error) {
	s, ok := n.Attrs[key].(string)
	if !ok {
		return "", fmt.Errorf("%s: recipe %s: attrs.%s is not bound", name, run.r.Kind, key)
	}
	bd, at, err := run.binding(s, name)
	if err != nil {
		return "", err
	}
	return run.b.doc.String(bd.Factor, at)
}

// boolean is an attribute that is a boolean: a literal or a factor.
func (run *recipeRun) boolean(n *semantics.RecipeNode, key, name string) (bool, error) {
	switch v := n.Attrs[key].(type) {
	case bool:
		return v, nil
	case string:
		bd, at, err := run.binding(v, name)
		if err != nil {
			return false, err
		}
		return run.b.doc.Bool(bd.Factor, at)
	}
	return false, fmt.Errorf("%s: recipe %s: attrs.%s is not bound", name, run.r.Kind, key)
}
