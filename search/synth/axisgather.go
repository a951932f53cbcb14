package synth

import (
	"fmt"
	"slices"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/precision"
)

// axisGathered explains t as a value of the scope with each axis read at
// indices of its own: t[i₀, i₁, …] = v[m₀(i₀), m₁(i₁), …]. A nearest
// resize is one such read (each output position the input position it
// rounds to), of any rank and of any map: a video VAE's upsampler that
// resizes the first frame apart from the rest ([0, 1, 1, 2, 2] in time),
// its latents resized to a map's frames. Each axis's map is read off the
// slices' extremes and the sums of their distinct values, which an
// upsampling read of the other axes keeps (every source position read at
// least once): output slice i is the source slice that agrees, the first
// at or after the last one. Unlike a gather of single entries it needs
// no distinct values (bf16 repeats them); every element is compared.
func (s *synth) axisGathered(t *val, vals []*val) *val {
	r := len(t.shape)
	if r < 3 || r > 5 || t.integral() || !varied(t.data) {
		return nil
	}
	if r == 4 {
		if w := s.foldedAxisGathered(t, vals); w != nil {
			return w
		}
	}
	for _, v := range vals {
		if v.opaque || v.integral() || len(v.shape) != r || v.format != t.format || v.shape[0] != t.shape[0] || slices.Equal(v.shape, t.shape) || v.numel() > t.numel() {
			continue
		}
		maps := make([][]int, r)
		ok := true
		for a := 1; a < r && ok; a++ {
			maps[a] = axisMap(v, t, a)
			ok = maps[a] != nil
		}
		if !ok {
			continue
		}
		cur := v
		for a := 1; a < r && cur != nil; a++ {
			if isIdentityMap(maps[a], v.shape[a]) {
				continue
			}
			cur = s.gatherAxis(cur, a, maps[a], t.origin)
		}
		if cur != nil && slices.Equal(cur.shape, t.shape) && slices.Equal(cur.data, t.data) {
			return cur
		}
	}
	return nil
}

// axisMap is, for each position i of t along axis a, the position of v
// along a whose slice has the same extremes as t's slice i (the first
// at or after the last position chosen, else the first anywhere); nil
// where some slice has none.
func axisMap(v, t *val, a int) []int {
	ev, et := sliceExtremes(v, a), sliceExtremes(t, a)
	out := make([]int, len(et))
	last := 0
	for i, e := range et {
		j := slices.Index(ev[last:], e)
		if j >= 0 {
			j += last
		} else if j = slices.Index(ev, e); j < 0 {
			return nil
		}
		out[i], last = j, j
	}
	return out
}

// sliceExtremes are the minimum, the maximum and the sum of the distinct
// values of each slice of v along a: what reading the other axes at
// positions that cover each of them (an upsampling) leaves unchanged.
func sliceExtremes(v *val, a int) [][3]float64 {
	outer, inner := exec.Numel(v.shape[:a]), exec.Numel(v.shape[a+1:])
	l := v.shape[a]
	out := make([][3]float64, l)
	seen := make([]map[float32]bool, l)
	for i := range out {
		x := float64(v.data[i*inner])
		out[i] = [3]float64{x, x, 0}
		seen[i] = map[float32]bool{}
	}
	for o := range outer {
		for i := range l {
			for _, x := range v.data[(o*l+i)*inner : (o*l+i+1)*inner] {
				out[i][0], out[i][1] = min(out[i][0], float64(x)), max(out[i][1], float64(x))
				if !seen[i][x] {
					seen[i][x] = true
					out[i][2] += float64(x)
				}
			}
		}
	}
	return out
}

func isIdentityMap(m []int, n int) bool {
	if len(m) != n {
		return false
	}
	for i, j := range m {
		if i != j {
			return false
		}
	}
	return true
}

// gatherAxis reads x along axis a at positions m: a moved first, its
// rows gathered at m (a constant of the request's shape, declared where
// a program reads it), moved back.
func (s *synth) gatherAxis(x *val, a int, m []int, origin string) *val {
	r := len(x.shape)
	perm := []int{a}
	for i := range r {
		if i != a {
			perm = append(perm, i)
		}
	}
	inv := inversePerm(perm)
	front := s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: perm}, args: []*val{x}, out: x.format, label: "the axis read first"})
	if front == nil {
		return nil
	}
	rows := s.reshape(front, []int{x.shape[a], x.numel() / x.shape[a]})
	ids := &val{shape: []int{len(m)}, data: make([]float32, len(m)), format: precision.F32, intType: true,
		origin:    fmt.Sprintf("%s/axis-%d-positions", origin, a),
		constNote: fmt.Sprintf("the input positions a resize reads along axis %d: %v (made from the request's shape)", a, m)}
	for i, j := range m {
		ids.data[i] = float32(j)
	}
	g := s.derive(&expr{op: program.OpGather, args: []*val{rows, ids}, out: x.format, label: fmt.Sprintf("axis %d read at %v", a, m)})
	shape := slices.Clone(front.shape)
	shape[0] = len(m)
	back := s.reshape(g, shape)
	if back == nil {
		return nil
	}
	return s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: inv}, args: []*val{back}, out: x.format, label: "the axis back in place"})
}

// foldedAxisGathered is axisGathered for t [B·T, C, H, W]: a video map
// [B, C, T, H, W] read so, its frames then folded into the batch (as a
// 2-D convolution over frames reads them).
func (s *synth) foldedAxisGathered(t *val, vals []*val) *val {
	for _, v := range vals {
		if len(v.shape) != 5 || v.opaque || v.format != t.format || v.shape[1] != t.shape[1] || t.shape[0]%v.shape[0] != 0 {
			continue
		}
		b, c, T := v.shape[0], t.shape[1], t.shape[0]/v.shape[0]
		h, w := t.shape[2], t.shape[3]
		video := s.readAs(t, []int{b, c, T, h, w}, func(d []float32) []float32 {
			return permuteData(&val{shape: []int{b, T, c, h, w}, data: d}, []int{0, 2, 1, 3, 4})
		})
		g := s.axisGathered(video, []*val{v})
		if g == nil {
			continue
		}
		moved := s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: []int{0, 2, 1, 3, 4}}, args: []*val{g}, out: g.format, label: "frames first"})
		if f := s.reshape(moved, slices.Clone(t.shape)); f != nil && slices.Equal(f.data, t.data) {
			return f
		}
	}
	return nil
}
