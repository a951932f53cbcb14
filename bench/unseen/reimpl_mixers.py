"""Faithful torch 1.13 reimplementations of transformers language models whose token mixing earlier
forms did not read (cases of capture_reimpl.py; its docstring says how a case is built and captured).

jetmoe follows huggingface/transformers src/transformers/models/jetmoe/modeling_jetmoe.py at commit
00dcc6dda6f6d8e69541a6b51f97986a80242367 (JetMoeAttention's eager arithmetic, JetMoeMoA, JetMoeMoE,
JetMoeTopKGating, JetMoeParallelExperts) with the call boundaries of the real transformers 5.17 trace
(/work/unseen/lm4/jetmoe-f32.npz: the model's rotary_emb called once and its (cos, sin) passed to every
layer as position_embeddings; the attention called with keyword hidden_states, position_ids and
position_embeddings, no mask tensor (causal), returning (output, None, router_logits); the router
returning (index_sorted_experts, batch_index, batch_gates, expert_size, logits), expert_size a list; the
MoE returning its output alone) and configuration_jetmoe.py's arithmetic (RMSNorm ε 1e-6, SiLU, θ 1e4)
but for the sizes: hidden 32, 4 experts top-2, 2 kv heads of kv_channels 8 (so 4 query heads: top_k ·
kv heads), MoE intermediate 48, 2 layers. What it shows (a mixture of attention heads):
  - the router: logits = layer(x) (an nn.Linear), top-k, softmax over the k chosen logits; the
    (token, pick) pairs sorted by expert (index_sorted_experts), their tokens (batch_index) and gates;
  - JetMoeMoA.map: each pair's token through its expert's query projection (JetMoeParallelExperts:
    a [E, H, D] parameter, the sorted rows split by expert sizes, F.linear per expert, joined), put
    back in (token, pick) order by index_add: queries [B, S, k, H], read as k·(H/d) heads of d;
  - keys and values the two halves of one kv_proj shared by every expert; RoPE (half layout) on
    queries and keys; the keys and values repeated k times along the heads (torch's repeat: head
    j·KV + h reads kv head h); causal softmax attention, 1/√d;
  - JetMoeMoA.reduce: each pair's heads [H] through its expert's output projection, times its
    gate, summed per token by index_add, plus the MoA's bias (a parameter of the uncalled experts
    module); the MoE MLP the same dispatch over a [E, 2I, D] input projection, silu(first half) ·
    second half, a [E, D, I] output projection, gates, index_add, plus its bias.

xlstm follows src/transformers/models/xlstm/modeling_xlstm.py at commit 00bb1d1244047eadf8aa198f211e54d9e67f814d (the
path taken without the external xlstm package: xLSTMBackend in inference mode, wrap_chunkwise_arbitrary_sequence_length
with chunk size 64, so a sequence shorter than 16 runs mlstm_recurrent_sequence_native step by step with float32
states) with the call boundaries of the real transformers 5.17 trace (/work/unseen/lm5b/xlstm-f32.npz: the projections
named q, k, v; the block and the layer returning (h, (c, n, m)); the backend called with keyword query, key, value,
igate, fgate, returning (h, (c, n, m))) and configuration_xlstm.py's defaults (weight_mode single, qk_dim_factor 0.5,
v_dim_factor 1, gate_soft_cap 15, norm_eps 1e-6, eps 1e-6, ffn_proj_factor 2.667 rounded up to a multiple of 64, no
biases but the gates') but for the sizes: hidden 32, 4 heads (q and k 4 wide, v 8 per head), 2 blocks, 8 ids. What it
shows (mLSTM blocks, never an attention):
  - q, k, v, the output gate's preactivation, and per-head input and forget gate preactivations (Linears with bias),
    each gate soft-capped 15·tanh(x/15) in the forward; q, k, v read heads first [B, H, L, ·], the gates [B, H, L];
  - the mLSTM recurrence from zero states: m' = max(log σ(f) + m, i), C ← exp(log σ(f) + m − m')·C +
    exp(i − m')·k vᵀ, n likewise with k, h = (q/√4)·C / (max(|(q/√4)·n|, exp(−m')) + 1e-6);
  - a multi-head LayerNorm (per head of 8, no bias, float32 statistics) then its [32] weight, times σ(output gate)
    (an nn.Sigmoid call), out_proj; RMSNorms before the layer and the SiLU gated FFN, a final out_norm.

fnet follows src/transformers/models/fnet/modeling_fnet.py at commit 0172c3ecffb30100f5cf2f787cde19628651ee4b
(FNetModel with use_tpu_fourier_optimizations False, the default) with the call boundaries of the real
transformers 5.17 trace (/work/unseen/lm5b/fnet-f32.npz: the embeddings called with keyword input_ids and
token_type_ids, the latter made by the model; the encoder returning its last hidden state; the pooler
called) and configuration_fnet.py's arithmetic (gelu_new, LayerNorm ε 1e-12, 4 token types) but for the
sizes: hidden 32, intermediate 48, 2 layers, 8 ids. What it shows (Fourier token mixing, no attention):
  - embeddings: words + token types + positions, LayerNorm, then a projection Linear, a Dropout call;
  - each layer's mixing torch.fft.fftn(h, dim=(1, 2)).real, the real part of the 2-D DFT over positions and
    channels (FNetBasicFourierTransform, returning a tuple); LayerNorm(h + mixed) (FNetBasicOutput);
  - BERT's feed-forward: dense, NewGELU, dense, Dropout, LayerNorm(h + input); the pooler (dense, tanh of
    the first row), whose output the trace does not read.
"""
import math

