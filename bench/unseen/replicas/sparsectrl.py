"""AnimateDiff SparseCtrl: SparseControlNetModel feeding AnimateDiff's UNetMotionModel, reimplemented for torch 1.13
(no diffusers here), captured small in f32 on CPU.

Follows huggingface/diffusers src/diffusers/models/controlnets/controlnet_sparsectrl.py at
c120032a4b0b4273f48337077ed7db2824996712 (SparseControlNetModel's __init__ and forward,
SparseControlNetConditioningEmbedding, zero_module) and, for the UNet, unets/unet_motion_model.py at
2fb4fd4059b13d84a8bf8c537fcb2029c6fdc879 (UNetMotionModel's forward with down_block_additional_residuals and
mid_block_additional_residual; use_motion_mid_block False: the mid block is unet_2d_blocks' UNetMidBlock2DCrossAttn,
called without num_frames), with the parts they import: the motion blocks (CrossAttnDownBlockMotion, DownBlockMotion,
AnimateDiffTransformer3D, the up blocks) from unet_motion.py, UNetMidBlock2DCrossAttn / ResnetBlock2D /
Transformer2DModel from sd_unet.py, the conditioning embedding from controlnet.py (ControlNetConditioningEmbedding:
the same code under SparseCtrl's name), Timesteps / TimestepEmbedding from parts.py (TimestepEmbedding called
without its condition argument, None upstream). The same module tree, parameter names and shapes, call boundaries,
and arithmetic line for line. What the ControlNet builds differently from the UNet's blocks is subclassed here under
upstream's names: its down blocks pass temporal_double_self_attention=False, so each motion module's
BasicTransformerBlock has neither norm2 nor attn2 (attention.py builds them only for a cross_attention_dim or
double_self_attention): LayerNorm, + pe[:F], one self-attention over the frames, residual; LayerNorm, GEGLU,
residual. The blocks' attention_mask and cross_attention_kwargs are None in this pipeline and not passed. Stand-in
for what torch 1.13 lacks: F.scaled_dot_product_attention (its math path).

The constructs it shows: a ControlNet that discards the noisy latents (sample = torch.zeros_like(sample): its
conv_in sees zeros, so only conv_in's bias survives) and is driven by the sparse condition alone: the control frames
placed at their frame indices in an otherwise zero clip, a 0/1 mask channel concatenated (concat_conditioning_mask),
each frame through SparseControlNetConditioningEmbedding (scribble checkpoints: use_simplified_condition_embedding
False; 3x3 convs with F.silu, three of stride 2, 8x down), reshaped (B, F, C, h, w) and added to the zero sample's
conv_in output, broadcasting the condition's batch of one over the guided batch of two; motion down blocks and a plain
cross-attention mid block; a zero-initialised 1x1 conv per down skip and on the mid output (redrawn here), each times
conditioning_scale; the UNet adds them to its own down skips and to its mid block's output. Frames are folded into
the batch everywhere ((B·F, C, h, w)), the time embedding repeat_interleave'd per frame in both models.

Configuration: the released pairing (guoyww/animatediff-sparsectrl-scribble with animatediff-motion-adapter-v1-5-3:
use_motion_mid_block False; SD 1.5: block_out_channels (320, 640, 1280, 1280), layers_per_block 2, 8 heads, 8 motion
heads, 32 groups, cross_attention_dim 768, motion_max_seq_length 32; conditioning_embedding_out_channels
(16, 32, 96, 256)) cut to widths (8, 16) with down (CrossAttnDownBlockMotion, DownBlockMotion) and up
(UpBlockMotion, CrossAttnUpBlockMotion), layers_per_block 1 (up blocks of 2 resnets), 2 spatial and 2 motion heads
(of 4 channels at width 8, of 8 at 16), norm_num_groups 4, cross_attention_dim 16, motion_max_seq_length 32 as
released, conditioning_embedding_out_channels (4, 4, 8, 8); 3 frames of 2x4 latents (1x2 at the bottom), the control
images 16x32. 8.3 MB in f32 (not a fixture): 1563 captured calls, about 2 MB of it the per-call index and archive
entries; without guidance 5.9 MB; on 4x6 latents 18.8 MB; widths (4, 8) (heads of 2 channels) 5.7 MB, but there the
search explains no attention output of width 4.

Pipeline as AnimateDiffSparseControlNetPipeline (pipelines/animatediff/pipeline_animatediff_sparsectrl.py at
6b0d0530a54655537ec5dd9d6fda125f7b9d474b) calls the two models with its default guidance_scale 7.5: prompt_embeds
= cat([negative (the CLIP states of ""), prompt]) [2, 6, 16], then repeat_interleave'd per frame (the line
AnimateDiffPipeline and the FreeNoise-era pipelines have, which this UNet version needs: it no longer repeats the
text itself; the stored copy of this pipeline lacks it, and without it the spatial cross-attention meets a batch of
2 text rows against 2·F maps); latent_model_input = cat([latents] * 2) (scale_model_input the identity);
prepare_image + prepare_sparse_control_conditioning once before the loop: 2 control images in [0, 1]
(VaeImageProcessor(do_normalize=False)) at controlnet_frame_indices [0, 2] of 3 frames, zeros elsewhere, the mask 1
on those frames; each step the ControlNet on (latent_model_input, t, prompt_embeds, controlnet_cond,
conditioning_mask, conditioning_scale = 0.8 (the default 1.0 would make the scale an identity), guess_mode False),
then the UNet on (latent_model_input, t, prompt_embeds, its residuals); t the scheduler's timestep, a 0-d int64 tensor
(here round(σ·1000)); noise_pred's halves mixed uncond + 7.5·(text − uncond), taken as the velocity as is (the
capture's flow Euler loop). The two models are held by one container module (the pipeline's attribute names: unet,
controlnet) that is never called itself, so that run.py's one-model capture records both.

usage: /usr/bin/python3 bench/unseen/replicas/sparsectrl.py OUTDIR
"""
import sys

