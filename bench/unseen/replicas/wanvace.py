"""Wan2.1-VACE video DiT, reimplemented for torch 1.13 (no diffusers here), captured small in f32 on CPU.

Follows huggingface/diffusers src/diffusers/models/transformers/transformer_wan_vace.py at
071190daca865a4d04deac0e02cda5b8c5d6f6fa (WanVACETransformer3DModel, WanVACETransformerBlock) and the parts it
imports from transformer_wan.py at 061bc7f9dcaf23ad84a8f36f93bc586c2f3f8191 (WanAttention with WanAttnProcessor's
__call__ as its forward, WanRotaryPosEmbed, WanTimeTextImageEmbedding, WanTransformerBlock), attention.py
(FeedForward "gelu-approximate", GELU), embeddings.py (Timesteps, TimestepEmbedding, PixArtAlphaTextProjection,
get_1d_rotary_pos_embed) and normalization.py (FP32LayerNorm): the same module tree, parameter names and shapes,
and call boundaries; the arithmetic line for line. WanAttention takes the newer file's is_cross_attention
argument as well (the VACE block passes it; it changes nothing unfused). Stand-ins for what torch 1.13 lacks:
torch.nn.RMSNorm (eps given) and dispatch_attention_fn (SDPA's math on [B, L, H, D], default scale, no mask).

The construct it shows: a control video patchified by its own 3-D conv; VACE blocks (Wan blocks plus a
proj_in on the first, which adds the main stream's patch tokens, and a proj_out giving the hint) run once
before the main blocks; the hint of VACE block i, times its scale, is added after main block vace_layers[i].

Pipeline as WanVACEPipeline calls it (bench/unseen/capture_dit.py's wanvace case, --small sizes): int64 timestep
int(sigma*1000), control latents [8 video channels, 4 mask channels], control scale ones, velocity the output as
is.

usage: /usr/bin/python3 bench/unseen/replicas/wanvace.py OUTDIR
"""
import math
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

from parts import TorchRMSNorm
from run import capture, get_timestep_embedding, sdpa


class RMSNorm(TorchRMSNorm):
    """torch 2's nn.RMSNorm(dim, eps, elementwise_affine=True)."""


class FP32LayerNorm(nn.LayerNorm):
    def forward(self, inputs):
        origin_dtype = inputs.dtype
        return F.layer_norm(inputs.float(), self.normalized_shape,
                            self.weight.float() if self.weight is not None else None,
                            self.bias.float() if self.bias is not None else None, self.eps).to(origin_dtype)


