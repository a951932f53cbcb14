"""AnimateDiff's UNet (UNetMotionModel: SD 1.5's UNet with motion modules, as from_unet2d + MotionAdapter v2 build
it), reimplemented for torch 1.13 (no diffusers here), captured small in f32 on CPU.

Follows huggingface/diffusers src/diffusers/models/unets/unet_motion_model.py (UNetMotionModel's forward with no
addition embedding, no timestep_cond, no attention mask, no additional residuals, no IP-adapter, no FreeU;
AnimateDiffTransformer3D, CrossAttnDownBlockMotion, DownBlockMotion, UNetMidBlockCrossAttnMotion (use_motion_mid_block,
as MotionAdapter v2 has it), UpBlockMotion, CrossAttnUpBlockMotion) and the parts it imports: attention.py
(BasicTransformerBlock "layer_norm" with positional_embeddings "sinusoidal": its pos_embed, one
SinusoidalPositionalEmbedding module, added to norm1's output before attn1 and again to norm2's output before attn2;
double_self_attention, so attn2 is a second self-attention; GEGLU FeedForward), embeddings.py
(SinusoidalPositionalEmbedding: the table pe [1, max_seq_length, dim] built at init, sin on the even channels and cos
on the odd ones of position·exp(−ln(10⁴)·2i/dim), a persistent buffer (cast by from_pretrained's dtype, not redrawn),
x + pe[:, :frames]; Timesteps(flip_sin_to_cos, shift 0), TimestepEmbedding), attention_processor.py (Attention with
AttnProcessor2_0), resnet.py (ResnetBlock2D "default"), transformers/transformer_2d.py (Transformer2DModel, continuous,
1x1 conv projections as SD 1.5 has them), downsampling.py (Downsample2D "op": 3x3 conv of stride 2, padding 1) and
upsampling.py (Upsample2D: nearest ×2 then a 3x3 conv). The same module tree, parameter names and shapes, call
boundaries, and arithmetic line for line. The classes that are the same code upstream come from sd_unet.py
(ResnetBlock2D, Transformer2DModel, Downsample2D, Upsample2D; BasicTransformerBlock is subclassed under its own name to
add the pos_embed that positional_embeddings="sinusoidal" builds — registered after the block's other modules here,
first upstream, which changes no call) and parts.py (Timesteps, TimestepEmbedding; TimestepEmbedding is called without
its condition argument, None upstream). Stand-in for what torch 1.13 lacks: F.scaled_dot_product_attention (its math
path). AttnProcessor2_0's division by rescale_output_factor (1.0) is exact and is omitted as sd_unet.py omits it.

The motion module (AnimateDiffTransformer3D): the frames unfolded from the batch to [B, C, F, H, W], GroupNorm ε 1e-6
over each group's channels, frames and cells together, each cell's frames as a sequence [B·H·W, F, C], Linear proj_in,
the blocks (LayerNorm, + pe[:F], self-attention over the frames, residual; LayerNorm, + pe[:F], self-attention,
residual; LayerNorm, GEGLU, residual), Linear proj_out, back to [B·F, C, H, W], plus the input. One after every
resnet (down and up blocks: resnet, spatial transformer, motion module; the mid block: resnet, then spatial
transformer, motion module, resnet).

Tiny config (released SD 1.5 + mm_sd_v15_v2: block_out_channels (320, 640, 1280, 1280), CrossAttnDownBlockMotion ×3 +
DownBlockMotion, UpBlockMotion + CrossAttnUpBlockMotion ×3, layers_per_block 2, 8 spatial heads, 8 motion heads,
norm_num_groups 32, cross_attention_dim 768, motion_max_seq_length 32): block_out_channels (16, 32), down
(CrossAttnDownBlockMotion, DownBlockMotion), up (UpBlockMotion, CrossAttnUpBlockMotion), layers_per_block 2 as
released (up blocks of 3 resnets), 4 spatial heads and 4 motion heads (of 4 channels at width 16, of 8 at 32),
norm_num_groups 4, cross_attention_dim 16, motion_max_seq_length 32 as released (the table longer than the clip);
4 frames of 6x4 latents (non-square, 3x2 at the bottom; widths 32/64 on 8x8 made a 124 MB trace), 26 MB in f32.

Pipeline as AnimateDiffPipeline calls it without guidance: latents [B, 4, F, h, w]; t the scheduler's timestep, a
0-d int64 tensor (here round(σ·1000)); the text encoder's states [1, 6, 16] repeat_interleave'd per frame by the
pipeline (prompt_embeds.repeat_interleave(repeats=num_frames, dim=0): this UNet version no longer repeats them
itself), done here in the step, outside the model; the time embedding repeat_interleave'd per frame inside the
model; the noise prediction [B, 4, F, h, w] taken as the velocity as is (the capture's flow Euler loop).

usage: /usr/bin/python3 bench/unseen/replicas/unet_motion.py OUTDIR
REPLICA_DTYPE=bf16 [REPLICA_DEVICE=cuda] as run.py's replicas: the bf16 run, beside the f32 one.
"""
import math
import sys

