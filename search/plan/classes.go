package plan

import (
	"fmt"
	"strings"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/semantics"
)

// Op classes. A node's class is its op, except the sampler's operations,
// which are not program nodes: the timestep cast and the Euler update.
const (
	ClassEulerStep    = "euler_step"    // mul "sampler.scale" and add "sampler.update"
	ClassTimestepCast = "timestep_cast" // cast "sampler.timestep"
)

// Sampler roles (program.Runner).
const (
	roleTimestep = "sampler.timestep"
	roleScale    = "sampler.scale"
	roleUpdate   = "sampler.update"
)

// Unit is one thing a precision rule can address: a program node's op and
// role, or one of the sampler's operations.
type Unit struct {
	Op, Role string
	// Kind is the norm kind of a norm node (RoundStats is for layer norms).
	Kind exec.NormKind
}

// Class returns u's op class.
func (u Unit) Class() string {
	switch u.Role {
	case roleScale, roleUpdate:
		return ClassEulerStep
	case roleTimestep:
		return ClassTimestepCast
	}
	return u.Op
}

// Candidate is one precision an op class may have: the rule fields for
// each op of the class (Op "" in a template: every op of the class), or,
// for rope_table, the tables' formats.
type Candidate struct {
	Label string
	Rules []semantics.PrecisionRule // Role is left empty: the factor's glob fills it
	Table *semantics.RopeTableFormats
	// onlyKind, when set: valid only for norms of that kind (a layer-norm
	// kernel's statistics, an RMS norm's written out).
	onlyKind exec.NormKind
	// costly: the candidate's runs cost many times its class's others (a
	// tensor core's sums, which the CPU forms at a few ns a product), so
	// the search scores it only where it could win (discovery.Prune).
	costly bool
	// far: a costly candidate scored only where the plan in hand leaves
	// the class's values farther than a rounding from the trace (sums
	// stored one product at a time drift by 10⁻² from one f32 sum; a
	// GPU's convolutions, near it, need not try them).
	far bool
}

// String is the label (search keys assignments by it).
func (c Candidate) String() string { return c.Label }

// applies reports whether c can be given to every unit of us.
func (c Candidate) applies(us []Unit) bool {
	if c.onlyKind == 0 {
		return true
	}
	for _, u := range us {
		if u.Kind != c.onlyKind {
			return false
		}
	}
	return true
}

// spec is one candidate spec in rule form: out ("" = the activations
// format), round and math as the rule strings.
type spec struct{ out, round, math string }

func (s spec) label() string {
	var parts []string
	if s.out != "" {
		parts = append(parts, "out="+s.out)
	}
	if s.round != "" {
		parts = append(parts, "round="+s.round)
	}
	if s.math != "" {
		parts = append(parts, "math="+s.math)
	}
	if len(parts) == 0 {
		return "plain"
	}
	return strings.Join(parts, " ")
}

// product lists every combination of the given outs, rounds and maths.
func product(outs, rounds, maths []string) []spec {
	var out []spec
	for _, o := range outs {
		for _, r := range rounds {
			for _, m := range maths {
				out = append(out, spec{o, r, m})
			}
		}
	}
	return out
}

