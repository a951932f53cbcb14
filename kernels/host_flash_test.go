package kernels

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	zexec "github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/exec/cpu"
	"github.com/zflow/zflow/internal/hostdriver"
	"github.com/zflow/zflow/precision"
)

// flashCompare compares got with want in format f: the rel-RMS over the
// pairs that are numbers on both sides, the fraction of bit-exact
// elements (NaN against NaN counting as exact), and the number of
// elements that are NaN or ±Inf on one side only (or different
// infinities).
func flashCompare(f precision.Format, got, want []float32) (rel, exact float64, bad int) {
	var num, den float64
	n := 0
	for i, w := range want {
		g := got[i]
		switch {
		case g != g || w != w:
			if (g != g) != (w != w) {
				bad++
			} else {
				n++
			}
			continue
		case math.IsInf(float64(g), 0) || math.IsInf(float64(w), 0):
			if g != w {
				bad++
			} else {
				n++
			}
			continue
		}
		if precision.BitExact(f, g, w) {
			n++
		}
		d := float64(g) - float64(w)
		num += d * d
		den += float64(w) * float64(w)
	}
	if den > 0 {
		rel = math.Sqrt(num / den)
	}
	if len(want) > 0 {
		exact = float64(n) / float64(len(want))
	}
	return rel, exact, bad
}

