package kernels

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	zexec "github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/cpu"
	"github.com/zflow/zflow/precision"
)

// normRows draws rows of width w for a norm: most N(μ, σ²) with μ and σ
// varying by row (a large mean makes the variance's subtraction matter),
// plus a constant row, a row of huge values, a row of f32 subnormals and
// a row holding ±Inf and NaN.
func normRows(r *rand.Rand, rows, w int) []float32 {
	v := make([]float32, rows*w)
	for q := range rows {
		row := v[q*w : (q+1)*w]
		mu, sd := r.NormFloat64()*4, 0.01+r.Float64()*6
		for i := range row {
			row[i] = float32(mu + sd*r.NormFloat64())
		}
		switch q % 8 {
		case 3:
			for i := range row {
				row[i] = 2.5
			}
		case 4:
			for i := range row {
				row[i] *= 1e30
			}
		case 5:
			for i := range row {
				row[i] *= 1e-41
			}
		case 6:
			row[r.IntN(w)] = float32(math.Inf(1))
			row[r.IntN(w)] = float32(math.NaN())
		}
	}
	return v
}

// rowJobs are the norm, linear and attention cases of the host test:
// each dtype, each rounding variant, masks (a fully masked row), GQA.
// tiledHostMaxValues bounds the outputs of a case rowJobs also runs on the
// tiled kernels on the host.
const tiledHostMaxValues = 1 << 15

