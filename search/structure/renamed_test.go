package structure

import (
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/zflow/zflow/semantics"
	"github.com/zflow/zflow/trace"
)

// renaming maps every name a trace holds to an opaque one.
type renaming struct {
	module, param, field, input, output map[string]string
}

func newRenaming() *renaming {
	return &renaming{module: map[string]string{}, param: map[string]string{}, field: map[string]string{}, input: map[string]string{}, output: map[string]string{}}
}

func opaque(m map[string]string, prefix, name string) string {
	if s, ok := m[name]; ok {
		return s
	}
	s := prefix + strconv.Itoa(len(m))
	m[name] = s
	return s
}

// port renames a port: "arg<i>" stays; every named component of "kw.<..>"
// and "out.<..>" becomes opaque; indices stay.
func (r *renaming) port(p string) string {
	parts := strings.Split(p, ".")
	for i := 1; i < len(parts); i++ {
		if _, err := strconv.Atoi(parts[i]); err != nil {
			parts[i] = opaque(r.field, "f", parts[i])
		}
	}
	return strings.Join(parts, ".")
}

// renameTrace writes a copy of src to dst with every module path, class
// name, parameter name, keyword and field name, request input and output
// name replaced by an opaque one (keys rewritten to match), and, when
// shuffle is set, each run of sibling leaf calls that read the same
// argument (independent of one another) in reverse entry order.
func renameTrace(t *testing.T, src, dst string, shuffle, inline bool) *renaming {
	t.Helper()
	tr := openTrace(t, src)
	m := tr.Manifest
	r := newRenaming()
	keys := map[string]string{}
	newKey := func(old, key string) string {
		if k, ok := keys[old]; ok {
			return k
		}
		keys[old] = key
		return key
	}
	out := &trace.Manifest{Producer: m.Producer, Params: map[string]string{}, Inputs: map[string]string{}, Outputs: map[string]string{}}
	names := func(mp map[string]string) []string {
		var s []string
		for k := range mp {
			s = append(s, k)
		}
		slices.Sort(s)
		return s
	}
	for _, name := range names(m.Params) {
		n := opaque(r.param, "p", name)
		out.Params[n] = newKey(m.Params[name], "param/"+n)
	}
	for _, name := range names(m.Inputs) {
		n := opaque(r.input, "i", name)
		out.Inputs[n] = newKey(m.Inputs[name], "input/"+n)
	}
	for _, name := range names(m.Outputs) {
		n := opaque(r.output, "o", name)
		out.Outputs[n] = newKey(m.Outputs[name], "output/"+n)
	}
	for _, c := range m.Calls {
		if inline && pointwiseLeaf(tr, c) {
			continue
		}
		nc := c
		nc.Module = opaque(r.module, "m", c.Module)
		nc.Type = "T"
		nc.Params = nil
		for _, p := range c.Params {
			nc.Params = append(nc.Params, r.param[p])
		}
		scope := "pre"
		if c.Step != nil {
			scope = "s" + strconv.Itoa(*c.Step)
		}
		ord := ""
		if c.Ordinal > 0 {
			ord = "#" + strconv.Itoa(c.Ordinal)
		}
		nc.Tensors = nil
		for _, p := range c.Tensors {
			np := r.port(p.Name)
			nc.Tensors = append(nc.Tensors, trace.Port{Name: np, Key: newKey(p.Key, scope+"/"+nc.Module+ord+"/"+np)})
		}
		nc.Scalars = map[string]any{}
		for k, v := range c.Scalars {
			nc.Scalars[r.port(k)] = v
		}
		out.Calls = append(out.Calls, nc)
	}
	if shuffle {
		var runs int
		out.Calls, runs = shuffleSiblings(tr, out.Calls)
		t.Logf("reversed %d runs of sibling calls reading one argument", runs)
	}
	w, err := trace.Create(dst)
	if err != nil {
		t.Fatal(err)
	}
	for _, old := range tr.Keys() {
		k, ok := keys[old]
		if !ok {
			continue
		}
		tn, err := tr.Tensor(old)
		if err != nil {
			w.Abort()
			t.Fatal(err)
		}
		info, _ := tr.Info(old)
		if err := w.Add(k, tn.DType, info.Shape, tn.Bytes()); err != nil {
			w.Abort()
			t.Fatal(err)
		}
	}
	if err := w.Close(out); err != nil {
		t.Fatal(err)
	}
	return r
}

// pointwiseLeaf reports whether c is a leaf call without parameters whose
// result has its argument's shape and is neither normalised rows nor a
// sinusoid: an activation or a dropout, which a model may as well compute
// inline (F.silu) without a call of its own.
func pointwiseLeaf(tr *trace.Trace, c trace.Call) bool {
	if len(c.Params) > 0 || len(tr.Tree().Children(c.ID)) > 0 || len(c.Tensors) != 2 {
		return false
	}
	in, err1 := tr.Info(c.Tensors[0].Key)
	out, err2 := tr.Info(c.Tensors[1].Key)
	if err1 != nil || err2 != nil || !slices.Equal(in.Shape, out.Shape) || len(out.Shape) == 0 {
		return false
	}
	tn, err := tr.Tensor(c.Tensors[1].Key)
	if err != nil {
		return false
	}
	y, err := tn.Float32()
	w := out.Shape[len(out.Shape)-1]
	return err == nil && !normalizedRows(y, w) && !sinusoidal(y, w)
}

