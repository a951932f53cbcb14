"""The Wan VAE's (AutoencoderKLWan's) blocks, reimplemented for torch 1.13 (no diffusers here), captured small in
f32 on CPU as one forward over a clip: the blocks as diffusers writes them, run without the frame cache
(feat_cache None, so each causal convolution pads its past with zeros), stacked as the decoder stacks them.

Follows huggingface/diffusers src/diffusers/models/autoencoders/autoencoder_kl_wan.py: WanCausalConv3d (the
convolution's own padding moved into an F.pad of the forward: the width and height on both sides, twice the time
padding before the clip and none after), WanRMS_norm (F.normalize over the channels, times √C and a γ kept [C, 1, 1]
or [C, 1, 1, 1]), WanResidualBlock (norm, SiLU, causal conv, norm, SiLU, dropout, causal conv, plus a 1x1x1 causal
conv shortcut), WanAttentionBlock (each frame's map normed, one 1x1 conv to q, k and v, single-head attention over
its cells, a 1x1 conv, plus the input), WanMidBlock, and WanResample's 2-D modes (upsample2d: nearest-exact ×2 in
f32, then a conv; downsample2d: ZeroPad2d at the end, a 3x3 conv of stride 2), frames folded into the batch.

A [1, 3, 3, 8, 8] clip: a causal conv in, a residual block widening 8 → 16, a mid block, downsample2d and
upsample2d, a residual block narrowing 8 → 8, the head (norm, SiLU, causal conv to 3 channels).

usage: /usr/bin/python3 bench/unseen/replicas/wan_vae_blocks.py OUTDIR
REPLICA_DTYPE=bf16 [REPLICA_DEVICE=cuda] as run.py's replicas: the bf16 run, beside the f32 one.
"""
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

from run import capture_once, sdpa


class WanCausalConv3d(nn.Conv3d):
    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0):
        super().__init__(in_channels=in_channels, out_channels=out_channels, kernel_size=kernel_size, stride=stride,
                         padding=padding)
        self._padding = (self.padding[2], self.padding[2], self.padding[1], self.padding[1], 2 * self.padding[0], 0)
        self.padding = (0, 0, 0)

    def forward(self, x, cache_x=None):
        padding = list(self._padding)
        if cache_x is not None and self._padding[4] > 0:
            x = torch.cat([cache_x, x], dim=2)
            padding[4] -= cache_x.shape[2]
        x = F.pad(x, padding)
        return super().forward(x)


class WanRMS_norm(nn.Module):
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


class WanUpsample(nn.Upsample):
    def forward(self, x):
        # nearest-exact (torch ≥ 1.11); at a scale of 2 it reads the same source cells as nearest
        return super().forward(x.float()).type_as(x)


CACHE_T = 2


def _cache_of(x, feat_cache, idx):
    """The last CACHE_T frames of x, kept for the next chunk's call (with the frame before them from the cache
    when x has one frame only), as upstream keeps them before each causal convolution."""
    cache_x = x[:, :, -CACHE_T:, :, :].clone()
    if cache_x.shape[2] < 2 and feat_cache[idx] is not None:
        cache_x = torch.cat([feat_cache[idx][:, :, -1, :, :].unsqueeze(2), cache_x], dim=2)
    return cache_x


def _cached_conv(conv, x, feat_cache, feat_idx):
    """A causal convolution called with the cache of its slot, the slot then holding this chunk's last frames."""
    idx = feat_idx[0]
    cache_x = _cache_of(x, feat_cache, idx)
    x = conv(x, feat_cache[idx])
    feat_cache[idx] = cache_x
    feat_idx[0] += 1
    return x


class WanResample(nn.Module):
    def __init__(self, dim, mode, upsample_out_dim=None):
        super().__init__()
        self.mode = mode
        if upsample_out_dim is None:
            upsample_out_dim = dim // 2
        if mode in ("upsample2d", "upsample3d"):
            self.resample = nn.Sequential(WanUpsample(scale_factor=(2.0, 2.0), mode="nearest-exact"),
                                          nn.Conv2d(dim, upsample_out_dim, 3, padding=1))
            if mode == "upsample3d":
                self.time_conv = WanCausalConv3d(dim, dim * 2, (3, 1, 1), padding=(1, 0, 0))
        elif mode in ("downsample2d", "downsample3d"):
            self.resample = nn.Sequential(nn.ZeroPad2d((0, 1, 0, 1)), nn.Conv2d(dim, dim, 3, stride=(2, 2)))
            if mode == "downsample3d":
                self.time_conv = WanCausalConv3d(dim, dim, (3, 1, 1), stride=(2, 1, 1), padding=(0, 0, 0))
        else:
            self.resample = nn.Identity()

    def forward(self, x, feat_cache=None, feat_idx=[0]):
        b, c, t, h, w = x.size()
        if self.mode == "upsample3d" and feat_cache is not None:
            idx = feat_idx[0]
            if feat_cache[idx] is None:
                feat_cache[idx] = "Rep"
                feat_idx[0] += 1
            else:
                cache_x = x[:, :, -CACHE_T:, :, :].clone()
                if cache_x.shape[2] < 2 and feat_cache[idx] is not None and feat_cache[idx] != "Rep":
                    cache_x = torch.cat([feat_cache[idx][:, :, -1, :, :].unsqueeze(2), cache_x], dim=2)
                if cache_x.shape[2] < 2 and feat_cache[idx] is not None and feat_cache[idx] == "Rep":
                    cache_x = torch.cat([torch.zeros_like(cache_x), cache_x], dim=2)
                if feat_cache[idx] == "Rep":
                    x = self.time_conv(x)
                else:
                    x = self.time_conv(x, feat_cache[idx])
                feat_cache[idx] = cache_x
                feat_idx[0] += 1
                x = x.reshape(b, 2, c, t, h, w)
                x = torch.stack((x[:, 0, :, :, :, :], x[:, 1, :, :, :, :]), 3)
                x = x.reshape(b, c, t * 2, h, w)
        t = x.shape[2]
        x = x.permute(0, 2, 1, 3, 4).reshape(b * t, c, h, w)
        x = self.resample(x)
        x = x.view(b, t, x.size(1), x.size(2), x.size(3)).permute(0, 2, 1, 3, 4)
        if self.mode == "downsample3d" and feat_cache is not None:
            idx = feat_idx[0]
            if feat_cache[idx] is None:
                feat_cache[idx] = x.clone()
                feat_idx[0] += 1
            else:
                cache_x = x[:, :, -1:, :, :].clone()
                x = self.time_conv(torch.cat([feat_cache[idx][:, :, -1:, :, :], x], 2))
                feat_cache[idx] = cache_x
                feat_idx[0] += 1
        return x


