package synth

import (
	"fmt"
	"slices"

	"github.com/zflow/zflow/exec"
)

// ownTables tries attention whose q and k each take their own RoPE
// table: two different tables of one width, each with its operand's
// rows (a cross-attention whose query and key rows carry positions of
// their own, e.g. two streams' times, so the scores see their
// difference). Tried only where every one-table form fails.
func (s *synth) ownTables(triples [][3]*val, tables [][2]*val, headDims []int, t *val, try func(attnChoice)) {
	width := t.shape[2]
	for _, tr := range triples {
		q, k, v := tr[0], tr[1], tr[2]
		if q.shape[2] != width || q.shape[1] != t.shape[1] {
			continue
		}
		for _, tq := range tables {
			for _, tk := range tables {
				tw := tq[0].shape[len(tq[0].shape)-1]
				if tq[0] == tk[0] || tk[0].shape[len(tk[0].shape)-1] != tw ||
					tableRows(tq[0]) != q.shape[1] || tableRows(tk[0]) != k.shape[1] ||
					tq[0].perHead != tk[0].perHead || slices.Equal(tq[0].data, tk[0].data) {
					continue
				}
				s.ownTablesOf(q, k, v, tq, tk, headDims, width, try)
			}
		}
	}
}

// ownTablesOf tries one (q table, k table) pair over every head width,
// causality and layout, as the one-table scan does.
func (s *synth) ownTablesOf(q, k, v *val, tq, tk [2]*val, headDims []int, width int, try func(attnChoice)) {
	tw := tq[0].shape[len(tq[0].shape)-1]
	parts := joinedParts(k)
	for _, d := range headDims {
		if width%d != 0 || k.shape[2]%d != 0 || (width/d)%(k.shape[2]/d) != 0 {
			continue
		}
		p := exec.AttentionParams{Heads: width / d, KVHeads: k.shape[2] / d}
		// a table wider than a head rotates the whole width before the
		// heads split (each head its own frequencies)
		hq, hk, rd := p.Heads, p.KVHeads, d
		if tw > d {
			if tw != width || k.shape[2] != width {
				continue
			}
			hq, hk, rd = 1, 1, width
		}
		for _, causal := range []bool{false, true} {
			pp := p
			if causal {
				pp.Mask = exec.MaskCausal
			}
			for _, layout := range []exec.RopeLayout{exec.RopeHalf, exec.RopeInterleaved} {
				rq, rk := s.rotate(q, tq, layout, hq, rd), s.rotate(k, tk, layout, hk, rd)
				if rq == nil || rk == nil {
					continue
				}
				label := fmt.Sprintf("heads=%d kv=%d causal=%v rope=%s q,k own tables", pp.Heads, pp.KVHeads, causal, layout)
				try(attnChoice{q: rq, k: rk, v: v, headDim: d, rope: layout, cos: tq[0], sin: tq[1], params: pp, label: label, keyParts: parts})
			}
		}
	}
}
