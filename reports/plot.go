package reports

import (
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/zflow/zflow/internal/tempfiles"
)

// Plot files WritePlots writes.
const (
	PlotErrorByBoundary = "error-by-boundary.png"
	PlotChannels        = "channels.png"
)

var (
	colorRef   = color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff} // blue
	colorOurs  = color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff} // orange
	colorFail  = color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff} // red
	colorExact = color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff} // green
	colorNaN   = color.RGBA{R: 0x94, G: 0x67, B: 0xbd, A: 0xff} // purple
	colorGate  = color.RGBA{R: 0x55, G: 0x55, B: 0x55, A: 0xff}
	colorBreak = color.RGBA{R: 0xbb, G: 0xbb, B: 0xbb, A: 0xff}
)

// WritePlots writes PNG plots into dir (created if missing) and returns
// their paths: PlotErrorByBoundary, each compared boundary's rel-RMS along
// the execution order on a log scale (see errorPlot for how bit-exact and
// NaN/Inf boundaries are drawn), with its rel_rms gate threshold, the
// failing ones in red and the first failing one marked; and, when there is
// a finding, PlotChannels, the per-channel mean and std of both sides at
// the first failing boundary (for a one-row tensor, its values and the
// difference instead: a row has no spread). Each file is written to a
// temporary name and renamed into place.
func (r *DiffReport) WritePlots(dir string) (out []string, err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("plots: %w", err)
	}
	var wrote []string // apart from out, which a failing return clears
	defer func() {
		if err != nil {
			for _, p := range wrote {
				os.Remove(p) // nothing of a failed run is left
			}
		}
	}()
	p, legend, err := r.errorPlot()
	if err != nil {
		return nil, fmt.Errorf("plots: %s: %w", PlotErrorByBoundary, err)
	}
	path := filepath.Join(dir, PlotErrorByBoundary)
	if err := savePNG(path, 10*vg.Inch, 4.5*vg.Inch, legend, [][]*plot.Plot{{p}}); err != nil {
		return nil, fmt.Errorf("plots: %w", err)
	}
	out, wrote = append(out, path), append(wrote, path)
	if r.Finding != nil {
		top, bottom, err := r.Finding.channelPlots()
		if err != nil {
			return nil, fmt.Errorf("plots: %s: %w", PlotChannels, err)
		}
		path := filepath.Join(dir, PlotChannels)
		if err := savePNG(path, 10*vg.Inch, 7*vg.Inch, nil, [][]*plot.Plot{{top}, {bottom}}); err != nil {
			return nil, fmt.Errorf("plots: %w", err)
		}
		out, wrote = append(out, path), append(wrote, path)
	}
	return out, nil
}

// pointKind is how a boundary is drawn on the error plot.
type pointKind int

const (
	pointMeasured pointKind = iota // a rel-RMS > 0 of finite values
	pointExact                     // bit-exact: rel-RMS 0, no NaN/Inf
	pointNaNInf                    // NaN or Inf on a side: drawn as a cross
)

// plotPoint classifies a compared boundary: its kind and, for a cross,
// whether it has a finite rel-RMS to stand at (else it goes to the NaN/Inf
// band at the top).
func plotPoint(m *Metrics, mismatch int) (k pointKind, measured bool) {
	nonfinite := m.Ours.NaN+m.Ours.PosInf+m.Ours.NegInf+m.Ref.NaN+m.Ref.PosInf+m.Ref.NegInf+mismatch > 0
	finite := m.Finite > 0 && !math.IsNaN(m.RelRMS) && !math.IsInf(m.RelRMS, 0)
	switch {
	case nonfinite:
		return pointNaNInf, finite
	case !finite:
		return pointNaNInf, false
	case m.RelRMS == 0:
		return pointExact, true
	}
	return pointMeasured, true
}

// logAxis is the error plot's y axis: whole decades from lo to hi, a
// band a decade and a half below lo where bit-exact boundaries stand
// (rel-RMS 0 has no place on a log scale), and one as far above hi for
// boundaries whose rel-RMS is NaN or infinite.
type logAxis struct {
	lo, hi      float64 // decades: 10^k
	exact, nan  float64 // the bands' positions
	hasNaNBand  bool
	hasExactRow bool
}

func newLogAxis(values []float64, exact, nan bool) logAxis {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, v := range values {
		if v > 0 && !math.IsInf(v, 0) && !math.IsNaN(v) {
			lo, hi = min(lo, v), max(hi, v)
		}
	}
	if math.IsInf(lo, 1) {
		lo, hi = 1e-8, 1
	}
	a := logAxis{lo: math.Pow(10, math.Floor(math.Log10(lo))), hi: math.Pow(10, math.Ceil(math.Log10(hi)))}
	if a.hi <= a.lo {
		a.hi = a.lo * 10
	}
	a.exact, a.nan = a.lo/math.Pow(10, 1.5), a.hi*math.Pow(10, 1.5)
	a.hasExactRow, a.hasNaNBand = exact, nan
	return a
}

