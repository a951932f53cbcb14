"""FLUX.1-dev with an InstantX-style FLUX ControlNet-Union (FluxControlNetModel feeding FluxTransformer2DModel),
reimplemented for torch 1.13 (no diffusers here), captured small in f32 on CPU.

Follows huggingface/diffusers src/diffusers/models/controlnets/controlnet_flux.py at
42c1451c8716d0e15e827376254c43aeb880052c line for line (FluxControlNetModel with guidance_embeds True, num_mode set
(the ControlNet-Union branch: an nn.Embedding of the control mode prepended to the caption tokens, txt_ids[:1]
prepended to the text ids), conditioning_embedding_channels None (the InstantX layout: no input_hint_block, the
packed VAE latent of the control image through controlnet_x_embedder, zero-initialised upstream and redrawn here
like every weight so that the control signal flows); after the double- and single-stream blocks, each block's image
stream through its own Linear (controlnet_blocks[i], controlnet_single_blocks[i], zero-initialised upstream, redrawn
here), each multiplied by conditioning_scale).

The transformer and the blocks both models import are src/diffusers/models/transformers/transformer_flux.py of the
FluxAttention era (FluxTransformer2DModel, FluxTransformerBlock, FluxSingleTransformerBlock taking and returning
both streams, FluxAttention with FluxAttnProcessor's __call__ as its forward, FluxPosEmbed): the index holds only an
older huggingface/diffusers version of that file (376297a7a0a7728c42145f69164db1e2c37fdabe, the Attention-class
era whose single blocks take one stream, which does not fit the ControlNet above), so these lines were read from a
verbatim copy in the fork ParagEkbote/diffusers at 1cf6954143e4485e7bea2b22b2f240b30e3d37cb. FluxAttention,
FluxPosEmbed, FeedForward("gelu-approximate") and PixArtAlphaTextProjection(act_fn "silu") are chroma.py's (the same
upstream classes), AdaLayerNormZero / AdaLayerNormZeroSingle / AdaLayerNormContinuous are ovis_image.py's
(normalization.py's), Timesteps / TimestepEmbedding parts.py's; CombinedTimestepGuidanceTextProjEmbeddings
(embeddings.py) is written here. Stand-ins for what torch 1.13 lacks: torch.nn.RMSNorm (flux2.RMSNorm) and
dispatch_attention_fn (SDPA's math on [B, L, H, D], default scale, no mask).

The constructs it shows: two MMDiTs run each step on the same latents, the smaller one's per-block image-stream
outputs projected by per-block Linears, scaled, and added to the larger one's image stream after its blocks with
interval_control = int(np.ceil(len(blocks) / len(samples))) and sample index index_block // interval_control (here
2 double-stream blocks with 1 ControlNet sample: interval 2, both blocks add sample 0; 2 single-stream blocks with 2
samples: interval 1, block i adds sample i); the ControlNet's input
x_embedder(latents) + controlnet_x_embedder(control latents); its caption one token longer (the mode embedding
row, RoPE id copied from the first text id); single-stream blocks that concatenate [text, image], run attention
and a GELU-tanh MLP side by side into one proj_out, and split the streams again; guidance embedded beside the
timestep (guidance_embeds True in both models), the pooled CLIP vector projected into temb; joint [text, image]
attention with per-head RMSNorm q/k, 3-axis interleaved RoPE (f64 tables).

Pipeline as FluxControlNetPipeline (pipelines/flux/pipeline_flux_controlnet.py at
0256497cd8b1b749098312f63a55bc5e1f295a15) calls the two models with true_cfg_scale 1 (no negative call) and
prompt_embeds / pooled_prompt_embeds given: each step timestep = t.expand(B).to(latents.dtype) with t = σ·1000,
both models given timestep / 1000 (each multiplies by 1000 again) and guidance = torch.tensor([guidance_scale])
expanded to B (guidance_scale 3.5, also multiplied by 1000 inside), pooled_projections = pooled_prompt_embeds,
encoder_hidden_states = prompt_embeds, txt_ids zeros (L, 3), img_ids (0, h, w) over the packed 2x3 grid; the
ControlNet first with controlnet_cond = the packed VAE latent of the control image ((latent - shift_factor) ·
scaling_factor, drawn here as a latent [1, 4, 4, 6] and packed 2x2 to [1, 6, 16]), controlnet_mode = the
int mode as a long tensor view(-1, 1).expand(B, 1), conditioning_scale = controlnet_conditioning_scale ·
controlnet_keep[i] = 0.7 · 1.0, joint_attention_kwargs {}, return_dict False; then the transformer with
controlnet_block_samples, controlnet_single_block_samples and controlnet_blocks_repeat False (input_hint_block is
None); velocity the output as is. The two models are held by one container module (the pipeline's attribute names:
transformer, controlnet) that is never called itself, so that run.py's one-model capture records both.

Tiny config: both 2 heads of 16 (d 32), in_channels 16 (4 latent channels packed 2x2; a 4x6 latent, 6 image
tokens), a 24-wide T5 caption of 3 tokens, a 12-wide pooled vector, RoPE axes 4+6+6; the transformer 2 double- and
2 single-stream blocks; the ControlNet 1 and 2, num_mode 4, control mode 2.

usage: /usr/bin/python3 bench/unseen/replicas/flux_controlnet.py OUTDIR
"""
import sys

