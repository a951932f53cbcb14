"""SANA-Sprint (SanaTransformer2DModel with guidance_embeds and qk_norm, as SanaSprintPipeline runs it: TrigFlow /
sCM), reimplemented for torch 1.13 (no diffusers here), captured small in f32 on CPU.

Follows huggingface/diffusers src/diffusers/models/transformers/sana_transformer.py at
530fe0722df0bfda84a6abb7f55d3f4c862d6215 (SanaTransformer2DModel with guidance_embeds True, so time_embed is
SanaCombinedTimestepGuidanceEmbeddings; qk_norm "rms_norm_across_heads" in both attentions of every
SanaTransformerBlock; guidance_embeds_scale and timestep_scale are config fields the model itself never reads) with
the parts it imports: attention_processor.py (Attention with qk_norm "rms_norm_across_heads": norm_q / norm_k =
RMSNorm(dim_head·heads, eps 1e-5) with a weight, applied to the whole projection before the head split; kv_heads =
heads), SanaLinearAttnProcessor2_0 and sana_transformer.SanaAttnProcessor2_0 (both apply norm_q / norm_k),
embeddings.py (Timesteps(256, flip_sin_to_cos, shift 0), TimestepEmbedding), normalization.py (RMSNorm). The
classes that are the same code as SANA's come from sana.py (PatchEmbed, GLUMBConv, SanaModulatedNorm, the two
processors, SanaTransformerBlock.forward), the qk-normed Attention from sana_video.py (the same Attention class
with qk_norm "rms_norm_across_heads"), RMSNorm from hunyuanimage21.py, Timesteps / TimestepEmbedding from parts.py:
the same module tree, parameter names and shapes, and call boundaries; the arithmetic line for line. Stand-in for
what torch 1.13 lacks: F.scaled_dot_product_attention (its math path, default scale, the additive mask) in the
cross-attention.

The constructs it shows beyond sana.py's SANA: the timestep and the embedded guidance each through a cos-first
256-channel sinusoid and its own Linear-SiLU-Linear, summed (conditioning), then SiLU + one 6·d Linear for the
blocks' modulation while the final norm reads the sum itself; the guidance a constant input (4.5·0.1) beside a
timestep in [0, 1] (no ×1000); RMSNorm q/k across all heads (a learned weight over the whole projection) in the
ReLU linear self-attention and in the masked cross-attention; and, around the model, the TrigFlow ↔ flow
conversions of the pipeline below.

Pipeline as SanaSprintPipeline (pipelines/sana/pipeline_sana_sprint.py at 1eeddd0bff13a725b5f575d8d2b1bc26cfcafb14)
calls it with SCMScheduler (schedulers/scheduling_scm.py at 98ea5c9e86675996557680e6f3d78e08a7441f70, sigma_data
0.5, prediction_type "trigflow"), num_inference_steps 3, max_timesteps 1.57080, intermediate_timesteps None (the
default 1.3 is for 2 steps only), guidance_scale 4.5 (its default), prompt_embeds given with the tokenizer's 0/1
mask (the last caption row padding):
  scheduler.timesteps = linspace(1.57080, 0, 4) (TrigFlow angles); latents = randn · sigma_data before the loop;
  guidance = full([1], 4.5).expand(B).to(prompt_embeds.dtype) · guidance_embeds_scale (0.1);
  each step i, t = timesteps[i]: timestep = t.expand(B); latents_model_input = latents / sigma_data;
  scm_timestep = sin(timestep) / (cos(timestep) + sin(timestep)) (the flow time), s = scm_timestep.view(-1, 1, 1, 1);
  latent_model_input = latents_model_input · sqrt(s² + (1 − s)²);
  noise_pred = transformer(latent_model_input, prompt_embeds, prompt_attention_mask, guidance, timestep=scm_timestep);
  noise_pred = ((1 − 2s)·latent_model_input + (1 − 2s + 2s²)·noise_pred) / sqrt(s² + (1 − s)²) (flow → TrigFlow);
  noise_pred = noise_pred.float() · sigma_data;
  scheduler.step: pred_x0 = cos(timesteps[i])·latents − sin(timesteps[i])·noise_pred, noise = randn · sigma_data
  (drawn from the pipeline's generator at every step),
  latents = cos(timesteps[i+1])·pred_x0 + sin(timesteps[i+1])·noise.
(The pipeline's custom `timesteps=` path is not taken: retrieve_timesteps calls scheduler.set_timesteps(timesteps=...)
without the num_inference_steps SCMScheduler requires.)
How it maps into run.py's loop x ← x + (σ_next − σ)·v over SIGMAS: x is the pipeline's `latents` (the request
input "noise" is randn · sigma_data, the latents after the pipeline's `latents * sigma_data`); run.py's σ only
names the step (i = SIGMAS.index(σ)); the scheduler's three noise draws are the request input "step_noise"
([3, B, C, H, W], raw randn, ·sigma_data inside the step as upstream); call returns v = (prev_sample − x) / (σ_next −
σ), so the loop's x after each step is the scheduler's prev_sample (to rounding), and after the last step (cos 0 = 1,
sin 0 = 0) the denoised pred_x0; the pipeline's final latents = denoised / sigma_data is outside the capture.

Tiny config (SANA-Sprint 1.6B's in parentheses): 2 linear-attention heads of 32, d 64 (70 × 32); 2 cross-attention
heads of 32 (20 × 112); 2 blocks (20); 4 latent channels (32); caption 24 wide (2304); mlp_ratio 1.5 (2.5);
patch 1; latents [1, 4, 8, 8]; 5 caption rows, the last padding.

usage: /usr/bin/python3 bench/unseen/replicas/sana_sprint.py OUTDIR
"""
import sys

