//go:build linux

package cuda

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/cpu"
	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/precision"
)

// The device tests compare every op with the CPU backend (the reference)
// on random inputs of real sizes, and GEMM and attention also with a
// float64 reference on sampled rows. They skip, saying why, where New
// fails (no driver, no GPU: CI). TestMain prints the table of results.

var (
	gpu    *Backend
	gpuErr error
	ref    = cpu.New(0)
	rowsMu sync.Mutex
	rows   []row
)

// row is one comparison: ours against the CPU backend (max |diff|, the
// fraction of bit-exact elements, rel-RMS) and, where computed, both
// against a float64 reference.
type row struct {
	op, spec, shape string
	n               int
	maxDiff, exact  float64
	relRMS          float64
	relF64, cpuF64  float64 // -1: not computed
}

func TestMain(m *testing.M) {
	gpu, gpuErr = New()
	if gpu != nil {
		gpu.poison = true
	}
	code := m.Run()
	if len(rows) > 0 {
		fmt.Println()
		fmt.Println("device:", gpu.Device())
		fmt.Printf("%-34s %-34s %-18s %10s %12s %10s %11s %11s %11s\n", "op", "spec", "shape", "n", "max|diff|", "bit-exact", "relRMS-cpu", "relRMS-f64", "cpu-vs-f64")
		for _, r := range rows {
			f64 := func(v float64) string {
				if v < 0 {
					return "-"
				}
				return fmt.Sprintf("%.3e", v)
			}
			fmt.Printf("%-34s %-34s %-18s %10d %12.4g %10.6f %11.3e %11s %11s\n", r.op, r.spec, r.shape, r.n, r.maxDiff, r.exact, r.relRMS, f64(r.relF64), f64(r.cpuF64))
		}
	}
	os.Exit(code)
}

func need(t *testing.T) *Backend {
	t.Helper()
	if gpu == nil {
		t.Skipf("no CUDA device: %v (the CUDA tests run on a machine with an NVIDIA GPU)", gpuErr)
	}
	return gpu
}

func TestNewErrorIsUnsupported(t *testing.T) {
	if gpu != nil {
		t.Skip("a GPU is present")
	}
	if !errors.Is(gpuErr, exec.ErrUnsupported) {
		t.Errorf("New without a GPU: %v, want an error wrapping exec.ErrUnsupported", gpuErr)
	}
	t.Logf("New: %v", gpuErr)
}

// randn draws n values: N(0, scale²) with a few outliers (×30).
func randn(n int, seed uint64, scale float64) []float32 {
	out := make([]float32, n)
	parts := 16
	step := (n + parts - 1) / parts
	var wg sync.WaitGroup
	for p := 0; p < parts; p++ {
		lo, hi := p*step, min((p+1)*step, n)
		if lo >= hi {
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(seed, uint64(p)))
			for i := lo; i < hi; i++ {
				v := r.NormFloat64() * scale
				if r.IntN(1000) == 0 {
					v *= 30
				}
				out[i] = float32(v)
			}
		}()
	}
	wg.Wait()
	return out
}

// pair is one tensor on both backends.
type pair struct{ c, g exec.Tensor }

func up(t *testing.T, b *Backend, data []float32, shape []int, f precision.Format) pair {
	t.Helper()
	c, err := ref.Upload(data, shape, f)
	if err != nil {
		t.Fatal(err)
	}
	g, err := b.Upload(data, shape, f)
	if err != nil {
		t.Fatal(err)
	}
	return pair{c, g}
}

func (p pair) free(b *Backend) {
	if p.g != nil {
		b.Free(p.g)
	}
	if p.c != nil {
		ref.Free(p.c)
	}
}

// stats compares ours with the reference values.
func stats(f precision.Format, ours, want []float32) (maxDiff, exact, rel float64, bad int, firstBad int) {
	var num, den float64
	firstBad = -1
	for i, w := range want {
		o := ours[i]
		if o != o || w != w {
			if (o != o) == (w != w) {
				exact++
				continue
			}
			bad++
			if firstBad < 0 {
				firstBad = i
			}
			continue
		}
		if precision.BitExact(f, o, w) {
			exact++
		} else if firstBad < 0 {
			firstBad = i
		}
		if math.IsInf(float64(o), 0) || math.IsInf(float64(w), 0) {
			if o != w {
				bad++
			}
			continue
		}
		d := math.Abs(float64(o) - float64(w))
		maxDiff = max(maxDiff, d)
		num += d * d
		den += float64(w) * float64(w)
	}
	if den > 0 {
		rel = math.Sqrt(num / den)
	}
	if len(want) > 0 {
		exact /= float64(len(want))
	}
	return
}

func record(r row) {
	rowsMu.Lock()
	rows = append(rows, r)
	rowsMu.Unlock()
}

// check downloads both results, records the row and, when exact is set,
// fails unless every element is bit-exact.
func check(t *testing.T, b *Backend, op string, s exec.Spec, res pair, exact bool) {
	t.Helper()
	want, err := ref.Download(res.c)
	if err != nil {
		t.Fatal(err)
	}
	got, err := b.Download(res.g)
	if err != nil {
		t.Fatalf("%s: %v", op, err)
	}
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, CPU has %d", op, len(got), len(want))
	}
	f := res.c.Format()
	md, ex, rel, bad, first := stats(f, got, want)
	record(row{op: op, spec: s.String(), shape: fmt.Sprint(res.c.Shape()), n: len(want), maxDiff: md, exact: ex, relRMS: rel, relF64: -1, cpuF64: -1})
	if bad > 0 {
		t.Errorf("%s %v: %d NaN/Inf mismatches (first at %d: %v vs CPU %v)", op, s, bad, first, got[first], want[first])
	}
	if exact && ex < 1 {
		t.Errorf("%s %v: %.8f bit-exact, want 1 (first difference at %d: %v vs CPU %v)", op, s, ex, first, got[first], want[first])
	}
	res.free(b)
}

