package trace

import (
	"errors"
	"strings"
	"testing"
)

func TestKeyMapRules(t *testing.T) {
	m, err := ParseKeyMap("m.map", []byte(`# comment
^(s\d+)/blk(\d+)\.q/(.*)$ => $1/transformer.transformer_blocks.$2.attn.to_q/$3
  # indented comment
blk.* => shadowed/$0
x => ${0}y
`))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		key, want string
		rule      int
	}{
		{"s0/blk3.q/out", "s0/transformer.transformer_blocks.3.attn.to_q/out", 0},
		{"blk3.q", "shadowed/blk3.q", 1},
		{"x", "xy", 2},
		{"xx", "xx", -1}, // the whole key must match
		{"t0/blk3.q/out", "t0/blk3.q/out", -1},
	} {
		got, i := m.Apply(c.key)
		if got != c.want || i != c.rule {
			t.Errorf("Apply(%q) = %q by rule %d, want %q by rule %d", c.key, got, i, c.want, c.rule)
		}
	}
	if m.Rules[2].Line != 5 {
		t.Errorf("rule 3 is on line %d, want 5", m.Rules[2].Line)
	}
	for src, want := range map[string]string{
		"a => b\n(x => y\n": `entry "line 2": malformed trace: bad regexp`,
		"a b\n":             `entry "line 1": malformed trace: want REGEX => TEMPLATE`,
		"a =>\n":            `entry "line 1"`,
		"# only\n":          "no rules",
	} {
		_, err := ParseKeyMap("m.map", []byte(src))
		if !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), want) || !strings.HasPrefix(err.Error(), "m.map: ") {
			t.Errorf("ParseKeyMap(%q) = %v, want %q", src, err, want)
		}
	}
}

// Rename renames entries and every manifest reference; rules that match
// nothing come back; a collision leaves the trace as it was.
func TestRename(t *testing.T) {
	dir := t.TempDir()
	p := writeZip(t, dir, []zipEntry{npyEntry("param/w", "<f4", []int{1}, f32Bytes(1)), npyEntry("s0/m/out", "<f4", []int{2}, f32Bytes(3, 4)), manifestEntry(t, smallManifest())})
	tr, err := OpenPort(p)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	bad, _ := ParseKeyMap("bad.map", []byte(".* => same\n"))
	if _, err := tr.Rename(bad); err == nil || !strings.Contains(err.Error(), `both become "same"`) {
		t.Errorf("collision: %v", err)
	}
	if _, err := tr.Tensor("s0/m/out"); err != nil {
		t.Errorf("a refused rename changed the trace: %v", err)
	}
	m, _ := ParseKeyMap("m.map", []byte("s0/m/(.*) => s0/block/$1\nnothing => here\n"))
	unused, err := tr.Rename(m)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := tr.Tree().Call(0)
	k, _ := c.Tensors.Key("out")
	v, err := tr.Tensor("s0/block/out")
	if len(unused) != 1 || unused[0].Line != 2 || k != "s0/block/out" || err != nil || v.Len() != 2 || tr.Keys()[1] != "s0/block/out" {
		t.Errorf("unused %v, call port %q, tensor %v, keys %v", unused, k, err, tr.Keys())
	}
	if _, err := tr.Param("m.w"); err != nil {
		t.Errorf("an unrenamed parameter is lost: %v", err)
	}
}
