"""The Kandinsky KVAE image autoencoder (AutoencoderKLKVAE), reimplemented for torch 1.13 (no diffusers here),
captured small in f32 on CPU as one forward: encode, the posterior's mode, decode.

Follows huggingface/diffusers src/diffusers/models/autoencoders/autoencoder_kl_kvae.py at
071190daca865a4d04deac0e02cda5b8c5d6f6fa (KVAEResnetBlock2D, KVAEPXSDownsample, KVAEPXSUpsample,
KVAEDecoderSpatialNorm2D, KVAEEncoder2D, KVAEDecoder2D, AutoencoderKLKVAE's _encode/encode/_decode/decode/forward;
the stored version at 661cd71c37d8800f9c9e8fb538eb18c92d57f7a3 is the same computation, written with a
get_norm_layer_2d factory and the class spelled KVAEDecoderSpacialNorm2D) with src/diffusers/models/autoencoders/
vae.py's DiagonalGaussianDistribution (qwenimage_vae.py's class: chunk into mean and logvar, logvar clamped to
[-30, 20], std and var made; mode() is the mean) and activations.py's get_activation("swish") (qwenimage_vae.py's:
a new nn.SiLU each). The same module tree, parameter names and shapes, call boundaries, and arithmetic line for
line; untiled, unsliced, no gradient checkpointing (forward under no_grad).

Constructs:
 - resnet blocks with every 3x3 conv replicate-padded (padding_mode "replicate"), GroupNorm of 32 groups fixed
   (eps 1e-6), a 1x1 nin_shortcut where the width changes; temb_channels 0, so no temb_proj (temb None);
 - KVAEPXSDownsample: PixelUnshuffle(2), the channel's 4 sub-pixels averaged (view [b, c, 4, h, w], mean dim 2),
   plus a 3x3 stride-2 reflect-padded conv of the input, then a 1x1 conv;
 - KVAEPXSUpsample: repeat_interleave(4) over the channels then PixelShuffle(2) (a nearest x2 written as a shuffle),
   plus F.interpolate nearest x2 then a 3x3 reflect-padded conv, then a 1x1 conv;
 - the decoder's spatial norm (MoVQ-style) in every decoder resnet and at norm_out: the latent z itself
   (zq = z, not the post-conv_in features) F.interpolate'd nearest to each map's size, then
   GroupNorm(f) * conv_y(zq) + conv_b(zq), both 1x1 convs of z's channels (add_conv False: no 3x3 conv of zq);
 - encoder conv_in/conv_out zero-padded, decoder conv_in/conv_out replicate-padded; no attention anywhere (the
   attn ModuleLists are empty); the encoder's mid is two resnets, no quant_conv / post_quant_conv.
Stand-in for what torch 1.13 lacks: its CPU replicate and reflect pads have no bf16 kernel, so Conv2d below (an
nn.Conv2d, same name, parameters and call) makes the pad of a bf16 CPU input in f32 and casts it back (a pad only
copies cells, so the values are those of a bf16 pad); f32 runs and GPU runs take nn.Conv2d's own path.

Tiny config: channels 32 (upstream 128; GroupNorm's 32 groups are fixed, so 32 is the least width), ch_mult (1, 1, 2)
(upstream (1, 2, 4, 8): 8x), num_enc_blocks 1 and num_dec_blocks 1 (upstream 2; the decoder makes num + 1 a level),
z_channels 4 (upstream 16), double_z. A [1, 3, 16, 8] image (not square) -> moments [1, 8, 4, 2] -> mean
[1, 4, 4, 2] -> [1, 3, 16, 8]: two PXS downsamples (32 -> 32 -> 64 wide with a nin_shortcut at the last level) and
two PXS upsamples (64 -> 32 with a nin_shortcut).

usage: /usr/bin/python3 bench/unseen/replicas/kvae.py OUTDIR
REPLICA_DTYPE=bf16 [REPLICA_DEVICE=cuda] as run.py's replicas: the bf16 run, beside the f32 one.
"""
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

from qwenimage_vae import DiagonalGaussianDistribution, get_activation
from run import capture_once


class Conv2d(nn.Conv2d):
    """nn.Conv2d; a bf16 input on the CPU has its replicate/reflect pad made in f32 (torch 1.13 has no bf16
    kernel for them) and cast back, which copies the same cells."""

    def _conv_forward(self, input, weight, bias):
        if self.padding_mode != "zeros" and input.dtype == torch.bfloat16 and input.device.type == "cpu":
            padded = F.pad(input.float(), self._reversed_padding_repeated_twice, mode=self.padding_mode)
            return F.conv2d(padded.to(input.dtype), weight, bias, self.stride, 0, self.dilation, self.groups)
        return super()._conv_forward(input, weight, bias)


