"""Kandinsky 2.1's decoder UNet (UNet2DConditionModel as kandinsky-community/kandinsky-2-1 configures it) under
KandinskyPipeline's classifier-free guidance, reimplemented for torch 1.13 (no diffusers here), captured small in f32
on CPU.

The UNet is kandinsky22_decoder.py's (huggingface/diffusers src/diffusers/models/unets/unet_2d_condition.py at
00f354d14d00ed60cfce2ea7c5efceca2e4c4c3f line for line with the Kandinsky 2.x block layout: ResnetDownsampleBlock2D,
SimpleCrossAttnDownBlock2D, UNetMidBlock2DSimpleCrossAttn, SimpleCrossAttnUpBlock2D, ResnetUpsampleBlock2D of
unet_2d_blocks.py at 049ca3822f9eb3621c96c11bba58b8e579cb3cc1, resamplers that are ResnetBlock2Ds pooling or
upsampling inside, resnet_time_scale_shift "scale_shift", and attention_processor.py's Attention with added_kv_proj_dim
and AttnAddedKVProcessor2_0 at 001d4da0eb5809c779120c51f74ef73d6078b08c: the group-normed map's queries over the
encoder states' add_k_proj/add_v_proj projections joined BEFORE the map's own to_k/to_v keys and values, one softmax,
to_out, the residual added inside), imported whole with its blocks (if_unet.py's, over sd_unet.py's ResnetBlock2D).
What 2.1 changes, written here after the same unet_2d_condition.py:
 - _set_encoder_hid_proj with encoder_hid_dim_type "text_image_proj": encoder_hid_proj = TextImageProjection(
   text_embed_dim=encoder_hid_dim, image_embed_dim=cross_attention_dim, cross_attention_dim=cross_attention_dim);
   process_encoder_hidden_states: encoder_hid_proj(encoder_hidden_states, image_embeds);
 - _set_add_embedding with addition_embed_type "text_image": add_embedding = TextImageTimeEmbedding(text_embed_dim=
   cross_attention_dim, image_embed_dim=cross_attention_dim, time_embed_dim); get_aug_embed: add_embedding(
   added_cond_kwargs["text_embeds"], added_cond_kwargs["image_embeds"]), added to the timestep embedding;
 - src/diffusers/models/embeddings.py at 0002117e9fa1351a3c0ee988d9c13e683cfb273b: TextImageProjection (image_embeds
   Linear to num_image_text_embeds (10) · cross_attention_dim, reshaped to 10 rows; text_proj Linear of the text
   encoder's states; cat([image rows, text rows], dim=1)), TextImageTimeEmbedding (text_proj Linear then text_norm
   LayerNorm of the pooled text; image_proj Linear of the image embedding; image + text).
Pipeline: src/diffusers/pipelines/kandinsky/pipeline_kandinsky.py at cb5010f0ca7b4d8143b2fe375ec5067402b954af
(KandinskyPipeline.__call__ with guidance_scale 4.0, its default; num_images_per_prompt 1): _encode_prompt's
[negative, prompt] batches of the pooled text embedding (prompt_embeds) and of the text encoder's states
(text_encoder_hidden_states; text_mask is built but not passed to the UNet), image_embeds = cat([negative_image_embeds,
image_embeds]) (.to(prompt_embeds.dtype)), all before the loop; each step latent_model_input = cat([latents] * 2),
self.unet(sample, timestep=t, encoder_hidden_states=text_encoder_hidden_states, added_cond_kwargs={"text_embeds":
prompt_embeds, "image_embeds": image_embeds}, return_dict=False)[0], then noise_pred.split(latents.shape[1], dim=1)
into noise and variance, the noise chunked in two, uncond + 4·(text − uncond), joined to the text half's variance
(torch.cat(..., dim=1)), and (the DDIM scheduler's variance_type not learned) split again to its first
latents.shape[1] channels. The text encoder (MultilingualCLIP) and the prior are not replicated: their outputs are
drawn at random, for the negative prompt "" and the prior's negative (zero-prompt) image embedding too.
Stand-in for what torch 1.13 lacks: F.scaled_dot_product_attention (run.py's sdpa, its math path).

The constructs it shows beyond kandinsky22_decoder.py: text and image both conditioning, each twice (the text
encoder's states projected and the image embedding projected to 10 rows, joined as the encoder states every
added-KV attention reads; the pooled text projected and layer-normed plus the image embedding projected, added to
the timestep embedding); a batch of two made from one request (latents repeated; [negative, prompt] conditioning);
the output's channel split, guidance on its first half across the batch's halves and the variance half re-joined,
then split off again.

How it maps into run.py's loop x ← x + (σ_next − σ)·v: t = σ·1000 (f32, 0-dim as a scheduler's timesteps element,
expanded by the UNet to the batch of 2); the guided noise prediction's first 4 channels taken as the velocity as is.

Tiny config (kandinsky-2-1's unet config: block_out_channels (384, 768, 1152, 1536), layers_per_block 3,
attention_head_dim 64, norm_num_groups 32, cross_attention_dim 768, encoder_hid_dim 1024, in 4, out 8):
block_out_channels (8, 16, 24) (three levels: one ResnetDownsampleBlock2D then two SimpleCrossAttnDownBlock2D, and
back), layers_per_block 1 (2 resnets an up block), attention_head_dim 4 (4 and 6 heads), norm_num_groups 4,
cross_attention_dim 16, encoder_hid_dim 24, time_embed_dim 32; text states [1, 7, 24], pooled text [1, 16], image
embeddings [1, 16]; latents [1, 4, 8, 8] (maps 8, 4, 2); the encoder states 10 + 7 = 17 rows (no map's cell count).

usage: /usr/bin/python3 bench/unseen/replicas/kandinsky21_unet.py OUTDIR
REPLICA_DTYPE=bf16 [REPLICA_DEVICE=cuda] as run.py's replicas: the bf16 run, beside the f32 one.
"""
import sys

