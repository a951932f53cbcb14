package search

import (
	"os"
	"strings"
	"testing"

	"github.com/zflow/zflow/semantics"
)

// TestFactorsDocListsCatalogue keeps FACTORS.md and the catalogue together.
func TestFactorsDocListsCatalogue(t *testing.T) {
	b, err := os.ReadFile("FACTORS.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range semantics.Catalogue() {
		if !strings.Contains(string(b), "| `"+f.Name+"` |") {
			t.Errorf("FACTORS.md has no row for %q", f.Name)
		}
	}
}
