"""A faithful torch 1.13 reimplementation of DeepSeek-V4's attention (a case of capture_reimpl.py; its
docstring says how a case is built and captured). Sizes: hidden 32, 4 heads of 8, 12 ids.

deepseek_v4_attn follows huggingface/transformers src/transformers/models/deepseek_v4/modeling_deepseek_v4.py
at commit 361455895daf94ca66f78cf6792b09af397b4b30 for DeepseekV4Attention (a sliding layer: no compressor),
DeepseekV4GroupedLinear, apply_rotary_pos_emb, rotate_half, DeepseekV4RotaryEmbedding (one angle per pair,
no duplication), DeepseekV4RMSNorm and DeepseekV4UnweightedRMSNorm, in a plain pre-norm decoder (residual
adds, V4's shared-expert MLP) instead of V4's hyper-connections and hash-routed experts, so that the fixture
shows the attention alone. What it shows: q from a low-rank pair (q_a_proj, an RMSNorm, q_b_proj) then an
RMSNorm without weights per head; ONE kv head (kv_proj, an RMSNorm) read as both keys and values, broadcast
to the 4 heads; interleaved RoPE from tables of one angle per pair (cos.repeat_interleave(2)) on q and on the
shared kv, so the values are rotated too; attention sinks (a per-head logit joined to each row, dropped after
the softmax); causal; the output rotated back by the same tables with sin negated; the heads regrouped into
2 groups of 16 and projected by a block-diagonal o_a_proj (weight [2·8, 16], one block per group) then o_b_proj.
"""
import torch
from torch import nn
from torch.nn import functional as F

from reimpl_hc import DeepseekV4MLP, DeepseekV4RMSNorm, DeepseekV4UnweightedRMSNorm
from reimpl_lm6 import causal_mask


class DeepseekV4AttnConfig:
    hidden_size = 32
    num_attention_heads = 4
    head_dim = 8
    q_lora_rank = 16
    o_groups = 2
    o_lora_rank = 8
    intermediate_size = 48
    num_hidden_layers = 2
    vocab_size = 64
    rms_norm_eps = 1e-6
    rope_theta = 10000.0
    swiglu_limit = 10.0
    seq_len = 12


class DeepseekV4GroupedLinear(nn.Linear):
    def __init__(self, in_features_per_group, out_features, n_groups):
        super().__init__(in_features_per_group, out_features, bias=False)
        self.n_groups = n_groups

    def forward(self, x):
        input_shape = x.shape[:-2]
        hidden_dim = x.shape[-1]
        w = self.weight.view(self.n_groups, -1, hidden_dim).transpose(1, 2)
        x = x.reshape(-1, self.n_groups, hidden_dim).transpose(0, 1)
        y = torch.bmm(x, w).transpose(0, 1)
        return y.reshape(*input_shape, self.n_groups, -1)


def rotate_half(x):
    x1 = x[..., 0::2]
    x2 = x[..., 1::2]
    return torch.stack((-x2, x1), dim=-1).flatten(-2)


def apply_rotary_pos_emb(x, cos, sin, unsqueeze_dim=1):
    cos = cos.repeat_interleave(2, dim=-1).unsqueeze(unsqueeze_dim)
    sin = sin.repeat_interleave(2, dim=-1).unsqueeze(unsqueeze_dim)
    rope_dim = cos.shape[-1]
    nope, rope = x[..., :-rope_dim], x[..., -rope_dim:]
    rotated = ((rope.float() * cos) + (rotate_half(rope).float() * sin)).to(x.dtype)
    return torch.cat([nope, rotated], dim=-1)


