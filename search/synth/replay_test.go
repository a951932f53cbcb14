package synth

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/zflow/zflow/trace"
)

// plantedBlocks writes an f32 trace of a model m of three blocks of one
// shape, each a child linear and the block's own glue: block k returns
// its input plus its linear's result, or what out(k, x, lin) says
// instead; side, when set, gives each block a second result (values no
// later block reads).
func plantedBlocks(t *testing.T, name string, out func(k int, x, lin []float32) []float32, side func() []float32) (*trace.Trace, string) {
	t.Helper()
	const rows, width, blocks = 4, 8, 3
	rng := rand.New(rand.NewPCG(7, 11))
	rnd := func(n int, scale float64) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(scale * rng.NormFloat64())
		}
		return v
	}
	p := newPlanted(t, name)
	act, sq := []int{1, rows, width}, []int{width, width}
	x := rnd(rows*width, 1)
	p.f32("input/x", act, x)
	p.f32("s0/m/arg0", act, x)
	step, root := 0, 0
	m := &trace.Manifest{Format: "zflow-trace", Version: 1,
		Producer: map[string]any{"framework": "test", "dtype": "float32"},
		Params:   map[string]string{}, Inputs: map[string]string{"x": "input/x"}, Outputs: map[string]string{"y": "output/y"}}
	m.Calls = append(m.Calls, trace.Call{ID: 0, Step: &step, Module: "m", Type: "M", Tensors: trace.Ports{{Name: "arg0", Key: "s0/m/arg0"}, {Name: "out", Key: "s0/m/out"}}})
	for k := range blocks {
		b, l := fmt.Sprintf("m.b%d", k), fmt.Sprintf("m.b%d.lin", k)
		w := rnd(width*width, 0.3)
		lin := make([]float32, rows*width)
		for r := range rows {
			for o := range width {
				for i := range width {
					lin[r*width+o] += x[r*width+i] * w[o*width+i]
				}
			}
		}
		y := out(k, x, lin)
		p.f32("param/"+l+".weight", sq, w)
		m.Params[l+".weight"] = "param/" + l + ".weight"
		for key, v := range map[string][]float32{"s0/" + b + "/arg0": x, "s0/" + b + "/out": y, "s0/" + l + "/arg0": x, "s0/" + l + "/out": lin} {
			p.f32(key, act, v)
		}
		ports := trace.Ports{{Name: "arg0", Key: "s0/" + b + "/arg0"}, {Name: "out", Key: "s0/" + b + "/out"}}
		if side != nil {
			ports[1] = trace.Port{Name: "out.0", Key: "s0/" + b + "/out"}
			ports = append(ports, trace.Port{Name: "out.1", Key: "s0/" + b + "/out.1"})
			p.f32("s0/"+b+"/out.1", act, side())
		}
		id, block := len(m.Calls), len(m.Calls)
		m.Calls = append(m.Calls,
			trace.Call{ID: id, Step: &step, Parent: &root, Module: b, Type: "Block", Tensors: ports},
			trace.Call{ID: id + 1, Step: &step, Parent: &block, Module: l, Type: "Linear", Params: []string{l + ".weight"}, Tensors: trace.Ports{{Name: "arg0", Key: "s0/" + l + "/arg0"}, {Name: "out", Key: "s0/" + l + "/out"}}})
		x = y
	}
	p.f32("s0/m/out", act, x)
	p.f32("output/y", act, x)
	return p.open(m), p.path
}

// TestRepeatedBlocksReplayed: the second and third blocks of one shape
// take the first block's glue without a search where it explains them,
// search afresh where it does not (a block that subtracts where the first
// adds), and do not search again a target the first block's search could
// not explain; the document is the one a search of every block afresh
// writes, every time.
func TestRepeatedBlocksReplayed(t *testing.T) {
	plus := func(_ int, x, lin []float32) []float32 {
		y := make([]float32, len(x))
		for i := range y {
			y[i] = x[i] + lin[i]
		}
		return y
	}
	noise := rand.New(rand.NewPCG(1, 2))
	for _, tc := range []struct {
		name string
		out  func(k int, x, lin []float32) []float32
		side func() []float32
		// what the log says of each later block's result
		want map[string]string
	}{
		{"alike", plus, nil, map[string]string{"m.b1/out": "replayed", "m.b2/out": "replayed"}},
		{"last subtracts", func(k int, x, lin []float32) []float32 {
			if k < 2 {
				return plus(k, x, lin)
			}
			y := make([]float32, len(x))
			for i := range y {
				y[i] = x[i] - lin[i]
			}
			return y
		}, nil, map[string]string{"m.b1/out": "replayed", "m.b2/out": ""}},
		{"a result unexplained", plus, func() []float32 {
			y := make([]float32, 32)
			for i := range y {
				y[i] = float32(noise.NormFloat64())
			}
			return y
		}, map[string]string{"m.b1/out.1": "not searched again", "m.b2/out.1": "not searched again"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr, path := plantedBlocks(t, strings.ReplaceAll(tc.name, " ", "_"), tc.out, tc.side)
			var mu sync.Mutex
			var lines []string
			log := func(format string, args ...any) {
				mu.Lock()
				defer mu.Unlock()
				lines = append(lines, fmt.Sprintf(format, args...))
			}
			got, err := Discover(context.Background(), tr, path, Options{Log: log})
			if err != nil {
				t.Fatal(err)
			}
			afresh, err := Discover(context.Background(), tr, path, Options{Afresh: true})
			if err != nil {
				t.Fatal(err)
			}
			for boundary, how := range tc.want {
				said := ""
				for _, l := range lines {
					if strings.HasPrefix(l, "recall "+boundary+" ") || strings.HasPrefix(l, "recall "+strings.TrimSuffix(boundary, "/out")+"/out.0 ") {
						said = l
					}
				}
				if how == "" && said != "" || !strings.Contains(said, how) {
					t.Errorf("%s: the log says %q, want %q", boundary, said, how)
				}
			}
			for _, part := range []struct {
				name      string
				got, want any
			}{{"program", got.Doc.Program, afresh.Doc.Program}, {"undetermined", got.Doc.Undetermined, afresh.Doc.Undetermined}, {"factors", got.Doc.Factors, afresh.Doc.Factors}} {
				a, _ := json.Marshal(part.got)
				b, _ := json.Marshal(part.want)
				if string(a) != string(b) {
					t.Errorf("the %s differs from a search afresh:\n%s\nafresh:\n%s", part.name, a, b)
				}
			}
			if t.Failed() {
				t.Log(strings.Join(lines, "\n"))
			}
		})
	}
}
