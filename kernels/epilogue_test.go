package kernels

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	osexec "os/exec"
	"strings"
	"testing"

	zexec "github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/internal/hostdriver"
	"github.com/zflow/zflow/precision"
)

// The epilogue test: every chain runs twice on the Host rendering, fused
// (its rendered kernel, one launch) and unfused (one zf_elementwise launch
// a step, each storing its result in the step's format and the next
// reading it back), and the two outputs must be the same bytes.

// epiDriverHead runs jobs: kernel (0: zf_elementwise, k > 0: epilogue
// k−1), the parameter block, the buffers (a length of −1: the previous
// job's output) and the output's length; it writes the outputs in order.
const epiDriverHead = driverOpening + `  std::vector<uchar> prev(1);
  while (fread(&kernel, 4, 1, in) == 1) {
    int psize, nb;
    if (fread(&psize, 4, 1, in) != 1) return 2;
    std::vector<uchar> p = rd(in, psize);
    if (fread(&nb, 4, 1, in) != 1 || nb > 9) return 2;
    std::vector<uchar> buf[9];
    const uchar* ptr[9];
    for (int k = 0; k < 9; k++) {
      long long n = 0;
      if (k < nb && fread(&n, 8, 1, in) != 1) return 2;
      buf[k] = n < 0 ? prev : rd(in, n);
      ptr[k] = buf[k].data();
    }
    long long on;
    if (fread(&on, 8, 1, in) != 1) return 2;
    std::vector<uchar> y(on > 0 ? on : 1);
    switch (kernel) {
    case 0: zf_elementwise(y.data(), ptr[0], ptr[1], ptr[2], *(const zf_ew*)p.data()); break;
    case 1000: zf_rope_kernel(y.data(), ptr[0], ptr[1], ptr[2], *(const zf_rope_p*)p.data()); break;
`

const epiDriverTail = `
    default: fprintf(stderr, "kernel %d\n", kernel); return 2;
    }
    fwrite(y.data(), 1, on, out);
    prev = y;
  }
  fclose(out);
  return 0;
}
`

// operand shapes, against a running value [B, S, N].
const (
	opRow  = iota // [N]: a bias
	opCond        // [B, 1, N]: a conditioning vector (shift, scale, gate)
	opFull        // [B, S, N]
)

// epiStep is one step of a case: the kernel step (its Out set by the
// chain's format) and its operands' shapes and formats (0: the chain's).
type epiStep struct {
	name  string
	step  Step
	shape []int
	fmts  []precision.Format
}

