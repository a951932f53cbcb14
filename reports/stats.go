package reports

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/zflow/zflow/internal/version"
	"github.com/zflow/zflow/internal/workers"
	"github.com/zflow/zflow/trace"
)

// TensorStats is one boundary's statistics for zflow stats.
type TensorStats struct {
	Boundary
	DType string
	Shape []int
	Summary
	// Channels, with per-channel statistics asked for, over rows ×
	// channels (channels: the last dimension, real and imaginary parts
	// interleaved for complex dtypes).
	Channels  *ChannelSummary
	NChannels int
	Error     string // why the tensor could not be read as float32 (then nothing else is set)
}

// StatsReport is zflow stats' result.
type StatsReport struct {
	File       string
	Selection  Selection
	PerChannel bool
	Tensors    []TensorStats
}

// statsChunk bounds the values widened at a time for per-channel
// statistics (whole rows, at least one).
const statsChunk = 1 << 16

// StatsOptions configure Stats.
type StatsOptions struct {
	Selection
	PerChannel bool // per-channel statistics too
	Workers    int  // 0: runtime.GOMAXPROCS(0)
	// Progress, when set, is told after each tensor read how many of the
	// selected tensors are done (calls are serialised; the count reaches
	// the total).
	Progress func(done, total int)
}

// Stats computes per-tensor (and, if o.PerChannel, per-channel)
// statistics of the selected boundaries of tr, in execution order,
// streaming each tensor, one per worker at a time. A tensor whose values
// float32 cannot hold (float64 beyond its range or precision, large
// integers) gets an Error instead of statistics; other read errors are
// returned.
func Stats(tr *trace.Trace, o StatsOptions) (*StatsReport, error) {
	bs, err := Boundaries(tr, o.Selection)
	if err != nil {
		return nil, err
	}
	r := &StatsReport{File: tr.Path, Selection: o.Selection, PerChannel: o.PerChannel, Tensors: make([]TensorStats, len(bs))}
	nw := o.Workers
	if nw <= 0 {
		nw = runtime.GOMAXPROCS(0)
	}
	var mu sync.Mutex
	finished := 0
	var next atomic.Int64
	var g workers.Group
	errs := make([]error, len(bs))
	for range min(nw, max(1, len(bs))) {
		g.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= len(bs) {
					return
				}
				r.Tensors[i], errs[i] = tensorStats(tr, bs[i], o.PerChannel)
				if o.Progress != nil {
					mu.Lock()
					finished++
					o.Progress(finished, len(bs))
					mu.Unlock()
				}
			}
		})
	}
	g.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return r, nil
}

func tensorStats(tr *trace.Trace, b Boundary, perChannel bool) (TensorStats, error) {
	in, err := tr.Info(b.Key)
	if err != nil {
		return TensorStats{}, err
	}
	ts := TensorStats{Boundary: b, DType: in.DType.String(), Shape: in.Shape}
	t, err := tr.Values(b.Key)
	if err != nil {
		return ts, err
	}
	defer release(t, 0, int(t.Scalars()))
	if ts.Summary, err = SummarizeTensor(t); err != nil {
		if isInexact(err) {
			return TensorStats{Boundary: b, DType: ts.DType, Shape: ts.Shape, Error: err.Error()}, nil
		}
		return ts, err
	}
	if !perChannel {
		return ts, nil
	}
	C := rowLen(in)
	ts.NChannels = C
	acc, err := NewChannelAccumulator(C)
	if err != nil {
		return ts, err
	}
	n := t.Scalars()
	if v, ok := t.Float32View(); ok {
		if err := acc.Add(v); err != nil {
			return ts, err
		}
	} else {
		buf := make([]float32, max(1, statsChunk/C)*C)
		for from := int64(0); from < n; from += int64(len(buf)) {
			chunk := buf[:min(int64(len(buf)), n-from)]
			if err := t.ReadFloat32(chunk, from); err != nil {
				return ts, err
			}
			if err := acc.Add(chunk); err != nil {
				return ts, err
			}
		}
	}
	s := acc.Result()
	ts.Channels = &s
	return ts, nil
}

func isInexact(err error) bool { return errors.Is(err, trace.ErrInexact) }

// StatsDoc is the --format json document of zflow stats, version 1.
type (
	StatsDoc struct {
		Format       string          `json:"format"` // "zflow-stats"
		Version      int             `json:"version"`
		ZflowVersion string          `json:"zflow_version"` // the tool's, as zflow --version prints it
		File         string          `json:"file"`
		Selection    SelectionDoc    `json:"selection"`
		Tensors      []TensorStatDoc `json:"tensors"`
	}
	TensorStatDoc struct {
		Index    int              `json:"index"`
		Key      string           `json:"key"`
		Scope    string           `json:"scope"`
		Module   string           `json:"module"`
		Ordinal  int              `json:"ordinal"`
		Port     string           `json:"port"`
		DType    string           `json:"dtype"`
		Shape    []int            `json:"shape"`
		Count    int64            `json:"count"` // finite values
		Mean     Float            `json:"mean"`
		Std      Float            `json:"std"`
		Min      Float            `json:"min"`
		Max      Float            `json:"max"`
		NaN      int64            `json:"nan"`
		Inf      int64            `json:"inf"`
		Channels *ChannelStatsDoc `json:"channels,omitempty"`
		Error    string           `json:"error,omitempty"`
	}
	ChannelStatsDoc struct {
		Count      int              `json:"count"`
		Rows       int64            `json:"rows"`
		MeanRange  RangeJSON        `json:"mean_range"`
		StdRange   RangeJSON        `json:"std_range"`
		NonFinite  int              `json:"non_finite"`
		PerChannel []ChannelStatDoc `json:"per_channel"`
	}
	ChannelStatDoc struct {
		N    int   `json:"n"`
		Mean Float `json:"mean"`
		Std  Float `json:"std"`
	}
)