import torch
import torch.nn as nn

from run import SIGMAS, capture
from allegro import PixArtAlphaTextProjection
from hunyuanimage21 import RMSNorm
from parts import TimestepEmbedding, Timesteps
from sana import GLUMBConv, PatchEmbed, SanaModulatedNorm, sana_attn, sana_linear_attn
from sana import SanaTransformerBlock as _SanaTransformerBlock
from sana_video import Attention


class SanaCombinedTimestepGuidanceEmbeddings(nn.Module):
    def __init__(self, embedding_dim):
        super().__init__()
        self.time_proj = Timesteps(num_channels=256, flip_sin_to_cos=True, downscale_freq_shift=0)
        self.timestep_embedder = TimestepEmbedding(in_channels=256, time_embed_dim=embedding_dim)
        self.guidance_condition_proj = Timesteps(num_channels=256, flip_sin_to_cos=True, downscale_freq_shift=0)
        self.guidance_embedder = TimestepEmbedding(in_channels=256, time_embed_dim=embedding_dim)
        self.silu = nn.SiLU()
        self.linear = nn.Linear(embedding_dim, 6 * embedding_dim, bias=True)

    def forward(self, timestep, guidance=None, hidden_dtype=None):
        timesteps_proj = self.time_proj(timestep)
        timesteps_emb = self.timestep_embedder(timesteps_proj.to(dtype=hidden_dtype))  # (N, D)
        guidance_proj = self.guidance_condition_proj(guidance)
        guidance_emb = self.guidance_embedder(guidance_proj.to(dtype=hidden_dtype))
        conditioning = timesteps_emb + guidance_emb
        return self.linear(self.silu(conditioning)), conditioning


