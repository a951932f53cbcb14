"""The Wan 2.1 VAE (AutoencoderKLWan) whole, reimplemented for torch 1.13 (no diffusers here), captured small in
f32 on CPU as one forward (encode, the posterior's mode, decode) run the way diffusers runs it: chunk by chunk
with the frame cache. Each causal convolution is passed the last frames of its input from the previous chunk's
call (feat_cache, a list every block receives whole), so a later call reads values an earlier call made.

Follows huggingface/diffusers src/diffusers/models/autoencoders/autoencoder_kl_wan.py: _encode (the clip cut into
chunks of 1, 4, 4, … frames, each through WanEncoder3d with the shared cache, joined in time, then quant_conv),
the DiagonalGaussianDistribution's mode (the first half of the channels), _decode (post_quant_conv, then the
latent frames one at a time through WanDecoder3d, the first with first_chunk, joined, clamped to [-1, 1]).
The blocks are wan_vae_blocks.py's: WanResample's 3-D modes (downsample3d: a stride-2 time convolution over the
previous chunk's last frame and this chunk, skipped on the first chunk; upsample3d: a time convolution to twice
the channels interleaved into twice the frames, skipped on the first chunk, whose cache is the "Rep" marker and
then zero frames), WanResidualBlock's cached convolutions, WanMidBlock, and WanUpBlock (Wan 2.1's, not 2.2's
residual up block).

A [1, 3, 5, 8, 8] clip; base_dim 4, z_dim 4, dim_mult [1, 2, 2], one residual block a level,
temperal_downsample [False, True]: two encoder chunks (1 and 4 frames), three latent frames decoded one by one.

usage: /usr/bin/python3 bench/unseen/replicas/wan_vae.py OUTDIR
REPLICA_DTYPE=bf16 [REPLICA_DEVICE=cuda] as run.py's replicas: the bf16 run, beside the f32 one.
"""
import sys

import torch
import torch.nn as nn

from run import capture_once
from wan_vae_blocks import (WanAttentionBlock, WanCausalConv3d, WanMidBlock, WanRMS_norm, WanResample,
                            WanResidualBlock, _cached_conv)


class WanEncoder3d(nn.Module):
    def __init__(self, in_channels, dim, z_dim, dim_mult, num_res_blocks, attn_scales, temperal_downsample):
        super().__init__()
        self.nonlinearity = nn.SiLU()
        dims = [dim * u for u in [1] + dim_mult]
        scale = 1.0
        self.conv_in = WanCausalConv3d(in_channels, dims[0], 3, padding=1)
        self.down_blocks = nn.ModuleList([])
        for i, (in_dim, out_dim) in enumerate(zip(dims[:-1], dims[1:])):
            for _ in range(num_res_blocks):
                self.down_blocks.append(WanResidualBlock(in_dim, out_dim))
                if scale in attn_scales:
                    self.down_blocks.append(WanAttentionBlock(out_dim))
                in_dim = out_dim
            if i != len(dim_mult) - 1:
                self.down_blocks.append(WanResample(out_dim, mode="downsample3d" if temperal_downsample[i] else "downsample2d"))
                scale /= 2.0
        self.mid_block = WanMidBlock(out_dim)
        self.norm_out = WanRMS_norm(out_dim, images=False)
        self.conv_out = WanCausalConv3d(out_dim, z_dim, 3, padding=1)

    def forward(self, x, feat_cache=None, feat_idx=[0]):
        x = _cached_conv(self.conv_in, x, feat_cache, feat_idx)
        for layer in self.down_blocks:
            x = layer(x, feat_cache, feat_idx) if not isinstance(layer, WanAttentionBlock) else layer(x)
        x = self.mid_block(x, feat_cache, feat_idx)
        x = self.nonlinearity(self.norm_out(x))
        return _cached_conv(self.conv_out, x, feat_cache, feat_idx)


class WanUpBlock(nn.Module):
    def __init__(self, in_dim, out_dim, num_res_blocks, upsample_mode=None):
        super().__init__()
        resnets = []
        current_dim = in_dim
        for _ in range(num_res_blocks + 1):
            resnets.append(WanResidualBlock(current_dim, out_dim))
            current_dim = out_dim
        self.resnets = nn.ModuleList(resnets)
        self.upsamplers = None
        if upsample_mode is not None:
            self.upsamplers = nn.ModuleList([WanResample(out_dim, mode=upsample_mode)])

    def forward(self, x, feat_cache=None, feat_idx=[0], first_chunk=None):
        for resnet in self.resnets:
            x = resnet(x, feat_cache, feat_idx)
        if self.upsamplers is not None:
            x = self.upsamplers[0](x, feat_cache, feat_idx)
        return x


class WanDecoder3d(nn.Module):
    def __init__(self, dim, z_dim, dim_mult, num_res_blocks, temperal_upsample, out_channels=3):
        super().__init__()
        self.nonlinearity = nn.SiLU()
        dims = [dim * u for u in [dim_mult[-1]] + dim_mult[::-1]]
        self.conv_in = WanCausalConv3d(z_dim, dims[0], 3, padding=1)
        self.mid_block = WanMidBlock(dims[0])
        self.up_blocks = nn.ModuleList([])
        for i, (in_dim, out_dim) in enumerate(zip(dims[:-1], dims[1:])):
            if i > 0:
                in_dim = in_dim // 2  # Wan 2.1: the upsample before halved the channels
            up_flag = i != len(dim_mult) - 1
            mode = None
            if up_flag and temperal_upsample[i]:
                mode = "upsample3d"
            elif up_flag:
                mode = "upsample2d"
            self.up_blocks.append(WanUpBlock(in_dim, out_dim, num_res_blocks, upsample_mode=mode))
        self.norm_out = WanRMS_norm(out_dim, images=False)
        self.conv_out = WanCausalConv3d(out_dim, out_channels, 3, padding=1)

    def forward(self, x, feat_cache=None, feat_idx=[0], first_chunk=False):
        x = _cached_conv(self.conv_in, x, feat_cache, feat_idx)
        x = self.mid_block(x, feat_cache, feat_idx)
        for up_block in self.up_blocks:
            x = up_block(x, feat_cache, feat_idx, first_chunk=first_chunk)
        x = self.nonlinearity(self.norm_out(x))
        return _cached_conv(self.conv_out, x, feat_cache, feat_idx)


def patchify(x, patch_size):
    batch_size, channels, frames, height, width = x.shape
    x = x.view(batch_size, channels, frames, height // patch_size, patch_size, width // patch_size, patch_size)
    x = x.permute(0, 1, 6, 4, 2, 3, 5).contiguous()
    return x.view(batch_size, channels * patch_size * patch_size, frames, height // patch_size, width // patch_size)


def unpatchify(x, patch_size):
    batch_size, c_patches, frames, height, width = x.shape
    channels = c_patches // (patch_size * patch_size)
    x = x.view(batch_size, channels, patch_size, patch_size, frames, height, width)
    x = x.permute(0, 1, 4, 5, 3, 6, 2).contiguous()
    return x.view(batch_size, channels, frames, height * patch_size, width * patch_size)


class AutoencoderKLWan(nn.Module):
    """The chunked encode and decode; patch_size None (2.1) or a patch (2.2: wan22_vae.py builds that one)."""

    def __init__(self, base_dim=4, z_dim=4, dim_mult=(1, 2, 2), num_res_blocks=1, attn_scales=(),
                 temperal_downsample=(False, True)):
        super().__init__()
        dim_mult, temperal_downsample = list(dim_mult), list(temperal_downsample)
        self.z_dim = z_dim
        self.patch_size = None
        self.encoder = WanEncoder3d(3, base_dim, z_dim * 2, dim_mult, num_res_blocks, list(attn_scales),
                                    temperal_downsample)
        self.quant_conv = WanCausalConv3d(z_dim * 2, z_dim * 2, 1)
        self.post_quant_conv = WanCausalConv3d(z_dim, z_dim, 1)
        self.decoder = WanDecoder3d(base_dim, z_dim, dim_mult, num_res_blocks, temperal_downsample[::-1])
        self._enc_convs = sum(isinstance(m, WanCausalConv3d) for m in self.encoder.modules())
        self._dec_convs = sum(isinstance(m, WanCausalConv3d) for m in self.decoder.modules())

    def clear_cache(self):
        self._conv_idx = [0]
        self._feat_map = [None] * self._dec_convs
        self._enc_conv_idx = [0]
        self._enc_feat_map = [None] * self._enc_convs

    def _encode(self, x):
        num_frame = x.shape[2]
        self.clear_cache()
        if self.patch_size is not None:
            x = patchify(x, patch_size=self.patch_size)
        for i in range(1 + (num_frame - 1) // 4):
            self._enc_conv_idx = [0]
            if i == 0:
                out = self.encoder(x[:, :, :1, :, :], feat_cache=self._enc_feat_map, feat_idx=self._enc_conv_idx)
            else:
                out_ = self.encoder(x[:, :, 1 + 4 * (i - 1):1 + 4 * i, :, :], feat_cache=self._enc_feat_map,
                                    feat_idx=self._enc_conv_idx)
                out = torch.cat([out, out_], 2)
        enc = self.quant_conv(out)
        self.clear_cache()
        return enc

    def _decode(self, z):
        num_frame = z.shape[2]
        self.clear_cache()
        x = self.post_quant_conv(z)
        for i in range(num_frame):
            self._conv_idx = [0]
            if i == 0:
                out = self.decoder(x[:, :, i:i + 1, :, :], feat_cache=self._feat_map, feat_idx=self._conv_idx,
                                   first_chunk=True)
            else:
                out_ = self.decoder(x[:, :, i:i + 1, :, :], feat_cache=self._feat_map, feat_idx=self._conv_idx)
                out = torch.cat([out, out_], 2)
        if self.patch_size is not None:
            out = unpatchify(out, patch_size=self.patch_size)
        out = torch.clamp(out, min=-1.0, max=1.0)
        self.clear_cache()
        return out

    def forward(self, sample):
        h = self._encode(sample)
        mean, _ = torch.chunk(h, 2, dim=1)  # DiagonalGaussianDistribution(h).mode()
        return self._decode(mean)


if __name__ == "__main__":
    capture_once(
        "wan_vae", AutoencoderKLWan, lambda g: {"video": torch.randn((1, 3, 5, 8, 8), generator=g)}, sys.argv[1],
        dict(library_source="replica of huggingface/diffusers autoencoder_kl_wan.py (torch 1.13)",
             note="the Wan 2.1 VAE run chunk by chunk with its frame cache: each causal convolution reads the last "
                  "frames of the previous chunk's input, kept in a list every block is passed"))
