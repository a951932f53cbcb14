"""Faithful torch 1.13 reimplementations of the seventh batch's attention variants (cases of capture_reimpl.py; its
docstring says how a case is built and captured). Sizes are capture_reimpl's (hidden 32, 2 heads, 8 ids).

fsmt follows huggingface/transformers src/transformers/models/fsmt/modeling_fsmt.py at commit
00534b87fa4a0552f49cdffdcb4bab66f1c1ddf6 (FSMTEncoder, the encoder a translation pipeline runs; the call
boundaries of the real 2026 trace in /work/unseen/lm7: k_proj, v_proj, q_proj, then out_proj). What it shows:
rows laid out sequence first ([S, B, C] after x.transpose(0, 1)) through every layer, the attention's
projections read [S, B, C] and its result laid back [S, B, C] before out_proj; q scaled by head_dim^-½ after
its projection (fairseq's Attention); tensor2tensor sinusoid positions from padding_idx + 1 on (make_positions);
post-norm layers with ReLU FFNs.

longformer follows src/transformers/models/longformer/modeling_longformer.py at commit
4770c6d87fb47e7e93257d30cbc68fd721b49198 (LongformerModel, attention_window 4: one_sided_attn_window_size 2, no
global attention: is_global_attn False, the request's 8 ids a multiple of the window so nothing is padded).
What it shows: self-attention of each token over the keys within 2 positions on either side (a band,
|i − j| ≤ 2), q divided by √head_dim, the projections read sequence first (hidden_states.transpose(0, 1)) and
the result handed back batch first; the layer called with the float mask (0 everywhere), is_index_masked and
is_index_global_attn (all False). The sliding-chunks matmuls are written here dense over the band: the same
scores, −inf outside the band as _mask_invalid_locations leaves them, the diagonal mask 0 (no padding), softmax
in f32, masked_fill(is_index_masked, 0), then the probabilities times v (torch sums each dot product in its own
order, as any two kernels do). BERT-style embeddings (positions from padding_idx + 1 on), post-norm layers, GELU
FFNs, a tanh pooler over the first token.

longt5 follows src/transformers/models/longt5/modeling_longt5.py at commit fd365f0f5165c04aec1be34359d0c37d13a4c413
(LongT5Stack as the encoder, encoder_attention_type "local", two layers: local_radius 7, so block_len 8, and the
request's 8 ids are one block). What it shows: local block attention: q, k, v split into blocks of 8, each
block's keys and values the block before, its own and the one after joined (zeros beyond the sequence), scores
[B, blocks, H, 8, 24] unscaled (T5), plus the relative position bias computed over one block's 3-block window
(compute_bias(block_len): T5's bidirectional buckets, 32 buckets, max distance 128, of key position − query
position with the queries at positions 8…15 of the 24) and the local mask (blocked padding mask, |i − j| <
block_len) as −1e10; softmax in f32, the first S rows kept, o. RMS layer norms (f32 variance), ReLU FFN. The second layer reads
the bias the first returns, the local mask included: the mask (a bool value the stack builds from the request's
length) is a constant of the request's shape, one band of keys per query and one key range per block.
"""
import math

import torch
from torch import nn
from torch.nn import functional as F


class FSMTConfig:
    vocab_size, d_model, encoder_attention_heads, encoder_layers, encoder_ffn_dim = 64, 32, 2, 2, 48
    max_position_embeddings, pad_token_id, scale_embedding = 64, 0, True


class SinusoidalPositionalEmbedding(nn.Embedding):
    """FSMT's: tensor2tensor sinusoids [sin | cos] (frequencies exp(−i·ln(10⁴)/(half − 1))), the padding row 0,
    positions padding_idx + 1 + cumsum over the non-padding ids."""

    def __init__(self, num_positions, embedding_dim, padding_idx):
        super().__init__(num_positions, embedding_dim, padding_idx)
        half = embedding_dim // 2
        emb = math.log(10000) / (half - 1)
        emb = torch.exp(torch.arange(half, dtype=torch.int64).float() * -emb)
        emb = torch.arange(num_positions, dtype=torch.int64).float().unsqueeze(1) * emb.unsqueeze(0)
        emb = torch.cat([torch.sin(emb), torch.cos(emb)], dim=1).view(num_positions, -1)
        emb[padding_idx, :] = 0
        self.weight = nn.Parameter(emb, requires_grad=False)

    def forward(self, input):
        mask = input.ne(self.padding_idx).int()
        positions = (torch.cumsum(mask, dim=1).type_as(mask) * mask).long() + self.padding_idx
        return super().forward(positions)


