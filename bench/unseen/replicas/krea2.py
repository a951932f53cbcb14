"""Krea 2 DiT, reimplemented for torch 1.13 (no diffusers here), captured small in f32 on CPU.

Follows huggingface/diffusers src/diffusers/models/transformers/transformer_krea2.py at
447e6f419e87bc819d46c39a539d31ba850e3814 (Krea2Transformer2DModel, Krea2TransformerBlock, Krea2Attention with
Krea2AttnProcessor's __call__ as its forward, Krea2RMSNorm, Krea2SwiGLU, Krea2TextFusion, Krea2TextFusionBlock,
Krea2TimestepEmbedding, Krea2TextProjection, Krea2FinalLayer, Krea2RotaryPosEmbed) with the parts it imports:
embeddings.py (get_1d_rotary_pos_embed with use_real and repeat_interleave_real, f64 frequencies on the CPU;
apply_rotary_emb with use_real and sequence_dim 1): the same module tree, parameter names and shapes, and call
boundaries; the arithmetic line for line. Stand-ins for what torch 1.13 lacks: F.rms_norm (x·rsqrt(mean x² +
eps)·weight) and dispatch_attention_fn (SDPA's math on [B, L, H, D], default scale, bool mask, enable_gqa as
repeat_interleave of the kv heads).

The constructs it shows: the caption given as a stack of text-encoder layers per token [B, S, layers, D]; a text
fusion stage whose first blocks attend across the layer axis for every token (the batch is B·S, the sequence the
layers), a bias-free Linear(layers, 1) collapsing that axis from a permuted [B, S, D, layers], then refiner blocks
over the tokens under the caption's key mask; zero-centred RMSNorms (γ stored as γ − 1: the multiplier 1 + weight)
everywhere, in the per-head q/k norms too; gated GQA attention (to_out(attention · σ(to_gate(x)))); one shared
modulation vector time_mod_proj(gelu_tanh(temb)) with a per-block additive [6, D] table, chunk order (prescale,
preshift, pregate, postscale, postshift, postgate); a single stream [text, image] under the caption's key mask joined
with ones; RoPE from ids (text rows all zero, image rows (0, h, w)), θ 1000; a final (scale, shift) modulation from
the un-activated temb; the timestep σ in [0, 1] multiplied by 1000 inside the model, sinusoid [cos, sin].

Pipeline as Krea2Pipeline (pipeline_krea2.py at 1b26554f82a5e34906135d57bb5bf2c8cb55a6fd) calls it: latents packed
(B, C, H, W) -> (B, (H/2)(W/2), 4C), timestep t / 1000 with t = σ·1000 (so σ), position_ids from
prepare_position_ids, encoder_attention_mask the prompt's bool mask (the template pads in the middle: [prompt | PAD
| suffix]), velocity the output as is, no guidance.

usage: /usr/bin/python3 bench/unseen/replicas/krea2.py OUTDIR [--small]
"""
import math
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

from run import capture, sdpa


def rms_norm(x, normalized_shape, weight, eps):
    """torch 2's F.rms_norm over the last axis."""
    xf = x.float()  # aten's composite: f32 statistics and x̂, cast back, then ·weight
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).type_as(x) * weight


