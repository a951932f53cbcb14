package exec

import (
	"errors"
	"math"
	"reflect"
	"testing"

	"github.com/zflow/zflow/precision"
)

// TestALiBiSlopes checks the slopes against BLOOM's build_alibi_tensor,
// worked out exactly (rational arithmetic, rounded to f32 once per power):
// 4 heads are 2^(−2k), k = 1…4; 6 heads add the odd powers 1, 3 of the
// extra base 1/2 for the two remaining heads; 12 heads are base 1/2 for
// eight, then the odd powers 1, 3, 5, 7 of f32(2^−0.5) = 0x3f3504f3; 16
// heads have the f32 base 2^−0.5 itself, so their even powers fall just
// below the powers of 1/2 (0x3effffff, not 0.5), as torch.pow gives them.
func TestALiBiSlopes(t *testing.T) {
	bits := func(b ...uint32) []float32 {
		out := make([]float32, len(b))
		for i, x := range b {
			out[i] = math.Float32frombits(x)
		}
		return out
	}
	cases := []struct {
		heads int
		want  []float32
	}{
		{1, []float32{0.00390625}}, // n = 1: base 2^−8
		{2, []float32{0.0625, 0.00390625}},
		{4, []float32{0.25, 0.0625, 0.015625, 0.00390625}},
		{6, []float32{0.25, 0.0625, 0.015625, 0.00390625, 0.5, 0.125}},
		{12, append([]float32{0.5, 0.25, 0.125, 0.0625, 0.03125, 0.015625, 0.0078125, 0.00390625},
			bits(0x3f3504f3, 0x3eb504f3, 0x3e3504f2, 0x3db504f2)...)},
		{16, bits(0x3f3504f3, 0x3effffff, 0x3eb504f3, 0x3e7fffff, 0x3e3504f2, 0x3dfffffe, 0x3db504f2, 0x3d7ffffe,
			0x3d3504f1, 0x3cfffffd, 0x3cb504f1, 0x3c7ffffd, 0x3c3504f1, 0x3bfffffc, 0x3bb504f0, 0x3b7ffffb)},
		{24, bits(0x3f3504f3, 0x3effffff, 0x3eb504f3, 0x3e7fffff, 0x3e3504f2, 0x3dfffffe, 0x3db504f2, 0x3d7ffffe,
			0x3d3504f1, 0x3cfffffd, 0x3cb504f1, 0x3c7ffffd, 0x3c3504f1, 0x3bfffffc, 0x3bb504f0, 0x3b7ffffb,
			0x3f5744fd, 0x3f1837f1, 0x3ed744fe, 0x3e9837f1, 0x3e5744ff, 0x3e1837f2, 0x3dd744ff, 0x3d9837f3)},
	}
	for _, c := range cases {
		got := ALiBiSlopes(c.heads)
		if len(got) != len(c.want) {
			t.Fatalf("%d heads: %d slopes, want %d", c.heads, len(got), len(c.want))
		}
		for i := range got {
			if math.Float32bits(got[i]) != math.Float32bits(c.want[i]) {
				t.Errorf("%d heads: slope %d = %v (%#x), want %v (%#x)", c.heads, i, got[i], math.Float32bits(got[i]), c.want[i], math.Float32bits(c.want[i]))
			}
		}
	}
	// The bias is f32(slope·j) rounded to q's format: 0x3db504f2·11 in bf16.
	if got, want := ALiBiBias(math.Float32frombits(0x3db504f2), 11, precision.BF16), float32(0.97265625); got != want {
		t.Errorf("bias of slope 0.0884 at key 11 in bf16: %v, want %v", got, want)
	}
}

func TestBiasStrides(t *testing.T) {
	// Target [B=2, H=3, Sq=4, Sk=5].
	cases := []struct {
		shape, want []int
	}{
		{[]int{2, 3, 4, 5}, []int{60, 20, 5, 1}},
		{[]int{2, 1, 4, 5}, []int{20, 0, 5, 1}},
		{[]int{1, 3, 1, 5}, []int{0, 5, 0, 1}},
		{[]int{4, 5}, []int{0, 0, 5, 1}},
		{[]int{5}, []int{0, 0, 0, 1}},
		{[]int{6, 1, 5}, []int{15, 5, 0, 1}}, // [B·H, 1, Sk]: ALiBi's layout
		{[]int{6, 4, 5}, []int{60, 20, 5, 1}},
		{[]int{1, 4, 5}, []int{0, 0, 5, 1}},
		{[]int{2, 3, 4, 1}, []int{12, 4, 1, 0}},
	}
	for _, c := range cases {
		got, err := BiasStrides(c.shape, 2, 3, 4, 5)
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("bias %v: strides %v (%v), want %v", c.shape, got, err, c.want)
		}
	}
	for _, bad := range [][]int{{3, 4, 5}, {2, 3, 4, 6}, {2, 2, 4, 5}, {1, 2, 3, 4, 5}, {2, 4, 5, 1}} {
		if st, err := BiasStrides(bad, 2, 3, 4, 5); err == nil {
			t.Errorf("bias %v accepted for [2 3 4 5] (strides %v)", bad, st)
		}
	}
}

