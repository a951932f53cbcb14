"""DiT (class-conditional, Peebles & Xie), reimplemented for torch 1.13 (no diffusers here), captured small in f32 on
CPU.

Follows huggingface/diffusers src/diffusers/models/transformers/dit_transformer_2d.py at
11bf2cf1d149c47a210912f0b446e701b81e923d (DiTTransformer2DModel; the stored text's nn.Modulelist read as
nn.ModuleList) with the parts it imports: attention.py (BasicTransformerBlock with norm_type "ada_norm_zero",
FeedForward "gelu-approximate"), attention_processor.py (Attention: biased to_q/to_k/to_v/to_out, no q/k norm;
AttnProcessor2_0's __call__ as its forward), activations.py (GELU), embeddings.py (PatchEmbed with its 2-D sincos
table, get_2d_sincos_pos_embed / get_1d_sincos_pos_embed_from_grid output_type "pt", Timesteps, TimestepEmbedding,
LabelEmbedding, CombinedTimestepLabelEmbeddings) and normalization.py (AdaLayerNormZero): the same module tree,
parameter names and shapes, and call boundaries; the arithmetic line for line. Stand-in for what torch 1.13
lacks: F.scaled_dot_product_attention (its math path, default scale, no mask).

The constructs it shows: a conv patch embed with a fixed 2-D sincos table (float64 frequencies, cast to f32,
non-persistent buffer, so f32 in the bf16 run too) added after the conv, the sum cast back to the stream's
dtype; every block re-embeds (timestep, class label) itself: AdaLayerNormZero's own
CombinedTimestepLabelEmbeddings (Timesteps(256, flip_sin_to_cos, downscale_freq_shift=1) -> Linear-SiLU-Linear,
plus a LabelEmbedding table of num_classes + 1 rows, the extra one the CFG null class) -> SiLU -> Linear(6d)
chunked shift/scale/gate (msa) and shift/scale/gate (mlp); non-affine LayerNorm(eps 1e-6) modulated by
(1 + scale) and shift before the self-attention; gated residuals (gate · branch + x) for attention and FFN; a
non-affine LayerNorm(eps 1e-5) norm3 modulated by the mlp shift/scale before the GELU-tanh FFN; no
cross-attention; the attention output divided by rescale_output_factor 1.0; the output conditioning is block 0's
embedder called once more, then proj_out_1(SiLU(c)) -> (shift, scale) over a non-affine LayerNorm, proj_out_2,
einsum unpatchify; learned sigma (8 channels out of 4 in).

Pipeline as DiTPipeline (pipeline_dit.py) calls it with guidance off: timesteps = the scheduler's integer t
(round(sigma·1000), int64) expanded to the batch; class_labels int64 [3]; learned sigma dropped with
torch.split(noise_pred, latent_channels, dim=1)[0]; velocity that half as is.

usage: /usr/bin/python3 bench/unseen/replicas/dit.py OUTDIR
"""
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

from parts import FeedForward, TimestepEmbedding, Timesteps
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
    # use half of dimensions to encode grid_h
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


class LabelEmbedding(nn.Module):
    def __init__(self, num_classes, hidden_size, dropout_prob):
        super().__init__()
        use_cfg_embedding = dropout_prob > 0
        self.embedding_table = nn.Embedding(num_classes + use_cfg_embedding, hidden_size)
        self.num_classes = num_classes
        self.dropout_prob = dropout_prob

    def forward(self, labels, force_drop_ids=None):
        use_dropout = self.dropout_prob > 0
        if (self.training and use_dropout) or (force_drop_ids is not None):
            raise NotImplementedError("no label dropout at inference")
        embeddings = self.embedding_table(labels)
        return embeddings


class CombinedTimestepLabelEmbeddings(nn.Module):
    def __init__(self, num_classes, embedding_dim, class_dropout_prob=0.1):
        super().__init__()
        self.time_proj = Timesteps(num_channels=256, flip_sin_to_cos=True, downscale_freq_shift=1)
        self.timestep_embedder = TimestepEmbedding(in_channels=256, time_embed_dim=embedding_dim)
        self.class_embedder = LabelEmbedding(num_classes, embedding_dim, class_dropout_prob)

    def forward(self, timestep, class_labels, hidden_dtype=None):
        timesteps_proj = self.time_proj(timestep)
        timesteps_emb = self.timestep_embedder(timesteps_proj.to(dtype=hidden_dtype))  # (N, D)
        class_labels = self.class_embedder(class_labels)  # (N, D)
        conditioning = timesteps_emb + class_labels  # (N, D)
        return conditioning


