package program

import (
	"fmt"

	"gonum.org/v1/gonum/mat"

	"github.com/zflow/zflow/exec"
)

// qrHost is Q of the reduced QR factorisation of each matrix [m, n] of x
// (torch.linalg.qr(x)[0], mode "reduced"): Householder reflections as
// LAPACK's geqrf makes them (gonum's, the same signs: R's diagonal is
// −sign of the column's leading entry), Q's first n columns formed in
// float64 and rounded once to s.Out (host step: a weight's orthogonal
// basis, a few hundred entries).
func qrHost(b exec.Backend, x exec.Tensor, s exec.Spec) (exec.Tensor, error) {
	v, err := b.Download(x)
	if err != nil {
		return nil, err
	}
	shape := x.Shape()
	m, n := shape[len(shape)-2], shape[len(shape)-1]
	out := make([]float32, len(v))
	a := mat.NewDense(m, n, nil)
	var f mat.QR
	var q mat.Dense
	for k := 0; k < len(v); k += m * n {
		for i := range m {
			for j := range n {
				a.Set(i, j, float64(v[k+i*n+j]))
			}
		}
		f.Factorize(a)
		f.QTo(&q)
		for i := range m {
			for j := range n {
				out[k+i*n+j] = s.Out.Round(float32(q.At(i, j)))
			}
		}
	}
	t, err := b.Upload(out, shape, s.Out)
	if err != nil {
		return nil, fmt.Errorf("qr: %w", err)
	}
	return t, nil
}
