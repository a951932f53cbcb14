"""Stable Video Diffusion's VAE (AutoencoderKLTemporalDecoder), reimplemented for torch 1.13 (no diffusers here),
captured small in f32 on CPU as one forward: the frames encoded as a batch of images, the posterior's mode taken,
decoded with num_frames.

Follows huggingface/diffusers src/diffusers/models/autoencoders/autoencoder_kl_temporal_decoder.py
(AutoencoderKLTemporalDecoder.forward with sample_posterior False: encode (Encoder, quant_conv,
DiagonalGaussianDistribution's mode: the first half of the moments' channels), decode (an all-zero
image_only_indicator [B, F], the TemporalDecoder); TemporalDecoder: conv_in, MidBlockTemporalDecoder, the cast to
the up blocks' dtype, UpBlockTemporalDecoder levels, GroupNorm(32, ε 1e-6)-SiLU-conv_out, then the frames regrouped
[B, C, F, H, W] through time_conv_out, a (3, 1, 1) Conv3d over the frames, and back to [B·F, C, H, W]) and the
parts it imports: autoencoders/vae.py (Encoder with its default 32 norm groups: vae.py's class),
unets/unet_3d_blocks.py (MidBlockTemporalDecoder: layers_per_block SpatioTemporalResBlocks, one Attention (one head
as wide as the map, GroupNorm 32, ε 1e-6, bias, residual_connection: unet2d.py's class) called between the first
two; UpBlockTemporalDecoder: layers_per_block + 1 SpatioTemporalResBlocks, an Upsample2D with its convolution but
on the last level), resnet.py (SpatioTemporalResBlock with temb_channels None, eps 1e-6, temporal_eps 1e-5,
merge_factor 0, merge_strategy "learned", switch_spatial_to_temporal_mix: a ResnetBlock2D per frame, the frames
regrouped [B, C, F, H, W] through a TemporalResnetBlock of (3, 1, 1) Conv3ds without a time embedding, an
AlphaBlender mixing with α = 1 − sigmoid(mix_factor) on the spatial side; svd_unet.py's classes given upstream's
branches for no time embedding and the learned strategy), upsampling.py (Upsample2D: sd_unet.py's class). The same
module tree, parameter names and shapes, call boundaries and arithmetic line for line. Stand-in for what torch 1.13
lacks: F.scaled_dot_product_attention (its math path).

Widths 32 and 32 (upstream's GroupNorms are 32 groups, hard-coded in the decoder), two resnets per encoder level,
two in the decoder's mid block (so that its attention runs, as in SVD's layers_per_block 2), three per decoder
level, 4 latent channels; 3 frames of 8x4 (4x2 latents: a map that is not square), batch 1 (f32 trace about 4.6 MB;
16x16 frames would make it 25 MB).

usage: /usr/bin/python3 bench/unseen/replicas/svd_vae.py OUTDIR
REPLICA_DTYPE=bf16 [REPLICA_DEVICE=cuda] as run.py's replicas: the bf16 run, beside the f32 one.
"""
import functools
import itertools
import sys

import torch
import torch.nn as nn

import svd_unet
import vae
from run import capture_once
from sd_unet import ResnetBlock2D, Upsample2D
from unet2d import Attention

NUM_FRAMES = 3


class AlphaBlender(svd_unet.AlphaBlender):
    """resnet.py's AlphaBlender with its merge_strategy ("learned": α = sigmoid(mix_factor), no image indicator)
    as an argument."""

    def __init__(self, alpha, merge_strategy="learned_with_images", switch_spatial_to_temporal_mix=False):
        super().__init__(alpha, switch_spatial_to_temporal_mix)
        self.merge_strategy = merge_strategy

    def get_alpha(self, image_only_indicator, ndims):
        if self.merge_strategy == "learned":
            return torch.sigmoid(self.mix_factor)
        return super().get_alpha(image_only_indicator, ndims)


class TemporalResnetBlock(svd_unet.TemporalResnetBlock):
    """temb_channels None: no time_emb_proj, and the time embedding's step skipped (upstream's branch)."""

    def __init__(self, in_channels, out_channels, temb_channels=None, eps=1e-6):
        super().__init__(in_channels, out_channels, temb_channels or 1, eps=eps, groups=32)
        if temb_channels is None:
            self.time_emb_proj = None

    def forward(self, input_tensor, temb):
        if self.time_emb_proj is not None:
            return super().forward(input_tensor, temb)
        hidden_states = self.norm1(input_tensor)
        hidden_states = self.nonlinearity(hidden_states)
        hidden_states = self.conv1(hidden_states)
        hidden_states = self.norm2(hidden_states)
        hidden_states = self.nonlinearity(hidden_states)
        hidden_states = self.dropout(hidden_states)
        hidden_states = self.conv2(hidden_states)
        if self.conv_shortcut is not None:
            input_tensor = self.conv_shortcut(input_tensor)
        return input_tensor + hidden_states


