"""DreamLite's U-Net (DreamLiteUNetModel), reimplemented for torch 1.13 (no diffusers here), captured small in f32
on CPU.

Follows huggingface/diffusers src/diffusers/models/unets/unet_dreamlite.py at
09e5dc029809adc2daeab83097cb086aaa611c36 line for line: DepthwiseSeparableConv, ResnetBlock2DDreamLite (with
use_sep_conv: conv1 a bias-free depthwise 3x3 then a bias-free pointwise 1x1 expanding to 2·out, time_emb_proj and
norm2 2·out wide, conv2 a depthwise 3x3 then a pointwise 1x1 contracting back to out; a 1x1 conv_shortcut where the
widths differ), DreamLiteUNetMidBlock2DCrossAttn, DreamLiteCrossAttnDownBlock2D,
DreamLiteCrossAttnNoSelfAttnDownBlock2D, DreamLiteDownBlock2D, DreamLiteCrossAttnUpBlock2D,
DreamLiteCrossAttnNoSelfAttnUpBlock2D, DreamLiteUpBlock2D, the _get_*_block_dreamlite dispatch, and
DreamLiteUNetModel (its own __init__, the "text_proj_rms" encoder_hid_proj = Sequential(Linear, RMSNorm ε 1e-5),
the "time" addition embedding: add_time_proj = Timesteps(addition_time_embed_dim), add_embedding =
TimestepEmbedding(projection_class_embeddings_input_dim, time_embed_dim), get_aug_embed on time_ids alone); the
forward it inherits is unets/unet_2d_condition.py's UNet2DConditionModel.forward at
dbbfe89b9297c416ad1037e80f13e3fa7a7f8d34 (both masks made (1 − m)·−10000 biases [B, 1, L] in the sample's dtype,
get_time_embed, time_embedding(t_emb, timestep_cond), aug_emb added, process_encoder_hidden_states, conv_in, down /
mid / up with the skips, GroupNorm-SiLU-conv_out; no class embedding, no adapters or ControlNet residuals, no FreeU,
upsample_size None here since the map is a multiple of 4). The file at this commit defines its blocks itself; it
no longer imports unets/unet_2d_blocks_dreamlite.py (d9e9b9b99187, an earlier split layout of the same blocks).
Imported from the other replicas, unchanged: dreamlite.py's DreamLiteTransformer2DModel (transformer_2d_dreamlite.py
at 032412cf065d with the U-Net's DreamLiteAttnProcessor2_0 on every Attention, the GQA repeat, per-head RMSNorm
q/k, GEGLU feed-forward, the self-attention-less variant), sd_unet.py's Downsample2D (3x3 stride-2 conv, padding
1: unet_2d_blocks' re-export of downsampling.Downsample2D with name "op", its conv named conv) and Upsample2D
(nearest ×2, f32 around the interpolation for a bf16 input as upsampling.py does on torch < 2.1, then a 3x3 conv),
parts.py's Timesteps, lcm_unet.py's TimestepEmbedding (embeddings.py's, with the forward's condition argument;
cond_proj None here), hunyuanimage21.py's RMSNorm (normalization.RMSNorm). Stand-in for what torch 1.13 lacks:
dispatch_attention_fn's native SDPA (dreamlite.py's, the math path with the additive mask). The same module tree,
parameter names and shapes, call boundaries, and arithmetic line for line.

The constructs it shows: a three-level conv U-Net whose resnets use depthwise-separable convs (a depthwise 3x3,
groups = channels, without bias, then a pointwise 1x1 that doubles the width, the time projection added over the
doubled width, GroupNorm over it, the depthwise/pointwise pair halving it back); transformers with linear
projections in and out, multi-query attention (one k/v head repeat_interleave'd to all query heads, RMSNorm over
each head's q and k; level 0 has a single head here, so no repeat there) and a 3·d GEGLU; levels 0 and 1 on the way down and level 1 on the way up without
self-attention (norm1's output replaces the state, then cross-attention only), level 2, the mid block and up level 0
with both; the caption projected once by Linear then RMSNorm before every cross-attention reads it; a padding mask
over the caption as an additive −10000 bias repeated over heads; the timestep embedding plus an added embedding of
the image size (time_ids [w, h], each through its own sinusoid, joined and through a Linear-SiLU-Linear); the
diptych input (the latent joined by width to a zero image latent) and the output's left half.

Config: the checkpoint's (carlofkl/DreamLite-base, revision "diffusers", unet/config.json as a downstream project's
tests record it: block_out_channels (256, 512, 896), attention_head_dim (4, 8, 14) read as head counts (head width
64 at every level), layers_per_block 2, transformer_layers_per_block (1, 2, 4), cross_attention_dim 2304,
encoder_hid_dim 2048 with "text_proj_rms", addition_embed_type "time" (addition_time_embed_dim 256,
projection_class_embeddings_input_dim 512), num_kv_heads 1, qk_norm "rms_norm", ff_mult 3, use_sep_conv,
use_linear_projection, norm_num_groups 32; the default block types) scaled down: block_out_channels (4, 8, 16),
heads (1, 2, 4) (head width 4 at every level, as the checkpoint's 64), layers_per_block 1 (two resnets an up block),
transformer_layers_per_block (1, 1, 2) (the level-2 transformers, down, mid and up, 2 layers: as the checkpoint's
deepest level has the most), cross_attention_dim 8, encoder_hid_dim 12, addition_time_embed_dim 4 (projection 8 = 2·4),
norm_num_groups 2, norm_eps 1e-5 (the default), time_embed_dim 16; a 32x32 image, so latents [1, 4, 4, 4] and the
U-Net's input [2, 4, 4, 8] (maps of 4x8, 2x4, 1x2 by level: with the CFG batch, the diptych's doubled width and
~500 module calls a step, an 8x8 latent at widths 8/16/32 made an 18 MB f32 trace; this one is ~4 MB); down
("DreamLiteCrossAttnNoSelfAttnDownBlock2D", "DreamLiteCrossAttnNoSelfAttnDownBlock2D", "DreamLiteCrossAttnDownBlock2D"),
mid "DreamLiteUNetMidBlock2DCrossAttn", up ("DreamLiteCrossAttnUpBlock2D", "DreamLiteCrossAttnNoSelfAttnUpBlock2D",
"DreamLiteUpBlock2D") (the defaults).

How it is called: DreamLitePipeline (pipelines/dreamlite/pipeline_dreamlite.py at
032412cf065d788d674f87e57e26aa32b19c7827), text-to-image ("generate"): always the CFG batch [negative prompt "",
prompt]; encode_prompt's Qwen3-VL last hidden states, the 34 template tokens dropped, pad_sequence'd with zeros
(here [2, 7, 12] drawn at random, the negative row 3 tokens long and zero after) and the int64 0/1 mask [2, 7];
add_time_ids = torch.tensor([[width, height]], dtype=text_encoder.dtype) (32, 32), cat'd twice; image_latents =
zeros_like(latents); each step model_input = cat([cat([latents]*2), cat([image_latents]*2)], dim=3) ([2, 4, 4, 8]),
self.unet(model_input, timestep=t.expand(2).to(latents.dtype), encoder_hidden_states=prompt_embeds,
encoder_attention_mask=mask, added_cond_kwargs={"time_ids": time_ids_in}, return_dict=False)[0], then
noise_pred[..., :4], chunk(2), uncond + 7.5·(cond − uncond) (guidance_scale's default). The scheduler is
FlowMatchEulerDiscreteScheduler (t = σ·1000; its dynamic shift of the sigmas left to run.py's fixed SIGMAS), so
run.py's flow Euler loop is the pipeline's own sampler and the guided prediction is the velocity as is. Latents,
prompt embeds and time_ids are in the text encoder's dtype (bf16 in the bf16 run), as is the timestep.

usage: /usr/bin/python3 bench/unseen/replicas/dreamlite_unet.py OUTDIR
REPLICA_DTYPE=bf16 [REPLICA_DEVICE=cuda] as run.py's replicas: the bf16 run, beside the f32 one.
"""
import sys

