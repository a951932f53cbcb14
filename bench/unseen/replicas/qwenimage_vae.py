"""The Qwen-Image VAE (AutoencoderKLQwenImage), reimplemented for torch 1.13 (no diffusers here), captured small in
f32 on CPU as one decode of a one-frame latent (the call QwenImagePipeline makes at the end), or with --encode as
one encode of a one-frame image (its posterior's mode, as the edit pipelines' retrieve_latents(sample_mode=
"argmax") take it). Both run the way diffusers runs them: frame by frame with the frame cache (feat_cache, a list
every block receives whole; a single frame means a single chunk, so the caches are filled but never read back).

Follows huggingface/diffusers src/diffusers/models/autoencoders/autoencoder_kl_qwenimage.py at
6a0233eb7aaa69cc531250f49c47aaf4fa7a62e4 (QwenImageCausalConv3d, QwenImageRMS_norm, QwenImageUpsample,
QwenImageResample, QwenImageResidualBlock, QwenImageAttentionBlock, QwenImageMidBlock, QwenImageEncoder3d,
QwenImageUpBlock, QwenImageDecoder3d, AutoencoderKLQwenImage's clear_cache/_encode/encode/_decode/decode) with
vae.py's DiagonalGaussianDistribution (mode) and activations.py's get_activation("silu") (a new nn.SiLU each):
the same module tree, parameter names and shapes, and call boundaries; the arithmetic line for line. Stand-in
for what torch 1.13 lacks: F.scaled_dot_product_attention (run.sdpa, its math path). Untiled, unsliced.

Qwen-Image's VAE is Wan 2.1's (fine-tuned): causal 3-D convolutions (F.pad with twice the time padding before
the clip, none after; the previous chunk's last frames concatenated in front when cached), RMS norms as
F.normalize over the channels times √C and a γ of [C, 1, 1, 1] (or [C, 1, 1] on 2-D maps), residual blocks
(norm, SiLU, conv, norm, SiLU, dropout, conv, plus a 1x1x1 causal conv shortcut when the width changes), one
single-head attention per frame in each mid block (norm, 1x1 conv to q|k|v, attention over the h·w cells, 1x1
conv, plus the input), 2-D resamples with the frames folded into the batch (downsample: ZeroPad2d right/bottom,
3x3 conv stride 2; upsample: nearest-exact ×2 in f32 then a 3x3 conv halving the channels), and the time
convolutions of the 3-D resamples that a one-frame run never calls (upsample3d's first chunk only marks its
cache "Rep"; downsample3d's first chunk only stores its input). Unlike diffusers' current Wan decoder, no
first_chunk argument. Decode ends clamped to [-1, 1].

Sizes: base_dim 3, z_dim 16 (as Qwen-Image), dim_mult [1, 2, 4, 4] and temperal_downsample [False, True, True]
(as Qwen-Image: 8x spatial), num_res_blocks 1 (2 upstream). Decode: latents [1, 16, 1, 8, 8] -> [1, 3, 1, 64, 64].
Encode (--encode): image [1, 3, 1, 64, 64] -> the posterior's mean [1, 16, 1, 8, 8].

usage: /usr/bin/python3 bench/unseen/replicas/qwenimage_vae.py OUTDIR [--encode]
REPLICA_DTYPE=bf16 [REPLICA_DEVICE=cuda] as run.py's replicas: the bf16 run, beside the f32 one.
"""
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

from run import capture_once, sdpa

CACHE_T = 2


def get_activation(act_fn):
    """activations.get_activation: a new module of ACT2CLS[act_fn]."""
    return {"swish": nn.SiLU, "silu": nn.SiLU, "mish": nn.Mish, "gelu": nn.GELU, "relu": nn.ReLU}[act_fn.lower()]()


