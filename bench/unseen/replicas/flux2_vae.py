"""The FLUX.2 VAE (AutoencoderKLFlux2), reimplemented for torch 1.13 (no diffusers here), captured small in f32 on CPU
as one round trip the way Flux2Pipeline uses it: an image encoded as a reference image is (_encode_vae_image), then
those latents decoded as the pipeline's end decodes its latents.

Follows huggingface/diffusers src/diffusers/models/autoencoders/autoencoder_kl_flux2.py at
19b977730c4850c5dad508b31d6ef12a1a0bedc2 (AutoencoderKLFlux2: vae.py's Encoder with double_z and Decoder, quant_conv
and post_quant_conv 1x1, and bn = nn.BatchNorm2d(prod(patch_size) * latent_channels, eps=batch_norm_eps,
momentum=batch_norm_momentum, affine=False, track_running_stats=True), a module the pipeline never calls, only
reads running_mean and running_var of; _encode: encoder then quant_conv; encode: DiagonalGaussianDistribution of
that; _decode: post_quant_conv then decoder) with src/diffusers/models/autoencoders/vae.py at
04957c2003faa079d73e5a749655ccc0ba4bddbf (DiagonalGaussianDistribution: chunk into mean and logvar, logvar clamped to
[-30, 20], std and var made; mode() is the mean: qwenimage_vae.py's class). Encoder and Decoder are vae.py's
replica's classes (the same upstream classes as AutoencoderKL's: conv_in, DownEncoderBlock2D with its Downsample2D
padded by one zero row and column at the end, UNetMidBlock2D with one one-head attention, GroupNorm-SiLU-conv_out;
UpDecoderBlock2D with nearest x2 then conv). The same module tree, parameter names and shapes, call boundaries and
arithmetic line for line. Stand-in for what torch 1.13 lacks: F.scaled_dot_product_attention (its math path).

Pipeline as Flux2Pipeline (src/diffusers/pipelines/flux2/pipeline_flux2.py at 01f488e6d9c7ea53683fe26e067b82d6960e37f2)
calls it. _encode_vae_image: retrieve_latents(vae.encode(image), sample_mode="argmax") (the posterior's mode),
_patchify_latents (view [B, C, H/2, 2, W/2, 2], permute (0, 1, 3, 5, 2, 4), reshape [B, 4C, H/2, W/2]: channel order
(c, r1, r2)), then (latents - bn.running_mean) / sqrt(bn.running_var + batch_norm_eps), per channel, the statistics
viewed [1, 4C, 1, 1]. __call__'s end (output_type "pil"): latents * sqrt(bn.running_var + batch_norm_eps) +
bn.running_mean (both cast to the latents' dtype), _unpatchify_latents (reshape [B, C, 2, 2, H, W], permute
(0, 1, 4, 2, 5, 3), reshape [B, C, 2H, 2W]), vae.decode(latents, return_dict=False)[0]. Between the two the pipeline
runs its transformer on the latents packed to tokens (_pack_latents, _unpack_latents_with_ids): left out here, so
that the normalisation and its inverse meet directly. The statistics: a fresh BatchNorm2d holds zeros and ones; the
released checkpoint holds trained ones, so build() sets them (running_mean 0.1·N(0, 1), running_var 0.5 + U(0, 1),
from their own seeded generator). Buffers are not recorded in a trace: they are constants of the computation.

Tiny config: FLUX.2's layout (block_out_channels (128, 256, 512, 512), latent_channels 32, layers_per_block 2,
norm_num_groups 32, patch_size (2, 2), batch_norm_eps 1e-4) at widths (8, 16, 16, 16), latent_channels 8 (bn over
32 channels), layers_per_block 1 (so one resnet per encoder level, two per decoder level), 4 groups (upstream's 32
need 32 channels). A [1, 3, 32, 16] image (not square, so that rows and columns cannot be swapped unseen) -> moments [1, 16, 4, 2] ->
mean [1, 8, 4, 2] -> patchified and normalised [1, 32, 2, 1] -> back to [1, 8, 4, 2] -> [1, 3, 32, 16].

usage: /usr/bin/python3 bench/unseen/replicas/flux2_vae.py OUTDIR
REPLICA_DTYPE=bf16 [REPLICA_DEVICE=cuda] as run.py's replicas: the bf16 run, beside the f32 one.
"""
import math
import sys

import torch
import torch.nn as nn

from qwenimage_vae import DiagonalGaussianDistribution
from run import capture_once
from vae import Decoder, Encoder


