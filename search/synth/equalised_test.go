package synth

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/precision"
)

// conv2dRef is conv2d(x [B, C, H, W], w [O, C/g, k, k]) with zero
// padding pad, stride st and g groups, in float64, rounded once: the
// tests' own arithmetic, independent of the ops'.
func conv2dRef(x, w *val, pad, st, g int) *val {
	B, C, H, W := x.shape[0], x.shape[1], x.shape[2], x.shape[3]
	O, cg, k := w.shape[0], w.shape[1], w.shape[2]
	ho, wo := (H+2*pad-k)/st+1, (W+2*pad-k)/st+1
	out := &val{shape: []int{B, O, ho, wo}, data: make([]float32, B*O*ho*wo), format: precision.F32}
	for b := range B {
		for o := range O {
			grp := o / (O / g)
			for i := range ho {
				for j := range wo {
					var sum float64
					for c := range cg {
						ci := grp*cg + c
						for u := range k {
							for v := range k {
								y, z := i*st+u-pad, j*st+v-pad
								if y < 0 || y >= H || z < 0 || z >= W {
									continue
								}
								sum += float64(x.data[((b*C+ci)*H+y)*W+z]) * float64(w.data[((o*cg+c)*k+u)*k+v])
							}
						}
					}
					out.data[((b*O+o)*ho+i)*wo+j] = float32(sum)
				}
			}
		}
	}
	return out
}

// scaledParam is w's entries times c in f32, as a forward's
// self.weight * self.scale makes them.
func scaledParam(w *val, c float64) *val {
	out := &val{shape: w.shape, data: make([]float32, len(w.data)), format: precision.F32}
	for i, v := range w.data {
		out.data[i] = v * float32(c)
	}
	return out
}

// opsOf are the ops on the chain of first arguments from v back.
func opsOf(v *val) map[program.Op]bool {
	ops := map[program.Op]bool{}
	for ; v != nil && v.from != nil && len(v.from.args) > 0; v = v.from.args[0] {
		ops[v.from.op] = true
	}
	return ops
}

// TestOwnConv: a convolution by a weight of the call's own scaled by
// 1/√fan_in (StyleGAN's equalised learning rate) is read with the weight
// scaled; the same weight used as stored is read without.
func TestOwnConv(t *testing.T) {
	rng := rand.New(rand.NewPCG(40, 1))
	x := randVal(rng, 1, 3, 6, 6)
	w := randVal(rng, 4, 3, 3, 3)
	w.param, w.origin = true, "weight"
	for _, tc := range []struct {
		name   string
		scale  float64
		scaled bool
	}{
		{"equalised", 1 / math.Sqrt(27), true},
		{"as stored", 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := conv2dRef(x, scaledParam(w, tc.scale), 1, 1, 1)
			s, sc, target := planted(t, precision.F32, want.shape, want.data, x, w)
			got := s.ownConv(target, sc, sc.vals)
			explainedWithin(t, got, target)
			if got == nil {
				return
			}
			scaled := slices.ContainsFunc(got.from.args, func(a *val) bool { return a != nil && a.from != nil && a.from.op == program.OpMul })
			if scaled != tc.scaled {
				t.Errorf("weight scaled %v, want %v", scaled, tc.scaled)
			}
		})
	}
}

