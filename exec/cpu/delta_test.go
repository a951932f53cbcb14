package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/precision"
)

// deltaInputs are a gated delta-rule scan's operands on the host.
type deltaInputs struct {
	n                 exec.DeltaDims
	q, k, v, g, beta  []float32
	qShape, vShape    []int
	gShape, betaShape []int
}

func randomDelta(r *rand.Rand, n exec.DeltaDims) deltaInputs {
	norm := func(k int, scale float64) []float32 {
		v := make([]float32, k)
		for i := range v {
			v[i] = float32(scale * r.NormFloat64())
		}
		return v
	}
	in := deltaInputs{n: n, q: norm(n.B*n.L*n.G*n.K, 1/math.Sqrt(float64(n.K))), k: norm(n.B*n.L*n.G*n.K, 1/math.Sqrt(float64(n.K))),
		v: norm(n.B*n.L*n.H*n.V, 1)}
	in.g = make([]float32, n.B*n.L*n.H)
	in.beta = make([]float32, n.B*n.L*n.H)
	for i := range in.g {
		in.g[i] = float32(-2 * r.Float64()) // log decays: ≤ 0
		in.beta[i] = float32(r.Float64())   // sigmoid outputs
	}
	in.qShape, in.vShape = []int{n.B, n.L, n.G, n.K}, []int{n.B, n.L, n.H, n.V}
	in.gShape, in.betaShape = []int{n.B, n.L, n.H}, []int{n.B, n.L, n.H}
	return in
}

// naiveDelta is the recurrence S_t = exp(g_t)·S_{t−1}(I − β k kᵀ) + β k vᵀ,
// y_t = q_tᵀS_t in float64, written as the matrix product.
func naiveDelta(in deltaInputs) []float64 {
	n := in.n
	out := make([]float64, n.B*n.L*n.H*n.V)
	for b := range n.B {
		for h := range n.H {
			grp := h / (n.H / n.G)
			s := make([]float64, n.K*n.V)
			for t := range n.L {
				row := b*n.L + t
				a, beta := math.Exp(float64(in.g[row*n.H+h])), float64(in.beta[row*n.H+h])
				k := in.k[(row*n.G+grp)*n.K:]
				q := in.q[(row*n.G+grp)*n.K:]
				v := in.v[(row*n.H+h)*n.V:]
				next := make([]float64, n.K*n.V)
				for i := range n.K {
					for j := range n.V {
						// (I − β k kᵀ) applied on the left of S [K, V]
						var m float64
						for l := range n.K {
							c := -beta * float64(k[i]) * float64(k[l])
							if l == i {
								c++
							}
							m += c * s[l*n.V+j]
						}
						next[i*n.V+j] = a*m + beta*float64(k[i])*float64(v[j])
					}
				}
				s = next
				for j := range n.V {
					var y float64
					for i := range n.K {
						y += float64(q[i]) * s[i*n.V+j]
					}
					out[(row*n.H+h)*n.V+j] = y
				}
			}
		}
	}
	return out
}

func runDelta(t *testing.T, be exec.Backend, in deltaInputs, s exec.Spec) (exec.Tensor, error) {
	t.Helper()
	var ts []exec.Tensor
	for _, x := range []struct {
		d     []float32
		shape []int
	}{{in.q, in.qShape}, {in.k, in.qShape}, {in.v, in.vShape}, {in.g, in.gShape}, {in.beta, in.betaShape}} {
		u, err := be.Upload(x.d, x.shape, precision.F32)
		if err != nil {
			t.Fatal(err)
		}
		ts = append(ts, u)
	}
	return be.DeltaScan(ts[0], ts[1], ts[2], ts[3], ts[4], s)
}

// TestDeltaScanMatchesNaive: the scan is within 1e-6 rel-RMS of the
// recurrence written as S·exp(g)(I − β k kᵀ) + β k vᵀ in float64, with one
// key group per head and with groups shared by several heads; bf16 output
// is the f32 result rounded once.
func TestDeltaScanMatchesNaive(t *testing.T) {
	bk := New(2)
	r := rand.New(rand.NewPCG(21, 22))
	for _, n := range []exec.DeltaDims{
		{B: 1, L: 1, H: 1, V: 1, G: 1, K: 1},
		{B: 1, L: 8, H: 4, V: 8, G: 2, K: 8}, // heads sharing key groups (repeat_interleave)
		{B: 2, L: 13, H: 3, V: 5, G: 3, K: 7},
	} {
		t.Run(fmt.Sprintf("%+v", n), func(t *testing.T) {
			in := randomDelta(r, n)
			ref := naiveDelta(in)
			checkScan(t, bk, ref, "matrix form", func(s exec.Spec) (exec.Tensor, error) { return runDelta(t, bk, in, s) })
		})
	}
}

// TestDeltaScanRefuses: malformed operands are errors naming the problem;
// a rounding point or a math variant, and a backend without the kernel
// (exec.Fallback's), are refused with ErrUnsupported.
func TestDeltaScanRefuses(t *testing.T) {
	bk := New(1)
	good := randomDelta(rand.New(rand.NewPCG(1, 2)), exec.DeltaDims{B: 1, L: 4, H: 4, V: 2, G: 2, K: 3})
	with := func(f func(*deltaInputs)) deltaInputs { c := good; f(&c); return c }
	for _, c := range []struct {
		name        string
		be          exec.Backend
		in          deltaInputs
		s           exec.Spec
		unsupported bool
		want        string
	}{
		{"groups do not divide heads", bk, with(func(c *deltaInputs) {
			c.qShape, c.q, c.k = []int{1, 4, 3, 3}, make([]float32, 4*3*3), make([]float32, 4*3*3)
		}), exec.Out(precision.F32), false, "groups do not divide"},
		{"beta of another length", bk, with(func(c *deltaInputs) { c.betaShape, c.beta = []int{1, 3, 4}, c.beta[:12] }), exec.Out(precision.F32), false, "g or beta"},
		{"a rounding point", bk, good, exec.Spec{Out: precision.BF16, Round: exec.RoundProduct}, true, "rounds once"},
		{"a math variant", bk, good, exec.Spec{Out: precision.F32, Math: exec.MathFastExp}, true, "precise math"},
		{"no kernel", newBasicOnly(bk), good, exec.Out(precision.F32), true, "no delta-rule scan kernel"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := runDelta(t, c.be, c.in, c.s)
			refused(t, err, "delta_scan", c.want, c.unsupported)
		})
	}
}