def get_1d_rotary_pos_embed(dim, pos, theta=10000.0, repeat_interleave_real=True, use_real=True,
                            freqs_dtype=torch.float32):
    assert dim % 2 == 0 and use_real and repeat_interleave_real
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=freqs_dtype, device=pos.device)[: (dim // 2)] / dim))
    freqs = torch.outer(pos, freqs)
    freqs_cos = freqs.cos().repeat_interleave(2, dim=1).float()
    freqs_sin = freqs.sin().repeat_interleave(2, dim=1).float()
    return freqs_cos, freqs_sin


def apply_rotary_emb(x, freqs_cis, sequence_dim=2):
    """use_real=True, use_real_unbind_dim=-1."""
    cos, sin = freqs_cis
    if sequence_dim == 2:
        cos = cos[None, None, :, :]
        sin = sin[None, None, :, :]
    elif sequence_dim == 1:
        cos = cos[None, :, None, :]
        sin = sin[None, :, None, :]
    cos, sin = cos.to(x.device), sin.to(x.device)
    x_real, x_imag = x.reshape(*x.shape[:-1], -1, 2).unbind(-1)
    x_rotated = torch.stack([-x_imag, x_real], dim=-1).flatten(3)
    return (x.float() * cos + x_rotated.float() * sin).to(x.dtype)


def dispatch_attention_fn(query, key, value, attn_mask=None, enable_gqa=False):
    """SDPA's math on [B, L, H, D] (default scale); GQA as torch's enable_gqa (kv heads repeat-interleaved)."""
    q, k, v = query.transpose(1, 2), key.transpose(1, 2), value.transpose(1, 2)
    if enable_gqa:
        k = k.repeat_interleave(q.shape[1] // k.shape[1], dim=1)
        v = v.repeat_interleave(q.shape[1] // v.shape[1], dim=1)
    return sdpa(q, k, v, mask=attn_mask).transpose(1, 2)


class Krea2RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-5):
        super().__init__()
        self.dim = dim
        self.eps = eps
        self.weight = nn.Parameter(torch.zeros(dim))

    def forward(self, hidden_states):
        dtype = hidden_states.dtype
        hidden_states = rms_norm(hidden_states.float(), (self.dim,), weight=self.weight + 1.0, eps=self.eps)
        return hidden_states.to(dtype)


class Krea2Attention(nn.Module):
    """With Krea2AttnProcessor's __call__ as its forward."""

    def __init__(self, hidden_size, num_heads, num_kv_heads=None, eps=1e-5):
        super().__init__()
        self.hidden_size = hidden_size
        self.num_heads = num_heads
        self.num_kv_heads = num_kv_heads if num_kv_heads is not None else num_heads
        self.head_dim = hidden_size // num_heads
        self.use_bias = False
        self.to_q = nn.Linear(hidden_size, self.head_dim * self.num_heads, bias=False)
        self.to_k = nn.Linear(hidden_size, self.head_dim * self.num_kv_heads, bias=False)
        self.to_v = nn.Linear(hidden_size, self.head_dim * self.num_kv_heads, bias=False)
        self.to_gate = nn.Linear(hidden_size, hidden_size, bias=False)
        self.norm_q = Krea2RMSNorm(self.head_dim, eps=eps)
        self.norm_k = Krea2RMSNorm(self.head_dim, eps=eps)
        self.to_out = nn.ModuleList([nn.Linear(hidden_size, hidden_size, bias=False), nn.Dropout(0.0)])

    def forward(self, hidden_states, attention_mask=None, image_rotary_emb=None):
        attn = self
        query = attn.to_q(hidden_states).unflatten(-1, (attn.num_heads, attn.head_dim))
        key = attn.to_k(hidden_states).unflatten(-1, (attn.num_kv_heads, attn.head_dim))
        value = attn.to_v(hidden_states).unflatten(-1, (attn.num_kv_heads, attn.head_dim))
        gate = attn.to_gate(hidden_states)
        query = attn.norm_q(query)
        key = attn.norm_k(key)
        if image_rotary_emb is not None:
            query = apply_rotary_emb(query, image_rotary_emb, sequence_dim=1)
            key = apply_rotary_emb(key, image_rotary_emb, sequence_dim=1)
        hidden_states = dispatch_attention_fn(query, key, value, attn_mask=attention_mask,
                                              enable_gqa=attn.num_heads != attn.num_kv_heads)
        hidden_states = hidden_states.flatten(2, 3)
        hidden_states = hidden_states * torch.sigmoid(gate)
        return attn.to_out[0](hidden_states)


class Krea2SwiGLU(nn.Module):
    def __init__(self, dim, hidden_dim):
        super().__init__()
        self.gate = nn.Linear(dim, hidden_dim, bias=False)
        self.up = nn.Linear(dim, hidden_dim, bias=False)
        self.down = nn.Linear(hidden_dim, dim, bias=False)

    def forward(self, hidden_states):
        return self.down(F.silu(self.gate(hidden_states)) * self.up(hidden_states))


class Krea2TextFusionBlock(nn.Module):
    def __init__(self, dim, num_heads, num_kv_heads, intermediate_size, eps):
        super().__init__()
        self.norm1 = Krea2RMSNorm(dim, eps=eps)
        self.norm2 = Krea2RMSNorm(dim, eps=eps)
        self.attn = Krea2Attention(dim, num_heads, num_kv_heads, eps=eps)
        self.ff = Krea2SwiGLU(dim, intermediate_size)

    def forward(self, hidden_states, attention_mask=None):
        hidden_states = hidden_states + self.attn(self.norm1(hidden_states), attention_mask=attention_mask)
        hidden_states = hidden_states + self.ff(self.norm2(hidden_states))
        return hidden_states


class Krea2TextFusion(nn.Module):
    def __init__(self, num_text_layers, dim, num_heads, num_kv_heads, intermediate_size, num_layerwise_blocks,
                 num_refiner_blocks, eps):
        super().__init__()
        self.layerwise_blocks = nn.ModuleList([
            Krea2TextFusionBlock(dim, num_heads, num_kv_heads, intermediate_size, eps)
            for _ in range(num_layerwise_blocks)])
        self.projector = nn.Linear(num_text_layers, 1, bias=False)
        self.refiner_blocks = nn.ModuleList([
            Krea2TextFusionBlock(dim, num_heads, num_kv_heads, intermediate_size, eps)
            for _ in range(num_refiner_blocks)])

    def forward(self, encoder_hidden_states, attention_mask=None):
        batch_size, seq_len, num_text_layers, dim = encoder_hidden_states.shape
        hidden_states = encoder_hidden_states.reshape(batch_size * seq_len, num_text_layers, dim)
        for block in self.layerwise_blocks:
            hidden_states = block(hidden_states.contiguous())
        hidden_states = hidden_states.reshape(batch_size, seq_len, num_text_layers, dim).permute(0, 1, 3, 2)
        hidden_states = self.projector(hidden_states).squeeze(-1)
        for block in self.refiner_blocks:
            hidden_states = block(hidden_states, attention_mask=attention_mask)
        return hidden_states


class Krea2TransformerBlock(nn.Module):
    def __init__(self, hidden_size, intermediate_size, num_heads, num_kv_heads, norm_eps):
        super().__init__()
        self.scale_shift_table = nn.Parameter(torch.zeros(6, hidden_size))
        self.norm1 = Krea2RMSNorm(hidden_size, eps=norm_eps)
        self.norm2 = Krea2RMSNorm(hidden_size, eps=norm_eps)
        self.attn = Krea2Attention(hidden_size, num_heads, num_kv_heads, eps=norm_eps)
        self.ff = Krea2SwiGLU(hidden_size, intermediate_size)

    def forward(self, hidden_states, temb, image_rotary_emb, attention_mask=None):
        modulation = temb.unflatten(-1, (6, -1)) + self.scale_shift_table
        prescale, preshift, pregate, postscale, postshift, postgate = modulation.unbind(-2)
        attn_out = self.attn((1.0 + prescale) * self.norm1(hidden_states) + preshift,
                             attention_mask=attention_mask, image_rotary_emb=image_rotary_emb)
        hidden_states = hidden_states + pregate * attn_out
        ff_out = self.ff((1.0 + postscale) * self.norm2(hidden_states) + postshift)
        hidden_states = hidden_states + postgate * ff_out
        return hidden_states


class Krea2TimestepEmbedding(nn.Module):
    def __init__(self, embed_dim, hidden_size):
        super().__init__()
        self.embed_dim = embed_dim
        self.linear_1 = nn.Linear(embed_dim, hidden_size, bias=True)
        self.linear_2 = nn.Linear(hidden_size, hidden_size, bias=True)

    def forward(self, timestep, dtype):
        half = self.embed_dim // 2
        freqs = torch.exp(-math.log(1e4) * torch.arange(half, dtype=torch.float32, device=timestep.device) / half)
        args = (timestep.float() * 1e3)[:, None, None] * freqs
        emb = torch.cat([torch.cos(args), torch.sin(args)], dim=-1).to(dtype)
        return self.linear_2(F.gelu(self.linear_1(emb), approximate="tanh"))


class Krea2TextProjection(nn.Module):
    def __init__(self, text_dim, hidden_size, eps):
        super().__init__()
        self.norm = Krea2RMSNorm(text_dim, eps=eps)
        self.linear_1 = nn.Linear(text_dim, hidden_size, bias=True)
        self.linear_2 = nn.Linear(hidden_size, hidden_size, bias=True)

    def forward(self, hidden_states):
        hidden_states = self.linear_1(self.norm(hidden_states))
        return self.linear_2(F.gelu(hidden_states, approximate="tanh"))


class Krea2FinalLayer(nn.Module):
    def __init__(self, hidden_size, out_channels, eps):
        super().__init__()
        self.scale_shift_table = nn.Parameter(torch.zeros(2, hidden_size))
        self.norm = Krea2RMSNorm(hidden_size, eps=eps)
        self.linear = nn.Linear(hidden_size, out_channels, bias=True)

    def forward(self, hidden_states, temb):
        modulation = temb + self.scale_shift_table
        scale, shift = modulation.chunk(2, dim=1)
        hidden_states = (1.0 + scale) * self.norm(hidden_states) + shift
        return self.linear(hidden_states)


class Krea2RotaryPosEmbed(nn.Module):
    def __init__(self, theta, axes_dim):
        super().__init__()
        self.theta = theta
        self.axes_dim = axes_dim

    def forward(self, ids):
        n_axes = ids.shape[-1]
        cos_out = []
        sin_out = []
        pos = ids.float()
        freqs_dtype = torch.float64  # maybe_adjust_dtype_for_device on the CPU
        for i in range(n_axes):
            cos, sin = get_1d_rotary_pos_embed(self.axes_dim[i], pos[:, i], theta=self.theta,
                                               repeat_interleave_real=True, use_real=True, freqs_dtype=freqs_dtype)
            cos_out.append(cos)
            sin_out.append(sin)
        freqs_cos = torch.cat(cos_out, dim=-1).to(ids.device)
        freqs_sin = torch.cat(sin_out, dim=-1).to(ids.device)
        return freqs_cos, freqs_sin


class Krea2Transformer2DModel(nn.Module):
    _keep_in_fp32_modules = ["norm", "norm1", "norm2", "norm_q", "norm_k"]

    def __init__(self, in_channels=64, num_layers=28, attention_head_dim=128, num_attention_heads=48,
                 num_key_value_heads=12, intermediate_size=16384, timestep_embed_dim=256, text_hidden_dim=2560,
                 num_text_layers=12, text_num_attention_heads=20, text_num_key_value_heads=20,
                 text_intermediate_size=6912, num_layerwise_text_blocks=2, num_refiner_text_blocks=2,
                 axes_dims_rope=(32, 48, 48), rope_theta=1000.0, norm_eps=1e-5):
        super().__init__()
        hidden_size = attention_head_dim * num_attention_heads
        if sum(axes_dims_rope) != attention_head_dim:
            raise ValueError("sum(axes_dims_rope) must equal attention_head_dim")
        self.in_channels = in_channels
        self.out_channels = in_channels
        self.hidden_size = hidden_size
        self.img_in = nn.Linear(in_channels, hidden_size, bias=True)
        self.time_embed = Krea2TimestepEmbedding(timestep_embed_dim, hidden_size)
        self.time_mod_proj = nn.Linear(hidden_size, 6 * hidden_size, bias=True)
        self.text_fusion = Krea2TextFusion(num_text_layers=num_text_layers, dim=text_hidden_dim,
                                           num_heads=text_num_attention_heads,
                                           num_kv_heads=text_num_key_value_heads,
                                           intermediate_size=text_intermediate_size,
                                           num_layerwise_blocks=num_layerwise_text_blocks,
                                           num_refiner_blocks=num_refiner_text_blocks, eps=norm_eps)
        self.txt_in = Krea2TextProjection(text_hidden_dim, hidden_size, eps=norm_eps)
        self.rotary_emb = Krea2RotaryPosEmbed(theta=rope_theta, axes_dim=list(axes_dims_rope))
        self.transformer_blocks = nn.ModuleList([
            Krea2TransformerBlock(hidden_size=hidden_size, intermediate_size=intermediate_size,
                                  num_heads=num_attention_heads, num_kv_heads=num_key_value_heads,
                                  norm_eps=norm_eps)
            for _ in range(num_layers)])
        self.final_layer = Krea2FinalLayer(hidden_size, out_channels=in_channels, eps=norm_eps)

    def forward(self, hidden_states, encoder_hidden_states, timestep, position_ids, encoder_attention_mask=None,
                attention_kwargs=None, return_dict=True):
        if position_ids.ndim != 2 or position_ids.shape[-1] != 3:
            raise ValueError("position_ids must have shape (sequence_length, 3)")
        batch_size, image_seq_len, _ = hidden_states.shape
        text_seq_len = encoder_hidden_states.shape[1]

        temb = self.time_embed(timestep, dtype=hidden_states.dtype)
        temb_mod = self.time_mod_proj(F.gelu(temb, approximate="tanh"))

        text_attention_mask = None
        attention_mask = None
        if encoder_attention_mask is not None:
            text_attention_mask = encoder_attention_mask[:, None, None, :]
            image_mask = encoder_attention_mask.new_ones((batch_size, image_seq_len))
            attention_mask = torch.cat([encoder_attention_mask, image_mask], dim=1)[:, None, None, :]

        encoder_hidden_states = self.text_fusion(encoder_hidden_states, attention_mask=text_attention_mask)
        encoder_hidden_states = self.txt_in(encoder_hidden_states)

        hidden_states = self.img_in(hidden_states)
        hidden_states = torch.cat([encoder_hidden_states, hidden_states], dim=1)

        image_rotary_emb = self.rotary_emb(position_ids)

        for block in self.transformer_blocks:
            hidden_states = block(hidden_states, temb_mod, image_rotary_emb, attention_mask)

        hidden_states = hidden_states[:, text_seq_len:]
        output = self.final_layer(hidden_states, temb)
        return (output,)


SMALL = "--small" in sys.argv  # one block: the fixtures/unseen trace


def build():
    # 2 query heads of 16 over 1 kv head (RoPE t/h/w 4/6/6), 2 blocks; text 16 wide from 3 tapped layers, 2 heads,
    # one layerwise and one refiner block; sinusoid 16 wide.
    return Krea2Transformer2DModel(in_channels=16, num_layers=1 if SMALL else 2, attention_head_dim=16,
                                   num_attention_heads=2,
                                   num_key_value_heads=1, intermediate_size=64, timestep_embed_dim=16,
                                   text_hidden_dim=16, num_text_layers=3, text_num_attention_heads=2,
                                   text_num_key_value_heads=2, text_intermediate_size=32,
                                   num_layerwise_text_blocks=1, num_refiner_text_blocks=1, axes_dims_rope=(4, 6, 6),
                                   rope_theta=1000.0, norm_eps=1e-5)


def prepare_position_ids(text_seq_len, grid_height, grid_width, device=None):
    text_ids = torch.zeros(text_seq_len, 3, device=device)
    image_ids = torch.zeros(grid_height, grid_width, 3, device=device)
    image_ids[..., 1] = torch.arange(grid_height, device=device)[:, None]
    image_ids[..., 2] = torch.arange(grid_width, device=device)[None, :]
    image_ids = image_ids.reshape(grid_height * grid_width, 3)
    return torch.cat([text_ids, image_ids], dim=0)


def inputs(g):
    latents = torch.randn((1, 4, 4, 8), generator=g)
    b, c, h, w = latents.shape
    p = 2
    packed = latents.view(b, c, h // p, p, w // p, p).permute(0, 2, 4, 1, 3, 5)
    packed = packed.reshape(b, (h // p) * (w // p), c * p * p)
    # [prompt (3) | PAD (2) | suffix (3)]: the template pads in the middle.
    mask = torch.tensor([[True, True, True, False, False, True, True, True]])
    return {"encoder_hidden_states": torch.randn((1, 8, 3, 16), generator=g),
            "encoder_attention_mask": mask,
            "position_ids": prepare_position_ids(8, h // p, w // p),
            "noise": packed}


def call(model, x, sigma, c):
    t = (torch.tensor(sigma * 1000, dtype=torch.float32) / 1000).expand(x.shape[0]).to(x.dtype)
    return model(hidden_states=x, encoder_hidden_states=c["encoder_hidden_states"], timestep=t,
                 position_ids=c["position_ids"], encoder_attention_mask=c["encoder_attention_mask"],
                 return_dict=False)[0]


PRODUCER = dict(
    library_source="replica of huggingface/diffusers transformer_krea2.py@447e6f419e87 and the parts it imports "
                   "(torch 1.13)",
    timestep="sigma (t/1000 with t = sigma*1000, float32; the model multiplies by 1000 again)",
    velocity="model output as is (flow prediction), not negated",
    note="Krea 2 single-stream DiT, 2 blocks: the caption a stack of 3 text-encoder layers per token fused by a "
         "block attending across the layer axis (batch B·S), a bias-free Linear(layers, 1) over the permuted "
         "[B, S, D, layers], a refiner block over the tokens under the caption key mask; zero-centred RMSNorms "
         "(1 + weight) incl. per-head q/k; gated GQA attention (2 q heads over 1 kv head, to_out(attn·σ(gate)));"
         " shared modulation time_mod_proj(gelu_tanh(temb)) + a per-block [6, D] table (prescale, preshift, pregate,"
         " postscale, postshift, postgate); [text, image] rows under the caption mask joined with ones; RoPE from "
         "ids (text 0, image (0, h, w)), θ 1000, interleaved; final (scale, shift) from temb + table; timestep σ·1000 "
         "inside, [cos, sin] sinusoid")

if __name__ == "__main__":
    capture("krea2", build, inputs, call, sys.argv[1], PRODUCER)
