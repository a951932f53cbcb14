package synth

import (
	"fmt"
	"math"

	"github.com/zflow/zflow/exec/program"
)

// dynamicConvolved explains t [B, S, W] as a lightweight dynamic
// convolution (ConvBERT's span-based convolution: unfold, then a matmul
// with per-position kernels): per position s and head h of H, the k rows
// of a value X [B, S, W] centred on s (zero outside) weighted by the
// softmax over k of that position's kernel logits, a value K [B, S, H·k]:
// out[b, s, h·D + d] = Σ_j softmax(K[b, s, h, :])_j · X[b, s + j − (k−1)/2, h·D + d].
// Each (K, X, H) with an odd k ≥ 3 is checked on the host first; the
// program is the softmax, k shifted copies of X (zero rows filling), each
// times its weight column, summed.
func (s *synth) dynamicConvolved(t *val, vals []*val) *val {
	if len(t.shape) != 3 || t.integral() {
		return nil
	}
	B, S, W := t.shape[0], t.shape[1], t.shape[2]
	tol := tolerance(t.format)
	for _, X := range vals {
		if X.opaque || X.param || len(X.shape) != 3 || X.shape[0] != B || X.shape[1] != S || X.shape[2] != W {
			continue
		}
		for _, K := range vals {
			if K == X || K.opaque || K.param || len(K.shape) != 3 || K.shape[0] != B || K.shape[1] != S {
				continue
			}
			M := K.shape[2]
			for H := 1; H <= W && H <= M; H++ {
				if W%H != 0 || M%H != 0 {
					continue
				}
				k := M / H
				if k < 3 || k%2 == 0 || k > 2*S+1 {
					continue
				}
				if relRMS(t.format, dynConvHost(K.data, X.data, B, S, H, W/H, k), t.data) > 2*tol {
					continue
				}
				if v := s.dynConvExpr(t, K, X, H, k); v != nil {
					return v
				}
			}
		}
	}
	return nil
}

// dynConvHost computes the dynamic convolution on the host (float64
// softmax and sums), for the check before the program is built.
func dynConvHost(K, X []float32, B, S, H, D, k int) []float32 {
	W, pad := H*D, (k-1)/2
	out := make([]float32, B*S*W)
	p := make([]float64, k)
	for b := range B {
		for s := range S {
			for h := range H {
				m := math.Inf(-1)
				for j := range k {
					m = math.Max(m, float64(K[(b*S+s)*H*k+h*k+j]))
				}
				var z float64
				for j := range k {
					p[j] = math.Exp(float64(K[(b*S+s)*H*k+h*k+j]) - m)
					z += p[j]
				}
				for d := range D {
					var acc float64
					for j := range k {
						if r := s + j - pad; r >= 0 && r < S {
							acc += p[j] / z * float64(X[(b*S+r)*W+h*D+d])
						}
					}
					out[(b*S+s)*W+h*D+d] = float32(acc)
				}
			}
		}
	}
	return out
}

// dynConvExpr builds the dynamic convolution in the vocabulary and scores
// it against t.
func (s *synth) dynConvExpr(t *val, K, X *val, H, k int) *val {
	B, S, W := t.shape[0], t.shape[1], t.shape[2]
	D, pad := W/H, (k-1)/2
	kr := s.reshape(K, []int{B, S, H, k})
	if kr == nil {
		return nil
	}
	p := s.derive(&expr{op: program.OpSoftmax, args: []*val{kr}, out: t.format, label: "kernel weights"})
	if p == nil {
		return nil
	}
	var acc *val
	for j := range k {
		d := j - pad
		if d >= S || -d >= S {
			continue // every row of this tap is outside: it adds nothing
		}
		sh := s.reshape(s.shiftedValue(X, 1, d), []int{B, S, H, D})
		wj := s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: 3, Start: j, End: j + 1}, args: []*val{p}, out: p.format, label: "tap weight"})
		if sh == nil || wj == nil {
			return nil
		}
		term := s.derive(&expr{op: program.OpMul, args: []*val{sh, wj}, out: t.format, label: fmt.Sprintf("tap %+d", d)})
		if term == nil {
			return nil
		}
		if acc == nil {
			acc = term
		} else if acc = s.derive(&expr{op: program.OpAdd, args: []*val{acc, term}, out: t.format, label: "taps summed"}); acc == nil {
			return nil
		}
	}
	if acc == nil {
		return nil
	}
	w, _ := s.best(t, []*expr{{op: program.OpReshape, attrs: program.Attrs{Shape: []int{B, S, W}}, args: []*val{acc}, out: t.format,
		label: fmt.Sprintf("dynamic convolution: %d heads, kernel %d", H, k)}})
	return w
}

// attentionBesideConv explains t [B, S, W] as attention joined along the
// width with a dynamic convolution (ConvBERT's self-attention: half the
// heads attend, the other half convolve, joined per position): each split
// at the width of a value the convolution could read, the convolution's
// columns found by dynamicConvolved, the rest as attention. Tried once
// every other form has failed.
func (s *synth) attentionBesideConv(t *val, sc *scope, vals []*val) *val {
	if len(t.shape) != 3 || t.reshapedFrom {
		return nil
	}
	B, S, W := t.shape[0], t.shape[1], t.shape[2]
	tried := map[int]bool{}
	for _, x := range vals {
		if x.opaque || x.param || len(x.shape) != 3 || x.shape[0] != B || x.shape[1] != S || x.shape[2] >= W || tried[x.shape[2]] {
			continue
		}
		n := x.shape[2]
		tried[n] = true
		convolved := func(sub *val) *val { return s.dynamicConvolved(sub, vals) }
		if w := s.besideWidth(t, n, convolved, func(rest *val) *val { return s.attention(rest, sc) }, "attention joined with a dynamic convolution"); w != nil {
			return w
		}
	}
	return nil
}
