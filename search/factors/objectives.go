package factors

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/zflow/zflow/internal/workers"
	"github.com/zflow/zflow/search"
	"github.com/zflow/zflow/search/internal/attn"
	"github.com/zflow/zflow/semantics"
)

// order lists the weight sets (or streams) in joint order.
func order(names []string, jointOrder any) []int {
	first := "text"
	if jointOrder == "image_first" {
		first = "image"
	}
	idx := make([]int, len(names))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		switch {
		case names[a] == first && names[b] != first:
			return -1
		case names[b] == first && names[a] != first:
			return 1
		}
		return 0
	})
	return idx
}

// tables returns cos and sin for the weight sets joined in ord.
func (b *block) ropeTables(ord []int, layout string) (attn.Tables, bool) {
	if layout == attn.None || len(b.tables) == 0 {
		return attn.Tables{}, layout == attn.None
	}
	expand := func(t tableSrc) ([]float64, []float64, int) {
		if t.complex {
			return attn.Complex(t.cos, t.w, layout)
		}
		return f64(t.cos), f64(t.sin), t.w
	}
	total := 0
	for _, s := range b.sets {
		total += s.rows
	}
	// A table shorter than the rows it must cover (its rows counted on
	// an axis other than the one its values fill) is not these rows' table.
	fits := func(c, s []float64, w, rows int) bool { return w > 0 && len(c) >= rows*w && len(s) >= rows*w }
	if len(b.tables) == 1 && b.tables[0].rows == total {
		c, s, w := expand(b.tables[0])
		if !fits(c, s, w, total) {
			return attn.Tables{}, false
		}
		return attn.Tables{Cos: c[:total*w], Sin: s[:total*w], W: w}, true
	}
	if len(b.tables) != len(b.sets) {
		return attn.Tables{}, false
	}
	var t attn.Tables
	for _, i := range ord {
		j := i
		for k, tb := range b.tables {
			if tb.rows == b.sets[i].rows && b.sets[0].rows != b.sets[len(b.sets)-1].rows {
				j = k
			}
		}
		c, s, w := expand(b.tables[j])
		if !fits(c, s, w, b.sets[i].rows) {
			return attn.Tables{}, false
		}
		t.Cos, t.Sin, t.W = append(t.Cos, c[:b.sets[i].rows*w]...), append(t.Sin, s[:b.sets[i].rows*w]...), w
	}
	return t, true
}

func f64(x []float32) []float64 {
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = float64(v)
	}
	return out
}

// scoreAttention: the attention of the captured q, k (after their norms)
// and v, with RoPE, over the weight sets in joint order, against each out
// projection's argument (a parallel block's: the better of its first and
// last q-width columns), at a sample of rows and heads.
func (b *block) scoreAttention(a search.Assignment) (search.Score, error) {
	names := make([]string, len(b.sets))
	in := make([]attn.Set, len(b.sets))
	smp := attn.Sample{Heads: attn.Spread(b.blk.Heads, 4)}
	for i, s := range b.sets {
		names[i] = s.stream
		in[i] = attn.Set{Q: s.q, K: s.k, V: s.v, Rows: s.rows}
		smp.Rows = append(smp.Rows, attn.Spread(s.rows, 32))
	}
	ord := order(names, a["joint_order"])
	layout := fmt.Sprint(a["rope_layout"])
	t, ok := b.ropeTables(ord, layout)
	boundary := b.blk.Roles[b.sets[0].prefix+"out"].Module + "/arg"
	if !ok || t.W > b.blk.HeadDim {
		return search.Score{Err: math.Inf(1), Boundary: boundary, Metric: search.MetricRelRMS}, nil
	}
	scale, _ := a["attention_scale"].(float64)
	p := attn.Params{Heads: b.blk.Heads, KVHeads: b.blk.KVHeads, D: b.blk.HeadDim, Layout: layout, Causal: a["attention_causal"] == true, Scale: scale}
	out := attn.Attend(in, ord, t, p, smp)
	var worst float64
	for i, s := range b.sets {
		w := s.target.width()
		e := attn.Compare(out[i], s.target.v, w, 0, smp.Rows[i], smp.Heads, p.D)
		if w > s.qw {
			e = math.Min(e, attn.Compare(out[i], s.target.v, w, w-s.qw, smp.Rows[i], smp.Heads, p.D))
		}
		worst = math.Max(worst, e)
	}
	return search.Score{Err: worst, Boundary: boundary, Metric: search.MetricRelRMS}, nil
}

