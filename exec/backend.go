package exec

import "github.com/zflow/zflow/precision"

// Basic is the part of the vocabulary every backend must implement itself:
// storage, movement, elementwise arithmetic, and the op classes that need a
// kernel of their own (GEMM, reductions, attention, rotations).
//
// Conventions for every op:
//   - Arithmetic is done in f32 (PyTorch's "opmath") whatever the input
//     formats; inputs are read exactly (bf16 and f16 widen exactly).
//   - s.Out is the storage format of the result; the result is rounded to it
//     once, at the end, plus at each internal point s.Round names (spec.go).
//   - A nil optional tensor (bias, γ, β, mask) means "absent".
//   - Shapes are row-major, last axis fastest. Axis arguments may be
//     negative (counted from the end, as in PyTorch).
//   - Inputs are never modified; every result is a new tensor.
//   - A backend that cannot run a request returns an error wrapping
//     ErrUnsupported that names the op and the reason; it never approximates.
type Basic interface {
	// Name is the backend's short name ("cpu", "cuda", ...).
	Name() string

	// Upload copies host values into a new tensor of the given shape stored
	// in format f; each value is rounded to f (nearest, ties to even).
	Upload(data []float32, shape []int, f precision.Format) (Tensor, error)
	// Download copies a tensor's values to the host, widened exactly to f32.
	Download(t Tensor) ([]float32, error)
	// Free releases t's storage; t must not be used afterwards. Freeing
	// nil or a view's parent while the view lives is the caller's error.
	Free(t Tensor)

	// Cast: y = round_f(x); no other rounding.
	Cast(x Tensor, f precision.Format) (Tensor, error)
	// Reshape: same values in the same order under a new shape (one -1 allowed).
	Reshape(x Tensor, shape []int) (Tensor, error)
	// Permute: y[i_perm[0], ..., i_perm[n-1]] = x[i_0, ..., i_n-1] (torch.permute).
	Permute(x Tensor, perm []int) (Tensor, error)
	// Slice: x[..., start:end, ...] along axis (0 ≤ start ≤ end ≤ dim after
	// resolving a negative axis; indices are not negative).
	Slice(x Tensor, axis, start, end int) (Tensor, error)
	// Concat: torch.cat(xs, axis); all inputs must share one format, which the
	// result keeps (no rounding).
	Concat(xs []Tensor, axis int) (Tensor, error)

	// Add: y = round(a + b), NumPy broadcasting.
	Add(a, b Tensor, s Spec) (Tensor, error)
	// Mul: y = round(a · b), NumPy broadcasting.
	Mul(a, b Tensor, s Spec) (Tensor, error)
	// Sub: y = round(a − b), NumPy broadcasting; one rounding (torch's a - b,
	// which Add(a, Mul(b, −1)) is not when the product rounds).
	Sub(a, b Tensor, s Spec) (Tensor, error)
	// Div: y = round(a / b), NumPy broadcasting, IEEE f32 division;
	// MathRecipDiv: y = round(a · f32(1/b)) (a divisor the caller knows is a
	// host scalar, as PyTorch on CUDA divides by one).
	Div(a, b Tensor, s Spec) (Tensor, error)
	// Minimum, Maximum: y = round(min(a, b)), round(max(a, b)), NumPy
	// broadcasting; NaN where either is NaN (torch.minimum, torch.maximum;
	// torch.clamp with bounds is the two of them).
	Minimum(a, b Tensor, s Spec) (Tensor, error)
	Maximum(a, b Tensor, s Spec) (Tensor, error)
	// Act: y = round(f(x)) for f in ActKind; s.Math picks exp/tanh variants;
	// RoundEach computes f as separate primitives on tensors of s.Out,
	// rounding every intermediate and constant (ActivateComposed in pointwise.go).
	Act(x Tensor, f ActKind, s Spec) (Tensor, error)

	// Linear: y = x·Wᵀ + b with W [out, in] (PyTorch), x [..., in], b [out] or
	// nil; f32 accumulation in k order (MathTensorCore: a tensor core's
	// blocks, DotMMA); RoundBeforeBias rounds x·Wᵀ to s.Out before +b.
	Linear(x, w, b Tensor, s Spec) (Tensor, error)
	// Norm: over groups of p.Group elements of the last axis (0: the whole
	// axis), layer: x̂ = (x−μ)/√(σ²+eps), rms: x̂ = x/√(mean x²+eps), stats
	// rounded to f32 (doc.go); y = x̂·(γ + p.Offset) + β, γ and β of length
	// Group (or nil).
	// RoundNormalized rounds x̂ to s.Out before the γ multiply; RoundProduct
	// rounds x̂·γ before +β; RoundScale rounds γ + Offset. RoundStats (layer
	// norms only) computes the statistics in s.Out the way PyTorch's CPU
	// kernel does for reduced-precision tensors, and x̂ = x·rstd + (−rstd·mean)
	// (NormStats in moments.go); MathWelford (layer norms only) reduces them
	// as PyTorch's CUDA kernel does (WelfordMoments in moments.go).
	// RoundMoments rounds the mean and rstd to x's format before x̂ is
	// formed (PyTorch's CUDA group norm, which keeps them in x's dtype).
	Norm(x, gamma, beta Tensor, p NormParams, s Spec) (Tensor, error)
	// Rope: for each head of x [B, S, H·D] (H = p.Heads), the first p.RotaryDim
	// elements: y = x·cos + rot(x)·sin, rot by p.Layout (interleaved:
	// (a,b)→(−b,a) on adjacent pairs; half: [x1,x2]→[−x2,x1]); cos, sin are
	// [S, RotaryDim] or [B, S, RotaryDim]; the rest of the head passes
	// through. RoundProduct rounds x·cos and rot(x)·sin before the add.
	Rope(x, cos, sin Tensor, p RopeParams, s Spec) (Tensor, error)
	// Attention (SDPA): q [B, Sq, H·D], k, v [B, Sk, KV·D] (KV = p.KVHeads
	// divides H = p.Heads; query head h reads kv head h/(H/KV)); per head
	// y = softmax(s + mask)·v with scores, in f32 and in this order,
	// s = q·kᵀ·scale (scale = p.Scale or 1/√D when 0); s = c·tanh(s/c) when
	// c = p.Softcap > 0; s += r_q(f32(slope_h·j)) when p.ALiBi (ALiBiSlopes;
	// r_q rounds to q's format); s += bias[b, h, i, j] when bias is not nil
	// (read exactly in its format; broadcast as BiasStrides says: [B, 1, Sq,
	// Sk], [1, H, 1, Sk], [B·H, 1, Sk], …). Mask per p.Mask (causal: j ≤ i,
	// and j > i − p.Window when p.Window > 0; none with p.Window > 0: the
	// band |i − j| < p.Window; none with p.Block > 0: the first Sk − Sq
	// keys for every query, the rest by blocks, ⌊i/Block⌋ = ⌊(j − P)/Block⌋
	// (AttentionParams.Block); explicit: a tensor that
	// broadcasts to [B, Sq, Sk], nonzero = attend); a row with every key
	// masked gives NaN, as PyTorch's math SDPA does (zeros with a sink). RoundScores rounds the
	// scores once, after the last of scale, cap, ALiBi and bias that applies
	// (one fused op: baddbmm(alibi, q, kᵀ, α = scale)); RoundEach rounds after
	// each of them (s/c, tanh and c· separately: eager attention on tensors
	// of s.Out). RoundProbs rounds the probabilities before ·v (math SDPA),
	// RoundWeights rounds exp(s − max) before ·v and divides by the f32 sum
	// after (flash attention's bf16 P); RoundAccum keeps the P·v sum in
	// s.Out (each product and partial sum rounded, in key order);
	// RoundQuery scales q first, q·scale rounded to s.Out before q·kᵀ, and
	// the scores are not scaled again (refused with MathOnlineSoftmax). Output
	// [B, Sq, H·D], rounded once. sinks, when not nil, holds one logit per
	// query head ([H], read exactly in its format): an attention sink, a
	// column joined to each row's scores after scale, cap, ALiBi, bias and
	// mask (never masked itself), in the row's max and in the softmax's sum,
	// whose probability is then dropped (it weighs no value); under
	// RoundEach the joined logits minus their max are rounded to s.Out
	// before exp (eager attention subtracts the max as its own op).
	// CheckAttention validates the arguments.
	Attention(q, k, v, mask, bias, sinks Tensor, p AttentionParams, s Spec) (Tensor, error)
}

