package synth

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/precision"
)

func randomVal(rng *rand.Rand, origin string, shape ...int) *val {
	n := 1
	for _, d := range shape {
		n *= d
	}
	v := &val{shape: shape, data: make([]float32, n), format: precision.F32, origin: origin}
	for i := range v.data {
		v.data[i] = float32(rng.NormFloat64())
	}
	return v
}

// TestFitStridedConv1D: 1-D convolutions of stride 2 and padding 1 (an
// audio encoder's downsampling conv) and of stride 16 with a padding the
// stride does not divide (a raw waveform's first conv) are found at their
// stride and padding.
func TestFitStridedConv1D(t *testing.T) {
	for _, tc := range []struct{ c, o, l, k, stride, pad int }{
		{3, 4, 20, 5, 2, 1},
		{1, 4, 300, 31, 16, 3},
	} {
		rng := rand.New(rand.NewPCG(1, 5))
		x, w, b := randomVal(rng, "x", 1, tc.c, tc.l), randomVal(rng, "w", tc.o, tc.c, tc.k), randomVal(rng, "b", tc.o)
		w.param, b.param = true, true
		lt := (tc.l+2*tc.pad-tc.k)/tc.stride + 1
		want := make([]float32, tc.o*lt)
		for oc := range tc.o {
			for j := range lt {
				acc := float64(b.data[oc])
				for ic := range tc.c {
					for tap := range tc.k {
						if p := j*tc.stride + tap - tc.pad; p >= 0 && p < tc.l {
							acc += float64(x.data[ic*tc.l+p]) * float64(w.data[(oc*tc.c+ic)*tc.k+tap])
						}
					}
				}
				want[oc*lt+j] = float32(acc)
			}
		}
		s, _, target := planted(t, precision.F32, []int{1, tc.o, lt}, want)
		got := s.fitConv1D(x, []*val{w, b}, target)
		if got == nil {
			t.Fatalf("%+v: not explained", tc)
		}
		if e := relRMS(precision.F32, got.data, want); e > 1e-6 {
			t.Errorf("%+v: rel-RMS %.3g (%s)", tc, e, got.from.label)
		}
	}
}

// TestFitStridedConv2D: an overlapping patch embedding (7×7, stride 4,
// pad 3) and a depthwise downsampling 3×3 of stride 2 are found by the
// conv fit at their stride and padding.
func TestFitStridedConv2D(t *testing.T) {
	for _, tc := range []struct{ c, o, cg, h, k, stride, pad int }{
		{3, 5, 3, 16, 7, 4, 3},
		{4, 4, 1, 9, 3, 2, 1},
	} {
		rng := rand.New(rand.NewPCG(2, uint64(tc.k)))
		x, w, b := randomVal(rng, "x", 1, tc.c, tc.h, tc.h), randomVal(rng, "w", tc.o, tc.cg, tc.k, tc.k), randomVal(rng, "b", tc.o)
		w.param, b.param = true, true
		oh := (tc.h+2*tc.pad-tc.k)/tc.stride + 1
		per := tc.o / (tc.c / tc.cg)
		want := make([]float32, tc.o*oh*oh)
		for oc := range tc.o {
			for i := range oh {
				for j := range oh {
					acc := float64(b.data[oc])
					for ic := range tc.cg {
						ch := oc/per*tc.cg + ic
						for a := range tc.k {
							for d := range tc.k {
								y, z := i*tc.stride+a-tc.pad, j*tc.stride+d-tc.pad
								if y >= 0 && y < tc.h && z >= 0 && z < tc.h {
									acc += float64(x.data[(ch*tc.h+y)*tc.h+z]) * float64(w.data[((oc*tc.cg+ic)*tc.k+a)*tc.k+d])
								}
							}
						}
					}
					want[(oc*oh+i)*oh+j] = float32(acc)
				}
			}
		}
		s, _, target := planted(t, precision.F32, []int{1, tc.o, oh, oh}, want)
		got := s.fitConv2D(x, []*val{w, b}, target)
		if got == nil {
			t.Fatalf("%+v: not explained", tc)
		}
		if e := relRMS(precision.F32, got.data, want); e > 1e-6 {
			t.Errorf("%+v: rel-RMS %.3g (%s)", tc, e, got.from.label)
		}
		if c := got.from.attrs.Conv; c.Stride != tc.stride || c.Pad != tc.pad {
			t.Errorf("%+v: stride %d pad %d", tc, c.Stride, c.Pad)
		}
	}
}

