package program

import (
	"fmt"
	"math"

	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/precision"
)

// BucketParams configure OpRelBucket: T5's relative position buckets
// (also MPNet's, and the T5 encoders of diffusion pipelines). For query
// position q and key position k, n = q − k (the reference's
// −(memory − context)); bidirectional: half the buckets for n < 0 (k after
// q), nb = NumBuckets/2, |n| kept; else n = max(n, 0), nb = NumBuckets.
// Below nb/2 the bucket is n itself; from there log-spaced up to
// MaxDistance, nb/2 + ⌊ln(n/(nb/2)) / ln(MaxDistance/(nb/2)) · nb/2⌋ computed
// in f32 as torch does, capped at nb − 1.
//
// SignedLog is DeBERTa's log buckets instead (make_log_bucket_position):
// n = q − k kept with its sign where |n| ≤ mid = NumBuckets/2, else
// sign(n)·(mid + ⌈ln(|n|/mid) / ln((MaxDistance − 1)/mid) · (mid − 1)⌉),
// in f32 as torch does (|n|/mid and (MaxDistance − 1)/mid rounded to f32,
// each logarithm, the quotient and the product in f32): ids from
// −(NumBuckets − 1) to NumBuckets − 1, their reader offsets them.
type BucketParams struct {
	NumBuckets    int
	MaxDistance   int
	Bidirectional bool
	SignedLog     bool
}

func (p BucketParams) check() error {
	if p.SignedLog {
		if p.Bidirectional || p.NumBuckets < 4 || p.MaxDistance <= p.NumBuckets/2+1 || p.MaxDistance > 1<<24 {
			return fmt.Errorf("signed log buckets: %d buckets, max distance %d (bidirectional %v): need 4 or more buckets, a max distance above half of them plus one, and no bidirectional split", p.NumBuckets, p.MaxDistance, p.Bidirectional)
		}
		return nil
	}
	nb := p.NumBuckets
	if p.Bidirectional {
		nb /= 2
	}
	if p.NumBuckets < 2 || p.Bidirectional && p.NumBuckets%2 != 0 || nb < 2 || p.MaxDistance <= nb/2 || p.MaxDistance > 1<<24 {
		return fmt.Errorf("relative buckets: %d buckets (bidirectional %v), max distance %d: need an even count ≥ 4 when bidirectional, ≥ 2 otherwise, and a max distance above half the buckets of a side", p.NumBuckets, p.Bidirectional, p.MaxDistance)
	}
	return nil
}

// Bucket is the bucket of query position q and key position k.
func (p BucketParams) Bucket(q, k int) int {
	n := q - k
	if p.SignedLog {
		return p.signedLog(n)
	}
	nb, ret := p.NumBuckets, 0
	if p.Bidirectional {
		nb /= 2
		if n < 0 {
			ret += nb
		}
		n = max(n, -n)
	} else {
		n = max(n, 0)
	}
	exact := nb / 2
	if n < exact {
		return ret + n
	}
	// torch: log(n.float() / max_exact) / math.log(max_distance / max_exact) * (nb − max_exact), in f32
	l := float32(math.Log(float64(float32(n) / float32(exact))))
	v := l / float32(math.Log(float64(p.MaxDistance)/float64(exact))) * float32(nb-exact)
	return ret + min(exact+int(v), nb-1)
}

// signedLog is DeBERTa's bucket of the offset n (SignedLog).
func (p BucketParams) signedLog(n int) int {
	mid := p.NumBuckets / 2
	a := max(n, -n)
	if a <= mid {
		return n
	}
	ratio := float32(math.Log(float64(float32(a) / float32(mid))))
	span := float32(math.Log(float64(float32(float64(p.MaxDistance-1) / float64(mid)))))
	b := mid + int(math.Ceil(float64(ratio/span*float32(mid-1))))
	if n < 0 {
		return -b
	}
	return b
}

// relBucketHost makes the [Sq, Sk] bucket ids of query positions q [Sq]
// and key positions k [Sk] (integers), stored f32 (ids: exact whatever
// the activations' format). A host step: the table is Sq·Sk integers.
func relBucketHost(b exec.Backend, q, k exec.Tensor, p BucketParams) (exec.Tensor, error) {
	if err := p.check(); err != nil {
		return nil, err
	}
	qs, err := b.Download(q)
	if err != nil {
		return nil, err
	}
	ks, err := b.Download(k)
	if err != nil {
		return nil, err
	}
	out := make([]float32, len(qs)*len(ks))
	for i, x := range qs {
		for j, y := range ks {
			if x != float32(math.Trunc(float64(x))) || y != float32(math.Trunc(float64(y))) || math.Abs(float64(x)) > 1<<24 || math.Abs(float64(y)) > 1<<24 {
				return nil, fmt.Errorf("relative buckets: positions %g, %g are not integers an f32 holds", x, y)
			}
			out[i*len(ks)+j] = float32(p.Bucket(int(x), int(y)))
		}
	}
	return b.Upload(out, []int{len(qs), len(ks)}, precision.F32)
}
