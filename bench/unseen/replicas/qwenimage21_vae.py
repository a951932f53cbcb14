"""The Qwen-Image 2 VAE (AutoencoderKLQwenImage21), reimplemented for torch 1.13 (no diffusers here), captured small in
f32 on CPU as one forward of a one-frame image: encode, the posterior's mode, decode, run the way diffusers runs it
(the frame cache, feat_cache, a list every block receives whole; one frame is one chunk, so the caches are filled
but never read back).

Follows huggingface/diffusers src/diffusers/models/autoencoders/autoencoder_kl_qwenimage21.py at
21b3a41d7f82acbe69fc6f00c1caf27d37c31f9a (the stored version at d6dfd676aefd4fcf694eb180f0525d9ccec54fc8 is the same
computation: it lacks the "Copied from" notes and asserts `cache_x is None` where the later one raises) with
src/diffusers/models/autoencoders/vae.py's DiagonalGaussianDistribution (mode) and activations.py's
get_activation("silu") (both qwenimage_vae.py's). The same module tree, parameter names and shapes, and call
boundaries; the arithmetic line for line. Stand-in for what torch 1.13 lacks: F.scaled_dot_product_attention
(run.sdpa, its math path). Untiled, unsliced, is_residual=True (the config's default: QwenImage21UpBlock, the
non-residual decoder block, is not built and not replicated), patch_size None.

What it shares with the replicas here, and what differs. It is Wan 2.2's residual VAE (wan22_vae.py) specialised
to images, so these are imported from wan22_vae.py / wan_vae_blocks.py / wan_vae.py: AvgDown3D and DupUp3D (upstream
"Copied from" Wan's DupUp3D; its AvgDown3D raises ValueError where Wan's asserts: the same arithmetic), WanUpsample
(nearest-exact x2 in f32, cast back), and the forwards of WanResample, WanResidualBlock, WanAttentionBlock,
WanMidBlock, WanResidualDownBlock, WanResidualUpBlock, WanEncoder3d (2.2's), WanDecoder3d (2.2's) and
AutoencoderKLWan's clear_cache/_encode/_decode (wan_vae.py's), which upstream's QwenImage21 classes repeat line for
line; each QwenImage21 class below subclasses its Wan replica and builds its own parts, because the parts differ:
 - QwenImage21CausalConv3d is an nn.Conv2d, not a Conv3d: the single frame squeezed out (x.squeeze(2)), the
   spatial padding made by F.pad (the time padding and the cache are gone: a cache_x raises), a 2-D conv, the frame
   axis put back (unsqueeze(2)); so every "3x3x3" conv holds a [out, in, 3, 3] weight and the 3-D resamples'
   time_conv a [2C or C, C, 1, 1] one (unused on one frame: upsample3d's first chunk only marks its cache "Rep",
   downsample3d's first chunk only stores its input);
 - QwenImage21RMS_norm upcasts: F.normalize runs on x.float() when x is bf16/f16/fp8 and is cast back before
   * sqrt(C) * gamma + bias (wan_vae_blocks.py's WanRMS_norm and qwenimage_vae.py's QwenImageRMS_norm, from older
   upstream, normalise in the input's dtype); the same in f32.
qwenimage_vae.py's Qwen-Image VAE (Wan-2.1-style) differs more: Conv3d causal convs, no AvgDown3D/DupUp3D shortcuts,
up blocks that halve the channels; only DiagonalGaussianDistribution and get_activation are taken from it.

Constructs: residual down blocks (resnets, a ZeroPad2d + stride-2 conv downsample with the frame folded into the
batch, plus an AvgDown3D shortcut of the block's input: one frame padded in front with a zero frame where the
level downsamples time (factor_t 2), each 2x2x2 cell folded into the channels and groups averaged, so the zero
frame is half of each mean), RMS norms upcast to f32, single-head attention per frame in both mid blocks,
quant_conv and post_quant_conv as 1x1 convs, the posterior's mean (first half of the channels), residual up blocks
(resnets, nearest-exact x2 in f32 then a conv keeping the channels, plus a DupUp3D shortcut: channels
repeat_interleave'd, unfolded into factor_t x 2 x 2 cells, and on this first chunk the first factor_t - 1 frames cut),
decoder_base_dim unlike base_dim, in/out channels 4, the decode clamped to [-1, 1].

Tiny config: base_dim 4 (upstream 96), decoder_base_dim 6 (144), z_dim 4 (64), dim_mult (1, 2, 2, 2)
(upstream (1, 2, 4, 8, 8)), temperal_downsample (False, True, True) (upstream (False, True, True, True)): three
spatial downsamples, 8x (upstream 16x); num_res_blocks 1 (2); in_channels = out_channels = 4 as upstream.
An image [1, 4, 1, 32, 16] (not square) -> moments [1, 8, 1, 4, 2] -> mean [1, 4, 1, 4, 2] -> [1, 4, 1, 32, 16].
AvgDown3D shortcuts 1x2x2 (4 -> 4, groups of 4), 2x2x2 (4 -> 8, groups of 4), 2x2x2 (8 -> 8, groups of 8), 1x1x1;
DupUp3D shortcuts 2x2x2 (12 -> 12, repeats 8, one frame cut), 2x2x2, 1x2x2 (repeats 4).

usage: /usr/bin/python3 bench/unseen/replicas/qwenimage21_vae.py OUTDIR
REPLICA_DTYPE=bf16 [REPLICA_DEVICE=cuda] as run.py's replicas: the bf16 run, beside the f32 one.
"""
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

