package synth

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/precision"
)

// TestReadFreqs: embeddings made with a few frequencies one or two ulps
// off exp(e_i), their sines and cosines then moved by up to one ulp (a
// library's sin and cos), give back exactly the planted entries where the
// timesteps show them, and nothing where they are too small to.
func TestReadFreqs(t *testing.T) {
	p := exec.TimestepParams{Dim: 256, FlipSinToCos: true, Scale: 1, MaxPeriod: 10000}
	freqs, err := exec.TimestepFreqs(p, 0)
	if err != nil {
		t.Fatal(err)
	}
	planted := []exec.FreqOverride{{Index: 13, Value: nudge(freqs[13], 1)}, {Index: 44, Value: nudge(freqs[44], -2)}, {Index: 60, Value: nudge(freqs[60], 1)}}
	for _, tc := range []struct {
		name string
		ts   []float32
		want []int // planted indices the reading must return
	}{
		{"guidance 6000 and the schedule", []float32{6000, 1000, 750, 400}, []int{13, 44, 60}},
		// f60 ≈ 0.013: at t ≤ 1000 one ulp of it moves sin by fewer ulps than sin and cos alone may be off
		{"σ·1000 only", []float32{1000, 750}, []int{13, 44}},
		{"σ in [0, 1]", []float32{1, 0.75, 0.4}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := p
			q.FreqOverrides = planted
			emb, err := exec.TimestepEmbedding(tc.ts, q, 0)
			if err != nil {
				t.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(1, 2))
			rows := make([][]float32, len(tc.ts))
			for n := range rows {
				rows[n] = emb[n*p.Dim : (n+1)*p.Dim]
				for c, v := range rows[n] {
					rows[n][c] = nudge(v, rng.IntN(3)-1)
				}
			}
			got, ulps, err := readFreqs(p, 0, tc.ts, rows, precision.F32, nil)
			if err != nil {
				t.Fatal(err)
			}
			var idx []int
			for i, o := range got {
				k := slices.IndexFunc(planted, func(w exec.FreqOverride) bool { return w.Index == o.Index })
				if k < 0 || planted[k].Value != o.Value {
					t.Errorf("read f%d = %.9g (%+d ulp), planted %v", o.Index, o.Value, ulps[i], planted)
				}
				idx = append(idx, o.Index)
			}
			if !slices.Equal(idx, tc.want) {
				t.Errorf("read %v, want %v", idx, tc.want)
			}
		})
	}
	if _, _, err := readFreqs(p, 0, []float32{1}, [][]float32{make([]float32, 8)}, precision.F32, nil); err == nil {
		t.Error("rows of the wrong width accepted")
	}
}

// TestReadFreqsCUDA: with CUDA's sin and cos reproduced exactly, every
// planted entry the timesteps of a schedule touch is read, the one the
// correctly rounded sin and cos cannot decide (f60 at t ≤ 1000) included.
func TestReadFreqsCUDA(t *testing.T) {
	ts := []float32{1000, 750}
	p, planted, emb := plantedFreqs(t, ts)
	rows := [][]float32{emb[:p.Dim], emb[p.Dim:]}
	got, _, err := readFreqs(p, exec.MathCUDASinCos, ts, rows, precision.F32, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, planted) {
		t.Errorf("read %v, want %v", got, planted)
	}
}

