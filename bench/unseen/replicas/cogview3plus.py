"""CogView3-Plus text-to-image DiT (CogView3PlusTransformer2DModel), reimplemented for torch 1.13 (no diffusers here),
captured small in f32 on CPU in run.py's 3-step flow loop.

Follows huggingface/diffusers src/diffusers/models/transformers/transformer_cogview3plus.py at
4ea9e828b1c35a083caa484a316e48ce7404acb8 (read in full: CogView3PlusTransformerBlock with its fp16 clip,
CogView3PlusTransformer2DModel with patch_embed, time_condition_embed = CogView3CombinedTimestepSizeEmbeddings,
pooled_projection_dim 3·2·condition_dim, norm_out, proj_out, the einsum unpatchify; an older stored version,
059812ac0b19284dda7049fa3d21865cacda9e2c, names pos_embed / CogView3CombinedTimestepConditionEmbeddings and is not
followed) with the parts it imports. embeddings.py's CogView3PlusPatchEmbed (patches cut by view/permute, one Linear
over the C·p·p patch vector, text_proj Linear, [text, image] joined, a non-persistent 2-D sin-cos table over
pos_embed_max_size² sliced to the latent grid [:h, :w] (its corner), zeros for the text rows, added, cast back) and
CogView3CombinedTimestepSizeEmbeddings (time_proj sinusoid of timesteps_dim = inner_dim, condition_proj sinusoid of
condition_dim over each of original_size, crop_coords, target_size's two numbers, joined in that order; a SiLU MLP
each, summed) are written from the text of a current embeddings.py copy (the huggingface/diffusers embeddings.py
the index holds, 168e5b7f / 0002117e, is older than CogView3; the text read is a copy of upstream's, whose
get_2d_sincos_pos_embed output_type "pt" path matches sd35.py's, imported from there). normalization.py at
04e9323055098220d57b84cfe68b6850b3b3fc0c (read: CogView3PlusAdaLayerNormZeroTextImage, 12 chunks, separate affine-free
LayerNorms norm_x / norm_c for image and text; AdaLayerNormContinuous (scale, shift), taken from hunyuanimage21.py,
which has it as upstream writes it). attention_processor.py's Attention as the block builds it (out_dim = dim,
bias True, qk_norm "layer_norm" with elementwise_affine False, eps 1e-6: no q/k norm parameters) and
CogVideoXAttnProcessor2_0 (checked against copies of upstream's text; the index's huggingface/diffusers copy,
001d4da0, predates it): [text, image] joined, q/k/v, per-head LayerNorm on q and k, no RoPE here
(image_rotary_emb None), SDPA, to_out, split back. attention.py's FeedForward ("gelu-approximate", mult 4, no final
dropout) and embeddings.py's Timesteps / TimestepEmbedding from parts.py; PixArtAlphaTextProjection act "silu" from
hunyuanimage21.py. The same module tree, parameter names and shapes, call boundaries and arithmetic. Stand-in for what
torch 1.13 lacks: F.scaled_dot_product_attention (run.sdpa: its math, default scale, no mask).

The constructs it shows: one shared timestep+size conditioning vector (the SDXL-style micro-conditions original_size,
crop_coords, target_size each through a flip_sin_to_cos sinusoid of condition_dim channels, flattened and joined to
6·condition_dim, then a SiLU MLP, added to the timestep MLP); per block a 12-way adaLN-Zero (separate shift/scale/gate
for image and text, for attention and FFN) over affine-free LayerNorms; joint full attention over [text, image] with
affine-free per-head LayerNorm q/k; the FFN's LayerNorms (norm2, norm2_context) are the block's own, modulated by
the same 12-way chunks; one GELU-tanh FFN over the concatenated streams with per-stream gates; absolute 2-D sin-cos
position table added to the image tokens only (none on text); AdaLayerNormContinuous (scale, shift) over the image
stream, proj_out to p·p·C and unpatchify by einsum "nhwcpq->nchpwq".

Config: CogView3-Plus-3B flags (patch_size 2), shrunk in width: 2 heads of 16 (inner 32; upstream 64 of 40),
time_embed_dim 24 (512), condition_dim 8 (256; pooled_projection_dim 48), text_embed_dim 20 (4096), 2 blocks (30),
in/out channels 4 (16), pos_embed_max_size 8 (128), sample_size 8 (128).

Pipeline as CogView3PlusPipeline (pipelines/cogview3/pipeline_cogview3plus.py at
06d92bafafcd30764977474b41994e2dcfbabf87) calls it, guidance_scale 1 (no unconditional half): latents [B, C, H, W] =
[1, 4, 8, 8]; height = width = 8·vae_scale_factor 8 = 64 pixels, original_size = target_size = (64, 64),
crops_coords_top_left (0, 0), each torch.tensor([...], dtype=prompt_embeds.dtype) repeated to the batch ([1, 2]);
timestep = t.expand(B), the CogVideoXDDIMScheduler's int64 timesteps (round(sigma*1000) here); scale_model_input the
identity; the output used as is (noise_pred.float(); a v-prediction model run in a flow loop). 6 random
prompt-embedding tokens 20 wide. 4 x 4 = 16 image tokens.

usage: /usr/bin/python3 bench/unseen/replicas/cogview3plus.py OUTDIR
REPLICA_DTYPE=bf16 [REPLICA_DEVICE=cuda] as run.py's replicas: the bf16 run, beside the f32 one.
"""
import sys

