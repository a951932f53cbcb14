package exec

import (
	"math"
	"reflect"
	"slices"
	"testing"

	"github.com/zflow/zflow/precision"
)

func TestBroadcast(t *testing.T) {
	cases := []struct {
		a, b, want []int
		ok         bool
	}{
		{[]int{2, 3}, []int{3}, []int{2, 3}, true},
		{[]int{2, 1}, []int{1, 3}, []int{2, 3}, true},
		{[]int{1, 36, 64}, []int{1, 1, 64}, []int{1, 36, 64}, true},
		{[]int{}, []int{4}, []int{4}, true},
		{[]int{2, 3}, []int{2}, nil, false},
	}
	for _, c := range cases {
		got, err := Broadcast(c.a, c.b)
		if (err == nil) != c.ok || c.ok && !reflect.DeepEqual(got, c.want) {
			t.Errorf("Broadcast(%v, %v) = %v, %v; want %v ok=%v", c.a, c.b, got, err, c.want, c.ok)
		}
	}
}

func TestCondShape(t *testing.T) {
	cases := []struct{ c, x, want []int }{
		{[]int{1, 64}, []int{1, 36, 64}, []int{1, 1, 64}},    // [B, D] over [B, S, D]
		{[]int{1, 1, 64}, []int{1, 36, 64}, []int{1, 1, 64}}, // already broadcastable
		{[]int{64}, []int{36, 64}, []int{64}},                // rank 2: NumPy rules
	}
	for _, c := range cases {
		if got := CondShape(c.c, c.x); !reflect.DeepEqual(got, c.want) {
			t.Errorf("CondShape(%v, %v) = %v, want %v", c.c, c.x, got, c.want)
		}
	}
}

func TestChunkSizes(t *testing.T) {
	// torch.chunk: pieces of ceil(dim/n); fewer pieces when dim runs out.
	cases := []struct {
		dim, n int
		want   []int
	}{
		{384, 6, []int{64, 64, 64, 64, 64, 64}},
		{5, 3, []int{2, 2, 1}},
		{6, 4, []int{2, 2, 2}},
		{1, 2, []int{1}},
	}
	for _, c := range cases {
		got, _, err := ChunkSizes([]int{2, c.dim}, c.n, -1)
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("chunk %d into %d = %v, %v; want %v", c.dim, c.n, got, err, c.want)
		}
	}
	if _, _, err := ChunkSizes([]int{4}, 0, 0); err == nil {
		t.Error("chunk into 0 pieces accepted")
	}
}

func TestSpecStrings(t *testing.T) {
	for r := Round(0); r < roundEnd; r++ {
		got, err := ParseRound(r.String())
		if err != nil || got != r {
			t.Fatalf("ParseRound(%q) = %v, %v; want %v", r.String(), got, err, r)
		}
	}
	for m := Math(0); m <= mathAll; m++ {
		got, err := ParseMath(m.String())
		if err != nil || got != m {
			t.Fatalf("ParseMath(%q) = %v, %v; want %v", m.String(), got, err, m)
		}
	}
	if _, err := ParseRound("sometimes"); err == nil {
		t.Error("ParseRound accepted an unknown point")
	}
	for a := ActKind(0); a < actEnd; a++ {
		if got, err := ParseAct(a.String()); err != nil || got != a {
			t.Errorf("ParseAct(%q) = %v, %v", a.String(), got, err)
		}
	}
	bad := []Spec{{}, {Out: precision.BF16, Round: roundEnd}, {Out: precision.F32, Math: mathAll + 1}}
	for _, s := range bad {
		if s.Check() == nil {
			t.Errorf("Spec %+v passed Check", s)
		}
	}
	s := Composed(precision.BF16)
	if !s.Has(RoundProduct) || !s.Has(RoundScale) || Out(precision.BF16).Has(RoundProduct) {
		t.Error("RoundEach must include every point, Out none")
	}
}

