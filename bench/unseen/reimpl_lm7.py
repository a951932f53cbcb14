"""Faithful torch 1.13 reimplementations of three seventh-batch text encoders (cases of capture_reimpl.py;
its docstring says how a case is built and captured). Sizes: hidden 32, 12 ids.

m2m_100 follows huggingface/transformers src/transformers/models/m2m_100/modeling_m2m_100.py at commit
0173fbbadd0fcaf8d5e3bb2e4f223d897ba1a5ab (M2M100Encoder, eager attention, no mask). What it shows: word rows
×√32 inside M2M100ScaledWordEmbedding; M2M100SinusoidalPositionalEmbedding called with (input_ids,
inputs_embeds): positions made inside from the ids, cumsum(ids ≠ pad)·(ids ≠ pad) + pad (pad 1), rows of
fairseq's [sin | cos] table (row pad zeroed); pre-norm layers, ReLU MLP, a final LayerNorm. The ids hold no pad.

switch_transformers follows src/transformers/models/switch_transformers/modeling_switch_transformers.py at
commit 0173fbbadd0fcaf8d5e3bb2e4f223d897ba1a5ab (SwitchTransformersEncoderModel; T5's layers from
reimpl_text.py): the second block's FF is a SwitchTransformersSparseMLP: the Top1Router (classifier without
bias, softmax in f32, max and argmax, one_hot [T, 1, E], capacity mask of cumsum ≤ 64, which no token
exceeds here) returns (max prob, one-hot, max prob); SwitchTransformersExperts (an nn.ModuleDict of 4
T5DenseActDense, ReLU, no gate) runs each hit expert on its tokens, times the routing weight, index_add_.

muse_glimmer_text follows src/transformers/models/muse_glimmer/modeling_muse_glimmer.py at commit
0173fbbadd0fcaf8d5e3bb2e4f223d897ba1a5ab (MuseGlimmerTextModel, eager attention). What it shows: an
nn.Embedding subclass whose forward looks its table up itself, then a weightless RMS norm child
(embed_norm); q and k RMS-normed without weight by one module called twice, q then × qk_scale_factor 3.87;
half RoPE in layer 0, none in layer 1 (layer_rope_theta 0); attention · σ(gate_proj(x)) before o_proj;
(1 + γ) sandwich norms around attention and MLP (SiLU gated); a plain γ final RMS norm; causal masks.
"""
import math

import torch
from torch import nn
from torch.nn import functional as F

import reimpl_text
from reimpl_encoders import XGLMSinusoidalPositionalEmbedding, XGLMScaledWordEmbedding
from reimpl_lm6 import causal_mask, eager_attention, rotate_half


# ---------------------------------------------------------------- m2m_100
class M2M100Config:
    d_model = 32
    encoder_attention_heads = 2
    encoder_layers = 2
    encoder_ffn_dim = 48
    vocab_size = 64
    max_position_embeddings = 64
    pad_token_id = 1
    seq_len = 12


class M2M100SinusoidalPositionalEmbedding(XGLMSinusoidalPositionalEmbedding):
    @torch.no_grad()
    def forward(self, input_ids=None, inputs_embeds=None, past_key_values_length=0):
        bsz, seq_len = input_ids.size()
        mask = input_ids.ne(self.padding_idx).int()
        incremental = (torch.cumsum(mask, dim=1).type_as(mask) + past_key_values_length) * mask
        position_ids = incremental.long() + self.padding_idx
        max_pos = self.padding_idx + 1 + seq_len + past_key_values_length
        if max_pos > self.weights.size(0):
            self.make_weights(max_pos + self.offset, self.embedding_dim, self.padding_idx)
        return self.weights.index_select(0, position_ids.view(-1)).view(bsz, seq_len, self.weights.shape[-1]).detach()


