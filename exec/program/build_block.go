package program

import (
	"fmt"
	"slices"

	"github.com/zflow/zflow/precision"
	"github.com/zflow/zflow/semantics"
)

// BlockInputs are the shapes of what a block built alone reads
// (BuildBlock): each stream's rows entering it, the conditioning vector
// and the RoPE tables (nil: absent).
type BlockInputs struct {
	Streams map[string][]int // [B, L, D] by stream name
	Cond    []int            // [B, D]
	Tables  []int            // cos and sin, [rows, W] each, W the rotary width
}

// Value names of a block built alone's inputs (Input values whose Source
// is the name itself).
const (
	BlockCond = "block:cond"
	BlockCos  = "block:cos"
	BlockSin  = "block:sin"
)

// BlockStream is the value name of a stream's rows entering a block built
// alone.
func BlockStream(stream string) string { return "block:" + stream }

// BuildBlock makes block i of doc alone, as Build makes it inside the
// model (the same recipe, the same nodes, taps and segment), from inputs
// given by shape: each stream's rows, the conditioning vector and the
// RoPE tables. It reads the document's factors at the block (and
// joint_order at "model", rope_layout at "positions"), as Build does; the
// program's outputs are the streams leaving the block, in joint order.
// A search builds a candidate's fragment with it and runs it teacher
// forced (search/plan's Fragment).
func BuildBlock(doc *semantics.Document, shapes Shapes, i int, in BlockInputs) (*Program, error) {
	st := &doc.Structure
	if i < 0 || i >= len(st.Blocks) {
		return nil, fmt.Errorf("program: block %d of %d", i, len(st.Blocks))
	}
	act, err := precision.ParseFormat(doc.Precision.Activations)
	if err != nil {
		return nil, fmt.Errorf("program: precision.activations: %w", err)
	}
	b := &builder{
		doc: doc, st: st, shapes: shapes, acts: act,
		p:      &Program{Values: map[string]*Value{}},
		stream: map[string]string{}, tokens: map[string]int{},
	}
	if err := b.jointOrder(); err != nil {
		return nil, fmt.Errorf("program: %w", err)
	}
	for _, s := range b.joint {
		shape, ok := in.Streams[s]
		if !ok || len(shape) != 3 {
			return nil, fmt.Errorf("program: %s: stream %s's rows are not given as [B, L, D] (%v)", semantics.BlockAddress(i), s, shape)
		}
		b.stream[s] = b.addValue(&Value{Name: BlockStream(s), Kind: Input, Source: BlockStream(s), Shape: slices.Clone(shape)})
		b.tokens[s] = shape[1]
	}
	if in.Cond != nil {
		b.cond = b.addValue(&Value{Name: BlockCond, Kind: Input, Source: BlockCond, Shape: slices.Clone(in.Cond)})
	}
	if in.Tables != nil {
		if len(in.Tables) != 2 {
			return nil, fmt.Errorf("program: %s: RoPE tables %v are not [rows, W]", semantics.BlockAddress(i), in.Tables)
		}
		b.cos = b.addValue(&Value{Name: BlockCos, Kind: Input, Source: BlockCos, Shape: slices.Clone(in.Tables)})
		b.sin = b.addValue(&Value{Name: BlockSin, Kind: Input, Source: BlockSin, Shape: slices.Clone(in.Tables)})
		b.rotary = in.Tables[1]
	}
	if err := b.block(i, &st.Blocks[i]); err != nil {
		return nil, fmt.Errorf("program: %w", err)
	}
	for _, s := range b.joint {
		b.p.Outputs = append(b.p.Outputs, b.stream[s])
	}
	if err := b.p.finalize(); err != nil {
		return nil, err
	}
	return b.p, nil
}

// NormInput is the value name of the argument of a norm built alone.
const NormInput = "norm:x"

// BuildNorm makes the norm of role r at address addr alone, as Build
// makes every norm (its kind, ε and offset the document's norm_kind,
// norm_eps and norm_offset at addr; its γ and β r's weights), over the
// last axis of an argument of shape x given as NormInput.
func BuildNorm(doc *semantics.Document, shapes Shapes, addr string, r semantics.Role, x []int) (*Program, error) {
	act, err := precision.ParseFormat(doc.Precision.Activations)
	if err != nil {
		return nil, fmt.Errorf("program: precision.activations: %w", err)
	}
	b := &builder{doc: doc, st: &doc.Structure, shapes: shapes, acts: act, p: &Program{Values: map[string]*Value{}}}
	in := b.addValue(&Value{Name: NormInput, Kind: Input, Source: NormInput, Shape: slices.Clone(x)})
	out, err := b.norm(in, addr, r, 0, "")
	if err != nil {
		return nil, fmt.Errorf("program: %w", err)
	}
	b.p.Outputs = []string{out}
	if err := b.p.finalize(); err != nil {
		return nil, err
	}
	return b.p, nil
}
