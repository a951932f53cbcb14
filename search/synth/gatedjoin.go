package synth

import (
	"fmt"
	"math"
	"slices"

	"github.com/zflow/zflow/exec/program"
)

// Bounds of gatedJoin: the columns it reads, the rows it compares on, and
// the pieces the joined factor may have.
const (
	maxGatedJoinWidth = 4096
	gatedJoinRows     = 64
	maxJoinPieces     = 4
)

// gatedJoin explains t [.., W] as a value a of t's shape times a join of
// runs of columns of other values along the last axis (MambaOut's gated
// convolution: act(g) · cat(i, conv(c)), i a cut of the same projection,
// conv(c) a channels-first map read channels last). The joined factor is
// read off t / a where a is not near zero: each run of its columns is the
// same run of consecutive columns of one value (or of a map [B, C, H, W]
// read as [B, H, W, C]), found left to right, at most four runs.
func (s *synth) gatedJoin(t *val, vals []*val) *val {
	n := len(t.shape)
	if n < 2 || t.integral() || t.reshapedFrom || t.shape[n-1] > maxGatedJoinWidth {
		return nil
	}
	w := t.shape[n-1]
	rows := t.numel() / w
	lead := t.shape[:n-1]
	// the pieces' sources: values of t's leading shape, maps read channels last
	var srcs []*val
	for _, v := range vals {
		if v.opaque || v.integral() || v.param {
			continue
		}
		if len(v.shape) == n && slices.Equal(v.shape[:n-1], lead) {
			srcs = append(srcs, v)
		}
		// both readings where a map's channels equal its side
		if n == 4 && len(v.shape) == 4 && v.shape[0] == t.shape[0] && v.shape[2] == t.shape[1] && v.shape[3] == t.shape[2] {
			if m := s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: []int{0, 2, 3, 1}}, args: []*val{v}, out: v.format, label: "a map read channels last"}); m != nil {
				srcs = append(srcs, m)
			}
		}
	}
	step := max(1, rows/gatedJoinRows)
	for _, a := range sameShape(t, vals) {
		if a.opaque || a.integral() {
			continue
		}
		b := s.joinedFactor(t, a, srcs, rows, w, step)
		if b == nil {
			continue
		}
		v, _ := s.best(t, []*expr{{op: program.OpMul, args: []*val{a, b}, out: t.format, label: "a value times a join"}})
		if v != nil && relRMS(t.format, v.data, t.data) <= tolerance(t.format) && s.everyStep(v, t, tolerance(t.format)) {
			return v
		}
	}
	return nil
}

// joinedFactor is the join of runs of srcs' columns that t / a reads as
// (compared where |a| is above a thousandth of its RMS, on every step-th
// row), or nil.
func (s *synth) joinedFactor(t, a *val, srcs []*val, rows, w, step int) *val {
	var rms float64
	for _, x := range a.data {
		rms += float64(x) * float64(x)
	}
	floor := 1e-3 * math.Sqrt(rms/float64(len(a.data)))
	tol := tolerance(t.format)
	// column j of t / a matches column o of src over the sampled rows
	matches := func(j int, src *val, o int) bool {
		sw := src.shape[len(src.shape)-1]
		var num, den float64
		seen := 0
		for r := 0; r < rows; r += step {
			av := float64(a.data[r*w+j])
			if math.Abs(av) <= floor {
				continue
			}
			q, v := float64(t.data[r*w+j])/av, float64(src.data[r*sw+o])
			num += (q - v) * (q - v) * av * av // the product's error, not the quotient's
			den += float64(t.data[r*w+j]) * float64(t.data[r*w+j])
			seen++
		}
		return seen > 0 && den > 0 && math.Sqrt(num/den) <= tol
	}
	var pieces []*val
	for j := 0; j < w; {
		if len(pieces) == maxJoinPieces {
			return nil
		}
		var best *val
		bestLen := 0
		for _, src := range srcs {
			sw := src.shape[len(src.shape)-1]
			for o := range sw {
				if !matches(j, src, o) {
					continue
				}
				k := 1
				for j+k < w && o+k < sw && matches(j+k, src, o+k) {
					k++
				}
				if k > bestLen {
					best, bestLen = s.columnRun(src, o, k), k
				}
			}
		}
		if best == nil {
			return nil
		}
		pieces = append(pieces, best)
		j += bestLen
	}
	if len(pieces) < 2 {
		return nil // a value itself: the pointwise forms' product
	}
	return s.derive(&expr{op: program.OpConcat, attrs: program.Attrs{Axis: len(t.shape) - 1}, args: pieces, out: t.format,
		label: fmt.Sprintf("%d runs of columns joined", len(pieces))})
}

// columnRun is src's columns [o, o+k) (src itself where that is all of it).
func (s *synth) columnRun(src *val, o, k int) *val {
	ax := len(src.shape) - 1
	if o == 0 && k == src.shape[ax] {
		return src
	}
	return s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: ax, Start: o, End: o + k}, args: []*val{src}, out: src.format, label: "a run of columns"})
}
