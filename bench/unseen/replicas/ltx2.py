"""LTX-2 audio-video DiT, reimplemented for torch 1.13 (no diffusers here), captured small in f32 on CPU.

Follows huggingface/diffusers src/diffusers/models/transformers/transformer_ltx2.py at
0528fde41dbdd1ab469de2ccce0b79683463e04f (LTX2VideoTransformer3DModel, LTX2VideoTransformerBlock, LTX2Attention with
LTX2AudioVideoAttnProcessor's __call__ as its forward, LTX2AdaLayerNormSingle, LTX2AudioVideoRotaryPosEmbed,
apply_interleaved_rotary_emb) with the parts it imports: embeddings.py (Timesteps, TimestepEmbedding,
PixArtAlphaCombinedTimestepSizeEmbeddings, PixArtAlphaTextProjection), attention.py (FeedForward, GELU) and
normalization.py (RMSNorm): the same module tree, parameter names and shapes, and call boundaries; the arithmetic line
for line, at the defaults LTX-2.0 uses (no gated attention, no prompt modulation, interleaved RoPE, f64 frequencies).
Stand-ins for what torch 1.13 lacks: torch.nn.RMSNorm (the q/k norms across heads) and dispatch_attention_fn (SDPA's
math on [B, L, H, D], default scale, the additive mask).

The construct: one transformer denoises two latents together. Each block has video and audio self-attention, text
cross-attention for each (each stream its own projected caption), then audio-to-video (q video, k/v audio) and
video-to-audio (q audio, k/v video) cross-attention whose q and k carry RoPE from different tables (the time axis
only, at the audio width), each modulated by a model-level table plus a per-block table; the model returns both
velocities.

Pipeline as LTX2Pipeline (pipelines/ltx2/pipeline_ltx2.py at 002d3e98a0e06a1a280ec2d2fdbde76366cc07f6) calls it with
guidance scale 1 (no unconditional batch, no STG, no modality guidance): packed video latents [B, F·H·W, C] and packed
audio latents [B, L, C·M], the connectors' prompt embeddings (one per stream) and their mask, timestep t.expand(B)
with t the flow-matching scheduler's sigma·1000 (no shift here), video and audio coordinates made once by the rope
modules' prepare_*_coords and passed at every step; each latent stepped by its own copy of the same scheduler:
x ← x + (σ[i+1] − σ[i])·v with its own velocity.

usage: /usr/bin/python3 bench/unseen/replicas/ltx2.py [--small] OUTDIR (--small: one block, the fixture)
"""
import math
import os
import sys
import zipfile

import torch
import torch.nn as nn
import torch.nn.functional as F

from run import SIGMAS, _bf16, _to, get_timestep_embedding, place, sdpa
import zflow_capture
from weights import randomize


def apply_interleaved_rotary_emb(x, freqs):
    cos, sin = freqs
    x_real, x_imag = x.unflatten(2, (-1, 2)).unbind(-1)
    x_rotated = torch.stack([-x_imag, x_real], dim=-1).flatten(2)
    return (x.float() * cos + x_rotated.float() * sin).to(x.dtype)


class Timesteps(nn.Module):
    def __init__(self, num_channels, flip_sin_to_cos, downscale_freq_shift, scale=1):
        super().__init__()
        self.num_channels, self.flip_sin_to_cos = num_channels, flip_sin_to_cos
        self.downscale_freq_shift, self.scale = downscale_freq_shift, scale

    def forward(self, timesteps):
        return get_timestep_embedding(timesteps, self.num_channels, flip_sin_to_cos=self.flip_sin_to_cos,
                                      downscale_freq_shift=self.downscale_freq_shift, scale=self.scale)


class TimestepEmbedding(nn.Module):
    def __init__(self, in_channels, time_embed_dim, sample_proj_bias=True):
        super().__init__()
        self.linear_1 = nn.Linear(in_channels, time_embed_dim, sample_proj_bias)
        self.act = nn.SiLU()
        self.linear_2 = nn.Linear(time_embed_dim, time_embed_dim, sample_proj_bias)

    def forward(self, sample):
        return self.linear_2(self.act(self.linear_1(sample)))


class PixArtAlphaCombinedTimestepSizeEmbeddings(nn.Module):
    def __init__(self, embedding_dim, size_emb_dim, use_additional_conditions=False):
        super().__init__()
        self.outdim = size_emb_dim
        self.time_proj = Timesteps(num_channels=256, flip_sin_to_cos=True, downscale_freq_shift=0)
        self.timestep_embedder = TimestepEmbedding(in_channels=256, time_embed_dim=embedding_dim)
        assert not use_additional_conditions

    def forward(self, timestep, resolution, aspect_ratio, batch_size, hidden_dtype):
        timesteps_proj = self.time_proj(timestep)
        return self.timestep_embedder(timesteps_proj.to(dtype=hidden_dtype))


class PixArtAlphaTextProjection(nn.Module):
    def __init__(self, in_features, hidden_size):
        super().__init__()
        self.linear_1 = nn.Linear(in_features=in_features, out_features=hidden_size, bias=True)
        self.act_1 = nn.GELU(approximate="tanh")
        self.linear_2 = nn.Linear(in_features=hidden_size, out_features=hidden_size, bias=True)

    def forward(self, caption):
        return self.linear_2(self.act_1(self.linear_1(caption)))


class GELU(nn.Module):
    def __init__(self, dim_in, dim_out, approximate="none", bias=True):
        super().__init__()
        self.proj = nn.Linear(dim_in, dim_out, bias=bias)
        self.approximate = approximate

    def forward(self, hidden_states):
        return F.gelu(self.proj(hidden_states), approximate=self.approximate)