// TestChannelsFirstNorm: torch's GroupNorm of 4 groups over [B, 8, T]
// (channels first), γ and β per channel, is found among the group counts.
func TestChannelsFirstNorm(t *testing.T) {
	const b, c, l, groups = 2, 8, 10, 4
	const eps = 1e-5
	rng := rand.New(rand.NewPCG(2, 5))
	x, g, beta := randomVal(rng, "x", b, c, l), randomVal(rng, "γ", c), randomVal(rng, "β", c)
	g.param, beta.param = true, true
	want := make([]float32, len(x.data))
	per := c / groups * l
	for bi := range b {
		for gi := range groups {
			seg := x.data[(bi*groups+gi)*per : (bi*groups+gi+1)*per]
			var mean, sq float64
			for _, v := range seg {
				mean += float64(v)
			}
			mean /= float64(per)
			for _, v := range seg {
				sq += (float64(v) - mean) * (float64(v) - mean)
			}
			rstd := 1 / math.Sqrt(sq/float64(per)+eps)
			for i, v := range seg {
				ch := gi*(c/groups) + i/l
				want[(bi*groups+gi)*per+i] = float32((float64(v)-mean)*rstd*float64(g.data[ch]) + float64(beta.data[ch]))
			}
		}
	}
	s, _, target := planted(t, precision.F32, []int{b, c, l}, want)
	got := s.fitNorm(x, []*val{g, beta}, target)
	if got == nil {
		t.Fatal("not explained")
	}
	if e := relRMS(precision.F32, got.data, want); e > 1e-6 {
		t.Errorf("rel-RMS %.3g (%s)", e, got.from.label)
	}
	if got.fit == nil || got.fit.norm.Kind != exec.NormLayer || got.fit.norm.Eps != eps {
		t.Errorf("the fit names no layer norm of ε %g (%+v): the document's norm factors would be invalid", eps, got.fit)
	}
}

// TestIntegerPatternOneStep: a one-step run whose request holds no
// integers reads a mask of 0 and −100 no expression makes (a shifted
// window's) as a constant pattern of its shapes, not as an opaque value.
func TestIntegerPatternOneStep(t *testing.T) {
	mask := make([]float32, 16)
	for i := range mask {
		if i%3 == 0 {
			mask[i] = -100
		}
	}
	s, sc, target := planted(t, precision.F32, []int{4, 4}, mask)
	if s.integerRequest() {
		t.Fatal("the planted request holds integers")
	}
	got := s.explainOnce(target, sc)
	if got.opaque || got.name == "" {
		t.Errorf("not a constant of the shapes (opaque %v, name %q)", got.opaque, got.name)
	}
}

// TestSummedBiases: a position bias per head [1, H, S, S] and a mask per
// batch row [B, S, S] (a shifted window's) are offered to the attention
// search as one bias, their sum laid out [B, H, S, S]; a lone bias gives
// no sum.
func TestSummedBiases(t *testing.T) {
	const b, h, n = 3, 2, 4
	rng := rand.New(rand.NewPCG(3, 5))
	pos, mask := randomVal(rng, "position bias", 1, h, n, n), randomVal(rng, "mask", b, n, n)
	s, _, _ := planted(t, precision.F32, []int{1}, []float32{0})
	sums := s.summedBiases([]*val{pos, mask}, b)
	if len(sums) != 1 {
		t.Fatalf("%d sums, want 1", len(sums))
	}
	got := sums[0]
	if want := []int{b, h, n, n}; !slices.Equal(got.shape, want) {
		t.Fatalf("shape %v, want %v", got.shape, want)
	}
	for bi := range b {
		for hi := range h {
			for i := range n * n {
				if w := pos.data[hi*n*n+i] + mask.data[bi*n*n+i]; got.data[(bi*h+hi)*n*n+i] != w {
					t.Fatalf("[%d, %d, %d] = %g, want %g", bi, hi, i, got.data[(bi*h+hi)*n*n+i], w)
				}
			}
		}
	}
	if len(s.summedBiases([]*val{pos}, b)) != 0 {
		t.Error("a lone bias gives a sum")
	}
}

// TestShapeMade: windows of a 4×4 grid and frames exchanged with patches
// (a class row per frame left out) are orders made from shapes; a
// shuffled order and tokens picked by their values are not.
func TestShapeMade(t *testing.T) {
	f := func(xs ...int) []float32 {
		out := make([]float32, len(xs))
		for i, x := range xs {
			out[i] = float32(x)
		}
		return out
	}
	windows := f(0, 1, 4, 5, 2, 3, 6, 7, 8, 9, 12, 13, 10, 11, 14, 15)
	// 2 frames of [class, p0, p1, p2] → patches major, frames minor
	frames := f(1, 5, 2, 6, 3, 7)
	for _, c := range []struct {
		name string
		ids  []float32
		n    int
		want bool
	}{
		{"2×2 windows", windows, 16, true},
		{"frames and patches exchanged", frames, 8, true},
		{"shuffled", f(3, 0, 2, 1, 7, 5, 4, 6), 8, false},
		{"tokens routed", f(0, 3, 4, 6), 8, false},
		{"a row twice", f(0, 1, 1, 2), 4, false},
	} {
		if got := shapeMade(c.ids, c.n); got != c.want {
			t.Errorf("%s: shapeMade = %v, want %v", c.name, got, c.want)
		}
	}
}

