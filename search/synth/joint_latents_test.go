package synth

import (
	"testing"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/cpu"
	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/precision"
)

// TestMadeFromLatents: which of two streams of equal rows is the image's.
// After a joint attention both streams' values depend on the latents; only
// the image stream's reach them through a chain that passes no attention
// (its residual), so the joint_order label of a second block is read as
// the first's. Before, equal rows fell back to a fixed label
// (HiDream-I1 with a caption as long as its patches: text_first, where
// the code joins [image, text]).
func TestMadeFromLatents(t *testing.T) {
	s := &synth{ev: &evaluator{b: cpu.New(1)}, em: newEmitter(precision.F32)}
	f32 := precision.F32
	lat := &val{shape: []int{1, 2, 2}, data: []float32{1, 2, 3, 4}, format: f32, origin: "latents"}
	txt := &val{shape: []int{1, 2, 2}, data: []float32{5, 6, 7, 8}, format: f32, origin: "caption"}
	s.latents = lat
	img := s.derive(&expr{op: program.OpMul, args: []*val{lat, s.constant(2)}, out: f32}) // the image stream's input
	both := s.derive(&expr{op: program.OpConcat, attrs: program.Attrs{Axis: 1}, args: []*val{img, txt}, out: f32})
	slice := func(v *val, lo, hi int) *val {
		return s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: 1, Start: lo, End: hi}, args: []*val{v}, out: f32})
	}
	attn := s.derive(&expr{op: program.OpAttention, attrs: program.Attrs{Attention: exec.AttentionParams{Heads: 1, KVHeads: 1}}, args: []*val{both, both, both, nil, nil, nil}, out: f32})
	imgOut := s.derive(&expr{op: program.OpAdd, args: []*val{img, slice(attn, 0, 2)}, out: f32}) // residual
	txtOut := s.derive(&expr{op: program.OpAdd, args: []*val{txt, slice(attn, 2, 4)}, out: f32})
	for _, tc := range []struct {
		name string
		v    *val
		want bool
	}{
		{"the image stream", imgOut, true},
		{"the caption stream", txtOut, false},
		{"the caption", txt, false},
		{"nothing", nil, false},
	} {
		if tc.v == nil && tc.name != "nothing" {
			t.Fatalf("%s: not computed", tc.name)
		}
		if got := s.madeFromLatents(tc.v); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