// bounds are the axis's min and max: the bands included, with room for
// a glyph above and below.
func (a logAxis) bounds() (float64, float64) {
	lo, hi := a.lo/2, a.hi*2
	if a.hasExactRow {
		lo = a.exact / 2
	}
	if a.hasNaNBand {
		hi = a.nan * 2
	}
	return lo, hi
}

// Ticks implements plot.Ticker: a labelled tick at each decade, minor ones
// between, and the bands labelled by what they hold.
func (a logAxis) Ticks(_, _ float64) []plot.Tick {
	var ticks []plot.Tick
	if a.hasExactRow {
		ticks = append(ticks, plot.Tick{Value: a.exact, Label: "bit-exact"})
	}
	kLo, kHi := int(math.Round(math.Log10(a.lo))), int(math.Round(math.Log10(a.hi)))
	for k := kLo; k <= kHi; k++ {
		v := math.Pow(10, float64(k))
		ticks = append(ticks, plot.Tick{Value: v, Label: decadeLabel(k)})
		if k == kHi {
			break
		}
		for i := 2; i < 10; i++ {
			ticks = append(ticks, plot.Tick{Value: float64(i) * v})
		}
	}
	if a.hasNaNBand {
		ticks = append(ticks, plot.Tick{Value: a.nan, Label: "NaN/Inf"})
	}
	return ticks
}

// decadeLabel is how 10^k is written on an axis: 0.01, 0.1, 1, 10, 100
// near 1, 1e-4 or 1e+05 style further out; never a float's binary
// residue (9.999999999999999e-05).
func decadeLabel(k int) string {
	if k >= -2 && k <= 2 {
		return strconv.FormatFloat(math.Pow(10, float64(k)), 'f', -1, 64)
	}
	return "1e" + strconv.Itoa(k)
}

// errorSeries is one glyph series of the error plot.
type errorSeries struct {
	label string
	color color.Color
	shape draw.GlyphDrawer
	xys   plotter.XYs
}

// errorFigure is what the error plot draws: the y axis, the gate
// thresholds and the series, each point placed (bands included).
type errorFigure struct {
	axis   logAxis
	n      int // boundaries along x
	gate   plotter.XYs
	series []errorSeries
}

// errorPoints places each compared boundary: a pass as a blue circle at
// its rel-RMS, a failure as a red one; a bit-exact boundary (rel-RMS 0)
// as a green triangle on its own row at the bottom, below a break in the
// axis (it is not a measured value); a boundary with NaN or Inf on a side
// as a purple cross, at the rel-RMS of its finite values where it has
// one, else on the NaN/Inf row at the top.
func (r *DiffReport) errorPoints() errorFigure {
	type point struct {
		x, y     float64
		kind     pointKind
		measured bool
		pass     bool
	}
	var pts []point
	var values []float64
	fig := errorFigure{n: len(r.Boundaries)}
	hasExact, hasNaNBand := false, false
	for i, d := range r.Boundaries {
		for _, c := range d.Checks {
			if c.Gate.Metric == "rel_rms" && c.Threshold > 0 && !math.IsInf(c.Threshold, 0) {
				fig.gate = append(fig.gate, plotter.XY{X: float64(i), Y: c.Threshold})
				values = append(values, c.Threshold)
			}
		}
		m := d.Metrics
		if m == nil {
			continue
		}
		kind, measured := plotPoint(m, d.NonFiniteMismatch)
		switch {
		case measured && m.RelRMS > 0:
			values = append(values, m.RelRMS)
		case measured:
			hasExact = true
		default:
			hasNaNBand = true
		}
		pts = append(pts, point{x: float64(i), y: m.RelRMS, kind: kind, measured: measured, pass: d.Pass})
	}
	fig.axis = newLogAxis(values, hasExact, hasNaNBand)
	for _, s := range []struct {
		errorSeries
		keep func(point) bool
	}{
		{errorSeries{label: "pass", color: colorRef, shape: draw.CircleGlyph{}},
			func(q point) bool { return q.kind == pointMeasured && q.pass }},
		{errorSeries{label: "fail", color: colorFail, shape: draw.CircleGlyph{}},
			func(q point) bool { return q.kind == pointMeasured && !q.pass }},
		{errorSeries{label: "bit-exact (rel-RMS 0), on its own row", color: colorExact, shape: draw.TriangleGlyph{}},
			func(q point) bool { return q.kind == pointExact && q.pass }},
		{errorSeries{label: "bit-exact but failing a gate", color: colorFail, shape: draw.TriangleGlyph{}},
			func(q point) bool { return q.kind == pointExact && !q.pass }},
		{errorSeries{label: "NaN/Inf on a side (at its finite values' rel-RMS, or on the NaN/Inf row)", color: colorNaN, shape: draw.CrossGlyph{}},
			func(q point) bool { return q.kind == pointNaNInf }},
	} {
		for _, q := range pts {
			if !s.keep(q) {
				continue
			}
			y := q.y
			switch {
			case !q.measured:
				y = fig.axis.nan
			case y == 0:
				y = fig.axis.exact
			}
			s.xys = append(s.xys, plotter.XY{X: q.x, Y: y})
		}
		if len(s.xys) > 0 {
			fig.series = append(fig.series, s.errorSeries)
		}
	}
	return fig
}

