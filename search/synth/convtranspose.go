package synth

import (
	"fmt"
	"slices"

	"github.com/zflow/zflow/exec/program"
)

// fitConvTransposed2D explains a 2-D transposed convolution whose windows
// overlap (w [Cin, Cout, kh, kw] over x [B, Cin, H, W], groups 1, stride
// s, padding p, output padding op: t [B, Cout, (H−1)·s − 2p + k + op, …],
// a decoder's upsampling): the convolution of x with s − 1 zeros inserted
// between its cells (and op more at the end), padded k − 1 − p on each
// side, by w's filters flipped and transposed ([Cout, Cin, kh, kw], its
// taps read last first). Each output is one f32 sum over Cin·kh·kw
// products plus the bias, rounded once. Every (s, p, op) the sizes allow
// is tried, the values deciding. The kernel-equals-stride case is
// fitConvTransposed's (one linear, no zeros). A 1-D one (w [Cin, Cout,
// k] over x [B, Cin, L], a vocoder's upsampling) is the same along L
// alone: x read as [B, Cin, 1, L], a conv1d of the spread sequence.
func (s *synth) fitConvTransposed2D(x *val, params []*val, t *val) *val {
	w, bias := convParams(params)
	seq := len(w.shape) == 3 && len(x.shape) == 3 && len(t.shape) == 3
	if !seq && (len(w.shape) != 4 || len(x.shape) != 4 || len(t.shape) != 4) || x.integral() {
		return nil
	}
	if seq {
		x = s.reshape(x, []int{x.shape[0], x.shape[1], 1, x.shape[2]})
		w = s.reshape(w, []int{w.shape[0], w.shape[1], 1, w.shape[2]})
		if x == nil || w == nil {
			return nil
		}
	}
	b, cin, h, wd := x.shape[0], x.shape[1], x.shape[2], x.shape[3]
	cout, kh, kw := w.shape[1], w.shape[2], w.shape[3]
	if w.shape[0] != cin || t.shape[0] != b || t.shape[1] != cout || bias != nil && bias.shape[0] != cout || kw < 2 || kh != kw && !seq {
		return nil
	}
	k := kw
	flipped := s.flippedFilters(w)
	if flipped == nil {
		return nil
	}
	var cands []*expr
	for st := 1; st <= k; st++ {
		for p := 0; p < k; p++ {
			op := t.shape[len(t.shape)-1] - ((wd-1)*st - 2*p + k)
			if op < 0 || op >= max(st, 1) || !seq && t.shape[2] != (h-1)*st-2*p+k+op || op > 0 && st == 1 {
				continue
			}
			up := s.zeroInserted(x, st, op, seq)
			if up == nil {
				continue
			}
			cp := program.ConvParams{Pad: k - 1 - p, Groups: 1, Seq: seq}
			label := fmt.Sprintf("transposed conv %dx%d stride %d pad %d output padding %d", k, k, st, p, op)
			if !seq {
				cands = append(cands, &expr{op: program.OpConv2D, attrs: program.Attrs{Conv: cp}, args: []*val{up, flipped, bias}, out: t.format, label: label})
				continue
			}
			conv := s.derive(&expr{op: program.OpConv2D, attrs: program.Attrs{Conv: cp}, args: []*val{up, flipped, bias}, out: t.format, label: "conv1d of the spread sequence"})
			if conv != nil {
				cands = append(cands, &expr{op: program.OpReshape, attrs: program.Attrs{Shape: slices.Clone(t.shape)}, args: []*val{conv}, out: t.format,
					label: fmt.Sprintf("transposed conv1d %d stride %d pad %d output padding %d", k, st, p, op)})
			}
		}
	}
	return s.bestFit(t, cands, "conv")
}

// flippedFilters is w [Cin, Cout, k, k] as a convolution's filters [Cout,
// Cin, k, k] with each kernel turned half a turn: the k² taps, read as
// rows, gathered last first.
func (s *synth) flippedFilters(w *val) *val {
	cin, cout, kh, kw := w.shape[0], w.shape[1], w.shape[2], w.shape[3]
	rows := s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: []int{2, 3, 1, 0}}, args: []*val{w}, out: w.format, label: "taps first"})
	rows = s.reshape(rows, []int{kh * kw, cout * cin})
	if rows == nil {
		return nil
	}
	idx := s.relConst(fmt.Sprintf("reversed%d", kh*kw), []int{kh * kw}, reversedRows(kh*kw),
		fmt.Sprintf("taps %d…0: a transposed convolution's kernel turned half a turn (made from the weight's shape)", kh*kw-1))
	idx.intType = true
	g := s.derive(&expr{op: program.OpGather, args: []*val{rows, idx}, out: w.format, label: "taps last first"})
	g = s.reshape(g, []int{kh, kw, cout, cin})
	if g == nil {
		return nil
	}
	return s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: []int{2, 3, 0, 1}}, args: []*val{g}, out: w.format, label: "filters of the transposed convolution"})
}

// zeroInserted is x [B, C, H, W] with st − 1 zeros between neighbouring
// cells along H and W ([B, C, (H−1)·st + 1, …]) and op more zeros at the
// end of each: a transposed convolution's input spread out. With seq,
// along W alone (a sequence read as [B, C, 1, L]).
func (s *synth) zeroInserted(x *val, st, op int, seq bool) *val {
	b, c, h, wd := x.shape[0], x.shape[1], x.shape[2], x.shape[3]
	zeros := func(shape []int) *val {
		return s.zeros(shape, x.format, fmt.Sprintf("zeros%v", shape), "zeros spreading a transposed convolution's input (made from the request's shape)")
	}
	rowSt := st
	if seq {
		rowSt = 1
	}
	cur := x
	if st > 1 {
		six := s.reshape(x, []int{b, c, h, 1, wd, 1})
		if six == nil {
			return nil
		}
		rows := six
		if rowSt > 1 {
			rows = s.derive(&expr{op: program.OpConcat, attrs: program.Attrs{Axis: 3}, args: []*val{six, zeros([]int{b, c, h, st - 1, wd, 1})}, out: x.format, label: "zeros after each row"})
			if rows == nil {
				return nil
			}
		}
		cols := s.derive(&expr{op: program.OpConcat, attrs: program.Attrs{Axis: 5}, args: []*val{rows, zeros([]int{b, c, h, rowSt, wd, st - 1})}, out: x.format, label: "zeros after each column"})
		spread := s.reshape(cols, []int{b, c, h * rowSt, wd * st})
		if spread == nil {
			return nil
		}
		cur = spread
		if rowSt > 1 {
			cur = s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: 2, Start: 0, End: (h-1)*st + 1}, args: []*val{spread}, out: x.format, label: "the last rows' zeros cut"})
		}
		cur = s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: 3, Start: 0, End: (wd-1)*st + 1}, args: []*val{cur}, out: x.format, label: "the last columns' zeros cut"})
	}
	if op > 0 && cur != nil {
		shape := slices.Clone(cur.shape)
		shape[2] = op
		if !seq {
			cur = s.derive(&expr{op: program.OpConcat, attrs: program.Attrs{Axis: 2}, args: []*val{cur, zeros(shape)}, out: x.format, label: "output padding rows"})
		}
		if cur != nil {
			shape = slices.Clone(cur.shape)
			shape[3] = op
			cur = s.derive(&expr{op: program.OpConcat, attrs: program.Attrs{Axis: 3}, args: []*val{cur, zeros(shape)}, out: x.format, label: "output padding columns"})
		}
	}
	return cur
}
