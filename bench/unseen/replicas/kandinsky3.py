"""Kandinsky 3's denoiser (Kandinsky3UNet), reimplemented for torch 1.13 (no diffusers here), captured small in f32
on CPU as one denoiser call (capture_once, not run.py's 3-step loop: at the smallest widths that keep the layout the
loop's trace is 9 MB, its module tree being ~900 calls a step; one call is 3.3 MB).

Follows huggingface/diffusers src/diffusers/models/unets/unet_kandinsky3.py at
021216dc16c57c4b07986d0ca701dd50faac6150 line for line (Kandinsky3UNet, Kandinsky3EncoderProj,
Kandinsky3AttentionPooling, Kandinsky3ConditionalGroupNorm, Kandinsky3Block, Kandinsky3ResNetBlock,
Kandinsky3AttentionBlock, Kandinsky3DownSampleBlock, Kandinsky3UpSampleBlock), with the parts it imports:
attention_processor.py at 001d4da0eb5809c779120c51f74ef73d6078b08c (Attention built with out_dim, so inner_dim =
out_dim and heads = out_dim // dim_head, bias-free q/k/v, out_bias False; prepare_attention_mask:
repeat_interleave over heads; AttnProcessor2_0's __call__ as its forward: the additive mask viewed as
[B, heads, 1, L], the output divided by rescale_output_factor 1.0) and embeddings.py (Timesteps(init_channels,
flip_sin_to_cos False, downscale_freq_shift 1), TimestepEmbedding Linear-SiLU-Linear). The same module tree,
parameter names and shapes, call boundaries and arithmetic. Stand-in for what torch 1.13 lacks:
F.scaled_dot_product_attention (run.py's sdpa, its math path, the float mask added to the scores). Two wrappers
that change no arithmetic: the captured module is Kandinsky3UNet with a forward that calls upstream's with
return_dict=False and returns [0], as the pipeline does (capture_once records a tensor result); and
nn.ConvTranspose2d, on the CPU in bf16 only, computed in f32 and rounded once (torch 1.13's CPU bf16
conv_transpose2d returns a stride-2 convolution's shape; a GPU's bf16 kernel accumulates in f32 and rounds once).

The constructs it shows: the text states projected (bias-free Linear, LayerNorm); the encoder mask turned into an
additive (1 - m) * -10000 bias; the time embedding plus an attention pooling of the text (the mean text token as
the only query, the masked text as keys and values, projected to the time width and added); every norm a
conditional GroupNorm (affine-free GroupNorm, then (scale + 1), shift from SiLU-Linear of the time embedding);
ResNet blocks of four GroupNorm-SiLU-conv stages (1x1, 3x3, 3x3, 1x1 through a half-width bottleneck) with a 1x1
shortcut where widths differ; downsampling by a 2x2 stride-2 conv after the last stage and on the shortcut,
upsampling by a 2x2 stride-2 ConvTranspose2d inside the second stage and on the shortcut; attention blocks over
the map's cells (self- or cross-attention to the text, then a 1x1 conv SiLU 1x1 conv feed-forward, each behind a
conditional GroupNorm); the down levels' outputs (all but the last) joined by channels to the up levels' inputs.

Tiny config: diffusers' pipeline test layout (tests/pipelines/kandinsky3/test_kandinsky3.py: in_channels 4,
groups 2, attention_head_dim 4, two levels) at block_out_channels (8, 16) (init_channels 4), time_embedding_dim
16, layers_per_block 2 (the fewest the up blocks' channel plan allows), cross_attention_dim 8, encoder_hid_dim 12
(Kandinsky 3: (384, 768, 1536, 3072), 1536, 32 groups, head dim 64, 3 blocks, 4096, 4096). Upstream's hard-coded
add_cross_attention / add_self_attention (False, True, True, True) are zipped forward for the down levels (level 0
without attention, level 1 with) and reversed for the up levels, so with two levels both up levels take the
last two entries and have self- and cross-attention (in Kandinsky 3's four levels the reversal lines up). Latent
[1, 4, 8, 8]: levels at 8x8 and 4x4.

Pipeline as Kandinsky3Pipeline calls it with guidance off: unet(latent_model_input, t,
encoder_hidden_states=prompt_embeds, encoder_attention_mask=attention_mask, return_dict=False)[0]; t a 0-dim int64
(one of the DDPM scheduler's timesteps, here 750); prompt_embeds [1, 6, 12], cut as encode_prompt's
process_embeds leaves them (the tokens up to one padding token, the padding row zeroed, the embeds multiplied by
the mask); attention_mask the tokenizer's int64 mask [1, 6] (five ones, one zero).

usage: /usr/bin/python3 bench/unseen/replicas/kandinsky3.py OUTDIR
REPLICA_DTYPE=bf16 [REPLICA_DEVICE=cuda] as run.py's replicas: the bf16 run, beside the f32 one.
"""
import sys
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from parts import TimestepEmbedding, Timesteps
from run import capture_once, sdpa


