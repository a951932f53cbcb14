package synth

import (
	"fmt"
	"math"
	"slices"

	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/precision"
)

// A map resized the way torch's interpolate does it (nn.Upsample,
// F.interpolate): each output cell reads, along each spatial axis, one
// source cell (nearest) or two weighted by λ0 = 1 − λ1 and λ1 (linear),
// the source index and λ computed in f32 from the sizes; a bilinear
// resize is the linear one along the width, then along the height, in
// f32, rounded once. Written with gathers, products and sums only, so
// every backend runs it with torch's arithmetic.

// resampleMode is one of interpolate's index rules.
type resampleMode int

const (
	resampleNearest        resampleMode = iota // floor(i·n/m)
	resampleLinear                             // (i + ½)·n/m − ½, clamped at 0
	resampleLinearCorner                       // i·(n − 1)/(m − 1): align_corners=True
	resampleLinearAA                           // antialias=True: a triangle filter widened by n/m
	resampleCubicAA                            // antialias=True: Keys' cubic (a = −½) widened by n/m
	resampleCubic                              // Keys' cubic (a = −¾) over the four cells around (i + ½)·n/m − ½, indices clamped at the borders
	resampleCubicCorner                        // the same around i·(n − 1)/(m − 1): align_corners=True
	resampleAdaptive                           // adaptive average pooling: cells ⌊i·n/m⌋ … ⌈(i + 1)·n/m⌉ − 1, averaged
	resampleLinearAACorner                     // antialias=True, align_corners=True: the triangle filter at the scale (n − 1)/(m − 1)
	resampleCubicAACorner                      // antialias=True, align_corners=True: Keys' cubic (a = −½) at that scale
)

func (m resampleMode) String() string {
	return [...]string{"nearest", "bilinear", "bilinear, corners aligned", "bilinear, antialiased", "bicubic, antialiased",
		"bicubic", "bicubic, corners aligned", "adaptive average", "bilinear, antialiased, corners aligned", "bicubic, antialiased, corners aligned"}[m]
}

// weighted reports whether m's taps are a matrix of weights [m, n]
// (resampleMatrix) rather than one or two gathered cells: interpolate's
// antialias=True filters (a separate kernel in torch, which also grows a
// map with them: Keys' a = −½, not the plain bicubic's −¾), the plain
// bicubic's four taps, adaptive pooling's windows.
func (m resampleMode) weighted() bool {
	return m >= resampleLinearAA
}

// resampleModes are the modes tried for a resize.
func resampleModes() []resampleMode {
	return []resampleMode{resampleLinear, resampleNearest, resampleLinearCorner, resampleCubicAA, resampleLinearAA,
		resampleCubic, resampleCubicCorner, resampleAdaptive, resampleCubicAACorner, resampleLinearAACorner}
}

// resampleMatrix is the [m, n] weights of an antialiased resize of n
// cells to m along one axis, as torch's separable antialias kernel
// computes them: centre c = s·(i + ½) with s = n/m, the filter widened to
// a support of s·(its half-width) where s ≥ 1, each tap's weight
// filter((j − c + ½)/s) over the cells within the support, divided by
// their sum; with corners aligned torch's kernel only takes s = (n − 1)/(m
// − 1) (0 for one output cell), the centres and filter as they are.
// Every output sums its taps in index order. The weights agree
// with torch's bit for bit on whole-ratio shrinks and to a few ulps
// elsewhere (87–94 % of them exact: torch's compiled arithmetic is not
// fully recovered), the sums to within f32 rounding (torch's vectorised
// loop adds some taps in another order): f32-close, not bit-exact.
func resampleMatrix(n, m int, mode resampleMode) []float32 {
	switch mode {
	case resampleCubic, resampleCubicCorner:
		return cubicMatrix(n, m, mode == resampleCubicCorner)
	case resampleAdaptive:
		return adaptiveMatrix(n, m)
	}
	scale := float32(n) / float32(m)
	if mode == resampleLinearAACorner || mode == resampleCubicAACorner {
		scale = 0
		if m > 1 {
			scale = float32(n-1) / float32(m-1)
		}
	}
	half, filter := float32(1), func(x float32) float32 { return max(1-x, 0) }
	if mode == resampleCubicAA || mode == resampleCubicAACorner {
		const a = -0.5
		half = 2
		// torch's compiled polynomials, multiplies and adds fused
		fma := func(x, y, z float32) float32 { return float32(math.FMA(float64(x), float64(y), float64(z))) }
		filter = func(x float32) float32 {
			switch {
			case x < 1:
				return fma(fma(a+2, x, -(a+3))*x, x, 1)
			case x < 2:
				return fma(fma(fma(a, x, -5*a), x, 8*a), x, -4*a)
			}
			return 0
		}
	}
	support, inv := half, float32(1)
	if scale >= 1 {
		support, inv = float32(float64(half)*float64(scale)), float32(1/float64(scale))
	}
	w := make([]float32, m*n)
	for i := range m {
		c := float32(float64(scale) * (float64(i) + 0.5))
		lo := max(int(float64(c-support)+0.5), 0)
		hi := min(int(float64(c+support)+0.5), n)
		var total float32
		row := w[i*n:][:n]
		for j := lo; j < hi; j++ {
			x := float32((float64(float32(j)-c) + 0.5) * float64(inv))
			row[j] = filter(float32(math.Abs(float64(x))))
			total += row[j]
		}
		if total != 0 {
			for j := lo; j < hi; j++ {
				row[j] /= total
			}
		}
	}
	return w
}

