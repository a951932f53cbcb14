package reports

import (
	"image/png"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/zflow/zflow/trace"
)

func TestDecadeLabel(t *testing.T) {
	for _, c := range []struct {
		k    int
		want string
	}{{-8, "1e-8"}, {-4, "1e-4"}, {-3, "1e-3"}, {-2, "0.01"}, {-1, "0.1"}, {0, "1"}, {1, "10"}, {2, "100"}, {3, "1e3"}} {
		if got := decadeLabel(c.k); got != c.want {
			t.Errorf("decadeLabel(%d) = %q, want %q", c.k, got, c.want)
		}
	}
}

func TestPlotPoint(t *testing.T) {
	for _, c := range []struct {
		name     string
		m        Metrics
		mismatch int
		kind     pointKind
		measured bool
	}{
		{"measured", Metrics{Count: 4, Finite: 4, RelRMS: 1e-3}, 0, pointMeasured, true},
		{"bit-exact", Metrics{Count: 4, Finite: 4, Exact: 4}, 0, pointExact, true},
		{"inf on one side, finite rest", Metrics{Count: 4, Finite: 3, RelRMS: 2e-4, Ours: Side{PosInf: 1}}, 1, pointNaNInf, true},
		{"NaN on both sides, rest exact", Metrics{Count: 4, Finite: 3, Ours: Side{NaN: 1}, Ref: Side{NaN: 1}}, 0, pointNaNInf, true},
		{"nothing finite", Metrics{Count: 4, Ours: Side{NaN: 4}}, 4, pointNaNInf, false},
		{"rel-RMS infinite (ref all zero)", Metrics{Count: 4, Finite: 4, RelRMS: math.Inf(1)}, 0, pointNaNInf, false},
	} {
		k, measured := plotPoint(&c.m, c.mismatch)
		if k != c.kind || measured != c.measured {
			t.Errorf("%s: kind %d measured %v, want %d %v", c.name, k, measured, c.kind, c.measured)
		}
	}
}

func TestLogAxis(t *testing.T) {
	for _, c := range []struct {
		name       string
		values     []float64
		exact, nan bool
		labels     []string // the labelled ticks, bottom to top
		inLo, inHi float64  // bounds strictly beyond these (glyphs not clipped)
	}{
		{"decades of measured values", []float64{3e-5, 0.02}, false, false,
			[]string{"1e-5", "1e-4", "1e-3", "0.01", "0.1"}, 1e-5, 0.1},
		{"bit-exact row below", []float64{1e-4}, true, false,
			[]string{"bit-exact", "1e-4", "1e-3"}, 1e-4 / math.Pow(10, 1.5), 1e-3},
		{"NaN/Inf row above", []float64{0.0625, 2e-3}, true, true,
			[]string{"bit-exact", "1e-3", "0.01", "0.1", "NaN/Inf"}, 1e-3 / math.Pow(10, 1.5), 0.1 * math.Pow(10, 1.5)},
		{"nothing measured", nil, true, false, []string{"bit-exact", "1e-8"}, 1e-8 / math.Pow(10, 1.5), 1},
	} {
		a := newLogAxis(c.values, c.exact, c.nan)
		var labels []string
		for _, tk := range a.Ticks(0, 0) {
			if tk.Label != "" {
				labels = append(labels, tk.Label)
			}
		}
		if c.name == "nothing measured" {
			labels = labels[:2]
		}
		if strings.Join(labels, " ") != strings.Join(c.labels, " ") {
			t.Errorf("%s: labels %q, want %q", c.name, labels, c.labels)
		}
		lo, hi := a.bounds()
		if !(lo < c.inLo && hi > c.inHi) {
			t.Errorf("%s: bounds [%g, %g] do not hold [%g, %g] with room", c.name, lo, hi, c.inLo, c.inHi)
		}
	}
}

// plotTraces: a bit-exact boundary, a measured failing one (one row: the
// finding's), and one with an Inf on our side.
func plotTraces(t *testing.T) (*trace.Trace, *trace.Trace) {
	row := func(off float32) []float32 {
		v := make([]float32, 8)
		for i := range v {
			v[i] = float32(i) - 3 + off*float32(i%3)
		}
		return v
	}
	port := func(name string, vals []float32) tport {
		return tport{name: name, dt: trace.Float32, shape: []int{1, len(vals)}, vals: vals}
	}
	inf := row(0)
	inf[2] = float32(math.Inf(1))
	ref := []tcall{{"m", -1, 0, []tport{port("arg0", row(0)), port("out", row(0))}}, {"n", -1, 0, []tport{port("arg0", row(0))}}}
	ours := []tcall{{"m", -1, 0, []tport{port("arg0", row(0)), port("out", row(0.25))}}, {"n", -1, 0, []tport{port("arg0", inf)}}}
	return open(t, writeTrace(t, "ours.npz", ours, nil, nil)), open(t, writeTrace(t, "ref.npz", ref, nil, nil))
}

