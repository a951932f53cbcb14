package program

import (
	"fmt"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/semantics"
)

// attnPart is one weight set's rows entering a joint attention: the role
// prefix of its q/k/v weights and its (normed, modulated) rows.
type attnPart struct {
	prefix string
	x      string
}

// attention emits q/k/v for each part, their q/k norms, one attention over
// the parts' rows joined in order (with RoPE when the model has tables),
// and returns each part's rows of the result.
func (b *builder) attention(addr string, blk *semantics.Block, parts []attnPart) ([]string, error) {
	qkNorm, err := b.doc.String("qk_norm", addr)
	if err != nil {
		return nil, err
	}
	var qs, ks, vs []string
	var rows []int
	for _, pt := range parts {
		proj := func(name string, heads int) (string, error) {
			out, err := b.linear(pt.x, addr+"."+pt.prefix+name, blk.Roles[pt.prefix+name])
			if err != nil {
				return "", err
			}
			if w := b.shape(out)[2]; w != heads*blk.HeadDim {
				return "", fmt.Errorf("%s.%s%s: width %d is not %d heads × %d", addr, pt.prefix, name, w, heads, blk.HeadDim)
			}
			return out, nil
		}
		q, err := proj("q", blk.Heads)
		if err != nil {
			return nil, err
		}
		k, err := proj("k", blk.KVHeads)
		if err != nil {
			return nil, err
		}
		v, err := proj("v", blk.KVHeads)
		if err != nil {
			return nil, err
		}
		rq, hasQ := blk.Roles[pt.prefix+"q_norm"]
		rk, hasK := blk.Roles[pt.prefix+"k_norm"]
		if (qkNorm != "none") != (hasQ && hasK) {
			return nil, fmt.Errorf("%s: qk_norm is %q but the block's %sq_norm/%sk_norm roles are present: %v/%v", addr, qkNorm, pt.prefix, pt.prefix, hasQ, hasK)
		}
		if qkNorm != "none" {
			if q, err = b.norm(q, addr+"."+pt.prefix+"q_norm", rq, blk.HeadDim, qkNorm); err != nil {
				return nil, err
			}
			if k, err = b.norm(k, addr+"."+pt.prefix+"k_norm", rk, blk.HeadDim, qkNorm); err != nil {
				return nil, err
			}
		}
		qs, ks, vs = append(qs, q), append(ks, k), append(vs, v)
		rows = append(rows, b.shape(q)[1])
	}
	q, err := b.join(qs, addr+".joint_q")
	if err != nil {
		return nil, err
	}
	k, err := b.join(ks, addr+".joint_k")
	if err != nil {
		return nil, err
	}
	v, err := b.join(vs, addr+".joint_v")
	if err != nil {
		return nil, err
	}
	if q, k, err = b.rope(q, k, addr, blk); err != nil {
		return nil, err
	}
	causal, err := b.doc.Bool("attention_causal", addr)
	if err != nil {
		return nil, err
	}
	scale, err := b.doc.Number("attention_scale", addr)
	if err != nil {
		return nil, err
	}
	p := exec.AttentionParams{Heads: blk.Heads, KVHeads: blk.KVHeads, Scale: float32(scale)}
	if causal {
		p.Mask = exec.MaskCausal
	}
	a, err := b.emit1(OpAttention, addr+".attention", []string{q, k, v, ""}, Attrs{Attention: p})
	if err != nil {
		return nil, err
	}
	return b.split(a, rows, addr+".attention_rows")
}

// rope rotates q and k by the model's tables, when it has them.
func (b *builder) rope(q, k, addr string, blk *semantics.Block) (string, string, error) {
	if b.cos == "" {
		return q, k, nil
	}
	layout, err := ropeLayout(b.doc)
	if err != nil {
		return "", "", err
	}
	if n, rows := b.shape(b.cos)[0], b.shape(q)[1]; n != rows {
		return "", "", fmt.Errorf("%s: RoPE tables have %d rows, the joined sequence %d", addr, n, rows)
	}
	rot := b.rotary
	if rot > blk.HeadDim {
		return "", "", fmt.Errorf("%s: RoPE axes cover %d channels, more than the head width %d", addr, rot, blk.HeadDim)
	}
	if rot == blk.HeadDim {
		rot = 0
	}
	q, err = b.emit1(OpRope, addr+".rope_q", []string{q, b.cos, b.sin}, Attrs{Rope: exec.RopeParams{Heads: blk.Heads, Layout: layout, RotaryDim: rot}})
	if err != nil {
		return "", "", err
	}
	k, err = b.emit1(OpRope, addr+".rope_k", []string{k, b.cos, b.sin}, Attrs{Rope: exec.RopeParams{Heads: blk.KVHeads, Layout: layout, RotaryDim: rot}})
	return q, k, err
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