import wan22_vae as wan22
import wan_vae as wan21
from qwenimage_vae import DiagonalGaussianDistribution, get_activation
from run import capture_once
from wan_vae_blocks import WanAttentionBlock, WanMidBlock, WanResample, WanResidualBlock, WanUpsample


class QwenImage21AvgDown3D(wan22.AvgDown3D):
    """wan22_vae.py's AvgDown3D (upstream raises ValueError where it asserts)."""


class QwenImage21DupUp3D(wan22.DupUp3D):
    """wan22_vae.py's DupUp3D (upstream: Copied from autoencoder_kl_wan.DupUp3D)."""


class QwenImage21CausalConv3d(nn.Conv2d):
    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0):
        super().__init__(in_channels=in_channels, out_channels=out_channels, kernel_size=kernel_size, stride=stride,
                         padding=padding)
        self._padding = (self.padding[1], self.padding[1], self.padding[0], self.padding[0])
        self.padding = (0, 0)

    def forward(self, x, cache_x=None):
        padding = list(self._padding)
        if cache_x is not None:
            raise ValueError("the image specialization of Wan's causal 3D conv cannot take a feature cache")
        x = x.squeeze(2)
        x = F.pad(x, padding)
        x = super().forward(x)
        x = x.unsqueeze(2)
        return x


class QwenImage21RMS_norm(nn.Module):
    def __init__(self, dim, channel_first=True, images=True, bias=False):
        super().__init__()
        broadcastable_dims = (1, 1, 1) if not images else (1, 1)
        shape = (dim, *broadcastable_dims) if channel_first else (dim,)
        self.channel_first = channel_first
        self.scale = dim ** 0.5
        self.gamma = nn.Parameter(torch.ones(shape))
        self.bias = nn.Parameter(torch.zeros(shape)) if bias else 0.0

    def forward(self, x):
        needs_fp32_normalize = x.dtype in (torch.float16, torch.bfloat16) or any(
            t in str(x.dtype) for t in ("float4_", "float8_"))
        normalized = F.normalize(x.float() if needs_fp32_normalize else x, dim=(1 if self.channel_first else -1)).to(
            x.dtype)
        return normalized * self.scale * self.gamma + self.bias


class QwenImage21Upsample(WanUpsample):
    """wan_vae_blocks.py's WanUpsample (upstream: Copied from autoencoder_kl_wan.WanUpsample)."""


