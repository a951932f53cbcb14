package synth

import (
	"github.com/zflow/zflow/precision"
)

// gridRopeHopeless reports whether no grid RoPE table can be within
// tolerance of the tables cosT, sinT [.., D], so fitGridRope need not
// score its candidates: every grid's first row is position 0 on every
// axis (cos 1, sin 0 exactly), so that row's distance from (1, 0) alone
// is a lower bound on every candidate's rel-RMS; and every grid of two
// rows or more turns a row other than the first (the ladder's first
// frequency is θ⁰ = 1 at a position of 1 or more), so tables that never
// turn are no grid's.
func gridRopeHopeless(cosT, sinT *val) bool {
	d := cosT.shape[len(cosT.shape)-1]
	rows := cosT.numel() / d
	turns := false
	for r := 1; r < rows && !turns; r++ {
		turns = !stillRow(cosT.data[r*d:(r+1)*d], sinT.data[r*d:(r+1)*d])
	}
	if !turns {
		return true
	}
	var dc, ds, nc, ns float64
	for i := range cosT.data {
		c, s := float64(cosT.data[i]), float64(sinT.data[i])
		nc, ns = nc+c*c, ns+s*s
		if i < d {
			dc, ds = dc+(c-1)*(c-1), ds+s*s
		}
	}
	tol := tolerance(cosT.format)
	return precision.RelRMSFromSums(dc, nc) > tol || precision.RelRMSFromSums(ds, ns) > tol
}
