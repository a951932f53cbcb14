package kernels

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"unsafe"

	zexec "github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/cpu"
	"github.com/zflow/zflow/internal/hostdriver"
	"github.com/zflow/zflow/precision"
)

// The host semantic test: the Host rendering of pointwise.zf, compiled by
// the machine's C++ compiler, runs the same kernels (one host thread) on
// the parameter blocks this package builds, and every output must equal the
// CPU backend's bit for bit. The CUDA and MSL renderings differ from this
// one only in their preludes.

// driverOpening is the host drivers' first lines: a reader of n bytes
// and main's opening of the job file (argv[1]) and the output (argv[2]).
const driverOpening = `
#include <cstdio>
#include <cstdlib>
#include <vector>
static std::vector<uchar> rd(FILE* f, long long n) {
  std::vector<uchar> b(n > 0 ? n : 1);
  if (n > 0 && fread(b.data(), 1, n, f) != (size_t)n) { fprintf(stderr, "short read\n"); exit(2); }
  return b;
}
int main(int argc, char** argv) {
  FILE* in = fopen(argv[1], "rb");
  FILE* out = fopen(argv[2], "wb");
  if (!in || !out) { perror("open"); return 2; }
  int kernel;
`

const hostDriver = driverOpening + `  while (fread(&kernel, 4, 1, in) == 1) {
    int psize;
    if (fread(&psize, 4, 1, in) != 1) return 2;
    std::vector<uchar> p = rd(in, psize);
    std::vector<uchar> buf[6];
    for (int k = 0; k < 6; k++) { long long n; if (fread(&n, 8, 1, in) != 1) return 2; buf[k] = rd(in, n); }
    long long on;
    if (fread(&on, 8, 1, in) != 1) return 2;
    std::vector<uchar> y(on > 0 ? on : 1);
    switch (kernel) {
    case 1: zf_elementwise(y.data(), buf[0].data(), buf[1].data(), buf[2].data(), *(const zf_ew*)p.data()); break;
    case 2: zf_rope_kernel(y.data(), buf[0].data(), buf[1].data(), buf[2].data(), *(const zf_rope_p*)p.data()); break;
    case 3: zf_timestep(y.data(), buf[0].data(), *(const zf_temb_p*)p.data()); break;
    case 4: zf_copy(y.data(), buf[0].data(), *(const zf_copy_p*)p.data()); break;
    case 5: zf_norm_seq(y.data(), buf[0].data(), buf[1].data(), buf[2].data(), *(const zf_norm_seq_p*)p.data()); break;
    case 6: zf_linear_seq(y.data(), buf[0].data(), buf[1].data(), buf[2].data(), *(const zf_linear_seq_p*)p.data()); break;
    case 7: zf_attention_seq(y.data(), buf[0].data(), buf[1].data(), buf[2].data(), buf[3].data(), buf[4].data(), buf[5].data(),
                             *(const zf_attention_seq_p*)p.data()); break;
    case 8: {
      const zf_linear_seq_p& lp = *(const zf_linear_seq_p*)p.data();
      zf_host_groups((lp.m + ZF_GEMM_BM - 1) / ZF_GEMM_BM * ((lp.n + ZF_GEMM_BN - 1) / ZF_GEMM_BN), ZF_GEMM_THREADS,
                     [&] { zf_linear_tiled(y.data(), buf[0].data(), buf[1].data(), buf[2].data(), lp); });
      break;
    }
    case 9:
    case 10: {
      const zf_attention_seq_p& ap = *(const zf_attention_seq_p*)p.data();
      int groups = ap.b * ap.h * ((ap.sq + ZF_AT_ROWS - 1) / ZF_AT_ROWS);
      zf_host_groups(groups, ZF_AT_THREADS, [&] {
        if (kernel == 9) {
          zf_attention_tiled(y.data(), buf[0].data(), buf[1].data(), buf[2].data(), buf[3].data(), buf[4].data(), buf[5].data(), ap);
        } else {
          zf_attention_flash(y.data(), buf[0].data(), buf[1].data(), buf[2].data(), buf[3].data(), buf[4].data(), buf[5].data(), ap);
        }
      });
      break;
    }
    default: fprintf(stderr, "kernel %d\n", kernel); return 2;
    }
    fwrite(y.data(), 1, on, out);
  }
  fclose(out);
  return 0;
}
`

