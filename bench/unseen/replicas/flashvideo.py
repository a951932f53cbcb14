"""FlashVideo (stage-2 time-size embedding) video DiT, reimplemented for torch 1.13 (no diffusers here), captured small
in f32 on CPU.

Follows huggingface/diffusers src/diffusers/models/transformers/transformer_flashvideo.py at
52953cf3afe1339ec16781c81157ff0131ce95a3 (FlashVideoTransformer3DModel, its own CogVideoXBlock; read in full) with the
parts it imports: embeddings.py (CogVideoXPatchEmbed with its sincos table: get_3d_sincos_pos_embed output_type "pt",
get_2d/1d_sincos_pos_embed_from_grid in float64; Timesteps, TimestepEmbedding; read), normalization.py
(CogVideoXLayerNormZero, AdaLayerNorm chunk_dim 1), attention.py (FeedForward "gelu-approximate" with final dropout)
and attention_processor.py (Attention with qk_norm "layer_norm" per head, CogVideoXAttnProcessor2_0: [text, video]
joined, SDPA, to_out, split back), as the consisid replica writes them. The same module tree, parameter names and
shapes, and call boundaries; the arithmetic line for line. Stand-in for what torch 1.13 lacks:
F.scaled_dot_product_attention (its math, default scale, no mask).

The construct it shows beside CogVideoX-2B's (sincos positions, no RoPE): a second sinusoid-plus-MLP embedding of the
latent frame count (time_size_proj / time_size_embedding, the frame count written into a [B] tensor inside the call)
added to the timestep embedding. Configuration: use_time_size_embedding True, use_noise_timestep_embedding False: at
this commit the noise-timestep embedder is built as TimestepEmbedding(inner_dim, flip_sin_to_cos, freq_shift) (an
activation named 0), which raises in get_activation, so a model with it cannot be constructed; the time-size branch
builds the [B] tensor only when a time_size_tensor is passed (`if time_size_tensor is not None`), so one is passed.

Pipeline as FlashVideoPipeline calls the CogVideoX body (CogVideoX's scheduler.timesteps, int64, expanded to the batch),
run in the replicas' flow loop: timestep round(sigma*1000), the output used as the velocity as is.

usage: /usr/bin/python3 bench/unseen/replicas/flashvideo.py OUTDIR
"""
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

from run import capture, get_timestep_embedding, sdpa


