"""ModelScope text-to-video's UNet (UNet3DConditionModel, damo-vilab/text-to-video-ms-1.7b's layout),
reimplemented for torch 1.13 (no diffusers here), captured small in f32 on CPU.

Follows huggingface/diffusers src/diffusers/models/unets/unet_3d_condition.py (UNet3DConditionModel's forward with
no class labels, no timestep_cond, no attention mask, no additional residuals, no FreeU) and the parts it imports:
unets/unet_3d_blocks.py (CrossAttnDownBlock3D, DownBlock3D, UNetMidBlock3DCrossAttn, UpBlock3D, CrossAttnUpBlock3D:
each resnet followed by a TemporalConvLayer, each spatial Transformer2DModel by a TransformerTemporalModel; get_down_block
and get_up_block leave use_linear_projection True), resnet.py (ResnetBlock2D, TemporalConvLayer: four
GroupNorm-SiLU-(Dropout)-Conv3d (3, 1, 1) stages over the frames of [B, C, F, H, W], plus the input),
transformers/transformer_temporal.py (TransformerTemporalModel: the frames unfolded to [B, C, F, H, W], GroupNorm ε
1e-6 over each group's channels, frames and cells together, each cell's frames as a sequence [B·H·W, F, C], Linear
proj_in, BasicTransformerBlocks with double_self_attention (attn2 a second self-attention, not a cross-attention), Linear
proj_out, back to [B·F, C, H, W], plus the input), transformers/transformer_2d.py (Transformer2DModel, continuous, linear
projections), attention.py (BasicTransformerBlock "layer_norm", GEGLU FeedForward), attention_processor.py (Attention with
AttnProcessor2_0), downsampling.py / upsampling.py (Downsample2D "op": 3x3 conv of stride 2, padding 1; Upsample2D:
nearest ×2 then a 3x3 conv) and embeddings.py (Timesteps(flip_sin_to_cos, shift 0), TimestepEmbedding). The same
module tree, parameter names and shapes, call boundaries, and arithmetic line for line. The classes that are the same
code upstream come from sd_unet.py (ResnetBlock2D, Transformer2DModel, BasicTransformerBlock, Downsample2D, Upsample2D)
and parts.py (Timesteps, TimestepEmbedding; TimestepEmbedding is called without its condition argument, None upstream).
Stand-in for what torch 1.13 lacks: F.scaled_dot_product_attention (its math path). AttnProcessor2_0's division by
rescale_output_factor (1.0) is exact and is omitted as sd_unet.py omits it.

Upstream's quirks kept: the 3-D blocks build Transformer2DModel and TransformerTemporalModel with the arguments swapped
(num_attention_heads = width // attention_head_dim, attention_head_dim = attention_head_dim); transformer_in has 8 heads
of attention_head_dim, so its inner width differs from conv_in's (released 320 -> 512, here 16 -> 32); the frames are
folded into the batch (sample [B, C, F, H, W] permuted to [B·F, C, H, W]) and the time embedding and the text states
repeat_interleave'd per frame; every TemporalConvLayer and TransformerTemporalModel unfolds them again.

Tiny config (released: block_out_channels (320, 640, 1280, 1280), CrossAttnDownBlock3D ×3 + DownBlock3D, UpBlock3D +
CrossAttnUpBlock3D ×3, layers_per_block 2, attention_head_dim 64, norm_num_groups 32, cross_attention_dim 1024):
block_out_channels (16, 32), down (CrossAttnDownBlock3D, DownBlock3D), up (UpBlock3D, CrossAttnUpBlock3D),
layers_per_block 2 as released (up blocks of 3 resnets), attention_head_dim 4 (spatial and temporal heads: 4 of 4 at
width 16, 8 of 4 at 32; transformer_in 8 heads of 4, inner 32 for conv_in's 16), norm_num_groups 4,
cross_attention_dim 16; 3 frames of 6x4 latents (non-square, 3x2 at the bottom; 8x8 made a 57 MB trace), 25 MB in f32.

Pipeline as TextToVideoSDPipeline calls it without guidance: latents [B, 4, F, h, w]; t the scheduler's timestep, a 0-d
int64 tensor (here round(σ·1000)); encoder_hidden_states the text encoder's states [1, 6, 16]; the noise prediction
[B, 4, F, h, w] taken as the velocity as is (the capture's flow Euler loop).

usage: /usr/bin/python3 bench/unseen/replicas/unet3d.py OUTDIR
REPLICA_DTYPE=bf16 [REPLICA_DEVICE=cuda] as run.py's replicas: the bf16 run, beside the f32 one.
"""
import sys