import torch
import torch.nn as nn

from consisid import apply_rotary_emb
from hunyuanimage21 import AdaLayerNormContinuous, PixArtAlphaTextProjection
from parts import FeedForward, TimestepEmbedding, Timesteps
from run import capture, sdpa
from sd35 import get_2d_sincos_pos_embed


class CogView3PlusPatchEmbed(nn.Module):
    def __init__(self, in_channels=16, hidden_size=2560, patch_size=2, text_hidden_size=4096, pos_embed_max_size=128):
        super().__init__()
        self.in_channels = in_channels
        self.hidden_size = hidden_size
        self.patch_size = patch_size
        self.text_hidden_size = text_hidden_size
        self.pos_embed_max_size = pos_embed_max_size
        # Linear projection for image patches
        self.proj = nn.Linear(in_channels * patch_size**2, hidden_size)

        # Linear projection for text embeddings
        self.text_proj = nn.Linear(text_hidden_size, hidden_size)

        pos_embed = get_2d_sincos_pos_embed(
            hidden_size, pos_embed_max_size, base_size=pos_embed_max_size, output_type="pt"
        )
        pos_embed = pos_embed.reshape(pos_embed_max_size, pos_embed_max_size, hidden_size)
        self.register_buffer("pos_embed", pos_embed.float(), persistent=False)

    def forward(self, hidden_states, encoder_hidden_states):
        batch_size, channel, height, width = hidden_states.shape

        if height % self.patch_size != 0 or width % self.patch_size != 0:
            raise ValueError("Height and width must be divisible by patch size")

        height = height // self.patch_size
        width = width // self.patch_size
        hidden_states = hidden_states.view(batch_size, channel, height, self.patch_size, width, self.patch_size)
        hidden_states = hidden_states.permute(0, 2, 4, 1, 3, 5).contiguous()
        hidden_states = hidden_states.view(batch_size, height * width, channel * self.patch_size * self.patch_size)

        # Project the patches
        hidden_states = self.proj(hidden_states)
        encoder_hidden_states = self.text_proj(encoder_hidden_states)
        hidden_states = torch.cat([encoder_hidden_states, hidden_states], dim=1)

        # Calculate text_length
        text_length = encoder_hidden_states.shape[1]

        image_pos_embed = self.pos_embed[:height, :width].reshape(height * width, -1)
        text_pos_embed = torch.zeros(
            (text_length, self.hidden_size), dtype=image_pos_embed.dtype, device=image_pos_embed.device
        )
        pos_embed = torch.cat([text_pos_embed, image_pos_embed], dim=0)[None, ...]

        return (hidden_states + pos_embed).to(hidden_states.dtype)


