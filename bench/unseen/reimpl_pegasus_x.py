"""A faithful torch 1.13 reimplementation of PEGASUS-X's encoder (a case of capture_reimpl.py; its docstring says how a
case is built and captured: 8 random ids, weights redrawn by weights.py's randomize, model(ids), last_hidden_state).

pegasus_x follows huggingface/transformers src/transformers/models/pegasus_x/modeling_pegasus_x.py at commit
03ea97ae17f461340572ce7c7250b22d7a146893 (PegasusXEncoder, what PegasusXModel.get_encoder() gives: the encoder is
built around the model's shared PegasusXScaledWordEmbedding, the same module and name embed_tokens here) and
configuration_pegasus_x.py (commit 069d0c342e97c1967c877a5a464b82c5bf821ec6)'s PegasusXConfig defaults but for the
sizes: d_model 64, 4 heads of 16, 2 encoder layers, encoder_ffn_dim 96, vocab 128, max_position_embeddings 64;
defaults kept: block_size 512, num_global_tokens 32, stagger_local_blocks True, activation "gelu" (erf GELU,
GELUActivation as its own call), scale_embedding True, pad_token_id 0; dropout 0 (eval). What it shows:
  - word embeddings times sqrt(d_model) inside the embedding's call (PegasusXScaledWordEmbedding); sinusoidal
    positions made on the fly by a module without parameters called with the embeddings: [sin | cos] of
    pos · exp(−i·ln(10⁴)/(half − 1)), i < half = 32, expanded over the batch, added;
  - the ids' mask (ones, no mask given) inverted to a float mask (0 kept, finfo.min masked); the 8 rows padded with
    zero rows to a multiple of block_size (512), the mask padded with finfo.min;
  - 32 learned global tokens: embed_global (nn.Embedding(32, 64)) read at arange(32), expanded over the batch;
  - each layer pre-norm: self_attn_layer_norm over the token rows, global_self_attn_layer_norm over the global
    rows; the odd layer (stagger_local_blocks) pads the normed rows by block_size/2 = 256 zero rows on either side
    (the mask by finfo.min), so its blocks are shifted by half a block, and strips them after the attention;
  - PegasusXGlobalLocalAttention, q/k/v/out projections without bias, each called on the token rows then on the
    global rows (q, k, v of tokens, then q, k, v of globals); q scaled by head_dim^-½ after the projection; global
    queries attend [global keys | every token key] (mask 0 over the globals, the token mask after); token queries,
    in blocks of 512, attend [global keys | their block's keys] (mask 0 over the globals, the block's mask after),
    one softmax over the joined row, split back into the two parts' probabilities times global values plus
    block-local ones; out_proj called on the global output first, then on the token output;
  - residuals; the FFN (final_layer_norm, fc1, GELU, fc2, residual) run on the token rows then, with the same
    modules, on the global rows;
  - the padding to the block size stripped (hidden_states[:, :seq_len]) before the final layer_norm; the global
    rows are not returned.
At the default block_size 512 the 8 rows are padded to 512 (1024 in the staggered layer) and every trace tensor
of the token rows is that long: the trace is 8.4 MB, and the 8 ids sit in one block in both layers. pegasus_x_b4 is
the same model at block_size 4 and 2 global tokens (not a default): two blocks of 4 in layer 0, and in layer 1 the
staggered blocks [pad pad t0 t1] [t2 t3 t4 t5] [t6 t7 pad pad] (pad_size 2), so the block-local attention acts.
"""
import math

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F


class PegasusXConfig:
    vocab_size, max_position_embeddings, encoder_layers, encoder_ffn_dim, encoder_attention_heads = 128, 64, 2, 96, 4
    d_model, dropout, attention_dropout, activation_dropout, encoder_layerdrop = 64, 0.0, 0.0, 0.0, 0.0
    activation_function, scale_embedding, pad_token_id = "gelu", True, 0
    num_global_tokens, block_size, stagger_local_blocks = 32, 512, True


