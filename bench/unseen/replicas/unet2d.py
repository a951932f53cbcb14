"""The unconditional diffusion UNet (UNet2DModel: DDPM's and its descendants'), reimplemented for torch 1.13 (no
diffusers here), captured small in f32 on CPU.

Follows huggingface/diffusers src/diffusers/models/unets/unet_2d.py (UNet2DModel's forward with
time_embedding_type "positional", no class embedding, no skip blocks) and the parts it imports: unet_2d_blocks.py
(DownBlock2D, AttnDownBlock2D, UNetMidBlock2D, AttnUpBlock2D, UpBlock2D), resnet.py (ResnetBlock2D with
time_embedding_norm "default", or "scale_shift" with --scale-shift: the time projection twice as wide, chunked
into a scale and a shift applied after norm2 as x·(1 + scale) + shift, as Kandinsky's and DeepFloyd IF's UNets
do), attention_processor.py (Attention as the deprecated attention block makes it: a GroupNorm over the map's
channels inside the attention, biased to_q/to_k/to_v/to_out, the map's cells as rows and back, the input added,
divided by rescale_output_factor 1; AttnProcessor2_0's arithmetic), downsampling.py and upsampling.py (a strided
3x3 convolution; nearest ×2 then a 3x3 convolution), embeddings.py (Timesteps with flip_sin_to_cos and shift 0,
TimestepEmbedding). The same module tree, parameter names and shapes, call boundaries, and arithmetic line for
line; F.scaled_dot_product_attention stands in as its math path (torch 1.13 lacks it).

The constructs it shows: an attention module whose own GroupNorm reads the map before its projections, over
[B, C, H·W] (the cells as rows then transposed back), the residual added inside the attention module; with
--scale-shift, a per-channel affine modulation of a channels-first map by the halves of a projected timestep
embedding.

Pipeline as DDPMPipeline calls it: timestep = the scheduler's t (here σ·1000, f32 [1], broadcast to the batch
by a product with ones); the output the noise prediction, taken as the velocity as is.

usage: /usr/bin/python3 bench/unseen/replicas/unet2d.py OUTDIR [--scale-shift]
"""
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

from parts import TimestepEmbedding, Timesteps
from run import capture, sdpa
from sd_unet import Downsample2D, ResnetBlock2D, Upsample2D

SCALE_SHIFT = "--scale-shift" in sys.argv


class Attention(nn.Module):
    """Attention(query_dim, heads, dim_head, norm_num_groups, residual_connection=True, bias=True), the
    deprecated attention block's layout."""

    def __init__(self, query_dim, heads, dim_head, groups, eps=1e-5):
        super().__init__()
        inner = heads * dim_head
        self.heads = heads
        self.group_norm = nn.GroupNorm(num_channels=query_dim, num_groups=groups, eps=eps, affine=True)
        self.to_q = nn.Linear(query_dim, inner, bias=True)
        self.to_k = nn.Linear(query_dim, inner, bias=True)
        self.to_v = nn.Linear(query_dim, inner, bias=True)
        self.to_out = nn.ModuleList([nn.Linear(inner, query_dim, bias=True), nn.Dropout(0.0)])
        self.rescale_output_factor = 1.0

    def forward(self, hidden_states, temb=None):
        residual = hidden_states
        batch_size, channel, height, width = hidden_states.shape
        hidden_states = hidden_states.view(batch_size, channel, height * width).transpose(1, 2)
        hidden_states = self.group_norm(hidden_states.transpose(1, 2)).transpose(1, 2)
        query = self.to_q(hidden_states)
        key = self.to_k(hidden_states)
        value = self.to_v(hidden_states)
        head_dim = key.shape[-1] // self.heads
        query = query.view(batch_size, -1, self.heads, head_dim).transpose(1, 2)
        key = key.view(batch_size, -1, self.heads, head_dim).transpose(1, 2)
        value = value.view(batch_size, -1, self.heads, head_dim).transpose(1, 2)
        hidden_states = sdpa(query, key, value)
        hidden_states = hidden_states.transpose(1, 2).reshape(batch_size, -1, self.heads * head_dim)
        hidden_states = hidden_states.to(query.dtype)
        hidden_states = self.to_out[0](hidden_states)
        hidden_states = self.to_out[1](hidden_states)
        hidden_states = hidden_states.transpose(-1, -2).reshape(batch_size, channel, height, width)
        hidden_states = hidden_states + residual
        return hidden_states / self.rescale_output_factor


