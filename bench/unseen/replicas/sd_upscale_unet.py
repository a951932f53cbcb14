"""The Stable Diffusion x4 upscaler's UNet (UNet2DConditionModel as stabilityai/stable-diffusion-x4-upscaler
configures it), reimplemented for torch 1.13 (no diffusers here), captured small in f32 on CPU.

Follows huggingface/diffusers src/diffusers/models/unets/unet_2d_condition.py at
00f354d14d00ed60cfce2ea7c5efceca2e4c4c3f line for line with the upscaler's configuration: in_channels 7 (the 4
latent channels and the 3 channels of the noised low-res image, joined by the pipeline), out_channels 4,
num_class_embeds 1000 with class_embed_type None (_set_class_embedding: class_embedding = nn.Embedding(
num_class_embeds, time_embed_dim); get_class_embed: class_emb = self.class_embedding(class_labels).to(dtype=
sample.dtype), the noise level's integer index looked up; forward: emb = emb + class_emb, class_embeddings_concat
False), down_block_types ("DownBlock2D", "CrossAttnDownBlock2D", "CrossAttnDownBlock2D", "CrossAttnDownBlock2D"),
up_block_types ("CrossAttnUpBlock2D", "CrossAttnUpBlock2D", "CrossAttnUpBlock2D", "UpBlock2D"), attention_head_dim
an int read as the head count of every level, use_linear_projection, and only_cross_attention (True, True, True,
False) (the original x4-upscaling.yaml's disable_self_attentions; reversed for the up blocks, so the first up block
keeps its self-attention; the mid block's stays, mid_block_only_cross_attention being None for a list and
UNetMidBlock2DCrossAttn taking none): in those blocks' BasicTransformerBlocks attn1 is built with
cross_attention_dim (to_k / to_v read the text's width) and called with encoder_hidden_states=encoder_hidden_states
if self.only_cross_attention else None (attention.py's BasicTransformerBlock; the same lines at
d4c167cffcc678a7cd72114ac2fb730176098c69 and later), so both attentions of the block attend to the text, each with
its own projections and LayerNorm. No addition embedding, no encoder_hid_proj, no time_embed_act, no masks,
upsample_size None (the latent a multiple of 8). The blocks are sd_unet.py's (unet_2d_blocks.py at
049ca3822f9eb3621c96c11bba58b8e579cb3cc1: DownBlock2D, UpBlock2D, UNetMidBlock2DCrossAttn; transformer_2d.py at
000fa82a1e6a7730dddb666ff6b2f681de3c2746 with linear projections; Attention with AttnProcessor2_0) with the cross-
attention blocks, Transformer2DModel and BasicTransformerBlock extended here by only_cross_attention (get_down_block /
get_up_block pass only_cross_attention[i] to CrossAttnDownBlock2D / CrossAttnUpBlock2D, which pass it to each
Transformer2DModel, which passes it to each BasicTransformerBlock); Timesteps / TimestepEmbedding are parts.py's
(embeddings.py at 0002117e9fa1351a3c0ee988d9c13e683cfb273b). The model's __init__ and forward are written here. The
same module tree, parameter names and shapes, call boundaries and arithmetic. Stand-in for what torch 1.13 lacks:
F.scaled_dot_product_attention (its math path, in sd_unet.py's Attention).

The constructs it shows: a learned class embedding (nn.Embedding indexed by an int64 noise level) summed into the
timestep embedding that every resnet reads; a conditioning image joined to the latents by channels at the input
(conv_in over 7 channels); transformer blocks whose first attention is a second cross-attention to the text (no
self-attention) at levels 1 and 2 (down and up), full self-attention at the deepest level (down, the mid block and
the first up block); a four-level U-Net whose first level has no attention.

Pipeline as StableDiffusionUpscalePipeline
(src/diffusers/pipelines/stable_diffusion/pipeline_stable_diffusion_upscale.py
at 4a7a893aead4810405d3ce1db8cacc61ed513526) calls it with its defaults (guidance_scale 9.0, noise_level 20,
negative_prompt None): _encode_prompt gives the text encoder's states of "" and of the prompt, joined
cat([negative_prompt_embeds, prompt_embeds]) (here both drawn at random, [1, 6, 32] each); preprocess leaves the
image in [-1, 1] (here drawn uniform, [1, 3, 8, 8]); before the loop noise_level = torch.tensor([noise_level],
dtype=torch.long), image = self.low_res_scheduler.add_noise(image, noise, noise_level) (DDPMScheduler:
√ᾱ[20]·image + √(1 − ᾱ[20])·noise, ᾱ from the x4-upscaling.yaml's low-scale schedule: betas a squared linspace of
√1e-4 .. √0.02 over 1000 steps; computed in inputs, the noised image is the request input "image"), image =
torch.cat([image] * 2), noise_level = torch.cat([noise_level] * image.shape[0]) ([20, 20]); the latents take the
low-res image's size (here [1, 4, 8, 8]); each step latent_model_input = torch.cat([latents] * 2), then
torch.cat([latent_model_input, image], dim=1) ([2, 7, 8, 8]), self.unet(latent_model_input, t,
encoder_hidden_states=prompt_embeds, class_labels=noise_level).sample, chunk(2), uncond + 9.0·(text − uncond). t the
scheduler's timestep, a 0-d tensor: here σ·1000 in f32, as sd_unet.py and sdxl_unet.py take it; scale_model_input and
the scheduler's step are left to run.py's 3-step flow Euler loop, which takes the guided prediction (the checkpoint
predicts v) as the velocity as is. The pre-loop concatenations are done in call (each step the same tensors).

Tiny config (the checkpoint's unet/config.json: block_out_channels (256, 512, 512, 1024), layers_per_block 2,
attention_head_dim 8, cross_attention_dim 1024, norm_num_groups 32, num_class_embeds 1000, sample_size 128) scaled:
block_out_channels (8, 16, 16, 32), layers_per_block 1 (two resnets an up block, as sd_unet.py's blocks build them),
attention_head_dim 2 (heads of 8, 8 and 16 channels at the attention levels), norm_num_groups 4, cross_attention_dim
32 (1024 / 32 as the widths: the text as wide as the deepest level, as in the checkpoint, and unlike levels 1 and 2,
so that an only-cross attn1's to_k / to_v differ in shape from a self-attention's), num_class_embeds 1000 as
released, time_embed_dim 32; latents [1, 4, 8, 8] (maps of 8x8, 4x4, 2x2, 1x1 by level), the UNet's input
[2, 7, 8, 8]. About 7.3 MB in f32 (1296 captured calls).

usage: /usr/bin/python3 bench/unseen/replicas/sd_upscale_unet.py OUTDIR
REPLICA_DTYPE=bf16 [REPLICA_DEVICE=cuda] as run.py's replicas: the bf16 run, beside the f32 one.
"""
import sys

