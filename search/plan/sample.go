package plan

import (
	"fmt"
	"slices"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/program"
)

// Sampled rows. A linear computes each row of its result from the same row
// of x, and attention each query row from that row of q and every key: a
// candidate precision of either changes each row on its own, so the
// search scores it on a sample of rows where a boundary holds many, and
// runs the op on those rows only (a GEMM of 128 rows instead of 4608, an
// attention of 128 queries). That holds where the backend's rows do not
// depend on how many rows it is given (exec.RowIndependent: on the CPU
// both ops; on CUDA attention, not cuBLASLt's GEMM) and where the value is
// forced at its boundary as it is made, so that no op after it reads the
// rows not computed. The rows are blocks of sampleBlock spread over the
// sequence; a causal attention's sample is its first rows (a query's keys
// are the ones before it, which a block cut from the middle would
// misplace).
const (
	// DefaultSampleRows is how many rows the search scores a row-wise
	// op's candidates on, where the boundary holds more than twice as many.
	DefaultSampleRows = 128
	sampleBlock       = 16
)

// rowPlan is a sample of a tensor's rows and how to cut it.
type rowPlan struct {
	view   []int    // the shape the tensor is read as before cutting (nil: its own)
	axis   int      // the axis the blocks cut
	blocks [][2]int // ranges on that axis
	// rows: the rows of the result (of its values as [of, rowLen]) in the
	// order the sample holds them.
	rows       []int
	of, rowLen int
	// in: the node input the op reads the rows from, and how to cut it.
	in     int
	inView []int
	// whole: the op runs on every row (the backend's rows are not
	// independent of their number) and the sample is cut from its result.
	whole bool
}

// pickRows gathers rows of v (the result, whole).
func (p *rowPlan) pickRows(v []float32, rows []int) []float32 {
	out := make([]float32, 0, len(rows)*p.rowLen)
	for _, r := range rows {
		out = append(out, v[r*p.rowLen:(r+1)*p.rowLen]...)
	}
	return out
}

// spreadBlocks lists k rows of n (n > 2k) in blocks spread evenly: of
// sampleBlock rows, or a quarter of k for a small k (at least 4 blocks).
func spreadBlocks(n, k int) [][2]int {
	blk := max(1, min(sampleBlock, k/4))
	nb := max(1, k/blk)
	if nb == 1 {
		return [][2]int{{0, min(n, k)}}
	}
	out := make([][2]int, nb)
	for j := range out {
		a := j * (n - blk) / (nb - 1)
		out[j] = [2]int{a, a + blk}
	}
	return out
}

// samplePlan is how node slot s's result is sampled to rows rows, or nil
// where it is not (another op, a backend that does not say its rows are
// independent, too few rows, a mask or bias that has a query axis).
func (e *Evaluator) samplePlan(s *slot, rows int) *rowPlan {
	if s.kind != slotNode || len(s.sibs) != 1 {
		return nil
	}
	n := &e.r.P.Nodes[s.node]
	// A backend whose rows depend on how many it is given runs the op
	// whole; its result is still scored on the sample (what a download
	// and a comparison cost is the rows', not the tensor's).
	whole := !exec.RowsIndependent(e.B, n.Op.String())
	p := e.rowsOf(s, n, rows)
	if p != nil {
		p.whole = whole
	}
	return p
}

// rowsOf is samplePlan's sample of s's rows, whatever runs them.
func (e *Evaluator) rowsOf(s *slot, n *program.Node, rows int) *rowPlan {
	out := s.shape
	if len(out) == 0 {
		return nil
	}
	rowLen := out[len(out)-1]
	switch n.Op {
	case program.OpLinear:
		if rowLen == 0 || s.in[0] == nil {
			return nil
		}
		x := s.in[0].shape
		r := exec.Numel(out) / rowLen
		if len(x) == 0 || r <= 2*rows || exec.Numel(x)/max(1, x[len(x)-1]) != r {
			return nil
		}
		p := &rowPlan{view: []int{r, rowLen}, axis: 0, blocks: spreadBlocks(r, rows), of: r, rowLen: rowLen,
			in: 0, inView: []int{r, x[len(x)-1]}}
		for _, b := range p.blocks {
			for i := b[0]; i < b[1]; i++ {
				p.rows = append(p.rows, i)
			}
		}
		return p
	case program.OpAttention:
		a := n.Attrs.Attention
		if len(out) != 3 || s.in[0] == nil || len(s.in[0].shape) != 3 || len(s.in) > 3 && s.in[3] != nil ||
			len(s.in) > 4 && s.in[4] != nil || a.Mask != exec.MaskNone && a.Mask != exec.MaskCausal {
			return nil
		}
		bsz, sq := out[0], out[1]
		if sq <= 2*rows {
			return nil
		}
		p := &rowPlan{axis: 1, of: bsz * sq, rowLen: rowLen, in: 0}
		if a.Mask == exec.MaskCausal {
			p.blocks = [][2]int{{0, rows}}
		} else {
			p.blocks = spreadBlocks(sq, rows)
		}
		for b := range bsz {
			for _, bl := range p.blocks {
				for i := bl[0]; i < bl[1]; i++ {
					p.rows = append(p.rows, b*sq+i)
				}
			}
		}
		return p
	}
	return nil
}

