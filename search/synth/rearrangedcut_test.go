package synth

import (
	"math"
	"slices"
	"testing"

	"github.com/zflow/zflow/exec/cpu"
	"github.com/zflow/zflow/precision"
)

// TestRearrangedCut: a depth-to-space of a video map (each channel's
// eight (time, row, column) offsets laid out as frames and cells),
// computed here by hand, with its first frame cut (or its last), is read
// from the map exactly; the same frames out of order are not.
func TestRearrangedCut(t *testing.T) {
	const c, F, h, w = 2, 3, 2, 2
	v := &val{shape: []int{1, c * 8, F, h, w}, data: make([]float32, c*8*F*h*w), format: precision.F32}
	for i := range v.data {
		v.data[i] = float32(math.Sin(float64(i)*0.73 + 0.1))
	}
	full := depthToSpace(v.data, c, F, h, w)
	fullVal := &val{shape: []int{1, c, 2 * F, 2 * h, 2 * w}, data: full, format: precision.F32}
	for _, tc := range []struct {
		name     string
		from, to int
	}{{"first frame cut", 1, 2 * F}, {"last frame cut", 0, 2*F - 1}} {
		target := cutAxis(fullVal, 2, tc.from, tc.to)
		s := &synth{tr: oneStepTrace(t), ev: &evaluator{b: cpu.New(1)}, em: newEmitter(precision.F32)}
		got := s.rearrangedCut(target, []*val{v})
		if got == nil {
			t.Errorf("%s: not explained", tc.name)
			continue
		}
		if !slices.Equal(got.shape, target.shape) || !slices.Equal(got.data, target.data) {
			t.Errorf("%s: %v, not the target exactly", tc.name, got.shape)
		}
	}
	// frames 1…5 with two of them swapped: no rearrangement of v then a cut
	swapped := cutAxis(fullVal, 2, 1, 2*F)
	n := 2 * h * 2 * w
	for ch := range c {
		a, b := (ch*(2*F-1)+0)*n, (ch*(2*F-1)+3)*n
		for i := range n {
			swapped.data[a+i], swapped.data[b+i] = swapped.data[b+i], swapped.data[a+i]
		}
	}
	s := &synth{tr: oneStepTrace(t), ev: &evaluator{b: cpu.New(1)}, em: newEmitter(precision.F32)}
	if got := s.rearrangedCut(swapped, []*val{v}); got != nil {
		t.Errorf("frames out of order: explained by %v", got.from)
	}
}

// depthToSpace lays a video map [1, c·8, F, h, w] out as [1, c, 2F, 2h,
// 2w], each channel's eight (time, row, column) offsets as frames and
// cells, by hand.
func depthToSpace(v []float32, c, F, h, w int) []float32 {
	full := make([]float32, c*2*F*2*h*2*w)
	for ch := range c {
		for st := range 2 {
			for sh := range 2 {
				for sw := range 2 {
					for f := range F {
						for y := range h {
							for x := range w {
								src := (((ch*8+st*4+sh*2+sw)*F+f)*h+y)*w + x
								dst := ((ch*2*F+2*f+st)*2*h+2*y+sh)*2*w + 2*x + sw
								full[dst] = v[src]
							}
						}
					}
				}
			}
		}
	}
	return full
}

