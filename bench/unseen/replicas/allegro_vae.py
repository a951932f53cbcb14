"""Rhymes AI Allegro's video VAE (AutoencoderKLAllegro), reimplemented for torch 1.13 (no diffusers here), captured
small in f32 on CPU as one forward (encode, the posterior's mode, decode) the way diffusers runs it: tiled, in
overlapping (frames, height, width) cubes, each cube through the encoder (decoder) alone, the cubes' results
weighted by linear ramps over their overlaps and summed into the whole.

Follows huggingface/diffusers src/diffusers/models/autoencoders/autoencoder_kl_allegro.py at
806e8e66fb012dcf1dbe7b5b3a79952995f8fa0d line for line: AllegroTemporalConvLayer (the [B*F, C, H, W] rows regrouped
[B, C, F, H, W]; four GroupNorm-SiLU-(Dropout)-Conv3d Sequentials conv1..conv4, each input but the up/down conv1's
padded in time by repeating its first and last frame once (_pad_temporal_dim: two torch.cat), kernels (3, 1, 1),
zero time padding; the down variant (stride 3: (2, 3, 3) conv1 of time stride 2, then (3, 3, 3) convs with (0, 1, 1)
padding) adds the input's even frames [:, :, ::2]; the up variant's conv1 is (1, 3, 3) to twice the width, its
channels split (2, C) and interleaved into time (unflatten, permute (0, 2, 3, 1, 4, 5), flatten), and it adds the
input repeat_interleave'd 2x in time; the rows flattened back to [B*F, C, H, W]), AllegroDownBlock3D /
AllegroUpBlock3D (per layer a ResnetBlock2D on the frames as images then a temporal conv layer; the optional
temporal down/up layer; Downsample2D (padding 0: zero pad (0, 1, 0, 1), 3x3 conv stride 2) / Upsample2D (nearest x2
then 3x3 conv)), AllegroMidBlock3DConv (resnet, temporal conv; then per layer one-head Attention over the H*W cells
of each frame, resnet, temporal conv), AllegroEncoder3D / AllegroDecoder3D (per-frame conv_in, a residual (3, 1, 1)
temp_conv_in, blocks, GroupNorm-SiLU, a residual (3, 1, 1) temp_conv_out, per-frame conv_out; the decoder casts the
mid block's output to the up blocks' dtype) and AutoencoderKLAllegro (forward with sample_posterior False: encode ->
_encode -> tiled_encode, DiagonalGaussianDistribution(h).mode() (vae.py's: the first half of the channels; logvar,
std and var are made and unused), decode -> _decode -> tiled_decode, which returns the video as [B, F, C, H, W]);
_prepare_for_blend as upstream (in place on a view of the stacked tile results: the head overlap times
arange(o)/o, the tail times 1 - arange(o)/o, per axis; f32 ramps, so a bf16 tile is promoted then stored back).
Imported, being the same diffusers classes: ResnetBlock2D, Downsample2D, Upsample2D (sd_unet.py), Attention with
norm groups, residual connection, bias, 1 head (unet2d.py; F.scaled_dot_product_attention as its math path, run.sdpa:
torch 1.13 lacks it). The same module tree, parameter names and shapes, call boundaries and arithmetic.

The path taken: upstream's _encode / _decode raise NotImplementedError unless use_tiling (enable_tiling(); the
released class has no untiled path), so tiling is on, local_batch_size 1 (upstream's fixed value: one cube per
encoder/decoder call, copied into a zeroed [1, C, kernel] buffer first), no slicing.

Tiny config: block_out_channels (128, 256, 512, 512) / 64 = (2, 4, 8, 8), all four levels kept (spatial ratio 8;
temporal down in blocks 0, 1, up in blocks 1, 2: ratio 4), latent_channels 4, layers_per_block 1 (released 2; the
decoder's levels then hold 2 resnets / temporal layers), norm_num_groups 2 (released 32; every GroupNorm here takes
norm_num_groups: group sizes 1, 2, 4, 4 against 4, 8, 16, 16). Tiles: upstream's kernel is (sample_frames,
sample_size, sample_size) = (24, 320, 320) (sample_frames a local 24, sample_size the config's 320) with overlaps
(tile_overlap_t, _h, _w) = (8, 120, 80) px (hard-coded attributes), stride (16, 200, 240); latent kernel (6, 40, 40),
stride (4, 25, 30), overlap (2, 15, 10). Shrunk here to the smallest cube that still overlaps on every axis: set
after construction (as __init__ derives them) sample_frames 8, sample_size 16, overlaps (4, 8, 8) px, so stride (4,
8, 8), latent kernel (2, 2, 2), latent stride (1, 1, 1), latent overlap (1, 1, 1) (h and w overlaps equal: a 16 px
cube leaves no other multiple of 8; the latent ramps are then [0] at a head and [1] at a tail, the pixel ramps
k/4 in time and k/8 in space). A [1, 3, 8, 16, 24] clip: 2 cubes of [3, 8, 16, 16] side by side in width (the w
blend ramps taken; time and height one cube each); latent [1, 8, 2, 2, 3] -> mean [1, 4, 2, 2, 3] -> 2 latent cubes
[4, 2, 2, 2] -> video [1, 8, 3, 16, 24] (f32 trace 13.8 MB: each cube costs ~6.7 MB). --all-axes (case
allegro_vae_all): a [1, 3, 12, 24, 24] clip, 2 x 2 x 2 cubes, every head and tail ramp on every axis (54 MB).

usage: /usr/bin/python3 bench/unseen/replicas/allegro_vae.py OUTDIR
REPLICA_DTYPE=bf16 [REPLICA_DEVICE=cuda] as run.py's replicas: the bf16 run, beside the f32 one.
"""
import math
import sys
import types

