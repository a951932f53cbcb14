package semantics

import (
	"fmt"
	"strconv"
	"strings"
)

// Addresses name the parts of a structure that factors cover:
//
//	model                       the whole model
//	sampler                     the Euler loop (run flow_euler)
//	positions                   the position ids and RoPE tables
//	conditioning[.<role>]       the conditioning vector and its roles
//	embed.<stream>[.<role>]     a stream's embedder and its roles
//	blocks.<i>[.<role>]         block i (from 0) and its roles ("blocks.0.image.q")
//	final[.<role>]              the final stage and its roles
//
// A factor's scope is a glob over addresses: "*" matches any run of
// characters, dots included ("blocks.*.q_norm", "*"); anything else is
// literal.

// Addresses lists every address of s, in structure order.
func (s *Structure) Addresses() []string {
	out := []string{"model"}
	if s.Run == "flow_euler" {
		out = append(out, "sampler")
	}
	if s.Positions != nil {
		out = append(out, "positions")
	}
	if s.Conditioning != nil {
		out = append(out, "conditioning")
		for _, r := range sortedKeys(s.Conditioning.Roles) {
			out = append(out, "conditioning."+r)
		}
	}
	for _, e := range s.Embedders {
		out = append(out, EmbedAddress(e.Stream))
		for _, r := range sortedKeys(e.Roles) {
			out = append(out, "embed."+e.Stream+"."+r)
		}
	}
	for i, b := range s.Blocks {
		a := BlockAddress(i)
		out = append(out, a)
		for _, r := range sortedKeys(b.Roles) {
			out = append(out, a+"."+r)
		}
	}
	out = append(out, "final")
	for _, r := range sortedKeys(s.Final.Roles) {
		out = append(out, "final."+r)
	}
	return out
}

// Addresses lists the document's addresses: the structure's (version 1),
// or model, sampler and every segment of the program (version 2).
func (d *Document) Addresses() []string {
	if d.Program == nil {
		return d.Structure.Addresses()
	}
	out := []string{"model"}
	if d.Structure.Run == "flow_euler" {
		out = append(out, "sampler")
	}
	seen := map[string]bool{"model": true, "sampler": true}
	for _, s := range d.Program.Segments {
		if !seen[s.Address] {
			seen[s.Address] = true
			out = append(out, s.Address)
		}
	}
	return out
}

// BlockAddress is the address of block i.
func BlockAddress(i int) string { return "blocks." + strconv.Itoa(i) }

// EmbedAddress is the address of a stream's embedder.
func EmbedAddress(stream string) string { return "embed." + stream }

// MatchScope reports whether address a matches the scope glob.
func MatchScope(scope, a string) bool {
	// scanned part by part without splitting: the rounding-plan search
	// asks once per node per candidate plan
	first, rest, found := strings.Cut(scope, "*")
	if !found {
		return scope == a
	}
	if !strings.HasPrefix(a, first) {
		return false
	}
	a = a[len(first):]
	for {
		p, more, ok := strings.Cut(rest, "*")
		if !ok {
			return strings.HasSuffix(a, rest) // the last part
		}
		i := strings.Index(a, p)
		if i < 0 {
			return false
		}
		a, rest = a[i+len(p):], more
	}
}

// Lookup returns the factor named name whose scope covers address a (at
// most one does: Validate refuses overlapping scopes).
func (d *Document) Lookup(name, a string) (*Factor, error) {
	for i := range d.Factors {
		f := &d.Factors[i]
		if f.Name == name && MatchScope(f.Scope, a) {
			return f, nil
		}
	}
	return nil, fmt.Errorf("semantics: no factor %q covers %s", name, a)
}

// Has reports whether a factor named name covers address a.
func (d *Document) Has(name, a string) bool {
	_, err := d.Lookup(name, a)
	return err == nil
}

// String returns an enum factor's value at a.
func (d *Document) String(name, a string) (string, error) {
	f, err := d.Lookup(name, a)
	if err != nil {
		return "", err
	}
	s, ok := f.Value.(string)
	if !ok {
		return "", fmt.Errorf("semantics: factor %q at %s: value %v is not a string", name, a, jsonish(f.Value))
	}
	return s, nil
}

// Bool returns a boolean factor's value at a.
func (d *Document) Bool(name, a string) (bool, error) {
	f, err := d.Lookup(name, a)
	if err != nil {
		return false, err
	}
	b, ok := f.Value.(bool)
	if !ok {
		return false, fmt.Errorf("semantics: factor %q at %s: value %v is not a boolean", name, a, jsonish(f.Value))
	}
	return b, nil
}

// Number returns a numeric factor's value at a.
func (d *Document) Number(name, a string) (float64, error) {
	f, err := d.Lookup(name, a)
	if err != nil {
		return 0, err
	}
	n, ok := number(f.Value)
	if !ok {
		return 0, fmt.Errorf("semantics: factor %q at %s: value %v is not a number", name, a, jsonish(f.Value))
	}
	return n, nil
}

// IntList returns a list factor's value at a.
func (d *Document) IntList(name, a string) ([]int, error) {
	f, err := d.Lookup(name, a)
	if err != nil {
		return nil, err
	}
	v, err := Ints(f.Value)
	if err != nil {
		return nil, fmt.Errorf("semantics: factor %q at %s: %v", name, a, err)
	}
	return v, nil
}

// OrderAt returns an order factor's chunk names at a.
func (d *Document) OrderAt(name, a string) ([]string, error) {
	spec, ok := LookupSpec(name)
	if !ok || spec.typ != typeOrder {
		return nil, fmt.Errorf("semantics: %q is not an order factor", name)
	}
	s, err := d.String(name, a)
	if err != nil {
		return nil, err
	}
	o, err := Order(s, spec.chunks)
	if err != nil {
		return nil, fmt.Errorf("semantics: factor %q at %s: %v", name, a, err)
	}
	return o, nil
}
