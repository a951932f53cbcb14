"""Faithful torch 1.13 reimplementations of transformers encoders (and xglm) whose embeddings,
position schemes or attention variants earlier forms did not read (cases of capture_reimpl.py;
its docstring says how a case is built and captured).

xglm follows huggingface/transformers src/transformers/models/xglm/modeling_xglm.py at commit
045e910e889d20cfbef6a6405f02a5a9aef4ce54 (the call boundaries of the real transformers 5.17
trace: the positions module called as (position_ids, past_key_values_length), the layer as
(hidden, 4-D mask) returning a tensor, eager attention returning its weights), capture_lm.py --small's sizes
(d_model 32, 2 heads, ffn 48, 2 layers, pad id 0). What it shows:
  - XGLMScaledWordEmbedding: an nn.Embedding whose forward multiplies its rows by √d_model;
  - XGLMSinusoidalPositionalEmbedding: a module of its own, no parameter (a non-persistent
    buffer), fairseq's table: frequencies exp(−i·ln 10000/(half − 1)), [sin | cos] halves,
    indexed by the positions plus offset 2 (position_ids += 2 in place: the capture copies
    the argument first), the padding row zeroed (never read here);
  - the 4-D causal mask (0 / finfo.min) added to the scores, then max with finfo.min, q
    scaled by 1/√head before q·kᵀ; pre-norm layers, a GELU (erf) MLP, a final LayerNorm.

mobilebert follows src/transformers/models/mobilebert/modeling_mobilebert.py at commit
01ae98ae2414210efd0d9ac1ffe78ff21588f1f7 (the call boundaries of the real transformers 5.17
trace: the layer returns a tensor, the attention (output, None), no mask tensor) with
configuration_mobilebert.py's defaults (trigram input, bottlenecks with a shared key/query
bottleneck, NoNorm, ReLU, classifier activation) but for the sizes: hidden 32, embedding 16,
intra-bottleneck 16, 2 heads, intermediate 48, 2 feed-forward networks per layer. What it shows:
  - the trigram input: the word embeddings [e shifted up one row (its last row zero), e,
    e shifted down one row (its first row zero)] joined along the channels (F.pad of the cut
    rows), then embedding_transformation to the hidden width; plus position and token-type
    rows; NoNorm (x·γ + β) everywhere;
  - the bottlenecks: q and k from a shared bottleneck, v from the layer input, the residual
    through another bottleneck; an extra FFN (dense, ReLU, dense, NoNorm of the sum) before
    the layer's own; the output bottleneck back to the hidden width with the layer input.

layoutlm follows src/transformers/models/layoutlm/modeling_layoutlm.py at commit
004edfe2dc0fdbc94068d7977605aa6798de787e (eager attention, as the real transformers 5.17
trace runs it: the self-attention returns its weights; the attention, layer and encoder return
tensors) with configuration_layoutlm.py's defaults but for the sizes: hidden 32, 2 heads,
intermediate 48, 2 layers, max_2d_position_embeddings 64 (1024 by default: four tables of
1024 rows). What it shows: no bbox given, so a box of zeros made in the forward; the embeddings
the sum, left to right, of nine tables' rows: words, positions 0…S−1, x at box[0], y at box[1],
x at box[2], y at box[3] (the x and y tables called twice, at the same ids), h at box[3] − box[1],
w at box[2] − box[0], token types 0; then a LayerNorm; a mask of ones made additive,
(1 − m)·finfo.min; BERT layers (post-norm, GELU).

mpnet follows src/transformers/models/mpnet/modeling_mpnet.py at commit
00099b9f15ad8bea330364709453fc49cbba90e5 (the call boundaries of the real transformers 5.17
trace: no mask tensor reaches the encoder, the layers get (hidden, None, position_bias)) with
configuration_mpnet.py's defaults (32 relative buckets, GELU) but for the sizes: hidden 32,
2 heads, intermediate 48, 2 layers, 24 ids (distances past the 8 exact buckets). What it shows:
  - positions from the ids, fairseq's way: cumsum(ids ≠ 1)·(ids ≠ 1) + 1 (padding index 1;
    an id 1 keeps position 1, the others count on from 2);
  - the encoder's relative_attention_bias, an nn.Embedding [32, heads] called on T5's
    bidirectional buckets of key − query (16 a side, 8 exact, log-spaced to max distance
    128), permuted to [1, heads, S, S] and added to every layer's scores after the
    1/√head division; BERT post-norm layers, GELU.

nystromformer follows src/transformers/models/nystromformer/modeling_nystromformer.py at commit
0085ddcdb07f408be6d70982bd9c54992f3974cc (the call boundaries of the real transformers 5.17 trace:
token type ids made by the model and passed, no mask tensor, the layers called as (hidden, None,
False)) with configuration_nystromformer.py's defaults (64 landmarks = segment_means_seq_len 64,
so the exact softmax path; conv_kernel_size 65; gelu_new) but for the sizes: hidden 32, 2 heads,
intermediate 48, 2 layers. What it shows: q and k each divided by √√head; softmax(q·kᵀ)·v plus a
depthwise nn.Conv2d over the values [B, H, S, D] (kernel (65, 1), padding (32, 0), no bias, one
group per head: a convolution along the sequence wider than it), then the heads joined; positions
2…S+1 from a buffer; word + token-type + position rows; NewGELUActivation as its own call.

convbert follows src/transformers/models/convbert/modeling_convbert.py at commit
0172c3ecffb30100f5cf2f787cde19628651ee4b (the call boundaries of the real transformers 5.17
trace: token type ids made by the model and passed, no mask tensor, the self-attention returning
(context, probabilities) with the probabilities through an nn.Dropout call, the attention and layer
returning tensors; the projections called in that trace's order: key, value, the separable
convolution, query) with configuration_convbert.py's defaults (head_ratio 2, conv_kernel_size 9,
num_groups 1, GELU) but for the sizes: hidden 32, embedding 16 (so embeddings_project), 4 heads
(2 attend, 2 convolve, head 8), intermediate 48, 2 layers. What it shows:
  - a SeparableConv1D over the hidden states channels first: a depthwise Conv1d (kernel 9, pad
    4, no bias), a pointwise Conv1d, then its own [C, 1] bias added in place;
  - that times the query (transposed back to rows), through conv_kernel_layer to 9 logits per
    convolving head, softmax over them; conv_out_layer's rows unfolded 9 around each position
    (zero outside) and weighted by those per-position kernels (a matmul): a dynamic convolution;
  - softmax attention over the other half of the heads, the two joined per position [attention,
    convolution] before the output dense.

yoso follows src/transformers/models/yoso/modeling_yoso.py at commit
004edfe2dc0fdbc94068d7977605aa6798de787e (the call boundaries of the real transformers 5.17
trace: the model passes token type ids and a 2-D mask of ones down to every self-attention,
the layers called as (hidden, mask, False)) with configuration_yoso.py's defaults
(use_expectation, hash_code_len 9, no conv_window, one token type, GELU) but for the sizes:
hidden 32, 2 heads, intermediate 48, 2 layers. What it shows: YosoCumulation's expectation,
per head (1 − acos(q̂·k̂)/π)^9 with q and k L2-normalised, times the mask (1 + m/10000).int()
(ones), times v, summed without a softmax, then L2-normalised, the heads joined.
"""
import math

import torch
from torch import nn
from torch.nn import functional as F


# --- xglm --------------------------------------------------------------------------------


class XGLMConfig:
    d_model = 32
    attention_heads = 2
    num_layers = 2
    ffn_dim = 48
    vocab_size = 64
    max_position_embeddings = 64
    pad_token_id = 0
    scale_embedding = True


