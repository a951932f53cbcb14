package synth

import (
	"fmt"
	"slices"

	"github.com/zflow/zflow/exec/program"
	"github.com/zflow/zflow/precision"
	"github.com/zflow/zflow/trace"
)

// usualDistances are the max distances relative-bucket models ship with,
// preferred in this order where several reproduce the ids (a short
// sequence does not reach the log-spaced buckets that tell them apart).
var usualDistances = []int{128, 256, 512, 1024, 2048, 64, 32, 16, 4096}

// relBuckets explains integer ids t [.., Sq, Sk] (leading axes of 1) that
// no other form makes as T5's relative position buckets of the positions
// 0…Sq−1 and 0…Sk−1 (MPNet's, and a T5 encoder's): bidirectional or not,
// the number of buckets read from the rows of the table the ids index (the
// call that reads them, in the call tree) or from the ids themselves (a
// bidirectional table's first key after the query is bucket nb/2 + 1),
// the max distance fitted: every distance that reproduces the ids is
// found, and the usual one among them kept (the evidence says which
// distances fit). Tried only for integer targets nothing else explains;
// where Sk > Sq the queries may sit centred among the keys (positions
// (Sk−Sq)/2…: block-local attention's ids), tried where 0… fails.
func (s *synth) relBuckets(t *val) *val {
	shape := slices.Clone(t.shape)
	for len(shape) > 2 && shape[0] == 1 {
		shape = shape[1:]
	}
	if len(shape) != 2 || shape[0] < 2 || shape[1] < 2 || !t.integral() {
		return nil
	}
	sq, sk := shape[0], shape[1]
	if slices.ContainsFunc(t.data, func(x float32) bool { return x < 0 }) {
		return s.signedLogBuckets(t, sq, sk)
	}
	if v := s.relBucketsAt(t, sq, sk, 0); v != nil || sk <= sq || (sk-sq)%2 != 0 {
		return v
	}
	// queries centred among the keys: a block of queries over the block
	// before it, its own and the one after (block-local attention's ids)
	return s.relBucketsAt(t, sq, sk, (sk-sq)/2)
}

// relBucketsAt is relBuckets with query positions off…off+Sq−1.
func (s *synth) relBucketsAt(t *val, sq, sk, off int) *val {
	mx := 0
	for _, x := range t.data {
		if x < 0 {
			return nil
		}
		mx = max(mx, int(x))
	}
	if mx < 2 || mx > 1024 {
		// (bucket tables hold tens of rows; ids in the thousands are
		// tokens, not buckets)
		return nil
	}
	// bucket counts to try: the table's rows, then what the ids allow
	var counts []int
	if rows := s.indexedRows(t); rows > mx {
		counts = append(counts, rows)
	}
	for nb := mx + 1; nb <= 2*mx+2; nb++ {
		if !slices.Contains(counts, nb) {
			counts = append(counts, nb)
		}
	}
	at := func(q, k int) int { return int(t.data[q*sk+k]) }
	for _, nb := range counts {
		for _, bidir := range []bool{true, false} {
			p := program.BucketParams{NumBuckets: nb, Bidirectional: bidir}
			side := nb
			if bidir {
				side /= 2
			}
			exact := side / 2
			if exact < 1 || bidir && nb%2 != 0 {
				continue
			}
			// the exact buckets (|q − k| below half a side) do not depend
			// on the distance
			p.MaxDistance = exact + 1
			small := true
			for q := 0; q < sq && small; q++ {
				for k := 0; k < sk; k++ {
					if n := q + off - k; max(n, -n) < exact && p.Bucket(q+off, k) != at(q, k) {
						small = false
						break
					}
				}
			}
			if !small {
				continue
			}
			// every distance from exact + 1 up that gives these ids
			fits, usual := fittingDistances(p, exact+1, func(p program.BucketParams) bool {
				for q := range sq {
					for k := range sk {
						if p.Bucket(q+off, k) != at(q, k) {
							return false
						}
					}
				}
				return true
			})
			if len(fits) == 0 {
				continue
			}
			p.MaxDistance = usual
			return s.bucketsOf(t, sq, sk, off, p, fits)
		}
	}
	return nil
}

