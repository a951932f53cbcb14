"""Stable Video Diffusion's UNet (UNetSpatioTemporalConditionModel), reimplemented for torch 1.13 (no diffusers
here), captured small in f32 on CPU.

Follows huggingface/diffusers src/diffusers/models/unets/unet_spatio_temporal_condition.py and the parts it
imports: unet_3d_blocks.py (DownBlockSpatioTemporal, CrossAttnDownBlockSpatioTemporal,
UNetMidBlockSpatioTemporal, UpBlockSpatioTemporal, CrossAttnUpBlockSpatioTemporal), resnet.py
(SpatioTemporalResBlock: a ResnetBlock2D per frame, a TemporalResnetBlock of (3, 1, 1) Conv3d over the frames
with the frames' time embeddings, an AlphaBlender mixing them), transformers/transformer_temporal.py
(TransformerSpatioTemporalModel: a BasicTransformerBlock per frame, then a TemporalBasicTransformerBlock over
each cell's frames with a sinusoid of the frame index added and the first frame's conditioning as its
cross-attention context, mixed by an AlphaBlender), attention.py (BasicTransformerBlock,
TemporalBasicTransformerBlock, FeedForward "geglu"), attention_processor.py (Attention, AttnProcessor2_0),
embeddings.py (Timesteps, TimestepEmbedding) and the AlphaBlender (merge_strategy "learned_with_images",
switch_spatial_to_temporal_mix): the same module tree, parameter names and shapes, call boundaries, and
arithmetic line for line; GroupNorm of 32 groups as upstream hard-codes it. F.scaled_dot_product_attention stands
in as its math path.

Pipeline as StableVideoDiffusionPipeline calls it without guidance: the latents [B, F, 4, h, w] joined by
channels with the conditioning image's latents repeated over the frames (8 channels in, 4 out);
encoder_hidden_states the image embedding [B, 1, D]; added_time_ids (fps − 1, motion bucket id, noise
augmentation strength) [B, 3]; timestep the scheduler's t (here σ·1000, f32 [1]); the output taken as the
velocity as is.

usage: /usr/bin/python3 bench/unseen/replicas/svd_unet.py OUTDIR [--small | --block]
(--block: the embeddings, one spatio-temporal resnet and one spatio-temporal transformer: the fixtures/unseen trace)
"""
import sys

import torch
import torch.nn as nn

from parts import TimestepEmbedding, Timesteps
from run import capture
from sd_unet import Attention, BasicTransformerBlock, Downsample2D, FeedForward, ResnetBlock2D, Upsample2D

SMALL = "--small" in sys.argv


class AlphaBlender(nn.Module):
    """switch_spatial_to_temporal_mix: upstream sets it in SpatioTemporalResBlock only, so the
    transformer's mix is σ(m)·spatial and the resnet's is (1 − σ(m))·spatial."""

    def __init__(self, alpha=0.5, switch_spatial_to_temporal_mix=False):
        super().__init__()
        self.switch_spatial_to_temporal_mix = switch_spatial_to_temporal_mix
        self.register_parameter("mix_factor", torch.nn.Parameter(torch.Tensor([alpha])))

    def get_alpha(self, image_only_indicator, ndims):
        alpha = torch.where(image_only_indicator.bool(), torch.ones(1, 1, device=image_only_indicator.device),
                            torch.sigmoid(self.mix_factor)[..., None])
        if ndims == 5:
            alpha = alpha[:, None, :, None, None]
        elif ndims == 3:
            alpha = alpha.reshape(-1)[:, None, None]
        return alpha

    def forward(self, x_spatial, x_temporal, image_only_indicator=None):
        alpha = self.get_alpha(image_only_indicator, x_spatial.ndim)
        alpha = alpha.to(x_spatial.dtype)
        if self.switch_spatial_to_temporal_mix:
            alpha = 1.0 - alpha
        return alpha * x_spatial + (1.0 - alpha) * x_temporal


