"""HunyuanVideo 1.5 video DiT, reimplemented for torch 1.13 (no diffusers here), captured small in f32 on CPU.

Follows huggingface/diffusers src/diffusers/models/transformers/transformer_hunyuan_video15.py at
621ecdf2cfbe8e7e61c9fa7335ba1d726ae9004b (HunyuanVideo15Transformer3DModel, HunyuanVideo15TransformerBlock,
HunyuanVideo15AttnProcessor2_0 as the blocks' attention forward, HunyuanVideo15PatchEmbed, HunyuanVideo15AdaNorm,
HunyuanVideo15TimeEmbedding, HunyuanVideo15IndividualTokenRefinerBlock, HunyuanVideo15IndividualTokenRefiner,
HunyuanVideo15TokenRefiner, HunyuanVideo15RotaryPosEmbed, HunyuanVideo15ByT5TextProjection,
HunyuanVideo15ImageProjection) with the parts it imports: attention_processor.py (Attention with qk_norm
"rms_norm", added_kv_proj_dim, context_pre_only False; AttnProcessor2_0 as the refiner's attention forward),
attention.py (FeedForward with "gelu-approximate" and "linear-silu"), activations.py (GELU, LinearActivation),
embeddings.py (Timesteps, TimestepEmbedding, CombinedTimestepTextProjEmbeddings, PixArtAlphaTextProjection,
get_1d_rotary_pos_embed with use_real, apply_rotary_emb), normalization.py (RMSNorm, AdaLayerNormZero,
AdaLayerNormContinuous): the same module tree, parameter names and shapes, and call boundaries; the arithmetic line
for line. Stand-ins for what torch 1.13 lacks: F.scaled_dot_product_attention and dispatch_attention_fn (SDPA's math
on a bool mask, default scale), with torch >= 2.5's math path for a query whose mask row is all False (its softmax
is 0, so its result is 0: `_safe_softmax`; the pairwise masks below leave the padded caption rows so).

The constructs it shows: three conditions joined into one caption, [valid image tokens, valid ByT5 glyph rows, valid
MLLM rows, invalid image tokens, zeros for the invalid glyph rows, zeros for the invalid MLLM rows], each first
given a row of one learned 3-entry table (cond_type_embed, indexed by 0, 1, 2 made in the forward); at text to video
the image tokens are the SigLIP projection of zeros times 0.0 (all invalid) plus their table row; joint [video,
caption] attention under a pairwise mask m_i & m_j (the key mask padded with ones for the video), so every padded
caption row attends to nothing and its attention result is 0; the token refiner's self-attention under the same
pairwise mask (no column kept open); interleaved 3-D RoPE (theta 256) on the video rows.

Pipeline as HunyuanVideo15Pipeline (pipeline_hunyuan_video1_5.py at b6bd8f1fb709d8ff1310d1a9b649f4225cf2ca47) calls
it with its guider disabled (one model call per step), text to video: the latents joined on channels with zero
condition latents and a zero mask channel, image_embeds zeros (B, vision tokens, vision width), timestep t =
sigma*1000 in the latents' dtype, the prompt masks as float 0/1, velocity the output as is.

usage: /usr/bin/python3 bench/unseen/replicas/hunyuan_video15.py OUTDIR
"""
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

from run import capture, get_timestep_embedding


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
    hidden_states = safe_sdpa(query, key, value, mask=attention_mask)
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


def safe_sdpa(q, k, v, mask=None, scale=None):
    """F.scaled_dot_product_attention's math path on [B, H, L, D] with a bool mask (True attends), as torch >= 2.5
    computes it: a row whose mask is all False has softmax 0 (`_safe_softmax`), not NaN."""
    scale = 1.0 / (q.shape[-1] ** 0.5) if scale is None else scale
    s = (q @ k.transpose(-2, -1)) * scale
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    p = torch.softmax(s, dim=-1)
    if mask is not None:
        p = p.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)
    return p @ v


