//go:build linux

package cuda

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/kernels"
	"github.com/zflow/zflow/precision"
)

// The CUDA rendering of the one source's row kernels (zf_norm_seq,
// zf_linear_seq, zf_attention_seq: what the Metal backend runs for Norm,
// Linear and Attention) against the CPU backend, bit for bit. The CUDA
// backend's own Norm, Linear and Attention do not use them; these tests
// launch them directly, so the GPU arithmetic of the Metal kernels is
// checked on an NVIDIA GPU (CUDA computes exp and tanh through f64: bit-exact
// here, which the MSL rendering's precise:: functions are not).

// loadRows compiles the whole CUDA rendering (pointwise.zf, rows.zf and
// tiles.zf) into a module of its own, once: the backend compiles only the
// pointwise part.
func loadRows(t testing.TB, b *Backend) {
	t.Helper()
	if _, ok := b.fns["zf_norm_seq"]; ok {
		return
	}
	src, err := kernels.Render(kernels.CUDA)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.do(func() error {
		return b.loadModule("zflow_rows", src, []string{"--fmad=false"}, []string{"zf_norm_seq", "zf_linear_seq", "zf_attention_seq",
			"zf_linear_tiled", "zf_attention_tiled", "zf_attention_flash"})
	}); err != nil {
		t.Fatal(err)
	}
}

// seqRun launches a row kernel into a new tensor of shape and format f
// over n threads (grid-stride).
func seqRun(t testing.TB, b *Backend, kernel string, shape []int, f precision.Format, n int, params []byte, ins ...exec.Tensor) exec.Tensor {
	t.Helper()
	return rowsRun(t, b, kernel, shape, f, b.grid1(n), block256, n, params, ins...)
}

// rowsRun launches a kernel of the rows module on grid × block into a new
// tensor of shape and format f (nothing when n, the work, is 0).
func rowsRun(t testing.TB, b *Backend, kernel string, shape []int, f precision.Format, grid, block [3]uint32, n int, params []byte, ins ...exec.Tensor) exec.Tensor {
	t.Helper()
	loadRows(t, b)
	ptrs := make([]any, 0, len(ins)+2)
	for i, x := range ins {
		ct, err := b.get(kernel, fmt.Sprint("input ", i), x)
		if err != nil {
			t.Fatal(err)
		}
		ptrs = append(ptrs, ct.ptr())
	}
	out, err := b.result(shape, f, func(out *Tensor) error {
		if n == 0 {
			return nil
		}
		args := append(append([]any{out.ptr()}, ptrs...), params)
		return b.launch(kernel, grid, block, 0, args...)
	})
	if err != nil {
		t.Fatalf("%s: %v", kernel, err)
	}
	return out
}

func fmtOf(x exec.Tensor) precision.Format {
	if x == nil {
		return 0
	}
	return x.Format()
}

// or is x, or alt where x is absent (the kernel does not read it).
func or(x, alt exec.Tensor) exec.Tensor {
	if x == nil {
		return alt
	}
	return x
}

func TestSeqNorm(t *testing.T) {
	b := need(t)
	m := mk(t)
	shape := []int{1024, 3072}
	data := randn(1024*3072, 21, 1.5)
	for i := range data {
		data[i] += float32((i/3072)%7) * 0.25
	}
	x := up(t, b, data, shape, bf16)
	xf := up(t, b, data, shape, f32)
	g := up(t, b, randn(3072, 22, 0.2), []int{3072}, bf16)
	be := up(t, b, randn(3072, 23, 0.1), []int{3072}, bf16)
	gh := up(t, b, randn(128, 24, 0.2), []int{128}, bf16)
	defer func() {
		for _, p := range []pair{x, xf, g, be, gh} {
			p.free(b)
		}
	}()
	cases := []struct {
		name  string
		x     pair
		g, be pair
		p     exec.NormParams
		s     exec.Spec
	}{
		{"layer, no affine", x, pair{}, pair{}, exec.NormParams{Kind: exec.NormLayer, Eps: 1e-6}, exec.Out(bf16)},
		{"layer γ β", x, g, be, exec.NormParams{Kind: exec.NormLayer, Eps: 1e-5}, exec.Out(bf16)},
		{"layer 1+γ, β", x, g, be, exec.NormParams{Kind: exec.NormLayer, Eps: 1e-5, Offset: 1}, exec.Spec{Out: bf16, Round: exec.RoundScale | exec.RoundProduct}},
		{"layer f32", xf, g, be, exec.NormParams{Kind: exec.NormLayer, Eps: 1e-6}, exec.Out(f32)},
		{"layer composed", x, g, be, exec.NormParams{Kind: exec.NormLayer, Eps: 1e-6}, exec.Composed(bf16)},
		{"rms γ (x̂ rounded)", x, g, pair{}, exec.NormParams{Kind: exec.NormRMS, Eps: 1e-6}, exec.Spec{Out: bf16, Round: exec.RoundNormalized}},
		{"rms per head (group 128)", x, gh, pair{}, exec.NormParams{Kind: exec.NormRMS, Eps: 1e-6, Group: 128}, exec.Spec{Out: bf16, Round: exec.RoundNormalized}},
		{"rms f32", xf, pair{}, pair{}, exec.NormParams{Kind: exec.NormRMS, Eps: 1e-6}, exec.Out(f32)},
		{"rms as F.normalize times √G", x, g, pair{}, exec.NormParams{Kind: exec.NormRMS, Eps: 1e-12}, exec.Spec{Out: bf16, Math: exec.MathL2 | exec.MathScalarF32}},
		{"rms as F.normalize upcast times √G", x, g, pair{}, exec.NormParams{Kind: exec.NormRMS, Eps: 1e-12}, exec.Spec{Out: bf16, Math: exec.MathL2 | exec.MathNormalizeF32 | exec.MathScalarF32}},
	}
	for _, c := range cases {
		np, err := kernels.NormSeq("cuda", shape, c.x.c.Format(), fmtOf(c.g.c), fmtOf(c.be.c), c.p, c.s)
		if err != nil {
			t.Fatal(err)
		}
		got := seqRun(t, b, "zf_norm_seq", shape, c.s.Out, int(np.Groups), kernels.Bytes(&np), c.x.g, or(c.g.g, c.x.g), or(c.be.g, c.x.g))
		check(t, b, "seq norm "+c.name, c.s, pair{m(ref.Norm(c.x.c, c.g.c, c.be.c, c.p, c.s)), got}, true)
	}
}

