"""Bria 3.2 text-to-image DiT (BriaTransformer2DModel), reimplemented for torch 1.13 (no diffusers here), captured
small in f32 on CPU.

Follows huggingface/diffusers src/diffusers/models/transformers/transformer_bria.py at
7d5682739a1ee5b25bb9f5a81c573ea7e38d8e22 (BriaTransformer2DModel, BriaTransformerBlock, BriaSingleTransformerBlock,
BriaAttention with BriaAttnProcessor's __call__ as its forward (unfused to_q/to_k/to_v, torch.nn.RMSNorm q/k and
added q/k per head, [text, image] joined, RoPE, dispatch_attention_fn, split, to_out / to_add_out), BriaEmbedND with
its own get_1d_rotary_pos_embed (use_real, repeat_interleave_real, f64 tables), BriaTimesteps (max_period
time_theta), BriaTimestepProjEmbeddings) with the parts it imports: attention.py (FeedForward "gelu-approximate"),
embeddings.py (TimestepEmbedding, get_timestep_embedding, apply_rotary_emb with use_real and sequence_dim 1),
normalization.py (AdaLayerNormZero, AdaLayerNormZeroSingle, AdaLayerNormContinuous): the same module tree, parameter
names and shapes, and call boundaries; the arithmetic line for line. The file is BriaFibo's ancestor, so the
classes that are the same code come from bria_fibo.py (BriaFiboEmbedND, BriaFiboTimesteps, subclassed under Bria's
names) and from what bria_fibo.py imports (hunyuanimage21.py's AdaLayerNorm* / FeedForward / TimestepEmbedding,
ovis_image.py's OvisImageAttention, which is the same Flux processor line for line). Stand-ins for what torch 1.13
lacks: torch.nn.RMSNorm (flux2.RMSNorm) and dispatch_attention_fn (SDPA's math on [B, L, H, D], default scale, no
mask). The blocks' fp16 clip(-65504, 65504) never runs in f32 or bf16; the IP-adapter branch (three attention
outputs) and the controlnet residual branches are not taken.

The constructs it shows: a Flux-style MMDiT without pooled text and without guidance embedding: temb is only the
timestep's cos-first 256-channel sinusoid (max period 10000) through Linear-SiLU-Linear, t passed as σ·1000 (the
model does not rescale it); the caption projected by context_embedder from T5 states zero-padded to
max_sequence_length (padding rows exactly 0, so they enter as context_embedder's bias) with no attention mask at
all; the double blocks (AdaLayerNormZero for each stream, joint [text, image] attention with RMSNorm q/k, added q/k,
interleaved 3-axis RoPE over ids [text zeros; image (0, row, col)], gelu-tanh FFNs); single blocks that take both
streams, join [text, image] themselves, run attention and a gelu-tanh MLP in parallel into one proj_out, and split
the rows again on return; AdaLayerNormContinuous (scale, shift order) on the image rows + proj_out.

Pipeline as BriaPipeline (pipelines/bria/pipeline_bria.py at 30faada2d3cd2319abf6738616bbd02ed391e429) calls it with
its default guidance_scale 5 and no negative prompt: negative_prompt_embeds = torch.zeros_like(prompt_embeds) (the
unconditional caption is all zeros), the batch [uncond, cond] (latents twice), timestep = t.expand(2) with t the
FlowMatchEulerDiscreteScheduler's σ·1000 (f32), txt_ids zeros [S, 3] and img_ids (0, row, col) over the packed grid
(3-D ids cut to their first sample), latents (B, 4, 4, 8) packed 2x2 to (B, 8, 16); noise_pred's halves mixed as
uncond + 5·(text − uncond) (normalize False, clip_value None: noise_text.std() is computed and unused), the result
the flow velocity as is (scheduler.step).

usage: /usr/bin/python3 bench/unseen/replicas/bria.py OUTDIR
"""
import sys

import torch
import torch.nn as nn

from run import capture
from bria_fibo import BriaFiboEmbedND, BriaFiboTimesteps
from hunyuanimage21 import AdaLayerNormContinuous, AdaLayerNormZero, AdaLayerNormZeroSingle, FeedForward, TimestepEmbedding
from ovis_image import OvisImageAttention, pack_latents, prepare_latent_image_ids


class BriaAttention(OvisImageAttention):
    """BriaAttention with BriaAttnProcessor: the same constructor and processor arithmetic as OvisImageAttention
    (Flux's, line for line); called here without an attention mask."""


