package synth

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/zflow/zflow/precision"
)

// convAttention is a convolutional attention planted over a g×g grid
// (EfficientFormer v2's): q and k maps [1, h·dk, g, g], v [1, h·dv, g, g],
// a position table [h, g²] read at |Δrow|·g + |Δcol| (the model's own
// index, not the form's numbering), each head's channels a block of the
// map's.
type convAttention struct {
	g, h, dk, dv int
	q, k, v, tb  *val
}

func newConvAttention(rng *rand.Rand, g, h, dk, dv int) *convAttention {
	a := &convAttention{g: g, h: h, dk: dk, dv: dv}
	a.q, a.k, a.v = randVal(rng, 1, h*dk, g, g), randVal(rng, 1, h*dk, g, g), randVal(rng, 1, h*dv, g, g)
	a.tb = randVal(rng, h, g*g)
	a.tb.param, a.tb.origin = true, "attention_biases"
	return a
}

// scores are [1, h, n, n]: q·k/√dk plus the table at each pair's offset.
func (a *convAttention) scores() []float32 {
	n := a.g * a.g
	out := make([]float32, a.h*n*n)
	for hh := range a.h {
		for i := range n {
			for j := range n {
				var acc float64
				for c := range a.dk {
					acc += float64(a.q.data[(hh*a.dk+c)*n+i]) * float64(a.k.data[(hh*a.dk+c)*n+j])
				}
				off := abs(i/a.g-j/a.g)*a.g + abs(i%a.g-j%a.g)
				out[(hh*n+i)*n+j] = float32(acc/math.Sqrt(float64(a.dk)) + float64(a.tb.data[hh*n+off]))
			}
		}
	}
	return out
}

// weighed is P [1, h, n, n] times v's heads, laid out as a map
// [1, h·dv, g, g] ((attn @ v).transpose(2, 3).reshape), plus add.
func (a *convAttention) weighed(p []float32, add *val) []float32 {
	n := a.g * a.g
	out := make([]float32, a.h*a.dv*n)
	for hh := range a.h {
		for i := range n {
			for c := range a.dv {
				var acc float64
				for j := range n {
					acc += float64(p[(hh*n+i)*n+j]) * float64(a.v.data[(hh*a.dv+c)*n+j])
				}
				at := (hh*a.dv+c)*n + i
				out[at] = float32(acc + float64(add.data[at]))
			}
		}
	}
	return out
}

func softmaxRows(x []float32, n int) []float32 {
	out := make([]float32, len(x))
	for r := 0; r < len(x); r += n {
		top := math.Inf(-1)
		for _, v := range x[r : r+n] {
			top = max(top, float64(v))
		}
		var sum float64
		for j := range n {
			sum += math.Exp(float64(x[r+j]) - top)
		}
		for j := range n {
			out[r+j] = float32(math.Exp(float64(x[r+j])-top) / sum)
		}
	}
	return out
}

// TestConvAttentionSteps plants EfficientFormer v2's attention, whose
// steps are boundaries of their own (talking heads: 1×1 convolutions over
// the heads axis of the scores and of the probabilities): the scores
// q·k/√dk plus a table at the cells' offsets, from maps; the output, the
// probabilities times v's heads laid out as a map plus a map the scope
// made (the local value path); and, with no step a boundary, the whole
// attention (queries and keys narrower per head than the values) plus
// that map. Each is explained; the same targets off by a different table
// or without the added map are not.
func TestConvAttentionSteps(t *testing.T) {
	rng := rand.New(rand.NewPCG(27, 1))
	a := newConvAttention(rng, 3, 2, 4, 8)
	n := a.g * a.g
	scores := a.scores()
	s, sc, target := planted(t, precision.F32, []int{1, a.h, n, n}, scores, a.tb)
	for _, x := range []*val{a.q, a.k, a.v} {
		sc.add(x, true)
	}
	s.readerParams = true // read by the talking heads' convolution
	got := s.scoresOf(target, sc)
	explainedWithin(t, got, target)
	if got != nil && !strings.Contains(got.from.label, "position bias") {
		t.Errorf("scores explained without their table: %s", got.from.label)
	}

	// the output step: probabilities the scope holds, plus the local map
	probs := &val{shape: []int{1, a.h, n, n}, data: softmaxRows(scores, n), format: precision.F32, origin: "talking_head2/out"}
	local := randVal(rng, 1, a.h*a.dv, a.g, a.g)
	out := a.weighed(probs.data, local)
	s, sc, target = planted(t, precision.F32, a.v.shape, out)
	for _, x := range []*val{a.q, a.k, a.v, probs, local} {
		sc.add(x, true)
	}
	explainedWithin(t, s.mapsWeighedValues(target, sc), target)
	s, sc, target = planted(t, precision.F32, a.v.shape, a.weighed(probs.data, &val{data: make([]float32, len(out))}))
	for _, x := range []*val{a.q, a.k, a.v, probs} {
		sc.add(x, true)
	}
	explainedWithin(t, s.mapsWeighedValues(target, sc), target)

	// the whole attention, heads of q and k narrower than v's, plus the map
	s, sc, target = planted(t, precision.F32, a.v.shape, out, a.tb)
	for _, x := range []*val{a.q, a.k, a.v, local} {
		sc.add(x, true)
	}
	explainedWithin(t, s.mapsAttention(target, sc, false), target)

	// controls: another table, the added map missing
	other := randVal(rng, a.h, n)
	other.param = true
	s, sc, target = planted(t, precision.F32, []int{1, a.h, n, n}, scores, other)
	for _, x := range []*val{a.q, a.k, a.v} {
		sc.add(x, true)
	}
	s.readerParams = true
	if got := s.scoresOf(target, sc); got != nil {
		t.Errorf("scores explained with another table: %s", got.from.label)
	}
	s, sc, target = planted(t, precision.F32, a.v.shape, out, a.tb)
	for _, x := range []*val{a.q, a.k, a.v} {
		sc.add(x, true)
	}
	if got := s.mapsAttention(target, sc, false); got != nil {
		t.Errorf("attention plus a map the scope lacks explained: %s", got.from.label)
	}
}