// epiSteps lists every step kind of the vocabulary, each with the running
// value in each place it can take.
func epiSteps() []epiStep {
	f32 := precision.F32
	var out []epiStep
	add := func(name string, s Step, shapes []int, fmts ...precision.Format) {
		if fmts == nil {
			fmts = make([]precision.Format, len(shapes))
		}
		out = append(out, epiStep{name, s, shapes, fmts})
	}
	add("bias", Step{Op: OpAdd}, []int{opRow})
	add("bias f32", Step{Op: OpAdd}, []int{opRow}, f32)
	add("add residual", Step{Op: OpAdd, Arg: 1}, []int{opFull})
	add("sub", Step{Op: OpSub, Arg: 1}, []int{opFull})
	add("div", Step{Op: OpDiv}, []int{opCond})
	add("div recip", Step{Op: OpDiv, Math: int32(zexec.MathRecipDiv)}, []int{opCond})
	add("minimum", Step{Op: OpMin}, []int{opRow})
	add("maximum", Step{Op: OpMax, Arg: 1}, []int{opFull})
	for act := zexec.ActIdentity; act <= zexec.ActExp; act++ {
		add("act "+act.String(), Step{Op: OpAct, Act: int32(act)}, nil)
	}
	add("act gelu_tanh fast", Step{Op: OpAct, Act: int32(zexec.ActGELUTanh), Math: int32(zexec.MathFastExp)}, nil)
	add("act silu fast", Step{Op: OpAct, Act: int32(zexec.ActSiLU), Math: int32(zexec.MathFastExp)}, nil)
	add("cast", Step{Op: OpCast}, nil)
	add("gate multiply", Step{Op: OpMul}, []int{opCond}, f32)
	add("mul full", Step{Op: OpMul, Arg: 1}, []int{opFull})
	for _, g := range []zexec.ActKind{zexec.ActIdentity, zexec.ActTanh, zexec.ActSigmoid} {
		add("gated residual y "+g.String(), Step{Op: OpGated, Act: int32(g), Arg: 1}, []int{opFull, opCond}, 0, f32)
		add("gated residual x "+g.String(), Step{Op: OpGated, Act: int32(g), Arg: 0}, []int{opFull, opCond}, 0, f32)
	}
	add("gated residual rounded", Step{Op: OpGated, Act: int32(zexec.ActTanh), Flags: RGate | RProduct, Arg: 1}, []int{opFull, opCond})
	for _, f := range []zexec.ActKind{zexec.ActSiLU, zexec.ActGELUTanh, zexec.ActGELUErf} {
		add("glu value "+f.String(), Step{Op: OpGLU, Act: int32(f), Arg: 1}, []int{opFull})
		add("glu gate "+f.String(), Step{Op: OpGLU, Act: int32(f), Arg: 0}, []int{opFull})
	}
	add("glu rounded gate", Step{Op: OpGLU, Act: int32(zexec.ActSiLU), Flags: RGate}, []int{opFull})
	add("modulate", Step{Op: OpModulate, Flags: PlusOne | HasShift}, []int{opCond, opCond})
	add("modulate rounded", Step{Op: OpModulate, Flags: PlusOne | HasShift | RScale | RProduct}, []int{opCond, opCond})
	add("modulate no shift", Step{Op: OpModulate}, []int{opCond})
	add("modulate no shift plus one", Step{Op: OpModulate, Flags: PlusOne | RScale}, []int{opCond}, f32)
	return out
}

// epiCase is one chain with its input format.
type epiCase struct {
	name  string
	in    precision.Format
	steps []epiStep
	outs  []precision.Format // per step
}

func epiCases() []epiCase {
	r := rand.New(rand.NewPCG(7, 8))
	kinds := epiSteps()
	byName := map[string]epiStep{}
	for _, k := range kinds {
		byName[k.name] = k
	}
	var cases []epiCase
	for _, f := range []precision.Format{precision.BF16, precision.F16, precision.F32} {
		uniform := func(n int) []precision.Format {
			o := make([]precision.Format, n)
			for i := range o {
				o[i] = f
			}
			return o
		}
		// Every step kind alone, after the GEMM's stored output and
		// after its f32 accumulator rounded by a leading cast.
		for _, k := range kinds {
			cases = append(cases, epiCase{k.name + " " + f.String(), f, []epiStep{k}, uniform(1)})
			cases = append(cases, epiCase{"f32 cast, " + k.name + " " + f.String(), precision.F32, []epiStep{byName["cast"], k}, uniform(2)})
		}
		// The chains real blocks make.
		for _, names := range [][]string{
			{"bias", "act gelu_tanh"},
			{"bias", "act silu", "gate multiply"},
			{"act gelu_tanh", "gated residual y identity"},
			{"bias", "glu value silu", "gated residual y tanh", "cast"},
			{"modulate", "act silu", "gate multiply", "add residual"},
		} {
			var st []epiStep
			for _, n := range names {
				st = append(st, byName[n])
			}
			cases = append(cases, epiCase{strings.Join(names, ", ") + " " + f.String(), f, st, uniform(len(st))})
		}
		// Random chains of 2 to 4 steps; every third stores one step in
		// another format than the chain's.
		for i := 0; i < 12; i++ {
			n := 2 + i%3
			st := make([]epiStep, n)
			outs := uniform(n)
			for j := range st {
				st[j] = kinds[r.IntN(len(kinds))]
			}
			if i%3 == 0 {
				outs[r.IntN(n-1)] = []precision.Format{precision.BF16, precision.F16, precision.F32}[r.IntN(3)]
			}
			var names []string
			for j, s := range st {
				names = append(names, s.name+"→"+outs[j].String())
			}
			cases = append(cases, epiCase{"chain " + strings.Join(names, ", "), f, st, outs})
		}
	}
	return cases
}

