"""The Mochi VAE (AutoencoderKLMochi) whole, reimplemented for torch 1.13 (no diffusers here), captured small in f32 on
CPU as one forward (encode, the posterior's mode, decode) down upstream's default path: one-shot encoder and decoder
calls (no tiling, no slicing, no frame-wise encoding or decoding, so every causal convolution replicate-pads), then
the decoded clip's first temporal_compression_ratio - 1 frames dropped (drop_last_temporal_frames, on by default).

Follows huggingface/diffusers src/diffusers/models/autoencoders/autoencoder_kl_mochi.py line for line:
MochiChunkedGroupNorm3D (frames folded into the batch, permute(0, 2, 1, 3, 4).flatten(0, 1), nn.GroupNorm(32 groups,
eps 1e-5) run on chunks of chunk_size 8 frames split along that batch, joined by cat, unflattened and permuted back:
a per-frame group norm), MochiResnetBlock3D (norm-SiLU-conv twice, identity residual), MochiDownBlock3D (a causal conv
of kernel = stride = (temporal_expansion, spatial_expansion, spatial_expansion), then per layer a resnet and, with
attention, residual + attention over time: the normed [B, C, T, H, W] permuted (0, 3, 4, 2, 1) and flattened to
[B*H*W, T, C] rows, attention, unflattened (B, H, W) and permuted (0, 4, 3, 1, 2) back), MochiMidBlock3D (the same
without the conv), MochiUpBlock3D (resnets, then a channel Linear to out*st*sh*sw on channels-last and the
depth-to-space-time rearrangement view(B, -1, st, sh, sw, T, H, W).permute(0, 1, 5, 2, 6, 3, 7, 4) ->
[B, C, T*st, H*sh, W*sw]), FourierFeatures (f32: the input channels, then sin and cos of each channel scaled by
2*pi*2^f for f in 6, 7, channel-major), MochiEncoder3D (fourier features, proj_in a Linear over channels, block_in,
down blocks, block_out, norm_out, SiLU, proj_out bias-free Linear to 2*latent), MochiDecoder3D (conv_in a 1x1x1
Conv3d, block_in, up blocks, block_out, SiLU, proj_out Linear) and the model's forward; with the pieces it imports:
autoencoder_kl_cogvideox.py's CogVideoXCausalConv3d in pad_mode "replicate" (F.pad replicate by (w, w, h, h, kt-1, 0),
w/h = (k-1)//2, then an unpadded CogVideoXSafeConv3d; the returned conv_cache None), attention_processor.py's Attention
(query_dim, heads = C // 32, dim_head 32, qk_norm "l2": normalization.py's LpNorm, F.normalize(p=2, dim=-1,
eps 1e-5), is_causal, bias-free to_q/k/v, biased to_out) with MochiVaeAttnProcessor2_0 (a single-frame input takes
to_v -> to_out only; else heads split, L2 q/k norms, causal sdpa, heads merged, to_out; residual_connection off: the
block adds the residual). The posterior's mode is DiagonalGaussianDistribution(h).mode(): the first half of the
channels. F.scaled_dot_product_attention(is_causal=True) stands in as its math path with a lower-triangular boolean
mask (torch 1.13 lacks it).

Tiny config: encoder_block_out_channels (32, 32, 32, 64), decoder_block_out_channels (32, 32, 32, 32) (the chunked
group norm's 32 groups and heads = C // 32 make 32 the narrowest width; 64 gives the encoder's last level two heads),
latent_channels 4, layers_per_block (1, 1, 1, 1, 1), temporal_expansions (1, 2, 3) (upstream's), spatial_expansions
(2, 1, 1) (upstream's (2, 2, 2) would leave a small clip 1 cell wide, and a per-frame group of 1 channel x 2 cells is
ill-conditioned in bf16), add_attention_block (False, True, True, True, True) (upstream's), in_channels 15 (3 + 3*2*2
fourier channels). A [1, 3, 7, 6, 10] clip (no two extents alike) -> frames 7 -> 7 -> 4 -> 2 (floor((T-1)/te)+1),
space 6x10 -> 3x5: latent [1, 4, 2, 3, 5] (encoder attention over 15 cells' 7, 4, 2 and 2 frames, the last two with
2 heads) -> decoder frames 2 -> 6 -> 12 -> 12, space 3x5 -> 6x10 in up_blocks.2 (the group norms of up_blocks.2 and
block_out fold 12 frames: chunks of 8 + 4), 12 - 5 = 7 frames kept: [1, 3, 7, 6, 10].

usage: /usr/bin/python3 bench/unseen/replicas/mochi_vae.py OUTDIR
REPLICA_DTYPE=bf16 [REPLICA_DEVICE=cuda] as run.py's replicas: the bf16 run, beside the f32 one.
"""
import functools
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

