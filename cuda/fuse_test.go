//go:build linux

package cuda

import (
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/kernels"
	"github.com/zflow/zflow/precision"
	"github.com/zflow/zflow/semantics"
	"github.com/zflow/zflow/trace"
)

// The fusion tests: a region run fused (one GEMM or norm, one epilogue
// kernel) must give the bytes the unfused route (exec.RunUnfused: one
// kernel a step) gives on the same device, for every step kind and for
// chains, in each storage format.

// withSpecials puts the values a chain must carry through unchanged in
// kind (−0, f32/bf16 and f16 subnormals, values past f16's range, ±Inf,
// NaN) at every 97th place.
func withSpecials(v []float32) []float32 {
	sp := []float32{float32(math.Copysign(0, -1)), 1e-40, -3e-39, 3e-6, -6e-8, 70000, -3e38,
		float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN())}
	for i := 0; i < len(v); i += 97 {
		v[i] = sp[(i/97)%len(sp)]
	}
	return v
}

// sameBits compares two results element by element, bits and all.
func sameBits(t *testing.T, b *Backend, name string, got, want exec.Tensor) {
	t.Helper()
	if got.Format() != want.Format() || fmt.Sprint(got.Shape()) != fmt.Sprint(want.Shape()) {
		t.Errorf("%s: fused %v%v, unfused %v%v", name, got.Format(), got.Shape(), want.Format(), want.Shape())
		return
	}
	g, err := b.Download(got)
	if err != nil {
		t.Fatal(err)
	}
	w, err := b.Download(want)
	if err != nil {
		t.Fatal(err)
	}
	bad, first := 0, -1
	var shown []string
	for i := range w {
		if math.Float32bits(g[i]) != math.Float32bits(w[i]) {
			if first < 0 {
				first = i
			}
			if len(shown) < 6 {
				shown = append(shown, fmt.Sprintf("[%d] %#08x/%#08x", i, math.Float32bits(g[i]), math.Float32bits(w[i])))
			}
			bad++
		}
	}
	if bad > 0 {
		t.Errorf("%s: %d of %d differ (first [%d]: fused %v, unfused %v; bits fused/unfused %s)", name, bad, len(w), first, g[first], w[first], strings.Join(shown, " "))
	}
}

// fusionChains are chains of fusionSteps' steps.
var fusionChains = [][]string{
	{"bias", "act gelu_tanh"},
	{"act gelu_tanh", "gated residual"},
	{"bias", "act silu", "gate multiply"},
	{"modulate", "act silu", "glu on the value", "residual"},
	{"cast f32", "act gelu_erf", "cast bf16", "gated residual tanh"},
	{"act f32 out, then round", "modulate rounded"},
	{"glu on the gate", "div recip", "maximum"},
}