import torch
import torch.nn as nn

import unet_motion
from controlnet import ControlNetConditioningEmbedding, zero_module
from parts import TimestepEmbedding, Timesteps
from run import capture
from sd_unet import UNetMidBlock2DCrossAttn


class BasicTransformerBlock(unet_motion.BasicTransformerBlock):
    """unet_motion.py's motion block; double_self_attention False (and no cross_attention_dim): norm2 and attn2
    None, as attention.py's BasicTransformerBlock leaves them for norm_type "layer_norm"."""

    def __init__(self, dim, num_attention_heads, attention_head_dim, num_positional_embeddings,
                 double_self_attention=True):
        super().__init__(dim, num_attention_heads, attention_head_dim, num_positional_embeddings)
        if not double_self_attention:
            self.norm2 = None
            self.attn2 = None


class AnimateDiffTransformer3D(unet_motion.AnimateDiffTransformer3D):
    """unet_motion.py's motion module with upstream's double_self_attention argument."""

    def __init__(self, num_attention_heads=16, attention_head_dim=88, in_channels=None, num_layers=1,
                 norm_num_groups=32, num_positional_embeddings=None, double_self_attention=True):
        super().__init__(num_attention_heads=num_attention_heads, attention_head_dim=attention_head_dim,
                         in_channels=in_channels, num_layers=num_layers, norm_num_groups=norm_num_groups,
                         num_positional_embeddings=num_positional_embeddings)
        if not double_self_attention:
            inner_dim = num_attention_heads * attention_head_dim
            self.transformer_blocks = nn.ModuleList([
                BasicTransformerBlock(inner_dim, num_attention_heads, attention_head_dim, num_positional_embeddings,
                                      double_self_attention=False)
                for _ in range(num_layers)])


