package main

import (
	"archive/zip"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/zflow/zflow/reports"
	"github.com/zflow/zflow/trace"
)

// bareTensor is one tensor of a hand-written port trace.
type bareTensor struct {
	key, stDType string
	shape        []int
	data         []byte
}

// refBoundaries returns the first n step-0 boundaries of the DiT bf16
// fixture with their data, in the reference's execution order.
func refBoundaries(t *testing.T, n int) []bareTensor {
	t.Helper()
	ref, err := trace.Open(ditBF16)
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close()
	step := 0
	bs, err := reports.Boundaries(ref, reports.Selection{Step: &step})
	if err != nil {
		t.Fatal(err)
	}
	var out []bareTensor
	for _, b := range bs[:n] {
		tn, err := ref.Tensor(b.Key)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, bareTensor{b.Key, tn.DType.SafetensorsName(), tn.Shape, slices.Clone(tn.Bytes())})
	}
	return out
}

// writeBareSafetensors writes tensors as safetensors with no metadata at
// all, as the Rust crate or safetensors.numpy do.
func writeBareSafetensors(t *testing.T, path string, ts []bareTensor) {
	t.Helper()
	hdr := map[string]any{}
	var data []byte
	for _, x := range ts {
		hdr[x.key] = map[string]any{"dtype": x.stDType, "shape": x.shape, "data_offsets": []int{len(data), len(data) + len(x.data)}}
		data = append(data, x.data...)
	}
	h, _ := json.Marshal(hdr)
	b := append(binary.LittleEndian.AppendUint64(nil, uint64(len(h))), h...)
	if err := os.WriteFile(path, append(b, data...), 0o644); err != nil {
		t.Fatal(err)
	}
}

// writeBareNpz writes tensors as np.savez does (no __zflow__ entry); bf16
// goes in as <u2 bit patterns, the only way an npz can hold it.
func writeBareNpz(t *testing.T, path string, ts []bareTensor) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	zw := zip.NewWriter(f)
	descr := map[string]string{"BF16": "<u2", "F32": "<f4", "F16": "<f2"}
	for _, x := range ts {
		dims := ""
		for _, d := range x.shape {
			dims += fmt.Sprintf("%d,", d)
		}
		dict := fmt.Sprintf("{'descr': '%s', 'fortran_order': False, 'shape': (%s), }", descr[x.stDType], dims)
		for (10+len(dict)+1)%64 != 0 {
			dict += " "
		}
		hdr := append([]byte("\x93NUMPY\x01\x00"), byte(len(dict)+1), byte((len(dict)+1)>>8))
		w, _ := zw.CreateHeader(&zip.FileHeader{Name: x.key + ".npy", Method: zip.Store})
		w.Write(append(append(hdr, dict+"\n"...), x.data...))
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	f.Close()
}

// TestDiffPortTraceWithoutManifest: a port's safetensors (native BF16) or
// npz (uint16 bit patterns) without a manifest pairs with the reference by
// key, in the reference's order whatever the file's order, and diff says
// in one line that OURS had no call tree. A changed value fails where it
// was changed; a reference without a manifest is still refused.
func TestDiffPortTraceWithoutManifest(t *testing.T) {
	ts := refBoundaries(t, 6)
	want := make([]string, len(ts))
	for i, x := range ts {
		want[i] = x.key
	}
	rev := slices.Clone(ts)
	slices.Reverse(rev)
	dir := t.TempDir()
	for _, c := range []struct {
		name  string
		write func(*testing.T, string, []bareTensor)
	}{{"ours.safetensors", writeBareSafetensors}, {"ours.npz", writeBareNpz}} {
		p := filepath.Join(dir, c.name)
		c.write(t, p, rev)
		code, out, stderr := zflow(t, "diff", p, ditBF16, "--step", "0", "--format", "json", "--gate", "exact>=1")
		var doc struct{ Boundaries []struct{ Key string } }
		if err := json.Unmarshal([]byte(out), &doc); err != nil {
			t.Fatalf("%s: exit %d, %v; stderr %s", c.name, code, err, stderr)
		}
		var got []string
		for _, b := range doc.Boundaries {
			got = append(got, b.Key)
		}
		if code != 0 || !slices.Equal(got, want) {
			t.Errorf("%s: exit %d, paired %v, want %v in the reference's order", c.name, code, got, want)
		}
		if n := strings.Count(stderr, "had no call tree"); n != 1 || strings.Count(stderr, "\n") != 1 {
			t.Errorf("%s: stderr %q, want one line saying OURS had no call tree", c.name, stderr)
		}
		if c.name == "ours.npz" && !strings.Contains(stderr, fmt.Sprintf("%d uint16 entries read as bfloat16", len(ts))) {
			t.Errorf("%s: stderr %q does not say the uint16 entries were read as bfloat16", c.name, stderr)
		}
		// As the reference, the same file is refused: a reference needs its manifest.
		code, _, stderr = zflow(t, "diff", ditBF16, p)
		if code != 2 || !strings.Contains(stderr, "docs/trace-format.md") {
			t.Errorf("%s as REF: exit %d, stderr %q", c.name, code, stderr)
		}
	}
	// One value changed: the pair fails there, first.
	bad := slices.Clone(ts)
	bad[3].data = slices.Clone(bad[3].data)
	bad[3].data[1] ^= 0x40
	p := filepath.Join(dir, "bad.safetensors")
	writeBareSafetensors(t, p, bad)
	code, _, stderr := zflow(t, "diff", p, ditBF16, "--step", "0", "--gate", "exact>=1")
	if code != 1 || !strings.Contains(stderr, "first failing "+ts[3].key) {
		t.Errorf("changed value: exit %d, stderr %q", code, stderr)
	}
}

