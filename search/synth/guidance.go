package synth

import (
	"fmt"
	"iter"
	"maps"
	"math"
	"slices"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/precision"
)

// latentsRepeated binds a model argument that is the latents repeated k ≥
// 2 times along one axis (classifier-free guidance: the pipeline's
// cat([latents] * 2), one copy for the prompt and one for the negative
// prompt): the latents' input of the output's shape, every copy equal to
// it at step 0 and changing with the steps; nil when the argument is not
// that. The model's result then holds k predictions, which guided (below)
// combines.
func (s *synth) latentsRepeated(target *val, inputs map[string]*val, sigmaName string, roles map[string]string) *val {
	for latName, lat := range s.latentsCandidates(target, inputs, sigmaName) {
		for ax := range target.shape {
			n := lat.shape[ax]
			if n == 0 || target.shape[ax] < 2*n || target.shape[ax]%n != 0 {
				continue
			}
			if !equalBut(lat.shape, target.shape, ax) {
				// the copies longer along another axis: each the latents
				// joined with a condition
				if v := s.joinedRepeated(target, inputs, sigmaName, roles, ax, n); v != nil {
					return v
				}
				continue
			}
			k := target.shape[ax] / n
			copies := true
			for c := range k {
				if relRMS(lat.format, sliceData(target, ax, c*n, (c+1)*n), lat.data) > 0 || !s.partVaries(target, ax, c*n, (c+1)*n) {
					copies = false
					break
				}
			}
			if !copies {
				continue
			}
			s.bindLatents(lat, latName, roles)
			parts := make([]*val, k)
			for c := range parts {
				parts[c] = lat
			}
			j := s.derive(&expr{op: program.OpConcat, attrs: program.Attrs{Axis: ax}, args: parts, out: target.format, label: fmt.Sprintf("the latents repeated %d times (guidance)", k)})
			if j == nil {
				continue
			}
			s.guidance = &guidanceAxis{axis: ax, copies: k}
			s.latentsIn = &latentsPart{axis: ax, start: 0, end: n} // the first copy shows each step's latents
			return adopt(target, j)
		}
	}
	return nil
}

// joinedRepeated binds a model argument that is the latents joined with a
// condition along another axis (latentsJoined) and that join repeated k =
// size/n ≥ 2 times along ax, where the latents hold n entries (a pipeline
// that joins the latents with a reference's or zeros by width, then
// doubles the batch for classifier-free guidance: DreamLite's). The
// copies' conditions may differ: each is the first copy's, zeros, or a
// request input (an image edit's batch of three joins the image's
// latents to the first two copies and zeros to the third:
// InstructPix2Pix's). nil when the argument is not that.
func (s *synth) joinedRepeated(target *val, inputs map[string]*val, sigmaName string, roles map[string]string, ax, n int) *val {
	k := target.shape[ax] / n
	first := s.part(target, ax, 0, n)
	same := true
	for c := 1; c < k; c++ {
		if relRMS(target.format, sliceData(target, ax, c*n, (c+1)*n), first.data) != 0 {
			same = false
			break
		}
	}
	if !same && !s.copiesJoinedAlike(target, ax, n, inputs, sigmaName) {
		return nil
	}
	j := s.latentsJoined(first, inputs, sigmaName, roles) // along another axis: first holds n along ax, as the latents do
	if j == nil {
		return nil
	}
	parts := make([]*val, k)
	for c := range parts {
		parts[c] = j
		if !same && c > 0 {
			parts[c] = s.copyJoined(target, ax, c, n, j, inputs, roles)
		}
		if parts[c] == nil {
			s.latentsIn = nil
			return nil
		}
	}
	r := s.derive(&expr{op: program.OpConcat, attrs: program.Attrs{Axis: ax}, args: parts, out: target.format, label: fmt.Sprintf("the joined latents repeated %d times (guidance)", k)})
	if r == nil {
		s.latentsIn = nil
		return nil
	}
	s.guidance = &guidanceAxis{axis: ax, copies: k}
	return adopt(target, r)
}

