"""The LTX-2 latent upsampler (LTX2LatentUpsamplerModel), reimplemented for torch 1.13 (no diffusers here), captured
small in f32 on CPU as one forward the way LTX2LatentUpsamplePipeline calls it on a first stage's latents.

Follows huggingface/diffusers src/diffusers/models/autoencoders/latent_upsampler_ltx2.py at
e3c4948d7123aaa1cf1a9bd1d0f08b47be97de2e (43c8be3653f3ad358eb6baeb68684027e66a0994 holds the same code less forward's
docstring): ResBlock (conv1 -> GroupNorm(32) -> SiLU -> conv2 -> GroupNorm(32) -> SiLU(· + residual), one SiLU
module called twice; Conv3d for dims 3), PixelShuffleND(2) (unflatten the channels to (-1, p1, p2), permute
(0, 1, 4, 2, 5, 3), flatten(4, 5), flatten(2, 3)), BlurDownsample(dims 2, stride den, kernel 5: a fixed normalised
5x5 binomial kernel, outer product of (1, 4, 6, 4, 1), as a buffer expanded to [C, 1, 5, 5] and applied depthwise by
F.conv2d with padding 2 and stride den; stride 1 returns its input), SpatialRationalResampler (scale -> (num, den)
by RATIONAL_RESAMPLER_SCALE_MAPPING; a 3x3 Conv2d to num^2 times the channels, PixelShuffleND(2) by (num, num), then
BlurDownsample by den), LTX2LatentUpsamplerModel (dims 3: initial Conv3d -> GroupNorm(32) -> SiLU; res_blocks; the
frames folded into the batch, permute(0, 2, 1, 3, 4).flatten(0, 1), for the 2-D upsampler and unfolded after,
unflatten(0, (B, -1)).permute(0, 2, 1, 3, 4); post_upsample_res_blocks; final Conv3d). The same module tree,
parameter names and shapes, call boundaries and arithmetic line for line; nothing torch 1.13 lacks.

Pipeline as LTX2LatentUpsamplePipeline (src/diffusers/pipelines/ltx2/pipeline_ltx2_latent_upsample.py at
5de950c6d2721b3033d07270f296904f77d5a875) calls it with latents supplied ([B, C, F, H, W], the first stage's
output_type="latent" result), latents_normalized=True, output_type="latent", adain_factor 0 and
tone_map_compression_ratio 0 (their defaults): prepare_latents (latents.to(float32)), _denormalize_latents (latents
· vae.latents_std / scaling_factor + vae.latents_mean, the statistics viewed [1, C, 1, 1, 1] and cast to the
latents' dtype), latents.to(latent_upsampler.dtype), self.latent_upsampler(latents), then _normalize_latents
((latents - mean) · scaling_factor / std, in the upsampled latents' dtype). The VAE's latents_mean / latents_std
are persistent buffers of AutoencoderKLLTX2Video (so bf16 where the pipeline runs in bf16, as the upsampler's
weights are): here constants of the pipeline, 0.1·N(0, 1) and 0.5 + U(0, 1) from their own seeded generator (a
fresh VAE holds zeros and ones), cast to the upsampler's dtype as the VAE's would be; scaling_factor 1.0 (LTX-2's
VAE config).

The constructs it shows: 3-D convolutions over (frames, height, width) with GroupNorm of 32 groups (here one
channel per group); residual blocks whose SiLU module runs on the residual sum; the frames folded into the batch for
a 2-D rational resampler (scale 1.5: a conv to 9x the channels, a x3 pixel shuffle, then a fixed depthwise
binomial blur of stride 2) and unfolded; per-channel de-normalisation before the model and normalisation after
(constants, f32 before and the model's dtype after).

Tiny config: LTX-2's layout (in_channels 128, mid_channels 1024, num_blocks_per_stage 4, dims 3, spatial_upsample,
no temporal_upsample, use_rational_resampler with rational_spatial_scale 1.5, LTX-2's x1.5 spatial upscaler; at 2.0
the blur has stride 1 and returns its input) at in_channels 16, mid_channels 32 (the least GroupNorm(32) allows),
num_blocks_per_stage 1. Latents [1, 16, 2, 4, 6] (2 frames, a map of 4x6, not square) -> [1, 32, 2, 4, 6] -> frames
into the batch [2, 32, 4, 6] -> conv to [2, 288, 4, 6] -> shuffle to [2, 32, 12, 18] -> blur stride 2 to
[2, 32, 6, 9] -> [1, 16, 2, 6, 9].

usage: /usr/bin/python3 bench/unseen/replicas/ltx2_latent_upsampler.py OUTDIR
REPLICA_DTYPE=bf16 [REPLICA_DEVICE=cuda] as run.py's replicas: the bf16 run, beside the f32 one.
"""
import math
import sys

