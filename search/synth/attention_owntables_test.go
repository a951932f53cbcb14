package synth

import (
	"path/filepath"
	"testing"
)

// TestPlantedOwnTables: own_tables.npz's cross-attentions rotate q by
// the query stream's table and k by the key stream's; the program must
// read each attention so (its two RoPE nodes on different tables, each
// with its operand's rows), where one table for both explains nothing.
func TestPlantedOwnTables(t *testing.T) {
	res, _ := discoverComplete(t, filepath.Join("..", "..", "fixtures", "constructs", "own_tables.npz"))
	pg := res.Doc.Program
	made := map[string]int{} // a node's output: its index
	for i, n := range pg.Nodes {
		for _, o := range n.Out {
			made[o] = i
		}
	}
	own := 0
	for _, n := range pg.Nodes {
		if n.Op != "attention" {
			continue
		}
		q, qok := made[n.In[0]]
		k, kok := made[n.In[1]]
		if !qok || !kok || pg.Nodes[q].Op != "rope" || pg.Nodes[k].Op != "rope" {
			continue
		}
		if pg.Nodes[q].In[1] == pg.Nodes[k].In[1] {
			t.Errorf("attention %v: q and k rotated by one table %s", n.In, pg.Nodes[q].In[1])
			continue
		}
		own++
	}
	if own != 2 {
		t.Errorf("%d attentions with q and k on their own tables, want 2 (a2v, v2a)", own)
	}
}
