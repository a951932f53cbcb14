package synth

import (
	"fmt"
	"math"
	"slices"

	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/precision"
)

// fitLearnedRope explains cos and sin tables [S, H, F] as cos and sin of
// positions over a grid times a frequency argument W [k, H, F] (learned
// per-head frequencies, one row per position axis): angles = P·W, P
// [S, k] the grid row-major, each axis's positions a + b·i, i = 0 … g−1.
// The grid's sizes are each way of writing S as k factors; each axis's
// step b is read off the angles between rows one step apart on it (the
// b whose b·W[a] matches them on the circle, scanned, then refined), its
// start a is 0 or centres the axis on zero (−b·(g−1)/2); the positions
// are constants of the request's shape. Tried where the tables' ids are
// neither an argument nor a grid of arguments.
//
// Where W is stored in a narrow format the reference may multiply in it
// (`pos.to(freqs)`: positions cast to W's dtype, the product rounded to
// it), and angles of tens of radians then carry errors of a tenth of a
// radian: the grid is read with a loose angle tolerance, both products are
// tried, and the recomputed tables (freeTables, within the format's
// tolerance) decide.
func (s *synth) fitLearnedRope(xs []*val, cosT, sinT *val) (*val, *val) {
	if len(cosT.shape) != 3 || !slices.Equal(cosT.shape, sinT.shape) || !unitCircle(cosT, sinT) {
		return nil, nil
	}
	S, H, F := cosT.shape[0], cosT.shape[1], cosT.shape[2]
	var w *val
	for _, x := range xs {
		if !x.integral() && len(x.shape) == 3 && x.shape[0] <= 3 && x.shape[1] == H && x.shape[2] == F {
			w = x
		}
	}
	if w == nil || S < 2 {
		return nil, nil
	}
	k, n := w.shape[0], H*F
	ang := make([]float64, S*n)
	for i := range ang {
		ang[i] = math.Atan2(float64(sinT.data[i]), float64(cosT.data[i]))
	}
	tol := readAngleTol(cosT.format)
	// how the product may be computed: in f32, or in W's narrow format
	// rounded once (a GEMM) or term by term (a CPU einsum's products and
	// running sum, each rounded)
	type product struct {
		f        precision.Format
		stepwise bool
	}
	products := []product{{f: precision.F32}}
	if w.format != precision.F32 {
		products = append(products, product{f: w.format}, product{f: w.format, stepwise: true})
	}
	for _, grid := range factorizations(S, k) {
		if len(grid) < k {
			grid = append(slices.Repeat([]int{1}, k-len(grid)), grid...)
		}
		pos := learnedGrid(ang, w.data, grid, n, tol)
		if pos == nil {
			continue
		}
		for _, pr := range products {
			data := pos
			if cosT.format != precision.F32 {
				data = refineNarrow(pos, grid, w.data, cosT, sinT, pr.f, pr.stepwise)
			}
			pv := &val{shape: []int{S, k}, data: data, format: precision.F32, origin: cosT.origin + "/positions"}
			cv, sv := s.freeTables(s.learnedAngles(pv, w, pr.f, pr.stepwise), 1, cosT, sinT)
			if cv != nil {
				s.em.constant(pv, fmt.Sprintf("positions on a %v grid, each axis a + b·i, read off the RoPE tables' angles at the learned frequencies (constants of the request's shape)", grid))
				return cv, sv
			}
		}
	}
	return nil, nil
}

// learnedAngles is positions pv [S, k] times frequencies w [k, H, F], as
// [S, H·F], computed in format f: one product (a GEMM, rounded once) or,
// stepwise, each axis's product rounded and summed in axis order with each
// partial sum rounded.
func (s *synth) learnedAngles(pv, w *val, f precision.Format, stepwise bool) *val {
	k, n := w.shape[0], w.shape[1]*w.shape[2]
	p := pv
	if f != precision.F32 {
		p = s.derive(&expr{op: program.OpCast, attrs: program.Attrs{Format: f}, args: []*val{pv}, out: f, label: "positions in W's format"})
	}
	w2 := s.reshape(w, []int{k, n})
	if !stepwise {
		wt := s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: []int{1, 0}}, args: []*val{w2}, out: f, label: "frequencies per axis"})
		return s.derive(&expr{op: program.OpLinear, args: []*val{p, wt, nil}, out: f, label: "positions·W"})
	}
	var acc *val
	for a := range k {
		pa := s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: 1, Start: a, End: a + 1}, args: []*val{p}, out: f, label: "one axis's positions"})
		wa := s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: 0, Start: a, End: a + 1}, args: []*val{w2}, out: f, label: "one axis's frequencies"})
		term := s.derive(&expr{op: program.OpMul, args: []*val{pa, wa}, out: f, label: "positions·W, one axis"})
		if acc == nil {
			acc = term
			continue
		}
		acc = s.derive(&expr{op: program.OpAdd, args: []*val{acc, term}, out: f, label: "positions·W, summed"})
	}
	return acc
}

