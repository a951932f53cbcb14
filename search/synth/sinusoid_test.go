package synth

import (
	"math"
	"slices"
	"testing"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/cpu"
	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/precision"
)

// TestSinusoidScaleRead: a timestep sinusoid whose angles are scaled by
// neither 1 nor 1000 is explained with the scale read from its values,
// in each layout; values that are no sinusoid give no scale.
func TestSinusoidScaleRead(t *testing.T) {
	steps := []float32{0.9, 0.55, 0.2, 0.05}
	x := &val{shape: []int{len(steps)}, data: steps, format: precision.F32}
	for _, tc := range []struct {
		name  string
		p     exec.TimestepParams
		scale float32
	}{
		{"1e4, [cos | sin]", exec.TimestepParams{Dim: 32, FlipSinToCos: true, MaxPeriod: 10000}, 1e4},
		{"500, [sin | cos], shift 1", exec.TimestepParams{Dim: 16, FreqShift: 1, MaxPeriod: 10000}, 500},
		{"2.5, [sin | cos]", exec.TimestepParams{Dim: 32, MaxPeriod: 10000}, 2.5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := tc.p
			p.Scale = tc.scale
			data, err := exec.TimestepEmbedding(steps, p, exec.MathPrecise)
			if err != nil {
				t.Fatal(err)
			}
			target := &val{shape: []int{len(steps), p.Dim}, data: data, format: precision.F32}
			s := &synth{tr: oneStepTrace(t), ev: &evaluator{b: cpu.New(1)}, em: newEmitter(precision.F32)}
			v := s.fitSinusoid(x, target)
			if v == nil {
				t.Fatal("not explained")
			}
			got := v.from.attrs.Timestep
			if got.Scale != tc.scale || got.FlipSinToCos != p.FlipSinToCos || got.FreqShift != p.FreqShift {
				t.Errorf("read scale %g flip %v shift %g, want %g %v %g", got.Scale, got.FlipSinToCos, got.FreqShift, tc.scale, p.FlipSinToCos, p.FreqShift)
			}
			if sc := relRMS(precision.F32, v.data, data); sc > 1e-6 {
				t.Errorf("rel-RMS %g against the sinusoid", sc)
			}
		})
	}
	// the timestep scaled first (1e4·t, then the frequencies: the angles
	// round as (1e4·t)·f, not (t·f)·1e4)
	pre := make([]float32, len(steps))
	for i, v := range steps {
		pre[i] = v * 1e4
	}
	p := exec.TimestepParams{Dim: 32, FreqShift: 1, Scale: 1, MaxPeriod: 10000}
	data, err := exec.TimestepEmbedding(pre, p, exec.MathPrecise)
	if err != nil {
		t.Fatal(err)
	}
	target := &val{shape: []int{len(steps), p.Dim}, data: data, format: precision.F32}
	s := &synth{tr: oneStepTrace(t), ev: &evaluator{b: cpu.New(1)}, em: newEmitter(precision.F32)}
	v := s.fitSinusoid(x, target)
	if v == nil {
		t.Fatal("the timestep scaled before its sinusoid: not explained")
	}
	if arg := v.from.args[0]; arg == x || v.from.attrs.Timestep.Scale != 1 {
		t.Errorf("scale %g on %v: want the scale applied to t first", v.from.attrs.Timestep.Scale, arg.shape)
	}
	if sc := relRMS(precision.F32, v.data, data); sc > 1e-6 {
		t.Errorf("rel-RMS %g against the sinusoid of 1e4·t", sc)
	}
	noise := &val{shape: []int{len(steps), 16}, data: make([]float32, len(steps)*16), format: precision.F32}
	for i := range noise.data {
		noise.data[i] = float32((i*37)%11) - 5
	}
	s = &synth{tr: oneStepTrace(t), ev: &evaluator{b: cpu.New(1)}, em: newEmitter(precision.F32)}
	if got := s.sinusoidScales(x, noise, exec.TimestepParams{Dim: 16, MaxPeriod: 10000, Scale: 1}); got != nil {
		t.Errorf("scales %v read from values that are no sinusoid", got)
	}
}

