package program

import (
	"fmt"
	"slices"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/precision"
)

// ConvParams configure a 2-D convolution: Pad zeros on each side of H
// and W, Groups any count dividing the channels and the filters (1: every
// input channel feeds every output; the channel count with one filter per
// channel: depthwise), Stride the step between output positions along H
// and W (0 or 1: every position; an overlapping patch embedding's 4). Seq
// makes it torch's conv1d of a sequence laid out as [B, C, 1, L] with
// w [O, C/g, 1, k]: the padding and the stride along L alone. Kernel and
// Ceil are a pool's (OpMaxPool2D): the window's side, and whether a last
// partial window is kept (torch's ceil_mode). Dilation spaces a
// convolution's taps (0 or 1: adjacent; d: tap i reads offset i·d, the
// kernel spanning d·(k − 1) + 1), with stride 1 only.
type ConvParams struct {
	Pad      int
	Groups   int
	Stride   int
	Seq      bool
	Kernel   int
	Ceil     bool
	Dilation int
}

// dilation is the spacing of the taps: 1 unless Dilation says more.
func (p ConvParams) dilation() int { return max(p.Dilation, 1) }

// axes are the padding and stride along H and along W.
func (p ConvParams) axes() (padH, padW, strideH, strideW int) {
	st := max(p.Stride, 1)
	if p.Seq {
		return 0, p.Pad, 1, st
	}
	return p.Pad, p.Pad, st, st
}

// convShape is the output shape of conv2d(x [B, C, H, W], w [O, C/g, kh,
// kw]) under p, or an error naming what does not fit.
func convShape(x, w []int, p ConvParams) ([]int, error) {
	if len(x) != 4 || len(w) != 4 {
		return nil, fmt.Errorf("conv2d of %v by %v: want x [B, C, H, W] and w [O, C/groups, kh, kw]", x, w)
	}
	g := max(p.Groups, 1)
	if x[1]%g != 0 || w[0]%g != 0 || w[1]*g != x[1] {
		return nil, fmt.Errorf("conv2d of %v by %v in %d groups: the groups must divide the channels and the filters, w[1] = channels / groups", x, w, g)
	}
	if p.Seq && (x[2] != 1 || w[2] != 1) {
		return nil, fmt.Errorf("conv1d of %v by %v: want x [B, C, 1, L] and w [O, C/groups, 1, k]", x, w)
	}
	ph, pw, sh, sw := p.axes()
	d := p.dilation()
	if p.Dilation < 0 || d > 1 && max(sh, sw) > 1 {
		return nil, fmt.Errorf("conv2d of %v by %v: dilation %d with stride %d (a dilated convolution has stride 1)", x, w, p.Dilation, p.Stride)
	}
	dh, dw := x[2]+2*ph-d*(w[2]-1)-1, x[3]+2*pw-d*(w[3]-1)-1
	if p.Pad < 0 || p.Stride < 0 || dh < 0 || dw < 0 {
		return nil, fmt.Errorf("conv2d of %v by %v with padding %d, stride %d, dilation %d leaves no output", x, w, p.Pad, p.Stride, d)
	}
	h, wd := dh/sh+1, dw/sw+1
	return []int{x[0], w[0], h, wd}, nil
}

