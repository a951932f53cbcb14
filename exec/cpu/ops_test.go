package cpu

import (
	"errors"
	"math"
	"testing"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/precision"
)

// Hand-computed answers for every op, in f32 storage (so the values are
// the f32 arithmetic's, compared against float64 within a few ulps).

const f32 = precision.F32

func TestAddMulBroadcast(t *testing.T) {
	bk := New(2)
	a := up(t, bk, f32, []int{2, 3}, 1, 2, 3, 4, 5, 6)
	cases := []struct {
		name  string
		b     exec.Tensor
		mul   bool
		want  []float64
		shape []int
	}{
		{"row", up(t, bk, f32, []int{3}, 10, 20, 30), false, []float64{11, 22, 33, 14, 25, 36}, []int{2, 3}},
		{"column", up(t, bk, f32, []int{2, 1}, 10, 20), false, []float64{11, 12, 13, 24, 25, 26}, []int{2, 3}},
		{"scalar", up(t, bk, f32, []int{1}, 2), true, []float64{2, 4, 6, 8, 10, 12}, []int{2, 3}},
		{"outer", up(t, bk, f32, []int{2, 1, 1}, 1, -1), true, []float64{1, 2, 3, 4, 5, 6, -1, -2, -3, -4, -5, -6}, []int{2, 2, 3}},
	}
	for _, c := range cases {
		var y exec.Tensor
		var err error
		if c.mul {
			y, err = bk.Mul(a, c.b, exec.Out(f32))
		} else {
			y, err = bk.Add(a, c.b, exec.Out(f32))
		}
		near(t, c.name, values(t, bk, y, err), c.want, 0)
		if got := y.Shape(); len(got) != len(c.shape) {
			t.Errorf("%s: shape %v, want %v", c.name, got, c.shape)
		}
	}
	if _, err := bk.Add(a, up(t, bk, f32, []int{2}, 1, 2), exec.Out(f32)); err == nil {
		t.Error("[2 3] + [2] accepted")
	}
}

func TestActOp(t *testing.T) {
	bk := New(2)
	x := up(t, bk, f32, []int{4}, -2, -0.5, 0.5, 3)
	for _, c := range []struct {
		f    exec.ActKind
		want func(float64) float64
	}{
		{exec.ActSiLU, func(x float64) float64 { return x / (1 + math.Exp(-x)) }},
		{exec.ActGELUTanh, func(x float64) float64 {
			return 0.5 * x * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(x+0.044715*x*x*x)))
		}},
		{exec.ActGELUErf, func(x float64) float64 { return 0.5 * x * (1 + math.Erf(x/math.Sqrt2)) }},
		{exec.ActTanh, math.Tanh},
		{exec.ActSigmoid, func(x float64) float64 { return 1 / (1 + math.Exp(-x)) }},
		{exec.ActReLU, func(x float64) float64 { return math.Max(x, 0) }},
		{exec.ActIdentity, func(x float64) float64 { return x }},
	} {
		want := make([]float64, 4)
		for i, v := range []float64{-2, -0.5, 0.5, 3} {
			want[i] = c.want(v)
		}
		y, err := bk.Act(x, c.f, exec.Out(f32))
		near(t, c.f.String(), values(t, bk, y, err), want, 3e-7)
	}
	if _, err := bk.Act(x, exec.ActKind(99), exec.Out(f32)); !errors.Is(err, exec.ErrUnsupported) {
		t.Errorf("unknown activation: %v, want ErrUnsupported", err)
	}
}

func TestLinearOp(t *testing.T) {
	bk := New(2)
	x := up(t, bk, f32, []int{2, 2}, 1, 2, 3, 4)
	w := up(t, bk, f32, []int{3, 2}, 1, 0, 0, 1, 1, 1) // [out, in]
	b := up(t, bk, f32, []int{3}, 10, 20, 30)
	y, err := bk.Linear(x, w, b, exec.Out(f32))
	near(t, "x·Wᵀ+b", values(t, bk, y, err), []float64{11, 22, 33, 13, 24, 37}, 0)
	y, err = bk.Linear(x, w, nil, exec.Out(f32))
	near(t, "no bias", values(t, bk, y, err), []float64{1, 2, 3, 3, 4, 7}, 0)
	if _, err := bk.Linear(x, up(t, bk, f32, []int{2, 3}, 1, 2, 3, 4, 5, 6), nil, exec.Out(f32)); err == nil {
		t.Error("mismatched widths accepted")
	}
}

