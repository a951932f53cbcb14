//go:build amd64 && !purego

package cpu

import "golang.org/x/sys/cpu"

//go:noescape
func microAVX(kl int, ap, bp, c *float32, ldc int)

// hasAVX is read once at start-up; it never changes afterwards.
var hasAVX = cpu.X86.HasAVX

// microFast is the AVX kernel when the CPU has AVX, else microGo. Both give
// bit-identical results.
func microFast() microKernel {
	if !hasAVX {
		return microGo
	}
	return func(kl int, ap, bp, c []float32, ldc int) {
		_ = ap[kl*mr-1]
		_ = bp[kl*nr-1]
		_ = c[3*ldc+nr-1]
		microAVX(kl, &ap[0], &bp[0], &c[0], ldc)
	}
}