// TestShapeMadeRolled: a 4×4 grid rolled by one row and one column
// (torch.roll(x, (−1, −1))) then cut into 2×2 windows is an order made
// from shapes.
func TestShapeMadeRolled(t *testing.T) {
	var ids []float32
	for wy := range 2 {
		for wx := range 2 {
			for y := range 2 {
				for x := range 2 {
					ids = append(ids, float32((wy*2+y+1)%4*4+(wx*2+x+1)%4))
				}
			}
		}
	}
	if !shapeMade(ids, 16) {
		t.Error("a rolled grid's windows are not read as made from shapes")
	}
	back := make([]float32, len(ids)) // the windows put back, then rolled back
	for i, j := range ids {
		back[int(j)] = float32(i)
	}
	if !shapeMade(back, 16) {
		t.Error("the windows put back and the grid rolled back are not read as made from shapes")
	}
}

// TestReadStridesBounded: a bf16 table of a 4×4 grid at stride 4 (its
// first pair turning by 4 per row) offers the stride first and at most
// maxReadStrides strides, though its noise lets many turns of 2π read as
// short decimals.
func TestReadStridesBounded(t *testing.T) {
	const rows, d = 16, 8
	cosT := &val{shape: []int{rows, d}, data: make([]float32, rows*d), format: precision.BF16}
	sinT := &val{shape: []int{rows, d}, data: make([]float32, rows*d), format: precision.BF16}
	for r := range rows {
		for j := range d {
			a := float64(r/4*4) * math.Pow(10000, -float64(j/2*2)/float64(d))
			cosT.data[r*d+j] = precision.BF16.Round(float32(math.Cos(a)))
			sinT.data[r*d+j] = precision.BF16.Round(float32(math.Sin(a)))
		}
	}
	got := readStrides(cosT, sinT, []int{4, 4})
	if len(got) == 0 || got[0] != 4 {
		t.Fatalf("strides %v, want 4 first", got)
	}
	if len(got) > maxReadStrides {
		t.Errorf("%d strides offered, at most %d", len(got), maxReadStrides)
	}
}

// TestChannelsFirstNormMoments: a bf16 GroupNorm as PyTorch's CUDA kernel
// computes it (one group per channel over [1, 8, 64]): the mean and rstd
// rounded to bf16 and read back, a = rstd·γ and b = β − a·mean in f32, y
// = a·x + b fused, rounded once. The fit takes the rounded statistics and
// reproduces nearly every element bit for bit; the norm composed of bf16
// primitives does not.
func TestChannelsFirstNormMoments(t *testing.T) {
	const c, l = 8, 64
	const eps = 1e-5
	rng := rand.New(rand.NewPCG(31, 7))
	bf := func(v *val) *val {
		for i, e := range v.data {
			v.data[i] = precision.RoundBF16(e*3 + 1)
		}
		v.format = precision.BF16
		return v
	}
	x, g, beta := bf(randomVal(rng, "x", 1, c, l)), bf(randomVal(rng, "γ", c)), bf(randomVal(rng, "β", c))
	g.param, beta.param = true, true
	want := make([]float32, len(x.data))
	for ch := range c {
		seg := x.data[ch*l : (ch+1)*l]
		var mean, sq float64
		for _, v := range seg {
			mean += float64(v)
		}
		mean /= l
		for _, v := range seg {
			sq += (float64(v) - mean) * (float64(v) - mean)
		}
		rstd := precision.RoundBF16(1 / float32(math.Sqrt(float64(float32(sq/l)+eps))))
		m := precision.RoundBF16(float32(mean))
		a := rstd * g.data[ch]
		b := exec.FMA32(-a, m, beta.data[ch])
		for i, v := range seg {
			want[ch*l+i] = precision.RoundBF16(exec.FMA32(v, a, b))
		}
	}
	s, _, target := planted(t, precision.BF16, []int{1, c, l}, want)
	got := s.channelsFirstNorm(x, []*val{g, beta}, target)
	if got == nil {
		t.Fatal("not explained")
	}
	exact := 0
	for i, v := range got.data {
		if v == want[i] {
			exact++
		}
	}
	if exact < len(want)*99/100 || !strings.Contains(got.from.label, "statistics in") {
		t.Errorf("%d of %d bit for bit (%s)", exact, len(want), got.from.label)
	}
	steps := s.derive(&expr{op: program.OpAdd, args: []*val{
		s.derive(&expr{op: program.OpMul, args: []*val{
			s.derive(&expr{op: program.OpNorm, attrs: program.Attrs{Norm: exec.NormParams{Kind: exec.NormLayer, Eps: eps}}, args: []*val{x, nil, nil}, out: precision.BF16}),
			s.reshape(g, []int{c, 1})}, out: precision.BF16}),
		s.reshape(beta, []int{c, 1})}, out: precision.BF16})
	same := 0
	for i, v := range steps.data {
		if v == want[i] {
			same++
		}
	}
	if same > len(want)*9/10 {
		t.Errorf("the norm of bf16 primitives is %d of %d bit for bit too: the planted arithmetic does not tell them apart", same, len(want))
	}
}
