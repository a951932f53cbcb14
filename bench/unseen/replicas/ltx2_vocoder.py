"""The LTX-2 vocoder (LTX2Vocoder: a BigVGAN/HiFi-GAN-style generator, mel spectrogram → stereo waveform),
reimplemented for torch 1.13 (no diffusers here), captured small in f32 on CPU as one forward, the way LTX2Pipeline's
end calls it: audio = self.vocoder(generated_mel_spectrograms), on the audio VAE's decoded mel.

Follows huggingface/diffusers src/diffusers/models/autoencoders/vocoder_ltx2.py at
43c8be3653f3ad358eb6baeb68684027e66a0994 line for line: LTX2Vocoder.forward (the mel [B, C, T, M] transposed to
[B, C, M, T] (time_last False), flatten(1, 2) to [B, C·M, T]; conv_in (Conv1d k7, padding 3); per upsample level
F.leaky_relu(·, negative_slope) then a ConvTranspose1d (stride = the factor, padding (k − stride) // 2, halving the
channels), then the level's resnets (one per resnet kernel size) all run on the same input, torch.stack(dim=0) and
torch.mean(dim=0) of their outputs; act_out, here nn.LeakyReLU() at its default slope 0.01 ("does NOT use
self.negative_slope, following the original code"); conv_out (Conv1d k7, padding 3, bias); tanh (final_act_fn
"tanh")) and ResBlock (for each dilation: act1, a dilated Conv1d with padding="same", act2, a Conv1d with dilation 1
and padding="same", plus the input). Upstream's ResBlock builds its acts2 with a slip that this replica keeps: for
act_fn "leaky_relu" the second loop assigns act_fn = nn.LeakyReLU(...) and appends act, the last LeakyReLU of the
acts1 loop, so acts2 holds acts1[-1] three times (one shared parameterless module: named acts1.2 in the module tree,
its calls recorded under that name). Stand-in for what torch 1.13 lacks: a bf16 ConvTranspose1d on the CPU (there
computed in f32 and rounded once to bf16; see ConvTranspose1d below). The snakebeta / antialias branches (SnakeBeta,
AntiAliasAct1d with its Kaiser-sinc UpSample1d and DownSample1d) are written as upstream but off, as in LTX-2.0's
config; LTX2VocoderWithBWE (the LTX-2.3 vocoder with a bandwidth extender) is not replicated.

Pipeline: src/diffusers/pipelines/ltx2/pipeline_ltx2.py at 95d0faa58b08ef2966acac1bf3bfdfe7cfcdef72 __call__'s end:
generated_mel_spectrograms = self.audio_vae.decode(audio_latents, return_dict=False)[0]; audio =
self.vocoder(generated_mel_spectrograms): no arithmetic around the call, the mel in the audio VAE's dtype.

Tiny config: LTX-2.0's (the class defaults: in_channels 128 = 2 stereo channels × 64 mel bins, hidden_channels 1024,
out_channels 2, upsample_kernel_sizes (16, 15, 8, 4, 4), upsample_factors (6, 5, 2, 2, 2), resnet_kernel_sizes
(3, 7, 11), resnet_dilations ((1, 3, 5),) × 3, leaky_relu slope 0.1, no antialias, tanh, final bias) at in_channels
32 (2 channels × 16 mel bins, ltx2_audio_vae.py's mel), hidden_channels 32 and the first two upsample levels only
(kernels 16 and 15, factors 6 and 5: widths 32 → 16 → 8, ×30 in time); the three resnets per level and their
dilations as released. A [1, 2, 17, 16] mel (17 frames ≠ 16 bins, so the transpose cannot pass unseen) →
[1, 32, 17] → [1, 2, 510].

usage: /usr/bin/python3 bench/unseen/replicas/ltx2_vocoder.py OUTDIR
REPLICA_DTYPE=bf16 [REPLICA_DEVICE=cuda] as run.py's replicas: the bf16 run, beside the f32 one.
"""
import math
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

from run import capture_once


