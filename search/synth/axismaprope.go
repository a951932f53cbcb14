package synth

import (
	"fmt"
	"math"
	"slices"
	"strconv"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/precision"
	"github.com/zflow/zflow/search/internal/rotary"
	"github.com/zflow/zflow/semantics"
)

// fitAxisMapRope explains cos and sin tables over position ids of k ≥ 2
// columns whose frequencies form one ladder (f_i = θ^(−2i/d) over the
// whole width) and each turn by a column of their own: interleaved
// (t h w t h w …), sectioned, or any map. Which column turns each
// frequency is read from the values (readFreqAxes), never assumed; θ is
// read from frequency 1; the tables are recomputed by rope_table with
// that map and must reproduce both. Tried where the per-axis forms fail.
func (s *synth) fitAxisMapRope(xs []*val, cosT, sinT *val) (*val, *val) {
	d, rows, layouts := tableLayouts(cosT, sinT)
	if len(layouts) == 0 {
		return nil, nil
	}
	var pairs [][2]*expr
	for _, x := range xs {
		k := x.numel() / rows
		if !x.integral() || k < 2 || k > 8 || x.numel() != rows*k {
			continue
		}
		for _, p2 := range s.idColumns(x, rows, k) {
			for _, layout := range layouts {
				angles := tableAngles(cosT, sinT, layout)
				for _, theta := range ladderThetas(angles, p2, d) {
					axes, margins := readFreqAxes(angles, p2, ladder(theta, d))
					note := fmt.Sprintf("%d of %d frequencies' axes shown by the values", shown(margins), len(margins))
					for _, ff := range []precision.Format{precision.F32, precision.F64} {
						for _, af := range []precision.Format{precision.F32, precision.F64} {
							p := exec.RopeTableParams{Theta: theta, AxesDims: []int{d}, Layout: layout, FreqFormat: ff, AngleFormat: af, FreqAxes: axes}
							label := fmt.Sprintf("%s frequency axes %v (%s) theta=%g freq=%s angle=%s", layout, axes, note, theta, ff, af)
							c := &expr{op: program.OpRopeTable, attrs: program.Attrs{RopeTable: p}, args: []*val{p2}, out: cosT.format, label: label}
							pairs = append(pairs, [2]*expr{c, pickOf(c, 1)})
						}
					}
				}
			}
		}
	}
	bestI, bestScore := -1, math.Inf(1)
	var ev []semantics.Candidate
	var tried []ropeTry
	score := func(pr [2]*expr) (float64, bool) {
		c, e1 := s.ev.score(pr[0], cosT)
		sn, e2 := s.ev.score(pr[1], sinT)
		sc := math.Max(e1, e2)
		ev = append(ev, semantics.Candidate{Value: pr[0].label, Score: finite(sc)})
		tried = append(tried, ropeTry{p: pr[0].attrs.RopeTable, score: sc})
		return sc, c != nil && sn != nil
	}
	for i, pr := range pairs {
		if sc, ok := score(pr); ok && sc < bestScore {
			bestI, bestScore = i, sc
		}
	}
	if bestI < 0 || bestScore > tolerance(cosT.format) {
		return nil, nil
	}
	// the map's margin: every map one frequency's column away, scored
	best := pairs[bestI][0]
	k := best.args[0].shape[1]
	for i, a := range best.attrs.RopeTable.FreqAxes {
		for b := range k {
			if b == a {
				continue
			}
			p := best.attrs.RopeTable
			p.FreqAxes = slices.Clone(p.FreqAxes)
			p.FreqAxes[i] = b
			c := &expr{op: program.OpRopeTable, attrs: program.Attrs{RopeTable: p}, args: best.args, out: cosT.format,
				label: fmt.Sprintf("%s frequency axes %v (frequency %d by column %d) theta=%g freq=%s angle=%s", p.Layout, p.FreqAxes, i, b, p.Theta, p.FreqFormat, p.AngleFormat)}
			score([2]*expr{c, pickOf(c, 1)})
		}
	}
	cv, sv := s.tables(best, cosT, sinT, ev)
	if cv != nil {
		cv.fit.ropeTried = tried
	}
	return cv, sv
}

// idColumns lays integer ids of k columns per row out as [rows, k]: the
// columns last ([.., rows, k]) or the axes first ([k, .., rows], as
// multimodal ids [3, B, S] are); each reading the shape allows.
func (s *synth) idColumns(x *val, rows, k int) []*val {
	var out []*val
	n := len(x.shape)
	if n >= 2 && x.shape[n-1] == k {
		if v := s.reshape(x, []int{rows, k}); v != nil {
			out = append(out, v)
		}
	}
	if n >= 2 && x.shape[0] == k && (x.shape[n-1] != k || k == rows) {
		r := s.reshape(x, []int{k, rows})
		if r != nil {
			if v := s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: []int{1, 0}}, args: []*val{r}, out: x.format, label: "ids axes first"}); v != nil {
				out = append(out, v)
			}
		}
	}
	return out
}

