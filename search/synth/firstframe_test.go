package synth

import (
	"math/rand/v2"
	"testing"

	"github.com/zflow/zflow/exec/cpu"
	"github.com/zflow/zflow/precision"
)

// TestFirstFrameApart: HunyuanVideo 1.5's temporal downsampler by hand,
// offsets-first folds: the first frame's convolution output folded 1×2×2
// and joined twice on the channels, plus the input's first frame folded
// the same way; the frames after it folded 2×2×2, plus the input's folded
// and its channel pairs averaged. Neither reading holds for the whole
// clip; each explained apart and joined in time does.
func TestFirstFrameApart(t *testing.T) {
	const T, h, w = 3, 4, 4
	rng := rand.New(rand.NewPCG(6, 2))
	x, conv := randVal(rng, 1, 2, T, h, w), randVal(rng, 1, 1, T, h, w)
	at := func(v *val, c, f, y, z int) float64 { return float64(v.data[((c*T+f)*h+y)*w+z]) }
	target := &val{shape: []int{1, 8, 2, h / 2, w / 2}, data: make([]float32, 8*2*h/2*w/2), format: precision.F32}
	for k := range 8 {
		for y := range h / 2 {
			for z := range w / 2 {
				// the first frame: channel k holds conv's offset k%4 and x's
				// offset k/2 of channel k%2
				o, p := k%4, k/2
				first := at(conv, 0, 0, 2*y+o/2, 2*z+o%2) + at(x, k%2, 0, 2*y+p/2, 2*z+p%2)
				target.data[((k*2)*h/2+y)*w/2+z] = float32(first)
				// the rest: offset k = (st·2 + sh)·2 + sw over frames 1, 2
				st, sh, sw := k/4, (k/2)%2, k%2
				mean := (at(x, 0, 1+st, 2*y+sh, 2*z+sw) + at(x, 1, 1+st, 2*y+sh, 2*z+sw)) / 2
				target.data[((k*2+1)*h/2+y)*w/2+z] = float32(at(conv, 0, 1+st, 2*y+sh, 2*z+sw) + mean)
			}
		}
	}
	s := &synth{tr: oneStepTrace(t), ev: &evaluator{b: cpu.New(1)}, em: newEmitter(precision.F32)}
	sc := &scope{own: map[*val]bool{}, arg: map[*val]bool{}, vecs: map[string][]vec{}, vals: []*val{x, conv}}
	if s.channelShortcut(target, sc.vals) != nil {
		t.Fatal("the whole clip read as one shortcut: the test does not need the split")
	}
	v := s.firstFrameApart(target, sc)
	if v == nil {
		t.Fatal("not explained")
	}
	if e := relRMS(precision.F32, v.data, target.data); e > 1e-6 {
		t.Errorf("rel-RMS %g", e)
	}
}
