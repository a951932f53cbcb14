package synth

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/zflow/zflow/precision"
)

// TestPeeledAdd: a vision encoder's embeddings, cat([class token,
// patches]) + a learned position table, with a decoy of the patches'
// shape: no first form explains the sum, and peeledAdd finds it as the
// table added to the class token joined before the patches, in f32 and
// in bf16 (the sum rounded once).
func TestPeeledAdd(t *testing.T) {
	const n, c = 6, 8
	for _, f := range []precision.Format{precision.F32, precision.BF16} {
		rng := rand.New(rand.NewPCG(3, uint64(f)))
		fill := func(shape ...int) []float32 {
			out := make([]float32, shape[0]*shape[1]*shape[2])
			for i := range out {
				out[i] = f.Round(float32(rng.NormFloat64()))
			}
			return out
		}
		cls := &val{shape: []int{1, 1, c}, data: fill(1, 1, c), format: f, origin: "cls", param: true}
		pos := &val{shape: []int{1, n + 1, c}, data: fill(1, n+1, c), format: f, origin: "pos", param: true}
		patches := &val{shape: []int{1, n, c}, data: fill(1, n, c), format: f, origin: "patches", seq: 10}
		decoy := &val{shape: []int{1, n, c}, data: fill(1, n, c), format: f, origin: "decoy", seq: 11}
		want := slices.Concat(cls.data, patches.data)
		for i := range want {
			want[i] = f.Round(want[i] + pos.data[i])
		}
		s, sc, target := planted(t, f, []int{1, n + 1, c}, want, cls, pos, patches, decoy)
		s.peeling = true // glue's first forms alone
		if got := s.glueIn(target, sc); got != nil {
			t.Fatalf("%v: the first forms explain it already (%s): the plant does not need the peel", f, got.from.label)
		}
		s.peeling = false
		got := s.peeledAdd(target, sc, recentFirst(sc.vals))
		if got == nil {
			t.Fatalf("%v: not explained", f)
		}
		if e := relRMS(f, got.data, want); e != 0 {
			t.Errorf("%v: rel-RMS %.3g, want 0 (%s)", f, e, got.from.label)
		}
		if b := got.from.args[1]; b.origin != "pos" {
			t.Errorf("%v: the known term is %s, want the position table", f, b.origin)
		}
	}
}

// TestSegmentedRowsBroadcastTable: a batch of two whose scope holds a
// table of rows broadcast over the batch ([k, C]): the runs of rows read
// only per-sample vectors, and a modulation by runs of per-sample chunks
// is still found (the table's rows were read past their end before).
func TestSegmentedRowsBroadcastTable(t *testing.T) {
	const b, n, c = 2, 4, 8
	rng := rand.New(rand.NewPCG(9, 1))
	fill := func(k int) []float32 {
		out := make([]float32, k)
		for i := range out {
			out[i] = float32(rng.NormFloat64())
		}
		return out
	}
	x := &val{shape: []int{b, n, c}, data: fill(b * n * c), format: precision.F32, origin: "x", seq: 1}
	table := &val{shape: []int{3, c}, data: fill(3 * c), format: precision.F32, origin: "table", param: true}
	chunks := &val{shape: []int{b, 2 * c}, data: fill(b * 2 * c), format: precision.F32, origin: "chunks", seq: 2}
	// rows 0–1 scaled by chunk 0, rows 2–3 by chunk 1 (x·(1 + scale))
	want := make([]float32, b*n*c)
	for bi := range b {
		for r := range n {
			k := r / 2
			for ch := range c {
				i := (bi*n+r)*c + ch
				want[i] = x.data[i] * (1 + chunks.data[bi*2*c+k*c+ch])
			}
		}
	}
	s, sc, target := planted(t, precision.F32, []int{b, n, c}, want, table, x, chunks)
	got := s.segmentedRows(target, sc, recentFirst(sc.vals))
	if got == nil {
		t.Fatal("not explained")
	}
	if e := relRMS(precision.F32, got.data, want); e > 1e-6 {
		t.Errorf("rel-RMS %.3g (%s)", e, got.from.label)
	}
	// the last row scaled by no vector of the scope: every pool vector,
	// the table's rows too, is tried on it, and nothing explains it
	for i := range c {
		want[(b*n-1)*c+i] *= 3
	}
	s, sc, target = planted(t, precision.F32, []int{b, n, c}, want, table, x, chunks)
	if got := s.segmentedRows(target, sc, recentFirst(sc.vals)); got != nil {
		t.Errorf("a row no vector scales is explained: %s", got.from.label)
	}
}