class FeedForward(nn.Module):
    """attention.FeedForward(dim, activation_fn "gelu-approximate"): mult 4, bias True."""

    def __init__(self, dim, mult=4, activation_fn="gelu-approximate"):
        super().__init__()
        assert activation_fn == "gelu-approximate"
        inner_dim = int(dim * mult)
        self.net = nn.ModuleList([GELU(dim, inner_dim, approximate="tanh"), nn.Dropout(0.0), nn.Linear(inner_dim, dim)])

    def forward(self, hidden_states):
        for module in self.net:
            hidden_states = module(hidden_states)
        return hidden_states


class RMSNorm(nn.Module):
    """normalization.RMSNorm(dim, eps, elementwise_affine): f32 statistics, no weight when not affine."""

    def __init__(self, dim, eps, elementwise_affine=True):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim)) if elementwise_affine else None

    def forward(self, hidden_states):
        input_dtype = hidden_states.dtype
        variance = hidden_states.to(torch.float32).pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.eps)
        if self.weight is not None:
            return hidden_states.to(self.weight.dtype) * self.weight
        return hidden_states.to(input_dtype)


class TorchRMSNorm(nn.Module):
    """torch.nn.RMSNorm(dim, eps, elementwise_affine=True) (torch 2.4+): x·rsqrt(mean(x²) + eps)·weight."""

    def __init__(self, dim, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        xf = x.float()  # aten's composite: f32 statistics and x̂, cast back, then ·weight
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)).type_as(x) * self.weight


class LTX2AdaLayerNormSingle(nn.Module):
    def __init__(self, embedding_dim, num_mod_params=6, use_additional_conditions=False):
        super().__init__()
        self.num_mod_params = num_mod_params
        self.emb = PixArtAlphaCombinedTimestepSizeEmbeddings(embedding_dim, size_emb_dim=embedding_dim // 3,
                                                             use_additional_conditions=use_additional_conditions)
        self.silu = nn.SiLU()
        self.linear = nn.Linear(embedding_dim, self.num_mod_params * embedding_dim, bias=True)

    def forward(self, timestep, added_cond_kwargs=None, batch_size=None, hidden_dtype=None):
        added_cond_kwargs = added_cond_kwargs or {"resolution": None, "aspect_ratio": None}
        embedded_timestep = self.emb(timestep, **added_cond_kwargs, batch_size=batch_size, hidden_dtype=hidden_dtype)
        return self.linear(self.silu(embedded_timestep)), embedded_timestep


class LTX2Attention(nn.Module):
    """LTX2Attention with LTX2AudioVideoAttnProcessor's __call__ as its forward (no gate logits)."""

    def __init__(self, query_dim, heads=8, kv_heads=8, dim_head=64, bias=True, cross_attention_dim=None,
                 out_bias=True, norm_eps=1e-6, rope_type="interleaved"):
        super().__init__()
        self.head_dim = dim_head
        self.inner_dim = dim_head * heads
        self.inner_kv_dim = dim_head * kv_heads
        self.cross_attention_dim = cross_attention_dim if cross_attention_dim is not None else query_dim
        self.heads = heads
        self.rope_type = rope_type
        self.norm_q = TorchRMSNorm(dim_head * heads, eps=norm_eps)
        self.norm_k = TorchRMSNorm(dim_head * kv_heads, eps=norm_eps)
        self.to_q = nn.Linear(query_dim, self.inner_dim, bias=bias)
        self.to_k = nn.Linear(self.cross_attention_dim, self.inner_kv_dim, bias=bias)
        self.to_v = nn.Linear(self.cross_attention_dim, self.inner_kv_dim, bias=bias)
        self.to_out = nn.ModuleList([nn.Linear(self.inner_dim, query_dim, bias=out_bias), nn.Dropout(0.0)])
        self.to_gate_logits = None

    def prepare_attention_mask(self, attention_mask, target_length, batch_size, out_dim=3):
        """attention_processor.Attention.prepare_attention_mask (AttentionModuleMixin)."""
        current_length = attention_mask.shape[-1]
        if current_length != target_length:
            attention_mask = F.pad(attention_mask, (0, target_length), value=0.0)
        if out_dim == 3:
            if attention_mask.shape[0] < batch_size * self.heads:
                attention_mask = attention_mask.repeat_interleave(self.heads, dim=0)
        elif out_dim == 4:
            attention_mask = attention_mask.unsqueeze(1).repeat_interleave(self.heads, dim=1)
        return attention_mask

    def forward(self, hidden_states, encoder_hidden_states=None, attention_mask=None, query_rotary_emb=None,
                key_rotary_emb=None):
        attn = self
        batch_size, sequence_length, _ = (
            hidden_states.shape if encoder_hidden_states is None else encoder_hidden_states.shape)
        if attention_mask is not None:
            attention_mask = attn.prepare_attention_mask(attention_mask, sequence_length, batch_size)
            attention_mask = attention_mask.view(batch_size, attn.heads, -1, attention_mask.shape[-1])
        if encoder_hidden_states is None:
            encoder_hidden_states = hidden_states
        query = attn.to_q(hidden_states)
        key = attn.to_k(encoder_hidden_states)
        value = attn.to_v(encoder_hidden_states)
        query = attn.norm_q(query)
        key = attn.norm_k(key)
        if query_rotary_emb is not None:
            query = apply_interleaved_rotary_emb(query, query_rotary_emb)
            key = apply_interleaved_rotary_emb(key, key_rotary_emb if key_rotary_emb is not None else query_rotary_emb)
        query = query.unflatten(2, (attn.heads, -1))
        key = key.unflatten(2, (attn.heads, -1))
        value = value.unflatten(2, (attn.heads, -1))
        # dispatch_attention_fn on [B, L, H, D]: SDPA over [B, H, L, D]
        hidden_states = sdpa(query.transpose(1, 2), key.transpose(1, 2), value.transpose(1, 2),
                             mask=attention_mask).transpose(1, 2)
        hidden_states = hidden_states.flatten(2, 3)
        hidden_states = hidden_states.to(query.dtype)
        hidden_states = attn.to_out[0](hidden_states)
        hidden_states = attn.to_out[1](hidden_states)
        return hidden_states


