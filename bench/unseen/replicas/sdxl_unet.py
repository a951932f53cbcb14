"""Stable Diffusion XL's UNet (UNet2DConditionModel as the SDXL base checkpoint configures it), reimplemented for
torch 1.13 (no diffusers here), captured small in f32 on CPU.

Follows huggingface/diffusers src/diffusers/models/unets/unet_2d_condition.py at
00f354d14d00ed60cfce2ea7c5efceca2e4c4c3f line for line with SDXL's configuration: addition_embed_type "text_time"
(_set_add_embedding: add_time_proj = Timesteps(addition_time_embed_dim, flip_sin_to_cos, freq_shift), add_embedding
= TimestepEmbedding(projection_class_embeddings_input_dim, time_embed_dim); get_aug_embed: the time_ids flattened
through add_time_proj, reshaped to [batch, 6·addition_time_embed_dim], joined after the pooled text_embeds, cast to
emb's dtype, through add_embedding; added to the timestep embedding), down_block_types ("DownBlock2D",
"CrossAttnDownBlock2D", "CrossAttnDownBlock2D"), up_block_types ("CrossAttnUpBlock2D", "CrossAttnUpBlock2D",
"UpBlock2D"), transformer_layers_per_block per level (the mid block taking the last level's, the up blocks the
reversed list), attention_head_dim per level (upstream reads it as num_attention_heads, each Transformer2DModel's
head width out_channels // heads; the up blocks take reversed_num_attention_heads), use_linear_projection,
cross_attention_dim the width of the two text encoders' states joined, no class embedding, time_embedding_act_fn
None, no encoder_hid_proj, upcast_attention off, and upstream's upsample_size (passed only when the latent is not a
multiple of 2**num_upsamplers: here None, nearest ×2 by scale factor). The blocks are unets/unet_2d_blocks.py's at
049ca3822f9eb3621c96c11bba58b8e579cb3cc1 (get_down_block, get_mid_block, get_up_block: CrossAttnDownBlock2D and
CrossAttnUpBlock2D passing transformer_layers_per_block[i] as each Transformer2DModel's num_layers,
UNetMidBlock2DCrossAttn, DownBlock2D, UpBlock2D), transformers/transformer_2d.py's Transformer2DModel at
000fa82a1e6a7730dddb666ff6b2f681de3c2746 with use_linear_projection (GroupNorm ε 1e-6, the map's cells as rows,
then proj_in a Linear; BasicTransformerBlocks; proj_out a Linear, then back to a map, plus the input) and
embeddings.py at 0002117e9fa1351a3c0ee988d9c13e683cfb273b (get_timestep_embedding, Timesteps,
TimestepEmbedding): all imported as sd_unet.py's and parts.py's classes are (the same module tree, parameter names
and shapes, call boundaries and arithmetic), only the model class and its forward written here. Stand-in for what
torch 1.13 lacks: F.scaled_dot_product_attention (its math path, in sd_unet.py's Attention).

The constructs it shows beyond sd_unet.py's SD 1.x UNet: the text_time added embedding (six size-and-crop numbers
each through a sinusoid of their own, beside the pooled text embedding, through a Linear-SiLU-Linear, summed into
the timestep embedding that every resnet reads); several BasicTransformerBlocks in one Transformer2DModel, their
number differing by level (2 at level 1, 3 at level 2 and in the mid block); a head count per level (2 and 4);
linear projections in and out of each transformer (the map's cells as rows first, then the Linear; the Linear, then
back to a map); a first level with no attention.

Pipeline as StableDiffusionXLPipeline (src/diffusers/pipelines/stable_diffusion_xl/pipeline_stable_diffusion_xl.py
at 0049e443dcfe8af0341d99b8c5de595bd6e99b5d) calls it without guidance: encode_prompt joins the two text encoders'
penultimate hidden states by channels (torch.concat(prompt_embeds_list, dim=-1), here [1, 6, 8] and [1, 6, 16] drawn
at random) and takes the pooled, projected output of text_encoder_2 as add_text_embeds ([1, 16]); _get_add_time_ids
builds list(original_size + crops_coords_top_left + target_size) = (64, 64, 0, 0, 64, 64) for a 64x64 image
(the defaults: original and target sizes the image's, crop corner (0, 0)) as torch.tensor([...],
dtype=prompt_embeds.dtype) (so bf16 in the bf16 run); each step self.unet(latent_model_input, t,
encoder_hidden_states=prompt_embeds, timestep_cond=None, cross_attention_kwargs=None, added_cond_kwargs={"text_embeds":
add_text_embeds, "time_ids": add_time_ids}, return_dict=False)[0]; t the scheduler's (here σ·1000, f32, one per
batch), the noise prediction (epsilon) taken as the velocity as is (the capture's flow Euler loop, as sd_unet.py).

Tiny config (SDXL's widths (320, 640, 1280) scaled down by 40): block_out_channels (8, 16, 32), layers_per_block 1
(two resnets an up block), attention_head_dim (1, 2, 4) (SDXL's (5, 10, 20): a head width of 8 at every level, as
SDXL's 64), transformer_layers_per_block (1, 2, 3) (SDXL's (1, 2, 10): 2 layers in the level-1 transformers, 3 in
the level-2 and mid transformers), norm_num_groups 4, norm_eps 1e-5, cross_attention_dim 24 (8 + 16: SDXL's 768 +
1280), addition_time_embed_dim 8 (SDXL's 256), projection_class_embeddings_input_dim 64 = 16 + 6·8 (SDXL's 2816 =
1280 + 6·256), time_embed_dim 32; latents [1, 4, 8, 8] (maps of 8x8, 4x4, 2x2 by level), text [1, 6, 24].

usage: /usr/bin/python3 bench/unseen/replicas/sdxl_unet.py OUTDIR
REPLICA_DTYPE=bf16 [REPLICA_DEVICE=cuda] as run.py's replicas: the bf16 run, beside the f32 one.
"""
import sys

