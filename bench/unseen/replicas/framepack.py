"""HunyuanVideo FramePack DiT, reimplemented for torch 1.13 (no diffusers here), captured small in f32 on CPU.

Follows huggingface/diffusers src/diffusers/models/transformers/transformer_hunyuan_video_framepack.py at
577a6aed50bbafbed6981e6ce0dbfa2fe5f12173 (HunyuanVideoFramepackTransformer3DModel with _pack_history_states,
_pad_rotary_emb, _pad_for_3d_conv, _center_down_sample_3d; HunyuanVideoFramepackRotaryPosEmbed,
FramepackClipVisionProjection, HunyuanVideoHistoryPatchEmbed) and the classes it imports from
transformer_hunyuan_video.py (the version with HunyuanVideoConditionEmbedding: HunyuanVideoAttnProcessor2_0,
HunyuanVideoPatchEmbed, HunyuanVideoAdaNorm, HunyuanVideoIndividualTokenRefiner(Block), HunyuanVideoTokenRefiner,
HunyuanVideoConditionEmbedding, HunyuanVideoTransformerBlock, HunyuanVideoSingleTransformerBlock), with the parts
those import: attention_processor.py (Attention with qk_norm "rms_norm", pre_only / context_pre_only, AttnProcessor2_0
as the refiner's attention forward), attention.py (FeedForward "gelu-approximate" and "linear-silu"), embeddings.py
(Timesteps, TimestepEmbedding, PixArtAlphaTextProjection, CombinedTimestepTextProjEmbeddings,
get_1d_rotary_pos_embed use_real, apply_rotary_emb), normalization.py (RMSNorm, AdaLayerNormZero,
AdaLayerNormZeroSingle, AdaLayerNormContinuous): the same module tree, parameter names and shapes, call boundaries;
the arithmetic line for line. Stand-in for what torch 1.13 lacks: F.scaled_dot_product_attention (SDPA's math,
default scale, bool mask).

The constructs it shows: the noisy window's 1x2x2 conv tokens are prefixed by history context at three compressions
([4x, 2x, clean] then the window): clean latents ([image, last frame]) through the same-size conv, 2 history frames
through a 2x4x4 conv, 16 through a 4x8x8 conv (replicate padding to the kernel), each with a RoPE table built from
explicit frame indices and, for 2x/4x, avg-pooled (2,2,2)/(4,4,4) to the token grid; text = [SigLIP image tokens
through an up-SiLU-down MLP, Llama tokens through the masked token refiner]; batch 1 drops the padded prompt tokens;
only the last window tokens kept for the output norm and projection.

Configuration as bench/unseen/capture_dit.py's framepack case (--small sizes) but with 4x4 latents (8x8 there):
the 4x history (16 frames) is replicate-padded to 8x8 before its 4x8x8 conv and its RoPE table padded 2x2 -> 4x4
before the 4x4x4 average, the trace stays near 2 MB. Pipeline as
HunyuanVideoFramepackPipeline calls it (inverted anti-drifting sampling, the last section, latent padding 0,
true_cfg_scale 1: one call per step): timestep = t.expand(B) (sigma*1000, float32), guidance = 10*1000, velocity the
output as is.

usage: /usr/bin/python3 bench/unseen/replicas/framepack.py OUTDIR
"""
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


