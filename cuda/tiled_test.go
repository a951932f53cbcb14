//go:build linux

package cuda

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/kernels"
	"github.com/zflow/zflow/precision"
)

// The CUDA rendering of the one source's cooperative kernels (tiles.zf:
// zf_linear_tiled, zf_attention_tiled, zf_attention_flash: what the Metal
// backend runs for Linear and Attention) against the CPU backend, launched
// as Metal launches them (kernels.LinearTiledGroups and AttentionGroups
// groups of GemmThreads and AttnThreads threads). The tiled kernels must
// be bit-exact; the flash kernel within kernels.FlashBound, its exact
// fraction logged.

// tiledRun launches cooperative kernel kernel as groups groups of threads
// threads into a new tensor of shape and format f.
func tiledRun(t testing.TB, b *Backend, kernel string, shape []int, f precision.Format, groups, threads int, params []byte, ins ...exec.Tensor) exec.Tensor {
	t.Helper()
	return rowsRun(t, b, kernel, shape, f, [3]uint32{uint32(groups), 1, 1}, [3]uint32{uint32(threads), 1, 1}, groups, params, ins...)
}

func TestTiledLinear(t *testing.T) {
	b := need(t)
	m := mk(t)
	x := up(t, b, randn(256*3072, 31, 1), []int{256, 3072}, bf16)
	w := up(t, b, randn(1536*3072, 32, 0.02), []int{1536, 3072}, bf16)
	bias := up(t, b, randn(1536, 33, 0.1), []int{1536}, bf16)
	xo := up(t, b, randn(77*1001, 34, 1), []int{7, 11, 1001}, f32) // no dimension a multiple of a tile
	wo := up(t, b, randn(130*1001, 35, 0.05), []int{130, 1001}, f16)
	xs := up(t, b, randn(100*33, 36, 1), []int{100, 33}, f16)
	ws := up(t, b, randn(65*33, 37, 0.2), []int{65, 33}, f16)
	bs := up(t, b, randn(65, 38, 0.1), []int{65}, f32)
	x1 := up(t, b, randn(3072, 39, 1), []int{1, 3072}, bf16) // one row: a decode step
	defer func() {
		for _, p := range []pair{x, w, bias, xo, wo, xs, ws, bs, x1} {
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
		{"bf16 → f16 + bias", x, w, bias, exec.Out(f16)},
		{"f32 x, f16 w, k = 1001 → f16", xo, wo, pair{}, exec.Out(f16)},
		{"f32 x, f16 w, k = 1001 → f32", xo, wo, pair{}, exec.Out(f32)},
		{"[100,33]·[65,33]ᵀ f16 + f32 bias → bf16", xs, ws, bs, exec.Out(bf16)},
		{"one row + bias", x1, w, bias, exec.Out(bf16)},
		{"bf16 + bias, tensor-core sums", x, w, bias, exec.Spec{Out: bf16, Math: exec.MathTensorCore}},
		{"[100,33]·[65,33]ᵀ f16, tensor-core sums (a partial block)", xs, ws, bs, exec.Spec{Out: f16, Math: exec.MathTensorCore}},
	}
	for _, c := range cases {
		lp, shape, err := kernels.LinearSeq("cuda", c.x.c.Shape(), c.w.c.Shape(), c.x.c.Format(), c.w.c.Format(), fmtOf(c.b.c), c.s)
		if err != nil {
			t.Fatal(err)
		}
		got := tiledRun(t, b, "zf_linear_tiled", shape, c.s.Out, kernels.LinearTiledGroups(lp), kernels.GemmThreads, kernels.Bytes(&lp),
			c.x.g, c.w.g, or(c.b.g, c.x.g))
		check(t, b, "tiled linear "+c.name, c.s, pair{m(ref.Linear(c.x.c, c.w.c, c.b.c, c.s)), got}, true)
	}
}

// tiledAttnCase is one attention for the tiled and flash kernels: sizes,
// inputs' format, parameters, an explicit mask (a fully masked row) and a
// [1, H, 1, Sk] bias or not.
type tiledAttnCase struct {
	name                 string
	bs, sq, sk, h, kv, d int
	f                    precision.Format
	p                    exec.AttentionParams
	mask, bias           bool
	s                    exec.Spec
}

// runTiledAttention runs c on kernel (zf_attention_tiled or
// zf_attention_flash) and on the CPU backend; it returns both results'
// values.
func runTiledAttention(t *testing.T, b *Backend, kernel string, c tiledAttnCase, seed uint64) (got, want []float32) {
	t.Helper()
	m := mk(t)
	q := up(t, b, randn(c.bs*c.sq*c.h*c.d, seed, 1), []int{c.bs, c.sq, c.h * c.d}, c.f)
	k := up(t, b, randn(c.bs*c.sk*c.kv*c.d, seed+1, 1), []int{c.bs, c.sk, c.kv * c.d}, c.f)
	v := up(t, b, randn(c.bs*c.sk*c.kv*c.d, seed+2, 1), []int{c.bs, c.sk, c.kv * c.d}, c.f)
	var mask, bias pair
	if c.mask {
		r := rand.New(rand.NewPCG(seed+3, 45))
		mv := make([]float32, c.bs*c.sq*c.sk)
		for i := range mv {
			if r.IntN(4) != 0 {
				mv[i] = 1
			}
		}
		clear(mv[c.sk : 2*c.sk]) // query 1 of batch 0 sees nothing: a NaN row
		mask = up(t, b, mv, []int{c.bs, 1, c.sq, c.sk}, bf16)
	}
	if c.bias {
		bias = up(t, b, randn(c.h*c.sk, seed+4, 2), []int{1, c.h, 1, c.sk}, bf16)
	}
	defer func() {
		for _, p := range []pair{q, k, v, mask, bias} {
			p.free(b)
		}
	}()
	c.p.Heads, c.p.KVHeads = c.h, c.kv
	a, err := exec.CheckAttention(q.c, k.c, v.c, mask.c, bias.c, nil, c.p)
	if err != nil {
		t.Fatal(err)
	}
	ap, slopes, err := kernels.AttentionSeq("cuda", a, c.p, c.s, c.f, c.f, c.f, fmtOf(mask.c), fmtOf(bias.c))
	if err != nil {
		t.Fatal(err)
	}
	if kernel == "zf_attention_flash" {
		if ok, why := kernels.Flash(ap, c.s, c.f, c.f, c.f); !ok {
			t.Fatalf("%s: not a flash case: %s", c.name, why)
		}
	}
	sl := q.g
	if slopes != nil {
		sl = m(b.Upload(slopes, []int{len(slopes)}, f32))
		defer b.Free(sl)
	}
	g := tiledRun(t, b, kernel, []int{c.bs, c.sq, c.h * c.d}, c.s.Out, kernels.AttentionGroups(ap), kernels.AttnThreads, kernels.Bytes(&ap),
		q.g, k.g, v.g, or(mask.g, q.g), or(bias.g, q.g), sl)
	defer b.Free(g)
	cr := m(ref.Attention(q.c, k.c, v.c, mask.c, bias.c, nil, c.p, c.s))
	defer ref.Free(cr)
	want, err = ref.Download(cr)
	if err != nil {
		t.Fatal(err)
	}
	if got, err = b.Download(g); err != nil {
		t.Fatalf("%s: %v", c.name, err)
	}
	return got, want
}

func TestTiledAttention(t *testing.T) {
	b := need(t)
	gqa := exec.AttentionParams{}
	causal := exec.AttentionParams{Mask: exec.MaskCausal}
	window := exec.AttentionParams{Mask: exec.MaskCausal, Window: 64, Softcap: 30}
	explicit := exec.AttentionParams{Mask: exec.MaskExplicit}
	alibi := exec.AttentionParams{Mask: exec.MaskCausal, ALiBi: true}
	cases := []tiledAttnCase{
		// TestSeqAttention's cases
		{"gqa", 2, 512, 512, 8, 2, 128, bf16, gqa, false, false, exec.Out(bf16)},
		{"gqa f32", 2, 512, 512, 8, 2, 128, bf16, gqa, false, false, exec.Out(f32)},
		{"causal scores+weights", 2, 512, 512, 8, 2, 128, bf16, causal, false, false, exec.Spec{Out: bf16, Round: exec.RoundScores | exec.RoundWeights}},
		{"window softcap each", 2, 512, 512, 8, 2, 128, bf16, window, false, false, exec.Composed(bf16)},
		{"window softcap fast exp f32", 2, 512, 512, 8, 2, 128, bf16, window, false, false, exec.Spec{Out: f32, Math: exec.MathFastExp}},
		{"explicit (a NaN row), probs+accum", 2, 512, 512, 8, 2, 128, bf16, explicit, true, false, exec.Spec{Out: bf16, Round: exec.RoundProbs | exec.RoundAccum}},
		{"bias [1,H,1,Sk] scores", 2, 512, 512, 8, 2, 128, bf16, gqa, false, true, exec.Spec{Out: bf16, Round: exec.RoundScores}},
		{"alibi causal f32", 2, 512, 512, 8, 2, 128, bf16, alibi, false, false, exec.Out(f32)},
		{"causal weights, tensor-core sums", 2, 512, 512, 8, 2, 128, bf16, causal, false, false, exec.Spec{Out: bf16, Round: exec.RoundScores | exec.RoundWeights, Math: exec.MathTensorCore}},
		{"window softcap each, tensor-core sums", 2, 512, 512, 8, 2, 128, bf16, window, false, false, exec.Spec{Out: bf16, Round: exec.RoundEach, Math: exec.MathTensorCore}},
		// head dims 40 to 256 (tiles of 64, 64, 32 and 16 keys), lengths no
		// multiple of a row block or a key tile, f16 and f32 inputs
		{"D 40 f16 causal", 1, 333, 333, 8, 2, 40, f16, causal, false, false, exec.Out(f16)},
		{"D 64 explicit (a NaN row) bias", 2, 100, 517, 4, 4, 64, bf16, explicit, true, true, exec.Out(bf16)},
		{"D 80 f32", 1, 77, 300, 4, 1, 80, f32, gqa, false, false, exec.Out(f32)},
		{"D 256 gqa", 1, 300, 300, 4, 2, 256, bf16, gqa, false, false, exec.Out(bf16)},
		{"D 256 causal probs, tensor-core sums", 1, 300, 300, 4, 2, 256, bf16, causal, false, false, exec.Spec{Out: bf16, Round: exec.RoundProbs, Math: exec.MathTensorCore}},
		{"D 256 alibi softcap weights f16", 1, 200, 250, 4, 4, 256, f16, exec.AttentionParams{ALiBi: true, Softcap: 20}, false, false, exec.Spec{Out: f16, Round: exec.RoundWeights}},
	}
	for i, c := range cases {
		got, want := runTiledAttention(t, b, "zf_attention_tiled", c, uint64(4100+10*i))
		maxDiff, exact, rel, bad, first := stats(c.s.Out, got, want)
		record(row{op: "tiled attention " + c.name, spec: c.s.String(), shape: fmt.Sprint([]int{c.bs, c.sq, c.h * c.d}), n: len(want),
			maxDiff: maxDiff, exact: exact, relRMS: rel, relF64: -1, cpuF64: -1})
		if exact < 1 || bad > 0 {
			t.Errorf("tiled attention %s: %.8f bit-exact with the CPU, %d NaN/Inf mismatches; first at %d: %v, CPU %v",
				c.name, exact, bad, first, got[first], want[first])
		}
	}
}

// TestFlashTiles: zf_attention_flash against the CPU backend under the
// same Spec, within kernels.FlashBound; the exact fraction is recorded.
func TestFlashTiles(t *testing.T) {
	b := need(t)
	cases := []tiledAttnCase{
		{"dit bf16", 1, 1024, 1024, 24, 24, 128, bf16, exec.AttentionParams{}, false, false, exec.Out(bf16)},
		{"gqa causal f16", 2, 517, 517, 8, 2, 64, f16, exec.AttentionParams{Mask: exec.MaskCausal}, false, false, exec.Out(f16)},
		{"explicit (a NaN row) out f32", 2, 300, 333, 8, 2, 128, bf16, exec.AttentionParams{Mask: exec.MaskExplicit}, true, false, exec.Out(f32)},
		{"weights", 1, 1024, 1024, 8, 8, 128, bf16, exec.AttentionParams{}, false, false, exec.Spec{Out: bf16, Round: exec.RoundWeights}},
		{"window softcap alibi bias scores", 2, 400, 400, 4, 4, 64, bf16,
			exec.AttentionParams{Mask: exec.MaskCausal, Window: 100, Softcap: 20, ALiBi: true}, false, true, exec.Spec{Out: bf16, Round: exec.RoundScores}},
		{"D 256", 1, 300, 300, 4, 2, 256, bf16, exec.AttentionParams{}, false, false, exec.Out(bf16)},
		{"D 40 f16", 1, 333, 333, 8, 8, 40, f16, exec.AttentionParams{}, false, false, exec.Out(f16)},
	}
	for i, c := range cases {
		got, want := runTiledAttention(t, b, "zf_attention_flash", c, uint64(5100+10*i))
		maxDiff, exact, rel, bad, _ := stats(c.s.Out, got, want)
		record(row{op: "flash tiles " + c.name, spec: c.s.String(), shape: fmt.Sprint([]int{c.bs, c.sq, c.h * c.d}), n: len(want),
			maxDiff: maxDiff, exact: exact, relRMS: rel, relF64: -1, cpuF64: -1})
		t.Logf("flash tiles %s %v: rel-RMS vs CPU %.3e (bound %.0e), bit-exact %.6f", c.name, c.s, rel, kernels.FlashBound(c.s), exact)
		if bad > 0 || !(rel <= kernels.FlashBound(c.s)) {
			t.Errorf("flash tiles %s: rel-RMS %.3e (bound %.0e), %d NaN/Inf mismatches", c.name, rel, kernels.FlashBound(c.s), bad)
		}
	}
}

// BenchmarkTiled times the Metal backend's kernels in their CUDA
// rendering on this GPU: zf_linear_tiled against zf_linear_seq and the
// CUDA backend's own Linear (cuBLASLt), zf_attention_tiled and
// zf_attention_flash against zf_attention_seq and the CUDA backend's own
// Attention (its flash kernels): the median of 5 event-timed calls after
// 2 warm-ups, printed with the ratios. It measures; it asserts nothing
// about speed. Run it once: -test.bench Tiled -test.benchtime 1x.
func BenchmarkTiled(bb *testing.B) {
	if gpu == nil {
		bb.Skipf("no CUDA device: %v", gpuErr)
	}
	b := gpu
	t := bb
	must := func(x exec.Tensor, err error) exec.Tensor {
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	upload := func(n int, seed uint64, scale float64, shape []int) exec.Tensor {
		return must(b.Upload(randn(n, seed, scale), shape, bf16))
	}
	timeIt := func(call func() exec.Tensor) float64 {
		var ms []float64
		for i := range 7 {
			t0, _ := b.NewEvent()
			t1, _ := b.NewEvent()
			t0.Record()
			g := call()
			t1.Record()
			d, err := t1.Since(t0)
			if err != nil {
				t.Fatal(err)
			}
			if i >= 2 {
				ms = append(ms, d)
			}
			b.Free(g)
			t0.Destroy()
			t1.Destroy()
		}
		slices.Sort(ms)
		return ms[len(ms)/2]
	}
	for _, sh := range [][3]int{{4096, 3072, 3072}, {256, 3072, 1536}} {
		mm, k, n := sh[0], sh[1], sh[2]
		x := upload(mm*k, 61, 1, []int{mm, k})
		w := upload(n*k, 62, 0.02, []int{n, k})
		bias := upload(n, 63, 0.1, []int{n})
		s := exec.Out(bf16)
		lp, shape, err := kernels.LinearSeq("cuda", x.Shape(), w.Shape(), bf16, bf16, bf16, s)
		if err != nil {
			t.Fatal(err)
		}
		seq := timeIt(func() exec.Tensor {
			return seqRun(t, b, "zf_linear_seq", shape, bf16, int(lp.M)*int(lp.N), kernels.Bytes(&lp), x, w, bias)
		})
		tiled := timeIt(func() exec.Tensor {
			return tiledRun(t, b, "zf_linear_tiled", shape, bf16, kernels.LinearTiledGroups(lp), kernels.GemmThreads, kernels.Bytes(&lp), x, w, bias)
		})
		cublas := timeIt(func() exec.Tensor { return must(b.Linear(x, w, bias, s)) })
		fl := 2 * float64(mm) * float64(k) * float64(n)
		fmt.Printf("tiled bench: linear [%d,%d]·[%d,%d]ᵀ bf16: seq %.3f ms, tiled %.3f ms (%.1f TFLOP/s), cuBLASLt %.3f ms; tiled/seq %.3f, tiled/cuBLASLt %.1f\n",
			mm, k, n, k, seq, tiled, fl/tiled/1e9, cublas, tiled/seq, tiled/cublas)
		for _, x := range []exec.Tensor{x, w, bias} {
			b.Free(x)
		}
	}
	for _, c := range []struct {
		name          string
		seq, h, kv, d int
		mask          exec.MaskKind
	}{
		{"[1, 1024, 24×128]", 1024, 24, 24, 128, exec.MaskNone},
		{"[1, 2048, 32×128, 8 kv heads] causal", 2048, 32, 8, 128, exec.MaskCausal},
	} {
		q := upload(c.seq*c.h*c.d, 71, 1, []int{1, c.seq, c.h * c.d})
		k := upload(c.seq*c.kv*c.d, 72, 1, []int{1, c.seq, c.kv * c.d})
		v := upload(c.seq*c.kv*c.d, 73, 1, []int{1, c.seq, c.kv * c.d})
		p := exec.AttentionParams{Heads: c.h, KVHeads: c.kv, Mask: c.mask}
		s := exec.Out(bf16)
		a, err := exec.CheckAttention(q, k, v, nil, nil, nil, p)
		if err != nil {
			t.Fatal(err)
		}
		ap, _, err := kernels.AttentionSeq("cuda", a, p, s, bf16, bf16, bf16, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		shape := []int{1, c.seq, c.h * c.d}
		run := func(kernel string) func() exec.Tensor {
			return func() exec.Tensor {
				if kernel == "zf_attention_seq" {
					return seqRun(t, b, kernel, shape, bf16, c.seq*c.h, kernels.Bytes(&ap), q, k, v, q, q, q)
				}
				return tiledRun(t, b, kernel, shape, bf16, kernels.AttentionGroups(ap), kernels.AttnThreads, kernels.Bytes(&ap), q, k, v, q, q, q)
			}
		}
		seq := timeIt(run("zf_attention_seq"))
		tiled := timeIt(run("zf_attention_tiled"))
		flash := timeIt(run("zf_attention_flash"))
		own := timeIt(func() exec.Tensor { return must(b.Attention(q, k, v, nil, nil, nil, p, s)) })
		fmt.Printf("tiled bench: attention %s bf16: seq %.3f ms, tiled %.3f ms, flash tiles %.3f ms, the CUDA backend's own %.3f ms; "+
			"tiled/seq %.3f, flash/seq %.3f, flash/own %.1f\n", c.name, seq, tiled, flash, own, tiled/seq, flash/seq, flash/own)
		for _, x := range []exec.Tensor{q, k, v} {
			b.Free(x)
		}
	}
}
