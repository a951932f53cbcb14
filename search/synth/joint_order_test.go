package synth

import "testing"

// TestJointOrderByPatches: the joint order is named by which stream holds
// the latents' patches, not by which is longer: a caption longer than the
// image it describes (5 text rows over 4 patch rows) joined image first is
// image_first. Where the patches do not tell (not captured, or both or
// neither stream of their rows) the shorter stream is taken as the text.
func TestJointOrderByPatches(t *testing.T) {
	for _, tc := range []struct {
		name            string
		patchRows       int
		mineFirst       bool
		rows, otherRows int
		label           bool
		want            string
	}{
		{"image scored, first, fewer rows than the caption", 4, true, 4, 5, true, "image_first"},
		{"image scored, last, fewer rows than the caption", 4, false, 4, 5, true, "text_first"},
		{"caption scored, first, more rows than the image", 4, true, 5, 4, true, "text_first"},
		{"caption scored, last, more rows than the image", 4, false, 5, 4, false, "image_first"},
		{"image scored, first, more rows than the caption", 16, true, 16, 4, true, "image_first"},
		{"no patches: the shorter stream is the text", 0, true, 4, 5, true, "text_first"},
		{"no patches: the longer stream first", 0, true, 16, 4, true, "image_first"},
		{"equal rows, named as before (label)", 4, true, 4, 4, true, "text_first"},
		{"equal rows, named as before (tie)", 4, true, 4, 4, false, "image_first"},
	} {
		s := &synth{patchRows: tc.patchRows}
		if got := s.jointOrder(tc.mineFirst, tc.rows, tc.otherRows, tc.label); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}
