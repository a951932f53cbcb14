package synth

import (
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/zflow/zflow/precision"
	"github.com/zflow/zflow/semantics"
)

// TestLearnedGrid: positions a + b·i per axis of a row-major grid read
// back from angles P·W wrapped to (−π, π] (the steps far past 2π/|W|), at
// starts 0 and centred, as Mochi's forward makes them; at Mochi's test
// size (16 frequencies) and at more frequencies than the scan reads.
func TestLearnedGrid(t *testing.T) {
	for _, c := range []struct {
		grid []int
		n    int
	}{{[]int{2, 2, 4}, 16}, {[]int{3, 4, 5}, 384}} {
		rng := rand.New(rand.NewPCG(1, uint64(c.n)))
		grid, n := c.grid, c.n
		k := len(grid)
		w := make([]float32, k*n)
		for i := range w {
			w[i] = float32(rng.NormFloat64() * 0.4)
		}
		s := math.Sqrt(192 * 192 / float64(grid[1]*grid[2])) // Mochi's scale
		steps := []float64{1, s, s}
		starts := []float64{0, -s * float64(grid[1]-1) / 2, -s * float64(grid[2]-1) / 2}
		rows := grid[0] * grid[1] * grid[2]
		want := make([]float64, rows*k)
		ang := make([]float64, rows*n)
		for r := range rows {
			idx := []int{r / (grid[1] * grid[2]), (r / grid[2]) % grid[1], r % grid[2]}
			for a := range k {
				want[r*k+a] = starts[a] + steps[a]*float64(idx[a])
			}
			for j := range n {
				var p float64
				for a := range k {
					p += want[r*k+a] * float64(w[a*n+j])
				}
				ang[r*n+j] = math.Atan2(math.Sin(p), math.Cos(p))
			}
		}
		got := learnedGrid(ang, w, grid, n, 1e-3)
		if got == nil {
			t.Fatalf("%v: no grid read", grid)
		}
		for i, g := range got {
			if math.Abs(float64(g)-want[i]) > 1e-3*max(1, math.Abs(want[i])) {
				t.Fatalf("%v: position %d (row %d, axis %d) = %g, want %g", grid, i, i/k, i%k, g, want[i])
			}
		}
		// a grid of other sizes reads nothing
		other := slices.Clone(grid)
		slices.Reverse(other)
		if learnedGrid(ang, w, other, n, 1e-3) != nil {
			t.Errorf("a %v grid read from a %v one", other, grid)
		}
	}
}

// TestUnseenMochi: the parts of Mochi-1 the search met first there: the
// RoPE tables made from the learned frequencies at positions on a
// (t, h, w) grid (t from 0, h and w centred, scaled by √(192²/(h·w))),
// each head rotated by its own angles, the caption's padded row of the
// joint attention zero, and the pooler's one query over 8 heads of 2
// under the mask joined after a one (TestUnseenArchitectures checks the
// whole document and its generation).
func TestUnseenMochi(t *testing.T) {
	res, _ := discoverComplete(t, filepath.Join("..", "..", "fixtures", "unseen", "mochi-f32.npz"))
	pg := res.Doc.Program
	var pos *semantics.ProgramValue
	for i, v := range pg.Values {
		if v.Kind == "const" && strings.HasSuffix(v.Name, "/positions") {
			pos = &pg.Values[i]
		}
	}
	if pos == nil || !slices.Equal(pos.Shape, []int{16, 3}) {
		t.Fatalf("no [16, 3] positions constant (%v)", pos)
	}
	s := math.Sqrt(192 * 192 / 8.0)
	for r := range 16 {
		want := []float64{float64(r / 8), s * (float64((r/4)%2) - 0.5), s * (float64(r%4) - 1.5)}
		for a, w := range want {
			if g := float64(pos.Data[r*3+a]); math.Abs(g-w) > 1e-3*max(1, math.Abs(w)) {
				t.Fatalf("position (%d, %d) = %g, want %g", r, a, g, w)
			}
		}
	}
	perHead, pooled := 0, false
	for _, nd := range pg.Nodes {
		switch {
		case nd.Op == "rope" && nd.Attrs.Rope != nil:
			if nd.Attrs.Rope.Heads == 1 && nd.Attrs.Rope.Layout == "interleaved" {
				perHead++
			}
		case nd.Op == "attention" && nd.Attrs.Attention != nil:
			p := nd.Attrs.Attention
			if p.Heads == 8 && p.Mask == "explicit" && len(nd.In) > 3 && nd.In[3] != "" {
				pooled = true
			}
		}
	}
	if perHead < 4 {
		t.Errorf("%d interleaved RoPE nodes over heads laid as rows, want q and k of both blocks (4)", perHead)
	}
	if !pooled {
		t.Error("no masked attention of 8 heads (the pooler)")
	}
}

