"""The HunyuanImage-2.1 refiner's VAE (AutoencoderKLHunyuanImageRefiner), reimplemented for torch 1.13 (no diffusers
here), captured small in f32 on CPU as one round trip the way HunyuanImageRefinerPipeline uses it: an image encoded as
the pipeline encodes the image it refines (_encode_vae_image), then those latents decoded as its end decodes.

Follows huggingface/diffusers src/diffusers/models/autoencoders/autoencoder_kl_hunyuanimage_refiner.py at
c3463668af4bac8246dc727759947d757f820c32 (HunyuanImageRefinerCausalConv3d, HunyuanImageRefinerRMS_norm,
HunyuanImageRefinerAttnBlock, HunyuanImageRefinerUpsampleDCAE, HunyuanImageRefinerDownsampleDCAE,
HunyuanImageRefinerResnetBlock, HunyuanImageRefinerMidBlock, HunyuanImageRefinerDownBlock3D,
HunyuanImageRefinerUpBlock3D, HunyuanImageRefinerEncoder3D, HunyuanImageRefinerDecoder3D,
AutoencoderKLHunyuanImageRefiner's _encode/encode/_decode/decode) with src/diffusers/models/autoencoders/vae.py at
04957c2003faa079d73e5a749655ccc0ba4bddbf (DiagonalGaussianDistribution: qwenimage_vae.py's class, plus its sample:
mean + std * randn_tensor(mean.shape, generator)) and activations.py's get_activation("swish") (a new nn.SiLU). The
same module tree, parameter names and shapes, call boundaries and arithmetic line for line. Stand-in for what torch
1.13 lacks: F.scaled_dot_product_attention (run.sdpa, its math path). Untiled, unsliced.

The constructs: causal 3-D convolutions (F.pad replicate, (k//2, k//2) in width and height, (k-1, 0) in time, then an
unpadded Conv3d); RMS norms as F.normalize over the channels times sqrt(C) times a gamma of [C, 1, 1, 1] plus a bias
that is the float 0.0; resnets (norm, SiLU, conv, norm, SiLU, conv, plus a 1x1x1 Conv3d shortcut when the width
changes); one single-head attention over all f·h·w cells in each mid block (q, k, v as [B, 1, L, C]); DC-AE
downsamples (a causal conv to out/factor channels, space-to-channel by view [B, c, f, 1, h, 2, w, 2], permute
(0, 3, 5, 7, 1, 2, 4, 6): channel order (r1, r2, r3, c); on the "temporal" levels the result concatenated with
itself and still r1 = 1, so no frame is merged; plus the input put through the same space-to-channel with
consecutive channel groups averaged); DC-AE upsamples (a causal conv to out·factor channels, channel-to-space by view
[B, r1, r2, r3, c, f, h, w], permute (0, 4, 5, 1, 6, 2, 7, 3); on the "temporal" levels r1 = 1 and the first half
of the channels kept, the shortcut the input put through channel-to-space then repeat_interleave'd; otherwise the
input repeat_interleave'd then put through channel-to-space); the encoder head (mid-block output with consecutive
channel groups averaged, added in place to norm-SiLU-conv_out), the decoder's input (conv_in plus the latent's
channels each repeated).

Pipeline as HunyuanImageRefinerPipeline (src/diffusers/pipelines/hunyuan_image/pipeline_hunyuanimage_refiner.py at
8764ca3b5fe272ae318fbb777c481a20be9d6c61) calls it: image.unsqueeze(2) (one frame), retrieve_latents(vae.encode(image),
generator, sample_mode="sample") (the posterior sampled: chunk into mean and logvar, logvar clamped to [-30, 20], std
= exp(0.5·logvar), mean + std·ε), _reorder_image_tokens (the first latent frame put in front again, then each pair
of frames folded into the channels: [B, C, 1, h, w] -> [B, 2C, 1, h, w]), · scaling_factor; at the end
latents.to(vae.dtype) / scaling_factor, _restore_image_tokens_order (the channels unfolded into frame pairs, the
first frame dropped), vae.decode(latents, return_dict=False)[0], .squeeze(2). Between the two the pipeline runs its
transformer (with noise mixed in, prepare_latents' cond_latents): left out here, so that the reorder and the restore
meet directly. Deviation, around randomness only: upstream draws the posterior's ε inside sample() from the
pipeline's generator (randn_tensor(mean.shape, generator, dtype=parameters.dtype)); here ε is the request's input
posterior_noise, drawn by inputs() from the seeded generator after the image, and sample() takes it in place of the
generator (in bf16 it is the f32 draw cast, as run.py casts inputs).

Tiny config: the refiner's defaults (block_out_channels (128, 256, 512, 1024, 1024), latent_channels 32,
layers_per_block 2, spatial_compression_ratio 16, temporal_compression_ratio 4, scaling_factor 1.03682) at 1/64 width:
block_out_channels (2, 4, 8, 16, 16), so every DC-AE shortcut keeps the released group size / repeat count (encoder
downsamples 2, 2, 4 // 2, 8 // 2; decoder upsamples 8 // 2, 4 // 2, 2, 2); latent_channels 2 (the encoder head's
group 4, released 16; the decoder's input repeat 8, released 32); layers_per_block 1 (so one resnet per encoder
level, two per decoder level); all five levels kept (the 16x compression needs four downsamples). A [1, 3, 32, 16]
image (not square) -> [1, 3, 1, 32, 16] -> moments [1, 4, 1, 2, 1] -> latent [1, 2, 1, 2, 1] (the mid-block
attentions over 2 cells) -> reordered [1, 4, 1, 2, 1] -> restored [1, 2, 1, 2, 1] -> [1, 3, 1, 32, 16] -> [1, 3, 32,
16].

usage: /usr/bin/python3 bench/unseen/replicas/hunyuanimage_refiner_vae.py OUTDIR
REPLICA_DTYPE=bf16 [REPLICA_DEVICE=cuda] as run.py's replicas: the bf16 run, beside the f32 one.
"""
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

