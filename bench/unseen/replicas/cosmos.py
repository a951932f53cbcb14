"""NVIDIA Cosmos (1.0) video DiT, reimplemented for torch 1.13 (no diffusers here), captured small in f32 on CPU.

Follows huggingface/diffusers src/diffusers/models/transformers/transformer_cosmos.py at
02a6a357b3a14e75c00b1671a3058ec2d3c9fcf9 (CosmosTransformer3DModel, CosmosTransformerBlock, CosmosPatchEmbed,
CosmosEmbedding, CosmosTimestepEmbedding, CosmosAdaLayerNorm, CosmosAdaLayerNormZero, CosmosRotaryPosEmbed,
CosmosLearnablePositionalEmbed, Attention with CosmosAttnProcessor2_0's __call__ as its forward) with the parts it
imports: attention_processor.py (Attention: to_q/to_k/to_v/to_out, qk_norm "rms_norm" = per-head RMSNorm, eps
1e-5), attention.py (FeedForward "gelu", GELU), embeddings.py (Timesteps, apply_rotary_emb use_real_unbind_dim
-2) and normalization.py (RMSNorm): the same module tree, parameter names and shapes, and call boundaries; the
arithmetic line for line. Stand-ins for what torch 1.13 lacks: F.scaled_dot_product_attention (its math, default
scale) and torchvision's resize with InterpolationMode.NEAREST (F.interpolate mode "nearest", which that resize
calls for tensors).

The constructs it shows: adaLN-LoRA modulation (SiLU of an RMSNorm'd sinusoid -> Linear(d->lora) -> Linear(lora->3d)
plus the 3d timestep embedding) before self-attention, cross-attention, FFN and the final layer; a padding-mask
channel joined to the latents; a learnable t/h/w positional embedding summed and divided by its scaled L2 norm,
added at the top of every block; a half-layout 3-D RoPE whose time positions are scaled by base_fps / fps and
whose per-axis theta is NTK-scaled.

Pipeline as CosmosTextToWorldPipeline calls it (bench/unseen/capture_dit.py's cosmos case, --small sizes): timestep
sigma (the flow sigma), fps 30, a zero padding mask at pixel size, velocity the output as is.

usage: /usr/bin/python3 bench/unseen/replicas/cosmos.py OUTDIR
"""
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from run import capture, get_timestep_embedding, sdpa


class RMSNorm(nn.Module):
    """diffusers.models.normalization.RMSNorm(dim, eps, elementwise_affine=True), f32 weights."""

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


def apply_rotary_emb(x, freqs_cis, use_real=True, use_real_unbind_dim=-1):
    """diffusers.models.embeddings.apply_rotary_emb, its use_real branch."""
    assert use_real
    cos, sin = freqs_cis  # [S, D]
    cos = cos[None, None]
    sin = sin[None, None]
    cos, sin = cos.to(x.device), sin.to(x.device)
    if use_real_unbind_dim == -1:
        x_real, x_imag = x.reshape(*x.shape[:-1], -1, 2).unbind(-1)
        x_rotated = torch.stack([-x_imag, x_real], dim=-1).flatten(3)
    elif use_real_unbind_dim == -2:
        x_real, x_imag = x.reshape(*x.shape[:-1], 2, -1).unbind(-2)
        x_rotated = torch.cat([-x_imag, x_real], dim=-1)
    else:
        raise ValueError(f"`use_real_unbind_dim={use_real_unbind_dim}` but should be -1 or -2.")
    out = (x.float() * cos + x_rotated.float() * sin).to(x.dtype)
    return out


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


class GELU(nn.Module):
    def __init__(self, dim_in, dim_out, approximate="none", bias=True):
        super().__init__()
        self.proj = nn.Linear(dim_in, dim_out, bias=bias)
        self.approximate = approximate

    def forward(self, hidden_states):
        hidden_states = self.proj(hidden_states)
        return F.gelu(hidden_states, approximate=self.approximate)


class FeedForward(nn.Module):
    """FeedForward(dim, mult=mlp_ratio, activation_fn="gelu", bias=bias)."""

    def __init__(self, dim, mult=4, dropout=0.0, bias=True):
        super().__init__()
        inner_dim = int(dim * mult)
        self.net = nn.ModuleList([GELU(dim, inner_dim, bias=bias), nn.Dropout(dropout),
                                  nn.Linear(inner_dim, dim, bias=bias)])

    def forward(self, hidden_states):
        for module in self.net:
            hidden_states = module(hidden_states)
        return hidden_states


