"""The Wan 2.2 VAE (AutoencoderKLWan with is_residual=True, the TI2V-5B VAE) whole, reimplemented for torch 1.13
(no diffusers here), captured small in f32 on CPU as one forward (encode, the posterior's mode, decode) run the
way diffusers runs it: chunk by chunk with the frame cache (feat_cache), as wan_vae.py runs the Wan 2.1 VAE.

Follows huggingface/diffusers src/diffusers/models/autoencoders/autoencoder_kl_wan.py with is_residual=True and
patch_size 2: _encode (patchify: each 2x2 cell of the clip folded into the channels, view [B, C, T, H/2, 2, W/2, 2]
permuted (0, 1, 6, 4, 2, 3, 5), so the channel is c·4 + q·2 + p for the cell's column q and row p; then the chunks
of 1, 4, 4, … frames through WanEncoder3d with the shared cache, joined in time, quant_conv), the
DiagonalGaussianDistribution's mode, _decode (post_quant_conv, the latent frames one at a time through
WanDecoder3d, the first with first_chunk, joined; unpatchify, view [B, C, 2, 2, T, H, W] permuted
(0, 1, 4, 5, 3, 6, 2); clamped to [-1, 1]).
What 2.2 adds: WanResidualDownBlock (the level's residual blocks and its WanResample, plus AvgDown3D of the block's
input: the time padded at the front to a multiple of factor_t, each factor_t×factor_s×factor_s cell folded into
the channels, the channels' groups of group_size averaged), WanResidualUpBlock (num_res_blocks + 1 residual blocks
and a WanResample keeping the channels (upsample_out_dim = out_dim), plus DupUp3D of the block's input: channels
repeat_interleave'd, unfolded into factor_t×factor_s×factor_s cells, the first factor_t − 1 frames cut on the
first chunk), and a decoder whose up blocks keep their in_dim (no halving). decoder_base_dim differs from
base_dim as TI2V-5B's (256 vs 160). The blocks shared with 2.1 are wan_vae_blocks.py's.

A [1, 3, 5, 16, 16] clip (patchified to [1, 12, 5, 8, 8]); base_dim 4, decoder_base_dim 6, z_dim 4,
dim_mult [1, 2, 2], one residual block a level, temperal_downsample [False, True]: AvgDown3D shortcuts of factor
1x2x2 (4 → 4 channels, groups of 4), 2x2x2 (4 → 8, groups of 4) and 1x1x1 (8 → 8, groups of 1); two encoder chunks
(1 and 4 frames) giving three latent frames of 2x2, decoded one by one (1 + 2 + 2 frames) through DupUp3D
shortcuts of 2x2x2 (12 → 12 channels, repeats 8, the first chunk's first frame cut) and 1x2x2 (repeats 4).

usage: /usr/bin/python3 bench/unseen/replicas/wan22_vae.py OUTDIR
REPLICA_DTYPE=bf16 [REPLICA_DEVICE=cuda] as run.py's replicas: the bf16 run, beside the f32 one.
"""
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

import wan_vae as wan21
from run import capture_once
from wan_vae_blocks import (WanCausalConv3d, WanMidBlock, WanRMS_norm, WanResample, WanResidualBlock,
                            _cached_conv)