func TestActivateHandComputed(t *testing.T) {
	cases := []struct {
		f    ActKind
		x    float32
		want float64
	}{
		{ActIdentity, -3, -3},
		{ActSiLU, 1, 0.7310585786300049},
		{ActSiLU, -1, -0.2689414213699951},
		{ActGELUTanh, 1, 0.8411919906082768},
		{ActGELUTanh, -2, -0.04540230591222276},
		{ActGELUErf, 1, 0.8413447460685429},
		{ActTanh, 0.5, 0.46211715726000974},
		{ActSigmoid, 0, 0.5},
		{ActSigmoid, 2, 0.8807970779778823},
		{ActReLU, -2, 0},
		{ActReLU, 2, 2},
	}
	for _, c := range cases {
		for _, m := range []Math{MathPrecise, MathFastExp} {
			got := float64(Activate(c.f, c.x, m))
			if math.Abs(got-c.want) > 4e-7*math.Max(1, math.Abs(c.want)) {
				t.Errorf("%v(%g) [%v] = %.9g, want %.9g", c.f, c.x, m, got, c.want)
			}
		}
	}
}

func TestTimestepEmbeddingHandComputed(t *testing.T) {
	// dim 4: half 2, frequencies exp(−ln(10000)·i/2) = 1, 0.01.
	p := TimestepParams{Dim: 4, Scale: 1, MaxPeriod: 10000}
	got, err := TimestepEmbedding([]float32{0, 1}, p, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := []float64{0, 0, 1, 1, math.Sin(1), math.Sin(0.01), math.Cos(1), math.Cos(0.01)}
	approx(t, "sin first", got, want, 1e-7)
	p.FlipSinToCos = true
	got, _ = TimestepEmbedding([]float32{1}, p, 0)
	approx(t, "flipped", got, []float64{math.Cos(1), math.Cos(0.01), math.Sin(1), math.Sin(0.01)}, 1e-7)
	// freq shift 1: exponent/(half − 1), so the second frequency is 1e−4;
	// scale 1000 multiplies the arguments; odd dim pads one zero.
	p = TimestepParams{Dim: 5, FreqShift: 1, Scale: 1000, MaxPeriod: 10000}
	got, _ = TimestepEmbedding([]float32{0.5}, p, 0)
	approx(t, "shift, scale, odd", got, []float64{math.Sin(500), math.Sin(0.05), math.Cos(500), math.Cos(0.05), 0}, 3e-5)
	if _, err := TimestepEmbedding([]float32{1}, TimestepParams{Dim: 4, MaxPeriod: 10000}, 0); err == nil {
		t.Error("scale 0 accepted")
	}
}

// TestTimestepFreqOverrides: an override replaces exactly its frequency
// (its sine and cosine columns move, no other), and one outside the table
// or not finite is refused.
func TestTimestepFreqOverrides(t *testing.T) {
	p := TimestepParams{Dim: 8, FlipSinToCos: true, Scale: 1, MaxPeriod: 10000}
	base, err := TimestepEmbedding([]float32{6000}, p, 0)
	if err != nil {
		t.Fatal(err)
	}
	freqs, _ := TimestepFreqs(p, 0)
	up := math.Nextafter32(freqs[1], 2)
	p.FreqOverrides = []FreqOverride{{Index: 1, Value: up}}
	got, err := TimestepEmbedding([]float32{6000}, p, 0)
	if err != nil {
		t.Fatal(err)
	}
	a := float32(6000) * up
	for c := range got {
		want := base[c]
		switch c {
		case 1: // cos of frequency 1 ([cos, sin])
			want = float32(math.Cos(float64(a)))
		case 5:
			want = float32(math.Sin(float64(a)))
		}
		if got[c] != want {
			t.Errorf("column %d = %.9g, want %.9g", c, got[c], want)
		}
	}
	if got[1] == base[1] {
		t.Error("one ulp of f1 at t = 6000 left cos unchanged: the test shows nothing")
	}
	for _, o := range []FreqOverride{{Index: 4, Value: 1}, {Index: -1, Value: 1}, {Index: 0, Value: float32(math.Inf(1))}} {
		p.FreqOverrides = []FreqOverride{o}
		if _, err := TimestepEmbedding([]float32{1}, p, 0); err == nil {
			t.Errorf("override %+v accepted", o)
		}
	}
}

func TestRopeTablesHandComputed(t *testing.T) {
	// One axis of width 4, θ = 100: frequencies 1 and 100^(−1/2) = 0.1.
	p := RopeTableParams{Theta: 100, AxesDims: []int{4}, Layout: RopeInterleaved, FreqFormat: precision.F64, AngleFormat: precision.F64}
	cos, sin, err := RopeTables([]float32{0, 2}, 2, p, MathPrecise)
	if err != nil {
		t.Fatal(err)
	}
	approx(t, "cos interleaved", cos, []float64{1, 1, 1, 1, math.Cos(2), math.Cos(2), math.Cos(0.2), math.Cos(0.2)}, 1e-7)
	approx(t, "sin interleaved", sin, []float64{0, 0, 0, 0, math.Sin(2), math.Sin(2), math.Sin(0.2), math.Sin(0.2)}, 1e-7)
	p.Layout = RopeHalf
	cos, _, _ = RopeTables([]float32{2}, 1, p, MathPrecise)
	approx(t, "cos half", cos, []float64{math.Cos(2), math.Cos(0.2), math.Cos(2), math.Cos(0.2)}, 1e-7)
	// Two axes: tables concatenated per axis.
	p = RopeTableParams{Theta: 100, AxesDims: []int{2, 2}, Layout: RopeInterleaved, FreqFormat: precision.F32, AngleFormat: precision.F32}
	cos, _, _ = RopeTables([]float32{1, 3}, 1, p, MathPrecise)
	approx(t, "two axes", cos, []float64{math.Cos(1), math.Cos(1), math.Cos(3), math.Cos(3)}, 1e-7)
	// bf16 frequencies: 0.1 rounds to 0.10009765625.
	p = RopeTableParams{Theta: 100, AxesDims: []int{4}, Layout: RopeHalf, FreqFormat: precision.BF16, AngleFormat: precision.F32}
	cos, _, _ = RopeTables([]float32{10}, 1, p, MathPrecise)
	approx(t, "bf16 freq", cos[1:2], []float64{math.Cos(float64(float32(10 * 0.10009765625)))}, 1e-7)
}

func approx(t *testing.T, name string, got []float32, want []float64, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", name, len(got), len(want))
	}
	for i, w := range want {
		if math.Abs(float64(got[i])-w) > tol*math.Max(1, math.Abs(w)) {
			t.Errorf("%s[%d] = %.9g, want %.9g", name, i, got[i], w)
		}
	}
}

