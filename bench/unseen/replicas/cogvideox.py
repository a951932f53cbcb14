"""CogVideoX 1.5 text-to-video DiT (CogVideoXTransformer3DModel), reimplemented for torch 1.13 (no diffusers here),
captured small in f32 on CPU in run.py's 3-step flow loop.

Follows huggingface/diffusers src/diffusers/models/transformers/cogvideox_transformer_3d.py at
00789ad1e43335e528f935fb7b0f96466cb58e7a (read in full: CogVideoXBlock, CogVideoXTransformer3DModel with its
CogVideoX 1.5 branches: patch_size_t set, ofs_embed_dim None, norm_final over the video stream only, proj_out to
p_t·p·p·C, the 1.5 unpatchify) with the parts it imports. embeddings.py's CogVideoXPatchEmbed (its 1.5 branch: the
latents cut into p_t×p×p space-time patches by permute/reshape, one Linear over the patch vector; text_proj Linear;
no positional table, use_positional_embeddings = not use_rotary_positional_embeddings) and get_3d_rotary_pos_embed
(its grid_type "slice" branch: arange grids over the max size, then sliced to the latent grid) are written here from
the text of a current embeddings.py (the huggingface/diffusers copies the index holds are older than CogVideoX;
the text read is a copy of upstream's, whose functions match consisid.py's reading at 168e5b7f). The other parts
are taken by import from consisid.py, which has them as upstream writes them: get_1d_rotary_pos_embed (use_real,
repeat_interleave), apply_rotary_emb (use_real, unbind -1), Timesteps, TimestepEmbedding ("silu"),
normalization.py's CogVideoXLayerNormZero and AdaLayerNorm (chunk_dim 1: shift, scale), attention.py's FeedForward
("gelu-approximate", final_dropout True) and attention_processor.Attention as CogVideoXBlock builds it (qk_norm
"layer_norm" per head, eps 1e-6, bias True) with CogVideoXAttnProcessor2_0 as its forward ([text, video] joined,
per-head LayerNorm q/k, RoPE written in place on the video rows of q and k, SDPA, to_out, split back; the processor
checked against a current attention_processor.py's Fused variant, identical but for the fused qkv). The same module
tree, parameter names and shapes, call boundaries and arithmetic. Stand-in for what torch 1.13 lacks:
F.scaled_dot_product_attention (run.sdpa: its math, default scale, no mask).

Config: CogVideoX 1.5 (T2V) flags: patch_size 2, patch_size_t 2, use_rotary_positional_embeddings True,
use_learned_positional_embeddings False, ofs_embed_dim None, attention_bias True, flip_sin_to_cos True, freq_shift 0,
norm_eps 1e-5, affine norms, activation "gelu-approximate", timestep activation "silu"; shrunk in width: 2 heads of 16
(inner 32; RoPE t/h/w dims 4/6/6), time_embed_dim 24 (512 upstream), text_embed_dim 20 (4096), 2 blocks (42), in/out
channels 4 (16), sample_height = sample_width = 12 (RoPE max grid 6x6 // patch, sliced to the 4x4 latent grid),
max_text_seq_length 6.

Pipeline as CogVideoXPipeline (pipelines/cogvideo/pipeline_cogvideox.py at 009167aa69a3fbfaaef6ae89e035042e7b92c731)
calls it, guidance_scale 1 (no unconditional half): latent frames (num_frames - 1) // 4 + 1 = 3 padded by one frame
to a multiple of patch_size_t (4 latent frames; the pad frame is dropped only after the loop, before decoding);
latents [B, F, C, H, W] = [1, 4, 4, 8, 8]; image_rotary_emb from _prepare_rotary_positional_embeddings' 1.5 branch:
get_3d_rotary_pos_embed(attention_head_dim, crops_coords None, grid (4, 4), temporal (4 + p_t - 1) // p_t = 2,
grid_type "slice", max_size (sample_height // p, sample_width // p)), built once before the loop, f32; timestep =
t.expand(B), the scheduler's int64 timesteps (round(sigma*1000) here); the output used as is (noise_pred.float()).
6 random prompt-embedding tokens 20 wide. 2 x 4 x 4 = 32 video tokens.

usage: /usr/bin/python3 bench/unseen/replicas/cogvideox.py OUTDIR
REPLICA_DTYPE=bf16 [REPLICA_DEVICE=cuda] as run.py's replicas: the bf16 run, beside the f32 one.
"""
import sys

