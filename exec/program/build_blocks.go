package program

import (
	"fmt"
	"slices"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/semantics"
)

// block emits block i: its kind's recipe over the streams, with the
// block's boundary tapped on the values entering and leaving it.
func (b *builder) block(i int, blk *semantics.Block) error {
	addr := semantics.BlockAddress(i)
	if b.pass[addr] {
		return b.passBlock(addr, blk)
	}
	if !sameSet(blk.Streams, b.joint) {
		return fmt.Errorf("%s: the block covers streams %v; blocks over a subset of the streams %v are not supported", addr, blk.Streams, b.joint)
	}
	module := ""
	if blk.Boundary != nil {
		module = blk.Boundary.Module
	}
	seg := -1
	if module != "" {
		seg = b.begin(addr, module)
		for _, role := range sortedNames(blk.Boundary.Inputs) {
			port := blk.Boundary.Inputs[role]
			switch role {
			case "cond":
				b.tap(b.cond, module, port, true)
			case "joint":
			default:
				b.tap(b.stream[role], module, port, true)
			}
		}
	}
	r, ok := semantics.LookupRecipe(blk.Kind)
	if !ok {
		return fmt.Errorf("%s: block kind %q is not supported", addr, blk.Kind)
	}
	jointIn, jointOut, err := b.recipeBlock(addr, blk, r)
	if err != nil {
		return err
	}
	if module != "" {
		for _, role := range sortedNames(blk.Boundary.Inputs) {
			port := blk.Boundary.Inputs[role]
			if role == "joint" {
				if jointIn == "" {
					return fmt.Errorf("%s: boundary input %q: a %s block has no joined input", addr, role, blk.Kind)
				}
				b.tap(jointIn, module, port, true)
			}
		}
		for _, role := range sortedNames(blk.Boundary.Outputs) {
			port := blk.Boundary.Outputs[role]
			switch role {
			case "joint":
				if jointOut == "" {
					return fmt.Errorf("%s: boundary output %q: a %s block has no joined output", addr, role, blk.Kind)
				}
				b.tap(jointOut, module, port, false)
			case "cond":
				return fmt.Errorf("%s: boundary output %q: blocks do not output the conditioning", addr, role)
			default:
				b.tap(b.stream[role], module, port, false)
			}
		}
		b.end(seg)
	}
	return nil
}

// joinStreams joins the streams' rows in joint order.
func (b *builder) joinStreams(addr string) (string, error) {
	xs := make([]string, len(b.joint))
	for i, s := range b.joint {
		xs[i] = b.stream[s]
	}
	return b.join(xs, addr+".join")
}

// splitStreams cuts joined rows back into the streams.
func (b *builder) splitStreams(x, addr string) error {
	rows := make([]int, len(b.joint))
	for i, s := range b.joint {
		rows[i] = b.tokens[s]
	}
	parts, err := b.split(x, rows, addr+".split")
	if err != nil {
		return err
	}
	for i, s := range b.joint {
		b.stream[s] = parts[i]
	}
	return nil
}

// ropeLayout reads rope_layout at "positions".
func ropeLayout(doc *semantics.Document) (exec.RopeLayout, error) {
	s, err := doc.String("rope_layout", "positions")
	if err != nil {
		return 0, err
	}
	switch s {
	case "interleaved":
		return exec.RopeInterleaved, nil
	case "half":
		return exec.RopeHalf, nil
	}
	return 0, fmt.Errorf("rope_layout %q has no tables", s)
}

// join concatenates row sets along the sequence axis (one set: itself).
func (b *builder) join(xs []string, role string) (string, error) {
	if len(xs) == 1 {
		return xs[0], nil
	}
	return b.emit1(OpConcat, role, xs, Attrs{Axis: 1})
}

// split cuts x's sequence axis into consecutive pieces of the given rows
// (one piece: x itself).
func (b *builder) split(x string, rows []int, role string) ([]string, error) {
	if len(rows) == 1 {
		return []string{x}, nil
	}
	var out []string
	at := 0
	for i, n := range rows {
		s, err := b.emit1(OpSlice, fmt.Sprintf("%s.%d", role, i), []string{x}, Attrs{Axis: 1, Start: at, End: at + n})
		if err != nil {
			return nil, err
		}
		out = append(out, s)
		at += n
	}
	return out, nil
}

func sameSet(a, b []string) bool {
	x, y := slices.Clone(a), slices.Clone(b)
	slices.Sort(x)
	slices.Sort(y)
	return slices.Equal(x, y)
}