// copiesJoinedAlike reports, before anything is bound, whether every copy
// along ax of target (n entries each) holds a latents candidate at the
// same place along another axis, the same in every copy, beside a rest
// that is the first copy's, zeros, or a request input's values.
func (s *synth) copiesJoinedAlike(target *val, ax, n int, inputs map[string]*val, sigmaName string) bool {
	k := target.shape[ax] / n
	copies := make([]*val, k)
	for c := range copies {
		copies[c] = &val{shape: slices.Clone(target.shape), data: sliceData(target, ax, c*n, (c+1)*n), format: target.format}
		copies[c].shape[ax] = n
	}
	for _, lat := range s.latentsCandidates(copies[0], inputs, sigmaName) {
		for ax2 := range target.shape {
			m, rest := lat.shape[ax2], copies[0].shape[ax2]-lat.shape[ax2]
			if ax2 == ax || rest <= 0 || !equalBut(lat.shape, copies[0].shape, ax2) {
				continue
			}
			for _, at := range []int{0, rest} {
				restAt := m
				if at > 0 {
					restAt = 0
				}
				alike := true
				for _, cp := range copies {
					if relRMS(target.format, sliceData(cp, ax2, at, at+m), lat.data) != 0 {
						alike = false
						break
					}
					r := sliceData(cp, ax2, restAt, restAt+rest)
					if !slices.Equal(r, sliceData(copies[0], ax2, restAt, restAt+rest)) && !allZero(r) && inputHolding(inputs, r) == "" {
						alike = false
						break
					}
				}
				if alike {
					return true
				}
			}
		}
	}
	return false
}

// copyJoined is copy c of target's join along ax: the bound latents
// (first's join j: latentsIn says where) beside zeros or the request
// input the copy holds in place of the first copy's condition; j itself
// where the copy is first's.
func (s *synth) copyJoined(target *val, ax, c, n int, j *val, inputs map[string]*val, roles map[string]string) *val {
	d := sliceData(target, ax, c*n, (c+1)*n)
	if slices.Equal(d, j.data) {
		return j
	}
	in := s.latentsIn
	if in == nil || in.axis == ax || j.from == nil || len(j.from.args) < 2 {
		return nil
	}
	args := j.from.args
	lat := args[0]
	if in.start > 0 {
		lat = args[len(args)-1]
	}
	shape := slices.Clone(j.shape)
	rest := shape[in.axis] - (in.end - in.start)
	shape[in.axis] = rest
	cp := &val{shape: slices.Clone(j.shape), data: d, format: target.format}
	restAt := in.end
	if in.start > 0 {
		restAt = 0
	}
	r := sliceData(cp, in.axis, restAt, restAt+rest)
	var cond *val
	if allZero(r) {
		cond = s.zeros(shape, target.format, target.origin, "the condition a guided copy joins in place of another's: zeros")
	} else if name := inputHolding(inputs, r); name != "" {
		cond = s.reshape(inputs[name], shape)
		if _, dup := roles[name]; !dup && cond != nil {
			roles[name] = name
			s.em.bindLeaf(inputs[name], program.Input, program.InputValue(name), name)
		}
	}
	if cond == nil {
		return nil
	}
	parts := []*val{lat, cond}
	if in.start > 0 {
		parts = []*val{cond, lat}
	}
	return s.derive(&expr{op: program.OpConcat, attrs: program.Attrs{Axis: in.axis}, args: parts, out: target.format, label: "latents joined with another copy's condition"})
}

// inputHolding is the first request input, in name order, whose values
// are d's exactly; "" when none is.
func inputHolding(inputs map[string]*val, d []float32) string {
	for _, name := range slices.Sorted(maps.Keys(inputs)) {
		if slices.Equal(inputs[name].data, d) {
			return name
		}
	}
	return ""
}

