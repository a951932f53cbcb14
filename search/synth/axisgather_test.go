package synth

import (
	"math"
	"slices"
	"testing"

	"github.com/zflow/zflow/exec/cpu"
	"github.com/zflow/zflow/precision"
)

// TestAxisGathered: a video map resized by nearest with its first frame
// apart (time read at [0, 1, 1, 2, 2], rows and columns each twice), in
// values rounded to bf16 so that many repeat, is read from the map
// exactly, as a video and with its frames folded into the batch; a map
// with one entry changed is not.
func TestAxisGathered(t *testing.T) {
	const c, T, h, w = 2, 3, 2, 3
	v := &val{shape: []int{1, c, T, h, w}, data: make([]float32, c*T*h*w), format: precision.BF16}
	for i := range v.data {
		v.data[i] = precision.BF16.Round(float32(math.Sin(float64(i) * 0.9)))
	}
	tm := []int{0, 1, 1, 2, 2}
	T2, h2, w2 := len(tm), 2*h, 2*w
	video := make([]float32, c*T2*h2*w2)
	folded := make([]float32, len(video))
	for ch := range c {
		for f := range T2 {
			for y := range h2 {
				for x := range w2 {
					e := v.data[((ch*T+tm[f])*h+y/2)*w+x/2]
					video[((ch*T2+f)*h2+y)*w2+x] = e
					folded[((f*c+ch)*h2+y)*w2+x] = e
				}
			}
		}
	}
	for _, tc := range []struct {
		name   string
		target *val
	}{
		{"video", &val{shape: []int{1, c, T2, h2, w2}, data: video, format: precision.BF16}},
		{"folded", &val{shape: []int{T2, c, h2, w2}, data: folded, format: precision.BF16}},
	} {
		s := &synth{tr: oneStepTrace(t), ev: &evaluator{b: cpu.New(1)}, em: newEmitter(precision.BF16)}
		got := s.axisGathered(tc.target, []*val{v})
		if got == nil {
			t.Errorf("%s: not explained", tc.name)
			continue
		}
		if !slices.Equal(got.shape, tc.target.shape) || !slices.Equal(got.data, tc.target.data) {
			t.Errorf("%s: %v, not the target exactly", tc.name, got.shape)
		}
	}
	changed := &val{shape: []int{1, c, T2, h2, w2}, data: slices.Clone(video), format: precision.BF16}
	changed.data[7] += 0.5
	s := &synth{tr: oneStepTrace(t), ev: &evaluator{b: cpu.New(1)}, em: newEmitter(precision.BF16)}
	if got := s.axisGathered(changed, []*val{v}); got != nil {
		t.Errorf("one entry changed: explained by %v", got.from)
	}
}
