package synth

import (
	"math"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/program"
)

// Refining an attention of at least sampledAttentionRows query rows
// scores its candidates (scale, cap, window, blocks, ALiBi, bias) at
// sampledAttentionAt rows, evenly spaced, each at its own position; the
// best is then scored on every row. The parameters a refinement fits are
// the same on every row, and a long sequence's whole attention per
// candidate (PEGASUS-X's 1,024 rows over 1,056 keys) costs minutes.
const (
	sampledAttentionRows = 256
	sampledAttentionAt   = 64
)

// attnSample is an attention's target at a few query rows: rel are the
// rows of the target, pos their positions among the attention's queries.
type attnSample struct {
	rel, pos []int
	want     *val
}

// sampleAttention is the sample refine scores a choice on, or nil where
// the target is too short to sample or not laid out [B, S, W].
func sampleAttention(ch *attnChoice, t *val) *attnSample {
	n := t.shape[1]
	if n < sampledAttentionRows || len(t.shape) != 3 || len(ch.q.shape) != 3 {
		return nil
	}
	start := 0
	if ch.q.shape[1] != n {
		start = ch.rows
	}
	if start < 0 || start+n > ch.q.shape[1] {
		return nil
	}
	sm := &attnSample{rel: make([]int, sampledAttentionAt), pos: make([]int, sampledAttentionAt)}
	for i := range sm.rel {
		sm.rel[i] = i * n / sampledAttentionAt
		sm.pos[i] = start + sm.rel[i]
	}
	sm.want = takeRows(t, 1, sm.rel)
	return sm
}

// score runs the choice's attention with p (mask and bias as given) at
// the sample's rows: the queries, and any per-query axis of mask and
// bias, gathered; the positions the mask kind, window and blocks make
// visible written into an explicit mask at the rows' own positions.
// +Inf where it cannot run.
func (sm *attnSample) score(s *synth, ch *attnChoice, p exec.AttentionParams, mask, bias *val, r exec.Round, out *val) float64 {
	sq, sk := ch.q.shape[1], ch.k.shape[1]
	per := func(x *val) *val {
		if x == nil || len(x.shape) < 2 || x.shape[len(x.shape)-2] != sq || sq == 1 {
			return x
		}
		return takeRows(x, len(x.shape)-2, sm.pos)
	}
	var vis *val
	if p.Mask == exec.MaskCausal || p.Window > 0 || p.Block > 0 || mask != nil {
		if mask != nil && (len(mask.shape) < 2 || len(mask.shape) > 3 || mask.shape[len(mask.shape)-1] != sk) {
			return math.Inf(1)
		}
		m := per(mask)
		batch := 1
		if m != nil && len(m.shape) == 3 {
			batch = m.shape[0]
		}
		ns := len(sm.pos)
		vis = &val{shape: []int{batch, ns, sk}, data: make([]float32, batch*ns*sk), format: f32}
		pre := sk - sq
		for b := range batch {
			for i, q := range sm.pos {
				for j := range sk {
					ok := true
					switch {
					case p.Block > 0:
						ok = j < pre || q/p.Block == (j-pre)/p.Block
					case p.Mask == exec.MaskCausal:
						ok = j <= q && (p.Window == 0 || j > q-p.Window)
					case p.Window > 0:
						ok = j > q-p.Window && j < q+p.Window
					}
					if ok && m != nil {
						rows := m.shape[len(m.shape)-2]
						mb := 0
						if len(m.shape) == 3 && m.shape[0] > 1 {
							mb = b
						}
						ri := i
						if rows == 1 {
							ri = 0
						}
						ok = m.data[(mb*rows+ri)*sk+j] != 0
					}
					if ok {
						vis.data[(b*ns+i)*sk+j] = 1
					}
				}
			}
		}
		p.Mask, p.Window, p.Block = exec.MaskExplicit, 0, 0
	}
	e := &expr{op: program.OpAttention, attrs: program.Attrs{Attention: p}, args: []*val{takeRows(ch.q, 1, sm.pos), ch.k, ch.v, vis, per(bias), ch.sinks}, out: out.format, round: r}
	y, err := s.ev.run(e)
	if err != nil || y.numel() != sm.want.numel() {
		return math.Inf(1)
	}
	return relRMS(out.format, y.data, sm.want.data)
}