import numpy as np
import torch
import torch.nn as nn

from parts import TimestepEmbedding, Timesteps
from run import capture
from chroma import FeedForward, FluxAttention, FluxPosEmbed, PixArtAlphaTextProjection, pack_latents, \
    prepare_latent_image_ids
from ovis_image import AdaLayerNormContinuous, AdaLayerNormZero, AdaLayerNormZeroSingle


def zero_module(module):
    for p in module.parameters():
        nn.init.zeros_(p)
    return module


class CombinedTimestepGuidanceTextProjEmbeddings(nn.Module):
    """embeddings.CombinedTimestepGuidanceTextProjEmbeddings."""

    def __init__(self, embedding_dim, pooled_projection_dim):
        super().__init__()
        self.time_proj = Timesteps(num_channels=256, flip_sin_to_cos=True, downscale_freq_shift=0)
        self.timestep_embedder = TimestepEmbedding(in_channels=256, time_embed_dim=embedding_dim)
        self.guidance_embedder = TimestepEmbedding(in_channels=256, time_embed_dim=embedding_dim)
        self.text_embedder = PixArtAlphaTextProjection(pooled_projection_dim, embedding_dim, act_fn="silu")

    def forward(self, timestep, guidance, pooled_projection):
        timesteps_proj = self.time_proj(timestep)
        timesteps_emb = self.timestep_embedder(timesteps_proj.to(dtype=pooled_projection.dtype))  # (N, D)

        guidance_proj = self.time_proj(guidance)
        guidance_emb = self.guidance_embedder(guidance_proj.to(dtype=pooled_projection.dtype))  # (N, D)

        time_guidance_emb = timesteps_emb + guidance_emb

        pooled_projections = self.text_embedder(pooled_projection)
        conditioning = time_guidance_emb + pooled_projections

        return conditioning


class FluxSingleTransformerBlock(nn.Module):
    def __init__(self, dim, num_attention_heads, attention_head_dim, mlp_ratio=4.0):
        super().__init__()
        self.mlp_hidden_dim = int(dim * mlp_ratio)

        self.norm = AdaLayerNormZeroSingle(dim)
        self.proj_mlp = nn.Linear(dim, self.mlp_hidden_dim)
        self.act_mlp = nn.GELU(approximate="tanh")
        self.proj_out = nn.Linear(dim + self.mlp_hidden_dim, dim)

        self.attn = FluxAttention(query_dim=dim, dim_head=attention_head_dim, heads=num_attention_heads, out_dim=dim,
                                  bias=True, eps=1e-6, pre_only=True)

    def forward(self, hidden_states, encoder_hidden_states, temb, image_rotary_emb=None, joint_attention_kwargs=None):
        text_seq_len = encoder_hidden_states.shape[1]
        hidden_states = torch.cat([encoder_hidden_states, hidden_states], dim=1)

        residual = hidden_states
        norm_hidden_states, gate = self.norm(hidden_states, emb=temb)
        mlp_hidden_states = self.act_mlp(self.proj_mlp(norm_hidden_states))
        joint_attention_kwargs = joint_attention_kwargs or {}
        attn_output = self.attn(hidden_states=norm_hidden_states, image_rotary_emb=image_rotary_emb,
                                **joint_attention_kwargs)

        hidden_states = torch.cat([attn_output, mlp_hidden_states], dim=2)
        gate = gate.unsqueeze(1)
        hidden_states = gate * self.proj_out(hidden_states)
        hidden_states = residual + hidden_states
        if hidden_states.dtype == torch.float16:
            hidden_states = hidden_states.clip(-65504, 65504)

        encoder_hidden_states, hidden_states = hidden_states[:, :text_seq_len], hidden_states[:, text_seq_len:]
        return encoder_hidden_states, hidden_states


