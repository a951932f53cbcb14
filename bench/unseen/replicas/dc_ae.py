"""diffusers' AutoencoderDC (DC-AE, SANA's autoencoder), reimplemented for torch 1.13 (no diffusers here), captured
small in f32 on CPU as one forward: an image encoded and decoded.

Follows huggingface/diffusers src/diffusers/models/autoencoders/autoencoder_dc.py line for line for the parts a
ResBlock-only configuration uses: ResBlock (conv, SiLU, conv, RMSNorm with a bias over the channels moved last, plus
the input), DCDownBlock2d (a conv, pixel_unshuffle, plus the shortcut: pixel_unshuffle of the input with each group
of channels averaged), DCUpBlock2d (a conv, pixel_shuffle, plus the shortcut: each channel repeated, then
pixel_shuffle), the encoder's end (conv_out plus its input's channel groups averaged) and the decoder's start (conv_in
plus its input's channels repeated), the decoder's RMSNorm-with-bias, ReLU and conv_out; normalization.py's RMSNorm.
Not here: the EfficientViT blocks (multi-scale linear attention) the deeper levels of the released models use.

Widths 8 and 16, one block per level, 4 latent channels, an 8x8 image.

usage: /usr/bin/python3 bench/unseen/replicas/dc_ae.py OUTDIR
"""
import sys

import torch
import torch.nn.functional as F
from torch import nn

from run import capture_once


class RMSNorm(nn.Module):
    def __init__(self, dim, eps, elementwise_affine=True, bias=False):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim)) if elementwise_affine else None
        self.bias = nn.Parameter(torch.zeros(dim)) if bias else None
    def forward(self, hidden_states):
        input_dtype = hidden_states.dtype
        variance = hidden_states.to(torch.float32).pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.eps)
        if self.weight is not None:
            if self.weight.dtype in [torch.float16, torch.bfloat16]:
                hidden_states = hidden_states.to(self.weight.dtype)
            hidden_states = hidden_states * self.weight
            if self.bias is not None:
                hidden_states = hidden_states + self.bias
        else:
            hidden_states = hidden_states.to(input_dtype)
        return hidden_states

class ResBlock(nn.Module):
    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.nonlinearity = nn.SiLU()
        self.conv1 = nn.Conv2d(in_channels, in_channels, 3, 1, 1)
        self.conv2 = nn.Conv2d(in_channels, out_channels, 3, 1, 1, bias=False)
        self.norm = RMSNorm(out_channels, eps=1e-5, elementwise_affine=True, bias=True)
    def forward(self, hidden_states):
        residual = hidden_states
        hidden_states = self.conv1(hidden_states)
        hidden_states = self.nonlinearity(hidden_states)
        hidden_states = self.conv2(hidden_states)
        hidden_states = self.norm(hidden_states.movedim(1, -1)).movedim(-1, 1)
        return hidden_states + residual

class DCDownBlock2d(nn.Module):
    def __init__(self, in_channels, out_channels, downsample=False, shortcut=True):
        super().__init__()
        self.downsample = downsample; self.factor = 2; self.stride = 1 if downsample else 2
        self.group_size = in_channels * self.factor**2 // out_channels; self.shortcut = shortcut
        out_ratio = self.factor**2
        if downsample: out_channels = out_channels // out_ratio
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size=3, stride=self.stride, padding=1)
    def forward(self, hidden_states):
        x = self.conv(hidden_states)
        if self.downsample: x = F.pixel_unshuffle(x, self.factor)
        if self.shortcut:
            y = F.pixel_unshuffle(hidden_states, self.factor)
            y = y.unflatten(1, (-1, self.group_size))
            y = y.mean(dim=2)
            hidden_states = x + y
        else:
            hidden_states = x
        return hidden_states