func TestNormOp(t *testing.T) {
	bk := New(2)
	x := up(t, bk, f32, []int{1, 4}, 1, 2, 3, 4)
	g := up(t, bk, f32, []int{4}, 1, 2, 1, 2)
	b := up(t, bk, f32, []int{4}, 0, 0, 1, 1)
	s5 := math.Sqrt(1.25)
	s75 := math.Sqrt(7.5)
	cases := []struct {
		name        string
		p           exec.NormParams
		gamma, beta exec.Tensor
		want        []float64
	}{
		{"layer", exec.NormParams{Kind: exec.NormLayer}, nil, nil, []float64{-1.5 / s5, -0.5 / s5, 0.5 / s5, 1.5 / s5}},
		{"layer affine", exec.NormParams{Kind: exec.NormLayer}, g, b, []float64{-1.5 / s5, -1 / s5, 0.5/s5 + 1, 3/s5 + 1}},
		{"rms", exec.NormParams{Kind: exec.NormRMS}, nil, nil, []float64{1 / s75, 2 / s75, 3 / s75, 4 / s75}},
		{"rms 1+γ", exec.NormParams{Kind: exec.NormRMS, Offset: 1}, g, nil, []float64{2 / s75, 6 / s75, 6 / s75, 12 / s75}},
		{"layer groups of 2", exec.NormParams{Kind: exec.NormLayer, Group: 2}, nil, nil, []float64{-1, 1, -1, 1}},
		{"rms eps", exec.NormParams{Kind: exec.NormRMS, Eps: 2.5}, nil, nil, []float64{1 / math.Sqrt(10), 2 / math.Sqrt(10), 3 / math.Sqrt(10), 4 / math.Sqrt(10)}},
	}
	for _, c := range cases {
		if c.p.Group == 2 {
			c.gamma, c.beta = nil, nil
		}
		y, err := bk.Norm(x, c.gamma, c.beta, c.p, exec.Out(f32))
		near(t, c.name, values(t, bk, y, err), c.want, 3e-7)
	}
	if _, err := bk.Norm(x, nil, nil, exec.NormParams{Kind: exec.NormLayer, Group: 3}, exec.Out(f32)); err == nil {
		t.Error("group 3 of 4 accepted")
	}
}

func TestModulateGatedGLU(t *testing.T) {
	bk := New(2)
	x := up(t, bk, f32, []int{1, 2, 2}, 1, 2, 3, 4)
	shift := up(t, bk, f32, []int{1, 2}, 1, 1)    // [B, D]: broadcast over the sequence
	scale := up(t, bk, f32, []int{1, 2}, 0.5, -1) // 1+scale = 1.5, 0
	y, err := bk.Modulate(x, shift, scale, exec.ModulateParams{PlusOne: true}, exec.Out(f32))
	near(t, "x(1+s)+b", values(t, bk, y, err), []float64{2.5, 1, 5.5, 1}, 0)
	y, err = bk.Modulate(x, nil, scale, exec.ModulateParams{}, exec.Out(f32))
	near(t, "x·s", values(t, bk, y, err), []float64{0.5, -2, 1.5, -4}, 0)

	res := up(t, bk, f32, []int{1, 2, 2}, 1, 1, 1, 1)
	gate := up(t, bk, f32, []int{1, 2}, 0.5, 2)
	y, err = bk.GatedResidual(res, x, gate, exec.ActIdentity, exec.Out(f32))
	near(t, "x+g·y", values(t, bk, y, err), []float64{1.5, 5, 2.5, 9}, 0)
	y, err = bk.GatedResidual(res, x, gate, exec.ActTanh, exec.Out(f32))
	near(t, "x+tanh(g)·y", values(t, bk, y, err), []float64{1 + math.Tanh(0.5), 1 + 2*math.Tanh(2), 1 + 3*math.Tanh(0.5), 1 + 4*math.Tanh(2)}, 3e-7)

	y, err = bk.GLU(up(t, bk, f32, []int{2}, 1, -1), up(t, bk, f32, []int{2}, 2, 3), exec.ActSiLU, exec.Out(f32))
	near(t, "silu(g)·v", values(t, bk, y, err), []float64{2 * 0.7310585786300049, 3 * -0.2689414213699951}, 3e-7)
}

