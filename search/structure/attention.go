package structure

import (
	"fmt"
	"github.com/zflow/zflow/search/internal/attn"
	"github.com/zflow/zflow/trace"
	"math"
	"slices"
	"sort"
)

// wset is one weight set of a block: the projections of one set of rows
// (q, k, v, and in a parallel block the MLP's input projections).
type wset struct {
	group   []linearInfo
	in      port
	rows    int
	stream  string          // image, text or joint
	norms   map[*node]*node // projection → the per-head norm of its result
	q, k, v linearInfo      // decided by values
}

// triple is one assignment of a weight set's projections to q, k, v.
type triple struct{ q, k, v linearInfo }

// attnConfig is one candidate of the teacher-forced attention.
type attnConfig struct {
	sets   []triple
	d      int    // head width
	layout string // RoPE layout: none, interleaved, half
	order  []int  // the weight sets' rows in the joint sequence
	causal bool
}

// attnResult is the best candidate, its error, and the best error of any
// candidate with another q/k/v assignment or head width (the margin of
// the roles).
type attnResult struct {
	cfg      attnConfig
	err      float64
	runnerUp float64
	tried    int
	// the attention output at the sampled rows and heads, per weight set
	// (rows of that set only), and which rows and heads were sampled.
	out   [][]float64
	qsel  [][]int // per weight set: its own row indices sampled
	hsel  []int
	heads int
	kvh   int
}

// headValues is li's result as the attention reads it, [rows, width]:
// after the per-head norm when there is one (its result is reordered back
// from [heads, rows, head] when that is how the norm saw it).
func (d *discoverer) headValues(li linearInfo, norm *node) ([]float32, int, bool) {
	y := d.v.floats(li.out.key)
	if norm == nil {
		return y, 0, y != nil
	}
	in, out, ok := norm.shapePreserving()
	if !ok {
		return nil, 0, false
	}
	dh := in.width()
	z := d.v.floats(out.key)
	if d.v.same(in, li.out) {
		return z, dh, z != nil
	}
	// [B, H, S, D] → [B, S, H·D], checked on the argument first.
	if len(in.shape) < 3 {
		return nil, 0, false
	}
	s := in.shape[len(in.shape)-2]
	h := in.shape[len(in.shape)-3]
	w := li.outW
	if h*dh != w {
		return nil, 0, false
	}
	perm := func(src []float32) []float32 {
		dst := make([]float32, len(src))
		for base := 0; base+h*s*dh <= len(src); base += h * s * dh {
			for hh := range h {
				for ss := range s {
					copy(dst[base+ss*w+hh*dh:base+ss*w+(hh+1)*dh], src[base+(hh*s+ss)*dh:base+(hh*s+ss+1)*dh])
				}
			}
		}
		return dst
	}
	if !slices.Equal(perm(d.v.floats(in.key)), y) {
		return nil, 0, false
	}
	return perm(z), dh, true
}

// triples lists a weight set's candidate assignments: q and k are the
// projections that have per-head norms when two do; k and v have one
// width, which divides q's.
func triples(ws *wset) []triple {
	var normed, plain []linearInfo
	for _, li := range ws.group {
		if ws.norms[li.n] != nil {
			normed = append(normed, li)
		} else {
			plain = append(plain, li)
		}
	}
	var out []triple
	if len(normed) == 2 {
		for i := range 2 {
			q, k := normed[i], normed[1-i]
			for _, v := range plain {
				if v.outW == k.outW && q.outW%k.outW == 0 {
					out = append(out, triple{q, k, v})
				}
			}
		}
		return out
	}
	for _, q := range ws.group {
		for _, k := range ws.group {
			for _, v := range ws.group {
				if q.n == k.n || q.n == v.n || k.n == v.n || k.outW != v.outW || q.outW%k.outW != 0 {
					continue
				}
				if ws.norms[q.n] != nil || ws.norms[k.n] != nil || ws.norms[v.n] != nil {
					continue
				}
				out = append(out, triple{q, k, v})
			}
		}
	}
	return out
}

