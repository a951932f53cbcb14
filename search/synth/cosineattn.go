package synth

import (
	"fmt"
	"math"
	"slices"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/precision"
	"github.com/zflow/zflow/semantics"
)

// cosineAttention explains t [B, S, H·d] as cosine attention: q and k each
// L2-normalised over every head's d elements, q then times a per-head
// temperature made from a parameter of H entries (exp(p), or p as it is),
// the scores at scale 1 (so the temperature alone sets them), plus what
// the scope adds to scores: its masks, and a position bias made from a
// table it computed (a position MLP's output) gathered at the relative
// offsets of the S rows read as a window (offsetTableBiases), as it is
// or as a·σ(x) with a fitted. Also read across: each head's channels
// attending to each other over the S tokens (cross-covariance attention,
// q and k normalised over the tokens), the result laid back. q, k and v
// are three projections of t's shape or the pieces of a fused one. One
// of glue's late forms: the plain forms have no normalisation inside the
// product and fail first.
func (s *synth) cosineAttention(t *val, sc *scope) *val {
	if t.reshapedFrom || len(t.shape) != 3 {
		return nil
	}
	var ops []*val
	for _, v := range sc.vals {
		if sc.own[v] && !v.opaque && !v.integral() && slices.Equal(v.shape, t.shape) && v.fit != nil && v.fit.kind == "linear" {
			ops = append(ops, v)
		}
	}
	var triples [][3]*val
	triples = append(triples, distinctTriples(ops, nil)...)
	_, fused := s.allOperands(sc, t)
	for _, f := range fused {
		if slices.Equal(f[0].shape, t.shape) && slices.Equal(f[1].shape, t.shape) && slices.Equal(f[2].shape, t.shape) {
			triples = append(triples, f)
		}
	}
	if len(triples) == 0 {
		return nil
	}
	width, rows := t.shape[2], t.shape[1]
	var best *attnChoice
	var evidence []semantics.Candidate
	// each temperature form's best error, for the factor's margin
	formBest := map[string]float64{}
	var bestForm string
	// consider scores ch with the score bias given (nil: none), its
	// result laid out by post where given, and keeps the best
	consider := func(ch attnChoice, bias *val, post func(*val) *val) float64 {
		e := &expr{op: program.OpAttention, attrs: program.Attrs{Attention: ch.params}, args: []*val{ch.q, ch.k, ch.v, nil, bias, nil}, out: t.format, label: ch.label}
		var v *val
		sc := math.Inf(1)
		if post == nil {
			v, sc = s.ev.score(e, t)
		} else if r, err := s.ev.run(e); err == nil {
			if v = post(r); v != nil {
				sc = relRMS(t.format, v.data, t.data)
			}
		}
		evidence = append(evidence, semantics.Candidate{Value: ch.label, Score: finite(sc)})
		if f, ok := formBest[ch.temperature]; !ok || sc < f {
			formBest[ch.temperature] = sc
		}
		if v != nil && (best == nil || sc < best.score) {
			ch.score, ch.result, ch.bias = sc, v, bias
			best, bestForm = &ch, ch.temperature
		}
		return sc
	}
	// the operands and temperatures first, each under the scope's masks
	// alone; the position biases then on each, best first (a bias can
	// move the scores more than the operands do, so the ranking without
	// it does not pick the operands)
	type based struct {
		ch    attnChoice
		masks []*val
		score float64
	}
	var base []based
	for _, temp := range sc.vals {
		heads := temp.numel()
		if sc.own[temp] || temp.opaque || heads < 1 || width%heads != 0 || width/heads < minHeadDim || !singleAxis(temp) {
			continue
		}
		d := width / heads
		for _, tf := range []struct {
			act         exec.ActKind
			label, form string
		}{{exec.ActExp, "exp(p)", "exp"}, {exec.ActIdentity, "p", "param"}} {
			tau := s.reshape(temp, []int{heads, 1})
			if tf.act != exec.ActIdentity {
				tau = s.derive(&expr{op: program.OpAct, attrs: program.Attrs{Act: tf.act}, args: []*val{tau}, out: precision.F32, label: "the heads' temperatures"})
			}
			if tau == nil {
				continue
			}
			for _, tr := range triples {
				q, k, v := tr[0], tr[1], tr[2]
				label := fmt.Sprintf("heads=%d cosine, temperature %s of %s", heads, tf.label, temp.origin)
				if qn, kn := s.headsL2(q, heads, d, tau), s.headsL2(k, heads, d, nil); qn != nil && kn != nil {
					ch := attnChoice{q: qn, k: kn, v: v, headDim: d, params: exec.AttentionParams{Heads: heads, KVHeads: heads, Scale: 1},
						label: label, rows: -1, temperature: tf.form}
					b := based{ch: ch, masks: []*val{nil}, score: math.Inf(1)}
					for _, m := range s.scoreBiases(sc, q, k) {
						b.masks = append(b.masks, s.asScoreBias(m, t.shape[0]))
					}
					for _, m := range b.masks {
						c := ch
						if m != nil {
							c.label += " +mask"
						}
						b.score = min(b.score, consider(c, m, nil))
					}
					base = append(base, b)
				}
				// across: the channels of each head as its rows
				qc, kc, vc := s.channelRows(q, heads, d), s.channelRows(k, heads, d), s.channelRows(v, heads, d)
				if qn, kn := s.headsL2(qc, heads, rows, tau), s.headsL2(kc, heads, rows, nil); qn != nil && kn != nil && vc != nil {
					ch := attnChoice{q: qn, k: kn, v: vc, headDim: rows, params: exec.AttentionParams{Heads: heads, KVHeads: heads, Scale: 1},
						label: label + " across the channels", rows: -1, temperature: tf.form}
					consider(ch, nil, func(r *val) *val { return s.channelRowsBack(r, heads, d, rows) })
				}
			}
		}
	}
	slices.SortStableFunc(base, func(a, b based) int { return cmpFloat(a.score, b.score) })
	for _, b := range base {
		if best != nil && best.score <= tolerance(t.format) {
			break
		}
		for _, pb := range s.offsetTableBiases(sc, b.ch.params.Heads, rows) {
			for _, m := range b.masks {
				s.fitBiasScale(b.ch, pb, m, t, func(ch attnChoice, bias *val) { consider(ch, bias, nil) })
			}
		}
	}
	if best == nil || best.score > tolerance(t.format) {
		return nil
	}
	best.result.fit = &leafFit{kind: "attention", candidates: evidence}
	s.attn = append(s.attn, attnRecord{choice: *best, scope: sc.module, boundary: t.origin, candidates: evidence})
	var forms []semantics.Candidate
	for f, sc := range formBest {
		forms = append(forms, semantics.Candidate{Value: f, Score: finite(sc)})
	}
	slices.SortFunc(forms, func(a, b semantics.Candidate) int { return cmpFloat(a.Score, b.Score) })
	s.temperatures = append(s.temperatures, temperatureRecord{scope: sc.module, boundary: t.origin, form: bestForm, candidates: forms})
	return best.result
}

