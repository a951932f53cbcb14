package synth

import (
	"path/filepath"
	"testing"
)

// TestUnseenSanaVideo: the parts of SANA-Video the search met first
// there: one linear attention of 2 heads whose numerator reads two more
// operands (RoPE'd ReLU kernels, interleaved, the layout decisive against
// half), and the (3, 1) temporal convolution padded (1, 0): a conv padded
// 1 on both axes whose extra columns are cut (TestUnseenArchitectures
// checks the whole document and its generation).
func TestUnseenSanaVideo(t *testing.T) {
	res, _ := discoverComplete(t, filepath.Join("..", "..", "fixtures", "unseen", "sana_video-f32.npz"))
	pg := res.Doc.Program
	rotated, convs := 0, 0
	for _, nd := range pg.Nodes {
		switch {
		case nd.Op == "linear_attention" && nd.Attrs.LinearAttention != nil:
			if len(nd.In) != 5 || nd.Attrs.LinearAttention.Heads != 2 || nd.Attrs.LinearAttention.Kernel != "relu" {
				t.Errorf("linear attention %v over %d inputs, want relu, 2 heads, 5 inputs", nd.Attrs.LinearAttention, len(nd.In))
			}
			rotated++
		case nd.Op == "conv2d" && nd.Attrs.Conv != nil && nd.Attrs.Conv.Pad == 1 && nd.Attrs.Conv.Groups == 1:
			convs++
		}
	}
	if rotated != 1 {
		t.Errorf("%d linear attentions with numerator operands, want 1", rotated)
	}
	if convs != 1 {
		t.Errorf("%d dense convolutions padded 1, want the temporal one", convs)
	}
	found := false
	for _, f := range res.Doc.Factors {
		if f.Name == "rope_layout" && f.Value == "interleaved" {
			found = true
			if !f.Decisive || len(f.Candidates) != 2 {
				t.Errorf("rope_layout %v: want decisive over interleaved and half", f)
			}
		}
	}
	if !found {
		t.Error("no rope_layout interleaved for the linear attention")
	}
}