class KVAEResnetBlock2D(nn.Module):
    def __init__(self, *, in_channels, out_channels=None, conv_shortcut=False, temb_channels=512, zq_ch=None,
                 add_conv=False, act_fn="swish"):
        super().__init__()
        self.in_channels = in_channels
        out_channels = in_channels if out_channels is None else out_channels
        self.out_channels = out_channels
        self.use_conv_shortcut = conv_shortcut
        self.nonlinearity = get_activation(act_fn)

        if zq_ch is None:
            self.norm1 = nn.GroupNorm(num_channels=in_channels, num_groups=32, eps=1e-6, affine=True)
        else:
            self.norm1 = KVAEDecoderSpatialNorm2D(in_channels, zq_channels=zq_ch, add_conv=add_conv)
        self.conv1 = Conv2d(in_channels=in_channels, out_channels=out_channels, kernel_size=3, padding=(1, 1),
                            padding_mode="replicate")
        if temb_channels > 0:
            self.temb_proj = torch.nn.Linear(temb_channels, out_channels)
        if zq_ch is None:
            self.norm2 = nn.GroupNorm(num_channels=out_channels, num_groups=32, eps=1e-6, affine=True)
        else:
            self.norm2 = KVAEDecoderSpatialNorm2D(out_channels, zq_channels=zq_ch, add_conv=add_conv)
        self.conv2 = Conv2d(in_channels=out_channels, out_channels=out_channels, kernel_size=3, padding=(1, 1),
                            padding_mode="replicate")
        if self.in_channels != self.out_channels:
            if self.use_conv_shortcut:
                self.conv_shortcut = Conv2d(in_channels=in_channels, out_channels=out_channels, kernel_size=3,
                                            padding=(1, 1), padding_mode="replicate")
            else:
                self.nin_shortcut = Conv2d(in_channels, out_channels, kernel_size=1, stride=1, padding=0)

    def forward(self, x, temb, zq=None):
        h = x
        if zq is None:
            h = self.norm1(h)
        else:
            h = self.norm1(h, zq)
        h = self.nonlinearity(h)
        h = self.conv1(h)
        if temb is not None:
            h = h + self.temb_proj(self.nonlinearity(temb))[:, :, None, None, None]
        if zq is None:
            h = self.norm2(h)
        else:
            h = self.norm2(h, zq)
        h = self.nonlinearity(h)
        h = self.conv2(h)
        if self.in_channels != self.out_channels:
            if self.use_conv_shortcut:
                x = self.conv_shortcut(x)
            else:
                x = self.nin_shortcut(x)
        return x + h


class KVAEPXSDownsample(nn.Module):
    def __init__(self, in_channels, factor=2):
        super().__init__()
        self.factor = factor
        self.unshuffle = nn.PixelUnshuffle(self.factor)
        self.spatial_conv = Conv2d(in_channels, in_channels, kernel_size=(3, 3), stride=(2, 2), padding=(1, 1),
                                   padding_mode="reflect")
        self.linear = Conv2d(in_channels, in_channels, kernel_size=1, stride=1)

    def forward(self, x):
        pxs_interm = self.unshuffle(x)
        b, c, h, w = pxs_interm.shape
        pxs_interm_view = pxs_interm.view(b, c // self.factor ** 2, self.factor ** 2, h, w)
        pxs_out = torch.mean(pxs_interm_view, dim=2)
        conv_out = self.spatial_conv(x)
        out = conv_out + pxs_out
        return self.linear(out)


class KVAEPXSUpsample(nn.Module):
    def __init__(self, in_channels, factor=2):
        super().__init__()
        self.factor = factor
        self.shuffle = nn.PixelShuffle(self.factor)
        self.spatial_conv = Conv2d(in_channels, in_channels, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1),
                                   padding_mode="reflect")
        self.linear = Conv2d(in_channels, in_channels, kernel_size=1, stride=1)

    def forward(self, x):
        repeated = x.repeat_interleave(self.factor ** 2, dim=1)
        pxs_interm = self.shuffle(repeated)
        image_like_ups = F.interpolate(x, scale_factor=2, mode="nearest")
        conv_out = self.spatial_conv(image_like_ups)
        out = conv_out + pxs_interm
        return self.linear(out)


class KVAEDecoderSpatialNorm2D(nn.Module):
    def __init__(self, in_channels, zq_channels, add_conv=False):
        super().__init__()
        self.norm_layer = nn.GroupNorm(num_channels=in_channels, num_groups=32, eps=1e-6, affine=True)
        self.add_conv = add_conv
        if add_conv:
            self.conv = Conv2d(in_channels=zq_channels, out_channels=zq_channels, kernel_size=3, padding=(1, 1),
                               padding_mode="replicate")
        self.conv_y = Conv2d(in_channels=zq_channels, out_channels=in_channels, kernel_size=1)
        self.conv_b = Conv2d(in_channels=zq_channels, out_channels=in_channels, kernel_size=1)

    def forward(self, f, zq):
        f_first = f
        f_first_size = f_first.shape[2:]
        zq = F.interpolate(zq, size=f_first_size, mode="nearest")
        if self.add_conv:
            zq = self.conv(zq)
        norm_f = self.norm_layer(f)
        new_f = norm_f * self.conv_y(zq) + self.conv_b(zq)
        return new_f


