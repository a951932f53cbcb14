//go:build linux

// Command block times one real-width dual-stream DiT block (Flux's
// FluxTransformerBlock: hidden 3072, 24 heads × 128, 4096 image + 512 text
// rows, bf16) on the CUDA backend, op by op through exec.Backend, then
// again with its producer→pointwise regions (and the joins of q's and k's
// per-head norms followed by RoPE, join(norm, norm) → rope) offered to the
// backend's fusion (exec.Fuser; the default auto
// mode keeps a fusion only where its first run measured it faster), and
// checks that both routes give the same bits; then the GEMMs, attention
// and two pointwise ops alone. bench/block_torch.py times the same block
// in PyTorch eager and through torch.compile and prints the comparison.
//
//	block -iters 20 -json out.json -out block_out.bin
package main

import (
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"sort"
	"time"

	"github.com/zflow/zflow/cuda"
	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/precision"
)

var (
	bf16 = precision.BF16
	sOut = exec.Out(bf16)
	sCmp = exec.Composed(bf16) // separate PyTorch primitives
)

type result struct {
	Device    string             `json:"device"`
	BlockMS   float64            `json:"block_ms"`
	BlockAll  []float64          `json:"block_ms_all"`
	Breakdown map[string]float64 `json:"breakdown_ms"`
	// Per op (stream and op), the fused route's.
	FusedBreakdown map[string]float64 `json:"fused_breakdown_ms"`
	// The same block with its regions offered to the fusion (the route
	// generate takes), its regions' decisions, and whether its outputs are
	// the op-by-op route's bit for bit.
	FusedMS       float64               `json:"block_fused_ms"`
	FusedAll      []float64             `json:"block_fused_ms_all"`
	FusedSame     bool                  `json:"block_fused_identical"`
	FusionRecords []exec.FusionDecision `json:"fusions"`
	GEMM          []gemmResult          `json:"gemm"`
	AttnMS        float64               `json:"attention_ms"`
	AttnTFLOPS    float64               `json:"attention_tflops"`
	AttnWarps     map[string]float64    `json:"attention_ms_by_warps"`
	Pointwise     map[string]float64    `json:"pointwise_gbps"`
	SetupS        float64               `json:"setup_s"`
}

type gemmResult struct {
	M, N, K int
	Bias    bool
	MS      float64 `json:"ms"`
	TFLOPS  float64 `json:"tflops"`
}

func main() {
	iters := flag.Int("iters", 20, "timed iterations")
	warm := flag.Int("warmup", 3, "warm-up iterations")
	jsonPath := flag.String("json", "", "write the results as JSON here")
	outPath := flag.String("out", "", "write the block's outputs (img then txt, bf16 bits) here")
	attnOnly := flag.Int("attn-only", 0, "run only the block's attention twice with this many flash warps (for a profiler)")
	once := flag.Bool("once", false, "run only the fused block twice (for a profiler)")
	blockOnly := flag.Bool("block-only", false, "time the block alone (no GEMM or pointwise tables; A/B runs)")
	flag.Parse()
	if *once {
		if err := run(0, 2, "", "", true); err != nil {
			fmt.Fprintln(os.Stderr, "block:", err)
			os.Exit(1)
		}
		return
	}
	if *attnOnly != 0 {
		if err := attnOnce(*attnOnly); err != nil {
			fmt.Fprintln(os.Stderr, "block:", err)
			os.Exit(1)
		}
		return
	}
	skipTables = *blockOnly
	if err := run(*iters, *warm, *jsonPath, *outPath, false); err != nil {
		fmt.Fprintln(os.Stderr, "block:", err)
		os.Exit(1)
	}
}

// timer records events between ops and sums them by label.
type timer struct {
	b      *cuda.Backend
	evs    []*cuda.Event
	labels []string
	n      int
	on     bool
}

