package synth

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/precision"
)

// TestParamScaled plants layer scales: a parameter vector times a value
// of the target's shape along the channel axis, γ [C, 1, 1] on a
// channels-first map (its height, width and channels all 4, so only the
// values tell the axis) and γ [C] on channels-last rows.
func TestParamScaled(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 9))
	for _, c := range []struct {
		name  string
		shape []int
		gamma []int
		axis  int
	}{
		{"channels first", []int{1, 4, 4, 4}, []int{4, 1, 1}, 1},
		{"channels last", []int{1, 5, 6}, []int{6}, 2},
	} {
		x := randVal(rng, c.shape...)
		g := randVal(rng, c.gamma...)
		g.param = true
		want := make([]float32, len(x.data))
		stride := 1
		for _, n := range c.shape[c.axis+1:] {
			stride *= n
		}
		for i, v := range x.data {
			want[i] = v * g.data[(i/stride)%c.shape[c.axis]]
		}
		s, _, target := planted(t, precision.F32, c.shape, want)
		got := s.paramScaled(target, []*val{x, g})
		if got == nil {
			t.Errorf("%s: not explained", c.name)
			continue
		}
		if e := relRMS(precision.F32, got.data, target.data); e > 1e-7 {
			t.Errorf("%s: rel-RMS %.3g", c.name, e)
		}
	}
}

// TestOwnNorm plants a module that normalises its input itself with its
// own γ and β before calling its children: a batch norm at its initial
// statistics over a channels-first map (timm's BatchNormAct2d) and a
// layer norm over channels-last rows; each explained by ownNorm from the
// scope's argument and parameters.
func TestOwnNorm(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 1))
	for _, c := range []struct {
		name  string
		shape []int
		norm  func(x, g, b *val) []float32
	}{
		{"batch norm, channels first", []int{1, 4, 3, 3}, func(x, g, b *val) []float32 {
			out := make([]float32, len(x.data))
			inv := float32(1 / math.Sqrt(float64(float32(1)+1e-5)))
			for i, v := range x.data {
				ch := (i / 9) % 4
				out[i] = v*(g.data[ch]*inv) + b.data[ch]
			}
			return out
		}},
		{"layer norm, channels last", []int{1, 5, 4}, func(x, g, b *val) []float32 {
			out := make([]float32, len(x.data))
			for r := range 5 {
				row := x.data[r*4 : r*4+4]
				var mean, vr float64
				for _, v := range row {
					mean += float64(v) / 4
				}
				for _, v := range row {
					vr += (float64(v) - mean) * (float64(v) - mean) / 4
				}
				for i, v := range row {
					out[r*4+i] = float32((float64(v)-mean)/math.Sqrt(vr+1e-5)*float64(g.data[i]) + float64(b.data[i]))
				}
			}
			return out
		}},
	} {
		x := randVal(rng, c.shape...)
		g, b := randVal(rng, 4), randVal(rng, 4)
		s, sc, target := planted(t, precision.F32, c.shape, c.norm(x, g, b))
		for name, p := range map[string]*val{"own.weight": g, "own.bias": b} {
			p.param, p.origin = true, name
			s.params[name] = p
		}
		sc.call.Params = []string{"own.weight", "own.bias"}
		sc.add(x, false)
		sc.arg[x] = true
		if got := s.ownNorm(target, sc); got == nil {
			t.Errorf("%s: not explained", c.name)
		} else if e := relRMS(precision.F32, got.data, target.data); e > tolerance(precision.F32) {
			t.Errorf("%s: rel-RMS %.3g", c.name, e)
		}
	}
}

