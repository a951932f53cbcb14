"""diffusers' AutoencoderOobleck (Stable Audio's waveform VAE), reimplemented for torch 1.13 (no diffusers here),
captured small in f32 on CPU as one forward: a stereo waveform encoded, the posterior's mode taken, decoded.

Follows huggingface/diffusers src/diffusers/models/autoencoders/autoencoder_oobleck.py line for line: Snake1d
(x + 1/(exp β + 1e-9) · sin(exp α · x)², α and β per channel kept [1, C, 1]), OobleckResidualUnit (snake, a
weight-normed dilated Conv1d of kernel 7, snake, a weight-normed 1x1 Conv1d, plus the input), OobleckEncoderBlock
(three residual units of dilations 1, 3 and 9, snake, a weight-normed strided Conv1d), OobleckDecoderBlock (snake, a
weight-normed strided ConvTranspose1d, three residual units), OobleckEncoder and OobleckDecoder, and
OobleckDiagonalGaussianDistribution's mode (the first half of the encoder's channels). Every convolution is wrapped
by torch.nn.utils.weight_norm as upstream imports it: the hook makes each weight g · v / ‖v‖ from weight_g and
weight_v before the call, so the trace holds those two, not the weight.

Encoder width 8 (channel multiples 1 and 2), downsampling ratios 2 and 2, decoder width 8, 4 latent channels, a
[1, 2, 64] waveform.

usage: /usr/bin/python3 bench/unseen/replicas/oobleck.py OUTDIR
REPLICA_DTYPE=bf16 [REPLICA_DEVICE=cuda] as run.py's replicas: the bf16 run, beside the f32 one.
"""
import math
import sys

import torch
import torch.nn as nn
from torch.nn.utils import weight_norm

from run import capture_once


class Snake1d(nn.Module):
    def __init__(self, hidden_dim, logscale=True):
        super().__init__()
        self.alpha = nn.Parameter(torch.zeros(1, hidden_dim, 1))
        self.beta = nn.Parameter(torch.zeros(1, hidden_dim, 1))
        self.logscale = logscale

    def forward(self, hidden_states):
        shape = hidden_states.shape
        alpha = self.alpha if not self.logscale else torch.exp(self.alpha)
        beta = self.beta if not self.logscale else torch.exp(self.beta)
        hidden_states = hidden_states.reshape(shape[0], shape[1], -1)
        hidden_states = hidden_states + (beta + 1e-9).reciprocal() * torch.sin(alpha * hidden_states).pow(2)
        return hidden_states.reshape(shape)


class OobleckResidualUnit(nn.Module):
    def __init__(self, dimension=16, dilation=1):
        super().__init__()
        pad = ((7 - 1) * dilation) // 2
        self.snake1 = Snake1d(dimension)
        self.conv1 = weight_norm(nn.Conv1d(dimension, dimension, kernel_size=7, dilation=dilation, padding=pad))
        self.snake2 = Snake1d(dimension)
        self.conv2 = weight_norm(nn.Conv1d(dimension, dimension, kernel_size=1))

    def forward(self, hidden_state):
        output_tensor = hidden_state
        output_tensor = self.conv1(self.snake1(output_tensor))
        output_tensor = self.conv2(self.snake2(output_tensor))
        padding = (hidden_state.shape[-1] - output_tensor.shape[-1]) // 2
        if padding > 0:
            hidden_state = hidden_state[..., padding:-padding]
        return hidden_state + output_tensor


class OobleckEncoderBlock(nn.Module):
    def __init__(self, input_dim, output_dim, stride=1):
        super().__init__()
        self.res_unit1 = OobleckResidualUnit(input_dim, dilation=1)
        self.res_unit2 = OobleckResidualUnit(input_dim, dilation=3)
        self.res_unit3 = OobleckResidualUnit(input_dim, dilation=9)
        self.snake1 = Snake1d(input_dim)
        self.conv1 = weight_norm(nn.Conv1d(input_dim, output_dim, kernel_size=2 * stride, stride=stride,
                                           padding=math.ceil(stride / 2)))

    def forward(self, hidden_state):
        hidden_state = self.res_unit1(hidden_state)
        hidden_state = self.res_unit2(hidden_state)
        hidden_state = self.snake1(self.res_unit3(hidden_state))
        return self.conv1(hidden_state)


