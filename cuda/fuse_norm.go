//go:build linux

package cuda

import (
	"fmt"
	"slices"
	"strings"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/kernels"
	"github.com/zflow/zflow/precision"
)

// runJoin runs a join with no chain: a linear part is the unfused route's
// own GEMM call with its result written into its rows of the joined value
// (the same plan, so the same sums), a norm part the plain norm kernel
// writing there.
func (b *Backend) runJoin(p *epiPlan) (exec.Tensor, error) {
	// Each part's launch, checked before anything runs.
	fills := make([]func(view *Tensor) error, len(p.parts))
	for i, pp := range p.parts {
		h := pp.head
		if h.Op == exec.HeadLinear {
			shape, fill, err := b.linearFill(h.In[0], h.In[1], h.In[2], h.Spec)
			if err != nil {
				return nil, fmt.Errorf("cuda: fuse %s: linear: %w", p.desc, err)
			}
			if !slices.Equal(shape, pp.shape) || h.Spec.Out != p.epi.In {
				return nil, fmt.Errorf("cuda: fuse %s: the linear makes %v%v, the plan expects %v%v", p.desc, h.Spec.Out, shape, p.epi.In, pp.shape)
			}
			fills[i] = fill
			continue
		}
		l, err := b.normLaunch(h.In[0], h.In[1], h.In[2], h.Norm, h.Spec)
		if err != nil {
			return nil, fmt.Errorf("cuda: fuse %s: norm: %w", p.desc, err)
		}
		if !slices.Equal(l.x.shape, pp.shape) || l.np.OutFmt != int32(p.epi.In) {
			return nil, fmt.Errorf("cuda: fuse %s: the norm makes %v%v, the plan expects %v%v", p.desc, precision.Format(l.np.OutFmt), l.x.shape, p.epi.In, pp.shape)
		}
		fills[i] = func(view *Tensor) error {
			if l.np.Groups == 0 {
				return nil
			}
			name, err := b.specNorm(l)
			if err != nil {
				return fmt.Errorf("cuda: fuse %s: %w", p.desc, err)
			}
			return b.launch(name, l.grid, block256, 0, view.ptr(), l.x.ptr(), l.g.ptr(), l.b.ptr(), l.params())
		}
	}
	return b.result(p.shape, p.epi.In, func(out *Tensor) error {
		es := uintptr(esize(p.epi.In))
		for i, pp := range p.parts {
			view := &Tensor{shape: pp.shape, format: p.epi.In, buf: out.buf, off: out.off + uintptr(pp.out)*es, b: b}
			if err := fills[i](view); err != nil {
				return err
			}
		}
		return nil
	})
}

// partNorms prepares the launch of each part's norm (a norm-headed
// region has one part), each making the part's shape in the chain's
// input format, and checks that the region's operands are still live.
func (b *Backend) partNorms(p *epiPlan) ([]*normArgs, error) {
	ls := make([]*normArgs, len(p.parts))
	for i, pp := range p.parts {
		h := pp.head
		l, err := b.normLaunch(h.In[0], h.In[1], h.In[2], h.Norm, h.Spec)
		if err != nil {
			return nil, fmt.Errorf("cuda: fuse %s: norm: %w", p.desc, err)
		}
		if !slices.Equal(l.x.shape, pp.shape) || l.np.OutFmt != int32(p.epi.In) {
			return nil, fmt.Errorf("cuda: fuse %s: the norm makes %v%v, the plan expects %v%v", p.desc, precision.Format(l.np.OutFmt), l.x.shape, p.epi.In, pp.shape)
		}
		ls[i] = l
	}
	if err := p.live(); err != nil {
		return nil, err
	}
	return ls, nil
}

