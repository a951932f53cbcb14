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