class TemporalResnetBlock(nn.Module):
    def __init__(self, in_channels, out_channels, temb_channels, eps=1e-6, groups=32):
        super().__init__()
        self.norm1 = nn.GroupNorm(num_groups=groups, num_channels=in_channels, eps=eps, affine=True)
        self.conv1 = nn.Conv3d(in_channels, out_channels, kernel_size=(3, 1, 1), stride=1, padding=(1, 0, 0))
        self.time_emb_proj = nn.Linear(temb_channels, out_channels)
        self.norm2 = nn.GroupNorm(num_groups=groups, num_channels=out_channels, eps=eps, affine=True)
        self.dropout = nn.Dropout(0.0)
        self.conv2 = nn.Conv3d(out_channels, out_channels, kernel_size=(3, 1, 1), stride=1, padding=(1, 0, 0))
        self.nonlinearity = nn.SiLU()
        self.conv_shortcut = nn.Conv3d(in_channels, out_channels, 1) if in_channels != out_channels else None

    def forward(self, input_tensor, temb):
        hidden_states = self.norm1(input_tensor)
        hidden_states = self.nonlinearity(hidden_states)
        hidden_states = self.conv1(hidden_states)
        temb = self.nonlinearity(temb)
        temb = self.time_emb_proj(temb)[:, :, :, None, None]
        temb = temb.permute(0, 2, 1, 3, 4)
        hidden_states = hidden_states + temb
        hidden_states = self.norm2(hidden_states)
        hidden_states = self.nonlinearity(hidden_states)
        hidden_states = self.dropout(hidden_states)
        hidden_states = self.conv2(hidden_states)
        if self.conv_shortcut is not None:
            input_tensor = self.conv_shortcut(input_tensor)
        return input_tensor + hidden_states


class SpatioTemporalResBlock(nn.Module):
    """groups: 32 upstream (GroupNorm's default there); fewer only for a narrow probe."""

    def __init__(self, in_channels, out_channels, temb_channels, groups=32):
        super().__init__()
        self.spatial_res_block = ResnetBlock2D(in_channels, out_channels, temb_channels, groups, eps=1e-6)
        self.temporal_res_block = TemporalResnetBlock(out_channels, out_channels, temb_channels, groups=groups)
        self.time_mixer = AlphaBlender(switch_spatial_to_temporal_mix=True)

    def forward(self, hidden_states, temb=None, image_only_indicator=None):
        num_frames = image_only_indicator.shape[-1]
        hidden_states = self.spatial_res_block(hidden_states, temb)
        batch_frames, channels, height, width = hidden_states.shape
        batch_size = batch_frames // num_frames
        hidden_states_mix = hidden_states[None, :].reshape(batch_size, num_frames, channels, height, width).permute(0, 2, 1, 3, 4)
        hidden_states = hidden_states[None, :].reshape(batch_size, num_frames, channels, height, width).permute(0, 2, 1, 3, 4)
        temb = temb.reshape(batch_size, num_frames, -1)
        hidden_states = self.temporal_res_block(hidden_states, temb)
        hidden_states = self.time_mixer(x_spatial=hidden_states_mix, x_temporal=hidden_states,
                                        image_only_indicator=image_only_indicator)
        return hidden_states.permute(0, 2, 1, 3, 4).reshape(batch_frames, channels, height, width)


class TemporalBasicTransformerBlock(nn.Module):
    def __init__(self, dim, heads, dim_head, cross_attention_dim):
        super().__init__()
        self.norm_in = nn.LayerNorm(dim)
        self.ff_in = FeedForward(dim)
        self.norm1 = nn.LayerNorm(dim)
        self.attn1 = Attention(dim, heads=heads, dim_head=dim_head)
        self.norm2 = nn.LayerNorm(dim)
        self.attn2 = Attention(dim, cross_attention_dim=cross_attention_dim, heads=heads, dim_head=dim_head)
        self.norm3 = nn.LayerNorm(dim)
        self.ff = FeedForward(dim)

    def forward(self, hidden_states, num_frames, encoder_hidden_states=None):
        batch_frames, seq_length, channels = hidden_states.shape
        batch_size = batch_frames // num_frames
        hidden_states = hidden_states[None, :].reshape(batch_size, num_frames, seq_length, channels)
        hidden_states = hidden_states.permute(0, 2, 1, 3)
        hidden_states = hidden_states.reshape(batch_size * seq_length, num_frames, channels)
        residual = hidden_states
        hidden_states = self.norm_in(hidden_states)
        hidden_states = self.ff_in(hidden_states)
        hidden_states = hidden_states + residual
        hidden_states = self.attn1(self.norm1(hidden_states), encoder_hidden_states=None) + hidden_states
        hidden_states = self.attn2(self.norm2(hidden_states), encoder_hidden_states=encoder_hidden_states) + hidden_states
        hidden_states = self.ff(self.norm3(hidden_states)) + hidden_states
        hidden_states = hidden_states[None, :].reshape(batch_size, seq_length, num_frames, channels)
        hidden_states = hidden_states.permute(0, 2, 1, 3)
        return hidden_states.reshape(batch_size * num_frames, seq_length, channels)


