package synth

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/zflow/zflow/precision"
)

// headAttention is softmax(q·kᵀ·scale + bias(h, i, j))·v per head, in
// float64: q, k [n, h·dk] and v [m, h·dv] rows of one sample, the result
// [n, h·dv].
func headAttention(q, k, v []float32, n, m, h, dk, dv int, scale float64, bias func(h, i, j int) float64) []float32 {
	out := make([]float32, n*h*dv)
	for hh := range h {
		for i := range n {
			sc := make([]float64, m)
			for j := range m {
				for c := range dk {
					sc[j] += float64(q[i*h*dk+hh*dk+c]) * float64(k[j*h*dk+hh*dk+c])
				}
				sc[j] = sc[j]*scale + bias(hh, i, j)
			}
			p := softmax64(sc)
			for c := range dv {
				var acc float64
				for j := range m {
					acc += p[j] * float64(v[j*h*dv+hh*dv+c])
				}
				out[i*h*dv+hh*dv+c] = float32(acc)
			}
		}
	}
	return out
}

// cols are the columns [a, a+w) of each head's c-wide block of rows x.
func cols(x []float32, rows, h, c, a, w int) []float32 {
	out := make([]float32, 0, rows*h*w)
	for r := range rows {
		for hh := range h {
			base := r*h*c + hh*c + a
			out = append(out, x[base:base+w]...)
		}
	}
	return out
}

// TestAbsOffsets: on one grid the offsets' first-met numbering is
// |Δrow|·g + |Δcol|; on queries every second cell of a 4×4 grid there
// are as many offsets as LeViT's subsampled attention's table holds.
func TestAbsOffsets(t *testing.T) {
	ids, n := absOffsets(3, 3, 1)
	if n != 9 {
		t.Fatalf("%d offsets on a 3×3 grid, want 9", n)
	}
	for i := range 9 {
		for j := range 9 {
			if want := abs(i/3-j/3)*3 + abs(i%3-j%3); ids[i*9+j] != float32(want) {
				t.Fatalf("pair (%d, %d): %v, want %d", i, j, ids[i*9+j], want)
			}
		}
	}
	if _, n := absOffsets(2, 4, 2); n != 16 {
		t.Errorf("%d offsets for queries every 2nd cell of 4×4, want 16", n)
	}
}

// TestUnequalHeadsAttention plants LeViT's attention: each head's [q k v]
// of widths 4, 4, 8 from one projection, q·kᵀ/√4 plus a per-head table
// of the 3×3 grid's absolute offsets: explained by unequalHeads (q and k
// padded to the values' width, the scale kept) with absOffsetBiases.
func TestUnequalHeadsAttention(t *testing.T) {
	const g, h, dk, dv = 3, 2, 4, 8
	n, c := g*g, 2*dk+dv
	rng := rand.New(rand.NewPCG(3, 9))
	qkv := randVal(rng, 1, n, h*c)
	qkv.origin, qkv.fit = "qkv/out", &leafFit{kind: "linear"}
	table := randVal(rng, h, n)
	table.origin, table.param = "attention_biases", true
	ids, _ := absOffsets(g, g, 1)
	want := headAttention(cols(qkv.data, n, h, c, 0, dk), cols(qkv.data, n, h, c, dk, dk), cols(qkv.data, n, h, c, 2*dk, dv),
		n, n, h, dk, dv, 1/math.Sqrt(dk), func(hh, i, j int) float64 { return float64(table.data[hh*n+int(ids[i*n+j])]) })
	s, sc, target := planted(t, precision.F32, []int{1, n, h * dv}, want)
	sc.add(table, false)
	sc.add(qkv, true)
	explainedWithin(t, s.attention(target, sc), target)
}

