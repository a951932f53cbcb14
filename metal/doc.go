// Package metal is zflow's Metal backend for Apple GPUs, through purego's
// Objective-C runtime (no cgo): the system default device, one command
// queue, buffers in shared storage (weights resident once uploaded),
// compute pipelines built from the MSL rendering of package kernels (the
// one pointwise source, compiled with fast math off), one command buffer a
// op.
//
// It is a skeleton: the ops whose kernels are in the one source (cast,
// add, mul, act, modulate, gated residual, GLU, rope, timestep embedding,
// permute, slice, concat and the Fallback compositions) are wired; norm,
// linear and attention, whose kernels are CUDA-only so far, return errors
// wrapping exec.ErrUnsupported. Nothing in this package has been run on a
// Mac: see README.md.
package metal