class TransformerSpatioTemporalModel(nn.Module):
    def __init__(self, heads, dim_head, in_channels, cross_attention_dim):
        super().__init__()
        inner = heads * dim_head
        self.norm = nn.GroupNorm(num_groups=32, num_channels=in_channels, eps=1e-6)
        self.proj_in = nn.Linear(in_channels, inner)
        self.transformer_blocks = nn.ModuleList([BasicTransformerBlock(inner, heads, dim_head, cross_attention_dim)])
        self.temporal_transformer_blocks = nn.ModuleList([
            TemporalBasicTransformerBlock(inner, heads, dim_head, cross_attention_dim)])
        self.time_pos_embed = TimestepEmbedding(in_channels, in_channels * 4, out_dim=in_channels)
        self.time_proj = Timesteps(in_channels, True, 0)
        self.time_mixer = AlphaBlender()
        self.proj_out = nn.Linear(inner, in_channels)

    def forward(self, hidden_states, encoder_hidden_states=None, image_only_indicator=None, return_dict=False):
        batch_frames, _, height, width = hidden_states.shape
        num_frames = image_only_indicator.shape[-1]
        batch_size = batch_frames // num_frames
        time_context = encoder_hidden_states
        time_context_first_timestep = time_context[None, :].reshape(batch_size, num_frames, -1, time_context.shape[-1])[:, 0]
        time_context = time_context_first_timestep[:, None].broadcast_to(
            batch_size, height * width, time_context.shape[-2], time_context.shape[-1])
        time_context = time_context.reshape(batch_size * height * width, -1, time_context.shape[-1])
        residual = hidden_states
        hidden_states = self.norm(hidden_states)
        inner_dim = hidden_states.shape[1]
        hidden_states = hidden_states.permute(0, 2, 3, 1).reshape(batch_frames, height * width, inner_dim)
        hidden_states = self.proj_in(hidden_states)
        num_frames_emb = torch.arange(num_frames, device=hidden_states.device)
        num_frames_emb = num_frames_emb.repeat(batch_size, 1)
        num_frames_emb = num_frames_emb.reshape(-1)
        t_emb = self.time_proj(num_frames_emb)
        t_emb = t_emb.to(dtype=hidden_states.dtype)
        emb = self.time_pos_embed(t_emb)
        emb = emb[:, None, :]
        for block, temporal_block in zip(self.transformer_blocks, self.temporal_transformer_blocks):
            hidden_states = block(hidden_states, encoder_hidden_states=encoder_hidden_states)
            hidden_states_mix = hidden_states
            hidden_states_mix = hidden_states_mix + emb
            hidden_states_mix = temporal_block(hidden_states_mix, num_frames=num_frames, encoder_hidden_states=time_context)
            hidden_states = self.time_mixer(x_spatial=hidden_states, x_temporal=hidden_states_mix,
                                            image_only_indicator=image_only_indicator)
        hidden_states = self.proj_out(hidden_states)
        hidden_states = hidden_states.reshape(batch_frames, height, width, inner_dim).permute(0, 3, 1, 2).contiguous()
        return (hidden_states + residual,)