// TestResample: torch's interpolate (printed by torch 1.13) of a 2×3 map
// to 4×6 and to 3×5, nearest, bilinear and bilinear with the corners
// aligned: each read as the mode it was made with, bit for bit where the
// source indices are exact in f32 (every integer factor, the corners
// aligned here); bilinear 3 → 5 within f32's tolerance (torch's CPU kernel
// keeps the index 0.6·2.5 − 0.5 in double, its CUDA kernel in f32: the
// weights differ by an ulp between torch's own backends). The map itself,
// unresized, is no resize.
func TestResample(t *testing.T) {
	x := &val{shape: []int{1, 1, 2, 3}, data: []float32{0.5, -1.25, 2.0, 3.0, 0.75, -0.5}, format: precision.F32, origin: "x"}
	for _, c := range []struct {
		mode   string
		ho, wo int
		exact  bool
		want   []float32
	}{
		{"bilinear", 4, 6, true, []float32{0.5, 0.0625, -0.8125, -0.4375, 1.1875, 2.0, 1.125, 0.65625, -0.28125, -0.21875, 0.84375, 1.375,
			2.375, 1.84375, 0.78125, 0.21875, 0.15625, 0.125, 3.0, 2.4375, 1.3125, 0.4375, -0.1875, -0.5}},
		{"nearest", 4, 6, true, []float32{0.5, 0.5, -1.25, -1.25, 2.0, 2.0, 0.5, 0.5, -1.25, -1.25, 2.0, 2.0, 3.0, 3.0, 0.75, 0.75, -0.5, -0.5,
			3.0, 3.0, 0.75, 0.75, -0.5, -0.5}},
		{"corners aligned", 3, 5, true, []float32{0.5, -0.375, -1.25, 0.375, 2.0, 1.75, 0.75, -0.25, 0.25, 0.75, 3.0, 1.875, 0.75, 0.125, -0.5}},
		{"bilinear", 3, 5, false, []float32{0.5, -0.200000063, -1.24999976, 0.700000286, 2.0, 1.75, 0.949999928, -0.24999994, 0.350000083, 0.75,
			3.0, 2.0999999, 0.749999881, -1.02445483e-07, -0.5}},
		{"nearest", 3, 5, true, []float32{0.5, 0.5, -1.25, -1.25, 2.0, 0.5, 0.5, -1.25, -1.25, 2.0, 3.0, 3.0, 0.75, 0.75, -0.5}},
	} {
		s, _, target := planted(t, precision.F32, []int{1, 1, c.ho, c.wo}, c.want)
		got := s.fitResample(x, target)
		if got == nil {
			t.Errorf("%s to %dx%d: not explained", c.mode, c.ho, c.wo)
			continue
		}
		if c.exact && !slices.Equal(got.data, c.want) || relRMS(precision.F32, got.data, c.want) > tolerance(precision.F32) {
			t.Errorf("%s to %dx%d: %v, want %v", c.mode, c.ho, c.wo, got.data, c.want)
		}
		if !strings.HasSuffix(got.from.label, c.mode) {
			t.Errorf("%s to %dx%d read as %q", c.mode, c.ho, c.wo, got.from.label)
		}
	}
	s, _, target := planted(t, precision.F32, x.shape, x.data)
	if got := s.fitResample(x, target); got != nil {
		t.Errorf("the map itself read as a resize: %s", got.from.label)
	}
}