import torch
import torch.nn as nn

from parts import TimestepEmbedding, Timesteps
from run import capture
from sd_unet import BasicTransformerBlock as _SDBasicTransformerBlock
from sd_unet import Downsample2D, ResnetBlock2D, Transformer2DModel, Upsample2D


class SinusoidalPositionalEmbedding(nn.Module):
    def __init__(self, embed_dim, max_seq_length=32):
        super().__init__()
        position = torch.arange(max_seq_length).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, embed_dim, 2) * (-math.log(10000.0) / embed_dim))
        pe = torch.zeros(1, max_seq_length, embed_dim)
        pe[0, :, 0::2] = torch.sin(position * div_term)
        pe[0, :, 1::2] = torch.cos(position * div_term)
        self.register_buffer("pe", pe)

    def forward(self, x):
        _, seq_length, _ = x.shape
        x = x + self.pe[:, :seq_length]
        return x


class BasicTransformerBlock(_SDBasicTransformerBlock):
    """attention.py's BasicTransformerBlock with norm_type "layer_norm", positional_embeddings "sinusoidal",
    double_self_attention (attn2 built without cross_attention_dim: a second self-attention), attention_bias False,
    activation_fn "geglu"."""

    def __init__(self, dim, num_attention_heads, attention_head_dim, num_positional_embeddings):
        super().__init__(dim, num_attention_heads, attention_head_dim, None)
        self.pos_embed = SinusoidalPositionalEmbedding(dim, max_seq_length=num_positional_embeddings)

    def forward(self, hidden_states, encoder_hidden_states=None):
        norm_hidden_states = self.norm1(hidden_states)
        if self.pos_embed is not None:
            norm_hidden_states = self.pos_embed(norm_hidden_states)
        attn_output = self.attn1(norm_hidden_states, encoder_hidden_states=None)
        hidden_states = attn_output + hidden_states
        if hidden_states.ndim == 4:
            hidden_states = hidden_states.squeeze(1)
        if self.attn2 is not None:
            norm_hidden_states = self.norm2(hidden_states)
            if self.pos_embed is not None:
                norm_hidden_states = self.pos_embed(norm_hidden_states)
            attn_output = self.attn2(norm_hidden_states, encoder_hidden_states=encoder_hidden_states)
            hidden_states = attn_output + hidden_states
        norm_hidden_states = self.norm3(hidden_states)
        ff_output = self.ff(norm_hidden_states)
        hidden_states = ff_output + hidden_states
        if hidden_states.ndim == 4:
            hidden_states = hidden_states.squeeze(1)
        return hidden_states


