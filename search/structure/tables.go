package structure

import (
	"slices"

	"github.com/zflow/zflow/search/internal/rotary"
	"github.com/zflow/zflow/semantics"
)

// tableAngles reads a RoPE table as angles, [rows][pairs] (rotary.Angles,
// rotary.ComplexAngles).
func (d *discoverer) tableAngles(t table) ([][]float64, bool) {
	if t.complex {
		a := rotary.ComplexAngles(d.v.floats(t.cos.key), t.cos.width())
		return a, len(a) > 0
	}
	c, s := d.v.floats(t.cos.key), d.v.floats(t.sin.key)
	if c == nil || s == nil {
		return nil, false
	}
	a, _, ok := rotary.Angles(c, s, t.cos.width())
	return a, ok
}

// positionsFromTables: without position ids, each stream's ids are read
// back from the tables it rotates by.
func (d *discoverer) positionsFromTables() {
	fail := func(why string) {
		d.undetermined("structure.positions", "positions", "the RoPE table producer takes no position ids, and %s", why)
	}
	var tabs [][][]float64
	for _, t := range d.tables {
		a, ok := d.tableAngles(t)
		if !ok {
			fail("a table's rotating pairs cannot be told apart")
			return
		}
		tabs = append(tabs, a)
	}
	rp, ok := rotary.ReadPositions(tabs)
	if !ok {
		fail("the tables' angles are not integer ids times per-axis frequencies")
		return
	}
	ids := rp.IDs
	pos := &semantics.Positions{Streams: map[string]semantics.PositionSource{}}
	if len(d.tables) == 1 {
		var all []float64
		for _, row := range ids[0] {
			for _, v := range row {
				all = append(all, float64(v))
			}
		}
		var missing []string
		for _, s := range []string{image, text} {
			if _, ok := d.tokens[s]; ok {
				missing = append(missing, s)
			}
		}
		if len(ids[0]) != d.totalTokens() && len(d.tokens) > 1 || !d.derivePositions(pos, all, len(ids[0][0]), missing, nil) {
			fail("the ids read back from the table are neither grids nor sequences")
			return
		}
		d.st.Positions = pos
		return
	}
	for ti, t := range d.tables {
		var s string
		for _, name := range []string{image, text} {
			if d.tokens[name] == t.rows() {
				s = name
			}
		}
		if s == "" || slices.ContainsFunc(d.tables[:ti], func(u table) bool { return u.rows() == t.rows() }) {
			fail("the per-stream tables cannot be matched to streams by their rows")
			return
		}
		src, ok := rotary.Pattern(ids[ti], s == image)
		if !ok {
			fail("the ids read back from the " + s + " table are neither a grid nor a sequence")
			return
		}
		pos.Streams[s] = src
	}
	d.st.Positions = pos
}
