package synth

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/search/internal/rotary"
	"github.com/zflow/zflow/search/readoff"
	"github.com/zflow/zflow/semantics"
)

// decisiveMargin is the margin (runner-up error / winner error) at which
// a factor is decisive (search.Options' default).
const decisiveMargin = 2

// factor makes a catalogue factor from scored candidates: the winner is
// value; the margin is the best other value's error over the winner's.
func factor(name, scope string, value any, cands []semantics.Candidate, boundary string) semantics.Factor {
	win, other := math.Inf(1), math.Inf(1)
	for _, c := range cands {
		if sameValue(c.Value, value) {
			win = math.Min(win, c.Score)
		} else {
			other = math.Min(other, c.Score)
		}
	}
	var margin float64
	switch {
	case math.IsInf(win, 1) || math.IsNaN(win):
		margin = 0 // the value was not among the candidates scored
	case math.IsInf(other, 1):
		margin = math.Inf(1) // no other value was scored
	case win == 0 && other > 0:
		margin = math.Inf(1)
	case win == 0:
		margin = 1
	default:
		margin = other / win
	}
	// one score per value
	best := map[string]semantics.Candidate{}
	var order []string
	for _, c := range cands {
		k := valueKey(c.Value)
		if b, ok := best[k]; !ok || c.Score < b.Score {
			if !ok {
				order = append(order, k)
			}
			best[k] = c
		}
	}
	var out []semantics.Candidate
	for _, k := range order {
		out = append(out, best[k])
	}
	return semantics.Factor{Name: name, Scope: scope, Value: value, Margin: semantics.Margin(margin),
		Decisive: margin >= decisiveMargin, Candidates: out,
		Evidence: semantics.Evidence{Boundary: boundary, Metric: "rel_rms", Note: "program search (search/synth)"}}
}

func valueKey(v any) string {
	switch x := v.(type) {
	case string:
		return "s:" + x
	case bool:
		return "b:" + strconv.FormatBool(x)
	case int:
		return "n:" + strconv.FormatFloat(float64(x), 'g', -1, 64)
	case float64:
		return "n:" + strconv.FormatFloat(x, 'g', -1, 64)
	case []int:
		k := "l:"
		for _, e := range x {
			k += valueKey(e) + ","
		}
		return k
	case []float64:
		k := "l:"
		for _, e := range x {
			k += valueKey(e) + ","
		}
		return k
	case []any:
		k := "l:"
		for _, e := range x {
			k += valueKey(e) + ","
		}
		return k
	}
	return "?" + fmt.Sprint(v)
}

func sameValue(a, b any) bool { return valueKey(a) == valueKey(b) }

