"""Helios video DiT, reimplemented for torch 1.13 (no diffusers here), captured small in f32 on CPU.

Follows huggingface/diffusers src/diffusers/models/transformers/transformer_helios.py at
35d174b85033c2b029d1df273b6d0c01f5d78f25 (HeliosTransformer3DModel, HeliosTransformerBlock, HeliosAttention with
HeliosAttnProcessor's __call__ as its forward, HeliosRotaryPosEmbed, HeliosTimeTextEmbedding, HeliosOutputNorm,
pad_for_3d_conv, center_down_sample_3d, apply_rotary_emb_transposed) with the parts it imports: attention.py
(FeedForward "gelu-approximate", GELU), embeddings.py (Timesteps, TimestepEmbedding, PixArtAlphaTextProjection act_fn
"gelu_tanh") and normalization.py (FP32LayerNorm): the same module tree, parameter names and shapes, and call
boundaries; the arithmetic line for line. Stand-ins for what torch 1.13 lacks: torch.nn.RMSNorm (x·rsqrt(mean x² +
eps)·weight) and dispatch_attention_fn (SDPA's math on [B, L, H, D], default scale, no mask). (The stored file's
newest version, 0171b3f0, does not parse: `width=post_patch_width` lacks its comma; 35d174b8 is the one before.)

The constructs it shows beside Wan's: history context at three compressions prefixed to the noisy window's tokens
([long 4x, mid 2x, short 1x, window]: the short history through a 1x2x2 conv, the mid and long through 2x4x4 and
4x8x8 convs after replicate padding to the kernel); each part's RoPE table built by one rope module from explicit
frame indices on the short grid, cos/sin of all three axes in one [B, 2·head, T, H, W] tensor (the mid and long tables
replicate-padded and averaged over 2x2x2 / 4x4x4 blocks); a timestep per token: the history rows modulated by the
time embedding of t = 0, the window rows by t's (timestep_proj [B, S, 6, D], temb [B, S, D]); the cross-attention
only on the window rows (the history rows cut off before it and joined back after); the output norm and projection
on the window rows only, modulated per token.

Pipeline as HeliosPipeline (pipeline_helios.py at 04a0342ab21cd37e0d3e20c6dff33da0b364d0b0) calls it for a chunk
after the first (keep_first_frame, history_sizes [4, 2, 1] here, [16, 2, 1] upstream): indices = arange(1 + 4 + 2 + 1
+ 2) split [prefix, long, mid, 1x, window], short = [prefix, 1x]; the history latents given (a video continued: the
first chunk's history is zeros); timestep t.expand(B) with t = σ·1000 (float32), velocity the output as is.

usage: /usr/bin/python3 bench/unseen/replicas/helios.py OUTDIR [--small]
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




class Timesteps(nn.Module):
    def __init__(self, num_channels, flip_sin_to_cos, downscale_freq_shift, scale=1):
        super().__init__()
        self.num_channels, self.flip_sin_to_cos = num_channels, flip_sin_to_cos
        self.downscale_freq_shift, self.scale = downscale_freq_shift, scale

    def forward(self, timesteps):
        return get_timestep_embedding(timesteps, self.num_channels, flip_sin_to_cos=self.flip_sin_to_cos,
                                      downscale_freq_shift=self.downscale_freq_shift, scale=self.scale)


def pad_for_3d_conv(x, kernel_size):
    b, c, t, h, w = x.shape
    pt, ph, pw = kernel_size
    pad_t = (pt - (t % pt)) % pt
    pad_h = (ph - (h % ph)) % ph
    pad_w = (pw - (w % pw)) % pw
    if x.dtype == torch.bfloat16 and x.device.type == "cpu":  # torch 1.13's CPU replicate pad has no bf16 kernel:
        # padding copies values, so padding in f32 and casting back gives the same tensor
        return torch.nn.functional.pad(x.float(), (0, pad_w, 0, pad_h, 0, pad_t), mode="replicate").to(x.dtype)
    return torch.nn.functional.pad(x, (0, pad_w, 0, pad_h, 0, pad_t), mode="replicate")


def center_down_sample_3d(x, kernel_size):
    return torch.nn.functional.avg_pool3d(x, kernel_size, stride=kernel_size)


def apply_rotary_emb_transposed(hidden_states, freqs_cis):
    x_1, x_2 = hidden_states.unflatten(-1, (-1, 2)).unbind(-1)
    cos, sin = freqs_cis.unsqueeze(-2).chunk(2, dim=-1)
    out = torch.empty_like(hidden_states)
    out[..., 0::2] = x_1 * cos[..., 0::2] - x_2 * sin[..., 1::2]
    out[..., 1::2] = x_1 * sin[..., 1::2] + x_2 * cos[..., 0::2]
    return out.type_as(hidden_states)


class HeliosOutputNorm(nn.Module):
    def __init__(self, dim, eps=1e-6, elementwise_affine=False):
        super().__init__()
        self.scale_shift_table = nn.Parameter(torch.randn(1, 2, dim) / dim ** 0.5)
        self.norm = FP32LayerNorm(dim, eps, elementwise_affine=False)

    def forward(self, hidden_states, temb, original_context_length):
        temb = temb[:, -original_context_length:, :]
        shift, scale = (self.scale_shift_table.unsqueeze(0).to(temb.device) + temb.unsqueeze(2)).chunk(2, dim=2)
        shift, scale = shift.squeeze(2).to(hidden_states.device), scale.squeeze(2).to(hidden_states.device)
        hidden_states = hidden_states[:, -original_context_length:, :]
        hidden_states = (self.norm(hidden_states.float()) * (1 + scale) + shift).type_as(hidden_states)
        return hidden_states


class HeliosAttention(nn.Module):
    """With HeliosAttnProcessor's __call__ as its forward (not fused, no added k/v, no history amplification)."""

    def __init__(self, dim, heads=8, dim_head=64, eps=1e-5, dropout=0.0, added_kv_proj_dim=None,
                 cross_attention_dim_head=None, is_cross_attention=None, is_amplify_history=False,
                 history_scale_mode="per_head"):
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
        self.is_cross_attention = is_cross_attention if is_cross_attention is not None \
            else cross_attention_dim_head is not None
        self.fused_projections = False
        self.is_amplify_history = is_amplify_history
        assert not is_amplify_history

    def forward(self, hidden_states, encoder_hidden_states=None, attention_mask=None, rotary_emb=None,
                original_context_length=None):
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
            query = apply_rotary_emb_transposed(query, rotary_emb)
            key = apply_rotary_emb_transposed(key, rotary_emb)

        # dispatch_attention_fn on [B, L, H, D]: SDPA's math on [B, H, L, D], default scale, no mask.
        hidden_states = sdpa(query.transpose(1, 2), key.transpose(1, 2), value.transpose(1, 2),
                             mask=attention_mask).transpose(1, 2)
        hidden_states = hidden_states.flatten(2, 3)
        hidden_states = hidden_states.type_as(query)
        hidden_states = attn.to_out[0](hidden_states)
        hidden_states = attn.to_out[1](hidden_states)
        return hidden_states