// epiValues draws inputs with the edges the chains must carry: ±0,
// subnormals of f32 (and bf16) and f16, values past f16's range, ±Inf, NaN.
func epiValues(r *rand.Rand, n int) []float32 {
	v := values(r, n)
	edges := []float32{float32(math.Copysign(0, -1)), 1e-40, -1e-39, 3e-6, -6e-8, 60000, -70000, 3e38, -2.5e38}
	for i := range v {
		if r.IntN(25) == 0 {
			v[i] = edges[r.IntN(len(edges))]
		}
	}
	return v
}

type epiJob struct {
	kernel int32
	params []byte
	bufs   [][]byte // nil: the previous job's output
	outLen int
}

func TestEpilogueFusedEqualsUnfused(t *testing.T) {
	cases := epiCases()
	type run struct {
		name        string
		fused, last int // job indices whose outputs must be equal
		control     bool
	}
	var eps []Epilogue
	var jobs []epiJob
	var runs []run
	r := rand.New(rand.NewPCG(3, 4))
	for _, c := range cases {
		e := Epilogue{In: c.in}
		for j, s := range c.steps {
			st := s.step
			st.Out = c.outs[j]
			e.Steps = append(e.Steps, st)
		}
		if err := e.Check(); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		eps = append(eps, e)
		ei := len(eps) - 1
		// A control: the same chain with no rounding between the steps
		// (each stored in f32) must differ from the unfused chain
		// somewhere, or this test could not see a missed rounding.
		control := -1
		if c.in == precision.F32 && len(c.steps) == 2 && c.outs[1] == precision.BF16 && c.steps[1].name == "act gelu_tanh" {
			ce := Epilogue{In: c.in, Steps: append([]Step(nil), e.Steps...)}
			ce.Steps[0].Out = precision.F32
			eps = append(eps, ce)
			control = len(eps) - 1
		}
		for _, shape := range [][]int{{2, 24, 64}, {2, 5, 13}} { // the 8-a-thread path and the scalar one
			x := epiValues(r, shape[0]*shape[1]*shape[2])
			xb := pack(x, c.in)
			// Operands, in chain order.
			var opShapes [][]int
			var opFmts []precision.Format
			var opData [][]byte
			stepOps := make([][]int, len(c.steps)) // operand indices of each step
			for j, s := range c.steps {
				for k, kind := range s.shape {
					sh := map[int][]int{opRow: {shape[2]}, opCond: {shape[0], 1, shape[2]}, opFull: shape}[kind]
					f := s.fmts[k]
					if f == 0 {
						f = c.outs[j]
					}
					n := 1
					for _, d := range sh {
						n *= d
					}
					stepOps[j] = append(stepOps[j], len(opShapes))
					opShapes, opFmts = append(opShapes, sh), append(opFmts, f)
					opData = append(opData, pack(epiValues(r, n), f))
				}
			}
			n := shape[0] * shape[1] * shape[2]
			p, err := NewEpiP(shape, opShapes, opFmts)
			if err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			if shape[2] == 64 && p.Vec == 0 || shape[2] == 13 && p.Vec != 0 {
				t.Fatalf("%s %v: vec %d", c.name, shape, p.Vec)
			}
			fusedJob := func(k int) epiJob {
				return epiJob{kernel: int32(k + 1), params: append([]byte(nil), Bytes(&p)...),
					bufs: append([][]byte{xb}, opData...), outLen: n * esize(eps[k].Out())}
			}
			jobs = append(jobs, fusedJob(ei))
			fused := len(jobs) - 1
			// Unfused: one zf_elementwise a step.
			for j, s := range c.steps {
				st := e.Steps[j]
				nin := StepInputs(st.Op, st.Flags)
				shapes := make([][]int, nin)
				bufs := make([][]byte, nin)
				fmts := make([]int32, nin)
				k := 0
				for a := 0; a < nin; a++ {
					if a == st.Arg {
						shapes[a], bufs[a] = shape, nil
						fmts[a] = int32(c.in)
						if j > 0 {
							fmts[a] = int32(c.outs[j-1])
						} else {
							bufs[a] = xb
						}
						continue
					}
					o := stepOps[j][k]
					k++
					shapes[a], bufs[a], fmts[a] = opShapes[o], opData[o], int32(opFmts[o])
				}
				ew, err := NewEW(shape, shapes...)
				if err != nil {
					t.Fatalf("%s: step %s: %v", c.name, s.name, err)
				}
				ew.Op, ew.Act, ew.Math, ew.Flags, ew.OutFmt = st.Op, st.Act, st.Math, st.Flags, int32(st.Out)
				copy(ew.Fmt[:], fmts)
				jobs = append(jobs, epiJob{kernel: 0, params: append([]byte(nil), Bytes(&ew)...), bufs: bufs, outLen: n * esize(st.Out)})
			}
			runs = append(runs, run{name: fmt.Sprintf("%s %v", c.name, shape), fused: fused, last: len(jobs) - 1})
			if p.Vec != 0 {
				// N_eight where the operands cannot be read 8 at a time (a
				// norm's 8-a-lane store over such a layout): element by element.
				ej := fusedJob(ei)
				q := p
				q.Vec = 0
				ej.kernel, ej.params = -ej.kernel, append([]byte(nil), Bytes(&q)...)
				jobs = append(jobs, ej)
				runs = append(runs, run{name: fmt.Sprintf("%s %v, eight by one", c.name, shape), fused: len(jobs) - 1, last: fused})
			}
			if control >= 0 {
				cj := fusedJob(control)
				jobs = append(jobs, cj)
				runs = append(runs, run{name: fmt.Sprintf("control (no intermediate rounding) %s %v", c.name, shape), fused: len(jobs) - 1, last: len(jobs) - 2, control: true})
			}
		}
	}
	outs := runEpiJobs(t, eps, jobs)
	values, controls := 0, 0
	for _, rn := range runs {
		a, b := outs[rn.fused], outs[rn.last]
		if len(a) != len(b) || len(a) == 0 {
			t.Fatalf("%s: fused output of %d bytes, unfused %d", rn.name, len(a), len(b))
		}
		if rn.control {
			if bytes.Equal(a, b) {
				t.Errorf("%s: equal to the unfused chain: the comparison cannot see a missed rounding", rn.name)
			}
			controls++
			continue
		}
		if !bytes.Equal(a, b) {
			diff := 0
			for i := range a {
				if a[i] != b[i] {
					diff++
				}
			}
			for i, shown := 0, 0; i < len(a) && shown < 4; i++ {
				if a[i] != b[i] {
					t.Logf("byte %d: fused % x, unfused % x", i, a[i&^3:min(i&^3+4, len(a))], b[i&^3:min(i&^3+4, len(b))])
					shown++
				}
			}
			t.Errorf("%s: fused and unfused differ in %d of %d bytes", rn.name, diff, len(a))
		}
		values += len(a)
	}
	if controls == 0 {
		t.Error("no control case ran")
	}
	t.Logf("%d chains (%d epilogue kernels) on two shapes: fused == unfused bit for bit over %d output bytes; %d controls differ as they must",
		len(cases), len(eps), values, controls)
}

