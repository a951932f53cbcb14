"""diffusers' AutoencoderKL (the Stable Diffusion VAE; --flux: FLUX's, without the quant convolutions), reimplemented
for torch 1.13 (no diffusers here), captured small in f32 on CPU as one forward: an image encoded, the posterior's
mode taken, decoded.

Follows huggingface/diffusers src/diffusers/models/autoencoders/autoencoder_kl.py (AutoencoderKL.forward with
sample_posterior False: encode, quant_conv, DiagonalGaussianDistribution's mode (the mean: the first half of the
moments' channels), post_quant_conv, decode) and the parts it imports: autoencoders/vae.py (Encoder: conv_in,
DownEncoderBlock2D, UNetMidBlock2D, GroupNorm-SiLU-conv_out to twice the latent channels; Decoder: conv_in,
UNetMidBlock2D, UpDecoderBlock2D, GroupNorm-SiLU-conv_out), unet_2d_blocks.py (DownEncoderBlock2D: resnets without
a time embedding, a Downsample2D whose 3x3 convolution of stride 2 has padding 0 after one zero row and column are
padded at the end; UpDecoderBlock2D: resnets, an Upsample2D with its convolution; UNetMidBlock2D: resnet, attention,
resnet), resnet.py (ResnetBlock2D, ε 1e-6: sd_unet.py's class) and attention_processor.py (Attention with the
group norm, one head as wide as the map, AttnProcessor2_0 on a 4-D input, residual_connection, rescale 1:
unet2d.py's class). The
same module tree, parameter names and shapes, call boundaries and arithmetic line for line. Stand-in for what
torch 1.13 lacks: F.scaled_dot_product_attention (its math path).

Widths 8 and 16, one resnet per encoder level (two per decoder level), GroupNorm of 4 groups (upstream's 32 need
32 channels), a 16x16 image, 4 latent channels (--flux: 16, no quant_conv or post_quant_conv).

usage: /usr/bin/python3 bench/unseen/replicas/vae.py OUTDIR [--flux]
REPLICA_DTYPE=bf16 [REPLICA_DEVICE=cuda] as run.py's replicas: the bf16 run, beside the f32 one.
"""
import sys

import torch
import torch.nn as nn

from run import capture_once
from sd_unet import Downsample2D, ResnetBlock2D, Upsample2D
from unet2d import Attention


class UNetMidBlock2D(nn.Module):
    def __init__(self, channels, groups, eps=1e-6):
        super().__init__()
        self.attentions = nn.ModuleList([Attention(channels, 1, channels, groups, eps)])
        self.resnets = nn.ModuleList([ResnetBlock2D(channels, channels, None, groups, eps=eps) for _ in range(2)])

    def forward(self, hidden_states, temb=None):
        hidden_states = self.resnets[0](hidden_states, temb)
        for attn, resnet in zip(self.attentions, self.resnets[1:]):
            hidden_states = attn(hidden_states, temb=temb)
            hidden_states = resnet(hidden_states, temb)
        return hidden_states


class DownEncoderBlock2D(nn.Module):
    def __init__(self, cin, cout, groups, layers, add_downsample):
        super().__init__()
        self.resnets = nn.ModuleList([ResnetBlock2D(cin if i == 0 else cout, cout, None, groups, eps=1e-6)
                                      for i in range(layers)])
        self.downsamplers = nn.ModuleList([Downsample2D(cout, use_conv=True, padding=0)]) if add_downsample else None

    def forward(self, hidden_states):
        for resnet in self.resnets:
            hidden_states = resnet(hidden_states, temb=None)
        if self.downsamplers is not None:
            for downsampler in self.downsamplers:
                hidden_states = downsampler(hidden_states)
        return hidden_states


class UpDecoderBlock2D(nn.Module):
    def __init__(self, cin, cout, groups, layers, add_upsample):
        super().__init__()
        self.resnets = nn.ModuleList([ResnetBlock2D(cin if i == 0 else cout, cout, None, groups, eps=1e-6)
                                      for i in range(layers)])
        self.upsamplers = nn.ModuleList([Upsample2D(cout, use_conv=True)]) if add_upsample else None

    def forward(self, hidden_states, temb=None):
        for resnet in self.resnets:
            hidden_states = resnet(hidden_states, temb=temb)
        if self.upsamplers is not None:
            for upsampler in self.upsamplers:
                hidden_states = upsampler(hidden_states)
        return hidden_states


