package reports

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/zflow/zflow/trace"
)

// TestStatsMatchesDirect: Stats' per-tensor and per-channel numbers are
// SummarizeTensor's and ChannelStats' on the whole tensor, for stored f32
// views and widened bf16 alike.
func TestStatsMatchesDirect(t *testing.T) {
	for _, path := range []string{"../fixtures/dit/dit-f32.npz", "../fixtures/dit/dit-bf16.npz"} {
		tr := open(t, path)
		step := 1
		r, err := Stats(tr, StatsOptions{Selection: Selection{Step: &step, Module: "transformer.blocks.0*"}, PerChannel: true, Workers: 2})
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Tensors) < 10 {
			t.Fatalf("%s: %d tensors", path, len(r.Tensors))
		}
		for _, ts := range r.Tensors {
			tt, _ := tr.Tensor(ts.Key)
			want, err := SummarizeTensor(tt)
			if err != nil {
				t.Fatal(err)
			}
			if ts.Summary != want {
				t.Errorf("%s: %+v, want %+v", ts.Key, ts.Summary, want)
			}
			v, _ := tt.Float32()
			in, _ := tr.Info(ts.Key)
			cw, _ := ChannelStats(v, in.Shape[len(in.Shape)-1])
			if sprint(*ts.Channels) != sprint(cw) {
				t.Errorf("%s: channels %+v, want %+v", ts.Key, *ts.Channels, cw)
			}
		}
	}
}

func TestStatsRenderers(t *testing.T) {
	tr := open(t, writeTrace(t, "s.npz", []tcall{{"m", -1, 0, []tport{
		{"out", trace.Float32, []int{2, 2}, []float32{1, 2, 3, 6}},
		{"kw.f64", trace.Float64, []int{1}, []float32{0.1}}, // 0.1 in f64 is not a float32
	}}}, nil, nil))
	r, err := Stats(tr, StatsOptions{PerChannel: true, Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Tensors) != 2 || r.Tensors[0].Error == "" || r.Tensors[1].Error != "" {
		t.Fatalf("%+v", r.Tensors)
	}
	// channel 0 holds 1, 3; channel 1 holds 2, 6
	c := r.Tensors[1].Channels
	if c.Mean != (Range{2, 4}) || c.Std != (Range{1, 2}) {
		t.Errorf("channel ranges %+v %+v", c.Mean, c.Std)
	}
	var buf bytes.Buffer
	if err := r.WriteTable(&buf); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"[+2.00, +4.00]", "[1.00, 2.00]", "error:"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, buf.String())
		}
	}
	buf.Reset()
	if err := r.WriteCSV(&buf); err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(&buf).ReadAll()
	if err != nil || len(rows) != 3 || rows[2][16] != "2" || rows[2][19] != "2" {
		t.Errorf("csv %v %v", rows, err)
	}
	b, err := json.Marshal(r.Document())
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Tensors []struct {
			Key      string
			Error    string
			Channels *struct {
				MeanRange  [2]float64                    `json:"mean_range"`
				PerChannel []struct{ Mean, Std float64 } `json:"per_channel"`
			}
		}
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	if ch := doc.Tensors[1].Channels; ch == nil || ch.MeanRange != [2]float64{2, 4} || len(ch.PerChannel) != 2 || ch.PerChannel[1].Std != 2 {
		t.Errorf("json %s", b)
	}
}

// TestStatsProgress: the counter counts the tensors read, one by one,
// serialised whatever the workers, up to the selected tensors.
func TestStatsProgress(t *testing.T) {
	tr := open(t, "../fixtures/dit/dit-f32.npz")
	for _, workers := range []int{1, 3} {
		var seen []int
		total := -1
		r, err := Stats(tr, StatsOptions{Workers: workers, Progress: func(done, n int) {
			seen = append(seen, done)
			total = n
		}})
		if err != nil {
			t.Fatal(err)
		}
		n := len(r.Tensors)
		want := make([]int, n)
		for i := range want {
			want[i] = i + 1
		}
		if n < 10 || total != n || !slices.Equal(seen, want) {
			t.Errorf("%d workers: progress %v of %d, want 1..%d", workers, seen, total, n)
		}
	}
}