import torch
import torch.nn.functional as F

from run import capture_once

RATIONAL_RESAMPLER_SCALE_MAPPING = {
    0.75: (3, 4),
    1.5: (3, 2),
    2.0: (2, 1),
    4.0: (4, 1),
}


class ResBlock(torch.nn.Module):
    def __init__(self, channels, mid_channels=None, dims=3):
        super().__init__()
        if mid_channels is None:
            mid_channels = channels
        Conv = torch.nn.Conv2d if dims == 2 else torch.nn.Conv3d
        self.conv1 = Conv(channels, mid_channels, kernel_size=3, padding=1)
        self.norm1 = torch.nn.GroupNorm(32, mid_channels)
        self.conv2 = Conv(mid_channels, channels, kernel_size=3, padding=1)
        self.norm2 = torch.nn.GroupNorm(32, channels)
        self.activation = torch.nn.SiLU()

    def forward(self, hidden_states):
        residual = hidden_states
        hidden_states = self.conv1(hidden_states)
        hidden_states = self.norm1(hidden_states)
        hidden_states = self.activation(hidden_states)
        hidden_states = self.conv2(hidden_states)
        hidden_states = self.norm2(hidden_states)
        hidden_states = self.activation(hidden_states + residual)
        return hidden_states


class PixelShuffleND(torch.nn.Module):
    def __init__(self, dims, upscale_factors=(2, 2, 2)):
        super().__init__()
        self.dims = dims
        self.upscale_factors = upscale_factors
        if dims not in [1, 2, 3]:
            raise ValueError("dims must be 1, 2, or 3")

    def forward(self, x):
        if self.dims == 3:
            return (
                x.unflatten(1, (-1, *self.upscale_factors[:3]))
                .permute(0, 1, 5, 2, 6, 3, 7, 4)
                .flatten(6, 7)
                .flatten(4, 5)
                .flatten(2, 3)
            )
        elif self.dims == 2:
            return (
                x.unflatten(1, (-1, *self.upscale_factors[:2])).permute(0, 1, 4, 2, 5, 3).flatten(4, 5).flatten(2, 3)
            )
        elif self.dims == 1:
            return x.unflatten(1, (-1, *self.upscale_factors[:1])).permute(0, 1, 3, 2, 4, 5).flatten(2, 3)