// Precision candidates per class, each a documented arithmetic a reference
// may use (exec/spec.go says what each rounding point and variant means):
//
//	norm            statistics in f32, one rounding; x̂ rounded before ·γ
//	                (HF/diffusers RMSNorm); x̂·γ rounded before +β; every
//	                step rounded; layer norms only: the statistics reduced as
//	                PyTorch's CUDA kernel does (welford), or in the storage
//	                format (PyTorch ≤ 1.13's CPU layer norm on bf16: stats);
//	                RMS norms only: written out in the storage format (stats),
//	                or as F.normalize times √G (l2), of x upcast or not
//	modulate        x·(1+scale)+shift fused, or 1+scale and/or the product
//	                rounded (each PyTorch op on bf16 tensors)
//	gated_residual  fused, or g(gate) and/or the product rounded; the
//	                residual stream stored in f32 or not
//	act, glu        f in f32 rounded once, or composed of rounded
//	                primitives (act: constants rounded or kept in f32,
//	                gelu_tanh spelled two ways) / the gate rounded (glu);
//	                precise or fast exp
//	conv2d          the bias added in f32 or after rounding; in bf16 and f16
//	                every product and partial sum stored (PyTorch 1.13's CPU)
//	linear          the bias added in f32 (fused epilogue) or after rounding;
//	                in bf16 and f16, summed in k order or in a GPU tensor
//	                core's blocks (tensor_core: cuBLAS; costly, so scored
//	                only where the plan in hand leaves a value inexact)
//	attention       flash-style (bf16 weights P), math SDPA (scores and/or
//	                probabilities rounded), or f32 throughout; written out
//	                step by step, q scaled first or the scores; the P·v sum
//	                kept in the storage format (PyTorch ≤ 1.13's CPU matmul
//	                on bf16); precise or fast exp; in bf16 and f16 the
//	                products summed in order or as tensor cores do
//	rope            x·cos + rot(x)·sin in f32 rounded once, or each product
//	                rounded (the formula on bf16 tensors)
//	rope_table      inverse frequencies in f64, f32 or the activations'
//	                format; angles in f64 or f32; tables stored in f32 or the
//	                activations' format
//	timestep_embed  stored in f32 or the activations' format; precise or
//	                fast exp; division or reciprocal multiply; sin and cos
//	                correctly rounded or CUDA's
//	add, mul, sub,  stored in the activations' format or f32 (a residual
//	div             stream kept in f32)
//	euler_step      v·dt in f32 then x + · rounded once (diffusers), every
//	                step in the activations' format, or latents kept in f32
//	timestep_cast   σ cast to the activations' format or kept in f32
func classCandidates(class, acts string) []Candidate {
	exp := []string{"", "fast_exp"}
	var specs []spec
	switch class {
	case "norm":
		specs = product([]string{""}, []string{"", "normalized", "product", "normalized|product", "each", "scale"}, []string{""})
		if acts != "f32" {
			// the normalised value kept in f32 for a product after it (a
			// norm written out in f32 whose modulation follows, cast once)
			specs = append(specs, spec{"f32", "", ""})
		}
	case "modulate":
		specs = product([]string{""}, []string{"", "scale", "product", "scale|product"}, []string{""})
	case "gated_residual":
		specs = product([]string{"", "f32"}, []string{"", "gate", "product", "gate|product"}, []string{""})
	case "act":
		specs = product([]string{""}, []string{"", "each"}, exp)
		if acts != "f32" {
			// composed in the storage format: PyTorch 2's f32 scalars,
			// and the factored spelling of gelu_tanh
			specs = append(specs, product([]string{""}, []string{"each"},
				[]string{"scalar_f32", "gelu_factored", "scalar_f32|gelu_factored"})...)
		}
	case "glu":
		specs = product([]string{""}, []string{"", "gate"}, exp)
	case "linear":
		maths := []string{""}
		if acts != "f32" {
			maths = append(maths, "tensor_core")
		}
		specs = product([]string{""}, []string{"", "before_bias"}, maths)
	case "conv2d":
		// the bias added after the sum is rounded (cuDNN's convolutions:
		// the bias a separate step in the activations' format), or once
		specs = product([]string{""}, []string{"", "before_bias"}, []string{""})
		if acts != "f32" {
			// every product and partial sum stored, from the bias
			// (PyTorch 1.13's CPU convolutions on bf16)
			specs = append(specs, spec{"", "accum", ""})
		}
	case "attention":
		specs = product([]string{""}, []string{"", "weights", "probs", "scores", "scores|probs", "scores|weights", "scores|probs|accum"}, exp)
		if acts != "f32" {
			// written step by step (q @ k * scale + bias, softmax, @ v):
			// every product and sum stored, on any device
			// and with q scaled first (q = q * scale; q @ kᵀ: timm's eager
			// attentions), the scaled q stored
			specs = append(specs, product([]string{""}, []string{"each", "each|query"}, exp)...)
			specs = append(specs, product([]string{""}, []string{"", "weights", "probs", "scores|probs", "scores|weights", "each", "each|query"},
				[]string{"tensor_core", "fast_exp|tensor_core"})...)
			// a flash kernel's online softmax over key tiles (cuDNN's SDPA)
			specs = append(specs, spec{"", "weights", "tensor_core|online_softmax"})
		}
	case "rope":
		specs = product([]string{""}, []string{"", "product"}, []string{""})
		if acts != "f32" {
			// rotated by an f32 table and kept in f32 (x·cos promotes; a
			// partial rotary's parts joined in f32)
			specs = append(specs, product([]string{"f32"}, []string{"", "product"}, []string{""})...)
		}
	case "timestep_embed":
		specs = product([]string{"f32", ""}, []string{""}, []string{"", "fast_exp", "recip_div", "fast_exp|recip_div",
			"cuda_sincos", "fast_exp|cuda_sincos", "recip_div|cuda_sincos", "fast_exp|recip_div|cuda_sincos"})
	case "mean":
		// a masked mean written out in the storage format (each weight,
		// and each product, rounded), or exact
		specs = product([]string{""}, []string{"", "weights", "weights|product"}, []string{""})
	case "experts":
		// the experts' weighted outputs summed in f32, or every partial
		// sum rounded (index_add_ into the activations' format); the GLU's
		// act(gate) rounded before its product or not
		specs = product([]string{""}, []string{"", "gate", "accum", "gate|accum"}, []string{""})
	case "add", "mul", "sub", "div", "minimum", "maximum":
		specs = product([]string{"", "f32"}, []string{""}, []string{""})
	case ClassTimestepCast:
		specs = product([]string{"", "f32"}, []string{""}, []string{""})
	case ClassEulerStep:
		out := []Candidate{
			{Label: "scale=f32 update=" + acts, Rules: []semantics.PrecisionRule{{Op: "mul", Role: roleScale, Out: "f32"}, {Op: "add", Role: roleUpdate}}},
			{Label: "scale=" + acts + " update=" + acts, Rules: []semantics.PrecisionRule{{Op: "mul", Role: roleScale}, {Op: "add", Role: roleUpdate}}},
			{Label: "scale=f32 update=f32", Rules: []semantics.PrecisionRule{{Op: "mul", Role: roleScale, Out: "f32"}, {Op: "add", Role: roleUpdate, Out: "f32"}}},
		}
		if acts != "f32" {
			// the step size a Python scalar that PyTorch ≤ 1.13's CPU casts
			// to the tensor's format before the product
			out = append(out, Candidate{Label: "scale=" + acts + " (Δσ in " + acts + ") update=" + acts,
				Rules: []semantics.PrecisionRule{{Op: "mul", Role: roleScale, Round: "scale"}, {Op: "add", Role: roleUpdate}}})
		}
		return out
	case "rope_table":
		var out []Candidate
		freqs := []string{"f64", "f32"}
		if acts != "f32" {
			freqs = append(freqs, acts)
		}
		outs := []string{"f32"}
		if acts != "f32" {
			outs = append(outs, acts)
		}
		for _, o := range outs {
			for _, a := range []string{"f64", "f32"} {
				for _, f := range freqs {
					t := &semantics.RopeTableFormats{Freq: f, Angle: a, Out: o}
					out = append(out, Candidate{Label: tableLabel(t), Table: t})
				}
			}
		}
		return out
	default:
		return nil
	}
	op := class
	var out []Candidate
	for _, s := range specs {
		m, _ := exec.ParseMath(s.math)
		// costly: a tensor core's sums, and sums stored one product at a
		// time, each formed scalar by scalar on the CPU
		stored := class == "conv2d" && s.round == "accum"
		c := Candidate{Label: s.label(), Rules: []semantics.PrecisionRule{{Op: op, Out: s.out, Round: s.round, Math: s.math}},
			costly: m&exec.MathTensorCore != 0 || stored, far: stored}
		if class == ClassTimestepCast {
			c.Rules[0].Op, c.Rules[0].Role = "cast", roleTimestep
		}
		out = append(out, c)
	}
	if class == "norm" {
		// Layer-norm kernels' own statistics: PyTorch's CUDA kernel, and
		// its CPU kernel on a reduced-precision compute type.
		for _, s := range []spec{{"", "", "welford"}, {"", "stats", ""}, {"", "scale", "welford"}} {
			out = append(out, Candidate{Label: s.label(), Rules: []semantics.PrecisionRule{{Op: "norm", Round: s.round, Math: s.math}}, onlyKind: exec.NormLayer})
		}
		// An RMS norm written out in the storage format (x², their mean,
		// + eps, rsqrt and x·r each rounded), with or without x̂·γ rounded.
		// Or with the root rounded and x divided by it (sqrt_div).
		for _, s := range []spec{{"", "stats", ""}, {"", "stats|product", ""}, {"", "stats", "sqrt_div"}} {
			out = append(out, Candidate{Label: s.label() + " (rms)", Rules: []semantics.PrecisionRule{{Op: "norm", Round: s.round, Math: s.math}}, onlyKind: exec.NormRMS})
		}
		// An RMS norm as F.normalize times √G, every step stored, √G
		// in the storage format or in f32; the sum of squares in f32, or
		// kept in the storage format; or x normalised upcast to f32, ‖x‖
		// kept in f32 and x̂ stored once.
		for _, s := range []spec{{"", "", "l2"}, {"", "", "l2|scalar_f32"}, {"", "stats", "l2"}, {"", "stats", "l2|scalar_f32"}, {"", "", "l2|normalize_f32"}, {"", "", "l2|normalize_f32|scalar_f32"}} {
			out = append(out, Candidate{Label: s.label() + " (rms)", Rules: []semantics.PrecisionRule{{Op: "norm", Round: s.round, Math: s.math}}, onlyKind: exec.NormRMS})
		}
	}
	return out
}

