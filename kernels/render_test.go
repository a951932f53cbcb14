package kernels

import (
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/precision"
)

// defines reads the source's #define NAME VALUE lines.
func defines(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	re := regexp.MustCompile(`(?m)^#define (\w+) ([^ \n/]+)`)
	for _, m := range re.FindAllStringSubmatch(Source(), -1) {
		out[m[1]] = m[2]
	}
	return out
}

func TestRenderingsShareTheSource(t *testing.T) {
	for _, tg := range []Target{CUDA, MSL, Host} {
		src, err := Render(tg)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasSuffix(src, tiles) || !strings.Contains(src, rows) || !strings.Contains(src, pointwise) {
			t.Errorf("%v rendering does not hold pointwise.zf and rows.zf and end with tiles.zf verbatim", tg)
		}
		pw, err := RenderPointwise(tg)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasSuffix(pw, pointwise) || strings.Contains(pw, rows) || strings.Contains(pw, tiles) {
			t.Errorf("%v pointwise rendering is not pointwise.zf alone", tg)
		}
	}
	if _, err := Render(Target(0)); err == nil {
		t.Error("Render accepted an unknown target")
	}
}

// TestPreludesDefineTheSameWords checks that every target defines the same
// target words and that the source uses no ZF_/zf_ word that neither it
// nor every prelude defines: the arithmetic cannot depend on the target.
func TestPreludesDefineTheSameWords(t *testing.T) {
	defRE := regexp.MustCompile(`(?m)^(?:#define|typedef \w+|struct alignas\(16\)) (\w+)`)
	words := func(s string) []string {
		var out []string
		for _, m := range defRE.FindAllStringSubmatch(s, -1) {
			if strings.HasPrefix(m[1], "ZF_") || strings.HasPrefix(m[1], "zf_") {
				out = append(out, m[1])
			}
		}
		sort.Strings(out)
		return out
	}
	cuda := words(Prelude(CUDA))
	for _, tg := range []Target{MSL, Host} {
		if got := words(Prelude(tg)); strings.Join(got, " ") != strings.Join(cuda, " ") {
			t.Errorf("%v prelude defines %v,\ncuda defines %v", tg, got, cuda)
		}
	}
	defined := map[string]bool{}
	for _, w := range cuda {
		defined[w] = true
	}
	for _, w := range words(Source()) {
		defined[w] = true
	}
	// Functions and structs the source defines itself.
	for _, m := range regexp.MustCompile(`(?:ZF_FN \w+|struct) (zf_\w+)`).FindAllStringSubmatch(Source(), -1) {
		defined[m[1]] = true
	}
	for _, k := range Kernels() {
		defined[k] = true
	}
	for _, m := range regexp.MustCompile(`\b((?:ZF|zf)_\w+)`).FindAllStringSubmatch(Source(), -1) {
		if !defined[m[1]] {
			t.Errorf("source uses %s, which neither it nor the preludes define", m[1])
		}
	}
	want := []string{"zf_attention_flash", "zf_attention_seq", "zf_attention_tiled", "zf_copy", "zf_elementwise", "zf_linear_seq",
		"zf_linear_tiled", "zf_norm_seq", "zf_rope_kernel", "zf_timestep"}
	if got := Kernels(); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("kernels %v, want %v", got, want)
	}
	want = []string{"zf_copy", "zf_elementwise", "zf_rope_kernel", "zf_timestep"}
	if got := PointwiseKernels(); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("pointwise kernels %v, want %v", got, want)
	}
}

