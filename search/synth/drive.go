package synth

import (
	"fmt"
	"maps"
	"math"
	"slices"

	"gonum.org/v1/gonum/stat"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/precision"
	"github.com/zflow/zflow/semantics"
	"github.com/zflow/zflow/trace"
)

// drive is how the model is called: its arguments bound to request
// values, its result port, and the structure's driving part.
type drive struct {
	run       string
	args      map[string]*val
	outPort   string
	structure semantics.Structure
}

// driving binds the model call's arguments to the request: an input
// passed unchanged, the latents of a flow-matching loop (the input whose
// values the call's argument holds at step 0 and whose shape the run's
// output has), and the timestep made from σ.
func (s *synth) driving(root trace.Call) (*drive, error) {
	m := s.tr.Manifest
	d := &drive{run: "forward", args: map[string]*val{}}
	st := &d.structure
	st.Model = semantics.Boundary{Module: root.Module}
	inputs := map[string]*val{}
	for _, name := range slices.Sorted(maps.Keys(m.Inputs)) {
		v, err := s.capture(m.Inputs[name])
		if err != nil {
			return nil, err
		}
		inputs[name] = v
	}
	sigmaName := ""
	for name, v := range inputs {
		if s.isSigmas(v) {
			sigmaName = name
		}
	}
	if d.outPort = firstResult(root); d.outPort == "" {
		return nil, fmt.Errorf("synth: the model call %s has no tensor result", root.Module)
	}
	outName := slices.Sorted(maps.Keys(m.Outputs))
	if len(outName) == 0 {
		return nil, fmt.Errorf("synth: the trace has no output")
	}
	if sigmaName != "" {
		d.run = "flow_euler"
		s.stepped = true
	}
	st.Run = d.run
	roles := map[string]string{}
	for _, p := range root.Tensors {
		if trace.IsResult(p.Name) {
			continue
		}
		target, err := s.capture(p.Key)
		if err != nil {
			return nil, err
		}
		bound := false
		for _, name := range slices.Sorted(maps.Keys(inputs)) {
			in := inputs[name]
			if name == sigmaName || in.numel() != target.numel() || relRMS(target.format, in.data, target.data) > 0 {
				continue
			}
			role := name
			// the latents: of an output's shape and changed by every step
			// (a text input may have the same shape; it stays the same);
			// where the run has several outputs, one latents per output
			// of its shape, in the order the call takes them
			k, lat := s.latentsSlot(in.shape)
			if d.run == "flow_euler" && lat && (len(s.tr.Steps()) < 2 || s.varying([]*val{target})) {
				role = semantics.LatentsRole(k)
			}
			if _, dup := roles[role]; !dup {
				roles[role] = name
				kind := program.Input
				vname := program.InputValue(role)
				// the latents of a flow loop; in a forward run an input
				// named as they are is an input like any other
				if k, lat := semantics.LatentsIndex(role); lat && d.run == "flow_euler" {
					kind, vname = program.StepInput, program.LatentsValue(k)
					if k == 0 {
						s.latents = in
					}
					s.lats = append(s.lats, latentsArg{in: in, port: p.Name})
				}
				s.em.bindLeaf(in, kind, vname, role)
			}
			if slices.Equal(in.shape, target.shape) {
				in.keys = append(in.keys, target.keys...)
				d.args[p.Name] = in
			} else {
				d.args[p.Name] = adopt(target, s.reshape(in, target.shape))
			}
			bound = true
			break
		}
		if bound {
			continue
		}
		if _, taken := roles["latents"]; d.run == "flow_euler" && !taken {
			if v := s.latentsRepeated(target, inputs, sigmaName, roles); v != nil {
				d.args[p.Name] = v
				s.latentsIn.port = p.Name
				continue
			}
			if v := s.latentsJoined(target, inputs, sigmaName, roles); v != nil {
				d.args[p.Name] = v
				s.latentsIn.port = p.Name
				continue
			}
			if v := s.latentsOverwritten(target, inputs, sigmaName, roles); v != nil {
				d.args[p.Name] = v
				s.latentsIn.port = p.Name
				continue
			}
		}
		if d.run == "flow_euler" {
			if v := s.timestep(p, target, inputs[sigmaName]); v != nil {
				v.request = true
				d.args[p.Name] = v
				continue
			}
			if v := s.nextTimestep(p, target, inputs[sigmaName]); v != nil {
				v.request = true
				d.args[p.Name] = v
				continue
			}
		}
		if by := s.madeBeforeLoop(target, tolerance(target.format)); by != "" {
			// the result of a model call before the loop (an adapter's
			// features), the same at every step: the program does not run
			// that call, so the value is read from the trace, where the
			// forms may use it, and the document says so (incomplete)
			target.beforeLoop = by
			d.args[p.Name] = target
			continue
		}
		if s.invariant(target.format, func(st int) ([]float32, bool) { return s.at(target, st) }, 0) {
			// a setting the pipeline passes unchanged at every step (a
			// guidance scale): a constant of the request
			s.em.constant(target, "equal at every captured step: a constant of the request the pipeline passes (not an input of the trace)")
			d.args[p.Name] = target
			continue
		}
		target.opaque = true
		d.args[p.Name] = target
	}
	if len(s.lats) > 1 && s.latentsIn != nil {
		return nil, fmt.Errorf("synth: %d latents with a condition joined to one of them: not supported", len(s.lats))
	}
	if lat, ok := roles["latents"]; ok && len(inputs[lat].shape) == 3 {
		s.patchRows = inputs[lat].shape[1] // the latents arrive as token rows
	}
	if d.run == "flow_euler" {
		roles["sigmas"] = sigmaName
		if _, ok := roles["latents"]; !ok {
			return nil, fmt.Errorf("synth: no model argument holds the latents of the flow loop")
		}
	}
	for _, role := range slices.Sorted(maps.Keys(roles)) {
		name := roles[role]
		st.Inputs = append(st.Inputs, semantics.Input{Role: role, Name: name, Shape: slices.Clone(inputs[name].shape)})
	}
	outRole := "hidden"
	if d.run == "flow_euler" {
		outRole = "latents"
	}
	st.Outputs = []semantics.Output{{Role: outRole, Name: outName[0]}}
	if len(s.lats) > 1 {
		st.Outputs = nil
		used := map[string]bool{}
		for k, l := range s.lats {
			name := s.outputOfShape(l.in.shape, used)
			used[name] = true
			st.Outputs = append(st.Outputs, semantics.Output{Role: semantics.LatentsRole(k), Name: name})
		}
	}
	return d, nil
}

