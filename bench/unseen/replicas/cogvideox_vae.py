"""The CogVideoX VAE (AutoencoderKLCogVideoX) whole, reimplemented for torch 1.13 (no diffusers here), captured small
in f32 on CPU as one forward (encode, the posterior's mode, decode) run the way diffusers runs it: frame batch by frame
batch, each CogVideoXCausalConv3d handed the conv_cache it returned on the previous batch (the last kernel-1 frames of
its time-padded input), the caches travelling as nested dicts through every block's arguments and return values.

Follows huggingface/diffusers src/diffusers/models/autoencoders/autoencoder_kl_cogvideox.py (the conv_cache version:
CogVideoXSafeConv3d, CogVideoXCausalConv3d with pad_mode "constant" semantics: with no cache the first frame repeated
kernel-1 times in front, the returned cache a clone of the last kernel-1 frames of the padded input, then zero 2-D
padding; CogVideoXSpatialNorm3D with its odd-frame-count first/rest nearest interpolation of zq; CogVideoXResnetBlock3D
without temb; CogVideoXDownBlock3D, CogVideoXMidBlock3D, CogVideoXUpBlock3D, CogVideoXEncoder3D, CogVideoXDecoder3D)
with downsampling.py's CogVideoXDownsample3D (time: first frame kept, the rest avg_pool1d by 2 when the count is odd;
then zero pad (0, 1, 0, 1) and a stride-2 Conv2d per frame) and upsampling.py's CogVideoXUpsample3D (time: first frame
2-D nearest, the rest 3-D nearest x2 when the count is odd and > 1; then a Conv2d per frame). The model's _encode /
_decode are the released diffusers ones: num_batches = max(num_frames // frame_batch_size, 1), the remainder frames
(num_frames % frame_batch_size) joining the FIRST batch, conv_cache threaded from batch to batch, results joined in
time; quant_conv / post_quant_conv off (use_quant_conv / use_post_quant_conv False, the default); no tiling, no
slicing. The posterior's mode is DiagonalGaussianDistribution(h).mode(): the first half of the channels.

Tiny config: block_out_channels (4, 8), two CogVideoXDownBlock3D / CogVideoXUpBlock3D, latent_channels 4,
layers_per_block 1 (decoder up blocks 2 resnets), norm_num_groups 2, temporal_compression_ratio 2 (one temporal
down/upsample: down_blocks.0 and up_blocks.0 compress_time; one spatial 2x), frame batch sizes 4 sample / 2 latent
(upstream's 8 / 2 are the ratio-4 model's; scaled to ratio 2). A [1, 3, 9, 4, 8] clip: encoder batches of 5 (odd:
first-frame padding, odd downsample) and 4 frames (even, cached) -> 3 + 2 = 5 latent frames [1, 4, 5, 2, 4]; decoder
batches of 3 (odd upsample and spatial-norm interpolation) and 2 latent frames (cached) -> 5 + 4 = 9 output frames.

usage: /usr/bin/python3 bench/unseen/replicas/cogvideox_vae.py OUTDIR
REPLICA_DTYPE=bf16 [REPLICA_DEVICE=cuda] as run.py's replicas: the bf16 run, beside the f32 one.
"""
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from run import capture_once


class CogVideoXSafeConv3d(nn.Conv3d):
    """nn.Conv3d that, past 2 GiB of input, runs in time chunks overlapping by kernel-1 frames (never at this size)."""

    def forward(self, input):
        memory_count = (input.shape[0] * input.shape[1] * input.shape[2] * input.shape[3] * input.shape[4]) * 2 / 1024**3
        if memory_count > 2:
            kernel_size = self.kernel_size[0]
            part_num = int(memory_count / 2) + 1
            pieces = list(torch.chunk(input, part_num, dim=2))
            if kernel_size > 1:
                pieces = [pieces[0]] + [torch.cat((pieces[i - 1][:, :, -kernel_size + 1:], pieces[i]), dim=2)
                                        for i in range(1, len(pieces))]
            return torch.cat([super(CogVideoXSafeConv3d, self).forward(p) for p in pieces], dim=2)
        return super().forward(input)


