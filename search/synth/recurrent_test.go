package synth

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestUnseenRecurrent: torch.nn's recurrent layers (torch 1.13's LSTM,
// GRU and RNN, fixtures/unseen/torch_rnn) are read as recurrence nodes:
// a two-layer bidirectional LSTM is four, joined by direction; each
// layer's cell and axis order are factors, decisive, scored on every
// reading; the final states h_n are made (slices of the outputs) and
// LSTM's cells c_n, which no op returns and nothing reads, are listed as
// not computed (TestUnseenArchitectures checks generation).
func TestUnseenRecurrent(t *testing.T) {
	res, _ := discoverComplete(t, filepath.Join("..", "..", "fixtures", "unseen", "torch_rnn-f32.npz"))
	cells := map[string]int{}
	reverse := 0
	for _, nd := range res.Doc.Program.Nodes {
		if nd.Op == "recurrence" && nd.Attrs.Recurrence != nil {
			cells[nd.Attrs.Recurrence.Cell]++
			if nd.Attrs.Recurrence.Reverse {
				reverse++
			}
		}
	}
	if cells["lstm"] != 4 || cells["gru"] != 1 || cells["relu"] != 1 || cells["tanh"] != 1 || reverse != 2 {
		t.Errorf("recurrence nodes %v, %d reversed; want 4 lstm (2 reversed), 1 gru, 1 relu, 1 tanh", cells, reverse)
	}
	want := map[string][2]any{ // scope suffix → cell, batch first
		".lstm": {"lstm", true}, ".gru": {"gru", false}, ".relu_rnn": {"relu", true}, ".tanh_rnn": {"tanh", true},
	}
	for suffix, w := range want {
		got := map[string]bool{}
		for _, f := range res.Doc.Factors {
			if !strings.HasSuffix(f.Scope, suffix) {
				continue
			}
			switch {
			case f.Name == "recurrent_cell" && f.Value == w[0], f.Name == "recurrent_batch_first" && f.Value == w[1]:
				if !f.Decisive || len(f.Candidates) == 0 {
					t.Errorf("%s %s = %v: not decisive, or no candidates (%v)", suffix, f.Name, f.Value, f.Candidates)
				}
				got[f.Name] = true
			}
		}
		if !got["recurrent_cell"] || !got["recurrent_batch_first"] {
			t.Errorf("%s: factors found %v, want recurrent_cell %v and recurrent_batch_first %v", suffix, got, w[0], w[1])
		}
	}
	for _, f := range res.Doc.Factors {
		if f.Name == "recurrent_cell" && (f.Value == "tanh" || f.Value == "relu") && len(f.Candidates) != 2 {
			t.Errorf("%s: an RNN's cell scored over %v, want tanh and relu", f.Scope, f.Candidates)
		}
	}
	notComputed := 0
	for _, u := range res.Doc.Undetermined {
		if strings.Contains(u.Reason, "/out.1") {
			notComputed++
			if !strings.Contains(u.Reason, "lstm/out.1.1") {
				t.Errorf("undetermined %q: only LSTM's c_n (out.1.1) should be left", u.Reason)
			}
		}
	}
	if notComputed != 1 {
		t.Errorf("%d final states not computed, want 1 (LSTM's c_n)", notComputed)
	}
}
