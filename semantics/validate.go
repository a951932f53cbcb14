package semantics

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// ErrInvalid is wrapped by every validation error.
var ErrInvalid = errors.New("invalid semantics document")

// maxProblems caps how many problems one error lists.
const maxProblems = 20

// problems collects validation problems, each naming its field, and the
// structure's holes (check.go), which only an incomplete document may have.
type problems struct {
	list  []string
	holes []Hole
}

func (p *problems) add(field, format string, args ...any) {
	p.list = append(p.list, field+": "+fmt.Sprintf(format, args...))
}

// hole records a part of the structure left out at address addr.
func (p *problems) hole(addr, field, format string, args ...any) {
	p.holes = append(p.holes, Hole{Address: addr, Problem: field + ": " + fmt.Sprintf(format, args...)})
}

func (p problems) err() error {
	if len(p.list) == 0 {
		return nil
	}
	list := p.list
	more := ""
	if len(list) > maxProblems {
		more = fmt.Sprintf("; and %d more", len(list)-maxProblems)
		list = list[:maxProblems]
	}
	return fmt.Errorf("%w: %s%s", ErrInvalid, strings.Join(list, "; "), more)
}

var hexSHA256 = regexp.MustCompile(`^[0-9a-f]{64}$`)

// Validate checks the document on its own (no weights): format and
// version, required fields, the roles every component needs, factor names,
// values and scopes, precision names. The error lists each problem with
// the field it is in.
func (d *Document) Validate() error {
	var p problems
	if d.Format != FormatName {
		p.add("format", "%q, want %q", d.Format, FormatName)
	}
	switch {
	case d.Version == ProgramVersion && d.Program == nil:
		p.add("program", "a version %d document carries its program", ProgramVersion)
		return p.err()
	case d.Version == Version && d.Program != nil:
		p.add("program", "a version %d document has no program (version %d has)", Version, ProgramVersion)
		return p.err()
	case d.Version != Version && d.Version != ProgramVersion:
		p.add("version", "%d is not supported (this zflow reads versions %d and %d)", d.Version, Version, ProgramVersion)
		return p.err() // the rest may mean something else in another version
	}
	if d.Source.Trace == "" {
		p.add("source.trace", "empty")
	}
	if !hexSHA256.MatchString(d.Source.SHA256) {
		p.add("source.sha256", "%q is not 64 lower-case hex digits", d.Source.SHA256)
	}
	if v, ok := d.Source.Producer[ProducerZflowVersion]; ok {
		if s, isString := v.(string); !isString || s == "" {
			p.add("source.producer."+ProducerZflowVersion, "%v is not a version string", v)
		}
	}
	if d.Program != nil {
		d.Structure.validateDriving(&p)
		d.Program.validate(&p)
	} else {
		d.Structure.validate(&p)
	}
	d.validateFactors(&p)
	d.Precision.validate(&p)
	d.validateCheck(&p)
	for i, u := range d.Undetermined {
		f := fmt.Sprintf("undetermined[%d]", i)
		if u.Name == "" {
			p.add(f+".name", "empty")
		}
		if u.Reason == "" {
			p.add(f+".reason", "empty")
		}
	}
	return p.err()
}