// refineNarrow moves each axis's step of a grid read off narrow tables
// (pos [S, k], each axis a + b·i, the start 0 or centred) to where the
// tables recomputed as the reference computed them come closest: the
// positions and their product with w in format f, cos and sin rounded to
// the tables' format. The reading is off by a few percent there (angles
// of tens of radians rounded to a tenth of one), while the cast positions
// must land on the reference's own; each step is scanned within ±3 % of
// the reading, axis by axis, twice, on at most 256 rows and 64 columns.
func refineNarrow(pos []float32, g []int, w []float32, cosT, sinT *val, f precision.Format, stepwise bool) []float32 {
	k := len(g)
	S, n := len(pos)/k, len(w)/k
	stride := rowMajorStrides(g)
	step := make([]float64, k)
	centred := make([]bool, k)
	for a := range k {
		if g[a] > 1 {
			step[a] = float64(pos[stride[a]*k+a]) - float64(pos[a])
			centred[a] = pos[a] != 0
		}
	}
	build := func(step []float64) []float32 {
		out := make([]float32, S*k)
		for r := range S {
			for a := range k {
				start := 0.0
				if centred[a] {
					start = -step[a] * float64(g[a]-1) / 2
				}
				out[r*k+a] = float32(start + step[a]*float64((r/stride[a])%g[a]))
			}
		}
		return out
	}
	rows := make([]int, 0, 256)
	for i := range min(S, 256) {
		rows = append(rows, i*S/min(S, 256))
	}
	cost := func(p []float32) float64 {
		var c float64
		for _, r := range rows {
			for j := 0; j < n; j += max(1, n/64) {
				var acc float32
				for a := range k {
					t := f.Round(p[r*k+a]) * w[a*n+j]
					if stepwise {
						acc = f.Round(acc + f.Round(t))
					} else {
						acc += t
					}
				}
				x := float64(f.Round(acc))
				dc := float64(cosT.format.Round(float32(math.Cos(x))) - cosT.data[r*n+j])
				ds := float64(sinT.format.Round(float32(math.Sin(x))) - sinT.data[r*n+j])
				c += dc*dc + ds*ds
			}
		}
		return c
	}
	best := cost(build(step))
	for range 2 {
		for a := range k {
			if g[a] == 1 {
				continue
			}
			b0 := step[a]
			for i := -60; i <= 60; i++ {
				try := slices.Clone(step)
				try[a] = b0 * (1 + float64(i)*5e-4)
				if c := cost(build(try)); c < best {
					best, step = c, try
				}
			}
		}
	}
	return build(step)
}

// readAngleTol is how far an angle read off RoPE tables stored in format f
// may be from the one the reference computed: f32 tables give it to
// 1e-3; narrow ones were often computed in the narrow format too, where an
// angle of tens of radians is off by a tenth of one (the grid read with
// this tolerance is only a candidate: the tables recomputed decide).
func readAngleTol(f precision.Format) float64 {
	if f == precision.F32 {
		return 1e-3
	}
	return math.Pi / 4
}