class CogVideoXCausalConv3d(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride=1, dilation=1, pad_mode="constant"):
        super().__init__()
        if isinstance(kernel_size, int):
            kernel_size = (kernel_size,) * 3
        time_kernel_size, height_kernel_size, width_kernel_size = kernel_size
        time_pad = time_kernel_size - 1
        height_pad = (height_kernel_size - 1) // 2
        width_pad = (width_kernel_size - 1) // 2
        self.pad_mode = pad_mode
        self.height_pad, self.width_pad, self.time_pad = height_pad, width_pad, time_pad
        self.time_causal_padding = (width_pad, width_pad, height_pad, height_pad, time_pad, 0)
        self.temporal_dim = 2
        self.time_kernel_size = time_kernel_size
        stride = stride if isinstance(stride, tuple) else (stride, 1, 1)
        self.conv = CogVideoXSafeConv3d(in_channels=in_channels, out_channels=out_channels, kernel_size=kernel_size,
                                        stride=stride, dilation=(dilation, 1, 1))

    def fake_context_parallel_forward(self, inputs, conv_cache=None):
        if self.pad_mode == "replicate":
            if inputs.dtype == torch.bfloat16 and inputs.device.type == "cpu":  # torch 1.13's CPU replicate pad has
                # no bf16 kernel: padding copies values, so padding in f32 and casting back gives the same tensor
                return F.pad(inputs.float(), self.time_causal_padding, mode="replicate").to(inputs.dtype)
            return F.pad(inputs, self.time_causal_padding, mode="replicate")
        k = self.time_kernel_size
        if k > 1:
            front = [conv_cache] if conv_cache is not None else [inputs[:, :, :1]] * (k - 1)
            inputs = torch.cat(front + [inputs], dim=2)
        return inputs

    def forward(self, inputs, conv_cache=None):
        inputs = self.fake_context_parallel_forward(inputs, conv_cache)
        if self.pad_mode == "replicate":
            conv_cache = None
        else:
            conv_cache = inputs[:, :, -self.time_kernel_size + 1:].clone()
            inputs = F.pad(inputs, (self.width_pad, self.width_pad, self.height_pad, self.height_pad),
                           mode="constant", value=0)
        output = self.conv(inputs)
        return output, conv_cache


class CogVideoXSpatialNorm3D(nn.Module):
    def __init__(self, f_channels, zq_channels, groups=32):
        super().__init__()
        self.norm_layer = nn.GroupNorm(num_channels=f_channels, num_groups=groups, eps=1e-6, affine=True)
        self.conv_y = CogVideoXCausalConv3d(zq_channels, f_channels, kernel_size=1, stride=1)
        self.conv_b = CogVideoXCausalConv3d(zq_channels, f_channels, kernel_size=1, stride=1)

    def forward(self, f, zq, conv_cache=None):
        new_conv_cache = {}
        conv_cache = conv_cache or {}
        if f.shape[2] > 1 and f.shape[2] % 2 == 1:
            f_first, f_rest = f[:, :, :1], f[:, :, 1:]
            z_first, z_rest = zq[:, :, :1], zq[:, :, 1:]
            z_first = F.interpolate(z_first, size=f_first.shape[-3:])
            z_rest = F.interpolate(z_rest, size=f_rest.shape[-3:])
            zq = torch.cat([z_first, z_rest], dim=2)
        else:
            zq = F.interpolate(zq, size=f.shape[-3:])
        conv_y, new_conv_cache["conv_y"] = self.conv_y(zq, conv_cache=conv_cache.get("conv_y"))
        conv_b, new_conv_cache["conv_b"] = self.conv_b(zq, conv_cache=conv_cache.get("conv_b"))
        norm_f = self.norm_layer(f)
        return norm_f * conv_y + conv_b, new_conv_cache


