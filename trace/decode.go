package trace

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
)

// parseManifest decodes the manifest as it is read and checks its own
// fields; checks that involve the tensors are in validate. The document
// is never held whole: calls are decoded one at a time and the strings
// they repeat (classes, ports, parameters, modules across steps) are kept
// once, so a trace of 10^6 calls costs its calls, not its JSON. A failure
// of r itself (a corrupt entry) comes back as r's error, not as bad JSON.
func parseManifest(r io.Reader) (*Manifest, error) {
	src := &sourceErr{r: r}
	dups := &dupScanner{}
	dec := json.NewDecoder(io.TeeReader(src, dups))
	m := &Manifest{}
	err := m.decode(dec, newInterner())
	if err == io.EOF {
		err = io.ErrUnexpectedEOF // the document stops inside its value
	}
	if err == nil {
		if _, end := dec.Token(); end != io.EOF {
			err = fmt.Errorf("manifest has data after its JSON value (at byte %d)", dec.InputOffset())
		}
	} else {
		err = fmt.Errorf("manifest is not valid JSON: %v", err)
	}
	if src.err == nil && err != nil {
		io.Copy(io.Discard, src) // a corrupt stream says so before its JSON does
	}
	switch {
	case src.err != nil:
		return nil, src.err
	case err != nil:
		return nil, err
	case dups.err != nil:
		return nil, fmt.Errorf("manifest: %v", dups.err)
	}
	if m.Format != FormatName {
		return nil, fmt.Errorf("manifest format is %q, want %q", m.Format, FormatName)
	}
	if m.Version != Version {
		return nil, fmt.Errorf("manifest version %d is not supported (this zflow reads version %d)", m.Version, Version)
	}
	m.onePass()
	return m, nil
}

// sourceErr keeps the first error of its reader other than io.EOF.
type sourceErr struct {
	r   io.Reader
	err error
}

func (s *sourceErr) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if err != nil && err != io.EOF && s.err == nil {
		s.err = err
	}
	return n, err
}

// decode reads the manifest object field by field, as encoding/json would
// (names matched without regard to case, unknown fields skipped), except
// that calls are decoded one by one.
func (m *Manifest) decode(dec *json.Decoder, in *interner) error {
	tok, err := dec.Token()
	if err != nil || tok == nil { // null: an empty manifest, refused by its format
		return err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return fmt.Errorf("the manifest is a %s, not an object", jsonKind(tok))
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		name := tok.(string)
		var dst any = new(json.RawMessage) // an unknown field: skipped
		if strings.EqualFold(name, "calls") {
			dst, err = nil, decodeCalls(dec, &m.Calls, in)
		}
		for _, f := range []struct {
			name string
			dst  any
		}{{"format", &m.Format}, {"version", &m.Version}, {"producer", &m.Producer}, {"dtypes", &m.DTypes},
			{"params", &m.Params}, {"inputs", &m.Inputs}, {"outputs", &m.Outputs}} {
			if strings.EqualFold(name, f.name) {
				dst = f.dst
			}
		}
		if dst != nil {
			err = dec.Decode(dst)
		}
		if err != nil {
			return fmt.Errorf("field %q: %w", name, err)
		}
	}
	_, err = dec.Token() // the closing brace
	return err
}

// decodeCalls reads the calls array one call at a time.
func decodeCalls(dec *json.Decoder, calls *[]Call, in *interner) error {
	tok, err := dec.Token()
	if err != nil || tok == nil {
		return err
	}
	if d, ok := tok.(json.Delim); !ok || d != '[' {
		return fmt.Errorf("expected an array of calls, got a %s", jsonKind(tok))
	}
	for i := 0; dec.More(); i++ {
		var c Call
		if err := dec.Decode(&c); err != nil {
			return fmt.Errorf("call %d: %w", i, err)
		}
		in.call(&c)
		*calls = append(*calls, c)
	}
	*calls = slices.Clip(*calls)
	_, err = dec.Token() // the closing bracket
	return err
}

// jsonKind names a JSON token's kind for an error message.
func jsonKind(tok json.Token) string {
	switch t := tok.(type) {
	case json.Delim:
		if t == '[' {
			return "array"
		}
		return "object"
	case string:
		return "string"
	case float64, json.Number:
		return "number"
	case bool:
		return "boolean"
	}
	return "null"
}

// interner keeps one copy of each string and integer the calls repeat.
type interner struct {
	strs map[string]string
	ints map[int]*int
}

func newInterner() *interner {
	return &interner{strs: map[string]string{}, ints: map[int]*int{}}
}

func (in *interner) str(s string) string {
	if v, ok := in.strs[s]; ok {
		return v
	}
	in.strs[s] = s
	return s
}

