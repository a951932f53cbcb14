package program

import (
	"fmt"
	"math"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/precision"
)

// RunNode executes one node on the backend.
func RunNode(b exec.Backend, n *Node, in []exec.Tensor) ([]exec.Tensor, error) {
	one := func(t exec.Tensor, err error) ([]exec.Tensor, error) {
		if err != nil {
			return nil, err
		}
		return []exec.Tensor{t}, nil
	}
	a := &n.Attrs
	switch n.Op {
	case OpLinear:
		return one(b.Linear(in[0], in[1], in[2], n.Spec))
	case OpNorm:
		return one(b.Norm(in[0], in[1], in[2], a.Norm, n.Spec))
	case OpModulate:
		return one(b.Modulate(in[0], in[1], in[2], a.Modulate, n.Spec))
	case OpGatedResidual:
		return one(b.GatedResidual(in[0], in[1], in[2], a.Act, n.Spec))
	case OpRope:
		return one(b.Rope(in[0], in[1], in[2], a.Rope, n.Spec))
	case OpAttention:
		return one(b.Attention(in[0], in[1], in[2], in[3], at(in, 4), at(in, 5), a.Attention, n.Spec))
	case OpAct:
		return one(b.Act(in[0], a.Act, n.Spec))
	case OpGLU:
		return one(b.GLU(in[0], in[1], a.Act, n.Spec))
	case OpAdd:
		return one(b.Add(in[0], in[1], n.Spec))
	case OpMul:
		return one(b.Mul(in[0], in[1], n.Spec))
	case OpSub:
		return one(b.Sub(in[0], in[1], n.Spec))
	case OpDiv:
		return one(b.Div(in[0], in[1], n.Spec))
	case OpMinimum:
		return one(b.Minimum(in[0], in[1], n.Spec))
	case OpMaximum:
		return one(b.Maximum(in[0], in[1], n.Spec))
	case OpPermute:
		return one(b.Permute(in[0], a.Perm))
	case OpCast:
		return one(b.Cast(in[0], a.Format))
	case OpReshape:
		return one(b.Reshape(in[0], a.Shape))
	case OpSlice:
		return one(b.Slice(in[0], a.Axis, a.Start, a.End))
	case OpConcat:
		return one(concatPromoted(b, in, a.Axis))
	case OpRepeat:
		copies := make([]exec.Tensor, a.N)
		for i := range copies {
			copies[i] = in[0]
		}
		return one(b.Concat(copies, a.Axis))
	case OpChunk:
		return b.Chunk(in[0], a.N, a.Axis)
	case OpTimestepEmbed:
		return one(b.TimestepEmbed(in[0], a.Timestep, n.Spec))
	case OpRopeTable:
		cos, sin, err := b.RopeTable(in[0], a.RopeTable, n.Spec)
		if err != nil {
			return nil, err
		}
		return []exec.Tensor{cos, sin}, nil
	case OpGather:
		return one(gather(b, in[0], in[1]))
	case OpPatchify:
		return one(b.Patchify(in[0], a.Patch))
	case OpUnpatchify:
		return one(b.Unpatchify(in[0], a.Patch))
	case OpRound:
		return one(roundHost(b, in[0], n.Spec))
	case OpArgMin:
		return one(argminHost(b, in[0]))
	case OpQR:
		return one(qrHost(b, in[0], n.Spec))
	case OpMean:
		return one(meanHost(b, in[0], at(in, 1), a.Axis, n.Spec))
	case OpRoute:
		return routeHost(b, in[0], at(in, 1), a.Route, n.Spec)
	case OpSoftmax:
		return one(softmaxHost(b, in[0], n.Spec))
	case OpWhere:
		return one(whereHost(b, in[0], in[1], in[2], n.Spec))
	case OpSegmentMask:
		return one(segmentMaskHost(b, in[0], a.N))
	case OpRelBucket:
		return one(relBucketHost(b, in[0], in[1], a.Bucket))
	case OpAngular:
		return one(angularHost(b, in[0], in[1], in[2], a.Angular, n.Spec))
	case OpExperts:
		return one(expertsRun(b, in[0], in[1], in[2], in[3], in[4], at(in, 5), at(in, 6), a.Act, a.UpFirst, a.Experts, n.Spec))
	case OpMaxPool2D:
		return one(maxPoolRun(b, in[0], a.Conv))
	case OpConv2D:
		return one(conv2dRun(b, in[0], in[1], at(in, 2), a.Conv, n.Spec))
	case OpLinearAttention:
		return one(linearAttentionRun(b, in[0], in[1], in[2], at(in, 3), at(in, 4), a.LinearAttention, n.Spec))
	case OpSSMScan:
		return one(b.SSMScan(in[0], in[1], in[2], in[3], in[4], at(in, 5), n.Spec))
	case OpDeltaScan:
		return one(b.DeltaScan(in[0], in[1], in[2], in[3], in[4], n.Spec))
	case OpMemoryScan:
		return one(b.MemoryScan(in[0], in[1], in[2], in[3], in[4], a.Memory.Eps, n.Spec))
	case OpFFT2Real:
		return one(b.FFT2Real(in[0], n.Spec))
	case OpSinkhorn:
		return one(b.Sinkhorn(in[0], a.Sinkhorn, n.Spec))
	case OpMatMul:
		return one(b.MatMul(in[0], in[1], n.Spec))
	case OpRecurrence:
		return one(b.Recurrence(in[0], in[1], at(in, 2), a.Recurrence, n.Spec))
	}
	return nil, fmt.Errorf("unknown op %v", n.Op)
}

