package cpu

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/precision"
)

// basicOnly is a backend that specialises nothing: the Basic ops of the
// CPU backend, with every Extended op from exec.Fallback.
type basicOnly struct {
	exec.Basic
	exec.Fallback
}

func newBasicOnly(bk *Backend) exec.Backend {
	return basicOnly{Basic: bk, Fallback: exec.Fallback{B: bk}}
}

// TestFallbackMatchesFused: the CPU backend's fused Modulate, GatedResidual
// and GLU are bit-identical to exec.Fallback's compositions, in every
// format and at every combination of rounding points.
func TestFallbackMatchesFused(t *testing.T) {
	bk := New(2)
	fb := newBasicOnly(bk)
	r := rand.New(rand.NewPCG(5, 6))
	rounds := []exec.Round{0, exec.RoundScale, exec.RoundProduct, exec.RoundGate,
		exec.RoundScale | exec.RoundProduct, exec.RoundGate | exec.RoundProduct, exec.RoundEach}
	for _, f := range []precision.Format{precision.BF16, precision.F16, precision.F32} {
		x := rnd(t, bk, r, f, 1, 2, 5, 8)
		y := rnd(t, bk, r, f, 1, 2, 5, 8)
		shift := rnd(t, bk, r, f, 0.3, 2, 8)
		scale := rnd(t, bk, r, f, 0.3, 2, 8)
		gate := rnd(t, bk, r, f, 1, 2, 8)
		for _, rd := range rounds {
			s := exec.Spec{Out: f, Round: rd}
			name := fmt.Sprintf("%v/%v", f, rd)
			for _, plus := range []bool{false, true} {
				p := exec.ModulateParams{PlusOne: plus}
				same(t, name+"/modulate", vals(t, bk)(bk.Modulate(x, shift, scale, p, s)), vals(t, bk)(fb.Modulate(x, shift, scale, p, s)))
				same(t, name+"/modulate no shift", vals(t, bk)(bk.Modulate(x, nil, scale, p, s)), vals(t, bk)(fb.Modulate(x, nil, scale, p, s)))
			}
			for _, g := range []exec.ActKind{exec.ActIdentity, exec.ActTanh, exec.ActSigmoid} {
				same(t, name+"/gated "+g.String(), vals(t, bk)(bk.GatedResidual(x, y, gate, g, s)), vals(t, bk)(fb.GatedResidual(x, y, gate, g, s)))
			}
			for _, g := range []exec.ActKind{exec.ActSiLU, exec.ActGELUTanh, exec.ActGELUErf} {
				same(t, name+"/glu "+g.String(), vals(t, bk)(bk.GLU(x, y, g, s)), vals(t, bk)(fb.GLU(x, y, g, s)))
			}
		}
	}
}

// TestFallbackOnlyBackendRuns: a backend with nothing but Basic still runs
// the whole Extended vocabulary.
func TestFallbackOnlyBackendRuns(t *testing.T) {
	bk := New(1)
	var b exec.Backend = newBasicOnly(bk)
	x := up(t, bk, f32, []int{1, 1, 4, 4}, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15)
	p, err := b.Patchify(x, exec.PatchParams{Patch: 2})
	if err != nil {
		t.Fatal(err)
	}
	near(t, "patchify", vals(t, bk)(b.Reshape(p, []int{16})), []float64{0, 1, 4, 5, 2, 3, 6, 7, 8, 9, 12, 13, 10, 11, 14, 15}, 0)
	ts := up(t, bk, f32, []int{1}, 0)
	e := vals(t, bk)(b.TimestepEmbed(ts, exec.TimestepParams{Dim: 2, Scale: 1, MaxPeriod: 10000}, exec.Out(f32)))
	near(t, "timestep", e, []float64{0, 1}, 0)
}
