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