// latentsArg is one latents of the flow loop: the request input and the
// model's argument port that takes it.
type latentsArg struct {
	in   *val
	port string
}

// latentsSlot is the index the next latents of this shape would take, ok
// false where no output of the run has that shape left unpaired: one
// latents per output (a single-output run: the output's shape, once).
func (s *synth) latentsSlot(shape []int) (int, bool) {
	if len(s.tr.Manifest.Outputs) < 2 {
		return 0, len(s.lats) == 0 && slices.Equal(shape, s.outputShape())
	}
	free := 0
	for _, key := range s.tr.Manifest.Outputs {
		if info, err := s.tr.Info(key); err == nil && slices.Equal(info.Shape, shape) {
			free++
		}
	}
	for _, l := range s.lats {
		if slices.Equal(l.in.shape, shape) {
			free--
		}
	}
	return len(s.lats), free > 0
}

// outputOfShape names the first output, in name order, of that shape not
// in used.
func (s *synth) outputOfShape(shape []int, used map[string]bool) string {
	for _, name := range slices.Sorted(maps.Keys(s.tr.Manifest.Outputs)) {
		if info, err := s.tr.Info(s.tr.Manifest.Outputs[name]); err == nil && !used[name] && slices.Equal(info.Shape, shape) {
			return name
		}
	}
	return ""
}

// partVaries reports whether t's entries [lo, hi) along ax change from
// step 0 to step 1 (true where the trace has one step: nothing tells).
func (s *synth) partVaries(t *val, ax, lo, hi int) bool {
	steps := s.tr.Steps()
	if len(steps) < 2 {
		return true
	}
	d, ok := s.at(t, steps[1])
	if !ok || len(d) != len(t.data) {
		return true
	}
	return relRMS(t.format, sliceData(&val{shape: t.shape, data: d}, ax, lo, hi), sliceData(t, ax, lo, hi)) > 0
}

// latentsJoined binds a model argument that is the latents joined with
// another request input along one axis (a condition's channels beside
// the noisy latents: image-to-video, inpainting): the latents' input of
// the output's shape first or last, the other input the rest, at step 0,
// or, where no one input is the rest, two or more inputs joined in order
// (zero condition latents and a mask channel); nil when the argument is
// not that.
func (s *synth) latentsJoined(target *val, inputs map[string]*val, sigmaName string, roles map[string]string) *val {
	for latName, lat := range s.latentsCandidates(target, inputs, sigmaName) {
		for ax := range target.shape {
			n, rest := lat.shape[ax], target.shape[ax]-lat.shape[ax]
			if rest <= 0 || !equalBut(lat.shape, target.shape, ax) {
				continue
			}
			for _, latFirst := range []bool{true, false} {
				at := 0
				if !latFirst {
					at = rest
				}
				if relRMS(lat.format, sliceData(target, ax, at, at+n), lat.data) > 0 || !s.partVaries(target, ax, at, at+n) {
					continue // not these values, or a part the steps leave as it is (a condition of the latents' shape)
				}
				other := sliceData(target, ax, n-at, n-at+rest) // the rest: after the latents, or before them
				if !latFirst {
					other = sliceData(target, ax, 0, rest)
				}
				for _, name := range slices.Sorted(maps.Keys(inputs)) {
					in := inputs[name]
					if name == latName || name == sigmaName || in.numel() != len(other) || relRMS(target.format, in.data, other) > 0 {
						continue
					}
					shape := slices.Clone(target.shape)
					shape[ax] = rest
					cond := s.reshape(in, shape)
					if cond == nil {
						continue
					}
					s.bindLatents(lat, latName, roles, namedInput{name: name, in: in})
					parts := []*val{lat, cond}
					if !latFirst {
						parts = []*val{cond, lat}
					}
					j := s.derive(&expr{op: program.OpConcat, attrs: program.Attrs{Axis: ax}, args: parts, out: target.format, label: "latents joined with a condition"})
					if j == nil {
						continue
					}
					s.latentsIn = &latentsPart{axis: ax, start: at, end: at + n}
					return adopt(target, j)
				}
				// the rest as several request inputs joined along the same
				// axis (condition latents and a mask channel beside the
				// latents), tried where no one input is the rest
				start := n - at
				if !latFirst {
					start = 0
				}
				conds := s.joinedInputs(target, ax, start, rest, inputs, map[string]bool{latName: true, sigmaName: true})
				if conds == nil {
					// the rest in no request input: a constant the
					// pipeline joins at every step, where it does not vary
					if v := s.latentsBesideConstant(target, lat, latName, roles, ax, at, n, start, rest, latFirst); v != nil {
						return v
					}
					continue
				}
				s.bindLatents(lat, latName, roles, conds...)
				parts := []*val{lat}
				for _, c := range conds {
					parts = append(parts, c.in)
				}
				if !latFirst {
					parts = append(parts[1:], lat)
				}
				j := s.derive(&expr{op: program.OpConcat, attrs: program.Attrs{Axis: ax}, args: parts, out: target.format, label: "latents joined with conditions"})
				if j == nil {
					continue
				}
				s.latentsIn = &latentsPart{axis: ax, start: at, end: at + n}
				return adopt(target, j)
			}
		}
	}
	return nil
}