// TestFitLeafTableMiss: a call given only a table whose result is not the
// table's leading rows (a relative position bias gathered from it) is
// left unexplained by the leaf fit, not a nil dereference.
func TestFitLeafTableMiss(t *testing.T) {
	table := &val{shape: []int{5, 4}, data: make([]float32, 20), format: precision.F32, origin: "table", param: true}
	for i := range table.data {
		table.data[i] = float32(i%7) - 3
	}
	want := make([]float32, 12)
	for i := range want {
		want[i] = float32(i) * 0.37
	}
	s, sc, target := planted(t, precision.F32, []int{3, 4}, want)
	if got := s.fitLeaf(sc, nil, []*val{table}, []*val{target}); got[0] != nil {
		t.Errorf("explained by %v", got[0].from)
	}
}

// TestJoinedMovedPiece: a class vector [C] joined before a conv's
// channels-first output [1, C, H, W] read as rows (flatten(2).transpose(1,
// 2) inside the embeddings, so the rows are no captured value): joined
// takes the conv's output with its axes moved as the second piece.
func TestJoinedMovedPiece(t *testing.T) {
	const c, h, w = 8, 2, 3
	rng := rand.New(rand.NewPCG(4, 4))
	fill := func(n int) []float32 {
		out := make([]float32, n)
		for i := range out {
			out[i] = float32(rng.NormFloat64())
		}
		return out
	}
	cls := &val{shape: []int{c}, data: fill(c), format: precision.F32, origin: "class", param: true}
	img := &val{shape: []int{1, c, h, w}, data: fill(c * h * w), format: precision.F32, origin: "conv", seq: 3}
	want := slices.Clone(cls.data)
	for p := range h * w {
		for ch := range c {
			want = append(want, img.data[ch*h*w+p])
		}
	}
	s, sc, target := planted(t, precision.F32, []int{1, 1 + h*w, c}, want, cls, img)
	got := s.joined(target, sc, recentFirst(sc.vals))
	if got == nil {
		t.Fatal("not explained")
	}
	if e := relRMS(precision.F32, got.data, want); e != 0 {
		t.Errorf("rel-RMS %.3g (%s)", e, got.from.label)
	}
}

// TestInsertedRows: register tokens put after the class token once the
// class token, the patches and the position table are summed:
// cat(x[:, :1], registers, x[:, 1:]) with x = cat(class, patches) + pos.
// No join of values makes it (its pieces are sums of parts), peeledAdd
// finds no term of its shape, and insertedRows finds x for the rows
// without the registers (by the peel) and puts them back.
func TestInsertedRows(t *testing.T) {
	const n, c, r = 5, 8, 2
	rng := rand.New(rand.NewPCG(6, 6))
	fill := func(k int) []float32 {
		out := make([]float32, k)
		for i := range out {
			out[i] = float32(rng.NormFloat64())
		}
		return out
	}
	cls := &val{shape: []int{1, 1, c}, data: fill(c), format: precision.F32, origin: "class", param: true}
	pos := &val{shape: []int{1, n + 1, c}, data: fill((n + 1) * c), format: precision.F32, origin: "pos", param: true}
	reg := &val{shape: []int{1, r, c}, data: fill(r * c), format: precision.F32, origin: "registers", param: true}
	patches := &val{shape: []int{1, n, c}, data: fill(n * c), format: precision.F32, origin: "patches", seq: 10}
	x := slices.Concat(cls.data, patches.data)
	for i := range x {
		x[i] += pos.data[i]
	}
	want := slices.Concat(x[:c], reg.data, x[c:])
	s, sc, target := planted(t, precision.F32, []int{1, n + 1 + r, c}, want, cls, pos, reg, patches)
	vals := recentFirst(sc.vals)
	if got := s.peeledAdd(target, sc, vals); got != nil {
		t.Fatalf("peeledAdd explains it already (%s): the plant does not need the insertion", got.from.label)
	}
	got := s.insertedRows(target, sc, vals)
	if got == nil {
		t.Fatal("not explained")
	}
	if e := relRMS(precision.F32, got.data, want); e != 0 {
		t.Errorf("rel-RMS %.3g (%s)", e, got.from.label)
	}
}