class CogVideoXResnetBlock3D(nn.Module):
    def __init__(self, in_channels, out_channels=None, dropout=0.0, temb_channels=512, groups=32, eps=1e-6,
                 non_linearity="swish", conv_shortcut=False, spatial_norm_dim=None, pad_mode="first"):
        super().__init__()
        out_channels = out_channels or in_channels
        self.in_channels, self.out_channels = in_channels, out_channels
        self.nonlinearity = nn.SiLU()  # get_activation("swish" / "silu")
        self.use_conv_shortcut = conv_shortcut
        self.spatial_norm_dim = spatial_norm_dim
        if spatial_norm_dim is None:
            self.norm1 = nn.GroupNorm(num_channels=in_channels, num_groups=groups, eps=eps)
            self.norm2 = nn.GroupNorm(num_channels=out_channels, num_groups=groups, eps=eps)
        else:
            self.norm1 = CogVideoXSpatialNorm3D(f_channels=in_channels, zq_channels=spatial_norm_dim, groups=groups)
            self.norm2 = CogVideoXSpatialNorm3D(f_channels=out_channels, zq_channels=spatial_norm_dim, groups=groups)
        self.conv1 = CogVideoXCausalConv3d(in_channels, out_channels, kernel_size=3, pad_mode=pad_mode)
        if temb_channels > 0:
            self.temb_proj = nn.Linear(temb_channels, out_channels)
        self.dropout = nn.Dropout(dropout)
        self.conv2 = CogVideoXCausalConv3d(out_channels, out_channels, kernel_size=3, pad_mode=pad_mode)
        if in_channels != out_channels:
            if conv_shortcut:
                self.conv_shortcut = CogVideoXCausalConv3d(in_channels, out_channels, kernel_size=3, pad_mode=pad_mode)
            else:
                self.conv_shortcut = CogVideoXSafeConv3d(in_channels, out_channels, kernel_size=1, stride=1, padding=0)

    def forward(self, inputs, temb=None, zq=None, conv_cache=None):
        new_conv_cache = {}
        conv_cache = conv_cache or {}
        h = inputs
        if zq is not None:
            h, new_conv_cache["norm1"] = self.norm1(h, zq, conv_cache=conv_cache.get("norm1"))
        else:
            h = self.norm1(h)
        h = self.nonlinearity(h)
        h, new_conv_cache["conv1"] = self.conv1(h, conv_cache=conv_cache.get("conv1"))
        if temb is not None:
            h = h + self.temb_proj(self.nonlinearity(temb))[:, :, None, None, None]
        if zq is not None:
            h, new_conv_cache["norm2"] = self.norm2(h, zq, conv_cache=conv_cache.get("norm2"))
        else:
            h = self.norm2(h)
        h = self.nonlinearity(h)
        h = self.dropout(h)
        h, new_conv_cache["conv2"] = self.conv2(h, conv_cache=conv_cache.get("conv2"))
        if self.in_channels != self.out_channels:
            if self.use_conv_shortcut:
                inputs, new_conv_cache["conv_shortcut"] = self.conv_shortcut(
                    inputs, conv_cache=conv_cache.get("conv_shortcut"))
            else:
                inputs = self.conv_shortcut(inputs)
        return h + inputs, new_conv_cache


class CogVideoXDownsample3D(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size=3, stride=2, padding=0, compress_time=False):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size=kernel_size, stride=stride, padding=padding)
        self.compress_time = compress_time

    def forward(self, x):
        if self.compress_time:
            b, c, t, h, w = x.shape
            x = x.permute(0, 3, 4, 1, 2).reshape(b * h * w, c, t)  # frames last
            if x.shape[-1] % 2 == 1:
                x_first, x_rest = x[..., 0], x[..., 1:]
                if x_rest.shape[-1] > 0:
                    x_rest = F.avg_pool1d(x_rest, kernel_size=2, stride=2)
                x = torch.cat([x_first[..., None], x_rest], dim=-1)
                x = x.reshape(b, h, w, c, x.shape[-1]).permute(0, 3, 4, 1, 2)
            else:
                x = F.avg_pool1d(x, kernel_size=2, stride=2)
                x = x.reshape(b, h, w, c, x.shape[-1]).permute(0, 3, 4, 1, 2)
        x = F.pad(x, (0, 1, 0, 1), mode="constant", value=0)
        b, c, t, h, w = x.shape
        x = x.permute(0, 2, 1, 3, 4).reshape(b * t, c, h, w)
        x = self.conv(x)
        return x.reshape(b, t, x.shape[1], x.shape[2], x.shape[3]).permute(0, 2, 1, 3, 4)


