"""Stable Diffusion 3.5 with skip-layer guidance (SLG), as StableDiffusion3Pipeline runs it when given
skip_guidance_layers, reimplemented for torch 1.13 (no diffusers here), captured small in f32 on CPU.

The transformer is sd35.py's SD3Transformer2DModel (src/diffusers/models/transformers/transformer_sd3.py at
38b0c9e679b0894d0483df9da80bc103aa1bff52, the SD3.5 era: dual_attention_layers, qk_norm, and forward's skip_layers:
is_skip = skip_layers is not None and index_block in skip_layers, a skipped block not called at all, its input
passed on as its output for both streams), imported whole with its parts; its forward is upstream's (the controlnet
residual, unused here, aside). What this file adds follows huggingface/diffusers
src/diffusers/pipelines/stable_diffusion_3/pipeline_stable_diffusion_3.py at
009167aa69a3fbfaaef6ae89e035042e7b92c731, line for line:
 - before the loop, with classifier-free guidance and skip_guidance_layers given: original_prompt_embeds =
   prompt_embeds and original_pooled_prompt_embeds = pooled_prompt_embeds kept, then prompt_embeds =
   cat([negative_prompt_embeds, prompt_embeds]) and pooled_prompt_embeds = cat([negative_pooled_prompt_embeds,
   pooled_prompt_embeds]) (encode_prompt's negatives for "" are the text encoders' real states, drawn here, not
   zeros: SD3 has no force_zeros);
 - each step: latent_model_input = cat([latents] * 2), timestep = t.expand(2), self.transformer(hidden_states,
   timestep, encoder_hidden_states=prompt_embeds, pooled_projections=pooled_prompt_embeds,
   joint_attention_kwargs=None, return_dict=False)[0]; chunk(2) as (uncond, text); noise_pred = uncond +
   guidance_scale·(text − uncond); should_skip_layers = i > num_inference_steps·skip_layer_guidance_start and
   i < num_inference_steps·skip_layer_guidance_stop; where it holds, a second transformer call on the latents alone
   (timestep = t.expand(1)) with original_prompt_embeds, original_pooled_prompt_embeds and
   skip_layers=skip_guidance_layers, and noise_pred = noise_pred + (noise_pred_text − noise_pred_skip_layers)·
   skip_layer_guidance_scale.
   guidance_scale 7.0 and skip_layer_guidance_scale 2.8 are the pipeline's defaults; skip_guidance_layers [1, 2]
   stands for SD3.5-medium's recommended [7, 8, 9] (middle blocks, the first of them dual-attention).
   skip_layer_guidance_start 0.01 (the default) and skip_layer_guidance_stop 1.0 (the default 0.2 would switch SLG
   off at 3 steps: i < 0.6 only at i = 0, which start excludes): with num_inference_steps 3 (run.py's steps), SLG
   applies at steps 1 and 2, not at step 0. Every step cannot be had with a start a caller would pass: the test
   i > 3·start is strict, so step 0 needs a negative start; the default start leaves out step 0 at any step count.
   So the trace holds the pipeline's real step-dependent pattern: one call at step 0, two at steps 1 and 2.
Stand-in for what torch 1.13 lacks: F.scaled_dot_product_attention (run.sdpa, its math path; inside sd35.py).

The constructs it shows beyond sd35.py: classifier-free guidance over a batch of two ([negative, prompt] captions
and pooled texts, the latents twice); a second model call per step, from step 1 on only, at batch 1 on the prompt's
inputs, in which blocks 1 and 2 are not run (the image and context streams go from block 0 straight to block 3);
the guided prediction plus 2.8·(text − skip) where text is the second half of the first call's output.

How it maps into run.py's loop x ← x + (σ_next − σ)·v: t = σ·1000 (f32, 0-dim as the flow scheduler's timesteps
element, expanded to each call's batch), step index i from σ's place in SIGMAS; the guided prediction taken as the
velocity as is (SD3's flow velocity, no shift).

Tiny config: sd3_controlnet.py's transformer width (2 heads of 16, d 32, qk_norm rms_norm, patch 2, 4 latent
channels, sample_size 8, pos_embed_max_size 6, 24-wide context [1, 5, 24], 16-wide pooled text), 4 blocks with
dual_attention_layers (0, 1) and the last context_pre_only; latents [1, 4, 8, 8].

usage: /usr/bin/python3 bench/unseen/replicas/sd3_slg.py OUTDIR
REPLICA_DTYPE=bf16 [REPLICA_DEVICE=cuda] as run.py's replicas: the bf16 run, beside the f32 one.
"""
import sys

import torch

from run import SIGMAS, capture
from sd35 import SD3Transformer2DModel

GUIDANCE_SCALE = 7.0  # the pipeline's default
SKIP_GUIDANCE_LAYERS = [1, 2]
SKIP_LAYER_GUIDANCE_SCALE = 2.8  # the pipeline's default
SKIP_LAYER_GUIDANCE_START = 0.01  # the pipeline's default
SKIP_LAYER_GUIDANCE_STOP = 1.0  # (the default 0.2 leaves no step at 3 steps)
NUM_INFERENCE_STEPS = len(SIGMAS) - 1
DO_CLASSIFIER_FREE_GUIDANCE = GUIDANCE_SCALE > 1