// TestChannelAffine plants a forward that normalises its pixels (the
// request's input) by constants it keeps outside its parameters, (x −
// mean)·k per colour channel, and checks the constants read off are the
// code's literals.
func TestChannelAffine(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 2))
	mean := []float32{0.4488, 0.4371, 0.404}
	for _, k := range []float32{1, 255} {
		x := randVal(rng, 1, 3, 4, 4)
		x.request = true
		want := make([]float32, len(x.data))
		for i, v := range x.data {
			want[i] = (v - mean[i/16]) * k
		}
		s, _, target := planted(t, precision.F32, x.shape, want)
		got := s.channelAffine(target, []*val{x})
		if got == nil {
			t.Fatalf("k=%g: not explained", k)
		}
		if e := relRMS(precision.F32, got.data, target.data); e > 1e-7 {
			t.Errorf("k=%g: rel-RMS %.3g", k, e)
		}
		shift := got
		if k != 1 {
			shift = got.from.args[0]
		}
		if c := shift.from.args[1].data; !slices.Equal(c, []float32{-mean[0], -mean[1], -mean[2]}) {
			t.Errorf("k=%g: shift constants %v, want the negated %v", k, c, mean)
		}
	}
	// (x − mean)/std with ImageNet's literals: a division by the literal
	std := []float32{0.229, 0.224, 0.225}
	x := randVal(rng, 1, 3, 4, 4)
	x.request = true
	want := make([]float32, len(x.data))
	for i, v := range x.data {
		want[i] = (v - 0.5) / std[i/16]
	}
	s, _, target := planted(t, precision.F32, x.shape, want)
	if got := s.channelAffine(target, []*val{x}); got == nil || got.from.op != program.OpDiv || !slices.Equal(got.from.args[1].data, std) {
		t.Errorf("(x − 0.5)/std: %v", got)
	}
	// not of a value the model computed: there a per-channel map is as
	// likely a statistic of the run
	computed := *x
	computed.request = false
	s, _, target = planted(t, precision.F32, x.shape, want)
	if got := s.channelAffine(target, []*val{&computed}); got != nil {
		t.Errorf("constants read off a computed value: %s", got)
	}
	// no constants where there are none: the identity, and a series
	// standardised by its own statistics (constants that fit this run
	// alone)
	s, _, target = planted(t, precision.F32, x.shape, x.data)
	if got := s.channelAffine(target, []*val{x}); got != nil {
		t.Errorf("the identity explained as %s", got)
	}
	for i := range want {
		c := i / 16
		var mean, sq float64
		for _, v := range x.data[c*16 : c*16+16] {
			mean += float64(v) / 16
			sq += float64(v) * float64(v) / 16
		}
		want[i] = float32((float64(x.data[i]) - mean) / math.Sqrt(sq-mean*mean+1e-5))
	}
	s, _, target = planted(t, precision.F32, x.shape, want)
	if got := s.channelAffine(target, []*val{x}); got != nil {
		t.Errorf("a series standardised by its own statistics explained as constants: %s", got)
	}
}

// TestSmallStridedConv: a depthwise 3×3 convolution of stride 2, padded 1,
// over a 4×4 map gives 2×2, the size an unpadded stride-1 one gives too;
// the values decide (fitConv2D falls back to the strided readings).
func TestSmallStridedConv(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	x := randVal(rng, 1, 2, 4, 4)
	w := randVal(rng, 2, 1, 3, 3)
	w.param = true
	want := make([]float32, 2*2*2)
	for ch := range 2 {
		for i := range 2 {
			for j := range 2 {
				var acc float32
				for a := range 3 {
					for b := range 3 {
						r, c := 2*i-1+a, 2*j-1+b
						if r < 0 || c < 0 || r >= 4 || c >= 4 {
							continue
						}
						acc += x.data[ch*16+r*4+c] * w.data[ch*9+a*3+b]
					}
				}
				want[ch*4+i*2+j] = acc
			}
		}
	}
	s, _, target := planted(t, precision.F32, []int{1, 2, 2, 2}, want)
	explainedWithin(t, s.fitConv2D(x, []*val{w}, target), target)
}

// TestRearranged plants element moves whose both sides split axes:
// MobileViT's unfolding of a [1, C, H, W] map into [patch cells, patches,
// C] rows, Swin's window partition of [1, H, W, C] into [windows, cells,
// C], and the unfolding again over values of a few levels (bf16-like
// repeats, a ReLU's zeros) where the map cannot be read off unique values.
func TestRearranged(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	coarse := func(v *val) *val {
		for i, x := range v.data {
			v.data[i] = float32(max(0, math.Round(float64(x)*2)) / 2)
		}
		return v
	}
	for _, c := range []struct {
		name        string
		v           *val
		split, perm []int
		target      []int
	}{
		{"unfolded patches", randVal(rng, 1, 4, 4, 6), []int{1, 4, 2, 2, 3, 2}, []int{0, 3, 5, 2, 4, 1}, []int{4, 6, 4}},
		{"window partition", randVal(rng, 1, 4, 6, 3), []int{1, 2, 2, 3, 2, 3}, []int{0, 1, 3, 2, 4, 5}, []int{6, 4, 3}},
		{"repeated values", coarse(randVal(rng, 1, 4, 4, 6)), []int{1, 4, 2, 2, 3, 2}, []int{0, 3, 5, 2, 4, 1}, []int{4, 6, 4}},
	} {
		want := permuteData(&val{shape: c.split, data: c.v.data}, c.perm)
		s, _, target := planted(t, precision.F32, c.target, want)
		got := s.rearranged(target, []*val{c.v})
		if got == nil {
			t.Errorf("%s: not explained", c.name)
			continue
		}
		if !slices.Equal(got.data, target.data) {
			t.Errorf("%s: not reproduced exactly", c.name)
		}
	}
}