func (in *interner) int(p *int) *int {
	if p == nil {
		return nil
	}
	if v, ok := in.ints[*p]; ok {
		return v
	}
	in.ints[*p] = p
	return p
}

// call shares the strings and integers of c with earlier calls. Tensor
// keys are left alone: each names its own tensor.
func (in *interner) call(c *Call) {
	c.Step, c.Parent = in.int(c.Step), in.int(c.Parent)
	c.Module, c.Type = in.str(c.Module), in.str(c.Type)
	for i, p := range c.Params {
		c.Params[i] = in.str(p)
	}
	for i := range c.Tensors {
		c.Tensors[i].Name = in.str(c.Tensors[i].Name)
	}
}

// dupScanner refuses a JSON document in which an object names a key twice
// (encoding/json would keep the last silently). It is written the bytes
// the decoder reads, in any pieces, and scans them once; each open
// object's keys are in a short list (a map past 16 keys). Its verdict
// counts only for a document the decoder accepted.
type dupScanner struct {
	stack     []*keySet
	inObject  []bool // per open container: an object, not an array
	expectKey bool
	inString  bool
	escape    bool   // the previous byte in a string was a backslash
	isKey     bool   // the string being read is a key
	escaped   bool   // ... and holds an escape
	key       []byte // ... its bytes so far
	keyAt     int64  // ... the byte its quote is at
	at        int64  // bytes seen
	err       error

	// Reused across objects: a manifest's 10^6 calls repeat a few names.
	free  []*keySet
	names map[string]string
}

// newSet gives an empty key set, one a closed object left where there is.
func (s *dupScanner) newSet() *keySet {
	if n := len(s.free); n > 0 {
		o := s.free[n-1]
		s.free = s.free[:n-1]
		return o
	}
	return &keySet{}
}

// maxNames bounds the key names kept for reuse (a hostile document's
// keys may all differ).
const maxNames = 1 << 12

type keySet struct {
	keys []string
	set  map[string]bool
}

// add reports whether key was already in the object.
func (o *keySet) add(key string) bool {
	if o.set != nil {
		dup := o.set[key]
		o.set[key] = true
		return dup
	}
	dup := slices.Contains(o.keys, key)
	o.keys = append(o.keys, key)
	if len(o.keys) > 16 {
		o.set = map[string]bool{}
		for _, k := range o.keys {
			o.set[k] = true
		}
	}
	return dup
}

func (s *dupScanner) Write(b []byte) (int, error) {
	for _, c := range b {
		s.at++
		if s.err != nil {
			continue
		}
		if s.inString {
			s.stringByte(c)
			continue
		}
		switch c {
		case '{':
			s.stack = append(s.stack, s.newSet())
			s.inObject = append(s.inObject, true)
			s.expectKey = true
		case '[':
			s.inObject = append(s.inObject, false)
			s.expectKey = false
		case '}', ']':
			if c == '}' && len(s.stack) > 0 {
				o := s.stack[len(s.stack)-1]
				s.stack = s.stack[:len(s.stack)-1]
				o.keys, o.set = o.keys[:0], nil
				s.free = append(s.free, o)
			}
			if len(s.inObject) > 0 {
				s.inObject = s.inObject[:len(s.inObject)-1]
			}
			s.expectKey = false
		case ',':
			s.expectKey = len(s.inObject) > 0 && s.inObject[len(s.inObject)-1]
		case '"':
			s.inString, s.isKey, s.escaped = true, s.expectKey, false
			s.key, s.keyAt = s.key[:0], s.at-1
			s.expectKey = false
		}
	}
	return len(b), nil
}

// stringByte takes one byte inside a string.
func (s *dupScanner) stringByte(c byte) {
	switch {
	case s.escape:
		s.escape = false
	case c == '\\':
		s.escape, s.escaped = true, true
	case c == '"':
		s.inString = false
		if s.isKey {
			s.endKey()
		}
		return
	}
	if s.isKey {
		s.key = append(s.key, c)
	}
}

func (s *dupScanner) endKey() {
	key, ok := s.names[string(s.key)]
	if !ok {
		key = string(s.key)
		if s.names == nil {
			s.names = map[string]string{}
		}
		if len(s.names) < maxNames {
			s.names[key] = key
		}
	}
	if s.escaped {
		if err := json.Unmarshal([]byte(`"`+key+`"`), &key); err != nil {
			s.err = err
			return
		}
	}
	if len(s.stack) == 0 {
		s.err = errors.New("a key outside any object")
		return
	}
	if s.stack[len(s.stack)-1].add(key) {
		s.err = fmt.Errorf("key %q appears twice in one object (at byte %d)", key, s.keyAt)
	}
}

// noDuplicateKeys scans a whole document for a repeated key.
func noDuplicateKeys(b []byte) error {
	s := &dupScanner{}
	s.Write(b)
	return s.err
}
