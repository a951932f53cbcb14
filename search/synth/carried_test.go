package synth

import (
	"math"
	"slices"
	"testing"

	"github.com/zflow/zflow/exec/cpu"
	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/precision"
)

// TestFromCarried: values an earlier call made, kept, explain a later
// argument exactly: a value's last frames (a frame cache), a value in another
// shape, an older cache's last frame joined before a
// newer value's, zeros joined before a value (the first chunk's past);
// a value nothing kept holds, or a fill, is not explained.
func TestFromCarried(t *testing.T) {
	mk := func(shape []int, seed float64) *val {
		v := &val{shape: shape, data: make([]float32, prod(shape)), format: precision.F32}
		for i := range v.data {
			v.data[i] = float32(math.Sin(seed + float64(i)*0.37))
		}
		return v
	}
	older := mk([]int{1, 4, 3, 2, 2}, 1) // a chunk's input, three frames
	newer := mk([]int{1, 4, 1, 2, 2}, 2) // the next chunk's, one frame
	frames := func(v *val, from, to int) *val { return cutAxis(v, 2, from, to) }
	join := func(a, b *val) *val {
		out := &val{shape: slices.Clone(a.shape), format: a.format}
		out.shape[2] += b.shape[2]
		for c := range a.shape[1] {
			out.data = append(out.data, a.data[c*a.shape[2]*4:(c+1)*a.shape[2]*4]...)
			out.data = append(out.data, b.data[c*b.shape[2]*4:(c+1)*b.shape[2]*4]...)
		}
		return out
	}
	zeros := &val{shape: []int{1, 4, 1, 2, 2}, data: make([]float32, 16), format: precision.F32}
	moved := &val{shape: []int{4, 2, 2}, data: newer.data, format: precision.F32} // newer in another shape
	for _, tc := range []struct {
		name   string
		target *val
		op     program.Op // the outer op of the explanation; 0: none expected
	}{
		{"last two frames", frames(older, 1, 3), program.OpSlice},
		{"whole", older, 0},
		{"reshaped", moved, program.OpReshape},
		{"older's last frame, then newer", join(frames(older, 2, 3), newer), program.OpConcat},
		{"zeros, then newer", join(zeros, newer), program.OpConcat},
	} {
		s := &synth{tr: oneStepTrace(t), ev: &evaluator{b: cpu.New(1)}, em: newEmitter(precision.F32)}
		s.keepCarried(older, newer)
		v := s.fromCarried(tc.target)
		if v == nil {
			t.Errorf("%s: not explained", tc.name)
			continue
		}
		if !slices.Equal(v.shape, tc.target.shape) || !slices.Equal(v.data, tc.target.data) {
			t.Errorf("%s: %v %v, want %v exactly", tc.name, v.shape, v.data[:4], tc.target.shape)
		}
		if tc.op == 0 && v != older {
			t.Errorf("%s: a new value, want the kept one itself", tc.name)
		}
		if tc.op != 0 && (v.from == nil || v.from.op != tc.op) {
			t.Errorf("%s: made by %v, want %v", tc.name, v.from, tc.op)
		}
	}
	s := &synth{tr: oneStepTrace(t), ev: &evaluator{b: cpu.New(1)}, em: newEmitter(precision.F32)}
	s.keepCarried(older, newer)
	if v := s.fromCarried(mk([]int{1, 4, 2, 2, 2}, 7)); v != nil {
		t.Errorf("a value nothing kept holds: explained by %v", v.from)
	}
	fill := &val{shape: []int{1, 4, 1, 2, 2}, data: slices.Repeat([]float32{0.5}, 16), format: precision.F32}
	if v := s.fromCarried(fill); v != nil {
		t.Errorf("a fill: explained by %v", v.from)
	}
}