// TestAxisNorm plants a scaler that standardises a series [1, T, C] over
// its time axis (PatchTST's): explained by axisNorm as a parameterless
// layer norm with the time axis moved last.
func TestAxisNorm(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	const steps, ch = 8, 3
	x := randVal(rng, 1, steps, ch)
	want := make([]float32, len(x.data))
	for c := range ch {
		var mean, vr float64
		for i := range steps {
			mean += float64(x.data[i*ch+c]) / steps
		}
		for i := range steps {
			d := float64(x.data[i*ch+c]) - mean
			vr += d * d / steps
		}
		for i := range steps {
			want[i*ch+c] = float32((float64(x.data[i*ch+c]) - mean) / math.Sqrt(vr+1e-5))
		}
	}
	s, _, target := planted(t, precision.F32, x.shape, want)
	explainedWithin(t, s.axisNorm(target, []*val{x}), target)
}

// TestUsualMove: the moves transposed reads by their order where a
// target's axes share one length.
func TestUsualMove(t *testing.T) {
	for _, c := range []struct {
		perm []int
		want bool
	}{
		{[]int{0, 2, 3, 1}, true}, {[]int{0, 3, 1, 2}, true}, {[]int{0, 1, 3, 2}, false}, {[]int{1, 0, 2}, false},
		{[]int{0, 2, 1}, false}, {[]int{2, 3, 0, 1}, false}, {[]int{1, 2, 3, 0}, false},
	} {
		if got := usualMove(c.perm); got != c.want {
			t.Errorf("usualMove(%v) = %v, want %v", c.perm, got, c.want)
		}
	}
}

// TestPairCoordsTable: SwinV2-CR's pair coordinates of a 2×3 window
// (sign(Δ)·log(1 + |Δ|) of each pair's row and column offsets, query minus
// key) are read as made from the window's shape, and bias [S², H] tables
// of a position MLP read in place; random values and a table with one
// entry changed are not.
func TestPairCoordsTable(t *testing.T) {
	const h, w = 2, 3
	cells := h * w
	table := &val{shape: []int{cells * cells, 2}, data: make([]float32, cells*cells*2), format: precision.F32}
	f := func(d int) float32 {
		return float32(math.Copysign(math.Log1p(math.Abs(float64(d))), float64(d)))
	}
	for i := range cells {
		for j := range cells {
			table.data[(i*cells+j)*2] = f(i/w - j/w)
			table.data[(i*cells+j)*2+1] = f(i%w - j%w)
		}
	}
	if !pairCoordsTable(table) {
		t.Error("the pair coordinates are not read")
	}
	bent := &val{shape: table.shape, data: slices.Clone(table.data), format: precision.F32}
	bent.data[7] += 0.5
	if pairCoordsTable(bent) {
		t.Error("a table with one entry changed is read as pair coordinates")
	}
	if pairCoordsTable(randVal(rand.New(rand.NewPCG(1, 1)), cells*cells, 2)) {
		t.Error("random values are read as pair coordinates")
	}
}