def hunyuan_video_attn(attn, hidden_states, encoder_hidden_states=None, attention_mask=None, image_rotary_emb=None):
    """HunyuanVideoAttnProcessor2_0.__call__ ([B, H, L, D]; SDPA's math)."""
    if attn.add_q_proj is None and encoder_hidden_states is not None:
        hidden_states = torch.cat([hidden_states, encoder_hidden_states], dim=1)
    query = attn.to_q(hidden_states)
    key = attn.to_k(hidden_states)
    value = attn.to_v(hidden_states)
    query = query.unflatten(2, (attn.heads, -1)).transpose(1, 2)
    key = key.unflatten(2, (attn.heads, -1)).transpose(1, 2)
    value = value.unflatten(2, (attn.heads, -1)).transpose(1, 2)
    if attn.norm_q is not None:
        query = attn.norm_q(query)
    if attn.norm_k is not None:
        key = attn.norm_k(key)
    if image_rotary_emb is not None:
        if attn.add_q_proj is None and encoder_hidden_states is not None:
            query = torch.cat([apply_rotary_emb(query[:, :, : -encoder_hidden_states.shape[1]], image_rotary_emb),
                               query[:, :, -encoder_hidden_states.shape[1]:]], dim=2)
            key = torch.cat([apply_rotary_emb(key[:, :, : -encoder_hidden_states.shape[1]], image_rotary_emb),
                             key[:, :, -encoder_hidden_states.shape[1]:]], dim=2)
        else:
            query = apply_rotary_emb(query, image_rotary_emb)
            key = apply_rotary_emb(key, image_rotary_emb)
    if attn.add_q_proj is not None and encoder_hidden_states is not None:
        encoder_query = attn.add_q_proj(encoder_hidden_states)
        encoder_key = attn.add_k_proj(encoder_hidden_states)
        encoder_value = attn.add_v_proj(encoder_hidden_states)
        encoder_query = encoder_query.unflatten(2, (attn.heads, -1)).transpose(1, 2)
        encoder_key = encoder_key.unflatten(2, (attn.heads, -1)).transpose(1, 2)
        encoder_value = encoder_value.unflatten(2, (attn.heads, -1)).transpose(1, 2)
        if attn.norm_added_q is not None:
            encoder_query = attn.norm_added_q(encoder_query)
        if attn.norm_added_k is not None:
            encoder_key = attn.norm_added_k(encoder_key)
        query = torch.cat([query, encoder_query], dim=2)
        key = torch.cat([key, encoder_key], dim=2)
        value = torch.cat([value, encoder_value], dim=2)
    hidden_states = sdpa(query, key, value, mask=attention_mask)
    hidden_states = hidden_states.transpose(1, 2).flatten(2, 3)
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


class HunyuanVideoPatchEmbed(nn.Module):
    def __init__(self, patch_size=16, in_chans=3, embed_dim=768):
        super().__init__()
        patch_size = (patch_size, patch_size, patch_size) if isinstance(patch_size, int) else patch_size
        self.proj = nn.Conv3d(in_chans, embed_dim, kernel_size=patch_size, stride=patch_size)

    def forward(self, hidden_states):
        hidden_states = self.proj(hidden_states)
        hidden_states = hidden_states.flatten(2).transpose(1, 2)
        return hidden_states


class HunyuanVideoAdaNorm(nn.Module):
    def __init__(self, in_features, out_features=None):
        super().__init__()
        out_features = out_features or 2 * in_features
        self.linear = nn.Linear(in_features, out_features)
        self.nonlinearity = nn.SiLU()

    def forward(self, temb):
        temb = self.linear(self.nonlinearity(temb))
        gate_msa, gate_mlp = temb.chunk(2, dim=1)
        gate_msa, gate_mlp = gate_msa.unsqueeze(1), gate_mlp.unsqueeze(1)
        return gate_msa, gate_mlp


class HunyuanVideoConditionEmbedding(nn.Module):
    def __init__(self, embedding_dim, pooled_projection_dim, guidance_embeds, image_condition_type=None):
        super().__init__()
        self.image_condition_type = image_condition_type
        self.time_proj = Timesteps(num_channels=256, flip_sin_to_cos=True, downscale_freq_shift=0)
        self.timestep_embedder = TimestepEmbedding(in_channels=256, time_embed_dim=embedding_dim)
        self.text_embedder = PixArtAlphaTextProjection(pooled_projection_dim, embedding_dim, act_fn="silu")
        self.guidance_embedder = None
        if guidance_embeds:
            self.guidance_embedder = TimestepEmbedding(in_channels=256, time_embed_dim=embedding_dim)

    def forward(self, timestep, pooled_projection, guidance=None):
        timesteps_proj = self.time_proj(timestep)
        timesteps_emb = self.timestep_embedder(timesteps_proj.to(dtype=pooled_projection.dtype))
        pooled_projections = self.text_embedder(pooled_projection)
        conditioning = timesteps_emb + pooled_projections
        token_replace_emb = None
        if self.image_condition_type == "token_replace":
            raise NotImplementedError("token_replace")
        if self.guidance_embedder is not None:
            guidance_proj = self.time_proj(guidance)
            guidance_emb = self.guidance_embedder(guidance_proj.to(dtype=pooled_projection.dtype))
            conditioning = conditioning + guidance_emb
        return conditioning, token_replace_emb


