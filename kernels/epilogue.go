package kernels

import (
	"fmt"
	"hash/fnv"
	"strings"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/precision"
)

// An Epilogue is a chain of the vocabulary's pointwise steps applied to
// one input (a GEMM's or a norm's stored output) before it is stored: data,
// rendered as one kernel per chain. Each step is one call of pointwise.zf's
// zf_step, the function zf_elementwise computes every unfused step with,
// and its value is rounded to the step's Out exactly where the unfused op
// would have stored it; so a fused chain and the unfused kernels run the
// same arithmetic and round at the same points, and the renderer adds
// only loads, stores and the order of calls.

// MaxEpiOperands bounds the operands (inputs other than the running value)
// of one epilogue: ZF_EPI_MAXO.
const MaxEpiOperands = 8

// Step is one pointwise step: zf_step(Op, Act, Math, Flags, Out, va, vb, vc)
// with the running value in input Arg and operands in the other inputs,
// in zf_step's order (modulate: x, scale, shift; gated residual: x, y,
// gate; GLU: gate, value).
type Step struct {
	Op    int32            // OpAdd … OpMax: the zf_elementwise codes
	Act   int32            // act, GLU and gated residual: the function (exec.ActKind)
	Math  int32            // exec.Math bits
	Flags int32            // RScale, RProduct, RGate, PlusOne, HasShift
	Out   precision.Format // where the unfused op stores: the value is rounded to it
	Arg   int              // the running value's input (0: va, 1: vb, 2: vc)
}

// Epilogue is the chain: In is the input buffer's format, Steps in order.
// A leading OpCast step rounds the input first (a GEMM stored in f32 whose
// unfused op rounds to bf16). Table asks for the TableStep, if the chain
// has one, to be read from a table (see TableStep).
type Epilogue struct {
	In    precision.Format
	Steps []Step
	Table bool
}

// TableStep is the step read from a table of 65,536 values when Table is
// set, or -1: the first activation (other than identity and ReLU, which
// cost nothing) whose running value is a bf16 value (the chain's input
// stored in bf16, or the step before rounded to bf16) and whose result is
// stored in bf16 or f16. Such a step has one input of 2¹⁶ possible values,
// so its results can all be made in advance: N_tab (Kernel) writes, for
// each bf16 bit pattern h, the 16-bit pattern of zf_step's value at h
// rounded to the step's Out, by the very call the chain would make; the
// chain then reads entry h where it would have called zf_step and
// rounded. The same function at the same inputs: the same bits, without
// an approximation (a bf16 value is h << 16, so h is exact; a decoded
// 16-bit pattern rounds to itself, so the store after it changes nothing).
func (e Epilogue) TableStep() int {
	if !e.Table {
		return -1
	}
	in := e.In
	for i, s := range e.Steps {
		if s.Op == OpAct && s.Arg == 0 && in == precision.BF16 && (s.Out == precision.BF16 || s.Out == precision.F16) &&
			s.Act != int32(exec.ActIdentity) && s.Act != int32(exec.ActReLU) {
			return i
		}
		in = s.Out
	}
	return -1
}

// TableSize is the entries of a step's table (one for each bf16 pattern),
// 16 bits each.
const TableSize = 1 << 16

// StepInputs is how many inputs zf_step reads for op (zf_ew_inputs).
func StepInputs(op, flags int32) int {
	switch {
	case op == OpAct || op == OpCast:
		return 1
	case op == OpGated || op == OpRope || op == OpModulate && flags&HasShift != 0:
		return 3
	}
	return 2
}

// HasRope says whether the chain has a rope step (OpRope: x, cos, sin,
// the running value x, interleaved pairs). Its pair partner is the
// neighbouring element, so a rope chain runs only in N_eight, over 8
// consecutive elements of one head (heads a multiple of 8 wide, the first
// element a multiple of 8): N_one has no partner and returns NaN for it,
// and the kernel's one-element path (p.vec 0) is not to be launched; a
// backend runs a rope chain only where its layout is vectorised (cuda:
// a norm's groups a multiple of 8, a linear's epilogue with Vec set).
func (e Epilogue) HasRope() bool {
	for _, s := range e.Steps {
		if s.Op == OpRope {
			return true
		}
	}
	return false
}

