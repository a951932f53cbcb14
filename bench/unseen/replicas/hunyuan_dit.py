"""HunyuanDiT (v1.0/1.1 layout), reimplemented for torch 1.13 (no diffusers here), captured small in f32 on CPU.

Follows huggingface/diffusers src/diffusers/models/transformers/hunyuan_transformer_2d.py at
03e717a407a62ceedd5c81cdc903b12dd3c5a48f (HunyuanDiT2DModel, HunyuanDiTBlock, AdaLayerNormShift) with the parts it
imports: attention_processor.py (Attention with qk_norm "layer_norm" eps 1e-6 and biased q/k/v/out;
HunyuanAttnProcessor2_0's __call__ as its forward), attention.py (FeedForward "gelu-approximate"), activations.py
(GELU, FP32SiLU), embeddings.py (PatchEmbed with pos_embed_type None, Timesteps, TimestepEmbedding,
PixArtAlphaTextProjection with act_fn "silu_fp32", HunyuanDiTAttentionPool, HunyuanCombinedTimestepTextSizeStyleEmbedding,
get_2d_rotary_pos_embed / get_1d_rotary_pos_embed with use_real, apply_rotary_emb with use_real_unbind_dim -1) and
normalization.py (FP32LayerNorm, AdaLayerNormContinuous): the same module tree, parameter names and shapes, and call
boundaries; the arithmetic line for line. Stand-in for what torch 1.13 lacks: F.scaled_dot_product_attention (its
math path, default scale 1/sqrt(head_dim), no mask). The attention pool keeps upstream's
F.multi_head_attention_forward (torch 1.13 has it).

The constructs it shows: U-ViT long skips over 6 blocks (skip=layer > num_layers // 2: blocks 4 and 5 take
the outputs of blocks 1 and 0, popped last-in first-out, each through skip_norm = FP32LayerNorm(2d) of
cat([x, skip], -1) then skip_linear back to d, which replaces the stream); AdaLayerNormShift (FP32 LayerNorm(x) +
Linear(SiLU(temb in f32)), shift only, no scale, no gate) before the self-attention; un-modulated FP32 LayerNorms
before the cross-attention and the feed-forward; per-head LayerNorm q/k norms in both attentions (affine); the
interleaved 2-D RoPE (cos/sin tables over head_dim, half for rows half for columns) applied to q and k in the
self-attention and to q ONLY in the cross-attention (k of the text left as it is); text from two encoders: the
T5 side projected by PixArtAlphaTextProjection(silu_fp32, 4x-wide hidden) and concatenated after the CLIP/BERT
side, then rows whose mask is 0 replaced by a learned text_embedding_padding (torch.where); temb = timestep MLP +
extra_embedder(cat[attention-pooled raw T5 (mean token + positional table, one-query multi-head attention),
6 image-meta-size sinusoids, style embedding]) with SiLU in f32; the timestep in the latents' dtype sets
hidden_dtype; final AdaLayerNormContinuous on temb cast to f32; einsum unpatchify; learned sigma (2C out).

Pipeline as HunyuanDiTPipeline (pipeline_hunyuandit.py) calls it with guidance off: t_expand =
torch.tensor([t] * B).to(latents dtype) with t = round(sigma·1000) (the DDPM scheduler's integer steps); BERT
embeds [1, 5, 24] with mask 1 1 1 1 0 and T5 embeds [1, 6, 32] with mask 1 1 1 1 0 0 (tokenizer padding);
image_meta_size = original (1024, 1024) + target (64, 64) + crop (0, 0) in the prompt embeds' dtype; style [0];
image_rotary_emb = get_2d_rotary_pos_embed(head_dim 16, get_resize_crop_region_for_grid((4, 4), 512 // 8 // 2),
(4, 4)) recorded as inputs image_rotary_cos / image_rotary_sin (f32 in both runs); velocity = the first C
channels (noise_pred.chunk(2, dim=1)[0]), as is.

usage: /usr/bin/python3 bench/unseen/replicas/hunyuan_dit.py OUTDIR
"""
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