class DimensionInfo:
    def __init__(self, batch_size, seq_len, block_size, num_heads, hidden_dim, dim_per_head, num_blocks, global_len,
                 padded_seq_len):
        self.batch_size, self.seq_len, self.block_size, self.num_heads = batch_size, seq_len, block_size, num_heads
        self.hidden_dim, self.dim_per_head, self.num_blocks = hidden_dim, dim_per_head, num_blocks
        self.global_len, self.padded_seq_len = global_len, padded_seq_len


class PegasusXScaledWordEmbedding(nn.Embedding):
    def __init__(self, num_embeddings, embedding_dim, padding_idx, embed_scale=1.0):
        super().__init__(num_embeddings, embedding_dim, padding_idx)
        self.embed_scale = embed_scale

    def forward(self, input_ids):
        return super().forward(input_ids) * self.embed_scale


class PegasusXSinusoidalPositionalEmbedding(nn.Module):
    def __init__(self, embed_dim, max_scale=10000.0):
        super().__init__()
        self.embed_dim = embed_dim
        self.max_scale = max_scale

    @torch.no_grad()
    def forward(self, input_embeds, past_key_values_length=0, position_ids=None):
        batch_size, seq_len = input_embeds.shape[:2]
        if position_ids is None:
            position_ids = torch.arange(
                past_key_values_length, past_key_values_length + seq_len, dtype=torch.long, device=input_embeds.device
            )[:, None]
        pe = torch.zeros((seq_len, self.embed_dim), device=input_embeds.device, dtype=input_embeds.dtype)
        half_d_feature = self.embed_dim // 2
        div_term = torch.exp(
            torch.arange(half_d_feature, device=input_embeds.device, dtype=torch.int64).type_as(input_embeds)
            * -(np.log(float(self.max_scale)) / (half_d_feature - 1))
        )
        pe[:, :half_d_feature] = torch.sin(position_ids * div_term)
        pe[:, half_d_feature:] = torch.cos(position_ids * div_term)
        return pe[None].expand(batch_size, -1, -1)


class GELUActivation(nn.Module):
    """transformers' ACT2FN["gelu"]: nn.functional.gelu (erf)."""

    def forward(self, input):
        return F.gelu(input)


class PegasusXGlobalLocalAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, block_size, dropout=0.0, is_decoder=False):
        super().__init__()
        self.embed_dim = embed_dim
        self.num_heads = num_heads
        self.block_size = block_size
        self.dropout = dropout
        self.head_dim = embed_dim // num_heads
        self.scaling = self.head_dim ** -0.5
        self.is_decoder = is_decoder
        self.k_proj = nn.Linear(embed_dim, embed_dim, bias=False)
        self.v_proj = nn.Linear(embed_dim, embed_dim, bias=False)
        self.q_proj = nn.Linear(embed_dim, embed_dim, bias=False)
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=False)

    def _shape(self, tensor, seq_len, bsz):
        return tensor.view(bsz, seq_len, self.num_heads, self.head_dim).transpose(1, 2).contiguous()

    def forward(self, token_hidden_states, global_hidden_states, attention_mask=None, output_attentions=False):
        dim = DimensionInfo(
            batch_size=token_hidden_states.shape[0],
            seq_len=token_hidden_states.shape[1],
            block_size=self.block_size,
            num_heads=self.num_heads,
            hidden_dim=token_hidden_states.shape[2],
            dim_per_head=self.head_dim,
            num_blocks=token_hidden_states.shape[1] // self.block_size,
            global_len=global_hidden_states.shape[1],
            padded_seq_len=token_hidden_states.shape[1],
        )
        local_q = self._shape(self.q_proj(token_hidden_states) * self.scaling, seq_len=dim.padded_seq_len, bsz=dim.batch_size)
        local_k = self._shape(self.k_proj(token_hidden_states), seq_len=dim.padded_seq_len, bsz=dim.batch_size)
        local_v = self._shape(self.v_proj(token_hidden_states), seq_len=dim.padded_seq_len, bsz=dim.batch_size)
        global_q = self._shape(self.q_proj(global_hidden_states) * self.scaling, seq_len=dim.global_len, bsz=dim.batch_size)
        global_k = self._shape(self.k_proj(global_hidden_states), seq_len=dim.global_len, bsz=dim.batch_size)
        global_v = self._shape(self.v_proj(global_hidden_states), seq_len=dim.global_len, bsz=dim.batch_size)

        global_attn_output, global_attn_probs = self.compute_global_attention_representations(
            global_q=global_q, global_k=global_k, global_v=global_v, local_k=local_k, local_v=local_v,
            mask=attention_mask, dim=dim,
        )
        local_attn_output, local_attn_probs = self.compute_local_attention_representations(
            global_k=global_k, global_v=global_v, local_q=local_q, local_k=local_k, local_v=local_v,
            mask=attention_mask, dim=dim,
        )

        # [batch_size, global_len, hidden_dim]
        global_attn_output = global_attn_output.transpose(1, 2).contiguous().view(dim.batch_size, dim.global_len, dim.hidden_dim)
        global_attn_output = self.out_proj(global_attn_output)
        # [batch_size, num_blocks, block_size, num_heads, dim_per_head]
        local_attn_output = local_attn_output.permute(0, 2, 3, 1, 4).contiguous()
        local_attn_output = local_attn_output.view(dim.batch_size, dim.padded_seq_len, dim.hidden_dim)
        local_attn_output = self.out_proj(local_attn_output)

        attn_probs = {"global": global_attn_probs, "local": local_attn_probs} if output_attentions else None
        return local_attn_output, global_attn_output, attn_probs

    def compute_global_attention_representations(self, global_q, global_k, global_v, local_k, local_v, mask, dim):
        global_and_local_k = torch.cat([global_k, local_k], dim=2)
        global_and_local_v = torch.cat([global_v, local_v], dim=2)
        # [batch_size, global_len+padded_seq_len]
        extended_mask = F.pad(mask, pad=(dim.global_len, 0), value=0)
        # [batch_size, num_heads, global_len, global_len+padded_seq_len]
        attn_weights = torch.einsum("BHGF,BHXF->BHGX", global_q, global_and_local_k)
        attn_weights = attn_weights + extended_mask[:, None, None, :]
        attn_probs = F.softmax(attn_weights, dim=-1)
        attn_probs = F.dropout(attn_probs, p=self.dropout, training=self.training)
        attn_output = torch.einsum("BHGX,BHXF->BHGF", attn_probs, global_and_local_v)
        return attn_output, attn_probs

    def compute_local_attention_representations(self, global_k, global_v, local_q, local_k, local_v, mask, dim):
        blocked_local_q = local_q.view(dim.batch_size, dim.num_heads, dim.num_blocks, dim.block_size, dim.dim_per_head)
        blocked_local_k = local_k.view(dim.batch_size, dim.num_heads, dim.num_blocks, dim.block_size, dim.dim_per_head)
        blocked_local_v = local_v.view(dim.batch_size, dim.num_heads, dim.num_blocks, dim.block_size, dim.dim_per_head)
        # [batch_size, num_blocks, global_len+block_size]
        extended_mask = F.pad(mask.view(dim.batch_size, dim.num_blocks, dim.block_size), pad=(dim.global_len, 0), value=0)
        # [batch_size, num_heads, num_blocks, block_size, global_len]
        blocked_local2global = torch.einsum("BHNKF,BHGF->BHNKG", blocked_local_q, global_k)
        # [batch_size, num_heads, num_blocks, block_size, block_size]
        blocked_local2local = torch.einsum("BHNKF,BHNXF->BHNKX", blocked_local_q, blocked_local_k)
        attn_weights = torch.cat([blocked_local2global, blocked_local2local], dim=-1)
        attn_weights = attn_weights + extended_mask[:, None, :, None, :]
        attn_probs = F.softmax(attn_weights, dim=-1)
        attn_probs = F.dropout(attn_probs, p=self.dropout, training=self.training)
        local2global_attn_probs = attn_probs[:, :, :, :, : dim.global_len]
        local2local_attn_probs = attn_probs[:, :, :, :, dim.global_len :]
        local2global_attn_output = torch.einsum("BHNKG,BHGF->BHNKF", local2global_attn_probs, global_v)
        local2local_attn_output = torch.einsum("BHNKX,BHNXF->BHNKF", local2local_attn_probs, blocked_local_v)
        attn_output = local2global_attn_output + local2local_attn_output
        return attn_output, attn_probs


