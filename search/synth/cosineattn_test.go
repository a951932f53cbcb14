package synth

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/zflow/zflow/precision"
)

// TestCosineAttention: SwinV2's attention over 4 windows of 2×2 cells,
// stated in float64 as its code reads: q and k L2-normalised per head
// (heads of 8), the scores times exp(min(p, ln 100)) of a [H, 1, 1]
// parameter, plus 16·σ of a [1, 3, 3, H] table (a position MLP's output,
// made in the scope) gathered at Swin's relative position index, plus a
// [windows, 4, 4] mask of 0 and −100 on every head; softmax; times v.
// cosineAttention must explain it from the scope's values alone, the
// temperature exp(p), the bias scale read as 16.
func TestCosineAttention(t *testing.T) {
	const win, n, heads, d = 4, 4, 2, 8
	width := heads * d
	rng := rand.New(rand.NewPCG(8, 31))
	rnd := func(k int, scale float64) []float32 {
		out := make([]float32, k)
		for i := range out {
			out[i] = float32(rng.NormFloat64() * scale)
		}
		return out
	}
	f := precision.F32
	lin := func(name string) *val {
		return &val{shape: []int{win, n, width}, data: rnd(win*n*width, 1), format: f, origin: name + "/out", fit: &leafFit{kind: "linear"}}
	}
	q, k, v := lin("q"), lin("k"), lin("v")
	logit := &val{shape: []int{heads, 1, 1}, data: []float32{0.7, 1.9}, format: f, origin: "logit_scale"}
	table := &val{shape: []int{1, 3, 3, heads}, data: rnd(9*heads, 1), format: f, origin: "position mlp/out"}
	mask := &val{shape: []int{win, n, n}, data: make([]float32, win*n*n), format: f, origin: "mask"}
	for w := 1; w < win; w++ { // the shifted windows: cells of different regions do not see each other
		for i := range n {
			for j := range n {
				if (i < 2) != (j < 2) {
					mask.data[(w*n+i)*n+j] = -100
				}
			}
		}
	}
	norm := func(x []float32) []float64 {
		var ss float64
		for _, e := range x {
			ss += float64(e) * float64(e)
		}
		out := make([]float64, len(x))
		for i, e := range x {
			out[i] = float64(e) / math.Sqrt(ss)
		}
		return out
	}
	out := make([]float32, win*n*width)
	for w := range win {
		for h := range heads {
			tau := math.Exp(math.Min(float64(logit.data[h]), math.Log(100)))
			for i := range n {
				qi := norm(q.data[(w*n+i)*width+h*d : (w*n+i)*width+h*d+d])
				sc := make([]float64, n)
				for j := range n {
					kj := norm(k.data[(w*n+j)*width+h*d : (w*n+j)*width+h*d+d])
					var dot float64
					for c := range d {
						dot += qi[c] * kj[c]
					}
					// Swin's index: (Δrow + 1)·3 + (Δcol + 1), cells row-major
					at := (i/2-j/2+1)*3 + (i%2 - j%2 + 1)
					b := 16 / (1 + math.Exp(-float64(table.data[at*heads+h])))
					sc[j] = dot*tau + b + float64(mask.data[(w*n+i)*n+j])
				}
				p := softmax64(sc)
				for c := range d {
					var acc float64
					for j := range n {
						acc += p[j] * float64(v.data[(w*n+j)*width+h*d+c])
					}
					out[(w*n+i)*width+h*d+c] = float32(acc)
				}
			}
		}
	}
	s, sc, target := planted(t, f, []int{win, n, width}, out)
	sc.add(mask, false)
	sc.add(logit, false)
	for _, x := range []*val{q, k, v, table} {
		sc.add(x, true)
	}
	got := s.cosineAttention(target, sc)
	if got == nil {
		t.Fatal("not explained")
	}
	if e := relRMS(f, got.data, target.data); e > tolerance(f) {
		t.Errorf("rel-RMS %.3g", e)
	}
	if len(s.attn) != 1 || !strings.Contains(s.attn[0].choice.label, "(16·σ)") || !strings.Contains(s.attn[0].choice.label, "+mask") {
		t.Errorf("records %+v: want one attention with the bias 16·σ and the mask", s.attn)
	}
	if len(s.temperatures) != 1 || s.temperatures[0].form != "exp" {
		t.Fatalf("temperatures %+v: want exp", s.temperatures)
	}
	if f := s.temperatures[0].factor(); !f.Decisive {
		t.Errorf("temperature factor %+v not decisive", f)
	}
}

// TestCrossCovarianceAttention: XCiT's attention over each head's channels,
// stated in float64: q, k and v the pieces of one fused projection
// [1, 6, 3·8] (heads of 4), q and k normalised over the 6 tokens per
// channel, the channel-by-channel map times the head's temperature (a
// [H, 1, 1] parameter as it is), softmax over the key channels, applied
// to v's channels. cosineAttention must explain it read across, the
// temperature p.
func TestCrossCovarianceAttention(t *testing.T) {
	const n, heads, d = 6, 2, 4
	width := heads * d
	rng := rand.New(rand.NewPCG(3, 77))
	qkv := &val{shape: []int{1, n, 3 * width}, data: make([]float32, n*3*width), format: precision.F32, origin: "qkv/out", fit: &leafFit{kind: "linear"}}
	for i := range qkv.data {
		qkv.data[i] = float32(rng.NormFloat64())
	}
	temp := &val{shape: []int{heads, 1, 1}, data: []float32{0.8, 1.3}, format: precision.F32, origin: "temperature"}
	at := func(part, tok, ch int) float64 { return float64(qkv.data[tok*3*width+part*width+ch]) }
	// each channel of q and k divided by its norm over the tokens
	norms := func(part int) []float64 {
		out := make([]float64, width)
		for ch := range width {
			for tok := range n {
				out[ch] += at(part, tok, ch) * at(part, tok, ch)
			}
			out[ch] = math.Sqrt(out[ch])
		}
		return out
	}
	qn, kn := norms(0), norms(1)
	out := make([]float32, n*width)
	for h := range heads {
		for c1 := range d {
			sc := make([]float64, d)
			for c2 := range d {
				for tok := range n {
					sc[c2] += at(0, tok, h*d+c1) / qn[h*d+c1] * at(1, tok, h*d+c2) / kn[h*d+c2]
				}
				sc[c2] *= float64(temp.data[h])
			}
			p := softmax64(sc)
			for tok := range n {
				var acc float64
				for c2 := range d {
					acc += p[c2] * at(2, tok, h*d+c2)
				}
				out[tok*width+h*d+c1] = float32(acc)
			}
		}
	}
	s, sc, target := planted(t, precision.F32, []int{1, n, width}, out)
	sc.add(temp, false)
	sc.add(qkv, true)
	got := s.cosineAttention(target, sc)
	if got == nil {
		t.Fatal("not explained")
	}
	if e := relRMS(precision.F32, got.data, target.data); e > tolerance(precision.F32) {
		t.Errorf("rel-RMS %.3g", e)
	}
	if len(s.attn) != 1 || !strings.Contains(s.attn[0].choice.label, "across the channels") {
		t.Errorf("records %+v: want one attention across the channels", s.attn)
	}
	if len(s.temperatures) != 1 || s.temperatures[0].form != "param" {
		t.Errorf("temperatures %+v: want the parameter as it is", s.temperatures)
	}
}
