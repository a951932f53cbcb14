package plan

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"slices"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/precision"
	"github.com/zflow/zflow/trace"
)

// Fragment runs the nodes of a program that make one value, teacher
// forced from a reference trace: every other value the trace holds at one
// of its taps is the reference's tensor, so only the nodes between those
// captured boundaries and the value run (a linear whose result the trace
// holds never does). It is the evaluator a search that scores candidates
// of a program's factors uses (search/factors): each candidate's fragment
// is built by the builder generate uses and run here.
//
// A value may be asked for at some of its rows (the second-to-last axis:
// tokens of [B, L, W], rows of a [L, W] table): each node then runs on
// the rows it needs. A pointwise or row-wise node (norm, modulate, gates,
// activations, RoPE, linear, chunks of the last axis) reads those rows of
// its inputs that have them; a slice of rows reads the rows it keeps and
// runs nothing; a join of rows reads each part's; an attention reads
// those query rows and every key, a causal one through an explicit mask
// of the rows' positions. Any other op runs whole and its rows are cut
// after.
//
// Every node runs in Spec (the search's own arithmetic, not the
// reference's rounding plan, which is another search); results are kept,
// by version (the node, its inputs' versions, the rows), up to
// CacheBytes, so that candidates that differ downstream share what they
// do not change.
type Fragment struct {
	B   exec.Backend
	Ref *trace.Trace
	// Key is the reference's trace key at a tap ("" where the trace does
	// not hold it).
	Key func(program.Tap) string
	// Given holds the Input values of the programs run (a block built
	// alone: its streams, conditioning vector and tables), whole.
	Given map[string]Given
	// Spec is every node's precision.
	Spec exec.Spec
	// CacheBytes bounds what is kept between evaluations (0: 128 MiB).
	CacheBytes int64

	cache map[uint64]exec.Tensor
	bytes int64
	ran   map[program.Op][2]int // nodes run by op: how many, and rows made (Σ of each result's rows)
	refs  map[uint64][]float32  // reference rows read, in our layout, by key, shape and rows
}

// Ran says how many nodes of op the fragment has run and how many rows
// (of the second-to-last axis, every sample of a batch counted) they made:
// the evidence that a search ran no linear layer whose result the trace
// holds (Ran(OpLinear) is 0) and how much of a tensor it computed.
func (f *Fragment) Ran(op program.Op) (nodes, rows int) {
	r := f.ran[op]
	return r[0], r[1]
}

// Given is an input value's data.
type Given struct {
	Data  []float32
	Shape []int
	Tag   string // what Data holds, where it differs between evaluations (a table's layout)
}

// Close frees what the fragment keeps.
func (f *Fragment) Close() {
	for _, t := range f.cache {
		f.B.Free(t)
	}
	f.cache, f.bytes, f.refs = nil, 0, nil
}

// Eval returns value name of p at rows of its second-to-last axis (nil:
// every row), computed by its node from its inputs, teacher forced: the
// value itself is made, every value before it that the trace holds is
// the reference's.
func (f *Fragment) Eval(p *program.Program, name string, rows []int) ([]float32, []int, error) {
	r := &fragRun{f: f, p: p, made: map[string]int{}}
	for i, n := range p.Nodes {
		for _, o := range n.Out {
			r.made[o] = i
		}
	}
	t, _, err := r.eval(name, rows, true)
	if err != nil {
		return nil, nil, err
	}
	defer f.release(t)
	v, err := f.B.Download(t)
	return v, slices.Clone(t.Shape()), err
}

// Forced is the reference's trace key at the first of v's taps the trace
// holds in v's shape ("" for none).
func (f *Fragment) Forced(v *program.Value) string {
	for _, tp := range v.Taps {
		key := f.Key(tp)
		if key == "" {
			continue
		}
		info, err := f.Ref.Info(key)
		if err != nil || !info.DType.IsFloat() || info.DType.Components() != 1 {
			continue
		}
		if _, ok := program.Relayout(nil, info.Shape, v.Shape); ok && exec.Numel(info.Shape) == exec.Numel(v.Shape) {
			return key
		}
	}
	return ""
}

