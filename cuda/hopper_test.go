//go:build linux

package cuda

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/zflow/zflow/exec"
)

// hopperKernels are the Hopper kernel geometries TestHopperAgreesTile
// compares with the mma.sync kernel (the cp.async kernel, unchanged, is
// compared by TestAttention) and TestAttentionTiming times beside it.
var hopperKernels = []hopperGeom{hopperWS, hopperWSP, {wg: 2, bc: 176, st: 2, ws: true, pp: true, persist: true}}

func geomName(g hopperGeom) string {
	k := "cp"
	if g.ws {
		k = "ws"
		if g.pp {
			k += "+pp"
		}
		if g.persist {
			k += "+persist"
		}
	}
	return fmt.Sprintf("wgmma %s %dwg %dk %dst", k, g.wg, g.bc, g.st)
}

// TestHopperAgreesTile compares each Hopper kernel geometry with the
// mma.sync kernel on small shapes (one tile, a ragged tile, several of
// each, two batches) and, where they disagree, prints the error by 16-row
// and 16-column block, so that a layout mistake shows its pattern.
func TestHopperAgreesTile(t *testing.T) {
	b := need(t)
	if b.arch != "sm_90" {
		t.Skipf("the Hopper kernel needs sm_90; the device is %s", b.arch)
	}
	for _, c := range []struct {
		bs, seq, h, kv, d int
		mask              exec.MaskKind
	}{
		{1, 128, 1, 1, 128, exec.MaskNone}, {1, 128, 1, 1, 64, exec.MaskNone}, {1, 200, 2, 1, 128, exec.MaskCausal},
		{1, 700, 4, 2, 128, exec.MaskNone}, {2, 700, 4, 2, 64, exec.MaskCausal}, {2, 333, 2, 2, 128, exec.MaskNone},
	} {
		f := bf16
		q := up(t, b, randn(c.bs*c.seq*c.h*c.d, 7, 1), []int{c.bs, c.seq, c.h * c.d}, f)
		k := up(t, b, randn(c.bs*c.seq*c.kv*c.d, 8, 1), []int{c.bs, c.seq, c.kv * c.d}, f)
		v := up(t, b, randn(c.bs*c.seq*c.kv*c.d, 9, 1), []int{c.bs, c.seq, c.kv * c.d}, f)
		p := exec.AttentionParams{Heads: c.h, KVHeads: c.kv, Mask: c.mask}
		run := func(route string) []float32 {
			g := runAttention(t, b, route, false, 0, func() (exec.Tensor, error) {
				return b.Attention(q.g, k.g, v.g, nil, nil, nil, p, exec.Out(bf16))
			})
			out, _ := b.Download(g)
			b.Free(g)
			return out
		}
		ref := run("mma")
		for _, geom := range hopperKernels {
			b.hopper.geom = geom
			got := run("wgmma")
			b.hopper.geom = hopperGeom{}
			_, ex, rel, bad, _ := stats(bf16, got, ref)
			name := fmt.Sprintf("%s [%d %d %d×%d/%d] %v", geomName(geom), c.bs, c.seq, c.h, c.d, c.kv, c.mask)
			t.Logf("%s: wgmma vs mma rel-RMS %.3e, %.4f identical, %d NaN/Inf mismatches", name, rel, ex, bad)
			if rel > 1e-2 || bad > 0 || math.IsNaN(rel) {
				t.Errorf("%s: the Hopper kernel disagrees with the mma.sync kernel (rel-RMS %.3e)", name, rel)
				w := c.h * c.d
				var sb strings.Builder
				for r0 := 0; r0 < min(c.seq, 256); r0 += 16 {
					fmt.Fprintf(&sb, "rows %3d:", r0)
					for c0 := 0; c0 < min(w, 256); c0 += 16 {
						var num, den float64
						for r := r0; r < min(r0+16, c.seq); r++ {
							for cc := c0; cc < c0+16; cc++ {
								a, m := float64(got[r*w+cc]), float64(ref[r*w+cc])
								num += (a - m) * (a - m)
								den += m * m
							}
						}
						fmt.Fprintf(&sb, " %5.2f", math.Sqrt(num/max(den, 1e-30)))
					}
					sb.WriteString("\n")
				}
				t.Logf("rel error by 16×16 block (rows down, columns across):\n%s", sb.String())
				t.Logf("first values: wgmma %v\n                mma %v", got[:8], ref[:8])
			}
		}
		for _, x := range []pair{q, k, v} {
			x.free(b)
		}
	}
}