// readFactors reads the catalogue's factors off the recovered program:
// each attention's RoPE layout, causality, scale and q/k norm; each MLP's
// activation and gating; the RoPE tables' θ.
func (s *synth) readFactors() []semantics.Factor {
	var out []semantics.Factor
	seen := map[string]bool{}
	add := func(f semantics.Factor) {
		k := f.Name + "@" + f.Scope
		if seen[k] || f.Scope == "" {
			return
		}
		seen[k] = true
		out = append(out, f)
	}
	for _, a := range s.attn {
		ch := a.choice
		if a.joint != "" {
			add(factor("joint_order", a.scope, a.joint, jointOrders(a.candidates, a.joint), a.boundary))
		}
		if ch.keyParts[0] != 0 {
			add(joinedOrder(a))
		}
		rope := "none"
		if ch.rope != 0 {
			rope = ch.rope.String()
		} else if l, ok := rotatedBefore(ch.q); ok {
			rope = l.String() // q rotated before attention (and normalised after)
		}
		add(factor("rope_layout", a.scope, rope, relabel(a.candidates, "rope=", func(x string) any { return x }), a.boundary))
		add(factor("attention_causal", a.scope, ch.params.Mask == exec.MaskCausal,
			relabel(a.candidates, "causal=", func(x string) any { return x == "true" }), a.boundary))
		scale := 0.0
		if ch.params.Scale != 0 && ch.params.Scale != float32(1/math.Sqrt(float64(ch.headDim))) {
			// the simple number the f32 parameter holds (1/√24, not its f32 rounding)
			scale = snap(float64(ch.params.Scale), func(x float64) bool { return float32(x) == ch.params.Scale })
		}
		add(semantics.Factor{Name: "attention_scale", Scope: a.scope, Value: scale, Margin: semantics.Margin(math.Inf(1)), Decisive: true,
			Candidates: []semantics.Candidate{{Value: scale, Score: ch.score}},
			Evidence:   semantics.Evidence{Boundary: a.boundary, Metric: "rel_rms", Note: "the scale the attention search fitted (0: 1/√head_dim)"}})
		for _, x := range []struct {
			name string
			v    any
			on   bool
		}{{"attention_window", float64(ch.params.Window), ch.params.Window > 0},
			{"attention_block", float64(ch.params.Block), ch.params.Block > 0},
			{"attention_softcap", snap(float64(ch.params.Softcap), func(x float64) bool { return float32(x) == ch.params.Softcap }), ch.params.Softcap > 0},
			{"attention_alibi", ch.params.ALiBi, ch.params.ALiBi},
			{"attention_clip", ch.clip, ch.clip > 0},
			{"attention_sinks", true, ch.sinks != nil},
			{"attention_segments", segmentsOf(ch.bias), segmentsOf(ch.bias) != nil},
			{"attention_qk_format", ch.rounded.String(), ch.rounded != 0}} {
			if x.on {
				add(semantics.Factor{Name: x.name, Scope: a.scope, Value: x.v, Margin: semantics.Margin(math.Inf(1)), Decisive: true,
					Candidates: []semantics.Candidate{{Value: x.v, Score: ch.score}},
					Evidence:   semantics.Evidence{Boundary: a.boundary, Metric: "rel_rms", Note: "found by the attention search's coordinate descent (" + ch.label + ")"}})
			}
		}
		qk := "none"
		if f := s.normOf(ch.q); f != nil {
			qk = f.norm.Kind.String()
		} else if ch.temperature != "" {
			qk = "l2" // cosine attention
		}
		add(semantics.Factor{Name: "qk_norm", Scope: a.scope, Value: qk, Margin: 0, Candidates: []semantics.Candidate{{Value: qk, Score: 0}},
			Evidence: semantics.Evidence{Metric: "declared", Note: "read from the program: what q is made by before attention"}})
	}
	for _, r := range s.relShifts {
		add(factor("attention_relative_shift", r.scope, r.direction, r.shifts, r.boundary))
		add(factor("attention_relative_biases", r.scope, r.terms, r.placesTried, r.boundary))
	}
	for _, r := range s.disentangled {
		for _, f := range r.factors() {
			add(f)
		}
	}
	for _, l := range s.lambdas {
		add(l.factor())
	}
	for _, r := range s.temperatures {
		add(r.factor())
	}
	for _, b := range s.batchNorms {
		add(b.factor())
	}
	for _, a := range s.linearAttn {
		add(semantics.Factor{Name: "attention_kernel", Scope: a.scope, Value: a.params.Kernel.String(), Margin: semantics.Margin(math.Inf(1)), Decisive: true,
			Candidates: a.candidates, Evidence: semantics.Evidence{Boundary: a.boundary, Metric: "rel_rms", Note: "kernelised attention, tried once softmax attention had failed"}})
		if a.rope != 0 {
			add(a.ropeFactor())
		}
	}
	for _, r := range s.scans {
		add(semantics.Factor{Name: "ssm_skip", Scope: r.scope, Value: r.skip, Margin: semantics.Margin(r.margin), Decisive: r.margin > 2,
			Candidates: r.candidates, Evidence: semantics.Evidence{Boundary: r.boundary, Metric: "rel_rms",
				Note: fmt.Sprintf("a selective scan, tried once every other form had failed: %s (best of %d operand assignments; each candidate's score is the best assignment with or without D)", r.winner, r.scored)}})
	}
	for _, r := range s.recurrents {
		for _, f := range r.factors() {
			add(f)
		}
	}
	for _, m := range s.mlps {
		scope, x := m.scope, m.x
		if x.fit != nil && x.fit.kind == "norm" && x.from != nil && len(x.from.args) > 0 && x.from.args[0].fit != nil {
			x = x.from.args[0] // a norm between the activation and the down projection (a sub-norm)
		}
		if x.fit == nil {
			continue
		}
		switch x.fit.kind {
		case "glu", "glue":
			glu := x.fit.kind == "glu"
			note := "the MLP's down projection reads f(a)"
			if glu {
				note += "·b"
			}
			add(semantics.Factor{Name: "mlp_glu", Scope: scope, Value: glu, Evidence: semantics.Evidence{Metric: "declared", Note: note}, Candidates: []semantics.Candidate{{Value: glu}}})
			add(factor("mlp_act", scope, x.fit.act.String(), x.fit.candidates, m.boundary))
			if x.fit.squared {
				add(semantics.Factor{Name: "mlp_squared", Scope: scope, Value: true, Evidence: semantics.Evidence{Metric: "declared", Note: "f(a) is squared: f(a)·f(a)"}, Candidates: []semantics.Candidate{{Value: true}}})
			}
		case "piecewise":
			// a learned activation of no catalogue name (mlp_act is not
			// written): its form and every candidate's score are the evidence
			add(semantics.Factor{Name: "mlp_glu", Scope: scope, Value: false, Candidates: []semantics.Candidate{{Value: false}},
				Evidence: semantics.Evidence{Boundary: m.boundary, Metric: "declared", Note: "the MLP's down projection reads a learned activation split at zero: " +
					x.fit.label + " (every form scored on the activation's output, rel-RMS: " + candidateList(x.fit.candidates) + ")"}})
		case "swish":
			// x·σ(β·x) spelled out (quick GELU at 1.702): the silu gate as Swish-β
			add(semantics.Factor{Name: "mlp_glu", Scope: scope, Value: false, Evidence: semantics.Evidence{Metric: "declared", Note: "the MLP's down projection reads f(a)"}, Candidates: []semantics.Candidate{{Value: false}}})
			add(semantics.Factor{Name: "mlp_act", Scope: scope, Value: exec.ActSiLU.String(), Candidates: []semantics.Candidate{{Value: exec.ActSiLU.String()}},
				Evidence: semantics.Evidence{Boundary: m.boundary, Metric: "declared", Note: "as Swish-β: " + x.fit.label}})
			f := factor("mlp_swish_beta", scope, snap(float64(x.fit.beta), func(y float64) bool { return float32(y) == x.fit.beta }), x.fit.candidates, m.boundary)
			f.Evidence.Note = "β read off the activation's values (the median of logit(y/x)/x), snapped, each candidate scored on its output"
			add(f)
		case "experts":
			glu, note := !x.fit.ungated, "each expert reads f(gate)·up"
			if x.fit.ungated {
				note = "each expert reads f(x·w1ᵀ), no up"
			}
			add(semantics.Factor{Name: "mlp_glu", Scope: scope, Value: glu, Evidence: semantics.Evidence{Metric: "declared", Note: note}, Candidates: []semantics.Candidate{{Value: glu}}})
			add(factor("mlp_act", scope, x.fit.act.String(), x.fit.candidates, m.boundary))
			if x.fit.squared {
				add(semantics.Factor{Name: "mlp_squared", Scope: scope, Value: true, Evidence: semantics.Evidence{Metric: "declared", Note: "each expert's f(a) is squared: f(a)·f(a)"}, Candidates: []semantics.Candidate{{Value: true}}})
			}
			if u := x.fit.unit; u != nil {
				for _, n := range []struct {
					name  string
					value float32
					cands []semantics.Candidate
				}{{"mlp_limit", u.params.Limit, u.limit}, {"mlp_swish_beta", u.params.Beta, u.beta}, {"mlp_up_offset", u.params.UpOffset, u.offset}} {
					if n.cands != nil {
						f := factor(n.name, scope, snap(float64(n.value), func(y float64) bool { return float32(y) == n.value }), n.cands, m.boundary)
						f.Evidence.Note = "the experts' unit fitted from values, each number scored against its absence (" + u.label + ")"
						add(f)
					}
				}
			}
		}
	}
	for _, r := range s.ropes {
		axes := semantics.Factor{Name: "rope_axes", Scope: r.scope, Value: slices.Clone(r.fit.rope.AxesDims), Margin: semantics.Margin(math.Inf(1)), Decisive: true,
			Candidates: []semantics.Candidate{{Value: slices.Clone(r.fit.rope.AxesDims)}}, Evidence: semantics.Evidence{Boundary: r.boundary, Metric: "rel_rms", Note: "RoPE tables recomputed from the positions"}}
		sameAxes := func(p exec.RopeTableParams) bool { return slices.Equal(p.AxesDims, r.fit.rope.AxesDims) }
		if m, ok := ropeMargin(r.fit.ropeTried, sameAxes); ok {
			axes.Margin, axes.Decisive = semantics.Margin(m), m >= 2
			axes.Candidates = axesCandidates(r.fit.ropeTried)
			if !axes.Decisive {
				axes.Evidence.Note += "; another split of the axes reproduces them as well (positions that stay zero on some axes do not show their widths)"
			}
		}
		add(axes)
		if fa := r.fit.rope.FreqAxes; fa != nil {
			f := semantics.Factor{Name: "rope_freq_axes", Scope: r.scope, Value: slices.Clone(fa), Margin: semantics.Margin(math.Inf(1)), Decisive: true,
				Candidates: []semantics.Candidate{{Value: slices.Clone(fa)}}, Evidence: semantics.Evidence{Boundary: r.boundary, Metric: "rel_rms",
					Note: "each frequency's column read from the tables' angles at the position ids, the tables recomputed with the map and with every map one column away"}}
			if m, ok := ropeMargin(r.fit.ropeTried, func(p exec.RopeTableParams) bool { return slices.Equal(p.FreqAxes, fa) }); ok {
				f.Margin, f.Decisive = semantics.Margin(m), m >= 2
				f.Candidates = ropeCandidates(r.fit.ropeTried, func(p exec.RopeTableParams) []int { return p.FreqAxes })
				if !f.Decisive {
					f.Evidence.Note += "; a map one column away reproduces them as well (columns equal on every row do not show which turns a frequency)"
				}
			}
			add(f)
		}
		theta := semantics.Factor{Name: "rope_theta", Scope: r.scope, Value: r.fit.rope.Theta, Margin: semantics.Margin(math.Inf(1)), Decisive: true,
			Candidates: r.fit.candidates, Evidence: semantics.Evidence{Boundary: r.boundary, Metric: "rel_rms", Note: "RoPE tables recomputed from the positions"}}
		if m, ok := ropeMargin(r.fit.ropeTried, func(p exec.RopeTableParams) bool { return p.Theta == r.fit.rope.Theta }); ok {
			theta.Margin, theta.Decisive = semantics.Margin(m), m >= 2
		}
		add(theta)
	}
	for _, f := range s.coordRopeFactors() {
		add(f)
	}
	for _, n := range s.norms {
		p := n.fit.norm
		var kc, ec, oc []semantics.Candidate
		for _, c := range n.fit.candidates {
			l, _ := c.Value.(string)
			var kind string
			var eps, off float64
			if n, _ := fmt.Sscanf(l, "%s eps=%g offset=%g", &kind, &eps, &off); n < 2 {
				continue
			}
			kc = append(kc, semantics.Candidate{Value: kind, Score: c.Score})
			ec = append(ec, semantics.Candidate{Value: eps, Score: c.Score})
			oc = append(oc, semantics.Candidate{Value: off, Score: c.Score})
		}
		add(factor("norm_kind", n.scope, p.Kind.String(), kc, n.boundary))
		add(factor("norm_eps", n.scope, snap(float64(p.Eps), func(x float64) bool { return float32(x) == p.Eps }), ec, n.boundary))
		add(factor("norm_offset", n.scope, float64(p.Offset), oc, n.boundary))
	}
	for _, f := range s.conditioningFactors() {
		add(f)
	}
	for _, b := range s.patchLayouts {
		add(semantics.Factor{Name: "patch_layout", Scope: "model", Value: "c_ph_pw", Candidates: []semantics.Candidate{{Value: "c_ph_pw"}},
			Evidence: semantics.Evidence{Metric: "declared", Boundary: b, Note: "the latents' patches, features (c, ph, pw), found from the values"}})
	}
	// a joined sequence of the image rows (the latents' patches) and
	// another stream: which comes first
	for _, j := range s.joins {
		if s.patchRows == 0 || (j.first == s.patchRows) == (j.second == s.patchRows) {
			continue
		}
		order := "text_first"
		if j.first == s.patchRows {
			order = "image_first"
		}
		add(semantics.Factor{Name: "joint_order", Scope: "model", Value: order, Candidates: []semantics.Candidate{{Value: order}},
			Evidence: semantics.Evidence{Metric: "declared", Boundary: j.boundary, Note: "the rows of a joined sequence, read off the values"}})
	}
	return fixCandidates(out)
}