class LTX2VideoTransformerBlock(nn.Module):
    def __init__(self, dim, num_attention_heads, attention_head_dim, cross_attention_dim, audio_dim,
                 audio_num_attention_heads, audio_attention_head_dim, audio_cross_attention_dim,
                 activation_fn="gelu-approximate", attention_bias=True, attention_out_bias=True, eps=1e-6,
                 elementwise_affine=False, rope_type="interleaved"):
        super().__init__()
        kw = dict(bias=attention_bias, out_bias=attention_out_bias, rope_type=rope_type)
        self.norm1 = RMSNorm(dim, eps=eps, elementwise_affine=elementwise_affine)
        self.attn1 = LTX2Attention(dim, num_attention_heads, num_attention_heads, attention_head_dim, **kw)
        self.audio_norm1 = RMSNorm(audio_dim, eps=eps, elementwise_affine=elementwise_affine)
        self.audio_attn1 = LTX2Attention(audio_dim, audio_num_attention_heads, audio_num_attention_heads,
                                         audio_attention_head_dim, **kw)
        self.norm2 = RMSNorm(dim, eps=eps, elementwise_affine=elementwise_affine)
        self.attn2 = LTX2Attention(dim, num_attention_heads, num_attention_heads, attention_head_dim,
                                   cross_attention_dim=cross_attention_dim, **kw)
        self.audio_norm2 = RMSNorm(audio_dim, eps=eps, elementwise_affine=elementwise_affine)
        self.audio_attn2 = LTX2Attention(audio_dim, audio_num_attention_heads, audio_num_attention_heads,
                                         audio_attention_head_dim, cross_attention_dim=audio_cross_attention_dim, **kw)
        self.audio_to_video_norm = RMSNorm(dim, eps=eps, elementwise_affine=elementwise_affine)
        self.audio_to_video_attn = LTX2Attention(dim, audio_num_attention_heads, audio_num_attention_heads,
                                                 audio_attention_head_dim, cross_attention_dim=audio_dim, **kw)
        self.video_to_audio_norm = RMSNorm(audio_dim, eps=eps, elementwise_affine=elementwise_affine)
        self.video_to_audio_attn = LTX2Attention(audio_dim, audio_num_attention_heads, audio_num_attention_heads,
                                                 audio_attention_head_dim, cross_attention_dim=dim, **kw)
        self.norm3 = RMSNorm(dim, eps=eps, elementwise_affine=elementwise_affine)
        self.ff = FeedForward(dim, activation_fn=activation_fn)
        self.audio_norm3 = RMSNorm(audio_dim, eps=eps, elementwise_affine=elementwise_affine)
        self.audio_ff = FeedForward(audio_dim, activation_fn=activation_fn)
        self.scale_shift_table = nn.Parameter(torch.randn(6, dim) / dim ** 0.5)
        self.audio_scale_shift_table = nn.Parameter(torch.randn(6, audio_dim) / audio_dim ** 0.5)
        self.video_a2v_cross_attn_scale_shift_table = nn.Parameter(torch.randn(5, dim))
        self.audio_a2v_cross_attn_scale_shift_table = nn.Parameter(torch.randn(5, audio_dim))

    @staticmethod
    def get_mod_params(scale_shift_table, temb, batch_size):
        num_ada_params = scale_shift_table.shape[0]
        ada_values = scale_shift_table[None, None].to(temb.device) + temb.reshape(
            batch_size, temb.shape[1], num_ada_params, -1)
        return ada_values.unbind(dim=2)

    def forward(self, hidden_states, audio_hidden_states, encoder_hidden_states, audio_encoder_hidden_states, temb,
                temb_audio, temb_ca_scale_shift, temb_ca_audio_scale_shift, temb_ca_gate, temb_ca_audio_gate,
                video_rotary_emb=None, audio_rotary_emb=None, ca_video_rotary_emb=None, ca_audio_rotary_emb=None,
                encoder_attention_mask=None, audio_encoder_attention_mask=None, a2v_cross_attention_mask=None,
                v2a_cross_attention_mask=None):
        batch_size = hidden_states.size(0)
        shift_msa, scale_msa, gate_msa, shift_mlp, scale_mlp, gate_mlp = self.get_mod_params(
            self.scale_shift_table, temb, batch_size)[:6]
        norm_hidden_states = self.norm1(hidden_states)
        norm_hidden_states = norm_hidden_states * (1 + scale_msa) + shift_msa
        attn_hidden_states = self.attn1(hidden_states=norm_hidden_states, encoder_hidden_states=None,
                                        query_rotary_emb=video_rotary_emb)
        hidden_states = hidden_states + attn_hidden_states * gate_msa

        (audio_shift_msa, audio_scale_msa, audio_gate_msa, audio_shift_mlp, audio_scale_mlp,
         audio_gate_mlp) = self.get_mod_params(self.audio_scale_shift_table, temb_audio, batch_size)[:6]
        norm_audio_hidden_states = self.audio_norm1(audio_hidden_states)
        norm_audio_hidden_states = norm_audio_hidden_states * (1 + audio_scale_msa) + audio_shift_msa
        attn_audio_hidden_states = self.audio_attn1(hidden_states=norm_audio_hidden_states,
                                                    encoder_hidden_states=None, query_rotary_emb=audio_rotary_emb)
        audio_hidden_states = audio_hidden_states + attn_audio_hidden_states * audio_gate_msa

        norm_hidden_states = self.norm2(hidden_states)
        attn_hidden_states = self.attn2(norm_hidden_states, encoder_hidden_states=encoder_hidden_states,
                                        query_rotary_emb=None, attention_mask=encoder_attention_mask)
        hidden_states = hidden_states + attn_hidden_states

        norm_audio_hidden_states = self.audio_norm2(audio_hidden_states)
        attn_audio_hidden_states = self.audio_attn2(norm_audio_hidden_states,
                                                    encoder_hidden_states=audio_encoder_hidden_states,
                                                    query_rotary_emb=None, attention_mask=audio_encoder_attention_mask)
        audio_hidden_states = audio_hidden_states + attn_audio_hidden_states

        norm_hidden_states = self.audio_to_video_norm(hidden_states)
        norm_audio_hidden_states = self.video_to_audio_norm(audio_hidden_states)

        video_per_layer_ca_scale_shift = self.video_a2v_cross_attn_scale_shift_table[:4, :]
        video_per_layer_ca_gate = self.video_a2v_cross_attn_scale_shift_table[4:, :]
        video_ca_ada_params = self.get_mod_params(video_per_layer_ca_scale_shift, temb_ca_scale_shift, batch_size)
        video_ca_gate_param = self.get_mod_params(video_per_layer_ca_gate, temb_ca_gate, batch_size)
        video_a2v_ca_scale, video_a2v_ca_shift, video_v2a_ca_scale, video_v2a_ca_shift = video_ca_ada_params
        a2v_gate = video_ca_gate_param[0].squeeze(2)

        audio_per_layer_ca_scale_shift = self.audio_a2v_cross_attn_scale_shift_table[:4, :]
        audio_per_layer_ca_gate = self.audio_a2v_cross_attn_scale_shift_table[4:, :]
        audio_ca_ada_params = self.get_mod_params(audio_per_layer_ca_scale_shift, temb_ca_audio_scale_shift,
                                                  batch_size)
        audio_ca_gate_param = self.get_mod_params(audio_per_layer_ca_gate, temb_ca_audio_gate, batch_size)
        audio_a2v_ca_scale, audio_a2v_ca_shift, audio_v2a_ca_scale, audio_v2a_ca_shift = audio_ca_ada_params
        v2a_gate = audio_ca_gate_param[0].squeeze(2)

        mod_norm_hidden_states = norm_hidden_states * (1 + video_a2v_ca_scale.squeeze(2)) + video_a2v_ca_shift.squeeze(2)
        mod_norm_audio_hidden_states = norm_audio_hidden_states * (
            1 + audio_a2v_ca_scale.squeeze(2)) + audio_a2v_ca_shift.squeeze(2)
        a2v_attn_hidden_states = self.audio_to_video_attn(
            mod_norm_hidden_states, encoder_hidden_states=mod_norm_audio_hidden_states,
            query_rotary_emb=ca_video_rotary_emb, key_rotary_emb=ca_audio_rotary_emb,
            attention_mask=a2v_cross_attention_mask)
        hidden_states = hidden_states + a2v_gate * a2v_attn_hidden_states

        mod_norm_hidden_states = norm_hidden_states * (1 + video_v2a_ca_scale.squeeze(2)) + video_v2a_ca_shift.squeeze(2)
        mod_norm_audio_hidden_states = norm_audio_hidden_states * (
            1 + audio_v2a_ca_scale.squeeze(2)) + audio_v2a_ca_shift.squeeze(2)
        v2a_attn_hidden_states = self.video_to_audio_attn(
            mod_norm_audio_hidden_states, encoder_hidden_states=mod_norm_hidden_states,
            query_rotary_emb=ca_audio_rotary_emb, key_rotary_emb=ca_video_rotary_emb,
            attention_mask=v2a_cross_attention_mask)
        audio_hidden_states = audio_hidden_states + v2a_gate * v2a_attn_hidden_states

        norm_hidden_states = self.norm3(hidden_states) * (1 + scale_mlp) + shift_mlp
        ff_output = self.ff(norm_hidden_states)
        hidden_states = hidden_states + ff_output * gate_mlp

        norm_audio_hidden_states = self.audio_norm3(audio_hidden_states) * (1 + audio_scale_mlp) + audio_shift_mlp
        audio_ff_output = self.audio_ff(norm_audio_hidden_states)
        audio_hidden_states = audio_hidden_states + audio_ff_output * audio_gate_mlp
        return hidden_states, audio_hidden_states


