package program

import (
	"fmt"
	"slices"

	"github.com/zflow/zflow/semantics"
)

// checkSizes holds a document's sizes against the weights and inputs
// before anything is built or allocated (issue 12, item 13): a document
// is untrusted input, and a size in it that the files do not bear out is
// refused, naming the field. Each embedder's in_width is its weight's
// (features in for a linear, rows for a table); each input has the rank
// the document gives it; and when the request is the source run's (every
// input of the document's shape), each stream's tokens are the rows the
// embedders make of it (checked in embedder, which computes them).
func checkSizes(doc *semantics.Document, shapes Shapes) error {
	st := &doc.Structure
	for i, e := range st.Embedders {
		field := fmt.Sprintf("structure.embedders[%d].in_width", i)
		var path string
		var dim int
		switch e.Kind {
		case "linear":
			path, dim = e.Roles["proj"].Weight, 1 // [out, in]
		case "table":
			path, dim = e.Roles["table"].Weight, 0 // [rows, width]
		default:
			continue // the builder names an unknown kind
		}
		s, ok := shapes.Weights[path]
		if !ok || e.InWidth == 0 {
			continue // a missing weight is the builder's error; 0: not stated
		}
		if len(s) != 2 || s[dim] != e.InWidth {
			return fmt.Errorf("program: %s is %d, but weight %s is %v", field, e.InWidth, path, s)
		}
	}
	for i, in := range st.Inputs {
		s, ok := shapes.Inputs[in.Role]
		if !ok || in.Shape == nil {
			continue
		}
		if len(s) != len(in.Shape) {
			return fmt.Errorf("program: structure.inputs[%d] (%s, input %s) has shape %v in the document, but the request's is %v", i, in.Role, in.Name, in.Shape, s)
		}
	}
	return nil
}

// sourceSized reports whether every input of the request has the shape
// the document records for the source run (so the source run's sizes,
// tokens among them, must hold exactly).
func sourceSized(st *semantics.Structure, shapes Shapes) bool {
	for _, in := range st.Inputs {
		if s, ok := shapes.Inputs[in.Role]; !ok || in.Shape == nil || !slices.Equal(s, in.Shape) {
			return false
		}
	}
	return len(st.Inputs) > 0
}

// CheckBlockCalls holds the document's blocks against the call tree of
// the reference run: a module that roles of n blocks name must be called
// at least n times per call of the model (blocks that share weights are
// calls of shared modules, so a document of 10^4 blocks on one block's
// weights is refused unless the reference ran them). calls(m) is how many
// times module m was called in the trace; a model the trace never calls
// (an inputs-only trace) leaves nothing to hold the blocks against.
func CheckBlockCalls(doc *semantics.Document, calls func(module string) int) error {
	st := &doc.Structure
	model := calls(st.Model.Module)
	if model == 0 {
		return nil
	}
	uses := map[string]int{}
	first := map[string]int{}
	for i, b := range st.Blocks {
		seen := map[string]bool{}
		for _, r := range b.Roles {
			if r.Module != "" && !seen[r.Module] {
				seen[r.Module] = true
				if uses[r.Module] == 0 {
					first[r.Module] = i
				}
				uses[r.Module]++
			}
		}
	}
	for _, m := range sortedKeysInt(uses) {
		if n, have := uses[m], calls(m); n*model > have {
			return fmt.Errorf("program: structure.blocks: %d blocks (from blocks[%d]) name module %s, which the reference called %d times in %d calls of the model %s",
				n, first[m], m, have, model, st.Model.Module)
		}
	}
	return nil
}

func sortedKeysInt(m map[string]int) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
