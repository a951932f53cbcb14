package synth

import (
	"math"
	"testing"

	"github.com/zflow/zflow/exec/cpu"
	"github.com/zflow/zflow/precision"
)

// TestFreeRopeOfOneSample: position ids of two samples [2, S] (a batch
// doubled for guidance, the first prompt left-padded: positions 0, 0, 0,
// 1, …) and cos/sin tables of S rows made from the first sample's ids
// (emb[0]), scaled frequencies and a magnitude (Phi-3's su-scaled RoPE):
// read from that sample's row. Before, no ids of S entries were found and
// the tables were taken from the trace.
func TestFreeRopeOfOneSample(t *testing.T) {
	const rows, half = 8, 3
	first := []float32{0, 0, 0, 1, 2, 3, 4, 5}
	ids := append(append([]float32{}, first...), 0, 1, 2, 3, 4, 5, 6, 7)
	freqs := []float64{1, 0.21, 0.037}
	const mag = 1.19
	cosT := &val{shape: []int{rows, 2 * half}, format: precision.F32, data: make([]float32, rows*2*half), origin: "rope/out.0"}
	sinT := &val{shape: []int{rows, 2 * half}, format: precision.F32, data: make([]float32, rows*2*half), origin: "rope/out.1"}
	for r, p := range first {
		for i, f := range freqs {
			a := float64(float32(float64(p) * float64(float32(f))))
			for _, c := range []int{i, half + i} {
				cosT.data[r*2*half+c] = float32(math.Cos(a) * mag)
				sinT.data[r*2*half+c] = float32(math.Sin(a) * mag)
			}
		}
	}
	for _, tc := range []struct {
		name string
		ids  *val
	}{
		{"one sample", &val{shape: []int{1, rows}, format: precision.F32, data: first}},
		{"the first of two", &val{shape: []int{2, rows}, format: precision.F32, data: ids}},
	} {
		s := &synth{ev: &evaluator{b: cpu.New(1)}, em: newEmitter(precision.F32)}
		c, sn := s.fitFreeRope([]*val{tc.ids}, cosT, sinT)
		if c == nil || sn == nil {
			t.Errorf("%s: the tables are not read", tc.name)
			continue
		}
		if e := relRMS(precision.F32, c.data, cosT.data); e > 1e-5 {
			t.Errorf("%s: cos off by %.3g", tc.name, e)
		}
	}
}
