"""Boogu-Image (an OmniGen2-derived edit DiT: refiners, dual-stream then single-stream blocks), reimplemented for
torch 1.13 (no diffusers here), captured small in f32 on CPU.

Follows huggingface/diffusers src/diffusers/models/transformers/transformer_boogu.py at
059451f4dd8577aadcbd974c3e3ffeb2f4ad07e0 (BooguImageTransformer2DModel with flat_and_pad_to_seq,
img_patch_embed_and_refine and preprocess_instruction_hidden_states, BooguImageTransformerBlock,
BooguImageDoubleStreamTransformerBlock) with the parts it imports: rope_boogu.py at the same commit
(BooguImageDoubleStreamRotaryPosEmbed and its get_freqs_cis, which the pipeline calls),
attention_processor_boogu.py at 1741e80dcc738b7b4001e2e6d7d45cfb85f03c80 (BooguImageAttnProcessor,
BooguImageDoubleStreamSelfAttnProcessor: the SDPA paths, apply_rotary_emb with use_real False), block_lumina2.py
(LuminaRMSNormZero, LuminaLayerNormContinuous, LuminaFeedForward, Lumina2CombinedTimestepCaptionEmbedding),
attention_processor.py (Attention: to_q/to_k/to_v/to_out with kv_heads, qk_norm "rms_norm") and embeddings.py
(Timesteps, TimestepEmbedding, get_1d_rotary_pos_embed complex): the same module tree, parameter names and shapes,
and call boundaries; the arithmetic line for line. Stand-ins for what torch 1.13 lacks: torch.nn.RMSNorm
(parts.TorchRMSNorm), F.scaled_dot_product_attention (SDPA's math, explicit scale, bool mask) and nn.LayerNorm's
bias argument (no parameters either way: elementwise_affine is False).

The constructs it shows: the instruction features the mean of two text-encoder layers (torch.mean(torch.stack));
caption rows refined unmodulated, the noisy image rows and a reference image's rows refined by modulated blocks of
their own (the reference rows first given a learned image-index embedding, written in place); 3-axis integer RoPE ids
(caption (i, i, i), the reference at plane L_cap, the noisy image at L_cap + max(h, w)) gathering rows of per-axis
complex tables the pipeline passes in; a dual-stream block whose joint attention runs through a processor module of
its own (per-stream q/k/v linears, rows joined caption first, GQA 2 query heads over 1 kv head, per-stream output
linears, then the attention's shared to_out) called directly (no call boundary of its own), beside an image-only
self-attention; Lumina's RMSNormZero modulation (norm(x)·(1 + scale), tanh gates) where the MLP input takes a second
norm's output scaled by the first's chunk and shifted by the second's; sandwich RMSNorms; single-stream blocks over
[caption, reference, image]; a final LayerNorm·(1 + scale) and Linear, the image rows cut from the end.

Pipeline as BooguImagePipeline (pipeline_boogu.py at 059451f4dd8577aadcbd974c3e3ffeb2f4ad07e0, flow_match_boogu.py
at f765d13041b3ac962facf7d947bd95b247feb18a) calls it for an edit with one reference image, guidance 1: the
scheduler's sigmas run 0 -> 1 and are fed as the timestep, so timestep = 1 − σ in run.py's σ; the step
x + (s_next − s)·v with s = 1 − σ is x + (σ_next − σ)·(−v): the velocity the negated output; the latents a 4-D
tensor (made a list inside), freqs_cis the per-axis complex tables.

usage: /usr/bin/python3 bench/unseen/replicas/boogu.py OUTDIR
"""
import itertools
import math
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

from parts import TorchRMSNorm
from run import capture, get_timestep_embedding, sdpa


class RMSNorm(TorchRMSNorm):
    """torch.nn.RMSNorm(dim, eps) (torch >= 2.4)."""


class DiffusersRMSNorm(nn.Module):
    """diffusers.models.normalization.RMSNorm(dim, eps, elementwise_affine=True): Attention's qk_norm "rms_norm"."""

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