// tableRopes estimates θ and the axes of the RoPE tables attention reads
// where rope_table did not make them (tables the request gives, free
// frequencies, constants of the request's shape): read off the tables'
// angles (rotary.Estimate), declared, never decisive.
func (s *synth) tableRopes() []semantics.Factor {
	var out []semantics.Factor
	for _, a := range s.attn {
		c, sn := a.choice.cos, a.choice.sin
		if e := ropeBefore(a.choice.q); c == nil && e != nil && len(e.args) == 3 {
			c, sn = e.args[1], e.args[2] // q rotated before the attention
		} else if a.choice.rope == 0 {
			continue
		}
		if c == nil || sn == nil || c.fit != nil && c.fit.kind == "rope_table" || len(c.shape) == 0 || c.data == nil || sn.data == nil {
			continue
		}
		theta, axes, ok := rotary.Estimate(c.data, sn.data, c.shape[len(c.shape)-1])
		if !ok {
			continue
		}
		note := "estimated from the angles of the tables the attention reads (not made by rope_table, so no θ was scored): each axis's first two frequencies"
		out = append(out, readoff.Declared("rope_theta", a.scope, theta, note))
		if sum := intSum(axes); sum == a.choice.headDim || sum == ropeWidth(a.choice) {
			// the axes only where the table spans what rotates (a table
			// applied in parts tells the parts, not the axes)
			out = append(out, readoff.Declared("rope_axes", a.scope, axes, note))
		}
	}
	return out
}

