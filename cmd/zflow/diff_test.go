package main

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var (
	faultRef   = filepath.Join(fixtures, "faults", "ref.npz")
	faultClean = filepath.Join(fixtures, "faults", "clean.npz")
	faultAct   = filepath.Join(fixtures, "faults", "wrong_activation.npz")
	ditBF16    = filepath.Join(fixtures, "dit", "dit-bf16.npz")
	ditF32     = filepath.Join(fixtures, "dit", "dit-f32.npz")
)

func TestDiffExitCodes(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.npz")
	os.WriteFile(bad, []byte("PK\x03\x04 not really"), 0o644)
	for _, c := range []struct {
		name string
		args []string
		want int
	}{
		{"clean passes", []string{faultClean, faultRef}, 0},
		{"fault fails", []string{faultAct, faultRef}, 1},
		{"a loose gate passes the fault", []string{faultAct, faultRef, "--gate", "rel_rms<=1"}, 0},
		{"a glob gate only gates its boundaries", []string{faultAct, faultRef, "--gate", "transformer.x_embedder:exact>=1"}, 0},
		{"exact gate fails the fault", []string{faultAct, faultRef, "--gate", "exact>=0.999"}, 1},
		{"step filter", []string{ditBF16, ditF32, "--step", "0"}, 0},
		{"step with the timestep difference", []string{ditBF16, ditF32, "--step", "2"}, 1},
		{"malformed gate", []string{faultClean, faultRef, "--gate", "rel_rms<<2"}, 2},
		{"unknown metric", []string{faultClean, faultRef, "--gate", "snr>=2"}, 2},
		{"bad glob", []string{faultClean, faultRef, "--module", "[x"}, 2},
		{"bad format", []string{faultClean, faultRef, "--format", "yaml"}, 2},
		{"bad report", []string{faultClean, faultRef, "--report", "junit"}, 2},
		{"missing file", []string{faultClean, "nope.npz"}, 2},
		{"malformed trace", []string{bad, faultRef}, 2},
		{"too many args", []string{faultClean, faultRef, faultRef}, 2},
		{"REF twice", []string{faultClean, faultRef, "--ref", faultRef}, 2},
		{"one path and --ref", []string{faultClean, "--ref", faultRef}, 0},
	} {
		code, _, stderr := zflow(t, append([]string{"diff"}, c.args...)...)
		if code != c.want {
			t.Errorf("%s: exit %d, want %d; stderr: %s", c.name, code, c.want, stderr)
		}
		if code != 0 && !strings.HasPrefix(stderr, "zflow: ") {
			t.Errorf("%s: stderr %q", c.name, stderr)
		}
	}
}