class BlurDownsample(torch.nn.Module):
    def __init__(self, dims, stride, kernel_size=5):
        super().__init__()
        if dims not in (2, 3):
            raise ValueError(f"`dims` must be either 2 or 3 but is {dims}")
        if kernel_size < 3 or kernel_size % 2 != 1:
            raise ValueError(f"`kernel_size` must be an odd number >= 3 but is {kernel_size}")
        self.dims = dims
        self.stride = stride
        self.kernel_size = kernel_size
        k = torch.tensor([math.comb(kernel_size - 1, k) for k in range(kernel_size)])
        k2d = k[:, None] @ k[None, :]
        k2d = (k2d / k2d.sum()).float()  # shape (kernel_size, kernel_size)
        self.register_buffer("kernel", k2d[None, None, :, :])  # (1, 1, kernel_size, kernel_size)

    def forward(self, x):
        if self.stride == 1:
            return x
        if self.dims == 2:
            c = x.shape[1]
            weight = self.kernel.expand(c, 1, self.kernel_size, self.kernel_size)  # depthwise
            x = F.conv2d(x, weight=weight, bias=None, stride=self.stride, padding=self.kernel_size // 2, groups=c)
        else:
            b, c, f, _, _ = x.shape
            x = x.transpose(1, 2).flatten(0, 1)
            weight = self.kernel.expand(c, 1, self.kernel_size, self.kernel_size)  # depthwise
            x = F.conv2d(x, weight=weight, bias=None, stride=self.stride, padding=self.kernel_size // 2, groups=c)
            h2, w2 = x.shape[-2:]
            x = x.unflatten(0, (b, f)).reshape(b, -1, f, h2, w2)
        return x


class SpatialRationalResampler(torch.nn.Module):
    def __init__(self, mid_channels=1024, scale=2.0):
        super().__init__()
        self.scale = float(scale)
        num_denom = RATIONAL_RESAMPLER_SCALE_MAPPING.get(scale, None)
        if num_denom is None:
            raise ValueError(f"The supplied `scale` {scale} is not supported")
        self.num, self.den = num_denom
        self.conv = torch.nn.Conv2d(mid_channels, (self.num ** 2) * mid_channels, kernel_size=3, padding=1)
        self.pixel_shuffle = PixelShuffleND(2, upscale_factors=(self.num, self.num))
        self.blur_down = BlurDownsample(dims=2, stride=self.den)

    def forward(self, x):
        x = self.conv(x)
        x = self.pixel_shuffle(x)
        x = self.blur_down(x)
        return x


class LTX2LatentUpsamplerModel(torch.nn.Module):
    def __init__(self, in_channels=16, mid_channels=32, num_blocks_per_stage=1, dims=3, spatial_upsample=True,
                 temporal_upsample=False, rational_spatial_scale=1.5, use_rational_resampler=True):
        super().__init__()
        self.in_channels = in_channels
        self.mid_channels = mid_channels
        self.num_blocks_per_stage = num_blocks_per_stage
        self.dims = dims
        self.spatial_upsample = spatial_upsample
        self.temporal_upsample = temporal_upsample
        ConvNd = torch.nn.Conv2d if dims == 2 else torch.nn.Conv3d
        self.initial_conv = ConvNd(in_channels, mid_channels, kernel_size=3, padding=1)
        self.initial_norm = torch.nn.GroupNorm(32, mid_channels)
        self.initial_activation = torch.nn.SiLU()
        self.res_blocks = torch.nn.ModuleList([ResBlock(mid_channels, dims=dims) for _ in range(num_blocks_per_stage)])
        if spatial_upsample and temporal_upsample:
            self.upsampler = torch.nn.Sequential(
                torch.nn.Conv3d(mid_channels, 8 * mid_channels, kernel_size=3, padding=1),
                PixelShuffleND(3),
            )
        elif spatial_upsample:
            if use_rational_resampler:
                self.upsampler = SpatialRationalResampler(mid_channels=mid_channels, scale=rational_spatial_scale)
            else:
                self.upsampler = torch.nn.Sequential(
                    torch.nn.Conv2d(mid_channels, 4 * mid_channels, kernel_size=3, padding=1),
                    PixelShuffleND(2),
                )
        elif temporal_upsample:
            self.upsampler = torch.nn.Sequential(
                torch.nn.Conv3d(mid_channels, 2 * mid_channels, kernel_size=3, padding=1),
                PixelShuffleND(1),
            )
        else:
            raise ValueError("Either spatial_upsample or temporal_upsample must be True")
        self.post_upsample_res_blocks = torch.nn.ModuleList(
            [ResBlock(mid_channels, dims=dims) for _ in range(num_blocks_per_stage)])
        self.final_conv = ConvNd(mid_channels, in_channels, kernel_size=3, padding=1)

    def forward(self, hidden_states):
        batch_size, num_channels, num_frames, height, width = hidden_states.shape
        if self.dims == 2:
            hidden_states = hidden_states.permute(0, 2, 1, 3, 4).flatten(0, 1)
            hidden_states = self.initial_conv(hidden_states)
            hidden_states = self.initial_norm(hidden_states)
            hidden_states = self.initial_activation(hidden_states)
            for block in self.res_blocks:
                hidden_states = block(hidden_states)
            hidden_states = self.upsampler(hidden_states)
            for block in self.post_upsample_res_blocks:
                hidden_states = block(hidden_states)
            hidden_states = self.final_conv(hidden_states)
            hidden_states = hidden_states.unflatten(0, (batch_size, -1)).permute(0, 2, 1, 3, 4)
        else:
            hidden_states = self.initial_conv(hidden_states)
            hidden_states = self.initial_norm(hidden_states)
            hidden_states = self.initial_activation(hidden_states)
            for block in self.res_blocks:
                hidden_states = block(hidden_states)
            if self.temporal_upsample:
                hidden_states = self.upsampler(hidden_states)
                hidden_states = hidden_states[:, :, 1:, :, :]
            else:
                hidden_states = hidden_states.permute(0, 2, 1, 3, 4).flatten(0, 1)
                hidden_states = self.upsampler(hidden_states)
                hidden_states = hidden_states.unflatten(0, (batch_size, -1)).permute(0, 2, 1, 3, 4)
            for block in self.post_upsample_res_blocks:
                hidden_states = block(hidden_states)
            hidden_states = self.final_conv(hidden_states)
        return hidden_states


# LTX2LatentUpsamplePipeline's static helpers

def _normalize_latents(latents, latents_mean, latents_std, scaling_factor=1.0):
    latents_mean = latents_mean.view(1, -1, 1, 1, 1).to(latents.device, latents.dtype)
    latents_std = latents_std.view(1, -1, 1, 1, 1).to(latents.device, latents.dtype)
    latents = (latents - latents_mean) * scaling_factor / latents_std
    return latents


def _denormalize_latents(latents, latents_mean, latents_std, scaling_factor=1.0):
    latents_mean = latents_mean.view(1, -1, 1, 1, 1).to(latents.device, latents.dtype)
    latents_std = latents_std.view(1, -1, 1, 1, 1).to(latents.device, latents.dtype)
    latents = latents * latents_std / scaling_factor + latents_mean
    return latents


def _vae_statistics(channels):
    """AutoencoderKLLTX2Video's latents_mean / latents_std buffers, as a checkpoint holds them."""
    g = torch.Generator().manual_seed(3)
    return 0.1 * torch.randn((channels,), generator=g), 0.5 + torch.rand((channels,), generator=g)


def pipeline_upsample(latent_upsampler, upsampler_forward, latents, vae_latents_mean, vae_latents_std,
                      vae_scaling_factor=1.0):
    """LTX2LatentUpsamplePipeline.__call__ with latents supplied, latents_normalized=True, output_type="latent".
    upsampler_forward is LTX2LatentUpsamplerModel.forward bound to latent_upsampler (build() rebinds the module's
    forward to this pipeline, as flux2_vae.py does, so the whole round trip is the captured call)."""
    dtype = next(latent_upsampler.parameters()).dtype  # self.latent_upsampler.dtype
    vae_latents_mean = vae_latents_mean.to(dtype)  # the VAE's buffers, placed as the pipeline is (pipe.to(dtype))
    vae_latents_std = vae_latents_std.to(dtype)
    latents = latents.to(dtype=torch.float32)  # prepare_latents(..., dtype=torch.float32, latents=latents)
    latents = _denormalize_latents(latents, vae_latents_mean, vae_latents_std, vae_scaling_factor)
    latents = latents.to(dtype)
    latents_upsampled = upsampler_forward(latents)  # self.latent_upsampler(latents)
    latents = latents_upsampled  # adain_factor 0.0
    # tone_map_compression_ratio 0.0: no tone mapping
    latents = _normalize_latents(latents, vae_latents_mean, vae_latents_std, vae_scaling_factor)
    return latents


def build():
    model = LTX2LatentUpsamplerModel()
    mean, std = _vae_statistics(model.in_channels)
    upsampler_forward = model.forward
    model.forward = lambda latents: pipeline_upsample(model, upsampler_forward, latents, mean, std)
    return model


if __name__ == "__main__":
    capture_once(
        "ltx2_latent_upsampler", build, lambda g: {"latents": torch.randn((1, 16, 2, 4, 6), generator=g)},
        sys.argv[1],
        dict(library_source="replica of huggingface/diffusers latent_upsampler_ltx2.py@e3c4948d7123 and "
                             "pipeline_ltx2_latent_upsample.py@5de950c6d272 (torch 1.13)",
             note="LTX2LatentUpsamplerModel (dims 3, rational resampler x1.5) at mid 32, in 16, one block per stage, "
                  "as LTX2LatentUpsamplePipeline calls it: latents de-normalised by the VAE's per-channel statistics, "
                  "upsampled (Conv3d res blocks, frames into the batch, conv to 9x, x3 pixel shuffle, binomial blur "
                  "stride 2), normalised again"),
        name="latent_upsampler", output="latents")
