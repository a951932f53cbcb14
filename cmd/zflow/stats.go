package main

import (
	"fmt"
	"io"
	"slices"

	"github.com/spf13/cobra"

	"github.com/zflow/zflow/reports"
)

type statsOpts struct {
	step         int
	module, port string
	perChannel   bool
	format       string
	jobs         int
}

func newStatsCmd() *cobra.Command {
	var o statsOpts
	cmd := &cobra.Command{
		Use:   "stats TRACE",
		Short: "Per-tensor and per-channel statistics of a trace's boundaries",
		Long: `stats reads the selected boundaries of a trace, in execution order (as zflow
diff orders them), and prints each tensor's count, mean, std, min and max over
its finite values, with its NaN and Inf counted apart. --per-channel adds,
per tensor, the statistics of each channel (the last dimension: rows ×
channels) and their ranges over the channels, in the form
"per-channel mean range [-2.59, +4.65], std range [1.40, 1.91]".
Standard deviations divide by n (NumPy's default; PyTorch's std divides by
n-1). A tensor that float32 cannot hold (float64 values beyond it, large
integers) is listed with an error instead.`,
		Example: `  zflow stats fixtures/dit/dit-bf16.npz --step 0 --module 'transformer.blocks.0*'
  zflow stats fixtures/dit/dit-f32.npz --step 2 --module 'transformer.blocks.1' --per-channel
  zflow stats fixtures/faults/ref.npz --port 'out*' --per-channel --format json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !cmd.Flags().Changed("step") {
				o.step = -1
			}
			return runStats(cmd.OutOrStdout(), newUI(cmd), args[0], o)
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.step, "step", -1, "only boundaries of this sampler step")
	f.StringVar(&o.module, "module", "", "only calls whose module path matches this glob ('*' crosses dots)")
	f.StringVar(&o.port, "port", "", "only ports (and inputs/outputs) whose name matches this glob")
	f.BoolVar(&o.perChannel, "per-channel", false, "add per-channel statistics (channels: the last dimension)")
	addFormatFlag(cmd, &o.format, statsFormats, nil)
	f.IntVar(&o.jobs, "jobs", 0, "worker goroutines, 1 to 1024 (default: one per core)")
	return cmd
}

func runStats(w io.Writer, u ui, path string, o statsOpts) error {
	if !slices.Contains(statsFormats, o.format) {
		return badInput(fmt.Errorf("--format %q: want %s", o.format, orList(statsFormats)))
	}
	sel := reports.Selection{Module: o.module, Port: o.port}
	if o.step >= 0 {
		sel.Step = &o.step
	}
	if err := sel.Validate(); err != nil {
		return badInput(err)
	}
	tr, err := u.openPort(path) // a port's trace: its keys are its boundaries
	if err != nil {
		return badInput(err)
	}
	defer tr.Close()
	if tr.Bare() {
		fmt.Fprintf(u.info(), "note: %s has no call tree: its %d keys are its boundaries, in file order\n", path, len(tr.Keys()))
	}
	pg := u.progress("stats")
	r, err := reports.Stats(tr, reports.StatsOptions{Selection: sel, PerChannel: o.perChannel, Workers: o.jobs,
		Progress: pg.Steps("tensors read")})
	pg.Close()
	if err != nil {
		return badInput(err)
	}
	switch o.format {
	case "json":
		return writeJSON(w, r.Document())
	case "markdown":
		return r.WriteMarkdown(w)
	case "csv":
		return r.WriteCSV(w)
	}
	return r.WriteTable(w)
}
