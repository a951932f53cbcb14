package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/zflow/zflow/reports"
	"github.com/zflow/zflow/trace"
)

type inspectOpts struct {
	step   int
	module string
	depth  int
	stats  bool
	format string
	json   bool // --json: --format json
}

func newInspectCmd() *cobra.Command {
	var o inspectOpts
	cmd := &cobra.Command{
		Use:   "inspect TRACE",
		Short: "Summarise a trace: producer, counts and the call tree with shapes and dtypes",
		Long: `inspect opens a trace, validates it (every key the manifest names exists,
ids and parents are consistent, shapes and dtypes agree) and prints the
producer, the counts and the call tree. It reads no tensor data unless
--stats asks for per-tensor statistics. --format json prints the summary as
a document (its "version" 1, the zflow_version; "format" is the trace's,
npz or safetensors).`,
		Example: `  zflow inspect fixtures/dit/dit-f32.npz
  zflow inspect fixtures/dit/dit-f32.npz --step 1 --module 'transformer.blocks.*' --depth 3
  zflow inspect fixtures/toy.npz --stats
  zflow inspect fixtures/toy.safetensors --format json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !cmd.Flags().Changed("step") {
				o.step = -1
			}
			var err error
			if o.format, err = resolveFormat(cmd, o.format, o.json, tableJSON); err != nil {
				return badInput(err)
			}
			u := newUI(cmd)
			return runInspect(cmd.OutOrStdout(), u, args[0], o)
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.step, "step", -1, "only calls of this sampler step")
	f.StringVar(&o.module, "module", "", "only calls whose module path matches this glob ('*' crosses dots)")
	f.IntVar(&o.depth, "depth", 0, "only calls less than this deep in the tree (0: all)")
	f.BoolVar(&o.stats, "stats", false, "read every listed tensor and print min, max, mean, std")
	addFormatFlag(cmd, &o.format, tableJSON, &o.json)
	return cmd
}

// inspectSummary is the --format json document. Its "format" is the
// trace's (npz or safetensors), as it was before documents had versions;
// version is the document's (1). Counts cover the whole trace; tree holds
// the calls the filters selected. The tree is not held: each call's
// summary is made as it is printed (eachCall), so that inspecting 10^6
// calls costs the manifest and one call's summary, not a copy of all.
type inspectSummary struct {
	Version      int             `json:"version"`
	ZflowVersion string          `json:"zflow_version"` // the tool's, as zflow --version prints it
	File         string          `json:"file"`
	Format       string          `json:"format"`
	FileBytes    int64           `json:"file_bytes"`
	Producer     map[string]any  `json:"producer"`
	Calls        int             `json:"calls"`
	Tensors      int             `json:"tensors"`
	Params       int             `json:"params"`
	Steps        int             `json:"steps"`
	StepIDs      []int           `json:"step_ids"`
	Bytes        int64           `json:"bytes"`
	Inputs       []tensorSummary `json:"inputs"`
	Outputs      []tensorSummary `json:"outputs"`
	// Keys lists a port trace's tensors (no call tree: its keys are its
	// boundaries), in file order; absent for a trace with a call tree.
	Keys []tensorSummary `json:"keys,omitempty"`
	Tree []callSummary   `json:"tree"` // last (writeInspectJSON streams it); always empty here: written from eachCall

	shown    int                                    // calls the filters select
	eachCall func(fn func(callSummary) error) error // the selected calls' summaries, in order
}

type callSummary struct {
	ID      int             `json:"id"`
	Step    *int            `json:"step"`
	Module  string          `json:"module"`
	Ordinal int             `json:"ordinal"`
	Type    string          `json:"type"`
	Depth   int             `json:"depth"`
	Parent  *int            `json:"parent"`
	Params  []string        `json:"params"`
	Ports   []tensorSummary `json:"ports"`
	Scalars map[string]any  `json:"scalars,omitempty"`
}

type tensorSummary struct {
	Name  string           `json:"name"`
	Key   string           `json:"key"`
	DType string           `json:"dtype"`
	Shape []int            `json:"shape"`
	Stats *reports.Summary `json:"stats,omitempty"`
}

func runInspect(w io.Writer, u ui, path string, o inspectOpts) error {
	tr, err := u.openPort(path) // a port's trace is worth a look too
	if err != nil {
		return badInput(err)
	}
	defer tr.Close()
	pg := u.progress("inspect")
	s, err := summarize(tr, o, pg.Steps("tensors read"))
	pg.Close()
	if err != nil {
		return err
	}
	if o.format == "json" {
		return writeInspectJSON(w, s)
	}
	return printSummary(w, s)
}

// writeInspectJSON writes s as writeJSON would with its tree filled, one
// call's summary at a time.
func writeInspectJSON(w io.Writer, s *inspectSummary) error {
	head := *s
	head.Tree = []callSummary{}
	b, err := json.MarshalIndent(&head, "", "  ")
	if err != nil {
		return err
	}
	const tail = "[]\n}"
	if !bytes.HasSuffix(b, []byte(tail)) {
		return fmt.Errorf("inspect: the summary's JSON does not end with its tree")
	}
	bw := bufio.NewWriter(w)
	bw.Write(b[:len(b)-len(tail)])
	if s.shown == 0 {
		bw.WriteString("[]")
	} else {
		bw.WriteString("[\n")
		n := 0
		err := s.eachCall(func(cs callSummary) error {
			b, err := json.MarshalIndent(cs, "    ", "  ")
			if err != nil {
				return err
			}
			if n > 0 {
				bw.WriteString(",\n")
			}
			n++
			bw.WriteString("    ")
			_, err = bw.Write(b)
			return err
		})
		if err != nil {
			return err
		}
		bw.WriteString("\n  ]")
	}
	bw.WriteString("\n}\n")
	return bw.Flush()
}

// summarizeTensor is reports.SummarizeTensor (a variable so that a test
// can count the reads).
var summarizeTensor = reports.SummarizeTensor

// summarize describes the trace; with --stats, progress (when not nil) is
// told after each tensor read how many of those the summary names are.
func summarize(tr *trace.Trace, o inspectOpts, progress func(done, total int)) (*inspectSummary, error) {
	m := tr.Manifest
	s := &inspectSummary{
		Version: 1, ZflowVersion: versionString(),
		File: tr.Path, Format: tr.Kind, FileBytes: tr.Size(), Producer: m.Producer,
		Calls: len(m.Calls), Tensors: len(tr.Keys()), Params: len(m.Params),
		StepIDs: tr.Steps(), Bytes: tr.TotalBytes(),
		Inputs: []tensorSummary{}, Outputs: []tensorSummary{}, Tree: []callSummary{},
	}
	if s.StepIDs == nil {
		s.StepIDs = []int{}
	}
	s.Steps = len(s.StepIDs)
	// Each tensor is read once, however many ports name it (a manifest
	// of 10^6 calls may name one key 10^6 times).
	stats := map[string]*reports.Summary{}
	f := trace.Filter{Module: o.module, MaxDepth: o.depth}
	if o.step >= 0 {
		f.Step = &o.step
	}
	toRead := 0 // distinct keys the summary names
	if o.stats && progress != nil {
		keys := map[string]bool{}
		for _, k := range m.Inputs {
			keys[k] = true
		}
		for _, k := range m.Outputs {
			keys[k] = true
		}
		if tr.Bare() {
			for _, k := range tr.Keys() {
				keys[k] = true
			}
		}
		if err := tr.Tree().Each(f, func(c *trace.Call) error {
			for _, p := range c.Tensors {
				keys[p.Key] = true
			}
			return nil
		}); err != nil {
			return nil, badInput(fmt.Errorf("--module %q: %w", o.module, err))
		}
		toRead = len(keys)
		progress(0, toRead)
	}
	describe := func(name, key string) (tensorSummary, error) {
		in, err := tr.Info(key)
		if err != nil {
			return tensorSummary{}, badInput(err)
		}
		ts := tensorSummary{Name: name, Key: key, DType: in.DType.String(), Shape: in.Shape}
		if o.stats {
			if st, ok := stats[key]; ok {
				ts.Stats = st
				return ts, nil
			}
			t, err := tr.Values(key)
			if err != nil {
				return ts, badInput(err)
			}
			sum, err := summarizeTensor(t)
			if err != nil {
				return ts, badInput(err)
			}
			ts.Stats = &sum
			stats[key] = &sum
			if toRead > 0 {
				progress(len(stats), toRead)
			}
		}
		return ts, nil
	}
	for _, sec := range []struct {
		m   map[string]string
		out *[]tensorSummary
	}{{m.Inputs, &s.Inputs}, {m.Outputs, &s.Outputs}} {
		for _, name := range sortedNames(sec.m) {
			ts, err := describe(name, sec.m[name])
			if err != nil {
				return nil, err
			}
			*sec.out = append(*sec.out, ts)
		}
	}
	if tr.Bare() {
		for _, k := range tr.Keys() {
			ts, err := describe(k, k)
			if err != nil {
				return nil, err
			}
			s.Keys = append(s.Keys, ts)
		}
	}
	// A first pass counts the selection and reads what --stats prints, so
	// that printing cannot fail half-way; the second makes each call's
	// summary as it is written.
	err := tr.Tree().Each(f, func(c *trace.Call) error {
		s.shown++
		for _, p := range c.Tensors {
			if _, err := describe(p.Name, p.Key); err != nil {
				return err
			}
		}
		return nil
	})
	var ee *exitError
	if err != nil && !errors.As(err, &ee) {
		return nil, badInput(fmt.Errorf("--module %q: %w", o.module, err))
	} else if err != nil {
		return nil, err
	}
	s.eachCall = func(fn func(callSummary) error) error {
		return tr.Tree().Each(f, func(c *trace.Call) error {
			cs := callSummary{ID: c.ID, Step: c.Step, Module: c.Module, Ordinal: c.Ordinal, Type: c.Type,
				Depth: tr.Tree().Depth(c.ID), Parent: c.Parent, Params: c.Params, Scalars: c.Scalars}
			for _, p := range c.Tensors {
				ts, err := describe(p.Name, p.Key)
				if err != nil {
					return err
				}
				cs.Ports = append(cs.Ports, ts)
			}
			return fn(cs)
		})
	}
	return s, nil
}

func printSummary(out io.Writer, s *inspectSummary) error {
	w := bufio.NewWriter(out)
	fmt.Fprintf(w, "%s  (%s, %s)\n", termSafe(s.File), s.Format, humanBytes(s.FileBytes))
	if line := producerLine(s.Producer); line != "" {
		fmt.Fprintf(w, "producer  %s\n", line)
	}
	fmt.Fprintf(w, "counts    %d calls, %d tensors, %d params, %d steps %v, %s of tensor data\n",
		s.Calls, s.Tensors, s.Params, s.Steps, s.StepIDs, humanBytes(s.Bytes))
	for _, sec := range []struct {
		title string
		ts    []tensorSummary
	}{{"inputs", s.Inputs}, {"outputs", s.Outputs}} {
		if len(sec.ts) == 0 {
			continue
		}
		fmt.Fprintf(w, "%s\n", sec.title)
		for _, t := range sec.ts {
			printTensor(w, "  ", t)
		}
	}
	if s.Keys != nil {
		fmt.Fprintf(w, "tensors (no call tree: a port trace, its keys its boundaries)\n")
		for _, t := range s.Keys {
			printTensor(w, "  ", t)
		}
		return w.Flush()
	}
	fmt.Fprintf(w, "calls (%d shown)\n", s.shown)
	err := s.eachCall(func(c callSummary) error {
		indent := strings.Repeat("  ", c.Depth+1)
		scope := "pre"
		if c.Step != nil {
			scope = fmt.Sprintf("s%d", *c.Step)
		}
		ord := ""
		if c.Ordinal > 0 {
			ord = fmt.Sprintf("#%d", c.Ordinal)
		}
		fmt.Fprintf(w, "%s%s %s%s  (%s)\n", indent, scope, termSafe(c.Module), ord, termSafe(c.Type))
		for _, p := range c.Ports {
			printTensor(w, indent+"    ", p)
		}
		return nil
	})
	if err != nil {
		return err
	}
	return w.Flush()
}

// termSafe escapes what a terminal would act on rather than show: control
// characters (an ESC sequence recolours the screen, a newline spoofs a
// line), DEL, C1 controls and invalid UTF-8, written as Go escapes.
func termSafe(s string) string {
	clean := true
	for _, r := range s {
		if r == utf8.RuneError || unicode.IsControl(r) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	q := strconv.Quote(s)
	return q[1 : len(q)-1]
}

// producerLine is "torch 2.11.0 on cuda, bfloat16", of the fields the
// producer has (a port's writer may give only its framework).
func producerLine(p map[string]any) string {
	str := func(k string) string {
		if v, ok := p[k]; ok && v != nil {
			return termSafe(fmt.Sprint(v))
		}
		return ""
	}
	line := strings.TrimSpace(str("framework") + " " + str("framework_version"))
	if d := str("device"); d != "" {
		line += " on " + d
	}
	if d := str("dtype"); d != "" {
		if line != "" {
			line += ", "
		}
		line += d
	}
	return strings.TrimSpace(line)
}

func printTensor(w io.Writer, indent string, t tensorSummary) {
	fmt.Fprintf(w, "%s%-28s %-8s %v", indent, termSafe(t.Name), t.DType, t.Shape)
	if st := t.Stats; st != nil {
		fmt.Fprintf(w, "  min %.4g max %.4g mean %.4g std %.4g", st.Min, st.Max, st.Mean, st.Std)
		if st.NaN+st.Inf > 0 {
			fmt.Fprintf(w, "  nan %d inf %d", st.NaN, st.Inf)
		}
	}
	fmt.Fprintln(w)
}

func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for v := n / unit; v >= unit; v /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

func sortedNames(m map[string]string) []string { return slices.Sorted(maps.Keys(m)) }
