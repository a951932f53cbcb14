package synth

import (
	"math/rand/v2"
	"testing"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/precision"
)

// TestReadPeriod: the period of a sinusoid table of positions added to a
// scaled value is read back from the values, under every layout, with
// the scale fitted at position 0.
func TestReadPeriod(t *testing.T) {
	const n, d = 8, 32
	rng := rand.New(rand.NewPCG(1, 2))
	a := &val{shape: []int{1, n, d}, data: make([]float32, n*d), format: precision.F32}
	for i := range a.data {
		a.data[i] = float32(rng.NormFloat64() * 0.2)
	}
	pos := make([]float32, n)
	for i := range pos {
		pos[i] = float32(i)
	}
	for _, period := range []float32{10000, 500, 1e5} {
		for _, l := range []sineLayout{{}, {flip: true}, {interleaved: true}, {flip: true, interleaved: true, shift: 1}} {
			tab, err := exec.TimestepEmbedding(pos, exec.TimestepParams{Dim: d, FlipSinToCos: l.flip, FreqShift: l.shift, Scale: 1, MaxPeriod: period}, exec.MathPrecise)
			if err != nil {
				t.Fatal(err)
			}
			if l.interleaved {
				in := make([]float32, len(tab))
				for r := range n {
					for j := range d / 2 {
						in[r*d+2*j], in[r*d+2*j+1] = tab[r*d+j], tab[r*d+d/2+j]
					}
				}
				tab = in
			}
			x := &val{shape: a.shape, data: make([]float32, n*d), format: precision.F32}
			for i := range x.data {
				x.data[i] = 5.656854*a.data[i] + tab[i]
			}
			c, ok := rowZeroScale(x, a, l)
			if !ok || c < 5.65 || c > 5.66 {
				t.Fatalf("period %g %s: scale %g at position 0", period, l, c)
			}
			p, ok := readPeriod(x, a, c, l)
			if !ok || p != period {
				t.Errorf("period %g %s: read %g (%v)", period, l, p, ok)
			}
		}
	}
}

// TestSinusoidAddedNarrowTable: a table made in f32 and cast to the
// model's bf16 before the add (a buffer cast with the model, as CTRL's)
// is found stored in bf16, bit for bit; the same table added in f32 and
// rounded once is found stored in f32.
func TestSinusoidAddedNarrowTable(t *testing.T) {
	const n, d = 12, 32
	rng := rand.New(rand.NewPCG(3, 4))
	a := &val{shape: []int{1, n, d}, data: make([]float32, n*d), format: precision.BF16}
	for i := range a.data {
		a.data[i] = precision.BF16.Round(float32(rng.NormFloat64() * 0.3))
	}
	pos := make([]float32, n)
	for i := range pos {
		pos[i] = float32(i)
	}
	tab, err := exec.TimestepEmbedding(pos, exec.TimestepParams{Dim: d, Scale: 1, MaxPeriod: 10000}, exec.MathPrecise)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []precision.Format{precision.BF16, precision.F32} {
		y := &val{shape: a.shape, data: make([]float32, n*d), format: precision.BF16}
		for i := range y.data {
			p := tab[i]
			if want == precision.BF16 {
				p = precision.BF16.Round(p)
			}
			y.data[i] = precision.BF16.Round(8*a.data[i] + p)
		}
		// a one-step trace for the search's context (nothing else is read)
		tr, _ := writeBF16Trace(t, bf16Call{name: "drop", class: "Dropout", shape: []int{1, 2}, x: []float32{0, 0}, y: []float32{0, 0}})
		s, _ := testSearch(tr, precision.BF16)
		w := s.sinusoidAdded(y, []*val{a})
		if w == nil {
			t.Fatalf("table stored %s: not found", want)
		}
		var table *expr
		for _, arg := range w.from.args {
			if arg.from != nil && arg.from.op == program.OpReshape && arg.from.args[0].from != nil {
				table = arg.from.args[0].from
			}
		}
		if table == nil || table.op != program.OpTimestepEmbed || table.out != want {
			t.Errorf("table stored %s: found %+v", want, table)
		}
		if e := relRMS(precision.BF16, w.data, y.data); e != 0 {
			t.Errorf("table stored %s: rel-RMS %g, want 0", want, e)
		}
	}
}