class ConvTranspose2d(nn.ConvTranspose2d):
    """nn.ConvTranspose2d; on the CPU in bf16 computed in f32 and rounded once (torch 1.13's CPU bf16
    conv_transpose2d returns a stride-2 convolution's shape; a GPU's bf16 kernel accumulates in f32 and rounds its
    result once, as this does)."""

    def forward(self, x, output_size=None):
        if x.dtype == torch.bfloat16 and x.device.type == "cpu":
            bias = None if self.bias is None else self.bias.float()
            return F.conv_transpose2d(x.float(), self.weight.float(), bias, self.stride, self.padding,
                                      self.output_padding, self.groups, self.dilation).to(x.dtype)
        return super().forward(x, output_size)


class Attention(nn.Module):
    """attention_processor.Attention (the arguments Kandinsky3 passes) with AttnProcessor2_0 as its forward."""

    def __init__(self, query_dim, cross_attention_dim=None, heads=8, dim_head=64, dropout=0.0, bias=False,
                 out_bias=True, out_dim=None):
        super().__init__()
        self.inner_dim = out_dim if out_dim is not None else dim_head * heads
        self.query_dim = query_dim
        self.use_bias = bias
        self.is_cross_attention = cross_attention_dim is not None
        self.cross_attention_dim = cross_attention_dim if cross_attention_dim is not None else query_dim
        self.rescale_output_factor = 1.0
        self.residual_connection = False
        self.out_dim = out_dim if out_dim is not None else query_dim
        self.scale = dim_head**-0.5
        self.heads = out_dim // dim_head if out_dim is not None else heads
        self.group_norm = None
        self.spatial_norm = None
        self.norm_cross = None
        self.to_q = nn.Linear(query_dim, self.inner_dim, bias=bias)
        self.to_k = nn.Linear(self.cross_attention_dim, self.inner_dim, bias=bias)
        self.to_v = nn.Linear(self.cross_attention_dim, self.inner_dim, bias=bias)
        self.to_out = nn.ModuleList([])
        self.to_out.append(nn.Linear(self.inner_dim, self.out_dim, bias=out_bias))
        self.to_out.append(nn.Dropout(dropout))

    def prepare_attention_mask(self, attention_mask, target_length, batch_size, out_dim=3):
        head_size = self.heads
        if attention_mask is None:
            return attention_mask
        current_length = attention_mask.shape[-1]
        if current_length != target_length:
            attention_mask = F.pad(attention_mask, (0, target_length), value=0.0)
        if out_dim == 3:
            if attention_mask.shape[0] < batch_size * head_size:
                attention_mask = attention_mask.repeat_interleave(head_size, dim=0)
        elif out_dim == 4:
            attention_mask = attention_mask.unsqueeze(1)
            attention_mask = attention_mask.repeat_interleave(head_size, dim=1)
        return attention_mask

    def forward(self, hidden_states, encoder_hidden_states=None, attention_mask=None, **cross_attention_kwargs):
        attn = self
        residual = hidden_states
        input_ndim = hidden_states.ndim
        if input_ndim == 4:
            batch_size, channel, height, width = hidden_states.shape
            hidden_states = hidden_states.view(batch_size, channel, height * width).transpose(1, 2)
        batch_size, sequence_length, _ = (
            hidden_states.shape if encoder_hidden_states is None else encoder_hidden_states.shape
        )
        if attention_mask is not None:
            attention_mask = attn.prepare_attention_mask(attention_mask, sequence_length, batch_size)
            # scaled_dot_product_attention expects attention_mask shape to be
            # (batch, heads, source_length, target_length)
            attention_mask = attention_mask.view(batch_size, attn.heads, -1, attention_mask.shape[-1])
        query = attn.to_q(hidden_states)
        if encoder_hidden_states is None:
            encoder_hidden_states = hidden_states
        key = attn.to_k(encoder_hidden_states)
        value = attn.to_v(encoder_hidden_states)
        inner_dim = key.shape[-1]
        head_dim = inner_dim // attn.heads
        query = query.view(batch_size, -1, attn.heads, head_dim).transpose(1, 2)
        key = key.view(batch_size, -1, attn.heads, head_dim).transpose(1, 2)
        value = value.view(batch_size, -1, attn.heads, head_dim).transpose(1, 2)
        hidden_states = sdpa(query, key, value, mask=attention_mask)
        hidden_states = hidden_states.transpose(1, 2).reshape(batch_size, -1, attn.heads * head_dim)
        hidden_states = hidden_states.to(query.dtype)
        # linear proj
        hidden_states = attn.to_out[0](hidden_states)
        # dropout
        hidden_states = attn.to_out[1](hidden_states)
        if input_ndim == 4:
            hidden_states = hidden_states.transpose(-1, -2).reshape(batch_size, channel, height, width)
        if attn.residual_connection:
            hidden_states = hidden_states + residual
        hidden_states = hidden_states / attn.rescale_output_factor
        return hidden_states