// TestDropRows: entries [lo, hi) of an axis dropped in every outer slice.
func TestDropRows(t *testing.T) {
	d := []float32{0, 1, 2, 3, 10, 11, 12, 13} // shape [2, 4, 1]
	if got, want := dropRows(d, []int{2, 4, 1}, 1, 1, 3), []float32{0, 3, 10, 13}; !slices.Equal(got, want) {
		t.Errorf("dropRows = %v, want %v", got, want)
	}
}

// TestFitGatheredEntries: a relative position bias, a table [R, H] read at
// a fixed index pattern [N, N] and laid out [1, H, N, N], is the table's
// entries gathered at indices read off the values; a result holding a
// value the table lacks is not.
func TestFitGatheredEntries(t *testing.T) {
	const r, h, n = 7, 2, 4
	table := &val{shape: []int{r, h}, data: make([]float32, r*h), format: precision.F32, origin: "table", param: true}
	for i := range table.data {
		table.data[i] = float32(i)*0.25 - 1.3
	}
	want := make([]float32, h*n*n)
	for hi := range h {
		for i := range n {
			for j := range n {
				want[(hi*n+i)*n+j] = table.data[(i-j+n-1)*h+hi] // relative distance i − j
			}
		}
	}
	s, sc, target := planted(t, precision.F32, []int{1, h, n, n}, want)
	got := s.fitLeaf(sc, nil, []*val{table}, []*val{target})[0]
	if got == nil {
		t.Fatal("not explained")
	}
	if e := relRMS(precision.F32, got.data, want); e != 0 {
		t.Errorf("rel-RMS %.3g", e)
	}
	want[5] += 0.1
	s, sc, target = planted(t, precision.F32, []int{1, h, n, n}, want)
	if got := s.fitLeaf(sc, nil, []*val{table}, []*val{target})[0]; got != nil {
		t.Error("a result with an entry the table lacks is explained")
	}
}

// TestIsGridIDs: a grid's cells' coordinates, row-major, one row per cell
// or one per axis; not a shuffled grid, nor one row of positions.
func TestIsGridIDs(t *testing.T) {
	grid := func(h, w int, perCell bool) *val {
		v := &val{shape: []int{h * w, 2}, format: precision.F32, intType: true}
		if !perCell {
			v.shape = []int{2, h * w}
		}
		v.data = make([]float32, 2*h*w)
		for c := range h * w {
			if perCell {
				v.data[2*c], v.data[2*c+1] = float32(c/w), float32(c%w)
			} else {
				v.data[c], v.data[h*w+c] = float32(c/w), float32(c%w)
			}
		}
		return v
	}
	for _, c := range []struct {
		name string
		v    *val
		want bool
	}{
		{"3×4 per cell", grid(3, 4, true), true},
		{"4×4 per axis", grid(4, 4, false), true},
		{"swapped cells", func() *val { v := grid(3, 4, true); v.data[3], v.data[5] = v.data[5], v.data[3]; return v }(), false},
		{"one axis", &val{shape: []int{2, 4}, data: []float32{0, 1, 2, 3, 0, 1, 2, 3}, format: precision.F32, intType: true}, false},
	} {
		if got := gridIDsOrder(c.v) != ""; got != c.want {
			t.Errorf("%s: gridIDsOrder found = %v, want %v", c.name, got, c.want)
		}
	}
}

// TestPeeledAddBroadcast: a video encoder's frames as a batch, each frame
// cat([class token, patches]) plus one position table [1, N, C] broadcast
// over the frames: peeledAdd peels the table off every frame.
func TestPeeledAddBroadcast(t *testing.T) {
	const frames, n, c = 3, 4, 8
	rng := rand.New(rand.NewPCG(8, 8))
	fill := func(k int) []float32 {
		out := make([]float32, k)
		for i := range out {
			out[i] = float32(rng.NormFloat64())
		}
		return out
	}
	cls := &val{shape: []int{frames, 1, c}, data: slices.Repeat(fill(c), frames), format: precision.F32, origin: "class", seq: 9}
	pos := &val{shape: []int{1, n + 1, c}, data: fill((n + 1) * c), format: precision.F32, origin: "pos", param: true}
	patches := &val{shape: []int{frames, n, c}, data: fill(frames * n * c), format: precision.F32, origin: "patches", seq: 10}
	var want []float32
	for f := range frames {
		row := slices.Concat(cls.data[f*c:(f+1)*c], patches.data[f*n*c:(f+1)*n*c])
		for i := range row {
			row[i] += pos.data[i]
		}
		want = append(want, row...)
	}
	s, sc, target := planted(t, precision.F32, []int{frames, n + 1, c}, want, cls, pos, patches)
	s.peeling = true
	if got := s.glueIn(target, sc); got != nil {
		t.Fatalf("the first forms explain it already (%s)", got.from.label)
	}
	s.peeling = false
	got := s.peeledAdd(target, sc, recentFirst(sc.vals))
	if got == nil {
		t.Fatal("not explained")
	}
	if e := relRMS(precision.F32, got.data, want); e != 0 {
		t.Errorf("rel-RMS %.3g (%s)", e, got.from.label)
	}
}

