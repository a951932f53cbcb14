package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/zflow/zflow/trace"
)

// TestCHeaderWriter compiles capture/c/zflow_trace.h with the system C
// compiler (and C++ where there is one), has it write some boundaries of
// the DiT bf16 reference plus an f32 and an f16 tensor, reads the file
// back and pairs it with the reference. Its refusals (duplicate key,
// unknown dtype) write nothing.
func TestCHeaderWriter(t *testing.T) {
	cc, err := exec.LookPath("cc")
	if err != nil {
		t.Skip("no C compiler (cc) on PATH: capture/c/zflow_trace.h not compiled")
	}
	ts := refBoundaries(t, 6)
	dir := t.TempDir()
	var src strings.Builder
	src.WriteString("#define ZFLOW_TRACE_IMPLEMENTATION\n#include \"zflow_trace.h\"\n#include <stdio.h>\n#include <string.h>\n")
	for i, x := range slices.Backward(ts) {
		fmt.Fprintf(&src, "static const unsigned char d%d[] = {", i)
		for _, b := range x.data {
			fmt.Fprintf(&src, "%d,", b)
		}
		fmt.Fprintf(&src, "0};\nstatic const long long s%d[] = {", i)
		for _, d := range x.shape {
			fmt.Fprintf(&src, "%d,", d)
		}
		src.WriteString("0};\n")
	}
	src.WriteString(`static const float f32[3] = {1.5f, -2.0f, 0.25f};
static const unsigned short f16[2] = {0x3C00, 0xC000}; /* 1, -2 */
static int fail(const char *what, const char *err) { fprintf(stderr, "%s: %s\n", what, err); return 1; }
int main(int argc, char **argv) {
    long long three = 3, two[2] = {1, 2};
    zft_writer *w;
    if (argc != 3) return fail("usage", "writer OUT REFUSED");
    w = zft_create(argv[1]);
    if (!w) return fail("create", "NULL");
`)
	for i, x := range slices.Backward(ts) {
		dt := map[string]string{"BF16": "ZFT_BF16", "F32": "ZFT_F32", "F16": "ZFT_F16"}[x.stDType]
		fmt.Fprintf(&src, "    if (zft_add(w, %q, %s, %d, s%d, d%d)) return fail(\"add\", zft_error(w));\n", x.key, dt, len(x.shape), i, i)
	}
	src.WriteString(`    if (zft_add(w, "extra/f32", ZFT_F32, 1, &three, f32) || zft_add(w, "extra/f16", ZFT_F16, 2, two, f16)) return fail("add", zft_error(w));
    if (zft_close(w)) return fail("close", zft_last_error());
    /* refusals: nothing is written */
    w = zft_create(argv[2]);
    if (zft_add(w, "a", ZFT_F32, 1, &three, f32) || zft_add(w, "a", ZFT_F32, 1, &three, f32) == 0) return fail("duplicate accepted", zft_error(w));
    if (!strstr(zft_error(w), "added twice")) return fail("duplicate error", zft_error(w));
    if (zft_close(w) == 0) return fail("close after a refusal", "returned 0");
    printf("%s\n", zft_last_error());
    w = zft_create(argv[2]);
    if (zft_add(w, "b", (zft_dtype)7, 1, &three, f32) == 0) return fail("dtype 7 accepted", "");
    printf("%s\n", zft_error(w));
    zft_abort(w);
    return 0;
}
`)
	c := filepath.Join(dir, "writer.c")
	os.WriteFile(c, []byte(src.String()), 0o644)
	inc := filepath.Join("..", "..", "capture", "c")
	compilers := [][]string{{cc, "-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic", "-I", inc, "-o", filepath.Join(dir, "w-c"), c}}
	if cxx, err := exec.LookPath("c++"); err == nil {
		compilers = append(compilers, []string{cxx, "-x", "c++", "-Wall", "-Werror", "-I", inc, "-o", filepath.Join(dir, "w-cxx"), c})
	} else {
		t.Log("no c++ on PATH: the header compiled as C only")
	}
	for _, args := range compilers {
		if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
		}
		bin := args[len(args)-2]
		ours, refused := filepath.Join(dir, filepath.Base(bin)+".safetensors"), filepath.Join(dir, "refused.safetensors")
		out, err := exec.Command(bin, ours, refused).CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", bin, err, out)
		}
		if lines := strings.Split(strings.TrimSpace(string(out)), "\n"); len(lines) != 2 || !strings.Contains(lines[0], refused+`: key "a": added twice`) || !strings.Contains(lines[1], "unknown dtype 7") {
			t.Errorf("%s: refusals said %q", bin, out)
		}
		if left, _ := filepath.Glob(refused + "*"); len(left) != 0 {
			t.Errorf("%s: a refused trace left %v", bin, left)
		}
		tr, err := trace.OpenPort(ours)
		if err != nil {
			t.Fatal(err)
		}
		f32, _ := tr.Tensor("extra/f32")
		f16, _ := tr.Tensor("extra/f16")
		a, _ := f32.Float32()
		b, _ := f16.Float32()
		if !tr.Bare() || !slices.Equal(a, []float32{1.5, -2, 0.25}) || !slices.Equal(b, []float32{1, -2}) || !slices.Equal(f16.Shape, []int{1, 2}) {
			t.Errorf("%s: read back bare %v, f32 %v, f16 %v %v", bin, tr.Bare(), a, b, f16.Shape)
		}
		tr.Close()
		code, stdout, stderr := zflow(t, "diff", ours, ditBF16, "--step", "0", "--format", "json", "--gate", "exact>=1")
		var doc struct {
			Boundaries []struct{ Key string }
			Unpaired   []struct{ Key, Side string }
		}
		json.Unmarshal([]byte(stdout), &doc)
		var got []string
		for _, b := range doc.Boundaries {
			got = append(got, b.Key)
		}
		want := make([]string, len(ts))
		for i, x := range ts {
			want[i] = x.key
		}
		if code != 0 || !slices.Equal(got, want) || !strings.Contains(stderr, "had no call tree") {
			t.Errorf("%s: diff exit %d, paired %v, want %v; stderr %s", bin, code, got, want, stderr)
		}
	}
}