// TestRearrangedCutOfSum: an upsampler with a residual (the convolution's
// depth-to-space plus the input's, repeated over the channels, each with
// its first frame cut) is the depth-to-space of the convolution plus the
// input tiled over the channels, cut: read from the two maps exactly, and
// not from the convolution alone.
func TestRearrangedCutOfSum(t *testing.T) {
	const c, F, h, w, cx = 2, 3, 2, 2, 4 // the input's 4 channels tiled 4 times to the convolution's 16
	conv := &val{shape: []int{1, c * 8, F, h, w}, data: make([]float32, c*8*F*h*w), format: precision.F32}
	x := &val{shape: []int{1, cx, F, h, w}, data: make([]float32, cx*F*h*w), format: precision.F32}
	for i := range conv.data {
		conv.data[i] = float32(math.Sin(float64(i)*0.73 + 0.1))
	}
	for i := range x.data {
		x.data[i] = float32(math.Cos(float64(i)*1.31 - 0.4))
	}
	sum := make([]float32, len(conv.data))
	per := F * h * w
	for i := range sum {
		ch, rest := i/per, i%per
		sum[i] = conv.data[i] + x.data[(ch%cx)*per+rest]
	}
	full := &val{shape: []int{1, c, 2 * F, 2 * h, 2 * w}, data: depthToSpace(sum, c, F, h, w), format: precision.F32}
	target := cutAxis(full, 2, 1, 2*F)
	s := &synth{tr: oneStepTrace(t), ev: &evaluator{b: cpu.New(1)}, em: newEmitter(precision.F32)}
	got := s.rearrangedCut(target, []*val{x, conv})
	if got == nil || !slices.Equal(got.data, target.data) {
		t.Fatalf("the sum moved and cut: not explained exactly (%v)", got)
	}
	if got := s.rearrangedCut(target, []*val{conv}); got != nil {
		t.Errorf("the convolution alone: explained by %v", got.from)
	}
}

// TestRefineSplit: a digit that merged consecutive axes is split at them,
// its pieces kept together in the target's order; boundaries that do not
// nest leave the split as it is.
func TestRefineSplit(t *testing.T) {
	for _, c := range []struct {
		name                string
		split, perm, shape  []int
		wantSplit, wantPerm []int
	}{
		// a patchify of [3, 4 frames, 16, 16]: frames and the 8 row blocks
		// stay together as one digit of 32
		{"frames merged with rows", []int{3, 32, 2, 8, 2}, []int{0, 4, 2, 1, 3}, []int{1, 3, 4, 16, 16},
			[]int{3, 4, 8, 2, 8, 2}, []int{0, 5, 3, 1, 2, 4}},
		{"already at the axes", []int{3, 4, 2}, []int{2, 0, 1}, []int{3, 4, 2}, []int{3, 4, 2}, []int{2, 0, 1}},
		{"boundaries that do not nest", []int{6, 4}, []int{1, 0}, []int{4, 6}, []int{6, 4}, []int{1, 0}},
	} {
		gs, gp := refineSplit(c.split, c.perm, c.shape)
		if !slices.Equal(gs, c.wantSplit) || !slices.Equal(gp, c.wantPerm) {
			t.Errorf("%s: %v %v, want %v %v", c.name, gs, gp, c.wantSplit, c.wantPerm)
		}
	}
}

// TestRearrangedCutChunk: a map's frames folded into the batch (permute,
// then flatten) and cut into chunks of 4 (a group norm run chunk by
// chunk, Mochi's VAE): the middle chunk, along the leading axis, is read
// from the map exactly.
func TestRearrangedCutChunk(t *testing.T) {
	const c, F, h = 2, 12, 3
	v := &val{shape: []int{1, c, F, h}, data: make([]float32, c*F*h), format: precision.F32}
	for i := range v.data {
		v.data[i] = float32(math.Sin(float64(i)*0.53 + 0.3))
	}
	folded := make([]float32, len(v.data)) // [F, c, h]
	for ch := range c {
		for f := range F {
			for y := range h {
				folded[(f*c+ch)*h+y] = v.data[(ch*F+f)*h+y]
			}
		}
	}
	target := &val{shape: []int{4, c, h}, data: folded[4*c*h : 8*c*h], format: precision.F32}
	s := &synth{tr: oneStepTrace(t), ev: &evaluator{b: cpu.New(1)}, em: newEmitter(precision.F32)}
	got := s.rearrangedCut(target, []*val{v})
	if got == nil || !slices.Equal(got.data, target.data) {
		t.Fatalf("the middle chunk: not read exactly (%v)", got)
	}
}
