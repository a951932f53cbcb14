"""Stable Diffusion 3.5 (medium layout) with an SD3 ControlNet (SD3ControlNetModel feeding SD3Transformer2DModel),
reimplemented for torch 1.13 (no diffusers here), captured small in f32 on CPU.

Follows huggingface/diffusers src/diffusers/models/controlnets/controlnet_sd3.py at
01c819e1e638420dc2fb551c404379e2d986018f line for line (SD3ControlNetModel with joint_attention_dim set, so
JointTransformerBlocks, all context_pre_only=False, not the SD3.5-8b SD3SingleTransformerBlock variant;
use_pos_embed True, pos_embed_type "sincos"; extra_conditioning_channels 0): the transformer's own PatchEmbed with
the cropped sin-cos table, CombinedTimestepTextProjEmbeddings, context_embedder, the JointTransformerBlocks; then
hidden_states + pos_embed_input(controlnet_cond), pos_embed_input a second PatchEmbed with pos_embed_type None
(a patch conv, flattened, no position table; upstream zero-initialises it, here it is redrawn like every weight so
that the control signal flows); every block's image-stream output kept, each through its own Linear
controlnet_blocks[i] (zero-initialised upstream, redrawn here), then each multiplied by conditioning_scale.
Its blocks are sd35.py's JointTransformerBlock (attention.py's, the same upstream class both models import).

The transformer is src/diffusers/models/transformers/transformer_sd3.py at
38b0c9e679b0894d0483df9da80bc103aa1bff52 (SD3.5 era: dual_attention_layers, qk_norm, skip_layers): sd35.py's
SD3Transformer2DModel and parts imported as they are, its forward re-stated in a subclass with upstream's
controlnet residual: after each block, if block_controlnet_hidden_states is given and block.context_pre_only is
False, interval_control = len(self.transformer_blocks) / len(block_controlnet_hidden_states) (a float) and
hidden_states = hidden_states + block_controlnet_hidden_states[int(index_block / interval_control)].
Here 4 transformer blocks and 2 ControlNet blocks: interval 2.0, blocks 0 and 1 add residual 0, block 2 adds
residual 1, block 3 (context_pre_only) adds none.

Pipeline as StableDiffusion3ControlNetPipeline (pipelines/controlnet_sd3/pipeline_stable_diffusion_3_controlnet.py
at 0b54bf5311887d3e3a1f404e600064c5f2d02ab6) calls the two models without guidance: each step the ControlNet on
the latents, timestep = t.expand(B) (t = σ·1000, f32), encoder_hidden_states = prompt_embeds (joint_attention_dim
set), pooled_projections = torch.zeros_like(pooled_prompt_embeds) (force_zeros_for_pooled_projection True, the
InstantX default), controlnet_cond = the VAE-encoded control image (vae_shift_factor 0 for
force_zeros_for_pooled_projection, times scaling_factor; drawn here as a latent [1, 4, 8, 8]), conditioning_scale =
controlnet_conditioning_scale · controlnet_keep[i] = 0.7 · 1.0, return_dict False, [0]; then the transformer on the
same latents, timestep, prompt_embeds and pooled_prompt_embeds with block_controlnet_hidden_states = those samples;
the output taken as the flow velocity as is. The two models are held by one container module (the pipeline's
attribute names: controlnet, transformer) that is never called itself, so that run.py's one-model capture records
both (transformer.controlnet..., transformer.transformer...).

Tiny config: both half sd35.py's width (2 heads of 16, d 32, qk_norm rms_norm, patch 2, 4 latent channels,
sample_size 8, pos_embed_max_size 6, 24-wide context [1, 5, 24], 16-wide pooled text); the transformer 4 blocks,
dual_attention_layers (0,), the last context_pre_only; the ControlNet 2 blocks, no dual attention.

usage: /usr/bin/python3 bench/unseen/replicas/sd3_controlnet.py OUTDIR
REPLICA_DTYPE=bf16 [REPLICA_DEVICE=cuda] as run.py's replicas: the bf16 run, beside the f32 one.
"""
import sys

import torch
import torch.nn as nn

import sd35
from run import capture
from sd35 import CombinedTimestepTextProjEmbeddings, JointTransformerBlock, SD3Transformer2DModel


def zero_module(module):
    for p in module.parameters():
        nn.init.zeros_(p)
    return module