import torch
import torch.nn as nn

from parts import TimestepEmbedding, Timesteps
from run import capture
from sd_unet import CrossAttnDownBlock2D, CrossAttnUpBlock2D, DownBlock2D, UNetMidBlock2DCrossAttn, UpBlock2D


class UNet2DConditionModel(nn.Module):
    def __init__(self, in_channels=4, out_channels=4, flip_sin_to_cos=True, freq_shift=0,
                 down_block_types=("DownBlock2D", "CrossAttnDownBlock2D", "CrossAttnDownBlock2D"),
                 up_block_types=("CrossAttnUpBlock2D", "CrossAttnUpBlock2D", "UpBlock2D"),
                 block_out_channels=(8, 16, 32), norm_num_groups=4, cross_attention_dim=24,
                 transformer_layers_per_block=(1, 2, 3), attention_head_dim=(1, 2, 4), use_linear_projection=True,
                 addition_embed_type="text_time", addition_time_embed_dim=8,
                 projection_class_embeddings_input_dim=64):
        super().__init__()
        # upstream: num_attention_heads = num_attention_heads or attention_head_dim (the naming issue)
        num_attention_heads = attention_head_dim
        self.addition_embed_type = addition_embed_type
        # input
        self.conv_in = nn.Conv2d(in_channels, block_out_channels[0], kernel_size=3, padding=1)
        # time (_set_time_proj, "positional")
        time_embed_dim = block_out_channels[0] * 4
        self.time_proj = Timesteps(block_out_channels[0], flip_sin_to_cos, freq_shift)
        timestep_input_dim = block_out_channels[0]
        self.time_embedding = TimestepEmbedding(timestep_input_dim, time_embed_dim)
        self.encoder_hid_proj = None
        self.class_embedding = None
        # _set_add_embedding, "text_time"
        self.add_time_proj = Timesteps(addition_time_embed_dim, flip_sin_to_cos, freq_shift)
        self.add_embedding = TimestepEmbedding(projection_class_embeddings_input_dim, time_embed_dim)
        self.time_embed_act = None

        self.down_blocks = nn.ModuleList([])
        self.up_blocks = nn.ModuleList([])
        if isinstance(num_attention_heads, int):
            num_attention_heads = (num_attention_heads,) * len(down_block_types)
        if isinstance(transformer_layers_per_block, int):
            transformer_layers_per_block = [transformer_layers_per_block] * len(down_block_types)
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
                                                  not is_final_block, use_linear_projection,
                                                  transformer_layers_per_block[i])
            else:
                down_block = DownBlock2D(input_channel, output_channel, blocks_time_embed_dim, norm_num_groups,
                                         not is_final_block)
            self.down_blocks.append(down_block)

        # mid
        self.mid_block = UNetMidBlock2DCrossAttn(block_out_channels[-1], blocks_time_embed_dim,
                                                 num_attention_heads[-1], cross_attention_dim, norm_num_groups,
                                                 use_linear_projection, transformer_layers_per_block[-1])

        # count how many layers upsample the images
        self.num_upsamplers = 0

        # up (reversed_layers_per_block[i] + 1 = 2 resnets an up block)
        reversed_block_out_channels = list(reversed(block_out_channels))
        reversed_num_attention_heads = list(reversed(num_attention_heads))
        reversed_transformer_layers_per_block = list(reversed(transformer_layers_per_block))
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
                                              use_linear_projection, reversed_transformer_layers_per_block[i], 2)
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

    def get_aug_embed(self, emb, encoder_hidden_states, added_cond_kwargs):
        aug_emb = None
        if self.addition_embed_type == "text_time":
            # SDXL - style
            text_embeds = added_cond_kwargs.get("text_embeds")
            time_ids = added_cond_kwargs.get("time_ids")
            time_embeds = self.add_time_proj(time_ids.flatten())
            time_embeds = time_embeds.reshape((text_embeds.shape[0], -1))
            add_embeds = torch.concat([text_embeds, time_embeds], dim=-1)
            add_embeds = add_embeds.to(emb.dtype)
            aug_emb = self.add_embedding(add_embeds)
        return aug_emb

    def forward(self, sample, timestep, encoder_hidden_states, added_cond_kwargs=None, return_dict=False):
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
        emb = self.time_embedding(t_emb)
        aug_emb = self.get_aug_embed(emb=emb, encoder_hidden_states=encoder_hidden_states,
                                     added_cond_kwargs=added_cond_kwargs)
        emb = emb + aug_emb if aug_emb is not None else emb
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


