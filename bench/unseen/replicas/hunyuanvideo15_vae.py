"""HunyuanVideo 1.5's VAE (AutoencoderKLHunyuanVideo15, 16x spatial and 4x temporal compression, DC-AE-like
space/time-to-channel shortcuts) whole, reimplemented for torch 1.13 (no diffusers here), captured small in f32 on
CPU as one forward (encode, the posterior's mode, decode) with no tiling and no slicing (the default path: use_tiling
is off, and the clip is below the 256x256 tile anyway).

Follows huggingface/diffusers src/diffusers/models/autoencoders/autoencoder_kl_hunyuanvideo15.py at
04df28c06f40d862e50cf88ac5ce9d800a614ae5 line for line:
HunyuanVideo15CausalConv3d (the same code as autoencoder_kl_hunyuan_video.py's HunyuanVideoCausalConv3d, imported
from hunyuanvideo_vae.py: F.pad replicate by (1, 1, 1, 1, 2, 0), the first frame repeated twice in front, then an
unpadded Conv3d; on the CPU in bf16 the pad runs in f32 and is cast back, the same values: torch 1.13 has no bf16
replication_pad3d there), HunyuanVideo15RMS_norm (images=False: gamma [C, 1, 1, 1], no bias (the Python float 0.0
added); F.normalize over the channels, computed in f32 and cast back when the input is bf16/fp16, times sqrt(C),
times gamma, plus 0.0), HunyuanVideo15AttnBlock (RMS norm, q/k/v as 1x1x1 Conv3d, each [B, C, F, H, W] reshaped to
[B, C, F*H*W], permuted to rows [B, F*H*W, C], unsqueezed to one head [B, 1, F*H*W, C]; the causal mask built by its
Python loop (row i attends to every cell of frames <= i // (H*W): 0, else -inf, in the query's dtype), expanded to
the batch and unsqueezed to [B, 1, L, L]; SDPA; squeezed, reshaped [B, F, H, W, C], permuted (0, 4, 1, 2, 3); a
1x1x1 Conv3d proj_out; plus the input), HunyuanVideo15Upsample (a causal conv to factor x the output width; with the
time factor: the first frame's output rearranged by (r1, r2, r3) = (1, 2, 2) and only the first half of its channels
kept, the other frames by (2, 2, 2), joined in time; the shortcut likewise: the first frame's input rearranged
(1, 2, 2) and repeat_interleave'd repeats // 2, the others rearranged (2, 2, 2) and repeat_interleave'd repeats;
without it: (1, 2, 2) with the shortcut repeated first then rearranged; _dcae_upsample_rearrange is view [b, r1, r2,
r3, c, f, h, w], permute (0, 4, 5, 1, 6, 2, 7, 3): the offsets major in the channel index), HunyuanVideo15Downsample
(a causal conv to out / factor channels; with the time factor: the first frame's output rearranged (1, 2, 2) and
concatenated with itself on the channels, the others (2, 2, 2), joined in time; the shortcut: the first frame's
input rearranged (1, 2, 2), its consecutive channel groups of group_size // 2 averaged, the others rearranged
(2, 2, 2) with groups of group_size averaged, joined; _dcae_downsample_rearrange is view [b, c, f, r1, h, r2, w,
r3], permute (0, 3, 5, 7, 1, 2, 4, 6)), HunyuanVideo15ResnetBlock (RMS norm-SiLU-causal conv twice, plus the input,
through a 1x1x1 nn.Conv3d conv_shortcut when the widths differ), HunyuanVideo15MidBlock (resnet, attention, resnet),
HunyuanVideo15DownBlock3D, HunyuanVideo15UpBlock3D, HunyuanVideo15Encoder3D (conv_in; levels downsampling in space
while i < log2(spatial_compression_ratio), in time too from i >= log2(spatial / temporal), each to the next level's
width; the mid block; the head: the mid block's output with consecutive channel groups of block_out_channels[-1] //
(2 * latent_channels) averaged, added in place (+=) to RMS norm-SiLU-conv_out), HunyuanVideo15Decoder3D (conv_in
plus the latent's channels each repeat_interleave'd to its width, the mid block, per level layers_per_block + 1
resnets and an upsample while i < log2(spatial) (with time while i < log2(temporal)), RMS norm-SiLU-conv_out) and
AutoencoderKLHunyuanVideo15.forward with sample_posterior False: encode, DiagonalGaussianDistribution(h).mode() (the
first half of the channels; logvar, std and var are made and unused), decode. The same module tree, parameter names
and shapes, call boundaries and arithmetic; F.scaled_dot_product_attention stands in as its math path (run.sdpa:
torch 1.13 lacks it).

Tiny config: HunyuanVideo 1.5's released layout (block_out_channels (128, 256, 512, 1024, 1024), latent_channels 32,
spatial 16, temporal 4) divided by 32 in width: block_out_channels (4, 8, 16, 32, 32), so every down/upsample keeps
the released group size / repeat count (encoder downsamples: (1,2,2) groups 2, 2, then (2,2,2) groups 4, 8, their
first frames 2, 4; upsamples (2,2,2) repeats 8, 4, their first frames 4, 2, then (1,2,2) repeats 2, 2); all five
levels kept (four spatial down/upsamples, two of them temporal). latent_channels 2 (released 32, so 1 at /32: kept
at 2 for a latent of more than one channel; the encoder head then averages groups of 8 (released 16) and the decoder
input repeats each channel 16 times (released 32)). layers_per_block 1 (released 2: the decoder's levels then hold
2 resnets). A [1, 3, 5, 32, 16] clip (1 + 4 frames) -> moments [1, 4, 2, 2, 1] -> latent [1, 2, 2, 2, 1] (the
mid-block attentions over 4 rows of 2 frames under the causal mask) -> [1, 3, 5, 32, 16] (10.7 MB in f32).

usage: /usr/bin/python3 bench/unseen/replicas/hunyuanvideo15_vae.py OUTDIR
REPLICA_DTYPE=bf16 [REPLICA_DEVICE=cuda] as run.py's replicas: the bf16 run, beside the f32 one.
"""
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from hunyuanvideo_vae import HunyuanVideoCausalConv3d
from run import capture_once, sdpa