// xRange is the error plot's x axis: a boundary's width beyond the first
// and the last, so that no glyph is cut at the edge.
func (f errorFigure) xRange() (float64, float64) { return -1, float64(max(f.n, 1)) }

// indexTicks marks an axis of n indexes (boundaries, channels) drawn
// with a margin either side: the default ticks of [0, n-1], none in the
// margins (there is no boundary -1).
func indexTicks(n int) plot.Ticker {
	return plot.TickerFunc(func(_, _ float64) []plot.Tick {
		return plot.DefaultTicks{}.Ticks(0, float64(max(n-1, 1)))
	})
}

// errorPlot draws errorPoints on a log scale. The legend is returned
// apart, to be drawn under the plot where it covers nothing.
func (r *DiffReport) errorPlot() (*plot.Plot, *plot.Legend, error) {
	fig := r.errorPoints()
	ax := fig.axis
	p := plot.New()
	p.Title.Text = fmt.Sprintf("rel-RMS by boundary: %s against %s", filepath.Base(r.Ours), filepath.Base(r.Ref))
	p.X.Label.Text = "boundary (execution order)"
	p.Y.Label.Text = "rel-RMS"
	p.Y.Scale = plot.LogScale{}
	p.Y.Min, p.Y.Max = ax.bounds()
	p.Y.Tick.Marker = ax
	p.X.Min, p.X.Max = fig.xRange()
	p.X.Tick.Marker = indexTicks(fig.n)

	legend := plot.NewLegend()
	legend.Left = true
	// axis breaks: a faint line between each band and the measured decades
	for _, brk := range []struct {
		on bool
		y  float64
	}{{ax.hasExactRow, math.Sqrt(ax.exact * ax.lo)}, {ax.hasNaNBand, math.Sqrt(ax.nan * ax.hi)}} {
		if !brk.on {
			continue
		}
		l, err := plotter.NewLine(plotter.XYs{{X: p.X.Min, Y: brk.y}, {X: p.X.Max, Y: brk.y}})
		if err != nil {
			return nil, nil, err
		}
		l.LineStyle.Color = colorBreak
		l.LineStyle.Dashes = []vg.Length{vg.Points(1), vg.Points(3)}
		p.Add(l)
	}
	if len(fig.gate) > 0 {
		l, err := plotter.NewLine(fig.gate)
		if err != nil {
			return nil, nil, err
		}
		l.LineStyle.Color = colorGate
		l.LineStyle.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		p.Add(l)
		legend.Add("rel_rms gate (per boundary's dtype)", l)
	}
	for _, s := range fig.series {
		sc, err := plotter.NewScatter(s.xys)
		if err != nil {
			return nil, nil, err
		}
		sc.GlyphStyle.Color = s.color
		sc.GlyphStyle.Radius = vg.Points(2.5)
		sc.GlyphStyle.Shape = s.shape
		p.Add(sc)
		legend.Add(s.label, sc)
	}
	if r.FirstFailing >= 0 {
		x := float64(r.FirstFailing)
		l, err := plotter.NewLine(plotter.XYs{{X: x, Y: p.Y.Min}, {X: x, Y: p.Y.Max}})
		if err != nil {
			return nil, nil, err
		}
		l.LineStyle.Color = colorFail
		p.Add(l)
		legend.Add(fmt.Sprintf("first failing: #%d %s", r.FirstFailing, r.Boundaries[r.FirstFailing].Key), l)
	}
	return p, &legend, nil
}

// channelPanel is one panel of PlotChannels.
type channelPanel struct {
	title, ylabel string
	lines         []channelLine
}