// temperatureRecord is how a cosine attention's per-head temperature was
// made from its parameter, with each form's best error.
type temperatureRecord struct {
	scope, boundary, form string
	candidates            []semantics.Candidate // best first
}

func (r temperatureRecord) factor() semantics.Factor {
	margin := math.Inf(1)
	if len(r.candidates) > 1 && r.candidates[0].Score > 0 {
		margin = r.candidates[1].Score / r.candidates[0].Score
	}
	return semantics.Factor{Name: "attention_temperature", Scope: r.scope, Value: r.form, Margin: semantics.Margin(margin), Decisive: margin >= decisiveMargin,
		Candidates: r.candidates, Evidence: semantics.Evidence{Boundary: r.boundary, Metric: "rel_rms",
			Note: "cosine attention: q and k L2-normalised per head, q times the head's temperature made from a parameter, the scores not scaled further"}}
}

// singleAxis reports whether v holds its entries along one axis (every
// other axis of size 1): a per-head parameter [H, 1, 1].
func singleAxis(v *val) bool {
	n := 0
	for _, x := range v.shape {
		if x > 1 {
			n++
		}
	}
	return n <= 1
}

// asScoreBias lays a [B, Sq, Sk] bias out as [B, 1, Sq, Sk] (one for
// every head); other shapes as they are.
func (s *synth) asScoreBias(m *val, batch int) *val {
	if len(m.shape) == 3 && m.shape[0] == batch {
		return s.reshape(m, []int{batch, 1, m.shape[1], m.shape[2]})
	}
	return m
}