import torch
import torch.nn as nn

from run import capture_once
from sd_unet import Downsample2D, ResnetBlock2D, Upsample2D
from unet2d import Attention

SAMPLE_FRAMES = 8  # upstream: 24 (a local in __init__)
SAMPLE_SIZE = 16  # upstream: 320 (config sample_size)
TILE_OVERLAP = (4, 8, 8)  # upstream: tile_overlap_t 8, tile_overlap_h 120, tile_overlap_w 80
ALL_AXES = "--all-axes" in sys.argv
# two cubes side by side in width; --all-axes: 2 x 2 x 2 cubes (frames, height, width), a 54 MB f32 trace
CLIP = (1, 3, 12, 24, 24) if ALL_AXES else (1, 3, 8, 16, 24)


class AllegroTemporalConvLayer(nn.Module):
    def __init__(self, in_dim, out_dim=None, dropout=0.0, norm_num_groups=32, up_sample=False, down_sample=False,
                 stride=1):
        super().__init__()
        out_dim = out_dim or in_dim
        pad_h = pad_w = int((stride - 1) * 0.5)
        pad_t = 0
        self.down_sample = down_sample
        self.up_sample = up_sample
        if down_sample:
            self.conv1 = nn.Sequential(
                nn.GroupNorm(norm_num_groups, in_dim),
                nn.SiLU(),
                nn.Conv3d(in_dim, out_dim, (2, stride, stride), stride=(2, 1, 1), padding=(0, pad_h, pad_w)),
            )
        elif up_sample:
            self.conv1 = nn.Sequential(
                nn.GroupNorm(norm_num_groups, in_dim),
                nn.SiLU(),
                nn.Conv3d(in_dim, out_dim * 2, (1, stride, stride), padding=(0, pad_h, pad_w)),
            )
        else:
            self.conv1 = nn.Sequential(
                nn.GroupNorm(norm_num_groups, in_dim),
                nn.SiLU(),
                nn.Conv3d(in_dim, out_dim, (3, stride, stride), padding=(pad_t, pad_h, pad_w)),
            )
        self.conv2 = nn.Sequential(
            nn.GroupNorm(norm_num_groups, out_dim),
            nn.SiLU(),
            nn.Dropout(dropout),
            nn.Conv3d(out_dim, in_dim, (3, stride, stride), padding=(pad_t, pad_h, pad_w)),
        )
        self.conv3 = nn.Sequential(
            nn.GroupNorm(norm_num_groups, out_dim),
            nn.SiLU(),
            nn.Dropout(dropout),
            nn.Conv3d(out_dim, in_dim, (3, stride, stride), padding=(pad_t, pad_h, pad_h)),
        )
        self.conv4 = nn.Sequential(
            nn.GroupNorm(norm_num_groups, out_dim),
            nn.SiLU(),
            nn.Conv3d(out_dim, in_dim, (3, stride, stride), padding=(pad_t, pad_h, pad_h)),
        )

    @staticmethod
    def _pad_temporal_dim(hidden_states):
        hidden_states = torch.cat((hidden_states[:, :, 0:1], hidden_states), dim=2)
        hidden_states = torch.cat((hidden_states, hidden_states[:, :, -1:]), dim=2)
        return hidden_states

    def forward(self, hidden_states, batch_size):
        hidden_states = hidden_states.unflatten(0, (batch_size, -1)).permute(0, 2, 1, 3, 4)
        if self.down_sample:
            identity = hidden_states[:, :, ::2]
        elif self.up_sample:
            identity = hidden_states.repeat_interleave(2, dim=2)
        else:
            identity = hidden_states
        if self.down_sample or self.up_sample:
            hidden_states = self.conv1(hidden_states)
        else:
            hidden_states = self._pad_temporal_dim(hidden_states)
            hidden_states = self.conv1(hidden_states)
        if self.up_sample:
            hidden_states = hidden_states.unflatten(1, (2, -1)).permute(0, 2, 3, 1, 4, 5).flatten(2, 3)
        hidden_states = self._pad_temporal_dim(hidden_states)
        hidden_states = self.conv2(hidden_states)
        hidden_states = self._pad_temporal_dim(hidden_states)
        hidden_states = self.conv3(hidden_states)
        hidden_states = self._pad_temporal_dim(hidden_states)
        hidden_states = self.conv4(hidden_states)
        hidden_states = identity + hidden_states
        hidden_states = hidden_states.permute(0, 2, 1, 3, 4).flatten(0, 1)
        return hidden_states