def get_1d_rotary_pos_embed(dim, pos, theta=10000.0, freqs_dtype=torch.float32):
    """embeddings.get_1d_rotary_pos_embed with use_real False: complex64 [len(pos), dim / 2]."""
    assert dim % 2 == 0
    if isinstance(pos, int):
        pos = torch.arange(pos)
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=freqs_dtype, device=pos.device)[: (dim // 2)] / dim))
    freqs = torch.outer(pos, freqs)
    return torch.polar(torch.ones_like(freqs), freqs)


def apply_rotary_emb(x, freqs_cis, use_real=True, **kwargs):
    assert not use_real  # the Lumina-style complex path is the one Boogu's processors take
    x_rotated = torch.view_as_complex(x.float().reshape(*x.shape[:-1], x.shape[-1] // 2, 2))
    freqs_cis = freqs_cis.unsqueeze(2)
    return torch.view_as_real(x_rotated * freqs_cis).flatten(3).type_as(x)


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
        self.linear_1 = nn.Linear(in_channels, time_embed_dim, True)
        self.act = nn.SiLU()
        self.linear_2 = nn.Linear(time_embed_dim, time_embed_dim, True)

    def forward(self, sample):
        return self.linear_2(self.act(self.linear_1(sample)))


def _torch_swiglu(x, y):
    return F.silu(x.float(), inplace=False).to(x.dtype) * y


swiglu = _torch_swiglu


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
        self.silu = nn.SiLU()
        self.linear_1 = nn.Linear(conditioning_embedding_dim, embedding_dim, bias=bias)
        assert norm_type == "layer_norm" and not elementwise_affine
        self.norm = nn.LayerNorm(embedding_dim, eps, elementwise_affine)  # bias: no parameters without affine
        self.linear_2 = None
        if out_dim is not None:
            self.linear_2 = nn.Linear(embedding_dim, out_dim, bias=bias)

    def forward(self, x, conditioning_embedding):
        emb = self.linear_1(self.silu(conditioning_embedding).to(x.dtype))
        scale = emb
        x = self.norm(x) * (1 + scale)[:, None, :]
        if self.linear_2 is not None:
            x = self.linear_2(x)
        return x


class LuminaFeedForward(nn.Module):
    def __init__(self, dim, inner_dim, multiple_of=256, ffn_dim_multiplier=None):
        super().__init__()
        self.swiglu = swiglu
        if ffn_dim_multiplier is not None:
            inner_dim = int(ffn_dim_multiplier * inner_dim)
        inner_dim = multiple_of * ((inner_dim + multiple_of - 1) // multiple_of)
        self.linear_1 = nn.Linear(dim, inner_dim, bias=False)
        self.linear_2 = nn.Linear(inner_dim, dim, bias=False)
        self.linear_3 = nn.Linear(dim, inner_dim, bias=False)

    def forward(self, x):
        h1, h2 = self.linear_1(x), self.linear_3(x)
        return self.linear_2(self.swiglu(h1, h2))


class Lumina2CombinedTimestepCaptionEmbedding(nn.Module):
    def __init__(self, hidden_size=4096, instruction_feat_dim=2048, frequency_embedding_size=256, norm_eps=1e-5,
                 timestep_scale=1.0):
        super().__init__()
        self.time_proj = Timesteps(num_channels=frequency_embedding_size, flip_sin_to_cos=True,
                                   downscale_freq_shift=0.0, scale=timestep_scale)
        self.timestep_embedder = TimestepEmbedding(in_channels=frequency_embedding_size,
                                                   time_embed_dim=min(hidden_size, 1024))
        self.caption_embedder = nn.Sequential(RMSNorm(instruction_feat_dim, eps=norm_eps),
                                              nn.Linear(instruction_feat_dim, hidden_size, bias=True))

    def forward(self, timestep, instruction_hidden_states, dtype):
        timestep_proj = self.time_proj(timestep).to(dtype=dtype)
        time_embed = self.timestep_embedder(timestep_proj)
        caption_embed = self.caption_embedder(instruction_hidden_states)
        return time_embed, caption_embed


class BooguImageAttnProcessor:
    def __call__(self, attn, hidden_states, encoder_hidden_states, attention_mask=None, image_rotary_emb=None,
                 base_sequence_length=None):
        batch_size, sequence_length, _ = hidden_states.shape
        query = attn.to_q(hidden_states)
        key = attn.to_k(encoder_hidden_states)
        value = attn.to_v(encoder_hidden_states)
        query_dim = query.shape[-1]
        inner_dim = key.shape[-1]
        head_dim = query_dim // attn.heads
        dtype = query.dtype
        kv_heads = inner_dim // head_dim
        query = query.view(batch_size, -1, attn.heads, head_dim)
        key = key.view(batch_size, -1, kv_heads, head_dim)
        value = value.view(batch_size, -1, kv_heads, head_dim)
        if attn.norm_q is not None:
            query = attn.norm_q(query)
        if attn.norm_k is not None:
            key = attn.norm_k(key)
        if image_rotary_emb is not None:
            query = apply_rotary_emb(query, image_rotary_emb, use_real=False)
            key = apply_rotary_emb(key, image_rotary_emb, use_real=False)
        query, key = query.to(dtype), key.to(dtype)
        if base_sequence_length is not None:
            softmax_scale = math.sqrt(math.log(sequence_length, base_sequence_length)) * attn.scale
        else:
            softmax_scale = attn.scale
        if attention_mask is not None:
            attention_mask = attention_mask.bool()
            assert attention_mask.dim() == 2  # the causal [B, L, L] form is not used by the model
            attention_mask = attention_mask.view(batch_size, 1, 1, -1)
        query = query.transpose(1, 2)
        key = key.transpose(1, 2)
        value = value.transpose(1, 2)
        key = key.repeat_interleave(query.size(-3) // key.size(-3), -3)
        value = value.repeat_interleave(query.size(-3) // value.size(-3), -3)
        hidden_states = sdpa(query, key, value, mask=attention_mask, scale=softmax_scale)
        hidden_states = hidden_states.transpose(1, 2).reshape(batch_size, -1, attn.heads * head_dim)
        hidden_states = hidden_states.type_as(query)
        hidden_states = attn.to_out[0](hidden_states)
        hidden_states = attn.to_out[1](hidden_states)
        return hidden_states


class BooguImageDoubleStreamSelfAttnProcessor(nn.Module):
    """An nn.Module whose __call__ is its own: calling it runs no module hooks (as upstream)."""

    def __init__(self, head_dim, num_attention_heads, num_kv_heads, qkv_bias=False):
        super().__init__()
        self.head_dim = head_dim
        self.num_attention_heads = num_attention_heads
        self.num_kv_heads = num_kv_heads
        query_dim = head_dim * num_attention_heads
        kv_dim = head_dim * num_kv_heads
        self.img_to_q = nn.Linear(query_dim, query_dim, bias=qkv_bias)
        self.img_to_k = nn.Linear(query_dim, kv_dim, bias=qkv_bias)
        self.img_to_v = nn.Linear(query_dim, kv_dim, bias=qkv_bias)
        self.instruct_to_q = nn.Linear(query_dim, query_dim, bias=qkv_bias)
        self.instruct_to_k = nn.Linear(query_dim, kv_dim, bias=qkv_bias)
        self.instruct_to_v = nn.Linear(query_dim, kv_dim, bias=qkv_bias)
        self.instruct_out = nn.Linear(query_dim, query_dim, bias=qkv_bias)
        self.img_out = nn.Linear(query_dim, query_dim, bias=qkv_bias)

    def _concat_instruction_image_features(self, img_hidden_states_list, instruct_hidden_states_list,
                                           encoder_seq_lengths, seq_lengths):
        assert len(img_hidden_states_list) == len(instruct_hidden_states_list)
        batch_size = img_hidden_states_list[0].shape[0]
        max_seq_len = max(seq_lengths)
        concatenated_list = []
        for img_tensor, instruct_tensor in zip(img_hidden_states_list, instruct_hidden_states_list):
            feature_dim = img_tensor.shape[-1]
            concatenated = img_tensor.new_zeros(batch_size, max_seq_len, feature_dim)
            for i, (encoder_seq_len, seq_len) in enumerate(zip(encoder_seq_lengths, seq_lengths)):
                concatenated[i, :encoder_seq_len] = instruct_tensor[i, :encoder_seq_len]
                concatenated[i, encoder_seq_len:seq_len] = img_tensor[i, : seq_len - encoder_seq_len]
            concatenated_list.append(concatenated)
        return concatenated_list

    def _split_instruction_image_features(self, hidden_states_list, encoder_seq_lengths, seq_lengths):
        result_list = []
        for hidden_states in hidden_states_list:
            batch_size = hidden_states.shape[0]
            feature_dim = hidden_states.shape[-1]
            max_instruct_len = max(encoder_seq_lengths)
            max_img_len = max(seq_len - encoder_seq_len
                              for seq_len, encoder_seq_len in zip(seq_lengths, encoder_seq_lengths))
            instruct_hidden_states = hidden_states.new_zeros(batch_size, max_instruct_len, feature_dim)
            img_hidden_states = hidden_states.new_zeros(batch_size, max_img_len, feature_dim)
            for i, (encoder_seq_len, seq_len) in enumerate(zip(encoder_seq_lengths, seq_lengths)):
                img_len = seq_len - encoder_seq_len
                instruct_hidden_states[i, :encoder_seq_len] = hidden_states[i, :encoder_seq_len]
                img_hidden_states[i, :img_len] = hidden_states[i, encoder_seq_len:seq_len]
            result_list.append((instruct_hidden_states, img_hidden_states))
        return result_list

    def __call__(self, attn, img_hidden_states, instruct_hidden_states, joint_attention_mask=None, rotary_emb=None,
                 encoder_seq_lengths=None, seq_lengths=None, base_sequence_length=None):
        batch_size = img_hidden_states.shape[0]
        img_query = self.img_to_q(img_hidden_states)
        img_key = self.img_to_k(img_hidden_states)
        img_value = self.img_to_v(img_hidden_states)
        instruct_query = self.instruct_to_q(instruct_hidden_states)
        instruct_key = self.instruct_to_k(instruct_hidden_states)
        instruct_value = self.instruct_to_v(instruct_hidden_states)
        img_list = [img_query, img_key, img_value]
        instruct_list = [instruct_query, instruct_key, instruct_value]
        concatenated_list = self._concat_instruction_image_features(img_list, instruct_list, encoder_seq_lengths,
                                                                    seq_lengths)
        query, key, value = concatenated_list
        sequence_length = max(seq_lengths)
        query_dim = query.shape[-1]
        inner_dim = key.shape[-1]
        head_dim = query_dim // attn.heads
        dtype = query.dtype
        kv_heads = inner_dim // head_dim
        query = query.view(batch_size, -1, attn.heads, head_dim)
        key = key.view(batch_size, -1, kv_heads, head_dim)
        value = value.view(batch_size, -1, kv_heads, head_dim)
        if attn.norm_q is not None:
            query = attn.norm_q(query)
        if attn.norm_k is not None:
            key = attn.norm_k(key)
        if rotary_emb is not None:
            query = apply_rotary_emb(query, rotary_emb, use_real=False)
            key = apply_rotary_emb(key, rotary_emb, use_real=False)
        query, key = query.to(dtype), key.to(dtype)
        if base_sequence_length is not None:
            softmax_scale = math.sqrt(math.log(sequence_length, base_sequence_length)) * attn.scale
        else:
            softmax_scale = attn.scale
        if joint_attention_mask is not None:
            joint_attention_mask = joint_attention_mask.bool()
            assert joint_attention_mask.dim() == 2
            joint_attention_mask = joint_attention_mask.view(batch_size, 1, 1, -1)
        query = query.transpose(1, 2)
        key = key.transpose(1, 2)
        value = value.transpose(1, 2)
        key = key.repeat_interleave(query.size(-3) // key.size(-3), -3)
        value = value.repeat_interleave(query.size(-3) // value.size(-3), -3)
        hidden_states = sdpa(query, key, value, mask=joint_attention_mask, scale=softmax_scale)
        hidden_states = hidden_states.transpose(1, 2).reshape(batch_size, -1, attn.heads * head_dim)
        hidden_states = hidden_states.type_as(query)
        split_results = self._split_instruction_image_features([hidden_states], encoder_seq_lengths, seq_lengths)
        instruct_hidden_states, img_hidden_states = split_results[0]
        instruct_projected = self.instruct_out(instruct_hidden_states)
        img_projected = self.img_out(img_hidden_states)
        merged_list = self._concat_instruction_image_features([img_projected], [instruct_projected],
                                                              encoder_seq_lengths, seq_lengths)
        hidden_states = merged_list[0]
        hidden_states = attn.to_out[0](hidden_states)
        hidden_states = attn.to_out[1](hidden_states)
        return hidden_states


class Attention(nn.Module):
    """attention_processor.Attention as Boogu builds it (bias False, out_bias False, qk_norm "rms_norm", eps 1e-5,
    kv_heads), forward passing its arguments to the processor."""

    def __init__(self, query_dim, cross_attention_dim=None, dim_head=64, qk_norm=None, heads=8, kv_heads=None,
                 eps=1e-5, bias=False, out_bias=True, processor=None):
        super().__init__()
        self.inner_dim = dim_head * heads
        self.inner_kv_dim = self.inner_dim if kv_heads is None else dim_head * kv_heads
        self.heads = heads
        self.scale = dim_head ** -0.5
        assert qk_norm == "rms_norm"
        self.norm_q = DiffusersRMSNorm(dim_head, eps=eps)
        self.norm_k = DiffusersRMSNorm(dim_head, eps=eps)
        self.to_q = nn.Linear(query_dim, self.inner_dim, bias=bias)
        self.to_k = nn.Linear(query_dim, self.inner_kv_dim, bias=bias)
        self.to_v = nn.Linear(query_dim, self.inner_kv_dim, bias=bias)
        self.to_out = nn.ModuleList([nn.Linear(self.inner_dim, query_dim, bias=out_bias), nn.Dropout(0.0)])
        self.processor = processor  # an nn.Module processor registers as the submodule "processor"

    def forward(self, hidden_states, encoder_hidden_states=None, attention_mask=None, image_rotary_emb=None):
        return self.processor(self, hidden_states, encoder_hidden_states=encoder_hidden_states,
                              attention_mask=attention_mask, image_rotary_emb=image_rotary_emb)


class BooguImageTransformerBlock(nn.Module):
    def __init__(self, dim, num_attention_heads, num_kv_heads, multiple_of, ffn_dim_multiplier, norm_eps,
                 modulation=True):
        super().__init__()
        self.head_dim = dim // num_attention_heads
        self.modulation = modulation
        self.attn = Attention(query_dim=dim, cross_attention_dim=None, dim_head=dim // num_attention_heads,
                              qk_norm="rms_norm", heads=num_attention_heads, kv_heads=num_kv_heads, eps=1e-5,
                              bias=False, out_bias=False, processor=BooguImageAttnProcessor())
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
            if temb is None:
                raise ValueError("temb must be provided when modulation is enabled")
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


class BooguImageDoubleStreamTransformerBlock(nn.Module):
    def __init__(self, dim, num_attention_heads, num_kv_heads, multiple_of, ffn_dim_multiplier, norm_eps,
                 modulation=True):
        super().__init__()
        self.head_dim = dim // num_attention_heads
        self.num_attention_heads = num_attention_heads
        self.modulation = modulation
        self.hidden_size = dim
        double_stream_processor = BooguImageDoubleStreamSelfAttnProcessor(
            head_dim=self.head_dim, num_attention_heads=num_attention_heads, num_kv_heads=num_kv_heads,
            qkv_bias=False)
        self.img_instruct_attn = Attention(query_dim=dim, cross_attention_dim=None,
                                           dim_head=dim // num_attention_heads, qk_norm="rms_norm",
                                           heads=num_attention_heads, kv_heads=num_kv_heads, eps=1e-5, bias=False,
                                           out_bias=False, processor=double_stream_processor)
        self.img_self_attn = Attention(query_dim=dim, cross_attention_dim=None, dim_head=dim // num_attention_heads,
                                       qk_norm="rms_norm", heads=num_attention_heads, kv_heads=num_kv_heads,
                                       eps=1e-5, bias=False, out_bias=False, processor=BooguImageAttnProcessor())
        self.img_feed_forward = LuminaFeedForward(dim=dim, inner_dim=4 * dim, multiple_of=multiple_of,
                                                  ffn_dim_multiplier=ffn_dim_multiplier)
        assert modulation
        self.img_norm1 = LuminaRMSNormZero(embedding_dim=dim, norm_eps=norm_eps, norm_elementwise_affine=True)
        self.img_norm2 = LuminaRMSNormZero(embedding_dim=dim, norm_eps=norm_eps, norm_elementwise_affine=True)
        self.img_norm3 = LuminaRMSNormZero(embedding_dim=dim, norm_eps=norm_eps, norm_elementwise_affine=True)
        self.img_ffn_norm1 = RMSNorm(dim, eps=norm_eps)
        self.img_attn_norm = RMSNorm(dim, eps=norm_eps)
        self.img_self_attn_norm = RMSNorm(dim, eps=norm_eps)
        self.img_ffn_norm2 = RMSNorm(dim, eps=norm_eps)
        self.instruct_feed_forward = LuminaFeedForward(dim=dim, inner_dim=4 * dim, multiple_of=multiple_of,
                                                       ffn_dim_multiplier=ffn_dim_multiplier)
        self.instruct_norm1 = LuminaRMSNormZero(embedding_dim=dim, norm_eps=norm_eps, norm_elementwise_affine=True)
        self.instruct_norm2 = LuminaRMSNormZero(embedding_dim=dim, norm_eps=norm_eps, norm_elementwise_affine=True)
        self.instruct_ffn_norm1 = RMSNorm(dim, eps=norm_eps)
        self.instruct_attn_norm = RMSNorm(dim, eps=norm_eps)
        self.instruct_ffn_norm2 = RMSNorm(dim, eps=norm_eps)
        # double_stream_processor owns its own q/k/v projections.
        del self.img_instruct_attn.to_k
        del self.img_instruct_attn.to_v
        del self.img_instruct_attn.to_q

    def forward(self, img_hidden_states, instruct_hidden_states, img_attention_mask, joint_attention_mask,
                image_rotary_emb, rotary_emb, temb=None, encoder_seq_lengths=None, seq_lengths=None):
        batch_size = img_hidden_states.shape[0]
        L_instruct = instruct_hidden_states.shape[1]
        L_img = img_hidden_states.shape[1]

        img_norm1_out, img_gate_msa, img_scale_mlp, img_gate_mlp = self.img_norm1(img_hidden_states, temb)
        img_norm2_out, img_shift_mlp, _, _ = self.img_norm2(img_hidden_states, temb)
        img_norm3_out, img_gate_self, _, _ = self.img_norm3(img_hidden_states, temb)
        instruct_norm1_out, instruct_gate_msa, instruct_scale_mlp, instruct_gate_mlp = self.instruct_norm1(
            instruct_hidden_states, temb)
        instruct_norm2_out, instruct_shift_mlp, _, _ = self.instruct_norm2(instruct_hidden_states, temb)

        joint_attn_out = self.img_instruct_attn.processor(
            attn=self.img_instruct_attn, img_hidden_states=img_norm1_out, instruct_hidden_states=instruct_norm1_out,
            joint_attention_mask=joint_attention_mask, rotary_emb=rotary_emb,
            encoder_seq_lengths=encoder_seq_lengths, seq_lengths=seq_lengths)

        instruct_attn_out = instruct_hidden_states.new_zeros(batch_size, L_instruct, self.hidden_size)
        img_attn_out = img_hidden_states.new_zeros(batch_size, L_img, self.hidden_size)
        for i, (encoder_seq_len, seq_len) in enumerate(zip(encoder_seq_lengths, seq_lengths)):
            instruct_attn_out[i, :encoder_seq_len] = joint_attn_out[i, :encoder_seq_len]
            img_attn_out[i, : seq_len - encoder_seq_len] = joint_attn_out[i, encoder_seq_len:seq_len]

        img_self_attn_out = self.img_self_attn(hidden_states=img_norm3_out, encoder_hidden_states=img_norm3_out,
                                               attention_mask=img_attention_mask, image_rotary_emb=image_rotary_emb)

        img_hidden_states = img_hidden_states + img_gate_msa.unsqueeze(1).tanh() * self.img_attn_norm(img_attn_out)
        img_hidden_states = img_hidden_states + img_gate_self.unsqueeze(1).tanh() * self.img_self_attn_norm(
            img_self_attn_out)
        img_mlp_input = (1 + img_scale_mlp.unsqueeze(1)) * img_norm2_out + img_shift_mlp.unsqueeze(1)
        img_mlp_out = self.img_feed_forward(self.img_ffn_norm1(img_mlp_input))
        img_hidden_states = img_hidden_states + img_gate_mlp.unsqueeze(1).tanh() * self.img_ffn_norm2(img_mlp_out)

        instruct_hidden_states = instruct_hidden_states + instruct_gate_msa.unsqueeze(
            1).tanh() * self.instruct_attn_norm(instruct_attn_out)
        instruct_mlp_input = (1 + instruct_scale_mlp.unsqueeze(1)) * instruct_norm2_out + instruct_shift_mlp.unsqueeze(1)
        instruct_mlp_out = self.instruct_feed_forward(self.instruct_ffn_norm1(instruct_mlp_input))
        instruct_hidden_states = instruct_hidden_states + instruct_gate_mlp.unsqueeze(
            1).tanh() * self.instruct_ffn_norm2(instruct_mlp_out)
        return img_hidden_states, instruct_hidden_states


class BooguImageDoubleStreamRotaryPosEmbed(nn.Module):
    def __init__(self, theta, axes_dim, axes_lens=(300, 512, 512), patch_size=2):
        super().__init__()
        self.theta = theta
        self.axes_dim = axes_dim
        self.axes_lens = axes_lens
        self.patch_size = patch_size

    @staticmethod
    def get_freqs_cis(axes_dim, axes_lens, theta):
        freqs_cis = []
        freqs_dtype = torch.float32
        for i, (d, e) in enumerate(zip(axes_dim, axes_lens)):
            emb = get_1d_rotary_pos_embed(d, e, theta=theta, freqs_dtype=freqs_dtype)
            freqs_cis.append(emb)
        return freqs_cis

    def _get_freqs_cis(self, freqs_cis, ids):
        device = ids.device
        result = []
        for i in range(len(self.axes_dim)):
            freqs = freqs_cis[i].to(ids.device)
            index = ids[:, :, i: i + 1].repeat(1, 1, freqs.shape[-1]).to(torch.int64)
            result.append(torch.gather(freqs.unsqueeze(0).repeat(index.shape[0], 1, 1), dim=1, index=index))
        return torch.cat(result, dim=-1).to(device)

    def forward(self, freqs_cis, attention_mask, l_effective_ref_img_len, l_effective_img_len, ref_img_sizes,
                img_sizes, device):
        batch_size = len(attention_mask)
        p = self.patch_size
        encoder_seq_len = attention_mask.shape[1]
        l_effective_cap_len = attention_mask.sum(dim=1).tolist()
        seq_lengths = [cap_len + sum(ref_img_len) + img_len for cap_len, ref_img_len, img_len in
                       zip(l_effective_cap_len, l_effective_ref_img_len, l_effective_img_len)]
        max_seq_len = max(seq_lengths)
        max_ref_img_len = max([sum(ref_img_len) for ref_img_len in l_effective_ref_img_len])
        max_img_len = max(l_effective_img_len)

        position_ids = torch.zeros(batch_size, max_seq_len, 3, dtype=torch.int32, device=device)
        for i, (cap_seq_len, seq_len) in enumerate(zip(l_effective_cap_len, seq_lengths)):
            position_ids[i, :cap_seq_len] = torch.arange(cap_seq_len, dtype=torch.int32,
                                                         device=device).unsqueeze(1).expand(-1, 3)
            pe_shift = cap_seq_len
            pe_shift_len = cap_seq_len
            if ref_img_sizes[i] is not None:
                for ref_img_size, ref_img_len in zip(ref_img_sizes[i], l_effective_ref_img_len[i]):
                    H, W = ref_img_size
                    ref_H_tokens, ref_W_tokens = H // p, W // p
                    assert ref_H_tokens * ref_W_tokens == ref_img_len
                    row_ids = torch.arange(ref_H_tokens, dtype=torch.int32, device=device).unsqueeze(1).expand(
                        ref_H_tokens, ref_W_tokens).flatten()
                    col_ids = torch.arange(ref_W_tokens, dtype=torch.int32, device=device).unsqueeze(0).expand(
                        ref_H_tokens, ref_W_tokens).flatten()
                    position_ids[i, pe_shift_len: pe_shift_len + ref_img_len, 0] = pe_shift
                    position_ids[i, pe_shift_len: pe_shift_len + ref_img_len, 1] = row_ids
                    position_ids[i, pe_shift_len: pe_shift_len + ref_img_len, 2] = col_ids
                    pe_shift += max(ref_H_tokens, ref_W_tokens)
                    pe_shift_len += ref_img_len
            H, W = img_sizes[i]
            H_tokens, W_tokens = H // p, W // p
            assert H_tokens * W_tokens == l_effective_img_len[i]
            row_ids = torch.arange(H_tokens, dtype=torch.int32, device=device).unsqueeze(1).expand(
                H_tokens, W_tokens).flatten()
            col_ids = torch.arange(W_tokens, dtype=torch.int32, device=device).unsqueeze(0).expand(
                H_tokens, W_tokens).flatten()
            assert pe_shift_len + l_effective_img_len[i] == seq_len
            position_ids[i, pe_shift_len:seq_len, 0] = pe_shift
            position_ids[i, pe_shift_len:seq_len, 1] = row_ids
            position_ids[i, pe_shift_len:seq_len, 2] = col_ids

        freqs_cis = self._get_freqs_cis(freqs_cis, position_ids)
        cap_freqs_cis = torch.zeros(batch_size, encoder_seq_len, freqs_cis.shape[-1], device=device,
                                    dtype=freqs_cis.dtype)
        ref_img_freqs_cis = torch.zeros(batch_size, max_ref_img_len, freqs_cis.shape[-1], device=device,
                                        dtype=freqs_cis.dtype)
        img_freqs_cis = torch.zeros(batch_size, max_img_len, freqs_cis.shape[-1], device=device,
                                    dtype=freqs_cis.dtype)
        combined_img_seq_lengths = [sum(ref_img_len) + img_len
                                    for ref_img_len, img_len in zip(l_effective_ref_img_len, l_effective_img_len)]
        max_combined_img_len = max(combined_img_seq_lengths)
        combined_img_freqs_cis = torch.zeros(batch_size, max_combined_img_len, freqs_cis.shape[-1], device=device,
                                             dtype=freqs_cis.dtype)
        for i, (cap_seq_len, ref_img_len, img_len, seq_len) in enumerate(
                zip(l_effective_cap_len, l_effective_ref_img_len, l_effective_img_len, seq_lengths)):
            cap_freqs_cis[i, :cap_seq_len] = freqs_cis[i, :cap_seq_len]
            ref_img_freqs_cis[i, : sum(ref_img_len)] = freqs_cis[i, cap_seq_len: cap_seq_len + sum(ref_img_len)]
            img_freqs_cis[i, :img_len] = freqs_cis[i, cap_seq_len + sum(ref_img_len):
                                                   cap_seq_len + sum(ref_img_len) + img_len]
            combined_img_freqs_cis[i, : sum(ref_img_len)] = freqs_cis[i, cap_seq_len: cap_seq_len + sum(ref_img_len)]
            combined_img_freqs_cis[i, sum(ref_img_len): sum(ref_img_len) + img_len] = freqs_cis[
                i, cap_seq_len + sum(ref_img_len): cap_seq_len + sum(ref_img_len) + img_len]
        return (cap_freqs_cis, ref_img_freqs_cis, img_freqs_cis, freqs_cis, l_effective_cap_len, seq_lengths,
                combined_img_freqs_cis, combined_img_seq_lengths)


class BooguImageTransformer2DModel(nn.Module):
    _skip_layerwise_casting_patterns = ["x_embedder", "norm", "embedding"]

    def __init__(self, patch_size=2, in_channels=16, out_channels=None, hidden_size=2304, num_layers=26,
                 num_double_stream_layers=2, num_refiner_layers=2, num_attention_heads=24, num_kv_heads=8,
                 multiple_of=256, ffn_dim_multiplier=None, norm_eps=1e-5, axes_dim_rope=(40, 40, 40),
                 axes_lens=(2048, 1664, 1664), instruction_feature_configs=None, timestep_scale=1.0):
        super().__init__()
        if instruction_feature_configs is None:
            instruction_feature_configs = {"instruction_feat_dim": 1024, "reduce_type": "mean",
                                           "num_instruction_feat_layers": 1}
        if (hidden_size // num_attention_heads) != sum(axes_dim_rope):
            raise ValueError("hidden_size // num_attention_heads must equal sum(axes_dim_rope)")
        self.config = dict(patch_size=patch_size, hidden_size=hidden_size)
        self.out_channels = out_channels or in_channels
        self.num_double_stream_layers = num_double_stream_layers
        self.num_single_stream_layers = num_layers - num_double_stream_layers
        self.instruction_feature_configs = instruction_feature_configs
        self.preprocessed_instruction_feat_dim = self.cal_preprocessed_instruction_feat_dim(
            instruction_feature_configs)
        self.rope_embedder = BooguImageDoubleStreamRotaryPosEmbed(theta=10000, axes_dim=axes_dim_rope,
                                                                  axes_lens=axes_lens, patch_size=patch_size)
        self.x_embedder = nn.Linear(in_features=patch_size * patch_size * in_channels, out_features=hidden_size)
        self.ref_image_patch_embedder = nn.Linear(in_features=patch_size * patch_size * in_channels,
                                                  out_features=hidden_size)
        self.time_caption_embed = Lumina2CombinedTimestepCaptionEmbedding(
            hidden_size=hidden_size, instruction_feat_dim=self.preprocessed_instruction_feat_dim, norm_eps=norm_eps,
            timestep_scale=timestep_scale)
        block = lambda modulation: BooguImageTransformerBlock(hidden_size, num_attention_heads, num_kv_heads,  # noqa
                                                              multiple_of, ffn_dim_multiplier, norm_eps,
                                                              modulation=modulation)
        self.noise_refiner = nn.ModuleList([block(True) for _ in range(num_refiner_layers)])
        self.ref_image_refiner = nn.ModuleList([block(True) for _ in range(num_refiner_layers)])
        self.context_refiner = nn.ModuleList([block(False) for _ in range(num_refiner_layers)])
        self.double_stream_layers = nn.ModuleList([
            BooguImageDoubleStreamTransformerBlock(hidden_size, num_attention_heads, num_kv_heads, multiple_of,
                                                   ffn_dim_multiplier, norm_eps, modulation=True)
            for _ in range(num_double_stream_layers)])
        self.single_stream_layers = nn.ModuleList([block(True) for _ in range(self.num_single_stream_layers)])
        self.norm_out = LuminaLayerNormContinuous(embedding_dim=hidden_size,
                                                  conditioning_embedding_dim=min(hidden_size, 1024),
                                                  elementwise_affine=False, eps=1e-6, bias=True,
                                                  out_dim=patch_size * patch_size * self.out_channels)
        self.image_index_embedding = nn.Parameter(torch.randn(5, hidden_size))

    def img_patch_embed_and_refine(self, hidden_states, ref_image_hidden_states, padded_img_mask, padded_ref_img_mask,
                                   noise_rotary_emb, ref_img_rotary_emb, l_effective_ref_img_len, l_effective_img_len,
                                   temb):
        batch_size = len(hidden_states)
        max_combined_img_len = max([img_len + sum(ref_img_len)
                                    for img_len, ref_img_len in zip(l_effective_img_len, l_effective_ref_img_len)])
        hidden_states = self.x_embedder(hidden_states)
        ref_image_hidden_states = self.ref_image_patch_embedder(ref_image_hidden_states)
        for i in range(batch_size):
            shift = 0
            for j, ref_img_len in enumerate(l_effective_ref_img_len[i]):
                ref_image_hidden_states[i, shift: shift + ref_img_len, :] = (
                    ref_image_hidden_states[i, shift: shift + ref_img_len, :] + self.image_index_embedding[j])
                shift += ref_img_len
        for layer in self.noise_refiner:
            hidden_states = layer(hidden_states, padded_img_mask, noise_rotary_emb, temb)

        flat_l_effective_ref_img_len = list(itertools.chain(*l_effective_ref_img_len))
        num_ref_images = len(flat_l_effective_ref_img_len)
        max_ref_img_len = max(flat_l_effective_ref_img_len)
        batch_ref_img_mask = ref_image_hidden_states.new_zeros(num_ref_images, max_ref_img_len, dtype=torch.bool)
        batch_ref_image_hidden_states = ref_image_hidden_states.new_zeros(num_ref_images, max_ref_img_len,
                                                                          self.config["hidden_size"])
        batch_ref_img_rotary_emb = hidden_states.new_zeros(num_ref_images, max_ref_img_len,
                                                           ref_img_rotary_emb.shape[-1],
                                                           dtype=ref_img_rotary_emb.dtype)
        batch_temb = temb.new_zeros(num_ref_images, *temb.shape[1:], dtype=temb.dtype)
        idx = 0
        for i in range(batch_size):
            shift = 0
            for ref_img_len in l_effective_ref_img_len[i]:
                batch_ref_img_mask[idx, :ref_img_len] = True
                batch_ref_image_hidden_states[idx, :ref_img_len] = ref_image_hidden_states[i, shift: shift + ref_img_len]
                batch_ref_img_rotary_emb[idx, :ref_img_len] = ref_img_rotary_emb[i, shift: shift + ref_img_len]
                batch_temb[idx] = temb[i]
                shift += ref_img_len
                idx += 1
        for layer in self.ref_image_refiner:
            batch_ref_image_hidden_states = layer(batch_ref_image_hidden_states, batch_ref_img_mask,
                                                  batch_ref_img_rotary_emb, batch_temb)
        idx = 0
        for i in range(batch_size):
            shift = 0
            for ref_img_len in l_effective_ref_img_len[i]:
                ref_image_hidden_states[i, shift: shift + ref_img_len] = batch_ref_image_hidden_states[idx, :ref_img_len]
                shift += ref_img_len
                idx += 1
        combined_img_hidden_states = hidden_states.new_zeros(batch_size, max_combined_img_len,
                                                             self.config["hidden_size"])
        for i, (ref_img_len, img_len) in enumerate(zip(l_effective_ref_img_len, l_effective_img_len)):
            combined_img_hidden_states[i, : sum(ref_img_len)] = ref_image_hidden_states[i, : sum(ref_img_len)]
            combined_img_hidden_states[i, sum(ref_img_len): sum(ref_img_len) + img_len] = hidden_states[i, :img_len]
        return combined_img_hidden_states

    def flat_and_pad_to_seq(self, hidden_states, ref_image_hidden_states):
        batch_size = len(hidden_states)
        p = self.config["patch_size"]
        device = hidden_states[0].device
        img_sizes = [(img.size(1), img.size(2)) for img in hidden_states]
        l_effective_img_len = [(H // p) * (W // p) for (H, W) in img_sizes]
        if ref_image_hidden_states is not None:
            ref_img_sizes = [[(img.size(1), img.size(2)) for img in imgs] if imgs is not None else None
                             for imgs in ref_image_hidden_states]
            l_effective_ref_img_len = [[(ref_img_size[0] // p) * (ref_img_size[1] // p)
                                        for ref_img_size in _ref_img_sizes] if _ref_img_sizes is not None else [0]
                                       for _ref_img_sizes in ref_img_sizes]
        else:
            ref_img_sizes = [None for _ in range(batch_size)]
            l_effective_ref_img_len = [[0] for _ in range(batch_size)]
        max_ref_img_len = max([sum(ref_img_len) for ref_img_len in l_effective_ref_img_len])
        max_img_len = max(l_effective_img_len)

        flat_ref_img_hidden_states = []
        for i in range(batch_size):
            if ref_img_sizes[i] is not None:
                imgs = []
                for ref_img in ref_image_hidden_states[i]:
                    C, H, W = ref_img.size()
                    ref_img = ref_img.reshape(C, H // p, p, W // p, p)
                    ref_img = ref_img.permute(1, 3, 2, 4, 0)
                    ref_img = ref_img.reshape((H // p) * (W // p), p * p * C)
                    imgs.append(ref_img)
                flat_ref_img_hidden_states.append(torch.cat(imgs, dim=0))
            else:
                flat_ref_img_hidden_states.append(None)
        flat_hidden_states = []
        for i in range(batch_size):
            img = hidden_states[i]
            C, H, W = img.size()
            img = img.reshape(C, H // p, p, W // p, p)
            img = img.permute(1, 3, 2, 4, 0)
            img = img.reshape((H // p) * (W // p), p * p * C)
            flat_hidden_states.append(img)

        padded_ref_img_hidden_states = torch.zeros(batch_size, max_ref_img_len, flat_hidden_states[0].shape[-1],
                                                   device=device, dtype=flat_hidden_states[0].dtype)
        padded_ref_img_mask = torch.zeros(batch_size, max_ref_img_len, dtype=torch.bool, device=device)
        for i in range(batch_size):
            if ref_img_sizes[i] is not None:
                padded_ref_img_hidden_states[i, : sum(l_effective_ref_img_len[i])] = flat_ref_img_hidden_states[i]
                padded_ref_img_mask[i, : sum(l_effective_ref_img_len[i])] = True
        padded_hidden_states = torch.zeros(batch_size, max_img_len, flat_hidden_states[0].shape[-1], device=device,
                                           dtype=flat_hidden_states[0].dtype)
        padded_img_mask = torch.zeros(batch_size, max_img_len, dtype=torch.bool, device=device)
        for i in range(batch_size):
            padded_hidden_states[i, : l_effective_img_len[i]] = flat_hidden_states[i]
            padded_img_mask[i, : l_effective_img_len[i]] = True
        return (padded_hidden_states, padded_ref_img_hidden_states, padded_img_mask, padded_ref_img_mask,
                l_effective_ref_img_len, l_effective_img_len, ref_img_sizes, img_sizes)

    def cal_preprocessed_instruction_feat_dim(self, instruction_feature_configs):
        num_instruction_feat_layers = max(instruction_feature_configs.get("num_instruction_feat_layers", 1), 1)
        instruction_feat_dim = instruction_feature_configs.get("instruction_feat_dim", 4096)
        reduce_type = instruction_feature_configs.get("reduce_type", "concat")
        if "cat" in reduce_type.lower():
            return num_instruction_feat_layers * instruction_feat_dim
        elif "mean" in reduce_type.lower():
            return instruction_feat_dim
        raise ValueError(f"Invalid reduce_type: {reduce_type}")

    def preprocess_instruction_hidden_states(self, raw_instruction_hidden_states, instruction_feature_configs):
        num_instruction_feat_layers = max(instruction_feature_configs.get("num_instruction_feat_layers", 1), 1)
        reduce_type = instruction_feature_configs.get("reduce_type", "concat")
        if isinstance(raw_instruction_hidden_states, torch.Tensor):
            instruction_hidden_states = raw_instruction_hidden_states
        elif isinstance(raw_instruction_hidden_states, (list, tuple)):
            assert len(raw_instruction_hidden_states) == num_instruction_feat_layers
            if "cat" in reduce_type.lower():
                instruction_hidden_states = torch.cat(raw_instruction_hidden_states, dim=-1)
            elif "mean" in reduce_type.lower():
                instruction_hidden_states = torch.mean(torch.stack(raw_instruction_hidden_states), dim=0)
            else:
                raise ValueError(f"Invalid reduce_type: {reduce_type}")
        else:
            raise ValueError(f"Invalid type of raw_instruction_hidden_states: {type(raw_instruction_hidden_states)}")
        assert self.preprocessed_instruction_feat_dim == instruction_hidden_states.shape[-1]
        return instruction_hidden_states

    def forward(self, hidden_states, timestep, instruction_hidden_states, freqs_cis, instruction_attention_mask,
                ref_image_hidden_states=None, attention_kwargs=None, return_dict=False):
        instruction_hidden_states = self.preprocess_instruction_hidden_states(instruction_hidden_states,
                                                                              self.instruction_feature_configs)
        batch_size = len(hidden_states)
        is_hidden_states_tensor = isinstance(hidden_states, torch.Tensor)
        if is_hidden_states_tensor:
            assert hidden_states.ndim == 4
            hidden_states = list(hidden_states)
        device = hidden_states[0].device

        temb, instruction_hidden_states = self.time_caption_embed(timestep, instruction_hidden_states,
                                                                  hidden_states[0].dtype)
        (hidden_states, ref_image_hidden_states, img_mask, ref_img_mask, l_effective_ref_img_len,
         l_effective_img_len, ref_img_sizes, img_sizes) = self.flat_and_pad_to_seq(hidden_states,
                                                                                   ref_image_hidden_states)
        (context_rotary_emb, ref_img_rotary_emb, noise_rotary_emb, rotary_emb, encoder_seq_lengths, seq_lengths,
         combined_img_rotary_emb, combined_img_seq_lengths) = self.rope_embedder(
            freqs_cis, instruction_attention_mask, l_effective_ref_img_len, l_effective_img_len, ref_img_sizes,
            img_sizes, device)

        for layer in self.context_refiner:
            instruction_hidden_states = layer(instruction_hidden_states, instruction_attention_mask,
                                              context_rotary_emb)
        combined_img_hidden_states = self.img_patch_embed_and_refine(
            hidden_states, ref_image_hidden_states, img_mask, ref_img_mask, noise_rotary_emb, ref_img_rotary_emb,
            l_effective_ref_img_len, l_effective_img_len, temb)

        instruct_hidden_states = instruction_hidden_states
        img_hidden_states = combined_img_hidden_states
        max_seq_len = max(seq_lengths)
        joint_attention_mask = hidden_states.new_zeros(batch_size, max_seq_len, dtype=torch.bool)
        for i, seq_len in enumerate(seq_lengths):
            joint_attention_mask[i, :seq_len] = True
        if self.num_double_stream_layers > 0:
            max_img_len = max(combined_img_seq_lengths)
            img_attention_mask = hidden_states.new_zeros(batch_size, max_img_len, dtype=torch.bool)
            for i, img_seq_len in enumerate(combined_img_seq_lengths):
                img_attention_mask[i, :img_seq_len] = True
            for layer in self.double_stream_layers:
                img_hidden_states, instruct_hidden_states = layer(
                    img_hidden_states, instruct_hidden_states, img_attention_mask, joint_attention_mask,
                    combined_img_rotary_emb, rotary_emb, temb, encoder_seq_lengths, seq_lengths)

        joint_hidden_states = hidden_states.new_zeros(batch_size, max(seq_lengths), self.config["hidden_size"])
        for i, (encoder_seq_len, seq_len) in enumerate(zip(encoder_seq_lengths, seq_lengths)):
            joint_hidden_states[i, :encoder_seq_len] = instruct_hidden_states[i, :encoder_seq_len]
            joint_hidden_states[i, encoder_seq_len:seq_len] = img_hidden_states[i, : seq_len - encoder_seq_len]
        hidden_states = joint_hidden_states
        for layer in self.single_stream_layers:  # enable_teacache False: every layer runs
            hidden_states = layer(hidden_states, joint_attention_mask, rotary_emb, temb)

        hidden_states = self.norm_out(hidden_states, temb)
        p = self.config["patch_size"]
        output = []
        for i, (img_size, img_len, seq_len) in enumerate(zip(img_sizes, l_effective_img_len, seq_lengths)):
            height, width = img_size
            img_tokens = hidden_states[i][seq_len - img_len: seq_len]
            h, w = height // p, width // p
            c = img_tokens.shape[-1] // (p * p)
            img_output = img_tokens.reshape(h, w, p, p, c)
            img_output = img_output.permute(4, 0, 2, 1, 3)
            img_output = img_output.reshape(c, h * p, w * p)
            output.append(img_output)
        if is_hidden_states_tensor:
            output = torch.stack(output, dim=0)
        return output


AXES, AXES_LENS = (4, 6, 6), (16, 8, 8)


def build():
    # width 32: 2 query heads of 16 over 1 kv head (RoPE axes 4/6/6, θ 10⁴), one refiner of each kind, one
    # dual-stream block then one single-stream block; the FFN inner width 4·32 rounded to a multiple of 16; the
    # instruction the mean of two 16-wide encoder layers.
    return BooguImageTransformer2DModel(patch_size=2, in_channels=4, hidden_size=32, num_layers=2,
                                        num_double_stream_layers=1, num_refiner_layers=1, num_attention_heads=2,
                                        num_kv_heads=1, multiple_of=16, norm_eps=1e-5, axes_dim_rope=AXES,
                                        axes_lens=AXES_LENS,
                                        instruction_feature_configs={"instruction_feat_dim": 16, "reduce_type": "mean",
                                                                     "num_instruction_feat_layers": 2})


def inputs(g):
    # the pipeline's freqs_cis: BooguImageRotaryPosEmbed.get_freqs_cis(axes_dim_rope, axes_lens, theta 10000)
    freqs = BooguImageDoubleStreamRotaryPosEmbed.get_freqs_cis(AXES, AXES_LENS, 10000)
    # (the capture records tensors, so the lists are passed as their items and rebuilt in call)
    return {"instruction_layer_0": torch.randn((1, 4, 16), generator=g),
            "instruction_layer_1": torch.randn((1, 4, 16), generator=g),
            "instruction_attention_mask": torch.ones((1, 4), dtype=torch.long),
            "freqs_cis_0": freqs[0], "freqs_cis_1": freqs[1], "freqs_cis_2": freqs[2],
            "ref_latents": torch.randn((1, 4, 4, 4), generator=g),
            "noise": torch.randn((1, 4, 8, 8), generator=g)}


def call(model, x, sigma, c):
    # BooguImagePipeline.predict: timestep = t.expand(B) in the latents' dtype, t = 1 − σ (the scheduler's sigma,
    # running 0 -> 1); ref_image_hidden_states one list of reference latents per sample
    timestep = torch.tensor(1.0 - sigma, dtype=torch.float32).expand(x.shape[0]).to(x.dtype)
    ref = [[r] for r in c["ref_latents"]]
    instruction = [c["instruction_layer_0"], c["instruction_layer_1"]]
    freqs_cis = [c["freqs_cis_0"], c["freqs_cis_1"], c["freqs_cis_2"]]
    out = model(x, timestep, instruction, freqs_cis, c["instruction_attention_mask"], ref_image_hidden_states=ref)
    return -out


PRODUCER = dict(
    library_source="replica of huggingface/diffusers transformer_boogu.py@059451f4dd85 with rope_boogu.py, "
                   "attention_processor_boogu.py@1741e80dcc73, block_lumina2.py and the parts they import "
                   "(torch 1.13)",
    timestep="1 - sigma (BooguImagePipeline: the scheduler's 0 -> 1 sigmas fed as the timestep, scale 1)",
    velocity="negated model output (the scheduler steps s = 1 - sigma upwards with the output)",
    note="Boogu-Image edit DiT with one 4x4 reference latent: instruction = mean of two encoder layers; context "
         "refiner (unmodulated), noise and reference refiners (RMSNormZero modulation, tanh gates, sandwich "
         "RMSNorms), the reference rows + a learned image-index embedding; 3-axis RoPE ids gathered from pipeline-"
         "given complex tables (caption i,i,i; reference plane L_cap; image plane L_cap + max(h, w)); a dual-stream "
         "block: joint [caption, reference, image] attention through a processor module with per-stream q/k/v and "
         "output linears (GQA 2:1) then the shared to_out, beside an image self-attention; MLP input = (1 + "
         "scale_mlp of norm1) * norm2(x) + shift from norm2's chunk; one single-stream block; final LayerNorm * (1 + "
         "scale), Linear, the image rows at the end")

if __name__ == "__main__":
    capture("boogu", build, inputs, call, sys.argv[1], PRODUCER)
