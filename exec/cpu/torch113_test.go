package cpu

import (
	"bufio"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/precision"
)

// torch113 reads testdata/torch113_bf16.txt: activations on 48 inputs, and
// layer-norm cases, each as bf16 bit patterns widened to f32.
type lnCase struct {
	n          int
	affine     bool
	x, g, b, y []float32
}

func torch113(t *testing.T) (acts map[string][]float32, lns []lnCase) {
	return torch113File(t, "testdata/torch113_bf16.txt", precision.BF16)
}

// torch113File reads a file of torch113's form whose bit patterns are of
// format f (bf16, or f32 for torch113_f32.txt).
func torch113File(t *testing.T, path string, format precision.Format) (acts map[string][]float32, lns []lnCase) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	acts = map[string][]float32{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "//") {
			continue
		}
		if strings.HasPrefix(line, "LN ") {
			fs := strings.Fields(line)
			n, _ := strconv.Atoi(fs[1])
			lns = append(lns, lnCase{n: n, affine: fs[2] == "True"})
			continue
		}
		name, list, ok := strings.Cut(line, ":")
		if !ok {
			t.Fatalf("testdata: bad line %q", line)
		}
		var v []float32
		for _, h := range strings.Split(list, ",") {
			if format == precision.F32 {
				u, err := strconv.ParseUint(strings.TrimSpace(h), 0, 32)
				if err != nil {
					t.Fatalf("testdata: %v", err)
				}
				v = append(v, math.Float32frombits(uint32(u)))
				continue
			}
			u, err := strconv.ParseUint(strings.TrimSpace(h), 0, 16)
			if err != nil {
				t.Fatalf("testdata: %v", err)
			}
			v = append(v, precision.BF16ToF32(uint16(u)))
		}
		if len(lns) == 0 {
			acts[name] = v
			continue
		}
		c := &lns[len(lns)-1]
		switch name {
		case "x":
			c.x = v
		case "g":
			c.g = v
		case "b":
			c.b = v
		case "y":
			c.y = v
		}
	}
	return acts, lns
}

// TestComposedActivationsTorch113: PyTorch 1.13's CPU SiLU and GELU on
// bf16 round after every primitive (Vectorized<BFloat16> arithmetic), and
// Act with RoundEach reproduces them bit for bit; rounded once it does not.
func TestComposedActivationsTorch113(t *testing.T) {
	acts, _ := torch113(t)
	bk := New(1)
	x := acts["x"]
	for _, c := range []struct {
		name string
		f    exec.ActKind
	}{{"silu", exec.ActSiLU}, {"gelu_tanh", exec.ActGELUTanh}, {"gelu_erf", exec.ActGELUErf}} {
		want := acts[c.name]
		xt := up(t, bk, precision.BF16, []int{len(x)}, x...)
		gt, err := bk.Act(xt, c.f, exec.Composed(precision.BF16))
		got := values(t, bk, gt, err)
		ot, err := bk.Act(xt, c.f, exec.Out(precision.BF16))
		once := values(t, bk, ot, err)
		bad, badOnce := 0, 0
		for i := range want {
			if got[i] != want[i] {
				bad++
				t.Errorf("%s(%v): composed %v, torch 1.13 %v", c.name, x[i], got[i], want[i])
			}
			if once[i] != want[i] {
				badOnce++
			}
		}
		t.Logf("%s: composed %d/%d exact, rounded once %d/%d", c.name, len(want)-bad, len(want), len(want)-badOnce, len(want))
		if badOnce == 0 {
			t.Errorf("%s: rounding once matches torch 1.13 too: the vectors do not tell the forms apart", c.name)
		}
	}
}

// TestLayerNormStatsTorch113: PyTorch 1.13's CPU LayerNorm is reproduced
// by RoundStats bit for bit: on bf16 its Welford moments in bf16
// arithmetic, lane by lane, with the tail and the chunk cascade; on an f32
// tensor (a norm a narrow model runs in f32: diffusers' FP32LayerNorm on
// the CPU) the same moments in f32, then x·rstd + shift and ·γ + β each
// one fused multiply-add (the compiler contracts the f32 kernel's vector
// code; torch113_f32.py). Cases: one or two whole vectors (N 16, 32), a
// scalar tail (N 20), a cascade of chunks (N 600), affine. The plain norm
// (f64 statistics) is not bit-exact on either.
func TestLayerNormStatsTorch113(t *testing.T) {
	for _, c := range []struct {
		path string
		f    precision.Format
		eps  float32
	}{
		{"testdata/torch113_bf16.txt", precision.BF16, 1e-6},
		{"testdata/torch113_f32.txt", precision.F32, 1e-5},
	} {
		_, lns := torch113File(t, c.path, c.f)
		if len(lns) == 0 {
			t.Fatalf("%s: no layer-norm cases", c.path)
		}
		if plainExact := layerNormStats(t, lns, c.f, c.eps); plainExact {
			t.Errorf("%v: the plain norm matches torch 1.13 too: the vectors do not tell the forms apart", c.f)
		}
	}
}

