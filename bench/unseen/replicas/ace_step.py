"""ACE-Step 1.5 music DiT, reimplemented for torch 1.13 (no diffusers here), captured small in f32 on CPU.

Follows huggingface/diffusers src/diffusers/models/transformers/ace_step_transformer.py at
23f235321a3a5d4ecf080aae74504bf50cf91931 (AceStepTransformer1DModel, AceStepTransformerBlock, AceStepAttention
with AceStepAttnProcessor2_0's __call__ as its forward, AceStepMLP, AceStepTimestepEmbedding, _create_4d_mask,
_ace_step_rotary_freqs) with the parts it imports: embeddings.py (Timesteps, get_1d_rotary_pos_embed with use_real
and repeat_interleave_real=False, apply_rotary_emb with use_real_unbind_dim=-2 and sequence_dim 1),
normalization.py (RMSNorm): the same module tree, parameter names and shapes, and call boundaries; the arithmetic
line for line. Stand-ins for what torch 1.13 lacks: dispatch_attention_fn (SDPA's math on [B, L, H, D], the given
scale, the additive mask added in the scores' dtype, enable_gqa as repeat_interleave of the kv heads); in the bf16
run the ConvTranspose1d computed in f32 and rounded once (torch 1.13's CPU bf16 kernel fails).

The constructs it shows: audio latents [B, T, C] joined after a context [B, T, C'] along the channels, zero-padded
along T to a multiple of the patch, then a Conv1d(kernel = stride = patch) patchify and a ConvTranspose1d unpatchify
whose rows are cut back to T; two timestep embedders (t and t − r, here r = t so the second sees zeros) whose
embeddings and [B, 6, D] projections are summed; a per-block [1, 6, D] table plus that projection, chunk order (shift,
scale, gate, c_shift, c_scale, c_gate); RMSNorm pre-norms (γ) with x·(1 + scale) + shift; GQA self-attention with
per-head RMSNorm q/k and half-layout RoPE (θ 1e6) under a banded sliding-window additive mask (finfo.min outside
|i − j| ≤ window) in the odd layers, none in the even ones; cross-attention (no RoPE, no mask) to a projected
condition with an unmodulated pre-norm and an ungated residual; a SwiGLU MLP; an output (shift, scale) from a
[1, 2, D] table plus the un-projected temb.

Pipeline: AceStepPipeline's text-to-music call with no source audio (context = silence latents beside a chunk mask
of ones), turbo (no guidance): timestep = timestep_r = σ, velocity the output as is.

usage: /usr/bin/python3 bench/unseen/replicas/ace_step.py OUTDIR
"""
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

from run import capture
from parts import Timesteps


class RMSNorm(nn.Module):
    """diffusers.models.normalization.RMSNorm(dim, eps, elementwise_affine=True)."""

    def __init__(self, dim, eps, elementwise_affine=True):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim)) if elementwise_affine else None

    def forward(self, hidden_states):
        input_dtype = hidden_states.dtype
        variance = hidden_states.to(torch.float32).pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.eps)
        if self.weight is not None:
            if self.weight.dtype in [torch.float16, torch.bfloat16]:
                hidden_states = hidden_states.to(self.weight.dtype)
            hidden_states = hidden_states * self.weight
        else:
            hidden_states = hidden_states.to(input_dtype)
        return hidden_states