@dataclass
class Kandinsky3UNetOutput:
    sample: torch.Tensor = None


class Kandinsky3EncoderProj(nn.Module):
    def __init__(self, encoder_hid_dim, cross_attention_dim):
        super().__init__()
        self.projection_linear = nn.Linear(encoder_hid_dim, cross_attention_dim, bias=False)
        self.projection_norm = nn.LayerNorm(cross_attention_dim)

    def forward(self, x):
        x = self.projection_linear(x)
        x = self.projection_norm(x)
        return x


class Kandinsky3UNet(nn.Module):
    def __init__(
        self,
        in_channels=4,
        time_embedding_dim=16,
        groups=2,
        attention_head_dim=4,
        layers_per_block=2,
        block_out_channels=(8, 16),
        cross_attention_dim=8,
        encoder_hid_dim=12,
    ):
        super().__init__()

        # TODO(Yiyi): Give better name and put into config for the following 4 parameters
        expansion_ratio = 4
        compression_ratio = 2
        add_cross_attention = (False, True, True, True)
        add_self_attention = (False, True, True, True)

        out_channels = in_channels
        init_channels = block_out_channels[0] // 2
        self.time_proj = Timesteps(init_channels, flip_sin_to_cos=False, downscale_freq_shift=1)

        self.time_embedding = TimestepEmbedding(
            init_channels,
            time_embedding_dim,
        )

        self.add_time_condition = Kandinsky3AttentionPooling(
            time_embedding_dim, cross_attention_dim, attention_head_dim
        )

        self.conv_in = nn.Conv2d(in_channels, init_channels, kernel_size=3, padding=1)

        self.encoder_hid_proj = Kandinsky3EncoderProj(encoder_hid_dim, cross_attention_dim)

        hidden_dims = [init_channels] + list(block_out_channels)
        in_out_dims = list(zip(hidden_dims[:-1], hidden_dims[1:]))
        text_dims = [cross_attention_dim if is_exist else None for is_exist in add_cross_attention]
        num_blocks = len(block_out_channels) * [layers_per_block]
        layer_params = [num_blocks, text_dims, add_self_attention]
        rev_layer_params = map(reversed, layer_params)

        cat_dims = []
        self.num_levels = len(in_out_dims)
        self.down_blocks = nn.ModuleList([])
        for level, ((in_dim, out_dim), res_block_num, text_dim, self_attention) in enumerate(
            zip(in_out_dims, *layer_params)
        ):
            down_sample = level != (self.num_levels - 1)
            cat_dims.append(out_dim if level != (self.num_levels - 1) else 0)
            self.down_blocks.append(
                Kandinsky3DownSampleBlock(
                    in_dim,
                    out_dim,
                    time_embedding_dim,
                    text_dim,
                    res_block_num,
                    groups,
                    attention_head_dim,
                    expansion_ratio,
                    compression_ratio,
                    down_sample,
                    self_attention,
                )
            )

        self.up_blocks = nn.ModuleList([])
        for level, ((out_dim, in_dim), res_block_num, text_dim, self_attention) in enumerate(
            zip(reversed(in_out_dims), *rev_layer_params)
        ):
            up_sample = level != 0
            self.up_blocks.append(
                Kandinsky3UpSampleBlock(
                    in_dim,
                    cat_dims.pop(),
                    out_dim,
                    time_embedding_dim,
                    text_dim,
                    res_block_num,
                    groups,
                    attention_head_dim,
                    expansion_ratio,
                    compression_ratio,
                    up_sample,
                    self_attention,
                )
            )

        self.conv_norm_out = nn.GroupNorm(groups, init_channels)
        self.conv_act_out = nn.SiLU()
        self.conv_out = nn.Conv2d(init_channels, out_channels, kernel_size=3, padding=1)

    def forward(self, sample, timestep, encoder_hidden_states=None, encoder_attention_mask=None, return_dict=True):
        if encoder_attention_mask is not None:
            encoder_attention_mask = (1 - encoder_attention_mask.to(sample.dtype)) * -10000.0
            encoder_attention_mask = encoder_attention_mask.unsqueeze(1)

        if not torch.is_tensor(timestep):
            dtype = torch.float32 if isinstance(timestep, float) else torch.int32
            timestep = torch.tensor([timestep], dtype=dtype, device=sample.device)
        elif len(timestep.shape) == 0:
            timestep = timestep[None].to(sample.device)

        # broadcast to batch dimension in a way that's compatible with ONNX/Core ML
        timestep = timestep.expand(sample.shape[0])
        time_embed_input = self.time_proj(timestep).to(sample.dtype)
        time_embed = self.time_embedding(time_embed_input)

        encoder_hidden_states = self.encoder_hid_proj(encoder_hidden_states)

        if encoder_hidden_states is not None:
            time_embed = self.add_time_condition(time_embed, encoder_hidden_states, encoder_attention_mask)

        hidden_states = []
        sample = self.conv_in(sample)
        for level, down_sample in enumerate(self.down_blocks):
            sample = down_sample(sample, time_embed, encoder_hidden_states, encoder_attention_mask)
            if level != self.num_levels - 1:
                hidden_states.append(sample)

        for level, up_sample in enumerate(self.up_blocks):
            if level != 0:
                sample = torch.cat([sample, hidden_states.pop()], dim=1)
            sample = up_sample(sample, time_embed, encoder_hidden_states, encoder_attention_mask)

        sample = self.conv_norm_out(sample)
        sample = self.conv_act_out(sample)
        sample = self.conv_out(sample)

        if not return_dict:
            return (sample,)
        return Kandinsky3UNetOutput(sample=sample)