def _resnet(in_channels, out_channels, eps, groups):
    """ResnetBlock2D(temb_channels=None, eps, groups, dropout 0, time_embedding_norm "default", non_linearity
    "silu"/"swish", output_scale_factor 1, pre_norm True), as every Allegro block builds it."""
    return ResnetBlock2D(in_channels, out_channels, None, groups, eps=eps)


class AllegroDownBlock3D(nn.Module):
    def __init__(self, in_channels, out_channels, dropout=0.0, num_layers=1, resnet_eps=1e-6, resnet_groups=32,
                 spatial_downsample=True, temporal_downsample=False, downsample_padding=1):
        super().__init__()
        resnets = []
        temp_convs = []
        for i in range(num_layers):
            in_channels = in_channels if i == 0 else out_channels
            resnets.append(_resnet(in_channels, out_channels, resnet_eps, resnet_groups))
            temp_convs.append(AllegroTemporalConvLayer(out_channels, out_channels, dropout=0.1,
                                                       norm_num_groups=resnet_groups))
        self.resnets = nn.ModuleList(resnets)
        self.temp_convs = nn.ModuleList(temp_convs)
        if temporal_downsample:
            self.temp_convs_down = AllegroTemporalConvLayer(out_channels, out_channels, dropout=0.1,
                                                            norm_num_groups=resnet_groups, down_sample=True, stride=3)
        self.add_temp_downsample = temporal_downsample
        if spatial_downsample:
            # Downsample2D(out_channels, use_conv=True, out_channels=out_channels, padding=0, name="op")
            self.downsamplers = nn.ModuleList([Downsample2D(out_channels, use_conv=True, padding=downsample_padding)])
        else:
            self.downsamplers = None

    def forward(self, hidden_states):
        batch_size = hidden_states.shape[0]
        hidden_states = hidden_states.permute(0, 2, 1, 3, 4).flatten(0, 1)
        for resnet, temp_conv in zip(self.resnets, self.temp_convs):
            hidden_states = resnet(hidden_states, temb=None)
            hidden_states = temp_conv(hidden_states, batch_size=batch_size)
        if self.add_temp_downsample:
            hidden_states = self.temp_convs_down(hidden_states, batch_size=batch_size)
        if self.downsamplers is not None:
            for downsampler in self.downsamplers:
                hidden_states = downsampler(hidden_states)
        hidden_states = hidden_states.unflatten(0, (batch_size, -1)).permute(0, 2, 1, 3, 4)
        return hidden_states


class AllegroUpBlock3D(nn.Module):
    def __init__(self, in_channels, out_channels, dropout=0.0, num_layers=1, resnet_eps=1e-6, resnet_groups=32,
                 spatial_upsample=True, temporal_upsample=False):
        super().__init__()
        resnets = []
        temp_convs = []
        for i in range(num_layers):
            input_channels = in_channels if i == 0 else out_channels
            resnets.append(_resnet(input_channels, out_channels, resnet_eps, resnet_groups))
            temp_convs.append(AllegroTemporalConvLayer(out_channels, out_channels, dropout=0.1,
                                                       norm_num_groups=resnet_groups))
        self.resnets = nn.ModuleList(resnets)
        self.temp_convs = nn.ModuleList(temp_convs)
        self.add_temp_upsample = temporal_upsample
        if temporal_upsample:
            self.temp_conv_up = AllegroTemporalConvLayer(out_channels, out_channels, dropout=0.1,
                                                         norm_num_groups=resnet_groups, up_sample=True, stride=3)
        if spatial_upsample:
            self.upsamplers = nn.ModuleList([Upsample2D(out_channels, use_conv=True)])
        else:
            self.upsamplers = None

    def forward(self, hidden_states):
        batch_size = hidden_states.shape[0]
        hidden_states = hidden_states.permute(0, 2, 1, 3, 4).flatten(0, 1)
        for resnet, temp_conv in zip(self.resnets, self.temp_convs):
            hidden_states = resnet(hidden_states, temb=None)
            hidden_states = temp_conv(hidden_states, batch_size=batch_size)
        if self.add_temp_upsample:
            hidden_states = self.temp_conv_up(hidden_states, batch_size=batch_size)
        if self.upsamplers is not None:
            for upsampler in self.upsamplers:
                hidden_states = upsampler(hidden_states)
        hidden_states = hidden_states.unflatten(0, (batch_size, -1)).permute(0, 2, 1, 3, 4)
        return hidden_states