class PatchEmbed(sd35.PatchEmbed):
    """embeddings.PatchEmbed, with upstream's pos_embed_type None branch (self.pos_embed = None) beside sd35.py's
    sincos one."""

    def __init__(self, height=224, width=224, patch_size=16, in_channels=3, embed_dim=768, layer_norm=False,
                 flatten=True, bias=True, interpolation_scale=1, pos_embed_type="sincos", pos_embed_max_size=None):
        if pos_embed_type is not None:
            super().__init__(height, width, patch_size, in_channels, embed_dim, layer_norm, flatten, bias,
                             interpolation_scale, pos_embed_type, pos_embed_max_size)
            return
        nn.Module.__init__(self)
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
        self.pos_embed = None


class SD3ControlNetModel(nn.Module):
    def __init__(self, sample_size=128, patch_size=2, in_channels=16, num_layers=18, attention_head_dim=64,
                 num_attention_heads=18, joint_attention_dim=4096, caption_projection_dim=1152,
                 pooled_projection_dim=2048, out_channels=16, pos_embed_max_size=96, extra_conditioning_channels=0,
                 dual_attention_layers=(), qk_norm=None, pos_embed_type="sincos", use_pos_embed=True,
                 force_zeros_for_pooled_projection=True):
        super().__init__()
        self.force_zeros_for_pooled_projection = force_zeros_for_pooled_projection
        default_out_channels = in_channels
        self.out_channels = out_channels if out_channels is not None else default_out_channels
        self.inner_dim = num_attention_heads * attention_head_dim
        assert use_pos_embed
        self.pos_embed = PatchEmbed(height=sample_size, width=sample_size, patch_size=patch_size,
                                    in_channels=in_channels, embed_dim=self.inner_dim,
                                    pos_embed_max_size=pos_embed_max_size, pos_embed_type=pos_embed_type)
        self.time_text_embed = CombinedTimestepTextProjEmbeddings(embedding_dim=self.inner_dim,
                                                                  pooled_projection_dim=pooled_projection_dim)
        assert joint_attention_dim is not None  # the SD3.5-8b SD3SingleTransformerBlock branch is not replicated
        self.context_embedder = nn.Linear(joint_attention_dim, caption_projection_dim)
        self.transformer_blocks = nn.ModuleList([
            JointTransformerBlock(dim=self.inner_dim, num_attention_heads=num_attention_heads,
                                  attention_head_dim=attention_head_dim, context_pre_only=False, qk_norm=qk_norm,
                                  use_dual_attention=True if i in dual_attention_layers else False)
            for i in range(num_layers)])
        # controlnet_blocks
        self.controlnet_blocks = nn.ModuleList([])
        for _ in range(len(self.transformer_blocks)):
            controlnet_block = nn.Linear(self.inner_dim, self.inner_dim)
            controlnet_block = zero_module(controlnet_block)
            self.controlnet_blocks.append(controlnet_block)
        pos_embed_input = PatchEmbed(height=sample_size, width=sample_size, patch_size=patch_size,
                                     in_channels=in_channels + extra_conditioning_channels, embed_dim=self.inner_dim,
                                     pos_embed_type=None)
        self.pos_embed_input = zero_module(pos_embed_input)

    def forward(self, hidden_states, controlnet_cond, conditioning_scale=1.0, encoder_hidden_states=None,
                pooled_projections=None, timestep=None, joint_attention_kwargs=None, return_dict=True):
        if self.pos_embed is not None and hidden_states.ndim != 4:
            raise ValueError("hidden_states must be 4D when pos_embed is used")
        if self.context_embedder is not None and encoder_hidden_states is None:
            raise ValueError("encoder_hidden_states must be provided when context_embedder is used")
        if self.pos_embed is not None:
            hidden_states = self.pos_embed(hidden_states)  # takes care of adding positional embeddings too.
        temb = self.time_text_embed(timestep, pooled_projections)
        if self.context_embedder is not None:
            encoder_hidden_states = self.context_embedder(encoder_hidden_states)
        # add
        hidden_states = hidden_states + self.pos_embed_input(controlnet_cond)
        block_res_samples = ()
        for block in self.transformer_blocks:
            encoder_hidden_states, hidden_states = block(hidden_states=hidden_states,
                                                         encoder_hidden_states=encoder_hidden_states, temb=temb)
            block_res_samples = block_res_samples + (hidden_states,)
        controlnet_block_res_samples = ()
        for block_res_sample, controlnet_block in zip(block_res_samples, self.controlnet_blocks):
            block_res_sample = controlnet_block(block_res_sample)
            controlnet_block_res_samples = controlnet_block_res_samples + (block_res_sample,)
        # 6. scaling
        controlnet_block_res_samples = [sample * conditioning_scale for sample in controlnet_block_res_samples]
        return (controlnet_block_res_samples,)


