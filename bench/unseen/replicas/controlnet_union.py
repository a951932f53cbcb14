"""Stable Diffusion XL with a ControlNet++ union model (ControlNetUnionModel feeding the SDXL UNet2DConditionModel),
reimplemented for torch 1.13 (no diffusers here), captured small in f32 on CPU.

Follows huggingface/diffusers src/diffusers/models/controlnets/controlnet_union.py at
06d4fb510fee2d769d19abf3b7eeb21d6dcf2590 line for line with the SDXL union configuration (xinsir's
controlnet-union-sdxl-1.0 layout: the SDXL UNet's down half, addition_embed_type "text_time", no class embedding,
no encoder_hid_proj, no attention mask, controlnet_conditioning_channel_order "rgb", no global_pool_conditions,
num_control_type 6, one ResidualAttentionBlock): QuickGELU (x·sigmoid(1.702·x)), ResidualAttentionMlp (c_fc,
QuickGELU, c_proj), ResidualAttentionBlock (torch's own nn.MultiheadAttention(d_model, n_head), not batch_first,
called as attn(x, x, x, need_weights=False, attn_mask=None)[0], pre-LayerNorm ln_1 / ln_2, two residuals) and
ControlNetUnionModel: the UNet's conv_in, time_proj, time_embedding and text_time add_time_proj/add_embedding; the
control type (a 0/1 vector over the 6 types) through control_type_proj (Timesteps(addition_time_embed_dim)) per
entry, reshaped to [B, 6·8], through control_add_embedding (TimestepEmbedding) and added to the time embedding
before the text_time one; each control image through the one shared controlnet_cond_embedding
(ControlNetConditioningEmbedding, controlnet.py's, imported), its spatial mean plus the task_embedding row of its
control type (a learned [6, C] table) as one token, times the condition's scale (several conditions, not
from_multi); a last token the spatial mean of conv_in's output; the tokens through transformer_layes (sic,
upstream's name); for each condition, spatial_ch_projs (a Linear, zero-initialised upstream, redrawn here) of its
token as a per-channel offset, controlnet_cond_fuser (sample·0.0, then += condition·scale + alpha·scale per
condition, in place) added to conv_in's output; then the down blocks and mid block, a 1x1 conv per down skip
(controlnet_down_blocks) and on the mid output (controlnet_mid_block); with several conditions and neither
guess_mode nor from_multi, upstream leaves the residuals unscaled (its step 6 scales only when len(control_type_idx)
== 1). nn.MultiheadAttention not being batch_first, the [B, n_cond + 1, C] tokens attend along the batch axis (the
sequence axis is B, the n_cond + 1 tokens are its batch), so no token meets another: each condition's token, and
with it its spatial_ch_projs offset, depends on its control image alone (with classifier-free guidance too, whose
two rows of a token are equal), and controlnet_cond_fuser is the same at every step of a request.

The UNet is sdxl_unet.py's UNet2DConditionModel (unets/unet_2d_condition.py at
00f354d14d00ed60cfce2ea7c5efceca2e4c4c3f, SDXL configuration) with its forward re-stated in a subclass with what
upstream's forward adds for a ControlNet (as controlnet.py's SD 1.5 subclass): down_block_additional_residuals added
one by one to the down path's saved skips before the mid block, mid_block_additional_residual added to the mid
block's output. The ControlNet's blocks are sd_unet.py's (CrossAttnDownBlock2D, DownBlock2D,
UNetMidBlock2DCrossAttn: upstream builds both models' with get_down_block and UNetMidBlock2DCrossAttn);
ControlNetConditioningEmbedding and zero_module are controlnet.py's (upstream imports them from .controlnet);
Timesteps and TimestepEmbedding parts.py's. Stand-in for what torch 1.13 lacks: F.scaled_dot_product_attention
(its math path, in sd_unet.py's Attention); nn.MultiheadAttention is torch 1.13's own (not batch_first: its
non-fast path, F.multi_head_attention_forward, in torch 1.13 and 2.x alike).

Pipeline as StableDiffusionXLControlNetUnionPipeline (pipelines/controlnet/pipeline_controlnet_union_sd_xl.py at
bf1ac4af243826d010f8eb66905e49828632da7f, whose control_type_repeat_factor is 1 without classifier-free guidance;
older versions repeat control_type twice and fail there) calls the two models without guidance (guidance_scale 1,
as sdxl_unet.py and controlnet.py): control_image a list of two images (control_mode [1, 3]: depth and canny), each
prepared as a [0, 1] map (VaeImageProcessor(do_normalize=False)); control_type = torch.zeros(6).scatter(0,
torch.tensor(control_mode), 1), reshaped to [1, 6], cast to prompt_embeds' dtype, .repeat(1, 1); prompt_embeds the
two text encoders' penultimate states joined by channels, add_text_embeds the pooled projection, add_time_ids (64,
64, 0, 0, 64, 64) (all drawn or built here as sdxl_unet.py does); each step t the scheduler's (here σ·1000, f32 [1],
expanded to the batch by the models), cond_scale = controlnet_conditioning_scale · controlnet_keep[i] = 0.8 · 1.0 (a
float, so the model makes it [0.8] * len(controlnet_cond)); self.controlnet(latents, t, encoder_hidden_states,
controlnet_cond=control_image, control_type=control_type, control_type_idx=control_mode, conditioning_scale,
guess_mode=False, added_cond_kwargs, return_dict=False); then self.unet(latents, t, ...,
down_block_additional_residuals, mid_block_additional_residual, added_cond_kwargs, return_dict=False)[0], the noise
prediction (epsilon) taken as the velocity as is (the capture's flow Euler loop, as sdxl_unet.py). The two models are
held by one container module (the pipeline's attribute names: controlnet, unet) that is never called itself, so that
run.py's one-model capture records both (transformer.controlnet..., transformer.unet...). The control images are
request inputs control_image_0 and control_image_1 (the capture records tensors), listed again in call.

Tiny config: the UNet as sdxl_unet.py (block_out_channels (8, 16, 32), attention_head_dim (1, 2, 4),
transformer_layers_per_block (1, 2, 3), 4 groups, cross_attention_dim 24, addition_time_embed_dim 8, time_embed_dim
32); the ControlNet with the same down half (as from_unet copies it; layers_per_block 1 as sd_unet.py's blocks build
them: 6 controlnet_down_blocks), conditioning_embedding_out_channels (4, 8, 16, 32) (upstream's config (16, 32, 96,
256): three stride-2 convs, 64x64 -> 8x8, as controlnet.py), num_trans_channel = num_proj_channel = 8
(block_out_channels[0], as upstream's 320), num_trans_head 2 (upstream 8), num_trans_layer 1; two control images
[1, 3, 64, 64], latents [1, 4, 8, 8], text [1, 6, 24], pooled [1, 16]. The trace is about 15 MB (sdxl_unet.py's own
is 7.7 MB; the two 64x64 control images through the conditioning embedding add 3.5 MB).

usage: /usr/bin/python3 bench/unseen/replicas/controlnet_union.py OUTDIR
REPLICA_DTYPE=bf16 [REPLICA_DEVICE=cuda] as run.py's replicas: the bf16 run, beside the f32 one.
"""
import sys

