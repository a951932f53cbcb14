package reports

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/zflow/zflow/precision"
)

const (
	sigRows     = 512 // a 16 × 32 token grid
	sigGridH    = 16
	sigGridW    = 32
	sigChannels = 32
)

// planted is a reference tensor with distinct per-channel means and scales,
// rounded to bf16 as a captured reference would be.
type planted struct {
	rng       *rand.Rand
	mu, sigma []float64
}

func newPlanted(seed uint64) *planted {
	p := &planted{rng: rand.New(rand.NewPCG(seed, 7))}
	for range sigChannels {
		p.mu = append(p.mu, 2*p.rng.Float64()-1)
		p.sigma = append(p.sigma, 0.5+1.5*p.rng.Float64())
	}
	return p
}

// draw returns rows × channels values of f(x) for x ~ N(mu_c, sigma_c).
func (p *planted) draw(f func(float64) float64) []float64 {
	x := make([]float64, sigRows*sigChannels)
	for i := range x {
		ch := i % sigChannels
		x[i] = f(p.mu[ch] + p.sigma[ch]*p.rng.NormFloat64())
	}
	return x
}

func bf16(xs []float64) []float32 {
	out := make([]float32, len(xs))
	for i, x := range xs {
		out[i] = precision.RoundBF16(float32(x))
	}
	return out
}

func identity(x float64) float64 { return x }
func silu(x float64) float64     { return x / (1 + math.Exp(-x)) }
func geluTanh(x float64) float64 {
	return 0.5 * x * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(x+0.044715*x*x*x)))
}

func mapRows(ref []float32, perm func(row int) int) []float32 {
	out := make([]float32, len(ref))
	for r := range sigRows {
		copy(out[r*sigChannels:(r+1)*sigChannels], ref[perm(r)*sigChannels:])
	}
	return out
}

func TestDiagnosePlanted(t *testing.T) {
	cases := []struct {
		name string
		make func(p *planted) (ours, ref []float32)
		want Signature
	}{
		{"clean", func(p *planted) ([]float32, []float32) {
			x := p.draw(identity)
			ours := make([]float64, len(x))
			for i, v := range x {
				ours[i] = v * (1 + 1e-3*p.rng.NormFloat64())
			}
			return bf16(ours), bf16(x)
		}, NoSignature},
		{"magnitude ×1.3", func(p *planted) ([]float32, []float32) {
			ref := bf16(p.draw(identity))
			ours := make([]float32, len(ref))
			for i, v := range ref {
				ours[i] = precision.RoundBF16(1.3 * v)
			}
			return ours, ref
		}, Magnitude},
		{"magnitude per-channel scales", func(p *planted) ([]float32, []float32) {
			ref := bf16(p.draw(identity))
			ours := make([]float32, len(ref))
			for i, v := range ref {
				ours[i] = precision.RoundBF16(float32(0.7+0.02*float64(i%sigChannels)) * v)
			}
			return ours, ref
		}, Magnitude},
		{"bias", func(p *planted) ([]float32, []float32) {
			ref := bf16(p.draw(identity))
			ours := make([]float32, len(ref))
			for i, v := range ref {
				ch := i % sigChannels
				ours[i] = precision.RoundBF16(v + float32(0.3*p.sigma[ch]*float64(1-2*(ch%2))))
			}
			return ours, ref
		}, Bias},
		{"activation silu vs gelu", func(p *planted) ([]float32, []float32) {
			x := p.draw(identity)
			ref, ours := make([]float64, len(x)), make([]float64, len(x))
			for i, v := range x {
				ref[i], ours[i] = silu(v), geluTanh(v)
			}
			return bf16(ours), bf16(ref)
		}, Activation},
		{"topology rows permuted", func(p *planted) ([]float32, []float32) {
			ref := bf16(p.draw(identity))
			perm := p.rng.Perm(sigRows)
			return mapRows(ref, func(r int) int { return perm[r] }), ref
		}, Topology},
		{"topology transposed grid", func(p *planted) ([]float32, []float32) {
			ref := bf16(p.draw(identity))
			// unpatchify with h and w swapped: token (h, w) read from (w, h)
			return mapRows(ref, func(r int) int {
				h, w := r/sigGridW, r%sigGridW
				return w*sigGridH + h
			}), ref
		}, Topology},
		{"topology row block", func(p *planted) ([]float32, []float32) {
			ref := bf16(p.draw(identity))
			other := bf16(p.draw(identity))
			ours := make([]float32, len(ref))
			copy(ours, ref)
			// a quarter of the tokens, in one block, computed wrongly
			blk := ours[128*sigChannels : 256*sigChannels]
			copy(blk, other[128*sigChannels:256*sigChannels])
			return ours, ref
		}, Topology},
		{"numerics f16 overflow", func(p *planted) ([]float32, []float32) {
			x := p.draw(identity)
			for i := range x {
				if i%sigChannels == 3 {
					x[i] *= 40000 // one channel reaches past 65504
				}
			}
			ref := bf16(x)
			ours := make([]float32, len(ref))
			for i, v := range ref {
				ours[i] = precision.RoundF16(v)
			}
			return ours, ref
		}, Numerics},
		{"numerics isolated outliers", func(p *planted) ([]float32, []float32) {
			ref := bf16(p.draw(identity))
			ours := make([]float32, len(ref))
			copy(ours, ref)
			for range 8 {
				i := p.rng.IntN(len(ours))
				ours[i] = ref[i]*50 + 20
			}
			return ours, ref
		}, Numerics},
		{"numerics random", func(p *planted) ([]float32, []float32) {
			ref := bf16(p.draw(identity))
			ours := make([]float32, len(ref))
			for i, v := range ref {
				ours[i] = precision.RoundBF16(v + float32(0.2*p.rng.NormFloat64()))
			}
			return ours, ref
		}, Numerics},
	}
	for _, c := range cases {
		for seed := range uint64(3) {
			ours, ref := c.make(newPlanted(seed + 1))
			d, err := Diagnose(ours, ref, sigChannels)
			if err != nil {
				t.Fatal(err)
			}
			if d.Signature != c.want {
				t.Errorf("%s (seed %d): %v (%s), want %v\n%+v", c.name, seed, d.Signature, d.Reason, c.want, d.Evidence)
			} else if seed == 0 {
				t.Logf("%s: %v: %s", c.name, d.Signature, d.Reason)
			}
		}
	}
}

