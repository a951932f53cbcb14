"""EasyAnimate's VAE (AutoencoderKLMagvit) whole, reimplemented for torch 1.13 (no diffusers here), captured small in
f32 on CPU as one forward (encode, the posterior's mode, decode) run the way diffusers runs it by default: the clip's
first frame alone, then frame chunks of num_sample_frames_batch_size (4) through the encoder; the latent's first frame
alone, then chunks of num_latent_frames_batch_size (1) through the decoder; every causal convolution (and every
temporal upsampler) keeping its state on the module between those calls (prev_features), cleared after the encode
and after the decode. No tiling, no slicing, no framewise flags (all off by default).

Follows huggingface/diffusers src/diffusers/models/autoencoders/autoencoder_kl_magvit.py at
8dc31e8e3c173bfd399217fde461a32f8d440b86 line for line:
- EasyAnimateCausalConv3d (an nn.Conv3d with padding (0, h_pad, w_pad)): with no prev_features, the input is padded
  in time by replicating its first frame temporal_padding = k_t - 1 = 2 times in front (F.pad mode "replicate"), the
  padded input's last 2 frames are kept (clone) as prev_features; with prev_features, they are concatenated in front
  of the input (for a time-stride-2 conv only the last k_t - 2 = 1 of them) and the new last 2 frames kept; then the
  conv runs window by window: Conv3d.forward on frames [i, i + 3) for i = 0, t_stride, ... while i + 3 <= frames,
  the per-window outputs concatenated in time.
- EasyAnimateResidualBlock3D (spatial_group_norm: GroupNorm per frame, [B, C, T, H, W] permuted to [B, T, C, H, W],
  flattened to [B*T, C, H, W], unflattened and permuted back; SiLU; causal conv1; the same for norm2; dropout; conv2;
  (x + shortcut) / output_scale_factor, the shortcut a 1x1x1 nn.Conv3d where the width changes, else nn.Identity).
- EasyAnimateDownsampler3D (zero pad (0, 1, 0, 1) right and bottom, then a causal conv with padding 0 and stride
  (1, 2, 2) or (2, 2, 2)), EasyAnimateUpsampler3D (nearest x(1, 2, 2), a causal conv; temporal_upsample: the first
  call keeps its output as prev_features and returns it as is, every later call nearest x(2, 1, 1) in time, since
  spatial_group_norm picks "nearest" over "trilinear"), EasyAnimateDownBlock3D ("SpatialDownBlock3D" /
  "SpatialTemporalDownBlock3D"), EasyAnimateUpBlock3d ("SpatialUpBlock3D" / "SpatialTemporalUpBlock3D"; its upsampler
  built on the loop's last in_channels, i.e. out_channels), EasyAnimateMidBlock3d (residual blocks only; no attention
  in this VAE), EasyAnimateEncoder, EasyAnimateDecoder (num_layers layers_per_block + 1; the mid block is not handed
  spatial_group_norm, its default True), AutoencoderKLMagvit (_encode, encode, _decode, decode, forward with
  sample_posterior False; quant_conv / post_quant_conv plain 1x1x1 nn.Conv3d; _clear_conv_cache over the causal
  convs and the upsamplers). DiagonalGaussianDistribution(h).mode() is vae.py's: the first half of the channels
  (torch.chunk(h, 2, dim=1)[0]). get_activation("silu") is nn.SiLU. The same module tree, parameter names and shapes,
  call boundaries and arithmetic; the replicate pad of a bf16 tensor on the CPU is made in f32 and cast back (torch
  1.13 has no bf16 CPU kernel for it; the same values).

Tiny config: the released layout (block_out_channels (128, 256, 512, 512), down types (Spatial, SpatialTemporal x3),
up types (Spatial, SpatialTemporal x3), layers_per_block 2, latent_channels 16, norm_num_groups 32,
spatial_group_norm True: 8x spatial, 4x temporal) divided by 32 in width: block_out_channels (4, 8, 16, 16),
latent_channels 4, norm_num_groups 2 (released 32 groups of 4 to 16 channels; here groups of 2 to 8); all four levels
and layers_per_block 2 kept (encoder levels 2 residual blocks, mid blocks 2, decoder levels 3). A [1, 3, 9, 16, 16]
clip: encoder calls on frames [0:1] (replicate-padded start), [1:5], [5:9] (cached): 1 + 1 + 1 latent frames, the
temporal downsamplers' stride-2 windows over 1 cached + 4 (then 1 + 2) frames; moments [1, 8, 3, 2, 2]; the decoder
on each latent frame alone: 1 frame (temporal upsamplers' first call, no time doubling), then 4 and 4 (two doublings
each): [1, 3, 9, 16, 16] (8.3 MB in f32).

usage: /usr/bin/python3 bench/unseen/replicas/easyanimate_vae.py OUTDIR
REPLICA_DTYPE=bf16 [REPLICA_DEVICE=cuda] as run.py's replicas: the bf16 run, beside the f32 one.
"""
import math
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

from run import capture_once


def _pad_replicate(x, pad):
    """F.pad(x, pad, mode="replicate"), as upstream; torch 1.13's CPU replicate pad has no bf16 kernel: padding copies
    values, so padding in f32 and casting back gives the same tensor."""
    if x.dtype == torch.bfloat16 and x.device.type == "cpu":
        return F.pad(x.float(), pad=pad, mode="replicate").to(x.dtype)
    return F.pad(x, pad=pad, mode="replicate")


class EasyAnimateCausalConv3d(nn.Conv3d):
    def __init__(self, in_channels, out_channels, kernel_size=3, stride=1, padding=1, dilation=1, groups=1, bias=True,
                 padding_mode="zeros"):
        kernel_size = kernel_size if isinstance(kernel_size, tuple) else (kernel_size,) * 3
        assert len(kernel_size) == 3
        stride = stride if isinstance(stride, tuple) else (stride,) * 3
        assert len(stride) == 3
        dilation = dilation if isinstance(dilation, tuple) else (dilation,) * 3
        assert len(dilation) == 3

        t_ks, h_ks, w_ks = kernel_size
        self.t_stride, h_stride, w_stride = stride
        t_dilation, h_dilation, w_dilation = dilation

        t_pad = (t_ks - 1) * t_dilation
        if padding is None:
            h_pad = math.ceil(((h_ks - 1) * h_dilation + (1 - h_stride)) / 2)
            w_pad = math.ceil(((w_ks - 1) * w_dilation + (1 - w_stride)) / 2)
        elif isinstance(padding, int):
            h_pad = w_pad = padding
        else:
            assert NotImplementedError

        self.temporal_padding = t_pad
        self.temporal_padding_origin = math.ceil(((t_ks - 1) * w_dilation + (1 - w_stride)) / 2)

        self.prev_features = None

        super().__init__(in_channels=in_channels, out_channels=out_channels, kernel_size=kernel_size, stride=stride,
                         dilation=dilation, padding=(0, h_pad, w_pad), groups=groups, bias=bias,
                         padding_mode=padding_mode)

    def _clear_conv_cache(self):
        del self.prev_features
        self.prev_features = None

    def forward(self, hidden_states):
        dtype = hidden_states.dtype
        if self.prev_features is None:
            hidden_states = _pad_replicate(hidden_states, (0, 0, 0, 0, self.temporal_padding, 0))
            hidden_states = hidden_states.to(dtype=dtype)

            self._clear_conv_cache()
            self.prev_features = hidden_states[:, :, -self.temporal_padding:].clone()

            num_frames = hidden_states.size(2)
            outputs = []
            i = 0
            while i + self.temporal_padding + 1 <= num_frames:
                out = super().forward(hidden_states[:, :, i: i + self.temporal_padding + 1])
                i += self.t_stride
                outputs.append(out)
            return torch.concat(outputs, 2)
        else:
            if self.t_stride == 2:
                hidden_states = torch.concat(
                    [self.prev_features[:, :, -(self.temporal_padding - 1):], hidden_states], dim=2)
            else:
                hidden_states = torch.concat([self.prev_features, hidden_states], dim=2)
            hidden_states = hidden_states.to(dtype=dtype)

            self._clear_conv_cache()
            self.prev_features = hidden_states[:, :, -self.temporal_padding:].clone()

            num_frames = hidden_states.size(2)
            outputs = []
            i = 0
            while i + self.temporal_padding + 1 <= num_frames:
                out = super().forward(hidden_states[:, :, i: i + self.temporal_padding + 1])
                i += self.t_stride
                outputs.append(out)
            return torch.concat(outputs, 2)


class EasyAnimateResidualBlock3D(nn.Module):
    def __init__(self, in_channels, out_channels, non_linearity="silu", norm_num_groups=32, norm_eps=1e-6,
                 spatial_group_norm=True, dropout=0.0, output_scale_factor=1.0):
        super().__init__()
        self.output_scale_factor = output_scale_factor
        self.norm1 = nn.GroupNorm(num_groups=norm_num_groups, num_channels=in_channels, eps=norm_eps, affine=True)
        self.nonlinearity = nn.SiLU()  # get_activation(non_linearity)
        self.conv1 = EasyAnimateCausalConv3d(in_channels, out_channels, kernel_size=3)
        self.norm2 = nn.GroupNorm(num_groups=norm_num_groups, num_channels=out_channels, eps=norm_eps, affine=True)
        self.dropout = nn.Dropout(dropout)
        self.conv2 = EasyAnimateCausalConv3d(out_channels, out_channels, kernel_size=3)
        if in_channels != out_channels:
            self.shortcut = nn.Conv3d(in_channels, out_channels, kernel_size=1)
        else:
            self.shortcut = nn.Identity()
        self.spatial_group_norm = spatial_group_norm

    def forward(self, hidden_states):
        shortcut = self.shortcut(hidden_states)

        if self.spatial_group_norm:
            batch_size = hidden_states.size(0)
            hidden_states = hidden_states.permute(0, 2, 1, 3, 4).flatten(0, 1)  # [B, C, T, H, W] -> [B * T, C, H, W]
            hidden_states = self.norm1(hidden_states)
            hidden_states = hidden_states.unflatten(0, (batch_size, -1)).permute(0, 2, 1, 3, 4)
        else:
            hidden_states = self.norm1(hidden_states)

        hidden_states = self.nonlinearity(hidden_states)
        hidden_states = self.conv1(hidden_states)

        if self.spatial_group_norm:
            batch_size = hidden_states.size(0)
            hidden_states = hidden_states.permute(0, 2, 1, 3, 4).flatten(0, 1)
            hidden_states = self.norm2(hidden_states)
            hidden_states = hidden_states.unflatten(0, (batch_size, -1)).permute(0, 2, 1, 3, 4)
        else:
            hidden_states = self.norm2(hidden_states)

        hidden_states = self.nonlinearity(hidden_states)
        hidden_states = self.dropout(hidden_states)
        hidden_states = self.conv2(hidden_states)

        return (hidden_states + shortcut) / self.output_scale_factor


class EasyAnimateDownsampler3D(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size=3, stride=(2, 2, 2)):
        super().__init__()
        self.conv = EasyAnimateCausalConv3d(in_channels=in_channels, out_channels=out_channels,
                                            kernel_size=kernel_size, stride=stride, padding=0)

    def forward(self, hidden_states):
        hidden_states = F.pad(hidden_states, (0, 1, 0, 1))
        hidden_states = self.conv(hidden_states)
        return hidden_states


class EasyAnimateUpsampler3D(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size=3, temporal_upsample=False, spatial_group_norm=True):
        super().__init__()
        out_channels = out_channels or in_channels
        self.temporal_upsample = temporal_upsample
        self.spatial_group_norm = spatial_group_norm
        self.conv = EasyAnimateCausalConv3d(in_channels=in_channels, out_channels=out_channels,
                                            kernel_size=kernel_size)
        self.prev_features = None

    def _clear_conv_cache(self):
        del self.prev_features
        self.prev_features = None

    def forward(self, hidden_states):
        hidden_states = F.interpolate(hidden_states, scale_factor=(1, 2, 2), mode="nearest")
        hidden_states = self.conv(hidden_states)

        if self.temporal_upsample:
            if self.prev_features is None:
                self.prev_features = hidden_states
            else:
                hidden_states = F.interpolate(hidden_states, scale_factor=(2, 1, 1),
                                              mode="trilinear" if not self.spatial_group_norm else "nearest")
        return hidden_states


class EasyAnimateDownBlock3D(nn.Module):
    def __init__(self, in_channels, out_channels, num_layers=1, act_fn="silu", norm_num_groups=32, norm_eps=1e-6,
                 spatial_group_norm=True, dropout=0.0, output_scale_factor=1.0, add_downsample=True,
                 add_temporal_downsample=True):
        super().__init__()
        self.convs = nn.ModuleList([])
        for i in range(num_layers):
            in_channels = in_channels if i == 0 else out_channels
            self.convs.append(EasyAnimateResidualBlock3D(
                in_channels=in_channels, out_channels=out_channels, non_linearity=act_fn,
                norm_num_groups=norm_num_groups, norm_eps=norm_eps, spatial_group_norm=spatial_group_norm,
                dropout=dropout, output_scale_factor=output_scale_factor))

        if add_downsample and add_temporal_downsample:
            self.downsampler = EasyAnimateDownsampler3D(out_channels, out_channels, kernel_size=3, stride=(2, 2, 2))
            self.spatial_downsample_factor = 2
            self.temporal_downsample_factor = 2
        elif add_downsample and not add_temporal_downsample:
            self.downsampler = EasyAnimateDownsampler3D(out_channels, out_channels, kernel_size=3, stride=(1, 2, 2))
            self.spatial_downsample_factor = 2
            self.temporal_downsample_factor = 1
        else:
            self.downsampler = None
            self.spatial_downsample_factor = 1
            self.temporal_downsample_factor = 1

    def forward(self, hidden_states):
        for conv in self.convs:
            hidden_states = conv(hidden_states)
        if self.downsampler is not None:
            hidden_states = self.downsampler(hidden_states)
        return hidden_states


class EasyAnimateUpBlock3d(nn.Module):
    def __init__(self, in_channels, out_channels, num_layers=1, act_fn="silu", norm_num_groups=32, norm_eps=1e-6,
                 spatial_group_norm=False, dropout=0.0, output_scale_factor=1.0, add_upsample=True,
                 add_temporal_upsample=True):
        super().__init__()
        self.convs = nn.ModuleList([])
        for i in range(num_layers):
            in_channels = in_channels if i == 0 else out_channels
            self.convs.append(EasyAnimateResidualBlock3D(
                in_channels=in_channels, out_channels=out_channels, non_linearity=act_fn,
                norm_num_groups=norm_num_groups, norm_eps=norm_eps, spatial_group_norm=spatial_group_norm,
                dropout=dropout, output_scale_factor=output_scale_factor))

        if add_upsample:
            self.upsampler = EasyAnimateUpsampler3D(in_channels, in_channels, temporal_upsample=add_temporal_upsample,
                                                    spatial_group_norm=spatial_group_norm)
        else:
            self.upsampler = None

    def forward(self, hidden_states):
        for conv in self.convs:
            hidden_states = conv(hidden_states)
        if self.upsampler is not None:
            hidden_states = self.upsampler(hidden_states)
        return hidden_states


class EasyAnimateMidBlock3d(nn.Module):
    def __init__(self, in_channels, num_layers=1, act_fn="silu", norm_num_groups=32, norm_eps=1e-6,
                 spatial_group_norm=True, dropout=0.0, output_scale_factor=1.0):
        super().__init__()
        norm_num_groups = norm_num_groups if norm_num_groups is not None else min(in_channels // 4, 32)
        self.convs = nn.ModuleList([EasyAnimateResidualBlock3D(
            in_channels=in_channels, out_channels=in_channels, non_linearity=act_fn, norm_num_groups=norm_num_groups,
            norm_eps=norm_eps, spatial_group_norm=spatial_group_norm, dropout=dropout,
            output_scale_factor=output_scale_factor)])
        for _ in range(num_layers - 1):
            self.convs.append(EasyAnimateResidualBlock3D(
                in_channels=in_channels, out_channels=in_channels, non_linearity=act_fn,
                norm_num_groups=norm_num_groups, norm_eps=norm_eps, spatial_group_norm=spatial_group_norm,
                dropout=dropout, output_scale_factor=output_scale_factor))

    def forward(self, hidden_states):
        hidden_states = self.convs[0](hidden_states)
        for resnet in self.convs[1:]:
            hidden_states = resnet(hidden_states)
        return hidden_states


class EasyAnimateEncoder(nn.Module):
    def __init__(self, in_channels=3, out_channels=8,
                 down_block_types=("SpatialDownBlock3D", "SpatialTemporalDownBlock3D", "SpatialTemporalDownBlock3D",
                                   "SpatialTemporalDownBlock3D"),
                 block_out_channels=(128, 256, 512, 512), layers_per_block=2, norm_num_groups=32, act_fn="silu",
                 double_z=True, spatial_group_norm=False):
        super().__init__()
        self.conv_in = EasyAnimateCausalConv3d(in_channels, block_out_channels[0], kernel_size=3)

        self.down_blocks = nn.ModuleList([])
        output_channels = block_out_channels[0]
        for i, down_block_type in enumerate(down_block_types):
            input_channels = output_channels
            output_channels = block_out_channels[i]
            is_final_block = i == len(block_out_channels) - 1
            if down_block_type == "SpatialDownBlock3D":
                down_block = EasyAnimateDownBlock3D(
                    in_channels=input_channels, out_channels=output_channels, num_layers=layers_per_block,
                    act_fn=act_fn, norm_num_groups=norm_num_groups, norm_eps=1e-6,
                    spatial_group_norm=spatial_group_norm, add_downsample=not is_final_block,
                    add_temporal_downsample=False)
            elif down_block_type == "SpatialTemporalDownBlock3D":
                down_block = EasyAnimateDownBlock3D(
                    in_channels=input_channels, out_channels=output_channels, num_layers=layers_per_block,
                    act_fn=act_fn, norm_num_groups=norm_num_groups, norm_eps=1e-6,
                    spatial_group_norm=spatial_group_norm, add_downsample=not is_final_block,
                    add_temporal_downsample=True)
            else:
                raise ValueError(f"Unknown up block type: {down_block_type}")
            self.down_blocks.append(down_block)

        self.mid_block = EasyAnimateMidBlock3d(
            in_channels=block_out_channels[-1], num_layers=layers_per_block, act_fn=act_fn,
            spatial_group_norm=spatial_group_norm, norm_num_groups=norm_num_groups, norm_eps=1e-6, dropout=0,
            output_scale_factor=1)

        self.spatial_group_norm = spatial_group_norm
        self.conv_norm_out = nn.GroupNorm(num_channels=block_out_channels[-1], num_groups=norm_num_groups, eps=1e-6)
        self.conv_act = nn.SiLU()  # get_activation(act_fn)

        conv_out_channels = 2 * out_channels if double_z else out_channels
        self.conv_out = EasyAnimateCausalConv3d(block_out_channels[-1], conv_out_channels, kernel_size=3)

        self.gradient_checkpointing = False

    def forward(self, hidden_states):
        hidden_states = self.conv_in(hidden_states)

        for down_block in self.down_blocks:
            hidden_states = down_block(hidden_states)

        hidden_states = self.mid_block(hidden_states)

        if self.spatial_group_norm:
            batch_size = hidden_states.size(0)
            hidden_states = hidden_states.permute(0, 2, 1, 3, 4).flatten(0, 1)
            hidden_states = self.conv_norm_out(hidden_states)
            hidden_states = hidden_states.unflatten(0, (batch_size, -1)).permute(0, 2, 1, 3, 4)
        else:
            hidden_states = self.conv_norm_out(hidden_states)

        hidden_states = self.conv_act(hidden_states)
        hidden_states = self.conv_out(hidden_states)
        return hidden_states


class EasyAnimateDecoder(nn.Module):
    def __init__(self, in_channels=8, out_channels=3,
                 up_block_types=("SpatialUpBlock3D", "SpatialTemporalUpBlock3D", "SpatialTemporalUpBlock3D",
                                 "SpatialTemporalUpBlock3D"),
                 block_out_channels=(128, 256, 512, 512), layers_per_block=2, norm_num_groups=32, act_fn="silu",
                 spatial_group_norm=False):
        super().__init__()
        self.conv_in = EasyAnimateCausalConv3d(in_channels, block_out_channels[-1], kernel_size=3)

        self.mid_block = EasyAnimateMidBlock3d(
            in_channels=block_out_channels[-1], num_layers=layers_per_block, act_fn=act_fn,
            norm_num_groups=norm_num_groups, norm_eps=1e-6, dropout=0, output_scale_factor=1)

        self.up_blocks = nn.ModuleList([])
        reversed_block_out_channels = list(reversed(block_out_channels))
        output_channels = reversed_block_out_channels[0]
        for i, up_block_type in enumerate(up_block_types):
            input_channels = output_channels
            output_channels = reversed_block_out_channels[i]
            is_final_block = i == len(block_out_channels) - 1
            if up_block_type == "SpatialUpBlock3D":
                up_block = EasyAnimateUpBlock3d(
                    in_channels=input_channels, out_channels=output_channels, num_layers=layers_per_block + 1,
                    act_fn=act_fn, norm_num_groups=norm_num_groups, norm_eps=1e-6,
                    spatial_group_norm=spatial_group_norm, add_upsample=not is_final_block,
                    add_temporal_upsample=False)
            elif up_block_type == "SpatialTemporalUpBlock3D":
                up_block = EasyAnimateUpBlock3d(
                    in_channels=input_channels, out_channels=output_channels, num_layers=layers_per_block + 1,
                    act_fn=act_fn, norm_num_groups=norm_num_groups, norm_eps=1e-6,
                    spatial_group_norm=spatial_group_norm, add_upsample=not is_final_block,
                    add_temporal_upsample=True)
            else:
                raise ValueError(f"Unknown up block type: {up_block_type}")
            self.up_blocks.append(up_block)

        self.spatial_group_norm = spatial_group_norm
        self.conv_norm_out = nn.GroupNorm(num_channels=block_out_channels[0], num_groups=norm_num_groups, eps=1e-6)
        self.conv_act = nn.SiLU()  # get_activation(act_fn)
        self.conv_out = EasyAnimateCausalConv3d(block_out_channels[0], out_channels, kernel_size=3)

        self.gradient_checkpointing = False

    def forward(self, hidden_states):
        hidden_states = self.conv_in(hidden_states)
        hidden_states = self.mid_block(hidden_states)

        for up_block in self.up_blocks:
            hidden_states = up_block(hidden_states)

        if self.spatial_group_norm:
            batch_size = hidden_states.size(0)
            hidden_states = hidden_states.permute(0, 2, 1, 3, 4).flatten(0, 1)
            hidden_states = self.conv_norm_out(hidden_states)
            hidden_states = hidden_states.unflatten(0, (batch_size, -1)).permute(0, 2, 1, 3, 4)
        else:
            hidden_states = self.conv_norm_out(hidden_states)

        hidden_states = self.conv_act(hidden_states)
        hidden_states = self.conv_out(hidden_states)
        return hidden_states


class AutoencoderKLMagvit(nn.Module):
    def __init__(self, in_channels=3, latent_channels=4, out_channels=3, block_out_channels=(4, 8, 16, 16),
                 down_block_types=("SpatialDownBlock3D", "SpatialTemporalDownBlock3D", "SpatialTemporalDownBlock3D",
                                   "SpatialTemporalDownBlock3D"),
                 up_block_types=("SpatialUpBlock3D", "SpatialTemporalUpBlock3D", "SpatialTemporalUpBlock3D",
                                 "SpatialTemporalUpBlock3D"),
                 layers_per_block=2, act_fn="silu", norm_num_groups=2, scaling_factor=0.7125,
                 spatial_group_norm=True):
        super().__init__()
        self.encoder = EasyAnimateEncoder(
            in_channels=in_channels, out_channels=latent_channels, down_block_types=down_block_types,
            block_out_channels=block_out_channels, layers_per_block=layers_per_block,
            norm_num_groups=norm_num_groups, act_fn=act_fn, double_z=True, spatial_group_norm=spatial_group_norm)
        self.decoder = EasyAnimateDecoder(
            in_channels=latent_channels, out_channels=out_channels, up_block_types=up_block_types,
            block_out_channels=block_out_channels, layers_per_block=layers_per_block,
            norm_num_groups=norm_num_groups, act_fn=act_fn, spatial_group_norm=spatial_group_norm)
        self.quant_conv = nn.Conv3d(2 * latent_channels, 2 * latent_channels, kernel_size=1)
        self.post_quant_conv = nn.Conv3d(latent_channels, latent_channels, kernel_size=1)

        self.spatial_compression_ratio = 2 ** (len(block_out_channels) - 1)
        self.temporal_compression_ratio = 2 ** (len(block_out_channels) - 2)
        self.use_slicing = False
        self.use_tiling = False
        self.use_framewise_encoding = False
        self.use_framewise_decoding = False
        self.num_sample_frames_batch_size = 4
        self.num_latent_frames_batch_size = 1
        self.tile_sample_min_height = 512
        self.tile_sample_min_width = 512

    def _clear_conv_cache(self):
        for name, module in self.named_modules():
            if isinstance(module, EasyAnimateCausalConv3d):
                module._clear_conv_cache()
            if isinstance(module, EasyAnimateUpsampler3D):
                module._clear_conv_cache()

    def _encode(self, x):
        # use_tiling off: no tiled_encode
        first_frames = self.encoder(x[:, :, :1, :, :])
        h = [first_frames]
        for i in range(1, x.shape[2], self.num_sample_frames_batch_size):
            next_frames = self.encoder(x[:, :, i: i + self.num_sample_frames_batch_size, :, :])
            h.append(next_frames)
        h = torch.cat(h, dim=2)
        moments = self.quant_conv(h)

        self._clear_conv_cache()
        return moments

    def encode(self, x):
        return self._encode(x)  # use_slicing off; DiagonalGaussianDistribution(h) built by the caller

    def _decode(self, z):
        # use_tiling off: no tiled_decode
        z = self.post_quant_conv(z)
        first_frames = self.decoder(z[:, :, :1, :, :])
        dec = [first_frames]
        for i in range(1, z.shape[2], self.num_latent_frames_batch_size):
            next_frames = self.decoder(z[:, :, i: i + self.num_latent_frames_batch_size, :, :])
            dec.append(next_frames)
        dec = torch.cat(dec, dim=2)
        return dec

    def decode(self, z):
        decoded = self._decode(z)  # use_slicing off
        self._clear_conv_cache()
        return decoded

    def forward(self, sample):
        h = self.encode(sample)
        z, _ = torch.chunk(h, 2, dim=1)  # DiagonalGaussianDistribution(h).mode(): its mean
        return self.decode(z)


if __name__ == "__main__":
    capture_once(
        "easyanimate_vae", AutoencoderKLMagvit, lambda g: {"video": torch.randn((1, 3, 9, 16, 16), generator=g)},
        sys.argv[1],
        dict(library_source="replica of huggingface/diffusers autoencoder_kl_magvit.py (torch 1.13)",
             note="the EasyAnimate VAE (AutoencoderKLMagvit) run as _encode/_decode run it: the first frame alone, "
                  "then 4-frame (encoder) / 1-frame (decoder) chunks, each causal conv keeping its last 2 padded "
                  "frames on the module between calls (replicate-padded start), convolving window by window; "
                  "temporal upsamplers doubling time from their second call on"))