// TestRowsGathered: an image's rows [1, H, W, C] cut into 2×2 windows
// ([4, 2, 2, C], x.view(1, 2, 2, 2, 2, C).permute(0, 1, 3, 2, 4, 5)) are
// its rows in a fixed order; the same windows plus a table broadcast over
// them are found through the peel, whose t − b holds the rows to a
// rounding only; rows that are no rows of a value are not explained.
func TestRowsGathered(t *testing.T) {
	const h, w, c = 4, 4, 8
	rng := rand.New(rand.NewPCG(2, 2))
	img := &val{shape: []int{1, h, w, c}, format: precision.F32, origin: "image", seq: 5}
	for range h * w * c {
		img.data = append(img.data, float32(rng.NormFloat64()))
	}
	var windows []float32
	for wy := range 2 {
		for wx := range 2 {
			for y := range 2 {
				for x := range 2 {
					r := (wy*2+y)*w + wx*2 + x
					windows = append(windows, img.data[r*c:(r+1)*c]...)
				}
			}
		}
	}
	s, sc, target := planted(t, precision.F32, []int{4, 2, 2, c}, windows, img)
	if got := s.moved(target, recentFirst(sc.vals)); got != nil {
		t.Fatalf("moved explains the windows already (%s)", got.from.label)
	}
	got := s.rowsGathered(target, recentFirst(sc.vals))
	if got == nil {
		t.Fatal("windows: not explained")
	}
	if e := relRMS(precision.F32, got.data, windows); e != 0 {
		t.Errorf("windows: rel-RMS %.3g", e)
	}

	table := &val{shape: []int{1, 2, 2, c}, format: precision.F32, origin: "table", param: true}
	for range 4 * c {
		table.data = append(table.data, float32(rng.NormFloat64()))
	}
	summed := slices.Clone(windows)
	for i := range summed {
		summed[i] += table.data[i%(4*c)]
	}
	s, sc, target = planted(t, precision.F32, []int{4, 2, 2, c}, summed, img, table)
	if got := s.peeledAdd(target, sc, recentFirst(sc.vals)); got == nil {
		t.Error("windows plus a table: not explained")
	} else if e := relRMS(precision.F32, got.data, summed); e > 1e-7 {
		t.Errorf("windows plus a table: rel-RMS %.3g", e)
	}

	windows[3] += 0.5
	s, sc, target = planted(t, precision.F32, []int{4, 2, 2, c}, windows, img)
	if got := s.rowsGathered(target, recentFirst(sc.vals)); got != nil {
		t.Error("a row that is no row of the image is explained")
	}
}

// TestFitGatheredTableRows: a bias table whose entries repeat (a narrow
// format's) but whose rows do not is still read, row by row along the
// heads' axis; entry by entry it would be ambiguous.
func TestFitGatheredTableRows(t *testing.T) {
	const r, h, n = 7, 2, 4
	table := &val{shape: []int{r, h}, data: make([]float32, r*h), format: precision.F32, origin: "table", param: true}
	for i := range r {
		table.data[i*h], table.data[i*h+1] = float32(i)+0.5, float32((i+3)%r)+0.5 // every value twice, every row once
	}
	want := make([]float32, h*n*n)
	for hi := range h {
		for i := range n {
			for j := range n {
				want[(hi*n+i)*n+j] = table.data[(i-j+n-1)*h+hi]
			}
		}
	}
	s, sc, target := planted(t, precision.F32, []int{1, h, n, n}, want)
	got := s.fitLeaf(sc, nil, []*val{table}, []*val{target})[0]
	if got == nil {
		t.Fatal("not explained")
	}
	if e := relRMS(precision.F32, got.data, want); e != 0 {
		t.Errorf("rel-RMS %.3g", e)
	}
}