class SD3Transformer(SD3Transformer2DModel):
    """transformer_sd3.SD3Transformer2DModel.forward with its controlnet residual (sd35.py's forward omits it)."""

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
                                                             encoder_hidden_states=encoder_hidden_states, temb=temb)
            # controlnet residual
            if block_controlnet_hidden_states is not None and block.context_pre_only is False:
                interval_control = len(self.transformer_blocks) / len(block_controlnet_hidden_states)
                hidden_states = hidden_states + block_controlnet_hidden_states[int(index_block / interval_control)]
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


COMMON = dict(sample_size=8, patch_size=2, in_channels=4, attention_head_dim=16, num_attention_heads=2,
              joint_attention_dim=24, caption_projection_dim=32, pooled_projection_dim=16, out_channels=4,
              pos_embed_max_size=6, qk_norm="rms_norm")


class StableDiffusion3ControlNet(nn.Module):
    """The pipeline's two models under its attribute names (never called itself)."""

    def __init__(self):
        super().__init__()
        self.transformer = SD3Transformer(num_layers=4, dual_attention_layers=(0,), **COMMON)
        self.controlnet = SD3ControlNetModel(num_layers=2, dual_attention_layers=(), **COMMON)


CONDITIONING_SCALE = 0.7  # controlnet_conditioning_scale (the pipeline's default 1.0)


def inputs(g):
    return {"encoder_hidden_states": torch.randn((1, 5, 24), generator=g),
            "pooled_projections": torch.randn((1, 16), generator=g),
            "control_image": torch.randn((1, 4, 8, 8), generator=g),
            "noise": torch.randn((1, 4, 8, 8), generator=g)}


def call(model, x, sigma, c):
    # StableDiffusion3ControlNetPipeline, no guidance: the ControlNet then the transformer on the same latents and t
    timestep = torch.tensor(sigma * 1000.0, dtype=torch.float32, device=x.device).expand(x.shape[0])
    cond_scale = CONDITIONING_SCALE * 1.0  # controlnet_keep[i]: 1.0 (control_guidance_start 0, end 1)
    if model.controlnet.force_zeros_for_pooled_projection:
        # instantx sd3 controlnet used zero pooled projection
        controlnet_pooled_projections = torch.zeros_like(c["pooled_projections"])
    else:
        controlnet_pooled_projections = c["pooled_projections"]
    control_block_samples = model.controlnet(
        hidden_states=x, timestep=timestep, encoder_hidden_states=c["encoder_hidden_states"],
        pooled_projections=controlnet_pooled_projections, joint_attention_kwargs=None,
        controlnet_cond=c["control_image"], conditioning_scale=cond_scale, return_dict=False)[0]
    return model.transformer(hidden_states=x, timestep=timestep, encoder_hidden_states=c["encoder_hidden_states"],
                             pooled_projections=c["pooled_projections"],
                             block_controlnet_hidden_states=control_block_samples, joint_attention_kwargs=None,
                             return_dict=False)[0]


PRODUCER = dict(
    library_source="replica of huggingface/diffusers controlnets/controlnet_sd3.py@01c819e1e638 and "
                   "transformers/transformer_sd3.py@38b0c9e679b0 (SD3.5 + SD3 ControlNet, torch 1.13)",
    timestep="sigma*1000, f32, t.expand(B), the same t to the ControlNet and the transformer",
    velocity="the transformer's output as is (flow velocity)",
    note="SD3.5-medium MMDiT (4 blocks, dual 0, last context_pre_only) with a 2-block SD3ControlNetModel: the "
         "ControlNet's patch embed + cropped sin-cos table, plus pos_embed_input (patch conv, no table) of the "
         "control latent; temb from zeros pooled text (force_zeros_for_pooled_projection); per-block Linear "
         "controlnet_blocks x conditioning_scale 0.7; the transformer adds residual int(i / 2.0) after blocks 0-2 "
         "(not the context_pre_only block 3); each step the ControlNet then the transformer")

if __name__ == "__main__":
    capture("sd3_controlnet", StableDiffusion3ControlNet, inputs, call, sys.argv[1], PRODUCER)