def _motion(channels, heads, groups, max_seq, double_self_attention):
    return AnimateDiffTransformer3D(num_attention_heads=heads, attention_head_dim=channels // heads,
                                    in_channels=channels, num_layers=1, norm_num_groups=groups,
                                    num_positional_embeddings=max_seq, double_self_attention=double_self_attention)


class CrossAttnDownBlockMotion(unet_motion.CrossAttnDownBlockMotion):
    """unet_motion.py's block with temporal_double_self_attention (False in SparseControlNetModel)."""

    def __init__(self, in_channels, out_channels, temb_channels, num_layers, eps, groups, heads, cross,
                 add_downsample, temporal_heads, max_seq, temporal_double_self_attention=True):
        super().__init__(in_channels, out_channels, temb_channels, num_layers, eps, groups, heads, cross,
                         add_downsample, temporal_heads, max_seq)
        if not temporal_double_self_attention:
            self.motion_modules = nn.ModuleList([_motion(out_channels, temporal_heads, groups, max_seq, False)
                                                 for _ in range(num_layers)])


class DownBlockMotion(unet_motion.DownBlockMotion):
    """unet_motion.py's block with temporal_double_self_attention (False in SparseControlNetModel)."""

    def __init__(self, in_channels, out_channels, temb_channels, num_layers, eps, groups, add_downsample,
                 temporal_heads, max_seq, temporal_double_self_attention=True):
        super().__init__(in_channels, out_channels, temb_channels, num_layers, eps, groups, add_downsample,
                         temporal_heads, max_seq)
        if not temporal_double_self_attention:
            self.motion_modules = nn.ModuleList([_motion(out_channels, temporal_heads, groups, max_seq, False)
                                                 for _ in range(num_layers)])


class SparseControlNetConditioningEmbedding(ControlNetConditioningEmbedding):
    """The same code as controlnet.py's ControlNetConditioningEmbedding (conv_in, SiLU, pairs of 3x3 convs the
    second of stride 2 each followed by SiLU, zero-initialised conv_out)."""