import torch
import torch.nn as nn

import kandinsky22_decoder
from run import capture


class TextImageProjection(nn.Module):
    def __init__(self, text_embed_dim=1024, image_embed_dim=768, cross_attention_dim=768, num_image_text_embeds=10):
        super().__init__()
        self.num_image_text_embeds = num_image_text_embeds
        self.image_embeds = nn.Linear(image_embed_dim, self.num_image_text_embeds * cross_attention_dim)
        self.text_proj = nn.Linear(text_embed_dim, cross_attention_dim)

    def forward(self, text_embeds, image_embeds):
        batch_size = text_embeds.shape[0]
        # image
        image_text_embeds = self.image_embeds(image_embeds)
        image_text_embeds = image_text_embeds.reshape(batch_size, self.num_image_text_embeds, -1)
        # text
        text_embeds = self.text_proj(text_embeds)
        return torch.cat([image_text_embeds, text_embeds], dim=1)


class TextImageTimeEmbedding(nn.Module):
    def __init__(self, text_embed_dim=768, image_embed_dim=768, time_embed_dim=1536):
        super().__init__()
        self.text_proj = nn.Linear(text_embed_dim, time_embed_dim)
        self.text_norm = nn.LayerNorm(time_embed_dim)
        self.image_proj = nn.Linear(image_embed_dim, time_embed_dim)

    def forward(self, text_embeds, image_embeds):
        # text
        time_text_embeds = self.text_proj(text_embeds)
        time_text_embeds = self.text_norm(time_text_embeds)
        # image
        time_image_embeds = self.image_proj(image_embeds)
        return time_image_embeds + time_text_embeds


