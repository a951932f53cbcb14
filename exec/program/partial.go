package program

import (
	"fmt"

	"github.com/zflow/zflow/semantics"
)

// BuildPartial builds the program of a document whose holes are blocks
// only (semantics.Hole), for a teacher-forced check: each undetermined
// block passes its captured inputs on as its outputs (a cast to the
// activations' format, tapped at the block's output ports), so that
// teacher forcing replaces them by the reference's values and every
// boundary before and after the block is still computed and compared.
// Its result means nothing free running; only a check (check.Run) uses
// it, and it refuses a hole that is not a block, and a block whose
// boundary does not give each stream's input and output.
func BuildPartial(doc *semantics.Document, shapes Shapes) (*Program, error) {
	pass := map[string]bool{}
	for _, h := range doc.Holes() {
		if !isBlockAddress(&doc.Structure, h.Address) {
			return nil, fmt.Errorf("program: %s is not expressed (%s), and a partial program passes undetermined blocks only", h.Address, h.Problem)
		}
		pass[h.Address] = true
	}
	return build(doc, shapes, pass)
}

func isBlockAddress(st *semantics.Structure, addr string) bool {
	for i := range st.Blocks {
		if semantics.BlockAddress(i) == addr {
			return true
		}
	}
	return false
}

// PassedTaps lists the taps on the values p passes through undetermined
// blocks, in creation order: the blocks' outputs (In false), which teacher
// forcing must replace, and the same values where later modules read them.
func (p *Program) PassedTaps() []Tap {
	var out []Tap
	for _, name := range p.Passed {
		out = append(out, p.Values[name].Taps...)
	}
	return out
}

// passesUnjoined: a partial program that passes every block, each by its
// streams' own outputs, and builds no RoPE tables, never joins the
// streams, so it needs no joint order (read from the blocks, which are
// undetermined); the streams keep the structure's order.
func (b *builder) passesUnjoined() bool {
	if len(b.pass) == 0 || len(b.pass) < len(b.st.Blocks) || b.st.Positions != nil && !b.skipPositions() {
		return false
	}
	for _, blk := range b.st.Blocks {
		if blk.Boundary == nil || blk.Boundary.Outputs["joint"] != "" {
			return false
		}
	}
	b.joint = nil
	for _, s := range b.st.Streams {
		b.joint = append(b.joint, s.Name)
	}
	return true
}

// skipPositions: a partial program that passes every block has no use
// for RoPE tables (only blocks read them), and leaves them out when the
// document does not say how they are made (the layout is read from the
// blocks, which are undetermined).
func (b *builder) skipPositions() bool {
	if len(b.pass) == 0 || len(b.pass) < len(b.st.Blocks) || b.st.Positions == nil {
		return false
	}
	_, err := b.doc.String("rope_layout", "positions")
	return err != nil
}

// passBlock emits an undetermined block as the pass BuildPartial
// describes: per stream when its boundary gives each stream's output,
// else over the joined rows (boundary output "joint"), split back after.
func (b *builder) passBlock(addr string, blk *semantics.Block) error {
	bd := blk.Boundary
	if bd == nil || bd.Module == "" {
		return fmt.Errorf("%s: the block is undetermined and has no captured boundary to pass it by", addr)
	}
	joint := bd.Outputs["joint"] != ""
	for _, s := range b.joint {
		if !joint && bd.Outputs[s] == "" {
			return fmt.Errorf("%s: the block is undetermined and its boundary gives neither the %s stream's output nor the joined rows'", addr, s)
		}
	}
	seg := b.begin(addr, bd.Module)
	for _, role := range sortedNames(bd.Inputs) {
		switch port := bd.Inputs[role]; role {
		case "cond":
			b.tap(b.cond, bd.Module, port, true)
		case "joint":
		default:
			b.tap(b.stream[role], bd.Module, port, true)
		}
	}
	pass := func(x, port, role string) (string, error) {
		out, err := b.emit1(OpCast, addr+"."+role+".passed", []string{x}, Attrs{Format: b.acts})
		if err != nil {
			return "", err
		}
		b.tap(out, bd.Module, port, false)
		b.p.Passed = append(b.p.Passed, out)
		return out, nil
	}
	if joint {
		x, err := b.joinStreams(addr)
		if err != nil {
			return err
		}
		b.tap(x, bd.Module, bd.Inputs["joint"], true)
		out, err := pass(x, bd.Outputs["joint"], "joint")
		if err != nil {
			return err
		}
		if err := b.splitStreams(out, addr); err != nil {
			return err
		}
	} else {
		for _, s := range b.joint {
			out, err := pass(b.stream[s], bd.Outputs[s], s)
			if err != nil {
				return err
			}
			b.stream[s] = out
		}
	}
	b.end(seg)
	return nil
}
