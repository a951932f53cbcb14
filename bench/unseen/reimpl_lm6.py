"""Faithful torch 1.13 reimplementations of the sixth batch's decoders (cases of capture_reimpl.py; its
docstring says how a case is built and captured). Sizes are capture_reimpl's (hidden 32, 8 ids).

qwen3_vl_text follows huggingface/transformers src/transformers/models/qwen3_vl/modeling_qwen3_vl.py at commit
68a7b7e272a36928120316249af3ee3cac595818 (Qwen3VLTextModel on text alone, the call boundaries of the real 2026
trace in /work/unseen/lm6: the rotary module called with ids [3, B, S], the layers with the text ids [B, S]).
What it shows: multimodal RoPE ids laid out axes first, arange(S) expanded to [3, B, S]; the rotary
module's frequencies [3, B, S, D/2], interleaved by mrope_section (T, then H at 1, 4, ..., W at 2, 5, ...
overwritten), then [f | f]; per-head RMSNorm q/k norms before RoPE; SiLU gated MLP.

olmo_hybrid follows src/transformers/models/olmo_hybrid/modular_olmo_hybrid.py at commit
009e78d6e89fd6f3e68cf81ba95ccc682c8cdda9 (OlmoHybridConfig's defaults but for the sizes: hidden 32, 2 heads,
key heads of int(0.75·32/2) = 12, value heads of 24; a linear-attention layer then a full-attention one).
What it shows: a gated DeltaNet with separate q, k, v projections joined [q | k | v] for the uncalled
conv1d (depthwise, causal, SiLU), β = 2·σ(b_proj(x)) (allow_neg_eigval), g = −exp(A)·softplus(a_proj(x) + d),
the chunked gated delta rule with L2-normed q and k, an output gate g_proj through a gated RMSNorm
(ε 1e-5); the full-attention layer OLMo-3's: RMS norms over the whole q and k widths, RoPE returned in f32,
post-norm residuals (norm(attn(x)) + x, norm(mlp(x)) + x); no RoPE reaches the linear layer.

gemma4_text follows src/transformers/models/gemma4/modeling_gemma4.py at commit
0246b4f3335464614ef1de66531f9131a44ec801 (Gemma4TextModel, eager attention, the call boundaries of the real
2026 trace: layers called as (hidden, per_layer_input, ...), the shared-kv dict passed to every layer and
filled by the last sliding layer; no kv-shared layer). Sizes: hidden 32, 2 heads over 1 kv head, head 8
(sliding), global head 32 (full, partial_rotary_factor 0.25: "proportional" RoPE), per-layer inputs of 16,
a sliding layer then a full one. What it shows:
  - per-layer inputs: embed_tokens_per_layer(ids)·√16 read as [B, S, L, 16], plus RMSNorm of
    per_layer_model_projection(embeddings)·32^−½ read the same way, the sum times 2^−½; layer i reads
    piece i, gates it by GELU(tanh)(per_layer_input_gate(h)), projects it back and adds its norm;
  - attention with scaling 1 (q and k RMS-normed per head), v RMS-normed without weight (v_norm), RoPE on
    [B, S, H, D] after the norms;
  - the full layer's proportional RoPE: 1/θ^(2i/32) for the first 4 of 16 frequencies, 0 for the others
    (θ 1e6), a table as wide as the 32-wide head; the sliding layer's θ 1e4 over its 8;
  - sandwich norms around attention and MLP (GELU tanh gated), embeddings ×√32.

qwen3_5_text follows src/transformers/models/qwen3_5/modeling_qwen3_5.py at commit
009e78d6e89fd6f3e68cf81ba95ccc682c8cdda9 (Qwen3_5TextModel, two layers: the config's default layer types for two
layers are both linear attention, as the real 2026 trace holds them). What it shows: a gated DeltaNet whose
[q | k | v] is one projection's columns in that order (in_proj_qkv, not read per key group), z, b and a three
projections of their own (in_proj_z, in_proj_b, in_proj_a), 4 value heads over 2 key heads of 8; the
chunked gated delta rule; Qwen3_5RMSNormGated (γ·x̂ × silu(z)); (1 + γ) RMS norms; the rotary module called
with multimodal ids [3, B, S] (partial rotary 0.25) and its tables handed to layers that do not read them.
"""
import math

import torch
from torch import nn
from torch.nn import functional as F


def rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def repeat_kv(x, n):
    b, h, s, d = x.shape
    if n == 1:
        return x
    return x[:, :, None, :, :].expand(b, h, n, s, d).reshape(b, h * n, s, d)


def causal_mask(n, dtype, window=None):
    m = torch.full((n, n), torch.finfo(dtype).min, dtype=dtype)
    i = torch.arange(n)
    keep = i[None, :] <= i[:, None]
    if window is not None:
        keep = keep & (i[:, None] - i[None, :] < window)
    return torch.where(keep, torch.zeros((), dtype=dtype), m)[None, None]


def eager_attention(q, k, v, groups, scaling, mask):
    k, v = repeat_kv(k, groups), repeat_kv(v, groups)
    w = torch.matmul(q, k.transpose(2, 3)) * scaling + mask
    w = F.softmax(w, dim=-1, dtype=torch.float32).to(q.dtype)
    return torch.matmul(w, v).transpose(1, 2).contiguous()


# ---------------------------------------------------------------- qwen3_vl_text

