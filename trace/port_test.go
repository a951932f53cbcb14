package trace

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A trace without a manifest is refused by Open with a pointer to the
// format's documentation, in both containers.
func TestMissingManifestNamesFormatDoc(t *testing.T) {
	dir := t.TempDir()
	npz := writeZip(t, dir, []zipEntry{npyEntry("s0/m/out", "<f4", []int{2}, f32Bytes(1, 2))})
	st := writeBareSafetensors(t, dir, "F32", []int{2}, f32Bytes(1, 2))
	for _, path := range []string{npz, st} {
		_, err := Open(path)
		if !errors.Is(err, ErrManifest) || !strings.Contains(err.Error(), FormatDoc) || strings.Contains(err.Error(), "\n") {
			t.Errorf("Open(%s) = %v, want one line wrapping ErrManifest that names %s", path, err, FormatDoc)
		}
	}
}

// writeBareSafetensors writes one tensor "s0/m/out" as safetensors with no
// zflow metadata, as any language's safetensors writer does.
func writeBareSafetensors(t testing.TB, dir, dtype string, shape []int, data []byte) string {
	t.Helper()
	hdr, err := json.Marshal(map[string]any{"s0/m/out": map[string]any{"dtype": dtype, "shape": shape, "data_offsets": []int{0, len(data)}}})
	if err != nil {
		t.Fatal(err)
	}
	b := binary.LittleEndian.AppendUint64(nil, uint64(len(hdr)))
	b = append(append(b, hdr...), data...)
	path := filepath.Join(dir, "bare.safetensors")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// OpenPort reads a file without a manifest as a bare trace (keys are its
// tensor names, native BF16 kept), and a file with one exactly as Open.
func TestOpenPort(t *testing.T) {
	dir := t.TempDir()
	p := writeBareSafetensors(t, dir, "BF16", []int{2}, []byte{0x80, 0x3f, 0x00, 0x40})
	tr, err := OpenPort(p)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	v, err := tr.Tensor("s0/m/out")
	if err != nil {
		t.Fatal(err)
	}
	f, _ := v.Float32()
	if !tr.Bare() || tr.Manifest == nil || len(tr.Tree().Roots()) != 0 || v.DType != BFloat16 || f[0] != 1 || f[1] != 2 {
		t.Errorf("bare %v, manifest %v, dtype %s, values %v", tr.Bare(), tr.Manifest, v.DType, f)
	}
	full := writeZip(t, dir, []zipEntry{npyEntry("param/w", "<f4", []int{1}, f32Bytes(1)), npyEntry("s0/m/out", "<f4", []int{2}, f32Bytes(3, 4)), manifestEntry(t, smallManifest())})
	tr2, err := OpenPort(full)
	if err != nil {
		t.Fatal(err)
	}
	defer tr2.Close()
	if tr2.Bare() || len(tr2.Tree().Roots()) != 1 {
		t.Errorf("a trace with a manifest read as bare (%v) or without its call tree", tr2.Bare())
	}
}

// A port trace whose manifest names no calls, inputs or outputs (dtypes
// only, as zflow_capture.save_trace writes it) is bare, its manifest kept;
// Open reads the same file as a trace with an empty call tree.
func TestOpenPortManifestWithoutCalls(t *testing.T) {
	dir := t.TempDir()
	m := &Manifest{Format: FormatName, Version: Version, DTypes: map[string]string{"s0/m/out": "bfloat16"}}
	p := writeZip(t, dir, []zipEntry{npyEntry("s0/m/out", "<u2", []int{1}, []byte{0x80, 0x3f}), manifestEntry(t, m)})
	tr, err := OpenPort(p)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	in, _ := tr.Info("s0/m/out")
	if !tr.Bare() || !tr.HasManifest() || in.DType != BFloat16 {
		t.Errorf("bare %v, has manifest %v, dtype %s", tr.Bare(), tr.HasManifest(), in.DType)
	}
	bare, err := OpenPort(writeBareSafetensors(t, dir, "F32", []int{1}, f32Bytes(1)))
	if err != nil {
		t.Fatal(err)
	}
	defer bare.Close()
	if !bare.Bare() || bare.HasManifest() {
		t.Errorf("no manifest: bare %v, has manifest %v", bare.Bare(), bare.HasManifest())
	}
	ref, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close()
	if ref.Bare() || !ref.HasManifest() {
		t.Errorf("Open: bare %v, has manifest %v", ref.Bare(), ref.HasManifest())
	}
}