import qwenimage_vae
from run import capture_once, sdpa


class DiagonalGaussianDistribution(qwenimage_vae.DiagonalGaussianDistribution):
    """vae.py's DiagonalGaussianDistribution (deterministic=False) with its sample, ε passed in (see the docstring)."""

    def sample(self, noise):
        # randn_tensor(self.mean.shape, generator=generator, device=self.parameters.device,
        #              dtype=self.parameters.dtype)
        sample = noise.to(device=self.parameters.device, dtype=self.parameters.dtype)
        x = self.mean + self.std * sample
        return x


class HunyuanImageRefinerCausalConv3d(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size=3, stride=1, padding=0, dilation=1, bias=True,
                 pad_mode="replicate"):
        super().__init__()
        kernel_size = (kernel_size, kernel_size, kernel_size) if isinstance(kernel_size, int) else kernel_size
        self.pad_mode = pad_mode
        self.time_causal_padding = (
            kernel_size[0] // 2,
            kernel_size[0] // 2,
            kernel_size[1] // 2,
            kernel_size[1] // 2,
            kernel_size[2] - 1,
            0,
        )
        self.conv = nn.Conv3d(in_channels, out_channels, kernel_size, stride, padding, dilation, bias=bias)

    def forward(self, hidden_states):
        hidden_states = F.pad(hidden_states, self.time_causal_padding, mode=self.pad_mode)
        return self.conv(hidden_states)


class HunyuanImageRefinerRMS_norm(nn.Module):
    def __init__(self, dim, channel_first=True, images=True, bias=False):
        super().__init__()
        broadcastable_dims = (1, 1, 1) if not images else (1, 1)
        shape = (dim, *broadcastable_dims) if channel_first else (dim,)
        self.channel_first = channel_first
        self.scale = dim ** 0.5
        self.gamma = nn.Parameter(torch.ones(shape))
        self.bias = nn.Parameter(torch.zeros(shape)) if bias else 0.0

    def forward(self, x):
        return F.normalize(x, dim=(1 if self.channel_first else -1)) * self.scale * self.gamma + self.bias


