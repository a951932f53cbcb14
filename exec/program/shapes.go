package program

import (
	"fmt"
	"math"
	"slices"

	"github.com/zflow/zflow/exec"
)

// inferShapes computes a node's output shapes from its input shapes (nil
// for an absent optional input), checking what the op requires of them.
func inferShapes(n *Node, in [][]int) ([][]int, error) {
	one := func(s []int) ([][]int, error) { return [][]int{slices.Clone(s)}, nil }
	x := in[0]
	switch n.Op {
	case OpLinear:
		w := in[1]
		if len(x) == 0 || len(w) != 2 || x[len(x)-1] != w[1] {
			return nil, fmt.Errorf("input %v does not fit weight %v ([out, in])", x, w)
		}
		if b := in[2]; b != nil && (len(b) != 1 || b[0] != w[0]) {
			return nil, fmt.Errorf("bias %v does not fit weight %v", b, w)
		}
		out := slices.Clone(x)
		out[len(out)-1] = w[0]
		return [][]int{out}, nil
	case OpNorm:
		g := n.Attrs.Norm.Group
		if len(x) == 0 {
			return nil, fmt.Errorf("input is a scalar")
		}
		last := x[len(x)-1]
		if g == 0 {
			g = last
		}
		if last%g != 0 {
			return nil, fmt.Errorf("group %d does not divide width %d", g, last)
		}
		for i, p := range in[1:] {
			if p != nil && (len(p) != 1 || p[0] != g) {
				return nil, fmt.Errorf("%s %v is not [%d]", []string{"γ", "β"}[i], p, g)
			}
		}
		return one(x)
	case OpModulate, OpGatedResidual:
		if n.Op == OpGatedResidual && !slices.Equal(x, in[1]) {
			return nil, fmt.Errorf("residual %v and branch %v differ", x, in[1])
		}
		return one(x)
	case OpRope, OpAct, OpCast:
		return one(x)
	case OpAttention:
		p := n.Attrs.Attention
		if len(x) != 3 || len(in[1]) != 3 || len(in[2]) != 3 || p.Heads <= 0 || x[2]%p.Heads != 0 {
			return nil, fmt.Errorf("q %v, k %v, v %v with %d heads", x, in[1], in[2], p.Heads)
		}
		if len(in) > 4 && in[4] != nil {
			g, err := exec.AttentionGeometry(x, in[1], in[2], p)
			if err != nil {
				return nil, err
			}
			if _, err := exec.BiasStrides(in[4], g.B, g.H, g.Sq, g.Sk); err != nil {
				return nil, err
			}
		}
		if len(in) > 5 && in[5] != nil && (len(in[5]) != 1 || in[5][0] != p.Heads) {
			return nil, fmt.Errorf("sinks %v for %d heads", in[5], p.Heads)
		}
		return one(x)
	case OpGLU:
		if !slices.Equal(x, in[1]) {
			return nil, fmt.Errorf("gate %v and value %v differ", x, in[1])
		}
		return one(x)
	case OpPermute:
		out, _, err := exec.PermuteShape(x, n.Attrs.Perm)
		if err != nil {
			return nil, err
		}
		return [][]int{out}, nil
	case OpAdd, OpMul, OpSub, OpDiv, OpMinimum, OpMaximum:
		s, err := exec.Broadcast(x, in[1])
		if err != nil {
			return nil, err
		}
		return [][]int{s}, nil
	case OpRound:
		return one(x)
	case OpQR:
		if len(x) < 2 || x[len(x)-1] < 1 || x[len(x)-2] < x[len(x)-1] {
			return nil, fmt.Errorf("qr of %v: want matrices [.., m, n] with m ≥ n ≥ 1", x)
		}
		return one(x)
	case OpArgMin:
		if len(x) == 0 || x[len(x)-1] < 1 {
			return nil, fmt.Errorf("argmin of %v: want rows of one entry or more", x)
		}
		return [][]int{slices.Clone(x[:len(x)-1])}, nil
	case OpMean:
		ax, err := exec.Axis(n.Attrs.Axis, len(x))
		if err != nil {
			return nil, err
		}
		return [][]int{append(slices.Clone(x[:ax]), x[ax+1:]...)}, nil
	case OpReshape:
		if exec.Numel(x) != exec.Numel(n.Attrs.Shape) {
			return nil, fmt.Errorf("reshape %v to %v", x, n.Attrs.Shape)
		}
		return one(n.Attrs.Shape)
	case OpSlice:
		ax, err := exec.Axis(n.Attrs.Axis, len(x))
		if err != nil {
			return nil, err
		}
		if n.Attrs.Start < 0 || n.Attrs.End < n.Attrs.Start || n.Attrs.End > x[ax] {
			return nil, fmt.Errorf("slice [%d:%d] of axis %d of %v", n.Attrs.Start, n.Attrs.End, ax, x)
		}
		out := slices.Clone(x)
		out[ax] = n.Attrs.End - n.Attrs.Start
		return [][]int{out}, nil
	case OpConcat:
		ax, err := exec.Axis(n.Attrs.Axis, len(x))
		if err != nil {
			return nil, err
		}
		out := slices.Clone(x)
		for _, s := range in[1:] {
			if len(s) != len(x) {
				return nil, fmt.Errorf("concat of %v and %v", x, s)
			}
			for i := range s {
				if i != ax && s[i] != x[i] {
					return nil, fmt.Errorf("concat of %v and %v along axis %d", x, s, ax)
				}
			}
			out[ax] += s[ax]
		}
		return [][]int{out}, nil
	case OpRepeat:
		ax, err := exec.Axis(n.Attrs.Axis, len(x))
		if err != nil {
			return nil, err
		}
		if n.Attrs.N < 1 {
			return nil, fmt.Errorf("repeat %d times", n.Attrs.N)
		}
		out := slices.Clone(x)
		out[ax] *= n.Attrs.N
		return [][]int{out}, nil
	case OpChunk:
		sizes, ax, err := exec.ChunkSizes(x, n.Attrs.N, n.Attrs.Axis)
		if err != nil {
			return nil, err
		}
		var outs [][]int
		for _, sz := range sizes {
			o := slices.Clone(x)
			o[ax] = sz
			outs = append(outs, o)
		}
		return outs, nil
	case OpTimestepEmbed:
		if len(x) != 1 {
			return nil, fmt.Errorf("timesteps %v are not 1-D", x)
		}
		return [][]int{{x[0], n.Attrs.Timestep.Dim}}, nil
	case OpRopeTable:
		axes, fa := n.Attrs.RopeTable.AxesDims, n.Attrs.RopeTable.FreqAxes
		switch {
		case fa != nil && (len(fa) == 0 || len(x) != 2 || len(axes) != 1 || len(fa) != axes[0]/2 || x[1] <= slices.Max(fa)):
			return nil, fmt.Errorf("positions %v and frequency axes %v do not make a table of widths %v", x, fa, axes)
		case fa == nil && (len(x) != 2 || x[1] != len(axes)):
			return nil, fmt.Errorf("positions %v are not [rows, %d axes]", x, len(axes))
		}
		w := 0
		for _, d := range axes {
			w += d
		}
		return [][]int{{x[0], w}, {x[0], w}}, nil
	case OpAngular:
		s, err := angularShape(x, in[1], in[2], n.Attrs.Angular)
		if err != nil {
			return nil, err
		}
		return [][]int{s}, nil
	case OpSegmentMask:
		if len(x) != 1 || x[0] < 2 || n.Attrs.N < 1 {
			return nil, fmt.Errorf("segment mask of bounds %v over %d rows: want a vector of two or more bounds and one row or more", x, n.Attrs.N)
		}
		return [][]int{{1, 1, n.Attrs.N, n.Attrs.N}}, nil
	case OpRelBucket:
		if len(x) != 1 || len(in[1]) != 1 {
			return nil, fmt.Errorf("relative buckets of positions %v and %v: want two vectors", x, in[1])
		}
		if err := n.Attrs.Bucket.check(); err != nil {
			return nil, err
		}
		return [][]int{{x[0], in[1][0]}}, nil
	case OpWhere:
		s, err := whereShape(x, in[1], in[2])
		if err != nil {
			return nil, err
		}
		return [][]int{s}, nil
	case OpSoftmax:
		if len(x) == 0 {
			return nil, fmt.Errorf("softmax of a scalar")
		}
		return one(x)
	case OpRoute:
		k := n.Attrs.Route.K
		if len(x) == 0 || k < 1 || k > x[len(x)-1] {
			return nil, fmt.Errorf("top %d of %v", k, x)
		}
		if len(in) > 1 && in[1] != nil && exec.Numel(in[1]) != x[len(x)-1] {
			return nil, fmt.Errorf("bias %v for %d experts", in[1], x[len(x)-1])
		}
		out := slices.Clone(x)
		out[len(out)-1] = k
		w := slices.Clone(out)
		if n.Attrs.Route.Dense {
			w = slices.Clone(x)
		}
		return [][]int{w, out}, nil
	case OpExperts:
		w1, w2 := in[3], in[4]
		if len(x) != 2 || len(w1) != 3 || len(w2) != 3 || w1[0] != w2[0] || w1[2] != x[1] || w2[1] != x[1] || w1[1] != n.Attrs.Experts.unitRows(w2[2]) {
			return nil, fmt.Errorf("tokens %v do not fit experts %v, %v", x, w1, w2)
		}
		switch {
		case in[1] == nil && in[2] == nil: // no routing: expert e over the e-th block of rows
			if x[0]%w1[0] != 0 {
				return nil, fmt.Errorf("%d rows are not %d experts' blocks", x[0], w1[0])
			}
		case in[1] == nil: // dense weights, one per expert
			if !slices.Equal(in[2], []int{x[0], w1[0]}) {
				return nil, fmt.Errorf("dense routing weights %v for tokens %v and %d experts", in[2], x, w1[0])
			}
		case !slices.Equal(in[1], in[2]) || len(in[1]) != 2 || in[1][0] != x[0]:
			return nil, fmt.Errorf("routes %v and %v for tokens %v", in[1], in[2], x)
		}
		if b := at(in, 5); b != nil && !slices.Equal(b, []int{w1[0], w1[1]}) {
			return nil, fmt.Errorf("bias %v for w1 %v", b, w1)
		}
		if b := at(in, 6); b != nil && !slices.Equal(b, []int{w2[0], w2[1]}) {
			return nil, fmt.Errorf("bias %v for w2 %v", b, w2)
		}
		if err := n.Attrs.Experts.check(n.Attrs.Act); err != nil {
			return nil, err
		}
		return [][]int{slices.Clone(x)}, nil
	case OpGather:
		if len(x) != 2 {
			return nil, fmt.Errorf("table %v is not [rows, width]", x)
		}
		return [][]int{append(slices.Clone(in[1]), x[1])}, nil
	case OpMaxPool2D:
		out, err := PoolShape(x, n.Attrs.Conv)
		if err != nil {
			return nil, err
		}
		return [][]int{out}, nil
	case OpConv2D:
		out, err := convShape(x, in[1], n.Attrs.Conv)
		if err != nil {
			return nil, err
		}
		if b := in[2]; b != nil && (len(b) != 1 || b[0] != out[1]) {
			return nil, fmt.Errorf("bias %v for %d filters", b, out[1])
		}
		return [][]int{out}, nil
	case OpSSMScan:
		if len(in) < 5 || len(in) > 6 {
			return nil, fmt.Errorf("%d inputs, not x, dt, A, B, C and an optional D", len(in))
		}
		var d []int
		if len(in) == 6 {
			d = in[5]
		}
		if _, err := exec.CheckSSMScan(x, in[1], in[2], in[3], in[4], d); err != nil {
			return nil, err
		}
		return one(x)
	case OpDeltaScan:
		if len(in) != 5 {
			return nil, fmt.Errorf("%d inputs, not q, k, v, g and beta", len(in))
		}
		if _, err := exec.CheckDeltaScan(x, in[1], in[2], in[3], in[4]); err != nil {
			return nil, err
		}
		return one(in[2])
	case OpMemoryScan:
		if len(in) != 5 {
			return nil, fmt.Errorf("%d inputs, not q, k, v, i and f", len(in))
		}
		if _, err := exec.CheckMemoryScan(x, in[1], in[2], in[3], in[4]); err != nil {
			return nil, err
		}
		if e := n.Attrs.Memory.Eps; !(e >= 0) || math.IsInf(float64(e), 0) {
			return nil, fmt.Errorf("memory_scan: eps %g is not a finite number ≥ 0", e)
		}
		return one(in[2])
	case OpRecurrence:
		if len(in) < 2 || len(in) > 3 {
			return nil, fmt.Errorf("%d inputs, not xg, whh and an optional bias", len(in))
		}
		var bias []int
		if len(in) == 3 {
			bias = in[2]
		}
		d, err := exec.CheckRecurrence(x, in[1], bias, n.Attrs.Recurrence)
		if err != nil {
			return nil, err
		}
		return [][]int{{d.B, d.L, d.H}}, nil
	case OpSinkhorn:
		if len(in) != 1 {
			return nil, fmt.Errorf("%d inputs, not x", len(in))
		}
		if err := exec.CheckSinkhorn(x, n.Attrs.Sinkhorn); err != nil {
			return nil, err
		}
		return one(x)
	case OpMatMul:
		if len(in) != 2 {
			return nil, fmt.Errorf("%d inputs, not a and b", len(in))
		}
		out, err := exec.CheckMatMul(x, in[1])
		if err != nil {
			return nil, err
		}
		return [][]int{out}, nil
	case OpFFT2Real:
		if len(in) != 1 {
			return nil, fmt.Errorf("%d inputs, not x", len(in))
		}
		if err := exec.CheckFFT2Real(x); err != nil {
			return nil, err
		}
		return one(x)
	case OpLinearAttention:
		out, err := linearAttentionShape(x, in[1], in[2], n.Attrs.LinearAttention)
		if err != nil {
			return nil, err
		}
		if len(in) > 3 && (len(in) != 5 || !slices.Equal(in[3], x) || !slices.Equal(in[4], in[1])) {
			return nil, fmt.Errorf("linear attention's numerator operands %v: want two, of q's %v and k's %v shapes", in[3:], x, in[1])
		}
		return [][]int{out}, nil
	case OpPatchify:
		_, packed, err := exec.PatchShapes(x, n.Attrs.Patch)
		if err != nil {
			return nil, err
		}
		return [][]int{packed}, nil
	case OpUnpatchify:
		p := n.Attrs.Patch
		if len(x) != 3 || p.Patch <= 0 || p.Height <= 0 || p.Width <= 0 {
			return nil, fmt.Errorf("input %v with patch %d, %d×%d", x, p.Patch, p.Height, p.Width)
		}
		q := p.Patch
		c := x[2] / (q * q)
		if c*q*q != x[2] || p.Height%q != 0 || p.Width%q != 0 || x[1] != (p.Height/q)*(p.Width/q) {
			return nil, fmt.Errorf("input %v does not hold %d×%d in patches of %d", x, p.Height, p.Width, q)
		}
		return [][]int{{x[0], c, p.Height, p.Width}}, nil
	}
	return nil, fmt.Errorf("unknown op %v", n.Op)
}