import torch
import torch.nn as nn

from consisid import (AdaLayerNorm, Attention, CogVideoXLayerNormZero, FeedForward, TimestepEmbedding, Timesteps,
                      get_1d_rotary_pos_embed)
from run import capture


def get_3d_rotary_pos_embed(embed_dim, crops_coords, grid_size, temporal_size, theta=10000, use_real=True,
                            grid_type="linspace", max_size=None, device=None):
    """embeddings.get_3d_rotary_pos_embed, both grid types."""
    if use_real is not True:
        raise ValueError(" `use_real = False` is not currently supported for get_3d_rotary_pos_embed")

    if grid_type == "linspace":
        start, stop = crops_coords
        grid_size_h, grid_size_w = grid_size
        grid_h = torch.linspace(
            start[0], stop[0] * (grid_size_h - 1) / grid_size_h, grid_size_h, device=device, dtype=torch.float32
        )
        grid_w = torch.linspace(
            start[1], stop[1] * (grid_size_w - 1) / grid_size_w, grid_size_w, device=device, dtype=torch.float32
        )
        grid_t = torch.arange(temporal_size, device=device, dtype=torch.float32)
        grid_t = torch.linspace(
            0, temporal_size * (temporal_size - 1) / temporal_size, temporal_size, device=device, dtype=torch.float32
        )
    elif grid_type == "slice":
        max_h, max_w = max_size
        grid_size_h, grid_size_w = grid_size
        grid_h = torch.arange(max_h, device=device, dtype=torch.float32)
        grid_w = torch.arange(max_w, device=device, dtype=torch.float32)
        grid_t = torch.arange(temporal_size, device=device, dtype=torch.float32)
    else:
        raise ValueError("Invalid value passed for `grid_type`.")

    # Compute dimensions for each axis
    dim_t = embed_dim // 4
    dim_h = embed_dim // 8 * 3
    dim_w = embed_dim // 8 * 3

    # Temporal frequencies
    freqs_t = get_1d_rotary_pos_embed(dim_t, grid_t, theta=theta, use_real=True)
    # Spatial frequencies for height and width
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

    if grid_type == "slice":
        t_cos, t_sin = t_cos[:temporal_size], t_sin[:temporal_size]
        h_cos, h_sin = h_cos[:grid_size_h], h_sin[:grid_size_h]
        w_cos, w_sin = w_cos[:grid_size_w], w_sin[:grid_size_w]

    cos = combine_time_height_width(t_cos, h_cos, w_cos)
    sin = combine_time_height_width(t_sin, h_sin, w_sin)
    return cos, sin


class CogVideoXPatchEmbed(nn.Module):
    """embeddings.CogVideoXPatchEmbed, both checkpoint generations; the positional table (use_positional_embeddings
    or use_learned_positional_embeddings) is not built here: the RoPE configs turn it off."""

    def __init__(self, patch_size=2, patch_size_t=None, in_channels=16, embed_dim=1920, text_embed_dim=4096,
                 bias=True, sample_width=90, sample_height=60, sample_frames=49, temporal_compression_ratio=4,
                 max_text_seq_length=226, spatial_interpolation_scale=1.875, temporal_interpolation_scale=1.0,
                 use_positional_embeddings=True, use_learned_positional_embeddings=True):
        super().__init__()

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

        if patch_size_t is None:
            # CogVideoX 1.0 checkpoints
            self.proj = nn.Conv2d(
                in_channels, embed_dim, kernel_size=(patch_size, patch_size), stride=patch_size, bias=bias
            )
        else:
            # CogVideoX 1.5 checkpoints
            self.proj = nn.Linear(in_channels * patch_size * patch_size * patch_size_t, embed_dim)

        self.text_proj = nn.Linear(text_embed_dim, embed_dim)

        if use_positional_embeddings or use_learned_positional_embeddings:
            raise NotImplementedError("the replica holds a RoPE configuration: no sincos / learned table")

    def forward(self, text_embeds, image_embeds):
        text_embeds = self.text_proj(text_embeds)

        batch_size, num_frames, channels, height, width = image_embeds.shape

        if self.patch_size_t is None:
            image_embeds = image_embeds.reshape(-1, channels, height, width)
            image_embeds = self.proj(image_embeds)
            image_embeds = image_embeds.view(batch_size, num_frames, *image_embeds.shape[1:])
            image_embeds = image_embeds.flatten(3).transpose(2, 3)  # [batch, num_frames, height x width, channels]
            image_embeds = image_embeds.flatten(1, 2)  # [batch, num_frames x height x width, channels]
        else:
            p = self.patch_size
            p_t = self.patch_size_t

            image_embeds = image_embeds.permute(0, 1, 3, 4, 2)
            image_embeds = image_embeds.reshape(
                batch_size, num_frames // p_t, p_t, height // p, p, width // p, p, channels
            )
            image_embeds = image_embeds.permute(0, 1, 3, 5, 7, 2, 4, 6).flatten(4, 7).flatten(1, 3)
            image_embeds = self.proj(image_embeds)

        embeds = torch.cat(
            [text_embeds, image_embeds], dim=1
        ).contiguous()  # [batch, seq_length + num_frames x height x width, channels]

        return embeds


class CogVideoXBlock(nn.Module):
    def __init__(self, dim, num_attention_heads, attention_head_dim, time_embed_dim, dropout=0.0,
                 activation_fn="gelu-approximate", attention_bias=False, qk_norm=True, norm_elementwise_affine=True,
                 norm_eps=1e-5, final_dropout=True, ff_inner_dim=None, ff_bias=True, attention_out_bias=True):
        super().__init__()

        # 1. Self Attention
        self.norm1 = CogVideoXLayerNormZero(time_embed_dim, dim, norm_elementwise_affine, norm_eps, bias=True)

        self.attn1 = Attention(
            query_dim=dim,
            dim_head=attention_head_dim,
            heads=num_attention_heads,
            qk_norm="layer_norm" if qk_norm else None,
            eps=1e-6,
            bias=attention_bias,
            out_bias=attention_out_bias,
        )

        # 2. Feed Forward
        self.norm2 = CogVideoXLayerNormZero(time_embed_dim, dim, norm_elementwise_affine, norm_eps, bias=True)

        self.ff = FeedForward(
            dim,
            dropout=dropout,
            activation_fn=activation_fn,
            final_dropout=final_dropout,
            inner_dim=ff_inner_dim,
            bias=ff_bias,
        )

    def forward(self, hidden_states, encoder_hidden_states, temb, image_rotary_emb=None, attention_kwargs=None):
        text_seq_length = encoder_hidden_states.size(1)
        attention_kwargs = attention_kwargs or {}

        # norm & modulate
        norm_hidden_states, norm_encoder_hidden_states, gate_msa, enc_gate_msa = self.norm1(
            hidden_states, encoder_hidden_states, temb
        )

        # attention
        attn_hidden_states, attn_encoder_hidden_states = self.attn1(
            hidden_states=norm_hidden_states,
            encoder_hidden_states=norm_encoder_hidden_states,
            image_rotary_emb=image_rotary_emb,
            **attention_kwargs,
        )

        hidden_states = hidden_states + gate_msa * attn_hidden_states
        encoder_hidden_states = encoder_hidden_states + enc_gate_msa * attn_encoder_hidden_states

        # norm & modulate
        norm_hidden_states, norm_encoder_hidden_states, gate_ff, enc_gate_ff = self.norm2(
            hidden_states, encoder_hidden_states, temb
        )

        # feed-forward
        norm_hidden_states = torch.cat([norm_encoder_hidden_states, norm_hidden_states], dim=1)
        ff_output = self.ff(norm_hidden_states)

        hidden_states = hidden_states + gate_ff * ff_output[:, text_seq_length:]
        encoder_hidden_states = encoder_hidden_states + enc_gate_ff * ff_output[:, :text_seq_length]

        return hidden_states, encoder_hidden_states