// fusionSteps lists every step kind, built over the operands of one shape.
func fusionSteps(b exec.Backend, t *testing.T, rows, d int, f precision.Format) (map[string]exec.Step, func()) {
	var ts []exec.Tensor
	u := func(n int, seed uint64, shape []int, g precision.Format) exec.Tensor {
		x, err := b.Upload(withSpecials(randn(n, seed, 1)), shape, g)
		if err != nil {
			t.Fatal(err)
		}
		ts = append(ts, x)
		return x
	}
	bsz := 2
	full := []int{bsz, rows / bsz, d}
	bias, res := u(d, 31, []int{d}, f), u(rows*d, 32, full, f)
	gate, scale, shift := u(bsz*d, 33, []int{bsz, d}, f32), u(bsz*d, 34, []int{bsz, d}, f), u(bsz*d, 35, []int{bsz, d}, f)
	other := u(rows*d, 36, full, f)
	s := exec.Out(f)
	steps := map[string]exec.Step{
		"bias":          {Op: exec.StepAdd, In: []exec.Tensor{nil, bias}, Spec: s},
		"residual":      {Op: exec.StepAdd, In: []exec.Tensor{res, nil}, Arg: 1, Spec: s},
		"sub":           {Op: exec.StepSub, In: []exec.Tensor{res, nil}, Arg: 1, Spec: s},
		"div":           {Op: exec.StepDiv, In: []exec.Tensor{nil, bias}, Spec: s},
		"minimum":       {Op: exec.StepMinimum, In: []exec.Tensor{nil, bias}, Spec: s},
		"maximum":       {Op: exec.StepMaximum, In: []exec.Tensor{nil, other}, Spec: s},
		"gate multiply": {Op: exec.StepMul, In: []exec.Tensor{nil, other}, Spec: s},
		"cast f32":      {Op: exec.StepCast, In: []exec.Tensor{nil}, Format: f32},
		"cast bf16":     {Op: exec.StepCast, In: []exec.Tensor{nil}, Format: bf16},
		"cast f16":      {Op: exec.StepCast, In: []exec.Tensor{nil}, Format: f16},
		"modulate":      {Op: exec.StepModulate, In: []exec.Tensor{nil, shift, scale}, Modulate: exec.ModulateParams{PlusOne: true}, Spec: s},
		"modulate rounded": {Op: exec.StepModulate, In: []exec.Tensor{nil, shift, scale}, Modulate: exec.ModulateParams{PlusOne: true},
			Spec: exec.Spec{Out: f, Round: exec.RoundScale | exec.RoundProduct}},
		"modulate no shift":       {Op: exec.StepModulate, In: []exec.Tensor{nil, nil, scale}, Spec: s},
		"gated residual":          {Op: exec.StepGatedResidual, In: []exec.Tensor{res, nil, gate}, Arg: 1, Act: exec.ActIdentity, Spec: s},
		"gated residual tanh":     {Op: exec.StepGatedResidual, In: []exec.Tensor{res, nil, gate}, Arg: 1, Act: exec.ActTanh, Spec: exec.Spec{Out: f, Round: exec.RoundGate | exec.RoundProduct}},
		"gated residual on x":     {Op: exec.StepGatedResidual, In: []exec.Tensor{nil, other, gate}, Act: exec.ActSigmoid, Spec: s},
		"glu on the value":        {Op: exec.StepGLU, In: []exec.Tensor{other, nil}, Arg: 1, Act: exec.ActSiLU, Spec: s},
		"glu on the gate":         {Op: exec.StepGLU, In: []exec.Tensor{nil, other}, Act: exec.ActGELUTanh, Spec: exec.Spec{Out: f, Round: exec.RoundGate}},
		"act fast exp gelu_tanh":  {Op: exec.StepAct, In: []exec.Tensor{nil}, Act: exec.ActGELUTanh, Spec: exec.Spec{Out: f, Math: exec.MathFastExp}},
		"div recip":               {Op: exec.StepDiv, In: []exec.Tensor{nil, bias}, Spec: exec.Spec{Out: f, Math: exec.MathRecipDiv}},
		"act f32 out, then round": {Op: exec.StepAct, In: []exec.Tensor{nil}, Act: exec.ActSiLU, Spec: exec.Out(f32)},
	}
	for act := exec.ActIdentity; act <= exec.ActExp; act++ {
		steps["act "+act.String()] = exec.Step{Op: exec.StepAct, In: []exec.Tensor{nil}, Act: act, Spec: s}
	}
	return steps, func() {
		for _, x := range ts {
			b.Free(x)
		}
	}
}

