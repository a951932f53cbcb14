"""A Latent Consistency Model's UNet (UNet2DConditionModel with time_cond_proj_dim, as SimianLuo/LCM_Dreamshaper_v7
configures it on an SD 1.x layout), reimplemented for torch 1.13 (no diffusers here), captured small in f32 on CPU.

Follows huggingface/diffusers src/diffusers/models/unets/unet_2d_condition.py at
00f354d14d00ed60cfce2ea7c5efceca2e4c4c3f line for line with the LCM configuration: time_embedding_type "positional"
(_set_time_proj: time_proj = Timesteps(block_out_channels[0], flip_sin_to_cos, freq_shift), time_embed_dim
block_out_channels[0]·4), self.time_embedding = TimestepEmbedding(timestep_input_dim, time_embed_dim, act_fn,
post_act_fn=timestep_post_act (None), cond_proj_dim=time_cond_proj_dim); forward: t_emb = get_time_embed(sample,
timestep) (a 0-dim timestep taken as timesteps[None], expanded to the batch, through time_proj, cast to the sample's
dtype), then emb = self.time_embedding(t_emb, timestep_cond); no class, addition or encoder-hidden-state embeddings,
time_embed_act None, no center_input_sample, no FreeU; upstream's upsample_size (passed only when the latent is not a
multiple of 2**num_upsamplers: here None, nearest ×2 by scale factor). TimestepEmbedding is embeddings.py's at
0002117e9fa1351a3c0ee988d9c13e683cfb273b with cond_proj_dim set: linear_1 (Linear in_channels -> time_embed_dim with
bias), cond_proj = nn.Linear(cond_proj_dim, in_channels, bias=False), act SiLU, linear_2; forward sample = sample +
self.cond_proj(condition) before linear_1. Everything else is sd_unet.py's (imported, unchanged): its CrossAttnDownBlock2D,
DownBlock2D, UNetMidBlock2DCrossAttn, UpBlock2D, CrossAttnUpBlock2D (ResnetBlock2D, Transformer2DModel,
BasicTransformerBlock, Attention with its torch-1.13 stand-in for F.scaled_dot_product_attention, GEGLU,
Downsample2D, Upsample2D) and parts.py's Timesteps; only TimestepEmbedding with cond_proj and the model class with
its forward are written here (the same module tree, parameter names and shapes, call boundaries and arithmetic).

The constructs it shows beyond sd_unet.py's SD 1.x UNet: a second conditioning vector folded into the timestep
embedding before its MLP: the guidance-scale embedding (a sinusoid of w·1000 the pipeline makes, an input here)
projected by a bias-free Linear to the sinusoid's width and added to the timestep's sinusoidal features, the sum
then through linear_1, SiLU, linear_2 (so guidance and time share one MLP, not two summed afterwards); a timestep
given as a 0-dim int64 tensor (LCMScheduler's timesteps are long), broadcast to the batch inside the model.

Pipeline as LatentConsistencyModelPipeline (src/diffusers/pipelines/latent_consistency_models/
pipeline_latent_consistency_text2img.py at 0256497cd8b1b749098312f63a55bc5e1f295a15) calls it: no classifier-free
guidance call (do_classifier_free_guidance is False: one UNet call a step); w = torch.tensor(guidance_scale -
1).repeat(bs); w_embedding = self.get_guidance_scale_embedding(w, embedding_dim=self.unet.config.time_cond_proj_dim)
.to(device=device, dtype=latents.dtype), once before the loop (get_guidance_scale_embedding, written below line for
line: w·1000, half = dim // 2, exp(-log(10000)·i/(half - 1)) for i < half, w[:, None]·freqs, [sin, cos], a zero
column if dim is odd); each step latents = latents.to(prompt_embeds.dtype), then self.unet(latents, t,
timestep_cond=w_embedding, encoder_hidden_states=prompt_embeds, cross_attention_kwargs=None, added_cond_kwargs=None,
return_dict=False)[0], t one of the scheduler's timesteps (scheduling_lcm.py at
013e60c172a5c6674c3d1473d13d38305c4d6a1a: torch.from_numpy(timesteps).to(dtype=torch.long), iterated: 0-dim int64),
here round(σ·1000). The LCMScheduler's consistency step (c_skip/c_out boundary conditions, the predicted x0, noise
re-added between steps) is a sampler detail left out: as the other UNet replicas (sd_unet.py, sdxl_unet.py), the
noise prediction (epsilon) is taken as the velocity as is in run.py's 3-step flow Euler loop. The guidance
embedding is recorded as the input timestep_cond (bf16 in the bf16 run, as .to(dtype=latents.dtype) leaves it).

Tiny config (sd_unet.py's): block_out_channels (32, 64), down ("CrossAttnDownBlock2D", "DownBlock2D"), up
("UpBlock2D", "CrossAttnUpBlock2D"), one resnet a down block (two an up block), 2 heads, norm_num_groups 8, norm_eps
1e-5, cross_attention_dim 32, time_embed_dim 128, time_cond_proj_dim 16 (LCM_Dreamshaper_v7's 256), guidance_scale
8.5 (the pipeline's default: w = 7.5); latents [1, 4, 8, 8], text [1, 6, 32].

usage: /usr/bin/python3 bench/unseen/replicas/lcm_unet.py OUTDIR
REPLICA_DTYPE=bf16 [REPLICA_DEVICE=cuda] as run.py's replicas: the bf16 run, beside the f32 one.
"""
import sys