// modChunks returns group g's shift, scale and gate vectors (per sample)
// from a modulation role's result under a chunk order.
func (b *block) modChunks(mod semantics.Role, g int, ord any) (shift, scale, gate []float32, err error) {
	t, err := b.cp.roleOut(mod)
	if err != nil {
		return nil, nil, nil, err
	}
	k := t.width() / b.st.Hidden
	names := strings.Split(fmt.Sprint(ord), ",")
	if k%3 != 0 || (g+1)*3 > k || len(names) != 3 {
		return nil, nil, nil, fmt.Errorf("%s makes %d chunks, not groups of 3", mod.Module, k)
	}
	for j, n := range names {
		c := chunk(t, g*3+j, k)
		switch n {
		case "shift":
			shift = c
		case "scale":
			scale = c
		case "gate":
			gate = c
		}
	}
	return shift, scale, gate, nil
}

// sampleRows caps the rows the pointwise scores (modulation, gate, final
// norm, MLP) read: every row where there are few; at real widths that many
// spread over them, which tell candidates apart as well as all rows do.
const sampleRows = 1024

// modulateRows computes x·(1 + scale) + shift (or x·scale + shift) at the
// given rows of x (of its width), the per-sample vectors broadcast over
// each sample's tokens.
func modulateRows(x tensor, rows []int, shift, scale []float32, plusOne bool) []float64 {
	w := x.width()
	per := max(x.tokens(), 1)
	out := make([]float64, 0, len(rows)*w)
	one := 0.0
	if plusOne {
		one = 1
	}
	for _, r := range rows {
		s := (r / per) * w
		if s+w > len(scale) || s+w > len(shift) || (r+1)*w > len(x.v) {
			return nil // vectors that do not cover the rows: no modulation of them (scored infinite)
		}
		for c := range w {
			out = append(out, float64(x.v[r*w+c])*(one+float64(scale[s+c]))+float64(shift[s+c]))
		}
	}
	return out
}

// rowsOf gathers the given rows of w values each.
func rowsOf(v []float32, w int, rows []int) []float32 {
	out := make([]float32, 0, len(rows)*w)
	for _, r := range rows {
		if (r+1)*w > len(v) {
			return nil
		}
		out = append(out, v[r*w:(r+1)*w]...)
	}
	return out
}

// normNames are the modulated norms' roles of the block's recipe: before
// the attention and before the MLP ("" where the first feeds both, or the
// block has no modulation).
func (b *block) normNames() (string, string) {
	if !b.rc.HasRole("modulation") {
		return "", ""
	}
	n1, n2 := b.rc.FeedingNorm("q"), b.rc.FeedingNorm("mlp_in")
	if n2 == n1 {
		n2 = ""
	}
	return n1, n2
}

// scoreModulation: each weight set's norm result, modulated by its
// modulation's chunks, against q's argument (group 0) and mlp_in's
// argument (group 1).
func (b *block) scoreModulation(a search.Assignment) (search.Score, error) {
	var s sums
	n1, n2 := b.normNames()
	boundary := ""
	for _, st := range b.sets {
		mod := b.blk.Roles[st.prefix+"modulation"]
		for g, pair := range [][2]string{{n1, "q"}, {n2, "mlp_in"}} {
			nr, ok := b.role(st.prefix + pair[0])
			if pair[0] == "" || !ok {
				continue
			}
			x, err := b.cp.roleOut(nr)
			if err != nil {
				return search.Score{}, err
			}
			target, err := b.cp.arg(b.blk.Roles[st.prefix+pair[1]].Module)
			if err != nil {
				return search.Score{}, err
			}
			shift, scale, _, err := b.modChunks(mod, g, a["modulation_order"])
			if err != nil {
				return search.Score{}, err
			}
			rows := attn.Spread(x.rows(), sampleRows)
			s.add(modulateRows(x, rows, shift, scale, a["modulation_plus_one"] == true), rowsOf(target.v, x.width(), rows), target.f)
			if boundary == "" {
				boundary = b.blk.Roles[st.prefix+pair[1]].Module + "/arg"
			}
		}
	}
	return s.score(boundary), nil
}

