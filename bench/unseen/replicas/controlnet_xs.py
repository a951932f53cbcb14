"""ControlNet-XS: UNetControlNetXSModel (a Stable Diffusion UNet and a small control UNet run interleaved, block by
block, with zero-initialised 1x1 convolutions both ways), reimplemented for torch 1.13 (no diffusers here), captured
small in f32 on CPU.

Follows huggingface/diffusers src/diffusers/models/controlnets/controlnet_xs.py at
dfad05625ee185368e0e23cc9e93aaae77d49e85 line for line (UNetControlNetXSModel as from_unet builds it from a
UNet2DConditionModel and a ControlNetXSAdapter; ControlNetXSCrossAttnDownBlock2D, ControlNetXSCrossAttnMidBlock2D,
ControlNetXSCrossAttnUpBlock2D, make_zero_conv, find_largest_factor), with its imports: ControlNetConditioningEmbedding
(controlnet.py's replica, controlnets/controlnet.py), Timesteps and TimestepEmbedding (parts.py), and from
unets/unet_2d_blocks.py and resnet.py: ResnetBlock2D (its default eps 1e-6, which the XS blocks keep for every base
resnet and mid block, while the control down resnets pass eps 1e-5; groups_out for norm2; a 1x1 conv_shortcut where the
widths differ), Downsample2D (use_conv, out_channels, name "op": a 3x3 conv of stride 2, padding 1, from
channels to out_channels, parameters under `conv`), Upsample2D (sd_unet.py's), Transformer2DModel (sd_unet.py's, here
with use_linear_projection as SD 2.x's UNet, which the XS checkpoints are made from) and UNetMidBlock2DCrossAttn (with
in_channels != out_channels and resnet_groups_out for the control mid block: resnets[0] in -> out with groups /
groups_out, then Transformer2DModel on out_channels with norm groups resnet_groups_out, then resnets[1] out -> out).

The construct (each step, one forward of one module): the control image through ControlNetConditioningEmbedding (3x3
convs with F.silu, three of stride 2) gives guided_hint; base_conv_in and ctrl_conv_in both on the latents;
h_ctrl += guided_hint (in place); h_base = h_base + control_to_base_for_conv_in(h_ctrl)·conditioning_scale. In every
down block, for each of its two resnet(/attention) sub-blocks and for its downsampler: h_ctrl = cat([h_ctrl,
base_to_ctrl[j](h_base)], dim=1) (the base state, through a 1x1 conv, joined to the control state by channels); the
base sub-block on h_base; the control sub-block on the joined h_ctrl (so the control resnets and downsampler read
ctrl + base channels); h_base = h_base + ctrl_to_base[j](h_ctrl)·conditioning_scale; both states saved as skips. The
mid block the same once (base_midblock, ctrl_midblock on the joined state). The up blocks are the base UNet's (three
resnets each), each sub-block first adding in place `hidden_states += ctrl_to_base[j](ctrl skip)·conditioning_scale`
(the control skips, popped in reverse beside the base skips, each through a 1x1 conv to the base width) before
joining the base skip by channels. The base UNet's conv_norm_out, SiLU, conv_out give the noise prediction.
make_zero_conv zero-initialises every connection upstream; here, as every weight, they are redrawn, so that the
control signal flows.

Pipeline as StableDiffusionControlNetXSPipeline (src/diffusers/pipelines/controlnet_xs/pipeline_controlnet_xs.py at
9efbac516d1e735cdc3575226ff0fea2f6d3b4ac) calls it without guidance: self.unet(sample=latents, timestep=t,
encoder_hidden_states=prompt_embeds, controlnet_cond=image, conditioning_scale=controlnet_conditioning_scale,
cross_attention_kwargs=None, return_dict=True, apply_control=...).sample, apply_control = (i / len(timesteps) >=
control_guidance_start and (i + 1) / len(timesteps) <= control_guidance_end), True at every step with the defaults
(0, 1); controlnet_conditioning_scale 0.8 here (the pipeline's default 1.0, so that the scale is a real multiply);
the control image [1, 3, 64, 64] in [0, 1] (prepare_image leaves it so); t the scheduler's (here σ·1000, f32, one per
batch); the noise prediction taken as the velocity as is (the capture's flow Euler loop).

Tiny config: the base UNet at sd_unet.py's --small widths (block_out_channels (8, 16), down blocks
("CrossAttnDownBlock2D", "DownBlock2D"), up blocks ("UpBlock2D", "CrossAttnUpBlock2D"), two resnets a down block and
three an up block as the XS blocks fix them, GroupNorm of 4 groups, num_attention_heads (2, 4): head dim 4,
cross_attention_dim 16, use_linear_projection, upcast_attention False); the control model's ctrl_block_out_channels
(4, 8), ctrl_num_attention_heads (1, 2) (head dim 4), ctrl_max_norm_num_groups 4 (from_unet: the UNet's
norm_num_groups; find_largest_factor gives 4 for the 12- and 24-wide joined states),
ctrl_conditioning_embedding_out_channels (2, 4, 8, 8) (upstream (16, 32, 96, 256); narrow to keep the trace near 8 MB),
ctrl_learn_time_embedding False (the base time embedding only), 8x8 latents, text [1, 6, 16].
Stand-in for what torch 1.13 lacks: F.scaled_dot_product_attention (its math path, in sd_unet.py).

usage: /usr/bin/python3 bench/unseen/replicas/controlnet_xs.py OUTDIR
REPLICA_DTYPE=bf16 [REPLICA_DEVICE=cuda] as run.py's replicas: the bf16 run, beside the f32 one.
"""
import sys
from math import gcd