// shuffleSiblings reverses each run of consecutive sibling leaf calls whose
// first argument has the same bytes (q, k, v projections of one input).
func shuffleSiblings(tr *trace.Trace, calls []trace.Call) ([]trace.Call, int) {
	hasChild := map[int]bool{}
	for _, c := range calls {
		if c.Parent != nil {
			hasChild[*c.Parent] = true
		}
	}
	arg := func(c trace.Call) string {
		if len(c.Tensors) == 0 || hasChild[c.ID] || c.Parent == nil {
			return ""
		}
		tn, err := tr.Tensor(tr.Tree().Calls()[indexOf(tr, c.ID)].Tensors[0].Key)
		if err != nil {
			return ""
		}
		return fmt.Sprintf("%d/%s", *c.Parent, tn.Bytes())
	}
	out := slices.Clone(calls)
	runs := 0
	for i := 0; i < len(out); {
		a := arg(out[i])
		j := i + 1
		for a != "" && j < len(out) && arg(out[j]) == a {
			j++
		}
		if j-i > 1 {
			slices.Reverse(out[i:j])
			runs++
		}
		i = j
	}
	return out, runs
}

func indexOf(tr *trace.Trace, id int) int {
	for i, c := range tr.Tree().Calls() {
		if c.ID == id {
			return i
		}
	}
	return -1
}

// renameStructure applies a renaming to a structure's names.
func renameStructure(st semantics.Structure, r *renaming) semantics.Structure {
	mod := func(s string) string {
		if s == "" {
			return s
		}
		return r.module[s]
	}
	prm := func(s string) string {
		if s == "" {
			return s
		}
		return r.param[s]
	}
	ports := func(m map[string]string) map[string]string {
		if m == nil {
			return nil
		}
		out := map[string]string{}
		for k, v := range m {
			out[k] = r.port(v)
		}
		return out
	}
	bd := func(b *semantics.Boundary) *semantics.Boundary {
		if b == nil {
			return nil
		}
		return &semantics.Boundary{Module: mod(b.Module), Inputs: ports(b.Inputs), Outputs: ports(b.Outputs)}
	}
	roles := func(rs map[string]semantics.Role) map[string]semantics.Role {
		out := map[string]semantics.Role{}
		for k, v := range rs {
			out[k] = semantics.Role{Module: mod(v.Module), Port: v.Port, Weight: prm(v.Weight), Bias: prm(v.Bias)}
		}
		return out
	}
	out := st
	out.Model = *bd(&st.Model)
	out.Inputs = nil
	for _, in := range st.Inputs {
		in.Name = r.input[in.Name]
		out.Inputs = append(out.Inputs, in)
	}
	out.Outputs = nil
	for _, o := range st.Outputs {
		o.Name = r.output[o.Name]
		out.Outputs = append(out.Outputs, o)
	}
	out.Embedders = nil
	for _, e := range st.Embedders {
		e.Roles = roles(e.Roles)
		out.Embedders = append(out.Embedders, e)
	}
	if c := st.Conditioning; c != nil {
		nc := *c
		nc.Roles, nc.Boundary = roles(c.Roles), bd(c.Boundary)
		out.Conditioning = &nc
	}
	if p := st.Positions; p != nil {
		np := *p
		np.Boundary = bd(p.Boundary)
		out.Positions = &np
	}
	out.Blocks = nil
	for _, b := range st.Blocks {
		b.Roles, b.Boundary = roles(b.Roles), bd(b.Boundary)
		out.Blocks = append(out.Blocks, b)
	}
	out.Final.Roles, out.Final.Boundary = roles(st.Final.Roles), bd(st.Final.Boundary)
	return out
}

// TestDiscoverIgnoresNames: a copy of a trace with every name replaced by
// an opaque one, and the independent q/k/v calls in reverse order, gives
// the same structure modulo the renaming.
func TestDiscoverIgnoresNames(t *testing.T) {
	want := map[string]bool{"dit-bf16": true, "flux-bf16": true, "qwenimage-f32": true, "llama-bf16": true}
	for _, c := range cases(t) {
		if !want[c.name] {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			dst := filepath.Join(t.TempDir(), "renamed.npz")
			r := renameTrace(t, c.trace, dst, true, false)
			orig := discover(t, c.trace)
			got := discover(t, dst)
			diffs := jsonDiff(t, got, renameStructure(orig, r))
			for _, d := range diffs {
				t.Errorf("renamed trace: %s", d)
			}
			if len(diffs) == 0 {
				t.Logf("%d modules, %d parameters, %d port fields renamed: same structure", len(r.module), len(r.param), len(r.field))
			}
		})
	}
}

// TestDiscoverWithoutPointwiseCalls: with every activation and dropout
// call removed from the call tree (as when a model calls F.silu inline),
// the structure is the same: values, not captured modules, decide.
func TestDiscoverWithoutPointwiseCalls(t *testing.T) {
	want := map[string]bool{"dit-bf16": true, "flux-bf16": true, "llama-bf16": true}
	for _, c := range cases(t) {
		if !want[c.name] {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			dst := filepath.Join(t.TempDir(), "inline.npz")
			r := renameTrace(t, c.trace, dst, false, true)
			orig := discover(t, c.trace)
			tr := openTrace(t, dst)
			got, und, err := Discover(tr)
			if err != nil {
				t.Fatal(err)
			}
			for _, u := range und {
				t.Errorf("undetermined %s at %s: %s", u.Name, u.Scope, u.Reason)
			}
			for _, d := range jsonDiff(t, got, renameStructure(orig, r)) {
				t.Errorf("without pointwise calls: %s", d)
			}
			t.Logf("%d calls left of %d", len(tr.Manifest.Calls), len(openTrace(t, c.trace).Manifest.Calls))
		})
	}
}