// latentsBesideConstant binds target as the latents joined along ax with a
// constant part of rest entries at start (constantPart), the latents first
// where latFirst; nil where the part is not a constant.
func (s *synth) latentsBesideConstant(target, lat *val, latName string, roles map[string]string, ax, at, n, start, rest int, latFirst bool) *val {
	c := s.constantPart(target, ax, start, rest)
	if c == nil {
		return nil
	}
	parts := []*val{lat, c}
	if !latFirst {
		parts = []*val{c, lat}
	}
	j := s.derive(&expr{op: program.OpConcat, attrs: program.Attrs{Axis: ax}, args: parts, out: target.format, label: "latents joined with a constant part"})
	if j == nil {
		return nil
	}
	s.bindLatents(lat, latName, roles)
	s.latentsIn = &latentsPart{axis: ax, start: at, end: at + n}
	return adopt(target, j)
}

// namedInput is a request input and its name.
type namedInput struct {
	name string
	in   *val
}

// bindLatents binds lat as each step's latents and every condition as
// the request input it is (once, however many forms read it), the roles
// the document names them by.
func (s *synth) bindLatents(lat *val, latName string, roles map[string]string, conds ...namedInput) {
	roles["latents"] = latName
	s.latents = lat
	s.em.bindLeaf(lat, program.StepInput, program.StepLatents, "latents")
	for _, c := range conds {
		if _, dup := roles[c.name]; !dup {
			roles[c.name] = c.name
			s.em.bindLeaf(c.in, program.Input, program.InputValue(c.name), c.name)
		}
	}
}

// joinedInputs explains target's entries [start, start+size) along ax as
// two or more request inputs, none of them in skip, each of target's shape
// but for ax, joined along ax in order (the first, in name order, that
// fits at each place and lets the rest be covered); nil when none does.
func (s *synth) joinedInputs(target *val, ax, start, size int, inputs map[string]*val, skip map[string]bool) []namedInput {
	names := slices.Sorted(maps.Keys(inputs))
	var cover func(at, left int, used map[string]bool) []namedInput
	cover = func(at, left int, used map[string]bool) []namedInput {
		if left == 0 {
			return []namedInput{}
		}
		for _, name := range names {
			in := inputs[name]
			if skip[name] || used[name] || len(in.shape) != len(target.shape) || !equalBut(in.shape, target.shape, ax) {
				continue
			}
			k := in.shape[ax]
			if k > left || k == size || relRMS(target.format, sliceData(target, ax, at, at+k), in.data) > 0 {
				continue
			}
			used[name] = true
			if rest := cover(at+k, left-k, used); rest != nil {
				return append([]namedInput{{name, in}}, rest...)
			}
			delete(used, name)
		}
		return nil
	}
	return cover(start, size, map[string]bool{})
}

// isSigmas reports whether request input v can be the σ schedule: one
// value per step and the last, not all integers (position ids of as many
// values are not a schedule).
func (s *synth) isSigmas(v *val) bool {
	return len(v.shape) == 1 && v.numel() == len(s.tr.Steps())+1 && len(s.tr.Steps()) >= 1 && !v.integral()
}

// latentsPart is the latents' slice [start, end) along axis of the
// model argument port that joins them with a condition.
type latentsPart struct {
	port             string
	axis, start, end int
	// overwritten: the argument has the latents' shape, its leading part
	// along axis a condition's in place of theirs (the loop's velocity is
	// scored on the latents' part; the whole result is integrated)
	overwritten bool
}

// latentsOverwritten binds a model argument of the latents' shape whose
// leading entries along one axis are another request input's and the
// rest the latents' (an image-to-video pipeline putting the image's
// latents in place of the first frame before every call: (1 − mask)·cond
// + mask·latents), at step 0, the latents' part changing from step to
// step; nil when the argument is not that.
func (s *synth) latentsOverwritten(target *val, inputs map[string]*val, sigmaName string, roles map[string]string) *val {
	out := s.outputShape()
	if !slices.Equal(target.shape, out) {
		return nil
	}
	for _, latName := range slices.Sorted(maps.Keys(inputs)) {
		lat := inputs[latName]
		if latName == sigmaName || !slices.Equal(lat.shape, out) {
			continue
		}
		for ax, n := range target.shape {
			for k := 1; k < n; k++ {
				if relRMS(lat.format, sliceData(target, ax, k, n), sliceData(lat, ax, k, n)) > 0 || !s.partVaries(target, ax, k, n) {
					continue
				}
				head := sliceData(target, ax, 0, k)
				for _, name := range slices.Sorted(maps.Keys(inputs)) {
					in := inputs[name]
					if name == latName || name == sigmaName || in.numel() != len(head) || relRMS(target.format, in.data, head) > 0 {
						continue
					}
					shape := slices.Clone(target.shape)
					shape[ax] = k
					cond := s.reshape(in, shape)
					if cond == nil {
						continue
					}
					s.bindLatents(lat, latName, roles, namedInput{name: name, in: in})
					rest := s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: ax, Start: k, End: n}, args: []*val{lat}, out: lat.format, label: "the latents' part"})
					j := s.derive(&expr{op: program.OpConcat, attrs: program.Attrs{Axis: ax}, args: []*val{cond, rest}, out: target.format, label: "latents with a condition in place of their leading part"})
					if j == nil {
						continue
					}
					s.latentsIn = &latentsPart{axis: ax, start: k, end: n, overwritten: true}
					return adopt(target, j)
				}
				break // the shortest head that fits: no other k on this axis
			}
		}
	}
	return nil
}