class HeliosTimeTextEmbedding(nn.Module):
    def __init__(self, dim, time_freq_dim, time_proj_dim, text_embed_dim):
        super().__init__()
        self.timesteps_proj = Timesteps(num_channels=time_freq_dim, flip_sin_to_cos=True, downscale_freq_shift=0)
        self.time_embedder = TimestepEmbedding(in_channels=time_freq_dim, time_embed_dim=dim)
        self.act_fn = nn.SiLU()
        self.time_proj = nn.Linear(dim, time_proj_dim)
        self.text_embedder = PixArtAlphaTextProjection(text_embed_dim, dim)

    def forward(self, timestep, encoder_hidden_states=None, is_return_encoder_hidden_states=True):
        timestep = self.timesteps_proj(timestep)
        time_embedder_dtype = next(iter(self.time_embedder.parameters())).dtype
        if timestep.dtype != time_embedder_dtype and time_embedder_dtype != torch.int8:
            timestep = timestep.to(time_embedder_dtype)
        temb = self.time_embedder(timestep).type_as(encoder_hidden_states)
        timestep_proj = self.time_proj(self.act_fn(temb))
        if encoder_hidden_states is not None and is_return_encoder_hidden_states:
            encoder_hidden_states = self.text_embedder(encoder_hidden_states)
        return temb, timestep_proj, encoder_hidden_states


