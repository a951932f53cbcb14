"""Rhymes AI Allegro video DiT, reimplemented for torch 1.13 (no diffusers here), captured small in f32 on CPU.

Follows huggingface/diffusers src/diffusers/models/transformers/transformer_allegro.py at
11bf2cf1d149c47a210912f0b446e701b81e923d (AllegroTransformer3DModel, AllegroTransformerBlock; the stored text's
nn.Modulelist read as nn.ModuleList) with the parts it imports: attention_processor.py (Attention: to_q/to_k/to_v/
to_out with bias, prepare_attention_mask; AllegroAttnProcessor2_0's __call__ as its forward), embeddings.py
(PatchEmbed with pos_embed_type None, PixArtAlphaTextProjection, PixArtAlphaCombinedTimestepSizeEmbeddings,
Timesteps, TimestepEmbedding, apply_rotary_emb_allegro, get_3d_rotary_pos_embed_allegro, get_1d_rotary_pos_embed
use_real without repeat_interleave), attention.py (FeedForward "gelu-approximate") and normalization.py
(AdaLayerNormSingle): the same module tree, parameter names and shapes, and call boundaries; the arithmetic line
for line. The RoPE tables and positions are made as AllegroPipeline._prepare_rotary_positional_embeddings makes
them (per-axis cos/sin tables at linspace grids divided by the interpolation scales, long positions from
torch.cartesian_prod) and passed in as image_rotary_emb. Stand-in for what torch 1.13 lacks:
F.scaled_dot_product_attention (its math, default scale, additive mask). Not checked against upstream text:
AllegroAttnProcessor2_0 was not in the stored source when this was written, so its __call__ here is written from
how the processor is known to work (q/k/v projections, apply_rotary_emb_allegro on q and k of the image rows,
SDPA under the prepared mask, to_out); compare it with attention_processor.py before relying on the fixture.

Pipeline: the shared flow loop of run.py (timestep sigma*1000 float32 expanded to the batch, velocity the model's
output as is), the call as AllegroPipeline makes it (prompt mask, image_rotary_emb), guidance off.

usage: /usr/bin/python3 bench/unseen/replicas/allegro.py OUTDIR
"""
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
    freqs = (1.0 / (theta ** (torch.arange(0, dim, 2, dtype=freqs_dtype, device=pos.device) / dim)) / linear_factor)
    freqs = torch.outer(pos, freqs)
    if use_real and repeat_interleave_real:
        freqs_cos = freqs.cos().repeat_interleave(2, dim=1).float()
        freqs_sin = freqs.sin().repeat_interleave(2, dim=1).float()
        return freqs_cos, freqs_sin
    elif use_real:
        freqs_cos = torch.cat([freqs.cos(), freqs.cos()], dim=-1).float()
        freqs_sin = torch.cat([freqs.sin(), freqs.sin()], dim=-1).float()
        return freqs_cos, freqs_sin
    raise NotImplementedError


def get_3d_rotary_pos_embed_allegro(embed_dim, crops_coords, grid_size, temporal_size,
                                    interpolation_scale=(1.0, 1.0, 1.0), theta=10000, device=None):
    start, stop = crops_coords
    grid_size_h, grid_size_w = grid_size
    interpolation_scale_t, interpolation_scale_h, interpolation_scale_w = interpolation_scale
    grid_t = torch.linspace(0, temporal_size * (temporal_size - 1) / temporal_size, temporal_size, device=device,
                            dtype=torch.float32)
    grid_h = torch.linspace(start[0], stop[0] * (grid_size_h - 1) / grid_size_h, grid_size_h, device=device,
                            dtype=torch.float32)
    grid_w = torch.linspace(start[1], stop[1] * (grid_size_w - 1) / grid_size_w, grid_size_w, device=device,
                            dtype=torch.float32)
    dim_t = embed_dim // 3
    dim_h = embed_dim // 3
    dim_w = embed_dim // 3
    freqs_t = get_1d_rotary_pos_embed(dim_t, grid_t / interpolation_scale_t, theta=theta, use_real=True,
                                      repeat_interleave_real=False)
    freqs_h = get_1d_rotary_pos_embed(dim_h, grid_h / interpolation_scale_h, theta=theta, use_real=True,
                                      repeat_interleave_real=False)
    freqs_w = get_1d_rotary_pos_embed(dim_w, grid_w / interpolation_scale_w, theta=theta, use_real=True,
                                      repeat_interleave_real=False)
    return freqs_t, freqs_h, freqs_w, grid_t, grid_h, grid_w


def apply_rotary_emb_allegro(x, freqs_cis, positions):
    def apply_1d_rope(tokens, pos, cos, sin):
        cos = F.embedding(pos, cos)[:, None, :, :]
        sin = F.embedding(pos, sin)[:, None, :, :]
        x1, x2 = tokens[..., : tokens.shape[-1] // 2], tokens[..., tokens.shape[-1] // 2:]
        tokens_rotated = torch.cat((-x2, x1), dim=-1)
        return (tokens.float() * cos + tokens_rotated.float() * sin).to(tokens.dtype)

    (t_cos, t_sin), (h_cos, h_sin), (w_cos, w_sin) = freqs_cis
    t, h, w = x.chunk(3, dim=-1)
    t = apply_1d_rope(t, positions[0], t_cos, t_sin)
    h = apply_1d_rope(h, positions[1], h_cos, h_sin)
    w = apply_1d_rope(w, positions[2], w_cos, w_sin)
    x = torch.cat([t, h, w], dim=-1)
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
    def __init__(self, in_channels, time_embed_dim, sample_proj_bias=True):
        super().__init__()
        self.linear_1 = nn.Linear(in_channels, time_embed_dim, sample_proj_bias)
        self.act = nn.SiLU()
        self.linear_2 = nn.Linear(time_embed_dim, time_embed_dim, sample_proj_bias)

    def forward(self, sample):
        return self.linear_2(self.act(self.linear_1(sample)))


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
        timesteps_emb = self.timestep_embedder(timesteps_proj.to(dtype=hidden_dtype))
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
        added_cond_kwargs = added_cond_kwargs or {"resolution": None, "aspect_ratio": None}
        embedded_timestep = self.emb(timestep, **added_cond_kwargs, batch_size=batch_size, hidden_dtype=hidden_dtype)
        return self.linear(self.silu(embedded_timestep)), embedded_timestep


class PixArtAlphaTextProjection(nn.Module):
    def __init__(self, in_features, hidden_size, out_features=None, act_fn="gelu_tanh"):
        super().__init__()
        if out_features is None:
            out_features = hidden_size
        self.linear_1 = nn.Linear(in_features=in_features, out_features=hidden_size, bias=True)
        self.act_1 = nn.GELU(approximate="tanh")
        self.linear_2 = nn.Linear(in_features=hidden_size, out_features=out_features, bias=True)

    def forward(self, caption):
        hidden_states = self.linear_1(caption)
        hidden_states = self.act_1(hidden_states)
        hidden_states = self.linear_2(hidden_states)
        return hidden_states


class PatchEmbed(nn.Module):
    """embeddings.PatchEmbed(height, width, patch_size, in_channels, embed_dim, pos_embed_type=None): conv,
    flatten, no norm, no positional embedding."""

    def __init__(self, height=224, width=224, patch_size=16, in_channels=3, embed_dim=768, bias=True):
        super().__init__()
        self.proj = nn.Conv2d(in_channels, embed_dim, kernel_size=(patch_size, patch_size), stride=patch_size,
                              bias=bias)

    def forward(self, latent):
        latent = self.proj(latent)
        latent = latent.flatten(2).transpose(1, 2)
        return latent


class GELU(nn.Module):
    def __init__(self, dim_in, dim_out, approximate="none", bias=True):
        super().__init__()
        self.proj = nn.Linear(dim_in, dim_out, bias=bias)
        self.approximate = approximate

    def forward(self, hidden_states):
        hidden_states = self.proj(hidden_states)
        return F.gelu(hidden_states, approximate=self.approximate)


class FeedForward(nn.Module):
    """attention.FeedForward(dim, dropout, activation_fn "gelu-approximate"): mult 4, bias True."""

    def __init__(self, dim, dim_out=None, mult=4, dropout=0.0, activation_fn="gelu-approximate", bias=True):
        super().__init__()
        inner_dim = int(dim * mult)
        dim_out = dim_out if dim_out is not None else dim
        assert activation_fn == "gelu-approximate"
        self.net = nn.ModuleList([GELU(dim, inner_dim, approximate="tanh", bias=bias), nn.Dropout(dropout),
                                  nn.Linear(inner_dim, dim_out, bias=bias)])

    def forward(self, hidden_states):
        for module in self.net:
            hidden_states = module(hidden_states)
        return hidden_states


class Attention(nn.Module):
    """attention_processor.Attention as the Allegro blocks build it, AllegroAttnProcessor2_0's __call__ as its
    forward."""

    def __init__(self, query_dim, cross_attention_dim=None, heads=8, dim_head=64, dropout=0.0, bias=False,
                 out_bias=True):
        super().__init__()
        self.inner_dim = dim_head * heads
        self.is_cross_attention = cross_attention_dim is not None
        self.cross_attention_dim = cross_attention_dim if cross_attention_dim is not None else query_dim
        self.heads = heads
        self.rescale_output_factor = 1.0
        self.to_q = nn.Linear(query_dim, self.inner_dim, bias=bias)
        self.to_k = nn.Linear(self.cross_attention_dim, self.inner_dim, bias=bias)
        self.to_v = nn.Linear(self.cross_attention_dim, self.inner_dim, bias=bias)
        self.to_out = nn.ModuleList([nn.Linear(self.inner_dim, query_dim, bias=out_bias), nn.Dropout(dropout)])

    def prepare_attention_mask(self, attention_mask, target_length, batch_size, out_dim=3):
        head_size = self.heads
        if attention_mask is None:
            return attention_mask
        current_length = attention_mask.shape[-1]
        if current_length != target_length:
            attention_mask = F.pad(attention_mask, (0, target_length), value=0.0)
        if out_dim == 3:
            if attention_mask.shape[0] < batch_size * head_size:
                attention_mask = attention_mask.repeat_interleave(head_size, dim=0)
        elif out_dim == 4:
            attention_mask = attention_mask.unsqueeze(1)
            attention_mask = attention_mask.repeat_interleave(head_size, dim=1)
        return attention_mask

    def forward(self, hidden_states, encoder_hidden_states=None, attention_mask=None, temb=None,
                image_rotary_emb=None):
        attn = self
        batch_size, sequence_length, _ = (
            hidden_states.shape if encoder_hidden_states is None else encoder_hidden_states.shape)

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

        if image_rotary_emb is not None and not attn.is_cross_attention:
            query = apply_rotary_emb_allegro(query, image_rotary_emb[0], image_rotary_emb[1])
            key = apply_rotary_emb_allegro(key, image_rotary_emb[0], image_rotary_emb[1])

        hidden_states = sdpa(query, key, value, mask=attention_mask)

        hidden_states = hidden_states.transpose(1, 2).reshape(batch_size, -1, attn.heads * head_dim)
        hidden_states = hidden_states.to(query.dtype)

        hidden_states = attn.to_out[0](hidden_states)
        hidden_states = attn.to_out[1](hidden_states)

        hidden_states = hidden_states / attn.rescale_output_factor
        return hidden_states


class AllegroTransformerBlock(nn.Module):
    def __init__(self, dim, num_attention_heads, attention_head_dim, dropout=0.0, cross_attention_dim=None,
                 activation_fn="geglu", attention_bias=False, norm_elementwise_affine=True, norm_eps=1e-5):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, elementwise_affine=norm_elementwise_affine, eps=norm_eps)
        self.attn1 = Attention(query_dim=dim, heads=num_attention_heads, dim_head=attention_head_dim, dropout=dropout,
                               bias=attention_bias, cross_attention_dim=None)
        self.norm2 = nn.LayerNorm(dim, elementwise_affine=norm_elementwise_affine, eps=norm_eps)
        self.attn2 = Attention(query_dim=dim, cross_attention_dim=cross_attention_dim, heads=num_attention_heads,
                               dim_head=attention_head_dim, dropout=dropout, bias=attention_bias)
        self.norm3 = nn.LayerNorm(dim, elementwise_affine=norm_elementwise_affine, eps=norm_eps)
        self.ff = FeedForward(dim, dropout=dropout, activation_fn=activation_fn)
        self.scale_shift_table = nn.Parameter(torch.randn(6, dim) / dim ** 0.5)

    def forward(self, hidden_states, encoder_hidden_states=None, temb=None, attention_mask=None,
                encoder_attention_mask=None, image_rotary_emb=None):
        batch_size = hidden_states.shape[0]

        shift_msa, scale_msa, gate_msa, shift_mlp, scale_mlp, gate_mlp = (
            self.scale_shift_table[None] + temb.reshape(batch_size, 6, -1)
        ).chunk(6, dim=1)
        norm_hidden_states = self.norm1(hidden_states)
        norm_hidden_states = norm_hidden_states * (1 + scale_msa) + shift_msa
        norm_hidden_states = norm_hidden_states.squeeze(1)

        attn_output = self.attn1(norm_hidden_states, encoder_hidden_states=None, attention_mask=attention_mask,
                                 image_rotary_emb=image_rotary_emb)
        attn_output = gate_msa * attn_output

        hidden_states = attn_output + hidden_states
        if hidden_states.ndim == 4:
            hidden_states = hidden_states.squeeze(1)

        if self.attn2 is not None:
            norm_hidden_states = hidden_states
            attn_output = self.attn2(norm_hidden_states, encoder_hidden_states=encoder_hidden_states,
                                     attention_mask=encoder_attention_mask, image_rotary_emb=None)
            hidden_states = attn_output + hidden_states

        norm_hidden_states = self.norm2(hidden_states)
        norm_hidden_states = norm_hidden_states * (1 + scale_mlp) + shift_mlp

        ff_output = self.ff(norm_hidden_states)
        ff_output = gate_mlp * ff_output

        hidden_states = ff_output + hidden_states

        if hidden_states.ndim == 4:
            hidden_states = hidden_states.squeeze(1)

        return hidden_states


class AllegroTransformer3DModel(nn.Module):
    def __init__(self, patch_size=2, patch_size_t=1, num_attention_heads=24, attention_head_dim=96, in_channels=4,
                 out_channels=4, num_layers=32, dropout=0.0, cross_attention_dim=2304, attention_bias=True,
                 sample_height=90, sample_width=160, sample_frames=22, activation_fn="gelu-approximate",
                 norm_elementwise_affine=False, norm_eps=1e-6, caption_channels=4096, interpolation_scale_h=2.0,
                 interpolation_scale_w=2.0, interpolation_scale_t=2.2):
        super().__init__()
        self.patch_size, self.patch_size_t = patch_size, patch_size_t
        self.inner_dim = num_attention_heads * attention_head_dim

        self.pos_embed = PatchEmbed(height=sample_height, width=sample_width, patch_size=patch_size,
                                    in_channels=in_channels, embed_dim=self.inner_dim)

        self.transformer_blocks = nn.ModuleList([
            AllegroTransformerBlock(self.inner_dim, num_attention_heads, attention_head_dim, dropout=dropout,
                                    cross_attention_dim=cross_attention_dim, activation_fn=activation_fn,
                                    attention_bias=attention_bias, norm_elementwise_affine=norm_elementwise_affine,
                                    norm_eps=norm_eps)
            for _ in range(num_layers)])

        self.norm_out = nn.LayerNorm(self.inner_dim, elementwise_affine=False, eps=1e-6)
        self.scale_shift_table = nn.Parameter(torch.randn(2, self.inner_dim) / self.inner_dim ** 0.5)
        self.proj_out = nn.Linear(self.inner_dim, patch_size * patch_size * out_channels)

        self.adaln_single = AdaLayerNormSingle(self.inner_dim, use_additional_conditions=False)

        self.caption_projection = PixArtAlphaTextProjection(in_features=caption_channels, hidden_size=self.inner_dim)

    def forward(self, hidden_states, encoder_hidden_states, timestep, attention_mask=None,
                encoder_attention_mask=None, image_rotary_emb=None, return_dict=True):
        batch_size, num_channels, num_frames, height, width = hidden_states.shape
        p_t = self.patch_size_t
        p = self.patch_size

        post_patch_num_frames = num_frames // p_t
        post_patch_height = height // p
        post_patch_width = width // p

        if encoder_attention_mask is not None and encoder_attention_mask.ndim == 2:
            encoder_attention_mask = (1 - encoder_attention_mask.to(hidden_states.dtype)) * -10000.0
            encoder_attention_mask = encoder_attention_mask.unsqueeze(1)

        timestep, embedded_timestep = self.adaln_single(timestep, batch_size=batch_size,
                                                        hidden_dtype=hidden_states.dtype)

        hidden_states = hidden_states.permute(0, 2, 1, 3, 4).flatten(0, 1)
        hidden_states = self.pos_embed(hidden_states)
        hidden_states = hidden_states.unflatten(0, (batch_size, -1)).flatten(1, 2)

        encoder_hidden_states = self.caption_projection(encoder_hidden_states)
        encoder_hidden_states = encoder_hidden_states.view(batch_size, -1, encoder_hidden_states.shape[-1])

        for i, block in enumerate(self.transformer_blocks):
            hidden_states = block(hidden_states=hidden_states, encoder_hidden_states=encoder_hidden_states,
                                  temb=timestep, attention_mask=attention_mask,
                                  encoder_attention_mask=encoder_attention_mask, image_rotary_emb=image_rotary_emb)

        shift, scale = (self.scale_shift_table[None] + embedded_timestep[:, None]).chunk(2, dim=1)
        hidden_states = self.norm_out(hidden_states)

        hidden_states = hidden_states * (1 + scale) + shift
        hidden_states = self.proj_out(hidden_states)
        hidden_states = hidden_states.squeeze(1)

        hidden_states = hidden_states.reshape(batch_size, post_patch_num_frames, post_patch_height,
                                              post_patch_width, p_t, p, p, -1)
        hidden_states = hidden_states.permute(0, 7, 1, 4, 2, 5, 3, 6)
        output = hidden_states.reshape(batch_size, -1, num_frames, height, width)
        return (output,)


def build():
    # 2 heads of 24 (RoPE thirds of 8), 2 blocks, caption channels 16, cross-attention over the 48-wide projected
    # caption; the interpolation scales the defaults.
    return AllegroTransformer3DModel(patch_size=2, patch_size_t=1, num_attention_heads=2, attention_head_dim=24,
                                     in_channels=4, out_channels=4, num_layers=2, cross_attention_dim=48,
                                     caption_channels=16)


def rotary(num_frames, height, width, head_dim=24, vae_scale_factor_spatial=8, patch_size=2):
    """AllegroPipeline._prepare_rotary_positional_embeddings (height, width in pixels)."""
    grid_height = height // (vae_scale_factor_spatial * patch_size)
    grid_width = width // (vae_scale_factor_spatial * patch_size)
    start, stop = (0, 0), (grid_height, grid_width)
    freqs_t, freqs_h, freqs_w, grid_t, grid_h, grid_w = get_3d_rotary_pos_embed_allegro(
        embed_dim=head_dim, crops_coords=(start, stop), grid_size=(grid_height, grid_width),
        temporal_size=num_frames, interpolation_scale=(2.2, 2.0, 2.0))
    grid_t = grid_t.to(dtype=torch.long)
    grid_h = grid_h.to(dtype=torch.long)
    grid_w = grid_w.to(dtype=torch.long)
    pos = torch.cartesian_prod(grid_t, grid_h, grid_w)
    pos = pos.reshape(-1, 3).transpose(0, 1).reshape(3, 1, -1).contiguous()
    grid_t, grid_h, grid_w = pos
    return (freqs_t, freqs_h, freqs_w), (grid_t, grid_h, grid_w)