from cogvideox_vae import CogVideoXCausalConv3d
from run import capture_once, sdpa


class LpNorm(nn.Module):
    def __init__(self, p=2, dim=-1, eps=1e-12):
        super().__init__()
        self.p, self.dim, self.eps = p, dim, eps

    def forward(self, hidden_states):
        return F.normalize(hidden_states, p=self.p, dim=self.dim, eps=self.eps)


class Attention(nn.Module):
    """diffusers' Attention(query_dim, heads, dim_head, qk_norm="l2", is_causal=True,
    processor=MochiVaeAttnProcessor2_0()): bias-free to_q/k/v, biased to_out, LpNorm q/k norms (eps 1e-5), no group
    norm, no residual_connection, rescale_output_factor 1."""

    def __init__(self, query_dim, heads=8, dim_head=64, bias=False, qk_norm=None, eps=1e-5, out_bias=True,
                 rescale_output_factor=1.0, residual_connection=False, is_causal=False):
        super().__init__()
        assert qk_norm == "l2"
        self.inner_dim = dim_head * heads
        self.heads = heads
        self.is_causal = is_causal
        self.rescale_output_factor = rescale_output_factor
        self.residual_connection = residual_connection
        self.norm_q = LpNorm(p=2, dim=-1, eps=eps)
        self.norm_k = LpNorm(p=2, dim=-1, eps=eps)
        self.to_q = nn.Linear(query_dim, self.inner_dim, bias=bias)
        self.to_k = nn.Linear(query_dim, self.inner_dim, bias=bias)
        self.to_v = nn.Linear(query_dim, self.inner_dim, bias=bias)
        self.to_out = nn.ModuleList([nn.Linear(self.inner_dim, query_dim, bias=out_bias), nn.Dropout(0.0)])

    def forward(self, hidden_states, encoder_hidden_states=None, attention_mask=None):
        # MochiVaeAttnProcessor2_0.__call__ (no mask is passed here)
        residual = hidden_states
        is_single_frame = hidden_states.shape[1] == 1
        batch_size, sequence_length, _ = (hidden_states.shape if encoder_hidden_states is None
                                          else encoder_hidden_states.shape)
        if is_single_frame:
            hidden_states = self.to_v(hidden_states)
            hidden_states = self.to_out[0](hidden_states)
            hidden_states = self.to_out[1](hidden_states)
            if self.residual_connection:
                hidden_states = hidden_states + residual
            return hidden_states / self.rescale_output_factor
        query = self.to_q(hidden_states)
        if encoder_hidden_states is None:
            encoder_hidden_states = hidden_states
        key = self.to_k(encoder_hidden_states)
        value = self.to_v(encoder_hidden_states)
        inner_dim = key.shape[-1]
        head_dim = inner_dim // self.heads
        query = query.view(batch_size, -1, self.heads, head_dim).transpose(1, 2)
        key = key.view(batch_size, -1, self.heads, head_dim).transpose(1, 2)
        value = value.view(batch_size, -1, self.heads, head_dim).transpose(1, 2)
        query = self.norm_q(query)
        key = self.norm_k(key)
        mask = None
        if self.is_causal:  # F.scaled_dot_product_attention(is_causal=True): torch.ones(L, S, bool).tril()
            mask = torch.ones(query.shape[-2], key.shape[-2], dtype=torch.bool, device=query.device).tril(diagonal=0)
        hidden_states = sdpa(query, key, value, mask=mask)
        hidden_states = hidden_states.transpose(1, 2).reshape(batch_size, -1, self.heads * head_dim)
        hidden_states = hidden_states.to(query.dtype)
        hidden_states = self.to_out[0](hidden_states)
        hidden_states = self.to_out[1](hidden_states)
        if self.residual_connection:
            hidden_states = hidden_states + residual
        return hidden_states / self.rescale_output_factor


