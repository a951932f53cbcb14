"""The NVIDIA Cosmos tokenizer's continuous video VAE (AutoencoderKLCosmos, the CV8x8x8 layout) whole, reimplemented
for torch 1.13 (no diffusers here), captured small in f32 on CPU as one forward (encode, the posterior's mode,
decode) with no tiling, no slicing and no frame-wise batches.

Follows huggingface/diffusers src/diffusers/models/autoencoders/autoencoder_kl_cosmos.py at
071190daca865a4d04deac0e02cda5b8c5d6f6fa line for line: CosmosCausalConv3d (an nn.Conv3d of padding 0 whose input
gets the first frame repeated temporal_pad = d·(k_t − 1) + 1 − s_t times in front, then a constant zero pad of
`padding` on H and W), CosmosCausalGroupNorm (num_groups 1: frames folded into the batch, [B·T, C, H, W], so each
frame is normalised over all its channels and cells), CosmosPatchEmbed3d with patch_method "haar" (the first frame
repeat_interleave'd patch_size times, then log2(patch_size) rounds of _dwt: reflect pad (0, 1) on T, H and W, the
low-pass hl = flip(h) and high-pass hh = h·(−1)^k Haar filters h = (1/√2, 1/√2) as depthwise stride-2 convolutions
along T, then H, then W, the eight sub-bands joined as channels [lll, llh, lhl, lhh, hll, hlh, hhl, hhh] and
divided by √8), CosmosUnpatcher3d (log2(patch_size) rounds of _idwt: the channels chunked into the eight sub-bands,
depthwise stride-2 transposed convolutions along W, then H, then T, each pair summed as hh-band + hl-band, times
√8; then the first patch_size − 1 frames cut), CosmosConvProjection3d (a (1,3,3) causal conv then a (3,1,1) one),
CosmosResnetBlock3d (norm-SiLU-conv projection twice, 1x1x1 causal conv_shortcut where widths differ, branch +
residual), CosmosDownsample3d (spatial: zero pad (0,1) on H and W, a (1,3,3) stride-(1,2,2) causal conv plus a
(1,2,2) average pool; temporal: the first frame joined in front, a (3,1,1) stride-(2,1,1) causal conv plus a (2,1,1)
average pool; then a 1x1x1 conv3), CosmosUpsample3d (temporal: frames repeat_interleave'd by 2 where there are more
than one, the first cut, a (3,1,1) causal conv added; spatial: rows and columns repeat_interleave'd by 2, a (1,3,3)
causal conv added; then a 1x1x1 conv3), CosmosCausalAttention with CosmosSpatialAttentionProcessor2_0 (norm, q/k/v
as 1x1x1 causal convs, each frame's cells as rows [B·T, H·W, C], one head, no mask) and
CosmosTemporalAttentionProcessor2_0 (each cell's frames as rows [B·H·W, T, C], one head, the causal lower-triangular
bool mask built by the block: torch.tril(new_ones(T, T)).bool()), both followed by to_out[0] (1x1x1 causal conv),
to_out[1] (dropout) and + residual; CosmosDownBlock3d, CosmosMidBlock3d (resnet, then per layer: spatial attention,
temporal attention, resnet), CosmosUpBlock3d, CosmosEncoder3d, CosmosDecoder3d (up blocks of num_layers + 1
resnets) and AutoencoderKLCosmos.forward with sample_posterior False: encoder, quant_conv, IdentityDistribution(h)
.mode() (vae.py's: h itself), post_quant_conv, decoder. The latents_mean / latents_std config is not used by the
model's forward (the pipelines apply it), so no latent normalisation here. The same module tree, parameter names
and shapes, call boundaries and arithmetic; F.scaled_dot_product_attention stands in as its math path (run.sdpa:
torch 1.13 lacks it); the processors' torch-2 hasattr check is left out for that reason. For the CPU bf16 run
only, F.avg_pool3d and F.conv_transpose3d (no working bf16 CPU kernel in torch 1.13) are computed in f32 and
rounded once, as a GPU's bf16 kernels accumulate in f32 and round once; f32 and GPU runs call them unchanged.

The Haar filters are buffers as upstream registers them (register_buffer("wavelets" | "_arange", persistent=False)
on patch_embed and unpatch_embed): they are not parameters, so the trace's params do not list them; the filter
taps enter as constants (h cast to the activations' dtype inside _dwt/_idwt, so bf16 sees 0.70703125).

Tiny config: the released CV8x8x8 layout (patch_size 4, spatial and temporal compression 8, num_layers 2,
resolution 1024, attention_resolutions (32,): attention only in the mid blocks, as released; encoder block widths
(128, 256, 512, 512), decoder (256, 512, 512, 512)) divided by 32 in width: encoder (4, 8, 16, 16), decoder (8, 16, 16,
16), latent_channels 4 (released 16). Upstream's rules then give, as released: down block 0 with a spatial and
temporal downsample, down block 1 with a CosmosDownsample3d that does neither (identity), down block 2 none; up
block 0 with an upsample that does neither, up block 1 with a spatial and temporal one, up block 2 none.
A [1, 3, 9, 16, 16] clip (1 + 8 frames) -> patched [1, 192, 3, 4, 4] -> latent [1, 4, 2, 2, 2] (mid-block spatial
attention over 4 cells, temporal over 2 frames with the causal mask) -> [1, 192, 3, 4, 4] -> [1, 3, 9, 16, 16].

usage: /usr/bin/python3 bench/unseen/replicas/cosmos_vae.py OUTDIR
REPLICA_DTYPE=bf16 [REPLICA_DEVICE=cuda] as run.py's replicas: the bf16 run, beside the f32 one.
"""
import math
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

