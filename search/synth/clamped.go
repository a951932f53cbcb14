package synth

import (
	"fmt"
	"slices"

	"github.com/zflow/zflow/exec/program"
)

// clampedMoves explains t as a clamp (torch.clamp written in a forward: a
// VAE's decoded clip brought into [−1, 1]) of values of the scope moved,
// or of several such pieces joined along one axis (the clip's latent
// frames decoded one by one, joined, then unpatchified). A bound shows
// as t's least or greatest value held by two entries or more; an entry
// at a bound is matched by any source value past it, every other entry
// exactly, so the moves are read as rearranged reads them and the clamp
// of their join is then checked as any candidate.
func (s *synth) clampedMoves(t *val, vals []*val) *val {
	n := t.numel()
	if n < 8 || len(t.shape) < 2 || t.integral() {
		return nil
	}
	lo, hi := slices.Min(t.data), slices.Max(t.data)
	count := func(b float32) (c int) {
		for _, x := range t.data {
			if x == b {
				c++
			}
		}
		return c
	}
	loSat, hiSat := count(lo) >= 2, count(hi) >= 2
	if !loSat && !hiSat || lo == hi {
		return nil
	}
	// same(part) compares a source value with part's i-th entry
	same := func(part []float32) func(x float32, i int) bool {
		return func(x float32, i int) bool {
			switch y := part[i]; {
			case hiSat && y == hi:
				return x >= hi
			case loSat && y == lo:
				return x <= lo
			default:
				return x == y
			}
		}
	}
	clamp := func(y *val) *val {
		if y == nil || slices.Equal(y.data, t.data) {
			return nil // nothing past a bound: no clamp to read (a plain move explains it)
		}
		if hiSat {
			y = s.derive(&expr{op: program.OpMinimum, args: []*val{y, s.constant(float64(hi))}, out: t.format, label: fmt.Sprintf("clamp at %g", hi)})
		}
		if loSat && y != nil {
			y = s.derive(&expr{op: program.OpMaximum, args: []*val{y, s.constant(float64(lo))}, out: t.format, label: fmt.Sprintf("clamp at %g", lo)})
		}
		// at every step: a narrow format's least value held twice by
		// chance at step 0 is no clamp the other steps keep
		if y == nil || !slices.Equal(y.data, t.data) || !s.everyStep(y, t, tolerance(t.format)) {
			return nil
		}
		return y
	}
	// one value moved
	for _, v := range vals {
		if m := s.movedAs(t, v, same(t.data)); m != nil {
			if y := clamp(m); y != nil {
				return y
			}
		}
	}
	// pieces joined along one axis, each a value moved
	for ax := range t.shape {
		rest := n / t.shape[ax]
		var pieces []*val
		for off := 0; off < t.shape[ax] && len(pieces) < 6; {
			var found *val
			for _, v := range vals {
				if v.numel()%rest != 0 || v.numel()/rest > t.shape[ax]-off || v.numel() == n {
					continue
				}
				sub := cutAxis(t, ax, off, off+v.numel()/rest)
				if found = s.movedAs(sub, v, same(sub.data)); found != nil {
					break
				}
			}
			if found == nil {
				pieces = nil
				break
			}
			pieces = append(pieces, found)
			off += found.shape[ax]
		}
		if len(pieces) < 2 {
			continue
		}
		j := s.derive(&expr{op: program.OpConcat, attrs: program.Attrs{Axis: ax}, args: pieces, out: t.format, label: fmt.Sprintf("%d pieces joined", len(pieces))})
		if y := clamp(j); y != nil {
			return y
		}
	}
	return nil
}

// movedAs is v with its elements moved (as rearranged reads them) into
// t's shape such that same holds for each of t's entries; v as it is
// where no move is needed; nil where no map holds.
func (s *synth) movedAs(t, v *val, same func(x float32, i int) bool) *val {
	if v.opaque || v.param || v.numel() != t.numel() || v.format != t.format || v.integral() {
		return nil
	}
	digits := rearrangeMap(v.data, t.data, same)
	if digits == nil {
		return nil
	}
	split, perm := splitOf(digits)
	switch {
	case split == nil:
		return nil
	case isIdentity(perm):
		return s.reshape(v, t.shape)
	}
	m := s.derive(&expr{op: program.OpPermute, attrs: program.Attrs{Perm: perm}, args: []*val{s.reshape(v, split)}, out: v.format, label: "elements rearranged"})
	return s.reshape(m, t.shape)
}