class AutoencoderKLFlux2(nn.Module):
    def __init__(self, in_channels=3, out_channels=3, block_out_channels=(8, 16, 16, 16), layers_per_block=1,
                 latent_channels=8, norm_num_groups=4, use_quant_conv=True, use_post_quant_conv=True,
                 batch_norm_eps=1e-4, batch_norm_momentum=0.1, patch_size=(2, 2)):
        super().__init__()
        self.batch_norm_eps = batch_norm_eps  # self.config.batch_norm_eps
        self.encoder = Encoder(in_channels, latent_channels, block_out_channels, layers_per_block, norm_num_groups)
        self.decoder = Decoder(latent_channels, out_channels, block_out_channels, layers_per_block, norm_num_groups)
        self.quant_conv = nn.Conv2d(2 * latent_channels, 2 * latent_channels, 1) if use_quant_conv else None
        self.post_quant_conv = nn.Conv2d(latent_channels, latent_channels, 1) if use_post_quant_conv else None
        self.bn = nn.BatchNorm2d(math.prod(patch_size) * latent_channels, eps=batch_norm_eps,
                                 momentum=batch_norm_momentum, affine=False, track_running_stats=True)
        self.use_slicing = False
        self.use_tiling = False

    def _encode(self, x):
        enc = self.encoder(x)  # no tiling
        if self.quant_conv is not None:
            enc = self.quant_conv(enc)
        return enc

    def encode(self, x, return_dict=True):
        h = self._encode(x)  # no slicing
        posterior = DiagonalGaussianDistribution(h)
        return (posterior,)  # AutoencoderKLOutput(latent_dist=posterior)

    def _decode(self, z, return_dict=True):
        if self.post_quant_conv is not None:
            z = self.post_quant_conv(z)
        dec = self.decoder(z)
        return (dec,)

    def decode(self, z, return_dict=True, generator=None):
        decoded = self._decode(z)[0]  # no slicing
        return (decoded,)

    def forward(self, sample, sample_posterior=False, return_dict=True, generator=None):
        x = sample
        posterior = self.encode(x)[0]
        z = posterior.mode()
        dec = self.decode(z)[0]
        return (dec,)


def _patchify_latents(latents):
    batch_size, num_channels_latents, height, width = latents.shape
    latents = latents.view(batch_size, num_channels_latents, height // 2, 2, width // 2, 2)
    latents = latents.permute(0, 1, 3, 5, 2, 4)
    latents = latents.reshape(batch_size, num_channels_latents * 4, height // 2, width // 2)
    return latents


def _unpatchify_latents(latents):
    batch_size, num_channels_latents, height, width = latents.shape
    latents = latents.reshape(batch_size, num_channels_latents // (2 * 2), 2, 2, height, width)
    latents = latents.permute(0, 1, 4, 2, 5, 3)
    latents = latents.reshape(batch_size, num_channels_latents // (2 * 2), height * 2, width * 2)
    return latents


def pipeline_round_trip(vae, image):
    # Flux2Pipeline._encode_vae_image
    image_latents = vae.encode(image)[0].mode()  # retrieve_latents(..., sample_mode="argmax")
    image_latents = _patchify_latents(image_latents)
    latents_bn_mean = vae.bn.running_mean.view(1, -1, 1, 1).to(image_latents.device, image_latents.dtype)
    latents_bn_std = torch.sqrt(vae.bn.running_var.view(1, -1, 1, 1) + vae.batch_norm_eps)
    image_latents = (image_latents - latents_bn_mean) / latents_bn_std
    # Flux2Pipeline.__call__'s end, output_type "pil" (the transformer's denoising left out)
    latents = image_latents
    latents_bn_mean = vae.bn.running_mean.view(1, -1, 1, 1).to(latents.device, latents.dtype)
    latents_bn_std = torch.sqrt(vae.bn.running_var.view(1, -1, 1, 1) + vae.batch_norm_eps).to(
        latents.device, latents.dtype)
    latents = latents * latents_bn_std + latents_bn_mean
    latents = _unpatchify_latents(latents)
    image = vae.decode(latents, return_dict=False)[0]
    return image


def build():
    model = AutoencoderKLFlux2()
    g = torch.Generator().manual_seed(3)
    with torch.no_grad():  # the checkpoint's statistics (a fresh BatchNorm2d's are 0 and 1)
        model.bn.running_mean.copy_(0.1 * torch.randn(model.bn.running_mean.shape, generator=g))
        model.bn.running_var.copy_(0.5 + torch.rand(model.bn.running_var.shape, generator=g))
    model.forward = lambda image: pipeline_round_trip(model, image)
    return model


if __name__ == "__main__":
    capture_once(
        "flux2_vae", build, lambda g: {"image": torch.randn((1, 3, 32, 16), generator=g)}, sys.argv[1],
        dict(library_source="replica of huggingface/diffusers autoencoder_kl_flux2.py@19b977730c48 (vae.py's Encoder, "
                            "Decoder, DiagonalGaussianDistribution) and pipeline_flux2.py@01f488e6d9c7 (torch 1.13)",
             note="AutoencoderKLFlux2 at widths 8/16/16/16 as Flux2Pipeline uses it: encode, quant_conv, the "
                  "posterior's mode, 2x2 patchify to 4x the channels, normalised by the unused BatchNorm2d's running "
                  "statistics, then de-normalised, unpatchified, post_quant_conv, decode"))
