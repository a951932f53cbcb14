"""diffusers' AsymmetricAutoencoderKL (Zhu et al.'s asymmetric VQGAN for Stable Diffusion inpainting: a KL encoder,
a wider decoder conditioned on the inpainting mask and the masked image), reimplemented for torch 1.13 (no diffusers
here), captured small in f32 on CPU as one forward: an image encoded, the posterior's mode taken, decoded with the
mask and the image.

Follows huggingface/diffusers line for line: src/diffusers/models/autoencoders/autoencoder_asym_kl.py at
049ca3822f9eb3621c96c11bba58b8e579cb3cc1 (AsymmetricAutoencoderKL: encoder = vae.py's Encoder with double_z,
decoder = MaskConditionDecoder, quant_conv 1x1 on 2·latent_channels, post_quant_conv 1x1; forward(sample, mask) with
its default sample_posterior=False: posterior = DiagonalGaussianDistribution(quant_conv(encoder(sample))),
z = posterior.mode() (the mean: the first half of the moments' channels), dec = decode(z, sample, mask):
post_quant_conv, then decoder(z, image, mask)), and src/diffusers/models/autoencoders/vae.py at
04957c2003faa079d73e5a749655ccc0ba4bddbf: Encoder (vae.py's replica's class: the same upstream code as
AutoencoderKL's), MaskConditionEncoder (a stack of convolutions, 3x3 stride 1 for the first two, 4x4 stride 2 with
padding 1 after, widths from out_ch, res_ch and stride 16 by upstream's loop; forward keeps every conv's output in a
dict keyed by str(tuple(shape)) and ReLUs it for the next conv), MaskConditionDecoder (conv_in, UNetMidBlock2D, the
up blocks (UpDecoderBlock2D, layers_per_block + 1 resnets) each preceded by a blend with the condition encoder's map
of the same shape: mask_ = F.interpolate(mask, size=sample.shape[-2:], mode="nearest"),
sample = sample * mask_ + im_x[shape] * (1 - mask_); after the last, sample = sample * mask + im_x[shape] * (1 - mask);
then GroupNorm-SiLU-conv_out; the condition encoder reads masked_image = (1 - mask) * image)). UNetMidBlock2D and
UpDecoderBlock2D are vae.py's replica's classes (unet_2d_blocks.py, with resnet.py's ResnetBlock2D ε 1e-6,
attention_processor.py's Attention with one head as wide as the map, upsampling.py's Upsample2D): the same upstream
code as AutoencoderKL's decoder (MaskConditionDecoder's get_up_block passes prev_output_channel=None, which
UpDecoderBlock2D does not read). The same module tree, parameter names and shapes, call boundaries and arithmetic.
Stand-in for what torch 1.13 lacks: F.scaled_dot_product_attention (its math path).

Pipeline as StableDiffusionInpaintPipeline uses it with an AsymmetricAutoencoderKL: decode(latents, image=init_image,
mask=mask_condition), the unmasked image and the binarised mask (1 where to inpaint), which forward(sample, mask)
reproduces with the encoder's own latents.

Tiny config: down_block_out_channels (8, 16) with layers_per_down_block 1, up_block_out_channels (12, 24) with
layers_per_up_block 2 (so 3 resnets per decoder level; the decoder wider and deeper than the encoder, as upstream's
x-1-5 checkpoint: (128, 256, 512, 512) / 2 against (192, 384, 768, 768) / 3), norm_num_groups 4, latent_channels 4,
act_fn silu, one DownEncoderBlock2D / UpDecoderBlock2D per width. MaskConditionEncoder(in_ch 3, out_ch 12, res_ch 24)
has widths 12, 24, 24, 24, 24 (maps 16², 16², 8², 4², 2²), so the blends meet the keys (1, 24, 8, 8) before the
first up block, (1, 24, 16, 16) before the second and (1, 12, 16, 16) after it. A [1, 3, 16, 16] image and a
[1, 1, 16, 16] binary mask (a rectangle, rows 3..10, columns 5..13: odd edges, so the nearest 8² mask is not the
mask's pooling) -> latent [1, 4, 8, 8] -> [1, 3, 16, 16].

usage: /usr/bin/python3 bench/unseen/replicas/asymmetric_vae.py OUTDIR
REPLICA_DTYPE=bf16 [REPLICA_DEVICE=cuda] as run.py's replicas: the bf16 run, beside the f32 one.
"""
import sys

import torch
import torch.nn as nn

from run import capture_once
from vae import Encoder, UNetMidBlock2D, UpDecoderBlock2D


class MaskConditionEncoder(nn.Module):
    """used in AsymmetricAutoencoderKL"""

    def __init__(self, in_ch, out_ch=192, res_ch=768, stride=16):
        super().__init__()
        channels = []
        while stride > 1:
            stride = stride // 2
            in_ch_ = out_ch * 2
            if out_ch > res_ch:
                out_ch = res_ch
            if stride == 1:
                in_ch_ = res_ch
            channels.append((in_ch_, out_ch))
            out_ch *= 2

        out_channels = []
        for _in_ch, _out_ch in channels:
            out_channels.append(_out_ch)
        out_channels.append(channels[-1][0])

        layers = []
        in_ch_ = in_ch
        for l in range(len(out_channels)):  # noqa: E741
            out_ch_ = out_channels[l]
            if l == 0 or l == 1:
                layers.append(nn.Conv2d(in_ch_, out_ch_, kernel_size=3, stride=1, padding=1))
            else:
                layers.append(nn.Conv2d(in_ch_, out_ch_, kernel_size=4, stride=2, padding=1))
            in_ch_ = out_ch_

        self.layers = nn.Sequential(*layers)

    def forward(self, x, mask=None):
        out = {}
        for l in range(len(self.layers)):  # noqa: E741
            layer = self.layers[l]
            x = layer(x)
            out[str(tuple(x.shape))] = x
            x = torch.relu(x)
        return out


