package synth

import (
	"math"
	"testing"
)

func TestMaskConstant(t *testing.T) {
	lowest := float32(-math.MaxFloat32) // finfo(float32).min
	negZero := float32(math.Copysign(0, -1))
	for _, tc := range []struct {
		name   string
		mask   []float32
		target []float32
		zeroAt float32
		want   float32
		ok     bool
	}{
		{"(1 − m)·finfo.min", []float32{1, 0, 1, 0}, []float32{negZero, lowest, negZero, lowest}, 1, lowest, true},
		{"(1 − m)·−10000", []float32{1, 1, 0}, []float32{0, 0, -10000}, 1, -10000, true},
		{"m·c", []float32{1, 0, 0}, []float32{5, 0, 0}, 0, 5, true},
		{"zero where the mask is 0: not 1 − m", []float32{1, 0, 0}, []float32{5, 0, 0}, 1, 0, false},
		{"two values where the mask is 0", []float32{1, 0, 0}, []float32{0, -1, -2}, 1, 0, false},
		{"a mask of ones shows no c", []float32{1, 1}, []float32{0, 0}, 1, 0, false},
		{"NaN is no constant", []float32{1, 0}, []float32{0, float32(math.NaN())}, 1, 0, false},
	} {
		c, ok := maskConstant(&val{data: tc.target}, &val{data: tc.mask}, tc.zeroAt)
		if ok != tc.ok || ok && c != tc.want {
			t.Errorf("%s: maskConstant = %v, %v; want %v, %v", tc.name, c, ok, tc.want, tc.ok)
		}
	}
}
