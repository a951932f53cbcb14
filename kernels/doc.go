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
// The row kernels (zf_norm_seq, zf_linear_seq, zf_attention_seq) give
// Norm, Linear and Attention to a backend that has no kernels of its own
// for them (metal): one thread an output row (or, for Linear, an output),
// every reduction done sequentially in exec/cpu's order (norm statistics:
// f64 sums in element order; GEMM: f32 products added in k order from +0;
// attention: q·k in element order, max, exp sum and P·v in key order, with
// each exec.Spec rounding point the CPU has), so no shared memory or
// barrier is needed and the Host rendering runs them exactly as a GPU
// would. rows.go turns an op's arguments and Spec into their parameter
// blocks, refusing what they do not compute (a norm's RoundStats and
// MathWelford, heads wider than AttnDMax, indices past int32). Metal has
// no f64, so the norm statistics use an IEEE binary64 add, multiply and
// divide written in 64-bit integer arithmetic (zf_d_*) and a correctly
// rounded integer square root: the same bits as Go's float64 on every
// target (host_f64_test.go checks them against Go on 1.6 million cases).
// They are written for correctness, not speed.
//
// The cooperative kernels (tiles.zf, launch geometry in tiles.go) are
// the row kernels' arithmetic with their operands staged in group memory
// (threadgroup memory on Metal, shared memory on CUDA): zf_linear_tiled,
// a GEMM of 64 × 64 output blocks a group of 256 threads, k in tiles of
// 16 held as f32, each thread's 16 outputs summed in k order from +0
// (tensor-core sums: the same blocks of 16), so its bits are
// zf_linear_seq's; zf_attention_tiled, 32 query rows of a head a group of
// 256 threads, K and V tiles of up to 64 keys (16 at head dim 256) loaded
// once for all 32 rows, each score, maximum, sum and P·V element computed
// by one thread in key order, so its bits are zf_attention_seq's; and
// zf_attention_flash, the same tiles in one pass with a running maximum
// and rescaled f32 sums, not bit-exact: within FlashBound of the CPU
// backend under the same Spec (rel-RMS 1e-3 for 16-bit outputs, 1e-5
// for f32 ones, 1e-2 under RoundWeights, whose weights it rounds against
// the running maximum), and used only where Flash allows, as the CUDA
// backend chooses its flash kernels. They need the target words of
// cooperative kernels (ZF_SHARED, ZF_BARRIER, ZF_LID, ZF_GROUP_ID, …). The
// Host target emulates them honestly rather than not at all: a launch's
// threads of one group run as that many host threads (std::thread), one
// group after another, group memory is the kernel's static arrays, and a
// barrier is a real one (a generation word the threads wait on, C++20's
// atomic wait; the host rendering compiles as C++20), so the Host
// tests run the very text CUDA and Metal run, barriers and races
// included (host_rows_test.go runs every linear and attention case on the
// tiled kernels too, bit for bit; host_flash_test.go holds the flash
// kernel to its bound). Such a run is slower than a plain one (a barrier
// wakes 256 host threads) and proves nothing about a GPU's memory ordering beyond what a
// barrier promises.
//
// Epilogues (epilogue.go): an Epilogue is a chain of the vocabulary's
// pointwise steps (bias, activation, GLU, gate multiply, gated residual,
// modulate, cast, …) over one input, a GEMM's or a norm's stored output,
// as data. It renders as one kernel (and two device functions, so that a
// backend's own kernel, cuda's norm, can apply it where it stores) that
// calls zf_step, the function zf_elementwise computes every unfused step
// with, once a step, and rounds the value to each step's format where the
// unfused op would have stored it: fused and unfused share every line of
// arithmetic, so they cannot disagree (epilogue_test.go checks them equal
// byte for byte on the Host rendering). RenderEpilogues compiles
// pointwise.zf's functions alone with the chains, not its kernels. With
// Table set, an activation whose input is a bf16 value and whose result
// is stored in 16 bits (TableStep) is read from a table of its 2¹⁶
// results, which N_tab makes with the very zf_step call the chain would
// make: the same function at every input it can meet, not an
// approximation (TestEpilogueTable checks all 65,536 inputs). A rope
// step (OpRope, interleaved pairs) reads its partner from the 8 values
// N_eight holds, so a rope chain runs in N_eight only (HasRope;
// TestEpilogueRope checks it against zf_rope_kernel).
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
//     residuals, GLU with relu/identity, norm finishing, rope, the row
//     kernels' norm and linear) is the same f32 (and integer) arithmetic
//     and so bit-exact, given IEEE f32 division, f32 subnormals kept and no
//     product contracted into an FMA, none of which has been checked on a
//     Mac. Attention's softmax goes through exp (and tanh for a soft-cap),
//     so Metal's attention is within a few f32 ulps, not bit-exact.
//   - Host: C++ for the machine running the tests (a C++ compiler, no GPU),
//     used by this package's tests to check the source's semantics against
//     the CPU backend bit for bit (host_test.go, host_rows_test.go); the
//     cooperative kernels' groups run as host threads (compile with
//     -pthread).
package kernels
