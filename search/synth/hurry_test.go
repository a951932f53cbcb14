package synth

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zflow/zflow/trace"
)

// TestHurriedSearch: a search whose Hurry is done before it starts still
// walks every call and writes a valid document, taking the boundaries
// glue would have searched from the trace and saying they were not
// searched; the same trace searched in full explains them all.
func TestHurriedSearch(t *testing.T) {
	path := filepath.Join("..", "..", "fixtures", "unseen", "torch_poolzoo-f32.npz")
	tr, err := trace.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	hurry, stop := context.WithCancel(context.Background())
	stop()
	res, err := Discover(context.Background(), tr, path, Options{Hurry: hurry})
	if err != nil {
		t.Fatalf("hurried: %v", err)
	}
	if err := res.Doc.Validate(); err != nil {
		t.Fatalf("hurried document: %v", err)
	}
	if res.Unsearched == 0 || res.Unsearched != len(res.Unexplained) {
		t.Errorf("hurried: %d unsearched of %d unexplained; want all, and some", res.Unsearched, len(res.Unexplained))
	}
	said := 0
	for _, u := range res.Doc.Undetermined {
		if strings.Contains(u.Reason, "not searched") {
			said++
		}
	}
	if said == 0 {
		t.Errorf("no undetermined entry says a boundary was not searched: %v", res.Doc.Undetermined)
	}
	full, _ := discovered(t, path)
	if full.Unsearched != 0 || len(full.Unexplained) != 0 {
		t.Errorf("in full: %d unsearched, %v unexplained", full.Unsearched, full.Unexplained)
	}
}