class SpatioTemporalResBlock(svd_unet.SpatioTemporalResBlock):
    """resnet.py's SpatioTemporalResBlock with its eps, temporal_eps, merge arguments and temb None (the temporal
    block then run without a frame embedding)."""

    def __init__(self, in_channels, out_channels, temb_channels=None, eps=1e-6, temporal_eps=None, merge_factor=0.5,
                 merge_strategy="learned_with_images", switch_spatial_to_temporal_mix=False):
        nn.Module.__init__(self)
        self.spatial_res_block = ResnetBlock2D(in_channels, out_channels, temb_channels, 32, eps=eps)
        self.temporal_res_block = TemporalResnetBlock(out_channels, out_channels, temb_channels,
                                                      eps=temporal_eps if temporal_eps is not None else eps)
        self.time_mixer = AlphaBlender(merge_factor, merge_strategy, switch_spatial_to_temporal_mix)

    def forward(self, hidden_states, temb=None, image_only_indicator=None):
        if temb is not None:
            return super().forward(hidden_states, temb, image_only_indicator=image_only_indicator)
        num_frames = image_only_indicator.shape[-1]
        hidden_states = self.spatial_res_block(hidden_states, temb)
        batch_frames, channels, height, width = hidden_states.shape
        batch_size = batch_frames // num_frames
        hidden_states_mix = hidden_states[None, :].reshape(batch_size, num_frames, channels, height, width).permute(0, 2, 1, 3, 4)
        hidden_states = hidden_states[None, :].reshape(batch_size, num_frames, channels, height, width).permute(0, 2, 1, 3, 4)
        hidden_states = self.temporal_res_block(hidden_states, temb)
        hidden_states = self.time_mixer(x_spatial=hidden_states_mix, x_temporal=hidden_states,
                                        image_only_indicator=image_only_indicator)
        return hidden_states.permute(0, 2, 1, 3, 4).reshape(batch_frames, channels, height, width)


def _vae_resnet(cin, cout):
    # the temporal decoder's: no time embedding, ε 1e-6 (spatial) / 1e-5 (temporal), learned mix, switched
    return SpatioTemporalResBlock(cin, cout, None, eps=1e-6, temporal_eps=1e-5, merge_factor=0.0,
                                  merge_strategy="learned", switch_spatial_to_temporal_mix=True)


class MidBlockTemporalDecoder(nn.Module):
    def __init__(self, in_channels, out_channels, attention_head_dim=512, num_layers=1):
        super().__init__()
        self.resnets = nn.ModuleList([_vae_resnet(in_channels if i == 0 else out_channels, out_channels)
                                      for i in range(num_layers)])
        self.attentions = nn.ModuleList([Attention(in_channels, in_channels // attention_head_dim, attention_head_dim,
                                                   32, eps=1e-6)])

    def forward(self, hidden_states, image_only_indicator):
        hidden_states = self.resnets[0](hidden_states, image_only_indicator=image_only_indicator)
        for resnet, attn in zip(self.resnets[1:], self.attentions):
            hidden_states = attn(hidden_states)
            hidden_states = resnet(hidden_states, image_only_indicator=image_only_indicator)
        return hidden_states


class UpBlockTemporalDecoder(nn.Module):
    def __init__(self, in_channels, out_channels, num_layers=1, add_upsample=True):
        super().__init__()
        self.resnets = nn.ModuleList([_vae_resnet(in_channels if i == 0 else out_channels, out_channels)
                                      for i in range(num_layers)])
        self.upsamplers = nn.ModuleList([Upsample2D(out_channels, use_conv=True)]) if add_upsample else None

    def forward(self, hidden_states, image_only_indicator):
        for resnet in self.resnets:
            hidden_states = resnet(hidden_states, image_only_indicator=image_only_indicator)
        if self.upsamplers is not None:
            for upsampler in self.upsamplers:
                hidden_states = upsampler(hidden_states)
        return hidden_states


