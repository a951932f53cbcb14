package trace

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Manifest format name and the version this package reads and writes.
const (
	FormatName = "zflow-trace"
	Version    = 1
)

// Manifest is the JSON document a trace carries (DESIGN.md, trace format v1).
type Manifest struct {
	Format   string            `json:"format"`
	Version  int               `json:"version"`
	Producer map[string]any    `json:"producer"`
	DTypes   map[string]string `json:"dtypes"`
	Params   map[string]string `json:"params"`
	Inputs   map[string]string `json:"inputs"`
	Outputs  map[string]string `json:"outputs"`
	Calls    []Call            `json:"calls"`
}

// Call is one module invocation of the captured run.
type Call struct {
	ID      int            `json:"id"`
	Step    *int           `json:"step"`
	Module  string         `json:"module"`
	Ordinal int            `json:"ordinal"`
	Parent  *int           `json:"parent"`
	Type    string         `json:"type"` // class name: display only
	Params  []string       `json:"params"`
	Tensors Ports          `json:"tensors"`
	Scalars map[string]any `json:"scalars"`
}

// Port names one tensor argument or result of a call.
type Port struct {
	Name string // arg0, kw.hidden_states, out.0, ...
	Key  string // the tensor's key in the trace
}

// Ports keeps a call's tensors in the order the manifest lists them
// (arguments before results), which a JSON object decoded into a map loses.
type Ports []Port

// IsResult reports whether a port is one of a call's results ("out",
// "out.0", "out.sample") rather than an argument.
func IsResult(port string) bool { return port == "out" || strings.HasPrefix(port, "out.") }

// Key returns the key of the named port.
func (ps Ports) Key(name string) (string, bool) {
	for _, p := range ps {
		if p.Name == name {
			return p.Key, true
		}
	}
	return "", false
}

// UnmarshalJSON decodes a JSON object of port → key, keeping its order.
// b is one valid JSON value (the decoder checked it), so a scan of its
// tokens suffices; no decoder is made per call.
func (ps *Ports) UnmarshalJSON(b []byte) error {
	sc := jsonScan{b: b}
	sc.space()
	if bytes.HasPrefix(sc.b[sc.i:], []byte("null")) {
		*ps = nil
		return nil
	}
	if !sc.take('{') {
		return fmt.Errorf("tensors: expected an object")
	}
	var out Ports
	for !sc.take('}') {
		if len(out) > 0 && !sc.take(',') {
			return fmt.Errorf("tensors: expected a comma")
		}
		name, ok := sc.str()
		if !ok || !sc.take(':') {
			return fmt.Errorf("tensors: expected a port name")
		}
		key, ok := sc.str()
		if !ok {
			return fmt.Errorf("tensors[%q]: the key is not a string", name)
		}
		out = append(out, Port{Name: name, Key: key})
	}
	*ps = slices.Clip(out)
	return nil
}

// jsonScan reads the tokens of a valid JSON value.
type jsonScan struct {
	b []byte
	i int
}

func (s *jsonScan) space() {
	for s.i < len(s.b) && (s.b[s.i] == ' ' || s.b[s.i] == '\t' || s.b[s.i] == '\n' || s.b[s.i] == '\r') {
		s.i++
	}
}

