package trace

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"regexp"
	"strings"
)

// KeyMap renames a port's keys to the reference's: rules "REGEX =>
// TEMPLATE", one a line, each REGEX a Go regexp over the whole key,
// TEMPLATE expanded with $1, ${name}...; the first rule that matches a key
// renames it, a key no rule matches keeps its name. Blank lines and lines
// starting with # are skipped.
type KeyMap struct {
	File  string
	Rules []KeyRule
}

// KeyRule is one line of a KeyMap.
type KeyRule struct {
	Line     int
	Pattern  string
	Template string
	re       *regexp.Regexp
}

// String is the rule as written, with its place in the file.
func (r KeyRule) String() string {
	return fmt.Sprintf("line %d: %s => %s", r.Line, r.Pattern, r.Template)
}

// ReadKeyMap reads and compiles a map file; a bad line is an *Error naming
// the file and the line.
func ReadKeyMap(path string) (*KeyMap, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, &Error{File: path, Err: fmt.Errorf("%w: %v", ErrNotFound, err)}
	}
	return ParseKeyMap(path, b)
}

// ParseKeyMap compiles the rules of a map file's contents; file names it
// in errors.
func ParseKeyMap(file string, b []byte) (*KeyMap, error) {
	m := &KeyMap{File: file}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		where := fmt.Sprintf("line %d", n)
		pat, tmpl, ok := strings.Cut(line, "=>")
		pat, tmpl = strings.TrimSpace(pat), strings.TrimSpace(tmpl)
		if !ok || pat == "" || tmpl == "" {
			return nil, errf(file, where, ErrFormat, "want REGEX => TEMPLATE, got %q", line)
		}
		re, err := regexp.Compile("^(?:" + pat + ")$")
		if err != nil {
			return nil, errf(file, where, ErrFormat, "bad regexp %q: %v", pat, err)
		}
		m.Rules = append(m.Rules, KeyRule{Line: n, Pattern: pat, Template: tmpl, re: re})
	}
	if err := sc.Err(); err != nil {
		return nil, errf(file, "", ErrFormat, "%v", err)
	}
	if len(m.Rules) == 0 {
		return nil, errf(file, "", ErrFormat, "no rules (want lines REGEX => TEMPLATE)")
	}
	return m, nil
}

// Apply returns key's new name and the index of the rule that gave it
// (-1 and key itself when no rule matches).
func (m *KeyMap) Apply(key string) (string, int) {
	for i, r := range m.Rules {
		if idx := r.re.FindStringSubmatchIndex(key); idx != nil {
			return string(r.re.ExpandString(nil, r.Template, key, idx)), i
		}
	}
	return key, -1
}

// Rename renames the trace's keys by m, the manifest's references
// included, and returns the rules that matched no key. Two keys renamed to
// one, or a key renamed onto one that is kept, is an error and leaves the
// trace as it was.
func (t *Trace) Rename(m *KeyMap) (unused []KeyRule, err error) {
	used := make([]bool, len(m.Rules))
	to := make(map[string]string, len(t.order))
	from := make(map[string]string, len(t.order))
	for _, k := range t.order {
		nk, i := m.Apply(k)
		if i >= 0 {
			used[i] = true
		}
		if nk == "" {
			return nil, errf(m.File, m.Rules[i].String(), ErrFormat, "renames %q to the empty key", k)
		}
		if prev, dup := from[nk]; dup {
			return nil, errf(m.File, "", ErrFormat, "keys %q and %q of %s both become %q", prev, k, t.Path, nk)
		}
		from[nk], to[k] = k, nk
	}
	for i, r := range m.Rules {
		if !used[i] {
			unused = append(unused, r)
		}
	}
	entries := make(map[string]*entry, len(t.entries))
	for i, k := range t.order {
		e := t.entries[k]
		e.Key = to[k]
		entries[e.Key] = e
		t.order[i] = e.Key
	}
	t.entries = entries
	ren := func(k string) string {
		if nk, ok := to[k]; ok {
			return nk
		}
		return k
	}
	mf := t.Manifest
	dt := make(map[string]string, len(mf.DTypes))
	for k, v := range mf.DTypes {
		dt[ren(k)] = v
	}
	mf.DTypes = dt
	for _, sec := range []map[string]string{mf.Params, mf.Inputs, mf.Outputs} {
		for name, k := range sec {
			sec[name] = ren(k)
		}
	}
	for i := range mf.Calls {
		for j := range mf.Calls[i].Tensors {
			p := &mf.Calls[i].Tensors[j]
			p.Key = ren(p.Key)
		}
	}
	t.tree = newTree(mf.Calls)
	return unused, nil
}