// tableAngles reads the angle of each frequency on each row, [rows][d/2],
// at the first channel of its pair in layout.
func tableAngles(cosT, sinT *val, layout exec.RopeLayout) [][]float64 {
	d := cosT.shape[len(cosT.shape)-1]
	rows := cosT.numel() / d
	out := make([][]float64, rows)
	for r := range out {
		out[r] = make([]float64, d/2)
		for i := range d / 2 {
			j := r*d + i
			if layout == exec.RopeInterleaved {
				j = r*d + 2*i
			}
			out[r][i] = math.Atan2(float64(sinT.data[j]), float64(cosT.data[j]))
		}
	}
	return out
}

// ladder is f_i = θ^(−2i/d), i < d/2, in f64.
func ladder(theta float64, d int) []float64 {
	f := make([]float64, d/2)
	for i := range f {
		f[i] = math.Pow(theta, -float64(2*i)/float64(d))
	}
	return f
}

// ladderThetas reads θ from frequency 1 (θ^(−2/d)) fitted against each
// column of ids p2 [rows, k] (3 significant digits), the common base
// first.
func ladderThetas(angles [][]float64, p2 *val, d int) []float64 {
	out := []float64{10000}
	k := p2.shape[1]
	for a := range k {
		f, _, ok := fitFrequency(len(angles), func(r int) float64 { return float64(p2.data[r*k+a]) }, func(r int) float64 { return angles[r][1] })
		if !ok || !(f > 0) {
			continue
		}
		theta := math.Pow(f, -float64(d)/2)
		if r, err := strconv.ParseFloat(strconv.FormatFloat(theta, 'g', 3, 64), 64); err == nil && r > 1 && !math.IsInf(r, 0) && !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	return out
}

// readFreqAxes reads which column of ids p2 [rows, k] turns each
// frequency of a table (angles [rows][F], freqs f [F]): the column whose
// positions leave the least wrapped residual Σ (angle − f·pos)² over the
// rows. margin[i] is the runner-up column's residual over the winner's
// (+Inf where the winner's is 0 and another's not; 1 where no column
// differs: the values do not show that frequency's axis, which then
// stays with the lowest column among the best).
func readFreqAxes(angles [][]float64, p2 *val, freqs []float64) (axes []int, margin []float64) {
	k := p2.shape[1]
	axes, margin = make([]int, len(freqs)), make([]float64, len(freqs))
	for i, f := range freqs {
		res := make([]float64, k)
		for a := range k {
			for r, row := range angles {
				e := rotary.Wrap(row[i] - f*float64(p2.data[r*k+a]))
				res[a] += e * e
			}
		}
		best := 0
		for a := range k {
			if res[a] < res[best] {
				best = a
			}
		}
		second := math.Inf(1)
		for a := range k {
			if a != best && res[a] < second {
				second = res[a]
			}
		}
		axes[i] = best
		switch {
		case second == res[best]:
			margin[i] = 1
		case res[best] == 0:
			margin[i] = math.Inf(1)
		default:
			margin[i] = second / res[best]
		}
	}
	return axes, margin
}

// shown counts the frequencies whose axis the values decide (margin ≥ 2).
func shown(margins []float64) int {
	n := 0
	for _, m := range margins {
		if m >= 2 {
			n++
		}
	}
	return n
}

// tableLayouts reads a pair of cos and sin tables [.., rows, d] on the
// unit circle: their width, their rows and the layouts their repeated
// entries allow (half: each row's halves equal; interleaved: each pair's
// two entries equal); no layouts where the tables are no such pair.
func tableLayouts(cosT, sinT *val) (d, rows int, layouts []exec.RopeLayout) {
	if cosT.numel() != sinT.numel() || len(cosT.shape) < 2 || !unitCircle(cosT, sinT) {
		return 0, 0, nil
	}
	d = cosT.shape[len(cosT.shape)-1]
	rows = cosT.numel() / d
	if d%2 != 0 || d < 4 || rows < 2 {
		return 0, 0, nil
	}
	if halvesEqual(cosT.data, d) && halvesEqual(sinT.data, d) {
		layouts = append(layouts, exec.RopeHalf)
	}
	if pairsEqual(cosT.data) && pairsEqual(sinT.data) {
		layouts = append(layouts, exec.RopeInterleaved)
	}
	return d, rows, layouts
}