// channelRows lays x [B, S, H·d] out as each head's channels on the
// rows, [B, d, H·S] (element (c, h·S + s) is x's (s, h·d + c)); nil
// where x is nil or not of that shape.
func (s *synth) channelRows(x *val, heads, d int) *val {
	if x == nil || len(x.shape) != 3 || x.shape[2] != heads*d {
		return nil
	}
	b, n := x.shape[0], x.shape[1]
	p := s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: []int{0, 3, 2, 1}}, args: []*val{s.reshape(x, []int{b, n, heads, d})}, out: x.format, label: "channels as rows"})
	return s.reshape(p, []int{b, d, heads * n})
}

// channelRowsBack is channelRows undone: r [B, d, H·S] → [B, S, H·d].
func (s *synth) channelRowsBack(r *val, heads, d, n int) *val {
	if r == nil {
		return nil
	}
	b := r.shape[0]
	p := s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: []int{0, 3, 2, 1}}, args: []*val{s.reshape(r, []int{b, d, heads, n})}, out: r.format, label: "channels back"})
	return s.reshape(p, []int{b, n, heads * d})
}

// headsL2 is x [B, S, H·d] with each head's d elements divided by their
// L2 norm (F.normalize: an RMS norm without ε, over √d), times tau [H, 1]
// where given.
func (s *synth) headsL2(x *val, heads, d int, tau *val) *val {
	b, n := x.shape[0], x.shape[1]
	xh := s.reshape(x, []int{b, n, heads, d})
	if xh == nil {
		return nil
	}
	nrm := s.derive(&expr{op: program.OpNorm, attrs: program.Attrs{Norm: exec.NormParams{Kind: exec.NormRMS, Eps: float32(1e-24 / float64(d))}}, args: []*val{xh, nil, nil}, out: precision.F32, label: "x / √(mean x²)"})
	out := s.derive(&expr{op: program.OpMul, args: []*val{nrm, s.constant(1 / math.Sqrt(float64(d)))}, out: x.format, label: "x / ‖x‖ per head"})
	if tau != nil && out != nil {
		out = s.derive(&expr{op: program.OpMul, args: []*val{out, tau}, out: x.format, label: "times the head's temperature"})
	}
	return s.reshape(out, x.shape)
}

