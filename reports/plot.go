package reports

import (
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// Plot files WritePlots writes.
const (
	PlotErrorByBoundary = "error-by-boundary.png"
	PlotChannels        = "channels.png"
)

var (
	colorRef  = color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff} // blue
	colorOurs = color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff} // orange
	colorFail = color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff} // red
	colorGate = color.RGBA{R: 0x55, G: 0x55, B: 0x55, A: 0xff}
)

// WritePlots writes PNG plots into dir (created if missing) and returns
// their paths: PlotErrorByBoundary, each compared boundary's rel-RMS along
// the execution order on a log scale, with its rel_rms gate threshold, the
// failing ones in red and the first failing one marked; and, when there is
// a finding, PlotChannels, the per-channel mean and std of both sides at
// the first failing boundary. A rel-RMS of 0 (bit-exact) is drawn at the
// bottom of the axis, a decade below the smallest non-zero value or
// threshold. Each
// file is written to a temporary name and renamed into place.
func (r *DiffReport) WritePlots(dir string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var out []string
	p, err := r.errorPlot()
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, PlotErrorByBoundary)
	if err := savePNG(path, 10*vg.Inch, 4*vg.Inch, [][]*plot.Plot{{p}}); err != nil {
		return nil, err
	}
	out = append(out, path)
	if r.Finding != nil {
		mean, std, err := r.Finding.channelPlots()
		if err != nil {
			return nil, err
		}
		path := filepath.Join(dir, PlotChannels)
		if err := savePNG(path, 10*vg.Inch, 7*vg.Inch, [][]*plot.Plot{{mean}, {std}}); err != nil {
			return nil, err
		}
		out = append(out, path)
	}
	return out, nil
}

func (r *DiffReport) errorPlot() (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("rel-RMS by boundary: %s against %s", filepath.Base(r.Ours), filepath.Base(r.Ref))
	p.X.Label.Text = "boundary (execution order)"
	p.Y.Label.Text = "rel-RMS (bit-exact at the bottom)"
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	floor := math.Inf(1)
	for _, d := range r.Boundaries {
		if m := d.Metrics; m != nil && m.RelRMS > 0 && !math.IsInf(m.RelRMS, 0) {
			floor = min(floor, m.RelRMS)
		}
		for _, c := range d.Checks {
			if c.Gate.Metric == "rel_rms" && c.Threshold > 0 {
				floor = min(floor, c.Threshold)
			}
		}
	}
	if math.IsInf(floor, 1) {
		floor = 1e-8
	}
	floor /= 10
	var pass, fail, gate plotter.XYs
	top := floor * 10
	for i, d := range r.Boundaries {
		m := d.Metrics
		if m == nil {
			continue
		}
		y := m.RelRMS
		switch {
		case y <= 0:
			y = floor
		case math.IsInf(y, 1):
			y = 10 * top
		}
		top = max(top, y)
		if d.Pass {
			pass = append(pass, plotter.XY{X: float64(i), Y: y})
		} else {
			fail = append(fail, plotter.XY{X: float64(i), Y: y})
		}
		for _, c := range d.Checks {
			if c.Gate.Metric == "rel_rms" && c.Threshold > 0 {
				gate = append(gate, plotter.XY{X: float64(i), Y: c.Threshold})
				top = max(top, c.Threshold)
			}
		}
	}
	if len(gate) > 0 {
		l, err := plotter.NewLine(gate)
		if err != nil {
			return nil, err
		}
		l.LineStyle.Color = colorGate
		l.LineStyle.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		p.Add(l)
		p.Legend.Add("rel_rms gate", l)
	}
	for _, s := range []struct {
		xys   plotter.XYs
		c     color.Color
		label string
	}{{pass, colorRef, "pass"}, {fail, colorFail, "fail"}} {
		if len(s.xys) == 0 {
			continue
		}
		sc, err := plotter.NewScatter(s.xys)
		if err != nil {
			return nil, err
		}
		sc.GlyphStyle.Color = s.c
		sc.GlyphStyle.Radius = vg.Points(2)
		sc.GlyphStyle.Shape = draw.CircleGlyph{}
		p.Add(sc)
		p.Legend.Add(s.label, sc)
	}
	if r.FirstFailing >= 0 {
		x := float64(r.FirstFailing)
		l, err := plotter.NewLine(plotter.XYs{{X: x, Y: floor}, {X: x, Y: top * 10}})
		if err != nil {
			return nil, err
		}
		l.LineStyle.Color = colorFail
		p.Add(l)
		p.Legend.Add("first failing: "+r.Boundaries[r.FirstFailing].Key, l)
	}
	p.Y.Min, p.Y.Max = floor, top*10
	p.Legend.Top, p.Legend.Left = true, true
	return p, nil
}

func (f *Finding) channelPlots() (mean, std *plot.Plot, err error) {
	c := f.Channels
	series := func(title, ylabel string, get func(ChannelStat) float64) (*plot.Plot, error) {
		p := plot.New()
		p.Title.Text = title
		p.X.Label.Text = "channel"
		p.Y.Label.Text = ylabel
		for _, s := range []struct {
			stats []ChannelStat
			c     color.Color
			label string
		}{{c.Ref.Channels, colorRef, "ref"}, {c.Ours.Channels, colorOurs, "ours"}} {
			xys := make(plotter.XYs, len(s.stats))
			for i, st := range s.stats {
				xys[i] = plotter.XY{X: float64(i), Y: get(st)}
			}
			l, err := plotter.NewLine(xys)
			if err != nil {
				return nil, err
			}
			l.LineStyle.Color = s.c
			l.LineStyle.Width = vg.Points(1)
			p.Add(l)
			p.Legend.Add(s.label, l)
		}
		p.Legend.Top = true
		return p, nil
	}
	sig := f.Diagnosis.Signature.String()
	if mean, err = series(fmt.Sprintf("%s: per-channel mean (signature: %s)", f.Key, sig), "mean",
		func(s ChannelStat) float64 { return s.Mean }); err != nil {
		return nil, nil, err
	}
	if std, err = series(fmt.Sprintf("%s: per-channel std", f.Key), "std",
		func(s ChannelStat) float64 { return s.Std }); err != nil {
		return nil, nil, err
	}
	return mean, std, nil
}

// savePNG draws a grid of plots into one PNG, atomically.
func savePNG(path string, w, h vg.Length, grid [][]*plot.Plot) error {
	img := vgimg.New(w, h)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: len(grid), Cols: len(grid[0]), PadY: vg.Points(8), PadTop: vg.Points(4),
		PadBottom: vg.Points(4), PadLeft: vg.Points(4), PadRight: vg.Points(8)}
	canvases := plot.Align(grid, tiles, dc)
	for i, row := range grid {
		for j, p := range row {
			p.Draw(canvases[i][j])
		}
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(tmp); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return err
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