def build():
    return UNet2DConditionModel()


HEIGHT = WIDTH = 64  # the image size: latents of HEIGHT / vae_scale_factor (8)


def inputs(g):
    # encode_prompt: the two text encoders' penultimate states joined by channels; the pooled projection of the
    # second as add_text_embeds; _get_add_time_ids: original_size + crops_coords_top_left + target_size
    prompt_embeds_list = [torch.randn((1, 6, 8), generator=g), torch.randn((1, 6, 16), generator=g)]
    return {"encoder_hidden_states": torch.concat(prompt_embeds_list, dim=-1),
            "text_embeds": torch.randn((1, 16), generator=g),
            "time_ids": torch.tensor([list((HEIGHT, WIDTH) + (0, 0) + (HEIGHT, WIDTH))], dtype=torch.float32),
            "noise": torch.randn((1, 4, HEIGHT // 8, WIDTH // 8), generator=g)}


def call(model, x, sigma, c):
    # StableDiffusionXLPipeline: the scheduler's t for the whole batch; the noise prediction used as is
    t = torch.tensor([sigma * 1000.0], dtype=torch.float32, device=x.device)
    added_cond_kwargs = {"text_embeds": c["text_embeds"], "time_ids": c["time_ids"]}
    return model(x, t, encoder_hidden_states=c["encoder_hidden_states"], added_cond_kwargs=added_cond_kwargs,
                 return_dict=False)[0]


PRODUCER = dict(
    library_source="replica of huggingface/diffusers unet_2d_condition.py (SDXL configuration) and the parts it "
                   "imports (torch 1.13)",
    timestep="sigma*1000, f32 [1] expanded to the batch (StableDiffusionXLPipeline: the scheduler's timesteps)",
    velocity="the noise prediction as is",
    note="SDXL's UNet2DConditionModel at widths 8/16/32: DownBlock2D, then two CrossAttnDownBlock2D with 2 and 3 "
         "transformer layers (2 and 4 heads of width 8, linear proj_in/proj_out); UNetMidBlock2DCrossAttn with 3; "
         "CrossAttnUpBlock2D x2 and UpBlock2D (the skips joined by channels in reverse); addition_embed_type "
         "text_time: the six time_ids through Timesteps(8), joined after the pooled text embedding (16), through "
         "add_embedding (Linear-SiLU-Linear) and added to the time embedding; cross-attention to the two text "
         "encoders' states joined (8 + 16 = 24)")

if __name__ == "__main__":
    capture("sdxl_unet", build, inputs, call, sys.argv[1], PRODUCER)