// fitBiasScale considers ch with the position bias pb as it is and as
// a·σ(pb), a fitted on the attention's error and snapped to the simplest
// number that does as well, each plus the mask m (nil: none).
func (s *synth) fitBiasScale(ch attnChoice, pb, m *val, t *val, consider func(attnChoice, *val)) {
	plus := func(b *val) *val {
		if m == nil || b == nil {
			return b
		}
		return s.derive(&expr{op: program.OpAdd, args: []*val{b, m}, out: b.format, label: "position bias plus mask"})
	}
	label := ch.label + " +position bias"
	if m != nil {
		label += " +mask"
	}
	c := ch
	c.label = label
	consider(c, plus(pb))
	sig := s.derive(&expr{op: program.OpAct, attrs: program.Attrs{Act: exec.ActSigmoid}, args: []*val{pb}, out: pb.format, label: "σ of the position bias"})
	if sig == nil {
		return
	}
	scaled := func(a float64) *val {
		return plus(s.derive(&expr{op: program.OpMul, args: []*val{sig, s.constant(a)}, out: pb.format, label: "a·σ of the position bias"}))
	}
	err := func(a float64) float64 {
		b := scaled(a)
		if b == nil {
			return math.Inf(1)
		}
		e := &expr{op: program.OpAttention, attrs: program.Attrs{Attention: ch.params}, args: []*val{ch.q, ch.k, ch.v, nil, b, nil}, out: t.format}
		_, sc := s.ev.score(e, t)
		return sc
	}
	a := s.searchParam(err, 0.25, 256)
	c.label = fmt.Sprintf("%s (%g·σ)", label, a)
	consider(c, scaled(a))
}

// offsetTableBiases are score biases [1, H, S, S] made from the scope's
// tables (computed or parameters) of H columns over the relative offsets
// of a window of S cells: [1, 2h−1, 2w−1, H] (or [(2g−1)², H], a square
// window; [2S−1, H], a line) gathered at each query and key's offset,
// query minus key or key minus query, row-major (Swin's relative position
// index, a constant of the window's shape). A square table with three
// rows more serves a window after one leading row (a class token: BEiT's
// index, classOffsets). A table [S², H] is one entry per query and key,
// read in place.
func (s *synth) offsetTableBiases(sc *scope, heads, rows int) []*val {
	var out []*val
	for _, tb := range sc.vals {
		n := len(tb.shape)
		if !(sc.own[tb] || tb.param) || tb.opaque || tb.integral() || n < 2 || tb.shape[n-1] != heads {
			continue
		}
		l := tb.numel() / heads
		var win []int // the window's sizes, row-major
		class := false
		switch {
		case n >= 3 && tb.shape[n-3]%2 == 1 && tb.shape[n-2]%2 == 1 && (tb.shape[n-3]+1)/2*((tb.shape[n-2]+1)/2) == rows && l == tb.shape[n-3]*tb.shape[n-2]:
			win = []int{(tb.shape[n-3] + 1) / 2, (tb.shape[n-2] + 1) / 2}
		case l == 2*rows-1:
			win = []int{rows}
		default:
			if g := int(math.Round(math.Sqrt(float64(rows)))); g*g == rows && l == (2*g-1)*(2*g-1) {
				win = []int{g, g}
			} else if g := int(math.Round(math.Sqrt(float64(rows - 1)))); rows > 1 && g*g == rows-1 && l == (2*g-1)*(2*g-1)+3 {
				win, class = []int{g, g}, true
			}
		}
		if win == nil {
			if l == rows*rows && rows > 1 && n == 2 {
				// one entry per query and key already (a position MLP run
				// on every pair's coordinates: SwinV2-CR's meta network)
				pairs := s.reshape(tb, []int{l, heads})
				p := s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: []int{1, 0}}, args: []*val{pairs}, out: tb.format, label: "heads first"})
				if b := s.reshape(p, []int{1, heads, rows, rows}); b != nil {
					out = append(out, b)
				}
			}
			continue
		}
		table := s.reshape(tb, []int{l, heads})
		for _, keyFirst := range []bool{false, true} {
			idx := s.windowOffsets(win, keyFirst)
			if class {
				idx = s.classOffsets(win, keyFirst)
			}
			g := s.derive(&expr{op: program.OpGather, args: []*val{table, idx}, out: tb.format, label: "table rows at the window's relative offsets"})
			g = s.reshape(g, []int{rows, rows, heads})
			if g == nil {
				continue
			}
			p := s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: []int{2, 0, 1}}, args: []*val{g}, out: tb.format, label: "heads first"})
			if b := s.reshape(p, []int{1, heads, rows, rows}); b != nil {
				out = append(out, b)
			}
		}
	}
	return out
}