class FSMTAttention(nn.Module):
    def __init__(self, embed_dim, num_heads):
        super().__init__()
        self.embed_dim, self.num_heads = embed_dim, num_heads
        self.head_dim = embed_dim // num_heads
        self.scaling = self.head_dim ** -0.5
        self.k_proj = nn.Linear(embed_dim, embed_dim)
        self.v_proj = nn.Linear(embed_dim, embed_dim)
        self.q_proj = nn.Linear(embed_dim, embed_dim)
        self.out_proj = nn.Linear(embed_dim, embed_dim)

    def _shape(self, t, seq_len, bsz):
        return t.contiguous().view(seq_len, bsz * self.num_heads, self.head_dim).transpose(0, 1)

    def forward(self, query, key, key_padding_mask=None, output_attentions=False):
        tgt_len, bsz, embed_dim = query.size()
        k = self.k_proj(query)
        v = self.v_proj(query)
        q = self.q_proj(query) * self.scaling
        q, k, v = self._shape(q, tgt_len, bsz), self._shape(k, -1, bsz), self._shape(v, -1, bsz)
        attn_weights = torch.bmm(q, k.transpose(1, 2))
        attn_weights = F.softmax(attn_weights, dim=-1)
        attn_output = torch.bmm(attn_weights, v)
        attn_output = attn_output.transpose(0, 1).contiguous().view(tgt_len, bsz, embed_dim)
        return self.out_proj(attn_output), None


class EncoderLayer(nn.Module):
    def __init__(self, c):
        super().__init__()
        d = c.d_model
        self.self_attn = FSMTAttention(d, c.encoder_attention_heads)
        self.self_attn_layer_norm = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, c.encoder_ffn_dim)
        self.activation_fn = nn.ReLU()
        self.fc2 = nn.Linear(c.encoder_ffn_dim, d)
        self.final_layer_norm = nn.LayerNorm(d)

    def forward(self, x, encoder_padding_mask, output_attentions=False):
        residual = x
        x, attn_weights = self.self_attn(query=x, key=x, key_padding_mask=encoder_padding_mask, output_attentions=output_attentions)
        x = self.self_attn_layer_norm(residual + x)
        residual = x
        x = self.fc2(self.activation_fn(self.fc1(x)))
        x = self.final_layer_norm(residual + x)
        return x, attn_weights