class QwenImage21Resample(WanResample):
    """WanResample's forward (the same lines upstream); its own parts: a 1x1 Conv2d time_conv."""

    def __init__(self, dim, mode, upsample_out_dim=None):
        nn.Module.__init__(self)
        self.dim = dim
        self.mode = mode
        if upsample_out_dim is None:
            upsample_out_dim = dim // 2
        if mode == "upsample2d":
            self.resample = nn.Sequential(QwenImage21Upsample(scale_factor=(2.0, 2.0), mode="nearest-exact"),
                                          nn.Conv2d(dim, upsample_out_dim, 3, padding=1))
        elif mode == "upsample3d":
            self.resample = nn.Sequential(QwenImage21Upsample(scale_factor=(2.0, 2.0), mode="nearest-exact"),
                                          nn.Conv2d(dim, upsample_out_dim, 3, padding=1))
            self.time_conv = QwenImage21CausalConv3d(dim, dim * 2, (1, 1), padding=(0, 0))
        elif mode == "downsample2d":
            self.resample = nn.Sequential(nn.ZeroPad2d((0, 1, 0, 1)), nn.Conv2d(dim, dim, 3, stride=(2, 2)))
        elif mode == "downsample3d":
            self.resample = nn.Sequential(nn.ZeroPad2d((0, 1, 0, 1)), nn.Conv2d(dim, dim, 3, stride=(2, 2)))
            self.time_conv = QwenImage21CausalConv3d(dim, dim, (1, 1), stride=(1, 1), padding=(0, 0))
        else:
            self.resample = nn.Identity()


class QwenImage21ResidualBlock(WanResidualBlock):
    """WanResidualBlock's forward; its own parts."""

    def __init__(self, in_dim, out_dim, dropout=0.0):
        nn.Module.__init__(self)
        self.in_dim = in_dim
        self.out_dim = out_dim
        self.nonlinearity = get_activation("silu")
        self.norm1 = QwenImage21RMS_norm(in_dim, images=False)
        self.conv1 = QwenImage21CausalConv3d(in_dim, out_dim, 3, padding=1)
        self.norm2 = QwenImage21RMS_norm(out_dim, images=False)
        self.dropout = nn.Dropout(dropout)
        self.conv2 = QwenImage21CausalConv3d(out_dim, out_dim, 3, padding=1)
        self.conv_shortcut = QwenImage21CausalConv3d(in_dim, out_dim, 1) if in_dim != out_dim else nn.Identity()


class QwenImage21AttentionBlock(WanAttentionBlock):
    """WanAttentionBlock's forward (upstream: Copied from WanAttentionBlock); its own RMS norm."""

    def __init__(self, dim):
        nn.Module.__init__(self)
        self.dim = dim
        self.norm = QwenImage21RMS_norm(dim)
        self.to_qkv = nn.Conv2d(dim, dim * 3, 1)
        self.proj = nn.Conv2d(dim, dim, 1)


class QwenImage21MidBlock(WanMidBlock):
    """WanMidBlock's forward; its own blocks."""

    def __init__(self, dim, dropout=0.0, num_layers=1):
        nn.Module.__init__(self)
        self.dim = dim
        resnets = [QwenImage21ResidualBlock(dim, dim, dropout)]
        attentions = []
        for _ in range(num_layers):
            attentions.append(QwenImage21AttentionBlock(dim))
            resnets.append(QwenImage21ResidualBlock(dim, dim, dropout))
        self.attentions = nn.ModuleList(attentions)
        self.resnets = nn.ModuleList(resnets)
        self.gradient_checkpointing = False


class QwenImage21ResidualDownBlock(wan22.WanResidualDownBlock):
    """wan22_vae.py's WanResidualDownBlock forward; its own blocks."""

    def __init__(self, in_dim, out_dim, dropout, num_res_blocks, temperal_downsample=False, down_flag=False):
        nn.Module.__init__(self)
        self.avg_shortcut = QwenImage21AvgDown3D(in_dim, out_dim, factor_t=2 if temperal_downsample else 1,
                                                 factor_s=2 if down_flag else 1)
        resnets = []
        for _ in range(num_res_blocks):
            resnets.append(QwenImage21ResidualBlock(in_dim, out_dim, dropout))
            in_dim = out_dim
        self.resnets = nn.ModuleList(resnets)
        if down_flag:
            mode = "downsample3d" if temperal_downsample else "downsample2d"
            self.downsampler = QwenImage21Resample(out_dim, mode=mode)
        else:
            self.downsampler = None


