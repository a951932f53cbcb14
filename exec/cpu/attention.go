package cpu

import (
	"fmt"
	"math"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/precision"
)

// Attention is scaled dot-product attention per head, f32 scores and
// softmax (capped, biased, masked and sunk as exec.Backend says), with the Spec's
// rounding points (RoundScores, RoundEach, RoundProbs, RoundWeights,
// RoundAccum, RoundQuery); the output is rounded once to s.Out. MathTensorCore sums
// q·k and the weights·v as a GPU's tensor cores do (exec.DotMMA: cuBLAS's
// GEMMs of a math SDPA, a flash kernel's MMAs within one key tile).
// MathOnlineSoftmax computes the softmax over key tiles as a flash
// kernel does (onlineRow).
func (bk *Backend) Attention(q, k, v, mask, bias, sinks exec.Tensor, p exec.AttentionParams, s exec.Spec) (exec.Tensor, error) {
	if err := s.Check(); err != nil {
		return nil, fmt.Errorf("attention: %w", err)
	}
	qt, err := bk.get("attention", "q", q)
	if err != nil {
		return nil, err
	}
	kt, err := bk.get("attention", "k", k)
	if err != nil {
		return nil, err
	}
	vt, err := bk.get("attention", "v", v)
	if err != nil {
		return nil, err
	}
	mt, err := bk.opt("attention", "mask", mask)
	if err != nil {
		return nil, err
	}
	bt, err := bk.opt("attention", "bias", bias)
	if err != nil {
		return nil, err
	}
	st, err := bk.opt("attention", "sinks", sinks)
	if err != nil {
		return nil, err
	}
	a, err := exec.CheckAttention(q, k, v, mask, bias, sinks, p)
	if err != nil {
		return nil, err
	}
	g, mst, bst := a.AttentionDims, a.MaskStrides, a.BiasStrides
	scale, capv := a.Scale, p.Softcap
	slopes := p.Slopes(g.H)
	f := s.Out
	each := s.Round&exec.RoundEach != 0
	rs, rprob, rw := s.Has(exec.RoundScores), s.Round&exec.RoundProbs != 0, s.Round&exec.RoundWeights != 0
	raccum := s.Round&exec.RoundAccum != 0
	rq := s.Round&exec.RoundQuery != 0
	mma := exec.TensorCoreSums(s, qt.format, kt.format, vt.format)
	if mma && raccum {
		return nil, exec.Unsupported(bk.Name(), "attention", "%v with RoundAccum (a GPU's tensor-core sums and a CPU's storage-format ones)", exec.MathTensorCore)
	}
	if rprob && rw {
		return nil, fmt.Errorf("exec: attention: RoundProbs and RoundWeights both set")
	}
	if each {
		rprob = true // the math SDPA: every intermediate in the storage format
	}
	online := s.Math&exec.MathOnlineSoftmax != 0
	if online && (rprob || raccum || rq || st != nil) {
		return nil, exec.Unsupported(bk.Name(), "attention", "%v with %v or sinks (a flash kernel rounds neither; no sinks measured)", exec.MathOnlineSoftmax, s.Round)
	}
	// a flash kernel folds the scale into the log2 units of a plain
	// chain's scores; anything added to them is added in natural units
	plain := online && capv == 0 && slopes == nil && bt == nil
	out := newTensor([]int{g.B, g.Sq, g.H * g.D}, f)
	rep := g.H / g.KV
	prefix := g.Sk - g.Sq // keys every query sees before the blocks (Block > 0)
	qw, kw := g.H*g.D, g.KV*g.D
	// mma: v laid out [B, KV, D, Sk], each output's column of products
	// contiguous for exec.DotMMA
	var vT []float32
	if mma {
		vT = make([]float32, g.B*g.KV*g.D*g.Sk)
		for bb := range g.B {
			for j := range g.Sk {
				for kh := range g.KV {
					row := vt.data[(bb*g.Sk+j)*kw+kh*g.D:][:g.D]
					for e, v := range row {
						vT[((bb*g.KV+kh)*g.D+e)*g.Sk+j] = v
					}
				}
			}
		}
	}
	bk.parallel(g.B*g.H*g.Sq, 16, func(lo, hi int) {
		sc := make([]float32, g.Sk)
		acc := make([]float32, g.D)
		var qs []float32 // q·scale rounded (RoundQuery)
		if rq {
			qs = make([]float32, g.D)
		}

		for idx := lo; idx < hi; idx++ {
			i := idx % g.Sq
			h := (idx / g.Sq) % g.H
			bb := idx / (g.Sq * g.H)
			kh := h / rep
			qrow := qt.data[(bb*g.Sq+i)*qw+h*g.D:][:g.D]
			if rq {
				for e, qv := range qrow {
					qs[e] = f.Round(float32(qv * scale))
				}
				qrow = qs
			}
			mx := float32(math.Inf(-1))
			for j := range g.Sk {
				visible := true
				switch p.Mask {
				case exec.MaskNone:
					visible = p.Window == 0 || j > i-p.Window && j < i+p.Window
					if p.Block > 0 && j >= prefix {
						visible = i/p.Block == (j-prefix)/p.Block
					}
				case exec.MaskCausal:
					visible = j <= i && (p.Window == 0 || j > i-p.Window)
				case exec.MaskExplicit:
					visible = mt.data[bb*mst[0]+i*mst[1]+j*mst[2]] != 0
				}
				if !visible {
					sc[j] = float32(math.Inf(-1))
					continue
				}
				krow := kt.data[(bb*g.Sk+j)*kw+kh*g.D:][:g.D]
				var dot float32
				if mma {
					dot = exec.DotMMA(qrow, krow)
				} else {
					for e, qv := range qrow {
						dot += float32(qv * krow[e])
					}
				}
				if plain {
					sc[j] = dot
					continue
				}
				// written as primitives, q·kᵀ is a matmul stored before the
				// scale, or after it where q was scaled first
				var sv float32
				if rq {
					sv = at(each, f, dot)
				} else {
					sv = at(each, f, float32(at(each, f, dot)*scale))
				}
				if capv > 0 {
					sv = at(each, f, sv/capv)
					sv = at(each, f, exec.Tanh32(sv, s.Math))
					sv = at(each, f, float32(capv*sv))
				}
				if slopes != nil {
					sv = at(each, f, sv+exec.ALiBiBias(slopes[h], j, qt.format))
				}
				if bt != nil {
					sv = at(each, f, sv+bt.data[bb*bst[0]+h*bst[1]+i*bst[2]+j*bst[3]])
				}
				sv = at(rs && !each, f, sv)
				sc[j] = sv
				mx = max(mx, sv)
			}
			if online {
				vh := vt.data[bb*g.Sk*kw+kh*g.D:]
				var vc []float32
				if mma {
					vc = vT[(bb*g.KV+kh)*g.D*g.Sk:][:g.D*g.Sk]
				}
				onlineRow(acc, sc, vh, kw, vc, scale, plain, rw, mma, f)
				dst := out.data[(bb*g.Sq+i)*qw+h*g.D:][:g.D]
				roundInto(dst, acc, f)
				continue
			}
			// the sink joins the max and the sum, then weighs no value
			var sink float32
			if st != nil {
				sink = st.data[h]
				mx = max(mx, sink)
			}
			var sum float32
			masked := float32(math.Inf(-1))
			for j, sv := range sc {
				if sv == masked && mx != masked {
					sc[j] = 0 // exp(−∞) exactly, without the call
					continue
				}
				e := exec.Exp32(at(each && st != nil, f, sv-mx), s.Math)
				sc[j] = e
				sum += e
			}
			if st != nil {
				sum += exec.Exp32(at(each, f, sink-mx), s.Math)
			}
			clear(acc)
			for j, w := range sc {
				switch {
				case rw:
					w = f.Round(w)
				case rprob:
					w = f.Round(w / sum)
				default:
					w = w / sum
				}
				if mma {
					sc[j] = w // the weights, summed below column by column
					continue
				}
				vrow := vt.data[(bb*g.Sk+j)*kw+kh*g.D:][:g.D]
				if raccum {
					for e, vv := range vrow {
						acc[e] = f.Round(acc[e] + f.Round(float32(w*vv)))
					}
					continue
				}
				for e, vv := range vrow {
					acc[e] += float32(w * vv)
				}
			}
			if mma {
				for e := range acc {
					acc[e] = exec.DotMMA(sc, vT[((bb*g.KV+kh)*g.D+e)*g.Sk:][:g.Sk])
				}
			}
			dst := out.data[(bb*g.Sq+i)*qw+h*g.D:][:g.D]
			for e, a := range acc {
				if rw {
					a /= sum
				}
				dst[e] = a
			}
			roundInto(dst, dst, f)
		}
	})
	return out, nil
}

