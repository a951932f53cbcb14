"""Kolors' UNet (UNet2DConditionModel as Kwai-Kolors/Kolors-diffusers configures it), reimplemented for torch 1.13
(no diffusers here), captured small in f32 on CPU.

Follows huggingface/diffusers src/diffusers/models/unets/unet_2d_condition.py at
00f354d14d00ed60cfce2ea7c5efceca2e4c4c3f line for line with Kolors' configuration: SDXL's layout (down_block_types
("DownBlock2D", "CrossAttnDownBlock2D", "CrossAttnDownBlock2D"), up_block_types ("CrossAttnUpBlock2D",
"CrossAttnUpBlock2D", "UpBlock2D"), transformer_layers_per_block per level, attention_head_dim per level read as head
counts, use_linear_projection, addition_embed_type "text_time") plus encoder_hid_dim_type "text_proj"
(_set_encoder_hid_proj: encoder_hid_proj = nn.Linear(encoder_hid_dim, cross_attention_dim), registered after
time_embedding and before the add embedding; process_encoder_hidden_states: encoder_hidden_states =
self.encoder_hid_proj(encoder_hidden_states), called once per forward after the time and added embeddings are summed
and before conv_in, and the projected states are what every cross-attention reads). The "text_time" embedding reads
the pooled ChatGLM output as text_embeds, so projection_class_embeddings_input_dim = ChatGLM's hidden size + 6 ·
addition_time_embed_dim (the checkpoint's 5632 = 4096 + 6·256). No class embedding, time_embedding_act_fn None,
timestep_cond None (time_cond_proj_dim None), no masks, upsample_size None (the latent a multiple of 4). The __init__
and the get_time_embed / get_aug_embed helpers are sdxl_unet.py's (the same file at the same commit, SDXL's
configuration), extended here by encoder_hid_proj; the blocks are sd_unet.py's (unet_2d_blocks.py at
049ca3822f9eb3621c96c11bba58b8e579cb3cc1, transformer_2d.py at 000fa82a1e6a7730dddb666ff6b2f681de3c2746 with linear
projections, attention.py's BasicTransformerBlock with a GEGLU FeedForward, AttnProcessor2_0) and parts.py's
Timesteps / TimestepEmbedding (embeddings.py at 0002117e9fa1351a3c0ee988d9c13e683cfb273b). Only the forward (to call
process_encoder_hidden_states where upstream does) is written here. The same module tree, parameter names and shapes,
call boundaries and arithmetic. Stand-in for what torch 1.13 lacks: F.scaled_dot_product_attention (its math path,
in sd_unet.py's Attention).

The constructs it shows beyond sdxl_unet.py's SDXL UNet: the text states projected once by a Linear (ChatGLM's
width to the cross-attention width) before every cross-attention reads them; the text_time added embedding fed by a
pooled state from the same (single) text encoder, wider than the cross-attention width; classifier-free guidance
over a doubled batch whose halves differ in text states, pooled embedding (and, with the defaults, nothing else).

Pipeline as KolorsPipeline (src/diffusers/pipelines/kolors/pipeline_kolors.py at
077f96fc4280bf0e23d0d024e3c64514efeadba1) calls it with its defaults (guidance_scale 5.0, so
do_classifier_free_guidance; force_zeros_for_empty_prompt False, negative_prompt None): encode_prompt takes ChatGLM3's
hidden_states[-2] permuted to [batch, seq, 4096] as prompt_embeds and hidden_states[-1][-1] (the last position's
final state, [batch, 4096]) as pooled_prompt_embeds, and the same of the empty prompt "" as the negatives (here all
four drawn at random: [1, 6, 32] and [1, 32]); _get_add_time_ids builds (original_size + crops_coords_top_left +
target_size) = (32, 64, 0, 0, 32, 64) for a 32x64 (h x w) image as torch.tensor([...], dtype=prompt_embeds.dtype),
and
negative_add_time_ids = add_time_ids (no negative sizes given); before the loop prompt_embeds = cat([negative,
prompt]), add_text_embeds = cat([negative_pooled, pooled]), add_time_ids = cat([negative, positive]).repeat(1, 1);
each step latent_model_input = cat([latents] * 2), self.unet(latent_model_input, t, encoder_hidden_states=
prompt_embeds, timestep_cond=None, cross_attention_kwargs=None, added_cond_kwargs={"text_embeds": add_text_embeds,
"time_ids": add_time_ids}, return_dict=False)[0], chunk(2), uncond + 5.0·(text − uncond). t the scheduler's timestep,
a 0-d tensor (EulerDiscreteScheduler's are f32): here σ·1000 in f32, as sd_unet.py and sdxl_unet.py take it;
scale_model_input's division by √(σ² + 1) and the scheduler's step are left to run.py's 3-step flow Euler loop, which
takes the guided noise prediction as the velocity as is (as sd_unet.py and sdxl_unet.py do). The pre-loop
concatenations are done in call (each step the same tensors), from the four encode_prompt outputs and add_time_ids
given as request inputs.

Tiny config (Kolors' unet/config.json: block_out_channels (320, 640, 1280), layers_per_block 2, attention_head_dim
(5, 10, 20), transformer_layers_per_block (1, 2, 10), cross_attention_dim 2048, encoder_hid_dim 4096,
addition_time_embed_dim 256, projection_class_embeddings_input_dim 5632, norm_num_groups 32, sample_size 128) scaled
as sdxl_unet.py scales SDXL's: block_out_channels (8, 16, 32), layers_per_block 1 (two resnets an up block),
attention_head_dim (1, 2, 4) (a head width of 8 at every level, as Kolors' 64), transformer_layers_per_block (1, 2,
3), norm_num_groups 4, cross_attention_dim 16, encoder_hid_dim 32 (ChatGLM's hidden size here: text states and pooled
embedding 32 wide), addition_time_embed_dim 8, projection_class_embeddings_input_dim 80 = 32 + 6·8, time_embed_dim 32;
latents [1, 4, 4, 8] (the UNet's input [2, 4, 4, 8]; maps of 4x8, 2x4, 1x2 by level), text [1, 6, 32] each half.
About 7.8 MB in f32 (1665 captured calls); an 8x8 latent made 11 MB.

usage: /usr/bin/python3 bench/unseen/replicas/kolors_unet.py OUTDIR
REPLICA_DTYPE=bf16 [REPLICA_DEVICE=cuda] as run.py's replicas: the bf16 run, beside the f32 one.
"""
import sys