class Attention(nn.Module):
    """attention_processor.Attention as the Cosmos blocks build it (bias False, qk_norm "rms_norm", eps 1e-5,
    elementwise_affine True), with CosmosAttnProcessor2_0's __call__ as its forward."""

    def __init__(self, query_dim, cross_attention_dim=None, heads=8, dim_head=64, qk_norm=None, eps=1e-5,
                 elementwise_affine=True, bias=False, out_bias=True):
        super().__init__()
        assert qk_norm == "rms_norm"
        self.inner_dim = dim_head * heads
        self.heads = heads
        cross_attention_dim = cross_attention_dim if cross_attention_dim is not None else query_dim
        self.norm_q = RMSNorm(dim_head, eps=eps, elementwise_affine=elementwise_affine)
        self.norm_k = RMSNorm(dim_head, eps=eps, elementwise_affine=elementwise_affine)
        self.to_q = nn.Linear(query_dim, self.inner_dim, bias=bias)
        self.to_k = nn.Linear(cross_attention_dim, self.inner_dim, bias=bias)
        self.to_v = nn.Linear(cross_attention_dim, self.inner_dim, bias=bias)
        self.to_out = nn.ModuleList([nn.Linear(self.inner_dim, query_dim, bias=out_bias), nn.Dropout(0.0)])

    def forward(self, hidden_states, encoder_hidden_states=None, attention_mask=None, image_rotary_emb=None):
        attn = self
        if encoder_hidden_states is None:
            encoder_hidden_states = hidden_states

        query = attn.to_q(hidden_states)
        key = attn.to_k(encoder_hidden_states)
        value = attn.to_v(encoder_hidden_states)

        query = query.unflatten(2, (attn.heads, -1)).transpose(1, 2)
        key = key.unflatten(2, (attn.heads, -1)).transpose(1, 2)
        value = value.unflatten(2, (attn.heads, -1)).transpose(1, 2)

        query = attn.norm_q(query)
        key = attn.norm_k(key)

        if image_rotary_emb is not None:
            query = apply_rotary_emb(query, image_rotary_emb, use_real=True, use_real_unbind_dim=-2)
            key = apply_rotary_emb(key, image_rotary_emb, use_real=True, use_real_unbind_dim=-2)

        query_idx = torch.tensor(query.size(3), device=query.device)
        key_idx = torch.tensor(key.size(3), device=key.device)
        value_idx = torch.tensor(value.size(3), device=value.device)
        key = key.repeat_interleave(query_idx // key_idx, dim=3)
        value = value.repeat_interleave(query_idx // value_idx, dim=3)

        hidden_states = sdpa(query, key, value, mask=attention_mask)
        hidden_states = hidden_states.transpose(1, 2).flatten(2, 3).type_as(query)

        hidden_states = attn.to_out[0](hidden_states)
        hidden_states = attn.to_out[1](hidden_states)
        return hidden_states


class CosmosPatchEmbed(nn.Module):
    def __init__(self, in_channels, out_channels, patch_size, bias=True):
        super().__init__()
        self.patch_size = patch_size
        self.proj = nn.Linear(in_channels * patch_size[0] * patch_size[1] * patch_size[2], out_channels, bias=bias)

    def forward(self, hidden_states):
        batch_size, num_channels, num_frames, height, width = hidden_states.shape
        p_t, p_h, p_w = self.patch_size
        hidden_states = hidden_states.reshape(batch_size, num_channels, num_frames // p_t, p_t, height // p_h, p_h,
                                              width // p_w, p_w)
        hidden_states = hidden_states.permute(0, 2, 4, 6, 1, 3, 5, 7).flatten(4, 7)
        hidden_states = self.proj(hidden_states)
        return hidden_states


class CosmosTimestepEmbedding(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear_1 = nn.Linear(in_features, out_features, bias=False)
        self.activation = nn.SiLU()
        self.linear_2 = nn.Linear(out_features, 3 * out_features, bias=False)

    def forward(self, timesteps):
        emb = self.linear_1(timesteps)
        emb = self.activation(emb)
        emb = self.linear_2(emb)
        return emb


class CosmosEmbedding(nn.Module):
    def __init__(self, embedding_dim, condition_dim):
        super().__init__()
        self.time_proj = Timesteps(embedding_dim, flip_sin_to_cos=True, downscale_freq_shift=0.0)
        self.t_embedder = CosmosTimestepEmbedding(embedding_dim, condition_dim)
        self.norm = RMSNorm(embedding_dim, eps=1e-6, elementwise_affine=True)

    def forward(self, hidden_states, timestep):
        timesteps_proj = self.time_proj(timestep).type_as(hidden_states)
        temb = self.t_embedder(timesteps_proj)
        embedded_timestep = self.norm(timesteps_proj)
        return temb, embedded_timestep


class CosmosAdaLayerNorm(nn.Module):
    def __init__(self, in_features, hidden_features):
        super().__init__()
        self.embedding_dim = in_features
        self.activation = nn.SiLU()
        self.norm = nn.LayerNorm(in_features, elementwise_affine=False, eps=1e-6)
        self.linear_1 = nn.Linear(in_features, hidden_features, bias=False)
        self.linear_2 = nn.Linear(hidden_features, 2 * in_features, bias=False)

    def forward(self, hidden_states, embedded_timestep, temb=None):
        embedded_timestep = self.activation(embedded_timestep)
        embedded_timestep = self.linear_1(embedded_timestep)
        embedded_timestep = self.linear_2(embedded_timestep)
        if temb is not None:
            embedded_timestep = embedded_timestep + temb[..., : 2 * self.embedding_dim]
        shift, scale = embedded_timestep.chunk(2, dim=-1)
        hidden_states = self.norm(hidden_states)
        if embedded_timestep.ndim == 2:
            shift, scale = (x.unsqueeze(1) for x in (shift, scale))
        hidden_states = hidden_states * (1 + scale) + shift
        return hidden_states


class CosmosAdaLayerNormZero(nn.Module):
    def __init__(self, in_features, hidden_features=None):
        super().__init__()
        self.norm = nn.LayerNorm(in_features, elementwise_affine=False, eps=1e-6)
        self.activation = nn.SiLU()
        if hidden_features is None:
            self.linear_1 = nn.Identity()
        else:
            self.linear_1 = nn.Linear(in_features, hidden_features, bias=False)
        self.linear_2 = nn.Linear(hidden_features, 3 * in_features, bias=False)

    def forward(self, hidden_states, embedded_timestep, temb=None):
        embedded_timestep = self.activation(embedded_timestep)
        embedded_timestep = self.linear_1(embedded_timestep)
        embedded_timestep = self.linear_2(embedded_timestep)
        if temb is not None:
            embedded_timestep = embedded_timestep + temb
        shift, scale, gate = embedded_timestep.chunk(3, dim=-1)
        hidden_states = self.norm(hidden_states)
        if embedded_timestep.ndim == 2:
            shift, scale, gate = (x.unsqueeze(1) for x in (shift, scale, gate))
        hidden_states = hidden_states * (1 + scale) + shift
        return hidden_states, gate


class CosmosTransformerBlock(nn.Module):
    def __init__(self, num_attention_heads, attention_head_dim, cross_attention_dim, mlp_ratio=4.0,
                 adaln_lora_dim=256, qk_norm="rms_norm", out_bias=False):
        super().__init__()
        hidden_size = num_attention_heads * attention_head_dim
        self.norm1 = CosmosAdaLayerNormZero(in_features=hidden_size, hidden_features=adaln_lora_dim)
        self.attn1 = Attention(query_dim=hidden_size, cross_attention_dim=None, heads=num_attention_heads,
                               dim_head=attention_head_dim, qk_norm=qk_norm, elementwise_affine=True,
                               out_bias=out_bias)
        self.norm2 = CosmosAdaLayerNormZero(in_features=hidden_size, hidden_features=adaln_lora_dim)
        self.attn2 = Attention(query_dim=hidden_size, cross_attention_dim=cross_attention_dim,
                               heads=num_attention_heads, dim_head=attention_head_dim, qk_norm=qk_norm,
                               elementwise_affine=True, out_bias=out_bias)
        self.norm3 = CosmosAdaLayerNormZero(in_features=hidden_size, hidden_features=adaln_lora_dim)
        self.ff = FeedForward(hidden_size, mult=mlp_ratio, bias=out_bias)

    def forward(self, hidden_states, encoder_hidden_states, embedded_timestep, temb=None, image_rotary_emb=None,
                extra_pos_emb=None, attention_mask=None):
        if extra_pos_emb is not None:
            hidden_states = hidden_states + extra_pos_emb
        norm_hidden_states, gate = self.norm1(hidden_states, embedded_timestep, temb)
        attn_output = self.attn1(norm_hidden_states, image_rotary_emb=image_rotary_emb)
        hidden_states = hidden_states + gate * attn_output
        norm_hidden_states, gate = self.norm2(hidden_states, embedded_timestep, temb)
        attn_output = self.attn2(norm_hidden_states, encoder_hidden_states=encoder_hidden_states,
                                 attention_mask=attention_mask)
        hidden_states = hidden_states + gate * attn_output
        norm_hidden_states, gate = self.norm3(hidden_states, embedded_timestep, temb)
        ff_output = self.ff(norm_hidden_states)
        hidden_states = hidden_states + gate * ff_output
        return hidden_states


class CosmosRotaryPosEmbed(nn.Module):
    def __init__(self, hidden_size, max_size=(128, 240, 240), patch_size=(1, 2, 2), base_fps=24,
                 rope_scale=(2.0, 1.0, 1.0)):
        super().__init__()
        self.max_size = [size // patch for size, patch in zip(max_size, patch_size)]
        self.patch_size = patch_size
        self.base_fps = base_fps
        self.dim_h = hidden_size // 6 * 2
        self.dim_w = hidden_size // 6 * 2
        self.dim_t = hidden_size - self.dim_h - self.dim_w
        self.h_ntk_factor = rope_scale[1] ** (self.dim_h / (self.dim_h - 2))
        self.w_ntk_factor = rope_scale[2] ** (self.dim_w / (self.dim_w - 2))
        self.t_ntk_factor = rope_scale[0] ** (self.dim_t / (self.dim_t - 2))

    def forward(self, hidden_states, fps=None):
        batch_size, num_channels, num_frames, height, width = hidden_states.shape
        pe_size = [num_frames // self.patch_size[0], height // self.patch_size[1], width // self.patch_size[2]]
        device = hidden_states.device
        h_theta = 10000.0 * self.h_ntk_factor
        w_theta = 10000.0 * self.w_ntk_factor
        t_theta = 10000.0 * self.t_ntk_factor
        seq = torch.arange(max(self.max_size), device=device, dtype=torch.float32)
        dim_h_range = torch.arange(0, self.dim_h, 2, device=device, dtype=torch.float32)[: (self.dim_h // 2)] \
            / self.dim_h
        dim_w_range = torch.arange(0, self.dim_w, 2, device=device, dtype=torch.float32)[: (self.dim_w // 2)] \
            / self.dim_w
        dim_t_range = torch.arange(0, self.dim_t, 2, device=device, dtype=torch.float32)[: (self.dim_t // 2)] \
            / self.dim_t
        h_spatial_freqs = 1.0 / (h_theta ** dim_h_range)
        w_spatial_freqs = 1.0 / (w_theta ** dim_w_range)
        temporal_freqs = 1.0 / (t_theta ** dim_t_range)
        emb_h = torch.outer(seq[: pe_size[1]], h_spatial_freqs)[None, :, None, :].repeat(pe_size[0], 1, pe_size[2], 1)
        emb_w = torch.outer(seq[: pe_size[2]], w_spatial_freqs)[None, None, :, :].repeat(pe_size[0], pe_size[1], 1, 1)
        if fps is None:
            emb_t = torch.outer(seq[: pe_size[0]], temporal_freqs)
        else:
            emb_t = torch.outer(seq[: pe_size[0]] / fps * self.base_fps, temporal_freqs)
        emb_t = emb_t[:, None, None, :].repeat(1, pe_size[1], pe_size[2], 1)
        freqs = torch.cat([emb_t, emb_h, emb_w] * 2, dim=-1).flatten(0, 2).float()
        cos = torch.cos(freqs)
        sin = torch.sin(freqs)
        return cos, sin


class CosmosLearnablePositionalEmbed(nn.Module):
    def __init__(self, hidden_size, max_size, patch_size, eps=1e-6):
        super().__init__()
        self.max_size = [size // patch for size, patch in zip(max_size, patch_size)]
        self.patch_size = patch_size
        self.eps = eps
        self.pos_emb_t = nn.Parameter(torch.zeros(self.max_size[0], hidden_size))
        self.pos_emb_h = nn.Parameter(torch.zeros(self.max_size[1], hidden_size))
        self.pos_emb_w = nn.Parameter(torch.zeros(self.max_size[2], hidden_size))

    def forward(self, hidden_states):
        batch_size, num_channels, num_frames, height, width = hidden_states.shape
        pe_size = [num_frames // self.patch_size[0], height // self.patch_size[1], width // self.patch_size[2]]
        emb_t = self.pos_emb_t[: pe_size[0]][None, :, None, None, :].repeat(batch_size, 1, pe_size[1], pe_size[2], 1)
        emb_h = self.pos_emb_h[: pe_size[1]][None, None, :, None, :].repeat(batch_size, pe_size[0], 1, pe_size[2], 1)
        emb_w = self.pos_emb_w[: pe_size[2]][None, None, None, :, :].repeat(batch_size, pe_size[0], pe_size[1], 1, 1)
        emb = emb_t + emb_h + emb_w
        emb = emb.flatten(1, 3)
        # torch.linalg.vector_norm(emb, dim=-1, keepdim=True, dtype=torch.float32) on an f32 emb
        norm = torch.linalg.vector_norm(emb, dim=-1, keepdim=True, dtype=torch.float32)
        norm = torch.add(self.eps, norm, alpha=np.sqrt(norm.numel() / emb.numel()))
        return (emb / norm).type_as(hidden_states)


class CosmosTransformer3DModel(nn.Module):
    _keep_in_fp32_modules = ["learnable_pos_embed"]

    def __init__(self, in_channels=16, out_channels=16, num_attention_heads=32, attention_head_dim=128,
                 num_layers=28, mlp_ratio=4.0, text_embed_dim=1024, adaln_lora_dim=256, max_size=(128, 240, 240),
                 patch_size=(1, 2, 2), rope_scale=(2.0, 1.0, 1.0), concat_padding_mask=True,
                 extra_pos_embed_type="learnable"):
        super().__init__()
        self.patch_size = patch_size
        self.concat_padding_mask = concat_padding_mask
        self.extra_pos_embed_type = extra_pos_embed_type
        hidden_size = num_attention_heads * attention_head_dim
        patch_embed_in_channels = in_channels + 1 if concat_padding_mask else in_channels
        self.patch_embed = CosmosPatchEmbed(patch_embed_in_channels, hidden_size, patch_size, bias=False)
        self.rope = CosmosRotaryPosEmbed(hidden_size=attention_head_dim, max_size=max_size, patch_size=patch_size,
                                         rope_scale=rope_scale)
        self.learnable_pos_embed = None
        if extra_pos_embed_type == "learnable":
            self.learnable_pos_embed = CosmosLearnablePositionalEmbed(hidden_size=hidden_size, max_size=max_size,
                                                                      patch_size=patch_size)
        self.time_embed = CosmosEmbedding(hidden_size, hidden_size)
        self.transformer_blocks = nn.ModuleList([
            CosmosTransformerBlock(num_attention_heads=num_attention_heads, attention_head_dim=attention_head_dim,
                                   cross_attention_dim=text_embed_dim, mlp_ratio=mlp_ratio,
                                   adaln_lora_dim=adaln_lora_dim, qk_norm="rms_norm", out_bias=False)
            for _ in range(num_layers)])
        self.norm_out = CosmosAdaLayerNorm(hidden_size, adaln_lora_dim)
        self.proj_out = nn.Linear(hidden_size, patch_size[0] * patch_size[1] * patch_size[2] * out_channels,
                                  bias=False)

    def forward(self, hidden_states, timestep, encoder_hidden_states, attention_mask=None, fps=None,
                condition_mask=None, padding_mask=None, return_dict=True):
        batch_size, num_channels, num_frames, height, width = hidden_states.shape
        if condition_mask is not None:
            hidden_states = torch.cat([hidden_states, condition_mask], dim=1)
        if self.concat_padding_mask:
            # transforms.functional.resize(padding_mask, hw, interpolation=NEAREST): F.interpolate "nearest"
            padding_mask = F.interpolate(padding_mask, size=list(hidden_states.shape[-2:]), mode="nearest")
            hidden_states = torch.cat([hidden_states, padding_mask.unsqueeze(2).repeat(batch_size, 1, num_frames, 1, 1)],
                                      dim=1)
        if attention_mask is not None:
            attention_mask = attention_mask.unsqueeze(1).unsqueeze(1)

        image_rotary_emb = self.rope(hidden_states, fps=fps)
        extra_pos_emb = self.learnable_pos_embed(hidden_states) if self.extra_pos_embed_type else None

        p_t, p_h, p_w = self.patch_size
        post_patch_num_frames = num_frames // p_t
        post_patch_height = height // p_h
        post_patch_width = width // p_w
        hidden_states = self.patch_embed(hidden_states)
        hidden_states = hidden_states.flatten(1, 3)

        assert timestep.ndim == 1
        temb, embedded_timestep = self.time_embed(hidden_states, timestep)

        for block in self.transformer_blocks:
            hidden_states = block(hidden_states=hidden_states, encoder_hidden_states=encoder_hidden_states,
                                  embedded_timestep=embedded_timestep, temb=temb, image_rotary_emb=image_rotary_emb,
                                  extra_pos_emb=extra_pos_emb, attention_mask=attention_mask)

        hidden_states = self.norm_out(hidden_states, embedded_timestep, temb)
        hidden_states = self.proj_out(hidden_states)
        hidden_states = hidden_states.unflatten(2, (p_h, p_w, p_t, -1))
        hidden_states = hidden_states.unflatten(1, (post_patch_num_frames, post_patch_height, post_patch_width))
        hidden_states = hidden_states.permute(0, 7, 1, 6, 2, 4, 3, 5)
        hidden_states = hidden_states.flatten(6, 7).flatten(4, 5).flatten(2, 3)
        return (hidden_states,)


def build():
    # capture_dit.py's cosmos case at --small sizes: 2 heads of 16 (RoPE t/h/w dims 8/4/4), one block,
    # mlp_ratio 2, text 16 wide, adaLN-LoRA width 16.
    return CosmosTransformer3DModel(in_channels=4, out_channels=4, num_attention_heads=2, attention_head_dim=16,
                                    num_layers=1, mlp_ratio=2.0, text_embed_dim=16, adaln_lora_dim=16,
                                    max_size=(128, 240, 240), patch_size=(1, 2, 2), rope_scale=(2.0, 1.0, 1.0),
                                    concat_padding_mask=True, extra_pos_embed_type="learnable")


def inputs(g):
    # Cosmos pipelines: padding_mask = latents.new_zeros(1, 1, height, width) at the pixel size (the model resizes
    # it to the latent grid, NEAREST); 4x8 latents of a 32x64 picture, 2 latent frames.
    return {"encoder_hidden_states": torch.randn((1, 4, 16), generator=g), "padding_mask": torch.zeros(1, 1, 32, 64),
            "noise": torch.randn((1, 4, 2, 4, 8), generator=g)}


def call(model, x, sigma, c):
    t = torch.tensor([sigma], dtype=torch.float32)
    return model(hidden_states=x, timestep=t, encoder_hidden_states=c["encoder_hidden_states"], fps=30,
                 padding_mask=c["padding_mask"], return_dict=False)[0]


PRODUCER = dict(
    library_source="replica of huggingface/diffusers transformer_cosmos.py@02a6a357b3a1 and the parts it imports "
                   "(torch 1.13)",
    timestep="sigma float32 (Cosmos pipelines: current_t = sigma/(sigma+1) of the EDM sigma, = the flow sigma); "
             "fps=30",
    velocity="model output as is (x0 = (1-t) x_edm - t out with input x_edm (1-t): out is the flow velocity), not "
             "negated",
    note="NVIDIA Cosmos video DiT, one block: a zero padding-mask channel (NEAREST-resized from pixel size) "
         "concatenated to the latents, Linear patchify (1x2x2) bias-free; Timesteps sinusoid -> bias-free SiLU MLP "
         "giving a 3d temb AND an RMSNorm'd sinusoid (embedded_timestep); every norm is adaLN-LoRA "
         "(CosmosAdaLayerNormZero: SiLU -> Linear(d->lora) -> Linear(lora->3d) + temb, shift/scale/gate, "
         "non-affine LayerNorm) before self-attn, cross-attn and FFN; a learnable t/h/w positional embedding summed "
         "and divided by its scaled L2 norm (f32) added at the top of every block; per-head RMSNorm q/k norms; "
         "half-layout (unbind -2) 3-D RoPE with NTK theta scaling per axis and fps-scaled time positions, "
         "self-attn only; bias-free q/k/v/out and GELU FFN; final adaLN-LoRA (shift, scale); permuted unpatchify "
         "(p_h, p_w, p_t order); 2 latent frames")

if __name__ == "__main__":
    capture("cosmos", build, inputs, call, sys.argv[1], PRODUCER)