class DownBlockSpatioTemporal(nn.Module):
    def __init__(self, cin, cout, temb, add_downsample, heads=0, cross=0):
        super().__init__()
        self.resnets = nn.ModuleList([SpatioTemporalResBlock(cin, cout, temb)])
        if heads:
            self.attentions = nn.ModuleList([TransformerSpatioTemporalModel(heads, cout // heads, cout, cross)])
        self.downsamplers = nn.ModuleList([Downsample2D(cout)]) if add_downsample else None

    def forward(self, hidden_states, temb=None, encoder_hidden_states=None, image_only_indicator=None):
        output_states = ()
        for i, resnet in enumerate(self.resnets):
            hidden_states = resnet(hidden_states, temb, image_only_indicator=image_only_indicator)
            if hasattr(self, "attentions"):
                hidden_states = self.attentions[i](hidden_states, encoder_hidden_states=encoder_hidden_states,
                                                   image_only_indicator=image_only_indicator, return_dict=False)[0]
            output_states = output_states + (hidden_states,)
        if self.downsamplers is not None:
            for downsampler in self.downsamplers:
                hidden_states = downsampler(hidden_states)
            output_states = output_states + (hidden_states,)
        return hidden_states, output_states


class UNetMidBlockSpatioTemporal(nn.Module):
    def __init__(self, channels, temb, heads, cross):
        super().__init__()
        self.attentions = nn.ModuleList([TransformerSpatioTemporalModel(heads, channels // heads, channels, cross)])
        self.resnets = nn.ModuleList([SpatioTemporalResBlock(channels, channels, temb),
                                      SpatioTemporalResBlock(channels, channels, temb)])

    def forward(self, hidden_states, temb=None, encoder_hidden_states=None, image_only_indicator=None):
        hidden_states = self.resnets[0](hidden_states, temb, image_only_indicator=image_only_indicator)
        for attn, resnet in zip(self.attentions, self.resnets[1:]):
            hidden_states = attn(hidden_states, encoder_hidden_states=encoder_hidden_states,
                                 image_only_indicator=image_only_indicator, return_dict=False)[0]
            hidden_states = resnet(hidden_states, temb, image_only_indicator=image_only_indicator)
        return hidden_states


class UpBlockSpatioTemporal(nn.Module):
    def __init__(self, cin, prev, cout, temb, add_upsample, heads=0, cross=0, layers=2):
        super().__init__()
        self.resnets = nn.ModuleList([
            SpatioTemporalResBlock((prev if i == 0 else cout) + (cin if i == layers - 1 else cout), cout, temb)
            for i in range(layers)])
        if heads:
            self.attentions = nn.ModuleList([TransformerSpatioTemporalModel(heads, cout // heads, cout, cross)
                                             for _ in range(layers)])
        self.upsamplers = nn.ModuleList([Upsample2D(cout)]) if add_upsample else None

    def forward(self, hidden_states, res_hidden_states_tuple, temb=None, encoder_hidden_states=None,
                image_only_indicator=None):
        for i, resnet in enumerate(self.resnets):
            res_hidden_states = res_hidden_states_tuple[-1]
            res_hidden_states_tuple = res_hidden_states_tuple[:-1]
            hidden_states = torch.cat([hidden_states, res_hidden_states], dim=1)
            hidden_states = resnet(hidden_states, temb, image_only_indicator=image_only_indicator)
            if hasattr(self, "attentions"):
                hidden_states = self.attentions[i](hidden_states, encoder_hidden_states=encoder_hidden_states,
                                                   image_only_indicator=image_only_indicator, return_dict=False)[0]
        if self.upsamplers is not None:
            for upsampler in self.upsamplers:
                hidden_states = upsampler(hidden_states)
        return hidden_states


class UNetSpatioTemporalConditionModel(nn.Module):
    """down (CrossAttnDownBlockSpatioTemporal, DownBlockSpatioTemporal), the mid block, up (UpBlockSpatioTemporal,
    CrossAttnUpBlockSpatioTemporal), one resnet per down block, two per up block, widths 32 and 64."""

    def __init__(self, in_channels=8, out_channels=4, block_out_channels=(32, 64), heads=2, cross_attention_dim=32,
                 addition_time_embed_dim=8):
        super().__init__()
        c0, c1 = block_out_channels
        temb = c0 * 4
        self.conv_in = nn.Conv2d(in_channels, c0, kernel_size=3, padding=1)
        self.time_proj = Timesteps(c0, True, 0)
        self.time_embedding = TimestepEmbedding(c0, temb)
        self.add_time_proj = Timesteps(addition_time_embed_dim, True, 0)
        self.add_embedding = TimestepEmbedding(3 * addition_time_embed_dim, temb)
        self.down_blocks = nn.ModuleList([
            DownBlockSpatioTemporal(c0, c0, temb, True, heads, cross_attention_dim),
            DownBlockSpatioTemporal(c0, c1, temb, False)])
        self.mid_block = UNetMidBlockSpatioTemporal(c1, temb, heads, cross_attention_dim)
        self.up_blocks = nn.ModuleList([
            UpBlockSpatioTemporal(c0, c1, c1, temb, True),
            UpBlockSpatioTemporal(c0, c1, c0, temb, False, heads, cross_attention_dim)])
        self.conv_norm_out = nn.GroupNorm(num_channels=c0, num_groups=32, eps=1e-5)
        self.conv_act = nn.SiLU()
        self.conv_out = nn.Conv2d(c0, out_channels, kernel_size=3, padding=1)

    def forward(self, sample, timestep, encoder_hidden_states, added_time_ids, return_dict=False):
        timesteps = timestep
        if len(timesteps.shape) == 0:
            timesteps = timesteps[None]
        batch_size, num_frames = sample.shape[:2]
        timesteps = timesteps.expand(batch_size)
        t_emb = self.time_proj(timesteps)
        t_emb = t_emb.to(dtype=sample.dtype)
        emb = self.time_embedding(t_emb)
        time_embeds = self.add_time_proj(added_time_ids.flatten())
        time_embeds = time_embeds.reshape((batch_size, -1))
        time_embeds = time_embeds.to(emb.dtype)
        aug_emb = self.add_embedding(time_embeds)
        emb = emb + aug_emb
        sample = sample.flatten(0, 1)
        emb = emb.repeat_interleave(num_frames, dim=0)
        encoder_hidden_states = encoder_hidden_states.repeat_interleave(num_frames, dim=0)
        sample = self.conv_in(sample)
        image_only_indicator = torch.zeros(batch_size, num_frames, dtype=sample.dtype, device=sample.device)
        down_block_res_samples = (sample,)
        for downsample_block in self.down_blocks:
            if hasattr(downsample_block, "attentions"):
                sample, res_samples = downsample_block(hidden_states=sample, temb=emb,
                                                       encoder_hidden_states=encoder_hidden_states,
                                                       image_only_indicator=image_only_indicator)
            else:
                sample, res_samples = downsample_block(hidden_states=sample, temb=emb,
                                                       image_only_indicator=image_only_indicator)
            down_block_res_samples += res_samples
        sample = self.mid_block(hidden_states=sample, temb=emb, encoder_hidden_states=encoder_hidden_states,
                                image_only_indicator=image_only_indicator)
        for upsample_block in self.up_blocks:
            res_samples = down_block_res_samples[-len(upsample_block.resnets):]
            down_block_res_samples = down_block_res_samples[: -len(upsample_block.resnets)]
            if hasattr(upsample_block, "attentions"):
                sample = upsample_block(hidden_states=sample, temb=emb, res_hidden_states_tuple=res_samples,
                                        encoder_hidden_states=encoder_hidden_states,
                                        image_only_indicator=image_only_indicator)
            else:
                sample = upsample_block(hidden_states=sample, temb=emb, res_hidden_states_tuple=res_samples,
                                        image_only_indicator=image_only_indicator)
        sample = self.conv_norm_out(sample)
        sample = self.conv_act(sample)
        sample = self.conv_out(sample)
        sample = sample.reshape(batch_size, num_frames, *sample.shape[1:])
        return (sample,)


class SpatioTemporalPieces(UNetSpatioTemporalConditionModel):
    """--block: the model's embeddings, conv_in, one SpatioTemporalResBlock, one TransformerSpatioTemporalModel and
    the output convolution, called as the model calls them (a small trace of the constructs)."""

    def __init__(self, c0=32, heads=2, cross_attention_dim=32):
        nn.Module.__init__(self)
        temb = c0 * 4
        self.conv_in = nn.Conv2d(8, c0, kernel_size=3, padding=1)
        self.time_proj = Timesteps(c0, True, 0)
        self.time_embedding = TimestepEmbedding(c0, temb)
        self.add_time_proj = Timesteps(8, True, 0)
        self.add_embedding = TimestepEmbedding(3 * 8, temb)
        self.resnet = SpatioTemporalResBlock(c0, c0, temb)
        self.attention = TransformerSpatioTemporalModel(heads, c0 // heads, c0, cross_attention_dim)
        self.conv_norm_out = nn.GroupNorm(num_channels=c0, num_groups=32, eps=1e-5)
        self.conv_act = nn.SiLU()
        self.conv_out = nn.Conv2d(c0, 4, kernel_size=3, padding=1)

    def forward(self, sample, timestep, encoder_hidden_states, added_time_ids, return_dict=False):
        batch_size, num_frames = sample.shape[:2]
        t_emb = self.time_proj(timestep.expand(batch_size)).to(dtype=sample.dtype)
        emb = self.time_embedding(t_emb)
        time_embeds = self.add_time_proj(added_time_ids.flatten()).reshape((batch_size, -1)).to(emb.dtype)
        emb = emb + self.add_embedding(time_embeds)
        sample = self.conv_in(sample.flatten(0, 1))
        emb = emb.repeat_interleave(num_frames, dim=0)
        encoder_hidden_states = encoder_hidden_states.repeat_interleave(num_frames, dim=0)
        image_only_indicator = torch.zeros(batch_size, num_frames, dtype=sample.dtype, device=sample.device)
        sample = self.resnet(sample, emb, image_only_indicator=image_only_indicator)
        sample = self.attention(sample, encoder_hidden_states=encoder_hidden_states,
                                image_only_indicator=image_only_indicator, return_dict=False)[0]
        sample = self.conv_out(self.conv_act(self.conv_norm_out(sample)))
        return (sample.reshape(batch_size, num_frames, *sample.shape[1:]),)


BLOCK = "--block" in sys.argv


def build():
    # widths 32 and 64 (GroupNorm's 32 groups), 2 heads, a 32-wide image embedding; 3 frames of 8x8 latents
    # (--small: 2 frames of 4x4)
    return SpatioTemporalPieces() if BLOCK else UNetSpatioTemporalConditionModel()


def inputs(g):
    f, s = (2, 4) if SMALL or BLOCK else (3, 8)
    return {"encoder_hidden_states": torch.randn((1, 1, 32), generator=g),
            "image_latents": torch.randn((1, 1, 4, s, s), generator=g),
            "added_time_ids": torch.tensor([[6.0, 127.0, 0.02]]),
            "noise": torch.randn((1, f, 4, s, s), generator=g)}


def call(model, x, sigma, c):
    # StableVideoDiffusionPipeline: the conditioning image's latents repeated over the frames, joined by channels
    image_latents = c["image_latents"].repeat(1, x.shape[1], 1, 1, 1)
    latent_model_input = torch.cat([x, image_latents], dim=2)
    t = torch.tensor([sigma * 1000.0], dtype=torch.float32, device=x.device)
    return model(latent_model_input, t, encoder_hidden_states=c["encoder_hidden_states"],
                 added_time_ids=c["added_time_ids"], return_dict=False)[0]


PRODUCER = dict(
    library_source="replica of huggingface/diffusers unet_spatio_temporal_condition.py and the parts it imports "
                   "(torch 1.13)",
    timestep="sigma*1000, f32 [1] expanded to the batch",
    velocity="the noise prediction as is",
    note="SVD's UNetSpatioTemporalConditionModel at widths 32/64: spatial ResnetBlock2D per frame, temporal "
         "(3,1,1) Conv3d resnet over the frames, AlphaBlender mixes (learned, sigmoid of mix_factor); "
         "TransformerSpatioTemporalModel: spatial BasicTransformerBlock, then a temporal block over each cell's "
         "frames with the frame index's sinusoid through time_pos_embed added and the first frame's context; "
         "added_time_ids through Timesteps(8) and add_embedding; latents joined with the image latents")

if __name__ == "__main__":
    capture("svd_pieces" if BLOCK else "svd_unet", build, inputs, call, sys.argv[1], PRODUCER)