class KVAEEncoder2D(nn.Module):
    def __init__(self, *, ch, ch_mult=(1, 2, 4, 8), num_res_blocks, in_channels, z_channels, double_z=True,
                 act_fn="swish"):
        super().__init__()
        self.ch = ch
        self.temb_ch = 0
        self.num_resolutions = len(ch_mult)
        if isinstance(num_res_blocks, int):
            self.num_res_blocks = [num_res_blocks] * self.num_resolutions
        else:
            self.num_res_blocks = num_res_blocks
        self.nonlinearity = get_activation(act_fn)
        self.in_channels = in_channels
        self.conv_in = Conv2d(in_channels=in_channels, out_channels=self.ch, kernel_size=3, padding=(1, 1))

        in_ch_mult = (1,) + tuple(ch_mult)
        self.down = nn.ModuleList()
        for i_level in range(self.num_resolutions):
            block = nn.ModuleList()
            attn = nn.ModuleList()
            block_in = ch * in_ch_mult[i_level]
            block_out = ch * ch_mult[i_level]
            for i_block in range(self.num_res_blocks[i_level]):
                block.append(KVAEResnetBlock2D(in_channels=block_in, out_channels=block_out,
                                               temb_channels=self.temb_ch))
                block_in = block_out
            down = nn.Module()
            down.block = block
            down.attn = attn
            if i_level < self.num_resolutions - 1:
                down.downsample = KVAEPXSDownsample(in_channels=block_in)
            self.down.append(down)

        self.mid = nn.Module()
        self.mid.block_1 = KVAEResnetBlock2D(in_channels=block_in, out_channels=block_in, temb_channels=self.temb_ch)
        self.mid.block_2 = KVAEResnetBlock2D(in_channels=block_in, out_channels=block_in, temb_channels=self.temb_ch)
        self.norm_out = nn.GroupNorm(num_channels=block_in, num_groups=32, eps=1e-6, affine=True)
        self.conv_out = Conv2d(in_channels=block_in, out_channels=2 * z_channels if double_z else z_channels,
                               kernel_size=3, padding=(1, 1))
        self.gradient_checkpointing = False

    def forward(self, x):
        temb = None
        h = self.conv_in(x)
        for i_level in range(self.num_resolutions):
            for i_block in range(self.num_res_blocks[i_level]):
                h = self.down[i_level].block[i_block](h, temb)
                if len(self.down[i_level].attn) > 0:
                    h = self.down[i_level].attn[i_block](h)
            if i_level != self.num_resolutions - 1:
                h = self.down[i_level].downsample(h)
        h = self.mid.block_1(h, temb)
        h = self.mid.block_2(h, temb)
        h = self.norm_out(h)
        h = self.nonlinearity(h)
        h = self.conv_out(h)
        return h


class KVAEDecoder2D(nn.Module):
    def __init__(self, *, ch, out_ch, ch_mult=(1, 2, 4, 8), num_res_blocks, in_channels, z_channels,
                 give_pre_end=False, zq_ch=None, add_conv=False, act_fn="swish"):
        super().__init__()
        self.ch = ch
        self.temb_ch = 0
        self.num_resolutions = len(ch_mult)
        self.num_res_blocks = num_res_blocks
        self.in_channels = in_channels
        self.give_pre_end = give_pre_end
        self.nonlinearity = get_activation(act_fn)
        if zq_ch is None:
            zq_ch = z_channels
        block_in = ch * ch_mult[self.num_resolutions - 1]
        self.conv_in = Conv2d(in_channels=z_channels, out_channels=block_in, kernel_size=3, padding=(1, 1),
                              padding_mode="replicate")

        self.mid = nn.Module()
        self.mid.block_1 = KVAEResnetBlock2D(in_channels=block_in, out_channels=block_in, temb_channels=self.temb_ch,
                                             zq_ch=zq_ch, add_conv=add_conv)
        self.mid.block_2 = KVAEResnetBlock2D(in_channels=block_in, out_channels=block_in, temb_channels=self.temb_ch,
                                             zq_ch=zq_ch, add_conv=add_conv)

        self.up = nn.ModuleList()
        for i_level in reversed(range(self.num_resolutions)):
            block = nn.ModuleList()
            attn = nn.ModuleList()
            block_out = ch * ch_mult[i_level]
            for i_block in range(self.num_res_blocks + 1):
                block.append(KVAEResnetBlock2D(in_channels=block_in, out_channels=block_out,
                                               temb_channels=self.temb_ch, zq_ch=zq_ch, add_conv=add_conv))
                block_in = block_out
            up = nn.Module()
            up.block = block
            up.attn = attn
            if i_level != 0:
                up.upsample = KVAEPXSUpsample(in_channels=block_in)
            self.up.insert(0, up)

        self.norm_out = KVAEDecoderSpatialNorm2D(block_in, zq_ch, add_conv=add_conv)
        self.conv_out = Conv2d(in_channels=block_in, out_channels=out_ch, kernel_size=3, padding=(1, 1),
                               padding_mode="replicate")
        self.gradient_checkpointing = False

    def forward(self, z):
        self.last_z_shape = z.shape
        temb = None
        zq = z
        h = self.conv_in(z)
        h = self.mid.block_1(h, temb, zq)
        h = self.mid.block_2(h, temb, zq)
        for i_level in reversed(range(self.num_resolutions)):
            for i_block in range(self.num_res_blocks + 1):
                h = self.up[i_level].block[i_block](h, temb, zq)
                if len(self.up[i_level].attn) > 0:
                    h = self.up[i_level].attn[i_block](h, zq)
            if i_level != 0:
                h = self.up[i_level].upsample(h)
        if self.give_pre_end:
            return h
        h = self.norm_out(h, zq)
        h = self.nonlinearity(h)
        h = self.conv_out(h)
        return h