import torch
import torch.nn as nn

import sd_unet
from controlnet import ControlNetConditioningEmbedding
from parts import TimestepEmbedding, Timesteps
from run import capture
from sd_unet import Transformer2DModel, Upsample2D


class ResnetBlock2D(sd_unet.ResnetBlock2D):
    """resnet.py's ResnetBlock2D with groups_out (norm2's groups) and its default eps 1e-6."""

    def __init__(self, in_channels, out_channels, temb_channels, groups, groups_out=None, eps=1e-6):
        super().__init__(in_channels, out_channels, temb_channels, groups, eps=eps)
        if groups_out is None:
            groups_out = groups
        self.norm2 = nn.GroupNorm(num_groups=groups_out, num_channels=out_channels, eps=eps, affine=True)


class Downsample2D(nn.Module):
    """use_conv=True, padding 1, name "op": conv from channels to out_channels, stride 2."""

    def __init__(self, channels, use_conv=True, out_channels=None, padding=1, name="conv"):
        super().__init__()
        self.channels = channels
        self.out_channels = out_channels or channels
        self.use_conv = use_conv
        self.padding = padding
        self.conv = nn.Conv2d(self.channels, self.out_channels, kernel_size=3, stride=2, padding=padding, bias=True)

    def forward(self, hidden_states):
        assert hidden_states.shape[1] == self.channels
        return self.conv(hidden_states)


class UNetMidBlock2DCrossAttn(nn.Module):
    def __init__(self, in_channels, temb_channels, out_channels=None, resnet_eps=1e-6, resnet_groups=32,
                 resnet_groups_out=None, num_attention_heads=1, cross_attention_dim=1280,
                 use_linear_projection=False, num_layers=1, transformer_layers_per_block=1):
        super().__init__()
        out_channels = out_channels or in_channels
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.has_cross_attention = True
        self.num_attention_heads = num_attention_heads
        resnet_groups_out = resnet_groups_out or resnet_groups
        resnets = [ResnetBlock2D(in_channels, out_channels, temb_channels, resnet_groups, resnet_groups_out,
                                 eps=resnet_eps)]
        attentions = []
        for _ in range(num_layers):
            attentions.append(Transformer2DModel(num_attention_heads, out_channels // num_attention_heads,
                                                 out_channels, cross_attention_dim, resnet_groups_out,
                                                 use_linear_projection, transformer_layers_per_block))
            resnets.append(ResnetBlock2D(out_channels, out_channels, temb_channels, resnet_groups_out,
                                         eps=resnet_eps))
        self.attentions = nn.ModuleList(attentions)
        self.resnets = nn.ModuleList(resnets)

    def forward(self, hidden_states, temb=None, encoder_hidden_states=None):
        hidden_states = self.resnets[0](hidden_states, temb)
        for attn, resnet in zip(self.attentions, self.resnets[1:]):
            hidden_states = attn(hidden_states, encoder_hidden_states=encoder_hidden_states, return_dict=False)[0]
            hidden_states = resnet(hidden_states, temb)
        return hidden_states