class AllegroMidBlock3DConv(nn.Module):
    def __init__(self, in_channels, temb_channels=None, dropout=0.0, num_layers=1, resnet_eps=1e-6, resnet_groups=32,
                 add_attention=True, attention_head_dim=1, output_scale_factor=1.0):
        super().__init__()
        resnets = [_resnet(in_channels, in_channels, resnet_eps, resnet_groups)]
        temp_convs = [AllegroTemporalConvLayer(in_channels, in_channels, dropout=0.1, norm_num_groups=resnet_groups)]
        attentions = []
        if attention_head_dim is None:
            attention_head_dim = in_channels
        for _ in range(num_layers):
            if add_attention:
                # Attention(in_channels, heads=in_channels // attention_head_dim, dim_head=attention_head_dim,
                # rescale_output_factor=1, eps=resnet_eps, norm_num_groups=resnet_groups, residual_connection=True,
                # bias=True, upcast_softmax=True, _from_deprecated_attn_block=True)
                attentions.append(Attention(in_channels, in_channels // attention_head_dim, attention_head_dim,
                                            resnet_groups, eps=resnet_eps))
            else:
                attentions.append(None)
            resnets.append(_resnet(in_channels, in_channels, resnet_eps, resnet_groups))
            temp_convs.append(AllegroTemporalConvLayer(in_channels, in_channels, dropout=0.1,
                                                       norm_num_groups=resnet_groups))
        self.resnets = nn.ModuleList(resnets)
        self.temp_convs = nn.ModuleList(temp_convs)
        self.attentions = nn.ModuleList(attentions)

    def forward(self, hidden_states):
        batch_size = hidden_states.shape[0]
        hidden_states = hidden_states.permute(0, 2, 1, 3, 4).flatten(0, 1)
        hidden_states = self.resnets[0](hidden_states, temb=None)
        hidden_states = self.temp_convs[0](hidden_states, batch_size=batch_size)
        for attn, resnet, temp_conv in zip(self.attentions, self.resnets[1:], self.temp_convs[1:]):
            hidden_states = attn(hidden_states)
            hidden_states = resnet(hidden_states, temb=None)
            hidden_states = temp_conv(hidden_states, batch_size=batch_size)
        hidden_states = hidden_states.unflatten(0, (batch_size, -1)).permute(0, 2, 1, 3, 4)
        return hidden_states


class AllegroEncoder3D(nn.Module):
    def __init__(self, in_channels=3, out_channels=3, down_block_types=("AllegroDownBlock3D",) * 4,
                 block_out_channels=(128, 256, 512, 512), temporal_downsample_blocks=(True, True, False, False),
                 layers_per_block=2, norm_num_groups=32, act_fn="silu", double_z=True):
        super().__init__()
        self.conv_in = nn.Conv2d(in_channels, block_out_channels[0], kernel_size=3, stride=1, padding=1)
        self.temp_conv_in = nn.Conv3d(in_channels=block_out_channels[0], out_channels=block_out_channels[0],
                                      kernel_size=(3, 1, 1), padding=(1, 0, 0))
        self.down_blocks = nn.ModuleList([])
        output_channel = block_out_channels[0]
        for i, down_block_type in enumerate(down_block_types):
            input_channel = output_channel
            output_channel = block_out_channels[i]
            is_final_block = i == len(block_out_channels) - 1
            if down_block_type != "AllegroDownBlock3D":
                raise ValueError("Invalid `down_block_type` encountered. Must be `AllegroDownBlock3D`")
            self.down_blocks.append(AllegroDownBlock3D(
                num_layers=layers_per_block, in_channels=input_channel, out_channels=output_channel,
                spatial_downsample=not is_final_block, temporal_downsample=temporal_downsample_blocks[i],
                resnet_eps=1e-6, downsample_padding=0, resnet_groups=norm_num_groups))
        self.mid_block = AllegroMidBlock3DConv(in_channels=block_out_channels[-1], resnet_eps=1e-6,
                                               output_scale_factor=1, attention_head_dim=block_out_channels[-1],
                                               resnet_groups=norm_num_groups, temb_channels=None)
        self.conv_norm_out = nn.GroupNorm(num_channels=block_out_channels[-1], num_groups=norm_num_groups, eps=1e-6)
        self.conv_act = nn.SiLU()
        conv_out_channels = 2 * out_channels if double_z else out_channels
        self.temp_conv_out = nn.Conv3d(block_out_channels[-1], block_out_channels[-1], (3, 1, 1), padding=(1, 0, 0))
        self.conv_out = nn.Conv2d(block_out_channels[-1], conv_out_channels, 3, padding=1)

    def forward(self, sample):
        batch_size = sample.shape[0]
        sample = sample.permute(0, 2, 1, 3, 4).flatten(0, 1)
        sample = self.conv_in(sample)
        sample = sample.unflatten(0, (batch_size, -1)).permute(0, 2, 1, 3, 4)
        residual = sample
        sample = self.temp_conv_in(sample)
        sample = sample + residual
        for down_block in self.down_blocks:
            sample = down_block(sample)
        sample = self.mid_block(sample)
        sample = sample.permute(0, 2, 1, 3, 4).flatten(0, 1)
        sample = self.conv_norm_out(sample)
        sample = self.conv_act(sample)
        sample = sample.unflatten(0, (batch_size, -1)).permute(0, 2, 1, 3, 4)
        residual = sample
        sample = self.temp_conv_out(sample)
        sample = sample + residual
        sample = sample.permute(0, 2, 1, 3, 4).flatten(0, 1)
        sample = self.conv_out(sample)
        sample = sample.unflatten(0, (batch_size, -1)).permute(0, 2, 1, 3, 4)
        return sample


