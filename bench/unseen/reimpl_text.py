"""Faithful torch 1.13 reimplementations of the text encoders diffusion pipelines run (cases of
capture_reimpl.py; its docstring says how a case is built and captured).

t5 follows huggingface/transformers src/transformers/models/t5/modeling_t5.py at commit
6b8b757dfcb582379a64f013cdce46c43629f2b0 (the encoder stack, as capture_lm.py captures an
encoder-decoder: its encoder; the call boundaries of the real transformers trace of the sixth
batch: no mask tensor, the blocks called as (hidden, None, position_bias), each block, self-attention
layer and attention returning (hidden, position_bias)) with configuration_t5.py's defaults (32
relative buckets, max distance 128, ReLU, not gated, ε 1e-6) but for the sizes: d_model 32, 4 heads
of 8, d_ff 48, 2 layers, 12 ids. What it shows:
  - the relative position bias computed inside the first attention that needs it: T5's
    bidirectional buckets of key − query (16 a side, 8 exact, log-spaced to 128) index that
    attention's relative_attention_bias, an nn.Embedding [32, heads] whose output [S, S, heads]
    is permuted to [1, heads, S, S] in the forward (no call sees it laid out that way before the
    attention's scores read it); the attention returns it and every later block is handed it;
  - attention without the 1/√d scale (q·kᵀ + bias, softmax in f32), T5LayerNorm (an RMS norm
    without mean or bias, γ·x̂), a ReLU FFN (wi, act, wo), pre-norm residuals.

umt5 follows src/transformers/models/umt5/modeling_umt5.py at the same commit, configuration_umt5.py's
defaults (gated-gelu: NewGELUActivation, wi_0 and wi_1) and the same sizes: every attention has a
relative_attention_bias of its own and computes its bias each call (no block hands one on); the
blocks return a tensor, the attentions (output, None).

clip_text_model follows src/transformers/models/clip/modeling_clip.py at commit
6b8b757dfcb582379a64f013cdce46c43629f2b0 (CLIPTextModel; the call boundaries of the real transformers
trace of the sixth batch: SDPA's is_causal, so no mask tensor reaches the encoder; the attention
called as (hidden_states=...) returning (output, None)) with configuration_clip.py's text defaults
(quick_gelu, ε 1e-5, 77 positions) and capture_lm.py's eos_token_id 2 (the pooled row at the
argmax of the ids) but for the sizes: hidden 32, 2 heads, intermediate 48, 2 layers. What it shows:
  - learned positions 0…S−1 from the position_ids buffer, added to the token rows;
  - causal attention scaled by 1/√head, pre-norm LayerNorm layers, a final LayerNorm;
  - QuickGELUActivation, x·σ(1.702·x), a module of its own between fc1 and fc2.

dpr follows src/transformers/models/dpr/modeling_dpr.py and models/bert/modeling_bert.py at commit
6b8b757dfcb582379a64f013cdce46c43629f2b0 (DPRQuestionEncoder; the call boundaries of the real
transformers trace of the sixth batch: BertModel without its pooler, SDPA, the all-ones mask dropped
before the encoder) with configuration_dpr.py's defaults (projection_dim 0, GELU, ε 1e-12, 2 token
types) but for the sizes: hidden 32, 2 heads, intermediate 48, 2 layers, 12 ids (among them 7
and 8, as in the real trace: tanh of an id is 1 in f32 from 9 on, not below). What it shows: the question encoder makes the bool mask ids ≠ pad (all
ones here) and the token types (zeros) from the ids and hands both down; BERT post-norm layers; the
model's output the first row of the last hidden state (the pooled [CLS] row, no projection).

deberta follows src/transformers/models/deberta/modeling_deberta.py (DeBERTa v1, the arithmetic of
the file read at commit 0038a3caa5c7d0c5014704005dd67ab347451ddc, laid out at the call boundaries of
the real transformers trace of the sixth batch: nn.Dropout for StableDropout, the mask passed as a
float [1, S] to the embeddings and the encoder and pairwise [1, 1, S, S] to the layers, each layer,
attention and self-attention returning (output, None), the encoder returning every hidden state)
with configuration_deberta.py's defaults (no relative attention, position_biased_input, no token
types, GELU, ε 1e-7) but for the sizes: hidden 32, 2 heads, intermediate 48, 2 layers. What it shows:
  - in_proj, one bias-free projection read per head as [q | k | v] (view(B, S, H, −1), chunk(3));
  - q_bias and v_bias, parameters of the self-attention module itself (no call of theirs), added
    to q and v in the forward; q divided by √head before q·kᵀ; the pairwise mask through
    masked_fill(finfo.min); the probabilities through an nn.Dropout call;
  - DebertaLayerNorm (TF style: ε inside the square root, in f32) and the embeddings times the mask.
"""
import math