def make_zero_conv(in_channels, out_channels=None):
    return zero_module(nn.Conv2d(in_channels, out_channels, 1, padding=0))


def zero_module(module):
    for p in module.parameters():
        nn.init.zeros_(p)
    return module


def find_largest_factor(number, max_factor):
    factor = max_factor
    if factor >= number:
        return number
    while factor != 0:
        residual = number % factor
        if residual == 0:
            return factor
        factor -= 1


class ControlNetXSCrossAttnDownBlock2D(nn.Module):
    def __init__(self, base_in_channels, base_out_channels, ctrl_in_channels, ctrl_out_channels, temb_channels,
                 norm_num_groups=32, ctrl_max_norm_num_groups=32, has_crossattn=True, transformer_layers_per_block=1,
                 base_num_attention_heads=1, ctrl_num_attention_heads=1, cross_attention_dim=1024,
                 add_downsample=True, upcast_attention=False, use_linear_projection=True):
        super().__init__()
        base_resnets = []
        base_attentions = []
        ctrl_resnets = []
        ctrl_attentions = []
        ctrl_to_base = []
        base_to_ctrl = []
        num_layers = 2  # only support sd + sdxl
        if isinstance(transformer_layers_per_block, int):
            transformer_layers_per_block = [transformer_layers_per_block] * num_layers
        for i in range(num_layers):
            base_in_channels = base_in_channels if i == 0 else base_out_channels
            ctrl_in_channels = ctrl_in_channels if i == 0 else ctrl_out_channels
            # Before the resnet/attention application, information is concatted from base to control.
            base_to_ctrl.append(make_zero_conv(base_in_channels, base_in_channels))
            base_resnets.append(ResnetBlock2D(base_in_channels, base_out_channels, temb_channels, norm_num_groups))
            ctrl_resnets.append(ResnetBlock2D(
                ctrl_in_channels + base_in_channels,  # information from base is concatted to ctrl
                ctrl_out_channels, temb_channels,
                groups=find_largest_factor(ctrl_in_channels + base_in_channels, max_factor=ctrl_max_norm_num_groups),
                groups_out=find_largest_factor(ctrl_out_channels, max_factor=ctrl_max_norm_num_groups),
                eps=1e-5))
            if has_crossattn:
                base_attentions.append(Transformer2DModel(
                    base_num_attention_heads, base_out_channels // base_num_attention_heads, base_out_channels,
                    cross_attention_dim, norm_num_groups, use_linear_projection, transformer_layers_per_block[i]))
                ctrl_attentions.append(Transformer2DModel(
                    ctrl_num_attention_heads, ctrl_out_channels // ctrl_num_attention_heads, ctrl_out_channels,
                    cross_attention_dim, find_largest_factor(ctrl_out_channels, max_factor=ctrl_max_norm_num_groups),
                    use_linear_projection, transformer_layers_per_block[i]))
            # After the resnet/attention application, information is added from control to base
            ctrl_to_base.append(make_zero_conv(ctrl_out_channels, base_out_channels))
        if add_downsample:
            # Before the downsampler application, information is concatted from base to control
            base_to_ctrl.append(make_zero_conv(base_out_channels, base_out_channels))
            self.base_downsamplers = Downsample2D(base_out_channels, use_conv=True, out_channels=base_out_channels,
                                                  name="op")
            self.ctrl_downsamplers = Downsample2D(ctrl_out_channels + base_out_channels, use_conv=True,
                                                  out_channels=ctrl_out_channels, name="op")
            # After the downsampler application, information is added from control to base
            ctrl_to_base.append(make_zero_conv(ctrl_out_channels, base_out_channels))
        else:
            self.base_downsamplers = None
            self.ctrl_downsamplers = None
        self.base_resnets = nn.ModuleList(base_resnets)
        self.ctrl_resnets = nn.ModuleList(ctrl_resnets)
        self.base_attentions = nn.ModuleList(base_attentions) if has_crossattn else [None] * num_layers
        self.ctrl_attentions = nn.ModuleList(ctrl_attentions) if has_crossattn else [None] * num_layers
        self.base_to_ctrl = nn.ModuleList(base_to_ctrl)
        self.ctrl_to_base = nn.ModuleList(ctrl_to_base)

    def forward(self, hidden_states_base, temb, encoder_hidden_states=None, hidden_states_ctrl=None,
                conditioning_scale=1.0, apply_control=True):
        h_base = hidden_states_base
        h_ctrl = hidden_states_ctrl
        base_output_states = ()
        ctrl_output_states = ()
        base_blocks = list(zip(self.base_resnets, self.base_attentions))
        ctrl_blocks = list(zip(self.ctrl_resnets, self.ctrl_attentions))
        for (b_res, b_attn), (c_res, c_attn), b2c, c2b in zip(
                base_blocks, ctrl_blocks, self.base_to_ctrl, self.ctrl_to_base):
            # concat base -> ctrl
            if apply_control:
                h_ctrl = torch.cat([h_ctrl, b2c(h_base)], dim=1)
            # apply base subblock
            h_base = b_res(h_base, temb)
            if b_attn is not None:
                h_base = b_attn(h_base, encoder_hidden_states=encoder_hidden_states, return_dict=False)[0]
            # apply ctrl subblock
            if apply_control:
                h_ctrl = c_res(h_ctrl, temb)
                if c_attn is not None:
                    h_ctrl = c_attn(h_ctrl, encoder_hidden_states=encoder_hidden_states, return_dict=False)[0]
            # add ctrl -> base
            if apply_control:
                h_base = h_base + c2b(h_ctrl) * conditioning_scale
            base_output_states = base_output_states + (h_base,)
            ctrl_output_states = ctrl_output_states + (h_ctrl,)
        if self.base_downsamplers is not None:  # if we have a base_downsampler, then also a ctrl_downsampler
            b2c = self.base_to_ctrl[-1]
            c2b = self.ctrl_to_base[-1]
            # concat base -> ctrl
            if apply_control:
                h_ctrl = torch.cat([h_ctrl, b2c(h_base)], dim=1)
            # apply base subblock
            h_base = self.base_downsamplers(h_base)
            # apply ctrl subblock
            if apply_control:
                h_ctrl = self.ctrl_downsamplers(h_ctrl)
            # add ctrl -> base
            if apply_control:
                h_base = h_base + c2b(h_ctrl) * conditioning_scale
            base_output_states = base_output_states + (h_base,)
            ctrl_output_states = ctrl_output_states + (h_ctrl,)
        return h_base, h_ctrl, base_output_states, ctrl_output_states