func tableLabel(t *semantics.RopeTableFormats) string {
	return fmt.Sprintf("freq=%s angle=%s out=%s", t.Freq, t.Angle, t.Out)
}

// Classes lists the op classes the search knows, in the order it reports
// them.
func Classes() []string {
	return []string{"timestep_embed", "rope_table", "norm", "modulate", "linear", "conv2d", "rope", "attention",
		"act", "glu", "gated_residual", "experts", "mean", "add", "mul", "sub", "div", "minimum", "maximum", ClassEulerStep, ClassTimestepCast}
}

// unitsOf lists the units of a program and runner: its nodes that take a
// precision, and the sampler's operations of a flow_euler run.
func unitsOf(p *program.Program, flow bool) []Unit {
	var out []Unit
	seen := map[Unit]bool{}
	for _, n := range p.Nodes {
		u, ok := nodeUnit(&n)
		if ok && !seen[u] {
			seen[u] = true
			out = append(out, u)
		}
	}
	if flow {
		out = append(out, Unit{Op: "cast", Role: roleTimestep}, Unit{Op: "mul", Role: roleScale}, Unit{Op: "add", Role: roleUpdate})
	}
	return out
}

// nodeUnit is the unit of a node whose precision a rule sets.
func nodeUnit(n *program.Node) (Unit, bool) {
	switch n.Op {
	case program.OpReshape, program.OpSlice, program.OpChunk, program.OpConcat, program.OpGather, program.OpCast,
		program.OpPermute:
		return Unit{}, false
	}
	u := Unit{Op: n.Op.String(), Role: n.Role}
	if n.Op == program.OpNorm {
		u.Kind = n.Attrs.Norm.Kind
	}
	return u, true
}

