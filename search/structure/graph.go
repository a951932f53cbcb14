package structure

import (
	"fmt"
	"slices"

	"github.com/zflow/zflow/trace"
)

// node is one call of the model's sub-tree at the step discovery reads,
// with its direct parameters and tensor ports.
type node struct {
	c        trace.Call
	parent   *node
	children []*node
	params   []param // direct parameters, in manifest order
	ins      []port  // argument ports, in manifest order
	outs     []port  // result ports, in manifest order
	order    int     // position in entry order
}

// param is one parameter: its name (an identifier only) and shape.
type param struct {
	name  string
	shape []int
}

// port is one tensor port of a call.
type port struct {
	name  string
	key   string
	dt    trace.DType
	shape []int
}

func (p port) width() int {
	if len(p.shape) == 0 {
		return 1
	}
	return p.shape[len(p.shape)-1]
}

// rows is the number of rows of width width (all axes but the last).
func (p port) rows() int {
	n := 1
	for _, d := range p.shape {
		n *= d
	}
	if w := p.width(); w > 0 {
		return n / w
	}
	return 0
}

func (p port) numel() int {
	n := 1
	for _, d := range p.shape {
		n *= d
	}
	return n
}

func (p port) float() bool { return p.dt.IsFloat() && p.dt.Components() == 1 }

// isResult reports whether a port name is a result (trace format: "out",
// "out.<...>").

// graph is the model call's sub-tree.
type graph struct {
	tr    *trace.Trace
	root  *node
	nodes []*node // entry order
}

// newGraph indexes the sub-tree of call id.
func newGraph(tr *trace.Trace, id int) (*graph, error) {
	t := tr.Tree()
	c, ok := t.Call(id)
	if !ok {
		return nil, fmt.Errorf("%s: call %d does not exist", tr.Path, id)
	}
	g := &graph{tr: tr}
	var walk func(c trace.Call, parent *node) error
	walk = func(c trace.Call, parent *node) error {
		n := &node{c: c, parent: parent, order: len(g.nodes)}
		g.nodes = append(g.nodes, n)
		for _, name := range c.Params {
			key, ok := tr.Manifest.Params[name]
			if !ok {
				return fmt.Errorf("%s: call %d names parameter %q that the trace lacks", tr.Path, c.ID, name)
			}
			info, err := tr.Info(key)
			if err != nil {
				return err
			}
			n.params = append(n.params, param{name: name, shape: slices.Clone(info.Shape)})
		}
		for _, p := range c.Tensors {
			info, err := tr.Info(p.Key)
			if err != nil {
				return err
			}
			pt := port{name: p.Name, key: p.Key, dt: info.DType, shape: slices.Clone(info.Shape)}
			if trace.IsResult(p.Name) {
				n.outs = append(n.outs, pt)
			} else {
				n.ins = append(n.ins, pt)
			}
		}
		if parent != nil {
			parent.children = append(parent.children, n)
		}
		for _, ch := range t.Children(c.ID) {
			cc, _ := t.Call(ch)
			if err := walk(cc, n); err != nil {
				return err
			}
		}
		return nil
	}
	if err := walk(c, nil); err != nil {
		return nil, err
	}
	g.root = g.nodes[0]
	return g, nil
}

// subtree lists n and its descendants in entry order.
func (n *node) subtree() []*node {
	out := []*node{n}
	for _, c := range n.children {
		out = append(out, c.subtree()...)
	}
	return out
}

// within reports whether n is a or a descendant of a.
func (n *node) within(a *node) bool {
	for m := n; m != nil; m = m.parent {
		if m == a {
			return true
		}
	}
	return false
}

// subParams counts the parameters of n's sub-tree.
func (n *node) subParams() int {
	k := len(n.params)
	for _, c := range n.children {
		k += c.subParams()
	}
	return k
}

// in is the first float argument port, out the first float result port.
func (n *node) in() (port, bool) {
	for _, p := range n.ins {
		if p.float() {
			return p, true
		}
	}
	return port{}, false
}

func (n *node) out() (port, bool) {
	for _, p := range n.outs {
		if p.float() {
			return p, true
		}
	}
	return port{}, false
}

// linear: exactly one 2-D parameter W [o, i] and at most one 1-D
// parameter of length o; an argument of width i and a result of width o.
type linearInfo struct {
	n       *node
	w, b    string
	inW     int
	outW    int
	in, out port
}

func (n *node) linear() (linearInfo, bool) {
	var li linearInfo
	var w, b []param
	for _, p := range n.params {
		switch len(p.shape) {
		case 2:
			w = append(w, p)
		case 1:
			b = append(b, p)
		default:
			return li, false
		}
	}
	if len(w) != 1 || len(b) > 1 {
		return li, false
	}
	o, i := w[0].shape[0], w[0].shape[1]
	if len(b) == 1 && b[0].shape[0] != o {
		return li, false
	}
	out, ok := n.out()
	if !ok || out.width() != o {
		return li, false
	}
	for _, p := range n.ins {
		if p.float() && p.width() == i && p.rows() == out.rows() {
			li = linearInfo{n: n, w: w[0].name, inW: i, outW: o, in: p, out: out}
			if len(b) == 1 {
				li.b = b[0].name
			}
			return li, true
		}
	}
	return li, false
}

// table: one 2-D parameter [rows, width] read by integer ids.
func (n *node) table() (w param, ids, out port, ok bool) {
	if len(n.params) != 1 || len(n.params[0].shape) != 2 {
		return
	}
	o, has := n.out()
	if !has || o.width() != n.params[0].shape[1] {
		return
	}
	for _, p := range n.ins {
		if !p.dt.IsFloat() && p.numel() == o.rows() {
			return n.params[0], p, o, true
		}
	}
	return
}

// shapePreserving: an argument and a result of one shape; its direct
// parameters are all 1-D of the last dimension's length.
func (n *node) shapePreserving() (in, out port, ok bool) {
	in, ok1 := n.in()
	out, ok2 := n.out()
	if !ok1 || !ok2 || !slices.Equal(in.shape, out.shape) {
		return port{}, port{}, false
	}
	for _, p := range n.params {
		if len(p.shape) != 1 || p.shape[0] != in.width() {
			return port{}, port{}, false
		}
	}
	return in, out, true
}