class ControlNetXSCrossAttnMidBlock2D(nn.Module):
    def __init__(self, base_channels, ctrl_channels, temb_channels=None, norm_num_groups=32,
                 ctrl_max_norm_num_groups=32, transformer_layers_per_block=1, base_num_attention_heads=1,
                 ctrl_num_attention_heads=1, cross_attention_dim=1024, upcast_attention=False,
                 use_linear_projection=True):
        super().__init__()
        # Before the midblock application, information is concatted from base to control.
        self.base_to_ctrl = make_zero_conv(base_channels, base_channels)
        self.base_midblock = UNetMidBlock2DCrossAttn(
            transformer_layers_per_block=transformer_layers_per_block, in_channels=base_channels,
            temb_channels=temb_channels, resnet_groups=norm_num_groups, cross_attention_dim=cross_attention_dim,
            num_attention_heads=base_num_attention_heads, use_linear_projection=use_linear_projection)
        self.ctrl_midblock = UNetMidBlock2DCrossAttn(
            transformer_layers_per_block=transformer_layers_per_block, in_channels=ctrl_channels + base_channels,
            out_channels=ctrl_channels, temb_channels=temb_channels,
            # number or norm groups must divide both in_channels and out_channels
            resnet_groups=find_largest_factor(gcd(ctrl_channels, ctrl_channels + base_channels),
                                              ctrl_max_norm_num_groups),
            cross_attention_dim=cross_attention_dim, num_attention_heads=ctrl_num_attention_heads,
            use_linear_projection=use_linear_projection)
        # After the midblock application, information is added from control to base
        self.ctrl_to_base = make_zero_conv(ctrl_channels, base_channels)

    def forward(self, hidden_states_base, temb, encoder_hidden_states, hidden_states_ctrl=None,
                conditioning_scale=1.0, apply_control=True):
        h_base = hidden_states_base
        h_ctrl = hidden_states_ctrl
        joint_args = {"temb": temb, "encoder_hidden_states": encoder_hidden_states}
        if apply_control:
            h_ctrl = torch.cat([h_ctrl, self.base_to_ctrl(h_base)], dim=1)  # concat base -> ctrl
        h_base = self.base_midblock(h_base, **joint_args)  # apply base mid block
        if apply_control:
            h_ctrl = self.ctrl_midblock(h_ctrl, **joint_args)  # apply ctrl mid block
            h_base = h_base + self.ctrl_to_base(h_ctrl) * conditioning_scale  # add ctrl -> base
        return h_base, h_ctrl