// outputShape is the shape of the run's (first) output.
func (s *synth) outputShape() []int {
	names := slices.Sorted(maps.Keys(s.tr.Manifest.Outputs))
	if len(names) == 0 {
		return nil
	}
	info, err := s.tr.Info(s.tr.Manifest.Outputs[names[0]])
	if err != nil {
		return nil
	}
	return info.Shape
}

// timestep explains the model's timestep argument from σ at every step:
// σ or 1 − σ, stored in the activations' format or not, times 1 or 1000,
// or, where three steps or more show it, a·g(σ) + b for g the identity,
// atan or log with a and b fitted (a noise-level preconditioning such as
// atan(σ)·2/π or ln(σ)/4); stored in the argument's dtype (rounded to an
// integer for an integer dtype). Each candidate is the program's own
// expression, evaluated at every step against the argument.
func (s *synth) timestep(p trace.Port, target, sigmas *val) *val {
	return s.timestepOf(p, target, s.stepSigma(sigmas))
}

// nextTimestep binds a model argument made from σ_{i+1}, the σ the step
// ends at (a mean-flow model's second timestep: the pipeline passes the
// next scheduler timestep, 0 at the last step), by the forms timestep
// tries from σ_i; tried where those fail. The program reads σ_{i+1} as a
// step input of its own.
func (s *synth) nextTimestep(p trace.Port, target, sigmas *val) *val {
	if sigmas == nil || len(sigmas.data) < 2 {
		return nil
	}
	next := s.sigmaNext
	if next == nil {
		next = &val{shape: []int{1}, data: sigmas.data[1:2], format: f32,
			perStep: func(step int) []float32 {
				if step+1 >= len(sigmas.data) {
					return nil
				}
				return sigmas.data[step+1 : step+2]
			}}
	}
	v := s.timestepOf(p, target, next)
	if v != nil && s.sigmaNext == nil {
		s.sigmaNext = next
		s.em.bindLeaf(next, program.StepInput, program.StepNextTimestep, "next_timestep")
	}
	return v
}

// timestepOf binds a model argument made from sig (σ_i or σ_{i+1}): σ,
// 1 − σ, scaled by 1000, rounded or cast as the argument is stored, or an
// affine map of a function of σ fitted over the steps; nil when none
// reproduces the argument at every step.
func (s *synth) timestepOf(p trace.Port, target, sig *val) *val {
	info, _ := s.tr.Info(p.Key)
	integer := !info.DType.IsFloat()
	one := s.constant(1)
	var cands []*val
	pres := []precision.Format{precision.F32}
	if s.em.act != precision.F32 {
		pres = append(pres, s.em.act)
	}
	for _, flip := range []bool{false, true} {
		for _, pre := range pres {
			for _, c := range []float64{1, 1000} {
				v := sig
				if flip {
					v = s.derive(&expr{op: program.OpSub, args: []*val{one, v}, out: f32, label: "1 − σ"})
				}
				if pre != precision.F32 && v != nil {
					v = s.derive(&expr{op: program.OpCast, attrs: program.Attrs{Format: pre}, args: []*val{v}, out: pre})
				}
				if c != 1 && v != nil {
					v = s.derive(&expr{op: program.OpMul, args: []*val{v, s.constant(c)}, out: f32, label: "timestep scale"})
				}
				cands = append(cands, v)
			}
		}
	}
	if s.em.act != precision.F32 {
		// the scheduler's timesteps (1000·σ) stored in the latents' dtype,
		// divided back to σ by the pipeline
		for _, flip := range []bool{false, true} {
			v := sig
			if flip {
				v = s.derive(&expr{op: program.OpSub, args: []*val{one, v}, out: f32, label: "1 − σ"})
			}
			v = s.derive(&expr{op: program.OpMul, args: []*val{v, s.constant(1000)}, out: s.em.act, label: "timesteps in the latents' dtype"})
			cands = append(cands, s.derive(&expr{op: program.OpDiv, args: []*val{v, s.constant(1000)}, out: s.em.act, label: "timesteps / 1000"}))
		}
	}
	cands = append(cands, s.affineTimesteps(p, sig)...)
	cands = append(cands, s.gridTimesteps(p, sig)...)
	var best *val
	bestErr := math.Inf(1)
	for _, v := range cands {
		switch {
		case v == nil:
		case integer:
			v = s.derive(&expr{op: program.OpRound, args: []*val{v}, out: f32})
		case target.format != v.format:
			v = s.derive(&expr{op: program.OpCast, attrs: program.Attrs{Format: target.format}, args: []*val{v}, out: target.format})
		}
		if v = s.timestepShaped(v, target.shape); v == nil {
			continue
		}
		worst := 0.0
		for _, st := range s.tr.Steps() {
			want, err := s.portAt(p, st)
			got, ok := s.at(v, st)
			if err != nil || !ok || len(want) != len(got) {
				worst = math.Inf(1)
				break
			}
			worst = math.Max(worst, relRMS(target.format, got, want))
		}
		if worst < bestErr {
			best, bestErr = v, worst
		}
	}
	if (best == nil || bestErr > 1e-6) && target.numel() > 1 {
		// a timestep per token: the scalar times a pattern of zeros and
		// ones the same at every step (the tokens of a conditioning frame
		// at t = 0, the others at t)
		if v := s.maskedTimestep(p, target, cands); v != nil {
			return v
		}
	}
	if best == nil || bestErr > 1e-6 {
		return nil
	}
	return adopt(target, best)
}