def build():
    return SD3Transformer2DModel(sample_size=8, patch_size=2, in_channels=4, num_layers=4, attention_head_dim=16,
                                 num_attention_heads=2, joint_attention_dim=24, caption_projection_dim=32,
                                 pooled_projection_dim=16, out_channels=4, pos_embed_max_size=6,
                                 dual_attention_layers=(0, 1), qk_norm="rms_norm")


def inputs(g):
    # encode_prompt's outputs: the joint CLIP + T5 states and the pooled CLIP embeddings, of the prompt and of ""
    return {"prompt_embeds": torch.randn((1, 5, 24), generator=g),
            "negative_prompt_embeds": torch.randn((1, 5, 24), generator=g),
            "pooled_prompt_embeds": torch.randn((1, 16), generator=g),
            "negative_pooled_prompt_embeds": torch.randn((1, 16), generator=g),
            "noise": torch.randn((1, 4, 8, 8), generator=g)}


def prepare(model, c):
    # __call__ before its loop: the prompt's own inputs kept for the skip-layer call, then the CFG batches
    prompt_embeds, pooled_prompt_embeds = c["prompt_embeds"], c["pooled_prompt_embeds"]
    if DO_CLASSIFIER_FREE_GUIDANCE:
        if SKIP_GUIDANCE_LAYERS is not None:
            c["original_prompt_embeds"] = prompt_embeds
            c["original_pooled_prompt_embeds"] = pooled_prompt_embeds
        prompt_embeds = torch.cat([c["negative_prompt_embeds"], prompt_embeds], dim=0)
        pooled_prompt_embeds = torch.cat([c["negative_pooled_prompt_embeds"], pooled_prompt_embeds], dim=0)
    c["batch_prompt_embeds"], c["batch_pooled_prompt_embeds"] = prompt_embeds, pooled_prompt_embeds


def call(model, x, sigma, c):
    latents = x
    i = SIGMAS.index(sigma)
    t = torch.tensor(sigma * 1000.0, dtype=torch.float32, device=x.device)
    # expand the latents if we are doing classifier free guidance
    latent_model_input = torch.cat([latents] * 2) if DO_CLASSIFIER_FREE_GUIDANCE else latents
    # broadcast to batch dimension in a way that's compatible with ONNX/Core ML
    timestep = t.expand(latent_model_input.shape[0])
    noise_pred = model(hidden_states=latent_model_input, timestep=timestep,
                       encoder_hidden_states=c["batch_prompt_embeds"],
                       pooled_projections=c["batch_pooled_prompt_embeds"], joint_attention_kwargs=None,
                       return_dict=False)[0]
    # perform guidance
    if DO_CLASSIFIER_FREE_GUIDANCE:
        noise_pred_uncond, noise_pred_text = noise_pred.chunk(2)
        noise_pred = noise_pred_uncond + GUIDANCE_SCALE * (noise_pred_text - noise_pred_uncond)
        should_skip_layers = (True if i > NUM_INFERENCE_STEPS * SKIP_LAYER_GUIDANCE_START
                              and i < NUM_INFERENCE_STEPS * SKIP_LAYER_GUIDANCE_STOP else False)
        if SKIP_GUIDANCE_LAYERS is not None and should_skip_layers:
            timestep = t.expand(latents.shape[0])
            latent_model_input = latents
            noise_pred_skip_layers = model(hidden_states=latent_model_input, timestep=timestep,
                                           encoder_hidden_states=c["original_prompt_embeds"],
                                           pooled_projections=c["original_pooled_prompt_embeds"],
                                           joint_attention_kwargs=None, return_dict=False,
                                           skip_layers=SKIP_GUIDANCE_LAYERS)[0]
            noise_pred = noise_pred + (noise_pred_text - noise_pred_skip_layers) * SKIP_LAYER_GUIDANCE_SCALE
    return noise_pred


PRODUCER = dict(
    library_source="replica of huggingface/diffusers StableDiffusion3Pipeline with skip_guidance_layers "
                   "(pipeline_stable_diffusion_3.py@009167aa69a3) on sd35.py's SD3Transformer2DModel "
                   "(transformer_sd3.py@38b0c9e679b0, skip_layers) (torch 1.13)",
    timestep="sigma*1000, f32, t.expand(B) per call (B 2 for the CFG call, 1 for the skip-layer call)",
    velocity="uncond + 7·(text − uncond) of the CFG call's halves, plus 2.8·(text − skip) at steps 1 and 2 "
             "(skip: a batch-1 call on the prompt's inputs with blocks 1, 2 skipped)",
    note="SD3.5-medium MMDiT, 4 blocks (0-1 dual attention, 3 context_pre_only), d 32; each step one call on "
         "[negative, prompt] x latents twice; from step 1 (skip_layer_guidance_start 0.01, stop 1.0 of 3 steps) "
         "a second call on the latents with the prompt's embeddings and skip_layers [1, 2] (those blocks not "
         "called; streams pass through); latents [1, 4, 8, 8]")

if __name__ == "__main__":
    capture("sd3_slg", build, inputs, call, sys.argv[1], PRODUCER, prepare=prepare)