class ControlNetXSCrossAttnUpBlock2D(nn.Module):
    def __init__(self, in_channels, out_channels, prev_output_channel, ctrl_skip_channels, temb_channels,
                 norm_num_groups=32, resolution_idx=None, has_crossattn=True, transformer_layers_per_block=1,
                 num_attention_heads=1, cross_attention_dim=1024, add_upsample=True, upcast_attention=False,
                 use_linear_projection=True):
        super().__init__()
        resnets = []
        attentions = []
        ctrl_to_base = []
        num_layers = 3  # only support sd + sdxl
        self.has_cross_attention = has_crossattn
        self.num_attention_heads = num_attention_heads
        if isinstance(transformer_layers_per_block, int):
            transformer_layers_per_block = [transformer_layers_per_block] * num_layers
        for i in range(num_layers):
            res_skip_channels = in_channels if (i == num_layers - 1) else out_channels
            resnet_in_channels = prev_output_channel if i == 0 else out_channels
            ctrl_to_base.append(make_zero_conv(ctrl_skip_channels[i], resnet_in_channels))
            resnets.append(ResnetBlock2D(resnet_in_channels + res_skip_channels, out_channels, temb_channels,
                                         norm_num_groups))
            if has_crossattn:
                attentions.append(Transformer2DModel(
                    num_attention_heads, out_channels // num_attention_heads, out_channels, cross_attention_dim,
                    norm_num_groups, use_linear_projection, transformer_layers_per_block[i]))
        self.resnets = nn.ModuleList(resnets)
        self.attentions = nn.ModuleList(attentions) if has_crossattn else [None] * num_layers
        self.ctrl_to_base = nn.ModuleList(ctrl_to_base)
        if add_upsample:
            self.upsamplers = Upsample2D(out_channels, use_conv=True)
        else:
            self.upsamplers = None
        self.resolution_idx = resolution_idx

    def forward(self, hidden_states, res_hidden_states_tuple_base, res_hidden_states_tuple_ctrl, temb,
                encoder_hidden_states=None, conditioning_scale=1.0, upsample_size=None, apply_control=True):
        # FreeU not enabled: maybe_apply_freeu_to_subblock returns its inputs
        for resnet, attn, c2b, res_h_base, res_h_ctrl in zip(
                self.resnets, self.attentions, self.ctrl_to_base,
                reversed(res_hidden_states_tuple_base), reversed(res_hidden_states_tuple_ctrl)):
            if apply_control:
                hidden_states += c2b(res_h_ctrl) * conditioning_scale
            hidden_states = torch.cat([hidden_states, res_h_base], dim=1)
            hidden_states = resnet(hidden_states, temb)
            if attn is not None:
                hidden_states = attn(hidden_states, encoder_hidden_states=encoder_hidden_states,
                                     return_dict=False)[0]
        if self.upsamplers is not None:
            hidden_states = self.upsamplers(hidden_states, upsample_size)
        return hidden_states