func intSum(xs []int) int {
	n := 0
	for _, x := range xs {
		n += x
	}
	return n
}

// ropeWidth is how many elements of each head rotate where q is rotated
// before the attention by a partial rotary (0: not known).
func ropeWidth(ch attnChoice) int {
	if e := ropeBefore(ch.q); e != nil {
		return e.attrs.Rope.RotaryDim
	}
	return 0
}

// conditioningFactors read the modulation off the program: each scope's
// chunk order (the chunk indices its shift, scale and gate came from),
// the plus-one form, the gate function, the final norm's order (a
// two-chunk modulation without a gate), the activation before the
// modulation linear, and the timestep sinusoid.
func (s *synth) conditioningFactors() []semantics.Factor {
	var out []semantics.Factor
	declared := func(name, scope string, v any, note, boundary string) semantics.Factor {
		return semantics.Factor{Name: name, Scope: scope, Value: v, Candidates: []semantics.Candidate{{Value: v}},
			Evidence: semantics.Evidence{Metric: "declared", Boundary: boundary, Note: note}}
	}
	for _, g := range s.gates {
		out = append(out, factor("gate_fn", g.scope, g.fn.String(), g.candidates, g.boundary))
	}
	// chunk roles by source: which chunk of which projection each shift,
	// scale and gate reads; each modulation paired with the first free
	// gate after it (streams may interleave their chunks)
	type group struct{ shift, scale, gate int }
	type source struct {
		parts           int
		mods            []group
		gates           []int
		scope, boundary string
	}
	bySrc := map[*val]*source{}
	var srcs []*val
	var last *source // the last modulation's: the final norm's, where it has no gate
	at := func(v *val, scope, boundary string) (*source, int, bool) {
		src, i, parts, ok := chunkOf(v)
		if !ok || parts < 2 {
			return nil, 0, false
		}
		r := bySrc[src]
		if r == nil {
			r = &source{parts: parts, scope: scope, boundary: boundary}
			bySrc[src] = r
			srcs = append(srcs, src)
		}
		return r, i, true
	}
	for _, m := range s.mods {
		out = append(out, factor("modulation_plus_one", m.scope, m.plusOne, relabel(m.candidates, "plus_one=", func(x string) any { return x == "true" }), m.boundary))
		if src := through(m.scale.src); src != nil && src.fit != nil && src.fit.kind == "linear" {
			act := "identity"
			if in := through(src.fit.in); in != nil && in.fit != nil && in.fit.kind == "glue" && in.fit.norm.Kind == 0 {
				act = in.fit.act.String()
			}
			out = append(out, declared("modulation_act", m.scope, act, "what the modulation linear reads the conditioning through", m.boundary))
		}
		r, sc, ok := at(m.scale.v, m.scope, m.boundary)
		if !ok {
			continue
		}
		last = r
		g := group{shift: -1, scale: sc, gate: -1}
		if m.shift.v != nil {
			if r2, sh, ok := at(m.shift.v, m.scope, m.boundary); ok && r2 == r {
				g.shift = sh
			}
		}
		r.mods = append(r.mods, g)
	}
	for _, g := range s.gates {
		if r, i, ok := at(g.gate.v, g.scope, g.boundary); ok {
			r.gates = append(r.gates, i)
		}
	}
	for _, src := range srcs {
		r := bySrc[src]
		slices.Sort(r.gates)
		taken := map[int]bool{}
		var orders []string
		for _, g := range r.mods {
			after := max(g.shift, g.scale)
			for _, k := range r.gates {
				if k > after && !taken[k] {
					g.gate, taken[k] = k, true
					break
				}
			}
			idx := map[string]int{"scale": g.scale}
			if g.shift >= 0 {
				idx["shift"] = g.shift
			}
			if g.gate >= 0 {
				idx["gate"] = g.gate
			}
			if len(idx) < 2 || (len(idx) == 2 && g.shift < 0) {
				continue
			}
			names := make([]string, 0, len(idx))
			for k := range idx {
				names = append(names, k)
			}
			slices.SortFunc(names, func(a, b string) int { return idx[a] - idx[b] })
			orders = append(orders, strings.Join(names, ","))
		}
		for _, o := range orders {
			name := "modulation_order"
			if !strings.Contains(o, "gate") {
				if r != last {
					continue // a gateless modulation inside the model: no catalogue name
				}
				name = "final_norm_order"
			}
			// the first reading per source; the others agree or show as
			// another value at another scope
			out = append(out, declared(name, r.scope, o, "the chunk indices the program's shift, scale and gate read", r.boundary))
			break
		}
	}
	for _, sn := range s.sinusoids {
		sn.embedAct = s.embedAct(sn.out)
		p := sn.fit.timestep
		out = append(out, factor("timestep_flip_sin_to_cos", sn.scope, p.FlipSinToCos, relabel(sn.fit.candidates, "flip=", func(x string) any { return x == "true" }), sn.boundary))
		out = append(out, factor("timestep_freq_shift", sn.scope, float64(p.FreqShift), relabel(sn.fit.candidates, "shift=", parseNumber), sn.boundary))
		scale, at := float64(p.Scale), "sinusoid"
		if sn.inputScale != 1 {
			scale, at = sn.inputScale, "input"
		}
		out = append(out, declared("timestep_scale", sn.scope, scale, "the sinusoid's scale times what the model multiplies its timestep by before it", sn.boundary))
		if scale != 1 {
			out = append(out, declared("timestep_scale_at", sn.scope, at, "where that multiply is", sn.boundary))
		}
		if sn.embedAct != "" {
			out = append(out, declared("embed_act", sn.scope, sn.embedAct, "between the two linears after the sinusoid", sn.boundary))
		}
		if sn.fit.freqs != nil {
			out = append(out, sn.fit.freqs.factor(sn.scope, sn.boundary))
		}
	}
	for _, a := range s.angular {
		f := factor("attention_angular_power", a.scope, float64(a.params.Power), a.candidates, a.boundary)
		f.Evidence.Note = fmt.Sprintf("YOSO's expected LSH attention in %d heads: (1 − acos(q̂·k̂)/π)^τ, every power τ ≤ %d scored on the host", a.params.Heads, maxAngularPower)
		out = append(out, f)
	}
	out = append(out, s.sinkhornFactors()...)
	for _, pt := range s.positionTables {
		f := factor("position_offset", pt.scope, float64(pt.fit.offset), pt.fit.candidates, pt.boundary)
		f.Evidence.Note = pt.fit.label
		out = append(out, f)
	}
	return out
}

