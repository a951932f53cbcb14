package synth

import (
	"fmt"
	"slices"

	"github.com/zflow/zflow/exec/program"
)

// maxDilation is the widest tap spacing a dilated convolution is tried
// with (WaveNet-style stacks and atrous stages use 2, 3, 4, 8, 9).
const maxDilation = 9

// fitDilatedConv explains a convolution of stride 1 whose taps are spaced
// d apart (torch's dilation): x [B, C, H, W] by w [O, C/g, kh, kw], or a
// sequence x [B, C, L] by w [O, C/g, k] read as one row (conv1d), every
// spacing from 2 up to maxDilation whose zero padding gives the output's
// size, the values deciding. Tried where the adjacent-tap readings fail.
func (s *synth) fitDilatedConv(x, w, bias, t *val) *val {
	seq := len(w.shape) == 3
	if seq {
		if len(x.shape) != 3 || len(t.shape) != 3 {
			return nil
		}
		x = s.reshape(x, []int{x.shape[0], x.shape[1], 1, x.shape[2]})
		w = s.reshape(w, []int{w.shape[0], w.shape[1], 1, w.shape[2]})
		if x == nil || w == nil {
			return nil
		}
	}
	if len(w.shape) != 4 || len(x.shape) != 4 || t.shape[1] != w.shape[0] || max(w.shape[2], w.shape[3]) < 2 {
		return nil
	}
	groups := convGroups(x, w)
	if groups == 0 {
		return nil
	}
	// the output's spatial sides, as the convolution makes them
	out := slices.Clone(t.shape[2:])
	if seq {
		out = []int{1, t.shape[2]}
	}
	var cands []*expr
	for d := 2; d <= maxDilation; d++ {
		padH2 := out[0] - x.shape[2] + d*(w.shape[2]-1)
		padW2 := out[1] - x.shape[3] + d*(w.shape[3]-1)
		if seq {
			padH2 = 0
		}
		if padW2 < 0 || padW2%2 != 0 || padH2 != padW2 && !seq {
			continue
		}
		p := program.ConvParams{Pad: padW2 / 2, Groups: groups, Dilation: d, Seq: seq}
		e := &expr{op: program.OpConv2D, attrs: program.Attrs{Conv: p}, args: []*val{x, w, bias}, out: t.format,
			label: fmt.Sprintf("conv %dx%d dilation %d pad %d groups %d", w.shape[2], w.shape[3], d, p.Pad, groups)}
		if seq {
			c := s.derive(e)
			if c == nil {
				continue
			}
			e = &expr{op: program.OpReshape, attrs: program.Attrs{Shape: slices.Clone(t.shape)}, args: []*val{c}, out: t.format,
				label: fmt.Sprintf("conv1d %d dilation %d pad %d groups %d", w.shape[3], d, p.Pad, groups)}
		}
		cands = append(cands, e)
	}
	if !seq {
		cands = append(cands, s.stridedDilated(x, w, bias, t, groups)...)
	}
	return s.bestFit(t, cands, "conv")
}

// stridedDilated are the dilated convolutions of stride 2 or 3 whose
// output has t's sides (a selective kernel's dilated path that also
// downsamples): the convolution at stride 1, then every stride-th row and
// column kept (each kept output is the same sum the strided convolution
// makes).
func (s *synth) stridedDilated(x, w, bias, t *val, groups int) []*expr {
	k := w.shape[2]
	if w.shape[3] != k {
		return nil
	}
	var cands []*expr
	for st := 2; st <= 3; st++ {
		for d := 2; d <= maxDilation; d++ {
			for p := 0; p <= d*(k-1)/2+1; p++ {
				fh, fw := x.shape[2]+2*p-d*(k-1), x.shape[3]+2*p-d*(k-1) // the stride-1 sides
				if fh < 1 || fw < 1 || (fh-1)/st+1 != t.shape[2] || (fw-1)/st+1 != t.shape[3] {
					continue
				}
				full := s.derive(&expr{op: program.OpConv2D, attrs: program.Attrs{Conv: program.ConvParams{Pad: p, Groups: groups, Dilation: d}}, args: []*val{x, w, bias}, out: t.format,
					label: fmt.Sprintf("conv %dx%d dilation %d pad %d groups %d", k, k, d, p, groups)})
				if full == nil {
					continue
				}
				every := func(n, m int) *val {
					ids := make([]float32, m)
					for i := range ids {
						ids[i] = float32(i * st)
					}
					c := s.relConst(fmt.Sprintf("every[%d,%d,%d]", n, st, m), []int{m}, ids,
						fmt.Sprintf("every %dth of %d cells (a strided convolution's outputs, made from the sizes)", st, n))
					c.intType = true
					return c
				}
				rows := s.gatherAlong(full, 2, every(fh, t.shape[2]), "every stride-th row")
				if rows == nil {
					continue
				}
				if picked := s.gatherAlong(rows, 3, every(fw, t.shape[3]), "every stride-th column"); picked != nil {
					cands = append(cands, &expr{op: program.OpReshape, attrs: program.Attrs{Shape: slices.Clone(t.shape)}, args: []*val{picked}, out: t.format,
						label: fmt.Sprintf("conv %dx%d dilation %d stride %d pad %d groups %d", k, k, d, st, p, groups)})
				}
			}
		}
	}
	return cands
}