class UNet2DConditionModel(kandinsky22_decoder.UNet2DConditionModel):
    """kandinsky22_decoder.py's model with Kandinsky 2.1's encoder_hid_dim_type "text_image_proj" and
    addition_embed_type "text_image" (the parent's two 2.2 modules replaced in place: the same slots of the module
    tree, encoder_hid_proj and add_embedding, as upstream's _set_encoder_hid_proj / _set_add_embedding fill them)."""

    def __init__(self, block_out_channels=(8, 16, 24), layers_per_block=1, cross_attention_dim=16, encoder_hid_dim=24,
                 attention_head_dim=4, norm_num_groups=4):
        n = len(block_out_channels)
        super().__init__(in_channels=4, out_channels=8,
                         down_block_types=("ResnetDownsampleBlock2D",) + ("SimpleCrossAttnDownBlock2D",) * (n - 1),
                         mid_block_type="UNetMidBlock2DSimpleCrossAttn",
                         up_block_types=("SimpleCrossAttnUpBlock2D",) * (n - 1) + ("ResnetUpsampleBlock2D",),
                         block_out_channels=block_out_channels, layers_per_block=layers_per_block,
                         norm_num_groups=norm_num_groups, cross_attention_dim=cross_attention_dim,
                         encoder_hid_dim=encoder_hid_dim, encoder_hid_dim_type="text_image_proj",
                         attention_head_dim=attention_head_dim, resnet_time_scale_shift="scale_shift",
                         addition_embed_type="text_image")
        time_embed_dim = block_out_channels[0] * 4
        # _set_encoder_hid_proj, "text_image_proj" (Kandinsky 2.1)
        self.encoder_hid_proj = TextImageProjection(text_embed_dim=encoder_hid_dim,
                                                    image_embed_dim=cross_attention_dim,
                                                    cross_attention_dim=cross_attention_dim)
        # _set_add_embedding, "text_image" (Kandinsky 2.1)
        self.add_embedding = TextImageTimeEmbedding(text_embed_dim=cross_attention_dim,
                                                    image_embed_dim=cross_attention_dim,
                                                    time_embed_dim=time_embed_dim)

    def get_aug_embed(self, emb, encoder_hidden_states, added_cond_kwargs):
        aug_emb = None
        if self.addition_embed_type == "text_image":
            # Kandinsky 2.1 - style
            if "image_embeds" not in added_cond_kwargs:
                raise ValueError("addition_embed_type 'text_image' requires `image_embeds` in `added_cond_kwargs`")
            image_embs = added_cond_kwargs.get("image_embeds")
            text_embs = added_cond_kwargs.get("text_embeds", encoder_hidden_states)
            aug_emb = self.add_embedding(text_embs, image_embs)
        return aug_emb

    def process_encoder_hidden_states(self, encoder_hidden_states, added_cond_kwargs):
        if self.encoder_hid_proj is not None and self.encoder_hid_dim_type == "text_image_proj":
            # Kandinsky 2.1 - style
            if "image_embeds" not in added_cond_kwargs:
                raise ValueError("encoder_hid_dim_type 'text_image_proj' requires `image_embeds` in "
                                 "`added_cond_kwargs`")
            image_embeds = added_cond_kwargs.get("image_embeds")
            encoder_hidden_states = self.encoder_hid_proj(encoder_hidden_states, image_embeds)
        return encoder_hidden_states


def build():
    return UNet2DConditionModel()


GUIDANCE_SCALE = 4.0  # KandinskyPipeline's default
HEIGHT = WIDTH = 64  # get_new_h_w(64, 64, movq_scale_factor 8): latents of 8 × 8
TEXT_LEN = 7  # the tokenizer's max_length 77 (10 + 7 = 17 encoder rows: no map of this config has 17 cells)