// Operands is how many operand buffers the chain reads, in step order.
func (e Epilogue) Operands() int {
	n := 0
	for _, s := range e.Steps {
		n += StepInputs(s.Op, s.Flags) - 1
	}
	return n
}

// Out is the format the chain stores its result in (the last step's).
func (e Epilogue) Out() precision.Format {
	if len(e.Steps) == 0 {
		return e.In
	}
	return e.Steps[len(e.Steps)-1].Out
}

// Check refuses a chain the renderer cannot express.
func (e Epilogue) Check() error {
	if !e.In.Valid() {
		return fmt.Errorf("kernels: epilogue: input format %v", e.In)
	}
	if len(e.Steps) == 0 {
		return fmt.Errorf("kernels: epilogue: no steps")
	}
	for i, s := range e.Steps {
		if s.Op < OpAdd || s.Op > OpRope {
			return fmt.Errorf("kernels: epilogue: step %d: op %d", i, s.Op)
		}
		if s.Op == OpRope && s.Arg != 0 {
			return fmt.Errorf("kernels: epilogue: step %d: rope of a running cos or sin", i)
		}
		if (s.Op == OpAct || s.Op == OpGated || s.Op == OpGLU) && !exec.ActKind(s.Act).Valid() {
			return fmt.Errorf("kernels: epilogue: step %d: function %d", i, s.Act)
		}
		if !s.Out.Valid() {
			return fmt.Errorf("kernels: epilogue: step %d: format %v", i, s.Out)
		}
		if n := StepInputs(s.Op, s.Flags); s.Arg < 0 || s.Arg >= n {
			return fmt.Errorf("kernels: epilogue: step %d: running value in input %d of %d", i, s.Arg, n)
		}
	}
	if n := e.Operands(); n > MaxEpiOperands {
		return fmt.Errorf("kernels: epilogue: %d operands (at most %d)", n, MaxEpiOperands)
	}
	return nil
}

// key is the chain in a canonical text form.
func (e Epilogue) key() string {
	var b strings.Builder
	fmt.Fprintf(&b, "in=%d", e.In)
	for _, s := range e.Steps {
		fmt.Fprintf(&b, ";op=%d,act=%d,math=%d,flags=%d,out=%d,arg=%d", s.Op, s.Act, s.Math, s.Flags, s.Out, s.Arg)
	}
	if ts := e.TableStep(); ts >= 0 {
		fmt.Fprintf(&b, ";table=%d", ts)
	}
	return b.String()
}

// Name is the chain's kernel name: the same chain, the same name.
func (e Epilogue) Name() string {
	h := fnv.New64a()
	h.Write([]byte(e.key()))
	return fmt.Sprintf("zf_epi_%016x", h.Sum64())
}

var opWords = map[int32]string{OpAdd: "add", OpMul: "mul", OpAct: "act", OpCast: "cast", OpModulate: "modulate",
	OpGated: "gated_residual", OpGLU: "glu", OpSub: "sub", OpDiv: "div", OpMin: "minimum", OpMax: "maximum", OpRope: "rope"}

