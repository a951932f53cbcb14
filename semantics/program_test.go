package semantics

import (
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestProgramDocument: a version 2 document (written by the program search
// on fixtures/toy.npz) reads, writes and reads back unchanged, constants
// included; its program's faults are refused naming the field.
func TestProgramDocument(t *testing.T) {
	d, err := Read(filepath.Join("testdata", "program", "toy.json"))
	if err != nil {
		t.Fatal(err)
	}
	if d.Version != ProgramVersion || d.Program == nil || len(d.Program.Nodes) == 0 {
		t.Fatalf("version %d, program %v", d.Version, d.Program != nil)
	}
	p := filepath.Join(t.TempDir(), "doc.json")
	if err := d.Write(p); err != nil {
		t.Fatal(err)
	}
	back, err := Read(p)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(d.Program, back.Program) {
		t.Error("the program changed in a round trip")
	}
	for _, tc := range []struct {
		name  string
		mut   func(*Document)
		field string
	}{
		{"unknown op", func(d *Document) { d.Program.Nodes[0].Op = "conv" }, "program.nodes[0].op"},
		{"read before made", func(d *Document) { d.Program.Nodes[0].In = []string{"nowhere"} }, "program.nodes[0].in"},
		{"no output", func(d *Document) { d.Program.Outputs = nil }, "program.outputs"},
		{"v1 with a program", func(d *Document) { d.Version = Version }, "program"},
		{"unknown step input", func(d *Document) { d.Program.Values[0].Source = "guidance" }, "program.values[0].source"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, _ := Read(filepath.Join("testdata", "program", "toy.json"))
			tc.mut(c)
			err := c.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.field) {
				t.Errorf("error %v does not name %s", err, tc.field)
			}
		})
	}
}