from run import capture_once, sdpa

_WAVELETS = {
    "haar": torch.tensor([0.7071067811865476, 0.7071067811865476]),
    "rearrange": torch.tensor([1.0, 1.0]),
}


def _avg_pool3d(x, kernel_size, stride):
    """F.avg_pool3d; on the CPU in bf16 computed in f32 and rounded once (torch 1.13's CPU avg_pool3d has no bf16
    kernel; a GPU's bf16 kernel sums in f32 and rounds its mean once, as this does)."""
    if x.dtype == torch.bfloat16 and x.device.type == "cpu":
        return F.avg_pool3d(x.float(), kernel_size=kernel_size, stride=stride).to(x.dtype)
    return F.avg_pool3d(x, kernel_size=kernel_size, stride=stride)


def _conv_transpose3d(x, weight, groups, stride):
    """F.conv_transpose3d; on the CPU in bf16 computed in f32 and rounded once (torch 1.13's CPU bf16
    conv_transpose3d fails; a GPU's bf16 kernel accumulates in f32 and rounds its result once, as this does)."""
    if x.dtype == torch.bfloat16 and x.device.type == "cpu":
        return F.conv_transpose3d(x.float(), weight.float(), groups=groups, stride=stride).to(x.dtype)
    return F.conv_transpose3d(x, weight, groups=groups, stride=stride)


class CosmosCausalConv3d(nn.Conv3d):
    def __init__(self, in_channels=1, out_channels=1, kernel_size=(3, 3, 3), dilation=(1, 1, 1), stride=(1, 1, 1),
                 padding=1, pad_mode="constant"):
        kernel_size = (kernel_size, kernel_size, kernel_size) if isinstance(kernel_size, int) else kernel_size
        dilation = (dilation, dilation, dilation) if isinstance(dilation, int) else dilation
        stride = (stride, stride, stride) if isinstance(stride, int) else stride

        _, height_kernel_size, width_kernel_size = kernel_size
        assert height_kernel_size % 2 == 1 and width_kernel_size % 2 == 1

        super().__init__(in_channels, out_channels, kernel_size, stride=stride, dilation=dilation)

        self.pad_mode = pad_mode
        self.temporal_pad = dilation[0] * (kernel_size[0] - 1) + (1 - stride[0])
        self.spatial_pad = (padding, padding, padding, padding)

    def forward(self, hidden_states):
        hidden_states_prev = hidden_states[:, :, :1, ...].repeat(1, 1, self.temporal_pad, 1, 1)
        hidden_states = torch.cat([hidden_states_prev, hidden_states], dim=2)
        hidden_states = F.pad(hidden_states, (*self.spatial_pad, 0, 0), mode=self.pad_mode, value=0.0)
        return super().forward(hidden_states)


class CosmosCausalGroupNorm(nn.Module):
    def __init__(self, in_channels, num_groups=1):
        super().__init__()
        self.norm = nn.GroupNorm(num_groups=num_groups, num_channels=in_channels, eps=1e-6, affine=True)
        self.num_groups = num_groups

    def forward(self, hidden_states):
        if self.num_groups == 1:
            batch_size = hidden_states.size(0)
            hidden_states = hidden_states.permute(0, 2, 1, 3, 4).flatten(0, 1)  # [B, C, T, H, W] -> [B * T, C, H, W]
            hidden_states = self.norm(hidden_states)
            hidden_states = hidden_states.unflatten(0, (batch_size, -1)).permute(0, 2, 1, 3, 4)
        else:
            hidden_states = self.norm(hidden_states)
        return hidden_states


