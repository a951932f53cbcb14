// Package attn is the teacher-forced attention that structure discovery
// and factor scoring share: scaled dot-product attention with RoPE over
// weight sets joined in a given order, computed in float64 at a sample of
// query rows and heads, from captured q, k and v.
package attn

import (
	"math"

	"github.com/zflow/zflow/internal/workers"
)

// RoPE layouts (the rope_layout factor's values).
const (
	None        = "none"
	Interleaved = "interleaved"
	Half        = "half"
)

// Layouts lists the layouts in the order they are tried.
var Layouts = []string{Interleaved, Half, None}

// Set is one weight set's projections, rows × width each, after their
// per-head norms; K and V have one width.
type Set struct {
	Q, K, V []float32
	Rows    int
}

// Tables are cos and sin [rows, W] for the sets joined in the order
// given to Attend (W: the rotary width; 0 for none).
type Tables struct {
	Cos, Sin []float64
	W        int
}

// Params of one attention.
type Params struct {
	Heads, KVHeads, D int
	Layout            string
	Causal            bool
	// Scale multiplies q·k; 0 means 1/√D.
	Scale float64
}

// Sample says which query rows (per set, indices into that set's rows)
// and which query heads are computed.
type Sample struct {
	Rows  [][]int
	Heads []int
}

// Spread picks up to k indices of [0, n), evenly spread.
func Spread(n, k int) []int {
	if n <= k {
		out := make([]int, n)
		for i := range out {
			out[i] = i
		}
		return out
	}
	out := make([]int, k)
	for i := range out {
		out[i] = i * (n - 1) / (k - 1)
	}
	return out
}

// Rope rotates x (one head) at table row r in place: the first W elements,
// by pairs of the layout.
func Rope(x []float64, t Tables, r int, layout string) {
	if layout == None || t.W == 0 {
		return
	}
	w := min(t.W, len(x))
	c, s := t.Cos[r*t.W:r*t.W+w], t.Sin[r*t.W:r*t.W+w]
	rot := make([]float64, w)
	for i := range w {
		switch layout {
		case Interleaved:
			if i%2 == 0 {
				rot[i] = -x[i+1]
			} else {
				rot[i] = x[i-1]
			}
		case Half:
			if i < w/2 {
				rot[i] = -x[i+w/2]
			} else {
				rot[i] = x[i-w/2]
			}
		}
	}
	for i := range w {
		x[i] = x[i]*c[i] + rot[i]*s[i]
	}
}

// Attend computes softmax(q·kᵀ·scale)·v over the sets joined in order
// (order[j] is the set whose rows come j-th), with RoPE on q and k, at the
// sample. out[set] is [len(sample.Rows[set]), len(sample.Heads)·D]. Query
// head h reads key/value head h / (Heads/KVHeads). The keys and values of
// the heads sampled are made first, then the sampled query rows are spread
// over the cores; each output element is computed by one goroutine in a
// fixed order, so the result does not depend on the scheduling.
func Attend(sets []Set, order []int, t Tables, p Params, smp Sample) [][]float64 {
	dh := p.D
	type at struct{ set, row int }
	var rows []at
	start := make([]int, len(sets))
	for _, i := range order {
		start[i] = len(rows)
		for r := range sets[i].Rows {
			rows = append(rows, at{i, r})
		}
	}
	n := len(rows)
	group := max(p.Heads/max(p.KVHeads, 1), 1)
	keys := map[int][][]float64{}
	vals := map[int][][]float64{}
	for _, h := range smp.Heads {
		kv := h / group
		if _, ok := keys[kv]; ok {
			continue
		}
		ks, vs := make([][]float64, n), make([][]float64, n)
		workers.Split(n, func(lo, hi int) {
			for j := lo; j < hi; j++ {
				a := rows[j]
				kw := len(sets[a.set].K) / sets[a.set].Rows
				ks[j] = widen(sets[a.set].K[a.row*kw+kv*dh : a.row*kw+(kv+1)*dh])
				Rope(ks[j], t, j, p.Layout)
				vs[j] = widen(sets[a.set].V[a.row*kw+kv*dh : a.row*kw+(kv+1)*dh])
			}
		})
		keys[kv], vals[kv] = ks, vs
	}
	scale := p.Scale
	if scale == 0 {
		scale = 1 / math.Sqrt(float64(dh))
	}
	out := make([][]float64, len(sets))
	type item struct{ si, qi int }
	var items []item
	for si := range sets {
		out[si] = make([]float64, len(smp.Rows[si])*len(smp.Heads)*dh)
		for qi := range smp.Rows[si] {
			items = append(items, item{si, qi})
		}
	}
	workers.Split(len(items), func(lo, hi int) {
		scores := make([]float64, n)
		for _, it := range items[lo:hi] {
			s := sets[it.si]
			qw := len(s.Q) / s.Rows
			r := smp.Rows[it.si][it.qi]
			j := start[it.si] + r
			for hx, h := range smp.Heads {
				q := widen(s.Q[r*qw+h*dh : r*qw+(h+1)*dh])
				Rope(q, t, j, p.Layout)
				ks, vs := keys[h/group], vals[h/group]
				mx := math.Inf(-1)
				for kj := range n {
					if p.Causal && kj > j {
						scores[kj] = math.Inf(-1)
						continue
					}
					var dot float64
					for c := range dh {
						dot += q[c] * ks[kj][c]
					}
					scores[kj] = dot * scale
					mx = math.Max(mx, scores[kj])
				}
				var sum float64
				for kj := range n {
					scores[kj] = math.Exp(scores[kj] - mx)
					sum += scores[kj]
				}
				o := out[it.si][(it.qi*len(smp.Heads)+hx)*dh : (it.qi*len(smp.Heads)+hx+1)*dh]
				for kj := range n {
					if scores[kj] == 0 {
						continue
					}
					w := scores[kj] / sum
					for c := range dh {
						o[c] += w * vs[kj][c]
					}
				}
			}
		}
	})
	return out
}

// Compare is the rel-RMS of ours (one set's output at the sample) against
// a captured tensor of rows of width w, whose attention columns start at
// col; +Inf when the reference is zero there.
func Compare(ours []float64, ref []float32, w, col int, rows, heads []int, dh int) float64 {
	var sd, sr float64
	for qi, r := range rows {
		for hi, h := range heads {
			for c := range dh {
				i := r*w + col + h*dh + c
				if i >= len(ref) {
					return math.Inf(1)
				}
				x := float64(ref[i])
				diff := ours[(qi*len(heads)+hi)*dh+c] - x
				sd += diff * diff
				sr += x * x
			}
		}
	}
	if sr == 0 {
		return math.Inf(1)
	}
	return math.Sqrt(sd / sr)
}

func widen(x []float32) []float64 {
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = float64(v)
	}
	return out
}

// Complex expands a complex table [rows, pairs] (real and imaginary parts
// interleaved) to cos and sin [rows, 2·pairs] laid out for the layout.
func Complex(z []float32, pairs int, layout string) (cos, sin []float64, w int) {
	rows := len(z) / (2 * pairs)
	w = 2 * pairs
	cos, sin = make([]float64, rows*w), make([]float64, rows*w)
	for r := range rows {
		for j := range pairs {
			re, im := float64(z[2*(r*pairs+j)]), float64(z[2*(r*pairs+j)+1])
			a, b := 2*j, 2*j+1
			if layout == Half {
				a, b = j, j+pairs
			}
			cos[r*w+a], cos[r*w+b], sin[r*w+a], sin[r*w+b] = re, re, im, im
		}
	}
	return cos, sin, w
}