class PegasusXEncoderLayer(nn.Module):
    def __init__(self, stagger_blocks_this_layer, config):
        super().__init__()
        self.embed_dim = config.d_model
        self.self_attn = PegasusXGlobalLocalAttention(
            embed_dim=self.embed_dim, num_heads=config.encoder_attention_heads, block_size=config.block_size,
            dropout=config.attention_dropout,
        )
        self.self_attn_layer_norm = nn.LayerNorm(self.embed_dim)
        self.global_self_attn_layer_norm = nn.LayerNorm(self.embed_dim)
        self.dropout = config.dropout
        self.activation_fn = GELUActivation()
        self.activation_dropout = config.activation_dropout
        self.fc1 = nn.Linear(self.embed_dim, config.encoder_ffn_dim)
        self.fc2 = nn.Linear(config.encoder_ffn_dim, self.embed_dim)
        self.final_layer_norm = nn.LayerNorm(self.embed_dim)
        self.stagger_blocks_this_layer = stagger_blocks_this_layer
        self.block_size = config.block_size

    def forward(self, hidden_states, global_hidden_states, attention_mask, output_attentions=False):
        residual = hidden_states
        global_residual = global_hidden_states

        hidden_states = self.self_attn_layer_norm(hidden_states)
        global_hidden_states = self.global_self_attn_layer_norm(global_hidden_states)

        if self.stagger_blocks_this_layer:
            hidden_states, attention_mask = self.pad_local_tokens(
                hidden_states=hidden_states, attention_mask=attention_mask, block_size=self.block_size
            )

        hidden_states, global_hidden_states, attn_weights = self.self_attn(
            token_hidden_states=hidden_states, global_hidden_states=global_hidden_states,
            attention_mask=attention_mask, output_attentions=output_attentions,
        )

        if self.stagger_blocks_this_layer:
            hidden_states = self.unpad_local_tokens(padded_hidden_states=hidden_states, block_size=self.block_size)

        hidden_states = F.dropout(hidden_states, p=self.dropout, training=self.training)
        hidden_states = residual + hidden_states

        global_hidden_states = F.dropout(global_hidden_states, p=self.dropout, training=self.training)
        global_hidden_states = global_residual + global_hidden_states

        residual = hidden_states
        hidden_states = self.final_layer_norm(hidden_states)
        hidden_states = self.activation_fn(self.fc1(hidden_states))
        hidden_states = F.dropout(hidden_states, p=self.activation_dropout, training=self.training)
        hidden_states = self.fc2(hidden_states)
        hidden_states = F.dropout(hidden_states, p=self.dropout, training=self.training)
        hidden_states = residual + hidden_states

        global_residual = global_hidden_states
        global_hidden_states = self.final_layer_norm(global_hidden_states)
        global_hidden_states = self.activation_fn(self.fc1(global_hidden_states))
        global_hidden_states = F.dropout(global_hidden_states, p=self.activation_dropout, training=self.training)
        global_hidden_states = self.fc2(global_hidden_states)
        global_hidden_states = F.dropout(global_hidden_states, p=self.dropout, training=self.training)
        global_hidden_states = global_residual + global_hidden_states
        outputs = (hidden_states, global_hidden_states)
        if output_attentions:
            outputs += (attn_weights,)
        return outputs

    @classmethod
    def pad_local_tokens(cls, hidden_states, attention_mask, block_size):
        pad_size = block_size // 2
        mask_min_value = torch.finfo(hidden_states.dtype).min
        padded_hidden_states = F.pad(hidden_states, pad=(0, 0, pad_size, pad_size))
        padded_mask = F.pad(attention_mask, pad=(pad_size, pad_size), value=mask_min_value)
        return padded_hidden_states, padded_mask

    @classmethod
    def unpad_local_tokens(cls, padded_hidden_states, block_size):
        pad_size = block_size // 2
        return padded_hidden_states[:, pad_size:-pad_size, :]


