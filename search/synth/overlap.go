package synth

import (
	"fmt"
	"slices"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/precision"
)

// maxTileOffsets bounds the placements overlapAdded tries per tile.
const maxTileOffsets = 4096

// overlapAdded explains t as tiles blended over their overlaps and
// summed (a tiled VAE's decode: Allegro's cubes): two or more values of
// the scope of one shape, each placed at its own offset inside t (maybe
// with t's axes moved), multiplied along every tiled axis by a linear
// ramp over its overlap with the tile before (0, 1/o, …, (o−1)/o) and
// the one after (1 − the same), each axis in turn, then added into zeros
// in the tiles' order; t may hold the tiles' batch of one flattened
// with another axis. The offsets are read off where a tile equals t (its
// interior has weight one) and must step evenly from 0 to the end.
func (s *synth) overlapAdded(t *val, sc *scope, vals []*val) *val {
	if len(t.shape) < 2 || len(t.shape) > 6 || t.integral() {
		return nil
	}
	groups := map[string][]*val{}
	var keys []string
	for _, v := range vals {
		r := len(v.shape)
		if !sc.own[v] || v.param || v.opaque || r != len(t.shape) && r != len(t.shape)+1 || v.numel() >= t.numel() {
			continue
		}
		k := fmt.Sprint(v.shape)
		if groups[k] == nil {
			keys = append(keys, k)
		}
		groups[k] = append(groups[k], v)
	}
	for _, k := range keys {
		tiles := groups[k]
		if len(tiles) < 2 {
			continue
		}
		// t itself, or t with a batch of one in front (the tiles' batch
		// and another axis flattened together after the blend)
		view := t.shape
		if len(tiles[0].shape) > len(t.shape) {
			view = append([]int{1}, t.shape...)
		}
		for _, perm := range permutations(len(view)) {
			shape := make([]int, len(perm)) // the proxy's: permute(proxy, perm) has view's shape
			for i, a := range perm {
				shape[a] = view[i]
			}
			if !covers(shape, tiles[0].shape) {
				continue
			}
			proxy := permuteData(&val{shape: view, data: t.data}, inversePerm(perm))
			v := s.tilesBlended(tiles, shape, proxy, t.format)
			if v != nil && !isIdentity(perm) {
				v = s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: perm}, args: []*val{v}, out: v.format, label: "axes moved"})
			}
			if v = s.reshape(v, t.shape); v != nil && relRMS(t.format, v.data, t.data) <= tolerance(t.format) {
				return v
			}
		}
	}
	return nil
}

// covers reports whether shape holds tile on every axis and is longer on
// some.
func covers(shape, tile []int) bool {
	longer := false
	for a := range shape {
		if shape[a] < tile[a] {
			return false
		}
		longer = longer || shape[a] > tile[a]
	}
	return longer
}

