package exec

import (
	"fmt"
	"math"

	"github.com/zflow/zflow/precision"
)

// AttentionDims is the geometry of an attention call: batch, query and key
// rows, query heads, kv heads and head width.
type AttentionDims struct{ B, Sq, Sk, H, KV, D int }

// AttentionGeometry checks q [B, Sq, H·D], k and v [B, Sk, KV·D] against
// p's heads (KVHeads 0 means H) and returns the geometry; every backend
// validates attention with it.
func AttentionGeometry(q, k, v []int, p AttentionParams) (AttentionDims, error) {
	var g AttentionDims
	if len(q) != 3 || len(k) != 3 || len(v) != 3 {
		return g, fmt.Errorf("exec: attention: q %v, k %v, v %v are not [B, S, heads·D]", q, k, v)
	}
	g.H, g.KV = p.Heads, p.KVHeads
	if g.KV == 0 {
		g.KV = g.H
	}
	if g.H <= 0 || g.KV <= 0 || g.H%g.KV != 0 || q[2]%g.H != 0 {
		return g, fmt.Errorf("exec: attention: %d heads over %d kv heads for q %v", p.Heads, p.KVHeads, q)
	}
	g.B, g.Sq, g.Sk, g.D = q[0], q[1], k[1], q[2]/g.H
	for _, t := range [][]int{k, v} {
		if t[0] != g.B || t[1] != g.Sk || t[2] != g.KV*g.D {
			return g, fmt.Errorf("exec: attention: q %v, k %v, v %v do not agree for %d heads of %d over %d kv heads", q, k, v, g.H, g.D, g.KV)
		}
	}
	return g, nil
}

// MaskStrides returns the strides over (b, i, j) of a mask that broadcasts
// to [B, Sq, Sk].
func MaskStrides(m []int, b, sq, sk int) ([]int, error) {
	target := []int{b, sq, sk}
	if len(m) > 3 {
		// Leading 1s (e.g. [B, 1, Sq, Sk] with one head axis) are dropped.
		for len(m) > 3 && (m[0] == 1 || len(m) == 4 && m[1] == 1) {
			if m[0] == 1 {
				m = m[1:]
			} else {
				m = append([]int{m[0]}, m[2:]...)
			}
		}
		if len(m) > 3 {
			return nil, fmt.Errorf("exec: attention: mask %v does not broadcast to %v", m, target)
		}
	}
	full := Strides(m)
	st := make([]int, 3)
	for i := range 3 {
		j := len(m) - 3 + i
		switch {
		case j < 0 || m[j] == 1:
			st[i] = 0
		case m[j] == target[i]:
			st[i] = full[j]
		default:
			return nil, fmt.Errorf("exec: attention: mask %v does not broadcast to %v", m, target)
		}
	}
	return st, nil
}

// AttentionArgs is an attention call checked once, at the front door
// (CheckAttention): its geometry, the resolved scale, and the strides the
// kernels read the mask and the bias with. Backends do arithmetic only.
type AttentionArgs struct {
	AttentionDims
	Scale float32 // p.Scale, or 1/√D (in float64, rounded to f32) when 0
	// MaskStrides: strides over (b, i, j) of the explicit mask (nil without one).
	MaskStrides []int
	// BiasStrides: strides over (b, h, i, j) of the bias (nil without one).
	BiasStrides []int
}