class UNetControlNetXSModel(nn.Module):
    def __init__(self, down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
                 up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"), block_out_channels=(8, 16), norm_num_groups=4,
                 cross_attention_dim=16, transformer_layers_per_block=1, num_attention_heads=(2, 4),
                 upcast_attention=False, use_linear_projection=True, time_embedding_mix=1.0,
                 ctrl_conditioning_channels=3, ctrl_conditioning_embedding_out_channels=(2, 4, 8, 8),
                 ctrl_conditioning_channel_order="rgb", ctrl_learn_time_embedding=False,
                 ctrl_block_out_channels=(4, 8), ctrl_num_attention_heads=(1, 2), ctrl_max_norm_num_groups=4):
        super().__init__()
        self.ctrl_conditioning_channel_order = ctrl_conditioning_channel_order
        self.ctrl_learn_time_embedding = ctrl_learn_time_embedding
        self.time_embedding_mix = time_embedding_mix
        if not isinstance(transformer_layers_per_block, (list, tuple)):
            transformer_layers_per_block = [transformer_layers_per_block] * len(down_block_types)
        if not isinstance(cross_attention_dim, (list, tuple)):
            cross_attention_dim = [cross_attention_dim] * len(down_block_types)
        if not isinstance(num_attention_heads, (list, tuple)):
            num_attention_heads = [num_attention_heads] * len(down_block_types)
        if not isinstance(ctrl_num_attention_heads, (list, tuple)):
            ctrl_num_attention_heads = [ctrl_num_attention_heads] * len(down_block_types)
        base_num_attention_heads = num_attention_heads
        self.in_channels = 4
        # # Input
        self.base_conv_in = nn.Conv2d(4, block_out_channels[0], kernel_size=3, padding=1)
        self.controlnet_cond_embedding = ControlNetConditioningEmbedding(
            conditioning_embedding_channels=ctrl_block_out_channels[0],
            block_out_channels=ctrl_conditioning_embedding_out_channels,
            conditioning_channels=ctrl_conditioning_channels)
        self.ctrl_conv_in = nn.Conv2d(4, ctrl_block_out_channels[0], kernel_size=3, padding=1)
        self.control_to_base_for_conv_in = make_zero_conv(ctrl_block_out_channels[0], block_out_channels[0])
        # # Time
        time_embed_input_dim = block_out_channels[0]
        time_embed_dim = block_out_channels[0] * 4
        self.base_time_proj = Timesteps(block_out_channels[0], flip_sin_to_cos=True, downscale_freq_shift=0)
        self.base_time_embedding = TimestepEmbedding(time_embed_input_dim, time_embed_dim)
        self.ctrl_time_embedding = None  # ctrl_learn_time_embedding False
        self.base_add_time_proj = None  # addition_embed_type None (SD, not SDXL)
        self.base_add_embedding = None
        # # Create down blocks
        down_blocks = []
        base_out_channels = block_out_channels[0]
        ctrl_out_channels = ctrl_block_out_channels[0]
        for i, down_block_type in enumerate(down_block_types):
            base_in_channels = base_out_channels
            base_out_channels = block_out_channels[i]
            ctrl_in_channels = ctrl_out_channels
            ctrl_out_channels = ctrl_block_out_channels[i]
            has_crossattn = "CrossAttn" in down_block_type
            is_final_block = i == len(down_block_types) - 1
            down_blocks.append(ControlNetXSCrossAttnDownBlock2D(
                base_in_channels=base_in_channels, base_out_channels=base_out_channels,
                ctrl_in_channels=ctrl_in_channels, ctrl_out_channels=ctrl_out_channels, temb_channels=time_embed_dim,
                norm_num_groups=norm_num_groups, ctrl_max_norm_num_groups=ctrl_max_norm_num_groups,
                has_crossattn=has_crossattn, transformer_layers_per_block=transformer_layers_per_block[i],
                base_num_attention_heads=base_num_attention_heads[i],
                ctrl_num_attention_heads=ctrl_num_attention_heads[i], cross_attention_dim=cross_attention_dim[i],
                add_downsample=not is_final_block, upcast_attention=upcast_attention,
                use_linear_projection=use_linear_projection))
        # # Create mid block
        self.mid_block = ControlNetXSCrossAttnMidBlock2D(
            base_channels=block_out_channels[-1], ctrl_channels=ctrl_block_out_channels[-1],
            temb_channels=time_embed_dim, norm_num_groups=norm_num_groups,
            ctrl_max_norm_num_groups=ctrl_max_norm_num_groups,
            transformer_layers_per_block=transformer_layers_per_block[-1],
            base_num_attention_heads=base_num_attention_heads[-1],
            ctrl_num_attention_heads=ctrl_num_attention_heads[-1], cross_attention_dim=cross_attention_dim[-1],
            upcast_attention=upcast_attention, use_linear_projection=use_linear_projection)
        # # Create up blocks
        up_blocks = []
        rev_transformer_layers_per_block = list(reversed(transformer_layers_per_block))
        rev_num_attention_heads = list(reversed(base_num_attention_heads))
        rev_cross_attention_dim = list(reversed(cross_attention_dim))
        # The skip connection channels are the output of the conv_in and of all the down subblocks
        ctrl_skip_channels = [ctrl_block_out_channels[0]]
        for i, out_channels in enumerate(ctrl_block_out_channels):
            number_of_subblocks = 3 if i < len(ctrl_block_out_channels) - 1 else 2
            ctrl_skip_channels.extend([out_channels] * number_of_subblocks)
        reversed_block_out_channels = list(reversed(block_out_channels))
        out_channels = reversed_block_out_channels[0]
        for i, up_block_type in enumerate(up_block_types):
            prev_output_channel = out_channels
            out_channels = reversed_block_out_channels[i]
            in_channels = reversed_block_out_channels[min(i + 1, len(block_out_channels) - 1)]
            ctrl_skip_channels_ = [ctrl_skip_channels.pop() for _ in range(3)]
            has_crossattn = "CrossAttn" in up_block_type
            is_final_block = i == len(block_out_channels) - 1
            up_blocks.append(ControlNetXSCrossAttnUpBlock2D(
                in_channels=in_channels, out_channels=out_channels, prev_output_channel=prev_output_channel,
                ctrl_skip_channels=ctrl_skip_channels_, temb_channels=time_embed_dim, resolution_idx=i,
                has_crossattn=has_crossattn, transformer_layers_per_block=rev_transformer_layers_per_block[i],
                num_attention_heads=rev_num_attention_heads[i], cross_attention_dim=rev_cross_attention_dim[i],
                add_upsample=not is_final_block, upcast_attention=upcast_attention, norm_num_groups=norm_num_groups,
                use_linear_projection=use_linear_projection))
        self.down_blocks = nn.ModuleList(down_blocks)
        self.up_blocks = nn.ModuleList(up_blocks)
        self.base_conv_norm_out = nn.GroupNorm(num_channels=block_out_channels[0], num_groups=norm_num_groups)
        self.base_conv_act = nn.SiLU()
        self.base_conv_out = nn.Conv2d(block_out_channels[0], 4, kernel_size=3, padding=1)

    def forward(self, sample, timestep, encoder_hidden_states, controlnet_cond=None, conditioning_scale=1.0,
                cross_attention_kwargs=None, return_dict=True, apply_control=True):
        # check channel order
        if self.ctrl_conditioning_channel_order == "bgr":
            controlnet_cond = torch.flip(controlnet_cond, dims=[1])
        # 1. time
        timesteps = timestep
        if len(timesteps.shape) == 0:
            timesteps = timesteps[None].to(sample.device)
        timesteps = timesteps.expand(sample.shape[0])
        t_emb = self.base_time_proj(timesteps)
        t_emb = t_emb.to(dtype=sample.dtype)
        if self.ctrl_learn_time_embedding and apply_control:
            ctrl_temb = self.ctrl_time_embedding(t_emb)
            base_temb = self.base_time_embedding(t_emb)
            interpolation_param = self.time_embedding_mix ** 0.3
            temb = ctrl_temb * interpolation_param + base_temb * (1 - interpolation_param)
        else:
            temb = self.base_time_embedding(t_emb)
        # added time & text embeddings: addition_embed_type None
        aug_emb = None
        temb = temb + aug_emb if aug_emb is not None else temb
        # text embeddings
        cemb = encoder_hidden_states
        # Preparation
        h_ctrl = h_base = sample
        hs_base, hs_ctrl = [], []
        # Cross Control
        guided_hint = self.controlnet_cond_embedding(controlnet_cond)
        # 1 - conv in & down
        h_base = self.base_conv_in(h_base)
        h_ctrl = self.ctrl_conv_in(h_ctrl)
        if guided_hint is not None:
            h_ctrl += guided_hint
        if apply_control:
            h_base = h_base + self.control_to_base_for_conv_in(h_ctrl) * conditioning_scale  # add ctrl -> base
        hs_base.append(h_base)
        hs_ctrl.append(h_ctrl)
        for down in self.down_blocks:
            h_base, h_ctrl, residual_hb, residual_hc = down(
                hidden_states_base=h_base, hidden_states_ctrl=h_ctrl, temb=temb, encoder_hidden_states=cemb,
                conditioning_scale=conditioning_scale, apply_control=apply_control)
            hs_base.extend(residual_hb)
            hs_ctrl.extend(residual_hc)
        # 2 - mid
        h_base, h_ctrl = self.mid_block(
            hidden_states_base=h_base, hidden_states_ctrl=h_ctrl, temb=temb, encoder_hidden_states=cemb,
            conditioning_scale=conditioning_scale, apply_control=apply_control)
        # 3 - up
        for up in self.up_blocks:
            n_resnets = len(up.resnets)
            skips_hb = hs_base[-n_resnets:]
            skips_hc = hs_ctrl[-n_resnets:]
            hs_base = hs_base[:-n_resnets]
            hs_ctrl = hs_ctrl[:-n_resnets]
            h_base = up(hidden_states=h_base, res_hidden_states_tuple_base=skips_hb,
                        res_hidden_states_tuple_ctrl=skips_hc, temb=temb, encoder_hidden_states=cemb,
                        conditioning_scale=conditioning_scale, apply_control=apply_control)
        # 4 - conv out
        h_base = self.base_conv_norm_out(h_base)
        h_base = self.base_conv_act(h_base)
        h_base = self.base_conv_out(h_base)
        if not return_dict:
            return (h_base,)
        return {"sample": h_base}  # ControlNetXSOutput(sample=h_base)