class SparseControlNetModel(nn.Module):
    def __init__(self, in_channels=4, conditioning_channels=4, flip_sin_to_cos=True, freq_shift=0,
                 down_block_types=("CrossAttnDownBlockMotion", "DownBlockMotion"), block_out_channels=(8, 16),
                 layers_per_block=1, mid_block_scale_factor=1, norm_num_groups=4, norm_eps=1e-5,
                 cross_attention_dim=16, attention_head_dim=2, num_attention_heads=None,
                 conditioning_embedding_out_channels=(4, 8, 16, 32), global_pool_conditions=False,
                 controlnet_conditioning_channel_order="rgb", motion_max_seq_length=32, motion_num_attention_heads=2,
                 concat_conditioning_mask=True, use_simplified_condition_embedding=False):
        super().__init__()
        assert mid_block_scale_factor == 1  # sd_unet's ResnetBlock2D: output_scale_factor 1
        self.global_pool_conditions = global_pool_conditions
        self.controlnet_conditioning_channel_order = controlnet_conditioning_channel_order
        self.use_simplified_condition_embedding = use_simplified_condition_embedding
        num_attention_heads = num_attention_heads or attention_head_dim

        # input
        conv_in_kernel = 3
        conv_in_padding = (conv_in_kernel - 1) // 2
        self.conv_in = nn.Conv2d(in_channels, block_out_channels[0], kernel_size=conv_in_kernel,
                                 padding=conv_in_padding)

        if concat_conditioning_mask:
            conditioning_channels = conditioning_channels + 1

        self.concat_conditioning_mask = concat_conditioning_mask

        # control net conditioning embedding
        if use_simplified_condition_embedding:
            self.controlnet_cond_embedding = zero_module(
                nn.Conv2d(conditioning_channels, block_out_channels[0], kernel_size=3, padding=1))
        else:
            self.controlnet_cond_embedding = SparseControlNetConditioningEmbedding(
                conditioning_embedding_channels=block_out_channels[0],
                block_out_channels=conditioning_embedding_out_channels,
                conditioning_channels=conditioning_channels)

        # time
        time_embed_dim = block_out_channels[0] * 4
        self.time_proj = Timesteps(block_out_channels[0], flip_sin_to_cos, freq_shift)
        timestep_input_dim = block_out_channels[0]
        self.time_embedding = TimestepEmbedding(timestep_input_dim, time_embed_dim)

        self.down_blocks = nn.ModuleList([])
        self.controlnet_down_blocks = nn.ModuleList([])

        n = len(down_block_types)
        num_attention_heads = (num_attention_heads,) * n
        motion_num_attention_heads = (motion_num_attention_heads,) * n

        # down
        output_channel = block_out_channels[0]

        controlnet_block = nn.Conv2d(output_channel, output_channel, kernel_size=1)
        controlnet_block = zero_module(controlnet_block)
        self.controlnet_down_blocks.append(controlnet_block)

        for i, down_block_type in enumerate(down_block_types):
            input_channel = output_channel
            output_channel = block_out_channels[i]
            is_final_block = i == len(block_out_channels) - 1

            if down_block_type == "CrossAttnDownBlockMotion":
                down_block = CrossAttnDownBlockMotion(input_channel, output_channel, time_embed_dim, layers_per_block,
                                                      norm_eps, norm_num_groups, num_attention_heads[i],
                                                      cross_attention_dim, not is_final_block,
                                                      motion_num_attention_heads[i], motion_max_seq_length,
                                                      temporal_double_self_attention=False)
            elif down_block_type == "DownBlockMotion":
                down_block = DownBlockMotion(input_channel, output_channel, time_embed_dim, layers_per_block, norm_eps,
                                             norm_num_groups, not is_final_block, motion_num_attention_heads[i],
                                             motion_max_seq_length, temporal_double_self_attention=False)
            else:
                raise ValueError(down_block_type)

            self.down_blocks.append(down_block)

            for _ in range(layers_per_block):
                controlnet_block = nn.Conv2d(output_channel, output_channel, kernel_size=1)
                controlnet_block = zero_module(controlnet_block)
                self.controlnet_down_blocks.append(controlnet_block)

            if not is_final_block:
                controlnet_block = nn.Conv2d(output_channel, output_channel, kernel_size=1)
                controlnet_block = zero_module(controlnet_block)
                self.controlnet_down_blocks.append(controlnet_block)

        # mid
        mid_block_channels = block_out_channels[-1]

        controlnet_block = nn.Conv2d(mid_block_channels, mid_block_channels, kernel_size=1)
        controlnet_block = zero_module(controlnet_block)
        self.controlnet_mid_block = controlnet_block

        # UNetMidBlock2DCrossAttn(num_layers=1, transformer_layers_per_block 1, resnet_eps=norm_eps, "default")
        self.mid_block = UNetMidBlock2DCrossAttn(mid_block_channels, time_embed_dim, num_attention_heads[-1],
                                                 cross_attention_dim, norm_num_groups)

    def forward(self, sample, timestep, encoder_hidden_states, controlnet_cond, conditioning_scale=1.0,
                timestep_cond=None, attention_mask=None, cross_attention_kwargs=None, conditioning_mask=None,
                guess_mode=False, return_dict=True):
        sample_batch_size, sample_channels, sample_num_frames, sample_height, sample_width = sample.shape
        sample = torch.zeros_like(sample)

        # check channel order
        channel_order = self.controlnet_conditioning_channel_order

        if channel_order == "rgb":
            # in rgb order by default
            ...
        elif channel_order == "bgr":
            controlnet_cond = torch.flip(controlnet_cond, dims=[1])
        else:
            raise ValueError(f"unknown `controlnet_conditioning_channel_order`: {channel_order}")

        # prepare attention_mask
        if attention_mask is not None:
            attention_mask = (1 - attention_mask.to(sample.dtype)) * -10000.0
            attention_mask = attention_mask.unsqueeze(1)

        # 1. time
        timesteps = timestep
        if not torch.is_tensor(timesteps):
            dtype = torch.float64 if isinstance(timestep, float) else torch.int64
            timesteps = torch.tensor([timesteps], dtype=dtype, device=sample.device)
        elif len(timesteps.shape) == 0:
            timesteps = timesteps[None].to(sample.device)

        # broadcast to batch dimension in a way that's compatible with ONNX/Core ML
        timesteps = timesteps.expand(sample.shape[0])

        t_emb = self.time_proj(timesteps)

        # timesteps does not contain any weights and will always return f32 tensors
        t_emb = t_emb.to(dtype=sample.dtype)

        emb = self.time_embedding(t_emb)  # timestep_cond None
        emb = emb.repeat_interleave(sample_num_frames, dim=0, output_size=emb.shape[0] * sample_num_frames)

        # 2. pre-process
        batch_size, channels, num_frames, height, width = sample.shape

        sample = sample.permute(0, 2, 1, 3, 4).reshape(batch_size * num_frames, channels, height, width)
        sample = self.conv_in(sample)

        batch_frames, channels, height, width = sample.shape
        sample = sample[:, None].reshape(sample_batch_size, sample_num_frames, channels, height, width)

        if self.concat_conditioning_mask:
            controlnet_cond = torch.cat([controlnet_cond, conditioning_mask], dim=1)

        batch_size, channels, num_frames, height, width = controlnet_cond.shape
        controlnet_cond = controlnet_cond.permute(0, 2, 1, 3, 4).reshape(
            batch_size * num_frames, channels, height, width)
        controlnet_cond = self.controlnet_cond_embedding(controlnet_cond)
        batch_frames, channels, height, width = controlnet_cond.shape
        controlnet_cond = controlnet_cond[:, None].reshape(batch_size, num_frames, channels, height, width)

        sample = sample + controlnet_cond

        batch_size, num_frames, channels, height, width = sample.shape
        sample = sample.reshape(sample_batch_size * sample_num_frames, channels, height, width)

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
            sample = self.mid_block(sample, emb, encoder_hidden_states=encoder_hidden_states)

        # 5. Control net blocks
        controlnet_down_block_res_samples = ()

        for down_block_res_sample, controlnet_block in zip(down_block_res_samples, self.controlnet_down_blocks):
            down_block_res_sample = controlnet_block(down_block_res_sample)
            controlnet_down_block_res_samples = controlnet_down_block_res_samples + (down_block_res_sample,)

        down_block_res_samples = controlnet_down_block_res_samples
        mid_block_res_sample = self.controlnet_mid_block(sample)

        # 6. scaling
        if guess_mode and not self.global_pool_conditions:
            scales = torch.logspace(-1, 0, len(down_block_res_samples) + 1, device=sample.device)  # 0.1 to 1.0
            scales = scales * conditioning_scale
            down_block_res_samples = [sample * scale for sample, scale in zip(down_block_res_samples, scales)]
            mid_block_res_sample = mid_block_res_sample * scales[-1]  # last one
        else:
            down_block_res_samples = [sample * conditioning_scale for sample in down_block_res_samples]
            mid_block_res_sample = mid_block_res_sample * conditioning_scale

        if self.global_pool_conditions:
            down_block_res_samples = [
                torch.mean(sample, dim=(2, 3), keepdim=True) for sample in down_block_res_samples]
            mid_block_res_sample = torch.mean(mid_block_res_sample, dim=(2, 3), keepdim=True)

        return (down_block_res_samples, mid_block_res_sample)


