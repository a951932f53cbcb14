"""ConsisID identity-preserving image-to-video DiT, reimplemented for torch 1.13 (no diffusers here), captured small
in f32 on CPU.

Follows huggingface/diffusers src/diffusers/models/transformers/consisid_transformer_3d.py at
06d4fb510fee2d769d19abf3b7eeb21d6dcf2590 (ConsisIDTransformer3DModel with is_train_face, ConsisIDBlock,
LocalFacialExtractor, PerceiverAttention, PerceiverCrossAttention; read in full) with the parts it imports:
embeddings.py at 168e5b7ffa4949fca82ed2fcd17d3451c5804401 (CogVideoXPatchEmbed without positional embeddings,
get_3d_rotary_pos_embed with grid_type "linspace", get_1d_rotary_pos_embed use_real with repeat_interleave,
apply_rotary_emb use_real unbind -1, Timesteps, TimestepEmbedding; read), normalization.py (CogVideoXLayerNormZero,
AdaLayerNorm with chunk_dim 1: shift, scale), attention.py (FeedForward "gelu-approximate", final dropout) and
attention_processor.py (Attention with qk_norm "layer_norm" over each head, CogVideoXAttnProcessor2_0: [text, video]
joined, q/k LayerNorm per head, RoPE on the video rows of q and k, SDPA, to_out, split back): those three files'
upstream text was not read here; normalization.py's two classes were checked against copies of them in other
repositories, FeedForward and the processor written from their known form. The same module tree,
parameter names and shapes, and call boundaries; the arithmetic line for line. Stand-in for what torch 1.13 lacks:
F.scaled_dot_product_attention (its math, default scale, no mask).

Pipeline as bench/unseen/capture_dit.py's consisid case makes its call (ConsisIDPipeline): latent_model_input =
cat([latents, image latents], dim=2) (frames first: [B, F, C, H, W]); timestep round(sigma*1000) int64; RoPE tables
from get_3d_rotary_pos_embed over the 2x2 grid of a 4x4 latent, base 4x4, 2 latent frames, passed as image_rotary_emb; id_cond and
2 ViT hidden layers; the output used as the velocity as is. Sizes: inner 48 = 3 heads of 16, so the perceiver kv
width inner*2/3 = 32 = LFE_output_dim; 2 blocks with the face cross-attention after block 0 (every 2nd block).

usage: /usr/bin/python3 bench/unseen/replicas/consisid.py OUTDIR
"""
import math
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

from run import capture, get_timestep_embedding, sdpa