class MaskConditionDecoder(nn.Module):
    def __init__(self, in_channels=3, out_channels=3, block_out_channels=(64,), layers_per_block=2, norm_num_groups=32):
        super().__init__()
        self.layers_per_block = layers_per_block
        self.conv_in = nn.Conv2d(in_channels, block_out_channels[-1], kernel_size=3, stride=1, padding=1)
        self.up_blocks = nn.ModuleList([])
        # mid (norm_type "group": no temb)
        self.mid_block = UNetMidBlock2D(block_out_channels[-1], norm_num_groups)
        # up
        reversed_block_out_channels = list(reversed(block_out_channels))
        output_channel = reversed_block_out_channels[0]
        for i in range(len(block_out_channels)):
            prev_output_channel = output_channel
            output_channel = reversed_block_out_channels[i]
            is_final_block = i == len(block_out_channels) - 1
            self.up_blocks.append(UpDecoderBlock2D(prev_output_channel, output_channel, norm_num_groups,
                                                   self.layers_per_block + 1, not is_final_block))
        # condition encoder
        self.condition_encoder = MaskConditionEncoder(
            in_ch=out_channels, out_ch=block_out_channels[0], res_ch=block_out_channels[-1])
        # out
        self.conv_norm_out = nn.GroupNorm(num_channels=block_out_channels[0], num_groups=norm_num_groups, eps=1e-6)
        self.conv_act = nn.SiLU()
        self.conv_out = nn.Conv2d(block_out_channels[0], out_channels, 3, padding=1)

    def forward(self, z, image=None, mask=None, latent_embeds=None):
        sample = z
        sample = self.conv_in(sample)

        upscale_dtype = next(iter(self.up_blocks.parameters())).dtype
        # middle
        sample = self.mid_block(sample, latent_embeds)
        sample = sample.to(upscale_dtype)

        # condition encoder
        if image is not None and mask is not None:
            masked_image = (1 - mask) * image
            im_x = self.condition_encoder(masked_image, mask)

        # up
        for up_block in self.up_blocks:
            if image is not None and mask is not None:
                sample_ = im_x[str(tuple(sample.shape))]
                mask_ = nn.functional.interpolate(mask, size=sample.shape[-2:], mode="nearest")
                sample = sample * mask_ + sample_ * (1 - mask_)
            sample = up_block(sample, latent_embeds)
        if image is not None and mask is not None:
            sample = sample * mask + im_x[str(tuple(sample.shape))] * (1 - mask)

        # post-process (latent_embeds is None)
        sample = self.conv_norm_out(sample)
        sample = self.conv_act(sample)
        sample = self.conv_out(sample)
        return sample


class AsymmetricAutoencoderKL(nn.Module):
    def __init__(self, in_channels=3, out_channels=3, down_block_out_channels=(8, 16), layers_per_down_block=1,
                 up_block_out_channels=(12, 24), layers_per_up_block=2, latent_channels=4, norm_num_groups=4):
        super().__init__()
        self.encoder = Encoder(in_channels, latent_channels, down_block_out_channels, layers_per_down_block,
                               norm_num_groups)
        self.decoder = MaskConditionDecoder(
            in_channels=latent_channels, out_channels=out_channels, block_out_channels=up_block_out_channels,
            layers_per_block=layers_per_up_block, norm_num_groups=norm_num_groups)
        self.quant_conv = nn.Conv2d(2 * latent_channels, 2 * latent_channels, 1)
        self.post_quant_conv = nn.Conv2d(latent_channels, latent_channels, 1)
        self.use_slicing = False
        self.use_tiling = False

    def encode(self, x):
        h = self.encoder(x)
        moments = self.quant_conv(h)
        # DiagonalGaussianDistribution(moments): mean, logvar = chunk(moments, 2, dim=1); logvar clamped to
        # [-30, 20]; std = exp(0.5 * logvar), var = exp(logvar), made and unused by mode()
        mean, logvar = torch.chunk(moments, 2, dim=1)
        logvar = torch.clamp(logvar, -30.0, 20.0)
        std = torch.exp(0.5 * logvar)  # noqa: F841
        var = torch.exp(logvar)  # noqa: F841
        return mean

    def _decode(self, z, image=None, mask=None):
        z = self.post_quant_conv(z)
        return self.decoder(z, image, mask)

    def decode(self, z, generator=None, image=None, mask=None):
        return self._decode(z, image, mask)

    def forward(self, sample, mask=None, sample_posterior=False, generator=None):
        x = sample
        z = self.encode(x)  # sample_posterior False (upstream's default): posterior.mode()
        return self.decode(z, sample, mask)


def inputs(g):
    sample = torch.randn((1, 3, 16, 16), generator=g)
    mask = torch.zeros((1, 1, 16, 16))
    mask[:, :, 3:11, 5:14] = 1.0
    return {"sample": sample, "mask": mask}


if __name__ == "__main__":
    capture_once(
        "asymmetric_vae", AsymmetricAutoencoderKL, inputs, sys.argv[1],
        dict(library_source="replica of huggingface/diffusers autoencoder_asym_kl.py and vae.py (Encoder, "
                            "MaskConditionEncoder, MaskConditionDecoder) (torch 1.13)",
             note="AsymmetricAutoencoderKL at encoder widths 8/16, decoder widths 12/24: encode, the posterior's "
                  "mode, decode with the inpainting mask: a conv stack over the masked image (1 - mask) * image "
                  "whose maps, picked by shape, are blended in before each up block with the mask resized by "
                  "nearest interpolation (x * m + c * (1 - m)) and once after the last at full size"))