// signedLogBuckets explains integer ids t [.., Sq, Sk] with negative
// entries as DeBERTa's signed log buckets of q − k (positions 0…Sq−1 and
// 0…Sk−1): every bucket count whose exact zone (|n| up to half of it)
// reads n itself, and every max distance that reproduces the log-spaced
// ids beyond it, the usual distance kept among those that fit. Where no
// offset reaches past the exact zone, the smallest count that holds them
// all is taken (the ids do not decide it; the evidence says so).
func (s *synth) signedLogBuckets(t *val, sq, sk int) *val {
	ids := map[int]int{} // offset n = q − k → its id, one per offset
	for q := range sq {
		for k := range sk {
			id := t.data[q*sk+k]
			if id != float32(int(id)) {
				return nil
			}
			if prev, ok := ids[q-k]; ok && prev != int(id) {
				return nil // not a function of q − k
			}
			ids[q-k] = int(id)
		}
	}
	reach := max(sq, sk) - 1
	for nb := 4; nb <= 2*reach+2; nb += 2 {
		mid := nb / 2
		exact := true
		for n, id := range ids {
			if max(n, -n) <= mid && id != n {
				exact = false
				break
			}
		}
		if !exact {
			continue
		}
		if mid >= reach {
			// no offset past the exact zone: the ids are q − k
			p := program.BucketParams{NumBuckets: nb, MaxDistance: max(512, mid+2), SignedLog: true}
			return s.bucketsOf(t, sq, sk, 0, p, []int{p.MaxDistance})
		}
		p := program.BucketParams{NumBuckets: nb, SignedLog: true}
		fits, usual := fittingDistances(p, mid+2, func(p program.BucketParams) bool {
			for n, id := range ids {
				if p.Bucket(n, 0) != id {
					return false
				}
			}
			return true
		})
		if len(fits) == 0 {
			continue
		}
		p.MaxDistance = usual
		return s.bucketsOf(t, sq, sk, 0, p, fits)
	}
	return nil
}

// fittingDistances are the max distances from lo up to 4096 for which p
// reproduces the ids (ok), and the one kept: the first usual distance
// among them, else the smallest.
func fittingDistances(p program.BucketParams, lo int, ok func(program.BucketParams) bool) (fits []int, kept int) {
	for md := lo; md <= 4096; md++ {
		p.MaxDistance = md
		if ok(p) {
			fits = append(fits, md)
		}
	}
	if len(fits) == 0 {
		return nil, 0
	}
	for _, d := range usualDistances {
		if slices.Contains(fits, d) {
			return fits, d
		}
	}
	return fits, fits[0]
}

// bucketsOf emits the positions and the rel_bucket node for p and returns
// the ids in t's shape.
func (s *synth) bucketsOf(t *val, sq, sk, off int, p program.BucketParams, fits []int) *val {
	fit := fmt.Sprintf("max distance %d", fits[0])
	if len(fits) > 1 {
		fit = fmt.Sprintf("%d max distances from %d to %d reproduce them at these lengths (%d kept: the usual; the ids do not decide it)", len(fits), fits[0], fits[len(fits)-1], p.MaxDistance)
	}
	note := fmt.Sprintf("positions (made from the request's shape) of T5 relative position buckets: %d buckets, bidirectional %v, %s",
		p.NumBuckets, p.Bidirectional, fit)
	if p.SignedLog {
		note = fmt.Sprintf("positions (made from the request's shape) of signed log relative buckets (DeBERTa's): %d buckets, %s", p.NumBuckets, fit)
	}
	if off != 0 {
		note += fmt.Sprintf("; the queries at %d… among the keys (a block's queries in its 3-block window)", off)
	}
	positions := func(n, from int, what string) *val {
		v := &val{shape: []int{n}, data: make([]float32, n), format: precision.F32, origin: t.origin + "/" + what}
		for i := range v.data {
			v.data[i] = float32(from + i)
		}
		s.em.constant(v, note)
		return v
	}
	q := positions(sq, off, "query_positions")
	k := q
	if sk != sq || off != 0 {
		k = positions(sk, 0, "key_positions")
	}
	ids := s.derive(&expr{op: program.OpRelBucket, attrs: program.Attrs{Bucket: p}, args: []*val{q, k}, out: precision.F32,
		label: fmt.Sprintf("relative buckets: %d, bidirectional %v, signed log %v, max distance %d", p.NumBuckets, p.Bidirectional, p.SignedLog, p.MaxDistance)})
	if ids == nil {
		return nil
	}
	if !slices.Equal(ids.shape, t.shape) {
		ids = s.reshape(ids, t.shape)
	}
	if ids == nil || relRMS(t.format, ids.data, t.data) != 0 {
		return nil
	}
	return ids
}

// indexedRows is the row count of the table that a call reading t as
// its ids gathers from (a call with one matrix parameter whose input port
// holds t's key), 0 where none does.
func (s *synth) indexedRows(t *val) int {
	for _, c := range s.tr.Tree().Calls() {
		if len(c.Params) != 1 || !slices.ContainsFunc(c.Tensors, func(p trace.Port) bool {
			return !trace.IsResult(p.Name) && slices.Contains(t.keys, p.Key)
		}) {
			continue
		}
		if w, err := s.param(c.Params[0]); err == nil && len(w.shape) == 2 {
			return w.shape[0]
		}
	}
	return 0
}