// cubicMatrix is the [m, n] weights of torch's plain bicubic resize of n
// cells to m (upsample_bicubic2d): the source x = (i + ½)·n/m − ½ (or
// i·(n − 1)/(m − 1) with corners aligned), not clamped; the four cells
// ⌊x⌋ − 1 … ⌊x⌋ + 2, each clamped into the axis, weighted by Keys'
// cubic with a = −¾ at t = x − ⌊x⌋ (torch's cubic_convolution1 and 2, in
// f32); taps that clamp onto one cell add up.
func cubicMatrix(n, m int, corners bool) []float32 {
	const a = -0.75
	scale := float32(n) / float32(m)
	if corners {
		scale = 0
		if m > 1 {
			scale = float32(n-1) / float32(m-1)
		}
	}
	near := func(x float32) float32 { return ((a+2)*x-(a+3))*x*x + 1 }  // |x| ≤ 1
	far := func(x float32) float32 { return ((a*x-5*a)*x+8*a)*x - 4*a } // 1 < |x| < 2
	w := make([]float32, m*n)
	for i := range m {
		x := scale*(float32(i)+0.5) - 0.5
		if corners {
			x = scale * float32(i)
		}
		f := float32(math.Floor(float64(x)))
		t := x - f
		taps := [4]float32{far(t + 1), near(t), near(1 - t), far(2 - t)}
		for k, c := range taps {
			j := min(max(int(f)-1+k, 0), n-1)
			w[i*n+j] += c
		}
	}
	return w
}

// adaptiveMatrix is the [m, n] weights of adaptive average pooling of n
// cells to m (torch's adaptive_avg_pool): output i averages cells
// ⌊i·n/m⌋ up to ⌈(i + 1)·n/m⌉ − 1, each weighted 1/count.
func adaptiveMatrix(n, m int) []float32 {
	w := make([]float32, m*n)
	for i := range m {
		lo, hi := i*n/m, ((i+1)*n+m-1)/m
		for j := lo; j < hi; j++ {
			w[i*n+j] = 1 / float32(hi-lo)
		}
	}
	return w
}

// resampleAxis is the source cells and weights of resizing n cells to m
// along one axis: output i reads lo[i]·w0[i] + hi[i]·w1[i] (nearest:
// lo[i] alone).
func resampleAxis(n, m int, mode resampleMode) (lo, hi []int, w0, w1 []float32) {
	lo, hi, w0, w1 = make([]int, m), make([]int, m), make([]float32, m), make([]float32, m)
	scale := float32(n) / float32(m)
	if mode == resampleLinearCorner {
		scale = 0
		if m > 1 {
			scale = float32(n-1) / float32(m-1)
		}
	}
	for i := range m {
		switch mode {
		case resampleNearest:
			lo[i] = min(int(math.Floor(float64(float32(i)*scale))), n-1)
			if m == 2*n {
				lo[i] = i >> 1
			}
			hi[i], w0[i] = lo[i], 1
			continue
		case resampleLinear:
			src := scale*(float32(i)+0.5) - 0.5
			w1[i] = max(src, 0)
		case resampleLinearCorner:
			w1[i] = scale * float32(i)
		}
		lo[i] = int(w1[i])
		hi[i] = lo[i]
		if lo[i] < n-1 {
			hi[i]++
		}
		w1[i] = min(max(w1[i]-float32(lo[i]), 0), 1)
		w0[i] = 1 - w1[i]
	}
	return lo, hi, w0, w1
}

