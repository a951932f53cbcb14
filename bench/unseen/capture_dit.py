"""Capture tiny random-weight diffusers diffusion transformers (real third-party model code) as zflow traces, to
measure discovery on architectures the shared conformance set does not hold.

usage: PYTHONPATH=<dir holding diffusers> python3 capture_dit.py [--small] OUTDIR [CASE ...]
--small: f32 on CPU only, the smallest sizes that still show every construct (1-2 blocks, hidden 32, short text,
16 image tokens, still the 3-step loop), for test fixtures: OUTDIR/<case>-f32.npz alone.
Writes OUTDIR/<case>-f32.npz (CPU, float32) and OUTDIR/<case>-bf16.npz (CUDA when present, bfloat16 placed as
from_pretrained(torch_dtype=bf16) leaves it: floating parameters and persistent buffers bf16, non-persistent
buffers as built). Same seeds for both precisions. One line per case, failures included.

Diffusion convention (shared/conformance README, "The second set"): a 3-step flow-matching Euler loop over
sigmas [1.0, 0.75, 0.4, 0.0], x <- x + (sigma[i+1] - sigma[i]) * v in the latents' dtype, v the transformer output
(its first half of channels where the pipeline drops a learned sigma); each model call inside cap.step(i); the
timestep is what the model's own diffusers pipeline passes (stated per case in producer.timestep). Inputs:
the conditioning tensors, "noise" (initial x), "sigmas"; output "latents" (final x). Model name "transformer".
"""
import math
import os
import sys
import traceback

import torch

if not hasattr(torch.nn.functional, "scaled_dot_product_attention"):
    import localshim  # noqa: F401  torch 1.x debugging shim from the .dit tree; never imported on torch 2.x

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "capture"))
import zflow_capture  # noqa: E402
from weights import place, randomize  # noqa: E402,F401

SIGMAS = [1.0, 0.75, 0.4, 0.0]
SMALL = False


def pick(normal, small):
    return small if SMALL else normal


def rnd(gen, *shape):
    return torch.randn(shape, generator=gen)


def text_mask(n, pad):
    m = torch.ones(1, n, dtype=torch.int64)
    if pad:
        m[:, n - pad:] = 0
    return m


# Each case: build() -> model (f32, CPU, randomized later); inputs(gen) -> dict of f32/int CPU tensors, "noise"
# last-but-conditioning; call(model, x, sigma, cond, dtype) -> v in x's dtype. NOTE strings go to the producer.

def sd3_build():
    from diffusers.models.transformers.transformer_sd3 import SD3Transformer2DModel
    return SD3Transformer2DModel(sample_size=8, patch_size=2, in_channels=4, num_layers=2, attention_head_dim=16,
                                 num_attention_heads=4, joint_attention_dim=32, caption_projection_dim=64,
                                 pooled_projection_dim=32, out_channels=4, pos_embed_max_size=8)


def sd3_inputs(g):
    return {"encoder_hidden_states": rnd(g, 1, 8, 32), "pooled_projections": rnd(g, 1, 32), "noise": rnd(g, 1, 4, 8, 8)}


def sd3_call(model, x, sigma, c, dtype):
    t = torch.tensor([sigma * 1000.0], dtype=torch.float32, device=x.device)
    return model(hidden_states=x, timestep=t, encoder_hidden_states=c["encoder_hidden_states"],
                 pooled_projections=c["pooled_projections"], joint_attention_kwargs=None, return_dict=False)[0]


def sana_build():
    from diffusers.models.transformers.sana_transformer import SanaTransformer2DModel
    h = pick(4, 2)
    return SanaTransformer2DModel(in_channels=4, out_channels=4, num_attention_heads=h, attention_head_dim=16,
                                  num_layers=pick(2, 1), num_cross_attention_heads=h, cross_attention_head_dim=16,
                                  cross_attention_dim=16 * h, caption_channels=pick(32, 16), mlp_ratio=2.5,
                                  sample_size=pick(8, 4), patch_size=1)


def sana_inputs(g):
    n, s = pick(8, 4), pick(8, 4)
    return {"encoder_hidden_states": rnd(g, 1, n, pick(32, 16)), "encoder_attention_mask": text_mask(n, pick(2, 1)),
            "noise": rnd(g, 1, 4, s, s)}


def sana_call(model, x, sigma, c, dtype):
    # SanaPipeline keeps its latents in float32 and passes t.expand(B).to(latents.dtype): a float32 sigma*1000.
    t = torch.tensor([sigma * 1000.0], dtype=torch.float32, device=x.device)
    return model(x, encoder_hidden_states=c["encoder_hidden_states"],
                 encoder_attention_mask=c["encoder_attention_mask"], timestep=t, return_dict=False,
                 attention_kwargs=None)[0]


LTX_F, LTX_H, LTX_W = 2, 4, 4


def ltx_build():
    from diffusers.models.transformers.transformer_ltx import LTXVideoTransformer3DModel
    return LTXVideoTransformer3DModel(in_channels=4, out_channels=4, patch_size=1, patch_size_t=1,
                                      num_attention_heads=4, attention_head_dim=16, cross_attention_dim=64,
                                      num_layers=2, caption_channels=32)


def ltx_inputs(g):
    return {"encoder_hidden_states": rnd(g, 1, 8, 32), "encoder_attention_mask": text_mask(8, 2),
            "noise": rnd(g, 1, LTX_F * LTX_H * LTX_W, 4)}


def ltx_call(model, x, sigma, c, dtype):
    t = torch.tensor([sigma * 1000.0], dtype=torch.float32, device=x.device)
    # LTXPipeline: rope_interpolation_scale = (vae_temporal_compression / frame_rate, spatial, spatial) = (8/25, 32, 32)
    return model(hidden_states=x, encoder_hidden_states=c["encoder_hidden_states"], timestep=t,
                 encoder_attention_mask=c["encoder_attention_mask"], num_frames=LTX_F, height=LTX_H, width=LTX_W,
                 rope_interpolation_scale=(8 / 25, 32, 32), attention_kwargs=None, return_dict=False)[0]


def cogvideox_build():
    from diffusers.models.transformers.cogvideox_transformer_3d import CogVideoXTransformer3DModel
    return CogVideoXTransformer3DModel(num_attention_heads=4, attention_head_dim=16, in_channels=4, out_channels=4,
                                       time_embed_dim=48, text_embed_dim=32, num_layers=2, sample_width=8,
                                       sample_height=8, sample_frames=5, patch_size=2, max_text_seq_length=8)


def cogvideox_inputs(g):
    return {"encoder_hidden_states": rnd(g, 1, 8, 32), "noise": rnd(g, 1, 2, 4, 8, 8)}


def cogvideox_call(model, x, sigma, c, dtype):
    # CogVideoXPipeline passes scheduler.timesteps (int64, 0..1000 scale) expanded to the batch.
    t = torch.tensor([int(round(sigma * 1000))], dtype=torch.int64, device=x.device)
    return model(hidden_states=x, encoder_hidden_states=c["encoder_hidden_states"], timestep=t,
                 image_rotary_emb=None, attention_kwargs=None, return_dict=False)[0]


def _resize_crop_region_for_grid(src, tgt_size):
    # diffusers pipelines/hunyuandit/pipeline_hunyuandit.py get_resize_crop_region_for_grid
    th = tw = tgt_size
    h, w = src
    r = h / w
    if r > 1:
        resize_height = th
        resize_width = int(round(th / h * w))
    else:
        resize_width = tw
        resize_height = int(round(tw / w * h))
    crop_top = int(round((th - resize_height) / 2.0))
    crop_left = int(round((tw - resize_width) / 2.0))
    return (crop_top, crop_left), (crop_top + resize_height, crop_left + resize_width)


def hunyuandit_build():
    from diffusers.models.transformers.hunyuan_transformer_2d import HunyuanDiT2DModel
    # 4 blocks is the fewest that shows the long skip (block 0 -> block 3); --small narrows them instead.
    return HunyuanDiT2DModel(num_attention_heads=pick(4, 2), attention_head_dim=16, in_channels=4, patch_size=2,
                             sample_size=8, hidden_size=pick(64, 32), num_layers=4, mlp_ratio=2.0, learn_sigma=True,
                             cross_attention_dim=pick(48, 32), cross_attention_dim_t5=pick(32, 16),
                             pooled_projection_dim=pick(32, 16), text_len=pick(8, 4), text_len_t5=pick(8, 4),
                             use_style_cond_and_image_meta_size=True)