class AutoencoderKLKVAE(nn.Module):
    def __init__(self, in_channels=3, channels=128, num_enc_blocks=2, num_dec_blocks=2, z_channels=16, double_z=True,
                 ch_mult=(1, 2, 4, 8), sample_size=1024):
        super().__init__()
        self.encoder = KVAEEncoder2D(in_channels=in_channels, ch=channels, ch_mult=ch_mult,
                                     num_res_blocks=num_enc_blocks, z_channels=z_channels, double_z=double_z)
        self.decoder = KVAEDecoder2D(out_ch=in_channels, ch=channels, ch_mult=ch_mult, num_res_blocks=num_dec_blocks,
                                     in_channels=None, z_channels=z_channels)
        self.use_slicing = False
        self.use_tiling = False
        self.tile_sample_min_size = sample_size
        self.tile_latent_min_size = int(sample_size / (2 ** (len(ch_mult) - 1)))
        self.tile_overlap_factor = 0.25

    def _encode(self, x):
        batch_size, num_channels, height, width = x.shape
        assert not (self.use_tiling and (width > self.tile_sample_min_size or height > self.tile_sample_min_size))
        enc = self.encoder(x)
        return enc

    def encode(self, x, return_dict=True):
        h = self._encode(x)  # no slicing
        posterior = DiagonalGaussianDistribution(h)
        return (posterior,)  # AutoencoderKLOutput(latent_dist=posterior)

    def _decode(self, z, return_dict=True):
        assert not (self.use_tiling and (z.shape[-1] > self.tile_latent_min_size
                                         or z.shape[-2] > self.tile_latent_min_size))
        dec = self.decoder(z)
        return (dec,)  # DecoderOutput(sample=dec)

    def decode(self, z, return_dict=True, generator=None):
        decoded = self._decode(z)[0]  # no slicing
        return (decoded,)

    def forward(self, sample, sample_posterior=False, return_dict=True, generator=None):
        x = sample
        posterior = self.encode(x)[0]  # .latent_dist
        z = posterior.mode()
        dec = self.decode(z)[0]  # .sample
        return dec  # return_dict=False would give (dec,)


def build():
    return AutoencoderKLKVAE(in_channels=3, channels=32, num_enc_blocks=1, num_dec_blocks=1, z_channels=4,
                             double_z=True, ch_mult=(1, 1, 2), sample_size=1024)


if __name__ == "__main__":
    capture_once(
        "kvae", build, lambda g: {"sample": torch.randn((1, 3, 16, 8), generator=g)}, sys.argv[1],
        dict(library_source="replica of huggingface/diffusers autoencoder_kl_kvae.py@071190daca86 (and vae.py's "
                            "DiagonalGaussianDistribution) (torch 1.13)",
             note="AutoencoderKLKVAE's forward at channels 32, ch_mult (1,1,2): resnets with replicate-padded convs "
                  "and GroupNorm(32), PXS downsamples (pixel-unshuffle mean + reflect stride-2 conv, 1x1) and "
                  "upsamples (repeat_interleave + pixel-shuffle + nearest x2 reflect conv, 1x1), the posterior's "
                  "mode, a decoder whose every norm is GroupNorm(f) * conv_y(z) + conv_b(z) with the latent "
                  "nearest-resized to each map"),
        output="sample")