import torch
import torch.nn as nn

from parts import TimestepEmbedding, Timesteps
from run import capture
from sd_unet import BasicTransformerBlock, Downsample2D, ResnetBlock2D, Transformer2DModel, Upsample2D


class TemporalConvLayer(nn.Module):
    def __init__(self, in_dim, out_dim=None, dropout=0.0, norm_num_groups=32):
        super().__init__()
        out_dim = out_dim or in_dim
        self.in_dim = in_dim
        self.out_dim = out_dim
        self.conv1 = nn.Sequential(
            nn.GroupNorm(norm_num_groups, in_dim),
            nn.SiLU(),
            nn.Conv3d(in_dim, out_dim, (3, 1, 1), padding=(1, 0, 0)),
        )
        self.conv2 = nn.Sequential(
            nn.GroupNorm(norm_num_groups, out_dim),
            nn.SiLU(),
            nn.Dropout(dropout),
            nn.Conv3d(out_dim, in_dim, (3, 1, 1), padding=(1, 0, 0)),
        )
        self.conv3 = nn.Sequential(
            nn.GroupNorm(norm_num_groups, out_dim),
            nn.SiLU(),
            nn.Dropout(dropout),
            nn.Conv3d(out_dim, in_dim, (3, 1, 1), padding=(1, 0, 0)),
        )
        self.conv4 = nn.Sequential(
            nn.GroupNorm(norm_num_groups, out_dim),
            nn.SiLU(),
            nn.Dropout(dropout),
            nn.Conv3d(out_dim, in_dim, (3, 1, 1), padding=(1, 0, 0)),
        )
        # zero out the last layer params, so the conv block is identity (the capture redraws every weight)
        nn.init.zeros_(self.conv4[-1].weight)
        nn.init.zeros_(self.conv4[-1].bias)

    def forward(self, hidden_states, num_frames=1):
        hidden_states = (
            hidden_states[None, :].reshape((-1, num_frames) + hidden_states.shape[1:]).permute(0, 2, 1, 3, 4)
        )
        identity = hidden_states
        hidden_states = self.conv1(hidden_states)
        hidden_states = self.conv2(hidden_states)
        hidden_states = self.conv3(hidden_states)
        hidden_states = self.conv4(hidden_states)
        hidden_states = identity + hidden_states
        hidden_states = hidden_states.permute(0, 2, 1, 3, 4).reshape(
            (hidden_states.shape[0] * hidden_states.shape[2], -1) + hidden_states.shape[3:]
        )
        return hidden_states


class TransformerTemporalModel(nn.Module):
    """activation_fn "geglu", attention_bias False, double_self_attention True: the blocks' attn2 is built without
    cross_attention_dim (a self-attention), whatever cross_attention_dim the 3-D blocks pass."""

    def __init__(self, num_attention_heads=16, attention_head_dim=88, in_channels=None, num_layers=1,
                 norm_num_groups=32, cross_attention_dim=None):
        super().__init__()
        self.num_attention_heads = num_attention_heads
        self.attention_head_dim = attention_head_dim
        inner_dim = num_attention_heads * attention_head_dim
        self.in_channels = in_channels
        self.norm = torch.nn.GroupNorm(num_groups=norm_num_groups, num_channels=in_channels, eps=1e-6, affine=True)
        self.proj_in = nn.Linear(in_channels, inner_dim)
        self.transformer_blocks = nn.ModuleList([
            BasicTransformerBlock(inner_dim, num_attention_heads, attention_head_dim, None)  # double_self_attention
            for _ in range(num_layers)])
        self.proj_out = nn.Linear(inner_dim, in_channels)

    def forward(self, hidden_states, encoder_hidden_states=None, num_frames=1, return_dict=False):
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
        return (output,)


