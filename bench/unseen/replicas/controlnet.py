"""Stable Diffusion 1.5 with a ControlNet (ControlNetModel feeding UNet2DConditionModel), reimplemented for torch
1.13 (no diffusers here), captured small in f32 on CPU.

Follows huggingface/diffusers src/diffusers/models/controlnets/controlnet.py at
06d4fb510fee2d769d19abf3b7eeb21d6dcf2590 line for line with the SD 1.5 ControlNet configuration (no class,
addition or encoder-hidden-state embeddings, controlnet_conditioning_channel_order "rgb", no
global_pool_conditions, mid_block_type "UNetMidBlock2DCrossAttn", no attention mask): ControlNetConditioningEmbedding
(a 3x3 conv_in on the control image, then pairs of 3x3 convs, the second of stride 2, F.silu after each conv, and a
3x3 conv_out; upstream zero-initialises conv_out, here it is redrawn like every weight, so that the control signal
flows) and ControlNetModel (the UNet's conv_in, time_proj, time_embedding, down_blocks and mid_block, built from the
same classes as the UNet's; the embedded control image added to conv_in's output; a zero-initialised 1x1 conv per
skip of the way down, controlnet_down_blocks, and one for the mid block's output, controlnet_mid_block, redrawn here
too; every residual then multiplied by conditioning_scale, guess_mode off). The UNet is
src/diffusers/models/unets/unet_2d_condition.py at 00f354d14d00ed60cfce2ea7c5efceca2e4c4c3f: sd_unet.py's
UNet2DConditionModel and blocks (CrossAttnDownBlock2D, DownBlock2D, UNetMidBlock2DCrossAttn, the up blocks,
ResnetBlock2D, Transformer2DModel, ...) imported as they are, its forward re-stated in a subclass with what
upstream's forward adds for a ControlNet: down_block_additional_residuals added one by one to the down path's saved
skips (skip + residual) before the mid block, mid_block_additional_residual added to the mid block's output (sample
+ residual); and upstream's upsample_size, passed only when the latent is not a multiple of 2**num_upsamplers (here
None: nearest ×2 by scale factor). The ControlNet's blocks are sd_unet.py's classes too (upstream builds both models'
blocks with get_down_block and UNetMidBlock2DCrossAttn). Stand-in for what torch 1.13 lacks:
F.scaled_dot_product_attention (its math path, in sd_unet.py).

Tiny config: the SD 1.5 layout at sd_unet.py's widths (block_out_channels (32, 64), layers_per_block 1, 2 heads,
GroupNorm of 8 groups, cross-attention to 32-wide text states [1, 6, 32]); conditioning_embedding_out_channels
(4, 8, 16, 32) (upstream (16, 32, 96, 256): the same three stride-2 convs, 8x down), the control image [1, 3, 64,
64] in [0, 1] (as VaeImageProcessor(do_normalize=False) leaves it) for 8x8 latents; 4 controlnet_down_blocks (conv_in's
output, block 0's resnet and downsampler, block 1's resnet) and controlnet_mid_block.

Pipeline as StableDiffusionControlNetPipeline's denoising loop calls the two models without guidance: each step the
ControlNet on the latents, the scheduler's t (here σ·1000, f32, one per batch), the text states and the control
image, with conditioning_scale = controlnet_conditioning_scale · controlnet_keep[i] = 0.8 · 1.0 (0.8, not the default
1.0, so that the scale is a real multiply), return_dict False; then the UNet on the same latents, t and text states
with its residuals; the noise prediction taken as the velocity as is (the capture's flow Euler loop). The two models
are held by one container module (the pipeline's attribute names: controlnet, unet) that is never called itself, so
that run.py's one-model capture records both (transformer.controlnet..., transformer.unet...).

usage: /usr/bin/python3 bench/unseen/replicas/controlnet.py OUTDIR
REPLICA_DTYPE=bf16 [REPLICA_DEVICE=cuda] as run.py's replicas: the bf16 run, beside the f32 one.
"""
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

import sd_unet
from parts import TimestepEmbedding, Timesteps
from run import capture
from sd_unet import CrossAttnDownBlock2D, CrossAttnUpBlock2D, DownBlock2D, UNetMidBlock2DCrossAttn


def zero_module(module):
    for p in module.parameters():
        nn.init.zeros_(p)
    return module


class ControlNetConditioningEmbedding(nn.Module):
    def __init__(self, conditioning_embedding_channels, conditioning_channels=3, block_out_channels=(16, 32, 96, 256)):
        super().__init__()
        self.conv_in = nn.Conv2d(conditioning_channels, block_out_channels[0], kernel_size=3, padding=1)
        self.blocks = nn.ModuleList([])
        for i in range(len(block_out_channels) - 1):
            channel_in = block_out_channels[i]
            channel_out = block_out_channels[i + 1]
            self.blocks.append(nn.Conv2d(channel_in, channel_in, kernel_size=3, padding=1))
            self.blocks.append(nn.Conv2d(channel_in, channel_out, kernel_size=3, padding=1, stride=2))
        self.conv_out = zero_module(
            nn.Conv2d(block_out_channels[-1], conditioning_embedding_channels, kernel_size=3, padding=1))

    def forward(self, conditioning):
        embedding = self.conv_in(conditioning)
        embedding = F.silu(embedding)
        for block in self.blocks:
            embedding = block(embedding)
            embedding = F.silu(embedding)
        embedding = self.conv_out(embedding)
        return embedding


class ControlNetModel(nn.Module):
    """down_block_types ("CrossAttnDownBlock2D", "DownBlock2D") as sd_unet.py's UNet (SD 1.5's four blocks, the
    last one without cross-attention, cut to two); layers_per_block 1 as sd_unet.py's blocks build them."""

    def __init__(self, in_channels=4, conditioning_channels=3, block_out_channels=(32, 64), heads=2,
                 cross_attention_dim=32, groups=8, layers_per_block=1,
                 conditioning_embedding_out_channels=(4, 8, 16, 32), global_pool_conditions=False):
        super().__init__()
        down_block_types = ("CrossAttnDownBlock2D", "DownBlock2D")
        self.global_pool_conditions = global_pool_conditions
        self.conv_in = nn.Conv2d(in_channels, block_out_channels[0], kernel_size=3, padding=1)
        time_embed_dim = block_out_channels[0] * 4
        self.time_proj = Timesteps(block_out_channels[0], True, 0)
        timestep_input_dim = block_out_channels[0]
        self.time_embedding = TimestepEmbedding(timestep_input_dim, time_embed_dim)
        self.controlnet_cond_embedding = ControlNetConditioningEmbedding(
            conditioning_embedding_channels=block_out_channels[0],
            block_out_channels=conditioning_embedding_out_channels,
            conditioning_channels=conditioning_channels)
        self.down_blocks = nn.ModuleList([])
        self.controlnet_down_blocks = nn.ModuleList([])
        output_channel = block_out_channels[0]
        controlnet_block = nn.Conv2d(output_channel, output_channel, kernel_size=1)
        controlnet_block = zero_module(controlnet_block)
        self.controlnet_down_blocks.append(controlnet_block)
        for i, down_block_type in enumerate(down_block_types):
            input_channel = output_channel
            output_channel = block_out_channels[i]
            is_final_block = i == len(block_out_channels) - 1
            if down_block_type == "CrossAttnDownBlock2D":
                down_block = CrossAttnDownBlock2D(input_channel, output_channel, time_embed_dim, heads,
                                                  cross_attention_dim, groups, not is_final_block)
            else:
                down_block = DownBlock2D(input_channel, output_channel, time_embed_dim, groups, not is_final_block)
            self.down_blocks.append(down_block)
            for _ in range(layers_per_block):
                controlnet_block = nn.Conv2d(output_channel, output_channel, kernel_size=1)
                controlnet_block = zero_module(controlnet_block)
                self.controlnet_down_blocks.append(controlnet_block)
            if not is_final_block:
                controlnet_block = nn.Conv2d(output_channel, output_channel, kernel_size=1)
                controlnet_block = zero_module(controlnet_block)
                self.controlnet_down_blocks.append(controlnet_block)
        mid_block_channel = block_out_channels[-1]
        controlnet_block = nn.Conv2d(mid_block_channel, mid_block_channel, kernel_size=1)
        controlnet_block = zero_module(controlnet_block)
        self.controlnet_mid_block = controlnet_block
        self.mid_block = UNetMidBlock2DCrossAttn(mid_block_channel, time_embed_dim, heads, cross_attention_dim, groups)

    def forward(self, sample, timestep, encoder_hidden_states, controlnet_cond, conditioning_scale=1.0,
                guess_mode=False, return_dict=True):
        # controlnet_conditioning_channel_order "rgb": the control image as is
        # 1. time
        timesteps = timestep
        if len(timesteps.shape) == 0:
            timesteps = timesteps[None].to(sample.device)
        timesteps = timesteps.expand(sample.shape[0])
        t_emb = self.time_proj(timesteps)
        t_emb = t_emb.to(dtype=sample.dtype)
        emb = self.time_embedding(t_emb)
        # 2. pre-process
        sample = self.conv_in(sample)
        controlnet_cond = self.controlnet_cond_embedding(controlnet_cond)
        sample = sample + controlnet_cond
        # 3. down
        down_block_res_samples = (sample,)
        for downsample_block in self.down_blocks:
            if isinstance(downsample_block, CrossAttnDownBlock2D):
                sample, res_samples = downsample_block(hidden_states=sample, temb=emb,
                                                       encoder_hidden_states=encoder_hidden_states)
            else:
                sample, res_samples = downsample_block(hidden_states=sample, temb=emb)
            down_block_res_samples += res_samples
        # 4. mid
        sample = self.mid_block(sample, emb, encoder_hidden_states=encoder_hidden_states)
        # 5. Control net blocks
        controlnet_down_block_res_samples = ()
        for down_block_res_sample, controlnet_block in zip(down_block_res_samples, self.controlnet_down_blocks):
            down_block_res_sample = controlnet_block(down_block_res_sample)
            controlnet_down_block_res_samples = controlnet_down_block_res_samples + (down_block_res_sample,)
        down_block_res_samples = controlnet_down_block_res_samples
        mid_block_res_sample = self.controlnet_mid_block(sample)
        # 6. scaling
        if guess_mode and not self.global_pool_conditions:
            scales = torch.logspace(-1, 0, len(down_block_res_samples) + 1, device=sample.device)  # 0.1 to 1.0
            scales = scales * conditioning_scale
            down_block_res_samples = [sample * scale for sample, scale in zip(down_block_res_samples, scales)]
            mid_block_res_sample = mid_block_res_sample * scales[-1]  # last one
        else:
            down_block_res_samples = [sample * conditioning_scale for sample in down_block_res_samples]
            mid_block_res_sample = mid_block_res_sample * conditioning_scale
        if self.global_pool_conditions:
            down_block_res_samples = [torch.mean(sample, dim=(2, 3), keepdim=True) for sample in down_block_res_samples]
            mid_block_res_sample = torch.mean(mid_block_res_sample, dim=(2, 3), keepdim=True)
        return (down_block_res_samples, mid_block_res_sample)


class UNet2DConditionModel(sd_unet.UNet2DConditionModel):
    """sd_unet.py's SD 1.x UNet, its forward as upstream's with down_block_additional_residuals and
    mid_block_additional_residual (no T2I-Adapter intrablock residuals)."""

    def __init__(self, **kw):
        super().__init__(**kw)
        self.num_upsamplers = sum(1 for b in self.up_blocks if b.upsamplers is not None)

    def forward(self, sample, timestep, encoder_hidden_states, added_cond_kwargs=None,
                down_block_additional_residuals=None, mid_block_additional_residual=None, return_dict=False):
        default_overall_up_factor = 2 ** self.num_upsamplers
        forward_upsample_size = False
        upsample_size = None
        for dim in sample.shape[-2:]:
            if dim % default_overall_up_factor != 0:
                forward_upsample_size = True
                break
        # 1. time (get_time_embed)
        timesteps = timestep
        if len(timesteps.shape) == 0:
            timesteps = timesteps[None].to(sample.device)
        timesteps = timesteps.expand(sample.shape[0])
        t_emb = self.time_proj(timesteps)
        t_emb = t_emb.to(dtype=sample.dtype)
        emb = self.time_embedding(t_emb)
        # 2. pre-process
        sample = self.conv_in(sample)
        # 3. down
        is_controlnet = mid_block_additional_residual is not None and down_block_additional_residuals is not None
        down_block_res_samples = (sample,)
        for downsample_block in self.down_blocks:
            if isinstance(downsample_block, CrossAttnDownBlock2D):
                sample, res_samples = downsample_block(hidden_states=sample, temb=emb,
                                                       encoder_hidden_states=encoder_hidden_states)
            else:
                sample, res_samples = downsample_block(hidden_states=sample, temb=emb)
            down_block_res_samples += res_samples
        if is_controlnet:
            new_down_block_res_samples = ()
            for down_block_res_sample, down_block_additional_residual in zip(
                    down_block_res_samples, down_block_additional_residuals):
                down_block_res_sample = down_block_res_sample + down_block_additional_residual
                new_down_block_res_samples = new_down_block_res_samples + (down_block_res_sample,)
            down_block_res_samples = new_down_block_res_samples
        # 4. mid
        sample = self.mid_block(sample, emb, encoder_hidden_states=encoder_hidden_states)
        if is_controlnet:
            sample = sample + mid_block_additional_residual
        # 5. up
        for i, upsample_block in enumerate(self.up_blocks):
            is_final_block = i == len(self.up_blocks) - 1
            res_samples = down_block_res_samples[-len(upsample_block.resnets):]
            down_block_res_samples = down_block_res_samples[: -len(upsample_block.resnets)]
            if not is_final_block and forward_upsample_size:
                upsample_size = down_block_res_samples[-1].shape[2:]
            if isinstance(upsample_block, CrossAttnUpBlock2D):
                sample = upsample_block(hidden_states=sample, temb=emb, res_hidden_states_tuple=res_samples,
                                        encoder_hidden_states=encoder_hidden_states, upsample_size=upsample_size)
            else:
                sample = upsample_block(hidden_states=sample, temb=emb, res_hidden_states_tuple=res_samples,
                                        upsample_size=upsample_size)
        # 6. post-process
        sample = self.conv_norm_out(sample)
        sample = self.conv_act(sample)
        sample = self.conv_out(sample)
        return (sample,)


class StableDiffusionControlNet(nn.Module):
    """The pipeline's two models under its attribute names (never called itself)."""

    def __init__(self):
        super().__init__()
        self.unet = UNet2DConditionModel()
        self.controlnet = ControlNetModel()


CONDITIONING_SCALE = 0.8  # controlnet_conditioning_scale (the pipeline's default 1.0)


def inputs(g):
    return {"encoder_hidden_states": torch.randn((1, 6, 32), generator=g),
            "controlnet_cond": torch.rand((1, 3, 64, 64), generator=g),
            "noise": torch.randn((1, 4, 8, 8), generator=g)}


def call(model, x, sigma, c):
    # StableDiffusionControlNetPipeline, no guidance: the ControlNet then the UNet on the same latents and t
    t = torch.tensor([sigma * 1000.0], dtype=torch.float32, device=x.device)
    cond_scale = CONDITIONING_SCALE * 1.0  # controlnet_keep[i]: 1.0 (control_guidance_start 0, end 1)
    down_block_res_samples, mid_block_res_sample = model.controlnet(
        x, t, encoder_hidden_states=c["encoder_hidden_states"], controlnet_cond=c["controlnet_cond"],
        conditioning_scale=cond_scale, guess_mode=False, return_dict=False)
    return model.unet(x, t, encoder_hidden_states=c["encoder_hidden_states"],
                      down_block_additional_residuals=down_block_res_samples,
                      mid_block_additional_residual=mid_block_res_sample, return_dict=False)[0]


PRODUCER = dict(
    library_source="replica of huggingface/diffusers controlnets/controlnet.py@06d4fb510fee and "
                   "unets/unet_2d_condition.py@00f354d14d00 (SD 1.5 + ControlNet, torch 1.13)",
    timestep="sigma*1000, f32 [1] expanded to the batch, the same t to the ControlNet and the UNet",
    velocity="the UNet's noise prediction as is",
    note="SD 1.5 ControlNet at widths 32/64: ControlNetConditioningEmbedding (3x3 convs with F.silu, three of "
         "stride 2, 64x64 control image -> 8x8) added to the ControlNet's conv_in output; the UNet's down blocks and "
         "mid block; a 1x1 conv per down skip and on the mid output, each x conditioning_scale 0.8; the UNet adds "
         "them to its down skips and its mid block's output; each step the ControlNet then the UNet")

if __name__ == "__main__":
    capture("controlnet", StableDiffusionControlNet, inputs, call, sys.argv[1], PRODUCER)
