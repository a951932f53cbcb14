"""Latte (latent video DiT factorised in space and time), reimplemented for torch 1.13 (no diffusers here), captured
small in f32 on CPU.

Follows huggingface/diffusers src/diffusers/models/transformers/latte_transformer_3d.py at
821f969f77cc06f62a22585a386a9d11b7f13858 (LatteTransformer3DModel) with the parts it imports: attention.py
(BasicTransformerBlock with norm_type "ada_norm_single", FeedForward "gelu-approximate"), attention_processor.py
(Attention: biased to_q/to_k/to_v/to_out, no q/k norm; AttnProcessor2_0's __call__ as its forward), activations.py
(GELU), embeddings.py (PatchEmbed with its 2-D sincos table, get_2d_sincos_pos_embed / get_1d_sincos_pos_embed_from_grid
output_type "pt", Timesteps, TimestepEmbedding, PixArtAlphaCombinedTimestepSizeEmbeddings without additional
conditions, PixArtAlphaTextProjection gelu_tanh) and normalization.py (AdaLayerNormSingle): the same module tree,
parameter names and shapes, and call boundaries; the arithmetic line for line. Stand-in for what torch 1.13 lacks:
F.scaled_dot_product_attention (its math path, default scale, no mask).

One deviation, for the bf16 run only: temp_pos_embed is registered persistent here (upstream: persistent=False).
diffusers' from_pretrained(torch_dtype=bf16) ends with model.to(bf16) for a model with no _keep_in_fp32_modules, which
casts that buffer too; weights.place casts persistent buffers only, and an f32 table would promote the stream to
f32 at the first temporal block and make its bf16 Linear raise. (The PatchEmbed table keeps upstream's
non-persistent registration: its sum is cast back to the stream's dtype.) The f32 run is unaffected.

The constructs it shows: video latents [B, C, F, H, W] folded to (B F) frames for a per-frame 2x2 conv patch embed
plus a 2-D sincos table; one AdaLayerNormSingle (Timesteps(256) -> Linear-SiLU-Linear = embedded_timestep, then
SiLU -> Linear(6d)) shared by all blocks, its 6d output repeat_interleaved per frame (spatial) and per patch
(temporal); each layer = a spatial BasicTransformerBlock over one frame's 16 patches (scale_shift_table[None] +
t.reshape(B', 6, d) chunked into shift/scale/gate msa and mlp; non-affine LayerNorm(x)·(1 + scale) + shift;
gated self-attention; cross-attention to the projected caption (repeat_interleaved per frame) with NO norm before
it; norm2 re-used for the FFN input, modulated by the mlp shift/scale; gated GELU-tanh FFN) then a temporal
BasicTransformerBlock (the same, without cross-attention) over each patch's 3 frames, the rows rearranged
(b f) t d -> (b t) f d before and back after; a fixed 1-D sincos frame embedding added before the first temporal
block only; the caption projected by PixArtAlphaTextProjection (Linear-GELU tanh-Linear); final
scale_shift_table[None] + embedded_timestep (per frame) -> (shift, scale) over a non-affine LayerNorm, Linear,
einsum unpatchify, frames unfolded back to [B, 2C, F, H, W]; learned sigma (8 channels out of 4 in).

Pipeline as LattePipeline (pipeline_latte.py) calls it with guidance off: current_timestep = the scheduler's
integer t (round(sigma·1000), int64) expanded to the batch; encoder_hidden_states = the T5 caption [1, 5, 24], no
mask; enable_temporal_attentions True; learned sigma dropped with noise_pred.chunk(2, dim=1)[0]; velocity that
half as is.

usage: /usr/bin/python3 bench/unseen/replicas/latte.py OUTDIR
"""
import sys

import torch
import torch.nn as nn

from parts import FeedForward, PixArtAlphaTextProjection, TimestepEmbedding, Timesteps
from run import capture, sdpa


def get_2d_sincos_pos_embed(embed_dim, grid_size, cls_token=False, extra_tokens=0, interpolation_scale=1.0,
                            base_size=16, device=None, output_type="pt"):
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