def hunyuan_video15_attn(attn, hidden_states, encoder_hidden_states=None, attention_mask=None,
                         image_rotary_emb=None):
    """HunyuanVideo15AttnProcessor2_0.__call__ (dispatch_attention_fn: SDPA's math on [B, L, H, D], bool mask)."""
    query = attn.to_q(hidden_states)
    key = attn.to_k(hidden_states)
    value = attn.to_v(hidden_states)
    query = query.unflatten(2, (attn.heads, -1))
    key = key.unflatten(2, (attn.heads, -1))
    value = value.unflatten(2, (attn.heads, -1))
    query = attn.norm_q(query)
    key = attn.norm_k(key)
    if image_rotary_emb is not None:
        query = apply_rotary_emb(query, image_rotary_emb, sequence_dim=1)
        key = apply_rotary_emb(key, image_rotary_emb, sequence_dim=1)
    if encoder_hidden_states is not None:
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
    batch_size, seq_len, heads, dim = query.shape
    attention_mask = F.pad(attention_mask, (seq_len - attention_mask.shape[1], 0), value=True)
    attention_mask = attention_mask.bool()
    self_attn_mask_1 = attention_mask.view(batch_size, 1, 1, seq_len).repeat(1, 1, seq_len, 1)
    self_attn_mask_2 = self_attn_mask_1.transpose(2, 3)
    attention_mask = (self_attn_mask_1 & self_attn_mask_2).bool()
    hidden_states = safe_sdpa(query.transpose(1, 2), key.transpose(1, 2), value.transpose(1, 2),
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


class HunyuanVideo15PatchEmbed(nn.Module):
    def __init__(self, patch_size=16, in_chans=3, embed_dim=768):
        super().__init__()
        patch_size = (patch_size, patch_size, patch_size) if isinstance(patch_size, int) else patch_size
        self.proj = nn.Conv3d(in_chans, embed_dim, kernel_size=patch_size, stride=patch_size)

    def forward(self, hidden_states):
        hidden_states = self.proj(hidden_states)
        return hidden_states.flatten(2).transpose(1, 2)


class HunyuanVideo15AdaNorm(nn.Module):
    def __init__(self, in_features, out_features=None):
        super().__init__()
        out_features = out_features or 2 * in_features
        self.linear = nn.Linear(in_features, out_features)
        self.nonlinearity = nn.SiLU()

    def forward(self, temb):
        temb = self.linear(self.nonlinearity(temb))
        gate_msa, gate_mlp = temb.chunk(2, dim=1)
        return gate_msa.unsqueeze(1), gate_mlp.unsqueeze(1)


class HunyuanVideo15TimeEmbedding(nn.Module):
    def __init__(self, embedding_dim, use_meanflow=False):
        super().__init__()
        self.time_proj = Timesteps(num_channels=256, flip_sin_to_cos=True, downscale_freq_shift=0)
        self.timestep_embedder = TimestepEmbedding(in_channels=256, time_embed_dim=embedding_dim)
        self.use_meanflow = use_meanflow
        self.time_proj_r = None
        self.timestep_embedder_r = None
        if use_meanflow:
            self.time_proj_r = Timesteps(num_channels=256, flip_sin_to_cos=True, downscale_freq_shift=0)
            self.timestep_embedder_r = TimestepEmbedding(in_channels=256, time_embed_dim=embedding_dim)

    def forward(self, timestep, timestep_r=None):
        timesteps_proj = self.time_proj(timestep)
        timesteps_emb = self.timestep_embedder(timesteps_proj.to(dtype=timestep.dtype))
        if timestep_r is not None:
            timesteps_proj_r = self.time_proj_r(timestep_r)
            timesteps_emb_r = self.timestep_embedder_r(timesteps_proj_r.to(dtype=timestep.dtype))
            timesteps_emb = timesteps_emb + timesteps_emb_r
        return timesteps_emb


class HunyuanVideo15IndividualTokenRefinerBlock(nn.Module):
    def __init__(self, num_attention_heads, attention_head_dim, mlp_width_ratio=4.0, mlp_drop_rate=0.0,
                 attention_bias=True):
        super().__init__()
        hidden_size = num_attention_heads * attention_head_dim
        self.norm1 = nn.LayerNorm(hidden_size, elementwise_affine=True, eps=1e-6)
        self.attn = Attention(query_dim=hidden_size, cross_attention_dim=None, heads=num_attention_heads,
                              dim_head=attention_head_dim, bias=attention_bias)
        self.norm2 = nn.LayerNorm(hidden_size, elementwise_affine=True, eps=1e-6)
        self.ff = FeedForward(hidden_size, mult=mlp_width_ratio, activation_fn="linear-silu", dropout=mlp_drop_rate)
        self.norm_out = HunyuanVideo15AdaNorm(hidden_size, 2 * hidden_size)

    def forward(self, hidden_states, temb, attention_mask=None):
        norm_hidden_states = self.norm1(hidden_states)
        attn_output = self.attn(hidden_states=norm_hidden_states, encoder_hidden_states=None,
                                attention_mask=attention_mask)
        gate_msa, gate_mlp = self.norm_out(temb)
        hidden_states = hidden_states + attn_output * gate_msa
        ff_output = self.ff(self.norm2(hidden_states))
        hidden_states = hidden_states + ff_output * gate_mlp
        return hidden_states


class HunyuanVideo15IndividualTokenRefiner(nn.Module):
    def __init__(self, num_attention_heads, attention_head_dim, num_layers, mlp_width_ratio=4.0, mlp_drop_rate=0.0,
                 attention_bias=True):
        super().__init__()
        self.refiner_blocks = nn.ModuleList([
            HunyuanVideo15IndividualTokenRefinerBlock(num_attention_heads=num_attention_heads,
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
        for block in self.refiner_blocks:
            hidden_states = block(hidden_states, temb, self_attn_mask)
        return hidden_states


class HunyuanVideo15TokenRefiner(nn.Module):
    def __init__(self, in_channels, num_attention_heads, attention_head_dim, num_layers, mlp_ratio=4.0,
                 mlp_drop_rate=0.0, attention_bias=True):
        super().__init__()
        hidden_size = num_attention_heads * attention_head_dim
        self.time_text_embed = CombinedTimestepTextProjEmbeddings(embedding_dim=hidden_size,
                                                                  pooled_projection_dim=in_channels)
        self.proj_in = nn.Linear(in_channels, hidden_size, bias=True)
        self.token_refiner = HunyuanVideo15IndividualTokenRefiner(num_attention_heads=num_attention_heads,
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
        return self.token_refiner(hidden_states, temb, attention_mask)


class HunyuanVideo15RotaryPosEmbed(nn.Module):
    def __init__(self, patch_size, patch_size_t, rope_dim, theta=256.0):
        super().__init__()
        self.patch_size = patch_size
        self.patch_size_t = patch_size_t
        self.rope_dim = rope_dim
        self.theta = theta

    def forward(self, hidden_states):
        batch_size, num_channels, num_frames, height, width = hidden_states.shape
        rope_sizes = [num_frames // self.patch_size_t, height // self.patch_size, width // self.patch_size]
        axes_grids = []
        for i in range(len(rope_sizes)):
            grid = torch.arange(0, rope_sizes[i], device=hidden_states.device, dtype=torch.float32)
            axes_grids.append(grid)
        grid = torch.meshgrid(*axes_grids, indexing="ij")
        grid = torch.stack(grid, dim=0)
        freqs = []
        for i in range(3):
            freq = get_1d_rotary_pos_embed(self.rope_dim[i], grid[i].reshape(-1), self.theta, use_real=True)
            freqs.append(freq)
        freqs_cos = torch.cat([f[0] for f in freqs], dim=1)
        freqs_sin = torch.cat([f[1] for f in freqs], dim=1)
        return freqs_cos, freqs_sin


class HunyuanVideo15ByT5TextProjection(nn.Module):
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
        hidden_states = self.linear_3(hidden_states)
        return hidden_states


class HunyuanVideo15ImageProjection(nn.Module):
    def __init__(self, in_channels, hidden_size):
        super().__init__()
        self.norm_in = nn.LayerNorm(in_channels)
        self.linear_1 = nn.Linear(in_channels, in_channels)
        self.act_fn = nn.GELU()
        self.linear_2 = nn.Linear(in_channels, hidden_size)
        self.norm_out = nn.LayerNorm(hidden_size)

    def forward(self, image_embeds):
        hidden_states = self.norm_in(image_embeds)
        hidden_states = self.linear_1(hidden_states)
        hidden_states = self.act_fn(hidden_states)
        hidden_states = self.linear_2(hidden_states)
        hidden_states = self.norm_out(hidden_states)
        return hidden_states


class HunyuanVideo15TransformerBlock(nn.Module):
    def __init__(self, num_attention_heads, attention_head_dim, mlp_ratio, qk_norm="rms_norm"):
        super().__init__()
        hidden_size = num_attention_heads * attention_head_dim
        self.norm1 = AdaLayerNormZero(hidden_size, norm_type="layer_norm")
        self.norm1_context = AdaLayerNormZero(hidden_size, norm_type="layer_norm")
        self.attn = Attention(query_dim=hidden_size, cross_attention_dim=None, added_kv_proj_dim=hidden_size,
                              dim_head=attention_head_dim, heads=num_attention_heads, out_dim=hidden_size,
                              context_pre_only=False, bias=True, processor=hunyuan_video15_attn, qk_norm=qk_norm,
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


class HunyuanVideo15Transformer3DModel(nn.Module):
    def __init__(self, in_channels=65, out_channels=32, num_attention_heads=16, attention_head_dim=128, num_layers=54,
                 num_refiner_layers=2, mlp_ratio=4.0, patch_size=1, patch_size_t=1, qk_norm="rms_norm",
                 text_embed_dim=3584, text_embed_2_dim=1472, image_embed_dim=1152, rope_theta=256.0,
                 rope_axes_dim=(16, 56, 56), target_size=640, task_type="i2v", use_meanflow=False):
        super().__init__()
        inner_dim = num_attention_heads * attention_head_dim
        out_channels = out_channels or in_channels
        self.patch_size, self.patch_size_t = patch_size, patch_size_t
        self.x_embedder = HunyuanVideo15PatchEmbed((patch_size_t, patch_size, patch_size), in_channels, inner_dim)
        self.image_embedder = HunyuanVideo15ImageProjection(image_embed_dim, inner_dim)
        self.context_embedder = HunyuanVideo15TokenRefiner(text_embed_dim, num_attention_heads, attention_head_dim,
                                                           num_layers=num_refiner_layers)
        self.context_embedder_2 = HunyuanVideo15ByT5TextProjection(text_embed_2_dim, 2048, inner_dim)
        self.time_embed = HunyuanVideo15TimeEmbedding(inner_dim, use_meanflow=use_meanflow)
        self.cond_type_embed = nn.Embedding(3, inner_dim)
        self.rope = HunyuanVideo15RotaryPosEmbed(patch_size, patch_size_t, rope_axes_dim, rope_theta)
        self.transformer_blocks = nn.ModuleList([
            HunyuanVideo15TransformerBlock(num_attention_heads, attention_head_dim, mlp_ratio=mlp_ratio,
                                           qk_norm=qk_norm)
            for _ in range(num_layers)])
        self.norm_out = AdaLayerNormContinuous(inner_dim, inner_dim, elementwise_affine=False, eps=1e-6)
        self.proj_out = nn.Linear(inner_dim, patch_size_t * patch_size * patch_size * out_channels)

    def forward(self, hidden_states, timestep, encoder_hidden_states, encoder_attention_mask, timestep_r=None,
                encoder_hidden_states_2=None, encoder_attention_mask_2=None, image_embeds=None,
                attention_kwargs=None, return_dict=True):
        batch_size, num_channels, num_frames, height, width = hidden_states.shape
        p_t, p_h, p_w = self.patch_size_t, self.patch_size, self.patch_size
        post_patch_num_frames = num_frames // p_t
        post_patch_height = height // p_h
        post_patch_width = width // p_w
        image_rotary_emb = self.rope(hidden_states)
        temb = self.time_embed(timestep, timestep_r=timestep_r)
        hidden_states = self.x_embedder(hidden_states)
        encoder_hidden_states = self.context_embedder(encoder_hidden_states, timestep, encoder_attention_mask)
        encoder_hidden_states_cond_emb = self.cond_type_embed(
            torch.zeros_like(encoder_hidden_states[:, :, 0], dtype=torch.long))
        encoder_hidden_states = encoder_hidden_states + encoder_hidden_states_cond_emb
        encoder_hidden_states_2 = self.context_embedder_2(encoder_hidden_states_2)
        encoder_hidden_states_2_cond_emb = self.cond_type_embed(
            torch.ones_like(encoder_hidden_states_2[:, :, 0], dtype=torch.long))
        encoder_hidden_states_2 = encoder_hidden_states_2 + encoder_hidden_states_2_cond_emb
        encoder_hidden_states_3 = self.image_embedder(image_embeds)
        is_t2v = torch.all(image_embeds == 0)
        if is_t2v:
            encoder_hidden_states_3 = encoder_hidden_states_3 * 0.0
            encoder_attention_mask_3 = torch.zeros((batch_size, encoder_hidden_states_3.shape[1]),
                                                   dtype=encoder_attention_mask.dtype,
                                                   device=encoder_attention_mask.device)
        else:
            encoder_attention_mask_3 = torch.ones((batch_size, encoder_hidden_states_3.shape[1]),
                                                  dtype=encoder_attention_mask.dtype,
                                                  device=encoder_attention_mask.device)
        encoder_hidden_states_3_cond_emb = self.cond_type_embed(
            2 * torch.ones_like(encoder_hidden_states_3[:, :, 0], dtype=torch.long))
        encoder_hidden_states_3 = encoder_hidden_states_3 + encoder_hidden_states_3_cond_emb
        encoder_attention_mask = encoder_attention_mask.bool()
        encoder_attention_mask_2 = encoder_attention_mask_2.bool()
        encoder_attention_mask_3 = encoder_attention_mask_3.bool()
        new_encoder_hidden_states = []
        new_encoder_attention_mask = []
        for text, text_mask, text_2, text_mask_2, image, image_mask in zip(
                encoder_hidden_states, encoder_attention_mask, encoder_hidden_states_2, encoder_attention_mask_2,
                encoder_hidden_states_3, encoder_attention_mask_3):
            new_encoder_hidden_states.append(torch.cat([
                image[image_mask], text_2[text_mask_2], text[text_mask], image[~image_mask],
                torch.zeros_like(text_2[~text_mask_2]), torch.zeros_like(text[~text_mask])], dim=0))
            new_encoder_attention_mask.append(torch.cat([
                image_mask[image_mask], text_mask_2[text_mask_2], text_mask[text_mask], image_mask[~image_mask],
                text_mask_2[~text_mask_2], text_mask[~text_mask]], dim=0))
        encoder_hidden_states = torch.stack(new_encoder_hidden_states)
        encoder_attention_mask = torch.stack(new_encoder_attention_mask)
        for block in self.transformer_blocks:
            hidden_states, encoder_hidden_states = block(hidden_states, encoder_hidden_states, temb,
                                                         encoder_attention_mask, image_rotary_emb)
        hidden_states = self.norm_out(hidden_states, temb)
        hidden_states = self.proj_out(hidden_states)
        hidden_states = hidden_states.reshape(batch_size, post_patch_num_frames, post_patch_height, post_patch_width,
                                              -1, p_t, p_h, p_w)
        hidden_states = hidden_states.permute(0, 4, 1, 5, 2, 6, 3, 7)
        hidden_states = hidden_states.flatten(6, 7).flatten(4, 5).flatten(2, 3)
        return (hidden_states,)


def build():
    # Small HunyuanVideo 1.5: 2 heads of 16, two dual-stream blocks, one refiner block, 4 latent channels (the model
    # input 2*4 + 1: latents, condition latents, mask), patch 1, RoPE axes (4, 6, 6), an MLLM caption 16 wide, a
    # glyph caption 8 wide (its projection's 2048-wide hidden layers are fixed in the code), 4 vision tokens 8 wide.
    return HunyuanVideo15Transformer3DModel(in_channels=9, out_channels=4, num_attention_heads=2, attention_head_dim=16,
                                            num_layers=2, num_refiner_layers=1, mlp_ratio=4.0, patch_size=1,
                                            patch_size_t=1, text_embed_dim=16, text_embed_2_dim=8, image_embed_dim=8,
                                            rope_axes_dim=(4, 6, 6))


def inputs(g):
    n, n2 = 6, 4
    mask = torch.ones(1, n)
    mask[:, 4:] = 0
    mask_2 = torch.ones(1, n2)
    mask_2[:, 3:] = 0
    lat = torch.randn((1, 4, 2, 4, 4), generator=g)
    return {"encoder_hidden_states": torch.randn((1, n, 16), generator=g), "encoder_attention_mask": mask,
            "encoder_hidden_states_2": torch.randn((1, n2, 8), generator=g), "encoder_attention_mask_2": mask_2,
            "image_embeds": torch.zeros((1, 4, 8)), "cond_latents": torch.zeros_like(lat),
            "cond_mask": torch.zeros((1, 1) + lat.shape[2:]), "noise": lat}


def call(model, x, sigma, c):
    latent_model_input = torch.cat([x, c["cond_latents"], c["cond_mask"]], dim=1)
    t = torch.tensor([sigma * 1000.0], dtype=torch.float32).expand(latent_model_input.shape[0]).to(
        latent_model_input.dtype)
    return model(hidden_states=latent_model_input, image_embeds=c["image_embeds"], timestep=t, attention_kwargs=None,
                 return_dict=False, encoder_hidden_states=c["encoder_hidden_states"],
                 encoder_attention_mask=c["encoder_attention_mask"],
                 encoder_hidden_states_2=c["encoder_hidden_states_2"],
                 encoder_attention_mask_2=c["encoder_attention_mask_2"])[0]


PRODUCER = dict(
    library_source="replica of huggingface/diffusers transformer_hunyuan_video15.py@621ecdf2cfbe and the parts it "
                   "imports (torch 1.13)",
    timestep="sigma*1000 float32 (HunyuanVideo15Pipeline: t.expand(B).to(latents.dtype))",
    velocity="model output as is (flow velocity), not negated",
    note="HunyuanVideo 1.5 text to video, two dual-stream blocks, one refiner block: the model input [latents, zero "
         "condition latents, zero mask] on channels, Conv3d patch 1; caption = [valid image tokens, valid ByT5 rows, "
         "valid MLLM rows, invalid image tokens, zeros, zeros], each part plus its row of a 3-entry table "
         "(cond_type_embed[0, 1, 2]); t2v: image tokens = SigLIP projection(zeros) * 0 (all invalid); joint [video, "
         "caption] attention under the pairwise mask m_i & m_j (ones for the video), padded caption rows' results 0 "
         "(torch >= 2.5 safe softmax); AdaLayerNormZero, RMSNorm q/k and added q/k, interleaved 3-D RoPE (4, 6, 6), "
         "theta 256, on the video rows; gelu-tanh FFNs; MLLM caption token refiner (pairwise mask, no column kept "
         "open; temb = time embedding + SiLU MLP of the masked mean); AdaLayerNormContinuous + proj_out, unpatchify")

if __name__ == "__main__":
    capture("hunyuan_video15", build, inputs, call, sys.argv[1], PRODUCER)