func (s *Structure) validate(p *problems) {
	const f = "structure"
	if !contains(runs, s.Run) {
		p.add(f+".run", "%q is not one of %s", s.Run, strings.Join(runs, ", "))
	}
	if s.Hidden <= 0 {
		p.hole("model", f+".hidden", "%d must be > 0", s.Hidden)
	}
	if s.Model.Module == "" {
		p.add(f+".model.module", "empty")
	}
	validateBoundary(p, f+".model", &s.Model, append([]string{"timestep"}, inputRoles...), outputRolesOfRun(s.Run))
	streams := map[string]bool{}
	for i, st := range s.Streams {
		sf := fmt.Sprintf("%s.streams[%d]", f, i)
		if !contains(streamNames, st.Name) {
			p.add(sf+".name", "%q is not one of %s", st.Name, strings.Join(streamNames, ", "))
		}
		if streams[st.Name] {
			p.add(sf+".name", "%q appears twice", st.Name)
		}
		streams[st.Name] = true
		if st.Tokens <= 0 {
			p.add(sf+".tokens", "%d must be > 0", st.Tokens)
		}
	}
	if len(s.Streams) == 0 {
		p.hole("model", f+".streams", "empty")
	}
	inputs := map[string]bool{}
	for i, in := range s.Inputs {
		inf := fmt.Sprintf("%s.inputs[%d]", f, i)
		if !contains(inputRoles, in.Role) {
			p.add(inf+".role", "%q is not one of %s", in.Role, strings.Join(inputRoles, ", "))
		}
		if inputs[in.Role] {
			p.add(inf+".role", "%q appears twice", in.Role)
		}
		inputs[in.Role] = true
		if in.Name == "" {
			p.add(inf+".name", "empty")
		}
		for _, d := range in.Shape {
			if d <= 0 {
				p.add(inf+".shape", "%v has a dimension ≤ 0", in.Shape)
				break
			}
		}
	}
	if s.Run == "flow_euler" {
		for _, need := range []string{"latents", "sigmas"} {
			if !inputs[need] {
				p.add(f+".inputs", "a flow_euler run needs an input with role %q", need)
			}
		}
	}
	if len(s.Outputs) != 1 {
		p.hole("model", f+".outputs", "%d outputs, want exactly one", len(s.Outputs))
	}
	for i, o := range s.Outputs {
		of := fmt.Sprintf("%s.outputs[%d]", f, i)
		if !contains(outputRoles, o.Role) {
			p.add(of+".role", "%q is not one of %s", o.Role, strings.Join(outputRoles, ", "))
		}
		if o.Name == "" {
			p.add(of+".name", "empty")
		}
	}
	embedded := map[string]bool{}
	for i, e := range s.Embedders {
		ef := fmt.Sprintf("%s.embedders[%d]", f, i)
		if !streams[e.Stream] {
			p.add(ef+".stream", "%q is not a declared stream", e.Stream)
		}
		if embedded[e.Stream] {
			p.add(ef+".stream", "%q has two embedders", e.Stream)
		}
		embedded[e.Stream] = true
		if !inputs[e.Input] {
			p.add(ef+".input", "%q is not a declared input role", e.Input)
		}
		addr := EmbedAddress(e.Stream)
		if !contains(embedderKinds, e.Kind) {
			p.hole(addr, ef+".kind", "%q is not one of %s", e.Kind, strings.Join(embedderKinds, ", "))
			continue
		}
		if e.InWidth <= 0 {
			p.hole(addr, ef+".in_width", "%d must be > 0", e.InWidth)
		}
		if e.Patch < 0 {
			p.add(ef+".patch", "%d must be ≥ 0", e.Patch)
		}
		validateRoles(p, addr, ef+".roles", e.Roles, embedderRoles[e.Kind])
	}
	for name := range streams {
		if !embedded[name] {
			p.hole(EmbedAddress(name), f+".embedders", "stream %q has no embedder", name)
		}
	}
	if c := s.Conditioning; c != nil {
		if c.TimestepDim <= 0 || c.TimestepDim%2 != 0 {
			p.add(f+".conditioning.timestep_dim", "%d must be even and > 0", c.TimestepDim)
		}
		validateRoles(p, "conditioning", f+".conditioning.roles", c.Roles, conditioningRoles)
		validateBoundary(p, f+".conditioning.boundary", c.Boundary, []string{"timestep", "pooled"}, []string{"cond"})
		_, in := c.Roles["pooled_in"]
		_, out := c.Roles["pooled_out"]
		if in != out {
			p.add(f+".conditioning.roles", "pooled_in and pooled_out come together")
		}
		if in && !inputs["pooled"] {
			p.add(f+".conditioning.roles", "pooled roles need an input with role \"pooled\"")
		}
	}
	if pos := s.Positions; pos != nil {
		validateBoundary(p, f+".positions.boundary", pos.Boundary, []string{"ids"}, []string{"cos", "sin"})
		for _, name := range sortedKeys(pos.Streams) {
			validatePositionSource(p, f+".positions.streams["+name+"]", pos.Streams[name], streams[name], inputs)
		}
		for name := range streams {
			if _, ok := pos.Streams[name]; !ok {
				p.hole("positions", f+".positions.streams", "stream %q has no position source", name)
			}
		}
	}
	if len(s.Blocks) == 0 {
		p.hole("blocks", f+".blocks", "empty")
	}
	for i, b := range s.Blocks {
		b.validate(p, BlockAddress(i), fmt.Sprintf("%s.blocks[%d]", f, i), streams)
	}
	if s.Final.Stream == "" {
		p.hole("final", f+".final.stream", "empty")
	} else if !streams[s.Final.Stream] {
		p.add(f+".final.stream", "%q is not a declared stream", s.Final.Stream)
	}
	validateRoles(p, "final", f+".final.roles", s.Final.Roles, stages["final"].roleSpecs())
	validateBoundary(p, f+".final.boundary", s.Final.Boundary, []string{"x", "cond"}, []string{"out"})
}