from parts import FeedForward, TimestepEmbedding, Timesteps
from run import capture, sdpa


class FP32LayerNorm(nn.LayerNorm):
    def forward(self, inputs):
        origin_dtype = inputs.dtype
        return F.layer_norm(inputs.float(), self.normalized_shape,
                            self.weight.float() if self.weight is not None else None,
                            self.bias.float() if self.bias is not None else None, self.eps).to(origin_dtype)


class FP32SiLU(nn.Module):
    def forward(self, inputs):
        return F.silu(inputs.float(), inplace=False).to(inputs.dtype)


class PixArtAlphaTextProjection(nn.Module):
    def __init__(self, in_features, hidden_size, out_features=None, act_fn="gelu_tanh"):
        super().__init__()
        if out_features is None:
            out_features = hidden_size
        self.linear_1 = nn.Linear(in_features=in_features, out_features=hidden_size, bias=True)
        if act_fn == "gelu_tanh":
            self.act_1 = nn.GELU(approximate="tanh")
        elif act_fn == "silu_fp32":
            self.act_1 = FP32SiLU()
        else:
            raise ValueError(f"Unknown activation function: {act_fn}")
        self.linear_2 = nn.Linear(in_features=hidden_size, out_features=out_features, bias=True)

    def forward(self, caption):
        hidden_states = self.linear_1(caption)
        hidden_states = self.act_1(hidden_states)
        hidden_states = self.linear_2(hidden_states)
        return hidden_states


class PatchEmbed(nn.Module):
    """embeddings.PatchEmbed(..., pos_embed_type=None): conv, flatten, no norm, no position table."""

    def __init__(self, height=224, width=224, patch_size=16, in_channels=3, embed_dim=768, layer_norm=False,
                 flatten=True, bias=True, interpolation_scale=1, pos_embed_type="sincos", pos_embed_max_size=None):
        super().__init__()
        assert pos_embed_type is None and not layer_norm and pos_embed_max_size is None
        self.flatten = flatten
        self.layer_norm = layer_norm
        self.pos_embed_max_size = pos_embed_max_size
        self.proj = nn.Conv2d(in_channels, embed_dim, kernel_size=(patch_size, patch_size), stride=patch_size,
                              bias=bias)
        self.norm = None
        self.patch_size = patch_size
        self.height, self.width = height // patch_size, width // patch_size
        self.base_size = height // patch_size
        self.interpolation_scale = interpolation_scale
        self.pos_embed = None

    def forward(self, latent):
        latent = self.proj(latent)
        if self.flatten:
            latent = latent.flatten(2).transpose(1, 2)  # BCHW -> BNC
        return latent.to(latent.dtype)


def get_1d_rotary_pos_embed(dim, pos, theta=10000.0, use_real=False, linear_factor=1.0, ntk_factor=1.0,
                            repeat_interleave_real=True, freqs_dtype=torch.float32):
    assert dim % 2 == 0
    if isinstance(pos, int):
        pos = torch.arange(pos)
    theta = theta * ntk_factor
    freqs = (1.0 / (theta ** (torch.arange(0, dim, 2, dtype=freqs_dtype, device=pos.device) / dim)) / linear_factor)
    freqs = torch.outer(pos, freqs)
    if use_real and repeat_interleave_real:
        # flux, hunyuan-dit, cogvideox
        freqs_cos = freqs.cos().repeat_interleave(2, dim=1).float()
        freqs_sin = freqs.sin().repeat_interleave(2, dim=1).float()
        return freqs_cos, freqs_sin
    raise NotImplementedError("only use_real with repeat_interleave_real in this replica")