class Encoder(nn.Module):
    def __init__(self, in_channels, out_channels, block_out_channels, layers_per_block, groups):
        super().__init__()
        self.conv_in = nn.Conv2d(in_channels, block_out_channels[0], kernel_size=3, stride=1, padding=1)
        self.down_blocks = nn.ModuleList()
        output_channel = block_out_channels[0]
        for i in range(len(block_out_channels)):
            input_channel, output_channel = output_channel, block_out_channels[i]
            final = i == len(block_out_channels) - 1
            self.down_blocks.append(DownEncoderBlock2D(input_channel, output_channel, groups, layers_per_block, not final))
        self.mid_block = UNetMidBlock2D(block_out_channels[-1], groups)
        self.conv_norm_out = nn.GroupNorm(num_channels=block_out_channels[-1], num_groups=groups, eps=1e-6)
        self.conv_act = nn.SiLU()
        self.conv_out = nn.Conv2d(block_out_channels[-1], 2 * out_channels, 3, padding=1)

    def forward(self, sample):
        sample = self.conv_in(sample)
        for down_block in self.down_blocks:
            sample = down_block(sample)
        sample = self.mid_block(sample)
        sample = self.conv_norm_out(sample)
        sample = self.conv_act(sample)
        return self.conv_out(sample)


class Decoder(nn.Module):
    def __init__(self, in_channels, out_channels, block_out_channels, layers_per_block, groups):
        super().__init__()
        self.conv_in = nn.Conv2d(in_channels, block_out_channels[-1], kernel_size=3, stride=1, padding=1)
        self.mid_block = UNetMidBlock2D(block_out_channels[-1], groups)
        rev = list(reversed(block_out_channels))
        self.up_blocks = nn.ModuleList()
        output_channel = rev[0]
        for i in range(len(rev)):
            prev, output_channel = output_channel, rev[i]
            final = i == len(rev) - 1
            self.up_blocks.append(UpDecoderBlock2D(prev, output_channel, groups, layers_per_block + 1, not final))
        self.conv_norm_out = nn.GroupNorm(num_channels=block_out_channels[0], num_groups=groups, eps=1e-6)
        self.conv_act = nn.SiLU()
        self.conv_out = nn.Conv2d(block_out_channels[0], out_channels, 3, padding=1)

    def forward(self, sample, latent_embeds=None):
        sample = self.conv_in(sample)
        upscale_dtype = next(iter(self.up_blocks.parameters())).dtype
        sample = self.mid_block(sample, latent_embeds)
        sample = sample.to(upscale_dtype)
        for up_block in self.up_blocks:
            sample = up_block(sample, latent_embeds)
        sample = self.conv_norm_out(sample)
        sample = self.conv_act(sample)
        return self.conv_out(sample)


class AutoencoderKL(nn.Module):
    def __init__(self, in_channels=3, out_channels=3, block_out_channels=(8, 16), layers_per_block=1, latent_channels=4,
                 groups=4, use_quant_conv=True, use_post_quant_conv=True):
        super().__init__()
        self.encoder = Encoder(in_channels, latent_channels, block_out_channels, layers_per_block, groups)
        self.decoder = Decoder(latent_channels, out_channels, block_out_channels, layers_per_block, groups)
        self.quant_conv = nn.Conv2d(2 * latent_channels, 2 * latent_channels, 1) if use_quant_conv else None
        self.post_quant_conv = nn.Conv2d(latent_channels, latent_channels, 1) if use_post_quant_conv else None

    def encode(self, x):
        h = self.encoder(x)
        moments = self.quant_conv(h) if self.quant_conv is not None else h
        # DiagonalGaussianDistribution(moments).mode(): the mean (logvar, std and var are made and unused)
        mean, logvar = torch.chunk(moments, 2, dim=1)
        return mean

    def decode(self, z):
        if self.post_quant_conv is not None:
            z = self.post_quant_conv(z)
        return self.decoder(z)

    def forward(self, sample):
        return self.decode(self.encode(sample))


FLUX = "--flux" in sys.argv

if __name__ == "__main__":
    capture_once(
        "flux_vae" if FLUX else "sd_vae",
        lambda: (AutoencoderKL(latent_channels=16, use_quant_conv=False, use_post_quant_conv=False) if FLUX
                 else AutoencoderKL()),
        lambda g: {"pixel_values": torch.randn((1, 3, 16, 16), generator=g)},
        sys.argv[1],
        dict(library_source="replica of huggingface/diffusers autoencoder_kl.py and vae.py (torch 1.13)",
             note="AutoencoderKL at widths 8/16: encode (a Downsample2D padded at the end, a mid block with "
                  "one-head attention), the posterior's mode, decode (nearest ×2 then conv)"))
