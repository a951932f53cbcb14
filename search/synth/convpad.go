package synth

import (
	"fmt"
	"slices"

	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/precision"
)

// padModes are torch's non-zero padding modes (a convolution's
// padding_mode, F.pad's mode): the cells each border cell repeats.
var padModes = []string{"reflect", "replicate", "circular"}

// padIndices are the source cells of an axis of n cells padded by lo
// before and hi after in mode: reflect mirrors about the edge cell
// without repeating it (−1 → 1), replicate repeats the edge cell,
// circular wraps around.
func padIndices(n, lo, hi int, mode string) []float32 {
	out := make([]float32, 0, n+lo+hi)
	for i := -lo; i < n+hi; i++ {
		j := i
		switch mode {
		case "reflect":
			for j < 0 || j >= n {
				if j < 0 {
					j = -j
				}
				if j >= n {
					j = 2*(n-1) - j
				}
			}
		case "replicate":
			j = min(max(i, 0), n-1)
		case "circular":
			j = ((i % n) + n) % n
		}
		out = append(out, float32(j))
	}
	return out
}

// modePadded is x padded by pad cells on each side of each of its last
// `axes` axes in mode, by gathering along each axis in turn (last first);
// nil where a pad does not fit the mode (reflect: pad < n).
func (s *synth) modePadded(x *val, axes, pad int, mode string) *val {
	cur := x
	for a := len(x.shape) - 1; a >= len(x.shape)-axes; a-- {
		n := cur.shape[a]
		if mode == "reflect" && pad >= n {
			return nil
		}
		idx := s.relConst(fmt.Sprintf("pad[%d,%d,%s]", n, pad, mode), []int{n + 2*pad}, padIndices(n, pad, pad, mode),
			fmt.Sprintf("the source cell of each of %d cells, %d padded by %d on each side, %s (made from the sizes)", n+2*pad, n, pad, mode))
		idx.intType = true
		cur = s.gatherAlong(cur, a, idx, fmt.Sprintf("%s padding along axis %d", mode, a))
		if cur == nil {
			return nil
		}
	}
	return cur
}

// gatherAlong is v's cells along axis a at the indices idx: the axis moved
// to the front, its rows gathered, moved back.
func (s *synth) gatherAlong(v *val, a int, idx *val, label string) *val {
	return s.alongFirst(v, a, idx.numel(), v.format, func(rows *val) *val {
		return s.derive(&expr{op: program.OpGather, args: []*val{rows, idx}, out: v.format, label: label})
	})
}

// alongFirst applies f to v with axis a moved to the front and the other
// axes flattened ([len, rest] → [n, rest]), then moves the axis back.
func (s *synth) alongFirst(v *val, a, n int, out precision.Format, f func(rows *val) *val) *val {
	if v == nil {
		return nil
	}
	r := len(v.shape)
	perm := []int{a}
	for i := range r {
		if i != a {
			perm = append(perm, i)
		}
	}
	front := s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: perm}, args: []*val{v}, out: v.format, label: "axis first"})
	if front == nil {
		return nil
	}
	g := f(s.reshape(front, []int{front.shape[0], front.numel() / front.shape[0]}))
	if g == nil {
		return nil
	}
	shape := slices.Clone(front.shape)
	shape[0] = n
	return s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: inversePerm(perm)}, args: []*val{s.reshape(g, shape)}, out: out, label: "axis back"})
}

// fitModePaddedConv explains a convolution padded in a non-zero mode
// (padding_mode reflect, replicate or circular: a vocoder's or an image
// restorer's convolutions): x padded by p on each side of its spatial
// axes, then the convolution unpadded, by the convolution forms already
// tried. p keeps the length at stride 1 ((k − 1)/2 for an odd kernel) or,
// strided, is each of 1 … k/2. A 3-D convolution is padded so in space
// only, its time padding fitConv3D's (LTX-2's decoder: reflect in space,
// the edge frames repeated before the call). Tried where every
// zero-padded form fails.
func (s *synth) fitModePaddedConv(x *val, params []*val, t *val) *val {
	w, _ := convParams(params)
	axes := len(w.shape) - 2
	if axes < 1 || axes > 3 || len(x.shape) != axes+2 || len(t.shape) != axes+2 || x.integral() {
		return nil
	}
	k := w.shape[len(w.shape)-1]
	var pads []int
	if grow := t.shape[len(t.shape)-1] - x.shape[len(x.shape)-1] + k - 1; grow > 0 && grow%2 == 0 {
		pads = append(pads, grow/2) // stride 1
	}
	for p := 1; p <= k/2; p++ {
		if !slices.Contains(pads, p) {
			pads = append(pads, p)
		}
	}
	for _, p := range pads {
		for _, mode := range padModes {
			xp := s.modePadded(x, min(axes, 2), p, mode)
			if xp == nil {
				continue
			}
			var v *val
			switch axes {
			case 1:
				v = s.fitConv1D(xp, params, t)
			case 2:
				if v = s.fitConv(xp, params, t); v == nil {
					v = s.fitConv2D(xp, params, t)
				}
			case 3:
				v = s.fitConv3D(xp, params, t)
			}
			if v != nil && v.fit != nil {
				v.fit.label = fmt.Sprintf("%s padding %d, then %s", mode, p, v.fit.label)
			}
			if v != nil {
				return v
			}
		}
	}
	return nil
}

// paddedMove explains t as a value with its axes moved (or not) and its
// last axis then padded by lo cells before and hi after in a mode
// (replicate, reflect, circular): a sequence turned channels first and
// padded causally for a convolution, F.pad(x.permute(0, 2, 1), (k − 1, 0),
// mode="replicate"). Each move and split of the padding is checked on the
// host first; the one that gives t exactly is made (a permute, then a
// gather of the axis's cells). Where rows repeat, a gather of whole rows
// cannot tell which row a cell copies; this reading does not need to.
func (s *synth) paddedMove(t *val, vals []*val) *val {
	r := len(t.shape)
	if r < 2 || r > 4 || t.integral() {
		return nil
	}
	last := t.shape[r-1]
	for _, v := range vals {
		if v.opaque || len(v.shape) != r || v.numel() >= t.numel() {
			continue
		}
		for _, perm := range permutations(r) {
			shape := permuteShape(v.shape, perm)
			n := shape[r-1]
			if n >= last || !slices.Equal(shape[:r-1], t.shape[:r-1]) {
				continue
			}
			moved := permuteData(v, perm)
			rows := len(moved) / n
			for lo := 0; lo <= last-n; lo++ {
				hi := last - n - lo
				for _, mode := range padModes {
					if mode == "reflect" && (lo >= n || hi >= n) {
						continue
					}
					idx := padIndices(n, lo, hi, mode)
					same := true
					for row := 0; row < rows && same; row++ {
						for i, j := range idx {
							if moved[row*n+int(j)] != t.data[row*last+i] {
								same = false
								break
							}
						}
					}
					if !same {
						continue
					}
					x := v
					if !isIdentity(perm) {
						x = s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: perm}, args: []*val{v}, out: v.format, label: "axes moved"})
					}
					ids := s.relConst(fmt.Sprintf("pad[%d,%d,%d,%s]", n, lo, hi, mode), []int{last}, idx,
						fmt.Sprintf("the source cell of each of %d cells, %d padded by %d before and %d after, %s (made from the sizes)", last, n, lo, hi, mode))
					ids.intType = true
					if w := s.gatherAlong(x, r-1, ids, fmt.Sprintf("%s padding (%d, %d)", mode, lo, hi)); w != nil && s.everyStep(w, t, 0) {
						return w
					}
				}
			}
		}
	}
	return nil
}