// scoreModAct: act(cond) against each modulation linear's argument.
func (b *block) scoreModAct(a search.Assignment) (search.Score, error) {
	var s sums
	bd := b.blk.Boundary
	if bd == nil || bd.Inputs["cond"] == "" {
		return search.Score{Err: math.Inf(1)}, nil
	}
	cond, err := b.cp.port(bd.Module, bd.Inputs["cond"])
	if err != nil {
		return search.Score{}, err
	}
	boundary := ""
	for _, st := range b.sets {
		mod := b.blk.Roles[st.prefix+"modulation"]
		target, err := b.cp.arg(mod.Module)
		if err != nil {
			return search.Score{}, err
		}
		ours := make([]float64, len(cond.v))
		fn := actFunc(a["modulation_act"])
		for i, x := range cond.v {
			ours[i] = float64(fn(x))
		}
		s.add(ours, target.v, target.f)
		boundary = mod.Module + "/arg"
	}
	return s.score(boundary), nil
}

// gateFn applies a gate function.
func gateFn(name any, x float32) float64 {
	switch name {
	case "tanh":
		return math.Tanh(float64(x))
	case "sigmoid":
		return 1 / (1 + math.Exp(-float64(x)))
	}
	return float64(x)
}

// streamsIn reads the block's rows entering (or leaving) by stream, joined
// in joint order when the boundary names streams rather than "joint".
func (b *block) joined(ports map[string]string, jo any) (tensor, error) {
	bd := b.blk.Boundary
	if p, ok := ports["joint"]; ok {
		return b.cp.port(bd.Module, p)
	}
	names := slices.Clone(b.blk.Streams)
	var out tensor
	for _, i := range order(names, jo) {
		p, ok := ports[names[i]]
		if !ok {
			return tensor{}, fmt.Errorf("%s has no %s port", bd.Module, names[i])
		}
		t, err := b.cp.port(bd.Module, p)
		if err != nil {
			return tensor{}, err
		}
		if out.v == nil {
			out = tensor{f: t.f, shape: slices.Clone(t.shape), dt: t.dt}
			out.shape[len(out.shape)-2] = 0
		}
		out.v = append(out.v, t.v[:t.tokens()*t.width()]...)
		out.shape[len(out.shape)-2] += t.tokens()
	}
	return out, nil
}

// scoreGate: x + g(gate)·out(attention) against the rows after the
// attention's residual: norm2's argument, or (parallel) the block's result.
func (b *block) scoreGate(a search.Assignment) (search.Score, error) {
	var s sums
	bd := b.blk.Boundary
	if bd == nil {
		return search.Score{Err: math.Inf(1)}, nil
	}
	_, n2 := b.normNames()
	boundary := ""
	for _, st := range b.sets {
		var x, target tensor
		var err error
		if len(b.sets) == 2 {
			if x, err = b.cp.port(bd.Module, bd.Inputs[st.stream]); err != nil {
				return search.Score{}, err
			}
		} else if x, err = b.joined(bd.Inputs, a["joint_order"]); err != nil {
			return search.Score{}, err
		}
		if nr, ok := b.role(st.prefix + n2); n2 != "" && ok {
			if target, err = b.cp.arg(nr.Module); err != nil {
				return search.Score{}, err
			}
			boundary = nr.Module + "/arg"
		} else if b.rc.FusedOut("out") {
			if target, err = b.joined(bd.Outputs, a["joint_order"]); err != nil {
				return search.Score{}, err
			}
			boundary = bd.Module + "/out"
		} else {
			return search.Score{Err: math.Inf(1)}, nil
		}
		o, err := b.cp.roleOut(b.blk.Roles[st.prefix+"out"])
		if err != nil {
			return search.Score{}, err
		}
		_, _, gate, err := b.modChunks(b.blk.Roles[st.prefix+"modulation"], 0, a["modulation_order"])
		if err != nil {
			return search.Score{}, err
		}
		w := x.width()
		n := min(len(x.v), len(o.v))
		if len(target.v) < n {
			return search.Score{Err: math.Inf(1), Boundary: boundary, Metric: search.MetricRelRMS}, nil
		}
		rows := attn.Spread(n/max(w, 1), sampleRows)
		ours := make([]float64, 0, len(rows)*w)
		for _, r := range rows {
			for i := r * w; i < (r+1)*w; i++ {
				ours = append(ours, float64(x.v[i])+gateFn(a["gate_fn"], gate[i%w])*float64(o.v[i]))
			}
		}
		s.add(ours, rowsOf(target.v, w, rows), target.f)
	}
	return s.score(boundary), nil
}

