"""Stable Diffusion 1.5 with a T2I-Adapter (T2IAdapter, adapter_type "full_adapter", feeding UNet2DConditionModel
through down_intrablock_additional_residuals), reimplemented for torch 1.13 (no diffusers here), captured small in
f32 on CPU.

Follows huggingface/diffusers src/diffusers/models/adapter.py at 67a35b81bb68f07d3d674d1aff7ecd6b4ffd7e67 line for
line: T2IAdapter (its one submodule `adapter`), FullAdapter (nn.PixelUnshuffle(downscale_factor) on the control image,
a 3x3 conv_in from in_channels·downscale_factor² channels, then `body`: AdapterBlock(c0, c0) and one AdapterBlock(c[i-1],
c[i], down=True) per further width, each block's output one feature), AdapterBlock (with down an
nn.AvgPool2d(2, 2, ceil_mode=True), a 1x1 in_conv where the widths differ, then nn.Sequential of num_res_blocks
AdapterResnetBlocks), AdapterResnetBlock (3x3 block1, nn.ReLU act, 1x1 block2, plus the input). The UNet is
src/diffusers/models/unets/unet_2d_condition.py at 00f354d14d00ed60cfce2ea7c5efceca2e4c4c3f: sd_unet.py's
UNet2DConditionModel and blocks imported as they are, its forward re-stated in a subclass with what upstream's forward
does for an adapter (is_adapter = down_intrablock_additional_residuals is not None): for a down block with
cross-attention, down_intrablock_additional_residuals.pop(0) passed to it as additional_residuals; for one without,
`sample += down_intrablock_additional_residuals.pop(0)` on its output, in place (so the skip it saved, the same
tensor, is changed too); after the mid block, one more residual added in place only if one is left and its shape is
the mid output's (T2I-Adapter-XL; none is left here). CrossAttnDownBlock2D's forward is upstream unet_2d_blocks.py's
(same commit): after the last resnet/attention pair, `hidden_states = hidden_states + additional_residuals`, before
that state is saved as a skip and before the downsampler; the class is swapped onto the block sd_unet.py builds (the
same module tree and parameters).

Pipeline: src/diffusers/pipelines/t2i_adapter/pipeline_stable_diffusion_adapter.py at
256d77ec738b8aa981f7e33d1e9f60e51460019b (StableDiffusionAdapterPipeline.__call__), without guidance: the adapter is
called ONCE, before the denoising loop, `adapter_state = self.adapter(adapter_input)` then `adapter_state[k] = v *
adapter_conditioning_scale` for each feature (0.8 here, not the default 1.0, so that the scale is a real multiply);
each step the UNet on the latents, t (σ·1000, f32, one per batch) and the text states with
`down_intrablock_additional_residuals=[state.clone() for state in adapter_state]` (the list is popped inside). So this
trace holds the adapter's call outside any step (its keys pre/...), and three UNet calls (s0..s2) that reuse its
scaled features; the scaling and the clones are tensor arithmetic of the pipeline, not modules. The noise prediction
is taken as the velocity as is (the capture's flow Euler loop). The two models are held by one container module (the
pipeline's attribute names: adapter, unet) that is never called itself.

Tiny config: the SD 1.5 layout at sd_unet.py's --small widths (block_out_channels (8, 16), layers_per_block 1, 2
heads, GroupNorm of 4 groups, cross-attention to 16-wide text states [1, 6, 16], 8x8 latents); the adapter's channels
(8, 16) (upstream (320, 640, 1280, 1280), one per UNet down block: here two), num_res_blocks 2 (upstream's default),
downscale_factor 8 (PixelUnshuffle of the [1, 3, 64, 64] control image in [0, 1], as _preprocess_adapter_image leaves
it, to [1, 192, 8, 8]); features [1, 8, 8, 8] (into CrossAttnDownBlock2D) and [1, 16, 4, 4] (added to DownBlock2D's
output). LightAdapter not replicated.

usage: /usr/bin/python3 bench/unseen/replicas/t2i_adapter.py OUTDIR
REPLICA_DTYPE=bf16 [REPLICA_DEVICE=cuda] as run.py's replicas: the bf16 run, beside the f32 one.
"""
import sys

import torch
import torch.nn as nn

import sd_unet

from run import capture
from sd_unet import CrossAttnDownBlock2D, CrossAttnUpBlock2D


class T2IAdapter(nn.Module):
    def __init__(self, in_channels=3, channels=(320, 640, 1280, 1280), num_res_blocks=2, downscale_factor=8,
                 adapter_type="full_adapter"):
        super().__init__()
        if adapter_type == "full_adapter":
            self.adapter = FullAdapter(in_channels, channels, num_res_blocks, downscale_factor)
        else:
            raise ValueError(f"Unsupported adapter_type: '{adapter_type}' (only full_adapter replicated)")

    def forward(self, x):
        return self.adapter(x)


class FullAdapter(nn.Module):
    def __init__(self, in_channels=3, channels=(320, 640, 1280, 1280), num_res_blocks=2, downscale_factor=8):
        super().__init__()
        in_channels = in_channels * downscale_factor ** 2
        self.unshuffle = nn.PixelUnshuffle(downscale_factor)
        self.conv_in = nn.Conv2d(in_channels, channels[0], kernel_size=3, padding=1)
        self.body = nn.ModuleList([
            AdapterBlock(channels[0], channels[0], num_res_blocks),
            *[AdapterBlock(channels[i - 1], channels[i], num_res_blocks, down=True) for i in range(1, len(channels))],
        ])
        self.total_downscale_factor = downscale_factor * 2 ** (len(channels) - 1)

    def forward(self, x):
        x = self.unshuffle(x)
        x = self.conv_in(x)
        features = []
        for block in self.body:
            x = block(x)
            features.append(x)
        return features


class AdapterBlock(nn.Module):
    def __init__(self, in_channels, out_channels, num_res_blocks, down=False):
        super().__init__()
        self.downsample = None
        if down:
            self.downsample = nn.AvgPool2d(kernel_size=2, stride=2, ceil_mode=True)
        self.in_conv = None
        if in_channels != out_channels:
            self.in_conv = nn.Conv2d(in_channels, out_channels, kernel_size=1)
        self.resnets = nn.Sequential(*[AdapterResnetBlock(out_channels) for _ in range(num_res_blocks)])

    def forward(self, x):
        if self.downsample is not None:
            x = self.downsample(x)
        if self.in_conv is not None:
            x = self.in_conv(x)
        x = self.resnets(x)
        return x


class AdapterResnetBlock(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.block1 = nn.Conv2d(channels, channels, kernel_size=3, padding=1)
        self.act = nn.ReLU()
        self.block2 = nn.Conv2d(channels, channels, kernel_size=1)

    def forward(self, x):
        h = self.act(self.block1(x))
        h = self.block2(h)
        return h + x


class AdapterCrossAttnDownBlock2D(CrossAttnDownBlock2D):
    """unet_2d_blocks.py's CrossAttnDownBlock2D.forward with additional_residuals (swapped onto sd_unet's block)."""

    def forward(self, hidden_states, temb=None, encoder_hidden_states=None, additional_residuals=None):
        output_states = ()
        blocks = list(zip(self.resnets, self.attentions))
        for i, (resnet, attn) in enumerate(blocks):
            hidden_states = resnet(hidden_states, temb)
            hidden_states = attn(hidden_states, encoder_hidden_states=encoder_hidden_states, return_dict=False)[0]
            # apply additional residuals to the output of the last pair of resnet and attention blocks
            if i == len(blocks) - 1 and additional_residuals is not None:
                hidden_states = hidden_states + additional_residuals
            output_states = output_states + (hidden_states,)
        if self.downsamplers is not None:
            for downsampler in self.downsamplers:
                hidden_states = downsampler(hidden_states)
            output_states = output_states + (hidden_states,)
        return hidden_states, output_states


class UNet2DConditionModel(sd_unet.UNet2DConditionModel):
    """sd_unet.py's SD 1.x UNet, its forward as upstream's with down_intrablock_additional_residuals."""

    def __init__(self, **kw):
        super().__init__(**kw)
        for block in self.down_blocks:
            if isinstance(block, CrossAttnDownBlock2D):
                block.__class__ = AdapterCrossAttnDownBlock2D
        self.num_upsamplers = sum(1 for b in self.up_blocks if b.upsamplers is not None)

    def forward(self, sample, timestep, encoder_hidden_states, down_intrablock_additional_residuals=None,
                return_dict=False):
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
        is_adapter = down_intrablock_additional_residuals is not None
        down_block_res_samples = (sample,)
        for downsample_block in self.down_blocks:
            if isinstance(downsample_block, CrossAttnDownBlock2D):  # has_cross_attention
                additional_residuals = {}
                if is_adapter and len(down_intrablock_additional_residuals) > 0:
                    additional_residuals["additional_residuals"] = down_intrablock_additional_residuals.pop(0)
                sample, res_samples = downsample_block(hidden_states=sample, temb=emb,
                                                       encoder_hidden_states=encoder_hidden_states,
                                                       **additional_residuals)
            else:
                sample, res_samples = downsample_block(hidden_states=sample, temb=emb)
                if is_adapter and len(down_intrablock_additional_residuals) > 0:
                    sample += down_intrablock_additional_residuals.pop(0)
            down_block_res_samples += res_samples
        # 4. mid
        sample = self.mid_block(sample, emb, encoder_hidden_states=encoder_hidden_states)
        # To support T2I-Adapter-XL
        if (is_adapter and len(down_intrablock_additional_residuals) > 0
                and sample.shape == down_intrablock_additional_residuals[0].shape):
            sample += down_intrablock_additional_residuals.pop(0)
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


class StableDiffusionAdapter(nn.Module):
    """The pipeline's two models under its attribute names (never called itself)."""

    def __init__(self):
        super().__init__()
        self.unet = UNet2DConditionModel(block_out_channels=(8, 16), cross_attention_dim=16, groups=4)
        self.adapter = T2IAdapter(in_channels=3, channels=(8, 16), num_res_blocks=2, downscale_factor=8)


ADAPTER_CONDITIONING_SCALE = 0.8  # adapter_conditioning_scale (the pipeline's default 1.0)


def inputs(g):
    return {"encoder_hidden_states": torch.randn((1, 6, 16), generator=g),
            "adapter_input": torch.rand((1, 3, 64, 64), generator=g),
            "noise": torch.randn((1, 4, 8, 8), generator=g)}


PRODUCER = dict(
    library_source="replica of huggingface/diffusers adapter.py@67a35b81bb68 and unets/unet_2d_condition.py@"
                   "00f354d14d00, pipeline_stable_diffusion_adapter.py@256d77ec738b (SD 1.5 + T2I-Adapter, torch 1.13)",
    timestep="sigma*1000, f32 [1] expanded to the batch (the scheduler's t)",
    velocity="the UNet's noise prediction as is",
    note="SD 1.5 T2I-Adapter (full_adapter) at widths 8/16: PixelUnshuffle(8) of the 64x64 control image, 3x3 "
         "conv_in, AdapterBlocks (AvgPool2d 2 ceil_mode, 1x1 in_conv, ResNet blocks 3x3-ReLU-1x1 + input), one "
         "feature per block; called once before the loop, each feature x adapter_conditioning_scale 0.8; each step "
         "the UNet adds feature 0 to CrossAttnDownBlock2D's last attention output (before its skip and downsampler) "
         "and feature 1 in place to DownBlock2D's output (its saved skip too)")


def prepare(model, cond):
    """StableDiffusionAdapterPipeline: the adapter once, before the denoising loop, each feature times the scale."""
    adapter_state = model.adapter(cond["adapter_input"])
    for k, v in enumerate(adapter_state):
        adapter_state[k] = v * ADAPTER_CONDITIONING_SCALE
    cond["adapter_state"] = adapter_state


def call(model, x, sigma, cond):
    t = torch.tensor([sigma * 1000.0], dtype=torch.float32, device=x.device)
    return model.unet(x, t, encoder_hidden_states=cond["encoder_hidden_states"],
                      down_intrablock_additional_residuals=[state.clone() for state in cond["adapter_state"]],
                      return_dict=False)[0]


if __name__ == "__main__":
    capture("t2i_adapter", StableDiffusionAdapter, inputs, call, sys.argv[1], PRODUCER, prepare=prepare)