def get_2d_sincos_pos_embed_from_grid(embed_dim, grid, output_type="pt"):
    if embed_dim % 2 != 0:
        raise ValueError("embed_dim must be divisible by 2")
    emb_h = get_1d_sincos_pos_embed_from_grid(embed_dim // 2, grid[0], output_type=output_type)  # (H*W, D/2)
    emb_w = get_1d_sincos_pos_embed_from_grid(embed_dim // 2, grid[1], output_type=output_type)  # (H*W, D/2)
    emb = torch.concat([emb_h, emb_w], dim=1)  # (H*W, D)
    return emb


def get_1d_sincos_pos_embed_from_grid(embed_dim, pos, output_type="pt", flip_sin_to_cos=False, dtype=None):
    if embed_dim % 2 != 0:
        raise ValueError("embed_dim must be divisible by 2")
    if dtype is None:
        dtype = torch.float32 if pos.device.type == "mps" else torch.float64
    omega = torch.arange(embed_dim // 2, device=pos.device, dtype=dtype)
    omega /= embed_dim / 2.0
    omega = 1.0 / 10000 ** omega  # (D/2,)
    pos = pos.reshape(-1)  # (M,)
    out = torch.outer(pos, omega)  # (M, D/2), outer product
    emb_sin = torch.sin(out)  # (M, D/2)
    emb_cos = torch.cos(out)  # (M, D/2)
    emb = torch.concat([emb_sin, emb_cos], dim=1)  # (M, D)
    if flip_sin_to_cos:
        emb = torch.cat([emb[:, embed_dim // 2:], emb[:, : embed_dim // 2]], dim=1)
    return emb


class PatchEmbed(nn.Module):
    """2D Image to Patch Embedding (pos_embed_type "sincos", no layer norm, no pos_embed_max_size)."""

    def __init__(self, height=224, width=224, patch_size=16, in_channels=3, embed_dim=768, layer_norm=False,
                 flatten=True, bias=True, interpolation_scale=1, pos_embed_type="sincos", pos_embed_max_size=None):
        super().__init__()
        num_patches = (height // patch_size) * (width // patch_size)
        self.flatten = flatten
        self.layer_norm = layer_norm
        self.pos_embed_max_size = pos_embed_max_size
        assert not layer_norm and pos_embed_max_size is None and pos_embed_type == "sincos"
        self.proj = nn.Conv2d(in_channels, embed_dim, kernel_size=(patch_size, patch_size), stride=patch_size,
                              bias=bias)
        self.norm = None
        self.patch_size = patch_size
        self.height, self.width = height // patch_size, width // patch_size
        self.base_size = height // patch_size
        self.interpolation_scale = interpolation_scale
        grid_size = int(num_patches ** 0.5)
        pos_embed = get_2d_sincos_pos_embed(embed_dim, grid_size, base_size=self.base_size,
                                            interpolation_scale=self.interpolation_scale, output_type="pt")
        persistent = True if pos_embed_max_size else False
        self.register_buffer("pos_embed", pos_embed.float().unsqueeze(0), persistent=persistent)

    def forward(self, latent):
        height, width = latent.shape[-2] // self.patch_size, latent.shape[-1] // self.patch_size
        latent = self.proj(latent)
        if self.flatten:
            latent = latent.flatten(2).transpose(1, 2)  # BCHW -> BNC
        if self.height != height or self.width != width:
            raise NotImplementedError("the table is used at its own size in this replica")
        pos_embed = self.pos_embed
        return (latent + pos_embed).to(latent.dtype)


class PixArtAlphaCombinedTimestepSizeEmbeddings(nn.Module):
    def __init__(self, embedding_dim, size_emb_dim, use_additional_conditions=False):
        super().__init__()
        self.outdim = size_emb_dim
        self.time_proj = Timesteps(num_channels=256, flip_sin_to_cos=True, downscale_freq_shift=0)
        self.timestep_embedder = TimestepEmbedding(in_channels=256, time_embed_dim=embedding_dim)
        self.use_additional_conditions = use_additional_conditions
        assert not use_additional_conditions

    def forward(self, timestep, resolution, aspect_ratio, batch_size, hidden_dtype):
        timesteps_proj = self.time_proj(timestep)
        timesteps_emb = self.timestep_embedder(timesteps_proj.to(dtype=hidden_dtype))  # (N, D)
        conditioning = timesteps_emb
        return conditioning


class AdaLayerNormSingle(nn.Module):
    def __init__(self, embedding_dim, use_additional_conditions=False):
        super().__init__()
        self.emb = PixArtAlphaCombinedTimestepSizeEmbeddings(embedding_dim, size_emb_dim=embedding_dim // 3,
                                                             use_additional_conditions=use_additional_conditions)
        self.silu = nn.SiLU()
        self.linear = nn.Linear(embedding_dim, 6 * embedding_dim, bias=True)

    def forward(self, timestep, added_cond_kwargs=None, batch_size=None, hidden_dtype=None):
        # No modulation happening here.
        added_cond_kwargs = added_cond_kwargs or {"resolution": None, "aspect_ratio": None}
        embedded_timestep = self.emb(timestep, **added_cond_kwargs, batch_size=batch_size, hidden_dtype=hidden_dtype)
        return self.linear(self.silu(embedded_timestep)), embedded_timestep


class Attention(nn.Module):
    """attention_processor.Attention as BasicTransformerBlock builds it (no group/spatial/cross/qk norm, no added
    kv), with AttnProcessor2_0's __call__ as its forward."""

    def __init__(self, query_dim, cross_attention_dim=None, heads=8, dim_head=64, dropout=0.0, bias=False,
                 upcast_attention=False, out_bias=True, rescale_output_factor=1.0, residual_connection=False):
        super().__init__()
        self.inner_dim = dim_head * heads
        self.inner_kv_dim = self.inner_dim
        self.query_dim = query_dim
        self.is_cross_attention = cross_attention_dim is not None
        self.cross_attention_dim = cross_attention_dim if cross_attention_dim is not None else query_dim
        self.upcast_attention = upcast_attention
        self.rescale_output_factor = rescale_output_factor
        self.residual_connection = residual_connection
        self.scale = dim_head ** -0.5
        self.heads = heads
        self.group_norm = None
        self.spatial_norm = None
        self.norm_q = None
        self.norm_k = None
        self.norm_cross = None
        self.to_q = nn.Linear(query_dim, self.inner_dim, bias=bias)
        self.to_k = nn.Linear(self.cross_attention_dim, self.inner_kv_dim, bias=bias)
        self.to_v = nn.Linear(self.cross_attention_dim, self.inner_kv_dim, bias=bias)
        self.to_out = nn.ModuleList([nn.Linear(self.inner_dim, query_dim, bias=out_bias), nn.Dropout(dropout)])

    def forward(self, hidden_states, encoder_hidden_states=None, attention_mask=None, temb=None):
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


class BasicTransformerBlock(nn.Module):
    """attention.BasicTransformerBlock, the norm_type "ada_norm_single" path (PixArt / Latte), with or without a
    cross-attention."""

    def __init__(self, dim, num_attention_heads, attention_head_dim, dropout=0.0, cross_attention_dim=None,
                 activation_fn="geglu", num_embeds_ada_norm=None, attention_bias=False, only_cross_attention=False,
                 double_self_attention=False, upcast_attention=False, norm_elementwise_affine=True,
                 norm_type="layer_norm", norm_eps=1e-5, final_dropout=False, ff_bias=True, attention_out_bias=True):
        super().__init__()
        assert norm_type == "ada_norm_single" and not double_self_attention and not only_cross_attention
        assert activation_fn == "gelu-approximate" and not final_dropout
        self.dim = dim
        self.only_cross_attention = only_cross_attention
        self.norm_type = norm_type
        self.num_embeds_ada_norm = num_embeds_ada_norm
        self.pos_embed = None
        # 1. Self-Attn
        self.norm1 = nn.LayerNorm(dim, elementwise_affine=norm_elementwise_affine, eps=norm_eps)
        self.attn1 = Attention(query_dim=dim, heads=num_attention_heads, dim_head=attention_head_dim,
                               dropout=dropout, bias=attention_bias,
                               cross_attention_dim=cross_attention_dim if only_cross_attention else None,
                               upcast_attention=upcast_attention, out_bias=attention_out_bias)
        # 2. Cross-Attn
        if cross_attention_dim is not None or double_self_attention:
            self.norm2 = nn.LayerNorm(dim, norm_eps, norm_elementwise_affine)
            self.attn2 = Attention(query_dim=dim,
                                   cross_attention_dim=cross_attention_dim if not double_self_attention else None,
                                   heads=num_attention_heads, dim_head=attention_head_dim, dropout=dropout,
                                   bias=attention_bias, upcast_attention=upcast_attention,
                                   out_bias=attention_out_bias)  # is self-attn if encoder_hidden_states is none
        else:
            # For Latte
            self.norm2 = nn.LayerNorm(dim, norm_eps, norm_elementwise_affine)
            self.attn2 = None
        # 3. Feed-forward: ada_norm_single has no norm3
        self.ff = FeedForward(dim, mult=4, dropout=dropout, bias=ff_bias)
        # 5. Scale-shift for PixArt-Alpha.
        self.scale_shift_table = nn.Parameter(torch.randn(6, dim) / dim ** 0.5)
        self._chunk_size = None
        self._chunk_dim = 0

    def forward(self, hidden_states, attention_mask=None, encoder_hidden_states=None, encoder_attention_mask=None,
                timestep=None, cross_attention_kwargs=None, class_labels=None, added_cond_kwargs=None):
        # 0. Self-Attention
        batch_size = hidden_states.shape[0]
        shift_msa, scale_msa, gate_msa, shift_mlp, scale_mlp, gate_mlp = (
            self.scale_shift_table[None] + timestep.reshape(batch_size, 6, -1)
        ).chunk(6, dim=1)
        norm_hidden_states = self.norm1(hidden_states)
        norm_hidden_states = norm_hidden_states * (1 + scale_msa) + shift_msa
        norm_hidden_states = norm_hidden_states.squeeze(1)
        # 1. Prepare GLIGEN inputs
        cross_attention_kwargs = cross_attention_kwargs.copy() if cross_attention_kwargs is not None else {}
        attn_output = self.attn1(norm_hidden_states,
                                 encoder_hidden_states=encoder_hidden_states if self.only_cross_attention else None,
                                 attention_mask=attention_mask, **cross_attention_kwargs)
        attn_output = gate_msa * attn_output
        hidden_states = attn_output + hidden_states
        if hidden_states.ndim == 4:
            hidden_states = hidden_states.squeeze(1)
        # 3. Cross-Attention
        if self.attn2 is not None:
            # For PixArt norm2 isn't applied here
            norm_hidden_states = hidden_states
            attn_output = self.attn2(norm_hidden_states, encoder_hidden_states=encoder_hidden_states,
                                     attention_mask=encoder_attention_mask, **cross_attention_kwargs)
            hidden_states = attn_output + hidden_states
        # 4. Feed-forward
        norm_hidden_states = self.norm2(hidden_states)
        norm_hidden_states = norm_hidden_states * (1 + scale_mlp) + shift_mlp
        ff_output = self.ff(norm_hidden_states)
        ff_output = gate_mlp * ff_output
        hidden_states = ff_output + hidden_states
        if hidden_states.ndim == 4:
            hidden_states = hidden_states.squeeze(1)
        return hidden_states


class LatteTransformer3DModel(nn.Module):
    def __init__(self, num_attention_heads=16, attention_head_dim=88, in_channels=None, out_channels=None,
                 num_layers=1, dropout=0.0, cross_attention_dim=None, attention_bias=False, sample_size=64,
                 patch_size=None, activation_fn="geglu", num_embeds_ada_norm=None, norm_type="layer_norm",
                 norm_elementwise_affine=True, norm_eps=1e-5, caption_channels=None, video_length=16):
        super().__init__()
        self.patch_size = patch_size
        inner_dim = num_attention_heads * attention_head_dim
        # 1. Define input layers
        self.height = sample_size
        self.width = sample_size
        interpolation_scale = sample_size // 64
        interpolation_scale = max(interpolation_scale, 1)
        self.pos_embed = PatchEmbed(height=sample_size, width=sample_size, patch_size=patch_size,
                                    in_channels=in_channels, embed_dim=inner_dim,
                                    interpolation_scale=interpolation_scale)
        # 2. Define spatial transformers blocks
        self.transformer_blocks = nn.ModuleList([
            BasicTransformerBlock(inner_dim, num_attention_heads, attention_head_dim, dropout=dropout,
                                  cross_attention_dim=cross_attention_dim, activation_fn=activation_fn,
                                  num_embeds_ada_norm=num_embeds_ada_norm, attention_bias=attention_bias,
                                  norm_type=norm_type, norm_elementwise_affine=norm_elementwise_affine,
                                  norm_eps=norm_eps)
            for d in range(num_layers)])
        # 3. Define temporal transformers blocks
        self.temporal_transformer_blocks = nn.ModuleList([
            BasicTransformerBlock(inner_dim, num_attention_heads, attention_head_dim, dropout=dropout,
                                  cross_attention_dim=None, activation_fn=activation_fn,
                                  num_embeds_ada_norm=num_embeds_ada_norm, attention_bias=attention_bias,
                                  norm_type=norm_type, norm_elementwise_affine=norm_elementwise_affine,
                                  norm_eps=norm_eps)
            for d in range(num_layers)])
        # 4. Define output layers
        self.out_channels = in_channels if out_channels is None else out_channels
        self.norm_out = nn.LayerNorm(inner_dim, elementwise_affine=False, eps=1e-6)
        self.scale_shift_table = nn.Parameter(torch.randn(2, inner_dim) / inner_dim ** 0.5)
        self.proj_out = nn.Linear(inner_dim, patch_size * patch_size * self.out_channels)
        # 5. Latte other blocks.
        self.adaln_single = AdaLayerNormSingle(inner_dim, use_additional_conditions=False)
        self.caption_projection = PixArtAlphaTextProjection(in_features=caption_channels, hidden_size=inner_dim)
        # define temporal positional embedding
        temp_pos_embed = get_1d_sincos_pos_embed_from_grid(
            inner_dim, torch.arange(0, video_length).unsqueeze(1), output_type="pt")  # 1152 hidden size
        # upstream: persistent=False (see the module docstring)
        self.register_buffer("temp_pos_embed", temp_pos_embed.float().unsqueeze(0), persistent=True)
        self.gradient_checkpointing = False

    def forward(self, hidden_states, timestep=None, encoder_hidden_states=None, encoder_attention_mask=None,
                enable_temporal_attentions=True, return_dict=True):
        # Reshape hidden states
        batch_size, channels, num_frame, height, width = hidden_states.shape
        # batch_size channels num_frame height width -> (batch_size * num_frame) channels height width
        hidden_states = hidden_states.permute(0, 2, 1, 3, 4).reshape(-1, channels, height, width)
        # Input
        height, width = (hidden_states.shape[-2] // self.patch_size, hidden_states.shape[-1] // self.patch_size)
        num_patches = height * width
        hidden_states = self.pos_embed(hidden_states)  # alrady add positional embeddings
        added_cond_kwargs = {"resolution": None, "aspect_ratio": None}
        timestep, embedded_timestep = self.adaln_single(timestep, added_cond_kwargs=added_cond_kwargs,
                                                        batch_size=batch_size, hidden_dtype=hidden_states.dtype)
        # Prepare text embeddings for spatial block
        # batch_size num_tokens hidden_size -> (batch_size * num_frame) num_tokens hidden_size
        encoder_hidden_states = self.caption_projection(encoder_hidden_states)  # 3 120 1152
        encoder_hidden_states_spatial = encoder_hidden_states.repeat_interleave(num_frame, dim=0).view(
            -1, encoder_hidden_states.shape[-2], encoder_hidden_states.shape[-1])
        # Prepare timesteps for spatial and temporal block
        timestep_spatial = timestep.repeat_interleave(num_frame, dim=0).view(-1, timestep.shape[-1])
        timestep_temp = timestep.repeat_interleave(num_patches, dim=0).view(-1, timestep.shape[-1])
        # Spatial and temporal transformer blocks
        for i, (spatial_block, temp_block) in enumerate(zip(self.transformer_blocks,
                                                            self.temporal_transformer_blocks)):
            hidden_states = spatial_block(hidden_states, None, encoder_hidden_states_spatial, encoder_attention_mask,
                                          timestep_spatial, None, None)
            if enable_temporal_attentions:
                # (batch_size * num_frame) num_tokens hidden_size -> (batch_size * num_tokens) num_frame hidden_size
                hidden_states = hidden_states.reshape(
                    batch_size, -1, hidden_states.shape[-2], hidden_states.shape[-1]).permute(0, 2, 1, 3)
                hidden_states = hidden_states.reshape(-1, hidden_states.shape[-2], hidden_states.shape[-1])
                if i == 0 and num_frame > 1:
                    hidden_states = hidden_states + self.temp_pos_embed
                hidden_states = temp_block(hidden_states, None, None, None, timestep_temp, None, None)
                # (batch_size * num_tokens) num_frame hidden_size -> (batch_size * num_frame) num_tokens hidden_size
                hidden_states = hidden_states.reshape(
                    batch_size, -1, hidden_states.shape[-2], hidden_states.shape[-1]).permute(0, 2, 1, 3)
                hidden_states = hidden_states.reshape(-1, hidden_states.shape[-2], hidden_states.shape[-1])
        embedded_timestep = embedded_timestep.repeat_interleave(num_frame, dim=0).view(-1, embedded_timestep.shape[-1])
        shift, scale = (self.scale_shift_table[None] + embedded_timestep[:, None]).chunk(2, dim=1)
        hidden_states = self.norm_out(hidden_states)
        # Modulation
        hidden_states = hidden_states * (1 + scale) + shift
        hidden_states = self.proj_out(hidden_states)
        # unpatchify
        if self.adaln_single is None:
            height = width = int(hidden_states.shape[1] ** 0.5)
        hidden_states = hidden_states.reshape(
            shape=(-1, height, width, self.patch_size, self.patch_size, self.out_channels))
        hidden_states = torch.einsum("nhwpqc->nchpwq", hidden_states)
        output = hidden_states.reshape(
            shape=(-1, self.out_channels, height * self.patch_size, width * self.patch_size))
        output = output.reshape(batch_size, -1, output.shape[-3], output.shape[-2], output.shape[-1]).permute(
            0, 2, 1, 3, 4)
        return (output,)


def build():
    # Latte-1 config scaled down: 2 heads of 16 (hidden 32), 2 layers (spatial + temporal each), ada_norm_single,
    # GELU-tanh, biased attention, non-affine LayerNorms eps 1e-6, caption 24 wide, 3 frames, 8x8 latent, patch 2,
    # 4 channels in, 8 out (learned sigma).
    return LatteTransformer3DModel(num_attention_heads=2, attention_head_dim=16, in_channels=4, out_channels=8,
                                   num_layers=2, cross_attention_dim=32, attention_bias=True, sample_size=8,
                                   patch_size=2, activation_fn="gelu-approximate", num_embeds_ada_norm=1000,
                                   norm_type="ada_norm_single", norm_elementwise_affine=False, norm_eps=1e-6,
                                   caption_channels=24, video_length=3)


def inputs(g):
    return {"encoder_hidden_states": torch.randn((1, 5, 24), generator=g),
            "noise": torch.randn((1, 4, 3, 8, 8), generator=g)}


def call(model, x, sigma, c):
    # LattePipeline: current_timestep = t expanded to the batch (the scheduler's int64 timesteps).
    t = torch.tensor([int(round(sigma * 1000))], dtype=torch.int64).expand(x.shape[0])
    noise_pred = model(x, encoder_hidden_states=c["encoder_hidden_states"], timestep=t,
                       enable_temporal_attentions=True, return_dict=False)[0]
    noise_pred = noise_pred.chunk(2, dim=1)[0]
    return noise_pred


PRODUCER = dict(
    library_source="replica of huggingface/diffusers latte_transformer_3d.py@821f969f77cc and the parts it imports "
                   "(torch 1.13)",
    timestep="round(sigma*1000) int64 (LattePipeline: the scheduler's timesteps expanded to the batch)",
    velocity="first half of the output channels (learned sigma: noise_pred.chunk(2, dim=1)[0]), not negated",
    note="Latte video DiT, 2 layers of spatial + temporal BasicTransformerBlocks (ada_norm_single: one shared "
         "AdaLayerNormSingle 6d t-embedding repeat_interleaved per frame / per patch + per-block "
         "scale_shift_table; gated residuals; non-affine LayerNorms eps 1e-6; norm2 reused before the FFN); "
         "spatial blocks: self-attn over a frame's 16 patches + un-normed cross-attn to the caption "
         "(PixArtAlphaTextProjection, repeated per frame); temporal blocks: self-attn over each patch's 3 frames, "
         "rows (b f) t d -> (b t) f d and back; 1-D sincos frame table added before the first temporal block "
         "(registered persistent here so the bf16 run casts it as from_pretrained does); PatchEmbed 2x2 conv "
         "per frame + 2-D sincos (non-persistent f32); final scale_shift_table + embedded_timestep shift/scale "
         "over non-affine LayerNorm, Linear, einsum unpatchify, frames unfolded; out 8 = 4 + learned sigma")

if __name__ == "__main__":
    capture("latte", build, inputs, call, sys.argv[1], PRODUCER)
