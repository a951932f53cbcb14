package synth

import (
	"slices"
	"testing"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/precision"
)

// TestThetaCandidatesNarrow: θ read off RoPE tables stored in bf16 (12
// positions, head width 16) is among the candidates for the bases real
// models use, in both layouts; a bf16 cosine of frequency 1's first angle
// alone is a few percent off (θ read as 1.04e6 or 424000 before).
func TestThetaCandidatesNarrow(t *testing.T) {
	const seq, d = 12, 16
	pos := make([]float32, seq)
	for i := range pos {
		pos[i] = float32(i)
	}
	for _, layout := range []exec.RopeLayout{exec.RopeHalf, exec.RopeInterleaved} {
		for _, theta := range []float64{10000, 100000, 500000, 1000000} {
			p := exec.RopeTableParams{Theta: theta, AxesDims: []int{d}, Layout: layout, FreqFormat: precision.F32, AngleFormat: precision.F32}
			c, s, err := exec.RopeTables(pos, seq, p, exec.MathPrecise)
			if err != nil {
				t.Fatal(err)
			}
			for i := range c {
				c[i], s[i] = precision.BF16.Round(c[i]), precision.BF16.Round(s[i])
			}
			cosT := &val{shape: []int{seq, d}, data: c, format: precision.BF16}
			sinT := &val{shape: []int{seq, d}, data: s, format: precision.BF16}
			got := thetaCandidates(cosT, sinT, &val{shape: []int{seq, 1}, data: pos, format: precision.F32}, d, layout)
			if !slices.Contains(got, theta) {
				t.Errorf("%v θ=%g: candidates %v", layout, theta, got)
			}
		}
	}
}
