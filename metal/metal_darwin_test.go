//go:build darwin

package metal

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/cpu"
	"github.com/zflow/zflow/precision"
)

// TestAgainstCPU runs the wired ops on the Metal device and compares them
// with the CPU backend. Written for a Mac; it has not been run (README.md).
// Activations through exp/tanh/erf are compared within 4 bf16 ulps (Metal
// has no f64: see package kernels); everything else must be bit-exact.
func TestAgainstCPU(t *testing.T) {
	b, err := New()
	if err != nil {
		t.Skipf("no Metal device: %v", err)
	}
	ref := cpu.New(0)
	r := rand.New(rand.NewPCG(1, 2))
	data := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(r.NormFloat64() * 2)
		}
		return v
	}
	shape := []int{2, 64, 256}
	n := 2 * 64 * 256
	xd, yd, cd := data(n), data(n), data(2*256)
	up := func(v []float32, s []int) (exec.Tensor, exec.Tensor) {
		c, err := ref.Upload(v, s, precision.BF16)
		if err != nil {
			t.Fatal(err)
		}
		g, err := b.Upload(v, s, precision.BF16)
		if err != nil {
			t.Fatal(err)
		}
		return c, g
	}
	xc, xg := up(xd, shape)
	yc, yg := up(yd, shape)
	cc, cg := up(cd, []int{2, 256})
	s := exec.Composed(precision.BF16)
	type pair struct {
		name  string
		exact bool
		c, g  func() (exec.Tensor, error)
	}
	cases := []pair{
		{"add", true, func() (exec.Tensor, error) { return ref.Add(xc, yc, s) }, func() (exec.Tensor, error) { return b.Add(xg, yg, s) }},
		{"modulate", true, func() (exec.Tensor, error) {
			return ref.Modulate(xc, cc, cc, exec.ModulateParams{PlusOne: true}, s)
		}, func() (exec.Tensor, error) { return b.Modulate(xg, cg, cg, exec.ModulateParams{PlusOne: true}, s) }},
		{"gated residual", true, func() (exec.Tensor, error) { return ref.GatedResidual(xc, yc, cc, exec.ActIdentity, s) },
			func() (exec.Tensor, error) { return b.GatedResidual(xg, yg, cg, exec.ActIdentity, s) }},
		{"relu", true, func() (exec.Tensor, error) { return ref.Act(xc, exec.ActReLU, s) }, func() (exec.Tensor, error) { return b.Act(xg, exec.ActReLU, s) }},
		{"gelu_tanh", false, func() (exec.Tensor, error) { return ref.Act(xc, exec.ActGELUTanh, s) }, func() (exec.Tensor, error) { return b.Act(xg, exec.ActGELUTanh, s) }},
		{"permute", true, func() (exec.Tensor, error) { return ref.Permute(xc, []int{0, 2, 1}) }, func() (exec.Tensor, error) { return b.Permute(xg, []int{0, 2, 1}) }},
	}
	for _, c := range cases {
		ct, err := c.c()
		if err != nil {
			t.Fatal(err)
		}
		gt, err := c.g()
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		want, _ := ref.Download(ct)
		got, err := b.Download(gt)
		if err != nil {
			t.Fatal(err)
		}
		bad := 0
		for i := range want {
			d := math.Abs(float64(got[i]) - float64(want[i]))
			if c.exact && got[i] != want[i] || !c.exact && d > 4*math.Abs(float64(want[i]))/128+1e-30 {
				bad++
			}
		}
		if bad > 0 {
			t.Errorf("%s: %d of %d values differ", c.name, bad, len(want))
		}
	}
}
