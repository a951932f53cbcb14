package program

import (
	"fmt"
	"runtime"
	"slices"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/internal/workers"
	"github.com/zflow/zflow/precision"
	"github.com/zflow/zflow/semantics"
)

// Runner drives a program: one forward (run "forward") or a flow-matching
// Euler loop over the sigmas (run "flow_euler"):
//
//	t_i = round(σ_i)                         (cast "sampler.timestep")
//	v   = model(x, t_i)
//	x   ← x + round(sign·(σ[i+1] − σ[i]) · v)  (mul "sampler.scale", add "sampler.update")
//
// with σ differences in f32 and the rounding of each op from the
// precision plan; under round=scale on "sampler.scale" the step size is
// first rounded to the multiply's format (a Python scalar times a tensor
// in PyTorch ≤ 1.13 on the CPU: the scalar is cast to the tensor's bf16
// or f16 before the product). A program may denoise several latents together (roles
// latents, latents.1, …): the one call reads them all and its k-th output
// steps the k-th latents by the same update.
type Runner struct {
	B   exec.Backend
	Doc *semantics.Document
	P   *Program
	It  *Interpreter

	build func(*semantics.Document, Shapes) (*Program, error)
	// fromProgram: P is the program the document carries (Build of a
	// version 2 document), which a plan changes only in its specs
	fromProgram bool
	env         map[string]exec.Tensor // weights, inputs, constants
	latents     []exec.Tensor          // the request's initial latents, by index k of their role
	sigmas      []float32
	sign        float32
	spec        struct{ timestep, scale, update exec.Spec }

	// MemoLimit bounds what Run keeps of the step-invariant nodes' results
	// (0: MemoBytes; see Memo).
	MemoLimit int
}

// NewRunner builds doc's program for the request in inputs, with the
// weights from weights, and uploads both.
func NewRunner(b exec.Backend, doc *semantics.Document, weights, inputs Source) (*Runner, error) {
	r, err := newRunner(b, doc, weights, inputs, Build)
	if r != nil {
		r.fromProgram = doc.Program != nil
	}
	return r, err
}

// NewPartialRunner is NewRunner for a teacher-forced check of a document
// with holes (BuildPartial); its results mean nothing free running.
func NewPartialRunner(b exec.Backend, doc *semantics.Document, weights, inputs Source) (*Runner, error) {
	return newRunner(b, doc, weights, inputs, BuildPartial)
}