class HunyuanVideo15CausalConv3d(HunyuanVideoCausalConv3d):
    """The same constructor and forward as autoencoder_kl_hunyuan_video.py's HunyuanVideoCausalConv3d, line for
    line (replicate padding (k//2, k//2, k//2, k//2, k-1, 0), then an unpadded Conv3d named conv)."""

    def forward(self, hidden_states):
        if hidden_states.dtype == torch.bfloat16 and hidden_states.device.type == "cpu":
            # torch 1.13's CPU replicate pad has no bf16 kernel: padding copies values, so padding in f32 and
            # casting back gives the same tensor (as framepack.py and helios.py do)
            hidden_states = F.pad(hidden_states.float(), self.time_causal_padding, mode=self.pad_mode).to(
                hidden_states.dtype)
            return self.conv(hidden_states)
        return super().forward(hidden_states)


class HunyuanVideo15RMS_norm(nn.Module):
    def __init__(self, dim, channel_first=True, images=True, bias=False):
        super().__init__()
        broadcastable_dims = (1, 1, 1) if not images else (1, 1)
        shape = (dim, *broadcastable_dims) if channel_first else (dim,)

        self.channel_first = channel_first
        self.scale = dim**0.5
        self.gamma = nn.Parameter(torch.ones(shape))
        self.bias = nn.Parameter(torch.zeros(shape)) if bias else 0.0

    def forward(self, x):
        needs_fp32_normalize = x.dtype in (torch.float16, torch.bfloat16) or any(
            t in str(x.dtype) for t in ("float4_", "float8_"))
        normalized = F.normalize(x.float() if needs_fp32_normalize else x, dim=(1 if self.channel_first else -1)).to(
            x.dtype)

        return normalized * self.scale * self.gamma + self.bias