func parseNumber(x string) any {
	f, err := strconv.ParseFloat(x, 64)
	if err != nil {
		return x
	}
	return f
}

// fixCandidates keeps only candidates whose values the catalogue accepts
// (evidence labels that are not values are dropped).
func fixCandidates(fs []semantics.Factor) []semantics.Factor {
	for i := range fs {
		spec, ok := semantics.LookupSpec(fs[i].Name)
		if !ok {
			continue
		}
		fs[i].Candidates = slices.DeleteFunc(fs[i].Candidates, func(c semantics.Candidate) bool { return spec.CheckValue(c.Value) != nil })
	}
	return fs
}

// relabel maps attention evidence labels ("… causal=true … rope=half")
// to one factor's values.
func relabel(cands []semantics.Candidate, key string, parse func(string) any) []semantics.Candidate {
	var out []semantics.Candidate
	for _, c := range cands {
		l, _ := c.Value.(string)
		i := strings.Index(l, key)
		if i < 0 {
			continue
		}
		v := l[i+len(key):]
		if j := strings.IndexByte(v, ' '); j >= 0 {
			v = v[:j]
		}
		out = append(out, semantics.Candidate{Value: parse(v), Score: c.Score})
	}
	return out
}

// normOf is the norm fit a value was read from, through movement ops,
// joins and RoPE.
func (s *synth) normOf(v *val) *leafFit {
	for depth := 0; v != nil && depth < 32; depth++ {
		if v.fit != nil && (v.fit.kind == "norm" || (v.fit.kind == "glue" && v.fit.norm.Kind != 0)) {
			return v.fit
		}
		if v.from == nil || len(v.from.args) == 0 {
			return nil
		}
		switch v.from.op {
		case program.OpReshape, program.OpPermute, program.OpSlice, program.OpRope, program.OpCast:
			v = v.from.args[0]
		case program.OpConcat:
			for _, a := range v.from.args {
				if f := s.normOf(a); f != nil {
					return f
				}
			}
			return nil
		default:
			return nil
		}
	}
	return nil
}