// TestBlurredConv: StyleGAN's [1, 3, 3, 1] blur (a 4×4 kernel no
// parameter holds, padded 2, channel by channel) before a strided
// equalised convolution: the taps are read off the values as n/64, and
// values filtered by a kernel of no simple ratios are not read as one.
func TestBlurredConv(t *testing.T) {
	rng := rand.New(rand.NewPCG(40, 2))
	const C = 2
	x := randVal(rng, 1, C, 8, 8)
	w := randVal(rng, 3, C, 3, 3)
	w.param, w.origin = true, "weight"
	taps := []float64{1, 3, 3, 1}
	blur := &val{shape: []int{C, 1, 4, 4}, data: make([]float32, C*16), format: precision.F32}
	for c := range C {
		for u := range 4 {
			for v := range 4 {
				blur.data[c*16+u*4+v] = float32(taps[u] * taps[v] / 64)
			}
		}
	}
	want := conv2dRef(conv2dRef(x, blur, 2, 1, C), scaledParam(w, 1/math.Sqrt(18)), 0, 2, 1)
	s, sc, target := planted(t, precision.F32, want.shape, want.data, x, w)
	got := s.ownConv(target, sc, sc.vals)
	explainedWithin(t, got, target)
	var filter *val
	for v := got; v != nil && v.from != nil && len(v.from.args) > 0; v = v.from.args[0] {
		if v.from.op == program.OpConv2D && v.from.attrs.Conv.Groups == C && v.from.args[1] != nil && len(v.from.args[1].shape) == 4 && v.from.args[1].shape[2] == 4 {
			filter = v.from.args[1]
		}
	}
	if filter == nil {
		t.Fatal("no 4×4 filter per channel before the convolution")
	}
	for i, v := range filter.data[:16] {
		if want := float32(taps[i/4] * taps[i%4] / 64); v != want {
			t.Errorf("tap %d = %v, want %v", i, v, want)
		}
	}
}

// TestQRProjected: a value times Qᵀ of a weight's QR (a linear motion
// decomposition), Q hand-computed with LAPACK's signs (TestHostSteps'
// matrix).
func TestQRProjected(t *testing.T) {
	w := &val{shape: []int{3, 2}, data: []float32{3, 1, 4, 2, 0, 0}, format: precision.F32, origin: "weight", param: true}
	x := &val{shape: []int{2, 2}, data: []float32{0.5, 2, 3, -1.5}, format: precision.F32, origin: "x"}
	// Q = [[−0.6, −0.8], [−0.8, 0.6], [0, 0]]
	want := []float32{-1.9, 0.8, 0, -0.6, -3.3, 0}
	s, sc, target := planted(t, precision.F32, []int{2, 3}, want, x, w)
	got := s.qrProjected(target, sc.vals)
	explainedWithin(t, got, target)
	if !opsOf(got)[program.OpLinear] {
		t.Errorf("ops %v: want x·Qᵀ", opsOf(got))
	}
	// the same value times the weight itself is not a QR basis
	s, sc, target = planted(t, precision.F32, []int{2, 3}, []float32{3.5, 6, 0, 7.5, 9, 0}, x, w)
	if s.qrProjected(target, sc.vals) != nil {
		t.Error("x·Wᵀ read as x·Qᵀ")
	}
}

// TestBiasedPiecewise: StyleGAN's fused leaky ReLU, leaky_relu(x + b,
// 0.2)·√2 with b a parameter along the channels.
func TestBiasedPiecewise(t *testing.T) {
	rng := rand.New(rand.NewPCG(40, 3))
	x := randVal(rng, 2, 4, 3, 3)
	b := randVal(rng, 4)
	b.param = true
	want := make([]float32, len(x.data))
	for i, v := range x.data {
		y := float64(v + b.data[(i/9)%4])
		if y < 0 {
			y *= 0.2
		}
		want[i] = float32(y * math.Sqrt2)
	}
	s, _, target := planted(t, precision.F32, x.shape, want, x)
	got := s.biasedPiecewise(x, b, target)
	explainedWithin(t, got, target)
	if !opsOf(got)[program.OpAdd] && (got == nil || got.from == nil || !slices.ContainsFunc(got.from.args, func(a *val) bool { return a != nil && a.from != nil && a.from.op == program.OpAdd })) {
		t.Error("the bias is not added before the activation")
	}
}

