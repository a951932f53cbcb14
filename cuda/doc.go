// Package cuda is zflow's CUDA backend: exec.Backend on an NVIDIA GPU,
// with no cgo. It loads the driver (libcuda.so.1), NVRTC and cuBLASLt at
// run time through purego, compiles the kernels of package kernels (the one
// pointwise source, rendered as CUDA C) plus this package's norm and
// attention kernels with NVRTC for the device's own architecture, and runs
// GEMMs through cuBLASLt (f32 accumulation, bf16/f16/f32 in and out).
//
// Precision: every op implements the exec.Spec the CPU backend implements.
// The pointwise ops (cast, add, mul, act, modulate, gated residual, GLU,
// rope, timestep embedding) and the norms are bit-exact with exec/cpu:
// the same f32 operations in the same order, no FMA contraction (the
// pointwise module is compiled with --fmad=false), exp/tanh/erf/sin/cos
// evaluated in f64 and rounded, as the CPU reference does; norm statistics
// are f64 sums (exact for typical activations, so the order of summation
// does not show), rounded to f32 as on the CPU; a MathWelford layer norm
// reduces as PyTorch's CUDA kernel does (norm_welford.go); RoundMoments rounds
// the mean and rstd to x's format (a group norm's), run unfused. GEMMs are cuBLASLt's (f32
// accumulation in its own order): within f32 rounding of the CPU. Attention
// has two kernels: for bf16/f16 inputs with head dim 64 or 128 a
// flash-style tensor-core kernel (f32 scores and softmax, the unnormalised
// weights rounded to the input format before ·V and divided by their f32
// sum after: the Spec's RoundWeights, whatever the Spec asks); otherwise,
// or when the Spec asks for RoundProbs, RoundEach or RoundQuery (q·scale
// rounded before q·kᵀ), an exact kernel that
// computes each query row in the CPU's order (bit-exact, slow; q·k and the
// weights·v as exec.DotMMA sums them under MathTensorCore; under
// exec.MathOnlineSoftmax it walks the keys in the CPU's tiles of 128, its
// rounded weights from the GPU's own ex2.approx, which the CPU's table was
// measured from; the flash kernels run their own online softmax, not
// bit-exact, as for every Spec; $ZFLOW_EXACT_ATTENTION=1 sends every
// attention to the exact kernel, for a run bit-exact with the CPU). Both
// kernels take the whole score chain of exec.Backend's Attention: causal
// sliding windows (the flash kernel skips the key tiles before a block's
// window), the soft-cap (tanh through f64, as the CPU's), ALiBi (slopes from
// exec.ALiBiSlopes, uploaded per call) and an additive bias of any format
// and broadcast; the flash kernel rounds the scores at most once, after all
// of it (RoundScores), and RoundEach goes to the exact kernel.
//
// The flash path has two kernels. Everywhere, an mma.sync kernel
// (FlashAttention-2 style, attention_src.go). On sm_90 (H100, H200), a
// Hopper kernel (FlashAttention-3 style, attention_hopper_src.go, built for
// sm_90a): two consumer warpgroups of 64 query rows a block, S = Q·Kᵀ and
// O += P·V as wgmma (P from registers, V read MN-major through its
// descriptor), the next tile's Q·Kᵀ issued with this tile's P·V so that
// the softmax runs while the tensor cores work. By default a producer
// warpgroup loads Q, K and V with TMA (tensor maps encoded per call) into
// 128-byte-swizzled stages guarded by mbarriers, setmaxnreg moves its
// registers to the consumers, the consumers take turns at the tensor cores
// (named barriers), and a persistent grid walks the tiles; the older
// cp.async variant (every thread copies, a __syncthreads a tile) stays for
// A/B runs ($ZFLOW_HOPPER_ATTN=cp; ws: warp-specialised, not persistent)
// and for tensors a tensor map cannot describe. Both compile one text for
// the score chain and the softmax (hopperSteps), whose arithmetic is the
// mma.sync kernel's but for f32 rounding inside the softmax and the f32
// summation order: the exponent of a weight is one fma, 2^(x·f − m) with
// f = scale·log2 e for a plain chain (a positive scale; others go to the
// mma.sync kernel) or log2 e after the chain, where the mma.sync kernel
// rounds x·f before it subtracts, and O is multiplied by the reciprocal
// of the row sum where the mma.sync kernel divides; the rounding points of
// the Spec (scores, weights, output) are the same. It takes no mask,
// causal and explicit masks, grouped KV heads, score rounding, sliding
// windows, soft-caps, ALiBi and bias tensors. SetHopperAttention(false) or $ZFLOW_HOPPER_ATTN=0 sends
// everything to the mma.sync kernel (A/B runs); HopperAttention says
// whether the Hopper kernel is in use and, if not, why (a compile failure
// turns it off with the reason kept).
//
// Fusion (fuse.go): the backend implements exec.Fuser. A region (a linear
// or a norm and a chain of pointwise steps) runs as the unfused route's
// own Linear call plus one epilogue kernel, or as one norm kernel that
// applies the chain where it stores (kernels.Epilogue, compiled per chain
// on first use), bit-exact with the unfused route; a region kind is
// timed both ways the first time it is met and fused only where faster.
// A linear's epilogue of 2²⁰ elements or more reads its activation from
// a table of the 2¹⁶ bf16 inputs' results kept in each block's shared
// memory (kernels.Epilogue.TableStep; $ZFLOW_EPI_TABLE=0 computes it).
// A join of norms (join(norm, …) → rope: joint attention's per-head q/k
// norms, the streams joined, then RoPE) runs either as one norm kernel a
// part writing its rows of the joined value with the chain applied where
// it stores, or as the parts' plain norms written into the joined value
// and then the chain's epilogue kernel; both forms are timed and the
// fastest of the three routes kept (FusionRecord.Route). A join with no
// chain has its parts (linears through the same GEMM call, or norms)
// write their rows of the joined value, the concat's copies saved. The
// norm kernels are compiled with __launch_bounds__(256, 4)
// ($ZFLOW_NORM_MINB: 0 for the compiler's choice).
// $ZFLOW_UNFUSED=1 forces the unfused route, $ZFLOW_FUSED=1 fuses without
// measuring; SetFusion sets either in code and Fusions reports what was
// measured.
//
// Memory: device buffers come from a pool keyed by rounded size and go back
// to it on Free; a weight uploaded once stays resident until freed. All
// work runs in order on the context's null stream; Download synchronises.
//
// New fails with an error wrapping exec.ErrUnsupported that names what is
// missing (no driver library, no GPU, no NVRTC, no cuBLASLt) on machines
// without them; tests skip there.
package cuda