class Kandinsky3UpSampleBlock(nn.Module):
    def __init__(
        self,
        in_channels,
        cat_dim,
        out_channels,
        time_embed_dim,
        context_dim=None,
        num_blocks=3,
        groups=32,
        head_dim=64,
        expansion_ratio=4,
        compression_ratio=2,
        up_sample=True,
        self_attention=True,
    ):
        super().__init__()
        up_resolutions = [[None, True if up_sample else None, None, None]] + [[None] * 4] * (num_blocks - 1)
        hidden_channels = (
            [(in_channels + cat_dim, in_channels)]
            + [(in_channels, in_channels)] * (num_blocks - 2)
            + [(in_channels, out_channels)]
        )
        attentions = []
        resnets_in = []
        resnets_out = []

        self.self_attention = self_attention
        self.context_dim = context_dim

        if self_attention:
            attentions.append(
                Kandinsky3AttentionBlock(out_channels, time_embed_dim, None, groups, head_dim, expansion_ratio)
            )
        else:
            attentions.append(nn.Identity())

        for (in_channel, out_channel), up_resolution in zip(hidden_channels, up_resolutions):
            resnets_in.append(
                Kandinsky3ResNetBlock(in_channel, in_channel, time_embed_dim, groups, compression_ratio, up_resolution)
            )

            if context_dim is not None:
                attentions.append(
                    Kandinsky3AttentionBlock(
                        in_channel, time_embed_dim, context_dim, groups, head_dim, expansion_ratio
                    )
                )
            else:
                attentions.append(nn.Identity())

            resnets_out.append(
                Kandinsky3ResNetBlock(in_channel, out_channel, time_embed_dim, groups, compression_ratio)
            )

        self.attentions = nn.ModuleList(attentions)
        self.resnets_in = nn.ModuleList(resnets_in)
        self.resnets_out = nn.ModuleList(resnets_out)

    def forward(self, x, time_embed, context=None, context_mask=None, image_mask=None):
        for attention, resnet_in, resnet_out in zip(self.attentions[1:], self.resnets_in, self.resnets_out):
            x = resnet_in(x, time_embed)
            if self.context_dim is not None:
                x = attention(x, time_embed, context, context_mask, image_mask)
            x = resnet_out(x, time_embed)

        if self.self_attention:
            x = self.attentions[0](x, time_embed, image_mask=image_mask)
        return x


