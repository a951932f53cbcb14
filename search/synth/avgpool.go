package synth

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/program"
)

// fitAvgPool explains a parameterless call's result t [B, C, Ho, Wo] as
// an average pool of x [B, C, H, W]: a k×k window of stride s, padded p,
// each window's sum (a depthwise convolution by ones) over k² or over the
// count of its cells inside the image (count_include_pad=False: a map of
// counts made from the shapes), the last partial window dropped (torch's
// floor mode). PoolFormer's and EfficientFormer's token
// mixer (pool(x) − x), the strided pools of hierarchical encoders, and a
// window of one cell of stride 2: every other cell (LeViT's subsampled
// queries).
func (s *synth) fitAvgPool(x, t *val) *val {
	if len(x.shape) == 3 && len(t.shape) == 3 {
		return s.fitAvgPool1D(x, t)
	}
	if len(x.shape) != 4 || len(t.shape) != 4 || x.shape[0] != t.shape[0] || x.shape[1] != t.shape[1] || x.integral() {
		return nil
	}
	c, h, w := x.shape[1], x.shape[2], x.shape[3]
	var cands []*expr
	for _, k := range []int{1, 2, 3, 5, 7} {
		for _, st := range slices.Compact([]int{1, 2, k}) {
			if k == 1 && st == 1 {
				continue // x itself
			}
			for _, p := range slices.Compact([]int{0, k / 2}) {
				ho, wo := (h+2*p-k)/st+1, (w+2*p-k)/st+1
				if ho != t.shape[2] || wo != t.shape[3] || h+2*p < k || w+2*p < k {
					continue
				}
				name := fmt.Sprintf("avg pool %d stride %d pad %d", k, st, p)
				ones := s.relConst(fmt.Sprintf("ones [%d, 1, %d, %d]", c, k, k), []int{c, 1, k, k}, slices.Repeat([]float32{1}, c*k*k), "a window of ones (an average pool's sums)")
				sums := s.derive(&expr{op: program.OpConv2D, attrs: program.Attrs{Conv: program.ConvParams{Pad: p, Stride: st, Groups: c}}, args: []*val{x, ones, nil}, out: f32, label: name + " sums"})
				if sums == nil {
					continue
				}
				area := s.constant(float64(k * k))
				cands = append(cands, &expr{op: program.OpDiv, args: []*val{sums, area}, out: t.format, label: name})
				if p > 0 {
					counts := windowCounts(h, w, k, st, p)
					cv := s.relConst(fmt.Sprintf("window counts %dx%d k%d s%d p%d", h, w, k, st, p), []int{1, 1, ho, wo}, counts, "each window's cells inside the image (an average pool without its padding), made from the shapes")
					cands = append(cands, &expr{op: program.OpDiv, args: []*val{sums, cv}, out: t.format, label: name + " without the padding"})
				}
			}
		}
	}
	v, ev := s.best(t, cands)
	if v != nil {
		v.fit = &leafFit{kind: "glue", candidates: ev}
	}
	return v
}

// windowCounts is, for each window of a k×k pool of stride st padded p over
// an h×w image, how many of its cells lie inside the image.
func windowCounts(h, w, k, st, p int) []float32 {
	ho, wo := (h+2*p-k)/st+1, (w+2*p-k)/st+1
	out := make([]float32, ho*wo)
	span := func(i, n int) int {
		lo, hi := i*st-p, i*st-p+k
		return min(hi, n) - max(lo, 0)
	}
	for i := range ho {
		for j := range wo {
			out[i*wo+j] = float32(span(i, h) * span(j, w))
		}
	}
	return out
}