// timestepShaped is the scalar timestep v in the argument's shape: as it
// is, or repeated once per sample (t.expand(B): a batch the pipeline
// doubled for guidance); nil where neither fits.
func (s *synth) timestepShaped(v *val, shape []int) *val {
	if r := s.reshape(v, shape); r != nil || v == nil || v.numel() != 1 {
		return r
	}
	n := exec.Numel(shape)
	if n < 2 {
		return nil
	}
	r := s.derive(&expr{op: program.OpRepeat, attrs: program.Attrs{N: n, Axis: 0}, args: []*val{s.reshape(v, []int{1})}, out: v.format, label: "the timestep once per sample"})
	return s.reshape(r, shape)
}

// maskedTimestep explains a model argument of several values per step as
// one of the σ-derived scalars cands (at step 0) times a pattern of 0 and
// 1 (a timestep per token, mask · t, as a pipeline that expands the
// timestep over the tokens passes it): the pattern read off step 0, held
// as a constant of the request, and the product checked at every step.
func (s *synth) maskedTimestep(p trace.Port, target *val, cands []*val) *val {
	steps := s.tr.Steps()
	if len(steps) < 2 {
		return nil
	}
	if next, err := s.portAt(p, steps[1]); err != nil || len(next) != len(target.data) || relRMS(target.format, next, target.data) == 0 {
		return nil // the same at every step: not a timestep
	}
	for _, c := range cands {
		if c == nil || c.numel() != 1 || c.data[0] == 0 {
			continue
		}
		mask := make([]float32, target.numel())
		ok, ones := true, 0
		for i, x := range target.data {
			m := x / c.data[0]
			switch {
			case math.Abs(float64(m)-1) <= 1e-6:
				mask[i], ones = 1, ones+1
			case x == 0:
			default:
				ok = false
			}
			if !ok {
				break
			}
		}
		if !ok || ones == 0 {
			continue
		}
		m := &val{shape: slices.Clone(target.shape), data: mask, format: f32, origin: target.origin + "/mask"}
		s.em.constant(m, "a pattern of 0 and 1 the same at every step: which tokens take the timestep (a timestep per token)")
		one := make([]int, len(target.shape))
		for i := range one {
			one[i] = 1
		}
		v := s.derive(&expr{op: program.OpMul, args: []*val{s.reshape(c, one), m}, out: f32, label: "timestep per token"})
		if v != nil && target.format != v.format {
			v = s.derive(&expr{op: program.OpCast, attrs: program.Attrs{Format: target.format}, args: []*val{v}, out: target.format})
		}
		if v == nil {
			continue
		}
		worst := 0.0
		for _, st := range s.tr.Steps() {
			want, err := s.portAt(p, st)
			got, okAt := s.at(v, st)
			if err != nil || !okAt || len(want) != len(got) {
				worst = math.Inf(1)
				break
			}
			worst = math.Max(worst, relRMS(target.format, got, want))
		}
		if worst <= 1e-6 {
			return adopt(target, v)
		}
	}
	return nil
}

// affineTimesteps fits a·g(σ) + b to the argument's value at each step,
// for each g, where the argument holds one value per step and three steps
// or more leave the line something to prove; each fit is an expression.
func (s *synth) affineTimesteps(p trace.Port, sig *val) []*val {
	steps := s.tr.Steps()
	ys := s.stepScalars(p, 3)
	if ys == nil {
		return nil
	}
	var out []*val
	for _, g := range []exec.ActKind{exec.ActIdentity, exec.ActAtan, exec.ActLog} {
		gv := sig
		if g != exec.ActIdentity {
			gv = s.derive(&expr{op: program.OpAct, attrs: program.Attrs{Act: g}, args: []*val{sig}, out: f32, label: g.String() + "(σ)"})
		}
		if gv == nil {
			continue
		}
		xs := make([]float64, len(steps))
		for i, st := range steps {
			v, ok := s.at(gv, st)
			if !ok || len(v) != 1 {
				xs = nil
				break
			}
			xs[i] = float64(v[0])
		}
		if xs == nil {
			continue
		}
		b, a := stat.LinearRegression(xs, ys, nil, false)
		if math.IsNaN(a) || math.IsNaN(b) || a == 0 {
			continue
		}
		v := gv
		if a != 1 {
			v = s.derive(&expr{op: program.OpMul, args: []*val{v, s.constant(a)}, out: f32, label: "timestep scale"})
		}
		if v != nil && math.Abs(b) > 1e-7*math.Abs(a) {
			v = s.derive(&expr{op: program.OpAdd, args: []*val{v, s.constant(b)}, out: f32, label: "timestep shift"})
		}
		out = append(out, v)
	}
	return out
}