// TestDiffMap: a port that keeps its own names pairs through --map; the
// first matching rule wins; a rule that matches nothing is reported; a bad
// rule or two keys mapped onto one is bad input.
func TestDiffMap(t *testing.T) {
	ts := refBoundaries(t, 6)
	own := slices.Clone(ts)
	for i := range own {
		own[i].key = "mine:" + strings.ReplaceAll(own[i].key, "/", "|")
	}
	dir := t.TempDir()
	p := filepath.Join(dir, "ours.safetensors")
	writeBareSafetensors(t, p, own)
	write := func(name, s string) string {
		f := filepath.Join(dir, name)
		os.WriteFile(f, []byte(s), 0o644)
		return f
	}
	good := write("good.map", `# a port's names => the reference's
^mine:(s\d+)\|([^|]*)\|(.*)$ => $1/$2/$3
^mine:(.*)$ => wrong/$1

^never/(.*)$ => $1
`)
	code, out, stderr := zflow(t, "diff", p, ditBF16, "--step", "0", "--map", good, "--format", "json", "--gate", "exact>=1")
	var doc struct {
		Boundaries []struct{ Key string }
		Unpaired   []struct{ Key string }
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("exit %d, %v; stderr %s", code, err, stderr)
	}
	if code != 0 || len(doc.Boundaries) != len(ts) || doc.Boundaries[0].Key != ts[0].key {
		t.Errorf("exit %d: %d of %d paired (%+v); stderr %s", code, len(doc.Boundaries), len(ts), doc, stderr)
	}
	// Rule 3 matches every key too, but rule 2 matches first: rule 3 is
	// left with nothing, and reported as such with rule 6.
	for _, u := range doc.Unpaired {
		if strings.HasPrefix(u.Key, "wrong/") {
			t.Errorf("rule 3 won over rule 2 for %s", u.Key)
		}
	}
	for _, want := range []string{`line 3: ^mine:(.*)$ => wrong/$1 matched no key`, `line 5: ^never/(.*)$ => $1 matched no key`} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr %q does not report %q", stderr, want)
		}
	}
	if strings.Contains(stderr, "line 2:") {
		t.Errorf("stderr %q reports rule 2, which renamed every key", stderr)
	}
	for name, s := range map[string]string{
		"collide.map": `^mine:.* => same` + "\n",
		"regexp.map":  "^(s\\d+ => $1\n",
		"arrow.map":   "# no arrow\n^s0/.*$\n",
	} {
		code, _, stderr := zflow(t, "diff", p, ditBF16, "--map", write(name, s))
		if code != 2 || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, name) {
			t.Errorf("%s: exit %d, stderr %q; want exit 2 and one line naming the file", name, code, stderr)
		}
	}
}

// TestVersionFlag: zflow --version prints the release on one line, exit 0.
func TestVersionFlag(t *testing.T) {
	code, out, stderr := zflow(t, "--version")
	if code != 0 || !strings.HasPrefix(out, "zflow version "+version) || strings.Count(out, "\n") != 1 {
		t.Errorf("exit %d, stdout %q, stderr %q", code, out, stderr)
	}
}

// TestInspectAndStatsOfPortTrace: a port's trace (no manifest, or one
// naming no calls) is worth a look: inspect lists its keys and stats
// reads every one, in file order, saying it has no call tree, where both
// once refused it or found nothing to read.
func TestInspectAndStatsOfPortTrace(t *testing.T) {
	ts := refBoundaries(t, 4)
	dir := t.TempDir()
	for _, c := range []struct {
		name  string
		write func(*testing.T, string, []bareTensor)
	}{{"ours.safetensors", writeBareSafetensors}, {"ours.npz", writeBareNpz}} {
		p := filepath.Join(dir, c.name)
		c.write(t, p, ts)
		code, out, stderr := zflow(t, "stats", p, "--format", "json")
		var st struct{ Tensors []struct{ Key string } }
		if err := json.Unmarshal([]byte(out), &st); err != nil || code != 0 || len(st.Tensors) != len(ts) || st.Tensors[0].Key != ts[0].key {
			t.Errorf("%s: stats exit %d, %d tensors (%v), want %d; stderr %s", c.name, code, len(st.Tensors), err, len(ts), stderr)
		}
		if !strings.Contains(stderr, "has no call tree") {
			t.Errorf("%s: stats stderr %q does not say the trace has no call tree", c.name, stderr)
		}
		code, out, stderr = zflow(t, "inspect", p, "--format", "json")
		var in struct{ Keys []struct{ Key, DType string } }
		if err := json.Unmarshal([]byte(out), &in); err != nil || code != 0 || len(in.Keys) != len(ts) || in.Keys[0].Key != ts[0].key {
			t.Errorf("%s: inspect exit %d, keys %+v (%v); stderr %s", c.name, code, in.Keys, err, stderr)
		}
		if code, out, _ := zflow(t, "inspect", p); code != 0 || !strings.Contains(out, "no call tree") || !strings.Contains(out, ts[len(ts)-1].key) {
			t.Errorf("%s: inspect exit %d:\n%s", c.name, code, out)
		}
	}
	// a reference still lists its call tree, not its keys
	if _, out, _ := zflow(t, "inspect", ditBF16, "--format", "json"); strings.Contains(out, `"keys"`) {
		t.Error("inspect of a reference lists keys")
	}
}