func TestSeqLinear(t *testing.T) {
	b := need(t)
	m := mk(t)
	x := up(t, b, randn(256*3072, 31, 1), []int{256, 3072}, bf16)
	w := up(t, b, randn(1536*3072, 32, 0.02), []int{1536, 3072}, bf16)
	bias := up(t, b, randn(1536, 33, 0.1), []int{1536}, bf16)
	xo := up(t, b, randn(77*1001, 34, 1), []int{7, 11, 1001}, f32) // k not a multiple of 8
	wo := up(t, b, randn(130*1001, 35, 0.05), []int{130, 1001}, f16)
	defer func() {
		for _, p := range []pair{x, w, bias, xo, wo} {
			p.free(b)
		}
	}()
	cases := []struct {
		name    string
		x, w, b pair
		s       exec.Spec
	}{
		{"bf16 + bias", x, w, bias, exec.Out(bf16)},
		{"bf16, bias after rounding", x, w, bias, exec.Spec{Out: bf16, Round: exec.RoundBeforeBias}},
		{"bf16 → f32, no bias", x, w, pair{}, exec.Out(f32)},
		{"f32 x, f16 w, k = 1001", xo, wo, pair{}, exec.Out(f16)},
		{"bf16 + bias, tensor-core sums", x, w, bias, exec.Spec{Out: bf16, Math: exec.MathTensorCore}},
	}
	for _, c := range cases {
		lp, shape, err := kernels.LinearSeq("cuda", c.x.c.Shape(), c.w.c.Shape(), c.x.c.Format(), c.w.c.Format(), fmtOf(c.b.c), c.s)
		if err != nil {
			t.Fatal(err)
		}
		got := seqRun(t, b, "zf_linear_seq", shape, c.s.Out, int(lp.M)*int(lp.N), kernels.Bytes(&lp), c.x.g, c.w.g, or(c.b.g, c.x.g))
		check(t, b, fmt.Sprintf("seq linear %s vec=%d", c.name, lp.Vec), c.s, pair{m(ref.Linear(c.x.c, c.w.c, c.b.c, c.s)), got}, true)
	}
}