// tilesBlended is overlapAdded's reading in one layout: data [shape].
func (s *synth) tilesBlended(tiles []*val, shape []int, data []float32, f precision.Format) *val {
	ts := tiles[0].shape
	var axes []int // the tiled axes
	placements := 1
	for a := range shape {
		if shape[a] > ts[a] {
			axes = append(axes, a)
			placements *= shape[a] - ts[a] + 1
		}
	}
	if placements > maxTileOffsets {
		return nil
	}
	// each tile's offset: where most of its entries equal the target's
	offsets := make([][]int, len(tiles))
	for i, tile := range tiles {
		best, bestN := []int(nil), 0
		off := make([]int, len(shape))
		var walk func(j int)
		walk = func(j int) {
			if j == len(axes) {
				if n := equalAt(tile, shape, data, off); n > bestN {
					best, bestN = slices.Clone(off), n
				}
				return
			}
			for o := 0; o+ts[axes[j]] <= shape[axes[j]]; o++ {
				off[axes[j]] = o
				walk(j + 1)
			}
		}
		walk(0)
		if bestN*64 < tile.numel() { // a tile overlapped on every side keeps little of weight one
			return nil
		}
		offsets[i] = best
	}
	// per tiled axis the offsets step evenly from 0 to the end
	overlap := map[int]int{}
	for _, a := range axes {
		var os []int
		for _, o := range offsets {
			os = append(os, o[a])
		}
		slices.Sort(os)
		os = slices.Compact(os)
		if os[0] != 0 || os[len(os)-1]+ts[a] != shape[a] {
			return nil
		}
		stride := ts[a]
		if len(os) > 1 {
			stride = os[1]
		}
		for j := 1; j < len(os); j++ {
			if os[j]-os[j-1] != stride {
				return nil
			}
		}
		overlap[a] = ts[a] - stride
	}
	var sum *val
	for i, tile := range tiles {
		w := tile
		for _, a := range axes {
			o := overlap[a]
			if o <= 0 {
				continue
			}
			first, last := offsets[i][a] == 0, offsets[i][a]+ts[a] == shape[a]
			if first && last {
				continue
			}
			w = s.derive(&expr{op: program.OpMul, args: []*val{w, s.rampOf(ts, a, o, !first, !last)}, out: f, label: fmt.Sprintf("ramped over its overlap of %d along axis %d", o, a)})
		}
		w = s.zeroPlaced(w, shape, offsets[i], axes, f)
		if w == nil {
			return nil
		}
		if sum == nil {
			sum = w
			continue
		}
		sum = s.derive(&expr{op: program.OpAdd, args: []*val{sum, w}, out: f, label: "tiles added"})
	}
	if sum == nil || relRMS(f, sum.data, data) > tolerance(f) {
		return nil
	}
	return sum
}

// equalAt counts the entries of tile placed at off that equal data's.
func equalAt(tile *val, shape []int, data []float32, off []int) int {
	ts := tile.shape
	r := len(ts)
	idx := make([]int, r)
	n := 0
	for i, x := range tile.data {
		rem := i
		for a := r - 1; a >= 0; a-- {
			idx[a] = rem % ts[a]
			rem /= ts[a]
		}
		flat := 0
		for a := range r {
			flat = flat*shape[a] + idx[a] + off[a]
		}
		if data[flat] == x {
			n++
		}
	}
	return n
}

// rampOf is a tile's weights along axis a [1, .., n, .., 1]: over its
// first o entries (head) j/o, over its last o (tail) 1 − j/o, in f32 as
// torch's arange(o).float()/o makes them; one elsewhere.
func (s *synth) rampOf(ts []int, a, o int, head, tail bool) *val {
	n := ts[a]
	w := make([]float32, n)
	for j := range w {
		w[j] = 1
	}
	for j := range o {
		r := float32(j) / float32(o)
		if head {
			w[j] *= r
		}
		if tail {
			w[n-o+j] *= 1 - r
		}
	}
	shape := make([]int, len(ts))
	for i := range shape {
		shape[i] = 1
	}
	shape[a] = n
	return s.relConst(fmt.Sprintf("ramp[%d,%d,%v,%v,%d]", n, o, head, tail, a), shape, w,
		fmt.Sprintf("a tile's blend weights along an axis of %d: linear ramps over overlaps of %d (made from the request's shape)", n, o))
}

// zeroPlaced is v inside zeros of shape, at off along the given axes.
func (s *synth) zeroPlaced(v *val, shape, off, axes []int, f precision.Format) *val {
	for _, a := range axes {
		if v == nil {
			return nil
		}
		before, after := off[a], shape[a]-off[a]-v.shape[a]
		parts := []*val{v}
		zeros := func(k int, where string) *val {
			zs := slices.Clone(v.shape)
			zs[a] = k
			return &val{shape: zs, data: make([]float32, exec.Numel(zs)), format: f, origin: fmt.Sprintf("zeros%v", zs),
				constNote: "zeros around a tile along one axis (made from the request's shape)"}
		}
		if before > 0 {
			parts = append([]*val{zeros(before, "before")}, parts...)
		}
		if after > 0 {
			parts = append(parts, zeros(after, "after"))
		}
		if len(parts) > 1 {
			v = s.derive(&expr{op: program.OpConcat, attrs: program.Attrs{Axis: a}, args: parts, out: f, label: "placed among zeros"})
		}
	}
	return v
}