class Kandinsky3DownSampleBlock(nn.Module):
    def __init__(
        self,
        in_channels,
        out_channels,
        time_embed_dim,
        context_dim=None,
        num_blocks=3,
        groups=32,
        head_dim=64,
        expansion_ratio=4,
        compression_ratio=2,
        down_sample=True,
        self_attention=True,
    ):
        super().__init__()
        attentions = []
        resnets_in = []
        resnets_out = []

        self.self_attention = self_attention
        self.context_dim = context_dim

        if self_attention:
            attentions.append(
                Kandinsky3AttentionBlock(in_channels, time_embed_dim, None, groups, head_dim, expansion_ratio)
            )
        else:
            attentions.append(nn.Identity())

        up_resolutions = [[None] * 4] * (num_blocks - 1) + [[None, None, False if down_sample else None, None]]
        hidden_channels = [(in_channels, out_channels)] + [(out_channels, out_channels)] * (num_blocks - 1)
        for (in_channel, out_channel), up_resolution in zip(hidden_channels, up_resolutions):
            resnets_in.append(
                Kandinsky3ResNetBlock(in_channel, out_channel, time_embed_dim, groups, compression_ratio)
            )

            if context_dim is not None:
                attentions.append(
                    Kandinsky3AttentionBlock(
                        out_channel, time_embed_dim, context_dim, groups, head_dim, expansion_ratio
                    )
                )
            else:
                attentions.append(nn.Identity())

            resnets_out.append(
                Kandinsky3ResNetBlock(
                    out_channel, out_channel, time_embed_dim, groups, compression_ratio, up_resolution
                )
            )

        self.attentions = nn.ModuleList(attentions)
        self.resnets_in = nn.ModuleList(resnets_in)
        self.resnets_out = nn.ModuleList(resnets_out)

    def forward(self, x, time_embed, context=None, context_mask=None, image_mask=None):
        if self.self_attention:
            x = self.attentions[0](x, time_embed, image_mask=image_mask)

        for attention, resnet_in, resnet_out in zip(self.attentions[1:], self.resnets_in, self.resnets_out):
            x = resnet_in(x, time_embed)
            if self.context_dim is not None:
                x = attention(x, time_embed, context, context_mask, image_mask)
            x = resnet_out(x, time_embed)
        return x