class Qwen3VLTextConfig:
    hidden_size = 32
    num_attention_heads = 4
    num_key_value_heads = 2
    head_dim = 8
    intermediate_size = 48
    vocab_size = 64
    num_hidden_layers = 2
    rms_norm_eps = 1e-6
    rope_theta = 5e6
    mrope_section = [2, 1, 1]  # head_dim/2 = 4 frequencies: T, H at 1, W at 2


class Qwen3VLTextRMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.variance_epsilon = eps

    def forward(self, x):
        dt = x.dtype
        x = x.to(torch.float32)
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.variance_epsilon)
        return self.weight * x.to(dt)


class Qwen3VLTextRotaryEmbedding(nn.Module):
    def __init__(self, c):
        super().__init__()
        dim = c.head_dim
        inv_freq = 1.0 / (c.rope_theta ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)
        self.mrope_section = c.mrope_section
        self.attention_scaling = 1.0

    def apply_interleaved_mrope(self, freqs, mrope_section):
        freqs_t = freqs[0]
        for dim, offset in enumerate((1, 2), start=1):
            length = mrope_section[dim] * 3
            idx = slice(offset, length, 3)
            freqs_t[..., idx] = freqs[dim, ..., idx]
        return freqs_t

    @torch.no_grad()
    def forward(self, x, position_ids):
        if position_ids.ndim == 2:
            position_ids = position_ids[None, ...].expand(3, position_ids.shape[0], -1)
        inv_freq_expanded = self.inv_freq[None, None, :, None].float().expand(3, position_ids.shape[1], -1, 1)
        position_ids_expanded = position_ids[:, :, None, :].float()
        freqs = (inv_freq_expanded.float() @ position_ids_expanded.float()).transpose(2, 3)
        freqs = self.apply_interleaved_mrope(freqs, self.mrope_section)
        emb = torch.cat((freqs, freqs), dim=-1)
        cos = emb.cos() * self.attention_scaling
        sin = emb.sin() * self.attention_scaling
        return cos.to(dtype=x.dtype), sin.to(dtype=x.dtype)


class Qwen3VLTextAttention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.head_dim = c.head_dim
        self.num_key_value_groups = c.num_attention_heads // c.num_key_value_heads
        self.scaling = self.head_dim ** -0.5
        self.q_proj = nn.Linear(c.hidden_size, c.num_attention_heads * c.head_dim, bias=False)
        self.k_proj = nn.Linear(c.hidden_size, c.num_key_value_heads * c.head_dim, bias=False)
        self.v_proj = nn.Linear(c.hidden_size, c.num_key_value_heads * c.head_dim, bias=False)
        self.o_proj = nn.Linear(c.num_attention_heads * c.head_dim, c.hidden_size, bias=False)
        self.q_norm = Qwen3VLTextRMSNorm(c.head_dim, eps=c.rms_norm_eps)
        self.k_norm = Qwen3VLTextRMSNorm(c.head_dim, eps=c.rms_norm_eps)

    def forward(self, hidden_states, position_embeddings, attention_mask=None, position_ids=None):
        input_shape = hidden_states.shape[:-1]
        hidden_shape = (*input_shape, -1, self.head_dim)
        q = self.q_norm(self.q_proj(hidden_states).view(hidden_shape)).transpose(1, 2)
        k = self.k_norm(self.k_proj(hidden_states).view(hidden_shape)).transpose(1, 2)
        v = self.v_proj(hidden_states).view(hidden_shape).transpose(1, 2)
        cos, sin = position_embeddings
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        if attention_mask is None:
            attention_mask = causal_mask(q.shape[-2], q.dtype)
        out = eager_attention(q, k, v, self.num_key_value_groups, self.scaling, attention_mask)
        return self.o_proj(out.reshape(*input_shape, -1).contiguous()), None


class SiLUMLP(nn.Module):
    def __init__(self, c, act=None):
        super().__init__()
        self.gate_proj = nn.Linear(c.hidden_size, c.intermediate_size, bias=False)
        self.up_proj = nn.Linear(c.hidden_size, c.intermediate_size, bias=False)
        self.down_proj = nn.Linear(c.intermediate_size, c.hidden_size, bias=False)
        self.act_fn = act if act is not None else nn.SiLU()

    def forward(self, x):
        return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))


