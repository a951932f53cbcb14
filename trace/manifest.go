package trace

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
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
func (ps *Ports) UnmarshalJSON(b []byte) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if tok == nil { // null
		*ps = nil
		return nil
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return fmt.Errorf("tensors: expected an object")
	}
	var out Ports
	for dec.More() {
		kt, err := dec.Token()
		if err != nil {
			return err
		}
		var key string
		if err := dec.Decode(&key); err != nil {
			return fmt.Errorf("tensors[%v]: %w", kt, err)
		}
		out = append(out, Port{Name: kt.(string), Key: key})
	}
	*ps = out
	return nil
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

// parseManifest decodes and checks the manifest's own fields; checks that
// involve the tensors are in validate.
func parseManifest(b []byte) (*Manifest, error) {
	var m Manifest
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("manifest is not valid JSON: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("manifest has data after its JSON value (at byte %d)", dec.InputOffset())
	}
	if err := noDuplicateKeys(b); err != nil {
		return nil, fmt.Errorf("manifest: %v", err)
	}
	if m.Format != FormatName {
		return nil, fmt.Errorf("manifest format is %q, want %q", m.Format, FormatName)
	}
	if m.Version != Version {
		return nil, fmt.Errorf("manifest version %d is not supported (this zflow reads version %d)", m.Version, Version)
	}
	m.onePass()
	return &m, nil
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

// noDuplicateKeys refuses a JSON document in which an object names a key
// twice (encoding/json would keep the last silently). b must be valid
// JSON (it is scanned after a successful Decode): a single pass over the
// bytes, each object's keys in a short list (a map past 16 keys).
func noDuplicateKeys(b []byte) error {
	type object struct {
		keys []string
		set  map[string]bool
	}
	var stack []*object
	var inObject []bool // per open container: an object, not an array
	expectKey := false
	for i := 0; i < len(b); i++ {
		switch c := b[i]; c {
		case '{':
			stack = append(stack, &object{})
			inObject = append(inObject, true)
			expectKey = true
		case '[':
			inObject = append(inObject, false)
			expectKey = false
		case '}', ']':
			if c == '}' {
				stack = stack[:len(stack)-1]
			}
			inObject = inObject[:len(inObject)-1]
			expectKey = false
		case ',':
			expectKey = len(inObject) > 0 && inObject[len(inObject)-1]
		case '"':
			start := i
			escaped := false
			for i++; i < len(b) && b[i] != '"'; i++ {
				if b[i] == '\\' {
					escaped = true
					i++
				}
			}
			if !expectKey {
				continue
			}
			expectKey = false
			key := string(b[start+1 : i])
			if escaped {
				var k string
				if err := json.Unmarshal(b[start:i+1], &k); err != nil {
					return err
				}
				key = k
			}
			o := stack[len(stack)-1]
			dup := false
			if o.set != nil {
				dup = o.set[key]
				o.set[key] = true
			} else {
				dup = slices.Contains(o.keys, key)
				o.keys = append(o.keys, key)
				if len(o.keys) > 16 {
					o.set = map[string]bool{}
					for _, k := range o.keys {
						o.set[k] = true
					}
				}
			}
			if dup {
				return fmt.Errorf("key %q appears twice in one object (at byte %d)", key, start)
			}
		}
	}
	return nil
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
	index := make(map[int]int, len(m.Calls))
	for i, c := range m.Calls {
		if _, dup := index[c.ID]; dup {
			return fmt.Errorf("call id %d appears twice", c.ID)
		}
		index[c.ID] = i
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
			j, ok := index[*c.Parent]
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
func checkParent(calls []Call, index map[int]int, i int) error {
	c := calls[i]
	seen := map[int]bool{c.ID: true}
	for cur := c; cur.Parent != nil; {
		j, ok := index[*cur.Parent]
		if !ok {
			return fmt.Errorf("call %d: parent %d does not exist", cur.ID, *cur.Parent)
		}
		if seen[*cur.Parent] {
			return fmt.Errorf("call %d: cycle in parent chain through call %d", c.ID, *cur.Parent)
		}
		seen[*cur.Parent] = true
		cur = calls[j]
	}
	if index[*c.Parent] >= i {
		return fmt.Errorf("call %d: parent %d is listed after it (calls must be in entry order)", c.ID, *c.Parent)
	}
	return nil
}

// sortedKeys lists a map's keys in order, for deterministic output.
func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }
