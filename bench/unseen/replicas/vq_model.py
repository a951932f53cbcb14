"""diffusers' VQModel as Kandinsky 2.2 uses it (MoVQ: a VQ-GAN whose decoder normalizes with SpatialNorm conditioned
on the quantized latents), reimplemented for torch 1.13 (no diffusers here), captured small in f32 on CPU as one
forward: an image encoded, quantized to its nearest codebook entries, decoded (VQModel.forward).

Follows huggingface/diffusers src/diffusers/models/autoencoders/vq_model.py (VQModel.forward: encode (encoder,
quant_conv), decode with force_not_quantize False: VectorQuantizer, post_quant_conv, the decoder given the quantized
latents as latent_embeds since norm_type is "spatial"; the force_not_quantize branch (quant = h, commit_loss zeros)
is kept in decode, unused by forward, as in diffusers) and the parts it imports: autoencoders/vae.py (Encoder with
double_z False: conv_in, DownEncoderBlock2D / AttnDownEncoderBlock2D, UNetMidBlock2D with GroupNorm attention,
GroupNorm-SiLU-conv_out to latent_channels; Decoder with norm_type "spatial": temb_channels = latent_channels,
conv_in, a UNetMidBlock2D with resnet_time_scale_shift "spatial", AttnUpDecoderBlock2D / UpDecoderBlock2D built with
resnet_time_scale_shift "spatial", conv_norm_out a SpatialNorm called with the latents, SiLU, conv_out;
VectorQuantizer(n_e, vq_embed_dim, beta=0.25, remap=None, sane_index_shape=False, legacy=True): z permuted to
channels last, flattened to rows, the index of the nearest codebook row by argmin over torch.cdist, the rows looked
up by the nn.Embedding, the legacy loss mean((z_q - z)^2) + 0.25 * mean((z_q - z)^2), then z + (z_q - z) (the
straight-through estimator, which in no_grad is still that arithmetic, not z_q itself), permuted back),
unets/unet_2d_blocks.py (DownEncoderBlock2D, AttnDownEncoderBlock2D, UNetMidBlock2D, UpDecoderBlock2D,
AttnUpDecoderBlock2D, each of the spatial kind holding ResnetBlockCondNorm2D resnets and attentions with
spatial_norm_dim set and no group_norm), resnet.py (ResnetBlock2D; ResnetBlockCondNorm2D with time_embedding_norm
"spatial": norm1(x, zq), SiLU, conv1, norm2(h, zq), SiLU, dropout, conv2, a 1x1 conv_shortcut where widths differ,
(input + h) / 1), attention_processor.py (SpatialNorm: the latents resized by nearest interpolation to the map's
size, GroupNorm(32 groups, ε 1e-6)(f) * conv_y(zq) + conv_b(zq), both 1x1 convolutions; Attention built as the
deprecated attention block (bias, residual_connection, one head as wide as the map) with AttnProcessor2_0: the
spatial_norm applied to the 4-D input before it is flattened to rows, group_norm None in the decoder),
downsampling.py / upsampling.py (sd_unet.py's Downsample2D, padded at the end, and Upsample2D). Imported where the
replicas already hold the same upstream code: vae.py's Encoder (its conv_out and attention levels set as VQModel
builds them: double_z False, AttnDownEncoderBlock2D), DownEncoderBlock2D, UNetMidBlock2D and UpDecoderBlock2D
(forwards), sd_unet.py's ResnetBlock2D, Downsample2D, Upsample2D, unet2d.py's Attention (the GroupNorm one). The
same module tree, parameter names and shapes, call boundaries and arithmetic line for line. Stand-in for what torch
1.13 lacks: F.scaled_dot_product_attention (its math path). forward returns the decoded sample only (upstream's
DecoderOutput also carries commit_loss, which the quantizer still computes).

Tiny config: diffusers' own MoVQ test layout (tests/pipelines/kandinsky2_2: block_out_channels (32, 64), down
(DownEncoderBlock2D, AttnDownEncoderBlock2D), up (AttnUpDecoderBlock2D, UpDecoderBlock2D), layers_per_block 1,
norm_num_groups 8, latent_channels 4, vq_embed_dim 4) with 64 codebook entries (released MoVQ: widths (128, 256, 256,
512), 16384 entries, 32 groups). SpatialNorm's GroupNorm hard-codes 32 groups, so the decoder's widths are kept at
32 and 64 (one and two channels a group). A [1, 3, 16, 16] image -> latents [1, 4, 8, 8] (64 rows for the
quantizer, as many as the codebook, and for the attentions) -> [1, 3, 16, 16] (10.6 MB in f32; a 32x32 image makes
32.7 MB).

The constructs it shows: a discrete choice inside the model, each latent row (channels last) replaced by the
codebook row nearest to it in Euclidean distance, argmin_j ||z_i - e_j|| (torch.cdist, then argmin over the
codebook), the index vector an nn.Embedding's input (a gather of codebook rows); the straight-through z + (z_q - z);
SpatialNorm, a GroupNorm whose affine is per pixel, GN(f) * conv_y(up(zq)) + conv_b(up(zq)), up the nearest resize
of the quantized latents to the map's size, in every decoder norm (resnets, attentions, the output norm).

--decode: instead the call Kandinsky 2.2's pipelines make at the end, movq.decode(latents, force_not_quantize=True)
(lookup_from_codebook False: quant = the latents, no quantizer), on latents [1, 4, 8, 8] given as "h", decode's own
name for them ("latents" is a role of zflow's sampling traces): vq_model_decode-f32.npz.

usage: /usr/bin/python3 bench/unseen/replicas/vq_model.py OUTDIR [--decode]
REPLICA_DTYPE=bf16 [REPLICA_DEVICE=cuda] as run.py's replicas: the bf16 run, beside the f32 one.
"""
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