class CogVideoXUpsample3D(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size=3, stride=1, padding=1, compress_time=False):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size=kernel_size, stride=stride, padding=padding)
        self.compress_time = compress_time

    def forward(self, inputs):
        if self.compress_time:
            if inputs.shape[2] > 1 and inputs.shape[2] % 2 == 1:
                x_first, x_rest = inputs[:, :, 0], inputs[:, :, 1:]
                x_first = F.interpolate(x_first, scale_factor=2.0)  # 2-D nearest: the first frame stays one frame
                x_rest = F.interpolate(x_rest, scale_factor=2.0)  # 3-D nearest: the rest doubled in time
                inputs = torch.cat([x_first[:, :, None, :, :], x_rest], dim=2)
            elif inputs.shape[2] > 1:
                inputs = F.interpolate(inputs, scale_factor=2.0)
            else:
                inputs = F.interpolate(inputs.squeeze(2), scale_factor=2.0)[:, :, None, :, :]
        else:
            b, c, t, h, w = inputs.shape
            inputs = inputs.permute(0, 2, 1, 3, 4).reshape(b * t, c, h, w)
            inputs = F.interpolate(inputs, scale_factor=2.0)
            inputs = inputs.reshape(b, t, c, *inputs.shape[2:]).permute(0, 2, 1, 3, 4)
        b, c, t, h, w = inputs.shape
        inputs = inputs.permute(0, 2, 1, 3, 4).reshape(b * t, c, h, w)
        inputs = self.conv(inputs)
        return inputs.reshape(b, t, *inputs.shape[1:]).permute(0, 2, 1, 3, 4)


def _run_resnets(resnets, hidden_states, temb, zq, conv_cache, new_conv_cache):
    for i, resnet in enumerate(resnets):
        key = f"resnet_{i}"
        hidden_states, new_conv_cache[key] = resnet(hidden_states, temb, zq, conv_cache=conv_cache.get(key))
    return hidden_states


class CogVideoXDownBlock3D(nn.Module):
    def __init__(self, in_channels, out_channels, temb_channels, dropout=0.0, num_layers=1, resnet_eps=1e-6,
                 resnet_act_fn="swish", resnet_groups=32, add_downsample=True, downsample_padding=0,
                 compress_time=False, pad_mode="first"):
        super().__init__()
        self.resnets = nn.ModuleList([
            CogVideoXResnetBlock3D(in_channels if i == 0 else out_channels, out_channels, dropout=dropout,
                                   temb_channels=temb_channels, groups=resnet_groups, eps=resnet_eps,
                                   non_linearity=resnet_act_fn, pad_mode=pad_mode)
            for i in range(num_layers)])
        self.downsamplers = None
        if add_downsample:
            self.downsamplers = nn.ModuleList([CogVideoXDownsample3D(out_channels, out_channels,
                                                                     padding=downsample_padding,
                                                                     compress_time=compress_time)])

    def forward(self, hidden_states, temb=None, zq=None, conv_cache=None):
        new_conv_cache = {}
        conv_cache = conv_cache or {}
        hidden_states = _run_resnets(self.resnets, hidden_states, temb, zq, conv_cache, new_conv_cache)
        if self.downsamplers is not None:
            for downsampler in self.downsamplers:
                hidden_states = downsampler(hidden_states)
        return hidden_states, new_conv_cache


class CogVideoXMidBlock3D(nn.Module):
    def __init__(self, in_channels, temb_channels, dropout=0.0, num_layers=1, resnet_eps=1e-6,
                 resnet_act_fn="swish", resnet_groups=32, spatial_norm_dim=None, pad_mode="first"):
        super().__init__()
        self.resnets = nn.ModuleList([
            CogVideoXResnetBlock3D(in_channels, in_channels, dropout=dropout, temb_channels=temb_channels,
                                   groups=resnet_groups, eps=resnet_eps, spatial_norm_dim=spatial_norm_dim,
                                   non_linearity=resnet_act_fn, pad_mode=pad_mode)
            for _ in range(num_layers)])

    def forward(self, hidden_states, temb=None, zq=None, conv_cache=None):
        new_conv_cache = {}
        conv_cache = conv_cache or {}
        hidden_states = _run_resnets(self.resnets, hidden_states, temb, zq, conv_cache, new_conv_cache)
        return hidden_states, new_conv_cache


