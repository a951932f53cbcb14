package factors

import (
	"fmt"
	"math"
	"slices"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/cpu"
	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/precision"
	"github.com/zflow/zflow/search"
	"github.com/zflow/zflow/search/internal/attn"
	"github.com/zflow/zflow/search/plan"
	"github.com/zflow/zflow/semantics"
)

// The block's candidates are scored by their program fragment: the block
// built alone (program.BuildBlock, the builder generate uses) with the
// candidate's factor values bound, run teacher forced by plan.Fragment
// from the block's captured inputs, in f32 on the CPU backend (the
// backend's arithmetic: it holds float32; a factor is a semantic choice,
// scored by rel-RMS rounded once to the captured format, which f32 tells
// apart as well as float64 did), every node rounded once to f32.

// searchSpec is every fragment node's precision.
var searchSpec = exec.Out(precision.F32)

// Placeholders for the factors a block's fragment reads that its own
// search does not decide: the norms' (searched later, at each norm's own
// result, which the trace holds, so no block factor's score reads them;
// a q/k norm's kind is qk_norm, its ε and offset today's fixed scoring:
// 1e-6 and none) and the streams' order where the block does not show it
// (its rows arrive joined).
var placeholders = map[string]any{
	"norm_kind": "layer", "norm_eps": 1e-6, "norm_offset": 0.0,
	"joint_order": "text_first", "qk_norm": "none", "mlp_glu": false,
}

// tapKey is the trace key of a tap at the model's first step ("" where
// the trace has none).
func (c *capture) tapKey(tp program.Tap) string {
	call, ok := c.calls[tp.Module]
	if !ok {
		return ""
	}
	key, _ := call.Tensors.Key(tp.Port)
	return key
}

// loadInputs reads the block's inputs (each stream's rows, or the joined
// rows, and the conditioning vector) as the fragment's givens, and its
// weights' shapes.
func (b *block) loadInputs() error {
	b.shapes = program.Shapes{Weights: map[string][]int{}}
	src := program.TraceParams(b.cp.tr)
	for _, r := range b.blk.Roles {
		for _, path := range []string{r.Weight, r.Bias} {
			if s, err := src.Shape(path); path != "" && err == nil {
				b.shapes.Weights[path] = s
			}
		}
	}
	b.frag = &plan.Fragment{B: cpu.New(0), Ref: b.cp.tr, Key: b.cp.tapKey, Given: map[string]plan.Given{}, Spec: searchSpec}
	b.inputs = program.BlockInputs{Streams: map[string][]int{}}
	bd := b.blk.Boundary
	if bd == nil {
		return fmt.Errorf("the block has no boundary")
	}
	tokens := map[string]int{}
	for _, s := range b.st.Streams {
		tokens[s.Name] = s.Tokens
	}
	batch, width := 0, b.st.Hidden
	for _, s := range b.blk.Streams {
		if p, ok := bd.Inputs[s]; ok {
			t, err := b.cp.port(bd.Module, p)
			if err != nil {
				return err
			}
			if len(t.shape) != 3 {
				return fmt.Errorf("%s's rows %v are not [B, L, D]", s, t.shape)
			}
			b.inputs.Streams[s] = slices.Clone(t.shape)
			b.frag.Given[program.BlockStream(s)] = plan.Given{Data: t.v, Shape: t.shape}
			batch, width = t.shape[0], t.shape[2]
		}
	}
	if p, ok := bd.Inputs["joint"]; ok {
		t, err := b.cp.port(bd.Module, p)
		if err != nil {
			return err
		}
		batch, width = t.shape[0], t.width()
	}
	for _, s := range b.blk.Streams {
		if _, ok := b.inputs.Streams[s]; !ok {
			// Rows the block receives joined: its joined input is
			// forced, so these are never read.
			b.inputs.Streams[s] = []int{max(batch, 1), tokens[s], width}
		}
	}
	if p, ok := bd.Inputs["cond"]; ok {
		t, err := b.cp.port(bd.Module, p)
		if err != nil {
			return err
		}
		b.inputs.Cond = slices.Clone(t.shape)
		b.frag.Given[program.BlockCond] = plan.Given{Data: t.v, Shape: t.shape}
	}
	return nil
}

// fragment builds the block's program under assignment a: the
// candidate's values and the placeholders, the RoPE tables (laid out for
// a's layout, joined in a's order) given. ok is false where the
// candidate cannot be built (tables that do not cover the rows, wider
// than a head): it scores +Inf.
func (b *block) fragment(a search.Assignment) (*program.Program, bool, error) {
	doc := b.document(a)
	in := b.inputs
	in.Tables = nil
	layout := fmt.Sprint(a["rope_layout"])
	if layout != attn.None && len(b.tables) > 0 {
		names := make([]string, len(b.sets))
		for i, s := range b.sets {
			names[i] = s.stream
		}
		tag := fmt.Sprintf("%s|%v", layout, a["joint_order"])
		cos, sin, ok := b.frag.Given[program.BlockCos], b.frag.Given[program.BlockSin], true
		if cos.Tag != tag {
			t, fits := b.ropeTables(order(names, a["joint_order"]), layout)
			if ok = fits && t.W <= b.blk.HeadDim; ok {
				shape := []int{len(t.Cos) / max(t.W, 1), t.W}
				cos, sin = plan.Given{Data: f32(t.Cos), Shape: shape, Tag: tag}, plan.Given{Data: f32(t.Sin), Shape: shape, Tag: tag}
				b.frag.Given[program.BlockCos], b.frag.Given[program.BlockSin] = cos, sin
			}
		}
		if !ok {
			return nil, false, nil
		}
		in.Tables = cos.Shape
	}
	p, err := program.BuildBlock(doc, b.shapes, b.i, in)
	if err != nil {
		return nil, false, nil
	}
	return p, true, nil
}

