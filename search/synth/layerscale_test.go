package synth

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/precision"
)

// TestLayerScaleNotANorm plants a LayerScale (x·γ, rounded to bf16) on
// rows whose RMS is near 1 (a projection's output at random weights): an
// RMS norm times γ is then within bf16's tolerance of the result, but only
// loosely; the leaf is explained by the product, bit for bit. A real RMS
// norm of the same rows stays a norm.
func TestLayerScaleNotANorm(t *testing.T) {
	const rows, d = 5, 64
	f := precision.BF16
	r := rand.New(rand.NewPCG(4, 7))
	xd := make([]float32, rows*d)
	for i := range rows {
		row := xd[i*d : (i+1)*d]
		var ss float64
		for j := range row {
			row[j] = float32(r.NormFloat64())
			ss += float64(row[j]) * float64(row[j])
		}
		k := (1 + 0.01*r.NormFloat64()) / math.Sqrt(ss/d) // RMS 1 ± 1%
		for j := range row {
			row[j] = f.Round(float32(float64(row[j]) * k))
		}
	}
	gd := make([]float32, d)
	for j := range gd {
		gd[j] = f.Round(float32(0.5 + r.Float64()))
	}
	scaled := make([]float32, len(xd))
	for i, v := range xd {
		scaled[i] = f.Round(v * gd[i%d])
	}
	x := &val{shape: []int{1, rows, d}, data: xd, format: f, origin: "x", seq: 1}
	g := &val{shape: []int{d}, data: gd, format: f, origin: "gamma", param: true, seq: 2}
	s, sc, target := planted(t, f, []int{1, rows, d}, scaled, x, g)
	got := s.fitLeaf(sc, []*val{x}, []*val{g}, []*val{target})[0]
	if got == nil || relRMS(f, got.data, scaled) != 0 {
		t.Fatalf("the LayerScale not explained bit for bit (%v)", got != nil)
	}
	if got.fit != nil && got.fit.kind == "norm" {
		t.Errorf("explained as a norm")
	}
	// the control: an RMS norm of the same rows times γ
	s2, _, _ := planted(t, f, []int{1, rows, d}, scaled)
	normed, err := s2.ev.run(&expr{op: program.OpNorm, attrs: program.Attrs{Norm: exec.NormParams{Kind: exec.NormRMS, Eps: 1e-6}}, args: []*val{x, g, nil}, out: f})
	if err != nil {
		t.Fatal(err)
	}
	s3, sc3, t3 := planted(t, f, []int{1, rows, d}, normed.data, x, g)
	if got := s3.fitLeaf(sc3, []*val{x}, []*val{g}, []*val{t3})[0]; got == nil || got.fit == nil || got.fit.kind != "norm" {
		t.Errorf("an RMS norm of rows near RMS 1 not kept a norm")
	}
}