def get_1d_rotary_pos_embed(dim, pos, theta=10000.0, use_real=False, linear_factor=1.0, ntk_factor=1.0,
                            repeat_interleave_real=True, freqs_dtype=torch.float32):
    assert dim % 2 == 0
    if isinstance(pos, int):
        pos = torch.arange(pos)
    theta = theta * ntk_factor
    freqs = (1.0 / (theta ** (torch.arange(0, dim, 2, dtype=freqs_dtype, device=pos.device)[: (dim // 2)] / dim))
             / linear_factor)
    freqs = torch.outer(pos, freqs)
    if use_real and repeat_interleave_real:
        freqs_cos = freqs.cos().repeat_interleave(2, dim=1).float()
        freqs_sin = freqs.sin().repeat_interleave(2, dim=1).float()
        return freqs_cos, freqs_sin
    raise NotImplementedError


def get_3d_rotary_pos_embed(embed_dim, crops_coords, grid_size, temporal_size, theta=10000, use_real=True,
                            grid_type="linspace", max_size=None, device=None):
    assert use_real and grid_type == "linspace"
    start, stop = crops_coords
    grid_size_h, grid_size_w = grid_size
    grid_h = torch.linspace(start[0], stop[0] * (grid_size_h - 1) / grid_size_h, grid_size_h, device=device,
                            dtype=torch.float32)
    grid_w = torch.linspace(start[1], stop[1] * (grid_size_w - 1) / grid_size_w, grid_size_w, device=device,
                            dtype=torch.float32)
    grid_t = torch.arange(temporal_size, device=device, dtype=torch.float32)
    grid_t = torch.linspace(0, temporal_size * (temporal_size - 1) / temporal_size, temporal_size, device=device,
                            dtype=torch.float32)

    dim_t = embed_dim // 4
    dim_h = embed_dim // 8 * 3
    dim_w = embed_dim // 8 * 3

    freqs_t = get_1d_rotary_pos_embed(dim_t, grid_t, theta=theta, use_real=True)
    freqs_h = get_1d_rotary_pos_embed(dim_h, grid_h, theta=theta, use_real=True)
    freqs_w = get_1d_rotary_pos_embed(dim_w, grid_w, theta=theta, use_real=True)

    def combine_time_height_width(freqs_t, freqs_h, freqs_w):
        freqs_t = freqs_t[:, None, None, :].expand(-1, grid_size_h, grid_size_w, -1)
        freqs_h = freqs_h[None, :, None, :].expand(temporal_size, -1, grid_size_w, -1)
        freqs_w = freqs_w[None, None, :, :].expand(temporal_size, grid_size_h, -1, -1)
        freqs = torch.cat([freqs_t, freqs_h, freqs_w], dim=-1)
        freqs = freqs.view(temporal_size * grid_size_h * grid_size_w, -1)
        return freqs

    t_cos, t_sin = freqs_t
    h_cos, h_sin = freqs_h
    w_cos, w_sin = freqs_w
    cos = combine_time_height_width(t_cos, h_cos, w_cos)
    sin = combine_time_height_width(t_sin, h_sin, w_sin)
    return cos, sin


def apply_rotary_emb(x, freqs_cis, use_real=True, use_real_unbind_dim=-1):
    """embeddings.apply_rotary_emb, its use_real branch with unbind -1 (adjacent pairs)."""
    assert use_real and use_real_unbind_dim == -1
    cos, sin = freqs_cis  # [S, D]
    cos = cos[None, None]
    sin = sin[None, None]
    cos, sin = cos.to(x.device), sin.to(x.device)
    x_real, x_imag = x.reshape(*x.shape[:-1], -1, 2).unbind(-1)
    x_rotated = torch.stack([-x_imag, x_real], dim=-1).flatten(3)
    out = (x.float() * cos + x_rotated.float() * sin).to(x.dtype)
    return out


class Timesteps(nn.Module):
    def __init__(self, num_channels, flip_sin_to_cos, downscale_freq_shift, scale=1):
        super().__init__()
        self.num_channels, self.flip_sin_to_cos = num_channels, flip_sin_to_cos
        self.downscale_freq_shift, self.scale = downscale_freq_shift, scale

    def forward(self, timesteps):
        return get_timestep_embedding(timesteps, self.num_channels, flip_sin_to_cos=self.flip_sin_to_cos,
                                      downscale_freq_shift=self.downscale_freq_shift, scale=self.scale)


class TimestepEmbedding(nn.Module):
    """embeddings.TimestepEmbedding(in_channels, time_embed_dim, act_fn "silu")."""

    def __init__(self, in_channels, time_embed_dim, act_fn="silu", sample_proj_bias=True):
        super().__init__()
        assert act_fn == "silu"
        self.linear_1 = nn.Linear(in_channels, time_embed_dim, sample_proj_bias)
        self.act = nn.SiLU()
        self.linear_2 = nn.Linear(time_embed_dim, time_embed_dim, sample_proj_bias)

    def forward(self, sample, condition=None):
        assert condition is None
        return self.linear_2(self.act(self.linear_1(sample)))


class CogVideoXPatchEmbed(nn.Module):
    """embeddings.CogVideoXPatchEmbed, CogVideoX 1.0 (patch_size_t None: a Conv2d per frame), no positional
    embeddings (use_positional_embeddings = not use_rotary_positional_embeddings)."""

    def __init__(self, patch_size=2, in_channels=16, embed_dim=1920, text_embed_dim=4096, bias=True):
        super().__init__()
        self.patch_size = patch_size
        self.proj = nn.Conv2d(in_channels, embed_dim, kernel_size=(patch_size, patch_size), stride=patch_size,
                              bias=bias)
        self.text_proj = nn.Linear(text_embed_dim, embed_dim)

    def forward(self, text_embeds, image_embeds):
        text_embeds = self.text_proj(text_embeds)
        batch_size, num_frames, channels, height, width = image_embeds.shape
        image_embeds = image_embeds.reshape(-1, channels, height, width)
        image_embeds = self.proj(image_embeds)
        image_embeds = image_embeds.view(batch_size, num_frames, *image_embeds.shape[1:])
        image_embeds = image_embeds.flatten(3).transpose(2, 3)
        image_embeds = image_embeds.flatten(1, 2)
        embeds = torch.cat([text_embeds, image_embeds], dim=1).contiguous()
        return embeds


class CogVideoXLayerNormZero(nn.Module):
    def __init__(self, conditioning_dim, embedding_dim, elementwise_affine=True, eps=1e-5, bias=True):
        super().__init__()
        self.silu = nn.SiLU()
        self.linear = nn.Linear(conditioning_dim, 6 * embedding_dim, bias=bias)
        self.norm = nn.LayerNorm(embedding_dim, eps=eps, elementwise_affine=elementwise_affine)

    def forward(self, hidden_states, encoder_hidden_states, temb):
        shift, scale, gate, enc_shift, enc_scale, enc_gate = self.linear(self.silu(temb)).chunk(6, dim=1)
        hidden_states = self.norm(hidden_states) * (1 + scale)[:, None, :] + shift[:, None, :]
        encoder_hidden_states = self.norm(encoder_hidden_states) * (1 + enc_scale)[:, None, :] + enc_shift[:, None, :]
        return hidden_states, encoder_hidden_states, gate[:, None, :], enc_gate[:, None, :]


class AdaLayerNorm(nn.Module):
    """normalization.AdaLayerNorm(embedding_dim, output_dim, chunk_dim=1): shift, scale."""

    def __init__(self, embedding_dim, output_dim=None, norm_elementwise_affine=False, norm_eps=1e-5, chunk_dim=0):
        super().__init__()
        self.chunk_dim = chunk_dim
        output_dim = output_dim or embedding_dim * 2
        self.silu = nn.SiLU()
        self.linear = nn.Linear(embedding_dim, output_dim)
        self.norm = nn.LayerNorm(output_dim // 2, norm_eps, norm_elementwise_affine)

    def forward(self, x, timestep=None, temb=None):
        temb = self.linear(self.silu(temb))
        if self.chunk_dim == 1:
            shift, scale = temb.chunk(2, dim=1)
            shift = shift[:, None, :]
            scale = scale[:, None, :]
        else:
            scale, shift = temb.chunk(2, dim=0)
        x = self.norm(x) * (1 + scale) + shift
        return x


class GELU(nn.Module):
    def __init__(self, dim_in, dim_out, approximate="none", bias=True):
        super().__init__()
        self.proj = nn.Linear(dim_in, dim_out, bias=bias)
        self.approximate = approximate

    def forward(self, hidden_states):
        hidden_states = self.proj(hidden_states)
        return F.gelu(hidden_states, approximate=self.approximate)


class FeedForward(nn.Module):
    """attention.FeedForward(dim, dropout, activation_fn "gelu-approximate", final_dropout True): mult 4."""

    def __init__(self, dim, dim_out=None, mult=4, dropout=0.0, activation_fn="gelu-approximate", final_dropout=False,
                 inner_dim=None, bias=True):
        super().__init__()
        if inner_dim is None:
            inner_dim = int(dim * mult)
        dim_out = dim_out if dim_out is not None else dim
        assert activation_fn == "gelu-approximate"
        self.net = nn.ModuleList([GELU(dim, inner_dim, approximate="tanh", bias=bias), nn.Dropout(dropout),
                                  nn.Linear(inner_dim, dim_out, bias=bias)])
        if final_dropout:
            self.net.append(nn.Dropout(dropout))

    def forward(self, hidden_states):
        for module in self.net:
            hidden_states = module(hidden_states)
        return hidden_states


class Attention(nn.Module):
    """attention_processor.Attention as ConsisIDBlock builds it (qk_norm "layer_norm": a LayerNorm over each head,
    eps 1e-6, affine), CogVideoXAttnProcessor2_0's __call__ as its forward."""

    def __init__(self, query_dim, heads=8, dim_head=64, dropout=0.0, bias=False, qk_norm=None, eps=1e-5,
                 out_bias=True):
        super().__init__()
        self.inner_dim = dim_head * heads
        self.heads = heads
        self.is_cross_attention = False
        if qk_norm == "layer_norm":
            self.norm_q = nn.LayerNorm(dim_head, eps=eps, elementwise_affine=True)
            self.norm_k = nn.LayerNorm(dim_head, eps=eps, elementwise_affine=True)
        else:
            self.norm_q = None
            self.norm_k = None
        self.to_q = nn.Linear(query_dim, self.inner_dim, bias=bias)
        self.to_k = nn.Linear(query_dim, self.inner_dim, bias=bias)
        self.to_v = nn.Linear(query_dim, self.inner_dim, bias=bias)
        self.to_out = nn.ModuleList([nn.Linear(self.inner_dim, query_dim, bias=out_bias), nn.Dropout(dropout)])

    def forward(self, hidden_states, encoder_hidden_states, attention_mask=None, image_rotary_emb=None):
        attn = self
        text_seq_length = encoder_hidden_states.size(1)

        hidden_states = torch.cat([encoder_hidden_states, hidden_states], dim=1)

        batch_size, sequence_length, _ = hidden_states.shape
        assert attention_mask is None

        query = attn.to_q(hidden_states)
        key = attn.to_k(hidden_states)
        value = attn.to_v(hidden_states)

        inner_dim = key.shape[-1]
        head_dim = inner_dim // attn.heads

        query = query.view(batch_size, -1, attn.heads, head_dim).transpose(1, 2)
        key = key.view(batch_size, -1, attn.heads, head_dim).transpose(1, 2)
        value = value.view(batch_size, -1, attn.heads, head_dim).transpose(1, 2)

        if attn.norm_q is not None:
            query = attn.norm_q(query)
        if attn.norm_k is not None:
            key = attn.norm_k(key)

        if image_rotary_emb is not None:
            query[:, :, text_seq_length:] = apply_rotary_emb(query[:, :, text_seq_length:], image_rotary_emb)
            if not attn.is_cross_attention:
                key[:, :, text_seq_length:] = apply_rotary_emb(key[:, :, text_seq_length:], image_rotary_emb)

        hidden_states = sdpa(query, key, value)

        hidden_states = hidden_states.transpose(1, 2).reshape(batch_size, -1, attn.heads * head_dim)

        hidden_states = attn.to_out[0](hidden_states)
        hidden_states = attn.to_out[1](hidden_states)

        encoder_hidden_states, hidden_states = hidden_states.split(
            [text_seq_length, hidden_states.size(1) - text_seq_length], dim=1)
        return hidden_states, encoder_hidden_states


class PerceiverAttention(nn.Module):
    def __init__(self, dim, dim_head=64, heads=8, kv_dim=None):
        super().__init__()
        self.scale = dim_head ** -0.5
        self.dim_head = dim_head
        self.heads = heads
        inner_dim = dim_head * heads

        self.norm1 = nn.LayerNorm(dim if kv_dim is None else kv_dim)
        self.norm2 = nn.LayerNorm(dim)

        self.to_q = nn.Linear(dim, inner_dim, bias=False)
        self.to_kv = nn.Linear(dim if kv_dim is None else kv_dim, inner_dim * 2, bias=False)
        self.to_out = nn.Linear(inner_dim, dim, bias=False)

    def forward(self, image_embeds, latents):
        image_embeds = self.norm1(image_embeds)
        latents = self.norm2(latents)

        batch_size, seq_len, _ = latents.shape

        query = self.to_q(latents)
        kv_input = torch.cat((image_embeds, latents), dim=-2)
        key, value = self.to_kv(kv_input).chunk(2, dim=-1)

        query = query.reshape(query.size(0), -1, self.heads, self.dim_head).transpose(1, 2)
        key = key.reshape(key.size(0), -1, self.heads, self.dim_head).transpose(1, 2)
        value = value.reshape(value.size(0), -1, self.heads, self.dim_head).transpose(1, 2)

        scale = 1 / math.sqrt(math.sqrt(self.dim_head))
        weight = (query * scale) @ (key * scale).transpose(-2, -1)
        weight = torch.softmax(weight.float(), dim=-1).type(weight.dtype)
        output = weight @ value

        output = output.permute(0, 2, 1, 3).reshape(batch_size, seq_len, -1)

        return self.to_out(output)


class LocalFacialExtractor(nn.Module):
    def __init__(self, id_dim=1280, vit_dim=1024, depth=10, dim_head=64, heads=16, num_id_token=5, num_queries=32,
                 output_dim=2048, ff_mult=4, num_scale=5):
        super().__init__()
        self.num_id_token = num_id_token
        self.vit_dim = vit_dim
        self.num_queries = num_queries
        assert depth % num_scale == 0
        self.depth = depth // num_scale
        self.num_scale = num_scale
        scale = vit_dim ** -0.5

        self.latents = nn.Parameter(torch.randn(1, num_queries, vit_dim) * scale)
        self.proj_out = nn.Parameter(scale * torch.randn(vit_dim, output_dim))

        self.layers = nn.ModuleList([])
        for _ in range(depth):
            self.layers.append(nn.ModuleList([
                PerceiverAttention(dim=vit_dim, dim_head=dim_head, heads=heads),
                nn.Sequential(
                    nn.LayerNorm(vit_dim),
                    nn.Linear(vit_dim, vit_dim * ff_mult, bias=False),
                    nn.GELU(),
                    nn.Linear(vit_dim * ff_mult, vit_dim, bias=False),
                ),
            ]))

        for i in range(num_scale):
            setattr(self, f"mapping_{i}", nn.Sequential(
                nn.Linear(vit_dim, vit_dim),
                nn.LayerNorm(vit_dim),
                nn.LeakyReLU(),
                nn.Linear(vit_dim, vit_dim),
                nn.LayerNorm(vit_dim),
                nn.LeakyReLU(),
                nn.Linear(vit_dim, vit_dim),
            ))

        self.id_embedding_mapping = nn.Sequential(
            nn.Linear(id_dim, vit_dim),
            nn.LayerNorm(vit_dim),
            nn.LeakyReLU(),
            nn.Linear(vit_dim, vit_dim),
            nn.LayerNorm(vit_dim),
            nn.LeakyReLU(),
            nn.Linear(vit_dim, vit_dim * num_id_token),
        )

    def forward(self, id_embeds, vit_hidden_states):
        latents = self.latents.repeat(id_embeds.size(0), 1, 1)

        id_embeds = self.id_embedding_mapping(id_embeds)
        id_embeds = id_embeds.reshape(-1, self.num_id_token, self.vit_dim)

        latents = torch.cat((latents, id_embeds), dim=1)

        for i in range(self.num_scale):
            vit_feature = getattr(self, f"mapping_{i}")(vit_hidden_states[i])
            ctx_feature = torch.cat((id_embeds, vit_feature), dim=1)

            for attn, ff in self.layers[i * self.depth: (i + 1) * self.depth]:
                latents = attn(ctx_feature, latents) + latents
                latents = ff(latents) + latents

        latents = latents[:, : self.num_queries]
        latents = latents @ self.proj_out
        return latents


class PerceiverCrossAttention(nn.Module):
    def __init__(self, dim=3072, dim_head=128, heads=16, kv_dim=2048):
        super().__init__()
        self.scale = dim_head ** -0.5
        self.dim_head = dim_head
        self.heads = heads
        inner_dim = dim_head * heads

        self.norm1 = nn.LayerNorm(dim if kv_dim is None else kv_dim)
        self.norm2 = nn.LayerNorm(dim)

        self.to_q = nn.Linear(dim, inner_dim, bias=False)
        self.to_kv = nn.Linear(dim if kv_dim is None else kv_dim, inner_dim * 2, bias=False)
        self.to_out = nn.Linear(inner_dim, dim, bias=False)

    def forward(self, image_embeds, hidden_states):
        image_embeds = self.norm1(image_embeds)
        hidden_states = self.norm2(hidden_states)

        batch_size, seq_len, _ = hidden_states.shape

        query = self.to_q(hidden_states)
        key, value = self.to_kv(image_embeds).chunk(2, dim=-1)

        query = query.reshape(query.size(0), -1, self.heads, self.dim_head).transpose(1, 2)
        key = key.reshape(key.size(0), -1, self.heads, self.dim_head).transpose(1, 2)
        value = value.reshape(value.size(0), -1, self.heads, self.dim_head).transpose(1, 2)

        scale = 1 / math.sqrt(math.sqrt(self.dim_head))
        weight = (query * scale) @ (key * scale).transpose(-2, -1)
        weight = torch.softmax(weight.float(), dim=-1).type(weight.dtype)

        out = weight @ value

        out = out.permute(0, 2, 1, 3).reshape(batch_size, seq_len, -1)

        return self.to_out(out)


class ConsisIDBlock(nn.Module):
    def __init__(self, dim, num_attention_heads, attention_head_dim, time_embed_dim, dropout=0.0,
                 activation_fn="gelu-approximate", attention_bias=False, qk_norm=True, norm_elementwise_affine=True,
                 norm_eps=1e-5, final_dropout=True, ff_inner_dim=None, ff_bias=True, attention_out_bias=True):
        super().__init__()
        self.norm1 = CogVideoXLayerNormZero(time_embed_dim, dim, norm_elementwise_affine, norm_eps, bias=True)
        self.attn1 = Attention(query_dim=dim, dim_head=attention_head_dim, heads=num_attention_heads,
                               qk_norm="layer_norm" if qk_norm else None, eps=1e-6, bias=attention_bias,
                               out_bias=attention_out_bias)
        self.norm2 = CogVideoXLayerNormZero(time_embed_dim, dim, norm_elementwise_affine, norm_eps, bias=True)
        self.ff = FeedForward(dim, dropout=dropout, activation_fn=activation_fn, final_dropout=final_dropout,
                              inner_dim=ff_inner_dim, bias=ff_bias)

    def forward(self, hidden_states, encoder_hidden_states, temb, image_rotary_emb=None):
        text_seq_length = encoder_hidden_states.size(1)

        norm_hidden_states, norm_encoder_hidden_states, gate_msa, enc_gate_msa = self.norm1(
            hidden_states, encoder_hidden_states, temb)

        attn_hidden_states, attn_encoder_hidden_states = self.attn1(
            hidden_states=norm_hidden_states, encoder_hidden_states=norm_encoder_hidden_states,
            image_rotary_emb=image_rotary_emb)

        hidden_states = hidden_states + gate_msa * attn_hidden_states
        encoder_hidden_states = encoder_hidden_states + enc_gate_msa * attn_encoder_hidden_states

        norm_hidden_states, norm_encoder_hidden_states, gate_ff, enc_gate_ff = self.norm2(
            hidden_states, encoder_hidden_states, temb)

        norm_hidden_states = torch.cat([norm_encoder_hidden_states, norm_hidden_states], dim=1)
        ff_output = self.ff(norm_hidden_states)

        hidden_states = hidden_states + gate_ff * ff_output[:, text_seq_length:]
        encoder_hidden_states = encoder_hidden_states + enc_gate_ff * ff_output[:, :text_seq_length]

        return hidden_states, encoder_hidden_states


class ConsisIDTransformer3DModel(nn.Module):
    def __init__(self, num_attention_heads=30, attention_head_dim=64, in_channels=16, out_channels=16,
                 flip_sin_to_cos=True, freq_shift=0, time_embed_dim=512, text_embed_dim=4096, num_layers=30,
                 dropout=0.0, attention_bias=True, sample_width=90, sample_height=60, sample_frames=49, patch_size=2,
                 temporal_compression_ratio=4, max_text_seq_length=226, activation_fn="gelu-approximate",
                 timestep_activation_fn="silu", norm_elementwise_affine=True, norm_eps=1e-5,
                 spatial_interpolation_scale=1.875, temporal_interpolation_scale=1.0,
                 use_rotary_positional_embeddings=False, use_learned_positional_embeddings=False,
                 is_train_face=False, is_kps=False, cross_attn_interval=2, cross_attn_dim_head=128,
                 cross_attn_num_heads=16, LFE_id_dim=1280, LFE_vit_dim=1024, LFE_depth=10, LFE_dim_head=64,
                 LFE_num_heads=16, LFE_num_id_token=5, LFE_num_querie=32, LFE_output_dim=2048, LFE_ff_mult=4,
                 LFE_num_scale=5, local_face_scale=1.0):
        super().__init__()
        inner_dim = num_attention_heads * attention_head_dim
        # the replica holds the configuration ConsisID ships: RoPE on, no positional table
        assert use_rotary_positional_embeddings and not use_learned_positional_embeddings
        self.patch_size = patch_size

        self.patch_embed = CogVideoXPatchEmbed(patch_size=patch_size, in_channels=in_channels, embed_dim=inner_dim,
                                               text_embed_dim=text_embed_dim, bias=True)
        self.embedding_dropout = nn.Dropout(dropout)

        self.time_proj = Timesteps(inner_dim, flip_sin_to_cos, freq_shift)
        self.time_embedding = TimestepEmbedding(inner_dim, time_embed_dim, timestep_activation_fn)

        self.transformer_blocks = nn.ModuleList([
            ConsisIDBlock(dim=inner_dim, num_attention_heads=num_attention_heads,
                          attention_head_dim=attention_head_dim, time_embed_dim=time_embed_dim, dropout=dropout,
                          activation_fn=activation_fn, attention_bias=attention_bias,
                          norm_elementwise_affine=norm_elementwise_affine, norm_eps=norm_eps)
            for _ in range(num_layers)])
        self.norm_final = nn.LayerNorm(inner_dim, norm_eps, norm_elementwise_affine)

        self.norm_out = AdaLayerNorm(embedding_dim=time_embed_dim, output_dim=2 * inner_dim,
                                     norm_elementwise_affine=norm_elementwise_affine, norm_eps=norm_eps, chunk_dim=1)
        self.proj_out = nn.Linear(inner_dim, patch_size * patch_size * out_channels)

        self.is_train_face = is_train_face
        self.is_kps = is_kps

        if is_train_face:
            self.LFE_id_dim = LFE_id_dim
            self.LFE_vit_dim = LFE_vit_dim
            self.LFE_depth = LFE_depth
            self.LFE_dim_head = LFE_dim_head
            self.LFE_num_heads = LFE_num_heads
            self.LFE_num_id_token = LFE_num_id_token
            self.LFE_num_querie = LFE_num_querie
            self.LFE_output_dim = LFE_output_dim
            self.LFE_ff_mult = LFE_ff_mult
            self.LFE_num_scale = LFE_num_scale
            self.inner_dim = inner_dim
            self.cross_attn_interval = cross_attn_interval
            self.num_cross_attn = num_layers // cross_attn_interval
            self.cross_attn_dim_head = cross_attn_dim_head
            self.cross_attn_num_heads = cross_attn_num_heads
            self.cross_attn_kv_dim = int(self.inner_dim / 3 * 2)
            self.local_face_scale = local_face_scale
            self._init_face_inputs()

    def _init_face_inputs(self):
        self.local_facial_extractor = LocalFacialExtractor(
            id_dim=self.LFE_id_dim, vit_dim=self.LFE_vit_dim, depth=self.LFE_depth, dim_head=self.LFE_dim_head,
            heads=self.LFE_num_heads, num_id_token=self.LFE_num_id_token, num_queries=self.LFE_num_querie,
            output_dim=self.LFE_output_dim, ff_mult=self.LFE_ff_mult, num_scale=self.LFE_num_scale)
        self.perceiver_cross_attention = nn.ModuleList([
            PerceiverCrossAttention(dim=self.inner_dim, dim_head=self.cross_attn_dim_head,
                                    heads=self.cross_attn_num_heads, kv_dim=self.cross_attn_kv_dim)
            for _ in range(self.num_cross_attn)])

    def forward(self, hidden_states, encoder_hidden_states, timestep, timestep_cond=None, image_rotary_emb=None,
                attention_kwargs=None, id_cond=None, id_vit_hidden=None, return_dict=True):
        valid_face_emb = None
        if self.is_train_face:
            id_cond = id_cond.to(device=hidden_states.device, dtype=hidden_states.dtype)
            id_vit_hidden = [tensor.to(device=hidden_states.device, dtype=hidden_states.dtype)
                             for tensor in id_vit_hidden]
            valid_face_emb = self.local_facial_extractor(id_cond, id_vit_hidden)

        batch_size, num_frames, channels, height, width = hidden_states.shape

        timesteps = timestep
        t_emb = self.time_proj(timesteps)
        t_emb = t_emb.to(dtype=hidden_states.dtype)
        emb = self.time_embedding(t_emb, timestep_cond)

        hidden_states = self.patch_embed(encoder_hidden_states, hidden_states)
        hidden_states = self.embedding_dropout(hidden_states)

        text_seq_length = encoder_hidden_states.shape[1]
        encoder_hidden_states = hidden_states[:, :text_seq_length]
        hidden_states = hidden_states[:, text_seq_length:]

        ca_idx = 0
        for i, block in enumerate(self.transformer_blocks):
            hidden_states, encoder_hidden_states = block(hidden_states=hidden_states,
                                                         encoder_hidden_states=encoder_hidden_states, temb=emb,
                                                         image_rotary_emb=image_rotary_emb)
            if self.is_train_face:
                if i % self.cross_attn_interval == 0 and valid_face_emb is not None:
                    hidden_states = hidden_states + self.local_face_scale * self.perceiver_cross_attention[ca_idx](
                        valid_face_emb, hidden_states)
                    ca_idx += 1

        hidden_states = torch.cat([encoder_hidden_states, hidden_states], dim=1)
        hidden_states = self.norm_final(hidden_states)
        hidden_states = hidden_states[:, text_seq_length:]

        hidden_states = self.norm_out(hidden_states, temb=emb)
        hidden_states = self.proj_out(hidden_states)

        p = self.patch_size
        output = hidden_states.reshape(batch_size, num_frames, height // p, width // p, -1, p, p)
        output = output.permute(0, 1, 4, 2, 5, 3, 6).flatten(5, 6).flatten(3, 4)
        return (output,)


CID_VIT = 2  # LocalFacialExtractor scales (ViT hidden layers; ConsisID ships 5, of depth 2 each)


def build():
    # capture_dit.py's consisid case: inner 48 = 3 x 16 (heads of 16: the smallest whose t/h/w RoPE parts, 4/6/6,
    # are even), kv width 32 = LFE_output_dim; 2 blocks, cross-attention after every 2nd (block 0); text 4 tokens 16
    # wide; time embedding 16; LFE 2 scales of depth 1, 2 heads of 8, 4 queries, 2 id tokens. The latent is 4x4
    # and the LFE has 2 scales (capture_dit's 8x8 latent and 5 scales make the trace 4.3 MB).
    return ConsisIDTransformer3DModel(num_attention_heads=3, attention_head_dim=16, in_channels=8, out_channels=4,
                                      time_embed_dim=16, text_embed_dim=16, num_layers=2, sample_width=8,
                                      sample_height=8, sample_frames=5, patch_size=2, max_text_seq_length=4,
                                      use_rotary_positional_embeddings=True, use_learned_positional_embeddings=False,
                                      is_train_face=True, is_kps=False, cross_attn_interval=2, cross_attn_dim_head=16,
                                      cross_attn_num_heads=2, LFE_id_dim=16, LFE_vit_dim=16, LFE_depth=CID_VIT,
                                      LFE_dim_head=8, LFE_num_heads=2, LFE_num_id_token=2, LFE_num_querie=4,
                                      LFE_output_dim=32, LFE_ff_mult=2, LFE_num_scale=CID_VIT, local_face_scale=1.0)


def crop_region(src, tgt_width, tgt_height):
    # pipelines' get_resize_crop_region_for_grid
    tw, th = tgt_width, tgt_height
    h, w = src
    r = h / w
    if r > (th / tw):
        resize_height = th
        resize_width = int(round(th / h * w))
    else:
        resize_width = tw
        resize_height = int(round(tw / w * h))
    crop_top = int(round((th - resize_height) / 2.0))
    crop_left = int(round((tw - resize_width) / 2.0))
    return (crop_top, crop_left), (crop_top + resize_height, crop_left + resize_width)


def inputs(g):
    # ConsisIDPipeline._prepare_rotary_positional_embeddings: grid 2x2 after 2x2 patches of a 4x4 latent, base grid
    # sample_width // patch = 4 (crop region (0, 0)-(4, 4): positions 0 and 2), 2 latent frames; image latents = the
    # reference frame then zero frames, joined to the noise on channels; id_cond and 2 ViT hidden layers (one per LFE scale).
    cos, sin = get_3d_rotary_pos_embed(embed_dim=16, crops_coords=crop_region((2, 2), 4, 4), grid_size=(2, 2),
                                       temporal_size=2)
    img = torch.cat([torch.randn((1, 1, 4, 4, 4), generator=g), torch.zeros(1, 1, 4, 4, 4)], dim=1)
    d = {"encoder_hidden_states": torch.randn((1, 4, 16), generator=g), "image_latents": img,
         "id_cond": torch.randn((1, 16), generator=g)}
    for i in range(CID_VIT):
        d[f"id_vit_hidden_{i}"] = torch.randn((1, 5, 16), generator=g)
    d.update({"image_rotary_cos": cos, "image_rotary_sin": sin, "noise": torch.randn((1, 2, 4, 4, 4), generator=g)})
    return d


def call(model, x, sigma, c):
    t = torch.tensor([int(round(sigma * 1000))], dtype=torch.int64)
    inp = torch.cat([x, c["image_latents"]], dim=2)
    return model(hidden_states=inp, encoder_hidden_states=c["encoder_hidden_states"], timestep=t,
                 image_rotary_emb=(c["image_rotary_cos"], c["image_rotary_sin"]), attention_kwargs=None,
                 id_cond=c["id_cond"], id_vit_hidden=[c[f"id_vit_hidden_{i}"] for i in range(CID_VIT)],
                 return_dict=False)[0]


PRODUCER = dict(
    library_source="replica of huggingface/diffusers consisid_transformer_3d.py@06d4fb510fee and the parts it "
                   "imports (torch 1.13)",
    timestep="round(sigma*1000) int64 (ConsisIDPipeline: t.expand(B), CogVideoXDPM timesteps)",
    velocity="model output as is (a v-prediction model run in a flow loop), not negated; input = [latents, image "
             "latents] on channels",
    note="ConsisID identity-preserving I2V DiT (CogVideoX-5B body: CogVideoXPatchEmbed without a sincos table, "
         "CogVideoXLayerNormZero per-stream shift/scale/gate, joint [text, video] attention with per-head LayerNorm "
         "q/k norm and interleaved 3-D RoPE on video tokens only, one GELU-tanh FFN over both streams); plus a "
         "LocalFacialExtractor (Perceiver resampler: learned queries + MLP-expanded id tokens, per-scale MLP "
         "(LeakyReLU) on 2 ViT hidden layers, PerceiverAttention with k/v over [context, latents] and q/k pre-scaled "
         "by d^-1/4, softmax in f32, bias-free FFN, matmul by a proj_out parameter) whose face tokens are added after "
         "every 2nd block through PerceiverCrossAttention (LayerNorms, bias-free q / kv / out); final LayerNorm over "
         "[text, video] then AdaLayerNorm (shift, scale); 2 latent frames of 4x4; RoPE tables recorded as inputs "
         "image_rotary_cos/sin")

if __name__ == "__main__":
    capture("consisid", build, inputs, call, sys.argv[1], PRODUCER)