def get_1d_sincos_pos_embed_from_grid(embed_dim, pos, output_type="np"):
    assert output_type == "pt"
    if embed_dim % 2 != 0:
        raise ValueError("embed_dim must be divisible by 2")
    omega = torch.arange(embed_dim // 2, device=pos.device, dtype=torch.float64)
    omega /= embed_dim / 2.0
    omega = 1.0 / 10000 ** omega
    pos = pos.reshape(-1)
    out = torch.outer(pos, omega)
    emb_sin = torch.sin(out)
    emb_cos = torch.cos(out)
    emb = torch.concat([emb_sin, emb_cos], dim=1)
    return emb


def get_2d_sincos_pos_embed_from_grid(embed_dim, grid, output_type="np"):
    if embed_dim % 2 != 0:
        raise ValueError("embed_dim must be divisible by 2")
    emb_h = get_1d_sincos_pos_embed_from_grid(embed_dim // 2, grid[0], output_type=output_type)
    emb_w = get_1d_sincos_pos_embed_from_grid(embed_dim // 2, grid[1], output_type=output_type)
    emb = torch.concat([emb_h, emb_w], dim=1)
    return emb


def get_3d_sincos_pos_embed(embed_dim, spatial_size, temporal_size, spatial_interpolation_scale=1.0,
                            temporal_interpolation_scale=1.0, device=None, output_type="np"):
    assert output_type == "pt"
    if embed_dim % 4 != 0:
        raise ValueError("`embed_dim` must be divisible by 4")
    if isinstance(spatial_size, int):
        spatial_size = (spatial_size, spatial_size)
    embed_dim_spatial = 3 * embed_dim // 4
    embed_dim_temporal = embed_dim // 4

    grid_h = torch.arange(spatial_size[1], device=device, dtype=torch.float32) / spatial_interpolation_scale
    grid_w = torch.arange(spatial_size[0], device=device, dtype=torch.float32) / spatial_interpolation_scale
    grid = torch.meshgrid(grid_w, grid_h, indexing="xy")
    grid = torch.stack(grid, dim=0)
    grid = grid.reshape([2, 1, spatial_size[1], spatial_size[0]])
    pos_embed_spatial = get_2d_sincos_pos_embed_from_grid(embed_dim_spatial, grid, output_type="pt")

    grid_t = torch.arange(temporal_size, device=device, dtype=torch.float32) / temporal_interpolation_scale
    pos_embed_temporal = get_1d_sincos_pos_embed_from_grid(embed_dim_temporal, grid_t, output_type="pt")

    pos_embed_spatial = pos_embed_spatial[None, :, :]
    pos_embed_spatial = pos_embed_spatial.repeat_interleave(temporal_size, dim=0,
                                                            output_size=pos_embed_spatial.shape[0] * temporal_size)
    pos_embed_temporal = pos_embed_temporal[:, None, :]
    pos_embed_temporal = pos_embed_temporal.repeat_interleave(spatial_size[0] * spatial_size[1], dim=1)
    pos_embed = torch.concat([pos_embed_temporal, pos_embed_spatial], dim=-1)
    return pos_embed


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
    """embeddings.CogVideoXPatchEmbed, CogVideoX 1.0 (patch_size_t None: a Conv2d per frame), sincos positions
    (a non-persistent buffer, remade when the latent is not the sample size)."""

    def __init__(self, patch_size=2, patch_size_t=None, in_channels=16, embed_dim=1920, text_embed_dim=4096,
                 bias=True, sample_width=90, sample_height=60, sample_frames=49, temporal_compression_ratio=4,
                 max_text_seq_length=226, spatial_interpolation_scale=1.875, temporal_interpolation_scale=1.0,
                 use_positional_embeddings=True, use_learned_positional_embeddings=True):
        super().__init__()
        assert patch_size_t is None
        self.patch_size = patch_size
        self.patch_size_t = patch_size_t
        self.embed_dim = embed_dim
        self.sample_height = sample_height
        self.sample_width = sample_width
        self.sample_frames = sample_frames
        self.temporal_compression_ratio = temporal_compression_ratio
        self.max_text_seq_length = max_text_seq_length
        self.spatial_interpolation_scale = spatial_interpolation_scale
        self.temporal_interpolation_scale = temporal_interpolation_scale
        self.use_positional_embeddings = use_positional_embeddings
        self.use_learned_positional_embeddings = use_learned_positional_embeddings
        self.proj = nn.Conv2d(in_channels, embed_dim, kernel_size=(patch_size, patch_size), stride=patch_size,
                              bias=bias)
        self.text_proj = nn.Linear(text_embed_dim, embed_dim)
        if use_positional_embeddings or use_learned_positional_embeddings:
            persistent = use_learned_positional_embeddings
            pos_embedding = self._get_positional_embeddings(sample_height, sample_width, sample_frames)
            self.register_buffer("pos_embedding", pos_embedding, persistent=persistent)

    def _get_positional_embeddings(self, sample_height, sample_width, sample_frames, device=None):
        post_patch_height = sample_height // self.patch_size
        post_patch_width = sample_width // self.patch_size
        post_time_compression_frames = (sample_frames - 1) // self.temporal_compression_ratio + 1
        num_patches = post_patch_height * post_patch_width * post_time_compression_frames
        pos_embedding = get_3d_sincos_pos_embed(self.embed_dim, (post_patch_width, post_patch_height),
                                                post_time_compression_frames, self.spatial_interpolation_scale,
                                                self.temporal_interpolation_scale, device=device, output_type="pt")
        pos_embedding = pos_embedding.flatten(0, 1)
        joint_pos_embedding = pos_embedding.new_zeros(1, self.max_text_seq_length + num_patches, self.embed_dim,
                                                      requires_grad=False)
        joint_pos_embedding.data[:, self.max_text_seq_length:].copy_(pos_embedding)
        return joint_pos_embedding

    def forward(self, text_embeds, image_embeds):
        text_embeds = self.text_proj(text_embeds)
        batch_size, num_frames, channels, height, width = image_embeds.shape
        image_embeds = image_embeds.reshape(-1, channels, height, width)
        image_embeds = self.proj(image_embeds)
        image_embeds = image_embeds.view(batch_size, num_frames, *image_embeds.shape[1:])
        image_embeds = image_embeds.flatten(3).transpose(2, 3)
        image_embeds = image_embeds.flatten(1, 2)
        embeds = torch.cat([text_embeds, image_embeds], dim=1).contiguous()
        if self.use_positional_embeddings or self.use_learned_positional_embeddings:
            pre_time_compression_frames = (num_frames - 1) * self.temporal_compression_ratio + 1
            if (self.sample_height != height or self.sample_width != width
                    or self.sample_frames != pre_time_compression_frames):
                pos_embedding = self._get_positional_embeddings(height, width, pre_time_compression_frames,
                                                                device=embeds.device)
            else:
                pos_embedding = self.pos_embedding
            pos_embedding = pos_embedding.to(dtype=embeds.dtype)
            embeds = embeds + pos_embedding
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
    """attention.FeedForward(dim, dropout, activation_fn "gelu-approximate", final_dropout): mult 4."""

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
    """attention_processor.Attention as the block builds it (qk_norm "layer_norm": a LayerNorm over each head, eps
    1e-6, affine), CogVideoXAttnProcessor2_0's __call__ as its forward (no RoPE passed here)."""

    def __init__(self, query_dim, heads=8, dim_head=64, dropout=0.0, bias=False, qk_norm=None, eps=1e-5,
                 out_bias=True):
        super().__init__()
        self.inner_dim = dim_head * heads
        self.heads = heads
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
        assert attention_mask is None and image_rotary_emb is None
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
        hidden_states = sdpa(query, key, value)
        hidden_states = hidden_states.transpose(1, 2).reshape(batch_size, -1, attn.heads * head_dim)
        hidden_states = attn.to_out[0](hidden_states)
        hidden_states = attn.to_out[1](hidden_states)
        encoder_hidden_states, hidden_states = hidden_states.split(
            [text_seq_length, hidden_states.size(1) - text_seq_length], dim=1)
        return hidden_states, encoder_hidden_states


class CogVideoXBlock(nn.Module):
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

    def forward(self, hidden_states, encoder_hidden_states, temb, image_rotary_emb=None, attention_kwargs=None):
        text_seq_length = encoder_hidden_states.size(1)
        attention_kwargs = attention_kwargs or {}
        norm_hidden_states, norm_encoder_hidden_states, gate_msa, enc_gate_msa = self.norm1(
            hidden_states, encoder_hidden_states, temb)
        attn_hidden_states, attn_encoder_hidden_states = self.attn1(
            hidden_states=norm_hidden_states, encoder_hidden_states=norm_encoder_hidden_states,
            image_rotary_emb=image_rotary_emb, **attention_kwargs)
        hidden_states = hidden_states + gate_msa * attn_hidden_states
        encoder_hidden_states = encoder_hidden_states + enc_gate_msa * attn_encoder_hidden_states
        norm_hidden_states, norm_encoder_hidden_states, gate_ff, enc_gate_ff = self.norm2(
            hidden_states, encoder_hidden_states, temb)
        norm_hidden_states = torch.cat([norm_encoder_hidden_states, norm_hidden_states], dim=1)
        ff_output = self.ff(norm_hidden_states)
        hidden_states = hidden_states + gate_ff * ff_output[:, text_seq_length:]
        encoder_hidden_states = encoder_hidden_states + enc_gate_ff * ff_output[:, :text_seq_length]
        return hidden_states, encoder_hidden_states


class FlashVideoTransformer3DModel(nn.Module):
    def __init__(self, num_attention_heads=30, attention_head_dim=64, in_channels=16, out_channels=16,
                 flip_sin_to_cos=True, freq_shift=0, time_embed_dim=512, ofs_embed_dim=None, text_embed_dim=4096,
                 num_layers=30, dropout=0.0, attention_bias=True, sample_width=90, sample_height=60, sample_frames=49,
                 patch_size=2, patch_size_t=None, temporal_compression_ratio=4, max_text_seq_length=226,
                 activation_fn="gelu-approximate", timestep_activation_fn="silu", norm_elementwise_affine=True,
                 norm_eps=1e-5, spatial_interpolation_scale=1.875, temporal_interpolation_scale=1.0,
                 use_rotary_positional_embeddings=False, use_learned_positional_embeddings=False, patch_bias=True,
                 use_time_size_embedding=True, use_noise_timestep_embedding=True):
        super().__init__()
        inner_dim = num_attention_heads * attention_head_dim
        self.patch_size, self.patch_size_t = patch_size, patch_size_t
        assert ofs_embed_dim is None and patch_size_t is None
        assert not use_noise_timestep_embedding  # TimestepEmbedding(inner_dim, True, 0) raises upstream
        self.patch_embed = CogVideoXPatchEmbed(
            patch_size=patch_size, patch_size_t=patch_size_t, in_channels=in_channels, embed_dim=inner_dim,
            text_embed_dim=text_embed_dim, bias=patch_bias, sample_width=sample_width, sample_height=sample_height,
            sample_frames=sample_frames, temporal_compression_ratio=temporal_compression_ratio,
            max_text_seq_length=max_text_seq_length, spatial_interpolation_scale=spatial_interpolation_scale,
            temporal_interpolation_scale=temporal_interpolation_scale,
            use_positional_embeddings=not use_rotary_positional_embeddings,
            use_learned_positional_embeddings=use_learned_positional_embeddings)
        self.embedding_dropout = nn.Dropout(dropout)
        self.time_proj = Timesteps(inner_dim, flip_sin_to_cos, freq_shift)
        self.time_embedding = TimestepEmbedding(inner_dim, time_embed_dim, timestep_activation_fn)
        self.ofs_proj = None
        self.ofs_embedding = None
        self.time_size_proj = None
        self.time_size_embedding = None
        if use_time_size_embedding:
            self.time_size_proj = Timesteps(inner_dim, flip_sin_to_cos, freq_shift)
            self.time_size_embedding = TimestepEmbedding(inner_dim, time_embed_dim, timestep_activation_fn)
        self.noise_timestep_proj = None
        self.noise_timestep_embedding = None
        self.transformer_blocks = nn.ModuleList([
            CogVideoXBlock(dim=inner_dim, num_attention_heads=num_attention_heads,
                           attention_head_dim=attention_head_dim, time_embed_dim=time_embed_dim, dropout=dropout,
                           activation_fn=activation_fn, attention_bias=attention_bias,
                           norm_elementwise_affine=norm_elementwise_affine, norm_eps=norm_eps)
            for _ in range(num_layers)])
        self.norm_final = nn.LayerNorm(inner_dim, norm_eps, norm_elementwise_affine)
        self.norm_out = AdaLayerNorm(embedding_dim=time_embed_dim, output_dim=2 * inner_dim,
                                     norm_elementwise_affine=norm_elementwise_affine, norm_eps=norm_eps, chunk_dim=1)
        output_dim = patch_size * patch_size * out_channels
        self.proj_out = nn.Linear(inner_dim, output_dim)

    def forward(self, hidden_states, encoder_hidden_states, timestep, timestep_cond=None, noise_timestep=None,
                time_size_tensor=None, ofs=None, image_rotary_emb=None, attention_kwargs=None, return_dict=True):
        batch_size, num_frames, channels, height, width = hidden_states.shape

        timesteps = timestep
        t_emb = self.time_proj(timesteps)
        t_emb = t_emb.to(dtype=hidden_states.dtype)
        emb = self.time_embedding(t_emb, timestep_cond)

        if self.time_size_embedding is not None:
            if time_size_tensor is not None:
                time_size_tensor = torch.full((batch_size,), num_frames)
            time_size_emb = self.time_size_proj(time_size_tensor)
            time_size_emb = time_size_emb.to(dtype=hidden_states.dtype)
            time_size_emb = self.time_size_embedding(time_size_emb)
            emb = emb + time_size_emb

        hidden_states = self.patch_embed(encoder_hidden_states, hidden_states)
        hidden_states = self.embedding_dropout(hidden_states)

        text_seq_length = encoder_hidden_states.shape[1]
        encoder_hidden_states = hidden_states[:, :text_seq_length]
        hidden_states = hidden_states[:, text_seq_length:]

        for i, block in enumerate(self.transformer_blocks):
            hidden_states, encoder_hidden_states = block(hidden_states=hidden_states,
                                                         encoder_hidden_states=encoder_hidden_states, temb=emb,
                                                         image_rotary_emb=image_rotary_emb,
                                                         attention_kwargs=attention_kwargs)

        hidden_states = self.norm_final(hidden_states)
        hidden_states = self.norm_out(hidden_states, temb=emb)
        hidden_states = self.proj_out(hidden_states)

        p = self.patch_size
        output = hidden_states.reshape(batch_size, num_frames, height // p, width // p, -1, p, p)
        output = output.permute(0, 1, 4, 2, 5, 3, 6).flatten(5, 6).flatten(3, 4)
        return (output,)


def build():
    # capture_dit.py's cogvideox case narrowed: 2 heads of 16 (inner 32: sincos t/h/w 8/12/12), 2 blocks, time
    # embedding 16, text 4 tokens 16 wide (max_text_seq_length = the text length, as the joint table needs), sample
    # 8x8 latents of 5 frames (2 latent frames): the table is the init-time buffer.
    return FlashVideoTransformer3DModel(num_attention_heads=2, attention_head_dim=16, in_channels=4, out_channels=4,
                                        time_embed_dim=16, text_embed_dim=16, num_layers=2, sample_width=8,
                                        sample_height=8, sample_frames=5, patch_size=2, max_text_seq_length=4,
                                        use_time_size_embedding=True, use_noise_timestep_embedding=False)


def inputs(g):
    return {"encoder_hidden_states": torch.randn((1, 4, 16), generator=g),
            "noise": torch.randn((1, 2, 4, 8, 8), generator=g)}


def call(model, x, sigma, c):
    t = torch.tensor([int(round(sigma * 1000))], dtype=torch.int64)
    # any tensor: the call replaces it by torch.full((B,), num_frames)
    size = torch.tensor([x.shape[1]], dtype=torch.int64)
    return model(hidden_states=x, encoder_hidden_states=c["encoder_hidden_states"], timestep=t,
                 time_size_tensor=size, image_rotary_emb=None, attention_kwargs=None, return_dict=False)[0]


PRODUCER = dict(
    library_source="replica of huggingface/diffusers transformer_flashvideo.py@52953cf3afe1 and the parts it imports "
                   "(torch 1.13)",
    timestep="round(sigma*1000) int64 (FlashVideoPipeline: t.expand(B), CogVideoX scheduler timesteps)",
    velocity="model output as is (a v-prediction model run in a flow loop), not negated",
    note="FlashVideo DiT (CogVideoX-2B body: CogVideoXPatchEmbed with a 3-D sincos table added to the [text, video] "
         "rows, text rows zero; CogVideoXLayerNormZero per-stream shift/scale/gate; joint attention with per-head "
         "LayerNorm q/k, no RoPE; one GELU-tanh FFN over both streams), plus a time-size embedding: the latent frame "
         "count (2) made into a [B] int64 tensor inside the call, sinusoid + SiLU MLP, added to the timestep "
         "embedding; final LayerNorm over the video rows, AdaLayerNorm (shift, scale); 2 latent frames of 8x8")

if __name__ == "__main__":
    capture("flashvideo", build, inputs, call, sys.argv[1], PRODUCER)