CONDITIONING_SCALE = 0.8  # controlnet_conditioning_scale (the pipeline's default 1.0)
CONTROL_GUIDANCE_START, CONTROL_GUIDANCE_END = 0.0, 1.0
NUM_STEPS = 3  # len(timesteps): run.py's loop


def inputs(g):
    return {"encoder_hidden_states": torch.randn((1, 6, 16), generator=g),
            "controlnet_cond": torch.rand((1, 3, 64, 64), generator=g),
            "noise": torch.randn((1, 4, 8, 8), generator=g)}


def prepare(model, cond):
    cond["i"] = 0


def call(model, x, sigma, c):
    i = c["i"]
    c["i"] += 1
    t = torch.tensor([sigma * 1000.0], dtype=torch.float32, device=x.device)
    apply_control = i / NUM_STEPS >= CONTROL_GUIDANCE_START and (i + 1) / NUM_STEPS <= CONTROL_GUIDANCE_END
    return model(sample=x, timestep=t, encoder_hidden_states=c["encoder_hidden_states"],
                 controlnet_cond=c["controlnet_cond"], conditioning_scale=CONDITIONING_SCALE,
                 cross_attention_kwargs=None, return_dict=True, apply_control=apply_control)["sample"]


PRODUCER = dict(
    library_source="replica of huggingface/diffusers controlnets/controlnet_xs.py@dfad05625ee1 and "
                   "pipeline_controlnet_xs.py@9efbac516d1e (SD + ControlNet-XS, torch 1.13)",
    timestep="sigma*1000, f32 [1] expanded to the batch (the scheduler's t)",
    velocity="the fused model's noise prediction as is",
    note="UNetControlNetXSModel at base widths 8/16, control widths 4/8: ControlNetConditioningEmbedding (64x64 -> "
         "8x8) added in place to ctrl_conv_in's output; per down sub-block h_ctrl = cat[h_ctrl, 1x1conv(h_base)], "
         "base and control resnet/attention, h_base += 1x1conv(h_ctrl)·0.8; the same at the downsamplers and mid "
         "block; up blocks add 1x1conv(control skip)·0.8 in place before joining the base skip; GroupNorm eps 1e-6 "
         "in base resnets, 1e-5 in control down resnets; linear-projection transformers")

if __name__ == "__main__":
    capture("controlnet_xs", UNetControlNetXSModel, inputs, call, sys.argv[1], PRODUCER, prepare=prepare)