// gather cuts the blocks of t (read as view) along axis on the backend;
// the caller frees the result.
func (e *Evaluator) gather(t exec.Tensor, view []int, axis int, blocks [][2]int) (exec.Tensor, error) {
	src := t
	if view != nil {
		v, err := e.B.Reshape(t, view)
		if err != nil {
			return nil, err
		}
		defer e.B.Free(v)
		src = v
	}
	parts := make([]exec.Tensor, 0, len(blocks))
	defer func() {
		for _, p := range parts {
			e.B.Free(p)
		}
	}()
	for _, b := range blocks {
		p, err := e.B.Slice(src, axis, b[0], b[1])
		if err != nil {
			return nil, err
		}
		parts = append(parts, p)
	}
	if len(parts) == 1 {
		return e.B.Cast(parts[0], parts[0].Format())
	}
	return e.B.Concat(parts, axis)
}

// sampleBlocks gives each the plan's rows of s block by block (the
// values and the rows they are, of the result's): cut from its tensor when
// it is made, else computed by running its node on those rows only, one
// block at a time, so that a comparison can stop after the first block
// that decides it. Only the sampled rows leave the backend; each may stop
// the walk.
func (e *Evaluator) sampleBlocks(s *slot, p *rowPlan, each func(vals []float32, rows []int) (stop bool)) (stopped bool, err error) {
	if s.b != nil || p.whole {
		b, err := e.make(s, false)
		if err != nil {
			return false, err
		}
		g, err := e.gather(b.t, p.view, p.axis, p.blocks)
		if err != nil {
			return false, err
		}
		defer e.B.Free(g)
		v, err := e.B.Download(g)
		if err != nil {
			return false, err
		}
		return each(v, p.rows), nil
	}
	n := &e.r.P.Nodes[s.node]
	ts := make([]exec.Tensor, len(s.in))
	var made []*slot
	defer func() {
		for _, in := range made {
			if in.dead && !in.kept {
				e.unmake(in)
			}
		}
	}()
	for j, in := range s.in {
		if in == nil {
			continue
		}
		wasMade := in.b != nil
		b, err := e.make(in, true)
		if err != nil {
			return false, err
		}
		if !wasMade {
			made = append(made, in)
		}
		ts[j] = b.t
	}
	x := ts[p.in]
	for _, gr := range blockGroups(len(p.blocks)) {
		v, err := e.runRows(n, s, ts, x, p, p.blocks[gr[0]:gr[1]])
		if err != nil {
			return false, fmt.Errorf("program: node %d (%s %s): sampled rows: %w", s.node, n.Op, n.Role, err)
		}
		if each(v, rowsOfBlocks(p, gr[0], gr[1])) {
			return true, nil
		}
	}
	return false, nil
}

// blockGroups is how the n blocks of a sample run: the first alone (a
// candidate that cannot win mostly shows it there, and stops), then the
// rest in one call. The work is the same as block by block on the CPU; a
// GPU runs the rest in one launch instead of n−1, each too small to fill
// it (16 query rows of an attention are a few hundred threads).
func blockGroups(n int) [][2]int {
	if n <= 1 {
		return [][2]int{{0, n}}
	}
	return [][2]int{{0, 1}, {1, n}}
}

// rowsOfBlocks is the rows of blocks [lo, hi) of the result, in the order
// the op gives them: batch by batch (an attention's rows are every
// batch's), each batch's blocks in order.
func rowsOfBlocks(p *rowPlan, lo, hi int) []int {
	k, off, w := 0, 0, 0
	for j, b := range p.blocks {
		switch {
		case j < lo:
			off += b[1] - b[0]
		case j < hi:
			w += b[1] - b[0]
		}
		k += b[1] - b[0]
	}
	var out []int
	for b := 0; b < len(p.rows)/k; b++ {
		out = append(out, p.rows[b*k+off:b*k+off+w]...)
	}
	return out
}

// runRows runs node n on blocks bl of its row input x (the other inputs
// whole) and downloads the result.
func (e *Evaluator) runRows(n *program.Node, s *slot, ts []exec.Tensor, x exec.Tensor, p *rowPlan, bl [][2]int) ([]float32, error) {
	g, err := e.gather(x, p.inView, p.axis, bl)
	if err != nil {
		return nil, err
	}
	defer e.B.Free(g)
	in := slices.Clone(ts)
	in[p.in] = g
	outs, err := program.RunNode(e.B, n, in)
	if err != nil {
		return nil, err
	}
	defer func() {
		for _, t := range outs {
			e.B.Free(t)
		}
	}()
	if len(outs) != 1 {
		return nil, fmt.Errorf("%d results, want 1", len(outs))
	}
	s.format = outs[0].Format()
	return e.B.Download(outs[0])
}