// mlpRecord is a down projection (a linear that narrows) and its input.
type mlpRecord struct {
	scope, boundary string
	x               *val
}

// ropeRecord is RoPE tables the search recomputed from positions.
type ropeRecord struct {
	scope, boundary string
	fit             *leafFit
}

// sinusoidRecord is a timestep sinusoid the search fitted: what the model
// multiplies its timestep by before it, and the activation between the
// two linears after it.
type sinusoidRecord struct {
	scope, boundary string
	fit             *leafFit
	inputScale      float64
	embedAct        string
	out             *val
}

// embedAct is the activation between the linear that reads x and the
// linear after it (a conditioning MLP), "" when there is none.
func (s *synth) embedAct(x *val) string {
	for _, l1 := range s.linears {
		if through(l1.fit.in) != x && l1.fit.in != x {
			continue
		}
		for _, l2 := range s.linears {
			in := l2.fit.in
			if in == nil || in.fit == nil || in.fit.kind != "glue" || in.fit.norm.Kind != 0 || in.from == nil {
				continue
			}
			if a := in.from.args[0]; a == l1 || (a.from != nil && a.from == l1.from) {
				return in.fit.act.String()
			}
		}
	}
	return ""
}

// rotatedBefore finds a RoPE node q is made from through moves and a
// norm (a model that rotates q before normalising it), and its layout.
func rotatedBefore(q *val) (exec.RopeLayout, bool) {
	if e := ropeBefore(q); e != nil {
		return e.attrs.Rope.Layout, true
	}
	return 0, false
}