class UNetMotionModel(unet_motion.UNetMotionModel):
    """unet_motion.py's UNet; use_motion_mid_block False (motion-adapter v1-5-3) builds UNetMidBlock2DCrossAttn in
    the mid block's place; the forward as upstream's with down_block_additional_residuals and
    mid_block_additional_residual."""

    def __init__(self, use_motion_mid_block=True, **kw):
        super().__init__(**kw)
        if not use_motion_mid_block:
            block_out_channels = kw["block_out_channels"]
            self.mid_block = UNetMidBlock2DCrossAttn(block_out_channels[-1], block_out_channels[0] * 4,
                                                     kw["num_attention_heads"], kw["cross_attention_dim"],
                                                     kw["norm_num_groups"])

    def forward(self, sample, timestep, encoder_hidden_states, timestep_cond=None, attention_mask=None,
                cross_attention_kwargs=None, added_cond_kwargs=None, down_block_additional_residuals=None,
                mid_block_additional_residual=None, return_dict=False):
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
        if down_block_additional_residuals is not None:
            new_down_block_res_samples = ()
            for down_block_res_sample, down_block_additional_residual in zip(
                    down_block_res_samples, down_block_additional_residuals):
                down_block_res_sample = down_block_res_sample + down_block_additional_residual
                new_down_block_res_samples += (down_block_res_sample,)
            down_block_res_samples = new_down_block_res_samples
        # 4. mid
        if self.mid_block is not None:
            # To support older versions of motion modules that don't have a mid_block
            if hasattr(self.mid_block, "motion_modules"):
                sample = self.mid_block(sample, emb, encoder_hidden_states=encoder_hidden_states,
                                        num_frames=num_frames)
            else:
                sample = self.mid_block(sample, emb, encoder_hidden_states=encoder_hidden_states)
        if mid_block_additional_residual is not None:
            sample = sample + mid_block_additional_residual
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
        # reshape to (batch, channel, framerate, width, height)
        sample = sample[None, :].reshape((-1, num_frames) + sample.shape[1:]).permute(0, 2, 1, 3, 4)
        return (sample,)