func TestSeqAttention(t *testing.T) {
	b := need(t)
	m := mk(t)
	const bs, sq, sk, h, kv, d = 2, 512, 512, 8, 2, 128
	q := up(t, b, randn(bs*sq*h*d, 41, 1), []int{bs, sq, h * d}, bf16)
	k := up(t, b, randn(bs*sk*kv*d, 42, 1), []int{bs, sk, kv * d}, bf16)
	v := up(t, b, randn(bs*sk*kv*d, 43, 1), []int{bs, sk, kv * d}, bf16)
	r := rand.New(rand.NewPCG(44, 45))
	mv := make([]float32, bs*sq*sk)
	for i := range mv {
		if r.IntN(4) != 0 {
			mv[i] = 1
		}
	}
	clear(mv[sk : 2*sk]) // query 1 of batch 0 sees nothing: a NaN row
	mask := up(t, b, mv, []int{bs, 1, sq, sk}, bf16)
	bias := up(t, b, randn(h*sk, 46, 2), []int{1, h, 1, sk}, bf16)
	defer func() {
		for _, p := range []pair{q, k, v, mask, bias} {
			p.free(b)
		}
	}()
	gqa := exec.AttentionParams{Heads: h, KVHeads: kv}
	causal := gqa
	causal.Mask = exec.MaskCausal
	window := causal
	window.Window, window.Softcap = 64, 30
	explicit := gqa
	explicit.Mask = exec.MaskExplicit
	alibi := gqa
	alibi.ALiBi, alibi.Mask = true, exec.MaskCausal
	cases := []struct {
		name       string
		p          exec.AttentionParams
		mask, bias pair
		s          exec.Spec
	}{
		{"gqa", gqa, pair{}, pair{}, exec.Out(bf16)},
		{"gqa f32", gqa, pair{}, pair{}, exec.Out(f32)},
		{"causal scores+weights", causal, pair{}, pair{}, exec.Spec{Out: bf16, Round: exec.RoundScores | exec.RoundWeights}},
		{"window softcap each", window, pair{}, pair{}, exec.Composed(bf16)},
		{"window softcap fast exp f32", window, pair{}, pair{}, exec.Spec{Out: f32, Math: exec.MathFastExp}},
		{"explicit (a NaN row), probs+accum", explicit, mask, pair{}, exec.Spec{Out: bf16, Round: exec.RoundProbs | exec.RoundAccum}},
		{"bias [1,H,1,Sk] scores", gqa, pair{}, bias, exec.Spec{Out: bf16, Round: exec.RoundScores}},
		{"alibi causal f32", alibi, pair{}, pair{}, exec.Out(f32)},
		{"causal weights, tensor-core sums", causal, pair{}, pair{}, exec.Spec{Out: bf16, Round: exec.RoundScores | exec.RoundWeights, Math: exec.MathTensorCore}},
		{"window softcap each, tensor-core sums", window, pair{}, pair{}, exec.Spec{Out: bf16, Round: exec.RoundEach, Math: exec.MathTensorCore}},
	}
	for _, c := range cases {
		a, err := exec.CheckAttention(q.c, k.c, v.c, c.mask.c, c.bias.c, nil, c.p)
		if err != nil {
			t.Fatal(err)
		}
		ap, slopes, err := kernels.AttentionSeq("cuda", a, c.p, c.s, bf16, bf16, bf16, fmtOf(c.mask.c), fmtOf(c.bias.c))
		if err != nil {
			t.Fatal(err)
		}
		sl := q.g
		if slopes != nil {
			sl = m(b.Upload(slopes, []int{len(slopes)}, f32))
		}
		got := seqRun(t, b, "zf_attention_seq", []int{bs, sq, h * d}, c.s.Out, bs*h*sq, kernels.Bytes(&ap),
			q.g, k.g, v.g, or(c.mask.g, q.g), or(c.bias.g, q.g), sl)
		check(t, b, "seq attention "+c.name, c.s, pair{m(ref.Attention(q.c, k.c, v.c, c.mask.c, c.bias.c, nil, c.p, c.s)), got}, true)
		if slopes != nil {
			b.Free(sl)
		}
	}
}

// TestCuBLASIsTensorCoreSums: at the sizes of a small model (k ≤ 512)
// cuBLAS's bf16 GEMM gives exactly the CPU backend's tensor-core sums
// (exec.DotMMA), the arithmetic the precision search offers for a trace a
// GPU made. From k = 1024 on cuBLAS may choose kernels that split k
// otherwise (on an H200, 2026-12-02: 1 of 8192 outputs off at k = 1024 in
// one draw, none in another; many at k = 3072): that shape is logged.
func TestCuBLASIsTensorCoreSums(t *testing.T) {
	b := need(t)
	m := mk(t)
	for i, sh := range [][3]int{{1, 64, 64}, {16, 64, 64}, {24, 48, 96}, {7, 100, 33}, {32, 256, 256}, {64, 1024, 128}, {300, 512, 300}, {4096, 64, 64}} {
		mm, k, n := sh[0], sh[1], sh[2]
		x := up(t, b, randn(mm*k, uint64(100+i), 0.5), []int{mm, k}, bf16)
		w := up(t, b, randn(n*k, uint64(200+i), 1/math.Sqrt(float64(k))), []int{n, k}, bf16)
		bias := up(t, b, randn(n, uint64(300+i), 0.1), []int{n}, bf16)
		s := exec.Spec{Out: bf16, Math: exec.MathTensorCore}
		name := fmt.Sprintf("cuBLAS [%d,%d]·[%d,%d]ᵀ", mm, k, n, k)
		want, got := m(ref.Linear(x.c, w.c, bias.c, s)), m(b.Linear(x.g, w.g, bias.g, s))
		if k > 512 {
			wd, _ := ref.Download(want)
			gd, err := b.Download(got)
			if err != nil {
				t.Fatal(err)
			}
			ex, _ := precision.ExactFraction(bf16, gd, wd)
			t.Logf("%s: %.6f of the outputs the tensor-core sums' (not asserted beyond k = 512)", name, ex)
		} else {
			check(t, b, name, s, pair{want, got}, true)
		}
		for _, p := range []pair{x, w, bias} {
			p.free(b)
		}
	}
}