// headWidths lists the head widths to try: a per-head norm's width, else
// the even divisors ≥ 8 of both widths that hold the RoPE table's rotary
// width.
func (d *discoverer) headWidths(sets []triple, norms []map[*node]*node) []int {
	for i, t := range sets {
		if n := norms[i][t.q.n]; n != nil {
			in, _, _ := n.shapePreserving()
			return []int{in.width()}
		}
	}
	g := 0
	for _, t := range sets {
		g = gcd(g, gcd(t.q.outW, t.k.outW))
	}
	rot := d.rotaryWidth()
	var out []int
	for dh := 8; dh <= g; dh += 2 {
		if g%dh == 0 && dh >= rot {
			out = append(out, dh)
		}
	}
	return out
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// rotaryWidth is the number of channels a head rotates, from the tables.
func (d *discoverer) rotaryWidth() int {
	if len(d.tables) == 0 {
		return 0
	}
	if d.tables[0].complex {
		return 2 * d.tables[0].cos.width()
	}
	return d.tables[0].cos.width()
}

// ropeRows returns cos and sin [joint rows, rotary] for the weight sets
// joined in order under a layout (complex tables expand per layout; real
// ones are used as captured).
func (d *discoverer) ropeRows(sets []*wset, order []int, layout string) (cos, sin []float64, w int, ok bool) {
	if layout == attn.None {
		return nil, nil, 0, true
	}
	total := 0
	for _, s := range sets {
		total += s.rows
	}
	expand := func(t table) (c, s []float64, w int) {
		if !t.complex {
			return f64(d.v.floats(t.cos.key)), f64(d.v.floats(t.sin.key)), t.cos.width()
		}
		return attn.Complex(d.v.floats(t.cos.key), t.cos.width(), layout)
	}
	if len(d.tables) == 1 && d.tables[0].rows() == total {
		c, s, w := expand(d.tables[0])
		return c, s, w, len(c) == total*w
	}
	if len(d.tables) != len(sets) {
		return nil, nil, 0, false
	}
	// one table per weight set: by rows, else in port order
	assign := make([]int, len(sets))
	for i, s := range sets {
		assign[i] = i
		for j, t := range d.tables {
			if t.rows() == s.rows && (len(sets) < 2 || sets[0].rows != sets[1].rows) {
				assign[i] = j
			}
		}
	}
	for _, i := range order {
		c, s, tw := expand(d.tables[assign[i]])
		if len(c) != sets[i].rows*tw {
			return nil, nil, 0, false
		}
		cos, sin, w = append(cos, c...), append(sin, s...), tw
	}
	return cos, sin, w, true
}

func f64(x []float32) []float64 { return widen(x) }

// attend computes the attention of the weight sets joined in cfg.order at
// the sampled rows (per weight set, its own row indices) and heads:
// out[set] is [len(qsel[set]) rows, len(hsel) heads · d].
func (d *discoverer) attend(sets []*wset, cfg attnConfig, vals [][3][]float32, qsel [][]int, hsel []int) ([][]float64, bool) {
	dh := cfg.d
	t0 := cfg.sets[0]
	cos, sin, w, ok := d.ropeRows(sets, cfg.order, cfg.layout)
	if !ok || w > dh {
		return nil, false
	}
	in := make([]attn.Set, len(sets))
	for i, s := range sets {
		q, k := cfg.sets[i].q.outW, cfg.sets[i].k.outW
		// every set's heads as wide as the first's, its values whole (a
		// cross-attention's keys have other rows: not a joint attention)
		if q != t0.q.outW || k != t0.k.outW || k < dh || len(vals[i][0]) < s.rows*q || len(vals[i][1]) < s.rows*k || len(vals[i][2]) < s.rows*k {
			return nil, false
		}
		in[i] = attn.Set{Q: vals[i][0][:s.rows*cfg.sets[i].q.outW], K: vals[i][1][:s.rows*cfg.sets[i].k.outW], V: vals[i][2][:s.rows*cfg.sets[i].k.outW], Rows: s.rows}
	}
	p := attn.Params{Heads: t0.q.outW / dh, KVHeads: t0.k.outW / dh, D: dh, Layout: cfg.layout, Causal: cfg.causal}
	return attn.Attend(in, cfg.order, attn.Tables{Cos: cos, Sin: sin, W: w}, p, attn.Sample{Rows: qsel, Heads: hsel}), true
}

// target is a captured tensor that may hold a weight set's attention
// output: a port of the block's rows of q's width, or the first or last
// q-width columns of a wider linear argument.
type target struct {
	p      port
	col    int // first column
	n      *node
	linear bool
}

func (d *discoverer) targets(b *node, ws *wset, qw int) []target {
	var out []target
	seen := map[uint64]bool{}
	for _, n := range b.subtree() {
		_, isLinear := d.linears[n]
		for _, p := range append(slices.Clone(n.ins), n.outs...) {
			if !p.float() || tokensOf(p) != ws.rows || p.rows() != ws.in.rows() {
				continue
			}
			isArg := !trace.IsResult(p.name)
			if p.width() == qw {
				h := d.v.bytesHash(p.key)
				if !seen[h] || (isLinear && isArg) {
					seen[h] = true
					out = append(out, target{p: p, n: n, linear: isLinear && isArg})
				}
			} else if p.width() > qw && isLinear && isArg {
				out = append(out, target{p: p, col: 0, n: n, linear: true}, target{p: p, col: p.width() - qw, n: n, linear: true})
			}
		}
	}
	return out
}

// compareTarget is the rel-RMS of ours (sampled rows and heads) against
// the target's values there.
func (d *discoverer) compareTarget(t target, ours []float64, rowsSel, hsel []int, dh int) float64 {
	x := d.v.floats(t.p.key)
	if x == nil {
		return math.Inf(1)
	}
	return attn.Compare(ours, x, t.p.width(), t.col, rowsSel, hsel, dh)
}

// scoreAttention decides each weight set's q, k and v, the head width,
// and (as evidence for the factor search) the RoPE layout, the joint
// order and causality: every candidate is a teacher-forced attention on
// the captured projections (after their captured per-head norms) against
// the captured tensors of the block, at a sample of rows and heads.
func (d *discoverer) scoreAttention(b *node, sets []*wset) (attnResult, error) {
	var perSet [][]triple
	for _, s := range sets {
		ts := triples(s)
		if len(ts) == 0 {
			return attnResult{}, fmt.Errorf("weight set of %d projections admits no q/k/v assignment", len(s.group))
		}
		perSet = append(perSet, ts)
	}
	var combos [][]triple
	var rec func(i int, acc []triple)
	rec = func(i int, acc []triple) {
		if i == len(perSet) {
			combos = append(combos, slices.Clone(acc))
			return
		}
		for _, t := range perSet[i] {
			rec(i+1, append(acc, t))
		}
	}
	rec(0, nil)
	layouts := []string{attn.None}
	if len(d.tables) > 0 {
		layouts = attn.Layouts
	}
	orders := [][]int{{0}}
	if len(sets) == 2 {
		orders = [][]int{{0, 1}, {1, 0}}
	}
	norms := make([]map[*node]*node, len(sets))
	for i, s := range sets {
		norms[i] = s.norms
	}
	type cached struct {
		vals [3][]float32
		dh   int
	}
	valCache := map[[3]*node]cached{}
	valuesOf := func(si int, t triple) ([3][]float32, int, bool) {
		key := [3]*node{t.q.n, t.k.n, t.v.n}
		if c, ok := valCache[key]; ok {
			return c.vals, c.dh, c.vals[0] != nil
		}
		q, dq, ok1 := d.headValues(t.q, sets[si].norms[t.q.n])
		k, _, ok2 := d.headValues(t.k, sets[si].norms[t.k.n])
		v, _, ok3 := d.headValues(t.v, nil)
		c := cached{dh: dq}
		if ok1 && ok2 && ok3 {
			c.vals = [3][]float32{q, k, v}
		}
		valCache[key] = c
		return c.vals, dq, c.vals[0] != nil
	}
	var tgts [][]target
	best := attnResult{err: math.Inf(1), runnerUp: math.Inf(1)}
	for _, combo := range combos {
		vals := make([][3][]float32, len(sets))
		ok := true
		for si, t := range combo {
			if vals[si], _, ok = valuesOf(si, t); !ok {
				break
			}
		}
		if !ok {
			continue
		}
		for _, dh := range d.headWidths(combo, norms) {
			heads := combo[0].q.outW / dh
			hsel := attn.Spread(heads, 4)
			qsel := make([][]int, len(sets))
			for si, s := range sets {
				qsel[si] = attn.Spread(s.rows, 32)
			}
			if tgts == nil {
				for si, s := range sets {
					tgts = append(tgts, d.targets(b, s, combo[si].q.outW))
				}
			}
			for _, layout := range layouts {
				for _, order := range orders {
					for _, causal := range []bool{false, true} {
						cfg := attnConfig{sets: combo, d: dh, layout: layout, order: order, causal: causal}
						out, ok := d.attend(sets, cfg, vals, qsel, hsel)
						if !ok {
							continue
						}
						best.tried++
						worst := 0.0
						for si := range sets {
							e := math.Inf(1)
							for _, t := range tgts[si] {
								e = math.Min(e, d.compareTarget(t, out[si], qsel[si], hsel, dh))
							}
							worst = math.Max(worst, e)
						}
						if worst < best.err {
							if !sameRoles(cfg, best.cfg) {
								best.runnerUp = math.Min(best.runnerUp, best.err)
							}
							best.cfg, best.err, best.out, best.qsel, best.hsel = cfg, worst, out, qsel, hsel
							best.heads, best.kvh = heads, combo[0].k.outW/dh
						} else if !sameRoles(cfg, best.cfg) {
							best.runnerUp = math.Min(best.runnerUp, worst)
						}
					}
				}
			}
		}
	}
	if math.IsInf(best.err, 1) {
		return best, fmt.Errorf("no q/k/v assignment could be scored (no captured tensor of the attention's shape)")
	}
	return best, nil
}

// sameRoles reports whether two candidates assign the same q/k/v and head
// width (they may differ in the RoPE layout, order or causality).
func sameRoles(a, b attnConfig) bool {
	if a.d != b.d || len(a.sets) != len(b.sets) {
		return false
	}
	for i := range a.sets {
		if a.sets[i].q.n != b.sets[i].q.n || a.sets[i].k.n != b.sets[i].k.n || a.sets[i].v.n != b.sets[i].v.n {
			return false
		}
	}
	return true
}

// outProjection finds, for weight set si, the linear of the block whose
// argument (or its first or last q-width columns) is the attention output:
// the linear, the first column, and the error.
func (d *discoverer) outProjection(b *node, sets []*wset, si int, res attnResult, skip map[*node]bool) (linearInfo, int, float64) {
	qw := res.cfg.sets[si].q.outW
	var best target
	bestErr := math.Inf(1)
	for _, t := range d.targets(b, sets[si], qw) {
		if !t.linear || skip[t.n] {
			continue
		}
		if e := d.compareTarget(t, res.out[si], res.qsel[si], res.hsel, res.cfg.d); e < bestErr {
			best, bestErr = t, e
		}
	}
	if best.n == nil {
		return linearInfo{}, 0, bestErr
	}
	return d.linears[best.n], best.col, bestErr
}

// sortedLinears lists li by entry order.
func sortedLinears(ls []linearInfo) []linearInfo {
	out := slices.Clone(ls)
	sort.Slice(out, func(i, j int) bool { return out[i].n.order < out[j].n.order })
	return out
}