// document is the candidate's document: the structure, a's values and
// the placeholders, every node in f32.
func (b *block) document(a search.Assignment) *semantics.Document {
	doc := &semantics.Document{Format: semantics.FormatName, Version: semantics.Version, Structure: *b.st,
		Precision: semantics.Precision{Activations: "f32"}}
	for name, v := range a {
		doc.Factors = append(doc.Factors, semantics.Factor{Name: name, Scope: "*", Value: v})
	}
	for name, v := range placeholders {
		if _, ok := a[name]; !ok {
			doc.Factors = append(doc.Factors, semantics.Factor{Name: name, Scope: "*", Value: v})
		}
	}
	slices.SortFunc(doc.Factors, func(x, y semantics.Factor) int {
		if x.Name < y.Name {
			return -1
		}
		if x.Name > y.Name {
			return 1
		}
		return 0
	})
	return doc
}

// buildable refuses a block whose recipe the builder cannot make from
// the structure (without RoPE tables, each factor at its first value):
// none of its candidates could be scored.
func (b *block) buildable(fs []search.Factor) error {
	a := search.Assignment{}
	for _, f := range fs {
		a[f.Name] = f.Values[0]
	}
	a["rope_layout"] = attn.None
	doc := b.document(a)
	_, err := program.BuildBlock(doc, b.shapes, b.i, b.inputs)
	if err != nil {
		return fmt.Errorf("its fragment cannot be built, so no factor of it is scored: %w", err)
	}
	return nil
}

func f32(x []float64) []float32 {
	out := make([]float32, len(x))
	for i, v := range x {
		out[i] = float32(v)
	}
	return out
}

// tapped is the value of p tapped at module/port ("" for none).
func tapped(p *program.Program, module, port string) string {
	for _, name := range p.Order {
		for _, tp := range p.Values[name].Taps {
			if tp.Module == module && tp.Port == port {
				return name
			}
		}
	}
	return ""
}

// producer is the node that makes value name (nil for none).
func producer(p *program.Program, name string) *program.Node {
	for i := range p.Nodes {
		if slices.Contains(p.Nodes[i].Out, name) {
			return &p.Nodes[i]
		}
	}
	return nil
}

// tokenRows samples up to sampleRows rows of a [B, L, W] value: tokens
// spread over L, the same in every sample of the batch.
func tokenRows(shape []int) []int {
	if len(shape) < 2 {
		return nil
	}
	b := 1
	for _, d := range shape[:len(shape)-2] {
		b *= d
	}
	return attn.Spread(shape[len(shape)-2], max(1, sampleRows/max(b, 1)))
}

// fsums pools a rel-RMS over comparisons: ours rounded once to the
// reference's format (precision.Sums; mask-sized values compared apart).
type fsums struct {
	s   precision.Sums
	row []float32 // one row of ours, rounded
}

// add compares ours (rows of width ow) with ref (rows of width w), at
// columns [col, col+ow) of ref's rows; false where the rows or widths do
// not match.
func (s *fsums) add(ours []float32, ow int, ref []float32, w, col int, f precision.Format) bool {
	if ow <= 0 || w <= 0 || len(ours)%ow != 0 || len(ref)%w != 0 || len(ours)/ow != len(ref)/w || col+ow > w {
		return false
	}
	if cap(s.row) < ow {
		s.row = make([]float32, ow)
	}
	row := s.row[:ow]
	for k := range len(ref) / w {
		for i, v := range ours[k*ow : (k+1)*ow] {
			row[i] = f.Round(v)
		}
		s.s.Add(f, row, ref[k*w+col:k*w+col+ow])
	}
	return true
}

func (s *fsums) score(boundary string) search.Score {
	e := s.s.RelRMS()
	if math.IsNaN(e) || s.s.R2 == 0 {
		e = math.Inf(1)
	}
	return search.Score{Err: e, Boundary: boundary, Metric: search.MetricRelRMS}
}

// compare runs value name of p at rows and compares it with the
// reference at key (columns [col, col + its width) of the reference's
// rows, of shape refShape); false where they cannot be compared.
func (s *fsums) compare(frag *plan.Fragment, p *program.Program, name, key string, refShape []int, rows []int, col int) (bool, error) {
	if info, err := frag.Ref.Info(key); err != nil || exec.Numel(info.Shape) != exec.Numel(refShape) {
		return false, nil
	}
	ours, shape, err := frag.Eval(p, name, rows)
	if err != nil {
		return false, err
	}
	ref, f, err := frag.Reference(key, refShape, rows)
	if err != nil {
		return false, err
	}
	return s.add(ours, shape[len(shape)-1], ref, refShape[len(refShape)-1], col, f), nil
}

// scoreTap scores the value p taps at tp against the reference there (at
// sampled tokens when sample): +Inf at boundary where p could not be
// built (built false) or the value not compared.
func scoreTap(frag *plan.Fragment, key func(program.Tap) string, p *program.Program, built bool, tp program.Tap, sample bool, boundary string) (search.Score, error) {
	inf := search.Score{Err: math.Inf(1), Boundary: boundary, Metric: search.MetricRelRMS}
	if !built {
		return inf, nil
	}
	name, k := tapped(p, tp.Module, tp.Port), key(tp)
	if name == "" || k == "" {
		return inf, nil
	}
	shape := p.Values[name].Shape
	var rows []int
	if sample {
		rows = tokenRows(shape)
	}
	var s fsums
	if ok, err := s.compare(frag, p, name, k, shape, rows, 0); err != nil || !ok {
		return inf, err
	}
	return s.score(boundary), nil
}