import torch
import torch.nn as nn

from dreamlite import Attention, DreamLiteTransformer2DModel
from hunyuanimage21 import RMSNorm
from lcm_unet import TimestepEmbedding
from parts import Timesteps
from run import capture
from sd_unet import Downsample2D, Upsample2D


def get_activation(act_fn):
    """activations.get_activation: "swish" and "silu" are nn.SiLU."""
    assert act_fn in ("swish", "silu")
    return nn.SiLU()


# ---------------------------------------------------------------------------
# Building blocks (resnet)
# ---------------------------------------------------------------------------
class DepthwiseSeparableConv(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, bias=False, expand_ratio=1):
        super().__init__()
        self.depthwise = nn.Conv2d(in_channels, in_channels, kernel_size=kernel_size, stride=stride, padding=padding,
                                   groups=in_channels, bias=bias)
        self.pointwise = nn.Conv2d(in_channels, int(out_channels * expand_ratio), kernel_size=1, bias=bias)

    def forward(self, hidden_states):
        hidden_states = self.depthwise(hidden_states)
        hidden_states = self.pointwise(hidden_states)
        return hidden_states


class ResnetBlock2DDreamLite(nn.Module):
    """time_embedding_norm "default" or "scale_shift"; no up / down resampling (DreamLite's blocks never ask)."""

    def __init__(self, *, in_channels, out_channels=None, conv_shortcut=False, dropout=0.0, temb_channels=512,
                 groups=32, groups_out=None, pre_norm=True, eps=1e-6, non_linearity="swish", skip_time_act=False,
                 time_embedding_norm="default", kernel=None, output_scale_factor=1.0, use_in_shortcut=None, up=False,
                 down=False, conv_shortcut_bias=True, conv_2d_out_channels=None, use_sep_conv=False):
        super().__init__()
        assert not up and not down
        self.pre_norm = True
        self.in_channels = in_channels
        out_channels = in_channels if out_channels is None else out_channels
        self.out_channels = out_channels
        self.use_conv_shortcut = conv_shortcut
        self.up = up
        self.down = down
        self.output_scale_factor = output_scale_factor
        self.time_embedding_norm = time_embedding_norm
        self.skip_time_act = skip_time_act

        if groups_out is None:
            groups_out = groups

        self.norm1 = nn.GroupNorm(num_groups=groups, num_channels=in_channels, eps=eps, affine=True)

        if use_sep_conv:
            expand_ratio = 2
            self.conv1 = DepthwiseSeparableConv(in_channels, out_channels, kernel_size=3, stride=1, padding=1,
                                                expand_ratio=expand_ratio)
            out_channels = out_channels * expand_ratio
        else:
            expand_ratio = 1
            self.conv1 = nn.Conv2d(in_channels, out_channels, kernel_size=3, stride=1, padding=1)

        if temb_channels is not None:
            if self.time_embedding_norm == "default":
                self.time_emb_proj = nn.Linear(temb_channels, out_channels)
            elif self.time_embedding_norm == "scale_shift":
                self.time_emb_proj = nn.Linear(temb_channels, 2 * out_channels)
            else:
                raise ValueError(f"unknown time_embedding_norm : {self.time_embedding_norm}")
        else:
            self.time_emb_proj = None

        self.norm2 = nn.GroupNorm(num_groups=groups_out, num_channels=out_channels, eps=eps, affine=True)

        self.dropout = nn.Dropout(dropout)
        conv_2d_out_channels = conv_2d_out_channels or out_channels
        if use_sep_conv:
            self.conv2 = DepthwiseSeparableConv(out_channels, conv_2d_out_channels, kernel_size=3, stride=1, padding=1,
                                                expand_ratio=1 / expand_ratio)
            conv_2d_out_channels = conv_2d_out_channels // expand_ratio
        else:
            self.conv2 = nn.Conv2d(out_channels, conv_2d_out_channels, kernel_size=3, stride=1, padding=1)

        self.nonlinearity = get_activation(non_linearity)

        self.upsample = self.downsample = None

        self.use_in_shortcut = self.in_channels != conv_2d_out_channels if use_in_shortcut is None else use_in_shortcut

        self.conv_shortcut = None
        if self.use_in_shortcut:
            self.conv_shortcut = nn.Conv2d(in_channels, conv_2d_out_channels, kernel_size=1, stride=1, padding=0,
                                           bias=conv_shortcut_bias)

    def forward(self, input_tensor, temb):
        hidden_states = input_tensor

        hidden_states = self.norm1(hidden_states)
        hidden_states = self.nonlinearity(hidden_states)

        hidden_states = self.conv1(hidden_states)

        if self.time_emb_proj is not None:
            if not self.skip_time_act:
                temb = self.nonlinearity(temb)
            temb = self.time_emb_proj(temb)[:, :, None, None]

        if self.time_embedding_norm == "default":
            if temb is not None:
                hidden_states = hidden_states + temb
            hidden_states = self.norm2(hidden_states)
        elif self.time_embedding_norm == "scale_shift":
            time_scale, time_shift = torch.chunk(temb, 2, dim=1)
            hidden_states = self.norm2(hidden_states)
            hidden_states = hidden_states * (1 + time_scale) + time_shift
        else:
            hidden_states = self.norm2(hidden_states)

        hidden_states = self.nonlinearity(hidden_states)

        hidden_states = self.dropout(hidden_states)
        hidden_states = self.conv2(hidden_states)

        if self.conv_shortcut is not None:
            if self.training:
                input_tensor = input_tensor.contiguous()
            input_tensor = self.conv_shortcut(input_tensor)

        output_tensor = (input_tensor + hidden_states) / self.output_scale_factor

        return output_tensor