func (t *timer) mark(label string) {
	if !t.on {
		return
	}
	if t.n == len(t.evs) {
		e, err := t.b.NewEvent()
		if err != nil {
			panic(err)
		}
		t.evs = append(t.evs, e)
		t.labels = append(t.labels, label)
	}
	t.labels[t.n] = label
	t.evs[t.n].Record()
	t.n++
}

func (t *timer) collect(into map[string]float64) {
	for i := 1; i < t.n; i++ {
		ms, err := t.evs[i].Since(t.evs[i-1])
		if err != nil {
			panic(err)
		}
		into[t.labels[i]] += ms
	}
	t.n = 0
}

type weights map[string]exec.Tensor

// skipTables leaves out the GEMM and pointwise tables (-block-only).
var skipTables bool

func run(iters, warm int, jsonPath, outPath string, fusedOnly bool) error {
	start := time.Now()
	b, err := cuda.New()
	if err != nil {
		return err
	}
	res := result{Device: b.Device(), Breakdown: map[string]float64{}, Pointwise: map[string]float64{}, AttnWarps: map[string]float64{}}
	fmt.Println("device:", res.Device)
	w := weights{}
	for i, sp := range tensors() {
		t, err := b.Upload(values(i, sp), sp.shape, bf16)
		if err != nil {
			return fmt.Errorf("upload %s: %w", sp.name, err)
		}
		w[sp.name] = t
	}
	// RoPE tables: text ids 0, image ids (0, row, col) on a 64×64 grid;
	// axes (16, 56, 56), θ = 10000, f64 frequencies and angles (diffusers
	// Flux), stored f32.
	seq := txtLen + imgLen
	pos := make([]float32, 3*seq)
	for i := range imgLen {
		pos[3*(txtLen+i)+1], pos[3*(txtLen+i)+2] = float32(i/64), float32(i%64)
	}
	pt, err := b.Upload(pos, []int{seq, 3}, precision.F32)
	if err != nil {
		return err
	}
	cos, sin, err := b.RopeTable(pt, exec.RopeTableParams{Theta: 10000, AxesDims: []int{16, 56, 56}, Layout: exec.RopeInterleaved,
		FreqFormat: precision.F64, AngleFormat: precision.F64}, exec.Out(precision.F32))
	if err != nil {
		return err
	}
	if err := b.Sync(); err != nil {
		return err
	}
	res.SetupS = time.Since(start).Seconds()
	if fusedOnly {
		img, txt, err := timeBlock(b, w, cos, sin, true, warm, iters, &res.FusedAll, map[string]float64{})
		if err != nil {
			return err
		}
		b.Free(img)
		b.Free(txt)
		return b.Sync()
	}
	// Attention alone first: it picks the flash kernel's warps per block
	// for the block.
	if err := attention(b, &res); err != nil {
		return err
	}

	img, txt, err := timeBlock(b, w, cos, sin, false, warm, iters, &res.BlockAll, res.Breakdown)
	if err != nil {
		return err
	}
	res.BlockMS = median(res.BlockAll)
	fmt.Printf("block forward: median %.3f ms over %d iterations (min %.3f)\n", res.BlockMS, iters, minOf(res.BlockAll))
	printBreakdown(res.Breakdown)
	res.FusedBreakdown = map[string]float64{}
	fimg, ftxt, err := timeBlock(b, w, cos, sin, true, warm, iters, &res.FusedAll, res.FusedBreakdown)
	if err != nil {
		return err
	}
	res.FusedMS = median(res.FusedAll)
	res.FusionRecords = b.Fusions()
	if res.FusedSame, err = sameBits(b, img, fimg, txt, ftxt); err != nil {
		return err
	}
	fmt.Printf("block forward, regions fused (%s): median %.3f ms (min %.3f), outputs identical to op by op: %v\n",
		b.FusionMode(), res.FusedMS, minOf(res.FusedAll), res.FusedSame)
	printBreakdown(res.FusedBreakdown)
	for _, d := range res.FusionRecords {
		fmt.Printf("  %-60s fused %v (unfused %.3f ms, fused %.3f ms) %s%s", d.Region, d.Fused, d.UnfusedMs, d.FusedMs, d.Declined, d.Route)
		for route, ms := range d.Tried {
			fmt.Printf(" [%s: %.3f ms]", route, ms)
		}
		fmt.Println()
	}
	b.Free(fimg)
	b.Free(ftxt)
	if outPath != "" {
		if err := writeOut(b, outPath, img, txt); err != nil {
			return err
		}
	}
	b.Free(img)
	b.Free(txt)

	if !skipTables {
		if err := gemms(b, &res); err != nil {
			return err
		}
		if err := pointwise(b, &res); err != nil {
			return err
		}
	}
	if jsonPath != "" {
		buf, _ := json.MarshalIndent(res, "", "  ")
		if err := os.WriteFile(jsonPath, buf, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// printBreakdown prints each label's average milliseconds, largest first,
// and their sum (the events' own cost included).
func printBreakdown(m map[string]float64) {
	keys := make([]string, 0, len(m))
	sum := 0.0
	for k, v := range m {
		keys = append(keys, k)
		sum += v
	}
	sort.Slice(keys, func(i, j int) bool { return m[keys[i]] > m[keys[j]] })
	for _, k := range keys {
		fmt.Printf("  %-36s %8.3f ms\n", k, m[k])
	}
	fmt.Printf("  %-36s %8.3f ms\n", "(sum)", sum)
}

// timeBlock runs the block warm+iters times (fused: its regions offered to
// the backend's fusion), appending each timed run's milliseconds to all
// and each op's average to breakdown; it returns the last run's outputs.
func timeBlock(b *cuda.Backend, w weights, cos, sin exec.Tensor, fused bool, warm, iters int, all *[]float64, breakdown map[string]float64) (img, txt exec.Tensor, err error) {
	tm := &timer{b: b}
	for it := 0; it < warm+iters; it++ {
		if img != nil {
			b.Free(img)
			b.Free(txt)
		}
		t0, _ := b.NewEvent()
		t1, _ := b.NewEvent()
		tm.on = it >= warm
		t0.Record()
		tm.mark("start")
		img, txt, err = forward(b, w, cos, sin, fused, tm)
		if err != nil {
			return nil, nil, err
		}
		t1.Record()
		ms, err := t1.Since(t0)
		if err != nil {
			return nil, nil, err
		}
		if it >= warm {
			*all = append(*all, ms)
			tm.collect(breakdown)
		}
		t0.Destroy()
		t1.Destroy()
	}
	for k := range breakdown {
		breakdown[k] /= float64(iters)
	}
	return img, txt, nil
}

// sameBits says whether each pair of tensors holds the same bits.
func sameBits(b *cuda.Backend, pairs ...exec.Tensor) (bool, error) {
	for i := 0; i+1 < len(pairs); i += 2 {
		x, err := b.Download(pairs[i])
		if err != nil {
			return false, err
		}
		y, err := b.Download(pairs[i+1])
		if err != nil {
			return false, err
		}
		if len(x) != len(y) {
			return false, nil
		}
		for j := range x {
			if math.Float32bits(x[j]) != math.Float32bits(y[j]) {
				return false, nil
			}
		}
	}
	return true, nil
}

func median(v []float64) float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	if len(s) == 0 {
		return math.NaN()
	}
	return s[len(s)/2]
}

func minOf(v []float64) float64 {
	m := math.Inf(1)
	for _, x := range v {
		m = min(m, x)
	}
	return m
}

// forward runs the block: the same ops, in the same order and with the
// same rounding, as diffusers' FluxTransformerBlock in bf16 eager.
// With fused, its four producer→pointwise regions go to the backend's
// Fuse, as the interpreter offers them.
func forward(b *cuda.Backend, w weights, cos, sin exec.Tensor, fused bool, tm *timer) (img, txt exec.Tensor, err error) {
	var tmp []exec.Tensor
	defer func() {
		for _, t := range tmp {
			b.Free(t)
		}
	}()
	keep := func(t exec.Tensor, e error) exec.Tensor {
		if e != nil && err == nil {
			err = e
		}
		if t != nil {
			tmp = append(tmp, t)
		}
		return t
	}
	lin := func(x exec.Tensor, name string) exec.Tensor {
		if err != nil {
			return nil
		}
		y := keep(b.Linear(x, w[name+".w"], w[name+".b"], sOut))
		tm.mark("linear " + name)
		return y
	}
	// region runs r fused (when the backend takes it) or op by op.
	runRegion := func(r exec.Region) (exec.Tensor, error) {
		y, ok, e := b.Fuse(r)
		if e == nil && !ok {
			y, e = exec.RunUnfused(b, r)
		}
		return y, e
	}
	region := func(r exec.Region, label string) exec.Tensor {
		if err != nil {
			return nil
		}
		y := keep(runRegion(r))
		tm.mark(label)
		return y
	}
	linHead := func(x exec.Tensor, name string) exec.Head {
		return exec.Head{Op: exec.HeadLinear, In: [3]exec.Tensor{x, w[name+".w"], w[name+".b"]}, Spec: sOut}
	}
	layer := exec.NormParams{Kind: exec.NormLayer, Eps: 1e-6}
	// normMod is the region norm → modulate (1 + scale).
	normMod := func(x, shift, scale exec.Tensor) exec.Region {
		return exec.Region{Head: exec.Head{Op: exec.HeadNorm, In: [3]exec.Tensor{x}, Norm: layer, Spec: sOut},
			Steps: []exec.Step{{Op: exec.StepModulate, In: []exec.Tensor{nil, shift, scale}, Modulate: exec.ModulateParams{PlusOne: true}, Spec: sCmp}}}
	}
	// gatedRes is the step x + gate·(running value).
	gatedRes := func(x, gate exec.Tensor) exec.Step {
		return exec.Step{Op: exec.StepGatedResidual, In: []exec.Tensor{x, nil, gate}, Arg: 1, Act: exec.ActIdentity, Spec: sCmp}
	}
	qk := exec.NormParams{Kind: exec.NormRMS, Eps: 1e-6, Group: headD}
	sQK := exec.Spec{Out: bf16, Round: exec.RoundNormalized}

	temb := keep(b.Act(w["in.temb"], exec.ActSiLU, sOut))
	tm.mark("act")
	type stream struct {
		x                  exec.Tensor
		mod                []exec.Tensor
		q, k, v, attn, out exec.Tensor
		mx                 exec.Tensor // the attention's input (fused route)
	}
	ss := map[string]*stream{"img": {x: w["in.img"]}, "txt": {x: w["in.txt"]}}
	for _, name := range []string{"img", "txt"} {
		s := ss[name]
		m := lin(temb, name+".mod")
		if err != nil {
			return nil, nil, err
		}
		s.mod, err = b.Chunk(m, 6, 1)
		if err != nil {
			return nil, nil, err
		}
		tmp = append(tmp, s.mod...)
		tm.mark(name + " chunk")
		var mx exec.Tensor
		if fused {
			mx = region(normMod(s.x, s.mod[0], s.mod[1]), name+" norm→modulate")
		} else {
			n := keep(b.Norm(s.x, nil, nil, layer, sOut))
			tm.mark(name + " norm")
			mx = keep(b.Modulate(n, s.mod[0], s.mod[1], exec.ModulateParams{PlusOne: true}, sCmp))
			tm.mark(name + " modulate")
		}
		if fused {
			// v is made in the join region below; q and k are normed in
			// theirs.
			s.q, s.k, s.mx = lin(mx, name+".q"), lin(mx, name+".k"), mx
			if err != nil {
				return nil, nil, err
			}
			continue
		}
		s.q, s.k, s.v = lin(mx, name+".q"), lin(mx, name+".k"), lin(mx, name+".v")
		if err != nil {
			return nil, nil, err
		}
		s.q = keep(b.Norm(s.q, w[name+".norm_q"], nil, qk, sQK))
		s.k = keep(b.Norm(s.k, w[name+".norm_k"], nil, qk, sQK))
		tm.mark(name + " q/k norm")
	}
	if err != nil {
		return nil, nil, err
	}
	ti, tt := ss["img"], ss["txt"]
	rp := exec.RopeParams{Heads: heads, Layout: exec.RopeInterleaved}
	var q, k, v exec.Tensor
	if fused {
		// The regions join(norm, norm) → rope: each stream's per-head
		// norm written into its rows of the joined q (k), roped there.
		qkNorm := func(x exec.Tensor, g string) exec.Head {
			return exec.Head{Op: exec.HeadNorm, In: [3]exec.Tensor{x, w[g]}, Norm: qk, Spec: sQK}
		}
		joinRope := func(which string, xt, xi exec.Tensor) exec.Region {
			return exec.Region{Head: exec.Head{Op: exec.HeadJoin, Axis: 1,
				Parts: []exec.Head{qkNorm(xt, "txt.norm_"+which), qkNorm(xi, "img.norm_"+which)}},
				Steps: []exec.Step{{Op: exec.StepRope, In: []exec.Tensor{nil, cos, sin}, Rope: rp, Spec: sOut}}}
		}
		q = region(joinRope("q", tt.q, ti.q), "q/k join(norm, norm)→rope")
		k = region(joinRope("k", tt.k, ti.k), "q/k join(norm, norm)→rope")
		// join(linear, linear): each stream's v GEMM writes its rows of
		// the joined v.
		v = region(exec.Region{Head: exec.Head{Op: exec.HeadJoin, Axis: 1,
			Parts: []exec.Head{linHead(tt.mx, "txt.v"), linHead(ti.mx, "img.v")}}}, "v join(linear, linear)")
	} else {
		q = keep(b.Concat([]exec.Tensor{tt.q, ti.q}, 1))
		k = keep(b.Concat([]exec.Tensor{tt.k, ti.k}, 1))
		v = keep(b.Concat([]exec.Tensor{tt.v, ti.v}, 1))
		tm.mark("concat")
		if err != nil {
			return nil, nil, err
		}
		q = keep(b.Rope(q, cos, sin, rp, sOut))
		k = keep(b.Rope(k, cos, sin, rp, sOut))
		tm.mark("rope")
	}
	if err != nil {
		return nil, nil, err
	}
	a := keep(b.Attention(q, k, v, nil, nil, nil, exec.AttentionParams{Heads: heads}, sOut))
	tm.mark("attention")
	if err != nil {
		return nil, nil, err
	}
	tt.attn = keep(b.Slice(a, 1, 0, txtLen))
	ti.attn = keep(b.Slice(a, 1, txtLen, txtLen+imgLen))
	tm.mark("slice")
	outs := map[string]exec.Tensor{}
	for _, name := range []string{"img", "txt"} {
		s := ss[name]
		if fused {
			x1 := region(exec.Region{Head: linHead(s.attn, name+".out"), Steps: []exec.Step{gatedRes(s.x, s.mod[2])}}, name+".out→gated_residual")
			mx := region(normMod(x1, s.mod[3], s.mod[4]), name+" norm→modulate 2")
			g := region(exec.Region{Head: linHead(mx, name+".ff1"), Steps: []exec.Step{{Op: exec.StepAct, In: []exec.Tensor{nil}, Act: exec.ActGELUTanh, Spec: sOut}}}, name+".ff1→act")
			if err != nil {
				return nil, nil, err
			}
			y, e := runRegion(exec.Region{Head: linHead(g, name+".ff2"), Steps: []exec.Step{gatedRes(x1, s.mod[5])}})
			if e != nil {
				return nil, nil, e
			}
			tm.mark(name + ".ff2→gated_residual")
			outs[name] = y
			continue
		}
		o := lin(s.attn, name+".out")
		if err != nil {
			return nil, nil, err
		}
		x1 := keep(b.GatedResidual(s.x, o, s.mod[2], exec.ActIdentity, sCmp))
		tm.mark(name + " gated_residual")
		n := keep(b.Norm(x1, nil, nil, layer, sOut))
		tm.mark(name + " norm 2")
		mx := keep(b.Modulate(n, s.mod[3], s.mod[4], exec.ModulateParams{PlusOne: true}, sCmp))
		tm.mark(name + " modulate 2")
		h := lin(mx, name+".ff1")
		if err != nil {
			return nil, nil, err
		}
		g := keep(b.Act(h, exec.ActGELUTanh, sOut))
		tm.mark(name + " act")
		f := lin(g, name+".ff2")
		if err != nil {
			return nil, nil, err
		}
		y, e := b.GatedResidual(x1, f, s.mod[5], exec.ActIdentity, sCmp)
		if e != nil {
			return nil, nil, e
		}
		tm.mark(name + " gated_residual 2")
		outs[name] = y
	}
	return outs["img"], outs["txt"], err
}

func writeOut(b *cuda.Backend, path string, ts ...exec.Tensor) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	for _, t := range ts {
		v, err := b.Download(t)
		if err != nil {
			return err
		}
		h := make([]uint16, len(v))
		for i, x := range v {
			h[i] = precision.BF16Bits(x)
		}
		if err := binary.Write(f, binary.LittleEndian, h); err != nil {
			return err
		}
	}
	return nil
}

// timeIt runs fn warm + iters times and returns the median milliseconds.
func timeIt(b *cuda.Backend, warm, iters int, fn func() (exec.Tensor, error)) (float64, error) {
	var ms []float64
	for i := 0; i < warm+iters; i++ {
		t0, _ := b.NewEvent()
		t1, _ := b.NewEvent()
		t0.Record()
		y, err := fn()
		if err != nil {
			return 0, err
		}
		t1.Record()
		d, err := t1.Since(t0)
		if err != nil {
			return 0, err
		}
		b.Free(y)
		t0.Destroy()
		t1.Destroy()
		if i >= warm {
			ms = append(ms, d)
		}
	}
	return median(ms), nil
}

func gemms(b *cuda.Backend, res *result) error {
	for _, c := range [][3]int{{4096, 3072, 3072}, {4096, 12288, 3072}, {4096, 3072, 12288}, {8192, 8192, 8192}} {
		m, n, k := c[0], c[1], c[2]
		x, err := b.Upload(hashValues(m*k, 101, 1), []int{m, k}, bf16)
		if err != nil {
			return err
		}
		wt, err := b.Upload(hashValues(n*k, 102, 1/math.Sqrt(float64(k))), []int{n, k}, bf16)
		if err != nil {
			return err
		}
		bias, err := b.Upload(hashValues(n, 103, 0.02), []int{n}, bf16)
		if err != nil {
			return err
		}
		for _, withBias := range []bool{false, true} {
			var bt exec.Tensor
			if withBias {
				bt = bias
			}
			ms, err := timeIt(b, 3, 20, func() (exec.Tensor, error) { return b.Linear(x, wt, bt, sOut) })
			if err != nil {
				return err
			}
			g := gemmResult{M: m, N: n, K: k, Bias: withBias, MS: ms, TFLOPS: 2 * float64(m) * float64(n) * float64(k) / ms / 1e9}
			res.GEMM = append(res.GEMM, g)
			fmt.Printf("gemm %5d×%5d×%5d bias=%-5v %8.3f ms %7.1f TFLOP/s\n", m, n, k, withBias, ms, g.TFLOPS)
		}
		b.Free(x)
		b.Free(wt)
		b.Free(bias)
	}
	return nil
}

func attention(b *cuda.Backend, res *result) error {
	seq := txtLen + imgLen
	var qkv []exec.Tensor
	for i := range 3 {
		t, err := b.Upload(hashValues(seq*hidden, int64(201+i), 1), []int{1, seq, hidden}, bf16)
		if err != nil {
			return err
		}
		qkv = append(qkv, t)
	}
	best := 0
	for _, w := range []int{4, 8} {
		if err := b.SetFlashWarps(w); err != nil {
			return err
		}
		ms, err := timeIt(b, 3, 20, func() (exec.Tensor, error) {
			return b.Attention(qkv[0], qkv[1], qkv[2], nil, nil, nil, exec.AttentionParams{Heads: heads}, sOut)
		})
		if err != nil {
			return err
		}
		res.AttnWarps[fmt.Sprint(w)] = ms
		tf := 4 * float64(seq) * float64(seq) * float64(hidden) / ms / 1e9
		fmt.Printf("attention [1 %d %d] 24 heads, flash %d warps: %.3f ms, %.1f TFLOP/s\n", seq, hidden, w, ms, tf)
		if best == 0 || ms < res.AttnMS {
			best, res.AttnMS, res.AttnTFLOPS = w, ms, tf
		}
	}
	fmt.Printf("flash kernel: %d warps a block\n", best)
	for _, t := range qkv {
		b.Free(t)
	}
	return b.SetFlashWarps(best)
}

func pointwise(b *cuda.Backend, res *result) error {
	n := 2 * 4096 * 3072
	x, err := b.Upload(hashValues(n, 301, 1), []int{2, 4096, 3072}, bf16)
	if err != nil {
		return err
	}
	defer b.Free(x)
	bytes := float64(4 * n) // bf16 read + bf16 write
	for _, c := range []struct {
		name string
		fn   func() (exec.Tensor, error)
	}{
		{"cast bf16→bf16", func() (exec.Tensor, error) { return b.Cast(x, bf16) }},
		{"act silu", func() (exec.Tensor, error) { return b.Act(x, exec.ActSiLU, sOut) }},
		{"act gelu_tanh", func() (exec.Tensor, error) { return b.Act(x, exec.ActGELUTanh, sOut) }},
		{"layernorm", func() (exec.Tensor, error) {
			return b.Norm(x, nil, nil, exec.NormParams{Kind: exec.NormLayer, Eps: 1e-6}, sOut)
		}},
	} {
		ms, err := timeIt(b, 3, 20, c.fn)
		if err != nil {
			return err
		}
		gbps := bytes / ms / 1e6
		res.Pointwise[c.name] = gbps
		fmt.Printf("%-16s [2 4096 3072] bf16: %.3f ms, %.0f GB/s\n", c.name, ms, gbps)
	}
	return nil
}

// attnOnce runs the block's attention twice (a warm-up, then the launch a
// profiler looks at) with w flash warps a block.
func attnOnce(w int) error {
	b, err := cuda.New()
	if err != nil {
		return err
	}
	if err := b.SetFlashWarps(w); err != nil {
		return err
	}
	seq := txtLen + imgLen
	var qkv []exec.Tensor
	for i := range 3 {
		t, err := b.Upload(hashValues(seq*hidden, int64(201+i), 1), []int{1, seq, hidden}, bf16)
		if err != nil {
			return err
		}
		qkv = append(qkv, t)
	}
	for range 2 {
		y, err := b.Attention(qkv[0], qkv[1], qkv[2], nil, nil, nil, exec.AttentionParams{Heads: heads}, sOut)
		if err != nil {
			return err
		}
		b.Free(y)
	}
	return b.Sync()
}