import torch
import torch.nn as nn

import sdxl_unet
from controlnet import ControlNetConditioningEmbedding, zero_module
from parts import TimestepEmbedding, Timesteps
from run import capture
from sd_unet import CrossAttnDownBlock2D, CrossAttnUpBlock2D, DownBlock2D, UNetMidBlock2DCrossAttn


class QuickGELU(nn.Module):
    def forward(self, input):
        return input * torch.sigmoid(1.702 * input)


class ResidualAttentionMlp(nn.Module):
    def __init__(self, d_model):
        super().__init__()
        self.c_fc = nn.Linear(d_model, d_model * 4)
        self.gelu = QuickGELU()
        self.c_proj = nn.Linear(d_model * 4, d_model)

    def forward(self, x):
        x = self.c_fc(x)
        x = self.gelu(x)
        x = self.c_proj(x)
        return x


class ResidualAttentionBlock(nn.Module):
    def __init__(self, d_model, n_head, attn_mask=None):
        super().__init__()
        self.attn = nn.MultiheadAttention(d_model, n_head)
        self.ln_1 = nn.LayerNorm(d_model)
        self.mlp = ResidualAttentionMlp(d_model)
        self.ln_2 = nn.LayerNorm(d_model)
        self.attn_mask = attn_mask

    def attention(self, x):
        self.attn_mask = self.attn_mask.to(dtype=x.dtype, device=x.device) if self.attn_mask is not None else None
        return self.attn(x, x, x, need_weights=False, attn_mask=self.attn_mask)[0]

    def forward(self, x):
        x = x + self.attention(self.ln_1(x))
        x = x + self.mlp(self.ln_2(x))
        return x


