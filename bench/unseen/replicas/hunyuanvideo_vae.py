"""The HunyuanVideo VAE (AutoencoderKLHunyuanVideo) whole, reimplemented for torch 1.13 (no diffusers here), captured
small in f32 on CPU as one forward (encode, the posterior's mode, decode) with no tiling, no slicing and no
frame-wise tiles (the clip is far below tile_sample_min_num_frames).

Follows huggingface/diffusers src/diffusers/models/autoencoders/autoencoder_kl_hunyuan_video.py line for line:
prepare_causal_attention_mask (frame indices repeated per cell, meshgrid "xy", 0 where x <= y else -inf: a cell
attends to every cell of its own and earlier frames), HunyuanVideoCausalConv3d (F.pad replicate by
(k//2, k//2, k//2, k//2, k-1, 0): replicate in space, the first frame repeated in front in time, then an unpadded
Conv3d), HunyuanVideoUpsampleCausal3D (the first frame 2-D nearest by the spatial factors, the other frames 3-D
nearest by all three, joined in time, then a causal conv), HunyuanVideoDownsampleCausal3D (a causal conv of stride
(2, 2, 2), padding 0), HunyuanVideoResnetBlockCausal3D (GroupNorm-SiLU-conv twice, 1x1x1 causal conv shortcut when
widths differ), HunyuanVideoMidBlock3D (resnet, then the frames' cells flattened to rows [B, F*H*W, C], diffusers'
Attention with its GroupNorm (eps 1e-6), one head as wide as the channels, residual_connection, AttnProcessor2_0
with the causal mask, rows unflattened, then resnet), HunyuanVideoDownBlock3D, HunyuanVideoUpBlock3D,
HunyuanVideoEncoder3D, HunyuanVideoDecoder3D (the up blocks with layers_per_block + 1 resnets) and the model's
forward: encoder, quant_conv, DiagonalGaussianDistribution(h).mode() (the first half of the channels),
post_quant_conv, decoder. The same module tree, parameter names and shapes, call boundaries and arithmetic;
F.scaled_dot_product_attention stands in as its math path (torch 1.13 lacks it).

Tiny config: block_out_channels (8, 16), norm_num_groups 4, latent_channels 4, layers_per_block 1, mid-block
attention on, temporal_compression_ratio 4 (upstream's only decoder choice; with two blocks its rule puts the one
time down/upsample in block 0), spatial_compression_ratio 2 (one spatial down/upsample, block 0). A [1, 3, 5, 8, 8]
clip -> latent [1, 4, 3, 4, 4] (48 attention rows over 3 frames) -> [1, 3, 5, 8, 8].

usage: /usr/bin/python3 bench/unseen/replicas/hunyuanvideo_vae.py OUTDIR
REPLICA_DTYPE=bf16 [REPLICA_DEVICE=cuda] as run.py's replicas: the bf16 run, beside the f32 one.
"""
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from run import capture_once, sdpa


def prepare_causal_attention_mask(num_frames, height_width, dtype, device, batch_size=None):
    frame_ids = torch.arange(1, num_frames + 1, dtype=torch.int32, device=device).repeat_interleave(height_width)
    x, y = torch.meshgrid(frame_ids, frame_ids, indexing="xy")
    mask = torch.where(x <= y, 0, -float("inf")).to(dtype=dtype)
    if batch_size is not None:
        mask = mask.unsqueeze(0).expand(batch_size, -1, -1)
    return mask


class Attention(nn.Module):
    """diffusers' Attention(query_dim, heads, dim_head, eps, norm_num_groups, residual_connection=True, bias=True,
    upcast_softmax=True, _from_deprecated_attn_block=True) with AttnProcessor2_0, on a 3-D input with a mask."""

    def __init__(self, query_dim, heads, dim_head, eps, norm_num_groups):
        super().__init__()
        inner = heads * dim_head
        self.heads = heads
        self.rescale_output_factor = 1.0
        self.residual_connection = True
        self.group_norm = nn.GroupNorm(num_channels=query_dim, num_groups=norm_num_groups, eps=eps, affine=True)
        self.to_q = nn.Linear(query_dim, inner, bias=True)
        self.to_k = nn.Linear(query_dim, inner, bias=True)
        self.to_v = nn.Linear(query_dim, inner, bias=True)
        self.to_out = nn.ModuleList([nn.Linear(inner, query_dim, bias=True), nn.Dropout(0.0)])

    def prepare_attention_mask(self, attention_mask, target_length, batch_size):
        # current_length == target_length here; out_dim 3: repeated per head when the batch lacks them
        if attention_mask.shape[0] < batch_size * self.heads:
            attention_mask = attention_mask.repeat_interleave(self.heads, dim=0)
        return attention_mask

    def forward(self, hidden_states, attention_mask=None):
        residual = hidden_states
        batch_size, sequence_length, _ = hidden_states.shape
        if attention_mask is not None:
            attention_mask = self.prepare_attention_mask(attention_mask, sequence_length, batch_size)
            attention_mask = attention_mask.view(batch_size, self.heads, -1, attention_mask.shape[-1])
        hidden_states = self.group_norm(hidden_states.transpose(1, 2)).transpose(1, 2)
        query = self.to_q(hidden_states)
        key = self.to_k(hidden_states)
        value = self.to_v(hidden_states)
        head_dim = key.shape[-1] // self.heads
        query = query.view(batch_size, -1, self.heads, head_dim).transpose(1, 2)
        key = key.view(batch_size, -1, self.heads, head_dim).transpose(1, 2)
        value = value.view(batch_size, -1, self.heads, head_dim).transpose(1, 2)
        hidden_states = sdpa(query, key, value, mask=attention_mask)
        hidden_states = hidden_states.transpose(1, 2).reshape(batch_size, -1, self.heads * head_dim)
        hidden_states = hidden_states.to(query.dtype)
        hidden_states = self.to_out[0](hidden_states)
        hidden_states = self.to_out[1](hidden_states)
        if self.residual_connection:
            hidden_states = hidden_states + residual
        return hidden_states / self.rescale_output_factor


