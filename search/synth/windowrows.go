package synth

import (
	"fmt"
	"hash/fnv"
	"math"
	"slices"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/program"
)

// windowRowsAttention explains t [B, N, C] as attention within windows
// the forward cut itself before projecting: a fused projection [B, d1,
// …, dk, 3C] of the rows moved into windows (timm's Twins, whose locally
// grouped attention reshapes and transposes its rows to [B, h, w, s, s, C]
// and projects them there), read as [P, Q, 3C] (Q the cells of the last
// axes, P the windows), [Q|K|V] blocks, each window attending over its
// own cells, the result's rows put back in t's order. That order is read
// off the values: the projection's input holds the call's argument's rows
// moved, each row found whole (a constant permutation of the grid's
// shape). Tried where every other attention form failed.
func (s *synth) windowRowsAttention(t *val, sc *scope) *val {
	if len(t.shape) != 3 || t.reshapedFrom {
		return nil
	}
	b, n, c := t.shape[0], t.shape[1], t.shape[2]
	var cands []*expr
	for _, v := range sc.vals {
		k := len(v.shape)
		if !sc.own[v] || v.opaque || k < 4 || v.shape[0] != b || v.shape[k-1] != 3*c || v.numel() != b*n*3*c {
			continue
		}
		ids := s.movedRowsOrder(sc, v.shape[:k-1])
		if ids == nil {
			continue
		}
		for j := 1; j < k-1; j++ {
			q := prod(v.shape[k-1-j : k-1]) // the cells of a window
			if q < 2 || q == n {
				continue
			}
			wins := v.numel() / (3 * c * q)
			rows := s.reshape(v, []int{wins, q, 3 * c})
			var qkv [3]*val
			for i := range 3 {
				qkv[i] = s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: 2, Start: i * c, End: (i + 1) * c}, args: []*val{rows}, out: v.format})
			}
			if qkv[0] == nil || qkv[1] == nil || qkv[2] == nil {
				continue
			}
			for d := minHeadDim; d <= maxHeadDim && d <= c; d *= 2 {
				if c%d != 0 {
					continue
				}
				p := exec.AttentionParams{Heads: c / d, KVHeads: c / d}
				a := s.derive(&expr{op: program.OpAttention, attrs: program.Attrs{Attention: p}, args: []*val{qkv[0], qkv[1], qkv[2], nil, nil, nil}, out: t.format})
				flat := s.reshape(a, []int{wins * q, c})
				g := s.derive(&expr{op: program.OpGather, args: []*val{flat, ids}, out: t.format, label: "rows put back in the argument's order"})
				if g == nil {
					continue
				}
				cands = append(cands, &expr{op: program.OpReshape, attrs: program.Attrs{Shape: slices.Clone(t.shape)}, args: []*val{g}, out: t.format,
					label: fmt.Sprintf("attention within windows of %d cells, heads=%d", q, c/d)})
			}
		}
	}
	return s.bestFit(t, cands, "attention")
}

// movedRowsOrder finds a value of the scope laid out [lead..., W] whose
// rows are the rows of one of the call's arguments [B, N, W] moved, and
// returns, for each of the argument's rows, the row of the moved value
// that holds it ([B·N] indices; nil where none is: a row not found, or
// found twice).
func (s *synth) movedRowsOrder(sc *scope, lead []int) *val {
	rows := prod(lead)
	for _, u := range sc.vals {
		k := len(u.shape)
		if u.opaque || u.integral() || k != len(lead)+1 || !slices.Equal(u.shape[:k-1], lead) {
			continue
		}
		w := u.shape[k-1]
		for _, x := range sc.vals {
			if !sc.arg[x] || x.opaque || len(x.shape) != 3 || x.numel() != rows*w || x.shape[2] != w {
				continue
			}
			if ids := rowOrder(x.data, u.data, w); ids != nil {
				h := fnv.New32a()
				for _, id := range ids {
					h.Write([]byte{byte(int(id)), byte(int(id) >> 8), byte(int(id) >> 16)})
				}
				v := s.relConst(fmt.Sprintf("movedrows%v/%08x", lead, h.Sum32()), []int{rows}, ids, fmt.Sprintf("the row of the windows' layout %v that holds each row of the sequence (read off the values: the rows moved into windows)", lead))
				v.intType = true
				return v
			}
		}
	}
	return nil
}

// rowOrder is, for each w-wide row of x, the index of the row of u equal
// to it; nil unless every row is found exactly once.
func rowOrder(x, u []float32, w int) []float32 {
	key := func(r []float32) string {
		b := make([]byte, 0, 4*len(r))
		for _, f := range r {
			bits := math.Float32bits(f)
			b = append(b, byte(bits), byte(bits>>8), byte(bits>>16), byte(bits>>24))
		}
		return string(b)
	}
	at := map[string]int{}
	for i := 0; i*w < len(u); i++ {
		kk := key(u[i*w : (i+1)*w])
		if _, dup := at[kk]; dup {
			return nil // rows that repeat: no order to read
		}
		at[kk] = i
	}
	ids := make([]float32, len(x)/w)
	seen := make([]bool, len(ids))
	for i := range ids {
		j, ok := at[key(x[i*w:(i+1)*w])]
		if !ok || seen[j] {
			return nil
		}
		seen[j] = true
		ids[i] = float32(j)
	}
	return ids
}