// learnedGrid reads the positions [S, k] of a grid of sizes g (row-major)
// whose angles ang [S, n] are P·W (mod 2π) for frequencies w [k, n]: per
// axis the step b and the start (0 or centred) as fitLearnedRope says;
// nil where no step or start matches.
func learnedGrid(ang []float64, w []float32, g []int, n int, tol float64) []float32 {
	k := len(g)
	S := len(ang) / n
	stride := rowMajorStrides(g)
	step := make([]float64, k)
	for a := range k {
		if g[a] == 1 {
			continue
		}
		// the mean rotation between rows one step apart on axis a: the
		// same for every pair on the right grid (a wrong grid's pairs
		// disagree, and it is dropped before the scan)
		phi := make([]float64, n)
		for j := range n {
			var re, im float64
			pairs := 0
			for r := range S {
				if (r/stride[a])%g[a] == g[a]-1 {
					continue
				}
				d := ang[(r+stride[a])*n+j] - ang[r*n+j]
				re, im = re+math.Cos(d), im+math.Sin(d)
				pairs++
			}
			if math.Hypot(re, im) < math.Cos(tol)*float64(pairs) {
				return nil
			}
			phi[j] = math.Atan2(im, re)
		}
		b, ok := scanStep(phi, w[a*n:(a+1)*n], tol)
		if !ok {
			return nil
		}
		step[a] = b
	}
	// the starts: each axis at 0 or centred, the first row's angles decide
	for c := range 1 << k {
		start := make([]float64, k)
		for a := range k {
			if c&(1<<a) != 0 {
				if g[a] == 1 {
					start = nil
					break
				}
				start[a] = -step[a] * float64(g[a]-1) / 2
			}
		}
		if start == nil {
			continue
		}
		ok := true
		for j := 0; j < n && ok; j++ {
			var p float64
			for a := range k {
				p += start[a] * float64(w[a*n+j])
			}
			ok = math.Abs(wrapAngle(p-ang[j])) < tol
		}
		if !ok {
			continue
		}
		pos := make([]float32, S*k)
		for r := range S {
			for a := range k {
				i := (r / stride[a]) % g[a]
				pos[r*k+a] = float32(start[a] + step[a]*float64(i))
			}
		}
		return pos
	}
	return nil
}

// scanStep finds b with b·f ≡ phi (mod 2π) for every frequency: scanned
// over |b| ≤ 4096 on at most 16 of the frequencies (spread over them) at
// a pitch fine against the largest of those, then refined by least
// squares on every unwrapped angle; ok where it matches every one within
// tol.
func scanStep(phi []float64, f []float32, tol float64) (float64, bool) {
	var sub []int
	for j := 0; j < len(f); j += max(1, len(f)/16) {
		sub = append(sub, j)
	}
	var fmax float64
	for _, j := range sub {
		fmax = max(fmax, math.Abs(float64(f[j])))
	}
	if fmax == 0 {
		return 0, false
	}
	const bmax = 4096
	pitch := 0.05 / fmax
	if 2*bmax/pitch > 4e6 {
		return 0, false
	}
	cost := func(b float64) float64 {
		var c float64
		for _, j := range sub {
			c += 1 - math.Cos(b*float64(f[j])-phi[j])
		}
		return c
	}
	best, bc := 0.0, math.Inf(1)
	for b := -float64(bmax); b <= bmax; b += pitch {
		if c := cost(b); c < bc {
			best, bc = b, c
		}
	}
	refine := func(js []int) {
		var num, den float64
		for _, j := range js {
			fx := float64(f[j])
			u := phi[j] + 2*math.Pi*math.Round((best*fx-phi[j])/(2*math.Pi))
			num, den = num+fx*u, den+fx*fx
		}
		best = num / den
	}
	// the scanned frequencies first (the scan's pitch is fine against
	// them, not necessarily against the others), then all
	all := make([]int, len(f))
	for j := range all {
		all[j] = j
	}
	for _, js := range [][]int{sub, sub, all, all} {
		refine(js)
	}
	for j, x := range f {
		if math.Abs(wrapAngle(best*float64(x)-phi[j])) > tol {
			return 0, false
		}
	}
	return best, true
}

// wrapAngle is a reduced to (−π, π].
func wrapAngle(a float64) float64 {
	return a - 2*math.Pi*math.Round(a/(2*math.Pi))
}

// rowMajorStrides are the row strides of a row-major grid of sizes g: axis a
// advances every stride[a] rows.
func rowMajorStrides(g []int) []int {
	stride := make([]int, len(g))
	st := 1
	for a := len(g) - 1; a >= 0; a-- {
		stride[a] = st
		st *= g[a]
	}
	return stride
}
