package synth

import (
	"fmt"
	"slices"

	"github.com/zflow/zflow/exec/program"
)

// rolled explains t as a value rotated along one axis, its last k entries
// first (torch.roll, or cat([x[:, -k:], x[:, :-k]])): items of a batch
// reordered (an edit model's target item moved before its reference
// items, laid along the frames, and moved back after unpatchifying). t
// rotated back is explained as a value read with its axes in another order
// (moved) or an unpatchified value (patched), or with two of its axes
// swapped (swappedPatched); the result is then rotated as
// two slices joined. Tried once every other form failed.
func (s *synth) rolled(t *val, vals []*val) *val {
	if t.reshapedFrom || len(t.shape) < 2 || !slices.ContainsFunc(vals, func(v *val) bool { return !v.opaque && v.numel() == t.numel() }) {
		return nil
	}
	tol := tolerance(t.format)
	for ax, n := range t.shape {
		if n < 2 || n > maxRoll {
			continue
		}
		for k := 1; k < n; k++ {
			u := s.readAs(t, slices.Clone(t.shape), func(d []float32) []float32 { return rollData(&val{shape: t.shape, data: d}, ax, n-k) })
			u.reshapedFrom = true
			for _, try := range []func(*val, []*val) *val{s.moved, s.patched, s.swappedPatched} {
				w := try(u, vals)
				if w == nil || !slices.Equal(w.shape, t.shape) || relRMS(t.format, w.data, u.data) > tol {
					continue
				}
				tail := s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: ax, Start: n - k, End: n}, args: []*val{w}, out: w.format, label: fmt.Sprintf("the last %d", k)})
				head := s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: ax, Start: 0, End: n - k}, args: []*val{w}, out: w.format, label: "the rest"})
				r := s.derive(&expr{op: program.OpConcat, attrs: program.Attrs{Axis: ax}, args: []*val{tail, head}, out: w.format, label: fmt.Sprintf("rolled by %d", k)})
				if r != nil && relRMS(t.format, r.data, t.data) <= tol && s.everyStep(r, t, tol) {
					return r
				}
			}
		}
	}
	return nil
}

// maxRoll bounds the axes rolled tries: a handful of items, not rows.
const maxRoll = 8

// rollData is v's entries rotated by k along ax: out[i] = in[(i − k) mod n].
func rollData(v *val, ax, k int) []float32 {
	n := v.shape[ax]
	inner := 1
	for _, d := range v.shape[ax+1:] {
		inner *= d
	}
	out := make([]float32, len(v.data))
	for o := range len(v.data) / (n * inner) {
		for i := range n {
			src := ((i-k)%n + n) % n
			copy(out[(o*n+i)*inner:(o*n+i+1)*inner], v.data[(o*n+src)*inner:(o*n+src+1)*inner])
		}
	}
	return out
}

// unitAxesSinusoid explains t [N, 1, …, 1, D] as the sinusoidal embedding
// of a 1-D value of N entries kept with unit axes between its rows and
// channels (an embedding made [B, 1, D] to broadcast over the tokens):
// fitted on t read as [N, D], then reshaped. Tried once every other form
// failed.
func (s *synth) unitAxesSinusoid(t *val, vals []*val) *val {
	if len(t.shape) < 3 {
		return nil
	}
	n, d := t.shape[0], t.shape[len(t.shape)-1]
	if n*d != t.numel() {
		return nil
	}
	flat := s.readAs(t, []int{n, d}, func(x []float32) []float32 { return x })
	flat.reshapedFrom = true
	for _, v := range vals {
		if v.opaque || len(v.shape) != 1 || v.shape[0] != n {
			continue
		}
		if w := s.fitSinusoid(v, flat); w != nil {
			if r := s.reshape(w, t.shape); r != nil && s.everyStep(r, t, tolerance(t.format)) {
				return r
			}
		}
	}
	return nil
}

// swappedPatched explains t as an unpatchified value with two of its axes
// then swapped (an image [B, C, F, H, W] whose frames are items, read
// back as [B, F, C, 1, H, W]): t with the axes swapped back and its unit
// axes after the first dropped is explained by patched, then reshaped
// and permuted into t's layout.
func (s *synth) swappedPatched(t *val, vals []*val) *val {
	n := len(t.shape)
	if n < 4 || n > 6 {
		return nil
	}
	for i := 1; i < n; i++ {
		for j := i + 1; j < n; j++ {
			if t.shape[i] == 1 || t.shape[j] == 1 {
				continue
			}
			perm := make([]int, n)
			for a := range perm {
				perm[a] = a
			}
			perm[i], perm[j] = j, i
			swapped := make([]int, n)
			for a, p := range perm {
				swapped[a] = t.shape[p]
			}
			img := []int{swapped[0]}
			for _, d := range swapped[1:] {
				if d != 1 {
					img = append(img, d)
				}
			}
			if len(img) < 4 || len(img) > 5 {
				continue
			}
			p := s.readAs(t, img, func(d []float32) []float32 { return permuteData(&val{shape: t.shape, data: d}, perm) })
			p.reshapedFrom = true
			w := s.patched(p, vals)
			if w == nil {
				continue
			}
			r := s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: perm}, args: []*val{s.reshape(w, swapped)}, out: w.format, label: "axes swapped"})
			if r != nil && slices.Equal(r.shape, t.shape) && relRMS(t.format, r.data, t.data) <= tolerance(t.format) {
				return r
			}
		}
	}
	return nil
}