// fitResample explains t [B, C, Ho, Wo] as x [B, C, H, W] resized by
// interpolate in each of its modes (a parameterless call's result: an
// upsampling module; or a value of the scope resized inside a forward).
// Only where the map's size changes.
func (s *synth) fitResample(x, t *val) *val {
	if len(x.shape) != 4 || len(t.shape) != 4 || x.shape[0] != t.shape[0] || x.shape[1] != t.shape[1] || x.integral() ||
		slices.Equal(x.shape, t.shape) {
		return nil
	}
	var cands []*expr
	for _, mode := range resampleModes() {
		if e := s.resampleExpr(x, t.shape[2], t.shape[3], mode, t.format); e != nil {
			cands = append(cands, e)
		}
	}
	v, ev := s.best(t, cands)
	if v != nil {
		v.fit = &leafFit{kind: "glue", candidates: ev}
	}
	return v
}

// resampleExpr is x [B, C, H, W] resized to [B, C, ho, wo] in mode: the
// width pass, then the height pass, in f32, the last step rounded to out.
func (s *synth) resampleExpr(x *val, ho, wo int, mode resampleMode, out precision.Format) *expr {
	b, c, h, w := x.shape[0], x.shape[1], x.shape[2], x.shape[3]
	// each pass gathers along the first axis of [n, rest]
	pass := func(v *val, n, m int, axis string, last bool) *expr {
		lo, hi, w0, w1 := resampleAxis(n, m, mode)
		ids := func(name string, at []int) *val {
			d := make([]float32, len(at))
			for i, a := range at {
				d[i] = float32(a)
			}
			c := s.relConst(fmt.Sprintf("resample[%d→%d,%s,%s]", n, m, mode, name), []int{m}, d,
				fmt.Sprintf("the source cell each of %d cells reads, %s, along the %s (made from the sizes)", m, mode, axis))
			c.intType = true
			return c
		}
		weights := func(name string, ws []float32) *val {
			return s.relConst(fmt.Sprintf("resample[%d→%d,%s,%s]", n, m, mode, name), []int{m, 1}, slices.Clone(ws),
				fmt.Sprintf("the weight of each of %d cells' %s source, %s, along the %s (made from the sizes)", m, name, mode, axis))
		}
		f := precision.F32
		if last {
			f = out
		}
		if mode.weighted() {
			wm := s.relConst(fmt.Sprintf("resample[%d→%d,%s]", n, m, mode), []int{m, n}, resampleMatrix(n, m, mode),
				fmt.Sprintf("the weights of each of %d cells' sources, %s, along the %s (made from the sizes)", m, mode, axis))
			return &expr{op: program.OpMatMul, args: []*val{wm, v}, out: f, label: mode.String() + " along the " + axis}
		}
		a := s.derive(&expr{op: program.OpGather, args: []*val{v, ids("lo", lo)}, out: v.format, label: "each cell's source along the " + axis})
		if a == nil {
			return nil
		}
		if mode == resampleNearest {
			return &expr{op: program.OpReshape, attrs: program.Attrs{Shape: slices.Clone(a.shape)}, args: []*val{a}, out: f, label: "the nearest source along the " + axis}
		}
		bq := s.derive(&expr{op: program.OpGather, args: []*val{v, ids("hi", hi)}, out: v.format, label: "each cell's next source along the " + axis})
		if bq == nil {
			return nil
		}
		a = s.derive(&expr{op: program.OpMul, args: []*val{a, weights("w0", w0)}, out: precision.F32, label: "times λ0"})
		bq = s.derive(&expr{op: program.OpMul, args: []*val{bq, weights("w1", w1)}, out: precision.F32, label: "times λ1"})
		return &expr{op: program.OpAdd, args: []*val{a, bq}, out: f, label: "linear interpolation along the " + axis}
	}
	// the width pass: [W, B·C·H]
	cur := s.reshape(s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: []int{3, 0, 1, 2}}, args: []*val{x}, out: x.format}), []int{w, b * c * h})
	if cur == nil {
		return nil
	}
	if w != wo {
		e := pass(cur, w, wo, "width", h == ho)
		if e == nil {
			return nil
		}
		if cur = s.derive(e); cur == nil {
			return nil
		}
	}
	// the height pass: [H, B·C·Wo]
	cur = s.reshape(cur, []int{wo, b, c, h})
	cur = s.reshape(s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: []int{3, 1, 2, 0}}, args: []*val{cur}, out: cur.format}), []int{h, b * c * wo})
	if cur == nil {
		return nil
	}
	if h != ho {
		e := pass(cur, h, ho, "height", true)
		if e == nil {
			return nil
		}
		if cur = s.derive(e); cur == nil {
			return nil
		}
	}
	cur = s.reshape(cur, []int{ho, b, c, wo})
	if cur == nil {
		return nil
	}
	return &expr{op: program.OpPermute, attrs: program.Attrs{Perm: []int{1, 2, 0, 3}}, args: []*val{cur}, out: out,
		label: fmt.Sprintf("resized %dx%d to %dx%d, %s", h, w, ho, wo, mode)}
}
