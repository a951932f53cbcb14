package program

import (
	"github.com/zflow/zflow/exec"
	"github.com/zflow/zflow/semantics"
)

// attentionFromDoc and attentionToDoc convert attention attributes (the
// mask kind is converted by the callers).
func attentionFromDoc(t *semantics.AttentionAttrs) exec.AttentionParams {
	return exec.AttentionParams{Heads: t.Heads, KVHeads: t.KVHeads, Scale: float32(t.Scale),
		Window: t.Window, Block: t.Block, Softcap: float32(t.Softcap), ALiBi: t.ALiBi, ALiBiScale: float32(t.ALiBiScale)}
}

func attentionToDoc(a *exec.AttentionParams) *semantics.AttentionAttrs {
	return &semantics.AttentionAttrs{Heads: a.Heads, KVHeads: a.KVHeads, Scale: float64(a.Scale),
		Window: a.Window, Block: a.Block, Softcap: float64(a.Softcap), ALiBi: a.ALiBi, ALiBiScale: float64(a.ALiBiScale)}
}