class LTX2AudioVideoRotaryPosEmbed(nn.Module):
    def __init__(self, dim, patch_size=1, patch_size_t=1, base_num_frames=20, base_height=2048, base_width=2048,
                 sampling_rate=16000, hop_length=160, scale_factors=(8, 32, 32), theta=10000.0, causal_offset=1,
                 modality="video", double_precision=True, rope_type="interleaved", num_attention_heads=32):
        super().__init__()
        assert rope_type == "interleaved"
        self.dim, self.patch_size, self.patch_size_t = dim, patch_size, patch_size_t
        self.rope_type, self.base_num_frames, self.num_attention_heads = rope_type, base_num_frames, num_attention_heads
        self.base_height, self.base_width = base_height, base_width
        self.sampling_rate, self.hop_length = sampling_rate, hop_length
        self.audio_latents_per_second = float(sampling_rate) / float(hop_length) / float(scale_factors[0])
        self.scale_factors, self.theta, self.causal_offset = scale_factors, theta, causal_offset
        self.modality, self.double_precision = modality, double_precision

    def prepare_video_coords(self, batch_size, num_frames, height, width, device, fps=24.0):
        grid_f = torch.arange(start=0, end=num_frames, step=self.patch_size_t, dtype=torch.float32, device=device)
        grid_h = torch.arange(start=0, end=height, step=self.patch_size, dtype=torch.float32, device=device)
        grid_w = torch.arange(start=0, end=width, step=self.patch_size, dtype=torch.float32, device=device)
        grid = torch.meshgrid(grid_f, grid_h, grid_w, indexing="ij")
        grid = torch.stack(grid, dim=0)
        patch_size = (self.patch_size_t, self.patch_size, self.patch_size)
        patch_size_delta = torch.tensor(patch_size, dtype=grid.dtype, device=grid.device)
        patch_ends = grid + patch_size_delta.view(3, 1, 1, 1)
        latent_coords = torch.stack([grid, patch_ends], dim=-1)
        latent_coords = latent_coords.flatten(1, 3)
        latent_coords = latent_coords.unsqueeze(0).repeat(batch_size, 1, 1, 1)
        scale_tensor = torch.tensor(self.scale_factors, device=latent_coords.device)
        broadcast_shape = [1] * latent_coords.ndim
        broadcast_shape[1] = -1
        pixel_coords = latent_coords * scale_tensor.view(*broadcast_shape)
        pixel_coords[:, 0, ...] = (pixel_coords[:, 0, ...] + self.causal_offset - self.scale_factors[0]).clamp(min=0)
        pixel_coords[:, 0, ...] = pixel_coords[:, 0, ...] / fps
        return pixel_coords

    def prepare_audio_coords(self, batch_size, num_frames, device, shift=0):
        grid_f = torch.arange(start=shift, end=num_frames + shift, step=self.patch_size_t, dtype=torch.float32,
                              device=device)
        audio_scale_factor = self.scale_factors[0]
        grid_start_mel = grid_f * audio_scale_factor
        grid_start_mel = (grid_start_mel + self.causal_offset - audio_scale_factor).clip(min=0)
        grid_start_s = grid_start_mel * self.hop_length / self.sampling_rate
        grid_end_mel = (grid_f + self.patch_size_t) * audio_scale_factor
        grid_end_mel = (grid_end_mel + self.causal_offset - audio_scale_factor).clip(min=0)
        grid_end_s = grid_end_mel * self.hop_length / self.sampling_rate
        audio_coords = torch.stack([grid_start_s, grid_end_s], dim=-1)
        audio_coords = audio_coords.unsqueeze(0).expand(batch_size, -1, -1)
        return audio_coords.unsqueeze(1)

    def forward(self, coords, device=None):
        device = device or coords.device
        num_pos_dims = coords.shape[1]
        if coords.ndim == 4:
            coords_start, coords_end = coords.chunk(2, dim=-1)
            coords = (coords_start + coords_end) / 2.0
            coords = coords.squeeze(-1)
        if self.modality == "video":
            max_positions = (self.base_num_frames, self.base_height, self.base_width)
        else:
            max_positions = (self.base_num_frames,)
        grid = torch.stack([coords[:, i] / max_positions[i] for i in range(num_pos_dims)], dim=-1).to(device)
        num_rope_elems = num_pos_dims * 2
        freqs_dtype = torch.float64 if self.double_precision else torch.float32
        pow_indices = torch.pow(self.theta, torch.linspace(start=0.0, end=1.0, steps=self.dim // num_rope_elems,
                                                           dtype=freqs_dtype, device=device))
        freqs = (pow_indices * torch.pi / 2.0).to(dtype=torch.float32)
        freqs = (grid.unsqueeze(-1) * 2 - 1) * freqs
        freqs = freqs.transpose(-1, -2).flatten(2)
        cos_freqs = freqs.cos().repeat_interleave(2, dim=-1)
        sin_freqs = freqs.sin().repeat_interleave(2, dim=-1)
        if self.dim % num_rope_elems != 0:
            cos_padding = torch.ones_like(cos_freqs[:, :, : self.dim % num_rope_elems])
            sin_padding = torch.zeros_like(cos_freqs[:, :, : self.dim % num_rope_elems])
            cos_freqs = torch.cat([cos_padding, cos_freqs], dim=-1)
            sin_freqs = torch.cat([sin_padding, sin_freqs], dim=-1)
        return cos_freqs, sin_freqs