class SanaTransformerBlock(_SanaTransformerBlock):
    """sana_transformer.SanaTransformerBlock with qk_norm set: its Attention modules carry norm_q / norm_k (kv_heads
    = heads); the forward is sana.py's (the same code)."""

    def __init__(self, dim=2240, num_attention_heads=70, attention_head_dim=32, dropout=0.0,
                 num_cross_attention_heads=20, cross_attention_head_dim=112, cross_attention_dim=2240,
                 attention_bias=True, norm_elementwise_affine=False, norm_eps=1e-6, attention_out_bias=True,
                 mlp_ratio=2.5, qk_norm=None):
        nn.Module.__init__(self)
        # 1. Self Attention
        self.norm1 = nn.LayerNorm(dim, elementwise_affine=False, eps=norm_eps)
        self.attn1 = Attention(query_dim=dim, heads=num_attention_heads, dim_head=attention_head_dim,
                               kv_heads=num_attention_heads if qk_norm is not None else None, qk_norm=qk_norm,
                               dropout=dropout, bias=attention_bias, cross_attention_dim=None,
                               processor=sana_linear_attn)
        # 2. Cross Attention
        if cross_attention_dim is not None:
            self.norm2 = nn.LayerNorm(dim, elementwise_affine=norm_elementwise_affine, eps=norm_eps)
            self.attn2 = Attention(query_dim=dim, qk_norm=qk_norm,
                                   kv_heads=num_cross_attention_heads if qk_norm is not None else None,
                                   cross_attention_dim=cross_attention_dim, heads=num_cross_attention_heads,
                                   dim_head=cross_attention_head_dim, dropout=dropout, bias=True,
                                   out_bias=attention_out_bias, processor=sana_attn)
        # 3. Feed-forward
        self.ff = GLUMBConv(dim, dim, mlp_ratio, norm_type=None, residual_connection=False)
        self.scale_shift_table = nn.Parameter(torch.randn(6, dim) / dim ** 0.5)


class SanaTransformer2DModel(nn.Module):
    def __init__(self, in_channels=32, out_channels=32, num_attention_heads=70, attention_head_dim=32, num_layers=20,
                 num_cross_attention_heads=20, cross_attention_head_dim=112, cross_attention_dim=2240,
                 caption_channels=2304, mlp_ratio=2.5, dropout=0.0, attention_bias=False, sample_size=32,
                 patch_size=1, norm_elementwise_affine=False, norm_eps=1e-6, interpolation_scale=None,
                 guidance_embeds=False, guidance_embeds_scale=0.1, qk_norm=None, timestep_scale=1.0):
        super().__init__()
        assert guidance_embeds  # the AdaLayerNormSingle branch is sana.py's
        self.patch_size = patch_size
        out_channels = out_channels or in_channels
        inner_dim = num_attention_heads * attention_head_dim
        # 1. Patch Embedding
        self.patch_embed = PatchEmbed(height=sample_size, width=sample_size, patch_size=patch_size,
                                      in_channels=in_channels, embed_dim=inner_dim,
                                      interpolation_scale=interpolation_scale,
                                      pos_embed_type="sincos" if interpolation_scale is not None else None)
        # 2. Additional condition embeddings
        self.time_embed = SanaCombinedTimestepGuidanceEmbeddings(inner_dim)
        self.caption_projection = PixArtAlphaTextProjection(in_features=caption_channels, hidden_size=inner_dim)
        self.caption_norm = RMSNorm(inner_dim, eps=1e-5, elementwise_affine=True)
        # 3. Transformer blocks
        self.transformer_blocks = nn.ModuleList([
            SanaTransformerBlock(inner_dim, num_attention_heads, attention_head_dim, dropout=dropout,
                                 num_cross_attention_heads=num_cross_attention_heads,
                                 cross_attention_head_dim=cross_attention_head_dim,
                                 cross_attention_dim=cross_attention_dim, attention_bias=attention_bias,
                                 norm_elementwise_affine=norm_elementwise_affine, norm_eps=norm_eps,
                                 mlp_ratio=mlp_ratio, qk_norm=qk_norm)
            for _ in range(num_layers)])
        # 4. Output blocks
        self.scale_shift_table = nn.Parameter(torch.randn(2, inner_dim) / inner_dim ** 0.5)
        self.norm_out = SanaModulatedNorm(inner_dim, elementwise_affine=False, eps=1e-6)
        self.proj_out = nn.Linear(inner_dim, patch_size * patch_size * out_channels)

    def forward(self, hidden_states, encoder_hidden_states, timestep, guidance=None, encoder_attention_mask=None,
                attention_mask=None, attention_kwargs=None, controlnet_block_samples=None, return_dict=True):
        if attention_mask is not None and attention_mask.ndim == 2:
            attention_mask = (1 - attention_mask.to(hidden_states.dtype)) * -10000.0
            attention_mask = attention_mask.unsqueeze(1)
        if encoder_attention_mask is not None and encoder_attention_mask.ndim == 2:
            encoder_attention_mask = (1 - encoder_attention_mask.to(hidden_states.dtype)) * -10000.0
            encoder_attention_mask = encoder_attention_mask.unsqueeze(1)
        # 1. Input
        batch_size, num_channels, height, width = hidden_states.shape
        p = self.patch_size
        post_patch_height, post_patch_width = height // p, width // p
        hidden_states = self.patch_embed(hidden_states)
        if guidance is not None:
            timestep, embedded_timestep = self.time_embed(timestep, guidance=guidance,
                                                          hidden_dtype=hidden_states.dtype)
        else:
            timestep, embedded_timestep = self.time_embed(timestep, batch_size=batch_size,
                                                          hidden_dtype=hidden_states.dtype)
        encoder_hidden_states = self.caption_projection(encoder_hidden_states)
        encoder_hidden_states = encoder_hidden_states.view(batch_size, -1, hidden_states.shape[-1])
        encoder_hidden_states = self.caption_norm(encoder_hidden_states)
        # 2. Transformer blocks
        for index_block, block in enumerate(self.transformer_blocks):
            hidden_states = block(hidden_states, attention_mask, encoder_hidden_states, encoder_attention_mask,
                                  timestep, post_patch_height, post_patch_width)
            if controlnet_block_samples is not None and 0 < index_block <= len(controlnet_block_samples):
                hidden_states = hidden_states + controlnet_block_samples[index_block - 1]
        # 3. Normalization
        hidden_states = self.norm_out(hidden_states, embedded_timestep, self.scale_shift_table)
        hidden_states = self.proj_out(hidden_states)
        # 5. Unpatchify
        hidden_states = hidden_states.reshape(batch_size, post_patch_height, post_patch_width, p, p, -1)
        hidden_states = hidden_states.permute(0, 5, 1, 3, 2, 4)
        output = hidden_states.reshape(batch_size, -1, post_patch_height * p, post_patch_width * p)
        return (output,)


