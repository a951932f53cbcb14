package main

import (
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zflow/zflow/semantics"
	"github.com/zflow/zflow/trace"
)

// rewriteTrace copies src to dst, edit changing each tensor's bytes.
func rewriteTrace(t *testing.T, src, dst string, edit func(key string, dt trace.DType, data []byte)) {
	t.Helper()
	tr, err := trace.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	w, err := trace.Create(dst)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range tr.Keys() {
		x, err := tr.Tensor(k)
		if err != nil {
			t.Fatal(err)
		}
		data := append([]byte(nil), x.Bytes()...)
		edit(k, x.DType, data)
		if err := w.Add(k, x.DType, x.Shape, data); err != nil {
			t.Fatal(err)
		}
	}
	m := *tr.Manifest
	if err := w.Close(&m); err != nil {
		t.Fatal(err)
	}
}

// scaleF32 multiplies f32 data in place.
func scaleF32(data []byte, s float32) {
	for i := 0; i+4 <= len(data); i += 4 {
		v := math.Float32frombits(binary.LittleEndian.Uint32(data[i:]))
		binary.LittleEndian.PutUint32(data[i:], math.Float32bits(v*s))
	}
}

// TestDiscoverSelfCheck: a reference that does something the vocabulary
// cannot say (here its final latents ×8, which no factor expresses) gets
// an incomplete document naming that boundary first, with its signature and numbers; discover still exits 0 and
// --check still measures; generate refuses the document (exit 2, one
// line) unless --allow-incomplete, which says so. The fixture as captured
// gets a complete one.
func TestDiscoverSelfCheck(t *testing.T) {
	dir := t.TempDir()
	dit := filepath.Join(fixtures, "dit", "dit-f32.npz")
	scaled := filepath.Join(dir, "scaled.npz")
	rewriteTrace(t, dit, scaled, func(key string, dt trace.DType, data []byte) {
		if key == "output/latents" && dt == trace.Float32 {
			scaleF32(data, 8)
		}
	})
	out := filepath.Join(dir, "scaled.json")
	code, stdout, stderr := zflow(t, "discover", "--trace", scaled, "-o", out, "--check")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	last := lines[len(lines)-1]
	if want := "incomplete: "; !strings.HasPrefix(last, want) || !strings.Contains(last, "first output/latents (magnitude)") {
		t.Errorf("status line %q, want incomplete with the scaled boundary first (magnitude)", last)
	}
	if !strings.Contains(stderr, "to rel-RMS ") || !strings.Contains(stderr, "check: the document is incomplete") {
		t.Errorf("--check does not measure or does not say the document is incomplete:\n%s", stderr)
	}
	doc, err := semantics.Read(out)
	if err != nil {
		t.Fatal(err)
	}
	nr := doc.NotReproduced()
	if !doc.Incomplete() || len(nr) == 0 || doc.Check.NotReproduced != len(nr) {
		t.Fatalf("status %q, %d boundary entries, check %+v", doc.Status, len(nr), doc.Check)
	}
	if f := nr[0]; f.Boundary != "output/latents" || f.Signature != "magnitude" || f.Scope != "sampler" ||
		math.Abs(float64(*f.RelRMS)-0.875) > 1e-3 || *f.Cosine < 0.999 || f.Steps != 1 {
		t.Errorf("first entry %+v rel-RMS %v cosine %v", f, *f.RelRMS, *f.Cosine)
	}

	lat := filepath.Join(dir, "latents.npz")
	code, _, stderr = zflowGenerate(t, "--semantics", out, "--inputs", scaled, "-o", lat)
	if code != exitBadInput || strings.Count(strings.TrimSpace(stderr), "\n") != 0 || !strings.Contains(stderr, "incomplete") {
		t.Errorf("generate on an incomplete document: exit %d, %q", code, stderr)
	}
	if _, err := os.Stat(lat); err == nil {
		t.Error("generate wrote its output anyway")
	}
	code, _, stderr = zflowGenerate(t, "--semantics", out, "--inputs", scaled, "-o", lat, "--allow-incomplete")
	if code != 0 || !strings.Contains(stderr, "does not reproduce "+plural(len(nr), "boundary", "boundaries")) {
		t.Errorf("--allow-incomplete: exit %d, %q", code, stderr)
	}

	code, stdout, stderr = zflow(t, "discover", "--trace", dit, "-o", filepath.Join(dir, "dit.json"))
	if code != 0 || !strings.Contains(stdout, "\ncomplete: ") {
		t.Errorf("the fixture as captured: exit %d, stdout:\n%s%s", code, stdout, stderr)
	}
}

// sharedConformance holds the traces of real third-party models. Tests
// over them are named TestShared* and run in `make conformance`
// (ZFLOW_CONFORMANCE=1), not in `make test`.
const sharedConformance = "../../../shared/conformance"

// TestSharedDiscoverSelfCheck: on the shared traces of decoders whose
// embeddings are scaled (by √hidden, or a multiplier: a construct the
// decoder recipe lacks), the recipes' document is incomplete and the
// first boundary it does not reproduce is the embedding (the embedder's
// result, or the first block's input), read as magnitude; the default
// engine (the program search takes over) and a model the recipe covers
// are complete in both precisions.
func TestSharedDiscoverSelfCheck(t *testing.T) {
	if os.Getenv("ZFLOW_CONFORMANCE") == "" {
		t.Skip("a shared-trace test: make conformance runs it (ZFLOW_CONFORMANCE=1 go test -run '^TestShared' ./cmd/zflow/)")
	}
	if _, err := os.Stat(sharedConformance); err != nil {
		t.Skipf("conformance traces not available (%s): %v", sharedConformance, err)
	}
	for _, tc := range []struct {
		model, engine string
		complete      bool
	}{{"gemma2", "recipes", false}, {"granite", "recipes", false}, {"llama", "recipes", true},
		{"gemma2", "auto", true}, {"granite", "auto", true}} {
		for _, p := range []string{"f32", "bf16"} {
			t.Run(tc.model+"-"+tc.engine+"-"+p, func(t *testing.T) {
				out := filepath.Join(t.TempDir(), "doc.json")
				code, _, stderr := zflow(t, "discover", "--trace", filepath.Join(sharedConformance, tc.model+"-"+p+".npz"), "--engine", tc.engine, "-o", out)
				if code != 0 {
					t.Fatalf("exit %d: %s", code, stderr)
				}
				doc, err := semantics.Read(out)
				if err != nil {
					t.Fatal(err)
				}
				if tc.complete {
					if doc.Status != semantics.StatusComplete {
						t.Errorf("%s", doc.StatusLine())
					}
					return
				}
				nr := doc.NotReproduced()
				if !doc.Incomplete() || len(nr) == 0 {
					t.Fatalf("%s", doc.StatusLine())
				}
				st := &doc.Structure
				embedding := map[string]bool{}
				for _, e := range st.Embedders {
					for _, r := range e.Roles {
						embedding[r.Module+"/"+r.OutPort()] = true
					}
				}
				if bd := st.Blocks[0].Boundary; bd != nil {
					for _, port := range bd.Inputs {
						embedding[bd.Module+"/"+port] = true
					}
				}
				if f := nr[0]; !embedding[f.Boundary] || f.Signature != "magnitude" {
					t.Errorf("first not reproduced %s (%s), want the embedding, magnitude: %s", f.Boundary, f.Signature, f.Reason)
				}
			})
		}
	}
}