class WanResidualBlock(nn.Module):
    def __init__(self, in_dim, out_dim, dropout=0.0):
        super().__init__()
        self.nonlinearity = nn.SiLU()
        self.norm1 = WanRMS_norm(in_dim, images=False)
        self.conv1 = WanCausalConv3d(in_dim, out_dim, 3, padding=1)
        self.norm2 = WanRMS_norm(out_dim, images=False)
        self.dropout = nn.Dropout(dropout)
        self.conv2 = WanCausalConv3d(out_dim, out_dim, 3, padding=1)
        self.conv_shortcut = WanCausalConv3d(in_dim, out_dim, 1) if in_dim != out_dim else nn.Identity()

    def forward(self, x, feat_cache=None, feat_idx=[0]):
        h = self.conv_shortcut(x)
        x = self.nonlinearity(self.norm1(x))
        x = _cached_conv(self.conv1, x, feat_cache, feat_idx) if feat_cache is not None else self.conv1(x)
        x = self.nonlinearity(self.norm2(x))
        x = self.dropout(x)
        x = _cached_conv(self.conv2, x, feat_cache, feat_idx) if feat_cache is not None else self.conv2(x)
        return x + h


class WanAttentionBlock(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.norm = WanRMS_norm(dim)
        self.to_qkv = nn.Conv2d(dim, dim * 3, 1)
        self.proj = nn.Conv2d(dim, dim, 1)

    def forward(self, x):
        identity = x
        batch_size, channels, time, height, width = x.size()
        x = x.permute(0, 2, 1, 3, 4).reshape(batch_size * time, channels, height, width)
        x = self.norm(x)
        qkv = self.to_qkv(x)
        qkv = qkv.reshape(batch_size * time, 1, channels * 3, -1)
        qkv = qkv.permute(0, 1, 3, 2).contiguous()
        q, k, v = qkv.chunk(3, dim=-1)
        x = sdpa(q, k, v)
        x = x.squeeze(1).permute(0, 2, 1).reshape(batch_size * time, channels, height, width)
        x = self.proj(x)
        x = x.view(batch_size, time, channels, height, width)
        x = x.permute(0, 2, 1, 3, 4)
        return x + identity


class WanMidBlock(nn.Module):
    def __init__(self, dim, num_layers=1):
        super().__init__()
        self.attentions = nn.ModuleList([WanAttentionBlock(dim) for _ in range(num_layers)])
        self.resnets = nn.ModuleList([WanResidualBlock(dim, dim) for _ in range(num_layers + 1)])

    def forward(self, x, feat_cache=None, feat_idx=[0]):
        x = self.resnets[0](x, feat_cache, feat_idx)
        for attn, resnet in zip(self.attentions, self.resnets[1:]):
            if attn is not None:
                x = attn(x)
            x = resnet(x, feat_cache, feat_idx)
        return x


class WanVaeBlocks(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv_in = WanCausalConv3d(3, 8, 3, padding=1)
        self.res_in = WanResidualBlock(8, 16)
        self.mid_block = WanMidBlock(16)
        self.down = WanResample(16, "downsample2d")
        self.up = WanResample(16, "upsample2d")
        self.res_out = WanResidualBlock(8, 8)
        self.norm_out = WanRMS_norm(8, images=False)
        self.nonlinearity = nn.SiLU()
        self.conv_out = WanCausalConv3d(8, 3, 3, padding=1)

    def forward(self, x):
        x = self.res_in(self.conv_in(x))
        x = self.up(self.down(self.mid_block(x)))
        x = self.res_out(x)
        return self.conv_out(self.nonlinearity(self.norm_out(x)))


if __name__ == "__main__":
    capture_once(
        "wan_vae_blocks", WanVaeBlocks, lambda g: {"video": torch.randn((1, 3, 3, 8, 8), generator=g)}, sys.argv[1],
        dict(library_source="replica of huggingface/diffusers autoencoder_kl_wan.py's blocks (torch 1.13)",
             note="Wan VAE blocks without the frame cache: causal 3-D convolutions padding their past with zeros, "
                  "F.normalize RMS norms with column γ, per-frame single-head attention from a 1x1 conv, 2-D "
                  "resamples with frames folded into the batch"))