func TestWritePlots(t *testing.T) {
	ours, ref := plotTraces(t)
	r, err := Diff(ours, ref, DiffOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if r.Finding == nil || !r.Finding.OneRow {
		t.Fatalf("want a one-row finding, got %+v", r.Finding)
	}
	fig := r.errorPoints()
	xlo, xhi := fig.xRange()
	ylo, yhi := fig.axis.bounds()
	var labels []string
	for _, tk := range fig.axis.Ticks(ylo, yhi) {
		if tk.Label != "" {
			labels = append(labels, tk.Label)
		}
	}
	got := strings.Join(labels, " ")
	if !strings.HasPrefix(got, "bit-exact ") || strings.Contains(got, "999") || strings.Contains(got, "NaN") {
		t.Errorf("y labels %q: want the bit-exact row and clean decades (the Inf boundary's finite values are exact)", got)
	}
	// each boundary is drawn once, in its series, inside the axes
	bySeries := map[string][]float64{}
	drawn := 0
	for _, s := range fig.series {
		for _, xy := range s.xys {
			drawn++
			bySeries[s.label] = append(bySeries[s.label], xy.X)
			if xy.X <= xlo || xy.X >= xhi || xy.Y <= ylo || xy.Y >= yhi {
				t.Errorf("%s: point %v outside [%g,%g]×[%g,%g]", s.label, xy, xlo, xhi, ylo, yhi)
			}
		}
	}
	if drawn != len(r.Boundaries) {
		t.Errorf("%d points for %d boundaries", drawn, len(r.Boundaries))
	}
	idx := map[string]float64{}
	for i, d := range r.Boundaries {
		idx[d.Key] = float64(i)
	}
	for _, c := range []struct{ series, key string }{
		{"bit-exact (rel-RMS 0), on its own row", "s0/m/arg0"},
		{"fail", "s0/m/out"},
		{"NaN/Inf on a side (at its finite values' rel-RMS, or on the NaN/Inf row)", "s0/n/arg0"},
	} {
		if xs := bySeries[c.series]; len(xs) != 1 || xs[0] != idx[c.key] {
			t.Errorf("series %q holds %v, want only %s (#%g)", c.series, xs, c.key, idx[c.key])
		}
	}
	if _, _, err := r.errorPlot(); err != nil {
		t.Fatal(err)
	}

	panels := r.Finding.channelPanels()
	if !strings.Contains(panels[0].title, "values (one row") || !strings.Contains(panels[1].title, "ours - ref") {
		t.Errorf("one-row panels titled %q and %q, want values and ours - ref", panels[0].title, panels[1].title)
	}
	if d := panels[1].lines[0].values; slices.Max(d) == slices.Min(d) {
		t.Errorf("the one-row bottom panel is flat: %v", d)
	}

	dir := filepath.Join(t.TempDir(), "plots")
	paths, err := r.WritePlots(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) != 2 {
		t.Fatalf("wrote %v, want the error plot and the channel plot", paths)
	}
	for _, path := range paths {
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(f)
		f.Close()
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if b := img.Bounds(); b.Dx() < 500 || b.Dy() < 300 {
			t.Errorf("%s: %v, too small to read", path, b)
		}
	}
}

func TestChannelPlotsManyRows(t *testing.T) {
	ref := []tcall{{"m", -1, 0, []tport{{"out", trace.Float32, []int{2, 3}, []float32{1, 2, 3, 4, 5, 6}}}}}
	ours := []tcall{{"m", -1, 0, []tport{{"out", trace.Float32, []int{2, 3}, []float32{2, 3, 4, 5, 6, 7}}}}}
	r, err := Diff(open(t, writeTrace(t, "o.npz", ours, nil, nil)), open(t, writeTrace(t, "r.npz", ref, nil, nil)), DiffOptions{})
	if err != nil || r.Finding == nil || r.Finding.OneRow {
		t.Fatalf("want a two-row finding: %v %+v", err, r.Finding)
	}
	panels := r.Finding.channelPanels()
	for i, want := range []string{"per-channel mean over 2 rows", "per-channel std over 2 rows"} {
		cp := panels[i]
		if !strings.Contains(cp.title, want) {
			t.Errorf("title %q, want %q", cp.title, want)
		}
		lo, hi, ok := cp.yRange()
		for _, ln := range cp.lines {
			if !ok || slices.Min(ln.values) <= lo || slices.Max(ln.values) >= hi {
				t.Errorf("%s: y range [%g,%g] clips %s %v", want, lo, hi, ln.label, ln.values)
			}
		}
	}
	if _, _, err := r.Finding.channelPlots(); err != nil {
		t.Fatal(err)
	}
}

func TestIndexTicks(t *testing.T) {
	for _, n := range []int{1, 3, 8, 114, 5000} {
		for _, tk := range indexTicks(n).Ticks(-1, float64(n)) {
			if tk.Value < 0 || tk.Value > float64(max(n-1, 1)) {
				t.Errorf("n=%d: tick %v outside the indexes", n, tk)
			}
		}
	}
}