// runEpiJobs compiles the Host rendering with the epilogues and runs jobs.
func runEpiJobs(t *testing.T, eps []Epilogue, jobs []epiJob) [][]byte {
	t.Helper()
	var drv strings.Builder
	drv.WriteString(epiDriverHead)
	for k, e := range eps {
		fmt.Fprintf(&drv, "    case %d: %s(y.data(), ptr[0], ptr[1], ptr[2], ptr[3], ptr[4], ptr[5], ptr[6], ptr[7], ptr[8], *(const zf_epi_p*)p.data()); break;\n", k+1, e.Name())
		// −(k+1): N_eight over blocks of 8, as a norm kernel calls it.
		fmt.Fprintf(&drv, "    case %d: { const zf_epi_p& q = *(const zf_epi_p*)p.data(); for (int i = 0; i + 8 <= q.n; i += 8) { float v[8]; "+
			"zf_load8(ptr[0], %d, i, 1, v); %s_eight(q, ptr[1], ptr[2], ptr[3], ptr[4], ptr[5], ptr[6], ptr[7], ptr[8], i, v); zf_store8(y.data(), %d, i, v); } } break;\n",
			-(k + 1), e.In, e.Name(), e.Out())
	}
	drv.WriteString(epiDriverTail)
	// The unfused route needs zf_elementwise too: the whole pointwise
	// rendering (which holds RenderEpilogues' functions verbatim), then
	// the chains' kernels.
	src, err := RenderPointwise(Host)
	if err != nil {
		t.Fatal(err)
	}
	ks, err := EpilogueKernels(eps...)
	if err != nil {
		t.Fatal(err)
	}
	bin := compileSource(t, src+"\n"+ks+drv.String())
	var in bytes.Buffer
	for _, j := range jobs {
		binary.Write(&in, binary.LittleEndian, j.kernel)
		binary.Write(&in, binary.LittleEndian, int32(len(j.params)))
		in.Write(j.params)
		binary.Write(&in, binary.LittleEndian, int32(len(j.bufs)))
		for _, b := range j.bufs {
			if b == nil {
				binary.Write(&in, binary.LittleEndian, int64(-1))
				continue
			}
			binary.Write(&in, binary.LittleEndian, int64(len(b)))
			in.Write(b)
		}
		binary.Write(&in, binary.LittleEndian, int64(j.outLen))
	}
	all := hostdriver.Run(t, bin, "the host rendering", in.Bytes())
	outs := make([][]byte, len(jobs))
	pos := 0
	for i, j := range jobs {
		if pos+j.outLen > len(all) {
			t.Fatalf("job %d: output short", i)
		}
		outs[i] = all[pos : pos+j.outLen]
		pos += j.outLen
	}
	return outs
}