// channelPanels are the two panels of PlotChannels: per-channel mean and
// std of both sides; for a one-row tensor (whose per-channel std is 0
// everywhere) the values themselves and ours - ref.
func (f *Finding) channelPanels() [2]channelPanel {
	c := f.Channels
	sig := f.Diagnosis.Signature.String()
	get := func(s []ChannelStat, fn func(ChannelStat) float64) []float64 {
		out := make([]float64, len(s))
		for i, st := range s {
			out[i] = fn(st)
		}
		return out
	}
	mean := func(s ChannelStat) float64 { return s.Mean }
	if f.OneRow {
		// one row: a channel's mean is its value, its std 0
		return [2]channelPanel{
			{fmt.Sprintf("%s: values (one row, signature: %s)", f.Key, sig), "value", []channelLine{
				{"ref", colorRef, get(c.Ref.Channels, mean)}, {"ours", colorOurs, get(c.Ours.Channels, mean)}}},
			{fmt.Sprintf("%s: ours - ref (a row has no per-channel spread)", f.Key), "ours - ref", []channelLine{
				{"ours - ref", colorFail, slices.Clone(c.MeanDiff)}, {"0", colorGate, make([]float64, len(c.MeanDiff))}}},
		}
	}
	std := func(s ChannelStat) float64 { return s.Std }
	return [2]channelPanel{
		{fmt.Sprintf("%s: per-channel mean over %d rows (signature: %s)", f.Key, f.Rows, sig), "mean", []channelLine{
			{"ref", colorRef, get(c.Ref.Channels, mean)}, {"ours", colorOurs, get(c.Ours.Channels, mean)}}},
		{fmt.Sprintf("%s: per-channel std over %d rows", f.Key, f.Rows), "std", []channelLine{
			{"ref", colorRef, get(c.Ref.Channels, std)}, {"ours", colorOurs, get(c.Ours.Channels, std)}}},
	}
}

// yRange is a panel's y axis: its finite values with a margin below and
// room for the legend above; ok is false when it has no finite value.
func (cp channelPanel) yRange() (lo, hi float64, ok bool) {
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, ln := range cp.lines {
		for _, v := range ln.values {
			if !math.IsNaN(v) && !math.IsInf(v, 0) {
				lo, hi = min(lo, v), max(hi, v)
			}
		}
	}
	if math.IsInf(lo, 1) {
		return 0, 0, false
	}
	pad := 0.05 * (hi - lo)
	if pad == 0 {
		pad = max(0.05*math.Abs(hi), 1e-6)
	}
	return lo - pad, hi + 4*pad, true
}

// channelPlots draws channelPanels.
func (f *Finding) channelPlots() (top, bottom *plot.Plot, err error) {
	var out [2]*plot.Plot
	for k, cp := range f.channelPanels() {
		p := plot.New()
		p.Title.Text = cp.title
		p.X.Label.Text = "channel"
		p.Y.Label.Text = cp.ylabel
		for _, ln := range cp.lines {
			var xys plotter.XYs
			for i, v := range ln.values {
				if !math.IsNaN(v) && !math.IsInf(v, 0) { // a NaN/Inf channel: a gap in the line
					xys = append(xys, plotter.XY{X: float64(i), Y: v})
				}
			}
			if len(xys) == 0 {
				continue
			}
			l, err := plotter.NewLine(xys)
			if err != nil {
				return nil, nil, err
			}
			l.LineStyle.Color = ln.color
			l.LineStyle.Width = vg.Points(1)
			p.Add(l)
			p.Legend.Add(ln.label, l)
		}
		p.Legend.Top = true
		p.X.Min, p.X.Max = -1, float64(max(f.NChannels, 1))
		p.X.Tick.Marker = indexTicks(f.NChannels)
		if lo, hi, ok := cp.yRange(); ok {
			p.Y.Min, p.Y.Max = lo, hi
		}
		out[k] = p
	}
	return out[0], out[1], nil
}

// channelLine is one line of a channel panel.
type channelLine struct {
	label  string
	color  color.Color
	values []float64
}

// savePNG draws a grid of plots into one PNG, with legend (when not nil)
// in a strip under them, atomically.
func savePNG(path string, w, h vg.Length, legend *plot.Legend, grid [][]*plot.Plot) error {
	img := vgimg.New(w, h)
	dc := draw.New(img)
	if legend != nil {
		r := legend.Rectangle(dc)
		strip := r.Max.Y - r.Min.Y + vg.Points(12)
		lc := draw.Crop(dc, vg.Points(48), 0, vg.Points(6), -(h - strip))
		legend.Draw(lc)
		dc = draw.Crop(dc, 0, 0, strip, 0)
	}
	tiles := draw.Tiles{Rows: len(grid), Cols: len(grid[0]), PadY: vg.Points(8), PadTop: vg.Points(4),
		PadBottom: vg.Points(4), PadLeft: vg.Points(4), PadRight: vg.Points(12)}
	canvases := plot.Align(grid, tiles, dc)
	for i, row := range grid {
		for j, p := range row {
			p.Draw(canvases[i][j])
		}
	}
	tmp, err := tempfiles.Create(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	defer tempfiles.Done(tmp.Name())
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(tmp); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return nil
}