func TestFusedEqualsUnfused(t *testing.T) {
	b := need(t)
	b.SetFusion(FusionOn)
	defer b.SetFusion(fusionFromEnv())
	// Every linear region with a table step reads its table (runTable),
	// however small.
	b.tableMin = 1
	defer func() { b.tableMin = tableMinElems }()
	const rows, k, d = 256, 192, 320 // d a multiple of 8: the 8-a-thread path
	formats := []precision.Format{bf16, f16, f32}
	if only := os.Getenv("ZFLOW_TEST_FORMATS"); only != "" { // a device call's time: e.g. bf16
		formats = nil
		for _, f := range []precision.Format{bf16, f16, f32} {
			if slices.Contains(strings.Split(only, ","), f.String()) {
				formats = append(formats, f)
			}
		}
	}
	for _, f := range formats {
		x := up(t, b, withSpecials(randn(rows*k, 41, 1)), []int{2, rows / 2, k}, f)
		w := up(t, b, randn(d*k, 42, 0.05), []int{d, k}, f)
		bias := up(t, b, randn(d, 43, 0.1), []int{d}, f)
		xn := up(t, b, randn(rows*d, 44, 2), []int{2, rows / 2, d}, f)
		gamma := up(t, b, randn(d, 45, 1), []int{d}, f)
		steps, free := fusionSteps(b, t, rows, d, f)
		heads := map[string]exec.Head{
			"linear":           {Op: exec.HeadLinear, In: [3]exec.Tensor{x.g, w.g, nil}, Spec: exec.Out(f)},
			"linear with bias": {Op: exec.HeadLinear, In: [3]exec.Tensor{x.g, w.g, bias.g}, Spec: exec.Out(f)},
			"linear f32 out":   {Op: exec.HeadLinear, In: [3]exec.Tensor{x.g, w.g, bias.g}, Spec: exec.Out(f32)},
			"norm":             {Op: exec.HeadNorm, In: [3]exec.Tensor{xn.g, gamma.g, nil}, Norm: exec.NormParams{Kind: exec.NormRMS, Eps: 1e-6}, Spec: exec.Out(f)},
		}
		var cases []struct {
			name string
			r    exec.Region
		}
		add := func(head string, names ...string) {
			r := exec.Region{Head: heads[head]}
			for _, n := range names {
				s, ok := steps[n]
				if !ok {
					t.Fatalf("no step %q", n)
				}
				r.Steps = append(r.Steps, s)
			}
			cases = append(cases, struct {
				name string
				r    exec.Region
			}{fmt.Sprintf("%v: %s: %s", f, head, strings.Join(names, ", ")), r})
		}
		for n := range steps {
			add("linear", n)
		}
		add("linear with bias", "act gelu_tanh")
		add("linear f32 out", "cast bf16", "act gelu_tanh")
		add("norm", "modulate")
		for _, c := range fusionChains {
			add("linear", c...)
			add("norm", c...)
		}
		for _, c := range cases {
			want, err := exec.RunUnfused(b, c.r)
			if err != nil {
				t.Fatalf("%s: unfused: %v", c.name, err)
			}
			got, ok, err := b.Fuse(c.r)
			if err != nil || !ok {
				t.Fatalf("%s: fused: ok %v, %v", c.name, ok, err)
			}
			sameBits(t, b, c.name, got, want)
			b.Free(got)
			b.Free(want)
		}
		t.Logf("%v: %d regions fused, each bit-exact with its unfused route", f, len(cases))
		free()
		for _, p := range []pair{x, w, bias, xn, gamma} {
			p.free(b)
		}
	}
}

// TestFusionSwitch: off declines every region; auto measures a region
// kind once, says what it measured and returns the unfused bits.
func TestFusionSwitch(t *testing.T) {
	b := need(t)
	defer b.SetFusion(fusionFromEnv())
	x := up(t, b, randn(64*256, 51, 1), []int{64, 256}, bf16)
	w := up(t, b, randn(512*256, 52, 0.05), []int{512, 256}, bf16)
	defer x.free(b)
	defer w.free(b)
	r := exec.Region{Head: exec.Head{Op: exec.HeadLinear, In: [3]exec.Tensor{x.g, w.g, nil}, Spec: exec.Out(bf16)},
		Steps: []exec.Step{{Op: exec.StepAct, In: []exec.Tensor{nil}, Act: exec.ActGELUTanh, Spec: exec.Out(bf16)}}}
	b.SetFusion(FusionOff)
	if _, ok, err := b.Fuse(r); ok || err != nil {
		t.Fatalf("FusionOff: ok %v, %v; want declined", ok, err)
	}
	b.SetFusion(FusionAuto)
	before := len(b.Fusions())
	got, ok, err := b.Fuse(r)
	if err != nil || !ok {
		t.Fatalf("FusionAuto, first run: ok %v, %v; want the measured run's result", ok, err)
	}
	want, err := exec.RunUnfused(b, r)
	if err != nil {
		t.Fatal(err)
	}
	sameBits(t, b, "auto", got, want)
	b.Free(got)
	b.Free(want)
	recs := b.Fusions()
	if len(recs) != before+1 {
		t.Fatalf("%d records after one new region kind, want %d", len(recs), before+1)
	}
	rec := recs[len(recs)-1]
	if rec.UnfusedMs <= 0 || rec.FusedMs <= 0 || rec.Fused != (rec.FusedMs < rec.UnfusedMs) {
		t.Errorf("record %+v: both routes must be timed and the faster kept", rec)
	}
	t.Logf("%+v", rec)
	again, ok, err := b.Fuse(r)
	if err != nil || ok != rec.Fused {
		t.Errorf("second run: ok %v, %v; the record says fused %v", ok, err, rec.Fused)
	}
	if ok {
		b.Free(again)
	}
	// A region the epilogue cannot take is declined with its reason.
	b.SetFusion(FusionOn)
	each := r
	each.Steps = []exec.Step{{Op: exec.StepAct, In: []exec.Tensor{nil}, Act: exec.ActSiLU, Spec: exec.Composed(bf16)}}
	if _, ok, err := b.Fuse(each); ok || err != nil {
		t.Errorf("act with RoundEach: ok %v, %v; want declined", ok, err)
	}
	if recs := b.Fusions(); recs[len(recs)-1].Declined == "" {
		t.Errorf("the declined region has no reason: %+v", recs[len(recs)-1])
	}
}