type shaped []int

func (s shaped) Shape() []int             { return s }
func (s shaped) Format() precision.Format { return precision.F32 }

func TestCheckAttention(t *testing.T) {
	q, kv := shaped{1, 4, 32}, shaped{1, 6, 16}
	p := AttentionParams{Heads: 4, KVHeads: 2}
	a, err := CheckAttention(q, kv, kv, nil, shaped{4, 1, 6}, nil, p)
	if err != nil {
		t.Fatal(err)
	}
	if a.D != 8 || a.Scale != float32(1/math.Sqrt(8)) || !reflect.DeepEqual(a.BiasStrides, []int{24, 6, 0, 1}) || a.MaskStrides != nil {
		t.Errorf("checked %+v", a)
	}
	// the default scale is 1/√D in float64 rounded once (PyTorch's), an
	// ulp from 1/f32(√D) at D = 24, 72, 96, 112 (NumPy: np.float32(1/math.sqrt(D)))
	for d, bits := range map[int]uint32{24: 0x3e5105ec, 72: 0x3df15bef, 96: 0x3dd105ec, 112: 0x3dc1848f, 128: 0x3db504f3} {
		a, err := CheckAttention(shaped{1, 2, d}, shaped{1, 2, d}, shaped{1, 2, d}, nil, nil, nil, AttentionParams{Heads: 1})
		if err != nil || math.Float32bits(a.Scale) != bits {
			t.Errorf("D %d: scale %#x (%v), want %#x", d, math.Float32bits(a.Scale), err, bits)
		}
	}
	w := p
	w.Mask, w.Window = MaskCausal, 3
	if _, err := CheckAttention(q, kv, kv, nil, nil, nil, w); err != nil {
		t.Errorf("causal window 3: %v", err)
	}
	if _, err := CheckAttention(q, kv, kv, nil, nil, nil, AttentionParams{Heads: 4, KVHeads: 2, Window: 3}); err != nil {
		t.Errorf("band of 3: %v", err)
	}
	unsupported := []AttentionParams{
		{Heads: 4, KVHeads: 2, Mask: MaskExplicit, Window: 3},
		{Heads: 4, KVHeads: 2, Mask: MaskKind(9)},
	}
	for _, up := range unsupported {
		var m Tensor
		if up.Mask == MaskExplicit {
			m = shaped{1, 4, 6}
		}
		if _, err := CheckAttention(q, kv, kv, m, nil, nil, up); !errors.Is(err, ErrUnsupported) {
			t.Errorf("%+v: %v, want ErrUnsupported", up, err)
		}
	}
	if _, err := CheckAttention(q, kv, kv, nil, nil, shaped{4}, p); err != nil {
		t.Errorf("a sink per head: %v", err)
	}
	invalid := []struct {
		p                 AttentionParams
		mask, bias, sinks Tensor
	}{
		{AttentionParams{Heads: 4, Mask: MaskCausal, Window: -1}, nil, nil, nil},
		{AttentionParams{Heads: 4, Softcap: -5}, nil, nil, nil},
		{AttentionParams{Heads: 4, Softcap: float32(math.Inf(1))}, nil, nil, nil},
		{AttentionParams{Heads: 4, Softcap: float32(math.NaN())}, nil, nil, nil},
		{AttentionParams{Heads: 4, Mask: MaskExplicit}, nil, nil, nil},
		{AttentionParams{Heads: 4}, shaped{1, 4, 6}, nil, nil},
		{AttentionParams{Heads: 4}, nil, shaped{3, 4, 6}, nil},
		{AttentionParams{Heads: 4}, nil, nil, shaped{2}},
		{AttentionParams{Heads: 4}, nil, nil, shaped{1, 4, 1, 1}},
	}
	for _, c := range invalid {
		if _, err := CheckAttention(q, shaped{1, 6, 32}, shaped{1, 6, 32}, c.mask, c.bias, c.sinks, c.p); err == nil || errors.Is(err, ErrUnsupported) {
			t.Errorf("%+v mask %v bias %v sinks %v: %v, want a validation error", c.p, c.mask, c.bias, c.sinks, err)
		}
	}
}