import unet2d
import vae
from run import capture_once, sdpa
from sd_unet import Downsample2D, ResnetBlock2D, Upsample2D


class SpatialNorm(nn.Module):
    def __init__(self, f_channels, zq_channels):
        super().__init__()
        self.norm_layer = nn.GroupNorm(num_channels=f_channels, num_groups=32, eps=1e-6, affine=True)
        self.conv_y = nn.Conv2d(zq_channels, f_channels, kernel_size=1, stride=1, padding=0)
        self.conv_b = nn.Conv2d(zq_channels, f_channels, kernel_size=1, stride=1, padding=0)

    def forward(self, f, zq):
        f_size = f.shape[-2:]
        zq = F.interpolate(zq, size=f_size, mode="nearest")
        norm_f = self.norm_layer(f)
        new_f = norm_f * self.conv_y(zq) + self.conv_b(zq)
        return new_f


class ResnetBlockCondNorm2D(nn.Module):
    """time_embedding_norm "spatial": both norms SpatialNorm on the quantized latents (temb)."""

    def __init__(self, in_channels, out_channels, temb_channels, eps=1e-6):
        super().__init__()
        self.norm1 = SpatialNorm(in_channels, temb_channels)
        self.conv1 = nn.Conv2d(in_channels, out_channels, kernel_size=3, stride=1, padding=1)
        self.norm2 = SpatialNorm(out_channels, temb_channels)
        self.dropout = nn.Dropout(0.0)
        self.conv2 = nn.Conv2d(out_channels, out_channels, kernel_size=3, stride=1, padding=1)
        self.nonlinearity = nn.SiLU()
        self.conv_shortcut = nn.Conv2d(in_channels, out_channels, 1) if in_channels != out_channels else None
        self.output_scale_factor = 1.0

    def forward(self, input_tensor, temb):
        hidden_states = input_tensor
        hidden_states = self.norm1(hidden_states, temb)
        hidden_states = self.nonlinearity(hidden_states)
        hidden_states = self.conv1(hidden_states)
        hidden_states = self.norm2(hidden_states, temb)
        hidden_states = self.nonlinearity(hidden_states)
        hidden_states = self.dropout(hidden_states)
        hidden_states = self.conv2(hidden_states)
        if self.conv_shortcut is not None:
            input_tensor = self.conv_shortcut(input_tensor)
        output_tensor = (input_tensor + hidden_states) / self.output_scale_factor
        return output_tensor