// Kernel is the chain in the target-neutral source (pointwise.zf's words
// and functions): two device functions, then the kernel that runs them.
//
//	float N_one(p, o0 … o7, i, v)     element i, stored value v: the chain's
//	                                  result, to be stored in Out()
//	void N_eight(p, o0 … o7, i, v)    the same on v[0..8) from element i
//	                                  (i a multiple of 8), in place
//	ZF_KERNEL(N)(y, x, o0 … o7, p)    y = the chain over x
//
// with N = Name() and p a zf_epi_p (NewEpiP). A backend's own kernel (a
// norm) calls the functions on the values it would have stored.
func (e Epilogue) Kernel() (string, error) {
	if err := e.Check(); err != nil {
		return "", err
	}
	var b strings.Builder
	w := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	name, n := e.Name(), e.Operands()
	ts := e.TableStep()
	var params, args strings.Builder
	if ts >= 0 {
		params.WriteString(", ZF_DEV const ushort* zt")
		args.WriteString(", zt")
	}
	for k := 0; k < MaxEpiOperands; k++ {
		fmt.Fprintf(&params, ", ZF_DEV const uchar* o%d", k)
		fmt.Fprintf(&args, ", o%d", k)
	}
	last := len(e.Steps) - 1
	// call is step i's zf_step with the running value v and its operands
	// named by operand(k); rounded unless it is the last (the store rounds).
	call := func(i int, v string, operand func(k int) string, k *int) string {
		s := e.Steps[i]
		if i == ts {
			// The entry at v's bf16 pattern: zf_step's value, rounded.
			dec := "zf_bf16_to_f32"
			if s.Out == precision.F16 {
				dec = "zf_f16_to_f32"
			}
			return fmt.Sprintf("%s((uint)zt[zf_bits(%s) >> 16])", dec, v)
		}
		if s.Op == OpRope {
			// In N_eight (rot names the partners, see HasRope); N_one
			// has no partner.
			c, sn := operand(*k), operand(*k+1)
			*k += 2
			if !strings.HasSuffix(v, "[e]") {
				return "zf_float(0x7FC00000u) /* rope: no partner in one element */"
			}
			c = fmt.Sprintf("zf_rope(%s, rot[e], %s, %s, %d, %d)", v, c, sn, s.Flags&RProduct, s.Out)
			if i == last {
				return c
			}
			return fmt.Sprintf("zf_round(%s, %d)", c, s.Out)
		}
		args := [3]string{"0.0f", "0.0f", "0.0f"}
		for j := 0; j < StepInputs(s.Op, s.Flags); j++ {
			if j == s.Arg {
				args[j] = v
				continue
			}
			args[j] = operand(*k)
			*k++
		}
		c := fmt.Sprintf("zf_step(%d, %d, %d, %d, %d, %s, %s, %s)", s.Op, s.Act, s.Math, s.Flags, s.Out, args[0], args[1], args[2])
		if i == last {
			return c
		}
		return fmt.Sprintf("zf_round(%s, %d)", c, s.Out)
	}
	offsets := func(indent string) {
		if n > 0 {
			w("%sint off[ZF_EPI_MAXO];\n%szf_epi_offsets(p, %d, i, off);\n", indent, indent, n)
		}
	}
	w("/* epilogue %s */\n", e.key())
	// One element.
	w("ZF_FN float %s_one(ZF_PREF(zf_epi_p) p%s, int i, float v) {\n", name, params.String())
	offsets("  ")
	k := 0
	for i, s := range e.Steps {
		w("  /* %s, stored as %v */\n", opWords[s.Op], s.Out)
		w("  v = %s;\n", call(i, "v", func(k int) string { return fmt.Sprintf("zf_load(o%d, p.fmt[%d], off[%d])", k, k, k) }, &k))
	}
	w("  return v;\n}\n")
	// Eight consecutive elements: 16-byte loads where the layout allows.
	w("ZF_FN void %s_eight(ZF_PREF(zf_epi_p) p%s, int i, ZF_THREAD float* v) {\n", name, params.String())
	rope := e.HasRope()
	if !rope {
		w("  if (p.vec == 0) {\n    for (int e = 0; e < 8; e++) {\n      v[e] = %s_one(p%s, i + e, v[e]);\n    }\n    return;\n  }\n", name, args.String())
	}
	for k := 0; k < n; k++ {
		w("  float a%d[8];\n", k)
	}
	if rope {
		// The operands element by element where they cannot be read 8
		// at a time: the steps below then run on the 8 values as in the
		// vectorised layout (a rope needs the chunk's pairs).
		if n > 0 {
			w("  if (p.vec == 0) {\n    for (int e = 0; e < 8; e++) {\n      int off[ZF_EPI_MAXO];\n      zf_epi_offsets(p, %d, i + e, off);\n", n)
			for k := 0; k < n; k++ {
				w("      a%d[e] = zf_load(o%d, p.fmt[%d], off[%d]);\n", k, k, k, k)
			}
			w("    }\n  } else {\n")
		}
	}
	if n > 0 {
		w("  {\n")
		offsets("  ")
		for k := 0; k < n; k++ {
			w("  zf_load8(o%d, p.fmt[%d], off[%d], p.vbits & %d, a%d);\n", k, k, k, 1<<k, k)
		}
		w("  }\n")
		if rope {
			w("  }\n")
		}
	}
	k = 0
	for i, s := range e.Steps {
		c := call(i, "v[e]", func(k int) string { return fmt.Sprintf("a%d[e]", k) }, &k)
		if s.Op == OpRope {
			// The partners first: every v[e] is read before one is written.
			w("  {\n    float rot[8];\n    zf_rope_pairs8(v, rot);\n    ZF_UNROLL for (int e = 0; e < 8; e++) {\n      v[e] = %s;\n    }\n  }\n", c)
			continue
		}
		w("  ZF_UNROLL for (int e = 0; e < 8; e++) {\n    v[e] = %s;\n  }\n", c)
	}
	w("}\n")
	// The kernel.
	w("ZF_KERNEL(%s)(ZF_OUT(y, 0), ZF_IN(x, 1)", name)
	for k := 0; k < MaxEpiOperands; k++ {
		w(", ZF_IN(o%d, %d)", k, k+2)
	}
	if ts >= 0 {
		w(", ZF_PARAMS(zf_epi_p, p, %d), ZF_IN(tab, %d) ZF_TID) {\n", MaxEpiOperands+2, MaxEpiOperands+3)
		w("  ZF_DEV const ushort* zt = (ZF_DEV const ushort*)tab;\n")
	} else {
		w(", ZF_PARAMS(zf_epi_p, p, %d) ZF_TID) {\n", MaxEpiOperands+2)
	}
	w("  if (p.vec != 0) {\n    ZF_FOR_EACH(g, p.n / 8) {\n      int i = g * 8;\n      float v[8];\n")
	w("      zf_load8(x, %d, i, 1, v);\n      %s_eight(p%s, i, v);\n      zf_store8(y, %d, i, v);\n    }\n    return;\n  }\n",
		e.In, name, args.String(), e.Out())
	w("  ZF_FOR_EACH(i, p.n) {\n    zf_store(y, %d, i, %s_one(p%s, i, zf_load(x, %d, i)));\n  }\n}\n", e.Out(), name, args.String(), e.In)
	if ts >= 0 {
		// The table: entry h is the table step's zf_step at the bf16
		// value h, rounded to its Out, as the chain without a table
		// computes it.
		s := e.Steps[ts]
		enc := "zf_bits(zf_rn_bf16(v)) >> 16" // as zf_store stores it
		if s.Out == precision.F16 {
			enc = "zf_f32_to_f16(v)"
		}
		w("ZF_KERNEL(%s_tab)(ZF_OUT(tab, 0) ZF_TID) {\n  ZF_FOR_EACH(h, %d) {\n", name, TableSize)
		w("    float v = zf_step(%d, %d, %d, %d, %d, zf_bf16_to_f32((uint)h), 0.0f, 0.0f);\n", s.Op, s.Act, s.Math, s.Flags, s.Out)
		w("    ((ZF_DEV ushort*)tab)[h] = (ushort)(%s);\n  }\n}\n", enc)
	}
	return b.String(), nil
}

