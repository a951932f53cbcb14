package synth

import (
	"fmt"
	"slices"

	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/precision"
)

// Attention over branches (split attention, ResNeSt's; selective kernels,
// SK-ResNet's): k branches of one map, held as one value [B, k·C, H, W]
// or stacked [B, k, C, H, W], are summed and pooled to make logits, a
// softmax across the branches weighs each channel of each branch, and the
// weighted branches are summed. Each step is its own form, over values of
// the scope read with a branch axis: glue meets them one boundary at a
// time.

// maxBranches bounds the branch counts tried.
const maxBranches = 4

// branchSum is x [B, k, n] summed over its branches in order (torch's
// sum(dim=1): each branch added to the running sum), [B, 1, n].
func (s *synth) branchSum(x *val, format precision.Format) *val {
	return s.foldAxis(x, 1, program.OpAdd, format, "branches summed")
}

// branched is v read as [B, k, rest]: k branches of its second axis (a
// map of k·C channels, or a stack [B, k, C, ...]); nil where v's second
// axis is not k branches of C.
func (s *synth) branched(v *val, k, c int) *val {
	if v.opaque || v.integral() || len(v.shape) < 2 || v.numel()%(v.shape[0]*k) != 0 {
		return nil
	}
	stacked := len(v.shape) >= 3 && v.shape[1] == k && v.shape[2] == c
	if v.shape[1] != k*c && !stacked {
		return nil
	}
	return s.reshape(v, []int{v.shape[0], k, v.numel() / (v.shape[0] * k)})
}

// pooledBranchSum explains t [B, C, 1, 1] (or [B, C]) as a value's
// branches summed, then averaged over the map's cells (the logits' input
// of split attention and of a selective kernel: x.sum(1).mean((2, 3))).
func (s *synth) pooledBranchSum(t *val, vals []*val) *val {
	if t.integral() || len(t.shape) < 2 || t.numel() != t.shape[0]*t.shape[1] {
		return nil
	}
	b, c := t.shape[0], t.shape[1]
	for _, v := range vals {
		if len(v.shape) < 4 || v.shape[0] != b {
			continue
		}
		for k := 2; k <= maxBranches; k++ {
			x := s.branched(v, k, c)
			if x == nil || x.shape[2]%c != 0 || x.shape[2] == c {
				continue
			}
			sum := s.reshape(s.branchSum(x, t.format), []int{b, c, x.shape[2] / c})
			if sum == nil {
				continue
			}
			mean := s.derive(&expr{op: program.OpMean, attrs: program.Attrs{Axis: 2}, args: []*val{sum, nil}, out: t.format, label: "mean over the cells"})
			if mean == nil {
				continue
			}
			if w, _ := s.best(t, []*expr{{op: program.OpReshape, attrs: program.Attrs{Shape: slices.Clone(t.shape)}, args: []*val{mean}, out: t.format,
				label: fmt.Sprintf("%d branches summed, then averaged over the cells", k)}}); w != nil {
				return w
			}
		}
	}
	return nil
}

// branchSoftmax explains t (B·k·C entries in (0, 1)) as the softmax
// across k branches of a value of as many entries: the value read [B,
// card, k, C/card] (split attention's radix softmax over cardinal groups;
// card = 1: [B, k, C], a selective kernel's), the softmax over k, laid out
// [B, k, card, C/card] as t.
func (s *synth) branchSoftmax(t *val, vals []*val) *val {
	if t.integral() || len(t.shape) < 2 {
		return nil
	}
	for _, x := range t.data {
		if !(x >= 0 && x <= 1) {
			return nil
		}
	}
	b := t.shape[0]
	for _, v := range vals {
		if v.opaque || v.integral() || v.numel() != t.numel() || len(v.shape) < 2 || v.shape[0] != b || v == t {
			continue
		}
		for k := 2; k <= maxBranches; k++ {
			per := t.numel() / b
			if per%k != 0 {
				continue
			}
			c := per / k
			var cands []*expr
			for card := 1; card <= c && card <= 64; card++ {
				if c%card != 0 {
					continue
				}
				g := s.reshape(v, []int{b, card, k, c / card})
				last := s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: []int{0, 1, 3, 2}}, args: []*val{g}, out: v.format, label: "branches last"})
				if last == nil {
					continue
				}
				sm := s.derive(&expr{op: program.OpSoftmax, args: []*val{last}, out: t.format, label: "softmax across the branches"})
				back := s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: []int{0, 3, 1, 2}}, args: []*val{sm}, out: t.format, label: "branches first"})
				if back == nil {
					continue
				}
				cands = append(cands, &expr{op: program.OpReshape, attrs: program.Attrs{Shape: slices.Clone(t.shape)}, args: []*val{back}, out: t.format,
					label: fmt.Sprintf("softmax across %d branches, %d groups", k, card)})
			}
			if w, _ := s.best(t, cands); w != nil {
				return w
			}
		}
	}
	return nil
}

// branchWeighted explains t [B, C, ...] as the branches of a value, each
// times its weights per channel, summed (split attention's and a
// selective kernel's output): x read [B, k, C, n], the weights w (B·k·C
// entries) [B, k, C, 1], the products summed over k in order. The sum is
// checked on the host before any op runs.
func (s *synth) branchWeighted(t *val, vals []*val) *val {
	if t.integral() || len(t.shape) < 3 {
		return nil
	}
	b, c := t.shape[0], t.shape[1]
	n := t.numel() / (b * c)
	tol := tolerance(t.format)
	for _, x := range vals {
		if x.opaque || x.integral() || x.numel() <= t.numel() || x.numel()%t.numel() != 0 || len(x.data) != x.numel() {
			continue
		}
		k := x.numel() / t.numel()
		if k > maxBranches || s.branched(x, k, c) == nil {
			continue
		}
		for _, w := range vals {
			if w.opaque || w.integral() || w.numel() != b*k*c || len(w.data) != w.numel() || w == x {
				continue
			}
			sum := make([]float32, t.numel())
			for bi := range b {
				for j := range k {
					for ci := range c {
						wv := w.data[(bi*k+j)*c+ci]
						src := x.data[((bi*k+j)*c+ci)*n:][:n]
						dst := sum[(bi*c+ci)*n:][:n]
						for e, xv := range src {
							dst[e] += xv * wv
						}
					}
				}
			}
			if relRMS(t.format, sum, t.data) > 2*tol {
				continue
			}
			x4 := s.reshape(x, []int{b, k, c, n})
			w4 := s.reshape(w, []int{b, k, c, 1})
			if x4 == nil || w4 == nil {
				continue
			}
			prod := s.derive(&expr{op: program.OpMul, args: []*val{x4, w4}, out: t.format, label: "each branch times its weights"})
			if prod == nil {
				continue
			}
			tot := s.branchSum(s.reshape(prod, []int{b, k, c * n}), t.format)
			if tot == nil {
				continue
			}
			if r, _ := s.best(t, []*expr{{op: program.OpReshape, attrs: program.Attrs{Shape: slices.Clone(t.shape)}, args: []*val{tot}, out: t.format,
				label: fmt.Sprintf("%d weighted branches summed", k)}}); r != nil {
				return r
			}
		}
	}
	return nil
}