// Extended holds the ops that are compositions of Basic ops. A backend may
// specialise any of them (a fused kernel); one that does not embeds
// Fallback, which composes them from Basic explicitly and honours the Spec
// exactly (intermediates in f32 then one Cast, or rounded at each primitive
// where s.Round asks). TimestepEmbed and RopeTable fall back to host
// computation (Download, compute in Go, Upload): they are tiny.
type Extended interface {
	// Modulate: y = x·(1 + scale) + shift if p.PlusOne else x·scale + shift;
	// shift/scale broadcast (e.g. [B, D] over x [B, S, D] via [B, 1, D]:
	// shapes of rank rank(x)−1 are read as [B, D] and broadcast over the
	// sequence axis). shift may be nil. RoundScale rounds 1+scale,
	// RoundProduct rounds the product before +shift.
	Modulate(x, shift, scale Tensor, p ModulateParams, s Spec) (Tensor, error)
	// GatedResidual: out = x + g(gate)·y, g an ActKind used as the gate
	// function (identity, tanh, sigmoid, ...); gate broadcasts like
	// Modulate's scale. RoundGate rounds g(gate), RoundProduct rounds
	// g(gate)·y before the add. g is one primitive (RoundEach does not
	// compose it as Act does).
	GatedResidual(x, y, gate Tensor, g ActKind, s Spec) (Tensor, error)
	// GLU: y = f(gate)·value; RoundGate rounds f(gate) before the multiply;
	// f is one primitive (RoundEach does not compose it as Act does).
	GLU(gate, value Tensor, f ActKind, s Spec) (Tensor, error)
	// Chunk: torch.chunk(x, n, axis): pieces of ceil(dim/n), the last shorter.
	Chunk(x Tensor, n, axis int) ([]Tensor, error)
	// Patchify: x [B, C, H, W] → [B, (H/p)·(W/p), C·p·p], features ordered
	// (c, ph, pw) and rows (h, w) (diffusers' pack_latents).
	Patchify(x Tensor, p PatchParams) (Tensor, error)
	// Unpatchify: the inverse of Patchify, to [B, C, H, W].
	Unpatchify(x Tensor, p PatchParams) (Tensor, error)
	// TimestepEmbed: diffusers get_timestep_embedding on t [N] → [N, Dim], f32
	// arithmetic at each step (see TimestepEmbedding), rounded to s.Out.
	TimestepEmbed(t Tensor, p TimestepParams, s Spec) (Tensor, error)
	// RopeTable: cos, sin [S, Σ AxesDims] from positions pos [S, len(AxesDims)]
	// (with FreqAxes, pos [S, k] and each frequency's column; see RopeTables
	// for the formulas and precision), rounded to s.Out.
	RopeTable(pos Tensor, p RopeTableParams, s Spec) (cos, sin Tensor, err error)
	// SSMScan: the selective state-space scan over x [B, L, H, P], dt
	// [B, L, H], a [H] (one rate per head: Mamba-2's SSD) or [H, N] (one
	// per head and state: Mamba-1's, its channels the heads with P = 1),
	// bm, cm [B, L, G, N] (head h reads group h/(H/G)) and d [H] or nil: per
	// batch row, head, channel p and state n, from h_{−1} = 0, in f32,
	//
	//	h_t = exp(dt_t·a_n)·h_{t−1} + (dt_t·x_t)·bm_t,  y_t = Σ_n cm_t·h_t + d·x_t,
	//
	// a_n = a[h] or a[h, n], the sum over n in increasing order; y
	// [B, L, H, P] rounded once to s.Out. No internal rounding point and no
	// math variant applies (one is refused). CheckSSMScan validates the
	// shapes. It has no composition: Fallback refuses it (ErrUnsupported) in
	// both forms, so a backend without a kernel of its own (CUDA, Metal)
	// says so.
	SSMScan(x, dt, a, bm, cm, d Tensor, s Spec) (Tensor, error)
	// DeltaScan: the gated delta-rule scan over q, k [B, L, G, K], v
	// [B, L, H, V], g and beta [B, L, H] (head h reads key group h/(H/G)):
	// per batch row and head, a state S [K, V] from 0, in f32,
	//
	//	S ← exp(g_t)·S,  u = β_t·(v_t − k_tᵀS),  S ← S + k_t·uᵀ,  y_t = q_tᵀS
	//
	// (S_t = exp(g_t)·S_{t−1}(I − β_t k_t k_tᵀ) + β_t k_t v_tᵀ: the gated
	// DeltaNet's recurrence), each sum over K in increasing order; y
	// [B, L, H, V] rounded once to s.Out. No internal rounding point and no
	// math variant applies (one is refused). CheckDeltaScan validates the
	// shapes. It has no composition: Fallback refuses it (ErrUnsupported),
	// so a backend without a kernel of its own (CUDA, Metal) says so.
	DeltaScan(q, k, v, g, beta Tensor, s Spec) (Tensor, error)
	// MemoryScan: the exponentially gated matrix-memory scan (mLSTM's
	// recurrent form) over q, k [B, L, H, K], v [B, L, H, V] and the log
	// gates i, f [B, L, H]: per batch row and head, from C = 0 [K, V],
	// n = 0 [K] and a stabiliser m = 0, in f32,
	//
	//	m' = max(f_t + m, i_t),  a = exp(f_t + m − m'),  b = exp(i_t − m'),
	//	C ← a·C + b·(k_t v_tᵀ),  n ← a·n + b·k_t,  m ← m',
	//	y_t = (q_tᵀC) / (max(|q_t·n|, exp(−m)) + eps),
	//
	// each sum over K in increasing order, no fused multiply-add; y
	// [B, L, H, V] rounded once to s.Out. No internal rounding point and no
	// math variant applies (one is refused). CheckMemoryScan validates the
	// shapes. It has no composition: Fallback refuses it (ErrUnsupported),
	// so a backend without a kernel of its own (CUDA, Metal) says so.
	MemoryScan(q, k, v, i, f Tensor, eps float32, s Spec) (Tensor, error)
	// Recurrence: a recurrent layer's scan (torch's LSTM, GRU and RNN, one
	// direction of one layer) over the input's projection xg [B, L, G·H]
	// (x·W_ihᵀ + b_ih, computed before), the state's weight whh [G·H, H]
	// and bias bh [G·H] (nil: none): per batch row, from h = 0 (and c = 0),
	// position by position (from the last with p.Reverse), in f32,
	//
	//	a = xg_t + (whh·h + bh)  (each gate's block of H; the sum over H in order),
	//
	// then the cell's update (exec.Cell: LSTM's i, f, g, o; GRU's r, z, n,
	// whose n adds σ(r)·(whh_n·h + bh_n) to xg_n; tanh or relu alone); y_t
	// = h, [B, L, H], rounded to s.Out, the state itself kept in f32.
	// σ, tanh and relu are exec.Activate's, precise. No internal rounding
	// point and no math variant applies (one is refused). CheckRecurrence
	// validates the shapes. It has no composition: Fallback refuses it, so
	// a backend without a kernel of its own (CUDA, Metal) says so.
	Recurrence(xg, whh, bh Tensor, p RecurrenceParams, s Spec) (Tensor, error)
	// FFT2Real: the real part of the 2-D discrete Fourier transform over
	// x's last two axes [.., N, M] (torch.fft.fftn(x, dim=(−2, −1)).real):
	// y[a, b] = Σ_n Σ_m x[n, m]·cos(2π(a·n/N + b·m/M)), the angles reduced
	// exactly (a·n mod N, b·m mod M) and summed in float64, rounded once
	// to s.Out. No internal rounding point and no math variant applies
	// (one is refused). It has no composition: Fallback refuses it.
	FFT2Real(x Tensor, s Spec) (Tensor, error)
	// Sinkhorn: per matrix [n, m] of x's last two axes, p.Steps
	// alternating normalisations y ← y / (Σ y + p.Eps), the sums over the
	// rows (each column's) first unless p.RowsFirst, then over the columns
	// (each row's), and so on: Sinkhorn–Knopp towards a doubly stochastic
	// matrix. In f32, each sum in index order, each quotient rounded to
	// f32; y rounded once to s.Out. No internal rounding point and no math
	// variant applies (one is refused). CheckSinkhorn validates it. It has
	// no composition: Fallback refuses it.
	Sinkhorn(x Tensor, p SinkhornParams, s Spec) (Tensor, error)
	// MatMul: a [.., M, K] @ b [.., K, N] per batch entry (the leading axes
	// equal), each product rounded to f32 and summed over K in index order
	// in f32 (no fused multiply-add), rounded once to s.Out (a weighted sum
	// of a few streams, torch's (w.unsqueeze(−1)·x).sum(−2) or a small
	// matmul). No internal rounding point and no math variant applies.
	// CheckMatMul validates it. It has no composition: Fallback refuses it.
	MatMul(a, b Tensor, s Spec) (Tensor, error)
}

// Backend is the whole vocabulary (DESIGN.md, "The op vocabulary").
type Backend interface {
	Basic
	Extended
}