def get_1d_rotary_pos_embed(dim, pos, theta=10000.0, use_real=False, linear_factor=1.0, ntk_factor=1.0,
                            repeat_interleave_real=True, freqs_dtype=torch.float32):
    assert dim % 2 == 0
    if isinstance(pos, int):
        pos = torch.arange(pos)
    theta = theta * ntk_factor
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=freqs_dtype, device=pos.device)[: (dim // 2)] / dim)) \
        / linear_factor
    freqs = torch.outer(pos, freqs)
    if use_real and repeat_interleave_real:
        freqs_cos = freqs.cos().repeat_interleave(2, dim=1).float()
        freqs_sin = freqs.sin().repeat_interleave(2, dim=1).float()
        return freqs_cos, freqs_sin
    raise NotImplementedError("only the real, interleaved table is used here")


class GELU(nn.Module):
    def __init__(self, dim_in, dim_out, approximate="none", bias=True):
        super().__init__()
        self.proj = nn.Linear(dim_in, dim_out, bias=bias)
        self.approximate = approximate

    def forward(self, hidden_states):
        hidden_states = self.proj(hidden_states)
        return F.gelu(hidden_states, approximate=self.approximate)


class FeedForward(nn.Module):
    """FeedForward(dim, inner_dim=ffn_dim, activation_fn="gelu-approximate")."""

    def __init__(self, dim, inner_dim, dropout=0.0, bias=True):
        super().__init__()
        self.net = nn.ModuleList([GELU(dim, inner_dim, approximate="tanh", bias=bias), nn.Dropout(dropout),
                                  nn.Linear(inner_dim, dim, bias=bias)])

    def forward(self, hidden_states):
        for module in self.net:
            hidden_states = module(hidden_states)
        return hidden_states


class Timesteps(nn.Module):
    def __init__(self, num_channels, flip_sin_to_cos, downscale_freq_shift, scale=1):
        super().__init__()
        self.num_channels = num_channels
        self.flip_sin_to_cos = flip_sin_to_cos
        self.downscale_freq_shift = downscale_freq_shift
        self.scale = scale

    def forward(self, timesteps):
        return get_timestep_embedding(timesteps, self.num_channels, flip_sin_to_cos=self.flip_sin_to_cos,
                                      downscale_freq_shift=self.downscale_freq_shift, scale=self.scale)


class TimestepEmbedding(nn.Module):
    def __init__(self, in_channels, time_embed_dim):
        super().__init__()
        self.linear_1 = nn.Linear(in_channels, time_embed_dim, True)
        self.act = nn.SiLU()
        self.linear_2 = nn.Linear(time_embed_dim, time_embed_dim, True)

    def forward(self, sample):
        sample = self.linear_1(sample)
        sample = self.act(sample)
        return self.linear_2(sample)


class PixArtAlphaTextProjection(nn.Module):
    def __init__(self, in_features, hidden_size):
        super().__init__()
        self.linear_1 = nn.Linear(in_features, hidden_size, bias=True)
        self.act_1 = nn.GELU(approximate="tanh")
        self.linear_2 = nn.Linear(hidden_size, hidden_size, bias=True)

    def forward(self, caption):
        hidden_states = self.linear_1(caption)
        hidden_states = self.act_1(hidden_states)
        return self.linear_2(hidden_states)


class WanAttention(nn.Module):
    """With WanAttnProcessor's __call__ as its forward (no added k/v: text to video)."""

    def __init__(self, dim, heads=8, dim_head=64, eps=1e-5, dropout=0.0, added_kv_proj_dim=None,
                 cross_attention_dim_head=None, processor=None, is_cross_attention=None):
        super().__init__()
        self.inner_dim = dim_head * heads
        self.heads = heads
        self.added_kv_proj_dim = added_kv_proj_dim
        self.cross_attention_dim_head = cross_attention_dim_head
        self.kv_inner_dim = self.inner_dim if cross_attention_dim_head is None else cross_attention_dim_head * heads
        self.to_q = nn.Linear(dim, self.inner_dim, bias=True)
        self.to_k = nn.Linear(dim, self.kv_inner_dim, bias=True)
        self.to_v = nn.Linear(dim, self.kv_inner_dim, bias=True)
        self.to_out = nn.ModuleList([nn.Linear(self.inner_dim, dim, bias=True), nn.Dropout(dropout)])
        self.norm_q = RMSNorm(dim_head * heads, eps=eps, elementwise_affine=True)
        self.norm_k = RMSNorm(dim_head * heads, eps=eps, elementwise_affine=True)
        self.add_k_proj = self.add_v_proj = None
        assert added_kv_proj_dim is None
        self.is_cross_attention = cross_attention_dim_head is not None

    def forward(self, hidden_states, encoder_hidden_states=None, attention_mask=None, rotary_emb=None):
        attn = self
        if encoder_hidden_states is None:
            encoder_hidden_states = hidden_states
        query = attn.to_q(hidden_states)
        key = attn.to_k(encoder_hidden_states)
        value = attn.to_v(encoder_hidden_states)

        query = attn.norm_q(query)
        key = attn.norm_k(key)

        query = query.unflatten(2, (attn.heads, -1))
        key = key.unflatten(2, (attn.heads, -1))
        value = value.unflatten(2, (attn.heads, -1))

        if rotary_emb is not None:
            def apply_rotary_emb(hidden_states, freqs_cos, freqs_sin):
                x1, x2 = hidden_states.unflatten(-1, (-1, 2)).unbind(-1)
                cos = freqs_cos[..., 0::2]
                sin = freqs_sin[..., 1::2]
                out = torch.empty_like(hidden_states)
                out[..., 0::2] = x1 * cos - x2 * sin
                out[..., 1::2] = x1 * sin + x2 * cos
                return out.type_as(hidden_states)

            query = apply_rotary_emb(query, *rotary_emb)
            key = apply_rotary_emb(key, *rotary_emb)

        # dispatch_attention_fn on [B, L, H, D]: SDPA's math on [B, H, L, D], default scale, no mask.
        hidden_states = sdpa(query.transpose(1, 2), key.transpose(1, 2), value.transpose(1, 2),
                             mask=attention_mask).transpose(1, 2)
        hidden_states = hidden_states.flatten(2, 3)
        hidden_states = hidden_states.type_as(query)

        hidden_states = attn.to_out[0](hidden_states)
        hidden_states = attn.to_out[1](hidden_states)
        return hidden_states


class WanTimeTextImageEmbedding(nn.Module):
    def __init__(self, dim, time_freq_dim, time_proj_dim, text_embed_dim, image_embed_dim=None,
                 pos_embed_seq_len=None):
        super().__init__()
        self.timesteps_proj = Timesteps(num_channels=time_freq_dim, flip_sin_to_cos=True, downscale_freq_shift=0)
        self.time_embedder = TimestepEmbedding(in_channels=time_freq_dim, time_embed_dim=dim)
        self.act_fn = nn.SiLU()
        self.time_proj = nn.Linear(dim, time_proj_dim)
        self.text_embedder = PixArtAlphaTextProjection(text_embed_dim, dim)
        assert image_embed_dim is None
        self.image_embedder = None

    def forward(self, timestep, encoder_hidden_states, encoder_hidden_states_image=None, timestep_seq_len=None):
        timestep = self.timesteps_proj(timestep)
        if timestep_seq_len is not None:
            timestep = timestep.unflatten(0, (-1, timestep_seq_len))
        time_embedder_dtype = next(iter(self.time_embedder.parameters())).dtype
        if timestep.dtype != time_embedder_dtype and time_embedder_dtype != torch.int8:
            timestep = timestep.to(time_embedder_dtype)
        temb = self.time_embedder(timestep).type_as(encoder_hidden_states)
        timestep_proj = self.time_proj(self.act_fn(temb))
        encoder_hidden_states = self.text_embedder(encoder_hidden_states)
        return temb, timestep_proj, encoder_hidden_states, encoder_hidden_states_image


class WanRotaryPosEmbed(nn.Module):
    def __init__(self, attention_head_dim, patch_size, max_seq_len, theta=10000.0):
        super().__init__()
        self.attention_head_dim = attention_head_dim
        self.patch_size = patch_size
        self.max_seq_len = max_seq_len
        h_dim = w_dim = 2 * (attention_head_dim // 6)
        t_dim = attention_head_dim - h_dim - w_dim
        freqs_dtype = torch.float64
        freqs_cos = []
        freqs_sin = []
        for dim in [t_dim, h_dim, w_dim]:
            freq_cos, freq_sin = get_1d_rotary_pos_embed(dim, max_seq_len, theta, use_real=True,
                                                         repeat_interleave_real=True, freqs_dtype=freqs_dtype)
            freqs_cos.append(freq_cos)
            freqs_sin.append(freq_sin)
        self.register_buffer("freqs_cos", torch.cat(freqs_cos, dim=1), persistent=False)
        self.register_buffer("freqs_sin", torch.cat(freqs_sin, dim=1), persistent=False)

    def forward(self, hidden_states):
        batch_size, num_channels, num_frames, height, width = hidden_states.shape
        p_t, p_h, p_w = self.patch_size
        ppf, pph, ppw = num_frames // p_t, height // p_h, width // p_w
        split_sizes = [self.attention_head_dim - 2 * (self.attention_head_dim // 3), self.attention_head_dim // 3,
                       self.attention_head_dim // 3]
        freqs_cos = self.freqs_cos.split(split_sizes, dim=1)
        freqs_sin = self.freqs_sin.split(split_sizes, dim=1)
        freqs_cos_f = freqs_cos[0][:ppf].view(ppf, 1, 1, -1).expand(ppf, pph, ppw, -1)
        freqs_cos_h = freqs_cos[1][:pph].view(1, pph, 1, -1).expand(ppf, pph, ppw, -1)
        freqs_cos_w = freqs_cos[2][:ppw].view(1, 1, ppw, -1).expand(ppf, pph, ppw, -1)
        freqs_sin_f = freqs_sin[0][:ppf].view(ppf, 1, 1, -1).expand(ppf, pph, ppw, -1)
        freqs_sin_h = freqs_sin[1][:pph].view(1, pph, 1, -1).expand(ppf, pph, ppw, -1)
        freqs_sin_w = freqs_sin[2][:ppw].view(1, 1, ppw, -1).expand(ppf, pph, ppw, -1)
        freqs_cos = torch.cat([freqs_cos_f, freqs_cos_h, freqs_cos_w], dim=-1).reshape(1, ppf * pph * ppw, 1, -1)
        freqs_sin = torch.cat([freqs_sin_f, freqs_sin_h, freqs_sin_w], dim=-1).reshape(1, ppf * pph * ppw, 1, -1)
        return freqs_cos, freqs_sin


class WanTransformerBlock(nn.Module):
    def __init__(self, dim, ffn_dim, num_heads, qk_norm="rms_norm_across_heads", cross_attn_norm=False, eps=1e-6,
                 added_kv_proj_dim=None):
        super().__init__()
        self.norm1 = FP32LayerNorm(dim, eps, elementwise_affine=False)
        self.attn1 = WanAttention(dim=dim, heads=num_heads, dim_head=dim // num_heads, eps=eps,
                                  cross_attention_dim_head=None)
        self.attn2 = WanAttention(dim=dim, heads=num_heads, dim_head=dim // num_heads, eps=eps,
                                  added_kv_proj_dim=added_kv_proj_dim, cross_attention_dim_head=dim // num_heads)
        self.norm2 = FP32LayerNorm(dim, eps, elementwise_affine=True) if cross_attn_norm else nn.Identity()
        self.ffn = FeedForward(dim, inner_dim=ffn_dim)
        self.norm3 = FP32LayerNorm(dim, eps, elementwise_affine=False)
        self.scale_shift_table = nn.Parameter(torch.randn(1, 6, dim) / dim ** 0.5)

    def forward(self, hidden_states, encoder_hidden_states, temb, rotary_emb):
        shift_msa, scale_msa, gate_msa, c_shift_msa, c_scale_msa, c_gate_msa = (
            self.scale_shift_table + temb.float()).chunk(6, dim=1)
        norm_hidden_states = (self.norm1(hidden_states.float()) * (1 + scale_msa) + shift_msa).type_as(hidden_states)
        attn_output = self.attn1(norm_hidden_states, None, None, rotary_emb)
        hidden_states = (hidden_states.float() + attn_output * gate_msa).type_as(hidden_states)
        norm_hidden_states = self.norm2(hidden_states.float()).type_as(hidden_states)
        attn_output = self.attn2(norm_hidden_states, encoder_hidden_states, None, None)
        hidden_states = hidden_states + attn_output
        norm_hidden_states = (self.norm3(hidden_states.float()) * (1 + c_scale_msa) + c_shift_msa).type_as(
            hidden_states)
        ff_output = self.ffn(norm_hidden_states)
        hidden_states = (hidden_states.float() + ff_output.float() * c_gate_msa).type_as(hidden_states)
        return hidden_states


class WanVACETransformerBlock(nn.Module):
    def __init__(self, dim, ffn_dim, num_heads, qk_norm="rms_norm_across_heads", cross_attn_norm=False, eps=1e-6,
                 added_kv_proj_dim=None, apply_input_projection=False, apply_output_projection=False):
        super().__init__()
        self.proj_in = None
        if apply_input_projection:
            self.proj_in = nn.Linear(dim, dim)
        self.norm1 = FP32LayerNorm(dim, eps, elementwise_affine=False)
        self.attn1 = WanAttention(dim=dim, heads=num_heads, dim_head=dim // num_heads, eps=eps)
        self.attn2 = WanAttention(dim=dim, heads=num_heads, dim_head=dim // num_heads, eps=eps,
                                  added_kv_proj_dim=added_kv_proj_dim, is_cross_attention=True)
        self.norm2 = FP32LayerNorm(dim, eps, elementwise_affine=True) if cross_attn_norm else nn.Identity()
        self.ffn = FeedForward(dim, inner_dim=ffn_dim)
        self.norm3 = FP32LayerNorm(dim, eps, elementwise_affine=False)
        self.proj_out = None
        if apply_output_projection:
            self.proj_out = nn.Linear(dim, dim)
        self.scale_shift_table = nn.Parameter(torch.randn(1, 6, dim) / dim ** 0.5)

    def forward(self, hidden_states, encoder_hidden_states, control_hidden_states, temb, rotary_emb):
        if self.proj_in is not None:
            control_hidden_states = self.proj_in(control_hidden_states)
            control_hidden_states = control_hidden_states + hidden_states
        shift_msa, scale_msa, gate_msa, c_shift_msa, c_scale_msa, c_gate_msa = (
            self.scale_shift_table.to(temb.device) + temb.float()).chunk(6, dim=1)
        norm_hidden_states = (self.norm1(control_hidden_states.float()) * (1 + scale_msa) + shift_msa).type_as(
            control_hidden_states)
        attn_output = self.attn1(norm_hidden_states, None, None, rotary_emb)
        control_hidden_states = (control_hidden_states.float() + attn_output * gate_msa).type_as(
            control_hidden_states)
        norm_hidden_states = self.norm2(control_hidden_states.float()).type_as(control_hidden_states)
        attn_output = self.attn2(norm_hidden_states, encoder_hidden_states, None, None)
        control_hidden_states = control_hidden_states + attn_output
        norm_hidden_states = (self.norm3(control_hidden_states.float()) * (1 + c_scale_msa) + c_shift_msa).type_as(
            control_hidden_states)
        ff_output = self.ffn(norm_hidden_states)
        control_hidden_states = (control_hidden_states.float() + ff_output.float() * c_gate_msa).type_as(
            control_hidden_states)
        conditioning_states = None
        if self.proj_out is not None:
            conditioning_states = self.proj_out(control_hidden_states)
        return conditioning_states, control_hidden_states


class WanVACETransformer3DModel(nn.Module):
    _keep_in_fp32_modules = ["time_embedder", "scale_shift_table", "norm1", "norm2", "norm3"]

    def __init__(self, patch_size=(1, 2, 2), num_attention_heads=40, attention_head_dim=128, in_channels=16,
                 out_channels=16, text_dim=4096, freq_dim=256, ffn_dim=13824, num_layers=40, cross_attn_norm=True,
                 qk_norm="rms_norm_across_heads", eps=1e-6, image_dim=None, added_kv_proj_dim=None,
                 rope_max_seq_len=1024, pos_embed_seq_len=None, vace_layers=(0, 5, 10, 15, 20, 25, 30, 35),
                 vace_in_channels=96):
        super().__init__()
        self.patch_size = patch_size
        self.vace_layers = list(vace_layers)
        inner_dim = num_attention_heads * attention_head_dim
        out_channels = out_channels or in_channels
        if max(vace_layers) >= num_layers:
            raise ValueError(f"VACE layers {vace_layers} exceed the number of transformer layers {num_layers}.")
        if 0 not in vace_layers:
            raise ValueError("VACE layers must include layer 0.")
        self.rope = WanRotaryPosEmbed(attention_head_dim, patch_size, rope_max_seq_len)
        self.patch_embedding = nn.Conv3d(in_channels, inner_dim, kernel_size=patch_size, stride=patch_size)
        self.vace_patch_embedding = nn.Conv3d(vace_in_channels, inner_dim, kernel_size=patch_size, stride=patch_size)
        self.condition_embedder = WanTimeTextImageEmbedding(dim=inner_dim, time_freq_dim=freq_dim,
                                                            time_proj_dim=inner_dim * 6, text_embed_dim=text_dim,
                                                            image_embed_dim=image_dim,
                                                            pos_embed_seq_len=pos_embed_seq_len)
        self.blocks = nn.ModuleList([WanTransformerBlock(inner_dim, ffn_dim, num_attention_heads, qk_norm,
                                                         cross_attn_norm, eps, added_kv_proj_dim)
                                     for _ in range(num_layers)])
        self.vace_blocks = nn.ModuleList([WanVACETransformerBlock(inner_dim, ffn_dim, num_attention_heads, qk_norm,
                                                                  cross_attn_norm, eps, added_kv_proj_dim,
                                                                  apply_input_projection=i == 0,
                                                                  apply_output_projection=True)
                                          for i in range(len(vace_layers))])
        self.norm_out = FP32LayerNorm(inner_dim, eps, elementwise_affine=False)
        self.proj_out = nn.Linear(inner_dim, out_channels * math.prod(patch_size))
        self.scale_shift_table = nn.Parameter(torch.randn(1, 2, inner_dim) / inner_dim ** 0.5)

    def forward(self, hidden_states, timestep, encoder_hidden_states, encoder_hidden_states_image=None,
                control_hidden_states=None, control_hidden_states_scale=None, return_dict=True,
                attention_kwargs=None):
        batch_size, num_channels, num_frames, height, width = hidden_states.shape
        p_t, p_h, p_w = self.patch_size
        post_patch_num_frames = num_frames // p_t
        post_patch_height = height // p_h
        post_patch_width = width // p_w

        if control_hidden_states_scale is None:
            control_hidden_states_scale = control_hidden_states.new_ones(len(self.vace_layers))
        control_hidden_states_scale = torch.unbind(control_hidden_states_scale)
        if len(control_hidden_states_scale) != len(self.vace_layers):
            raise ValueError("control_hidden_states_scale's length differs from vace_layers'")

        rotary_emb = self.rope(hidden_states)

        hidden_states = self.patch_embedding(hidden_states)
        hidden_states = hidden_states.flatten(2).transpose(1, 2)

        control_hidden_states = self.vace_patch_embedding(control_hidden_states)
        control_hidden_states = control_hidden_states.flatten(2).transpose(1, 2)
        control_hidden_states_padding = control_hidden_states.new_zeros(
            batch_size, hidden_states.size(1) - control_hidden_states.size(1), control_hidden_states.size(2))
        control_hidden_states = torch.cat([control_hidden_states, control_hidden_states_padding], dim=1)

        temb, timestep_proj, encoder_hidden_states, encoder_hidden_states_image = self.condition_embedder(
            timestep, encoder_hidden_states, encoder_hidden_states_image)
        timestep_proj = timestep_proj.unflatten(1, (6, -1))

        if encoder_hidden_states_image is not None:
            encoder_hidden_states = torch.concat([encoder_hidden_states_image, encoder_hidden_states], dim=1)

        control_hidden_states_list = []
        for i, block in enumerate(self.vace_blocks):
            conditioning_states, control_hidden_states = block(hidden_states, encoder_hidden_states,
                                                               control_hidden_states, timestep_proj, rotary_emb)
            control_hidden_states_list.append((conditioning_states, control_hidden_states_scale[i]))
        control_hidden_states_list = control_hidden_states_list[::-1]

        for i, block in enumerate(self.blocks):
            hidden_states = block(hidden_states, encoder_hidden_states, timestep_proj, rotary_emb)
            if i in self.vace_layers:
                control_hint, scale = control_hidden_states_list.pop()
                hidden_states = hidden_states + control_hint.to(hidden_states.device) * scale

        shift, scale = (self.scale_shift_table.to(temb.device) + temb.unsqueeze(1)).chunk(2, dim=1)
        shift = shift.to(hidden_states.device)
        scale = scale.to(hidden_states.device)
        hidden_states = (self.norm_out(hidden_states.float()) * (1 + scale) + shift).type_as(hidden_states)
        hidden_states = self.proj_out(hidden_states)

        hidden_states = hidden_states.reshape(batch_size, post_patch_num_frames, post_patch_height, post_patch_width,
                                              p_t, p_h, p_w, -1)
        hidden_states = hidden_states.permute(0, 7, 1, 4, 2, 5, 3, 6)
        output = hidden_states.flatten(6, 7).flatten(4, 5).flatten(2, 3)
        return (output,)


VACE_LAYERS = [0]


def build():
    # capture_dit.py's wanvace case at --small sizes but 2 heads of 18, not 16: WanRotaryPosEmbed builds its
    # table from t/h/w dims (d - 4*(d//6), 2*(d//6), 2*(d//6)) and cuts it by (d - 2*(d//3), d//3, d//3), which
    # agree at 18 (6/6/6) as at the real 128 (44/42/42) but not at 16 (8/4/4 against 6/5/5: cos and sin of one
    # pair from different axes); 2 main blocks, one VACE block whose hint is added after main block 0.
    return WanVACETransformer3DModel(patch_size=(1, 2, 2), num_attention_heads=2, attention_head_dim=18,
                                     in_channels=4, out_channels=4, text_dim=16, freq_dim=16, ffn_dim=64,
                                     num_layers=2, cross_attn_norm=True, qk_norm="rms_norm_across_heads", eps=1e-6,
                                     rope_max_seq_len=32, vace_layers=VACE_LAYERS, vace_in_channels=12)


def inputs(g):
    # WanVACEPipeline: conditioning latents = [inactive, reactive latents (2 z_dim), the mask folded to channels];
    # conditioning_scale = tensor([1.0] * len(vace_layers)).
    ehs = torch.randn((1, 4, 16), generator=g)
    ctrl = torch.cat([torch.randn((1, 8, 2, 4, 8), generator=g),
                      (torch.rand(1, 4, 2, 4, 8, generator=g) > 0.5).float()], dim=1)
    return {"encoder_hidden_states": ehs, "control_hidden_states": ctrl,
            "control_hidden_states_scale": torch.ones(len(VACE_LAYERS)),
            "noise": torch.randn((1, 4, 2, 4, 8), generator=g)}


def call(model, x, sigma, c):
    t = torch.tensor([int(sigma * 1000)], dtype=torch.int64)
    return model(hidden_states=x, timestep=t, encoder_hidden_states=c["encoder_hidden_states"],
                 control_hidden_states=c["control_hidden_states"],
                 control_hidden_states_scale=c["control_hidden_states_scale"], attention_kwargs=None,
                 return_dict=False)[0]


PRODUCER = dict(
    library_source="replica of huggingface/diffusers transformer_wan_vace.py@071190daca86 and transformer_wan.py"
                   "@061bc7f9dcaf with the parts they import (torch 1.13)",
    timestep="int(sigma*1000) int64 (WanVACEPipeline: t.expand(B), UniPCMultistep flow timesteps)",
    velocity="model output as is (flow prediction), not negated",
    note="Wan2.1-VACE video DiT: 3-D conv patchify of the latents and, separately, of a control video (8 latent + "
         "4 mask channels, zero-padded to the token count); one VACE block (a Wan block with proj_in(control) + "
         "patch tokens before it and proj_out after) run before the main blocks, its hint times the control scale "
         "added after main block 0 of 2; Wan blocks: 6-way scale_shift_table + timestep_proj modulation over "
         "FP32 non-affine LayerNorms, self-attn with across-heads RMSNorm q/k and interleaved 3-D RoPE "
         "(cos/sin tables), affine-LayerNorm cross-attn to the projected text, GELU-tanh FFN; final (shift, "
         "scale) from scale_shift_table + temb; cos-first sinusoid of the int timestep; 2 latent frames")

if __name__ == "__main__":
    capture("wanvace", build, inputs, call, sys.argv[1], PRODUCER)