def inputs(g):
    # the text encoder's (pooled embedding, states) for the prompt and for the negative prompt ""; the prior's
    # image_embeds and negative_image_embeds (its zero_embeds); prepare_latents (DDIM's init_noise_sigma 1)
    return {"prompt_embeds": torch.randn((1, 16), generator=g),
            "text_encoder_hidden_states": torch.randn((1, TEXT_LEN, 24), generator=g),
            "negative_prompt_embeds": torch.randn((1, 16), generator=g),
            "uncond_text_encoder_hidden_states": torch.randn((1, TEXT_LEN, 24), generator=g),
            "image_embeds": torch.randn((1, 16), generator=g),
            "negative_image_embeds": torch.randn((1, 16), generator=g),
            "noise": torch.randn((1, 4, HEIGHT // 8, WIDTH // 8), generator=g)}


def prepare(model, c):
    # KandinskyPipeline.__call__ before its loop (num_images_per_prompt 1): _encode_prompt's duplicates and
    # [negative, prompt] batches, then the image embeddings' [negative, image] batch
    num_images_per_prompt, batch_size = 1, 1
    prompt_embeds = c["prompt_embeds"].repeat_interleave(num_images_per_prompt, dim=0)
    text_encoder_hidden_states = c["text_encoder_hidden_states"].repeat_interleave(num_images_per_prompt, dim=0)
    negative_prompt_embeds = c["negative_prompt_embeds"]
    seq_len = negative_prompt_embeds.shape[1]
    negative_prompt_embeds = negative_prompt_embeds.repeat(1, num_images_per_prompt)
    negative_prompt_embeds = negative_prompt_embeds.view(batch_size * num_images_per_prompt, seq_len)
    uncond_text_encoder_hidden_states = c["uncond_text_encoder_hidden_states"]
    seq_len = uncond_text_encoder_hidden_states.shape[1]
    uncond_text_encoder_hidden_states = uncond_text_encoder_hidden_states.repeat(1, num_images_per_prompt, 1)
    uncond_text_encoder_hidden_states = uncond_text_encoder_hidden_states.view(
        batch_size * num_images_per_prompt, seq_len, -1)
    c["cfg_prompt_embeds"] = torch.cat([negative_prompt_embeds, prompt_embeds])
    c["cfg_text_encoder_hidden_states"] = torch.cat([uncond_text_encoder_hidden_states, text_encoder_hidden_states])
    image_embeds = c["image_embeds"].repeat_interleave(num_images_per_prompt, dim=0)
    negative_image_embeds = c["negative_image_embeds"].repeat_interleave(num_images_per_prompt, dim=0)
    c["cfg_image_embeds"] = torch.cat([negative_image_embeds, image_embeds], dim=0).to(
        dtype=c["cfg_prompt_embeds"].dtype)


def call(model, latents, sigma, c):
    t = torch.tensor(sigma * 1000.0, dtype=torch.float32, device=latents.device)
    # expand the latents if we are doing classifier free guidance
    latent_model_input = torch.cat([latents] * 2)
    added_cond_kwargs = {"text_embeds": c["cfg_prompt_embeds"], "image_embeds": c["cfg_image_embeds"]}
    noise_pred = model(sample=latent_model_input, timestep=t, encoder_hidden_states=c["cfg_text_encoder_hidden_states"],
                       added_cond_kwargs=added_cond_kwargs, return_dict=False)[0]
    noise_pred, variance_pred = noise_pred.split(latents.shape[1], dim=1)
    noise_pred_uncond, noise_pred_text = noise_pred.chunk(2)
    _, variance_pred_text = variance_pred.chunk(2)
    noise_pred = noise_pred_uncond + GUIDANCE_SCALE * (noise_pred_text - noise_pred_uncond)
    noise_pred = torch.cat([noise_pred, variance_pred_text], dim=1)
    # the scheduler's variance_type is not learned: the first latents.shape[1] channels
    noise_pred, _ = noise_pred.split(latents.shape[1], dim=1)
    return noise_pred


PRODUCER = dict(
    library_source="replica of huggingface/diffusers KandinskyPipeline (pipeline_kandinsky.py@cb5010f0ca7b) on "
                   "unet_2d_condition.py@00f354d14d00 in Kandinsky 2.1's configuration (TextImageProjection, "
                   "TextImageTimeEmbedding of embeddings.py@0002117e9fa1; the blocks of kandinsky22_decoder.py; "
                   "torch 1.13)",
    timestep="sigma*1000, f32 0-dim (the scheduler's t), expanded by the UNet to the batch of 2",
    velocity="split(4, dim=1) of the output; uncond + 4·(text − uncond) on the noise halves; cat with the text "
             "half's variance; split(4) again: the first 4 channels, as is",
    note="Kandinsky 2.1's decoder UNet2DConditionModel at widths 8/16/24, 1 resnet a down block and 2 an up block: "
         "ResnetDownsampleBlock2D, SimpleCrossAttnDownBlock2D x2, UNetMidBlock2DSimpleCrossAttn, "
         "SimpleCrossAttnUpBlock2D x2, ResnetUpsampleBlock2D; SiLU scale_shift resnets; AttnAddedKVProcessor2_0 "
         "(encoder rows' add_k/add_v before the map's keys and values, GroupNorm first, residual inside); encoder "
         "states = TextImageProjection(text states [., 7, 24], image embedding [., 16]) (10 image rows + 7 text rows); "
         "TextImageTimeEmbedding(pooled text, image) added to the time embedding; batch [negative, prompt] with the "
         "latents repeated; guidance scale 4 on the noise half, 8 output channels")

if __name__ == "__main__":
    capture("kandinsky21_unet", build, inputs, call, sys.argv[1], PRODUCER, prepare=prepare)