// Document is the report as the JSON contract lays it out.
func (r *StatsReport) Document() StatsDoc {
	doc := StatsDoc{Format: "zflow-stats", Version: 1, ZflowVersion: version.String(), File: r.File,
		Selection: SelectionDoc{Step: r.Selection.Step, Module: r.Selection.Module, Port: r.Selection.Port},
		Tensors:   make([]TensorStatDoc, len(r.Tensors))}
	for i, t := range r.Tensors {
		d := TensorStatDoc{Index: i, Key: t.Key, Scope: t.Scope, Module: t.Module, Ordinal: t.Ordinal, Port: t.Port,
			DType: t.DType, Shape: t.Shape, Count: t.Count, Mean: Float(t.Mean), Std: Float(t.Std),
			Min: Float(t.Min), Max: Float(t.Max), NaN: t.NaN, Inf: t.Inf, Error: t.Error}
		if c := t.Channels; c != nil {
			cd := &ChannelStatsDoc{Count: t.NChannels, MeanRange: rangeJSON(c.Mean), StdRange: rangeJSON(c.Std),
				NonFinite: c.NonFinite, PerChannel: make([]ChannelStatDoc, len(c.Channels))}
			if t.NChannels > 0 {
				cd.Rows = (t.Count + t.NaN + t.Inf) / int64(t.NChannels)
			}
			for j, s := range c.Channels {
				cd.PerChannel[j] = ChannelStatDoc{N: s.N, Mean: Float(s.Mean), Std: Float(s.Std)}
			}
			d.Channels = cd
		}
		doc.Tensors[i] = d
	}
	return doc
}

func (r *StatsReport) rows(md bool) ([]string, string, [][]string) {
	header := []string{"#", "tensor", "dtype", "shape", "count", "mean", "std", "min", "max", "nan/inf"}
	align := "rllrrrrrrr"
	if r.PerChannel {
		header = append(header, "channels", "per-channel mean range", "per-channel std range")
		align += "rll"
	}
	var rows [][]string
	for i := range r.Tensors {
		t := &r.Tensors[i]
		key := t.Key
		if md {
			key = "`" + strings.ReplaceAll(key, "|", `\|`) + "`"
		}
		row := []string{strconv.Itoa(i), key, t.DType, shapeString(t.Shape)}
		if t.Error != "" {
			row = append(row, "error: "+t.Error)
			for len(row) < len(header) {
				row = append(row, "")
			}
			rows = append(rows, row)
			continue
		}
		row = append(row, strconv.FormatInt(t.Count, 10), num(t.Mean), num(t.Std), num(t.Min), num(t.Max),
			fmt.Sprintf("%d/%d", t.NaN, t.Inf))
		if r.PerChannel {
			row = append(row, strconv.Itoa(t.NChannels), RangeString(t.Channels.Mean), PositiveRangeString(t.Channels.Std))
		}
		rows = append(rows, row)
	}
	return header, align, rows
}

// WriteTable writes the statistics for a terminal.
func (r *StatsReport) WriteTable(w io.Writer) error {
	fmt.Fprintf(w, "zflow stats: %s (%d tensors; statistics over finite values, std divided by n)\n", r.File, len(r.Tensors))
	header, align, rows := r.rows(false)
	if len(rows) == 0 {
		return nil
	}
	return writeTable(w, false, align, header, rows)
}

// WriteMarkdown writes the statistics as a Markdown table.
func (r *StatsReport) WriteMarkdown(w io.Writer) error {
	fmt.Fprintf(w, "## zflow stats: `%s`\n\n%d tensors; statistics over finite values (std divided by n).\n\n", r.File, len(r.Tensors))
	header, align, rows := r.rows(true)
	if len(rows) == 0 {
		return nil
	}
	return writeTable(w, true, align, header, rows)
}

// WriteCSV writes one row per tensor; per-channel ranges are four columns
// (empty without per-channel statistics).
func (r *StatsReport) WriteCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	header := []string{"index", "key", "scope", "module", "ordinal", "port", "dtype", "shape", "count", "mean", "std",
		"min", "max", "nan", "inf", "channels", "channel_mean_min", "channel_mean_max", "channel_std_min", "channel_std_max", "error"}
	if err := cw.Write(header); err != nil {
		return err
	}
	f := func(x float64) string {
		b, _ := Float(x).MarshalJSON()
		return strings.Trim(string(b), `"`)
	}
	for i := range r.Tensors {
		t := &r.Tensors[i]
		shape := make([]string, len(t.Shape))
		for j, d := range t.Shape {
			shape[j] = strconv.Itoa(d)
		}
		row := []string{strconv.Itoa(i), t.Key, t.Scope, t.Module, strconv.Itoa(t.Ordinal), t.Port, t.DType, strings.Join(shape, "x")}
		if t.Error != "" {
			row = append(row, make([]string, 12)...)
		} else {
			row = append(row, strconv.FormatInt(t.Count, 10), f(t.Mean), f(t.Std), f(t.Min), f(t.Max),
				strconv.FormatInt(t.NaN, 10), strconv.FormatInt(t.Inf, 10))
			if c := t.Channels; c != nil {
				row = append(row, strconv.Itoa(t.NChannels), f(c.Mean.Min), f(c.Mean.Max), f(c.Std.Min), f(c.Std.Max))
			} else {
				row = append(row, "", "", "", "", "")
			}
		}
		row = append(row, t.Error)
		if err := cw.Write(row); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}