def kaiser_sinc_filter1d(cutoff, half_width, kernel_size):
    delta_f = 4 * half_width
    half_size = kernel_size // 2
    amplitude = 2.285 * (half_size - 1) * math.pi * delta_f + 7.95
    if amplitude > 50.0:
        beta = 0.1102 * (amplitude - 8.7)
    elif amplitude >= 21.0:
        beta = 0.5842 * (amplitude - 21) ** 0.4 + 0.07886 * (amplitude - 21.0)
    else:
        beta = 0.0
    window = torch.kaiser_window(kernel_size, beta=beta, periodic=False)
    even = kernel_size % 2 == 0
    time = torch.arange(-half_size, half_size) + 0.5 if even else torch.arange(kernel_size) - half_size
    if cutoff == 0.0:
        filter = torch.zeros_like(time)
    else:
        time = 2 * cutoff * time
        sinc = torch.where(time == 0, torch.ones_like(time), torch.sin(math.pi * time) / math.pi / time)
        filter = 2 * cutoff * window * sinc
        filter = filter / filter.sum()
    return filter


class DownSample1d(nn.Module):
    def __init__(self, ratio=2, kernel_size=None, use_padding=True, padding_mode="replicate", persistent=True):
        super().__init__()
        self.ratio = ratio
        self.kernel_size = kernel_size or int(6 * ratio // 2) * 2
        self.pad_left = self.kernel_size // 2 + (self.kernel_size % 2) - 1
        self.pad_right = self.kernel_size // 2
        self.use_padding = use_padding
        self.padding_mode = padding_mode
        cutoff = 0.5 / ratio
        half_width = 0.6 / ratio
        low_pass_filter = kaiser_sinc_filter1d(cutoff, half_width, self.kernel_size)
        self.register_buffer("filter", low_pass_filter.view(1, 1, self.kernel_size), persistent=persistent)

    def forward(self, x):
        num_channels = x.shape[1]
        if self.use_padding:
            x = F.pad(x, (self.pad_left, self.pad_right), mode=self.padding_mode)
        x_filtered = F.conv1d(x, self.filter.expand(num_channels, -1, -1), stride=self.ratio, groups=num_channels)
        return x_filtered


class UpSample1d(nn.Module):
    def __init__(self, ratio=2, kernel_size=None, window_type="kaiser", padding_mode="replicate", persistent=True):
        super().__init__()
        self.ratio = ratio
        self.padding_mode = padding_mode
        if window_type == "hann":
            rolloff = 0.99
            lowpass_filter_width = 6
            width = math.ceil(lowpass_filter_width / rolloff)
            self.kernel_size = 2 * width * ratio + 1
            self.pad = width
            self.pad_left = 2 * width * ratio
            self.pad_right = self.kernel_size - ratio
            time_axis = (torch.arange(self.kernel_size) / ratio - width) * rolloff
            time_clamped = time_axis.clamp(-lowpass_filter_width, lowpass_filter_width)
            window = torch.cos(time_clamped * math.pi / lowpass_filter_width / 2) ** 2
            sinc_filter = (torch.sinc(time_axis) * window * rolloff / ratio).view(1, 1, -1)
        else:
            self.kernel_size = int(6 * ratio // 2) * 2 if kernel_size is None else kernel_size
            self.pad = self.kernel_size // ratio - 1
            self.pad_left = self.pad * self.ratio + (self.kernel_size - self.ratio) // 2
            self.pad_right = self.pad * self.ratio + (self.kernel_size - self.ratio + 1) // 2
            sinc_filter = kaiser_sinc_filter1d(cutoff=0.5 / ratio, half_width=0.6 / ratio,
                                               kernel_size=self.kernel_size)
        self.register_buffer("filter", sinc_filter.view(1, 1, self.kernel_size), persistent=persistent)

    def forward(self, x):
        num_channels = x.shape[1]
        x = F.pad(x, (self.pad, self.pad), mode=self.padding_mode)
        low_pass_filter = self.filter.to(dtype=x.dtype, device=x.device).expand(num_channels, -1, -1)
        x = self.ratio * F.conv_transpose1d(x, low_pass_filter, stride=self.ratio, groups=num_channels)
        return x[..., self.pad_left: -self.pad_right]


class SnakeBeta(nn.Module):
    def __init__(self, channels, alpha=1.0, eps=1e-9, trainable_params=True, logscale=True, use_beta=True):
        super().__init__()
        self.eps = eps
        self.logscale = logscale
        self.use_beta = use_beta
        self.alpha = nn.Parameter(torch.zeros(channels) if self.logscale else torch.ones(channels) * alpha)
        self.alpha.requires_grad = trainable_params
        if use_beta:
            self.beta = nn.Parameter(torch.zeros(channels) if self.logscale else torch.ones(channels) * alpha)
            self.beta.requires_grad = trainable_params

    def forward(self, hidden_states, channel_dim=1):
        broadcast_shape = [1] * hidden_states.ndim
        broadcast_shape[channel_dim] = -1
        alpha = self.alpha.view(broadcast_shape)
        if self.use_beta:
            beta = self.beta.view(broadcast_shape)
        if self.logscale:
            alpha = torch.exp(alpha)
            if self.use_beta:
                beta = torch.exp(beta)
        amplitude = beta if self.use_beta else alpha
        hidden_states = hidden_states + (1.0 / (amplitude + self.eps)) * torch.sin(hidden_states * alpha).pow(2)
        return hidden_states


class AntiAliasAct1d(nn.Module):
    def __init__(self, act_fn, ratio=2, kernel_size=12, **kwargs):
        super().__init__()
        self.upsample = UpSample1d(ratio=ratio, kernel_size=kernel_size)
        if isinstance(act_fn, str):
            if act_fn == "snakebeta":
                act_fn = SnakeBeta(**kwargs)
            elif act_fn == "snake":
                act_fn = SnakeBeta(**kwargs)
            else:
                act_fn = nn.LeakyReLU(**kwargs)
        self.act = act_fn
        self.downsample = DownSample1d(ratio=ratio, kernel_size=kernel_size)

    def forward(self, x):
        x = self.upsample(x)
        x = self.act(x)
        x = self.downsample(x)
        return x


class ConvTranspose1d(nn.ConvTranspose1d):
    """nn.ConvTranspose1d (the same parameters and boundary). Stand-in: torch 1.13 has no bf16 slow_conv_transpose on
    the CPU, so there a bf16 call is computed in f32 and rounded once to bf16, as a GPU's bf16 kernel accumulates in
    f32; in f32, and on a GPU, it is nn.ConvTranspose1d itself."""

    def forward(self, x, output_size=None):
        if x.dtype == torch.bfloat16 and x.device.type == "cpu":
            bias = None if self.bias is None else self.bias.float()
            return F.conv_transpose1d(x.float(), self.weight.float(), bias, self.stride, self.padding,
                                      self.output_padding, self.groups, self.dilation).to(x.dtype)
        return super().forward(x, output_size)


class ResBlock(nn.Module):
    def __init__(self, channels, kernel_size=3, stride=1, dilations=(1, 3, 5), act_fn="leaky_relu",
                 leaky_relu_negative_slope=0.1, antialias=False, antialias_ratio=2, antialias_kernel_size=12,
                 padding_mode="same"):
        super().__init__()
        self.dilations = dilations
        self.convs1 = nn.ModuleList([
            nn.Conv1d(channels, channels, kernel_size, stride=stride, dilation=dilation, padding=padding_mode)
            for dilation in dilations
        ])
        self.acts1 = nn.ModuleList()
        for _ in range(len(self.convs1)):
            if act_fn == "snakebeta":
                act = SnakeBeta(channels, use_beta=True)
            elif act_fn == "snake":
                act = SnakeBeta(channels, use_beta=False)
            else:
                act = nn.LeakyReLU(negative_slope=leaky_relu_negative_slope)
            if antialias:
                act = AntiAliasAct1d(act, ratio=antialias_ratio, kernel_size=antialias_kernel_size)
            self.acts1.append(act)
        self.convs2 = nn.ModuleList([
            nn.Conv1d(channels, channels, kernel_size, stride=stride, dilation=1, padding=padding_mode)
            for _ in range(len(dilations))
        ])
        self.acts2 = nn.ModuleList()
        for _ in range(len(self.convs2)):
            if act_fn == "snakebeta":
                act = SnakeBeta(channels, use_beta=True)
            elif act_fn == "snake":
                act = SnakeBeta(channels, use_beta=False)
            else:
                act_fn = nn.LeakyReLU(negative_slope=leaky_relu_negative_slope)  # upstream's slip: act stays acts1's
            if antialias:
                act = AntiAliasAct1d(act, ratio=antialias_ratio, kernel_size=antialias_kernel_size)
            self.acts2.append(act)

    def forward(self, x):
        for act1, conv1, act2, conv2 in zip(self.acts1, self.convs1, self.acts2, self.convs2):
            xt = act1(x)
            xt = conv1(xt)
            xt = act2(xt)
            xt = conv2(xt)
            x = x + xt
        return x


class LTX2Vocoder(nn.Module):
    def __init__(self, in_channels=32, hidden_channels=32, out_channels=2, upsample_kernel_sizes=(16, 15),
                 upsample_factors=(6, 5), resnet_kernel_sizes=(3, 7, 11),
                 resnet_dilations=((1, 3, 5), (1, 3, 5), (1, 3, 5)), act_fn="leaky_relu",
                 leaky_relu_negative_slope=0.1, antialias=False, antialias_ratio=2, antialias_kernel_size=12,
                 final_act_fn="tanh", final_bias=True, output_sampling_rate=24000):
        super().__init__()
        self.num_upsample_layers = len(upsample_kernel_sizes)
        self.resnets_per_upsample = len(resnet_kernel_sizes)
        self.out_channels = out_channels
        self.total_upsample_factor = math.prod(upsample_factors)
        self.act_fn = act_fn
        self.negative_slope = leaky_relu_negative_slope
        self.final_act_fn = final_act_fn
        if self.num_upsample_layers != len(upsample_factors):
            raise ValueError("`upsample_kernel_sizes` and `upsample_factors` should be lists of the same length")
        if self.resnets_per_upsample != len(resnet_dilations):
            raise ValueError("`resnet_kernel_sizes` and `resnet_dilations` should be lists of the same length")
        if self.act_fn not in ["snakebeta", "snake", "leaky_relu"]:
            raise ValueError(f"Unsupported activation function: {self.act_fn}.")
        self.conv_in = nn.Conv1d(in_channels, hidden_channels, kernel_size=7, stride=1, padding=3)
        self.upsamplers = nn.ModuleList()
        self.resnets = nn.ModuleList()
        input_channels = hidden_channels
        for i, (stride, kernel_size) in enumerate(zip(upsample_factors, upsample_kernel_sizes)):
            output_channels = input_channels // 2
            self.upsamplers.append(ConvTranspose1d(input_channels, output_channels, kernel_size, stride=stride,
                                                   padding=(kernel_size - stride) // 2))
            for kernel_size, dilations in zip(resnet_kernel_sizes, resnet_dilations):
                self.resnets.append(ResBlock(channels=output_channels, kernel_size=kernel_size, dilations=dilations,
                                             act_fn=act_fn, leaky_relu_negative_slope=leaky_relu_negative_slope,
                                             antialias=antialias, antialias_ratio=antialias_ratio,
                                             antialias_kernel_size=antialias_kernel_size))
            input_channels = output_channels
        if act_fn == "snakebeta" or act_fn == "snake":
            act_out = SnakeBeta(channels=output_channels, use_beta=True)
            self.act_out = AntiAliasAct1d(act_out, ratio=antialias_ratio, kernel_size=antialias_kernel_size)
        elif act_fn == "leaky_relu":
            # NOTE: does NOT use self.negative_slope, following the original code
            self.act_out = nn.LeakyReLU()
        self.conv_out = nn.Conv1d(output_channels, out_channels, 7, stride=1, padding=3, bias=final_bias)

    def forward(self, hidden_states, time_last=False):
        if not time_last:
            hidden_states = hidden_states.transpose(2, 3)
        hidden_states = hidden_states.flatten(1, 2)
        hidden_states = self.conv_in(hidden_states)
        for i in range(self.num_upsample_layers):
            if self.act_fn == "leaky_relu":
                hidden_states = F.leaky_relu(hidden_states, negative_slope=self.negative_slope)
            hidden_states = self.upsamplers[i](hidden_states)
            start = i * self.resnets_per_upsample
            end = (i + 1) * self.resnets_per_upsample
            resnet_outputs = torch.stack([self.resnets[j](hidden_states) for j in range(start, end)], dim=0)
            hidden_states = torch.mean(resnet_outputs, dim=0)
        hidden_states = self.act_out(hidden_states)
        hidden_states = self.conv_out(hidden_states)
        if self.final_act_fn == "tanh":
            hidden_states = torch.tanh(hidden_states)
        elif self.final_act_fn == "clamp":
            hidden_states = torch.clamp(hidden_states, -1, 1)
        return hidden_states


if __name__ == "__main__":
    capture_once(
        "ltx2_vocoder", LTX2Vocoder, lambda g: {"mel": torch.randn((1, 2, 17, 16), generator=g)}, sys.argv[1],
        dict(library_source="replica of huggingface/diffusers vocoder_ltx2.py@43c8be3653f3 as pipeline_ltx2.py"
                            "@95d0faa58b08 calls it (torch 1.13)",
             note="LTX2Vocoder in LTX-2.0's configuration (leaky_relu, no antialias, tanh) at hidden width 32 with "
                  "two upsample levels (ConvTranspose1d x6 and x5), three parallel dilated-conv resnets per level "
                  "averaged by stack+mean, on a [1, 2, 17, 16] stereo mel"),
        name="vocoder", output="waveform")