class ControlNetUnionModel(nn.Module):
    def __init__(self, in_channels=4, conditioning_channels=3, flip_sin_to_cos=True, freq_shift=0,
                 down_block_types=("DownBlock2D", "CrossAttnDownBlock2D", "CrossAttnDownBlock2D"),
                 block_out_channels=(8, 16, 32), layers_per_block=1, norm_num_groups=4, cross_attention_dim=24,
                 transformer_layers_per_block=(1, 2, 3), attention_head_dim=(1, 2, 4), use_linear_projection=True,
                 addition_embed_type="text_time", addition_time_embed_dim=8, projection_class_embeddings_input_dim=64,
                 controlnet_conditioning_channel_order="rgb", conditioning_embedding_out_channels=(4, 8, 16, 32),
                 global_pool_conditions=False, num_control_type=6, num_trans_channel=8, num_trans_head=2,
                 num_trans_layer=1, num_proj_channel=8):
        super().__init__()
        assert layers_per_block == 1  # sd_unet.py's down blocks hold one resnet
        num_attention_heads = attention_head_dim
        self.controlnet_conditioning_channel_order = controlnet_conditioning_channel_order
        self.global_pool_conditions = global_pool_conditions
        self.addition_embed_type = addition_embed_type
        if isinstance(transformer_layers_per_block, int):
            transformer_layers_per_block = [transformer_layers_per_block] * len(down_block_types)
        # input
        self.conv_in = nn.Conv2d(in_channels, block_out_channels[0], kernel_size=3, padding=1)
        # time
        time_embed_dim = block_out_channels[0] * 4
        self.time_proj = Timesteps(block_out_channels[0], flip_sin_to_cos, freq_shift)
        timestep_input_dim = block_out_channels[0]
        self.time_embedding = TimestepEmbedding(timestep_input_dim, time_embed_dim)
        self.encoder_hid_proj = None
        self.class_embedding = None
        if addition_embed_type == "text_time":
            self.add_time_proj = Timesteps(addition_time_embed_dim, flip_sin_to_cos, freq_shift)
            self.add_embedding = TimestepEmbedding(projection_class_embeddings_input_dim, time_embed_dim)
        # control net conditioning embedding
        self.controlnet_cond_embedding = ControlNetConditioningEmbedding(
            conditioning_embedding_channels=block_out_channels[0],
            block_out_channels=conditioning_embedding_out_channels,
            conditioning_channels=conditioning_channels)
        task_scale_factor = num_trans_channel ** 0.5
        self.task_embedding = nn.Parameter(task_scale_factor * torch.randn(num_control_type, num_trans_channel))
        self.transformer_layes = nn.ModuleList(
            [ResidualAttentionBlock(num_trans_channel, num_trans_head) for _ in range(num_trans_layer)])
        self.spatial_ch_projs = zero_module(nn.Linear(num_trans_channel, num_proj_channel))
        self.control_type_proj = Timesteps(addition_time_embed_dim, flip_sin_to_cos, freq_shift)
        self.control_add_embedding = TimestepEmbedding(addition_time_embed_dim * num_control_type, time_embed_dim)

        self.down_blocks = nn.ModuleList([])
        self.controlnet_down_blocks = nn.ModuleList([])
        if isinstance(num_attention_heads, int):
            num_attention_heads = (num_attention_heads,) * len(down_block_types)
        # down
        output_channel = block_out_channels[0]
        controlnet_block = nn.Conv2d(output_channel, output_channel, kernel_size=1)
        controlnet_block = zero_module(controlnet_block)
        self.controlnet_down_blocks.append(controlnet_block)
        for i, down_block_type in enumerate(down_block_types):
            input_channel = output_channel
            output_channel = block_out_channels[i]
            is_final_block = i == len(block_out_channels) - 1
            if down_block_type == "CrossAttnDownBlock2D":
                down_block = CrossAttnDownBlock2D(input_channel, output_channel, time_embed_dim,
                                                  num_attention_heads[i], cross_attention_dim, norm_num_groups,
                                                  not is_final_block, use_linear_projection,
                                                  transformer_layers_per_block[i])
            else:
                down_block = DownBlock2D(input_channel, output_channel, time_embed_dim, norm_num_groups,
                                         not is_final_block)
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
        mid_block_channel = block_out_channels[-1]
        controlnet_block = nn.Conv2d(mid_block_channel, mid_block_channel, kernel_size=1)
        controlnet_block = zero_module(controlnet_block)
        self.controlnet_mid_block = controlnet_block
        self.mid_block = UNetMidBlock2DCrossAttn(mid_block_channel, time_embed_dim, num_attention_heads[-1],
                                                 cross_attention_dim, norm_num_groups, use_linear_projection,
                                                 transformer_layers_per_block[-1])

    def forward(self, sample, timestep, encoder_hidden_states, controlnet_cond, control_type, control_type_idx,
                conditioning_scale=1.0, class_labels=None, timestep_cond=None, attention_mask=None,
                added_cond_kwargs=None, cross_attention_kwargs=None, from_multi=False, guess_mode=False,
                return_dict=True):
        if isinstance(conditioning_scale, float):
            conditioning_scale = [conditioning_scale] * len(controlnet_cond)
        # check channel order
        channel_order = self.controlnet_conditioning_channel_order
        if channel_order != "rgb":
            raise ValueError(f"unknown `controlnet_conditioning_channel_order`: {channel_order}")
        # prepare attention_mask
        if attention_mask is not None:
            attention_mask = (1 - attention_mask.to(sample.dtype)) * -10000.0
            attention_mask = attention_mask.unsqueeze(1)
        # 1. time
        timesteps = timestep
        if len(timesteps.shape) == 0:
            timesteps = timesteps[None].to(sample.device)
        # broadcast to batch dimension in a way that's compatible with ONNX/Core ML
        timesteps = timesteps.expand(sample.shape[0])
        t_emb = self.time_proj(timesteps)
        # timesteps does not contain any weights and will always return f32 tensors
        t_emb = t_emb.to(dtype=sample.dtype)
        emb = self.time_embedding(t_emb)
        aug_emb = None
        if self.addition_embed_type is not None:
            if self.addition_embed_type == "text_time":
                text_embeds = added_cond_kwargs.get("text_embeds")
                time_ids = added_cond_kwargs.get("time_ids")
                time_embeds = self.add_time_proj(time_ids.flatten())
                time_embeds = time_embeds.reshape((text_embeds.shape[0], -1))
                add_embeds = torch.concat([text_embeds, time_embeds], dim=-1)
                add_embeds = add_embeds.to(emb.dtype)
                aug_emb = self.add_embedding(add_embeds)
        control_embeds = self.control_type_proj(control_type.flatten())
        control_embeds = control_embeds.reshape((t_emb.shape[0], -1))
        control_embeds = control_embeds.to(emb.dtype)
        control_emb = self.control_add_embedding(control_embeds)
        emb = emb + control_emb
        emb = emb + aug_emb if aug_emb is not None else emb
        # 2. pre-process
        sample = self.conv_in(sample)
        inputs = []
        condition_list = []
        for cond, control_idx, scale in zip(controlnet_cond, control_type_idx, conditioning_scale):
            condition = self.controlnet_cond_embedding(cond)
            feat_seq = torch.mean(condition, dim=(2, 3))
            feat_seq = feat_seq + self.task_embedding[control_idx]
            if from_multi or len(control_type_idx) == 1:
                inputs.append(feat_seq.unsqueeze(1))
                condition_list.append(condition)
            else:
                inputs.append(feat_seq.unsqueeze(1) * scale)
                condition_list.append(condition * scale)
        condition = sample
        feat_seq = torch.mean(condition, dim=(2, 3))
        inputs.append(feat_seq.unsqueeze(1))
        condition_list.append(condition)
        x = torch.cat(inputs, dim=1)
        for layer in self.transformer_layes:
            x = layer(x)
        controlnet_cond_fuser = sample * 0.0
        for (idx, condition), scale in zip(enumerate(condition_list[:-1]), conditioning_scale):
            alpha = self.spatial_ch_projs(x[:, idx])
            alpha = alpha.unsqueeze(-1).unsqueeze(-1)
            if from_multi or len(control_type_idx) == 1:
                controlnet_cond_fuser += condition + alpha
            else:
                controlnet_cond_fuser += condition + alpha * scale
        sample = sample + controlnet_cond_fuser
        # 3. down
        down_block_res_samples = (sample,)
        for downsample_block in self.down_blocks:
            if isinstance(downsample_block, CrossAttnDownBlock2D):  # has_cross_attention
                sample, res_samples = downsample_block(hidden_states=sample, temb=emb,
                                                       encoder_hidden_states=encoder_hidden_states)
            else:
                sample, res_samples = downsample_block(hidden_states=sample, temb=emb)
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
            if from_multi or len(control_type_idx) == 1:
                scales = scales * conditioning_scale[0]
            down_block_res_samples = [sample * scale for sample, scale in zip(down_block_res_samples, scales)]
            mid_block_res_sample = mid_block_res_sample * scales[-1]  # last one
        elif from_multi or len(control_type_idx) == 1:
            down_block_res_samples = [sample * conditioning_scale[0] for sample in down_block_res_samples]
            mid_block_res_sample = mid_block_res_sample * conditioning_scale[0]
        if self.global_pool_conditions:
            down_block_res_samples = [torch.mean(sample, dim=(2, 3), keepdim=True) for sample in down_block_res_samples]
            mid_block_res_sample = torch.mean(mid_block_res_sample, dim=(2, 3), keepdim=True)
        return (down_block_res_samples, mid_block_res_sample)


