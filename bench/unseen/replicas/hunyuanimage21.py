"""HunyuanImage-2.1 DiT, reimplemented for torch 1.13 (no diffusers here), captured small in f32 on CPU.

Follows huggingface/diffusers src/diffusers/models/transformers/transformer_hunyuanimage.py at
071190daca865a4d04deac0e02cda5b8c5d6f6fa (HunyuanImageTransformer2DModel, HunyuanImageTransformerBlock,
HunyuanImageSingleTransformerBlock, HunyuanImageAttnProcessor as the blocks' attention forward, HunyuanImagePatchEmbed,
HunyuanImageTokenRefiner, HunyuanImageIndividualTokenRefiner(Block), HunyuanImageAdaNorm,
HunyuanImageCombinedTimeGuidanceEmbedding, HunyuanImageRotaryPosEmbed) with the parts it imports:
attention_processor.py (Attention with qk_norm "rms_norm", pre_only / context_pre_only, AttnProcessor2_0 as the
refiner's attention forward), attention.py (FeedForward with "gelu-approximate" and "linear-silu"), activations.py
(GELU, LinearActivation), embeddings.py (Timesteps, TimestepEmbedding, CombinedTimestepTextProjEmbeddings,
PixArtAlphaTextProjection, get_1d_rotary_pos_embed with use_real), normalization.py (RMSNorm, AdaLayerNormZero,
AdaLayerNormZeroSingle, AdaLayerNormContinuous): the same module tree, parameter names and shapes, and call
boundaries; the arithmetic line for line. Stand-ins for what torch 1.13 lacks: F.scaled_dot_product_attention and
dispatch_attention_fn (SDPA's math, default scale, the bool mask). The constructs it shows: the joint sequence is
[image, text] (image rows first); the single-stream blocks rotate the image rows of q and k only (the text rows of
the one projection left as they are); a token refiner over the caption before the blocks (a self-attention of
the caption under a pairwise bool mask m_i & m_j with column 0 always attending, gated by an AdaNorm of
temb = time embedding + masked-mean-pooled caption); the caption's key mask padded with ones for the image.

Configuration: the HunyuanImage-2.1 base layout (guidance_embeds False, use_meanflow False) without the ByT5 glyph
encoder (text_embed_2_dim None: the valid-tokens-first reordering of two captions is not exercised), scaled down.
Pipeline as HunyuanImagePipeline (pipeline_hunyuanimage.py at 012b40d8406ca9e2315c92c8d3ca9103bb35fcb3) calls it
with its guider disabled (one model call per step): timestep = t (σ·1000, latents' dtype), the caption's 0/1 mask
as encoder_attention_mask, velocity the output as is (FlowMatchEulerDiscreteScheduler.step).

usage: /usr/bin/python3 bench/unseen/replicas/hunyuanimage21.py OUTDIR
"""
import math
import sys

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


