"""AutoencoderTiny (TAESD, Ollin Boer Bohan's tiny distilled VAE as diffusers wraps it), reimplemented for torch 1.13
(no diffusers here), captured small in f32 on CPU as one AutoencoderTiny.forward: encode, the latents' byte
quantisation round trip, decode; no tiling and no slicing.

Follows huggingface/diffusers at 049ca3822f9eb3621c96c11bba58b8e579cb3cc1 line for line:
src/diffusers/models/unets/unet_2d_blocks.py's AutoencoderTinyBlock (conv = Sequential(3x3 conv, act, 3x3 conv,
act, 3x3 conv) where both act slots hold the one get_activation("relu") module, so the same nn.ReLU is called
twice; skip = nn.Identity when the width is kept, as it always is here; fuse = nn.ReLU on conv(x) + skip(x));
src/diffusers/models/autoencoders/vae.py's EncoderTiny (layers = Sequential: a 3x3 conv to block_out_channels[0],
then per level a stride-2 3x3 conv without bias (levels after the first) and num_blocks AutoencoderTinyBlocks,
then a 3x3 conv to latent_channels; forward layers(x.add(1).div(2))) and DecoderTiny (forward: x = tanh(x / 3) * 3,
then layers = Sequential(3x3 conv, ReLU, per level num_blocks AutoencoderTinyBlocks, a nn.Upsample(scale_factor=2,
mode="nearest") on all but the last level, a 3x3 conv without bias, or to out_channels with bias on the last
level), then x.mul(2).sub(1)); src/diffusers/models/autoencoders/autoencoder_tiny.py's AutoencoderTiny
(scale_latents: x.div(2 * latent_magnitude).add(latent_shift).clamp(0, 1); unscale_latents:
x.sub(latent_shift).mul(2 * latent_magnitude); forward: enc = encoder(sample), scaled_enc =
scale_latents(enc).mul_(255).round_().byte(), unscaled_enc = unscale_latents(scaled_enc / 255.0), decoder(unscaled_enc)).
get_activation("relu") is diffusers.models.activations' ACT2CLS["relu"]() = nn.ReLU(). The same module tree,
parameter names and shapes, call boundaries and arithmetic.

One deviation, on the bf16 run only: upstream's scaled_enc / 255.0 divides a uint8 tensor by a Python float, which
gives torch's default dtype (f32) whatever the model's dtype, so in a bf16 model the decoder's first conv gets an f32
input against bf16 weights and upstream's forward raises (a dtype mismatch); here the dequantised latent is cast back
to the encoder output's dtype when they differ (never in f32, where the trace is upstream's exactly).

Tiny config: the default (TAESD) layout kept block for block (num_encoder_blocks (1, 3, 3, 3), num_decoder_blocks
(3, 3, 3, 1), so three stride-2 downsamples and three nearest 2x upsamples, latent_channels 4, latent_magnitude 3,
latent_shift 0.5, act_fn "relu", upsample_fn "nearest", upsampling_scaling_factor 2) with the widths (64, 64, 64, 64)
cut to (4, 4, 4, 4) for the encoder and the decoder (EncoderTiny's stride-2 convs map num_channels to num_channels,
so the levels' widths must be equal, as they are upstream). A [1, 3, 64, 64] image -> latent [1, 4, 8, 8] ->
[1, 3, 64, 64].

usage: /usr/bin/python3 bench/unseen/replicas/tiny_vae.py OUTDIR
REPLICA_DTYPE=bf16 [REPLICA_DEVICE=cuda] as run.py's replicas: the bf16 run, beside the f32 one.
"""
import sys

import torch
import torch.nn as nn

from run import capture_once


def get_activation(act_fn):
    """diffusers.models.activations.get_activation: a fresh module from ACT2CLS."""
    act2cls = {"swish": nn.SiLU, "silu": nn.SiLU, "mish": nn.Mish, "gelu": nn.GELU, "relu": nn.ReLU}
    act_fn = act_fn.lower()
    if act_fn in act2cls:
        return act2cls[act_fn]()
    raise ValueError(f"activation function {act_fn} not found in ACT2FN mapping {list(act2cls.keys())}")


class AutoencoderTinyBlock(nn.Module):
    def __init__(self, in_channels, out_channels, act_fn):
        super().__init__()
        act_fn = get_activation(act_fn)
        self.conv = nn.Sequential(
            nn.Conv2d(in_channels, out_channels, kernel_size=3, padding=1),
            act_fn,
            nn.Conv2d(out_channels, out_channels, kernel_size=3, padding=1),
            act_fn,
            nn.Conv2d(out_channels, out_channels, kernel_size=3, padding=1),
        )
        self.skip = (
            nn.Conv2d(in_channels, out_channels, kernel_size=1, bias=False)
            if in_channels != out_channels
            else nn.Identity()
        )
        self.fuse = nn.ReLU()

    def forward(self, x):
        return self.fuse(self.conv(x) + self.skip(x))


class EncoderTiny(nn.Module):
    def __init__(self, in_channels, out_channels, num_blocks, block_out_channels, act_fn):
        super().__init__()
        layers = []
        for i, num_block in enumerate(num_blocks):
            num_channels = block_out_channels[i]
            if i == 0:
                layers.append(nn.Conv2d(in_channels, num_channels, kernel_size=3, padding=1))
            else:
                layers.append(nn.Conv2d(num_channels, num_channels, kernel_size=3, padding=1, stride=2, bias=False))
            for _ in range(num_block):
                layers.append(AutoencoderTinyBlock(num_channels, num_channels, act_fn))
        layers.append(nn.Conv2d(block_out_channels[-1], out_channels, kernel_size=3, padding=1))
        self.layers = nn.Sequential(*layers)
        self.gradient_checkpointing = False

    def forward(self, x):
        # scale image from [-1, 1] to [0, 1] to match TAESD convention
        x = self.layers(x.add(1).div(2))
        return x


class DecoderTiny(nn.Module):
    def __init__(self, in_channels, out_channels, num_blocks, block_out_channels, upsampling_scaling_factor, act_fn,
                 upsample_fn):
        super().__init__()
        layers = [
            nn.Conv2d(in_channels, block_out_channels[0], kernel_size=3, padding=1),
            get_activation(act_fn),
        ]
        for i, num_block in enumerate(num_blocks):
            is_final_block = i == (len(num_blocks) - 1)
            num_channels = block_out_channels[i]
            for _ in range(num_block):
                layers.append(AutoencoderTinyBlock(num_channels, num_channels, act_fn))
            if not is_final_block:
                layers.append(nn.Upsample(scale_factor=upsampling_scaling_factor, mode=upsample_fn))
            conv_out_channel = num_channels if not is_final_block else out_channels
            layers.append(nn.Conv2d(num_channels, conv_out_channel, kernel_size=3, padding=1, bias=is_final_block))
        self.layers = nn.Sequential(*layers)
        self.gradient_checkpointing = False

    def forward(self, x):
        # Clamp.
        x = torch.tanh(x / 3) * 3
        x = self.layers(x)
        # scale image from [0, 1] to [-1, 1] to match diffusers convention
        return x.mul(2).sub(1)


class AutoencoderTiny(nn.Module):
    def __init__(self, in_channels=3, out_channels=3, encoder_block_out_channels=(4, 4, 4, 4),
                 decoder_block_out_channels=(4, 4, 4, 4), act_fn="relu", upsample_fn="nearest", latent_channels=4,
                 upsampling_scaling_factor=2, num_encoder_blocks=(1, 3, 3, 3), num_decoder_blocks=(3, 3, 3, 1),
                 latent_magnitude=3, latent_shift=0.5, force_upcast=False, scaling_factor=1.0):
        super().__init__()
        if len(encoder_block_out_channels) != len(num_encoder_blocks):
            raise ValueError("`encoder_block_out_channels` should have the same length as `num_encoder_blocks`.")
        if len(decoder_block_out_channels) != len(num_decoder_blocks):
            raise ValueError("`decoder_block_out_channels` should have the same length as `num_decoder_blocks`.")
        self.encoder = EncoderTiny(
            in_channels=in_channels, out_channels=latent_channels, num_blocks=num_encoder_blocks,
            block_out_channels=encoder_block_out_channels, act_fn=act_fn)
        self.decoder = DecoderTiny(
            in_channels=latent_channels, out_channels=out_channels, num_blocks=num_decoder_blocks,
            block_out_channels=decoder_block_out_channels, upsampling_scaling_factor=upsampling_scaling_factor,
            act_fn=act_fn, upsample_fn=upsample_fn)
        self.latent_magnitude = latent_magnitude
        self.latent_shift = latent_shift
        self.scaling_factor = scaling_factor
        self.use_slicing = False
        self.use_tiling = False
        self.spatial_scale_factor = 2 ** out_channels
        self.tile_overlap_factor = 0.125
        self.tile_sample_min_size = 512
        self.tile_latent_min_size = self.tile_sample_min_size // self.spatial_scale_factor

    def scale_latents(self, x):
        """raw latents -> [0, 1]"""
        return x.div(2 * self.latent_magnitude).add(self.latent_shift).clamp(0, 1)

    def unscale_latents(self, x):
        """[0, 1] -> raw latents"""
        return x.sub(self.latent_shift).mul(2 * self.latent_magnitude)

    def encode(self, x):
        return self.encoder(x)  # no slicing, no tiling: AutoencoderTinyOutput(latents=...)

    def decode(self, x):
        return self.decoder(x)  # no slicing, no tiling: DecoderOutput(sample=...)

    def forward(self, sample):
        enc = self.encode(sample)
        # scale latents to be in [0, 1], then quantize latents to a byte tensor,
        # as if we were storing the latents in an RGBA uint8 image.
        scaled_enc = self.scale_latents(enc).mul_(255).round_().byte()
        # unquantize latents back into [0, 1], then unscale latents back to their original range,
        # as if we were loading the latents from an RGBA uint8 image.
        dequant = scaled_enc / 255.0
        if dequant.dtype != enc.dtype:
            dequant = dequant.to(enc.dtype)  # bf16 only: upstream's f32 here meets bf16 conv weights and raises
        unscaled_enc = self.unscale_latents(dequant)
        return self.decode(unscaled_enc)


if __name__ == "__main__":
    capture_once(
        "tiny_vae", AutoencoderTiny,
        lambda g: {"sample": torch.randn((1, 3, 64, 64), generator=g)}, sys.argv[1],
        dict(library_source="replica of huggingface/diffusers autoencoder_tiny.py, vae.py EncoderTiny/DecoderTiny, "
                            "unet_2d_blocks.py AutoencoderTinyBlock (torch 1.13)",
             note="TAESD at width 4: conv+ReLU residual blocks (one ReLU module called twice), stride-2 bias-free "
                  "downsampling convs, nearest 2x upsamples, the decoder's tanh(x/3)*3 input clamp, and the forward's "
                  "latent quantisation (x/6+0.5 clamped to [0,1], *255, round, uint8, /255, -0.5, *6)"))