class AnimateDiffTransformer3D(nn.Module):
    def __init__(self, num_attention_heads=16, attention_head_dim=88, in_channels=None, num_layers=1,
                 norm_num_groups=32, num_positional_embeddings=None):
        super().__init__()
        self.num_attention_heads = num_attention_heads
        self.attention_head_dim = attention_head_dim
        inner_dim = num_attention_heads * attention_head_dim
        self.in_channels = in_channels
        self.norm = nn.GroupNorm(num_groups=norm_num_groups, num_channels=in_channels, eps=1e-6, affine=True)
        self.proj_in = nn.Linear(in_channels, inner_dim)
        self.transformer_blocks = nn.ModuleList([
            BasicTransformerBlock(inner_dim, num_attention_heads, attention_head_dim, num_positional_embeddings)
            for _ in range(num_layers)])
        self.proj_out = nn.Linear(inner_dim, in_channels)

    def forward(self, hidden_states, encoder_hidden_states=None, num_frames=1):
        batch_frames, channel, height, width = hidden_states.shape
        batch_size = batch_frames // num_frames
        residual = hidden_states
        hidden_states = hidden_states[None, :].reshape(batch_size, num_frames, channel, height, width)
        hidden_states = hidden_states.permute(0, 2, 1, 3, 4)
        hidden_states = self.norm(hidden_states)
        hidden_states = hidden_states.permute(0, 3, 4, 2, 1).reshape(batch_size * height * width, num_frames, channel)
        hidden_states = self.proj_in(hidden_states)
        for block in self.transformer_blocks:
            hidden_states = block(hidden_states, encoder_hidden_states=encoder_hidden_states)
        hidden_states = self.proj_out(hidden_states)
        hidden_states = (
            hidden_states[None, None, :]
            .reshape(batch_size, height, width, num_frames, channel)
            .permute(0, 3, 4, 1, 2)
            .contiguous()
        )
        hidden_states = hidden_states.reshape(batch_frames, channel, height, width)
        output = hidden_states + residual
        return output


def _motion(channels, heads, groups, max_seq):
    # num_attention_heads=temporal heads, attention_head_dim=channels // heads, one transformer layer
    return AnimateDiffTransformer3D(num_attention_heads=heads, attention_head_dim=channels // heads,
                                    in_channels=channels, num_layers=1, norm_num_groups=groups,
                                    num_positional_embeddings=max_seq)


