"""The LTX-2 video VAE (AutoencoderKLLTX2Video) whole, reimplemented for torch 1.13 (no diffusers here), captured small
in f32 on CPU as one forward with tiling and framewise coding off: a clip encoded, the posterior's mode taken,
decoded.

Follows huggingface/diffusers src/diffusers/models/autoencoders/autoencoder_kl_ltx2.py at
00eb30600c98a4c4b6b24476228603581a7e261b line for line: PerChannelRMSNorm (weightless, over dim 1 in place:
x / sqrt(mean(x**2, dim=1) + 1e-8), no movedim), LTX2VideoCausalConv3d (the causality chosen per call: no time
padding in the Conv3d, the first frame repeated kernel−1 times before the clip when causal, the first and the last
frame (kernel−1)/2 times each side when not; the spatial padding inside the Conv3d with a configurable padding_mode,
"zeros" in the encoder, "reflect" in the decoder), LTX2VideoResnetBlock3d (norm1, SiLU, conv1, norm2, SiLU, dropout,
conv2, plus the input; a LayerNorm and a plain 1x1x1 nn.Conv3d on the shortcut where the widths differ, which no
block of the released layout builds), LTX2VideoDownsampler3d (the first stride_t−1 frames prepended; space-to-depth
of the conv's output plus the input's space-to-depth averaged over channel groups), LTX2VideoUpsampler3d
(depth-to-space of the conv's output, the first stride_t−1 frames cut, plus the input's depth-to-space tiled over
the channels by repeat, its first frames cut too), LTX2VideoDownBlock3D (resnets at the input width, then a
"conv" / "spatial" / "temporal" / "spatiotemporal" downsampler to the next width), LTX2VideoMidBlock3d,
LTX2VideoUpBlock3d, LTX2VideoEncoder3d (the spatial patchify reshape/permute(0, 1, 3, 7, 5, 2, 4, 6), conv_in to
the latent width, conv_out to latent+1 channels, the last channel repeated latent−1 times), LTX2VideoDecoder3d (its
unpatchify permute(0, 1, 5, 2, 6, 4, 7, 3)) and AutoencoderKLLTX2Video.forward (encode with causal None → the
encoder's is_causal, DiagonalGaussianDistribution(h).mode(): the first half of the channels, decode with causal None
→ the decoder's is_causal). The same module tree, parameter names and shapes, call boundaries and arithmetic; the
timestep-conditioning parts (PixArtAlphaCombinedTimestepSizeEmbeddings, the scale_shift_tables) are written as
upstream but off, as in the released config. Nothing is imported from ltx_vae.py: every LTX-2 class differs from its
LTX-Video counterpart (the causal flag per call, PerChannelRMSNorm instead of RMSNorm through movedim, a plain
Conv3d shortcut, configurable spatial padding, no conv_in resnet in the up blocks unless widths differ); only the
shared diffusers embedding is taken from ltx.py. Stand-in for what torch 1.13 lacks: nn.LayerNorm(bias=True) is
nn.LayerNorm's default.

Config: LTX-2.0's released VAE (scripts/convert_ltx2_to_diffusers.py, version "2.0": the class defaults but
decoder_causal False) divided by 32 in width, so every downsampler keeps its released group size (2, 1, 4, 4) and
every upsampler its repeat count (4): latent_channels 4, block_out_channels (8, 16, 32, 64) with downsample_type
("spatial", "temporal", "spatiotemporal", "spatiotemporal"), decoder_block_out_channels (8, 16, 32) with three
"spatiotemporal" upsamplers, upsample_residual True, upsample_factor 2; layers_per_block (1, 1, 1, 1, 1) (released
(4, 6, 6, 2, 2)) and decoder_layers_per_block (1, 1, 1, 1) (released (5, 5, 5, 5)); patch_size 4, encoder causal
with zero padding, decoder non-causal with reflect padding, timestep_conditioning False: 32x spatial and 8x
temporal compression. A [1, 3, 9, 64, 64] clip → latent [1, 4, 2, 2, 2] (the smallest clip whose latent leaves room
for the decoder's reflect padding: reflect needs 2 cells a side) → [1, 3, 9, 64, 64].

usage: /usr/bin/python3 bench/unseen/replicas/ltx2_vae.py OUTDIR
REPLICA_DTYPE=bf16 [REPLICA_DEVICE=cuda] as run.py's replicas: the bf16 run, beside the f32 one.
"""
import sys

import torch
import torch.nn as nn

from ltx import PixArtAlphaCombinedTimestepSizeEmbeddings  # the same diffusers class as the DiT's
from run import capture_once


class PerChannelRMSNorm(nn.Module):
    def __init__(self, channel_dim=1, eps=1e-8):
        super().__init__()
        self.channel_dim = channel_dim
        self.eps = eps

    def forward(self, x, channel_dim=None):
        channel_dim = channel_dim or self.channel_dim
        mean_sq = torch.mean(x ** 2, dim=self.channel_dim, keepdim=True)
        rms = torch.sqrt(mean_sq + self.eps)
        return x / rms


class LTX2VideoCausalConv3d(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size=3, stride=1, dilation=1, groups=1,
                 spatial_padding_mode="zeros"):
        super().__init__()
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.kernel_size = kernel_size if isinstance(kernel_size, tuple) else (kernel_size, kernel_size, kernel_size)
        dilation = dilation if isinstance(dilation, tuple) else (dilation, 1, 1)
        stride = stride if isinstance(stride, tuple) else (stride, stride, stride)
        height_pad = self.kernel_size[1] // 2
        width_pad = self.kernel_size[2] // 2
        padding = (0, height_pad, width_pad)
        self.conv = nn.Conv3d(in_channels, out_channels, self.kernel_size, stride=stride, dilation=dilation,
                              groups=groups, padding=padding, padding_mode=spatial_padding_mode)

    def forward(self, hidden_states, causal=True):
        time_kernel_size = self.kernel_size[0]
        if causal:
            pad_left = hidden_states[:, :, :1, :, :].repeat((1, 1, time_kernel_size - 1, 1, 1))
            hidden_states = torch.concatenate([pad_left, hidden_states], dim=2)
        else:
            pad_left = hidden_states[:, :, :1, :, :].repeat((1, 1, (time_kernel_size - 1) // 2, 1, 1))
            pad_right = hidden_states[:, :, -1:, :, :].repeat((1, 1, (time_kernel_size - 1) // 2, 1, 1))
            hidden_states = torch.concatenate([pad_left, hidden_states, pad_right], dim=2)
        hidden_states = self.conv(hidden_states)
        return hidden_states


class LTX2VideoResnetBlock3d(nn.Module):
    def __init__(self, in_channels, out_channels=None, dropout=0.0, eps=1e-6, elementwise_affine=False,
                 non_linearity="swish", inject_noise=False, timestep_conditioning=False,
                 spatial_padding_mode="zeros"):
        super().__init__()
        out_channels = out_channels or in_channels
        self.nonlinearity = nn.SiLU()  # get_activation("swish")
        self.norm1 = PerChannelRMSNorm()
        self.conv1 = LTX2VideoCausalConv3d(in_channels, out_channels, kernel_size=3,
                                           spatial_padding_mode=spatial_padding_mode)
        self.norm2 = PerChannelRMSNorm()
        self.dropout = nn.Dropout(dropout)
        self.conv2 = LTX2VideoCausalConv3d(out_channels, out_channels, kernel_size=3,
                                           spatial_padding_mode=spatial_padding_mode)
        self.norm3 = None
        self.conv_shortcut = None
        if in_channels != out_channels:
            self.norm3 = nn.LayerNorm(in_channels, eps=eps, elementwise_affine=True)  # bias=True: the default
            self.conv_shortcut = nn.Conv3d(in_channels=in_channels, out_channels=out_channels, kernel_size=1,
                                           stride=1)
        self.per_channel_scale1 = None
        self.per_channel_scale2 = None
        if inject_noise:
            self.per_channel_scale1 = nn.Parameter(torch.zeros(in_channels, 1, 1))
            self.per_channel_scale2 = nn.Parameter(torch.zeros(in_channels, 1, 1))
        self.scale_shift_table = None
        if timestep_conditioning:
            self.scale_shift_table = nn.Parameter(torch.randn(4, in_channels) / in_channels ** 0.5)

    def forward(self, inputs, temb=None, generator=None, causal=True):
        hidden_states = inputs
        hidden_states = self.norm1(hidden_states)
        if self.scale_shift_table is not None:
            temb = temb.unflatten(1, (4, -1)) + self.scale_shift_table[None, ..., None, None, None]
            shift_1, scale_1, shift_2, scale_2 = temb.unbind(dim=1)
            hidden_states = hidden_states * (1 + scale_1) + shift_1
        hidden_states = self.nonlinearity(hidden_states)
        hidden_states = self.conv1(hidden_states, causal=causal)
        if self.per_channel_scale1 is not None:
            spatial_shape = hidden_states.shape[-2:]
            spatial_noise = torch.randn(spatial_shape, generator=generator, device=hidden_states.device,
                                        dtype=hidden_states.dtype)[None]
            hidden_states = hidden_states + (spatial_noise * self.per_channel_scale1)[None, :, None, ...]
        hidden_states = self.norm2(hidden_states)
        if self.scale_shift_table is not None:
            hidden_states = hidden_states * (1 + scale_2) + shift_2
        hidden_states = self.nonlinearity(hidden_states)
        hidden_states = self.dropout(hidden_states)
        hidden_states = self.conv2(hidden_states, causal=causal)
        if self.per_channel_scale2 is not None:
            spatial_shape = hidden_states.shape[-2:]
            spatial_noise = torch.randn(spatial_shape, generator=generator, device=hidden_states.device,
                                        dtype=hidden_states.dtype)[None]
            hidden_states = hidden_states + (spatial_noise * self.per_channel_scale2)[None, :, None, ...]
        if self.norm3 is not None:
            inputs = self.norm3(inputs.movedim(1, -1)).movedim(-1, 1)
        if self.conv_shortcut is not None:
            inputs = self.conv_shortcut(inputs)
        hidden_states = hidden_states + inputs
        return hidden_states


class LTX2VideoDownsampler3d(nn.Module):
    def __init__(self, in_channels, out_channels, stride=1, spatial_padding_mode="zeros"):
        super().__init__()
        self.stride = stride if isinstance(stride, tuple) else (stride, stride, stride)
        self.group_size = (in_channels * stride[0] * stride[1] * stride[2]) // out_channels
        out_channels = out_channels // (self.stride[0] * self.stride[1] * self.stride[2])
        self.conv = LTX2VideoCausalConv3d(in_channels, out_channels, kernel_size=3, stride=1,
                                          spatial_padding_mode=spatial_padding_mode)

    def forward(self, hidden_states, causal=True):
        hidden_states = torch.cat([hidden_states[:, :, : self.stride[0] - 1], hidden_states], dim=2)
        residual = (hidden_states.unflatten(4, (-1, self.stride[2]))
                    .unflatten(3, (-1, self.stride[1]))
                    .unflatten(2, (-1, self.stride[0])))
        residual = residual.permute(0, 1, 3, 5, 7, 2, 4, 6).flatten(1, 4)
        residual = residual.unflatten(1, (-1, self.group_size))
        residual = residual.mean(dim=2)
        hidden_states = self.conv(hidden_states, causal=causal)
        hidden_states = (hidden_states.unflatten(4, (-1, self.stride[2]))
                         .unflatten(3, (-1, self.stride[1]))
                         .unflatten(2, (-1, self.stride[0])))
        hidden_states = hidden_states.permute(0, 1, 3, 5, 7, 2, 4, 6).flatten(1, 4)
        hidden_states = hidden_states + residual
        return hidden_states


class LTX2VideoUpsampler3d(nn.Module):
    def __init__(self, in_channels, out_channels=None, stride=1, residual=False, upscale_factor=1,
                 spatial_padding_mode="zeros"):
        super().__init__()
        self.stride = stride if isinstance(stride, tuple) else (stride, stride, stride)
        self.residual = residual
        self.upscale_factor = upscale_factor
        out_channels = out_channels or in_channels
        out_channels = (out_channels * stride[0] * stride[1] * stride[2]) // upscale_factor
        self.conv = LTX2VideoCausalConv3d(in_channels, out_channels, kernel_size=3, stride=1,
                                          spatial_padding_mode=spatial_padding_mode)

    def forward(self, hidden_states, causal=True):
        batch_size, num_channels, num_frames, height, width = hidden_states.shape
        if self.residual:
            residual = hidden_states.reshape(batch_size, -1, self.stride[0], self.stride[1], self.stride[2],
                                             num_frames, height, width)
            residual = residual.permute(0, 1, 5, 2, 6, 3, 7, 4).flatten(6, 7).flatten(4, 5).flatten(2, 3)
            repeats = (self.stride[0] * self.stride[1] * self.stride[2]) // self.upscale_factor
            residual = residual.repeat(1, repeats, 1, 1, 1)
            residual = residual[:, :, self.stride[0] - 1:]
        hidden_states = self.conv(hidden_states, causal=causal)
        hidden_states = hidden_states.reshape(batch_size, -1, self.stride[0], self.stride[1], self.stride[2],
                                              num_frames, height, width)
        hidden_states = hidden_states.permute(0, 1, 5, 2, 6, 3, 7, 4).flatten(6, 7).flatten(4, 5).flatten(2, 3)
        hidden_states = hidden_states[:, :, self.stride[0] - 1:]
        if self.residual:
            hidden_states = hidden_states + residual
        return hidden_states


class LTX2VideoDownBlock3D(nn.Module):
    def __init__(self, in_channels, out_channels=None, num_layers=1, dropout=0.0, resnet_eps=1e-6,
                 resnet_act_fn="swish", spatio_temporal_scale=True, downsample_type="conv",
                 spatial_padding_mode="zeros"):
        super().__init__()
        out_channels = out_channels or in_channels
        self.resnets = nn.ModuleList([
            LTX2VideoResnetBlock3d(in_channels, in_channels, dropout=dropout, eps=resnet_eps,
                                   non_linearity=resnet_act_fn, spatial_padding_mode=spatial_padding_mode)
            for _ in range(num_layers)])
        self.downsamplers = None
        if spatio_temporal_scale:
            self.downsamplers = nn.ModuleList()
            if downsample_type == "conv":
                self.downsamplers.append(LTX2VideoCausalConv3d(in_channels, in_channels, kernel_size=3,
                                                               stride=(2, 2, 2),
                                                               spatial_padding_mode=spatial_padding_mode))
            elif downsample_type == "spatial":
                self.downsamplers.append(LTX2VideoDownsampler3d(in_channels, out_channels, stride=(1, 2, 2),
                                                                spatial_padding_mode=spatial_padding_mode))
            elif downsample_type == "temporal":
                self.downsamplers.append(LTX2VideoDownsampler3d(in_channels, out_channels, stride=(2, 1, 1),
                                                                spatial_padding_mode=spatial_padding_mode))
            elif downsample_type == "spatiotemporal":
                self.downsamplers.append(LTX2VideoDownsampler3d(in_channels, out_channels, stride=(2, 2, 2),
                                                                spatial_padding_mode=spatial_padding_mode))

    def forward(self, hidden_states, temb=None, generator=None, causal=True):
        for i, resnet in enumerate(self.resnets):
            hidden_states = resnet(hidden_states, temb, generator, causal=causal)
        if self.downsamplers is not None:
            for downsampler in self.downsamplers:
                hidden_states = downsampler(hidden_states, causal=causal)
        return hidden_states


class LTX2VideoMidBlock3d(nn.Module):
    def __init__(self, in_channels, num_layers=1, dropout=0.0, resnet_eps=1e-6, resnet_act_fn="swish",
                 inject_noise=False, timestep_conditioning=False, spatial_padding_mode="zeros"):
        super().__init__()
        self.time_embedder = None
        if timestep_conditioning:
            self.time_embedder = PixArtAlphaCombinedTimestepSizeEmbeddings(in_channels * 4, 0)
        self.resnets = nn.ModuleList([
            LTX2VideoResnetBlock3d(in_channels, in_channels, dropout=dropout, eps=resnet_eps,
                                   non_linearity=resnet_act_fn, inject_noise=inject_noise,
                                   timestep_conditioning=timestep_conditioning,
                                   spatial_padding_mode=spatial_padding_mode)
            for _ in range(num_layers)])

    def forward(self, hidden_states, temb=None, generator=None, causal=True):
        if self.time_embedder is not None:
            temb = self.time_embedder(timestep=temb.flatten(), resolution=None, aspect_ratio=None,
                                      batch_size=hidden_states.size(0), hidden_dtype=hidden_states.dtype)
            temb = temb.view(hidden_states.size(0), -1, 1, 1, 1)
        for i, resnet in enumerate(self.resnets):
            hidden_states = resnet(hidden_states, temb, generator, causal=causal)
        return hidden_states


class LTX2VideoUpBlock3d(nn.Module):
    def __init__(self, in_channels, out_channels=None, num_layers=1, dropout=0.0, resnet_eps=1e-6,
                 resnet_act_fn="swish", spatio_temporal_scale=True, upsample_type="spatiotemporal",
                 inject_noise=False, timestep_conditioning=False, upsample_residual=False, upscale_factor=1,
                 spatial_padding_mode="zeros"):
        super().__init__()
        out_channels = out_channels or in_channels
        self.time_embedder = None
        if timestep_conditioning:
            self.time_embedder = PixArtAlphaCombinedTimestepSizeEmbeddings(in_channels * 4, 0)
        self.conv_in = None
        if in_channels != out_channels:
            self.conv_in = LTX2VideoResnetBlock3d(in_channels, out_channels, dropout=dropout, eps=resnet_eps,
                                                  non_linearity=resnet_act_fn, inject_noise=inject_noise,
                                                  timestep_conditioning=timestep_conditioning,
                                                  spatial_padding_mode=spatial_padding_mode)
        self.upsamplers = None
        if spatio_temporal_scale:
            self.upsamplers = nn.ModuleList()
            if upsample_type == "spatial":
                upsample_stride = (1, 2, 2)
            elif upsample_type == "temporal":
                upsample_stride = (2, 1, 1)
            elif upsample_type == "spatiotemporal":
                upsample_stride = (2, 2, 2)
            self.upsamplers.append(LTX2VideoUpsampler3d(out_channels * upscale_factor, stride=upsample_stride,
                                                        residual=upsample_residual, upscale_factor=upscale_factor,
                                                        spatial_padding_mode=spatial_padding_mode))
        self.resnets = nn.ModuleList([
            LTX2VideoResnetBlock3d(out_channels, out_channels, dropout=dropout, eps=resnet_eps,
                                   non_linearity=resnet_act_fn, inject_noise=inject_noise,
                                   timestep_conditioning=timestep_conditioning,
                                   spatial_padding_mode=spatial_padding_mode)
            for _ in range(num_layers)])

    def forward(self, hidden_states, temb=None, generator=None, causal=True):
        if self.conv_in is not None:
            hidden_states = self.conv_in(hidden_states, temb, generator, causal=causal)
        if self.time_embedder is not None:
            temb = self.time_embedder(timestep=temb.flatten(), resolution=None, aspect_ratio=None,
                                      batch_size=hidden_states.size(0), hidden_dtype=hidden_states.dtype)
            temb = temb.view(hidden_states.size(0), -1, 1, 1, 1)
        if self.upsamplers is not None:
            for upsampler in self.upsamplers:
                hidden_states = upsampler(hidden_states, causal=causal)
        for i, resnet in enumerate(self.resnets):
            hidden_states = resnet(hidden_states, temb, generator, causal=causal)
        return hidden_states


class LTX2VideoEncoder3d(nn.Module):
    def __init__(self, in_channels=3, out_channels=128, block_out_channels=(256, 512, 1024, 2048),
                 down_block_types=("LTX2VideoDownBlock3D",) * 4, spatio_temporal_scaling=(True, True, True, True),
                 layers_per_block=(4, 6, 6, 2, 2),
                 downsample_type=("spatial", "temporal", "spatiotemporal", "spatiotemporal"), patch_size=4,
                 patch_size_t=1, resnet_norm_eps=1e-6, is_causal=True, spatial_padding_mode="zeros"):
        super().__init__()
        num_encoder_blocks = len(layers_per_block)
        if isinstance(spatio_temporal_scaling, bool):
            spatio_temporal_scaling = (spatio_temporal_scaling,) * (num_encoder_blocks - 1)
        self.patch_size = patch_size
        self.patch_size_t = patch_size_t
        self.in_channels = in_channels * patch_size ** 2
        self.is_causal = is_causal
        output_channel = out_channels
        self.conv_in = LTX2VideoCausalConv3d(self.in_channels, output_channel, kernel_size=3, stride=1,
                                             spatial_padding_mode=spatial_padding_mode)
        num_block_out_channels = len(block_out_channels)
        self.down_blocks = nn.ModuleList([])
        for i in range(num_block_out_channels):
            input_channel = output_channel
            output_channel = block_out_channels[i]
            if down_block_types[i] == "LTX2VideoDownBlock3D":
                down_block = LTX2VideoDownBlock3D(input_channel, output_channel, num_layers=layers_per_block[i],
                                                  resnet_eps=resnet_norm_eps,
                                                  spatio_temporal_scale=spatio_temporal_scaling[i],
                                                  downsample_type=downsample_type[i],
                                                  spatial_padding_mode=spatial_padding_mode)
            else:
                raise ValueError(f"Unknown down block type: {down_block_types[i]}")
            self.down_blocks.append(down_block)
        self.mid_block = LTX2VideoMidBlock3d(output_channel, num_layers=layers_per_block[-1],
                                             resnet_eps=resnet_norm_eps, spatial_padding_mode=spatial_padding_mode)
        self.norm_out = PerChannelRMSNorm()
        self.conv_act = nn.SiLU()
        self.conv_out = LTX2VideoCausalConv3d(output_channel, out_channels + 1, kernel_size=3, stride=1,
                                              spatial_padding_mode=spatial_padding_mode)

    def forward(self, hidden_states, causal=None):
        p = self.patch_size
        p_t = self.patch_size_t
        batch_size, num_channels, num_frames, height, width = hidden_states.shape
        post_patch_num_frames = num_frames // p_t
        post_patch_height = height // p
        post_patch_width = width // p
        causal = causal or self.is_causal
        hidden_states = hidden_states.reshape(batch_size, num_channels, post_patch_num_frames, p_t,
                                              post_patch_height, p, post_patch_width, p)
        # channels ordered (c, p_t, p_w, p_h): upstream's patch order
        hidden_states = hidden_states.permute(0, 1, 3, 7, 5, 2, 4, 6).flatten(1, 4)
        hidden_states = self.conv_in(hidden_states, causal=causal)
        for down_block in self.down_blocks:
            hidden_states = down_block(hidden_states, causal=causal)
        hidden_states = self.mid_block(hidden_states, causal=causal)
        hidden_states = self.norm_out(hidden_states)
        hidden_states = self.conv_act(hidden_states)
        hidden_states = self.conv_out(hidden_states, causal=causal)
        last_channel = hidden_states[:, -1:]
        last_channel = last_channel.repeat(1, hidden_states.size(1) - 2, 1, 1, 1)
        hidden_states = torch.cat([hidden_states, last_channel], dim=1)
        return hidden_states


class LTX2VideoDecoder3d(nn.Module):
    def __init__(self, in_channels=128, out_channels=3, block_out_channels=(256, 512, 1024),
                 spatio_temporal_scaling=(True, True, True), layers_per_block=(5, 5, 5, 5),
                 upsample_type=("spatiotemporal",) * 3, patch_size=4, patch_size_t=1, resnet_norm_eps=1e-6,
                 is_causal=False, inject_noise=(False, False, False), timestep_conditioning=False,
                 upsample_residual=(True, True, True), upsample_factor=(2, 2, 2), spatial_padding_mode="reflect"):
        super().__init__()
        num_decoder_blocks = len(layers_per_block)
        if isinstance(spatio_temporal_scaling, bool):
            spatio_temporal_scaling = (spatio_temporal_scaling,) * (num_decoder_blocks - 1)
        if isinstance(inject_noise, bool):
            inject_noise = (inject_noise,) * num_decoder_blocks
        if isinstance(upsample_residual, bool):
            upsample_residual = (upsample_residual,) * (num_decoder_blocks - 1)
        self.patch_size = patch_size
        self.patch_size_t = patch_size_t
        self.out_channels = out_channels * patch_size ** 2
        self.is_causal = is_causal
        block_out_channels = tuple(reversed(block_out_channels))
        spatio_temporal_scaling = tuple(reversed(spatio_temporal_scaling))
        layers_per_block = tuple(reversed(layers_per_block))
        inject_noise = tuple(reversed(inject_noise))
        upsample_residual = tuple(reversed(upsample_residual))
        upsample_factor = tuple(reversed(upsample_factor))
        output_channel = block_out_channels[0]
        self.conv_in = LTX2VideoCausalConv3d(in_channels, output_channel, kernel_size=3, stride=1,
                                             spatial_padding_mode=spatial_padding_mode)
        self.mid_block = LTX2VideoMidBlock3d(output_channel, num_layers=layers_per_block[0],
                                             resnet_eps=resnet_norm_eps, inject_noise=inject_noise[0],
                                             timestep_conditioning=timestep_conditioning,
                                             spatial_padding_mode=spatial_padding_mode)
        num_block_out_channels = len(block_out_channels)
        self.up_blocks = nn.ModuleList([])
        for i in range(num_block_out_channels):
            input_channel = output_channel // upsample_factor[i]
            output_channel = block_out_channels[i] // upsample_factor[i]
            self.up_blocks.append(LTX2VideoUpBlock3d(
                input_channel, output_channel, num_layers=layers_per_block[i + 1], resnet_eps=resnet_norm_eps,
                spatio_temporal_scale=spatio_temporal_scaling[i], upsample_type=upsample_type[i],
                inject_noise=inject_noise[i + 1], timestep_conditioning=timestep_conditioning,
                upsample_residual=upsample_residual[i], upscale_factor=upsample_factor[i],
                spatial_padding_mode=spatial_padding_mode))
        self.norm_out = PerChannelRMSNorm()
        self.conv_act = nn.SiLU()
        self.conv_out = LTX2VideoCausalConv3d(output_channel, self.out_channels, kernel_size=3, stride=1,
                                              spatial_padding_mode=spatial_padding_mode)
        self.time_embedder = None
        self.scale_shift_table = None
        self.timestep_scale_multiplier = None
        if timestep_conditioning:
            self.timestep_scale_multiplier = nn.Parameter(torch.tensor(1000.0, dtype=torch.float32))
            self.time_embedder = PixArtAlphaCombinedTimestepSizeEmbeddings(output_channel * 2, 0)
            self.scale_shift_table = nn.Parameter(torch.randn(2, output_channel) / output_channel ** 0.5)

    def forward(self, hidden_states, temb=None, causal=None):
        causal = causal or self.is_causal
        hidden_states = self.conv_in(hidden_states, causal=causal)
        if self.timestep_scale_multiplier is not None:
            temb = temb * self.timestep_scale_multiplier
        hidden_states = self.mid_block(hidden_states, temb, causal=causal)
        for up_block in self.up_blocks:
            hidden_states = up_block(hidden_states, temb, causal=causal)
        hidden_states = self.norm_out(hidden_states)
        if self.time_embedder is not None:
            temb = self.time_embedder(timestep=temb.flatten(), resolution=None, aspect_ratio=None,
                                      batch_size=hidden_states.size(0), hidden_dtype=hidden_states.dtype)
            temb = temb.view(hidden_states.size(0), -1, 1, 1, 1).unflatten(1, (2, -1))
            temb = temb + self.scale_shift_table[None, ..., None, None, None]
            shift, scale = temb.unbind(dim=1)
            hidden_states = hidden_states * (1 + scale) + shift
        hidden_states = self.conv_act(hidden_states)
        hidden_states = self.conv_out(hidden_states, causal=causal)
        p = self.patch_size
        p_t = self.patch_size_t
        batch_size, num_channels, num_frames, height, width = hidden_states.shape
        hidden_states = hidden_states.reshape(batch_size, -1, p_t, p, p, num_frames, height, width)
        hidden_states = hidden_states.permute(0, 1, 5, 2, 6, 4, 7, 3).flatten(6, 7).flatten(4, 5).flatten(2, 3)
        return hidden_states


class AutoencoderKLLTX2Video(nn.Module):
    """Upstream's __init__ signature, defaults replaced by the tiny config (the released LTX-2.0 layout / 32)."""

    def __init__(self, in_channels=3, out_channels=3, latent_channels=4, block_out_channels=(8, 16, 32, 64),
                 down_block_types=("LTX2VideoDownBlock3D",) * 4, decoder_block_out_channels=(8, 16, 32),
                 layers_per_block=(1, 1, 1, 1, 1), decoder_layers_per_block=(1, 1, 1, 1),
                 spatio_temporal_scaling=(True, True, True, True), decoder_spatio_temporal_scaling=(True, True, True),
                 decoder_inject_noise=(False, False, False, False),
                 downsample_type=("spatial", "temporal", "spatiotemporal", "spatiotemporal"),
                 upsample_type=("spatiotemporal", "spatiotemporal", "spatiotemporal"),
                 upsample_residual=(True, True, True), upsample_factor=(2, 2, 2), timestep_conditioning=False,
                 patch_size=4, patch_size_t=1, resnet_norm_eps=1e-6, scaling_factor=1.0, encoder_causal=True,
                 decoder_causal=False, encoder_spatial_padding_mode="zeros", decoder_spatial_padding_mode="reflect",
                 spatial_compression_ratio=None, temporal_compression_ratio=None):
        super().__init__()
        num_encoder_blocks = len(layers_per_block)
        num_decoder_blocks = len(decoder_layers_per_block)
        if isinstance(spatio_temporal_scaling, bool):
            spatio_temporal_scaling = (spatio_temporal_scaling,) * (num_encoder_blocks - 1)
        if isinstance(decoder_spatio_temporal_scaling, bool):
            decoder_spatio_temporal_scaling = (decoder_spatio_temporal_scaling,) * (num_decoder_blocks - 1)
        if isinstance(decoder_inject_noise, bool):
            decoder_inject_noise = (decoder_inject_noise,) * num_decoder_blocks
        if isinstance(upsample_residual, bool):
            upsample_residual = (upsample_residual,) * (num_decoder_blocks - 1)
        self.encoder = LTX2VideoEncoder3d(
            in_channels=in_channels, out_channels=latent_channels, block_out_channels=block_out_channels,
            down_block_types=down_block_types, spatio_temporal_scaling=spatio_temporal_scaling,
            layers_per_block=layers_per_block, downsample_type=downsample_type, patch_size=patch_size,
            patch_size_t=patch_size_t, resnet_norm_eps=resnet_norm_eps, is_causal=encoder_causal,
            spatial_padding_mode=encoder_spatial_padding_mode)
        self.decoder = LTX2VideoDecoder3d(
            in_channels=latent_channels, out_channels=out_channels, block_out_channels=decoder_block_out_channels,
            spatio_temporal_scaling=decoder_spatio_temporal_scaling, layers_per_block=decoder_layers_per_block,
            upsample_type=upsample_type, patch_size=patch_size, patch_size_t=patch_size_t,
            resnet_norm_eps=resnet_norm_eps, is_causal=decoder_causal, timestep_conditioning=timestep_conditioning,
            inject_noise=decoder_inject_noise, upsample_residual=upsample_residual, upsample_factor=upsample_factor,
            spatial_padding_mode=decoder_spatial_padding_mode)
        self.register_buffer("latents_mean", torch.zeros((latent_channels,)), persistent=True)
        self.register_buffer("latents_std", torch.ones((latent_channels,)), persistent=True)
        self.spatial_compression_ratio = (patch_size * 2 ** sum(spatio_temporal_scaling)
                                          if spatial_compression_ratio is None else spatial_compression_ratio)
        self.temporal_compression_ratio = (patch_size_t * 2 ** sum(spatio_temporal_scaling)
                                           if temporal_compression_ratio is None else temporal_compression_ratio)

    def encode(self, x, causal=None):
        h = self.encoder(x, causal=causal)  # _encode: no slicing, no framewise encoding, no tiling
        # DiagonalGaussianDistribution(h).mode(): the mean (logvar, std and var are made and unused)
        mean, logvar = torch.chunk(h, 2, dim=1)
        return mean

    def decode(self, z, temb=None, causal=None):
        return self.decoder(z, temb, causal=causal)  # _decode: no slicing, no framewise decoding, no tiling

    def forward(self, sample, temb=None, sample_posterior=False, encoder_causal=None, decoder_causal=None):
        x = sample
        z = self.encode(x, causal=encoder_causal)
        return self.decode(z, temb, causal=decoder_causal)


if __name__ == "__main__":
    capture_once(
        "ltx2_vae", AutoencoderKLLTX2Video, lambda g: {"video": torch.randn((1, 3, 9, 64, 64), generator=g)},
        sys.argv[1],
        dict(library_source="replica of huggingface/diffusers autoencoder_kl_ltx2.py (torch 1.13)",
             note="AutoencoderKLLTX2Video, the released LTX-2.0 layout at 1/32 width: a 4x4 spatial patchify, "
                  "causal (encoder, zero spatial padding) and non-causal (decoder, reflect spatial padding) convs "
                  "whose time padding repeats the edge frames, weightless per-channel RMSNorms, spatial / temporal "
                  "/ spatiotemporal space-to-depth downsamplers with group-averaged shortcuts, the posterior's mode "
                  "(conv_out's last channel repeated), residual depth-to-space upsamplers with the first frame "
                  "cut, the unpatchify"))