func newRunner(b exec.Backend, doc *semantics.Document, weights, inputs Source, build func(*semantics.Document, Shapes) (*Program, error)) (*Runner, error) {
	shapes := Shapes{Weights: map[string][]int{}, Inputs: map[string][]int{}}
	paths := doc.Structure.ParamPaths()
	if doc.Program != nil {
		paths = doc.Program.ParamPaths()
	}
	for _, path := range paths {
		s, err := weights.Shape(path)
		if err != nil {
			return nil, fmt.Errorf("program: weights: %w", err)
		}
		shapes.Weights[path] = s
	}
	for _, in := range doc.Structure.Inputs {
		s, err := inputs.Shape(in.Name)
		if err != nil {
			return nil, fmt.Errorf("program: inputs: role %s: %w", in.Role, err)
		}
		shapes.Inputs[in.Role] = s
	}
	if err := checkSizes(doc, shapes); err != nil {
		return nil, err
	}
	p, err := build(doc, shapes)
	if err != nil {
		return nil, err
	}
	r := &Runner{B: b, Doc: doc, P: p, It: &Interpreter{B: b, P: p}, build: build, env: map[string]exec.Tensor{}}
	if err := r.load(weights, inputs); err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

// inputName is the request's name of the input with a role.
func inputName(doc *semantics.Document, role string) string {
	for _, in := range doc.Structure.Inputs {
		if in.Role == role {
			return in.Name
		}
	}
	return ""
}

// load uploads the weights, inputs and constants in the program's order,
// reading ahead on every core: reading a real-width block's weights
// (copied out of the trace's mapping, each value checked) is most of a
// load, and a GPU's uploads are serial anyway. At most GOMAXPROCS reads
// are held at once.
func (r *Runner) load(weights, inputs Source) error {
	type job struct {
		name, as string
		v        *Value
		src      Source // nil: a constant
	}
	var jobs []job
	for _, name := range r.P.Order {
		v := r.P.Values[name]
		switch {
		case v.Kind == Weight:
			jobs = append(jobs, job{name: name, as: v.Source, v: v, src: weights})
		case v.Kind == Input:
			jobs = append(jobs, job{name: name, as: inputName(r.Doc, v.Source), v: v, src: inputs})
		case v.Kind == Const:
			jobs = append(jobs, job{name: name, v: v})
		case v.Kind == StepInput && isLatents(v.Source):
			jobs = append(jobs, job{name: name, as: inputName(r.Doc, v.Source), v: v, src: inputs})
		}
	}
	type read struct {
		data []float32
		f    precision.Format
		err  error
	}
	reads := make([]chan read, len(jobs))
	for i := range reads {
		reads[i] = make(chan read, 1)
	}
	window := make(chan struct{}, runtime.GOMAXPROCS(0))
	stop := make(chan struct{})
	var g workers.Group
	defer func() { close(stop); g.Wait() }()
	g.Go(func() {
		for i, j := range jobs {
			select {
			case window <- struct{}{}:
			case <-stop:
				return
			}
			g.Go(func() {
				res := read{err: fmt.Errorf("program: reading %s %q failed", j.v.Kind, j.as)} // what a panic leaves
				defer func() { reads[i] <- res }()
				if j.src == nil {
					res = read{data: j.v.Data, f: j.v.Format}
					return
				}
				res.data, res.f, res.err = j.src.Read(j.as)
				if res.err != nil {
					res.err = fmt.Errorf("program: %w", res.err)
				} else if len(res.data) != exec.Numel(j.v.Shape) {
					res.err = fmt.Errorf("program: %s %q: %d values for shape %v", j.v.Kind, j.as, len(res.data), j.v.Shape)
				}
			})
		}
	})
	for i, j := range jobs {
		res := <-reads[i]
		if res.err != nil {
			return res.err
		}
		t, err := r.B.Upload(res.data, j.v.Shape, res.f)
		<-window
		if err != nil {
			return err
		}
		if j.v.Kind == StepInput {
			k, _ := semantics.LatentsIndex(j.v.Source)
			for len(r.latents) <= k {
				r.latents = append(r.latents, nil)
			}
			r.latents[k] = t
		} else {
			r.env[j.name] = t
		}
	}
	if r.Doc.Structure.Run != "flow_euler" {
		return nil
	}
	sig, _, err := inputs.Read(inputName(r.Doc, "sigmas"))
	if err != nil {
		return fmt.Errorf("program: sigmas: %w", err)
	}
	if len(sig) < 2 {
		return fmt.Errorf("program: sigmas: %d values, a schedule needs at least 2", len(sig))
	}
	r.sigmas = sig
	sign, err := r.Doc.Number("euler_sign", "sampler")
	if err != nil {
		return fmt.Errorf("program: %w", err)
	}
	r.sign = float32(sign)
	return r.loadSpecs()
}

// loadSpecs resolves the sampler's specs from the plan.
func (r *Runner) loadSpecs() error {
	if r.sigmas == nil {
		return nil
	}
	pr := &r.Doc.Precision
	for _, s := range []struct {
		dst      *exec.Spec
		op, role string
	}{{&r.spec.timestep, "cast", "sampler.timestep"}, {&r.spec.scale, "mul", "sampler.scale"}, {&r.spec.update, "add", "sampler.update"}} {
		var err error
		if *s.dst, err = SpecFor(pr, s.op, s.role); err != nil {
			return fmt.Errorf("program: %w", err)
		}
	}
	return nil
}

// Steps is the number of model calls Run makes.
func (r *Runner) Steps() int {
	if r.sigmas == nil {
		return 1
	}
	return len(r.sigmas) - 1
}

// Run runs the whole request and returns its result (the final latents, or
// the forward's output), which the caller frees. progress, if not nil, is
// called after each model call. A run of several latents returns the
// first; RunAll returns them all.
func (r *Runner) Run(progress func(done, total int)) (exec.Tensor, error) {
	outs, err := r.RunAll(progress)
	if err != nil {
		return nil, err
	}
	for _, t := range outs[1:] {
		r.B.Free(t)
	}
	return outs[0], nil
}

// RunAll is Run returning every result: each latents' final value, in
// the order of their roles (one for a forward run).
func (r *Runner) RunAll(progress func(done, total int)) ([]exec.Tensor, error) {
	if r.sigmas == nil {
		outs, err := r.It.Forward(0, r.env)
		if err != nil {
			return nil, err
		}
		for _, t := range outs[1:] {
			r.B.Free(t)
		}
		if progress != nil {
			progress(1, 1)
		}
		return outs[:1], nil
	}
	if len(r.latents) == 0 || slices.Contains(r.latents, nil) {
		return nil, fmt.Errorf("program: the latents' roles are not latents, latents.1, … in order")
	}
	if h := r.It.Hooks; h.Observe == nil && h.Override == nil {
		// Nothing watches or replaces values: what no step changes is
		// made once.
		r.It.Memo = NewMemo()
		r.It.Memo.Limit = r.MemoLimit
		defer func() { r.It.Memo.Close(r.B); r.It.Memo = nil }()
	}
	xs := slices.Clone(r.latents)
	free := func(ts []exec.Tensor) {
		for k, t := range ts {
			if t != nil && t != r.latents[k] {
				r.B.Free(t)
			}
		}
	}
	n := r.Steps()
	for i := range n {
		next, err := r.step(i, xs)
		free(xs)
		if err != nil {
			return nil, err
		}
		xs = next
		if progress != nil {
			progress(i+1, n)
		}
	}
	for k, x := range xs {
		if x == r.latents[k] { // no steps: hand back a copy the caller may free
			c, err := r.B.Cast(x, x.Format())
			if err != nil {
				free(xs[:k])
				return nil, err
			}
			xs[k] = c
		}
	}
	return xs, nil
}

// step runs model call i on the latents xs and returns each updated by
// its own output (the caller frees them).
func (r *Runner) step(i int, xs []exec.Tensor) ([]exec.Tensor, error) {
	outs, err := r.Forward(i, xs...)
	if err != nil {
		return nil, err
	}
	defer func() {
		for _, t := range outs {
			r.B.Free(t)
		}
	}()
	if len(outs) < len(xs) {
		return nil, fmt.Errorf("program: step %d: %d outputs for %d latents", i, len(outs), len(xs))
	}
	next := make([]exec.Tensor, len(xs))
	for k, x := range xs {
		if next[k], err = r.Update(i, x, outs[k]); err != nil {
			for _, t := range next[:k] {
				r.B.Free(t)
			}
			return nil, err
		}
	}
	return next, nil
}

// Forward runs model call i of a flow_euler run on the latents xs (the
// timestep is σ_i cast by the plan) and returns the forward's outputs,
// which the caller frees; outs[k] is the velocity of xs[k].
func (r *Runner) Forward(i int, xs ...exec.Tensor) ([]exec.Tensor, error) {
	if r.sigmas == nil || i < 0 || i >= r.Steps() {
		return nil, fmt.Errorf("program: step %d of a run with %d steps", i, r.Steps())
	}
	env, done, err := r.StepEnv(i, xs...)
	if err != nil {
		return nil, err
	}
	defer done()
	outs, err := r.It.Forward(i, env)
	if err != nil {
		return nil, fmt.Errorf("step %d: %w", i, err)
	}
	return outs, nil
}

// Update is the Euler update after model call i: x + round(sign·(σ[i+1] −
// σ[i])·v) with the plan's sampler specs (the step size rounded to the
// multiply's format first under its round=scale). The caller frees the
// result.
func (r *Runner) Update(i int, x, v exec.Tensor) (exec.Tensor, error) {
	if r.sigmas == nil || i < 0 || i >= r.Steps() {
		return nil, fmt.Errorf("program: step %d of a run with %d steps", i, r.Steps())
	}
	dt := r.sign * (r.sigmas[i+1] - r.sigmas[i])
	if r.spec.scale.Round&exec.RoundScale != 0 {
		dt = r.spec.scale.Out.Round(dt) // the step size a scalar of the tensor's format
	}
	dtT, err := r.B.Upload([]float32{dt}, []int{1}, precision.F32)
	if err != nil {
		return nil, err
	}
	defer r.B.Free(dtT)
	p, err := r.B.Mul(v, dtT, r.spec.scale)
	if err != nil {
		return nil, fmt.Errorf("program: step %d: Euler: %w", i, err)
	}
	defer r.B.Free(p)
	next, err := r.B.Add(x, p, r.spec.update)
	if err != nil {
		return nil, fmt.Errorf("program: step %d: Euler: %w", i, err)
	}
	if !slices.Equal(next.Shape(), x.Shape()) {
		r.B.Free(next)
		return nil, fmt.Errorf("program: step %d: the update is %v for latents %v", i, next.Shape(), x.Shape())
	}
	return next, nil
}

// Latents is the request's initial latents (a flow_euler run; the first
// where there are several), owned by the runner; nil for a forward run.
func (r *Runner) Latents() exec.Tensor {
	if len(r.latents) == 0 {
		return nil
	}
	return r.latents[0]
}

// AllLatents is every initial latents, by index k of their role.
func (r *Runner) AllLatents() []exec.Tensor { return r.latents }

// isLatents reports whether a step input's source is one of the latents.
func isLatents(source string) bool {
	_, ok := semantics.LatentsIndex(source)
	return ok
}

// SetPrecision rebuilds the program under another precision plan (the
// document is copied; its structure and factors are unchanged), keeping
// the uploaded weights and inputs and re-uploading the constants (a
// document's own program keeps its constants: only its specs change).
func (r *Runner) SetPrecision(pr semantics.Precision) error {
	doc := *r.Doc
	doc.Precision = pr
	if r.fromProgram && doc.Program != nil {
		// a document that carries its program depends on the plan only
		// through its nodes' specs: they are resolved again on the
		// program in hand, which keeps its values and constants (a plan
		// search sets a plan for every candidate it scores)
		p, err := r.P.withSpecs(&doc.Precision)
		if err != nil {
			return fmt.Errorf("program: %w", err)
		}
		r.Doc, r.P = &doc, p
		r.It = &Interpreter{B: r.B, P: p, Hooks: r.It.Hooks}
		return r.loadSpecs()
	}
	shapes := Shapes{Weights: map[string][]int{}, Inputs: map[string][]int{}}
	for _, v := range r.P.Values {
		switch v.Kind {
		case Weight:
			shapes.Weights[v.Source] = v.Shape
		case Input:
			// a request input may be named "timestep" too (a one-forward
			// trace's): only the sampler's step inputs are made per step
			shapes.Inputs[v.Source] = v.Shape
		case StepInput:
			if v.Source != "timestep" && v.Source != "next_timestep" && v.Source != "index" {
				shapes.Inputs[v.Source] = v.Shape
			}
		}
	}
	p, err := r.build(&doc, shapes)
	if err != nil {
		return err
	}
	for name, v := range p.Values {
		if old, ok := r.P.Values[name]; (v.Kind == Weight || v.Kind == Input) && (!ok || old.Kind != v.Kind || old.Source != v.Source) {
			return fmt.Errorf("program: precision changed %s %q", v.Kind, name)
		}
	}
	for name, v := range r.P.Values {
		if v.Kind == Const {
			if t, ok := r.env[name]; ok {
				r.B.Free(t)
				delete(r.env, name)
			}
		}
	}
	for _, name := range p.Order {
		if v := p.Values[name]; v.Kind == Const {
			t, err := r.B.Upload(v.Data, v.Shape, v.Format)
			if err != nil {
				return err
			}
			r.env[name] = t
		}
	}
	r.Doc, r.P = &doc, p
	r.It = &Interpreter{B: r.B, P: p, Hooks: r.It.Hooks}
	return r.loadSpecs()
}

// Close frees the weights, inputs and constants.
func (r *Runner) Close() {
	for k, t := range r.env {
		r.B.Free(t)
		delete(r.env, k)
	}
	for _, t := range r.latents {
		if t != nil {
			r.B.Free(t)
		}
	}
	r.latents = nil
}