class CogView3CombinedTimestepSizeEmbeddings(nn.Module):
    def __init__(self, embedding_dim, condition_dim, pooled_projection_dim, timesteps_dim=256):
        super().__init__()

        self.time_proj = Timesteps(num_channels=timesteps_dim, flip_sin_to_cos=True, downscale_freq_shift=0)
        self.condition_proj = Timesteps(num_channels=condition_dim, flip_sin_to_cos=True, downscale_freq_shift=0)
        self.timestep_embedder = TimestepEmbedding(in_channels=timesteps_dim, time_embed_dim=embedding_dim)
        self.condition_embedder = PixArtAlphaTextProjection(pooled_projection_dim, embedding_dim, act_fn="silu")

    def forward(self, timestep, original_size, target_size, crop_coords, hidden_dtype):
        timesteps_proj = self.time_proj(timestep)

        original_size_proj = self.condition_proj(original_size.flatten()).view(original_size.size(0), -1)
        crop_coords_proj = self.condition_proj(crop_coords.flatten()).view(crop_coords.size(0), -1)
        target_size_proj = self.condition_proj(target_size.flatten()).view(target_size.size(0), -1)

        condition_proj = torch.cat([original_size_proj, crop_coords_proj, target_size_proj], dim=1)

        timesteps_emb = self.timestep_embedder(timesteps_proj.to(dtype=hidden_dtype))  # (B, embedding_dim)
        condition_emb = self.condition_embedder(condition_proj.to(dtype=hidden_dtype))  # (B, embedding_dim)

        conditioning = timesteps_emb + condition_emb
        return conditioning


class CogView3PlusAdaLayerNormZeroTextImage(nn.Module):
    def __init__(self, embedding_dim, dim):
        super().__init__()

        self.silu = nn.SiLU()
        self.linear = nn.Linear(embedding_dim, 12 * dim, bias=True)
        self.norm_x = nn.LayerNorm(dim, elementwise_affine=False, eps=1e-5)
        self.norm_c = nn.LayerNorm(dim, elementwise_affine=False, eps=1e-5)

    def forward(self, x, context, emb=None):
        emb = self.linear(self.silu(emb))
        (
            shift_msa,
            scale_msa,
            gate_msa,
            shift_mlp,
            scale_mlp,
            gate_mlp,
            c_shift_msa,
            c_scale_msa,
            c_gate_msa,
            c_shift_mlp,
            c_scale_mlp,
            c_gate_mlp,
        ) = emb.chunk(12, dim=1)
        normed_x = self.norm_x(x)
        normed_context = self.norm_c(context)
        x = normed_x * (1 + scale_msa[:, None]) + shift_msa[:, None]
        context = normed_context * (1 + c_scale_msa[:, None]) + c_shift_msa[:, None]
        return x, gate_msa, shift_mlp, scale_mlp, gate_mlp, context, c_gate_msa, c_shift_mlp, c_scale_mlp, c_gate_mlp


class CogVideoXAttnProcessor2_0:
    """attention_processor.CogVideoXAttnProcessor2_0: not a module (upstream holds it as attn.processor)."""

    def __call__(self, attn, hidden_states, encoder_hidden_states, attention_mask=None, image_rotary_emb=None):
        text_seq_length = encoder_hidden_states.size(1)

        hidden_states = torch.cat([encoder_hidden_states, hidden_states], dim=1)

        batch_size, sequence_length, _ = (
            hidden_states.shape if encoder_hidden_states is None else encoder_hidden_states.shape
        )

        if attention_mask is not None:
            raise NotImplementedError("CogView3-Plus passes no attention mask")

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

        # Apply RoPE if needed
        if image_rotary_emb is not None:
            query[:, :, text_seq_length:] = apply_rotary_emb(query[:, :, text_seq_length:], image_rotary_emb)
            if not attn.is_cross_attention:
                key[:, :, text_seq_length:] = apply_rotary_emb(key[:, :, text_seq_length:], image_rotary_emb)

        hidden_states = sdpa(query, key, value, mask=attention_mask)
        hidden_states = hidden_states.transpose(1, 2).reshape(batch_size, -1, attn.heads * head_dim)

        # linear proj
        hidden_states = attn.to_out[0](hidden_states)
        # dropout
        hidden_states = attn.to_out[1](hidden_states)

        encoder_hidden_states, hidden_states = hidden_states.split(
            [text_seq_length, hidden_states.size(1) - text_seq_length], dim=1
        )
        return hidden_states, encoder_hidden_states


