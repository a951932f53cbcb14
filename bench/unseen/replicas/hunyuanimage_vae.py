"""HunyuanImage 2.1's VAE (AutoencoderKLHunyuanImage, 32x spatial compression), reimplemented for torch 1.13 (no
diffusers here), captured small in f32 on CPU as one forward (encode, the posterior's mode, decode) with no tiling
and no slicing.

Follows huggingface/diffusers src/diffusers/models/autoencoders/autoencoder_kl_hunyuanimage.py at
071190daca865a4d04deac0e02cda5b8c5d6f6fa line for line: HunyuanImageResnetBlock (GroupNorm-SiLU-conv twice, then
the input added; upstream applies its 1x1 conv_shortcut to the branch, not to the input, but the configurations
never build one: every resnet keeps its width since the down/upsamplers change it), HunyuanImageAttentionBlock
(GroupNorm, q/k/v as 1x1 convolutions, the map flattened to rows [B, H*W, C] channels last, one-head SDPA on those
3-D rows, rows back to [B, C, H, W], a 1x1 conv proj, plus the input), HunyuanImageDownsample (a 3x3 conv to a
quarter of the output width, space-to-channel by reshape [B, C, H/2, 2, W/2, 2], permute (0, 3, 5, 1, 2, 4), reshape
[B, 4C, H/2, W/2]: the channel index is (r1, r2, c), row-offset major, not pixel_unshuffle's (c, r1, r2); plus the
input put through the same space-to-channel, its consecutive channel groups averaged), HunyuanImageUpsample (a 3x3
conv to four times the output width, channel-to-space by reshape [B, 2, 2, C/4, H, W], permute (0, 3, 4, 1, 5, 2),
reshape [B, C/4, 2H, 2W]: again (r1, r2, c) channel order; plus the input's channels each repeated
(repeat_interleave) then put through the same channel-to-space), HunyuanImageMidBlock (resnet, attention, resnet),
HunyuanImageEncoder2D (conv_in; per level num_res_blocks resnets then a Downsample to the next level's width for
the first log2(32) = 5 levels; the mid block; the head: the mid block's output with consecutive channel groups
averaged down to 2 * z_channels, added to GroupNorm-SiLU-conv_out), HunyuanImageDecoder2D (conv_in plus the latent's
channels each repeated to its width, the mid block, per level num_res_blocks + 1 resnets then an Upsample for the
first 5 levels, GroupNorm-SiLU-conv_out) and AutoencoderKLHunyuanImage.forward with sample_posterior False:
encode, DiagonalGaussianDistribution(h).mode() (vae.py's: the first half of the moments' channels; logvar, std and
var are made and unused), decode. The same module tree, parameter names and shapes, call boundaries and arithmetic;
F.scaled_dot_product_attention stands in as its math path (run.sdpa: torch 1.13 lacks it).

Tiny config: HunyuanImage 2.1's released layout (block_out_channels (128, 256, 512, 512, 1024, 1024),
latent_channels 64, spatial_compression_ratio 32) divided by 32 in width: block_out_channels (4, 8, 16, 16, 32,
32), latent_channels 2, so every shortcut keeps the released group size / repeat count (downsample groups 2, 2, 4,
2, 4; the encoder head's 8; the decoder's input repeat 16, upsample repeats 4, 2, 4, 2, 2); all six levels kept,
since the 32x compression needs five downsamples (upstream's rule: a level downsamples while i < log2(32) and it is
not the last); layers_per_block 1 (released 2: the decoder's levels then hold 2 resnets). GroupNorm: upstream
hard-codes 32 groups, which needs 32 channels; here 2 groups (GROUPS: 2 to 16 channels a group, released 4 to 32).
A [1, 3, 64, 32] image -> moments [1, 4, 2, 1] -> latent [1, 2, 2, 1] (the mid-block attentions over 2 rows) ->
[1, 3, 64, 32] (the latent's two cells so that attention is not a one-key identity; 4.9 MB in f32).

usage: /usr/bin/python3 bench/unseen/replicas/hunyuanimage_vae.py OUTDIR
REPLICA_DTYPE=bf16 [REPLICA_DEVICE=cuda] as run.py's replicas: the bf16 run, beside the f32 one.
"""
import sys

import numpy as np
import torch
import torch.nn as nn

from run import capture_once, sdpa

GROUPS = 2  # upstream: num_groups=32 in every GroupNorm


class HunyuanImageResnetBlock(nn.Module):
    def __init__(self, in_channels, out_channels, non_linearity="silu"):
        super().__init__()
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.nonlinearity = nn.SiLU()  # get_activation("silu")
        self.norm1 = nn.GroupNorm(num_groups=GROUPS, num_channels=in_channels, eps=1e-6, affine=True)
        self.conv1 = nn.Conv2d(in_channels, out_channels, kernel_size=3, stride=1, padding=1)
        self.norm2 = nn.GroupNorm(num_groups=GROUPS, num_channels=out_channels, eps=1e-6, affine=True)
        self.conv2 = nn.Conv2d(out_channels, out_channels, kernel_size=3, stride=1, padding=1)
        if in_channels != out_channels:
            self.conv_shortcut = nn.Conv2d(in_channels, out_channels, kernel_size=1, stride=1, padding=0)
        else:
            self.conv_shortcut = None

    def forward(self, x):
        residual = x
        x = self.norm1(x)
        x = self.nonlinearity(x)
        x = self.conv1(x)
        x = self.norm2(x)
        x = self.nonlinearity(x)
        x = self.conv2(x)
        if self.conv_shortcut is not None:
            x = self.conv_shortcut(x)  # as upstream (on the branch); never built here
        return x + residual


class HunyuanImageAttentionBlock(nn.Module):
    def __init__(self, in_channels):
        super().__init__()
        self.norm = nn.GroupNorm(num_groups=GROUPS, num_channels=in_channels, eps=1e-6, affine=True)
        self.to_q = nn.Conv2d(in_channels, in_channels, 1)
        self.to_k = nn.Conv2d(in_channels, in_channels, 1)
        self.to_v = nn.Conv2d(in_channels, in_channels, 1)
        self.proj = nn.Conv2d(in_channels, in_channels, 1)

    def forward(self, x):
        identity = x
        x = self.norm(x)
        query = self.to_q(x)
        key = self.to_k(x)
        value = self.to_v(x)
        batch_size, channels, height, width = query.shape
        query = query.permute(0, 2, 3, 1).reshape(batch_size, height * width, channels).contiguous()
        key = key.permute(0, 2, 3, 1).reshape(batch_size, height * width, channels).contiguous()
        value = value.permute(0, 2, 3, 1).reshape(batch_size, height * width, channels).contiguous()
        x = sdpa(query, key, value)  # F.scaled_dot_product_attention on [B, H*W, C]
        x = x.reshape(batch_size, height, width, channels).permute(0, 3, 1, 2)
        x = self.proj(x)
        return x + identity


class HunyuanImageDownsample(nn.Module):
    def __init__(self, in_channels, out_channels):
        super().__init__()
        factor = 4
        if out_channels % factor != 0:
            raise ValueError(f"out_channels % factor != 0: {out_channels % factor}")
        self.conv = nn.Conv2d(in_channels, out_channels // factor, kernel_size=3, stride=1, padding=1)
        self.group_size = factor * in_channels // out_channels

    def forward(self, x):
        h = self.conv(x)

        B, C, H, W = h.shape
        h = h.reshape(B, C, H // 2, 2, W // 2, 2)
        h = h.permute(0, 3, 5, 1, 2, 4)  # b, r1, r2, c, h, w
        h = h.reshape(B, 4 * C, H // 2, W // 2)

        B, C, H, W = x.shape
        shortcut = x.reshape(B, C, H // 2, 2, W // 2, 2)
        shortcut = shortcut.permute(0, 3, 5, 1, 2, 4)  # b, r1, r2, c, h, w
        shortcut = shortcut.reshape(B, 4 * C, H // 2, W // 2)

        B, C, H, W = shortcut.shape
        shortcut = shortcut.view(B, h.shape[1], self.group_size, H, W).mean(dim=2)
        return h + shortcut


class HunyuanImageUpsample(nn.Module):
    def __init__(self, in_channels, out_channels):
        super().__init__()
        factor = 4
        self.conv = nn.Conv2d(in_channels, out_channels * factor, kernel_size=3, stride=1, padding=1)
        self.repeats = factor * out_channels // in_channels

    def forward(self, x):
        h = self.conv(x)

        B, C, H, W = h.shape
        h = h.reshape(B, 2, 2, C // 4, H, W)  # b, r1, r2, c, h, w
        h = h.permute(0, 3, 4, 1, 5, 2)  # b, c, h, r1, w, r2
        h = h.reshape(B, C // 4, H * 2, W * 2)

        shortcut = x.repeat_interleave(repeats=self.repeats, dim=1)

        B, C, H, W = shortcut.shape
        shortcut = shortcut.reshape(B, 2, 2, C // 4, H, W)  # b, r1, r2, c, h, w
        shortcut = shortcut.permute(0, 3, 4, 1, 5, 2)  # b, c, h, r1, w, r2
        shortcut = shortcut.reshape(B, C // 4, H * 2, W * 2)
        return h + shortcut


class HunyuanImageMidBlock(nn.Module):
    def __init__(self, in_channels, num_layers=1):
        super().__init__()
        resnets = [HunyuanImageResnetBlock(in_channels=in_channels, out_channels=in_channels)]
        attentions = []
        for _ in range(num_layers):
            attentions.append(HunyuanImageAttentionBlock(in_channels))
            resnets.append(HunyuanImageResnetBlock(in_channels=in_channels, out_channels=in_channels))
        self.resnets = nn.ModuleList(resnets)
        self.attentions = nn.ModuleList(attentions)

    def forward(self, x):
        x = self.resnets[0](x)
        for attn, resnet in zip(self.attentions, self.resnets[1:]):
            x = attn(x)
            x = resnet(x)
        return x


class HunyuanImageEncoder2D(nn.Module):
    def __init__(self, in_channels, z_channels, block_out_channels, num_res_blocks, spatial_compression_ratio,
                 non_linearity="silu", downsample_match_channel=True):
        super().__init__()
        if block_out_channels[-1] % (2 * z_channels) != 0:
            raise ValueError("block_out_channels[-1] has to be divisible by 2 * z_channels")
        self.in_channels = in_channels
        self.z_channels = z_channels
        self.block_out_channels = block_out_channels
        self.num_res_blocks = num_res_blocks
        self.spatial_compression_ratio = spatial_compression_ratio
        self.group_size = block_out_channels[-1] // (2 * z_channels)
        self.nonlinearity = nn.SiLU()  # get_activation("silu")

        self.conv_in = nn.Conv2d(in_channels, block_out_channels[0], kernel_size=3, stride=1, padding=1)

        self.down_blocks = nn.ModuleList([])
        block_in_channel = block_out_channels[0]
        for i in range(len(block_out_channels)):
            block_out_channel = block_out_channels[i]
            for _ in range(num_res_blocks):
                self.down_blocks.append(
                    HunyuanImageResnetBlock(in_channels=block_in_channel, out_channels=block_out_channel))
                block_in_channel = block_out_channel
            if i < np.log2(spatial_compression_ratio) and i != len(block_out_channels) - 1:
                if downsample_match_channel:
                    block_out_channel = block_out_channels[i + 1]
                self.down_blocks.append(
                    HunyuanImageDownsample(in_channels=block_in_channel, out_channels=block_out_channel))
                block_in_channel = block_out_channel

        self.mid_block = HunyuanImageMidBlock(in_channels=block_out_channels[-1], num_layers=1)

        self.norm_out = nn.GroupNorm(num_groups=GROUPS, num_channels=block_out_channels[-1], eps=1e-6, affine=True)
        self.conv_out = nn.Conv2d(block_out_channels[-1], 2 * z_channels, kernel_size=3, stride=1, padding=1)

    def forward(self, x):
        x = self.conv_in(x)
        for down_block in self.down_blocks:
            x = down_block(x)
        x = self.mid_block(x)

        B, C, H, W = x.shape
        residual = x.view(B, C // self.group_size, self.group_size, H, W).mean(dim=2)

        x = self.norm_out(x)
        x = self.nonlinearity(x)
        x = self.conv_out(x)
        return x + residual


class HunyuanImageDecoder2D(nn.Module):
    def __init__(self, z_channels, out_channels, block_out_channels, num_res_blocks, spatial_compression_ratio,
                 upsample_match_channel=True, non_linearity="silu"):
        super().__init__()
        if block_out_channels[0] % z_channels != 0:
            raise ValueError("block_out_channels[0] should be divisible by z_channels")
        self.z_channels = z_channels
        self.block_out_channels = block_out_channels
        self.num_res_blocks = num_res_blocks
        self.repeat = block_out_channels[0] // z_channels
        self.spatial_compression_ratio = spatial_compression_ratio
        self.nonlinearity = nn.SiLU()  # get_activation("silu")

        self.conv_in = nn.Conv2d(z_channels, block_out_channels[0], kernel_size=3, stride=1, padding=1)

        self.mid_block = HunyuanImageMidBlock(in_channels=block_out_channels[0], num_layers=1)

        block_in_channel = block_out_channels[0]
        self.up_blocks = nn.ModuleList()
        for i in range(len(block_out_channels)):
            block_out_channel = block_out_channels[i]
            for _ in range(self.num_res_blocks + 1):
                self.up_blocks.append(
                    HunyuanImageResnetBlock(in_channels=block_in_channel, out_channels=block_out_channel))
                block_in_channel = block_out_channel
            if i < np.log2(spatial_compression_ratio) and i != len(block_out_channels) - 1:
                if upsample_match_channel:
                    block_out_channel = block_out_channels[i + 1]
                self.up_blocks.append(HunyuanImageUpsample(block_in_channel, block_out_channel))
                block_in_channel = block_out_channel

        self.norm_out = nn.GroupNorm(num_groups=GROUPS, num_channels=block_out_channels[-1], eps=1e-6, affine=True)
        self.conv_out = nn.Conv2d(block_out_channels[-1], out_channels, kernel_size=3, stride=1, padding=1)

    def forward(self, x):
        h = self.conv_in(x) + x.repeat_interleave(repeats=self.repeat, dim=1)
        h = self.mid_block(h)
        for up_block in self.up_blocks:
            h = up_block(h)
        h = self.norm_out(h)
        h = self.nonlinearity(h)
        h = self.conv_out(h)
        return h


class AutoencoderKLHunyuanImage(nn.Module):
    def __init__(self, in_channels=3, out_channels=3, latent_channels=2, block_out_channels=(4, 8, 16, 16, 32, 32),
                 layers_per_block=1, spatial_compression_ratio=32, sample_size=512, scaling_factor=None,
                 downsample_match_channel=True, upsample_match_channel=True):
        super().__init__()
        self.encoder = HunyuanImageEncoder2D(
            in_channels=in_channels, z_channels=latent_channels, block_out_channels=block_out_channels,
            num_res_blocks=layers_per_block, spatial_compression_ratio=spatial_compression_ratio,
            downsample_match_channel=downsample_match_channel)
        self.decoder = HunyuanImageDecoder2D(
            z_channels=latent_channels, out_channels=out_channels, block_out_channels=list(reversed(block_out_channels)),
            num_res_blocks=layers_per_block, spatial_compression_ratio=spatial_compression_ratio,
            upsample_match_channel=upsample_match_channel)
        self.use_slicing = False
        self.use_tiling = False
        self.tile_sample_min_size = sample_size
        self.tile_latent_min_size = sample_size // spatial_compression_ratio

    def encode(self, x):
        h = self.encoder(x)  # _encode: no tiling (the image is below tile_sample_min_size)
        # DiagonalGaussianDistribution(h).mode(): the mean (logvar, std and var are made and unused)
        mean, logvar = torch.chunk(h, 2, dim=1)
        return mean

    def decode(self, z):
        return self.decoder(z)  # _decode: no tiling

    def forward(self, sample):
        z = self.encode(sample)
        return self.decode(z)


if __name__ == "__main__":
    capture_once(
        "hunyuanimage_vae", AutoencoderKLHunyuanImage,
        lambda g: {"pixel_values": torch.randn((1, 3, 64, 32), generator=g)}, sys.argv[1],
        dict(library_source="replica of huggingface/diffusers autoencoder_kl_hunyuanimage.py (torch 1.13)",
             note="HunyuanImage 2.1's 32x VAE at widths 4..32: space-to-channel downsamples (row-offset-major channel "
                  "order) plus channel-group-averaged shortcuts, channel-to-space upsamples plus repeated-channel "
                  "shortcuts, a head averaging channel groups, a decoder input repeating channels, one-head "
                  "mid-block attention on [B, H*W, C] rows"))
