package reports

import (
	"path"
	"strconv"
	"strings"

	"github.com/zflow/zflow/trace"
)

// bareBoundaries lists the boundaries of a trace read without a manifest
// (trace.OpenPort): every key, in file order, its scope, module and port
// read from the key's spelling (docs/trace-format.md, "Keys"). Pairing
// puts them in the reference's execution order.
func bareBoundaries(tr *trace.Trace, sel Selection) []Boundary {
	var out []Boundary
	for _, k := range tr.Keys() {
		b := Boundary{Key: k, Port: k}
		scope, rest, ok := strings.Cut(k, "/")
		if i := strings.LastIndexByte(rest, '/'); ok && i >= 0 {
			mod := rest[:i]
			b.Scope, b.Port = scope, rest[i+1:]
			if m, ord, found := strings.Cut(mod, "#"); found {
				mod = m
				b.Ordinal, _ = strconv.Atoi(ord)
			}
			b.Module = mod
			if s, err := strconv.Atoi(strings.TrimPrefix(scope, "s")); err == nil && strings.HasPrefix(scope, "s") {
				b.Step = &s
			}
		} else if ok {
			b.Scope, b.Port = scope, rest // input/x, output/y, param/w
		}
		if sel.Port != "" {
			if m, _ := path.Match(sel.Port, b.Port); !m {
				continue
			}
		}
		if sel.Module != "" {
			if m, _ := path.Match(sel.Module, b.Module); !m || b.Module == "" {
				continue
			}
		}
		if sel.Step != nil && (b.Step == nil || *b.Step != *sel.Step) {
			continue
		}
		out = append(out, b)
	}
	return out
}