// validateDriving checks the part of the structure a program document
// keeps: how the model is driven (run, inputs by role, the one output).
// Input roles other than latents and sigmas are the trace's input names.
func (s *Structure) validateDriving(p *problems) {
	const f = "structure"
	if !contains(runs, s.Run) {
		p.add(f+".run", "%q is not one of %s", s.Run, strings.Join(runs, ", "))
	}
	inputs := map[string]bool{}
	for i, in := range s.Inputs {
		inf := fmt.Sprintf("%s.inputs[%d]", f, i)
		if in.Role == "" || in.Name == "" {
			p.add(inf, "role and name must not be empty")
		}
		if inputs[in.Role] {
			p.add(inf+".role", "%q appears twice", in.Role)
		}
		inputs[in.Role] = true
	}
	if s.Run == "flow_euler" {
		for _, need := range []string{"latents", "sigmas"} {
			if !inputs[need] {
				p.add(f+".inputs", "a flow_euler run needs an input with role %q", need)
			}
		}
	}
	// one output, or (flow_euler) one per latents, in the latents' order
	if len(s.Outputs) != 1 && (s.Run != "flow_euler" || len(s.Outputs) == 0) {
		p.add(f+".outputs", "%d outputs, want exactly one", len(s.Outputs))
	}
	for i, o := range s.Outputs {
		k, lat := LatentsIndex(o.Role)
		if !contains(outputRoles, o.Role) && !(lat && k == i) || o.Name == "" {
			p.add(fmt.Sprintf("%s.outputs[%d]", f, i), "role %q (one of %s, or %s) and a name", o.Role, strings.Join(outputRoles, ", "), LatentsRole(i))
		}
		if lat && (s.Run != "flow_euler" || !inputs[o.Role]) {
			p.add(fmt.Sprintf("%s.outputs[%d]", f, i), "role %q: a flow_euler run's latents with an input of that role", o.Role)
		}
	}
}

// outputRolesOfRun is the model's output port role for a run.
func outputRolesOfRun(run string) []string {
	if run == "forward" {
		return []string{"hidden"}
	}
	return []string{"velocity"}
}

// validateBoundary checks a boundary's module and port roles.
func validateBoundary(p *problems, f string, bd *Boundary, ins, outs []string) {
	if bd == nil {
		return
	}
	if bd.Module == "" {
		p.add(f+".module", "empty")
	}
	for _, sec := range []struct {
		name  string
		m     map[string]string
		roles []string
	}{{"inputs", bd.Inputs, ins}, {"outputs", bd.Outputs, outs}} {
		for _, role := range sortedKeys(sec.m) {
			if !contains(sec.roles, role) {
				p.add(fmt.Sprintf("%s.%s[%q]", f, sec.name, role), "not one of %s", strings.Join(sec.roles, ", "))
			}
			if sec.m[role] == "" {
				p.add(fmt.Sprintf("%s.%s[%q]", f, sec.name, role), "empty port")
			}
		}
	}
}

func validatePositionSource(p *problems, f string, ps PositionSource, isStream bool, inputs map[string]bool) {
	if !isStream {
		p.add(f, "not a declared stream")
	}
	switch ps.From {
	case "input":
		if !inputs[ps.Input] {
			p.add(f+".input", "%q is not a declared input role", ps.Input)
		}
	case "grid":
		if len(ps.Grid) == 0 || len(ps.Origin) != len(ps.Grid) {
			p.add(f, "grid %v and origin %v must be non-empty and of one length", ps.Grid, ps.Origin)
		}
		for _, d := range ps.Grid {
			if d <= 0 {
				p.add(f+".grid", "%v has a dimension ≤ 0", ps.Grid)
				break
			}
		}
	case "sequence":
		if len(ps.Start) == 0 || len(ps.Step) != len(ps.Start) {
			p.add(f, "start %v and step %v must be non-empty and of one length", ps.Start, ps.Step)
		}
	default:
		p.add(f+".from", "%q is not one of %s", ps.From, strings.Join(positionSources, ", "))
	}
}

