package synth

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/zflow/zflow/trace"
)

// renamed writes a copy of the trace at src in which every module path,
// class name, parameter name, keyword port name, result field and request
// input or output name is opaque ("m3", "T", "p12", "kw.k4", "out.r1",
// "i0"); positional ports and the "out" of a result stay, as the format
// defines them.
func renamed(t *testing.T, src, dst string) {
	t.Helper()
	tr, err := trace.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	b, _ := json.Marshal(tr.Manifest)
	var m trace.Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	names := map[string]string{}
	opaque := func(prefix, name string) string {
		k := prefix + "\x00" + name
		if n, ok := names[k]; ok {
			return n
		}
		n := fmt.Sprintf("%s%d", prefix, len(names))
		names[k] = n
		return n
	}
	port := func(p string) string {
		switch {
		case strings.HasPrefix(p, "kw."):
			head, rest, _ := strings.Cut(p[3:], ".")
			if rest != "" {
				return "kw." + opaque("k", head) + "." + rest
			}
			return "kw." + opaque("k", head)
		case strings.HasPrefix(p, "out."):
			head, rest, _ := strings.Cut(p[4:], ".")
			if _, err := fmt.Sscanf(head, "%d", new(int)); err != nil {
				head = opaque("r", head)
			}
			if rest != "" {
				return "out." + head + "." + rest
			}
			return "out." + head
		}
		return p
	}
	rekey := map[string]string{}
	for i, c := range m.Calls {
		mod := opaque("m", c.Module)
		m.Calls[i].Module, m.Calls[i].Type = mod, "T"
		for j, p := range c.Tensors {
			scope, rest, _ := strings.Cut(p.Key, "/")
			modPart := rest[:strings.LastIndexByte(rest, '/')]
			ord := ""
			if h := strings.LastIndexByte(modPart, '#'); h >= 0 {
				ord = modPart[h:]
			}
			np := port(p.Name)
			nk := scope + "/" + mod + ord + "/" + np
			rekey[p.Key] = nk
			m.Calls[i].Tensors[j] = trace.Port{Name: np, Key: nk}
		}
		for j, p := range c.Params {
			m.Calls[i].Params[j] = opaque("p", p)
		}
		scalars := map[string]any{}
		for k, v := range c.Scalars {
			scalars[port(k)] = v
		}
		m.Calls[i].Scalars = scalars
	}
	params := map[string]string{}
	for name, key := range m.Params {
		nn := opaque("p", name)
		rekey[key] = "param/" + nn
		params[nn] = "param/" + nn
	}
	m.Params = params
	for _, sec := range []*map[string]string{&m.Inputs, &m.Outputs} {
		out := map[string]string{}
		for name, key := range *sec {
			nn := opaque("i", name)
			prefix, _, _ := strings.Cut(key, "/")
			rekey[key] = prefix + "/" + nn
			out[nn] = prefix + "/" + nn
		}
		*sec = out
	}
	dtypes := map[string]string{}
	for k, v := range m.DTypes {
		if nk, ok := rekey[k]; ok {
			dtypes[nk] = v
		}
	}
	m.DTypes = dtypes
	w, err := trace.Create(dst)
	if err != nil {
		t.Fatal(err)
	}
	keys := tr.Keys()
	sort.Strings(keys)
	for _, k := range keys {
		nk, ok := rekey[k]
		if !ok {
			continue
		}
		x, err := tr.Tensor(k)
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Add(nk, x.DType, x.Shape, x.Bytes()); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(&m); err != nil {
		t.Fatal(err)
	}
}

// TestSharedRenamedTraces: with every name opaque the program search finds the
// same program and the same factor values (names only address things).
func TestSharedRenamedTraces(t *testing.T) {
	models := []string{"auraflow", "bloom", "cogview4", "flux", "gemma2", "gpt2", "granite", "hunyuanvideo", "llama", "mistral", "pixart", "qwenimage", "wan"}
	if testing.Short() {
		models = []string{"gpt2", "pixart"}
	}
	for _, m := range models {
		name := m + "-f32.npz"
		t.Run(name, func(t *testing.T) {
			tr, path := conformance(t, name)
			dst := filepath.Join(t.TempDir(), name)
			renamed(t, path, dst)
			rt, err := trace.Open(dst)
			if err != nil {
				t.Fatal(err)
			}
			defer rt.Close()
			a, err := Discover(context.Background(), tr, path, Options{})
			if err != nil {
				t.Fatal(err)
			}
			b, err := Discover(context.Background(), rt, dst, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if !a.Complete() || !b.Complete() {
				t.Fatalf("complete: %v, renamed %v (taken from the trace: %v)", a.Complete(), b.Complete(), b.Opaque)
			}
			if len(a.Doc.Program.Nodes) != len(b.Doc.Program.Nodes) {
				t.Errorf("%d nodes, renamed %d", len(a.Doc.Program.Nodes), len(b.Doc.Program.Nodes))
			}
			values := func(r *Result) []string {
				var out []string
				for _, f := range r.Doc.Factors {
					out = append(out, fmt.Sprintf("%s=%v", f.Name, f.Value))
				}
				slices.Sort(out)
				return out
			}
			if va, vb := values(a), values(b); !slices.Equal(va, vb) {
				t.Errorf("factors differ:\n%v\n%v", va, vb)
			}
			// the same program runs the same: names change nothing (how close
			// it comes is TestSharedDiscoverLanguageModels' and the conformance table's)
			if ra, rb := generate(t, a.Doc, tr), generate(t, b.Doc, rt); rb != ra {
				t.Errorf("generated output rel-RMS %.3g, renamed %.3g", ra, rb)
			}
		})
	}
}