func TestEpilogueRendering(t *testing.T) {
	e := Epilogue{In: precision.F32, Steps: []Step{{Op: OpCast, Out: precision.BF16}, {Op: OpAct, Act: int32(zexec.ActGELUTanh), Out: precision.BF16}}}
	k, err := e.Kernel()
	if err != nil {
		t.Fatal(err)
	}
	// The arithmetic is zf_step's: the chain calls it once a step on each
	// path (one element, eight) and defines no function but those two.
	if strings.Count(k, "ZF_FN") != 2 || strings.Count(k, "zf_step(") != 4 {
		t.Errorf("the epilogue must call zf_step once a step on each path and define only its two functions:\n%s", k)
	}
	for _, tg := range []Target{CUDA, MSL, Host} {
		src, err := RenderEpilogues(tg, e, e)
		if err != nil {
			t.Fatal(err)
		}
		// The prelude, pointwise.zf's functions verbatim, no other kernel,
		// then the chain's kernel once.
		if !strings.HasPrefix(src, Prelude(tg)) || !strings.Contains(src, PointwiseFunctions()) ||
			!strings.Contains(PointwiseFunctions(), "ZF_FN float zf_step(") || strings.Join(kernelNames(src), " ") != e.Name() {
			t.Errorf("%v: the epilogue rendering is not the prelude, pointwise.zf's functions and the kernel once", tg)
		}
	}
	// What a backend compiles stands alone: the functions need nothing
	// from pointwise.zf's kernels.
	if src, err := RenderEpilogues(Host, e); err != nil {
		t.Fatal(err)
	} else {
		compileSource(t, src+"\nint main() { return 0; }\n")
	}
	bad := []Epilogue{
		{In: precision.F32},
		{In: precision.F32, Steps: []Step{{Op: 99, Out: precision.BF16}}},
		{In: precision.F32, Steps: []Step{{Op: OpAct, Act: 99, Out: precision.BF16}}},
		{In: precision.F32, Steps: []Step{{Op: OpAct, Out: precision.BF16, Arg: 1}}},
		{In: precision.F32, Steps: []Step{{Op: OpAct}}},
		{In: precision.F32, Steps: make([]Step, 9)},
	}
	for i := range bad[5].Steps {
		bad[5].Steps[i] = Step{Op: OpAdd, Out: precision.BF16}
	}
	for _, e := range bad {
		if _, err := e.Kernel(); err == nil {
			t.Errorf("%s: rendered, want refused", e.key())
		}
	}
	if _, err := NewEpiP([]int{4, 8}, [][]int{{3}}, []precision.Format{precision.BF16}); err == nil {
		t.Error("NewEpiP accepted an operand that does not broadcast")
	}
}