class CogVideoXUpBlock3D(nn.Module):
    def __init__(self, in_channels, out_channels, temb_channels, dropout=0.0, num_layers=1, resnet_eps=1e-6,
                 resnet_act_fn="swish", resnet_groups=32, spatial_norm_dim=16, add_upsample=True,
                 upsample_padding=1, compress_time=False, pad_mode="first"):
        super().__init__()
        self.resnets = nn.ModuleList([
            CogVideoXResnetBlock3D(in_channels if i == 0 else out_channels, out_channels, dropout=dropout,
                                   temb_channels=temb_channels, groups=resnet_groups, eps=resnet_eps,
                                   non_linearity=resnet_act_fn, spatial_norm_dim=spatial_norm_dim,
                                   pad_mode=pad_mode)
            for i in range(num_layers)])
        self.upsamplers = None
        if add_upsample:
            self.upsamplers = nn.ModuleList([CogVideoXUpsample3D(out_channels, out_channels,
                                                                 padding=upsample_padding,
                                                                 compress_time=compress_time)])

    def forward(self, hidden_states, temb=None, zq=None, conv_cache=None):
        new_conv_cache = {}
        conv_cache = conv_cache or {}
        hidden_states = _run_resnets(self.resnets, hidden_states, temb, zq, conv_cache, new_conv_cache)
        if self.upsamplers is not None:
            for upsampler in self.upsamplers:
                hidden_states = upsampler(hidden_states)
        return hidden_states, new_conv_cache


class CogVideoXEncoder3D(nn.Module):
    def __init__(self, in_channels=3, out_channels=16, down_block_types=("CogVideoXDownBlock3D",) * 4,
                 block_out_channels=(128, 256, 256, 512), layers_per_block=3, act_fn="silu", norm_eps=1e-6,
                 norm_num_groups=32, dropout=0.0, pad_mode="first", temporal_compression_ratio=4):
        super().__init__()
        temporal_compress_level = int(np.log2(temporal_compression_ratio))
        self.conv_in = CogVideoXCausalConv3d(in_channels, block_out_channels[0], kernel_size=3, pad_mode=pad_mode)
        self.down_blocks = nn.ModuleList([])
        output_channel = block_out_channels[0]
        for i, down_block_type in enumerate(down_block_types):
            assert down_block_type == "CogVideoXDownBlock3D"
            input_channel, output_channel = output_channel, block_out_channels[i]
            self.down_blocks.append(CogVideoXDownBlock3D(
                in_channels=input_channel, out_channels=output_channel, temb_channels=0, dropout=dropout,
                num_layers=layers_per_block, resnet_eps=norm_eps, resnet_act_fn=act_fn,
                resnet_groups=norm_num_groups, add_downsample=i != len(block_out_channels) - 1,
                compress_time=i < temporal_compress_level))
        self.mid_block = CogVideoXMidBlock3D(in_channels=block_out_channels[-1], temb_channels=0, dropout=dropout,
                                             num_layers=2, resnet_eps=norm_eps, resnet_act_fn=act_fn,
                                             resnet_groups=norm_num_groups, pad_mode=pad_mode)
        self.norm_out = nn.GroupNorm(norm_num_groups, block_out_channels[-1], eps=1e-6)
        self.conv_act = nn.SiLU()
        self.conv_out = CogVideoXCausalConv3d(block_out_channels[-1], 2 * out_channels, kernel_size=3,
                                              pad_mode=pad_mode)

    def forward(self, sample, temb=None, conv_cache=None):
        new_conv_cache = {}
        conv_cache = conv_cache or {}
        hidden_states, new_conv_cache["conv_in"] = self.conv_in(sample, conv_cache=conv_cache.get("conv_in"))
        for i, down_block in enumerate(self.down_blocks):
            key = f"down_block_{i}"
            hidden_states, new_conv_cache[key] = down_block(hidden_states, temb, None, conv_cache=conv_cache.get(key))
        hidden_states, new_conv_cache["mid_block"] = self.mid_block(hidden_states, temb, None,
                                                                    conv_cache=conv_cache.get("mid_block"))
        hidden_states = self.conv_act(self.norm_out(hidden_states))
        hidden_states, new_conv_cache["conv_out"] = self.conv_out(hidden_states, conv_cache=conv_cache.get("conv_out"))
        return hidden_states, new_conv_cache