class Attention(nn.Module):
    """Attention(query_dim, heads, dim_head, norm_num_groups=None, spatial_norm_dim, residual_connection=True,
    bias=True, _from_deprecated_attn_block=True) with AttnProcessor2_0: the spatial-norm layout (unet2d.py's
    Attention is the GroupNorm one)."""

    def __init__(self, query_dim, heads, dim_head, spatial_norm_dim, eps=1e-6):
        super().__init__()
        inner = heads * dim_head
        self.heads = heads
        self.group_norm = None
        self.spatial_norm = SpatialNorm(f_channels=query_dim, zq_channels=spatial_norm_dim)
        self.to_q = nn.Linear(query_dim, inner, bias=True)
        self.to_k = nn.Linear(query_dim, inner, bias=True)
        self.to_v = nn.Linear(query_dim, inner, bias=True)
        self.to_out = nn.ModuleList([nn.Linear(inner, query_dim, bias=True), nn.Dropout(0.0)])
        self.rescale_output_factor = 1.0

    def forward(self, hidden_states, temb=None):
        residual = hidden_states
        if self.spatial_norm is not None:
            hidden_states = self.spatial_norm(hidden_states, temb)
        batch_size, channel, height, width = hidden_states.shape
        hidden_states = hidden_states.view(batch_size, channel, height * width).transpose(1, 2)
        if self.group_norm is not None:
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


class AttnDownEncoderBlock2D(nn.Module):
    def __init__(self, cin, cout, groups, layers, add_downsample):
        super().__init__()
        self.attentions = nn.ModuleList([unet2d.Attention(cout, 1, cout, groups, eps=1e-6) for _ in range(layers)])
        self.resnets = nn.ModuleList([ResnetBlock2D(cin if i == 0 else cout, cout, None, groups, eps=1e-6)
                                      for i in range(layers)])
        self.downsamplers = (nn.ModuleList([Downsample2D(cout, use_conv=True, padding=0)]) if add_downsample
                             else None)

    def forward(self, hidden_states):
        for resnet, attn in zip(self.resnets, self.attentions):
            hidden_states = resnet(hidden_states, temb=None)
            hidden_states = attn(hidden_states)
        if self.downsamplers is not None:
            for downsampler in self.downsamplers:
                hidden_states = downsampler(hidden_states)
        return hidden_states


class Encoder(vae.Encoder):
    """vae.py's Encoder as VQModel builds it: double_z False (conv_out to latent_channels), the levels of
    down_block_types (AttnDownEncoderBlock2D where named)."""

    def __init__(self, in_channels, out_channels, down_block_types, block_out_channels, layers_per_block, groups):
        super().__init__(in_channels, out_channels, block_out_channels, layers_per_block, groups)
        output_channel = block_out_channels[0]
        for i, down_block_type in enumerate(down_block_types):
            input_channel, output_channel = output_channel, block_out_channels[i]
            final = i == len(block_out_channels) - 1
            if down_block_type == "AttnDownEncoderBlock2D":
                self.down_blocks[i] = AttnDownEncoderBlock2D(input_channel, output_channel, groups, layers_per_block,
                                                             not final)
        self.conv_out = nn.Conv2d(block_out_channels[-1], out_channels, 3, padding=1)


class UNetMidBlock2D(vae.UNetMidBlock2D):
    """resnet_time_scale_shift "spatial": ResnetBlockCondNorm2D resnets, an attention with a spatial norm."""

    def __init__(self, channels, temb_channels, eps=1e-6):
        nn.Module.__init__(self)
        self.attentions = nn.ModuleList([Attention(channels, 1, channels, temb_channels, eps)])
        self.resnets = nn.ModuleList([ResnetBlockCondNorm2D(channels, channels, temb_channels, eps=eps)
                                      for _ in range(2)])


class UpDecoderBlock2D(vae.UpDecoderBlock2D):
    """resnet_time_scale_shift "spatial": ResnetBlockCondNorm2D resnets."""

    def __init__(self, cin, cout, temb_channels, layers, add_upsample):
        nn.Module.__init__(self)
        self.resnets = nn.ModuleList([ResnetBlockCondNorm2D(cin if i == 0 else cout, cout, temb_channels, eps=1e-6)
                                      for i in range(layers)])
        self.upsamplers = nn.ModuleList([Upsample2D(cout, use_conv=True)]) if add_upsample else None


class AttnUpDecoderBlock2D(nn.Module):
    def __init__(self, cin, cout, temb_channels, layers, add_upsample):
        super().__init__()
        self.attentions = nn.ModuleList([Attention(cout, 1, cout, temb_channels, eps=1e-6) for _ in range(layers)])
        self.resnets = nn.ModuleList([ResnetBlockCondNorm2D(cin if i == 0 else cout, cout, temb_channels, eps=1e-6)
                                      for i in range(layers)])
        self.upsamplers = nn.ModuleList([Upsample2D(cout, use_conv=True)]) if add_upsample else None

    def forward(self, hidden_states, temb=None):
        for resnet, attn in zip(self.resnets, self.attentions):
            hidden_states = resnet(hidden_states, temb=temb)
            hidden_states = attn(hidden_states, temb=temb)
        if self.upsamplers is not None:
            for upsampler in self.upsamplers:
                hidden_states = upsampler(hidden_states)
        return hidden_states


class Decoder(nn.Module):
    """vae.py's Decoder with norm_type "spatial" (vae.py's replica holds the "group" kind only)."""

    def __init__(self, in_channels, out_channels, up_block_types, block_out_channels, layers_per_block):
        super().__init__()
        self.conv_in = nn.Conv2d(in_channels, block_out_channels[-1], kernel_size=3, stride=1, padding=1)
        temb_channels = in_channels
        self.mid_block = UNetMidBlock2D(block_out_channels[-1], temb_channels)
        rev = list(reversed(block_out_channels))
        self.up_blocks = nn.ModuleList()
        output_channel = rev[0]
        for i, up_block_type in enumerate(up_block_types):
            prev, output_channel = output_channel, rev[i]
            final = i == len(block_out_channels) - 1
            kind = AttnUpDecoderBlock2D if up_block_type == "AttnUpDecoderBlock2D" else UpDecoderBlock2D
            self.up_blocks.append(kind(prev, output_channel, temb_channels, layers_per_block + 1, not final))
        self.conv_norm_out = SpatialNorm(block_out_channels[0], temb_channels)
        self.conv_act = nn.SiLU()
        self.conv_out = nn.Conv2d(block_out_channels[0], out_channels, 3, padding=1)

    def forward(self, sample, latent_embeds=None):
        sample = self.conv_in(sample)
        upscale_dtype = next(iter(self.up_blocks.parameters())).dtype
        sample = self.mid_block(sample, latent_embeds)
        sample = sample.to(upscale_dtype)
        for up_block in self.up_blocks:
            sample = up_block(sample, latent_embeds)
        if latent_embeds is None:
            sample = self.conv_norm_out(sample)
        else:
            sample = self.conv_norm_out(sample, latent_embeds)
        sample = self.conv_act(sample)
        sample = self.conv_out(sample)
        return sample


class VectorQuantizer(nn.Module):
    """remap None, sane_index_shape False, legacy True (VQModel's)."""

    def __init__(self, n_e, vq_embed_dim, beta, legacy=True):
        super().__init__()
        self.n_e = n_e
        self.vq_embed_dim = vq_embed_dim
        self.beta = beta
        self.legacy = legacy
        self.embedding = nn.Embedding(self.n_e, self.vq_embed_dim)
        self.embedding.weight.data.uniform_(-1.0 / self.n_e, 1.0 / self.n_e)

    def forward(self, z):
        z = z.permute(0, 2, 3, 1).contiguous()
        z_flattened = z.view(-1, self.vq_embed_dim)
        min_encoding_indices = torch.argmin(torch.cdist(z_flattened, self.embedding.weight), dim=1)
        z_q = self.embedding(min_encoding_indices).view(z.shape)
        perplexity = None
        min_encodings = None
        if not self.legacy:
            loss = self.beta * torch.mean((z_q.detach() - z) ** 2) + torch.mean((z_q - z.detach()) ** 2)
        else:
            loss = torch.mean((z_q.detach() - z) ** 2) + self.beta * torch.mean((z_q - z.detach()) ** 2)
        z_q = z + (z_q - z).detach()
        z_q = z_q.permute(0, 3, 1, 2).contiguous()
        return z_q, loss, (perplexity, min_encodings, min_encoding_indices)