// CheckAttention checks every argument of an Attention call (nil mask,
// bias or sinks: absent) against p and returns what the kernels need. A request
// outside what the op defines (a window on a non-causal mask, an unknown
// mask kind) is an error wrapping ErrUnsupported; a malformed one (shapes
// that do not agree, a negative window, a cap that is not a positive
// finite number) a plain error.
func CheckAttention(q, k, v, mask, bias, sinks Tensor, p AttentionParams) (AttentionArgs, error) {
	var a AttentionArgs
	if q == nil || k == nil || v == nil {
		return a, fmt.Errorf("exec: attention: q, k and v are required")
	}
	g, err := AttentionGeometry(q.Shape(), k.Shape(), v.Shape(), p)
	if err != nil {
		return a, err
	}
	a.AttentionDims = g
	switch p.Mask {
	case MaskNone, MaskCausal:
		if mask != nil {
			return a, fmt.Errorf("exec: attention: mask kind %v with a mask tensor %v", p.Mask, mask.Shape())
		}
	case MaskExplicit:
		if mask == nil {
			return a, fmt.Errorf("exec: attention: mask kind explicit without a mask tensor")
		}
		if a.MaskStrides, err = MaskStrides(mask.Shape(), g.B, g.Sq, g.Sk); err != nil {
			return a, err
		}
	default:
		return a, fmt.Errorf("exec: attention: %w: mask kind %v", ErrUnsupported, p.Mask)
	}
	switch {
	case p.Window < 0:
		return a, fmt.Errorf("exec: attention: window %d", p.Window)
	case p.Window > 0 && p.Mask == MaskExplicit:
		return a, fmt.Errorf("exec: attention: %w: a sliding window of %d on an explicit mask", ErrUnsupported, p.Window)
	case p.Block < 0:
		return a, fmt.Errorf("exec: attention: block %d", p.Block)
	case p.Block > 0 && (p.Mask != MaskNone || p.Window > 0):
		return a, fmt.Errorf("exec: attention: %w: blocks of %d with mask %v and window %d (blocks are bidirectional, alone)", ErrUnsupported, p.Block, p.Mask, p.Window)
	case p.Block > 0 && g.Sk < g.Sq:
		return a, fmt.Errorf("exec: attention: blocks of %d over %d keys for %d queries (want at least as many keys)", p.Block, g.Sk, g.Sq)
	case p.Softcap < 0 || math.IsNaN(float64(p.Softcap)) || math.IsInf(float64(p.Softcap), 0):
		return a, fmt.Errorf("exec: attention: softcap %g (want a positive finite cap, or 0 for none)", p.Softcap)
	}
	if bias != nil {
		if a.BiasStrides, err = BiasStrides(bias.Shape(), g.B, g.H, g.Sq, g.Sk); err != nil {
			return a, err
		}
	}
	if sinks != nil {
		if sh := sinks.Shape(); len(sh) != 1 || sh[0] != g.H {
			return a, fmt.Errorf("exec: attention: sinks %v: want one logit per query head, [%d]", sh, g.H)
		}
	}
	a.Scale = p.Scale
	if a.Scale == 0 {
		// in float64, then rounded: PyTorch's SDPA default
		// (calculate_scale: 1/√D as a double, a float in its kernels);
		// 1/f32(√D) differs by an ulp at D = 24, 72, 96, 112, ...
		a.Scale = float32(1 / math.Sqrt(float64(g.D)))
	}
	return a, nil
}

// BiasStrides returns the strides over (b, h, i, j) of an additive
// attention bias that broadcasts to [B, H, Sq, Sk]: shapes of rank 4 or less
// by NumPy's rules (leading axes added: [B, 1, Sq, Sk], [1, H, 1, Sk],
// [Sq, Sk]); a rank-3 shape [B·H, Sq or 1, Sk or 1] is read as
// [B, H, Sq or 1, Sk or 1] (the layout of a bias built per batch·head, as
// ALiBi tensors are), and [1, ·, ·] as [1, 1, ·, ·].
func BiasStrides(m []int, b, h, sq, sk int) ([]int, error) {
	target := []int{b, h, sq, sk}
	shape := m
	switch {
	case len(m) > 4:
		return nil, fmt.Errorf("exec: attention: bias %v has more than 4 axes", m)
	case len(m) == 3 && m[0] == b*h:
		shape = []int{b, h, m[1], m[2]}
	case len(m) == 3 && m[0] == 1:
		shape = []int{1, 1, m[1], m[2]}
	case len(m) == 3:
		return nil, fmt.Errorf("exec: attention: bias %v: a rank-3 bias is [B·H = %d, Sq or 1, Sk or 1]", m, b*h)
	}
	full := Strides(shape)
	st := make([]int, 4)
	for i := range 4 {
		j := len(shape) - 4 + i
		switch {
		case j < 0 || shape[j] == 1 && target[i] != 1:
			st[i] = 0
		case shape[j] == target[i]:
			st[i] = full[j]
		default:
			return nil, fmt.Errorf("exec: attention: bias %v does not broadcast to %v", m, target)
		}
	}
	return st, nil
}

// ALiBiSlopes are the per-head slopes of ALiBi as BLOOM builds them
// (build_alibi_tensor in transformers' modeling_bloom.py): with
// n = 2^⌊log₂ heads⌋, base = f32(2^(−2^(−(log₂ n − 3)))) and slope_h =
// f32(base^(h+1)) for h < n; for a head count that is not a power of 2, the
// remaining min(n, heads − n) heads take the odd powers 1, 3, 5, … of
// f32(2^(−2^(−(log₂ 2n − 3)))). Each power is the f32 nearest the power of
// the f32 base (torch.pow on an f32 tensor). 4 heads: 1/4, 1/16, 1/64, 1/256.
func ALiBiSlopes(heads int) []float32 {
	if heads <= 0 {
		return nil
	}
	n := 1
	for n*2 <= heads {
		n *= 2
	}
	base := func(n int) float64 {
		return float64(float32(math.Exp2(-math.Exp2(-(math.Log2(float64(n)) - 3)))))
	}
	out := make([]float32, 0, heads)
	b := base(n)
	for i := 1; i <= n; i++ {
		out = append(out, float32(math.Pow(b, float64(i))))
	}
	if n != heads {
		eb := base(2 * n)
		for i := 0; i < min(n, heads-n); i++ {
			out = append(out, float32(math.Pow(eb, float64(2*i+1))))
		}
	}
	return out
}

// ALiBiBias is the ALiBi bias of a head's key j, as Attention adds it:
// f32(slope·j) rounded to the query's format f.
func ALiBiBias(slope float32, j int, f precision.Format) float32 {
	return f.Round(float32(slope * float32(j)))
}
