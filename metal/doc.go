// Package metal is zflow's Metal backend for Apple GPUs, through purego's
// Objective-C runtime (no cgo): the system default device, one command
// queue, buffers in shared storage (weights resident once uploaded),
// compute pipelines built from the MSL rendering of package kernels (the
// one pointwise source, compiled with fast math off), one command buffer a
// op.
//
// It is a skeleton: every op of the vocabulary is wired, the pointwise
// ones and the movement ones through the one source's pointwise kernels,
// norm through its row kernel (one thread a group, the CPU reference's
// order: correct, not fast), linear and attention through its cooperative
// kernels (tiles in threadgroup memory, each sum still in the CPU
// reference's order; attention's flash kernel where kernels.Flash allows
// it), the rest through exec.Fallback. What a kernel does not compute is refused with
// exec.ErrUnsupported. Nothing in this package has been run on a Mac: see
// README.md.
package metal