class MochiChunkedGroupNorm3D(nn.Module):
    def __init__(self, num_channels, num_groups=32, affine=True, chunk_size=8):
        super().__init__()
        self.norm_layer = nn.GroupNorm(num_channels=num_channels, num_groups=num_groups, affine=affine)
        self.chunk_size = chunk_size

    def forward(self, x=None):
        batch_size = x.size(0)
        x = x.permute(0, 2, 1, 3, 4).flatten(0, 1)
        output = torch.cat([self.norm_layer(chunk) for chunk in x.split(self.chunk_size, dim=0)], dim=0)
        output = output.unflatten(0, (batch_size, -1)).permute(0, 2, 1, 3, 4)
        return output


class MochiResnetBlock3D(nn.Module):
    def __init__(self, in_channels, out_channels=None, act_fn="swish"):
        super().__init__()
        out_channels = out_channels or in_channels
        self.in_channels, self.out_channels = in_channels, out_channels
        self.nonlinearity = nn.SiLU()  # get_activation("swish")
        self.norm1 = MochiChunkedGroupNorm3D(num_channels=in_channels)
        self.conv1 = CogVideoXCausalConv3d(in_channels=in_channels, out_channels=out_channels, kernel_size=3,
                                           stride=1, pad_mode="replicate")
        self.norm2 = MochiChunkedGroupNorm3D(num_channels=out_channels)
        self.conv2 = CogVideoXCausalConv3d(in_channels=out_channels, out_channels=out_channels, kernel_size=3,
                                           stride=1, pad_mode="replicate")

    def forward(self, inputs, conv_cache=None):
        new_conv_cache = {}
        conv_cache = conv_cache or {}
        hidden_states = inputs
        hidden_states = self.norm1(hidden_states)
        hidden_states = self.nonlinearity(hidden_states)
        hidden_states, new_conv_cache["conv1"] = self.conv1(hidden_states, conv_cache=conv_cache.get("conv1"))
        hidden_states = self.norm2(hidden_states)
        hidden_states = self.nonlinearity(hidden_states)
        hidden_states, new_conv_cache["conv2"] = self.conv2(hidden_states, conv_cache=conv_cache.get("conv2"))
        hidden_states = hidden_states + inputs
        return hidden_states, new_conv_cache