class QwenImage21ResidualUpBlock(wan22.WanResidualUpBlock):
    """wan22_vae.py's WanResidualUpBlock forward; its own blocks."""

    def __init__(self, in_dim, out_dim, num_res_blocks, dropout=0.0, temperal_upsample=False, up_flag=False):
        nn.Module.__init__(self)
        self.in_dim = in_dim
        self.out_dim = out_dim
        if up_flag:
            self.avg_shortcut = QwenImage21DupUp3D(in_dim, out_dim, factor_t=2 if temperal_upsample else 1,
                                                   factor_s=2)
        else:
            self.avg_shortcut = None
        resnets = []
        current_dim = in_dim
        for _ in range(num_res_blocks + 1):
            resnets.append(QwenImage21ResidualBlock(current_dim, out_dim, dropout))
            current_dim = out_dim
        self.resnets = nn.ModuleList(resnets)
        if up_flag:
            upsample_mode = "upsample3d" if temperal_upsample else "upsample2d"
            self.upsampler = QwenImage21Resample(out_dim, mode=upsample_mode, upsample_out_dim=out_dim)
        else:
            self.upsampler = None
        self.gradient_checkpointing = False


class QwenImage21Encoder3d(wan22.WanEncoder3d):
    """wan22_vae.py's WanEncoder3d forward (is_residual); its own blocks."""

    def __init__(self, in_channels=3, dim=128, z_dim=4, dim_mult=(1, 2, 4, 4), num_res_blocks=2, attn_scales=(),
                 temperal_downsample=(True, True, False), dropout=0.0, is_residual=False):
        nn.Module.__init__(self)
        assert is_residual  # the non-residual encoder (plain resnets, attention at attn_scales) is not replicated
        self.dim = dim
        self.z_dim = z_dim
        self.dim_mult = list(dim_mult)
        self.num_res_blocks = num_res_blocks
        self.attn_scales = list(attn_scales)
        self.temperal_downsample = list(temperal_downsample)
        self.nonlinearity = get_activation("silu")
        dims = [dim * u for u in [1] + list(dim_mult)]
        self.conv_in = QwenImage21CausalConv3d(in_channels, dims[0], 3, padding=1)
        self.down_blocks = nn.ModuleList([])
        for i, (in_dim, out_dim) in enumerate(zip(dims[:-1], dims[1:])):
            self.down_blocks.append(QwenImage21ResidualDownBlock(
                in_dim, out_dim, dropout, num_res_blocks,
                temperal_downsample=temperal_downsample[i] if i != len(dim_mult) - 1 else False,
                down_flag=i != len(dim_mult) - 1))
        self.mid_block = QwenImage21MidBlock(out_dim, dropout, num_layers=1)
        self.norm_out = QwenImage21RMS_norm(out_dim, images=False)
        self.conv_out = QwenImage21CausalConv3d(out_dim, z_dim, 3, padding=1)
        self.gradient_checkpointing = False


class QwenImage21Decoder3d(wan22.WanDecoder3d):
    """wan22_vae.py's WanDecoder3d forward (is_residual: in_dim kept); its own blocks."""

    def __init__(self, dim=128, z_dim=4, dim_mult=(1, 2, 4, 4), num_res_blocks=2, attn_scales=(),
                 temperal_upsample=(False, True, True), dropout=0.0, out_channels=3, is_residual=False):
        nn.Module.__init__(self)
        assert is_residual  # QwenImage21UpBlock (the non-residual decoder) is not replicated
        self.dim = dim
        self.z_dim = z_dim
        self.dim_mult = list(dim_mult)
        self.num_res_blocks = num_res_blocks
        self.attn_scales = list(attn_scales)
        self.temperal_upsample = list(temperal_upsample)
        self.nonlinearity = get_activation("silu")
        dims = [dim * u for u in [dim_mult[-1]] + list(dim_mult)[::-1]]
        self.conv_in = QwenImage21CausalConv3d(z_dim, dims[0], 3, padding=1)
        self.mid_block = QwenImage21MidBlock(dims[0], dropout, num_layers=1)
        self.up_blocks = nn.ModuleList([])
        for i, (in_dim, out_dim) in enumerate(zip(dims[:-1], dims[1:])):
            up_flag = i != len(dim_mult) - 1
            self.up_blocks.append(QwenImage21ResidualUpBlock(
                in_dim=in_dim, out_dim=out_dim, num_res_blocks=num_res_blocks, dropout=dropout,
                temperal_upsample=temperal_upsample[i] if up_flag else False, up_flag=up_flag))
        self.norm_out = QwenImage21RMS_norm(out_dim, images=False)
        self.conv_out = QwenImage21CausalConv3d(out_dim, out_channels, 3, padding=1)
        self.gradient_checkpointing = False