// TestPeeledAddLate: a patch projection plus a table no call holds (a
// position embedding's weight the forward reads without calling its
// module): glue's second pass, given the table among its values, finds
// the sum, the patches explained by the first forms inside it.
func TestPeeledAddLate(t *testing.T) {
	const n, c = 6, 8
	rng := rand.New(rand.NewPCG(5, 2))
	fill := func(k int) []float32 {
		out := make([]float32, k)
		for i := range out {
			out[i] = float32(rng.NormFloat64())
		}
		return out
	}
	patches := &val{shape: []int{1, n, c}, data: fill(n * c), format: precision.F32, origin: "patches", seq: 10}
	table := &val{shape: []int{n, c}, data: fill(n * c), format: precision.F32, origin: "uncalled table", param: true}
	want := slices.Clone(patches.data)
	for i := range want {
		want[i] += table.data[i]
	}
	s, sc, target := planted(t, precision.F32, []int{1, n, c}, want, patches)
	s.late = true
	got := s.lateForms(target, sc, append(recentFirst(sc.vals), table))
	if got == nil {
		t.Fatal("not explained")
	}
	if e := relRMS(precision.F32, got.data, want); e > 1e-7 {
		t.Errorf("rel-RMS %.3g (%s)", e, got.from.label)
	}
	if !s.late {
		t.Error("the second pass's flag is not restored")
	}
}

// TestPeeledTableCut: bf16 patches (entries near 3) plus a small position
// table whose first row belongs to a class row the target has not (t =
// patches + table[:, 1:]). Peeling the patches leaves the table only to a
// rounding of the sum, far outside the table's own tolerance; the table's
// last rows (tableCuts) must be peeled instead, leaving the patches to
// that rounding, within theirs.
func TestPeeledTableCut(t *testing.T) {
	const n, c = 16, 32
	bf := precision.BF16
	rng := rand.New(rand.NewPCG(5, 8))
	fill := func(scale float64, k int) []float32 {
		out := make([]float32, k)
		for i := range out {
			out[i] = bf.Round(float32(scale * rng.NormFloat64()))
		}
		return out
	}
	pos := &val{shape: []int{1, n + 1, c}, data: fill(0.02, (n+1)*c), format: bf, origin: "pos", param: true}
	patches := &val{shape: []int{1, n, c}, data: fill(3, n*c), format: bf, origin: "patches", seq: 10}
	want := make([]float32, n*c)
	for i := range want {
		want[i] = bf.Round(patches.data[i] + pos.data[c+i])
	}
	s, sc, target := planted(t, bf, []int{1, n, c}, want, pos, patches)
	got := s.peeledAdd(target, sc, recentFirst(sc.vals))
	if got == nil {
		t.Fatal("not explained")
	}
	if e := relRMS(bf, got.data, want); e != 0 {
		t.Errorf("rel-RMS %.3g, want 0 (%s)", e, got.from.label)
	}
}

// TestPeeledMovedAddend: in bf16 a large value x [F, C, H, W] plus a
// small one laid out [1, C, F, H, W], moved frames first and flattened
// (a temporal layer's residual, Allegro's), the sum rounded once: peeling
// x off leaves the small term to the sum's rounding, so the small one is
// peeled instead, moved into the sum's layout, and the sum reproduced
// bit for bit.
func TestPeeledMovedAddend(t *testing.T) {
	const F, C, H, W = 4, 2, 3, 3
	f := precision.BF16
	rng := rand.New(rand.NewPCG(7, 7))
	big := &val{shape: []int{F, C, H, W}, data: make([]float32, F*C*H*W), format: f, origin: "x", seq: 10}
	small := &val{shape: []int{1, C, F, H, W}, data: make([]float32, F*C*H*W), format: f, origin: "conv", seq: 11}
	for i := range big.data {
		big.data[i] = f.Round(float32(rng.NormFloat64() * 20))
		small.data[i] = f.Round(float32(rng.NormFloat64() * 0.05))
	}
	moved := permuteData(small, []int{0, 2, 1, 3, 4})
	want := make([]float32, len(moved))
	for i := range want {
		want[i] = f.Round(big.data[i] + moved[i])
	}
	s, sc, target := planted(t, f, big.shape, want, big, small)
	got := s.peeledAdd(target, sc, recentFirst(sc.vals))
	if got == nil {
		t.Fatal("not explained")
	}
	if e := relRMS(f, got.data, want); e != 0 {
		t.Errorf("rel-RMS %.3g, want 0 (%s)", e, got.from.label)
	}
}
