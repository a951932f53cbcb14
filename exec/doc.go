// Package exec is zflow's op vocabulary and its precision model: the
// Backend interface every runtime implements (backend.go), the precision
// spec each op takes (spec.go), the explicit compositions a backend may
// fall back on (fallback.go), the host-side math every backend must agree
// with (pointwise.go, timestep.go, ropetable.go) and the flow-matching
// Euler sampler (sampler.go). The CPU reference backend is exec/cpu.
//
// # Values and storage
//
// A Tensor has a shape and a storage format: f32, bf16 or f16 (f64 is
// accepted and behaves as f32 storage; no op computes in f64). Every stored
// value is exactly a value of its format. Widening a bf16 or f16 value to
// f32 is exact, so an op reads its inputs exactly whatever their formats.
//
// # Arithmetic
//
// Every op computes in f32 — PyTorch's "opmath" for bf16 and f16 tensors on
// CPU and CUDA — with IEEE round-to-nearest-even at each f32 operation, in
// the order the op's documentation gives. Go code never fuses a multiply
// and an add into an FMA here (each product is converted with float32()
// before it is added, which the Go spec says prevents fusion), so results
// are the same on every architecture.
//
// Exceptions, each stated where it applies:
//   - Norm statistics (mean, variance or mean square) are summed in f64 and
//     rounded to f32; 1/√(var + eps) is then computed in f32. PyTorch sums
//     in f32 (Welford or cascade); the two agree to an f32 ulp or so.
//   - exp, tanh, erf, sin and cos are correctly rounded to f32 (computed in
//     f64, then rounded) unless Spec.Math asks for a variant. PyTorch's CPU
//     kernels (Sleef, ≤1 ulp) and CUDA's expf/sinf (≤2 ulp) are not always
//     correctly rounded, so an f32 result may differ from theirs by an ulp;
//     after rounding to bf16 this almost never shows.
//   - GEMM (Linear, attention's two products) sums in k order, each product
//     rounded to f32 before it is added; cuBLAS, MKL and oneDNN use other
//     orders and FMAs, so sums differ in the last f32 bits.
//
// # Rounding
//
// An op's Spec says where the result is rounded to the storage format:
//
//   - Spec.Out: the result is rounded once, at the end. This is one PyTorch
//     op on tensors of that format: F.silu(x_bf16) = bf16(silu(f32(x))),
//     LayerNorm on bf16 CUDA tensors (statistics in f32, one rounding),
//     torch.nn.RMSNorm's fused kernel, a Linear with its bias (cuBLAS adds
//     the bias in f32 in the epilogue), SDPA's output.
//   - Spec.Round adds internal rounding points: an intermediate rounded to
//     Spec.Out, as when the op is written as several PyTorch ops on tensors
//     of that format. RoundEach rounds after every primitive: modulate
//     written as x * (1 + scale) + shift in bf16 rounds 1+scale, the
//     product and the sum. The named points (RoundNormalized, RoundScale,
//     RoundProduct, RoundGate, RoundBeforeBias, RoundScores, RoundProbs,
//     RoundWeights) pick single ones; each op's comment in backend.go says
//     which it has. HF Llama's RMSNorm and diffusers' RMSNorm compute x̂ in
//     f32, cast it to the activation format, then multiply by γ: that is
//     Spec{Out: BF16, Round: RoundNormalized}.
//   - Spec.Math picks variants of the transcendental functions and of
//     division (MathFastExp, MathRecipDiv), and of a layer norm's reduction
//     (MathWelford: PyTorch's CUDA kernel's order, moments.go).
//   - Some references are not "one op rounded once" inside a kernel:
//     PyTorch ≤ 1.13's CPU kernels on bf16 compute in bf16 arithmetic.
//     Act with RoundEach composes the activation of rounded primitives
//     (ActivateComposed); RoundStats gives a layer norm that kernel's
//     statistics (NormStats); RoundAccum keeps attention's P·v sum in the
//     storage format. Each reproduces the kernel bit for bit
//     (exec/cpu/testdata/torch113_bf16.txt).
//
// Movement ops (Reshape, Permute, Slice, Concat, Chunk, Patchify) never
// round: they keep their input's format. Cast rounds and does nothing else.
//
// # Defaulted extensions
//
// Backend = Basic + Extended. A backend implements Basic itself; for
// Extended it may embed Fallback, which composes each op from Basic ops and
// honours the Spec exactly (an intermediate the Spec does not round is
// kept in f32, which is what a fused f32 kernel computes; one it does round
// is stored in the output format). exec/cpu's tests check that its fused
// kernels and these compositions agree bit for bit. A backend that cannot
// run a request returns an error wrapping ErrUnsupported; none
// approximates.
//
// # Fusion
//
// A Region (fuse.go) is a linear or a norm followed by a chain of
// pointwise ops whose intermediates nothing else reads. The interpreter
// (exec/program) offers each one it finds, by its ops alone, to a backend
// that implements the optional Fuser interface; the backend runs it its
// own way (cuda: one GEMM plus one epilogue kernel) or declines. A fused
// region returns RunUnfused's result bit for bit: it rounds wherever the
// op-by-op chain would have stored. exec/cpu does not implement Fuser.
//
// # Layouts
//
// Linear weights are [out, in] (PyTorch). Attention takes q [B, Sq, H·D]
// and k, v [B, Sk, KV·D] and returns [B, Sq, H·D]; query head h reads
// key/value head h/(H/KV) (HF's repeat_kv). Rope rotates x [B, S, H·D]
// with tables [S, R] or [B, S, R] whose entries are per element (each
// frequency repeated for its pair). Conditioning vectors [B, D] broadcast
// over the sequence of x [B, S, D] (CondShape).
package exec