class AutoencoderKLQwenImage21(wan21.AutoencoderKLWan):
    """wan_vae.py's clear_cache, _encode and _decode (upstream's, patch_size None, untiled); encode, decode and
    forward as upstream's."""

    def __init__(self, base_dim=96, decoder_base_dim=144, z_dim=64, dim_mult=(1, 2, 4, 8, 8), num_res_blocks=2,
                 attn_scales=(), temperal_downsample=(False, True, True, True), dropout=0.0, is_residual=True,
                 in_channels=4, out_channels=4, patch_size=None, scale_factor_temporal=8, scale_factor_spatial=16):
        nn.Module.__init__(self)
        temperal_downsample = list(temperal_downsample)
        self.z_dim = z_dim
        self.temperal_downsample = temperal_downsample
        self.temperal_upsample = temperal_downsample[::-1]
        if decoder_base_dim is None:
            decoder_base_dim = base_dim
        self.patch_size = patch_size  # self.config.patch_size
        assert patch_size is None  # _patchify / _unpatchify (wan_vae.py's patchify) are not taken here
        self.encoder = QwenImage21Encoder3d(in_channels=in_channels, dim=base_dim, z_dim=z_dim * 2, dim_mult=dim_mult,
                                            num_res_blocks=num_res_blocks, attn_scales=attn_scales,
                                            temperal_downsample=temperal_downsample, dropout=dropout,
                                            is_residual=is_residual)
        self.quant_conv = QwenImage21CausalConv3d(z_dim * 2, z_dim * 2, 1)
        self.post_quant_conv = QwenImage21CausalConv3d(z_dim, z_dim, 1)
        self.decoder = QwenImage21Decoder3d(dim=decoder_base_dim, z_dim=z_dim, dim_mult=dim_mult,
                                            num_res_blocks=num_res_blocks, attn_scales=attn_scales,
                                            temperal_upsample=self.temperal_upsample, dropout=dropout,
                                            out_channels=out_channels, is_residual=is_residual)
        self.spatial_compression_ratio = scale_factor_spatial
        self.use_slicing = False
        self.use_tiling = False
        # _cached_conv_counts, as clear_cache reads them
        self._dec_convs = sum(isinstance(m, QwenImage21CausalConv3d) for m in self.decoder.modules())
        self._enc_convs = sum(isinstance(m, QwenImage21CausalConv3d) for m in self.encoder.modules())

    def encode(self, x, return_dict=True):
        h = self._encode(x)  # no slicing
        posterior = DiagonalGaussianDistribution(h)
        return (posterior,)  # AutoencoderKLOutput(latent_dist=posterior)

    def decode(self, z, return_dict=True):
        decoded = self._decode(z)  # no slicing; _decode(z).sample
        return (decoded,)

    def forward(self, sample, sample_posterior=False, return_dict=True, generator=None):
        x = sample
        posterior = self.encode(x)[0]  # .latent_dist
        z = posterior.mode()
        dec = self.decode(z, return_dict=False)[0]
        return dec  # return_dict=False would give (dec,)


def build():
    return AutoencoderKLQwenImage21(base_dim=4, decoder_base_dim=6, z_dim=4, dim_mult=(1, 2, 2, 2), num_res_blocks=1,
                                    temperal_downsample=(False, True, True), is_residual=True, in_channels=4,
                                    out_channels=4, patch_size=None, scale_factor_temporal=4, scale_factor_spatial=8)


if __name__ == "__main__":
    capture_once(
        "qwenimage21_vae", build, lambda g: {"sample": torch.randn((1, 4, 1, 32, 16), generator=g)}, sys.argv[1],
        dict(library_source="replica of huggingface/diffusers autoencoder_kl_qwenimage21.py@21b3a41d7f82 "
                            "(wan22_vae.py's AvgDown3D, DupUp3D and block forwards; vae.py's "
                            "DiagonalGaussianDistribution) (torch 1.13)",
             note="AutoencoderKLQwenImage21's forward on one 4-channel frame: Wan 2.2's residual VAE as 2-D convs on "
                  "the squeezed frame, RMS norms upcast to f32, AvgDown3D shortcuts (a zero frame padded in front "
                  "where time is downsampled), DupUp3D shortcuts (first chunk: the leading frame cut), per-frame "
                  "single-head attention in the mid blocks, the posterior's mean, the decode clamped to [-1, 1]"),
        output="sample")