import torch
import torch.nn as nn

import sd_unet
from parts import TimestepEmbedding, Timesteps
from run import capture
from sd_unet import Attention, DownBlock2D, UNetMidBlock2DCrossAttn, UpBlock2D


class BasicTransformerBlock(sd_unet.BasicTransformerBlock):
    """attention.BasicTransformerBlock (norm_type "layer_norm") with only_cross_attention: attn1 built with
    cross_attention_dim and called on the text."""

    def __init__(self, dim, heads, dim_head, cross_attention_dim, only_cross_attention=False):
        super().__init__(dim, heads, dim_head, cross_attention_dim)
        self.only_cross_attention = only_cross_attention
        # 1. Self-Attn (cross-attention when only_cross_attention)
        self.attn1 = Attention(dim, cross_attention_dim=cross_attention_dim if only_cross_attention else None,
                               heads=heads, dim_head=dim_head)

    def forward(self, hidden_states, encoder_hidden_states=None):
        # 1. Self-Attention
        norm_hidden_states = self.norm1(hidden_states)
        attn_output = self.attn1(norm_hidden_states,
                                 encoder_hidden_states=encoder_hidden_states if self.only_cross_attention else None)
        hidden_states = attn_output + hidden_states
        # 2. Cross-Attention
        norm_hidden_states = self.norm2(hidden_states)
        attn_output = self.attn2(norm_hidden_states, encoder_hidden_states=encoder_hidden_states)
        hidden_states = attn_output + hidden_states
        # 3. Feed-forward
        norm_hidden_states = self.norm3(hidden_states)
        ff_output = self.ff(norm_hidden_states)
        hidden_states = ff_output + hidden_states
        return hidden_states