class AdaLayerNormZero(nn.Module):
    def __init__(self, embedding_dim, num_embeddings=None, norm_type="layer_norm", bias=True):
        super().__init__()
        if num_embeddings is not None:
            self.emb = CombinedTimestepLabelEmbeddings(num_embeddings, embedding_dim)
        else:
            self.emb = None
        self.silu = nn.SiLU()
        self.linear = nn.Linear(embedding_dim, 6 * embedding_dim, bias=bias)
        assert norm_type == "layer_norm"
        self.norm = nn.LayerNorm(embedding_dim, elementwise_affine=False, eps=1e-6)

    def forward(self, x, timestep=None, class_labels=None, hidden_dtype=None, emb=None):
        if self.emb is not None:
            emb = self.emb(timestep, class_labels, hidden_dtype=hidden_dtype)
        emb = self.linear(self.silu(emb))
        shift_msa, scale_msa, gate_msa, shift_mlp, scale_mlp, gate_mlp = emb.chunk(6, dim=1)
        x = self.norm(x) * (1 + scale_msa[:, None]) + shift_msa[:, None]
        return x, gate_msa, shift_mlp, scale_mlp, gate_mlp


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
    """attention.BasicTransformerBlock, the norm_type "ada_norm_zero" path with no cross-attention (DiT)."""

    def __init__(self, dim, num_attention_heads, attention_head_dim, dropout=0.0, cross_attention_dim=None,
                 activation_fn="geglu", num_embeds_ada_norm=None, attention_bias=False, only_cross_attention=False,
                 double_self_attention=False, upcast_attention=False, norm_elementwise_affine=True,
                 norm_type="layer_norm", norm_eps=1e-5, final_dropout=False, ff_bias=True, attention_out_bias=True):
        super().__init__()
        assert norm_type == "ada_norm_zero" and cross_attention_dim is None and not double_self_attention
        assert activation_fn == "gelu-approximate" and not final_dropout
        self.only_cross_attention = only_cross_attention
        self.norm_type = norm_type
        self.num_embeds_ada_norm = num_embeds_ada_norm
        self.pos_embed = None
        # 1. Self-Attn
        self.norm1 = AdaLayerNormZero(dim, num_embeds_ada_norm)
        self.attn1 = Attention(query_dim=dim, heads=num_attention_heads, dim_head=attention_head_dim,
                               dropout=dropout, bias=attention_bias, cross_attention_dim=None,
                               upcast_attention=upcast_attention, out_bias=attention_out_bias)
        # 2. Cross-Attn: none
        self.norm2 = None
        self.attn2 = None
        # 3. Feed-forward
        self.norm3 = nn.LayerNorm(dim, norm_eps, norm_elementwise_affine)
        self.ff = FeedForward(dim, mult=4, dropout=dropout, bias=ff_bias)
        self._chunk_size = None
        self._chunk_dim = 0

    def forward(self, hidden_states, attention_mask=None, encoder_hidden_states=None, encoder_attention_mask=None,
                timestep=None, cross_attention_kwargs=None, class_labels=None, added_cond_kwargs=None):
        # 0. Self-Attention
        batch_size = hidden_states.shape[0]
        norm_hidden_states, gate_msa, shift_mlp, scale_mlp, gate_mlp = self.norm1(
            hidden_states, timestep, class_labels, hidden_dtype=hidden_states.dtype)
        cross_attention_kwargs = cross_attention_kwargs.copy() if cross_attention_kwargs is not None else {}
        attn_output = self.attn1(norm_hidden_states,
                                 encoder_hidden_states=encoder_hidden_states if self.only_cross_attention else None,
                                 attention_mask=attention_mask, **cross_attention_kwargs)
        attn_output = gate_msa.unsqueeze(1) * attn_output
        hidden_states = attn_output + hidden_states
        if hidden_states.ndim == 4:
            hidden_states = hidden_states.squeeze(1)
        # 4. Feed-forward
        norm_hidden_states = self.norm3(hidden_states)
        norm_hidden_states = norm_hidden_states * (1 + scale_mlp[:, None]) + shift_mlp[:, None]
        ff_output = self.ff(norm_hidden_states)
        ff_output = gate_mlp.unsqueeze(1) * ff_output
        hidden_states = ff_output + hidden_states
        if hidden_states.ndim == 4:
            hidden_states = hidden_states.squeeze(1)
        return hidden_states


