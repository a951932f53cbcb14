"""diffusers' AutoencoderDC (DC-AE, SANA's autoencoder), reimplemented for torch 1.13 (no diffusers here), captured
small in f32 on CPU as one forward: an image encoded and decoded.

Follows huggingface/diffusers src/diffusers/models/autoencoders/autoencoder_dc.py line for line for the parts a
ResBlock-only configuration uses: ResBlock (conv, SiLU, conv, RMSNorm with a bias over the channels moved last, plus
the input), DCDownBlock2d (a conv, pixel_unshuffle, plus the shortcut: pixel_unshuffle of the input with each group
of channels averaged), DCUpBlock2d (a conv, pixel_shuffle, plus the shortcut: each channel repeated, then
pixel_shuffle), the encoder's end (conv_out plus its input's channel groups averaged) and the decoder's start (conv_in
plus its input's channels repeated), the decoder's RMSNorm-with-bias, ReLU and conv_out; normalization.py's RMSNorm.
With --vit (dc_ae_vit), the EfficientViT blocks the deeper levels of the released models use, from autoencoder_dc.py
and attention_processor.py: SanaMultiscaleLinearAttention with SanaMultiscaleAttnProcessor2_0 as its forward (q, k, v
from three linears joined, a depthwise 5x5 and grouped 1x1 projection of them joined after, ReLU on q and k; linear
attention with the values padded by a row of ones, in f32, where the map has more cells than a head has channels,
else the quadratic form; a linear out, RMSNorm with a bias, plus the input) and GLUMBConv (1x1 conv, SiLU, depthwise
3x3 conv, halves gated by SiLU, 1x1 conv, RMSNorm with a bias, plus the input), attention_head_dim 32 as upstream.

Widths 8 and 16, one block per level, 4 latent channels, an 8x8 image; with --vit widths 8, 32 and 32 (a ResBlock
level, then two EfficientViT levels of one head: at 8x8 linear, at 4x4 quadratic), a 16x16 image.

usage: /usr/bin/python3 bench/unseen/replicas/dc_ae.py OUTDIR [--vit]
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

class SanaMultiscaleAttentionProjection(nn.Module):
    def __init__(self, in_channels, num_attention_heads, kernel_size):
        super().__init__()
        channels = 3 * in_channels
        self.proj_in = nn.Conv2d(channels, channels, kernel_size, padding=kernel_size // 2, groups=channels, bias=False)
        self.proj_out = nn.Conv2d(channels, channels, 1, 1, 0, groups=3 * num_attention_heads, bias=False)
    def forward(self, hidden_states):
        return self.proj_out(self.proj_in(hidden_states))

class SanaMultiscaleLinearAttention(nn.Module):
    """attention_processor.py's, with its processor (SanaMultiscaleAttnProcessor2_0) as the forward: linear attention
    (values padded with a row of ones, in f32) where the map has more cells than a head has channels, else the
    quadratic form (ReLU scores normalised by their sum over the keys)."""
    def __init__(self, in_channels, out_channels, num_attention_heads=None, attention_head_dim=8, mult=1.0,
                 norm_type="batch_norm", kernel_sizes=(5,), eps=1e-15, residual_connection=False):
        super().__init__()
        self.eps = eps; self.attention_head_dim = attention_head_dim; self.norm_type = norm_type
        self.residual_connection = residual_connection
        num_attention_heads = int(in_channels // attention_head_dim * mult) if num_attention_heads is None else num_attention_heads
        inner_dim = num_attention_heads * attention_head_dim
        self.to_q = nn.Linear(in_channels, inner_dim, bias=False)
        self.to_k = nn.Linear(in_channels, inner_dim, bias=False)
        self.to_v = nn.Linear(in_channels, inner_dim, bias=False)
        self.to_qkv_multiscale = nn.ModuleList([SanaMultiscaleAttentionProjection(inner_dim, num_attention_heads, k) for k in kernel_sizes])
        self.nonlinearity = nn.ReLU()
        self.to_out = nn.Linear(inner_dim * (1 + len(kernel_sizes)), out_channels, bias=False)
        self.norm_out = RMSNorm(out_channels, eps=1e-5, elementwise_affine=True, bias=True)  # get_normalization("rms_norm")
    def apply_linear_attention(self, query, key, value):
        value = F.pad(value, (0, 0, 0, 1), mode="constant", value=1)
        scores = torch.matmul(value, key.transpose(-1, -2))
        hidden_states = torch.matmul(scores, query)
        hidden_states = hidden_states.to(dtype=torch.float32)
        return hidden_states[:, :, :-1] / (hidden_states[:, :, -1:] + self.eps)
    def apply_quadratic_attention(self, query, key, value):
        scores = torch.matmul(key.transpose(-1, -2), query)
        scores = scores.to(dtype=torch.float32)
        scores = scores / (torch.sum(scores, dim=2, keepdim=True) + self.eps)
        return torch.matmul(value, scores.to(value.dtype))
    def forward(self, hidden_states):
        height, width = hidden_states.shape[-2:]
        use_linear_attention = height * width > self.attention_head_dim
        residual = hidden_states
        batch_size, _, height, width = list(hidden_states.size())
        original_dtype = hidden_states.dtype
        hidden_states = hidden_states.movedim(1, -1)
        query = self.to_q(hidden_states); key = self.to_k(hidden_states); value = self.to_v(hidden_states)
        hidden_states = torch.cat([query, key, value], dim=3)
        hidden_states = hidden_states.movedim(-1, 1)
        multi_scale_qkv = [hidden_states]
        for block in self.to_qkv_multiscale:
            multi_scale_qkv.append(block(hidden_states))
        hidden_states = torch.cat(multi_scale_qkv, dim=1)
        if use_linear_attention:
            hidden_states = hidden_states.to(dtype=torch.float32)
        hidden_states = hidden_states.reshape(batch_size, -1, 3 * self.attention_head_dim, height * width)
        query, key, value = hidden_states.chunk(3, dim=2)
        query = self.nonlinearity(query); key = self.nonlinearity(key)
        if use_linear_attention:
            hidden_states = self.apply_linear_attention(query, key, value).to(dtype=original_dtype)
        else:
            hidden_states = self.apply_quadratic_attention(query, key, value)
        hidden_states = torch.reshape(hidden_states, (batch_size, -1, height, width))
        hidden_states = self.to_out(hidden_states.movedim(1, -1)).movedim(-1, 1)
        hidden_states = self.norm_out(hidden_states.movedim(1, -1)).movedim(-1, 1)
        if self.residual_connection:
            hidden_states = hidden_states + residual
        return hidden_states

class GLUMBConv(nn.Module):
    def __init__(self, in_channels, out_channels, expand_ratio=4, norm_type=None, residual_connection=True):
        super().__init__()
        hidden_channels = int(expand_ratio * in_channels)
        self.norm_type = norm_type; self.residual_connection = residual_connection
        self.nonlinearity = nn.SiLU()
        self.conv_inverted = nn.Conv2d(in_channels, hidden_channels * 2, 1, 1, 0)
        self.conv_depth = nn.Conv2d(hidden_channels * 2, hidden_channels * 2, 3, 1, 1, groups=hidden_channels * 2)
        self.conv_point = nn.Conv2d(hidden_channels, out_channels, 1, 1, 0, bias=False)
        self.norm = RMSNorm(out_channels, eps=1e-5, elementwise_affine=True, bias=True) if norm_type == "rms_norm" else None
    def forward(self, hidden_states):
        residual = hidden_states
        hidden_states = self.conv_inverted(hidden_states)
        hidden_states = self.nonlinearity(hidden_states)
        hidden_states = self.conv_depth(hidden_states)
        hidden_states, gate = torch.chunk(hidden_states, 2, dim=1)
        hidden_states = hidden_states * self.nonlinearity(gate)
        hidden_states = self.conv_point(hidden_states)
        if self.norm_type == "rms_norm":
            hidden_states = self.norm(hidden_states.movedim(1, -1)).movedim(-1, 1)
        if self.residual_connection:
            hidden_states = hidden_states + residual
        return hidden_states

class EfficientViTBlock(nn.Module):
    def __init__(self, in_channels, mult=1.0, attention_head_dim=32, qkv_multiscales=(5,), norm_type="batch_norm"):
        super().__init__()
        self.attn = SanaMultiscaleLinearAttention(in_channels=in_channels, out_channels=in_channels, mult=mult,
                                                  attention_head_dim=attention_head_dim, norm_type=norm_type,
                                                  kernel_sizes=qkv_multiscales, residual_connection=True)
        self.conv_out = GLUMBConv(in_channels=in_channels, out_channels=in_channels, norm_type="rms_norm")
    def forward(self, x):
        return self.conv_out(self.attn(x))

def get_block(block_type, channels):
    return ResBlock(channels, channels) if block_type == "ResBlock" else EfficientViTBlock(channels, norm_type="rms_norm")

class Encoder(nn.Module):
    def __init__(s, in_channels=3, latent_channels=4, ch=(8, 16), types=("ResBlock", "ResBlock")):
        super().__init__()
        s.conv_in = nn.Conv2d(in_channels, ch[0], 3, 1, 1)
        s.down_blocks = nn.ModuleList([])
        for i, c in enumerate(ch):
            blocks = [get_block(types[i], c)]
            if i < len(ch) - 1:
                blocks.append(DCDownBlock2d(c, ch[i + 1], downsample=True, shortcut=True))
            s.down_blocks.append(nn.Sequential(*blocks))
        s.conv_out = nn.Conv2d(ch[-1], latent_channels, 3, 1, 1)
        s.norm_factor = 1; s.norm_group_size = ch[-1] // latent_channels
    def forward(s, hidden_states):
        hidden_states = s.conv_in(hidden_states)
        for down_block in s.down_blocks: hidden_states = down_block(hidden_states)
        x = F.pixel_unshuffle(hidden_states, s.norm_factor)
        x = x.unflatten(1, (-1, s.norm_group_size))
        x = x.mean(dim=2)
        return s.conv_out(hidden_states) + x

class Decoder(nn.Module):
    def __init__(s, in_channels=3, latent_channels=4, ch=(8, 16), types=("ResBlock", "ResBlock")):
        super().__init__()
        s.conv_in = nn.Conv2d(latent_channels, ch[-1], 3, 1, 1)
        s.norm_factor = 1; s.norm_repeats = ch[-1] // latent_channels
        s.up_blocks = nn.ModuleList([])
        for i, c in reversed(list(enumerate(ch))):
            blocks = []
            if i < len(ch) - 1:
                blocks.append(DCUpBlock2d(ch[i + 1], c, interpolate=False, shortcut=True))
            blocks.append(get_block(types[i], c))
            s.up_blocks.insert(0, nn.Sequential(*blocks))
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
    def __init__(s, ch=(8, 16), types=("ResBlock", "ResBlock")):
        super().__init__(); s.encoder = Encoder(ch=ch, types=types); s.decoder = Decoder(ch=ch, types=types)
    def forward(s, x): return s.decoder(s.encoder(x))

if __name__ == "__main__":
    if "--vit" in sys.argv[2:]:
        capture_once("dc_ae_vit", lambda: AutoencoderDC(ch=(8, 32, 32), types=("ResBlock", "EfficientViTBlock", "EfficientViTBlock")),
                     lambda g: {"pixel_values": torch.randn((1, 3, 16, 16), generator=g)}, sys.argv[1],
                     dict(library_source="replica of huggingface/diffusers autoencoder_dc.py (EfficientViT levels, torch 1.13)",
                          note="DC-AE at widths 8/32/32: a ResBlock level, then EfficientViT blocks (multi-scale ReLU "
                               "linear attention at 8x8, its quadratic form at 4x4, GLUMBConv)"))
    else:
        capture_once("dc_ae", AutoencoderDC, lambda g: {"pixel_values": torch.randn((1, 3, 8, 8), generator=g)}, sys.argv[1],
                     dict(library_source="replica of huggingface/diffusers autoencoder_dc.py (ResBlock levels, torch 1.13)",
                          note="DC-AE at widths 8/16: RMSNorm with a bias, pixel-unshuffle shortcuts averaging channel "
                               "groups, pixel-shuffle shortcuts repeating channels"))
