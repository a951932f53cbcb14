"""The LTX-2 audio VAE (AutoencoderKLLTX2Audio), reimplemented for torch 1.13 (no diffusers here), captured small in f32
on CPU as one round trip the way the LTX-2 pipelines use it: a stereo mel spectrogram encoded and passed in as
audio_latents are (prepare_audio_latents: packed, normalised), then those latents de-normalised, unpacked and decoded
back to a mel spectrogram as the pipeline's end does before its vocoder.

Follows huggingface/diffusers src/diffusers/models/autoencoders/autoencoder_kl_ltx2_audio.py at
243cb893ae880092d27f4ce488fcb98e4a822758 line for line: LTX2AudioCausalConv2d (F.pad by (pad_w // 2, pad_w − pad_w // 2,
pad_h, 0) for causality_axis "height": the time axis padded (kernel−1)·dilation rows before only, the mel axis both
sides, then an unpadded Conv2d under .conv; for a 1x1 kernel the pad is (0, 0, 0, 0)), LTX2AudioPixelNorm
(x / sqrt(mean(x**2, dim=1) + 1e-6): norm_type "pixel", the class default, GroupNorm being refused with a causal axis),
LTX2AudioResnetBlock (norm1, SiLU, conv1, norm2, SiLU, dropout, conv2, a causal 1x1 nin_shortcut where the widths
differ, plus the input; temb_channels 0 so no temb_proj), LTX2AudioDownsample (F.pad (0, 1, 2, 0) with zeros, then a
stride-2 3x3 Conv2d with no padding of its own), LTX2AudioUpsample (nearest x2 by F.interpolate, a causal 3x3 conv,
then the first time row dropped: x[:, :, 1:, :]), LTX2AudioEncoder (conv_in, per level num_res_blocks resnets and a
downsample but at the last level, mid block_1, attn_1 an nn.Identity (mid_block_add_attention False), block_2,
norm_out, SiLU, conv_out to 2·latent_channels), LTX2AudioDecoder (conv_in, mid, per level from the deepest
num_res_blocks + 1 resnets and an upsample but at level 0, norm_out, SiLU, conv_out, then the crop to
target_frames = frames·4 − 3 and the configured mel_bins, padding none here, and the final slice) and
AutoencoderKLLTX2Audio (encode: DiagonalGaussianDistribution of the encoder's output; decode: the decoder; the
latents_mean / latents_std buffers). DiagonalGaussianDistribution is src/diffusers/models/autoencoders/vae.py's
(chunk into mean and logvar, logvar clamped to [-30, 20], std and var made; mode() is the mean): qwenimage_vae.py's
class, imported. attn_resolutions None and mid_block_add_attention False (the class defaults), so no LTX2AudioAttnBlock
is built. The same module tree, parameter names and shapes, call boundaries and arithmetic.

Pipeline: src/diffusers/pipelines/ltx2/pipeline_ltx2_condition.py at d39d89f0d6a266e56f7b7a7c37861236d14e4ac1
prepare_audio_latents for given latents (copied there from pipeline_ltx2.py): a 4-D [B, C, L, M] tensor packed by
_pack_audio_latents (transpose(1, 2).flatten(2, 3): [B, L, C·M]), _normalize_audio_latents ((x − latents_mean) /
latents_std, both .to(latents.device, latents.dtype), over the packed last axis), _create_noised_state at its default
noise_scale 0.0 (0·noise + 1·latents: left out, it only draws noise to zero it), .to(dtype=torch.float32) (__call__
passes f32). The denoising loop between is left out, so the normalisation and its inverse meet directly. The end, as
src/diffusers/pipelines/ltx2/pipeline_ltx2.py at 95d0faa58b08ef2966acac1bf3bfdfe7cfcdef72 __call__ has it:
_denormalize_audio_latents (x · latents_std + latents_mean, both cast to the latents' dtype), _unpack_audio_latents
(unflatten(2, (-1, num_mel_bins)).transpose(1, 2)), .to(self.audio_vae.dtype), audio_vae.decode(...)[0] (the mel
spectrogram the vocoder reads). The encode in front is the user's (vae.encode(mel).latent_dist.mode(), as
retrieve_latents' "argmax"). So in the bf16 run the mode is bf16, normalised in bf16, cast to f32, de-normalised in
f32, cast back to bf16 for the decoder. The buffers: the class registers latents_mean ones and latents_std zeros (sized
base_channels, which is C·M for the released config: 8 channels × 16 latent mel bins = 128); the checkpoint holds
trained ones, so build() sets them (mean 0.1·N(0, 1), std 0.5 + U(0, 1), from their own seeded generator).

Tiny config: the released layout (base_channels 128, ch_mult (1, 2, 4), num_res_blocks 2, latent_channels 8,
in/output_channels 2, mel_bins 64, norm "pixel", causality_axis "height", double_z) at base_channels 8 (widths 8, 16,
32), num_res_blocks 1 (one resnet per encoder level, two per decoder level), latent_channels 2, mel_bins 16 (so
C·M = 2·4 = 8 = base_channels, as 8·16 = 128 upstream). A [1, 2, 17, 16] mel (17 frames: the causal length
4·5 − 3, so the decoder's crop cuts nothing and pads nothing; 17 ≠ 16, so time and mel cannot be swapped unseen) →
moments [1, 4, 5, 4] → mode [1, 2, 5, 4] → packed and normalised [1, 5, 8] → back to [1, 2, 5, 4] → [1, 2, 17, 16].

usage: /usr/bin/python3 bench/unseen/replicas/ltx2_audio_vae.py OUTDIR
REPLICA_DTYPE=bf16 [REPLICA_DEVICE=cuda] as run.py's replicas: the bf16 run, beside the f32 one.
"""
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

