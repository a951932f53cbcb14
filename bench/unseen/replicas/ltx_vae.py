"""The LTX-Video VAE (AutoencoderKLLTXVideo) whole, reimplemented for torch 1.13 (no diffusers here), captured small
in f32 on CPU as one forward: a clip encoded, the posterior's mode taken, decoded.

Follows huggingface/diffusers src/diffusers/models/autoencoders/autoencoder_kl_ltx.py at
65d2591fec91a4ebfb20231d51a76959c4be97d5: LTXVideoCausalConv3d (no time padding in the Conv3d; the first frame
repeated kernel−1 times before the clip when causal, the first and the last frame (kernel−1)/2 times each side when
not), LTXVideoResnetBlock3d (weightless RMSNorm over the channels, ε 1e-8, applied through movedim(1, -1); SiLU;
conv1; norm2; SiLU; dropout; conv2; where the widths differ a LayerNorm with affine then a 1x1x1 causal conv on the
shortcut), LTXVideoDownsampler3d (space-to-depth of the conv's output plus a residual that is the input's
space-to-depth averaged over groups), LTXVideoUpsampler3d (depth-to-space of the conv's output, the first stride−1
frames cut, with an optional residual of the input's depth-to-space repeated over the channels),
LTXVideoDownBlock3D (resnets, a stride-2 causal conv, a resnet to the next width), LTXVideo095DownBlock3D,
LTXVideoMidBlock3d, LTXVideoUpBlock3d (a resnet to the new width, the upsampler, resnets), LTXVideoEncoder3d (the
spatial patchify reshape/permute(0, 1, 3, 7, 5, 2, 4, 6), conv_out to latent+1 channels, the last channel
repeated latent−1 times), LTXVideoDecoder3d (non-causal; its unpatchify permute(0, 1, 5, 2, 6, 4, 7, 3)) and
AutoencoderKLLTXVideo.forward (encode, DiagonalGaussianDistribution(h).mode(): the first half of the channels,
decode), with diffusers' normalization.py RMSNorm arithmetic and the timestep-conditioning parts (PixArtAlpha
CombinedTimestepSizeEmbeddings, scale_shift_table) as upstream. The same module tree, parameter names and shapes,
call boundaries and arithmetic line for line. Stand-in for what torch 1.13 lacks: nn.LayerNorm(bias=True) is
nn.LayerNorm's default.

Default (LTX-Video 0.9.0's layout): block_out_channels (8, 16) in both halves, layers_per_block (1, 1, 1),
spatio_temporal_scaling (True, True), latent_channels 4, patch_size 2, patch_size_t 1, encoder causal, decoder not,
timestep_conditioning False: a [1, 3, 9, 16, 16] clip → latent [1, 4, 3, 2, 2] → [1, 3, 9, 16, 16].
--v095 (0.9.5's layout, small): two LTXVideo095DownBlock3D with "spatiotemporal" LTXVideoDownsampler3d over
block_out_channels (8, 16, 32); decoder_block_out_channels (16, 32), upsample_residual True, upsample_factor 2,
timestep_conditioning True, decoded with temb = 0.05 (the pipeline's decode_timestep); same clip and latent shape.

usage: /usr/bin/python3 bench/unseen/replicas/ltx_vae.py OUTDIR [--v095]
REPLICA_DTYPE=bf16 [REPLICA_DEVICE=cuda] as run.py's replicas: the bf16 run, beside the f32 one.
"""
import sys

import torch
import torch.nn as nn

from ltx import PixArtAlphaCombinedTimestepSizeEmbeddings, RMSNorm  # the same diffusers classes as the DiT's
from run import capture_once


def _triple(v):
    return v if isinstance(v, tuple) else (v, v, v)


class LTXVideoCausalConv3d(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size=3, stride=1, dilation=1, groups=1,
                 padding_mode="zeros", is_causal=True):
        super().__init__()
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.is_causal = is_causal
        self.kernel_size = _triple(kernel_size)
        dilation = dilation if isinstance(dilation, tuple) else (dilation, 1, 1)
        stride = _triple(stride)
        padding = (0, self.kernel_size[1] // 2, self.kernel_size[2] // 2)
        self.conv = nn.Conv3d(in_channels, out_channels, self.kernel_size, stride=stride, dilation=dilation,
                              groups=groups, padding=padding, padding_mode=padding_mode)

    def forward(self, hidden_states):
        time_kernel_size = self.kernel_size[0]
        if self.is_causal:
            pad_left = hidden_states[:, :, :1, :, :].repeat((1, 1, time_kernel_size - 1, 1, 1))
            hidden_states = torch.cat([pad_left, hidden_states], dim=2)
        else:
            half = (time_kernel_size - 1) // 2
            pad_left = hidden_states[:, :, :1, :, :].repeat((1, 1, half, 1, 1))
            pad_right = hidden_states[:, :, -1:, :, :].repeat((1, 1, half, 1, 1))
            hidden_states = torch.cat([pad_left, hidden_states, pad_right], dim=2)
        return self.conv(hidden_states)


class LTXVideoResnetBlock3d(nn.Module):
    def __init__(self, in_channels, out_channels=None, dropout=0.0, eps=1e-6, elementwise_affine=False,
                 non_linearity="swish", is_causal=True, inject_noise=False, timestep_conditioning=False):
        super().__init__()
        out_channels = out_channels or in_channels
        self.nonlinearity = nn.SiLU()  # get_activation("swish")
        self.norm1 = RMSNorm(in_channels, eps=1e-8, elementwise_affine=elementwise_affine)
        self.conv1 = LTXVideoCausalConv3d(in_channels, out_channels, kernel_size=3, is_causal=is_causal)
        self.norm2 = RMSNorm(out_channels, eps=1e-8, elementwise_affine=elementwise_affine)
        self.dropout = nn.Dropout(dropout)
        self.conv2 = LTXVideoCausalConv3d(out_channels, out_channels, kernel_size=3, is_causal=is_causal)
        self.norm3 = None
        self.conv_shortcut = None
        if in_channels != out_channels:
            self.norm3 = nn.LayerNorm(in_channels, eps=eps, elementwise_affine=True)
            self.conv_shortcut = LTXVideoCausalConv3d(in_channels, out_channels, kernel_size=1, stride=1,
                                                      is_causal=is_causal)
        self.per_channel_scale1 = None
        self.per_channel_scale2 = None
        if inject_noise:
            self.per_channel_scale1 = nn.Parameter(torch.zeros(in_channels, 1, 1))
            self.per_channel_scale2 = nn.Parameter(torch.zeros(in_channels, 1, 1))
        self.scale_shift_table = None
        if timestep_conditioning:
            self.scale_shift_table = nn.Parameter(torch.randn(4, in_channels) / in_channels ** 0.5)

    def forward(self, inputs, temb=None, generator=None):
        hidden_states = inputs
        hidden_states = self.norm1(hidden_states.movedim(1, -1)).movedim(-1, 1)
        if self.scale_shift_table is not None:
            temb = temb.unflatten(1, (4, -1)) + self.scale_shift_table[None, ..., None, None, None]
            shift_1, scale_1, shift_2, scale_2 = temb.unbind(dim=1)
            hidden_states = hidden_states * (1 + scale_1) + shift_1
        hidden_states = self.nonlinearity(hidden_states)
        hidden_states = self.conv1(hidden_states)
        if self.per_channel_scale1 is not None:
            spatial_noise = torch.randn(hidden_states.shape[-2:], generator=generator, dtype=hidden_states.dtype)[None]
            hidden_states = hidden_states + (spatial_noise * self.per_channel_scale1)[None, :, None, ...]
        hidden_states = self.norm2(hidden_states.movedim(1, -1)).movedim(-1, 1)
        if self.scale_shift_table is not None:
            hidden_states = hidden_states * (1 + scale_2) + shift_2
        hidden_states = self.nonlinearity(hidden_states)
        hidden_states = self.dropout(hidden_states)
        hidden_states = self.conv2(hidden_states)
        if self.per_channel_scale2 is not None:
            spatial_noise = torch.randn(hidden_states.shape[-2:], generator=generator, dtype=hidden_states.dtype)[None]
            hidden_states = hidden_states + (spatial_noise * self.per_channel_scale2)[None, :, None, ...]
        if self.norm3 is not None:
            inputs = self.norm3(inputs.movedim(1, -1)).movedim(-1, 1)
        if self.conv_shortcut is not None:
            inputs = self.conv_shortcut(inputs)
        return hidden_states + inputs


def _space_to_depth(x, stride):
    """[B, C, F·s0, H·s1, W·s2] → [B, C·s0·s1·s2, F, H, W], channel-major then (s0, s1, s2)."""
    x = x.unflatten(4, (-1, stride[2])).unflatten(3, (-1, stride[1])).unflatten(2, (-1, stride[0]))
    return x.permute(0, 1, 3, 5, 7, 2, 4, 6).flatten(1, 4)


class LTXVideoDownsampler3d(nn.Module):
    def __init__(self, in_channels, out_channels, stride=1, is_causal=True, padding_mode="zeros"):
        super().__init__()
        self.stride = _triple(stride)
        self.group_size = (in_channels * self.stride[0] * self.stride[1] * self.stride[2]) // out_channels
        out_channels = out_channels // (self.stride[0] * self.stride[1] * self.stride[2])
        self.conv = LTXVideoCausalConv3d(in_channels, out_channels, kernel_size=3, stride=1, is_causal=is_causal,
                                         padding_mode=padding_mode)

    def forward(self, hidden_states):
        hidden_states = torch.cat([hidden_states[:, :, : self.stride[0] - 1], hidden_states], dim=2)
        residual = _space_to_depth(hidden_states, self.stride)
        residual = residual.unflatten(1, (-1, self.group_size))
        residual = residual.mean(dim=2)
        hidden_states = self.conv(hidden_states)
        hidden_states = _space_to_depth(hidden_states, self.stride)
        return hidden_states + residual


class LTXVideoUpsampler3d(nn.Module):
    def __init__(self, in_channels, stride=1, is_causal=True, residual=False, upscale_factor=1,
                 padding_mode="zeros"):
        super().__init__()
        self.stride = _triple(stride)
        self.residual = residual
        self.upscale_factor = upscale_factor
        out_channels = (in_channels * self.stride[0] * self.stride[1] * self.stride[2]) // upscale_factor
        self.conv = LTXVideoCausalConv3d(in_channels, out_channels, kernel_size=3, stride=1, is_causal=is_causal,
                                         padding_mode=padding_mode)

    def forward(self, hidden_states):
        batch_size, num_channels, num_frames, height, width = hidden_states.shape
        s0, s1, s2 = self.stride
        if self.residual:
            residual = hidden_states.reshape(batch_size, -1, s0, s1, s2, num_frames, height, width)
            residual = residual.permute(0, 1, 5, 2, 6, 3, 7, 4).flatten(6, 7).flatten(4, 5).flatten(2, 3)
            repeats = (s0 * s1 * s2) // self.upscale_factor
            residual = residual.repeat(1, repeats, 1, 1, 1)
            residual = residual[:, :, s0 - 1:]
        hidden_states = self.conv(hidden_states)
        hidden_states = hidden_states.reshape(batch_size, -1, s0, s1, s2, num_frames, height, width)
        hidden_states = hidden_states.permute(0, 1, 5, 2, 6, 3, 7, 4).flatten(6, 7).flatten(4, 5).flatten(2, 3)
        hidden_states = hidden_states[:, :, s0 - 1:]
        if self.residual:
            hidden_states = hidden_states + residual
        return hidden_states


class LTXVideoDownBlock3D(nn.Module):
    def __init__(self, in_channels, out_channels=None, num_layers=1, dropout=0.0, resnet_eps=1e-6,
                 resnet_act_fn="swish", spatio_temporal_scale=True, is_causal=True):
        super().__init__()
        out_channels = out_channels or in_channels
        self.resnets = nn.ModuleList([
            LTXVideoResnetBlock3d(in_channels, in_channels, dropout=dropout, eps=resnet_eps,
                                  non_linearity=resnet_act_fn, is_causal=is_causal) for _ in range(num_layers)])
        self.downsamplers = None
        if spatio_temporal_scale:
            self.downsamplers = nn.ModuleList([
                LTXVideoCausalConv3d(in_channels, in_channels, kernel_size=3, stride=(2, 2, 2), is_causal=is_causal)])
        self.conv_out = None
        if in_channels != out_channels:
            self.conv_out = LTXVideoResnetBlock3d(in_channels, out_channels, dropout=dropout, eps=resnet_eps,
                                                  non_linearity=resnet_act_fn, is_causal=is_causal)

    def forward(self, hidden_states, temb=None, generator=None):
        for resnet in self.resnets:
            hidden_states = resnet(hidden_states, temb, generator)
        if self.downsamplers is not None:
            for downsampler in self.downsamplers:
                hidden_states = downsampler(hidden_states)
        if self.conv_out is not None:
            hidden_states = self.conv_out(hidden_states, temb, generator)
        return hidden_states


class LTXVideo095DownBlock3D(nn.Module):
    _STRIDES = {"spatial": (1, 2, 2), "temporal": (2, 1, 1), "spatiotemporal": (2, 2, 2)}

    def __init__(self, in_channels, out_channels=None, num_layers=1, dropout=0.0, resnet_eps=1e-6,
                 resnet_act_fn="swish", spatio_temporal_scale=True, is_causal=True, downsample_type="conv"):
        super().__init__()
        out_channels = out_channels or in_channels
        self.resnets = nn.ModuleList([
            LTXVideoResnetBlock3d(in_channels, in_channels, dropout=dropout, eps=resnet_eps,
                                  non_linearity=resnet_act_fn, is_causal=is_causal) for _ in range(num_layers)])
        self.downsamplers = None
        if spatio_temporal_scale:
            self.downsamplers = nn.ModuleList()
            if downsample_type == "conv":
                self.downsamplers.append(LTXVideoCausalConv3d(in_channels, in_channels, kernel_size=3,
                                                              stride=(2, 2, 2), is_causal=is_causal))
            else:
                self.downsamplers.append(LTXVideoDownsampler3d(in_channels, out_channels,
                                                               stride=self._STRIDES[downsample_type],
                                                               is_causal=is_causal))

    def forward(self, hidden_states, temb=None, generator=None):
        for resnet in self.resnets:
            hidden_states = resnet(hidden_states, temb, generator)
        if self.downsamplers is not None:
            for downsampler in self.downsamplers:
                hidden_states = downsampler(hidden_states)
        return hidden_states


class LTXVideoMidBlock3d(nn.Module):
    def __init__(self, in_channels, num_layers=1, dropout=0.0, resnet_eps=1e-6, resnet_act_fn="swish",
                 is_causal=True, inject_noise=False, timestep_conditioning=False):
        super().__init__()
        self.time_embedder = None
        if timestep_conditioning:
            self.time_embedder = PixArtAlphaCombinedTimestepSizeEmbeddings(in_channels * 4, 0)
        self.resnets = nn.ModuleList([
            LTXVideoResnetBlock3d(in_channels, in_channels, dropout=dropout, eps=resnet_eps,
                                  non_linearity=resnet_act_fn, is_causal=is_causal, inject_noise=inject_noise,
                                  timestep_conditioning=timestep_conditioning) for _ in range(num_layers)])

    def forward(self, hidden_states, temb=None, generator=None):
        if self.time_embedder is not None:
            temb = self.time_embedder(timestep=temb.flatten(), resolution=None, aspect_ratio=None,
                                      batch_size=hidden_states.size(0), hidden_dtype=hidden_states.dtype)
            temb = temb.view(hidden_states.size(0), -1, 1, 1, 1)
        for resnet in self.resnets:
            hidden_states = resnet(hidden_states, temb, generator)
        return hidden_states


class LTXVideoUpBlock3d(nn.Module):
    def __init__(self, in_channels, out_channels=None, num_layers=1, dropout=0.0, resnet_eps=1e-6,
                 resnet_act_fn="swish", spatio_temporal_scale=True, is_causal=True, inject_noise=False,
                 timestep_conditioning=False, upsample_residual=False, upscale_factor=1):
        super().__init__()
        out_channels = out_channels or in_channels
        self.time_embedder = None
        if timestep_conditioning:
            self.time_embedder = PixArtAlphaCombinedTimestepSizeEmbeddings(in_channels * 4, 0)
        self.conv_in = None
        if in_channels != out_channels:
            self.conv_in = LTXVideoResnetBlock3d(in_channels, out_channels, dropout=dropout, eps=resnet_eps,
                                                 non_linearity=resnet_act_fn, is_causal=is_causal,
                                                 inject_noise=inject_noise,
                                                 timestep_conditioning=timestep_conditioning)
        self.upsamplers = None
        if spatio_temporal_scale:
            self.upsamplers = nn.ModuleList([
                LTXVideoUpsampler3d(out_channels * upscale_factor, stride=(2, 2, 2), is_causal=is_causal,
                                    residual=upsample_residual, upscale_factor=upscale_factor)])
        self.resnets = nn.ModuleList([
            LTXVideoResnetBlock3d(out_channels, out_channels, dropout=dropout, eps=resnet_eps,
                                  non_linearity=resnet_act_fn, is_causal=is_causal, inject_noise=inject_noise,
                                  timestep_conditioning=timestep_conditioning) for _ in range(num_layers)])

    def forward(self, hidden_states, temb=None, generator=None):
        if self.conv_in is not None:
            hidden_states = self.conv_in(hidden_states, temb, generator)
        if self.time_embedder is not None:
            temb = self.time_embedder(timestep=temb.flatten(), resolution=None, aspect_ratio=None,
                                      batch_size=hidden_states.size(0), hidden_dtype=hidden_states.dtype)
            temb = temb.view(hidden_states.size(0), -1, 1, 1, 1)
        if self.upsamplers is not None:
            for upsampler in self.upsamplers:
                hidden_states = upsampler(hidden_states)
        for resnet in self.resnets:
            hidden_states = resnet(hidden_states, temb, generator)
        return hidden_states


class LTXVideoEncoder3d(nn.Module):
    def __init__(self, in_channels=3, out_channels=128, block_out_channels=(128, 256, 512, 512),
                 down_block_types=("LTXVideoDownBlock3D",) * 4, spatio_temporal_scaling=(True, True, True, False),
                 layers_per_block=(4, 3, 3, 3, 4), downsample_type=("conv",) * 4, patch_size=4, patch_size_t=1,
                 resnet_norm_eps=1e-6, is_causal=True):
        super().__init__()
        self.patch_size = patch_size
        self.patch_size_t = patch_size_t
        self.in_channels = in_channels * patch_size ** 2
        output_channel = block_out_channels[0]
        self.conv_in = LTXVideoCausalConv3d(self.in_channels, output_channel, kernel_size=3, stride=1,
                                            is_causal=is_causal)
        is_ltx_095 = down_block_types[-1] == "LTXVideo095DownBlock3D"
        num_block_out_channels = len(block_out_channels) - (1 if is_ltx_095 else 0)
        self.down_blocks = nn.ModuleList([])
        for i in range(num_block_out_channels):
            input_channel = output_channel
            if not is_ltx_095:
                output_channel = block_out_channels[i + 1] if i + 1 < num_block_out_channels else block_out_channels[i]
            else:
                output_channel = block_out_channels[i + 1]
            if down_block_types[i] == "LTXVideoDownBlock3D":
                down_block = LTXVideoDownBlock3D(input_channel, output_channel, num_layers=layers_per_block[i],
                                                 resnet_eps=resnet_norm_eps,
                                                 spatio_temporal_scale=spatio_temporal_scaling[i],
                                                 is_causal=is_causal)
            else:
                down_block = LTXVideo095DownBlock3D(input_channel, output_channel, num_layers=layers_per_block[i],
                                                    resnet_eps=resnet_norm_eps,
                                                    spatio_temporal_scale=spatio_temporal_scaling[i],
                                                    is_causal=is_causal, downsample_type=downsample_type[i])
            self.down_blocks.append(down_block)
        self.mid_block = LTXVideoMidBlock3d(output_channel, num_layers=layers_per_block[-1],
                                            resnet_eps=resnet_norm_eps, is_causal=is_causal)
        self.norm_out = RMSNorm(out_channels, eps=1e-8, elementwise_affine=False)
        self.conv_act = nn.SiLU()
        self.conv_out = LTXVideoCausalConv3d(output_channel, out_channels + 1, kernel_size=3, stride=1,
                                             is_causal=is_causal)

    def forward(self, hidden_states):
        p = self.patch_size
        p_t = self.patch_size_t
        batch_size, num_channels, num_frames, height, width = hidden_states.shape
        hidden_states = hidden_states.reshape(batch_size, num_channels, num_frames // p_t, p_t, height // p, p,
                                              width // p, p)
        # channels ordered (c, p_t, p_w, p_h): upstream's patch order
        hidden_states = hidden_states.permute(0, 1, 3, 7, 5, 2, 4, 6).flatten(1, 4)
        hidden_states = self.conv_in(hidden_states)
        for down_block in self.down_blocks:
            hidden_states = down_block(hidden_states)
        hidden_states = self.mid_block(hidden_states)
        hidden_states = self.norm_out(hidden_states.movedim(1, -1)).movedim(-1, 1)
        hidden_states = self.conv_act(hidden_states)
        hidden_states = self.conv_out(hidden_states)
        last_channel = hidden_states[:, -1:]
        last_channel = last_channel.repeat(1, hidden_states.size(1) - 2, 1, 1, 1)
        return torch.cat([hidden_states, last_channel], dim=1)


class LTXVideoDecoder3d(nn.Module):
    def __init__(self, in_channels=128, out_channels=3, block_out_channels=(128, 256, 512, 512),
                 spatio_temporal_scaling=(True, True, True, False), layers_per_block=(4, 3, 3, 3, 4), patch_size=4,
                 patch_size_t=1, resnet_norm_eps=1e-6, is_causal=False, inject_noise=(False,) * 4,
                 timestep_conditioning=False, upsample_residual=(False,) * 4, upsample_factor=(1,) * 4):
        super().__init__()
        self.patch_size = patch_size
        self.patch_size_t = patch_size_t
        self.out_channels = out_channels * patch_size ** 2
        block_out_channels = tuple(reversed(block_out_channels))
        spatio_temporal_scaling = tuple(reversed(spatio_temporal_scaling))
        layers_per_block = tuple(reversed(layers_per_block))
        inject_noise = tuple(reversed(inject_noise))
        upsample_residual = tuple(reversed(upsample_residual))
        upsample_factor = tuple(reversed(upsample_factor))
        output_channel = block_out_channels[0]
        self.conv_in = LTXVideoCausalConv3d(in_channels, output_channel, kernel_size=3, stride=1, is_causal=is_causal)
        self.mid_block = LTXVideoMidBlock3d(output_channel, num_layers=layers_per_block[0], resnet_eps=resnet_norm_eps,
                                            is_causal=is_causal, inject_noise=inject_noise[0],
                                            timestep_conditioning=timestep_conditioning)
        self.up_blocks = nn.ModuleList([])
        for i in range(len(block_out_channels)):
            input_channel = output_channel // upsample_factor[i]
            output_channel = block_out_channels[i] // upsample_factor[i]
            self.up_blocks.append(LTXVideoUpBlock3d(
                input_channel, output_channel, num_layers=layers_per_block[i + 1], resnet_eps=resnet_norm_eps,
                spatio_temporal_scale=spatio_temporal_scaling[i], is_causal=is_causal,
                inject_noise=inject_noise[i + 1], timestep_conditioning=timestep_conditioning,
                upsample_residual=upsample_residual[i], upscale_factor=upsample_factor[i]))
        self.norm_out = RMSNorm(out_channels, eps=1e-8, elementwise_affine=False)
        self.conv_act = nn.SiLU()
        self.conv_out = LTXVideoCausalConv3d(output_channel, self.out_channels, kernel_size=3, stride=1,
                                             is_causal=is_causal)
        self.time_embedder = None
        self.scale_shift_table = None
        self.timestep_scale_multiplier = None
        if timestep_conditioning:
            self.timestep_scale_multiplier = nn.Parameter(torch.tensor(1000.0, dtype=torch.float32))
            self.time_embedder = PixArtAlphaCombinedTimestepSizeEmbeddings(output_channel * 2, 0)
            self.scale_shift_table = nn.Parameter(torch.randn(2, output_channel) / output_channel ** 0.5)

    def forward(self, hidden_states, temb=None):
        hidden_states = self.conv_in(hidden_states)
        if self.timestep_scale_multiplier is not None:
            temb = temb * self.timestep_scale_multiplier
        hidden_states = self.mid_block(hidden_states, temb)
        for up_block in self.up_blocks:
            hidden_states = up_block(hidden_states, temb)
        hidden_states = self.norm_out(hidden_states.movedim(1, -1)).movedim(-1, 1)
        if self.time_embedder is not None:
            temb = self.time_embedder(timestep=temb.flatten(), resolution=None, aspect_ratio=None,
                                      batch_size=hidden_states.size(0), hidden_dtype=hidden_states.dtype)
            temb = temb.view(hidden_states.size(0), -1, 1, 1, 1).unflatten(1, (2, -1))
            temb = temb + self.scale_shift_table[None, ..., None, None, None]
            shift, scale = temb.unbind(dim=1)
            hidden_states = hidden_states * (1 + scale) + shift
        hidden_states = self.conv_act(hidden_states)
        hidden_states = self.conv_out(hidden_states)
        p = self.patch_size
        p_t = self.patch_size_t
        batch_size, num_channels, num_frames, height, width = hidden_states.shape
        hidden_states = hidden_states.reshape(batch_size, -1, p_t, p, p, num_frames, height, width)
        return hidden_states.permute(0, 1, 5, 2, 6, 4, 7, 3).flatten(6, 7).flatten(4, 5).flatten(2, 3)


class AutoencoderKLLTXVideo(nn.Module):
    def __init__(self, in_channels=3, out_channels=3, latent_channels=4, block_out_channels=(8, 16),
                 down_block_types=("LTXVideoDownBlock3D", "LTXVideoDownBlock3D"),
                 decoder_block_out_channels=(8, 16), layers_per_block=(1, 1, 1),
                 decoder_layers_per_block=(1, 1, 1), spatio_temporal_scaling=(True, True),
                 decoder_spatio_temporal_scaling=(True, True), decoder_inject_noise=(False, False, False),
                 downsample_type=("conv", "conv"), upsample_residual=(False, False), upsample_factor=(1, 1),
                 timestep_conditioning=False, patch_size=2, patch_size_t=1, resnet_norm_eps=1e-6,
                 encoder_causal=True, decoder_causal=False):
        super().__init__()
        self.encoder = LTXVideoEncoder3d(in_channels, latent_channels, block_out_channels, down_block_types,
                                         spatio_temporal_scaling, layers_per_block, downsample_type, patch_size,
                                         patch_size_t, resnet_norm_eps, encoder_causal)
        self.decoder = LTXVideoDecoder3d(latent_channels, out_channels, decoder_block_out_channels,
                                         decoder_spatio_temporal_scaling, decoder_layers_per_block, patch_size,
                                         patch_size_t, resnet_norm_eps, decoder_causal, decoder_inject_noise,
                                         timestep_conditioning, upsample_residual, upsample_factor)
        self.register_buffer("latents_mean", torch.zeros((latent_channels,)), persistent=True)
        self.register_buffer("latents_std", torch.ones((latent_channels,)), persistent=True)

    def encode(self, x):
        h = self.encoder(x)
        # DiagonalGaussianDistribution(h).mode(): the mean (logvar, std and var are made and unused)
        mean, logvar = torch.chunk(h, 2, dim=1)
        return mean

    def decode(self, z, temb=None):
        return self.decoder(z, temb)

    def forward(self, sample, temb=None):
        z = self.encode(sample)
        return self.decode(z, temb)


V095 = "--v095" in sys.argv


def _build():
    if not V095:
        return AutoencoderKLLTXVideo()
    return AutoencoderKLLTXVideo(
        block_out_channels=(8, 16, 32), down_block_types=("LTXVideo095DownBlock3D",) * 2,
        layers_per_block=(1, 1, 1), spatio_temporal_scaling=(True, True),
        downsample_type=("spatiotemporal", "spatiotemporal"), decoder_block_out_channels=(16, 32),
        decoder_layers_per_block=(1, 1, 1), decoder_spatio_temporal_scaling=(True, True),
        upsample_residual=(True, True), upsample_factor=(2, 2), timestep_conditioning=True)


def _inputs(g):
    args = {"video": torch.randn((1, 3, 9, 16, 16), generator=g)}
    if V095:
        args["temb"] = torch.tensor([0.05])
    return args


if __name__ == "__main__":
    capture_once(
        "ltx095_vae" if V095 else "ltx_vae", _build, _inputs, sys.argv[1],
        dict(library_source="replica of huggingface/diffusers autoencoder_kl_ltx.py (torch 1.13)",
             note="AutoencoderKLLTXVideo at widths 8/16: a spatial patchify, causal convolutions whose time padding "
                  "repeats the first frame (the decoder's the first and last), weightless channel RMSNorms, "
                  "stride-2 causal downsampling, the posterior's mode (conv_out's last channel repeated), "
                  "depth-to-space upsampling with the first frame cut, the unpatchify"))