// TestFusedProgram runs the dit fixture's program through the
// interpreter with fusion forced on and off: the same bits.
func TestFusedProgram(t *testing.T) {
	b := need(t)
	defer b.SetFusion(fusionFromEnv())
	for _, f := range []string{"bf16", "f32"} {
		tr, err := trace.Open("../fixtures/dit/dit-" + f + ".npz")
		if err != nil {
			t.Fatal(err)
		}
		doc, err := semantics.Read("../semantics/testdata/dit-" + f + ".json")
		if err != nil {
			tr.Close()
			t.Fatal(err)
		}
		// The bf16 plan rounds its activations' every step, a variant
		// CUDA has no kernel for: dropped here (both routes run the same
		// document; what is compared is fused against unfused).
		doc.Precision.Rules = slices.DeleteFunc(doc.Precision.Rules, func(r semantics.PrecisionRule) bool {
			return r.Op == "act" && r.Round == "each"
		})
		var outs [2][]float32
		for i, mode := range []Fusion{FusionOff, FusionOn} {
			b.SetFusion(mode)
			r, err := program.NewRunner(b, doc, program.TraceParams(tr), program.TraceInputs(tr))
			if err != nil {
				t.Fatal(err)
			}
			out, err := r.Run(nil)
			if err != nil {
				t.Fatalf("%s, fusion %v: %v", f, mode, err)
			}
			if outs[i], err = b.Download(out); err != nil {
				t.Fatal(err)
			}
			b.Free(out)
			r.Close()
		}
		tr.Close()
		bad := 0
		for i := range outs[0] {
			if math.Float32bits(outs[0][i]) != math.Float32bits(outs[1][i]) {
				bad++
			}
		}
		if bad > 0 || len(outs[0]) == 0 {
			t.Errorf("dit %s: %d of %d outputs differ between fused and unfused", f, bad, len(outs[0]))
		}
	}
}