import torch
import torch.nn as nn

from run import capture
from sd_unet import CrossAttnDownBlock2D, CrossAttnUpBlock2D
from sdxl_unet import UNet2DConditionModel as SDXLUNet2DConditionModel


class UNet2DConditionModel(SDXLUNet2DConditionModel):
    """sdxl_unet.py's UNet2DConditionModel with encoder_hid_dim_type "text_proj"."""

    def __init__(self, in_channels=4, out_channels=4, flip_sin_to_cos=True, freq_shift=0,
                 down_block_types=("DownBlock2D", "CrossAttnDownBlock2D", "CrossAttnDownBlock2D"),
                 up_block_types=("CrossAttnUpBlock2D", "CrossAttnUpBlock2D", "UpBlock2D"),
                 block_out_channels=(8, 16, 32), norm_num_groups=4, cross_attention_dim=16,
                 transformer_layers_per_block=(1, 2, 3), attention_head_dim=(1, 2, 4), use_linear_projection=True,
                 encoder_hid_dim=32, encoder_hid_dim_type="text_proj", addition_embed_type="text_time",
                 addition_time_embed_dim=8, projection_class_embeddings_input_dim=80):
        super().__init__(in_channels=in_channels, out_channels=out_channels, flip_sin_to_cos=flip_sin_to_cos,
                         freq_shift=freq_shift, down_block_types=down_block_types, up_block_types=up_block_types,
                         block_out_channels=block_out_channels, norm_num_groups=norm_num_groups,
                         cross_attention_dim=cross_attention_dim,
                         transformer_layers_per_block=transformer_layers_per_block,
                         attention_head_dim=attention_head_dim, use_linear_projection=use_linear_projection,
                         addition_embed_type=addition_embed_type, addition_time_embed_dim=addition_time_embed_dim,
                         projection_class_embeddings_input_dim=projection_class_embeddings_input_dim)
        self.encoder_hid_dim_type = encoder_hid_dim_type
        # _set_encoder_hid_proj, "text_proj"
        del self.encoder_hid_proj
        self.encoder_hid_proj = nn.Linear(encoder_hid_dim, cross_attention_dim)
        # registered where upstream's __init__ registers it: after time_embedding, before the add embedding
        order = list(self._modules)
        order.remove("encoder_hid_proj")
        order.insert(order.index("time_embedding") + 1, "encoder_hid_proj")
        for name in order:
            self._modules[name] = self._modules.pop(name)  # to the end (a dict in torch 2, an OrderedDict in 1.13)

    def get_class_embed(self, sample, class_labels):
        # class_embedding None
        return None

    def process_encoder_hidden_states(self, encoder_hidden_states, added_cond_kwargs):
        if self.encoder_hid_proj is not None and self.encoder_hid_dim_type == "text_proj":
            encoder_hidden_states = self.encoder_hid_proj(encoder_hidden_states)
        return encoder_hidden_states

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
        # 1. time (time_embedding's cond_proj is None: timestep_cond unused)
        t_emb = self.get_time_embed(sample=sample, timestep=timestep)
        emb = self.time_embedding(t_emb)
        class_emb = self.get_class_embed(sample=sample, class_labels=class_labels)
        if class_emb is not None:
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