// TestEpilogueTable: a chain whose activation reads the table (TableStep)
// stores the bytes the chain without it stores, at every one of the 2¹⁶
// bf16 inputs, on the Host rendering: the table is made by the chain's own
// zf_step call, and the lookup (index h = bits >> 16, the entry decoded)
// loses nothing. The CUDA rendering is checked the same way on the device
// (cuda's TestEpilogueTableExhaustive).
func TestEpilogueTable(t *testing.T) {
	bf, f16 := precision.BF16, precision.F16
	var chains []Epilogue
	for act := zexec.ActSiLU; act <= zexec.ActExpm1; act++ {
		if act == zexec.ActReLU {
			continue
		}
		for _, m := range []int32{0, int32(zexec.MathFastExp)} {
			chains = append(chains,
				Epilogue{In: bf, Table: true, Steps: []Step{{Op: OpAct, Act: int32(act), Math: m, Out: bf}}},
				Epilogue{In: bf, Table: true, Steps: []Step{{Op: OpAct, Act: int32(act), Math: m, Out: f16}}})
		}
	}
	// The table step later in the chain, a step after it.
	chains = append(chains, Epilogue{In: precision.F32, Table: true, Steps: []Step{{Op: OpCast, Out: bf},
		{Op: OpAct, Act: int32(zexec.ActGELUTanh), Out: bf}, {Op: OpAct, Act: int32(zexec.ActTanh), Out: bf}}})
	var src, drv strings.Builder
	drv.WriteString("\n#include <cstdio>\n#include <vector>\nint main() {\n  zf_epi_p p = {};\n  p.n = 65536; p.rank = 2; p.dims[0] = 8192; p.dims[1] = 8; p.vec = 1;\n")
	drv.WriteString("  std::vector<uint> in32(65536); std::vector<ushort> in16(65536), tab(65536);\n")
	drv.WriteString("  for (int h = 0; h < 65536; h++) { in16[h] = (ushort)h; in32[h] = (uint)h << 16; }\n")
	drv.WriteString("  std::vector<uchar> a(65536 * 4), b(65536 * 4);\n  const uchar* o = (const uchar*)in16.data();\n")
	for i, e := range chains {
		if e.TableStep() < 0 {
			t.Fatalf("chain %d: no table step", i)
		}
		plain := e
		plain.Table = false
		if plain.Name() == e.Name() {
			t.Fatalf("chain %d: the table does not change the kernel's name", i)
		}
		for _, c := range []Epilogue{e, plain} {
			k, err := c.Kernel()
			if err != nil {
				t.Fatal(err)
			}
			src.WriteString(k)
		}
		x := "(const uchar*)in16.data()"
		if e.In == precision.F32 {
			x = "(const uchar*)in32.data()"
		}
		fmt.Fprintf(&drv, "  %s_tab((uchar*)tab.data());\n", e.Name())
		fmt.Fprintf(&drv, "  %s(a.data(), %s, o, o, o, o, o, o, o, o, p, (const uchar*)tab.data());\n", e.Name(), x)
		fmt.Fprintf(&drv, "  %s(b.data(), %s, o, o, o, o, o, o, o, o, p);\n", plain.Name(), x)
		fmt.Fprintf(&drv, "  { int bad = 0; for (int j = 0; j < 65536 * %d; j++) bad += a[j] != b[j]; printf(\"%%d\\n\", bad); }\n", esize(e.Out()))
	}
	drv.WriteString("  return 0;\n}\n")
	p := Prelude(Host)
	bin := compileSource(t, p+"\n"+PointwiseFunctions()+"\n"+src.String()+drv.String())
	res, err := osexec.Command(bin).Output()
	if err != nil {
		t.Fatalf("running the table chains: %v", err)
	}
	out := strings.Fields(string(res))
	if len(out) != len(chains) {
		t.Fatalf("%d results for %d chains", len(out), len(chains))
	}
	for i, e := range chains {
		if out[i] != "0" {
			t.Errorf("%s: %s of %d bytes differ from the chain without the table", e.key(), out[i], 65536*esize(e.Out()))
		}
	}
	t.Logf("%d chains: the table route equals the computed one at all 65,536 bf16 inputs", len(chains))
}
