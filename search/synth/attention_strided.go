package synth

import (
	"math"
	"slices"

	"github.com/zflow/zflow/exec/program"
)

// Attention within strided windows (Hiera's mask-unit attention, SAM 2's
// backbone): the rows of t [B, T·W, C] and of the scope's values are laid
// out (t, w), the window w fastest, and each window's rows attend over
// that window's keys alone; where the values hold s times t's rows, the
// queries are pooled first, the largest of s rows s·T' + t' apart
// (x.view(.., s, T', d).amax): a unit's cells reduced a stage down. The
// window count is read off the values: each window's outputs lie, channel
// by channel, between the least and the largest of its values' rows (a
// softmax's weights are a convex combination), which a wrong window count
// breaks.

// maxStridedWindows bounds how many window counts the screen passes on.
const maxStridedWindows = 3

// stridedWindowsAttention explains t [B, N, C] as attention within strided
// windows: t read as [B·W, N/W, C], each 3-D value of the scope [B, M, X]
// (W dividing M) as [B·W, M/W, X], the first of a fused projection's
// three blocks pooled where M is s·N; the result laid back. For the window
// counts (one only where the queries are pooled) whose windows hold t
// within their values' hull.
func (s *synth) stridedWindowsAttention(t *val, sc *scope) *val {
	if len(t.shape) != 3 || t.reshapedFrom || t.integral() {
		return nil
	}
	b, n, c := t.shape[0], t.shape[1], t.shape[2]
	pool, fused := s.allOperands(sc, t)
	var values []*val
	for _, f := range fused {
		values = append(values, f[2])
	}
	for _, v := range pool {
		if v.shape[2] == c && v.shape[1] >= n {
			values = append(values, v)
		}
	}
	tried := 0
	for w := 1; w <= n/2 && tried < maxStridedWindows; w++ {
		if n%w != 0 {
			continue
		}
		held := slices.IndexFunc(values, func(v *val) bool {
			m := v.shape[1]
			return m%w == 0 && m%n == 0 && (w > 1 || m > n) && (m/n == 1 || isPow2(m/n)) && windowsHeld(t, v, w)
		})
		if held < 0 {
			continue
		}
		tried++
		m := values[held].shape[1]
		mapped := s.stridedScope(sc, b, w, m, m/n)
		proxy := s.readAs(t, []int{b * w, n / w, c}, func(d []float32) []float32 {
			return permuteData(&val{shape: []int{b, n / w, w, c}, data: d}, []int{0, 2, 1, 3})
		})
		proxy.reshapedFrom = true
		r := s.attentionOf(proxy, mapped, false)
		if r == nil {
			continue
		}
		r = s.reshape(r, []int{b, w, n / w, c})
		back := s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: []int{0, 2, 1, 3}}, args: []*val{r}, out: r.format, label: "windows' rows laid back, the window fastest"})
		if v := s.reshape(back, t.shape); v != nil {
			return v
		}
	}
	return nil
}

// stridedScope is sc with each 3-D value of batch b whose rows W divides
// read as windows [B·W, M/W, X]; where the queries are pooled (stride s
// > 1), each fused projection's first block of m rows pooled beside it,
// and its three blocks as values of their own (the pooled queries pair
// with the keys and values as they are).
func (s *synth) stridedScope(sc *scope, b, w, m, stride int) *scope {
	windows := func(v *val) *val {
		if v.opaque || len(v.shape) != 3 || v.shape[0] != b || v.shape[1]%w != 0 {
			return nil
		}
		r := s.reshape(v, []int{b, v.shape[1] / w, w, v.shape[2]})
		p := s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: []int{0, 2, 1, 3}}, args: []*val{r}, out: v.format, label: "rows into strided windows"})
		return s.reshape(p, []int{b * w, v.shape[1] / w, v.shape[2]})
	}
	mapped := sc.mapped(windows)
	if stride == 1 {
		return mapped
	}
	for _, v := range sc.vals {
		if !sc.own[v] || v.opaque || len(v.shape) != 3 || v.shape[0] != b || v.shape[1] != m || v.shape[2]%3 != 0 {
			continue
		}
		x := windows(v)
		third := v.shape[2] / 3
		for i := range 3 {
			piece := s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: 2, Start: i * third, End: (i + 1) * third}, args: []*val{x}, out: x.format, label: "a block of the fused projection"})
			if piece == nil {
				break
			}
			if i == 0 {
				piece = s.pooledRows(piece, stride)
			}
			if piece != nil {
				mapped.add(piece, true)
			}
		}
	}
	return mapped
}

// pooledRows is x [P, s·T', X] pooled over s rows T' apart: the largest
// of x[:, j·T' + t', :] over j, made of slices and pairwise maxima.
func (s *synth) pooledRows(x *val, stride int) *val {
	p, rows, width := x.shape[0], x.shape[1], x.shape[2]
	each := rows / stride
	var acc *val
	for j := range stride {
		sl := s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: 1, Start: j * each, End: (j + 1) * each}, args: []*val{x}, out: x.format, label: "a stride's rows"})
		if sl == nil {
			return nil
		}
		if acc == nil {
			acc = sl
			continue
		}
		if acc = s.derive(&expr{op: program.OpMaximum, args: []*val{acc, sl}, out: x.format, label: "queries pooled: the largest"}); acc == nil {
			return nil
		}
	}
	return s.reshape(acc, []int{p, each, width})
}

// windowsHeld reports whether each of w strided windows of t [B, N, C]
// lies, channel by channel, within its window of v [B, M, C]'s range of
// values (a slack of 2 % of the larger bound for rounding; a thousandth
// of the entries may fall outside).
func windowsHeld(t, v *val, w int) bool {
	b, n, c, m := t.shape[0], t.shape[1], t.shape[2], v.shape[1]
	if len(v.shape) != 3 || v.shape[0] != b || v.shape[2] != c || len(v.data) != b*m*c || len(t.data) != b*n*c {
		return false // another batch or width, or a value not held whole
	}
	outside, total := 0, 0
	for bi := range b {
		for wi := range w {
			for ch := range c {
				lo, hi := math.Inf(1), math.Inf(-1)
				for j := wi; j < m; j += w {
					x := float64(v.data[(bi*m+j)*c+ch])
					lo, hi = min(lo, x), max(hi, x)
				}
				slack := 0.02*max(math.Abs(lo), math.Abs(hi)) + 1e-6
				for i := wi; i < n; i += w {
					x := float64(t.data[(bi*n+i)*c+ch])
					total++
					if x < lo-slack || x > hi+slack {
						outside++
					}
				}
			}
		}
	}
	return outside*1000 <= total
}

func isPow2(n int) bool { return n > 0 && n&(n-1) == 0 }