// TestClassOffsets plants BEiT's attention: a bias-free fused projection
// whose q and v get biases of their own, and a relative position table
// of (2g−1)² + 3 rows, the three last the class row's, gathered at
// timm's gen_relative_position_index (restated here) for a class row
// before a 2×2 grid.
func TestClassOffsets(t *testing.T) {
	const g, h, d = 2, 2, 4
	n, w := g*g+1, h*d
	l := (2*g-1)*(2*g-1) + 3
	// timm's index: cells' offsets (Δrow + g − 1)·(2g − 1) + Δcol + g − 1;
	// row 0 (the class query) l − 3, column 0 l − 2, the corner l − 1
	index := func(i, j int) int {
		switch {
		case i == 0 && j == 0:
			return l - 1
		case i == 0:
			return l - 3
		case j == 0:
			return l - 2
		}
		a, b := i-1, j-1
		return (a/g-b/g+g-1)*(2*g-1) + a%g - b%g + g - 1
	}
	rng := rand.New(rand.NewPCG(4, 2))
	qkv := randVal(rng, 1, n, 3*w)
	qkv.origin, qkv.fit = "qkv/out", &leafFit{kind: "linear"}
	qb, vb := randVal(rng, w), randVal(rng, w)
	qb.origin, qb.param, vb.origin, vb.param = "q_bias", true, "v_bias", true
	table := randVal(rng, l, h)
	table.origin, table.param = "relative_position_bias_table", true
	q := cols(qkv.data, n, 1, 3*w, 0, w)
	for i := range q {
		q[i] += qb.data[i%w]
	}
	v := cols(qkv.data, n, 1, 3*w, 2*w, w)
	for i := range v {
		v[i] += vb.data[i%w]
	}
	want := headAttention(q, cols(qkv.data, n, 1, 3*w, w, w), v, n, n, h, d, d, 1/math.Sqrt(d),
		func(hh, i, j int) float64 { return float64(table.data[index(i, j)*h+hh]) })
	s, sc, target := planted(t, precision.F32, []int{1, n, w}, want)
	for _, p := range []*val{qb, vb, table} {
		sc.add(p, false)
	}
	sc.add(qkv, true)
	explainedWithin(t, s.attention(target, sc), target)
}

// TestAssembledBiases: two vectors of 4 in a bias of 12 sit at three
// placements, one of them [q, 0, v]; vectors as wide as the bias are none.
func TestAssembledBiases(t *testing.T) {
	s, _, _ := planted(t, precision.F32, []int{1}, []float32{0})
	q := &val{shape: []int{4}, data: []float32{1, 2, 3, 4}, format: precision.F32, param: true}
	v := &val{shape: []int{4}, data: []float32{5, 6, 7, 8}, format: precision.F32, param: true}
	bs := s.assembledBiases([]*val{q, v}, 12)
	if len(bs) != 3 {
		t.Fatalf("%d placements, want 3", len(bs))
	}
	want := []float32{1, 2, 3, 4, 0, 0, 0, 0, 5, 6, 7, 8}
	if !slices.ContainsFunc(bs, func(b *val) bool { return slices.Equal(b.data, want) }) {
		t.Errorf("no placement is %v", want)
	}
	if bs := s.assembledBiases([]*val{q, v}, 8); len(bs) != 0 {
		t.Errorf("%d placements of 8 in 8, want none", len(bs))
	}
}

// TestWindowRowsAttention plants Twins' locally grouped attention: a 4×4
// grid's rows moved into 2×2 windows ([B, 2, 2, 2, 2, C]), projected
// there to [Q|K|V], each window attending over its cells, the rows put
// back: the order read off the moved argument.
func TestWindowRowsAttention(t *testing.T) {
	const g, ws, c = 4, 2, 4
	n := g * g
	rng := rand.New(rand.NewPCG(8, 1))
	x := randVal(rng, 1, n, c)
	x.origin = "m/arg0"
	// moved: [1, gh, ws, gw, ws, C] → transpose(2, 3) → [1, gh, gw, ws, ws, C]
	moved := &val{shape: []int{1, g / ws, g / ws, ws, ws, c}, format: precision.F32, origin: "qkv/arg0"}
	var order []int // moved row → x row
	for a := range g / ws {
		for b := range g / ws {
			for i := range ws {
				for j := range ws {
					r := (a*ws+i)*g + b*ws + j
					order = append(order, r)
					moved.data = append(moved.data, x.data[r*c:(r+1)*c]...)
				}
			}
		}
	}
	wq := randVal(rng, 3*c, c)
	fused := &val{shape: []int{1, g / ws, g / ws, ws, ws, 3 * c}, data: make([]float32, n*3*c), format: precision.F32, origin: "qkv/out", fit: &leafFit{kind: "linear"}}
	for r := range n {
		for o := range 3 * c {
			var acc float32
			for i := range c {
				acc += moved.data[r*c+i] * wq.data[o*c+i]
			}
			fused.data[r*3*c+o] = acc
		}
	}
	want := make([]float32, n*c)
	cells := ws * ws
	for win := range n / cells {
		rows := fused.data[win*cells*3*c : (win+1)*cells*3*c]
		a := headAttention(cols(rows, cells, 1, 3*c, 0, c), cols(rows, cells, 1, 3*c, c, c), cols(rows, cells, 1, 3*c, 2*c, c),
			cells, cells, 1, c, c, 1/math.Sqrt(c), func(int, int, int) float64 { return 0 })
		for i := range cells {
			r := order[win*cells+i]
			copy(want[r*c:(r+1)*c], a[i*c:(i+1)*c])
		}
	}
	s, sc, target := planted(t, precision.F32, []int{1, n, c}, want)
	sc.add(x, false)
	sc.arg[x] = true
	sc.add(moved, false)
	sc.add(fused, true)
	explainedWithin(t, s.windowRowsAttention(target, sc), target)
}