class FluxTransformerBlock(nn.Module):
    def __init__(self, dim, num_attention_heads, attention_head_dim, qk_norm="rms_norm", eps=1e-6):
        super().__init__()

        self.norm1 = AdaLayerNormZero(dim)
        self.norm1_context = AdaLayerNormZero(dim)

        self.attn = FluxAttention(query_dim=dim, added_kv_proj_dim=dim, dim_head=attention_head_dim,
                                  heads=num_attention_heads, out_dim=dim, context_pre_only=False, bias=True, eps=eps)

        self.norm2 = nn.LayerNorm(dim, elementwise_affine=False, eps=1e-6)
        self.ff = FeedForward(dim=dim, dim_out=dim, activation_fn="gelu-approximate")

        self.norm2_context = nn.LayerNorm(dim, elementwise_affine=False, eps=1e-6)
        self.ff_context = FeedForward(dim=dim, dim_out=dim, activation_fn="gelu-approximate")

    def forward(self, hidden_states, encoder_hidden_states, temb, image_rotary_emb=None, joint_attention_kwargs=None):
        norm_hidden_states, gate_msa, shift_mlp, scale_mlp, gate_mlp = self.norm1(hidden_states, emb=temb)

        norm_encoder_hidden_states, c_gate_msa, c_shift_mlp, c_scale_mlp, c_gate_mlp = self.norm1_context(
            encoder_hidden_states, emb=temb)
        joint_attention_kwargs = joint_attention_kwargs or {}

        # Attention.
        attention_outputs = self.attn(hidden_states=norm_hidden_states,
                                      encoder_hidden_states=norm_encoder_hidden_states,
                                      image_rotary_emb=image_rotary_emb, **joint_attention_kwargs)

        attn_output, context_attn_output = attention_outputs  # no IP-adapter output (len 2)

        # Process attention outputs for the `hidden_states`.
        attn_output = gate_msa.unsqueeze(1) * attn_output
        hidden_states = hidden_states + attn_output

        norm_hidden_states = self.norm2(hidden_states)
        norm_hidden_states = norm_hidden_states * (1 + scale_mlp[:, None]) + shift_mlp[:, None]

        ff_output = self.ff(norm_hidden_states)
        ff_output = gate_mlp.unsqueeze(1) * ff_output

        hidden_states = hidden_states + ff_output

        # Process attention outputs for the `encoder_hidden_states`.
        context_attn_output = c_gate_msa.unsqueeze(1) * context_attn_output
        encoder_hidden_states = encoder_hidden_states + context_attn_output

        norm_encoder_hidden_states = self.norm2_context(encoder_hidden_states)
        norm_encoder_hidden_states = norm_encoder_hidden_states * (1 + c_scale_mlp[:, None]) + c_shift_mlp[:, None]

        context_ff_output = self.ff_context(norm_encoder_hidden_states)
        encoder_hidden_states = encoder_hidden_states + c_gate_mlp.unsqueeze(1) * context_ff_output
        if encoder_hidden_states.dtype == torch.float16:
            encoder_hidden_states = encoder_hidden_states.clip(-65504, 65504)

        return encoder_hidden_states, hidden_states