// onlineRow is one query row's softmax and weighted sum under
// MathOnlineSoftmax, into acc (D outputs): sc holds the row's scores (the
// raw q·k dots when plain, else the natural-unit scores with cap, ALiBi
// and bias; −Inf where masked); v the values (key j's row at j·stride),
// or, with mma, vT their columns (output e's at e·Sk). Scores become log2
// units, x = f32(dot · f32(scale·log2 e)) for a plain chain and
// f32(score · log2 e) otherwise; then, key tile by key tile (FlashKeyTile),
// the running maximum m, weights p = 2^(x − m) (Exp2Approx; rounded by
// RoundExp2Approx to f when rw), the running sum l of unrounded p, and
// the output rescaled by 2^(m_old − m) before the tile's products are
// added (with mma as the MMA's C operand). The output is acc / l, l = 0
// (every key masked) giving NaN.
func onlineRow(acc, sc, v []float32, stride int, vT []float32, scale float32, plain, rw, mma bool, f precision.Format) {
	const log2e = float32(math.Log2E)
	sl2 := scale * log2e
	for j, x := range sc {
		switch {
		case math.IsInf(float64(x), -1):
		case plain:
			sc[j] = x * sl2
		default:
			sc[j] = x * log2e
		}
	}
	sk := len(sc)
	clear(acc)
	m := float32(math.Inf(-1))
	var l float32
	for t0 := 0; t0 < sk; t0 += exec.FlashKeyTile {
		tile := sc[t0:min(sk, t0+exec.FlashKeyTile)]
		mt := m
		for _, x := range tile {
			mt = max(mt, x)
		}
		if math.IsInf(float64(mt), -1) {
			continue // nothing visible yet: l and acc stay zero
		}
		alpha := exec.Exp2Approx(m - mt) // 0 from m = −Inf: acc and l are zero then
		var ls float32
		for j, x := range tile {
			p := exec.Exp2Approx(x - mt)
			ls += p
			if rw {
				p = exec.RoundExp2Approx(x-mt, f)
			}
			tile[j] = p
		}
		l = float32(l*alpha) + ls
		for e := range acc {
			a := acc[e] * alpha
			if mma {
				acc[e] = exec.DotMMAFrom(a, tile, vT[e*sk+t0:][:len(tile)])
				continue
			}
			for j, p := range tile {
				a += float32(p * v[(t0+j)*stride+e])
			}
			acc[e] = a
		}
		m = mt
	}
	for e := range acc {
		acc[e] /= l
	}
}
