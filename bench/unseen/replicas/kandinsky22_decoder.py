"""Kandinsky 2.2's decoder UNet (UNet2DConditionModel as kandinsky-community/kandinsky-2-2-decoder configures it),
reimplemented for torch 1.13 (no diffusers here), captured small in f32 on CPU.

Follows huggingface/diffusers src/diffusers/models/unets/unet_2d_condition.py at
00f354d14d00ed60cfce2ea7c5efceca2e4c4c3f line for line with the decoder's configuration: addition_embed_type "image"
(_set_add_embedding: add_embedding = ImageTimeEmbedding(image_embed_dim=encoder_hid_dim, time_embed_dim); get_aug_embed:
added_cond_kwargs["image_embeds"] through it, added to the timestep embedding), encoder_hid_dim_type "image_proj"
(_set_encoder_hid_proj: encoder_hid_proj = ImageProjection(image_embed_dim=encoder_hid_dim, cross_attention_dim);
process_encoder_hidden_states: the encoder states passed (None) replaced by ImageProjection(image_embeds), 32 rows),
down_block_types (ResnetDownsampleBlock2D, SimpleCrossAttnDownBlock2D x3), mid_block_type
UNetMidBlock2DSimpleCrossAttn, up_block_types (SimpleCrossAttnUpBlock2D x3, ResnetUpsampleBlock2D), layers_per_block 3
(3 resnets a down block, 4 an up block; 2 here), attention_head_dim 64 (each attention out_channels // head_dim heads),
resnet_time_scale_shift "scale_shift", act_fn silu, resnet_skip_time_act False, resnet_out_scale_factor 1.0,
mid_block_scale_factor 1, cross_attention_norm None, time_embedding_type "positional" (flip_sin_to_cos, freq_shift 0,
time_embed_dim 4·block_out_channels[0]), no time_embed_act, no class embedding, in_channels 4, out_channels 8 (the
learned variance beside the noise), and upstream's upsample_size (None here: the sample a multiple of
2**num_upsamplers; the ResnetBlock2D resamplers of these blocks do not read it). The blocks are if_unet.py's
(unets/unet_2d_blocks.py's ResnetDownsampleBlock2D, SimpleCrossAttnDownBlock2D, UNetMidBlock2DSimpleCrossAttn,
SimpleCrossAttnUpBlock2D, ResnetUpsampleBlock2D at 049ca3822f9eb3621c96c11bba58b8e579cb3cc1, their resamplers
ResnetBlock2Ds that pool or upsample inside; attention_processor.py's Attention with added_kv_proj_dim and
AttnAddedKVProcessor2_0 at 001d4da0eb5809c779120c51f74ef73d6078b08c: the group-normed map's queries over the image
rows' add_k/add_v projections joined before the map's own keys and values, the residual added) over sd_unet.py's
ResnetBlock2D (resnet.py with time_embedding_norm "scale_shift": norm2(x)·(1 + scale) + shift), and embeddings.py at
0002117e9fa1351a3c0ee988d9c13e683cfb273b (ImageTimeEmbedding: Linear then LayerNorm; ImageProjection: Linear to
32·cross_attention_dim, reshaped to 32 rows, LayerNorm; Timesteps, TimestepEmbedding): all imported (the same
module tree, parameter names and shapes, call boundaries and arithmetic), only the model class and its forward
written here, as sdxl_unet.py's. Stand-in for what torch 1.13 lacks: F.scaled_dot_product_attention (run.py's sdpa,
its math path). if_unet.py --kandinsky captures the same configuration at two levels with one resnet a down block
as the case kandinsky22_unet; this file is the decoder's own layout, case kandinsky22_decoder.

The constructs it shows beyond sd_unet.py's SD 1.x UNet: no text at all, one image embedding conditioning twice
(projected to 32 cross-attention rows, and projected and layer-normed into the timestep embedding every resnet
reads); scale-shift resnets (GroupNorm then ·(1 + scale) + shift from a time projection twice as wide); resamplers
that are resnets (average pool or nearest ×2 of both the input and the normed map inside the block, before conv1);
added-KV attention over the map (no separate cross-attention: the image rows' keys and values joined before the
map's own, one softmax), GroupNorm on the map first, the residual inside the attention module; a first level with
no attention; four levels, several resnets a down block and one more an up block; 8 output channels of which the
pipeline keeps 4.

Pipeline as KandinskyV22Pipeline (pipelines/kandinsky2_2/pipeline_kandinsky2_2.py at
2227d395674e447210f814e14fe97a5292270453) calls it without guidance: self.unet(sample=latents, timestep=t,
encoder_hidden_states=None, added_cond_kwargs={"image_embeds": image_embeds}, return_dict=False)[0], image_embeds
the prior's image embedding ([1, 24] here, drawn at random); then noise_pred, _ = noise_pred.split(latents.shape[1],
dim=1) (where the scheduler's variance_type is not learned: the first 4 channels); t the scheduler's (here σ·1000,
f32 [1], as sd_unet.py), the noise prediction taken as the velocity as is (the capture's flow Euler loop, as
sd_unet.py).

Tiny config (the decoder's widths (384, 768, 1152, 1536) divided by 48): block_out_channels (8, 16, 24, 32),
layers_per_block 2 (3; 2 resnets a down block and 3 an up block, so that the up blocks' three kinds of skip join,
prev + out, out + out and out + in channels, all occur; at 3 the trace is 8.5 MB), attention_head_dim 4 (64: 4, 6
and 8 heads at levels 1-3, as 12, 18, 24), norm_num_groups 4 (32), norm_eps 1e-5, cross_attention_dim 16 (768),
encoder_hid_dim 24 (1280), time_embed_dim 32; latents [1, 4, 8, 8] (64x64 for a 512 image; maps of 8, 4, 2, 1 by
level). The trace is 6.6 MB.

usage: /usr/bin/python3 bench/unseen/replicas/kandinsky22_decoder.py OUTDIR
REPLICA_DTYPE=bf16 [REPLICA_DEVICE=cuda] as run.py's replicas: the bf16 run, beside the f32 one.
"""
import sys

import torch
import torch.nn as nn

from if_unet import (ImageProjection, ImageTimeEmbedding, ResnetDownsampleBlock2D, ResnetUpsampleBlock2D,
                     SimpleCrossAttnDownBlock2D, SimpleCrossAttnUpBlock2D, UNetMidBlock2DSimpleCrossAttn)
from parts import TimestepEmbedding, Timesteps
from run import capture


class UNet2DConditionModel(nn.Module):
    def __init__(self, in_channels=4, out_channels=8, flip_sin_to_cos=True, freq_shift=0,
                 down_block_types=("ResnetDownsampleBlock2D", "SimpleCrossAttnDownBlock2D",
                                   "SimpleCrossAttnDownBlock2D", "SimpleCrossAttnDownBlock2D"),
                 mid_block_type="UNetMidBlock2DSimpleCrossAttn",
                 up_block_types=("SimpleCrossAttnUpBlock2D", "SimpleCrossAttnUpBlock2D", "SimpleCrossAttnUpBlock2D",
                                 "ResnetUpsampleBlock2D"),
                 block_out_channels=(8, 16, 24, 32), layers_per_block=2, mid_block_scale_factor=1, act_fn="silu",
                 norm_num_groups=4, norm_eps=1e-5, cross_attention_dim=16, encoder_hid_dim=24,
                 encoder_hid_dim_type="image_proj", attention_head_dim=4, resnet_time_scale_shift="scale_shift",
                 resnet_skip_time_act=False, resnet_out_scale_factor=1.0, addition_embed_type="image",
                 cross_attention_norm=None):
        super().__init__()
        if norm_eps != 1e-5 or act_fn != "silu":
            raise NotImplementedError("the imported blocks build the decoder's norm_eps 1e-5 and SiLU only")
        self.addition_embed_type = addition_embed_type
        self.encoder_hid_dim_type = encoder_hid_dim_type
        # input
        self.conv_in = nn.Conv2d(in_channels, block_out_channels[0], kernel_size=3, padding=1)
        # time (_set_time_proj, "positional")
        time_embed_dim = block_out_channels[0] * 4
        self.time_proj = Timesteps(block_out_channels[0], flip_sin_to_cos, freq_shift)
        timestep_input_dim = block_out_channels[0]
        self.time_embedding = TimestepEmbedding(timestep_input_dim, time_embed_dim)
        # _set_encoder_hid_proj, "image_proj" (Kandinsky 2.2)
        self.encoder_hid_proj = ImageProjection(image_embed_dim=encoder_hid_dim,
                                                cross_attention_dim=cross_attention_dim)
        self.class_embedding = None
        # _set_add_embedding, "image" (Kandinsky 2.2)
        self.add_embedding = ImageTimeEmbedding(image_embed_dim=encoder_hid_dim, time_embed_dim=time_embed_dim)
        self.time_embed_act = None

        self.down_blocks = nn.ModuleList([])
        self.up_blocks = nn.ModuleList([])
        if isinstance(attention_head_dim, int):
            attention_head_dim = (attention_head_dim,) * len(down_block_types)
        if isinstance(layers_per_block, int):
            layers_per_block = [layers_per_block] * len(down_block_types)
        blocks_time_embed_dim = time_embed_dim
        resnet = dict(norm=resnet_time_scale_shift, act=act_fn, skip_time_act=resnet_skip_time_act,
                      output_scale_factor=resnet_out_scale_factor)

        # down
        output_channel = block_out_channels[0]
        for i, down_block_type in enumerate(down_block_types):
            input_channel = output_channel
            output_channel = block_out_channels[i]
            is_final_block = i == len(block_out_channels) - 1
            if down_block_type == "SimpleCrossAttnDownBlock2D":
                down_block = SimpleCrossAttnDownBlock2D(input_channel, output_channel, blocks_time_embed_dim,
                                                        norm_num_groups, not is_final_block, resnet,
                                                        attention_head_dim[i], cross_attention_dim,
                                                        cross_attention_norm, layers=layers_per_block[i])
            else:
                down_block = ResnetDownsampleBlock2D(input_channel, output_channel, blocks_time_embed_dim,
                                                     norm_num_groups, not is_final_block, resnet,
                                                     layers=layers_per_block[i])
            self.down_blocks.append(down_block)

        # mid (get_mid_block: the resnets' output_scale_factor is mid_block_scale_factor)
        assert mid_block_type == "UNetMidBlock2DSimpleCrossAttn"
        self.mid_block = UNetMidBlock2DSimpleCrossAttn(block_out_channels[-1], blocks_time_embed_dim, norm_num_groups,
                                                       dict(resnet, output_scale_factor=mid_block_scale_factor),
                                                       attention_head_dim[-1], cross_attention_dim,
                                                       cross_attention_norm)

        # count how many layers upsample the images
        self.num_upsamplers = 0

        # up (reversed_layers_per_block[i] + 1 resnets an up block)
        reversed_block_out_channels = list(reversed(block_out_channels))
        reversed_layers_per_block = list(reversed(layers_per_block))
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
            if up_block_type == "SimpleCrossAttnUpBlock2D":
                # get_up_block passes attention_head_dim[i] (not reversed) as upstream's constructor does
                up_block = SimpleCrossAttnUpBlock2D(input_channel, prev_output_channel, output_channel,
                                                    blocks_time_embed_dim, norm_num_groups, add_upsample, resnet,
                                                    attention_head_dim[i], cross_attention_dim, cross_attention_norm,
                                                    layers=reversed_layers_per_block[i] + 1)
            else:
                up_block = ResnetUpsampleBlock2D(input_channel, prev_output_channel, output_channel,
                                                 blocks_time_embed_dim, norm_num_groups, add_upsample, resnet,
                                                 layers=reversed_layers_per_block[i] + 1)
            self.up_blocks.append(up_block)

        # out
        self.conv_norm_out = nn.GroupNorm(num_channels=block_out_channels[0], num_groups=norm_num_groups, eps=norm_eps)
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
        if self.addition_embed_type == "image":
            # Kandinsky 2.2 - style
            if "image_embeds" not in added_cond_kwargs:
                raise ValueError("addition_embed_type 'image' requires `image_embeds` in `added_cond_kwargs`")
            image_embs = added_cond_kwargs.get("image_embeds")
            aug_emb = self.add_embedding(image_embs)
        return aug_emb

    def process_encoder_hidden_states(self, encoder_hidden_states, added_cond_kwargs):
        if self.encoder_hid_proj is not None and self.encoder_hid_dim_type == "image_proj":
            # Kandinsky 2.2 - style
            if "image_embeds" not in added_cond_kwargs:
                raise ValueError("encoder_hid_dim_type 'image_proj' requires `image_embeds` in `added_cond_kwargs`")
            image_embeds = added_cond_kwargs.get("image_embeds")
            encoder_hidden_states = self.encoder_hid_proj(image_embeds)
        return encoder_hidden_states

    def forward(self, sample, timestep, encoder_hidden_states, added_cond_kwargs=None, return_dict=False):
        default_overall_up_factor = 2 ** self.num_upsamplers
        # upsample size should be forwarded when sample is not a multiple of `default_overall_up_factor`
        forward_upsample_size = False
        for dim in sample.shape[-2:]:
            if dim % default_overall_up_factor != 0:
                forward_upsample_size = True
                break
        if forward_upsample_size:
            raise NotImplementedError("a sample not a multiple of 2**num_upsamplers")
        # 1. time
        t_emb = self.get_time_embed(sample=sample, timestep=timestep)
        emb = self.time_embedding(t_emb)
        aug_emb = self.get_aug_embed(emb=emb, encoder_hidden_states=encoder_hidden_states,
                                     added_cond_kwargs=added_cond_kwargs)
        emb = emb + aug_emb if aug_emb is not None else emb
        encoder_hidden_states = self.process_encoder_hidden_states(encoder_hidden_states=encoder_hidden_states,
                                                                   added_cond_kwargs=added_cond_kwargs)
        # 2. pre-process
        sample = self.conv_in(sample)
        # 3. down
        down_block_res_samples = (sample,)
        for downsample_block in self.down_blocks:
            if isinstance(downsample_block, SimpleCrossAttnDownBlock2D):  # has_cross_attention
                sample, res_samples = downsample_block(hidden_states=sample, temb=emb,
                                                       encoder_hidden_states=encoder_hidden_states)
            else:
                sample, res_samples = downsample_block(hidden_states=sample, temb=emb)
            down_block_res_samples += res_samples
        # 4. mid
        sample = self.mid_block(sample, emb, encoder_hidden_states=encoder_hidden_states)
        # 5. up
        for i, upsample_block in enumerate(self.up_blocks):
            res_samples = down_block_res_samples[-len(upsample_block.resnets):]
            down_block_res_samples = down_block_res_samples[: -len(upsample_block.resnets)]
            if isinstance(upsample_block, SimpleCrossAttnUpBlock2D):
                sample = upsample_block(hidden_states=sample, temb=emb, res_hidden_states_tuple=res_samples,
                                        encoder_hidden_states=encoder_hidden_states)
            else:
                sample = upsample_block(hidden_states=sample, temb=emb, res_hidden_states_tuple=res_samples)
        # 6. post-process
        sample = self.conv_norm_out(sample)
        sample = self.conv_act(sample)
        sample = self.conv_out(sample)
        return (sample,)