def _spatial(width, nah, cross, groups):
    # Transformer2DModel(width // nah, nah, ...): upstream's positional order makes width // nah the head count
    return Transformer2DModel(width // nah, nah, width, cross, groups, linear=True, layers=1)


def _temporal(width, nah, cross, groups):
    return TransformerTemporalModel(width // nah, nah, in_channels=width, num_layers=1, norm_num_groups=groups,
                                    cross_attention_dim=cross)


class CrossAttnDownBlock3D(nn.Module):
    def __init__(self, in_channels, out_channels, temb_channels, num_layers, eps, groups, nah, cross, add_downsample):
        super().__init__()
        self.has_cross_attention = True
        self.num_attention_heads = nah
        resnets, temp_convs, attentions, temp_attentions = [], [], [], []
        for i in range(num_layers):
            in_channels = in_channels if i == 0 else out_channels
            resnets.append(ResnetBlock2D(in_channels, out_channels, temb_channels, groups, eps=eps))
            temp_convs.append(TemporalConvLayer(out_channels, out_channels, dropout=0.1, norm_num_groups=groups))
            attentions.append(_spatial(out_channels, nah, cross, groups))
            temp_attentions.append(_temporal(out_channels, nah, cross, groups))
        self.resnets = nn.ModuleList(resnets)
        self.temp_convs = nn.ModuleList(temp_convs)
        self.attentions = nn.ModuleList(attentions)
        self.temp_attentions = nn.ModuleList(temp_attentions)
        self.downsamplers = nn.ModuleList([Downsample2D(out_channels, padding=1)]) if add_downsample else None

    def forward(self, hidden_states, temb=None, encoder_hidden_states=None, num_frames=1):
        output_states = ()
        for resnet, temp_conv, attn, temp_attn in zip(self.resnets, self.temp_convs, self.attentions,
                                                      self.temp_attentions):
            hidden_states = resnet(hidden_states, temb)
            hidden_states = temp_conv(hidden_states, num_frames=num_frames)
            hidden_states = attn(hidden_states, encoder_hidden_states=encoder_hidden_states, return_dict=False)[0]
            hidden_states = temp_attn(hidden_states, num_frames=num_frames, return_dict=False)[0]
            output_states += (hidden_states,)
        if self.downsamplers is not None:
            for downsampler in self.downsamplers:
                hidden_states = downsampler(hidden_states)
            output_states += (hidden_states,)
        return hidden_states, output_states


class DownBlock3D(nn.Module):
    def __init__(self, in_channels, out_channels, temb_channels, num_layers, eps, groups, add_downsample):
        super().__init__()
        resnets, temp_convs = [], []
        for i in range(num_layers):
            in_channels = in_channels if i == 0 else out_channels
            resnets.append(ResnetBlock2D(in_channels, out_channels, temb_channels, groups, eps=eps))
            temp_convs.append(TemporalConvLayer(out_channels, out_channels, dropout=0.1, norm_num_groups=groups))
        self.resnets = nn.ModuleList(resnets)
        self.temp_convs = nn.ModuleList(temp_convs)
        self.downsamplers = nn.ModuleList([Downsample2D(out_channels, padding=1)]) if add_downsample else None

    def forward(self, hidden_states, temb=None, num_frames=1):
        output_states = ()
        for resnet, temp_conv in zip(self.resnets, self.temp_convs):
            hidden_states = resnet(hidden_states, temb)
            hidden_states = temp_conv(hidden_states, num_frames=num_frames)
            output_states += (hidden_states,)
        if self.downsamplers is not None:
            for downsampler in self.downsamplers:
                hidden_states = downsampler(hidden_states)
            output_states += (hidden_states,)
        return hidden_states, output_states


class UNetMidBlock3DCrossAttn(nn.Module):
    def __init__(self, in_channels, temb_channels, eps, groups, nah, cross, num_layers=1):
        super().__init__()
        self.has_cross_attention = True
        self.num_attention_heads = nah
        resnets = [ResnetBlock2D(in_channels, in_channels, temb_channels, groups, eps=eps)]
        temp_convs = [TemporalConvLayer(in_channels, in_channels, dropout=0.1, norm_num_groups=groups)]
        attentions, temp_attentions = [], []
        for _ in range(num_layers):
            attentions.append(_spatial(in_channels, nah, cross, groups))
            temp_attentions.append(_temporal(in_channels, nah, cross, groups))
            resnets.append(ResnetBlock2D(in_channels, in_channels, temb_channels, groups, eps=eps))
            temp_convs.append(TemporalConvLayer(in_channels, in_channels, dropout=0.1, norm_num_groups=groups))
        self.resnets = nn.ModuleList(resnets)
        self.temp_convs = nn.ModuleList(temp_convs)
        self.attentions = nn.ModuleList(attentions)
        self.temp_attentions = nn.ModuleList(temp_attentions)

    def forward(self, hidden_states, temb=None, encoder_hidden_states=None, num_frames=1):
        hidden_states = self.resnets[0](hidden_states, temb)
        hidden_states = self.temp_convs[0](hidden_states, num_frames=num_frames)
        for attn, temp_attn, resnet, temp_conv in zip(self.attentions, self.temp_attentions, self.resnets[1:],
                                                      self.temp_convs[1:]):
            hidden_states = attn(hidden_states, encoder_hidden_states=encoder_hidden_states, return_dict=False)[0]
            hidden_states = temp_attn(hidden_states, num_frames=num_frames, return_dict=False)[0]
            hidden_states = resnet(hidden_states, temb)
            hidden_states = temp_conv(hidden_states, num_frames=num_frames)
        return hidden_states


class CrossAttnUpBlock3D(nn.Module):
    def __init__(self, in_channels, out_channels, prev_output_channel, temb_channels, num_layers, eps, groups, nah,
                 cross, add_upsample):
        super().__init__()
        self.has_cross_attention = True
        self.num_attention_heads = nah
        resnets, temp_convs, attentions, temp_attentions = [], [], [], []
        for i in range(num_layers):
            res_skip_channels = in_channels if (i == num_layers - 1) else out_channels
            resnet_in_channels = prev_output_channel if i == 0 else out_channels
            resnets.append(ResnetBlock2D(resnet_in_channels + res_skip_channels, out_channels, temb_channels, groups,
                                         eps=eps))
            temp_convs.append(TemporalConvLayer(out_channels, out_channels, dropout=0.1, norm_num_groups=groups))
            attentions.append(_spatial(out_channels, nah, cross, groups))
            temp_attentions.append(_temporal(out_channels, nah, cross, groups))
        self.resnets = nn.ModuleList(resnets)
        self.temp_convs = nn.ModuleList(temp_convs)
        self.attentions = nn.ModuleList(attentions)
        self.temp_attentions = nn.ModuleList(temp_attentions)
        self.upsamplers = nn.ModuleList([Upsample2D(out_channels)]) if add_upsample else None

    def forward(self, hidden_states, res_hidden_states_tuple, temb=None, encoder_hidden_states=None,
                upsample_size=None, num_frames=1):
        for resnet, temp_conv, attn, temp_attn in zip(self.resnets, self.temp_convs, self.attentions,
                                                      self.temp_attentions):
            res_hidden_states = res_hidden_states_tuple[-1]
            res_hidden_states_tuple = res_hidden_states_tuple[:-1]
            hidden_states = torch.cat([hidden_states, res_hidden_states], dim=1)
            hidden_states = resnet(hidden_states, temb)
            hidden_states = temp_conv(hidden_states, num_frames=num_frames)
            hidden_states = attn(hidden_states, encoder_hidden_states=encoder_hidden_states, return_dict=False)[0]
            hidden_states = temp_attn(hidden_states, num_frames=num_frames, return_dict=False)[0]
        if self.upsamplers is not None:
            for upsampler in self.upsamplers:
                hidden_states = upsampler(hidden_states, upsample_size)
        return hidden_states


class UpBlock3D(nn.Module):
    def __init__(self, in_channels, prev_output_channel, out_channels, temb_channels, num_layers, eps, groups,
                 add_upsample):
        super().__init__()
        resnets, temp_convs = [], []
        for i in range(num_layers):
            res_skip_channels = in_channels if (i == num_layers - 1) else out_channels
            resnet_in_channels = prev_output_channel if i == 0 else out_channels
            resnets.append(ResnetBlock2D(resnet_in_channels + res_skip_channels, out_channels, temb_channels, groups,
                                         eps=eps))
            temp_convs.append(TemporalConvLayer(out_channels, out_channels, dropout=0.1, norm_num_groups=groups))
        self.resnets = nn.ModuleList(resnets)
        self.temp_convs = nn.ModuleList(temp_convs)
        self.upsamplers = nn.ModuleList([Upsample2D(out_channels)]) if add_upsample else None

    def forward(self, hidden_states, res_hidden_states_tuple, temb=None, upsample_size=None, num_frames=1):
        for resnet, temp_conv in zip(self.resnets, self.temp_convs):
            res_hidden_states = res_hidden_states_tuple[-1]
            res_hidden_states_tuple = res_hidden_states_tuple[:-1]
            hidden_states = torch.cat([hidden_states, res_hidden_states], dim=1)
            hidden_states = resnet(hidden_states, temb)
            hidden_states = temp_conv(hidden_states, num_frames=num_frames)
        if self.upsamplers is not None:
            for upsampler in self.upsamplers:
                hidden_states = upsampler(hidden_states, upsample_size)
        return hidden_states


class UNet3DConditionModel(nn.Module):
    def __init__(self, in_channels=4, out_channels=4,
                 down_block_types=("CrossAttnDownBlock3D", "DownBlock3D"),
                 up_block_types=("UpBlock3D", "CrossAttnUpBlock3D"),
                 block_out_channels=(16, 32), layers_per_block=2, mid_block_scale_factor=1, norm_num_groups=4,
                 norm_eps=1e-5, cross_attention_dim=16, attention_head_dim=4):
        super().__init__()
        num_attention_heads = attention_head_dim  # upstream's naming fix-up: num_attention_heads or attention_head_dim
        assert mid_block_scale_factor == 1  # sd_unet's ResnetBlock2D defaults output_scale_factor to 1
        self.conv_in = nn.Conv2d(in_channels, block_out_channels[0], kernel_size=3, padding=1)
        time_embed_dim = block_out_channels[0] * 4
        self.time_proj = Timesteps(block_out_channels[0], True, 0)
        self.time_embedding = TimestepEmbedding(block_out_channels[0], time_embed_dim)
        self.transformer_in = TransformerTemporalModel(num_attention_heads=8, attention_head_dim=attention_head_dim,
                                                       in_channels=block_out_channels[0], num_layers=1,
                                                       norm_num_groups=norm_num_groups)
        self.down_blocks = nn.ModuleList([])
        self.up_blocks = nn.ModuleList([])
        num_attention_heads = (num_attention_heads,) * len(down_block_types)
        output_channel = block_out_channels[0]
        for i, down_block_type in enumerate(down_block_types):
            input_channel = output_channel
            output_channel = block_out_channels[i]
            is_final_block = i == len(block_out_channels) - 1
            if down_block_type == "CrossAttnDownBlock3D":
                block = CrossAttnDownBlock3D(input_channel, output_channel, time_embed_dim, layers_per_block, norm_eps,
                                             norm_num_groups, num_attention_heads[i], cross_attention_dim,
                                             not is_final_block)
            else:
                block = DownBlock3D(input_channel, output_channel, time_embed_dim, layers_per_block, norm_eps,
                                    norm_num_groups, not is_final_block)
            self.down_blocks.append(block)
        self.mid_block = UNetMidBlock3DCrossAttn(block_out_channels[-1], time_embed_dim, norm_eps, norm_num_groups,
                                                 num_attention_heads[-1], cross_attention_dim)
        self.num_upsamplers = 0
        reversed_block_out_channels = list(reversed(block_out_channels))
        reversed_num_attention_heads = list(reversed(num_attention_heads))
        output_channel = reversed_block_out_channels[0]
        for i, up_block_type in enumerate(up_block_types):
            is_final_block = i == len(block_out_channels) - 1
            prev_output_channel = output_channel
            output_channel = reversed_block_out_channels[i]
            input_channel = reversed_block_out_channels[min(i + 1, len(block_out_channels) - 1)]
            add_upsample = not is_final_block
            if add_upsample:
                self.num_upsamplers += 1
            if up_block_type == "CrossAttnUpBlock3D":
                block = CrossAttnUpBlock3D(input_channel, output_channel, prev_output_channel, time_embed_dim,
                                           layers_per_block + 1, norm_eps, norm_num_groups,
                                           reversed_num_attention_heads[i], cross_attention_dim, add_upsample)
            else:
                block = UpBlock3D(input_channel, prev_output_channel, output_channel, time_embed_dim,
                                  layers_per_block + 1, norm_eps, norm_num_groups, add_upsample)
            self.up_blocks.append(block)
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
        emb = emb.repeat_interleave(num_frames, dim=0, output_size=emb.shape[0] * num_frames)
        encoder_hidden_states = encoder_hidden_states.repeat_interleave(
            num_frames, dim=0, output_size=encoder_hidden_states.shape[0] * num_frames)
        # 2. pre-process
        sample = sample.permute(0, 2, 1, 3, 4).reshape((sample.shape[0] * num_frames, -1) + sample.shape[3:])
        sample = self.conv_in(sample)
        sample = self.transformer_in(sample, num_frames=num_frames, return_dict=False)[0]
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
    return UNet3DConditionModel()


def inputs(g):
    return {"encoder_hidden_states": torch.randn((1, 6, 16), generator=g),
            "noise": torch.randn((1, 4, 3, 6, 4), generator=g)}


def call(model, x, sigma, c):
    # TextToVideoSDPipeline: the scheduler's timestep t (a 0-d int64 tensor) as is; the noise prediction used as is
    t = torch.tensor(int(round(sigma * 1000)), dtype=torch.int64, device=x.device)
    return model(x, t, encoder_hidden_states=c["encoder_hidden_states"], return_dict=False)[0]


PRODUCER = dict(
    library_source="replica of huggingface/diffusers unet_3d_condition.py and the parts it imports (torch 1.13)",
    timestep="round(sigma*1000) int64 0-d (TextToVideoSDPipeline: the scheduler's t), expanded to the batch",
    velocity="the noise prediction as is",
    note="ModelScope text-to-video UNet3DConditionModel at widths 16/32, 3 frames of 6x4: frames folded into the "
         "batch; conv_in, transformer_in (TransformerTemporalModel, 8 heads, inner 32 ≠ 16: GroupNorm over "
         "channels·frames·cells, each cell's frames as a sequence, two self-attentions + GEGLU); "
         "CrossAttnDownBlock3D / DownBlock3D / UNetMidBlock3DCrossAttn / UpBlock3D / CrossAttnUpBlock3D: "
         "ResnetBlock2D, TemporalConvLayer (4× GroupNorm-SiLU-Conv3d (3,1,1) over frames, plus input), "
         "Transformer2DModel (linear projections, cross-attention to the text repeated per frame), "
         "TransformerTemporalModel; skips joined by channels; time embedding repeat_interleave'd per frame")

if __name__ == "__main__":
    capture("unet3d", build, inputs, call, sys.argv[1], PRODUCER)