// ropeBefore is the rope node q was rotated by before attention (through
// casts, moves and a norm after it, or the projection of a rotated input:
// a conformer rotates the hidden states q and k are projected from), or
// nil.
func ropeBefore(q *val) *expr {
	for v, hops := q, 0; v != nil && v.from != nil && len(v.from.args) > 0 && hops < 8; hops++ {
		switch v.from.op {
		case program.OpRope:
			return v.from
		case program.OpCast, program.OpReshape, program.OpPermute, program.OpNorm, program.OpLinear:
			v = v.from.args[0]
		default:
			return nil
		}
	}
	return nil
}

// through is the value v moves or casts (v itself when it is computed
// otherwise).
func through(v *val) *val {
	for v != nil && v.from != nil && len(v.from.args) > 0 {
		switch v.from.op {
		case program.OpCast, program.OpReshape, program.OpPermute:
			v = v.from.args[0]
		default:
			return v
		}
	}
	return v
}

// jointOrders reads the joint order candidates off joint attention
// evidence (mine_first is relative to the stream scored).
func jointOrders(cands []semantics.Candidate, winner string) []semantics.Candidate {
	other := map[string]string{"text_first": "image_first", "image_first": "text_first"}[winner]
	var out []semantics.Candidate
	best := map[bool]float64{true: math.Inf(1), false: math.Inf(1)}
	for _, c := range relabel(cands, "mine_first=", func(x string) any { return x == "true" }) {
		b := c.Value.(bool)
		best[b] = math.Min(best[b], c.Score)
	}
	win, lose := best[true], best[false]
	if lose < win {
		win, lose = lose, win
	}
	out = append(out, semantics.Candidate{Value: winner, Score: finite(win)}, semantics.Candidate{Value: other, Score: finite(lose)})
	return out
}