// hostJob is one kernel run: its parameter block, input buffers and the
// CPU backend's result to compare with.
type hostJob struct {
	name   string
	kernel int32
	params []byte
	bufs   [6][]byte
	want   []float32
	fmt    precision.Format
}

// pack stores values in format f as the GPU backends do.
func pack(v []float32, f precision.Format) []byte {
	var b bytes.Buffer
	for _, x := range v {
		switch f {
		case precision.BF16:
			binary.Write(&b, binary.LittleEndian, precision.BF16Bits(x))
		case precision.F16:
			binary.Write(&b, binary.LittleEndian, precision.F16Bits(x))
		default:
			binary.Write(&b, binary.LittleEndian, x)
		}
	}
	return b.Bytes()
}

func unpack(b []byte, f precision.Format) []float32 {
	if f == precision.BF16 || f == precision.F16 {
		out := make([]float32, len(b)/2)
		for i := range out {
			h := binary.LittleEndian.Uint16(b[2*i:])
			if f == precision.BF16 {
				out[i] = precision.BF16ToF32(h)
			} else {
				out[i] = precision.F16ToF32(h)
			}
		}
		return out
	}
	out := make([]float32, len(b)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}

func esize(f precision.Format) int {
	if f == precision.BF16 || f == precision.F16 {
		return 2
	}
	return 4
}

// values draws n inputs: mostly N(0, σ²) with σ in [0.1, 8], with special
// values (±0, ±Inf, NaN, subnormals, the bf16/f16 overflow edges) mixed in.
func values(r *rand.Rand, n int) []float32 {
	special := []float32{0, float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.Inf(-1)),
		float32(math.NaN()), 1e-40, -3e-39, 65504, 65520, -65519.99, 3.3895314e38, 1e-8, 20, -20, 9.99, -10.01, 88.7, -87.4}
	v := make([]float32, n)
	for i := range v {
		if r.IntN(50) == 0 {
			v[i] = special[r.IntN(len(special))]
			continue
		}
		v[i] = float32(r.NormFloat64() * (0.1 + 8*r.Float64()))
	}
	return v
}

func upload(t *testing.T, b *cpu.Backend, v []float32, shape []int, f precision.Format) zexec.Tensor {
	t.Helper()
	x, err := b.Upload(v, shape, f)
	if err != nil {
		t.Fatal(err)
	}
	return x
}

func data(t *testing.T, b *cpu.Backend, x zexec.Tensor) []float32 {
	t.Helper()
	d, err := b.Download(x)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// compileHost compiles the Host rendering followed by driver (a main) and
// returns the binary's path; it skips where there is no C++ compiler.
func compileHost(t *testing.T, driver string) string {
	t.Helper()
	src, err := Render(Host)
	if err != nil {
		t.Fatal(err)
	}
	return compileSource(t, src+driver)
}

// compileSource compiles a whole Host-rendered program (skipping where
// there is no C++ compiler) and returns the binary's path.
func compileSource(t *testing.T, src string) string {
	t.Helper()
	cxx := ""
	for _, c := range []string{"c++", "g++", "clang++"} {
		if p, err := exec.LookPath(c); err == nil {
			cxx = p
			break
		}
	}
	if cxx == "" {
		t.Skip("no C++ compiler on PATH: the host rendering is not checked")
	}
	if testing.Short() {
		t.Skip("-short: skipping the host rendering's compile")
	}
	dir := t.TempDir()
	srcPath := filepath.Join(dir, "host.cc")
	if err := os.WriteFile(srcPath, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "host")
	cmd := exec.Command(cxx, "-std=c++20", "-O1", "-ffp-contract=off", "-fno-fast-math", "-pthread", "-o", bin, srcPath, "-lm")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("compiling the host rendering: %v\n%s", err, out)
	}
	return bin
}