class Transformer2DModel(sd_unet.Transformer2DModel):
    def __init__(self, heads, dim_head, in_channels, cross_attention_dim, groups, linear=False, layers=1,
                 only_cross_attention=False):
        super().__init__(heads, dim_head, in_channels, cross_attention_dim, groups, linear, layers)
        inner = heads * dim_head
        self.transformer_blocks = nn.ModuleList([
            BasicTransformerBlock(inner, heads, dim_head, cross_attention_dim, only_cross_attention)
            for _ in range(layers)])


class CrossAttnDownBlock2D(sd_unet.CrossAttnDownBlock2D):
    def __init__(self, cin, cout, temb, heads, cross, groups, add_downsample, linear=False, layers=1,
                 only_cross_attention=False):
        super().__init__(cin, cout, temb, heads, cross, groups, add_downsample, linear, layers)
        self.attentions = nn.ModuleList([Transformer2DModel(heads, cout // heads, cout, cross, groups, linear, layers,
                                                            only_cross_attention)])


class CrossAttnUpBlock2D(sd_unet.CrossAttnUpBlock2D):
    def __init__(self, cin, prev, cout, temb, heads, cross, groups, add_upsample, linear=False, tlayers=1, layers=2,
                 only_cross_attention=False):
        super().__init__(cin, prev, cout, temb, heads, cross, groups, add_upsample, linear, tlayers, layers)
        self.attentions = nn.ModuleList([Transformer2DModel(heads, cout // heads, cout, cross, groups, linear, tlayers,
                                                            only_cross_attention)
                                         for _ in range(layers)])