class LTX2VideoTransformer3DModel(nn.Module):
    def __init__(self, in_channels=128, out_channels=128, patch_size=1, patch_size_t=1, num_attention_heads=32,
                 attention_head_dim=128, cross_attention_dim=4096, vae_scale_factors=(8, 32, 32), pos_embed_max_pos=20,
                 base_height=2048, base_width=2048, audio_in_channels=128, audio_out_channels=128,
                 audio_patch_size=1, audio_patch_size_t=1, audio_num_attention_heads=32, audio_attention_head_dim=64,
                 audio_cross_attention_dim=2048, audio_scale_factor=4, audio_pos_embed_max_pos=20,
                 audio_sampling_rate=16000, audio_hop_length=160, num_layers=48, activation_fn="gelu-approximate",
                 norm_elementwise_affine=False, norm_eps=1e-6, caption_channels=3840, attention_bias=True,
                 attention_out_bias=True, rope_theta=10000.0, rope_double_precision=True, causal_offset=1,
                 timestep_scale_multiplier=1000, cross_attn_timestep_scale_multiplier=1000, rope_type="interleaved"):
        super().__init__()
        self.timestep_scale_multiplier = timestep_scale_multiplier
        self.cross_attn_timestep_scale_multiplier = cross_attn_timestep_scale_multiplier
        inner_dim = num_attention_heads * attention_head_dim
        audio_inner_dim = audio_num_attention_heads * audio_attention_head_dim
        self.proj_in = nn.Linear(in_channels, inner_dim)
        self.audio_proj_in = nn.Linear(audio_in_channels, audio_inner_dim)
        self.caption_projection = PixArtAlphaTextProjection(in_features=caption_channels, hidden_size=inner_dim)
        self.audio_caption_projection = PixArtAlphaTextProjection(in_features=caption_channels,
                                                                  hidden_size=audio_inner_dim)
        self.time_embed = LTX2AdaLayerNormSingle(inner_dim, num_mod_params=6)
        self.audio_time_embed = LTX2AdaLayerNormSingle(audio_inner_dim, num_mod_params=6)
        self.av_cross_attn_video_scale_shift = LTX2AdaLayerNormSingle(inner_dim, num_mod_params=4)
        self.av_cross_attn_audio_scale_shift = LTX2AdaLayerNormSingle(audio_inner_dim, num_mod_params=4)
        self.av_cross_attn_video_a2v_gate = LTX2AdaLayerNormSingle(inner_dim, num_mod_params=1)
        self.av_cross_attn_audio_v2a_gate = LTX2AdaLayerNormSingle(audio_inner_dim, num_mod_params=1)
        self.scale_shift_table = nn.Parameter(torch.randn(2, inner_dim) / inner_dim ** 0.5)
        self.audio_scale_shift_table = nn.Parameter(torch.randn(2, audio_inner_dim) / audio_inner_dim ** 0.5)
        rope_kw = dict(theta=rope_theta, causal_offset=causal_offset, double_precision=rope_double_precision,
                       rope_type=rope_type)
        self.rope = LTX2AudioVideoRotaryPosEmbed(
            dim=inner_dim, patch_size=patch_size, patch_size_t=patch_size_t, base_num_frames=pos_embed_max_pos,
            base_height=base_height, base_width=base_width, scale_factors=vae_scale_factors, modality="video",
            num_attention_heads=num_attention_heads, **rope_kw)
        self.audio_rope = LTX2AudioVideoRotaryPosEmbed(
            dim=audio_inner_dim, patch_size=audio_patch_size, patch_size_t=audio_patch_size_t,
            base_num_frames=audio_pos_embed_max_pos, sampling_rate=audio_sampling_rate, hop_length=audio_hop_length,
            scale_factors=[audio_scale_factor], modality="audio", num_attention_heads=audio_num_attention_heads,
            **rope_kw)
        cross_attn_pos_embed_max_pos = max(pos_embed_max_pos, audio_pos_embed_max_pos)
        self.cross_attn_rope = LTX2AudioVideoRotaryPosEmbed(
            dim=audio_cross_attention_dim, patch_size=patch_size, patch_size_t=patch_size_t,
            base_num_frames=cross_attn_pos_embed_max_pos, base_height=base_height, base_width=base_width,
            modality="video", num_attention_heads=num_attention_heads, **rope_kw)
        self.cross_attn_audio_rope = LTX2AudioVideoRotaryPosEmbed(
            dim=audio_cross_attention_dim, patch_size=audio_patch_size, patch_size_t=audio_patch_size_t,
            base_num_frames=cross_attn_pos_embed_max_pos, sampling_rate=audio_sampling_rate,
            hop_length=audio_hop_length, modality="audio", num_attention_heads=audio_num_attention_heads, **rope_kw)
        self.transformer_blocks = nn.ModuleList([
            LTX2VideoTransformerBlock(
                dim=inner_dim, num_attention_heads=num_attention_heads, attention_head_dim=attention_head_dim,
                cross_attention_dim=cross_attention_dim, audio_dim=audio_inner_dim,
                audio_num_attention_heads=audio_num_attention_heads, audio_attention_head_dim=audio_attention_head_dim,
                audio_cross_attention_dim=audio_cross_attention_dim, activation_fn=activation_fn,
                attention_bias=attention_bias, attention_out_bias=attention_out_bias, eps=norm_eps,
                elementwise_affine=norm_elementwise_affine, rope_type=rope_type)
            for _ in range(num_layers)])
        self.norm_out = nn.LayerNorm(inner_dim, eps=1e-6, elementwise_affine=False)
        self.proj_out = nn.Linear(inner_dim, out_channels)
        self.audio_norm_out = nn.LayerNorm(audio_inner_dim, eps=1e-6, elementwise_affine=False)
        self.audio_proj_out = nn.Linear(audio_inner_dim, audio_out_channels)

    def forward(self, hidden_states, audio_hidden_states, encoder_hidden_states, audio_encoder_hidden_states, timestep,
                audio_timestep=None, encoder_attention_mask=None, audio_encoder_attention_mask=None, num_frames=None,
                height=None, width=None, fps=24.0, audio_num_frames=None, video_coords=None, audio_coords=None,
                return_dict=True):
        audio_timestep = audio_timestep if audio_timestep is not None else timestep
        if encoder_attention_mask is not None and encoder_attention_mask.ndim == 2:
            encoder_attention_mask = (1 - encoder_attention_mask.to(hidden_states.dtype)) * -10000.0
            encoder_attention_mask = encoder_attention_mask.unsqueeze(1)
        if audio_encoder_attention_mask is not None and audio_encoder_attention_mask.ndim == 2:
            audio_encoder_attention_mask = (1 - audio_encoder_attention_mask.to(audio_hidden_states.dtype)) * -10000.0
            audio_encoder_attention_mask = audio_encoder_attention_mask.unsqueeze(1)
        batch_size = hidden_states.size(0)
        if video_coords is None:
            video_coords = self.rope.prepare_video_coords(batch_size, num_frames, height, width, hidden_states.device,
                                                          fps=fps)
        if audio_coords is None:
            audio_coords = self.audio_rope.prepare_audio_coords(batch_size, audio_num_frames,
                                                                audio_hidden_states.device)
        video_rotary_emb = self.rope(video_coords, device=hidden_states.device)
        audio_rotary_emb = self.audio_rope(audio_coords, device=audio_hidden_states.device)
        video_cross_attn_rotary_emb = self.cross_attn_rope(video_coords[:, 0:1, :], device=hidden_states.device)
        audio_cross_attn_rotary_emb = self.cross_attn_audio_rope(audio_coords[:, 0:1, :],
                                                                 device=audio_hidden_states.device)

        hidden_states = self.proj_in(hidden_states)
        audio_hidden_states = self.audio_proj_in(audio_hidden_states)

        timestep_cross_attn_gate_scale_factor = (self.cross_attn_timestep_scale_multiplier
                                                 / self.timestep_scale_multiplier)
        temb, embedded_timestep = self.time_embed(timestep.flatten(), batch_size=batch_size,
                                                  hidden_dtype=hidden_states.dtype)
        temb = temb.view(batch_size, -1, temb.size(-1))
        embedded_timestep = embedded_timestep.view(batch_size, -1, embedded_timestep.size(-1))
        temb_audio, audio_embedded_timestep = self.audio_time_embed(audio_timestep.flatten(), batch_size=batch_size,
                                                                    hidden_dtype=audio_hidden_states.dtype)
        temb_audio = temb_audio.view(batch_size, -1, temb_audio.size(-1))
        audio_embedded_timestep = audio_embedded_timestep.view(batch_size, -1, audio_embedded_timestep.size(-1))

        video_cross_attn_scale_shift, _ = self.av_cross_attn_video_scale_shift(
            timestep.flatten(), batch_size=batch_size, hidden_dtype=hidden_states.dtype)
        video_cross_attn_a2v_gate, _ = self.av_cross_attn_video_a2v_gate(
            timestep.flatten() * timestep_cross_attn_gate_scale_factor, batch_size=batch_size,
            hidden_dtype=hidden_states.dtype)
        video_cross_attn_scale_shift = video_cross_attn_scale_shift.view(
            batch_size, -1, video_cross_attn_scale_shift.shape[-1])
        video_cross_attn_a2v_gate = video_cross_attn_a2v_gate.view(batch_size, -1, video_cross_attn_a2v_gate.shape[-1])
        audio_cross_attn_scale_shift, _ = self.av_cross_attn_audio_scale_shift(
            audio_timestep.flatten(), batch_size=batch_size, hidden_dtype=audio_hidden_states.dtype)
        audio_cross_attn_v2a_gate, _ = self.av_cross_attn_audio_v2a_gate(
            audio_timestep.flatten() * timestep_cross_attn_gate_scale_factor, batch_size=batch_size,
            hidden_dtype=audio_hidden_states.dtype)
        audio_cross_attn_scale_shift = audio_cross_attn_scale_shift.view(
            batch_size, -1, audio_cross_attn_scale_shift.shape[-1])
        audio_cross_attn_v2a_gate = audio_cross_attn_v2a_gate.view(batch_size, -1, audio_cross_attn_v2a_gate.shape[-1])

        encoder_hidden_states = self.caption_projection(encoder_hidden_states)
        encoder_hidden_states = encoder_hidden_states.view(batch_size, -1, hidden_states.size(-1))
        audio_encoder_hidden_states = self.audio_caption_projection(audio_encoder_hidden_states)
        audio_encoder_hidden_states = audio_encoder_hidden_states.view(batch_size, -1, audio_hidden_states.size(-1))

        for block in self.transformer_blocks:
            hidden_states, audio_hidden_states = block(
                hidden_states=hidden_states, audio_hidden_states=audio_hidden_states,
                encoder_hidden_states=encoder_hidden_states, audio_encoder_hidden_states=audio_encoder_hidden_states,
                temb=temb, temb_audio=temb_audio, temb_ca_scale_shift=video_cross_attn_scale_shift,
                temb_ca_audio_scale_shift=audio_cross_attn_scale_shift, temb_ca_gate=video_cross_attn_a2v_gate,
                temb_ca_audio_gate=audio_cross_attn_v2a_gate, video_rotary_emb=video_rotary_emb,
                audio_rotary_emb=audio_rotary_emb, ca_video_rotary_emb=video_cross_attn_rotary_emb,
                ca_audio_rotary_emb=audio_cross_attn_rotary_emb, encoder_attention_mask=encoder_attention_mask,
                audio_encoder_attention_mask=audio_encoder_attention_mask)

        scale_shift_values = self.scale_shift_table[None, None] + embedded_timestep[:, :, None]
        shift, scale = scale_shift_values[:, :, 0], scale_shift_values[:, :, 1]
        hidden_states = self.norm_out(hidden_states)
        hidden_states = hidden_states * (1 + scale) + shift
        output = self.proj_out(hidden_states)

        audio_scale_shift_values = self.audio_scale_shift_table[None, None] + audio_embedded_timestep[:, :, None]
        audio_shift, audio_scale = audio_scale_shift_values[:, :, 0], audio_scale_shift_values[:, :, 1]
        audio_hidden_states = self.audio_norm_out(audio_hidden_states)
        audio_hidden_states = audio_hidden_states * (1 + audio_scale) + audio_shift
        audio_output = self.audio_proj_out(audio_hidden_states)
        return (output, audio_output)