// latentsCandidates are the request inputs, in name order, that may be
// the latents a model argument joins or repeats: of the output's shape
// and the argument's rank, σ's input aside.
func (s *synth) latentsCandidates(target *val, inputs map[string]*val, sigmaName string) iter.Seq2[string, *val] {
	return func(yield func(string, *val) bool) {
		out := s.outputShape()
		for _, name := range slices.Sorted(maps.Keys(inputs)) {
			lat := inputs[name]
			if name == sigmaName || !slices.Equal(lat.shape, out) || len(lat.shape) != len(target.shape) {
				continue
			}
			if !yield(name, lat) {
				return
			}
		}
	}
}

// guidanceAxis is where a model argument repeats the latents: the axis
// and how many copies.
type guidanceAxis struct {
	axis, copies int
}

// guided are the candidate velocities of a result out that holds two
// predictions along the guidance axis, each of the latents' shape:
// classifier-free guidance, uncond + g·(cond − uncond), g fitted by least
// squares to want (the velocity the steps imply, times a sign) and
// snapped to a simple number. Which half is the prompt's the values
// cannot tell (either order fits, with g and 1 − g); the one read has g
// ≥ ½, as a guidance scale is, so the document names the scale the
// pipeline was given.
//
// A batch of three predictions is combined with two scales: a base plus
// two scaled differences, in the two arrangements pipelines write
// (perturbed-attention guidance's u + g·(c − u) + p·(c − t), an image
// edit's u + g·(a − b) + p·(b − u)), every order of the copies tried.
func (s *synth) guided(out *val, shape []int, want []float32) []*val {
	j := s.guidance
	if j == nil || j.copies != 2 && j.copies != 3 || len(out.shape) != len(shape) || !equalBut(out.shape, shape, j.axis) || out.shape[j.axis] != j.copies*shape[j.axis] {
		return nil
	}
	n := shape[j.axis]
	copyOf := func(c int) *val {
		return s.derive(&expr{op: program.OpSlice, attrs: program.Attrs{Axis: j.axis, Start: c * n, End: (c + 1) * n}, args: []*val{out}, out: out.format, label: fmt.Sprintf("prediction %d of the guided batch", c)})
	}
	if j.copies == 2 {
		return s.guidedOf(copyOf(0), copyOf(1), out.format, want)
	}
	return s.guidedOfThree([3]*val{copyOf(0), copyOf(1), copyOf(2)}, out.format, want)
}

// guidedOfThree are x0 + g·(x1 − x0) + p·(x1 − x2) and x0 + g·(x1 − x2) +
// p·(x2 − x0) over every order (x0, x1, x2) of three predictions, g and p
// fitted jointly by least squares to want and snapped to simple numbers;
// a scale that snaps to 0 drops its term (guidance over two of the three).
func (s *synth) guidedOfThree(p [3]*val, format precision.Format, want []float32) []*val {
	if p[0] == nil || p[1] == nil || p[2] == nil {
		return nil
	}
	sub := func(a, b *val) *val {
		return s.derive(&expr{op: program.OpSub, args: []*val{a, b}, out: format, label: "the difference of two predictions"})
	}
	var forms []*val
	for _, o := range [][3]int{{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}} {
		x0, x1, x2 := p[o[0]], p[o[1]], p[o[2]]
		for _, d := range [][2]*val{{sub(x1, x0), sub(x1, x2)}, {sub(x1, x2), sub(x2, x0)}} {
			if d[0] == nil || d[1] == nil {
				continue
			}
			g, q, ok := twoScales(d[0].data, d[1].data, x0.data, want, format)
			if !ok || g < 0.5 {
				continue
			}
			v := x0
			for i, k := range []float64{g, q} {
				if k == 0 {
					continue
				}
				scaled := s.derive(&expr{op: program.OpMul, args: []*val{d[i], s.constant(k)}, out: format, label: fmt.Sprintf("times the scale %g", k)})
				v = s.derive(&expr{op: program.OpAdd, args: []*val{v, scaled}, out: format, label: fmt.Sprintf("guidance over three predictions, scales %g and %g", g, q)})
				if v == nil {
					break
				}
			}
			if v != nil && v != x0 {
				forms = append(forms, v)
			}
		}
	}
	return forms
}

