"""Lumina-Image 2.0 DiT, reimplemented for torch 1.13 (no diffusers here), captured small in f32 on CPU.

Follows huggingface/diffusers src/diffusers/models/transformers/transformer_lumina2.py at
98bd0ce2d97f91fb6088ba65b6bda07cff57a3fb (Lumina2Transformer2DModel, Lumina2TransformerBlock,
Lumina2RotaryPosEmbed, Lumina2CombinedTimestepCaptionEmbedding, Lumina2AttnProcessor2_0) with the parts it imports:
attention_processor.py (Attention with qk_norm "rms_norm" = per-head RMSNorm, kv_heads, bias False, out_bias False),
attention.py (LuminaFeedForward as the Lumina 2 change left it, no 2/3 factor inside; FP32SiLU), embeddings.py
(Timesteps, TimestepEmbedding, get_1d_rotary_pos_embed with use_real=False and freqs_dtype float64,
apply_rotary_emb with use_real=False) and normalization.py (LuminaRMSNormZero, LuminaLayerNormContinuous, RMSNorm
at 04e9323055098220d57b84cfe68b6850b3b3fc0c): the same module tree, parameter names and shapes, and call
boundaries; the arithmetic line for line. Stand-ins for what torch 1.13 lacks: F.scaled_dot_product_attention
(run.sdpa: its math, the bool key mask, the scale passed) and nn.LayerNorm's bias argument (elementwise_affine is
off, so neither weight nor bias exists either way).

The constructs it shows: a context refiner (unmodulated blocks over every caption row, the padded ones too, with
the caption's bool key mask) and a noise refiner (modulated blocks over the image rows, no mask) before joint
blocks over [caption's effective rows, image rows] assembled per sample by slice assignment into a zeroed buffer
(no mask: one sample); GQA (2 q heads, 1 kv head, k and v repeated); per-head RMSNorm q/k norms; complex 3-axis
RoPE whose integer position ids (caption (i, 0, 0), image (cap_len, row, col)) gather rows of complex128 polar
tables (float64 frequencies) by torch.gather, split into caption and image tables by slice assignment into zeroed
buffers, applied by complex multiply in complex128 then cast back; sandwich RMSNorms (norm2 / ffn_norm2 on the
branch outputs) with tanh gates; LuminaRMSNormZero scale-only modulation (1 + scale, no shift); SwiGLU FFN with
the SiLU in f32; the timestep (cos-first sinusoid, shift 0) and the caption (RMSNorm + Linear per token) embedded
separately: the timestep embedding alone conditions, the caption embedding is the context refiner's input;
patchify by view/permute + Linear; LuminaLayerNormContinuous (non-affine LayerNorm * (1 + scale)) + Linear out,
unpatchified from the image rows of the joint sequence.

Pipeline as Lumina2Pipeline calls it (bench/unseen/capture_dit.py's lumina2 case): timestep
1 - t / num_train_timesteps with t = sigma * 1000 (float32; Lumina's t=0 is noise), encoder_attention_mask the
tokenizer's int64 mask (right padding: 2 of 6 caption tokens padded), attention_kwargs None, no CFG (one sample),
the velocity the negated model output.

usage: /usr/bin/python3 bench/unseen/replicas/lumina2.py OUTDIR
"""
import math
import numbers
import sys
from typing import List

import torch
import torch.nn as nn
import torch.nn.functional as F

from run import capture, get_timestep_embedding, sdpa