def hunyuandit_inputs(g):
    from diffusers.models.embeddings import get_2d_rotary_pos_embed
    # HunyuanDiTPipeline: grid = latent size / patch, base_size = 512 // 8 // patch; 2-D RoPE over head_dim.
    grid = (8 // 2, 8 // 2)
    cos, sin = get_2d_rotary_pos_embed(16, _resize_crop_region_for_grid(grid, 512 // 8 // 2), grid, output_type="pt")
    n = pick(8, 4)
    return {"encoder_hidden_states": rnd(g, 1, n, pick(48, 32)), "text_embedding_mask": text_mask(n, 0),
            "encoder_hidden_states_t5": rnd(g, 1, n, pick(32, 16)), "text_embedding_mask_t5": text_mask(n, pick(2, 1)),
            "image_meta_size": torch.tensor([[1024.0, 1024.0, 64.0, 64.0, 0.0, 0.0]]),
            "style": torch.zeros(1, dtype=torch.int64), "image_rotary_cos": cos, "image_rotary_sin": sin,
            "noise": rnd(g, 1, 4, 8, 8)}


def hunyuandit_call(model, x, sigma, c, dtype):
    # HunyuanDiTPipeline: t_expand = tensor([t] * B).to(dtype=latent_model_input.dtype), t from the DDPM scheduler.
    t = torch.tensor([int(round(sigma * 1000))], device=x.device).to(dtype=x.dtype)
    out = model(x, t, encoder_hidden_states=c["encoder_hidden_states"],
                text_embedding_mask=c["text_embedding_mask"],
                encoder_hidden_states_t5=c["encoder_hidden_states_t5"],
                text_embedding_mask_t5=c["text_embedding_mask_t5"], image_meta_size=c["image_meta_size"],
                style=c["style"], image_rotary_emb=(c["image_rotary_cos"], c["image_rotary_sin"]),
                return_dict=False)[0]
    v, _ = out.chunk(2, dim=1)
    return v


def lumina2_build():
    from diffusers.models.transformers.transformer_lumina2 import Lumina2Transformer2DModel
    return Lumina2Transformer2DModel(sample_size=8, patch_size=2, in_channels=4, hidden_size=pick(64, 32),
                                     num_layers=pick(2, 1), num_refiner_layers=1, num_attention_heads=4,
                                     num_kv_heads=2, multiple_of=16, axes_dim_rope=pick((4, 6, 6), (2, 2, 4)),
                                     axes_lens=(300, 512, 512), cap_feat_dim=pick(32, 16))


def lumina2_inputs(g):
    n = pick(8, 4)
    return {"encoder_hidden_states": rnd(g, 1, n, pick(32, 16)), "encoder_attention_mask": text_mask(n, pick(2, 1)),
            "noise": rnd(g, 1, 4, 8, 8)}


def lumina2_call(model, x, sigma, c, dtype):
    # Lumina2Pipeline: current_timestep = 1 - t / num_train_timesteps (float32), then noise_pred = -noise_pred.
    t = torch.tensor([1.0 - sigma], dtype=torch.float32, device=x.device)
    out = model(hidden_states=x, timestep=t, encoder_hidden_states=c["encoder_hidden_states"],
                encoder_attention_mask=c["encoder_attention_mask"], return_dict=False, attention_kwargs=None)[0]
    return -out


def dit_build():
    from diffusers.models.transformers.dit_transformer_2d import DiTTransformer2DModel
    return DiTTransformer2DModel(num_attention_heads=pick(4, 2), attention_head_dim=16, in_channels=4, out_channels=8,
                                 num_layers=pick(2, 1), sample_size=8, patch_size=2, num_embeds_ada_norm=10)


def dit_inputs(g):
    return {"class_labels": torch.tensor([3], dtype=torch.int64), "noise": rnd(g, 1, 4, 8, 8)}


def dit_call(model, x, sigma, c, dtype):
    # DiTPipeline: timesteps = t[None].expand(B), the scheduler's int64 timesteps; class_labels int64.
    t = torch.tensor([int(round(sigma * 1000))], dtype=torch.int64, device=x.device)
    out = model(x, timestep=t, class_labels=c["class_labels"], return_dict=False)[0]
    v, _ = torch.split(out, 4, dim=1)
    return v


SA_T = 16


def stableaudio_build():
    from diffusers.models.transformers.stable_audio_transformer import StableAudioDiTModel
    h = pick(4, 2)
    return StableAudioDiTModel(sample_size=SA_T, in_channels=4, num_layers=pick(2, 1), attention_head_dim=16,
                               num_attention_heads=h, num_key_value_attention_heads=h // 2, out_channels=4,
                               cross_attention_dim=pick(32, 16), time_proj_dim=pick(32, 16),
                               global_states_input_dim=pick(24, 16), cross_attention_input_dim=pick(24, 16))


def stableaudio_inputs(g):
    from diffusers.models.embeddings import get_1d_rotary_pos_embed
    # StableAudioPipeline: rotary over attention_head_dim // 2 channels (partial), positions = latent length + the
    # one global token, use_real=True, repeat_interleave_real=False (half layout).
    cos, sin = get_1d_rotary_pos_embed(16 // 2, SA_T + 1, use_real=True, repeat_interleave_real=False)
    return {"encoder_hidden_states": rnd(g, 1, pick(8, 4), pick(24, 16)),
            "global_hidden_states": rnd(g, 1, 1, pick(24, 16)),
            "image_rotary_cos": cos, "image_rotary_sin": sin, "noise": rnd(g, 1, 4, SA_T)}


def stableaudio_call(model, x, sigma, c, dtype):
    # StableAudioPipeline passes t.unsqueeze(0) of CosineDPMSolverMultistepScheduler.timesteps, i.e. the EDM noise
    # preconditioning atan(sigma) / pi * 2 (float32); the model casts it to its dtype.
    t = torch.tensor([math.atan(sigma) / math.pi * 2], dtype=torch.float32, device=x.device)
    return model(x, t, encoder_hidden_states=c["encoder_hidden_states"],
                 global_hidden_states=c["global_hidden_states"],
                 rotary_embedding=(c["image_rotary_cos"], c["image_rotary_sin"]), return_dict=False)[0]


def mochi_build():
    from diffusers.models.transformers.transformer_mochi import MochiTransformer3DModel
    return MochiTransformer3DModel(patch_size=2, num_attention_heads=pick(4, 2), attention_head_dim=16,
                                   num_layers=2, pooled_projection_dim=pick(32, 16), in_channels=4,
                                   text_embed_dim=pick(32, 16), time_embed_dim=pick(32, 16),
                                   max_sequence_length=pick(8, 4))


def mochi_inputs(g):
    n = pick(8, 4)
    return {"encoder_hidden_states": rnd(g, 1, n, pick(32, 16)), "encoder_attention_mask": text_mask(n, pick(2, 1)),
            "noise": rnd(g, 1, 4, pick(2, 1), 8, 8)}


def mochi_call(model, x, sigma, c, dtype):
    # MochiPipeline: FlowMatchEuler with invert_sigmas (t = (1 - sigma) * 1000, Mochi's t=0 is noise), passed as
    # t.expand(B).to(latents.dtype) with its latents float32; stepping the inverted sigmas with the raw output equals
    # the shared convention with v = -output.
    t = torch.tensor([(1.0 - sigma) * 1000.0], dtype=torch.float32, device=x.device)
    out = model(hidden_states=x, encoder_hidden_states=c["encoder_hidden_states"], timestep=t,
                encoder_attention_mask=c["encoder_attention_mask"], attention_kwargs=None, return_dict=False)[0]
    return -out



def hidream_build():
    from diffusers.models.transformers.transformer_hidream_image import HiDreamImageTransformer2DModel
    # HiDream-I1 layout scaled down: double-stream then single-stream blocks, each with a 4-expert top-2 MoE FFN
    # (plus shared expert) on the image stream (--small: 3 experts, top-2); axes (8, 4, 4) = head_dim 16 so RoPE covers the whole head.
    return HiDreamImageTransformer2DModel(patch_size=2, in_channels=4, out_channels=4, num_layers=1,
                                          num_single_layers=1, attention_head_dim=16, num_attention_heads=2,
                                          caption_channels=[pick(32, 16), pick(24, 16)], text_emb_dim=pick(32, 16),
                                          num_routed_experts=pick(4, 3), num_activated_experts=2, axes_dims_rope=(8, 4, 4),
                                          max_resolution=(8, 8), llama_layers=[0, 1])


def hidream_inputs(g):
    n = pick(8, 4)
    return {"encoder_hidden_states_t5": rnd(g, 1, n, pick(32, 16)),
            "encoder_hidden_states_llama3": rnd(g, 2, 1, n, pick(24, 16)), "pooled_embeds": rnd(g, 1, pick(32, 16)),
            "noise": rnd(g, 1, 4, 8, 8)}


def hidream_call(model, x, sigma, c, dtype):
    # HiDreamImagePipeline: timestep = t.expand(B) (FlowMatchEuler sigma*1000, float32), encoder_hidden_states =
    # [T5 embeds, stacked Llama-3 hidden layers (L, B, S, D)], then noise_pred = -noise_pred. Square latents: the
    # model patchifies itself (no img_sizes / img_ids).
    t = torch.tensor([sigma * 1000.0], dtype=torch.float32, device=x.device)
    out = model(hidden_states=x, timesteps=t,
                encoder_hidden_states=[c["encoder_hidden_states_t5"], c["encoder_hidden_states_llama3"]],
                pooled_embeds=c["pooled_embeds"], return_dict=False)[0]
    return -out



def _flux_pack(x):
    # FluxPipeline/ChromaPipeline._pack_latents: (B, C, H, W) -> (B, H/2 * W/2, C*4)
    b, c, h, w = x.shape
    return x.view(b, c, h // 2, 2, w // 2, 2).permute(0, 2, 4, 1, 3, 5).reshape(b, (h // 2) * (w // 2), c * 4)


def _flux_img_ids(h, w):
    # FluxPipeline/ChromaPipeline._prepare_latent_image_ids over the packed grid: (h*w, 3) = (0, row, col)
    ids = torch.zeros(h, w, 3)
    ids[..., 1] = ids[..., 1] + torch.arange(h)[:, None]
    ids[..., 2] = ids[..., 2] + torch.arange(w)[None, :]
    return ids.reshape(h * w, 3)


def chroma_build():
    from diffusers.models.transformers.transformer_chroma import ChromaTransformer2DModel
    return ChromaTransformer2DModel(patch_size=1, in_channels=16, num_layers=1, num_single_layers=1,
                                    attention_head_dim=16, num_attention_heads=2, joint_attention_dim=pick(32, 16),
                                    axes_dims_rope=(4, 6, 6), approximator_num_channels=16,
                                    approximator_hidden_dim=pick(64, 32), approximator_layers=pick(5, 2))


def chroma_inputs(g):
    n, pad = pick(8, 4), 2
    # ChromaPipeline._get_t5_prompt_embeds: the T5 mask extended by one padding token (indices <= valid length),
    # cast to the text dtype; _prepare_attention_mask appends ones for the image tokens (latents dtype).
    valid = n - pad
    tmask = (torch.arange(n) <= valid).float()[None]
    return {"encoder_hidden_states": rnd(g, 1, n, pick(32, 16)), "txt_ids": torch.zeros(n, 3),
            "img_ids": _flux_img_ids(4, 4), "attention_mask": torch.cat([tmask, torch.ones(1, 16)], dim=1),
            "noise": _flux_pack(rnd(g, 1, 4, 8, 8))}


def chroma_call(model, x, sigma, c, dtype):
    # ChromaPipeline: timestep = t.expand(B).to(latents.dtype), passed as timestep / 1000 (the model multiplies by
    # 1000 again); output used as is.
    t = torch.tensor([sigma * 1000.0], dtype=torch.float32, device=x.device).to(x.dtype)
    return model(hidden_states=x, timestep=t / 1000, encoder_hidden_states=c["encoder_hidden_states"],
                 txt_ids=c["txt_ids"], img_ids=c["img_ids"], attention_mask=c["attention_mask"],
                 joint_attention_kwargs=None, return_dict=False)[0]



def cogview3plus_build():
    from diffusers.models.transformers.transformer_cogview3plus import CogView3PlusTransformer2DModel
    return CogView3PlusTransformer2DModel(patch_size=2, in_channels=4, num_layers=pick(2, 1), attention_head_dim=16,
                                          num_attention_heads=pick(4, 2), out_channels=4, text_embed_dim=pick(32, 16),
                                          time_embed_dim=pick(48, 32), condition_dim=8, pooled_projection_dim=6 * 8,
                                          pos_embed_max_size=8, sample_size=8)


def cogview3plus_inputs(g):
    # CogView3PlusPipeline: original_size / target_size / crops_coords_top_left as (1, 2) tensors in the prompt dtype.
    return {"encoder_hidden_states": rnd(g, 1, pick(8, 4), pick(32, 16)),
            "original_size": torch.tensor([[1024.0, 1024.0]]), "target_size": torch.tensor([[1024.0, 1024.0]]),
            "crop_coords": torch.tensor([[0.0, 0.0]]), "noise": rnd(g, 1, 4, 8, 8)}


def cogview3plus_call(model, x, sigma, c, dtype):
    # CogView3PlusPipeline: timestep = t.expand(B), CogVideoXDDIMScheduler's int64 timesteps; output .float() then the
    # scheduler step (v-prediction); here used as the flow velocity as is.
    t = torch.tensor([int(round(sigma * 1000))], dtype=torch.int64, device=x.device)
    return model(hidden_states=x, encoder_hidden_states=c["encoder_hidden_states"], timestep=t,
                 original_size=c["original_size"], target_size=c["target_size"], crop_coords=c["crop_coords"],
                 return_dict=False)[0]



def latte_build():
    from diffusers.models.transformers.latte_transformer_3d import LatteTransformer3DModel
    # Latte-1 config scaled down: ada_norm_single BasicTransformerBlocks, GELU-tanh, biased attention, learned sigma.
    h = pick(4, 2)
    return LatteTransformer3DModel(num_attention_heads=h, attention_head_dim=16, in_channels=4, out_channels=8,
                                   num_layers=pick(2, 1), cross_attention_dim=16 * h, attention_bias=True,
                                   sample_size=8, patch_size=2, activation_fn="gelu-approximate",
                                   norm_type="ada_norm_single", norm_elementwise_affine=False, norm_eps=1e-6,
                                   caption_channels=pick(32, 16), video_length=2)


def latte_inputs(g):
    return {"encoder_hidden_states": rnd(g, 1, pick(8, 4), pick(32, 16)), "noise": rnd(g, 1, 4, 2, 8, 8)}


def latte_call(model, x, sigma, c, dtype):
    # LattePipeline: current_timestep = t expanded to the batch (the DDPM scheduler's int64 timesteps); learned sigma:
    # noise_pred.chunk(2, dim=1)[0].
    t = torch.tensor([int(round(sigma * 1000))], dtype=torch.int64, device=x.device)
    out = model(x, encoder_hidden_states=c["encoder_hidden_states"], timestep=t, enable_temporal_attentions=True,
                return_dict=False)[0]
    v, _ = out.chunk(2, dim=1)
    return v



def easyanimate_build():
    from diffusers.models.transformers.transformer_easyanimate import EasyAnimateTransformer3DModel
    # 2 blocks, the first MMDiT (separate text q/k/v + text FFN), the second a plain block on [text, video].
    return EasyAnimateTransformer3DModel(num_attention_heads=pick(4, 2), attention_head_dim=16, in_channels=4,
                                         out_channels=4, patch_size=2, sample_width=8, sample_height=8,
                                         num_layers=2, mmdit_layers=1, time_embed_dim=pick(48, 32),
                                         text_embed_dim=pick(32, 16))


def easyanimate_inputs(g):
    return {"encoder_hidden_states": rnd(g, 1, pick(8, 4), pick(32, 16)), "noise": rnd(g, 1, 4, 2, 8, 8)}


def easyanimate_call(model, x, sigma, c, dtype):
    # EasyAnimatePipeline: t_expand = torch.tensor([t] * B).to(dtype=latent_model_input.dtype), FlowMatchEuler
    # timesteps (sigma*1000); output used as is (chunked only when it has twice the latent channels).
    t = torch.tensor([sigma * 1000.0], device=x.device).to(dtype=x.dtype)
    return model(x, t, encoder_hidden_states=c["encoder_hidden_states"], return_dict=False)[0]



def omnigen_build():
    from diffusers.models.transformers.transformer_omnigen import OmniGenTransformer2DModel
    h, d = pick(4, 2), 16
    # Phi-3-style LLM backbone; su-scaled RoPE factors (one per rotary frequency) made up but not all ones.
    short = [1.0 + 0.05 * i for i in range(d // 2)]
    return OmniGenTransformer2DModel(in_channels=4, patch_size=2, hidden_size=h * d, num_attention_heads=h,
                                     num_key_value_heads=h, intermediate_size=pick(96, 48), num_layers=pick(2, 1),
                                     pad_token_id=0, vocab_size=64, rope_scaling={"short_factor": short,
                                                                                  "long_factor": [2 * f for f in short]},
                                     pos_embed_max_size=8, time_step_dim=pick(64, 32))


def omnigen_inputs(g):
    # OmniGenPipeline / OmniGenMultiModalProcessor collator for a text-only prompt of n tokens and a 4x4-patch
    # output image: sequence [text, time token, image]; mask = causal over text + time token, image rows see
    # everything; position_ids = arange (no padding).
    n, img = pick(8, 4), 16
    m = torch.tril(torch.ones(n + 1, n + 1))
    m = torch.cat([m, torch.zeros(n + 1, img)], dim=-1)
    m = torch.cat([m, torch.ones(img, n + 1 + img)], dim=0)
    return {"input_ids": torch.randint(1, 64, (1, n), generator=g), "attention_mask": m[None],
            "position_ids": torch.arange(n + 1 + img)[None], "noise": rnd(g, 1, 4, 8, 8)}


def omnigen_call(model, x, sigma, c, dtype):
    # OmniGenPipeline: FlowMatchEulerDiscreteScheduler(invert_sigmas=True, num_train_timesteps=1), so t = 1 - sigma
    # (OmniGen's t=0 is noise), passed as t.expand(B); stepping the inverted sigmas with the raw output equals the
    # shared convention with v = -output.
    t = torch.tensor([1.0 - sigma], dtype=torch.float32, device=x.device)
    out = model(hidden_states=x, timestep=t, input_ids=c["input_ids"], input_img_latents=[], input_image_sizes={},
                attention_mask=c["attention_mask"], position_ids=c["position_ids"], return_dict=False)[0]
    return -out


def cosmos_build():
    from diffusers.models.transformers.transformer_cosmos import CosmosTransformer3DModel
    # Cosmos-1.0 layout scaled down: learnable (normalised) extra positional embedding, padding-mask channel,
    # adaLN-LoRA (hidden adaln_lora_dim) modulation; head_dim 16 -> RoPE t/h/w dims 8/4/4.
    return CosmosTransformer3DModel(in_channels=4, out_channels=4, num_attention_heads=2, attention_head_dim=16,
                                    num_layers=pick(2, 1), mlp_ratio=pick(4.0, 2.0), text_embed_dim=pick(32, 16),
                                    adaln_lora_dim=pick(32, 16), max_size=(128, 240, 240), patch_size=(1, 2, 2),
                                    rope_scale=(2.0, 1.0, 1.0), concat_padding_mask=True,
                                    extra_pos_embed_type="learnable")


def cosmos_inputs(g):
    # Cosmos pipelines: padding_mask = latents.new_zeros(1, 1, height, width) at the pixel size (the model resizes
    # it to the latent grid, NEAREST); 8x8 latents of a 64x64 picture.
    return {"encoder_hidden_states": rnd(g, 1, pick(8, 4), pick(32, 16)), "padding_mask": torch.zeros(1, 1, 64, 64),
            "noise": rnd(g, 1, 4, 2, 8, 8)}


def cosmos_call(model, x, sigma, c, dtype):
    # Cosmos(2) pipelines: current_t = sigma_edm / (sigma_edm + 1) (= the flow sigma), timestep =
    # current_t.expand(B).to(transformer_dtype), model input latents * (1 - t) (= the flow latents), x0 = (1 - t) *
    # x_edm - t * out, so out is the flow velocity; fps passed for video (30, the text2world default).
    t = torch.tensor([sigma], dtype=torch.float32, device=x.device).to(dtype)
    return model(hidden_states=x, timestep=t, encoder_hidden_states=c["encoder_hidden_states"], fps=30,
                 padding_mask=c["padding_mask"], return_dict=False)[0]


def wanvace_build():
    from diffusers.models.transformers.transformer_wan_vace import WanVACETransformer3DModel
    # Wan2.1-VACE layout scaled down: main Wan blocks plus VACE control blocks whose hints are added after the main
    # blocks listed in vace_layers; vace_in_channels = 2*4 video + 4 mask. head_dim 18 -> RoPE t/h/w dims 6/6/6:
    # WanRotaryPosEmbed builds its table from (d - 4*(d//6), 2*(d//6), 2*(d//6)) columns and cuts it by
    # (d - 2*(d//3), d//3, d//3), which agree at 18 as at the real 128, not at 16 (8/4/4 against 6/5/5).
    return WanVACETransformer3DModel(patch_size=(1, 2, 2), num_attention_heads=2, attention_head_dim=18,
                                     in_channels=4, out_channels=4, text_dim=pick(32, 16), freq_dim=pick(32, 16),
                                     ffn_dim=pick(96, 64), num_layers=2, cross_attn_norm=True,
                                     qk_norm="rms_norm_across_heads", eps=1e-6, rope_max_seq_len=pick(1024, 32),
                                     vace_layers=pick([0, 1], [0]), vace_in_channels=12)


def wanvace_inputs(g):
    # WanVACEPipeline: conditioning_latents = [inactive, reactive latents (2 z_dim), the mask folded to channels];
    # conditioning_scale = tensor([1.0] * len(vace_layers)) in the transformer dtype.
    n = pick(8, 4)
    ctrl = torch.cat([rnd(g, 1, 8, 2, 8, 8), (torch.rand(1, 4, 2, 8, 8, generator=g) > 0.5).float()], dim=1)
    return {"encoder_hidden_states": rnd(g, 1, n, pick(32, 16)), "control_hidden_states": ctrl,
            "control_hidden_states_scale": torch.ones(len(pick([0, 1], [0]))), "noise": rnd(g, 1, 4, 2, 8, 8)}


def wanvace_call(model, x, sigma, c, dtype):
    # WanVACEPipeline: timestep = t.expand(B), the UniPCMultistep (flow) scheduler's int64 timesteps; flow-prediction
    # output used as is.
    t = torch.tensor([int(sigma * 1000)], dtype=torch.int64, device=x.device)
    return model(hidden_states=x, timestep=t, encoder_hidden_states=c["encoder_hidden_states"],
                 control_hidden_states=c["control_hidden_states"],
                 control_hidden_states_scale=c["control_hidden_states_scale"], attention_kwargs=None,
                 return_dict=False)[0]


def luminanext_build():
    from diffusers.models.transformers.lumina_nextdit2d import LuminaNextDiT2DModel
    # Lumina-Next-SFT layout scaled down: GQA (4 q / 2 kv heads), across-heads LayerNorm q/k norms, learned sigma.
    # sample_size 16 (pipeline default image 128 px) with an 8x8 latent (64 px) so the proportional-attention and
    # time-aware RoPE scaling of LuminaPipeline are not the identity.
    return LuminaNextDiT2DModel(sample_size=16, patch_size=2, in_channels=4, hidden_size=pick(64, 32),
                                num_layers=pick(2, 1), num_attention_heads=4, num_kv_heads=2, multiple_of=16,
                                ffn_dim_multiplier=None, norm_eps=1e-5, learn_sigma=True, qk_norm=True,
                                cross_attention_dim=pick(32, 16), scaling_factor=1.0)


def luminanext_inputs(g):
    from diffusers.models.embeddings import get_2d_rotary_pos_embed_lumina
    # LuminaPipeline: scaling_factor = sqrt(w*h / default_image_size**2) = sqrt(64*64 / 128**2) = 0.5; every step's
    # current_timestep (1 - sigma) is below scaling_watershed 1.0, so linear_factor = 0.5, ntk_factor = 1.0 each step;
    # table get_2d_rotary_pos_embed_lumina(head_dim, 384, 384, ...) (complex64), recorded here at 8x8 (same leading
    # rows; the model slices the 4x4 grid).
    rope = get_2d_rotary_pos_embed_lumina(pick(64, 32) // 4, 8, 8, linear_factor=0.5, ntk_factor=1.0)  # head_dim
    n = pick(8, 4)
    return {"encoder_hidden_states": rnd(g, 1, n, pick(32, 16)), "encoder_mask": text_mask(n, pick(2, 1)),
            "image_rotary_emb": rope, "noise": rnd(g, 1, 4, 8, 8)}


def luminanext_call(model, x, sigma, c, dtype):
    # LuminaPipeline: current_timestep = 1 - t / num_train_timesteps (float32), cross_attention_kwargs =
    # {"base_sequence_length": (default_image_size // 16) ** 2} (proportional_attn), noise_pred.chunk(2, dim=1)[0],
    # then noise_pred = -noise_pred.
    t = torch.tensor([1.0 - sigma], dtype=torch.float32, device=x.device)
    out = model(hidden_states=x, timestep=t, encoder_hidden_states=c["encoder_hidden_states"],
                encoder_mask=c["encoder_mask"], image_rotary_emb=c["image_rotary_emb"],
                cross_attention_kwargs={"base_sequence_length": (16 * 8 // 16) ** 2}, return_dict=False)[0]
    v, _ = out.chunk(2, dim=1)
    return -v


def _cogvideox_crop_region(src, tgt_width, tgt_height):
    # diffusers pipelines/cogvideo (and consisid) get_resize_crop_region_for_grid
    tw, th = tgt_width, tgt_height
    h, w = src
    r = h / w
    if r > (th / tw):
        resize_height = th
        resize_width = int(round(th / h * w))
    else:
        resize_width = tw
        resize_height = int(round(tw / w * h))
    crop_top = int(round((th - resize_height) / 2.0))
    crop_left = int(round((tw - resize_width) / 2.0))
    return (crop_top, crop_left), (crop_top + resize_height, crop_left + resize_width)


CID_VIT = 5  # LocalFacialExtractor scales (EVA-CLIP hidden layers)


def consisid_build():
    from diffusers.models.transformers.consisid_transformer_3d import ConsisIDTransformer3DModel
    # ConsisID (CogVideoX-5B-I2V + identity modules) scaled down: inner 48 = 3 x 16 so the perceiver kv width
    # inner*2/3 = 32 = LFE_output_dim; face cross-attention after every 2nd block (block 0 of 2; --small: 1 block,
    # interval 1); RoPE on.
    return ConsisIDTransformer3DModel(num_attention_heads=3, attention_head_dim=16, in_channels=8, out_channels=4,
                                      time_embed_dim=pick(48, 32), text_embed_dim=pick(32, 16), num_layers=pick(2, 1),
                                      sample_width=8, sample_height=8, sample_frames=5, patch_size=2,
                                      max_text_seq_length=pick(8, 4), use_rotary_positional_embeddings=True,
                                      use_learned_positional_embeddings=False, is_train_face=True, is_kps=False,
                                      cross_attn_interval=pick(2, 1), cross_attn_dim_head=16, cross_attn_num_heads=2,
                                      LFE_id_dim=pick(32, 16), LFE_vit_dim=16, LFE_depth=CID_VIT, LFE_dim_head=8,
                                      LFE_num_heads=2, LFE_num_id_token=2, LFE_num_querie=4, LFE_output_dim=32,
                                      LFE_ff_mult=2, LFE_num_scale=CID_VIT, local_face_scale=1.0)


def consisid_inputs(g):
    from diffusers.models.embeddings import get_3d_rotary_pos_embed
    # ConsisIDPipeline._prepare_rotary_positional_embeddings (CogVideoX 1.0 style): grid 4x4 after 2x2 patches, base
    # grid sample_width // patch = 4, 2 latent frames; image latents = the reference frame then zero frames,
    # concatenated to the noise on channels; id_cond (ArcFace + CLIP id vector) and 5 EVA-CLIP hidden layers.
    cos, sin = get_3d_rotary_pos_embed(embed_dim=16, crops_coords=_cogvideox_crop_region((4, 4), 4, 4),
                                       grid_size=(4, 4), temporal_size=2)
    img = torch.cat([rnd(g, 1, 1, 4, 8, 8), torch.zeros(1, 1, 4, 8, 8)], dim=1)
    d = {"encoder_hidden_states": rnd(g, 1, pick(8, 4), pick(32, 16)), "image_latents": img,
         "id_cond": rnd(g, 1, pick(32, 16))}
    for i in range(CID_VIT):
        d[f"id_vit_hidden_{i}"] = rnd(g, 1, 5, 16)
    d.update({"image_rotary_cos": cos, "image_rotary_sin": sin, "noise": rnd(g, 1, 2, 4, 8, 8)})
    return d


def consisid_call(model, x, sigma, c, dtype):
    # ConsisIDPipeline: latent_model_input = cat([latents, image_latents], dim=2); timestep = t.expand(B), the
    # CogVideoXDPMScheduler's int64 timesteps; v-prediction output used as the flow velocity as is.
    t = torch.tensor([int(round(sigma * 1000))], dtype=torch.int64, device=x.device)
    inp = torch.cat([x, c["image_latents"]], dim=2)
    return model(hidden_states=inp, encoder_hidden_states=c["encoder_hidden_states"], timestep=t,
                 image_rotary_emb=(c["image_rotary_cos"], c["image_rotary_sin"]), attention_kwargs=None,
                 id_cond=c["id_cond"], id_vit_hidden=[c[f"id_vit_hidden_{i}"] for i in range(CID_VIT)],
                 return_dict=False)[0]


def bria_build():
    from diffusers.models.transformers.transformer_bria import BriaTransformer2DModel
    # Bria-3.2 layout scaled down (Flux-style, no pooled text, no guidance): in_channels 16 = 4 latent channels
    # packed 2x2; axes (4, 6, 6) = head_dim 16.
    return BriaTransformer2DModel(patch_size=1, in_channels=16, num_layers=1, num_single_layers=1,
                                  attention_head_dim=16, num_attention_heads=2, joint_attention_dim=pick(32, 16),
                                  pooled_projection_dim=None, guidance_embeds=False, axes_dims_rope=[4, 6, 6],
                                  rope_theta=10000, time_theta=10000)


def bria_inputs(g):
    # BriaPipeline: T5 prompt embeds with the padded positions zeroed ("zero padding for prompts"), text_ids zeros
    # (seq, 3), latent ids (0, row, col) over the packed 4x4 grid, latents packed 2x2 as Flux packs them.
    n, pad = pick(8, 4), pick(2, 1)
    txt = rnd(g, 1, n, pick(32, 16))
    txt[:, n - pad:] = 0
    return {"encoder_hidden_states": txt, "txt_ids": torch.zeros(n, 3), "img_ids": _flux_img_ids(4, 4),
            "noise": _flux_pack(rnd(g, 1, 4, 8, 8))}


def bria_call(model, x, sigma, c, dtype):
    # BriaPipeline (FlowMatchEuler): timestep = t.expand(B), sigma*1000 float32 (the model casts it to its dtype; no
    # /1000 as in Flux); "predicts v from flow-matching", used as is.
    t = torch.tensor([sigma * 1000.0], dtype=torch.float32, device=x.device)
    return model(hidden_states=x, timestep=t, encoder_hidden_states=c["encoder_hidden_states"],
                 attention_kwargs=None, return_dict=False, txt_ids=c["txt_ids"], img_ids=c["img_ids"])[0]


FP_WIN = 2  # latent window (frames denoised per section)


def framepack_build():
    from diffusers.models.transformers.transformer_hunyuan_video_framepack import \
        HunyuanVideoFramepackTransformer3DModel
    # FramePack (HunyuanVideo I2V) layout scaled down: history patch embedder (1x, 2x, 4x kernels), SigLIP image
    # projection, distilled guidance embedding; head_dim 16 = RoPE axes (4, 6, 6).
    return HunyuanVideoFramepackTransformer3DModel(in_channels=4, out_channels=4, num_attention_heads=2,
                                                   attention_head_dim=16, num_layers=1, num_single_layers=1,
                                                   num_refiner_layers=1, mlp_ratio=pick(4.0, 2.0), patch_size=2,
                                                   patch_size_t=1, qk_norm="rms_norm", guidance_embeds=True,
                                                   text_embed_dim=pick(32, 16), pooled_projection_dim=pick(32, 16),
                                                   rope_theta=256.0, rope_axes_dim=(4, 6, 6),
                                                   image_condition_type=None, has_image_proj=True,
                                                   image_proj_dim=pick(32, 16), has_clean_x_embedder=True)


def framepack_inputs(g):
    # HunyuanVideoFramepackPipeline, inverted anti-drifting sampling, the last section (latent padding 0):
    # indices = arange(1 + 0 + window + sum(history_sizes [1, 2, 16])) split into prefix / latents / 1x / 2x / 4x;
    # clean latents = [image latents, 1x history]; history latents of an earlier section (random here, zeros only in
    # the first section); SigLIP image embeds, CLIP pooled prompt, Llama prompt with a mask (2 padded tokens).
    idx = torch.arange(0, 1 + 0 + FP_WIN + 19)
    prefix, lat, h1, h2, h4 = idx.split([1, FP_WIN, 1, 2, 16], dim=0)
    hist = rnd(g, 1, 4, 19, 8, 8)
    h1x, h2x, h4x = hist.split([1, 2, 16], dim=2)
    n = pick(8, 4)
    return {"encoder_hidden_states": rnd(g, 1, n, pick(32, 16)), "encoder_attention_mask": text_mask(n, pick(2, 1)),
            "pooled_projections": rnd(g, 1, pick(32, 16)), "image_embeds": rnd(g, 1, pick(8, 4), pick(32, 16)),
            "indices_latents": lat, "latents_clean": torch.cat([rnd(g, 1, 4, 1, 8, 8), h1x], dim=2),
            "indices_latents_clean": torch.cat([prefix, h1], dim=0), "latents_history_2x": h2x,
            "indices_latents_history_2x": h2, "latents_history_4x": h4x, "indices_latents_history_4x": h4,
            "guidance": torch.tensor([10.0]) * 1000.0, "noise": rnd(g, 1, 4, FP_WIN, 8, 8)}


def framepack_call(model, x, sigma, c, dtype):
    # HunyuanVideoFramepackPipeline: timestep = t.expand(B) (FlowMatchEuler sigma*1000, float32, not cast); guidance =
    # tensor([guidance_scale=10] * B, transformer dtype) * 1000; flow output used as is (true_cfg_scale 1).
    t = torch.tensor([sigma * 1000.0], dtype=torch.float32, device=x.device)
    keys = ["encoder_hidden_states", "encoder_attention_mask", "pooled_projections", "image_embeds",
            "indices_latents", "guidance", "latents_clean", "indices_latents_clean", "latents_history_2x",
            "indices_latents_history_2x", "latents_history_4x", "indices_latents_history_4x"]
    return model(hidden_states=x, timestep=t, attention_kwargs=None, return_dict=False,
                 **{k: c[k] for k in keys})[0]


def zimage_build():
    from diffusers.models.transformers.transformer_z_image import ZImageTransformer2DModel
    # Z-Image-Turbo layout scaled down (basic, non-omni mode): noise refiner (modulated) + context refiner
    # (unmodulated) then joint [image, caption] blocks; head_dim 16 = RoPE axes (4, 6, 6); the t-embedder's hidden
    # width is fixed at 1024 in the code.
    model = ZImageTransformer2DModel(all_patch_size=(2,), all_f_patch_size=(1,), in_channels=4, dim=32,
                                     n_layers=pick(2, 1), n_refiner_layers=1, n_heads=2, n_kv_heads=2, norm_eps=1e-5,
                                     qk_norm=True, cap_feat_dim=pick(32, 16), siglip_feat_dim=None, rope_theta=256.0,
                                     t_scale=1000.0, axes_dims=[4, 6, 6], axes_lens=[64, 16, 16])
    if "localshim" in sys.modules:  # torch 1.x: no `with torch.device(...)`; fill the RoPE cache the same way
        import localshim
        re = model.rope_embedder
        re.freqs_cis = localshim.call_without_device_context(re.precompute_freqs_cis, re.axes_dims, re.axes_lens,
                                                             theta=re.theta)
    return model


def zimage_inputs(g):
    # ZImagePipeline: prompt embeds are the Qwen3 hidden states of the valid (unpadded) tokens only, one (L, D)
    # tensor per prompt; the model pads them to a multiple of 32 with a learned cap_pad_token.
    return {"encoder_hidden_states": rnd(g, 1, pick(6, 3), pick(32, 16)), "noise": rnd(g, 1, 4, 8, 8)}


def zimage_call(model, x, sigma, c, dtype):
    # ZImagePipeline: timestep = (1000 - t) / 1000 (FlowMatchEuler t = sigma*1000; the model multiplies by t_scale
    # 1000), latents.unsqueeze(2) unbound into a list of (C, 1, H, W), output stacked, squeeze(2), then
    # noise_pred = -noise_pred.
    t = (1000.0 - torch.tensor([sigma * 1000.0], dtype=torch.float32, device=x.device)) / 1000
    out = model(list(x.unsqueeze(2).unbind(dim=0)), t, [c["encoder_hidden_states"][0]], return_dict=False)[0]
    return -torch.stack([o.float() for o in out], dim=0).squeeze(2)


def qwenimage_build():
    from diffusers.models.transformers.transformer_qwenimage import QwenImageTransformer2DModel
    # Qwen-Image layout scaled down: latents packed 2x2 (in_channels 16 = 4 x 4); head_dim 16 = RoPE axes (4, 6, 6).
    return QwenImageTransformer2DModel(patch_size=2, in_channels=16, out_channels=4, num_layers=pick(2, 1),
                                       attention_head_dim=16, num_attention_heads=2, joint_attention_dim=pick(32, 16),
                                       guidance_embeds=False, axes_dims_rope=(4, 6, 6))


def qwenimage_inputs(g):
    # QwenImagePipeline: Qwen2.5-VL prompt embeds with their mask (the pipeline trims the batch to the longest valid
    # prompt, so with one prompt the mask is all ones; txt_seq_lens = mask.sum(1)); latents packed 2x2 as Flux packs.
    n = pick(8, 4)
    return {"encoder_hidden_states": rnd(g, 1, n, pick(32, 16)), "encoder_hidden_states_mask": text_mask(n, 0),
            "noise": _flux_pack(rnd(g, 1, 4, 8, 8))}


def qwenimage_call(model, x, sigma, c, dtype):
    # QwenImagePipeline: timestep = t.expand(B).to(latents.dtype), passed as timestep / 1000 (the model's Timesteps
    # scale 1000 undoes it); img_shapes = [(1, H/16, W/16)] per sample = the packed 4x4 grid; flow output as is.
    t = torch.tensor([sigma * 1000.0], dtype=torch.float32, device=x.device).to(x.dtype)
    m = c["encoder_hidden_states_mask"]
    return model(hidden_states=x, timestep=t / 1000, encoder_hidden_states=c["encoder_hidden_states"],
                 encoder_hidden_states_mask=m, img_shapes=[[(1, 4, 4)]], txt_seq_lens=m.sum(dim=1).tolist(),
                 attention_kwargs=None, return_dict=False)[0]


def prx_build():
    from diffusers.models.transformers.transformer_prx import PRXTransformer2DModel
    # PRX (Photoroom) layout scaled down: image-only blocks cross/self-attending to [text, image] keys; head_dim 16
    # = RoPE axes (8, 8).
    return PRXTransformer2DModel(in_channels=4, patch_size=2, context_in_dim=pick(32, 16), hidden_size=32,
                                 mlp_ratio=3.5, num_heads=2, depth=pick(2, 1), axes_dim=[8, 8], theta=10000,
                                 time_factor=1000.0, time_max_period=10000)


def prx_inputs(g):
    # PRXPipeline: T5-Gemma prompt embeds and their 0/1 mask (2 padded tokens), passed as attention_mask.
    n = pick(8, 4)
    return {"encoder_hidden_states": rnd(g, 1, n, pick(32, 16)), "attention_mask": text_mask(n, pick(2, 1)),
            "noise": rnd(g, 1, 4, 8, 8)}


def prx_call(model, x, sigma, c, dtype):
    # PRXPipeline: t_cont = (t.float() / num_train_timesteps).view(1) = sigma (float32; the model scales by
    # time_factor 1000); output stepped by FlowMatchEuler as is.
    t = torch.tensor([sigma * 1000.0], dtype=torch.float32, device=x.device).float() / 1000
    return model(hidden_states=x, timestep=t, encoder_hidden_states=c["encoder_hidden_states"],
                 attention_mask=c["attention_mask"], return_dict=False)[0]


def kandinsky5_build():
    from diffusers.models.transformers.transformer_kandinsky import Kandinsky5Transformer3DModel
    # Kandinsky 5.0 T2V Lite layout scaled down: visual_cond (latents + zero condition + mask channels), one text
    # encoder block then visual decoder blocks; head_dim 16 = RoPE axes (4, 6, 6).
    return Kandinsky5Transformer3DModel(in_visual_dim=4, in_text_dim=pick(32, 16), in_text_dim2=pick(24, 16),
                                        time_dim=pick(48, 32), out_visual_dim=4, patch_size=(1, 2, 2), model_dim=32,
                                        ff_dim=pick(96, 64), num_text_blocks=1, num_visual_blocks=pick(2, 1),
                                        axes_dims=(4, 6, 6), visual_cond=True, attention_type="regular")


def kandinsky5_inputs(g):
    # Kandinsky5T2VPipeline: channels-last video latents (B, F, H, W, C) with visual_cond zeros and a zero mask
    # channel appended; Qwen2.5-VL prompt embeds (valid tokens) and a CLIP pooled embed; rope positions arange over
    # frames, H/2, W/2 and the prompt length.
    n = pick(8, 4)
    return {"encoder_hidden_states": rnd(g, 1, n, pick(32, 16)), "pooled_projections": rnd(g, 1, pick(24, 16)),
            "visual_cond": torch.zeros(1, 2, 8, 8, 5), "text_rope_pos": torch.arange(n),
            "noise": rnd(g, 1, 2, 8, 8, 4)}


def kandinsky5_call(model, x, sigma, c, dtype):
    # Kandinsky5T2VPipeline: timestep = t.unsqueeze(0).repeat(B).to(dtype) (FlowMatchEuler sigma*1000);
    # visual_rope_pos = [arange(F), arange(H/2), arange(W/2)], scale_factor (1, 2, 2) (the 5 s model); the
    # predicted velocity updates the first C channels only.
    t = torch.tensor([sigma * 1000.0], dtype=torch.float32, device=x.device).to(dtype)
    inp = torch.cat([x, c["visual_cond"]], dim=-1)
    pos = [torch.arange(2), torch.arange(4), torch.arange(4)]
    return model(hidden_states=inp, encoder_hidden_states=c["encoder_hidden_states"], timestep=t,
                 pooled_projections=c["pooled_projections"], visual_rope_pos=pos, text_rope_pos=c["text_rope_pos"],
                 scale_factor=(1.0, 2.0, 2.0), sparse_params=None, return_dict=True).sample


def flux2_build():
    from diffusers.models.transformers.transformer_flux2 import Flux2Transformer2DModel
    # FLUX.2 layout scaled down (bench/unseen/replicas/flux2.py's sizes): one double- and one single-stream block,
    # head_dim 16 = RoPE axes (4, 4, 4, 4), in_channels 16 (4 latent channels patchified 2x2 by the pipeline).
    return Flux2Transformer2DModel(patch_size=1, in_channels=16, num_layers=1, num_single_layers=1,
                                   attention_head_dim=16, num_attention_heads=2, joint_attention_dim=16,
                                   timestep_guidance_channels=256, mlp_ratio=3.0, axes_dims_rope=(4, 4, 4, 4),
                                   rope_theta=2000, eps=1e-6)


def flux2_inputs(g):
    # Flux2Pipeline: text ids (0, 0, 0, l), latent ids (0, h, w, 0) over the patchified grid, latents packed
    # (B, C, H, W) -> (B, H*W, C), guidance 4.0 (float32).
    n = 4
    txt = rnd(g, 1, n, 16)
    lat = rnd(g, 1, 16, 4, 4)
    txt_ids = torch.cartesian_prod(torch.arange(1), torch.arange(1), torch.arange(1), torch.arange(n))[None]
    img_ids = torch.cartesian_prod(torch.arange(1), torch.arange(4), torch.arange(4), torch.arange(1))[None]
    return {"encoder_hidden_states": txt, "txt_ids": txt_ids, "img_ids": img_ids,
            "guidance": torch.full([1], 4.0, dtype=torch.float32),
            "noise": lat.reshape(1, 16, 16).permute(0, 2, 1)}


def flux2_call(model, x, sigma, c, dtype):
    # Flux2Pipeline: timestep = t.expand(B).to(latents.dtype), passed as timestep / 1000 (the model multiplies by
    # 1000), guidance float32; noise_pred[:, :latents.size(1)] stepped as is.
    t = torch.tensor([sigma * 1000.0], dtype=torch.float32, device=x.device).to(x.dtype)
    out = model(hidden_states=x, timestep=t / 1000, guidance=c["guidance"].float(),
                encoder_hidden_states=c["encoder_hidden_states"], txt_ids=c["txt_ids"], img_ids=c["img_ids"],
                joint_attention_kwargs=None, return_dict=False)[0]
    return out[:, : x.size(1):]


def hunyuanimage21_build():
    from diffusers.models.transformers.transformer_hunyuanimage import HunyuanImageTransformer2DModel
    # HunyuanImage-2.1 base layout scaled down (replicas/hunyuanimage21.py): no ByT5 glyph caption (its projection
    # is a fixed 2048 wide), no guidance embedding, no mean-flow; head_dim 16 = RoPE axes (8, 8).
    return HunyuanImageTransformer2DModel(in_channels=8, out_channels=8, num_attention_heads=2, attention_head_dim=16,
                                          num_layers=1, num_single_layers=1, num_refiner_layers=1, mlp_ratio=4.0,
                                          patch_size=(1, 1), qk_norm="rms_norm", guidance_embeds=False,
                                          text_embed_dim=16, text_embed_2_dim=None, rope_theta=256.0,
                                          rope_axes_dim=(8, 8), use_meanflow=False)


def hunyuanimage21_inputs(g):
    # HunyuanImagePipeline: Qwen2.5-VL prompt embeds and their 0/1 mask (the last token padding).
    return {"encoder_hidden_states": rnd(g, 1, 4, 16), "encoder_attention_mask": text_mask(4, 1),
            "noise": rnd(g, 1, 8, 4, 4)}


def hunyuanimage21_call(model, x, sigma, c, dtype):
    # HunyuanImagePipeline with its guider disabled (one call per step): timestep = t.expand(B).to(latents.dtype)
    # with t = sigma*1000; output stepped as is.
    t = torch.tensor([sigma * 1000.0], dtype=torch.float32, device=x.device).expand(x.shape[0]).to(x.dtype)
    return model(hidden_states=x, timestep=t, timestep_r=None, guidance=None, attention_kwargs={}, return_dict=False,
                 encoder_hidden_states=c["encoder_hidden_states"],
                 encoder_attention_mask=c["encoder_attention_mask"])[0]


def _ovis_pack(x):
    # OvisImagePipeline/LongCatImagePipeline._pack_latents: (B, C, H, W) -> (B, H/2 * W/2, C*4)
    b, ch, h, w = x.shape
    return x.view(b, ch, h // 2, 2, w // 2, 2).permute(0, 2, 4, 1, 3, 5).reshape(b, (h // 2) * (w // 2), ch * 4)


def _text_ids_diag(n, modality=0, start=0):
    ids = torch.zeros(n, 3)
    ids[..., 0] = modality
    ids[..., 1] = torch.arange(n) + start
    ids[..., 2] = torch.arange(n) + start
    return ids


def _image_ids(h, w, modality=0, start=0):
    ids = torch.zeros(h, w, 3)
    ids[..., 0] = modality
    ids[..., 1] = ids[..., 1] + torch.arange(h)[:, None] + start
    ids[..., 2] = ids[..., 2] + torch.arange(w)[None, :] + start
    return ids.reshape(h * w, 3)


def ovis_image_build():
    from diffusers.models.transformers.transformer_ovis_image import OvisImageTransformer2DModel
    # Ovis-Image layout scaled down (replicas/ovis_image.py): head_dim 16 = RoPE axes (4, 6, 6).
    return OvisImageTransformer2DModel(patch_size=1, in_channels=16, out_channels=16, num_layers=1, num_single_layers=1,
                                       attention_head_dim=16, num_attention_heads=2, joint_attention_dim=16,
                                       axes_dims_rope=(4, 6, 6))


def ovis_image_inputs(g):
    # OvisImagePipeline: prompt embeds with the padding zeroed (prompt_embeds * attention_mask), text ids
    # (0, l, l), image ids (0, h, w), latents packed 2x2.
    txt = rnd(g, 1, 4, 16)
    txt[:, 3:] = 0
    return {"encoder_hidden_states": txt, "txt_ids": _text_ids_diag(4), "img_ids": _image_ids(4, 4),
            "noise": _ovis_pack(rnd(g, 1, 4, 8, 8))}


def ovis_image_call(model, x, sigma, c, dtype):
    # OvisImagePipeline with guidance_scale 1 (no second, unconditional call): timestep / 1000 of
    # t.expand(B).to(latents.dtype); output stepped as is.
    t = torch.tensor([sigma * 1000.0], dtype=torch.float32, device=x.device).expand(x.shape[0]).to(x.dtype)
    return model(hidden_states=x, timestep=t / 1000, encoder_hidden_states=c["encoder_hidden_states"],
                 txt_ids=c["txt_ids"], img_ids=c["img_ids"], return_dict=False)[0]


def longcat_image_build():
    from diffusers.models.transformers.transformer_longcat_image import LongCatImageTransformer2DModel
    # LongCat-Image layout scaled down (replicas/longcat_image.py): in_channels 64 = the pipeline's fixed 16 latent
    # channels packed 2x2; head_dim 16 = RoPE axes (4, 6, 6).
    return LongCatImageTransformer2DModel(patch_size=1, in_channels=64, num_layers=1, num_single_layers=1,
                                          attention_head_dim=16, num_attention_heads=2, joint_attention_dim=16,
                                          pooled_projection_dim=16, axes_dims_rope=[4, 6, 6])


def longcat_image_inputs(g):
    # LongCatImagePipeline: text ids prepare_pos_ids(0, "text", (0, 0)), image ids prepare_pos_ids(1, "image",
    # (512, 512)) (tokenizer_max_length 512), latents packed 2x2.
    return {"encoder_hidden_states": rnd(g, 1, 4, 16), "txt_ids": _text_ids_diag(4),
            "img_ids": _image_ids(4, 4, modality=1, start=512), "noise": _ovis_pack(rnd(g, 1, 16, 8, 8))}


def longcat_image_call(model, x, sigma, c, dtype):
    # LongCatImagePipeline with guidance_scale 1 (no CFG call, no renorm): timestep / 1000 of
    # t.expand(B).to(latents.dtype), guidance None; output stepped as is.
    t = torch.tensor([sigma * 1000.0], dtype=torch.float32, device=x.device).expand(x.shape[0]).to(x.dtype)
    return model(hidden_states=x, timestep=t / 1000, guidance=None, encoder_hidden_states=c["encoder_hidden_states"],
                 txt_ids=c["txt_ids"], img_ids=c["img_ids"], return_dict=False)[0]


CASES = {
    "sd3": dict(build=sd3_build, inputs=sd3_inputs, call=sd3_call, files=["transformer_sd3.py"],
                timestep="sigma*1000 float32 (StableDiffusion3Pipeline: t.expand(B), FlowMatchEuler timesteps, not cast)",
                velocity="model output as is (flow velocity), not negated",
                note="MMDiT: 2 JointTransformerBlocks, joint attention over [image, text] (image first), AdaLayerNormZero "
                     "per stream; the last block is context_pre_only (text stream: AdaLayerNormContinuous only, no "
                     "to_add_out / ff_context, returns None for text); PatchEmbed sincos table 8x8 (persistent "
                     "buffer, bf16 in the bf16 run) centre-cropped to the 4x4 grid; pooled text + t via "
                     "CombinedTimestepTextProjEmbeddings; final AdaLayerNormContinuous [scale, shift]"),
    "sana": dict(build=sana_build, inputs=sana_inputs, call=sana_call, files=["sana_transformer.py"],
                 timestep="sigma*1000 float32 (SanaPipeline: t.expand(B).to(latents.dtype), its latents float32)",
                 velocity="model output as is (out_channels == latent channels: no learned-sigma split), not negated",
                 note="linear self-attention (SanaLinearAttnProcessor2_0: ReLU kernel on q and k, f32 matmuls, value "
                      "padded with a ones row for the normaliser, /(den+1e-15)); SDPA cross-attention with a "
                      "(1-mask)*-10000 bias; GLUMBConv FFN (1x1 conv -> SiLU -> depthwise 3x3 -> GLU with SiLU gate "
                      "-> 1x1 conv) on the 2-D token grid; no positional embedding (interpolation_scale None); "
                      "caption PixArtAlphaTextProjection + RMSNorm; AdaLayerNormSingle shared t-modulation + "
                      "per-block scale_shift_table; patch 1"),
    "ltx": dict(build=ltx_build, inputs=ltx_inputs, call=ltx_call, files=["transformer_ltx.py"],
                timestep="sigma*1000 float32 (LTXPipeline: t.expand(B))",
                velocity="model output as is, not negated; latents packed (B, F*H*W, C) with patch 1x1x1",
                note="video DiT on packed tokens: proj_in Linear; RMSNorm (no affine) pre-norms; self-attn with "
                     "torch.nn.RMSNorm q/k norm across all heads and interleaved 3-D RoPE (LTXVideoRotaryPosEmbed: "
                     "dim//6 freqs per axis over coords scaled by rope_interpolation_scale/base, 2*x-1, pi/2; "
                     "dim%6 leading channels padded cos=1 sin=0); cross-attn to the caption with a -10000 mask bias; "
                     "dispatch_attention_fn native SDPA on (B,S,H,D); GELU-tanh FFN; AdaLayerNormSingle + per-block "
                     "table; AdaLayerNorm final norm (shift, scale order, chunk_dim 1)"),
    "cogvideox": dict(build=cogvideox_build, inputs=cogvideox_inputs, call=cogvideox_call,
                      files=["cogvideox_transformer_3d.py"],
                      timestep="round(sigma*1000) int64 (CogVideoXPipeline passes scheduler.timesteps)",
                      velocity="model output as is (a v-prediction model run in a flow loop), not negated",
                      note="CogVideoX-2b style: CogVideoXPatchEmbed (per-frame 2x2 conv + text Linear, [text, video] "
                           "sequence) + 3-D sincos table (non-persistent f32 buffer, zero rows for text); "
                           "CogVideoXLayerNormZero gives both streams their own shift/scale/gate from one Linear "
                           "over a shared LayerNorm; joint full attention with per-head LayerNorm q/k norm; one FFN "
                           "over the concatenated streams; norm_final LayerNorm then AdaLayerNorm (shift, scale); "
                           "Timesteps(64) -> TimestepEmbedding(64->48); video (B, F, C, H, W)"),
    "hunyuandit": dict(build=hunyuandit_build, inputs=hunyuandit_inputs, call=hunyuandit_call,
                       files=["hunyuan_transformer_2d.py"],
                       timestep="round(sigma*1000) cast to the latents' dtype (HunyuanDiTPipeline: "
                                "torch.tensor([t]*B).to(latent_model_input.dtype); bf16 t in the bf16 run)",
                       velocity="first half of the output channels (learned sigma: noise_pred.chunk(2, dim=1)[0]), "
                                "not negated; an epsilon model run in a flow loop",
                       note="U-ViT-style long skips (4 blocks: block 0 output concatenated into block 3 through "
                            "FP32LayerNorm(2d) + Linear); AdaLayerNormShift (shift only, no scale/gate, SiLU in f32) "
                            "before self-attn; FP32LayerNorms; self- and cross-attn both with LayerNorm q/k norm and "
                            "interleaved 2-D RoPE on q (k only in self-attn); text = [BERT, T5 projected by "
                            "PixArtAlphaTextProjection(silu_fp32)] with masked rows replaced by a learned padding; "
                            "t-embedding + attention-pooled T5 (F.multi_head_attention_forward) + image-size "
                            "sinusoids + style embedding -> extra_embedder; hidden_dtype = timestep dtype; RoPE "
                            "tables recorded as inputs image_rotary_cos/sin"),
    "lumina2": dict(build=lumina2_build, inputs=lumina2_inputs, call=lumina2_call,
                    files=["transformer_lumina2.py"],
                    timestep="1 - sigma float32 (Lumina2Pipeline: 1 - t / num_train_timesteps; Lumina's t=0 is noise)",
                    velocity="negated model output (Lumina2Pipeline: noise_pred = -noise_pred)",
                    note="Lumina-Image-2.0 single-stream DiT: context_refiner (unmodulated, masked) and noise_refiner "
                         "(modulated) blocks before joint [caption(effective length), image] blocks; GQA 4 q / 2 kv "
                         "heads with per-head RMSNorm q/k norm; complex (complex128 table) 3-axis RoPE over "
                         "(caption index, row, col) ids, axes (4, 6, 6); sandwich RMSNorms (norm2/ffn_norm2 on the "
                         "branch outputs) with tanh gates; LuminaRMSNormZero scale-only modulation; SwiGLU FFN with "
                         "SiLU in f32; patchify by view/permute + Linear; LuminaLayerNormContinuous (scale only) + "
                         "Linear out; text mask with 2 padded tokens (only the effective caption joins the sequence)"),
    "dit": dict(build=dit_build, inputs=dit_inputs, call=dit_call, files=["dit_transformer_2d.py"],
                timestep="round(sigma*1000) int64 (DiTPipeline: the scheduler's timesteps expanded to the batch)",
                velocity="first half of the output channels (learned sigma: split(noise_pred, latent_channels)), not "
                         "negated; an epsilon model run in a flow loop",
                note="class-conditional DiT (no text): BasicTransformerBlock(norm_type ada_norm_zero) x2, each "
                     "re-embedding t + class label itself (AdaLayerNormZero's own CombinedTimestepLabelEmbeddings: "
                     "Timesteps(256) -> TimestepEmbedding, LabelEmbedding table with a CFG row) -> SiLU -> Linear(6d) "
                     "chunked shift/scale/gate msa, shift/scale/gate mlp; self-attention only (AttnProcessor2_0, "
                     "biased q/k/v, no q/k norm, no RoPE); GELU-tanh FFN; PatchEmbed 2x2 conv + sincos table; output "
                     "conditioning from block 0's embedder called again, Linear(2d) [shift, scale] after a "
                     "non-affine LayerNorm, Linear, einsum unpatchify; out_channels 8 = 4 + learned sigma"),
    "stableaudio": dict(build=stableaudio_build, inputs=stableaudio_inputs, call=stableaudio_call,
                        files=["stable_audio_transformer.py"],
                        timestep="atan(sigma)/pi*2 float32 (StableAudioPipeline: CosineDPMSolver's EDM "
                                 "precondition_noise); the model casts it to its dtype",
                        velocity="model output as is (a v-prediction EDM model run in the shared flow loop, no "
                                 "c_in/c_skip preconditioning), not negated",
                        note="1-D audio DiT on (B, C, T) latents: 1x1 Conv1d residual pre/post, proj_in Linear; "
                             "Gaussian-Fourier timestep features (fixed random frequencies, cos first) -> MLP added "
                             "to a projected global token prepended to the sequence and dropped at the end; pre-LN "
                             "blocks with plain residuals (no modulation): self-attn with partial half-layout RoPE "
                             "(first head_dim/2 channels, f32), GQA cross-attn (4 q / 2 kv heads, k/v "
                             "repeat_interleave) to an MLP-projected caption; SwiGLU FFN; no final norm; RoPE "
                             "tables recorded as inputs image_rotary_cos/sin"),
    "mochi": dict(build=mochi_build, inputs=mochi_inputs, call=mochi_call, files=["transformer_mochi.py"],
                  timestep="(1 - sigma)*1000 float32 (MochiPipeline: inverted sigmas, t.expand(B).to(latents.dtype), "
                           "latents float32)",
                  velocity="negated model output (the inverted-sigma Euler step with the raw output)",
                  note="asymmetric dual-stream video DiT (text stream 32 wide, video 64): MochiRMSNormZero "
                       "[scale_msa, gate_msa, scale_mlp, gate_mlp] per stream (RMSNorm in f32, 1+scale), tanh gates "
                       "applied through a weightless RMSNorm of the branch output (sandwich norm), joint attention "
                       "per sample over [video, valid caption tokens] (padded prompt tokens removed, output padded "
                       "back), per-head weighted RMSNorm q/k norms on both streams, interleaved 3-D RoPE from a "
                       "learned (3, heads, head_dim/2) frequency parameter over centred (t, h, w) positions (per-head "
                       "angles); last block context_pre_only (MochiLayerNormContinuous scale-only on text, no text "
                       "output); t-embedding + masked attention-pooled caption (MochiAttentionPool); per-frame 2x2 "
                       "patch conv; SwiGLU FFNs (bias-free); AdaLayerNormContinuous final norm; 2 latent frames"),
    "hidream": dict(build=hidream_build, inputs=hidream_inputs, call=hidream_call,
                    files=["transformer_hidream_image.py"],
                    timestep="sigma*1000 float32 (HiDreamImagePipeline: t.expand(B), FlowMatchEuler timesteps)",
                    velocity="negated model output (HiDreamImagePipeline: noise_pred = -noise_pred)",
                    note="HiDream-I1 dual- then single-stream DiT with a DeepSeek-style mixture-of-experts SwiGLU "
                         "FFN on the image tokens (softmax gate over 4 routed experts, top-2 unnormalised weights, "
                         "eval path moe_infer: argsort/bincount token grouping, per-expert SwiGLU, scatter_reduce "
                         "sum, plus an always-on shared expert); the text stream has a dense SwiGLU; every block "
                         "takes its own Llama-3 hidden layer (per-block caption projection) appended to the "
                         "[T5, last-Llama] text, re-sliced after each block; full-width RMSNorm q/k norms (torch "
                         "nn.RMSNorm) per stream; Flux-style 2x2 rotation-matrix 3-axis RoPE (ids (0, row, col), text "
                         "ids 0) built in f64; adaLN 6/12-way shift/scale/gate from t-embedding + pooled text; Linear "
                         "patchify on (B, HW, p*p*C) tokens; final adaLN LayerNorm + Linear"),
    "chroma": dict(build=chroma_build, inputs=chroma_inputs, call=chroma_call,
                   files=["transformer_chroma.py", "transformer_flux.py"],
                   timestep="sigma float32 in the latents' dtype (ChromaPipeline: t.expand(B).to(latents.dtype) / "
                            "1000; the model multiplies by 1000)",
                   velocity="model output as is, not negated; latents packed 2x2 (B, HW/4, 4C) as FluxPipeline "
                            "packs them (noise recorded packed)",
                   note="Flux-style MMDiT without a per-block modulation Linear: a ChromaApproximator MLP (in_proj, "
                        "residual RMSNorm -> Linear-SiLU-Linear layers, out_proj) maps [sinusoidal t, sinusoidal "
                        "guidance 0, fixed sinusoidal table of modulation indices (non-persistent buffer)] to one "
                        "vector per modulation slot; blocks slice their shift/scale/gate rows from it (pruned "
                        "adaLN-zero, 6 img + 6 txt rows per double block, 3 per single block, 2 for the final "
                        "norm); joint [text, image] FluxAttention with per-head RMSNorm q/k norms and interleaved "
                        "3-axis RoPE (f64 tables, text ids 0); the prompt mask's outer product is passed as a float "
                        "0/1 additive attention bias (+1 where both tokens valid, not -inf); single-stream blocks "
                        "run attention and a GELU-tanh MLP in parallel (concat -> proj_out)"),
    "cogview3plus": dict(build=cogview3plus_build, inputs=cogview3plus_inputs, call=cogview3plus_call,
                         files=["transformer_cogview3plus.py"],
                         timestep="round(sigma*1000) int64 (CogView3PlusPipeline: t.expand(B), CogVideoXDDIM timesteps)",
                         velocity="model output as is (a v-prediction model run in a flow loop), not negated",
                         note="CogView3-Plus joint [text, image] DiT: CogView3PlusPatchEmbed (Linear patchify + text "
                              "Linear, sincos table on image rows only, non-persistent buffer); one Linear gives "
                              "12 shift/scale/gate vectors for both streams (CogView3PlusAdaLayerNormZeroTextImage, "
                              "separate non-affine LayerNorms per stream); joint attention (CogVideoXAttnProcessor2_0) "
                              "with non-affine per-head LayerNorm q/k norm, no RoPE; one shared GELU-tanh FFN over the "
                              "concatenated streams, gated per stream; conditioning = Timesteps(inner_dim) MLP + "
                              "sinusoids of original size / crop / target size through a SiLU MLP; "
                              "AdaLayerNormContinuous final norm; einsum unpatchify"),
    "latte": dict(build=latte_build, inputs=latte_inputs, call=latte_call, files=["latte_transformer_3d.py"],
                  timestep="round(sigma*1000) int64 (LattePipeline: the scheduler's timesteps expanded to the batch)",
                  velocity="first half of the output channels (learned sigma: noise_pred.chunk(2, dim=1)[0]), not "
                           "negated; an epsilon model run in a flow loop",
                  note="Latte video DiT factorised in space and time: each layer is a spatial BasicTransformerBlock "
                       "(ada_norm_single: per-block scale_shift_table + shared AdaLayerNormSingle t-embedding; "
                       "self-attn over one frame's 16 patches, cross-attn to the projected caption repeated per "
                       "frame) then a temporal BasicTransformerBlock over each patch's 2 frames (no cross-attn; a "
                       "fixed 1-D sincos frame embedding added before the first one), with (B F) T D <-> (B T) F D "
                       "reshapes between; PatchEmbed 2x2 conv + 2-D sincos per frame; GELU-tanh FFNs; biased "
                       "q/k/v, no q/k norm, no RoPE; PixArt-style final scale_shift_table modulation; "
                       "out_channels 8 = 4 + learned sigma; 2 latent frames"),
    "easyanimate": dict(build=easyanimate_build, inputs=easyanimate_inputs, call=easyanimate_call,
                        files=["transformer_easyanimate.py"],
                        timestep="sigma*1000 in the latents' dtype (EasyAnimatePipeline: torch.tensor([t] * B)"
                                 ".to(latent dtype), FlowMatchEuler timesteps)",
                        velocity="model output as is, not negated",
                        note="EasyAnimate video DiT: per-frame 2x2 patch Conv2d over (B F) frames; EasyAnimateLayerNormZero "
                             "(one FP32LayerNorm shared by both streams, 6-way shift/scale/gate for video and text) "
                             "before attention and before the FFN; block 0 is MMDiT (added text q/k/v projections, "
                             "to_add_out, its own text FFN), block 1 a plain block that concatenates [text, video] "
                             "into one q/k/v projection and runs the video FFN on the text too; per-head LayerNorm "
                             "q/k norms (norm_added_q/k on text); interleaved 3-D RoPE (get_3d_rotary_pos_embed, "
                             "dims 4/6/6 over t/h/w, crop region from a 90x60 base grid) on video tokens only; "
                             "final LayerNorm then AdaLayerNorm (shift, scale); 2 latent frames"),
    "omnigen": dict(build=omnigen_build, inputs=omnigen_inputs, call=omnigen_call, files=["transformer_omnigen.py"],
                    timestep="1 - sigma float32 (OmniGenPipeline: inverted FlowMatchEuler sigmas, "
                             "num_train_timesteps 1)",
                    velocity="negated model output (the inverted-sigma Euler step with the raw output)",
                    note="OmniGen: a Phi-3-style decoder-only LLM used as the DiT: token embedding of the prompt ids "
                         "+ a time token (TimestepEmbedding of the sinusoid) + 2x2-conv image patches with a cropped "
                         "2-D sincos table, one sequence; pre-RMSNorm blocks with plain residuals (no adaLN "
                         "modulation inside), bias-free q/k/v/o, su-scaled (LongRoPE short factors, sqrt(1+ln s/ln "
                         "L) magnitude scale) half-layout RoPE over position_ids, fused gate_up SwiGLU MLP; a 0/1 "
                         "mask (causal over text and time token, image rows see everything) turned into a "
                         "(1-mask)*finfo.min additive bias; final RMSNorm, keep the image tokens, AdaLayerNorm "
                         "(shift, scale) from a second t-embedding, Linear, unpatchify"),
    "cosmos": dict(build=cosmos_build, inputs=cosmos_inputs, call=cosmos_call, files=["transformer_cosmos.py"],
                   timestep="sigma in the model dtype (Cosmos pipelines: current_t = sigma/(sigma+1) of the EDM sigma, "
                            "= the flow sigma, t.expand(B).to(transformer_dtype)); fps=30",
                   velocity="model output as is (x0 = (1-t) x_edm - t out with input x_edm (1-t): out is the flow "
                            "velocity), not negated",
                   note="NVIDIA Cosmos video DiT: a zero padding-mask channel (NEAREST-resized from pixel size) "
                        "concatenated to the latents, Linear patchify (1x2x2) bias-free; Timesteps sinusoid -> "
                        "bias-free SiLU MLP giving a 3d temb AND an RMSNorm'd sinusoid (embedded_timestep); every "
                        "norm is adaLN-LoRA (CosmosAdaLayerNormZero: SiLU -> Linear(d->lora) -> Linear(lora->3d) + "
                        "temb, shift/scale/gate, non-affine LayerNorm) before self-attn, cross-attn and FFN; a "
                        "learnable t/h/w positional embedding summed and divided by its scaled L2 norm (f32) added "
                        "before every block; per-head RMSNorm q/k norms; half-layout (unbind -2) 3-D RoPE with NTK "
                        "theta scaling per axis and fps-scaled time positions, self-attn only; bias-free q/k/v/out "
                        "and GELU FFN; final adaLN-LoRA (shift, scale); permuted unpatchify (p_h, p_w, p_t order); 2 "
                        "latent frames"),
    "wanvace": dict(build=wanvace_build, inputs=wanvace_inputs, call=wanvace_call,
                    files=["transformer_wan_vace.py", "transformer_wan.py"],
                    timestep="int(sigma*1000) int64 (WanVACEPipeline: t.expand(B), UniPCMultistep flow timesteps)",
                    velocity="model output as is (flow prediction), not negated",
                    note="Wan2.1-VACE video DiT: 3-D conv patchify of the latents and, separately, of a control "
                         "video (inactive/reactive latents + mask channels, zero-padded to the token count); VACE "
                         "blocks (Wan blocks with proj_in adding the main tokens on the first, proj_out per block) "
                         "run first over the control tokens, each emitting a hint that is added (times its "
                         "control_hidden_states_scale entry) after the matching main block in vace_layers; Wan "
                         "blocks: FP32 non-affine LayerNorms modulated by per-block scale_shift_table + a shared "
                         "6-way t-projection (f32 adds), RMSNorm q/k norm across all heads before the head split, "
                         "interleaved 3-D RoPE (f64 table, t/h/w dims 8/4/4) applied by strided slice assignment "
                         "into an empty tensor, cross-attn to a GELU-tanh projected caption after an affine FP32 "
                         "LayerNorm (ungated), GELU-tanh FFN; final scale_shift_table (shift, scale) norm; 2 latent "
                         "frames"),
    "luminanext": dict(build=luminanext_build, inputs=luminanext_inputs, call=luminanext_call,
                       files=["lumina_nextdit2d.py"],
                       timestep="1 - sigma float32 (LuminaPipeline: 1 - t / num_train_timesteps; Lumina's t=0 is "
                                "noise)",
                       velocity="negated first half of the output channels (learned sigma: chunk(2, dim=1)[0], "
                                "then noise_pred = -noise_pred)",
                       note="Lumina-Next DiT: each block runs self-attn and cross-attn from the same "
                            "LuminaRMSNormZero-modulated tokens and sums them per head before one shared output "
                            "Linear (attn2.to_out; attn1 has none), the cross-attn branch scaled by a learned "
                            "per-head tanh(gate); GQA 4 q / 2 kv heads (k/v repeat), LayerNorm q/k norm across "
                            "all heads; complex-multiply 2-D RoPE (complex64 table passed in as image_rotary_emb, "
                            "linear_factor 0.5) on q and k in self-attn but on q only in cross-attn; proportional "
                            "attention scale sqrt(log_base(seq)) * 1/sqrt(d) in self-attn only; bool masks (int32 "
                            "all-ones image mask, caption mask with 2 padded tokens); sandwich RMSNorms (norm2 / "
                            "ffn_norm2 on branch outputs) with tanh gates; SwiGLU FFN; t + masked-mean caption "
                            "(LayerNorm + Linear) conditioning; LuminaLayerNormContinuous scale-only final norm with "
                            "built-in Linear; out_channels 8 = 4 + learned sigma"),
    "consisid": dict(build=consisid_build, inputs=consisid_inputs, call=consisid_call,
                     files=["consisid_transformer_3d.py"],
                     timestep="round(sigma*1000) int64 (ConsisIDPipeline: t.expand(B), CogVideoXDPM timesteps)",
                     velocity="model output as is (a v-prediction model run in a flow loop), not negated; input = "
                              "[latents, image latents] on channels",
                     note="ConsisID identity-preserving I2V DiT (CogVideoX-5B body: CogVideoXPatchEmbed without a "
                          "sincos table, CogVideoXLayerNormZero per-stream shift/scale/gate, joint [text, video] "
                          "attention with per-head LayerNorm q/k norm and interleaved 3-D RoPE on video tokens only, "
                          "one GELU-tanh FFN over both streams); plus a LocalFacialExtractor (Perceiver resampler: "
                          "learned queries + MLP-expanded id tokens, per-scale MLP (LeakyReLU) on 5 ViT hidden "
                          "layers, PerceiverAttention with k/v over [context, latents] and q/k pre-scaled by "
                          "d^-1/4, softmax in f32, bias-free FFN, matmul by a proj_out parameter) whose face tokens "
                          "are added after every 2nd block through PerceiverCrossAttention (LayerNorms, bias-free "
                          "q / kv / out); final LayerNorm over [text, video] then AdaLayerNorm (shift, scale); 2 "
                          "latent frames; RoPE tables recorded as inputs image_rotary_cos/sin"),
    "bria": dict(build=bria_build, inputs=bria_inputs, call=bria_call, files=["transformer_bria.py"],
                 timestep="sigma*1000 float32 (BriaPipeline: t.expand(B) of FlowMatchEuler timesteps, cast to the "
                          "model dtype inside)",
                 velocity="model output as is (flow velocity), not negated; latents packed 2x2 (B, HW/4, 4C)",
                 note="Bria 3.x Flux-style MMDiT without pooled text or guidance: t-only conditioning (Timesteps "
                      "with a configurable max_period time_theta -> TimestepEmbedding); Linear x/context embedders; "
                      "dual-stream blocks (AdaLayerNormZero per stream, joint [text, image] attention with "
                      "per-head RMSNorm q/k norms on both streams, to_add_out, GELU-tanh FFNs) then single-stream "
                      "blocks (attention and GELU-tanh MLP in parallel, concat -> proj_out, gated); interleaved "
                      "3-axis RoPE from the file's own get_1d_rotary_pos_embed (f64 freqs) over [text ids 0, "
                      "(0, row, col)]; zero-padded prompt embeddings, no attention mask; AdaLayerNormContinuous "
                      "final norm"),
    "framepack": dict(build=framepack_build, inputs=framepack_inputs, call=framepack_call,
                      files=["transformer_hunyuan_video_framepack.py", "transformer_hunyuan_video.py"],
                      timestep="sigma*1000 float32 (HunyuanVideoFramepackPipeline: t.expand(B), not cast); "
                               "guidance 10*1000 in the model dtype",
                      velocity="model output as is (flow velocity), not negated; 2 latent frames denoised",
                      note="FramePack next-frame-section video DiT (HunyuanVideo body): the noisy window's 1x2x2 "
                           "conv tokens are prefixed with history context at three compressions (clean [image, "
                           "last frame] 1x2x2 conv, 2 frames through a 2x4x4 conv, 16 frames through a 4x8x8 conv "
                           "with replicate padding), their RoPE tables built from explicit frame indices and "
                           "avg-pooled (2,2,2)/(4,4,4) to match; interleaved 3-axis RoPE theta 256 on image tokens "
                           "only; text = [SigLIP image tokens through an up-SiLU-down MLP, Llama tokens refined by "
                           "a masked token refiner (LayerNorm blocks gated by HunyuanVideoAdaNorm from t + masked "
                           "mean of the prompt, bool 2-D mask with column 0 forced on, SiLU-Linear FFN)]; batch 1 "
                           "drops padded prompt tokens instead of masking; dual-stream blocks (AdaLayerNormZero, "
                           "joint [image, text] attention, per-head RMSNorm q/k, added q/k/v) then single-stream "
                           "(parallel attention + GELU-tanh MLP); t + guidance + pooled CLIP conditioning; only the "
                           "last window tokens kept for AdaLayerNormContinuous + Linear"),
    "zimage": dict(build=zimage_build, inputs=zimage_inputs, call=zimage_call, files=["transformer_z_image.py"],
                   timestep="1 - sigma float32 (ZImagePipeline: (1000 - t) / 1000; the model scales by t_scale 1000)",
                   velocity="negated model output (ZImagePipeline: noise_pred = -noise_pred); list-of-(C, 1, H, W) "
                            "model I/O",
                   note="Z-Image single-stream DiT (S3-DiT): list inputs patchified per image (Linear), image tokens "
                        "and caption tokens each padded to a multiple of 32 (repeat-last then overwritten by "
                        "learned x_pad_token / cap_pad_token via boolean index assignment) with integer 3-axis "
                        "position ids (caption (1+i, 0, 0), image (cap_len+1, row, col), pads (0, 0, 0)); "
                        "complex64 RoPE gathered from precomputed per-axis polar tables, applied by complex "
                        "multiply; a modulated noise refiner and an unmodulated context refiner, then joint [image, "
                        "caption] blocks; blocks: sandwich RMSNorms, tanh-gated scale-only adaLN (1+scale, 4 vectors "
                        "from min(dim, 256)-wide t embedding), per-head RMSNorm q/k, bool key mask, bias-free "
                        "SwiGLU FFN (hidden 8/3 d); cos-first sinusoid -> MLP(1024 hidden) t-embedding; final "
                        "non-affine LayerNorm * (1 + scale) + Linear; unpatchify of the first H*W tokens"),
    "qwenimage": dict(build=qwenimage_build, inputs=qwenimage_inputs, call=qwenimage_call,
                      files=["transformer_qwenimage.py"],
                      timestep="sigma float32 in the latents' dtype (QwenImagePipeline: t.expand(B).to(latents.dtype) "
                               "/ 1000; the model's Timesteps(scale=1000) multiplies back)",
                      velocity="model output as is (flow velocity), not negated; latents packed 2x2 (B, HW/4, 4C)",
                      note="Qwen-Image MMDiT (all dual-stream): RMSNorm'd text -> Linear, Linear image patches; "
                           "t-only conditioning (its own get_timestep_embedding, Timesteps scale 1000); each block "
                           "has per-stream SiLU-Linear 6-way modulation (shift, scale, gate for attention and MLP) "
                           "over non-affine LayerNorms; joint [text, image] attention with per-head RMSNorm q/k "
                           "(added_q/k on text) and complex-multiply 3-axis RoPE from fixed complex64 tables (not "
                           "buffers): centred image positions (negative-index table for the upper half rows/cols, "
                           "scale_rope) and text positions continuing after max(h/2, w/2) on all three axes; no "
                           "attention mask (the mask only gives txt_seq_lens); GELU-tanh FFNs; "
                           "AdaLayerNormContinuous final norm on the image stream"),
    "prx": dict(build=prx_build, inputs=prx_inputs, call=prx_call, files=["transformer_prx.py"],
                timestep="sigma float32 (PRXPipeline: t.float() / num_train_timesteps; the model scales by 1000)",
                velocity="model output as is (flow velocity), not negated",
                note="PRX (Photoroom) text-to-image DiT with an image-only residual stream: every block's queries "
                     "are image tokens only, keys/values are [text (txt_kv_proj of the once-projected caption, "
                     "RMSNorm on k only), image (fused img_qkv_proj, per-head RMSNorm q/k)], so the text is never "
                     "updated; bool key mask = [prompt mask, ones] expanded over heads/queries; 2-axis RoPE as "
                     "2x2 rotation matrices (cos, -sin, sin, cos; f64 freqs) applied by broadcast multiply-add on "
                     "image q/k; unfold/fold patchify and unpatchify; 6-way adaLN (shift, scale, gate) from "
                     "SiLU(t-embedding) per block over non-affine LayerNorms; bias-free GELU-tanh-gated MLP "
                     "(gate*up -> down); cos-first sinusoid -> MLPEmbedder; final adaLN (shift, scale) + Linear"),
    "kandinsky5": dict(build=kandinsky5_build, inputs=kandinsky5_inputs, call=kandinsky5_call,
                       files=["transformer_kandinsky.py"],
                       timestep="sigma*1000 in the model dtype (Kandinsky5T2VPipeline: t.unsqueeze(0).repeat(B))",
                       velocity="model output as is (flow velocity), not negated; channels-last latents, model "
                                "input = [latents, zero visual condition, zero mask] on the last axis",
                       note="Kandinsky 5.0 video DiT (encoder-decoder): the caption runs through its own "
                            "modulated text encoder blocks (self-attn with 1-D RoPE), then visual decoder blocks "
                            "do self-attn (3-D RoPE with per-axis scale_factor (1, 2, 2) dividing the angles), "
                            "cross-attn to the encoded text and a bias-free GELU FFN, each a 9-way (shift, scale, "
                            "gate) modulation in f32 from t + pooled CLIP; RoPE as 2x2 rotation matrices applied by "
                            "multiply-sum and rounded to bfloat16 even in f32 runs; per-head RMSNorm (eps None) "
                            "q/k norms in f32; LayerNorm'd text/pooled projections; channels-last (B, F, H, W, C) "
                            "Linear patchify (1x2x2); cos-first time sinusoid over model_dim; 2 latent frames"),
    # The replicas of bench/unseen/replicas/ at the same sizes, for a tree that holds their files (notes: the
    # replicas' producer notes).
    "flux2": dict(build=flux2_build, inputs=flux2_inputs, call=flux2_call, files=["transformer_flux2.py"],
                  timestep="sigma (Flux2Pipeline: timestep / 1000 of sigma*1000; the model scales by 1000); "
                           "guidance 4.0 float32, scaled by 1000 likewise",
                  velocity="model output as is (flow velocity), not negated; latents packed (B, H*W, C)",
                  note="FLUX.2 MMDiT: model-level modulation shared by every block, fused [q|k|v|mlp] single-stream "
                       "projection, SwiGLU MLPs, no biases, RoPE from 4-axis ids (t, h, w, l), theta 2000"),
    "hunyuanimage21": dict(build=hunyuanimage21_build, inputs=hunyuanimage21_inputs, call=hunyuanimage21_call,
                           files=["transformer_hunyuanimage.py"],
                           timestep="sigma*1000 (HunyuanImagePipeline: t.expand(B).to(latents.dtype))",
                           velocity="model output as is (flow velocity), not negated",
                           note="HunyuanImage-2.1 base layout without the ByT5 glyph caption: [image, text] joint "
                                "attention under the caption's key mask, RoPE on the image rows only, a masked "
                                "caption token refiner, 1x1 conv patch embed"),
    "ovis_image": dict(build=ovis_image_build, inputs=ovis_image_inputs, call=ovis_image_call,
                       files=["transformer_ovis_image.py"],
                       timestep="sigma (OvisImagePipeline: timestep / 1000 of sigma*1000; the model scales by 1000)",
                       velocity="model output as is (flow velocity), not negated; latents packed 2x2",
                       note="Ovis-Image MMDiT: single-stream MLP gated (silu(gate)*value of one projection's "
                            "halves) beside the attention, SwiGLU FFNs, RMSNorm on the caption, ids (0, l, l)"),
    "longcat_image": dict(build=longcat_image_build, inputs=longcat_image_inputs, call=longcat_image_call,
                          files=["transformer_longcat_image.py"],
                          timestep="sigma (LongCatImagePipeline: timestep / 1000 of sigma*1000; the model scales by "
                                   "1000)",
                          velocity="model output as is (flow velocity), not negated; latents packed 2x2",
                          note="LongCat-Image MMDiT: ids (0, l, l) for the text, (1, h + 512, w + 512) for the image; "
                               "gelu-tanh FFNs; no pooled text or guidance"),
}

FILE_COMMITS = {
    "transformer_sd3.py": "38b0c9e679b0894d0483df9da80bc103aa1bff52",
    "sana_transformer.py": "065628f582a780fb3ff7985c34edcf427a045733",
    "transformer_ltx.py": "061bc7f9dcaf23ad84a8f36f93bc586c2f3f8191",
    "cogvideox_transformer_3d.py": "00789ad1e43335e528f935fb7b0f96466cb58e7a",
    "hunyuan_transformer_2d.py": "03e717a407a62ceedd5c81cdc903b12dd3c5a48f",
    "transformer_lumina2.py": "98bd0ce2d97f91fb6088ba65b6bda07cff57a3fb",
    "dit_transformer_2d.py": "11bf2cf1d149c47a210912f0b446e701b81e923d",
    "stable_audio_transformer.py": "06d4fb510fee2d769d19abf3b7eeb21d6dcf2590",
    "transformer_mochi.py": "03002a9141f2b42197a7210d60e8801d0d4f628e",
    "normalization.py": "04e9323055098220d57b84cfe68b6850b3b3fc0c",
    "activations.py": "04e9323055098220d57b84cfe68b6850b3b3fc0c",
    "modeling_common.py": "12b4edc2fe7bfd717b1b8bc310a61d9eeab62248",
    "transformer_hidream_image.py": "07c670ee44802e578651ab58f0c1352950eadeb7",
    "transformer_chroma.py": "0191cfde6f052d3d478535269cbb9d6cf0a29f50",
    "transformer_cogview3plus.py": "059812ac0b19284dda7049fa3d21865cacda9e2c",
    "latte_transformer_3d.py": "821f969f77cc06f62a22585a386a9d11b7f13858",
    "transformer_easyanimate.py": "58edc804bd032964e0a688053cd84854cd5868dd",
    "transformer_omnigen.py": "8dc31e8e3c173bfd399217fde461a32f8d440b86",
    "transformer_flux.py": "copy58896406911",  # no upstream commit: FluxAttention parts read from index id 58896406911
    "transformer_cosmos.py": "fed2c46482c82b960396389fad0dee8f0f9f8503",
    "transformer_wan_vace.py": "4eaf84e2d3f64771245a9cf44a4f44b87507ef55",
    "transformer_wan.py": "b6bd8f1fb709d8ff1310d1a9b649f4225cf2ca47",
    "lumina_nextdit2d.py": "4004496d6bc4131d08ac7d01a44060632bfef40d",
    "consisid_transformer_3d.py": "fed2c46482c82b960396389fad0dee8f0f9f8503",
    "transformer_bria.py": "7d5682739a1ee5b25bb9f5a81c573ea7e38d8e22",
    "transformer_hunyuan_video_framepack.py": "577a6aed50bbafbed6981e6ce0dbfa2fe5f12173",
    "transformer_hunyuan_video.py": "ed6847a1ab3c64570d9fe4df8a1f1d2f06161358",
    "transformer_z_image.py": "54ba851300fb73e5a13e4990a48ff4f878499982",
    "transformer_qwenimage.py": "ad24f55ea53dd809e47132e2ab4c94b15cd9e5ce",
    "transformer_prx.py": "d33f10298fb5afd085d2f8c409fa88cbf0615db3",
    "transformer_kandinsky.py": "a1d659c5d57a016317f5747348a3c30980a637f0",
    "transformer_flux2.py": "0047da10a201600b65fbe3e1ceef6d19ac735f3c",
    "transformer_hunyuanimage.py": "071190daca865a4d04deac0e02cda5b8c5d6f6fa",
    "transformer_ovis_image.py": "311743206a0b8c5e1abb1d29812224675864670b",
    "transformer_longcat_image.py": "071190daca865a4d04deac0e02cda5b8c5d6f6fa",
}


def build(case):
    spec = CASES[case]
    torch.manual_seed(0)
    model = spec["build"]()
    randomize(model, torch.Generator().manual_seed(1))
    return model.eval()


def to_run(t, dtype, device):
    return (t.to(dtype) if t.is_floating_point() else t).to(device)


def capture(case, outdir):
    spec = CASES[case]
    done = []
    runs = [("f32", torch.float32, "cpu"), ("bf16", torch.bfloat16, "cuda" if torch.cuda.is_available() else "cpu")]
    if SMALL:
        runs = runs[:1]
    for tag, dtype, device in runs:
        model = place(build(case), dtype, device)
        inputs = spec["inputs"](torch.Generator().manual_seed(2))
        # RoPE tables and the like stay float32, as the pipeline builds them; everything else in the run's dtype.
        cond = {k: (v.to(device) if k.startswith("image_rotary") else to_run(v, dtype, device))
                for k, v in inputs.items() if k != "noise"}
        x = to_run(inputs["noise"], dtype, device)
        path = os.path.join(outdir, f"{case}-{tag}.npz")
        import diffusers
        prod = {"case": case, "library": "diffusers", "library_version": diffusers.__version__,
                "library_source": "reconstructed from huggingface/diffusers files: "
                                  + ", ".join(f"{f}@{FILE_COMMITS[f][:12]}" for f in spec["files"] + [
                                      "normalization.py", "activations.py", "modeling_common.py"]),
                "placement": "hf", "timestep": spec["timestep"], "velocity": spec["velocity"],
                "note": spec["note"] + ("; --small sizes (fewer/narrower blocks and text than the note says)"
                                         if SMALL else "")}
        with zflow_capture.Capture(model, name="transformer", path=path, producer=prod) as cap:
            for k, v in cond.items():
                cap.input(k, v)
            cap.input("noise", x)
            cap.input("sigmas", torch.tensor(SIGMAS, dtype=torch.float32, device=device))
            with torch.no_grad():
                for i in range(len(SIGMAS) - 1):
                    with cap.step(i):
                        v = spec["call"](model, x, SIGMAS[i], cond, dtype)
                    x = x + (SIGMAS[i + 1] - SIGMAS[i]) * v.to(x.dtype)
            cap.output("latents", x)
        done.append(f"{tag} {cap.summary['calls']} calls")
    return ", ".join(done)


def main():
    global SMALL
    args = sys.argv[1:]
    if args and args[0] == "--small":
        SMALL = True
        args = args[1:]
    outdir = args[0]
    os.makedirs(outdir, exist_ok=True)
    import diffusers
    print("torch", torch.__version__, "diffusers", diffusers.__version__, "from", os.path.dirname(diffusers.__file__),
          flush=True)
    for case in args[1:] or list(CASES):
        try:
            print(f"{case:12s} ok   {capture(case, outdir)}", flush=True)
        except Exception as e:
            msg = "".join(traceback.format_exception_only(type(e), e)).strip().splitlines()[-1]
            print(f"{case:12s} FAIL {msg[:300]}", flush=True)
            if os.environ.get("CAPTURE_DIT_TRACE"):
                traceback.print_exc()


if __name__ == "__main__":
    main()