class Attention(nn.Module):
    """attention_processor.Attention, the parts CogView3PlusTransformerBlock's call reaches: self-attention
    (cross_attention_dim None), out_dim set, qk_norm "layer_norm" with elementwise_affine as given; its forward hands
    the call to the processor."""

    def __init__(self, query_dim, cross_attention_dim=None, heads=8, dim_head=64, dropout=0.0, bias=False,
                 qk_norm=None, out_bias=True, eps=1e-5, processor=None, out_dim=None, elementwise_affine=True):
        super().__init__()
        self.inner_dim = out_dim if out_dim is not None else dim_head * heads
        self.query_dim = query_dim
        self.use_bias = bias
        self.is_cross_attention = cross_attention_dim is not None
        self.cross_attention_dim = cross_attention_dim if cross_attention_dim is not None else query_dim
        self.out_dim = out_dim if out_dim is not None else query_dim
        self.scale = dim_head**-0.5
        self.heads = out_dim // dim_head if out_dim is not None else heads

        if qk_norm is None:
            self.norm_q = None
            self.norm_k = None
        elif qk_norm == "layer_norm":
            self.norm_q = nn.LayerNorm(dim_head, eps=eps, elementwise_affine=elementwise_affine)
            self.norm_k = nn.LayerNorm(dim_head, eps=eps, elementwise_affine=elementwise_affine)
        else:
            raise NotImplementedError(qk_norm)

        self.to_q = nn.Linear(query_dim, self.inner_dim, bias=bias)
        self.to_k = nn.Linear(self.cross_attention_dim, self.inner_dim, bias=bias)
        self.to_v = nn.Linear(self.cross_attention_dim, self.inner_dim, bias=bias)

        self.to_out = nn.ModuleList([])
        self.to_out.append(nn.Linear(self.inner_dim, self.out_dim, bias=out_bias))
        self.to_out.append(nn.Dropout(dropout))

        self.processor = processor

    def forward(self, hidden_states, encoder_hidden_states=None, attention_mask=None, **cross_attention_kwargs):
        return self.processor(self, hidden_states, encoder_hidden_states=encoder_hidden_states,
                              attention_mask=attention_mask, **cross_attention_kwargs)


class CogView3PlusTransformerBlock(nn.Module):
    def __init__(self, dim=2560, num_attention_heads=64, attention_head_dim=40, time_embed_dim=512):
        super().__init__()

        self.norm1 = CogView3PlusAdaLayerNormZeroTextImage(embedding_dim=time_embed_dim, dim=dim)

        self.attn1 = Attention(
            query_dim=dim,
            heads=num_attention_heads,
            dim_head=attention_head_dim,
            out_dim=dim,
            bias=True,
            qk_norm="layer_norm",
            elementwise_affine=False,
            eps=1e-6,
            processor=CogVideoXAttnProcessor2_0(),
        )

        self.norm2 = nn.LayerNorm(dim, elementwise_affine=False, eps=1e-5)
        self.norm2_context = nn.LayerNorm(dim, elementwise_affine=False, eps=1e-5)

        self.ff = FeedForward(dim=dim)  # FeedForward(dim=dim, dim_out=dim, activation_fn="gelu-approximate")

    def forward(self, hidden_states, encoder_hidden_states, emb):
        text_seq_length = encoder_hidden_states.size(1)

        # norm & modulate
        (
            norm_hidden_states,
            gate_msa,
            shift_mlp,
            scale_mlp,
            gate_mlp,
            norm_encoder_hidden_states,
            c_gate_msa,
            c_shift_mlp,
            c_scale_mlp,
            c_gate_mlp,
        ) = self.norm1(hidden_states, encoder_hidden_states, emb)

        # attention
        attn_hidden_states, attn_encoder_hidden_states = self.attn1(
            hidden_states=norm_hidden_states, encoder_hidden_states=norm_encoder_hidden_states
        )

        hidden_states = hidden_states + gate_msa.unsqueeze(1) * attn_hidden_states
        encoder_hidden_states = encoder_hidden_states + c_gate_msa.unsqueeze(1) * attn_encoder_hidden_states

        # norm & modulate
        norm_hidden_states = self.norm2(hidden_states)
        norm_hidden_states = norm_hidden_states * (1 + scale_mlp[:, None]) + shift_mlp[:, None]

        norm_encoder_hidden_states = self.norm2_context(encoder_hidden_states)
        norm_encoder_hidden_states = norm_encoder_hidden_states * (1 + c_scale_mlp[:, None]) + c_shift_mlp[:, None]

        # feed-forward
        norm_hidden_states = torch.cat([norm_encoder_hidden_states, norm_hidden_states], dim=1)
        ff_output = self.ff(norm_hidden_states)

        hidden_states = hidden_states + gate_mlp.unsqueeze(1) * ff_output[:, text_seq_length:]
        encoder_hidden_states = encoder_hidden_states + c_gate_mlp.unsqueeze(1) * ff_output[:, :text_seq_length]

        if hidden_states.dtype == torch.float16:
            hidden_states = hidden_states.clip(-65504, 65504)
        if encoder_hidden_states.dtype == torch.float16:
            encoder_hidden_states = encoder_hidden_states.clip(-65504, 65504)
        return hidden_states, encoder_hidden_states


