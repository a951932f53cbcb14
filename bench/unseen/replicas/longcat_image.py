"""LongCat-Image text-to-image DiT, reimplemented for torch 1.13 (no diffusers here), captured small in f32 on CPU.

Follows huggingface/diffusers src/diffusers/models/transformers/transformer_longcat_image.py at
071190daca865a4d04deac0e02cda5b8c5d6f6fa (LongCatImageTransformer2DModel, LongCatImageTransformerBlock,
LongCatImageSingleTransformerBlock, LongCatImageAttention with LongCatImageAttnProcessor's __call__ as its forward,
LongCatImagePosEmbed, LongCatImageTimestepEmbeddings) with the parts it imports: attention.py (FeedForward with
"gelu-approximate"), activations.py (GELU), embeddings.py (Timesteps, TimestepEmbedding, get_1d_rotary_pos_embed with
use_real and repeat_interleave_real, apply_rotary_emb with use_real and sequence_dim 1), normalization.py
(AdaLayerNormZero, AdaLayerNormZeroSingle, AdaLayerNormContinuous): the same module tree, parameter names and shapes,
and call boundaries; the arithmetic line for line. LongCatImageAttention's code is OvisImageAttention's (imported
from ovis_image.py, which follows the same processor line for line). Stand-ins for what torch 1.13 lacks:
torch.nn.RMSNorm and dispatch_attention_fn (SDPA's math on [B, L, H, D], default scale, no mask). The constructs it
shows: RoPE ids with a modality axis and offset positions (text (0, l, l); image (1, h + 512, w + 512): the image
grid starts after the pipeline's 512 text positions), frequencies in f64 on large angles; otherwise a Flux-style
MMDiT without pooled text or guidance (gelu-tanh FFNs, a parallel single-stream block).

Pipeline as LongCatImagePipeline (pipeline_longcat_image.py at 0179313751d4229cab5dc01de7187cb496a4c76e) calls it
with guidance_scale 1 (no unconditional call, so no CFG renorm) and prompt_embeds given (no prompt rewrite):
num_channels_latents 16 packed 2x2 (B, 16, H, W) -> (B, H/2·W/2, 64), timestep = t / 1000 with t = σ·1000 (the model
multiplies by 1000 again), text ids prepare_pos_ids(0, "text", (0, 0)), image ids prepare_pos_ids(1, "image",
(512, 512)), velocity the output as is.

usage: /usr/bin/python3 bench/unseen/replicas/longcat_image.py OUTDIR
"""
import sys

import torch
import torch.nn as nn

from run import capture
from flux2 import get_1d_rotary_pos_embed
from hunyuanimage21 import (AdaLayerNormContinuous, AdaLayerNormZero, AdaLayerNormZeroSingle, FeedForward,
                            TimestepEmbedding, Timesteps)
from ovis_image import OvisImageAttention, pack_latents


class LongCatImageAttention(OvisImageAttention):
    """The same constructor and processor as OvisImageAttention (upstream's code is identical)."""


class LongCatImageSingleTransformerBlock(nn.Module):
    def __init__(self, dim, num_attention_heads, attention_head_dim, mlp_ratio=4.0):
        super().__init__()
        self.mlp_hidden_dim = int(dim * mlp_ratio)
        self.norm = AdaLayerNormZeroSingle(dim)
        self.proj_mlp = nn.Linear(dim, self.mlp_hidden_dim)
        self.act_mlp = nn.GELU(approximate="tanh")
        self.proj_out = nn.Linear(dim + self.mlp_hidden_dim, dim)
        self.attn = LongCatImageAttention(query_dim=dim, dim_head=attention_head_dim, heads=num_attention_heads,
                                          out_dim=dim, bias=True, eps=1e-6, pre_only=True)

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