// Reference reads the reference's tensor at key in the element order of a
// value of shape, at rows of its second-to-last axis (nil: all), and its
// stored format. Sampled rows are kept (candidates compare the same rows
// again); a whole tensor is read anew, and the trace's mapped pages are
// handed back once read.
func (f *Fragment) Reference(key string, shape []int, rows []int) ([]float32, precision.Format, error) {
	info, err := f.Ref.Info(key)
	if err != nil {
		return nil, 0, err
	}
	format := precision.F32
	switch info.DType {
	case trace.BFloat16:
		format = precision.BF16
	case trace.Float16:
		format = precision.F16
	}
	h := fnv.New64a()
	fmt.Fprintf(h, "%s|%v|", key, shape)
	hashRows(h, rows)
	ck := h.Sum64()
	if v, ok := f.refs[ck]; ok {
		return v, format, nil
	}
	t, err := f.Ref.Tensor(key)
	if err != nil {
		return nil, 0, fmt.Errorf("reference %s: %w", key, err)
	}
	defer t.Release()
	v, err := program.RefFloat32(t)
	if err != nil {
		return nil, 0, fmt.Errorf("reference %s: %w", key, err)
	}
	var ok bool
	if v, ok = program.Relayout(v, info.Shape, shape); !ok || len(v) != exec.Numel(shape) {
		return nil, 0, fmt.Errorf("reference %s: %v is not laid out as %v", key, info.Shape, shape)
	}
	if rows == nil {
		return v, format, nil
	}
	v = pickRows(v, shape, rows)
	if f.refs == nil {
		f.refs = map[uint64][]float32{}
	}
	f.refs[ck] = v
	return v, format, nil
}

// pickRows gathers rows of the second-to-last axis of v (of shape).
func pickRows(v []float32, shape []int, rows []int) []float32 {
	if len(shape) < 2 || rows == nil {
		return v
	}
	w, n := shape[len(shape)-1], shape[len(shape)-2]
	outer := len(v) / max(1, w*n)
	out := make([]float32, 0, outer*len(rows)*w)
	for o := range outer {
		for _, r := range rows {
			out = append(out, v[(o*n+r)*w:(o*n+r+1)*w]...)
		}
	}
	return out
}

// withRows is shape with its second-to-last axis k.
func withRows(shape []int, k int) []int {
	s := slices.Clone(shape)
	s[len(s)-2] = k
	return s
}

// fragRun is one Eval.
type fragRun struct {
	f    *Fragment
	p    *program.Program
	made map[string]int // value → the node that makes it
}

func (f *Fragment) keep(ver uint64, t exec.Tensor) {
	limit := f.CacheBytes
	if limit == 0 {
		limit = 128 << 20
	}
	b := int64(exec.Numel(t.Shape())) * 4
	if f.cache == nil {
		f.cache = map[uint64]exec.Tensor{}
	}
	if f.bytes+b > limit {
		return // the caller's release frees it
	}
	f.cache[ver] = t
	f.bytes += b
}

// release frees a tensor eval returned unless the cache holds it.
func (f *Fragment) release(t exec.Tensor) {
	for _, c := range f.cache {
		if c == t {
			return
		}
	}
	f.B.Free(t)
}

func hashRows(h interface{ Write([]byte) (int, error) }, rows []int) {
	var buf [8]byte
	if rows == nil {
		h.Write([]byte("all"))
		return
	}
	for _, r := range rows {
		binary.LittleEndian.PutUint64(buf[:], uint64(r))
		h.Write(buf[:])
	}
}