class FSMTEncoder(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.embed_tokens = nn.Embedding(c.vocab_size, c.d_model, c.pad_token_id)
        self.embed_scale = math.sqrt(c.d_model) if c.scale_embedding else 1.0
        self.embed_positions = SinusoidalPositionalEmbedding(c.max_position_embeddings + c.pad_token_id + 1, c.d_model, c.pad_token_id)
        self.layers = nn.ModuleList([EncoderLayer(c) for _ in range(c.encoder_layers)])

    def forward(self, input_ids):
        x = self.embed_tokens(input_ids) * self.embed_scale + self.embed_positions(input_ids)
        x = x.transpose(0, 1)  # B x T x C -> T x B x C
        for layer in self.layers:
            x, _ = layer(x, None, output_attentions=False)
        return {"last_hidden_state": x.transpose(0, 1)}


class LongformerConfig:
    vocab_size, hidden_size, num_attention_heads, num_hidden_layers, intermediate_size = 64, 32, 2, 2, 48
    max_position_embeddings, type_vocab_size, layer_norm_eps, pad_token_id, attention_window = 64, 2, 1e-12, 0, 4


class LongformerEmbeddings(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.word_embeddings = nn.Embedding(c.vocab_size, c.hidden_size, padding_idx=c.pad_token_id)
        self.position_embeddings = nn.Embedding(c.max_position_embeddings, c.hidden_size, padding_idx=c.pad_token_id)
        self.token_type_embeddings = nn.Embedding(c.type_vocab_size, c.hidden_size)
        self.LayerNorm = nn.LayerNorm(c.hidden_size, eps=c.layer_norm_eps)
        self.dropout = nn.Dropout(0.0)
        self.padding_idx = c.pad_token_id

    def forward(self, input_ids=None, token_type_ids=None, position_ids=None, inputs_embeds=None):
        mask = input_ids.ne(self.padding_idx).int()
        position_ids = (torch.cumsum(mask, dim=1).type_as(mask) * mask).long() + self.padding_idx
        e = self.word_embeddings(input_ids) + self.position_embeddings(position_ids) + self.token_type_embeddings(token_type_ids)
        return self.dropout(self.LayerNorm(e))


class LongformerSelfAttention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.num_heads = c.num_attention_heads
        self.head_dim = c.hidden_size // c.num_attention_heads
        self.embed_dim = c.hidden_size
        self.query = nn.Linear(c.hidden_size, self.embed_dim)
        self.key = nn.Linear(c.hidden_size, self.embed_dim)
        self.value = nn.Linear(c.hidden_size, self.embed_dim)
        self.one_sided_attn_window_size = c.attention_window // 2

    def forward(self, hidden_states, attention_mask=None, is_index_masked=None, is_index_global_attn=None,
                is_global_attn=None, output_attentions=False):
        hidden_states = hidden_states.transpose(0, 1)
        query_vectors = self.query(hidden_states)
        key_vectors = self.key(hidden_states)
        value_vectors = self.value(hidden_states)
        seq_len, batch_size, embed_dim = hidden_states.size()
        query_vectors /= math.sqrt(self.head_dim)
        q = query_vectors.view(seq_len, batch_size, self.num_heads, self.head_dim).transpose(0, 1)
        k = key_vectors.view(seq_len, batch_size, self.num_heads, self.head_dim).transpose(0, 1)
        v = value_vectors.view(seq_len, batch_size, self.num_heads, self.head_dim).transpose(0, 1)
        # the band the sliding chunks compute: scores [B, S, H, S], −inf where |i − j| > w
        scores = torch.einsum("bihd,bjhd->bihj", q, k)
        i = torch.arange(seq_len)
        outside = (i[:, None] - i[None, :]).abs() > self.one_sided_attn_window_size
        scores = scores.masked_fill(outside[None, :, None, :], -float("inf"))
        remove = (attention_mask != 0)[:, :, None, None]
        float_mask = remove.type_as(query_vectors).masked_fill(remove, torch.finfo(query_vectors.dtype).min)
        scores = scores + float_mask.transpose(1, 3)  # the diagonal mask: the keys' padding (none here)
        probs = F.softmax(scores, dim=-1, dtype=torch.float32)
        probs = torch.masked_fill(probs, is_index_masked[:, :, None, None], 0.0).type_as(scores)
        attn_output = torch.einsum("bihj,bjhd->bihd", probs, v)
        attn_output = attn_output.transpose(0, 1).reshape(seq_len, batch_size, embed_dim).contiguous()
        return (attn_output.transpose(0, 1),)


class LongformerSelfOutput(nn.Module):
    def __init__(self, c, width):
        super().__init__()
        self.dense = nn.Linear(width, c.hidden_size)
        self.dropout = nn.Dropout(0.0)
        self.LayerNorm = nn.LayerNorm(c.hidden_size, eps=c.layer_norm_eps)

    def forward(self, hidden_states, input_tensor):
        return self.LayerNorm(self.dropout(self.dense(hidden_states)) + input_tensor)


class LongformerAttention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.self = LongformerSelfAttention(c)
        self.output = LongformerSelfOutput(c, c.hidden_size)

    def forward(self, hidden_states, attention_mask=None, is_index_masked=None, is_index_global_attn=None,
                is_global_attn=None, output_attentions=False):
        self_outputs = self.self(hidden_states, attention_mask=attention_mask, is_index_masked=is_index_masked,
                                 is_index_global_attn=is_index_global_attn, is_global_attn=is_global_attn,
                                 output_attentions=output_attentions)
        return (self.output(self_outputs[0], hidden_states),)


class LongformerIntermediate(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.dense = nn.Linear(c.hidden_size, c.intermediate_size)
        self.intermediate_act_fn = nn.GELU()

    def forward(self, x):
        return self.intermediate_act_fn(self.dense(x))


class LongformerLayer(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.attention = LongformerAttention(c)
        self.intermediate = LongformerIntermediate(c)
        self.output = LongformerSelfOutput(c, c.intermediate_size)

    def forward(self, hidden_states, attention_mask=None, is_index_masked=None, is_index_global_attn=None,
                is_global_attn=None, output_attentions=False):
        a = self.attention(hidden_states, attention_mask=attention_mask, is_index_masked=is_index_masked,
                           is_index_global_attn=is_index_global_attn, is_global_attn=is_global_attn,
                           output_attentions=output_attentions)[0]
        return (self.output(self.intermediate(a), a),)


class LongformerEncoder(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.layer = nn.ModuleList([LongformerLayer(c) for _ in range(c.num_hidden_layers)])

    def forward(self, hidden_states, attention_mask=None, padding_len=0, output_attentions=False,
                output_hidden_states=False, return_dict=True):
        is_index_masked = attention_mask < 0
        is_index_global_attn = attention_mask > 0
        is_global_attn = bool(is_index_global_attn.flatten().any().item())
        for layer in self.layer:
            hidden_states = layer(hidden_states, attention_mask=attention_mask, is_index_masked=is_index_masked,
                                  is_index_global_attn=is_index_global_attn, is_global_attn=is_global_attn,
                                  output_attentions=output_attentions)[0]
        return {"last_hidden_state": hidden_states}


class LongformerPooler(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.dense = nn.Linear(c.hidden_size, c.hidden_size)
        self.activation = nn.Tanh()

    def forward(self, hidden_states):
        return self.activation(self.dense(hidden_states[:, 0]))


class LongformerModel(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.embeddings = LongformerEmbeddings(c)
        self.encoder = LongformerEncoder(c)
        self.pooler = LongformerPooler(c)

    def forward(self, input_ids):
        attention_mask = torch.ones_like(input_ids)
        token_type_ids = torch.zeros_like(input_ids)
        # get_extended_attention_mask(...)[:, 0, 0, :]: 0 where attended (1 − mask)·min
        extended = (1.0 - attention_mask[:, None, None, :].float()) * torch.finfo(torch.float32).min
        extended = extended[:, 0, 0, :]
        h = self.embeddings(input_ids=input_ids, token_type_ids=token_type_ids, position_ids=None, inputs_embeds=None)
        seq = self.encoder(h, attention_mask=extended, padding_len=0, output_attentions=False,
                           output_hidden_states=False, return_dict=True)["last_hidden_state"]
        return {"last_hidden_state": seq, "pooler_output": self.pooler(seq)}


class LongT5Config:
    vocab_size, d_model, d_kv, d_ff, num_layers, num_heads = 64, 32, 16, 48, 2, 2
    local_radius, relative_attention_num_buckets, relative_attention_max_distance, layer_norm_epsilon = 7, 32, 128, 1e-6


def _pad_to_multiple(x, block_len, dim, pad_value=0):
    pad_len = -x.shape[dim] % block_len
    pad = [(0, 0)] * x.ndim
    pad[dim] = (0, pad_len)
    pad = sum(pad[::-1], ())
    return F.pad(x, pad=pad, mode="constant", value=pad_value)


def _split_into_blocks(x, block_len, dim):
    if x.shape[dim] % block_len != 0:
        x = _pad_to_multiple(x, block_len, dim, pad_value=0)
    num_blocks = x.shape[dim] // block_len
    return x.reshape(x.shape[:dim] + (num_blocks, block_len) + x.shape[(dim + 1):])


def _concatenate_3_blocks(x, block_dim, sequence_dim, pad_value=0):
    num_blocks = x.shape[block_dim]
    pad = [(0, 0)] * x.ndim
    pad[block_dim] = (1, 1)
    pad = sum(pad[::-1], ())
    x = F.pad(x, pad=pad, mode="constant", value=pad_value)
    blocks = []
    for i in range(3):
        idx = [slice(0, None)] * x.ndim
        idx[block_dim] = slice(i, i + num_blocks)
        blocks.append(x[tuple(idx)])
    return torch.cat(blocks, dim=sequence_dim)


def _make_3block_relative_position_ids(block_len):
    position_ids = torch.arange(3 * block_len, dtype=torch.int32)
    center_position_ids = position_ids[block_len:-block_len]
    return position_ids.unsqueeze(0) - center_position_ids.unsqueeze(1)


def _get_local_attention_mask(attention_mask, block_len):
    blocked = _split_into_blocks(attention_mask, block_len, dim=1)
    three = _concatenate_3_blocks(blocked, block_dim=1, sequence_dim=2)
    local = torch.logical_and(blocked.unsqueeze(-1), three.unsqueeze(-2))
    rel = _make_3block_relative_position_ids(block_len)
    local = torch.logical_and(local, (torch.abs(rel) < block_len)[None, None, :, :])
    return local.unsqueeze(1)


class LongT5LayerNorm(nn.Module):
    def __init__(self, hidden_size, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.variance_epsilon = eps

    def forward(self, hidden_states):
        variance = hidden_states.to(torch.float32).pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
        return self.weight * hidden_states


class LongT5LocalAttention(nn.Module):
    def __init__(self, c, has_relative_attention_bias):
        super().__init__()
        self.n_heads, self.key_value_proj_dim = c.num_heads, c.d_kv
        self.inner_dim = c.num_heads * c.d_kv
        self.block_len = c.local_radius + 1
        self.num_buckets, self.max_distance = c.relative_attention_num_buckets, c.relative_attention_max_distance
        self.q = nn.Linear(c.d_model, self.inner_dim, bias=False)
        self.k = nn.Linear(c.d_model, self.inner_dim, bias=False)
        self.v = nn.Linear(c.d_model, self.inner_dim, bias=False)
        self.o = nn.Linear(self.inner_dim, c.d_model, bias=False)
        self.has_relative_attention_bias = has_relative_attention_bias
        if has_relative_attention_bias:
            self.relative_attention_bias = nn.Embedding(self.num_buckets, self.n_heads)

    @staticmethod
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
        if_large = max_exact + (torch.log(relative_position.float() / max_exact) / math.log(max_distance / max_exact)
                                * (num_buckets - max_exact)).to(torch.long)
        if_large = torch.min(if_large, torch.full_like(if_large, num_buckets - 1))
        return relative_buckets + torch.where(is_small, relative_position, if_large)

    def compute_bias(self, block_length):
        memory_position = torch.arange(3 * block_length, dtype=torch.long)
        context_position = memory_position[block_length:-block_length]
        relative_position = memory_position[None, :] - context_position[:, None]
        bucket = self._relative_position_bucket(relative_position, bidirectional=True, num_buckets=self.num_buckets,
                                                max_distance=self.max_distance)
        values = self.relative_attention_bias(bucket)
        return values.permute([2, 0, 1]).unsqueeze(0).unsqueeze(0)

    def forward(self, hidden_states, mask=None, position_bias=None, output_attentions=False):
        batch_size, seq_length = hidden_states.shape[:2]

        def shape(states):
            return states.view(batch_size, -1, self.n_heads, self.key_value_proj_dim)

        def unshape(states):
            return states.contiguous().view(batch_size, -1, self.inner_dim)

        query_states = _split_into_blocks(shape(self.q(hidden_states)), self.block_len, dim=1)
        key_states = _split_into_blocks(shape(self.k(hidden_states)), self.block_len, dim=1)
        value_states = _split_into_blocks(shape(self.v(hidden_states)), self.block_len, dim=1)
        key_states = _concatenate_3_blocks(key_states, block_dim=1, sequence_dim=2)
        value_states = _concatenate_3_blocks(value_states, block_dim=1, sequence_dim=2)
        scores = torch.einsum("...qhd,...khd->...hqk", query_states, key_states)
        if position_bias is None:
            position_bias = self.compute_bias(self.block_len)
            if mask is not None:
                mask = torch.where(mask > 0, 0.0, -1e10)
                position_bias = position_bias + mask.transpose(1, 2)
        scores += position_bias
        attn_weights = F.softmax(scores.float(), dim=-1).type_as(scores)
        attn_output = unshape(torch.einsum("...hqk,...khd->...qhd", attn_weights, value_states))
        attn_output = self.o(attn_output[:, :seq_length, :])
        return (attn_output, None, position_bias)


class LongT5LayerLocalSelfAttention(nn.Module):
    def __init__(self, c, has_relative_attention_bias):
        super().__init__()
        self.LocalSelfAttention = LongT5LocalAttention(c, has_relative_attention_bias)
        self.layer_norm = LongT5LayerNorm(c.d_model, eps=c.layer_norm_epsilon)
        self.dropout = nn.Dropout(0.0)

    def forward(self, hidden_states, attention_mask=None, position_bias=None, output_attentions=False):
        out = self.LocalSelfAttention(self.layer_norm(hidden_states), mask=attention_mask, position_bias=position_bias,
                                      output_attentions=output_attentions)
        return (hidden_states + self.dropout(out[0]),) + out[1:]


class LongT5DenseActDense(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.wi = nn.Linear(c.d_model, c.d_ff, bias=False)
        self.wo = nn.Linear(c.d_ff, c.d_model, bias=False)
        self.dropout = nn.Dropout(0.0)
        self.act = nn.ReLU()

    def forward(self, x):
        return self.wo(self.dropout(self.act(self.wi(x))))


class LongT5LayerFF(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.DenseReluDense = LongT5DenseActDense(c)
        self.layer_norm = LongT5LayerNorm(c.d_model, eps=c.layer_norm_epsilon)
        self.dropout = nn.Dropout(0.0)

    def forward(self, hidden_states):
        return hidden_states + self.dropout(self.DenseReluDense(self.layer_norm(hidden_states)))


class LongT5Block(nn.Module):
    def __init__(self, c, has_relative_attention_bias):
        super().__init__()
        self.layer = nn.ModuleList([LongT5LayerLocalSelfAttention(c, has_relative_attention_bias), LongT5LayerFF(c)])

    def forward(self, hidden_states, attention_mask=None, position_bias=None):
        out = self.layer[0](hidden_states, attention_mask=attention_mask, position_bias=position_bias)
        return (self.layer[1](out[0]),) + out[1:]


class LongT5Stack(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.embed_tokens = nn.Embedding(c.vocab_size, c.d_model)
        self.block_len = c.local_radius + 1
        self.block = nn.ModuleList([LongT5Block(c, has_relative_attention_bias=i == 0) for i in range(c.num_layers)])
        self.final_layer_norm = LongT5LayerNorm(c.d_model, eps=c.layer_norm_epsilon)
        self.dropout = nn.Dropout(0.0)

    def forward(self, input_ids):
        hidden_states = self.dropout(self.embed_tokens(input_ids))
        attention_mask = torch.ones(input_ids.shape)
        extended = _get_local_attention_mask(attention_mask, self.block_len)
        position_bias = None
        for block in self.block:
            out = block(hidden_states, extended, position_bias)
            hidden_states, position_bias = out[0], out[2]
        return {"last_hidden_state": self.dropout(self.final_layer_norm(hidden_states))}


CASES = {"fsmt": (FSMTEncoder, FSMTConfig), "longformer": (LongformerModel, LongformerConfig),
         "longt5": (LongT5Stack, LongT5Config)}
