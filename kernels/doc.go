// Package kernels holds the one source of zflow's pointwise GPU math and
// renders it for each target.
//
// pointwise.zf is written once in a small C subset: the bf16/f16
// round-to-nearest-even conversions, the activations exactly as PyTorch
// computes them in f32 (exec/pointwise.go), and the fused pointwise ops of
// the vocabulary (modulate, gated residual, GLU, norm finishing, rope,
// timestep embedding), plus the broadcast elementwise, rope, timestep and
// strided-copy kernels built on them. Render prepends a target's prelude,
// which defines the handful of target words the source uses (function and
// kernel qualifiers, buffer address spaces, bit casts, thread indexing and
// the transcendental functions), and nothing else: the arithmetic is the
// same text on every target.
//
// Targets:
//
//   - CUDA: CUDA C for NVRTC (package cuda compiles it at run time with
//     --fmad=false, so no product is contracted into an FMA). exp, tanh,
//     erf, sin and cos are computed in f64 and rounded to f32, which is the
//     correctly rounded f32 result except when the f64 value lies within
//     an f64 ulp of an f32 rounding boundary (about 2⁻²⁹ of inputs), the
//     same construction the CPU reference uses (math.Exp etc. then
//     float32): the CUDA rendering is bit-exact with exec/cpu.
//   - MSL: the Metal Shading Language (package metal compiles it with fast
//     math off). Metal has no f64, so the transcendentals are Metal's
//     precise:: functions (and a rational erf): activations that use exp,
//     tanh or erf are within a few f32 ulps of the CPU before the final
//     rounding, not bit-exact; everything else (rounding, modulate,
//     residuals, GLU with relu/identity, norm finishing, rope) is the same
//     f32 arithmetic and so bit-exact.
//   - Host: C++ for the machine running the tests (a C++ compiler, no GPU),
//     used by this package's tests to check the source's semantics against
//     the CPU backend bit for bit.
package kernels