// normFused runs a norm-headed region as one kernel, a join-headed one as
// one a part: the norm kernel compiled with the chain applied to each
// value where it would store it (rounded to the norm's format first, as
// the stored value is), so the norm's output is never written; a join's
// part writes its run of the joined result, and reads its run of each
// operand that spans the joined axis (a rope's tables), so the parts'
// outputs are not written either.
func (b *Backend) normFused(p *epiPlan) (exec.Tensor, error) {
	ls, err := b.partNorms(p)
	if err != nil {
		return nil, err
	}
	return b.result(p.shape, p.epi.Out(), func(out *Tensor) error {
		oe := uintptr(esize(p.epi.Out()))
		for i, pp := range p.parts {
			l := ls[i]
			if l.np.Groups == 0 {
				continue
			}
			// One compile a chain and norm (normFix): a join's parts may
			// differ in layout.
			fix, suffix := normFix(l.np)
			name := p.epi.Name() + "_norm" + suffix
			if _, ok := b.fns[name]; !ok {
				src, err := normEpilogueSource(p.epi, name, fix)
				if err != nil {
					return err
				}
				if err := b.loadModule("zflow_"+name, src, []string{"--fmad=false"}, []string{name}); err != nil {
					return fmt.Errorf("cuda: fuse %s: %w", p.desc, err)
				}
			}
			args := []any{out.ptr() + uintptr(pp.out)*oe, l.x.ptr(), l.g.ptr(), l.b.ptr(), l.params()}
			for k := 0; k < kernels.MaxEpiOperands; k++ {
				ptr := out.ptr()
				if k < len(p.ops) {
					ptr = p.ops[k].ptr() + uintptr(pp.opOff[k]*esize(p.ops[k].format))
				}
				args = append(args, ptr)
			}
			params := pp.params
			args = append(args, kernels.Bytes(&params))
			if err := b.launch(name, l.grid, block256, 0, args...); err != nil {
				return err
			}
		}
		return nil
	})
}

// joinSplit runs a join region as its parts' norms, each the plain norm
// kernel writing its rows of the joined value (the concat's copy saved),
// then the chain's epilogue kernel over the joined value.
func (b *Backend) joinSplit(p *epiPlan) (exec.Tensor, error) {
	ls, err := b.partNorms(p)
	if err != nil {
		return nil, err
	}
	joined, err := b.result(p.shape, p.epi.In, func(out *Tensor) error {
		ie := uintptr(esize(p.epi.In))
		for i, pp := range p.parts {
			l := ls[i]
			if l.np.Groups == 0 {
				continue
			}
			name, err := b.specNorm(l)
			if err != nil {
				return fmt.Errorf("cuda: fuse %s: %w", p.desc, err)
			}
			if err := b.launch(name, l.grid, block256, 0, out.ptr()+uintptr(pp.out)*ie, l.x.ptr(), l.g.ptr(), l.b.ptr(), l.params()); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	defer b.Free(joined)
	return b.runEpilogue(p, joined.(*Tensor))
}

// normEpilogueSource is the chain's functions and the norm kernel, its
// stores routed through them, specialised by fix (normFix): name(y, x, γ,
// β, zf_norm_p, o0 … o7, zf_epi_p).
func normEpilogueSource(e kernels.Epilogue, name, fix string) (string, error) {
	src, err := kernels.RenderEpilogues(kernels.CUDA, e)
	if err != nil {
		return "", err
	}
	n, out := e.Name(), int(e.Out())
	var params, args strings.Builder
	for k := 0; k < kernels.MaxEpiOperands; k++ {
		fmt.Fprintf(&params, ", const uchar* __restrict__ o%d", k)
		fmt.Fprintf(&args, ", o%d", k)
	}
	defs := fmt.Sprintf(`
#line 1 "cuda/fuse.go"
#define ZF_NORM_EXTRA %[2]s, const zf_epi_p ep
#define ZF_NORM_STORE8(y, f, i, r) do { \
    _Pragma("unroll") for (int e_ = 0; e_ < 8; e_++) (r)[e_] = zf_round((r)[e_], (f)); \
    %[1]s_eight(ep%[3]s, (i), (r)); \
    zf_store8((y), %[4]d, (i), (r)); \
  } while (0)
#define ZF_NORM_STORE(y, f, i, v) zf_store((y), %[4]d, (i), %[1]s_one(ep%[3]s, (i), zf_round((v), (f))))
`, n, params.String(), args.String(), out)
	return src + defs + normFixDefs(name, fix) + normDefs() + normSource, nil
}