// take consumes c (after white space) if it comes next.
func (s *jsonScan) take(c byte) bool {
	s.space()
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

// str reads a string token, unquoting it where it holds an escape.
func (s *jsonScan) str() (string, bool) {
	s.space()
	if s.i >= len(s.b) || s.b[s.i] != '"' {
		return "", false
	}
	start, escaped := s.i, false
	for s.i++; s.i < len(s.b) && s.b[s.i] != '"'; s.i++ {
		if s.b[s.i] == '\\' {
			escaped = true
			s.i++
		}
	}
	if s.i >= len(s.b) {
		return "", false
	}
	s.i++
	if !escaped {
		return string(s.b[start+1 : s.i-1]), true
	}
	var v string
	if err := json.Unmarshal(s.b[start:s.i], &v); err != nil {
		return "", false
	}
	return v, true
}

// MarshalJSON encodes the ports as a JSON object in their order.
func (ps Ports) MarshalJSON() ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteByte('{')
	for i, p := range ps {
		if i > 0 {
			buf.WriteByte(',')
		}
		k, _ := json.Marshal(p.Name)
		v, _ := json.Marshal(p.Key)
		buf.Write(k)
		buf.WriteByte(':')
		buf.Write(v)
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

// onePass reads a trace recorded without a sampler loop (no call has a
// step: a language model's one forward) as one pass, step 0, so that every
// reader sees the model's call in the step it looks at first.
func (m *Manifest) onePass() {
	for _, c := range m.Calls {
		if c.Step != nil {
			return
		}
	}
	for i := range m.Calls {
		m.Calls[i].Step = new(int)
	}
}

// validate checks the manifest against the tensors the file holds: every
// key it names exists, dtypes agree, ids are unique, parents exist and come
// before their children (so there is no cycle).
func (m *Manifest) validate(has func(key string) bool) error {
	for _, sec := range []struct {
		name string
		m    map[string]string
	}{{"params", m.Params}, {"inputs", m.Inputs}, {"outputs", m.Outputs}} {
		for _, name := range sortedKeys(sec.m) {
			if k := sec.m[name]; !has(k) {
				return fmt.Errorf("%s[%q] names missing tensor %q", sec.name, name, k)
			}
		}
	}
	for _, k := range sortedKeys(m.DTypes) {
		if !has(k) {
			return fmt.Errorf("dtypes names missing tensor %q", k)
		}
		if _, err := ParseDType(m.DTypes[k]); err != nil {
			return fmt.Errorf("dtypes[%q]: %v", k, err)
		}
	}
	index := newIDIndex(m.Calls)
	if index.dupe {
		return fmt.Errorf("call id %d appears twice", index.dup)
	}
	for i, c := range m.Calls {
		if c.Step != nil && *c.Step < 0 {
			return fmt.Errorf("call %d: negative step %d", c.ID, *c.Step)
		}
		if c.Parent != nil {
			// Every earlier call's parent comes before it, so a parent
			// before call i ends a chain that strictly descends to a root:
			// no walk is needed (linear in the calls). Only a violation
			// walks, once, to name a cycle or a missing id.
			j, ok := index.find(*c.Parent)
			if !ok {
				return fmt.Errorf("call %d: parent %d does not exist", c.ID, *c.Parent)
			}
			if j >= i {
				return checkParent(m.Calls, index, i)
			}
		}
		for _, p := range c.Params {
			if _, ok := m.Params[p]; !ok {
				return fmt.Errorf("call %d (%s): parameter %q is not in params", c.ID, c.Module, p)
			}
		}
		for _, p := range c.Tensors {
			if !has(p.Key) {
				return fmt.Errorf("call %d (%s): port %s names missing tensor %q", c.ID, c.Module, p.Name, p.Key)
			}
		}
	}
	return nil
}

// checkParent follows call i's parent chain, naming a cycle or a missing id
// before the weaker "parent after child" error. validate calls it only on
// the error path, at most once.
func checkParent(calls []Call, index idIndex, i int) error {
	c := calls[i]
	seen := map[int]bool{c.ID: true}
	for cur := c; cur.Parent != nil; {
		j, ok := index.find(*cur.Parent)
		if !ok {
			return fmt.Errorf("call %d: parent %d does not exist", cur.ID, *cur.Parent)
		}
		if seen[*cur.Parent] {
			return fmt.Errorf("call %d: cycle in parent chain through call %d", c.ID, *cur.Parent)
		}
		seen[*cur.Parent] = true
		cur = calls[j]
	}
	if j, _ := index.find(*c.Parent); j >= i {
		return fmt.Errorf("call %d: parent %d is listed after it (calls must be in entry order)", c.ID, *c.Parent)
	}
	return nil
}

// sortedKeys lists a map's keys in order, for deterministic output.
func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }
