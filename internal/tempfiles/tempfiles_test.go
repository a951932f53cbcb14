package tempfiles

import (
	"os"
	"path/filepath"
	"testing"
)

// TestRemoveAll: what is not Done is removed; what is Done is left alone.
func TestRemoveAll(t *testing.T) {
	dir := t.TempDir()
	a, err := Create(dir, ".a.tmp-*")
	if err != nil {
		t.Fatal(err)
	}
	a.Close()
	b, err := Create(dir, ".b.tmp-*")
	if err != nil {
		t.Fatal(err)
	}
	b.Close()
	kept := filepath.Join(dir, "b")
	if err := os.Rename(b.Name(), kept); err != nil {
		t.Fatal(err)
	}
	Done(b.Name())
	if n := RemoveAll(); n != 1 {
		t.Errorf("removed %d, want 1", n)
	}
	if _, err := os.Stat(a.Name()); !os.IsNotExist(err) {
		t.Errorf("%s is still there: %v", a.Name(), err)
	}
	if _, err := os.Stat(kept); err != nil {
		t.Errorf("the renamed file: %v", err)
	}
}
