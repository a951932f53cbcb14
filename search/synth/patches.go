package synth

import (
	"math"
	"slices"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/program"
)

// patched explains t as a value cut into (or put back from) square
// patches: [B, C, (F,) H, W] (or channels last, [B, (F,) H, W, C]) ↔
// [B, (F·)(H/p)·(W/p), C·p·p] with the feature axis in any order of (c,
// ph, pw), found from the values (each candidate is a reshape, a
// permutation and a reshape). The tokens may keep their grid ([B, (F,)
// h, w, C·p·p], the same memory as the rows).
func (s *synth) patched(t *val, vals []*val) *val {
	tol := tolerance(t.format)
	for _, v := range append(append(slices.Clone(vals), s.imageRows(t, vals)...), s.framesAsRows(t, vals)...) {
		if v.opaque || v.numel() != t.numel() {
			continue
		}
		for _, pair := range [][2]*val{{t, v}, {v, t}} { // unpatchify, then patchify
			img, tok := pair[0], pair[1]
			for _, shapes := range batchReadings(img.shape, tok.shape) {
				if out := s.patchedAs(t, v, img == t, shapes[0], shapes[1], tol); out != nil {
					return out
				}
			}
		}
	}
	return nil
}

// batchReadings are the ways patched reads an image and token shapes: as
// they are ([B, C, (F,) H, W], [B, N, D]), then, for one sample of a list
// input ([C, (F,) H, W] beside [N, D] or [1, N, D]), with a batch of 1;
// and tokens [N, D] of an image [1, C, (F,) H, W] as [1, N, D].
func batchReadings(img, tok []int) [][2][]int {
	out := [][2][]int{{img, tok}}
	if (len(img) == 3 || len(img) == 4) && (len(tok) == 2 || len(tok) == 3 && tok[0] == 1 && img[0] != 1) {
		bt := tok
		if len(tok) == 2 {
			bt = append([]int{1}, tok...)
		}
		out = append(out, [2][]int{append([]int{1}, img...), bt})
	}
	if (len(img) == 4 || len(img) == 5) && img[0] == 1 && len(tok) == 2 {
		// one sample's tokens packed without a batch axis ([N, D]) beside
		// an image that keeps its batch of one
		out = append(out, [2][]int{img, append([]int{1}, tok...)})
	}
	return out
}

// patchedAs is patched for one reading: image shape imgS and token shape
// tokS (toImage: t is the image).
func (s *synth) patchedAs(t, v *val, toImage bool, imgS, tokS []int, tol float64) *val {
	if len(imgS) != 4 && len(imgS) != 5 || len(tokS) < 3 || len(tokS) > len(imgS) {
		return nil
	}
	tok3 := []int{tokS[0], exec.Numel(tokS[1 : len(tokS)-1]), tokS[len(tokS)-1]}
	for _, m := range patchMoves(imgS, tok3) {
		src, perm := m.split, m.perm
		if toImage {
			// tokens → image: split the tokens, invert the permutation
			src, perm = m.tokSplit, m.inverse
		}
		sv := &val{shape: src, data: v.data}
		if relRMS(t.format, permuteData(sv, perm), t.data) > tol {
			continue
		}
		src, perm = mergeAxes(src, perm)
		r := s.reshape(v, src)
		p := s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: perm}, args: []*val{r}, out: v.format, label: "patches"})
		if out := s.reshape(p, t.shape); out != nil {
			if !toImage && m.order == [3]int{0, 1, 2} {
				s.patchRows = tok3[1]
				s.patchLayouts = append(s.patchLayouts, t.origin)
			}
			return out
		}
	}
	return nil
}

// framesAsRows reads tokens of frames batched as samples ([B·F, N, D], a
// video model that runs its spatial blocks per frame) as one sample's
// rows [B, F·N, D], the same memory, for a video t [B, .., F, .., H, W]
// to be unpatchified from.
func (s *synth) framesAsRows(t *val, vals []*val) []*val {
	if len(t.shape) != 5 {
		return nil
	}
	var out []*val
	for _, v := range vals {
		if v.opaque || len(v.shape) != 3 || v.numel() != t.numel() || v.shape[0] <= t.shape[0] || v.shape[0]%t.shape[0] != 0 {
			continue
		}
		f := v.shape[0] / t.shape[0]
		if f != t.shape[1] && f != t.shape[2] {
			continue // the frames are one of the video's axes
		}
		if r := s.reshape(v, []int{t.shape[0], f * v.shape[1], v.shape[2]}); r != nil {
			out = append(out, r)
		}
	}
	return out
}

// patchMove is one patch layout: the image split into [B, C, (F,) h, p,
// w, p] (split), permuted (perm) into the token split [B, (F,) h, w, f…]
// (tokSplit); inverse undoes perm.
type patchMove struct {
	split, tokSplit, perm, inverse []int
	order                          [3]int // the feature axis: (c, ph, pw) read in this order
}