// validate checks block b at address addr: what its dataflow needs and
// does not have is a hole there.
func (b *Block) validate(p *problems, addr, f string, streams map[string]bool) {
	r, ok := recipes[b.Kind]
	if !ok {
		p.hole(addr, f+".kind", "%q is not one of %s", b.Kind, strings.Join(BlockKinds(), ", "))
		return
	}
	if len(b.Streams) == 0 {
		p.add(f+".streams", "empty")
	}
	seen := map[string]bool{}
	for _, s := range b.Streams {
		if !streams[s] {
			p.add(f+".streams", "%q is not a declared stream", s)
		}
		if seen[s] {
			p.add(f+".streams", "%q appears twice", s)
		}
		seen[s] = true
	}
	if r.Sets == SetsStreams && len(b.Streams) != 2 {
		p.add(f+".streams", "a %s block has two streams, not %d", b.Kind, len(b.Streams))
	}
	if b.Heads <= 0 || b.HeadDim <= 0 {
		p.hole(addr, f, "heads %d and head_dim %d must be > 0", b.Heads, b.HeadDim)
	}
	if b.KVHeads <= 0 || (b.Heads > 0 && b.Heads%b.KVHeads != 0) {
		p.hole(addr, f+".kv_heads", "%d must be > 0 and divide heads %d", b.KVHeads, b.Heads)
	}
	if b.MLPWidth <= 0 {
		p.hole(addr, f+".mlp_width", "%d must be > 0", b.MLPWidth)
	}
	validateRoles(p, addr, f+".roles", b.Roles, blockRoleSpecs(b.Kind, b.Streams))
	if bd := b.Boundary; bd != nil {
		for _, role := range append(sortedKeys(bd.Inputs), sortedKeys(bd.Outputs)...) {
			if !streams[role] && role != "joint" && role != "cond" {
				p.add(f+".boundary", "port role %q is neither a stream, \"joint\" nor \"cond\"", role)
			}
		}
	}
}

// validateRoles checks roles against the specs: every required role
// present (a missing one is a hole at addr), no unknown role, parameters
// as the role's kind wants.
func validateRoles(p *problems, addr, f string, roles map[string]Role, specs map[string]roleSpec) {
	for _, name := range sortedKeys(specs) {
		if _, ok := roles[name]; !ok && specs[name].required {
			p.hole(addr, f, "required role %q is missing", name)
		}
	}
	for _, name := range sortedKeys(roles) {
		r := roles[name]
		rf := fmt.Sprintf("%s[%q]", f, name)
		spec, ok := specs[name]
		if !ok {
			p.add(rf, "unknown role (this component has %s)", strings.Join(sortedKeys(specs), ", "))
			continue
		}
		switch spec.kind {
		case RoleLinear, RoleTable:
			if r.Weight == "" {
				p.add(rf+".weight", "a %s role needs a weight", spec.kind)
			}
		case RolePoint:
			if r.Weight != "" || r.Bias != "" {
				p.add(rf, "a point role has no parameters")
			}
			if r.Module == "" {
				p.add(rf+".module", "a point role is a boundary: its module is needed")
			}
		}
		if spec.kind == RoleTable && r.Bias != "" {
			p.add(rf+".bias", "a table has no bias")
		}
	}
}