import torch
import torch.nn as nn

from parts import Timesteps
from run import capture
from sd_unet import CrossAttnDownBlock2D, CrossAttnUpBlock2D, DownBlock2D, UNetMidBlock2DCrossAttn, UpBlock2D


class TimestepEmbedding(nn.Module):
    """embeddings.py's TimestepEmbedding (act_fn "silu", no out_dim, no post_act_fn) with cond_proj_dim."""

    def __init__(self, in_channels, time_embed_dim, act_fn="silu", out_dim=None, post_act_fn=None, cond_proj_dim=None,
                 sample_proj_bias=True):
        super().__init__()
        self.linear_1 = nn.Linear(in_channels, time_embed_dim, sample_proj_bias)
        if cond_proj_dim is not None:
            self.cond_proj = nn.Linear(cond_proj_dim, in_channels, bias=False)
        else:
            self.cond_proj = None
        self.act = nn.SiLU()
        if out_dim is not None:
            time_embed_dim_out = out_dim
        else:
            time_embed_dim_out = time_embed_dim
        self.linear_2 = nn.Linear(time_embed_dim, time_embed_dim_out, sample_proj_bias)
        self.post_act = None

    def forward(self, sample, condition=None):
        if condition is not None:
            sample = sample + self.cond_proj(condition)
        sample = self.linear_1(sample)
        if self.act is not None:
            sample = self.act(sample)
        sample = self.linear_2(sample)
        if self.post_act is not None:
            sample = self.post_act(sample)
        return sample