// portAt reads a call's port at step i (same module and ordinal).
func (s *synth) portAt(p trace.Port, step int) ([]float32, error) {
	key := fmt.Sprintf("s%d/%s", step, p.Key[len("s0/"):])
	t, err := s.tr.Tensor(key)
	if err != nil {
		return nil, err
	}
	return t.Float32Rounded()
}

// velocity finds what the loop integrates: v_i = (x_{i+1} − x_i) /
// (σ_{i+1} − σ_i) against the model's result, as is, negated, or its
// first half of channels (a learned-σ output), at step 0.
func (s *synth) velocity(root trace.Call, out *val) (*val, semantics.Factor, error) {
	m := s.tr.Manifest
	var latents, sigmas *val
	names := slices.Sorted(maps.Keys(m.Inputs))
	for _, n := range names {
		v, _ := s.capture(m.Inputs[n])
		if slices.Equal(v.shape, s.outputShape()) && latents == nil {
			latents = v
		}
		if s.latents != nil && v != nil && slices.Contains(s.latents.keys, m.Inputs[n]) {
			latents = s.latents // the input the driving bound as the latents (another may share their shape)
		}
		if s.isSigmas(v) {
			sigmas = v
		}
	}
	next, err := s.nextLatents(root)
	if err != nil || latents == nil || sigmas == nil {
		return nil, semantics.Factor{}, fmt.Errorf("synth: the flow loop's next latents: %v", err)
	}
	dt := float64(sigmas.data[1] - sigmas.data[0])
	part := func(d []float32) []float32 { return d }
	if j := s.latentsIn; j != nil && j.overwritten {
		// the latents' part: the step's argument holds a condition in
		// place of the rest, so only this part shows x_1
		part = func(d []float32) []float32 {
			return sliceData(&val{shape: latents.shape, data: d}, j.axis, j.start, j.end)
		}
	}
	best, bestSign, cands, err := s.fitVelocity(latents, sigmas, next, dt, out, part)
	if err != nil {
		return nil, semantics.Factor{}, err
	}
	f := factor("euler_sign", "sampler", bestSign, cands, "output/"+slices.Sorted(maps.Keys(m.Outputs))[0])
	noteSample(&f, best)
	return best, f, nil
}

// fitVelocity finds the form of the model's result out (reshaped, its
// first half of channels, the latents' part) and the sign that make the
// step from latents to next over dt, with every candidate's score, or,
// where no form is the velocity, the form that is the clean sample the
// loop steps towards (predictedSample); err when none has the latents'
// shape.
func (s *synth) fitVelocity(latents, sigmas *val, next []float32, dt float64, out *val, part func([]float32) []float32) (*val, int, []semantics.Candidate, error) {
	x0 := part(latents.data)
	if len(x0) != len(next) {
		return nil, 0, nil, fmt.Errorf("synth: the flow loop's next latents: %d values for %d", len(next), len(x0))
	}
	implied := make([]float32, len(next))
	for i := range implied {
		implied[i] = float32((float64(next[i]) - float64(x0[i])) / dt)
	}
	want := &val{data: implied, format: latents.format}
	var forms []*val
	if r := s.reshape(out, latents.shape); r != nil {
		forms = append(forms, r)
	}
	if len(out.shape) >= 2 && out.shape[1] == 2*latents.shape[1] {
		c := s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: 1, Start: 0, End: latents.shape[1]}, args: []*val{out}, out: out.format, label: "first half of channels"})
		if r := s.reshape(c, latents.shape); r != nil {
			forms = append(forms, r)
		}
	}
	if len(forms) == 0 && len(out.shape) == len(latents.shape) {
		// the leading part of one axis: the latents' rows of a result
		// over the latents joined with a condition's (a reference
		// image's latents after the noisy ones); or its trailing part:
		// the latents' rows of a result over rows the model put before
		// them (a prompt's, in a model that joins them itself)
		for ax := range out.shape {
			if out.shape[ax] <= latents.shape[ax] || !equalBut(out.shape, latents.shape, ax) {
				continue
			}
			if c := s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: ax, Start: 0, End: latents.shape[ax]}, args: []*val{out}, out: out.format, label: "the latents' part"}); c != nil {
				forms = append(forms, c)
			}
			if c := s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: ax, Start: out.shape[ax] - latents.shape[ax], End: out.shape[ax]}, args: []*val{out}, out: out.format, label: "the latents' part, last"}); c != nil {
				forms = append(forms, c)
			}
		}
	}
	for _, sign := range []float32{1, -1} {
		// two predictions combined by the pipeline's guidance
		w := make([]float32, len(implied))
		for i, x := range implied {
			w[i] = sign * x
		}
		forms = append(forms, s.guided(out, latents.shape, w)...)
		if g := s.guidance; g != nil && g.axis != 1 && len(out.shape) >= 2 && out.shape[1] == 2*latents.shape[1] {
			// a learned variance beside each copy's prediction: the
			// guided predictions of the first half of channels
			// (Kandinsky 2.1's and unCLIP's split before their guidance)
			if c := s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: 1, Start: 0, End: latents.shape[1]}, args: []*val{out}, out: out.format, label: "first half of channels"}); c != nil {
				forms = append(forms, s.guided(c, latents.shape, w)...)
			}
		}
		if j, g := s.latentsIn, s.guidance; j != nil && g != nil && j.axis != g.axis && j.axis < len(out.shape) {
			// the joined latents repeated: the guided predictions of the
			// result's latents' part
			if c := s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: j.axis, Start: j.start, End: j.end}, args: []*val{out}, out: out.format, label: "the latents' part"}); c != nil {
				forms = append(forms, s.guided(c, latents.shape, w)...)
			}
		}
		forms = append(forms, s.guidedCalls(latents.shape, w)...)
	}
	if j := s.latentsIn; j != nil && j.start > 0 && len(out.shape) == len(latents.shape) && j.axis < len(out.shape) &&
		j.end == out.shape[j.axis] && equalBut(out.shape, latents.shape, j.axis) {
		// the trailing part of one axis, where the model's argument
		// joined the latents after a condition (reference items first):
		// the latents' part of the result
		if c := s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: j.axis, Start: j.start, End: j.end}, args: []*val{out}, out: out.format, label: "the latents' part"}); c != nil {
			forms = append(forms, c)
		}
	}
	var best *val
	bestSign, bestErr, runner := 1, math.Inf(1), math.Inf(1)
	var cands []semantics.Candidate
	for _, f := range forms {
		fd := f.data
		if len(fd) == latents.numel() {
			fd = part(fd)
		}
		for _, sign := range []int{1, -1} {
			d := make([]float32, len(fd))
			for i := range d {
				d[i] = float32(sign) * fd[i]
			}
			e := relRMS(want.format, d, want.data)
			cands = append(cands, semantics.Candidate{Value: sign, Score: finite(e)})
			if e < bestErr {
				runner = bestErr
				best, bestSign, bestErr = f, sign, e
			} else if e < runner {
				runner = e
			}
		}
	}
	if bestErr > notVelocity && len(x0) == latents.numel() {
		if v, sign, cs := s.predictedSample(latents, sigmas, forms, bestErr); v != nil {
			return v, sign, append(cands, cs...), nil
		}
	}
	if best == nil {
		return nil, 0, nil, fmt.Errorf("synth: the model's result %v does not make the latents %v", out.shape, latents.shape)
	}
	return best, bestSign, cands, nil
}

