"""Lumina-Next DiT, reimplemented for torch 1.13 (no diffusers here), captured small in f32 on CPU.

Follows huggingface/diffusers src/diffusers/models/transformers/lumina_nextdit2d.py at
4004496d6bc4131d08ac7d01a44060632bfef40d (LuminaNextDiT2DModel, LuminaNextDiTBlock) with the parts it imports:
attention_processor.py (Attention with qk_norm "layer_norm_across_heads", LuminaAttnProcessor2_0), embeddings.py
(LuminaPatchEmbed, LuminaCombinedTimestepCaptionEmbedding, Timesteps, TimestepEmbedding, apply_rotary_emb with
use_real=False, get_2d_rotary_pos_embed_lumina), normalization.py (LuminaRMSNormZero, LuminaLayerNormContinuous,
RMSNorm) and attention.py (LuminaFeedForward, FP32SiLU): the same module tree, parameter names and shapes, and
call boundaries; the arithmetic line for line. Stand-in for what torch 1.13 lacks: F.scaled_dot_product_attention
(its math, bool mask, the scale passed). The constructs it shows: each block's self-attention (to_out an
Identity) and cross-attention to the caption return per-head outputs [B, L, H, D] that are summed as
self + tanh(gate)[h]·cross before one shared output Linear (attn2.to_out[0]); the self-attention's softmax scale
is proportional, sqrt(log(L, base_sequence_length))/sqrt(D); the cross-attention rotates q alone.

Pipeline as LuminaPipeline calls it (bench/unseen/capture_dit.py's luminanext case, --small sizes): timestep
1 - sigma, cross_attention_kwargs {"base_sequence_length": 64}, the velocity the negated first half of the
output channels (learned sigma).

usage: /usr/bin/python3 bench/unseen/replicas/luminanext.py OUTDIR
"""
import math
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

from run import capture, get_timestep_embedding, sdpa