def get_1d_rotary_pos_embed(dim, pos, theta=10000.0):
    """use_real=True, repeat_interleave_real=False: (cos, sin) = cat([f, f]) each, [len(pos), dim]."""
    assert dim % 2 == 0
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=torch.float32, device=pos.device)[: (dim // 2)] / dim))
    freqs = torch.outer(pos, freqs)  # freqs_dtype's default, float32 (the caller passes none)
    freqs_cos = torch.cat([freqs.cos(), freqs.cos()], dim=-1).float()
    freqs_sin = torch.cat([freqs.sin(), freqs.sin()], dim=-1).float()
    return freqs_cos, freqs_sin


def apply_rotary_emb(x, freqs_cis, sequence_dim=1):
    """use_real=True, use_real_unbind_dim=-2."""
    cos, sin = freqs_cis
    if sequence_dim == 2:
        cos, sin = cos[None, None, :, :], sin[None, None, :, :]
    else:
        cos, sin = cos[None, :, None, :], sin[None, :, None, :]
    x_real, x_imag = x.reshape(*x.shape[:-1], 2, -1).unbind(-2)
    x_rotated = torch.cat([-x_imag, x_real], dim=-1)
    return (x.float() * cos + x_rotated.float() * sin).to(x.dtype)


def dispatch_attention_fn(query, key, value, attn_mask=None, scale=None, enable_gqa=False):
    q, k, v = query.transpose(1, 2), key.transpose(1, 2), value.transpose(1, 2)
    if enable_gqa:
        k = k.repeat_interleave(q.shape[1] // k.shape[1], dim=1)
        v = v.repeat_interleave(q.shape[1] // v.shape[1], dim=1)
    scale = 1.0 / (q.shape[-1] ** 0.5) if scale is None else scale
    s = (q @ k.transpose(-2, -1)) * scale
    if attn_mask is not None:
        s = s + attn_mask.to(s.dtype)
    return (torch.softmax(s, dim=-1) @ v).transpose(1, 2)


def _create_4d_mask(seq_len, dtype, device, attention_mask=None, sliding_window=None, is_sliding_window=False,
                    is_causal=True):
    indices = torch.arange(seq_len, device=device)
    diff = indices.unsqueeze(1) - indices.unsqueeze(0)
    valid_mask = torch.ones((seq_len, seq_len), device=device, dtype=torch.bool)
    if is_causal:
        valid_mask = valid_mask & (diff >= 0)
    if is_sliding_window and sliding_window is not None:
        if is_causal:
            valid_mask = valid_mask & (diff <= sliding_window)
        else:
            valid_mask = valid_mask & (torch.abs(diff) <= sliding_window)
    valid_mask = valid_mask.unsqueeze(0).unsqueeze(0)
    if attention_mask is not None:
        padding_mask_4d = attention_mask.view(attention_mask.shape[0], 1, 1, seq_len).to(torch.bool)
        valid_mask = valid_mask & padding_mask_4d
    min_dtype = torch.finfo(dtype).min
    mask_tensor = torch.full(valid_mask.shape, min_dtype, dtype=dtype, device=device)
    mask_tensor.masked_fill_(valid_mask, 0.0)
    return mask_tensor


def _ace_step_rotary_freqs(seq_len, head_dim, theta, device, dtype):
    positions = torch.arange(seq_len, device=device, dtype=torch.float32)
    cos, sin = get_1d_rotary_pos_embed(head_dim, positions, theta=theta)
    return cos.to(dtype=dtype), sin.to(dtype=dtype)


class ConvTranspose1d(nn.ConvTranspose1d):
    """nn.ConvTranspose1d; in bf16 computed in f32 and rounded once (torch 1.13's CPU bf16 conv_transpose1d
    fails; a GPU's bf16 kernel accumulates in f32 and rounds its result once, as this does)."""

    def forward(self, x):
        if x.dtype != torch.bfloat16:
            return super().forward(x)
        return F.conv_transpose1d(x.float(), self.weight.float(), self.bias.float(), self.stride, self.padding,
                                  self.output_padding, self.groups, self.dilation).to(x.dtype)


class AceStepMLP(nn.Module):
    def __init__(self, hidden_size, intermediate_size):
        super().__init__()
        self.gate_proj = nn.Linear(hidden_size, intermediate_size, bias=False)
        self.up_proj = nn.Linear(hidden_size, intermediate_size, bias=False)
        self.down_proj = nn.Linear(intermediate_size, hidden_size, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class AceStepTimestepEmbedding(nn.Module):
    def __init__(self, in_channels=256, time_embed_dim=2048, scale=1000.0):
        super().__init__()
        self.in_channels = in_channels
        self.scale = scale
        self.time_sinusoid = Timesteps(num_channels=in_channels, flip_sin_to_cos=True, downscale_freq_shift=0)
        self.linear_1 = nn.Linear(in_channels, time_embed_dim, bias=True)
        self.act1 = nn.SiLU()
        self.linear_2 = nn.Linear(time_embed_dim, time_embed_dim, bias=True)
        self.act2 = nn.SiLU()
        self.time_proj = nn.Linear(time_embed_dim, time_embed_dim * 6)

    def forward(self, t):
        t_freq = self.time_sinusoid(t * self.scale)
        temb = self.linear_1(t_freq.to(t.dtype))
        temb = self.act1(temb)
        temb = self.linear_2(temb)
        timestep_proj = self.time_proj(self.act2(temb)).unflatten(1, (6, -1))
        return temb, timestep_proj


class AceStepAttention(nn.Module):
    """With AceStepAttnProcessor2_0's __call__ as its forward."""

    def __init__(self, hidden_size, num_attention_heads, num_key_value_heads, head_dim, bias=False, dropout=0.0,
                 eps=1e-6, is_cross_attention=False):
        super().__init__()
        self.heads = num_attention_heads
        self.kv_heads = num_key_value_heads
        self.head_dim = head_dim
        self.dropout = dropout
        self.scaling = head_dim ** -0.5
        self.is_cross_attention = is_cross_attention
        self.to_q = nn.Linear(hidden_size, num_attention_heads * head_dim, bias=bias)
        self.to_k = nn.Linear(hidden_size, num_key_value_heads * head_dim, bias=bias)
        self.to_v = nn.Linear(hidden_size, num_key_value_heads * head_dim, bias=bias)
        self.to_out = nn.ModuleList([nn.Linear(num_attention_heads * head_dim, hidden_size, bias=bias),
                                     nn.Dropout(0.0)])
        self.norm_q = RMSNorm(head_dim, eps=eps)
        self.norm_k = RMSNorm(head_dim, eps=eps)

    def forward(self, hidden_states, encoder_hidden_states=None, attention_mask=None, image_rotary_emb=None):
        attn = self
        is_cross = attn.is_cross_attention and encoder_hidden_states is not None
        kv_input = encoder_hidden_states if is_cross else hidden_states
        query = attn.to_q(hidden_states).unflatten(-1, (attn.heads, attn.head_dim))
        key = attn.to_k(kv_input).unflatten(-1, (attn.kv_heads, attn.head_dim))
        value = attn.to_v(kv_input).unflatten(-1, (attn.kv_heads, attn.head_dim))
        query = attn.norm_q(query)
        key = attn.norm_k(key)
        if not is_cross and image_rotary_emb is not None:
            query = apply_rotary_emb(query, image_rotary_emb, sequence_dim=1)
            key = apply_rotary_emb(key, image_rotary_emb, sequence_dim=1)
        hidden_states = dispatch_attention_fn(query, key, value, attn_mask=attention_mask, scale=attn.scaling,
                                              enable_gqa=attn.heads != attn.kv_heads)
        hidden_states = hidden_states.flatten(2, 3).to(query.dtype)
        hidden_states = attn.to_out[0](hidden_states)
        hidden_states = attn.to_out[1](hidden_states)
        return hidden_states


class AceStepTransformerBlock(nn.Module):
    def __init__(self, hidden_size, num_attention_heads, num_key_value_heads, head_dim, intermediate_size,
                 attention_bias=False, attention_dropout=0.0, rms_norm_eps=1e-6, sliding_window=None,
                 use_cross_attention=True):
        super().__init__()
        self.self_attn_norm = RMSNorm(hidden_size, eps=rms_norm_eps)
        self.self_attn = AceStepAttention(hidden_size=hidden_size, num_attention_heads=num_attention_heads,
                                          num_key_value_heads=num_key_value_heads, head_dim=head_dim,
                                          bias=attention_bias, dropout=attention_dropout, eps=rms_norm_eps,
                                          is_cross_attention=False)
        self.use_cross_attention = use_cross_attention
        if self.use_cross_attention:
            self.cross_attn_norm = RMSNorm(hidden_size, eps=rms_norm_eps)
            self.cross_attn = AceStepAttention(hidden_size=hidden_size, num_attention_heads=num_attention_heads,
                                               num_key_value_heads=num_key_value_heads, head_dim=head_dim,
                                               bias=attention_bias, dropout=attention_dropout, eps=rms_norm_eps,
                                               is_cross_attention=True)
        self.mlp_norm = RMSNorm(hidden_size, eps=rms_norm_eps)
        self.mlp = AceStepMLP(hidden_size, intermediate_size)
        self.scale_shift_table = nn.Parameter(torch.randn(1, 6, hidden_size) / hidden_size ** 0.5)

    def forward(self, hidden_states, position_embeddings, temb, attention_mask=None, encoder_hidden_states=None,
                encoder_attention_mask=None):
        shift_msa, scale_msa, gate_msa, c_shift_msa, c_scale_msa, c_gate_msa = (
            self.scale_shift_table + temb).chunk(6, dim=1)
        norm_hidden_states = (self.self_attn_norm(hidden_states) * (1 + scale_msa) + shift_msa).type_as(hidden_states)
        attn_output = self.self_attn(hidden_states=norm_hidden_states, image_rotary_emb=position_embeddings,
                                     attention_mask=attention_mask)
        hidden_states = (hidden_states + attn_output * gate_msa).type_as(hidden_states)
        if self.use_cross_attention and encoder_hidden_states is not None:
            norm_hidden_states = self.cross_attn_norm(hidden_states).type_as(hidden_states)
            attn_output = self.cross_attn(hidden_states=norm_hidden_states, encoder_hidden_states=encoder_hidden_states,
                                          attention_mask=encoder_attention_mask)
            hidden_states = hidden_states + attn_output
        norm_hidden_states = (self.mlp_norm(hidden_states) * (1 + c_scale_msa) + c_shift_msa).type_as(hidden_states)
        ff_output = self.mlp(norm_hidden_states)
        hidden_states = (hidden_states + ff_output * c_gate_msa).type_as(hidden_states)
        return hidden_states


class AceStepTransformer1DModel(nn.Module):
    def __init__(self, hidden_size=2048, intermediate_size=6144, num_hidden_layers=24, num_attention_heads=16,
                 num_key_value_heads=8, head_dim=128, in_channels=192, audio_acoustic_hidden_dim=64, patch_size=2,
                 rope_theta=1000000.0, attention_bias=False, attention_dropout=0.0, rms_norm_eps=1e-6,
                 sliding_window=128, layer_types=None, encoder_hidden_size=None, is_turbo=False, model_version=None):
        super().__init__()
        if encoder_hidden_size is None:
            encoder_hidden_size = hidden_size
        self.patch_size = patch_size
        self.head_dim = head_dim
        self.rope_theta = rope_theta
        self.sliding_window = sliding_window
        if layer_types is None:
            layer_types = ["sliding_attention" if bool((i + 1) % 2) else "full_attention"
                           for i in range(num_hidden_layers)]
        self.layer_types = list(layer_types)
        self.layers = nn.ModuleList([
            AceStepTransformerBlock(hidden_size=hidden_size, num_attention_heads=num_attention_heads,
                                    num_key_value_heads=num_key_value_heads, head_dim=head_dim,
                                    intermediate_size=intermediate_size, attention_bias=attention_bias,
                                    attention_dropout=attention_dropout, rms_norm_eps=rms_norm_eps,
                                    sliding_window=sliding_window if layer_types[i] == "sliding_attention" else None,
                                    use_cross_attention=True)
            for i in range(num_hidden_layers)])
        self.proj_in_conv = nn.Conv1d(in_channels=in_channels, out_channels=hidden_size, kernel_size=patch_size,
                                      stride=patch_size, padding=0)
        self.time_embed = AceStepTimestepEmbedding(in_channels=256, time_embed_dim=hidden_size)
        self.time_embed_r = AceStepTimestepEmbedding(in_channels=256, time_embed_dim=hidden_size)
        self.condition_embedder = nn.Linear(encoder_hidden_size, hidden_size, bias=True)
        self.norm_out = RMSNorm(hidden_size, eps=rms_norm_eps)
        self.proj_out_conv = ConvTranspose1d(in_channels=hidden_size, out_channels=audio_acoustic_hidden_dim,
                                                kernel_size=patch_size, stride=patch_size, padding=0)
        self.scale_shift_table = nn.Parameter(torch.randn(1, 2, hidden_size) / hidden_size ** 0.5)

    def forward(self, hidden_states, timestep, timestep_r, encoder_hidden_states, context_latents, return_dict=True):
        temb_t, timestep_proj_t = self.time_embed(timestep)
        temb_r, timestep_proj_r = self.time_embed_r(timestep - timestep_r)
        temb = temb_t + temb_r
        timestep_proj = timestep_proj_t + timestep_proj_r
        hidden_states = torch.cat([context_latents, hidden_states], dim=-1)
        original_seq_len = hidden_states.shape[1]
        if hidden_states.shape[1] % self.patch_size != 0:
            pad_length = self.patch_size - (hidden_states.shape[1] % self.patch_size)
            hidden_states = F.pad(hidden_states, (0, 0, 0, pad_length), mode="constant", value=0)
        hidden_states = self.proj_in_conv(hidden_states.transpose(1, 2)).transpose(1, 2)
        encoder_hidden_states = self.condition_embedder(encoder_hidden_states)
        seq_len = hidden_states.shape[1]
        dtype = hidden_states.dtype
        device = hidden_states.device
        cos, sin = _ace_step_rotary_freqs(seq_len, self.head_dim, self.rope_theta, device, dtype)
        position_embeddings = (cos, sin)
        sliding_attn_mask = _create_4d_mask(seq_len=seq_len, dtype=dtype, device=device,
                                            sliding_window=self.sliding_window, is_sliding_window=True,
                                            is_causal=False)
        for i, layer_module in enumerate(self.layers):
            layer_attn_mask = sliding_attn_mask if self.layer_types[i] == "sliding_attention" else None
            hidden_states = layer_module(hidden_states=hidden_states, position_embeddings=position_embeddings,
                                         temb=timestep_proj, attention_mask=layer_attn_mask,
                                         encoder_hidden_states=encoder_hidden_states, encoder_attention_mask=None)
        shift, scale = (self.scale_shift_table + temb.unsqueeze(1)).chunk(2, dim=1)
        hidden_states = (self.norm_out(hidden_states) * (1 + scale) + shift).type_as(hidden_states)
        hidden_states = self.proj_out_conv(hidden_states.transpose(1, 2)).transpose(1, 2)
        hidden_states = hidden_states[:, :original_seq_len, :]
        return (hidden_states,)


def build():
    # 2 query heads of 16 over 1 kv head, width 32, 2 layers (sliding window 2, then full); 4 acoustic channels
    # beside an 8-channel context, patch 2; condition 24 wide.
    return AceStepTransformer1DModel(hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                     num_attention_heads=2, num_key_value_heads=1, head_dim=16, in_channels=12,
                                     audio_acoustic_hidden_dim=4, patch_size=2, sliding_window=2,
                                     encoder_hidden_size=24)


def inputs(g):
    t = 15  # odd: padded to 16 before the patchify, the output cut back to 15 rows
    src = torch.randn((1, t, 4), generator=g)  # the silence latents stand-in (random so no zero hides a factor)
    chunk_mask = torch.ones((1, t, 4))
    return {"encoder_hidden_states": torch.randn((1, 6, 24), generator=g),
            "context_latents": torch.cat([src, chunk_mask], dim=-1),
            "noise": torch.randn((1, t, 4), generator=g)}


def call(model, x, sigma, c):
    t = torch.tensor([sigma], dtype=torch.float32).expand(x.shape[0]).to(x.dtype)
    return model(hidden_states=x, timestep=t, timestep_r=t, encoder_hidden_states=c["encoder_hidden_states"],
                 context_latents=c["context_latents"], return_dict=False)[0]


PRODUCER = dict(
    library_source="replica of huggingface/diffusers ace_step_transformer.py@23f235321a3a and the parts it "
                   "imports (torch 1.13)",
    timestep="sigma float32 as timestep and timestep_r (the model scales by 1000; t - r = 0)",
    velocity="model output as is (flow velocity), not negated",
    note="ACE-Step 1.5 1-D DiT, 2 layers: [context, latents] on channels, T=15 zero-padded to 16, Conv1d(k=s=2) "
         "patchify, ConvTranspose1d unpatchify cut back to 15 rows; two timestep embedders (t, t-r=0) summed, each "
         "with a [B,6,D] time_proj; per-block [1,6,D] table + proj, (shift, scale, gate, c_shift, c_scale, c_gate); "
         "RMSNorm pre-norms x(1+scale)+shift; GQA self-attention (2 q / 1 kv heads) with per-head RMSNorm q/k, half-"
         "layout RoPE θ 1e6, banded sliding-window additive mask (finfo.min beyond |i-j|>2) in layer 0 only; "
         "cross-attention to a projected condition (no RoPE, ungated residual); SwiGLU MLP; output (shift, scale) "
         "from a [1,2,D] table + temb")

if __name__ == "__main__":
    capture("ace_step", build, inputs, call, sys.argv[1], PRODUCER)