// kernelsMarker opens pointwise.zf's kernels; what comes before it is
// the functions (zf_step and all it calls) and the epilogue block.
const kernelsMarker = "/* ---- kernels ---- */"

// PointwiseFunctions is pointwise.zf up to its kernels: the text an
// epilogue needs, verbatim.
func PointwiseFunctions() string {
	i := strings.Index(pointwise, kernelsMarker)
	if i < 0 {
		panic("kernels: pointwise.zf has lost its kernels marker")
	}
	return pointwise[:i]
}

// EpilogueKernels is the kernels of the chains, duplicates once, in the
// target-neutral source.
func EpilogueKernels(es ...Epilogue) (string, error) {
	var b strings.Builder
	seen := map[string]bool{}
	for _, e := range es {
		if seen[e.Name()] {
			continue
		}
		seen[e.Name()] = true
		k, err := e.Kernel()
		if err != nil {
			return "", err
		}
		b.WriteString(k)
	}
	return b.String(), nil
}

// RenderEpilogues is what a backend compiles to run the chains: target
// t's prelude, pointwise.zf's functions (PointwiseFunctions, unchanged;
// not its kernels, which the chains do not launch and whose compile would
// dominate) and the chains' kernels.
func RenderEpilogues(t Target, es ...Epilogue) (string, error) {
	p, ok := preludes[t]
	if !ok {
		return "", fmt.Errorf("kernels: no prelude for target %v", t)
	}
	k, err := EpilogueKernels(es...)
	if err != nil {
		return "", err
	}
	return p + "\n#line 1 \"pointwise.zf\"\n" + PointwiseFunctions() + "\n#line 1 \"epilogues\"\n" + k, nil
}