// TestParamTokensJoined: learned tokens [1, 1, 1, D] copied over the
// frames and joined after each frame's rows (a padding token per frame)
// are read as the parameter broadcast along the frames.
func TestParamTokensJoined(t *testing.T) {
	rng := rand.New(rand.NewPCG(40, 4))
	x := randVal(rng, 1, 2, 4, 6)
	p := randVal(rng, 1, 1, 1, 6)
	p.param, p.origin = true, "tokens"
	want := make([]float32, 0, 2*5*6)
	for f := range 2 {
		want = append(want, x.data[f*24:(f+1)*24]...)
		want = append(want, p.data...)
	}
	s, sc, target := planted(t, precision.F32, []int{1, 2, 5, 6}, want, x, p)
	got := s.joined(target, sc, sc.vals)
	explainedWithin(t, got, target)
	if got != nil && (got.from == nil || got.from.op != program.OpConcat) {
		t.Errorf("read as %v, want a join", got.from)
	}
}

// TestSinusoidPeriod: a timestep embedding whose max_period is a
// config's 2000 (T5FilmDecoder's), not 10⁴: the period is read off the
// two lowest frequencies' angles and the embedding reproduced.
func TestSinusoidPeriod(t *testing.T) {
	const dim, half = 32, 16
	x := &val{shape: []int{3}, data: []float32{0.999, 0.749, 0.4}, format: precision.F32, origin: "t"}
	want := make([]float32, 3*dim)
	for n, tn := range x.data {
		for i := range half {
			f := math.Exp(-math.Log(2000) * float64(i) / float64(half-1))
			a := float64(tn) * 2000 * f
			want[n*dim+i], want[n*dim+half+i] = float32(math.Sin(a)), float32(math.Cos(a))
		}
	}
	s, _, target := planted(t, precision.F32, []int{3, dim}, want, x)
	got := s.fitSinusoid(x, target)
	explainedWithin(t, got, target)
	if got != nil && got.from.attrs.Timestep.MaxPeriod != 2000 {
		t.Errorf("max period %v, want 2000", got.from.attrs.Timestep.MaxPeriod)
	}
}

// TestFlatSinusoidPiece: micro-conditions [B, k] embedded entry by entry
// (get_timestep_embedding(v.flatten(), 4, flip_sin_to_cos=True,
// downscale_freq_shift=0).reshape(B, −1)) and joined after a pooled
// vector are read as that join.
func TestFlatSinusoidPiece(t *testing.T) {
	rng := rand.New(rand.NewPCG(40, 6))
	p := randVal(rng, 2, 4)
	x := &val{shape: []int{2, 3}, data: []float32{256, 0, 6, 512, 3, 6}, format: precision.F32, origin: "micro"}
	want := make([]float32, 0, 2*16)
	for b := range 2 {
		want = append(want, p.data[b*4:(b+1)*4]...)
		for j := range 3 {
			tn := float64(x.data[b*3+j])
			a0, a1 := tn, tn*math.Exp(-math.Log(10000)/2)
			want = append(want, float32(math.Cos(a0)), float32(math.Cos(a1)), float32(math.Sin(a0)), float32(math.Sin(a1)))
		}
	}
	s, sc, target := planted(t, precision.F32, []int{2, 16}, want, p, x)
	got := s.joined(target, sc, sc.vals)
	explainedWithin(t, got, target)
	if got != nil && (got.from == nil || got.from.op != program.OpConcat) {
		t.Errorf("read as %v, want a join", got.from)
	}
}

// TestModulatedExplained: a ConvNeXt block's end, x = y.permute(0, 3, 1,
// 2) + x_res, then x·(1 + scale) + shift with scale and shift the chunks
// of one [B, 2C] value, in one step: undone, explained as the sum, and
// modulated again.
func TestModulatedExplained(t *testing.T) {
	rng := rand.New(rand.NewPCG(40, 8))
	const C = 4
	res := randVal(rng, 1, C, 3, 3)
	y := randVal(rng, 1, 3, 3, C)
	m := randVal(rng, 1, 2*C)
	want := make([]float32, len(res.data))
	for ch := range C {
		for p := range 9 {
			x := y.data[p*C+ch] + res.data[ch*9+p]
			want[ch*9+p] = x*(1+m.data[ch]) + m.data[C+ch]
		}
	}
	s, sc, target := planted(t, precision.F32, res.shape, want, res, y, m)
	s.late = true
	got := s.modulatedExplained(target, sc, sc.vals)
	explainedWithin(t, got, target)
}