def _vae_attention(channels):
    return Attention(query_dim=channels, heads=channels // 32, dim_head=32, qk_norm="l2", is_causal=True)


def _attend(hidden_states, norm, attn, chunk_size=None):
    """The attention step of MochiDownBlock3D / MochiMidBlock3D: rows are the cells, the sequence their frames."""
    residual = hidden_states
    hidden_states = norm(hidden_states)
    batch_size, num_channels, num_frames, height, width = hidden_states.shape
    hidden_states = hidden_states.permute(0, 3, 4, 2, 1).flatten(0, 2).contiguous()
    if chunk_size is None or hidden_states.size(0) <= chunk_size:
        hidden_states = attn(hidden_states)
    else:
        hidden_states_chunks = []
        for i in range(0, hidden_states.size(0), chunk_size):
            hidden_states_chunks.append(attn(hidden_states[i: i + chunk_size]))
        hidden_states = torch.cat(hidden_states_chunks)
    hidden_states = hidden_states.unflatten(0, (batch_size, height, width)).permute(0, 4, 3, 1, 2)
    return residual + hidden_states


class MochiDownBlock3D(nn.Module):
    def __init__(self, in_channels, out_channels, num_layers=1, temporal_expansion=2, spatial_expansion=2,
                 add_attention=True):
        super().__init__()
        self.temporal_expansion = temporal_expansion
        self.spatial_expansion = spatial_expansion
        self.conv_in = CogVideoXCausalConv3d(
            in_channels=in_channels, out_channels=out_channels,
            kernel_size=(temporal_expansion, spatial_expansion, spatial_expansion),
            stride=(temporal_expansion, spatial_expansion, spatial_expansion), pad_mode="replicate")
        resnets, norms, attentions = [], [], []
        for _ in range(num_layers):
            resnets.append(MochiResnetBlock3D(in_channels=out_channels))
            if add_attention:
                norms.append(MochiChunkedGroupNorm3D(num_channels=out_channels))
                attentions.append(_vae_attention(out_channels))
            else:
                norms.append(None)
                attentions.append(None)
        self.resnets = nn.ModuleList(resnets)
        self.norms = nn.ModuleList(norms)
        self.attentions = nn.ModuleList(attentions)

    def forward(self, hidden_states, conv_cache=None, chunk_size=2**15):
        new_conv_cache = {}
        conv_cache = conv_cache or {}
        hidden_states, new_conv_cache["conv_in"] = self.conv_in(hidden_states)
        for i, (resnet, norm, attn) in enumerate(zip(self.resnets, self.norms, self.attentions)):
            key = f"resnet_{i}"
            hidden_states, new_conv_cache[key] = resnet(hidden_states, conv_cache=conv_cache.get(key))
            if attn is not None:
                hidden_states = _attend(hidden_states, norm, attn, chunk_size)
        return hidden_states, new_conv_cache


class MochiMidBlock3D(nn.Module):
    def __init__(self, in_channels, num_layers=3, add_attention=True):
        super().__init__()
        resnets, norms, attentions = [], [], []
        for _ in range(num_layers):
            resnets.append(MochiResnetBlock3D(in_channels=in_channels))
            if add_attention:
                norms.append(MochiChunkedGroupNorm3D(num_channels=in_channels))
                attentions.append(_vae_attention(in_channels))
            else:
                norms.append(None)
                attentions.append(None)
        self.resnets = nn.ModuleList(resnets)
        self.norms = nn.ModuleList(norms)
        self.attentions = nn.ModuleList(attentions)

    def forward(self, hidden_states, conv_cache=None):
        new_conv_cache = {}
        conv_cache = conv_cache or {}
        for i, (resnet, norm, attn) in enumerate(zip(self.resnets, self.norms, self.attentions)):
            key = f"resnet_{i}"
            hidden_states, new_conv_cache[key] = resnet(hidden_states, conv_cache=conv_cache.get(key))
            if attn is not None:
                hidden_states = _attend(hidden_states, norm, attn)
        return hidden_states, new_conv_cache


class MochiUpBlock3D(nn.Module):
    def __init__(self, in_channels, out_channels, num_layers=1, temporal_expansion=2, spatial_expansion=2):
        super().__init__()
        self.temporal_expansion = temporal_expansion
        self.spatial_expansion = spatial_expansion
        self.resnets = nn.ModuleList([MochiResnetBlock3D(in_channels=in_channels) for _ in range(num_layers)])
        self.proj = nn.Linear(in_channels, out_channels * temporal_expansion * spatial_expansion ** 2)

    def forward(self, hidden_states, conv_cache=None):
        new_conv_cache = {}
        conv_cache = conv_cache or {}
        for i, resnet in enumerate(self.resnets):
            key = f"resnet_{i}"
            hidden_states, new_conv_cache[key] = resnet(hidden_states, conv_cache=conv_cache.get(key))
        hidden_states = hidden_states.permute(0, 2, 3, 4, 1)
        hidden_states = self.proj(hidden_states)
        hidden_states = hidden_states.permute(0, 4, 1, 2, 3)
        batch_size, num_channels, num_frames, height, width = hidden_states.shape
        st = self.temporal_expansion
        sh = self.spatial_expansion
        sw = self.spatial_expansion
        hidden_states = hidden_states.view(batch_size, -1, st, sh, sw, num_frames, height, width)
        hidden_states = hidden_states.permute(0, 1, 5, 2, 6, 3, 7, 4).contiguous()
        hidden_states = hidden_states.view(batch_size, -1, num_frames * st, height * sh, width * sw)
        return hidden_states, new_conv_cache


class FourierFeatures(nn.Module):
    def __init__(self, start=6, stop=8, step=1):
        super().__init__()
        self.start, self.stop, self.step = start, stop, step

    def forward(self, inputs):
        original_dtype = inputs.dtype
        inputs = inputs.to(torch.float32)
        num_channels = inputs.shape[1]
        num_freqs = (self.stop - self.start) // self.step
        freqs = torch.arange(self.start, self.stop, self.step, dtype=inputs.dtype, device=inputs.device)
        w = torch.pow(2.0, freqs) * (2 * torch.pi)  # [num_freqs]
        w = w.repeat(num_channels)[None, :, None, None, None]  # [1, num_channels * num_freqs, 1, 1, 1]
        h = inputs.repeat_interleave(num_freqs, dim=1, output_size=inputs.shape[1] * num_freqs)
        h = w * h
        return torch.cat([inputs, torch.sin(h), torch.cos(h)], dim=1).to(original_dtype)


class MochiEncoder3D(nn.Module):
    def __init__(self, in_channels, out_channels, block_out_channels=(128, 256, 512, 768),
                 layers_per_block=(3, 3, 4, 6, 3), temporal_expansions=(1, 2, 3), spatial_expansions=(2, 2, 2),
                 add_attention_block=(False, True, True, True, True), act_fn="swish"):
        super().__init__()
        self.nonlinearity = nn.SiLU()  # get_activation(act_fn)
        self.fourier_features = FourierFeatures()
        self.proj_in = nn.Linear(in_channels, block_out_channels[0])
        self.block_in = MochiMidBlock3D(in_channels=block_out_channels[0], num_layers=layers_per_block[0],
                                        add_attention=add_attention_block[0])
        self.down_blocks = nn.ModuleList([
            MochiDownBlock3D(in_channels=block_out_channels[i], out_channels=block_out_channels[i + 1],
                             num_layers=layers_per_block[i + 1], temporal_expansion=temporal_expansions[i],
                             spatial_expansion=spatial_expansions[i], add_attention=add_attention_block[i + 1])
            for i in range(len(block_out_channels) - 1)])
        self.block_out = MochiMidBlock3D(in_channels=block_out_channels[-1], num_layers=layers_per_block[-1],
                                         add_attention=add_attention_block[-1])
        self.norm_out = MochiChunkedGroupNorm3D(block_out_channels[-1])
        self.proj_out = nn.Linear(block_out_channels[-1], 2 * out_channels, bias=False)

    def forward(self, hidden_states, conv_cache=None):
        new_conv_cache = {}
        conv_cache = conv_cache or {}
        hidden_states = self.fourier_features(hidden_states)
        hidden_states = hidden_states.permute(0, 2, 3, 4, 1)
        hidden_states = self.proj_in(hidden_states)
        hidden_states = hidden_states.permute(0, 4, 1, 2, 3)
        hidden_states, new_conv_cache["block_in"] = self.block_in(hidden_states, conv_cache=conv_cache.get("block_in"))
        for i, down_block in enumerate(self.down_blocks):
            key = f"down_block_{i}"
            hidden_states, new_conv_cache[key] = down_block(hidden_states, conv_cache=conv_cache.get(key))
        hidden_states, new_conv_cache["block_out"] = self.block_out(hidden_states,
                                                                    conv_cache=conv_cache.get("block_out"))
        hidden_states = self.norm_out(hidden_states)
        hidden_states = self.nonlinearity(hidden_states)
        hidden_states = hidden_states.permute(0, 2, 3, 4, 1)
        hidden_states = self.proj_out(hidden_states)
        hidden_states = hidden_states.permute(0, 4, 1, 2, 3)
        return hidden_states, new_conv_cache


class MochiDecoder3D(nn.Module):
    def __init__(self, in_channels, out_channels, block_out_channels=(128, 256, 512, 768),
                 layers_per_block=(3, 3, 4, 6, 3), temporal_expansions=(1, 2, 3), spatial_expansions=(2, 2, 2),
                 act_fn="swish"):
        super().__init__()
        self.nonlinearity = nn.SiLU()  # get_activation(act_fn)
        self.conv_in = nn.Conv3d(in_channels, block_out_channels[-1], kernel_size=(1, 1, 1))
        self.block_in = MochiMidBlock3D(in_channels=block_out_channels[-1], num_layers=layers_per_block[-1],
                                        add_attention=False)
        self.up_blocks = nn.ModuleList([
            MochiUpBlock3D(in_channels=block_out_channels[-i - 1], out_channels=block_out_channels[-i - 2],
                           num_layers=layers_per_block[-i - 2], temporal_expansion=temporal_expansions[-i - 1],
                           spatial_expansion=spatial_expansions[-i - 1])
            for i in range(len(block_out_channels) - 1)])
        self.block_out = MochiMidBlock3D(in_channels=block_out_channels[0], num_layers=layers_per_block[0],
                                         add_attention=False)
        self.proj_out = nn.Linear(block_out_channels[0], out_channels)

    def forward(self, hidden_states, conv_cache=None):
        new_conv_cache = {}
        conv_cache = conv_cache or {}
        hidden_states = self.conv_in(hidden_states)
        hidden_states, new_conv_cache["block_in"] = self.block_in(hidden_states, conv_cache=conv_cache.get("block_in"))
        for i, up_block in enumerate(self.up_blocks):
            key = f"up_block_{i}"
            hidden_states, new_conv_cache[key] = up_block(hidden_states, conv_cache=conv_cache.get(key))
        hidden_states, new_conv_cache["block_out"] = self.block_out(hidden_states,
                                                                    conv_cache=conv_cache.get("block_out"))
        hidden_states = self.nonlinearity(hidden_states)
        hidden_states = hidden_states.permute(0, 2, 3, 4, 1)
        hidden_states = self.proj_out(hidden_states)
        hidden_states = hidden_states.permute(0, 4, 1, 2, 3)
        return hidden_states, new_conv_cache


class AutoencoderKLMochi(nn.Module):
    def __init__(self, in_channels=15, out_channels=3, encoder_block_out_channels=(32, 32, 32, 64),
                 decoder_block_out_channels=(32, 32, 32, 32), latent_channels=4, layers_per_block=(1, 1, 1, 1, 1),
                 act_fn="silu", temporal_expansions=(1, 2, 3), spatial_expansions=(2, 1, 1),
                 add_attention_block=(False, True, True, True, True)):
        super().__init__()
        self.encoder = MochiEncoder3D(in_channels=in_channels, out_channels=latent_channels,
                                      block_out_channels=encoder_block_out_channels,
                                      layers_per_block=layers_per_block, temporal_expansions=temporal_expansions,
                                      spatial_expansions=spatial_expansions, add_attention_block=add_attention_block,
                                      act_fn=act_fn)
        self.decoder = MochiDecoder3D(in_channels=latent_channels, out_channels=out_channels,
                                      block_out_channels=decoder_block_out_channels,
                                      layers_per_block=layers_per_block, temporal_expansions=temporal_expansions,
                                      spatial_expansions=spatial_expansions, act_fn=act_fn)
        self.spatial_compression_ratio = functools.reduce(lambda x, y: x * y, spatial_expansions, 1)
        self.temporal_compression_ratio = functools.reduce(lambda x, y: x * y, temporal_expansions, 1)
        self.drop_last_temporal_frames = True

    def _encode(self, x):
        enc, _ = self.encoder(x)  # not tiled (width/height <= 256), not frame-wise
        return enc

    def _decode(self, z):
        dec, _ = self.decoder(z)  # not tiled, not frame-wise
        if self.drop_last_temporal_frames and dec.size(2) >= self.temporal_compression_ratio:
            dec = dec[:, :, self.temporal_compression_ratio - 1:]
        return dec

    def forward(self, sample):
        h = self._encode(sample)
        mean, _ = torch.chunk(h, 2, dim=1)  # DiagonalGaussianDistribution(h).mode()
        return self._decode(mean)


if __name__ == "__main__":
    capture_once(
        "mochi_vae", AutoencoderKLMochi, lambda g: {"video": torch.randn((1, 3, 7, 6, 10), generator=g)},
        sys.argv[1],
        dict(library_source="replica of huggingface/diffusers autoencoder_kl_mochi.py (torch 1.13)",
             note="the Mochi VAE in one pass: fourier-feature input, per-frame chunked group norms, replicate-padded "
                  "causal convolutions with kernel = stride downsampling, causal attention over each cell's frames "
                  "with L2 q/k norms, linear depth-to-space-time upsampling, the first 5 decoded frames dropped"))