// TestSinusoidsJoined: StableCascade's timestep-ratio embedding, made in
// the forward as torch writes it (r·1e4 first, frequencies exp(i·c) with
// c = f32(−ln 1e4 / (half − 1)), [sin, cos]) and joined with the same
// embedding of zeros twice, is explained as three sinusoids joined: the
// scale read although the second-lowest frequency's angle turns past π
// at r = 1, put before the frequencies, and the table read to the
// reference's rounding. Noise in place of the zeros' piece is not.
func TestSinusoidsJoined(t *testing.T) {
	steps := []float32{1, 0.75, 0.4, 0.1}
	const dim, half = 16, 8
	c := float32(-math.Log(1e4) / (half - 1))
	ratio := func(r float32) []float32 {
		row := make([]float32, dim)
		a := r * 1e4
		for i := range half {
			f := float32(math.Exp(float64(float32(i) * c)))
			angle := a * f
			row[i], row[half+i] = float32(math.Sin(float64(angle))), float32(math.Cos(float64(angle)))
		}
		return row
	}
	joined := func(rest func(n int) []float32) *val {
		data := make([]float32, 0, len(steps)*3*dim)
		for n, r := range steps {
			data = append(data, ratio(r)...)
			data = append(data, rest(n)...)
		}
		return &val{shape: []int{len(steps), 3 * dim}, data: data, format: precision.F32}
	}
	x := &val{shape: []int{len(steps)}, data: steps, format: precision.F32}
	zeros := joined(func(int) []float32 { return slices.Concat(ratio(0), ratio(0)) })
	s := &synth{tr: oneStepTrace(t), ev: &evaluator{b: cpu.New(1)}, em: newEmitter(precision.F32)}
	v := s.sinusoidsJoined(zeros, []*val{x})
	if v == nil {
		t.Fatal("three sinusoids joined: not explained")
	}
	if e := relRMS(precision.F32, v.data, zeros.data); e > 1e-6 {
		t.Errorf("rel-RMS %g against the joined embedding", e)
	}
	if len(v.from.args) != 3 {
		t.Fatalf("%d pieces, want 3", len(v.from.args))
	}
	first := v.from.args[0].from
	if first.args[0] == x || first.attrs.Timestep.Scale != 1 || first.attrs.Timestep.FreqShift != 1 || first.attrs.Timestep.FlipSinToCos {
		t.Errorf("first piece %s: want [sin, cos], shift 1, r scaled by 1e4 first", first.label)
	}
	// in bf16: r and r·1e4 rounded to it, the angles and sin and cos in
	// f32, the embedding rounded to bf16 (the scale is read to 2⁻⁸)
	bf := func(v float32) float32 { return precision.BF16.Round(v) }
	rb := make([]float32, len(steps))
	bfData := make([]float32, 0, len(zeros.data))
	for n, r := range steps {
		rb[n] = bf(r)
		a := bf(rb[n] * 1e4)
		row := make([]float32, dim)
		for i := range half {
			angle := a * float32(math.Exp(float64(float32(i)*c)))
			row[i], row[half+i] = bf(float32(math.Sin(float64(angle)))), bf(float32(math.Cos(float64(angle))))
		}
		bfData = append(bfData, row...)
		for range 2 {
			bfData = append(bfData, slices.Concat(make([]float32, half), slices.Repeat([]float32{1}, half))...)
		}
	}
	xb := &val{shape: []int{len(steps)}, data: rb, format: precision.BF16}
	target := &val{shape: zeros.shape, data: bfData, format: precision.BF16}
	s = &synth{tr: oneStepTrace(t), ev: &evaluator{b: cpu.New(1)}, em: newEmitter(precision.BF16)}
	if v := s.sinusoidsJoined(target, []*val{xb}); v == nil {
		t.Error("bf16: three sinusoids joined: not explained")
	} else if e := relRMS(precision.BF16, v.data, target.data); e > 1e-2 {
		t.Errorf("bf16: rel-RMS %g against the joined embedding", e)
	}
	noisy := joined(func(n int) []float32 {
		row := slices.Concat(ratio(0), ratio(0))
		row[3] += 0.25 * float32(n+1)
		return row
	})
	s = &synth{tr: oneStepTrace(t), ev: &evaluator{b: cpu.New(1)}, em: newEmitter(precision.F32)}
	if v := s.sinusoidsJoined(noisy, []*val{x}); v != nil {
		t.Errorf("explained %s where a piece is no sinusoid", v.from.label)
	}
}