func TestDiagnoseErrors(t *testing.T) {
	if _, err := Diagnose([]float32{1}, []float32{1, 2}, 1); err == nil {
		t.Error("length mismatch accepted")
	}
	if _, err := Diagnose([]float32{1, 2, 3}, []float32{1, 2, 3}, 2); err == nil {
		t.Error("partial row accepted")
	}
	if _, err := Diagnose(nil, nil, 0); err == nil {
		t.Error("zero channels accepted")
	}
	d, err := Diagnose(nil, nil, 4)
	if err != nil || d.Signature != NoSignature {
		t.Errorf("empty pair: %v, %v", d.Signature, err)
	}
	// matching -Inf (an attention mask) is not a fault
	inf := float32(math.Inf(-1))
	d, _ = Diagnose([]float32{1, inf, 2, inf}, []float32{1, inf, 2, inf}, 2)
	if d.Signature != NoSignature {
		t.Errorf("matching -Inf: %v (%s)", d.Signature, d.Reason)
	}
}

func TestTopErrors(t *testing.T) {
	// k = 1 of 3 (ceil(0.001·3)): the 9, not the 5s before it.
	share, count, rows := topErrors([]float64{5, 5, 9}, 19, 1)
	if share != 9.0/19 || count != 1 || rows != 1 {
		t.Errorf("topErrors = %v, %d, %d", share, count, rows)
	}
	// 2000 values → k = 2: the two 4s in rows 0 and 999 (2 per row).
	d2 := make([]float64, 2000)
	d2[1], d2[5], d2[1999] = 4, 1, 4
	share, count, rows = topErrors(d2, 9, 2)
	if share != 8.0/9 || count != 2 || rows != 2 {
		t.Errorf("topErrors = %v, %d, %d", share, count, rows)
	}
}

// A mask matched on both sides is left out of the diagnosis: the wrong
// small entries beside it are read, not hidden by the mask's size; a mask
// on one side only is numerics.
func TestDiagnoseMasked(t *testing.T) {
	const C = 4
	min32 := float32(-math.MaxFloat32)
	ref := make([]float32, 64*C)
	for i := range ref {
		ref[i] = float32(i%7) - 3
	}
	for r := range 64 {
		ref[r*C+3] = min32 // a masked column
	}
	ours := slices.Clone(ref)
	for r := range 64 {
		ours[r*C] += 1.5 // a shift of channel 0
	}
	d, err := DiagnoseIn(ours, ref, C, precision.F32)
	if err != nil {
		t.Fatal(err)
	}
	if d.Signature == NoSignature || d.Evidence.Masked != 64 || d.Evidence.MaskMismatch != 0 {
		t.Errorf("shifted channel beside a mask: %v (%s), masked %d, mismatched %d; want a signature, 64, 0",
			d.Signature, d.Reason, d.Evidence.Masked, d.Evidence.MaskMismatch)
	}
	if d.Evidence.RelRMS < 0.1 {
		t.Errorf("rel-RMS %g: the mask's size hid the shift", d.Evidence.RelRMS)
	}
	ours = slices.Clone(ref)
	ours[3] = 0 // one mask lost
	d, err = DiagnoseIn(ours, ref, C, precision.F32)
	if err != nil {
		t.Fatal(err)
	}
	if d.Signature != Numerics || d.Evidence.MaskMismatch != 1 || d.Evidence.Masked != 63 {
		t.Errorf("a lost mask: %v (%s), masked %d, mismatched %d; want numerics, 63, 1",
			d.Signature, d.Reason, d.Evidence.Masked, d.Evidence.MaskMismatch)
	}
}