class XGLMScaledWordEmbedding(nn.Embedding):
    def __init__(self, num_embeddings, embedding_dim, padding_idx, embed_scale=1.0):
        super().__init__(num_embeddings, embedding_dim, padding_idx)
        self.embed_scale = embed_scale

    def forward(self, input_ids):
        return super().forward(input_ids) * self.embed_scale


class XGLMSinusoidalPositionalEmbedding(nn.Module):
    def __init__(self, num_positions, embedding_dim, padding_idx=None):
        super().__init__()
        self.offset = 2
        self.embedding_dim = embedding_dim
        self.padding_idx = padding_idx
        self.make_weights(num_positions + self.offset, embedding_dim, padding_idx)

    def make_weights(self, num_embeddings, embedding_dim, padding_idx=None):
        emb_weights = self.get_embedding(num_embeddings, embedding_dim, padding_idx)
        if hasattr(self, "weights"):
            emb_weights = emb_weights.to(dtype=self.weights.dtype, device=self.weights.device)
        self.register_buffer("weights", emb_weights, persistent=False)

    @staticmethod
    def get_embedding(num_embeddings, embedding_dim, padding_idx=None):
        half_dim = embedding_dim // 2
        emb = math.log(10000) / (half_dim - 1)
        emb = torch.exp(torch.arange(half_dim, dtype=torch.int64).float() * -emb)
        emb = torch.arange(num_embeddings, dtype=torch.int64).float().unsqueeze(1) * emb.unsqueeze(0)
        emb = torch.cat([torch.sin(emb), torch.cos(emb)], dim=1).view(num_embeddings, -1)
        if embedding_dim % 2 == 1:
            emb = torch.cat([emb, torch.zeros(num_embeddings, 1)], dim=1)
        if padding_idx is not None:
            emb[padding_idx, :] = 0
        return emb.to(torch.get_default_dtype())

    @torch.no_grad()
    def forward(self, position_ids=None, past_key_values_length=0):
        bsz, seq_len = position_ids.size()
        position_ids += self.offset
        max_pos = 2 + seq_len + past_key_values_length
        if max_pos > self.weights.size(0):
            self.make_weights(max_pos, self.embedding_dim, self.padding_idx)
        return self.weights.index_select(0, position_ids.view(-1)).view(bsz, seq_len, self.weights.shape[-1]).detach()


class XGLMAttention(nn.Module):
    def __init__(self, embed_dim, num_heads):
        super().__init__()
        self.embed_dim = embed_dim
        self.num_heads = num_heads
        self.head_dim = embed_dim // num_heads
        self.scaling = self.head_dim ** -0.5
        self.k_proj = nn.Linear(embed_dim, embed_dim)
        self.v_proj = nn.Linear(embed_dim, embed_dim)
        self.q_proj = nn.Linear(embed_dim, embed_dim)
        self.out_proj = nn.Linear(embed_dim, embed_dim)

    def _shape(self, tensor, seq_len, bsz):
        return tensor.view(bsz, seq_len, self.num_heads, self.head_dim).transpose(1, 2).contiguous()

    def forward(self, hidden_states, attention_mask=None):
        bsz, tgt_len, _ = hidden_states.size()
        query_states = self.q_proj(hidden_states) * self.scaling
        key_states = self._shape(self.k_proj(hidden_states), -1, bsz)
        value_states = self._shape(self.v_proj(hidden_states), -1, bsz)
        proj_shape = (bsz * self.num_heads, -1, self.head_dim)
        query_states = self._shape(query_states, tgt_len, bsz).view(*proj_shape)
        key_states = key_states.view(*proj_shape)
        value_states = value_states.view(*proj_shape)
        src_len = key_states.size(1)
        attn_weights = torch.bmm(query_states, key_states.transpose(1, 2))
        attn_weights = attn_weights.view(bsz, self.num_heads, tgt_len, src_len) + attention_mask
        attn_weights = torch.max(attn_weights, torch.tensor(torch.finfo(attn_weights.dtype).min))
        attn_weights = attn_weights.view(bsz * self.num_heads, tgt_len, src_len)
        attn_weights = F.softmax(attn_weights, dim=-1)
        attn_weights_reshaped = attn_weights.view(bsz, self.num_heads, tgt_len, src_len)
        attn_output = torch.bmm(attn_weights, value_states)
        attn_output = attn_output.view(bsz, self.num_heads, tgt_len, self.head_dim).transpose(1, 2)
        attn_output = attn_output.reshape(bsz, tgt_len, self.embed_dim)
        return self.out_proj(attn_output), attn_weights_reshaped


