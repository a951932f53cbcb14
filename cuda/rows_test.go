//go:build linux

package cuda

import (
	"fmt"
	"math"
	"testing"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/precision"
)

// TestRowIndependent: what RowIndependent claims for attention. A block of
// query rows given alone (every key; a causal attention's first rows) gives,
// on the GPU, the bits the whole call gives those rows: flash and exact
// kernels, with and without grouped heads, at a real width's sequence.
func TestRowIndependent(t *testing.T) {
	b := need(t)
	m := mk(t)
	if !b.RowIndependent("attention") || b.RowIndependent("linear") {
		t.Fatalf("RowIndependent: attention %v, linear %v; want true, false", b.RowIndependent("attention"), b.RowIndependent("linear"))
	}
	for _, c := range []struct {
		name          string
		seq, h, kv, d int
		lo, hi        int
		f             precision.Format
		mask          exec.MaskKind
		s             exec.Spec
	}{
		{"flash bf16", 4608, 24, 24, 128, 2000, 2016, bf16, exec.MaskNone, exec.Out(bf16)},
		{"flash bf16 weights, GQA", 1000, 16, 4, 64, 984, 1000, bf16, exec.MaskNone, exec.Spec{Out: bf16, Round: exec.RoundWeights}},
		{"flash bf16 causal prefix", 1000, 16, 4, 64, 0, 128, bf16, exec.MaskCausal, exec.Out(bf16)},
		{"exact f32", 1152, 6, 6, 128, 500, 516, f32, exec.MaskNone, exec.Out(f32)},
		{"exact bf16 math", 1000, 16, 4, 64, 16, 32, bf16, exec.MaskNone, exec.Spec{Out: bf16, Round: exec.RoundScores | exec.RoundProbs}},
	} {
		t.Run(c.name, func(t *testing.T) {
			q := m(b.Upload(randn(c.seq*c.h*c.d, uint64(c.seq+c.h), 1), []int{1, c.seq, c.h * c.d}, c.f))
			k := m(b.Upload(randn(c.seq*c.kv*c.d, uint64(c.seq+c.h+1), 1), []int{1, c.seq, c.kv * c.d}, c.f))
			v := m(b.Upload(randn(c.seq*c.kv*c.d, uint64(c.seq+c.h+2), 1), []int{1, c.seq, c.kv * c.d}, c.f))
			defer b.Free(q)
			defer b.Free(k)
			defer b.Free(v)
			qs := m(b.Slice(q, 1, c.lo, c.hi))
			defer b.Free(qs)
			p := exec.AttentionParams{Heads: c.h, KVHeads: c.kv, Mask: c.mask}
			whole := m(b.Attention(q, k, v, nil, nil, nil, p, c.s))
			defer b.Free(whole)
			part := m(b.Attention(qs, k, v, nil, nil, nil, p, c.s))
			defer b.Free(part)
			all, err := b.Download(whole)
			if err != nil {
				t.Fatal(err)
			}
			got, err := b.Download(part)
			if err != nil {
				t.Fatal(err)
			}
			want := all[c.lo*c.h*c.d : c.hi*c.h*c.d]
			bad := 0
			for i := range want {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) && !(got[i] != got[i] && want[i] != want[i]) {
					if bad == 0 {
						t.Errorf("rows [%d, %d) alone: element %d is %v, the whole call's %v", c.lo, c.hi, i, got[i], want[i])
					}
					bad++
				}
			}
			record(row{op: "attention rows alone " + c.name, spec: c.s.String(), shape: fmt.Sprint([]int{1, c.hi - c.lo, c.h * c.d}),
				n: len(want), exact: 1 - float64(bad)/float64(len(want)), relF64: -1, cpuF64: -1})
		})
	}
}