// conv2dRun is torch's conv2d (stride 1) composed of backend ops: the
// input padded with zeros, each filter tap a slice of it. Groups 1: the
// taps gathered as columns (c, i, j) and one Linear against w [O, C·kh·kw]
// (f32 accumulation, rounded once to s.Out); depthwise: Σ taps · w[c, i, j]
// in f32, the bias added, rounded once to s.Out (RoundBeforeBias, both:
// the sum rounded to s.Out before the bias is added); other group counts: each
// group's channels through its filters as groups 1 (groupedConv).
func conv2dRun(b exec.Backend, x, w, bias exec.Tensor, p ConvParams, s exec.Spec) (exec.Tensor, error) {
	xs, ws := x.Shape(), w.Shape()
	out, err := convShape(xs, ws, p)
	if err != nil {
		return nil, err
	}
	if g := max(p.Groups, 1); g > 1 && (g != xs[1] || ws[0] != xs[1]) {
		return groupedConv(b, x, w, bias, p, s)
	}
	sc := &scratch{b: b}
	defer sc.free()
	keep := sc.keep
	f32 := exec.Out(precision.F32)
	B, C, H, W := xs[0], xs[1], out[2], out[3]
	kh, kw := ws[2], ws[3]
	tap, err := taps(b, x, p, H, W, kh, kw, 0, keep)
	if err != nil {
		return nil, err
	}
	if max(p.Groups, 1) == 1 {
		var cols []exec.Tensor
		for i := range kh {
			for j := range kw {
				t, err := tap(i, j)
				if err != nil {
					return nil, err
				}
				if t, err = keep(b.Reshape(t, []int{B, C, 1, H * W})); err != nil {
					return nil, err
				}
				cols = append(cols, t)
			}
		}
		im, err := keep(b.Concat(cols, 2)) // [B, C, kh·kw, H·W]: columns (c, i, j)
		if err != nil {
			return nil, err
		}
		if im, err = keep(b.Reshape(im, []int{B, C * kh * kw, H * W})); err != nil {
			return nil, err
		}
		if im, err = keep(b.Permute(im, []int{0, 2, 1})); err != nil {
			return nil, err
		}
		wm, err := keep(b.Reshape(w, []int{ws[0], C * kh * kw}))
		if err != nil {
			return nil, err
		}
		y, err := keep(b.Linear(im, wm, bias, s)) // [B, H·W, O]
		if err != nil {
			return nil, err
		}
		if y, err = keep(b.Permute(y, []int{0, 2, 1})); err != nil {
			return nil, err
		}
		return b.Reshape(y, out)
	}
	wv, err := b.Download(w)
	if err != nil {
		return nil, err
	}
	var bb exec.Tensor
	if bias != nil {
		if bb, err = keep(b.Reshape(bias, []int{1, C, 1, 1})); err != nil {
			return nil, err
		}
	}
	// stored: every product and partial sum in s.Out, the bias first
	// (exec.RoundAccum, as the groups-1 path's Linear does it)
	stored := s.Has(exec.RoundAccum) && s.Out != precision.F32
	step := f32
	if stored {
		step = exec.Out(s.Out)
	}
	var acc exec.Tensor
	for i := range kh {
		for j := range kw {
			t, err := tap(i, j)
			if err != nil {
				return nil, err
			}
			col := make([]float32, C)
			for c := range C {
				col[c] = wv[(c*kh+i)*kw+j]
			}
			k, err := keep(b.Upload(col, []int{1, C, 1, 1}, precision.F32))
			if err != nil {
				return nil, err
			}
			prod, err := keep(b.Mul(t, k, step))
			if err != nil {
				return nil, err
			}
			switch {
			case acc != nil:
				acc, err = keep(b.Add(acc, prod, step))
			case stored && bb != nil:
				acc, err = keep(b.Add(prod, bb, step))
			default:
				acc = prod
			}
			if err != nil {
				return nil, err
			}
		}
	}
	if stored {
		return b.Cast(acc, s.Out)
	}
	if bias != nil {
		if s.Has(exec.RoundBeforeBias) {
			// the sum rounded, then the bias added in the output's format
			if acc, err = keep(b.Cast(acc, s.Out)); err != nil {
				return nil, err
			}
			return b.Add(acc, bb, exec.Out(s.Out))
		}
		if acc, err = keep(b.Add(acc, bb, f32)); err != nil {
			return nil, err
		}
	}
	return b.Cast(acc, s.Out)
}

// groupedConv is a convolution of g groups that is not depthwise: group
// q's channels [q·C/g, (q+1)·C/g) through filters [q·O/g, (q+1)·O/g) as a
// convolution of groups 1 (one Linear each: f32 accumulation, rounded
// once), the groups' outputs joined along the channels.
func groupedConv(b exec.Backend, x, w, bias exec.Tensor, p ConvParams, s exec.Spec) (exec.Tensor, error) {
	sc := &scratch{b: b}
	defer sc.free()
	keep := sc.keep
	g := p.Groups
	c, o := x.Shape()[1]/g, w.Shape()[0]/g
	one := p
	one.Groups = 1
	var parts []exec.Tensor
	for q := range g {
		xq, err := keep(b.Slice(x, 1, q*c, (q+1)*c))
		if err != nil {
			return nil, fmt.Errorf("conv2d group %d: %w", q, err)
		}
		wq, err := keep(b.Slice(w, 0, q*o, (q+1)*o))
		if err != nil {
			return nil, fmt.Errorf("conv2d group %d: %w", q, err)
		}
		var bq exec.Tensor
		if bias != nil {
			if bq, err = keep(b.Slice(bias, 0, q*o, (q+1)*o)); err != nil {
				return nil, fmt.Errorf("conv2d group %d: %w", q, err)
			}
		}
		y, err := keep(conv2dRun(b, xq, wq, bq, one, s))
		if err != nil {
			return nil, fmt.Errorf("conv2d group %d: %w", q, err)
		}
		parts = append(parts, y)
	}
	return b.Concat(parts, 1)
}