class HunyuanVideoIndividualTokenRefinerBlock(nn.Module):
    def __init__(self, num_attention_heads, attention_head_dim, mlp_width_ratio=4.0, mlp_drop_rate=0.0,
                 attention_bias=True):
        super().__init__()
        hidden_size = num_attention_heads * attention_head_dim
        self.norm1 = nn.LayerNorm(hidden_size, elementwise_affine=True, eps=1e-6)
        self.attn = Attention(query_dim=hidden_size, cross_attention_dim=None, heads=num_attention_heads,
                              dim_head=attention_head_dim, bias=attention_bias)
        self.norm2 = nn.LayerNorm(hidden_size, elementwise_affine=True, eps=1e-6)
        self.ff = FeedForward(hidden_size, mult=mlp_width_ratio, activation_fn="linear-silu", dropout=mlp_drop_rate)
        self.norm_out = HunyuanVideoAdaNorm(hidden_size, 2 * hidden_size)

    def forward(self, hidden_states, temb, attention_mask=None):
        norm_hidden_states = self.norm1(hidden_states)
        attn_output = self.attn(hidden_states=norm_hidden_states, encoder_hidden_states=None,
                                attention_mask=attention_mask)
        gate_msa, gate_mlp = self.norm_out(temb)
        hidden_states = hidden_states + attn_output * gate_msa
        ff_output = self.ff(self.norm2(hidden_states))
        hidden_states = hidden_states + ff_output * gate_mlp
        return hidden_states


class HunyuanVideoIndividualTokenRefiner(nn.Module):
    def __init__(self, num_attention_heads, attention_head_dim, num_layers, mlp_width_ratio=4.0, mlp_drop_rate=0.0,
                 attention_bias=True):
        super().__init__()
        self.refiner_blocks = nn.ModuleList([
            HunyuanVideoIndividualTokenRefinerBlock(num_attention_heads=num_attention_heads,
                                                    attention_head_dim=attention_head_dim,
                                                    mlp_width_ratio=mlp_width_ratio, mlp_drop_rate=mlp_drop_rate,
                                                    attention_bias=attention_bias)
            for _ in range(num_layers)])

    def forward(self, hidden_states, temb, attention_mask=None):
        self_attn_mask = None
        if attention_mask is not None:
            batch_size = attention_mask.shape[0]
            seq_len = attention_mask.shape[1]
            attention_mask = attention_mask.to(hidden_states.device).bool()
            self_attn_mask_1 = attention_mask.view(batch_size, 1, 1, seq_len).repeat(1, 1, seq_len, 1)
            self_attn_mask_2 = self_attn_mask_1.transpose(2, 3)
            self_attn_mask = (self_attn_mask_1 & self_attn_mask_2).bool()
            self_attn_mask[:, :, :, 0] = True
        for block in self.refiner_blocks:
            hidden_states = block(hidden_states, temb, self_attn_mask)
        return hidden_states


class HunyuanVideoTokenRefiner(nn.Module):
    def __init__(self, in_channels, num_attention_heads, attention_head_dim, num_layers, mlp_ratio=4.0,
                 mlp_drop_rate=0.0, attention_bias=True):
        super().__init__()
        hidden_size = num_attention_heads * attention_head_dim
        self.time_text_embed = CombinedTimestepTextProjEmbeddings(embedding_dim=hidden_size,
                                                                  pooled_projection_dim=in_channels)
        self.proj_in = nn.Linear(in_channels, hidden_size, bias=True)
        self.token_refiner = HunyuanVideoIndividualTokenRefiner(num_attention_heads=num_attention_heads,
                                                                attention_head_dim=attention_head_dim,
                                                                num_layers=num_layers, mlp_width_ratio=mlp_ratio,
                                                                mlp_drop_rate=mlp_drop_rate,
                                                                attention_bias=attention_bias)

    def forward(self, hidden_states, timestep, attention_mask=None):
        if attention_mask is None:
            pooled_projections = hidden_states.mean(dim=1)
        else:
            original_dtype = hidden_states.dtype
            mask_float = attention_mask.float().unsqueeze(-1)
            pooled_projections = (hidden_states * mask_float).sum(dim=1) / mask_float.sum(dim=1)
            pooled_projections = pooled_projections.to(original_dtype)
        temb = self.time_text_embed(timestep, pooled_projections)
        hidden_states = self.proj_in(hidden_states)
        hidden_states = self.token_refiner(hidden_states, temb, attention_mask)
        return hidden_states


