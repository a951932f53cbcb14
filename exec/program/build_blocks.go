package program

import (
	"fmt"
	"slices"

	"github.com/zflow/zflow/semantics"
)

// block emits block i: its kind's dataflow over the streams, with the
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
	var jointIn, jointOut string
	var err error
	switch blk.Kind {
	case "dual_stream":
		err = b.dualStream(addr, blk)
	case "single_stream_parallel":
		jointIn, jointOut, err = b.singleStream(addr, blk, true)
	case "single_stream":
		jointIn, jointOut, err = b.singleStream(addr, blk, false)
	case "decoder":
		jointIn, jointOut, err = b.decoder(addr, blk)
	default:
		err = fmt.Errorf("%s: block kind %q is not supported", addr, blk.Kind)
	}
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

// dualStream: per stream (own weights) modulation of 2 groups, norm1 and
// modulate; one joint attention; per stream out projection, gated
// residual, norm2, modulate, MLP, gated residual.
func (b *builder) dualStream(addr string, blk *semantics.Block) error {
	order, err := b.doc.OrderAt("modulation_order", addr)
	if err != nil {
		return err
	}
	mods := map[string][]map[string]string{}
	var parts []attnPart
	for _, s := range b.joint {
		p := s + "."
		if mods[s], err = b.modulation(addr, p, blk.Roles[p+"modulation"], order, 2); err != nil {
			return err
		}
		n, err := b.norm(b.stream[s], addr+"."+p+"norm1", blk.Roles[p+"norm1"], 0, "")
		if err != nil {
			return err
		}
		h, err := b.modulate(n, mods[s][0], addr, p+"modulate1")
		if err != nil {
			return err
		}
		parts = append(parts, attnPart{prefix: p, x: h})
	}
	attn, err := b.attention(addr, blk, parts)
	if err != nil {
		return err
	}
	for j, s := range b.joint {
		p := s + "."
		o, err := b.linear(attn[j], addr+"."+p+"out", blk.Roles[p+"out"])
		if err != nil {
			return err
		}
		x, err := b.gated(b.stream[s], o, mods[s][0]["gate"], addr, p+"residual1")
		if err != nil {
			return err
		}
		n, err := b.norm(x, addr+"."+p+"norm2", blk.Roles[p+"norm2"], 0, "")
		if err != nil {
			return err
		}
		h, err := b.modulate(n, mods[s][1], addr, p+"modulate2")
		if err != nil {
			return err
		}
		m, err := b.mlp(h, addr, p, blk, true)
		if err != nil {
			return err
		}
		if b.stream[s], err = b.gated(x, m, mods[s][1]["gate"], addr, p+"residual2"); err != nil {
			return err
		}
	}
	return nil
}

// singleStream: one weight set over the joined rows. Parallel: one
// modulated norm feeds attention and MLP, out projects [attention, MLP]
// (parallel_order), one gated residual. Sequential: attention then MLP,
// each with its own modulated norm and gated residual.
func (b *builder) singleStream(addr string, blk *semantics.Block, parallel bool) (jointIn, jointOut string, err error) {
	x, err := b.joinStreams(addr)
	if err != nil {
		return "", "", err
	}
	jointIn = x
	order, err := b.doc.OrderAt("modulation_order", addr)
	if err != nil {
		return "", "", err
	}
	groups := 2
	if parallel {
		groups = 1
	}
	mods, err := b.modulation(addr, "", blk.Roles["modulation"], order, groups)
	if err != nil {
		return "", "", err
	}
	normRole := "norm1"
	if parallel {
		normRole = "norm"
	}
	n, err := b.norm(x, addr+"."+normRole, blk.Roles[normRole], 0, "")
	if err != nil {
		return "", "", err
	}
	h, err := b.modulate(n, mods[0], addr, "modulate1")
	if err != nil {
		return "", "", err
	}
	attn, err := b.attention(addr, blk, []attnPart{{x: h}})
	if err != nil {
		return "", "", err
	}
	if parallel {
		m, err := b.mlp(h, addr, "", blk, false)
		if err != nil {
			return "", "", err
		}
		po, err := b.doc.String("parallel_order", addr)
		if err != nil {
			return "", "", err
		}
		cat := []string{attn[0], m}
		if po == "mlp_first" {
			cat = []string{m, attn[0]}
		}
		c, err := b.emit1(OpConcat, addr+".parallel", cat, Attrs{Axis: -1})
		if err != nil {
			return "", "", err
		}
		o, err := b.linear(c, addr+".out", blk.Roles["out"])
		if err != nil {
			return "", "", err
		}
		if x, err = b.gated(x, o, mods[0]["gate"], addr, "residual1"); err != nil {
			return "", "", err
		}
	} else {
		o, err := b.linear(attn[0], addr+".out", blk.Roles["out"])
		if err != nil {
			return "", "", err
		}
		if x, err = b.gated(x, o, mods[0]["gate"], addr, "residual1"); err != nil {
			return "", "", err
		}
		n, err := b.norm(x, addr+".norm2", blk.Roles["norm2"], 0, "")
		if err != nil {
			return "", "", err
		}
		h, err := b.modulate(n, mods[1], addr, "modulate2")
		if err != nil {
			return "", "", err
		}
		m, err := b.mlp(h, addr, "", blk, true)
		if err != nil {
			return "", "", err
		}
		if x, err = b.gated(x, m, mods[1]["gate"], addr, "residual2"); err != nil {
			return "", "", err
		}
	}
	return jointIn, x, b.splitStreams(x, addr)
}

// decoder: x + attention(norm(x)), then x + MLP(norm(x)), plain adds.
func (b *builder) decoder(addr string, blk *semantics.Block) (jointIn, jointOut string, err error) {
	x, err := b.joinStreams(addr)
	if err != nil {
		return "", "", err
	}
	jointIn = x
	n, err := b.norm(x, addr+".attn_norm", blk.Roles["attn_norm"], 0, "")
	if err != nil {
		return "", "", err
	}
	attn, err := b.attention(addr, blk, []attnPart{{x: n}})
	if err != nil {
		return "", "", err
	}
	o, err := b.linear(attn[0], addr+".out", blk.Roles["out"])
	if err != nil {
		return "", "", err
	}
	if x, err = b.emit1(OpAdd, addr+".residual1", []string{x, o}, Attrs{}); err != nil {
		return "", "", err
	}
	if n, err = b.norm(x, addr+".mlp_norm", blk.Roles["mlp_norm"], 0, ""); err != nil {
		return "", "", err
	}
	m, err := b.mlp(n, addr, "", blk, true)
	if err != nil {
		return "", "", err
	}
	if x, err = b.emit1(OpAdd, addr+".residual2", []string{x, m}, Attrs{}); err != nil {
		return "", "", err
	}
	return jointIn, x, b.splitStreams(x, addr)
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

func sameSet(a, b []string) bool {
	x, y := slices.Clone(a), slices.Clone(b)
	slices.Sort(x)
	slices.Sort(y)
	return slices.Equal(x, y)
}
