package kernels

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	zexec "github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/precision"
)

// TestEpilogueRope: chains with a rope step (interleaved pairs, the
// tables [S, D] against a running value viewed [B, S, H, D]) run fused
// (the chain's kernel; N_eight with its operands read 8 at a time and
// element by element) and unfused (zf_rope_kernel for the rope, one
// zf_elementwise a step for the rest), and the outputs must be the same
// bytes.
func TestEpilogueRope(t *testing.T) {
	const bsz, seq, heads, d = 2, 6, 3, 16
	shape := []int{bsz, seq, heads, d}
	n := bsz * seq * heads * d
	r := rand.New(rand.NewPCG(11, 12))
	type opnd struct {
		shape []int
		f     precision.Format // 0: the step's
	}
	type kind struct {
		step Step
		ops  []opnd
	}
	table := []int{seq, 1, d}
	kinds := map[string]kind{
		"rope":            {Step{Op: OpRope}, []opnd{{table, precision.F32}, {table, precision.F32}}},
		"rope bf16 table": {Step{Op: OpRope}, []opnd{{table, precision.BF16}, {table, precision.BF16}}},
		"rope rounded":    {Step{Op: OpRope, Flags: RProduct}, []opnd{{table, precision.F32}, {table, precision.F32}}},
		"act silu":        {Step{Op: OpAct, Act: int32(zexec.ActSiLU)}, nil},
		"gate multiply":   {Step{Op: OpMul}, []opnd{{[]int{bsz, 1, 1, 1}, precision.F32}}},
		"add residual":    {Step{Op: OpAdd, Arg: 1}, []opnd{{shape, 0}}},
	}
	chains := [][]string{
		{"rope"}, {"rope bf16 table"}, {"rope rounded"},
		{"rope", "act silu"}, {"act silu", "rope"}, {"gate multiply", "rope rounded", "add residual"},
		{"rope", "rope"},
	}
	var eps []Epilogue
	var jobs []epiJob
	type run struct {
		name        string
		fused, last int
	}
	var runs []run
	for _, f := range []precision.Format{precision.BF16, precision.F16, precision.F32} {
		for _, names := range chains {
			name := fmt.Sprintf("%s %v", strings.Join(names, ", "), f)
			e := Epilogue{In: f}
			var opShapes [][]int
			var opFmts []precision.Format
			var opData [][]byte
			stepOps := make([][]int, len(names))
			for j, nm := range names {
				k := kinds[nm]
				st := k.step
				st.Out = f
				e.Steps = append(e.Steps, st)
				for _, o := range k.ops {
					of := o.f
					if of == 0 {
						of = f
					}
					m := 1
					for _, x := range o.shape {
						m *= x
					}
					stepOps[j] = append(stepOps[j], len(opShapes))
					opShapes, opFmts = append(opShapes, o.shape), append(opFmts, of)
					opData = append(opData, pack(epiValues(r, m), of))
				}
			}
			if !e.HasRope() {
				t.Fatalf("%s: HasRope false", name)
			}
			if err := e.Check(); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			eps = append(eps, e)
			ei := len(eps) - 1
			xb := pack(epiValues(r, n), f)
			p, err := NewEpiP(shape, opShapes, opFmts)
			if err != nil || p.Vec == 0 {
				t.Fatalf("%s: vec %d, %v", name, p.Vec, err)
			}
			fusedJob := func(p EpiP, kernel int32) epiJob {
				return epiJob{kernel: kernel, params: append([]byte(nil), Bytes(&p)...), bufs: append([][]byte{xb}, opData...), outLen: n * esize(e.Out())}
			}
			jobs = append(jobs, fusedJob(p, int32(ei+1)))
			fused := len(jobs) - 1
			for j, st := range e.Steps {
				in := f
				var x []byte = xb
				if j > 0 {
					in, x = e.Steps[j-1].Out, nil
				}
				ops := stepOps[j]
				if st.Op == OpRope {
					rp := RopeP{N: int32(n), Width: heads * d, Seq: seq, D: d, R: d, FmtX: int32(in), FmtT: int32(opFmts[ops[0]]),
						OutFmt: int32(st.Out), Flags: st.Flags & RProduct}
					rp.SetVec()
					jobs = append(jobs, epiJob{kernel: 1000, params: append([]byte(nil), Bytes(&rp)...), bufs: [][]byte{x, opData[ops[0]], opData[ops[1]]}, outLen: n * esize(st.Out)})
					continue
				}
				nin := StepInputs(st.Op, st.Flags)
				shapes, bufs, fmts := make([][]int, nin), make([][]byte, nin), make([]int32, nin)
				k := 0
				for a := 0; a < nin; a++ {
					if a == st.Arg {
						shapes[a], bufs[a], fmts[a] = shape, x, int32(in)
						continue
					}
					o := ops[k]
					k++
					shapes[a], bufs[a], fmts[a] = opShapes[o], opData[o], int32(opFmts[o])
				}
				ew, err := NewEW(shape, shapes...)
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				ew.Op, ew.Act, ew.Math, ew.Flags, ew.OutFmt = st.Op, st.Act, st.Math, st.Flags, int32(st.Out)
				copy(ew.Fmt[:], fmts)
				jobs = append(jobs, epiJob{kernel: 0, params: append([]byte(nil), Bytes(&ew)...), bufs: bufs, outLen: n * esize(st.Out)})
			}
			runs = append(runs, run{name, fused, len(jobs) - 1})
			// N_eight as a norm calls it, operands 8 at a time and one by one.
			jobs = append(jobs, fusedJob(p, -int32(ei+1)))
			runs = append(runs, run{name + ", eight", len(jobs) - 1, fused})
			q := p
			q.Vec = 0
			jobs = append(jobs, fusedJob(q, -int32(ei+1)))
			runs = append(runs, run{name + ", eight, operands one by one", len(jobs) - 1, fused})
		}
	}
	outs := runEpiJobs(t, eps, jobs)
	for _, rn := range runs {
		a, b := outs[rn.fused], outs[rn.last]
		if len(a) == 0 || !bytes.Equal(a, b) {
			t.Errorf("%s: fused and unfused differ", rn.name)
		}
	}
	// The one-element form has no partner: the chain's N_one says NaN.
	k, err := eps[0].Kernel()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(k, "rope: no partner in one element") || strings.Count(k, "zf_rope_pairs8(") != 1 {
		t.Errorf("rope chain rendering:\n%s", k)
	}
	bad := Epilogue{In: precision.BF16, Steps: []Step{{Op: OpRope, Out: precision.BF16, Arg: 1}}}
	if err := bad.Check(); err == nil {
		t.Error("a rope of a running cos was accepted")
	}
	t.Logf("%d rope chains, fused == unfused over %d runs", len(eps), len(runs))
}