// EpiP is zf_epi_p, the parameter block of an epilogue kernel.
type EpiP struct {
	N, Rank, NOps, Contig, Vec, VBits, Pad0, Pad1 int32
	Fmt                                           [MaxEpiOperands]int32
	Dims                                          [MaxRank]int32
	St                                            [MaxEpiOperands * MaxRank]int32
	Mag                                           [MaxRank]uint32 // Dims[d]'s divisor
	Shr                                           [MaxRank]int32
}

// divisor is the multiplier and shift with which CUDA's zf_udiv divides
// by d (1 ≤ d < 2³¹) every n below 2³¹, q = (⌊n·m / 2³²⌋ + n) >> s (the
// host and MSL renderings divide; TestDivisor checks the two agree):
// Granlund and Montgomery's m = ⌊2³²·(2ˢ − d)/d⌋ + 1 with 2ˢ⁻¹ < d ≤ 2ˢ
// ("Division by invariant integers using multiplication", 1994, fig. 4.1;
// n + ⌊n·m / 2³²⌋ < 2³² for such n, so the sum needs no 33rd bit).
func divisor(d int) (m uint32, s int32) {
	if d <= 0 {
		return 0, 0 // an empty axis: nothing is indexed
	}
	for 1<<s < d {
		s++
	}
	return uint32((uint64(1)<<32*(uint64(1)<<s-uint64(d)))/uint64(d) + 1), s
}

// NewEpiP lays out an epilogue over a contiguous output of shape out (the
// running value's shape) with operands of the given shapes and formats, in
// the chain's operand order; each must broadcast to out.
func NewEpiP(out []int, shapes [][]int, formats []precision.Format) (EpiP, error) {
	var p EpiP
	if len(shapes) > MaxEpiOperands || len(formats) != len(shapes) {
		return p, fmt.Errorf("kernels: epilogue: %d operands, %d formats (at most %d)", len(shapes), len(formats), MaxEpiOperands)
	}
	l, err := newLayout(out, shapes)
	if err != nil {
		return p, fmt.Errorf("kernels: epilogue: %w", err)
	}
	p.N, p.Rank, p.NOps, p.Contig = l.n, int32(len(l.dims)), int32(len(shapes)), l.contig
	for k, f := range formats {
		p.Fmt[k] = int32(f)
	}
	for i, d := range l.dims {
		p.Dims[i] = int32(d)
		p.Mag[i], p.Shr[i] = divisor(d)
		for k := range shapes {
			p.St[k*MaxRank+i] = int32(l.st[k][i])
		}
	}
	if ok, bits := vec8(l.dims, l.st); ok {
		p.Vec, p.VBits = 1, bits
	}
	return p, nil
}
