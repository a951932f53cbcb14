package trace

import (
	"testing"

	"github.com/zflow/zflow/precision"
)

// TestActivationFormat: a producer's narrow dtype is believed; one that
// says float32 is overruled only where most of the calls' floating values
// are stored narrower (a model that keeps its first module in f32).
func TestActivationFormat(t *testing.T) {
	bf16 := make([]byte, 2*16) // 16 bf16 values, bit patterns
	f32 := f32Bytes(make([]float32, 4)...)
	for _, tc := range []struct {
		name     string
		producer string
		outDescr string // the call's boundary: 16 bf16 values or 4 f32
		want     precision.Format
	}{
		{"bf16 producer", "bfloat16", "f4", precision.BF16},
		{"f32 producer, f32 boundaries", "float32", "f4", precision.F32},
		{"f32 producer, bf16 boundaries", "float32", "bf16", precision.BF16},
		{"no producer dtype, bf16 boundaries", "", "bf16", precision.BF16},
		{"f16 producer", "float16", "f4", precision.F16},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := smallManifest()
			if tc.producer != "" {
				m.Producer["dtype"] = tc.producer
			}
			out := npyEntry("s0/m/out", "<f4", []int{4}, f32)
			if tc.outDescr == "bf16" {
				m.DTypes = map[string]string{"s0/m/out": "bfloat16"}
				out = npyEntry("s0/m/out", "<u2", []int{16}, bf16)
			}
			path := writeZip(t, t.TempDir(), []zipEntry{manifestEntry(t, m), npyEntry("param/w", "<f4", []int{2}, f32Bytes(1, 2)), out})
			tr, err := Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer tr.Close()
			if got := tr.ActivationFormat(); got != tc.want {
				t.Errorf("ActivationFormat() = %v, want %v", got, tc.want)
			}
		})
	}
}