func TestHostRenderingMatchesCPU(t *testing.T) {
	bin := compileHost(t, hostDriver)
	jobs := append(hostJobs(t), rowJobs(t)...)
	var in bytes.Buffer
	for _, j := range jobs {
		binary.Write(&in, binary.LittleEndian, j.kernel)
		binary.Write(&in, binary.LittleEndian, int32(len(j.params)))
		in.Write(j.params)
		for _, b := range j.bufs {
			binary.Write(&in, binary.LittleEndian, int64(len(b)))
			in.Write(b)
		}
		binary.Write(&in, binary.LittleEndian, int64(len(j.want)*esize(j.fmt)))
	}
	outs := hostdriver.Run(t, bin, "the host rendering", in.Bytes())
	pos, total := 0, 0
	for _, j := range jobs {
		n := len(j.want) * esize(j.fmt)
		if pos+n > len(outs) {
			t.Fatalf("%s: output short", j.name)
		}
		got := unpack(outs[pos:pos+n], j.fmt)
		pos += n
		bad := 0
		for i, w := range j.want {
			g := got[i]
			if math.Float32bits(g) == math.Float32bits(w) || g != g && w != w || g == 0 && w == 0 && math.Signbit(float64(g)) == math.Signbit(float64(w)) {
				continue
			}
			if bad < 3 {
				t.Errorf("%s: [%d] = %v (%#x), CPU %v (%#x)", j.name, i, g, math.Float32bits(g), w, math.Float32bits(w))
			}
			bad++
		}
		if bad > 0 {
			t.Errorf("%s: %d of %d differ", j.name, bad, len(j.want))
		}
		total += len(j.want)
	}
	t.Logf("%d jobs, %d values, all bit-exact with exec/cpu", len(jobs), total)
}

func shapeTail(s []int) int {
	if len(s) < 2 {
		return 1
	}
	return s[len(s)-1]
}