// patchMoves lists the layouts that fit an image shape [B, C, (F,) H, W],
// [B, F, C, H, W] (frames before channels) or channels last [B, (F,) H,
// W, C], and a token shape [B, N, D]: the patch p from the sizes, every
// order of the feature axis (c, ph, pw). Channels last come after the
// others.
func patchMoves(img, tok []int) []patchMove {
	if len(tok) != 3 || tok[0] != img[0] {
		return nil
	}
	r := len(img)
	if r != 5 {
		return append(patchMovesFor(img, tok, 1, -1, r-2), patchMovesFor(img, tok, r-1, -1, r-3)...)
	}
	return append(append(patchMovesFor(img, tok, 1, 2, r-2), patchMovesFor(img, tok, 2, 1, r-2)...), patchMovesFor(img, tok, r-1, 1, r-3)...)
}

// patchMovesFor is patchMoves with the channels at image axis axC, the
// frames at axF (-1: none) and the height at axH (the width after it).
func patchMovesFor(img, tok []int, axC, axF, axH int) []patchMove {
	frames := 1
	if axF >= 0 {
		frames = img[axF]
	}
	C, H, W := img[axC], img[axH], img[axH+1]
	n := tok[1] / frames
	if n == 0 || tok[1]%frames != 0 {
		return nil
	}
	p := int(math.Round(math.Sqrt(float64(H*W) / float64(n))))
	if p < 1 || H%p != 0 || W%p != 0 || (H/p)*(W/p) != n || tok[2] != C*p*p {
		return nil
	}
	// the image's axes in order, H and W each split in two (h, ph), (w, pw)
	var split []int
	at := make([]int, len(img)) // image axis → its (first) split axis
	for i, d := range img {
		at[i] = len(split)
		if i == axH || i == axH+1 {
			split = append(split, d/p, p)
			continue
		}
		split = append(split, d)
	}
	axh, axPH, axw, axPW := at[axH], at[axH]+1, at[axH+1], at[axH+1]+1
	var out []patchMove
	for _, order := range permutations(3) {
		feat := [3]int{at[axC], axPH, axPW}
		perm := []int{0}
		if axF >= 0 {
			perm = append(perm, at[axF])
		}
		perm = append(perm, axh, axw)
		for _, o := range order {
			perm = append(perm, feat[o])
		}
		tokSplit := make([]int, len(perm))
		for i, a := range perm {
			tokSplit[i] = split[a]
		}
		inv := make([]int, len(perm))
		for i, a := range perm {
			inv[a] = i
		}
		out = append(out, patchMove{split: slices.Clone(split), tokSplit: tokSplit, perm: perm, inverse: inv, order: [3]int{order[0], order[1], order[2]}})
	}
	return out
}

// mergeAxes rewrites a permutation of shape with the fewest axes: runs of
// source axes that stay adjacent and in order after it become one (and
// axes of size 1 go), which moves the same elements with a permutation of
// lower rank (backends bound the rank they permute).
func mergeAxes(shape, perm []int) ([]int, []int) {
	// drop size-1 axes
	var keep []int
	for _, a := range perm {
		if shape[a] != 1 {
			keep = append(keep, a)
		}
	}
	if len(keep) == 0 {
		return []int{1}, []int{0}
	}
	// group consecutive runs in the output order
	var groups [][]int
	for _, a := range keep {
		if n := len(groups); n > 0 && groups[n-1][len(groups[n-1])-1]+1 == a && nextKept(shape, groups[n-1][len(groups[n-1])-1], a) {
			groups[n-1] = append(groups[n-1], a)
			continue
		}
		groups = append(groups, []int{a})
	}
	// the merged source shape, in source order of the groups' first axes
	order := make([]int, len(groups))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(i, j int) int { return groups[i][0] - groups[j][0] })
	newShape := make([]int, len(groups))
	rank := make([]int, len(groups)) // group → its axis in the merged source
	for pos, g := range order {
		n := 1
		for _, a := range groups[g] {
			n *= shape[a]
		}
		newShape[pos] = n
		rank[g] = pos
	}
	newPerm := make([]int, len(groups))
	for i := range groups {
		newPerm[i] = rank[i]
	}
	return newShape, newPerm
}

// nextKept reports whether axes a and b (a < b) are adjacent once size-1
// axes are dropped.
func nextKept(shape []int, a, b int) bool {
	for i := a + 1; i < b; i++ {
		if shape[i] != 1 {
			return false
		}
	}
	return true
}

// imageRows are the first and the last rows of each token value [B, R, D]
// with more rows than an image t holds (its text rows before or after the
// image's: a joined sequence's image rows, unpatchified).
func (s *synth) imageRows(t *val, vals []*val) []*val {
	if len(t.shape) != 4 && len(t.shape) != 5 {
		return nil
	}
	var out []*val
	for _, v := range vals {
		// (one sample of a list output, [C, (F,) H, W], from tokens of a batch of 1)
		if v.opaque || len(v.shape) != 3 || v.shape[0] != t.shape[0] && v.shape[0] != 1 || t.numel()%(v.shape[0]*v.shape[2]) != 0 {
			continue
		}
		n := t.numel() / (v.shape[0] * v.shape[2])
		if n >= v.shape[1] {
			continue
		}
		for _, start := range []int{v.shape[1] - n, 0} {
			if c := s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: 1, Start: start, End: start + n}, args: []*val{v}, out: v.format, label: "image rows"}); c != nil {
				out = append(out, c)
			}
		}
	}
	return out
}
