package discover

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zflow/zflow/exec/cpu"
	"github.com/zflow/zflow/fixtures/wide"
	"github.com/zflow/zflow/semantics"
	"github.com/zflow/zflow/trace"
)

// benchScale is the ZFLOW_WIDE_SCALE divisor of the real width (1: hidden
// 3072, 24 heads, 4096 + 512 rows; 2, 4, 8: each of those halved).
func benchScale(tb testing.TB) int {
	k := 1
	if s := os.Getenv("ZFLOW_WIDE_SCALE"); s != "" {
		var err error
		if k, err = strconv.Atoi(s); err != nil || k < 1 || k > 8 || k&(k-1) != 0 {
			tb.Fatalf("ZFLOW_WIDE_SCALE=%q: want 1, 2, 4 or 8", s)
		}
	}
	return k
}

// peakRSS resets (reset) or reads the process's peak resident set (VmHWM),
// in bytes; 0 where /proc does not tell.
func peakRSS(reset bool) int64 {
	if reset {
		os.WriteFile("/proc/self/clear_refs", []byte("5"), 0)
		return 0
	}
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// heapPeak samples the Go heap in use every 5 ms until stop is called.
func heapPeak() (stop func() uint64) {
	var peak uint64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			peak = max(peak, ms.HeapInuse)
			select {
			case <-done:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	return func() uint64 { close(done); wg.Wait(); return peak }
}

// BenchmarkDiscoverWideBlock: discovery of one DiT block at real width
// (fixtures/wide: hidden 3072, 24 heads, 4096 image + 512 text rows, one
// Euler step; ZFLOW_WIDE_SCALE divides it) on a trace generated in a
// temporary directory by the CPU backend. It reports the discovery's wall
// time per phase, its peak Go heap and peak RSS, the candidates it scored
// and the objective evaluations, and (when it writes the trace) the
// reference forward's GEMMs: the only full-size GEMMs, since discovery
// reads every projection's result from the trace and runs none, whatever
// the number of candidates.
func BenchmarkDiscoverWideBlock(b *testing.B) {
	if testing.Short() {
		b.Skip("a multi-GB trace: not in -short")
	}
	k := benchScale(b)
	cfg := wide.Scaled(k)
	// ZFLOW_WIDE_TRACE keeps the trace between runs (written there when
	// absent); by default it lives in a temporary directory.
	path := os.Getenv("ZFLOW_WIDE_TRACE")
	if path == "" {
		path = filepath.Join(b.TempDir(), "wide.npz")
	}
	if _, err := os.Stat(path); err != nil {
		st, err := wide.Write(path, cfg, cpu.New(0))
		if err != nil {
			b.Fatal(err)
		}
		b.Logf("reference forward %.1fs: %d tensors, %d GEMMs (%.0f GFLOP) %.1fs, attention %.1fs",
			st.Total.Seconds(), st.Tensors, st.GEMMs, st.GEMMFlops/1e9, st.GEMMTime.Seconds(), st.AttnTime.Seconds())
	}
	fi, _ := os.Stat(path)
	b.Logf("trace %s: hidden %d, %d heads, %d image + %d text rows, %.2f GB",
		path, cfg.Hidden, cfg.Heads, cfg.Grid[0]*cfg.Grid[1], cfg.TextRows, float64(fi.Size())/1e9)
	// The truth is the DiT fixture's (the same model at another width),
	// with two axes of half the head width each.
	truth, err := semantics.Read("../../semantics/testdata/dit-f32.json")
	if err != nil {
		b.Fatal(err)
	}
	for i := range truth.Factors {
		if truth.Factors[i].Name == "rope_axes" {
			hd := cfg.Hidden / cfg.Heads
			truth.Factors[i].Value = []any{float64(hd / 2), float64(hd / 2)}
		}
	}
	b.ResetTimer()
	for range b.N {
		runtime.GC()
		peakRSS(true)
		stop := heapPeak()
		start := time.Now()
		tr, err := trace.Open(path)
		if err != nil {
			b.Fatal(err)
		}
		res, err := Run(context.Background(), tr, Options{})
		if err != nil {
			b.Fatal(err)
		}
		wall := time.Since(start)
		heap, rss := stop(), peakRSS(false)
		tr.Close()
		cands, evals, searches := 0, 0, 0
		for _, f := range res.Doc.Factors {
			cands += len(f.Candidates)
		}
		var phases []string
		for _, p := range res.Phases {
			evals += p.Evaluations
			searches += p.Searches
			phases = append(phases, fmt.Sprintf("%s %.2fs", p.Name, p.Duration.Seconds()))
		}
		b.Logf("discovery %.2fs (%s); peak heap %.0f MB, peak RSS %.0f MB; %d factors, %d candidates in the document, %d searches, %d objective evaluations; full-size GEMMs during discovery: 0",
			wall.Seconds(), strings.Join(phases, ", "), float64(heap)/1e6, float64(rss)/1e6, len(res.Doc.Factors), cands, searches, evals)
		for _, u := range res.Doc.Undetermined {
			b.Errorf("undetermined %s at %s: %s", u.Name, u.Scope, u.Reason)
		}
		compareHand(b, truth, res.Doc)
		b.ReportMetric(float64(heap)/1e6, "peak-heap-MB")
		b.ReportMetric(float64(rss)/1e6, "peak-RSS-MB")
		b.ReportMetric(float64(evals), "evaluations")
		b.ReportMetric(0, "discovery-GEMMs")
	}
}