// blockNode reads a program node's role ("<module path>.<op><n>") as a
// node of a block: the path with each index (a part of digits) a
// wildcard, the module and the op; ok false for a node outside any
// indexed block, or a role not of that form.
func blockNode(role string) (pattern, module, op string, ok bool) {
	i := strings.LastIndexByte(role, '.')
	if i < 0 {
		return "", "", "", false
	}
	module, last := role[:i], role[i+1:]
	op = strings.TrimRight(last, "0123456789")
	if op == "" || op == last {
		return "", "", "", false
	}
	parts := strings.Split(module, ".")
	for k, p := range parts {
		if p != "" && strings.Trim(p, "0123456789") == "" {
			parts[k], ok = "*", true
		}
	}
	return strings.Join(parts, ".") + "." + op, module, op, ok
}

// RoleGroup is the role glob a role belongs to for per-role factors: its
// part name under its kind of address, every block and stream together
// ("blocks.0.image.q_norm" → "blocks.*.q_norm", "final.norm" stays).
func RoleGroup(role string) string {
	parts := strings.Split(role, ".")
	if len(parts) < 2 {
		return role
	}
	if parts[0] == "blocks" {
		return "blocks.*." + parts[len(parts)-1]
	}
	if parts[0] == "embed" && len(parts) >= 3 {
		return "embed.*." + parts[len(parts)-1]
	}
	return role
}