func TestRopeOp(t *testing.T) {
	bk := New(2)
	// One head of 4 (plus a second head), one position; the first pair turns
	// by 90°, the second pair not at all.
	x := up(t, bk, f32, []int{1, 1, 8}, 1, 2, 3, 4, 5, 6, 7, 8)
	cases := []struct {
		name     string
		layout   exec.RopeLayout
		cos, sin []float32
		rot      int
		want     []float64
	}{
		{"interleaved", exec.RopeInterleaved, []float32{0, 0, 1, 1}, []float32{1, 1, 0, 0}, 0, []float64{-2, 1, 3, 4, -6, 5, 7, 8}},
		{"half", exec.RopeHalf, []float32{0, 1, 0, 1}, []float32{1, 0, 1, 0}, 0, []float64{-3, 2, 1, 4, -7, 6, 5, 8}},
		{"partial", exec.RopeInterleaved, []float32{0, 0}, []float32{1, 1}, 2, []float64{-2, 1, 3, 4, -6, 5, 7, 8}},
	}
	for _, c := range cases {
		r := len(c.cos)
		cs := up(t, bk, f32, []int{1, r}, c.cos...)
		sn := up(t, bk, f32, []int{1, r}, c.sin...)
		y, err := bk.Rope(x, cs, sn, exec.RopeParams{Heads: 2, Layout: c.layout, RotaryDim: c.rot}, exec.Out(f32))
		near(t, c.name, values(t, bk, y, err), c.want, 0)
	}
}

func TestAttentionOp(t *testing.T) {
	bk := New(2)
	// D = 2, scale 1/√2: scores [1/√2, 0]; p0 = σ(1/√2).
	q := up(t, bk, f32, []int{1, 1, 2}, 1, 0)
	k := up(t, bk, f32, []int{1, 2, 2}, 1, 0, 0, 1)
	v := up(t, bk, f32, []int{1, 2, 2}, 1, 2, 3, 4)
	p0 := 1 / (1 + math.Exp(-1/math.Sqrt2))
	y, err := bk.Attention(q, k, v, nil, nil, nil, exec.AttentionParams{Heads: 1}, exec.Out(f32))
	near(t, "softmax", values(t, bk, y, err), []float64{p0 + 3*(1-p0), 2*p0 + 4*(1-p0)}, 3e-7)
	// Causal: query 0 sees key 0 only.
	q2 := up(t, bk, f32, []int{1, 2, 2}, 1, 0, 1, 0)
	y, err = bk.Attention(q2, k, v, nil, nil, nil, exec.AttentionParams{Heads: 1, Mask: exec.MaskCausal}, exec.Out(f32))
	near(t, "causal", values(t, bk, y, err), []float64{1, 2, p0 + 3*(1-p0), 2*p0 + 4*(1-p0)}, 3e-7)
	// Explicit mask hiding key 0.
	m := up(t, bk, f32, []int{1, 1, 2}, 0, 1)
	y, err = bk.Attention(q, k, v, m, nil, nil, exec.AttentionParams{Heads: 1, Mask: exec.MaskExplicit}, exec.Out(f32))
	near(t, "mask", values(t, bk, y, err), []float64{3, 4}, 0)
	// Scale 0 on equal scores gives the mean.
	y, err = bk.Attention(up(t, bk, f32, []int{1, 1, 2}, 0, 0), k, v, nil, nil, nil, exec.AttentionParams{Heads: 1, Scale: 1}, exec.Out(f32))
	near(t, "uniform", values(t, bk, y, err), []float64{2, 3}, 3e-7)
	if _, err := bk.Attention(q, k, v, nil, nil, nil, exec.AttentionParams{Heads: 1, KVHeads: 3}, exec.Out(f32)); err == nil {
		t.Error("3 kv heads over 1 head accepted")
	}
}