class HunyuanImageRefinerAttnBlock(nn.Module):
    def __init__(self, in_channels):
        super().__init__()
        self.in_channels = in_channels
        self.norm = HunyuanImageRefinerRMS_norm(in_channels, images=False)
        self.to_q = nn.Conv3d(in_channels, in_channels, kernel_size=1)
        self.to_k = nn.Conv3d(in_channels, in_channels, kernel_size=1)
        self.to_v = nn.Conv3d(in_channels, in_channels, kernel_size=1)
        self.proj_out = nn.Conv3d(in_channels, in_channels, kernel_size=1)

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
        x = sdpa(query, key, value)  # nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=None)
        # batch_size, 1, frames * height * width, channels
        x = x.squeeze(1).reshape(batch_size, frames, height, width, channels).permute(0, 4, 1, 2, 3)
        x = self.proj_out(x)
        return x + identity


class HunyuanImageRefinerUpsampleDCAE(nn.Module):
    def __init__(self, in_channels, out_channels, add_temporal_upsample=True):
        super().__init__()
        factor = 2 * 2 * 2 if add_temporal_upsample else 1 * 2 * 2
        self.conv = HunyuanImageRefinerCausalConv3d(in_channels, out_channels * factor, kernel_size=3)
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
            h = self._dcae_upsample_rearrange(h, r1=1, r2=2, r3=2)
            h = h[:, : h.shape[1] // 2]
            # shortcut computation
            shortcut = self._dcae_upsample_rearrange(x, r1=1, r2=2, r3=2)
            shortcut = shortcut.repeat_interleave(repeats=self.repeats // 2, dim=1)
        else:
            h = self._dcae_upsample_rearrange(h, r1=r1, r2=2, r3=2)
            shortcut = x.repeat_interleave(repeats=self.repeats, dim=1)
            shortcut = self._dcae_upsample_rearrange(shortcut, r1=r1, r2=2, r3=2)
        return h + shortcut


class HunyuanImageRefinerDownsampleDCAE(nn.Module):
    def __init__(self, in_channels, out_channels, add_temporal_downsample=True):
        super().__init__()
        factor = 2 * 2 * 2 if add_temporal_downsample else 1 * 2 * 2
        assert out_channels % factor == 0
        self.conv = HunyuanImageRefinerCausalConv3d(in_channels, out_channels // factor, kernel_size=3)
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
            h = self._dcae_downsample_rearrange(h, r1=1, r2=2, r3=2)
            h = torch.cat([h, h], dim=1)
            # shortcut computation
            shortcut = self._dcae_downsample_rearrange(x, r1=1, r2=2, r3=2)
            B, C, T, H, W = shortcut.shape
            shortcut = shortcut.view(B, h.shape[1], self.group_size // 2, T, H, W).mean(dim=2)
        else:
            h = self._dcae_downsample_rearrange(h, r1=r1, r2=2, r3=2)
            shortcut = self._dcae_downsample_rearrange(x, r1=r1, r2=2, r3=2)
            B, C, T, H, W = shortcut.shape
            shortcut = shortcut.view(B, h.shape[1], self.group_size, T, H, W).mean(dim=2)
        return h + shortcut


class HunyuanImageRefinerResnetBlock(nn.Module):
    def __init__(self, in_channels, out_channels=None, non_linearity="swish"):
        super().__init__()
        out_channels = out_channels or in_channels
        self.nonlinearity = nn.SiLU()  # get_activation("swish")
        self.norm1 = HunyuanImageRefinerRMS_norm(in_channels, images=False)
        self.conv1 = HunyuanImageRefinerCausalConv3d(in_channels, out_channels, kernel_size=3)
        self.norm2 = HunyuanImageRefinerRMS_norm(out_channels, images=False)
        self.conv2 = HunyuanImageRefinerCausalConv3d(out_channels, out_channels, kernel_size=3)
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


class HunyuanImageRefinerMidBlock(nn.Module):
    def __init__(self, in_channels, num_layers=1, add_attention=True):
        super().__init__()
        self.add_attention = add_attention
        resnets = [HunyuanImageRefinerResnetBlock(in_channels=in_channels, out_channels=in_channels)]
        attentions = []
        for _ in range(num_layers):
            if self.add_attention:
                attentions.append(HunyuanImageRefinerAttnBlock(in_channels))
            else:
                attentions.append(None)
            resnets.append(HunyuanImageRefinerResnetBlock(in_channels=in_channels, out_channels=in_channels))
        self.attentions = nn.ModuleList(attentions)
        self.resnets = nn.ModuleList(resnets)

    def forward(self, hidden_states):
        hidden_states = self.resnets[0](hidden_states)
        for attn, resnet in zip(self.attentions, self.resnets[1:]):
            if attn is not None:
                hidden_states = attn(hidden_states)
            hidden_states = resnet(hidden_states)
        return hidden_states


class HunyuanImageRefinerDownBlock3D(nn.Module):
    def __init__(self, in_channels, out_channels, num_layers=1, downsample_out_channels=None,
                 add_temporal_downsample=True):
        super().__init__()
        resnets = []
        for i in range(num_layers):
            in_channels = in_channels if i == 0 else out_channels
            resnets.append(HunyuanImageRefinerResnetBlock(in_channels=in_channels, out_channels=out_channels))
        self.resnets = nn.ModuleList(resnets)
        if downsample_out_channels is not None:
            self.downsamplers = nn.ModuleList([HunyuanImageRefinerDownsampleDCAE(
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


class HunyuanImageRefinerUpBlock3D(nn.Module):
    def __init__(self, in_channels, out_channels, num_layers=1, upsample_out_channels=None,
                 add_temporal_upsample=True):
        super().__init__()
        resnets = []
        for i in range(num_layers):
            input_channels = in_channels if i == 0 else out_channels
            resnets.append(HunyuanImageRefinerResnetBlock(in_channels=input_channels, out_channels=out_channels))
        self.resnets = nn.ModuleList(resnets)
        if upsample_out_channels is not None:
            self.upsamplers = nn.ModuleList([HunyuanImageRefinerUpsampleDCAE(
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


class HunyuanImageRefinerEncoder3D(nn.Module):
    def __init__(self, in_channels=3, out_channels=64, block_out_channels=(128, 256, 512, 1024, 1024),
                 layers_per_block=2, temporal_compression_ratio=4, spatial_compression_ratio=16,
                 downsample_match_channel=True):
        super().__init__()
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.group_size = block_out_channels[-1] // self.out_channels

        self.conv_in = HunyuanImageRefinerCausalConv3d(in_channels, block_out_channels[0], kernel_size=3)
        self.mid_block = None
        self.down_blocks = nn.ModuleList([])

        input_channel = block_out_channels[0]
        for i in range(len(block_out_channels)):
            add_spatial_downsample = i < np.log2(spatial_compression_ratio)
            output_channel = block_out_channels[i]
            if not add_spatial_downsample:
                down_block = HunyuanImageRefinerDownBlock3D(
                    num_layers=layers_per_block, in_channels=input_channel, out_channels=output_channel,
                    downsample_out_channels=None, add_temporal_downsample=False)
                input_channel = output_channel
            else:
                add_temporal_downsample = i >= np.log2(spatial_compression_ratio // temporal_compression_ratio)
                downsample_out_channels = block_out_channels[i + 1] if downsample_match_channel else output_channel
                down_block = HunyuanImageRefinerDownBlock3D(
                    num_layers=layers_per_block, in_channels=input_channel, out_channels=output_channel,
                    downsample_out_channels=downsample_out_channels, add_temporal_downsample=add_temporal_downsample)
                input_channel = downsample_out_channels
            self.down_blocks.append(down_block)

        self.mid_block = HunyuanImageRefinerMidBlock(in_channels=block_out_channels[-1])
        self.norm_out = HunyuanImageRefinerRMS_norm(block_out_channels[-1], images=False)
        self.conv_act = nn.SiLU()
        self.conv_out = HunyuanImageRefinerCausalConv3d(block_out_channels[-1], out_channels, kernel_size=3)

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


class HunyuanImageRefinerDecoder3D(nn.Module):
    def __init__(self, in_channels=32, out_channels=3, block_out_channels=(1024, 1024, 512, 256, 128),
                 layers_per_block=2, spatial_compression_ratio=16, temporal_compression_ratio=4,
                 upsample_match_channel=True):
        super().__init__()
        self.layers_per_block = layers_per_block
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.repeat = block_out_channels[0] // self.in_channels

        self.conv_in = HunyuanImageRefinerCausalConv3d(self.in_channels, block_out_channels[0], kernel_size=3)
        self.up_blocks = nn.ModuleList([])

        # mid
        self.mid_block = HunyuanImageRefinerMidBlock(in_channels=block_out_channels[0])

        # up
        input_channel = block_out_channels[0]
        for i in range(len(block_out_channels)):
            output_channel = block_out_channels[i]
            add_spatial_upsample = i < np.log2(spatial_compression_ratio)
            add_temporal_upsample = i < np.log2(temporal_compression_ratio)
            if add_spatial_upsample or add_temporal_upsample:
                upsample_out_channels = block_out_channels[i + 1] if upsample_match_channel else output_channel
                up_block = HunyuanImageRefinerUpBlock3D(
                    num_layers=self.layers_per_block + 1, in_channels=input_channel, out_channels=output_channel,
                    upsample_out_channels=upsample_out_channels, add_temporal_upsample=add_temporal_upsample)
                input_channel = upsample_out_channels
            else:
                up_block = HunyuanImageRefinerUpBlock3D(
                    num_layers=self.layers_per_block + 1, in_channels=input_channel, out_channels=output_channel,
                    upsample_out_channels=None, add_temporal_upsample=False)
                input_channel = output_channel
            self.up_blocks.append(up_block)

        # out
        self.norm_out = HunyuanImageRefinerRMS_norm(block_out_channels[-1], images=False)
        self.conv_act = nn.SiLU()
        self.conv_out = HunyuanImageRefinerCausalConv3d(block_out_channels[-1], out_channels, kernel_size=3)

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


class AutoencoderKLHunyuanImageRefiner(nn.Module):
    def __init__(self, in_channels=3, out_channels=3, latent_channels=2, block_out_channels=(2, 4, 8, 16, 16),
                 layers_per_block=1, spatial_compression_ratio=16, temporal_compression_ratio=4,
                 downsample_match_channel=True, upsample_match_channel=True, scaling_factor=1.03682):
        super().__init__()
        self.scaling_factor = scaling_factor  # self.config.scaling_factor
        self.latent_channels = latent_channels
        self.encoder = HunyuanImageRefinerEncoder3D(
            in_channels=in_channels, out_channels=latent_channels * 2, block_out_channels=block_out_channels,
            layers_per_block=layers_per_block, temporal_compression_ratio=temporal_compression_ratio,
            spatial_compression_ratio=spatial_compression_ratio, downsample_match_channel=downsample_match_channel)
        self.decoder = HunyuanImageRefinerDecoder3D(
            in_channels=latent_channels, out_channels=out_channels, block_out_channels=list(reversed(block_out_channels)),
            layers_per_block=layers_per_block, temporal_compression_ratio=temporal_compression_ratio,
            spatial_compression_ratio=spatial_compression_ratio, upsample_match_channel=upsample_match_channel)
        self.spatial_compression_ratio = spatial_compression_ratio
        self.temporal_compression_ratio = temporal_compression_ratio
        self.use_slicing = False
        self.use_tiling = False
        self.tile_sample_min_height = 256
        self.tile_sample_min_width = 256
        self.tile_sample_stride_height = 192
        self.tile_sample_stride_width = 192
        self.tile_overlap_factor = 0.25

    def _encode(self, x):
        x = self.encoder(x)  # no tiling (below tile_sample_min_height / width)
        return x

    def encode(self, x, return_dict=True):
        h = self._encode(x)  # no slicing
        posterior = DiagonalGaussianDistribution(h)
        return (posterior,)  # AutoencoderKLOutput(latent_dist=posterior)

    def _decode(self, z):
        dec = self.decoder(z)  # no tiling
        return dec

    def decode(self, z, return_dict=True):
        decoded = self._decode(z)  # no slicing
        return (decoded,)

    def forward(self, sample, sample_posterior=False, return_dict=True, generator=None):
        x = sample
        posterior = self.encode(x)[0]
        z = posterior.mode()  # sample_posterior False
        dec = self.decode(z)
        return dec


def _reorder_image_tokens(image_latents):
    image_latents = torch.cat((image_latents[:, :, :1], image_latents), dim=2)
    batch_size, num_latent_channels, num_latent_frames, latent_height, latent_width = image_latents.shape
    image_latents = image_latents.permute(0, 2, 1, 3, 4)
    image_latents = image_latents.reshape(
        batch_size, num_latent_frames // 2, num_latent_channels * 2, latent_height, latent_width)
    image_latents = image_latents.permute(0, 2, 1, 3, 4).contiguous()
    return image_latents


def _restore_image_tokens_order(latents):
    batch_size, num_latent_channels, num_latent_frames, latent_height, latent_width = latents.shape
    latents = latents.permute(0, 2, 1, 3, 4)  # B, F, C, H, W
    latents = latents.reshape(
        batch_size, num_latent_frames * 2, num_latent_channels // 2, latent_height, latent_width)  # B, F*2, C//2, H, W
    latents = latents.permute(0, 2, 1, 3, 4)  # B, C//2, F*2, H, W
    latents = latents[:, :, 1:]  # remove first frame slice
    return latents


def pipeline_round_trip(vae, image, posterior_noise):
    # HunyuanImageRefinerPipeline.__call__, step 3 (image preprocessed to [-1, 1] by image_processor)
    image = image.unsqueeze(2).to(dtype=next(vae.parameters()).dtype)
    # _encode_vae_image: retrieve_latents(vae.encode(image), generator=generator, sample_mode="sample")
    image_latents = vae.encode(image)[0].sample(posterior_noise)
    image_latents = _reorder_image_tokens(image_latents)
    image_latents = image_latents * vae.scaling_factor
    # the end of __call__, output_type "pil" (the transformer's denoising left out)
    latents = image_latents
    latents = latents.to(next(vae.parameters()).dtype) / vae.scaling_factor
    latents = _restore_image_tokens_order(latents)
    image = vae.decode(latents, return_dict=False)[0]
    return image.squeeze(2)  # image_processor.postprocess(image.squeeze(2), ...)


def build():
    model = AutoencoderKLHunyuanImageRefiner()
    model.forward = lambda image, posterior_noise: pipeline_round_trip(model, image, posterior_noise)
    return model


def inputs(g):
    image = torch.randn((1, 3, 32, 16), generator=g)
    return {"image": image, "posterior_noise": torch.randn((1, 2, 1, 2, 1), generator=g)}


if __name__ == "__main__":
    capture_once(
        "hunyuanimage_refiner_vae", build, inputs, sys.argv[1],
        dict(library_source="replica of huggingface/diffusers autoencoder_kl_hunyuanimage_refiner.py@c3463668af4b "
                            "(vae.py's DiagonalGaussianDistribution) and pipeline_hunyuanimage_refiner.py@8764ca3b5fe2 "
                            "(torch 1.13)",
             note="HunyuanImage-2.1 refiner's VAE at widths 2..16 as its pipeline uses it on one frame: causal "
                  "3-D convs (replicate padding), F.normalize RMS norms, DC-AE space-to-channel downsamples with "
                  "group-averaged shortcuts (self-concatenated on 'temporal' levels), channel-to-space upsamples "
                  "with repeated shortcuts (half the channels kept on 'temporal' levels), single-head mid-block "
                  "attention, the posterior sampled with a given eps, the pipeline's frame-pair token reorder and "
                  "scaling, then restored and decoded"))
