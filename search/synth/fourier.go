package synth

import (
	"fmt"
	"math"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/precision"
)

// fitFourier explains random Fourier features of a scalar per row: x [N]
// (or [N, 1]) and a frequency vector w [F] give t [N, 2F], the cosines and
// sines of c·x·w side by side (Gaussian Fourier projections of a noise
// level; the frequencies are a parameter, drawn once). What the code may
// vary is tried: log(x) or x, 2π or no scale, the scale applied to x
// first or to the product, cosines first or sines; and where the call runs
// in a narrow format, each product rounded to it (a bf16 forward's
// x·w is a bf16 tensor before the scale multiplies it) or kept in f32.
func (s *synth) fitFourier(x *val, w *val, t *val) *val {
	f := w.numel()
	if len(w.shape) != 1 || len(t.shape) != 2 || t.shape[1] != 2*f || x.numel() != t.shape[0] {
		return nil
	}
	col := s.reshape(x, []int{t.shape[0], 1})
	row := s.reshape(w, []int{1, f})
	if col == nil || row == nil {
		return nil
	}
	inners := []precision.Format{f32}
	if t.format != f32 && x.format == t.format && w.format == t.format {
		inners = append(inners, t.format)
	}
	var cands []*expr
	for _, inner := range inners {
		cands = append(cands, s.fourierCands(col, row, t, inner)...)
	}
	return s.bestFit(t, cands, "fourier")
}

// fourierCands are fitFourier's candidates for t with x·w and the scale's
// products stored in inner: log(x) or x, 2π or no scale, the scale
// applied to x first or to the product, cosines first or sines.
func (s *synth) fourierCands(col, row, t *val, inner precision.Format) []*expr {
	act := func(v *val, k exec.ActKind) *val {
		return s.derive(&expr{op: program.OpAct, attrs: program.Attrs{Act: k}, args: []*val{v}, out: t.format})
	}
	mul := func(a, b *val, label string) *val {
		return s.derive(&expr{op: program.OpMul, args: []*val{a, b}, out: inner, label: label})
	}
	rounded := "" // the products' format, where it is not f32
	if inner != f32 {
		rounded = " products=" + inner.String()
	}
	var cands []*expr
	for _, logged := range []bool{false, true} {
		in := col
		if logged {
			in = act(col, exec.ActLog)
		}
		for _, c := range []float64{2 * math.Pi, 1} {
			for _, scaleFirst := range []bool{true, false} {
				var arg *val
				switch {
				case c == 1 && !scaleFirst:
					continue // the same product as scale first
				case c == 1:
					arg = mul(in, row, "x·w")
				case scaleFirst:
					arg = mul(mul(in, s.constant(c), "c·x"), row, "(c·x)·w")
				default:
					arg = mul(mul(in, row, "x·w"), s.constant(c), "(x·w)·c")
				}
				if arg == nil {
					continue
				}
				cos, sin := act(arg, exec.ActCos), act(arg, exec.ActSin)
				if cos == nil || sin == nil {
					continue
				}
				for _, cosFirst := range []bool{true, false} {
					parts := []*val{sin, cos}
					if cosFirst {
						parts = []*val{cos, sin}
					}
					cands = append(cands, &expr{op: program.OpConcat, attrs: program.Attrs{Axis: 1}, args: parts, out: t.format,
						label: fmt.Sprintf("log=%v scale=%.6g scale_first=%v cos_first=%v%s", logged, c, scaleFirst, cosFirst, rounded)})
				}
			}
		}
	}
	return cands
}