// layerNormStats checks RoundStats against torch 1.13's layer-norm cases
// in format f and reports whether the plain norm matched them all too.
func layerNormStats(t *testing.T, lns []lnCase, f precision.Format, eps float32) (plainExact bool) {
	bk := New(1)
	plainExact = true
	for _, c := range lns {
		rows := len(c.x) / c.n
		xt := up(t, bk, f, []int{rows, c.n}, c.x...)
		var g, b exec.Tensor
		if c.affine {
			g = up(t, bk, f, []int{c.n}, c.g...)
			b = up(t, bk, f, []int{c.n}, c.b...)
		}
		p := exec.NormParams{Kind: exec.NormLayer, Eps: eps}
		gt, err := bk.Norm(xt, g, b, p, exec.Spec{Out: f, Round: exec.RoundStats})
		got := values(t, bk, gt, err)
		pt, err := bk.Norm(xt, g, b, p, exec.Out(f))
		plain := values(t, bk, pt, err)
		bad, badPlain := 0, 0
		for i := range c.y {
			if got[i] != c.y[i] {
				bad++
			}
			if plain[i] != c.y[i] {
				badPlain++
			}
		}
		t.Logf("%v N %d affine %v: stats %d/%d exact, plain %d/%d", f, c.n, c.affine, len(c.y)-bad, len(c.y), len(c.y)-badPlain, len(c.y))
		if bad > 0 {
			t.Errorf("%v N %d affine %v: %d values differ from torch 1.13", f, c.n, c.affine, bad)
		}
		plainExact = plainExact && badPlain == 0
	}
	return plainExact
}

// TestNormRefusals: the layer-norm kernel's Welford order is refused on
// RMS norms, and the two kernels' statistics together.
func TestNormRefusals(t *testing.T) {
	bk := New(1)
	x := up(t, bk, precision.BF16, []int{1, 4}, 1, 2, 3, 4)
	for _, c := range []struct {
		kind exec.NormKind
		s    exec.Spec
	}{
		{exec.NormRMS, exec.Spec{Out: precision.BF16, Math: exec.MathWelford}},
		{exec.NormLayer, exec.Spec{Out: precision.BF16, Round: exec.RoundStats, Math: exec.MathWelford}},
	} {
		if _, err := bk.Norm(x, nil, nil, exec.NormParams{Kind: c.kind, Eps: 1e-6}, c.s); err == nil {
			t.Errorf("%v norm with %v: no error", c.kind, c.s)
		}
	}
}

// TestRMSNormStepwise: RoundStats on an RMS norm is the norm written in
// bf16 primitives, x·rsqrt(mean(x²) + eps), every step rounded. For
// x = [1, 3, 2, 3] and eps 2⁻⁷: x² exact, mean 5.75, + eps → bf16 5.75,
// rsqrt 0.41702 → bf16 0.41796875, x·r → 0.41796875, 1.25, 0.8359375,
// 1.25; statistics in f32 (RoundNormalized alone) give 0.416015625 and
// 0.83203125 for the first and third.
func TestRMSNormStepwise(t *testing.T) {
	bk := New(1)
	x := up(t, bk, precision.BF16, []int{1, 4}, 1, 3, 2, 3)
	p := exec.NormParams{Kind: exec.NormRMS, Eps: 0x1p-7}
	for _, c := range []struct {
		s    exec.Spec
		want []float32
	}{
		{exec.Spec{Out: precision.BF16, Round: exec.RoundStats}, []float32{0.41796875, 1.25, 0.8359375, 1.25}},
		{exec.Spec{Out: precision.BF16, Round: exec.RoundNormalized}, []float32{0.416015625, 1.25, 0.83203125, 1.25}},
		// x / torch.sqrt(torch.mean(x**2, -1, keepdim=True) + eps) on
		// bf16 (LTX-2's PerChannelRMSNorm), eps 2⁻⁷
		{exec.Spec{Out: precision.BF16, Round: exec.RoundStats, Math: exec.MathSqrtDiv}, []float32{0.41796875, 1.2578125, 0.8359375, 1.2578125}},
	} {
		y, err := bk.Norm(x, nil, nil, p, c.s)
		if err != nil {
			t.Fatal(err)
		}
		if got := y.(*Tensor).data; !slices.Equal(got, c.want) {
			t.Errorf("%v: %v, want %v", c.s, got, c.want)
		}
	}
}

// TestNormRoundMoments: RoundMoments rounds the mean and rstd to x's
// format before x̂ = (x − mean)·rstd (PyTorch's CUDA group norm). For bf16
// x = [1, 2, 3, 5]: mean 2.75 (exact), variance 2.1875, rstd
// 1/√(2.1875 + 1e-5) = 0.676118… → bf16 0.67578125, so x̂ in f32 is
// (x − 2.75)·0.67578125 exactly; the statistics kept in f32 give
// another first element. On an f32 x the point changes nothing, and it is
// refused beside another kernel's statistics.
func TestNormRoundMoments(t *testing.T) {
	bk := New(1)
	v := vals(t, bk)
	p := exec.NormParams{Kind: exec.NormLayer, Eps: 1e-5}
	x := up(t, bk, precision.BF16, []int{1, 4}, 1, 2, 3, 5)
	const r = 0.67578125
	want := []float32{-1.75 * r, -0.75 * r, 0.25 * r, 2.25 * r}
	same(t, "moments", v(bk.Norm(x, nil, nil, p, exec.Spec{Out: precision.F32, Round: exec.RoundMoments})), want)
	if got := v(bk.Norm(x, nil, nil, p, exec.Out(precision.F32))); got[0] == want[0] {
		t.Errorf("statistics in f32 gave the rounded statistics' %v", got[0])
	}
	xf := up(t, bk, precision.F32, []int{1, 4}, 1, 2, 3, 5)
	same(t, "f32 x", v(bk.Norm(xf, nil, nil, p, exec.Spec{Out: precision.F32, Round: exec.RoundMoments})), v(bk.Norm(xf, nil, nil, p, exec.Out(precision.F32))))
	for _, s := range []exec.Spec{{Out: precision.BF16, Round: exec.RoundMoments | exec.RoundStats}, {Out: precision.BF16, Round: exec.RoundMoments, Math: exec.MathWelford}} {
		if _, err := bk.Norm(x, nil, nil, p, s); err == nil {
			t.Errorf("%v: no error", s)
		}
	}
}