from qwenimage_vae import DiagonalGaussianDistribution  # vae.py's DiagonalGaussianDistribution
from run import capture_once

LATENT_DOWNSAMPLE_FACTOR = 4


class LTX2AudioCausalConv2d(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride=1, dilation=1, groups=1, bias=True,
                 causality_axis="height"):
        super().__init__()
        self.causality_axis = causality_axis
        kernel_size = (kernel_size, kernel_size) if isinstance(kernel_size, int) else kernel_size
        dilation = (dilation, dilation) if isinstance(dilation, int) else dilation
        pad_h = (kernel_size[0] - 1) * dilation[0]
        pad_w = (kernel_size[1] - 1) * dilation[1]
        if self.causality_axis == "none":
            padding = (pad_w // 2, pad_w - pad_w // 2, pad_h // 2, pad_h - pad_h // 2)
        elif self.causality_axis in {"width", "width-compatibility"}:
            padding = (pad_w, 0, pad_h // 2, pad_h - pad_h // 2)
        elif self.causality_axis == "height":
            padding = (pad_w // 2, pad_w - pad_w // 2, pad_h, 0)
        else:
            raise ValueError(f"Invalid causality_axis: {causality_axis}")
        self.padding = padding
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, stride=stride, padding=0, dilation=dilation,
                              groups=groups, bias=bias)

    def forward(self, x):
        x = F.pad(x, self.padding)
        return self.conv(x)


class LTX2AudioPixelNorm(nn.Module):
    def __init__(self, dim=1, eps=1e-8):
        super().__init__()
        self.dim = dim
        self.eps = eps

    def forward(self, x):
        mean_sq = torch.mean(x ** 2, dim=self.dim, keepdim=True)
        rms = torch.sqrt(mean_sq + self.eps)
        return x / rms


def _norm(channels, norm_type):
    if norm_type == "group":
        return nn.GroupNorm(num_groups=32, num_channels=channels, eps=1e-6, affine=True)
    elif norm_type == "pixel":
        return LTX2AudioPixelNorm(dim=1, eps=1e-6)
    raise ValueError(f"Invalid normalization type: {norm_type}")


def _conv(in_channels, out_channels, kernel_size, causality_axis):
    """Upstream's repeated `if causality_axis is not None: LTX2AudioCausalConv2d(...) else: nn.Conv2d(...)`."""
    if causality_axis is not None:
        return LTX2AudioCausalConv2d(in_channels, out_channels, kernel_size=kernel_size, stride=1,
                                     causality_axis=causality_axis)
    return nn.Conv2d(in_channels, out_channels, kernel_size=kernel_size, stride=1, padding=kernel_size // 2)


class LTX2AudioResnetBlock(nn.Module):
    def __init__(self, in_channels, out_channels=None, conv_shortcut=False, dropout=0.0, temb_channels=512,
                 norm_type="group", causality_axis="height"):
        super().__init__()
        self.causality_axis = causality_axis
        if self.causality_axis is not None and self.causality_axis != "none" and norm_type == "group":
            raise ValueError("Causal ResnetBlock with GroupNorm is not supported.")
        self.in_channels = in_channels
        out_channels = in_channels if out_channels is None else out_channels
        self.out_channels = out_channels
        self.use_conv_shortcut = conv_shortcut
        self.norm1 = _norm(in_channels, norm_type)
        self.non_linearity = nn.SiLU()
        self.conv1 = _conv(in_channels, out_channels, 3, causality_axis)
        if temb_channels > 0:
            self.temb_proj = nn.Linear(temb_channels, out_channels)
        self.norm2 = _norm(out_channels, norm_type)
        self.dropout = nn.Dropout(dropout)
        self.conv2 = _conv(out_channels, out_channels, 3, causality_axis)
        if self.in_channels != self.out_channels:
            if self.use_conv_shortcut:
                self.conv_shortcut = _conv(in_channels, out_channels, 3, causality_axis)
            else:
                self.nin_shortcut = _conv(in_channels, out_channels, 1, causality_axis)

    def forward(self, x, temb=None):
        h = self.norm1(x)
        h = self.non_linearity(h)
        h = self.conv1(h)
        if temb is not None:
            h = h + self.temb_proj(self.non_linearity(temb))[:, :, None, None]
        h = self.norm2(h)
        h = self.non_linearity(h)
        h = self.dropout(h)
        h = self.conv2(h)
        if self.in_channels != self.out_channels:
            x = self.conv_shortcut(x) if self.use_conv_shortcut else self.nin_shortcut(x)
        return x + h


class LTX2AudioDownsample(nn.Module):
    def __init__(self, in_channels, with_conv, causality_axis="height"):
        super().__init__()
        self.with_conv = with_conv
        self.causality_axis = causality_axis
        if self.with_conv:
            self.conv = torch.nn.Conv2d(in_channels, in_channels, kernel_size=3, stride=2, padding=0)

    def forward(self, x):
        if self.with_conv:
            # Padding tuple is in the order: (left, right, top, bottom).
            if self.causality_axis == "none":
                pad = (0, 1, 0, 1)
            elif self.causality_axis == "width":
                pad = (2, 0, 0, 1)
            elif self.causality_axis == "height":
                pad = (0, 1, 2, 0)
            elif self.causality_axis == "width-compatibility":
                pad = (1, 0, 0, 1)
            else:
                raise ValueError(f"Invalid `causality_axis` {self.causality_axis}")
            x = F.pad(x, pad, mode="constant", value=0)
            x = self.conv(x)
        else:
            x = F.avg_pool2d(x, kernel_size=2, stride=2)
        return x


class LTX2AudioUpsample(nn.Module):
    def __init__(self, in_channels, with_conv, causality_axis="height"):
        super().__init__()
        self.with_conv = with_conv
        self.causality_axis = causality_axis
        if self.with_conv:
            self.conv = _conv(in_channels, in_channels, 3, causality_axis)

    def forward(self, x):
        x = torch.nn.functional.interpolate(x, scale_factor=2.0, mode="nearest")
        if self.with_conv:
            x = self.conv(x)
            if self.causality_axis is None or self.causality_axis == "none":
                pass
            elif self.causality_axis == "height":
                x = x[:, :, 1:, :]
            elif self.causality_axis == "width":
                x = x[:, :, :, 1:]
            elif self.causality_axis == "width-compatibility":
                pass
            else:
                raise ValueError(f"Invalid causality_axis: {self.causality_axis}")
        return x


class LTX2AudioEncoder(nn.Module):
    def __init__(self, base_channels=128, output_channels=1, num_res_blocks=2, attn_resolutions=None, in_channels=2,
                 resolution=256, latent_channels=8, ch_mult=(1, 2, 4), norm_type="group", causality_axis="width",
                 dropout=0.0, mid_block_add_attention=False, sample_rate=16000, mel_hop_length=160, is_causal=True,
                 mel_bins=64, double_z=True):
        super().__init__()
        self.mel_bins = mel_bins
        self.base_channels = base_channels
        self.temb_ch = 0
        self.num_resolutions = len(ch_mult)
        self.num_res_blocks = num_res_blocks
        self.resolution = resolution
        self.norm_type = norm_type
        self.channel_multipliers = ch_mult
        self.attn_resolutions = attn_resolutions
        self.causality_axis = causality_axis
        base_block_channels = base_channels
        self.conv_in = _conv(in_channels, base_block_channels, 3, self.causality_axis)
        self.down = nn.ModuleList()
        block_in = base_block_channels
        curr_res = self.resolution
        for level in range(self.num_resolutions):
            stage = nn.Module()
            stage.block = nn.ModuleList()
            stage.attn = nn.ModuleList()
            block_out = self.base_channels * self.channel_multipliers[level]
            for _ in range(self.num_res_blocks):
                stage.block.append(LTX2AudioResnetBlock(in_channels=block_in, out_channels=block_out,
                                                        temb_channels=self.temb_ch, dropout=dropout,
                                                        norm_type=self.norm_type,
                                                        causality_axis=self.causality_axis))
                block_in = block_out
                if self.attn_resolutions:
                    raise NotImplementedError("attn_resolutions: off in the released config")
            if level != self.num_resolutions - 1:
                stage.downsample = LTX2AudioDownsample(block_in, True, causality_axis=self.causality_axis)
                curr_res = curr_res // 2
            self.down.append(stage)
        self.mid = nn.Module()
        self.mid.block_1 = LTX2AudioResnetBlock(in_channels=block_in, out_channels=block_in,
                                                temb_channels=self.temb_ch, dropout=dropout,
                                                norm_type=self.norm_type, causality_axis=self.causality_axis)
        if mid_block_add_attention:
            raise NotImplementedError("mid_block_add_attention: off in the released config")
        self.mid.attn_1 = nn.Identity()
        self.mid.block_2 = LTX2AudioResnetBlock(in_channels=block_in, out_channels=block_in,
                                                temb_channels=self.temb_ch, dropout=dropout,
                                                norm_type=self.norm_type, causality_axis=self.causality_axis)
        final_block_channels = block_in
        z_channels = 2 * latent_channels if double_z else latent_channels
        self.norm_out = _norm(final_block_channels, self.norm_type)
        self.non_linearity = nn.SiLU()
        self.conv_out = _conv(final_block_channels, z_channels, 3, self.causality_axis)

    def forward(self, hidden_states):
        # hidden_states expected shape: (batch_size, channels, time, num_mel_bins)
        hidden_states = self.conv_in(hidden_states)
        for level in range(self.num_resolutions):
            stage = self.down[level]
            for block_idx, block in enumerate(stage.block):
                hidden_states = block(hidden_states, temb=None)
                if stage.attn:
                    hidden_states = stage.attn[block_idx](hidden_states)
            if level != self.num_resolutions - 1 and hasattr(stage, "downsample"):
                hidden_states = stage.downsample(hidden_states)
        hidden_states = self.mid.block_1(hidden_states, temb=None)
        hidden_states = self.mid.attn_1(hidden_states)
        hidden_states = self.mid.block_2(hidden_states, temb=None)
        hidden_states = self.norm_out(hidden_states)
        hidden_states = self.non_linearity(hidden_states)
        hidden_states = self.conv_out(hidden_states)
        return hidden_states


class LTX2AudioDecoder(nn.Module):
    def __init__(self, base_channels=128, output_channels=1, num_res_blocks=2, attn_resolutions=None, in_channels=2,
                 resolution=256, latent_channels=8, ch_mult=(1, 2, 4), norm_type="group", causality_axis="width",
                 dropout=0.0, mid_block_add_attention=False, sample_rate=16000, mel_hop_length=160, is_causal=True,
                 mel_bins=64):
        super().__init__()
        self.mel_bins = mel_bins
        self.base_channels = base_channels
        self.temb_ch = 0
        self.num_resolutions = len(ch_mult)
        self.num_res_blocks = num_res_blocks
        self.resolution = resolution
        self.out_ch = output_channels
        self.give_pre_end = False
        self.tanh_out = False
        self.norm_type = norm_type
        self.channel_multipliers = ch_mult
        self.attn_resolutions = attn_resolutions
        self.causality_axis = causality_axis
        base_block_channels = base_channels * self.channel_multipliers[-1]
        self.conv_in = _conv(latent_channels, base_block_channels, 3, self.causality_axis)
        self.non_linearity = nn.SiLU()
        self.mid = nn.Module()
        self.mid.block_1 = LTX2AudioResnetBlock(in_channels=base_block_channels, out_channels=base_block_channels,
                                                temb_channels=self.temb_ch, dropout=dropout,
                                                norm_type=self.norm_type, causality_axis=self.causality_axis)
        if mid_block_add_attention:
            raise NotImplementedError("mid_block_add_attention: off in the released config")
        self.mid.attn_1 = nn.Identity()
        self.mid.block_2 = LTX2AudioResnetBlock(in_channels=base_block_channels, out_channels=base_block_channels,
                                                temb_channels=self.temb_ch, dropout=dropout,
                                                norm_type=self.norm_type, causality_axis=self.causality_axis)
        self.up = nn.ModuleList()
        block_in = base_block_channels
        curr_res = self.resolution // (2 ** (self.num_resolutions - 1))
        for level in reversed(range(self.num_resolutions)):
            stage = nn.Module()
            stage.block = nn.ModuleList()
            stage.attn = nn.ModuleList()
            block_out = self.base_channels * self.channel_multipliers[level]
            for _ in range(self.num_res_blocks + 1):
                stage.block.append(LTX2AudioResnetBlock(in_channels=block_in, out_channels=block_out,
                                                        temb_channels=self.temb_ch, dropout=dropout,
                                                        norm_type=self.norm_type,
                                                        causality_axis=self.causality_axis))
                block_in = block_out
                if self.attn_resolutions:
                    raise NotImplementedError("attn_resolutions: off in the released config")
            if level != 0:
                stage.upsample = LTX2AudioUpsample(block_in, True, causality_axis=self.causality_axis)
                curr_res *= 2
            self.up.insert(0, stage)
        final_block_channels = block_in
        self.norm_out = _norm(final_block_channels, self.norm_type)
        self.conv_out = _conv(final_block_channels, output_channels, 3, self.causality_axis)

    def forward(self, sample):
        _, _, frames, mel_bins = sample.shape
        target_frames = frames * LATENT_DOWNSAMPLE_FACTOR
        if self.causality_axis is not None:
            target_frames = max(target_frames - (LATENT_DOWNSAMPLE_FACTOR - 1), 1)
        target_channels = self.out_ch
        target_mel_bins = self.mel_bins if self.mel_bins is not None else mel_bins

        hidden_features = self.conv_in(sample)
        hidden_features = self.mid.block_1(hidden_features, temb=None)
        hidden_features = self.mid.attn_1(hidden_features)
        hidden_features = self.mid.block_2(hidden_features, temb=None)
        for level in reversed(range(self.num_resolutions)):
            stage = self.up[level]
            for block_idx, block in enumerate(stage.block):
                hidden_features = block(hidden_features, temb=None)
                if stage.attn:
                    hidden_features = stage.attn[block_idx](hidden_features)
            if level != 0 and hasattr(stage, "upsample"):
                hidden_features = stage.upsample(hidden_features)
        if self.give_pre_end:
            return hidden_features
        hidden = self.norm_out(hidden_features)
        hidden = self.non_linearity(hidden)
        decoded_output = self.conv_out(hidden)
        decoded_output = torch.tanh(decoded_output) if self.tanh_out else decoded_output

        _, _, current_time, current_freq = decoded_output.shape
        target_time = target_frames
        target_freq = target_mel_bins
        decoded_output = decoded_output[
            :, :target_channels, : min(current_time, target_time), : min(current_freq, target_freq)
        ]
        time_padding_needed = target_time - decoded_output.shape[2]
        freq_padding_needed = target_freq - decoded_output.shape[3]
        if time_padding_needed > 0 or freq_padding_needed > 0:
            padding = (0, max(freq_padding_needed, 0), 0, max(time_padding_needed, 0))
            decoded_output = F.pad(decoded_output, padding)
        decoded_output = decoded_output[:, :target_channels, :target_time, :target_freq]
        return decoded_output


class AutoencoderKLLTX2Audio(nn.Module):
    def __init__(self, base_channels=8, output_channels=2, ch_mult=(1, 2, 4), num_res_blocks=1, attn_resolutions=None,
                 in_channels=2, resolution=256, latent_channels=2, norm_type="pixel", causality_axis="height",
                 dropout=0.0, mid_block_add_attention=False, sample_rate=16000, mel_hop_length=160, is_causal=True,
                 mel_bins=16, double_z=True):
        super().__init__()
        supported_causality_axes = {"none", "width", "height", "width-compatibility"}
        if causality_axis not in supported_causality_axes:
            raise ValueError(f"{causality_axis=} is not valid. Supported values: {supported_causality_axes}")
        attn_resolution_set = set(attn_resolutions) if attn_resolutions else attn_resolutions
        kw = dict(base_channels=base_channels, output_channels=output_channels, ch_mult=ch_mult,
                  num_res_blocks=num_res_blocks, attn_resolutions=attn_resolution_set, in_channels=in_channels,
                  resolution=resolution, latent_channels=latent_channels, norm_type=norm_type,
                  causality_axis=causality_axis, dropout=dropout, mid_block_add_attention=mid_block_add_attention,
                  sample_rate=sample_rate, mel_hop_length=mel_hop_length, is_causal=is_causal, mel_bins=mel_bins)
        self.encoder = LTX2AudioEncoder(**kw, double_z=double_z)
        self.decoder = LTX2AudioDecoder(**kw)
        latents_std = torch.zeros((base_channels,))
        latents_mean = torch.ones((base_channels,))
        self.register_buffer("latents_mean", latents_mean, persistent=True)
        self.register_buffer("latents_std", latents_std, persistent=True)
        self.temporal_compression_ratio = LATENT_DOWNSAMPLE_FACTOR
        self.mel_compression_ratio = LATENT_DOWNSAMPLE_FACTOR
        self.use_slicing = False
        self.latent_channels = latent_channels  # self.config.latent_channels
        self.mel_bins = mel_bins  # self.config.mel_bins

    @property
    def dtype(self):  # ModelMixin.dtype
        return next(self.parameters()).dtype

    def _encode(self, x):
        return self.encoder(x)

    def encode(self, x, return_dict=True):
        h = self._encode(x)  # no slicing
        posterior = DiagonalGaussianDistribution(h)
        return (posterior,)  # AutoencoderKLOutput(latent_dist=posterior)

    def _decode(self, z):
        return self.decoder(z)

    def decode(self, z, return_dict=True):
        decoded = self._decode(z)  # no slicing
        return (decoded,)


# LTX2Pipeline's static helpers
def _pack_audio_latents(latents, patch_size=None, patch_size_t=None):
    # patch_size None: [B, C, L, M] --> [B, L, C * M]
    latents = latents.transpose(1, 2).flatten(2, 3)
    return latents


def _unpack_audio_latents(latents, latent_length, num_mel_bins, patch_size=None, patch_size_t=None):
    # [B, S, D] = [B, L, C * M]
    latents = latents.unflatten(2, (-1, num_mel_bins)).transpose(1, 2)
    return latents


def _normalize_audio_latents(latents, latents_mean, latents_std):
    latents_mean = latents_mean.to(latents.device, latents.dtype)
    latents_std = latents_std.to(latents.device, latents.dtype)
    return (latents - latents_mean) / latents_std


def _denormalize_audio_latents(latents, latents_mean, latents_std):
    latents_mean = latents_mean.to(latents.device, latents.dtype)
    latents_std = latents_std.to(latents.device, latents.dtype)
    return (latents * latents_std) + latents_mean


def pipeline_round_trip(audio_vae, mel):
    # the user's encode, passed as audio_latents: retrieve_latents(audio_vae.encode(mel), sample_mode="argmax")
    audio_latents = audio_vae.encode(mel)[0].mode()
    # prepare_audio_latents(latents=audio_latents, dtype=torch.float32, noise_scale=0.0)
    latents = audio_latents
    if latents.ndim == 4:
        latents = _pack_audio_latents(latents)
    latents = _normalize_audio_latents(latents, audio_vae.latents_mean, audio_vae.latents_std)
    # _create_noised_state(latents, 0.0, generator): 0 * noise + 1 * latents, left out
    audio_latents = latents.to(device=latents.device, dtype=torch.float32)
    audio_num_frames = audio_latents.shape[1]
    latent_mel_bins = audio_vae.mel_bins // audio_vae.mel_compression_ratio
    # (the denoising loop left out) __call__'s end
    audio_latents = _denormalize_audio_latents(audio_latents, audio_vae.latents_mean, audio_vae.latents_std)
    audio_latents = _unpack_audio_latents(audio_latents, audio_num_frames, num_mel_bins=latent_mel_bins)
    audio_latents = audio_latents.to(audio_vae.dtype)
    generated_mel_spectrograms = audio_vae.decode(audio_latents, return_dict=False)[0]
    return generated_mel_spectrograms


def build():
    model = AutoencoderKLLTX2Audio()
    g = torch.Generator().manual_seed(3)
    with torch.no_grad():  # the checkpoint's statistics (the class's own are ones and zeros)
        model.latents_mean.copy_(0.1 * torch.randn(model.latents_mean.shape, generator=g))
        model.latents_std.copy_(0.5 + torch.rand(model.latents_std.shape, generator=g))
    model.forward = lambda mel: pipeline_round_trip(model, mel)
    return model


if __name__ == "__main__":
    capture_once(
        "ltx2_audio_vae", build, lambda g: {"mel": torch.randn((1, 2, 17, 16), generator=g)}, sys.argv[1],
        dict(library_source="replica of huggingface/diffusers autoencoder_kl_ltx2_audio.py@243cb893ae88 (vae.py's "
                            "DiagonalGaussianDistribution), pipeline_ltx2_condition.py@d39d89f0d6a2 and "
                            "pipeline_ltx2.py@95d0faa58b08 (torch 1.13)",
             note="AutoencoderKLLTX2Audio at widths 8/16/32 (pixel norm, causal in time) as the LTX-2 pipelines use "
                  "it: encode, the posterior's mode, packed to [B, L, C*M] and normalised by latents_mean/std, cast "
                  "to f32, de-normalised, unpacked, cast to the VAE's dtype, decoded to a mel spectrogram"),
        output="mel")
