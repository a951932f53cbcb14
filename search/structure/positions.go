package structure

import (
	"fmt"
	"math"
	"slices"

	"github.com/zflow/zflow/search/internal/rotary"
	"github.com/zflow/zflow/semantics"
	"github.com/zflow/zflow/trace"
)

// table is a RoPE table the blocks read: cos and sin as two real tensors
// [.., rows, rotary], or one complex tensor [rows, rotary/2] (cos + i·sin).
type table struct {
	cos, sin port
	complex  bool
	producer *node
	// the producer's result ports holding cos and sin
	cosOut, sinOut string
}

func (t table) rows() int { return tokensOf(t.cos) }

// findTables: the first block's arguments that are neither a stream's
// rows nor the conditioning vector are its RoPE tables; real ones come in
// pairs of one shape (cos has the larger mean: cos θ ≈ 1 where the angle
// is small), complex ones alone.
func (d *discoverer) findTables() {
	if len(d.blocks) == 0 {
		return // no block reads tables
	}
	b := d.blocks[0]
	var reals []port
	for _, p := range b.ins {
		if !p.dt.IsFloat() || (d.cond != nil && d.v.same(p, *d.cond)) {
			continue
		}
		if p.width() == d.st.Hidden && d.streamOf(p) != "" {
			continue
		}
		if p.dt == trace.Complex64 || p.dt == trace.Complex128 {
			d.tables = append(d.tables, table{cos: p, complex: true})
			continue
		}
		reals = append(reals, p)
	}
	for len(reals) >= 2 {
		a := reals[0]
		j := slices.IndexFunc(reals[1:], func(q port) bool { return slices.Equal(q.shape, a.shape) })
		if j < 0 {
			reals = reals[1:]
			continue
		}
		bp := reals[1+j]
		reals = slices.Delete(reals, 1+j, 2+j)[1:]
		if t, ok := d.realTable(a, bp); ok {
			d.tables = append(d.tables, t)
		}
	}
	if len(d.tables) == 0 {
		// Tables made inside the blocks: the first call anywhere with two
		// results of one shape whose squares sum to 1.
		for _, n := range d.g.nodes {
			for i, a := range n.outs {
				for _, bp := range n.outs[i+1:] {
					if t, ok := d.realTable(a, bp); ok && slices.Equal(a.shape, bp.shape) && a.float() {
						d.tables = append(d.tables, t)
						break
					}
				}
				if len(d.tables) > 0 {
					break
				}
			}
			if len(d.tables) > 0 {
				break
			}
		}
	}
	for i := range d.tables {
		for _, n := range d.g.nodes {
			t := &d.tables[i]
			if t.producer != nil && d.outside(t.producer) && !d.outside(n) {
				continue // a producer outside the blocks is preferred
			}
			for _, o := range n.outs {
				if d.v.same(o, t.cos) && (t.producer == nil || n.order > t.producer.order) {
					t.producer, t.cosOut, t.sinOut = n, o.name, ""
					for _, q := range n.outs {
						if !t.complex && d.v.same(q, t.sin) {
							t.sinOut = q.name
						}
					}
				}
			}
		}
	}
}

// realTable checks that a and b are cos and sin tables (a² + b² = 1
// elementwise) and orders them.
func (d *discoverer) realTable(a, b port) (table, bool) {
	x, y := d.v.floats(a.key), d.v.floats(b.key)
	if x == nil || y == nil || len(x) != len(y) || len(x) == 0 {
		return table{}, false
	}
	for i := range x {
		if s := float64(x[i])*float64(x[i]) + float64(y[i])*float64(y[i]); math.Abs(s-1) > 0.02 {
			return table{}, false
		}
	}
	if mean(y) > mean(x) {
		a, b = b, a
	}
	return table{cos: a, sin: b}, true
}

func mean(x []float32) float64 {
	var s float64
	for _, v := range x {
		s += float64(v)
	}
	return s / math.Max(1, float64(len(x)))
}