# Small LTX-2: video 2 heads of 8 (RoPE over 3 axes: 2 frequencies each, 4 padding channels, as 4096 % 6 = 4
# upstream), audio 2 heads of 4, two blocks, 8 video latent channels (128 upstream), audio latents 2 channels × 4 mel
# bins packed to 8, a caption of 4 tokens 12 wide (the last one masked), latent video 2×2×2, 4 audio latent frames.
FRAMES, HEIGHT, WIDTH, AUDIO_FRAMES, FPS = 2, 2, 2, 4, 24.0


def build(layers=2):
    return LTX2VideoTransformer3DModel(
        in_channels=8, out_channels=8, num_attention_heads=2, attention_head_dim=8, cross_attention_dim=16,
        audio_in_channels=8, audio_out_channels=8, audio_num_attention_heads=2, audio_attention_head_dim=4,
        audio_cross_attention_dim=8, num_layers=layers, caption_channels=12)


def inputs(model, g):
    mask = torch.ones(1, 4, dtype=torch.int64)
    mask[:, 3:] = 0
    return {
        "prompt_embeds": torch.randn((1, 4, 12), generator=g),
        "audio_prompt_embeds": torch.randn((1, 4, 12), generator=g),
        "prompt_attention_mask": mask,
        "video_coords": model.rope.prepare_video_coords(1, FRAMES, HEIGHT, WIDTH, "cpu", fps=FPS),
        "audio_coords": model.audio_rope.prepare_audio_coords(1, AUDIO_FRAMES, "cpu"),
        "noise": torch.randn((1, FRAMES * HEIGHT * WIDTH, 8), generator=g),
        "audio_noise": torch.randn((1, AUDIO_FRAMES, 8), generator=g),
    }


