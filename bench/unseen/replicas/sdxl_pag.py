"""Perturbed-attention guidance (PAG) on Stable Diffusion XL's UNet, with classifier-free guidance, as
StableDiffusionXLPAGPipeline runs it, reimplemented for torch 1.13 (no diffusers here), captured small in f32 on CPU.

The UNet is sdxl_unet.py's (UNet2DConditionModel in SDXL's configuration, unet_2d_condition.py at
00f354d14d00ed60cfce2ea7c5efceca2e4c4c3f with the blocks and parts sdxl_unet.py names), imported whole. What this
file adds follows huggingface/diffusers:
 - src/diffusers/models/attention_processor.py at 001d4da0eb5809c779120c51f74ef73d6078b08c: Attention's processor
   slot (the module's forward is its processor's __call__; AttnProcessor2_0 by default, which is sd_unet.py's
   Attention.forward; is_cross_attention = cross_attention_dim is not None, so False for every attn1 and True for
   every attn2; no group_norm, spatial_norm or residual_connection, rescale_output_factor 1) and
   PAGCFGIdentitySelfAttnProcessor2_0.__call__ line for line: the batch's thirds [uncond, cond, perturbed]; the first
   two joined and run through to_q / to_k / to_v, SDPA over the heads, to_out[0], to_out[1]; the perturbed third
   through to_v alone (the attention map replaced by the identity: each token keeps its own value), then to_out[0],
   to_out[1] again; the two joined back by batch. So to_v, to_out.0 and to_out.1 are called twice per PAG call.
 - src/diffusers/pipelines/pag/pag_utils.py at 8dc31e8e3c173bfd399217fde461a32f8d440b86: PAGMixin.
   _set_pag_attn_processor (every module that is an Attention and not is_cross_attention whose name re.search
   matches a pag_applied_layers id, and is not a fake integral match, gets PAGCFGIdentitySelfAttnProcessor2_0 when
   classifier-free guidance is on), _prepare_perturbed_attention_guidance (cond = cat([cond] * 2); with CFG
   cat([uncond, cond])) and _apply_perturbed_attention_guidance (chunk(3): uncond + guidance_scale·(text − uncond)
   + pag_scale·(text − perturb); pag_adaptive_scale 0, so pag_scale as given).
 - src/diffusers/pipelines/pag/pipeline_pag_sd_xl.py at 5f10c18270a2037151f51124af16cd34d10bd909:
   StableDiffusionXLPAGPipeline with its defaults pag_applied_layers "mid", guidance_scale 5.0, pag_scale 3.0,
   guidance_rescale 0, no negative prompt (force_zeros_for_empty_prompt: negative_prompt_embeds and
   negative_pooled_prompt_embeds are zeros_like), negative_original_size None (negative_add_time_ids =
   add_time_ids): prompt_embeds, add_text_embeds and add_time_ids each made [uncond, cond, cond] before the loop,
   the PAG processors set before the loop; each step latent_model_input = cat([latents] * (prompt_embeds.shape[0]
   // latents.shape[0])) (3 copies), scale_model_input (the identity here: the scheduler is run.py's flow Euler, as
   for sdxl_unet.py), self.unet(latent_model_input, t, encoder_hidden_states=prompt_embeds, timestep_cond=None,
   cross_attention_kwargs=None, added_cond_kwargs={"text_embeds": add_text_embeds, "time_ids": add_time_ids},
   return_dict=False)[0], then _apply_perturbed_attention_guidance.
Stand-in for what torch 1.13 lacks: F.scaled_dot_product_attention (run.sdpa, its math path).

The constructs it shows beyond sdxl_unet.py: a batch of three made from one request (latents repeated three times;
the caption, pooled caption and time ids as [zeros, prompt, prompt]); in the mid block's three self-attentions
(pag_applied_layers "mid" matches mid_block.attentions.0.transformer_blocks.{0,1,2}.attn1 only) the perturbed
third's attention replaced by its value projection (softmax(q·kᵀ)·v → v), the first two thirds attending as usual,
through the same to_out; every other attention (down and up blocks' attn1, all attn2) plain; the three predictions
combined uncond + 5·(cond − uncond) + 3·(cond − perturbed).

How it maps into run.py's loop x ← x + (σ_next − σ)·v: t = σ·1000 (f32, 0-dim as a scheduler's timesteps element),
the guided noise prediction (uncond + 5·(cond − uncond) + 3·(cond − perturbed)) taken as the velocity as is, as
sdxl_unet.py takes its unguided one.

Tiny config: sdxl_unet.py's build() (widths 8/16/32, transformer layers 1/2/3 with 3 in the mid block, heads of width
8, cross_attention_dim 24, addition_time_embed_dim 8); the image 64×32 (latents [1, 4, 8, 4]: maps of 8×4, 4×2,
2×1, so the mid block's attention runs over 2 cells; SDXL's square 8×8 latents at batch 3 would triple sdxl_unet.py's
trace); text [1, 6, 24] = the two encoders' [1, 6, 8] and [1, 6, 16] joined, pooled [1, 16], time_ids (64, 32, 0, 0,
64, 32).

usage: /usr/bin/python3 bench/unseen/replicas/sdxl_pag.py OUTDIR
"""
import re
import sys