import torch
from torch import nn
from torch.nn import functional as F

# --- jetmoe --------------------------------------------------------------------------------


class JetMoeConfig:
    hidden_size = 32
    num_hidden_layers = 2
    num_key_value_heads = 2
    kv_channels = 8
    num_local_experts = 4
    num_experts_per_tok = 2
    intermediate_size = 48
    vocab_size = 64
    rms_norm_eps = 1e-6
    rope_theta = 10000.0


class JetMoeParallelExperts(nn.Module):
    def __init__(self, num_experts, input_size, output_size):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(num_experts, output_size, input_size))
        self.num_experts = num_experts

    def forward(self, inputs, expert_size):
        input_list = inputs.split(expert_size, dim=0)
        output_list = []
        for i in range(self.num_experts):
            output_list.append(F.linear(input_list[i], self.weight[i]))
        return torch.cat(output_list, dim=0)


class JetMoeTopKGating(nn.Module):
    def __init__(self, input_size, num_experts, top_k):
        super().__init__()
        self.num_experts = num_experts
        self.top_k = top_k
        self.layer = nn.Linear(input_size, num_experts, bias=False)

    def forward(self, hidden_states):
        logits = self.layer(hidden_states).float()
        top_k_logits, top_k_indices = logits.topk(self.top_k, dim=1)
        top_k_gates = torch.softmax(top_k_logits, dim=1).type_as(hidden_states)
        zeros = torch.zeros([top_k_gates.size(0), self.num_experts], dtype=top_k_gates.dtype)
        gates = zeros.scatter(1, top_k_indices, 1)
        expert_size = gates.long().sum(0).tolist()
        top_k_experts = top_k_indices.flatten()
        _, index_sorted_experts = top_k_experts.sort(0)
        batch_index = torch.div(index_sorted_experts, self.top_k, rounding_mode="trunc")
        top_k_gates = top_k_gates.flatten()
        batch_gates = top_k_gates[index_sorted_experts]
        return index_sorted_experts, batch_index, batch_gates, expert_size, logits