class M2M100Attention(nn.Module):
    def __init__(self, embed_dim, num_heads):
        super().__init__()
        self.num_heads, self.head_dim = num_heads, embed_dim // num_heads
        self.scaling = self.head_dim ** -0.5
        self.k_proj = nn.Linear(embed_dim, embed_dim)
        self.v_proj = nn.Linear(embed_dim, embed_dim)
        self.q_proj = nn.Linear(embed_dim, embed_dim)
        self.out_proj = nn.Linear(embed_dim, embed_dim)

    def forward(self, hidden_states):
        b, s, _ = hidden_states.shape
        shape = (b, s, -1, self.head_dim)
        q = self.q_proj(hidden_states).view(shape).transpose(1, 2)
        k = self.k_proj(hidden_states).view(shape).transpose(1, 2)
        v = self.v_proj(hidden_states).view(shape).transpose(1, 2)
        w = F.softmax(torch.matmul(q, k.transpose(2, 3)) * self.scaling, dim=-1)
        out = torch.matmul(w, v).transpose(1, 2).reshape(b, s, -1).contiguous()
        return self.out_proj(out), w


class M2M100EncoderLayer(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.self_attn = M2M100Attention(c.d_model, c.encoder_attention_heads)
        self.self_attn_layer_norm = nn.LayerNorm(c.d_model)
        self.fc1 = nn.Linear(c.d_model, c.encoder_ffn_dim)
        self.fc2 = nn.Linear(c.encoder_ffn_dim, c.d_model)
        self.final_layer_norm = nn.LayerNorm(c.d_model)

    def forward(self, hidden_states):
        residual = hidden_states
        hidden_states, _ = self.self_attn(hidden_states=self.self_attn_layer_norm(hidden_states))
        hidden_states = residual + hidden_states
        residual = hidden_states
        hidden_states = self.fc2(F.relu(self.fc1(self.final_layer_norm(hidden_states))))
        return residual + hidden_states


class M2M100Encoder(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.embed_tokens = XGLMScaledWordEmbedding(c.vocab_size, c.d_model, c.pad_token_id, embed_scale=math.sqrt(c.d_model))
        self.embed_positions = M2M100SinusoidalPositionalEmbedding(c.max_position_embeddings, c.d_model, c.pad_token_id)
        self.layers = nn.ModuleList([M2M100EncoderLayer(c) for _ in range(c.encoder_layers)])
        self.layer_norm = nn.LayerNorm(c.d_model)

    def forward(self, input_ids):
        inputs_embeds = self.embed_tokens(input_ids)
        hidden_states = inputs_embeds + self.embed_positions(input_ids, inputs_embeds)
        for layer in self.layers:
            hidden_states = layer(hidden_states)
        return self.layer_norm(hidden_states)


# ---------------------------------------------------------------- switch_transformers
class SwitchConfig(reimpl_text.T5Config):
    num_experts = 4
    expert_capacity = 64


class SwitchTransformersTop1Router(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.num_experts, self.expert_capacity = c.num_experts, c.expert_capacity
        self.classifier = nn.Linear(c.d_model, c.num_experts, bias=False)

    def forward(self, hidden_states):
        input_dtype = hidden_states.dtype
        router_logits = self.classifier(hidden_states.to(torch.float32))
        router_probs = F.softmax(router_logits, dim=-1, dtype=torch.float32).to(input_dtype)
        router_logits, expert_index = torch.max(router_probs, dim=-1, keepdim=True)
        expert_index = F.one_hot(expert_index, num_classes=self.num_experts)
        token_priority = torch.cumsum(expert_index, dim=-2)
        expert_index = expert_index * (token_priority <= self.expert_capacity)
        router_probs = torch.max(router_probs, dim=-1).values.unsqueeze(-1)
        return router_probs, expert_index, router_logits


class SwitchTransformersExperts(nn.ModuleDict):
    def __init__(self, c):
        super().__init__()
        for idx in range(c.num_experts):
            self[f"expert_{idx}"] = reimpl_text.T5DenseActDense(c)

    def forward(self, hidden_states, selected_experts, routing_weights):
        final = torch.zeros_like(hidden_states)
        expert_mask = selected_experts.permute(2, 1, 0)
        expert_hit = torch.greater(expert_mask.sum(dim=(-1, -2)), 0).nonzero()
        for expert_idx in expert_hit:
            idx, top_x = torch.where(expert_mask[expert_idx].squeeze(0))
            current = hidden_states[None, top_x].reshape(-1, hidden_states.shape[-1])
            out = self[f"expert_{expert_idx[0]}"](current) * routing_weights[top_x, idx, None]
            final.index_add_(0, top_x, out.to(hidden_states.dtype))
        return final


class SwitchTransformersSparseMLP(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.router = SwitchTransformersTop1Router(c)
        self.experts = SwitchTransformersExperts(c)

    def forward(self, hidden_states):
        b, s, d = hidden_states.shape
        hidden_states = hidden_states.view(-1, d)
        _, selected_experts, routing_weights = self.router(hidden_states)
        return self.experts(hidden_states, selected_experts, routing_weights).reshape(b, s, d)


class SwitchTransformersLayerFF(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.mlp = SwitchTransformersSparseMLP(c)
        self.layer_norm = reimpl_text.T5LayerNorm(c.d_model, eps=c.layer_norm_epsilon)
        self.dropout = nn.Dropout(c.dropout_rate)

    def forward(self, hidden_states):
        return hidden_states + self.dropout(self.mlp(self.layer_norm(hidden_states)))


def SwitchTransformersEncoderModel(c):
    m = reimpl_text.T5Stack(c)
    m.block[1].layer[-1] = SwitchTransformersLayerFF(c)  # encoder_sparse_step 2: block 1 sparse
    return m


# ---------------------------------------------------------------- muse_glimmer_text
class MuseGlimmerTextConfig:
    hidden_size = 32
    num_attention_heads = 4
    num_key_value_heads = 2
    head_dim = 8
    intermediate_size = 48
    vocab_size = 64
    num_hidden_layers = 2
    rms_norm_eps = 1e-5
    post_norm_eps = 1e-8
    qk_scale_factor = 3.87
    layer_rope_theta = [10000.0, 0]
    seq_len = 12


class MuseGlimmerRMSNorm(nn.Module):
    def __init__(self, dim=None, eps=1e-6, with_scale=True):
        super().__init__()
        self.eps, self.with_scale = eps, with_scale
        if with_scale:
            self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, hidden_states):
        x = hidden_states.float()
        out = x * torch.pow(x.pow(2).mean(-1, keepdim=True) + self.eps, -0.5)
        if self.with_scale:
            out = out * self.weight.float()
        return out.type_as(hidden_states)


class MuseGlimmerTextCenteredRMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.zeros(dim))

    def forward(self, x):
        out = x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + self.eps)
        return (out * (1.0 + self.weight.float())).type_as(x)


class MuseGlimmerTextNormedEmbedding(nn.Embedding):
    def __init__(self, num_embeddings, embedding_dim, norm_eps):
        super().__init__(num_embeddings, embedding_dim)
        self.embed_norm = MuseGlimmerRMSNorm(eps=norm_eps, with_scale=False)

    def forward(self, input_ids):
        return self.embed_norm(super().forward(input_ids))


class MuseGlimmerTextRotaryEmbedding(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.register_buffer("inv_freq", 1.0 / (c.layer_rope_theta[0] ** (torch.arange(0, c.head_dim, 2).float() / c.head_dim)), persistent=False)

    def forward(self, x, position_ids):
        freqs = (self.inv_freq[None, :, None].float() @ position_ids[:, None, :].float()).transpose(1, 2)
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(x.dtype), emb.sin().to(x.dtype)


class MuseGlimmerTextMLP(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.gate_proj = nn.Linear(c.hidden_size, c.intermediate_size, bias=False)
        self.up_proj = nn.Linear(c.hidden_size, c.intermediate_size, bias=False)
        self.down_proj = nn.Linear(c.intermediate_size, c.hidden_size, bias=False)
        self.act_fn = nn.SiLU()

    def forward(self, x):
        return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))


class MuseGlimmerTextAttention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.head_dim, self.groups = c.head_dim, c.num_attention_heads // c.num_key_value_heads
        self.scaling = self.head_dim ** -0.5
        self.q_proj = nn.Linear(c.hidden_size, c.num_attention_heads * c.head_dim, bias=False)
        self.k_proj = nn.Linear(c.hidden_size, c.num_key_value_heads * c.head_dim, bias=False)
        self.v_proj = nn.Linear(c.hidden_size, c.num_key_value_heads * c.head_dim, bias=False)
        self.o_proj = nn.Linear(c.num_attention_heads * c.head_dim, c.hidden_size, bias=False)
        self.gate_proj = nn.Linear(c.hidden_size, c.num_attention_heads * c.head_dim, bias=False)
        self.qk_norm = MuseGlimmerRMSNorm(eps=c.rms_norm_eps, with_scale=False)
        self.qk_scale_factor = c.qk_scale_factor

    def forward(self, hidden_states, position_embeddings=None, position_ids=None):
        b, s, _ = hidden_states.shape
        shape = (b, s, -1, self.head_dim)
        q = self.q_proj(hidden_states).view(shape).transpose(1, 2)
        k = self.k_proj(hidden_states).view(shape).transpose(1, 2)
        v = self.v_proj(hidden_states).view(shape).transpose(1, 2)
        q = self.qk_norm(q) * self.qk_scale_factor
        k = self.qk_norm(k)
        if position_embeddings is not None:
            cos, sin = position_embeddings[0].unsqueeze(1), position_embeddings[1].unsqueeze(1)
            q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        out = eager_attention(q, k, v, self.groups, self.scaling, causal_mask(s, q.dtype)).reshape(b, s, -1).contiguous()
        out = out * torch.sigmoid(self.gate_proj(hidden_states))
        return self.o_proj(out), None


class MuseGlimmerTextDecoderLayer(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.self_attn = MuseGlimmerTextAttention(c)
        self.mlp = MuseGlimmerTextMLP(c)
        self.input_layernorm = MuseGlimmerTextCenteredRMSNorm(c.hidden_size, eps=c.rms_norm_eps)
        self.post_attention_layernorm = MuseGlimmerTextCenteredRMSNorm(c.hidden_size, eps=c.post_norm_eps)
        self.pre_feedforward_layernorm = MuseGlimmerTextCenteredRMSNorm(c.hidden_size, eps=c.rms_norm_eps)
        self.post_feedforward_layernorm = MuseGlimmerTextCenteredRMSNorm(c.hidden_size, eps=c.post_norm_eps)

    def forward(self, hidden_states, position_embeddings=None, position_ids=None):
        residual = hidden_states
        h, _ = self.self_attn(hidden_states=self.input_layernorm(hidden_states), position_embeddings=position_embeddings, position_ids=position_ids)
        hidden_states = residual + self.post_attention_layernorm(h)
        residual = hidden_states
        h = self.mlp(self.pre_feedforward_layernorm(hidden_states))
        return residual + self.post_feedforward_layernorm(h)


class MuseGlimmerTextModel(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        self.embed_tokens = MuseGlimmerTextNormedEmbedding(c.vocab_size, c.hidden_size, c.rms_norm_eps)
        self.layers = nn.ModuleList([MuseGlimmerTextDecoderLayer(c) for _ in range(c.num_hidden_layers)])
        self.norm = MuseGlimmerRMSNorm(c.hidden_size, eps=c.rms_norm_eps)
        self.rotary_emb = MuseGlimmerTextRotaryEmbedding(c)

    def forward(self, input_ids):
        hidden_states = self.embed_tokens(input_ids)
        position_ids = torch.arange(hidden_states.shape[1]).unsqueeze(0)
        position_embeddings = self.rotary_emb(hidden_states, position_ids)
        for i, layer in enumerate(self.layers):
            pe = position_embeddings if self.c.layer_rope_theta[i] else None
            hidden_states = layer(hidden_states, position_embeddings=pe, position_ids=position_ids)
        return self.norm(hidden_states)


CASES = {"m2m_100": (M2M100Encoder, M2M100Config),
         "switch_transformers": (SwitchTransformersEncoderModel, SwitchConfig),
         "muse_glimmer_text": (MuseGlimmerTextModel, MuseGlimmerTextConfig),
         # the same model with the router as drawn: the 12 tokens reach two of the four experts, and the other two
         # are no calls (their weights in no call of the trace), as in the device's capture at transformers' sizes
         "switch_transformers_idle": (SwitchTransformersEncoderModel, SwitchConfig)}


def spread_router(model, gen):
    """The router's rows redrawn as ±u, ±v (two random directions): the argmax then follows the signs of
    u·x and v·x, so these 12 tokens reach every expert (a random draw sends them to one or two, and an
    expert no token reaches is no call: its weights are in no call of the trace)."""
    w = model.block[1].layer[-1].mlp.router.classifier.weight
    with torch.no_grad():
        u, v = torch.randn(3, w.shape[1], generator=gen)[1:]  # the draw whose signs split these tokens four ways
        w.copy_(torch.stack([u, -u, v, -v]))


PREPARE = {"switch_transformers": spread_router}