class DiTTransformer2DModel(nn.Module):
    def __init__(self, num_attention_heads=16, attention_head_dim=72, in_channels=4, out_channels=None,
                 num_layers=28, dropout=0.0, norm_num_groups=32, attention_bias=True, sample_size=32, patch_size=2,
                 activation_fn="gelu-approximate", num_embeds_ada_norm=1000, upcast_attention=False,
                 norm_type="ada_norm_zero", norm_elementwise_affine=False, norm_eps=1e-5):
        super().__init__()
        self.attention_head_dim = attention_head_dim
        self.inner_dim = num_attention_heads * attention_head_dim
        self.out_channels = in_channels if out_channels is None else out_channels
        self.gradient_checkpointing = False
        # 2. Initialize the position embedding and transformer blocks.
        self.height = sample_size
        self.width = sample_size
        self.patch_size = patch_size
        self.pos_embed = PatchEmbed(height=sample_size, width=sample_size, patch_size=patch_size,
                                    in_channels=in_channels, embed_dim=self.inner_dim)
        self.transformer_blocks = nn.ModuleList([
            BasicTransformerBlock(self.inner_dim, num_attention_heads, attention_head_dim, dropout=dropout,
                                  activation_fn=activation_fn, num_embeds_ada_norm=num_embeds_ada_norm,
                                  attention_bias=attention_bias, upcast_attention=upcast_attention,
                                  norm_type=norm_type, norm_elementwise_affine=norm_elementwise_affine,
                                  norm_eps=norm_eps)
            for _ in range(num_layers)])
        # 3. Output blocks.
        self.norm_out = nn.LayerNorm(self.inner_dim, elementwise_affine=False, eps=1e-6)
        self.proj_out_1 = nn.Linear(self.inner_dim, 2 * self.inner_dim)
        self.proj_out_2 = nn.Linear(self.inner_dim, patch_size * patch_size * self.out_channels)

    def forward(self, hidden_states, timestep=None, class_labels=None, cross_attention_kwargs=None,
                return_dict=True):
        # 1. Input
        height, width = hidden_states.shape[-2] // self.patch_size, hidden_states.shape[-1] // self.patch_size
        hidden_states = self.pos_embed(hidden_states)
        # 2. Blocks
        for block in self.transformer_blocks:
            hidden_states = block(hidden_states, attention_mask=None, encoder_hidden_states=None,
                                  encoder_attention_mask=None, timestep=timestep,
                                  cross_attention_kwargs=cross_attention_kwargs, class_labels=class_labels)
        # 3. Output
        conditioning = self.transformer_blocks[0].norm1.emb(timestep, class_labels, hidden_dtype=hidden_states.dtype)
        shift, scale = self.proj_out_1(F.silu(conditioning)).chunk(2, dim=1)
        hidden_states = self.norm_out(hidden_states) * (1 + scale[:, None]) + shift[:, None]
        hidden_states = self.proj_out_2(hidden_states)
        # unpatchify
        height = width = int(hidden_states.shape[1] ** 0.5)
        hidden_states = hidden_states.reshape(
            shape=(-1, height, width, self.patch_size, self.patch_size, self.out_channels))
        hidden_states = torch.einsum("nhwpqc->nchpwq", hidden_states)
        output = hidden_states.reshape(
            shape=(-1, self.out_channels, height * self.patch_size, width * self.patch_size))
        return (output,)


def build():
    # 2 heads of 16 (hidden 32), 3 blocks, 10 classes (+1 CFG row), 4 latent channels (8 out: learned sigma), patch 2
    # on an 8x8 latent (the sincos table 4x4, base_size 4).
    return DiTTransformer2DModel(num_attention_heads=2, attention_head_dim=16, in_channels=4, out_channels=8,
                                 num_layers=3, sample_size=8, patch_size=2, num_embeds_ada_norm=10)


def inputs(g):
    return {"class_labels": torch.tensor([3], dtype=torch.int64), "noise": torch.randn((1, 4, 8, 8), generator=g)}


def call(model, x, sigma, c):
    # DiTPipeline: timesteps = t[None].expand(B), the scheduler's int64 timesteps; class_labels int64.
    t = torch.tensor([int(round(sigma * 1000))], dtype=torch.int64).expand(x.shape[0])
    noise_pred = model(x, timestep=t, class_labels=c["class_labels"], return_dict=False)[0]
    latent_channels = x.shape[1]
    model_output, _ = torch.split(noise_pred, latent_channels, dim=1)
    return model_output


PRODUCER = dict(
    library_source="replica of huggingface/diffusers dit_transformer_2d.py@11bf2cf1d149 and the parts it imports "
                   "(torch 1.13)",
    timestep="round(sigma*1000) int64 (DiTPipeline: the scheduler's timesteps expanded to the batch)",
    velocity="first half of the output channels (learned sigma: torch.split(noise_pred, latent_channels)[0]), not "
             "negated",
    note="class-conditional DiT, 3 BasicTransformerBlocks (ada_norm_zero), each re-embedding t + class label "
         "through its own CombinedTimestepLabelEmbeddings (Timesteps(256, shift 1) -> MLP, LabelEmbedding table "
         "with a CFG row) -> SiLU -> Linear(6d): shift/scale/gate msa and mlp; gated residuals; non-affine "
         "LayerNorms (1e-6 in norm1, 1e-5 norm3); self-attention only (biased q/k/v, no q/k norm, no RoPE); "
         "GELU-tanh FFN; PatchEmbed 2x2 conv + 2-D sincos table (non-persistent f32 buffer); output conditioning "
         "from block 0's embedder called again, proj_out_1 -> (shift, scale) over non-affine LayerNorm, "
         "proj_out_2, einsum unpatchify; out 8 = 4 + learned sigma")

if __name__ == "__main__":
    capture("dit", build, inputs, call, sys.argv[1], PRODUCER)
