"""Stable Diffusion 3.5 (medium) MMDiT with dual attention, reimplemented for torch 1.13 (no diffusers here),
captured small in f32 on CPU.

Follows huggingface/diffusers src/diffusers/models/transformers/transformer_sd3.py (SD3Transformer2DModel with
dual_attention_layers and qk_norm, as SD3.5-medium's config sets them; from memory of the upstream file after
the SD3.5 additions, checked against copies of attention.py and normalization.py) with the parts it imports:
attention.py (JointTransformerBlock with use_dual_attention and context_pre_only, FeedForward "gelu-approximate",
GELU), attention_processor.py (Attention with added_kv_proj_dim, context_pre_only, qk_norm "rms_norm";
JointAttnProcessor2_0 as its forward, for the joint attention and for the image-only attn2), embeddings.py
(PatchEmbed with pos_embed_max_size: the persistent 2-D sin-cos table over the max grid, cropped to the latent's
grid; get_2d_sincos_pos_embed output_type "pt"; CombinedTimestepTextProjEmbeddings, Timesteps, TimestepEmbedding,
PixArtAlphaTextProjection act "silu"), normalization.py (AdaLayerNormZero, SD35AdaLayerNormZeroX,
AdaLayerNormContinuous, RMSNorm): the same module tree, parameter names and shapes, and call boundaries; the
arithmetic line for line. Stand-in for what torch 1.13 lacks: F.scaled_dot_product_attention (its math path,
default scale, no mask).

The constructs it shows: two streams (image, context) each with their own adaLN-Zero modulation of a shared
temb = timestep MLP + pooled-text MLP, meeting in one joint attention (q/k/v per stream, RMSNorm on q and k per
head in each stream, the rows concatenated image first, split back by the image length, separate out
projections); in the dual-attention blocks the image stream's modulation has 9 chunks (SD35AdaLayerNormZeroX):
one LayerNorm, two modulations of it — the joint attention's input and a second, image-only self-attention attn2
(its own q/k/v/out and RMS q/k norms) whose gated output is added after the joint attention's; the last block is
context_pre_only: the context is only read (AdaLayerNormContinuous [scale, shift] modulation, no gate, its
attention rows not projected out, no context FFN, no context output) and is not dual; a patch conv plus the
cropped sin-cos position table (the centre of a pos_embed_max_size² grid); gelu-tanh FFNs; the final
AdaLayerNormContinuous and an einsum unpatchify.

Pipeline as StableDiffusion3Pipeline calls it with guidance off: latents (B, C, H, W), timestep t = σ·1000 as the
flow scheduler gives it (no shift here), prompt_embeds [B, S, joint_attention_dim] and pooled_prompt_embeds
[B, pooled_projection_dim] (drawn), velocity the output as is.

usage: /usr/bin/python3 bench/unseen/replicas/sd35.py OUTDIR
"""
import sys

import torch
import torch.nn as nn

from parts import FeedForward
from run import capture, sdpa
from hunyuanimage21 import AdaLayerNormContinuous, AdaLayerNormZero, CombinedTimestepTextProjEmbeddings, RMSNorm


