//go:build linux

package cuda

import (
	"fmt"
	"os"
	"slices"
	"sync"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/kernels"
)

// Fusion (exec.Fuser). A linear-headed region runs as the very Linear
// call of the unfused route (the same cuBLASLt plan and output type, so
// the same accumulation order and the same rounding of the accumulator: a
// GEMM writing f32 for the epilogue to round could pick another algorithm
// and sum in another order), then one epilogue kernel for the whole chain
// in place of one zf_elementwise launch a step. A norm-headed region runs
// as one kernel: the norm kernel compiled with the chain applied where it
// would store each value, so the norm's output is never written. The
// chain is rendered from the one pointwise source (kernels.Epilogue) and
// rounds where the unfused kernels store: the result is the unfused one
// bit for bit. cuBLASLt's GELU epilogue is not used: it applies GELU to
// the f32 accumulator, which the unfused route rounds first, and computes
// tanh its own way; its bias epilogue is, inside Linear, as unfused.
//
// A region is chosen by the ops it contains, their formats and shapes.
// Under FusionAuto the first run of each distinct region times both
// routes on the device and keeps fusion only where it was faster.

// Fusion says when the backend fuses a region.
type Fusion uint8

const (
	FusionAuto Fusion = iota // fuse where measured faster (the default)
	FusionOff                // never (ZFLOW_UNFUSED=1): the A/B switch
	FusionOn                 // always, without measuring (ZFLOW_FUSED=1)
)

func (f Fusion) String() string {
	switch f {
	case FusionAuto:
		return "auto"
	case FusionOff:
		return "off"
	case FusionOn:
		return "on"
	}
	return fmt.Sprintf("Fusion(%d)", uint8(f))
}

// fusionFromEnv reads the switches.
func fusionFromEnv() Fusion {
	switch {
	case os.Getenv("ZFLOW_UNFUSED") == "1":
		return FusionOff
	case os.Getenv("ZFLOW_FUSED") == "1":
		return FusionOn
	}
	return FusionAuto
}

// FusionRecord is what decided one region kind: its measurement (device
// time of one run of each route), or why it does not fuse.
type FusionRecord = exec.FusionDecision

// fusionState holds the mode and the decisions so far.
type fusionState struct {
	mu      sync.Mutex
	mode    Fusion
	decided map[string]*FusionRecord
	order   []string
}

// SetFusion sets when regions are fused (tests and A/B runs).
func (b *Backend) SetFusion(f Fusion) {
	b.fuse.mu.Lock()
	defer b.fuse.mu.Unlock()
	b.fuse.mode = f
}

// FusionMode is the switch in force (exec.FusionReporter).
func (b *Backend) FusionMode() string {
	b.fuse.mu.Lock()
	defer b.fuse.mu.Unlock()
	return b.fuse.mode.String()
}

// Fusions lists the measured regions in the order first met
// (exec.FusionReporter).
func (b *Backend) Fusions() []FusionRecord {
	b.fuse.mu.Lock()
	defer b.fuse.mu.Unlock()
	out := make([]FusionRecord, 0, len(b.fuse.order))
	for _, k := range b.fuse.order {
		out = append(out, *b.fuse.decided[k])
	}
	return out
}

// Fuse implements exec.Fuser.
func (b *Backend) Fuse(r exec.Region) (exec.Tensor, bool, error) {
	b.fuse.mu.Lock()
	mode := b.fuse.mode
	b.fuse.mu.Unlock()
	if mode == FusionOff {
		return nil, false, nil
	}
	p, why := b.planRegion(r)
	if p == nil {
		// Declined: the op-by-op route runs and reports any error; the
		// reason is kept for Fusions.
		b.record(r.String()+": "+why, FusionRecord{Region: r.String(), Declined: why})
		return nil, false, nil
	}
	if mode == FusionOn {
		// Forced: nothing measured; a join in the form splitJoins names.
		p.split = p.canSplit && b.splitJoins
		rec := FusionRecord{Region: p.desc, Fused: true}
		if p.canSplit {
			rec.Route = routeInNorm
			if p.split {
				rec.Route = routeSplit
			}
		}
		b.record(p.key+" "+rec.Route, rec)
		t, err := b.runFused(r, p)
		return t, err == nil, err
	}
	b.fuse.mu.Lock()
	rec, seen := b.fuse.decided[p.key]
	b.fuse.mu.Unlock()
	if seen {
		if !rec.Fused {
			return nil, false, nil
		}
		p.split = rec.Route == routeSplit
		t, err := b.runFused(r, p)
		return t, err == nil, err
	}
	return b.measure(r, p)
}

// measure times both routes once each, after a warm-up run of the fused
// one (its compile and the GEMM's plan), keeps the faster, and returns
// the fused result (the same bits either way). A join that can split is
// timed in both fused forms, and the fastest of the three kept.
func (b *Backend) measure(r exec.Region, p *epiPlan) (exec.Tensor, bool, error) {
	t, um, fm, err := b.timeRoutes(r, p)
	if err != nil {
		return nil, false, fmt.Errorf("cuda: fuse %s: measuring: %w", p.desc, err)
	}
	rec := FusionRecord{Region: p.desc, UnfusedMs: um, FusedMs: fm}
	if p.canSplit {
		p.split = true
		ts, um2, fm2, err := b.timeRoutes(r, p)
		if err != nil {
			b.Free(t)
			return nil, false, fmt.Errorf("cuda: fuse %s: measuring: %w", p.desc, err)
		}
		rec.Tried = map[string]float64{routeInNorm: fm, routeSplit: fm2}
		rec.UnfusedMs, rec.Route = min(um, um2), routeInNorm
		if fm2 < fm {
			rec.FusedMs, rec.Route = fm2, routeSplit
		}
		b.Free(t)
		t = ts
	}
	rec.Fused = rec.FusedMs < rec.UnfusedMs
	b.record(p.key, rec)
	return t, true, nil
}