class CogVideoXDecoder3D(nn.Module):
    def __init__(self, in_channels=16, out_channels=3, up_block_types=("CogVideoXUpBlock3D",) * 4,
                 block_out_channels=(128, 256, 256, 512), layers_per_block=3, act_fn="silu", norm_eps=1e-6,
                 norm_num_groups=32, dropout=0.0, pad_mode="first", temporal_compression_ratio=4):
        super().__init__()
        reversed_block_out_channels = list(reversed(block_out_channels))
        self.conv_in = CogVideoXCausalConv3d(in_channels, reversed_block_out_channels[0], kernel_size=3,
                                             pad_mode=pad_mode)
        self.mid_block = CogVideoXMidBlock3D(in_channels=reversed_block_out_channels[0], temb_channels=0,
                                             num_layers=2, resnet_eps=norm_eps, resnet_act_fn=act_fn,
                                             resnet_groups=norm_num_groups, spatial_norm_dim=in_channels,
                                             pad_mode=pad_mode)
        self.up_blocks = nn.ModuleList([])
        output_channel = reversed_block_out_channels[0]
        temporal_compress_level = int(np.log2(temporal_compression_ratio))
        for i, up_block_type in enumerate(up_block_types):
            assert up_block_type == "CogVideoXUpBlock3D"
            prev_output_channel, output_channel = output_channel, reversed_block_out_channels[i]
            self.up_blocks.append(CogVideoXUpBlock3D(
                in_channels=prev_output_channel, out_channels=output_channel, temb_channels=0, dropout=dropout,
                num_layers=layers_per_block + 1, resnet_eps=norm_eps, resnet_act_fn=act_fn,
                resnet_groups=norm_num_groups, spatial_norm_dim=in_channels,
                add_upsample=i != len(block_out_channels) - 1, compress_time=i < temporal_compress_level,
                pad_mode=pad_mode))
        self.norm_out = CogVideoXSpatialNorm3D(reversed_block_out_channels[-1], in_channels, groups=norm_num_groups)
        self.conv_act = nn.SiLU()
        self.conv_out = CogVideoXCausalConv3d(reversed_block_out_channels[-1], out_channels, kernel_size=3,
                                              pad_mode=pad_mode)

    def forward(self, sample, temb=None, conv_cache=None):
        new_conv_cache = {}
        conv_cache = conv_cache or {}
        hidden_states, new_conv_cache["conv_in"] = self.conv_in(sample, conv_cache=conv_cache.get("conv_in"))
        hidden_states, new_conv_cache["mid_block"] = self.mid_block(hidden_states, temb, sample,
                                                                    conv_cache=conv_cache.get("mid_block"))
        for i, up_block in enumerate(self.up_blocks):
            key = f"up_block_{i}"
            hidden_states, new_conv_cache[key] = up_block(hidden_states, temb, sample, conv_cache=conv_cache.get(key))
        hidden_states, new_conv_cache["norm_out"] = self.norm_out(hidden_states, sample,
                                                                  conv_cache=conv_cache.get("norm_out"))
        hidden_states = self.conv_act(hidden_states)
        hidden_states, new_conv_cache["conv_out"] = self.conv_out(hidden_states, conv_cache=conv_cache.get("conv_out"))
        return hidden_states, new_conv_cache


