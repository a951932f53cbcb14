package synth

import (
	"fmt"
	"hash/maphash"
	"math"
	"slices"

	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/precision"
)

// minGatheredWidth is the narrowest row rowsGathered matches: rows of
// fewer entries may repeat by chance.
const minGatheredWidth = 8

// maxNearRows bounds the row pairs rowsGathered compares where rows
// match only to a rounding.
const maxNearRows = 1 << 16

// nearestRowOf is the row of d (rows of c) nearest row, where it is
// within tol of it (rel-RMS) and every other row is four times farther.
func nearestRowOf(d []float32, c int, row []float32, tol float64) (int, bool) {
	var norm float64
	for _, x := range row {
		norm += float64(x) * float64(x)
	}
	best, second, at := math.Inf(1), math.Inf(1), -1
	for j := 0; j+c <= len(d); j += c {
		var e float64
		for k, x := range row {
			diff := float64(d[j+k]) - float64(x)
			e += diff * diff
		}
		switch {
		case e < best:
			best, second, at = e, best, j/c
		case e < second:
			second = e
		}
	}
	return at, at >= 0 && best <= tol*tol*norm && second > 16*best
}

// rowsGathered explains t as the rows (along its last axis) of a value of
// the scope in another order, or some of them: windows cut out of an
// image's rows and back (x.view(B, H/w, w, W/w, w, C).permute(0, 1, 3, 2,
// 4, 5)), frames and patches exchanged, a class row dropped. The order is
// read off the values, each row of t one row of the value (the first of
// equal rows), and kept as a constant pattern of indices the model
// makes from the request's shape. Tried once every other form failed;
// nil where some row of t is no row of any value, or the rows are the
// value's own in order.
func (s *synth) rowsGathered(t *val, vals []*val) *val {
	if len(t.shape) < 2 || t.integral() {
		return nil
	}
	c := t.shape[len(t.shape)-1]
	if c < minGatheredWidth {
		return nil
	}
	seed := maphash.MakeSeed()
	key := func(row []float32) uint64 {
		var h maphash.Hash
		h.SetSeed(seed)
		for _, x := range row {
			b := math.Float32bits(x)
			h.Write([]byte{byte(b), byte(b >> 8), byte(b >> 16), byte(b >> 24)})
		}
		return h.Sum64()
	}
	m := t.numel() / c
	for _, v := range vals {
		if v.opaque || v.integral() || v.format != t.format || len(v.shape) < 2 || v.shape[len(v.shape)-1] != c {
			continue
		}
		n := v.numel() / c
		at := make(map[uint64]int, n)
		for r := range n {
			k := key(v.data[r*c : (r+1)*c])
			if _, dup := at[k]; !dup {
				at[k] = r // equal rows (a class row per frame): the first serves
			}
		}
		ids := &val{shape: []int{m}, data: make([]float32, m), format: precision.F32, origin: t.origin + "/rows", intType: true}
		inOrder := m == n
		ok := true
		exact := true
		for r := range m {
			row := t.data[r*c : (r+1)*c]
			j, found := at[key(row)]
			if !found || !slices.Equal(v.data[j*c:(j+1)*c], row) {
				// t − b of a peel holds the rows to a rounding only:
				// the nearest row, where it is near and alone
				if j, found = nearestRowOf(v.data, c, row, tolerance(t.format)); !found || m*n > maxNearRows {
					ok = false
					break
				}
				exact = false
			}
			ids.data[r] = float32(j)
			inOrder = inOrder && j == r
		}
		if !ok || inOrder {
			continue
		}
		g := s.derive(&expr{op: program.OpGather, args: []*val{s.reshape(v, []int{n, c}), ids}, out: v.format, label: fmt.Sprintf("rows of %s in a fixed order", v)})
		w := s.reshape(g, t.shape)
		if w == nil || exact && relRMS(t.format, w.data, t.data) != 0 || relRMS(t.format, w.data, t.data) > tolerance(t.format) || !s.everyStep(w, t, tolerance(t.format)) {
			continue
		}
		s.em.constant(ids, "row indices read off the values: each row of the result is one row of the value (an order the model makes from the request's shape: windows, frames, a class row dropped)")
		return w
	}
	return nil
}