def _spatial(channels, heads, cross, groups):
    # Transformer2DModel(num_attention_heads, channels // num_attention_heads, ...), use_linear_projection False
    return Transformer2DModel(heads, channels // heads, channels, cross, groups, linear=False, layers=1)


class DownBlockMotion(nn.Module):
    def __init__(self, in_channels, out_channels, temb_channels, num_layers, eps, groups, add_downsample,
                 temporal_heads, max_seq):
        super().__init__()
        resnets, motion_modules = [], []
        for i in range(num_layers):
            in_channels = in_channels if i == 0 else out_channels
            resnets.append(ResnetBlock2D(in_channels, out_channels, temb_channels, groups, eps=eps))
            motion_modules.append(_motion(out_channels, temporal_heads, groups, max_seq))
        self.resnets = nn.ModuleList(resnets)
        self.motion_modules = nn.ModuleList(motion_modules)
        self.downsamplers = nn.ModuleList([Downsample2D(out_channels)]) if add_downsample else None

    def forward(self, hidden_states, temb=None, num_frames=1):
        output_states = ()
        for resnet, motion_module in zip(self.resnets, self.motion_modules):
            hidden_states = resnet(hidden_states, temb)
            hidden_states = motion_module(hidden_states, num_frames=num_frames)
            output_states = output_states + (hidden_states,)
        if self.downsamplers is not None:
            for downsampler in self.downsamplers:
                hidden_states = downsampler(hidden_states)
            output_states = output_states + (hidden_states,)
        return hidden_states, output_states


class CrossAttnDownBlockMotion(nn.Module):
    def __init__(self, in_channels, out_channels, temb_channels, num_layers, eps, groups, heads, cross,
                 add_downsample, temporal_heads, max_seq):
        super().__init__()
        resnets, attentions, motion_modules = [], [], []
        self.has_cross_attention = True
        self.num_attention_heads = heads
        for i in range(num_layers):
            in_channels = in_channels if i == 0 else out_channels
            resnets.append(ResnetBlock2D(in_channels, out_channels, temb_channels, groups, eps=eps))
            attentions.append(_spatial(out_channels, heads, cross, groups))
            motion_modules.append(_motion(out_channels, temporal_heads, groups, max_seq))
        self.attentions = nn.ModuleList(attentions)
        self.resnets = nn.ModuleList(resnets)
        self.motion_modules = nn.ModuleList(motion_modules)
        self.downsamplers = nn.ModuleList([Downsample2D(out_channels)]) if add_downsample else None

    def forward(self, hidden_states, temb=None, encoder_hidden_states=None, num_frames=1):
        output_states = ()
        blocks = list(zip(self.resnets, self.attentions, self.motion_modules))
        for i, (resnet, attn, motion_module) in enumerate(blocks):
            hidden_states = resnet(hidden_states, temb)
            hidden_states = attn(hidden_states, encoder_hidden_states=encoder_hidden_states, return_dict=False)[0]
            hidden_states = motion_module(hidden_states, num_frames=num_frames)
            output_states = output_states + (hidden_states,)
        if self.downsamplers is not None:
            for downsampler in self.downsamplers:
                hidden_states = downsampler(hidden_states)
            output_states = output_states + (hidden_states,)
        return hidden_states, output_states


class CrossAttnUpBlockMotion(nn.Module):
    def __init__(self, in_channels, out_channels, prev_output_channel, temb_channels, num_layers, eps, groups, heads,
                 cross, add_upsample, temporal_heads, max_seq):
        super().__init__()
        resnets, attentions, motion_modules = [], [], []
        self.has_cross_attention = True
        self.num_attention_heads = heads
        for i in range(num_layers):
            res_skip_channels = in_channels if (i == num_layers - 1) else out_channels
            resnet_in_channels = prev_output_channel if i == 0 else out_channels
            resnets.append(ResnetBlock2D(resnet_in_channels + res_skip_channels, out_channels, temb_channels, groups,
                                         eps=eps))
            attentions.append(_spatial(out_channels, heads, cross, groups))
            motion_modules.append(_motion(out_channels, temporal_heads, groups, max_seq))
        self.attentions = nn.ModuleList(attentions)
        self.resnets = nn.ModuleList(resnets)
        self.motion_modules = nn.ModuleList(motion_modules)
        self.upsamplers = nn.ModuleList([Upsample2D(out_channels)]) if add_upsample else None

    def forward(self, hidden_states, res_hidden_states_tuple, temb=None, encoder_hidden_states=None,
                upsample_size=None, num_frames=1):
        for resnet, attn, motion_module in zip(self.resnets, self.attentions, self.motion_modules):
            res_hidden_states = res_hidden_states_tuple[-1]
            res_hidden_states_tuple = res_hidden_states_tuple[:-1]
            hidden_states = torch.cat([hidden_states, res_hidden_states], dim=1)
            hidden_states = resnet(hidden_states, temb)
            hidden_states = attn(hidden_states, encoder_hidden_states=encoder_hidden_states, return_dict=False)[0]
            hidden_states = motion_module(hidden_states, num_frames=num_frames)
        if self.upsamplers is not None:
            for upsampler in self.upsamplers:
                hidden_states = upsampler(hidden_states, upsample_size)
        return hidden_states


class UpBlockMotion(nn.Module):
    def __init__(self, in_channels, prev_output_channel, out_channels, temb_channels, num_layers, eps, groups,
                 add_upsample, temporal_heads, max_seq):
        super().__init__()
        resnets, motion_modules = [], []
        for i in range(num_layers):
            res_skip_channels = in_channels if (i == num_layers - 1) else out_channels
            resnet_in_channels = prev_output_channel if i == 0 else out_channels
            resnets.append(ResnetBlock2D(resnet_in_channels + res_skip_channels, out_channels, temb_channels, groups,
                                         eps=eps))
            motion_modules.append(_motion(out_channels, temporal_heads, groups, max_seq))
        self.resnets = nn.ModuleList(resnets)
        self.motion_modules = nn.ModuleList(motion_modules)
        self.upsamplers = nn.ModuleList([Upsample2D(out_channels)]) if add_upsample else None

    def forward(self, hidden_states, res_hidden_states_tuple, temb=None, upsample_size=None, num_frames=1):
        for resnet, motion_module in zip(self.resnets, self.motion_modules):
            res_hidden_states = res_hidden_states_tuple[-1]
            res_hidden_states_tuple = res_hidden_states_tuple[:-1]
            hidden_states = torch.cat([hidden_states, res_hidden_states], dim=1)
            hidden_states = resnet(hidden_states, temb)
            hidden_states = motion_module(hidden_states, num_frames=num_frames)
        if self.upsamplers is not None:
            for upsampler in self.upsamplers:
                hidden_states = upsampler(hidden_states, upsample_size)
        return hidden_states


class UNetMidBlockCrossAttnMotion(nn.Module):
    def __init__(self, in_channels, temb_channels, eps, groups, heads, cross, temporal_heads, max_seq, num_layers=1):
        super().__init__()
        self.has_cross_attention = True
        self.num_attention_heads = heads
        resnets = [ResnetBlock2D(in_channels, in_channels, temb_channels, groups, eps=eps)]
        attentions, motion_modules = [], []
        for _ in range(num_layers):
            attentions.append(_spatial(in_channels, heads, cross, groups))
            resnets.append(ResnetBlock2D(in_channels, in_channels, temb_channels, groups, eps=eps))
            motion_modules.append(_motion(in_channels, temporal_heads, groups, max_seq))
        self.attentions = nn.ModuleList(attentions)
        self.resnets = nn.ModuleList(resnets)
        self.motion_modules = nn.ModuleList(motion_modules)

    def forward(self, hidden_states, temb=None, encoder_hidden_states=None, num_frames=1):
        hidden_states = self.resnets[0](hidden_states, temb)
        for attn, resnet, motion_module in zip(self.attentions, self.resnets[1:], self.motion_modules):
            hidden_states = attn(hidden_states, encoder_hidden_states=encoder_hidden_states, return_dict=False)[0]
            hidden_states = motion_module(hidden_states, num_frames=num_frames)
            hidden_states = resnet(hidden_states, temb)
        return hidden_states


class UNetMotionModel(nn.Module):
    def __init__(self, in_channels=4, out_channels=4,
                 down_block_types=("CrossAttnDownBlockMotion", "DownBlockMotion"),
                 up_block_types=("UpBlockMotion", "CrossAttnUpBlockMotion"),
                 block_out_channels=(16, 32), layers_per_block=2, mid_block_scale_factor=1, norm_num_groups=4,
                 norm_eps=1e-5, cross_attention_dim=16, num_attention_heads=4, motion_max_seq_length=32,
                 motion_num_attention_heads=4):
        super().__init__()
        assert mid_block_scale_factor == 1  # sd_unet's ResnetBlock2D defaults output_scale_factor to 1
        self.conv_in = nn.Conv2d(in_channels, block_out_channels[0], kernel_size=3, padding=1)
        time_embed_dim = block_out_channels[0] * 4
        self.time_proj = Timesteps(block_out_channels[0], True, 0)
        self.time_embedding = TimestepEmbedding(block_out_channels[0], time_embed_dim)
        self.encoder_hid_proj = None
        self.down_blocks = nn.ModuleList([])
        self.up_blocks = nn.ModuleList([])
        n = len(down_block_types)
        num_attention_heads = (num_attention_heads,) * n
        layers_per_block = [layers_per_block] * n
        motion_num_attention_heads = (motion_num_attention_heads,) * n
        output_channel = block_out_channels[0]
        for i, down_block_type in enumerate(down_block_types):
            input_channel = output_channel
            output_channel = block_out_channels[i]
            is_final_block = i == len(block_out_channels) - 1
            if down_block_type == "CrossAttnDownBlockMotion":
                block = CrossAttnDownBlockMotion(input_channel, output_channel, time_embed_dim, layers_per_block[i],
                                                 norm_eps, norm_num_groups, num_attention_heads[i],
                                                 cross_attention_dim, not is_final_block,
                                                 motion_num_attention_heads[i], motion_max_seq_length)
            else:
                block = DownBlockMotion(input_channel, output_channel, time_embed_dim, layers_per_block[i], norm_eps,
                                        norm_num_groups, not is_final_block, motion_num_attention_heads[i],
                                        motion_max_seq_length)
            self.down_blocks.append(block)
        self.mid_block = UNetMidBlockCrossAttnMotion(block_out_channels[-1], time_embed_dim, norm_eps, norm_num_groups,
                                                     num_attention_heads[-1], cross_attention_dim,
                                                     motion_num_attention_heads[-1], motion_max_seq_length)
        self.num_upsamplers = 0
        reversed_block_out_channels = list(reversed(block_out_channels))
        reversed_num_attention_heads = list(reversed(num_attention_heads))
        reversed_layers_per_block = list(reversed(layers_per_block))
        reversed_motion_num_attention_heads = list(reversed(motion_num_attention_heads))
        output_channel = reversed_block_out_channels[0]
        for i, up_block_type in enumerate(up_block_types):
            is_final_block = i == len(block_out_channels) - 1
            prev_output_channel = output_channel
            output_channel = reversed_block_out_channels[i]
            input_channel = reversed_block_out_channels[min(i + 1, len(block_out_channels) - 1)]
            add_upsample = not is_final_block
            if add_upsample:
                self.num_upsamplers += 1
            if up_block_type == "CrossAttnUpBlockMotion":
                block = CrossAttnUpBlockMotion(input_channel, output_channel, prev_output_channel, time_embed_dim,
                                               reversed_layers_per_block[i] + 1, norm_eps, norm_num_groups,
                                               reversed_num_attention_heads[i], cross_attention_dim, add_upsample,
                                               reversed_motion_num_attention_heads[i], motion_max_seq_length)
            else:
                block = UpBlockMotion(input_channel, prev_output_channel, output_channel, time_embed_dim,
                                      reversed_layers_per_block[i] + 1, norm_eps, norm_num_groups, add_upsample,
                                      reversed_motion_num_attention_heads[i], motion_max_seq_length)
            self.up_blocks.append(block)
            prev_output_channel = output_channel
        self.conv_norm_out = nn.GroupNorm(num_channels=block_out_channels[0], num_groups=norm_num_groups, eps=norm_eps)
        self.conv_act = nn.SiLU()
        self.conv_out = nn.Conv2d(block_out_channels[0], out_channels, kernel_size=3, padding=1)

    @property
    def dtype(self):
        # ModelMixin.dtype: the first floating parameter's
        return next(p.dtype for p in self.parameters() if p.is_floating_point())

    def forward(self, sample, timestep, encoder_hidden_states, return_dict=False):
        default_overall_up_factor = 2 ** self.num_upsamplers
        forward_upsample_size = False
        upsample_size = None
        if any(s % default_overall_up_factor != 0 for s in sample.shape[-2:]):
            forward_upsample_size = True
        # 1. time
        timesteps = timestep
        if not torch.is_tensor(timesteps):
            dtype = torch.float64 if isinstance(timestep, float) else torch.int64
            timesteps = torch.tensor([timesteps], dtype=dtype, device=sample.device)
        elif len(timesteps.shape) == 0:
            timesteps = timesteps[None].to(sample.device)
        num_frames = sample.shape[2]
        timesteps = timesteps.expand(sample.shape[0])
        t_emb = self.time_proj(timesteps)
        t_emb = t_emb.to(dtype=self.dtype)
        emb = self.time_embedding(t_emb)
        aug_emb = None
        emb = emb if aug_emb is None else emb + aug_emb
        emb = emb.repeat_interleave(repeats=num_frames, dim=0)
        # 2. pre-process
        sample = sample.permute(0, 2, 1, 3, 4).reshape((sample.shape[0] * num_frames, -1) + sample.shape[3:])
        sample = self.conv_in(sample)
        # 3. down
        down_block_res_samples = (sample,)
        for downsample_block in self.down_blocks:
            if hasattr(downsample_block, "has_cross_attention") and downsample_block.has_cross_attention:
                sample, res_samples = downsample_block(hidden_states=sample, temb=emb,
                                                       encoder_hidden_states=encoder_hidden_states,
                                                       num_frames=num_frames)
            else:
                sample, res_samples = downsample_block(hidden_states=sample, temb=emb, num_frames=num_frames)
            down_block_res_samples += res_samples
        # 4. mid
        if self.mid_block is not None:
            sample = self.mid_block(sample, emb, encoder_hidden_states=encoder_hidden_states, num_frames=num_frames)
        # 5. up
        for i, upsample_block in enumerate(self.up_blocks):
            is_final_block = i == len(self.up_blocks) - 1
            res_samples = down_block_res_samples[-len(upsample_block.resnets):]
            down_block_res_samples = down_block_res_samples[: -len(upsample_block.resnets)]
            if not is_final_block and forward_upsample_size:
                upsample_size = down_block_res_samples[-1].shape[2:]
            if hasattr(upsample_block, "has_cross_attention") and upsample_block.has_cross_attention:
                sample = upsample_block(hidden_states=sample, temb=emb, res_hidden_states_tuple=res_samples,
                                        encoder_hidden_states=encoder_hidden_states, upsample_size=upsample_size,
                                        num_frames=num_frames)
            else:
                sample = upsample_block(hidden_states=sample, temb=emb, res_hidden_states_tuple=res_samples,
                                        upsample_size=upsample_size, num_frames=num_frames)
        # 6. post-process
        if self.conv_norm_out:
            sample = self.conv_norm_out(sample)
            sample = self.conv_act(sample)
        sample = self.conv_out(sample)
        sample = sample[None, :].reshape((-1, num_frames) + sample.shape[1:]).permute(0, 2, 1, 3, 4)
        return (sample,)


def build():
    return UNetMotionModel()


def inputs(g):
    return {"encoder_hidden_states": torch.randn((1, 6, 16), generator=g),
            "noise": torch.randn((1, 4, 4, 6, 4), generator=g)}


def call(model, x, sigma, c):
    # AnimateDiffPipeline: prompt_embeds repeat_interleave'd per frame (the pipeline's, once before its loop);
    # the scheduler's timestep t (a 0-d int64 tensor) as is; the noise prediction used as is
    num_frames = x.shape[2]
    prompt_embeds = c["encoder_hidden_states"].repeat_interleave(repeats=num_frames, dim=0)
    t = torch.tensor(int(round(sigma * 1000)), dtype=torch.int64, device=x.device)
    return model(x, t, encoder_hidden_states=prompt_embeds, return_dict=False)[0]


PRODUCER = dict(
    library_source="replica of huggingface/diffusers unet_motion_model.py (UNetMotionModel, AnimateDiff) and the "
                   "parts it imports (torch 1.13)",
    timestep="round(sigma*1000) int64 0-d (AnimateDiffPipeline: the scheduler's t), expanded to the batch",
    velocity="the noise prediction as is",
    note="AnimateDiff UNetMotionModel (SD 1.5 UNet + motion modules, motion mid block) at widths 16/32, 4 frames of "
         "6x4: frames folded into the batch; CrossAttnDownBlockMotion / DownBlockMotion / UNetMidBlockCrossAttnMotion "
         "/ UpBlockMotion / CrossAttnUpBlockMotion: ResnetBlock2D, Transformer2DModel (1x1 conv projections, "
         "cross-attention to the text repeated per frame by the pipeline), AnimateDiffTransformer3D (GroupNorm over "
         "channels·frames·cells, each cell's frames as a sequence, Linear proj_in, two self-attentions each after "
         "LayerNorm + a fixed sinusoidal table pe[:F] (one module called twice), GEGLU, Linear proj_out, plus input); "
         "skips joined by channels; time embedding repeat_interleave'd per frame")

if __name__ == "__main__":
    capture("unet_motion", build, inputs, call, sys.argv[1], PRODUCER)