class UNet2DConditionModel(nn.Module):
    def __init__(self, in_channels=7, out_channels=4, flip_sin_to_cos=True, freq_shift=0,
                 down_block_types=("DownBlock2D", "CrossAttnDownBlock2D", "CrossAttnDownBlock2D",
                                   "CrossAttnDownBlock2D"),
                 up_block_types=("CrossAttnUpBlock2D", "CrossAttnUpBlock2D", "CrossAttnUpBlock2D", "UpBlock2D"),
                 only_cross_attention=(True, True, True, False), block_out_channels=(8, 16, 16, 32),
                 norm_num_groups=4, cross_attention_dim=32, attention_head_dim=2, use_linear_projection=True,
                 class_embed_type=None, num_class_embeds=1000):
        super().__init__()
        # upstream: num_attention_heads = num_attention_heads or attention_head_dim (the naming issue)
        num_attention_heads = attention_head_dim
        self.class_embed_type = class_embed_type
        # input
        self.conv_in = nn.Conv2d(in_channels, block_out_channels[0], kernel_size=3, padding=1)
        # time (_set_time_proj, "positional")
        time_embed_dim = block_out_channels[0] * 4
        self.time_proj = Timesteps(block_out_channels[0], flip_sin_to_cos, freq_shift)
        timestep_input_dim = block_out_channels[0]
        self.time_embedding = TimestepEmbedding(timestep_input_dim, time_embed_dim)
        self.encoder_hid_proj = None
        # class embedding (_set_class_embedding: class_embed_type None and num_class_embeds given)
        if class_embed_type is None and num_class_embeds is not None:
            self.class_embedding = nn.Embedding(num_class_embeds, time_embed_dim)
        else:
            self.class_embedding = None
        self.time_embed_act = None

        self.down_blocks = nn.ModuleList([])
        self.up_blocks = nn.ModuleList([])
        if isinstance(only_cross_attention, bool):
            only_cross_attention = [only_cross_attention] * len(down_block_types)
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
                                                  not is_final_block, use_linear_projection, 1,
                                                  only_cross_attention[i])
            else:
                down_block = DownBlock2D(input_channel, output_channel, blocks_time_embed_dim, norm_num_groups,
                                         not is_final_block)
            self.down_blocks.append(down_block)

        # mid (UNetMidBlock2DCrossAttn: self-attention kept)
        self.mid_block = UNetMidBlock2DCrossAttn(block_out_channels[-1], blocks_time_embed_dim,
                                                 num_attention_heads[-1], cross_attention_dim, norm_num_groups,
                                                 use_linear_projection, 1)

        # count how many layers upsample the images
        self.num_upsamplers = 0

        # up (reversed_layers_per_block[i] + 1 = 2 resnets an up block)
        reversed_block_out_channels = list(reversed(block_out_channels))
        reversed_num_attention_heads = list(reversed(num_attention_heads))
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
            if up_block_type == "CrossAttnUpBlock2D":
                up_block = CrossAttnUpBlock2D(input_channel, prev_output_channel, output_channel,
                                              blocks_time_embed_dim, reversed_num_attention_heads[i],
                                              cross_attention_dim, norm_num_groups, add_upsample,
                                              use_linear_projection, 1, 2, only_cross_attention[i])
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

    def get_class_embed(self, sample, class_labels):
        class_emb = None
        if self.class_embedding is not None:
            if class_labels is None:
                raise ValueError("class_labels should be provided when num_class_embeds > 0")
            if self.class_embed_type == "timestep":
                class_labels = self.time_proj(class_labels)
                class_labels = class_labels.to(dtype=sample.dtype)
            class_emb = self.class_embedding(class_labels).to(dtype=sample.dtype)
        return class_emb

    def forward(self, sample, timestep, encoder_hidden_states, class_labels=None, timestep_cond=None,
                attention_mask=None, cross_attention_kwargs=None, added_cond_kwargs=None, return_dict=True):
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
        class_emb = self.get_class_embed(sample=sample, class_labels=class_labels)
        if class_emb is not None:
            emb = emb + class_emb
        # no addition embedding, no time_embed_act, no encoder_hid_proj
        # 2. pre-process
        sample = self.conv_in(sample)
        # 3. down
        down_block_res_samples = (sample,)
        for downsample_block in self.down_blocks:
            if isinstance(downsample_block, sd_unet.CrossAttnDownBlock2D):
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
            if isinstance(upsample_block, sd_unet.CrossAttnUpBlock2D):
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


LOW_RES = 8  # the low-res image's side; the latents take its size (the VAE's scale factor 4 makes the x4 output)
NOISE_LEVEL = 20  # StableDiffusionUpscalePipeline.__call__'s default
GUIDANCE_SCALE = 9.0  # StableDiffusionUpscalePipeline.__call__'s default


def low_res_add_noise(image, noise, noise_level):
    """DDPMScheduler.add_noise with the low-scale schedule (betas = linspace(√1e-4, √0.02, 1000)², f32)."""
    betas = torch.linspace(0.0001 ** 0.5, 0.02 ** 0.5, 1000, dtype=torch.float32) ** 2
    alphas_cumprod = torch.cumprod(1.0 - betas, dim=0)
    sqrt_alpha_prod = alphas_cumprod[noise_level] ** 0.5
    sqrt_alpha_prod = sqrt_alpha_prod.flatten()
    while len(sqrt_alpha_prod.shape) < len(image.shape):
        sqrt_alpha_prod = sqrt_alpha_prod.unsqueeze(-1)
    sqrt_one_minus_alpha_prod = (1 - alphas_cumprod[noise_level]) ** 0.5
    sqrt_one_minus_alpha_prod = sqrt_one_minus_alpha_prod.flatten()
    while len(sqrt_one_minus_alpha_prod.shape) < len(image.shape):
        sqrt_one_minus_alpha_prod = sqrt_one_minus_alpha_prod.unsqueeze(-1)
    return sqrt_alpha_prod * image + sqrt_one_minus_alpha_prod * noise


