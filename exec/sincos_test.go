package exec

import (
	"math"
	"testing"
)

// cudaSinCos are angles with sinf and cosf as an H200 computed them
// (torch 2.11, read off the flux-bf16 conformance trace's timestep
// sinusoid), each one where a correctly rounded sin or cos differs.
var cudaSinCos = [][3]uint32{
	{0x443B793B, 0x3F4FB31D, 0xBF15A7E2}, // a=749.8942
	{0x4422586D, 0x3F4CE98A, 0xBF197341}, // a=649.38165
	{0x440C95D8, 0x3B777D4E, 0xBF7FFF88}, // a=562.3413
	{0x43F37BD7, 0xBCA90CD9, 0xBF7FF20B}, // a=486.9675
	{0x43B6964A, 0x3F2E6267, 0x3F3B6B68}, // a=365.17413
	{0x4388EBC5, 0xBEFFE825, 0xBF5DBABA}, // a=273.84195
	{0x435CAC65, 0x3F30B8C6, 0x3F39379C}, // a=220.67342
	{0x433F1865, 0x3F0406F4, 0xBF5B5401}, // a=191.09529
	{0x430F4D1F, 0xBF6FB2DC, 0x3EB3C8A4}, // a=143.30125
	{0x428B90ED, 0x3F1E9323, 0x3F48F907}, // a=69.78306
	{0x4271B7F3, 0xBF2C8000, 0xBF3D27C7}, // a=60.429638
	{0x425151D4, 0x3F61702E, 0xBEF29972}, // a=52.32991
	{0x41B089EA, 0xBD9BE40E, 0xBF7F41DD}, // a=22.06734
	{0x418E432A, 0xBF6029FF, 0x3EF746ED}, // a=17.782795
	{0x418462A9, 0xBF3EAA25, 0xBF2AD491}, // a=16.548174
	{0x4138C3DC, 0xBF59F214, 0x3F064C0F}, // a=11.547817
	{0x41200000, 0xBF0B44F7, 0xBF56CD65}, // a=10
	{0x410A8DE7, 0x3F31506F, 0xBF38A670}, // a=8.659644
	{0x4100EF4A, 0x3F7AAB39, 0xBE4FE3CE}, // a=8.05842
	{0x40DF4E47, 0x3F23F658, 0x3F449A21}, // a=6.9783053
	{0x40CFCD59, 0x3E56186C, 0x3F7A5798}, // a=6.493817
	{0x40A774A9, 0xBF5E15CB, 0x3EFEAB82}, // a=5.2329907
	{0x409BD461, 0xBF7CD706, 0x3E2065D6}, // a=4.869675
	{0x409102BD, 0xBF7BD3B8, 0xBE38230E}, // a=4.5315843
}

func TestSinCosCUDA(t *testing.T) {
	for _, c := range cudaSinCos {
		a := math.Float32frombits(c[0])
		if got := math.Float32bits(SinCUDA(a)); got != c[1] {
			t.Errorf("SinCUDA(%v) = %#08x, want %#08x", a, got, c[1])
		}
		if got := math.Float32bits(CosCUDA(a)); got != c[2] {
			t.Errorf("CosCUDA(%v) = %#08x, want %#08x", a, got, c[2])
		}
	}
	// everywhere else within CUDA's documented 2 ulps of the true values,
	// the Payne–Hanek range included; NaN for ±Inf and NaN
	for _, a := range []float32{0, 1e-30, 0.5, -1, 3.1415927, 100, -1234.5, 105614, 105615, -3e5, 1e7, 3.4e38} {
		for _, f := range []struct {
			name string
			got  float32
			want float64
		}{{"sin", SinCUDA(a), math.Sin(float64(a))}, {"cos", CosCUDA(a), math.Cos(float64(a))}} {
			want := float32(f.want)
			if d := math.Abs(float64(f.got) - f.want); d > 2*ulp32(want) {
				t.Errorf("%s(%v) = %v, want %v within 2 ulps", f.name, a, f.got, want)
			}
		}
	}
	for _, a := range []float32{float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN())} {
		if !math.IsNaN(float64(SinCUDA(a))) || !math.IsNaN(float64(CosCUDA(a))) {
			t.Errorf("sin/cos(%v) is not NaN", a)
		}
	}
}

func ulp32(x float32) float64 {
	x = float32(math.Abs(float64(x)))
	return float64(math.Nextafter32(x, float32(math.Inf(1))) - x)
}
