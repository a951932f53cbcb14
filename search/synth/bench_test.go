package synth

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/zflow/zflow/exec/cpu"
	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/trace"
)

// BenchmarkProgramSearch times the program search on the planted
// constructs (fixtures/constructs) and reports it against its baseline in
// the same process: generating the trace's own request with the program
// found (search ÷ generate), so the figure does not depend on the machine.
func BenchmarkProgramSearch(b *testing.B) {
	for _, name := range []string{"lm.npz", "dit.npz"} {
		b.Run(name, func(b *testing.B) {
			path := filepath.Join("..", "..", "fixtures", "constructs", name)
			tr, err := trace.Open(path)
			if err != nil {
				b.Fatal(err)
			}
			defer tr.Close()
			var search, gen time.Duration
			for b.Loop() {
				t0 := time.Now()
				res, err := Discover(context.Background(), tr, path, Options{})
				if err != nil {
					b.Fatal(err)
				}
				t1 := time.Now()
				if _, err := program.Reproduce(cpu.New(0), res.Doc, tr); err != nil {
					b.Fatal(err)
				}
				search, gen = search+t1.Sub(t0), gen+time.Since(t1)
			}
			b.ReportMetric(float64(search.Milliseconds())/float64(b.N), "search-ms/op")
			b.ReportMetric(search.Seconds()/gen.Seconds(), "search/generate")
		})
	}
}
