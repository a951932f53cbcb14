package structure

import (
	"fmt"
	"math"

	"github.com/zflow/zflow/semantics"
)

// findEmbedders finds each stream's embedder from the model's inputs: the
// linear that reads the latents unchanged makes the image rows; a linear
// (after an optional norm) that reads another request input's rows makes
// the text rows; a table read by integer ids makes a language model's
// token rows. The hidden width is what they produce.
func (d *discoverer) findEmbedders() error {
	root := d.g.root
	if d.loop != nil {
		lp, ok := portNamed(root.ins, d.loop.Latents)
		if !ok {
			return fmt.Errorf("%s: the model call has no port %q", d.tr.Path, d.loop.Latents)
		}
		if li, ok := d.consumerLinear(lp); ok {
			d.setHidden(li.outW)
			d.tokens[image] = tokensOf(li.out)
			d.st.Embedders = append(d.st.Embedders, semantics.Embedder{
				Stream: image, Input: "latents", Kind: "linear", InWidth: li.inW,
				Patch: patchSize(lp.shape, li.inW),
				Roles: map[string]semantics.Role{"proj": d.linearRole(li)},
			})
		} else {
			d.undetermined("structure.embedders", "embed.image", "no linear outside the blocks reads the latents %v unchanged (a patchifying or convolutional embedder is not in the schema)", lp.shape)
		}
	}
	for _, p := range root.ins {
		if d.loop != nil && (p.name == d.loop.Latents || p.name == d.loop.Timestep) {
			continue
		}
		name, ok := d.requestInput(p)
		if !ok {
			continue
		}
		if !p.dt.IsFloat() {
			d.tableEmbedder(p, name)
			continue
		}
		if tokensOf(p) < 2 || !p.float() {
			continue
		}
		if li, ok := d.consumerLinear(p); ok {
			d.textEmbedder(p, name, nil, li)
			continue
		}
		for _, n := range d.g.nodes {
			in, out, ok := n.shapePreserving()
			if !ok || len(n.children) > 0 || !d.outside(n) || !d.v.same(in, p) {
				continue
			}
			if li, ok := d.consumerLinear(out); ok {
				d.textEmbedder(p, name, n, li)
				break
			}
		}
	}
	if d.st.Hidden == 0 {
		d.undetermined("structure.embedders", "model", "no embedder found: no linear or table outside the blocks reads a request input")
		return nil
	}
	for _, s := range []string{image, text} {
		if n, ok := d.tokens[s]; ok {
			d.st.Streams = append(d.st.Streams, semantics.Stream{Name: s, Tokens: n})
		}
	}
	if n, ok := d.tokens[image]; ok && d.tokens[text] == n {
		d.undetermined("structure.streams", "model", "the image and text streams both have %d rows: which weight set serves which stream is read from row counts and cannot be told apart", n)
	}
	return nil
}

// hiddenFromBlocks: without an embedder, the hidden width is what the
// first block's first float argument of several rows holds (its streams
// stay unknown: no embedder says which rows are whose).
func (d *discoverer) hiddenFromBlocks() {
	for _, p := range d.blocks[0].ins {
		if p.float() && tokensOf(p) >= 2 {
			d.st.Hidden = p.width()
			return
		}
	}
}

func (d *discoverer) setHidden(w int) {
	if d.st.Hidden == 0 {
		d.st.Hidden = w
	} else if d.st.Hidden != w {
		d.undetermined("structure.hidden", "model", "embedders produce widths %d and %d", d.st.Hidden, w)
	}
}

// consumerLinear is a linear outside the blocks whose argument holds p's
// values (possibly rearranged).
func (d *discoverer) consumerLinear(p port) (linearInfo, bool) {
	for _, n := range d.g.nodes {
		li, ok := d.linears[n]
		if ok && d.outside(n) && (d.v.same(li.in, p) || d.v.rearranged(li.in, p)) {
			return li, true
		}
	}
	return linearInfo{}, false
}