class CogVideoXTransformer3DModel(nn.Module):
    def __init__(self, num_attention_heads=30, attention_head_dim=64, in_channels=16, out_channels=16,
                 flip_sin_to_cos=True, freq_shift=0, time_embed_dim=512, ofs_embed_dim=None, text_embed_dim=4096,
                 num_layers=30, dropout=0.0, attention_bias=True, sample_width=90, sample_height=60,
                 sample_frames=49, patch_size=2, patch_size_t=None, temporal_compression_ratio=4,
                 max_text_seq_length=226, activation_fn="gelu-approximate", timestep_activation_fn="silu",
                 norm_elementwise_affine=True, norm_eps=1e-5, spatial_interpolation_scale=1.875,
                 temporal_interpolation_scale=1.0, use_rotary_positional_embeddings=False,
                 use_learned_positional_embeddings=False, patch_bias=True):
        super().__init__()
        inner_dim = num_attention_heads * attention_head_dim
        # register_to_config: the replica keeps the two entries forward reads
        self.config = type("Config", (), dict(patch_size=patch_size, patch_size_t=patch_size_t))()

        if not use_rotary_positional_embeddings and use_learned_positional_embeddings:
            raise ValueError(
                "There are no CogVideoX checkpoints available with disable rotary embeddings and learned positional "
                "embeddings."
            )

        # 1. Patch embedding
        self.patch_embed = CogVideoXPatchEmbed(
            patch_size=patch_size,
            patch_size_t=patch_size_t,
            in_channels=in_channels,
            embed_dim=inner_dim,
            text_embed_dim=text_embed_dim,
            bias=patch_bias,
            sample_width=sample_width,
            sample_height=sample_height,
            sample_frames=sample_frames,
            temporal_compression_ratio=temporal_compression_ratio,
            max_text_seq_length=max_text_seq_length,
            spatial_interpolation_scale=spatial_interpolation_scale,
            temporal_interpolation_scale=temporal_interpolation_scale,
            use_positional_embeddings=not use_rotary_positional_embeddings,
            use_learned_positional_embeddings=use_learned_positional_embeddings,
        )
        self.embedding_dropout = nn.Dropout(dropout)

        # 2. Time embeddings and ofs embedding(Only CogVideoX1.5-5B I2V have)

        self.time_proj = Timesteps(inner_dim, flip_sin_to_cos, freq_shift)
        self.time_embedding = TimestepEmbedding(inner_dim, time_embed_dim, timestep_activation_fn)

        self.ofs_proj = None
        self.ofs_embedding = None
        if ofs_embed_dim:
            self.ofs_proj = Timesteps(ofs_embed_dim, flip_sin_to_cos, freq_shift)
            self.ofs_embedding = TimestepEmbedding(
                ofs_embed_dim, ofs_embed_dim, timestep_activation_fn
            )  # same as time embeddings, for ofs

        # 3. Define spatio-temporal transformers blocks
        self.transformer_blocks = nn.ModuleList(
            [
                CogVideoXBlock(
                    dim=inner_dim,
                    num_attention_heads=num_attention_heads,
                    attention_head_dim=attention_head_dim,
                    time_embed_dim=time_embed_dim,
                    dropout=dropout,
                    activation_fn=activation_fn,
                    attention_bias=attention_bias,
                    norm_elementwise_affine=norm_elementwise_affine,
                    norm_eps=norm_eps,
                )
                for _ in range(num_layers)
            ]
        )
        self.norm_final = nn.LayerNorm(inner_dim, norm_eps, norm_elementwise_affine)

        # 4. Output blocks
        self.norm_out = AdaLayerNorm(
            embedding_dim=time_embed_dim,
            output_dim=2 * inner_dim,
            norm_elementwise_affine=norm_elementwise_affine,
            norm_eps=norm_eps,
            chunk_dim=1,
        )

        if patch_size_t is None:
            # For CogVideox 1.0
            output_dim = patch_size * patch_size * out_channels
        else:
            # For CogVideoX 1.5
            output_dim = patch_size * patch_size * patch_size_t * out_channels

        self.proj_out = nn.Linear(inner_dim, output_dim)

    def forward(self, hidden_states, encoder_hidden_states, timestep, timestep_cond=None, ofs=None,
                image_rotary_emb=None, attention_kwargs=None, return_dict=True):
        batch_size, num_frames, channels, height, width = hidden_states.shape

        # 1. Time embedding
        timesteps = timestep
        t_emb = self.time_proj(timesteps)

        # timesteps does not contain any weights and will always return f32 tensors
        # but time_embedding might actually be running in fp16. so we need to cast here.
        t_emb = t_emb.to(dtype=hidden_states.dtype)
        emb = self.time_embedding(t_emb, timestep_cond)

        if self.ofs_embedding is not None:
            ofs_emb = self.ofs_proj(ofs)
            ofs_emb = ofs_emb.to(dtype=hidden_states.dtype)
            ofs_emb = self.ofs_embedding(ofs_emb)
            emb = emb + ofs_emb

        # 2. Patch embedding
        hidden_states = self.patch_embed(encoder_hidden_states, hidden_states)
        hidden_states = self.embedding_dropout(hidden_states)

        text_seq_length = encoder_hidden_states.shape[1]
        encoder_hidden_states = hidden_states[:, :text_seq_length]
        hidden_states = hidden_states[:, text_seq_length:]

        # 3. Transformer blocks
        for i, block in enumerate(self.transformer_blocks):
            hidden_states, encoder_hidden_states = block(
                hidden_states=hidden_states,
                encoder_hidden_states=encoder_hidden_states,
                temb=emb,
                image_rotary_emb=image_rotary_emb,
                attention_kwargs=attention_kwargs,
            )

        hidden_states = self.norm_final(hidden_states)

        # 4. Final block
        hidden_states = self.norm_out(hidden_states, temb=emb)
        hidden_states = self.proj_out(hidden_states)

        # 5. Unpatchify
        p = self.config.patch_size
        p_t = self.config.patch_size_t

        if p_t is None:
            output = hidden_states.reshape(batch_size, num_frames, height // p, width // p, -1, p, p)
            output = output.permute(0, 1, 4, 2, 5, 3, 6).flatten(5, 6).flatten(3, 4)
        else:
            output = hidden_states.reshape(
                batch_size, (num_frames + p_t - 1) // p_t, height // p, width // p, -1, p_t, p, p
            )
            output = output.permute(0, 1, 5, 4, 2, 6, 3, 7).flatten(6, 7).flatten(4, 5).flatten(1, 2)

        return (output,)


SAMPLE = 12  # sample_height = sample_width (latent pixels): the RoPE slice grid's max size is SAMPLE // patch = 6
LATENT_FRAMES = 4  # (num_frames - 1) // 4 + 1 = 3 latent frames, padded by the pipeline to a multiple of p_t = 2


def build():
    # CogVideoX 1.5 T2V flags, widths shrunk: 2 heads of 16 (RoPE t/h/w 4/6/6), time_embed_dim 24, text 20 wide,
    # 2 blocks, 4 latent channels, patch 2 x 2 x 2 (patch_bias False: the 1.5 Linear proj ignores it)
    return CogVideoXTransformer3DModel(num_attention_heads=2, attention_head_dim=16, in_channels=4, out_channels=4,
                                       time_embed_dim=24, ofs_embed_dim=None, text_embed_dim=20, num_layers=2,
                                       sample_width=SAMPLE, sample_height=SAMPLE, sample_frames=13, patch_size=2,
                                       patch_size_t=2, max_text_seq_length=6, use_rotary_positional_embeddings=True,
                                       use_learned_positional_embeddings=False, patch_bias=False)


def inputs(g):
    # CogVideoXPipeline._prepare_rotary_positional_embeddings, CogVideoX 1.5 branch: grid 8 // p = 4 each way,
    # base_num_frames (4 + p_t - 1) // p_t = 2, grid_type "slice" over max_size (SAMPLE // p, SAMPLE // p)
    p, p_t = 2, 2
    cos, sin = get_3d_rotary_pos_embed(embed_dim=16, crops_coords=None, grid_size=(8 // p, 8 // p),
                                       temporal_size=(LATENT_FRAMES + p_t - 1) // p_t, grid_type="slice",
                                       max_size=(SAMPLE // p, SAMPLE // p))
    return {"encoder_hidden_states": torch.randn((1, 6, 20), generator=g),
            "image_rotary_cos": cos, "image_rotary_sin": sin,
            "noise": torch.randn((1, LATENT_FRAMES, 4, 8, 8), generator=g)}


def call(model, x, sigma, c):
    # CogVideoXPipeline: timestep = t.expand(latent_model_input.shape[0]) of the scheduler's int64 timesteps;
    # scale_model_input is the identity (CogVideoXDPMScheduler); noise_pred = transformer(...)[0].float()
    t = torch.tensor(int(round(sigma * 1000)), dtype=torch.int64)
    timestep = t.expand(x.shape[0])
    noise_pred = model(hidden_states=x, encoder_hidden_states=c["encoder_hidden_states"], timestep=timestep,
                       image_rotary_emb=(c["image_rotary_cos"], c["image_rotary_sin"]), attention_kwargs=None,
                       return_dict=False)[0]
    return noise_pred.float()


PRODUCER = dict(
    library_source="replica of huggingface/diffusers cogvideox_transformer_3d.py@00789ad1e433 and the parts it "
                   "imports (torch 1.13)",
    timestep="round(sigma*1000) int64 expanded to the batch (CogVideoXPipeline: t.expand(B), CogVideoXDPM timesteps)",
    velocity="model output as is (a v-prediction model run in a flow loop), not negated; noise_pred.float()",
    note="CogVideoX 1.5 T2V DiT: CogVideoXPatchEmbed 1.5 branch (latents [B, F, C, H, W] permuted and reshaped into "
         "2x2x2 space-time patches, channels last inside each patch, one Linear) + text_proj Linear, [text, video] "
         "sequence, no positional table; sinusoid (inner_dim wide, flip_sin_to_cos) + SiLU MLP to time_embed_dim; "
         "CogVideoXLayerNormZero (one LayerNorm shared by both streams, 6-way shift/scale/gate for video and text) "
         "before attention and before the FFN; joint full attention over [text, video] with per-head LayerNorm q/k "
         "norm and interleaved 3-D RoPE (get_3d_rotary_pos_embed grid_type 'slice', dims 4/6/6 over t/h/w, passed "
         "in as image_rotary_emb) written in place on the video rows of q and k only; one GELU-tanh FFN over the "
         "concatenated streams with per-stream gates; norm_final LayerNorm over the video stream only, then "
         "AdaLayerNorm (shift, scale); proj_out to p_t*p*p*C and the 1.5 unpatchify (frames and p_t merged); "
         "4 latent frames (3 + 1 pipeline pad) of 8x8, 6 text tokens; RoPE tables recorded as inputs "
         "image_rotary_cos/sin")

if __name__ == "__main__":
    capture("cogvideox", build, inputs, call, sys.argv[1], PRODUCER)