// TestFusionTiming times fused against unfused on real-width regions
// (bench/fusion_cuda.sh; ZFLOW_FUSION_TIMING=1, else skipped).
func TestFusionTiming(t *testing.T) {
	b := need(t)
	if os.Getenv("ZFLOW_FUSION_TIMING") != "1" {
		t.Skip("set ZFLOW_FUSION_TIMING=1 to time fused against unfused at real width")
	}
	defer b.SetFusion(fusionFromEnv())
	const bsz, seq, d, ff = 2, 2304, 3072, 12288 // 4608 rows
	x := up(t, b, randn(bsz*seq*d, 61, 1), []int{bsz, seq, d}, bf16)
	w1 := up(t, b, randn(ff*d, 62, 0.02), []int{ff, d}, bf16)
	b1 := up(t, b, randn(ff, 63, 0.1), []int{ff}, bf16)
	w2 := up(t, b, randn(d*d, 64, 0.02), []int{d, d}, bf16)
	res := up(t, b, randn(bsz*seq*d, 65, 1), []int{bsz, seq, d}, bf16)
	gate := up(t, b, randn(bsz*d, 66, 1), []int{bsz, d}, bf16)
	defer func() {
		for _, p := range []pair{x, w1, b1, w2, res, gate} {
			p.free(b)
		}
	}()
	s := exec.Out(bf16)
	regions := []struct {
		name string
		r    exec.Region
	}{
		{"[4608,3072]x[3072,12288]+b → gelu_tanh", exec.Region{Head: exec.Head{Op: exec.HeadLinear, In: [3]exec.Tensor{x.g, w1.g, b1.g}, Spec: s},
			Steps: []exec.Step{{Op: exec.StepAct, In: []exec.Tensor{nil}, Act: exec.ActGELUTanh, Spec: s}}}},
		{"[4608,3072]x[3072,3072] → gated residual", exec.Region{Head: exec.Head{Op: exec.HeadLinear, In: [3]exec.Tensor{x.g, w2.g, nil}, Spec: s},
			Steps: []exec.Step{{Op: exec.StepGatedResidual, In: []exec.Tensor{res.g, nil, gate.g}, Arg: 1, Spec: s}}}},
		{"[4608,3072]x[3072,12288]+b → cast → gelu_tanh → ·v", exec.Region{Head: exec.Head{Op: exec.HeadLinear, In: [3]exec.Tensor{x.g, w1.g, b1.g}, Spec: s},
			Steps: []exec.Step{{Op: exec.StepCast, In: []exec.Tensor{nil}, Format: bf16}, {Op: exec.StepAct, In: []exec.Tensor{nil}, Act: exec.ActGELUTanh, Spec: s},
				{Op: exec.StepMul, In: []exec.Tensor{nil, b1.g}, Spec: s}}}},
	}
	xn := up(t, b, randn(bsz*seq*d, 67, 3), []int{bsz, seq, d}, bf16)
	shift := up(t, b, randn(bsz*d, 68, 1), []int{bsz, d}, bf16)
	defer xn.free(b)
	defer shift.free(b)
	regions = append(regions, struct {
		name string
		r    exec.Region
	}{"layer norm [2,2304,3072] → modulate (1+scale)", exec.Region{Head: exec.Head{Op: exec.HeadNorm, In: [3]exec.Tensor{xn.g, nil, nil},
		Norm: exec.NormParams{Kind: exec.NormLayer, Eps: 1e-6}, Spec: s},
		Steps: []exec.Step{{Op: exec.StepModulate, In: []exec.Tensor{nil, shift.g, gate.g}, Modulate: exec.ModulateParams{PlusOne: true}, Spec: s}}}})
	const reps = 20
	timeIt := func(name string, fn func() (exec.Tensor, error)) float64 {
		for i := 0; i < 2; i++ { // warm: compiles, GEMM plans
			y, err := fn()
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			b.Free(y)
		}
		start, err := b.NewEvent()
		if err != nil {
			t.Fatal(err)
		}
		defer start.Destroy()
		end, err := b.NewEvent()
		if err != nil {
			t.Fatal(err)
		}
		defer end.Destroy()
		if err := start.Record(); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < reps; i++ {
			y, err := fn()
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			b.Free(y)
		}
		if err := end.Record(); err != nil {
			t.Fatal(err)
		}
		ms, err := end.Since(start)
		if err != nil {
			t.Fatal(err)
		}
		return ms / reps
	}
	b.SetFusion(FusionOn)
	for _, rg := range regions {
		r := rg.r
		unfused := timeIt(rg.name+" unfused", func() (exec.Tensor, error) { return exec.RunUnfused(b, r) })
		fused := timeIt(rg.name+" fused", func() (exec.Tensor, error) {
			y, ok, err := b.Fuse(r)
			if err == nil && !ok {
				err = fmt.Errorf("declined")
			}
			return y, err
		})
		want, err := exec.RunUnfused(b, r)
		if err != nil {
			t.Fatal(err)
		}
		got, _, err := b.Fuse(r)
		if err != nil {
			t.Fatal(err)
		}
		sameBits(t, b, rg.name, got, want)
		b.Free(got)
		b.Free(want)
		fmt.Printf("fusion timing: %-58s unfused %8.3f ms  fused %8.3f ms  fused/unfused %.3f\n", rg.name, unfused, fused, fused/unfused)
	}
}