import torch

import sd_unet
from run import capture, sdpa
from sdxl_unet import UNet2DConditionModel

_AttnProcessor2_0Attention = sd_unet.Attention  # sd_unet.py's Attention: its forward is AttnProcessor2_0's __call__


def attn_processor2_0(attn, hidden_states, encoder_hidden_states=None, attention_mask=None, temb=None):
    """AttnProcessor2_0.__call__ (the processor every Attention starts with): sd_unet.py's Attention.forward."""
    return _AttnProcessor2_0Attention.forward(attn, hidden_states, encoder_hidden_states=encoder_hidden_states,
                                     attention_mask=attention_mask)


def pag_cfg_identity_self_attn_processor2_0(attn, hidden_states, encoder_hidden_states=None, attention_mask=None,
                                            temb=None):
    """attention_processor.PAGCFGIdentitySelfAttnProcessor2_0.__call__."""
    residual = hidden_states
    if attn.spatial_norm is not None:
        hidden_states = attn.spatial_norm(hidden_states, temb)
    input_ndim = hidden_states.ndim
    if input_ndim == 4:
        batch_size, channel, height, width = hidden_states.shape
        hidden_states = hidden_states.view(batch_size, channel, height * width).transpose(1, 2)
    # chunk
    hidden_states_uncond, hidden_states_org, hidden_states_ptb = hidden_states.chunk(3)
    hidden_states_org = torch.cat([hidden_states_uncond, hidden_states_org])
    # original path
    batch_size, sequence_length, _ = hidden_states_org.shape
    assert attention_mask is None
    if attn.group_norm is not None:
        hidden_states_org = attn.group_norm(hidden_states_org.transpose(1, 2)).transpose(1, 2)
    query = attn.to_q(hidden_states_org)
    key = attn.to_k(hidden_states_org)
    value = attn.to_v(hidden_states_org)
    inner_dim = key.shape[-1]
    head_dim = inner_dim // attn.heads
    query = query.view(batch_size, -1, attn.heads, head_dim).transpose(1, 2)
    key = key.view(batch_size, -1, attn.heads, head_dim).transpose(1, 2)
    value = value.view(batch_size, -1, attn.heads, head_dim).transpose(1, 2)
    hidden_states_org = sdpa(query, key, value, mask=attention_mask)
    hidden_states_org = hidden_states_org.transpose(1, 2).reshape(batch_size, -1, attn.heads * head_dim)
    hidden_states_org = hidden_states_org.to(query.dtype)
    # linear proj
    hidden_states_org = attn.to_out[0](hidden_states_org)
    # dropout
    hidden_states_org = attn.to_out[1](hidden_states_org)
    if input_ndim == 4:
        hidden_states_org = hidden_states_org.transpose(-1, -2).reshape(batch_size, channel, height, width)
    # perturbed path (identity attention)
    batch_size, sequence_length, _ = hidden_states_ptb.shape
    if attn.group_norm is not None:
        hidden_states_ptb = attn.group_norm(hidden_states_ptb.transpose(1, 2)).transpose(1, 2)
    value = attn.to_v(hidden_states_ptb)
    hidden_states_ptb = value
    hidden_states_ptb = hidden_states_ptb.to(query.dtype)
    # linear proj
    hidden_states_ptb = attn.to_out[0](hidden_states_ptb)
    # dropout
    hidden_states_ptb = attn.to_out[1](hidden_states_ptb)
    if input_ndim == 4:
        hidden_states_ptb = hidden_states_ptb.transpose(-1, -2).reshape(batch_size, channel, height, width)
    # cat
    hidden_states = torch.cat([hidden_states_org, hidden_states_ptb])
    if attn.residual_connection:
        hidden_states = hidden_states + residual
    hidden_states = hidden_states / attn.rescale_output_factor
    return hidden_states