class UNet2DConditionModel(sdxl_unet.UNet2DConditionModel):
    """sdxl_unet.py's SDXL UNet, its forward as upstream's with down_block_additional_residuals and
    mid_block_additional_residual (no T2I-Adapter intrablock residuals)."""

    def forward(self, sample, timestep, encoder_hidden_states, added_cond_kwargs=None,
                down_block_additional_residuals=None, mid_block_additional_residual=None, return_dict=False):
        default_overall_up_factor = 2 ** self.num_upsamplers
        forward_upsample_size = False
        upsample_size = None
        for dim in sample.shape[-2:]:
            if dim % default_overall_up_factor != 0:
                forward_upsample_size = True
                break
        # 1. time
        t_emb = self.get_time_embed(sample=sample, timestep=timestep)
        emb = self.time_embedding(t_emb)
        aug_emb = self.get_aug_embed(emb=emb, encoder_hidden_states=encoder_hidden_states,
                                     added_cond_kwargs=added_cond_kwargs)
        emb = emb + aug_emb if aug_emb is not None else emb
        # 2. pre-process
        sample = self.conv_in(sample)
        # 3. down
        is_controlnet = mid_block_additional_residual is not None and down_block_additional_residuals is not None
        down_block_res_samples = (sample,)
        for downsample_block in self.down_blocks:
            if isinstance(downsample_block, CrossAttnDownBlock2D):
                sample, res_samples = downsample_block(hidden_states=sample, temb=emb,
                                                       encoder_hidden_states=encoder_hidden_states)
            else:
                sample, res_samples = downsample_block(hidden_states=sample, temb=emb)
            down_block_res_samples += res_samples
        if is_controlnet:
            new_down_block_res_samples = ()
            for down_block_res_sample, down_block_additional_residual in zip(
                    down_block_res_samples, down_block_additional_residuals):
                down_block_res_sample = down_block_res_sample + down_block_additional_residual
                new_down_block_res_samples = new_down_block_res_samples + (down_block_res_sample,)
            down_block_res_samples = new_down_block_res_samples
        # 4. mid
        sample = self.mid_block(sample, emb, encoder_hidden_states=encoder_hidden_states)
        if is_controlnet:
            sample = sample + mid_block_additional_residual
        # 5. up
        for i, upsample_block in enumerate(self.up_blocks):
            is_final_block = i == len(self.up_blocks) - 1
            res_samples = down_block_res_samples[-len(upsample_block.resnets):]
            down_block_res_samples = down_block_res_samples[: -len(upsample_block.resnets)]
            if not is_final_block and forward_upsample_size:
                upsample_size = down_block_res_samples[-1].shape[2:]
            if isinstance(upsample_block, CrossAttnUpBlock2D):
                sample = upsample_block(hidden_states=sample, temb=emb, res_hidden_states_tuple=res_samples,
                                        encoder_hidden_states=encoder_hidden_states, upsample_size=upsample_size)
            else:
                sample = upsample_block(hidden_states=sample, temb=emb, res_hidden_states_tuple=res_samples,
                                        upsample_size=upsample_size)
        # 6. post-process
        sample = self.conv_norm_out(sample)
        sample = self.conv_act(sample)
        sample = self.conv_out(sample)
        return (sample,)