// hostJobs builds the cases: every op and option the kernels have.
func hostJobs(t *testing.T) []hostJob {
	r := rand.New(rand.NewPCG(1, 2))
	b := cpu.New(0)
	var jobs []hostJob
	ew := func(name string, op, act int32, s zexec.Spec, flags int32, out zexec.Tensor, ins ...zexec.Tensor) {
		shapes := make([][]int, len(ins))
		for i, x := range ins {
			shapes[i] = x.Shape()
		}
		p, err := NewEW(out.Shape(), shapes...)
		if err != nil {
			t.Fatal(err)
		}
		p.Op, p.Act, p.Math, p.Flags, p.OutFmt = op, act, int32(s.Math), flags, int32(s.Out)
		j := hostJob{name: name, kernel: 1, want: data(t, b, out), fmt: s.Out}
		for i, x := range ins {
			p.Fmt[i] = int32(x.Format())
			j.bufs[i] = pack(data(t, b, x), x.Format())
		}
		j.params = append([]byte(nil), Bytes(&p)...)
		jobs = append(jobs, j)
	}
	must := func(x zexec.Tensor, err error) zexec.Tensor {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	const n = 4096
	formats := []precision.Format{precision.F32, precision.BF16, precision.F16}
	for _, in := range formats {
		for _, shape := range [][]int{{n}, {5, 13}} { // the 8-a-thread path and the scalar one
			x := upload(t, b, values(r, shape[0]*max(1, len(shape)-1)*shapeTail(shape)), shape, in)
			for _, out := range formats {
				ew(fmt.Sprintf("cast %v→%v %v", in, out, shape), OpCast, 0, zexec.Out(out), 0, must(b.Cast(x, out)), x)
			}
		}
	}
	for act := zexec.ActIdentity; act < zexec.ActHardswish; act++ {
		if !act.Kernel() {
			continue
		}
		for _, m := range []zexec.Math{zexec.MathPrecise, zexec.MathFastExp} {
			for _, out := range formats {
				x := upload(t, b, values(r, 3*n), []int{3, n}, precision.F32)
				s := zexec.Spec{Out: out, Math: m}
				ew(fmt.Sprintf("act %v %v", act, s), OpAct, int32(act), s, 0, must(b.Act(x, act, s)), x)
			}
		}
	}
	// Activations composed of rounded primitives (RoundEach), with the
	// constants rounded or kept f32 and GELU's tanh argument factored.
	for _, act := range []zexec.ActKind{zexec.ActSiLU, zexec.ActGELUTanh, zexec.ActGELUErf, zexec.ActTanh, zexec.ActSigmoid, zexec.ActReLU} {
		for _, m := range []zexec.Math{zexec.MathPrecise, zexec.MathFastExp, zexec.MathScalarF32, zexec.MathGELUFactored, zexec.MathScalarF32 | zexec.MathGELUFactored} {
			for _, out := range []precision.Format{precision.BF16, precision.F16} {
				x := upload(t, b, values(r, 2*n), []int{2, n}, out)
				s := zexec.Spec{Out: out, Round: zexec.RoundEach, Math: m}
				ew(fmt.Sprintf("act %v %v", act, s), OpAct, int32(act), s, REach, must(b.Act(x, act, s)), x)
			}
		}
	}
	// The activations with a fast path to bf16 and f16 (zf_act_stored),
	// over many values: its bound must hold near every rounding boundary.
	for _, act := range []zexec.ActKind{zexec.ActSiLU, zexec.ActGELUTanh, zexec.ActGELUErf, zexec.ActTanh, zexec.ActSigmoid} {
		for _, out := range []precision.Format{precision.BF16, precision.F16} {
			x := upload(t, b, values(r, 64*n), []int{64, n}, precision.F32)
			s := zexec.Spec{Out: out}
			ew(fmt.Sprintf("act %v %v, many values", act, s), OpAct, int32(act), s, 0, must(b.Act(x, act, s)), x)
		}
	}
	x3 := []int{2, 16, 96}
	cond := []int{2, 96}
	for _, f := range []precision.Format{precision.F32, precision.BF16} {
		a := upload(t, b, values(r, 2*16*96), x3, f)
		c := upload(t, b, values(r, 2*96), []int{2, 1, 96}, precision.BF16)
		s := zexec.Out(f)
		ew("add bcast "+f.String(), OpAdd, 0, s, 0, must(b.Add(a, c, s)), a, c)
		ew("mul bcast "+f.String(), OpMul, 0, s, 0, must(b.Mul(a, c, s)), a, c)
		ew("sub bcast "+f.String(), OpSub, 0, s, 0, must(b.Sub(a, c, s)), a, c)
		ew("div bcast "+f.String(), OpDiv, 0, s, 0, must(b.Div(a, c, s)), a, c)
		ew("minimum bcast "+f.String(), OpMin, 0, s, 0, must(b.Minimum(a, c, s)), a, c)
		ew("maximum bcast "+f.String(), OpMax, 0, s, 0, must(b.Maximum(a, c, s)), a, c)
		rd := zexec.Spec{Out: f, Math: zexec.MathRecipDiv}
		ew("div recip bcast "+f.String(), OpDiv, 0, rd, 0, must(b.Div(a, c, rd)), a, c)
	}
	specs := []zexec.Spec{zexec.Out(precision.BF16), zexec.Composed(precision.BF16), zexec.Out(precision.F32),
		{Out: precision.BF16, Round: zexec.RoundProduct}, {Out: precision.F16, Round: zexec.RoundScale | zexec.RoundGate}}
	for _, s := range specs {
		x := upload(t, b, values(r, 2*16*96), x3, precision.BF16)
		sc := upload(t, b, values(r, 2*96), cond, precision.BF16)
		sh := upload(t, b, values(r, 2*96), cond, precision.BF16)
		for _, plus := range []bool{false, true} {
			mp := zexec.ModulateParams{PlusOne: plus}
			flags := int32(HasShift)
			if plus {
				flags |= PlusOne
			}
			if s.Has(zexec.RoundScale) {
				flags |= RScale
			}
			if s.Has(zexec.RoundProduct) {
				flags |= RProduct
			}
			// The kernel reads the conditioning as [B, 1, D] (exec.CondShape).
			sc3, sh3 := must(b.Reshape(sc, []int{2, 1, 96})), must(b.Reshape(sh, []int{2, 1, 96}))
			ew(fmt.Sprintf("modulate plus=%v %v", plus, s), OpModulate, 0, s, flags, must(b.Modulate(x, sh, sc, mp, s)), x, sc3, sh3)
			ew(fmt.Sprintf("modulate noshift plus=%v %v", plus, s), OpModulate, 0, s, flags&^HasShift, must(b.Modulate(x, nil, sc, mp, s)), x, sc3)
		}
		for _, g := range []zexec.ActKind{zexec.ActIdentity, zexec.ActTanh, zexec.ActSigmoid} {
			y := upload(t, b, values(r, 2*16*96), x3, precision.BF16)
			gate := upload(t, b, values(r, 2*96), []int{2, 1, 96}, precision.F32)
			var flags int32
			if s.Has(zexec.RoundGate) {
				flags |= RGate
			}
			if s.Has(zexec.RoundProduct) {
				flags |= RProduct
			}
			ew(fmt.Sprintf("gated residual %v %v", g, s), OpGated, int32(g), s, flags, must(b.GatedResidual(x, y, gate, g, s)), x, y, gate)
		}
		for _, fn := range []zexec.ActKind{zexec.ActSiLU, zexec.ActGELUTanh, zexec.ActGELUErf} {
			g := upload(t, b, values(r, 2*16*96), x3, precision.BF16)
			v := upload(t, b, values(r, 2*16*96), x3, precision.BF16)
			var flags int32
			if s.Has(zexec.RoundGate) {
				flags |= RGate
			}
			ew(fmt.Sprintf("glu %v %v", fn, s), OpGLU, int32(fn), s, flags, must(b.GLU(g, v, fn, s)), g, v)
		}
	}
	// Rope: both layouts, partial rotary dims, shared and per-batch tables.
	for _, layout := range []zexec.RopeLayout{zexec.RopeInterleaved, zexec.RopeHalf} {
		for _, rd := range []int{16, 8} {
			for _, perBatch := range []bool{false, true} {
				for _, s := range []zexec.Spec{zexec.Out(precision.BF16), {Out: precision.BF16, Round: zexec.RoundProduct}} {
					bsz, seq, heads, d := 2, 12, 3, 16
					x := upload(t, b, values(r, bsz*seq*heads*d), []int{bsz, seq, heads * d}, precision.BF16)
					tshape := []int{seq, rd}
					if perBatch {
						tshape = []int{bsz, seq, rd}
					}
					nt := 1
					for _, e := range tshape {
						nt *= e
					}
					cs := upload(t, b, values(r, nt), tshape, precision.F32)
					sn := upload(t, b, values(r, nt), tshape, precision.F32)
					rp := RopeP{N: int32(bsz * seq * heads * d), Width: int32(heads * d), Seq: int32(seq), D: int32(d), R: int32(rd),
						FmtX: int32(precision.BF16), FmtT: int32(precision.F32), OutFmt: int32(s.Out)}
					if layout == zexec.RopeHalf {
						rp.HalfLayout = 1
					}
					if perBatch {
						rp.PerBatch = 1
					}
					if s.Has(zexec.RoundProduct) {
						rp.Flags = RProduct
					}
					if s.Round == 0 {
						rp.SetVec() // the 8-a-thread path where the layout allows
					}
					out := must(b.Rope(x, cs, sn, zexec.RopeParams{Heads: heads, Layout: layout, RotaryDim: rd}, s))
					j := hostJob{name: fmt.Sprintf("rope %v r=%d perBatch=%v %v", layout, rd, perBatch, s), kernel: 2,
						params: append([]byte(nil), Bytes(&rp)...), want: data(t, b, out), fmt: s.Out}
					j.bufs[0], j.bufs[1], j.bufs[2] = pack(data(t, b, x), precision.BF16), pack(data(t, b, cs), precision.F32), pack(data(t, b, sn), precision.F32)
					jobs = append(jobs, j)
				}
			}
		}
	}
	// Timestep embedding.
	for _, tp := range []zexec.TimestepParams{
		{Dim: 256, FlipSinToCos: true, Scale: 1, MaxPeriod: 10000},
		{Dim: 255, FreqShift: 1, Scale: 1000, MaxPeriod: 10000},
		{Dim: 64, FlipSinToCos: true, FreqShift: 0.5, Scale: 1, MaxPeriod: 500},
	} {
		for _, m := range []zexec.Math{zexec.MathPrecise, zexec.MathRecipDiv, zexec.MathFastExp} {
			ts := []float32{0, 1, 752, 999.5, 0.25, 400}
			tt := upload(t, b, ts, []int{len(ts)}, precision.F32)
			s := zexec.Spec{Out: precision.F32, Math: m}
			out := must(b.TimestepEmbed(tt, tp, s))
			half := tp.Dim / 2
			div := float32(half) - tp.FreqShift
			p := TembP{N: int32(len(ts) * tp.Dim), Dim: int32(tp.Dim), Half: int32(half), Math: int32(m), FmtT: int32(precision.F32),
				OutFmt: int32(precision.F32), NegLog: float32(-math.Log(float64(tp.MaxPeriod))), Div: div, Recip: 1 / div, Scale: tp.Scale}
			if tp.FlipSinToCos {
				p.Flip = 1
			}
			j := hostJob{name: fmt.Sprintf("timestep %+v %v", tp, m), kernel: 3, params: append([]byte(nil), Bytes(&p)...),
				want: data(t, b, out), fmt: precision.F32}
			j.bufs[0] = pack(ts, precision.F32)
			jobs = append(jobs, j)
		}
	}
	// Strided copy: a permute.
	x := upload(t, b, values(r, 2*3*4*5), []int{2, 3, 4, 5}, precision.BF16)
	perm := []int{0, 2, 3, 1}
	px := must(b.Permute(x, perm))
	in := []int{60, 20, 5, 1}
	dims := px.Shape()
	sst := make([]int, 4)
	for i, a := range perm {
		sst[i] = in[a]
	}
	cp, err := NewCopy(dims, sst, []int{60, 15, 3, 1}, 0, 0, 2)
	if err != nil {
		t.Fatal(err)
	}
	j := hostJob{name: "copy permute", kernel: 4, params: append([]byte(nil), Bytes(&cp)...), want: data(t, b, px), fmt: precision.BF16}
	j.bufs[0] = pack(data(t, b, x), precision.BF16)
	jobs = append(jobs, j)
	// A slice along axis 1 with a last axis of 32: copied in 16-byte runs.
	for _, f := range []precision.Format{precision.BF16, precision.F32} {
		x := upload(t, b, values(r, 2*6*32), []int{2, 6, 32}, f)
		sl := must(b.Slice(x, 1, 2, 5))
		cp, err := NewCopy([]int{2, 3 * 32}, []int{6 * 32, 1}, []int{3 * 32, 1}, 2*32, 0, esize(f))
		if err != nil {
			t.Fatal(err)
		}
		if cp.ESize != 16 {
			t.Errorf("slice copy of %v: esize %d, want 16-byte runs", f, cp.ESize)
		}
		j := hostJob{name: "copy slice " + f.String(), kernel: 4, params: append([]byte(nil), Bytes(&cp)...), want: data(t, b, sl), fmt: f}
		j.bufs[0] = pack(data(t, b, x), f)
		jobs = append(jobs, j)
	}
	vec := 0
	for _, j := range jobs {
		if j.kernel == 1 && (*EW)(unsafe.Pointer(&j.params[0])).Vec != 0 || j.kernel == 2 && (*RopeP)(unsafe.Pointer(&j.params[0])).Vec != 0 {
			vec++
		}
	}
	t.Logf("%d of %d jobs take the 8-elements-a-thread path", vec, len(jobs))
	if vec == 0 || vec == len(jobs) {
		t.Errorf("both paths must be exercised (%d of %d vectorised)", vec, len(jobs))
	}
	return jobs
}
