"""InstructPix2Pix: Stable Diffusion's UNet with 8 input channels (the noisy latents joined by channels with the
input image's latents) under the pipeline's three-way guidance, as StableDiffusionInstructPix2PixPipeline runs it,
reimplemented for torch 1.13 (no diffusers here), captured small in f32 on CPU.

The UNet is sd_unet.py's UNet2DConditionModel (unet_2d_condition.py in SD 1.x's layout, with the blocks and parts
sd_unet.py names), imported whole and built with in_channels 8 (timbrooks/instruct-pix2pix's unet config: SD 1.5's
with in_channels 8, out_channels 4). What this file adds follows huggingface/diffusers
src/diffusers/pipelines/stable_diffusion/pipeline_stable_diffusion_instruct_pix2pix.py at
020660152e105d46494f1515cc1f7694e03e5613, line for line:
 - _encode_prompt: prompt_embeds and negative_prompt_embeds (the text encoder's states for "": drawn, not zeros),
   each cast to the text encoder's dtype, repeated for num_images_per_prompt 1, then
   prompt_embeds = cat([prompt_embeds, negative_prompt_embeds, negative_prompt_embeds]) (pix2pix's order);
 - prepare_image_latents: the image given as latents (image.shape[1] == 4: image_latents = image, the branch that
   skips vae.encode), cast to prompt_embeds.dtype, cat([image_latents], dim=0), then with classifier-free guidance
   uncond_image_latents = zeros_like(image_latents) and image_latents = cat([image_latents, image_latents,
   uncond_image_latents]);
 - the loop: latent_model_input = cat([latents] * 3); scaled_latent_model_input = scheduler.scale_model_input (the
   identity for run.py's flow Euler, as for sd_unet.py); cat([scaled_latent_model_input, image_latents], dim=1);
   self.unet(scaled_latent_model_input, t, encoder_hidden_states=prompt_embeds, added_cond_kwargs=None,
   return_dict=False)[0]; noise_pred.chunk(3) as (text, image, uncond); noise_pred = uncond + guidance_scale·(text −
   image) + image_guidance_scale·(image − uncond), with the pipeline's defaults guidance_scale 7.5 and
   image_guidance_scale 1.5 (do_classifier_free_guidance: 7.5 > 1 and 1.5 >= 1).
Stand-in for what torch 1.13 lacks: F.scaled_dot_product_attention (run.sdpa, its math path; inside sd_unet.py).

The constructs it shows beyond sd_unet.py: a batch of three made from one request with two different pairings —
the caption as [prompt, negative, negative] and the image latents as [image, image, zeros] — so that the three rows
are (text + image, image only, neither); the latents repeated three times and joined by channels (4 + 4 = 8) with
those image latents before conv_in; the three predictions combined with two differences of neighbouring thirds,
uncond + 7.5·(text − image) + 1.5·(image − uncond).

How it maps into run.py's loop x ← x + (σ_next − σ)·v: t = σ·1000 (f32, 0-dim as a scheduler's timesteps element,
expanded by the UNet to the batch of 3); the guided noise prediction taken as the velocity as is, as sd_unet.py
takes its unguided one.

Tiny config: sd_unet.py's --small widths (block_out_channels (8, 16), 2 heads, GroupNorm of 4 groups, 16-wide text)
with in_channels 8; the image 64×32 (latents and image latents [1, 4, 8, 4]: not square, so that rows and columns
cannot be swapped unseen); text [1, 6, 16] for the prompt and for "".

usage: /usr/bin/python3 bench/unseen/replicas/instruct_pix2pix.py OUTDIR
REPLICA_DTYPE=bf16 [REPLICA_DEVICE=cuda] as run.py's replicas: the bf16 run, beside the f32 one.
"""
import sys

import torch

from run import capture
from sd_unet import UNet2DConditionModel

GUIDANCE_SCALE = 7.5  # the pipeline's default
IMAGE_GUIDANCE_SCALE = 1.5  # the pipeline's default
HEIGHT, WIDTH = 64, 32  # the image size: latents of HEIGHT / 8 × WIDTH / 8
DO_CLASSIFIER_FREE_GUIDANCE = GUIDANCE_SCALE > 1.0 and IMAGE_GUIDANCE_SCALE >= 1.0


def build():
    return UNet2DConditionModel(in_channels=8, out_channels=4, block_out_channels=(8, 16), cross_attention_dim=16,
                                groups=4)