// attnTiming is one timed kernel at one shape.
type attnTiming struct {
	Shape   string  `json:"shape"`
	Seq     int     `json:"seq"`
	Heads   int     `json:"heads"`
	KVHeads int     `json:"kv_heads"`
	D       int     `json:"head_dim"`
	Causal  bool    `json:"causal"`
	Kernel  string  `json:"kernel"`
	MS      float64 `json:"ms"`
	TFLOPs  float64 `json:"tflops"`
}

// TestAttentionTiming times the flash kernels at real sizes, bf16, in
// one process: the mma.sync kernel (8 warps, its faster at these shapes)
// and the Hopper kernel, the cp.async one and hopperKernels' geometries: the median over 10 event-timed runs of 5 calls
// back to back, after 3 warm-ups. It runs only when $ZFLOW_ATTN_BENCH names the JSON file to
// write (bench/attn_torch.py reads it and times SDPA beside it).
func TestAttentionTiming(t *testing.T) {
	path := os.Getenv("ZFLOW_ATTN_BENCH")
	if path == "" {
		t.Skip("set ZFLOW_ATTN_BENCH=out.json to time the attention kernels")
	}
	b := need(t)
	var res []attnTiming
	for _, c := range []struct {
		name          string
		seq, h, kv, d int
		mask          exec.MaskKind
	}{
		{"dit [1, 4608, 24×128]", 4608, 24, 24, 128, exec.MaskNone},
		{"llm [1, 4096, 32×128, 8 kv heads] causal", 4096, 32, 8, 128, exec.MaskCausal},
	} {
		q := up(t, b, randn(c.seq*c.h*c.d, 11, 1), []int{1, c.seq, c.h * c.d}, bf16)
		k := up(t, b, randn(c.seq*c.kv*c.d, 12, 1), []int{1, c.seq, c.kv * c.d}, bf16)
		v := up(t, b, randn(c.seq*c.kv*c.d, 13, 1), []int{1, c.seq, c.kv * c.d}, bf16)
		p := exec.AttentionParams{Heads: c.h, KVHeads: c.kv, Mask: c.mask}
		flops := 4 * float64(c.seq) * float64(c.seq) * float64(c.h*c.d)
		if c.mask == exec.MaskCausal {
			flops /= 2
		}
		kernels := []string{"mma 8w"}
		geoms := map[string]hopperGeom{}
		if b.arch == "sm_90" {
			for _, g := range append([]hopperGeom{hopperCP}, hopperKernels...) {
				kn := geomName(g)
				kernels = append(kernels, kn)
				geoms[kn] = g
			}
		}
		for _, kn := range kernels {
			route, warps := "mma", 4
			if g, ok := geoms[kn]; ok {
				route = "wgmma"
				b.hopper.geom = g
			} else if kn == "mma 8w" {
				warps = 8
			}
			// Each timing is 5 calls back to back (the host's launch work
			// overlaps the GPU's), 10 of them after 3 warm-ups.
			const calls = 5
			var ms []float64
			for i := range 13 {
				t0, _ := b.NewEvent()
				t1, _ := b.NewEvent()
				t0.Record()
				var gs []exec.Tensor
				for range calls {
					gs = append(gs, runAttention(t, b, route, false, warps, func() (exec.Tensor, error) {
						return b.Attention(q.g, k.g, v.g, nil, nil, nil, p, exec.Out(bf16))
					}))
				}
				t1.Record()
				d, err := t1.Since(t0)
				if err != nil {
					t.Fatal(err)
				}
				if i >= 3 {
					ms = append(ms, d/calls)
				}
				for _, g := range gs {
					b.Free(g)
				}
				t0.Destroy()
				t1.Destroy()
			}
			b.hopper.geom = hopperGeom{}
			slices.Sort(ms)
			med := ms[len(ms)/2]
			r := attnTiming{Shape: c.name, Seq: c.seq, Heads: c.h, KVHeads: c.kv, D: c.d, Causal: c.mask == exec.MaskCausal,
				Kernel: kn, MS: med, TFLOPs: flops / med / 1e9}
			res = append(res, r)
			fmt.Printf("attention timing: %-42s %-16s %8.3f ms %7.1f TFLOP/s (min %.3f)\n", c.name, kn, med, r.TFLOPs, ms[0])
		}
		for _, x := range []pair{q, k, v} {
			x.free(b)
		}
	}
	data, _ := json.MarshalIndent(res, "", " ")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}