// scratch holds a composed op's intermediates, freed when it returns
// (what it returns is a new tensor or a view, which the backends'
// reference counts keep alive).
type scratch struct {
	b  exec.Backend
	ts []exec.Tensor
}

// keep records t (when err is nil) and passes both through.
func (s *scratch) keep(t exec.Tensor, err error) (exec.Tensor, error) {
	if err == nil {
		s.ts = append(s.ts, t)
	}
	return t, err
}

func (s *scratch) free() {
	for _, t := range s.ts {
		s.b.Free(t)
	}
}

// taps returns tap(i, j): the input positions filter tap (i, j) reads for
// each of the H × W outputs, [B, C, H, W], from x padded with fill as p
// says (zeros for a convolution, −∞ for a max pool).
// A stride s reads every s-th position: the padded input, widened with
// fill to a multiple of the strides, is read as [B, C, ·/sh, sh, ·/sw,
// sw], where tap (i, j) is one phase (i mod sh, j mod sw) of each axis,
// offset by (i/sh, j/sw).
func taps(b exec.Backend, x exec.Tensor, p ConvParams, H, W, kh, kw int, fill float32, keep func(exec.Tensor, error) (exec.Tensor, error)) (func(i, j int) (exec.Tensor, error), error) {
	ph, pw, sh, sw := p.axes()
	xs := x.Shape()
	if sh == 1 && sw == 1 {
		padded, err := padWith(b, x, [2][2]int{{ph, ph}, {pw, pw}}, fill, keep)
		if err != nil {
			return nil, err
		}
		d := p.dilation()
		return func(i, j int) (exec.Tensor, error) {
			r, err := keep(b.Slice(padded, 2, i*d, i*d+H))
			if err != nil {
				return nil, err
			}
			return keep(b.Slice(r, 3, j*d, j*d+W))
		}, nil
	}
	// rows of the grid: enough for the last tap's phase and offset (a
	// ceil-mode pool's last window reaches past the padding), the end
	// filled up to a whole number of strides
	hs := max((xs[2]+2*ph+sh-1)/sh, (kh-1)/sh+H)
	ws := max((xs[3]+2*pw+sw-1)/sw, (kw-1)/sw+W)
	padded, err := padWith(b, x, [2][2]int{{ph, max(hs*sh-xs[2]-ph, 0)}, {pw, max(ws*sw-xs[3]-pw, 0)}}, fill, keep)
	if err != nil {
		return nil, err
	}
	if padded, err = keep(b.Slice(padded, 2, 0, hs*sh)); err != nil {
		return nil, err
	}
	if padded, err = keep(b.Slice(padded, 3, 0, ws*sw)); err != nil {
		return nil, err
	}
	grid, err := keep(b.Reshape(padded, []int{xs[0], xs[1], hs, sh, ws, sw}))
	if err != nil {
		return nil, err
	}
	return func(i, j int) (exec.Tensor, error) {
		r, err := keep(b.Slice(grid, 3, i%sh, i%sh+1))
		if err != nil {
			return nil, err
		}
		if r, err = keep(b.Slice(r, 2, i/sh, i/sh+H)); err != nil {
			return nil, err
		}
		if r, err = keep(b.Slice(r, 5, j%sw, j%sw+1)); err != nil {
			return nil, err
		}
		if r, err = keep(b.Slice(r, 4, j/sw, j/sw+W)); err != nil {
			return nil, err
		}
		return keep(b.Reshape(r, []int{xs[0], xs[1], H, W}))
	}, nil
}

// padWith surrounds the last two axes of x with fill: pad[0] before and
// after H, pad[1] before and after W.
func padWith(b exec.Backend, x exec.Tensor, pad [2][2]int, fill float32, keep func(exec.Tensor, error) (exec.Tensor, error)) (exec.Tensor, error) {
	zeros := func(ax, n int) (exec.Tensor, error) {
		shape := slices.Clone(x.Shape())
		shape[ax] = n
		cells := make([]float32, exec.Numel(shape))
		if fill != 0 {
			for i := range cells {
				cells[i] = fill
			}
		}
		return keep(b.Upload(cells, shape, x.Format()))
	}
	for a, pp := range pad {
		if pp == [2]int{} {
			continue
		}
		ax := 2 + a
		parts := []exec.Tensor{x}
		if pp[0] > 0 {
			z, err := zeros(ax, pp[0])
			if err != nil {
				return nil, err
			}
			parts = append([]exec.Tensor{z}, parts...)
		}
		if pp[1] > 0 {
			z, err := zeros(ax, pp[1])
			if err != nil {
				return nil, err
			}
			parts = append(parts, z)
		}
		var err error
		if x, err = keep(b.Concat(parts, ax)); err != nil {
			return nil, err
		}
	}
	return x, nil
}
