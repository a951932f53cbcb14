package synth

import (
	"slices"

	"github.com/zflow/zflow/exec/program"
)

// rowsJoined explains t [B, S, C] as a join along the rows of pieces that
// are channels-first grids read as rows (a convolution's output [B, C, T,
// H, W] flattened and transposed, x.flatten(2).transpose(1, 2), in the
// forward before the join: history tokens of several patch embeddings
// prefixed to the window's, or the RoPE tables of each part, packed
// [cos | sin] along the channels), or such rows averaged over blocks of
// their grid (gridPooledPiece, for a batch of one). Tried once every
// other form failed.
func (s *synth) rowsJoined(t *val, sc *scope, vals []*val) *val {
	if len(t.shape) != 3 || t.shape[1] < 2 {
		return nil
	}
	b, c := t.shape[0], t.shape[2]
	var rows []*val
	for _, v := range vals {
		if v.opaque || len(v.shape) < 4 || len(v.shape) > 5 || v.shape[0] != b || v.shape[1] != c {
			continue
		}
		n := v.numel() / (b * c)
		r := s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: []int{0, 2, 1}}, args: []*val{s.reshape(v, []int{b, c, n})}, out: v.format, label: "grid as rows"})
		if r != nil {
			rows = append(rows, r)
		}
	}
	if len(rows) == 0 {
		return nil
	}
	if b != 1 {
		if w := s.joined(t, sc, append(rows, vals...)); w != nil {
			return w
		}
		return nil
	}
	// one sample: the rows as [N, C], so a piece may be a pooled grid
	flat := s.readAs(t, []int{t.shape[1], c}, func(d []float32) []float32 { return d })
	flat.reshapedFrom = true
	var two []*val
	for _, r := range append(rows, vals...) {
		if r.opaque || r.numel()%c != 0 || r.shape[len(r.shape)-1] != c || len(r.shape) > 3 || len(r.shape) == 3 && r.shape[0] != 1 {
			continue
		}
		if w := s.reshape(r, []int{r.numel() / c, c}); w != nil && !slices.Contains(two, w) {
			two = append(two, w)
		}
	}
	if w := s.joined(flat, sc, two); w != nil {
		return s.reshape(w, t.shape)
	}
	return nil
}

// rowRuns explains t [B, S, …] as runs of rows each one per-sample value
// broadcast over its rows, joined along the rows (a timestep per token:
// the history rows' modulation made from t = 0, the window rows' from
// the step's t; each run a value of B·(row size) the scope holds, in the
// row's layout). Two to four runs. Tried once every other form failed.
func (s *synth) rowRuns(t *val, vals []*val) *val {
	if len(t.shape) < 3 || t.shape[1] < 2 {
		return nil
	}
	b, n := t.shape[0], t.shape[1]
	per := t.numel() / (b * n)
	tol := tolerance(t.format)
	row := func(i int) []float32 { return sliceData(t, 1, i, i+1) }
	var starts []int
	for i := range n {
		if i == 0 || relRMS(t.format, row(i), row(i-1)) > tol {
			starts = append(starts, i)
			if len(starts) > 4 {
				return nil
			}
		}
	}
	if len(starts) < 2 {
		return nil
	}
	starts = append(starts, n)
	one := slices.Clone(t.shape)
	one[1] = 1
	var pieces []*val
	for r := range len(starts) - 1 {
		want := row(starts[r])
		var piece *val
		for _, v := range vals {
			if v.opaque || v.numel() != b*per || relRMS(t.format, v.data, want) > tol {
				continue
			}
			p := s.reshape(v, one)
			if k := starts[r+1] - starts[r]; k > 1 && p != nil {
				p = s.derive(&expr{op: program.OpRepeat, attrs: program.Attrs{N: k, Axis: 1}, args: []*val{p}, out: v.format, label: "over its rows"})
			}
			if p != nil {
				piece = p
				break
			}
		}
		if piece == nil {
			return nil
		}
		pieces = append(pieces, piece)
	}
	j := s.derive(&expr{op: program.OpConcat, attrs: program.Attrs{Axis: 1}, args: pieces, out: pieces[0].format, label: "runs of rows"})
	if j == nil || relRMS(t.format, j.data, t.data) > tol || !s.everyStep(j, t, tol) {
		return nil
	}
	return j
}