class UNet2DConditionModel(nn.Module):
    def __init__(self, in_channels=4, out_channels=4, flip_sin_to_cos=True, freq_shift=0,
                 down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
                 up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"), block_out_channels=(32, 64),
                 norm_num_groups=8, cross_attention_dim=32, attention_head_dim=2, use_linear_projection=False,
                 time_cond_proj_dim=16):
        super().__init__()
        # upstream: num_attention_heads = num_attention_heads or attention_head_dim (the naming issue)
        num_attention_heads = attention_head_dim
        # input
        self.conv_in = nn.Conv2d(in_channels, block_out_channels[0], kernel_size=3, padding=1)
        # time (_set_time_proj, "positional")
        time_embed_dim = block_out_channels[0] * 4
        self.time_proj = Timesteps(block_out_channels[0], flip_sin_to_cos, freq_shift)
        timestep_input_dim = block_out_channels[0]
        self.time_embedding = TimestepEmbedding(timestep_input_dim, time_embed_dim, act_fn="silu", post_act_fn=None,
                                                cond_proj_dim=time_cond_proj_dim)
        self.encoder_hid_proj = None
        self.class_embedding = None
        self.time_embed_act = None

        self.down_blocks = nn.ModuleList([])
        self.up_blocks = nn.ModuleList([])
        if isinstance(num_attention_heads, int):
            num_attention_heads = (num_attention_heads,) * len(down_block_types)
        blocks_time_embed_dim = time_embed_dim

        # down (layers_per_block 1: one resnet a down block, as sd_unet.py's blocks build them)
        output_channel = block_out_channels[0]
        for i, down_block_type in enumerate(down_block_types):
            input_channel = output_channel
            output_channel = block_out_channels[i]
            is_final_block = i == len(block_out_channels) - 1
            if down_block_type == "CrossAttnDownBlock2D":
                down_block = CrossAttnDownBlock2D(input_channel, output_channel, blocks_time_embed_dim,
                                                  num_attention_heads[i], cross_attention_dim, norm_num_groups,
                                                  not is_final_block, use_linear_projection, 1)
            else:
                down_block = DownBlock2D(input_channel, output_channel, blocks_time_embed_dim, norm_num_groups,
                                         not is_final_block)
            self.down_blocks.append(down_block)

        # mid
        self.mid_block = UNetMidBlock2DCrossAttn(block_out_channels[-1], blocks_time_embed_dim,
                                                 num_attention_heads[-1], cross_attention_dim, norm_num_groups,
                                                 use_linear_projection, 1)

        # count how many layers upsample the images
        self.num_upsamplers = 0

        # up (reversed_layers_per_block[i] + 1 = 2 resnets an up block)
        reversed_block_out_channels = list(reversed(block_out_channels))
        reversed_num_attention_heads = list(reversed(num_attention_heads))
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
            if up_block_type == "CrossAttnUpBlock2D":
                up_block = CrossAttnUpBlock2D(input_channel, prev_output_channel, output_channel,
                                              blocks_time_embed_dim, reversed_num_attention_heads[i],
                                              cross_attention_dim, norm_num_groups, add_upsample,
                                              use_linear_projection, 1, 2)
            else:
                up_block = UpBlock2D(input_channel, prev_output_channel, output_channel, blocks_time_embed_dim,
                                     norm_num_groups, add_upsample, 2)
            self.up_blocks.append(up_block)

        # out
        self.conv_norm_out = nn.GroupNorm(num_channels=block_out_channels[0], num_groups=norm_num_groups, eps=1e-5)
        self.conv_act = nn.SiLU()
        self.conv_out = nn.Conv2d(block_out_channels[0], out_channels, kernel_size=3, padding=1)

    def get_time_embed(self, sample, timestep):
        timesteps = timestep
        if len(timesteps.shape) == 0:
            timesteps = timesteps[None].to(sample.device)
        # broadcast to batch dimension in a way that's compatible with ONNX/Core ML
        timesteps = timesteps.expand(sample.shape[0])
        t_emb = self.time_proj(timesteps)
        # `Timesteps` does not contain any weights and will always return f32 tensors
        t_emb = t_emb.to(dtype=sample.dtype)
        return t_emb

    def forward(self, sample, timestep, encoder_hidden_states, class_labels=None, timestep_cond=None,
                attention_mask=None, cross_attention_kwargs=None, added_cond_kwargs=None, return_dict=False):
        default_overall_up_factor = 2 ** self.num_upsamplers
        # upsample size should be forwarded when sample is not a multiple of `default_overall_up_factor`
        forward_upsample_size = False
        upsample_size = None
        for dim in sample.shape[-2:]:
            if dim % default_overall_up_factor != 0:
                forward_upsample_size = True
                break
        # 1. time
        t_emb = self.get_time_embed(sample=sample, timestep=timestep)
        emb = self.time_embedding(t_emb, timestep_cond)
        # 2. pre-process
        sample = self.conv_in(sample)
        # 3. down
        down_block_res_samples = (sample,)
        for downsample_block in self.down_blocks:
            if isinstance(downsample_block, CrossAttnDownBlock2D):
                sample, res_samples = downsample_block(hidden_states=sample, temb=emb,
                                                       encoder_hidden_states=encoder_hidden_states)
            else:
                sample, res_samples = downsample_block(hidden_states=sample, temb=emb)
            down_block_res_samples += res_samples
        # 4. mid
        sample = self.mid_block(sample, emb, encoder_hidden_states=encoder_hidden_states)
        # 5. up
        for i, upsample_block in enumerate(self.up_blocks):
            is_final_block = i == len(self.up_blocks) - 1
            res_samples = down_block_res_samples[-len(upsample_block.resnets):]
            down_block_res_samples = down_block_res_samples[: -len(upsample_block.resnets)]
            # if we have not reached the final block and need to forward the upsample size, we do it here
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


def get_guidance_scale_embedding(w, embedding_dim=512, dtype=torch.float32):
    """LatentConsistencyModelPipeline.get_guidance_scale_embedding."""
    assert len(w.shape) == 1
    w = w * 1000.0

    half_dim = embedding_dim // 2
    emb = torch.log(torch.tensor(10000.0)) / (half_dim - 1)
    emb = torch.exp(torch.arange(half_dim, dtype=dtype) * -emb)
    emb = w.to(dtype)[:, None] * emb[None, :]
    emb = torch.cat([torch.sin(emb), torch.cos(emb)], dim=1)
    if embedding_dim % 2 == 1:  # zero pad
        emb = torch.nn.functional.pad(emb, (0, 1))
    assert emb.shape == (w.shape[0], embedding_dim)
    return emb


TIME_COND_PROJ_DIM = 16
GUIDANCE_SCALE = 8.5


def build():
    return UNet2DConditionModel(time_cond_proj_dim=TIME_COND_PROJ_DIM)


def inputs(g):
    # prompt_embeds (the text encoder's states), the guidance-scale embedding made once before the loop (step 6 of
    # __call__; bs = 1), the initial latents
    prompt_embeds = torch.randn((1, 6, 32), generator=g)
    bs = 1
    w = torch.tensor(GUIDANCE_SCALE - 1).repeat(bs)
    w_embedding = get_guidance_scale_embedding(w, embedding_dim=TIME_COND_PROJ_DIM)
    return {"encoder_hidden_states": prompt_embeds, "timestep_cond": w_embedding,
            "noise": torch.randn((1, 4, 8, 8), generator=g)}


def call(model, x, sigma, c):
    # LatentConsistencyModelPipeline: t one of LCMScheduler's long timesteps (0-dim); timestep_cond the w embedding;
    # the noise prediction used as is
    t = torch.tensor(int(round(sigma * 1000)), dtype=torch.int64)
    return model(x, t, timestep_cond=c["timestep_cond"], encoder_hidden_states=c["encoder_hidden_states"],
                 cross_attention_kwargs=None, added_cond_kwargs=None, return_dict=False)[0]


PRODUCER = dict(
    library_source="replica of huggingface/diffusers unet_2d_condition.py@00f354d14d00 with time_cond_proj_dim "
                   "(LCM) and the parts it imports (torch 1.13)",
    timestep="round(sigma*1000) int64, 0-dim, expanded to the batch inside the model (LatentConsistencyModelPipeline: "
             "LCMScheduler's long timesteps)",
    velocity="the noise prediction as is (LCMScheduler's consistency step replaced by the flow Euler loop)",
    note="LCM UNet2DConditionModel (SD 1.x layout) at widths 32/64: conv_in; CrossAttnDownBlock2D (ResnetBlock2D, "
         "Transformer2DModel, Downsample2D), DownBlock2D; UNetMidBlock2DCrossAttn; UpBlock2D and CrossAttnUpBlock2D "
         "(the skips joined by channels in reverse, nearest ×2 then conv); GroupNorm-SiLU-conv_out; time embedding "
         "Timesteps(32, flip_sin_to_cos, shift 0) plus cond_proj (bias-free Linear 16 -> 32) of timestep_cond, then "
         "linear_1-SiLU-linear_2 to 128; timestep_cond the guidance-scale embedding of w = guidance_scale - 1 = 7.5 "
         "(sinusoid of w*1000, 16 wide, [sin, cos], made by the pipeline, recorded as an input); SiLU -> "
         "time_emb_proj added per channel in every resnet; GEGLU FeedForward; self- and cross-attention")

if __name__ == "__main__":
    capture("lcm_unet", build, inputs, call, sys.argv[1], PRODUCER)