class Attention(_AttnProcessor2_0Attention):
    """attention_processor.Attention as sd_unet.py builds it (the same parameters and projections), with the
    processor slot its forward dispatches to and the attributes the processors and pag_utils read."""

    def __init__(self, query_dim, cross_attention_dim=None, heads=8, dim_head=64):
        super().__init__(query_dim, cross_attention_dim=cross_attention_dim, heads=heads, dim_head=dim_head)
        self.is_cross_attention = cross_attention_dim is not None
        self.rescale_output_factor = 1.0
        self.residual_connection = False
        self.group_norm = None
        self.spatial_norm = None
        self.processor = attn_processor2_0

    def forward(self, hidden_states, encoder_hidden_states=None, attention_mask=None):
        return self.processor(self, hidden_states, encoder_hidden_states=encoder_hidden_states,
                              attention_mask=attention_mask)


def build():
    # sd_unet.py's BasicTransformerBlock builds its attn1 / attn2 from the module-level name Attention: point it at
    # the processor-dispatching Attention above while sdxl_unet.py's UNet is made, then back
    sd_unet.Attention = Attention
    try:
        return UNet2DConditionModel()
    finally:
        sd_unet.Attention = _AttnProcessor2_0Attention


PAG_APPLIED_LAYERS = ["mid"]  # StableDiffusionXLPAGPipeline's default
GUIDANCE_SCALE = 5.0  # the pipeline's default
PAG_SCALE = 3.0  # the pipeline's default
HEIGHT, WIDTH = 64, 32  # the image size: latents of HEIGHT / 8 × WIDTH / 8


def set_pag_attn_processor(model, pag_applied_layers, do_classifier_free_guidance):
    """pag_utils.PAGMixin._set_pag_attn_processor with the default pag_attn_processors."""
    assert do_classifier_free_guidance  # PAGIdentitySelfAttnProcessor2_0 (no CFG) is not used here
    pag_attn_proc = pag_cfg_identity_self_attn_processor2_0

    def is_self_attn(module):
        return isinstance(module, Attention) and not module.is_cross_attention

    def is_fake_integral_match(layer_id, name):
        layer_id = layer_id.split(".")[-1]
        name = name.split(".")[-1]
        return layer_id.isnumeric() and name.isnumeric() and layer_id == name

    for layer_id in pag_applied_layers:
        target_modules = []
        for name, module in model.named_modules():
            if is_self_attn(module) and re.search(layer_id, name) is not None \
                    and not is_fake_integral_match(layer_id, name):
                target_modules.append(module)
        if len(target_modules) == 0:
            raise ValueError(f"Cannot find PAG layer to set attention processor for: {layer_id}")
        for module in target_modules:
            module.processor = pag_attn_proc


def prepare_perturbed_attention_guidance(cond, uncond, do_classifier_free_guidance):
    """pag_utils.PAGMixin._prepare_perturbed_attention_guidance."""
    cond = torch.cat([cond] * 2, dim=0)
    if do_classifier_free_guidance:
        cond = torch.cat([uncond, cond], dim=0)
    return cond


def apply_perturbed_attention_guidance(noise_pred, do_classifier_free_guidance, guidance_scale, pag_scale):
    """pag_utils.PAGMixin._apply_perturbed_attention_guidance (pag_adaptive_scale 0: _get_pag_scale is pag_scale)."""
    if do_classifier_free_guidance:
        noise_pred_uncond, noise_pred_text, noise_pred_perturb = noise_pred.chunk(3)
        noise_pred = (noise_pred_uncond + guidance_scale * (noise_pred_text - noise_pred_uncond)
                      + pag_scale * (noise_pred_text - noise_pred_perturb))
    else:
        noise_pred_text, noise_pred_perturb = noise_pred.chunk(2)
        noise_pred = noise_pred_text + pag_scale * (noise_pred_text - noise_pred_perturb)
    return noise_pred