class HunyuanVideoSingleTransformerBlock(nn.Module):
    def __init__(self, num_attention_heads, attention_head_dim, mlp_ratio=4.0, qk_norm="rms_norm"):
        super().__init__()
        hidden_size = num_attention_heads * attention_head_dim
        mlp_dim = int(hidden_size * mlp_ratio)
        self.attn = Attention(query_dim=hidden_size, cross_attention_dim=None, dim_head=attention_head_dim,
                              heads=num_attention_heads, out_dim=hidden_size, bias=True,
                              processor=hunyuan_video_attn, qk_norm=qk_norm, eps=1e-6, pre_only=True)
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
                                                     attention_mask=attention_mask, image_rotary_emb=image_rotary_emb)
        attn_output = torch.cat([attn_output, context_attn_output], dim=1)
        hidden_states = torch.cat([attn_output, mlp_hidden_states], dim=2)
        hidden_states = gate.unsqueeze(1) * self.proj_out(hidden_states)
        hidden_states = hidden_states + residual
        hidden_states, encoder_hidden_states = (hidden_states[:, :-text_seq_length, :],
                                                hidden_states[:, -text_seq_length:, :])
        return hidden_states, encoder_hidden_states


class HunyuanVideoTransformerBlock(nn.Module):
    def __init__(self, num_attention_heads, attention_head_dim, mlp_ratio, qk_norm="rms_norm"):
        super().__init__()
        hidden_size = num_attention_heads * attention_head_dim
        self.norm1 = AdaLayerNormZero(hidden_size, norm_type="layer_norm")
        self.norm1_context = AdaLayerNormZero(hidden_size, norm_type="layer_norm")
        self.attn = Attention(query_dim=hidden_size, cross_attention_dim=None, added_kv_proj_dim=hidden_size,
                              dim_head=attention_head_dim, heads=num_attention_heads, out_dim=hidden_size,
                              context_pre_only=False, bias=True, processor=hunyuan_video_attn, qk_norm=qk_norm,
                              eps=1e-6)
        self.norm2 = nn.LayerNorm(hidden_size, elementwise_affine=False, eps=1e-6)
        self.ff = FeedForward(hidden_size, mult=mlp_ratio, activation_fn="gelu-approximate")
        self.norm2_context = nn.LayerNorm(hidden_size, elementwise_affine=False, eps=1e-6)
        self.ff_context = FeedForward(hidden_size, mult=mlp_ratio, activation_fn="gelu-approximate")

    def forward(self, hidden_states, encoder_hidden_states, temb, attention_mask=None, freqs_cis=None):
        norm_hidden_states, gate_msa, shift_mlp, scale_mlp, gate_mlp = self.norm1(hidden_states, emb=temb)
        norm_encoder_hidden_states, c_gate_msa, c_shift_mlp, c_scale_mlp, c_gate_mlp = self.norm1_context(
            encoder_hidden_states, emb=temb)
        attn_output, context_attn_output = self.attn(hidden_states=norm_hidden_states,
                                                     encoder_hidden_states=norm_encoder_hidden_states,
                                                     attention_mask=attention_mask, image_rotary_emb=freqs_cis)
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


class HunyuanVideoFramepackRotaryPosEmbed(nn.Module):
    def __init__(self, patch_size, patch_size_t, rope_dim, theta=256.0):
        super().__init__()
        self.patch_size = patch_size
        self.patch_size_t = patch_size_t
        self.rope_dim = rope_dim
        self.theta = theta

    def forward(self, frame_indices, height, width, device):
        height = height // self.patch_size
        width = width // self.patch_size
        grid = torch.meshgrid(frame_indices.to(device=device, dtype=torch.float32),
                              torch.arange(0, height, device=device, dtype=torch.float32),
                              torch.arange(0, width, device=device, dtype=torch.float32), indexing="ij")
        grid = torch.stack(grid, dim=0)
        freqs = []
        for i in range(3):
            freq = get_1d_rotary_pos_embed(self.rope_dim[i], grid[i].reshape(-1), self.theta, use_real=True)
            freqs.append(freq)
        freqs_cos = torch.cat([f[0] for f in freqs], dim=1)
        freqs_sin = torch.cat([f[1] for f in freqs], dim=1)
        return freqs_cos, freqs_sin


class FramepackClipVisionProjection(nn.Module):
    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.up = nn.Linear(in_channels, out_channels * 3)
        self.down = nn.Linear(out_channels * 3, out_channels)

    def forward(self, hidden_states):
        hidden_states = self.up(hidden_states)
        hidden_states = F.silu(hidden_states)
        hidden_states = self.down(hidden_states)
        return hidden_states