func TestMovementOps(t *testing.T) {
	bk := New(2)
	x := up(t, bk, f32, []int{2, 3}, 0, 1, 2, 3, 4, 5)
	y, err := bk.Permute(x, []int{1, 0})
	near(t, "transpose", values(t, bk, y, err), []float64{0, 3, 1, 4, 2, 5}, 0)
	y, err = bk.Slice(x, -1, 1, 3)
	near(t, "slice", values(t, bk, y, err), []float64{1, 2, 4, 5}, 0)
	y, err = bk.Concat([]exec.Tensor{x, x}, 0)
	near(t, "concat 0", values(t, bk, y, err), []float64{0, 1, 2, 3, 4, 5, 0, 1, 2, 3, 4, 5}, 0)
	y, err = bk.Concat([]exec.Tensor{x, up(t, bk, f32, []int{2, 1}, 9, 9)}, 1)
	near(t, "concat 1", values(t, bk, y, err), []float64{0, 1, 2, 9, 3, 4, 5, 9}, 0)
	y, err = bk.Reshape(x, []int{3, -1})
	if err != nil || y.Shape()[1] != 2 {
		t.Errorf("reshape -1: %v %v", y, err)
	}
	parts, err := bk.Chunk(x, 2, 1) // torch.chunk(3 columns, 2) = 2 + 1
	if err != nil || len(parts) != 2 {
		t.Fatalf("chunk: %v %v", parts, err)
	}
	near(t, "chunk 0", values(t, bk, parts[0], nil), []float64{0, 1, 3, 4}, 0)
	near(t, "chunk 1", values(t, bk, parts[1], nil), []float64{2, 5}, 0)
	if _, err := bk.Concat([]exec.Tensor{x, up(t, bk, precision.BF16, []int{2, 3}, 0, 1, 2, 3, 4, 5)}, 0); err == nil {
		t.Error("concat of f32 and bf16 accepted")
	}
	if _, err := bk.Slice(x, 1, 2, 4); err == nil {
		t.Error("slice past the end accepted")
	}
}

func TestPatchify(t *testing.T) {
	bk := New(2)
	// [B=1, C=2, H=2, W=4], patch 2: two patches (w = 0, 1), features (c, ph, pw).
	v := make([]float32, 16)
	for i := range v {
		v[i] = float32(i)
	}
	x := up(t, bk, f32, []int{1, 2, 2, 4}, v...)
	p := exec.PatchParams{Patch: 2, Height: 2, Width: 4}
	y, err := bk.Patchify(x, p)
	got := values(t, bk, y, err)
	// patch 0: c0 rows 0,1 cols 0,1 = 0 1 4 5; c1 = 8 9 12 13. patch 1: cols 2,3.
	near(t, "patchify", got, []float64{0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15}, 0)
	z, err := bk.Unpatchify(y, p)
	near(t, "round trip", values(t, bk, z, err), f64(v), 0)
	if _, err := bk.Patchify(x, exec.PatchParams{Patch: 3}); err == nil {
		t.Error("patch 3 of 2×4 accepted")
	}
}