class AnimateDiffSparseControlNet(nn.Module):
    """The pipeline's two models under its attribute names (never called itself)."""

    def __init__(self):
        super().__init__()
        self.unet = UNetMotionModel(use_motion_mid_block=False, block_out_channels=(8, 16), layers_per_block=1,
                                    norm_num_groups=4, cross_attention_dim=16, num_attention_heads=2,
                                    motion_max_seq_length=32, motion_num_attention_heads=2)
        # scribble: conditioning_channels 3 (+1 mask), the conditioning-embedding convs
        self.controlnet = SparseControlNetModel(conditioning_channels=3, block_out_channels=(8, 16),
                                                layers_per_block=1, norm_num_groups=4, cross_attention_dim=16,
                                                attention_head_dim=2, motion_num_attention_heads=2,
                                                conditioning_embedding_out_channels=(4, 4, 8, 8),
                                                use_simplified_condition_embedding=False)


NUM_FRAMES = 3
CONTROLNET_FRAME_INDICES = [0, 2]
CONDITIONING_SCALE = 0.8  # controlnet_conditioning_scale (the pipeline's default 1.0)
GUIDANCE_SCALE = 7.5  # the pipeline's default


def prepare_sparse_control_conditioning(conditioning_frames, num_frames, controlnet_frame_indices):
    """AnimateDiffSparseControlNetPipeline.prepare_sparse_control_conditioning."""
    assert conditioning_frames.shape[2] >= len(controlnet_frame_indices)
    batch_size, channels, _, height, width = conditioning_frames.shape
    controlnet_cond = torch.zeros((batch_size, channels, num_frames, height, width), dtype=conditioning_frames.dtype)
    controlnet_cond_mask = torch.zeros((batch_size, 1, num_frames, height, width), dtype=conditioning_frames.dtype)
    controlnet_cond[:, :, controlnet_frame_indices] = conditioning_frames[:, :, : len(controlnet_frame_indices)]
    controlnet_cond_mask[:, :, controlnet_frame_indices] = 1
    return controlnet_cond, controlnet_cond_mask


