package program

import (
	"slices"
	"testing"

	"github.com/zflow/zflow/exec/cpu"
	"github.com/zflow/zflow/precision"
)

// TestRelBucketHost: MPNet's table (32 buckets, max distance 128,
// bidirectional) at 12 positions, as the real transformers trace holds
// it; T5's causal buckets computed by hand; bad parameters and
// non-integer positions refused.
func TestRelBucketHost(t *testing.T) {
	b := cpu.New(1)
	pos := make([]float32, 12)
	for i := range pos {
		pos[i] = float32(i)
	}
	x, err := b.Upload(pos, []int{12}, precision.F32)
	if err != nil {
		t.Fatal(err)
	}
	p := BucketParams{NumBuckets: 32, MaxDistance: 128, Bidirectional: true}
	y, err := relBucketHost(b, x, x, p)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := b.Download(y)
	// rows: queries; columns: keys (the trace's
	// encoder.relative_attention_bias/arg0 of mpnet-f32)
	want := [][]float32{
		{0, 17, 18, 19, 20, 21, 22, 23, 24, 24, 24, 24},
		{1, 0, 17, 18, 19, 20, 21, 22, 23, 24, 24, 24},
		{2, 1, 0, 17, 18, 19, 20, 21, 22, 23, 24, 24},
		{3, 2, 1, 0, 17, 18, 19, 20, 21, 22, 23, 24},
		{4, 3, 2, 1, 0, 17, 18, 19, 20, 21, 22, 23},
		{5, 4, 3, 2, 1, 0, 17, 18, 19, 20, 21, 22},
		{6, 5, 4, 3, 2, 1, 0, 17, 18, 19, 20, 21},
		{7, 6, 5, 4, 3, 2, 1, 0, 17, 18, 19, 20},
		{8, 7, 6, 5, 4, 3, 2, 1, 0, 17, 18, 19},
		{8, 8, 7, 6, 5, 4, 3, 2, 1, 0, 17, 18},
		{8, 8, 8, 7, 6, 5, 4, 3, 2, 1, 0, 17},
		{8, 8, 8, 8, 7, 6, 5, 4, 3, 2, 1, 0},
	}
	if !slices.Equal(y.Shape(), []int{12, 12}) || !slices.Equal(got, slices.Concat(want...)) {
		t.Errorf("mpnet buckets %v:\n%v", y.Shape(), got)
	}
	// causal (T5's decoder): n = max(q − k, 0), 16 exact, then
	// 16 + ⌊ln(n/16)/ln(128/16)·16⌋ capped at 31
	c := BucketParams{NumBuckets: 32, MaxDistance: 128}
	for _, tc := range []struct{ q, k, want int }{{0, 5, 0}, {5, 0, 5}, {15, 0, 15}, {20, 0, 17}, {64, 0, 26}, {200, 0, 31}} {
		if got := c.Bucket(tc.q, tc.k); got != tc.want {
			t.Errorf("causal bucket(%d, %d) = %d, want %d", tc.q, tc.k, got, tc.want)
		}
	}
	for _, bad := range []BucketParams{{NumBuckets: 31, MaxDistance: 128, Bidirectional: true}, {NumBuckets: 32, MaxDistance: 4, Bidirectional: true}, {}} {
		if _, err := relBucketHost(b, x, x, bad); err == nil {
			t.Errorf("%+v: no error", bad)
		}
	}
	half, _ := b.Upload([]float32{0.5}, []int{1}, precision.F32)
	if _, err := relBucketHost(b, half, x, p); err == nil {
		t.Error("position 0.5: no error")
	}
}

// TestSignedLogBuckets: DeBERTa's make_log_bucket_position against torch
// 1.13's own ids (the formula run in torch, CPU): offsets in the exact
// zone kept, log-spaced ones with their sign, at a small table (16
// buckets, positions up to 64) and DeBERTa-v3's (256, 512).
func TestSignedLogBuckets(t *testing.T) {
	cases := []struct {
		nb, md  int
		n, want []int
	}{
		{16, 64, []int{0, 5, 8, 9, 10, 11, 18, -9, -18}, []int{0, 5, 8, 9, 9, 10, 11, -9, -11}},
		{256, 512, []int{127, 128, 129, 130, 200, 511, 1000, -129, -300}, []int{127, 128, 129, 130, 169, 255, 317, -129, -207}},
	}
	for _, c := range cases {
		p := BucketParams{NumBuckets: c.nb, MaxDistance: c.md, SignedLog: true}
		if err := p.check(); err != nil {
			t.Fatal(err)
		}
		for i, n := range c.n {
			if got := p.Bucket(n, 0); got != c.want[i] {
				t.Errorf("%d buckets, max %d: offset %d → %d, torch %d", c.nb, c.md, n, got, c.want[i])
			}
		}
	}
	if err := (BucketParams{NumBuckets: 16, MaxDistance: 9, SignedLog: true}).check(); err == nil {
		t.Error("a max distance inside the exact zone accepted")
	}
}
