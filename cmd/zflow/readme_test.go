package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// readmeExample is one `zflow ...` command of a ```sh block of README.md,
// with the exit code it documents ("# exit N" at the end; 0 without).
type readmeExample struct {
	line int
	args []string
	code int
}

var exitComment = regexp.MustCompile(`\s+#\s*exit (\d+)\b.*$`)

// readmeExamples reads the zflow commands of the ```sh blocks of a README.
func readmeExamples(text string) ([]readmeExample, error) {
	var out []readmeExample
	inSh := false
	lines := strings.Split(text, "\n")
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		switch {
		case strings.HasPrefix(l, "```sh"):
			inSh = true
			continue
		case strings.HasPrefix(l, "```"):
			inSh = false
			continue
		}
		if !inSh || !strings.HasPrefix(l, "zflow ") {
			continue
		}
		start := i
		for strings.HasSuffix(l, `\`) && i+1 < len(lines) {
			i++
			l = strings.TrimSuffix(l, `\`) + " " + strings.TrimSpace(lines[i])
		}
		args, code, err := exampleCommand(l)
		if err != nil {
			return nil, fmt.Errorf("README.md:%d: %w", start+1, err)
		}
		out = append(out, readmeExample{line: start + 1, args: args, code: code})
	}
	return out, nil
}

// exampleCommand reads one example line, "zflow ARGS [# exit N: why]",
// as the arguments after zflow and the exit code it documents (0 when no
// "# exit N"; another comment is dropped).
func exampleCommand(l string) (args []string, code int, err error) {
	if m := exitComment.FindStringSubmatch(l); m != nil {
		code, _ = strconv.Atoi(m[1])
		l = l[:len(l)-len(m[0])]
	} else if j := strings.Index(l, " # "); j >= 0 {
		l = l[:j]
	}
	words, err := shellWords(strings.TrimSpace(l))
	if err != nil {
		return nil, 0, err
	}
	if len(words) < 2 || words[0] != "zflow" {
		return nil, 0, fmt.Errorf("%q is not a zflow command", l)
	}
	return words[1:], code, nil
}

// shellWords splits a command line as sh would for the README's plain
// examples: blanks separate words, single and double quotes group them
// (no expansions).
func shellWords(s string) ([]string, error) {
	var words []string
	var cur strings.Builder
	in, quote := false, rune(0)
	for _, r := range s {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			cur.WriteRune(r)
		case r == '\'' || r == '"':
			quote, in = r, true
		case r == ' ' || r == '\t':
			if in {
				words = append(words, cur.String())
				cur.Reset()
				in = false
			}
		case r == '$' || r == '|' || r == '>' || r == '<' || r == '`' || r == ';' || r == '&':
			return nil, fmt.Errorf("%q: a shell feature the README test does not run (%c)", s, r)
		default:
			cur.WriteRune(r)
			in = true
		}
	}
	if quote != 0 {
		return nil, fmt.Errorf("%q: unterminated quote", s)
	}
	if in {
		words = append(words, cur.String())
	}
	return words, nil
}

func TestShellWords(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []string
	}{
		{"zflow diff a.npz b.npz", []string{"zflow", "diff", "a.npz", "b.npz"}},
		{"zflow diff --gate 'rel_rms<=2e-3'  --module \"a.*\"", []string{"zflow", "diff", "--gate", "rel_rms<=2e-3", "--module", "a.*"}},
		{"zflow x ''", []string{"zflow", "x", ""}},
	} {
		got, err := shellWords(c.in)
		if err != nil || strings.Join(got, "|") != strings.Join(c.want, "|") {
			t.Errorf("%q: %q %v, want %q", c.in, got, err, c.want)
		}
	}
	for _, bad := range []string{"zflow 'x", "zflow diff $REF", "zflow x | head"} {
		if _, err := shellWords(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

// TestREADMEExamples runs every zflow command of README.md's sh blocks,
// in order, and checks the exit code each documents ("# exit N"; none
// means 0). They run in a scratch folder that links the repository's
// fixtures and semantics, with /tmp/ paths moved into it, so nothing of
// the repository or of /tmp is written.
func TestREADMEExamples(t *testing.T) {
	text, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	exs, err := readmeExamples(string(text))
	if err != nil {
		t.Fatal(err)
	}
	if len(exs) < 15 {
		t.Fatalf("only %d examples read from README.md", len(exs))
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, d := range []string{"fixtures", "semantics"} {
		if err := os.Symlink(filepath.Join(root, d), filepath.Join(dir, d)); err != nil {
			t.Fatal(err)
		}
	}
	t.Chdir(dir)
	for _, ex := range exs {
		args := make([]string, len(ex.args))
		for i, a := range ex.args {
			args[i] = strings.ReplaceAll(a, "/tmp/", dir+"/")
		}
		code, _, stderr := zflow(t, args...)
		if code != ex.code {
			t.Errorf("README.md:%d: zflow %s: exit %d, the README says %d; stderr: %s", ex.line, strings.Join(ex.args, " "), code, ex.code, stderr)
		}
	}
}
