"""SANA with a ControlNet (SanaControlNetModel feeding SanaTransformer2DModel), reimplemented for torch 1.13 (no
diffusers here), captured small in f32 on CPU.

Follows huggingface/diffusers src/diffusers/models/controlnets/controlnet_sana.py at
530fe0722df0bfda84a6abb7f55d3f4c862d6215 line for line (SanaControlNetModel, interpolation_scale None so its
PatchEmbed has no position table): the transformer's own input layers (patch_embed, time_embed AdaLayerNormSingle,
caption_projection, caption_norm) and SanaTransformerBlocks; the patch embedding called twice, on the latents and
on the control latent, hidden_states + input_block(patch_embed(controlnet_cond)) with input_block a Linear
(zero-initialised upstream, redrawn here like every weight, so that the control signal flows); every block's output
kept, each through its own Linear controlnet_blocks[i] (zero-initialised upstream, redrawn here), then each
multiplied by conditioning_scale. The ControlNet converts the 0/1 caption mask to the (1 − mask)·−10000 bias itself,
as the transformer does (the pipeline passes both the same 2-D mask). The transformer is
src/diffusers/models/transformers/sana_transformer.py at the same commit: sana.py's SanaTransformer2DModel and parts
(SanaTransformerBlock with its ReLU linear self-attention and SDPA cross-attention, GLUMBConv, SanaModulatedNorm,
PatchEmbed; allegro.py's AdaLayerNormSingle and PixArtAlphaTextProjection, hunyuanimage21.py's RMSNorm) imported as
they are (upstream's controlnet_sana.py imports the same classes: SanaTransformerBlock from sana_transformer,
PatchEmbed and PixArtAlphaTextProjection from embeddings, AdaLayerNormSingle and RMSNorm from normalization),
its forward re-stated in a subclass with what this commit adds: after block index_block, if
controlnet_block_samples is given and 0 < index_block <= len(controlnet_block_samples), hidden_states = hidden_states
+ controlnet_block_samples[index_block - 1] (block 0 and the blocks past the ControlNet's depth get none: with
upstream's 20 and 7 layers, blocks 1-7 take residuals 0-6). zero_module is controlnet.py's (upstream imports it from
.controlnet). Stand-in for what torch 1.13 lacks: F.scaled_dot_product_attention (its math path, in sana.py).

Pipeline as SanaControlNetPipeline (pipelines/sana/pipeline_sana_controlnet.py at
04957c2003faa079d73e5a749655ccc0ba4bddbf) calls the two models with guidance_scale 1 (no unconditional call, as
sana.py): control_image prepared, VAE-encoded and times scaling_factor (drawn here as a latent [1, 4, 4, 8]);
each step timestep = t.expand(B) (t = σ·1000 as the flow scheduler gives it, f32); controlnet_block_samples =
self.controlnet(latents.to(controlnet dtype), encoder_hidden_states=prompt_embeds.to(controlnet dtype),
encoder_attention_mask=prompt_attention_mask, timestep=timestep, return_dict=False, attention_kwargs=None,
controlnet_cond=control_image, conditioning_scale=controlnet_conditioning_scale)[0] with
controlnet_conditioning_scale 0.7 (the default 1.0; 0.7 so that the scale is a real multiply); then noise_pred =
self.transformer(latents.to(transformer dtype), encoder_hidden_states=prompt_embeds, encoder_attention_mask,
timestep, return_dict=False, attention_kwargs=None, controlnet_block_samples=tuple(t.to(transformer dtype) for t in
controlnet_block_samples))[0].float(); out_channels 4 is not twice the latent channels, so no learned-sigma split;
the output taken as the flow velocity as is. prompt_embeds [1, 5, 24] with the tokenizer's 0/1 mask, its last row
padding, as sana.py. The two models are held by one container module (the pipeline's attribute names: controlnet,
transformer) that is never called itself, so that run.py's one-model capture records both (transformer.controlnet...,
transformer.transformer...).

The constructs it shows beyond sana.py's: one PatchEmbed module called twice per step (latents, control latent);
a zero-initialised Linear (input_block) on the control tokens added to the image tokens before any block; a tap
after every ControlNet block through a Linear of its own, times a scale; the transformer adding residual i to the
output of block i + 1, so the first and last blocks get none.

Tiny config: both as sana.py's build (2 linear-attention heads of 32, d 64, 2 cross-attention heads of 32, a 24-wide
caption, mlp_ratio 1.5, patch 1, 4 latent channels, sample_size 8); the transformer 3 blocks (upstream 20), the
ControlNet 1 block (upstream 7): block 1 takes residual 0, blocks 0 and 2 none; latents [1, 4, 4, 8] (32 tokens;
not square, so that the Mix-FFN's unflatten(1, (height, width)) and the unpatchify are pinned, and half sana.py's 64
tokens: the trace is about 7.4 MB, sana.py's 2-block one 6.2 MB).

usage: /usr/bin/python3 bench/unseen/replicas/sana_controlnet.py OUTDIR
REPLICA_DTYPE=bf16 [REPLICA_DEVICE=cuda] as run.py's replicas: the bf16 run, beside the f32 one.
"""
import sys