// TestHostFlashAttention runs zf_attention_flash (Host rendering, a
// group's threads as host threads) against the CPU backend under the same
// Spec, within FlashBound, on finite inputs: masks (a fully masked row
// must be NaN, as the CPU's), GQA, causal, ALiBi, soft-cap, bias, score
// rounding, RoundWeights, f16, head dims 40 to 256.
func TestHostFlashAttention(t *testing.T) {
	bin := compileHost(t, hostDriver)
	r := rand.New(rand.NewPCG(7, 8))
	b := cpu.New(0)
	bf, f16 := precision.BF16, precision.F16
	normal := func(n int, sd float64) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(r.NormFloat64() * sd)
		}
		return v
	}
	type fcase struct {
		name              string
		bsz, sq, sk, h, d int
		p                 zexec.AttentionParams
		f                 precision.Format
		mask, bias        bool
		s                 zexec.Spec
	}
	gqa := zexec.AttentionParams{Heads: 4, KVHeads: 2}
	causal := gqa
	causal.Mask = zexec.MaskCausal
	explicit := gqa
	explicit.Mask = zexec.MaskExplicit
	extras := zexec.AttentionParams{Heads: 4, KVHeads: 4, Mask: zexec.MaskCausal, Window: 20, Softcap: 5, ALiBi: true}
	cases := []fcase{
		{"gqa", 2, 70, 100, 4, 64, gqa, bf, false, false, zexec.Out(bf)},
		{"gqa out f32", 2, 70, 100, 4, 64, gqa, bf, false, false, zexec.Out(precision.F32)},
		{"causal", 1, 130, 130, 4, 128, causal, bf, false, false, zexec.Out(bf)},
		{"causal f16", 1, 130, 130, 4, 40, causal, f16, false, false, zexec.Out(f16)},
		{"explicit (a NaN row)", 2, 33, 90, 4, 64, explicit, bf, true, false, zexec.Out(bf)},
		{"weights", 2, 70, 100, 4, 64, gqa, bf, false, false, zexec.Spec{Out: bf, Round: zexec.RoundWeights}},
		{"scores", 2, 70, 100, 4, 64, gqa, bf, false, false, zexec.Spec{Out: bf, Round: zexec.RoundScores}},
		{"window softcap alibi bias", 1, 80, 80, 4, 64, extras, bf, false, true, zexec.Out(bf)},
		{"head 256", 1, 40, 50, 2, 256, zexec.AttentionParams{Heads: 2, KVHeads: 1}, bf, false, false, zexec.Out(bf)},
	}
	var in bytes.Buffer
	type want struct {
		data []float32
		s    zexec.Spec
		name string
		nan  int
	}
	var wants []want
	for _, c := range cases {
		kvh := c.p.KVHeads
		if kvh == 0 {
			kvh = c.p.Heads
		}
		q := upload(t, b, normal(c.bsz*c.sq*c.h*c.d, 1), []int{c.bsz, c.sq, c.h * c.d}, c.f)
		k := upload(t, b, normal(c.bsz*c.sk*kvh*c.d, 1), []int{c.bsz, c.sk, kvh * c.d}, c.f)
		v := upload(t, b, normal(c.bsz*c.sk*kvh*c.d, 1), []int{c.bsz, c.sk, kvh * c.d}, c.f)
		var mask, bias zexec.Tensor
		if c.mask {
			mv := make([]float32, c.bsz*c.sq*c.sk)
			for i := range mv {
				if r.IntN(3) != 0 {
					mv[i] = 1
				}
			}
			clear(mv[c.sk : 2*c.sk]) // row 1 of batch 0 sees nothing
			mask = upload(t, b, mv, []int{c.bsz, c.sq, c.sk}, bf)
		}
		if c.bias {
			bias = upload(t, b, normal(c.h*c.sk, 2), []int{1, c.h, 1, c.sk}, bf)
		}
		a, err := zexec.CheckAttention(q, k, v, mask, bias, nil, c.p)
		if err != nil {
			t.Fatal(err)
		}
		var fm, fb precision.Format
		if mask != nil {
			fm = mask.Format()
		}
		if bias != nil {
			fb = bias.Format()
		}
		ap, slopes, err := AttentionSeq("host", a, c.p, c.s, c.f, c.f, c.f, fm, fb)
		if err != nil {
			t.Fatal(err)
		}
		if ok, why := Flash(ap, c.s, c.f, c.f, c.f); !ok {
			t.Fatalf("%s: not a flash case: %s", c.name, why)
		}
		out, err := b.Attention(q, k, v, mask, bias, nil, c.p, c.s)
		if err != nil {
			t.Fatal(err)
		}
		w := data(t, b, out)
		nan := 0
		for _, x := range w {
			if x != x {
				nan++
			}
		}
		if c.mask && nan == 0 {
			t.Errorf("%s: the CPU gives no NaN for the fully masked row", c.name)
		}
		wants = append(wants, want{w, c.s, fmt.Sprintf("flash %s q=%v %+v %v", c.name, q.Shape(), c.p, c.s), nan})
		params := Bytes(&ap)
		var bufs [6][]byte
		for i, x := range []zexec.Tensor{q, k, v, mask, bias} {
			if x != nil {
				bufs[i] = pack(data(t, b, x), x.Format())
			}
		}
		if slopes != nil {
			bufs[5] = pack(slopes, precision.F32)
		}
		binary.Write(&in, binary.LittleEndian, int32(10))
		binary.Write(&in, binary.LittleEndian, int32(len(params)))
		in.Write(params)
		for _, bb := range bufs {
			binary.Write(&in, binary.LittleEndian, int64(len(bb)))
			in.Write(bb)
		}
		binary.Write(&in, binary.LittleEndian, int64(len(w)*esize(c.s.Out)))
	}
	outs := hostdriver.Run(t, bin, "the host rendering (flash)", in.Bytes())
	pos := 0
	for _, w := range wants {
		n := len(w.data) * esize(w.s.Out)
		if pos+n > len(outs) {
			t.Fatalf("%s: output short", w.name)
		}
		got := unpack(outs[pos:pos+n], w.s.Out)
		pos += n
		rel, exact, bad := flashCompare(w.s.Out, got, w.data)
		t.Logf("%s: rel-RMS %.3e (bound %.0e), bit-exact %.6f, %d NaN in the CPU's", w.name, rel, FlashBound(w.s), exact, w.nan)
		if bad > 0 || !(rel <= FlashBound(w.s)) {
			t.Errorf("%s: rel-RMS %.3e (bound %.0e), %d NaN/Inf mismatches", w.name, rel, FlashBound(w.s), bad)
		}
	}
}
