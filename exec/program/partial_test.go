package program_test

import (
	"strings"
	"testing"

	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/semantics"
)

// holed makes block i of doc undetermined, as discovery writes it: no
// kind, named by a structure entry, the document incomplete.
func holed(doc *semantics.Document, i int) {
	doc.Structure.Blocks[i].Kind = ""
	doc.Status = semantics.StatusIncomplete
	doc.Undetermined = append(doc.Undetermined, semantics.Undetermined{Name: "structure.blocks",
		Scope: semantics.BlockAddress(i), Reason: "planted: the block's dataflow is not read"})
}

// TestBuildRefusesHoles: no program is built from a document with a hole,
// and the refusal names the part; a partial program is built around
// undetermined blocks only.
func TestBuildRefusesHoles(t *testing.T) {
	c := fixtureCases()[0]
	tr, doc := open(t, c)
	shapes := shapesOf(t, doc, tr)
	holed(doc, 1)
	if err := doc.Validate(); err != nil {
		t.Fatalf("the holed document does not validate: %v", err)
	}
	if _, err := program.Build(doc, shapes); err == nil || !strings.Contains(err.Error(), "incomplete: blocks.1 is not expressed") {
		t.Errorf("Build: %v, want a refusal naming blocks.1", err)
	}
	p, err := program.BuildPartial(doc, shapes)
	if err != nil {
		t.Fatalf("BuildPartial: %v", err)
	}
	taps := p.PassedTaps()
	var outs []string
	for _, tp := range taps {
		if !tp.In {
			outs = append(outs, tp.Module+"/"+tp.Port)
		}
	}
	if bd := doc.Structure.Blocks[1].Boundary; len(outs) != 1 || outs[0] != bd.Module+"/"+bd.Outputs["joint"] {
		t.Errorf("passed outputs %v, want the block's joined output", outs)
	}
	for _, n := range p.Nodes {
		if strings.HasPrefix(n.Role, "blocks.1.") && n.Op != program.OpCast && n.Op != program.OpConcat && n.Op != program.OpSlice {
			t.Errorf("the passed block computes %s %s", n.Op, n.Role)
		}
	}
	doc.Structure.Final.Stream = ""
	doc.Undetermined = append(doc.Undetermined, semantics.Undetermined{Name: "structure.final", Scope: "final", Reason: "planted"})
	if _, err := program.BuildPartial(doc, shapes); err == nil || !strings.Contains(err.Error(), "final is not expressed") {
		t.Errorf("BuildPartial with a final hole: %v, want a refusal naming final", err)
	}
}