class OobleckDecoderBlock(nn.Module):
    def __init__(self, input_dim, output_dim, stride=1):
        super().__init__()
        self.snake1 = Snake1d(input_dim)
        self.conv_t1 = weight_norm(nn.ConvTranspose1d(input_dim, output_dim, kernel_size=2 * stride, stride=stride,
                                                      padding=math.ceil(stride / 2)))
        self.res_unit1 = OobleckResidualUnit(output_dim, dilation=1)
        self.res_unit2 = OobleckResidualUnit(output_dim, dilation=3)
        self.res_unit3 = OobleckResidualUnit(output_dim, dilation=9)

    def forward(self, hidden_state):
        hidden_state = self.snake1(hidden_state)
        hidden_state = self.conv_t1(hidden_state)
        hidden_state = self.res_unit1(hidden_state)
        hidden_state = self.res_unit2(hidden_state)
        return self.res_unit3(hidden_state)


class OobleckEncoder(nn.Module):
    def __init__(self, encoder_hidden_size, audio_channels, downsampling_ratios, channel_multiples):
        super().__init__()
        channel_multiples = [1] + channel_multiples
        self.conv1 = weight_norm(nn.Conv1d(audio_channels, encoder_hidden_size, kernel_size=7, padding=3))
        self.block = nn.ModuleList([
            OobleckEncoderBlock(encoder_hidden_size * channel_multiples[i], encoder_hidden_size * channel_multiples[i + 1],
                                stride=stride)
            for i, stride in enumerate(downsampling_ratios)])
        d_model = encoder_hidden_size * channel_multiples[-1]
        self.snake1 = Snake1d(d_model)
        self.conv2 = weight_norm(nn.Conv1d(d_model, encoder_hidden_size, kernel_size=3, padding=1))

    def forward(self, hidden_state):
        hidden_state = self.conv1(hidden_state)
        for module in self.block:
            hidden_state = module(hidden_state)
        hidden_state = self.snake1(hidden_state)
        return self.conv2(hidden_state)


class OobleckDecoder(nn.Module):
    def __init__(self, channels, input_channels, audio_channels, upsampling_ratios, channel_multiples):
        super().__init__()
        channel_multiples = [1] + channel_multiples
        n = len(upsampling_ratios)
        self.conv1 = weight_norm(nn.Conv1d(input_channels, channels * channel_multiples[-1], kernel_size=7, padding=3))
        self.block = nn.ModuleList([
            OobleckDecoderBlock(channels * channel_multiples[n - i], channels * channel_multiples[n - i - 1], stride=stride)
            for i, stride in enumerate(upsampling_ratios)])
        self.snake1 = Snake1d(channels)
        self.conv2 = weight_norm(nn.Conv1d(channels, audio_channels, kernel_size=7, padding=3, bias=False))

    def forward(self, hidden_state):
        hidden_state = self.conv1(hidden_state)
        for layer in self.block:
            hidden_state = layer(hidden_state)
        hidden_state = self.snake1(hidden_state)
        return self.conv2(hidden_state)


class AutoencoderOobleck(nn.Module):
    def __init__(self, encoder_hidden_size=8, downsampling_ratios=(2, 2), channel_multiples=(1, 2), decoder_channels=8,
                 decoder_input_channels=4, audio_channels=2):
        super().__init__()
        self.encoder = OobleckEncoder(encoder_hidden_size, audio_channels, list(downsampling_ratios),
                                      list(channel_multiples))
        self.decoder = OobleckDecoder(decoder_channels, decoder_input_channels, audio_channels,
                                      list(downsampling_ratios)[::-1], list(channel_multiples))

    def forward(self, sample):
        h = self.encoder(sample)
        # OobleckDiagonalGaussianDistribution(h).mode(): the mean (std, var and logvar are made and unused)
        mean, scale = h.chunk(2, dim=1)
        return self.decoder(mean)


if __name__ == "__main__":
    capture_once(
        "oobleck_vae", AutoencoderOobleck, lambda g: {"audio": torch.randn((1, 2, 64), generator=g)}, sys.argv[1],
        dict(library_source="replica of huggingface/diffusers autoencoder_oobleck.py (torch 1.13)",
             note="AutoencoderOobleck at width 8: Snake1d activations, weight-normed (hook) Conv1d and ConvTranspose1d, "
                  "dilated residual units, the posterior's mode"))