class HunyuanVideoHistoryPatchEmbed(nn.Module):
    def __init__(self, in_channels, inner_dim):
        super().__init__()
        self.proj = nn.Conv3d(in_channels, inner_dim, kernel_size=(1, 2, 2), stride=(1, 2, 2))
        self.proj_2x = nn.Conv3d(in_channels, inner_dim, kernel_size=(2, 4, 4), stride=(2, 4, 4))
        self.proj_4x = nn.Conv3d(in_channels, inner_dim, kernel_size=(4, 8, 8), stride=(4, 8, 8))

    def forward(self, latents_clean=None, latents_clean_2x=None, latents_clean_4x=None):
        if latents_clean is not None:
            latents_clean = self.proj(latents_clean)
            latents_clean = latents_clean.flatten(2).transpose(1, 2)
        if latents_clean_2x is not None:
            latents_clean_2x = _pad_for_3d_conv(latents_clean_2x, (2, 4, 4))
            latents_clean_2x = self.proj_2x(latents_clean_2x)
            latents_clean_2x = latents_clean_2x.flatten(2).transpose(1, 2)
        if latents_clean_4x is not None:
            latents_clean_4x = _pad_for_3d_conv(latents_clean_4x, (4, 8, 8))
            latents_clean_4x = self.proj_4x(latents_clean_4x)
            latents_clean_4x = latents_clean_4x.flatten(2).transpose(1, 2)
        return latents_clean, latents_clean_2x, latents_clean_4x


