"""A faithful torch 1.13 reimplementation of DeepSeek-V4's manifold-constrained hyper-connections (a case of
capture_reimpl.py; its docstring says how a case is built and captured). Sizes: hidden 32, 4 streams, 12 ids.

deepseek_v4_hc follows huggingface/transformers src/transformers/models/deepseek_v4/modeling_deepseek_v4.py at
commit 019760818965c71b0a4d38e95820ee0b6cee4240 for DeepseekV4HyperConnection, DeepseekV4HyperHead,
DeepseekV4UnweightedRMSNorm, DeepseekV4RMSNorm, DeepseekV4MLP, DeepseekV4DecoderLayer's stream arithmetic and
DeepseekV4Model's expand / hc_head / norm; hc_sinkhorn_iters 3 (the default is 20: at 39 steps the f32 matrix has
converged and the count does not show), hc_eps 1e-6. What it shows: the residual widened into 4 streams
[B, S, 4, D] (the embeddings expanded); before each sub-layer a module flattens and weightless-RMS-norms the
streams, projects them by fn [24, 4·D] and reads pre = σ(w·s₀ + b) + ε, post = 2σ(w·s₁ + b), comb = Sinkhorn
(3 iterations: columns, then rows and columns twice, each sum + ε) of softmax(w·s₂ + b) + ε, and returns (post,
comb, Σ_j pre_j·x_j); the block writes post ⊗ output + combᵀ·streams; a hyper head collapses the streams before
the final norm. The sub-layers themselves are NOT V4's (its compressed shared-KV attention with sinks and its
hash-routed experts): a llama attention (2 heads over 1 kv head, half RoPE, causal) and V4's shared-expert MLP
(SiLU gated, gate ≤ 10, up within ±10), so that the fixture shows the hyper-connections alone.
"""
import torch
from torch import nn
from torch.nn import functional as F

from reimpl_lm6 import causal_mask, eager_attention, rotate_half


class DeepseekV4HCConfig:
    hidden_size = 32
    num_attention_heads = 2
    num_key_value_heads = 1
    head_dim = 16
    intermediate_size = 48
    num_hidden_layers = 2
    vocab_size = 64
    rms_norm_eps = 1e-6
    rope_theta = 10000.0
    swiglu_limit = 10.0
    hc_mult = 4
    hc_sinkhorn_iters = 3
    hc_eps = 1e-6
    seq_len = 12


class DeepseekV4RMSNorm(nn.Module):
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


class DeepseekV4UnweightedRMSNorm(nn.Module):
    def __init__(self, eps=1.0e-6):
        super().__init__()
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(x.float().square().mean(-1, keepdim=True) + self.eps).to(x.dtype)