def inputs(g):
    # _encode_prompt: the text encoder's states of the prompt and of ""; preprocess: the image in [-1, 1]; step 5:
    # the image noised by the low-res scheduler at noise_level (int64 [1])
    prompt_embeds = torch.randn((1, 6, 32), generator=g)
    negative_prompt_embeds = torch.randn((1, 6, 32), generator=g)
    image = 2.0 * torch.rand((1, 3, LOW_RES, LOW_RES), generator=g) - 1.0
    noise_level = torch.tensor([NOISE_LEVEL], dtype=torch.long)
    noise = torch.randn(image.shape, generator=g)
    image = low_res_add_noise(image, noise, noise_level)
    return {"encoder_hidden_states": prompt_embeds, "negative_encoder_hidden_states": negative_prompt_embeds,
            "image": image, "noise_level": noise_level,
            "noise": torch.randn((1, 4, LOW_RES, LOW_RES), generator=g)}


def call(model, x, sigma, c):
    # StableDiffusionUpscalePipeline with guidance 9.0: [negative, prompt], the noised image and the noise level
    # twice, the latents twice joined by channels to the image, the scheduler's 0-d t
    prompt_embeds = torch.cat([c["negative_encoder_hidden_states"], c["encoder_hidden_states"]])
    image = torch.cat([c["image"]] * 2 * 1)  # batch_multiplier * num_images_per_prompt
    noise_level = torch.cat([c["noise_level"]] * image.shape[0])
    latent_model_input = torch.cat([x] * 2)
    latent_model_input = torch.cat([latent_model_input, image], dim=1)
    t = torch.tensor(sigma * 1000.0, dtype=torch.float32, device=x.device)
    noise_pred = model(latent_model_input, t, encoder_hidden_states=prompt_embeds, class_labels=noise_level,
                       return_dict=False)[0]
    noise_pred_uncond, noise_pred_text = noise_pred.chunk(2)
    return noise_pred_uncond + GUIDANCE_SCALE * (noise_pred_text - noise_pred_uncond)


PRODUCER = dict(
    library_source="replica of huggingface/diffusers unet_2d_condition.py@00f354d14d00 (x4 upscaler configuration) "
                   "and the parts it imports (torch 1.13); pipeline_stable_diffusion_upscale.py@4a7a893aead4",
    timestep="sigma*1000, f32 0-d (StableDiffusionUpscalePipeline: the scheduler's t), expanded to the guided batch "
             "of 2",
    velocity="uncond + 9.0*(text - uncond) of the prediction halves, as is",
    note="x4 upscaler UNet2DConditionModel at widths 8/16/16/32: conv_in over 7 channels (the latents joined by "
         "channels to the low-res image noised at level 20); DownBlock2D, three CrossAttnDownBlock2D (2 heads, "
         "linear proj_in/proj_out), the first two with only_cross_attention (attn1 a second cross-attention to the "
         "text), the third with self-attention; UNetMidBlock2DCrossAttn; CrossAttnUpBlock2D x3 (the first with "
         "self-attention, then only_cross_attention) and UpBlock2D; class embedding nn.Embedding(1000, 32) of the "
         "int64 noise level added to the time embedding; classifier-free guidance 9.0 on a doubled batch "
         "[negative, prompt]")

if __name__ == "__main__":
    capture("sd_upscale_unet", build, inputs, call, sys.argv[1], PRODUCER)