class HunyuanVideoCausalConv3d(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size=3, stride=1, padding=0, dilation=1, bias=True,
                 pad_mode="replicate"):
        super().__init__()
        if isinstance(kernel_size, int):
            kernel_size = (kernel_size,) * 3
        self.pad_mode = pad_mode
        kt, kh, kw = kernel_size
        self.time_causal_padding = (kt // 2, kt // 2, kh // 2, kh // 2, kw - 1, 0)
        self.conv = nn.Conv3d(in_channels, out_channels, kernel_size, stride, padding, dilation, bias=bias)

    def forward(self, hidden_states):
        hidden_states = F.pad(hidden_states, self.time_causal_padding, mode=self.pad_mode)
        return self.conv(hidden_states)


class HunyuanVideoUpsampleCausal3D(nn.Module):
    def __init__(self, in_channels, out_channels=None, kernel_size=3, stride=1, bias=True, upsample_factor=(2, 2, 2)):
        super().__init__()
        out_channels = out_channels or in_channels
        self.upsample_factor = upsample_factor
        self.conv = HunyuanVideoCausalConv3d(in_channels, out_channels, kernel_size, stride, bias=bias)

    def forward(self, hidden_states):
        num_frames = hidden_states.size(2)
        first_frame, other_frames = hidden_states.split((1, num_frames - 1), dim=2)
        first_frame = F.interpolate(first_frame.squeeze(2), scale_factor=self.upsample_factor[1:],
                                    mode="nearest").unsqueeze(2)
        if num_frames > 1:
            other_frames = other_frames.contiguous()
            other_frames = F.interpolate(other_frames, scale_factor=self.upsample_factor, mode="nearest")
            hidden_states = torch.cat((first_frame, other_frames), dim=2)
        else:
            hidden_states = first_frame
        return self.conv(hidden_states)


class HunyuanVideoDownsampleCausal3D(nn.Module):
    def __init__(self, channels, out_channels=None, padding=1, kernel_size=3, bias=True, stride=2):
        super().__init__()
        out_channels = out_channels or channels
        self.conv = HunyuanVideoCausalConv3d(channels, out_channels, kernel_size, stride, padding, bias=bias)

    def forward(self, hidden_states):
        return self.conv(hidden_states)


class HunyuanVideoResnetBlockCausal3D(nn.Module):
    def __init__(self, in_channels, out_channels=None, dropout=0.0, groups=32, eps=1e-6, non_linearity="swish"):
        super().__init__()
        out_channels = out_channels or in_channels
        self.nonlinearity = nn.SiLU()  # get_activation("swish" / "silu")
        self.norm1 = nn.GroupNorm(groups, in_channels, eps=eps, affine=True)
        self.conv1 = HunyuanVideoCausalConv3d(in_channels, out_channels, 3, 1, 0)
        self.norm2 = nn.GroupNorm(groups, out_channels, eps=eps, affine=True)
        self.dropout = nn.Dropout(dropout)
        self.conv2 = HunyuanVideoCausalConv3d(out_channels, out_channels, 3, 1, 0)
        self.conv_shortcut = None
        if in_channels != out_channels:
            self.conv_shortcut = HunyuanVideoCausalConv3d(in_channels, out_channels, 1, 1, 0)

    def forward(self, hidden_states):
        hidden_states = hidden_states.contiguous()
        residual = hidden_states
        hidden_states = self.conv1(self.nonlinearity(self.norm1(hidden_states)))
        hidden_states = self.nonlinearity(self.norm2(hidden_states))
        hidden_states = self.conv2(self.dropout(hidden_states))
        if self.conv_shortcut is not None:
            residual = self.conv_shortcut(residual)
        return hidden_states + residual


class HunyuanVideoMidBlock3D(nn.Module):
    def __init__(self, in_channels, dropout=0.0, num_layers=1, resnet_eps=1e-6, resnet_act_fn="swish",
                 resnet_groups=32, add_attention=True, attention_head_dim=1):
        super().__init__()
        resnet_groups = resnet_groups if resnet_groups is not None else min(in_channels // 4, 32)
        self.add_attention = add_attention

        def resnet():
            return HunyuanVideoResnetBlockCausal3D(in_channels, in_channels, dropout, resnet_groups, resnet_eps,
                                                   resnet_act_fn)

        resnets, attentions = [resnet()], []
        for _ in range(num_layers):
            attentions.append(Attention(in_channels, in_channels // attention_head_dim, attention_head_dim,
                                        resnet_eps, resnet_groups) if add_attention else None)
            resnets.append(resnet())
        self.attentions = nn.ModuleList(attentions)
        self.resnets = nn.ModuleList(resnets)

    def forward(self, hidden_states):
        hidden_states = self.resnets[0](hidden_states)
        for attn, resnet in zip(self.attentions, self.resnets[1:]):
            if attn is not None:
                batch_size, num_channels, num_frames, height, width = hidden_states.shape
                hidden_states = hidden_states.permute(0, 2, 3, 4, 1).flatten(1, 3)
                attention_mask = prepare_causal_attention_mask(num_frames, height * width, hidden_states.dtype,
                                                               hidden_states.device, batch_size=batch_size)
                hidden_states = attn(hidden_states, attention_mask=attention_mask)
                hidden_states = hidden_states.unflatten(1, (num_frames, height, width)).permute(0, 4, 1, 2, 3)
            hidden_states = resnet(hidden_states)
        return hidden_states


class HunyuanVideoDownBlock3D(nn.Module):
    def __init__(self, in_channels, out_channels, dropout=0.0, num_layers=1, resnet_eps=1e-6, resnet_act_fn="swish",
                 resnet_groups=32, add_downsample=True, downsample_stride=2, downsample_padding=1):
        super().__init__()
        self.resnets = nn.ModuleList([
            HunyuanVideoResnetBlockCausal3D(in_channels if i == 0 else out_channels, out_channels, dropout,
                                            resnet_groups, resnet_eps, resnet_act_fn)
            for i in range(num_layers)])
        self.downsamplers = None
        if add_downsample:
            self.downsamplers = nn.ModuleList([HunyuanVideoDownsampleCausal3D(
                out_channels, out_channels=out_channels, padding=downsample_padding, stride=downsample_stride)])

    def forward(self, hidden_states):
        for resnet in self.resnets:
            hidden_states = resnet(hidden_states)
        if self.downsamplers is not None:
            for downsampler in self.downsamplers:
                hidden_states = downsampler(hidden_states)
        return hidden_states


class HunyuanVideoUpBlock3D(nn.Module):
    def __init__(self, in_channels, out_channels, dropout=0.0, num_layers=1, resnet_eps=1e-6, resnet_act_fn="swish",
                 resnet_groups=32, add_upsample=True, upsample_scale_factor=(2, 2, 2)):
        super().__init__()
        self.resnets = nn.ModuleList([
            HunyuanVideoResnetBlockCausal3D(in_channels if i == 0 else out_channels, out_channels, dropout,
                                            resnet_groups, resnet_eps, resnet_act_fn)
            for i in range(num_layers)])
        self.upsamplers = None
        if add_upsample:
            self.upsamplers = nn.ModuleList([HunyuanVideoUpsampleCausal3D(
                out_channels, out_channels=out_channels, upsample_factor=upsample_scale_factor)])

    def forward(self, hidden_states):
        for resnet in self.resnets:
            hidden_states = resnet(hidden_states)
        if self.upsamplers is not None:
            for upsampler in self.upsamplers:
                hidden_states = upsampler(hidden_states)
        return hidden_states


class HunyuanVideoEncoder3D(nn.Module):
    def __init__(self, in_channels=3, out_channels=3, block_out_channels=(8, 16), layers_per_block=1,
                 norm_num_groups=4, act_fn="silu", double_z=True, mid_block_add_attention=True,
                 temporal_compression_ratio=4, spatial_compression_ratio=2):
        super().__init__()
        n = len(block_out_channels)
        self.conv_in = HunyuanVideoCausalConv3d(in_channels, block_out_channels[0], kernel_size=3, stride=1)
        self.down_blocks = nn.ModuleList([])
        output_channel = block_out_channels[0]
        n_spatial = int(np.log2(spatial_compression_ratio))
        n_time = int(np.log2(temporal_compression_ratio))
        for i in range(n):
            input_channel, output_channel = output_channel, block_out_channels[i]
            is_final_block = i == n - 1
            if temporal_compression_ratio == 4:
                add_spatial = bool(i < n_spatial)
                add_time = bool(i >= (n - 1 - n_time) and not is_final_block)
            elif temporal_compression_ratio == 8:
                add_spatial = bool(i < n_spatial)
                add_time = bool(i < n_time)
            else:
                raise ValueError(f"Unsupported time_compression_ratio: {temporal_compression_ratio}")
            stride = ((2,) if add_time else (1,)) + ((2, 2) if add_spatial else (1, 1))
            self.down_blocks.append(HunyuanVideoDownBlock3D(
                num_layers=layers_per_block, in_channels=input_channel, out_channels=output_channel,
                add_downsample=bool(add_spatial or add_time), resnet_eps=1e-6, resnet_act_fn=act_fn,
                resnet_groups=norm_num_groups, downsample_stride=stride, downsample_padding=0))
        self.mid_block = HunyuanVideoMidBlock3D(
            in_channels=block_out_channels[-1], resnet_eps=1e-6, resnet_act_fn=act_fn,
            attention_head_dim=block_out_channels[-1], resnet_groups=norm_num_groups,
            add_attention=mid_block_add_attention)
        self.conv_norm_out = nn.GroupNorm(num_channels=block_out_channels[-1], num_groups=norm_num_groups, eps=1e-6)
        self.conv_act = nn.SiLU()
        conv_out_channels = 2 * out_channels if double_z else out_channels
        self.conv_out = HunyuanVideoCausalConv3d(block_out_channels[-1], conv_out_channels, kernel_size=3)

    def forward(self, hidden_states):
        hidden_states = self.conv_in(hidden_states)
        for down_block in self.down_blocks:
            hidden_states = down_block(hidden_states)
        hidden_states = self.mid_block(hidden_states)
        hidden_states = self.conv_act(self.conv_norm_out(hidden_states))
        return self.conv_out(hidden_states)


class HunyuanVideoDecoder3D(nn.Module):
    def __init__(self, in_channels=3, out_channels=3, block_out_channels=(8, 16), layers_per_block=1,
                 norm_num_groups=4, act_fn="silu", mid_block_add_attention=True, time_compression_ratio=4,
                 spatial_compression_ratio=2):
        super().__init__()
        n = len(block_out_channels)
        self.layers_per_block = layers_per_block
        self.conv_in = HunyuanVideoCausalConv3d(in_channels, block_out_channels[-1], kernel_size=3, stride=1)
        self.up_blocks = nn.ModuleList([])
        self.mid_block = HunyuanVideoMidBlock3D(
            in_channels=block_out_channels[-1], resnet_eps=1e-6, resnet_act_fn=act_fn,
            attention_head_dim=block_out_channels[-1], resnet_groups=norm_num_groups,
            add_attention=mid_block_add_attention)
        reversed_channels = list(reversed(block_out_channels))
        output_channel = reversed_channels[0]
        n_spatial = int(np.log2(spatial_compression_ratio))
        n_time = int(np.log2(time_compression_ratio))
        for i in range(n):
            prev_output_channel, output_channel = output_channel, reversed_channels[i]
            is_final_block = i == n - 1
            if time_compression_ratio == 4:
                add_spatial = bool(i < n_spatial)
                add_time = bool(i >= n - 1 - n_time and not is_final_block)
            else:
                raise ValueError(f"Unsupported time_compression_ratio: {time_compression_ratio}")
            factor = ((2,) if add_time else (1,)) + ((2, 2) if add_spatial else (1, 1))
            self.up_blocks.append(HunyuanVideoUpBlock3D(
                num_layers=self.layers_per_block + 1, in_channels=prev_output_channel, out_channels=output_channel,
                add_upsample=bool(add_spatial or add_time), upsample_scale_factor=factor, resnet_eps=1e-6,
                resnet_act_fn=act_fn, resnet_groups=norm_num_groups))
        self.conv_norm_out = nn.GroupNorm(num_channels=block_out_channels[0], num_groups=norm_num_groups, eps=1e-6)
        self.conv_act = nn.SiLU()
        self.conv_out = HunyuanVideoCausalConv3d(block_out_channels[0], out_channels, kernel_size=3)

    def forward(self, hidden_states):
        hidden_states = self.conv_in(hidden_states)
        hidden_states = self.mid_block(hidden_states)
        for up_block in self.up_blocks:
            hidden_states = up_block(hidden_states)
        hidden_states = self.conv_act(self.conv_norm_out(hidden_states))
        return self.conv_out(hidden_states)


class AutoencoderKLHunyuanVideo(nn.Module):
    def __init__(self, in_channels=3, out_channels=3, latent_channels=4, block_out_channels=(8, 16),
                 layers_per_block=1, act_fn="silu", norm_num_groups=4, spatial_compression_ratio=2,
                 temporal_compression_ratio=4, mid_block_add_attention=True):
        super().__init__()
        self.time_compression_ratio = temporal_compression_ratio
        self.encoder = HunyuanVideoEncoder3D(
            in_channels=in_channels, out_channels=latent_channels, block_out_channels=block_out_channels,
            layers_per_block=layers_per_block, norm_num_groups=norm_num_groups, act_fn=act_fn, double_z=True,
            mid_block_add_attention=mid_block_add_attention, temporal_compression_ratio=temporal_compression_ratio,
            spatial_compression_ratio=spatial_compression_ratio)
        self.decoder = HunyuanVideoDecoder3D(
            in_channels=latent_channels, out_channels=out_channels, block_out_channels=block_out_channels,
            layers_per_block=layers_per_block, norm_num_groups=norm_num_groups, act_fn=act_fn,
            time_compression_ratio=temporal_compression_ratio, spatial_compression_ratio=spatial_compression_ratio,
            mid_block_add_attention=mid_block_add_attention)
        self.quant_conv = nn.Conv3d(2 * latent_channels, 2 * latent_channels, kernel_size=1)
        self.post_quant_conv = nn.Conv3d(latent_channels, latent_channels, kernel_size=1)
        self.spatial_compression_ratio = spatial_compression_ratio
        self.temporal_compression_ratio = temporal_compression_ratio

    def _encode(self, x):
        return self.quant_conv(self.encoder(x))

    def _decode(self, z):
        return self.decoder(self.post_quant_conv(z))

    def forward(self, sample):
        h = self._encode(sample)
        mean, _ = torch.chunk(h, 2, dim=1)  # DiagonalGaussianDistribution(h).mode()
        return self._decode(mean)


if __name__ == "__main__":
    capture_once(
        "hunyuanvideo_vae", AutoencoderKLHunyuanVideo,
        lambda g: {"video": torch.randn((1, 3, 5, 8, 8), generator=g)}, sys.argv[1],
        dict(library_source="replica of huggingface/diffusers autoencoder_kl_hunyuan_video.py (torch 1.13)",
             note="the HunyuanVideo VAE in one pass: replicate-padded causal convolutions, a first-frame-apart "
                  "upsample, and mid-block attention over all cells with a causal frame mask"))