class Kandinsky3ConditionalGroupNorm(nn.Module):
    def __init__(self, groups, normalized_shape, context_dim):
        super().__init__()
        self.norm = nn.GroupNorm(groups, normalized_shape, affine=False)
        self.context_mlp = nn.Sequential(nn.SiLU(), nn.Linear(context_dim, 2 * normalized_shape))
        self.context_mlp[1].weight.data.zero_()
        self.context_mlp[1].bias.data.zero_()

    def forward(self, x, context):
        context = self.context_mlp(context)

        for _ in range(len(x.shape[2:])):
            context = context.unsqueeze(-1)

        scale, shift = context.chunk(2, dim=1)
        x = self.norm(x) * (scale + 1.0) + shift
        return x


class Kandinsky3Block(nn.Module):
    def __init__(self, in_channels, out_channels, time_embed_dim, kernel_size=3, norm_groups=32, up_resolution=None):
        super().__init__()
        self.group_norm = Kandinsky3ConditionalGroupNorm(norm_groups, in_channels, time_embed_dim)
        self.activation = nn.SiLU()
        if up_resolution is not None and up_resolution:
            self.up_sample = ConvTranspose2d(in_channels, in_channels, kernel_size=2, stride=2)
        else:
            self.up_sample = nn.Identity()

        padding = int(kernel_size > 1)
        self.projection = nn.Conv2d(in_channels, out_channels, kernel_size=kernel_size, padding=padding)

        if up_resolution is not None and not up_resolution:
            self.down_sample = nn.Conv2d(out_channels, out_channels, kernel_size=2, stride=2)
        else:
            self.down_sample = nn.Identity()

    def forward(self, x, time_embed):
        x = self.group_norm(x, time_embed)
        x = self.activation(x)
        x = self.up_sample(x)
        x = self.projection(x)
        x = self.down_sample(x)
        return x


class Kandinsky3ResNetBlock(nn.Module):
    def __init__(
        self, in_channels, out_channels, time_embed_dim, norm_groups=32, compression_ratio=2, up_resolutions=4 * [None]
    ):
        super().__init__()
        kernel_sizes = [1, 3, 3, 1]
        hidden_channel = max(in_channels, out_channels) // compression_ratio
        hidden_channels = (
            [(in_channels, hidden_channel)] + [(hidden_channel, hidden_channel)] * 2 + [(hidden_channel, out_channels)]
        )
        self.resnet_blocks = nn.ModuleList(
            [
                Kandinsky3Block(in_channel, out_channel, time_embed_dim, kernel_size, norm_groups, up_resolution)
                for (in_channel, out_channel), kernel_size, up_resolution in zip(
                    hidden_channels, kernel_sizes, up_resolutions
                )
            ]
        )
        self.shortcut_up_sample = (
            ConvTranspose2d(in_channels, in_channels, kernel_size=2, stride=2)
            if True in up_resolutions
            else nn.Identity()
        )
        self.shortcut_projection = (
            nn.Conv2d(in_channels, out_channels, kernel_size=1) if in_channels != out_channels else nn.Identity()
        )
        self.shortcut_down_sample = (
            nn.Conv2d(out_channels, out_channels, kernel_size=2, stride=2)
            if False in up_resolutions
            else nn.Identity()
        )

    def forward(self, x, time_embed):
        out = x
        for resnet_block in self.resnet_blocks:
            out = resnet_block(out, time_embed)

        x = self.shortcut_up_sample(x)
        x = self.shortcut_projection(x)
        x = self.shortcut_down_sample(x)
        x = x + out
        return x


class Kandinsky3AttentionPooling(nn.Module):
    def __init__(self, num_channels, context_dim, head_dim=64):
        super().__init__()
        self.attention = Attention(
            context_dim,
            context_dim,
            dim_head=head_dim,
            out_dim=num_channels,
            out_bias=False,
        )

    def forward(self, x, context, context_mask=None):
        context_mask = context_mask.to(dtype=context.dtype)
        context = self.attention(context.mean(dim=1, keepdim=True), context, context_mask)
        return x + context.squeeze(1)