class AvgDown3D(nn.Module):
    def __init__(self, in_channels, out_channels, factor_t, factor_s=1):
        super().__init__()
        self.out_channels = out_channels
        self.factor_t = factor_t
        self.factor_s = factor_s
        self.factor = factor_t * factor_s * factor_s
        assert in_channels * self.factor % out_channels == 0
        self.group_size = in_channels * self.factor // out_channels

    def forward(self, x):
        pad_t = (self.factor_t - x.shape[2] % self.factor_t) % self.factor_t
        x = F.pad(x, (0, 0, 0, 0, pad_t, 0))
        B, C, T, H, W = x.shape
        ft, fs = self.factor_t, self.factor_s
        x = x.view(B, C, T // ft, ft, H // fs, fs, W // fs, fs)
        x = x.permute(0, 1, 3, 5, 7, 2, 4, 6).contiguous()
        x = x.view(B, C * self.factor, T // ft, H // fs, W // fs)
        x = x.view(B, self.out_channels, self.group_size, T // ft, H // fs, W // fs)
        return x.mean(dim=2)


class DupUp3D(nn.Module):
    def __init__(self, in_channels, out_channels, factor_t, factor_s=1):
        super().__init__()
        self.out_channels = out_channels
        self.factor_t = factor_t
        self.factor_s = factor_s
        self.factor = factor_t * factor_s * factor_s
        assert out_channels * self.factor % in_channels == 0
        self.repeats = out_channels * self.factor // in_channels

    def forward(self, x, first_chunk=False):
        x = x.repeat_interleave(self.repeats, dim=1)
        x = x.view(x.size(0), self.out_channels, self.factor_t, self.factor_s, self.factor_s, x.size(2), x.size(3),
                   x.size(4))
        x = x.permute(0, 1, 5, 2, 6, 3, 7, 4).contiguous()
        x = x.view(x.size(0), self.out_channels, x.size(2) * self.factor_t, x.size(4) * self.factor_s,
                   x.size(6) * self.factor_s)
        if first_chunk:
            x = x[:, :, self.factor_t - 1:, :, :]
        return x


class WanResidualDownBlock(nn.Module):
    def __init__(self, in_dim, out_dim, num_res_blocks, temperal_downsample=False, down_flag=False):
        super().__init__()
        self.avg_shortcut = AvgDown3D(in_dim, out_dim, factor_t=2 if temperal_downsample else 1,
                                      factor_s=2 if down_flag else 1)
        resnets = []
        for _ in range(num_res_blocks):
            resnets.append(WanResidualBlock(in_dim, out_dim))
            in_dim = out_dim
        self.resnets = nn.ModuleList(resnets)
        self.downsampler = None
        if down_flag:
            self.downsampler = WanResample(out_dim, mode="downsample3d" if temperal_downsample else "downsample2d")

    def forward(self, x, feat_cache=None, feat_idx=[0]):
        x_copy = x.clone()
        for resnet in self.resnets:
            x = resnet(x, feat_cache, feat_idx)
        if self.downsampler is not None:
            x = self.downsampler(x, feat_cache, feat_idx)
        return x + self.avg_shortcut(x_copy)


class WanResidualUpBlock(nn.Module):
    def __init__(self, in_dim, out_dim, num_res_blocks, temperal_upsample=False, up_flag=False):
        super().__init__()
        self.avg_shortcut = None
        if up_flag:
            self.avg_shortcut = DupUp3D(in_dim, out_dim, factor_t=2 if temperal_upsample else 1, factor_s=2)
        resnets = []
        current_dim = in_dim
        for _ in range(num_res_blocks + 1):
            resnets.append(WanResidualBlock(current_dim, out_dim))
            current_dim = out_dim
        self.resnets = nn.ModuleList(resnets)
        self.upsampler = None
        if up_flag:
            self.upsampler = WanResample(out_dim, mode="upsample3d" if temperal_upsample else "upsample2d",
                                         upsample_out_dim=out_dim)

    def forward(self, x, feat_cache=None, feat_idx=[0], first_chunk=False):
        x_copy = x.clone()
        for resnet in self.resnets:
            x = resnet(x, feat_cache, feat_idx)
        if self.upsampler is not None:
            x = self.upsampler(x, feat_cache, feat_idx)
        if self.avg_shortcut is not None:
            x = x + self.avg_shortcut(x_copy, first_chunk=first_chunk)
        return x


class WanEncoder3d(nn.Module):
    def __init__(self, in_channels, dim, z_dim, dim_mult, num_res_blocks, temperal_downsample):
        super().__init__()
        self.nonlinearity = nn.SiLU()
        dims = [dim * u for u in [1] + dim_mult]
        self.conv_in = WanCausalConv3d(in_channels, dims[0], 3, padding=1)
        self.down_blocks = nn.ModuleList([])
        for i, (in_dim, out_dim) in enumerate(zip(dims[:-1], dims[1:])):
            last = i == len(dim_mult) - 1
            self.down_blocks.append(WanResidualDownBlock(
                in_dim, out_dim, num_res_blocks, temperal_downsample=temperal_downsample[i] if not last else False,
                down_flag=not last))
        self.mid_block = WanMidBlock(out_dim)
        self.norm_out = WanRMS_norm(out_dim, images=False)
        self.conv_out = WanCausalConv3d(out_dim, z_dim, 3, padding=1)

    def forward(self, x, feat_cache=None, feat_idx=[0]):
        x = _cached_conv(self.conv_in, x, feat_cache, feat_idx)
        for layer in self.down_blocks:
            x = layer(x, feat_cache, feat_idx)
        x = self.mid_block(x, feat_cache, feat_idx)
        x = self.nonlinearity(self.norm_out(x))
        return _cached_conv(self.conv_out, x, feat_cache, feat_idx)


class WanDecoder3d(nn.Module):
    def __init__(self, dim, z_dim, dim_mult, num_res_blocks, temperal_upsample, out_channels):
        super().__init__()
        self.nonlinearity = nn.SiLU()
        dims = [dim * u for u in [dim_mult[-1]] + dim_mult[::-1]]
        self.conv_in = WanCausalConv3d(z_dim, dims[0], 3, padding=1)
        self.mid_block = WanMidBlock(dims[0])
        self.up_blocks = nn.ModuleList([])
        for i, (in_dim, out_dim) in enumerate(zip(dims[:-1], dims[1:])):
            up_flag = i != len(dim_mult) - 1  # is_residual: in_dim kept (no halving)
            self.up_blocks.append(WanResidualUpBlock(
                in_dim, out_dim, num_res_blocks, temperal_upsample=temperal_upsample[i] if up_flag else False,
                up_flag=up_flag))
        self.norm_out = WanRMS_norm(out_dim, images=False)
        self.conv_out = WanCausalConv3d(out_dim, out_channels, 3, padding=1)

    def forward(self, x, feat_cache=None, feat_idx=[0], first_chunk=False):
        x = _cached_conv(self.conv_in, x, feat_cache, feat_idx)
        x = self.mid_block(x, feat_cache, feat_idx)
        for up_block in self.up_blocks:
            x = up_block(x, feat_cache, feat_idx, first_chunk=first_chunk)
        x = self.nonlinearity(self.norm_out(x))
        return _cached_conv(self.conv_out, x, feat_cache, feat_idx)


class AutoencoderKLWan(wan21.AutoencoderKLWan):
    """wan_vae.py's chunked encode and decode with a patch and 2.2's residual encoder and decoder."""

    def __init__(self, base_dim=4, decoder_base_dim=6, z_dim=4, dim_mult=(1, 2, 2), num_res_blocks=1,
                 temperal_downsample=(False, True), in_channels=3, out_channels=3, patch_size=2):
        nn.Module.__init__(self)
        dim_mult, temperal_downsample = list(dim_mult), list(temperal_downsample)
        self.z_dim = z_dim
        self.patch_size = patch_size
        self.encoder = WanEncoder3d(in_channels * patch_size ** 2, base_dim, z_dim * 2, dim_mult, num_res_blocks,
                                    temperal_downsample)
        self.quant_conv = WanCausalConv3d(z_dim * 2, z_dim * 2, 1)
        self.post_quant_conv = WanCausalConv3d(z_dim, z_dim, 1)
        self.decoder = WanDecoder3d(decoder_base_dim, z_dim, dim_mult, num_res_blocks, temperal_downsample[::-1],
                                    out_channels * patch_size ** 2)
        self._enc_convs = sum(isinstance(m, WanCausalConv3d) for m in self.encoder.modules())
        self._dec_convs = sum(isinstance(m, WanCausalConv3d) for m in self.decoder.modules())


if __name__ == "__main__":
    capture_once(
        "wan22_vae", AutoencoderKLWan, lambda g: {"video": torch.randn((1, 3, 5, 16, 16), generator=g)}, sys.argv[1],
        dict(library_source="replica of huggingface/diffusers autoencoder_kl_wan.py, is_residual=True (torch 1.13)",
             note="the Wan 2.2 (TI2V-5B) VAE run chunk by chunk with its frame cache: patchify 2x2 into the "
                  "channels, residual down blocks with AvgDown3D shortcuts (cells folded into channels, groups "
                  "averaged), residual up blocks with DupUp3D shortcuts (channels repeated, unfolded into cells, "
                  "the first chunk's leading frames cut), unpatchify, clamp"))