// TestDiffJSONContract checks the fields the README promises.
func TestDiffJSONContract(t *testing.T) {
	code, out, _ := zflow(t, "diff", faultAct, faultRef, "--format", "json")
	if code != 1 {
		t.Fatalf("exit %d", code)
	}
	var doc map[string]any
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"format", "version", "ours", "ref", "selection", "gates", "pass", "counts", "boundaries", "unpaired", "first_failing", "diagnosis"} {
		if _, ok := doc[k]; !ok {
			t.Errorf("no %q", k)
		}
	}
	bs := doc["boundaries"].([]any)
	if len(bs) != 114 {
		t.Fatalf("%d boundaries", len(bs))
	}
	for _, b := range bs {
		m := b.(map[string]any)
		for _, k := range []string{"scope", "module", "port", "shape", "max_abs", "mean_abs", "rel_rms", "cosine", "psnr",
			"exact_fraction", "ulp", "nan", "inf", "pass", "key", "dtype", "worst_row", "checks"} {
			if _, ok := m[k]; !ok {
				t.Fatalf("boundary %v has no %q", m["key"], k)
			}
		}
		ulp := m["ulp"].(map[string]any)
		for _, k := range []string{"median", "p99", "max"} {
			if _, ok := ulp[k].(float64); !ok {
				t.Fatalf("ulp.%s = %v", k, ulp[k])
			}
		}
		// bit-exact boundaries have an infinite PSNR, spelled "inf"
		if m["pass"] == true && m["exact_fraction"] == 1.0 && m["psnr"] != "inf" {
			t.Errorf("%v: psnr %v", m["key"], m["psnr"])
		}
	}
	ff := doc["first_failing"].(map[string]any)
	if ff["key"] != "s0/transformer.blocks.0.ff.act/out" || ff["pass"] != false {
		t.Errorf("first_failing %v", ff["key"])
	}
	d := doc["diagnosis"].(map[string]any)
	if d["boundary"] != ff["key"] || d["signature"] != "activation" {
		t.Errorf("diagnosis %v %v", d["boundary"], d["signature"])
	}
	nums := d["numbers"].(map[string]any)
	for _, k := range []string{"rel_rms", "affine_explained", "systematic", "scale_share", "mean_share", "multiset_match"} {
		if _, ok := nums[k].(float64); !ok {
			t.Errorf("diagnosis.numbers.%s = %v", k, nums[k])
		}
	}
	if ch := d["channels"].(map[string]any); ch["count"] != 128.0 || len(ch["worst"].([]any)) != 16 {
		t.Errorf("channels %v", ch)
	}

	// A passing run: first_failing and diagnosis are null, unpaired an
	// empty list.
	code, out, _ = zflow(t, "diff", faultClean, faultRef, "--format", "json")
	var pass struct {
		Pass         bool
		FirstFailing *json.RawMessage `json:"first_failing"`
		Diagnosis    *json.RawMessage
		Unpaired     []any
	}
	if err := json.Unmarshal([]byte(out), &pass); err != nil || code != 0 {
		t.Fatal(code, err)
	}
	if !pass.Pass || pass.FirstFailing != nil || pass.Diagnosis != nil || pass.Unpaired == nil {
		t.Errorf("clean: %+v", pass)
	}
}