class CogView3PlusTransformer2DModel(nn.Module):
    def __init__(self, patch_size=2, in_channels=16, num_layers=30, attention_head_dim=40, num_attention_heads=64,
                 out_channels=16, text_embed_dim=4096, time_embed_dim=512, condition_dim=256, pos_embed_max_size=128,
                 sample_size=128):
        super().__init__()
        # register_to_config: the replica keeps the entry forward reads
        self.config = type("Config", (), dict(patch_size=patch_size, sample_size=sample_size))()
        self.out_channels = out_channels
        self.inner_dim = num_attention_heads * attention_head_dim

        # CogView3 uses 3 additional SDXL-like conditions - original_size, target_size, crop_coords
        # Each of these are sincos embeddings of shape 2 * condition_dim
        self.pooled_projection_dim = 3 * 2 * condition_dim

        self.patch_embed = CogView3PlusPatchEmbed(
            in_channels=in_channels,
            hidden_size=self.inner_dim,
            patch_size=patch_size,
            text_hidden_size=text_embed_dim,
            pos_embed_max_size=pos_embed_max_size,
        )

        self.time_condition_embed = CogView3CombinedTimestepSizeEmbeddings(
            embedding_dim=time_embed_dim,
            condition_dim=condition_dim,
            pooled_projection_dim=self.pooled_projection_dim,
            timesteps_dim=self.inner_dim,
        )

        self.transformer_blocks = nn.ModuleList(
            [
                CogView3PlusTransformerBlock(
                    dim=self.inner_dim,
                    num_attention_heads=num_attention_heads,
                    attention_head_dim=attention_head_dim,
                    time_embed_dim=time_embed_dim,
                )
                for _ in range(num_layers)
            ]
        )

        self.norm_out = AdaLayerNormContinuous(
            embedding_dim=self.inner_dim,
            conditioning_embedding_dim=time_embed_dim,
            elementwise_affine=False,
            eps=1e-6,
        )
        self.proj_out = nn.Linear(self.inner_dim, patch_size * patch_size * self.out_channels, bias=True)

        self.gradient_checkpointing = False

    def forward(self, hidden_states, encoder_hidden_states, timestep, original_size, target_size, crop_coords,
                return_dict=True):
        height, width = hidden_states.shape[-2:]
        text_seq_length = encoder_hidden_states.shape[1]

        hidden_states = self.patch_embed(
            hidden_states, encoder_hidden_states
        )  # takes care of adding positional embeddings too.
        emb = self.time_condition_embed(timestep, original_size, target_size, crop_coords, hidden_states.dtype)

        encoder_hidden_states = hidden_states[:, :text_seq_length]
        hidden_states = hidden_states[:, text_seq_length:]

        for index_block, block in enumerate(self.transformer_blocks):
            hidden_states, encoder_hidden_states = block(
                hidden_states=hidden_states,
                encoder_hidden_states=encoder_hidden_states,
                emb=emb,
            )

        hidden_states = self.norm_out(hidden_states, emb)
        hidden_states = self.proj_out(hidden_states)  # (batch_size, height*width, patch_size*patch_size*out_channels)

        # unpatchify
        patch_size = self.config.patch_size
        height = height // patch_size
        width = width // patch_size

        hidden_states = hidden_states.reshape(
            shape=(hidden_states.shape[0], height, width, self.out_channels, patch_size, patch_size)
        )
        hidden_states = torch.einsum("nhwcpq->nchpwq", hidden_states)
        output = hidden_states.reshape(
            shape=(hidden_states.shape[0], self.out_channels, height * patch_size, width * patch_size)
        )

        return (output,)