def get_1d_rotary_pos_embed(dim, pos, theta=10000.0, linear_factor=1.0, ntk_factor=1.0):
    """use_real=False: complex64 [len(pos), dim/2]."""
    if isinstance(pos, int):
        pos = torch.arange(pos)
    theta = theta * ntk_factor
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=torch.float32)[: (dim // 2)] / dim)) / linear_factor
    freqs = torch.outer(pos, freqs)
    return torch.polar(torch.ones_like(freqs), freqs)


def get_2d_rotary_pos_embed_lumina(embed_dim, len_h, len_w, linear_factor=1.0, ntk_factor=1.0):
    emb_h = get_1d_rotary_pos_embed(embed_dim // 2, len_h, linear_factor=linear_factor, ntk_factor=ntk_factor)
    emb_w = get_1d_rotary_pos_embed(embed_dim // 2, len_w, linear_factor=linear_factor, ntk_factor=ntk_factor)
    emb_h = emb_h.view(len_h, 1, embed_dim // 4, 1).repeat(1, len_w, 1, 1)
    emb_w = emb_w.view(1, len_w, embed_dim // 4, 1).repeat(len_h, 1, 1, 1)
    return torch.cat([emb_h, emb_w], dim=-1).flatten(2)


def apply_rotary_emb(x, freqs_cis):
    """use_real=False, x [B, S, H, D]."""
    x_rotated = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
    freqs_cis = freqs_cis.unsqueeze(2)
    x_out = torch.view_as_real(x_rotated * freqs_cis).flatten(3)
    return x_out.type_as(x)


class RMSNorm(nn.Module):
    """diffusers.models.normalization.RMSNorm (elementwise_affine=True)."""

    def __init__(self, dim, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, hidden_states):
        variance = hidden_states.to(torch.float32).pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.eps)
        if self.weight.dtype in (torch.float16, torch.bfloat16):  # upstream: into half precision before the weight
            hidden_states = hidden_states.to(self.weight.dtype)
        return hidden_states * self.weight


class FP32SiLU(nn.Module):
    def forward(self, inputs):
        return F.silu(inputs.float(), inplace=False).to(inputs.dtype)


class LuminaFeedForward(nn.Module):
    def __init__(self, dim, inner_dim, multiple_of=256, ffn_dim_multiplier=None):
        super().__init__()
        inner_dim = int(2 * inner_dim / 3)
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
                 out_dim=None):
        super().__init__()
        self.silu = nn.SiLU()
        self.linear_1 = nn.Linear(conditioning_embedding_dim, embedding_dim, bias=bias)
        self.norm = nn.LayerNorm(embedding_dim, eps, elementwise_affine)  # affine off: no weight, no bias
        self.linear_2 = nn.Linear(embedding_dim, out_dim, bias=bias) if out_dim is not None else None

    def forward(self, x, conditioning_embedding):
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
        return self.linear_2(self.act(self.linear_1(sample)))


class LuminaCombinedTimestepCaptionEmbedding(nn.Module):
    def __init__(self, hidden_size=4096, cross_attention_dim=2048, frequency_embedding_size=256):
        super().__init__()
        self.time_proj = Timesteps(num_channels=frequency_embedding_size, flip_sin_to_cos=True,
                                   downscale_freq_shift=0.0)
        self.timestep_embedder = TimestepEmbedding(in_channels=frequency_embedding_size, time_embed_dim=hidden_size)
        self.caption_embedder = nn.Sequential(nn.LayerNorm(cross_attention_dim),
                                              nn.Linear(cross_attention_dim, hidden_size, bias=True))

    def forward(self, timestep, caption_feat, caption_mask):
        time_freq = self.time_proj(timestep)
        time_embed = self.timestep_embedder(time_freq.to(dtype=caption_feat.dtype))
        caption_mask_float = caption_mask.float().unsqueeze(-1)
        caption_feats_pool = (caption_feat * caption_mask_float).sum(dim=1) / caption_mask_float.sum(dim=1)
        caption_feats_pool = caption_feats_pool.to(caption_feat)
        caption_embed = self.caption_embedder(caption_feats_pool)
        return time_embed + caption_embed


class LuminaPatchEmbed(nn.Module):
    def __init__(self, patch_size=2, in_channels=4, embed_dim=768, bias=True):
        super().__init__()
        self.patch_size = patch_size
        self.proj = nn.Linear(patch_size * patch_size * in_channels, embed_dim, bias=bias)

    def forward(self, x, freqs_cis):
        p = self.patch_size
        batch_size, channel, height, width = x.size()
        ht, wt = height // p, width // p
        x = x.view(batch_size, channel, ht, p, wt, p).permute(0, 2, 4, 1, 3, 5)
        x = x.flatten(3)
        x = self.proj(x)
        x = x.flatten(1, 2)
        mask = torch.ones(x.shape[0], x.shape[1], dtype=torch.int32, device=x.device)
        return x, mask, [(height, width)] * batch_size, freqs_cis[:ht, :wt].flatten(0, 1).unsqueeze(0)


class Attention(nn.Module):
    """diffusers Attention as Lumina-Next builds it (bias=False, out_bias=False, qk_norm
    "layer_norm_across_heads", kv_heads), with LuminaAttnProcessor2_0's __call__ as its processor."""

    def __init__(self, query_dim, cross_attention_dim, dim_head, heads, kv_heads, eps, qk_norm):
        super().__init__()
        inner_dim, inner_kv_dim = dim_head * heads, dim_head * kv_heads
        cross_attention_dim = cross_attention_dim if cross_attention_dim is not None else query_dim
        self.heads = heads
        self.scale = dim_head ** -0.5
        self.norm_q = nn.LayerNorm(dim_head * heads, eps=eps) if qk_norm else None
        self.norm_k = nn.LayerNorm(dim_head * kv_heads, eps=eps) if qk_norm else None
        self.to_q = nn.Linear(query_dim, inner_dim, bias=False)
        self.to_k = nn.Linear(cross_attention_dim, inner_kv_dim, bias=False)
        self.to_v = nn.Linear(cross_attention_dim, inner_kv_dim, bias=False)
        self.to_out = nn.ModuleList([nn.Linear(inner_dim, query_dim, bias=False), nn.Dropout(0.0)])

    def forward(self, hidden_states, encoder_hidden_states=None, attention_mask=None, query_rotary_emb=None,
                key_rotary_emb=None, base_sequence_length=None):
        attn = self
        batch_size, sequence_length, _ = hidden_states.shape
        query = attn.to_q(hidden_states)
        key = attn.to_k(encoder_hidden_states)
        value = attn.to_v(encoder_hidden_states)
        query_dim = query.shape[-1]
        inner_dim = key.shape[-1]
        head_dim = query_dim // attn.heads
        dtype = query.dtype
        kv_heads = inner_dim // head_dim
        if attn.norm_q is not None:
            query = attn.norm_q(query)
        if attn.norm_k is not None:
            key = attn.norm_k(key)
        query = query.view(batch_size, -1, attn.heads, head_dim)
        key = key.view(batch_size, -1, kv_heads, head_dim)
        value = value.view(batch_size, -1, kv_heads, head_dim)
        if query_rotary_emb is not None:
            query = apply_rotary_emb(query, query_rotary_emb)
        if key_rotary_emb is not None:
            key = apply_rotary_emb(key, key_rotary_emb)
        query, key = query.to(dtype), key.to(dtype)
        if key_rotary_emb is None:
            softmax_scale = None
        elif base_sequence_length is not None:
            softmax_scale = math.sqrt(math.log(sequence_length, base_sequence_length)) * attn.scale
        else:
            softmax_scale = attn.scale
        n_rep = attn.heads // kv_heads
        if n_rep >= 1:
            key = key.unsqueeze(3).repeat(1, 1, 1, n_rep, 1).flatten(2, 3)
            value = value.unsqueeze(3).repeat(1, 1, 1, n_rep, 1).flatten(2, 3)
        attention_mask = attention_mask.bool().view(batch_size, 1, 1, -1)
        attention_mask = attention_mask.expand(-1, attn.heads, sequence_length, -1)
        query, key, value = query.transpose(1, 2), key.transpose(1, 2), value.transpose(1, 2)
        hidden_states = sdpa(query, key, value, mask=attention_mask, scale=softmax_scale)
        return hidden_states.transpose(1, 2).to(dtype)


class LuminaNextDiTBlock(nn.Module):
    def __init__(self, dim, num_attention_heads, num_kv_heads, multiple_of, ffn_dim_multiplier, norm_eps, qk_norm,
                 cross_attention_dim, norm_elementwise_affine=True):
        super().__init__()
        self.head_dim = dim // num_attention_heads
        self.gate = nn.Parameter(torch.zeros([num_attention_heads]))
        self.attn1 = Attention(dim, None, dim // num_attention_heads, num_attention_heads, num_kv_heads, 1e-5, qk_norm)
        self.attn1.to_out = nn.Identity()
        self.attn2 = Attention(dim, cross_attention_dim, dim // num_attention_heads, num_attention_heads,
                               num_kv_heads, 1e-5, qk_norm)
        self.feed_forward = LuminaFeedForward(dim, int(4 * 2 * dim / 3), multiple_of, ffn_dim_multiplier)
        self.norm1 = LuminaRMSNormZero(dim, norm_eps, norm_elementwise_affine)
        self.ffn_norm1 = RMSNorm(dim, eps=norm_eps)
        self.norm2 = RMSNorm(dim, eps=norm_eps)
        self.ffn_norm2 = RMSNorm(dim, eps=norm_eps)
        self.norm1_context = RMSNorm(cross_attention_dim, eps=norm_eps)

    def forward(self, hidden_states, attention_mask, image_rotary_emb, encoder_hidden_states, encoder_mask, temb,
                cross_attention_kwargs=None):
        residual = hidden_states
        norm_hidden_states, gate_msa, scale_mlp, gate_mlp = self.norm1(hidden_states, temb)
        self_attn_output = self.attn1(hidden_states=norm_hidden_states, encoder_hidden_states=norm_hidden_states,
                                      attention_mask=attention_mask, query_rotary_emb=image_rotary_emb,
                                      key_rotary_emb=image_rotary_emb, **cross_attention_kwargs)
        norm_encoder_hidden_states = self.norm1_context(encoder_hidden_states)
        cross_attn_output = self.attn2(hidden_states=norm_hidden_states,
                                       encoder_hidden_states=norm_encoder_hidden_states, attention_mask=encoder_mask,
                                       query_rotary_emb=image_rotary_emb, key_rotary_emb=None,
                                       **cross_attention_kwargs)
        cross_attn_output = cross_attn_output * self.gate.tanh().view(1, 1, -1, 1)
        mixed_attn_output = self_attn_output + cross_attn_output
        mixed_attn_output = mixed_attn_output.flatten(-2)
        hidden_states = self.attn2.to_out[0](mixed_attn_output)
        hidden_states = residual + gate_msa.unsqueeze(1).tanh() * self.norm2(hidden_states)
        mlp_output = self.feed_forward(self.ffn_norm1(hidden_states) * (1 + scale_mlp.unsqueeze(1)))
        return hidden_states + gate_mlp.unsqueeze(1).tanh() * self.ffn_norm2(mlp_output)


class LuminaNextDiT2DModel(nn.Module):
    def __init__(self, sample_size=128, patch_size=2, in_channels=4, hidden_size=2304, num_layers=32,
                 num_attention_heads=32, num_kv_heads=None, multiple_of=256, ffn_dim_multiplier=None, norm_eps=1e-5,
                 learn_sigma=True, qk_norm=True, cross_attention_dim=2048, scaling_factor=1.0):
        super().__init__()
        self.patch_size = patch_size
        self.out_channels = in_channels * 2 if learn_sigma else in_channels
        self.patch_embedder = LuminaPatchEmbed(patch_size=patch_size, in_channels=in_channels,
                                               embed_dim=hidden_size, bias=True)
        self.pad_token = nn.Parameter(torch.empty(hidden_size))
        self.time_caption_embed = LuminaCombinedTimestepCaptionEmbedding(hidden_size=min(hidden_size, 1024),
                                                                         cross_attention_dim=cross_attention_dim)
        self.layers = nn.ModuleList([
            LuminaNextDiTBlock(hidden_size, num_attention_heads, num_kv_heads, multiple_of, ffn_dim_multiplier,
                               norm_eps, qk_norm, cross_attention_dim) for _ in range(num_layers)])
        self.norm_out = LuminaLayerNormContinuous(embedding_dim=hidden_size,
                                                  conditioning_embedding_dim=min(hidden_size, 1024),
                                                  elementwise_affine=False, eps=1e-6, bias=True,
                                                  out_dim=patch_size * patch_size * self.out_channels)

    def forward(self, hidden_states, timestep, encoder_hidden_states, encoder_mask, image_rotary_emb,
                cross_attention_kwargs=None, return_dict=True):
        hidden_states, mask, img_size, image_rotary_emb = self.patch_embedder(hidden_states, image_rotary_emb)
        temb = self.time_caption_embed(timestep, encoder_hidden_states, encoder_mask)
        encoder_mask = encoder_mask.bool()
        for layer in self.layers:
            hidden_states = layer(hidden_states, mask, image_rotary_emb, encoder_hidden_states, encoder_mask,
                                  temb=temb, cross_attention_kwargs=cross_attention_kwargs)
        hidden_states = self.norm_out(hidden_states, temb)
        p = self.patch_size
        height, width = img_size[0]
        batch_size = hidden_states.size(0)
        sequence_length = (height // p) * (width // p)
        hidden_states = hidden_states[:, :sequence_length].view(batch_size, height // p, width // p, p, p,
                                                                 self.out_channels)
        output = hidden_states.permute(0, 5, 1, 3, 2, 4).flatten(4, 5).flatten(2, 3)
        return (output,)


def build():
    # capture_dit.py's luminanext case at --small sizes: GQA 4 q / 2 kv heads of 8, one block.
    return LuminaNextDiT2DModel(sample_size=16, patch_size=2, in_channels=4, hidden_size=32, num_layers=1,
                                num_attention_heads=4, num_kv_heads=2, multiple_of=16, ffn_dim_multiplier=None,
                                norm_eps=1e-5, learn_sigma=True, qk_norm=True, cross_attention_dim=16,
                                scaling_factor=1.0)


def inputs(g):
    # LuminaPipeline: scaling_factor 0.5 below the watershed (linear_factor 0.5, ntk_factor 1.0); the table at 8x8.
    rope = get_2d_rotary_pos_embed_lumina(32 // 4, 8, 8, linear_factor=0.5, ntk_factor=1.0)
    n = 4
    mask = torch.ones(1, n, dtype=torch.int64)
    mask[:, n - 1:] = 0
    return {"encoder_hidden_states": torch.randn((1, n, 16), generator=g), "encoder_mask": mask,
            "image_rotary_emb": rope, "noise": torch.randn((1, 4, 8, 8), generator=g)}


def call(model, x, sigma, c):
    t = torch.tensor([1.0 - sigma], dtype=torch.float32)
    out = model(hidden_states=x, timestep=t, encoder_hidden_states=c["encoder_hidden_states"],
                encoder_mask=c["encoder_mask"], image_rotary_emb=c["image_rotary_emb"],
                cross_attention_kwargs={"base_sequence_length": (16 * 8 // 16) ** 2}, return_dict=False)[0]
    v, _ = out.chunk(2, dim=1)
    return -v


PRODUCER = dict(
    library_source="replica of huggingface/diffusers lumina_nextdit2d.py@4004496d6bc4 and the parts it imports "
                   "(torch 1.13)",
    timestep="1 - sigma float32 (LuminaPipeline: 1 - t / num_train_timesteps; Lumina's t=0 is noise)",
    velocity="negated first half of the output channels (learned sigma: chunk(2, dim=1)[0], then -noise_pred)",
    note="Lumina-Next DiT, one block: self-attn and cross-attn from the same LuminaRMSNormZero-modulated tokens, "
         "summed per head as self + tanh(gate)[h]*cross before one shared output Linear (attn2.to_out.0; attn1 "
         "has none); self-attn softmax scale sqrt(log(16, 64))/sqrt(8) (proportional attention, base sequence "
         "length 64); GQA 4 q / 2 kv heads, LayerNorm q/k norms across all heads; complex 2-D RoPE (complex64 "
         "table passed in) on q and k of the self-attn and q alone of the cross-attn; bool key mask on the caption "
         "(last token padding); SwiGLU FFN with sandwich RMSNorms and tanh gates; caption mean-pooled into the "
         "conditioning")

if __name__ == "__main__":
    capture("luminanext", build, inputs, call, sys.argv[1], PRODUCER)