# ---------------------------------------------------------------------------
# Mid block
# ---------------------------------------------------------------------------
class DreamLiteUNetMidBlock2DCrossAttn(nn.Module):
    def __init__(self, in_channels, temb_channels, out_channels=None, dropout=0.0, num_layers=1,
                 transformer_layers_per_block=1, resnet_eps=1e-6, resnet_time_scale_shift="default",
                 resnet_act_fn="swish", resnet_groups=32, resnet_groups_out=None, resnet_pre_norm=True,
                 num_attention_heads=1, output_scale_factor=1.0, cross_attention_dim=1280, dual_cross_attention=False,
                 use_linear_projection=False, upcast_attention=False, attention_type="default", qk_norm=None,
                 use_sep_conv=False, ff_mult=4, num_kv_heads=None, num_mid_layers=1):
        super().__init__()
        assert not dual_cross_attention
        out_channels = out_channels or in_channels
        self.in_channels = in_channels
        self.out_channels = out_channels

        self.has_cross_attention = True
        self.num_attention_heads = num_attention_heads
        resnet_groups = resnet_groups if resnet_groups is not None else min(in_channels // 4, 32)

        if isinstance(transformer_layers_per_block, int):
            transformer_layers_per_block = [transformer_layers_per_block] * num_layers

        resnet_groups_out = resnet_groups_out or resnet_groups

        resnets = [
            ResnetBlock2DDreamLite(in_channels=in_channels, out_channels=out_channels, temb_channels=temb_channels,
                                   eps=resnet_eps, groups=resnet_groups, groups_out=resnet_groups_out,
                                   dropout=dropout, time_embedding_norm=resnet_time_scale_shift,
                                   non_linearity=resnet_act_fn, output_scale_factor=output_scale_factor,
                                   pre_norm=resnet_pre_norm, use_sep_conv=use_sep_conv)
        ]
        attentions = []

        for i in range(num_layers):
            attentions.append(
                DreamLiteTransformer2DModel(num_attention_heads, out_channels // num_attention_heads,
                                            in_channels=out_channels, num_layers=transformer_layers_per_block[i],
                                            cross_attention_dim=cross_attention_dim,
                                            norm_num_groups=resnet_groups_out,
                                            use_linear_projection=use_linear_projection,
                                            upcast_attention=upcast_attention, attention_type=attention_type,
                                            qk_norm=qk_norm, ff_mult=ff_mult, num_kv_heads=num_kv_heads))
            resnets.append(
                ResnetBlock2DDreamLite(in_channels=out_channels, out_channels=out_channels,
                                       temb_channels=temb_channels, eps=resnet_eps, groups=resnet_groups_out,
                                       dropout=dropout, time_embedding_norm=resnet_time_scale_shift,
                                       non_linearity=resnet_act_fn, output_scale_factor=output_scale_factor,
                                       pre_norm=resnet_pre_norm, use_sep_conv=use_sep_conv))

        self.attentions = nn.ModuleList(attentions)
        self.resnets = nn.ModuleList(resnets)

        self.gradient_checkpointing = False

    def forward(self, hidden_states, temb=None, encoder_hidden_states=None, attention_mask=None,
                cross_attention_kwargs=None, encoder_attention_mask=None):
        hidden_states = self.resnets[0](hidden_states, temb)
        for attn, resnet in zip(self.attentions, self.resnets[1:]):
            hidden_states = attn(
                hidden_states,
                encoder_hidden_states=encoder_hidden_states,
                cross_attention_kwargs=cross_attention_kwargs,
                attention_mask=attention_mask,
                encoder_attention_mask=encoder_attention_mask,
                return_dict=False,
            )[0]
            hidden_states = resnet(hidden_states, temb)

        return hidden_states


# ---------------------------------------------------------------------------
# Down blocks
# ---------------------------------------------------------------------------
class DreamLiteCrossAttnDownBlock2D(nn.Module):
    """Both self- and cross-attention in each transformer layer; USE_SELF_ATTENTION False in the NoSelfAttn
    subclass below (upstream two classes identical but for use_self_attention=False in their transformers)."""

    USE_SELF_ATTENTION = True

    def __init__(self, in_channels, out_channels, temb_channels, dropout=0.0, num_layers=1,
                 transformer_layers_per_block=1, resnet_eps=1e-6, resnet_time_scale_shift="default",
                 resnet_act_fn="swish", resnet_groups=32, resnet_pre_norm=True, num_attention_heads=1,
                 cross_attention_dim=1280, output_scale_factor=1.0, downsample_padding=1, add_downsample=True,
                 dual_cross_attention=False, use_linear_projection=False, only_cross_attention=False,
                 upcast_attention=False, attention_type="default", qk_norm=None, use_sep_conv=False, ff_mult=4,
                 num_kv_heads=None):
        super().__init__()
        assert not dual_cross_attention
        resnets = []
        attentions = []

        self.has_cross_attention = True
        self.num_attention_heads = num_attention_heads
        if isinstance(transformer_layers_per_block, int):
            transformer_layers_per_block = [transformer_layers_per_block] * num_layers

        for i in range(num_layers):
            in_ch = in_channels if i == 0 else out_channels
            resnets.append(
                ResnetBlock2DDreamLite(in_channels=in_ch, out_channels=out_channels, temb_channels=temb_channels,
                                       eps=resnet_eps, groups=resnet_groups, dropout=dropout,
                                       time_embedding_norm=resnet_time_scale_shift, non_linearity=resnet_act_fn,
                                       output_scale_factor=output_scale_factor, pre_norm=resnet_pre_norm,
                                       use_sep_conv=use_sep_conv))
            attentions.append(
                DreamLiteTransformer2DModel(num_attention_heads=num_attention_heads,
                                            attention_head_dim=out_channels // num_attention_heads,
                                            in_channels=out_channels, num_layers=transformer_layers_per_block[i],
                                            cross_attention_dim=cross_attention_dim, norm_num_groups=resnet_groups,
                                            use_linear_projection=use_linear_projection,
                                            only_cross_attention=only_cross_attention,
                                            upcast_attention=upcast_attention, attention_type=attention_type,
                                            qk_norm=qk_norm, ff_mult=ff_mult, num_kv_heads=num_kv_heads,
                                            use_self_attention=self.USE_SELF_ATTENTION))

        self.attentions = nn.ModuleList(attentions)
        self.resnets = nn.ModuleList(resnets)

        if add_downsample:
            # Downsample2D(out_channels, use_conv=True, out_channels=out_channels, padding=downsample_padding,
            # name="op"): the conv registered as conv
            self.downsamplers = nn.ModuleList([Downsample2D(out_channels, use_conv=True, padding=downsample_padding)])
        else:
            self.downsamplers = None

        self.gradient_checkpointing = False

    def forward(self, hidden_states, temb=None, encoder_hidden_states=None, attention_mask=None,
                cross_attention_kwargs=None, encoder_attention_mask=None, additional_residuals=None):
        output_states = ()
        blocks = list(zip(self.resnets, self.attentions))

        for i, (resnet, attn) in enumerate(blocks):
            hidden_states = resnet(hidden_states, temb)
            hidden_states = attn(
                hidden_states,
                encoder_hidden_states=encoder_hidden_states,
                cross_attention_kwargs=cross_attention_kwargs,
                attention_mask=attention_mask,
                encoder_attention_mask=encoder_attention_mask,
                return_dict=False,
            )[0]

            if i == len(blocks) - 1 and additional_residuals is not None:
                hidden_states = hidden_states + additional_residuals

            output_states = output_states + (hidden_states,)

        if self.downsamplers is not None:
            for downsampler in self.downsamplers:
                hidden_states = downsampler(hidden_states)
            output_states = output_states + (hidden_states,)

        return hidden_states, output_states


class DreamLiteCrossAttnNoSelfAttnDownBlock2D(DreamLiteCrossAttnDownBlock2D):
    """Cross-attention only (self-attention removed: use_self_attention=False in its transformers)."""

    USE_SELF_ATTENTION = False


class DreamLiteDownBlock2D(nn.Module):
    def __init__(self, in_channels, out_channels, temb_channels, dropout=0.0, num_layers=1, resnet_eps=1e-6,
                 resnet_time_scale_shift="default", resnet_act_fn="swish", resnet_groups=32, resnet_pre_norm=True,
                 output_scale_factor=1.0, add_downsample=True, downsample_padding=1, use_sep_conv=False):
        super().__init__()
        resnets = []
        for i in range(num_layers):
            in_ch = in_channels if i == 0 else out_channels
            resnets.append(
                ResnetBlock2DDreamLite(in_channels=in_ch, out_channels=out_channels, temb_channels=temb_channels,
                                       eps=resnet_eps, groups=resnet_groups, dropout=dropout,
                                       time_embedding_norm=resnet_time_scale_shift, non_linearity=resnet_act_fn,
                                       output_scale_factor=output_scale_factor, pre_norm=resnet_pre_norm,
                                       use_sep_conv=use_sep_conv))
        self.resnets = nn.ModuleList(resnets)

        if add_downsample:
            self.downsamplers = nn.ModuleList([Downsample2D(out_channels, use_conv=True, padding=downsample_padding)])
        else:
            self.downsamplers = None

        self.gradient_checkpointing = False

    def forward(self, hidden_states, temb=None, **kwargs):
        output_states = ()
        for resnet in self.resnets:
            hidden_states = resnet(hidden_states, temb)
            output_states = output_states + (hidden_states,)

        if self.downsamplers is not None:
            for downsampler in self.downsamplers:
                hidden_states = downsampler(hidden_states)
            output_states = output_states + (hidden_states,)

        return hidden_states, output_states


# ---------------------------------------------------------------------------
# Up blocks
# ---------------------------------------------------------------------------
class DreamLiteCrossAttnUpBlock2D(nn.Module):
    """Both self- and cross-attention; USE_SELF_ATTENTION False in the NoSelfAttn subclass below."""

    USE_SELF_ATTENTION = True

    def __init__(self, in_channels, out_channels, prev_output_channel, temb_channels, resolution_idx=None,
                 dropout=0.0, num_layers=1, transformer_layers_per_block=1, resnet_eps=1e-6,
                 resnet_time_scale_shift="default", resnet_act_fn="swish", resnet_groups=32, resnet_pre_norm=True,
                 num_attention_heads=1, cross_attention_dim=1280, output_scale_factor=1.0, add_upsample=True,
                 dual_cross_attention=False, use_linear_projection=False, only_cross_attention=False,
                 upcast_attention=False, attention_type="default", qk_norm=None, use_sep_conv=False, ff_mult=4,
                 num_kv_heads=None):
        super().__init__()
        assert not dual_cross_attention
        resnets = []
        attentions = []

        self.has_cross_attention = True
        self.num_attention_heads = num_attention_heads

        if isinstance(transformer_layers_per_block, int):
            transformer_layers_per_block = [transformer_layers_per_block] * num_layers

        for i in range(num_layers):
            res_skip_channels = in_channels if (i == num_layers - 1) else out_channels
            resnet_in_channels = prev_output_channel if i == 0 else out_channels

            resnets.append(
                ResnetBlock2DDreamLite(in_channels=resnet_in_channels + res_skip_channels, out_channels=out_channels,
                                       temb_channels=temb_channels, eps=resnet_eps, groups=resnet_groups,
                                       dropout=dropout, time_embedding_norm=resnet_time_scale_shift,
                                       non_linearity=resnet_act_fn, output_scale_factor=output_scale_factor,
                                       pre_norm=resnet_pre_norm, use_sep_conv=use_sep_conv))
            attentions.append(
                DreamLiteTransformer2DModel(num_attention_heads=num_attention_heads,
                                            attention_head_dim=out_channels // num_attention_heads,
                                            in_channels=out_channels, num_layers=transformer_layers_per_block[i],
                                            cross_attention_dim=cross_attention_dim, norm_num_groups=resnet_groups,
                                            use_linear_projection=use_linear_projection,
                                            only_cross_attention=only_cross_attention,
                                            upcast_attention=upcast_attention, attention_type=attention_type,
                                            qk_norm=qk_norm, ff_mult=ff_mult, num_kv_heads=num_kv_heads,
                                            use_self_attention=self.USE_SELF_ATTENTION))

        self.attentions = nn.ModuleList(attentions)
        self.resnets = nn.ModuleList(resnets)

        if add_upsample:
            # Upsample2D(out_channels, use_conv=True, out_channels=out_channels): the conv registered as conv
            self.upsamplers = nn.ModuleList([Upsample2D(out_channels, use_conv=True)])
        else:
            self.upsamplers = None

        self.gradient_checkpointing = False
        self.resolution_idx = resolution_idx

    def forward(self, hidden_states, res_hidden_states_tuple, temb=None, encoder_hidden_states=None,
                cross_attention_kwargs=None, upsample_size=None, attention_mask=None, encoder_attention_mask=None):
        is_freeu_enabled = (getattr(self, "s1", None) and getattr(self, "s2", None) and getattr(self, "b1", None)
                            and getattr(self, "b2", None))
        assert not is_freeu_enabled

        for resnet, attn in zip(self.resnets, self.attentions):
            res_hidden_states = res_hidden_states_tuple[-1]
            res_hidden_states_tuple = res_hidden_states_tuple[:-1]

            hidden_states = torch.cat([hidden_states, res_hidden_states], dim=1)

            hidden_states = resnet(hidden_states, temb)
            hidden_states = attn(
                hidden_states,
                encoder_hidden_states=encoder_hidden_states,
                cross_attention_kwargs=cross_attention_kwargs,
                attention_mask=attention_mask,
                encoder_attention_mask=encoder_attention_mask,
                return_dict=False,
            )[0]

        if self.upsamplers is not None:
            for upsampler in self.upsamplers:
                hidden_states = upsampler(hidden_states, upsample_size)

        return hidden_states


class DreamLiteCrossAttnNoSelfAttnUpBlock2D(DreamLiteCrossAttnUpBlock2D):
    """Cross-attention only (self-attention removed: use_self_attention=False in its transformers)."""

    USE_SELF_ATTENTION = False


class DreamLiteUpBlock2D(nn.Module):
    def __init__(self, in_channels, prev_output_channel, out_channels, temb_channels, resolution_idx=None,
                 dropout=0.0, num_layers=1, resnet_eps=1e-6, resnet_time_scale_shift="default",
                 resnet_act_fn="swish", resnet_groups=32, resnet_pre_norm=True, output_scale_factor=1.0,
                 add_upsample=True, use_sep_conv=False):
        super().__init__()
        resnets = []
        for i in range(num_layers):
            res_skip_channels = in_channels if (i == num_layers - 1) else out_channels
            resnet_in_channels = prev_output_channel if i == 0 else out_channels

            resnets.append(
                ResnetBlock2DDreamLite(in_channels=resnet_in_channels + res_skip_channels, out_channels=out_channels,
                                       temb_channels=temb_channels, eps=resnet_eps, groups=resnet_groups,
                                       dropout=dropout, time_embedding_norm=resnet_time_scale_shift,
                                       non_linearity=resnet_act_fn, output_scale_factor=output_scale_factor,
                                       pre_norm=resnet_pre_norm, use_sep_conv=use_sep_conv))
        self.resnets = nn.ModuleList(resnets)

        if add_upsample:
            self.upsamplers = nn.ModuleList([Upsample2D(out_channels, use_conv=True)])
        else:
            self.upsamplers = None

        self.gradient_checkpointing = False
        self.resolution_idx = resolution_idx

    def forward(self, hidden_states, res_hidden_states_tuple, temb=None, upsample_size=None, **kwargs):
        is_freeu_enabled = (getattr(self, "s1", None) and getattr(self, "s2", None) and getattr(self, "b1", None)
                            and getattr(self, "b2", None))
        assert not is_freeu_enabled

        for resnet in self.resnets:
            res_hidden_states = res_hidden_states_tuple[-1]
            res_hidden_states_tuple = res_hidden_states_tuple[:-1]

            hidden_states = torch.cat([hidden_states, res_hidden_states], dim=1)

            hidden_states = resnet(hidden_states, temb)

        if self.upsamplers is not None:
            for upsampler in self.upsamplers:
                hidden_states = upsampler(hidden_states, upsample_size)

        return hidden_states


# ---------------------------------------------------------------------------
# Local block dispatch
# ---------------------------------------------------------------------------
_DREAMLITE_DOWN_BLOCK_ALIASES = {
    "CrossAttnDownRemoveSelfAttnBlock2D": "DreamLiteCrossAttnNoSelfAttnDownBlock2D",
    "CrossAttnDownBlock2D": "DreamLiteCrossAttnDownBlock2D",
    "DownBlock2D": "DreamLiteDownBlock2D",
}

_DREAMLITE_MID_BLOCK_ALIASES = {
    "UNetMidBlock2DCrossAttn": "DreamLiteUNetMidBlock2DCrossAttn",
}

_DREAMLITE_UP_BLOCK_ALIASES = {
    "CrossAttnUpRemoveSelfAttnBlock2D": "DreamLiteCrossAttnNoSelfAttnUpBlock2D",
    "CrossAttnUpRemoveSelfAttnBlock2DV1": "DreamLiteCrossAttnNoSelfAttnUpBlock2D",
    "CrossAttnUpBlock2D": "DreamLiteCrossAttnUpBlock2D",
    "UpBlock2D": "DreamLiteUpBlock2D",
}


def _get_down_block_dreamlite(down_block_type, *, num_layers, transformer_layers_per_block, in_channels,
                              out_channels, temb_channels, add_downsample, resnet_eps, resnet_act_fn, resnet_groups,
                              cross_attention_dim, num_attention_heads, downsample_padding, dual_cross_attention,
                              use_linear_projection, only_cross_attention, upcast_attention, resnet_time_scale_shift,
                              attention_type, dropout, qk_norm, use_sep_conv, ff_mult, num_kv_heads):
    down_block_type = _DREAMLITE_DOWN_BLOCK_ALIASES.get(down_block_type, down_block_type)

    if down_block_type == "DreamLiteDownBlock2D":
        return DreamLiteDownBlock2D(num_layers=num_layers, in_channels=in_channels, out_channels=out_channels,
                                    temb_channels=temb_channels, dropout=dropout, add_downsample=add_downsample,
                                    resnet_eps=resnet_eps, resnet_act_fn=resnet_act_fn, resnet_groups=resnet_groups,
                                    downsample_padding=downsample_padding,
                                    resnet_time_scale_shift=resnet_time_scale_shift, use_sep_conv=use_sep_conv)
    if down_block_type in ("DreamLiteCrossAttnDownBlock2D", "DreamLiteCrossAttnNoSelfAttnDownBlock2D"):
        if cross_attention_dim is None:
            raise ValueError(f"cross_attention_dim must be specified for {down_block_type}")
        cls = (DreamLiteCrossAttnDownBlock2D if down_block_type == "DreamLiteCrossAttnDownBlock2D"
               else DreamLiteCrossAttnNoSelfAttnDownBlock2D)
        return cls(num_layers=num_layers, transformer_layers_per_block=transformer_layers_per_block,
                   in_channels=in_channels, out_channels=out_channels, temb_channels=temb_channels, dropout=dropout,
                   add_downsample=add_downsample, resnet_eps=resnet_eps, resnet_act_fn=resnet_act_fn,
                   resnet_groups=resnet_groups, downsample_padding=downsample_padding,
                   cross_attention_dim=cross_attention_dim, num_attention_heads=num_attention_heads,
                   dual_cross_attention=dual_cross_attention, use_linear_projection=use_linear_projection,
                   only_cross_attention=only_cross_attention, upcast_attention=upcast_attention,
                   attention_type=attention_type, qk_norm=qk_norm, use_sep_conv=use_sep_conv, ff_mult=ff_mult,
                   num_kv_heads=num_kv_heads)
    raise ValueError(f"DreamLite does not support down_block_type={down_block_type!r}")


def _get_mid_block_dreamlite(mid_block_type, *, temb_channels, in_channels, resnet_eps, resnet_act_fn, resnet_groups,
                             output_scale_factor, transformer_layers_per_block, num_attention_heads,
                             cross_attention_dim, dual_cross_attention, use_linear_projection, upcast_attention,
                             resnet_time_scale_shift, attention_type, dropout, qk_norm, use_sep_conv, ff_mult,
                             num_kv_heads, num_mid_layers=1):
    if mid_block_type is None:
        return None
    mid_block_type = _DREAMLITE_MID_BLOCK_ALIASES.get(mid_block_type, mid_block_type)

    if mid_block_type == "DreamLiteUNetMidBlock2DCrossAttn":
        return DreamLiteUNetMidBlock2DCrossAttn(
            transformer_layers_per_block=transformer_layers_per_block, in_channels=in_channels,
            temb_channels=temb_channels, dropout=dropout, resnet_eps=resnet_eps, resnet_act_fn=resnet_act_fn,
            output_scale_factor=output_scale_factor, resnet_time_scale_shift=resnet_time_scale_shift,
            cross_attention_dim=cross_attention_dim, num_attention_heads=num_attention_heads,
            resnet_groups=resnet_groups, dual_cross_attention=dual_cross_attention,
            use_linear_projection=use_linear_projection, upcast_attention=upcast_attention,
            attention_type=attention_type, qk_norm=qk_norm, use_sep_conv=use_sep_conv, ff_mult=ff_mult,
            num_kv_heads=num_kv_heads, num_layers=num_mid_layers)
    raise ValueError(f"DreamLite does not support mid_block_type={mid_block_type!r}")


def _get_up_block_dreamlite(up_block_type, *, num_layers, transformer_layers_per_block, in_channels, out_channels,
                            prev_output_channel, temb_channels, add_upsample, resnet_eps, resnet_act_fn,
                            resolution_idx, resnet_groups, cross_attention_dim, num_attention_heads,
                            dual_cross_attention, use_linear_projection, only_cross_attention, upcast_attention,
                            resnet_time_scale_shift, attention_type, dropout, qk_norm, use_sep_conv, ff_mult,
                            num_kv_heads):
    up_block_type = _DREAMLITE_UP_BLOCK_ALIASES.get(up_block_type, up_block_type)

    if up_block_type == "DreamLiteUpBlock2D":
        return DreamLiteUpBlock2D(num_layers=num_layers, in_channels=in_channels, out_channels=out_channels,
                                  prev_output_channel=prev_output_channel, temb_channels=temb_channels,
                                  resolution_idx=resolution_idx, dropout=dropout, add_upsample=add_upsample,
                                  resnet_eps=resnet_eps, resnet_act_fn=resnet_act_fn, resnet_groups=resnet_groups,
                                  resnet_time_scale_shift=resnet_time_scale_shift, use_sep_conv=use_sep_conv)
    if up_block_type in ("DreamLiteCrossAttnUpBlock2D", "DreamLiteCrossAttnNoSelfAttnUpBlock2D"):
        if cross_attention_dim is None:
            raise ValueError(f"cross_attention_dim must be specified for {up_block_type}")
        cls = (DreamLiteCrossAttnUpBlock2D if up_block_type == "DreamLiteCrossAttnUpBlock2D"
               else DreamLiteCrossAttnNoSelfAttnUpBlock2D)
        return cls(num_layers=num_layers, transformer_layers_per_block=transformer_layers_per_block,
                   in_channels=in_channels, out_channels=out_channels, prev_output_channel=prev_output_channel,
                   temb_channels=temb_channels, resolution_idx=resolution_idx, dropout=dropout,
                   add_upsample=add_upsample, resnet_eps=resnet_eps, resnet_act_fn=resnet_act_fn,
                   resnet_groups=resnet_groups, cross_attention_dim=cross_attention_dim,
                   num_attention_heads=num_attention_heads, dual_cross_attention=dual_cross_attention,
                   use_linear_projection=use_linear_projection, only_cross_attention=only_cross_attention,
                   upcast_attention=upcast_attention, attention_type=attention_type, qk_norm=qk_norm,
                   use_sep_conv=use_sep_conv, ff_mult=ff_mult, num_kv_heads=num_kv_heads)
    raise ValueError(f"DreamLite does not support up_block_type={up_block_type!r}")


# ---------------------------------------------------------------------------
# Model
# ---------------------------------------------------------------------------
class DreamLiteUNetModel(nn.Module):
    """DreamLiteUNetModel.__init__ for the branches its checkpoint takes (time_embedding_type "positional",
    encoder_hid_dim_type "text_proj_rms" or None, addition_embed_type "time" or None, no class embedding, no
    GLIGEN), with UNet2DConditionModel.forward."""

    def __init__(self, sample_size=None, in_channels=4, out_channels=4, center_input_sample=False,
                 flip_sin_to_cos=True, freq_shift=0,
                 down_block_types=("DreamLiteCrossAttnNoSelfAttnDownBlock2D", "DreamLiteCrossAttnNoSelfAttnDownBlock2D",
                                   "DreamLiteCrossAttnDownBlock2D"),
                 mid_block_type="DreamLiteUNetMidBlock2DCrossAttn",
                 up_block_types=("DreamLiteCrossAttnUpBlock2D", "DreamLiteCrossAttnNoSelfAttnUpBlock2D",
                                 "DreamLiteUpBlock2D"),
                 only_cross_attention=False, block_out_channels=(320, 640, 1280), layers_per_block=2,
                 downsample_padding=1, mid_block_scale_factor=1, dropout=0.0, act_fn="silu", norm_num_groups=32,
                 norm_eps=1e-5, cross_attention_dim=2048, transformer_layers_per_block=1,
                 reverse_transformer_layers_per_block=None, encoder_hid_dim=None, encoder_hid_dim_type=None,
                 attention_head_dim=64, num_attention_heads=None, dual_cross_attention=False,
                 use_linear_projection=False, class_embed_type=None, addition_embed_type=None,
                 addition_time_embed_dim=None, num_class_embeds=None, upcast_attention=False,
                 resnet_time_scale_shift="default", resnet_skip_time_act=False, resnet_out_scale_factor=1.0,
                 time_embedding_type="positional", time_embedding_dim=None, time_embedding_act_fn=None,
                 timestep_post_act=None, time_cond_proj_dim=None, conv_in_kernel=3, conv_out_kernel=3,
                 projection_class_embeddings_input_dim=None, attention_type="default", class_embeddings_concat=False,
                 mid_block_only_cross_attention=None, cross_attention_norm=None, addition_embed_type_num_heads=64,
                 qk_norm="rms_norm", use_sep_conv=True, ff_mult=6, num_kv_heads=1, num_mid_layers=1):
        super().__init__()
        assert time_embedding_type == "positional" and class_embed_type is None and num_class_embeds is None
        assert timestep_post_act is None and time_cond_proj_dim is None and time_embedding_act_fn is None
        assert encoder_hid_dim_type in (None, "text_proj_rms") and addition_embed_type in (None, "time")
        assert attention_type == "default"
        # the config register_to_config records, read back as self.config.* by the forward
        self.center_input_sample = center_input_sample
        self.encoder_hid_dim_type = encoder_hid_dim_type
        self.addition_embed_type = addition_embed_type
        self.class_embeddings_concat = class_embeddings_concat
        self.projection_class_embeddings_input_dim = projection_class_embeddings_input_dim

        self.sample_size = sample_size

        if num_attention_heads is not None:
            raise ValueError("num_attention_heads: the naming issue (diffusers#2011)")
        num_attention_heads = num_attention_heads or attention_head_dim

        # input
        conv_in_padding = (conv_in_kernel - 1) // 2
        self.conv_in = nn.Conv2d(in_channels, block_out_channels[0], kernel_size=conv_in_kernel,
                                 padding=conv_in_padding)

        # time (_set_time_proj, "positional")
        time_embed_dim = time_embedding_dim or block_out_channels[0] * 4
        self.time_proj = Timesteps(block_out_channels[0], flip_sin_to_cos, freq_shift)
        timestep_input_dim = block_out_channels[0]

        self.time_embedding = TimestepEmbedding(timestep_input_dim, time_embed_dim, act_fn=act_fn,
                                                post_act_fn=timestep_post_act, cond_proj_dim=time_cond_proj_dim)

        # _set_encoder_hid_proj (DreamLite's override)
        if encoder_hid_dim_type == "text_proj_rms":
            self.encoder_hid_proj = nn.Sequential(
                nn.Linear(encoder_hid_dim, cross_attention_dim),
                RMSNorm(cross_attention_dim, eps=1e-5, elementwise_affine=True),
            )
        else:
            self.encoder_hid_proj = None
        # _set_class_embedding
        self.class_embedding = None
        # _set_add_embedding (DreamLite's override, "time")
        if addition_embed_type == "time":
            self.add_time_proj = Timesteps(addition_time_embed_dim, flip_sin_to_cos, freq_shift)
            self.add_embedding = TimestepEmbedding(projection_class_embeddings_input_dim, time_embed_dim)

        self.time_embed_act = None

        self.down_blocks = nn.ModuleList([])
        self.up_blocks = nn.ModuleList([])

        # Normalize per-stage args
        if isinstance(only_cross_attention, bool):
            if mid_block_only_cross_attention is None:
                mid_block_only_cross_attention = only_cross_attention
            only_cross_attention = [only_cross_attention] * len(down_block_types)
        if mid_block_only_cross_attention is None:
            mid_block_only_cross_attention = False
        if isinstance(num_attention_heads, int):
            num_attention_heads = (num_attention_heads,) * len(down_block_types)
        if isinstance(attention_head_dim, int):
            attention_head_dim = (attention_head_dim,) * len(down_block_types)
        if isinstance(cross_attention_dim, int):
            cross_attention_dim = (cross_attention_dim,) * len(down_block_types)
        if isinstance(layers_per_block, int):
            layers_per_block = [layers_per_block] * len(down_block_types)
        if isinstance(transformer_layers_per_block, int):
            transformer_layers_per_block = [transformer_layers_per_block] * len(down_block_types)

        blocks_time_embed_dim = time_embed_dim * 2 if class_embeddings_concat else time_embed_dim

        # ---- Down ----
        output_channel = block_out_channels[0]
        for i, down_block_type in enumerate(down_block_types):
            input_channel = output_channel
            output_channel = block_out_channels[i]
            is_final_block = i == len(block_out_channels) - 1

            self.down_blocks.append(
                _get_down_block_dreamlite(
                    down_block_type, num_layers=layers_per_block[i],
                    transformer_layers_per_block=transformer_layers_per_block[i], in_channels=input_channel,
                    out_channels=output_channel, temb_channels=blocks_time_embed_dim,
                    add_downsample=not is_final_block, resnet_eps=norm_eps, resnet_act_fn=act_fn,
                    resnet_groups=norm_num_groups, cross_attention_dim=cross_attention_dim[i],
                    num_attention_heads=num_attention_heads[i], downsample_padding=downsample_padding,
                    dual_cross_attention=dual_cross_attention, use_linear_projection=use_linear_projection,
                    only_cross_attention=only_cross_attention[i], upcast_attention=upcast_attention,
                    resnet_time_scale_shift=resnet_time_scale_shift, attention_type=attention_type, dropout=dropout,
                    qk_norm=qk_norm, use_sep_conv=use_sep_conv, ff_mult=ff_mult, num_kv_heads=num_kv_heads))

        # ---- Mid ----
        self.mid_block = _get_mid_block_dreamlite(
            mid_block_type, temb_channels=blocks_time_embed_dim, in_channels=block_out_channels[-1],
            resnet_eps=norm_eps, resnet_act_fn=act_fn, resnet_groups=norm_num_groups,
            output_scale_factor=mid_block_scale_factor, transformer_layers_per_block=transformer_layers_per_block[-1],
            num_attention_heads=num_attention_heads[-1], cross_attention_dim=cross_attention_dim[-1],
            dual_cross_attention=dual_cross_attention, use_linear_projection=use_linear_projection,
            upcast_attention=upcast_attention, resnet_time_scale_shift=resnet_time_scale_shift,
            attention_type=attention_type, dropout=dropout, qk_norm=qk_norm, use_sep_conv=use_sep_conv,
            ff_mult=ff_mult, num_kv_heads=num_kv_heads, num_mid_layers=num_mid_layers)

        # ---- Up ----
        self.num_upsamplers = 0
        reversed_block_out_channels = list(reversed(block_out_channels))
        reversed_num_attention_heads = list(reversed(num_attention_heads))
        reversed_layers_per_block = list(reversed(layers_per_block))
        reversed_cross_attention_dim = list(reversed(cross_attention_dim))
        reversed_transformer_layers_per_block = (
            list(reversed(transformer_layers_per_block))
            if reverse_transformer_layers_per_block is None
            else reverse_transformer_layers_per_block
        )
        only_cross_attention = list(reversed(only_cross_attention))

        output_channel = reversed_block_out_channels[0]
        for i, up_block_type in enumerate(up_block_types):
            is_final_block = i == len(block_out_channels) - 1
            prev_output_channel = output_channel
            output_channel = reversed_block_out_channels[i]
            input_channel = reversed_block_out_channels[min(i + 1, len(block_out_channels) - 1)]

            if not is_final_block:
                add_upsample = True
                self.num_upsamplers += 1
            else:
                add_upsample = False

            self.up_blocks.append(
                _get_up_block_dreamlite(
                    up_block_type, num_layers=reversed_layers_per_block[i] + 1,
                    transformer_layers_per_block=reversed_transformer_layers_per_block[i], in_channels=input_channel,
                    out_channels=output_channel, prev_output_channel=prev_output_channel,
                    temb_channels=blocks_time_embed_dim, add_upsample=add_upsample, resnet_eps=norm_eps,
                    resnet_act_fn=act_fn, resolution_idx=i, resnet_groups=norm_num_groups,
                    cross_attention_dim=reversed_cross_attention_dim[i],
                    num_attention_heads=reversed_num_attention_heads[i], dual_cross_attention=dual_cross_attention,
                    use_linear_projection=use_linear_projection, only_cross_attention=only_cross_attention[i],
                    upcast_attention=upcast_attention, resnet_time_scale_shift=resnet_time_scale_shift,
                    attention_type=attention_type, dropout=dropout, qk_norm=qk_norm, use_sep_conv=use_sep_conv,
                    ff_mult=ff_mult, num_kv_heads=num_kv_heads))

        # ---- Out ----
        if norm_num_groups is not None:
            self.conv_norm_out = nn.GroupNorm(num_channels=block_out_channels[0], num_groups=norm_num_groups,
                                              eps=norm_eps)
            self.conv_act = get_activation(act_fn)
        else:
            self.conv_norm_out = None
            self.conv_act = None

        conv_out_padding = (conv_out_kernel - 1) // 2
        self.conv_out = nn.Conv2d(block_out_channels[0], out_channels, kernel_size=conv_out_kernel,
                                  padding=conv_out_padding)

        # ---- DreamLite: install GQA-aware processor everywhere (dreamlite.py's Attention defaults to it) ----
        for module in self.modules():
            if isinstance(module, Attention):
                assert module.processor.__name__ == "dreamlite_attn"

    # --- UNet2DConditionModel's helpers, with DreamLite's overrides ---
    def get_time_embed(self, sample, timestep):
        timesteps = timestep
        if not torch.is_tensor(timesteps):
            if isinstance(timestep, float):
                dtype = torch.float64
            else:
                dtype = torch.int64
            timesteps = torch.tensor([timesteps], dtype=dtype, device=sample.device)
        elif len(timesteps.shape) == 0:
            timesteps = timesteps[None].to(sample.device)

        # broadcast to batch dimension in a way that's compatible with ONNX/Core ML
        timesteps = timesteps.expand(sample.shape[0])

        t_emb = self.time_proj(timesteps)
        # `Timesteps` does not contain any weights and will always return f32 tensors
        t_emb = t_emb.to(dtype=sample.dtype)
        return t_emb

    def get_class_embed(self, sample, class_labels):
        class_emb = None
        return class_emb

    def get_aug_embed(self, emb, encoder_hidden_states, added_cond_kwargs):
        if self.addition_embed_type == "time":
            if "time_ids" not in added_cond_kwargs:
                raise ValueError("addition_embed_type 'time' requires time_ids in added_cond_kwargs")
            time_ids = added_cond_kwargs.get("time_ids")
            time_embeds = self.add_time_proj(time_ids.flatten())
            time_embeds = time_embeds.reshape((-1, self.projection_class_embeddings_input_dim))
            add_embeds = time_embeds.to(emb.dtype)
            return self.add_embedding(add_embeds)
        return None

    def process_encoder_hidden_states(self, encoder_hidden_states, added_cond_kwargs):
        if self.encoder_hid_proj is not None and self.encoder_hid_dim_type == "text_proj_rms":
            return self.encoder_hid_proj(encoder_hidden_states)
        return encoder_hidden_states

    def forward(self, sample, timestep, encoder_hidden_states, class_labels=None, timestep_cond=None,
                attention_mask=None, cross_attention_kwargs=None, added_cond_kwargs=None,
                down_block_additional_residuals=None, mid_block_additional_residual=None,
                down_intrablock_additional_residuals=None, encoder_attention_mask=None, return_dict=True):
        assert down_block_additional_residuals is None and mid_block_additional_residual is None
        assert down_intrablock_additional_residuals is None
        default_overall_up_factor = 2 ** self.num_upsamplers

        # upsample size should be forwarded when sample is not a multiple of `default_overall_up_factor`
        forward_upsample_size = False
        upsample_size = None

        for dim in sample.shape[-2:]:
            if dim % default_overall_up_factor != 0:
                # Forward upsample size to force interpolation output size.
                forward_upsample_size = True
                break

        if attention_mask is not None:
            attention_mask = (1 - attention_mask.to(sample.dtype)) * -10000.0
            attention_mask = attention_mask.unsqueeze(1)

        # convert encoder_attention_mask to a bias the same way we do for attention_mask
        if encoder_attention_mask is not None:
            encoder_attention_mask = (1 - encoder_attention_mask.to(sample.dtype)) * -10000.0
            encoder_attention_mask = encoder_attention_mask.unsqueeze(1)

        # 0. center input if necessary
        if self.center_input_sample:
            sample = 2 * sample - 1.0

        # 1. time
        t_emb = self.get_time_embed(sample=sample, timestep=timestep)
        emb = self.time_embedding(t_emb, timestep_cond)

        class_emb = self.get_class_embed(sample=sample, class_labels=class_labels)
        if class_emb is not None:
            if self.class_embeddings_concat:
                emb = torch.cat([emb, class_emb], dim=-1)
            else:
                emb = emb + class_emb

        aug_emb = self.get_aug_embed(emb=emb, encoder_hidden_states=encoder_hidden_states,
                                     added_cond_kwargs=added_cond_kwargs)

        emb = emb + aug_emb if aug_emb is not None else emb

        if self.time_embed_act is not None:
            emb = self.time_embed_act(emb)

        encoder_hidden_states = self.process_encoder_hidden_states(encoder_hidden_states=encoder_hidden_states,
                                                                   added_cond_kwargs=added_cond_kwargs)

        # 2. pre-process
        sample = self.conv_in(sample)

        # 3. down
        if cross_attention_kwargs is not None:
            cross_attention_kwargs = cross_attention_kwargs.copy()
            cross_attention_kwargs.pop("scale", 1.0)

        down_block_res_samples = (sample,)
        for downsample_block in self.down_blocks:
            if hasattr(downsample_block, "has_cross_attention") and downsample_block.has_cross_attention:
                additional_residuals = {}
                sample, res_samples = downsample_block(
                    hidden_states=sample,
                    temb=emb,
                    encoder_hidden_states=encoder_hidden_states,
                    attention_mask=attention_mask,
                    cross_attention_kwargs=cross_attention_kwargs,
                    encoder_attention_mask=encoder_attention_mask,
                    **additional_residuals,
                )
            else:
                sample, res_samples = downsample_block(hidden_states=sample, temb=emb)

            down_block_res_samples += res_samples

        # 4. mid
        if self.mid_block is not None:
            if hasattr(self.mid_block, "has_cross_attention") and self.mid_block.has_cross_attention:
                sample = self.mid_block(
                    sample,
                    emb,
                    encoder_hidden_states=encoder_hidden_states,
                    attention_mask=attention_mask,
                    cross_attention_kwargs=cross_attention_kwargs,
                    encoder_attention_mask=encoder_attention_mask,
                )
            else:
                sample = self.mid_block(sample, emb)

        # 5. up
        for i, upsample_block in enumerate(self.up_blocks):
            is_final_block = i == len(self.up_blocks) - 1

            res_samples = down_block_res_samples[-len(upsample_block.resnets):]
            down_block_res_samples = down_block_res_samples[: -len(upsample_block.resnets)]

            # if we have not reached the final block and need to forward the
            # upsample size, we do it here
            if not is_final_block and forward_upsample_size:
                upsample_size = down_block_res_samples[-1].shape[2:]

            if hasattr(upsample_block, "has_cross_attention") and upsample_block.has_cross_attention:
                sample = upsample_block(
                    hidden_states=sample,
                    temb=emb,
                    res_hidden_states_tuple=res_samples,
                    encoder_hidden_states=encoder_hidden_states,
                    cross_attention_kwargs=cross_attention_kwargs,
                    upsample_size=upsample_size,
                    attention_mask=attention_mask,
                    encoder_attention_mask=encoder_attention_mask,
                )
            else:
                sample = upsample_block(
                    hidden_states=sample,
                    temb=emb,
                    res_hidden_states_tuple=res_samples,
                    upsample_size=upsample_size,
                )

        # 6. post-process
        if self.conv_norm_out:
            sample = self.conv_norm_out(sample)
            sample = self.conv_act(sample)
        sample = self.conv_out(sample)

        if not return_dict:
            return (sample,)
        return sample


def build():
    # the checkpoint's config scaled down (see the docstring): widths 4/8/16, head width 4 at every level, MQA,
    # qk RMSNorm, ff_mult 3, separable-conv resnets, linear projections, text_proj_rms 12 -> 8, "time" addition
    return DreamLiteUNetModel(
        sample_size=4, in_channels=4, out_channels=4, block_out_channels=(4, 8, 16), attention_head_dim=(1, 2, 4),
        cross_attention_dim=8, layers_per_block=1, transformer_layers_per_block=(1, 1, 2),
        use_linear_projection=True, encoder_hid_dim=12, encoder_hid_dim_type="text_proj_rms",
        addition_embed_type="time", addition_time_embed_dim=4, projection_class_embeddings_input_dim=8,
        num_kv_heads=1, qk_norm="rms_norm", ff_mult=3, use_sep_conv=True, norm_num_groups=2)


HEIGHT = WIDTH = 32  # the image size: latents of HEIGHT / vae_scale_factor (8)
TXT_LEN, NEG_LEN = 7, 3  # the prompt's tokens after the template's 34 are dropped; the negative prompt's


def inputs(g):
    # encode_prompt(prompts=[negative_prompt, prompt]): Qwen3-VL last hidden states, pad_sequence'd with zeros,
    # the int64 0/1 mask; add_time_ids = [[width, height]]
    prompt_embeds = torch.randn((2, TXT_LEN, 12), generator=g)
    prompt_embeds[0, NEG_LEN:] = 0.0
    mask = torch.zeros((2, TXT_LEN), dtype=torch.long)
    mask[0, :NEG_LEN] = 1
    mask[1, :TXT_LEN] = 1
    return {"encoder_hidden_states": prompt_embeds, "encoder_attention_mask": mask,
            "time_ids": torch.tensor([[float(WIDTH), float(HEIGHT)]]),
            "noise": torch.randn((1, 4, HEIGHT // 8, WIDTH // 8), generator=g)}


GUIDANCE_SCALE = 7.5


def call(model, x, sigma, c):
    # DreamLitePipeline's "generate" step: the latents beside a zero image latent (by width), the CFG batch of 2
    image_latents = torch.zeros_like(x)
    latents_in = torch.cat([x] * 2)
    cond_img_in = torch.cat([image_latents] * 2)
    model_input = torch.cat([latents_in, cond_img_in], dim=3)
    time_ids_in = torch.cat([c["time_ids"]] * 2)
    t = torch.tensor(sigma * 1000.0, dtype=torch.float32, device=x.device)
    noise_pred = model(model_input, timestep=t.expand(model_input.shape[0]).to(x.dtype),
                       encoder_hidden_states=c["encoder_hidden_states"],
                       encoder_attention_mask=c["encoder_attention_mask"],
                       added_cond_kwargs={"time_ids": time_ids_in}, return_dict=False)[0]
    noise_pred = noise_pred[..., : x.shape[-1]]
    noise_pred_uncond, noise_pred_cond = noise_pred.chunk(2)
    noise_pred = noise_pred_uncond + GUIDANCE_SCALE * (noise_pred_cond - noise_pred_uncond)
    return noise_pred


PRODUCER = dict(
    library_source="replica of huggingface/diffusers unet_dreamlite.py@09e5dc029809 (forward: unet_2d_condition.py"
                   "@dbbfe89b9297) with transformer_2d_dreamlite.py@032412cf065d and the parts they import "
                   "(torch 1.13)",
    timestep="sigma*1000 (FlowMatchEulerDiscreteScheduler), t.expand(2).to(latents dtype) for the CFG batch",
    velocity="CFG combination uncond + 7.5*(cond - uncond) of the output's left half (the latent side of the "
             "width-joined diptych input), as is",
    note="DreamLiteUNetModel at widths 4/8/16: conv_in; down NoSelfAttn, NoSelfAttn, CrossAttn blocks (separable-"
         "conv ResnetBlock2DDreamLite, DreamLiteTransformer2DModel with linear proj, MQA + qk RMSNorm, GEGLU x3, "
         "Downsample2D); mid (resnet, 2-layer transformer, resnet); up CrossAttn, NoSelfAttn, plain (skips joined "
         "by channels, nearest x2 then conv); GroupNorm-SiLU-conv_out; time embedding Timesteps(4) -> Linear-SiLU-"
         "Linear plus the 'time' addition (time_ids [w, h] -> Timesteps(4) each -> 8 -> add_embedding); caption "
         "through Linear + RMSNorm (text_proj_rms); caption mask (1 - m)*-10000 over heads; input the latent "
         "joined by width to a zero image latent, CFG batch [uncond, cond]")

if __name__ == "__main__":
    capture("dreamlite_unet", build, inputs, call, sys.argv[1], PRODUCER)