class HunyuanVideo15AttnBlock(nn.Module):
    def __init__(self, in_channels):
        super().__init__()
        self.in_channels = in_channels

        self.norm = HunyuanVideo15RMS_norm(in_channels, images=False)

        self.to_q = nn.Conv3d(in_channels, in_channels, kernel_size=1)
        self.to_k = nn.Conv3d(in_channels, in_channels, kernel_size=1)
        self.to_v = nn.Conv3d(in_channels, in_channels, kernel_size=1)
        self.proj_out = nn.Conv3d(in_channels, in_channels, kernel_size=1)

    @staticmethod
    def prepare_causal_attention_mask(n_frame, n_hw, dtype, device, batch_size=None):
        seq_len = n_frame * n_hw
        mask = torch.full((seq_len, seq_len), float("-inf"), dtype=dtype, device=device)
        for i in range(seq_len):
            i_frame = i // n_hw
            mask[i, : (i_frame + 1) * n_hw] = 0
        if batch_size is not None:
            mask = mask.unsqueeze(0).expand(batch_size, -1, -1)
        return mask

    def forward(self, x):
        identity = x

        x = self.norm(x)

        query = self.to_q(x)
        key = self.to_k(x)
        value = self.to_v(x)

        batch_size, channels, frames, height, width = query.shape

        query = query.reshape(batch_size, channels, frames * height * width).permute(0, 2, 1).unsqueeze(1).contiguous()
        key = key.reshape(batch_size, channels, frames * height * width).permute(0, 2, 1).unsqueeze(1).contiguous()
        value = value.reshape(batch_size, channels, frames * height * width).permute(0, 2, 1).unsqueeze(1).contiguous()

        attention_mask = self.prepare_causal_attention_mask(
            frames, height * width, query.dtype, query.device, batch_size=batch_size)

        # F.scaled_dot_product_attention(query, key, value, attn_mask=attention_mask.unsqueeze(1))
        x = sdpa(query, key, value, mask=attention_mask.unsqueeze(1))

        x = x.squeeze(1).reshape(batch_size, frames, height, width, channels).permute(0, 4, 1, 2, 3)
        x = self.proj_out(x)

        return x + identity