// mk returns a helper that fails t on an op's error.
func mk(t *testing.T) func(exec.Tensor, error) exec.Tensor {
	return func(x exec.Tensor, err error) exec.Tensor {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
}

var (
	bf16 = precision.BF16
	f16  = precision.F16
	f32  = precision.F32
	big  = []int{2, 4096, 3072}
)

func TestUploadCastDownload(t *testing.T) {
	b := need(t)
	m := mk(t)
	data := randn(2*4096*3072, 1, 3)
	for _, in := range []precision.Format{f32, bf16, f16} {
		x := up(t, b, data, big, in)
		for _, out := range []precision.Format{f32, bf16, f16} {
			res := pair{m(ref.Cast(x.c, out)), m(b.Cast(x.g, out))}
			check(t, b, fmt.Sprintf("cast %v→%v", in, out), exec.Out(out), res, true)
		}
		// Upload then Download is the identity on values of the format.
		got, err := b.Download(x.g)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := ref.Download(x.c)
		if _, ex, _, _, _ := stats(in, got, want); ex < 1 {
			t.Errorf("upload/download %v: %.8f exact", in, ex)
		}
		x.free(b)
	}
}

func TestPointwise(t *testing.T) {
	b := need(t)
	m := mk(t)
	n := 2 * 4096 * 3072
	condShape := []int{2, 3072}
	x := up(t, b, randn(n, 2, 2), big, bf16)
	y := up(t, b, randn(n, 3, 2), big, bf16)
	c1 := up(t, b, randn(2*3072, 4, 1), condShape, bf16)
	c2 := up(t, b, randn(2*3072, 5, 1), condShape, bf16)
	bc := up(t, b, randn(2*3072, 6, 1), []int{2, 1, 3072}, bf16)
	xf := up(t, b, randn(n, 7, 2), big, f32)
	defer func() {
		for _, p := range []pair{x, y, c1, c2, bc, xf} {
			p.free(b)
		}
	}()
	for _, s := range []exec.Spec{exec.Out(bf16), exec.Out(f32)} {
		check(t, b, "add (bcast [2,1,3072])", s, pair{m(ref.Add(x.c, bc.c, s)), m(b.Add(x.g, bc.g, s))}, true)
		check(t, b, "mul (bcast [2,1,3072])", s, pair{m(ref.Mul(x.c, bc.c, s)), m(b.Mul(x.g, bc.g, s))}, true)
		check(t, b, "sub (bcast [2,1,3072])", s, pair{m(ref.Sub(x.c, bc.c, s)), m(b.Sub(x.g, bc.g, s))}, true)
		check(t, b, "div (bcast [2,1,3072])", s, pair{m(ref.Div(x.c, bc.c, s)), m(b.Div(x.g, bc.g, s))}, true)
		check(t, b, "sub (bcast [2,1,3072] − x)", s, pair{m(ref.Sub(bc.c, x.c, s)), m(b.Sub(bc.g, x.g, s))}, true)
		rd := exec.Spec{Out: s.Out, Math: exec.MathRecipDiv}
		check(t, b, "div recip_div", rd, pair{m(ref.Div(x.c, bc.c, rd)), m(b.Div(x.g, bc.g, rd))}, true)
		check(t, b, "minimum (bcast [2,1,3072])", s, pair{m(ref.Minimum(x.c, bc.c, s)), m(b.Minimum(x.g, bc.g, s))}, true)
		check(t, b, "maximum (bcast [2,1,3072])", s, pair{m(ref.Maximum(x.c, bc.c, s)), m(b.Maximum(x.g, bc.g, s))}, true)
	}
	check(t, b, "div f32/bf16", exec.Out(bf16), pair{m(ref.Div(xf.c, y.c, exec.Out(bf16))), m(b.Div(xf.g, y.g, exec.Out(bf16)))}, true)
	check(t, b, "add f32+bf16", exec.Out(bf16), pair{m(ref.Add(xf.c, y.c, exec.Out(bf16))), m(b.Add(xf.g, y.g, exec.Out(bf16)))}, true)
	for _, act := range []exec.ActKind{exec.ActIdentity, exec.ActSiLU, exec.ActGELUTanh, exec.ActGELUErf, exec.ActTanh, exec.ActSigmoid, exec.ActReLU, exec.ActHardswish, exec.ActHardsigmoid, exec.ActSqrt, exec.ActAbs} {
		for _, s := range []exec.Spec{exec.Out(bf16), {Out: bf16, Math: exec.MathFastExp}, exec.Out(f32)} {
			in := x
			if s.Out == f32 {
				in = xf
			}
			check(t, b, "act "+act.String(), s, pair{m(ref.Act(in.c, act, s)), m(b.Act(in.g, act, s))}, true)
		}
	}
	// Composed of rounded primitives (RoundEach), as a model that spells
	// the formula out in bf16 tensors computes it.
	for _, act := range []exec.ActKind{exec.ActSiLU, exec.ActGELUTanh, exec.ActGELUErf, exec.ActSigmoid} {
		for _, m2 := range []exec.Math{exec.MathPrecise, exec.MathScalarF32, exec.MathGELUFactored | exec.MathScalarF32} {
			s := exec.Spec{Out: bf16, Round: exec.RoundEach, Math: m2}
			check(t, b, "act "+act.String()+" composed", s, pair{m(ref.Act(x.c, act, s)), m(b.Act(x.g, act, s))}, true)
		}
	}
	// expm1 (a learned activation's negative side): through f64, as the CPU computes it
	for _, s := range []exec.Spec{exec.Out(bf16), exec.Out(f32)} {
		in := x
		if s.Out == f32 {
			in = xf
		}
		check(t, b, "act expm1", s, pair{m(ref.Act(in.c, exec.ActExpm1, s)), m(b.Act(in.g, exec.ActExpm1, s))}, true)
	}
	for _, s := range []exec.Spec{exec.Out(bf16), exec.Composed(bf16), {Out: bf16, Round: exec.RoundProduct}, exec.Out(f32)} {
		for _, plus := range []bool{true, false} {
			mp := exec.ModulateParams{PlusOne: plus}
			check(t, b, fmt.Sprintf("modulate plus_one=%v", plus), s,
				pair{m(ref.Modulate(x.c, c1.c, c2.c, mp, s)), m(b.Modulate(x.g, c1.g, c2.g, mp, s))}, true)
		}
		for _, g := range []exec.ActKind{exec.ActIdentity, exec.ActTanh} {
			check(t, b, "gated residual "+g.String(), s,
				pair{m(ref.GatedResidual(x.c, y.c, c1.c, g, s)), m(b.GatedResidual(x.g, y.g, c1.g, g, s))}, true)
		}
	}
	for _, fn := range []exec.ActKind{exec.ActSiLU, exec.ActGELUTanh, exec.ActGELUErf} {
		for _, s := range []exec.Spec{exec.Out(bf16), exec.Composed(bf16)} {
			check(t, b, "glu "+fn.String(), s, pair{m(ref.GLU(x.c, y.c, fn, s)), m(b.GLU(x.g, y.g, fn, s))}, true)
		}
	}
}

func TestNorm(t *testing.T) {
	b := need(t)
	m := mk(t)
	n := 2 * 4096 * 3072
	// Activations with a per-row offset, as LayerNorm meets them.
	data := randn(n, 11, 1.5)
	for i := range data {
		data[i] += float32((i/3072)%7) * 0.25
	}
	x := up(t, b, data, big, bf16)
	xf := up(t, b, data, big, f32)
	g := up(t, b, randn(3072, 12, 0.2), []int{3072}, bf16)
	be := up(t, b, randn(3072, 13, 0.1), []int{3072}, bf16)
	gh := up(t, b, randn(128, 14, 0.2), []int{128}, bf16)
	// Few long rows take four warps a row (normLayout's wide layout).
	xs := up(t, b, data[:512*3072], []int{1, 512, 3072}, bf16)
	defer func() {
		for _, p := range []pair{x, xf, g, be, gh, xs} {
			p.free(b)
		}
	}()
	cases := []struct {
		name  string
		x     pair
		g, be exec.Tensor
		gb    pair
		p     exec.NormParams
		s     exec.Spec
	}{
		{"layer, no affine", x, nil, nil, pair{}, exec.NormParams{Kind: exec.NormLayer, Eps: 1e-6}, exec.Out(bf16)},
		{"layer γ β", x, g.g, be.g, pair{g.c, be.c}, exec.NormParams{Kind: exec.NormLayer, Eps: 1e-5}, exec.Out(bf16)},
		{"layer 1+γ, β", x, g.g, be.g, pair{g.c, be.c}, exec.NormParams{Kind: exec.NormLayer, Eps: 1e-5, Offset: 1}, exec.Spec{Out: bf16, Round: exec.RoundScale | exec.RoundProduct}},
		{"layer f32", xf, g.g, be.g, pair{g.c, be.c}, exec.NormParams{Kind: exec.NormLayer, Eps: 1e-6}, exec.Out(f32)},
		{"rms γ (HF: x̂ rounded)", x, g.g, nil, pair{g.c, nil}, exec.NormParams{Kind: exec.NormRMS, Eps: 1e-6}, exec.Spec{Out: bf16, Round: exec.RoundNormalized}},
		{"rms per head (group 128)", x, gh.g, nil, pair{gh.c, nil}, exec.NormParams{Kind: exec.NormRMS, Eps: 1e-6, Group: 128}, exec.Spec{Out: bf16, Round: exec.RoundNormalized}},
		{"rms f32", xf, nil, nil, pair{}, exec.NormParams{Kind: exec.NormRMS, Eps: 1e-6}, exec.Out(f32)},
		{"rms as F.normalize times √G", x, g.g, nil, pair{g.c, nil}, exec.NormParams{Kind: exec.NormRMS, Eps: 1e-12}, exec.Spec{Out: bf16, Math: exec.MathL2}},
		{"rms as F.normalize, √G in f32, per group 96", x, nil, nil, pair{}, exec.NormParams{Kind: exec.NormRMS, Eps: 1e-12, Group: 96}, exec.Spec{Out: bf16, Math: exec.MathL2 | exec.MathScalarF32}},
		{"rms as F.normalize upcast, √G in f32", x, g.g, nil, pair{g.c, nil}, exec.NormParams{Kind: exec.NormRMS, Eps: 1e-12}, exec.Spec{Out: bf16, Math: exec.MathL2 | exec.MathNormalizeF32 | exec.MathScalarF32}},
		// Groups of 128 or fewer share a warp (the kernel's lanes a group):
		// whole powers of two, and 96 and 24, whose last lanes hold nothing.
		{"layer per group 64", x, nil, nil, pair{}, exec.NormParams{Kind: exec.NormLayer, Eps: 1e-6, Group: 64}, exec.Out(bf16)},
		{"rms per group 96", x, nil, nil, pair{}, exec.NormParams{Kind: exec.NormRMS, Eps: 1e-6, Group: 96}, exec.Spec{Out: bf16, Round: exec.RoundNormalized}},
		{"layer per group 24 f32", xf, nil, nil, pair{}, exec.NormParams{Kind: exec.NormLayer, Eps: 1e-6, Group: 24}, exec.Out(f32)},
		{"rms per group 8", x, nil, nil, pair{}, exec.NormParams{Kind: exec.NormRMS, Eps: 1e-6, Group: 8}, exec.Out(bf16)},
		{"layer γ β, 512 rows", xs, g.g, be.g, pair{g.c, be.c}, exec.NormParams{Kind: exec.NormLayer, Eps: 1e-5}, exec.Out(bf16)},
		{"rms γ, 512 rows", xs, g.g, nil, pair{g.c, nil}, exec.NormParams{Kind: exec.NormRMS, Eps: 1e-6}, exec.Spec{Out: bf16, Round: exec.RoundNormalized}},
		// PyTorch's CUDA group norm: mean and rstd rounded to x's format
		// (RoundMoments), x̂ kept f32 for the affine after it
		{"layer moments, f32 out", x, nil, nil, pair{}, exec.NormParams{Kind: exec.NormLayer, Eps: 1e-5}, exec.Spec{Out: f32, Round: exec.RoundMoments}},
		{"layer moments per group 64", x, nil, nil, pair{}, exec.NormParams{Kind: exec.NormLayer, Eps: 1e-5, Group: 64}, exec.Spec{Out: f32, Round: exec.RoundMoments}},
		{"layer moments, 512 rows", xs, nil, nil, pair{}, exec.NormParams{Kind: exec.NormLayer, Eps: 1e-5}, exec.Spec{Out: f32, Round: exec.RoundMoments}},
		// PyTorch's CUDA layer-norm reduction (MathWelford), with γ·x̂ + β
		// as one fma, or x̂·γ rounded first under RoundProduct; groups of 6
		// leave a tail that the statistics do not read.
		{"welford γ β", x, g.g, be.g, pair{g.c, be.c}, exec.NormParams{Kind: exec.NormLayer, Eps: 1e-5}, exec.Spec{Out: bf16, Math: exec.MathWelford}},
		{"welford no affine f32", xf, nil, nil, pair{}, exec.NormParams{Kind: exec.NormLayer, Eps: 1e-6}, exec.Spec{Out: f32, Math: exec.MathWelford}},
		{"welford 1+γ β, x̂ rounded", x, g.g, be.g, pair{g.c, be.c}, exec.NormParams{Kind: exec.NormLayer, Eps: 1e-6, Offset: 1}, exec.Spec{Out: bf16, Round: exec.RoundNormalized | exec.RoundScale, Math: exec.MathWelford}},
		{"welford γ β, product rounded", x, g.g, be.g, pair{g.c, be.c}, exec.NormParams{Kind: exec.NormLayer, Eps: 1e-5}, exec.Spec{Out: bf16, Round: exec.RoundProduct, Math: exec.MathWelford}},
		{"welford γ, 512 rows", xs, g.g, nil, pair{g.c, nil}, exec.NormParams{Kind: exec.NormLayer, Eps: 1e-5}, exec.Spec{Out: bf16, Math: exec.MathWelford}},
		{"welford per group 64", x, nil, nil, pair{}, exec.NormParams{Kind: exec.NormLayer, Eps: 1e-6, Group: 64}, exec.Spec{Out: bf16, Math: exec.MathWelford}},
		{"welford per group 6", x, nil, nil, pair{}, exec.NormParams{Kind: exec.NormLayer, Eps: 1e-6, Group: 6}, exec.Spec{Out: bf16, Math: exec.MathWelford}},
	}
	for _, c := range cases {
		res := pair{m(ref.Norm(c.x.c, c.gb.c, c.gb.g, c.p, c.s)), m(b.Norm(c.x.g, c.g, c.be, c.p, c.s))}
		check(t, b, "norm "+c.name, c.s, res, true)
	}
}

func TestRopeAndTimestep(t *testing.T) {
	b := need(t)
	m := mk(t)
	seq, heads, d := 4608, 24, 128
	x := up(t, b, randn(seq*heads*d, 21, 1), []int{1, seq, heads * d}, bf16)
	// Tables as a rope table makes them: cos/sin of position·frequency.
	pos := make([]float32, seq*3)
	for i := range seq {
		pos[3*i], pos[3*i+1], pos[3*i+2] = 0, float32(i/64), float32(i%64)
	}
	pp := up(t, b, pos, []int{seq, 3}, f32)
	tp := exec.RopeTableParams{Theta: 10000, AxesDims: []int{16, 56, 56}, Layout: exec.RopeInterleaved, FreqFormat: precision.F64, AngleFormat: precision.F64}
	cc, sc, err := ref.RopeTable(pp.c, tp, exec.Out(f32))
	if err != nil {
		t.Fatal(err)
	}
	cg, sg, err := b.RopeTable(pp.g, tp, exec.Out(f32))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []exec.Spec{exec.Out(bf16), {Out: bf16, Round: exec.RoundProduct}} {
		rp := exec.RopeParams{Heads: heads, Layout: exec.RopeInterleaved}
		check(t, b, "rope interleaved (f32 tables)", s, pair{m(ref.Rope(x.c, cc, sc, rp, s)), m(b.Rope(x.g, cg, sg, rp, s))}, true)
	}
	// Half layout, partial rotary dim, bf16 tables per batch.
	tb := up(t, b, randn(2*seq*64, 22, 1), []int{2, seq, 64}, bf16)
	tb2 := up(t, b, randn(2*seq*64, 23, 1), []int{2, seq, 64}, bf16)
	x2 := up(t, b, randn(2*seq*heads*d, 24, 1), []int{2, seq, heads * d}, bf16)
	rp := exec.RopeParams{Heads: heads, Layout: exec.RopeHalf, RotaryDim: 64}
	s := exec.Spec{Out: bf16, Round: exec.RoundProduct}
	check(t, b, "rope half r=64 (bf16 tables)", s, pair{m(ref.Rope(x2.c, tb.c, tb2.c, rp, s)), m(b.Rope(x2.g, tb.g, tb2.g, rp, s))}, true)
	for _, p := range []pair{x, pp, tb, tb2, x2, {cc, cg}, {sc, sg}} {
		p.free(b)
	}

	ts := up(t, b, []float32{1000, 750, 400, 0.5, 1, 999}, []int{6}, f32)
	for _, p := range []exec.TimestepParams{
		{Dim: 256, FlipSinToCos: true, Scale: 1, MaxPeriod: 10000},
		{Dim: 320, FreqShift: 1, Scale: 1, MaxPeriod: 10000},
	} {
		for _, s := range []exec.Spec{exec.Out(f32), exec.Out(bf16), {Out: f32, Math: exec.MathRecipDiv}} {
			check(t, b, fmt.Sprintf("timestep dim=%d flip=%v", p.Dim, p.FlipSinToCos), s,
				pair{m(ref.TimestepEmbed(ts.c, p, s)), m(b.TimestepEmbed(ts.g, p, s))}, true)
		}
	}
	ts.free(b)
}

func TestMovement(t *testing.T) {
	b := need(t)
	m := mk(t)
	x := up(t, b, randn(2*4096*3072, 31, 1), []int{2, 4096, 24, 128}, bf16)
	check(t, b, "permute [0 2 1 3]", exec.Out(bf16), pair{m(ref.Permute(x.c, []int{0, 2, 1, 3})), m(b.Permute(x.g, []int{0, 2, 1, 3}))}, true)
	check(t, b, "slice axis 1 [512:4096]", exec.Out(bf16), pair{m(ref.Slice(x.c, 1, 512, 4096)), m(b.Slice(x.g, 1, 512, 4096))}, true)
	y := up(t, b, randn(2*512*3072, 32, 1), []int{2, 512, 24, 128}, bf16)
	check(t, b, "concat axis 1", exec.Out(bf16), pair{m(ref.Concat([]exec.Tensor{y.c, x.c}, 1)), m(b.Concat([]exec.Tensor{y.g, x.g}, 1))}, true)
	cc, err := ref.Chunk(x.c, 3, 3)
	if err != nil {
		t.Fatal(err)
	}
	cg, err := b.Chunk(x.g, 3, 3)
	if err != nil {
		t.Fatal(err)
	}
	for i := range cc {
		check(t, b, fmt.Sprintf("chunk 3 axis 3 [%d]", i), exec.Out(bf16), pair{cc[i], cg[i]}, true)
	}
	// Contiguous runs are views of the parent's buffer (one batch row, or
	// the whole axis); they must read the same values, also after the
	// parent is freed.
	x1 := up(t, b, randn(4608*3072, 34, 1), []int{1, 4608, 3072}, bf16)
	views := []pair{
		{m(ref.Slice(x1.c, 1, 512, 4608)), m(b.Slice(x1.g, 1, 512, 4608))},
		{m(ref.Slice(x1.c, 1, 0, 512)), m(b.Slice(x1.g, 1, 0, 512))},
		{m(ref.Slice(x1.c, 2, 3, 7)), m(b.Slice(x1.g, 2, 3, 7))}, // not contiguous: a copy
	}
	mv := up(t, b, randn(6*3072, 35, 1), []int{1, 6 * 3072}, bf16)
	mc, err := ref.Chunk(mv.c, 6, 1)
	if err != nil {
		t.Fatal(err)
	}
	mg, err := b.Chunk(mv.g, 6, 1)
	if err != nil {
		t.Fatal(err)
	}
	for i := range mc {
		views = append(views, pair{mc[i], mg[i]})
	}
	// Joined along rows with one batch: a driver copy a piece.
	a1 := up(t, b, randn(512*3072, 36, 1), []int{1, 512, 3072}, bf16)
	views = append(views, pair{m(ref.Concat([]exec.Tensor{a1.c, x1.c}, 1)), m(b.Concat([]exec.Tensor{a1.g, x1.g}, 1))})
	a1.free(b)
	x1.free(b)
	mv.free(b)
	for i, v := range views {
		check(t, b, fmt.Sprintf("view %d (after freeing the parent)", i), exec.Out(bf16), v, true)
		v.free(b)
	}
	r := pair{m(ref.Reshape(x.c, []int{2, 4096, -1})), m(b.Reshape(x.g, []int{2, 4096, -1}))}
	x.free(b)
	check(t, b, "reshape (after freeing the parent)", exec.Out(bf16), r, true)
	img := up(t, b, randn(16*128*128, 33, 1), []int{1, 16, 128, 128}, f32)
	pp := exec.PatchParams{Patch: 2, Height: 128, Width: 128}
	check(t, b, "patchify p=2", exec.Out(f32), pair{m(ref.Patchify(img.c, pp)), m(b.Patchify(img.g, pp))}, true)
	y.free(b)
	img.free(b)
}

// gemmF64 computes y = x·wᵀ (+ bias) in float64 for the given rows.
func gemmF64(x, w, bias []float32, k, n int, rowIdx []int) []float64 {
	out := make([]float64, len(rowIdx)*n)
	var wg sync.WaitGroup
	for ri, i := range rowIdx {
		wg.Add(1)
		go func() {
			defer wg.Done()
			xr := x[i*k : (i+1)*k]
			for j := range n {
				wr := w[j*k : (j+1)*k]
				var s float64
				for e, v := range xr {
					s += float64(v) * float64(wr[e])
				}
				if bias != nil {
					s += float64(bias[j])
				}
				out[ri*n+j] = s
			}
		}()
	}
	wg.Wait()
	return out
}

func relF64(got []float32, n int, rowIdx []int, want []float64) float64 {
	var num, den float64
	for ri, i := range rowIdx {
		for j := range n {
			d := float64(got[i*n+j]) - want[ri*n+j]
			num += d * d
			den += want[ri*n+j] * want[ri*n+j]
		}
	}
	return math.Sqrt(num / den)
}

func sampleRows(m, count int, seed uint64) []int {
	r := rand.New(rand.NewPCG(seed, 9))
	idx := r.Perm(m)[:min(count, m)]
	sort.Ints(idx)
	return idx
}

func TestLinear(t *testing.T) {
	b := need(t)
	m := mk(t)
	cases := []struct {
		m, k, n   int
		f         precision.Format
		bias, cpu bool
		s         exec.Spec
	}{
		{4096, 3072, 3072, bf16, true, true, exec.Out(bf16)},
		{4096, 3072, 3072, bf16, false, false, exec.Out(bf16)},
		{4096, 3072, 3072, bf16, true, false, exec.Spec{Out: bf16, Round: exec.RoundBeforeBias}},
		{4096, 3072, 12288, bf16, true, false, exec.Out(bf16)},
		{4096, 12288, 3072, bf16, true, false, exec.Out(bf16)},
		{4096, 3072, 3072, bf16, true, false, exec.Out(f32)},
		{1024, 768, 512, f32, true, true, exec.Out(f32)},
		{1024, 768, 512, f16, true, true, exec.Out(f16)},
	}
	for _, c := range cases {
		xd := randn(c.m*c.k, uint64(c.m+c.k), 1)
		wd := randn(c.n*c.k, uint64(c.n*7+c.k), 1/math.Sqrt(float64(c.k)))
		x := up(t, b, xd, []int{c.m, c.k}, c.f)
		w := up(t, b, wd, []int{c.n, c.k}, c.f)
		var bias pair
		var bd []float32
		if c.bias {
			bd = randn(c.n, uint64(c.n), 0.1)
			bias = up(t, b, bd, []int{c.n}, c.f)
		}
		g := m(b.Linear(x.g, w.g, bias.g, c.s))
		got, err := b.Download(g)
		if err != nil {
			t.Fatal(err)
		}
		// The f64 reference on the values as stored.
		xs, _ := ref.Download(x.c)
		ws, _ := ref.Download(w.c)
		var bs []float32
		if c.bias {
			bs, _ = ref.Download(bias.c)
		}
		rowsIdx := sampleRows(c.m, 128, uint64(c.n))
		want := gemmF64(xs, ws, bs, c.k, c.n, rowsIdx)
		r := row{op: fmt.Sprintf("linear %v bias=%v", c.f, c.bias), spec: c.s.String(), shape: fmt.Sprintf("%dx%dx%d", c.m, c.n, c.k),
			n: len(got), relF64: relF64(got, c.n, rowsIdx, want), cpuF64: -1, exact: -1, relRMS: -1, maxDiff: -1}
		if c.cpu {
			cr := m(ref.Linear(x.c, w.c, bias.c, c.s))
			cd, _ := ref.Download(cr)
			r.maxDiff, r.exact, r.relRMS, _, _ = stats(c.s.Out, got, cd)
			r.cpuF64 = relF64(cd, c.n, rowsIdx, want)
			ref.Free(cr)
		}
		record(r)
		// bf16 output: rounding alone is ~1.1e-3 rel-RMS; f32: ~1e-7·√K.
		limit := 4e-3
		if c.s.Out == f32 && c.f == f32 {
			limit = 1e-5
		}
		if r.relF64 > limit || math.IsNaN(r.relF64) {
			t.Errorf("linear %+v: rel-RMS vs f64 %.3e > %.1e", c, r.relF64, limit)
		}
		b.Free(g)
		x.free(b)
		w.free(b)
		bias.free(b)
	}
}

// attnF64 is softmax(q·kᵀ·scale)·v in float64 for the sampled query rows
// of every head (no mask, or causal).
func attnF64(q, k, v, mask []float32, sq, sk, h, kv, d int, causal bool, rowIdx []int) []float64 {
	out := make([]float64, len(rowIdx)*h*d)
	var wg sync.WaitGroup
	for hh := range h {
		wg.Add(1)
		go func() {
			defer wg.Done()
			kh := hh / (h / kv)
			sc := make([]float64, sk)
			for ri, i := range rowIdx {
				mx := math.Inf(-1)
				for j := range sk {
					if causal && j > i || mask != nil && mask[i*sk+j] == 0 {
						sc[j] = math.Inf(-1)
						continue
					}
					var s float64
					for e := range d {
						s += float64(q[i*h*d+hh*d+e]) * float64(k[j*kv*d+kh*d+e])
					}
					sc[j] = s / math.Sqrt(float64(d))
					mx = max(mx, sc[j])
				}
				var sum float64
				for j := range sk {
					sc[j] = math.Exp(sc[j] - mx)
					sum += sc[j]
				}
				for e := range d {
					var a float64
					for j := range sk {
						a += sc[j] * float64(v[j*kv*d+kh*d+e])
					}
					out[(ri*h+hh)*d+e] = a / sum
				}
			}
		}()
	}
	wg.Wait()
	return out
}

func attnRel(got []float32, h, d int, rowIdx []int, want []float64) float64 {
	var num, den float64
	for ri, i := range rowIdx {
		for c := range h * d {
			w := want[ri*h*d+c]
			e := float64(got[i*h*d+c]) - w
			num += e * e
			den += w * w
		}
	}
	return math.Sqrt(num / den)
}

func TestAttention(t *testing.T) {
	b := need(t)
	m := mk(t)
	cases := []struct {
		seq, h, kv, d int
		f             precision.Format
		mask          exec.MaskKind
		cpu, exact    bool // compare with the CPU backend; force the exact kernel
		s             exec.Spec
		warps         int // flash warps per block (0: the default)
	}{
		{4608, 24, 24, 128, bf16, exec.MaskNone, false, false, exec.Out(bf16), 0},
		{1024, 24, 24, 128, bf16, exec.MaskNone, true, false, exec.Out(bf16), 0},
		{1024, 24, 24, 128, bf16, exec.MaskNone, true, false, exec.Spec{Out: bf16, Round: exec.RoundWeights}, 0},
		{1024, 24, 24, 128, bf16, exec.MaskNone, true, true, exec.Spec{Out: bf16, Round: exec.RoundWeights}, 0},
		{1000, 16, 4, 64, f16, exec.MaskCausal, true, false, exec.Out(f16), 0},
		{1000, 16, 4, 64, bf16, exec.MaskCausal, true, true, exec.Composed(bf16), 0},
		{300, 8, 8, 40, f32, exec.MaskNone, true, false, exec.Out(f32), 0},
		{4608, 24, 24, 128, bf16, exec.MaskNone, false, false, exec.Out(bf16), 8},
		{1000, 16, 4, 64, f16, exec.MaskCausal, true, false, exec.Out(f16), 8},
		{777, 8, 8, 128, bf16, exec.MaskCausal, true, false, exec.Out(bf16), 8},
		{640, 8, 8, 128, bf16, exec.MaskExplicit, true, false, exec.Out(bf16), 0},
		{1024, 24, 24, 128, bf16, exec.MaskNone, true, false, exec.Spec{Out: bf16, Round: exec.RoundScores}, 8},
		{640, 8, 8, 128, bf16, exec.MaskExplicit, true, true, exec.Out(bf16), 0},
		// a causal GQA LLM shape, and lengths that are no multiple of a tile
		{4096, 32, 8, 128, bf16, exec.MaskCausal, false, false, exec.Out(bf16), 0},
		{333, 8, 2, 128, bf16, exec.MaskNone, true, false, exec.Out(bf16), 0},
		{517, 8, 2, 128, f16, exec.MaskCausal, true, false, exec.Out(f16), 0},
		// a flash kernel's online softmax: the exact kernel's is the CPU's
		// (head dim 40, or forced), the flash kernels run their own
		{333, 8, 2, 40, bf16, exec.MaskNone, true, false, online(bf16), 0},
		{300, 4, 4, 128, bf16, exec.MaskCausal, true, true, online(bf16), 0},
		{640, 8, 8, 128, bf16, exec.MaskExplicit, true, true, online(bf16), 0},
		{517, 8, 2, 40, f16, exec.MaskCausal, true, false, online(f16), 0},
		{333, 8, 2, 128, bf16, exec.MaskNone, true, false, online(bf16), 0},
		// q·scale rounded first (exec.RoundQuery), the exact kernel's alone;
		// head dims whose scale 1/√D is no power of two, so the rounding shows
		{300, 8, 2, 40, bf16, exec.MaskNone, true, false, exec.Spec{Out: bf16, Round: exec.RoundEach | exec.RoundQuery}, 0},
		{333, 8, 8, 96, bf16, exec.MaskCausal, true, false, exec.Spec{Out: bf16, Round: exec.RoundQuery}, 0},
		{300, 4, 4, 96, f16, exec.MaskNone, true, false, exec.Spec{Out: f16, Round: exec.RoundQuery, Math: exec.MathTensorCore}, 0},
	}
	for _, c := range cases {
		qd := randn(c.seq*c.h*c.d, uint64(c.seq+c.h), 1)
		kd := randn(c.seq*c.kv*c.d, uint64(c.seq+c.h+1), 1)
		vd := randn(c.seq*c.kv*c.d, uint64(c.seq+c.h+2), 1)
		q := up(t, b, qd, []int{1, c.seq, c.h * c.d}, c.f)
		k := up(t, b, kd, []int{1, c.seq, c.kv * c.d}, c.f)
		v := up(t, b, vd, []int{1, c.seq, c.kv * c.d}, c.f)
		p := exec.AttentionParams{Heads: c.h, KVHeads: c.kv, Mask: c.mask}
		var md []float32
		var mt pair
		if c.mask == exec.MaskExplicit {
			// About a tenth of the keys hidden, key 0 always visible.
			md = make([]float32, c.seq*c.seq)
			for i := range c.seq {
				for j := range c.seq {
					if j == 0 || (i*7+j*13)%10 != 0 {
						md[i*c.seq+j] = 1
					}
				}
			}
			mt = up(t, b, md, []int{1, c.seq, c.seq}, bf16)
		}
		qs, _ := ref.Download(q.c)
		ks, _ := ref.Download(k.c)
		vs, _ := ref.Download(v.c)
		rowIdx := sampleRows(c.seq, 48, uint64(c.seq))
		want := attnF64(qs, ks, vs, md, c.seq, c.seq, c.h, c.kv, c.d, c.mask == exec.MaskCausal, rowIdx)
		var cd []float32
		cpuF64 := -1.0
		if c.cpu {
			cr := m(ref.Attention(q.c, k.c, v.c, mt.c, nil, nil, p, c.s))
			cd, _ = ref.Download(cr)
			cpuF64 = attnRel(cd, c.h, c.d, rowIdx, want)
			ref.Free(cr)
		}
		if c.cpu && c.s.Round&exec.RoundQuery != 0 {
			// the case must test the flag: without it the CPU differs
			plain := c.s
			plain.Round &^= exec.RoundQuery
			pr := m(ref.Attention(q.c, k.c, v.c, mt.c, nil, nil, p, plain))
			pd, _ := ref.Download(pr)
			if _, ex, _, _, _ := stats(c.s.Out, pd, cd); !(ex < 0.99) {
				t.Errorf("%v: %.4f of the output unchanged without RoundQuery; the case tests nothing", c.s, ex)
			}
			ref.Free(pr)
		}
		kernel := "flash"
		if c.exact || c.f == f32 || c.s.Has(exec.RoundProbs) || c.s.Round&(exec.RoundEach|exec.RoundQuery) != 0 || c.d%64 != 0 {
			kernel = "exact"
		}
		routes := []string{"exact"}
		if kernel == "flash" {
			routes = flashRoutes(b)
		}
		for _, route := range routes {
			name := route
			if route == "mma" {
				name = fmt.Sprintf("mma %dw", max(c.warps, 4))
			}
			g := runAttention(t, b, route, c.exact, c.warps, func() (exec.Tensor, error) {
				return b.Attention(q.g, k.g, v.g, mt.g, nil, nil, p, c.s)
			})
			got, err := b.Download(g)
			if err != nil {
				t.Fatal(err)
			}
			r := row{op: fmt.Sprintf("attention %s %v H=%d/%d D=%d %v", name, c.f, c.h, c.kv, c.d, c.mask), spec: c.s.String(),
				shape: fmt.Sprintf("[1 %d %d]", c.seq, c.h*c.d), n: len(got), relF64: attnRel(got, c.h, c.d, rowIdx, want), cpuF64: cpuF64, exact: -1, relRMS: -1, maxDiff: -1}
			if c.cpu {
				r.maxDiff, r.exact, r.relRMS, _, _ = stats(c.s.Out, got, cd)
				if kernel == "exact" && r.exact < 1 {
					t.Errorf("%s: exact kernel %.8f bit-exact with the CPU, want 1", r.op, r.exact)
				}
			}
			record(r)
			t.Logf("%s %s %s: rel-RMS vs f64 %.3e (CPU's %.3e), vs CPU %.3e, bit-exact with CPU %.4f", r.op, r.spec, r.shape, r.relF64, r.cpuF64, r.relRMS, r.exact)
			limit := 1e-2
			if c.f == f32 {
				limit = 1e-5
			}
			if r.relF64 > limit || math.IsNaN(r.relF64) {
				t.Errorf("%s: rel-RMS vs f64 %.3e > %.0e", r.op, r.relF64, limit)
			}
			b.Free(g)
		}
		for _, x := range []pair{q, k, v, mt} {
			x.free(b)
		}
	}
}

// online is the Spec of a flash kernel's softmax with its weights rounded
// (exec.MathOnlineSoftmax), the CPU's sums in order.
func online(f precision.Format) exec.Spec {
	return exec.Spec{Out: f, Round: exec.RoundWeights, Math: exec.MathOnlineSoftmax}
}

// flashRoutes are the flash kernels a test runs on this device: the
// mma.sync kernel everywhere, the Hopper (wgmma) kernel too on sm_90;
// $ZFLOW_TEST_ROUTES=wgmma keeps only the Hopper kernel (device runs
// short of time, with $ZFLOW_HOPPER_ATTN naming its geometry).
func flashRoutes(b *Backend) []string {
	if b.arch == "sm_90" && os.Getenv("ZFLOW_TEST_ROUTES") == "wgmma" {
		return []string{"wgmma"}
	}
	if b.arch == "sm_90" {
		return []string{"mma", "wgmma"}
	}
	return []string{"mma"}
}

// runAttention runs call with the route ("mma", "wgmma" or "exact"), the
// exact switch and the flash warps set, and restores the defaults; a
// "wgmma" run fails the test if the Hopper kernel did not take it.
func runAttention(t *testing.T, b *Backend, route string, exact bool, warps int, call func() (exec.Tensor, error)) exec.Tensor {
	t.Helper()
	b.SetHopperAttention(route == "wgmma")
	b.SetExactAttention(exact)
	if warps != 0 {
		b.SetFlashWarps(warps)
	}
	g, err := call()
	b.SetExactAttention(false)
	b.SetFlashWarps(4)
	b.SetHopperAttention(true)
	if err != nil {
		t.Fatal(err)
	}
	if route == "wgmma" {
		if on, why := b.HopperAttention(); !on {
			t.Fatalf("the Hopper kernel did not run: %s", why)
		}
	}
	return g
}

func TestErrors(t *testing.T) {
	b := need(t)
	m := mk(t)
	x := m(b.Upload([]float32{1, 2, 3}, []int{3}, f32))
	c := m(ref.Upload([]float32{1, 2, 3}, []int{3}, f32))
	if _, err := b.Add(x, c, exec.Out(f32)); !errors.Is(err, exec.ErrUnsupported) {
		t.Errorf("adding a cpu tensor: %v, want ErrUnsupported", err)
	}
	b.Free(x)
	if _, err := b.Act(x, exec.ActSiLU, exec.Out(f32)); err == nil || !strings.Contains(err.Error(), "freed") {
		t.Errorf("using a freed tensor: %v", err)
	}
	if err := b.Sync(); err != nil {
		t.Errorf("sync: %v", err)
	}
}

// TestAttentionExtras: sliding windows, soft-capping, ALiBi and additive
// biases, on both kernels, against the CPU backend: the exact kernel
// bit-exact under the same Spec, the flash kernel within rel-RMS 1e-2 of
// the CPU run with flash's own rounding (RoundWeights). Each case also
// checks, on the CPU, that its extras change the output (rel-RMS > 5e-2
// from the same call without them), so that a kernel ignoring one fails.
func TestAttentionExtras(t *testing.T) {
	b := need(t)
	m := mk(t)
	type biasKind int
	const (
		noBias    biasKind = iota
		batchBias          // [B, 1, Sq, Sk] bf16
		headBias           // [1, H, 1, Sk] f32
		bhBias             // [B·H, 1, Sk] bf16 (ALiBi's layout)
	)
	cases := []struct {
		name     string
		bsz, seq int
		h, kv, d int
		f        precision.Format
		p        exec.AttentionParams
		bias     biasKind
		s        exec.Spec
		exact    bool
	}{
		{"window 128", 1, 1000, 16, 4, 64, bf16, exec.AttentionParams{Mask: exec.MaskCausal, Window: 128}, noBias, exec.Out(bf16), false},
		{"window 128", 1, 1000, 16, 4, 64, bf16, exec.AttentionParams{Mask: exec.MaskCausal, Window: 128}, noBias, exec.Spec{Out: bf16, Round: exec.RoundWeights}, true},
		{"window 100 8 warps", 1, 777, 8, 8, 128, bf16, exec.AttentionParams{Mask: exec.MaskCausal, Window: 100}, noBias, exec.Out(bf16), false},
		{"softcap 5", 1, 777, 8, 8, 128, bf16, exec.AttentionParams{Scale: 0.5, Softcap: 5}, noBias, exec.Out(bf16), false},
		{"softcap 5", 1, 777, 8, 8, 128, bf16, exec.AttentionParams{Scale: 0.5, Softcap: 5}, noBias, exec.Spec{Out: bf16, Round: exec.RoundProbs}, true},
		{"softcap 5 eager", 1, 300, 8, 4, 64, bf16, exec.AttentionParams{Scale: 0.5, Softcap: 5, Mask: exec.MaskCausal, Window: 64}, noBias, exec.Composed(bf16), true},
		{"alibi 12 heads", 1, 640, 12, 12, 64, bf16, exec.AttentionParams{Mask: exec.MaskCausal, ALiBi: true, Scale: 0.05}, noBias, exec.Spec{Out: bf16, Round: exec.RoundScores}, false},
		{"alibi 12 heads", 1, 640, 12, 12, 64, bf16, exec.AttentionParams{Mask: exec.MaskCausal, ALiBi: true, Scale: 0.05}, noBias, exec.Spec{Out: bf16, Round: exec.RoundScores | exec.RoundProbs}, true},
		{"alibi f16", 1, 512, 16, 16, 64, f16, exec.AttentionParams{ALiBi: true, Scale: 0.05}, noBias, exec.Out(f16), false},
		{"bias [B,1,Sq,Sk]", 2, 512, 8, 8, 64, bf16, exec.AttentionParams{}, batchBias, exec.Out(bf16), false},
		{"bias [B,1,Sq,Sk]", 2, 512, 8, 8, 64, bf16, exec.AttentionParams{}, batchBias, exec.Out(bf16), true},
		{"bias [1,H,1,Sk] causal", 2, 512, 8, 2, 128, bf16, exec.AttentionParams{Mask: exec.MaskCausal}, headBias, exec.Out(bf16), false},
		{"bias [B·H,1,Sk] + alibi", 2, 300, 4, 4, 64, bf16, exec.AttentionParams{ALiBi: true}, bhBias, exec.Out(bf16), false},
		{"everything f32", 2, 300, 6, 3, 40, f32, exec.AttentionParams{Mask: exec.MaskCausal, Window: 50, Softcap: 2, ALiBi: true}, batchBias, exec.Out(f32), true},
		{"everything bf16 eager", 2, 300, 6, 3, 64, bf16, exec.AttentionParams{Mask: exec.MaskCausal, Window: 50, Softcap: 2, ALiBi: true}, headBias, exec.Composed(bf16), true},
		// Tensor-core sums of q·k and the weights·v (exec.DotMMA) in the
		// exact kernel, and under RoundEach q·kᵀ rounded before a scale
		// that is not a power of two (a power hides the rounding).
		{"softcap 50 window 64 eager tensor-core", 1, 300, 8, 4, 64, bf16, exec.AttentionParams{Scale: 0.3, Softcap: 50, Mask: exec.MaskCausal, Window: 64}, noBias, exec.Spec{Out: bf16, Round: exec.RoundEach, Math: exec.MathTensorCore}, true},
		{"window 64 eager scale 0.3", 1, 300, 8, 4, 64, bf16, exec.AttentionParams{Scale: 0.3, Mask: exec.MaskCausal, Window: 64}, noBias, exec.Composed(bf16), true},
		{"bias online tensor-core D 96", 1, 333, 8, 2, 96, bf16, exec.AttentionParams{Mask: exec.MaskCausal}, headBias, exec.Spec{Out: bf16, Round: exec.RoundWeights, Math: exec.MathTensorCore | exec.MathOnlineSoftmax}, true},
		{"bias probs tensor-core", 2, 300, 8, 8, 128, bf16, exec.AttentionParams{Scale: 0.3}, batchBias, exec.Spec{Out: bf16, Round: exec.RoundProbs, Math: exec.MathTensorCore}, true},
		// sinks (one logit per head, f32) run in the exact kernel, asked or not
		{"sinks window", 1, 512, 8, 2, 64, bf16, exec.AttentionParams{Mask: exec.MaskCausal, Window: 64}, noBias, exec.Out(bf16), false},
		{"sinks eager", 2, 300, 8, 2, 64, bf16, exec.AttentionParams{Mask: exec.MaskCausal}, headBias, exec.Composed(bf16), true},
		{"sinks f32", 1, 300, 4, 4, 40, f32, exec.AttentionParams{Mask: exec.MaskCausal, Window: 50}, noBias, exec.Out(f32), false},
	}
	for ci, c := range cases {
		c.p.Heads, c.p.KVHeads = c.h, c.kv
		seed := uint64(1000 + ci)
		q := up(t, b, randn(c.bsz*c.seq*c.h*c.d, seed, 1), []int{c.bsz, c.seq, c.h * c.d}, c.f)
		k := up(t, b, randn(c.bsz*c.seq*c.kv*c.d, seed+1, 1), []int{c.bsz, c.seq, c.kv * c.d}, c.f)
		v := up(t, b, randn(c.bsz*c.seq*c.kv*c.d, seed+2, 1), []int{c.bsz, c.seq, c.kv * c.d}, c.f)
		var bias pair
		switch c.bias {
		case batchBias:
			bias = up(t, b, randn(c.bsz*c.seq*c.seq, seed+3, 2), []int{c.bsz, 1, c.seq, c.seq}, bf16)
		case headBias:
			bias = up(t, b, randn(c.h*c.seq, seed+3, 2), []int{1, c.h, 1, c.seq}, f32)
		case bhBias:
			bias = up(t, b, randn(c.bsz*c.h*c.seq, seed+3, 2), []int{c.bsz * c.h, 1, c.seq}, bf16)
		}
		var sinks pair
		if strings.Contains(c.name, "sinks") {
			sinks = up(t, b, randn(c.h, seed+4, 3), []int{c.h}, f32)
		}
		kernel := "flash"
		if c.exact || c.f == f32 || c.s.Has(exec.RoundProbs) || c.d%64 != 0 || sinks.g != nil {
			kernel = "exact"
		}
		refSpec := c.s
		if kernel == "flash" {
			refSpec.Round |= exec.RoundWeights
		}
		cr := m(ref.Attention(q.c, k.c, v.c, nil, bias.c, sinks.c, c.p, refSpec))
		want, _ := ref.Download(cr)
		routes := []string{"exact"}
		if kernel == "flash" {
			routes = flashRoutes(b)
		}
		warps := 0
		if strings.Contains(c.name, "8 warps") {
			warps = 8
		}
		for _, route := range routes {
			g := runAttention(t, b, route, c.exact, warps, func() (exec.Tensor, error) {
				return b.Attention(q.g, k.g, v.g, nil, bias.g, sinks.g, c.p, c.s)
			})
			got, err := b.Download(g)
			if err != nil {
				t.Fatal(err)
			}
			op := fmt.Sprintf("attention %s %s %v H=%d/%d D=%d", route, c.name, c.f, c.h, c.kv, c.d)
			r := row{op: op, spec: c.s.String(), shape: fmt.Sprintf("[%d %d %d]", c.bsz, c.seq, c.h*c.d), n: len(got), relF64: -1, cpuF64: -1}
			var bad int
			r.maxDiff, r.exact, r.relRMS, bad, _ = stats(c.s.Out, got, want)
			record(r)
			t.Logf("%s %s %s: rel-RMS vs CPU %.3e, bit-exact with CPU %.4f", op, r.spec, r.shape, r.relRMS, r.exact)
			switch {
			case bad > 0:
				t.Errorf("%s: %d NaN/Inf mismatches with the CPU", op, bad)
			case kernel == "exact" && r.exact < 1:
				t.Errorf("%s: exact kernel %.8f bit-exact with the CPU, want 1", op, r.exact)
			case kernel == "flash" && !(r.relRMS <= 1e-2):
				t.Errorf("%s: rel-RMS vs the CPU %.3e > 1e-2", op, r.relRMS)
			}
			b.Free(g)
		}
		op := fmt.Sprintf("attention %s %s", kernel, c.name)
		// The extras must show: the same call without them differs.
		plain := exec.AttentionParams{Heads: c.h, KVHeads: c.kv, Mask: c.p.Mask, Scale: c.p.Scale}
		pr := m(ref.Attention(q.c, k.c, v.c, nil, nil, nil, plain, refSpec))
		pw, _ := ref.Download(pr)
		if _, _, rel, _, _ := stats(c.s.Out, pw, want); !(rel > 5e-2) {
			t.Errorf("%s: the extras change the CPU's output by rel-RMS %.3e only; the case tests nothing", op, rel)
		}
		ref.Free(cr)
		ref.Free(pr)
		for _, x := range []pair{q, k, v, bias, sinks} {
			x.free(b)
		}
	}
}

// TestComposites runs the vocabulary's composed ops (conv2d, max_pool2d,
// matmul, linear attention) on the GPU through the program's node runner, as a document
// would, against the CPU: they are sums of backend ops, so they differ
// only where those ops do (the GEMMs' accumulation order).
func TestComposites(t *testing.T) {
	b := need(t)
	m := mk(t)
	x := up(t, b, randn(2*64*16*16, 11, 1), []int{2, 64, 16, 16}, bf16)
	w1 := up(t, b, randn(96*64*9, 12, 0.05), []int{96, 64, 3, 3}, bf16)
	wd := up(t, b, randn(64*9, 13, 0.3), []int{64, 1, 3, 3}, bf16)
	bias := up(t, b, randn(96, 14, 0.1), []int{96}, bf16)
	q := up(t, b, randn(2*256*128, 15, 1), []int{2, 256, 128}, bf16)
	k := up(t, b, randn(2*256*128, 16, 1), []int{2, 256, 128}, bf16)
	v := up(t, b, randn(2*256*128, 17, 1), []int{2, 256, 128}, bf16)
	kt := up(t, b, randn(2*128*64, 18, 1), []int{2, 128, 64}, bf16)
	defer func() {
		for _, p := range []pair{x, w1, wd, bias, q, k, v, kt} {
			p.free(b)
		}
	}()
	run := func(bk exec.Backend, n program.Node, in ...exec.Tensor) exec.Tensor {
		out, err := program.RunNode(bk, &n, in)
		return m(out[0], err)
	}
	for _, s := range []exec.Spec{exec.Out(bf16), exec.Out(f32)} {
		conv := program.Node{Op: program.OpConv2D, Attrs: program.Attrs{Conv: program.ConvParams{Pad: 1, Groups: 1}}, Spec: s}
		check(t, b, "conv2d 3x3", s, pair{run(ref, conv, x.c, w1.c, bias.c), run(b, conv, x.g, w1.g, bias.g)}, false)
		dw := program.Node{Op: program.OpConv2D, Attrs: program.Attrs{Conv: program.ConvParams{Pad: 1, Groups: 64}}, Spec: s}
		check(t, b, "conv2d 3x3 depthwise", s, pair{run(ref, dw, x.c, wd.c, nil), run(b, dw, x.g, wd.g, nil)}, true)
		// a max pool is strided slices and maximum: bit for bit
		for _, p := range []program.ConvParams{{Kernel: 3, Stride: 2, Pad: 1}, {Kernel: 2, Stride: 2, Ceil: true}} {
			mp := program.Node{Op: program.OpMaxPool2D, Attrs: program.Attrs{Conv: p}}
			check(t, b, fmt.Sprintf("max_pool2d %d/%d/%d", p.Kernel, p.Stride, p.Pad), s, pair{run(ref, mp, x.c), run(b, mp, x.g)}, true)
		}
		// a batched matmul is products and sums in k order (Fallback's
		// composition): bit for bit
		mm := program.Node{Op: program.OpMatMul, Spec: s}
		check(t, b, "matmul", s, pair{run(ref, mm, q.c, kt.c), run(b, mm, q.g, kt.g)}, true)
		la := program.Node{Op: program.OpLinearAttention, Attrs: program.Attrs{LinearAttention: program.LinearAttentionParams{Heads: 4, Kernel: exec.ActReLU, Eps: 1e-15}}, Spec: s}
		check(t, b, "linear attention", s, pair{run(ref, la, q.c, k.c, v.c), run(b, la, q.g, k.g, v.g)}, false)
	}
}