// eval makes value name at rows: the reference's where the trace holds it
// (unless top), the given or the weight, else its node's result. The
// tensor is the cache's (release it after use).
func (r *fragRun) eval(name string, rows []int, top bool) (exec.Tensor, uint64, error) {
	f := r.f
	v, ok := r.p.Values[name]
	if !ok {
		return nil, 0, fmt.Errorf("plan: fragment: no value %q", name)
	}
	if rows != nil && len(v.Shape) < 2 {
		rows = nil
	}
	h := fnv.New64a()
	var src func() ([]float32, error) // the values at rows
	key := ""
	if !top && v.Kind == program.Temp {
		key = f.Forced(v)
	}
	switch {
	case key != "":
		fmt.Fprintf(h, "ref|%s|%v|", key, v.Shape)
		src = func() ([]float32, error) {
			d, _, err := f.Reference(key, v.Shape, rows)
			return d, err
		}
	case v.Kind == program.Input:
		g, ok := f.Given[v.Source]
		if !ok || exec.Numel(g.Shape) != exec.Numel(v.Shape) {
			return nil, 0, fmt.Errorf("plan: fragment: input %q is not given as %v", v.Source, v.Shape)
		}
		fmt.Fprintf(h, "given|%s|%v|%s|", v.Source, v.Shape, g.Tag)
		src = func() ([]float32, error) { return pickRows(g.Data, v.Shape, rows), nil }
	case v.Kind == program.Weight:
		pk, ok := f.Ref.Manifest.Params[v.Source]
		if !ok {
			return nil, 0, fmt.Errorf("plan: fragment: no parameter %q", v.Source)
		}
		rows = nil
		fmt.Fprintf(h, "weight|%s|", v.Source)
		src = func() ([]float32, error) {
			d, _, err := f.Reference(pk, v.Shape, nil)
			return d, err
		}
	case v.Kind == program.Const:
		rows = nil
		fmt.Fprintf(h, "const|%s|%v|", v.Name, v.Shape)
		binary.Write(h, binary.LittleEndian, v.Data)
		src = func() ([]float32, error) { return v.Data, nil }
	case v.Kind == program.Temp:
		return r.node(name, v, rows, top)
	default:
		return nil, 0, fmt.Errorf("plan: fragment: %s %q cannot be given", v.Kind, name)
	}
	hashRows(h, rows)
	ver := h.Sum64()
	if t, ok := f.cache[ver]; ok {
		return t, ver, nil
	}
	d, err := src()
	if err != nil {
		return nil, 0, err
	}
	shape := v.Shape
	if rows != nil {
		shape = withRows(shape, len(rows))
	}
	t, err := f.B.Upload(d, shape, precision.F32)
	if err != nil {
		return nil, 0, fmt.Errorf("plan: fragment: %s (%s): %w", name, v.Kind, err)
	}
	f.keep(ver, t)
	return t, ver, nil
}