def inputs(g):
    # encode_prompt: the two text encoders' penultimate states joined by channels; the pooled projection of the
    # second as add_text_embeds; _get_add_time_ids: original_size + crops_coords_top_left + target_size
    prompt_embeds_list = [torch.randn((1, 6, 8), generator=g), torch.randn((1, 6, 16), generator=g)]
    return {"encoder_hidden_states": torch.concat(prompt_embeds_list, dim=-1),
            "text_embeds": torch.randn((1, 16), generator=g),
            "time_ids": torch.tensor([list((HEIGHT, WIDTH) + (0, 0) + (HEIGHT, WIDTH))], dtype=torch.float32),
            "noise": torch.randn((1, 4, HEIGHT // 8, WIDTH // 8), generator=g)}


def prepare(model, c):
    # StableDiffusionXLPAGPipeline.__call__ before its loop: encode_prompt's zero negatives (force_zeros_for_empty_
    # prompt), the [uncond, cond, cond] batches, add_time_ids.repeat(batch_size * num_images_per_prompt, 1), and the
    # PAG processors set on the applied layers
    prompt_embeds = c["encoder_hidden_states"]
    negative_prompt_embeds = torch.zeros_like(prompt_embeds)
    add_text_embeds = c["text_embeds"]
    negative_pooled_prompt_embeds = torch.zeros_like(add_text_embeds)
    add_time_ids = c["time_ids"].to(prompt_embeds.dtype)
    negative_add_time_ids = add_time_ids
    c["prompt_embeds"] = prepare_perturbed_attention_guidance(prompt_embeds, negative_prompt_embeds, True)
    c["add_text_embeds"] = prepare_perturbed_attention_guidance(add_text_embeds, negative_pooled_prompt_embeds, True)
    add_time_ids = prepare_perturbed_attention_guidance(add_time_ids, negative_add_time_ids, True)
    c["add_time_ids"] = add_time_ids.repeat(1, 1)
    set_pag_attn_processor(model, PAG_APPLIED_LAYERS, do_classifier_free_guidance=True)


def call(model, x, sigma, c):
    prompt_embeds = c["prompt_embeds"]
    latent_model_input = torch.cat([x] * (prompt_embeds.shape[0] // x.shape[0]))
    t = torch.tensor(sigma * 1000.0, dtype=torch.float32, device=x.device)
    added_cond_kwargs = {"text_embeds": c["add_text_embeds"], "time_ids": c["add_time_ids"]}
    noise_pred = model(latent_model_input, t, encoder_hidden_states=prompt_embeds,
                       added_cond_kwargs=added_cond_kwargs, return_dict=False)[0]
    return apply_perturbed_attention_guidance(noise_pred, True, GUIDANCE_SCALE, PAG_SCALE)


PRODUCER = dict(
    library_source="replica of huggingface/diffusers StableDiffusionXLPAGPipeline (pipeline_pag_sd_xl.py"
                   "@5f10c18270a2, pag_utils.py@8dc31e8e3c17, attention_processor.py@001d4da0eb58 "
                   "PAGCFGIdentitySelfAttnProcessor2_0) on sdxl_unet.py's UNet2DConditionModel (torch 1.13)",
    timestep="sigma*1000, f32 0-dim (the scheduler's t), expanded by the UNet to the batch of 3",
    velocity="uncond + 5·(cond − uncond) + 3·(cond − perturbed) of the output's thirds (guidance_scale 5, pag_scale 3)",
    note="SDXL's UNet at widths 8/16/32 on a batch of 3 [uncond (zero caption, zero pooled), cond, cond] with the "
         "latents repeated 3×: the mid block's 3 self-attentions (pag_applied_layers 'mid') run the first two thirds "
         "as attention and the third as to_v alone (identity attention), each through to_out; all other attentions "
         "plain; latents [1, 4, 8, 4]")

if __name__ == "__main__":
    capture("sdxl_pag", build, inputs, call, sys.argv[1], PRODUCER, prepare=prepare)