// findPositions: where each stream's position ids come from. A request
// input of integer ids inside the ids the table producer reads is the
// stream's source; otherwise the stream's slice of those ids is a grid or
// a sequence.
func (d *discoverer) findPositions() {
	d.findTables()
	if len(d.tables) == 0 {
		return
	}
	prod := d.tables[0].producer
	if prod == nil {
		d.undetermined("structure.positions", "positions", "no call outside the blocks makes the RoPE tables the blocks read")
		return
	}
	var ids port
	found := false
	for _, p := range prod.ins {
		if p.dt.Components() == 1 && p.numel() <= d.totalTokens()*8 && integral(d.v.float64s(p.key)) {
			ids, found = p, true
			break
		}
	}
	if !found {
		d.positionsFromTables()
		return
	}
	pos := &semantics.Positions{Streams: map[string]semantics.PositionSource{}}
	nrows := d.totalTokens()
	if len(d.tokens) == 1 {
		for s := range d.tokens {
			nrows = d.tokens[s]
		}
	}
	if ids.numel()%nrows != 0 {
		d.undetermined("structure.positions", "positions", "the position ids %v do not hold %d rows", ids.shape, nrows)
		return
	}
	axes := ids.numel() / nrows
	all := d.v.float64s(ids.key)
	// Streams whose ids are a request input.
	offset := map[string]int{}
	for _, p := range d.g.root.ins {
		name, ok := d.requestInput(p)
		if !ok || p.numel()%axes != 0 || p.width() != axes && axes != 1 {
			continue
		}
		s := d.streamOf(p)
		if s == "" || s == joint || p.numel() != d.tokens[s]*axes {
			continue
		}
		at := d.v.containsAt(ids, p)
		if at < 0 || at%axes != 0 {
			continue
		}
		role := "positions." + s
		d.st.Model.Inputs[role] = p.name
		d.addInput(role, name)
		pos.Streams[s] = semantics.PositionSource{From: "input", Input: role}
		offset[s] = at / axes
	}
	// The others: their slice of the ids, streams in either order.
	var missing []string
	for _, s := range []string{image, text} {
		if _, ok := d.tokens[s]; ok {
			if _, done := pos.Streams[s]; !done {
				missing = append(missing, s)
			}
		}
	}
	if len(missing) > 0 {
		if !d.derivePositions(pos, all, axes, missing, offset) {
			d.undetermined("structure.positions", "positions", "the position ids of %v are neither a request input nor a grid or a sequence in any order of the streams", missing)
			return
		}
	}
	d.st.Positions = pos
	if t := d.tables[0]; !t.complex && len(d.tables) == 1 && t.sinOut != "" {
		pos.Boundary = &semantics.Boundary{Module: prod.c.Module,
			Inputs:  map[string]string{"ids": ids.name},
			Outputs: map[string]string{"cos": t.cosOut, "sin": t.sinOut}}
	}
}

func (d *discoverer) totalTokens() int {
	n := 0
	for _, t := range d.tokens {
		n += t
	}
	return n
}

// derivePositions reads the missing streams' sources off the ids: each
// order of the streams that agrees with the known offsets is tried, and
// the first where every missing stream's rows are a grid (image) or a
// sequence (text) wins.
func (d *discoverer) derivePositions(pos *semantics.Positions, all []float64, axes int, missing []string, offset map[string]int) bool {
	orders := [][]string{{text, image}, {image, text}}
	if len(d.tokens) == 1 {
		for s := range d.tokens {
			orders = [][]string{{s}}
		}
	}
	var winners []map[string]semantics.PositionSource
	for _, order := range orders {
		at, ok := 0, true
		found := map[string]semantics.PositionSource{}
		for _, s := range order {
			n := d.tokens[s]
			if off, known := offset[s]; known && off != at {
				ok = false
				break
			}
			if slices.Contains(missing, s) {
				if (at+n)*axes > len(all) { // the ids hold fewer rows than the streams
					ok = false
					break
				}
				rows := make([][]int, n)
				for r := range rows {
					rows[r] = make([]int, axes)
					for a := range axes {
						rows[r][a] = int(all[(at+r)*axes+a])
					}
				}
				src, good := rotary.Pattern(rows, s == image)
				if !good {
					ok = false
					break
				}
				found[s] = src
			}
			at += n
		}
		if ok {
			winners = append(winners, found)
		}
	}
	if len(winners) == 0 {
		return false
	}
	if len(winners) > 1 && fmt.Sprint(winners[0]) != fmt.Sprint(winners[1]) {
		d.undetermined("structure.positions", "positions", "the position ids read as a grid and a sequence in both orders of the streams; the first (text rows first) is kept")
	}
	for s, src := range winners[0] {
		pos.Streams[s] = src
	}
	return true
}
