package trace

import (
	"bytes"
	"path/filepath"
	"testing"
)

// conformanceDir is where CI lays the shared traces beside the checkout.
const conformanceDir = "../../shared/conformance"

// conformanceTraces lists the shared conformance traces, skipping the test
// when the folder is absent (a user's fresh clone).
func conformanceTraces(t *testing.T) []string {
	t.Helper()
	paths, _ := filepath.Glob(filepath.Join(conformanceDir, "*.npz"))
	if len(paths) == 0 {
		t.Skipf("no conformance traces at %s (only CI and developers have ../shared)", conformanceDir)
	}
	return paths
}

// TestConformanceRoundTrip: every shared trace opens, validates, and
// survives read → write (npz and safetensors) → read with identical bytes
// per tensor and the same manifest.
func TestConformanceRoundTrip(t *testing.T) {
	for _, path := range conformanceTraces(t) {
		t.Run(filepath.Base(path), func(t *testing.T) {
			src, err := Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close()
			if len(src.Manifest.Calls) == 0 || len(src.Manifest.Params) == 0 {
				t.Fatalf("empty manifest: %d calls, %d params", len(src.Manifest.Calls), len(src.Manifest.Params))
			}
			for _, ext := range []string{".npz", ".safetensors"} {
				out := filepath.Join(t.TempDir(), "rt"+ext)
				w, err := Create(out)
				if err != nil {
					t.Fatal(err)
				}
				for _, k := range src.Keys() {
					ten, err := src.Tensor(k)
					if err != nil {
						t.Fatal(err)
					}
					if err := w.Add(k, ten.DType, ten.Shape, ten.Bytes()); err != nil {
						t.Fatal(err)
					}
				}
				m := *src.Manifest
				if err := w.Close(&m); err != nil {
					t.Fatal(err)
				}
				got, err := Open(out)
				if err != nil {
					t.Fatal(err)
				}
				for _, k := range src.Keys() {
					a, _ := src.Tensor(k)
					b, err := got.Tensor(k)
					if err != nil {
						t.Fatal(err)
					}
					if a.DType != b.DType || !bytes.Equal(a.Bytes(), b.Bytes()) {
						t.Fatalf("%s: %s differs after round trip (%v vs %v)", ext, k, a.DType, b.DType)
					}
				}
				if len(got.Manifest.Calls) != len(src.Manifest.Calls) || len(got.Keys()) != len(src.Keys()) {
					t.Errorf("%s: manifest changed: %d/%d calls, %d/%d tensors", ext,
						len(got.Manifest.Calls), len(src.Manifest.Calls), len(got.Keys()), len(src.Keys()))
				}
				got.Close()
			}
		})
	}
}