class AllegroDecoder3D(nn.Module):
    def __init__(self, in_channels=4, out_channels=3, up_block_types=("AllegroUpBlock3D",) * 4,
                 temporal_upsample_blocks=(False, True, True, False), block_out_channels=(128, 256, 512, 512),
                 layers_per_block=2, norm_num_groups=32, act_fn="silu", norm_type="group"):
        super().__init__()
        assert norm_type == "group"  # the only type AutoencoderKLAllegro builds (no SpatialNorm)
        self.conv_in = nn.Conv2d(in_channels, block_out_channels[-1], kernel_size=3, stride=1, padding=1)
        self.temp_conv_in = nn.Conv3d(block_out_channels[-1], block_out_channels[-1], (3, 1, 1), padding=(1, 0, 0))
        self.mid_block = None
        self.up_blocks = nn.ModuleList([])
        self.mid_block = AllegroMidBlock3DConv(in_channels=block_out_channels[-1], resnet_eps=1e-6,
                                               output_scale_factor=1, attention_head_dim=block_out_channels[-1],
                                               resnet_groups=norm_num_groups, temb_channels=None)
        reversed_block_out_channels = list(reversed(block_out_channels))
        output_channel = reversed_block_out_channels[0]
        for i, up_block_type in enumerate(up_block_types):
            prev_output_channel = output_channel
            output_channel = reversed_block_out_channels[i]
            is_final_block = i == len(block_out_channels) - 1
            if up_block_type != "AllegroUpBlock3D":
                raise ValueError("Invalid `UP_block_type` encountered. Must be `AllegroUpBlock3D`")
            self.up_blocks.append(AllegroUpBlock3D(
                num_layers=layers_per_block + 1, in_channels=prev_output_channel, out_channels=output_channel,
                spatial_upsample=not is_final_block, temporal_upsample=temporal_upsample_blocks[i], resnet_eps=1e-6,
                resnet_groups=norm_num_groups))
            prev_output_channel = output_channel
        self.conv_norm_out = nn.GroupNorm(num_channels=block_out_channels[0], num_groups=norm_num_groups, eps=1e-6)
        self.conv_act = nn.SiLU()
        self.temp_conv_out = nn.Conv3d(block_out_channels[0], block_out_channels[0], (3, 1, 1), padding=(1, 0, 0))
        self.conv_out = nn.Conv2d(block_out_channels[0], out_channels, 3, padding=1)

    def forward(self, sample):
        batch_size = sample.shape[0]
        sample = sample.permute(0, 2, 1, 3, 4).flatten(0, 1)
        sample = self.conv_in(sample)
        sample = sample.unflatten(0, (batch_size, -1)).permute(0, 2, 1, 3, 4)
        residual = sample
        sample = self.temp_conv_in(sample)
        sample = sample + residual
        upscale_dtype = next(iter(self.up_blocks.parameters())).dtype
        sample = self.mid_block(sample)
        sample = sample.to(upscale_dtype)
        for up_block in self.up_blocks:
            sample = up_block(sample)
        sample = sample.permute(0, 2, 1, 3, 4).flatten(0, 1)
        sample = self.conv_norm_out(sample)
        sample = self.conv_act(sample)
        sample = sample.unflatten(0, (batch_size, -1)).permute(0, 2, 1, 3, 4)
        residual = sample
        sample = self.temp_conv_out(sample)
        sample = sample + residual
        sample = sample.permute(0, 2, 1, 3, 4).flatten(0, 1)
        sample = self.conv_out(sample)
        sample = sample.unflatten(0, (batch_size, -1)).permute(0, 2, 1, 3, 4)
        return sample