HEIGHT, WIDTH = 32, 64  # the image size: latents of HEIGHT / vae_scale_factor (8), non-square
SEQ_LEN = 6  # max_sequence_length (256 in the pipeline)
HIDDEN = 32  # ChatGLM3's hidden size (4096), as encoder_hid_dim
GUIDANCE_SCALE = 5.0  # KolorsPipeline.__call__'s default


def inputs(g):
    # encode_prompt: ChatGLM3's hidden_states[-2] (permuted to batch-first) and hidden_states[-1][-1] (the pooled
    # state), of the prompt and of the empty negative prompt; _get_add_time_ids: original + crop + target
    return {"encoder_hidden_states": torch.randn((1, SEQ_LEN, HIDDEN), generator=g),
            "negative_encoder_hidden_states": torch.randn((1, SEQ_LEN, HIDDEN), generator=g),
            "text_embeds": torch.randn((1, HIDDEN), generator=g),
            "negative_text_embeds": torch.randn((1, HIDDEN), generator=g),
            "time_ids": torch.tensor([list((HEIGHT, WIDTH) + (0, 0) + (HEIGHT, WIDTH))], dtype=torch.float32),
            "noise": torch.randn((1, 4, HEIGHT // 8, WIDTH // 8), generator=g)}


def call(model, x, sigma, c):
    # KolorsPipeline with guidance 5.0: [negative, prompt] halves, the latents twice, the scheduler's 0-d t
    prompt_embeds = torch.cat([c["negative_encoder_hidden_states"], c["encoder_hidden_states"]], dim=0)
    add_text_embeds = torch.cat([c["negative_text_embeds"], c["text_embeds"]], dim=0)
    negative_add_time_ids = c["time_ids"]
    add_time_ids = torch.cat([negative_add_time_ids, c["time_ids"]], dim=0)
    add_time_ids = add_time_ids.repeat(1 * 1, 1)  # batch_size * num_images_per_prompt
    latent_model_input = torch.cat([x] * 2)
    t = torch.tensor(sigma * 1000.0, dtype=torch.float32, device=x.device)
    added_cond_kwargs = {"text_embeds": add_text_embeds, "time_ids": add_time_ids}
    noise_pred = model(latent_model_input, t, encoder_hidden_states=prompt_embeds, timestep_cond=None,
                       cross_attention_kwargs=None, added_cond_kwargs=added_cond_kwargs, return_dict=False)[0]
    noise_pred_uncond, noise_pred_text = noise_pred.chunk(2)
    return noise_pred_uncond + GUIDANCE_SCALE * (noise_pred_text - noise_pred_uncond)


PRODUCER = dict(
    library_source="replica of huggingface/diffusers unet_2d_condition.py@00f354d14d00 (Kolors configuration) and "
                   "the parts it imports (torch 1.13); pipeline_kolors.py@077f96fc4280",
    timestep="sigma*1000, f32 0-d (KolorsPipeline: the scheduler's t), expanded to the guided batch of 2",
    velocity="uncond + 5.0*(text - uncond) of the noise prediction halves, as is",
    note="Kolors' UNet2DConditionModel (SDXL layout) at widths 8/16/32: DownBlock2D, then two CrossAttnDownBlock2D "
         "with 2 and 3 transformer layers (2 and 4 heads of width 8, linear proj_in/proj_out); "
         "UNetMidBlock2DCrossAttn with 3; CrossAttnUpBlock2D x2 and UpBlock2D; encoder_hid_proj text_proj: the "
         "ChatGLM states (32) through one Linear to the cross-attention width (16) before the blocks; "
         "addition_embed_type text_time: the six time_ids through Timesteps(8), joined after the pooled ChatGLM "
         "state (32), through add_embedding (80 -> 32) and added to the time embedding; classifier-free guidance "
         "5.0 on a doubled batch [negative, prompt]")

if __name__ == "__main__":
    capture("kolors_unet", build, inputs, call, sys.argv[1], PRODUCER)