class DownBlock2D(nn.Module):
    def __init__(self, cin, cout, temb, groups, add_downsample, norm, attn_dim=None):
        super().__init__()
        self.resnets = nn.ModuleList([ResnetBlock2D(cin, cout, temb, groups, norm=norm)])
        if attn_dim:
            self.attentions = nn.ModuleList([Attention(cout, cout // attn_dim, attn_dim, groups)])
        self.downsamplers = nn.ModuleList([Downsample2D(cout)]) if add_downsample else None

    def forward(self, hidden_states, temb=None):
        output_states = ()
        for i, resnet in enumerate(self.resnets):
            hidden_states = resnet(hidden_states, temb)
            if hasattr(self, "attentions"):
                hidden_states = self.attentions[i](hidden_states)
            output_states = output_states + (hidden_states,)
        if self.downsamplers is not None:
            for downsampler in self.downsamplers:
                hidden_states = downsampler(hidden_states)
            output_states = output_states + (hidden_states,)
        return hidden_states, output_states


class UNetMidBlock2D(nn.Module):
    def __init__(self, channels, temb, groups, norm, attn_dim):
        super().__init__()
        self.attentions = nn.ModuleList([Attention(channels, channels // attn_dim, attn_dim, groups)])
        self.resnets = nn.ModuleList([ResnetBlock2D(channels, channels, temb, groups, norm=norm),
                                      ResnetBlock2D(channels, channels, temb, groups, norm=norm)])

    def forward(self, hidden_states, temb=None):
        hidden_states = self.resnets[0](hidden_states, temb)
        for attn, resnet in zip(self.attentions, self.resnets[1:]):
            hidden_states = attn(hidden_states, temb=temb)
            hidden_states = resnet(hidden_states, temb)
        return hidden_states


class UpBlock2D(nn.Module):
    def __init__(self, cin, prev, cout, temb, groups, add_upsample, norm, attn_dim=None, layers=2):
        super().__init__()
        self.resnets = nn.ModuleList([
            ResnetBlock2D((prev if i == 0 else cout) + (cin if i == layers - 1 else cout), cout, temb, groups, norm=norm)
            for i in range(layers)])
        if attn_dim:
            self.attentions = nn.ModuleList([Attention(cout, cout // attn_dim, attn_dim, groups) for _ in range(layers)])
        self.upsamplers = nn.ModuleList([Upsample2D(cout)]) if add_upsample else None

    def forward(self, hidden_states, res_hidden_states_tuple, temb=None, upsample_size=None):
        for i, resnet in enumerate(self.resnets):
            res_hidden_states = res_hidden_states_tuple[-1]
            res_hidden_states_tuple = res_hidden_states_tuple[:-1]
            hidden_states = torch.cat([hidden_states, res_hidden_states], dim=1)
            hidden_states = resnet(hidden_states, temb)
            if hasattr(self, "attentions"):
                hidden_states = self.attentions[i](hidden_states)
        if self.upsamplers is not None:
            for upsampler in self.upsamplers:
                hidden_states = upsampler(hidden_states, upsample_size)
        return hidden_states


class UNet2DModel(nn.Module):
    """down (DownBlock2D, AttnDownBlock2D), mid UNetMidBlock2D, up (AttnUpBlock2D, UpBlock2D); one resnet per down
    block, two per up block; attention heads of attention_head_dim channels."""

    def __init__(self, in_channels=3, out_channels=3, block_out_channels=(8, 16), attention_head_dim=4, groups=4,
                 norm="default"):
        super().__init__()
        c0, c1 = block_out_channels
        temb = c0 * 4
        self.conv_in = nn.Conv2d(in_channels, c0, kernel_size=3, padding=(1, 1))
        self.time_proj = Timesteps(c0, True, 0)
        self.time_embedding = TimestepEmbedding(c0, temb)
        self.down_blocks = nn.ModuleList([DownBlock2D(c0, c0, temb, groups, True, norm),
                                          DownBlock2D(c0, c1, temb, groups, False, norm, attention_head_dim)])
        self.mid_block = UNetMidBlock2D(c1, temb, groups, norm, attention_head_dim)
        self.up_blocks = nn.ModuleList([UpBlock2D(c0, c1, c1, temb, groups, True, norm, attention_head_dim),
                                        UpBlock2D(c0, c1, c0, temb, groups, False, norm)])
        self.conv_norm_out = nn.GroupNorm(num_channels=c0, num_groups=groups, eps=1e-5)
        self.conv_act = nn.SiLU()
        self.conv_out = nn.Conv2d(c0, out_channels, kernel_size=3, padding=1)

    def forward(self, sample, timestep, return_dict=False):
        timesteps = timestep
        if len(timesteps.shape) == 0:
            timesteps = timesteps[None]
        timesteps = timesteps * torch.ones(sample.shape[0], dtype=timesteps.dtype, device=timesteps.device)
        t_emb = self.time_proj(timesteps)
        t_emb = t_emb.to(dtype=sample.dtype)
        emb = self.time_embedding(t_emb)
        sample = self.conv_in(sample)
        down_block_res_samples = (sample,)
        for downsample_block in self.down_blocks:
            sample, res_samples = downsample_block(hidden_states=sample, temb=emb)
            down_block_res_samples += res_samples
        sample = self.mid_block(sample, emb)
        for upsample_block in self.up_blocks:
            res_samples = down_block_res_samples[-len(upsample_block.resnets):]
            down_block_res_samples = down_block_res_samples[: -len(upsample_block.resnets)]
            sample = upsample_block(sample, res_samples, emb)
        sample = self.conv_norm_out(sample)
        sample = self.conv_act(sample)
        sample = self.conv_out(sample)
        return (sample,)


def build():
    # widths 8 and 16, attention heads of 4 channels, GroupNorm of 4 groups, on an 8x8 RGB image
    return UNet2DModel(norm="scale_shift" if SCALE_SHIFT else "default")


def inputs(g):
    return {"noise": torch.randn((1, 3, 8, 8), generator=g)}


def call(model, x, sigma, c):
    t = torch.tensor([sigma * 1000.0], dtype=torch.float32, device=x.device)
    return model(x, t, return_dict=False)[0]


PRODUCER = dict(
    library_source="replica of huggingface/diffusers unet_2d.py and the parts it imports (torch 1.13)",
    timestep="sigma*1000, f32 [1] times ones over the batch (DDPMPipeline: the scheduler's timesteps)",
    velocity="the noise prediction as is",
    note="UNet2DModel at widths 8/16: DownBlock2D, AttnDownBlock2D (the attention's own GroupNorm over [B, C, H·W], "
         "the residual added inside it), UNetMidBlock2D, AttnUpBlock2D, UpBlock2D; ResnetBlock2D time embedding "
         + ("scale_shift: x·(1 + scale) + shift after norm2" if SCALE_SHIFT else "added per channel before norm2"))

if __name__ == "__main__":
    capture("unet2d_scale_shift" if SCALE_SHIFT else "unet2d", build, inputs, call, sys.argv[1], PRODUCER)