def get_1d_sincos_pos_embed_from_grid(embed_dim, pos, output_type="np", flip_sin_to_cos=False):
    assert output_type == "pt"
    if embed_dim % 2 != 0:
        raise ValueError("embed_dim must be divisible by 2")
    omega = torch.arange(embed_dim // 2, device=pos.device, dtype=torch.float64)
    omega /= embed_dim / 2.0
    omega = 1.0 / 10000 ** omega  # (D/2,)
    pos = pos.reshape(-1)  # (M,)
    out = torch.outer(pos, omega)  # (M, D/2), outer product
    emb_sin = torch.sin(out)  # (M, D/2)
    emb_cos = torch.cos(out)  # (M, D/2)
    emb = torch.concat([emb_sin, emb_cos], dim=1)  # (M, D)
    if flip_sin_to_cos:
        emb = torch.cat([emb[:, embed_dim // 2:], emb[:, :embed_dim // 2]], dim=1)
    return emb


def get_2d_sincos_pos_embed_from_grid(embed_dim, grid, output_type="np"):
    if embed_dim % 2 != 0:
        raise ValueError("embed_dim must be divisible by 2")
    # use half of dimensions to encode grid_h
    emb_h = get_1d_sincos_pos_embed_from_grid(embed_dim // 2, grid[0], output_type=output_type)  # (H*W, D/2)
    emb_w = get_1d_sincos_pos_embed_from_grid(embed_dim // 2, grid[1], output_type=output_type)  # (H*W, D/2)
    emb = torch.concat([emb_h, emb_w], dim=1)  # (H*W, D)
    return emb


def get_2d_sincos_pos_embed(embed_dim, grid_size, cls_token=False, extra_tokens=0, interpolation_scale=1.0,
                            base_size=16, device=None, output_type="np"):
    assert output_type == "pt"
    if isinstance(grid_size, int):
        grid_size = (grid_size, grid_size)
    grid_h = (torch.arange(grid_size[0], device=device, dtype=torch.float32) / (grid_size[0] / base_size)
              / interpolation_scale)
    grid_w = (torch.arange(grid_size[1], device=device, dtype=torch.float32) / (grid_size[1] / base_size)
              / interpolation_scale)
    grid = torch.meshgrid(grid_w, grid_h, indexing="xy")  # here w goes first
    grid = torch.stack(grid, dim=0)
    grid = grid.reshape([2, 1, grid_size[1], grid_size[0]])
    pos_embed = get_2d_sincos_pos_embed_from_grid(embed_dim, grid, output_type=output_type)
    if cls_token and extra_tokens > 0:
        pos_embed = torch.concat([torch.zeros([extra_tokens, embed_dim]), pos_embed], dim=0)
    return pos_embed


class PatchEmbed(nn.Module):
    """embeddings.PatchEmbed(height, width, patch_size, in_channels, embed_dim, pos_embed_max_size): conv,
    flatten, no layer norm, the sincos table over pos_embed_max_size² (a persistent buffer), cropped."""

    def __init__(self, height=224, width=224, patch_size=16, in_channels=3, embed_dim=768, layer_norm=False,
                 flatten=True, bias=True, interpolation_scale=1, pos_embed_type="sincos", pos_embed_max_size=None):
        super().__init__()
        num_patches = (height // patch_size) * (width // patch_size)
        self.flatten = flatten
        self.layer_norm = layer_norm
        self.pos_embed_max_size = pos_embed_max_size
        self.proj = nn.Conv2d(in_channels, embed_dim, kernel_size=(patch_size, patch_size), stride=patch_size,
                              bias=bias)
        assert not layer_norm
        self.norm = None
        self.patch_size = patch_size
        self.height, self.width = height // patch_size, width // patch_size
        self.base_size = height // patch_size
        self.interpolation_scale = interpolation_scale
        # Calculate positional embeddings based on max size or default
        if pos_embed_max_size:
            grid_size = pos_embed_max_size
        else:
            grid_size = int(num_patches ** 0.5)
        assert pos_embed_type == "sincos"
        pos_embed = get_2d_sincos_pos_embed(embed_dim, grid_size, base_size=self.base_size,
                                            interpolation_scale=self.interpolation_scale, output_type="pt")
        persistent = True if pos_embed_max_size else False
        self.register_buffer("pos_embed", pos_embed.float().unsqueeze(0), persistent=persistent)

    def cropped_pos_embed(self, height, width):
        """Crops positional embeddings for SD3 compatibility."""
        if self.pos_embed_max_size is None:
            raise ValueError("`pos_embed_max_size` must be set for cropping.")
        height = height // self.patch_size
        width = width // self.patch_size
        if height > self.pos_embed_max_size:
            raise ValueError(f"Height ({height}) cannot be greater than `pos_embed_max_size`")
        if width > self.pos_embed_max_size:
            raise ValueError(f"Width ({width}) cannot be greater than `pos_embed_max_size`")
        top = (self.pos_embed_max_size - height) // 2
        left = (self.pos_embed_max_size - width) // 2
        spatial_pos_embed = self.pos_embed.reshape(1, self.pos_embed_max_size, self.pos_embed_max_size, -1)
        spatial_pos_embed = spatial_pos_embed[:, top: top + height, left: left + width, :]
        spatial_pos_embed = spatial_pos_embed.reshape(1, -1, spatial_pos_embed.shape[-1])
        return spatial_pos_embed

    def forward(self, latent):
        if self.pos_embed_max_size is not None:
            height, width = latent.shape[-2:]
        else:
            height, width = latent.shape[-2] // self.patch_size, latent.shape[-1] // self.patch_size
        latent = self.proj(latent)
        if self.flatten:
            latent = latent.flatten(2).transpose(1, 2)  # BCHW -> BNC
        if self.pos_embed is None:
            return latent.to(latent.dtype)
        # Interpolate or crop positional embeddings as needed
        assert self.pos_embed_max_size
        pos_embed = self.cropped_pos_embed(height, width)
        return (latent + pos_embed).to(latent.dtype)


class SD35AdaLayerNormZeroX(nn.Module):
    def __init__(self, embedding_dim, norm_type="layer_norm", bias=True):
        super().__init__()
        self.silu = nn.SiLU()
        self.linear = nn.Linear(embedding_dim, 9 * embedding_dim, bias=bias)
        assert norm_type == "layer_norm"
        self.norm = nn.LayerNorm(embedding_dim, elementwise_affine=False, eps=1e-6)

    def forward(self, hidden_states, emb=None):
        emb = self.linear(self.silu(emb))
        shift_msa, scale_msa, gate_msa, shift_mlp, scale_mlp, gate_mlp, shift_msa2, scale_msa2, gate_msa2 = emb.chunk(
            9, dim=1)
        norm_hidden_states = self.norm(hidden_states)
        hidden_states = norm_hidden_states * (1 + scale_msa[:, None]) + shift_msa[:, None]
        norm_hidden_states2 = norm_hidden_states * (1 + scale_msa2[:, None]) + shift_msa2[:, None]
        return hidden_states, gate_msa, shift_mlp, scale_mlp, gate_mlp, norm_hidden_states2, gate_msa2


def joint_attn(attn, hidden_states, encoder_hidden_states=None, attention_mask=None, *args, **kwargs):
    """attention_processor.JointAttnProcessor2_0.__call__."""
    residual = hidden_states
    batch_size = hidden_states.shape[0]
    # `sample` projections.
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
    # `context` projections.
    if encoder_hidden_states is not None:
        encoder_hidden_states_query_proj = attn.add_q_proj(encoder_hidden_states)
        encoder_hidden_states_key_proj = attn.add_k_proj(encoder_hidden_states)
        encoder_hidden_states_value_proj = attn.add_v_proj(encoder_hidden_states)
        encoder_hidden_states_query_proj = encoder_hidden_states_query_proj.view(
            batch_size, -1, attn.heads, head_dim).transpose(1, 2)
        encoder_hidden_states_key_proj = encoder_hidden_states_key_proj.view(
            batch_size, -1, attn.heads, head_dim).transpose(1, 2)
        encoder_hidden_states_value_proj = encoder_hidden_states_value_proj.view(
            batch_size, -1, attn.heads, head_dim).transpose(1, 2)
        if attn.norm_added_q is not None:
            encoder_hidden_states_query_proj = attn.norm_added_q(encoder_hidden_states_query_proj)
        if attn.norm_added_k is not None:
            encoder_hidden_states_key_proj = attn.norm_added_k(encoder_hidden_states_key_proj)
        query = torch.cat([query, encoder_hidden_states_query_proj], dim=2)
        key = torch.cat([key, encoder_hidden_states_key_proj], dim=2)
        value = torch.cat([value, encoder_hidden_states_value_proj], dim=2)
    hidden_states = sdpa(query, key, value)
    hidden_states = hidden_states.transpose(1, 2).reshape(batch_size, -1, attn.heads * head_dim)
    hidden_states = hidden_states.to(query.dtype)
    if encoder_hidden_states is not None:
        # Split the attention outputs.
        hidden_states, encoder_hidden_states = (
            hidden_states[:, : residual.shape[1]],
            hidden_states[:, residual.shape[1]:],
        )
        if not attn.context_pre_only:
            encoder_hidden_states = attn.to_add_out(encoder_hidden_states)
    # linear proj
    hidden_states = attn.to_out[0](hidden_states)
    # dropout
    hidden_states = attn.to_out[1](hidden_states)
    if encoder_hidden_states is not None:
        return hidden_states, encoder_hidden_states
    else:
        return hidden_states


class Attention(nn.Module):
    """attention_processor.Attention(query_dim, cross_attention_dim None, added_kv_proj_dim, dim_head, heads,
    out_dim, context_pre_only, bias True, qk_norm "rms_norm", eps) with JointAttnProcessor2_0's __call__ as its
    forward."""

    def __init__(self, query_dim, cross_attention_dim=None, heads=8, dim_head=64, dropout=0.0, bias=False,
                 qk_norm=None, added_kv_proj_dim=None, added_proj_bias=True, out_bias=True, eps=1e-5,
                 processor=None, out_dim=None, context_pre_only=None):
        super().__init__()
        self.inner_dim = out_dim if out_dim is not None else dim_head * heads
        self.query_dim = query_dim
        self.use_bias = bias
        self.is_cross_attention = cross_attention_dim is not None
        self.cross_attention_dim = cross_attention_dim if cross_attention_dim is not None else query_dim
        self.rescale_output_factor = 1.0
        self.out_dim = out_dim if out_dim is not None else query_dim
        self.context_pre_only = context_pre_only
        self.scale = dim_head ** -0.5
        self.heads = out_dim // dim_head if out_dim is not None else heads
        self.added_kv_proj_dim = added_kv_proj_dim
        assert qk_norm == "rms_norm"
        self.norm_q = RMSNorm(dim_head, eps=eps)
        self.norm_k = RMSNorm(dim_head, eps=eps)
        self.norm_cross = None
        self.to_q = nn.Linear(query_dim, self.inner_dim, bias=bias)
        self.to_k = nn.Linear(self.cross_attention_dim, self.inner_dim, bias=bias)
        self.to_v = nn.Linear(self.cross_attention_dim, self.inner_dim, bias=bias)
        if self.added_kv_proj_dim is not None:
            self.add_k_proj = nn.Linear(added_kv_proj_dim, self.inner_dim, bias=added_proj_bias)
            self.add_v_proj = nn.Linear(added_kv_proj_dim, self.inner_dim, bias=added_proj_bias)
            if self.context_pre_only is not None:
                self.add_q_proj = nn.Linear(added_kv_proj_dim, self.inner_dim, bias=added_proj_bias)
        self.to_out = nn.ModuleList([nn.Linear(self.inner_dim, self.out_dim, bias=out_bias), nn.Dropout(dropout)])
        if self.context_pre_only is not None and not self.context_pre_only:
            self.to_add_out = nn.Linear(self.inner_dim, self.out_dim, bias=out_bias)
        if qk_norm is not None and added_kv_proj_dim is not None:
            self.norm_added_q = RMSNorm(dim_head, eps=eps)
            self.norm_added_k = RMSNorm(dim_head, eps=eps)
        else:
            self.norm_added_q = None
            self.norm_added_k = None
        self.processor = processor

    def forward(self, hidden_states, encoder_hidden_states=None, attention_mask=None, **kwargs):
        return self.processor(self, hidden_states, encoder_hidden_states=encoder_hidden_states,
                              attention_mask=attention_mask, **kwargs)


class JointTransformerBlock(nn.Module):
    def __init__(self, dim, num_attention_heads, attention_head_dim, context_pre_only=False, qk_norm=None,
                 use_dual_attention=False):
        super().__init__()
        self.use_dual_attention = use_dual_attention
        self.context_pre_only = context_pre_only
        context_norm_type = "ada_norm_continous" if context_pre_only else "ada_norm_zero"
        if use_dual_attention:
            self.norm1 = SD35AdaLayerNormZeroX(dim)
        else:
            self.norm1 = AdaLayerNormZero(dim)
        if context_norm_type == "ada_norm_continous":
            self.norm1_context = AdaLayerNormContinuous(dim, dim, elementwise_affine=False, eps=1e-6, bias=True)
        else:
            self.norm1_context = AdaLayerNormZero(dim)
        self.attn = Attention(query_dim=dim, cross_attention_dim=None, added_kv_proj_dim=dim,
                              dim_head=attention_head_dim, heads=num_attention_heads, out_dim=dim,
                              context_pre_only=context_pre_only, bias=True, processor=joint_attn, qk_norm=qk_norm,
                              eps=1e-6)
        if use_dual_attention:
            self.attn2 = Attention(query_dim=dim, cross_attention_dim=None, dim_head=attention_head_dim,
                                   heads=num_attention_heads, out_dim=dim, bias=True, processor=joint_attn,
                                   qk_norm=qk_norm, eps=1e-6)
        else:
            self.attn2 = None
        self.norm2 = nn.LayerNorm(dim, elementwise_affine=False, eps=1e-6)
        self.ff = FeedForward(dim)  # dim_out=dim, activation_fn="gelu-approximate"
        if not context_pre_only:
            self.norm2_context = nn.LayerNorm(dim, elementwise_affine=False, eps=1e-6)
            self.ff_context = FeedForward(dim)
        else:
            self.norm2_context = None
            self.ff_context = None

    def forward(self, hidden_states, encoder_hidden_states, temb, joint_attention_kwargs=None):
        joint_attention_kwargs = joint_attention_kwargs or {}
        if self.use_dual_attention:
            (norm_hidden_states, gate_msa, shift_mlp, scale_mlp, gate_mlp, norm_hidden_states2,
             gate_msa2) = self.norm1(hidden_states, emb=temb)
        else:
            norm_hidden_states, gate_msa, shift_mlp, scale_mlp, gate_mlp = self.norm1(hidden_states, emb=temb)
        if self.context_pre_only:
            norm_encoder_hidden_states = self.norm1_context(encoder_hidden_states, temb)
        else:
            norm_encoder_hidden_states, c_gate_msa, c_shift_mlp, c_scale_mlp, c_gate_mlp = self.norm1_context(
                encoder_hidden_states, emb=temb)
        # Attention.
        attn_output, context_attn_output = self.attn(hidden_states=norm_hidden_states,
                                                     encoder_hidden_states=norm_encoder_hidden_states,
                                                     **joint_attention_kwargs)
        # Process attention outputs for the `hidden_states`.
        attn_output = gate_msa.unsqueeze(1) * attn_output
        hidden_states = hidden_states + attn_output
        if self.use_dual_attention:
            attn_output2 = self.attn2(hidden_states=norm_hidden_states2, **joint_attention_kwargs)
            attn_output2 = gate_msa2.unsqueeze(1) * attn_output2
            hidden_states = hidden_states + attn_output2
        norm_hidden_states = self.norm2(hidden_states)
        norm_hidden_states = norm_hidden_states * (1 + scale_mlp[:, None]) + shift_mlp[:, None]
        ff_output = self.ff(norm_hidden_states)
        ff_output = gate_mlp.unsqueeze(1) * ff_output
        hidden_states = hidden_states + ff_output
        # Process attention outputs for the `encoder_hidden_states`.
        if self.context_pre_only:
            encoder_hidden_states = None
        else:
            context_attn_output = c_gate_msa.unsqueeze(1) * context_attn_output
            encoder_hidden_states = encoder_hidden_states + context_attn_output
            norm_encoder_hidden_states = self.norm2_context(encoder_hidden_states)
            norm_encoder_hidden_states = norm_encoder_hidden_states * (1 + c_scale_mlp[:, None]) + c_shift_mlp[:, None]
            context_ff_output = self.ff_context(norm_encoder_hidden_states)
            encoder_hidden_states = encoder_hidden_states + c_gate_mlp.unsqueeze(1) * context_ff_output
        return encoder_hidden_states, hidden_states


class SD3Transformer2DModel(nn.Module):
    def __init__(self, sample_size=128, patch_size=2, in_channels=16, num_layers=18, attention_head_dim=64,
                 num_attention_heads=18, joint_attention_dim=4096, caption_projection_dim=1152,
                 pooled_projection_dim=2048, out_channels=16, pos_embed_max_size=96, dual_attention_layers=(),
                 qk_norm=None):
        super().__init__()
        self.patch_size = patch_size
        self.out_channels = out_channels if out_channels is not None else in_channels
        self.inner_dim = num_attention_heads * attention_head_dim
        self.pos_embed = PatchEmbed(height=sample_size, width=sample_size, patch_size=patch_size,
                                    in_channels=in_channels, embed_dim=self.inner_dim,
                                    pos_embed_max_size=pos_embed_max_size)  # hard-code for now.
        self.time_text_embed = CombinedTimestepTextProjEmbeddings(embedding_dim=self.inner_dim,
                                                                  pooled_projection_dim=pooled_projection_dim)
        self.context_embedder = nn.Linear(joint_attention_dim, caption_projection_dim)
        self.transformer_blocks = nn.ModuleList([
            JointTransformerBlock(dim=self.inner_dim, num_attention_heads=num_attention_heads,
                                  attention_head_dim=attention_head_dim, context_pre_only=i == num_layers - 1,
                                  qk_norm=qk_norm, use_dual_attention=True if i in dual_attention_layers else False)
            for i in range(num_layers)])
        self.norm_out = AdaLayerNormContinuous(self.inner_dim, self.inner_dim, elementwise_affine=False, eps=1e-6)
        self.proj_out = nn.Linear(self.inner_dim, patch_size * patch_size * self.out_channels, bias=True)

    def forward(self, hidden_states, encoder_hidden_states=None, pooled_projections=None, timestep=None,
                block_controlnet_hidden_states=None, joint_attention_kwargs=None, return_dict=True,
                skip_layers=None):
        height, width = hidden_states.shape[-2:]
        hidden_states = self.pos_embed(hidden_states)  # takes care of adding positional embeddings too.
        temb = self.time_text_embed(timestep, pooled_projections)
        encoder_hidden_states = self.context_embedder(encoder_hidden_states)
        for index_block, block in enumerate(self.transformer_blocks):
            # Skip specified layers
            is_skip = True if skip_layers is not None and index_block in skip_layers else False
            if not is_skip:
                encoder_hidden_states, hidden_states = block(hidden_states=hidden_states,
                                                             encoder_hidden_states=encoder_hidden_states, temb=temb,
                                                             joint_attention_kwargs=joint_attention_kwargs)
        hidden_states = self.norm_out(hidden_states, temb)
        hidden_states = self.proj_out(hidden_states)
        # unpatchify
        patch_size = self.patch_size
        height = height // patch_size
        width = width // patch_size
        hidden_states = hidden_states.reshape(
            shape=(hidden_states.shape[0], height, width, patch_size, patch_size, self.out_channels))
        hidden_states = torch.einsum("nhwpqc->nchpwq", hidden_states)
        output = hidden_states.reshape(
            shape=(hidden_states.shape[0], self.out_channels, height * patch_size, width * patch_size))
        return (output,)


def build():
    # SD3.5-medium's shape, small: 2 heads of 32 (d 64), 3 blocks of which the first two are dual-attention
    # (medium: 0-12 of 24) and the last context_pre_only (not dual), qk_norm rms_norm, patch 2, 4 latent channels,
    # sample_size 8 (base grid 4) and a 6×6 position table cropped to the 4×4 grid, a 24-wide T5/CLIP context,
    # 16-wide pooled text.
    return SD3Transformer2DModel(sample_size=8, patch_size=2, in_channels=4, num_layers=3, attention_head_dim=32,
                                 num_attention_heads=2, joint_attention_dim=24, caption_projection_dim=64,
                                 pooled_projection_dim=16, out_channels=4, pos_embed_max_size=6,
                                 dual_attention_layers=(0, 1), qk_norm="rms_norm")


def inputs(g):
    return {"encoder_hidden_states": torch.randn((1, 5, 24), generator=g),
            "pooled_projections": torch.randn((1, 16), generator=g),
            "noise": torch.randn((1, 4, 8, 8), generator=g)}


def call(model, x, sigma, c):
    t = torch.tensor([sigma * 1000.0], dtype=torch.float32).expand(x.shape[0])
    return model(hidden_states=x, timestep=t, encoder_hidden_states=c["encoder_hidden_states"],
                 pooled_projections=c["pooled_projections"], return_dict=False)[0]


PRODUCER = dict(
    library_source="replica of huggingface/diffusers transformer_sd3.py (SD3.5 dual attention) and the parts it "
                   "imports (torch 1.13)",
    timestep="sigma*1000 float32 as is (the flow scheduler's t, no shift)",
    velocity="model output as is (flow velocity), not negated",
    note="SD3.5-medium MMDiT, 3 blocks: temb = timestep MLP + pooled-text SiLU MLP; joint attention (image rows "
         "first, context rows after, RMSNorm q/k per head in both streams, split and separate out projections); "
         "blocks 0-1 dual: SD35AdaLayerNormZeroX (9 chunks; one LayerNorm modulated twice) and an image-only attn2 "
         "gated by its own chunk, added after the joint attention; last block context_pre_only (context via "
         "AdaLayerNormContinuous, no context output/FFN), not dual; adaLN-Zero gates; gelu-tanh FFNs; patch-2 "
         "conv + cropped 2-D sin-cos table (6x6 max grid, centre 4x4); final AdaLayerNormContinuous; einsum "
         "unpatchify")

if __name__ == "__main__":
    capture("sd35", build, inputs, call, sys.argv[1], PRODUCER)