func TestEulerParamsTimesteps(t *testing.T) {
	p := EulerParams{Sigmas: []float32{1, 0.75, 0.4, 0}, Sign: 1, Timestep: TimestepTransform{Scale: 1000, Format: precision.BF16}, Spec: Out(precision.BF16)}
	// 1000, 750 → 752 in bf16 (750/4 = 187.5, ties to even 188), 400.
	if got := p.Timesteps(); !reflect.DeepEqual(got, []float32{1000, 752, 400}) {
		t.Errorf("timesteps %v", got)
	}
	p.Sign = 2
	if p.check() == nil {
		t.Error("sign 2 accepted")
	}
}

// TestTimestepF64SinCos: under MathF64SinCos the table is made as a float64
// program makes it (ω_i = 1/P^(i/half), angles t·ω_i, sin and cos in
// float64, one rounding to f32), which differs from the f32 arithmetic at
// some positions: the variant is not a relabelling.
func TestTimestepF64SinCos(t *testing.T) {
	p := TimestepParams{Dim: 6, Scale: 1, MaxPeriod: 10000}
	var ts []float32
	for i := range 64 {
		ts = append(ts, float32(i)*0.5)
	}
	got, err := TimestepEmbedding(ts, p, MathF64SinCos)
	if err != nil {
		t.Fatal(err)
	}
	f32, _ := TimestepEmbedding(ts, p, MathPrecise)
	differ := 0
	for n, tn := range ts {
		for i := range 3 {
			w := 1 / math.Pow(10000, float64(i)/3)
			a := float64(tn) * w
			if s, c := got[n*6+i], got[n*6+3+i]; s != float32(math.Sin(a)) || c != float32(math.Cos(a)) {
				t.Fatalf("t=%g, frequency %d: (%.9g, %.9g), want (%.9g, %.9g)", tn, i, s, c, float32(math.Sin(a)), float32(math.Cos(a)))
			}
		}
		for c := range 6 {
			if got[n*6+c] != f32[n*6+c] {
				differ++
			}
		}
	}
	if differ == 0 {
		t.Error("the float64 table equals the f32 one everywhere: the test shows nothing")
	}
	if m, err := ParseMath("f64_sincos"); err != nil || m != MathF64SinCos {
		t.Errorf("ParseMath(f64_sincos) = %v, %v", m, err)
	}
}

