package semantics

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzParse: semantics.Read's parser on any bytes, seeded with the
// documents of testdata: no panic, and a document it accepts writes and
// reads back.
func FuzzParse(f *testing.F) {
	docs, _ := filepath.Glob(filepath.Join("testdata", "*.json"))
	v2, _ := filepath.Glob(filepath.Join("testdata", "program", "*.json"))
	docs = append(docs, v2...)
	for _, p := range docs {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte(`{"format":"zflow-semantics","version":2}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := Parse(b)
		if err != nil {
			return
		}
		p := filepath.Join(t.TempDir(), "d.json")
		if err := d.Write(p); err != nil {
			return // a document Parse accepts may still fail Write's own checks
		}
		if _, err := Read(p); err != nil {
			t.Fatalf("a document written does not read back: %v", err)
		}
	})
}