def build():
    return SanaTransformer2DModel(in_channels=4, out_channels=4, num_attention_heads=2, attention_head_dim=32,
                                  num_layers=2, num_cross_attention_heads=2, cross_attention_head_dim=32,
                                  cross_attention_dim=64, caption_channels=24, mlp_ratio=1.5, sample_size=8,
                                  patch_size=1, guidance_embeds=True, guidance_embeds_scale=0.1,
                                  qk_norm="rms_norm_across_heads")


SIGMA_DATA = 0.5  # SCMScheduler's sigma_data
GUIDANCE_SCALE = 4.5  # SanaSprintPipeline's default
GUIDANCE_EMBEDS_SCALE = 0.1  # transformer.config.guidance_embeds_scale
# SCMScheduler.set_timesteps(3, max_timesteps=1.57080, intermediate_timesteps=None): linspace(max, 0, steps + 1)
TIMESTEPS = torch.linspace(1.57080, 0, len(SIGMAS)).float()


def inputs(g):
    n = 5
    txt = torch.randn((1, n, 24), generator=g)
    mask = torch.ones(1, n, dtype=torch.long)
    mask[:, n - 1:] = 0  # the tokenizer's padding
    latents = torch.randn((1, 4, 8, 8), generator=g)  # prepare_latents (float32)
    latents = latents * SIGMA_DATA  # latents = latents * self.scheduler.config.sigma_data
    # the noise scheduler.step draws at each step: randn_tensor(model_output.shape, generator) (·sigma_data there)
    step_noise = torch.randn((len(SIGMAS) - 1, 1, 4, 8, 8), generator=g)
    return {"encoder_hidden_states": txt, "encoder_attention_mask": mask, "step_noise": step_noise,
            "noise": latents}