PRODUCER = dict(
    library_source="replica of huggingface/diffusers transformer_ltx2.py@0528fde41dbd and the parts it imports "
                   "(torch 1.13)",
    timestep="sigma*1000 float32 expanded to the batch, the same for both latents (LTX2Pipeline, no shift)",
    velocity="two model outputs as they are: out.0 steps the video latents, out.1 the audio latents, each "
             "x + (sigma[i+1] - sigma[i])·v with its own copy of the same scheduler",
    note="LTX-2.0 audio-video DiT, two blocks: packed video rows and audio rows each projected in; each stream's "
         "caption through its own GELU-tanh projection; AdaLN-single timestep embedders (256-channel [cos, sin] "
         "sinusoid, SiLU MLP) for each stream's 6-chunk modulation, the a2v/v2a scale-shift (4 chunks) and gates (1 "
         "chunk, timestep × 1000/1000), each added to a per-block table (the cross tables' rows [:4] and [4:]); "
         "blocks: modulated non-affine RMSNorm → self-attention (RMSNorm q/k across heads, interleaved RoPE, tables "
         "from the coordinates' midpoints over (20, 2048, 2048), theta 10000, f64 frequencies, 4 leading padding "
         "channels for video) gated; text cross-attention after a plain RMSNorm, ungated, the mask as a -10000 bias; "
         "audio-to-video and video-to-audio cross-attention from separately modulated RMSNorms, q and k rotated by "
         "time-only tables at the audio width, gated; FFN (GELU-tanh) modulated and gated; final non-affine "
         "LayerNorm modulated by a table + the embedded timestep")