// velocities is velocity for a loop of several latents: each latents'
// step (its argument at step 1, or its output after one step) made by
// the one result of the call, of all its results, whose form fits it
// best; every latents stepped with the same sign (euler_sign, read off
// the first, the others checked against it).
func (s *synth) velocities(outs map[string]*val, st []semantics.Output) ([]*val, semantics.Factor, error) {
	m := s.tr.Manifest
	var sigmas *val
	for _, n := range slices.Sorted(maps.Keys(m.Inputs)) {
		if v, _ := s.capture(m.Inputs[n]); v != nil && s.isSigmas(v) {
			sigmas = v
		}
	}
	if sigmas == nil {
		return nil, semantics.Factor{}, fmt.Errorf("synth: the flow loop has no σ schedule")
	}
	dt := float64(sigmas.data[1] - sigmas.data[0])
	var vs []*val
	var f semantics.Factor
	for k, l := range s.lats {
		next, err := s.nextOf(l, st[k].Name)
		if err != nil {
			return nil, semantics.Factor{}, err
		}
		var best *val
		var sign int
		var cands []semantics.Candidate
		bestErr := math.Inf(1)
		for _, port := range slices.Sorted(maps.Keys(outs)) {
			v, sg, cs, err := s.fitVelocity(l.in, sigmas, next, dt, outs[port], func(d []float32) []float32 { return d })
			if err != nil {
				continue
			}
			if e := minScore(cs, sg); e < bestErr {
				best, sign, cands, bestErr = v, sg, cs, e
			}
		}
		if best == nil {
			return nil, semantics.Factor{}, fmt.Errorf("synth: no result of the model makes the step of %s %v", semantics.LatentsRole(k), l.in.shape)
		}
		if k == 0 {
			f = factor("euler_sign", "sampler", sign, cands, "output/"+st[0].Name)
			noteSample(&f, best)
		} else if sign != f.Value {
			return nil, semantics.Factor{}, fmt.Errorf("synth: %s is stepped with sign %d, the latents with %v: one sign per loop", semantics.LatentsRole(k), sign, f.Value)
		}
		vs = append(vs, best)
	}
	return vs, f, nil
}

// minScore is the best score among the candidates of a sign.
func minScore(cs []semantics.Candidate, sign int) float64 {
	e := math.Inf(1)
	for _, c := range cs {
		if c.Value == sign {
			e = min(e, c.Score)
		}
	}
	return e
}

// nextOf is a latents' value after one step: its argument at step 1, or
// the run's output of that name.
func (s *synth) nextOf(l latentsArg, output string) ([]float32, error) {
	if len(s.tr.Steps()) > 1 {
		for _, c := range stepRoots(s.tr, s.tr.Steps()[1]) {
			if key, ok := c.Tensors.Key(l.port); ok {
				t, err := s.tr.Tensor(key)
				if err != nil {
					return nil, err
				}
				return t.Float32Rounded()
			}
		}
	}
	t, err := s.tr.Tensor(s.tr.Manifest.Outputs[output])
	if err != nil {
		return nil, err
	}
	return t.Float32Rounded()
}