def get_2d_rotary_pos_embed_from_grid(embed_dim, grid, use_real=False):
    assert embed_dim % 4 == 0
    emb_h = get_1d_rotary_pos_embed(embed_dim // 2, grid[0].reshape(-1), use_real=use_real)
    emb_w = get_1d_rotary_pos_embed(embed_dim // 2, grid[1].reshape(-1), use_real=use_real)
    assert use_real
    cos = torch.cat([emb_h[0], emb_w[0]], dim=1)  # (H*W, D)
    sin = torch.cat([emb_h[1], emb_w[1]], dim=1)  # (H*W, D)
    return cos, sin


def get_2d_rotary_pos_embed(embed_dim, crops_coords, grid_size, use_real=True, device=None, output_type="pt"):
    start, stop = crops_coords
    # scale end by (steps-1)/steps matches np.linspace(..., endpoint=False)
    grid_h = torch.linspace(start[0], stop[0] * (grid_size[0] - 1) / grid_size[0], grid_size[0], device=device,
                            dtype=torch.float32)
    grid_w = torch.linspace(start[1], stop[1] * (grid_size[1] - 1) / grid_size[1], grid_size[1], device=device,
                            dtype=torch.float32)
    grid = torch.meshgrid(grid_w, grid_h, indexing="xy")
    grid = torch.stack(grid, dim=0)  # [2, W, H]
    grid = grid.reshape([2, 1, *grid.shape[1:]])
    return get_2d_rotary_pos_embed_from_grid(embed_dim, grid, use_real=use_real)


def get_resize_crop_region_for_grid(src, tgt_size):
    """pipelines/hunyuandit/pipeline_hunyuandit.py."""
    th = tw = tgt_size
    h, w = src
    r = h / w
    if r > 1:
        resize_height = th
        resize_width = int(round(th / h * w))
    else:
        resize_width = tw
        resize_height = int(round(tw / w * h))
    crop_top = int(round((th - resize_height) / 2.0))
    crop_left = int(round((tw - resize_width) / 2.0))
    return (crop_top, crop_left), (crop_top + resize_height, crop_left + resize_width)


def apply_rotary_emb(x, freqs_cis, use_real=True, use_real_unbind_dim=-1, sequence_dim=2):
    assert use_real and use_real_unbind_dim == -1
    cos, sin = freqs_cis  # [S, D]
    if sequence_dim == 2:
        cos = cos[None, None, :, :]
        sin = sin[None, None, :, :]
    elif sequence_dim == 1:
        cos = cos[None, :, None, :]
        sin = sin[None, :, None, :]
    else:
        raise ValueError(f"`sequence_dim={sequence_dim}` but should be 1 or 2.")
    cos, sin = cos.to(x.device), sin.to(x.device)
    # Used for flux, cogvideox, hunyuan-dit
    x_real, x_imag = x.reshape(*x.shape[:-1], -1, 2).unbind(-1)  # [B, H, S, D//2]
    x_rotated = torch.stack([-x_imag, x_real], dim=-1).flatten(3)
    out = (x.float() * cos + x_rotated.float() * sin).to(x.dtype)
    return out


class HunyuanDiTAttentionPool(nn.Module):
    # Copied from https://github.com/Tencent/HunyuanDiT/blob/cb709308d92e6c7e8d59d0dff41b74d35088db6a/hydit/modules/poolers.py#L6

    def __init__(self, spacial_dim, embed_dim, num_heads, output_dim=None):
        super().__init__()
        self.positional_embedding = nn.Parameter(torch.randn(spacial_dim + 1, embed_dim) / embed_dim ** 0.5)
        self.k_proj = nn.Linear(embed_dim, embed_dim)
        self.q_proj = nn.Linear(embed_dim, embed_dim)
        self.v_proj = nn.Linear(embed_dim, embed_dim)
        self.c_proj = nn.Linear(embed_dim, output_dim or embed_dim)
        self.num_heads = num_heads

    def forward(self, x):
        x = x.permute(1, 0, 2)  # NLC -> LNC
        x = torch.cat([x.mean(dim=0, keepdim=True), x], dim=0)  # (L+1)NC
        x = x + self.positional_embedding[:, None, :].to(x.dtype)  # (L+1)NC
        x, _ = F.multi_head_attention_forward(
            query=x[:1], key=x, value=x, embed_dim_to_check=x.shape[-1], num_heads=self.num_heads,
            q_proj_weight=self.q_proj.weight, k_proj_weight=self.k_proj.weight, v_proj_weight=self.v_proj.weight,
            in_proj_weight=None, in_proj_bias=torch.cat([self.q_proj.bias, self.k_proj.bias, self.v_proj.bias]),
            bias_k=None, bias_v=None, add_zero_attn=False, dropout_p=0, out_proj_weight=self.c_proj.weight,
            out_proj_bias=self.c_proj.bias, use_separate_proj_weight=True, training=self.training,
            need_weights=False)
        return x.squeeze(0)


class HunyuanCombinedTimestepTextSizeStyleEmbedding(nn.Module):
    def __init__(self, embedding_dim, pooled_projection_dim=1024, seq_len=256, cross_attention_dim=2048,
                 use_style_cond_and_image_meta_size=True):
        super().__init__()
        self.time_proj = Timesteps(num_channels=256, flip_sin_to_cos=True, downscale_freq_shift=0)
        self.timestep_embedder = TimestepEmbedding(in_channels=256, time_embed_dim=embedding_dim)
        self.size_proj = Timesteps(num_channels=256, flip_sin_to_cos=True, downscale_freq_shift=0)
        self.pooler = HunyuanDiTAttentionPool(seq_len, cross_attention_dim, num_heads=8,
                                              output_dim=pooled_projection_dim)
        # Here we use a default learned embedder layer for future extension.
        self.use_style_cond_and_image_meta_size = use_style_cond_and_image_meta_size
        if use_style_cond_and_image_meta_size:
            self.style_embedder = nn.Embedding(1, embedding_dim)
            extra_in_dim = 256 * 6 + embedding_dim + pooled_projection_dim
        else:
            extra_in_dim = pooled_projection_dim
        self.extra_embedder = PixArtAlphaTextProjection(in_features=extra_in_dim, hidden_size=embedding_dim * 4,
                                                        out_features=embedding_dim, act_fn="silu_fp32")

    def forward(self, timestep, encoder_hidden_states, image_meta_size, style, hidden_dtype=None):
        timesteps_proj = self.time_proj(timestep)
        timesteps_emb = self.timestep_embedder(timesteps_proj.to(dtype=hidden_dtype))  # (N, 256)
        # extra condition1: text
        pooled_projections = self.pooler(encoder_hidden_states)  # (N, 1024)
        if self.use_style_cond_and_image_meta_size:
            # extra condition2: image meta size embedding
            image_meta_size = self.size_proj(image_meta_size.view(-1))
            image_meta_size = image_meta_size.to(dtype=hidden_dtype)
            image_meta_size = image_meta_size.view(-1, 6 * 256)  # (N, 1536)
            # extra condition3: style embedding
            style_embedding = self.style_embedder(style)  # (N, embedding_dim)
            # Concatenate all extra vectors
            extra_cond = torch.cat([pooled_projections, image_meta_size, style_embedding], dim=1)
        else:
            extra_cond = torch.cat([pooled_projections], dim=1)
        conditioning = timesteps_emb + self.extra_embedder(extra_cond)  # [B, D]
        return conditioning


class AdaLayerNormContinuous(nn.Module):
    def __init__(self, embedding_dim, conditioning_embedding_dim, elementwise_affine=True, eps=1e-5, bias=True,
                 norm_type="layer_norm"):
        super().__init__()
        self.silu = nn.SiLU()
        self.linear = nn.Linear(conditioning_embedding_dim, embedding_dim * 2, bias=bias)
        assert norm_type == "layer_norm"
        self.norm = nn.LayerNorm(embedding_dim, eps, elementwise_affine)

    def forward(self, x, conditioning_embedding):
        # convert back to the original dtype in case `conditioning_embedding`` is upcasted to float32 (needed for hunyuanDiT)
        emb = self.linear(self.silu(conditioning_embedding).to(x.dtype))
        scale, shift = torch.chunk(emb, 2, dim=1)
        x = self.norm(x) * (1 + scale)[:, None, :] + shift[:, None, :]
        return x


class Attention(nn.Module):
    """attention_processor.Attention as HunyuanDiTBlock builds it (no group/spatial/cross norm, no added kv), with
    HunyuanAttnProcessor2_0's __call__ as its forward."""

    def __init__(self, query_dim, cross_attention_dim=None, heads=8, dim_head=64, dropout=0.0, bias=False,
                 qk_norm=None, eps=1e-5, out_bias=True, rescale_output_factor=1.0, residual_connection=False):
        super().__init__()
        self.inner_dim = dim_head * heads
        self.inner_kv_dim = self.inner_dim
        self.query_dim = query_dim
        self.is_cross_attention = cross_attention_dim is not None
        self.cross_attention_dim = cross_attention_dim if cross_attention_dim is not None else query_dim
        self.rescale_output_factor = rescale_output_factor
        self.residual_connection = residual_connection
        self.scale = dim_head ** -0.5
        self.heads = heads
        self.group_norm = None
        self.spatial_norm = None
        if qk_norm is None:
            self.norm_q = None
            self.norm_k = None
        elif qk_norm == "layer_norm":
            self.norm_q = nn.LayerNorm(dim_head, eps=eps)
            self.norm_k = nn.LayerNorm(dim_head, eps=eps)
        else:
            raise ValueError(qk_norm)
        self.norm_cross = None
        self.to_q = nn.Linear(query_dim, self.inner_dim, bias=bias)
        self.to_k = nn.Linear(self.cross_attention_dim, self.inner_kv_dim, bias=bias)
        self.to_v = nn.Linear(self.cross_attention_dim, self.inner_kv_dim, bias=bias)
        self.to_out = nn.ModuleList([nn.Linear(self.inner_dim, query_dim, bias=out_bias), nn.Dropout(dropout)])

    def forward(self, hidden_states, encoder_hidden_states=None, attention_mask=None, temb=None,
                image_rotary_emb=None):
        attn = self
        residual = hidden_states
        input_ndim = hidden_states.ndim
        assert input_ndim == 3 and attention_mask is None
        batch_size, sequence_length, _ = (
            hidden_states.shape if encoder_hidden_states is None else encoder_hidden_states.shape)
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
        # Apply RoPE if needed
        if image_rotary_emb is not None:
            query = apply_rotary_emb(query, image_rotary_emb)
            if not attn.is_cross_attention:
                key = apply_rotary_emb(key, image_rotary_emb)
        # the output of sdp = (batch, num_heads, seq_len, head_dim)
        hidden_states = sdpa(query, key, value, mask=attention_mask)
        hidden_states = hidden_states.transpose(1, 2).reshape(batch_size, -1, attn.heads * head_dim)
        hidden_states = hidden_states.to(query.dtype)
        # linear proj
        hidden_states = attn.to_out[0](hidden_states)
        # dropout
        hidden_states = attn.to_out[1](hidden_states)
        if attn.residual_connection:
            hidden_states = hidden_states + residual
        hidden_states = hidden_states / attn.rescale_output_factor
        return hidden_states


class AdaLayerNormShift(nn.Module):
    def __init__(self, embedding_dim, elementwise_affine=True, eps=1e-6):
        super().__init__()
        self.silu = nn.SiLU()
        self.linear = nn.Linear(embedding_dim, embedding_dim)
        self.norm = FP32LayerNorm(embedding_dim, elementwise_affine=elementwise_affine, eps=eps)

    def forward(self, x, emb):
        shift = self.linear(self.silu(emb.to(torch.float32)).to(emb.dtype))
        x = self.norm(x) + shift.unsqueeze(dim=1)
        return x


class HunyuanDiTBlock(nn.Module):
    def __init__(self, dim, num_attention_heads, cross_attention_dim=1024, dropout=0.0, activation_fn="geglu",
                 norm_elementwise_affine=True, norm_eps=1e-6, final_dropout=False, ff_inner_dim=None, ff_bias=True,
                 skip=False, qk_norm=True):
        super().__init__()
        # 1. Self-Attn
        self.norm1 = AdaLayerNormShift(dim, elementwise_affine=norm_elementwise_affine, eps=norm_eps)
        self.attn1 = Attention(query_dim=dim, cross_attention_dim=None, dim_head=dim // num_attention_heads,
                               heads=num_attention_heads, qk_norm="layer_norm" if qk_norm else None, eps=1e-6,
                               bias=True)
        # 2. Cross-Attn
        self.norm2 = FP32LayerNorm(dim, norm_eps, norm_elementwise_affine)
        self.attn2 = Attention(query_dim=dim, cross_attention_dim=cross_attention_dim,
                               dim_head=dim // num_attention_heads, heads=num_attention_heads,
                               qk_norm="layer_norm" if qk_norm else None, eps=1e-6, bias=True)
        # 3. Feed-forward
        self.norm3 = FP32LayerNorm(dim, norm_eps, norm_elementwise_affine)
        assert activation_fn == "gelu-approximate" and ff_inner_dim == 4 * dim
        self.ff = FeedForward(dim, mult=4, dropout=dropout, bias=ff_bias)
        # 4. Skip Connection
        if skip:
            self.skip_norm = FP32LayerNorm(2 * dim, norm_eps, elementwise_affine=True)
            self.skip_linear = nn.Linear(2 * dim, dim)
        else:
            self.skip_linear = None
        self._chunk_size = None
        self._chunk_dim = 0

    def forward(self, hidden_states, encoder_hidden_states=None, temb=None, image_rotary_emb=None, skip=None):
        # 0. Long Skip Connection
        if self.skip_linear is not None:
            cat = torch.cat([hidden_states, skip], dim=-1)
            cat = self.skip_norm(cat)
            hidden_states = self.skip_linear(cat)
        # 1. Self-Attention
        norm_hidden_states = self.norm1(hidden_states, temb)  ### checked: self.norm1 is correct
        attn_output = self.attn1(norm_hidden_states, image_rotary_emb=image_rotary_emb)
        hidden_states = hidden_states + attn_output
        # 2. Cross-Attention
        hidden_states = hidden_states + self.attn2(self.norm2(hidden_states),
                                                   encoder_hidden_states=encoder_hidden_states,
                                                   image_rotary_emb=image_rotary_emb)
        # FFN Layer ### TODO: switch norm2 and norm3 in the state dict
        mlp_inputs = self.norm3(hidden_states)
        hidden_states = hidden_states + self.ff(mlp_inputs)
        return hidden_states


class HunyuanDiT2DModel(nn.Module):
    def __init__(self, num_attention_heads=16, attention_head_dim=88, in_channels=None, patch_size=None,
                 activation_fn="gelu-approximate", sample_size=32, hidden_size=1152, num_layers=28, mlp_ratio=4.0,
                 learn_sigma=True, cross_attention_dim=1024, norm_type="layer_norm", cross_attention_dim_t5=2048,
                 pooled_projection_dim=1024, text_len=77, text_len_t5=256, use_style_cond_and_image_meta_size=True):
        super().__init__()
        self.num_layers = num_layers
        self.num_attention_heads = num_attention_heads
        self.out_channels = in_channels * 2 if learn_sigma else in_channels
        self.num_heads = num_attention_heads
        self.inner_dim = num_attention_heads * attention_head_dim
        self.text_embedder = PixArtAlphaTextProjection(in_features=cross_attention_dim_t5,
                                                       hidden_size=cross_attention_dim_t5 * 4,
                                                       out_features=cross_attention_dim, act_fn="silu_fp32")
        self.text_embedding_padding = nn.Parameter(torch.randn(text_len + text_len_t5, cross_attention_dim))
        self.pos_embed = PatchEmbed(height=sample_size, width=sample_size, in_channels=in_channels,
                                    embed_dim=hidden_size, patch_size=patch_size, pos_embed_type=None)
        self.time_extra_emb = HunyuanCombinedTimestepTextSizeStyleEmbedding(
            hidden_size, pooled_projection_dim=pooled_projection_dim, seq_len=text_len_t5,
            cross_attention_dim=cross_attention_dim_t5,
            use_style_cond_and_image_meta_size=use_style_cond_and_image_meta_size)
        # HunyuanDiT Blocks
        self.blocks = nn.ModuleList([
            HunyuanDiTBlock(dim=self.inner_dim, num_attention_heads=num_attention_heads, activation_fn=activation_fn,
                            ff_inner_dim=int(self.inner_dim * mlp_ratio), cross_attention_dim=cross_attention_dim,
                            qk_norm=True, skip=layer > num_layers // 2)
            for layer in range(num_layers)])
        self.norm_out = AdaLayerNormContinuous(self.inner_dim, self.inner_dim, elementwise_affine=False, eps=1e-6)
        self.proj_out = nn.Linear(self.inner_dim, patch_size * patch_size * self.out_channels, bias=True)

    def forward(self, hidden_states, timestep, encoder_hidden_states=None, text_embedding_mask=None,
                encoder_hidden_states_t5=None, text_embedding_mask_t5=None, image_meta_size=None, style=None,
                image_rotary_emb=None, controlnet_block_samples=None, return_dict=True):
        height, width = hidden_states.shape[-2:]
        hidden_states = self.pos_embed(hidden_states)
        temb = self.time_extra_emb(timestep, encoder_hidden_states_t5, image_meta_size, style,
                                   hidden_dtype=timestep.dtype)  # [B, D]
        # text projection
        batch_size, sequence_length, _ = encoder_hidden_states_t5.shape
        encoder_hidden_states_t5 = self.text_embedder(
            encoder_hidden_states_t5.view(-1, encoder_hidden_states_t5.shape[-1]))
        encoder_hidden_states_t5 = encoder_hidden_states_t5.view(batch_size, sequence_length, -1)
        encoder_hidden_states = torch.cat([encoder_hidden_states, encoder_hidden_states_t5], dim=1)
        text_embedding_mask = torch.cat([text_embedding_mask, text_embedding_mask_t5], dim=-1)
        text_embedding_mask = text_embedding_mask.unsqueeze(2).bool()
        encoder_hidden_states = torch.where(text_embedding_mask, encoder_hidden_states, self.text_embedding_padding)
        skips = []
        for layer, block in enumerate(self.blocks):
            if layer > self.num_layers // 2:
                if controlnet_block_samples is not None:
                    skip = skips.pop() + controlnet_block_samples.pop()
                else:
                    skip = skips.pop()
                hidden_states = block(hidden_states, temb=temb, encoder_hidden_states=encoder_hidden_states,
                                      image_rotary_emb=image_rotary_emb, skip=skip)  # (N, L, D)
            else:
                hidden_states = block(hidden_states, temb=temb, encoder_hidden_states=encoder_hidden_states,
                                      image_rotary_emb=image_rotary_emb)  # (N, L, D)
            if layer < (self.num_layers // 2 - 1):
                skips.append(hidden_states)
        if controlnet_block_samples is not None and len(controlnet_block_samples) != 0:
            raise ValueError("The number of controls is not equal to the number of skip connections.")
        # final layer
        hidden_states = self.norm_out(hidden_states, temb.to(torch.float32))
        hidden_states = self.proj_out(hidden_states)
        # (N, L, patch_size ** 2 * out_channels)
        # unpatchify: (N, out_channels, H, W)
        patch_size = self.pos_embed.patch_size
        height = height // patch_size
        width = width // patch_size
        hidden_states = hidden_states.reshape(
            shape=(hidden_states.shape[0], height, width, patch_size, patch_size, self.out_channels))
        hidden_states = torch.einsum("nhwpqc->nchpwq", hidden_states)
        output = hidden_states.reshape(
            shape=(hidden_states.shape[0], self.out_channels, height * patch_size, width * patch_size))
        return (output,)


def build():
    # 2 heads of 16 (hidden 32), 6 blocks (blocks 4 and 5 take the long skips of blocks 1 and 0), FFN 4x, BERT side
    # 24 wide over 5 tokens, T5 side 32 wide over 6 tokens (its attention pool 8 heads of 4), pooled 16, 4 latent
    # channels (8 out: learned sigma), patch 2.
    return HunyuanDiT2DModel(num_attention_heads=2, attention_head_dim=16, in_channels=4, patch_size=2,
                             sample_size=8, hidden_size=32, num_layers=6, mlp_ratio=4.0, learn_sigma=True,
                             cross_attention_dim=24, cross_attention_dim_t5=32, pooled_projection_dim=16,
                             text_len=5, text_len_t5=6, use_style_cond_and_image_meta_size=True)


def inputs(g):
    # HunyuanDiTPipeline: grid = 64 px // 8 // patch 2 = 4x4, base_size = 512 // 8 // 2 = 32; RoPE over head_dim 16.
    grid = (4, 4)
    cos, sin = get_2d_rotary_pos_embed(16, get_resize_crop_region_for_grid(grid, 512 // 8 // 2), grid)
    mask = torch.tensor([[1, 1, 1, 1, 0]], dtype=torch.int64)
    mask_t5 = torch.tensor([[1, 1, 1, 1, 0, 0]], dtype=torch.int64)
    return {"encoder_hidden_states": torch.randn((1, 5, 24), generator=g), "text_embedding_mask": mask,
            "encoder_hidden_states_t5": torch.randn((1, 6, 32), generator=g), "text_embedding_mask_t5": mask_t5,
            "image_meta_size": torch.tensor([[1024.0, 1024.0, 64.0, 64.0, 0.0, 0.0]]),
            "style": torch.zeros(1, dtype=torch.int64), "image_rotary_cos": cos, "image_rotary_sin": sin,
            "noise": torch.randn((1, 4, 8, 8), generator=g)}


def call(model, x, sigma, c):
    # t_expand = torch.tensor([t] * B).to(dtype=latent_model_input.dtype)
    t = torch.tensor([int(round(sigma * 1000))] * x.shape[0]).to(dtype=x.dtype)
    noise_pred = model(x, t, encoder_hidden_states=c["encoder_hidden_states"],
                       text_embedding_mask=c["text_embedding_mask"],
                       encoder_hidden_states_t5=c["encoder_hidden_states_t5"],
                       text_embedding_mask_t5=c["text_embedding_mask_t5"], image_meta_size=c["image_meta_size"],
                       style=c["style"], image_rotary_emb=(c["image_rotary_cos"], c["image_rotary_sin"]),
                       return_dict=False)[0]
    noise_pred, _ = noise_pred.chunk(2, dim=1)
    return noise_pred


PRODUCER = dict(
    library_source="replica of huggingface/diffusers hunyuan_transformer_2d.py@03e717a407a6 and the parts it "
                   "imports (torch 1.13)",
    timestep="round(sigma*1000) cast to the latents' dtype (HunyuanDiTPipeline: torch.tensor([t]*B)"
             ".to(latent_model_input.dtype); bf16 t and hidden_dtype in the bf16 run)",
    velocity="first half of the output channels (learned sigma: noise_pred.chunk(2, dim=1)[0]), not negated",
    note="HunyuanDiT v1.1 layout, 6 blocks: U-ViT long skips (blocks 4, 5 take blocks 1, 0 LIFO through "
         "FP32LayerNorm(2d) of cat[x, skip] + Linear); AdaLayerNormShift (shift only, SiLU in f32) before "
         "self-attn; FP32LayerNorms before cross-attn and FFN; per-head affine LayerNorm q/k norm in both "
         "attentions; interleaved 2-D RoPE on q and k in self-attn, on q only in cross-attn (tables as inputs "
         "image_rotary_cos/sin); text = [BERT 5 tok, T5 6 tok projected by a silu_fp32 MLP], masked rows -> "
         "learned padding (torch.where); temb = t-MLP + extra_embedder(cat[attention-pooled raw T5 via "
         "F.multi_head_attention_forward, 6 size sinusoids, style embedding]); final AdaLayerNormContinuous on "
         "f32 temb; einsum unpatchify; out 8 = 4 + learned sigma")

if __name__ == "__main__":
    capture("hunyuan_dit", build, inputs, call, sys.argv[1], PRODUCER)