class JetMoeMoE(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.input_size = c.hidden_size
        self.hidden_size = c.intermediate_size
        self.activation = nn.SiLU()
        self.bias = nn.Parameter(torch.empty(self.input_size))
        self.input_linear = JetMoeParallelExperts(c.num_local_experts, self.input_size, self.hidden_size * 2)
        self.output_linear = JetMoeParallelExperts(c.num_local_experts, self.hidden_size, self.input_size)
        self.router = JetMoeTopKGating(self.input_size, c.num_local_experts, c.num_experts_per_tok)

    def forward(self, layer_input):
        bsz, length, emb_size = layer_input.size()
        layer_input = layer_input.reshape(-1, emb_size)
        _, batch_index, batch_gates, expert_size, router_logits = self.router(layer_input)
        expert_inputs = layer_input[batch_index]
        hidden_states = self.input_linear(expert_inputs, expert_size)
        chunked_hidden_states = hidden_states.chunk(2, dim=-1)
        hidden_states = self.activation(chunked_hidden_states[0]) * chunked_hidden_states[1]
        expert_outputs = self.output_linear(hidden_states, expert_size)
        expert_outputs = expert_outputs * batch_gates[:, None]
        zeros = torch.zeros((bsz * length, self.input_size), dtype=expert_outputs.dtype)
        layer_output = zeros.index_add(0, batch_index, expert_outputs)
        layer_output = layer_output.view(bsz, length, self.input_size)
        return layer_output + self.bias


class JetMoeMoA(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.num_experts = c.num_local_experts
        self.input_size = c.hidden_size
        self.hidden_size = c.kv_channels * c.num_key_value_heads
        self.top_k = c.num_experts_per_tok
        self.bias = nn.Parameter(torch.empty(self.input_size))
        self.input_linear = JetMoeParallelExperts(self.num_experts, self.input_size, self.hidden_size)
        self.output_linear = JetMoeParallelExperts(self.num_experts, self.hidden_size, self.input_size)
        self.router = JetMoeTopKGating(self.input_size, self.num_experts, self.top_k)

    def map(self, layer_input):
        bsz, length, emb_size = layer_input.size()
        layer_input = layer_input.reshape(-1, emb_size)
        index_sorted_experts, batch_index, batch_gates, expert_size, router_logits = self.router(layer_input)
        topo_info = (index_sorted_experts, batch_index, batch_gates, expert_size)
        expert_inputs = layer_input[batch_index]
        expert_outputs = self.input_linear(expert_inputs, expert_size)
        zeros = torch.zeros((bsz * length * self.top_k, self.hidden_size), dtype=expert_outputs.dtype)
        layer_output = zeros.index_add(0, index_sorted_experts, expert_outputs)
        layer_output = layer_output.view(bsz, length, self.top_k, -1)
        return layer_output, router_logits, topo_info

    def reduce(self, layer_input, topo_info):
        bsz, length, k, hidden_size = layer_input.size()
        layer_input = layer_input.reshape(-1, hidden_size)
        index_sorted_experts, batch_index, batch_gates, expert_size = topo_info
        expert_inputs = layer_input[index_sorted_experts]
        expert_outputs = self.output_linear(expert_inputs, expert_size)
        expert_outputs = expert_outputs * batch_gates[:, None]
        zeros = torch.zeros((bsz * length, self.input_size), dtype=expert_outputs.dtype)
        layer_output = zeros.index_add(0, batch_index, expert_outputs)
        layer_output = layer_output.view(bsz, length, self.input_size)
        return layer_output + self.bias

    def forward(self, layer_input):
        raise NotImplementedError("This module doesn't support call and forward.")


class JetMoeRMSNorm(nn.Module):
    def __init__(self, hidden_size, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.variance_epsilon = eps

    def forward(self, hidden_states):
        input_dtype = hidden_states.dtype
        hidden_states = hidden_states.to(torch.float32)
        variance = hidden_states.pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
        return self.weight * hidden_states.to(input_dtype)


class JetMoeRotaryEmbedding(nn.Module):
    def __init__(self, c):
        super().__init__()
        dim = c.kv_channels
        inv_freq = 1.0 / (c.rope_theta ** (torch.arange(0, dim, 2, dtype=torch.float) / dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    @torch.no_grad()
    def forward(self, x, position_ids):
        inv_freq_expanded = self.inv_freq[None, :, None].float().expand(position_ids.shape[0], -1, 1)
        position_ids_expanded = position_ids[:, None, :].float()
        freqs = (inv_freq_expanded @ position_ids_expanded).transpose(1, 2)
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(x.dtype), emb.sin().to(x.dtype)


def rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


class JetMoeAttention(nn.Module):
    def __init__(self, c, layer_idx):
        super().__init__()
        self.top_k = c.num_experts_per_tok
        self.kv_projection_size = c.kv_channels * c.num_key_value_heads
        self.num_key_value_heads = c.num_key_value_heads
        self.num_heads = c.num_key_value_heads * c.num_experts_per_tok
        self.head_dim = c.kv_channels
        self.experts = JetMoeMoA(c)
        self.kv_proj = nn.Linear(c.hidden_size, self.kv_projection_size * 2, bias=False)

    def forward(self, hidden_states=None, position_ids=None, position_embeddings=None):
        bsz, q_len, _ = hidden_states.size()
        query_states, router_logits, topo_info = self.experts.map(hidden_states)
        key_states, value_states = self.kv_proj(hidden_states).chunk(2, dim=-1)
        query_states = query_states.view(bsz, q_len, self.num_heads, self.head_dim).transpose(1, 2)
        key_states = key_states.view(bsz, q_len, self.num_key_value_heads, self.head_dim).transpose(1, 2)
        value_states = value_states.view(bsz, q_len, self.num_key_value_heads, self.head_dim).transpose(1, 2)
        cos, sin = position_embeddings
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
        query_states = query_states * cos + rotate_half(query_states) * sin
        key_states = key_states * cos + rotate_half(key_states) * sin
        key_states = key_states.repeat(1, self.top_k, 1, 1)
        value_states = value_states.repeat(1, self.top_k, 1, 1)
        attn_weights = torch.matmul(query_states, key_states.transpose(2, 3)) / math.sqrt(self.head_dim)
        causal = torch.triu(torch.full((q_len, q_len), torch.finfo(attn_weights.dtype).min), 1)
        attn_weights = attn_weights + causal
        attn_weights = F.softmax(attn_weights, dim=-1, dtype=torch.float32).to(query_states.dtype)
        attn_output = torch.matmul(attn_weights, value_states)
        attn_output = attn_output.transpose(1, 2).contiguous()
        attn_output = attn_output.reshape(bsz, q_len, self.top_k, self.kv_projection_size)
        attn_output = self.experts.reduce(attn_output, topo_info)
        attn_output = attn_output.view(bsz, q_len, -1)
        return attn_output, None, router_logits


class JetMoeDecoderLayer(nn.Module):
    def __init__(self, c, layer_idx):
        super().__init__()
        self.input_layernorm = JetMoeRMSNorm(c.hidden_size, c.rms_norm_eps)
        self.self_attention = JetMoeAttention(c, layer_idx)
        self.post_attention_layernorm = JetMoeRMSNorm(c.hidden_size, c.rms_norm_eps)
        self.mlp = JetMoeMoE(c)

    def forward(self, hidden_states, position_embeddings=None, position_ids=None):
        residual = hidden_states
        hidden_states = self.input_layernorm(hidden_states)
        hidden_states, _, _ = self.self_attention(hidden_states=hidden_states, position_ids=position_ids,
                                                  position_embeddings=position_embeddings)
        hidden_states = residual + hidden_states
        residual = hidden_states
        hidden_states = self.post_attention_layernorm(hidden_states)
        hidden_states = self.mlp(hidden_states)
        return residual + hidden_states


class JetMoeModel(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.embed_tokens = nn.Embedding(c.vocab_size, c.hidden_size)
        self.layers = nn.ModuleList([JetMoeDecoderLayer(c, i) for i in range(c.num_hidden_layers)])
        self.norm = JetMoeRMSNorm(c.hidden_size, c.rms_norm_eps)
        self.rotary_emb = JetMoeRotaryEmbedding(c)

    def forward(self, input_ids):
        hidden_states = self.embed_tokens(input_ids)
        position_ids = torch.arange(hidden_states.shape[1]).unsqueeze(0)
        position_embeddings = self.rotary_emb(hidden_states, position_ids)
        for layer in self.layers:
            hidden_states = layer(hidden_states, position_embeddings=position_embeddings, position_ids=position_ids)
        return self.norm(hidden_states)


# --- xlstm ---------------------------------------------------------------------------------


class XLSTMConfig:
    hidden_size = 32
    num_heads = 4
    num_blocks = 2
    vocab_size = 64
    qk_dim_factor = 0.5
    v_dim_factor = 1.0
    gate_soft_cap = 15.0
    norm_eps = 1e-6
    eps = 1e-6
    ffn_proj_factor = 2.667
    ffn_round_up_to_multiple_of = 64


def soft_cap(values, cap_value=None):
    if cap_value is None:
        return values
    return cap_value * torch.tanh(values / cap_value)


def mlstm_recurrent_step_native(query, key, value, igate, fgate, cstate, nstate, mstate, eps=1e-6,
                                dtype_state=torch.float32):
    dtype_qkv = query.dtype
    matC_old = cstate.to(dtype=dtype_state)
    vecN_old = nstate.to(dtype=dtype_state)
    scaM_old = mstate.to(dtype=dtype_state)
    batch_size, nh, dhqk = query.shape
    scaF_log = torch.nn.functional.logsigmoid(fgate)
    scaM_state_new = torch.max(scaF_log + scaM_old, igate)
    scaF_act = torch.exp(scaF_log + scaM_old - scaM_state_new)
    scaI_act = torch.exp(igate - scaM_state_new)
    vecQ_scaled = query * (dhqk ** (-0.5))
    matC_state_new = scaF_act[:, :, :, None] * matC_old + scaI_act[:, :, :, None] * (
        key[:, :, :, None] @ value[:, :, None, :])
    vecN_state_new = scaF_act * vecN_old + scaI_act * key
    h_num = vecQ_scaled[:, :, None, :] @ matC_state_new.to(dtype=dtype_qkv)
    h_num = h_num.squeeze(2).to(dtype=dtype_state)
    qn_dotproduct = vecQ_scaled[:, :, None, :] @ vecN_state_new[:, :, :, None].to(dtype=dtype_qkv)
    qn_dotproduct = qn_dotproduct.squeeze(2)
    max_val = torch.exp(-scaM_state_new)
    h_denom = (torch.maximum(qn_dotproduct.abs(), max_val) + eps).to(dtype=dtype_state)
    h = h_num / h_denom
    return h.to(dtype=dtype_qkv), (matC_state_new.to(dtype=dtype_state), vecN_state_new.to(dtype=dtype_state),
                                   scaM_state_new.to(dtype=dtype_state))


def mlstm_recurrent_sequence_native(query, key, value, igate, fgate, c_initial, n_initial, m_initial, eps=1e-6,
                                    dtype_state=torch.float32):
    batch_size, nh, sequence_length, dhqk = query.shape
    matC_state, vecN_state, vecM_state = c_initial, n_initial, m_initial
    vecH_list = []
    for t in range(sequence_length):
        vecF_t, vecI_t = fgate[:, :, t, None], igate[:, :, t, None]
        vecQ_t, vecK_t, vecV_t = query[:, :, t, :], key[:, :, t, :], value[:, :, t, :]
        vecH, (matC_state, vecN_state, vecM_state) = mlstm_recurrent_step_native(
            cstate=matC_state, nstate=vecN_state, mstate=vecM_state, query=vecQ_t, key=vecK_t, value=vecV_t,
            igate=vecI_t, fgate=vecF_t, eps=eps, dtype_state=dtype_state)
        vecH_list.append(vecH)
    return torch.stack(vecH_list, dim=-2), (matC_state, vecN_state, vecM_state)


class xLSTMBackend(nn.Module):
    """Inference mode: wrap_chunkwise_arbitrary_sequence_length with chunk size 64; a sequence shorter than a chunk
    (and than the smallest, 16) goes to the sequence kernel alone, from zero float32 states."""

    def __init__(self, c):
        super().__init__()
        self.eps = c.eps

    def forward(self, query=None, key=None, value=None, igate=None, fgate=None):
        batch_size, nh, sequence_length, dhqk = key.shape
        dhhv = value.shape[-1]
        c_state = torch.zeros(batch_size, nh, dhqk, dhhv, dtype=torch.float32)
        n_state = torch.zeros(batch_size, nh, dhqk, dtype=torch.float32)
        m_state = torch.zeros(batch_size, nh, 1, dtype=torch.float32)
        h_out, state = mlstm_recurrent_sequence_native(query=query, key=key, value=value, igate=igate, fgate=fgate,
                                                       c_initial=c_state, n_initial=n_state, m_initial=m_state,
                                                       eps=self.eps)
        return h_out, state


class xLSTMRMSNorm(nn.Module):
    def __init__(self, num_features, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(num_features))

    def forward(self, x):
        in_dtype = x.dtype
        x = x.float()
        x = x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps)
        return x.to(in_dtype) * self.weight


class xLSTMMultiHeadLayerNorm(nn.Module):
    def __init__(self, num_heads, head_dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(num_heads * head_dim))

    def forward(self, x):
        batch_size, sequence_length, nh, DH = x.shape
        in_dtype = x.dtype
        xf = x.float()
        x_centered = xf - xf.mean(dim=-1, keepdim=True)
        y = x_centered * torch.rsqrt(xf.var(dim=-1, keepdim=True, unbiased=False) + self.eps)
        y = y.to(in_dtype).reshape(batch_size, sequence_length, -1)
        return y * self.weight


class xLSTMFeedForward(nn.Module):
    def __init__(self, c):
        super().__init__()
        m = c.ffn_round_up_to_multiple_of
        self.up_proj_dim = int(((c.hidden_size * c.ffn_proj_factor) + m - 1) // m * m)
        self.proj_up_gate = nn.Linear(c.hidden_size, self.up_proj_dim, bias=False)
        self.proj_up = nn.Linear(c.hidden_size, self.up_proj_dim, bias=False)
        self.proj_down = nn.Linear(self.up_proj_dim, c.hidden_size, bias=False)
        self.act_fn = nn.SiLU()

    def forward(self, x):
        return self.proj_down(self.act_fn(self.proj_up_gate(x)) * self.proj_up(x))


class xLSTMLayer(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        self.v_dim = int(c.hidden_size * c.v_dim_factor)
        self.qk_dim = int(c.hidden_size * c.qk_dim_factor)
        self.q = nn.Linear(c.hidden_size, self.qk_dim, bias=False)
        self.k = nn.Linear(c.hidden_size, self.qk_dim, bias=False)
        self.v = nn.Linear(c.hidden_size, self.v_dim, bias=False)
        self.ogate_preact = nn.Linear(c.hidden_size, self.v_dim, bias=False)
        self.igate_preact = nn.Linear(c.hidden_size, c.num_heads, bias=True)
        self.fgate_preact = nn.Linear(c.hidden_size, c.num_heads, bias=True)
        self.ogate_act_fn = nn.Sigmoid()
        self.mlstm_backend = xLSTMBackend(c)
        self.multihead_norm = xLSTMMultiHeadLayerNorm(c.num_heads, self.v_dim // c.num_heads, eps=c.norm_eps)
        self.out_proj = nn.Linear(self.v_dim, c.hidden_size, bias=False)

    def forward(self, x, state=None):
        batch_size, sequence_length, _ = x.shape
        nh = self.c.num_heads
        query, key, value = self.q(x), self.k(x), self.v(x)
        o_preact = self.ogate_preact(x)
        i_preact = soft_cap(self.igate_preact(x), cap_value=self.c.gate_soft_cap)
        f_preact = soft_cap(self.fgate_preact(x), cap_value=self.c.gate_soft_cap)
        query = query.reshape(batch_size, sequence_length, nh, -1).transpose(1, 2)
        key = key.reshape(batch_size, sequence_length, nh, -1).transpose(1, 2)
        value = value.reshape(batch_size, sequence_length, nh, -1).transpose(1, 2)
        i_preact = i_preact.transpose(1, 2)
        f_preact = f_preact.transpose(1, 2)
        h, state = self.mlstm_backend(query=query, key=key, value=value, igate=i_preact, fgate=f_preact)
        h = h.transpose(1, 2)
        h_norm = self.multihead_norm(h)
        h_norm = h_norm.reshape(batch_size, sequence_length, -1)
        h_out = self.ogate_act_fn(o_preact) * h_norm
        return self.out_proj(h_out), state


class xLSTMBlock(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.norm_mlstm = xLSTMRMSNorm(c.hidden_size, eps=c.norm_eps)
        self.mlstm_layer = xLSTMLayer(c)
        self.norm_ffn = xLSTMRMSNorm(c.hidden_size, eps=c.norm_eps)
        self.ffn = xLSTMFeedForward(c)

    def forward(self, x, state=None):
        x_mlstm, state = self.mlstm_layer(self.norm_mlstm(x), state)
        x = x + x_mlstm
        x = x + self.ffn(self.norm_ffn(x))
        return x, state


class xLSTMModel(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.embeddings = nn.Embedding(c.vocab_size, c.hidden_size)
        self.blocks = nn.ModuleList([xLSTMBlock(c) for _ in range(c.num_blocks)])
        self.out_norm = xLSTMRMSNorm(c.hidden_size, eps=c.norm_eps)

    def forward(self, input_ids):
        hidden_states = self.embeddings(input_ids)
        for block in self.blocks:
            hidden_states, _ = block(hidden_states, state=None)
        return self.out_norm(hidden_states)


# --- fnet ----------------------------------------------------------------------------------


class FNetConfig:
    hidden_size = 32
    intermediate_size = 48
    num_hidden_layers = 2
    vocab_size = 64
    max_position_embeddings = 64
    type_vocab_size = 4
    layer_norm_eps = 1e-12
    pad_token_id = 3


class NewGELUActivation(nn.Module):
    def forward(self, x):
        return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


class FNetEmbeddings(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.word_embeddings = nn.Embedding(c.vocab_size, c.hidden_size, padding_idx=c.pad_token_id)
        self.position_embeddings = nn.Embedding(c.max_position_embeddings, c.hidden_size)
        self.token_type_embeddings = nn.Embedding(c.type_vocab_size, c.hidden_size)
        self.LayerNorm = nn.LayerNorm(c.hidden_size, eps=c.layer_norm_eps)
        self.projection = nn.Linear(c.hidden_size, c.hidden_size)
        self.dropout = nn.Dropout(0.1)
        self.register_buffer("position_ids", torch.arange(c.max_position_embeddings).expand((1, -1)))

    def forward(self, input_ids=None, token_type_ids=None):
        seq_length = input_ids.shape[1]
        position_ids = self.position_ids[:, :seq_length]
        embeddings = self.word_embeddings(input_ids) + self.token_type_embeddings(token_type_ids)
        embeddings = embeddings + self.position_embeddings(position_ids)
        embeddings = self.LayerNorm(embeddings)
        embeddings = self.projection(embeddings)
        return self.dropout(embeddings)


class FNetBasicFourierTransform(nn.Module):
    def forward(self, hidden_states):
        return (torch.fft.fftn(hidden_states, dim=(1, 2)).real,)


class FNetBasicOutput(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.LayerNorm = nn.LayerNorm(c.hidden_size, eps=c.layer_norm_eps)

    def forward(self, hidden_states, input_tensor):
        return self.LayerNorm(input_tensor + hidden_states)


class FNetFourierTransform(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.self = FNetBasicFourierTransform()
        self.output = FNetBasicOutput(c)

    def forward(self, hidden_states):
        self_outputs = self.self(hidden_states)
        return (self.output(self_outputs[0], hidden_states),)


class FNetIntermediate(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.dense = nn.Linear(c.hidden_size, c.intermediate_size)
        self.intermediate_act_fn = NewGELUActivation()

    def forward(self, hidden_states):
        return self.intermediate_act_fn(self.dense(hidden_states))


class FNetOutput(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.dense = nn.Linear(c.intermediate_size, c.hidden_size)
        self.LayerNorm = nn.LayerNorm(c.hidden_size, eps=c.layer_norm_eps)
        self.dropout = nn.Dropout(0.1)

    def forward(self, hidden_states, input_tensor):
        hidden_states = self.dropout(self.dense(hidden_states))
        return self.LayerNorm(hidden_states + input_tensor)


class FNetLayer(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.fourier = FNetFourierTransform(c)
        self.intermediate = FNetIntermediate(c)
        self.output = FNetOutput(c)

    def forward(self, hidden_states):
        fourier_output = self.fourier(hidden_states)[0]
        return (self.output(self.intermediate(fourier_output), fourier_output),)


class FNetEncoder(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.layer = nn.ModuleList([FNetLayer(c) for _ in range(c.num_hidden_layers)])

    def forward(self, hidden_states):
        for layer_module in self.layer:
            hidden_states = layer_module(hidden_states)[0]
        return hidden_states


class FNetPooler(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.dense = nn.Linear(c.hidden_size, c.hidden_size)
        self.activation = nn.Tanh()

    def forward(self, hidden_states):
        return self.activation(self.dense(hidden_states[:, 0]))


class FNetModel(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.embeddings = FNetEmbeddings(c)
        self.encoder = FNetEncoder(c)
        self.pooler = FNetPooler(c)

    def forward(self, input_ids):
        token_type_ids = torch.zeros(input_ids.shape, dtype=torch.long)
        h = self.embeddings(input_ids=input_ids, token_type_ids=token_type_ids)
        h = self.encoder(h)
        self.pooler(h)
        return h


CASES = {"jetmoe": (JetMoeModel, JetMoeConfig), "xlstm": (xLSTMModel, XLSTMConfig), "fnet": (FNetModel, FNetConfig)}
