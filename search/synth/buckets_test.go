package synth

import (
	"strings"
	"testing"

	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/precision"
)

// TestSignedLogBuckets plants DeBERTa's relative positions of 19 rows
// (16 buckets, max distance 64: SEW-D's ids, offsets past 8 log-spaced
// with their sign) as integer ids [1, 19, 19]: explained as signed log
// buckets, max distance 64 among those that fit. The same ids with one
// row's offsets shifted are not a function of q − k and are not.
func TestSignedLogBuckets(t *testing.T) {
	const n = 19
	p := program.BucketParams{NumBuckets: 16, MaxDistance: 64, SignedLog: true}
	for _, broken := range []bool{false, true} {
		ids := make([]float32, n*n)
		for q := range n {
			for k := range n {
				ids[q*n+k] = float32(p.Bucket(q, k))
				if broken && q == 3 {
					ids[q*n+k] = float32(p.Bucket(q+1, k))
				}
			}
		}
		s, _, target := planted(t, precision.F32, []int{1, n, n}, ids)
		target.intType = true
		v := s.relBuckets(target)
		if broken {
			if v != nil {
				t.Errorf("ids not of q − k explained as %s", describe(v))
			}
			continue
		}
		if v == nil || relRMS(precision.F32, v.data, target.data) != 0 {
			t.Fatal("DeBERTa's signed log buckets not explained")
		}
		if d := describe(v); !strings.Contains(d, "signed log true") || !strings.Contains(d, "max distance 64") {
			t.Errorf("explained as %s", d)
		}
	}
}