def get_1d_rotary_pos_embed(dim, pos, theta=10000.0, use_real=True, linear_factor=1.0, ntk_factor=1.0,
                            freqs_dtype=torch.float32):
    """use_real=True, repeat_interleave_real=True: (cos, sin), each [len(pos), dim]."""
    assert dim % 2 == 0 and use_real
    theta = theta * ntk_factor
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=freqs_dtype, device=pos.device)[: (dim // 2)] / dim)) \
        / linear_factor
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
    else:
        raise ValueError(f"Sequence dimension must be 1 or 2, not {sequence_dim}")
    cos, sin = cos.to(x.device), sin.to(x.device)
    x_real, x_imag = x.reshape(*x.shape[:-1], -1, 2).unbind(-1)
    x_rotated = torch.stack([-x_imag, x_real], dim=-1).flatten(3)
    return (x.float() * cos + x_rotated.float() * sin).to(x.dtype)


def hunyuan_image_attn(attn, hidden_states, encoder_hidden_states=None, attention_mask=None, image_rotary_emb=None):
    """HunyuanImageAttnProcessor.__call__ (dispatch_attention_fn: SDPA's math on [B, L, H, D], bool mask)."""
    if attn.add_q_proj is None and encoder_hidden_states is not None:
        hidden_states = torch.cat([hidden_states, encoder_hidden_states], dim=1)
    query = attn.to_q(hidden_states)
    key = attn.to_k(hidden_states)
    value = attn.to_v(hidden_states)
    query = query.unflatten(2, (attn.heads, -1))
    key = key.unflatten(2, (attn.heads, -1))
    value = value.unflatten(2, (attn.heads, -1))
    if attn.norm_q is not None:
        query = attn.norm_q(query)
    if attn.norm_k is not None:
        key = attn.norm_k(key)
    if image_rotary_emb is not None:
        if attn.add_q_proj is None and encoder_hidden_states is not None:
            query = torch.cat([apply_rotary_emb(query[:, : -encoder_hidden_states.shape[1]], image_rotary_emb,
                                                sequence_dim=1),
                               query[:, -encoder_hidden_states.shape[1]:]], dim=1)
            key = torch.cat([apply_rotary_emb(key[:, : -encoder_hidden_states.shape[1]], image_rotary_emb,
                                              sequence_dim=1),
                             key[:, -encoder_hidden_states.shape[1]:]], dim=1)
        else:
            query = apply_rotary_emb(query, image_rotary_emb, sequence_dim=1)
            key = apply_rotary_emb(key, image_rotary_emb, sequence_dim=1)
    if attn.add_q_proj is not None and encoder_hidden_states is not None:
        encoder_query = attn.add_q_proj(encoder_hidden_states)
        encoder_key = attn.add_k_proj(encoder_hidden_states)
        encoder_value = attn.add_v_proj(encoder_hidden_states)
        encoder_query = encoder_query.unflatten(2, (attn.heads, -1))
        encoder_key = encoder_key.unflatten(2, (attn.heads, -1))
        encoder_value = encoder_value.unflatten(2, (attn.heads, -1))
        if attn.norm_added_q is not None:
            encoder_query = attn.norm_added_q(encoder_query)
        if attn.norm_added_k is not None:
            encoder_key = attn.norm_added_k(encoder_key)
        query = torch.cat([query, encoder_query], dim=1)
        key = torch.cat([key, encoder_key], dim=1)
        value = torch.cat([value, encoder_value], dim=1)
    hidden_states = sdpa(query.transpose(1, 2), key.transpose(1, 2), value.transpose(1, 2),
                         mask=attention_mask).transpose(1, 2)
    hidden_states = hidden_states.flatten(2, 3)
    hidden_states = hidden_states.to(query.dtype)
    if encoder_hidden_states is not None:
        hidden_states, encoder_hidden_states = (hidden_states[:, : -encoder_hidden_states.shape[1]],
                                                hidden_states[:, -encoder_hidden_states.shape[1]:])
        if getattr(attn, "to_out", None) is not None:
            hidden_states = attn.to_out[0](hidden_states)
            hidden_states = attn.to_out[1](hidden_states)
        if getattr(attn, "to_add_out", None) is not None:
            encoder_hidden_states = attn.to_add_out(encoder_hidden_states)
    return hidden_states, encoder_hidden_states


def attn_processor_2_0(attn, hidden_states, encoder_hidden_states=None, attention_mask=None, image_rotary_emb=None):
    """AttnProcessor2_0.__call__ for a 3-D input without group/spatial norm, residual or rescale (factor 1)."""
    residual = hidden_states
    batch_size, sequence_length, _ = (hidden_states.shape if encoder_hidden_states is None
                                      else encoder_hidden_states.shape)
    if attention_mask is not None:
        attention_mask = attn.prepare_attention_mask(attention_mask, sequence_length, batch_size)
        attention_mask = attention_mask.view(batch_size, attn.heads, -1, attention_mask.shape[-1])
    query = attn.to_q(hidden_states)
    if encoder_hidden_states is None:
        encoder_hidden_states = hidden_states
    key = attn.to_k(encoder_hidden_states)
    value = attn.to_v(encoder_hidden_states)
    inner_dim = key.shape[-1]
    head_dim = inner_dim // attn.heads
    query = query.view(batch_size, -1, attn.heads, head_dim).transpose(1, 2)
    key = key.view(batch_size, -1, attn.heads, head_dim).transpose(1, 2)
    value = value.view(batch_size, -1, attn.heads, head_dim).transpose(1, 2)
    if attn.norm_q is not None:
        query = attn.norm_q(query)
    if attn.norm_k is not None:
        key = attn.norm_k(key)
    hidden_states = sdpa(query, key, value, mask=attention_mask)
    hidden_states = hidden_states.transpose(1, 2).reshape(batch_size, -1, attn.heads * head_dim)
    hidden_states = hidden_states.to(query.dtype)
    hidden_states = attn.to_out[0](hidden_states)
    hidden_states = attn.to_out[1](hidden_states)
    if attn.residual_connection:
        hidden_states = hidden_states + residual
    hidden_states = hidden_states / attn.rescale_output_factor
    return hidden_states


class Attention(nn.Module):
    """attention_processor.Attention: the parts these blocks construct (no cross-attention dim, qk_norm None or
    "rms_norm"), with the processor given as its forward."""

    def __init__(self, query_dim, cross_attention_dim=None, heads=8, dim_head=64, bias=False, qk_norm=None,
                 added_kv_proj_dim=None, added_proj_bias=True, out_bias=True, eps=1e-5, out_dim=None,
                 context_pre_only=None, pre_only=False, processor=attn_processor_2_0):
        super().__init__()
        self.inner_dim = out_dim if out_dim is not None else dim_head * heads
        self.query_dim = query_dim
        self.out_dim = out_dim if out_dim is not None else query_dim
        self.context_pre_only = context_pre_only
        self.pre_only = pre_only
        self.heads = out_dim // dim_head if out_dim is not None else heads
        self.residual_connection = False
        self.rescale_output_factor = 1.0
        self.added_kv_proj_dim = added_kv_proj_dim
        if qk_norm is None:
            self.norm_q = None
            self.norm_k = None
        elif qk_norm == "rms_norm":
            self.norm_q = RMSNorm(dim_head, eps=eps)
            self.norm_k = RMSNorm(dim_head, eps=eps)
        else:
            raise ValueError(qk_norm)
        self.to_q = nn.Linear(query_dim, self.inner_dim, bias=bias)
        self.to_k = nn.Linear(query_dim, self.inner_dim, bias=bias)
        self.to_v = nn.Linear(query_dim, self.inner_dim, bias=bias)
        if self.added_kv_proj_dim is not None:
            self.add_k_proj = nn.Linear(added_kv_proj_dim, self.inner_dim, bias=added_proj_bias)
            self.add_v_proj = nn.Linear(added_kv_proj_dim, self.inner_dim, bias=added_proj_bias)
            self.add_q_proj = nn.Linear(added_kv_proj_dim, self.inner_dim, bias=added_proj_bias)
        else:
            self.add_q_proj = None
            self.add_k_proj = None
            self.add_v_proj = None
        if not self.pre_only:
            self.to_out = nn.ModuleList([nn.Linear(self.inner_dim, self.out_dim, bias=out_bias), nn.Dropout(0.0)])
        else:
            self.to_out = None
        if self.context_pre_only is not None and not self.context_pre_only:
            self.to_add_out = nn.Linear(self.inner_dim, query_dim, bias=out_bias)
        else:
            self.to_add_out = None
        if qk_norm is not None and added_kv_proj_dim is not None:
            self.norm_added_q = RMSNorm(dim_head, eps=eps)
            self.norm_added_k = RMSNorm(dim_head, eps=eps)
        else:
            self.norm_added_q = None
            self.norm_added_k = None
        self.processor = processor

    def prepare_attention_mask(self, attention_mask, target_length, batch_size, out_dim=3):
        head_size = self.heads
        current_length = attention_mask.shape[-1]
        if current_length != target_length:
            raise NotImplementedError("mask padding")
        if out_dim == 3:
            if attention_mask.shape[0] < batch_size * head_size:
                attention_mask = attention_mask.repeat_interleave(head_size, dim=0)
        elif out_dim == 4:
            attention_mask = attention_mask.unsqueeze(1)
            attention_mask = attention_mask.repeat_interleave(head_size, dim=1)
        return attention_mask

    def forward(self, hidden_states, encoder_hidden_states=None, attention_mask=None, image_rotary_emb=None):
        if self.processor is attn_processor_2_0:
            return self.processor(self, hidden_states, encoder_hidden_states=encoder_hidden_states,
                                  attention_mask=attention_mask)
        return self.processor(self, hidden_states, encoder_hidden_states=encoder_hidden_states,
                              attention_mask=attention_mask, image_rotary_emb=image_rotary_emb)


class GELU(nn.Module):
    """activations.GELU(dim_in, dim_out, approximate, bias)."""

    def __init__(self, dim_in, dim_out, approximate="none", bias=True):
        super().__init__()
        self.proj = nn.Linear(dim_in, dim_out, bias=bias)
        self.approximate = approximate

    def forward(self, hidden_states):
        return F.gelu(self.proj(hidden_states), approximate=self.approximate)


class LinearActivation(nn.Module):
    """activations.LinearActivation(dim_in, dim_out, bias, activation="silu")."""

    def __init__(self, dim_in, dim_out, bias=True, activation="silu"):
        super().__init__()
        self.proj = nn.Linear(dim_in, dim_out, bias=bias)
        self.activation = nn.SiLU()

    def forward(self, hidden_states):
        return self.activation(self.proj(hidden_states))


class FeedForward(nn.Module):
    """attention.FeedForward(dim, mult, activation_fn, dropout 0, bias True)."""

    def __init__(self, dim, dim_out=None, mult=4, dropout=0.0, activation_fn="geglu", bias=True):
        super().__init__()
        inner_dim = int(dim * mult)
        dim_out = dim_out if dim_out is not None else dim
        if activation_fn == "gelu-approximate":
            act_fn = GELU(dim, inner_dim, approximate="tanh", bias=bias)
        elif activation_fn == "linear-silu":
            act_fn = LinearActivation(dim, inner_dim, bias=bias, activation="silu")
        else:
            raise ValueError(activation_fn)
        self.net = nn.ModuleList([act_fn, nn.Dropout(dropout), nn.Linear(inner_dim, dim_out, bias=bias)])

    def forward(self, hidden_states):
        for module in self.net:
            hidden_states = module(hidden_states)
        return hidden_states


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


class PixArtAlphaTextProjection(nn.Module):
    def __init__(self, in_features, hidden_size, out_features=None, act_fn="silu"):
        super().__init__()
        if out_features is None:
            out_features = hidden_size
        self.linear_1 = nn.Linear(in_features, hidden_size, bias=True)
        self.act_1 = nn.SiLU()
        self.linear_2 = nn.Linear(hidden_size, out_features, bias=True)

    def forward(self, caption):
        return self.linear_2(self.act_1(self.linear_1(caption)))


class CombinedTimestepTextProjEmbeddings(nn.Module):
    def __init__(self, embedding_dim, pooled_projection_dim):
        super().__init__()
        self.time_proj = Timesteps(num_channels=256, flip_sin_to_cos=True, downscale_freq_shift=0)
        self.timestep_embedder = TimestepEmbedding(in_channels=256, time_embed_dim=embedding_dim)
        self.text_embedder = PixArtAlphaTextProjection(pooled_projection_dim, embedding_dim, act_fn="silu")

    def forward(self, timestep, pooled_projection):
        timesteps_proj = self.time_proj(timestep)
        timesteps_emb = self.timestep_embedder(timesteps_proj.to(dtype=pooled_projection.dtype))
        pooled_projections = self.text_embedder(pooled_projection)
        return timesteps_emb + pooled_projections


class AdaLayerNormZero(nn.Module):
    """norm_type "layer_norm", no class embedding."""

    def __init__(self, embedding_dim, norm_type="layer_norm", bias=True):
        super().__init__()
        self.silu = nn.SiLU()
        self.linear = nn.Linear(embedding_dim, 6 * embedding_dim, bias=bias)
        self.norm = nn.LayerNorm(embedding_dim, elementwise_affine=False, eps=1e-6)

    def forward(self, x, emb=None):
        emb = self.linear(self.silu(emb))
        shift_msa, scale_msa, gate_msa, shift_mlp, scale_mlp, gate_mlp = emb.chunk(6, dim=1)
        x = self.norm(x) * (1 + scale_msa[:, None]) + shift_msa[:, None]
        return x, gate_msa, shift_mlp, scale_mlp, gate_mlp


class AdaLayerNormZeroSingle(nn.Module):
    def __init__(self, embedding_dim, norm_type="layer_norm", bias=True):
        super().__init__()
        self.silu = nn.SiLU()
        self.linear = nn.Linear(embedding_dim, 3 * embedding_dim, bias=bias)
        self.norm = nn.LayerNorm(embedding_dim, elementwise_affine=False, eps=1e-6)

    def forward(self, x, emb=None):
        emb = self.linear(self.silu(emb))
        shift_msa, scale_msa, gate_msa = emb.chunk(3, dim=1)
        x = self.norm(x) * (1 + scale_msa[:, None]) + shift_msa[:, None]
        return x, gate_msa


class AdaLayerNormContinuous(nn.Module):
    def __init__(self, embedding_dim, conditioning_embedding_dim, elementwise_affine=True, eps=1e-5, bias=True):
        super().__init__()
        self.silu = nn.SiLU()
        self.linear = nn.Linear(conditioning_embedding_dim, embedding_dim * 2, bias=bias)
        self.norm = nn.LayerNorm(embedding_dim, eps, elementwise_affine)

    def forward(self, x, conditioning_embedding):
        emb = self.linear(self.silu(conditioning_embedding).to(x.dtype))
        scale, shift = torch.chunk(emb, 2, dim=1)
        return self.norm(x) * (1 + scale)[:, None, :] + shift[:, None, :]


class HunyuanImagePatchEmbed(nn.Module):
    def __init__(self, patch_size=(16, 16), in_chans=3, embed_dim=768):
        super().__init__()
        self.patch_size = patch_size
        if len(patch_size) == 2:
            self.proj = nn.Conv2d(in_chans, embed_dim, kernel_size=patch_size, stride=patch_size)
        elif len(patch_size) == 3:
            self.proj = nn.Conv3d(in_chans, embed_dim, kernel_size=patch_size, stride=patch_size)
        else:
            raise ValueError(f"patch_size must be a tuple of length 2 or 3, got {len(patch_size)}")

    def forward(self, hidden_states):
        hidden_states = self.proj(hidden_states)
        return hidden_states.flatten(2).transpose(1, 2)


class HunyuanImageByT5TextProjection(nn.Module):
    def __init__(self, in_features, hidden_size, out_features):
        super().__init__()
        self.norm = nn.LayerNorm(in_features)
        self.linear_1 = nn.Linear(in_features, hidden_size)
        self.linear_2 = nn.Linear(hidden_size, hidden_size)
        self.linear_3 = nn.Linear(hidden_size, out_features)
        self.act_fn = nn.GELU()

    def forward(self, encoder_hidden_states):
        hidden_states = self.norm(encoder_hidden_states)
        hidden_states = self.linear_1(hidden_states)
        hidden_states = self.act_fn(hidden_states)
        hidden_states = self.linear_2(hidden_states)
        hidden_states = self.act_fn(hidden_states)
        return self.linear_3(hidden_states)


class HunyuanImageAdaNorm(nn.Module):
    def __init__(self, in_features, out_features=None):
        super().__init__()
        out_features = out_features or 2 * in_features
        self.linear = nn.Linear(in_features, out_features)
        self.nonlinearity = nn.SiLU()

    def forward(self, temb):
        temb = self.linear(self.nonlinearity(temb))
        gate_msa, gate_mlp = temb.chunk(2, dim=1)
        return gate_msa.unsqueeze(1), gate_mlp.unsqueeze(1)


class HunyuanImageCombinedTimeGuidanceEmbedding(nn.Module):
    def __init__(self, embedding_dim, guidance_embeds=False, use_meanflow=False):
        super().__init__()
        self.time_proj = Timesteps(num_channels=256, flip_sin_to_cos=True, downscale_freq_shift=0)
        self.timestep_embedder = TimestepEmbedding(in_channels=256, time_embed_dim=embedding_dim)
        self.use_meanflow = use_meanflow
        self.time_proj_r = None
        self.timestep_embedder_r = None
        if use_meanflow:
            self.time_proj_r = Timesteps(num_channels=256, flip_sin_to_cos=True, downscale_freq_shift=0)
            self.timestep_embedder_r = TimestepEmbedding(in_channels=256, time_embed_dim=embedding_dim)
        self.guidance_embedder = None
        if guidance_embeds:
            self.guidance_embedder = TimestepEmbedding(in_channels=256, time_embed_dim=embedding_dim)

    def forward(self, timestep, timestep_r=None, guidance=None):
        timesteps_proj = self.time_proj(timestep)
        timesteps_emb = self.timestep_embedder(timesteps_proj.to(dtype=timestep.dtype))
        if timestep_r is not None:
            timesteps_proj_r = self.time_proj_r(timestep_r)
            timesteps_emb_r = self.timestep_embedder_r(timesteps_proj_r.to(dtype=timestep.dtype))
            timesteps_emb = (timesteps_emb + timesteps_emb_r) / 2
        if self.guidance_embedder is not None:
            guidance_proj = self.time_proj(guidance)
            guidance_emb = self.guidance_embedder(guidance_proj.to(dtype=timestep.dtype))
            conditioning = timesteps_emb + guidance_emb
        else:
            conditioning = timesteps_emb
        return conditioning


class HunyuanImageIndividualTokenRefinerBlock(nn.Module):
    def __init__(self, num_attention_heads, attention_head_dim, mlp_width_ratio=4.0, mlp_drop_rate=0.0,
                 attention_bias=True):
        super().__init__()
        hidden_size = num_attention_heads * attention_head_dim
        self.norm1 = nn.LayerNorm(hidden_size, elementwise_affine=True, eps=1e-6)
        self.attn = Attention(query_dim=hidden_size, cross_attention_dim=None, heads=num_attention_heads,
                              dim_head=attention_head_dim, bias=attention_bias)
        self.norm2 = nn.LayerNorm(hidden_size, elementwise_affine=True, eps=1e-6)
        self.ff = FeedForward(hidden_size, mult=mlp_width_ratio, activation_fn="linear-silu", dropout=mlp_drop_rate)
        self.norm_out = HunyuanImageAdaNorm(hidden_size, 2 * hidden_size)

    def forward(self, hidden_states, temb, attention_mask=None):
        norm_hidden_states = self.norm1(hidden_states)
        attn_output = self.attn(hidden_states=norm_hidden_states, encoder_hidden_states=None,
                                attention_mask=attention_mask)
        gate_msa, gate_mlp = self.norm_out(temb)
        hidden_states = hidden_states + attn_output * gate_msa
        ff_output = self.ff(self.norm2(hidden_states))
        hidden_states = hidden_states + ff_output * gate_mlp
        return hidden_states


class HunyuanImageIndividualTokenRefiner(nn.Module):
    def __init__(self, num_attention_heads, attention_head_dim, num_layers, mlp_width_ratio=4.0, mlp_drop_rate=0.0,
                 attention_bias=True):
        super().__init__()
        self.refiner_blocks = nn.ModuleList([
            HunyuanImageIndividualTokenRefinerBlock(num_attention_heads=num_attention_heads,
                                                    attention_head_dim=attention_head_dim,
                                                    mlp_width_ratio=mlp_width_ratio, mlp_drop_rate=mlp_drop_rate,
                                                    attention_bias=attention_bias)
            for _ in range(num_layers)])

    def forward(self, hidden_states, temb, attention_mask=None):
        self_attn_mask = None
        if attention_mask is not None:
            batch_size = attention_mask.shape[0]
            seq_len = attention_mask.shape[1]
            attention_mask = attention_mask.to(hidden_states.device)
            self_attn_mask_1 = attention_mask.view(batch_size, 1, 1, seq_len).repeat(1, 1, seq_len, 1)
            self_attn_mask_2 = self_attn_mask_1.transpose(2, 3)
            self_attn_mask = (self_attn_mask_1 & self_attn_mask_2).bool()
            self_attn_mask[:, :, :, 0] = True
        for block in self.refiner_blocks:
            hidden_states = block(hidden_states, temb, self_attn_mask)
        return hidden_states


class HunyuanImageTokenRefiner(nn.Module):
    def __init__(self, in_channels, num_attention_heads, attention_head_dim, num_layers, mlp_ratio=4.0,
                 mlp_drop_rate=0.0, attention_bias=True):
        super().__init__()
        hidden_size = num_attention_heads * attention_head_dim
        self.time_text_embed = CombinedTimestepTextProjEmbeddings(embedding_dim=hidden_size,
                                                                  pooled_projection_dim=in_channels)
        self.proj_in = nn.Linear(in_channels, hidden_size, bias=True)
        self.token_refiner = HunyuanImageIndividualTokenRefiner(num_attention_heads=num_attention_heads,
                                                                attention_head_dim=attention_head_dim,
                                                                num_layers=num_layers, mlp_width_ratio=mlp_ratio,
                                                                mlp_drop_rate=mlp_drop_rate,
                                                                attention_bias=attention_bias)

    def forward(self, hidden_states, timestep, attention_mask=None):
        if attention_mask is None:
            pooled_hidden_states = hidden_states.mean(dim=1)
        else:
            original_dtype = hidden_states.dtype
            mask_float = attention_mask.float().unsqueeze(-1)
            pooled_hidden_states = (hidden_states * mask_float).sum(dim=1) / mask_float.sum(dim=1)
            pooled_hidden_states = pooled_hidden_states.to(original_dtype)
        temb = self.time_text_embed(timestep, pooled_hidden_states)
        hidden_states = self.proj_in(hidden_states)
        return self.token_refiner(hidden_states, temb, attention_mask)


class HunyuanImageRotaryPosEmbed(nn.Module):
    def __init__(self, patch_size, rope_dim, theta=256.0):
        super().__init__()
        self.patch_size = patch_size
        self.rope_dim = rope_dim
        self.theta = theta

    def forward(self, hidden_states):
        if hidden_states.ndim == 5:
            _, _, frame, height, width = hidden_states.shape
            patch_size_frame, patch_size_height, patch_size_width = self.patch_size
            rope_sizes = [frame // patch_size_frame, height // patch_size_height, width // patch_size_width]
        elif hidden_states.ndim == 4:
            _, _, height, width = hidden_states.shape
            patch_size_height, patch_size_width = self.patch_size
            rope_sizes = [height // patch_size_height, width // patch_size_width]
        else:
            raise ValueError(f"hidden_states must be a 4D or 5D tensor, got {hidden_states.shape}")
        axes_grids = []
        for i in range(len(rope_sizes)):
            axes_grids.append(torch.arange(0, rope_sizes[i], device=hidden_states.device, dtype=torch.float32))
        grid = torch.meshgrid(*axes_grids, indexing="ij")
        grid = torch.stack(grid, dim=0)
        freqs = []
        for i in range(len(rope_sizes)):
            freqs.append(get_1d_rotary_pos_embed(self.rope_dim[i], grid[i].reshape(-1), self.theta, use_real=True))
        freqs_cos = torch.cat([f[0] for f in freqs], dim=1)
        freqs_sin = torch.cat([f[1] for f in freqs], dim=1)
        return freqs_cos, freqs_sin


class HunyuanImageSingleTransformerBlock(nn.Module):
    def __init__(self, num_attention_heads, attention_head_dim, mlp_ratio=4.0, qk_norm="rms_norm"):
        super().__init__()
        hidden_size = num_attention_heads * attention_head_dim
        mlp_dim = int(hidden_size * mlp_ratio)
        self.attn = Attention(query_dim=hidden_size, cross_attention_dim=None, dim_head=attention_head_dim,
                              heads=num_attention_heads, out_dim=hidden_size, bias=True,
                              processor=hunyuan_image_attn, qk_norm=qk_norm, eps=1e-6, pre_only=True)
        self.norm = AdaLayerNormZeroSingle(hidden_size, norm_type="layer_norm")
        self.proj_mlp = nn.Linear(hidden_size, mlp_dim)
        self.act_mlp = nn.GELU(approximate="tanh")
        self.proj_out = nn.Linear(hidden_size + mlp_dim, hidden_size)

    def forward(self, hidden_states, encoder_hidden_states, temb, attention_mask=None, image_rotary_emb=None):
        text_seq_length = encoder_hidden_states.shape[1]
        hidden_states = torch.cat([hidden_states, encoder_hidden_states], dim=1)
        residual = hidden_states
        norm_hidden_states, gate = self.norm(hidden_states, emb=temb)
        mlp_hidden_states = self.act_mlp(self.proj_mlp(norm_hidden_states))
        norm_hidden_states, norm_encoder_hidden_states = (norm_hidden_states[:, :-text_seq_length, :],
                                                          norm_hidden_states[:, -text_seq_length:, :])
        attn_output, context_attn_output = self.attn(hidden_states=norm_hidden_states,
                                                     encoder_hidden_states=norm_encoder_hidden_states,
                                                     attention_mask=attention_mask,
                                                     image_rotary_emb=image_rotary_emb)
        attn_output = torch.cat([attn_output, context_attn_output], dim=1)
        hidden_states = torch.cat([attn_output, mlp_hidden_states], dim=2)
        hidden_states = gate.unsqueeze(1) * self.proj_out(hidden_states)
        hidden_states = hidden_states + residual
        hidden_states, encoder_hidden_states = (hidden_states[:, :-text_seq_length, :],
                                                hidden_states[:, -text_seq_length:, :])
        return hidden_states, encoder_hidden_states


class HunyuanImageTransformerBlock(nn.Module):
    def __init__(self, num_attention_heads, attention_head_dim, mlp_ratio, qk_norm="rms_norm"):
        super().__init__()
        hidden_size = num_attention_heads * attention_head_dim
        self.norm1 = AdaLayerNormZero(hidden_size, norm_type="layer_norm")
        self.norm1_context = AdaLayerNormZero(hidden_size, norm_type="layer_norm")
        self.attn = Attention(query_dim=hidden_size, cross_attention_dim=None, added_kv_proj_dim=hidden_size,
                              dim_head=attention_head_dim, heads=num_attention_heads, out_dim=hidden_size,
                              context_pre_only=False, bias=True, processor=hunyuan_image_attn, qk_norm=qk_norm,
                              eps=1e-6)
        self.norm2 = nn.LayerNorm(hidden_size, elementwise_affine=False, eps=1e-6)
        self.ff = FeedForward(hidden_size, mult=mlp_ratio, activation_fn="gelu-approximate")
        self.norm2_context = nn.LayerNorm(hidden_size, elementwise_affine=False, eps=1e-6)
        self.ff_context = FeedForward(hidden_size, mult=mlp_ratio, activation_fn="gelu-approximate")

    def forward(self, hidden_states, encoder_hidden_states, temb, attention_mask=None, image_rotary_emb=None):
        norm_hidden_states, gate_msa, shift_mlp, scale_mlp, gate_mlp = self.norm1(hidden_states, emb=temb)
        norm_encoder_hidden_states, c_gate_msa, c_shift_mlp, c_scale_mlp, c_gate_mlp = self.norm1_context(
            encoder_hidden_states, emb=temb)
        attn_output, context_attn_output = self.attn(hidden_states=norm_hidden_states,
                                                     encoder_hidden_states=norm_encoder_hidden_states,
                                                     attention_mask=attention_mask,
                                                     image_rotary_emb=image_rotary_emb)
        hidden_states = hidden_states + attn_output * gate_msa.unsqueeze(1)
        encoder_hidden_states = encoder_hidden_states + context_attn_output * c_gate_msa.unsqueeze(1)
        norm_hidden_states = self.norm2(hidden_states)
        norm_encoder_hidden_states = self.norm2_context(encoder_hidden_states)
        norm_hidden_states = norm_hidden_states * (1 + scale_mlp[:, None]) + shift_mlp[:, None]
        norm_encoder_hidden_states = norm_encoder_hidden_states * (1 + c_scale_mlp[:, None]) + c_shift_mlp[:, None]
        ff_output = self.ff(norm_hidden_states)
        context_ff_output = self.ff_context(norm_encoder_hidden_states)
        hidden_states = hidden_states + gate_mlp.unsqueeze(1) * ff_output
        encoder_hidden_states = encoder_hidden_states + c_gate_mlp.unsqueeze(1) * context_ff_output
        return hidden_states, encoder_hidden_states


class HunyuanImageTransformer2DModel(nn.Module):
    def __init__(self, in_channels=64, out_channels=64, num_attention_heads=28, attention_head_dim=128, num_layers=20,
                 num_single_layers=40, num_refiner_layers=2, mlp_ratio=4.0, patch_size=(1, 1), qk_norm="rms_norm",
                 guidance_embeds=False, text_embed_dim=3584, text_embed_2_dim=None, rope_theta=256.0,
                 rope_axes_dim=(64, 64), use_meanflow=False):
        super().__init__()
        inner_dim = num_attention_heads * attention_head_dim
        out_channels = out_channels or in_channels
        self.patch_size, self.out_channels = patch_size, out_channels
        self.x_embedder = HunyuanImagePatchEmbed(patch_size, in_channels, inner_dim)
        self.context_embedder = HunyuanImageTokenRefiner(text_embed_dim, num_attention_heads, attention_head_dim,
                                                         num_layers=num_refiner_layers)
        if text_embed_2_dim is not None:
            self.context_embedder_2 = HunyuanImageByT5TextProjection(text_embed_2_dim, 2048, inner_dim)
        else:
            self.context_embedder_2 = None
        self.time_guidance_embed = HunyuanImageCombinedTimeGuidanceEmbedding(inner_dim, guidance_embeds, use_meanflow)
        self.rope = HunyuanImageRotaryPosEmbed(patch_size, rope_axes_dim, rope_theta)
        self.transformer_blocks = nn.ModuleList([
            HunyuanImageTransformerBlock(num_attention_heads, attention_head_dim, mlp_ratio=mlp_ratio, qk_norm=qk_norm)
            for _ in range(num_layers)])
        self.single_transformer_blocks = nn.ModuleList([
            HunyuanImageSingleTransformerBlock(num_attention_heads, attention_head_dim, mlp_ratio=mlp_ratio,
                                               qk_norm=qk_norm)
            for _ in range(num_single_layers)])
        self.norm_out = AdaLayerNormContinuous(inner_dim, inner_dim, elementwise_affine=False, eps=1e-6)
        self.proj_out = nn.Linear(inner_dim, math.prod(patch_size) * out_channels)

    def forward(self, hidden_states, timestep, encoder_hidden_states, encoder_attention_mask, timestep_r=None,
                encoder_hidden_states_2=None, encoder_attention_mask_2=None, guidance=None, attention_kwargs=None,
                return_dict=True):
        if hidden_states.ndim == 4:
            batch_size, channels, height, width = hidden_states.shape
            sizes = (height, width)
        elif hidden_states.ndim == 5:
            batch_size, channels, frame, height, width = hidden_states.shape
            sizes = (frame, height, width)
        else:
            raise ValueError(f"hidden_states must be a 4D or 5D tensor, got {hidden_states.shape}")
        post_patch_sizes = tuple(d // p for d, p in zip(sizes, self.patch_size))
        image_rotary_emb = self.rope(hidden_states)
        encoder_attention_mask = encoder_attention_mask.bool()
        temb = self.time_guidance_embed(timestep, guidance=guidance, timestep_r=timestep_r)
        hidden_states = self.x_embedder(hidden_states)
        encoder_hidden_states = self.context_embedder(encoder_hidden_states, timestep, encoder_attention_mask)
        if self.context_embedder_2 is not None and encoder_hidden_states_2 is not None:
            encoder_hidden_states_2 = self.context_embedder_2(encoder_hidden_states_2)
            encoder_attention_mask_2 = encoder_attention_mask_2.bool()
            new_encoder_hidden_states = []
            new_encoder_attention_mask = []
            for text, text_mask, text_2, text_mask_2 in zip(encoder_hidden_states, encoder_attention_mask,
                                                            encoder_hidden_states_2, encoder_attention_mask_2):
                new_encoder_hidden_states.append(torch.cat([text_2[text_mask_2], text[text_mask],
                                                            text_2[~text_mask_2], text[~text_mask]], dim=0))
                new_encoder_attention_mask.append(torch.cat([text_mask_2[text_mask_2], text_mask[text_mask],
                                                             text_mask_2[~text_mask_2], text_mask[~text_mask]], dim=0))
            encoder_hidden_states = torch.stack(new_encoder_hidden_states)
            encoder_attention_mask = torch.stack(new_encoder_attention_mask)
        attention_mask = F.pad(encoder_attention_mask, (hidden_states.shape[1], 0), value=True)
        attention_mask = attention_mask.unsqueeze(1).unsqueeze(2)
        for block in self.transformer_blocks:
            hidden_states, encoder_hidden_states = block(hidden_states, encoder_hidden_states, temb,
                                                         attention_mask=attention_mask,
                                                         image_rotary_emb=image_rotary_emb)
        for block in self.single_transformer_blocks:
            hidden_states, encoder_hidden_states = block(hidden_states, encoder_hidden_states, temb,
                                                         attention_mask=attention_mask,
                                                         image_rotary_emb=image_rotary_emb)
        hidden_states = self.norm_out(hidden_states, temb)
        hidden_states = self.proj_out(hidden_states)
        out_channels = self.out_channels
        reshape_dims = [batch_size] + list(post_patch_sizes) + [out_channels] + list(self.patch_size)
        hidden_states = hidden_states.reshape(*reshape_dims)
        ndim = len(post_patch_sizes)
        permute_pattern = [0, ndim + 1]
        for i in range(ndim):
            permute_pattern.extend([i + 1, ndim + 2 + i])
        hidden_states = hidden_states.permute(*permute_pattern)
        final_dims = [batch_size, out_channels] + [post_patch * patch for post_patch, patch in
                                                   zip(post_patch_sizes, self.patch_size)]
        hidden_states = hidden_states.reshape(*final_dims)
        return (hidden_states,)


def build():
    # HunyuanImage-2.1 base layout scaled down: 2 heads of 16 = RoPE axes (8, 8), one refiner, one double- and one
    # single-stream block, patch (1, 1) over 8 latent channels, a 16-wide caption.
    return HunyuanImageTransformer2DModel(in_channels=8, out_channels=8, num_attention_heads=2, attention_head_dim=16,
                                          num_layers=1, num_single_layers=1, num_refiner_layers=1, mlp_ratio=4.0,
                                          patch_size=(1, 1), qk_norm="rms_norm", guidance_embeds=False,
                                          text_embed_dim=16, text_embed_2_dim=None, rope_theta=256.0,
                                          rope_axes_dim=(8, 8), use_meanflow=False)


BYT5 = "--byt5" in sys.argv  # HunyuanImage-2.1's real layout: a ByT5 glyph caption through a 2048-wide projection


def build_byt5():
    return HunyuanImageTransformer2DModel(in_channels=8, out_channels=8, num_attention_heads=2, attention_head_dim=16,
                                          num_layers=1, num_single_layers=1, num_refiner_layers=1, mlp_ratio=4.0,
                                          patch_size=(1, 1), qk_norm="rms_norm", guidance_embeds=False,
                                          text_embed_dim=16, text_embed_2_dim=8, rope_theta=256.0,
                                          rope_axes_dim=(8, 8), use_meanflow=False)


def inputs_byt5(g):
    c = inputs(g)
    n2 = 3
    mask2 = torch.ones(1, n2, dtype=torch.int64)
    mask2[:, n2 - 1:] = 0
    c["encoder_hidden_states_2"] = torch.randn((1, n2, 8), generator=g)
    c["encoder_attention_mask_2"] = mask2
    return c


def call_byt5(model, x, sigma, c):
    t = torch.tensor([sigma * 1000.0], dtype=torch.float32).expand(x.shape[0]).to(x.dtype)
    return model(hidden_states=x, timestep=t, timestep_r=None, guidance=None, attention_kwargs={}, return_dict=False,
                 encoder_hidden_states=c["encoder_hidden_states"], encoder_attention_mask=c["encoder_attention_mask"],
                 encoder_hidden_states_2=c["encoder_hidden_states_2"],
                 encoder_attention_mask_2=c["encoder_attention_mask_2"])[0]


DISTILLED = "--distilled" in sys.argv  # HunyuanImage-2.1-Distilled: meanflow (timestep_r) and a guidance embedding


def build_distilled():
    return HunyuanImageTransformer2DModel(in_channels=8, out_channels=8, num_attention_heads=2, attention_head_dim=16,
                                          num_layers=1, num_single_layers=1, num_refiner_layers=1, mlp_ratio=4.0,
                                          patch_size=(1, 1), qk_norm="rms_norm", guidance_embeds=True,
                                          text_embed_dim=16, text_embed_2_dim=None, rope_theta=256.0,
                                          rope_axes_dim=(8, 8), use_meanflow=True)


def inputs_distilled(g):
    c = inputs(g)
    # HunyuanImagePipeline: guidance = tensor([distilled_guidance_scale] * B, transformer dtype) * 1000
    c["guidance"] = torch.tensor([3.25], dtype=torch.float32) * 1000.0
    return c



def call_distilled(model, x, sigma, c):
    from run import SIGMAS
    i = SIGMAS.index(sigma)
    t = torch.tensor([sigma * 1000.0], dtype=torch.float32).expand(x.shape[0]).to(x.dtype)
    # timestep_r = timesteps[i + 1] (0 at the last step), expanded and cast as the timestep is
    if i == len(SIGMAS) - 2:
        timestep_r = torch.tensor([0.0])
    else:
        timestep_r = torch.tensor([SIGMAS[i + 1] * 1000.0], dtype=torch.float32)
    timestep_r = timestep_r.expand(x.shape[0]).to(x.dtype)
    return model(hidden_states=x, timestep=t, timestep_r=timestep_r, guidance=c["guidance"], attention_kwargs={},
                 return_dict=False, encoder_hidden_states=c["encoder_hidden_states"],
                 encoder_attention_mask=c["encoder_attention_mask"])[0]


REFINER = "--refiner" in sys.argv  # HunyuanImageRefinerPipeline's model: 5-D latents joined with a condition


def build_refiner():
    # The refiner's layout scaled down: 3-D patches (1, 1, 1) over [latents, condition] channels, 3-axis RoPE,
    # guidance embedding, no mean-flow.
    return HunyuanImageTransformer2DModel(in_channels=16, out_channels=8, num_attention_heads=2, attention_head_dim=16,
                                          num_layers=1, num_single_layers=1, num_refiner_layers=1, mlp_ratio=4.0,
                                          patch_size=(1, 1, 1), qk_norm="rms_norm", guidance_embeds=True,
                                          text_embed_dim=16, text_embed_2_dim=None, rope_theta=256.0,
                                          rope_axes_dim=(4, 6, 6), use_meanflow=False)


def inputs_refiner(g):
    c = inputs(g)
    c.pop("noise")
    shape = (1, 8, 1, 4, 4)  # (B, C, 1, H, W): prepare_latents
    c["noise"] = torch.randn(shape, generator=g)
    # cond_latents = strength·noise + (1 − strength)·image_latents, strength 0.25 (image latents drawn)
    image_latents = torch.randn(shape, generator=g)
    noise = torch.randn(shape, generator=g)
    c["cond_latents"] = 0.25 * noise + (1 - 0.25) * image_latents
    c["guidance"] = torch.tensor([3.25], dtype=torch.float32) * 1000.0
    return c


def call_refiner(model, x, sigma, c):
    latent_model_input = torch.cat([x, c["cond_latents"]], dim=1)
    t = torch.tensor([sigma * 1000.0], dtype=torch.float32).expand(x.shape[0]).to(x.dtype)
    return model(hidden_states=latent_model_input, timestep=t, guidance=c["guidance"], attention_kwargs={},
                 return_dict=False, encoder_hidden_states=c["encoder_hidden_states"],
                 encoder_attention_mask=c["encoder_attention_mask"])[0]


def inputs(g):
    # HunyuanImagePipeline: Qwen2.5-VL prompt embeds and their 0/1 mask (the last token padding).
    n = 4
    mask = torch.ones(1, n, dtype=torch.int64)
    mask[:, n - 1:] = 0
    return {"encoder_hidden_states": torch.randn((1, n, 16), generator=g), "encoder_attention_mask": mask,
            "noise": torch.randn((1, 8, 4, 4), generator=g)}


def call(model, x, sigma, c):
    t = torch.tensor([sigma * 1000.0], dtype=torch.float32).expand(x.shape[0]).to(x.dtype)
    return model(hidden_states=x, timestep=t, timestep_r=None, guidance=None, attention_kwargs={}, return_dict=False,
                 encoder_hidden_states=c["encoder_hidden_states"],
                 encoder_attention_mask=c["encoder_attention_mask"])[0]


PRODUCER = dict(
    library_source="replica of huggingface/diffusers transformer_hunyuanimage.py@071190daca86 and the parts it "
                   "imports (torch 1.13)",
    timestep="sigma*1000 float32 (HunyuanImagePipeline: t.expand(B).to(latents.dtype))",
    velocity="model output as is (flow velocity), not negated",
    note="HunyuanImage-2.1 MMDiT (base layout, no ByT5 glyph caption, no guidance embedding), one refiner, one "
         "double- and one single-stream block: joint sequence [image, text]; AdaLayerNormZero (shift, scale, gate, "
         "shift, scale, gate) with (1 + scale), x + y·gate; RMSNorm q/k (and added q/k) per head; RoPE interleaved "
         "from the latents' grid (axes 8, 8, theta 256) on the image rows only (single block: the text rows of q/k "
         "left as they are); bool key mask [ones for the image, caption mask]; gelu-tanh FFNs; single block: "
         "AdaLayerNormZeroSingle, proj_mlp + gelu-tanh beside the attention, proj_out over [attention, mlp], "
         "gate·proj_out + residual; caption token refiner: temb = time embedding + silu MLP of the masked mean of "
         "the caption, self-attention under mask m_i & m_j (column 0 always attends), gates from an AdaNorm of temb, "
         "linear-silu FFN; 1x1 conv patch embed; AdaLayerNormContinuous [scale, shift] + proj_out, unpatchify")

if __name__ == "__main__":
    if REFINER:
        capture("hunyuanimage21_refiner", build_refiner, inputs_refiner, call_refiner, sys.argv[1],
                dict(PRODUCER, note=PRODUCER["note"] + "; the refiner's layout: 5-D latents (B, C, 1, H, W) joined "
                                                       "with the condition's channels, a 1x1x1 Conv3d patch embed, "
                                                       "3-axis RoPE (4, 6, 6) over (frame, h, w), guidance 3.25*1000"))
    elif DISTILLED:
        capture("hunyuanimage21_distilled", build_distilled, inputs_distilled, call_distilled, sys.argv[1],
                dict(PRODUCER, timestep=PRODUCER["timestep"] + "; timestep_r the next step's sigma*1000 (0 at the last "
                                                               "step), guidance 3.25*1000",
                     note=PRODUCER["note"] + "; distilled layout: temb = (time embedding of t + second time "
                                             "embedding of timestep_r)/2 + guidance embedding"))
    elif BYT5:
        capture("hunyuanimage21_byt5", build_byt5, inputs_byt5, call_byt5, sys.argv[1],
                dict(PRODUCER, note=PRODUCER["note"] + "; with the ByT5 glyph caption (text_embed_2_dim 8, the fixed "
                                                        "2048-wide projection): valid glyph rows, valid caption rows, "
                                                        "then the padding of each"))
    else:
        capture("hunyuanimage21", build, inputs, call, sys.argv[1], PRODUCER)
