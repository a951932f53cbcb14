package trace

import (
	"archive/zip"
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"
)

// zipEntry is one raw entry for hand-made (often broken) archives.
type zipEntry struct {
	name    string
	data    []byte
	deflate bool
}

// writeZip writes entries as a zip archive and returns its path.
func writeZip(t testing.TB, dir string, entries []zipEntry) string {
	t.Helper()
	path := filepath.Join(dir, "hand.npz")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	zw := zip.NewWriter(f)
	for _, e := range entries {
		method := zip.Store
		if e.deflate {
			method = zip.Deflate
		}
		w, err := zw.CreateHeader(&zip.FileHeader{Name: e.name, Method: method})
		if err != nil {
			t.Fatal(err)
		}
		w.Write(e.data)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	return path
}

// npyEntry encodes an .npy entry with the given descr and shape around data.
func npyEntry(name, descr string, shape []int, data []byte) zipEntry {
	return zipEntry{name: name + ".npy", data: append(encodeNpyHeader(descr, shape), data...)}
}

// manifestEntry encodes m as the manifest entry.
func manifestEntry(t testing.TB, m any) zipEntry {
	t.Helper()
	doc, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return npyEntry(ManifestKey, "|u1", []int{len(doc)}, doc)
}

func f32Bytes(v ...float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

func intp(i int) *int { return &i }

// smallManifest is a valid manifest over tensors "param/w" and "s0/m/out".
func smallManifest() *Manifest {
	return &Manifest{
		Format: FormatName, Version: Version,
		Producer: map[string]any{"framework": "test"},
		Params:   map[string]string{"m.w": "param/w"},
		Inputs:   map[string]string{},
		Outputs:  map[string]string{},
		Calls: []Call{
			{ID: 0, Step: intp(0), Module: "m", Params: []string{"m.w"}, Tensors: Ports{{"out", "s0/m/out"}}},
		},
	}
}
