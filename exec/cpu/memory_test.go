package cpu

import (
	"errors"
	"math"
	"math/cmplx"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/precision"
)

// memoryInputs are a gated matrix-memory scan's operands on the host.
type memoryInputs struct {
	n             exec.MemoryDims
	q, k, v, i, f []float32
}

func randomMemory(r *rand.Rand, n exec.MemoryDims) memoryInputs {
	norm := func(k int, scale, shift float64) []float32 {
		v := make([]float32, k)
		for i := range v {
			v[i] = float32(shift + scale*r.NormFloat64())
		}
		return v
	}
	in := memoryInputs{n: n, q: norm(n.B*n.L*n.H*n.K, 1, 0), k: norm(n.B*n.L*n.H*n.K, 1, 0), v: norm(n.B*n.L*n.H*n.V, 1, 0),
		i: norm(n.B*n.L*n.H, 2, 0)}
	in.f = make([]float32, n.B*n.L*n.H)
	for j := range in.f {
		// log σ of a preactivation: ≤ 0
		x := 2*r.NormFloat64() + 1
		in.f[j] = float32(-math.Log1p(math.Exp(-x)))
	}
	return in
}

// naiveMemory is the scan without its stabiliser, in float64: per head,
// with F_t = Σ_{r≤t} f_r, the quadratic form
//
//	num_t = Σ_{s≤t} exp(F_t − F_s + i_s)·(q_t·k_s)·v_s, den_t = Σ_{s≤t} exp(F_t − F_s + i_s)·(q_t·k_s),
//	y_t = num_t / (max(|den_t|, 1) + eps·exp(m_t)),
//
// m_t the stabiliser's own recurrence (max(f_t + m_{t−1}, i_t) from 0):
// the stabilised scan divided through by exp(−m_t).
func naiveMemory(in memoryInputs, eps float64) []float64 {
	n := in.n
	out := make([]float64, n.B*n.L*n.H*n.V)
	for b := range n.B {
		for h := range n.H {
			at := func(t int) int { return (b*n.L+t)*n.H + h }
			cum := make([]float64, n.L)
			m := 0.0
			for t := range n.L {
				prev := 0.0
				if t > 0 {
					prev = cum[t-1]
				}
				cum[t] = prev + float64(in.f[at(t)])
				m = math.Max(float64(in.f[at(t)])+m, float64(in.i[at(t)]))
				num := make([]float64, n.V)
				var den float64
				for s := 0; s <= t; s++ {
					w := math.Exp(cum[t] - cum[s] + float64(in.i[at(s)]))
					var qk float64
					for i := range n.K {
						qk += float64(in.q[at(t)*n.K+i]) * float64(in.k[at(s)*n.K+i])
					}
					for j := range n.V {
						num[j] += w * qk * float64(in.v[at(s)*n.V+j])
					}
					den += w * qk
				}
				d := math.Max(math.Abs(den), 1) + eps*math.Exp(m)
				for j := range n.V {
					out[at(t)*n.V+j] = num[j] / d
				}
			}
		}
	}
	return out
}