// timeRoutes runs the unfused route then the fused one between events
// and returns the fused result and both device times.
func (b *Backend) timeRoutes(r exec.Region, p *epiPlan) (t exec.Tensor, unfusedMs, fusedMs float64, err error) {
	warm, err := b.runFused(r, p)
	if err != nil {
		return nil, 0, 0, err
	}
	b.Free(warm)
	var ev [3]*Event
	for i := range ev {
		if ev[i], err = b.NewEvent(); err != nil {
			return nil, 0, 0, err
		}
		defer ev[i].Destroy()
	}
	if err := ev[0].Record(); err != nil {
		return nil, 0, 0, err
	}
	u, err := exec.RunUnfused(b, r)
	if err != nil {
		return nil, 0, 0, fmt.Errorf("the unfused route: %w", err)
	}
	b.Free(u)
	if err := ev[1].Record(); err != nil {
		return nil, 0, 0, err
	}
	if t, err = b.runFused(r, p); err != nil {
		return nil, 0, 0, err
	}
	if err = ev[2].Record(); err == nil {
		if unfusedMs, err = ev[1].Since(ev[0]); err == nil {
			fusedMs, err = ev[2].Since(ev[1])
		}
	}
	if err != nil {
		b.Free(t)
		return nil, 0, 0, err
	}
	return t, unfusedMs, fusedMs, nil
}

// record keeps the first record of a region kind.
func (b *Backend) record(key string, rec FusionRecord) {
	b.fuse.mu.Lock()
	defer b.fuse.mu.Unlock()
	if b.fuse.decided == nil {
		b.fuse.decided = map[string]*FusionRecord{}
	}
	if _, ok := b.fuse.decided[key]; !ok {
		b.fuse.decided[key] = &rec
		b.fuse.order = append(b.fuse.order, key)
	}
}

// runFused runs a region: a norm as one kernel (normFused); a linear as
// the unfused route's own Linear call, then the epilogue kernel.
func (b *Backend) runFused(r exec.Region, p *epiPlan) (exec.Tensor, error) {
	h := r.Head
	if p.joinOnly {
		return b.runJoin(p)
	}
	if h.Op != exec.HeadLinear {
		if p.split {
			return b.joinSplit(p)
		}
		return b.normFused(p)
	}
	head, err := b.Linear(h.In[0], h.In[1], h.In[2], h.Spec)
	if err != nil {
		return nil, fmt.Errorf("cuda: fuse %s: %v: %w", p.desc, h.Op, err)
	}
	defer b.Free(head)
	ht := head.(*Tensor)
	if err := p.live(); err != nil {
		return nil, err
	}
	if p.epi.In != ht.format || !slices.Equal(ht.shape, p.shape) {
		return nil, fmt.Errorf("cuda: fuse %s: the head made %v%v, the plan expects %v%v", p.desc, ht.format, ht.shape, p.epi.In, p.shape)
	}
	return b.runEpilogue(p, ht)
}

// runEpilogue runs the chain's kernel over the head's result ht.
func (b *Backend) runEpilogue(p *epiPlan, ht *Tensor) (exec.Tensor, error) {
	if p.epi.TableStep() >= 0 {
		return b.runTable(p, ht)
	}
	params := p.params
	name := p.epi.Name()
	return b.result(ht.shape, p.epi.Out(), func(out *Tensor) error {
		if _, ok := b.fns[name]; !ok {
			src, err := kernels.RenderEpilogues(kernels.CUDA, p.epi)
			if err != nil {
				return err
			}
			if err := b.loadModule("zflow_"+name, src, []string{"--fmad=false"}, []string{name}); err != nil {
				return fmt.Errorf("cuda: fuse %s: %w", p.desc, err)
			}
		}
		if params.N == 0 {
			return nil
		}
		args := append([]any{out.ptr(), ht.ptr()}, p.operands(out)...)
		args = append(args, kernels.Bytes(&params))
		work := int(params.N)
		if params.Vec != 0 {
			work /= 8
		}
		return b.launch(name, b.grid1(work), block256, 0, args...)
	})
}

// live checks that no operand was freed since the plan was made.
func (p *epiPlan) live() error {
	for i, t := range p.ops {
		if t.buf == nil || t.buf.ptr == 0 {
			return fmt.Errorf("cuda: fuse %s: operand %d was freed", p.desc, i)
		}
	}
	return nil
}

// operands are the kernel's eight operand pointers (out's for the unused
// ones, which are never read).
func (p *epiPlan) operands(out *Tensor) []any {
	args := make([]any, kernels.MaxEpiOperands)
	for k := range args {
		args[k] = out.ptr()
		if k < len(p.ops) {
			args[k] = p.ops[k].ptr()
		}
	}
	return args
}