// fitAvgPool1D explains t [B, C, Lo] as an average pool of x [B, C, L]
// along its last axis (avg_pool1d: SEW's squeeze of the sequence by a
// window of 2 at stride 2, the last odd row dropped): a window of k cells
// at stride st, unpadded, each window's sum (a depthwise conv1d by ones)
// over k.
func (s *synth) fitAvgPool1D(x, t *val) *val {
	b, c, l := x.shape[0], x.shape[1], x.shape[2]
	if t.shape[0] != b || t.shape[1] != c || x.integral() || t.shape[2] >= l {
		return nil
	}
	img := s.reshape(x, []int{b, c, 1, l})
	if img == nil {
		return nil
	}
	var cands []*expr
	for k := 2; k <= 8; k++ {
		for _, st := range slices.Compact([]int{1, 2, k}) {
			if (l-k)/st+1 != t.shape[2] || l < k {
				continue
			}
			name := fmt.Sprintf("avg pool1d %d stride %d", k, st)
			ones := s.relConst(fmt.Sprintf("ones [%d, 1, 1, %d]", c, k), []int{c, 1, 1, k}, slices.Repeat([]float32{1}, c*k), "a window of ones (an average pool's sums)")
			sums := s.derive(&expr{op: program.OpConv2D, attrs: program.Attrs{Conv: program.ConvParams{Stride: st, Groups: c, Seq: true}}, args: []*val{img, ones, nil}, out: f32, label: name + " sums"})
			if sums == nil {
				continue
			}
			rows := s.reshape(sums, slices.Clone(t.shape))
			if rows == nil {
				continue
			}
			cands = append(cands, &expr{op: program.OpDiv, args: []*val{rows, s.constant(float64(k))}, out: t.format, label: name})
		}
	}
	v, ev := s.best(t, cands)
	if v != nil {
		v.fit = &leafFit{kind: "glue", candidates: ev}
	}
	return v
}

// pooledMap explains t [B, C, h, w] as an average pool (fitAvgPool) of a
// larger map of the scope with the same batch and channels, the pool
// written in the forward (F.avg_pool2d) rather than called as a module:
// GhostNetV2's attention branch halving its input.
func (s *synth) pooledMap(t *val, vals []*val) *val {
	return s.pooledMapBy(t, vals, s.fitAvgPool)
}

// pooledMaxMap is pooledMap for a max pool written in the forward
// (F.max_pool2d in a MaxPool2d subclass that pads first: BiT's stem
// pool).
func (s *synth) pooledMaxMap(t *val, vals []*val) *val {
	return s.pooledMapBy(t, vals, s.fitMaxPool)
}

// pooledMapBy is t as a pool (fit) of a value of the scope with t's batch
// and channels and larger sides.
func (s *synth) pooledMapBy(t *val, vals []*val, fit func(x, t *val) *val) *val {
	if len(t.shape) != 4 || t.integral() {
		return nil
	}
	for _, v := range vals {
		if v.opaque || len(v.shape) != 4 || v.shape[0] != t.shape[0] || v.shape[1] != t.shape[1] ||
			v.shape[2] < t.shape[2] || v.shape[3] < t.shape[3] || v.shape[2]*v.shape[3] == t.shape[2]*t.shape[3] {
			continue
		}
		if p := fit(v, t); p != nil {
			return p
		}
	}
	return nil
}

// resizedMap is t as a value of the scope with t's batch and channels
// resized by interpolate (fitResample: every mode scored), the resize
// written in the forward (a diffusion UNet's Upsample2D: nearest ×2, in
// f32 for a bf16 map, then its convolution).
func (s *synth) resizedMap(t *val, vals []*val) *val {
	if len(t.shape) != 4 || t.integral() {
		return nil
	}
	for _, v := range vals {
		if v.opaque || len(v.shape) != 4 || v.shape[0] != t.shape[0] || v.shape[1] != t.shape[1] ||
			v.shape[2] == t.shape[2] && v.shape[3] == t.shape[3] {
			continue
		}
		if p := s.fitResample(v, t); p != nil {
			return p
		}
	}
	return nil
}

// maxResizedResiduals bounds the maps resizedResidual resizes.
const maxResizedResiduals = 4