// classOffsets is windowOffsets for a leading row before the window's
// cells (a class token), the table's three last rows its own: the class
// row's queries read row L−3, its key row L−2, itself L−1 (BEiT's
// relative position index, a constant of the window's shape).
func (s *synth) classOffsets(win []int, keyFirst bool) *val {
	cells := s.windowOffsets(win, keyFirst)
	m := prod(win)
	n := m + 1
	l := 1 // the table's rows: every offset, then the class row's three
	for _, g := range win {
		l *= 2*g - 1
	}
	l += 3
	ids := make([]float32, n*n)
	for i := range n {
		for j := range n {
			switch {
			case i == 0 && j == 0:
				ids[0] = float32(l - 1)
			case i == 0:
				ids[j] = float32(l - 3)
			case j == 0:
				ids[i*n] = float32(l - 2)
			default:
				ids[i*n+j] = cells.data[(i-1)*m+j-1]
			}
		}
	}
	name := fmt.Sprintf("classoffsets%v", win)
	if keyFirst {
		name += "k"
	}
	v := s.relConst(name, []int{n * n}, ids, fmt.Sprintf("each query and key's relative offset on the %v window after a leading class row (its query, key and own entries the table's three last rows), %s, as a row of the offsets' table (made from the window's shape)", win, map[bool]string{false: "query minus key", true: "key minus query"}[keyFirst]))
	v.intType = true
	return v
}

// windowOffsets is the row of the relative-offset table each (query,
// key) pair of a window's cells reads, [S·S]: the cells row-major, the
// offset on each axis shifted to start at 0 and the axes' offsets
// flattened row-major (query minus key; keyFirst: key minus query).
func (s *synth) windowOffsets(win []int, keyFirst bool) *val {
	rows := prod(win)
	ids := make([]float32, rows*rows)
	stride := rowMajorStrides(win)
	for i := range rows {
		for j := range rows {
			at := 0
			for a, g := range win {
				ci, cj := i/stride[a]%g, j/stride[a]%g
				off := ci - cj
				if keyFirst {
					off = -off
				}
				at = at*(2*g-1) + off + g - 1
			}
			ids[i*rows+j] = float32(at)
		}
	}
	name := fmt.Sprintf("windowoffsets%v", win)
	if keyFirst {
		name += "k"
	}
	v := s.relConst(name, []int{rows * rows}, ids, fmt.Sprintf("each query and key's relative offset on the %v window, %s, as a row of the offsets' table (made from the window's shape)", win, map[bool]string{false: "query minus key", true: "key minus query"}[keyFirst]))
	v.intType = true
	return v
}

// offsetBiasAdded explains t [.., H, S, S] (attention scores) as a value
// of its shape plus a relative-position bias made from a table of the
// scope (offsetTableBiases): a module that holds the table and adds its
// gathered bias to the scores it is handed (GCViT's RelPosBias), apart
// from the attention that reads them.
func (s *synth) offsetBiasAdded(t *val, sc *scope, vals []*val) *val {
	n := len(t.shape)
	if n < 3 || t.shape[n-1] != t.shape[n-2] {
		return nil
	}
	vs := sameShape(t, vals)
	if len(vs) == 0 {
		return nil
	}
	var cands []*expr
	for _, b := range s.offsetTableBiases(sc, t.shape[n-3], t.shape[n-1]) {
		if n > 4 {
			continue
		}
		if n == 3 {
			b = s.reshape(b, t.shape[:]) // one sample: [H, S, S]
			if b == nil {
				continue
			}
		}
		for _, v := range vs {
			cands = append(cands, &expr{op: program.OpAdd, args: []*val{v, b}, out: t.format, label: "relative position bias added"})
		}
	}
	if len(cands) == 0 {
		return nil
	}
	v, _ := s.best(t, cands)
	return v
}
