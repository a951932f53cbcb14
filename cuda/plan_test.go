//go:build linux

package cuda

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	zexec "github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/cpu"
	"github.com/zflow/zflow/internal/hostdriver"
	"github.com/zflow/zflow/kernels"
	"github.com/zflow/zflow/precision"
)

// TestPlanRegionOnTheHost checks, without a GPU, the part of fusion that
// is this package's own: planRegion's translation of an exec.Region into
// an epilogue (op codes, the kernels' input order, which inputs are
// conditioning views, flags, formats, the operands' layout). Each region
// is planned over stand-in tensors of a backend that was never opened; the
// plan runs on the Host rendering of kernels.Epilogue, fed the CPU
// backend's head result; and the output must be the bytes of the CPU
// backend's unfused route (exec.RunUnfused), which the CUDA pointwise
// kernels equal bit for bit. Regions the epilogue cannot take must be
// declined.
func TestPlanRegionOnTheHost(t *testing.T) {
	cxx := ""
	for _, c := range []string{"c++", "g++", "clang++"} {
		if p, err := exec.LookPath(c); err == nil {
			cxx = p
			break
		}
	}
	if cxx == "" || testing.Short() {
		t.Skip("no C++ compiler (or -short): the host rendering is not run")
	}
	ref := cpu.New(0)
	b := &Backend{} // never opened: planRegion reads shapes and formats only
	// Stand-ins by the CPU tensor, and the CPU tensor by the stand-in's
	// buffer (a conditioning view of a stand-in shares it).
	stand := map[zexec.Tensor]*Tensor{}
	real := map[*buffer]zexec.Tensor{}
	standIn := func(x zexec.Tensor) zexec.Tensor {
		if x == nil {
			return nil
		}
		if s, ok := stand[x]; ok {
			return s
		}
		s := &Tensor{shape: x.Shape(), format: x.Format(), buf: &buffer{ptr: 1, refs: 1}, b: b}
		stand[x], real[s.buf] = s, x
		return s
	}
	mirror := func(r zexec.Region) zexec.Region {
		m := r
		for i, x := range r.Head.In {
			m.Head.In[i] = standIn(x)
		}
		m.Steps = make([]zexec.Step, len(r.Steps))
		for i, s := range r.Steps {
			m.Steps[i] = s
			m.Steps[i].In = make([]zexec.Tensor, len(s.In))
			for j, x := range s.In {
				m.Steps[i].In[j] = standIn(x)
			}
		}
		return m
	}
	var jobs []planJob
	const rows, k, d = 64, 48, 80
	for _, f := range []precision.Format{bf16, f16, f32} {
		u := func(n int, seed uint64, shape []int, g precision.Format, scale float64) zexec.Tensor {
			x, err := ref.Upload(withSpecials(randn(n, seed, scale)), shape, g)
			if err != nil {
				t.Fatal(err)
			}
			return x
		}
		x, w, bias := u(rows*k, 71, []int{2, rows / 2, k}, f, 1), u(d*k, 72, []int{d, k}, f, 0.1), u(d, 73, []int{d}, f, 0.1)
		xn, gamma := u(rows*d, 74, []int{2, rows / 2, d}, f, 2), u(d, 75, []int{d}, f, 1)
		steps, _ := fusionSteps(ref, t, rows, d, f)
		heads := map[string]zexec.Head{
			"linear":         {Op: zexec.HeadLinear, In: [3]zexec.Tensor{x, w, bias}, Spec: zexec.Out(f)},
			"linear f32 out": {Op: zexec.HeadLinear, In: [3]zexec.Tensor{x, w, nil}, Spec: zexec.Out(f32)},
			"norm": {Op: zexec.HeadNorm, In: [3]zexec.Tensor{xn, gamma, nil}, Norm: zexec.NormParams{Kind: zexec.NormLayer, Eps: 1e-5},
				Spec: zexec.Spec{Out: f, Round: zexec.RoundNormalized}},
		}
		var chains [][]string
		for n := range steps {
			chains = append(chains, []string{n})
		}
		chains = append(chains, fusionChains...)
		for _, head := range []string{"linear", "linear f32 out", "norm"} {
			for _, c := range chains {
				r := zexec.Region{Head: heads[head]}
				for _, n := range c {
					r.Steps = append(r.Steps, steps[n])
				}
				name := fmt.Sprintf("%v: %s: %s", f, head, strings.Join(c, ", "))
				p, why := b.planRegion(mirror(r))
				if p == nil {
					t.Errorf("%s: declined (%s)", name, why)
					continue
				}
				h, err := zexec.RunUnfused(ref, zexec.Region{Head: r.Head, Steps: []zexec.Step{{Op: zexec.StepCast, In: []zexec.Tensor{nil}, Format: r.Head.Spec.Out}}})
				if err != nil {
					t.Fatal(err)
				}
				want, err := zexec.RunUnfused(ref, r)
				if err != nil {
					t.Fatalf("%s: unfused: %v", name, err)
				}
				j := planJob{name: name, epi: p.epi, params: p.params, bufs: [][]byte{pack(t, ref, h, p.epi.In)}, want: pack(t, ref, want, p.epi.Out())}
				for _, o := range p.ops {
					j.bufs = append(j.bufs, pack(t, ref, real[o.buf], o.format))
				}
				jobs = append(jobs, j)
				ref.Free(h)
				ref.Free(want)
			}
		}
	}
	// Declined: what the kernels have no form for.
	{
		x, _ := ref.Upload(make([]float32, 8*16), []int{8, 16}, bf16)
		w, _ := ref.Upload(make([]float32, 16*16), []int{16, 16}, bf16)
		wide, _ := ref.Upload(make([]float32, 2*8*16), []int{2, 8, 16}, bf16)
		g, _ := ref.Upload(make([]float32, 8*16), []int{8, 16}, bf16)
		head := zexec.Head{Op: zexec.HeadLinear, In: [3]zexec.Tensor{x, w, nil}, Spec: zexec.Out(bf16)}
		gated := zexec.Step{Op: zexec.StepGatedResidual, In: []zexec.Tensor{g, nil, g}, Arg: 1, Spec: zexec.Out(bf16)}
		for _, c := range []struct {
			name  string
			steps []zexec.Step
		}{
			{"act with RoundEach", []zexec.Step{{Op: zexec.StepAct, In: []zexec.Tensor{nil}, Act: zexec.ActSiLU, Spec: zexec.Composed(bf16)}}},
			{"a step that widens the running value", []zexec.Step{{Op: zexec.StepAdd, In: []zexec.Tensor{nil, wide}, Spec: zexec.Out(bf16)}}},
			{"more operands than the kernel takes", []zexec.Step{gated, gated, gated, gated, gated}},
			{"modulate of a running scale", []zexec.Step{{Op: zexec.StepModulate, In: []zexec.Tensor{g, g, nil}, Arg: 2, Spec: zexec.Out(bf16)}}},
		} {
			if p, _ := b.planRegion(mirror(zexec.Region{Head: head, Steps: c.steps})); p != nil {
				t.Errorf("%s: planned, want declined", c.name)
			}
		}
	}
	got := runPlans(t, cxx, jobs)
	for i, j := range jobs {
		// Bit for bit, but for NaN's sign and payload (the CPU backend
		// makes its own NaN where the kernels pass an input's on); zeros
		// keep their sign (minimum and maximum order −0 below +0, as
		// exec.Min32 and Max32 do).
		f := j.epi.Out()
		g, w := unpackBits(got[i], f), unpackBits(j.want, f)
		bad := 0
		for e := range w {
			if g[e] == w[e] || isNaN(g[e], f) && isNaN(w[e], f) {
				continue
			}
			if bad == 0 {
				t.Logf("%s: [%d] planned %#x, unfused %#x", j.name, e, g[e], w[e])
			}
			bad++
		}
		if bad > 0 || len(g) != len(w) {
			t.Errorf("%s: %d of %d values differ from the unfused route", j.name, bad, len(w))
		}
	}
	t.Logf("%d regions planned, each bit-exact with the unfused route on the Host rendering", len(jobs))
}