class HeliosRotaryPosEmbed(nn.Module):
    def __init__(self, rope_dim, theta):
        super().__init__()
        self.DT, self.DY, self.DX = rope_dim
        self.theta = theta
        self.register_buffer("freqs_base_t", self._get_freqs_base(self.DT), persistent=False)
        self.register_buffer("freqs_base_y", self._get_freqs_base(self.DY), persistent=False)
        self.register_buffer("freqs_base_x", self._get_freqs_base(self.DX), persistent=False)

    def _get_freqs_base(self, dim):
        return 1.0 / (self.theta ** (torch.arange(0, dim, 2, dtype=torch.float32)[: (dim // 2)] / dim))

    @torch.no_grad()
    def get_frequency_batched(self, freqs_base, pos):
        freqs = torch.einsum("d,bthw->dbthw", freqs_base, pos)
        freqs = freqs.repeat_interleave(2, dim=0)
        return freqs.cos(), freqs.sin()

    @torch.no_grad()
    def _get_spatial_meshgrid(self, height, width, device_str):
        device = torch.device(device_str)
        grid_y_coords = torch.arange(height, device=device, dtype=torch.float32)
        grid_x_coords = torch.arange(width, device=device, dtype=torch.float32)
        grid_y, grid_x = torch.meshgrid(grid_y_coords, grid_x_coords, indexing="ij")
        return grid_y, grid_x

    @torch.no_grad()
    def forward(self, frame_indices, height, width, device):
        batch_size = frame_indices.shape[0]
        num_frames = frame_indices.shape[1]
        frame_indices = frame_indices.to(device=device, dtype=torch.float32)
        grid_y, grid_x = self._get_spatial_meshgrid(height, width, str(device))
        grid_t = frame_indices[:, :, None, None].expand(batch_size, num_frames, height, width)
        grid_y_batch = grid_y[None, None, :, :].expand(batch_size, num_frames, -1, -1)
        grid_x_batch = grid_x[None, None, :, :].expand(batch_size, num_frames, -1, -1)
        freqs_cos_t, freqs_sin_t = self.get_frequency_batched(self.freqs_base_t, grid_t)
        freqs_cos_y, freqs_sin_y = self.get_frequency_batched(self.freqs_base_y, grid_y_batch)
        freqs_cos_x, freqs_sin_x = self.get_frequency_batched(self.freqs_base_x, grid_x_batch)
        result = torch.cat([freqs_cos_t, freqs_cos_y, freqs_cos_x, freqs_sin_t, freqs_sin_y, freqs_sin_x], dim=0)
        return result.permute(1, 0, 2, 3, 4)


class HeliosTransformerBlock(nn.Module):
    def __init__(self, dim, ffn_dim, num_heads, qk_norm="rms_norm_across_heads", cross_attn_norm=False, eps=1e-6,
                 added_kv_proj_dim=None, guidance_cross_attn=False, is_amplify_history=False,
                 history_scale_mode="per_head"):
        super().__init__()
        self.norm1 = FP32LayerNorm(dim, eps, elementwise_affine=False)
        self.attn1 = HeliosAttention(dim=dim, heads=num_heads, dim_head=dim // num_heads, eps=eps,
                                     cross_attention_dim_head=None, is_amplify_history=is_amplify_history,
                                     history_scale_mode=history_scale_mode)
        self.attn2 = HeliosAttention(dim=dim, heads=num_heads, dim_head=dim // num_heads, eps=eps,
                                     added_kv_proj_dim=added_kv_proj_dim, cross_attention_dim_head=dim // num_heads)
        self.norm2 = FP32LayerNorm(dim, eps, elementwise_affine=True) if cross_attn_norm else nn.Identity()
        self.ffn = FeedForward(dim, inner_dim=ffn_dim)
        self.norm3 = FP32LayerNorm(dim, eps, elementwise_affine=False)
        self.scale_shift_table = nn.Parameter(torch.randn(1, 6, dim) / dim ** 0.5)
        self.guidance_cross_attn = guidance_cross_attn

    def forward(self, hidden_states, encoder_hidden_states, temb, rotary_emb, original_context_length=None):
        if temb.ndim == 4:
            shift_msa, scale_msa, gate_msa, c_shift_msa, c_scale_msa, c_gate_msa = (
                self.scale_shift_table.unsqueeze(0) + temb.float()).chunk(6, dim=2)
            shift_msa = shift_msa.squeeze(2)
            scale_msa = scale_msa.squeeze(2)
            gate_msa = gate_msa.squeeze(2)
            c_shift_msa = c_shift_msa.squeeze(2)
            c_scale_msa = c_scale_msa.squeeze(2)
            c_gate_msa = c_gate_msa.squeeze(2)
        else:
            shift_msa, scale_msa, gate_msa, c_shift_msa, c_scale_msa, c_gate_msa = (
                self.scale_shift_table + temb.float()).chunk(6, dim=1)

        norm_hidden_states = (self.norm1(hidden_states.float()) * (1 + scale_msa) + shift_msa).type_as(hidden_states)
        attn_output = self.attn1(norm_hidden_states, None, None, rotary_emb, original_context_length)
        hidden_states = (hidden_states.float() + attn_output * gate_msa).type_as(hidden_states)

        if self.guidance_cross_attn:
            history_seq_len = hidden_states.shape[1] - original_context_length
            history_hidden_states, hidden_states = (hidden_states[:, :history_seq_len],
                                                    hidden_states[:, history_seq_len:])
            norm_hidden_states = self.norm2(hidden_states.float()).type_as(hidden_states)
            attn_output = self.attn2(norm_hidden_states, encoder_hidden_states, None, None, original_context_length)
            hidden_states = hidden_states + attn_output
            hidden_states = torch.cat([history_hidden_states, hidden_states], dim=1)
        else:
            norm_hidden_states = self.norm2(hidden_states.float()).type_as(hidden_states)
            attn_output = self.attn2(norm_hidden_states, encoder_hidden_states, None, None, original_context_length)
            hidden_states = hidden_states + attn_output

        norm_hidden_states = (self.norm3(hidden_states.float()) * (1 + c_scale_msa) + c_shift_msa).type_as(
            hidden_states)
        ff_output = self.ffn(norm_hidden_states)
        hidden_states = (hidden_states.float() + ff_output.float() * c_gate_msa).type_as(hidden_states)
        return hidden_states


class HeliosTransformer3DModel(nn.Module):
    _keep_in_fp32_modules = ["time_embedder", "scale_shift_table", "norm1", "norm2", "norm3", "history_key_scale"]

    def __init__(self, patch_size=(1, 2, 2), num_attention_heads=40, attention_head_dim=128, in_channels=16,
                 out_channels=16, text_dim=4096, freq_dim=256, ffn_dim=13824, num_layers=40, cross_attn_norm=True,
                 qk_norm="rms_norm_across_heads", eps=1e-6, added_kv_proj_dim=None, rope_dim=(44, 42, 42),
                 rope_theta=10000.0, guidance_cross_attn=True, zero_history_timestep=True,
                 has_multi_term_memory_patch=True, is_amplify_history=False, history_scale_mode="per_head"):
        super().__init__()
        self.patch_size = patch_size
        inner_dim = num_attention_heads * attention_head_dim
        out_channels = out_channels or in_channels
        self.rope = HeliosRotaryPosEmbed(rope_dim=rope_dim, theta=rope_theta)
        self.patch_embedding = nn.Conv3d(in_channels, inner_dim, kernel_size=patch_size, stride=patch_size)
        self.zero_history_timestep = zero_history_timestep
        self.inner_dim = inner_dim
        if has_multi_term_memory_patch:
            self.patch_short = nn.Conv3d(in_channels, self.inner_dim, kernel_size=(1, 2, 2), stride=(1, 2, 2))
            self.patch_mid = nn.Conv3d(in_channels, self.inner_dim, kernel_size=(2, 4, 4), stride=(2, 4, 4))
            self.patch_long = nn.Conv3d(in_channels, self.inner_dim, kernel_size=(4, 8, 8), stride=(4, 8, 8))
        self.condition_embedder = HeliosTimeTextEmbedding(dim=inner_dim, time_freq_dim=freq_dim,
                                                          time_proj_dim=inner_dim * 6, text_embed_dim=text_dim)
        self.blocks = nn.ModuleList([
            HeliosTransformerBlock(inner_dim, ffn_dim, num_attention_heads, qk_norm, cross_attn_norm, eps,
                                   added_kv_proj_dim, guidance_cross_attn=guidance_cross_attn,
                                   is_amplify_history=is_amplify_history, history_scale_mode=history_scale_mode)
            for _ in range(num_layers)])
        self.norm_out = HeliosOutputNorm(inner_dim, eps, elementwise_affine=False)
        self.proj_out = nn.Linear(inner_dim, out_channels * math.prod(patch_size))

    def forward(self, hidden_states, timestep, encoder_hidden_states, indices_hidden_states=None,
                indices_latents_history_short=None, indices_latents_history_mid=None,
                indices_latents_history_long=None, latents_history_short=None, latents_history_mid=None,
                latents_history_long=None, return_dict=True, attention_kwargs=None):
        batch_size = hidden_states.shape[0]
        p_t, p_h, p_w = self.patch_size

        hidden_states = self.patch_embedding(hidden_states)
        _, _, post_patch_num_frames, post_patch_height, post_patch_width = hidden_states.shape
        if indices_hidden_states is None:
            indices_hidden_states = torch.arange(0, post_patch_num_frames).unsqueeze(0).expand(batch_size, -1)
        hidden_states = hidden_states.flatten(2).transpose(1, 2)
        rotary_emb = self.rope(frame_indices=indices_hidden_states, height=post_patch_height,
                               width=post_patch_width, device=hidden_states.device)
        rotary_emb = rotary_emb.flatten(2).transpose(1, 2)
        original_context_length = hidden_states.shape[1]

        if latents_history_short is not None and indices_latents_history_short is not None:
            latents_history_short = self.patch_short(latents_history_short)
            _, _, _, H1, W1 = latents_history_short.shape
            latents_history_short = latents_history_short.flatten(2).transpose(1, 2)
            rotary_emb_history_short = self.rope(frame_indices=indices_latents_history_short, height=H1, width=W1,
                                                 device=latents_history_short.device)
            rotary_emb_history_short = rotary_emb_history_short.flatten(2).transpose(1, 2)
            hidden_states = torch.cat([latents_history_short, hidden_states], dim=1)
            rotary_emb = torch.cat([rotary_emb_history_short, rotary_emb], dim=1)

        if latents_history_mid is not None and indices_latents_history_mid is not None:
            latents_history_mid = pad_for_3d_conv(latents_history_mid, (2, 4, 4))
            latents_history_mid = self.patch_mid(latents_history_mid)
            latents_history_mid = latents_history_mid.flatten(2).transpose(1, 2)
            rotary_emb_history_mid = self.rope(frame_indices=indices_latents_history_mid, height=H1, width=W1,
                                               device=latents_history_mid.device)
            rotary_emb_history_mid = pad_for_3d_conv(rotary_emb_history_mid, (2, 2, 2))
            rotary_emb_history_mid = center_down_sample_3d(rotary_emb_history_mid, (2, 2, 2))
            rotary_emb_history_mid = rotary_emb_history_mid.flatten(2).transpose(1, 2)
            hidden_states = torch.cat([latents_history_mid, hidden_states], dim=1)
            rotary_emb = torch.cat([rotary_emb_history_mid, rotary_emb], dim=1)

        if latents_history_long is not None and indices_latents_history_long is not None:
            latents_history_long = pad_for_3d_conv(latents_history_long, (4, 8, 8))
            latents_history_long = self.patch_long(latents_history_long)
            latents_history_long = latents_history_long.flatten(2).transpose(1, 2)
            rotary_emb_history_long = self.rope(frame_indices=indices_latents_history_long, height=H1, width=W1,
                                                device=latents_history_long.device)
            rotary_emb_history_long = pad_for_3d_conv(rotary_emb_history_long, (4, 4, 4))
            rotary_emb_history_long = center_down_sample_3d(rotary_emb_history_long, (4, 4, 4))
            rotary_emb_history_long = rotary_emb_history_long.flatten(2).transpose(1, 2)
            hidden_states = torch.cat([latents_history_long, hidden_states], dim=1)
            rotary_emb = torch.cat([rotary_emb_history_long, rotary_emb], dim=1)

        history_context_length = hidden_states.shape[1] - original_context_length

        if indices_hidden_states is not None and self.zero_history_timestep:
            timestep_t0 = torch.zeros((1), dtype=timestep.dtype, device=timestep.device)
            temb_t0, timestep_proj_t0, _ = self.condition_embedder(timestep_t0, encoder_hidden_states,
                                                                   is_return_encoder_hidden_states=False)
            temb_t0 = temb_t0.unsqueeze(1).expand(batch_size, history_context_length, -1)
            timestep_proj_t0 = (timestep_proj_t0.unflatten(-1, (6, -1)).view(1, 6, 1, -1)
                                .expand(batch_size, -1, history_context_length, -1))

        temb, timestep_proj, encoder_hidden_states = self.condition_embedder(timestep, encoder_hidden_states)
        timestep_proj = timestep_proj.unflatten(-1, (6, -1))

        if indices_hidden_states is not None and not self.zero_history_timestep:
            main_repeat_size = hidden_states.shape[1]
        else:
            main_repeat_size = original_context_length
        temb = temb.view(batch_size, 1, -1).expand(batch_size, main_repeat_size, -1)
        timestep_proj = timestep_proj.view(batch_size, 6, 1, -1).expand(batch_size, 6, main_repeat_size, -1)

        if indices_hidden_states is not None and self.zero_history_timestep:
            temb = torch.cat([temb_t0, temb], dim=1)
            timestep_proj = torch.cat([timestep_proj_t0, timestep_proj], dim=2)

        if timestep_proj.ndim == 4:
            timestep_proj = timestep_proj.permute(0, 2, 1, 3)

        hidden_states = hidden_states.contiguous()
        encoder_hidden_states = encoder_hidden_states.contiguous()
        rotary_emb = rotary_emb.contiguous()
        for block in self.blocks:
            hidden_states = block(hidden_states, encoder_hidden_states, timestep_proj, rotary_emb,
                                  original_context_length)

        hidden_states = self.norm_out(hidden_states, temb, original_context_length)
        hidden_states = self.proj_out(hidden_states)

        hidden_states = hidden_states.reshape(batch_size, post_patch_num_frames, post_patch_height, post_patch_width,
                                              p_t, p_h, p_w, -1)
        hidden_states = hidden_states.permute(0, 7, 1, 4, 2, 5, 3, 6)
        output = hidden_states.flatten(6, 7).flatten(4, 5).flatten(2, 3)
        return (output,)


HISTORY_SIZES = [4, 2, 1]  # long, mid, 1x (HeliosPipeline: [16, 2, 1])
CHUNK = 2  # latent frames per chunk


SMALL = "--small" in sys.argv  # one block: the fixtures/unseen trace


def build():
    # 2 heads of 16 (RoPE t/y/x 4/6/6), 2 blocks, text 16 wide, sinusoid 16 wide.
    return HeliosTransformer3DModel(patch_size=(1, 2, 2), num_attention_heads=2, attention_head_dim=16,
                                    in_channels=4, out_channels=4, text_dim=16, freq_dim=16, ffn_dim=64,
                                    num_layers=1 if SMALL else 2, cross_attn_norm=True, eps=1e-6, rope_dim=(4, 6, 6),
                                    rope_theta=10000.0, guidance_cross_attn=True, zero_history_timestep=True,
                                    has_multi_term_memory_patch=True, is_amplify_history=False)


def inputs(g):
    # HeliosPipeline, keep_first_frame: indices split [prefix, long, mid, 1x, window]; short = [prefix, 1x]
    indices = torch.arange(0, sum([1, *HISTORY_SIZES, CHUNK]))
    prefix, long_, mid, one_x, window = indices.split([1, *HISTORY_SIZES, CHUNK], dim=0)
    short = torch.cat([prefix, one_x], dim=0)
    history = torch.randn((1, 4, sum(HISTORY_SIZES), 4, 4), generator=g)
    h_long, h_mid, h_1x = history.split(HISTORY_SIZES, dim=2)
    prefix_latents = torch.randn((1, 4, 1, 4, 4), generator=g)
    return {"encoder_hidden_states": torch.randn((1, 4, 16), generator=g),
            "indices_hidden_states": window.unsqueeze(0),
            "indices_latents_history_short": short.unsqueeze(0),
            "indices_latents_history_mid": mid.unsqueeze(0),
            "indices_latents_history_long": long_.unsqueeze(0),
            "latents_history_short": torch.cat([prefix_latents, h_1x], dim=2),
            "latents_history_mid": h_mid.contiguous(),
            "latents_history_long": h_long.contiguous(),
            "noise": torch.randn((1, 4, CHUNK, 4, 4), generator=g)}


def call(model, x, sigma, c):
    t = torch.tensor(sigma * 1000, dtype=torch.float32).expand(x.shape[0])
    return model(hidden_states=x, timestep=t, encoder_hidden_states=c["encoder_hidden_states"],
                 indices_hidden_states=c["indices_hidden_states"],
                 indices_latents_history_short=c["indices_latents_history_short"],
                 indices_latents_history_mid=c["indices_latents_history_mid"],
                 indices_latents_history_long=c["indices_latents_history_long"],
                 latents_history_short=c["latents_history_short"], latents_history_mid=c["latents_history_mid"],
                 latents_history_long=c["latents_history_long"], attention_kwargs=None, return_dict=False)[0]


PRODUCER = dict(
    library_source="replica of huggingface/diffusers transformer_helios.py@35d174b85033 and the parts it imports "
                   "(torch 1.13)",
    timestep="sigma*1000 float32, t.expand(B) (HeliosPipeline)",
    velocity="model output as is (flow prediction), not negated",
    note="Helios video DiT (Wan-shaped), 2 blocks: the window's 1x2x2 conv tokens prefixed by [long 4x8x8, mid "
         "2x4x4, short 1x2x2] history tokens (replicate padding to the kernel); one rope module per part from frame "
         "indices on the short grid, [cos t/y/x, sin t/y/x] in one table (4/6/6, interleaved), the mid and long tables "
         "replicate-padded and averaged 2x2x2 / 4x4x4; a timestep per token: history rows modulated by the embedding "
         "of t = 0, window rows by t's; cross-attention on the window rows only; across-heads RMSNorm q/k; GELU-tanh "
         "FFN; output norm and projection on the window rows, modulated per token; history sizes [4, 2, 1], a "
         "2-frame window of 4x4 latents")

if __name__ == "__main__":
    capture("helios", build, inputs, call, sys.argv[1], PRODUCER)