class XGLMDecoderLayer(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.embed_dim = c.d_model
        self.self_attn = XGLMAttention(c.d_model, c.attention_heads)
        self.self_attn_layer_norm = nn.LayerNorm(self.embed_dim)
        self.fc1 = nn.Linear(self.embed_dim, c.ffn_dim)
        self.fc2 = nn.Linear(c.ffn_dim, self.embed_dim)
        self.final_layer_norm = nn.LayerNorm(self.embed_dim)

    def forward(self, hidden_states, attention_mask=None):
        residual = hidden_states
        hidden_states = self.self_attn_layer_norm(hidden_states)
        hidden_states, _ = self.self_attn(hidden_states, attention_mask=attention_mask)
        hidden_states = residual + hidden_states
        residual = hidden_states
        hidden_states = self.final_layer_norm(hidden_states)
        hidden_states = F.gelu(self.fc1(hidden_states))
        hidden_states = self.fc2(hidden_states)
        return residual + hidden_states


def causal_4d(n, dtype):
    """_prepare_4d_causal_attention_mask without padding: 0 where key j ≤ query i, finfo.min elsewhere."""
    m = torch.full((n, n), torch.finfo(dtype).min)
    m = torch.triu(m, 1)
    return m[None, None]


class XGLMModel(nn.Module):
    def __init__(self, c):
        super().__init__()
        embed_scale = math.sqrt(c.d_model) if c.scale_embedding else 1.0
        self.embed_tokens = XGLMScaledWordEmbedding(c.vocab_size, c.d_model, c.pad_token_id, embed_scale=embed_scale)
        self.embed_positions = XGLMSinusoidalPositionalEmbedding(c.max_position_embeddings, c.d_model, c.pad_token_id)
        self.layers = nn.ModuleList([XGLMDecoderLayer(c) for _ in range(c.num_layers)])
        self.layer_norm = nn.LayerNorm(c.d_model)

    def forward(self, input_ids):
        input_shape = input_ids.size()
        position_ids = torch.arange(0, input_shape[-1], dtype=torch.long).unsqueeze(0)
        inputs_embeds = self.embed_tokens(input_ids)
        attention_mask = causal_4d(input_shape[-1], inputs_embeds.dtype)
        hidden_states = inputs_embeds + self.embed_positions(position_ids, 0)
        for layer in self.layers:
            hidden_states = layer(hidden_states, attention_mask)
        return self.layer_norm(hidden_states)


# --- mobilebert --------------------------------------------------------------------------


class MobileBertConfig:
    vocab_size = 64
    hidden_size = 32
    embedding_size = 16
    intra_bottleneck_size = 16
    true_hidden_size = 16  # intra_bottleneck_size when use_bottleneck
    num_attention_heads = 2
    num_hidden_layers = 2
    intermediate_size = 48
    max_position_embeddings = 64
    type_vocab_size = 2
    pad_token_id = 0
    layer_norm_eps = 1e-12
    num_feedforward_networks = 2
    trigram_input = True
    use_bottleneck = True
    use_bottleneck_attention = False
    key_query_shared_bottleneck = True
    classifier_activation = True


class NoNorm(nn.Module):
    def __init__(self, feat_size, eps=None):
        super().__init__()
        self.bias = nn.Parameter(torch.zeros(feat_size))
        self.weight = nn.Parameter(torch.ones(feat_size))

    def forward(self, input_tensor):
        return input_tensor * self.weight + self.bias


class MobileBertEmbeddings(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.trigram_input = c.trigram_input
        self.embedding_size = c.embedding_size
        self.hidden_size = c.hidden_size
        self.word_embeddings = nn.Embedding(c.vocab_size, c.embedding_size, padding_idx=c.pad_token_id)
        self.position_embeddings = nn.Embedding(c.max_position_embeddings, c.hidden_size)
        self.token_type_embeddings = nn.Embedding(c.type_vocab_size, c.hidden_size)
        embedded_input_size = c.embedding_size * (3 if self.trigram_input else 1)
        self.embedding_transformation = nn.Linear(embedded_input_size, c.hidden_size)
        self.LayerNorm = NoNorm(c.hidden_size)
        self.dropout = nn.Dropout(0.1)
        self.register_buffer("position_ids", torch.arange(c.max_position_embeddings).expand((1, -1)), persistent=False)

    def forward(self, input_ids=None, token_type_ids=None, position_ids=None, inputs_embeds=None):
        input_shape = input_ids.size()
        seq_length = input_shape[1]
        if position_ids is None:
            position_ids = self.position_ids[:, :seq_length]
        if token_type_ids is None:
            token_type_ids = torch.zeros(input_shape, dtype=torch.long)
        if inputs_embeds is None:
            inputs_embeds = self.word_embeddings(input_ids)
        if self.trigram_input:
            inputs_embeds = torch.cat([
                F.pad(inputs_embeds[:, 1:], [0, 0, 0, 1, 0, 0], value=0.0),
                inputs_embeds,
                F.pad(inputs_embeds[:, :-1], [0, 0, 1, 0, 0, 0], value=0.0),
            ], dim=2)
        if self.trigram_input or self.embedding_size != self.hidden_size:
            inputs_embeds = self.embedding_transformation(inputs_embeds)
        position_embeddings = self.position_embeddings(position_ids)
        token_type_embeddings = self.token_type_embeddings(token_type_ids)
        embeddings = inputs_embeds + position_embeddings + token_type_embeddings
        embeddings = self.LayerNorm(embeddings)
        return self.dropout(embeddings)


class MobileBertSelfAttention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.num_attention_heads = c.num_attention_heads
        self.attention_head_size = int(c.true_hidden_size / c.num_attention_heads)
        self.all_head_size = self.num_attention_heads * self.attention_head_size
        self.query = nn.Linear(c.true_hidden_size, self.all_head_size)
        self.key = nn.Linear(c.true_hidden_size, self.all_head_size)
        self.value = nn.Linear(c.true_hidden_size if c.use_bottleneck_attention else c.hidden_size, self.all_head_size)
        self.dropout = nn.Dropout(0.1)

    def transpose_for_scores(self, x):
        new_x_shape = x.size()[:-1] + (self.num_attention_heads, self.attention_head_size)
        return x.view(new_x_shape).permute(0, 2, 1, 3)

    def forward(self, query_tensor, key_tensor, value_tensor, attention_mask=None):
        query_layer = self.transpose_for_scores(self.query(query_tensor))
        key_layer = self.transpose_for_scores(self.key(key_tensor))
        value_layer = self.transpose_for_scores(self.value(value_tensor))
        attention_scores = torch.matmul(query_layer, key_layer.transpose(-1, -2))
        attention_scores = attention_scores / math.sqrt(self.attention_head_size)
        if attention_mask is not None:
            attention_scores = attention_scores + attention_mask
        attention_probs = F.softmax(attention_scores, dim=-1)
        attention_probs = self.dropout(attention_probs)
        context_layer = torch.matmul(attention_probs, value_layer)
        context_layer = context_layer.permute(0, 2, 1, 3).contiguous()
        context_layer = context_layer.view(context_layer.size()[:-2] + (self.all_head_size,))
        return context_layer, None


class MobileBertSelfOutput(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.dense = nn.Linear(c.true_hidden_size, c.true_hidden_size)
        self.LayerNorm = NoNorm(c.true_hidden_size, eps=c.layer_norm_eps)

    def forward(self, hidden_states, residual_tensor):
        return self.LayerNorm(self.dense(hidden_states) + residual_tensor)


class MobileBertAttention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.self = MobileBertSelfAttention(c)
        self.output = MobileBertSelfOutput(c)

    def forward(self, query_tensor, key_tensor, value_tensor, layer_input, attention_mask=None):
        self_outputs = self.self(query_tensor, key_tensor, value_tensor, attention_mask)
        return self.output(self_outputs[0], layer_input), self_outputs[1]


class MobileBertIntermediate(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.dense = nn.Linear(c.true_hidden_size, c.intermediate_size)
        self.intermediate_act_fn = nn.ReLU()

    def forward(self, hidden_states):
        return self.intermediate_act_fn(self.dense(hidden_states))


class OutputBottleneck(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.dense = nn.Linear(c.true_hidden_size, c.hidden_size)
        self.LayerNorm = NoNorm(c.hidden_size, eps=c.layer_norm_eps)
        self.dropout = nn.Dropout(0.1)

    def forward(self, hidden_states, residual_tensor):
        layer_outputs = self.dropout(self.dense(hidden_states))
        return self.LayerNorm(layer_outputs + residual_tensor)


class MobileBertOutput(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.dense = nn.Linear(c.intermediate_size, c.true_hidden_size)
        self.LayerNorm = NoNorm(c.true_hidden_size)
        self.bottleneck = OutputBottleneck(c)

    def forward(self, intermediate_states, residual_tensor_1, residual_tensor_2):
        layer_output = self.dense(intermediate_states)
        layer_output = self.LayerNorm(layer_output + residual_tensor_1)
        return self.bottleneck(layer_output, residual_tensor_2)


class BottleneckLayer(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.dense = nn.Linear(c.hidden_size, c.intra_bottleneck_size)
        self.LayerNorm = NoNorm(c.intra_bottleneck_size, eps=c.layer_norm_eps)

    def forward(self, hidden_states):
        return self.LayerNorm(self.dense(hidden_states))


class Bottleneck(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.input = BottleneckLayer(c)
        self.attention = BottleneckLayer(c)

    def forward(self, hidden_states):
        bottlenecked_hidden_states = self.input(hidden_states)
        shared_attention_input = self.attention(hidden_states)
        return (shared_attention_input, shared_attention_input, hidden_states, bottlenecked_hidden_states)


class FFNOutput(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.dense = nn.Linear(c.intermediate_size, c.true_hidden_size)
        self.LayerNorm = NoNorm(c.true_hidden_size, eps=c.layer_norm_eps)

    def forward(self, hidden_states, residual_tensor):
        return self.LayerNorm(self.dense(hidden_states) + residual_tensor)


class FFNLayer(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.intermediate = MobileBertIntermediate(c)
        self.output = FFNOutput(c)

    def forward(self, hidden_states):
        return self.output(self.intermediate(hidden_states), hidden_states)


class MobileBertLayer(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.attention = MobileBertAttention(c)
        self.intermediate = MobileBertIntermediate(c)
        self.output = MobileBertOutput(c)
        self.bottleneck = Bottleneck(c)
        self.ffn = nn.ModuleList([FFNLayer(c) for _ in range(c.num_feedforward_networks - 1)])

    def forward(self, hidden_states, attention_mask=None):
        query_tensor, key_tensor, value_tensor, layer_input = self.bottleneck(hidden_states)
        attention_output = self.attention(query_tensor, key_tensor, value_tensor, layer_input, attention_mask)[0]
        for ffn_module in self.ffn:
            attention_output = ffn_module(attention_output)
        intermediate_output = self.intermediate(attention_output)
        return self.output(intermediate_output, attention_output, hidden_states)


class MobileBertEncoder(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.layer = nn.ModuleList([MobileBertLayer(c) for _ in range(c.num_hidden_layers)])

    def forward(self, hidden_states, attention_mask=None):
        for layer_module in self.layer:
            hidden_states = layer_module(hidden_states, attention_mask)
        return hidden_states


class MobileBertPooler(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.do_activate = c.classifier_activation
        if self.do_activate:
            self.dense = nn.Linear(c.hidden_size, c.hidden_size)

    def forward(self, hidden_states):
        first_token_tensor = hidden_states[:, 0]
        if not self.do_activate:
            return first_token_tensor
        return torch.tanh(self.dense(first_token_tensor))


class MobileBertModel(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.embeddings = MobileBertEmbeddings(c)
        self.encoder = MobileBertEncoder(c)
        self.pooler = MobileBertPooler(c)

    def forward(self, input_ids):
        embedding_output = self.embeddings(input_ids=input_ids)
        sequence_output = self.encoder(embedding_output, attention_mask=None)
        self.pooler(sequence_output)
        return sequence_output


# --- layoutlm ----------------------------------------------------------------------------


class LayoutLMConfig:
    vocab_size = 64
    hidden_size = 32
    num_attention_heads = 2
    num_hidden_layers = 2
    intermediate_size = 48
    max_position_embeddings = 64
    max_2d_position_embeddings = 64
    type_vocab_size = 2
    pad_token_id = 0
    layer_norm_eps = 1e-12


class LayoutLMEmbeddings(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.word_embeddings = nn.Embedding(c.vocab_size, c.hidden_size, padding_idx=c.pad_token_id)
        self.position_embeddings = nn.Embedding(c.max_position_embeddings, c.hidden_size)
        self.x_position_embeddings = nn.Embedding(c.max_2d_position_embeddings, c.hidden_size)
        self.y_position_embeddings = nn.Embedding(c.max_2d_position_embeddings, c.hidden_size)
        self.h_position_embeddings = nn.Embedding(c.max_2d_position_embeddings, c.hidden_size)
        self.w_position_embeddings = nn.Embedding(c.max_2d_position_embeddings, c.hidden_size)
        self.token_type_embeddings = nn.Embedding(c.type_vocab_size, c.hidden_size)
        self.LayerNorm = nn.LayerNorm(c.hidden_size, eps=c.layer_norm_eps)
        self.dropout = nn.Dropout(0.1)
        self.register_buffer("position_ids", torch.arange(c.max_position_embeddings).expand((1, -1)), persistent=False)

    def forward(self, input_ids=None, bbox=None, token_type_ids=None, position_ids=None, inputs_embeds=None):
        input_shape = input_ids.size()
        seq_length = input_shape[1]
        if position_ids is None:
            position_ids = self.position_ids[:, :seq_length]
        if token_type_ids is None:
            token_type_ids = torch.zeros(input_shape, dtype=torch.long)
        if inputs_embeds is None:
            inputs_embeds = self.word_embeddings(input_ids)
        words_embeddings = inputs_embeds
        position_embeddings = self.position_embeddings(position_ids)
        left_position_embeddings = self.x_position_embeddings(bbox[:, :, 0])
        upper_position_embeddings = self.y_position_embeddings(bbox[:, :, 1])
        right_position_embeddings = self.x_position_embeddings(bbox[:, :, 2])
        lower_position_embeddings = self.y_position_embeddings(bbox[:, :, 3])
        h_position_embeddings = self.h_position_embeddings(bbox[:, :, 3] - bbox[:, :, 1])
        w_position_embeddings = self.w_position_embeddings(bbox[:, :, 2] - bbox[:, :, 0])
        token_type_embeddings = self.token_type_embeddings(token_type_ids)
        embeddings = (
            words_embeddings
            + position_embeddings
            + left_position_embeddings
            + upper_position_embeddings
            + right_position_embeddings
            + lower_position_embeddings
            + h_position_embeddings
            + w_position_embeddings
            + token_type_embeddings
        )
        embeddings = self.LayerNorm(embeddings)
        return self.dropout(embeddings)


def layoutlm_eager_attention(module, query, key, value, attention_mask, scaling):
    attn_weights = torch.matmul(query, key.transpose(2, 3)) * scaling
    if attention_mask is not None:
        attn_weights = attn_weights + attention_mask[:, :, :, : key.shape[-2]]
    attn_weights = F.softmax(attn_weights, dim=-1, dtype=torch.float32).to(query.dtype)
    attn_output = torch.matmul(attn_weights, value)
    return attn_output.transpose(1, 2).contiguous(), attn_weights


class LayoutLMSelfAttention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.num_attention_heads = c.num_attention_heads
        self.attention_head_size = int(c.hidden_size / c.num_attention_heads)
        self.all_head_size = self.num_attention_heads * self.attention_head_size
        self.query = nn.Linear(c.hidden_size, self.all_head_size)
        self.key = nn.Linear(c.hidden_size, self.all_head_size)
        self.value = nn.Linear(c.hidden_size, self.all_head_size)
        self.dropout = nn.Dropout(0.1)
        self.scaling = self.attention_head_size ** -0.5

    def forward(self, hidden_states, attention_mask=None):
        input_shape = hidden_states.shape[:-1]
        hidden_shape = (*input_shape, -1, self.attention_head_size)
        query_states = self.query(hidden_states).view(hidden_shape).transpose(1, 2)
        key_states = self.key(hidden_states).view(hidden_shape).transpose(1, 2)
        value_states = self.value(hidden_states).view(hidden_shape).transpose(1, 2)
        attn_output, attn_weights = layoutlm_eager_attention(self, query_states, key_states, value_states,
                                                             attention_mask, self.scaling)
        return attn_output.reshape(*input_shape, -1).contiguous(), attn_weights


class LayoutLMSelfOutput(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.dense = nn.Linear(c.hidden_size, c.hidden_size)
        self.LayerNorm = nn.LayerNorm(c.hidden_size, eps=c.layer_norm_eps)
        self.dropout = nn.Dropout(0.1)

    def forward(self, hidden_states, input_tensor):
        return self.LayerNorm(self.dropout(self.dense(hidden_states)) + input_tensor)


class LayoutLMAttention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.self = LayoutLMSelfAttention(c)
        self.output = LayoutLMSelfOutput(c)

    def forward(self, hidden_states, attention_mask=None):
        self_outputs = self.self(hidden_states, attention_mask=attention_mask)
        return self.output(self_outputs[0], hidden_states)


class LayoutLMIntermediate(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.dense = nn.Linear(c.hidden_size, c.intermediate_size)

    def forward(self, hidden_states):
        return F.gelu(self.dense(hidden_states))


class LayoutLMOutput(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.dense = nn.Linear(c.intermediate_size, c.hidden_size)
        self.LayerNorm = nn.LayerNorm(c.hidden_size, eps=c.layer_norm_eps)
        self.dropout = nn.Dropout(0.1)

    def forward(self, hidden_states, input_tensor):
        return self.LayerNorm(self.dropout(self.dense(hidden_states)) + input_tensor)


class LayoutLMLayer(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.attention = LayoutLMAttention(c)
        self.intermediate = LayoutLMIntermediate(c)
        self.output = LayoutLMOutput(c)

    def forward(self, hidden_states, attention_mask=None):
        attention_output = self.attention(hidden_states, attention_mask=attention_mask)
        return self.output(self.intermediate(attention_output), attention_output)


class LayoutLMEncoder(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.layer = nn.ModuleList([LayoutLMLayer(c) for _ in range(c.num_hidden_layers)])

    def forward(self, hidden_states, attention_mask=None):
        for layer_module in self.layer:
            hidden_states = layer_module(hidden_states, attention_mask)
        return hidden_states


class LayoutLMPooler(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.dense = nn.Linear(c.hidden_size, c.hidden_size)
        self.activation = nn.Tanh()

    def forward(self, hidden_states):
        return self.activation(self.dense(hidden_states[:, 0]))


class LayoutLMModel(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.embeddings = LayoutLMEmbeddings(c)
        self.encoder = LayoutLMEncoder(c)
        self.pooler = LayoutLMPooler(c)

    def forward(self, input_ids):
        input_shape = input_ids.size()
        attention_mask = torch.ones(input_shape)
        token_type_ids = torch.zeros(input_shape, dtype=torch.long)
        bbox = torch.zeros(input_shape + (4,), dtype=torch.long)
        extended_attention_mask = attention_mask.unsqueeze(1).unsqueeze(2)
        extended_attention_mask = extended_attention_mask.to(dtype=torch.float32)
        extended_attention_mask = (1.0 - extended_attention_mask) * torch.finfo(torch.float32).min
        embedding_output = self.embeddings(input_ids=input_ids, bbox=bbox, token_type_ids=token_type_ids)
        sequence_output = self.encoder(embedding_output, extended_attention_mask)
        self.pooler(sequence_output)
        return sequence_output


# --- mpnet -------------------------------------------------------------------------------


class MPNetConfig:
    vocab_size = 64
    hidden_size = 32
    num_attention_heads = 2
    num_hidden_layers = 2
    intermediate_size = 48
    max_position_embeddings = 64
    relative_attention_num_buckets = 32
    layer_norm_eps = 1e-12
    seq_len = 24  # distances up to 23: the log-spaced buckets 8…11 appear


def create_position_ids_from_input_ids(input_ids, padding_idx):
    mask = input_ids.ne(padding_idx).int()
    incremental_indices = torch.cumsum(mask, dim=1).type_as(mask) * mask
    return incremental_indices.long() + padding_idx


class MPNetEmbeddings(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.padding_idx = 1
        self.word_embeddings = nn.Embedding(c.vocab_size, c.hidden_size, padding_idx=self.padding_idx)
        self.position_embeddings = nn.Embedding(c.max_position_embeddings, c.hidden_size, padding_idx=self.padding_idx)
        self.LayerNorm = nn.LayerNorm(c.hidden_size, eps=c.layer_norm_eps)
        self.dropout = nn.Dropout(0.1)

    def forward(self, input_ids=None, position_ids=None, inputs_embeds=None):
        if position_ids is None:
            position_ids = create_position_ids_from_input_ids(input_ids, self.padding_idx)
        inputs_embeds = self.word_embeddings(input_ids)
        position_embeddings = self.position_embeddings(position_ids)
        embeddings = inputs_embeds + position_embeddings
        embeddings = self.LayerNorm(embeddings)
        return self.dropout(embeddings)


class MPNetSelfAttention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.num_attention_heads = c.num_attention_heads
        self.attention_head_size = int(c.hidden_size / c.num_attention_heads)
        self.all_head_size = self.num_attention_heads * self.attention_head_size
        self.q = nn.Linear(c.hidden_size, self.all_head_size)
        self.k = nn.Linear(c.hidden_size, self.all_head_size)
        self.v = nn.Linear(c.hidden_size, self.all_head_size)
        self.o = nn.Linear(c.hidden_size, c.hidden_size)
        self.dropout = nn.Dropout(0.1)

    def forward(self, hidden_states, attention_mask=None, position_bias=None):
        batch_size, seq_length, _ = hidden_states.shape
        q = self.q(hidden_states).view(batch_size, -1, self.num_attention_heads, self.attention_head_size).transpose(1, 2)
        k = self.k(hidden_states).view(batch_size, -1, self.num_attention_heads, self.attention_head_size).transpose(1, 2)
        v = self.v(hidden_states).view(batch_size, -1, self.num_attention_heads, self.attention_head_size).transpose(1, 2)
        attention_scores = torch.matmul(q, k.transpose(-1, -2))
        attention_scores = attention_scores / math.sqrt(self.attention_head_size)
        if position_bias is not None:
            attention_scores += position_bias
        if attention_mask is not None:
            attention_scores = attention_scores + attention_mask
        attention_probs = F.softmax(attention_scores, dim=-1)
        attention_probs = self.dropout(attention_probs)
        c = torch.matmul(attention_probs, v)
        c = c.permute(0, 2, 1, 3).contiguous()
        c = c.view(*(c.size()[:-2] + (self.all_head_size,)))
        return (self.o(c),)


class MPNetAttention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.attn = MPNetSelfAttention(c)
        self.LayerNorm = nn.LayerNorm(c.hidden_size, eps=c.layer_norm_eps)
        self.dropout = nn.Dropout(0.1)

    def forward(self, hidden_states, attention_mask=None, position_bias=None):
        self_outputs = self.attn(hidden_states, attention_mask, position_bias)
        attention_output = self.LayerNorm(self.dropout(self_outputs[0]) + hidden_states)
        return (attention_output,) + self_outputs[1:]


class MPNetIntermediate(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.dense = nn.Linear(c.hidden_size, c.intermediate_size)

    def forward(self, hidden_states):
        return F.gelu(self.dense(hidden_states))


class MPNetOutput(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.dense = nn.Linear(c.intermediate_size, c.hidden_size)
        self.LayerNorm = nn.LayerNorm(c.hidden_size, eps=c.layer_norm_eps)
        self.dropout = nn.Dropout(0.1)

    def forward(self, hidden_states, input_tensor):
        return self.LayerNorm(self.dropout(self.dense(hidden_states)) + input_tensor)


class MPNetLayer(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.attention = MPNetAttention(c)
        self.intermediate = MPNetIntermediate(c)
        self.output = MPNetOutput(c)

    def forward(self, hidden_states, attention_mask=None, position_bias=None):
        self_attention_outputs = self.attention(hidden_states, attention_mask, position_bias=position_bias)
        attention_output = self_attention_outputs[0]
        layer_output = self.output(self.intermediate(attention_output), attention_output)
        return (layer_output,) + self_attention_outputs[1:]


class MPNetEncoder(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.n_heads = c.num_attention_heads
        self.layer = nn.ModuleList([MPNetLayer(c) for _ in range(c.num_hidden_layers)])
        self.relative_attention_bias = nn.Embedding(c.relative_attention_num_buckets, self.n_heads)

    def forward(self, hidden_states, attention_mask=None):
        position_bias = self.compute_position_bias(hidden_states)
        for layer_module in self.layer:
            hidden_states = layer_module(hidden_states, attention_mask, position_bias)[0]
        return hidden_states

    def compute_position_bias(self, x, position_ids=None, num_buckets=32):
        bsz, qlen, klen = x.size(0), x.size(1), x.size(1)
        context_position = torch.arange(qlen, dtype=torch.long)[:, None]
        memory_position = torch.arange(klen, dtype=torch.long)[None, :]
        relative_position = memory_position - context_position
        rp_bucket = self.relative_position_bucket(relative_position, num_buckets=num_buckets)
        values = self.relative_attention_bias(rp_bucket)
        values = values.permute([2, 0, 1]).unsqueeze(0)
        return values.expand((bsz, -1, qlen, klen)).contiguous()

    @staticmethod
    def relative_position_bucket(relative_position, num_buckets=32, max_distance=128):
        ret = 0
        n = -relative_position
        num_buckets //= 2
        ret += (n < 0).to(torch.long) * num_buckets
        n = torch.abs(n)
        max_exact = num_buckets // 2
        is_small = n < max_exact
        val_if_large = max_exact + (
            torch.log(n.float() / max_exact) / math.log(max_distance / max_exact) * (num_buckets - max_exact)
        ).to(torch.long)
        val_if_large = torch.min(val_if_large, torch.full_like(val_if_large, num_buckets - 1))
        ret += torch.where(is_small, n, val_if_large)
        return ret


class MPNetPooler(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.dense = nn.Linear(c.hidden_size, c.hidden_size)
        self.activation = nn.Tanh()

    def forward(self, hidden_states):
        return self.activation(self.dense(hidden_states[:, 0]))


class MPNetModel(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.embeddings = MPNetEmbeddings(c)
        self.encoder = MPNetEncoder(c)
        self.pooler = MPNetPooler(c)

    def forward(self, input_ids):
        embedding_output = self.embeddings(input_ids=input_ids)
        sequence_output = self.encoder(embedding_output, attention_mask=None)
        self.pooler(sequence_output)
        return sequence_output


# --- yoso --------------------------------------------------------------------------------


class YosoConfig:
    vocab_size = 64
    hidden_size = 32
    num_attention_heads = 2
    num_hidden_layers = 2
    intermediate_size = 48
    max_position_embeddings = 64
    type_vocab_size = 1
    use_expectation = True
    hash_code_len = 9
    conv_window = None
    pad_token_id = 0
    layer_norm_eps = 1e-12


def yoso_normalize(input_tensors):
    if isinstance(input_tensors, list):
        return [F.normalize(tensor, p=2, dim=-1) for tensor in input_tensors]
    return F.normalize(input_tensors, p=2, dim=-1)


class YosoCumulation(torch.autograd.Function):
    @staticmethod
    def forward(ctx, query_mask, key_mask, query, key, value, config):
        hash_code_len = config["hash_code_len"]
        expectation = (1 - torch.acos(torch.matmul(query, key.transpose(-1, -2))) / math.pi) ** hash_code_len
        expectation = expectation * query_mask[:, :, None] * key_mask[:, None, :]
        return torch.matmul(expectation, value)


class YosoSelfAttention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.num_attention_heads = c.num_attention_heads
        self.attention_head_size = int(c.hidden_size / c.num_attention_heads)
        self.all_head_size = self.num_attention_heads * self.attention_head_size
        self.query = nn.Linear(c.hidden_size, self.all_head_size)
        self.key = nn.Linear(c.hidden_size, self.all_head_size)
        self.value = nn.Linear(c.hidden_size, self.all_head_size)
        self.dropout = nn.Dropout(0.1)
        self.use_expectation = c.use_expectation
        self.hash_code_len = c.hash_code_len
        self.lsh_config = {"hash_code_len": self.hash_code_len}

    def forward(self, hidden_states, attention_mask=None, output_attentions=False):
        batch_size, seq_length, _ = hidden_states.shape
        query_layer = self.query(hidden_states).view(batch_size, -1, self.num_attention_heads, self.attention_head_size).transpose(1, 2)
        key_layer = self.key(hidden_states).view(batch_size, -1, self.num_attention_heads, self.attention_head_size).transpose(1, 2)
        value_layer = self.value(hidden_states).view(batch_size, -1, self.num_attention_heads, self.attention_head_size).transpose(1, 2)
        batch_size, num_heads, seq_len, head_dim = query_layer.size()
        query_layer = query_layer.reshape(batch_size * num_heads, seq_len, head_dim)
        key_layer = key_layer.reshape(batch_size * num_heads, seq_len, head_dim)
        value_layer = value_layer.reshape(batch_size * num_heads, seq_len, head_dim)
        attention_mask = 1.0 + attention_mask / 10000.0
        attention_mask = attention_mask.unsqueeze(1).repeat_interleave(num_heads, dim=1).reshape(batch_size * num_heads, seq_len).int()
        query_layer, key_layer = yoso_normalize([query_layer, key_layer])
        context_layer = YosoCumulation.apply(attention_mask, attention_mask, query_layer, key_layer, value_layer, self.lsh_config)
        context_layer = yoso_normalize(context_layer)
        context_layer = context_layer.reshape(batch_size, num_heads, seq_len, head_dim)
        context_layer = context_layer.permute(0, 2, 1, 3).contiguous()
        context_layer = context_layer.view(*(context_layer.size()[:-2] + (self.all_head_size,)))
        return (context_layer,)


class YosoEmbeddings(nn.Module):
    """Copied from NystromformerEmbeddings upstream (the same arithmetic, below)."""

    def __init__(self, c):
        super().__init__()
        self.word_embeddings = nn.Embedding(c.vocab_size, c.hidden_size, padding_idx=c.pad_token_id)
        self.position_embeddings = nn.Embedding(c.max_position_embeddings + 2, c.hidden_size)
        self.token_type_embeddings = nn.Embedding(c.type_vocab_size, c.hidden_size)
        self.LayerNorm = nn.LayerNorm(c.hidden_size, eps=c.layer_norm_eps)
        self.dropout = nn.Dropout(0.1)
        self.register_buffer("position_ids", torch.arange(c.max_position_embeddings).expand((1, -1)) + 2, persistent=False)

    def forward(self, input_ids=None, token_type_ids=None):
        position_ids = self.position_ids[:, :input_ids.size()[1]]
        embeddings = self.word_embeddings(input_ids) + self.token_type_embeddings(token_type_ids)
        embeddings += self.position_embeddings(position_ids)
        return self.dropout(self.LayerNorm(embeddings))


class YosoSelfOutput(nn.Module):
    """BertSelfOutput."""

    def __init__(self, c):
        super().__init__()
        self.dense = nn.Linear(c.hidden_size, c.hidden_size)
        self.LayerNorm = nn.LayerNorm(c.hidden_size, eps=c.layer_norm_eps)
        self.dropout = nn.Dropout(0.1)

    def forward(self, hidden_states, input_tensor):
        return self.LayerNorm(self.dropout(self.dense(hidden_states)) + input_tensor)


class YosoOutput(YosoSelfOutput):
    """BertOutput: the same arithmetic from the intermediate width."""

    def __init__(self, c):
        super().__init__(c)
        self.dense = nn.Linear(c.intermediate_size, c.hidden_size)


class YosoAttention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.self = YosoSelfAttention(c)
        self.output = YosoSelfOutput(c)

    def forward(self, hidden_states, attention_mask=None, output_attentions=False):
        self_outputs = self.self(hidden_states, attention_mask, output_attentions)
        return (self.output(self_outputs[0], hidden_states),) + self_outputs[1:]


class YosoIntermediate(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.dense = nn.Linear(c.hidden_size, c.intermediate_size)
        self.intermediate_act_fn = GELUActivation()

    def forward(self, hidden_states):
        return self.intermediate_act_fn(self.dense(hidden_states))


class YosoLayer(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.attention = YosoAttention(c)
        self.intermediate = YosoIntermediate(c)
        self.output = YosoOutput(c)

    def forward(self, hidden_states, attention_mask=None, output_attentions=False):
        attention_output = self.attention(hidden_states, attention_mask, output_attentions=output_attentions)[0]
        return (self.output(self.intermediate(attention_output), attention_output),)


class YosoEncoder(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.layer = nn.ModuleList([YosoLayer(c) for _ in range(c.num_hidden_layers)])

    def forward(self, hidden_states, attention_mask=None):
        for layer_module in self.layer:
            hidden_states = layer_module(hidden_states, attention_mask, False)[0]
        return hidden_states


class YosoModel(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.embeddings = YosoEmbeddings(c)
        self.encoder = YosoEncoder(c)

    def forward(self, input_ids):
        attention_mask = torch.ones(input_ids.size())
        token_type_ids = torch.zeros(input_ids.size(), dtype=torch.long)
        embedding_output = self.embeddings(input_ids=input_ids, token_type_ids=token_type_ids)
        return self.encoder(embedding_output, attention_mask=attention_mask)


# --- nystromformer -----------------------------------------------------------------------


class NystromformerConfig:
    vocab_size = 64
    hidden_size = 32
    num_attention_heads = 2
    num_hidden_layers = 2
    intermediate_size = 48
    max_position_embeddings = 64
    type_vocab_size = 2
    segment_means_seq_len = 64
    num_landmarks = 64
    conv_kernel_size = 65
    inv_coeff_init_option = False
    pad_token_id = 0
    layer_norm_eps = 1e-5


class NewGELUActivation(nn.Module):
    def forward(self, input):
        return 0.5 * input * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (input + 0.044715 * torch.pow(input, 3.0))))


class NystromformerEmbeddings(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.word_embeddings = nn.Embedding(c.vocab_size, c.hidden_size, padding_idx=c.pad_token_id)
        self.position_embeddings = nn.Embedding(c.max_position_embeddings + 2, c.hidden_size)
        self.token_type_embeddings = nn.Embedding(c.type_vocab_size, c.hidden_size)
        self.LayerNorm = nn.LayerNorm(c.hidden_size, eps=c.layer_norm_eps)
        self.dropout = nn.Dropout(0.1)
        self.register_buffer("position_ids", torch.arange(c.max_position_embeddings).expand((1, -1)) + 2)

    def forward(self, input_ids=None, token_type_ids=None, position_ids=None, inputs_embeds=None):
        seq_length = input_ids.size()[1]
        if position_ids is None:
            position_ids = self.position_ids[:, :seq_length]
        inputs_embeds = self.word_embeddings(input_ids)
        token_type_embeddings = self.token_type_embeddings(token_type_ids)
        embeddings = inputs_embeds + token_type_embeddings
        position_embeddings = self.position_embeddings(position_ids)
        embeddings += position_embeddings
        embeddings = self.LayerNorm(embeddings)
        return self.dropout(embeddings)


class NystromformerSelfAttention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.num_attention_heads = c.num_attention_heads
        self.attention_head_size = int(c.hidden_size / c.num_attention_heads)
        self.all_head_size = self.num_attention_heads * self.attention_head_size
        self.num_landmarks = c.num_landmarks
        self.seq_len = c.segment_means_seq_len
        self.conv_kernel_size = c.conv_kernel_size
        self.query = nn.Linear(c.hidden_size, self.all_head_size)
        self.key = nn.Linear(c.hidden_size, self.all_head_size)
        self.value = nn.Linear(c.hidden_size, self.all_head_size)
        self.dropout = nn.Dropout(0.1)
        self.conv = nn.Conv2d(in_channels=self.num_attention_heads, out_channels=self.num_attention_heads,
                              kernel_size=(self.conv_kernel_size, 1), padding=(self.conv_kernel_size // 2, 0),
                              bias=False, groups=self.num_attention_heads)

    def transpose_for_scores(self, layer):
        new_layer_shape = layer.size()[:-1] + (self.num_attention_heads, self.attention_head_size)
        return layer.view(*new_layer_shape).permute(0, 2, 1, 3)

    def forward(self, hidden_states, attention_mask=None, output_attentions=False):
        mixed_query_layer = self.query(hidden_states)
        key_layer = self.transpose_for_scores(self.key(hidden_states))
        value_layer = self.transpose_for_scores(self.value(hidden_states))
        query_layer = self.transpose_for_scores(mixed_query_layer)
        query_layer = query_layer / math.sqrt(math.sqrt(self.attention_head_size))
        key_layer = key_layer / math.sqrt(math.sqrt(self.attention_head_size))
        # num_landmarks == seq_len (segment_means_seq_len): the exact path
        attention_scores = torch.matmul(query_layer, key_layer.transpose(-1, -2))
        if attention_mask is not None:
            attention_scores = attention_scores + attention_mask
        attention_probs = F.softmax(attention_scores, dim=-1)
        context_layer = torch.matmul(attention_probs, value_layer)
        context_layer += self.conv(value_layer)
        context_layer = context_layer.permute(0, 2, 1, 3).contiguous()
        context_layer = context_layer.view(*(context_layer.size()[:-2] + (self.all_head_size,)))
        return (context_layer,)


class NystromformerSelfOutput(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.dense = nn.Linear(c.hidden_size, c.hidden_size)
        self.LayerNorm = nn.LayerNorm(c.hidden_size, eps=c.layer_norm_eps)
        self.dropout = nn.Dropout(0.1)

    def forward(self, hidden_states, input_tensor):
        return self.LayerNorm(self.dropout(self.dense(hidden_states)) + input_tensor)


class NystromformerAttention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.self = NystromformerSelfAttention(c)
        self.output = NystromformerSelfOutput(c)

    def forward(self, hidden_states, attention_mask=None, output_attentions=False):
        self_outputs = self.self(hidden_states, attention_mask, output_attentions)
        return (self.output(self_outputs[0], hidden_states),) + self_outputs[1:]


class NystromformerIntermediate(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.dense = nn.Linear(c.hidden_size, c.intermediate_size)
        self.intermediate_act_fn = NewGELUActivation()

    def forward(self, hidden_states):
        return self.intermediate_act_fn(self.dense(hidden_states))


class NystromformerOutput(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.dense = nn.Linear(c.intermediate_size, c.hidden_size)
        self.LayerNorm = nn.LayerNorm(c.hidden_size, eps=c.layer_norm_eps)
        self.dropout = nn.Dropout(0.1)

    def forward(self, hidden_states, input_tensor):
        return self.LayerNorm(self.dropout(self.dense(hidden_states)) + input_tensor)


class NystromformerLayer(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.attention = NystromformerAttention(c)
        self.intermediate = NystromformerIntermediate(c)
        self.output = NystromformerOutput(c)

    def forward(self, hidden_states, attention_mask=None, output_attentions=False):
        attention_output = self.attention(hidden_states, attention_mask, output_attentions=output_attentions)[0]
        return (self.output(self.intermediate(attention_output), attention_output),)


class NystromformerEncoder(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.layer = nn.ModuleList([NystromformerLayer(c) for _ in range(c.num_hidden_layers)])

    def forward(self, hidden_states, attention_mask=None):
        for layer_module in self.layer:
            hidden_states = layer_module(hidden_states, attention_mask, False)[0]
        return hidden_states


class NystromformerModel(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.embeddings = NystromformerEmbeddings(c)
        self.encoder = NystromformerEncoder(c)

    def forward(self, input_ids):
        token_type_ids = torch.zeros(input_ids.size(), dtype=torch.long)
        embedding_output = self.embeddings(input_ids=input_ids, token_type_ids=token_type_ids)
        return self.encoder(embedding_output, attention_mask=None)


# --- convbert ----------------------------------------------------------------------------


class ConvBertConfig:
    vocab_size = 64
    hidden_size = 32
    embedding_size = 16
    num_attention_heads = 4
    head_ratio = 2
    conv_kernel_size = 9
    num_groups = 1
    num_hidden_layers = 2
    intermediate_size = 48
    max_position_embeddings = 64
    type_vocab_size = 2
    pad_token_id = 0
    layer_norm_eps = 1e-12


class GELUActivation(nn.Module):
    def forward(self, input):
        return F.gelu(input)


class ConvBertEmbeddings(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.word_embeddings = nn.Embedding(c.vocab_size, c.embedding_size, padding_idx=c.pad_token_id)
        self.position_embeddings = nn.Embedding(c.max_position_embeddings, c.embedding_size)
        self.token_type_embeddings = nn.Embedding(c.type_vocab_size, c.embedding_size)
        self.LayerNorm = nn.LayerNorm(c.embedding_size, eps=c.layer_norm_eps)
        self.dropout = nn.Dropout(0.1)
        self.register_buffer("position_ids", torch.arange(c.max_position_embeddings).expand((1, -1)))

    def forward(self, input_ids=None, token_type_ids=None, position_ids=None, inputs_embeds=None):
        seq_length = input_ids.size()[1]
        if position_ids is None:
            position_ids = self.position_ids[:, :seq_length]
        inputs_embeds = self.word_embeddings(input_ids)
        position_embeddings = self.position_embeddings(position_ids)
        token_type_embeddings = self.token_type_embeddings(token_type_ids)
        embeddings = inputs_embeds + position_embeddings + token_type_embeddings
        embeddings = self.LayerNorm(embeddings)
        return self.dropout(embeddings)


class SeparableConv1D(nn.Module):
    def __init__(self, c, input_filters, output_filters, kernel_size):
        super().__init__()
        self.depthwise = nn.Conv1d(input_filters, input_filters, kernel_size=kernel_size, groups=input_filters,
                                   padding=kernel_size // 2, bias=False)
        self.pointwise = nn.Conv1d(input_filters, output_filters, kernel_size=1, bias=False)
        self.bias = nn.Parameter(torch.zeros(output_filters, 1))

    def forward(self, hidden_states):
        x = self.depthwise(hidden_states)
        x = self.pointwise(x)
        x += self.bias
        return x


class ConvBertSelfAttention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.num_attention_heads = c.num_attention_heads // c.head_ratio
        self.head_ratio = c.head_ratio
        self.conv_kernel_size = c.conv_kernel_size
        self.attention_head_size = c.hidden_size // c.num_attention_heads
        self.all_head_size = self.num_attention_heads * self.attention_head_size
        self.query = nn.Linear(c.hidden_size, self.all_head_size)
        self.key = nn.Linear(c.hidden_size, self.all_head_size)
        self.value = nn.Linear(c.hidden_size, self.all_head_size)
        self.key_conv_attn_layer = SeparableConv1D(c, c.hidden_size, self.all_head_size, self.conv_kernel_size)
        self.conv_kernel_layer = nn.Linear(self.all_head_size, self.num_attention_heads * self.conv_kernel_size)
        self.conv_out_layer = nn.Linear(c.hidden_size, self.all_head_size)
        self.dropout = nn.Dropout(0.1)

    def transpose_for_scores(self, x):
        new_x_shape = x.size()[:-1] + (self.num_attention_heads, self.attention_head_size)
        return x.view(*new_x_shape).permute(0, 2, 1, 3)

    def forward(self, hidden_states, attention_mask=None, encoder_hidden_states=None):
        batch_size = hidden_states.size(0)
        mixed_key_layer = self.key(hidden_states)
        mixed_value_layer = self.value(hidden_states)
        mixed_key_conv_attn_layer = self.key_conv_attn_layer(hidden_states.transpose(1, 2))
        mixed_key_conv_attn_layer = mixed_key_conv_attn_layer.transpose(1, 2)
        mixed_query_layer = self.query(hidden_states)
        query_layer = self.transpose_for_scores(mixed_query_layer)
        key_layer = self.transpose_for_scores(mixed_key_layer)
        value_layer = self.transpose_for_scores(mixed_value_layer)
        conv_attn_layer = torch.multiply(mixed_key_conv_attn_layer, mixed_query_layer)
        conv_kernel_layer = self.conv_kernel_layer(conv_attn_layer)
        conv_kernel_layer = torch.reshape(conv_kernel_layer, [-1, self.conv_kernel_size, 1])
        conv_kernel_layer = torch.softmax(conv_kernel_layer, dim=1)
        conv_out_layer = self.conv_out_layer(hidden_states)
        conv_out_layer = torch.reshape(conv_out_layer, [batch_size, -1, self.all_head_size])
        conv_out_layer = conv_out_layer.transpose(1, 2).contiguous().unsqueeze(-1)
        conv_out_layer = F.unfold(conv_out_layer, kernel_size=[self.conv_kernel_size, 1], dilation=1,
                                  padding=[(self.conv_kernel_size - 1) // 2, 0], stride=1)
        conv_out_layer = conv_out_layer.transpose(1, 2).reshape(batch_size, -1, self.all_head_size, self.conv_kernel_size)
        conv_out_layer = torch.reshape(conv_out_layer, [-1, self.attention_head_size, self.conv_kernel_size])
        conv_out_layer = torch.matmul(conv_out_layer, conv_kernel_layer)
        conv_out_layer = torch.reshape(conv_out_layer, [-1, self.all_head_size])
        attention_scores = torch.matmul(query_layer, key_layer.transpose(-1, -2))
        attention_scores = attention_scores / math.sqrt(self.attention_head_size)
        if attention_mask is not None:
            attention_scores = attention_scores + attention_mask
        attention_probs = F.softmax(attention_scores, dim=-1)
        attention_probs = self.dropout(attention_probs)
        context_layer = torch.matmul(attention_probs, value_layer)
        context_layer = context_layer.permute(0, 2, 1, 3).contiguous()
        conv_out = torch.reshape(conv_out_layer, [batch_size, -1, self.num_attention_heads, self.attention_head_size])
        context_layer = torch.cat([context_layer, conv_out], 2)
        context_layer = context_layer.view(*(context_layer.size()[:-2] + (self.head_ratio * self.all_head_size,)))
        return context_layer, attention_probs


class ConvBertSelfOutput(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.dense = nn.Linear(c.hidden_size, c.hidden_size)
        self.LayerNorm = nn.LayerNorm(c.hidden_size, eps=c.layer_norm_eps)
        self.dropout = nn.Dropout(0.1)

    def forward(self, hidden_states, input_tensor):
        return self.LayerNorm(self.dropout(self.dense(hidden_states)) + input_tensor)


class ConvBertAttention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.self = ConvBertSelfAttention(c)
        self.output = ConvBertSelfOutput(c)

    def forward(self, hidden_states, attention_mask=None):
        self_outputs = self.self(hidden_states, attention_mask, encoder_hidden_states=None)
        return self.output(self_outputs[0], hidden_states)


class ConvBertIntermediate(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.dense = nn.Linear(c.hidden_size, c.intermediate_size)
        self.intermediate_act_fn = GELUActivation()

    def forward(self, hidden_states):
        return self.intermediate_act_fn(self.dense(hidden_states))


class ConvBertOutput(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.dense = nn.Linear(c.intermediate_size, c.hidden_size)
        self.LayerNorm = nn.LayerNorm(c.hidden_size, eps=c.layer_norm_eps)
        self.dropout = nn.Dropout(0.1)

    def forward(self, hidden_states, input_tensor):
        return self.LayerNorm(self.dropout(self.dense(hidden_states)) + input_tensor)


class ConvBertLayer(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.attention = ConvBertAttention(c)
        self.intermediate = ConvBertIntermediate(c)
        self.output = ConvBertOutput(c)

    def forward(self, hidden_states, attention_mask=None):
        attention_output = self.attention(hidden_states, attention_mask)
        return self.output(self.intermediate(attention_output), attention_output)


class ConvBertEncoder(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.layer = nn.ModuleList([ConvBertLayer(c) for _ in range(c.num_hidden_layers)])

    def forward(self, hidden_states, attention_mask=None):
        for layer_module in self.layer:
            hidden_states = layer_module(hidden_states, attention_mask)
        return hidden_states


class ConvBertModel(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.embeddings = ConvBertEmbeddings(c)
        if c.embedding_size != c.hidden_size:
            self.embeddings_project = nn.Linear(c.embedding_size, c.hidden_size)
        self.encoder = ConvBertEncoder(c)

    def forward(self, input_ids):
        token_type_ids = torch.zeros(input_ids.size(), dtype=torch.long)
        hidden_states = self.embeddings(input_ids=input_ids, token_type_ids=token_type_ids)
        if hasattr(self, "embeddings_project"):
            hidden_states = self.embeddings_project(hidden_states)
        return self.encoder(hidden_states, attention_mask=None)


CASES = {"xglm": (XGLMModel, XGLMConfig), "mobilebert": (MobileBertModel, MobileBertConfig),
         "layoutlm": (LayoutLMModel, LayoutLMConfig), "mpnet": (MPNetModel, MPNetConfig),
         "nystromformer": (NystromformerModel, NystromformerConfig), "convbert": (ConvBertModel, ConvBertConfig),
         "yoso": (YosoModel, YosoConfig)}