class Kandinsky3AttentionBlock(nn.Module):
    def __init__(self, num_channels, time_embed_dim, context_dim=None, norm_groups=32, head_dim=64, expansion_ratio=4):
        super().__init__()
        self.in_norm = Kandinsky3ConditionalGroupNorm(norm_groups, num_channels, time_embed_dim)
        self.attention = Attention(
            num_channels,
            context_dim or num_channels,
            dim_head=head_dim,
            out_dim=num_channels,
            out_bias=False,
        )

        hidden_channels = expansion_ratio * num_channels
        self.out_norm = Kandinsky3ConditionalGroupNorm(norm_groups, num_channels, time_embed_dim)
        self.feed_forward = nn.Sequential(
            nn.Conv2d(num_channels, hidden_channels, kernel_size=1, bias=False),
            nn.SiLU(),
            nn.Conv2d(hidden_channels, num_channels, kernel_size=1, bias=False),
        )

    def forward(self, x, time_embed, context=None, context_mask=None, image_mask=None):
        height, width = x.shape[-2:]
        out = self.in_norm(x, time_embed)
        out = out.reshape(x.shape[0], -1, height * width).permute(0, 2, 1)
        context = context if context is not None else out
        if context_mask is not None:
            context_mask = context_mask.to(dtype=context.dtype)

        out = self.attention(out, context, context_mask)
        out = out.permute(0, 2, 1).unsqueeze(-1).reshape(out.shape[0], -1, height, width)
        x = x + out

        out = self.out_norm(x, time_embed)
        out = self.feed_forward(out)
        x = x + out
        return x


class Kandinsky3UNetCall(Kandinsky3UNet):
    """Kandinsky3UNet called as Kandinsky3Pipeline calls it: unet(..., return_dict=False)[0]."""

    def forward(self, sample, timestep, encoder_hidden_states, encoder_attention_mask):
        return super().forward(sample, timestep, encoder_hidden_states=encoder_hidden_states,
                               encoder_attention_mask=encoder_attention_mask, return_dict=False)[0]


def inputs(g):
    # Kandinsky3Pipeline.encode_prompt with cut_context: the T5 states up to one padding token, that row zeroed,
    # then prompt_embeds * attention_mask.unsqueeze(2); the mask the tokenizer's int64 one, cut alike
    mask = torch.tensor([[1, 1, 1, 1, 1, 0]], dtype=torch.int64)
    embeds = torch.randn((1, 6, 12), generator=g)
    embeds[mask == 0] = torch.zeros_like(embeds[mask == 0])
    embeds = embeds * mask.unsqueeze(2)
    return {"sample": torch.randn((1, 4, 8, 8), generator=g),
            "timestep": torch.tensor(750, dtype=torch.int64),  # a DDPM timestep, 0-dim as the loop yields it
            "encoder_hidden_states": embeds, "encoder_attention_mask": mask}


if __name__ == "__main__":
    capture_once(
        "kandinsky3", Kandinsky3UNetCall, inputs, sys.argv[1],
        dict(library_source="replica of huggingface/diffusers unets/unet_kandinsky3.py@021216dc16c5 and the parts "
                            "it imports (attention_processor.py Attention/AttnProcessor2_0, embeddings.py "
                            "Timesteps/TimestepEmbedding) (torch 1.13)",
             timestep="750, a 0-dim int64 (Kandinsky3Pipeline: the DDPM scheduler's t), [None] then expanded",
             note="Kandinsky3UNet at widths 8/16 (init 4), time width 16, 2 groups, head dim 4, one denoiser call: "
                  "the (1 - m) * -10000 text mask; Timesteps(4, no flip, shift 1) -> Linear-SiLU-Linear plus an "
                  "attention pooling of the projected text (mean token as query); conditional GroupNorms "
                  "everywhere; 4-stage bottleneck ResNet blocks with 2x2 stride-2 conv down / ConvTranspose up "
                  "inside a stage and on the shortcut; self- and masked cross-attention blocks with a 1x1-conv "
                  "SiLU feed-forward; skips joined by channels"),
        name="transformer", output="sample")