// nextLatents is x_1: the model's latents argument at step 1, or the run's
// output after one step.
func (s *synth) nextLatents(root trace.Call) ([]float32, error) {
	if len(s.tr.Steps()) > 1 {
		for _, c := range stepRoots(s.tr, 1) {
			for _, p := range c.Tensors {
				if trace.IsResult(p.Name) {
					continue
				}
				if j := s.latentsIn; j != nil && p.Name == j.port {
					// the latents' part of the argument joining them
					v, err := s.capture(p.Key)
					if err != nil {
						return nil, err
					}
					if g := s.guidance; g != nil && g.axis != j.axis {
						// the joined latents repeated: their first copy
						shape := slices.Clone(v.shape)
						shape[g.axis] /= g.copies
						v = &val{shape: shape, data: sliceData(v, g.axis, 0, shape[g.axis])}
					}
					return sliceData(v, j.axis, j.start, j.end), nil
				}
				t, err := s.tr.Tensor(p.Key)
				if err != nil {
					continue
				}
				if slices.Equal(t.Shape, s.outputShape()) {
					return t.Float32Rounded()
				}
			}
		}
	}
	names := slices.Sorted(maps.Keys(s.tr.Manifest.Outputs))
	t, err := s.tr.Tensor(s.tr.Manifest.Outputs[names[0]])
	if err != nil {
		return nil, err
	}
	return t.Float32Rounded()
}

// gridTimesteps reads an argument that is an integer timestep divided
// back by a power of ten d (a DDPM pipeline's noise time t/1000, t =
// round(a·σ) on the scheduler's grid): d the smallest that makes every
// step's value whole, a the simplest number whose rounding of a·σ gives
// those integers at every step (of σ or 1 − σ); each reading is an
// expression, round(a·σ)/d in f32.
func (s *synth) gridTimesteps(p trace.Port, sig *val) []*val {
	steps := s.tr.Steps()
	ys := s.stepScalars(p, 2)
	if ys == nil {
		return nil
	}
	d := 0.0
	for _, c := range []float64{1, 10, 100, 1000, 10000} {
		if !slices.ContainsFunc(ys, func(y float64) bool { return math.Abs(y*c-math.Round(y*c)) > 1e-3 }) {
			d = c
			break
		}
	}
	if d == 0 {
		return nil
	}
	one := s.constant(1)
	var out []*val
	for _, flip := range []bool{false, true} {
		g := sig
		if flip {
			g = s.derive(&expr{op: program.OpSub, args: []*val{one, sig}, out: f32, label: "1 − σ"})
		}
		if g == nil {
			continue
		}
		lo, hi := math.Inf(-1), math.Inf(1)
		for i, st := range steps {
			v, ok := s.at(g, st)
			if !ok || len(v) != 1 {
				lo = math.Inf(1)
				break
			}
			k, x := math.Round(ys[i]*d), float64(v[0])
			switch {
			case x > 0:
				lo, hi = max(lo, (k-0.5)/x), min(hi, (k+0.5)/x)
			case k != 0:
				lo = math.Inf(1)
			}
		}
		if !(lo < hi) || math.IsInf(lo, 0) || math.IsInf(hi, 0) || hi <= 1 {
			continue
		}
		a := simplestIn(lo, hi, (lo+hi)/2)
		v := s.derive(&expr{op: program.OpMul, args: []*val{g, s.constant(a)}, out: f32, label: fmt.Sprintf("σ·%g", a)})
		v = s.derive(&expr{op: program.OpRound, args: []*val{v}, out: f32, label: "an integer timestep"})
		out = append(out, s.derive(&expr{op: program.OpDiv, args: []*val{v, s.constant(d)}, out: f32, label: fmt.Sprintf("timestep / %g", d)}))
	}
	return out
}

// madeBeforeLoop names the call outside the sampling loop (scope "pre")
// one of whose results, times one constant (a pipeline's conditioning
// scale, or 1), holds target's values within tol (rel-RMS), or "" where
// none does. A value of one number never counts: a setting may equal any
// one-number result.
func (s *synth) madeBeforeLoop(target *val, tol float64) string {
	if target.numel() < 2 || len(s.tr.Steps()) == 0 {
		return ""
	}
	for _, c := range s.tr.Tree().Calls() {
		if c.Step != nil {
			continue
		}
		for _, p := range c.Tensors {
			if !trace.IsResult(p.Name) {
				continue
			}
			info, err := s.tr.Info(p.Key)
			if err != nil || info.Len() != int64(target.numel()) {
				continue
			}
			t, err := s.tr.Tensor(p.Key)
			if err != nil {
				continue
			}
			if d, err := t.Float32Rounded(); err == nil && scaledCopy(d, target.data, tol) {
				return c.Module
			}
		}
	}
	return ""
}

// scaledCopy reports whether b is c·a for one nonzero c (least squares)
// within tol rel-RMS of b, b not all 0.
func scaledCopy(a, b []float32, tol float64) bool {
	var ab, aa, bb float64
	for i, x := range a {
		ab += float64(x) * float64(b[i])
		aa += float64(x) * float64(x)
		bb += float64(b[i]) * float64(b[i])
	}
	if aa == 0 || bb == 0 || ab == 0 {
		return false
	}
	c := ab / aa
	var e float64
	for i, x := range a {
		d := c*float64(x) - float64(b[i])
		e += d * d
	}
	return math.Sqrt(e/bb) <= tol
}

// stepScalars is the argument's one value at each captured step (every
// entry of it the same), nil where the trace has fewer than least steps
// or a step holds more than one value.
func (s *synth) stepScalars(p trace.Port, least int) []float64 {
	steps := s.tr.Steps()
	if len(steps) < least {
		return nil
	}
	ys := make([]float64, len(steps))
	for i, st := range steps {
		want, err := s.portAt(p, st)
		if err != nil || len(want) == 0 || slices.ContainsFunc(want, func(v float32) bool { return v != want[0] }) {
			return nil
		}
		ys[i] = float64(want[0])
	}
	return ys
}