class StableDiffusionXLControlNetUnion(nn.Module):
    """The pipeline's two models under its attribute names (never called itself)."""

    def __init__(self):
        super().__init__()
        self.unet = UNet2DConditionModel()
        self.controlnet = ControlNetUnionModel()


HEIGHT = WIDTH = 64  # the image size: latents of HEIGHT / vae_scale_factor (8)
CONTROL_MODE = [1, 3]  # depth, canny: one control image each
CONDITIONING_SCALE = 0.8  # controlnet_conditioning_scale (the pipeline's default 1.0)


def inputs(g):
    # encode_prompt: the two text encoders' penultimate states joined by channels, the pooled projection of the
    # second; _get_add_time_ids; prepare_image: each control image a [0, 1] map; control_type as the pipeline
    # builds it (control_type_repeat_factor 1 without guidance)
    prompt_embeds_list = [torch.randn((1, 6, 8), generator=g), torch.randn((1, 6, 16), generator=g)]
    images = [torch.rand((1, 3, HEIGHT, WIDTH), generator=g) for _ in CONTROL_MODE]
    control_type = torch.zeros(6).scatter(0, torch.tensor(CONTROL_MODE), 1)
    control_type = control_type.reshape(1, -1).to(dtype=torch.float32).repeat(1, 1)
    return {"encoder_hidden_states": torch.concat(prompt_embeds_list, dim=-1),
            "text_embeds": torch.randn((1, 16), generator=g),
            "time_ids": torch.tensor([list((HEIGHT, WIDTH) + (0, 0) + (HEIGHT, WIDTH))], dtype=torch.float32),
            **{f"control_image_{i}": image for i, image in enumerate(images)},
            "control_type": control_type,
            "noise": torch.randn((1, 4, HEIGHT // 8, WIDTH // 8), generator=g)}


def call(model, x, sigma, c):
    # StableDiffusionXLControlNetUnionPipeline, no guidance: the ControlNet then the UNet on the same latents and t
    t = torch.tensor([sigma * 1000.0], dtype=torch.float32, device=x.device)
    added_cond_kwargs = {"text_embeds": c["text_embeds"], "time_ids": c["time_ids"]}
    control_image = [c[f"control_image_{i}"] for i in range(len(CONTROL_MODE))]
    cond_scale = CONDITIONING_SCALE * 1.0  # controlnet_keep[i]: 1.0 (control_guidance_start 0, end 1)
    down_block_res_samples, mid_block_res_sample = model.controlnet(
        x, t, encoder_hidden_states=c["encoder_hidden_states"], controlnet_cond=control_image,
        control_type=c["control_type"], control_type_idx=CONTROL_MODE, conditioning_scale=cond_scale,
        guess_mode=False, added_cond_kwargs=added_cond_kwargs, return_dict=False)
    return model.unet(x, t, encoder_hidden_states=c["encoder_hidden_states"],
                      down_block_additional_residuals=down_block_res_samples,
                      mid_block_additional_residual=mid_block_res_sample, added_cond_kwargs=added_cond_kwargs,
                      return_dict=False)[0]


PRODUCER = dict(
    library_source="replica of huggingface/diffusers controlnets/controlnet_union.py@06d4fb510fee and "
                   "unets/unet_2d_condition.py@00f354d14d00 (SDXL + ControlNet++ union, torch 1.13)",
    timestep="sigma*1000, f32 [1] expanded to the batch, the same t to the ControlNet and the UNet",
    velocity="the UNet's noise prediction as is",
    note="SDXL UNet (widths 8/16/32) with a ControlNetUnionModel over two control images (control_mode [1, 3]): "
         "control_type 0/1 vector through Timesteps(8) per entry and control_add_embedding, added to the time "
         "embedding with the text_time one; each image through the shared conditioning embedding, its spatial mean "
         "+ task_embedding[mode] as a token (x scale 0.8), plus the spatial mean of conv_in's output; one "
         "ResidualAttentionBlock (nn.MultiheadAttention not batch_first: attends along the batch axis of 1; QuickGELU "
         "MLP); per condition spatial_ch_projs(token) as a channel offset, condition*0.8 + alpha*0.8 summed into "
         "conv_in's output; the down half and mid block; 1x1 convs on 6 skips and the mid output, unscaled (two "
         "conditions); the UNet adds them; each step the ControlNet then the UNet")

if __name__ == "__main__":
    capture("controlnet_union", StableDiffusionXLControlNetUnion, inputs, call, sys.argv[1], PRODUCER)
