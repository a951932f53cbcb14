package synth

import (
	"math"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/program"
)

// emptyRowsZeroed tries ch's attention under each 0/1 mask [B, Sq, Sk]
// of masks that leaves some query no key (a padding mask made pairwise,
// m_i·m_j: a padded query attends nowhere), those queries' results 0
// where the softmax would give NaN (torch ≥ 2.5's SDPA: a row of −∞
// scores has probabilities 0): the attention's result where the row of
// the mask holds a key, else 0. It keeps the first that reproduces t
// better than ch; false when none does.
func (s *synth) emptyRowsZeroed(ch *attnChoice, t *val, masks []*val) bool {
	if ch.q.shape[1] != t.shape[1] {
		return false
	}
	for _, m := range masks {
		if len(m.shape) != 3 || !hasEmptyRow(m) {
			continue
		}
		p := ch.params
		p.Mask = exec.MaskExplicit
		a := s.derive(&expr{op: program.OpAttention, attrs: program.Attrs{Attention: p}, args: []*val{ch.q, ch.k, ch.v, m, ch.bias, ch.sinks}, out: t.format, label: ch.label})
		keys := s.derive(&expr{op: program.OpMean, attrs: program.Attrs{Axis: 2}, args: []*val{m, nil}, out: f32, label: "a query's keys"})
		if a == nil || keys == nil {
			continue
		}
		if keys = s.reshape(keys, []int{m.shape[0], m.shape[1], 1}); keys == nil {
			continue
		}
		z := s.derive(&expr{op: program.OpWhere, args: []*val{keys, a, s.constant(0)}, out: t.format, label: "queries with no key give 0"})
		if z == nil {
			continue
		}
		sc := relRMS(t.format, z.data, t.data)
		if math.IsNaN(sc) || sc >= ch.score && !math.IsNaN(ch.score) {
			continue
		}
		ch.params, ch.result, ch.score = p, z, sc
		ch.label += " key_mask=true empty_rows_zero=true"
		return true
	}
	return false
}

// hasEmptyRow reports whether some row of m [B, Sq, Sk] is all zero.
func hasEmptyRow(m *val) bool {
	sk := m.shape[len(m.shape)-1]
	for r := 0; r+sk <= len(m.data); r += sk {
		empty := true
		for _, x := range m.data[r : r+sk] {
			if x != 0 {
				empty = false
				break
			}
		}
		if empty {
			return true
		}
	}
	return false
}