class VQModel(nn.Module):
    def __init__(self, in_channels=3, out_channels=3,
                 down_block_types=("DownEncoderBlock2D", "AttnDownEncoderBlock2D"),
                 up_block_types=("AttnUpDecoderBlock2D", "UpDecoderBlock2D"), block_out_channels=(32, 64),
                 layers_per_block=1, latent_channels=4, num_vq_embeddings=64, norm_num_groups=8, vq_embed_dim=4):
        super().__init__()
        self.encoder = Encoder(in_channels, latent_channels, down_block_types, block_out_channels, layers_per_block,
                               norm_num_groups)
        vq_embed_dim = vq_embed_dim if vq_embed_dim is not None else latent_channels
        self.quant_conv = nn.Conv2d(latent_channels, vq_embed_dim, 1)
        self.quantize = VectorQuantizer(num_vq_embeddings, vq_embed_dim, beta=0.25)
        self.post_quant_conv = nn.Conv2d(vq_embed_dim, latent_channels, 1)
        self.decoder = Decoder(latent_channels, out_channels, up_block_types, block_out_channels, layers_per_block)
        self.norm_type = "spatial"
        self.lookup_from_codebook = False

    def encode(self, x):
        h = self.encoder(x)
        h = self.quant_conv(h)
        return h

    def decode(self, h, force_not_quantize=False):
        if not force_not_quantize:
            quant, commit_loss, _ = self.quantize(h)
        else:  # lookup_from_codebook False
            quant = h
            commit_loss = torch.zeros((h.shape[0])).to(h.device, dtype=h.dtype)
        quant2 = self.post_quant_conv(quant)
        dec = self.decoder(quant2, quant if self.norm_type == "spatial" else None)
        return dec, commit_loss

    def forward(self, sample):
        h = self.encode(sample)
        dec, commit_loss = self.decode(h)
        return dec


DECODE = "--decode" in sys.argv


def build_decode():
    """The call Kandinsky 2.2's pipelines make of the MoVQ at the end: movq.decode(latents, force_not_quantize=True)
    (no quantizer: the latents are post_quant_conv'd and also the decoder's SpatialNorm condition), captured as the
    model's top call."""
    model = VQModel()
    model.forward = lambda h: model.decode(h, force_not_quantize=True)[0]
    return model


if __name__ == "__main__":
    if DECODE:
        capture_once(
            "vq_model_decode", build_decode,
            lambda g: {"h": torch.randn((1, 4, 8, 8), generator=g)}, sys.argv[1],
            dict(library_source="replica of huggingface/diffusers vq_model.py and vae.py (torch 1.13)",
                 note="Kandinsky 2.2's MoVQ decode(latents, force_not_quantize=True) at widths 32/64: no quantizer, "
                      "a decoder whose every norm is a SpatialNorm on the latents (nearest-resized, GroupNorm times "
                      "conv_y plus conv_b), spatial-norm attention"))
    else:
        capture_once(
            "vq_model", VQModel,
            lambda g: {"pixel_values": torch.randn((1, 3, 16, 16), generator=g)}, sys.argv[1],
            dict(library_source="replica of huggingface/diffusers vq_model.py and vae.py (torch 1.13)",
                 note="Kandinsky 2.2's MoVQ VQModel at widths 32/64: encode, nearest-codebook quantization (argmin "
                      "of cdist, an nn.Embedding lookup, z + (z_q - z)), a decoder whose every norm is a SpatialNorm "
                      "on the quantized latents (nearest-resized, GroupNorm times conv_y plus conv_b), spatial-norm "
                      "attention"))