// roundHost rounds each value to the nearest integer, ties to even (host
// step: a timestep cast to an integer dtype is tiny).
func roundHost(b exec.Backend, x exec.Tensor, s exec.Spec) (exec.Tensor, error) {
	v, err := b.Download(x)
	if err != nil {
		return nil, err
	}
	for i, f := range v {
		v[i] = float32(math.RoundToEven(float64(f)))
	}
	return b.Upload(v, x.Shape(), s.Out)
}

// argminHost is the index of each row's first least entry (torch.argmin
// over the last axis: a NaN counts as the least), stored f32 (host step:
// ids, one per row).
func argminHost(b exec.Backend, x exec.Tensor) (exec.Tensor, error) {
	v, err := b.Download(x)
	if err != nil {
		return nil, err
	}
	shape := x.Shape()
	n := shape[len(shape)-1]
	out := make([]float32, len(v)/n)
	for r := range out {
		row := v[r*n : (r+1)*n]
		best := 0
		for i, f := range row {
			if f != f {
				best = i
				break
			}
			if f < row[best] {
				best = i
			}
		}
		out[r] = float32(best)
	}
	return b.Upload(out, shape[:len(shape)-1], precision.F32)
}

// meanHost is the mean of x over axis, weighted by mask (x's shape up to
// and including axis, broadcast over the rest) when given, in f64, then
// rounded to s.Out (host step: pooled text rows are tiny). Under
// RoundWeights a masked mean is written out in the storage format, as a
// pooling of bf16 tensors computes it: each weight m_k / max(Σm, 1)
// rounded to s.Out, under RoundProduct each x·w rounded too, then summed.
func meanHost(b exec.Backend, x, mask exec.Tensor, axis int, s exec.Spec) (exec.Tensor, error) {
	shape := x.Shape()
	ax, err := exec.Axis(axis, len(shape))
	if err != nil {
		return nil, err
	}
	xv, err := b.Download(x)
	if err != nil {
		return nil, err
	}
	outer, n, inner := 1, shape[ax], 1
	for _, d := range shape[:ax] {
		outer *= d
	}
	for _, d := range shape[ax+1:] {
		inner *= d
	}
	var mv []float32
	if mask != nil {
		if exec.Numel(mask.Shape()) != outer*n {
			return nil, fmt.Errorf("mean: mask %v for %v over axis %d", mask.Shape(), shape, ax)
		}
		if mv, err = b.Download(mask); err != nil {
			return nil, err
		}
	}
	out := make([]float32, outer*inner)
	written := mv != nil && s.Has(exec.RoundWeights)
	for o := range outer {
		var count float64
		if written {
			for k := range n {
				count += float64(mv[o*n+k])
			}
			count = float64(s.Out.Round(float32(math.Max(count, 1))))
		}
		for i := range inner {
			var sum, wsum float64
			for k := range n {
				w := 1.0
				if mv != nil {
					w = float64(mv[o*n+k])
				}
				xk := float64(xv[(o*n+k)*inner+i])
				if written {
					wk := s.Out.Round(float32(w / count))
					p := float32(xk) * wk
					if s.Has(exec.RoundProduct) {
						p = s.Out.Round(p)
					}
					sum += float64(p)
					continue
				}
				sum += w * xk
				wsum += w
			}
			if written {
				out[o*inner+i] = float32(sum)
			} else {
				out[o*inner+i] = float32(sum / wsum)
			}
		}
	}
	oshape := append(append([]int(nil), shape[:ax]...), shape[ax+1:]...)
	return b.Upload(out, oshape, s.Out)
}

// at is input i, or nil when the node has fewer inputs (an optional input
// left off the end: an attention node of four inputs has no bias).
func at[T any](in []T, i int) T {
	if i < len(in) {
		return in[i]
	}
	var none T
	return none
}

// gather picks rows of table [R, W] by the integer ids (host step: the
// vocabulary has no gather op; see the package's notes for exec).
func gather(b exec.Backend, table, ids exec.Tensor) (exec.Tensor, error) {
	tv, err := b.Download(table)
	if err != nil {
		return nil, err
	}
	iv, err := b.Download(ids)
	if err != nil {
		return nil, err
	}
	rows, width := table.Shape()[0], table.Shape()[1]
	out := make([]float32, 0, len(iv)*width)
	for i, id := range iv {
		r := int(id)
		if float32(r) != id || r < 0 || r >= rows || math.IsNaN(float64(id)) {
			return nil, fmt.Errorf("gather: id %d is %v, not a row of a %d-row table", i, id, rows)
		}
		out = append(out, tv[r*width:(r+1)*width]...)
	}
	return b.Upload(out, append(append([]int(nil), ids.Shape()...), width), table.Format())
}

// concatPromoted is torch.cat: inputs of different formats are promoted to
// a common one first (f32 over bf16 and f16, and f32 for bf16 with f16), as
// a rounding plan that keeps one producer in f32 makes them.
func concatPromoted(b exec.Backend, in []exec.Tensor, axis int) (exec.Tensor, error) {
	f := in[0].Format()
	mixed := false
	for _, t := range in[1:] {
		if g := t.Format(); g != f {
			mixed = true
			if g == precision.F32 || f != precision.F32 {
				f = precision.F32
			}
		}
	}
	if !mixed {
		return b.Concat(in, axis)
	}
	cast := make([]exec.Tensor, len(in))
	var made []exec.Tensor
	defer func() {
		for _, c := range made {
			b.Free(c)
		}
	}()
	for i, t := range in {
		cast[i] = t
		if t.Format() != f {
			c, err := b.Cast(t, f)
			if err != nil {
				return nil, err
			}
			cast[i] = c
			made = append(made, c)
		}
	}
	return b.Concat(cast, axis)
}