// TestRopeTablesCUDASinCos: with f32 angles, MathCUDASinCos takes cos and
// sin as CUDA's cosf and sinf (CosCUDA, SinCUDA) of the f32 angle; f64
// angles are not changed by it.
func TestRopeTablesCUDASinCos(t *testing.T) {
	pos := []float32{0, 1, 7, 63, 200}
	p := RopeTableParams{Theta: 10000, AxesDims: []int{8}, Layout: RopeHalf, FreqFormat: precision.F32, AngleFormat: precision.F32}
	cos, sin, err := RopeTables(pos, len(pos), p, MathCUDASinCos)
	if err != nil {
		t.Fatal(err)
	}
	freqs, _ := ropeFreqs(8, 10000, precision.F32)
	for s, x := range pos {
		for i, f := range freqs {
			a := x * float32(f)
			if cos[s*8+i] != CosCUDA(a) || sin[s*8+4+i] != SinCUDA(a) {
				t.Errorf("position %g frequency %d: (%.9g, %.9g), want (%.9g, %.9g)", x, i, cos[s*8+i], sin[s*8+4+i], CosCUDA(a), SinCUDA(a))
			}
		}
	}
	p.FreqFormat, p.AngleFormat = precision.F64, precision.F64
	a, _, _ := RopeTables(pos, len(pos), p, MathCUDASinCos)
	b, _, _ := RopeTables(pos, len(pos), p, MathPrecise)
	if !slices.Equal(a, b) {
		t.Error("f64 angles changed by MathCUDASinCos")
	}
}

// TestActSinCosCUDA: act sin and cos under MathCUDASinCos are CUDA's sinf
// and cosf (SinCUDA, CosCUDA), and correctly rounded without it.
func TestActSinCosCUDA(t *testing.T) {
	for _, x := range []float32{0.5, 1, 3.25, 100.125, -7} {
		gpu := Spec{Out: precision.F32, Math: MathCUDASinCos}
		if got := ActivateSpec(ActSin, x, gpu); got != SinCUDA(x) {
			t.Errorf("sin(%g) = %08x, want %08x", x, math.Float32bits(got), math.Float32bits(SinCUDA(x)))
		}
		if got := ActivateSpec(ActCos, x, gpu); got != CosCUDA(x) {
			t.Errorf("cos(%g) = %08x, want %08x", x, math.Float32bits(got), math.Float32bits(CosCUDA(x)))
		}
		if got := ActivateSpec(ActSin, x, Spec{Out: precision.F32}); got != float32(math.Sin(float64(x))) {
			t.Errorf("precise sin(%g) = %g", x, got)
		}
	}
}
