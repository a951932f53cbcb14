package program_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// modelish are spellings of model names and of the parameter names of the
// conformance models: none may appear in the logic of the packages that
// build and run programs (DESIGN.md: no model names in logic). Test files
// and testdata are fixtures and may name them.
var modelish = regexp.MustCompile(`(?i)flux|qwen|llama|transformer_blocks|single_transformer|to_q\b|add_q_proj|q_proj|gate_proj|up_proj|down_proj|img_|txt_|norm_out|proj_out|x_embedder|context_embedder|time_text_embed|input_layernorm|self_attn|embed_tokens`)

func TestNoModelNamesInLogic(t *testing.T) {
	var files []string
	for _, glob := range []string{"*.go", "../../semantics/*.go", "../../cmd/zflow/generate.go"} {
		m, err := filepath.Glob(glob)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			if loc := modelish.FindStringIndex(line); loc != nil {
				t.Errorf("%s:%d: %q names a model or its parameters", f, i+1, line[loc[0]:loc[1]])
			}
		}
	}
}