// TestSharedHunyuanVideoFreqTable: the f32 reference (torch on a CPU, MKL's exp)
// used frequencies 13 and 44 one ulp above the correctly rounded exp; at
// its guidance of 6000 that moved the output by rel-RMS 1.1e-5. Discovery
// reads them off every sinusoid, and the document generates the output to
// the f32 models' level.
func TestSharedHunyuanVideoFreqTable(t *testing.T) {
	tr, path := conformance(t, "hunyuanvideo-f32.npz")
	res, err := Discover(context.Background(), tr, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Complete() {
		t.Fatalf("incomplete: %v", res.Opaque)
	}
	read := 0
	for _, f := range res.Doc.Factors {
		if f.Name != "timestep_freq_overrides" {
			continue
		}
		read++
		if !sameValue(f.Value, []int{13, 44}) || !f.Decisive {
			t.Errorf("%s: %v, decisive %v (margin %v)", f.Scope, f.Value, f.Decisive, float64(f.Margin))
		}
	}
	if read != 3 {
		t.Errorf("%d sinusoids read a table, want 3", read)
	}
	exact, err := exec.TimestepFreqs(exec.TimestepParams{Dim: 256, Scale: 1, MaxPeriod: 10000}, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range res.Doc.Program.Nodes {
		if n.Op != "timestep_embed" {
			continue
		}
		for _, o := range n.Attrs.Timestep.FreqOverrides {
			want := nudge(exact[o.Index], 1)
			if d := precision.ULPDistance(precision.F32, float32(o.Value), want); d != 0 {
				t.Errorf("%s: f%d = %.9g, %d ulps from one above exp", n.Role, o.Index, o.Value, d)
			}
		}
	}
	if rel := generate(t, res.Doc, tr); rel > 1e-6 {
		t.Errorf("generated output rel-RMS %.3g > 1e-6", rel)
	}
}

// TestReadFreqsKnown: one timestep (a guidance value, the same at every
// step) leaves entries undecided; entries read off another sinusoid of the
// same table are taken where they explain the columns, and a known value
// the columns contradict is not.
func TestReadFreqsKnown(t *testing.T) {
	ts := []float32{6}
	p, planted, emb := plantedFreqs(t, ts)
	freqs, _ := exec.TimestepFreqs(p, 0)
	rows := [][]float32{emb}
	alone, _, err := readFreqs(p, exec.MathCUDASinCos, ts, rows, precision.F32, nil)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Equal(alone, planted) {
		t.Fatal("one small timestep decides every planted entry: the test shows nothing")
	}
	known := map[int]float32{}
	for _, o := range planted {
		known[o.Index] = o.Value
	}
	known[70] = nudge(freqs[70], 3) // contradicted by the columns at t = 6? kept only if it explains them
	got, _, err := readFreqs(p, exec.MathCUDASinCos, ts, rows, precision.F32, known)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range planted {
		if !slices.Contains(got, o) {
			t.Errorf("planted %v not read with the known entries: %v", o, got)
		}
	}
	for _, o := range got {
		if o.Index == 70 {
			s, c := exec.TimestepSinCos(ts[0], o.Value, 1, exec.MathCUDASinCos)
			_, cosAt := exec.TimestepColumns(p)
			sinAt, _ := exec.TimestepColumns(p)
			if s != emb[sinAt+70] || c != emb[cosAt+70] {
				t.Errorf("a known entry the columns contradict was taken: %v", o)
			}
		}
	}
}

// plantedFreqs is a 256-wide sinusoid table with three entries planted off
// the computed exp (f13 +1, f44 −2, f60 +1 ulp), and its embedding of ts
// under CUDA's sin and cos.
func plantedFreqs(t *testing.T, ts []float32) (exec.TimestepParams, []exec.FreqOverride, []float32) {
	t.Helper()
	p := exec.TimestepParams{Dim: 256, FlipSinToCos: true, Scale: 1, MaxPeriod: 10000}
	freqs, err := exec.TimestepFreqs(p, 0)
	if err != nil {
		t.Fatal(err)
	}
	planted := []exec.FreqOverride{{Index: 13, Value: nudge(freqs[13], 1)}, {Index: 44, Value: nudge(freqs[44], -2)}, {Index: 60, Value: nudge(freqs[60], 1)}}
	q := p
	q.FreqOverrides = planted
	emb, err := exec.TimestepEmbedding(ts, q, exec.MathCUDASinCos)
	if err != nil {
		t.Fatal(err)
	}
	return p, planted, emb
}