func (d *discoverer) textEmbedder(p port, name string, norm *node, li linearInfo) {
	if _, dup := d.tokens[text]; dup {
		d.undetermined("structure.embedders", "model", "request input %q is embedded too, but a text stream already exists", name)
		return
	}
	d.setHidden(li.outW)
	d.tokens[text] = tokensOf(li.out)
	d.st.Model.Inputs["context"] = p.name
	d.addInput("context", name)
	e := semantics.Embedder{Stream: text, Input: "context", Kind: "linear", InWidth: li.inW,
		Roles: map[string]semantics.Role{"proj": d.linearRole(li)}}
	if norm != nil {
		e.Roles["norm"] = d.normRole(norm)
	}
	d.st.Embedders = append(d.st.Embedders, e)
}

// tableEmbedder: integer ids read by a table make a language model's token
// rows.
func (d *discoverer) tableEmbedder(p port, name string) {
	for _, n := range d.g.nodes {
		w, ids, out, ok := n.table()
		if !ok || !d.outside(n) || !d.v.same(ids, p) {
			continue
		}
		if _, dup := d.tokens[text]; dup {
			return
		}
		d.setHidden(out.width())
		d.tokens[text] = tokensOf(out)
		d.st.Model.Inputs["token_ids"] = p.name
		d.addInput("token_ids", name)
		d.st.Embedders = append(d.st.Embedders, semantics.Embedder{
			Stream: text, Input: "token_ids", Kind: "table", InWidth: w.shape[0],
			Roles: map[string]semantics.Role{"table": d.use(semantics.Role{Module: n.c.Module, Weight: w.name})},
		})
		return
	}
}

// normRole is the role of a shape-preserving call: no parameters (not
// affine), one (γ), or two, told apart by values: γ is the per-channel
// slope from the normalised argument to the result, β the intercept.
func (d *discoverer) normRole(n *node) semantics.Role {
	r := semantics.Role{Module: n.c.Module}
	switch len(n.params) {
	case 1:
		r.Weight = n.params[0].name
	case 2:
		r.Weight, r.Bias = n.params[0].name, n.params[1].name
		in, out, _ := n.shapePreserving()
		x, y := d.v.floats(in.key), d.v.floats(out.key)
		p0, p1 := d.paramFloats(n.params[0].name), d.paramFloats(n.params[1].name)
		if x != nil && y != nil && p0 != nil && p1 != nil {
			a, _, _ := affineFit(normalize(x, in.width()), y, in.width())
			if a != nil && dist(a, p1) < dist(a, p0) {
				r.Weight, r.Bias = r.Bias, r.Weight
			}
		}
	}
	return d.use(r)
}

func (d *discoverer) paramFloats(name string) []float32 {
	key, ok := d.tr.Manifest.Params[name]
	if !ok {
		return nil
	}
	return d.v.floats(key)
}

// normalize is the layer-normalised rows of width w (no affine).
func normalize(x []float32, w int) []float32 {
	out := make([]float32, len(x))
	for r := 0; r+w <= len(x); r += w {
		var s, ss float64
		for _, v := range x[r : r+w] {
			s += float64(v)
		}
		mean := s / float64(w)
		for _, v := range x[r : r+w] {
			ss += (float64(v) - mean) * (float64(v) - mean)
		}
		inv := 1 / math.Sqrt(ss/float64(w)+1e-6)
		for i, v := range x[r : r+w] {
			out[r+i] = float32((float64(v) - mean) * inv)
		}
	}
	return out
}

func dist(a []float64, b []float32) float64 {
	if len(a) != len(b) {
		return math.Inf(1)
	}
	var s float64
	for i := range a {
		s += (a[i] - float64(b[i])) * (a[i] - float64(b[i]))
	}
	return s
}

func portNamed(ps []port, name string) (port, bool) {
	for _, p := range ps {
		if p.name == name {
			return p, true
		}
	}
	return port{}, false
}

// patchSize is p when latents [B, C, H, W] reach an embedder of width
// C·p·p in whole p×p patches (which layout cuts them is the factor
// patch_layout); 0 when the latents are not such an image.
func patchSize(latents []int, inW int) int {
	if len(latents) != 4 || latents[1] <= 0 || inW%latents[1] != 0 {
		return 0
	}
	p := int(math.Round(math.Sqrt(float64(inW / latents[1]))))
	if p < 1 || latents[1]*p*p != inW || latents[2]%p != 0 || latents[3]%p != 0 {
		return 0
	}
	return p
}