def build():
    return UNet2DConditionModel()


HEIGHT = WIDTH = 64  # the image size: latents of HEIGHT / movq_scale_factor (8)


def inputs(g):
    # the prior pipeline's image_embeds; prepare_latents (init_noise_sigma 1)
    return {"image_embeds": torch.randn((1, 24), generator=g),
            "noise": torch.randn((1, 4, HEIGHT // 8, WIDTH // 8), generator=g)}


def call(model, x, sigma, c):
    # KandinskyV22Pipeline without guidance: the scheduler's t; the first latents.shape[1] channels kept
    t = torch.tensor([sigma * 1000.0], dtype=torch.float32, device=x.device)
    added_cond_kwargs = {"image_embeds": c["image_embeds"]}
    noise_pred = model(sample=x, timestep=t, encoder_hidden_states=None, added_cond_kwargs=added_cond_kwargs,
                       return_dict=False)[0]
    noise_pred, _ = noise_pred.split(x.shape[1], dim=1)
    return noise_pred


PRODUCER = dict(
    library_source="replica of huggingface/diffusers unet_2d_condition.py (Kandinsky 2.2 decoder's configuration) "
                   "and the parts it imports (torch 1.13)",
    timestep="sigma*1000, f32 [1] expanded to the batch (KandinskyV22Pipeline: the scheduler's timesteps)",
    velocity="the output's first 4 of 8 channels (noise_pred.split(latents.shape[1], dim=1)[0]), as is",
    note="Kandinsky 2.2's decoder UNet2DConditionModel at widths 8/16/24/32, 2 resnets a down block and 3 an up "
         "block: ResnetDownsampleBlock2D, SimpleCrossAttnDownBlock2D x3 (resnet resamplers pooling inside), "
         "UNetMidBlock2DSimpleCrossAttn, SimpleCrossAttnUpBlock2D x3, ResnetUpsampleBlock2D; SiLU scale_shift "
         "resnets; AttnAddedKVProcessor2_0 (the image rows' keys and values before the map's, GroupNorm first, "
         "residual inside); the image embedding through ImageProjection (32 rows, LayerNorm) as the encoder states "
         "and through ImageTimeEmbedding (Linear, LayerNorm) added to the time embedding; heads of 4 channels")

if __name__ == "__main__":
    capture("kandinsky22_decoder", build, inputs, call, sys.argv[1], PRODUCER)