def inputs(g):
    prompt_embeds = torch.randn((1, 6, 16), generator=g)
    negative_prompt_embeds = torch.randn((1, 6, 16), generator=g)  # the text encoder's states of ""
    # prepare_image (use_simplified_condition_embedding False): the images in [0, 1], unsqueeze(0), [b, c, f, h, w]
    image = torch.rand((len(CONTROLNET_FRAME_INDICES), 3, 16, 32), generator=g)
    conditioning_frames = image.unsqueeze(0).permute(0, 2, 1, 3, 4)
    controlnet_cond, controlnet_cond_mask = prepare_sparse_control_conditioning(
        conditioning_frames, NUM_FRAMES, CONTROLNET_FRAME_INDICES)
    return {"encoder_hidden_states": prompt_embeds, "negative_encoder_hidden_states": negative_prompt_embeds,
            "controlnet_cond": controlnet_cond, "conditioning_mask": controlnet_cond_mask,
            "noise": torch.randn((1, 4, NUM_FRAMES, 2, 4), generator=g)}


def call(model, x, sigma, c):
    # AnimateDiffSparseControlNetPipeline with guidance 7.5: [negative, prompt] repeated per frame, the latents
    # twice, the scheduler's t (a 0-d int64 tensor); the ControlNet then the UNet on the same input and t
    num_frames = x.shape[2]
    prompt_embeds = torch.cat([c["negative_encoder_hidden_states"], c["encoder_hidden_states"]])
    prompt_embeds = prompt_embeds.repeat_interleave(repeats=num_frames, dim=0)
    latent_model_input = torch.cat([x] * 2)
    t = torch.tensor(int(round(sigma * 1000)), dtype=torch.int64, device=x.device)
    down_block_res_samples, mid_block_res_sample = model.controlnet(
        latent_model_input, t, encoder_hidden_states=prompt_embeds, controlnet_cond=c["controlnet_cond"],
        conditioning_mask=c["conditioning_mask"], conditioning_scale=CONDITIONING_SCALE, guess_mode=False,
        return_dict=False)
    noise_pred = model.unet(latent_model_input, t, encoder_hidden_states=prompt_embeds,
                            down_block_additional_residuals=down_block_res_samples,
                            mid_block_additional_residual=mid_block_res_sample, return_dict=False)[0]
    noise_pred_uncond, noise_pred_text = noise_pred.chunk(2)
    return noise_pred_uncond + GUIDANCE_SCALE * (noise_pred_text - noise_pred_uncond)


PRODUCER = dict(
    library_source="replica of huggingface/diffusers controlnets/controlnet_sparsectrl.py@c120032a4b0b and "
                   "unets/unet_motion_model.py@2fb4fd4059b1 (AnimateDiff v3 + SparseCtrl scribble, torch 1.13); "
                   "pipeline_animatediff_sparsectrl.py@6b0d0530a546",
    timestep="round(sigma*1000) int64 0-d (the scheduler's t), the same t to the ControlNet and the UNet, expanded to "
             "the guided batch of 2",
    velocity="uncond + 7.5·(text − uncond) of the UNet's noise prediction halves",
    note="AnimateDiff UNetMotionModel (motion adapter v1-5-3: no motion mid block) with a SparseControlNetModel at "
         "widths 8/16, 3 frames of 2x4, classifier-free guidance 7.5 on a doubled batch, text repeated per frame; "
         "the ControlNet zeroes the noisy latents (conv_in of zeros), concatenates a 0/1 frame mask to a clip of 2 "
         "16x32 control images at frames 0 and 2 (zeros at frame 1), embeds each frame with 3x3 convs + SiLU (three "
         "of stride 2), adds it (batch 1) to the zero sample's conv_in output (batch 2); motion down blocks whose "
         "motion modules have one self-attention over the frames (no attn2), a plain cross-attention mid block; 1x1 "
         "convs on 4 down skips and the mid output, x0.8, added to the UNet's down skips and mid output")

if __name__ == "__main__":
    capture("sparsectrl", AnimateDiffSparseControlNet, inputs, call, sys.argv[1], PRODUCER)
