"""Parts of diffusers (attention.py, embeddings.py) and torch 2 that several replicas import, written once
for torch 1.13: the same module names, parameter names and shapes, and arithmetic as upstream. (The older
replicas keep their own copies, so that their traces stay as they were captured.)"""
import torch
import torch.nn as nn
import torch.nn.functional as F

from run import get_timestep_embedding


class TorchRMSNorm(nn.Module):
    """torch 2's nn.RMSNorm(dim, eps, elementwise_affine=True), where torch lacks it."""

    def __init__(self, dim, eps=None, elementwise_affine=True):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim)) if elementwise_affine else None

    def forward(self, x):
        # aten's rms_norm composite: statistics and x̂ in f32 (the opmath type, whose epsilon is the
        # default), x̂ cast back to x's dtype, then ·weight (identical to the plain formula in f32)
        eps = torch.finfo(torch.float32).eps if self.eps is None else self.eps
        xf = x.float()
        y = (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).type_as(x)
        return y * self.weight if self.weight is not None else y


class GELU(nn.Module):
    def __init__(self, dim_in, dim_out, approximate="none", bias=True):
        super().__init__()
        self.proj = nn.Linear(dim_in, dim_out, bias=bias)
        self.approximate = approximate

    def forward(self, hidden_states):
        hidden_states = self.proj(hidden_states)
        return F.gelu(hidden_states, approximate=self.approximate)


class FeedForward(nn.Module):
    """FeedForward(dim, activation_fn="gelu-approximate"), mult 4."""

    def __init__(self, dim, mult=4, dropout=0.0, bias=True):
        super().__init__()
        inner_dim = int(dim * mult)
        self.net = nn.ModuleList([GELU(dim, inner_dim, approximate="tanh", bias=bias), nn.Dropout(dropout),
                                  nn.Linear(inner_dim, dim, bias=bias)])

    def forward(self, hidden_states):
        for module in self.net:
            hidden_states = module(hidden_states)
        return hidden_states


class Timesteps(nn.Module):
    def __init__(self, num_channels, flip_sin_to_cos, downscale_freq_shift, scale=1):
        super().__init__()
        self.num_channels, self.flip_sin_to_cos = num_channels, flip_sin_to_cos
        self.downscale_freq_shift, self.scale = downscale_freq_shift, scale

    def forward(self, timesteps):
        return get_timestep_embedding(timesteps, self.num_channels, flip_sin_to_cos=self.flip_sin_to_cos,
                                      downscale_freq_shift=self.downscale_freq_shift, scale=self.scale)


class TimestepEmbedding(nn.Module):
    def __init__(self, in_channels, time_embed_dim, out_dim=None):
        super().__init__()
        self.linear_1 = nn.Linear(in_channels, time_embed_dim, True)
        self.act = nn.SiLU()
        self.linear_2 = nn.Linear(time_embed_dim, out_dim or time_embed_dim, True)

    def forward(self, sample):
        sample = self.linear_1(sample)
        sample = self.act(sample)
        return self.linear_2(sample)


class PixArtAlphaTextProjection(nn.Module):
    def __init__(self, in_features, hidden_size):
        super().__init__()
        self.linear_1 = nn.Linear(in_features, hidden_size, bias=True)
        self.act_1 = nn.GELU(approximate="tanh")
        self.linear_2 = nn.Linear(hidden_size, hidden_size, bias=True)

    def forward(self, caption):
        hidden_states = self.linear_1(caption)
        hidden_states = self.act_1(hidden_states)
        return self.linear_2(hidden_states)