import torch
from torch import nn
from torch.nn import functional as F


# --- t5, umt5 ----------------------------------------------------------------------------


class T5Config:
    vocab_size = 64
    d_model = 32
    d_kv = 8
    d_ff = 48
    num_layers = 2
    num_heads = 4
    relative_attention_num_buckets = 32
    relative_attention_max_distance = 128
    layer_norm_epsilon = 1e-6
    dropout_rate = 0.1
    is_gated_act = False
    dense_act_fn = "relu"
    seq_len = 12  # distances past the 8 exact buckets of a side


class UMT5Config(T5Config):
    is_gated_act = True
    dense_act_fn = "gelu_new"


class T5LayerNorm(nn.Module):
    def __init__(self, hidden_size, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.variance_epsilon = eps

    def forward(self, hidden_states):
        variance = hidden_states.to(torch.float32).pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
        if self.weight.dtype in [torch.float16, torch.bfloat16]:
            hidden_states = hidden_states.to(self.weight.dtype)
        return self.weight * hidden_states


class NewGELUActivation(nn.Module):
    def forward(self, input):
        return 0.5 * input * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (input + 0.044715 * torch.pow(input, 3.0))))


def t5_act(name):
    return nn.ReLU() if name == "relu" else NewGELUActivation()


class T5DenseActDense(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.wi = nn.Linear(c.d_model, c.d_ff, bias=False)
        self.wo = nn.Linear(c.d_ff, c.d_model, bias=False)
        self.dropout = nn.Dropout(c.dropout_rate)
        self.act = t5_act(c.dense_act_fn)

    def forward(self, hidden_states):
        hidden_states = self.wi(hidden_states)
        hidden_states = self.act(hidden_states)
        hidden_states = self.dropout(hidden_states)
        return self.wo(hidden_states)


class T5DenseGatedActDense(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.wi_0 = nn.Linear(c.d_model, c.d_ff, bias=False)
        self.wi_1 = nn.Linear(c.d_model, c.d_ff, bias=False)
        self.wo = nn.Linear(c.d_ff, c.d_model, bias=False)
        self.dropout = nn.Dropout(c.dropout_rate)
        self.act = t5_act(c.dense_act_fn)

    def forward(self, hidden_states):
        hidden_gelu = self.act(self.wi_0(hidden_states))
        hidden_linear = self.wi_1(hidden_states)
        hidden_states = hidden_gelu * hidden_linear
        hidden_states = self.dropout(hidden_states)
        return self.wo(hidden_states)


class T5LayerFF(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.DenseReluDense = T5DenseGatedActDense(c) if c.is_gated_act else T5DenseActDense(c)
        self.layer_norm = T5LayerNorm(c.d_model, eps=c.layer_norm_epsilon)
        self.dropout = nn.Dropout(c.dropout_rate)

    def forward(self, hidden_states):
        forwarded_states = self.layer_norm(hidden_states)
        forwarded_states = self.DenseReluDense(forwarded_states)
        return hidden_states + self.dropout(forwarded_states)


def _relative_position_bucket(relative_position, bidirectional=True, num_buckets=32, max_distance=128):
    relative_buckets = 0
    if bidirectional:
        num_buckets //= 2
        relative_buckets += (relative_position > 0).to(torch.long) * num_buckets
        relative_position = torch.abs(relative_position)
    else:
        relative_position = -torch.min(relative_position, torch.zeros_like(relative_position))
    max_exact = num_buckets // 2
    is_small = relative_position < max_exact
    relative_position_if_large = max_exact + (
        torch.log(relative_position.float() / max_exact)
        / math.log(max_distance / max_exact)
        * (num_buckets - max_exact)
    ).to(torch.long)
    relative_position_if_large = torch.min(
        relative_position_if_large, torch.full_like(relative_position_if_large, num_buckets - 1)
    )
    relative_buckets += torch.where(is_small, relative_position, relative_position_if_large)
    return relative_buckets


class T5Attention(nn.Module):
    """T5Attention (umt5: UMT5Attention, its bias computed on every call and not returned)."""

    def __init__(self, c, has_relative_attention_bias=False, returns_bias=True):
        super().__init__()
        self.has_relative_attention_bias = has_relative_attention_bias
        self.returns_bias = returns_bias
        self.relative_attention_num_buckets = c.relative_attention_num_buckets
        self.relative_attention_max_distance = c.relative_attention_max_distance
        self.d_model = c.d_model
        self.key_value_proj_dim = c.d_kv
        self.n_heads = c.num_heads
        self.inner_dim = self.n_heads * self.key_value_proj_dim
        self.q = nn.Linear(self.d_model, self.inner_dim, bias=False)
        self.k = nn.Linear(self.d_model, self.inner_dim, bias=False)
        self.v = nn.Linear(self.d_model, self.inner_dim, bias=False)
        self.o = nn.Linear(self.inner_dim, self.d_model, bias=False)
        if self.has_relative_attention_bias:
            self.relative_attention_bias = nn.Embedding(self.relative_attention_num_buckets, self.n_heads)

    def compute_bias(self, query_length, key_length):
        context_position = torch.arange(query_length, dtype=torch.long)[:, None]
        memory_position = torch.arange(key_length, dtype=torch.long)[None, :]
        relative_position = memory_position - context_position
        relative_position_bucket = _relative_position_bucket(
            relative_position, bidirectional=True, num_buckets=self.relative_attention_num_buckets,
            max_distance=self.relative_attention_max_distance)
        values = self.relative_attention_bias(relative_position_bucket)  # (query_length, key_length, num_heads)
        return values.permute([2, 0, 1]).unsqueeze(0)  # (1, num_heads, query_length, key_length)

    def forward(self, hidden_states, mask=None, position_bias=None):
        batch_size, seq_length = hidden_states.shape[:2]
        query_states = self.q(hidden_states).view(batch_size, -1, self.n_heads, self.key_value_proj_dim).transpose(1, 2)
        key_states = self.k(hidden_states).view(batch_size, -1, self.n_heads, self.key_value_proj_dim).transpose(1, 2)
        value_states = self.v(hidden_states).view(batch_size, -1, self.n_heads, self.key_value_proj_dim).transpose(1, 2)
        scores = torch.matmul(query_states, key_states.transpose(3, 2))
        if position_bias is None:
            key_length = key_states.shape[-2]
            if not self.has_relative_attention_bias:
                position_bias = torch.zeros((1, self.n_heads, seq_length, key_length), dtype=scores.dtype)
            else:
                position_bias = self.compute_bias(seq_length, key_length)
                position_bias = position_bias[:, :, -seq_length:, :]
            if mask is not None:
                position_bias = position_bias + mask[:, :, :, :key_length]
        scores += position_bias
        attn_weights = F.softmax(scores.float(), dim=-1).type_as(scores)
        attn_output = torch.matmul(attn_weights, value_states)
        attn_output = attn_output.transpose(1, 2).contiguous().view(batch_size, -1, self.inner_dim)
        attn_output = self.o(attn_output)
        if self.returns_bias:
            return attn_output, position_bias
        return attn_output, None


class T5LayerSelfAttention(nn.Module):
    def __init__(self, c, has_relative_attention_bias=False, returns_bias=True):
        super().__init__()
        self.SelfAttention = T5Attention(c, has_relative_attention_bias, returns_bias)
        self.layer_norm = T5LayerNorm(c.d_model, eps=c.layer_norm_epsilon)
        self.dropout = nn.Dropout(c.dropout_rate)

    def forward(self, hidden_states, attention_mask=None, position_bias=None):
        normed_hidden_states = self.layer_norm(hidden_states)
        if position_bias is None:
            attention_output = self.SelfAttention(normed_hidden_states, mask=attention_mask)
        else:
            attention_output = self.SelfAttention(normed_hidden_states, mask=attention_mask, position_bias=position_bias)
        hidden_states = hidden_states + self.dropout(attention_output[0])
        if attention_output[1] is None:
            return (hidden_states,)
        return (hidden_states,) + attention_output[1:]


class T5Block(nn.Module):
    def __init__(self, c, has_relative_attention_bias=False, umt5=False):
        super().__init__()
        self.umt5 = umt5
        self.layer = nn.ModuleList([T5LayerSelfAttention(c, has_relative_attention_bias, returns_bias=not umt5),
                                    T5LayerFF(c)])

    def forward(self, hidden_states, attention_mask=None, position_bias=None):
        if position_bias is None:
            self_attention_outputs = self.layer[0](hidden_states, attention_mask=attention_mask)
        else:
            self_attention_outputs = self.layer[0](hidden_states, attention_mask=attention_mask, position_bias=position_bias)
        hidden_states = self_attention_outputs[0]
        attention_outputs = self_attention_outputs[1:]
        hidden_states = self.layer[-1](hidden_states)
        if self.umt5:
            return hidden_states
        return (hidden_states,) + attention_outputs


class T5Stack(nn.Module):
    def __init__(self, c, umt5=False):
        super().__init__()
        self.umt5 = umt5
        self.embed_tokens = nn.Embedding(c.vocab_size, c.d_model)
        self.block = nn.ModuleList([T5Block(c, has_relative_attention_bias=umt5 or i == 0, umt5=umt5)
                                    for i in range(c.num_layers)])
        self.final_layer_norm = T5LayerNorm(c.d_model, eps=c.layer_norm_epsilon)
        self.dropout = nn.Dropout(c.dropout_rate)

    def forward(self, input_ids):
        inputs_embeds = self.embed_tokens(input_ids)
        hidden_states = self.dropout(inputs_embeds)
        position_bias = None
        for layer_module in self.block:
            if self.umt5:
                hidden_states = layer_module(hidden_states)
                continue
            # as the stack calls it: (hidden, causal_mask, position_bias, ...), the mask None
            layer_outputs = layer_module(hidden_states, None, position_bias)
            hidden_states = layer_outputs[0]
            position_bias = layer_outputs[1]
        hidden_states = self.final_layer_norm(hidden_states)
        return self.dropout(hidden_states)


def T5EncoderModel(c):
    return T5Stack(c)


def UMT5EncoderModel(c):
    return T5Stack(c, umt5=True)


# --- clip_text_model ---------------------------------------------------------------------


class CLIPTextConfig:
    vocab_size = 64
    hidden_size = 32
    intermediate_size = 48
    num_hidden_layers = 2
    num_attention_heads = 2
    max_position_embeddings = 77
    layer_norm_eps = 1e-5
    eos_token_id = 2


class CLIPTextEmbeddings(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.token_embedding = nn.Embedding(c.vocab_size, c.hidden_size)
        self.position_embedding = nn.Embedding(c.max_position_embeddings, c.hidden_size)
        self.register_buffer("position_ids", torch.arange(c.max_position_embeddings).expand((1, -1)), persistent=False)

    def forward(self, input_ids=None):
        seq_length = input_ids.shape[-1]
        position_ids = self.position_ids[:, :seq_length]
        inputs_embeds = self.token_embedding(input_ids)
        position_embeds = self.position_embedding(position_ids)
        return inputs_embeds + position_embeds


class CLIPAttention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.embed_dim = c.hidden_size
        self.num_heads = c.num_attention_heads
        self.head_dim = self.embed_dim // self.num_heads
        self.scale = self.head_dim ** -0.5
        self.k_proj = nn.Linear(self.embed_dim, self.embed_dim)
        self.v_proj = nn.Linear(self.embed_dim, self.embed_dim)
        self.q_proj = nn.Linear(self.embed_dim, self.embed_dim)
        self.out_proj = nn.Linear(self.embed_dim, self.embed_dim)

    def forward(self, hidden_states, attention_mask=None):
        batch_size, seq_length, embed_dim = hidden_states.shape
        queries = self.q_proj(hidden_states)
        keys = self.k_proj(hidden_states)
        values = self.v_proj(hidden_states)
        queries = queries.view(batch_size, seq_length, -1, self.head_dim).transpose(1, 2)
        keys = keys.view(batch_size, seq_length, -1, self.head_dim).transpose(1, 2)
        values = values.view(batch_size, seq_length, -1, self.head_dim).transpose(1, 2)
        # SDPA with is_causal (no mask tensor), written out: scores·scale, the upper triangle masked
        attn_weights = torch.matmul(queries, keys.transpose(2, 3)) * self.scale
        causal = torch.ones(seq_length, seq_length, dtype=torch.bool).tril()
        attn_weights = attn_weights.masked_fill(~causal, float("-inf"))
        attn_weights = F.softmax(attn_weights, dim=-1, dtype=torch.float32).to(queries.dtype)
        attn_output = torch.matmul(attn_weights, values)
        attn_output = attn_output.transpose(1, 2).contiguous()
        attn_output = attn_output.reshape(batch_size, seq_length, embed_dim).contiguous()
        return self.out_proj(attn_output), None


class QuickGELUActivation(nn.Module):
    def forward(self, input):
        return input * torch.sigmoid(1.702 * input)


class CLIPMLP(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.activation_fn = QuickGELUActivation()
        self.fc1 = nn.Linear(c.hidden_size, c.intermediate_size)
        self.fc2 = nn.Linear(c.intermediate_size, c.hidden_size)

    def forward(self, hidden_states):
        hidden_states = self.fc1(hidden_states)
        hidden_states = self.activation_fn(hidden_states)
        return self.fc2(hidden_states)


class CLIPEncoderLayer(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.embed_dim = c.hidden_size
        self.self_attn = CLIPAttention(c)
        self.layer_norm1 = nn.LayerNorm(self.embed_dim, eps=c.layer_norm_eps)
        self.mlp = CLIPMLP(c)
        self.layer_norm2 = nn.LayerNorm(self.embed_dim, eps=c.layer_norm_eps)

    def forward(self, hidden_states):
        residual = hidden_states
        hidden_states = self.layer_norm1(hidden_states)
        hidden_states, _ = self.self_attn(hidden_states=hidden_states)
        hidden_states = residual + hidden_states
        residual = hidden_states
        hidden_states = self.layer_norm2(hidden_states)
        hidden_states = self.mlp(hidden_states)
        return residual + hidden_states


class CLIPEncoder(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.layers = nn.ModuleList([CLIPEncoderLayer(c) for _ in range(c.num_hidden_layers)])

    def forward(self, inputs_embeds):
        hidden_states = inputs_embeds
        for encoder_layer in self.layers:
            hidden_states = encoder_layer(hidden_states)
        return {"last_hidden_state": hidden_states}


class CLIPTextModel(nn.Module):
    """CLIPTextModel: its text_model's modules at the top (the real trace's paths: embeddings,
    encoder, final_layer_norm), returning last_hidden_state and pooler_output."""

    def __init__(self, c):
        super().__init__()
        self.eos_token_id = c.eos_token_id
        self.embeddings = CLIPTextEmbeddings(c)
        self.encoder = CLIPEncoder(c)
        self.final_layer_norm = nn.LayerNorm(c.hidden_size, eps=c.layer_norm_eps)

    def forward(self, input_ids):
        hidden_states = self.embeddings(input_ids=input_ids)
        encoder_outputs = self.encoder(inputs_embeds=hidden_states)
        last_hidden_state = self.final_layer_norm(encoder_outputs["last_hidden_state"])
        # eos_token_id 2: the legacy pooling, the row at the largest id
        pooled_output = last_hidden_state[
            torch.arange(last_hidden_state.shape[0]), input_ids.to(dtype=torch.int, device=last_hidden_state.device).argmax(dim=-1)]
        return {"last_hidden_state": last_hidden_state, "pooler_output": pooled_output}


# --- dpr ---------------------------------------------------------------------------------


class DPRConfig:
    vocab_size = 64
    seq_len = 12  # the real trace's 12 ids: 7 and 8 among them
    hidden_size = 32
    num_hidden_layers = 2
    num_attention_heads = 2
    intermediate_size = 48
    max_position_embeddings = 64
    type_vocab_size = 2
    layer_norm_eps = 1e-12
    pad_token_id = 0
    projection_dim = 0


class BertEmbeddings(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.word_embeddings = nn.Embedding(c.vocab_size, c.hidden_size, padding_idx=c.pad_token_id)
        self.position_embeddings = nn.Embedding(c.max_position_embeddings, c.hidden_size)
        self.token_type_embeddings = nn.Embedding(c.type_vocab_size, c.hidden_size)
        self.LayerNorm = nn.LayerNorm(c.hidden_size, eps=c.layer_norm_eps)
        self.dropout = nn.Dropout(0.1)
        self.register_buffer("position_ids", torch.arange(c.max_position_embeddings).expand((1, -1)), persistent=False)

    def forward(self, input_ids=None, token_type_ids=None):
        seq_length = input_ids.shape[1]
        position_ids = self.position_ids[:, :seq_length]
        inputs_embeds = self.word_embeddings(input_ids)
        token_type_embeddings = self.token_type_embeddings(token_type_ids)
        embeddings = inputs_embeds + token_type_embeddings
        embeddings = embeddings + self.position_embeddings(position_ids)
        embeddings = self.LayerNorm(embeddings)
        return self.dropout(embeddings)


class BertSelfAttention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.num_attention_heads = c.num_attention_heads
        self.attention_head_size = c.hidden_size // c.num_attention_heads
        self.all_head_size = self.num_attention_heads * self.attention_head_size
        self.scaling = self.attention_head_size ** -0.5
        self.query = nn.Linear(c.hidden_size, self.all_head_size)
        self.key = nn.Linear(c.hidden_size, self.all_head_size)
        self.value = nn.Linear(c.hidden_size, self.all_head_size)

    def forward(self, hidden_states):
        input_shape = hidden_states.shape[:-1]
        hidden_shape = (*input_shape, -1, self.attention_head_size)
        query_layer = self.query(hidden_states).view(hidden_shape).transpose(1, 2)
        key_layer = self.key(hidden_states).view(hidden_shape).transpose(1, 2)
        value_layer = self.value(hidden_states).view(hidden_shape).transpose(1, 2)
        # SDPA without a mask, written out
        attn_weights = torch.matmul(query_layer, key_layer.transpose(2, 3)) * self.scaling
        attn_weights = F.softmax(attn_weights, dim=-1, dtype=torch.float32).to(query_layer.dtype)
        attn_output = torch.matmul(attn_weights, value_layer).transpose(1, 2).contiguous()
        return attn_output.reshape(*input_shape, -1).contiguous(), None


class BertSelfOutput(nn.Module):
    def __init__(self, c, width=None):
        super().__init__()
        self.dense = nn.Linear(width or c.hidden_size, c.hidden_size)
        self.LayerNorm = nn.LayerNorm(c.hidden_size, eps=c.layer_norm_eps)
        self.dropout = nn.Dropout(0.1)

    def forward(self, hidden_states, input_tensor):
        hidden_states = self.dense(hidden_states)
        hidden_states = self.dropout(hidden_states)
        return self.LayerNorm(hidden_states + input_tensor)


class BertAttention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.self = BertSelfAttention(c)
        self.output = BertSelfOutput(c)

    def forward(self, hidden_states):
        self_outputs = self.self(hidden_states)
        attention_output = self.output(self_outputs[0], hidden_states)
        return (attention_output,) + self_outputs[1:]


class GELUActivation(nn.Module):
    def forward(self, input):
        return F.gelu(input)


class BertIntermediate(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.dense = nn.Linear(c.hidden_size, c.intermediate_size)
        self.intermediate_act_fn = GELUActivation()

    def forward(self, hidden_states):
        return self.intermediate_act_fn(self.dense(hidden_states))


class BertLayer(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.attention = BertAttention(c)
        self.intermediate = BertIntermediate(c)
        self.output = BertSelfOutput(c, c.intermediate_size)

    def forward(self, hidden_states):
        attention_output = self.attention(hidden_states)[0]
        intermediate_output = self.intermediate(attention_output)
        return self.output(intermediate_output, attention_output)


class BertEncoder(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.layer = nn.ModuleList([BertLayer(c) for _ in range(c.num_hidden_layers)])

    def forward(self, hidden_states):
        for layer_module in self.layer:
            hidden_states = layer_module(hidden_states)
        return {"last_hidden_state": hidden_states}


class BertModel(nn.Module):
    """BertModel(add_pooling_layer=False)."""

    def __init__(self, c):
        super().__init__()
        self.embeddings = BertEmbeddings(c)
        self.encoder = BertEncoder(c)

    def forward(self, input_ids=None, attention_mask=None, token_type_ids=None):
        embedding_output = self.embeddings(input_ids=input_ids, token_type_ids=token_type_ids)
        # an all-ones mask is dropped on the SDPA path: the encoder is given none
        assert bool(attention_mask.all())
        encoder_outputs = self.encoder(embedding_output)
        return {"last_hidden_state": encoder_outputs["last_hidden_state"]}


class DPREncoder(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.bert_model = BertModel(c)

    def forward(self, input_ids=None, attention_mask=None, token_type_ids=None):
        outputs = self.bert_model(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids)
        sequence_output = outputs["last_hidden_state"]
        pooled_output = sequence_output[:, 0, :]
        return {"last_hidden_state": sequence_output, "pooler_output": pooled_output}


class DPRQuestionEncoder(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.pad_token_id = c.pad_token_id
        self.question_encoder = DPREncoder(c)

    def forward(self, input_ids):
        input_shape = input_ids.size()
        attention_mask = input_ids != self.pad_token_id
        token_type_ids = torch.zeros(input_shape, dtype=torch.long)
        outputs = self.question_encoder(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids)
        return {"pooler_output": outputs["pooler_output"]}


# --- deberta -----------------------------------------------------------------------------


class DebertaConfig:
    vocab_size = 64
    hidden_size = 32
    num_hidden_layers = 2
    num_attention_heads = 2
    intermediate_size = 48
    max_position_embeddings = 64
    layer_norm_eps = 1e-7
    pad_token_id = 0


class DebertaLayerNorm(nn.Module):
    """LayerNorm module in the TF style (epsilon inside the square root)."""

    def __init__(self, size, eps=1e-12):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(size))
        self.bias = nn.Parameter(torch.zeros(size))
        self.variance_epsilon = eps

    def forward(self, hidden_states):
        input_type = hidden_states.dtype
        hidden_states = hidden_states.float()
        mean = hidden_states.mean(-1, keepdim=True)
        variance = (hidden_states - mean).pow(2).mean(-1, keepdim=True)
        hidden_states = (hidden_states - mean) / torch.sqrt(variance + self.variance_epsilon)
        hidden_states = hidden_states.to(input_type)
        return self.weight * hidden_states + self.bias


class DebertaEmbeddings(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.word_embeddings = nn.Embedding(c.vocab_size, c.hidden_size, padding_idx=c.pad_token_id)
        self.position_embeddings = nn.Embedding(c.max_position_embeddings, c.hidden_size)
        self.LayerNorm = DebertaLayerNorm(c.hidden_size, c.layer_norm_eps)
        self.dropout = nn.Dropout(0.1)
        self.register_buffer("position_ids", torch.arange(c.max_position_embeddings).expand((1, -1)), persistent=False)

    def forward(self, input_ids=None, token_type_ids=None, mask=None):
        seq_length = input_ids.shape[1]
        position_ids = self.position_ids[:, :seq_length]
        inputs_embeds = self.word_embeddings(input_ids)
        position_embeddings = self.position_embeddings(position_ids.long())
        embeddings = inputs_embeds + position_embeddings  # position_biased_input; no token types
        embeddings = self.LayerNorm(embeddings)
        mask = mask.unsqueeze(2).to(embeddings.dtype)
        embeddings = embeddings * mask
        return self.dropout(embeddings)


class DisentangledSelfAttention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.num_attention_heads = c.num_attention_heads
        self.attention_head_size = c.hidden_size // c.num_attention_heads
        self.all_head_size = self.num_attention_heads * self.attention_head_size
        self.in_proj = nn.Linear(c.hidden_size, self.all_head_size * 3, bias=False)
        self.q_bias = nn.Parameter(torch.zeros(self.all_head_size, dtype=torch.float))
        self.v_bias = nn.Parameter(torch.zeros(self.all_head_size, dtype=torch.float))
        self.pos_att_type = []
        self.dropout = nn.Dropout(0.1)

    def transpose_for_scores(self, x):
        new_x_shape = x.size()[:-1] + (self.num_attention_heads, -1)
        return x.view(new_x_shape).permute(0, 2, 1, 3)

    def forward(self, hidden_states, attention_mask):
        qp = self.in_proj(hidden_states)
        query_layer, key_layer, value_layer = self.transpose_for_scores(qp).chunk(3, dim=-1)
        query_layer = query_layer + self.transpose_for_scores(self.q_bias[None, None, :])
        value_layer = value_layer + self.transpose_for_scores(self.v_bias[None, None, :])
        scale_factor = 1 + len(self.pos_att_type)
        scale = torch.sqrt(torch.tensor(query_layer.size(-1), dtype=torch.float) * scale_factor)
        query_layer = query_layer / scale.to(dtype=query_layer.dtype)
        attention_scores = torch.matmul(query_layer, key_layer.transpose(-1, -2))
        attention_mask = attention_mask.bool()
        attention_scores = attention_scores.masked_fill(~(attention_mask), torch.finfo(query_layer.dtype).min)
        attention_probs = F.softmax(attention_scores, dim=-1)
        attention_probs = self.dropout(attention_probs)
        context_layer = torch.matmul(attention_probs, value_layer)
        context_layer = context_layer.permute(0, 2, 1, 3).contiguous()
        new_context_layer_shape = context_layer.size()[:-2] + (-1,)
        return context_layer.view(new_context_layer_shape), None


class DebertaSelfOutput(nn.Module):
    def __init__(self, c, width=None):
        super().__init__()
        self.dense = nn.Linear(width or c.hidden_size, c.hidden_size)
        self.LayerNorm = DebertaLayerNorm(c.hidden_size, c.layer_norm_eps)
        self.dropout = nn.Dropout(0.1)

    def forward(self, hidden_states, input_tensor):
        hidden_states = self.dense(hidden_states)
        hidden_states = self.dropout(hidden_states)
        return self.LayerNorm(hidden_states + input_tensor)


class DebertaAttention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.self = DisentangledSelfAttention(c)
        self.output = DebertaSelfOutput(c)

    def forward(self, hidden_states, attention_mask):
        self_output, att_matrix = self.self(hidden_states, attention_mask)
        return self.output(self_output, hidden_states), att_matrix


class DebertaIntermediate(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.dense = nn.Linear(c.hidden_size, c.intermediate_size)
        self.intermediate_act_fn = GELUActivation()

    def forward(self, hidden_states):
        return self.intermediate_act_fn(self.dense(hidden_states))


class DebertaLayer(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.attention = DebertaAttention(c)
        self.intermediate = DebertaIntermediate(c)
        self.output = DebertaSelfOutput(c, c.intermediate_size)

    def forward(self, hidden_states, attention_mask):
        attention_output, att_matrix = self.attention(hidden_states, attention_mask)
        intermediate_output = self.intermediate(attention_output)
        return self.output(intermediate_output, attention_output), att_matrix


class DebertaEncoder(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.layer = nn.ModuleList([DebertaLayer(c) for _ in range(c.num_hidden_layers)])

    def forward(self, hidden_states, attention_mask):
        extended_attention_mask = attention_mask.unsqueeze(1).unsqueeze(2)
        attention_mask = extended_attention_mask * extended_attention_mask.squeeze(-2).unsqueeze(-1)
        all_hidden_states = (hidden_states,)
        for layer_module in self.layer:
            hidden_states, _ = layer_module(hidden_states, attention_mask)
            all_hidden_states = all_hidden_states + (hidden_states,)
        return {"last_hidden_state": hidden_states, "hidden_states": all_hidden_states}


class DebertaModel(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.embeddings = DebertaEmbeddings(c)
        self.encoder = DebertaEncoder(c)

    def forward(self, input_ids):
        input_shape = input_ids.size()
        attention_mask = torch.ones(input_shape)
        token_type_ids = torch.zeros(input_shape, dtype=torch.long)
        embedding_output = self.embeddings(input_ids=input_ids, token_type_ids=token_type_ids, mask=attention_mask)
        encoder_outputs = self.encoder(embedding_output, attention_mask)
        return {"last_hidden_state": encoder_outputs["last_hidden_state"]}


CASES = {"t5": (T5EncoderModel, T5Config), "umt5": (UMT5EncoderModel, UMT5Config),
         "clip_text_model": (CLIPTextModel, CLIPTextConfig), "dpr": (DPRQuestionEncoder, DPRConfig),
         "deberta": (DebertaModel, DebertaConfig)}