class QwenImageCausalConv3d(nn.Conv3d):
    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0):
        super().__init__(in_channels=in_channels, out_channels=out_channels, kernel_size=kernel_size, stride=stride,
                         padding=padding)
        self._padding = (self.padding[2], self.padding[2], self.padding[1], self.padding[1], 2 * self.padding[0], 0)
        self.padding = (0, 0, 0)

    def forward(self, x, cache_x=None):
        padding = list(self._padding)
        if cache_x is not None and self._padding[4] > 0:
            cache_x = cache_x.to(x.device)
            x = torch.cat([cache_x, x], dim=2)
            padding[4] -= cache_x.shape[2]
        x = F.pad(x, padding)
        return super().forward(x)


class QwenImageRMS_norm(nn.Module):
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


class QwenImageUpsample(nn.Upsample):
    def forward(self, x):
        return super().forward(x.float()).type_as(x)


class QwenImageResample(nn.Module):
    def __init__(self, dim, mode):
        super().__init__()
        self.dim = dim
        self.mode = mode
        if mode == "upsample2d":
            self.resample = nn.Sequential(QwenImageUpsample(scale_factor=(2.0, 2.0), mode="nearest-exact"),
                                          nn.Conv2d(dim, dim // 2, 3, padding=1))
        elif mode == "upsample3d":
            self.resample = nn.Sequential(QwenImageUpsample(scale_factor=(2.0, 2.0), mode="nearest-exact"),
                                          nn.Conv2d(dim, dim // 2, 3, padding=1))
            self.time_conv = QwenImageCausalConv3d(dim, dim * 2, (3, 1, 1), padding=(1, 0, 0))
        elif mode == "downsample2d":
            self.resample = nn.Sequential(nn.ZeroPad2d((0, 1, 0, 1)), nn.Conv2d(dim, dim, 3, stride=(2, 2)))
        elif mode == "downsample3d":
            self.resample = nn.Sequential(nn.ZeroPad2d((0, 1, 0, 1)), nn.Conv2d(dim, dim, 3, stride=(2, 2)))
            self.time_conv = QwenImageCausalConv3d(dim, dim, (3, 1, 1), stride=(2, 1, 1), padding=(0, 0, 0))
        else:
            self.resample = nn.Identity()

    def forward(self, x, feat_cache=None, feat_idx=[0]):
        b, c, t, h, w = x.size()
        if self.mode == "upsample3d":
            if feat_cache is not None:
                idx = feat_idx[0]
                if feat_cache[idx] is None:
                    feat_cache[idx] = "Rep"
                    feat_idx[0] += 1
                else:
                    cache_x = x[:, :, -CACHE_T:, :, :].clone()
                    if cache_x.shape[2] < 2 and feat_cache[idx] is not None and feat_cache[idx] != "Rep":
                        cache_x = torch.cat([feat_cache[idx][:, :, -1, :, :].unsqueeze(2).to(cache_x.device),
                                             cache_x], dim=2)
                    if cache_x.shape[2] < 2 and feat_cache[idx] is not None and feat_cache[idx] == "Rep":
                        cache_x = torch.cat([torch.zeros_like(cache_x).to(cache_x.device), cache_x], dim=2)
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

        if self.mode == "downsample3d":
            if feat_cache is not None:
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


class QwenImageResidualBlock(nn.Module):
    def __init__(self, in_dim, out_dim, dropout=0.0, non_linearity="silu"):
        super().__init__()
        self.in_dim = in_dim
        self.out_dim = out_dim
        self.nonlinearity = get_activation(non_linearity)
        self.norm1 = QwenImageRMS_norm(in_dim, images=False)
        self.conv1 = QwenImageCausalConv3d(in_dim, out_dim, 3, padding=1)
        self.norm2 = QwenImageRMS_norm(out_dim, images=False)
        self.dropout = nn.Dropout(dropout)
        self.conv2 = QwenImageCausalConv3d(out_dim, out_dim, 3, padding=1)
        self.conv_shortcut = QwenImageCausalConv3d(in_dim, out_dim, 1) if in_dim != out_dim else nn.Identity()

    def forward(self, x, feat_cache=None, feat_idx=[0]):
        h = self.conv_shortcut(x)
        x = self.norm1(x)
        x = self.nonlinearity(x)
        if feat_cache is not None:
            idx = feat_idx[0]
            cache_x = x[:, :, -CACHE_T:, :, :].clone()
            if cache_x.shape[2] < 2 and feat_cache[idx] is not None:
                cache_x = torch.cat([feat_cache[idx][:, :, -1, :, :].unsqueeze(2).to(cache_x.device), cache_x], dim=2)
            x = self.conv1(x, feat_cache[idx])
            feat_cache[idx] = cache_x
            feat_idx[0] += 1
        else:
            x = self.conv1(x)
        x = self.norm2(x)
        x = self.nonlinearity(x)
        x = self.dropout(x)
        if feat_cache is not None:
            idx = feat_idx[0]
            cache_x = x[:, :, -CACHE_T:, :, :].clone()
            if cache_x.shape[2] < 2 and feat_cache[idx] is not None:
                cache_x = torch.cat([feat_cache[idx][:, :, -1, :, :].unsqueeze(2).to(cache_x.device), cache_x], dim=2)
            x = self.conv2(x, feat_cache[idx])
            feat_cache[idx] = cache_x
            feat_idx[0] += 1
        else:
            x = self.conv2(x)
        return x + h


class QwenImageAttentionBlock(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim
        self.norm = QwenImageRMS_norm(dim)
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


class QwenImageMidBlock(nn.Module):
    def __init__(self, dim, dropout=0.0, non_linearity="silu", num_layers=1):
        super().__init__()
        self.dim = dim
        resnets = [QwenImageResidualBlock(dim, dim, dropout, non_linearity)]
        attentions = []
        for _ in range(num_layers):
            attentions.append(QwenImageAttentionBlock(dim))
            resnets.append(QwenImageResidualBlock(dim, dim, dropout, non_linearity))
        self.attentions = nn.ModuleList(attentions)
        self.resnets = nn.ModuleList(resnets)
        self.gradient_checkpointing = False

    def forward(self, x, feat_cache=None, feat_idx=[0]):
        x = self.resnets[0](x, feat_cache, feat_idx)
        for attn, resnet in zip(self.attentions, self.resnets[1:]):
            if attn is not None:
                x = attn(x)
            x = resnet(x, feat_cache, feat_idx)
        return x


class QwenImageEncoder3d(nn.Module):
    def __init__(self, dim=128, z_dim=4, dim_mult=[1, 2, 4, 4], num_res_blocks=2, attn_scales=[],
                 temperal_downsample=[True, True, False], dropout=0.0, non_linearity="silu"):
        super().__init__()
        self.dim = dim
        self.z_dim = z_dim
        self.dim_mult = dim_mult
        self.num_res_blocks = num_res_blocks
        self.attn_scales = attn_scales
        self.temperal_downsample = temperal_downsample
        self.nonlinearity = get_activation(non_linearity)

        dims = [dim * u for u in [1] + dim_mult]
        scale = 1.0
        self.conv_in = QwenImageCausalConv3d(3, dims[0], 3, padding=1)
        self.down_blocks = nn.ModuleList([])
        for i, (in_dim, out_dim) in enumerate(zip(dims[:-1], dims[1:])):
            for _ in range(num_res_blocks):
                self.down_blocks.append(QwenImageResidualBlock(in_dim, out_dim, dropout))
                if scale in attn_scales:
                    self.down_blocks.append(QwenImageAttentionBlock(out_dim))
                in_dim = out_dim
            if i != len(dim_mult) - 1:
                mode = "downsample3d" if temperal_downsample[i] else "downsample2d"
                self.down_blocks.append(QwenImageResample(out_dim, mode=mode))
                scale /= 2.0
        self.mid_block = QwenImageMidBlock(out_dim, dropout, non_linearity, num_layers=1)
        self.norm_out = QwenImageRMS_norm(out_dim, images=False)
        self.conv_out = QwenImageCausalConv3d(out_dim, z_dim, 3, padding=1)
        self.gradient_checkpointing = False

    def forward(self, x, feat_cache=None, feat_idx=[0]):
        if feat_cache is not None:
            idx = feat_idx[0]
            cache_x = x[:, :, -CACHE_T:, :, :].clone()
            if cache_x.shape[2] < 2 and feat_cache[idx] is not None:
                cache_x = torch.cat([feat_cache[idx][:, :, -1, :, :].unsqueeze(2).to(cache_x.device), cache_x], dim=2)
            x = self.conv_in(x, feat_cache[idx])
            feat_cache[idx] = cache_x
            feat_idx[0] += 1
        else:
            x = self.conv_in(x)
        for layer in self.down_blocks:
            if feat_cache is not None:
                x = layer(x, feat_cache, feat_idx)
            else:
                x = layer(x)
        x = self.mid_block(x, feat_cache, feat_idx)
        x = self.norm_out(x)
        x = self.nonlinearity(x)
        if feat_cache is not None:
            idx = feat_idx[0]
            cache_x = x[:, :, -CACHE_T:, :, :].clone()
            if cache_x.shape[2] < 2 and feat_cache[idx] is not None:
                cache_x = torch.cat([feat_cache[idx][:, :, -1, :, :].unsqueeze(2).to(cache_x.device), cache_x], dim=2)
            x = self.conv_out(x, feat_cache[idx])
            feat_cache[idx] = cache_x
            feat_idx[0] += 1
        else:
            x = self.conv_out(x)
        return x


class QwenImageUpBlock(nn.Module):
    def __init__(self, in_dim, out_dim, num_res_blocks, dropout=0.0, upsample_mode=None, non_linearity="silu"):
        super().__init__()
        self.in_dim = in_dim
        self.out_dim = out_dim
        resnets = []
        current_dim = in_dim
        for _ in range(num_res_blocks + 1):
            resnets.append(QwenImageResidualBlock(current_dim, out_dim, dropout, non_linearity))
            current_dim = out_dim
        self.resnets = nn.ModuleList(resnets)
        self.upsamplers = None
        if upsample_mode is not None:
            self.upsamplers = nn.ModuleList([QwenImageResample(out_dim, mode=upsample_mode)])
        self.gradient_checkpointing = False

    def forward(self, x, feat_cache=None, feat_idx=[0]):
        for resnet in self.resnets:
            if feat_cache is not None:
                x = resnet(x, feat_cache, feat_idx)
            else:
                x = resnet(x)
        if self.upsamplers is not None:
            if feat_cache is not None:
                x = self.upsamplers[0](x, feat_cache, feat_idx)
            else:
                x = self.upsamplers[0](x)
        return x


class QwenImageDecoder3d(nn.Module):
    def __init__(self, dim=128, z_dim=4, dim_mult=[1, 2, 4, 4], num_res_blocks=2, attn_scales=[],
                 temperal_upsample=[False, True, True], dropout=0.0, non_linearity="silu"):
        super().__init__()
        self.dim = dim
        self.z_dim = z_dim
        self.dim_mult = dim_mult
        self.num_res_blocks = num_res_blocks
        self.attn_scales = attn_scales
        self.temperal_upsample = temperal_upsample
        self.nonlinearity = get_activation(non_linearity)

        dims = [dim * u for u in [dim_mult[-1]] + dim_mult[::-1]]
        scale = 1.0 / 2 ** (len(dim_mult) - 2)
        self.conv_in = QwenImageCausalConv3d(z_dim, dims[0], 3, padding=1)
        self.mid_block = QwenImageMidBlock(dims[0], dropout, non_linearity, num_layers=1)
        self.up_blocks = nn.ModuleList([])
        for i, (in_dim, out_dim) in enumerate(zip(dims[:-1], dims[1:])):
            if i > 0:
                in_dim = in_dim // 2
            upsample_mode = None
            if i != len(dim_mult) - 1:
                upsample_mode = "upsample3d" if temperal_upsample[i] else "upsample2d"
            up_block = QwenImageUpBlock(in_dim=in_dim, out_dim=out_dim, num_res_blocks=num_res_blocks,
                                        dropout=dropout, upsample_mode=upsample_mode, non_linearity=non_linearity)
            self.up_blocks.append(up_block)
            if upsample_mode is not None:
                scale *= 2.0
        self.norm_out = QwenImageRMS_norm(out_dim, images=False)
        self.conv_out = QwenImageCausalConv3d(out_dim, 3, 3, padding=1)
        self.gradient_checkpointing = False

    def forward(self, x, feat_cache=None, feat_idx=[0]):
        if feat_cache is not None:
            idx = feat_idx[0]
            cache_x = x[:, :, -CACHE_T:, :, :].clone()
            if cache_x.shape[2] < 2 and feat_cache[idx] is not None:
                cache_x = torch.cat([feat_cache[idx][:, :, -1, :, :].unsqueeze(2).to(cache_x.device), cache_x], dim=2)
            x = self.conv_in(x, feat_cache[idx])
            feat_cache[idx] = cache_x
            feat_idx[0] += 1
        else:
            x = self.conv_in(x)
        x = self.mid_block(x, feat_cache, feat_idx)
        for up_block in self.up_blocks:
            x = up_block(x, feat_cache, feat_idx)
        x = self.norm_out(x)
        x = self.nonlinearity(x)
        if feat_cache is not None:
            idx = feat_idx[0]
            cache_x = x[:, :, -CACHE_T:, :, :].clone()
            if cache_x.shape[2] < 2 and feat_cache[idx] is not None:
                cache_x = torch.cat([feat_cache[idx][:, :, -1, :, :].unsqueeze(2).to(cache_x.device), cache_x], dim=2)
            x = self.conv_out(x, feat_cache[idx])
            feat_cache[idx] = cache_x
            feat_idx[0] += 1
        else:
            x = self.conv_out(x)
        return x


class DiagonalGaussianDistribution:
    """vae.py's DiagonalGaussianDistribution (deterministic=False), as far as mode() needs it."""

    def __init__(self, parameters, deterministic=False):
        self.parameters = parameters
        self.mean, self.logvar = torch.chunk(parameters, 2, dim=1)
        self.logvar = torch.clamp(self.logvar, -30.0, 20.0)
        self.deterministic = deterministic
        self.std = torch.exp(0.5 * self.logvar)
        self.var = torch.exp(self.logvar)

    def mode(self):
        return self.mean


class AutoencoderKLQwenImage(nn.Module):
    def __init__(self, base_dim=96, z_dim=16, dim_mult=(1, 2, 4, 4), num_res_blocks=2, attn_scales=(),
                 temperal_downsample=(False, True, True), dropout=0.0):
        super().__init__()
        dim_mult, attn_scales, temperal_downsample = list(dim_mult), list(attn_scales), list(temperal_downsample)
        self.z_dim = z_dim
        self.temperal_downsample = temperal_downsample
        self.temperal_upsample = temperal_downsample[::-1]
        self.encoder = QwenImageEncoder3d(base_dim, z_dim * 2, dim_mult, num_res_blocks, attn_scales,
                                          self.temperal_downsample, dropout)
        self.quant_conv = QwenImageCausalConv3d(z_dim * 2, z_dim * 2, 1)
        self.post_quant_conv = QwenImageCausalConv3d(z_dim, z_dim, 1)
        self.decoder = QwenImageDecoder3d(base_dim, z_dim, dim_mult, num_res_blocks, attn_scales,
                                          self.temperal_upsample, dropout)
        self.spatial_compression_ratio = 2 ** len(self.temperal_downsample)
        self.use_slicing = False
        self.use_tiling = False
        self.tile_sample_min_height = 256
        self.tile_sample_min_width = 256

    def clear_cache(self):
        def _count_conv3d(model):
            count = 0
            for m in model.modules():
                if isinstance(m, QwenImageCausalConv3d):
                    count += 1
            return count

        self._conv_num = _count_conv3d(self.decoder)
        self._conv_idx = [0]
        self._feat_map = [None] * self._conv_num
        self._enc_conv_num = _count_conv3d(self.encoder)
        self._enc_conv_idx = [0]
        self._enc_feat_map = [None] * self._enc_conv_num

    def _encode(self, x):
        _, _, num_frame, height, width = x.shape
        assert not (self.use_tiling and (width > self.tile_sample_min_width or height > self.tile_sample_min_height))
        self.clear_cache()
        iter_ = 1 + (num_frame - 1) // 4
        for i in range(iter_):
            self._enc_conv_idx = [0]
            if i == 0:
                out = self.encoder(x[:, :, :1, :, :], feat_cache=self._enc_feat_map, feat_idx=self._enc_conv_idx)
            else:
                out_ = self.encoder(x[:, :, 1 + 4 * (i - 1): 1 + 4 * i, :, :], feat_cache=self._enc_feat_map,
                                    feat_idx=self._enc_conv_idx)
                out = torch.cat([out, out_], 2)
        enc = self.quant_conv(out)
        self.clear_cache()
        return enc

    def encode(self, x, return_dict=True):
        h = self._encode(x)
        posterior = DiagonalGaussianDistribution(h)
        return (posterior,)

    def _decode(self, z, return_dict=True):
        _, _, num_frame, height, width = z.shape
        self.clear_cache()
        x = self.post_quant_conv(z)
        for i in range(num_frame):
            self._conv_idx = [0]
            if i == 0:
                out = self.decoder(x[:, :, i: i + 1, :, :], feat_cache=self._feat_map, feat_idx=self._conv_idx)
            else:
                out_ = self.decoder(x[:, :, i: i + 1, :, :], feat_cache=self._feat_map, feat_idx=self._conv_idx)
                out = torch.cat([out, out_], 2)
        out = torch.clamp(out, min=-1.0, max=1.0)
        self.clear_cache()
        return (out,)

    def decode(self, z, return_dict=True):
        decoded = self._decode(z)[0]
        return (decoded,)

    def forward(self, sample, sample_posterior=False, return_dict=True, generator=None):
        x = sample
        posterior = self.encode(x)[0]
        z = posterior.mode()
        return self.decode(z)


def build():
    return AutoencoderKLQwenImage(base_dim=3, z_dim=16, dim_mult=(1, 2, 4, 4), num_res_blocks=1,
                                  temperal_downsample=(False, True, True))


def build_decode():
    """vae.decode(latents, return_dict=False)[0], as QwenImagePipeline calls it, captured as the model's top call."""
    model = build()
    model.forward = lambda z: model.decode(z, return_dict=False)[0]
    return model


def build_encode():
    """vae.encode(image).latent_dist.mode(), as retrieve_latents(sample_mode="argmax") takes it."""
    model = build()
    model.forward = lambda x: model.encode(x)[0].mode()
    return model


ENCODE = "--encode" in sys.argv

if __name__ == "__main__":
    src = ("replica of huggingface/diffusers autoencoder_kl_qwenimage.py@6a0233eb7aaa (and vae.py's "
           "DiagonalGaussianDistribution) (torch 1.13)")
    if ENCODE:
        capture_once(
            "qwenimage_vae_encode", build_encode,
            lambda g: {"image": torch.randn((1, 3, 1, 64, 64), generator=g)}, sys.argv[1],
            dict(library_source=src,
                 note="the Qwen-Image VAE's encode of one frame (Wan-2.1-style causal 3-D conv encoder with the "
                      "frame cache, one chunk), quant_conv, the posterior's mean (first 16 of 32 channels): "
                      "base_dim 3, dim_mult [1,2,4,4], downsample2d then two downsample3d (time convs unused on "
                      "one frame), a mid block with per-frame single-head attention"), output="latents")
    else:
        capture_once(
            "qwenimage_vae", build_decode,
            lambda g: {"latents": torch.randn((1, 16, 1, 8, 8), generator=g)}, sys.argv[1],
            dict(library_source=src,
                 note="the Qwen-Image VAE's decode of one latent frame [1,16,1,8,8] (post_quant_conv, the "
                      "Wan-2.1-style causal 3-D conv decoder with the frame cache, one chunk, clamp to [-1,1]): "
                      "base_dim 3, dim_mult [1,2,4,4], a mid block with per-frame single-head attention, two "
                      "upsample3d (first chunk: time conv skipped, cache marked 'Rep') and one upsample2d, each "
                      "nearest-exact x2 then a 3x3 conv halving the channels"))
