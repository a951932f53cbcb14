package synth

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/zflow/zflow/trace"
)

// Several tests read the discovery of one repository fixture:
// TestUnseenArchitectures discovers every fixtures/unseen trace, and
// TestUnseenSelectiveScan, TestUnseenMochi, TestUnseenAttentionSinks and
// others each look closer at one of them; TestPlantedConstructs and
// TestPlantedOwnTables share fixtures/constructs/own_tables.npz, and
// TestPlantedControls reads two controls twice each. Discover
// is deterministic, so each fixture is discovered once per test binary
// (whichever test asks first) and every test gets its own copy of the
// document's fields a test changes (check.Apply appends to Undetermined,
// sets Status and Check). TestMain proves the shared documents were not
// changed otherwise: each is compared, as JSON, with itself as discovered.

type discovery struct {
	once sync.Once
	tr   *trace.Trace
	res  *Result
	err  error
	doc  []byte // the document as discovered
}

var discoveries struct {
	sync.Mutex
	by map[string]*discovery
}

// discovered discovers a repository fixture (a relative path) once per
// test binary with Options{}; the trace stays open until the tests end.
// A trace a test writes itself (an absolute temporary path) is discovered
// afresh and closed when the test ends.
func discovered(t *testing.T, path string) (*Result, *trace.Trace) {
	t.Helper()
	if filepath.IsAbs(path) {
		tr, err := trace.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tr.Close() })
		res, err := Discover(context.Background(), tr, path, Options{})
		if err != nil {
			t.Fatal(err)
		}
		return res, tr
	}
	key := filepath.Clean(path)
	discoveries.Lock()
	if discoveries.by == nil {
		discoveries.by = map[string]*discovery{}
	}
	d := discoveries.by[key]
	if d == nil {
		d = &discovery{}
		discoveries.by[key] = d
	}
	discoveries.Unlock()
	d.once.Do(func() {
		if d.tr, d.err = trace.Open(path); d.err != nil {
			return
		}
		if d.res, d.err = Discover(context.Background(), d.tr, path, Options{}); d.err != nil {
			return
		}
		d.doc, d.err = json.Marshal(d.res.Doc)
	})
	if d.err != nil {
		t.Fatal(d.err)
	}
	res := *d.res
	doc := *d.res.Doc
	doc.Undetermined = slices.Clone(doc.Undetermined)
	res.Doc = &doc
	return &res, d.tr
}

func TestMain(m *testing.M) {
	code := m.Run()
	discoveries.Lock()
	defer discoveries.Unlock()
	for path, d := range discoveries.by {
		if d.res == nil || d.doc == nil {
			continue
		}
		if now, err := json.Marshal(d.res.Doc); err != nil || !bytes.Equal(now, d.doc) {
			fmt.Fprintf(os.Stderr, "discovered: a test changed the shared document of %s (%v)\n", path, err)
			code = 1
		}
		d.tr.Close()
	}
	os.Exit(code)
}