def inputs(g):
    # 4 caption tokens, the last one padding; 2 latent frames of 4x8 (a 32x64 picture).
    m = torch.ones(1, 4, dtype=torch.int64)
    m[:, 3:] = 0
    (ft, fh, fw), (pt, ph, pw) = rotary(2, 32, 64)
    return {"encoder_hidden_states": torch.randn((1, 4, 16), generator=g), "encoder_attention_mask": m,
            "rope_t_cos": ft[0], "rope_t_sin": ft[1], "rope_h_cos": fh[0], "rope_h_sin": fh[1],
            "rope_w_cos": fw[0], "rope_w_sin": fw[1], "pos_t": pt, "pos_h": ph, "pos_w": pw,
            "noise": torch.randn((1, 4, 2, 4, 8), generator=g)}


def call(model, x, sigma, c):
    t = torch.tensor([sigma * 1000.0], dtype=torch.float32).expand(x.shape[0])
    rope = (((c["rope_t_cos"], c["rope_t_sin"]), (c["rope_h_cos"], c["rope_h_sin"]), (c["rope_w_cos"], c["rope_w_sin"])),
            (c["pos_t"], c["pos_h"], c["pos_w"]))
    return model(hidden_states=x, encoder_hidden_states=c["encoder_hidden_states"], timestep=t,
                 encoder_attention_mask=c["encoder_attention_mask"], image_rotary_emb=rope, return_dict=False)[0]


PRODUCER = dict(
    library_source="replica of huggingface/diffusers transformer_allegro.py@11bf2cf1d149 and the parts it imports "
                   "(torch 1.13)",
    timestep="sigma*1000 float32 expanded to the batch (the shared flow loop)",
    velocity="model output as is",
    note="Allegro video DiT (PixArt-style), two blocks: AdaLayerNormSingle timestep (256-channel sinusoid, SiLU MLP, "
         "6d modulation) summed with each block's learned scale_shift_table; self-attention after a modulated "
         "non-affine LayerNorm with half-layout 3-D RoPE (head split in thirds t/h/w, each rotated with cos/sin "
         "tables gathered by long positions through F.embedding), gated; cross-attention to the GELU-tanh MLP-"
         "projected caption with NO norm before it, the prompt mask as a -10000 additive bias; the FFN (GELU-tanh) "
         "after norm2 (norm3 unused), gated; final non-affine LayerNorm modulated by scale_shift_table + the "
         "embedded timestep; per-frame 2x2 patch conv; permuted unpatchify; 2 latent frames")

if __name__ == "__main__":
    capture("allegro", build, inputs, call, sys.argv[1], PRODUCER)