class BriaEmbedND(BriaFiboEmbedND):
    """The same code as BriaFiboEmbedND (f64 tables on the CPU, cos / sin interleaved, axes joined)."""


class BriaTimesteps(BriaFiboTimesteps):
    """The same code as BriaFiboTimesteps (get_timestep_embedding with max_period = time_theta)."""


class BriaTimestepProjEmbeddings(nn.Module):
    def __init__(self, embedding_dim, time_theta):
        super().__init__()
        self.time_proj = BriaTimesteps(num_channels=256, flip_sin_to_cos=True, downscale_freq_shift=0,
                                       time_theta=time_theta)
        self.timestep_embedder = TimestepEmbedding(in_channels=256, time_embed_dim=embedding_dim)

    def forward(self, timestep, dtype):
        timesteps_proj = self.time_proj(timestep)
        timesteps_emb = self.timestep_embedder(timesteps_proj.to(dtype=dtype))  # (N, D)
        return timesteps_emb


class BriaTransformerBlock(nn.Module):
    def __init__(self, dim, num_attention_heads, attention_head_dim, qk_norm="rms_norm", eps=1e-6):
        super().__init__()
        self.norm1 = AdaLayerNormZero(dim)
        self.norm1_context = AdaLayerNormZero(dim)
        self.attn = BriaAttention(query_dim=dim, added_kv_proj_dim=dim, dim_head=attention_head_dim,
                                  heads=num_attention_heads, out_dim=dim, context_pre_only=False, bias=True, eps=eps)
        self.norm2 = nn.LayerNorm(dim, elementwise_affine=False, eps=1e-6)
        self.ff = FeedForward(dim=dim, dim_out=dim, activation_fn="gelu-approximate")
        self.norm2_context = nn.LayerNorm(dim, elementwise_affine=False, eps=1e-6)
        self.ff_context = FeedForward(dim=dim, dim_out=dim, activation_fn="gelu-approximate")

    def forward(self, hidden_states, encoder_hidden_states, temb, image_rotary_emb=None, attention_kwargs=None):
        norm_hidden_states, gate_msa, shift_mlp, scale_mlp, gate_mlp = self.norm1(hidden_states, emb=temb)

        norm_encoder_hidden_states, c_gate_msa, c_shift_mlp, c_scale_mlp, c_gate_mlp = self.norm1_context(
            encoder_hidden_states, emb=temb)
        attention_kwargs = attention_kwargs or {}

        # Attention.
        attention_outputs = self.attn(hidden_states=norm_hidden_states,
                                      encoder_hidden_states=norm_encoder_hidden_states,
                                      image_rotary_emb=image_rotary_emb, **attention_kwargs)

        if len(attention_outputs) == 2:
            attn_output, context_attn_output = attention_outputs
        elif len(attention_outputs) == 3:
            attn_output, context_attn_output, ip_attn_output = attention_outputs

        # Process attention outputs for the `hidden_states`.
        attn_output = gate_msa.unsqueeze(1) * attn_output
        hidden_states = hidden_states + attn_output

        norm_hidden_states = self.norm2(hidden_states)
        norm_hidden_states = norm_hidden_states * (1 + scale_mlp[:, None]) + shift_mlp[:, None]

        ff_output = self.ff(norm_hidden_states)
        ff_output = gate_mlp.unsqueeze(1) * ff_output

        hidden_states = hidden_states + ff_output
        if len(attention_outputs) == 3:
            hidden_states = hidden_states + ip_attn_output

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


class BriaSingleTransformerBlock(nn.Module):
    def __init__(self, dim, num_attention_heads, attention_head_dim, mlp_ratio=4.0):
        super().__init__()
        self.mlp_hidden_dim = int(dim * mlp_ratio)
        self.norm = AdaLayerNormZeroSingle(dim)
        self.proj_mlp = nn.Linear(dim, self.mlp_hidden_dim)
        self.act_mlp = nn.GELU(approximate="tanh")
        self.proj_out = nn.Linear(dim + self.mlp_hidden_dim, dim)
        self.attn = BriaAttention(query_dim=dim, dim_head=attention_head_dim, heads=num_attention_heads, out_dim=dim,
                                  bias=True, eps=1e-6, pre_only=True)

    def forward(self, hidden_states, encoder_hidden_states, temb, image_rotary_emb=None, attention_kwargs=None):
        text_seq_len = encoder_hidden_states.shape[1]
        hidden_states = torch.cat([encoder_hidden_states, hidden_states], dim=1)

        residual = hidden_states
        norm_hidden_states, gate = self.norm(hidden_states, emb=temb)
        mlp_hidden_states = self.act_mlp(self.proj_mlp(norm_hidden_states))
        attention_kwargs = attention_kwargs or {}
        attn_output = self.attn(hidden_states=norm_hidden_states, image_rotary_emb=image_rotary_emb,
                                **attention_kwargs)

        hidden_states = torch.cat([attn_output, mlp_hidden_states], dim=2)
        gate = gate.unsqueeze(1)
        hidden_states = gate * self.proj_out(hidden_states)
        hidden_states = residual + hidden_states
        if hidden_states.dtype == torch.float16:
            hidden_states = hidden_states.clip(-65504, 65504)

        encoder_hidden_states, hidden_states = hidden_states[:, :text_seq_len], hidden_states[:, text_seq_len:]
        return encoder_hidden_states, hidden_states


class BriaTransformer2DModel(nn.Module):
    def __init__(self, patch_size=1, in_channels=64, num_layers=19, num_single_layers=38, attention_head_dim=128,
                 num_attention_heads=24, joint_attention_dim=4096, pooled_projection_dim=None, guidance_embeds=False,
                 axes_dims_rope=(16, 56, 56), rope_theta=10000, time_theta=10000):
        super().__init__()
        assert not guidance_embeds
        self.out_channels = in_channels
        self.inner_dim = num_attention_heads * attention_head_dim

        self.pos_embed = BriaEmbedND(theta=rope_theta, axes_dim=axes_dims_rope)

        self.time_embed = BriaTimestepProjEmbeddings(embedding_dim=self.inner_dim, time_theta=time_theta)

        self.context_embedder = nn.Linear(joint_attention_dim, self.inner_dim)
        self.x_embedder = torch.nn.Linear(in_channels, self.inner_dim)

        self.transformer_blocks = nn.ModuleList([
            BriaTransformerBlock(dim=self.inner_dim, num_attention_heads=num_attention_heads,
                                 attention_head_dim=attention_head_dim) for _ in range(num_layers)])

        self.single_transformer_blocks = nn.ModuleList([
            BriaSingleTransformerBlock(dim=self.inner_dim, num_attention_heads=num_attention_heads,
                                       attention_head_dim=attention_head_dim) for _ in range(num_single_layers)])

        self.norm_out = AdaLayerNormContinuous(self.inner_dim, self.inner_dim, elementwise_affine=False, eps=1e-6)
        self.proj_out = nn.Linear(self.inner_dim, patch_size * patch_size * self.out_channels, bias=True)

    def forward(self, hidden_states, encoder_hidden_states=None, pooled_projections=None, timestep=None,
                img_ids=None, txt_ids=None, guidance=None, attention_kwargs=None, return_dict=True,
                controlnet_block_samples=None, controlnet_single_block_samples=None):
        # attention_kwargs None: lora_scale 1.0, no PEFT scaling
        hidden_states = self.x_embedder(hidden_states)

        timestep = timestep.to(hidden_states.dtype)
        if guidance is not None:
            guidance = guidance.to(hidden_states.dtype)
        else:
            guidance = None

        temb = self.time_embed(timestep, dtype=hidden_states.dtype)

        if guidance:
            temb += self.guidance_embed(guidance, dtype=hidden_states.dtype)

        encoder_hidden_states = self.context_embedder(encoder_hidden_states)

        if len(txt_ids.shape) == 3:
            txt_ids = txt_ids[0]

        if len(img_ids.shape) == 3:
            img_ids = img_ids[0]

        ids = torch.cat((txt_ids, img_ids), dim=0)
        image_rotary_emb = self.pos_embed(ids)

        for index_block, block in enumerate(self.transformer_blocks):
            encoder_hidden_states, hidden_states = block(hidden_states=hidden_states,
                                                         encoder_hidden_states=encoder_hidden_states, temb=temb,
                                                         image_rotary_emb=image_rotary_emb)

        for index_block, block in enumerate(self.single_transformer_blocks):
            encoder_hidden_states, hidden_states = block(hidden_states=hidden_states,
                                                         encoder_hidden_states=encoder_hidden_states, temb=temb,
                                                         image_rotary_emb=image_rotary_emb)

        hidden_states = self.norm_out(hidden_states, temb)
        output = self.proj_out(hidden_states)
        return (output,)