class HunyuanVideoFramepackTransformer3DModel(nn.Module):
    def __init__(self, in_channels=16, out_channels=16, num_attention_heads=24, attention_head_dim=128, num_layers=20,
                 num_single_layers=40, num_refiner_layers=2, mlp_ratio=4.0, patch_size=2, patch_size_t=1,
                 qk_norm="rms_norm", guidance_embeds=True, text_embed_dim=4096, pooled_projection_dim=768,
                 rope_theta=256.0, rope_axes_dim=(16, 56, 56), image_condition_type=None, has_image_proj=False,
                 image_proj_dim=1152, has_clean_x_embedder=False):
        super().__init__()
        inner_dim = num_attention_heads * attention_head_dim
        out_channels = out_channels or in_channels
        self.patch_size, self.patch_size_t = patch_size, patch_size_t
        self.x_embedder = HunyuanVideoPatchEmbed((patch_size_t, patch_size, patch_size), in_channels, inner_dim)
        self.clean_x_embedder = None
        if has_clean_x_embedder:
            self.clean_x_embedder = HunyuanVideoHistoryPatchEmbed(in_channels, inner_dim)
        self.context_embedder = HunyuanVideoTokenRefiner(text_embed_dim, num_attention_heads, attention_head_dim,
                                                         num_layers=num_refiner_layers)
        self.image_projection = FramepackClipVisionProjection(image_proj_dim, inner_dim) if has_image_proj else None
        self.time_text_embed = HunyuanVideoConditionEmbedding(inner_dim, pooled_projection_dim, guidance_embeds,
                                                              image_condition_type)
        self.rope = HunyuanVideoFramepackRotaryPosEmbed(patch_size, patch_size_t, rope_axes_dim, rope_theta)
        self.transformer_blocks = nn.ModuleList([
            HunyuanVideoTransformerBlock(num_attention_heads, attention_head_dim, mlp_ratio=mlp_ratio, qk_norm=qk_norm)
            for _ in range(num_layers)])
        self.single_transformer_blocks = nn.ModuleList([
            HunyuanVideoSingleTransformerBlock(num_attention_heads, attention_head_dim, mlp_ratio=mlp_ratio,
                                               qk_norm=qk_norm)
            for _ in range(num_single_layers)])
        self.norm_out = AdaLayerNormContinuous(inner_dim, inner_dim, elementwise_affine=False, eps=1e-6)
        self.proj_out = nn.Linear(inner_dim, patch_size_t * patch_size * patch_size * out_channels)

    def forward(self, hidden_states, timestep, encoder_hidden_states, encoder_attention_mask, pooled_projections,
                image_embeds, indices_latents, guidance=None, latents_clean=None, indices_latents_clean=None,
                latents_history_2x=None, indices_latents_history_2x=None, latents_history_4x=None,
                indices_latents_history_4x=None, attention_kwargs=None, return_dict=True):
        batch_size, num_channels, num_frames, height, width = hidden_states.shape
        p, p_t = self.patch_size, self.patch_size_t
        post_patch_num_frames = num_frames // p_t
        post_patch_height = height // p
        post_patch_width = width // p
        original_context_length = post_patch_num_frames * post_patch_height * post_patch_width
        if indices_latents is None:
            indices_latents = torch.arange(0, num_frames).unsqueeze(0).expand(batch_size, -1)
        hidden_states = self.x_embedder(hidden_states)
        image_rotary_emb = self.rope(frame_indices=indices_latents, height=height, width=width,
                                     device=hidden_states.device)
        latents_clean, latents_history_2x, latents_history_4x = self.clean_x_embedder(
            latents_clean, latents_history_2x, latents_history_4x)
        if latents_clean is not None and indices_latents_clean is not None:
            image_rotary_emb_clean = self.rope(frame_indices=indices_latents_clean, height=height, width=width,
                                               device=hidden_states.device)
        if latents_history_2x is not None and indices_latents_history_2x is not None:
            image_rotary_emb_history_2x = self.rope(frame_indices=indices_latents_history_2x, height=height,
                                                    width=width, device=hidden_states.device)
        if latents_history_4x is not None and indices_latents_history_4x is not None:
            image_rotary_emb_history_4x = self.rope(frame_indices=indices_latents_history_4x, height=height,
                                                    width=width, device=hidden_states.device)
        hidden_states, image_rotary_emb = self._pack_history_states(
            hidden_states, latents_clean, latents_history_2x, latents_history_4x, image_rotary_emb,
            image_rotary_emb_clean, image_rotary_emb_history_2x, image_rotary_emb_history_4x, post_patch_height,
            post_patch_width)
        temb, _ = self.time_text_embed(timestep, pooled_projections, guidance)
        encoder_hidden_states = self.context_embedder(encoder_hidden_states, timestep, encoder_attention_mask)
        encoder_hidden_states_image = self.image_projection(image_embeds)
        attention_mask_image = encoder_attention_mask.new_ones((batch_size, encoder_hidden_states_image.shape[1]))
        encoder_hidden_states = torch.cat([encoder_hidden_states_image, encoder_hidden_states], dim=1)
        encoder_attention_mask = torch.cat([attention_mask_image, encoder_attention_mask], dim=1)
        latent_sequence_length = hidden_states.shape[1]
        condition_sequence_length = encoder_hidden_states.shape[1]
        sequence_length = latent_sequence_length + condition_sequence_length
        attention_mask = torch.zeros(batch_size, sequence_length, device=hidden_states.device, dtype=torch.bool)
        effective_condition_sequence_length = encoder_attention_mask.sum(dim=1, dtype=torch.int)
        effective_sequence_length = latent_sequence_length + effective_condition_sequence_length
        if batch_size == 1:
            encoder_hidden_states = encoder_hidden_states[:, : effective_condition_sequence_length[0]]
            attention_mask = None
        else:
            for i in range(batch_size):
                attention_mask[i, : effective_sequence_length[i]] = True
            attention_mask = attention_mask.unsqueeze(1).unsqueeze(1)
        for block in self.transformer_blocks:
            hidden_states, encoder_hidden_states = block(hidden_states, encoder_hidden_states, temb, attention_mask,
                                                         image_rotary_emb)
        for block in self.single_transformer_blocks:
            hidden_states, encoder_hidden_states = block(hidden_states, encoder_hidden_states, temb, attention_mask,
                                                         image_rotary_emb)
        hidden_states = hidden_states[:, -original_context_length:]
        hidden_states = self.norm_out(hidden_states, temb)
        hidden_states = self.proj_out(hidden_states)
        hidden_states = hidden_states.reshape(batch_size, post_patch_num_frames, post_patch_height, post_patch_width,
                                              -1, p_t, p, p)
        hidden_states = hidden_states.permute(0, 4, 1, 5, 2, 6, 3, 7)
        hidden_states = hidden_states.flatten(6, 7).flatten(4, 5).flatten(2, 3)
        return (hidden_states,)

    def _pack_history_states(self, hidden_states, latents_clean=None, latents_history_2x=None,
                             latents_history_4x=None, image_rotary_emb=None, image_rotary_emb_clean=None,
                             image_rotary_emb_history_2x=None, image_rotary_emb_history_4x=None, height=None,
                             width=None):
        image_rotary_emb = list(image_rotary_emb)
        if latents_clean is not None and image_rotary_emb_clean is not None:
            hidden_states = torch.cat([latents_clean, hidden_states], dim=1)
            image_rotary_emb[0] = torch.cat([image_rotary_emb_clean[0], image_rotary_emb[0]], dim=0)
            image_rotary_emb[1] = torch.cat([image_rotary_emb_clean[1], image_rotary_emb[1]], dim=0)
        if latents_history_2x is not None and image_rotary_emb_history_2x is not None:
            hidden_states = torch.cat([latents_history_2x, hidden_states], dim=1)
            image_rotary_emb_history_2x = self._pad_rotary_emb(image_rotary_emb_history_2x, height, width, (2, 2, 2))
            image_rotary_emb[0] = torch.cat([image_rotary_emb_history_2x[0], image_rotary_emb[0]], dim=0)
            image_rotary_emb[1] = torch.cat([image_rotary_emb_history_2x[1], image_rotary_emb[1]], dim=0)
        if latents_history_4x is not None and image_rotary_emb_history_4x is not None:
            hidden_states = torch.cat([latents_history_4x, hidden_states], dim=1)
            image_rotary_emb_history_4x = self._pad_rotary_emb(image_rotary_emb_history_4x, height, width, (4, 4, 4))
            image_rotary_emb[0] = torch.cat([image_rotary_emb_history_4x[0], image_rotary_emb[0]], dim=0)
            image_rotary_emb[1] = torch.cat([image_rotary_emb_history_4x[1], image_rotary_emb[1]], dim=0)
        return hidden_states, tuple(image_rotary_emb)

    def _pad_rotary_emb(self, image_rotary_emb, height, width, kernel_size):
        freqs_cos, freqs_sin = image_rotary_emb
        freqs_cos = freqs_cos.unsqueeze(0).permute(0, 2, 1).unflatten(2, (-1, height, width))
        freqs_sin = freqs_sin.unsqueeze(0).permute(0, 2, 1).unflatten(2, (-1, height, width))
        freqs_cos = _pad_for_3d_conv(freqs_cos, kernel_size)
        freqs_sin = _pad_for_3d_conv(freqs_sin, kernel_size)
        freqs_cos = _center_down_sample_3d(freqs_cos, kernel_size)
        freqs_sin = _center_down_sample_3d(freqs_sin, kernel_size)
        freqs_cos = freqs_cos.flatten(2).permute(0, 2, 1).squeeze(0)
        freqs_sin = freqs_sin.flatten(2).permute(0, 2, 1).squeeze(0)
        return freqs_cos, freqs_sin