class TemporalDecoder(nn.Module):
    def __init__(self, in_channels=4, out_channels=3, block_out_channels=(128, 256, 512, 512), layers_per_block=2):
        super().__init__()
        self.layers_per_block = layers_per_block
        self.conv_in = nn.Conv2d(in_channels, block_out_channels[-1], kernel_size=3, stride=1, padding=1)
        self.mid_block = MidBlockTemporalDecoder(block_out_channels[-1], block_out_channels[-1],
                                                 attention_head_dim=block_out_channels[-1], num_layers=layers_per_block)
        self.up_blocks = nn.ModuleList([])
        rev = list(reversed(block_out_channels))
        output_channel = rev[0]
        for i in range(len(block_out_channels)):
            prev_output_channel, output_channel = output_channel, rev[i]
            final = i == len(block_out_channels) - 1
            self.up_blocks.append(UpBlockTemporalDecoder(prev_output_channel, output_channel, layers_per_block + 1,
                                                         add_upsample=not final))
        self.conv_norm_out = nn.GroupNorm(num_channels=block_out_channels[0], num_groups=32, eps=1e-6)
        self.conv_act = nn.SiLU()
        self.conv_out = nn.Conv2d(block_out_channels[0], out_channels, kernel_size=3, padding=1)
        conv_out_kernel_size = (3, 1, 1)
        padding = [int(k // 2) for k in conv_out_kernel_size]
        self.time_conv_out = nn.Conv3d(out_channels, out_channels, kernel_size=conv_out_kernel_size, padding=padding)

    def forward(self, sample, image_only_indicator, num_frames=1):
        sample = self.conv_in(sample)
        upscale_dtype = next(itertools.chain(self.up_blocks.parameters(), self.up_blocks.buffers())).dtype
        sample = self.mid_block(sample, image_only_indicator=image_only_indicator)
        sample = sample.to(upscale_dtype)
        for up_block in self.up_blocks:
            sample = up_block(sample, image_only_indicator=image_only_indicator)
        sample = self.conv_norm_out(sample)
        sample = self.conv_act(sample)
        sample = self.conv_out(sample)
        batch_frames, channels, height, width = sample.shape
        batch_size = batch_frames // num_frames
        sample = sample[None, :].reshape(batch_size, num_frames, channels, height, width).permute(0, 2, 1, 3, 4)
        sample = self.time_conv_out(sample)
        return sample.permute(0, 2, 1, 3, 4).reshape(batch_frames, channels, height, width)


class AutoencoderKLTemporalDecoder(vae.AutoencoderKL):
    """encode as AutoencoderKL's (the Encoder, quant_conv, the posterior's mean); no post_quant_conv; the
    TemporalDecoder. forward returns the decoded frames [B·F, 3, H, W] (DecoderOutput's sample)."""

    def __init__(self, in_channels=3, out_channels=3, block_out_channels=(32, 32), layers_per_block=2,
                 latent_channels=4):
        nn.Module.__init__(self)
        self.encoder = vae.Encoder(in_channels, latent_channels, block_out_channels, layers_per_block, 32)
        self.decoder = TemporalDecoder(latent_channels, out_channels, block_out_channels, layers_per_block)
        self.quant_conv = nn.Conv2d(2 * latent_channels, 2 * latent_channels, 1)
        self.post_quant_conv = None

    def decode(self, z, num_frames):
        batch_size = z.shape[0] // num_frames
        image_only_indicator = torch.zeros(batch_size, num_frames, dtype=z.dtype, device=z.device)
        return self.decoder(z, num_frames=num_frames, image_only_indicator=image_only_indicator)

    def forward(self, sample, sample_posterior=False, return_dict=True, generator=None, num_frames=1):
        z = self.encode(sample)  # posterior.mode()
        return self.decode(z, num_frames=num_frames)


def build():
    model = AutoencoderKLTemporalDecoder()
    # the caller's num_frames (capture_once passes the request's tensors only)
    model.forward = functools.partial(model.forward, num_frames=NUM_FRAMES)
    return model


if __name__ == "__main__":
    capture_once(
        "svd_vae", build,
        lambda g: {"sample": torch.randn((NUM_FRAMES, 3, 8, 4), generator=g)},
        sys.argv[1],
        dict(library_source="replica of huggingface/diffusers autoencoder_kl_temporal_decoder.py, vae.py, "
                            "unet_3d_blocks.py and resnet.py (torch 1.13)",
             note="SVD's AutoencoderKLTemporalDecoder at widths 32/32: 3 frames encoded as a batch of images by the "
                  "2-D Encoder, the posterior's mode, decoded with num_frames 3: spatio-temporal resnets (a per-frame "
                  "ResnetBlock2D, a (3,1,1) Conv3d resnet over the frames, mixed by 1 - sigmoid(mix_factor)), "
                  "one-head mid attention, nearest x2 then conv, a (3,1,1) Conv3d time_conv_out"))