func runMemory(t *testing.T, be exec.Backend, in memoryInputs, eps float32, s exec.Spec) (exec.Tensor, error) {
	t.Helper()
	n := in.n
	up := func(d []float32, shape ...int) exec.Tensor {
		x, err := be.Upload(d, shape, precision.F32)
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	g := []int{n.B, n.L, n.H}
	return be.MemoryScan(up(in.q, n.B, n.L, n.H, n.K), up(in.k, n.B, n.L, n.H, n.K), up(in.v, n.B, n.L, n.H, n.V), up(in.i, g...), up(in.f, g...), eps, s)
}

// TestMemoryScan: the scan, f32, is within 1e-6 rel-RMS of its quadratic
// form computed without the stabiliser in float64 (input gates large
// enough that the stabiliser moves, an eps large enough to matter), and
// its bf16 output is the f32 result rounded once.
func TestMemoryScan(t *testing.T) {
	bk := New(2)
	for _, n := range []exec.MemoryDims{{B: 1, L: 12, H: 3, K: 4, V: 8}, {B: 2, L: 7, H: 2, K: 8, V: 4}} {
		in := randomMemory(rand.New(rand.NewPCG(uint64(n.L), 9)), n)
		for _, eps := range []float32{1e-6, 0.5} {
			checkScan(t, bk, naiveMemory(in, float64(eps)), "quadratic form", func(s exec.Spec) (exec.Tensor, error) { return runMemory(t, bk, in, eps, s) })
		}
	}
}

// TestMemoryScanRefuses: malformed operands and a bad eps are errors
// naming the problem; a rounding point, a math variant and a backend
// without the kernel (exec.Fallback's) are refused with ErrUnsupported.
func TestMemoryScanRefuses(t *testing.T) {
	bk := New(1)
	good := randomMemory(rand.New(rand.NewPCG(1, 2)), exec.MemoryDims{B: 1, L: 4, H: 2, K: 3, V: 2})
	short := good
	short.n.H = 3
	short.i, short.f = make([]float32, 4*3), make([]float32, 4*3)
	short.q, short.k = make([]float32, 4*3*3), make([]float32, 4*3*3)
	for _, c := range []struct {
		name        string
		be          exec.Backend
		in          memoryInputs
		eps         float32
		s           exec.Spec
		unsupported bool
		want        string
	}{
		{"v of other heads", bk, short, 1e-6, exec.Out(precision.F32), false, "v is not"},
		{"a negative eps", bk, good, -1, exec.Out(precision.F32), false, "eps"},
		{"a rounding point", bk, good, 1e-6, exec.Spec{Out: precision.BF16, Round: exec.RoundProduct}, true, "rounds once"},
		{"a math variant", bk, good, 1e-6, exec.Spec{Out: precision.F32, Math: exec.MathFastExp}, true, "precise math"},
		{"no kernel", newBasicOnly(bk), good, 1e-6, exec.Out(precision.F32), true, "no matrix-memory scan kernel"},
	} {
		t.Run(c.name, func(t *testing.T) {
			// v is [1, 4, 2, 2] throughout: another head count than q's in
			// the first case
			n := c.in.n
			up := func(d []float32, shape ...int) exec.Tensor {
				x, e := c.be.Upload(d, shape, precision.F32)
				if e != nil {
					t.Fatal(e)
				}
				return x
			}
			_, err := c.be.MemoryScan(up(c.in.q, n.B, n.L, n.H, n.K), up(c.in.k, n.B, n.L, n.H, n.K), up(good.v, 1, 4, 2, 2), up(c.in.i, n.B, n.L, n.H), up(c.in.f, n.B, n.L, n.H), c.eps, c.s)
			refused(t, err, "memory_scan", c.want, c.unsupported)
		})
	}
}

// TestFFT2Real: the transform's real part, f32, is within 1e-6 rel-RMS of
// the 2-D DFT computed with complex exponentials in float64 (no angle
// reduction), on a batch of matrices of sizes neither a power of two nor
// square; bf16 is the f32 result rounded once; a backend without the
// kernel refuses it.
func TestFFT2Real(t *testing.T) {
	bk := New(2)
	r := rand.New(rand.NewPCG(4, 4))
	const bs, rows, cols = 2, 12, 10
	x := make([]float32, bs*rows*cols)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	ref := make([]float64, len(x))
	for b := range bs {
		for a := range rows {
			for c := range cols {
				var z complex128
				for n := range rows {
					for m := range cols {
						ang := -2 * math.Pi * (float64(a*n)/rows + float64(c*m)/cols)
						z += complex(float64(x[(b*rows+n)*cols+m]), 0) * cmplx.Exp(complex(0, ang))
					}
				}
				ref[(b*rows+a)*cols+c] = real(z)
			}
		}
	}
	run := func(be exec.Backend) func(exec.Spec) (exec.Tensor, error) {
		return func(s exec.Spec) (exec.Tensor, error) {
			in, err := be.Upload(x, []int{bs, rows, cols}, precision.F32)
			if err != nil {
				t.Fatal(err)
			}
			return be.FFT2Real(in, s)
		}
	}
	checkScan(t, bk, ref, "complex DFT", run(bk))
	if _, err := run(newBasicOnly(bk))(exec.Out(precision.F32)); !errors.Is(err, exec.ErrUnsupported) || !strings.Contains(err.Error(), "fft2_real") {
		t.Errorf("a backend without the kernel: %v, want ErrUnsupported naming fft2_real", err)
	}
	in, _ := bk.Upload(x[:cols], []int{cols}, precision.F32)
	if _, err := bk.FFT2Real(in, exec.Out(precision.F32)); err == nil || !strings.Contains(err.Error(), "fft2_real") {
		t.Errorf("a vector: %v, want an error naming fft2_real", err)
	}
}
