package cpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/precision"
)

// naiveRecurrence is a recurrent layer written as torch's documentation
// states it, in float64: the gates from W_ih·x + b_ih (xg) and W_hh·h +
// b_hh, GRU's h ← (1 − z)·n + z·h, positions visited backwards with
// reverse.
func naiveRecurrence(cell exec.Cell, reverse bool, b, l, h int, xg, whh, bh []float32) []float64 {
	g := cell.Gates()
	sig := func(v float64) float64 { return 1 / (1 + math.Exp(-v)) }
	out := make([]float64, b*l*h)
	for bi := range b {
		hs, cs := make([]float64, h), make([]float64, h)
		for i := range l {
			t := i
			if reverse {
				t = l - 1 - i
			}
			a := make([]float64, g*h) // W_hh·h + b_hh
			for j := range g * h {
				for k := range h {
					a[j] += float64(whh[j*h+k]) * hs[k]
				}
				if bh != nil {
					a[j] += float64(bh[j])
				}
			}
			x := func(j int) float64 { return float64(xg[(bi*l+t)*g*h+j]) }
			next := make([]float64, h)
			for j := range h {
				switch cell {
				case exec.CellLSTM:
					ig, fg := sig(x(j)+a[j]), sig(x(h+j)+a[h+j])
					gg, og := math.Tanh(x(2*h+j)+a[2*h+j]), sig(x(3*h+j)+a[3*h+j])
					cs[j] = fg*cs[j] + ig*gg
					next[j] = og * math.Tanh(cs[j])
				case exec.CellGRU:
					r, z := sig(x(j)+a[j]), sig(x(h+j)+a[h+j])
					n := math.Tanh(x(2*h+j) + r*a[2*h+j])
					next[j] = (1-z)*n + z*hs[j]
				case exec.CellTanh:
					next[j] = math.Tanh(x(j) + a[j])
				case exec.CellReLU:
					next[j] = math.Max(0, x(j)+a[j])
				}
			}
			hs = next
			copy(out[(bi*l+t)*h:], hs)
		}
	}
	return out
}

// TestRecurrence: every cell, both directions, with and without the
// state's bias, f32, is within 1e-6 rel-RMS of the layer as torch's
// documentation writes it in float64, and bf16 is the f32 result rounded
// once.
func TestRecurrence(t *testing.T) {
	bk := New(2)
	const b, l, h = 2, 9, 5
	for _, cell := range []exec.Cell{exec.CellLSTM, exec.CellGRU, exec.CellTanh, exec.CellReLU} {
		for _, reverse := range []bool{false, true} {
			for _, biased := range []bool{true, false} {
				r := rand.New(rand.NewPCG(uint64(cell), 3))
				g := cell.Gates()
				norm := func(k int, scale float64) []float32 {
					v := make([]float32, k)
					for i := range v {
						v[i] = float32(scale * r.NormFloat64())
					}
					return v
				}
				xg, whh := norm(b*l*g*h, 1), norm(g*h*h, 0.5)
				var bh []float32
				if biased {
					bh = norm(g*h, 0.3)
				}
				name := cell.String()
				if reverse {
					name += " reverse"
				}
				if !biased {
					name += " unbiased"
				}
				t.Run(name, func(t *testing.T) {
					ref := naiveRecurrence(cell, reverse, b, l, h, xg, whh, bh)
					checkScan(t, bk, ref, "documented recurrence", func(s exec.Spec) (exec.Tensor, error) {
						x, _ := bk.Upload(xg, []int{b, l, g * h}, precision.F32)
						w, _ := bk.Upload(whh, []int{g * h, h}, precision.F32)
						var bias exec.Tensor
						if bh != nil {
							bias, _ = bk.Upload(bh, []int{g * h}, precision.F32)
						}
						return bk.Recurrence(x, w, bias, exec.RecurrenceParams{Cell: cell, Reverse: reverse}, s)
					})
				})
			}
		}
	}
}

// TestRecurrenceRefuses: operands of the wrong shape for the cell and an
// unknown cell are errors naming the problem; a rounding point, a math
// variant and a backend without the kernel are refused with
// ErrUnsupported.
func TestRecurrenceRefuses(t *testing.T) {
	bk := New(1)
	up := func(be exec.Backend, shape ...int) exec.Tensor {
		x, err := be.Upload(make([]float32, exec.Numel(shape)), shape, precision.F32)
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	lstm := exec.RecurrenceParams{Cell: exec.CellLSTM}
	f32 := exec.Out(precision.F32)
	for _, c := range []struct {
		name        string
		be          exec.Backend
		xg, whh, bh []int
		p           exec.RecurrenceParams
		s           exec.Spec
		unsupported bool
		want        string
	}{
		{"a GRU's weight for an LSTM", bk, []int{1, 3, 12}, []int{12, 4}, nil, lstm, f32, false, "whh is not [4·H, H]"},
		{"xg of another width", bk, []int{1, 3, 12}, []int{16, 4}, nil, lstm, f32, false, "xg is not"},
		{"a bias of another width", bk, []int{1, 3, 16}, []int{16, 4}, []int{12}, lstm, f32, false, "bias is not"},
		{"no cell", bk, []int{1, 3, 4}, []int{4, 4}, nil, exec.RecurrenceParams{}, f32, false, "none of lstm"},
		{"a rounding point", bk, []int{1, 3, 16}, []int{16, 4}, nil, lstm, exec.Spec{Out: precision.BF16, Round: exec.RoundProduct}, true, "rounds once"},
		{"a math variant", bk, []int{1, 3, 16}, []int{16, 4}, nil, lstm, exec.Spec{Out: precision.F32, Math: exec.MathFastExp}, true, "precise math"},
		{"no kernel", newBasicOnly(bk), []int{1, 3, 16}, []int{16, 4}, nil, lstm, f32, true, "no recurrent scan kernel"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var bias exec.Tensor
			if c.bh != nil {
				bias = up(c.be, c.bh...)
			}
			_, err := c.be.Recurrence(up(c.be, c.xg...), up(c.be, c.whh...), bias, c.p, c.s)
			refused(t, err, "recurrence", c.want, c.unsupported)
		})
	}
}