// twoScales are the g and p minimising |u + g·d1 + p·d2 − w| (least
// squares), each snapped as guidanceScale snaps one; ok false where d1
// and d2 are parallel (or zero).
func twoScales(d1, d2, u, w []float32, f precision.Format) (g, p float64, ok bool) {
	var a, b, c, r1, r2 float64
	for i := range d1 {
		x, y, r := float64(d1[i]), float64(d2[i]), float64(w[i])-float64(u[i])
		a, b, c, r1, r2 = a+x*x, b+x*y, c+y*y, r1+x*r, r2+y*r
	}
	det := a*c - b*b
	if det <= 1e-12*a*c || det == 0 {
		return 0, 0, false
	}
	g, p = (r1*c-r2*b)/det, (r2*a-r1*b)/det
	miss := func(g, p float64) float64 {
		fit := make([]float32, len(d1))
		for i := range fit {
			fit[i] = float32(float64(u[i]) + g*float64(d1[i]) + p*float64(d2[i]))
		}
		return relRMS(f, fit, w)
	}
	at := miss(g, p)
	keep := func(e float64) bool { return e <= math.Max(1.01*at, tolerance(f)/100) }
	g = snap(g, func(x float64) bool { return keep(miss(x, p)) })
	p = snap(p, func(x float64) bool { return keep(miss(g, x)) })
	return g, p, true
}

// guidedCalls are guided's candidates over the results of two model calls
// of a step, each of the latents' shape (a pipeline that calls the model
// once for the prompt and once for the negative prompt), every ordered
// pair of calls tried.
func (s *synth) guidedCalls(shape []int, want []float32) []*val {
	var forms []*val
	for i, a := range s.callResults {
		for _, b := range s.callResults[i+1:] {
			if a == nil || b == nil || a.numel() != exec.Numel(shape) || b.numel() != a.numel() {
				continue
			}
			forms = append(forms, s.guidedOf(s.reshape(a, shape), s.reshape(b, shape), a.format, want)...)
		}
	}
	return forms
}

// guidedOf are uncond + g·(cond − uncond) over predictions a and b, each
// taken as the prompt's in turn, g read as guided says.
func (s *synth) guidedOf(a, b *val, format precision.Format, want []float32) []*val {
	if a == nil || b == nil {
		return nil
	}
	var forms []*val
	for _, p := range [][2]*val{{a, b}, {b, a}} {
		cond, uncond := p[0], p[1]
		diff := s.derive(&expr{op: program.OpSub, args: []*val{cond, uncond}, out: format, label: "the prediction less the unconditional one"})
		if diff == nil {
			continue
		}
		g, ok := guidanceScale(diff.data, uncond.data, want, format)
		if !ok || g < 0.5 {
			continue
		}
		scaled := s.derive(&expr{op: program.OpMul, args: []*val{diff, s.constant(g)}, out: format, label: fmt.Sprintf("times the guidance scale %g", g)})
		if v := s.derive(&expr{op: program.OpAdd, args: []*val{uncond, scaled}, out: format, label: fmt.Sprintf("classifier-free guidance, scale %g", g)}); v != nil {
			forms = append(forms, v)
		}
	}
	return forms
}

// guidanceScale is the g minimising |u + g·d − w| (least squares), snapped
// to the simplest number whose fit misses w by at most 1 % more than g's,
// or by a hundredth of f's tolerance (w is read off stored latents, so its
// own rounding sets the floor); ok false where d is all zero.
func guidanceScale(d, u, w []float32, f precision.Format) (float64, bool) {
	var dd, dr float64
	for i := range d {
		dd += float64(d[i]) * float64(d[i])
		dr += float64(d[i]) * (float64(w[i]) - float64(u[i]))
	}
	if dd == 0 {
		return 0, false
	}
	g := dr / dd
	miss := func(x float64) float64 {
		fit := make([]float32, len(d))
		for i := range fit {
			fit[i] = float32(float64(u[i]) + x*float64(d[i]))
		}
		return relRMS(f, fit, w)
	}
	at := miss(g)
	return snap(g, func(x float64) bool { return miss(x) <= math.Max(1.01*at, tolerance(f)/100) }), true
}