def _pad_for_3d_conv(x, kernel_size):
    if isinstance(x, (tuple, list)):
        return tuple(_pad_for_3d_conv(i, kernel_size) for i in x)
    b, c, t, h, w = x.shape
    pt, ph, pw = kernel_size
    pad_t = (pt - (t % pt)) % pt
    pad_h = (ph - (h % ph)) % ph
    pad_w = (pw - (w % pw)) % pw
    if x.dtype == torch.bfloat16 and x.device.type == "cpu":  # torch 1.13's CPU replicate pad has no bf16 kernel:
        # padding copies values, so padding in f32 and casting back gives the same tensor
        return torch.nn.functional.pad(x.float(), (0, pad_w, 0, pad_h, 0, pad_t), mode="replicate").to(x.dtype)
    return torch.nn.functional.pad(x, (0, pad_w, 0, pad_h, 0, pad_t), mode="replicate")


def _center_down_sample_3d(x, kernel_size):
    if isinstance(x, (tuple, list)):
        return tuple(_center_down_sample_3d(i, kernel_size) for i in x)
    return torch.nn.functional.avg_pool3d(x, kernel_size, stride=kernel_size)


FP_WIN = 2  # latent window (frames denoised per section)


def build():
    # capture_dit.py's framepack case at its --small sizes: head_dim 16 = RoPE axes (4, 6, 6).
    return HunyuanVideoFramepackTransformer3DModel(in_channels=4, out_channels=4, num_attention_heads=2,
                                                   attention_head_dim=16, num_layers=1, num_single_layers=1,
                                                   num_refiner_layers=1, mlp_ratio=2.0, patch_size=2,
                                                   patch_size_t=1, qk_norm="rms_norm", guidance_embeds=True,
                                                   text_embed_dim=16, pooled_projection_dim=16,
                                                   rope_theta=256.0, rope_axes_dim=(4, 6, 6),
                                                   image_condition_type=None, has_image_proj=True,
                                                   image_proj_dim=16, has_clean_x_embedder=True)