// resizedResidual explains a map t [B, C, H, W] as a value of the scope of
// t's batch and channels but another size (the call's arguments first),
// resized in the forward (nearest or bilinear), plus a value of t's shape,
// the sum scaled or not (a diffusion UNet's upsampling resnet: its input
// upsampled by F.interpolate inside the block for the residual, (x↑ + h)
// / √2).
func (s *synth) resizedResidual(t *val, sc *scope, vals []*val) *val {
	if len(t.shape) != 4 || t.integral() {
		return nil
	}
	ops := sameShape(t, vals)
	if len(ops) > maxOperands {
		ops = ops[:maxOperands]
	}
	var maps []*val
	for _, v := range vals {
		if v.opaque || len(v.shape) != 4 || v.shape[0] != t.shape[0] || v.shape[1] != t.shape[1] ||
			v.shape[2] == t.shape[2] && v.shape[3] == t.shape[3] || v.integral() {
			continue
		}
		maps = append(maps, v)
	}
	slices.SortStableFunc(maps, func(a, b *val) int { return cmp.Compare(b2i(sc.arg[b]), b2i(sc.arg[a])) })
	for _, v := range maps[:min(len(maps), maxResizedResiduals)] {
		for _, mode := range []resampleMode{resampleNearest, resampleLinear} {
			e := s.resampleExpr(v, t.shape[2], t.shape[3], mode, v.format)
			if e == nil {
				continue
			}
			r := s.derive(e)
			if r == nil {
				continue
			}
			var cands []*expr
			for _, h := range ops {
				cands = append(cands, &expr{op: program.OpAdd, args: []*val{r, h}, out: t.format, label: "a resized map plus a value"})
			}
			if w, _ := s.best(t, cands); w != nil {
				return w
			}
			if w := s.scaledSum(t, append([]*val{r}, ops...)); w != nil {
				return w
			}
		}
	}
	return nil
}

// fitLPPool explains a parameterless call's result t [B, C, Ho, Wo] as an
// L2 or L1 power-average pool of x (nn.LPPool2d: torch computes
// avg_pool2d(x^p)·k², then the p-th root): x squared (p = 2) or itself,
// each unpadded k×k window of stride st averaged, times k², its square
// root. Other powers need a power the vocabulary lacks.
func (s *synth) fitLPPool(x, t *val) *val {
	if len(x.shape) != 4 || len(t.shape) != 4 || x.shape[0] != t.shape[0] || x.shape[1] != t.shape[1] || x.integral() {
		return nil
	}
	c, h, w := x.shape[1], x.shape[2], x.shape[3]
	var cands []*expr
	for _, p := range []int{2, 1} {
		pow := x
		if p == 2 {
			pow = s.derive(&expr{op: program.OpMul, args: []*val{x, x}, out: x.format, label: "x²"})
		}
		for k := 2; k <= 7; k++ {
			for _, st := range slices.Compact([]int{k, 1, 2}) {
				if (h-k)/st+1 != t.shape[2] || (w-k)/st+1 != t.shape[3] || h < k || w < k {
					continue
				}
				name := fmt.Sprintf("power-average pool p=%d %d stride %d", p, k, st)
				ones := s.relConst(fmt.Sprintf("ones [%d, 1, %d, %d]", c, k, k), []int{c, 1, k, k}, slices.Repeat([]float32{1}, c*k*k), "a window of ones (an average pool's sums)")
				sums := s.derive(&expr{op: program.OpConv2D, attrs: program.Attrs{Conv: program.ConvParams{Stride: st, Groups: c}}, args: []*val{pow, ones, nil}, out: f32, label: name + " sums"})
				area := s.constant(float64(k * k))
				avg := s.derive(&expr{op: program.OpDiv, args: []*val{sums, area}, out: x.format, label: name + " average"})
				if p == 1 {
					cands = append(cands, &expr{op: program.OpMul, args: []*val{avg, area}, out: t.format, label: name})
					continue
				}
				sum := s.derive(&expr{op: program.OpMul, args: []*val{avg, area}, out: x.format, label: name + " times k²"})
				cands = append(cands, &expr{op: program.OpAct, attrs: program.Attrs{Act: exec.ActSqrt}, args: []*val{sum}, out: t.format, label: name})
			}
		}
	}
	return s.bestFit(t, cands, "glue")
}

// b2i is 1 for true, 0 for false (a sort key).
func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