func rowJobs(t *testing.T) []hostJob {
	r := rand.New(rand.NewPCG(3, 4))
	b := cpu.New(0)
	var jobs []hostJob
	must := func(x zexec.Tensor, err error) zexec.Tensor {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	fmtOf := func(x zexec.Tensor) precision.Format {
		if x == nil {
			return 0
		}
		return x.Format()
	}
	packed := func(x zexec.Tensor) []byte {
		if x == nil {
			return nil
		}
		return pack(data(t, b, x), x.Format())
	}
	bf, f16, f32 := precision.BF16, precision.F16, precision.F32

	// Norm.
	type normCase struct {
		shape  []int
		fx     precision.Format
		p      zexec.NormParams
		gamma  bool
		beta   bool
		s      zexec.Spec
		fParam precision.Format
	}
	var ncs []normCase
	for _, kind := range []zexec.NormKind{zexec.NormLayer, zexec.NormRMS} {
		for _, fx := range []precision.Format{f32, bf, f16} {
			for _, s := range []zexec.Spec{zexec.Out(bf), zexec.Out(f32), zexec.Out(f16), {Out: bf, Round: zexec.RoundNormalized},
				zexec.Composed(bf), {Out: f16, Round: zexec.RoundScale | zexec.RoundProduct}} {
				ncs = append(ncs, normCase{[]int{16, 3072}, fx, zexec.NormParams{Kind: kind, Eps: 1e-6}, true, kind == zexec.NormLayer, s, bf})
			}
		}
		ncs = append(ncs,
			normCase{[]int{8, 3072}, bf, zexec.NormParams{Kind: kind, Eps: 1e-5, Offset: 1}, true, false, zexec.Composed(bf), f32},
			normCase{[]int{8, 3072}, bf, zexec.NormParams{Kind: kind, Eps: 1e-5, Offset: 1}, true, true, zexec.Out(bf), f32},
			normCase{[]int{8, 96}, f32, zexec.NormParams{Kind: kind, Eps: 1e-6, Group: 32}, true, true, zexec.Out(f32), f32},
			normCase{[]int{2, 8, 13}, bf, zexec.NormParams{Kind: kind, Eps: 1e-6}, false, false, zexec.Out(bf), 0},
			normCase{[]int{8, 64}, f16, zexec.NormParams{Kind: kind}, false, true, zexec.Out(f16), f16},
		)
	}
	// RMS norms as F.normalize times √G (MathL2): √G in bf16 or f32, γ
	// with an offset, β, groups, f32.
	l2 := zexec.NormParams{Kind: zexec.NormRMS, Eps: 1e-12}
	ncs = append(ncs,
		normCase{[]int{16, 96}, bf, l2, true, false, zexec.Spec{Out: bf, Math: zexec.MathL2}, bf},
		normCase{[]int{16, 96}, bf, l2, true, true, zexec.Spec{Out: bf, Math: zexec.MathL2 | zexec.MathScalarF32}, bf},
		normCase{[]int{8, 3072}, bf, zexec.NormParams{Kind: zexec.NormRMS, Eps: 1e-6, Offset: 1}, true, false, zexec.Spec{Out: bf, Round: zexec.RoundScale, Math: zexec.MathL2}, f32},
		normCase{[]int{8, 96}, f16, zexec.NormParams{Kind: zexec.NormRMS, Eps: 1e-6, Group: 24}, false, false, zexec.Spec{Out: f16, Math: zexec.MathL2}, 0},
		normCase{[]int{8, 96}, f32, l2, true, false, zexec.Spec{Out: f32, Math: zexec.MathL2 | zexec.MathScalarF32}, f32},
		// x normalised upcast, ‖x‖ kept in f32 (MathNormalizeF32)
		normCase{[]int{16, 96}, bf, l2, true, false, zexec.Spec{Out: bf, Math: zexec.MathL2 | zexec.MathNormalizeF32 | zexec.MathScalarF32}, bf},
		normCase{[]int{8, 96}, bf, zexec.NormParams{Kind: zexec.NormRMS, Eps: 1e-12, Group: 24}, true, false, zexec.Spec{Out: bf, Math: zexec.MathL2 | zexec.MathNormalizeF32}, bf},
	)
	normVals := 0
	for _, c := range ncs {
		g := c.p.Group
		if g == 0 {
			g = c.shape[len(c.shape)-1]
		}
		n := zexec.Numel(c.shape)
		x := upload(t, b, normRows(r, n/c.shape[len(c.shape)-1], c.shape[len(c.shape)-1]), c.shape, c.fx)
		var gm, bt zexec.Tensor
		if c.gamma {
			gm = upload(t, b, values(r, g), []int{g}, c.fParam)
		}
		if c.beta {
			bt = upload(t, b, values(r, g), []int{g}, c.fParam)
		}
		np, err := NormSeq("host", c.shape, c.fx, fmtOf(gm), fmtOf(bt), c.p, c.s)
		if err != nil {
			t.Fatal(err)
		}
		out := must(b.Norm(x, gm, bt, c.p, c.s))
		j := hostJob{name: fmt.Sprintf("norm %v %v x=%v γ=%v β=%v %+v", c.p.Kind, c.shape, c.fx, c.gamma, c.beta, c.p) + " " + c.s.String(),
			kernel: 5, params: append([]byte(nil), Bytes(&np)...), want: data(t, b, out), fmt: c.s.Out}
		j.bufs[0], j.bufs[1], j.bufs[2] = packed(x), packed(gm), packed(bt)
		jobs = append(jobs, j)
		normVals += n
	}

	// Linear.
	type linCase struct {
		m, n, k    int
		fx, fw, fb precision.Format
		s          zexec.Spec
	}
	lcs := []linCase{
		{64, 96, 256, bf, bf, bf, zexec.Out(bf)},
		{64, 96, 256, bf, bf, bf, zexec.Spec{Out: bf, Round: zexec.RoundBeforeBias}},
		{64, 96, 256, bf, bf, 0, zexec.Out(bf)},
		{64, 96, 256, f32, f32, f32, zexec.Out(f32)},
		{64, 96, 256, f16, f16, f16, zexec.Out(f16)},
		{64, 96, 256, bf, f32, f32, zexec.Out(bf)},
		{7, 33, 13, bf, bf, bf, zexec.Out(bf)},   // k not a multiple of 8: the scalar loads
		{7, 33, 13, f32, f32, 0, zexec.Out(f32)}, //
		{3, 5, 0, bf, bf, bf, zexec.Out(bf)},     // k = 0: the bias alone
		{128, 384, 1024, bf, bf, bf, zexec.Out(bf)},
		// tensor-core sums: k a multiple of 16, a last partial block, and
		// f32 operands (summed in k order)
		{64, 96, 256, bf, bf, bf, zexec.Spec{Out: bf, Math: zexec.MathTensorCore}},
		{7, 33, 37, bf, bf, 0, zexec.Spec{Out: bf, Math: zexec.MathTensorCore}},
		{64, 96, 256, f16, f16, f16, zexec.Spec{Out: f16, Round: zexec.RoundBeforeBias, Math: zexec.MathTensorCore}},
		{64, 96, 256, bf, f32, f32, zexec.Spec{Out: bf, Math: zexec.MathTensorCore}},
		// no multiple of the tiled GEMM's 64 × 64 × 16 tiles
		{70, 130, 37, bf, bf, bf, zexec.Out(bf)},
		{65, 64, 17, f16, f16, 0, zexec.Out(f32)},
		{70, 130, 37, bf, bf, bf, zexec.Spec{Out: bf, Math: zexec.MathTensorCore}},
	}
	linVals := 0
	for _, c := range lcs {
		x := upload(t, b, values(r, c.m*c.k), []int{c.m, c.k}, c.fx)
		w := upload(t, b, values(r, c.n*c.k), []int{c.n, c.k}, c.fw)
		var bias zexec.Tensor
		if c.fb != 0 {
			bias = upload(t, b, values(r, c.n), []int{c.n}, c.fb)
		}
		lp, _, err := LinearSeq("host", x.Shape(), w.Shape(), c.fx, c.fw, c.fb, c.s)
		if err != nil {
			t.Fatal(err)
		}
		out := must(b.Linear(x, w, bias, c.s))
		j := hostJob{name: fmt.Sprintf("linear [%d,%d]·[%d,%d]ᵀ x=%v w=%v b=%v vec=%d %v", c.m, c.k, c.n, c.k, c.fx, c.fw, c.fb, lp.Vec, c.s),
			kernel: 6, params: append([]byte(nil), Bytes(&lp)...), want: data(t, b, out), fmt: c.s.Out}
		j.bufs[0], j.bufs[1], j.bufs[2] = packed(x), packed(w), packed(bias)
		jobs = append(jobs, j)
		linVals += c.m * c.n
	}

	// Attention.
	type attnCase struct {
		name              string
		bsz, sq, sk, h, d int
		p                 zexec.AttentionParams
		f                 precision.Format
		mask, bias        []int // shapes, nil: none
		s                 zexec.Spec
	}
	gqa := zexec.AttentionParams{Heads: 4, KVHeads: 2}
	with := func(p zexec.AttentionParams, set func(*zexec.AttentionParams)) zexec.AttentionParams {
		set(&p)
		return p
	}
	causal := with(gqa, func(p *zexec.AttentionParams) { p.Mask = zexec.MaskCausal })
	explicit := with(gqa, func(p *zexec.AttentionParams) { p.Mask = zexec.MaskExplicit })
	acs := []attnCase{
		{"plain", 2, 33, 40, 4, 64, gqa, bf, nil, nil, zexec.Out(bf)},
		{"plain f32", 2, 33, 40, 4, 64, gqa, f32, nil, nil, zexec.Out(f32)},
		{"plain f16", 2, 33, 40, 4, 64, gqa, f16, nil, nil, zexec.Out(f16)},
		{"scores", 2, 33, 40, 4, 64, gqa, bf, nil, nil, zexec.Spec{Out: bf, Round: zexec.RoundScores}},
		{"probs", 2, 33, 40, 4, 64, gqa, bf, nil, nil, zexec.Spec{Out: bf, Round: zexec.RoundProbs}},
		{"weights", 2, 33, 40, 4, 64, gqa, bf, nil, nil, zexec.Spec{Out: bf, Round: zexec.RoundScores | zexec.RoundWeights}},
		{"accum", 2, 33, 40, 4, 64, gqa, bf, nil, nil, zexec.Spec{Out: bf, Round: zexec.RoundProbs | zexec.RoundAccum}},
		{"each", 2, 33, 40, 4, 64, gqa, bf, nil, nil, zexec.Composed(bf)},
		{"fast exp", 2, 33, 40, 4, 64, gqa, bf, nil, nil, zexec.Spec{Out: bf, Math: zexec.MathFastExp}},
		{"tensor core weights", 2, 33, 40, 4, 64, gqa, bf, nil, nil, zexec.Spec{Out: bf, Round: zexec.RoundWeights, Math: zexec.MathTensorCore}},
		{"tensor core each", 2, 33, 40, 4, 24, causal, bf, nil, nil, zexec.Spec{Out: bf, Round: zexec.RoundEach, Math: zexec.MathTensorCore}},
		{"tensor core f16 probs", 2, 33, 40, 4, 64, gqa, f16, nil, nil, zexec.Spec{Out: f16, Round: zexec.RoundScores | zexec.RoundProbs, Math: zexec.MathTensorCore}},
		{"query each", 2, 33, 40, 4, 24, with(gqa, func(p *zexec.AttentionParams) { p.Scale = 0.3 }), bf, nil, []int{1, 4, 1, 40},
			zexec.Spec{Out: bf, Round: zexec.RoundEach | zexec.RoundQuery}},
		{"query tensor core each", 2, 33, 40, 4, 24, causal, bf, nil, nil, zexec.Spec{Out: bf, Round: zexec.RoundEach | zexec.RoundQuery, Math: zexec.MathTensorCore}},
		{"causal", 2, 40, 40, 4, 64, causal, bf, nil, nil, zexec.Out(bf)},
		{"causal window", 2, 40, 40, 4, 64, with(causal, func(p *zexec.AttentionParams) { p.Window = 7 }), bf, nil, nil, zexec.Composed(bf)},
		{"explicit [B,Sq,Sk]", 2, 33, 40, 4, 64, explicit, bf, []int{2, 33, 40}, nil, zexec.Out(bf)},
		{"explicit [1,1,Sq,Sk]", 2, 33, 40, 4, 64, explicit, bf, []int{1, 1, 33, 40}, nil, zexec.Spec{Out: bf, Round: zexec.RoundWeights}},
		{"bias [B,H,Sq,Sk]", 2, 33, 40, 4, 64, gqa, bf, nil, []int{2, 4, 33, 40}, zexec.Spec{Out: bf, Round: zexec.RoundScores}},
		{"bias [1,H,1,Sk] each", 2, 33, 40, 4, 64, gqa, bf, nil, []int{1, 4, 1, 40}, zexec.Composed(bf)},
		{"softcap", 2, 33, 40, 4, 64, with(gqa, func(p *zexec.AttentionParams) { p.Softcap = 5 }), bf, nil, nil, zexec.Out(bf)},
		{"softcap each fast", 2, 33, 40, 4, 64, with(causal, func(p *zexec.AttentionParams) { p.Softcap = 3 }), bf, nil, nil,
			zexec.Spec{Out: bf, Round: zexec.RoundEach, Math: zexec.MathFastExp}},
		{"alibi", 2, 33, 40, 6, 32, zexec.AttentionParams{Heads: 6, Mask: zexec.MaskCausal, ALiBi: true}, bf, nil, nil, zexec.Spec{Out: bf, Round: zexec.RoundScores}},
		{"alibi scaled", 2, 33, 40, 6, 32, zexec.AttentionParams{Heads: 6, ALiBi: true, ALiBiScale: 0.125, Scale: 1}, bf, nil, nil, zexec.Composed(bf)},
		{"mha scale", 1, 17, 17, 2, 80, zexec.AttentionParams{Heads: 2, Scale: 0.3}, f32, nil, nil, zexec.Out(bf)},
		{"head 256", 1, 9, 12, 2, 256, zexec.AttentionParams{Heads: 2, KVHeads: 1}, bf, nil, nil, zexec.Out(bf)},
		{"real size", 1, 256, 256, 8, 128, with(gqa, func(p *zexec.AttentionParams) { p.Heads, p.KVHeads, p.Mask = 8, 2, zexec.MaskCausal }), bf, nil, nil, zexec.Out(bf)},
	}
	// Each case again with f32 output: a difference an f32 ulp wide in an
	// internal step shows there, where bf16 rounding would hide it.
	for _, c := range acs[:len(acs)-1] {
		if c.s.Out != f32 {
			c.name += " out f32"
			c.s.Out = f32
			acs = append(acs, c)
		}
	}
	attnVals, nanRows := 0, 0
	for _, c := range acs {
		kvh := c.p.KVHeads
		if kvh == 0 {
			kvh = c.p.Heads
		}
		q := upload(t, b, values(r, c.bsz*c.sq*c.h*c.d), []int{c.bsz, c.sq, c.h * c.d}, c.f)
		k := upload(t, b, values(r, c.bsz*c.sk*kvh*c.d), []int{c.bsz, c.sk, kvh * c.d}, c.f)
		v := upload(t, b, values(r, c.bsz*c.sk*kvh*c.d), []int{c.bsz, c.sk, kvh * c.d}, c.f)
		var mask, bias zexec.Tensor
		if c.mask != nil {
			mv := make([]float32, zexec.Numel(c.mask))
			for i := range mv {
				if r.IntN(3) != 0 {
					mv[i] = 1
				}
			}
			// Row 1 of the mask sees no key: a NaN row, as PyTorch's math SDPA.
			for j := range c.sk {
				mv[c.sk+j] = 0
			}
			mask = upload(t, b, mv, c.mask, precision.BF16)
		}
		if c.bias != nil {
			bias = upload(t, b, values(r, zexec.Numel(c.bias)), c.bias, precision.BF16)
		}
		a, err := zexec.CheckAttention(q, k, v, mask, bias, nil, c.p)
		if err != nil {
			t.Fatal(err)
		}
		ap, slopes, err := AttentionSeq("host", a, c.p, c.s, c.f, c.f, c.f, fmtOf(mask), fmtOf(bias))
		if err != nil {
			t.Fatal(err)
		}
		out := must(b.Attention(q, k, v, mask, bias, nil, c.p, c.s))
		want := data(t, b, out)
		if c.mask != nil {
			if w := want[c.h*c.d : c.h*c.d+c.d]; w[0] == w[0] {
				t.Errorf("attention %s: the fully masked row is %v, want NaN", c.name, w[:4])
			}
			nanRows++
		}
		j := hostJob{name: fmt.Sprintf("attention %s q=%v k=%v %+v %v", c.name, q.Shape(), k.Shape(), c.p, c.s), kernel: 7,
			params: append([]byte(nil), Bytes(&ap)...), want: want, fmt: c.s.Out}
		j.bufs[0], j.bufs[1], j.bufs[2], j.bufs[3], j.bufs[4] = packed(q), packed(k), packed(v), packed(mask), packed(bias)
		if slopes != nil {
			j.bufs[5] = pack(slopes, precision.F32)
		}
		jobs = append(jobs, j)
		attnVals += len(want)
	}
	// The tiled kernels (tiles.zf) on the same cases: the same bits. The
	// host runs a group's 256 threads as threads with a real barrier (each
	// barrier wakes them all: slow on a 2-core machine), so here they take
	// the small cases, which hold every option, once each (not the f32-out
	// repeats); cuda/tiled_test.go runs every shape through the CUDA
	// rendering on a GPU.
	tiled := 0
	for _, j := range jobs {
		if len(j.want) > tiledHostMaxValues || strings.Contains(j.name, " out f32 ") {
			continue
		}
		switch j.kernel {
		case 6:
			j.kernel, j.name = 8, "tiled "+j.name
			jobs = append(jobs, j)
			tiled++
		case 7:
			j.kernel, j.name = 9, "tiled "+j.name
			jobs = append(jobs, j)
			tiled++
		}
	}
	t.Logf("row kernels: %d norm jobs (%d values), %d linear jobs (%d values), %d attention jobs (%d values, %d with a fully masked row); "+
		"%d of the linear and attention jobs again on the tiled kernels", len(ncs), normVals, len(lcs), linVals, len(acs), attnVals, nanRows, tiled)
	return jobs
}

// TestAttentionSeqRefusesBand: the row kernels skip key blocks by a
// causal window only, so a bidirectional window is refused, not run.
func TestAttentionSeqRefusesBand(t *testing.T) {
	p := zexec.AttentionParams{Heads: 1, Window: 2}
	a := zexec.AttentionArgs{AttentionDims: zexec.AttentionDims{B: 1, Sq: 4, Sk: 4, H: 1, KV: 1, D: 8}}
	if _, _, err := AttentionSeq("host", a, p, zexec.Out(precision.F32), precision.F32, precision.F32, precision.F32, 0, 0); !errors.Is(err, zexec.ErrUnsupported) {
		t.Errorf("band: %v, want ErrUnsupported", err)
	}
}
