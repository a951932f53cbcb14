//go:build !amd64 || purego

package cpu

// microFast is microGo where there is no assembly kernel.
func microFast() microKernel { return microGo }