class AutoencoderKLCogVideoX(nn.Module):
    def __init__(self, in_channels=3, out_channels=3, down_block_types=("CogVideoXDownBlock3D",) * 2,
                 up_block_types=("CogVideoXUpBlock3D",) * 2, block_out_channels=(4, 8), latent_channels=4,
                 layers_per_block=1, act_fn="silu", norm_eps=1e-6, norm_num_groups=2, temporal_compression_ratio=2,
                 use_quant_conv=False, use_post_quant_conv=False):
        super().__init__()
        self.encoder = CogVideoXEncoder3D(in_channels=in_channels, out_channels=latent_channels,
                                          down_block_types=down_block_types, block_out_channels=block_out_channels,
                                          layers_per_block=layers_per_block, act_fn=act_fn, norm_eps=norm_eps,
                                          norm_num_groups=norm_num_groups,
                                          temporal_compression_ratio=temporal_compression_ratio)
        self.decoder = CogVideoXDecoder3D(in_channels=latent_channels, out_channels=out_channels,
                                          up_block_types=up_block_types, block_out_channels=block_out_channels,
                                          layers_per_block=layers_per_block, act_fn=act_fn, norm_eps=norm_eps,
                                          norm_num_groups=norm_num_groups,
                                          temporal_compression_ratio=temporal_compression_ratio)
        # upstream sizes these by out_channels (not latent_channels); both are off here, as by default
        self.quant_conv = CogVideoXSafeConv3d(2 * out_channels, 2 * out_channels, 1) if use_quant_conv else None
        self.post_quant_conv = CogVideoXSafeConv3d(out_channels, out_channels, 1) if use_post_quant_conv else None
        self.spatial_compression_ratio = 2 ** (len(block_out_channels) - 1)
        self.temporal_compression_ratio = temporal_compression_ratio
        # upstream: 2 and 8 (the temporal ratio 4 apart); scaled to this config's ratio 2 so a 9-frame clip is
        # encoded in two batches
        self.num_latent_frames_batch_size = 2
        self.num_sample_frames_batch_size = 4

    def _encode(self, x):
        num_frames = x.shape[2]
        frame_batch_size = self.num_sample_frames_batch_size
        num_batches = max(num_frames // frame_batch_size, 1)
        conv_cache = None
        enc = []
        for i in range(num_batches):
            remaining_frames = num_frames % frame_batch_size
            start_frame = frame_batch_size * i + (0 if i == 0 else remaining_frames)
            end_frame = frame_batch_size * (i + 1) + remaining_frames
            x_intermediate, conv_cache = self.encoder(x[:, :, start_frame:end_frame], conv_cache=conv_cache)
            if self.quant_conv is not None:
                x_intermediate = self.quant_conv(x_intermediate)
            enc.append(x_intermediate)
        return torch.cat(enc, dim=2)

    def _decode(self, z):
        num_frames = z.shape[2]
        frame_batch_size = self.num_latent_frames_batch_size
        num_batches = max(num_frames // frame_batch_size, 1)
        conv_cache = None
        dec = []
        for i in range(num_batches):
            remaining_frames = num_frames % frame_batch_size
            start_frame = frame_batch_size * i + (0 if i == 0 else remaining_frames)
            end_frame = frame_batch_size * (i + 1) + remaining_frames
            z_intermediate = z[:, :, start_frame:end_frame]
            if self.post_quant_conv is not None:
                z_intermediate = self.post_quant_conv(z_intermediate)
            z_intermediate, conv_cache = self.decoder(z_intermediate, conv_cache=conv_cache)
            dec.append(z_intermediate)
        return torch.cat(dec, dim=2)

    def forward(self, sample):
        h = self._encode(sample)
        mean, _ = torch.chunk(h, 2, dim=1)  # DiagonalGaussianDistribution(h).mode()
        return self._decode(mean)


if __name__ == "__main__":
    capture_once(
        "cogvideox_vae", AutoencoderKLCogVideoX, lambda g: {"video": torch.randn((1, 3, 9, 4, 8), generator=g)},
        sys.argv[1],
        dict(library_source="replica of huggingface/diffusers autoencoder_kl_cogvideox.py (torch 1.13)",
             note="the CogVideoX VAE run in frame batches (4 sample / 2 latent frames, the remainder joining the "
                  "first batch): each causal convolution is passed the conv_cache it returned on the previous "
                  "batch, threaded through every block as nested dicts"))