// pack downloads x and stores it as format f does on the device.
func pack(t *testing.T, b zexec.Backend, x zexec.Tensor, f precision.Format) []byte {
	t.Helper()
	if x == nil {
		return nil
	}
	v, err := b.Download(x)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	for _, e := range v {
		switch f {
		case precision.BF16:
			binary.Write(&out, binary.LittleEndian, precision.BF16Bits(e))
		case precision.F16:
			binary.Write(&out, binary.LittleEndian, precision.F16Bits(e))
		default:
			binary.Write(&out, binary.LittleEndian, math.Float32bits(e))
		}
	}
	return out.Bytes()
}

// unpackBits reads stored values as their bit patterns.
func unpackBits(b []byte, f precision.Format) []uint32 {
	if f == precision.BF16 || f == precision.F16 {
		out := make([]uint32, len(b)/2)
		for i := range out {
			out[i] = uint32(binary.LittleEndian.Uint16(b[2*i:]))
		}
		return out
	}
	out := make([]uint32, len(b)/4)
	for i := range out {
		out[i] = binary.LittleEndian.Uint32(b[4*i:])
	}
	return out
}

// isNaN reports whether bits u of format f are a NaN.
func isNaN(u uint32, f precision.Format) bool {
	switch f {
	case precision.BF16:
		return u&0x7FFF > 0x7F80
	case precision.F16:
		return u&0x7FFF > 0x7C00
	}
	return u&0x7FFFFFFF > 0x7F800000
}