class DCUpBlock2d(nn.Module):
    def __init__(self, in_channels, out_channels, interpolate=False, shortcut=True, interpolation_mode="nearest"):
        super().__init__()
        self.interpolate = interpolate; self.interpolation_mode = interpolation_mode; self.shortcut = shortcut
        self.factor = 2; self.repeats = out_channels * self.factor**2 // in_channels
        out_ratio = self.factor**2
        if not interpolate: out_channels = out_channels * out_ratio
        self.conv = nn.Conv2d(in_channels, out_channels, 3, 1, 1)
    def forward(self, hidden_states):
        if self.interpolate:
            x = F.interpolate(hidden_states, scale_factor=self.factor, mode=self.interpolation_mode); x = self.conv(x)
        else:
            x = self.conv(hidden_states); x = F.pixel_shuffle(x, self.factor)
        if self.shortcut:
            y = hidden_states.repeat_interleave(self.repeats, dim=1)
            y = F.pixel_shuffle(y, self.factor)
            hidden_states = x + y
        else:
            hidden_states = x
        return hidden_states

class Encoder(nn.Module):
    def __init__(s, in_channels=3, latent_channels=4, ch=(8, 16)):
        super().__init__()
        s.conv_in = nn.Conv2d(in_channels, ch[0], 3, 1, 1)
        s.down_blocks = nn.ModuleList([nn.Sequential(ResBlock(ch[0], ch[0]), DCDownBlock2d(ch[0], ch[1], downsample=True, shortcut=True)), nn.Sequential(ResBlock(ch[1], ch[1]))])
        s.conv_out = nn.Conv2d(ch[1], latent_channels, 3, 1, 1)
        s.norm_factor = 1; s.norm_group_size = ch[1] // latent_channels
    def forward(s, hidden_states):
        hidden_states = s.conv_in(hidden_states)
        for down_block in s.down_blocks: hidden_states = down_block(hidden_states)
        x = F.pixel_unshuffle(hidden_states, s.norm_factor)
        x = x.unflatten(1, (-1, s.norm_group_size))
        x = x.mean(dim=2)
        return s.conv_out(hidden_states) + x

class Decoder(nn.Module):
    def __init__(s, in_channels=3, latent_channels=4, ch=(8, 16)):
        super().__init__()
        s.conv_in = nn.Conv2d(latent_channels, ch[-1], 3, 1, 1)
        s.norm_factor = 1; s.norm_repeats = ch[-1] // latent_channels
        s.up_blocks = nn.ModuleList([nn.Sequential(DCUpBlock2d(ch[1], ch[0], interpolate=False, shortcut=True), ResBlock(ch[0], ch[0])), nn.Sequential(ResBlock(ch[1], ch[1]))])
        s.norm_out = RMSNorm(ch[0], 1e-5, elementwise_affine=True, bias=True)
        s.conv_act = nn.ReLU(); s.conv_out = nn.Conv2d(ch[0], in_channels, 3, 1, 1)
    def forward(s, hidden_states):
        x = hidden_states.repeat_interleave(s.norm_repeats, dim=1)
        x = F.pixel_shuffle(x, s.norm_factor)
        hidden_states = s.conv_in(hidden_states) + x
        for up_block in reversed(s.up_blocks): hidden_states = up_block(hidden_states)
        hidden_states = s.norm_out(hidden_states.movedim(1, -1)).movedim(-1, 1)
        hidden_states = s.conv_act(hidden_states)
        return s.conv_out(hidden_states)

class AutoencoderDC(nn.Module):
    def __init__(s):
        super().__init__(); s.encoder = Encoder(); s.decoder = Decoder()
    def forward(s, x): return s.decoder(s.encoder(x))

if __name__ == "__main__":
    capture_once("dc_ae", AutoencoderDC, lambda g: {"pixel_values": torch.randn((1, 3, 8, 8), generator=g)}, sys.argv[1],
                 dict(library_source="replica of huggingface/diffusers autoencoder_dc.py (ResBlock levels, torch 1.13)",
                      note="DC-AE at widths 8/16: RMSNorm with a bias, pixel-unshuffle shortcuts averaging channel "
                           "groups, pixel-shuffle shortcuts repeating channels"))