// explainedWithin fails t unless got explains target within the f32
// tolerance.
func explainedWithin(t *testing.T, got, target *val) {
	t.Helper()
	if got == nil {
		t.Fatal("not explained")
	}
	if e := relRMS(precision.F32, got.data, target.data); e > tolerance(precision.F32) {
		t.Errorf("rel-RMS %.3g", e)
	}
}

// TestPooledForms: a mean over the rows after a class token and a
// register (timm's avg pool past its prefix tokens), and a mean over an
// image's cells channels last (timm's Swin head), each explained by
// pooled and not by the plain mean over every row.
func TestPooledForms(t *testing.T) {
	rng := rand.New(rand.NewPCG(6, 6))
	x := randVal(rng, 1, 6, 4)
	rows := make([]float32, 4)
	for r := 2; r < 6; r++ {
		for c := range 4 {
			rows[c] += x.data[r*4+c] / 4
		}
	}
	img := randVal(rng, 1, 2, 3, 4)
	cells := make([]float32, 4)
	for i := range 6 {
		for c := range 4 {
			cells[c] += img.data[i*4+c] / 6
		}
	}
	for _, c := range []struct {
		name string
		x    *val
		want []float32
	}{{"after two prefix rows", x, rows}, {"cells, channels last", img, cells}} {
		s, _, target := planted(t, precision.F32, []int{1, 4}, c.want)
		got := s.pooled(target, []*val{c.x})
		if got == nil || relRMS(precision.F32, got.data, target.data) > tolerance(precision.F32) {
			t.Errorf("%s: not explained", c.name)
		}
	}
}

// TestChannelAttention plants DaViT's channel attention: per head, A =
// softmax((k·d^−½)ᵀ·v) over the head's channels, the result's channel i
// Σ_j A[i, j]·q's channel j, q, k and v the thirds of one projection.
func TestChannelAttention(t *testing.T) {
	const n, h, d = 6, 2, 4
	w := h * d
	rng := rand.New(rand.NewPCG(2, 7))
	qkv := randVal(rng, 1, n, 3*w)
	qkv.origin, qkv.fit = "qkv/out", &leafFit{kind: "linear"}
	at := func(part, tok, head, ch int) float64 { return float64(qkv.data[tok*3*w+part*w+head*d+ch]) }
	want := make([]float32, n*w)
	for hh := range h {
		for i := range d {
			sc := make([]float64, d)
			for j := range d {
				for tok := range n {
					sc[j] += at(1, tok, hh, i) / math.Sqrt(d) * at(2, tok, hh, j)
				}
			}
			a := softmax64(sc)
			for tok := range n {
				var acc float64
				for j := range d {
					acc += a[j] * at(0, tok, hh, j)
				}
				want[tok*w+hh*d+i] = float32(acc)
			}
		}
	}
	s, sc, target := planted(t, precision.F32, []int{1, n, w}, want)
	sc.add(qkv, true)
	explainedWithin(t, s.channelAttention(target, sc), target)
}

// TestConvFormAttention plants Visformer's attention: q, k and v the
// [Q|K|V] channel blocks of a 1×1 convolution's output [B, 3C, H, W],
// the result laid out channels first: explained through imageAsRows with
// the projection read as rows (channelsLastOperands).
func TestConvFormAttention(t *testing.T) {
	const h, d, hh, ww = 2, 4, 2, 3
	c, n := h*d, hh*ww
	rng := rand.New(rand.NewPCG(9, 4))
	qkv := randVal(rng, 1, 3*c, hh, ww)
	qkv.origin, qkv.fit = "qkv/out", &leafFit{kind: "conv"}
	rows := make([]float32, n*3*c) // channels last
	for ch := range 3 * c {
		for p := range n {
			rows[p*3*c+ch] = qkv.data[ch*n+p]
		}
	}
	a := headAttention(cols(rows, n, 1, 3*c, 0, c), cols(rows, n, 1, 3*c, c, c), cols(rows, n, 1, 3*c, 2*c, c),
		n, n, h, d, d, 1/math.Sqrt(d), func(int, int, int) float64 { return 0 })
	want := make([]float32, c*n) // channels first
	for p := range n {
		for ch := range c {
			want[ch*n+p] = a[p*c+ch]
		}
	}
	s, sc, target := planted(t, precision.F32, []int{1, c, hh, ww}, want)
	sc.add(qkv, true)
	explainedWithin(t, s.imageAsRows(target, sc), target)
}