class HunyuanVideo15Upsample(nn.Module):
    def __init__(self, in_channels, out_channels, add_temporal_upsample=True):
        super().__init__()
        factor = 2 * 2 * 2 if add_temporal_upsample else 1 * 2 * 2
        self.conv = HunyuanVideo15CausalConv3d(in_channels, out_channels * factor, kernel_size=3)

        self.add_temporal_upsample = add_temporal_upsample
        self.repeats = factor * out_channels // in_channels

    @staticmethod
    def _dcae_upsample_rearrange(tensor, r1=1, r2=2, r3=2):
        """(b, r1*r2*r3*c, f, h, w) -> (b, c, r1*f, r2*h, r3*w)"""
        b, packed_c, f, h, w = tensor.shape
        factor = r1 * r2 * r3
        c = packed_c // factor

        tensor = tensor.view(b, r1, r2, r3, c, f, h, w)
        tensor = tensor.permute(0, 4, 5, 1, 6, 2, 7, 3)
        return tensor.reshape(b, c, f * r1, h * r2, w * r3)

    def forward(self, x):
        r1 = 2 if self.add_temporal_upsample else 1
        h = self.conv(x)
        if self.add_temporal_upsample:
            h_first = h[:, :, :1, :, :]
            h_first = self._dcae_upsample_rearrange(h_first, r1=1, r2=2, r3=2)
            h_first = h_first[:, : h_first.shape[1] // 2]
            h_next = h[:, :, 1:, :, :]
            h_next = self._dcae_upsample_rearrange(h_next, r1=r1, r2=2, r3=2)
            h = torch.cat([h_first, h_next], dim=2)

            # shortcut computation
            x_first = x[:, :, :1, :, :]
            x_first = self._dcae_upsample_rearrange(x_first, r1=1, r2=2, r3=2)
            x_first = x_first.repeat_interleave(repeats=self.repeats // 2, dim=1)

            x_next = x[:, :, 1:, :, :]
            x_next = self._dcae_upsample_rearrange(x_next, r1=r1, r2=2, r3=2)
            x_next = x_next.repeat_interleave(repeats=self.repeats, dim=1)
            shortcut = torch.cat([x_first, x_next], dim=2)

        else:
            h = self._dcae_upsample_rearrange(h, r1=r1, r2=2, r3=2)
            shortcut = x.repeat_interleave(repeats=self.repeats, dim=1)
            shortcut = self._dcae_upsample_rearrange(shortcut, r1=r1, r2=2, r3=2)
        return h + shortcut


class HunyuanVideo15Downsample(nn.Module):
    def __init__(self, in_channels, out_channels, add_temporal_downsample=True):
        super().__init__()
        factor = 2 * 2 * 2 if add_temporal_downsample else 1 * 2 * 2
        self.conv = HunyuanVideo15CausalConv3d(in_channels, out_channels // factor, kernel_size=3)

        self.add_temporal_downsample = add_temporal_downsample
        self.group_size = factor * in_channels // out_channels

    @staticmethod
    def _dcae_downsample_rearrange(tensor, r1=1, r2=2, r3=2):
        """(b, c, r1*f, r2*h, r3*w) -> (b, r1*r2*r3*c, f, h, w)"""
        b, c, packed_f, packed_h, packed_w = tensor.shape
        f, h, w = packed_f // r1, packed_h // r2, packed_w // r3

        tensor = tensor.view(b, c, f, r1, h, r2, w, r3)
        tensor = tensor.permute(0, 3, 5, 7, 1, 2, 4, 6)
        return tensor.reshape(b, r1 * r2 * r3 * c, f, h, w)

    def forward(self, x):
        r1 = 2 if self.add_temporal_downsample else 1
        h = self.conv(x)
        if self.add_temporal_downsample:
            h_first = h[:, :, :1, :, :]
            h_first = self._dcae_downsample_rearrange(h_first, r1=1, r2=2, r3=2)
            h_first = torch.cat([h_first, h_first], dim=1)
            h_next = h[:, :, 1:, :, :]
            h_next = self._dcae_downsample_rearrange(h_next, r1=r1, r2=2, r3=2)
            h = torch.cat([h_first, h_next], dim=2)

            # shortcut computation
            x_first = x[:, :, :1, :, :]
            x_first = self._dcae_downsample_rearrange(x_first, r1=1, r2=2, r3=2)
            B, C, T, H, W = x_first.shape
            x_first = x_first.view(B, h.shape[1], self.group_size // 2, T, H, W).mean(dim=2)
            x_next = x[:, :, 1:, :, :]
            x_next = self._dcae_downsample_rearrange(x_next, r1=r1, r2=2, r3=2)
            B, C, T, H, W = x_next.shape
            x_next = x_next.view(B, h.shape[1], self.group_size, T, H, W).mean(dim=2)
            shortcut = torch.cat([x_first, x_next], dim=2)
        else:
            h = self._dcae_downsample_rearrange(h, r1=r1, r2=2, r3=2)
            shortcut = self._dcae_downsample_rearrange(x, r1=r1, r2=2, r3=2)
            B, C, T, H, W = shortcut.shape
            shortcut = shortcut.view(B, h.shape[1], self.group_size, T, H, W).mean(dim=2)

        return h + shortcut


class HunyuanVideo15ResnetBlock(nn.Module):
    def __init__(self, in_channels, out_channels=None, non_linearity="swish"):
        super().__init__()
        out_channels = out_channels or in_channels

        self.nonlinearity = nn.SiLU()  # get_activation("swish")

        self.norm1 = HunyuanVideo15RMS_norm(in_channels, images=False)
        self.conv1 = HunyuanVideo15CausalConv3d(in_channels, out_channels, kernel_size=3)

        self.norm2 = HunyuanVideo15RMS_norm(out_channels, images=False)
        self.conv2 = HunyuanVideo15CausalConv3d(out_channels, out_channels, kernel_size=3)

        self.conv_shortcut = None
        if in_channels != out_channels:
            self.conv_shortcut = nn.Conv3d(in_channels, out_channels, kernel_size=1, stride=1, padding=0)

    def forward(self, hidden_states):
        residual = hidden_states

        hidden_states = self.norm1(hidden_states)
        hidden_states = self.nonlinearity(hidden_states)
        hidden_states = self.conv1(hidden_states)

        hidden_states = self.norm2(hidden_states)
        hidden_states = self.nonlinearity(hidden_states)
        hidden_states = self.conv2(hidden_states)

        if self.conv_shortcut is not None:
            residual = self.conv_shortcut(residual)

        return hidden_states + residual


class HunyuanVideo15MidBlock(nn.Module):
    def __init__(self, in_channels, num_layers=1, add_attention=True):
        super().__init__()
        self.add_attention = add_attention

        resnets = [HunyuanVideo15ResnetBlock(in_channels=in_channels, out_channels=in_channels)]
        attentions = []
        for _ in range(num_layers):
            if self.add_attention:
                attentions.append(HunyuanVideo15AttnBlock(in_channels))
            else:
                attentions.append(None)
            resnets.append(HunyuanVideo15ResnetBlock(in_channels=in_channels, out_channels=in_channels))

        self.attentions = nn.ModuleList(attentions)
        self.resnets = nn.ModuleList(resnets)

    def forward(self, hidden_states):
        hidden_states = self.resnets[0](hidden_states)

        for attn, resnet in zip(self.attentions, self.resnets[1:]):
            if attn is not None:
                hidden_states = attn(hidden_states)
            hidden_states = resnet(hidden_states)

        return hidden_states


class HunyuanVideo15DownBlock3D(nn.Module):
    def __init__(self, in_channels, out_channels, num_layers=1, downsample_out_channels=None,
                 add_temporal_downsample=True):
        super().__init__()
        resnets = []
        for i in range(num_layers):
            in_channels = in_channels if i == 0 else out_channels
            resnets.append(HunyuanVideo15ResnetBlock(in_channels=in_channels, out_channels=out_channels))
        self.resnets = nn.ModuleList(resnets)

        if downsample_out_channels is not None:
            self.downsamplers = nn.ModuleList([HunyuanVideo15Downsample(
                out_channels, out_channels=downsample_out_channels, add_temporal_downsample=add_temporal_downsample)])
        else:
            self.downsamplers = None

    def forward(self, hidden_states):
        for resnet in self.resnets:
            hidden_states = resnet(hidden_states)

        if self.downsamplers is not None:
            for downsampler in self.downsamplers:
                hidden_states = downsampler(hidden_states)

        return hidden_states


class HunyuanVideo15UpBlock3D(nn.Module):
    def __init__(self, in_channels, out_channels, num_layers=1, upsample_out_channels=None,
                 add_temporal_upsample=True):
        super().__init__()
        resnets = []
        for i in range(num_layers):
            input_channels = in_channels if i == 0 else out_channels
            resnets.append(HunyuanVideo15ResnetBlock(in_channels=input_channels, out_channels=out_channels))
        self.resnets = nn.ModuleList(resnets)

        if upsample_out_channels is not None:
            self.upsamplers = nn.ModuleList([HunyuanVideo15Upsample(
                out_channels, out_channels=upsample_out_channels, add_temporal_upsample=add_temporal_upsample)])
        else:
            self.upsamplers = None

    def forward(self, hidden_states):
        for resnet in self.resnets:
            hidden_states = resnet(hidden_states)

        if self.upsamplers is not None:
            for upsampler in self.upsamplers:
                hidden_states = upsampler(hidden_states)

        return hidden_states


class HunyuanVideo15Encoder3D(nn.Module):
    def __init__(self, in_channels=3, out_channels=64, block_out_channels=(128, 256, 512, 1024, 1024),
                 layers_per_block=2, temporal_compression_ratio=4, spatial_compression_ratio=16,
                 downsample_match_channel=True):
        super().__init__()
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.group_size = block_out_channels[-1] // self.out_channels

        self.conv_in = HunyuanVideo15CausalConv3d(in_channels, block_out_channels[0], kernel_size=3)
        self.mid_block = None
        self.down_blocks = nn.ModuleList([])

        input_channel = block_out_channels[0]
        for i in range(len(block_out_channels)):
            add_spatial_downsample = i < np.log2(spatial_compression_ratio)
            output_channel = block_out_channels[i]
            if not add_spatial_downsample:
                down_block = HunyuanVideo15DownBlock3D(
                    num_layers=layers_per_block, in_channels=input_channel, out_channels=output_channel,
                    downsample_out_channels=None, add_temporal_downsample=False)
                input_channel = output_channel
            else:
                add_temporal_downsample = i >= np.log2(spatial_compression_ratio // temporal_compression_ratio)
                downsample_out_channels = block_out_channels[i + 1] if downsample_match_channel else output_channel
                down_block = HunyuanVideo15DownBlock3D(
                    num_layers=layers_per_block, in_channels=input_channel, out_channels=output_channel,
                    downsample_out_channels=downsample_out_channels, add_temporal_downsample=add_temporal_downsample)
                input_channel = downsample_out_channels

            self.down_blocks.append(down_block)

        self.mid_block = HunyuanVideo15MidBlock(in_channels=block_out_channels[-1])

        self.norm_out = HunyuanVideo15RMS_norm(block_out_channels[-1], images=False)
        self.conv_act = nn.SiLU()
        self.conv_out = HunyuanVideo15CausalConv3d(block_out_channels[-1], out_channels, kernel_size=3)

    def forward(self, hidden_states):
        hidden_states = self.conv_in(hidden_states)

        for down_block in self.down_blocks:
            hidden_states = down_block(hidden_states)

        hidden_states = self.mid_block(hidden_states)

        batch_size, _, frame, height, width = hidden_states.shape
        short_cut = hidden_states.view(batch_size, -1, self.group_size, frame, height, width).mean(dim=2)

        hidden_states = self.norm_out(hidden_states)
        hidden_states = self.conv_act(hidden_states)
        hidden_states = self.conv_out(hidden_states)

        hidden_states += short_cut

        return hidden_states


class HunyuanVideo15Decoder3D(nn.Module):
    def __init__(self, in_channels=32, out_channels=3, block_out_channels=(1024, 1024, 512, 256, 128),
                 layers_per_block=2, spatial_compression_ratio=16, temporal_compression_ratio=4,
                 upsample_match_channel=True):
        super().__init__()
        self.layers_per_block = layers_per_block
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.repeat = block_out_channels[0] // self.in_channels

        self.conv_in = HunyuanVideo15CausalConv3d(self.in_channels, block_out_channels[0], kernel_size=3)
        self.up_blocks = nn.ModuleList([])

        # mid
        self.mid_block = HunyuanVideo15MidBlock(in_channels=block_out_channels[0])

        # up
        input_channel = block_out_channels[0]
        for i in range(len(block_out_channels)):
            output_channel = block_out_channels[i]

            add_spatial_upsample = i < np.log2(spatial_compression_ratio)
            add_temporal_upsample = i < np.log2(temporal_compression_ratio)
            if add_spatial_upsample or add_temporal_upsample:
                upsample_out_channels = block_out_channels[i + 1] if upsample_match_channel else output_channel
                up_block = HunyuanVideo15UpBlock3D(
                    num_layers=self.layers_per_block + 1, in_channels=input_channel, out_channels=output_channel,
                    upsample_out_channels=upsample_out_channels, add_temporal_upsample=add_temporal_upsample)
                input_channel = upsample_out_channels
            else:
                up_block = HunyuanVideo15UpBlock3D(
                    num_layers=self.layers_per_block + 1, in_channels=input_channel, out_channels=output_channel,
                    upsample_out_channels=None, add_temporal_upsample=False)
                input_channel = output_channel

            self.up_blocks.append(up_block)

        # out
        self.norm_out = HunyuanVideo15RMS_norm(block_out_channels[-1], images=False)
        self.conv_act = nn.SiLU()
        self.conv_out = HunyuanVideo15CausalConv3d(block_out_channels[-1], out_channels, kernel_size=3)

    def forward(self, hidden_states):
        hidden_states = self.conv_in(hidden_states) + hidden_states.repeat_interleave(repeats=self.repeat, dim=1)

        hidden_states = self.mid_block(hidden_states)

        for up_block in self.up_blocks:
            hidden_states = up_block(hidden_states)

        # post-process
        hidden_states = self.norm_out(hidden_states)
        hidden_states = self.conv_act(hidden_states)
        hidden_states = self.conv_out(hidden_states)
        return hidden_states


class AutoencoderKLHunyuanVideo15(nn.Module):
    def __init__(self, in_channels=3, out_channels=3, latent_channels=2, block_out_channels=(4, 8, 16, 32, 32),
                 layers_per_block=1, spatial_compression_ratio=16, temporal_compression_ratio=4,
                 downsample_match_channel=True, upsample_match_channel=True, scaling_factor=1.03682):
        super().__init__()

        self.encoder = HunyuanVideo15Encoder3D(
            in_channels=in_channels, out_channels=latent_channels * 2, block_out_channels=block_out_channels,
            layers_per_block=layers_per_block, temporal_compression_ratio=temporal_compression_ratio,
            spatial_compression_ratio=spatial_compression_ratio, downsample_match_channel=downsample_match_channel)

        self.decoder = HunyuanVideo15Decoder3D(
            in_channels=latent_channels, out_channels=out_channels,
            block_out_channels=list(reversed(block_out_channels)),
            layers_per_block=layers_per_block, temporal_compression_ratio=temporal_compression_ratio,
            spatial_compression_ratio=spatial_compression_ratio, upsample_match_channel=upsample_match_channel)

        self.spatial_compression_ratio = spatial_compression_ratio
        self.temporal_compression_ratio = temporal_compression_ratio
        self.use_slicing = False
        self.use_tiling = False
        self.tile_sample_min_height = 256
        self.tile_sample_min_width = 256
        self.tile_latent_min_height = self.tile_sample_min_height // spatial_compression_ratio
        self.tile_latent_min_width = self.tile_sample_min_width // spatial_compression_ratio
        self.tile_overlap_factor = 0.25

    def _encode(self, x):
        return self.encoder(x)  # use_tiling is off

    def encode(self, x):
        h = self._encode(x)  # use_slicing is off
        # DiagonalGaussianDistribution(h).mode(): the mean (logvar, std and var are made and unused)
        mean, logvar = torch.chunk(h, 2, dim=1)
        return mean

    def _decode(self, z):
        return self.decoder(z)  # use_tiling is off

    def decode(self, z):
        return self._decode(z)  # use_slicing is off

    def forward(self, sample):
        z = self.encode(sample)
        return self.decode(z)


if __name__ == "__main__":
    capture_once(
        "hunyuanvideo15_vae", AutoencoderKLHunyuanVideo15,
        lambda g: {"sample": torch.randn((1, 3, 5, 32, 16), generator=g)}, sys.argv[1],
        dict(library_source="replica of huggingface/diffusers autoencoder_kl_hunyuanvideo15.py (torch 1.13)",
             note="HunyuanVideo 1.5's 16x/4x VAE at widths 4..32: RMS norms, replicate-padded causal convs, "
                  "space/time-to-channel downsamples with channel-group-averaged shortcuts and a first frame "
                  "packed apart, channel-to-space/time upsamples with repeated-channel shortcuts, an encoder head "
                  "averaging channel groups, a decoder input repeating channels, one-head mid-block attention "
                  "over all cells under a causal frame mask"))
