package synth

import (
	"context"
	"testing"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/cpu"
	"github.com/zflow/zflow/precision"
)

// TestRotateRowsPastDeadline: once the search's deadline has passed every
// evaluation fails, so the cut of the rows RoPE rotates is never made;
// rotating one stream's rows of a joint sequence then gives nothing (the
// candidate is dropped and the search stops with its budget), not a nil
// dereference that ends discovery as an internal error.
func TestRotateRowsPastDeadline(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	s := &synth{ctx: ctx, ev: &evaluator{b: cpu.New(1), ctx: ctx}, params: map[string]*val{}}
	const rows, heads, d = 6, 2, 8
	x := &val{shape: []int{1, rows, heads * d}, data: make([]float32, rows*heads*d), format: precision.F32, origin: "q"}
	cos := &val{shape: []int{4, d}, data: make([]float32, 4*d), format: precision.F32, origin: "cos"}
	sin := &val{shape: []int{4, d}, data: make([]float32, 4*d), format: precision.F32, origin: "sin"}
	for _, span := range [][2]int{{0, 4}, {2, 6}} {
		if got := s.rotateRows(x, [2]*val{cos, sin}, exec.RopeInterleaved, heads, d, span); got != nil {
			t.Errorf("rows %v: rotated past the deadline", span)
		}
	}
}

// TestBlockSumPastDeadline: past the deadline the reshape a consumer's
// blocks are summed from is never made; the sum of its blocks is then
// nothing, not a nil dereference.
func TestBlockSumPastDeadline(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	s := &synth{ctx: ctx, ev: &evaluator{b: cpu.New(1), ctx: ctx}, params: map[string]*val{}}
	d := &val{shape: []int{1, 4, 8}, data: make([]float32, 32), format: precision.F32, origin: "d"}
	if got := s.blockSum(s.reshape(d, []int{4, 8}), 2, precision.F32); got != nil {
		t.Error("blocks summed past the deadline")
	}
}