class Qwen3VLTextDecoderLayer(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.self_attn = Qwen3VLTextAttention(c)
        self.mlp = SiLUMLP(c)
        self.input_layernorm = Qwen3VLTextRMSNorm(c.hidden_size, eps=c.rms_norm_eps)
        self.post_attention_layernorm = Qwen3VLTextRMSNorm(c.hidden_size, eps=c.rms_norm_eps)

    def forward(self, hidden_states, position_ids=None, position_embeddings=None):
        residual = hidden_states
        hidden_states = self.input_layernorm(hidden_states)
        hidden_states, _ = self.self_attn(hidden_states=hidden_states, position_ids=position_ids,
                                          position_embeddings=position_embeddings)
        hidden_states = residual + hidden_states
        residual = hidden_states
        hidden_states = self.post_attention_layernorm(hidden_states)
        return residual + self.mlp(hidden_states)


class Qwen3VLTextModel(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.embed_tokens = nn.Embedding(c.vocab_size, c.hidden_size)
        self.layers = nn.ModuleList([Qwen3VLTextDecoderLayer(c) for _ in range(c.num_hidden_layers)])
        self.norm = Qwen3VLTextRMSNorm(c.hidden_size, eps=c.rms_norm_eps)
        self.rotary_emb = Qwen3VLTextRotaryEmbedding(c)

    def forward(self, input_ids):
        inputs_embeds = self.embed_tokens(input_ids)
        # text alone: the ids expanded to the three axes (T, H, W), the text ids the first row
        position_ids = torch.arange(inputs_embeds.shape[1]).view(1, 1, -1).expand(3, inputs_embeds.shape[0], -1)
        text_position_ids = position_ids[0]
        hidden_states = inputs_embeds
        position_embeddings = self.rotary_emb(hidden_states, position_ids)
        for layer in self.layers:
            hidden_states = layer(hidden_states, position_ids=text_position_ids, position_embeddings=position_embeddings)
        return self.norm(hidden_states)


# ---------------------------------------------------------------- olmo_hybrid

class OlmoHybridConfig:
    hidden_size = 32
    num_attention_heads = 2
    num_key_value_heads = 2
    head_dim = 16
    intermediate_size = 48
    vocab_size = 64
    num_hidden_layers = 2
    rms_norm_eps = 1e-6
    rope_theta = 10000.0
    layer_types = ["linear_attention", "full_attention"]
    linear_num_key_heads = 2
    linear_num_value_heads = 2
    linear_key_head_dim = int(0.75 * 32 / 2)  # 12
    linear_value_head_dim = 24
    linear_conv_kernel_dim = 4
    linear_allow_neg_eigval = True


class OlmoHybridRMSNorm(nn.Module):
    """Olmo3RMSNorm: the weight times the normalised value, in f32, cast back."""

    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.variance_epsilon = eps

    def forward(self, x):
        dt = x.dtype
        x = x.to(torch.float32)
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.variance_epsilon)
        return (self.weight * x).to(dt)


class OlmoHybridRMSNormGated(nn.Module):
    """Qwen3NextRMSNormGated: normalise, times the weight, times SiLU(gate)."""

    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.variance_epsilon = eps

    def forward(self, hidden_states, gate=None):
        dt = hidden_states.dtype
        hidden_states = hidden_states.to(torch.float32)
        variance = hidden_states.pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
        hidden_states = self.weight * hidden_states.to(dt)
        hidden_states = hidden_states * F.silu(gate.to(torch.float32))
        return hidden_states.to(dt)


def causal_conv1d_fn(hidden_states, weight, bias=None, activation=None):
    _, hidden_size, seq_len = hidden_states.shape
    padding = weight.shape[-1] - 1
    out = F.conv1d(hidden_states.to(weight.dtype), weight=weight.unsqueeze(1), bias=bias, padding=padding,
                   groups=hidden_size)[:, :, :seq_len]
    if activation is not None:
        out = F.silu(out)
    return out.to(hidden_states.dtype)


def l2norm(x, dim=-1, eps=1e-6):
    return x * torch.rsqrt((x * x).sum(dim=dim, keepdim=True) + eps)


def torch_chunk_gated_delta_rule(query, key, value, g, beta, chunk_size=64, use_qk_l2norm_in_kernel=False):
    """The chunked gated delta rule of qwen3_5 / qwen3_next (grouped value heads repeated first), no cache."""
    initial_dtype = query.dtype
    batch_size, sequence_length, _, k_head_dim = key.shape
    num_v_heads, v_head_dim = value.shape[-2:]
    if key.shape[2] != num_v_heads:
        query, key = (x.repeat_interleave(num_v_heads // x.shape[2], dim=2) for x in (query, key))
    recurrent_state_shape = (batch_size, num_v_heads, k_head_dim, v_head_dim)
    padded_output_shape = (batch_size, num_v_heads, -1, v_head_dim)
    query, key, value, beta, decay = [x.transpose(1, 2).contiguous().to(torch.float32)
                                      for x in (query, key, value, beta, g)]
    if use_qk_l2norm_in_kernel:
        query = l2norm(query, dim=-1, eps=1e-6)
        key = l2norm(key, dim=-1, eps=1e-6)
    query = query * (query.shape[-1] ** -0.5)
    pad_size = (chunk_size - sequence_length % chunk_size) % chunk_size
    query, key, value = (F.pad(x, (0, 0, 0, pad_size)) for x in (query, key, value))
    beta, decay = (F.pad(x, (0, pad_size)) for x in (beta, decay))
    num_chunks = (sequence_length + pad_size) // chunk_size
    v_beta = value * beta.unsqueeze(-1)
    k_beta = key * beta.unsqueeze(-1)
    query, key, k_beta, v_beta = [x.reshape(x.shape[0], x.shape[1], -1, chunk_size, x.shape[-1])
                                  for x in (query, key, k_beta, v_beta)]
    decay = decay.reshape(decay.shape[0], decay.shape[1], -1, chunk_size)
    strictly_upper_mask = torch.ones(chunk_size, chunk_size, dtype=torch.bool).triu(1)
    cum_decay = decay.cumsum(dim=3)
    pairwise_decay = (cum_decay.unsqueeze(4) - cum_decay.unsqueeze(3)).masked_fill(strictly_upper_mask, float("-inf")).exp()
    ut_system = (k_beta @ key.transpose(-1, -2)) * pairwise_decay
    intra_chunk_attn = (query @ key.transpose(-1, -2)) * pairwise_decay
    decayed_k_beta = k_beta * cum_decay.exp().unsqueeze(-1)
    new_values = torch.linalg.solve_triangular(ut_system, v_beta, upper=False, unitriangular=True)
    k_cumdecay = torch.linalg.solve_triangular(ut_system, decayed_k_beta, upper=False, unitriangular=True)
    last_recurrent_state = torch.zeros(recurrent_state_shape, dtype=new_values.dtype)
    core_attn_out = torch.zeros_like(new_values)
    query = query * cum_decay.exp().unsqueeze(-1)
    key = key * (cum_decay[..., -1:] - cum_decay).exp().unsqueeze(-1)
    chunk_decay = cum_decay[..., -1].exp()[..., None, None]
    for i in range(num_chunks):
        v_new = new_values[:, :, i] - k_cumdecay[:, :, i] @ last_recurrent_state
        core_attn_out[:, :, i] = query[:, :, i] @ last_recurrent_state + intra_chunk_attn[:, :, i] @ v_new
        last_recurrent_state = last_recurrent_state * chunk_decay[:, :, i] + key[:, :, i].transpose(-1, -2) @ v_new
    core_attn_out = core_attn_out.reshape(padded_output_shape)[:, :, :sequence_length]
    return core_attn_out.transpose(1, 2).contiguous().to(initial_dtype), None


class OlmoHybridGatedDeltaNet(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.num_v_heads, self.num_k_heads = c.linear_num_value_heads, c.linear_num_key_heads
        self.head_k_dim, self.head_v_dim = c.linear_key_head_dim, c.linear_value_head_dim
        self.key_dim = self.head_k_dim * self.num_k_heads
        self.value_dim = self.head_v_dim * self.num_v_heads
        self.allow_neg_eigval = c.linear_allow_neg_eigval
        self.q_proj = nn.Linear(c.hidden_size, self.key_dim, bias=False)
        self.k_proj = nn.Linear(c.hidden_size, self.key_dim, bias=False)
        self.v_proj = nn.Linear(c.hidden_size, self.value_dim, bias=False)
        self.a_proj = nn.Linear(c.hidden_size, self.num_v_heads, bias=False)
        self.b_proj = nn.Linear(c.hidden_size, self.num_v_heads, bias=False)
        self.g_proj = nn.Linear(c.hidden_size, self.value_dim, bias=False)
        self.o_proj = nn.Linear(self.value_dim, c.hidden_size, bias=False)
        self.conv_dim = self.key_dim * 2 + self.value_dim
        self.conv1d = nn.Conv1d(self.conv_dim, self.conv_dim, bias=False, kernel_size=c.linear_conv_kernel_dim,
                                groups=self.conv_dim, padding=c.linear_conv_kernel_dim - 1)
        self.A_log = nn.Parameter(torch.log(torch.empty(self.num_v_heads).uniform_(0.0, 16.0)))
        self.dt_bias = nn.Parameter(torch.ones(self.num_v_heads))
        self.o_norm = OlmoHybridRMSNormGated(self.head_v_dim, eps=1e-5)

    def forward(self, hidden_states, cache_params=None, attention_mask=None):
        batch_size, seq_len, _ = hidden_states.shape
        mixed_qkv = torch.cat([self.q_proj(hidden_states), self.k_proj(hidden_states), self.v_proj(hidden_states)],
                              dim=-1).transpose(1, 2)
        mixed_qkv = causal_conv1d_fn(mixed_qkv, weight=self.conv1d.weight.squeeze(1), bias=self.conv1d.bias,
                                     activation="silu")
        mixed_qkv = mixed_qkv[:, :, -seq_len:]
        q, k, v = torch.split(mixed_qkv.transpose(1, 2), [self.key_dim, self.key_dim, self.value_dim], dim=-1)
        q = q.view(batch_size, seq_len, -1, self.head_k_dim)
        k = k.view(batch_size, seq_len, -1, self.head_k_dim)
        v = v.view(batch_size, seq_len, -1, self.head_v_dim)
        beta = self.b_proj(hidden_states).sigmoid()
        if self.allow_neg_eigval:
            beta = beta * 2.0
        g = -self.A_log.float().exp() * F.softplus(self.a_proj(hidden_states).float() + self.dt_bias)
        output, _ = torch_chunk_gated_delta_rule(q, k, v, g=g, beta=beta, use_qk_l2norm_in_kernel=True)
        gate = self.g_proj(hidden_states)
        output = self.o_norm(output.reshape(-1, self.head_v_dim), gate.reshape(-1, self.head_v_dim))
        return self.o_proj(output.reshape(batch_size, seq_len, -1))


class OlmoHybridRotaryEmbedding(nn.Module):
    def __init__(self, c):
        super().__init__()
        dim = c.head_dim
        inv_freq = 1.0 / (c.rope_theta ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)
        self.attention_scaling = 1.0

    @torch.no_grad()
    def forward(self, x, position_ids):
        inv_freq_expanded = self.inv_freq[None, :, None].float().expand(position_ids.shape[0], -1, 1)
        position_ids_expanded = position_ids[:, None, :].float()
        freqs = (inv_freq_expanded.float() @ position_ids_expanded.float()).transpose(1, 2)
        emb = torch.cat((freqs, freqs), dim=-1)
        # returned in f32, not cast to x's dtype
        return emb.cos() * self.attention_scaling, emb.sin() * self.attention_scaling


class OlmoHybridAttention(nn.Module):
    """Olmo3Attention without a sliding window: q and k normed over their whole widths before the heads split."""

    def __init__(self, c):
        super().__init__()
        self.head_dim = c.head_dim
        self.num_key_value_groups = c.num_attention_heads // c.num_key_value_heads
        self.scaling = self.head_dim ** -0.5
        self.q_proj = nn.Linear(c.hidden_size, c.num_attention_heads * c.head_dim, bias=False)
        self.k_proj = nn.Linear(c.hidden_size, c.num_key_value_heads * c.head_dim, bias=False)
        self.v_proj = nn.Linear(c.hidden_size, c.num_key_value_heads * c.head_dim, bias=False)
        self.o_proj = nn.Linear(c.num_attention_heads * c.head_dim, c.hidden_size, bias=False)
        self.q_norm = OlmoHybridRMSNorm(c.num_attention_heads * c.head_dim, eps=c.rms_norm_eps)
        self.k_norm = OlmoHybridRMSNorm(c.num_key_value_heads * c.head_dim, eps=c.rms_norm_eps)

    def forward(self, hidden_states, position_embeddings, attention_mask=None, position_ids=None):
        input_shape = hidden_states.shape[:-1]
        hidden_shape = (*input_shape, -1, self.head_dim)
        q = self.q_norm(self.q_proj(hidden_states))
        k = self.k_norm(self.k_proj(hidden_states))
        v = self.v_proj(hidden_states)
        q, k, v = (x.view(hidden_shape).transpose(1, 2) for x in (q, k, v))
        cos, sin = position_embeddings
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
        q, k = (q * cos) + (rotate_half(q) * sin), (k * cos) + (rotate_half(k) * sin)
        # apply_rotary_pos_emb casts back to the input dtype (f32 here)
        out = eager_attention(q, k, v, self.num_key_value_groups, self.scaling, causal_mask(q.shape[-2], q.dtype))
        return self.o_proj(out.reshape(*input_shape, -1).contiguous()), None


class OlmoHybridAttentionDecoderLayer(nn.Module):
    """Olmo3DecoderLayer: post-norm residuals."""

    def __init__(self, c):
        super().__init__()
        self.self_attn = OlmoHybridAttention(c)
        self.mlp = SiLUMLP(c)
        self.post_attention_layernorm = OlmoHybridRMSNorm(c.hidden_size, eps=c.rms_norm_eps)
        self.post_feedforward_layernorm = OlmoHybridRMSNorm(c.hidden_size, eps=c.rms_norm_eps)

    def forward(self, hidden_states, position_embeddings=None, position_ids=None):
        residual = hidden_states
        hidden_states, _ = self.self_attn(hidden_states=hidden_states, position_ids=position_ids,
                                          position_embeddings=position_embeddings)
        hidden_states = residual + self.post_attention_layernorm(hidden_states)
        residual = hidden_states
        return residual + self.post_feedforward_layernorm(self.mlp(hidden_states))


class OlmoHybridLinearAttentionDecoderLayer(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.input_layernorm = OlmoHybridRMSNorm(c.hidden_size, eps=c.rms_norm_eps)
        self.linear_attn = OlmoHybridGatedDeltaNet(c)
        self.post_attention_layernorm = OlmoHybridRMSNorm(c.hidden_size, eps=c.rms_norm_eps)
        self.mlp = SiLUMLP(c)

    def forward(self, hidden_states, position_embeddings=None, position_ids=None):
        residual = hidden_states
        hidden_states = self.linear_attn(hidden_states=self.input_layernorm(hidden_states))
        hidden_states = residual + hidden_states
        residual = hidden_states
        return residual + self.mlp(self.post_attention_layernorm(hidden_states))


class OlmoHybridModel(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.layer_types = c.layer_types
        self.embed_tokens = nn.Embedding(c.vocab_size, c.hidden_size)
        self.layers = nn.ModuleList([OlmoHybridLinearAttentionDecoderLayer(c) if t == "linear_attention"
                                     else OlmoHybridAttentionDecoderLayer(c) for t in c.layer_types])
        self.norm = OlmoHybridRMSNorm(c.hidden_size, eps=c.rms_norm_eps)
        self.rotary_emb = OlmoHybridRotaryEmbedding(c)

    def forward(self, input_ids):
        hidden_states = self.embed_tokens(input_ids)
        position_ids = torch.arange(hidden_states.shape[1]).unsqueeze(0)
        position_embeddings = self.rotary_emb(hidden_states, position_ids)
        for t, layer in zip(self.layer_types, self.layers):
            pe = position_embeddings if t == "full_attention" else None
            if pe is None:
                hidden_states = layer(hidden_states, position_ids=position_ids)
            else:
                hidden_states = layer(hidden_states, position_embeddings=pe, position_ids=position_ids)
        return self.norm(hidden_states)


# ---------------------------------------------------------------- gemma4_text

class Gemma4TextConfig:
    hidden_size = 32
    num_attention_heads = 2
    num_key_value_heads = 1
    head_dim = 8
    global_head_dim = 32
    intermediate_size = 48
    vocab_size = 64
    vocab_size_per_layer_input = 64
    hidden_size_per_layer_input = 16
    num_hidden_layers = 2
    rms_norm_eps = 1e-6
    sliding_window = 512
    layer_types = ["sliding_attention", "full_attention"]
    rope_theta = {"sliding_attention": 10000.0, "full_attention": 1e6}
    partial_rotary_factor = {"sliding_attention": 1.0, "full_attention": 0.25}


class Gemma4RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6, with_scale=True):
        super().__init__()
        self.eps = eps
        self.with_scale = with_scale
        if with_scale:
            self.weight = nn.Parameter(torch.ones(dim))

    def _norm(self, hidden_states):
        mean_squared = hidden_states.pow(2).mean(-1, keepdim=True) + self.eps
        return hidden_states * torch.pow(mean_squared, -0.5)

    def forward(self, hidden_states):
        normed_output = self._norm(hidden_states.float())
        if self.with_scale:
            normed_output = normed_output * self.weight.float()
        return normed_output.type_as(hidden_states)


class Gemma4TextScaledWordEmbedding(nn.Embedding):
    def __init__(self, num_embeddings, embedding_dim, embed_scale):
        super().__init__(num_embeddings, embedding_dim)
        self.register_buffer("embed_scale", torch.tensor(embed_scale), persistent=False)

    def forward(self, input_ids):
        return super().forward(input_ids) * self.embed_scale.to(self.weight.dtype)


class Gemma4TextRotaryEmbedding(nn.Module):
    """One inv_freq per layer type: the sliding type's default RoPE over head_dim, the full type's
    "proportional" RoPE over global_head_dim: the first partial_rotary_factor·d/2 frequencies at
    1/θ^(2i/d), the rest 0."""

    def __init__(self, c):
        super().__init__()
        self.layer_types = list(dict.fromkeys(c.layer_types))
        for t in self.layer_types:
            d = c.global_head_dim if t == "full_attention" else c.head_dim
            theta = c.rope_theta[t]
            if t == "full_attention":
                rope_angles = int(c.partial_rotary_factor[t] * d // 2)
                inv_rot = 1.0 / (theta ** (torch.arange(0, 2 * rope_angles, 2, dtype=torch.float) / d))
                inv_freq = torch.cat((inv_rot, torch.zeros(d // 2 - rope_angles, dtype=torch.float32)))
            else:
                inv_freq = 1.0 / (theta ** (torch.arange(0, d, 2, dtype=torch.int64).float() / d))
            self.register_buffer(f"{t}_inv_freq", inv_freq, persistent=False)

    @torch.no_grad()
    def forward(self, x, position_ids, layer_type):
        inv_freq = getattr(self, f"{layer_type}_inv_freq")
        inv_freq_expanded = inv_freq[None, :, None].float().expand(position_ids.shape[0], -1, 1)
        position_ids_expanded = position_ids[:, None, :].float()
        freqs = (inv_freq_expanded.float() @ position_ids_expanded.float()).transpose(1, 2)
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(dtype=x.dtype), emb.sin().to(dtype=x.dtype)


class Gemma4TextAttention(nn.Module):
    def __init__(self, c, layer_idx):
        super().__init__()
        self.layer_type = c.layer_types[layer_idx]
        self.is_sliding = self.layer_type == "sliding_attention"
        self.sliding_window = c.sliding_window if self.is_sliding else None
        self.head_dim = c.head_dim if self.is_sliding else c.global_head_dim
        self.num_key_value_groups = c.num_attention_heads // c.num_key_value_heads
        self.scaling = 1.0
        prev = c.layer_types[:c.num_hidden_layers]  # no kv-shared layer
        self.store_full_length_kv = layer_idx == len(prev) - 1 - prev[::-1].index(self.layer_type)
        self.q_proj = nn.Linear(c.hidden_size, c.num_attention_heads * self.head_dim, bias=False)
        self.q_norm = Gemma4RMSNorm(self.head_dim, eps=c.rms_norm_eps)
        self.k_norm = Gemma4RMSNorm(self.head_dim, eps=c.rms_norm_eps)
        self.v_norm = Gemma4RMSNorm(self.head_dim, eps=c.rms_norm_eps, with_scale=False)
        self.k_proj = nn.Linear(c.hidden_size, c.num_key_value_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(c.hidden_size, c.num_key_value_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(c.num_attention_heads * self.head_dim, c.hidden_size, bias=False)

    def forward(self, hidden_states, position_embeddings, attention_mask, shared_kv_states, position_ids=None):
        input_shape = hidden_states.shape[:-1]
        hidden_shape = (*input_shape, -1, self.head_dim)
        cos, sin = position_embeddings
        q = self.q_norm(self.q_proj(hidden_states).view(hidden_shape))
        q = (q * cos.unsqueeze(2)) + (rotate_half(q) * sin.unsqueeze(2))
        q = q.transpose(1, 2)
        k = self.k_proj(hidden_states).view(hidden_shape)
        v = self.v_proj(hidden_states).view(hidden_shape)
        k = self.k_norm(k)
        k = ((k * cos.unsqueeze(2)) + (rotate_half(k) * sin.unsqueeze(2))).transpose(1, 2)
        v = self.v_norm(v).transpose(1, 2)
        if self.store_full_length_kv:
            shared_kv_states[self.layer_type] = k, v
        if attention_mask is None:  # no padding: SDPA's causal (and windowed) mask, no tensor passed
            attention_mask = causal_mask(q.shape[-2], q.dtype, window=self.sliding_window)
        out = eager_attention(q, k, v, self.num_key_value_groups, self.scaling, attention_mask)
        return self.o_proj(out.reshape(*input_shape, -1).contiguous()), None


class Gemma4TextDecoderLayer(nn.Module):
    def __init__(self, c, layer_idx):
        super().__init__()
        self.self_attn = Gemma4TextAttention(c, layer_idx)
        self.mlp = SiLUMLP(c, act=nn.GELU(approximate="tanh"))
        self.input_layernorm = Gemma4RMSNorm(c.hidden_size, eps=c.rms_norm_eps)
        self.post_attention_layernorm = Gemma4RMSNorm(c.hidden_size, eps=c.rms_norm_eps)
        self.pre_feedforward_layernorm = Gemma4RMSNorm(c.hidden_size, eps=c.rms_norm_eps)
        self.post_feedforward_layernorm = Gemma4RMSNorm(c.hidden_size, eps=c.rms_norm_eps)
        self.register_buffer("layer_scalar", torch.ones(1))
        self.act_fn = nn.GELU(approximate="tanh")
        self.per_layer_input_gate = nn.Linear(c.hidden_size, c.hidden_size_per_layer_input, bias=False)
        self.per_layer_projection = nn.Linear(c.hidden_size_per_layer_input, c.hidden_size, bias=False)
        self.post_per_layer_input_norm = Gemma4RMSNorm(c.hidden_size, eps=c.rms_norm_eps)

    def forward(self, hidden_states, per_layer_input=None, shared_kv_states=None, position_embeddings=None,
                attention_mask=None, position_ids=None):
        residual = hidden_states
        hidden_states = self.input_layernorm(hidden_states)
        hidden_states, _ = self.self_attn(hidden_states=hidden_states, position_embeddings=position_embeddings,
                                          attention_mask=attention_mask, shared_kv_states=shared_kv_states,
                                          position_ids=position_ids)
        hidden_states = self.post_attention_layernorm(hidden_states)
        hidden_states = residual + hidden_states
        residual = hidden_states
        hidden_states = self.pre_feedforward_layernorm(hidden_states)
        hidden_states = self.mlp(hidden_states)
        hidden_states = self.post_feedforward_layernorm(hidden_states)
        hidden_states = residual + hidden_states
        residual = hidden_states
        hidden_states = self.per_layer_input_gate(hidden_states)
        hidden_states = self.act_fn(hidden_states)
        hidden_states = hidden_states * per_layer_input
        hidden_states = self.per_layer_projection(hidden_states)
        hidden_states = self.post_per_layer_input_norm(hidden_states)
        hidden_states = residual + hidden_states
        hidden_states = hidden_states * self.layer_scalar  # in place upstream; a copy keeps the capture honest
        return hidden_states


class Gemma4TextModel(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        self.embed_tokens = Gemma4TextScaledWordEmbedding(c.vocab_size, c.hidden_size, c.hidden_size ** 0.5)
        self.layers = nn.ModuleList([Gemma4TextDecoderLayer(c, i) for i in range(c.num_hidden_layers)])
        self.norm = Gemma4RMSNorm(c.hidden_size, eps=c.rms_norm_eps)
        self.rotary_emb = Gemma4TextRotaryEmbedding(c)
        p = c.hidden_size_per_layer_input
        self.embed_tokens_per_layer = Gemma4TextScaledWordEmbedding(c.vocab_size_per_layer_input,
                                                                    c.num_hidden_layers * p, p ** 0.5)
        self.per_layer_input_scale = 2.0 ** -0.5
        self.per_layer_model_projection = nn.Linear(c.hidden_size, c.num_hidden_layers * p, bias=False)
        self.per_layer_model_projection_scale = c.hidden_size ** -0.5
        self.per_layer_projection_norm = Gemma4RMSNorm(p, eps=c.rms_norm_eps)

    def forward(self, input_ids):
        c = self.c
        inputs_embeds = self.embed_tokens(input_ids)
        per_layer_inputs = self.embed_tokens_per_layer(input_ids).reshape(
            *input_ids.shape, c.num_hidden_layers, c.hidden_size_per_layer_input)
        proj = self.per_layer_model_projection(inputs_embeds) * self.per_layer_model_projection_scale
        proj = proj.reshape(*inputs_embeds.shape[:-1], c.num_hidden_layers, c.hidden_size_per_layer_input)
        proj = self.per_layer_projection_norm(proj)
        per_layer_inputs = (proj + per_layer_inputs) * self.per_layer_input_scale
        position_ids = torch.arange(inputs_embeds.shape[1]).unsqueeze(0)
        hidden_states = inputs_embeds
        position_embeddings = {t: self.rotary_emb(hidden_states, position_ids, t) for t in dict.fromkeys(c.layer_types)}
        shared_kv_states = {}
        for i, layer in enumerate(self.layers):
            t = c.layer_types[i]
            hidden_states = layer(hidden_states, per_layer_inputs[:, :, i, :], shared_kv_states=shared_kv_states,
                                  position_embeddings=position_embeddings[t], attention_mask=None,
                                  position_ids=position_ids)
        return self.norm(hidden_states)



# ---------------------------------------------------------------- qwen3_5_text

class Qwen3_5TextConfig:
    hidden_size = 32
    num_attention_heads = 2
    num_key_value_heads = 1
    head_dim = 16
    partial_rotary_factor = 0.25
    rope_theta = 10000.0
    mrope_section = [11, 11, 10]
    linear_num_value_heads = 4
    linear_num_key_heads = 2
    linear_key_head_dim = 8
    linear_value_head_dim = 8
    linear_conv_kernel_dim = 4
    intermediate_size = 48
    vocab_size = 64
    num_hidden_layers = 2
    rms_norm_eps = 1e-6


class Qwen3_5RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.zeros(dim))

    def forward(self, x):
        output = x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + self.eps)
        return (output * (1.0 + self.weight.float())).type_as(x)


class Qwen3_5TextRotaryEmbedding(Qwen3VLTextRotaryEmbedding):
    def __init__(self, c):
        nn.Module.__init__(self)
        dim = int(c.head_dim * c.partial_rotary_factor)
        inv_freq = 1.0 / (c.rope_theta ** (torch.arange(0, dim, 2, dtype=torch.float) / dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)
        self.mrope_section = c.mrope_section
        self.attention_scaling = 1.0


class Qwen3_5GatedDeltaNet(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.num_v_heads, self.num_k_heads = c.linear_num_value_heads, c.linear_num_key_heads
        self.head_k_dim, self.head_v_dim = c.linear_key_head_dim, c.linear_value_head_dim
        self.key_dim = self.head_k_dim * self.num_k_heads
        self.value_dim = self.head_v_dim * self.num_v_heads
        self.conv_dim = self.key_dim * 2 + self.value_dim
        self.conv1d = nn.Conv1d(self.conv_dim, self.conv_dim, bias=False, kernel_size=c.linear_conv_kernel_dim,
                                groups=self.conv_dim, padding=c.linear_conv_kernel_dim - 1)
        self.dt_bias = nn.Parameter(torch.ones(self.num_v_heads))
        self.A_log = nn.Parameter(torch.log(torch.empty(self.num_v_heads).uniform_(0.01, 16)))
        self.norm = OlmoHybridRMSNormGated(self.head_v_dim, eps=c.rms_norm_eps)  # Qwen3_5RMSNormGated's arithmetic
        self.out_proj = nn.Linear(self.value_dim, c.hidden_size, bias=False)
        self.in_proj_qkv = nn.Linear(c.hidden_size, self.key_dim * 2 + self.value_dim, bias=False)
        self.in_proj_z = nn.Linear(c.hidden_size, self.value_dim, bias=False)
        self.in_proj_b = nn.Linear(c.hidden_size, self.num_v_heads, bias=False)
        self.in_proj_a = nn.Linear(c.hidden_size, self.num_v_heads, bias=False)

    def forward(self, hidden_states, cache_params=None, attention_mask=None):
        batch_size, seq_len, _ = hidden_states.shape
        mixed_qkv = self.in_proj_qkv(hidden_states).transpose(1, 2)
        z = self.in_proj_z(hidden_states).reshape(batch_size, seq_len, -1, self.head_v_dim)
        b = self.in_proj_b(hidden_states)
        a = self.in_proj_a(hidden_states)
        mixed_qkv = causal_conv1d_fn(mixed_qkv, self.conv1d.weight.squeeze(1), self.conv1d.bias, activation="silu")
        mixed_qkv = mixed_qkv.transpose(1, 2)
        query, key, value = torch.split(mixed_qkv, [self.key_dim, self.key_dim, self.value_dim], dim=-1)
        query = query.reshape(batch_size, seq_len, -1, self.head_k_dim)
        key = key.reshape(batch_size, seq_len, -1, self.head_k_dim)
        value = value.reshape(batch_size, seq_len, -1, self.head_v_dim)
        beta = b.sigmoid()
        g = -self.A_log.float().exp() * F.softplus(a.float() + self.dt_bias)
        core_attn_out, _ = torch_chunk_gated_delta_rule(query, key, value, g=g, beta=beta, use_qk_l2norm_in_kernel=True)
        core_attn_out = self.norm(core_attn_out.reshape(-1, self.head_v_dim), z.reshape(-1, self.head_v_dim))
        return self.out_proj(core_attn_out.reshape(batch_size, seq_len, -1))


class Qwen3_5DecoderLayer(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.linear_attn = Qwen3_5GatedDeltaNet(c)
        self.mlp = SiLUMLP(c)
        self.input_layernorm = Qwen3_5RMSNorm(c.hidden_size, eps=c.rms_norm_eps)
        self.post_attention_layernorm = Qwen3_5RMSNorm(c.hidden_size, eps=c.rms_norm_eps)

    def forward(self, hidden_states, position_embeddings=None, position_ids=None):
        residual = hidden_states
        hidden_states = self.linear_attn(hidden_states=self.input_layernorm(hidden_states))
        hidden_states = residual + hidden_states
        residual = hidden_states
        return residual + self.mlp(self.post_attention_layernorm(hidden_states))


class Qwen3_5TextModel(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.embed_tokens = nn.Embedding(c.vocab_size, c.hidden_size)
        self.layers = nn.ModuleList([Qwen3_5DecoderLayer(c) for _ in range(c.num_hidden_layers)])
        self.norm = Qwen3_5RMSNorm(c.hidden_size, eps=c.rms_norm_eps)
        self.rotary_emb = Qwen3_5TextRotaryEmbedding(c)

    def forward(self, input_ids):
        hidden_states = self.embed_tokens(input_ids)
        position_ids = torch.arange(hidden_states.shape[1]).view(1, 1, -1).expand(3, hidden_states.shape[0], -1)
        text_position_ids = position_ids[0]
        position_embeddings = self.rotary_emb(hidden_states, position_ids)
        for layer in self.layers:
            hidden_states = layer(hidden_states, position_embeddings=position_embeddings, position_ids=text_position_ids)
        return self.norm(hidden_states)

CASES = {"qwen3_vl_text": (Qwen3VLTextModel, Qwen3VLTextConfig),
         "olmo_hybrid": (OlmoHybridModel, OlmoHybridConfig),
         "gemma4_text": (Gemma4TextModel, Gemma4TextConfig),
         "qwen3_5_text": (Qwen3_5TextModel, Qwen3_5TextConfig)}