// joinRecord is a joined sequence of two parts (rows of each).
type joinRecord struct {
	boundary      string
	first, second int
}

// chunkOf follows a vector back through reshapes and slices to the value
// it is a chunk of: that value, the chunk's index and how many chunks of
// its size the value holds.
func chunkOf(v *val) (src *val, index, parts int, ok bool) {
	for v != nil && v.from != nil && len(v.from.args) > 0 {
		switch v.from.op {
		case program.OpReshape, program.OpCast:
			v = v.from.args[0]
		case program.OpSlice:
			a := v.from.attrs
			x := v.from.args[0]
			ax := a.Axis
			if ax < 0 {
				ax += len(x.shape)
			}
			size := a.End - a.Start
			if size <= 0 || x.shape[ax]%size != 0 {
				return nil, 0, 0, false
			}
			index, parts = a.Start/size, x.shape[ax]/size
			if parts == 1 {
				v = x // a whole axis: not a chunk
				continue
			}
			// the sliced value, through reshapes and table sums, is the source
			x = through(x)
			if x.from != nil && x.from.op == program.OpAdd {
				x = summedSource(x)
			}
			return x, index, parts, true
		case program.OpAdd:
			// chunks of one index of two conditioning values, added (the
			// sum's chunk computed as a sum of chunks): the same source as
			// the chunk of their sum
			var best *val
			bi, bp := 0, 0
			for _, y := range v.from.args {
				if y == nil {
					continue
				}
				src, i, p, ok := chunkOf(y)
				if !ok || p < 2 || best != nil && (i != bi || p != bp) {
					return v, 0, 1, true
				}
				if best == nil || preferSource(src, best) {
					best, bi, bp = src, i, p
				}
			}
			if best == nil {
				return v, 0, 1, true
			}
			return best, bi, bp, true
		default:
			return v, 0, 1, true
		}
	}
	return v, 0, 1, v != nil
}

// summedSource is the source a chunk of sum x is read from: its
// captured, non-parameter argument (a table added to a projection: the
// projection), the earliest made where two are (an adaLN-LoRA norm's own
// projection added to the shared timestep embedding: the embedding, which
// every norm of the block reads).
func summedSource(x *val) *val {
	var best *val
	for _, y := range x.from.args {
		if y == nil {
			continue
		}
		if y = through(y); len(y.keys) > 0 && (best == nil || preferSource(y, best)) {
			best = y
		}
	}
	if best == nil {
		return x
	}
	return best
}

// preferSource orders two captured sources of one chunk: a computed
// value before a parameter, then the earlier made.
func preferSource(a, b *val) bool {
	if a.param != b.param {
		return !a.param
	}
	return a.seq < b.seq
}

// normRecord is a norm the search fitted.
type normRecord struct {
	scope, boundary string
	fit             *leafFit
}

// ropeMargin is the margin of a RoPE table's reading among the tables
// its fit tried: the best score of a table that reads otherwise (same
// false) over the best of those that read as the winner; both exact: 1,
// as the trace does not tell them apart. ok is false where the fit tried
// none (tables read another way: the reading is declared).
func ropeMargin(tried []ropeTry, same func(exec.RopeTableParams) bool) (float64, bool) {
	in, out := math.Inf(1), math.Inf(1)
	for _, t := range tried {
		if same(t.p) {
			in = math.Min(in, t.score)
		} else {
			out = math.Min(out, t.score)
		}
	}
	if len(tried) == 0 || math.IsInf(in, 1) {
		return 0, false
	}
	if out == in {
		return 1, true
	}
	return out / in, true
}

// axesCandidates are the splits the fit tried, each with its best score,
// in the order tried.
func axesCandidates(tried []ropeTry) []semantics.Candidate {
	return ropeCandidates(tried, func(p exec.RopeTableParams) []int { return p.AxesDims })
}

// ropeCandidates are the values of one list attribute the fit tried,
// each with its best score, in the order tried.
func ropeCandidates(tried []ropeTry, of func(exec.RopeTableParams) []int) []semantics.Candidate {
	var out []semantics.Candidate
	at := map[string]int{}
	for _, t := range tried {
		key := fmt.Sprint(of(t.p))
		if k, ok := at[key]; ok {
			out[k].Score = math.Min(out[k].Score, finite(t.score))
			continue
		}
		at[key] = len(out)
		out = append(out, semantics.Candidate{Value: slices.Clone(of(t.p)), Score: finite(t.score)})
	}
	return out
}
