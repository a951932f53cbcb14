package synth

import (
	"fmt"
	"slices"
	"strings"

	"github.com/zflow/zflow/exec/program"
)

// addUncalledProjections gives a scope the projections its forward makes
// itself from a sub-module it never calls (F.linear(x, self.qkv.weight,
// bias)): each of the call's float arguments of the matrix's input width
// times each uncalled linear sub-module's weight, with that sub-module's
// own bias, with none, or with a bias the forward assembles from the
// call's own vectors and zeros (cat(q_bias, zeros, v_bias): BEiT's, EVA's
// fused q/k/v). The projections join the scope's own values, where the
// attention search and the glue read them as they read a called
// projection's result.
func (s *synth) addUncalledProjections(sc *scope) {
	var xs []*val
	for _, v := range sc.vals {
		if sc.arg[v] && !v.opaque && !v.integral() && len(v.shape) >= 2 {
			xs = append(xs, v)
		}
	}
	if len(xs) == 0 {
		return
	}
	var vecs []*val // the call's own vectors, in parameter order
	for _, v := range sc.vals {
		if v.param && len(v.shape) == 1 {
			vecs = append(vecs, v)
		}
	}
	for _, wb := range s.directUncalledLinears(sc.module) {
		w, b := wb[0], wb[1]
		out, in := w.shape[0], w.shape[1]
		biases := []*val{nil}
		if b != nil {
			biases = append(biases, b)
		}
		biases = append(biases, s.assembledBiases(vecs, out)...)
		for _, x := range xs {
			if x.shape[len(x.shape)-1] != in {
				continue
			}
			for _, bias := range biases {
				label := "a projection by an uncalled sub-module's weight"
				if bias != nil && bias.param {
					label += ", its bias"
				} else if bias != nil {
					label += ", a bias assembled from the call's vectors"
				}
				if p := s.derive(&expr{op: program.OpLinear, args: []*val{x, w, bias}, out: x.format, label: label}); p != nil {
					sc.add(p, true)
				}
			}
		}
	}
}

// directUncalledLinears are uncalledLinears of module's own sub-modules
// (one level down): a deeper module's weights belong to its own scope.
func (s *synth) directUncalledLinears(module string) [][2]*val {
	base, _, _ := strings.Cut(module, "#")
	var out [][2]*val
	for _, l := range s.uncalledLinears(module) {
		rest := strings.TrimPrefix(l[0].origin, base+".")
		if i := strings.LastIndexByte(rest, '.'); i >= 0 && !strings.Contains(rest[:i], ".") {
			out = append(out, l) // the weight of a direct sub-module: "sub.weight"
		}
	}
	return out
}

// maxAssembledBiases bounds the biases assembledBiases places.
const maxAssembledBiases = 6

// assembledBiases are [n] biases made of the vectors in order, each at an
// offset that is a multiple of its width, with zeros between: the
// placements of all of them, or, of a lone vector, of it alone (a forward
// that joins a learned q bias, a zero k bias and a learned v bias, or
// zeros for q, k, v before an MLP's bias). At most maxAssembledBiases.
func (s *synth) assembledBiases(vecs []*val, n int) []*val {
	if len(vecs) == 0 || len(vecs) > 3 {
		return nil
	}
	total := 0
	for _, v := range vecs {
		total += v.shape[0]
	}
	if total >= n {
		return nil // nothing left for zeros: the vectors alone are no bias of n
	}
	var out []*val
	offsets := make([]int, len(vecs))
	var place func(i, from int)
	place = func(i, from int) {
		if len(out) == maxAssembledBiases {
			return
		}
		if i == len(vecs) {
			if b := s.placed(vecs, offsets, n); b != nil {
				out = append(out, b)
			}
			return
		}
		w := vecs[i].shape[0]
		for at := (from + w - 1) / w * w; at+w <= n; at += w {
			offsets[i] = at
			place(i+1, at+w)
		}
	}
	place(0, 0)
	return out
}

// placed is the [n] vector holding vecs[i] at offsets[i] and zeros
// elsewhere, joined from pieces.
func (s *synth) placed(vecs []*val, offsets []int, n int) *val {
	var pieces []*val
	at := 0
	zeros := func(k int) *val {
		return s.relConst(fmt.Sprintf("zeros[%d]", k), []int{k}, make([]float32, k), "zeros between the vectors of an assembled bias")
	}
	for i, v := range vecs {
		if gap := offsets[i] - at; gap > 0 {
			pieces = append(pieces, zeros(gap))
		}
		pieces = append(pieces, v)
		at = offsets[i] + v.shape[0]
	}
	if at < n {
		pieces = append(pieces, zeros(n-at))
	}
	return s.derive(&expr{op: program.OpConcat, attrs: program.Attrs{Axis: 0}, args: pieces, out: vecs[0].format, label: "a bias assembled from the call's vectors and zeros"})
}

// addUncalledTables adds to sc the matrices of its module's direct
// sub-modules that no call holds, as values of their own: a table the
// forward reads itself rather than calling its module (DeBERTa's
// relative embeddings, self.rel_embeddings.weight, normalised before the
// layers use them).
func (s *synth) addUncalledTables(sc *scope) {
	for _, l := range s.directUncalledLinears(sc.module) {
		if !slices.Contains(sc.vals, l[0]) {
			sc.add(l[0], false)
		}
	}
}