// scoreMLP: act(mlp_in) (or act(mlp_gate)·mlp_in) against the MLP's output
// projection's argument (a parallel block's out: its MLP columns).
func (b *block) scoreMLP(a search.Assignment) (search.Score, error) {
	var s sums
	boundary := ""
	for _, st := range b.sets {
		in, err := b.cp.roleOut(b.blk.Roles[st.prefix+"mlp_in"])
		if err != nil {
			return search.Score{}, err
		}
		var gate tensor
		if g, ok := b.role(st.prefix + "mlp_gate"); ok {
			if gate, err = b.cp.roleOut(g); err != nil {
				return search.Score{}, err
			}
		}
		outRole := st.prefix + "mlp_out"
		if b.rc.FusedOut("out") {
			outRole = "out"
		}
		target, err := b.cp.arg(b.blk.Roles[outRole].Module)
		if err != nil {
			return search.Score{}, err
		}
		boundary = b.blk.Roles[outRole].Module + "/arg"
		m := in.width()
		col := 0
		if b.rc.FusedOut("out") && a["parallel_order"] == "attention_first" {
			col = target.width() - m
		}
		rows := attn.Spread(in.rows(), sampleRows)
		ref := make([]float32, len(rows)*m)
		ours := make([]float64, len(rows)*m)
		fn := actFunc(a["mlp_act"])
		glu := gate.v != nil && a["mlp_glu"] == true
		// The activations on every core (a real-width MLP's sample is
		// millions of tanh or erf); the sums after, in order.
		workers.Split(len(rows), func(lo, hi int) {
			for k := lo; k < hi; k++ {
				r, o := rows[k], k*m
				copy(ref[o:o+m], target.v[r*target.width()+col:r*target.width()+col+m])
				for j, i := 0, r*m; j < m; j, i = j+1, i+1 {
					if glu {
						ours[o+j] = float64(target.f.Round(fn(gate.v[i]))) * float64(in.v[i])
					} else {
						ours[o+j] = float64(fn(in.v[i]))
					}
				}
			}
		})
		s.add(ours, ref, target.f)
	}
	return s.score(boundary), nil
}

// scoreQKNorm: RMS or layer normalisation of each per-head norm's argument
// over the head width, times its weight (eps 1e-6), against its result.
func (b *block) scoreQKNorm(a search.Assignment) (search.Score, error) {
	var s sums
	boundary := ""
	for _, st := range b.sets {
		for _, name := range []string{"q_norm", "k_norm"} {
			r, ok := b.role(st.prefix + name)
			if !ok {
				continue
			}
			x, err := b.cp.arg(r.Module)
			if err != nil {
				return search.Score{}, err
			}
			y, err := b.cp.roleOut(r)
			if err != nil {
				return search.Score{}, err
			}
			var gamma, beta []float32
			if r.Weight != "" {
				if gamma, err = b.cp.param(r.Weight); err != nil {
					return search.Score{}, err
				}
			}
			if r.Bias != "" {
				if beta, err = b.cp.param(r.Bias); err != nil {
					return search.Score{}, err
				}
			}
			s.add(norm(x, a["qk_norm"] == "layer", 1e-6, gamma, beta), y.v, y.f)
			boundary = r.Module + "/" + r.OutPort()
		}
	}
	return s.score(boundary), nil
}

// norm normalises rows of x (layer or RMS), then ·γ + β.
func norm(x tensor, layer bool, eps float64, gamma, beta []float32) []float64 {
	w := x.width()
	out := make([]float64, len(x.v))
	for r := range x.rows() {
		row := x.v[r*w : (r+1)*w]
		var mu, ss float64
		if layer {
			for _, v := range row {
				mu += float64(v)
			}
			mu /= float64(w)
		}
		for _, v := range row {
			ss += (float64(v) - mu) * (float64(v) - mu)
		}
		inv := 1 / math.Sqrt(ss/float64(w)+eps)
		for c, v := range row {
			y := (float64(v) - mu) * inv
			if gamma != nil {
				y *= float64(gamma[c])
			}
			if beta != nil {
				y += float64(beta[c])
			}
			out[r*w+c] = y
		}
	}
	return out
}