// TestAvgPool plants average pools of a 5×4 map: 3×3 of stride 1 padded
// 1 without the padding in the count (PoolFormer's token mixer) and 2×2 of
// stride 2; fitAvgPool reproduces each.
func TestAvgPool(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 3))
	x := randVal(rng, 1, 2, 5, 4)
	pool := func(k, st, p int) ([]int, []float32) {
		ho, wo := (5+2*p-k)/st+1, (4+2*p-k)/st+1
		out := make([]float32, 2*ho*wo)
		for c := range 2 {
			for i := range ho {
				for j := range wo {
					var sum float32
					n := 0
					for a := range k {
						for b := range k {
							r, q := i*st-p+a, j*st-p+b
							if r >= 0 && q >= 0 && r < 5 && q < 4 {
								sum += x.data[c*20+r*4+q]
								n++
							}
						}
					}
					out[(c*ho+i)*wo+j] = sum / float32(n)
				}
			}
		}
		return []int{1, 2, ho, wo}, out
	}
	for _, c := range [][3]int{{3, 1, 1}, {2, 2, 0}} {
		shape, want := pool(c[0], c[1], c[2])
		s, _, target := planted(t, precision.F32, shape, want)
		explainedWithin(t, s.fitAvgPool(x, target), target)
	}
	// along a sequence [B, C, L] (SEW's squeeze): windows of 2 at stride
	// 2 over 9 cells, the last cell dropped; every third cell of 9 is not
	seq := randVal(rng, 1, 3, 9)
	squeezed := make([]float32, 3*4)
	strided := make([]float32, 3*3)
	for c := range 3 {
		for i := range 4 {
			squeezed[c*4+i] = (seq.data[c*9+2*i] + seq.data[c*9+2*i+1]) / 2
		}
		for i := range 3 {
			strided[c*3+i] = seq.data[c*9+3*i]
		}
	}
	s, _, target := planted(t, precision.F32, []int{1, 3, 4}, squeezed)
	explainedWithin(t, s.fitAvgPool(seq, target), target)
	s, _, target = planted(t, precision.F32, []int{1, 3, 3}, strided)
	if v := s.fitAvgPool(seq, target); v != nil && relRMS(precision.F32, v.data, target.data) <= tolerance(precision.F32) {
		t.Errorf("every third cell explained as an average pool: %s", describe(v))
	}
}

// TestMaxOverAxis plants Hiera's pooled queries: [B, heads, stride·n, d]
// read as [B, heads, stride, n, d], the largest over the stride axis.
func TestMaxOverAxis(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 5))
	const heads, stride, n, d = 2, 4, 3, 5
	v := randVal(rng, 1, heads, stride*n, d)
	want := make([]float32, heads*n*d)
	for h := range heads {
		for i := range n {
			for e := range d {
				m := float32(math.Inf(-1))
				for j := range stride {
					m = max(m, v.data[((h*stride+j)*n+i)*d+e])
				}
				want[(h*n+i)*d+e] = m
			}
		}
	}
	s, _, target := planted(t, precision.F32, []int{1, heads, n, d}, want)
	got := s.maxOverAxis(target, []*val{v})
	if got == nil || !slices.Equal(got.data, target.data) {
		t.Fatalf("not reproduced: %v", got)
	}
}

// TestMaxPool plants max pools of a 7×6 map (a stem's 3×3 of stride 2
// padded 1, a 2×2 of stride 2 in ceil mode keeping the odd last row, a
// stride-1 pool of the map's own size): each is read with its window,
// stride, padding and mode, exactly; a map that is no pool of x (its
// values are not x's) is not explained as one.
func TestMaxPool(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 4))
	const h, w = 7, 6
	x := randVal(rng, 1, 2, h, w)
	for _, p := range []program.ConvParams{
		{Kernel: 3, Stride: 2, Pad: 1},
		{Kernel: 2, Stride: 2, Ceil: true},
		{Kernel: 3, Stride: 1, Pad: 1},
	} {
		out, err := program.PoolShape(x.shape, p)
		if err != nil {
			t.Fatal(err)
		}
		want := make([]float32, 0, out[1]*out[2]*out[3])
		for c := range 2 {
			for i := range out[2] {
				for j := range out[3] {
					m := float32(math.Inf(-1))
					for a := range p.Kernel {
						for b := range p.Kernel {
							r, q := i*p.Stride-p.Pad+a, j*p.Stride-p.Pad+b
							if r >= 0 && q >= 0 && r < h && q < w {
								m = max(m, x.data[(c*h+r)*w+q])
							}
						}
					}
					want = append(want, m)
				}
			}
		}
		s, _, target := planted(t, precision.F32, out, want)
		got := s.fitMaxPool(x, target)
		if got == nil || !slices.Equal(got.data, want) {
			t.Fatalf("pool %+v: not reproduced", p)
		}
		if a := got.from.attrs.Conv; a != p {
			t.Errorf("pool %+v read as %+v", p, a)
		}
	}
	act := make([]float32, len(x.data))
	for i, v := range x.data {
		act[i] = max(v, 0) + 0.5
	}
	s, _, target := planted(t, precision.F32, x.shape, act)
	if got := s.fitMaxPool(x, target); got != nil {
		t.Errorf("a shifted ReLU read as %s", got.from.label)
	}
}

