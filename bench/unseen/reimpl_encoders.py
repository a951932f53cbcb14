"""Faithful torch 1.13 reimplementations of transformers models whose embeddings or position
schemes earlier forms did not read (cases of capture_reimpl.py; its docstring says how a case
is built and captured).

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


CASES = {"xglm": (XGLMModel, XGLMConfig)}