class CosmosPatchEmbed3d(nn.Module):
    def __init__(self, patch_size=1, patch_method="haar"):
        super().__init__()
        self.patch_size = patch_size
        self.patch_method = patch_method

        wavelets = _WAVELETS.get(patch_method).clone()
        arange = torch.arange(wavelets.shape[0])

        self.register_buffer("wavelets", wavelets, persistent=False)
        self.register_buffer("_arange", arange, persistent=False)

    def _dwt(self, hidden_states, mode="reflect", rescale=False):
        dtype = hidden_states.dtype
        wavelets = self.wavelets

        n = wavelets.shape[0]
        g = hidden_states.shape[1]
        hl = wavelets.flip(0).reshape(1, 1, -1).repeat(g, 1, 1)
        hh = (wavelets * ((-1) ** self._arange)).reshape(1, 1, -1).repeat(g, 1, 1)
        hh = hh.to(dtype=dtype)
        hl = hl.to(dtype=dtype)

        # Handles temporal axis
        hidden_states = F.pad(hidden_states, pad=(max(0, n - 2), n - 1, n - 2, n - 1, n - 2, n - 1), mode=mode).to(
            dtype)
        xl = F.conv3d(hidden_states, hl.unsqueeze(3).unsqueeze(4), groups=g, stride=(2, 1, 1))
        xh = F.conv3d(hidden_states, hh.unsqueeze(3).unsqueeze(4), groups=g, stride=(2, 1, 1))

        # Handles spatial axes
        xll = F.conv3d(xl, hl.unsqueeze(2).unsqueeze(4), groups=g, stride=(1, 2, 1))
        xlh = F.conv3d(xl, hh.unsqueeze(2).unsqueeze(4), groups=g, stride=(1, 2, 1))
        xhl = F.conv3d(xh, hl.unsqueeze(2).unsqueeze(4), groups=g, stride=(1, 2, 1))
        xhh = F.conv3d(xh, hh.unsqueeze(2).unsqueeze(4), groups=g, stride=(1, 2, 1))

        xlll = F.conv3d(xll, hl.unsqueeze(2).unsqueeze(3), groups=g, stride=(1, 1, 2))
        xllh = F.conv3d(xll, hh.unsqueeze(2).unsqueeze(3), groups=g, stride=(1, 1, 2))
        xlhl = F.conv3d(xlh, hl.unsqueeze(2).unsqueeze(3), groups=g, stride=(1, 1, 2))
        xlhh = F.conv3d(xlh, hh.unsqueeze(2).unsqueeze(3), groups=g, stride=(1, 1, 2))
        xhll = F.conv3d(xhl, hl.unsqueeze(2).unsqueeze(3), groups=g, stride=(1, 1, 2))
        xhlh = F.conv3d(xhl, hh.unsqueeze(2).unsqueeze(3), groups=g, stride=(1, 1, 2))
        xhhl = F.conv3d(xhh, hl.unsqueeze(2).unsqueeze(3), groups=g, stride=(1, 1, 2))
        xhhh = F.conv3d(xhh, hh.unsqueeze(2).unsqueeze(3), groups=g, stride=(1, 1, 2))

        hidden_states = torch.cat([xlll, xllh, xlhl, xlhh, xhll, xhlh, xhhl, xhhh], dim=1)
        if rescale:
            hidden_states = hidden_states / 8 ** 0.5
        return hidden_states

    def _haar(self, hidden_states):
        xi, xv = torch.split(hidden_states, [1, hidden_states.shape[2] - 1], dim=2)
        hidden_states = torch.cat([xi.repeat_interleave(self.patch_size, dim=2), xv], dim=2)
        for _ in range(int(math.log2(self.patch_size))):
            hidden_states = self._dwt(hidden_states, rescale=True)
        return hidden_states

    def _arrange(self, hidden_states):
        xi, xv = torch.split(hidden_states, [1, hidden_states.shape[2] - 1], dim=2)
        hidden_states = torch.cat([xi.repeat_interleave(self.patch_size, dim=2), xv], dim=2)

        batch_size, num_channels, num_frames, height, width = hidden_states.shape
        p = self.patch_size

        hidden_states = hidden_states.reshape(batch_size, num_channels, num_frames // p, p, height // p, p,
                                              width // p, p)
        hidden_states = hidden_states.permute(0, 1, 3, 5, 7, 2, 4, 6).flatten(1, 4).contiguous()
        return hidden_states

    def forward(self, hidden_states):
        if self.patch_method == "haar":
            return self._haar(hidden_states)
        elif self.patch_method == "rearrange":
            return self._arrange(hidden_states)
        else:
            raise ValueError(f"Unsupported patch method: {self.patch_method}")


class CosmosUnpatcher3d(nn.Module):
    def __init__(self, patch_size=1, patch_method="haar"):
        super().__init__()
        self.patch_size = patch_size
        self.patch_method = patch_method

        wavelets = _WAVELETS.get(patch_method).clone()
        arange = torch.arange(wavelets.shape[0])

        self.register_buffer("wavelets", wavelets, persistent=False)
        self.register_buffer("_arange", arange, persistent=False)

    def _idwt(self, hidden_states, rescale=False):
        device = hidden_states.device
        dtype = hidden_states.dtype
        h = self.wavelets.to(device)

        g = hidden_states.shape[1] // 8  # split into 8 spatio-temporal filtered tesnors.
        hl = h.flip([0]).reshape(1, 1, -1).repeat([g, 1, 1])
        hh = (h * ((-1) ** self._arange.to(device))).reshape(1, 1, -1).repeat(g, 1, 1)
        hl = hl.to(dtype=dtype)
        hh = hh.to(dtype=dtype)

        xlll, xllh, xlhl, xlhh, xhll, xhlh, xhhl, xhhh = torch.chunk(hidden_states, 8, dim=1)

        # Handle height transposed convolutions
        xll = _conv_transpose3d(xlll, hl.unsqueeze(2).unsqueeze(3), groups=g, stride=(1, 1, 2))
        xll = _conv_transpose3d(xllh, hh.unsqueeze(2).unsqueeze(3), groups=g, stride=(1, 1, 2)) + xll

        xlh = _conv_transpose3d(xlhl, hl.unsqueeze(2).unsqueeze(3), groups=g, stride=(1, 1, 2))
        xlh = _conv_transpose3d(xlhh, hh.unsqueeze(2).unsqueeze(3), groups=g, stride=(1, 1, 2)) + xlh

        xhl = _conv_transpose3d(xhll, hl.unsqueeze(2).unsqueeze(3), groups=g, stride=(1, 1, 2))
        xhl = _conv_transpose3d(xhlh, hh.unsqueeze(2).unsqueeze(3), groups=g, stride=(1, 1, 2)) + xhl

        xhh = _conv_transpose3d(xhhl, hl.unsqueeze(2).unsqueeze(3), groups=g, stride=(1, 1, 2))
        xhh = _conv_transpose3d(xhhh, hh.unsqueeze(2).unsqueeze(3), groups=g, stride=(1, 1, 2)) + xhh

        # Handles width transposed convolutions
        xl = _conv_transpose3d(xll, hl.unsqueeze(2).unsqueeze(4), groups=g, stride=(1, 2, 1))
        xl = _conv_transpose3d(xlh, hh.unsqueeze(2).unsqueeze(4), groups=g, stride=(1, 2, 1)) + xl
        xh = _conv_transpose3d(xhl, hl.unsqueeze(2).unsqueeze(4), groups=g, stride=(1, 2, 1))
        xh = _conv_transpose3d(xhh, hh.unsqueeze(2).unsqueeze(4), groups=g, stride=(1, 2, 1)) + xh

        # Handles time axis transposed convolutions
        hidden_states = _conv_transpose3d(xl, hl.unsqueeze(3).unsqueeze(4), groups=g, stride=(2, 1, 1))
        hidden_states = _conv_transpose3d(xh, hh.unsqueeze(3).unsqueeze(4), groups=g, stride=(2, 1, 1)) + hidden_states

        if rescale:
            hidden_states = hidden_states * 8 ** 0.5

        return hidden_states

    def _ihaar(self, hidden_states):
        for _ in range(int(math.log2(self.patch_size))):
            hidden_states = self._idwt(hidden_states, rescale=True)
        hidden_states = hidden_states[:, :, self.patch_size - 1:, ...]
        return hidden_states

    def _irearrange(self, hidden_states):
        p = self.patch_size
        hidden_states = hidden_states.unflatten(1, (-1, p, p, p))
        hidden_states = hidden_states.permute(0, 1, 5, 2, 6, 3, 7, 4)
        hidden_states = hidden_states.flatten(6, 7).flatten(4, 5).flatten(2, 3)
        hidden_states = hidden_states[:, :, p - 1:, ...]
        return hidden_states

    def forward(self, hidden_states):
        if self.patch_method == "haar":
            return self._ihaar(hidden_states)
        elif self.patch_method == "rearrange":
            return self._irearrange(hidden_states)
        else:
            raise ValueError("Unknown patch method: " + self.patch_method)


class CosmosConvProjection3d(nn.Module):
    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.conv_s = CosmosCausalConv3d(in_channels, out_channels, kernel_size=(1, 3, 3), stride=1, padding=1)
        self.conv_t = CosmosCausalConv3d(out_channels, out_channels, kernel_size=(3, 1, 1), stride=1, padding=0)

    def forward(self, hidden_states):
        hidden_states = self.conv_s(hidden_states)
        hidden_states = self.conv_t(hidden_states)
        return hidden_states


class CosmosResnetBlock3d(nn.Module):
    def __init__(self, in_channels, out_channels, dropout=0.0, num_groups=1):
        super().__init__()
        out_channels = out_channels or in_channels

        self.norm1 = CosmosCausalGroupNorm(in_channels, num_groups)
        self.conv1 = CosmosConvProjection3d(in_channels, out_channels)

        self.norm2 = CosmosCausalGroupNorm(out_channels, num_groups)
        self.dropout = nn.Dropout(dropout)
        self.conv2 = CosmosConvProjection3d(out_channels, out_channels)

        if in_channels != out_channels:
            self.conv_shortcut = CosmosCausalConv3d(in_channels, out_channels, kernel_size=1, stride=1, padding=0)
        else:
            self.conv_shortcut = nn.Identity()

    def forward(self, hidden_states):
        residual = hidden_states
        residual = self.conv_shortcut(residual)

        hidden_states = self.norm1(hidden_states)
        hidden_states = F.silu(hidden_states)
        hidden_states = self.conv1(hidden_states)

        hidden_states = self.norm2(hidden_states)
        hidden_states = F.silu(hidden_states)
        hidden_states = self.dropout(hidden_states)
        hidden_states = self.conv2(hidden_states)

        return hidden_states + residual


class CosmosDownsample3d(nn.Module):
    def __init__(self, in_channels, spatial_downsample=True, temporal_downsample=True):
        super().__init__()
        self.spatial_downsample = spatial_downsample
        self.temporal_downsample = temporal_downsample

        self.conv1 = nn.Identity()
        self.conv2 = nn.Identity()
        self.conv3 = nn.Identity()

        if spatial_downsample:
            self.conv1 = CosmosCausalConv3d(in_channels, in_channels, kernel_size=(1, 3, 3), stride=(1, 2, 2),
                                            padding=0)
        if temporal_downsample:
            self.conv2 = CosmosCausalConv3d(in_channels, in_channels, kernel_size=(3, 1, 1), stride=(2, 1, 1),
                                            padding=0)
        if spatial_downsample or temporal_downsample:
            self.conv3 = CosmosCausalConv3d(in_channels, in_channels, kernel_size=(1, 1, 1), stride=(1, 1, 1),
                                            padding=0)

    def forward(self, hidden_states):
        if not self.spatial_downsample and not self.temporal_downsample:
            return hidden_states

        if self.spatial_downsample:
            pad = (0, 1, 0, 1, 0, 0)
            hidden_states = F.pad(hidden_states, pad, mode="constant", value=0)
            conv_out = self.conv1(hidden_states)
            pool_out = _avg_pool3d(hidden_states, kernel_size=(1, 2, 2), stride=(1, 2, 2))
            hidden_states = conv_out + pool_out

        if self.temporal_downsample:
            hidden_states = torch.cat([hidden_states[:, :, :1, ...], hidden_states], dim=2)
            conv_out = self.conv2(hidden_states)
            pool_out = _avg_pool3d(hidden_states, kernel_size=(2, 1, 1), stride=(2, 1, 1))
            hidden_states = conv_out + pool_out

        hidden_states = self.conv3(hidden_states)
        return hidden_states


class CosmosUpsample3d(nn.Module):
    def __init__(self, in_channels, spatial_upsample=True, temporal_upsample=True):
        super().__init__()
        self.spatial_upsample = spatial_upsample
        self.temporal_upsample = temporal_upsample

        self.conv1 = nn.Identity()
        self.conv2 = nn.Identity()
        self.conv3 = nn.Identity()

        if temporal_upsample:
            self.conv1 = CosmosCausalConv3d(in_channels, in_channels, kernel_size=(3, 1, 1), stride=(1, 1, 1),
                                            padding=0)
        if spatial_upsample:
            self.conv2 = CosmosCausalConv3d(in_channels, in_channels, kernel_size=(1, 3, 3), stride=(1, 1, 1),
                                            padding=1)
        if spatial_upsample or temporal_upsample:
            self.conv3 = CosmosCausalConv3d(in_channels, in_channels, kernel_size=(1, 1, 1), stride=(1, 1, 1),
                                            padding=0)

    def forward(self, hidden_states):
        if not self.spatial_upsample and not self.temporal_upsample:
            return hidden_states

        if self.temporal_upsample:
            num_frames = hidden_states.size(2)
            time_factor = int(1.0 + 1.0 * (num_frames > 1))
            hidden_states = hidden_states.repeat_interleave(int(time_factor), dim=2)
            hidden_states = hidden_states[..., time_factor - 1:, :, :]
            hidden_states = self.conv1(hidden_states) + hidden_states

        if self.spatial_upsample:
            hidden_states = hidden_states.repeat_interleave(2, dim=3).repeat_interleave(2, dim=4)
            hidden_states = self.conv2(hidden_states) + hidden_states

        hidden_states = self.conv3(hidden_states)
        return hidden_states


class CosmosSpatialAttentionProcessor2_0:
    def __call__(self, attn, hidden_states, attention_mask=None):
        batch_size, num_channels, num_frames, height, width = hidden_states.shape
        residual = hidden_states

        hidden_states = attn.norm(hidden_states)
        query = attn.to_q(hidden_states)
        key = attn.to_k(hidden_states)
        value = attn.to_v(hidden_states)

        # [B, C, T, H, W] -> [B * T, H * W, C]
        query = query.permute(0, 2, 3, 4, 1).flatten(2, 3).flatten(0, 1)
        key = key.permute(0, 2, 3, 4, 1).flatten(2, 3).flatten(0, 1)
        value = value.permute(0, 2, 3, 4, 1).flatten(2, 3).flatten(0, 1)

        # [B * T, H * W, C] -> [B * T, N, H * W, C // N]
        query = query.unflatten(2, (attn.num_attention_heads, -1)).transpose(1, 2)
        key = key.unflatten(2, (attn.num_attention_heads, -1)).transpose(1, 2)
        value = value.unflatten(2, (attn.num_attention_heads, -1)).transpose(1, 2)

        hidden_states = sdpa(query, key, value, mask=attention_mask)  # F.scaled_dot_product_attention
        hidden_states = hidden_states.transpose(1, 2).flatten(2, 3).type_as(query)
        hidden_states = hidden_states.unflatten(1, (height, width)).unflatten(0, (batch_size, num_frames))
        hidden_states = hidden_states.permute(0, 4, 1, 2, 3)

        hidden_states = attn.to_out[0](hidden_states)
        hidden_states = attn.to_out[1](hidden_states)

        return hidden_states + residual


class CosmosTemporalAttentionProcessor2_0:
    def __call__(self, attn, hidden_states, attention_mask=None):
        batch_size, num_channels, num_frames, height, width = hidden_states.shape
        residual = hidden_states

        hidden_states = attn.norm(hidden_states)
        query = attn.to_q(hidden_states)
        key = attn.to_k(hidden_states)
        value = attn.to_v(hidden_states)

        # [B, C, T, H, W] -> [B * H * W, T, C]
        query = query.permute(0, 3, 4, 2, 1).flatten(0, 2)
        key = key.permute(0, 3, 4, 2, 1).flatten(0, 2)
        value = value.permute(0, 3, 4, 2, 1).flatten(0, 2)

        # [B * H * W, T, C] -> [B * H * W, N, T, C // N]
        query = query.unflatten(2, (attn.num_attention_heads, -1)).transpose(1, 2)
        key = key.unflatten(2, (attn.num_attention_heads, -1)).transpose(1, 2)
        value = value.unflatten(2, (attn.num_attention_heads, -1)).transpose(1, 2)

        hidden_states = sdpa(query, key, value, mask=attention_mask)  # F.scaled_dot_product_attention
        hidden_states = hidden_states.transpose(1, 2).flatten(2, 3).type_as(query)
        hidden_states = hidden_states.unflatten(0, (batch_size, height, width))
        hidden_states = hidden_states.permute(0, 4, 3, 1, 2)

        hidden_states = attn.to_out[0](hidden_states)
        hidden_states = attn.to_out[1](hidden_states)

        return hidden_states + residual


class CosmosCausalAttention(nn.Module):
    def __init__(self, num_attention_heads, attention_head_dim, num_groups=1, dropout=0.0, processor=None):
        super().__init__()
        self.num_attention_heads = num_attention_heads

        self.norm = CosmosCausalGroupNorm(attention_head_dim, num_groups=num_groups)
        self.to_q = CosmosCausalConv3d(attention_head_dim, attention_head_dim, kernel_size=1, stride=1, padding=0)
        self.to_k = CosmosCausalConv3d(attention_head_dim, attention_head_dim, kernel_size=1, stride=1, padding=0)
        self.to_v = CosmosCausalConv3d(attention_head_dim, attention_head_dim, kernel_size=1, stride=1, padding=0)
        self.to_out = nn.ModuleList([])
        self.to_out.append(
            CosmosCausalConv3d(attention_head_dim, attention_head_dim, kernel_size=1, stride=1, padding=0))
        self.to_out.append(nn.Dropout(dropout))

        self.processor = processor
        if self.processor is None:
            raise ValueError("CosmosCausalAttention requires a processor.")

    def forward(self, hidden_states, attention_mask=None):
        return self.processor(self, hidden_states=hidden_states, attention_mask=attention_mask)


def _attention_pair(out_channel, num_groups, dropout):
    return (CosmosCausalAttention(num_attention_heads=1, attention_head_dim=out_channel, num_groups=num_groups,
                                  dropout=dropout, processor=CosmosSpatialAttentionProcessor2_0()),
            CosmosCausalAttention(num_attention_heads=1, attention_head_dim=out_channel, num_groups=num_groups,
                                  dropout=dropout, processor=CosmosTemporalAttentionProcessor2_0()))


class CosmosDownBlock3d(nn.Module):
    def __init__(self, in_channels, out_channels, num_layers, dropout, use_attention, use_downsample,
                 spatial_downsample, temporal_downsample):
        super().__init__()
        resnets, attentions, temp_attentions = [], [], []
        in_channel, out_channel = in_channels, out_channels

        for _ in range(num_layers):
            resnets.append(CosmosResnetBlock3d(in_channel, out_channel, dropout, num_groups=1))
            in_channel = out_channel

            if use_attention:
                spatial, temporal = _attention_pair(out_channel, 1, dropout)
                attentions.append(spatial)
                temp_attentions.append(temporal)
            else:
                attentions.append(None)
                temp_attentions.append(None)

        self.resnets = nn.ModuleList(resnets)
        self.attentions = nn.ModuleList(attentions)
        self.temp_attentions = nn.ModuleList(temp_attentions)

        self.downsamplers = None
        if use_downsample:
            self.downsamplers = nn.ModuleList([])
            self.downsamplers.append(CosmosDownsample3d(out_channel, spatial_downsample, temporal_downsample))

    def forward(self, hidden_states):
        for resnet, attention, temp_attention in zip(self.resnets, self.attentions, self.temp_attentions):
            hidden_states = resnet(hidden_states)
            if attention is not None:
                hidden_states = attention(hidden_states)
            if temp_attention is not None:
                num_frames = hidden_states.size(2)
                attention_mask = torch.tril(hidden_states.new_ones(num_frames, num_frames)).bool()
                hidden_states = temp_attention(hidden_states, attention_mask)

        if self.downsamplers is not None:
            for downsampler in self.downsamplers:
                hidden_states = downsampler(hidden_states)

        return hidden_states


class CosmosMidBlock3d(nn.Module):
    def __init__(self, in_channels, num_layers, dropout, num_groups=1):
        super().__init__()
        resnets, attentions, temp_attentions = [], [], []

        resnets.append(CosmosResnetBlock3d(in_channels, in_channels, dropout, num_groups))
        for _ in range(num_layers):
            spatial, temporal = _attention_pair(in_channels, num_groups, dropout)
            attentions.append(spatial)
            temp_attentions.append(temporal)
            resnets.append(CosmosResnetBlock3d(in_channels, in_channels, dropout, num_groups))

        self.resnets = nn.ModuleList(resnets)
        self.attentions = nn.ModuleList(attentions)
        self.temp_attentions = nn.ModuleList(temp_attentions)

    def forward(self, hidden_states):
        hidden_states = self.resnets[0](hidden_states)

        for attention, temp_attention, resnet in zip(self.attentions, self.temp_attentions, self.resnets[1:]):
            num_frames = hidden_states.size(2)
            attention_mask = torch.tril(hidden_states.new_ones(num_frames, num_frames)).bool()

            hidden_states = attention(hidden_states)
            hidden_states = temp_attention(hidden_states, attention_mask)
            hidden_states = resnet(hidden_states)

        return hidden_states


class CosmosUpBlock3d(nn.Module):
    def __init__(self, in_channels, out_channels, num_layers, dropout, use_attention, use_upsample, spatial_upsample,
                 temporal_upsample):
        super().__init__()
        resnets, attention, temp_attentions = [], [], []
        in_channel, out_channel = in_channels, out_channels

        for _ in range(num_layers):
            resnets.append(CosmosResnetBlock3d(in_channel, out_channel, dropout, num_groups=1))
            in_channel = out_channel

            if use_attention:
                spatial, temporal = _attention_pair(out_channel, 1, dropout)
                attention.append(spatial)
                temp_attentions.append(temporal)
            else:
                attention.append(None)
                temp_attentions.append(None)

        self.resnets = nn.ModuleList(resnets)
        self.attentions = nn.ModuleList(attention)
        self.temp_attentions = nn.ModuleList(temp_attentions)

        self.upsamplers = None
        if use_upsample:
            self.upsamplers = nn.ModuleList([])
            self.upsamplers.append(CosmosUpsample3d(out_channel, spatial_upsample, temporal_upsample))

    def forward(self, hidden_states):
        for resnet, attention, temp_attention in zip(self.resnets, self.attentions, self.temp_attentions):
            hidden_states = resnet(hidden_states)
            if attention is not None:
                hidden_states = attention(hidden_states)
            if temp_attention is not None:
                num_frames = hidden_states.size(2)
                attention_mask = torch.tril(hidden_states.new_ones(num_frames, num_frames)).bool()
                hidden_states = temp_attention(hidden_states, attention_mask)

        if self.upsamplers is not None:
            for upsampler in self.upsamplers:
                hidden_states = upsampler(hidden_states)

        return hidden_states


class CosmosEncoder3d(nn.Module):
    def __init__(self, in_channels=3, out_channels=16, block_out_channels=(128, 256, 512, 512), num_resnet_blocks=2,
                 attention_resolutions=(32,), resolution=1024, patch_size=4, patch_type="haar", dropout=0.0,
                 spatial_compression_ratio=8, temporal_compression_ratio=8):
        super().__init__()
        inner_dim = in_channels * patch_size ** 3
        num_spatial_layers = int(math.log2(spatial_compression_ratio)) - int(math.log2(patch_size))
        num_temporal_layers = int(math.log2(temporal_compression_ratio)) - int(math.log2(patch_size))

        # 1. Input patching & projection
        self.patch_embed = CosmosPatchEmbed3d(patch_size, patch_type)

        self.conv_in = CosmosConvProjection3d(inner_dim, block_out_channels[0])

        # 2. Down blocks
        current_resolution = resolution // patch_size
        down_blocks = []
        for i in range(len(block_out_channels) - 1):
            in_channel = block_out_channels[i]
            out_channel = block_out_channels[i + 1]

            use_attention = current_resolution in attention_resolutions
            spatial_downsample = temporal_downsample = False
            if i < len(block_out_channels) - 2:
                use_downsample = True
                spatial_downsample = i < num_spatial_layers
                temporal_downsample = i < num_temporal_layers
                current_resolution = current_resolution // 2
            else:
                use_downsample = False

            down_blocks.append(CosmosDownBlock3d(in_channel, out_channel, num_resnet_blocks, dropout, use_attention,
                                                 use_downsample, spatial_downsample, temporal_downsample))
        self.down_blocks = nn.ModuleList(down_blocks)

        # 3. Mid block
        self.mid_block = CosmosMidBlock3d(block_out_channels[-1], num_layers=1, dropout=dropout, num_groups=1)

        # 4. Output norm & projection
        self.norm_out = CosmosCausalGroupNorm(block_out_channels[-1], num_groups=1)
        self.conv_out = CosmosConvProjection3d(block_out_channels[-1], out_channels)

        self.gradient_checkpointing = False

    def forward(self, hidden_states):
        hidden_states = self.patch_embed(hidden_states)
        hidden_states = self.conv_in(hidden_states)

        for block in self.down_blocks:
            hidden_states = block(hidden_states)
        hidden_states = self.mid_block(hidden_states)

        hidden_states = self.norm_out(hidden_states)
        hidden_states = F.silu(hidden_states)
        hidden_states = self.conv_out(hidden_states)
        return hidden_states


class CosmosDecoder3d(nn.Module):
    def __init__(self, in_channels=16, out_channels=3, block_out_channels=(128, 256, 512, 512), num_resnet_blocks=2,
                 attention_resolutions=(32,), resolution=1024, patch_size=4, patch_type="haar", dropout=0.0,
                 spatial_compression_ratio=8, temporal_compression_ratio=8):
        super().__init__()
        inner_dim = out_channels * patch_size ** 3
        num_spatial_layers = int(math.log2(spatial_compression_ratio)) - int(math.log2(patch_size))
        num_temporal_layers = int(math.log2(temporal_compression_ratio)) - int(math.log2(patch_size))
        reversed_block_out_channels = list(reversed(block_out_channels))

        # 1. Input projection
        self.conv_in = CosmosConvProjection3d(in_channels, reversed_block_out_channels[0])

        # 2. Mid block
        self.mid_block = CosmosMidBlock3d(reversed_block_out_channels[0], num_layers=1, dropout=dropout, num_groups=1)

        # 3. Up blocks
        current_resolution = (resolution // patch_size) // 2 ** (len(block_out_channels) - 2)
        up_blocks = []
        for i in range(len(block_out_channels) - 1):
            in_channel = reversed_block_out_channels[i]
            out_channel = reversed_block_out_channels[i + 1]

            use_attention = current_resolution in attention_resolutions
            spatial_upsample = temporal_upsample = False
            if i < len(block_out_channels) - 2:
                use_upsample = True
                temporal_upsample = 0 < i < num_temporal_layers + 1
                spatial_upsample = temporal_upsample or (
                    i < num_spatial_layers and num_spatial_layers > num_temporal_layers)
                current_resolution = current_resolution * 2
            else:
                use_upsample = False

            up_blocks.append(CosmosUpBlock3d(in_channel, out_channel, num_resnet_blocks + 1, dropout, use_attention,
                                             use_upsample, spatial_upsample, temporal_upsample))
        self.up_blocks = nn.ModuleList(up_blocks)

        # 4. Output norm & projection & unpatching
        self.norm_out = CosmosCausalGroupNorm(reversed_block_out_channels[-1], num_groups=1)
        self.conv_out = CosmosConvProjection3d(reversed_block_out_channels[-1], inner_dim)

        self.unpatch_embed = CosmosUnpatcher3d(patch_size, patch_type)

        self.gradient_checkpointing = False

    def forward(self, hidden_states):
        hidden_states = self.conv_in(hidden_states)
        hidden_states = self.mid_block(hidden_states)

        for block in self.up_blocks:
            hidden_states = block(hidden_states)

        hidden_states = self.norm_out(hidden_states)
        hidden_states = F.silu(hidden_states)
        hidden_states = self.conv_out(hidden_states)
        hidden_states = self.unpatch_embed(hidden_states)
        return hidden_states


class AutoencoderKLCosmos(nn.Module):
    def __init__(self, in_channels=3, out_channels=3, latent_channels=4, encoder_block_out_channels=(4, 8, 16, 16),
                 decode_block_out_channels=(8, 16, 16, 16), attention_resolutions=(32,), resolution=1024,
                 num_layers=2, patch_size=4, patch_type="haar", scaling_factor=1.0, spatial_compression_ratio=8,
                 temporal_compression_ratio=8):
        super().__init__()
        self.encoder = CosmosEncoder3d(
            in_channels=in_channels, out_channels=latent_channels, block_out_channels=encoder_block_out_channels,
            num_resnet_blocks=num_layers, attention_resolutions=attention_resolutions, resolution=resolution,
            patch_size=patch_size, patch_type=patch_type, spatial_compression_ratio=spatial_compression_ratio,
            temporal_compression_ratio=temporal_compression_ratio)
        self.decoder = CosmosDecoder3d(
            in_channels=latent_channels, out_channels=out_channels, block_out_channels=decode_block_out_channels,
            num_resnet_blocks=num_layers, attention_resolutions=attention_resolutions, resolution=resolution,
            patch_size=patch_size, patch_type=patch_type, spatial_compression_ratio=spatial_compression_ratio,
            temporal_compression_ratio=temporal_compression_ratio)

        self.quant_conv = CosmosCausalConv3d(latent_channels, latent_channels, kernel_size=1, padding=0)
        self.post_quant_conv = CosmosCausalConv3d(latent_channels, latent_channels, kernel_size=1, padding=0)

        self.use_slicing = False
        self.use_tiling = False
        self.use_framewise_encoding = False
        self.use_framewise_decoding = False

    def _encode(self, x):
        x = self.encoder(x)
        enc = self.quant_conv(x)
        return enc

    def encode(self, x):
        h = self._encode(x)  # no slicing (batch 1)
        return h  # IdentityDistribution(h)

    def _decode(self, z):
        z = self.post_quant_conv(z)
        dec = self.decoder(z)
        return dec

    def decode(self, z):
        return self._decode(z)  # no slicing (batch 1)

    def forward(self, sample):
        x = sample
        z = self.encode(x)  # posterior.mode(): IdentityDistribution's parameters, h itself
        dec = self.decode(z)
        return dec


if __name__ == "__main__":
    capture_once(
        "cosmos_vae", AutoencoderKLCosmos, lambda g: {"sample": torch.randn((1, 3, 9, 16, 16), generator=g)},
        sys.argv[1],
        dict(library_source="replica of huggingface/diffusers autoencoder_kl_cosmos.py@071190daca86 (torch 1.13)",
             note="the Cosmos CV8x8x8 video VAE at widths 4..16: Haar-wavelet patching (first frame repeated 4x, two "
                  "rounds of reflect-padded depthwise stride-2 Haar convs along T, H, W, eight sub-bands as "
                  "channels, /sqrt 8; filters are non-persistent buffers) and its inverse by transposed convs; causal "
                  "convs padding the first frame in front; per-frame GroupNorm(1); factorised (1,3,3)+(3,1,1) conv "
                  "projections; conv+avg-pool downsamples, repeat+conv upsamples; spatial and causal temporal "
                  "one-head attention in the mid blocks"))