// TestUnseenConsisID: the parts of ConsisID the search met first there:
// the facial extractor's LeakyReLUs as x > 0 ? x : α·x (two per mapping:
// the id mapping and one per scale), its proj_out parameter [in, out] read
// transposed, and attention over fused [k|v] halves for the extractor's
// latents and the video rows' perceiver cross-attention (heads of 8 and
// of 16: 2 heads each), beside the blocks' joint attentions (3 heads).
func TestUnseenConsisID(t *testing.T) {
	res, _ := discoverComplete(t, filepath.Join("..", "..", "fixtures", "unseen", "consisid-f32.npz"))
	pg := res.Doc.Program
	weights := map[string]string{}
	for _, v := range pg.Values {
		if v.Kind == "weight" {
			weights[v.Name] = v.Source
		}
	}
	where, projOut := 0, false
	heads := map[int]int{}
	for _, nd := range pg.Nodes {
		switch nd.Op {
		case "where":
			where++
		case "permute":
			projOut = projOut || len(nd.In) == 1 && weights[nd.In[0]] == "transformer.local_facial_extractor.proj_out"
		case "attention":
			heads[nd.Attrs.Attention.Heads]++
		}
	}
	if where != 6 {
		t.Errorf("%d where nodes, want the 6 LeakyReLUs", where)
	}
	if !projOut {
		t.Error("the extractor's proj_out is not read transposed")
	}
	if heads[2] != 3 || heads[3] != 2 {
		t.Errorf("attention nodes by heads %v, want 3 of 2 heads (2 extractor layers, 1 cross-attention) and 2 of 3", heads)
	}
}

// TestLearnedGridNarrow: Mochi's tables in a bf16 run, where the
// positions are cast to the frequencies' bf16 and multiplied in it
// (a GEMM rounding once, or a CPU einsum rounding each product and each
// partial sum) and cos and sin rounded: the angles of tens of radians
// come back off by a tenth of one, the grid read with the narrow
// tolerance is a few percent off, and the refined steps give positions
// whose bf16 casts are the reference's.
func TestLearnedGridNarrow(t *testing.T) {
	bf := precision.BF16
	for _, stepwise := range []bool{false, true} {
		grid, n := []int{2, 2, 4}, 16
		k := len(grid)
		rng := rand.New(rand.NewPCG(2, 9))
		w := make([]float32, k*n)
		for i := range w {
			w[i] = bf.Round(float32(rng.NormFloat64() * 0.25))
		}
		s := math.Sqrt(192 * 192 / float64(grid[1]*grid[2]))
		steps := []float64{1, s, s}
		starts := []float64{0, -s * float64(grid[1]-1) / 2, -s * float64(grid[2]-1) / 2}
		rows := grid[0] * grid[1] * grid[2]
		want := make([]float32, rows*k)
		cosT := &val{shape: []int{rows, 1, n}, data: make([]float32, rows*n), format: bf}
		sinT := &val{shape: []int{rows, 1, n}, data: make([]float32, rows*n), format: bf}
		ang := make([]float64, rows*n)
		for r := range rows {
			idx := []int{r / (grid[1] * grid[2]), (r / grid[2]) % grid[1], r % grid[2]}
			for a := range k {
				want[r*k+a] = float32(starts[a] + steps[a]*float64(idx[a]))
			}
			for j := range n {
				var acc float32
				for a := range k {
					p := bf.Round(want[r*k+a]) * w[a*n+j]
					if stepwise {
						acc = bf.Round(acc + bf.Round(p))
					} else {
						acc += p
					}
				}
				x := float64(bf.Round(acc))
				cosT.data[r*n+j] = bf.Round(float32(math.Cos(x)))
				sinT.data[r*n+j] = bf.Round(float32(math.Sin(x)))
				ang[r*n+j] = math.Atan2(float64(sinT.data[r*n+j]), float64(cosT.data[r*n+j]))
			}
		}
		if learnedGrid(ang, w, grid, n, 1e-3) != nil {
			t.Logf("stepwise %v: read at f32's tolerance too", stepwise)
		}
		pos := learnedGrid(ang, w, grid, n, readAngleTol(bf))
		if pos == nil {
			t.Fatalf("stepwise %v: no grid read at bf16's tolerance", stepwise)
		}
		got := refineNarrow(pos, grid, w, cosT, sinT, bf, stepwise)
		for i := range got {
			if bf.Round(got[i]) != bf.Round(want[i]) {
				t.Fatalf("stepwise %v: position %d (row %d, axis %d) = %g, in bf16 %g; want %g (read %g)", stepwise, i, i/k, i%k, got[i], bf.Round(got[i]), bf.Round(want[i]), pos[i])
			}
		}
	}
}