// node runs the node that makes name, on the rows it needs of its inputs.
func (r *fragRun) node(name string, v *program.Value, rows []int, top bool) (exec.Tensor, uint64, error) {
	f := r.f
	i, ok := r.made[name]
	if !ok {
		return nil, 0, fmt.Errorf("plan: fragment: no node makes %q", name)
	}
	n := r.p.Nodes[i]
	n.Spec = f.Spec
	out := slices.Index(n.Out, name)
	demand, cut, pass := r.demands(&n, v, rows)
	if pass >= 0 { // a slice of rows: the rows of its input
		return r.eval(n.In[pass], demand[pass], top)
	}
	// A value asked for is made anew (each candidate's differs); what a
	// node reads is known by its version and kept.
	h := fnv.New64a()
	if !top {
		nodeKey(h, &n)
	}
	in := make([]exec.Tensor, len(n.In))
	for j, x := range n.In {
		if x == "" || demand[j] != nil && len(demand[j]) == 0 {
			continue // absent, or a part of a join that holds none of the rows
		}
		t, ver, err := r.eval(x, demand[j], false)
		if err != nil {
			return nil, 0, err
		}
		defer f.release(t)
		in[j] = t
		binary.Write(h, binary.LittleEndian, ver)
	}
	hashRows(h, rows)
	fmt.Fprintf(h, "|%d|%v", out, cut)
	ver := h.Sum64()
	if t, ok := f.cache[ver]; ok && !top {
		return t, ver, nil
	}
	if n.Op == program.OpConcat && rows != nil && !cut {
		// The parts that hold none of the rows are left out.
		var parts []exec.Tensor
		for j, t := range in {
			if t != nil && len(demand[j]) > 0 {
				parts = append(parts, t)
			}
		}
		in = parts
	}
	if a := n.Attrs.Attention; n.Op == program.OpAttention && rows != nil && !cut && (a.Mask == exec.MaskCausal || a.Mask == exec.MaskNone && (a.Window > 0 || a.Block > 0)) {
		mask, err := r.causalMask(&n, rows, in[1].Shape()[1], v.Shape[1])
		if err != nil {
			return nil, 0, err
		}
		defer f.B.Free(mask)
		for len(in) < 4 {
			in = append(in, nil)
		}
		in[3] = mask
		n.Attrs.Attention.Mask, n.Attrs.Attention.Window, n.Attrs.Attention.Block = exec.MaskExplicit, 0, 0 // the window is in the mask
	}
	outs, err := program.RunNode(f.B, &n, in)
	if err != nil {
		return nil, 0, fmt.Errorf("plan: fragment: node %d (%s %s): %w", i, n.Op, n.Role, err)
	}
	if f.ran == nil {
		f.ran = map[program.Op][2]int{}
	}
	c := f.ran[n.Op]
	if s := outs[out].Shape(); len(s) >= 2 {
		c[1] += exec.Numel(s) / s[len(s)-1]
	}
	c[0]++
	f.ran[n.Op] = c
	var res exec.Tensor
	for j, t := range outs {
		if j == out {
			res = t
			continue
		}
		f.B.Free(t)
	}
	if cut && rows != nil {
		d, err := f.B.Download(res)
		f.B.Free(res)
		if err != nil {
			return nil, 0, err
		}
		if res, err = f.B.Upload(pickRows(d, v.Shape, rows), withRows(v.Shape, len(rows)), res.Format()); err != nil {
			return nil, 0, err
		}
	}
	if !top {
		f.keep(ver, res) // what the value asked for is compared once; what nodes read is kept
	}
	return res, ver, nil
}

// demands says at which rows the node reads each input to make rows of v
// (nil: every row), whether it runs whole and its rows are cut after
// (cut), and, for a slice of rows, which input it passes through (pass ≥
// 0: the value is that input at demand[pass]).
func (r *fragRun) demands(n *program.Node, v *program.Value, rows []int) (demand [][]int, cut bool, pass int) {
	demand = make([][]int, len(n.In))
	if rows == nil {
		return demand, false, -1
	}
	rank := len(v.Shape)
	rowAxis := func(axis, rank int) bool { return axis == rank-2 || axis < 0 && axis+rank == rank-2 }
	rowed := func(x string) bool {
		s := r.p.Values[x].Shape
		return len(s) == rank && s[rank-2] == v.Shape[rank-2]
	}
	switch n.Op {
	case program.OpSlice:
		if !rowAxis(n.Attrs.Axis, rank) {
			break
		}
		d := make([]int, len(rows))
		for k, x := range rows {
			d[k] = x + n.Attrs.Start
		}
		demand[0] = d
		return demand, false, 0
	case program.OpConcat:
		if !rowAxis(n.Attrs.Axis, rank) {
			for j, x := range n.In {
				if rowed(x) {
					demand[j] = rows
				}
			}
			return demand, false, -1
		}
		off := 0
		for j, x := range n.In {
			l := r.p.Values[x].Shape[rank-2]
			d := []int{}
			for _, y := range rows {
				if y >= off && y < off+l {
					d = append(d, y-off)
				}
			}
			demand[j] = d
			off += l
		}
		return demand, false, -1
	case program.OpAttention:
		a := n.Attrs.Attention
		if len(n.In) > 3 && n.In[3] != "" || len(n.In) > 4 && n.In[4] != "" || a.Mask != exec.MaskNone && a.Mask != exec.MaskCausal {
			break
		}
		demand[0] = rows
		return demand, false, -1
	case program.OpChunk:
		if rowAxis(n.Attrs.Axis, rank) {
			break
		}
		fallthrough
	case program.OpNorm, program.OpModulate, program.OpGatedResidual, program.OpAct, program.OpGLU, program.OpAdd,
		program.OpMul, program.OpSub, program.OpDiv, program.OpRope, program.OpLinear, program.OpCast:
		for j, x := range n.In {
			if x != "" && rowed(x) {
				demand[j] = rows
			}
		}
		if n.Op == program.OpRope {
			for j := 1; j < len(n.In) && j < 3; j++ { // the tables' rows are the rows of x
				if s := r.p.Values[n.In[j]].Shape; len(s) >= 2 && s[len(s)-2] == v.Shape[rank-2] {
					demand[j] = rows
				}
			}
		}
		return demand, false, -1
	}
	return make([][]int, len(n.In)), true, -1
}

