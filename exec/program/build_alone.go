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
	b, err := aloneBuilder(doc, shapes)
	if err != nil {
		return nil, err
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
	var outs []string
	for _, s := range b.joint {
		outs = append(outs, b.stream[s])
	}
	return b.finish(outs...)
}

// NormInput is the value name of the argument of a norm built alone.
const NormInput = "norm:x"

// BuildNorm makes the norm of role r at address addr alone, as Build
// makes every norm (its kind, ε and offset the document's norm_kind,
// norm_eps and norm_offset at addr; its γ and β r's weights), over the
// last axis of an argument of shape x given as NormInput.
func BuildNorm(doc *semantics.Document, shapes Shapes, addr string, r semantics.Role, x []int) (*Program, error) {
	b, err := aloneBuilder(doc, shapes)
	if err != nil {
		return nil, err
	}
	in := b.addValue(&Value{Name: NormInput, Kind: Input, Source: NormInput, Shape: slices.Clone(x)})
	out, err := b.norm(in, addr, r, 0, "")
	if err != nil {
		return nil, fmt.Errorf("program: %w", err)
	}
	return b.finish(out)
}

// Value names of the final stage built alone's inputs.
const (
	FinalX    = "final:x"
	FinalCond = "final:cond"
)

// BuildFinal makes the final stage alone, as Build makes it after the
// blocks, on its stream's rows x (FinalX) and the conditioning vector cond
// (FinalCond; nil: none); its output is the head's result, the latents'
// patches not undone.
func BuildFinal(doc *semantics.Document, shapes Shapes, x, cond []int) (*Program, error) {
	b, err := aloneBuilder(doc, shapes)
	if err != nil {
		return nil, err
	}
	b.stream[doc.Structure.Final.Stream] = b.addValue(&Value{Name: FinalX, Kind: Input, Source: FinalX, Shape: slices.Clone(x)})
	if cond != nil {
		b.cond = b.addValue(&Value{Name: FinalCond, Kind: Input, Source: FinalCond, Shape: slices.Clone(cond)})
	}
	y, err := b.final()
	if err != nil {
		return nil, fmt.Errorf("program: %w", err)
	}
	return b.finish(y)
}

// ConditioningTimestep is the value name of the timestep the conditioning
// built alone reads; its pooled input is InputValue("pooled").
const ConditioningTimestep = stepTimestep

// BuildConditioning makes the conditioning vector's stage alone, as Build
// makes it, from a timestep (ConditioningTimestep, [1]) and, with a pooled
// path, the pooled input of shape pooled (InputValue("pooled")).
func BuildConditioning(doc *semantics.Document, shapes Shapes, pooled []int) (*Program, error) {
	b, err := aloneBuilder(doc, shapes)
	if err != nil {
		return nil, err
	}
	b.addValue(&Value{Name: stepTimestep, Kind: Input, Source: stepTimestep, Shape: []int{1}})
	if pooled != nil {
		b.addValue(&Value{Name: InputValue("pooled"), Kind: Input, Source: InputValue("pooled"), Shape: slices.Clone(pooled)})
	}
	if err := b.conditioning(); err != nil {
		return nil, fmt.Errorf("program: %w", err)
	}
	return b.finish(b.cond)
}

// BuildEmbedder makes embedder i alone, as Build makes it, from its input
// of shape x (InputValue of its input's role).
func BuildEmbedder(doc *semantics.Document, shapes Shapes, i int, x []int) (*Program, error) {
	st := &doc.Structure
	if i < 0 || i >= len(st.Embedders) {
		return nil, fmt.Errorf("program: embedder %d of %d", i, len(st.Embedders))
	}
	b, err := aloneBuilder(doc, shapes)
	if err != nil {
		return nil, err
	}
	e := &st.Embedders[i]
	b.addValue(&Value{Name: InputValue(e.Input), Kind: Input, Source: InputValue(e.Input), Shape: slices.Clone(x)})
	if err := b.embedder(e); err != nil {
		return nil, fmt.Errorf("program: %w", err)
	}
	return b.finish(b.stream[e.Stream])
}

// aloneBuilder is a builder for a part built alone.
func aloneBuilder(doc *semantics.Document, shapes Shapes) (*builder, error) {
	act, err := precision.ParseFormat(doc.Precision.Activations)
	if err != nil {
		return nil, fmt.Errorf("program: precision.activations: %w", err)
	}
	return &builder{doc: doc, st: &doc.Structure, shapes: shapes, acts: act, p: &Program{Values: map[string]*Value{}},
		stream: map[string]string{}, tokens: map[string]int{}, alone: true}, nil
}

// finish makes outs the program's outputs and checks the program.
func (b *builder) finish(outs ...string) (*Program, error) {
	b.p.Outputs = outs
	if err := b.p.finalize(); err != nil {
		return nil, err
	}
	return b.p, nil
}