func (d *Document) validateFactors(p *problems) {
	addrs := d.Addresses()
	type key struct{ name, addr string }
	owner := map[key]int{}
	for i, fc := range d.Factors {
		f := fmt.Sprintf("factors[%d]", i)
		spec, ok := LookupSpec(fc.Name)
		if !ok {
			p.add(f+".name", "%q is not in the factor catalogue", fc.Name)
			continue
		}
		f = fmt.Sprintf("factors[%d] (%s)", i, fc.Name)
		if err := spec.CheckValue(fc.Value); err != nil {
			p.add(f+".value", "%v", err)
		}
		for j, c := range fc.Candidates {
			if err := spec.CheckValue(c.Value); err != nil {
				p.add(fmt.Sprintf("%s.candidates[%d].value", f, j), "%v", err)
			}
		}
		if fc.Margin < 0 {
			p.add(f+".margin", "%v must be ≥ 0", float64(fc.Margin))
		}
		if !contains([]string{"rel_rms", "exact_fraction", "declared"}, fc.Evidence.Metric) {
			p.add(f+".evidence.metric", "%q is not one of rel_rms, exact_fraction, declared", fc.Evidence.Metric)
		}
		if fc.Evidence.Metric != "declared" && fc.Evidence.Boundary == "" {
			p.add(f+".evidence.boundary", "a measured factor names the boundary it was scored at")
		}
		if fc.Scope == "" {
			p.add(f+".scope", "empty")
			continue
		}
		matched := false
		for _, a := range addrs {
			if !MatchScope(fc.Scope, a) {
				continue
			}
			matched = true
			k := key{fc.Name, a}
			if j, dup := owner[k]; dup {
				p.add(f+".scope", "%q overlaps factors[%d] (%q) at %s", fc.Scope, j, d.Factors[j].Scope, a)
				break
			}
			owner[k] = i
		}
		if !matched {
			p.add(f+".scope", "%q matches no address of the structure", fc.Scope)
		}
	}
}

func (pr *Precision) validate(p *problems) {
	const f = "precision"
	if !contains(precisionStatuses, pr.Status) {
		p.add(f+".status", "%q is not one of %s", pr.Status, strings.Join(precisionStatuses, ", "))
	}
	if !contains(formats[:3], pr.Activations) {
		p.add(f+".activations", "%q is not one of f32, bf16, f16", pr.Activations)
	}
	for i, r := range pr.Rules {
		rf := fmt.Sprintf("%s.rules[%d]", f, i)
		if !contains(precisionOps, r.Op) {
			p.add(rf+".op", "%q is not one of %s", r.Op, strings.Join(precisionOps, ", "))
		}
		if r.Out != "" && !contains(formats, r.Out) {
			p.add(rf+".out", "%q is not one of %s", r.Out, strings.Join(formats, ", "))
		}
		for _, pt := range strings.Split(r.Round, "|") {
			if pt = strings.TrimSpace(pt); pt != "" && pt != "none" && !contains(roundPoints, pt) {
				p.add(rf+".round", "%q is not one of %s", pt, strings.Join(roundPoints, ", "))
			}
		}
		for _, m := range strings.Split(r.Math, "|") {
			if m = strings.TrimSpace(m); m != "" && !contains(mathVariants, m) {
				p.add(rf+".math", "%q is not one of %s", m, strings.Join(mathVariants, ", "))
			}
		}
		if e := r.Evidence; e != nil {
			if e.Metric != "exact_fraction" && e.Metric != "rel_rms" {
				p.add(rf+".evidence.metric", "%q is not exact_fraction or rel_rms", e.Metric)
			}
			if !(e.Exact >= 0 && e.Exact <= 1) {
				p.add(rf+".evidence.exact", "%v is not a fraction in [0, 1]", e.Exact)
			}
			if !(e.Margin >= 0) {
				p.add(rf+".evidence.margin", "%v is negative", float64(e.Margin))
			}
			if e.Boundaries < 0 {
				p.add(rf+".evidence.boundaries", "%d is negative", e.Boundaries)
			}
		}
	}
	if t := pr.RopeTable; t != nil {
		if !contains(formats, t.Freq) {
			p.add(f+".rope_table.freq", "%q is not one of %s", t.Freq, strings.Join(formats, ", "))
		}
		if t.Angle != "f32" && t.Angle != "f64" {
			p.add(f+".rope_table.angle", "%q is not f32 or f64", t.Angle)
		}
		if !contains(formats, t.Out) {
			p.add(f+".rope_table.out", "%q is not one of %s", t.Out, strings.Join(formats, ", "))
		}
	}
	for _, k := range sortedKeys(pr.Exact) {
		if v := pr.Exact[k]; !(v >= 0 && v <= 1) {
			p.add(fmt.Sprintf("%s.exact[%q]", f, k), "%v is not a fraction in [0, 1]", v)
		}
	}
	for _, k := range sortedKeys(pr.Scoring) {
		if s := pr.Scoring[k]; s.Rows < 1 || s.Rows > s.Of {
			p.add(fmt.Sprintf("%s.scoring[%q]", f, k), "%d of %d rows: want 1 ≤ rows ≤ of", s.Rows, s.Of)
		}
	}
}