// TestJoinedMapsLinearAttention plants EfficientViT's multi-scale linear
// attention: a projection's map and its aggregation (both [1, 3·h·d, g,
// g], made one after the other) joined along the channels, read as 2h
// heads of [q k v], ReLU kernels, normalised (timm's ε 1e-5), the heads'
// outputs laid out as a map. Explained from the join; the projection's map
// alone (h heads) does not make it.
func TestJoinedMapsLinearAttention(t *testing.T) {
	rng := rand.New(rand.NewPCG(27, 2))
	const g, h, d = 3, 2, 4
	n := g * g
	qkv, agg := randVal(rng, 1, 3*h*d, g, g), randVal(rng, 1, 3*h*d, g, g)
	// the joined map's channel c of head hh, piece p (q, k, v)
	at := func(hh, p, c, cell int) float64 {
		src, hl := qkv, hh
		if hh >= h {
			src, hl = agg, hh-h
		}
		return float64(src.data[((hl*3+p)*d+c)*n+cell])
	}
	relu := func(x float64) float64 { return math.Max(x, 0) }
	want := make([]float32, 2*h*d*n)
	for hh := range 2 * h {
		for i := range n {
			var den float64
			num := make([]float64, d)
			for j := range n {
				var dot float64
				for c := range d {
					dot += relu(at(hh, 0, c, i)) * relu(at(hh, 1, c, j))
				}
				den += dot
				for e := range d {
					num[e] += dot * at(hh, 2, e, j)
				}
			}
			for e := range d {
				want[(hh*d+e)*n+i] = float32(num[e] / (den + 1e-5))
			}
		}
	}
	s, sc, target := planted(t, precision.F32, []int{1, 2 * h * d, g, g}, want)
	sc.add(qkv, true)
	sc.add(agg, true)
	got := s.mapsAttention(target, sc, false)
	explainedWithin(t, got, target)

	s, sc, target = planted(t, precision.F32, []int{1, 2 * h * d, g, g}, want)
	sc.add(qkv, true)
	if got := s.mapsAttention(target, sc, false); got != nil {
		t.Errorf("explained without the aggregation: %s", got.from.label)
	}
}

// TestCascadedHeads plants EfficientViT-M's cascaded group attention on a
// 3×3 map: each head's input is a chunk of the argument plus the previous
// head's output; each head's q, k and v are pieces of its own fused
// projection, q made over again by a convolution of its own, and its
// scores read its own row of one table over the cells' offsets; the
// heads' outputs are joined. The second head's input is explained as the
// first head's attention plus a chunk of the argument; the join as that
// attention (kept in the scope) beside the second head's. Without the
// first explanation in the scope the join is not explained.
func TestCascadedHeads(t *testing.T) {
	const g, dk, dv = 3, 4, 4
	n := g * g
	rng := rand.New(rand.NewPCG(28, 3))
	table := randVal(rng, 2, n)
	table.param, table.origin = true, "attention_biases"
	x := randVal(rng, 1, 2*dv, g, g)
	x.origin = "attn/arg0"
	type head struct{ qkv, q, out *val }
	heads := make([]head, 2)
	for i := range heads {
		qkv := randVal(rng, 1, 2*dk+dv, g, g)
		qkv.origin = fmt.Sprintf("qkvs.%d/out", i)
		q := randVal(rng, 1, dk, g, g)
		q.origin = fmt.Sprintf("dws.%d/out", i)
		a := &convAttention{g: g, h: 1, dk: dk, dv: dv, q: q,
			k:  &val{data: qkv.data[dk*n : 2*dk*n]},
			v:  &val{data: qkv.data[2*dk*n:]},
			tb: &val{data: table.data[i*n : (i+1)*n]}}
		out := a.weighed(softmaxRows(a.scores(), n), &val{data: make([]float32, dv*n)})
		heads[i] = head{qkv: qkv, q: q, out: &val{shape: []int{1, dv, g, g}, data: out, format: precision.F32}}
	}
	// the second head's input: the first head's output plus x's second chunk
	in1 := make([]float32, dv*n)
	for i := range in1 {
		in1[i] = heads[0].out.data[i] + x.data[dv*n+i]
	}
	s, sc, target := planted(t, precision.F32, []int{1, dv, g, g}, in1, table)
	sc.add(x, false)
	sc.arg[x] = true
	sc.add(heads[0].qkv, true)
	sc.add(heads[0].q, true)
	got := s.mapsAttention(target, sc, false)
	explainedWithin(t, got, target)
	// the join, in the scope the first explanation left
	join := slices.Concat(heads[0].out.data, heads[1].out.data)
	target2 := &val{shape: []int{1, 2 * dv, g, g}, data: join, format: precision.F32, origin: "proj/arg0"}
	fresh := &scope{module: "m", own: map[*val]bool{}, arg: map[*val]bool{}, vecs: map[string][]vec{}}
	for _, v := range sc.vals {
		fresh.add(v, sc.own[v])
		fresh.arg[v] = sc.arg[v]
	}
	if got != nil {
		sc.add(got, false)
	}
	sc.add(heads[1].qkv, true)
	sc.add(heads[1].q, true)
	explainedWithin(t, s.mapsAttention(target2, sc, false), target2)

	// control: the first head's attention never found
	s2, _, _ := planted(t, precision.F32, []int{1, dv, g, g}, in1)
	for _, v := range []*val{heads[1].qkv, heads[1].q} {
		fresh.add(v, true)
	}
	fresh.vals = slices.DeleteFunc(fresh.vals, func(v *val) bool { return fresh.own[v] && v.from != nil })
	if got := s2.mapsAttention(target2, fresh, false); got != nil {
		t.Errorf("the join explained without the first head's attention: %s", got.from.label)
	}
}