// TestOffsetBiasAdded plants a module that adds a relative-position bias
// to the scores it is handed: table [(2g−1)², H] gathered at each query
// and key's offset in a g×g window (query minus key, row-major), heads
// first. The sum is read with the table; random scores plus noise are not.
func TestOffsetBiasAdded(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 8))
	const g, heads, batch = 3, 2, 2
	rows, side := g*g, 2*g-1
	scores := randVal(rng, batch, heads, rows, rows)
	table := randVal(rng, side*side, heads)
	table.param = true
	want := make([]float32, len(scores.data))
	for b := range batch {
		for h := range heads {
			for i := range rows {
				for j := range rows {
					dy, dx := i/g-j/g+g-1, i%g-j%g+g-1
					k := ((b*heads+h)*rows+i)*rows + j
					want[k] = scores.data[k] + table.data[(dy*side+dx)*heads+h]
				}
			}
		}
	}
	s, sc, target := planted(t, precision.F32, scores.shape, want, scores, table)
	explainedWithin(t, s.offsetBiasAdded(target, sc, sc.vals), target)
	noise := slices.Clone(scores.data)
	for i := range noise {
		noise[i] += float32(rng.NormFloat64())
	}
	s, sc, target = planted(t, precision.F32, scores.shape, noise, scores, table)
	if v := s.offsetBiasAdded(target, sc, sc.vals); v != nil {
		t.Error("scores plus noise read as a relative-position bias")
	}
}