def main(outdir, layers=2):
    """The capture loop of run.py for two latents: both passed to one call per step, each updated by its own
    velocity with the same σ schedule (LTX2Pipeline's loop without guidance)."""
    torch.manual_seed(0)
    model = build(layers)
    randomize(model, torch.Generator().manual_seed(1))
    model = model.eval()
    cond = inputs(model, torch.Generator().manual_seed(2))
    x, a = cond.pop("noise"), cond.pop("audio_noise")
    # REPLICA_DTYPE=bf16 [REPLICA_DEVICE=cuda] as run.py's capture: the model and the floating inputs in bf16
    # (the coordinates kept f32, as the model makes its own), the latents updated in their dtype
    tag = os.environ.get("REPLICA_DTYPE", "f32")
    device = os.environ.get("REPLICA_DEVICE", "cpu")
    if tag == "bf16":
        model = place(model, torch.bfloat16, device)
        cond = {k: v if "coords" in k else _bf16(k, v) for k, v in cond.items()}
        x, a = x.to(torch.bfloat16), a.to(torch.bfloat16)
    elif tag != "f32":
        raise SystemExit(f"REPLICA_DTYPE={tag}: f32 or bf16")
    if device != "cpu":
        if tag != "bf16":
            raise SystemExit("REPLICA_DEVICE: for the bf16 run only (the f32 reference runs on the CPU)")
        cond = {k: _to(v, device) for k, v in cond.items()}
        x, a = x.to(device), a.to(device)
        torch.set_default_device(device)
    path = os.path.join(outdir, f"ltx2-{tag}.npz")
    prod = dict(PRODUCER, case="ltx2", library="replica", placement="hf")
    with zflow_capture.Capture(model, name="transformer", path=path, producer=prod) as cap:
        for k, v in cond.items():
            cap.input(k, v)
        cap.input("noise", x)
        cap.input("audio_noise", a)
        cap.input("sigmas", torch.tensor(SIGMAS, dtype=torch.float32, device=x.device))
        with torch.no_grad():
            for i in range(len(SIGMAS) - 1):
                with cap.step(i):
                    t = torch.tensor([SIGMAS[i] * 1000.0], dtype=torch.float32, device=x.device).expand(x.shape[0])
                    v, va = model(
                        hidden_states=x, audio_hidden_states=a, encoder_hidden_states=cond["prompt_embeds"],
                        audio_encoder_hidden_states=cond["audio_prompt_embeds"], timestep=t,
                        encoder_attention_mask=cond["prompt_attention_mask"],
                        audio_encoder_attention_mask=cond["prompt_attention_mask"], num_frames=FRAMES, height=HEIGHT,
                        width=WIDTH, fps=FPS, audio_num_frames=AUDIO_FRAMES, video_coords=cond["video_coords"],
                        audio_coords=cond["audio_coords"], return_dict=False)
                x = x + (SIGMAS[i + 1] - SIGMAS[i]) * v.to(x.dtype)
                a = a + (SIGMAS[i + 1] - SIGMAS[i]) * va.to(a.dtype)
        cap.output("latents", x)
        cap.output("audio_latents", a)
    deflate(path)
    print(f"ltx2: {cap.summary['calls']} calls -> {path} ({os.path.getsize(path)} bytes)")


def deflate(path):
    """The same entries rewritten deflated (the trace reader takes stored and deflated entries): the many small
    tensors of two streams do not fit the fixtures' size otherwise."""
    tmp = path + ".tmp"
    with zipfile.ZipFile(path) as src, zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            dst.writestr(info.filename, src.read(info.filename))
    os.replace(tmp, path)


if __name__ == "__main__":
    if sys.argv[1] == "--small":
        main(sys.argv[2], layers=1)
    else:
        main(sys.argv[1])