VAE_SCALE = 8  # 2 ** (len(vae.config.block_out_channels) - 1)
LATENT = 8  # latent height = width: a 4 x 4 patch grid, sliced from the 8 x 8 position table


def build():
    # CogView3-Plus-3B flags, widths shrunk: 2 heads of 16, time_embed_dim 24, condition_dim 8 (pooled 48),
    # text 20 wide, 2 blocks, 4 latent channels, patch 2, position table 8 x 8
    return CogView3PlusTransformer2DModel(patch_size=2, in_channels=4, num_layers=2, attention_head_dim=16,
                                          num_attention_heads=2, out_channels=4, text_embed_dim=20, time_embed_dim=24,
                                          condition_dim=8, pos_embed_max_size=8, sample_size=LATENT)


def inputs(g):
    # CogView3PlusPipeline step 7: original_size = target_size = (height, width) in pixels, crops_coords_top_left
    # (0, 0), as torch.tensor([...], dtype=prompt_embeds.dtype), repeated to batch_size * num_images_per_prompt
    height = width = LATENT * VAE_SCALE
    batch = 1
    return {"encoder_hidden_states": torch.randn((batch, 6, 20), generator=g),
            "original_size": torch.tensor([(height, width)], dtype=torch.float32).repeat(batch, 1),
            "target_size": torch.tensor([(height, width)], dtype=torch.float32).repeat(batch, 1),
            "crop_coords": torch.tensor([(0, 0)], dtype=torch.float32).repeat(batch, 1),
            "noise": torch.randn((batch, 4, LATENT, LATENT), generator=g)}


def call(model, x, sigma, c):
    # CogView3PlusPipeline: timestep = t.expand(latent_model_input.shape[0]) of the scheduler's int64 timesteps;
    # scale_model_input is the identity (CogVideoXDDIMScheduler); noise_pred = transformer(...)[0].float()
    t = torch.tensor(int(round(sigma * 1000)), dtype=torch.int64)
    timestep = t.expand(x.shape[0])
    noise_pred = model(hidden_states=x, encoder_hidden_states=c["encoder_hidden_states"], timestep=timestep,
                       original_size=c["original_size"], target_size=c["target_size"], crop_coords=c["crop_coords"],
                       return_dict=False)[0]
    return noise_pred.float()


PRODUCER = dict(
    library_source="replica of huggingface/diffusers transformer_cogview3plus.py@4ea9e828b1c3 and the parts it "
                   "imports (torch 1.13)",
    timestep="round(sigma*1000) int64 expanded to the batch (CogView3PlusPipeline: t.expand(B), CogVideoXDDIM "
             "timesteps)",
    velocity="model output as is (a v-prediction model run in a flow loop), not negated; noise_pred.float()",
    note="CogView3-Plus DiT: CogView3PlusPatchEmbed (latents [B, C, H, W] viewed/permuted into 2x2 patches, "
         "channels first inside each patch, one Linear) + text_proj Linear, [text, image] sequence, a 2-D sin-cos "
         "table (8x8 max grid, corner 4x4 slice) added to image rows, zeros on text rows; conditioning = timestep "
         "sinusoid (inner_dim wide, flip_sin_to_cos) SiLU MLP + SiLU MLP of the original_size / crop_coords / "
         "target_size sinusoids (condition_dim each per number, joined to 6*condition_dim); per block "
         "CogView3PlusAdaLayerNormZeroTextImage (12 chunks, affine-free LayerNorms norm_x / norm_c) before "
         "attention, affine-free norm2 / norm2_context modulated by the same chunks before the FFN; joint full "
         "attention over [text, image] with affine-free per-head LayerNorm q/k (eps 1e-6), no RoPE; one GELU-tanh "
         "FFN over the concatenated streams with per-stream gates; AdaLayerNormContinuous (scale, shift) over the "
         "image stream; proj_out to p*p*C and einsum unpatchify; original_size = target_size = (64, 64), "
         "crop_coords (0, 0) recorded as inputs; 6 text tokens, 8x8x4 latent")

if __name__ == "__main__":
    capture("cogview3plus", build, inputs, call, sys.argv[1], PRODUCER)