def inputs(g):
    # _encode_prompt's text encoder states for the prompt and for "" (negative_prompt None); the input image
    # already in latent space (4 channels: prepare_image_latents skips vae.encode); the initial noise
    return {"prompt_embeds": torch.randn((1, 6, 16), generator=g),
            "negative_prompt_embeds": torch.randn((1, 6, 16), generator=g),
            "image": torch.randn((1, 4, HEIGHT // 8, WIDTH // 8), generator=g),
            "noise": torch.randn((1, 4, HEIGHT // 8, WIDTH // 8), generator=g)}


def encode_prompt(prompt_embeds, negative_prompt_embeds, do_classifier_free_guidance, num_images_per_prompt=1):
    """StableDiffusionInstructPix2PixPipeline._encode_prompt with prompt_embeds and negative_prompt_embeds given."""
    batch_size = prompt_embeds.shape[0]
    prompt_embeds_dtype = prompt_embeds.dtype  # self.text_encoder.dtype: the dtype the pipeline was loaded in
    prompt_embeds = prompt_embeds.to(dtype=prompt_embeds_dtype)
    bs_embed, seq_len, _ = prompt_embeds.shape
    # duplicate text embeddings for each generation per prompt, using mps friendly method
    prompt_embeds = prompt_embeds.repeat(1, num_images_per_prompt, 1)
    prompt_embeds = prompt_embeds.view(bs_embed * num_images_per_prompt, seq_len, -1)
    if do_classifier_free_guidance:
        # duplicate unconditional embeddings for each generation per prompt, using mps friendly method
        seq_len = negative_prompt_embeds.shape[1]
        negative_prompt_embeds = negative_prompt_embeds.to(dtype=prompt_embeds_dtype)
        negative_prompt_embeds = negative_prompt_embeds.repeat(1, num_images_per_prompt, 1)
        negative_prompt_embeds = negative_prompt_embeds.view(batch_size * num_images_per_prompt, seq_len, -1)
        # pix2pix has two negative embeddings, and unlike in other pipelines latents are ordered [prompt_embeds,
        # negative_prompt_embeds, negative_prompt_embeds]
        prompt_embeds = torch.cat([prompt_embeds, negative_prompt_embeds, negative_prompt_embeds])
    return prompt_embeds


def prepare_image_latents(image, batch_size, num_images_per_prompt, dtype, do_classifier_free_guidance):
    """StableDiffusionInstructPix2PixPipeline.prepare_image_latents on an image given as latents."""
    image = image.to(dtype=dtype)
    batch_size = batch_size * num_images_per_prompt
    assert image.shape[1] == 4  # image_latents = image (else retrieve_latents(vae.encode(image), "argmax"))
    image_latents = image
    assert batch_size <= image_latents.shape[0]
    image_latents = torch.cat([image_latents], dim=0)
    if do_classifier_free_guidance:
        uncond_image_latents = torch.zeros_like(image_latents)
        image_latents = torch.cat([image_latents, image_latents, uncond_image_latents], dim=0)
    return image_latents


def prepare(model, c):
    # __call__ before its loop: 2. encode input prompt; 5. prepare image latents (in prompt_embeds.dtype)
    prompt_embeds = encode_prompt(c["prompt_embeds"], c["negative_prompt_embeds"], DO_CLASSIFIER_FREE_GUIDANCE)
    c["batch_prompt_embeds"] = prompt_embeds
    c["image_latents"] = prepare_image_latents(c["image"], 1, 1, prompt_embeds.dtype, DO_CLASSIFIER_FREE_GUIDANCE)


def call(model, x, sigma, c):
    latents = x
    t = torch.tensor(sigma * 1000.0, dtype=torch.float32, device=x.device)
    # Expand the latents if we are doing classifier free guidance. The latents are expanded 3 times because for
    # pix2pix the guidance is applied for both the text and the input image.
    latent_model_input = torch.cat([latents] * 3) if DO_CLASSIFIER_FREE_GUIDANCE else latents
    # concat latents, image_latents in the channel dimension
    scaled_latent_model_input = latent_model_input  # scheduler.scale_model_input: the identity here
    scaled_latent_model_input = torch.cat([scaled_latent_model_input, c["image_latents"]], dim=1)
    # predict the noise residual
    noise_pred = model(scaled_latent_model_input, t, encoder_hidden_states=c["batch_prompt_embeds"],
                       added_cond_kwargs=None, return_dict=False)[0]
    # perform guidance
    if DO_CLASSIFIER_FREE_GUIDANCE:
        noise_pred_text, noise_pred_image, noise_pred_uncond = noise_pred.chunk(3)
        noise_pred = (noise_pred_uncond
                      + GUIDANCE_SCALE * (noise_pred_text - noise_pred_image)
                      + IMAGE_GUIDANCE_SCALE * (noise_pred_image - noise_pred_uncond))
    return noise_pred


PRODUCER = dict(
    library_source="replica of huggingface/diffusers StableDiffusionInstructPix2PixPipeline "
                   "(pipeline_stable_diffusion_instruct_pix2pix.py@020660152e10) on sd_unet.py's "
                   "UNet2DConditionModel with in_channels 8 (torch 1.13)",
    timestep="sigma*1000, f32 0-dim (the scheduler's t), expanded by the UNet to the batch of 3",
    velocity="uncond + 7.5·(text − image) + 1.5·(image − uncond) of the output's thirds (guidance_scale 7.5, "
             "image_guidance_scale 1.5)",
    note="SD 1.x UNet at widths 8/16 with 8 input channels on a batch of 3: latents repeated 3x joined by channels "
         "with image latents [image, image, zeros], caption [prompt, negative, negative]; the output's thirds "
         "(text, image, uncond) combined uncond + 7.5·(text − image) + 1.5·(image − uncond); latents [1, 4, 8, 4]")

if __name__ == "__main__":
    capture("instruct_pix2pix", build, inputs, call, sys.argv[1], PRODUCER, prepare=prepare)