def rnd(g, *shape):
    return torch.randn(shape, generator=g)


def inputs(g):
    # HunyuanVideoFramepackPipeline, inverted anti-drifting sampling, the last section (latent padding 0):
    # indices = arange(1 + 0 + window + sum(history_sizes [1, 2, 16])) split into prefix / latents / 1x / 2x / 4x;
    # clean latents = [image latents, 1x history]; the history latents of earlier sections; SigLIP image embeds,
    # CLIP pooled prompt, Llama prompt with its mask (1 padded token).
    idx = torch.arange(0, 1 + 0 + FP_WIN + 19)
    prefix, lat, h1, h2, h4 = idx.split([1, FP_WIN, 1, 2, 16], dim=0)
    hist = rnd(g, 1, 4, 19, 4, 4)
    h1x, h2x, h4x = hist.split([1, 2, 16], dim=2)
    n = 4
    mask = torch.ones(1, n, dtype=torch.int64)
    mask[:, n - 1:] = 0
    return {"encoder_hidden_states": rnd(g, 1, n, 16), "encoder_attention_mask": mask,
            "pooled_projections": rnd(g, 1, 16), "image_embeds": rnd(g, 1, 4, 16),
            "indices_latents": lat, "latents_clean": torch.cat([rnd(g, 1, 4, 1, 4, 4), h1x], dim=2),
            "indices_latents_clean": torch.cat([prefix, h1], dim=0), "latents_history_2x": h2x,
            "indices_latents_history_2x": h2, "latents_history_4x": h4x, "indices_latents_history_4x": h4,
            "guidance": torch.tensor([10.0]) * 1000.0, "noise": rnd(g, 1, 4, FP_WIN, 4, 4)}


def call(model, x, sigma, c):
    t = torch.tensor([sigma * 1000.0], dtype=torch.float32).expand(x.shape[0])
    keys = ["encoder_hidden_states", "encoder_attention_mask", "pooled_projections", "image_embeds",
            "indices_latents", "guidance", "latents_clean", "indices_latents_clean", "latents_history_2x",
            "indices_latents_history_2x", "latents_history_4x", "indices_latents_history_4x"]
    return model(hidden_states=x, timestep=t, attention_kwargs=None, return_dict=False,
                 **{k: c[k] for k in keys})[0]


PRODUCER = dict(
    library_source="replica of huggingface/diffusers transformer_hunyuan_video_framepack.py@577a6aed50bb and the "
                   "parts it imports (torch 1.13)",
    timestep="sigma*1000 float32 (HunyuanVideoFramepackPipeline: t.expand(B), not cast); guidance 10*1000",
    velocity="model output as is (flow velocity), not negated; 2 latent frames denoised",
    note="FramePack next-frame-section video DiT (HunyuanVideo body): the noisy window's 1x2x2 conv tokens are "
         "prefixed with history context at three compressions (clean [image, last frame] 1x2x2 conv, 2 frames "
         "through a 2x4x4 conv, 16 frames through a 4x8x8 conv with replicate padding), their RoPE tables built "
         "from explicit frame indices and avg-pooled (2,2,2)/(4,4,4) to match; interleaved 3-axis RoPE theta 256 "
         "on image tokens only; text = [SigLIP image tokens through an up-SiLU-down MLP, Llama tokens refined by a "
         "masked token refiner (LayerNorm blocks gated by HunyuanVideoAdaNorm from t + masked mean of the prompt, "
         "bool 2-D mask with column 0 forced on, SiLU-Linear FFN)]; batch 1 drops padded prompt tokens instead of "
         "masking; dual-stream blocks (AdaLayerNormZero, joint [image, text] attention, per-head RMSNorm q/k, "
         "added q/k/v) then single-stream (parallel attention + GELU-tanh MLP); t + guidance + pooled CLIP "
         "conditioning; only the last window tokens kept for AdaLayerNormContinuous + Linear")

if __name__ == "__main__":
    capture("framepack", build, inputs, call, sys.argv[1], PRODUCER)