// planJob is one planned region on the Host rendering.
type planJob struct {
	name   string
	epi    kernels.Epilogue
	params kernels.EpiP
	bufs   [][]byte // x, then the operands
	want   []byte   // the unfused route's result, as stored
}

// runPlans compiles the jobs' epilogues (Host rendering) with a driver
// and returns each job's output.
func runPlans(t *testing.T, cxx string, jobs []planJob) [][]byte {
	t.Helper()
	var eps []kernels.Epilogue
	var drv strings.Builder
	drv.WriteString(`
#include <cstdio>
#include <vector>
int main(int argc, char** argv) {
  FILE* in = fopen(argv[1], "rb");
  FILE* out = fopen(argv[2], "wb");
  if (!in || !out) return 2;
  int k;
  while (fread(&k, 4, 1, in) == 1) {
    zf_epi_p p;
    std::vector<uchar> buf[9];
    long long n;
    if (fread(&p, sizeof p, 1, in) != 1) return 2;
    for (int i = 0; i < 9; i++) {
      if (fread(&n, 8, 1, in) != 1) return 2;
      buf[i].resize(n > 0 ? n : 1);
      if (n > 0 && fread(buf[i].data(), 1, n, in) != (size_t)n) return 2;
    }
    if (fread(&n, 8, 1, in) != 1) return 2;
    std::vector<uchar> y(n > 0 ? n : 1);
    switch (k) {
`)
	for i, j := range jobs {
		eps = append(eps, j.epi)
		fmt.Fprintf(&drv, "    case %d: %s(y.data(), buf[0].data(), buf[1].data(), buf[2].data(), buf[3].data(), buf[4].data(), buf[5].data(), buf[6].data(), buf[7].data(), buf[8].data(), p); break;\n", i, j.epi.Name())
	}
	drv.WriteString("    default: return 2;\n    }\n    fwrite(y.data(), 1, n, out);\n  }\n  fclose(out);\n  return 0;\n}\n")
	src, err := kernels.RenderEpilogues(kernels.Host, eps...)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cc, bin := filepath.Join(dir, "plans.cc"), filepath.Join(dir, "plans")
	if err := os.WriteFile(cc, []byte(src+drv.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(cxx, "-std=c++20", "-O1", "-ffp-contract=off", "-fno-fast-math", "-pthread", "-o", bin, cc, "-lm").CombinedOutput(); err != nil {
		t.Fatalf("compiling the planned epilogues: %v\n%s", err, out)
	}
	var in bytes.Buffer
	for i, j := range jobs {
		binary.Write(&in, binary.LittleEndian, int32(i))
		in.Write(kernels.Bytes(&j.params))
		for k := 0; k < 9; k++ {
			var b []byte
			if k < len(j.bufs) {
				b = j.bufs[k]
			}
			binary.Write(&in, binary.LittleEndian, int64(len(b)))
			in.Write(b)
		}
		binary.Write(&in, binary.LittleEndian, int64(len(j.want)))
	}
	all := hostdriver.Run(t, bin, "the planned epilogues", in.Bytes())
	got := make([][]byte, len(jobs))
	pos := 0
	for i, j := range jobs {
		if pos+len(j.want) > len(all) {
			t.Fatalf("%s: output short", j.name)
		}
		got[i] = all[pos : pos+len(j.want)]
		pos += len(j.want)
	}
	return got
}

// cudaStubs declare the CUDA words the kernels use, so that a host C++
// compiler can parse a CUDA rendering (types and syntax; nothing runs).
const cudaStubs = `#include <cmath>
#include <cstring>
using std::exp; using std::exp2; using std::tanh; using std::erf; using std::sin; using std::cos;
using std::atan; using std::log; using std::sqrt;
#define __device__
#define __global__
#define __forceinline__ inline
#define __launch_bounds__(...)
struct zf_stub_dim3 { unsigned x, y, z; };
static zf_stub_dim3 blockIdx, blockDim, threadIdx, gridDim;
static inline unsigned __float_as_uint(float x) { unsigned u; memcpy(&u, &x, 4); return u; }
static inline float __uint_as_float(unsigned u) { float x; memcpy(&x, &u, 4); return x; }
static inline double __shfl_xor_sync(unsigned, double v, int) { return v; }
static inline void __syncthreads() {}
static inline float __fsqrt_rn(float x) { return std::sqrt(x); }
static inline int __clz(int x) { return __builtin_clz((unsigned)x); }
static inline double __longlong_as_double(long long u) { double x; memcpy(&x, &u, 8); return x; }
static inline unsigned __umulhi(unsigned a, unsigned b) { return (unsigned)(((unsigned long long)a * b) >> 32); }
#define __shared__ static
#define ulong zf_stub_ulong /* the CUDA prelude's ulong, not glibc's */
`

// TestFusedSourcesParse parses, with CUDA's words stubbed, what fusion
// compiles with NVRTC on a GPU: the epilogue modules and the norm kernel
// with a chain in its stores, and the plain one specialised (normFix): the
// cuda-only text no Host rendering covers.
func TestFusedSourcesParse(t *testing.T) {
	cxx := ""
	for _, c := range []string{"c++", "g++", "clang++"} {
		if p, err := exec.LookPath(c); err == nil {
			cxx = p
			break
		}
	}
	if cxx == "" || testing.Short() {
		t.Skip("no C++ compiler (or -short)")
	}
	chains := []kernels.Epilogue{
		{In: precision.BF16, Steps: []kernels.Step{{Op: kernels.OpModulate, Flags: kernels.PlusOne | kernels.HasShift, Out: precision.BF16}}},
		{In: precision.F32, Steps: []kernels.Step{{Op: kernels.OpCast, Out: precision.BF16}, {Op: kernels.OpAct, Act: int32(zexec.ActGELUTanh), Out: precision.BF16},
			{Op: kernels.OpGated, Act: int32(zexec.ActTanh), Flags: kernels.RGate, Arg: 1, Out: precision.F16}}},
		{In: precision.BF16, Steps: []kernels.Step{{Op: kernels.OpRope, Flags: kernels.RProduct, Out: precision.BF16}, {Op: kernels.OpMul, Out: precision.BF16}}},
	}
	dir := t.TempDir()
	for i, e := range chains {
		fix, suffix := normFix(normP{G: 128, Kind: 2, Flags: kernels.RNormalized, FmtX: 2, FmtG: 2, OutFmt: 2, HasG: 1, Lanes: 8, Pair: 1})
		norm, err := normEpilogueSource(e, e.Name()+"_norm"+suffix, fix)
		if err != nil {
			t.Fatal(err)
		}
		epi, err := kernels.RenderEpilogues(kernels.CUDA, e)
		if err != nil {
			t.Fatal(err)
		}
		plain, err := specNormSource("zf_norm"+suffix, fix)
		if err != nil {
			t.Fatal(err)
		}
		for j, src := range []string{norm, epi, pointwiseSource(), plain} {
			path := filepath.Join(dir, fmt.Sprintf("m%d_%d.cc", i, j))
			if err := os.WriteFile(path, []byte(cudaStubs+src), 0o644); err != nil {
				t.Fatal(err)
			}
			if out, err := exec.Command(cxx, "-std=c++17", "-fsyntax-only", "-Wno-unknown-pragmas", path).CombinedOutput(); err != nil {
				t.Errorf("%s: source %d does not parse: %v\n%s", e.Name(), j, err, out)
			}
		}
	}
}