func TestTimestepAndRopeTableOps(t *testing.T) {
	bk := New(2)
	ts := up(t, bk, f32, []int{1}, 1)
	y, err := bk.TimestepEmbed(ts, exec.TimestepParams{Dim: 4, Scale: 1, MaxPeriod: 10000, FlipSinToCos: true}, exec.Out(precision.BF16))
	got := values(t, bk, y, err)
	want := []float32{precision.RoundBF16(float32(math.Cos(1))), precision.RoundBF16(float32(math.Cos(0.01))), precision.RoundBF16(float32(math.Sin(1))), precision.RoundBF16(float32(math.Sin(0.01)))}
	same(t, "timestep bf16", got, want)
	pos := up(t, bk, f32, []int{2, 1}, 0, 1)
	cs, sn, err := bk.RopeTable(pos, exec.RopeTableParams{Theta: 10000, AxesDims: []int{2}, Layout: exec.RopeHalf, FreqFormat: f32, AngleFormat: f32}, exec.Out(f32))
	near(t, "cos", values(t, bk, cs, err), []float64{1, 1, math.Cos(1), math.Cos(1)}, 1e-7)
	near(t, "sin", values(t, bk, sn, err), []float64{0, 0, math.Sin(1), math.Sin(1)}, 1e-7)
}

func TestRefusals(t *testing.T) {
	bk := New(2)
	x := up(t, bk, f32, []int{2}, 1, 2)
	if _, err := bk.Add(x, foreign{}, exec.Out(f32)); !errors.Is(err, exec.ErrUnsupported) {
		t.Errorf("foreign tensor: %v, want ErrUnsupported", err)
	}
	if _, err := bk.Add(x, x, exec.Spec{}); err == nil {
		t.Error("zero Spec accepted")
	}
	if _, err := bk.Upload([]float32{1, 2, 3}, []int{2}, f32); err == nil {
		t.Error("3 values for shape [2] accepted")
	}
	if _, err := bk.Upload(nil, []int{-1}, f32); err == nil {
		t.Error("negative dimension accepted")
	}
	y, _ := bk.Add(x, x, exec.Out(f32))
	bk.Free(y)
	if _, err := bk.Download(y); err == nil {
		t.Error("freed tensor downloaded")
	}
	if _, err := bk.Norm(x, nil, nil, exec.NormParams{}, exec.Out(f32)); !errors.Is(err, exec.ErrUnsupported) {
		t.Errorf("norm kind 0: %v, want ErrUnsupported", err)
	}
}

type foreign struct{}

func (foreign) Shape() []int             { return []int{2} }
func (foreign) Format() precision.Format { return f32 }

// TestMinimumMaximum: torch.minimum and torch.maximum, broadcast, NaN
// where either side is; together a clamp to scalar bounds.
func TestMinimumMaximum(t *testing.T) {
	bk := New(2)
	nan := float32(math.NaN())
	x := up(t, bk, f32, []int{2, 3}, -3, -0.5, 0.25, 2, nan, 7)
	hi := up(t, bk, f32, []int{1}, 1.5)
	lo := up(t, bk, f32, []int{1}, -1)
	for _, c := range []struct {
		name string
		op   func(a, b exec.Tensor, s exec.Spec) (exec.Tensor, error)
		b    exec.Tensor
		want []float64
	}{
		{"minimum", bk.Minimum, hi, []float64{-3, -0.5, 0.25, 1.5, math.NaN(), 1.5}},
		{"maximum", bk.Maximum, lo, []float64{-1, -0.5, 0.25, 2, math.NaN(), 7}},
	} {
		y, err := c.op(x, c.b, exec.Out(f32))
		got := values(t, bk, y, err)
		for i := range c.want {
			if g := float64(got[i]); math.IsNaN(c.want[i]) != math.IsNaN(g) || !math.IsNaN(c.want[i]) && g != c.want[i] {
				t.Errorf("%s[%d] = %v, want %v", c.name, i, got[i], c.want[i])
			}
		}
	}
	// NaN in the second argument too
	y, err := bk.Minimum(hi, up(t, bk, f32, []int{1}, nan), exec.Out(f32))
	if got := values(t, bk, y, err); !math.IsNaN(float64(got[0])) {
		t.Errorf("minimum(1.5, NaN) = %v, want NaN", got[0])
	}
}