// TestCodesMatch checks the source's codes against the Go side's.
func TestCodesMatch(t *testing.T) {
	d := defines(t)
	ints := map[string]int{
		"ZF_F32": int(precision.F32), "ZF_BF16": int(precision.BF16), "ZF_F16": int(precision.F16), "ZF_F64": int(precision.F64),
		"ZF_ACT_IDENTITY": int(exec.ActIdentity), "ZF_ACT_SILU": int(exec.ActSiLU), "ZF_ACT_GELU_TANH": int(exec.ActGELUTanh),
		"ZF_ACT_GELU_ERF": int(exec.ActGELUErf), "ZF_ACT_TANH": int(exec.ActTanh), "ZF_ACT_SIGMOID": int(exec.ActSigmoid),
		"ZF_ACT_RELU": int(exec.ActReLU), "ZF_ACT_SIN": int(exec.ActSin), "ZF_ACT_COS": int(exec.ActCos),
		"ZF_ACT_ATAN": int(exec.ActAtan), "ZF_ACT_LOG": int(exec.ActLog), "ZF_ACT_EXP": int(exec.ActExp), "ZF_ACT_EXPM1": int(exec.ActExpm1), "ZF_ACT_SQRT": int(exec.ActSqrt), "ZF_ACT_HARDSWISH": int(exec.ActHardswish), "ZF_ACT_HARDSIGMOID": int(exec.ActHardsigmoid), "ZF_ACT_ABS": int(exec.ActAbs), "ZF_MATH_FAST_EXP": int(exec.MathFastExp), "ZF_MATH_RECIP_DIV": int(exec.MathRecipDiv), "ZF_MATH_TENSOR_CORE": int(exec.MathTensorCore),
		"ZF_OP_ADD": OpAdd, "ZF_OP_MUL": OpMul, "ZF_OP_ACT": OpAct, "ZF_OP_CAST": OpCast, "ZF_OP_MODULATE": OpModulate,
		"ZF_OP_GATED": OpGated, "ZF_OP_GLU": OpGLU, "ZF_OP_SUB": OpSub, "ZF_OP_DIV": OpDiv, "ZF_OP_MIN": OpMin, "ZF_OP_MAX": OpMax, "ZF_OP_ROPE": OpRope, "ZF_R_SCALE": RScale, "ZF_R_PRODUCT": RProduct, "ZF_R_GATE": RGate,
		"ZF_R_NORMALIZED": RNormalized, "ZF_R_EACH": REach, "ZF_R_MOMENTS": RMoments, "ZF_PLUS_ONE": PlusOne, "ZF_HAS_SHIFT": HasShift, "ZF_MAXR": MaxRank, "ZF_VEC8": Vec8, "ZF_EPI_MAXO": MaxEpiOperands,
		"ZF_NORM_LAYER": NormLayer, "ZF_NORM_RMS": NormRMS, "ZF_ATTN_DMAX": AttnDMax, "ZF_MASK_CAUSAL": MaskCausal,
		"ZF_MASK_EXPLICIT": MaskExplicit, "ZF_A_EACH": AEach, "ZF_A_SCORES": AScores, "ZF_A_PROBS": AProbs,
		"ZF_A_WEIGHTS": AWeights, "ZF_A_ACCUM": AAccum, "ZF_A_QUERY": AQuery,
		"ZF_GEMM_BM": GemmBM, "ZF_GEMM_BN": GemmBN, "ZF_GEMM_BK": GemmBK, "ZF_GEMM_THREADS": GemmThreads,
		"ZF_AT_ROWS": AttnRows, "ZF_AT_THREADS": AttnThreads, "ZF_AT_KV": AttnKV, "ZF_AT_KEYS": AttnKeys,
	}

	for name, want := range ints {
		got, err := strconv.Atoi(d[name])
		if err != nil || got != want {
			t.Errorf("%s = %q, Go has %d", name, d[name], want)
		}
	}
	// The f32 constants, exactly as exec/pointwise.go rounds them.
	floats := map[string]float32{
		"ZF_LOG2E":      float32(1.4426950408889634),
		"ZF_GELU_BETA":  float32(0.7978845608028654),
		"ZF_GELU_KAPPA": float32(0.044715),
		"ZF_SQRT_HALF":  float32(0.7071067811865476),
	}
	for name, want := range floats {
		lit := strings.TrimSuffix(d[name], "f")
		got, err := strconv.ParseFloat(lit, 32)
		if err != nil || float32(got) != want {
			t.Errorf("%s = %q, want f32 %v (bits %#x)", name, d[name], want, math.Float32bits(want))
		}
	}
}

func TestNewEWCollapses(t *testing.T) {
	cases := []struct {
		out  []int
		ins  [][]int
		rank int32
		dims []int32
	}{
		{[]int{2, 4096, 3072}, [][]int{{2, 4096, 3072}, {2, 4096, 3072}}, 1, []int32{2 * 4096 * 3072}},
		{[]int{2, 4096, 3072}, [][]int{{2, 4096, 3072}, {2, 1, 3072}}, 3, []int32{2, 4096, 3072}},
		{[]int{2, 4096, 3072}, [][]int{{2, 4096, 3072}, {3072}}, 2, []int32{2 * 4096, 3072}},
		{[]int{4, 1, 5}, [][]int{{4, 1, 5}, {1}}, 1, []int32{20}},
	}
	for _, c := range cases {
		p, err := NewEW(c.out, c.ins...)
		if err != nil {
			t.Fatal(err)
		}
		if p.Rank != c.rank {
			t.Errorf("%v %v: rank %d, want %d (dims %v)", c.out, c.ins, p.Rank, c.rank, p.Dims)
			continue
		}
		for i, d := range c.dims {
			if p.Dims[i] != d {
				t.Errorf("%v %v: dims %v, want %v", c.out, c.ins, p.Dims[:p.Rank], c.dims)
			}
		}
	}
	if _, err := NewEW([]int{2, 3}, []int{3, 3}); err == nil {
		t.Error("NewEW accepted shapes that do not broadcast")
	}
}