// causalMask is the explicit mask of a causal attention (with its
// window) at query rows of keys: row i sees key j ≤ rows[i] (and
// j > rows[i] − window); of a band, |j − rows[i]| < window; of blocks
// (queries of queries rows in all), the keys before the blocks and those
// of rows[i]'s block.
func (r *fragRun) causalMask(n *program.Node, rows []int, keys, queries int) (exec.Tensor, error) {
	a := n.Attrs.Attention
	w, band, b, pre := a.Window, a.Mask == exec.MaskNone, a.Block, keys-queries
	m := make([]float32, len(rows)*keys)
	for i, q := range rows {
		for j := range keys {
			if b > 0 && (j < pre || q/b == (j-pre)/b) || b == 0 && (band && j > q-w && j < q+w || !band && j <= q && (w == 0 || j > q-w)) {
				m[i*keys+j] = 1
			}
		}
	}
	return r.f.B.Upload(m, []int{len(rows), keys}, precision.F32)
}

// nodeKey writes what a node computes to h: its op, role and spec and the
// attributes its op reads (all of them, formatted, for an op not listed).
func nodeKey(h interface{ Write([]byte) (int, error) }, n *program.Node) {
	a := &n.Attrs
	fmt.Fprintf(h, "node|%d|%s|%d|%d|%d|", n.Op, n.Role, n.Spec.Out, n.Spec.Round, n.Spec.Math)
	var err error
	switch n.Op {
	case program.OpConcat, program.OpSlice, program.OpChunk:
		err = binary.Write(h, binary.LittleEndian, [4]int64{int64(a.Axis), int64(a.Start), int64(a.End), int64(a.N)})
	case program.OpNorm:
		p := a.Norm
		fmt.Fprintf(h, "%d|%g|%g|%d", p.Kind, p.Eps, p.Offset, p.Group)
	case program.OpModulate:
		err = binary.Write(h, binary.LittleEndian, a.Modulate)
	case program.OpAct, program.OpGLU, program.OpGatedResidual:
		err = binary.Write(h, binary.LittleEndian, a.Act)
	case program.OpRope:
		err = binary.Write(h, binary.LittleEndian, [3]int64{int64(a.Rope.Heads), int64(a.Rope.Layout), int64(a.Rope.RotaryDim)})
	case program.OpAttention:
		p := a.Attention
		fmt.Fprintf(h, "%d|%d|%d|%g|%d|%d|%g|%v|%g", p.Heads, p.KVHeads, p.Mask, p.Scale, p.Window, p.Block, p.Softcap, p.ALiBi, p.ALiBiScale)
	default:
		fmt.Fprintf(h, "%v", *a)
	}
	if err != nil {
		fmt.Fprintf(h, "%v", *a)
	}
}
