package backendtest

import "github.com/zflow/zflow/exec"

// Fuser is a counting backend that implements exec.Fuser by running each
// region op by op (exec.RunUnfused) and records the regions it is offered:
// an interpreter that hands it regions must get the bits and leave alive
// the tensors of its node-by-node run.
type Fuser struct {
	*Counting
	Offered []string // each region offered, as exec.Region.String
	Decline bool     // decline every region (the interpreter runs it node by node)
}

// NewFuser wraps b.
func NewFuser(b exec.Backend) *Fuser { return &Fuser{Counting: NewCounting(b)} }

// Fuse implements exec.Fuser.
func (f *Fuser) Fuse(r exec.Region) (exec.Tensor, bool, error) {
	f.Offered = append(f.Offered, r.String())
	if f.Decline {
		return nil, false, nil
	}
	t, err := exec.RunUnfused(f.Counting, r)
	return t, err == nil, err
}
