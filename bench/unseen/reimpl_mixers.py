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


CASES = {"jetmoe": (JetMoeModel, JetMoeConfig), "fnet": (FNetModel, FNetConfig)}