def call(model, x, sigma, c):
    i = SIGMAS.index(sigma)
    prompt_embeds = c["encoder_hidden_states"]
    transformer_dtype = next(model.parameters()).dtype
    guidance = torch.full([1], GUIDANCE_SCALE, dtype=torch.float32)
    guidance = guidance.expand(x.shape[0]).to(prompt_embeds.dtype)
    guidance = guidance * GUIDANCE_EMBEDS_SCALE
    latents = x
    t = TIMESTEPS[i].to(x.device)
    timestep = t.expand(latents.shape[0])
    latents_model_input = latents / SIGMA_DATA
    scm_timestep = torch.sin(timestep) / (torch.cos(timestep) + torch.sin(timestep))
    scm_timestep_expanded = scm_timestep.view(-1, 1, 1, 1)
    latent_model_input = latents_model_input * torch.sqrt(scm_timestep_expanded ** 2
                                                          + (1 - scm_timestep_expanded) ** 2)
    noise_pred = model(latent_model_input.to(dtype=transformer_dtype),
                       encoder_hidden_states=prompt_embeds.to(dtype=transformer_dtype),
                       encoder_attention_mask=c["encoder_attention_mask"], guidance=guidance,
                       timestep=scm_timestep, return_dict=False, attention_kwargs=None)[0]
    noise_pred = ((1 - 2 * scm_timestep_expanded) * latent_model_input
                  + (1 - 2 * scm_timestep_expanded + 2 * scm_timestep_expanded ** 2) * noise_pred
                  ) / torch.sqrt(scm_timestep_expanded ** 2 + (1 - scm_timestep_expanded) ** 2)
    noise_pred = noise_pred.float() * SIGMA_DATA
    # SCMScheduler.step(noise_pred, timestep, latents) with prediction_type "trigflow"
    t_next = TIMESTEPS[i + 1].to(x.device)
    s = TIMESTEPS[i].to(x.device)
    pred_x0 = torch.cos(s) * latents - torch.sin(s) * noise_pred
    noise = c["step_noise"][i].to(noise_pred.dtype) * SIGMA_DATA
    prev_sample = torch.cos(t_next) * pred_x0 + torch.sin(t_next) * noise
    # into run.py's x + (σ_next − σ)·v: the loop's next x is the scheduler's prev_sample
    return (prev_sample - latents) / (SIGMAS[i + 1] - sigma)


PRODUCER = dict(
    library_source="replica of huggingface/diffusers sana_transformer.py@530fe0722df0 (guidance_embeds, qk_norm "
                   "rms_norm_across_heads) and the parts it imports (torch 1.13); pipeline_sana_sprint.py@1eeddd0bff13,"
                   " scheduling_scm.py@98ea5c9e8667",
    timestep="TrigFlow angles linspace(1.5708, 0, 4)[i] (SCMScheduler, 3 steps); the model gets scm_timestep = "
             "sin t / (cos t + sin t) in [0, 1] (no x1000); guidance 4.5·0.1 embedded beside it",
    velocity="(prev_sample − x) / (σ_next − σ): the pipeline's flow→TrigFlow combination of the output, ·sigma_data, "
             "then SCMScheduler.step (pred_x0 = cos s·x − sin s·pred; prev = cos t·pred_x0 + sin t·0.5·step_noise[i])"
             ", so the loop's x follows the pipeline's latents; run.py's σ only indexes the step",
    note="SANA-Sprint, 2 blocks at d 64: time_embed = SanaCombinedTimestepGuidanceEmbeddings (timestep and guidance "
         "each Timesteps(256) → Linear-SiLU-Linear, summed; SiLU + Linear 6·d for the blocks, the sum for the final "
         "norm); RMSNorm q/k across heads (weight over all 64 channels) in the ReLU linear self-attention and the "
         "masked cross-attention; GLUMBConv; input latents/0.5·sqrt(s² + (1−s)²), output combined with it "
         "((1−2s)·x_in + (1−2s+2s²)·out)/sqrt(s² + (1−s)²)·0.5; latents start as randn·0.5; per-step scheduler noise "
         "as the request input step_noise")

if __name__ == "__main__":
    capture("sana_sprint", build, inputs, call, sys.argv[1], PRODUCER)