// TestHintedHeadDims: a scope that made per-head probabilities [B, H, S,
// S] of the target's rows (an eager attention's dropout argument) shows
// the head count, width/H; one of another row count, a value the scope
// was handed rather than made, or a head count that does not divide the
// width shows nothing.
func TestHintedHeadDims(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	target := randVal(rng, 2, 16, 48)
	cases := []struct {
		name  string
		probs *val
		own   bool
		want  []int
	}{
		{"four heads of 12", randVal(rng, 2, 4, 16, 16), true, []int{12}},
		{"handed, not made", randVal(rng, 2, 4, 16, 16), false, nil},
		{"other rows", randVal(rng, 2, 4, 9, 9), true, nil},
		{"five heads", randVal(rng, 2, 5, 16, 16), true, nil},
	}
	for _, c := range cases {
		sc := &scope{own: map[*val]bool{}, arg: map[*val]bool{}}
		sc.add(c.probs, c.own)
		var s synth
		if got := s.hintedHeadDims(sc, target); !slices.Equal(got, c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

// TestRearrangedPlus plants NesT's blockify: a map [1, C, 4, 4] moved
// channels last and cut into 2×2 blocks ([1, 4 blocks, 4 cells, C]), plus
// a position table [1, 4, 4, C], the sum rounded to bf16. Read as the
// move plus the table; a sum with another map's elements is not.
func TestRearrangedPlus(t *testing.T) {
	rng := rand.New(rand.NewPCG(6, 6))
	const c, side, blk = 3, 4, 2
	round := func(v *val) *val {
		for i := range v.data {
			v.data[i] = precision.BF16.Round(v.data[i])
		}
		v.format = precision.BF16
		return v
	}
	x := round(randVal(rng, 1, c, side, side))
	pos := round(randVal(rng, 1, 4, blk*blk, c))
	pos.param = true
	want := make([]float32, 4*blk*blk*c)
	for gy := range side / blk {
		for gx := range side / blk {
			for by := range blk {
				for bx := range blk {
					for ch := range c {
						i := (((gy*2+gx)*blk+by)*blk+bx)*c + ch
						want[i] = precision.BF16.Round(x.data[(ch*side+gy*blk+by)*side+gx*blk+bx] + pos.data[i])
					}
				}
			}
		}
	}
	s, sc, target := planted(t, precision.BF16, []int{1, 4, blk * blk, c}, want, x, pos)
	got := s.rearrangedPlus(target, sc.vals)
	if got == nil || relRMS(precision.BF16, got.data, target.data) > looseFloor(precision.BF16) {
		t.Fatalf("not explained: %v", got)
	}
	other := round(randVal(rng, 1, c, side, side))
	s, sc, target = planted(t, precision.BF16, []int{1, 4, blk * blk, c}, want, other, pos)
	if v := s.rearrangedPlus(target, sc.vals); v != nil {
		t.Errorf("another map's elements read as the move: %s", v.from.label)
	}
}

// TestPlusRearranged plants TNT's pixel embedding: a position table
// [1, C, 2, 2] added to each of 3 patches' maps [3, C, 2, 2], then each
// map's cells laid out as rows ([3, 4, C]). Read as the sum moved; the
// same move of the maps without the table is not taken for it.
func TestPlusRearranged(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 9))
	const patches, c = 3, 5
	x, pos := randVal(rng, patches, c, 2, 2), randVal(rng, 1, c, 2, 2)
	want := make([]float32, patches*4*c)
	for p := range patches {
		for cell := range 4 {
			for ch := range c {
				want[(p*4+cell)*c+ch] = x.data[(p*c+ch)*4+cell] + pos.data[ch*4+cell]
			}
		}
	}
	s, sc, target := planted(t, precision.F32, []int{patches, 4, c}, want, x, pos)
	explainedWithin(t, s.plusRearranged(target, sc.vals), target)
	s, sc, target = planted(t, precision.F32, []int{patches, 4, c}, want, x)
	if v := s.plusRearranged(target, sc.vals); v != nil {
		t.Errorf("read without the table: %s", v.from.label)
	}
}

// TestViewed plants CoaT's convolutional position encoding's inputs: v
// [1, H, 1+S, C] per-head rows after a class row, the class row dropped,
// each head's channels laid out as a map [1, H·C, h, w] and cut along the
// channels into [2C, C, C] (a split of the heads). Each cut is read as a
// part of v moved; a map with one element changed is not.
func TestViewed(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 1))
	const heads, c, h, w = 4, 3, 3, 4
	rows := 1 + h*w
	v := randVal(rng, 1, heads, rows, c)
	mapOf := func(ch0, chs int) []float32 {
		out := make([]float32, 0, chs*h*w)
		for ch := ch0; ch < ch0+chs; ch++ {
			hd, e := ch/c, ch%c
			for cell := range h * w {
				out = append(out, v.data[(hd*rows+1+cell)*c+e])
			}
		}
		return out
	}
	for _, cut := range [][2]int{{0, 2 * c}, {2 * c, c}, {3 * c, c}} {
		want := mapOf(cut[0], cut[1])
		s, sc, target := planted(t, precision.F32, []int{1, cut[1], h, w}, want, v)
		got := s.viewed(target, sc.vals)
		if got == nil || !slices.Equal(got.data, want) {
			t.Fatalf("channels [%d, %d): not read", cut[0], cut[0]+cut[1])
		}
	}
	bent := mapOf(c, c)
	bent[5] += 1
	s, sc, target := planted(t, precision.F32, []int{1, c, h, w}, bent, v)
	if got := s.viewed(target, sc.vals); got != nil {
		t.Error("a map with one element changed read as a part of v")
	}
}

// TestScalarAffineOfComputed: a computed value times 2 minus 1 (TAESD's
// decoder output, x·2 − 1) is read with one constant pair; a per-channel
// pair of the same value is not (a statistic of the run as likely).
func TestScalarAffineOfComputed(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 8))
	x := randVal(rng, 1, 3, 4, 4)
	want := make([]float32, len(x.data))
	for i, v := range x.data {
		want[i] = v*2 - 1
	}
	s, _, target := planted(t, precision.F32, x.shape, want)
	explainedWithin(t, s.channelAffine(target, []*val{x}), target)
	for i, v := range x.data {
		want[i] = v*float32(2+i/16) - 1
	}
	s, _, target = planted(t, precision.F32, x.shape, want)
	if got := s.channelAffine(target, []*val{x}); got != nil {
		t.Errorf("per-channel constants read off a computed value: %s", got)
	}
}