// TestEpilogueTableExhaustive: an activation read from its table
// (kernels.Epilogue.TableStep, runTable) at every one of the 65,536 bf16
// bit patterns (signalling NaNs included) gives the bits of the unfused
// act kernel and the CPU backend's values (NaN for NaN): the table holds
// the whole function, so this is the proof for every input it can meet.
// The chains are compiled as one module (a device call's time).
func TestEpilogueTableExhaustive(t *testing.T) {
	b := need(t)
	bits := make([]uint16, kernels.TableSize)
	vals := make([]float32, kernels.TableSize)
	for h := range bits {
		bits[h] = uint16(h)
		vals[h] = math.Float32frombits(uint32(h) << 16)
	}
	shape := []int{kernels.TableSize / 8, 8}
	params, err := kernels.NewEpiP(shape, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	type tcase struct {
		act exec.ActKind
		m   exec.Math
		out precision.Format
	}
	var cases []tcase
	for _, act := range []exec.ActKind{exec.ActSiLU, exec.ActGELUTanh, exec.ActGELUErf, exec.ActTanh, exec.ActSigmoid} {
		for _, m := range []exec.Math{0, exec.MathFastExp} {
			cases = append(cases, tcase{act, m, bf16}, tcase{act, m, f16})
		}
	}
	for act := exec.ActSin; act <= exec.ActExpm1; act++ {
		cases = append(cases, tcase{act, 0, bf16})
	}
	plans := make([]*epiPlan, len(cases))
	var eps []kernels.Epilogue
	var fns []string
	for i, c := range cases {
		name := fmt.Sprintf("%v math %d → %v", c.act, c.m, c.out)
		plans[i] = &epiPlan{epi: kernels.Epilogue{In: bf16, Table: true,
			Steps: []kernels.Step{{Op: kernels.OpAct, Act: int32(c.act), Math: int32(c.m), Out: c.out}}},
			shape: shape, params: params, desc: name}
		if plans[i].epi.TableStep() != 0 {
			t.Fatalf("%s: no table step", name)
		}
		eps = append(eps, plans[i].epi)
		fns = append(fns, plans[i].epi.Name()+"_tab", plans[i].epi.Name()+"_tabk")
	}
	var x *Tensor
	if err := b.do(func() error {
		src, err := kernels.RenderEpilogues(kernels.CUDA, eps...)
		if err != nil {
			return err
		}
		for _, e := range eps {
			src += tableKernel(e)
		}
		if err := b.loadModule("zflow_table_check", src, []string{"--fmad=false"}, fns); err != nil {
			return err
		}
		for _, e := range eps {
			if err := b.d.check("cuFuncSetAttribute", b.d.cuFuncSetAttribute(b.fns[e.Name()+"_tabk"], funcAttrMaxDynamicShared, tableSmem)); err != nil {
				return err
			}
		}
		if x, err = b.newTensor(shape, bf16); err != nil {
			return err
		}
		return b.d.check("cuMemcpyHtoD", b.d.cuMemcpyHtoD(x.ptr(), unsafe.Pointer(&bits[0]), uint64(2*len(bits))))
	}); err != nil {
		t.Fatal(err)
	}
	defer b.Free(x)
	for i, c := range cases {
		p := plans[i]
		got, err := b.runTable(p, x)
		if err != nil {
			t.Fatalf("%s: %v", p.desc, err)
		}
		want, err := b.Act(x, c.act, exec.Spec{Out: c.out, Math: c.m})
		if err != nil {
			t.Fatalf("%s: unfused: %v", p.desc, err)
		}
		sameBits(t, b, p.desc+" (table against the act kernel)", got, want)
		g, err := b.Download(got)
		if err != nil {
			t.Fatal(err)
		}
		bad, first := 0, -1
		for h, v := range vals {
			ref := c.out.Round(exec.ActivateSpec(c.act, v, exec.Spec{Out: c.out, Math: c.m}))
			if math.Float32bits(ref) != math.Float32bits(g[h]) && !(ref != ref && g[h] != g[h]) {
				if first < 0 {
					first = h
				}
				bad++
			}
		}
		if bad > 0 {
			t.Errorf("%s: %d of 65536 differ from the CPU backend (first: input %#04x, table %v, CPU %v)", p.desc, bad, first, g[first],
				c.out.Round(exec.ActivateSpec(c.act, vals[first], exec.Spec{Out: c.out, Math: c.m})))
		}
		b.Free(got)
		b.Free(want)
	}
	t.Logf("%d tables: every bf16 input gives the act kernel's bits and the CPU backend's value", len(cases))
}