class DeepseekV4HyperConnection(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.hc_mult = c.hc_mult
        self.hc_sinkhorn_iters = c.hc_sinkhorn_iters
        self.hc_eps = c.hc_eps
        self.input_norm = DeepseekV4UnweightedRMSNorm(eps=c.rms_norm_eps)
        size = (2 + self.hc_mult) * self.hc_mult
        self.fn = nn.Parameter(torch.empty(size, self.hc_mult * c.hidden_size))
        self.base = nn.Parameter(torch.empty(size))
        self.scale = nn.Parameter(torch.empty(3))

    def forward(self, hidden_streams):
        batch_size, seq_len = hidden_streams.shape[:2]
        hc = self.hc_mult
        flattened = hidden_streams.view(batch_size, seq_len, -1).float()
        flattened = self.input_norm(flattened)
        flattened = F.linear(flattened, self.fn.float())
        pre_w, post_w, comb_w = flattened.split([hc, hc, hc * hc], dim=-1)
        pre_b, post_b, comb_b = self.base.split([hc, hc, hc * hc])
        pre_scale, post_scale, comb_scale = self.scale.unbind(0)
        comb_w = comb_w.view(*comb_w.shape[:-1], hc, hc)
        comb_b = comb_b.view(hc, hc)
        pre = torch.sigmoid(pre_w * pre_scale + pre_b) + self.hc_eps
        post = 2 * torch.sigmoid(post_w * post_scale + post_b)
        comb = torch.softmax(comb_w * comb_scale + comb_b, dim=-1) + self.hc_eps
        comb = comb / (comb.sum(dim=-2, keepdim=True) + self.hc_eps)
        for _ in range(self.hc_sinkhorn_iters - 1):
            comb = comb / (comb.sum(dim=-1, keepdim=True) + self.hc_eps)
            comb = comb / (comb.sum(dim=-2, keepdim=True) + self.hc_eps)
        collapsed = (pre.unsqueeze(-1) * hidden_streams).sum(dim=2).to(hidden_streams.dtype)
        return post, comb, collapsed


class DeepseekV4HyperHead(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.hc_mult = c.hc_mult
        self.input_norm = DeepseekV4UnweightedRMSNorm(eps=c.rms_norm_eps)
        self.eps = c.hc_eps
        self.hc_fn = nn.Parameter(torch.empty(self.hc_mult, self.hc_mult * c.hidden_size))
        self.hc_base = nn.Parameter(torch.empty(self.hc_mult))
        self.hc_scale = nn.Parameter(torch.empty(1))

    def forward(self, x):
        flat = self.input_norm(x.flatten(2).float())
        mixes = F.linear(flat, self.hc_fn.float())
        pre = torch.sigmoid(mixes * self.hc_scale.float() + self.hc_base.float()) + self.eps
        return (pre.unsqueeze(-1) * x).sum(dim=2).to(x.dtype)


class DeepseekV4MLP(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.gate_proj = nn.Linear(c.hidden_size, c.intermediate_size, bias=False)
        self.up_proj = nn.Linear(c.hidden_size, c.intermediate_size, bias=False)
        self.down_proj = nn.Linear(c.intermediate_size, c.hidden_size, bias=False)
        self.act_fn = nn.SiLU()
        self.limit = c.swiglu_limit

    def forward(self, x):
        gate = self.gate_proj(x).clamp(max=self.limit)
        up = self.up_proj(x).clamp(min=-self.limit, max=self.limit)
        return self.down_proj(self.act_fn(gate) * up)


class RotaryEmbedding(nn.Module):
    def __init__(self, c):
        super().__init__()
        inv_freq = 1.0 / (c.rope_theta ** (torch.arange(0, c.head_dim, 2, dtype=torch.int64).float() / c.head_dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    @torch.no_grad()
    def forward(self, x, position_ids):
        inv = self.inv_freq[None, :, None].float().expand(position_ids.shape[0], -1, 1)
        freqs = (inv @ position_ids[:, None, :].float()).transpose(1, 2)
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(x.dtype), emb.sin().to(x.dtype)


class Attention(nn.Module):
    """A llama attention (not V4's): q/k/v/o without bias, half RoPE, causal, 2 heads over 1 kv head."""

    def __init__(self, c):
        super().__init__()
        self.head_dim, self.groups = c.head_dim, c.num_attention_heads // c.num_key_value_heads
        self.scaling = c.head_dim ** -0.5
        self.q_proj = nn.Linear(c.hidden_size, c.num_attention_heads * c.head_dim, bias=False)
        self.k_proj = nn.Linear(c.hidden_size, c.num_key_value_heads * c.head_dim, bias=False)
        self.v_proj = nn.Linear(c.hidden_size, c.num_key_value_heads * c.head_dim, bias=False)
        self.o_proj = nn.Linear(c.num_attention_heads * c.head_dim, c.hidden_size, bias=False)

    def forward(self, hidden_states, position_embeddings, attention_mask):
        b, s, _ = hidden_states.shape
        shape = (b, s, -1, self.head_dim)
        q = self.q_proj(hidden_states).view(shape).transpose(1, 2)
        k = self.k_proj(hidden_states).view(shape).transpose(1, 2)
        v = self.v_proj(hidden_states).view(shape).transpose(1, 2)
        cos, sin = position_embeddings
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        out = eager_attention(q, k, v, self.groups, self.scaling, attention_mask).reshape(b, s, -1)
        return self.o_proj(out), None


class DeepseekV4DecoderLayer(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.self_attn = Attention(c)
        self.mlp = DeepseekV4MLP(c)
        self.input_layernorm = DeepseekV4RMSNorm(c.hidden_size, eps=c.rms_norm_eps)
        self.post_attention_layernorm = DeepseekV4RMSNorm(c.hidden_size, eps=c.rms_norm_eps)
        self.attn_hc = DeepseekV4HyperConnection(c)
        self.ffn_hc = DeepseekV4HyperConnection(c)

    def forward(self, hidden_states, position_embeddings=None, attention_mask=None):
        dtype = hidden_states.dtype
        post, comb, collapsed = self.attn_hc(hidden_states)
        attn_output, _ = self.self_attn(self.input_layernorm(collapsed), position_embeddings, attention_mask)
        hidden_states = post.to(dtype).unsqueeze(-1) * attn_output.unsqueeze(-2) + torch.matmul(
            comb.to(dtype).transpose(-1, -2), hidden_states)
        post, comb, collapsed = self.ffn_hc(hidden_states)
        mlp_output = self.mlp(self.post_attention_layernorm(collapsed))
        return post.to(dtype).unsqueeze(-1) * mlp_output.unsqueeze(-2) + torch.matmul(
            comb.to(dtype).transpose(-1, -2), hidden_states)


class DeepseekV4HCModel(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        self.embed_tokens = nn.Embedding(c.vocab_size, c.hidden_size)
        self.layers = nn.ModuleList([DeepseekV4DecoderLayer(c) for _ in range(c.num_hidden_layers)])
        self.norm = DeepseekV4RMSNorm(c.hidden_size, eps=c.rms_norm_eps)
        self.rotary_emb = RotaryEmbedding(c)
        self.hc_head = DeepseekV4HyperHead(c)

    def forward(self, input_ids):
        inputs_embeds = self.embed_tokens(input_ids)
        position_ids = torch.arange(inputs_embeds.shape[1]).unsqueeze(0)
        mask = causal_mask(inputs_embeds.shape[1], inputs_embeds.dtype)
        hidden_states = inputs_embeds.unsqueeze(2).expand(-1, -1, self.c.hc_mult, -1).contiguous()
        position_embeddings = self.rotary_emb(inputs_embeds, position_ids)
        for layer in self.layers:
            hidden_states = layer(hidden_states, position_embeddings=position_embeddings, attention_mask=mask)
        return self.norm(self.hc_head(hidden_states))


CASES = {"deepseek_v4_hc": (DeepseekV4HCModel, DeepseekV4HCConfig)}