class AutoencoderKLAllegro(nn.Module):
    def __init__(self, in_channels=3, out_channels=3, down_block_types=("AllegroDownBlock3D",) * 4,
                 up_block_types=("AllegroUpBlock3D",) * 4, block_out_channels=(128, 256, 512, 512),
                 temporal_downsample_blocks=(True, True, False, False),
                 temporal_upsample_blocks=(False, True, True, False), latent_channels=4, layers_per_block=2,
                 act_fn="silu", norm_num_groups=32, temporal_compression_ratio=4, sample_size=320,
                 scaling_factor=0.13, force_upcast=True):
        super().__init__()
        # register_to_config: the values tiled_encode / tiled_decode read back
        self.config = types.SimpleNamespace(latent_channels=latent_channels, out_channels=out_channels,
                                            temporal_compression_ratio=temporal_compression_ratio)
        self.encoder = AllegroEncoder3D(
            in_channels=in_channels, out_channels=latent_channels, down_block_types=down_block_types,
            temporal_downsample_blocks=temporal_downsample_blocks, block_out_channels=block_out_channels,
            layers_per_block=layers_per_block, act_fn=act_fn, norm_num_groups=norm_num_groups, double_z=True)
        self.decoder = AllegroDecoder3D(
            in_channels=latent_channels, out_channels=out_channels, up_block_types=up_block_types,
            temporal_upsample_blocks=temporal_upsample_blocks, block_out_channels=block_out_channels,
            layers_per_block=layers_per_block, norm_num_groups=norm_num_groups, act_fn=act_fn)
        self.quant_conv = nn.Conv2d(2 * latent_channels, 2 * latent_channels, 1)
        self.post_quant_conv = nn.Conv2d(latent_channels, latent_channels, 1)
        self.use_slicing = False
        self.use_tiling = False
        self.spatial_compression_ratio = 2 ** (len(block_out_channels) - 1)
        self.tile_overlap_t = 8
        self.tile_overlap_h = 120
        self.tile_overlap_w = 80
        sample_frames = 24
        self.kernel = (sample_frames, sample_size, sample_size)
        self.stride = (sample_frames - self.tile_overlap_t, sample_size - self.tile_overlap_h,
                       sample_size - self.tile_overlap_w)

    def enable_tiling(self):
        self.use_tiling = True

    def _encode(self, x):
        if self.use_tiling:
            return self.tiled_encode(x)
        raise NotImplementedError("Encoding without tiling has not been implemented yet.")

    def encode(self, x):
        if self.use_slicing and x.shape[0] > 1:
            encoded_slices = [self._encode(x_slice) for x_slice in x.split(1)]
            h = torch.cat(encoded_slices)
        else:
            h = self._encode(x)
        return h  # DiagonalGaussianDistribution(h)

    def _decode(self, z):
        if self.use_tiling:
            return self.tiled_decode(z)
        raise NotImplementedError("Decoding without tiling has not been implemented yet.")

    def decode(self, z):
        if self.use_slicing and z.shape[0] > 1:
            decoded_slices = [self._decode(z_slice) for z_slice in z.split(1)]
            decoded = torch.cat(decoded_slices)
        else:
            decoded = self._decode(z)
        return decoded

    def tiled_encode(self, x):
        local_batch_size = 1
        rs = self.spatial_compression_ratio
        rt = self.config.temporal_compression_ratio
        batch_size, num_channels, num_frames, height, width = x.shape
        output_num_frames = math.floor((num_frames - self.kernel[0]) / self.stride[0]) + 1
        output_height = math.floor((height - self.kernel[1]) / self.stride[1]) + 1
        output_width = math.floor((width - self.kernel[2]) / self.stride[2]) + 1
        count = 0
        output_latent = x.new_zeros((output_num_frames * output_height * output_width,
                                     2 * self.config.latent_channels, self.kernel[0] // rt, self.kernel[1] // rs,
                                     self.kernel[2] // rs))
        vae_batch_input = x.new_zeros((local_batch_size, num_channels, self.kernel[0], self.kernel[1], self.kernel[2]))
        for i in range(output_num_frames):
            for j in range(output_height):
                for k in range(output_width):
                    n_start, n_end = i * self.stride[0], i * self.stride[0] + self.kernel[0]
                    h_start, h_end = j * self.stride[1], j * self.stride[1] + self.kernel[1]
                    w_start, w_end = k * self.stride[2], k * self.stride[2] + self.kernel[2]
                    video_cube = x[:, :, n_start:n_end, h_start:h_end, w_start:w_end]
                    vae_batch_input[count % local_batch_size] = video_cube
                    if (count % local_batch_size == local_batch_size - 1
                            or count == output_num_frames * output_height * output_width - 1):
                        latent = self.encoder(vae_batch_input)
                        if (count == output_num_frames * output_height * output_width - 1
                                and count % local_batch_size != local_batch_size - 1):
                            output_latent[count - count % local_batch_size:] = latent[: count % local_batch_size + 1]
                        else:
                            output_latent[count - local_batch_size + 1: count + 1] = latent
                        vae_batch_input = x.new_zeros(
                            (local_batch_size, num_channels, self.kernel[0], self.kernel[1], self.kernel[2]))
                    count += 1
        latent = x.new_zeros((batch_size, 2 * self.config.latent_channels, num_frames // rt, height // rs,
                              width // rs))
        output_kernel = self.kernel[0] // rt, self.kernel[1] // rs, self.kernel[2] // rs
        output_stride = self.stride[0] // rt, self.stride[1] // rs, self.stride[2] // rs
        output_overlap = (output_kernel[0] - output_stride[0], output_kernel[1] - output_stride[1],
                          output_kernel[2] - output_stride[2])
        for i in range(output_num_frames):
            n_start, n_end = i * output_stride[0], i * output_stride[0] + output_kernel[0]
            for j in range(output_height):
                h_start, h_end = j * output_stride[1], j * output_stride[1] + output_kernel[1]
                for k in range(output_width):
                    w_start, w_end = k * output_stride[2], k * output_stride[2] + output_kernel[2]
                    latent_mean = _prepare_for_blend(
                        (i, output_num_frames, output_overlap[0]),
                        (j, output_height, output_overlap[1]),
                        (k, output_width, output_overlap[2]),
                        output_latent[i * output_height * output_width + j * output_width + k].unsqueeze(0),
                    )
                    latent[:, :, n_start:n_end, h_start:h_end, w_start:w_end] += latent_mean
        latent = latent.permute(0, 2, 1, 3, 4).flatten(0, 1)
        latent = self.quant_conv(latent)
        latent = latent.unflatten(0, (batch_size, -1)).permute(0, 2, 1, 3, 4)
        return latent

    def tiled_decode(self, z):
        local_batch_size = 1
        rs = self.spatial_compression_ratio
        rt = self.config.temporal_compression_ratio
        latent_kernel = self.kernel[0] // rt, self.kernel[1] // rs, self.kernel[2] // rs
        latent_stride = self.stride[0] // rt, self.stride[1] // rs, self.stride[2] // rs
        batch_size, num_channels, num_frames, height, width = z.shape
        z = z.permute(0, 2, 1, 3, 4).flatten(0, 1)
        z = self.post_quant_conv(z)
        z = z.unflatten(0, (batch_size, -1)).permute(0, 2, 1, 3, 4)
        output_num_frames = math.floor((num_frames - latent_kernel[0]) / latent_stride[0]) + 1
        output_height = math.floor((height - latent_kernel[1]) / latent_stride[1]) + 1
        output_width = math.floor((width - latent_kernel[2]) / latent_stride[2]) + 1
        count = 0
        decoded_videos = z.new_zeros((output_num_frames * output_height * output_width, self.config.out_channels,
                                      self.kernel[0], self.kernel[1], self.kernel[2]))
        vae_batch_input = z.new_zeros((local_batch_size, num_channels, latent_kernel[0], latent_kernel[1],
                                       latent_kernel[2]))
        for i in range(output_num_frames):
            for j in range(output_height):
                for k in range(output_width):
                    n_start, n_end = i * latent_stride[0], i * latent_stride[0] + latent_kernel[0]
                    h_start, h_end = j * latent_stride[1], j * latent_stride[1] + latent_kernel[1]
                    w_start, w_end = k * latent_stride[2], k * latent_stride[2] + latent_kernel[2]
                    current_latent = z[:, :, n_start:n_end, h_start:h_end, w_start:w_end]
                    vae_batch_input[count % local_batch_size] = current_latent
                    if (count % local_batch_size == local_batch_size - 1
                            or count == output_num_frames * output_height * output_width - 1):
                        current_video = self.decoder(vae_batch_input)
                        if (count == output_num_frames * output_height * output_width - 1
                                and count % local_batch_size != local_batch_size - 1):
                            decoded_videos[count - count % local_batch_size:] = current_video[
                                : count % local_batch_size + 1]
                        else:
                            decoded_videos[count - local_batch_size + 1: count + 1] = current_video
                        vae_batch_input = z.new_zeros(
                            (local_batch_size, num_channels, latent_kernel[0], latent_kernel[1], latent_kernel[2]))
                    count += 1
        video = z.new_zeros((batch_size, self.config.out_channels, num_frames * rt, height * rs, width * rs))
        video_overlap = (self.kernel[0] - self.stride[0], self.kernel[1] - self.stride[1],
                         self.kernel[2] - self.stride[2])
        for i in range(output_num_frames):
            n_start, n_end = i * self.stride[0], i * self.stride[0] + self.kernel[0]
            for j in range(output_height):
                h_start, h_end = j * self.stride[1], j * self.stride[1] + self.kernel[1]
                for k in range(output_width):
                    w_start, w_end = k * self.stride[2], k * self.stride[2] + self.kernel[2]
                    out_video_blend = _prepare_for_blend(
                        (i, output_num_frames, video_overlap[0]),
                        (j, output_height, video_overlap[1]),
                        (k, output_width, video_overlap[2]),
                        decoded_videos[i * output_height * output_width + j * output_width + k].unsqueeze(0),
                    )
                    video[:, :, n_start:n_end, h_start:h_end, w_start:w_end] += out_video_blend
        video = video.permute(0, 2, 1, 3, 4).contiguous()
        return video

    def forward(self, sample, sample_posterior=False, return_dict=True, generator=None):
        x = sample
        h = self.encode(x)
        # DiagonalGaussianDistribution(h).mode(): the mean (logvar clamped, std and var are made and unused)
        z, logvar = torch.chunk(h, 2, dim=1)
        dec = self.decode(z)
        return dec  # DecoderOutput(sample=dec).sample


def _prepare_for_blend(n_param, h_param, w_param, x):
    n, n_max, overlap_n = n_param
    h, h_max, overlap_h = h_param
    w, w_max, overlap_w = w_param
    if overlap_n > 0:
        if n > 0:  # the head overlap part decays from 0 to 1
            x[:, :, 0:overlap_n, :, :] = x[:, :, 0:overlap_n, :, :] * (
                torch.arange(0, overlap_n).float().to(x.device) / overlap_n
            ).reshape(overlap_n, 1, 1)
        if n < n_max - 1:  # the tail overlap part decays from 1 to 0
            x[:, :, -overlap_n:, :, :] = x[:, :, -overlap_n:, :, :] * (
                1 - torch.arange(0, overlap_n).float().to(x.device) / overlap_n
            ).reshape(overlap_n, 1, 1)
    if h > 0:
        x[:, :, :, 0:overlap_h, :] = x[:, :, :, 0:overlap_h, :] * (
            torch.arange(0, overlap_h).float().to(x.device) / overlap_h
        ).reshape(overlap_h, 1)
    if h < h_max - 1:
        x[:, :, :, -overlap_h:, :] = x[:, :, :, -overlap_h:, :] * (
            1 - torch.arange(0, overlap_h).float().to(x.device) / overlap_h
        ).reshape(overlap_h, 1)
    if w > 0:
        x[:, :, :, :, 0:overlap_w] = x[:, :, :, :, 0:overlap_w] * (
            torch.arange(0, overlap_w).float().to(x.device) / overlap_w
        )
    if w < w_max - 1:
        x[:, :, :, :, -overlap_w:] = x[:, :, :, :, -overlap_w:] * (
            1 - torch.arange(0, overlap_w).float().to(x.device) / overlap_w
        )
    return x


def build():
    model = AutoencoderKLAllegro(block_out_channels=(2, 4, 8, 8), latent_channels=4, layers_per_block=1,
                                 norm_num_groups=2, sample_size=SAMPLE_SIZE)
    model.enable_tiling()  # upstream has no untiled path
    # the hard-coded tile overlaps and sample_frames, shrunk; kernel and stride as __init__ derives them
    model.tile_overlap_t, model.tile_overlap_h, model.tile_overlap_w = TILE_OVERLAP
    model.kernel = (SAMPLE_FRAMES, SAMPLE_SIZE, SAMPLE_SIZE)
    model.stride = (SAMPLE_FRAMES - model.tile_overlap_t, SAMPLE_SIZE - model.tile_overlap_h,
                    SAMPLE_SIZE - model.tile_overlap_w)
    return model


if __name__ == "__main__":
    capture_once(
        "allegro_vae_all" if ALL_AXES else "allegro_vae", build,
        lambda g: {"sample": torch.randn(CLIP, generator=g)}, sys.argv[1],
        dict(library_source="replica of huggingface/diffusers autoencoder_kl_allegro.py (torch 1.13)",
             note="AutoencoderKLAllegro run tiled as diffusers must (no untiled path): overlapping (8, 16, 16) "
                  "cubes of the clip each through the encoder (per-frame 2-D resnets, temporal conv layers with "
                  "first/last-frame repeat padding, stride-2 / interleaving temporal down/up layers), the cube "
                  "latents blended by linear ramps over their overlaps and summed, quant_conv, the mode, "
                  "post_quant_conv, latent cubes decoded and blended likewise; output [B, F, C, H, W]"))
