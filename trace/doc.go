// Package trace reads and writes zflow traces (trace format version 1,
// DESIGN.md): an .npz archive or a .safetensors file holding tensors and one
// JSON manifest that names the parameters, the request inputs and outputs and
// the call tree of the captured run.
//
// Opening a trace reads the archive directory, every tensor's header and the
// manifest, and validates them against each other; it reads no tensor data.
// The file is memory-mapped: a tensor stored uncompressed (a "stored" npz
// entry, or any safetensors tensor) is a view into the mapping, and a
// deflated npz entry is decoded on demand, one tensor at a time: whole by
// Tensor, or a chunk of the stream at a time by Values, for readers that
// go through the values in order. Options (OpenWith) bound what the
// deflated entries of one file may decode to.
//
// Everything in a trace is untrusted input. Errors name the file, the entry
// and the problem (see Error) and wrap a sentinel (ErrFormat, ErrManifest,
// ErrNotFound, ErrInexact) for errors.Is.
package trace