func TestDiffJUnit(t *testing.T) {
	code, out, _ := zflow(t, "diff", faultAct, faultRef, "--format", "junit")
	if code != 1 {
		t.Fatalf("exit %d", code)
	}
	var doc struct {
		Tests    int `xml:"tests,attr"`
		Failures int `xml:"failures,attr"`
		Suites   []struct {
			Name     string `xml:"name,attr"`
			Tests    int    `xml:"tests,attr"`
			Failures int    `xml:"failures,attr"`
			Cases    []struct {
				Name    string `xml:"name,attr"`
				Failure *struct {
					Message string `xml:"message,attr"`
					Text    string `xml:",chardata"`
				} `xml:"failure"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	if err := xml.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	b := doc.Suites[0]
	if b.Name != "boundaries" || len(b.Cases) != 114 || b.Tests != 114 || b.Failures != 41 || doc.Failures != 41 {
		t.Fatalf("suite %s: %d cases, tests %d, failures %d", b.Name, len(b.Cases), b.Tests, b.Failures)
	}
	failed := 0
	for _, c := range b.Cases {
		if c.Failure != nil {
			failed++
			if !strings.Contains(c.Failure.Message, "rel_rms") {
				t.Errorf("%s: failure message %q", c.Name, c.Failure.Message)
			}
		}
	}
	if failed != 41 {
		t.Errorf("%d failures", failed)
	}
	first := b.Cases[57]
	if first.Name != "s0/transformer.blocks.0.ff.act/out" || first.Failure == nil || !strings.Contains(first.Failure.Text, "signature: activation") {
		t.Errorf("first failing case %s: %+v", first.Name, first.Failure)
	}
}

func TestDiffMarkdownAndCSV(t *testing.T) {
	dir := t.TempDir()
	md, csvPath, plots := filepath.Join(dir, "r.md"), filepath.Join(dir, "r.csv"), filepath.Join(dir, "plots")
	code, out, stderr := zflow(t, "diff", faultAct, faultRef, "--report", "markdown="+md, "--report", "csv="+csvPath, "--plot", plots)
	if code != 1 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"FAIL: first failing boundary #57 s0/transformer.blocks.0.ff.act/out", "signature: activation", "per-channel mean range", "| channel |"} {
		if !strings.Contains(out, want) {
			t.Errorf("table output lacks %q", want)
		}
	}
	b, err := os.ReadFile(md)
	if err != nil {
		t.Fatal(err)
	}
	m := string(b)
	for _, want := range []string{"## zflow diff: FAIL", "**Signature: activation.**", "### Failing boundaries (41)", "<details>", "|:--"} {
		if !strings.Contains(m, want) {
			t.Errorf("markdown lacks %q", want)
		}
	}
	// every table row of the boundaries tables has the header's columns
	var header int
	for _, line := range strings.Split(m, "\n") {
		if strings.HasPrefix(line, "| #") {
			header = strings.Count(line, "|")
		} else if header > 0 && strings.HasPrefix(line, "|") {
			if n := strings.Count(line, "|"); n != header {
				t.Fatalf("row with %d bars under a header of %d: %s", n, header, line)
			}
		} else {
			header = 0
		}
	}
	f, err := os.Open(csvPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 115 || rows[0][13] != "rel_rms" || rows[58][1] != "s0/transformer.blocks.0.ff.act/out" || rows[58][26] != "fail" {
		t.Errorf("csv: %d rows, %v / %v", len(rows), rows[0], rows[58])
	}
	for _, p := range []string{"error-by-boundary.png", "channels.png"} {
		b, err := os.ReadFile(filepath.Join(plots, p))
		if err != nil || !bytes.HasPrefix(b, []byte("\x89PNG")) {
			t.Errorf("%s: %v", p, err)
		}
	}
}

func TestDiffUnpaired(t *testing.T) {
	// The planted faults have one step; the DiT fixtures three: steps 1
	// and 2 are present on one side only, but pairing is by key, so with
	// --module only the matching module's keys are compared.
	code, out, _ := zflow(t, "diff", faultClean, ditF32, "--format", "json", "--module", "transformer.x_embedder")
	var doc struct {
		Boundaries []struct{ Key string }
		Unpaired   []struct{ Key, Side string }
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Boundaries) != 2 || len(doc.Unpaired) != 4 || doc.Unpaired[0].Side != "ref" || doc.Unpaired[0].Key != "s1/transformer.x_embedder/arg0" {
		t.Errorf("exit %d: %+v", code, doc)
	}
	code, _, _ = zflow(t, "diff", faultClean, ditF32, "--module", "transformer.x_embedder", "--fail-unpaired", "--gate", "max_abs<=inf")
	if code != 1 {
		t.Errorf("--fail-unpaired: exit %d", code)
	}
}

// TestWorkspaceShortForm: zflow workspace records the traces; zflow diff
// with no paths uses them; paths override them.
func TestWorkspaceShortForm(t *testing.T) {
	abs := func(p string) string { a, _ := filepath.Abs(p); return a }
	ref, gen, clean := abs(faultRef), abs(faultAct), abs(faultClean)
	t.Chdir(t.TempDir())
	if code, _, stderr := zflow(t, "diff", "--step", "0"); code != 2 || !strings.Contains(stderr, "zflow workspace") {
		t.Errorf("no workspace: exit %d: %s", code, stderr)
	}
	if code, _, stderr := zflow(t, "workspace", "--ref", ref, "--generated", gen); code != 0 {
		t.Fatalf("workspace: exit %d: %s", code, stderr)
	}
	// the file names the zflow that wrote it; one older than that field
	// still reads
	if b, err := os.ReadFile(workspaceFile); err != nil || !strings.Contains(string(b), `"zflow_version": "`+versionString()+`"`) {
		t.Errorf("%s: %s (%v), want its zflow_version", workspaceFile, b, err)
	}
	older := `{"version": 1, "reference": "` + ref + `", "generated": "` + gen + `"}`
	if err := os.WriteFile(workspaceFile, []byte(older), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, _ := zflow(t, "workspace", "--json")
	var ws workspace
	if err := json.Unmarshal([]byte(out), &ws); err != nil || code != 0 || ws.Reference != ref || ws.Generated != gen || ws.Version != 1 {
		t.Errorf("workspace --json: %s", out)
	}
	if code, out, _ := zflow(t, "diff", "--step", "0"); code != 1 || !strings.Contains(out, "wrong_activation.npz") {
		t.Errorf("short form: exit %d", code)
	}
	if code, _, _ := zflow(t, "diff", clean, "--step", "0"); code != 0 {
		t.Errorf("OURS overrides the workspace: exit %d", code)
	}
	if code, _, _ := zflow(t, "diff", "--ref", gen, "--step", "0"); code != 0 {
		t.Errorf("--ref overrides the workspace: exit %d", code)
	}
	if code, _, _ := zflow(t, "workspace", "--generated", "missing.npz"); code != 2 {
		t.Errorf("a missing trace: exit %d", code)
	}
	if err := recordWorkspace(func(w *workspace) { w.Semantics = "s.json" }); err != nil {
		t.Fatal(err)
	}
	if _, out, _ := zflow(t, "workspace"); !strings.Contains(out, "semantics  s.json") || !strings.Contains(out, gen) {
		t.Errorf("workspace: %s", out)
	}
	os.WriteFile(workspaceFile, []byte("{not json"), 0o644)
	if code, _, _ := zflow(t, "diff"); code != 2 {
		t.Errorf("a malformed workspace: exit %d", code)
	}
	if code, _, _ := zflow(t, "workspace", "--clear"); code != 0 {
		t.Errorf("--clear: exit %d", code)
	}
	if _, err := os.Stat(workspaceFile); !os.IsNotExist(err) {
		t.Errorf("workspace file still there: %v", err)
	}
}

func TestStatsCommand(t *testing.T) {
	code, out, _ := zflow(t, "stats", ditBF16, "--step", "0", "--module", "transformer.blocks.0", "--per-channel")
	if code != 0 || !strings.Contains(out, "per-channel mean range") || !strings.Contains(out, "s0/transformer.blocks.0/out") {
		t.Errorf("exit %d:\n%s", code, out)
	}
	code, out, _ = zflow(t, "stats", ditF32, "--port", "out", "--per-channel", "--format", "json")
	var doc struct {
		Format  string
		Tensors []struct {
			Key      string
			Count    int
			Channels *struct {
				Count      int
				MeanRange  [2]float64 `json:"mean_range"`
				PerChannel []any      `json:"per_channel"`
			}
		}
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil || code != 0 {
		t.Fatal(code, err)
	}
	if doc.Format != "zflow-stats" || len(doc.Tensors) == 0 || doc.Tensors[0].Channels == nil ||
		len(doc.Tensors[0].Channels.PerChannel) != doc.Tensors[0].Channels.Count {
		t.Errorf("%+v", doc)
	}
	for _, f := range []string{"markdown", "csv"} {
		if code, out, _ := zflow(t, "stats", ditF32, "--step", "1", "--format", f); code != 0 || len(out) == 0 {
			t.Errorf("%s: exit %d", f, code)
		}
	}
	for _, args := range [][]string{{ditF32, "--format", "junit"}, {"nope.npz"}, {ditF32, "--port", "[x"}, {}} {
		if code, _, _ := zflow(t, append([]string{"stats"}, args...)...); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
}

// TestExampleWorkflowCommand runs the `zflow diff` command of the example
// CI job as written, on the planted-fault fixtures, so that its flags stay
// valid.
func TestExampleWorkflowCommand(t *testing.T) {
	b, err := os.ReadFile("../../examples/github-actions/port-check.yml")
	if err != nil {
		t.Fatal(err)
	}
	var cmd []string
	in := false
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "zflow diff ") {
			in = true
		}
		if !in {
			continue
		}
		cont := strings.HasSuffix(line, `\`)
		cmd = append(cmd, strings.TrimSuffix(line, `\`))
		if !cont {
			break
		}
	}
	if len(cmd) == 0 {
		t.Fatal("no zflow diff command in the workflow")
	}
	dir := t.TempDir()
	var args []string
	for _, f := range strings.Fields(strings.Join(cmd, " ")) {
		f = strings.Trim(f, "'")
		f = strings.ReplaceAll(f, "traces/ours.npz", faultAct)
		f = strings.ReplaceAll(f, "traces/ref.npz", faultRef)
		f = strings.ReplaceAll(f, "reports/", dir+"/")
		args = append(args, f)
	}
	code, _, stderr := zflow(t, args[1:]...)
	if code != 1 {
		t.Fatalf("%v: exit %d: %s", args, code, stderr)
	}
	for _, f := range []string{"zflow-diff.xml", "zflow-diff.md", "zflow-diff.json", "plots/channels.png"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Error(err)
		}
	}
}

// TestReportExamples runs the Example lines of diff, stats and workspace as
// written, from a folder whose fixtures/ is the repository's (so the
// workspace file lands there), /tmp/ outputs moved to a temporary folder.
// None may be bad input; diff's may find failing boundaries.
func TestReportExamples(t *testing.T) {
	fix, err := filepath.Abs(fixtures)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.Symlink(fix, filepath.Join(dir, "fixtures")); err != nil {
		t.Skip("no symlinks:", err)
	}
	t.Chdir(dir)
	for _, cmd := range []*cobraCmd{{"diff", newDiffCmd().Example}, {"stats", newStatsCmd().Example}, {"workspace", newWorkspaceCmd().Example}} {
		for _, line := range strings.Split(cmd.example, "\n") {
			args, want, err := exampleCommand(strings.ReplaceAll(line, "/tmp/", dir+"/"))
			if err != nil {
				t.Fatal(err)
			}
			// the exit code the example documents ("# exit 1: ..."), 0 without
			if code, _, stderr := zflow(t, args...); code != want {
				t.Errorf("%s: exit %d, want %d: %s", line, code, want, stderr)
			}
		}
	}
}

type cobraCmd struct{ name, example string }

// TestDiffNoFalsePass: the reproductions of issue 12's items 1 and 2. A
// NaN on one side only fails whatever --gate says; a selection or a gate
// that matches nothing is bad input; a run that pairs nothing fails.
func TestDiffNoFalsePass(t *testing.T) {
	f16 := filepath.Join(fixtures, "faults", "f16_overflow.npz")
	lm := filepath.Join(fixtures, "constructs", "lm.npz")
	for _, c := range []struct {
		name string
		args []string
		want int
		says string // in stderr
	}{
		{"NaN fails whatever --gate says", []string{f16, faultRef, "--gate", "cosine>=0.999"}, 1, "boundaries failed"},
		{"NaN fails the default gates", []string{f16, faultRef}, 1, "boundaries failed"},
		{"--allow-nonfinite lifts it", []string{f16, faultRef, "--gate", "cosine>=0.999", "--allow-nonfinite"}, 0, ""},
		{"a module typo", []string{faultClean, faultRef, "--module", "transfomer.*"}, 2, `--module "transfomer.*" matches nothing`},
		{"a step the trace lacks", []string{faultClean, faultRef, "--step", "3"}, 2, "--step 3 matches nothing"},
		{"a port typo", []string{faultClean, faultRef, "--port", "kw.hiden*"}, 2, `--port "kw.hiden*" matches nothing`},
		{"a gate glob typo", []string{faultClean, faultRef, "--gate", "tranformer.blocks.*:rel_rms<=1e-6"}, 2, `glob "tranformer.blocks.*" matches nothing`},
		{"no key pairs", []string{lm, faultRef}, 1, "no boundary compared"},
	} {
		code, out, stderr := zflow(t, append([]string{"diff"}, c.args...)...)
		if code != c.want || !strings.Contains(stderr, c.says) {
			t.Errorf("%s: exit %d, want %d; stderr %q, want it to say %q", c.name, code, c.want, stderr, c.says)
		}
		if c.name == "no key pairs" && !strings.Contains(out, "FAIL: no boundary compared") {
			t.Errorf("%s: the table does not say FAIL:\n%s", c.name, out)
		}
	}
	code, out, _ := zflow(t, "diff", lm, faultRef, "--format", "json")
	if code != 1 || !strings.Contains(out, `"pass": false`) {
		t.Errorf("no key pairs, json: exit %d, want 1 and \"pass\": false", code)
	}
	code, out, _ = zflow(t, "diff", lm, faultRef, "--format", "junit")
	if code != 1 || !strings.Contains(out, `failures="1"`) {
		t.Errorf("no key pairs, junit: exit %d, want 1 and a failure:\n%s", code, out)
	}
}

// TestDiffBF16WithoutDTypes: issue 12, item 4. A port trace that wrote
// bf16 bits without the manifest's dtypes entry holds uint16 tensors:
// paired with the reference's bf16 they fail, saying so, unless
// --ours-dtype bf16 declares them.
func TestDiffBF16WithoutDTypes(t *testing.T) {
	ours := filepath.Join(t.TempDir(), "no-dtypes.npz")
	mt := loadTrace(t, ditBF16)
	if len(mt.m.DTypes) == 0 {
		t.Fatal("the fixture names no bf16 tensor")
	}
	mt.m.DTypes = nil
	mt.writeRaw(t, ours)
	for _, c := range []struct {
		name string
		args []string
		want int
		says string
	}{
		{"uint16 against bf16", nil, 1, "dtypes differ: ours uint16, ref bfloat16"},
		{"declared bf16", []string{"--ours-dtype", "bf16"}, 0, ""},
		{"another dtype", []string{"--ours-dtype", "f16"}, 2, `--ours-dtype "f16"`},
	} {
		code, out, stderr := zflow(t, append([]string{"diff", ours, ditBF16, "--format", "json"}, c.args...)...)
		if code != c.want || !strings.Contains(out+stderr, c.says) {
			t.Errorf("%s: exit %d, want %d; want it to say %q; stderr %s", c.name, code, c.want, c.says, stderr)
		}
	}
}

// TestDiffAllClose: issue 12, item 5: --atol/--rtol and the allclose gate,
// with torch.testing.assert_close's test and report.
func TestDiffAllClose(t *testing.T) {
	for _, c := range []struct {
		name string
		args []string
		want int
		says string // in stdout or stderr
	}{
		{"f32 within assert_close's defaults", []string{faultClean, faultRef, "--atol", "1e-5", "--rtol", "1.3e-6"}, 0, "PASS"},
		{"the dtypes' defaults", []string{faultClean, faultRef, "--gate", "allclose"}, 0, "PASS"},
		{"a wrong activation", []string{faultAct, faultRef, "--gate", "allclose"}, 1,
			"allclose(atol=1e-05,rtol=1.3e-06): mismatched elements: 2029 / 2048 (99.1%), greatest absolute difference 0.1931 at index (0, 2, 48)"},
		{"bf16 bits against themselves, exactly", []string{ditBF16, ditBF16, "--atol", "0", "--rtol", "0"}, 0, "PASS"},
		{"bf16 against f32", []string{ditBF16, ditF32, "--step", "0", "--gate", "allclose(atol=1e-2,rtol=1e-2)"}, 1, "mismatched elements: 6 / 512 (1.17%)"},
		{"--atol without --rtol", []string{faultClean, faultRef, "--atol", "1e-5"}, 2, "give both or neither"},
		{"a bad parameter", []string{faultClean, faultRef, "--gate", "allclose(atol=x,rtol=0)"}, 2, "not a finite number"},
	} {
		code, out, stderr := zflow(t, append([]string{"diff"}, c.args...)...)
		if code != c.want || !strings.Contains(out+stderr, c.says) {
			t.Errorf("%s: exit %d, want %d; want it to say %q; stderr %s", c.name, code, c.want, c.says, stderr)
		}
	}
	code, out, _ := zflow(t, "diff", faultAct, faultRef, "--gate", "allclose", "--format", "json")
	var doc struct {
		FirstFailing struct {
			Checks []struct {
				AllClose *struct{ Mismatched, Total int } `json:"allclose"`
			}
		} `json:"first_failing"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil || code != 1 {
		t.Fatalf("json: exit %d, %v", code, err)
	}
	if cs := doc.FirstFailing.Checks; len(cs) == 0 || cs[0].AllClose == nil || cs[0].AllClose.Mismatched != 2029 || cs[0].AllClose.Total != 2048 {
		t.Errorf("json first_failing checks: %+v", cs)
	}
}

// TestWorkspaceConcurrentWriters: issue 12, item 11. Two writers at once
// (one setting the reference, one the semantics) both keep their field,
// round after round (37 of 100 rounds lost one before the lock).
func TestWorkspaceConcurrentWriters(t *testing.T) {
	ref, _ := filepath.Abs(faultRef)
	sem, _ := filepath.Abs(ditDoc)
	gen, _ := filepath.Abs(faultClean)
	t.Chdir(t.TempDir())
	for round := range 100 {
		if err := (&workspace{}).save(); err != nil {
			t.Fatal(err)
		}
		errs := make(chan error, 3)
		go func() { errs <- runWorkspace(io.Discard, workspaceOpts{ref: ref}, true, false, false) }()
		go func() { errs <- runWorkspace(io.Discard, workspaceOpts{semantics: sem}, false, true, false) }()
		go func() { errs <- recordWorkspace(func(w *workspace) { w.Generated = gen }) }()
		for range 3 {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
		w, err := loadWorkspace()
		if err != nil {
			t.Fatal(err)
		}
		if w.Reference == "" || w.Semantics == "" || w.Generated == "" {
			t.Fatalf("round %d: a field was lost: %+v", round, w)
		}
	}
}

// TestDiffUnpairedSummary: table output counts the unpaired boundaries and
// lists the first few unless --list-unpaired; JSON always lists them all.
func TestDiffUnpairedSummary(t *testing.T) {
	port := filepath.Join(fixtures, "ports", "dit-own-names.safetensors")
	base := []string{"diff", port, ditBF16, "--map", filepath.Join(fixtures, "ports", "dit-own-names.map"), "--step", "0"}
	code, js, _ := zflow(t, append(base, "--format", "json")...)
	var doc struct{ Unpaired []any }
	if err := json.Unmarshal([]byte(js), &doc); err != nil || code != 0 || len(doc.Unpaired) <= 5 {
		t.Fatalf("json: exit %d, %d unpaired, %v", code, len(doc.Unpaired), err)
	}
	n := len(doc.Unpaired)
	for _, c := range []struct {
		name   string
		extra  []string
		listed int
	}{
		{"summarised", nil, 5},
		{"--list-unpaired", []string{"--list-unpaired"}, n},
		{"markdown summarised", []string{"--format", "markdown"}, 5},
	} {
		code, out, stderr := zflow(t, append(base, c.extra...)...)
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", c.name, code, stderr)
		}
		listed := strings.Count(out, "only in ref ") + strings.Count(out, "only in ref: ")
		if listed != c.listed {
			t.Errorf("%s: %d listed, want %d", c.name, listed, c.listed)
		}
		if want := fmt.Sprintf("(%d: %d only in ref)", n, n); !strings.Contains(out, want) {
			t.Errorf("%s: no count %q", c.name, want)
		}
	}
}