def build():
    # Small Bria: 2 heads of 16 (RoPE axes 4+6+6), one double- and two single-stream blocks, in_channels 16 (4 latent
    # channels packed 2x2; 64 upstream), a 16-wide caption (T5's 4096 upstream).
    return BriaTransformer2DModel(patch_size=1, in_channels=16, num_layers=1, num_single_layers=2,
                                  attention_head_dim=16, num_attention_heads=2, joint_attention_dim=16,
                                  axes_dims_rope=(4, 6, 6))


GUIDANCE_SCALE = 5.0  # BriaPipeline's default


def inputs(g):
    n, valid = 6, 3  # max_sequence_length 6: 3 encoded tokens, then _get_t5_prompt_embeds' zero rows
    enc = torch.randn((1, valid, 16), generator=g)
    padding = torch.zeros((1, n - valid, 16), dtype=enc.dtype)
    prompt_embeds = torch.concat([enc, padding], dim=1)
    lat = torch.randn((1, 4, 4, 8), generator=g)  # prepare_latents: (B, C, 2·(H//16), 2·(W//16))
    latents = pack_latents(lat, 1, 4, 4, 8)
    # encode_prompt: text_ids zeros (B, S, 3); _prepare_latent_image_ids (B, h·w, 3); both cut to 2-D by __call__
    text_ids = torch.zeros(1, n, 3)[0]
    latent_image_ids = prepare_latent_image_ids(2, 4)
    return {"encoder_hidden_states": prompt_embeds, "txt_ids": text_ids, "img_ids": latent_image_ids,
            "noise": latents}


def call(model, x, sigma, c):
    # BriaPipeline with guidance 5: [negative (zeros_like), prompt] and the latents twice; t = sigma·1000
    prompt_embeds = c["encoder_hidden_states"]
    negative_prompt_embeds = torch.zeros_like(prompt_embeds)
    prompt_embeds = torch.cat([negative_prompt_embeds, prompt_embeds], dim=0)
    latent_model_input = torch.cat([x] * 2)
    t = torch.tensor(sigma * 1000.0, dtype=torch.float32)
    timestep = t.expand(latent_model_input.shape[0])
    noise_pred = model(hidden_states=latent_model_input, timestep=timestep, encoder_hidden_states=prompt_embeds,
                       attention_kwargs=None, return_dict=False, txt_ids=c["txt_ids"], img_ids=c["img_ids"])[0]
    noise_pred_uncond, noise_pred_text = noise_pred.chunk(2)
    noise_pred = noise_pred_uncond + GUIDANCE_SCALE * (noise_pred_text - noise_pred_uncond)
    return noise_pred


PRODUCER = dict(
    library_source="replica of huggingface/diffusers transformer_bria.py@7d5682739a1e and the parts it imports "
                   "(torch 1.13); pipeline_bria.py@30faada2d3cd",
    timestep="sigma*1000 float32 as is (BriaPipeline: t.expand(2) of the flow scheduler's t), no guidance input",
    velocity="uncond + 5·(cond − uncond) of the output's halves (guidance_scale 5, the uncond caption all zeros)",
    note="Bria 3.2 MMDiT, one double- and two single-stream blocks, latents (1, 4, 4, 8) packed 2x2 to 8 tokens of "
         "16: classifier-free guidance on a doubled batch whose negative caption is zeros_like(prompt); the caption "
         "zero-padded after 3 tokens to 6 rows, no attention mask; temb = Linear-SiLU-Linear of the cos-first "
         "256-channel sinusoid of t = sigma·1000 (no pooled text, no guidance embedding); AdaLayerNormZero per stream, "
         "joint [text, image] attention with RMSNorm q/k and added q/k per head, interleaved RoPE axes (4, 6, 6) over "
         "ids [text zeros; image (0, row, col)] in f64, gelu-tanh FFNs; single blocks join [text, image] themselves "
         "(attention beside proj_mlp + gelu-tanh, one proj_out, gate, residual) and split the rows on return; "
         "AdaLayerNormContinuous (scale, shift) on the image rows + proj_out")

if __name__ == "__main__":
    capture("bria", build, inputs, call, sys.argv[1], PRODUCER)