class LongCatImageTransformerBlock(nn.Module):
    def __init__(self, dim, num_attention_heads, attention_head_dim, qk_norm="rms_norm", eps=1e-6):
        super().__init__()
        self.norm1 = AdaLayerNormZero(dim)
        self.norm1_context = AdaLayerNormZero(dim)
        self.attn = LongCatImageAttention(query_dim=dim, added_kv_proj_dim=dim, dim_head=attention_head_dim,
                                          heads=num_attention_heads, out_dim=dim, context_pre_only=False, bias=True,
                                          eps=eps)
        self.norm2 = nn.LayerNorm(dim, elementwise_affine=False, eps=1e-6)
        self.ff = FeedForward(dim=dim, dim_out=dim, activation_fn="gelu-approximate")
        self.norm2_context = nn.LayerNorm(dim, elementwise_affine=False, eps=1e-6)
        self.ff_context = FeedForward(dim=dim, dim_out=dim, activation_fn="gelu-approximate")

    def forward(self, hidden_states, encoder_hidden_states, temb, image_rotary_emb=None, joint_attention_kwargs=None):
        norm_hidden_states, gate_msa, shift_mlp, scale_mlp, gate_mlp = self.norm1(hidden_states, emb=temb)
        norm_encoder_hidden_states, c_gate_msa, c_shift_mlp, c_scale_mlp, c_gate_mlp = self.norm1_context(
            encoder_hidden_states, emb=temb)
        joint_attention_kwargs = joint_attention_kwargs or {}
        attention_outputs = self.attn(hidden_states=norm_hidden_states,
                                      encoder_hidden_states=norm_encoder_hidden_states,
                                      image_rotary_emb=image_rotary_emb, **joint_attention_kwargs)
        attn_output, context_attn_output = attention_outputs
        attn_output = gate_msa.unsqueeze(1) * attn_output
        hidden_states = hidden_states + attn_output
        norm_hidden_states = self.norm2(hidden_states)
        norm_hidden_states = norm_hidden_states * (1 + scale_mlp[:, None]) + shift_mlp[:, None]
        ff_output = self.ff(norm_hidden_states)
        ff_output = gate_mlp.unsqueeze(1) * ff_output
        hidden_states = hidden_states + ff_output
        context_attn_output = c_gate_msa.unsqueeze(1) * context_attn_output
        encoder_hidden_states = encoder_hidden_states + context_attn_output
        norm_encoder_hidden_states = self.norm2_context(encoder_hidden_states)
        norm_encoder_hidden_states = norm_encoder_hidden_states * (1 + c_scale_mlp[:, None]) + c_shift_mlp[:, None]
        context_ff_output = self.ff_context(norm_encoder_hidden_states)
        encoder_hidden_states = encoder_hidden_states + c_gate_mlp.unsqueeze(1) * context_ff_output
        if encoder_hidden_states.dtype == torch.float16:
            encoder_hidden_states = encoder_hidden_states.clip(-65504, 65504)
        return encoder_hidden_states, hidden_states


class LongCatImagePosEmbed(nn.Module):
    def __init__(self, theta, axes_dim):
        super().__init__()
        self.theta = theta
        self.axes_dim = axes_dim

    def forward(self, ids):
        n_axes = ids.shape[-1]
        cos_out = []
        sin_out = []
        pos = ids.float()
        freqs_dtype = torch.float64  # maybe_adjust_dtype_for_device(float64, cpu)
        for i in range(n_axes):
            cos, sin = get_1d_rotary_pos_embed(self.axes_dim[i], pos[:, i], theta=self.theta, freqs_dtype=freqs_dtype)
            cos_out.append(cos)
            sin_out.append(sin)
        freqs_cos = torch.cat(cos_out, dim=-1).to(ids.device)
        freqs_sin = torch.cat(sin_out, dim=-1).to(ids.device)
        return freqs_cos, freqs_sin


class LongCatImageTimestepEmbeddings(nn.Module):
    def __init__(self, embedding_dim):
        super().__init__()
        self.time_proj = Timesteps(num_channels=256, flip_sin_to_cos=True, downscale_freq_shift=0)
        self.timestep_embedder = TimestepEmbedding(in_channels=256, time_embed_dim=embedding_dim)

    def forward(self, timestep, hidden_dtype):
        timesteps_proj = self.time_proj(timestep)
        return self.timestep_embedder(timesteps_proj.to(dtype=hidden_dtype))


class LongCatImageTransformer2DModel(nn.Module):
    def __init__(self, patch_size=1, in_channels=64, num_layers=19, num_single_layers=38, attention_head_dim=128,
                 num_attention_heads=24, joint_attention_dim=3584, pooled_projection_dim=3584,
                 axes_dims_rope=(16, 56, 56)):
        super().__init__()
        self.out_channels = in_channels
        self.inner_dim = num_attention_heads * attention_head_dim
        self.pooled_projection_dim = pooled_projection_dim
        self.pos_embed = LongCatImagePosEmbed(theta=10000, axes_dim=axes_dims_rope)
        self.time_embed = LongCatImageTimestepEmbeddings(embedding_dim=self.inner_dim)
        self.context_embedder = nn.Linear(joint_attention_dim, self.inner_dim)
        self.x_embedder = nn.Linear(in_channels, self.inner_dim)
        self.transformer_blocks = nn.ModuleList([
            LongCatImageTransformerBlock(dim=self.inner_dim, num_attention_heads=num_attention_heads,
                                         attention_head_dim=attention_head_dim) for _ in range(num_layers)])
        self.single_transformer_blocks = nn.ModuleList([
            LongCatImageSingleTransformerBlock(dim=self.inner_dim, num_attention_heads=num_attention_heads,
                                               attention_head_dim=attention_head_dim) for _ in range(num_single_layers)])
        self.norm_out = AdaLayerNormContinuous(self.inner_dim, self.inner_dim, elementwise_affine=False, eps=1e-6)
        self.proj_out = nn.Linear(self.inner_dim, patch_size * patch_size * self.out_channels, bias=True)

    def forward(self, hidden_states, encoder_hidden_states=None, timestep=None, img_ids=None, txt_ids=None,
                guidance=None, return_dict=True):
        hidden_states = self.x_embedder(hidden_states)
        timestep = timestep.to(hidden_states.dtype) * 1000
        temb = self.time_embed(timestep, hidden_states.dtype)
        encoder_hidden_states = self.context_embedder(encoder_hidden_states)
        ids = torch.cat((txt_ids, img_ids), dim=0)
        image_rotary_emb = self.pos_embed(ids)
        for block in self.transformer_blocks:
            encoder_hidden_states, hidden_states = block(hidden_states=hidden_states,
                                                         encoder_hidden_states=encoder_hidden_states, temb=temb,
                                                         image_rotary_emb=image_rotary_emb)
        for block in self.single_transformer_blocks:
            encoder_hidden_states, hidden_states = block(hidden_states=hidden_states,
                                                         encoder_hidden_states=encoder_hidden_states, temb=temb,
                                                         image_rotary_emb=image_rotary_emb)
        hidden_states = self.norm_out(hidden_states, temb)
        output = self.proj_out(hidden_states)
        return (output,)