import torch
import torch.nn as nn

from controlnet import zero_module
from run import capture
from sana import (AdaLayerNormSingle, PatchEmbed, PixArtAlphaTextProjection, RMSNorm, SanaTransformer2DModel,
                  SanaTransformerBlock)


class SanaControlNetModel(nn.Module):
    def __init__(self, in_channels=32, out_channels=32, num_attention_heads=70, attention_head_dim=32, num_layers=7,
                 num_cross_attention_heads=20, cross_attention_head_dim=112, cross_attention_dim=2240,
                 caption_channels=2304, mlp_ratio=2.5, dropout=0.0, attention_bias=False, sample_size=32,
                 patch_size=1, norm_elementwise_affine=False, norm_eps=1e-6, interpolation_scale=None):
        super().__init__()
        self.patch_size = patch_size
        out_channels = out_channels or in_channels
        inner_dim = num_attention_heads * attention_head_dim
        # 1. Patch Embedding
        self.patch_embed = PatchEmbed(height=sample_size, width=sample_size, patch_size=patch_size,
                                      in_channels=in_channels, embed_dim=inner_dim,
                                      interpolation_scale=interpolation_scale,
                                      pos_embed_type="sincos" if interpolation_scale is not None else None)
        # 2. Additional condition embeddings
        self.time_embed = AdaLayerNormSingle(inner_dim)
        self.caption_projection = PixArtAlphaTextProjection(in_features=caption_channels, hidden_size=inner_dim)
        self.caption_norm = RMSNorm(inner_dim, eps=1e-5, elementwise_affine=True)
        # 3. Transformer blocks
        self.transformer_blocks = nn.ModuleList([
            SanaTransformerBlock(inner_dim, num_attention_heads, attention_head_dim, dropout=dropout,
                                 num_cross_attention_heads=num_cross_attention_heads,
                                 cross_attention_head_dim=cross_attention_head_dim,
                                 cross_attention_dim=cross_attention_dim, attention_bias=attention_bias,
                                 norm_elementwise_affine=norm_elementwise_affine, norm_eps=norm_eps,
                                 mlp_ratio=mlp_ratio)
            for _ in range(num_layers)])
        # controlnet_blocks
        self.controlnet_blocks = nn.ModuleList([])
        self.input_block = zero_module(nn.Linear(inner_dim, inner_dim))
        for _ in range(len(self.transformer_blocks)):
            controlnet_block = nn.Linear(inner_dim, inner_dim)
            controlnet_block = zero_module(controlnet_block)
            self.controlnet_blocks.append(controlnet_block)

    def forward(self, hidden_states, encoder_hidden_states, timestep, controlnet_cond, conditioning_scale=1.0,
                encoder_attention_mask=None, attention_mask=None, attention_kwargs=None, return_dict=True):
        # ensure attention_mask is a bias, and give it a singleton query_tokens dimension.
        if attention_mask is not None and attention_mask.ndim == 2:
            attention_mask = (1 - attention_mask.to(hidden_states.dtype)) * -10000.0
            attention_mask = attention_mask.unsqueeze(1)
        # convert encoder_attention_mask to a bias the same way we do for attention_mask
        if encoder_attention_mask is not None and encoder_attention_mask.ndim == 2:
            encoder_attention_mask = (1 - encoder_attention_mask.to(hidden_states.dtype)) * -10000.0
            encoder_attention_mask = encoder_attention_mask.unsqueeze(1)
        # 1. Input
        batch_size, num_channels, height, width = hidden_states.shape
        p = self.patch_size
        post_patch_height, post_patch_width = height // p, width // p
        hidden_states = self.patch_embed(hidden_states)
        hidden_states = hidden_states + self.input_block(self.patch_embed(controlnet_cond.to(hidden_states.dtype)))
        timestep, embedded_timestep = self.time_embed(timestep, batch_size=batch_size,
                                                      hidden_dtype=hidden_states.dtype)
        encoder_hidden_states = self.caption_projection(encoder_hidden_states)
        encoder_hidden_states = encoder_hidden_states.view(batch_size, -1, hidden_states.shape[-1])
        encoder_hidden_states = self.caption_norm(encoder_hidden_states)
        # 2. Transformer blocks
        block_res_samples = ()
        for block in self.transformer_blocks:
            hidden_states = block(hidden_states, attention_mask, encoder_hidden_states, encoder_attention_mask,
                                  timestep, post_patch_height, post_patch_width)
            block_res_samples = block_res_samples + (hidden_states,)
        # 3. ControlNet blocks
        controlnet_block_res_samples = ()
        for block_res_sample, controlnet_block in zip(block_res_samples, self.controlnet_blocks):
            block_res_sample = controlnet_block(block_res_sample)
            controlnet_block_res_samples = controlnet_block_res_samples + (block_res_sample,)
        controlnet_block_res_samples = [sample * conditioning_scale for sample in controlnet_block_res_samples]
        return (controlnet_block_res_samples,)


class SanaTransformer(SanaTransformer2DModel):
    """sana_transformer.SanaTransformer2DModel.forward with its controlnet_block_samples (sana.py's forward, of an
    earlier commit, has none)."""

    def forward(self, hidden_states, encoder_hidden_states, timestep, guidance=None, encoder_attention_mask=None,
                attention_mask=None, attention_kwargs=None, controlnet_block_samples=None, return_dict=True):
        if attention_mask is not None and attention_mask.ndim == 2:
            attention_mask = (1 - attention_mask.to(hidden_states.dtype)) * -10000.0
            attention_mask = attention_mask.unsqueeze(1)
        if encoder_attention_mask is not None and encoder_attention_mask.ndim == 2:
            encoder_attention_mask = (1 - encoder_attention_mask.to(hidden_states.dtype)) * -10000.0
            encoder_attention_mask = encoder_attention_mask.unsqueeze(1)
        # 1. Input
        batch_size, num_channels, height, width = hidden_states.shape
        p = self.patch_size
        post_patch_height, post_patch_width = height // p, width // p
        hidden_states = self.patch_embed(hidden_states)
        timestep, embedded_timestep = self.time_embed(timestep, batch_size=batch_size,
                                                      hidden_dtype=hidden_states.dtype)
        encoder_hidden_states = self.caption_projection(encoder_hidden_states)
        encoder_hidden_states = encoder_hidden_states.view(batch_size, -1, hidden_states.shape[-1])
        encoder_hidden_states = self.caption_norm(encoder_hidden_states)
        # 2. Transformer blocks
        for index_block, block in enumerate(self.transformer_blocks):
            hidden_states = block(hidden_states, attention_mask, encoder_hidden_states, encoder_attention_mask,
                                  timestep, post_patch_height, post_patch_width)
            if controlnet_block_samples is not None and 0 < index_block <= len(controlnet_block_samples):
                hidden_states = hidden_states + controlnet_block_samples[index_block - 1]
        # 3. Normalization
        hidden_states = self.norm_out(hidden_states, embedded_timestep, self.scale_shift_table)
        hidden_states = self.proj_out(hidden_states)
        # 5. Unpatchify
        hidden_states = hidden_states.reshape(batch_size, post_patch_height, post_patch_width, p, p, -1)
        hidden_states = hidden_states.permute(0, 5, 1, 3, 2, 4)
        output = hidden_states.reshape(batch_size, -1, post_patch_height * p, post_patch_width * p)
        return (output,)


COMMON = dict(in_channels=4, out_channels=4, num_attention_heads=2, attention_head_dim=32,
              num_cross_attention_heads=2, cross_attention_head_dim=32, cross_attention_dim=64, caption_channels=24,
              mlp_ratio=1.5, sample_size=8, patch_size=1)


class SanaControlNet(nn.Module):
    """The pipeline's two models under its attribute names (never called itself)."""

    def __init__(self):
        super().__init__()
        self.transformer = SanaTransformer(num_layers=3, **COMMON)
        self.controlnet = SanaControlNetModel(num_layers=1, **COMMON)


CONDITIONING_SCALE = 0.7  # controlnet_conditioning_scale (the pipeline's default 1.0)


def inputs(g):
    n = 5
    txt = torch.randn((1, n, 24), generator=g)
    mask = torch.ones(1, n, dtype=torch.long)
    mask[:, n - 1:] = 0  # the tokenizer's padding
    return {"encoder_hidden_states": txt, "encoder_attention_mask": mask,
            "control_image": torch.randn((1, 4, 4, 8), generator=g),
            "noise": torch.randn((1, 4, 4, 8), generator=g)}


def _dtype(module):
    """ModelMixin.dtype: the first floating parameter's."""
    return next(p.dtype for p in module.parameters() if p.is_floating_point())


def call(model, x, sigma, c):
    # SanaControlNetPipeline, no guidance: the ControlNet then the transformer on the same latents and timestep
    controlnet_dtype = _dtype(model.controlnet)
    transformer_dtype = _dtype(model.transformer)
    timestep = torch.tensor([sigma * 1000.0], dtype=torch.float32).expand(x.shape[0])
    controlnet_block_samples = model.controlnet(
        x.to(dtype=controlnet_dtype), encoder_hidden_states=c["encoder_hidden_states"].to(dtype=controlnet_dtype),
        encoder_attention_mask=c["encoder_attention_mask"], timestep=timestep, return_dict=False,
        attention_kwargs=None, controlnet_cond=c["control_image"], conditioning_scale=CONDITIONING_SCALE)[0]
    noise_pred = model.transformer(
        x.to(dtype=transformer_dtype), encoder_hidden_states=c["encoder_hidden_states"].to(dtype=transformer_dtype),
        encoder_attention_mask=c["encoder_attention_mask"], timestep=timestep, return_dict=False,
        attention_kwargs=None,
        controlnet_block_samples=tuple(t.to(dtype=transformer_dtype) for t in controlnet_block_samples))[0]
    return noise_pred.float()


PRODUCER = dict(
    library_source="replica of huggingface/diffusers controlnets/controlnet_sana.py and "
                   "transformers/sana_transformer.py@530fe0722df0 (SANA + SanaControlNetModel, torch 1.13)",
    timestep="sigma*1000 float32, t.expand(B), the same timestep to the ControlNet and the transformer",
    velocity="the transformer's output as is (flow velocity), .float()",
    note="SANA, 3 blocks, with a 1-block SanaControlNetModel: the ControlNet's patch_embed called on the latents "
         "and on the control latent, image tokens + input_block(control tokens) (a Linear); its block's output "
         "through controlnet_blocks[0] (a Linear) x conditioning_scale 0.7; the transformer adds residual 0 after "
         "block 1 (0 < index <= 1), none after blocks 0 and 2; both convert the 0/1 caption mask to a "
         "(1 - mask)*-10000 bias; blocks as sana.py's (ReLU linear attention, SDPA cross-attention, GLUMBConv); each "
         "step the ControlNet then the transformer")

if __name__ == "__main__":
    capture("sana_controlnet", SanaControlNet, inputs, call, sys.argv[1], PRODUCER)