class PegasusXEncoder(nn.Module):
    def __init__(self, config, embed_tokens=None):
        super().__init__()
        self.config = config
        self.dropout = config.dropout
        self.layerdrop = config.encoder_layerdrop
        embed_dim = config.d_model
        padding_idx = config.pad_token_id
        self.max_source_positions = config.max_position_embeddings
        embed_scale = math.sqrt(embed_dim) if config.scale_embedding else 1.0
        if embed_tokens is not None:
            self.embed_tokens = embed_tokens
        else:
            self.embed_tokens = PegasusXScaledWordEmbedding(config.vocab_size, embed_dim, padding_idx, embed_scale=embed_scale)
        self.embed_global = nn.Embedding(config.num_global_tokens, embed_dim)
        self.embed_positions = PegasusXSinusoidalPositionalEmbedding(embed_dim)
        self.layers = nn.ModuleList(
            [PegasusXEncoderLayer(stagger_blocks_this_layer=i % 2 == 1 and config.stagger_local_blocks, config=config)
             for i in range(config.encoder_layers)]
        )
        self.layer_norm = nn.LayerNorm(config.d_model)

    def forward(self, input_ids=None, attention_mask=None):
        input_shape = input_ids.size()
        input_ids = input_ids.view(-1, input_shape[-1])
        inputs_embeds = self.embed_tokens(input_ids)
        embed_pos = self.embed_positions(inputs_embeds)
        hidden_states = inputs_embeds + embed_pos
        hidden_states = F.dropout(hidden_states, p=self.dropout, training=self.training)

        batch_size, seq_len, _ = hidden_states.shape

        # Setup mask
        if attention_mask is None:
            attention_mask = torch.ones(*input_shape, dtype=inputs_embeds.dtype, device=inputs_embeds.device)
        attention_mask = attention_mask.to(dtype=hidden_states.dtype)
        mask_min_value = torch.finfo(hidden_states.dtype).min
        inverted_mask = 1.0 - attention_mask
        attention_mask = inverted_mask.masked_fill(inverted_mask.to(torch.bool), mask_min_value)

        # padding to block_size
        if seq_len % self.config.block_size != 0:
            pad_len = self.config.block_size - seq_len % self.config.block_size
            hidden_states = F.pad(hidden_states, pad=(0, 0, 0, pad_len), value=0)
            attention_mask = F.pad(attention_mask, pad=(0, pad_len), value=mask_min_value)

        # Global tokens
        global_hidden_states = self.embed_global(
            torch.arange(self.config.num_global_tokens, device=hidden_states.device)[None].expand(batch_size, -1)
        )

        for encoder_layer in self.layers:
            layer_outputs = encoder_layer(hidden_states, global_hidden_states, attention_mask, output_attentions=False)
            hidden_states = layer_outputs[0]
            global_hidden_states = layer_outputs[1]

        # Undo padding-to-block-size
        hidden_states = hidden_states[:, :seq_len]
        hidden_states = self.layer_norm(hidden_states)
        return {"last_hidden_state": hidden_states}


class PegasusXSmallBlocksConfig(PegasusXConfig):
    """The same construct at block_size 4 and 2 global tokens: the 8 ids make two blocks, the staggered layer's
    blocks straddle them (a trace of 0.49 MB rather than 8.4 MB)."""
    num_global_tokens, block_size = 2, 4


CASES = {"pegasus_x": (PegasusXEncoder, PegasusXConfig), "pegasus_x_b4": (PegasusXEncoder, PegasusXSmallBlocksConfig)}