def build():
    # Small LongCat-Image: 2 heads of 16 (RoPE axes 4+6+6), one double- and one single-stream block, in_channels 64
    # (the pipeline's fixed 16 latent channels packed 2x2), a 16-wide caption.
    return LongCatImageTransformer2DModel(patch_size=1, in_channels=64, num_layers=1, num_single_layers=1,
                                          attention_head_dim=16, num_attention_heads=2, joint_attention_dim=16,
                                          pooled_projection_dim=16, axes_dims_rope=(4, 6, 6))


def prepare_pos_ids(modality_id=0, type="text", start=(0, 0), num_token=None, height=None, width=None):
    if type == "text":
        pos_ids = torch.zeros(num_token, 3)
        pos_ids[..., 0] = modality_id
        pos_ids[..., 1] = torch.arange(num_token) + start[0]
        pos_ids[..., 2] = torch.arange(num_token) + start[1]
    else:
        pos_ids = torch.zeros(height, width, 3)
        pos_ids[..., 0] = modality_id
        pos_ids[..., 1] = pos_ids[..., 1] + torch.arange(height)[:, None] + start[0]
        pos_ids[..., 2] = pos_ids[..., 2] + torch.arange(width)[None, :] + start[1]
        pos_ids = pos_ids.reshape(height * width, 3)
    return pos_ids


TOKENIZER_MAX_LENGTH = 512  # LongCatImagePipeline.tokenizer_max_length: where the image positions start


def inputs(g):
    n = 4
    txt = torch.randn((1, n, 16), generator=g)
    lat = torch.randn((1, 16, 8, 8), generator=g)
    return {"encoder_hidden_states": txt,
            "txt_ids": prepare_pos_ids(modality_id=0, type="text", start=(0, 0), num_token=n),
            "img_ids": prepare_pos_ids(modality_id=1, type="image", start=(TOKENIZER_MAX_LENGTH, TOKENIZER_MAX_LENGTH),
                                       height=4, width=4),
            "noise": pack_latents(lat, 1, 16, 8, 8)}


def call(model, x, sigma, c):
    t = torch.tensor([sigma * 1000.0], dtype=torch.float32).expand(x.shape[0]).to(x.dtype)
    return model(hidden_states=x, timestep=t / 1000, guidance=None, encoder_hidden_states=c["encoder_hidden_states"],
                 txt_ids=c["txt_ids"], img_ids=c["img_ids"], return_dict=False)[0]


PRODUCER = dict(
    library_source="replica of huggingface/diffusers transformer_longcat_image.py@071190daca86 and the parts it "
                   "imports (torch 1.13)",
    timestep="sigma float32 (LongCatImagePipeline: timestep / 1000 of sigma*1000; the model scales by 1000)",
    velocity="model output as is (flow velocity), not negated",
    note="LongCat-Image MMDiT, one double- and one single-stream block: AdaLayerNormZero (shift, scale, gate, shift, "
         "scale, gate) with (1 + scale), x + gate·y; joint [text, image] attention, RMSNorm q/k (and added q/k) per "
         "head, RoPE interleaved from ids [text (0, l, l); image (1, h + 512, w + 512)] (f64 frequencies), axes "
         "(4, 6, 6), theta 10000; gelu-tanh FFNs; single block: AdaLayerNormZeroSingle, proj_mlp + gelu-tanh "
         "beside the attention, proj_out over [attention, mlp], gate·proj_out + residual; cos-first sinusoid of "
         "1000 t -> TimestepEmbedding; AdaLayerNormContinuous [scale, shift] + proj_out; packed 2x2 latents")

if __name__ == "__main__":
    capture("longcat_image", build, inputs, call, sys.argv[1], PRODUCER)