// TestOtherScaling: a sinusoid of t scaled inside (t·f·s) is turned into
// the one of t scaled first ((s·t)·f) and back, each scored; a scale of
// 1 has nothing to move.
func TestOtherScaling(t *testing.T) {
	steps := []float32{1, 0.75, 0.4}
	x := &val{shape: []int{len(steps)}, data: steps, format: precision.F32}
	p := exec.TimestepParams{Dim: 16, FreqShift: 1, Scale: 1e4, MaxPeriod: 10000}
	data, err := exec.TimestepEmbedding(steps, p, exec.MathPrecise)
	if err != nil {
		t.Fatal(err)
	}
	target := &val{shape: []int{len(steps), p.Dim}, data: data, format: precision.F32}
	s := &synth{tr: oneStepTrace(t), ev: &evaluator{b: cpu.New(1)}, em: newEmitter(precision.F32)}
	inside, _ := s.ev.score(&expr{op: program.OpTimestepEmbed, attrs: program.Attrs{Timestep: p}, args: []*val{x}, out: precision.F32}, target)
	first := s.otherScaling(inside, x, target)
	if first == nil || first.from.args[0] == x || first.from.attrs.Timestep.Scale != 1 {
		t.Fatalf("scale inside moved: %v", first)
	}
	if e := relRMS(precision.F32, first.data, data); e == 0 || e > 1e-3 {
		t.Errorf("scaled first: rel-RMS %g against the inside scaling, want rounding apart", e)
	}
	back := s.otherScaling(first, x, target)
	if back == nil || back.from.args[0] != x || back.from.attrs.Timestep.Scale != 1e4 || relRMS(precision.F32, back.data, data) != 0 {
		t.Fatalf("scale moved back: %v", back)
	}
	p.Scale = 1
	plain, _ := s.ev.score(&expr{op: program.OpTimestepEmbed, attrs: program.Attrs{Timestep: p}, args: []*val{x}, out: precision.F32}, target)
	if w := s.otherScaling(plain, x, target); w != nil {
		t.Errorf("no scale to move, yet moved: %s", w.from.label)
	}
}

// TestSinusoidNarrowTimestepScaled: a bf16 timestep multiplied by 1000
// in bf16 before its frequencies (0.6 becomes 0.6015625, then 600, not
// 601.5625: F5-TTS's embedding of a bf16 time) is read as that product,
// stored in bf16, then the sinusoid; the same table of the f32 product
// is not within the tolerance, so no other reading explains it.
func TestSinusoidNarrowTimestepScaled(t *testing.T) {
	steps := []float32{0.6015625, 0.25, 0.8984375, 0.1}
	for i, v := range steps {
		steps[i] = precision.BF16.Round(v)
	}
	x := &val{shape: []int{len(steps)}, data: steps, format: precision.BF16}
	pre := make([]float32, len(steps))
	for i, v := range steps {
		pre[i] = precision.BF16.Round(v * 1000)
	}
	p := exec.TimestepParams{Dim: 32, FreqShift: 1, Scale: 1, MaxPeriod: 10000}
	data, err := exec.TimestepEmbedding(pre, p, exec.MathPrecise)
	if err != nil {
		t.Fatal(err)
	}
	target := &val{shape: []int{len(steps), p.Dim}, data: data, format: precision.F32}
	s := &synth{tr: oneStepTrace(t), ev: &evaluator{b: cpu.New(1)}, em: newEmitter(precision.BF16)}
	v := s.fitSinusoid(x, target)
	if v == nil {
		t.Fatal("the bf16 timestep scaled in bf16 before its sinusoid: not explained")
	}
	arg := v.from.args[0]
	if arg == x || arg.from == nil || arg.from.op != program.OpMul || arg.format != precision.BF16 {
		t.Errorf("the sinusoid reads %v, want t·1000 stored in bf16", arg.shape)
	}
	if sc := relRMS(precision.F32, v.data, data); sc > 1e-6 {
		t.Errorf("rel-RMS %g against the sinusoid of bf16(1000·t)", sc)
	}
	exact := make([]float32, len(steps))
	for i, v := range steps {
		exact[i] = v * 1000
	}
	wide, err := exec.TimestepEmbedding(exact, p, exec.MathPrecise)
	if err != nil {
		t.Fatal(err)
	}
	if sc := relRMS(precision.F32, wide, data); sc <= tolerance(precision.F32) {
		t.Fatalf("the planted table is within f32's tolerance of the f32 product's (%g): the case shows nothing", sc)
	}
}