class DeepseekV4RotaryEmbedding(nn.Module):
    def __init__(self, c):
        super().__init__()
        inv_freq = 1.0 / (c.rope_theta ** (torch.arange(0, c.head_dim, 2, dtype=torch.int64).float() / c.head_dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    @torch.no_grad()
    def forward(self, x, position_ids):
        inv = self.inv_freq[None, :, None].float().expand(position_ids.shape[0], -1, 1)
        freqs = (inv @ position_ids[:, None, :].float()).transpose(1, 2)
        return freqs.cos().to(x.dtype), freqs.sin().to(x.dtype)


class DeepseekV4Attention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        self.num_heads, self.head_dim = c.num_attention_heads, c.head_dim
        self.scaling = c.head_dim ** -0.5
        self.q_a_proj = nn.Linear(c.hidden_size, c.q_lora_rank, bias=False)
        self.q_a_norm = DeepseekV4RMSNorm(c.q_lora_rank, eps=c.rms_norm_eps)
        self.q_b_proj = nn.Linear(c.q_lora_rank, self.num_heads * self.head_dim, bias=False)
        self.q_b_norm = DeepseekV4UnweightedRMSNorm(eps=c.rms_norm_eps)
        self.kv_proj = nn.Linear(c.hidden_size, self.head_dim, bias=False)
        self.kv_norm = DeepseekV4RMSNorm(self.head_dim, eps=c.rms_norm_eps)
        self.o_a_proj = DeepseekV4GroupedLinear(self.num_heads * self.head_dim // c.o_groups, c.o_groups * c.o_lora_rank, c.o_groups)
        self.o_b_proj = nn.Linear(c.o_groups * c.o_lora_rank, c.hidden_size, bias=False)
        self.sinks = nn.Parameter(torch.empty(self.num_heads))

    def forward(self, hidden_states, position_embeddings, attention_mask):
        input_shape = hidden_states.shape[:-1]
        hidden_shape = (*input_shape, -1, self.head_dim)
        cos, sin = position_embeddings
        q_residual = self.q_a_norm(self.q_a_proj(hidden_states))
        q = self.q_b_proj(q_residual).view(*hidden_shape).transpose(1, 2)
        q = self.q_b_norm(q)
        q = apply_rotary_pos_emb(q, cos, sin)
        kv = self.kv_norm(self.kv_proj(hidden_states)).view(*hidden_shape).transpose(1, 2)
        kv = apply_rotary_pos_emb(kv, cos, sin)
        # eager_attention_forward with s_aux (gpt-oss's sinks), k = v = kv repeated to every head
        k = kv.expand(-1, self.num_heads, -1, -1)
        v = k
        w = torch.matmul(q, k.transpose(2, 3)) * self.scaling
        w = w + attention_mask[:, :, :, : k.shape[-2]]
        sinks = self.sinks.reshape(1, -1, 1, 1).expand(q.shape[0], -1, q.shape[-2], -1)
        logits = torch.cat([w, sinks], dim=-1)
        logits = logits - logits.max(dim=-1, keepdim=True).values
        probs = F.softmax(logits, dim=-1, dtype=logits.dtype)[..., :-1]
        attn_output = torch.matmul(probs, v).transpose(1, 2).contiguous()
        attn_output = apply_rotary_pos_emb(attn_output.transpose(1, 2), cos, -sin).transpose(1, 2)
        grouped = attn_output.reshape(*input_shape, self.c.o_groups, -1)
        grouped = self.o_a_proj(grouped).flatten(2)
        return self.o_b_proj(grouped), probs


class DeepseekV4AttnLayer(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.self_attn = DeepseekV4Attention(c)
        self.mlp = DeepseekV4MLP(c)
        self.input_layernorm = DeepseekV4RMSNorm(c.hidden_size, eps=c.rms_norm_eps)
        self.post_attention_layernorm = DeepseekV4RMSNorm(c.hidden_size, eps=c.rms_norm_eps)

    def forward(self, hidden_states, position_embeddings=None, attention_mask=None):
        attn_output, _ = self.self_attn(self.input_layernorm(hidden_states), position_embeddings, attention_mask)
        hidden_states = hidden_states + attn_output
        return hidden_states + self.mlp(self.post_attention_layernorm(hidden_states))


class DeepseekV4AttnModel(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.embed_tokens = nn.Embedding(c.vocab_size, c.hidden_size)
        self.layers = nn.ModuleList([DeepseekV4AttnLayer(c) for _ in range(c.num_hidden_layers)])
        self.norm = DeepseekV4RMSNorm(c.hidden_size, eps=c.rms_norm_eps)
        self.rotary_emb = DeepseekV4RotaryEmbedding(c)

    def forward(self, input_ids):
        inputs_embeds = self.embed_tokens(input_ids)
        position_ids = torch.arange(inputs_embeds.shape[1]).unsqueeze(0)
        mask = causal_mask(inputs_embeds.shape[1], inputs_embeds.dtype)
        position_embeddings = self.rotary_emb(inputs_embeds, position_ids)
        hidden_states = inputs_embeds
        for layer in self.layers:
            hidden_states = layer(hidden_states, position_embeddings=position_embeddings, attention_mask=mask)
        return self.norm(hidden_states)


CASES = {"deepseek_v4_attn": (DeepseekV4AttnModel, DeepseekV4AttnConfig)}