class FluxTransformer2DModel(nn.Module):
    def __init__(self, patch_size=1, in_channels=64, out_channels=None, num_layers=19, num_single_layers=38,
                 attention_head_dim=128, num_attention_heads=24, joint_attention_dim=4096, pooled_projection_dim=768,
                 guidance_embeds=False, axes_dims_rope=(16, 56, 56)):
        super().__init__()
        self.out_channels = out_channels or in_channels
        self.inner_dim = num_attention_heads * attention_head_dim

        self.pos_embed = FluxPosEmbed(theta=10000, axes_dim=axes_dims_rope)

        assert guidance_embeds  # FLUX.1-dev; CombinedTimestepTextProjEmbeddings (schnell) is not replicated
        self.time_text_embed = CombinedTimestepGuidanceTextProjEmbeddings(
            embedding_dim=self.inner_dim, pooled_projection_dim=pooled_projection_dim)

        self.context_embedder = nn.Linear(joint_attention_dim, self.inner_dim)
        self.x_embedder = nn.Linear(in_channels, self.inner_dim)

        self.transformer_blocks = nn.ModuleList([
            FluxTransformerBlock(dim=self.inner_dim, num_attention_heads=num_attention_heads,
                                 attention_head_dim=attention_head_dim) for _ in range(num_layers)])

        self.single_transformer_blocks = nn.ModuleList([
            FluxSingleTransformerBlock(dim=self.inner_dim, num_attention_heads=num_attention_heads,
                                       attention_head_dim=attention_head_dim) for _ in range(num_single_layers)])

        self.norm_out = AdaLayerNormContinuous(self.inner_dim, self.inner_dim, elementwise_affine=False, eps=1e-6)
        self.proj_out = nn.Linear(self.inner_dim, patch_size * patch_size * self.out_channels, bias=True)

    def forward(self, hidden_states, encoder_hidden_states=None, pooled_projections=None, timestep=None,
                img_ids=None, txt_ids=None, guidance=None, joint_attention_kwargs=None, controlnet_block_samples=None,
                controlnet_single_block_samples=None, return_dict=True, controlnet_blocks_repeat=False):
        if joint_attention_kwargs is not None:
            joint_attention_kwargs = joint_attention_kwargs.copy()
            joint_attention_kwargs.pop("scale", 1.0)

        hidden_states = self.x_embedder(hidden_states)

        timestep = timestep.to(hidden_states.dtype) * 1000
        if guidance is not None:
            guidance = guidance.to(hidden_states.dtype) * 1000

        temb = (self.time_text_embed(timestep, pooled_projections) if guidance is None
                else self.time_text_embed(timestep, guidance, pooled_projections))
        encoder_hidden_states = self.context_embedder(encoder_hidden_states)

        if txt_ids.ndim == 3:
            txt_ids = txt_ids[0]
        if img_ids.ndim == 3:
            img_ids = img_ids[0]

        ids = torch.cat((txt_ids, img_ids), dim=0)
        image_rotary_emb = self.pos_embed(ids)

        for index_block, block in enumerate(self.transformer_blocks):
            encoder_hidden_states, hidden_states = block(hidden_states=hidden_states,
                                                         encoder_hidden_states=encoder_hidden_states, temb=temb,
                                                         image_rotary_emb=image_rotary_emb,
                                                         joint_attention_kwargs=joint_attention_kwargs)

            # controlnet residual
            if controlnet_block_samples is not None:
                interval_control = len(self.transformer_blocks) / len(controlnet_block_samples)
                interval_control = int(np.ceil(interval_control))
                # For Xlabs ControlNet.
                if controlnet_blocks_repeat:
                    hidden_states = (
                        hidden_states + controlnet_block_samples[index_block % len(controlnet_block_samples)])
                else:
                    hidden_states = hidden_states + controlnet_block_samples[index_block // interval_control]

        for index_block, block in enumerate(self.single_transformer_blocks):
            encoder_hidden_states, hidden_states = block(hidden_states=hidden_states,
                                                         encoder_hidden_states=encoder_hidden_states, temb=temb,
                                                         image_rotary_emb=image_rotary_emb,
                                                         joint_attention_kwargs=joint_attention_kwargs)

            # controlnet residual
            if controlnet_single_block_samples is not None:
                interval_control = len(self.single_transformer_blocks) / len(controlnet_single_block_samples)
                interval_control = int(np.ceil(interval_control))
                hidden_states = hidden_states + controlnet_single_block_samples[index_block // interval_control]

        hidden_states = self.norm_out(hidden_states, temb)
        output = self.proj_out(hidden_states)
        return (output,)


class FluxControlNetModel(nn.Module):
    def __init__(self, patch_size=1, in_channels=64, num_layers=19, num_single_layers=38, attention_head_dim=128,
                 num_attention_heads=24, joint_attention_dim=4096, pooled_projection_dim=768, guidance_embeds=False,
                 axes_dims_rope=(16, 56, 56), num_mode=None, conditioning_embedding_channels=None):
        super().__init__()
        self.out_channels = in_channels
        self.inner_dim = num_attention_heads * attention_head_dim
        self.guidance_embeds = guidance_embeds  # config.guidance_embeds, read by the pipeline

        self.pos_embed = FluxPosEmbed(theta=10000, axes_dim=axes_dims_rope)
        assert guidance_embeds  # CombinedTimestepTextProjEmbeddings (guidance_embeds False) is not replicated
        self.time_text_embed = CombinedTimestepGuidanceTextProjEmbeddings(
            embedding_dim=self.inner_dim, pooled_projection_dim=pooled_projection_dim)

        self.context_embedder = nn.Linear(joint_attention_dim, self.inner_dim)
        self.x_embedder = torch.nn.Linear(in_channels, self.inner_dim)

        self.transformer_blocks = nn.ModuleList([
            FluxTransformerBlock(dim=self.inner_dim, num_attention_heads=num_attention_heads,
                                 attention_head_dim=attention_head_dim) for i in range(num_layers)])

        self.single_transformer_blocks = nn.ModuleList([
            FluxSingleTransformerBlock(dim=self.inner_dim, num_attention_heads=num_attention_heads,
                                       attention_head_dim=attention_head_dim) for i in range(num_single_layers)])

        # controlnet_blocks
        self.controlnet_blocks = nn.ModuleList([])
        for _ in range(len(self.transformer_blocks)):
            self.controlnet_blocks.append(zero_module(nn.Linear(self.inner_dim, self.inner_dim)))

        self.controlnet_single_blocks = nn.ModuleList([])
        for _ in range(len(self.single_transformer_blocks)):
            self.controlnet_single_blocks.append(zero_module(nn.Linear(self.inner_dim, self.inner_dim)))

        self.union = num_mode is not None
        if self.union:
            self.controlnet_mode_embedder = nn.Embedding(num_mode, self.inner_dim)

        assert conditioning_embedding_channels is None  # the XLabs input_hint_block branch is not replicated
        self.input_hint_block = None
        self.controlnet_x_embedder = zero_module(torch.nn.Linear(in_channels, self.inner_dim))

    def forward(self, hidden_states, controlnet_cond, controlnet_mode=None, conditioning_scale=1.0,
                encoder_hidden_states=None, pooled_projections=None, timestep=None, img_ids=None, txt_ids=None,
                guidance=None, joint_attention_kwargs=None, return_dict=True):
        if joint_attention_kwargs is not None:
            joint_attention_kwargs = joint_attention_kwargs.copy()
            joint_attention_kwargs.pop("scale", 1.0)

        hidden_states = self.x_embedder(hidden_states)

        # add
        hidden_states = hidden_states + self.controlnet_x_embedder(controlnet_cond)

        timestep = timestep.to(hidden_states.dtype) * 1000
        if guidance is not None:
            guidance = guidance.to(hidden_states.dtype) * 1000
        else:
            guidance = None
        temb = (self.time_text_embed(timestep, pooled_projections) if guidance is None
                else self.time_text_embed(timestep, guidance, pooled_projections))
        encoder_hidden_states = self.context_embedder(encoder_hidden_states)

        if txt_ids.ndim == 3:
            txt_ids = txt_ids[0]
        if img_ids.ndim == 3:
            img_ids = img_ids[0]

        if self.union:
            # union mode
            if controlnet_mode is None:
                raise ValueError("`controlnet_mode` cannot be `None` when applying ControlNet-Union")
            # union mode emb
            controlnet_mode_emb = self.controlnet_mode_embedder(controlnet_mode)
            encoder_hidden_states = torch.cat([controlnet_mode_emb, encoder_hidden_states], dim=1)
            txt_ids = torch.cat([txt_ids[:1], txt_ids], dim=0)

        ids = torch.cat((txt_ids, img_ids), dim=0)
        image_rotary_emb = self.pos_embed(ids)

        block_samples = ()
        for index_block, block in enumerate(self.transformer_blocks):
            encoder_hidden_states, hidden_states = block(hidden_states=hidden_states,
                                                         encoder_hidden_states=encoder_hidden_states, temb=temb,
                                                         image_rotary_emb=image_rotary_emb)
            block_samples = block_samples + (hidden_states,)

        single_block_samples = ()
        for index_block, block in enumerate(self.single_transformer_blocks):
            encoder_hidden_states, hidden_states = block(hidden_states=hidden_states,
                                                         encoder_hidden_states=encoder_hidden_states, temb=temb,
                                                         image_rotary_emb=image_rotary_emb)
            single_block_samples = single_block_samples + (hidden_states,)

        # controlnet block
        controlnet_block_samples = ()
        for block_sample, controlnet_block in zip(block_samples, self.controlnet_blocks):
            block_sample = controlnet_block(block_sample)
            controlnet_block_samples = controlnet_block_samples + (block_sample,)

        controlnet_single_block_samples = ()
        for single_block_sample, controlnet_block in zip(single_block_samples, self.controlnet_single_blocks):
            single_block_sample = controlnet_block(single_block_sample)
            controlnet_single_block_samples = controlnet_single_block_samples + (single_block_sample,)

        # scaling
        controlnet_block_samples = [sample * conditioning_scale for sample in controlnet_block_samples]
        controlnet_single_block_samples = [sample * conditioning_scale for sample in controlnet_single_block_samples]

        controlnet_block_samples = None if len(controlnet_block_samples) == 0 else controlnet_block_samples
        controlnet_single_block_samples = (
            None if len(controlnet_single_block_samples) == 0 else controlnet_single_block_samples)

        return (controlnet_block_samples, controlnet_single_block_samples)


COMMON = dict(patch_size=1, in_channels=16, attention_head_dim=16, num_attention_heads=2, joint_attention_dim=24,
              pooled_projection_dim=12, guidance_embeds=True, axes_dims_rope=(4, 6, 6))


class FluxControlNet(nn.Module):
    """The pipeline's two models under its attribute names (never called itself)."""

    def __init__(self):
        super().__init__()
        self.transformer = FluxTransformer2DModel(num_layers=2, num_single_layers=2, **COMMON)
        self.controlnet = FluxControlNetModel(num_layers=1, num_single_layers=2, num_mode=4, **COMMON)


GUIDANCE_SCALE = 3.5  # guidance_scale (the pipeline's default 7.0; the InstantX examples use 3.5)
CONDITIONING_SCALE = 0.7  # controlnet_conditioning_scale (the pipeline's default 1.0)
CONTROL_MODE = 2  # control_mode (an int for one FluxControlNetModel in union mode)


def inputs(g):
    n = 3  # T5 prompt tokens
    txt = torch.randn((1, n, 24), generator=g)  # prompt_embeds
    pooled = torch.randn((1, 12), generator=g)  # pooled_prompt_embeds (CLIP)
    control = torch.randn((1, 4, 4, 6), generator=g)  # the control image's VAE latent, shifted and scaled
    control_image = pack_latents(control, 1, 4, 4, 6)
    # control_mode = torch.tensor(control_mode).to(device, dtype=torch.long).view(-1, 1).expand(B, 1)
    control_mode = torch.tensor(CONTROL_MODE).to(dtype=torch.long)
    control_mode = control_mode.view(-1, 1).expand(control_image.shape[0], 1)
    lat = torch.randn((1, 4, 4, 6), generator=g)
    latents = pack_latents(lat, 1, 4, 4, 6)
    return {"encoder_hidden_states": txt, "pooled_projections": pooled, "control_image": control_image,
            "control_mode": control_mode, "txt_ids": torch.zeros(n, 3), "img_ids": prepare_latent_image_ids(2, 3),
            "noise": latents}


def call(model, x, sigma, c):
    # FluxControlNetPipeline, true_cfg_scale 1: the ControlNet then the transformer on the same latents and t
    t = torch.tensor(sigma * 1000.0, dtype=torch.float32, device=x.device)
    timestep = t.expand(x.shape[0]).to(x.dtype)
    use_guidance = model.controlnet.guidance_embeds
    guidance = torch.tensor([GUIDANCE_SCALE], device=x.device) if use_guidance else None
    guidance = guidance.expand(x.shape[0]) if guidance is not None else None
    cond_scale = CONDITIONING_SCALE * 1.0  # controlnet_keep[i]: 1.0 (control_guidance_start 0, end 1)
    controlnet_block_samples, controlnet_single_block_samples = model.controlnet(
        hidden_states=x, controlnet_cond=c["control_image"], controlnet_mode=c["control_mode"],
        conditioning_scale=cond_scale, timestep=timestep / 1000, guidance=guidance,
        pooled_projections=c["pooled_projections"], encoder_hidden_states=c["encoder_hidden_states"],
        txt_ids=c["txt_ids"], img_ids=c["img_ids"], joint_attention_kwargs={}, return_dict=False)
    guidance = torch.tensor([GUIDANCE_SCALE], device=x.device)  # transformer.config.guidance_embeds
    guidance = guidance.expand(x.shape[0]) if guidance is not None else None
    return model.transformer(hidden_states=x, timestep=timestep / 1000, guidance=guidance,
                             pooled_projections=c["pooled_projections"],
                             encoder_hidden_states=c["encoder_hidden_states"],
                             controlnet_block_samples=controlnet_block_samples,
                             controlnet_single_block_samples=controlnet_single_block_samples,
                             txt_ids=c["txt_ids"], img_ids=c["img_ids"], joint_attention_kwargs={},
                             return_dict=False, controlnet_blocks_repeat=False)[0]


PRODUCER = dict(
    library_source="replica of huggingface/diffusers controlnets/controlnet_flux.py@42c1451c8716 and the "
                   "FluxAttention-era transformers/transformer_flux.py (verbatim copy in ParagEkbote/diffusers"
                   "@1cf6954143e4) (FLUX.1-dev + FLUX ControlNet-Union, torch 1.13)",
    timestep="sigma float32 in the latents' dtype (FluxControlNetPipeline: t.expand(B).to(latents.dtype) / 1000 of "
             "sigma*1000, the same to both models; each multiplies by 1000); guidance 3.5 to both (x1000 inside)",
    velocity="the transformer's output as is (flow velocity), not negated",
    note="FLUX.1-dev MMDiT (2 double-, 2 single-stream blocks) with a 1+2-block FluxControlNetModel in union mode: "
         "the ControlNet's x_embedder(latents) + controlnet_x_embedder(packed control latent), the mode's "
         "nn.Embedding row prepended to its caption (txt_ids[:1] prepended to its ids), per-block Linear "
         "controlnet_blocks / controlnet_single_blocks over each block's image stream x conditioning_scale 0.7; the "
         "transformer adds sample index_block // ceil(2/1) after each double block (0, 0) and index_block // 1 after "
         "each single block (0, 1); single blocks concatenate [text, image], attention + GELU-tanh MLP into one proj_out, "
         "split again; temb = time + guidance (x1000) + pooled text projections; per-head RMSNorm q/k, 3-axis "
         "interleaved RoPE (f64 tables, axes 4+6+6, text ids 0, image ids (0, h, w)); latents (4x6) packed 2x2; each step "
         "the ControlNet then the transformer")

if __name__ == "__main__":
    capture("flux_controlnet", FluxControlNet, inputs, call, sys.argv[1], PRODUCER)