def get_1d_rotary_pos_embed(dim, pos, theta=10000.0, use_real=False, linear_factor=1.0, ntk_factor=1.0,
                            repeat_interleave_real=True, freqs_dtype=torch.float32):
    """use_real=False (the Lumina branch): torch.polar of the float64 angles, so complex128 [len(pos), dim/2]."""
    assert dim % 2 == 0
    if isinstance(pos, int):
        pos = torch.arange(pos)
    theta = theta * ntk_factor
    freqs = (1.0 / (theta ** (torch.arange(0, dim, 2, dtype=freqs_dtype, device=pos.device)[: (dim // 2)] / dim))
             / linear_factor)
    freqs = torch.outer(pos, freqs)
    if use_real:
        raise NotImplementedError("only the complex table (use_real=False) is used here")
    freqs_cis = torch.polar(torch.ones_like(freqs), freqs)
    return freqs_cis


def apply_rotary_emb(x, freqs_cis, use_real=False):
    """use_real=False, x [B, S, H, D], freqs_cis [B, S, D/2]."""
    x_rotated = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
    freqs_cis = freqs_cis.unsqueeze(2)
    x_out = torch.view_as_real(x_rotated * freqs_cis).flatten(3)
    return x_out.type_as(x)


class RMSNorm(nn.Module):
    """diffusers.models.normalization.RMSNorm(dim, eps, elementwise_affine=True, bias=False)."""

    def __init__(self, dim, eps, elementwise_affine=True, bias=False):
        super().__init__()
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        if isinstance(dim, numbers.Integral):
            dim = (dim,)
        self.dim = torch.Size(dim)
        self.weight = None
        self.bias = None
        if elementwise_affine:
            self.weight = nn.Parameter(torch.ones(dim))
            if bias:
                self.bias = nn.Parameter(torch.zeros(dim))

    def forward(self, hidden_states):
        input_dtype = hidden_states.dtype
        variance = hidden_states.to(torch.float32).pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.eps)
        if self.weight is not None:
            # convert into half-precision if necessary
            if self.weight.dtype in [torch.float16, torch.bfloat16]:
                hidden_states = hidden_states.to(self.weight.dtype)
            hidden_states = hidden_states * self.weight
            if self.bias is not None:
                hidden_states = hidden_states + self.bias
        else:
            hidden_states = hidden_states.to(input_dtype)
        return hidden_states


class FP32SiLU(nn.Module):
    def forward(self, inputs):
        return F.silu(inputs.float(), inplace=False).to(inputs.dtype)


class LuminaFeedForward(nn.Module):
    def __init__(self, dim, inner_dim, multiple_of=256, ffn_dim_multiplier=None):
        super().__init__()
        # custom hidden_size factor multiplier
        if ffn_dim_multiplier is not None:
            inner_dim = int(ffn_dim_multiplier * inner_dim)
        inner_dim = multiple_of * ((inner_dim + multiple_of - 1) // multiple_of)
        self.linear_1 = nn.Linear(dim, inner_dim, bias=False)
        self.linear_2 = nn.Linear(inner_dim, dim, bias=False)
        self.linear_3 = nn.Linear(dim, inner_dim, bias=False)
        self.silu = FP32SiLU()

    def forward(self, x):
        return self.linear_2(self.silu(self.linear_1(x)) * self.linear_3(x))


class LuminaRMSNormZero(nn.Module):
    def __init__(self, embedding_dim, norm_eps, norm_elementwise_affine):
        super().__init__()
        self.silu = nn.SiLU()
        self.linear = nn.Linear(min(embedding_dim, 1024), 4 * embedding_dim, bias=True)
        self.norm = RMSNorm(embedding_dim, eps=norm_eps)

    def forward(self, x, emb=None):
        emb = self.linear(self.silu(emb))
        scale_msa, gate_msa, scale_mlp, gate_mlp = emb.chunk(4, dim=1)
        x = self.norm(x) * (1 + scale_msa[:, None])
        return x, gate_msa, scale_mlp, gate_mlp


class LuminaLayerNormContinuous(nn.Module):
    def __init__(self, embedding_dim, conditioning_embedding_dim, elementwise_affine=True, eps=1e-5, bias=True,
                 norm_type="layer_norm", out_dim=None):
        super().__init__()
        # AdaLN
        self.silu = nn.SiLU()
        self.linear_1 = nn.Linear(conditioning_embedding_dim, embedding_dim, bias=bias)
        if norm_type == "layer_norm":
            # upstream LayerNorm(embedding_dim, eps, elementwise_affine, bias) = torch 2's nn.LayerNorm; affine off
            self.norm = nn.LayerNorm(embedding_dim, eps, elementwise_affine)
        elif norm_type == "rms_norm":
            self.norm = RMSNorm(embedding_dim, eps=eps, elementwise_affine=elementwise_affine)
        else:
            raise ValueError(f"unknown norm_type {norm_type}")
        self.linear_2 = None
        if out_dim is not None:
            self.linear_2 = nn.Linear(embedding_dim, out_dim, bias=bias)

    def forward(self, x, conditioning_embedding):
        # convert back to the original dtype in case `conditioning_embedding`` is upcasted to float32
        emb = self.linear_1(self.silu(conditioning_embedding).to(x.dtype))
        scale = emb
        x = self.norm(x) * (1 + scale)[:, None, :]
        if self.linear_2 is not None:
            x = self.linear_2(x)
        return x


class Timesteps(nn.Module):
    def __init__(self, num_channels, flip_sin_to_cos, downscale_freq_shift, scale=1):
        super().__init__()
        self.num_channels, self.flip_sin_to_cos = num_channels, flip_sin_to_cos
        self.downscale_freq_shift, self.scale = downscale_freq_shift, scale

    def forward(self, timesteps):
        return get_timestep_embedding(timesteps, self.num_channels, flip_sin_to_cos=self.flip_sin_to_cos,
                                      downscale_freq_shift=self.downscale_freq_shift, scale=self.scale)


class TimestepEmbedding(nn.Module):
    def __init__(self, in_channels, time_embed_dim):
        super().__init__()
        self.linear_1 = nn.Linear(in_channels, time_embed_dim, bias=True)
        self.act = nn.SiLU()
        self.linear_2 = nn.Linear(time_embed_dim, time_embed_dim, bias=True)

    def forward(self, sample):
        sample = self.linear_1(sample)
        sample = self.act(sample)
        return self.linear_2(sample)


class Lumina2CombinedTimestepCaptionEmbedding(nn.Module):
    def __init__(self, hidden_size=4096, cap_feat_dim=2048, frequency_embedding_size=256, norm_eps=1e-5):
        super().__init__()
        self.time_proj = Timesteps(num_channels=frequency_embedding_size, flip_sin_to_cos=True,
                                   downscale_freq_shift=0.0)
        self.timestep_embedder = TimestepEmbedding(in_channels=frequency_embedding_size,
                                                   time_embed_dim=min(hidden_size, 1024))
        self.caption_embedder = nn.Sequential(RMSNorm(cap_feat_dim, eps=norm_eps),
                                              nn.Linear(cap_feat_dim, hidden_size, bias=True))

    def forward(self, hidden_states, timestep, encoder_hidden_states):
        timestep_proj = self.time_proj(timestep).type_as(hidden_states)
        time_embed = self.timestep_embedder(timestep_proj)
        caption_embed = self.caption_embedder(encoder_hidden_states)
        return time_embed, caption_embed


class Attention(nn.Module):
    """attention_processor.Attention as Lumina2TransformerBlock builds it (cross_attention_dim None, qk_norm
    "rms_norm", kv_heads, eps 1e-5, bias False, out_bias False), with Lumina2AttnProcessor2_0's __call__ as its
    forward."""

    def __init__(self, query_dim, cross_attention_dim=None, dim_head=64, heads=8, kv_heads=None, qk_norm=None,
                 eps=1e-5, bias=False, out_bias=True, elementwise_affine=True):
        super().__init__()
        self.inner_dim = dim_head * heads
        self.inner_kv_dim = self.inner_dim if kv_heads is None else dim_head * kv_heads
        cross_attention_dim = cross_attention_dim if cross_attention_dim is not None else query_dim
        self.heads = heads
        self.scale = dim_head ** -0.5
        if qk_norm == "rms_norm":
            self.norm_q = RMSNorm(dim_head, eps=eps, elementwise_affine=elementwise_affine)
            self.norm_k = RMSNorm(dim_head, eps=eps, elementwise_affine=elementwise_affine)
        else:
            self.norm_q = None
            self.norm_k = None
        self.to_q = nn.Linear(query_dim, self.inner_dim, bias=bias)
        self.to_k = nn.Linear(cross_attention_dim, self.inner_kv_dim, bias=bias)
        self.to_v = nn.Linear(cross_attention_dim, self.inner_kv_dim, bias=bias)
        self.to_out = nn.ModuleList([nn.Linear(self.inner_dim, query_dim, bias=out_bias), nn.Dropout(0.0)])

    def forward(self, hidden_states, encoder_hidden_states, attention_mask=None, image_rotary_emb=None,
                base_sequence_length=None):
        attn = self
        batch_size, sequence_length, _ = hidden_states.shape

        # Get Query-Key-Value Pair
        query = attn.to_q(hidden_states)
        key = attn.to_k(encoder_hidden_states)
        value = attn.to_v(encoder_hidden_states)

        query_dim = query.shape[-1]
        inner_dim = key.shape[-1]
        head_dim = query_dim // attn.heads
        dtype = query.dtype

        # Get key-value heads
        kv_heads = inner_dim // head_dim

        query = query.view(batch_size, -1, attn.heads, head_dim)
        key = key.view(batch_size, -1, kv_heads, head_dim)
        value = value.view(batch_size, -1, kv_heads, head_dim)

        # Apply Query-Key Norm if needed
        if attn.norm_q is not None:
            query = attn.norm_q(query)
        if attn.norm_k is not None:
            key = attn.norm_k(key)

        # Apply RoPE if needed
        if image_rotary_emb is not None:
            query = apply_rotary_emb(query, image_rotary_emb, use_real=False)
            key = apply_rotary_emb(key, image_rotary_emb, use_real=False)

        query, key = query.to(dtype), key.to(dtype)

        # Apply proportional attention if true
        if base_sequence_length is not None:
            softmax_scale = math.sqrt(math.log(sequence_length, base_sequence_length)) * attn.scale
        else:
            softmax_scale = attn.scale

        # perform Grouped-qurey Attention (GQA)
        n_rep = attn.heads // kv_heads
        if n_rep >= 1:
            key = key.unsqueeze(3).repeat(1, 1, 1, n_rep, 1).flatten(2, 3)
            value = value.unsqueeze(3).repeat(1, 1, 1, n_rep, 1).flatten(2, 3)

        # scaled_dot_product_attention expects attention_mask shape to be (batch, heads, source_length, target_length)
        if attention_mask is not None:
            attention_mask = attention_mask.bool().view(batch_size, 1, 1, -1)

        query = query.transpose(1, 2)
        key = key.transpose(1, 2)
        value = value.transpose(1, 2)

        hidden_states = sdpa(query, key, value, mask=attention_mask, scale=softmax_scale)
        hidden_states = hidden_states.transpose(1, 2).reshape(batch_size, -1, attn.heads * head_dim)
        hidden_states = hidden_states.type_as(query)

        # linear proj
        hidden_states = attn.to_out[0](hidden_states)
        hidden_states = attn.to_out[1](hidden_states)
        return hidden_states


class Lumina2TransformerBlock(nn.Module):
    def __init__(self, dim, num_attention_heads, num_kv_heads, multiple_of, ffn_dim_multiplier, norm_eps,
                 modulation=True):
        super().__init__()
        self.head_dim = dim // num_attention_heads
        self.modulation = modulation
        self.attn = Attention(query_dim=dim, cross_attention_dim=None, dim_head=dim // num_attention_heads,
                              qk_norm="rms_norm", heads=num_attention_heads, kv_heads=num_kv_heads, eps=1e-5,
                              bias=False, out_bias=False)
        self.feed_forward = LuminaFeedForward(dim=dim, inner_dim=4 * dim, multiple_of=multiple_of,
                                              ffn_dim_multiplier=ffn_dim_multiplier)
        if modulation:
            self.norm1 = LuminaRMSNormZero(embedding_dim=dim, norm_eps=norm_eps, norm_elementwise_affine=True)
        else:
            self.norm1 = RMSNorm(dim, eps=norm_eps)
        self.ffn_norm1 = RMSNorm(dim, eps=norm_eps)
        self.norm2 = RMSNorm(dim, eps=norm_eps)
        self.ffn_norm2 = RMSNorm(dim, eps=norm_eps)

    def forward(self, hidden_states, attention_mask, image_rotary_emb, temb=None):
        if self.modulation:
            norm_hidden_states, gate_msa, scale_mlp, gate_mlp = self.norm1(hidden_states, temb)
            attn_output = self.attn(hidden_states=norm_hidden_states, encoder_hidden_states=norm_hidden_states,
                                    attention_mask=attention_mask, image_rotary_emb=image_rotary_emb)
            hidden_states = hidden_states + gate_msa.unsqueeze(1).tanh() * self.norm2(attn_output)
            mlp_output = self.feed_forward(self.ffn_norm1(hidden_states) * (1 + scale_mlp.unsqueeze(1)))
            hidden_states = hidden_states + gate_mlp.unsqueeze(1).tanh() * self.ffn_norm2(mlp_output)
        else:
            norm_hidden_states = self.norm1(hidden_states)
            attn_output = self.attn(hidden_states=norm_hidden_states, encoder_hidden_states=norm_hidden_states,
                                    attention_mask=attention_mask, image_rotary_emb=image_rotary_emb)
            hidden_states = hidden_states + self.norm2(attn_output)
            mlp_output = self.feed_forward(self.ffn_norm1(hidden_states))
            hidden_states = hidden_states + self.ffn_norm2(mlp_output)
        return hidden_states


class Lumina2RotaryPosEmbed(nn.Module):
    def __init__(self, theta: int, axes_dim: List[int], axes_lens: List[int] = (300, 512, 512), patch_size: int = 2):
        super().__init__()
        self.theta = theta
        self.axes_dim = axes_dim
        self.axes_lens = axes_lens
        self.patch_size = patch_size
        self.freqs_cis = self._precompute_freqs_cis(axes_dim, axes_lens, theta)

    def _precompute_freqs_cis(self, axes_dim, axes_lens, theta):
        freqs_cis = []
        freqs_dtype = torch.float64  # torch.backends.mps.is_available() is False here
        for i, (d, e) in enumerate(zip(axes_dim, axes_lens)):
            emb = get_1d_rotary_pos_embed(d, e, theta=self.theta, freqs_dtype=freqs_dtype)
            freqs_cis.append(emb)
        return freqs_cis

    def _get_freqs_cis(self, ids):
        device = ids.device
        result = []
        for i in range(len(self.axes_dim)):
            freqs = self.freqs_cis[i].to(ids.device)
            index = ids[:, :, i : i + 1].repeat(1, 1, freqs.shape[-1]).to(torch.int64)
            result.append(torch.gather(freqs.unsqueeze(0).repeat(index.shape[0], 1, 1), dim=1, index=index))
        return torch.cat(result, dim=-1).to(device)

    def forward(self, hidden_states, attention_mask):
        batch_size, channels, height, width = hidden_states.shape
        p = self.patch_size
        post_patch_height, post_patch_width = height // p, width // p
        image_seq_len = post_patch_height * post_patch_width
        device = hidden_states.device

        encoder_seq_len = attention_mask.shape[1]
        l_effective_cap_len = attention_mask.sum(dim=1).tolist()
        seq_lengths = [cap_seq_len + image_seq_len for cap_seq_len in l_effective_cap_len]
        max_seq_len = max(seq_lengths)

        # Create position IDs
        position_ids = torch.zeros(batch_size, max_seq_len, 3, dtype=torch.int32, device=device)

        for i, (cap_seq_len, seq_len) in enumerate(zip(l_effective_cap_len, seq_lengths)):
            # add caption position ids
            position_ids[i, :cap_seq_len, 0] = torch.arange(cap_seq_len, dtype=torch.int32, device=device)
            position_ids[i, cap_seq_len:seq_len, 0] = cap_seq_len

            # add image position ids
            row_ids = (torch.arange(post_patch_height, dtype=torch.int32, device=device)
                       .view(-1, 1).repeat(1, post_patch_width).flatten())
            col_ids = (torch.arange(post_patch_width, dtype=torch.int32, device=device)
                       .view(1, -1).repeat(post_patch_height, 1).flatten())
            position_ids[i, cap_seq_len:seq_len, 1] = row_ids
            position_ids[i, cap_seq_len:seq_len, 2] = col_ids

        # Get combined rotary embeddings
        freqs_cis = self._get_freqs_cis(position_ids)

        # create separate rotary embeddings for captions and images
        cap_freqs_cis = torch.zeros(batch_size, encoder_seq_len, freqs_cis.shape[-1], device=device,
                                    dtype=freqs_cis.dtype)
        img_freqs_cis = torch.zeros(batch_size, image_seq_len, freqs_cis.shape[-1], device=device,
                                    dtype=freqs_cis.dtype)

        for i, (cap_seq_len, seq_len) in enumerate(zip(l_effective_cap_len, seq_lengths)):
            cap_freqs_cis[i, :cap_seq_len] = freqs_cis[i, :cap_seq_len]
            img_freqs_cis[i, :image_seq_len] = freqs_cis[i, cap_seq_len:seq_len]

        # image patch embeddings
        hidden_states = (hidden_states.view(batch_size, channels, post_patch_height, p, post_patch_width, p)
                         .permute(0, 2, 4, 3, 5, 1).flatten(3).flatten(1, 2))

        return hidden_states, cap_freqs_cis, img_freqs_cis, freqs_cis, l_effective_cap_len, seq_lengths


class Lumina2Transformer2DModel(nn.Module):
    def __init__(self, sample_size=128, patch_size=2, in_channels=16, out_channels=None, hidden_size=2304,
                 num_layers=26, num_refiner_layers=2, num_attention_heads=24, num_kv_heads=8, multiple_of=256,
                 ffn_dim_multiplier=None, norm_eps=1e-5, scaling_factor=1.0, axes_dim_rope=(32, 32, 32),
                 axes_lens=(300, 512, 512), cap_feat_dim=1024):
        super().__init__()
        self.patch_size = patch_size  # self.config.patch_size
        self.hidden_size = hidden_size  # self.config.hidden_size
        self.out_channels = out_channels or in_channels

        # 1. Positional, patch & conditional embeddings
        self.rope_embedder = Lumina2RotaryPosEmbed(theta=10000, axes_dim=axes_dim_rope, axes_lens=axes_lens,
                                                   patch_size=patch_size)
        self.x_embedder = nn.Linear(in_features=patch_size * patch_size * in_channels, out_features=hidden_size)
        self.time_caption_embed = Lumina2CombinedTimestepCaptionEmbedding(hidden_size=hidden_size,
                                                                          cap_feat_dim=cap_feat_dim,
                                                                          norm_eps=norm_eps)

        # 2. Noise and context refinement blocks
        self.noise_refiner = nn.ModuleList([
            Lumina2TransformerBlock(hidden_size, num_attention_heads, num_kv_heads, multiple_of, ffn_dim_multiplier,
                                    norm_eps, modulation=True) for _ in range(num_refiner_layers)])
        self.context_refiner = nn.ModuleList([
            Lumina2TransformerBlock(hidden_size, num_attention_heads, num_kv_heads, multiple_of, ffn_dim_multiplier,
                                    norm_eps, modulation=False) for _ in range(num_refiner_layers)])

        # 3. Transformer blocks
        self.layers = nn.ModuleList([
            Lumina2TransformerBlock(hidden_size, num_attention_heads, num_kv_heads, multiple_of, ffn_dim_multiplier,
                                    norm_eps, modulation=True) for _ in range(num_layers)])

        # 4. Output norm & projection
        self.norm_out = LuminaLayerNormContinuous(embedding_dim=hidden_size,
                                                  conditioning_embedding_dim=min(hidden_size, 1024),
                                                  elementwise_affine=False, eps=1e-6, bias=True,
                                                  out_dim=patch_size * patch_size * self.out_channels)

    def forward(self, hidden_states, timestep, encoder_hidden_states, encoder_attention_mask, attention_kwargs=None,
                return_dict=True):
        # (attention_kwargs None: no LoRA scale; the PEFT backend's scale/unscale are no-ops here)
        # 1. Condition, positional & patch embedding
        batch_size, _, height, width = hidden_states.shape

        temb, encoder_hidden_states = self.time_caption_embed(hidden_states, timestep, encoder_hidden_states)

        (hidden_states, context_rotary_emb, noise_rotary_emb, rotary_emb, encoder_seq_lengths,
         seq_lengths) = self.rope_embedder(hidden_states, encoder_attention_mask)

        hidden_states = self.x_embedder(hidden_states)

        # 2. Context & noise refinement
        for layer in self.context_refiner:
            encoder_hidden_states = layer(encoder_hidden_states, encoder_attention_mask, context_rotary_emb)

        for layer in self.noise_refiner:
            hidden_states = layer(hidden_states, None, noise_rotary_emb, temb)

        # 3. Joint Transformer blocks
        max_seq_len = max(seq_lengths)
        use_mask = len(set(seq_lengths)) > 1

        attention_mask = hidden_states.new_zeros(batch_size, max_seq_len, dtype=torch.bool)
        joint_hidden_states = hidden_states.new_zeros(batch_size, max_seq_len, self.hidden_size)
        for i, (encoder_seq_len, seq_len) in enumerate(zip(encoder_seq_lengths, seq_lengths)):
            attention_mask[i, :seq_len] = True
            joint_hidden_states[i, :encoder_seq_len] = encoder_hidden_states[i, :encoder_seq_len]
            joint_hidden_states[i, encoder_seq_len:seq_len] = hidden_states[i]

        hidden_states = joint_hidden_states

        for layer in self.layers:
            hidden_states = layer(hidden_states, attention_mask if use_mask else None, rotary_emb, temb)

        # 4. Output norm & projection
        hidden_states = self.norm_out(hidden_states, temb)

        # 5. Unpatchify
        p = self.patch_size
        output = []
        for i, (encoder_seq_len, seq_len) in enumerate(zip(encoder_seq_lengths, seq_lengths)):
            output.append(hidden_states[i][encoder_seq_len:seq_len]
                          .view(height // p, width // p, p, p, self.out_channels)
                          .permute(4, 0, 2, 1, 3).flatten(3, 4).flatten(1, 2))
        output = torch.stack(output, dim=0)

        return (output,)


def build():
    # capture_dit.py's lumina2 case, made smaller: hidden 32 = 2 q heads of 16 (1 kv head: GQA) = RoPE axes
    # (4, 6, 6); one refiner block of each kind and two joint blocks; FFN 4*32 = 128 (multiple_of 16).
    return Lumina2Transformer2DModel(sample_size=8, patch_size=2, in_channels=4, out_channels=None, hidden_size=32,
                                     num_layers=2, num_refiner_layers=1, num_attention_heads=2, num_kv_heads=1,
                                     multiple_of=16, ffn_dim_multiplier=None, norm_eps=1e-5, scaling_factor=1.0,
                                     axes_dim_rope=(4, 6, 6), axes_lens=(300, 512, 512), cap_feat_dim=16)


def inputs(g):
    # Lumina2Pipeline: the Gemma hidden states of the padded prompt (all rows) and the tokenizer's int64 mask
    # (right padding: the last 2 of 6 tokens).
    n, pad = 6, 2
    mask = torch.ones(1, n, dtype=torch.int64)
    mask[:, n - pad:] = 0
    return {"encoder_hidden_states": torch.randn((1, n, 16), generator=g), "encoder_attention_mask": mask,
            "noise": torch.randn((1, 4, 8, 8), generator=g)}


def call(model, x, sigma, c):
    # Lumina2Pipeline: t = sigma * num_train_timesteps (float32), current_timestep = 1 - t / num_train_timesteps,
    # expanded to the batch; noise_pred = -noise_pred.
    t = torch.tensor([sigma * 1000.0], dtype=torch.float32, device=x.device)
    current_timestep = 1 - t / 1000
    current_timestep = current_timestep.expand(x.shape[0])
    out = model(hidden_states=x, timestep=current_timestep, encoder_hidden_states=c["encoder_hidden_states"],
                encoder_attention_mask=c["encoder_attention_mask"], return_dict=False, attention_kwargs=None)[0]
    return -out


PRODUCER = dict(
    library_source="replica of huggingface/diffusers transformer_lumina2.py@98bd0ce2d97f and the parts it imports "
                   "(torch 1.13)",
    timestep="1 - sigma float32 (Lumina2Pipeline: 1 - t / num_train_timesteps; Lumina's t=0 is noise)",
    velocity="negated model output (Lumina2Pipeline: noise_pred = -noise_pred)",
    note="Lumina-Image-2.0 single-stream DiT: context_refiner (unmodulated, caption key mask, all 6 caption rows) "
         "and noise_refiner (modulated, no mask) blocks before 2 joint [caption(effective 4 rows), image(16 rows)] "
         "blocks assembled by slice assignment (no mask: one sample); GQA 2 q / 1 kv head with per-head RMSNorm q/k "
         "norm; complex 3-axis RoPE: int32 (caption index, row, col) ids gather rows of complex128 polar tables "
         "(float64 angles), axes (4, 6, 6), applied in complex128; sandwich RMSNorms (norm2/ffn_norm2 on the branch "
         "outputs) with tanh gates; LuminaRMSNormZero scale-only modulation from the timestep embedding alone; "
         "SwiGLU FFN with SiLU in f32; caption RMSNorm + Linear per token; patchify by view/permute + Linear; "
         "LuminaLayerNormContinuous (non-affine LayerNorm * (1 + scale)) + Linear out; text mask with 2 padded "
         "tokens (only the effective caption joins the joint sequence)")

if __name__ == "__main__":
    capture("lumina2", build, inputs, call, sys.argv[1], PRODUCER)
