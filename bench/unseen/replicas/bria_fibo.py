"""Bria FIBO text-to-image DiT, reimplemented for torch 1.13 (no diffusers here), captured small in f32 on CPU.

Follows huggingface/diffusers src/diffusers/models/transformers/transformer_bria_fibo.py at
080e8d8a8c53955decac43e432954a70872b66b6 (BriaFiboTransformer2DModel, BriaFiboTransformerBlock,
BriaFiboSingleTransformerBlock, BriaFiboAttention with BriaFiboAttnProcessor's __call__ as its forward, the single
block's Attention with BriaAttnProcessor (the same Flux processor: unfused to_q/to_k/to_v, RMSNorm q/k per head,
pre_only), BriaFiboEmbedND, BriaFiboTextProjection, BriaFiboTimesteps, BriaFiboTimestepProjEmbeddings) with the parts
it imports: attention.py (FeedForward with "gelu-approximate"), embeddings.py (TimestepEmbedding,
get_timestep_embedding, get_1d_rotary_pos_embed with use_real and repeat_interleave_real, apply_rotary_emb with
use_real and sequence_dim 1), normalization.py (AdaLayerNormZero, AdaLayerNormZeroSingle, AdaLayerNormContinuous):
the same module tree, parameter names and shapes, and call boundaries; the arithmetic line for line. The attention
modules are OvisImageAttention's (imported from ovis_image.py: the same constructor and processor). Stand-ins for
what torch 1.13 lacks: torch.nn.RMSNorm and dispatch_attention_fn (SDPA's math on [B, L, H, D], default scale, the
pipeline's additive mask). The construct it shows: every block's caption rebuilt before the block from the running
caption's first half of the channels and that block's own bias-free projection (caption_projection[i], text width
-> inner/2) of one entry of a list of text-encoder hidden layers, cat([ehs[..., :D/2], proj_i(layer_i)], -1), in
the single-stream blocks too (the joint rows split after each, the caption rows rebuilt); otherwise a Flux-style
MMDiT without pooled text or guidance (gelu-tanh FFNs, a parallel single-stream block, the timestep σ·1000 as given).

Pipeline as BriaFiboPipeline (pipeline_bria_fibo.py, its __call__ and get_prompt_embeds as the index holds them)
calls it with guidance_scale 1 (no unconditional call): prompt_embeds = cat([hidden_states[-1], hidden_states[-2]],
-1) of the text encoder's hidden states, prompt_layers its last num_layers + num_single_layers hidden states, the
caption mask all ones (one prompt, padding "longest") made a [B, 1, S, S] additive mask (0 where m_i·m_j = 1, else
-inf) over [caption, image] and passed in joint_attention_kwargs; text ids zeros; latents (B, C, H, W) packed
without patching (B, H·W, C), image ids (0, h, w); timestep t = σ·1000 as is; velocity the output as is.

usage: /usr/bin/python3 bench/unseen/replicas/bria_fibo.py OUTDIR
"""
import sys

import torch
import torch.nn as nn

from run import capture, get_timestep_embedding
from flux2 import get_1d_rotary_pos_embed
from hunyuanimage21 import AdaLayerNormContinuous, AdaLayerNormZero, AdaLayerNormZeroSingle, FeedForward, TimestepEmbedding
from ovis_image import OvisImageAttention, prepare_latent_image_ids


class BriaFiboAttention(OvisImageAttention):
    """The same constructor and processor as OvisImageAttention (both Flux's processor, line for line)."""


class Attention(OvisImageAttention):
    """attention_processor.Attention(qk_norm "rms_norm", pre_only) with BriaAttnProcessor: the same parameters
    (to_q, to_k, to_v with bias, norm_q, norm_k) and the same processor arithmetic."""


class BriaFiboEmbedND(nn.Module):
    def __init__(self, theta, axes_dim):
        super().__init__()
        self.theta = theta
        self.axes_dim = axes_dim

    def forward(self, ids):
        n_axes = ids.shape[-1]
        cos_out = []
        sin_out = []
        pos = ids.float()
        freqs_dtype = torch.float64
        for i in range(n_axes):
            cos, sin = get_1d_rotary_pos_embed(self.axes_dim[i], pos[:, i], theta=self.theta, freqs_dtype=freqs_dtype)
            cos_out.append(cos)
            sin_out.append(sin)
        freqs_cos = torch.cat(cos_out, dim=-1).to(ids.device)
        freqs_sin = torch.cat(sin_out, dim=-1).to(ids.device)
        return freqs_cos, freqs_sin


class BriaFiboSingleTransformerBlock(nn.Module):
    def __init__(self, dim, num_attention_heads, attention_head_dim, mlp_ratio=4.0):
        super().__init__()
        self.mlp_hidden_dim = int(dim * mlp_ratio)
        self.norm = AdaLayerNormZeroSingle(dim)
        self.proj_mlp = nn.Linear(dim, self.mlp_hidden_dim)
        self.act_mlp = nn.GELU(approximate="tanh")
        self.proj_out = nn.Linear(dim + self.mlp_hidden_dim, dim)
        self.attn = Attention(query_dim=dim, dim_head=attention_head_dim, heads=num_attention_heads, out_dim=dim,
                              bias=True, eps=1e-6, pre_only=True)

    def forward(self, hidden_states, temb, image_rotary_emb=None, joint_attention_kwargs=None):
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
        return hidden_states


class BriaFiboTextProjection(nn.Module):
    def __init__(self, in_features, hidden_size):
        super().__init__()
        self.linear = nn.Linear(in_features=in_features, out_features=hidden_size, bias=False)

    def forward(self, caption):
        return self.linear(caption)


class BriaFiboTransformerBlock(nn.Module):
    def __init__(self, dim, num_attention_heads, attention_head_dim, qk_norm="rms_norm", eps=1e-6):
        super().__init__()
        self.norm1 = AdaLayerNormZero(dim)
        self.norm1_context = AdaLayerNormZero(dim)
        self.attn = BriaFiboAttention(query_dim=dim, added_kv_proj_dim=dim, dim_head=attention_head_dim,
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


class BriaFiboTimesteps(nn.Module):
    def __init__(self, num_channels, flip_sin_to_cos, downscale_freq_shift, scale=1, time_theta=10000):
        super().__init__()
        self.num_channels = num_channels
        self.flip_sin_to_cos = flip_sin_to_cos
        self.downscale_freq_shift = downscale_freq_shift
        self.scale = scale
        self.time_theta = time_theta

    def forward(self, timesteps):
        return get_timestep_embedding(timesteps, self.num_channels, flip_sin_to_cos=self.flip_sin_to_cos,
                                      downscale_freq_shift=self.downscale_freq_shift, scale=self.scale,
                                      max_period=self.time_theta)


class BriaFiboTimestepProjEmbeddings(nn.Module):
    def __init__(self, embedding_dim, time_theta):
        super().__init__()
        self.time_proj = BriaFiboTimesteps(num_channels=256, flip_sin_to_cos=True, downscale_freq_shift=0,
                                           time_theta=time_theta)
        self.timestep_embedder = TimestepEmbedding(in_channels=256, time_embed_dim=embedding_dim)

    def forward(self, timestep, dtype):
        timesteps_proj = self.time_proj(timestep)
        return self.timestep_embedder(timesteps_proj.to(dtype=dtype))


class BriaFiboTransformer2DModel(nn.Module):
    def __init__(self, patch_size=1, in_channels=64, num_layers=19, num_single_layers=38, attention_head_dim=128,
                 num_attention_heads=24, joint_attention_dim=4096, pooled_projection_dim=None, guidance_embeds=False,
                 axes_dims_rope=(16, 56, 56), rope_theta=10000, time_theta=10000, text_encoder_dim=2048):
        super().__init__()
        assert not guidance_embeds
        self.out_channels = in_channels
        self.inner_dim = num_attention_heads * attention_head_dim
        self.pos_embed = BriaFiboEmbedND(theta=rope_theta, axes_dim=axes_dims_rope)
        self.time_embed = BriaFiboTimestepProjEmbeddings(embedding_dim=self.inner_dim, time_theta=time_theta)
        self.context_embedder = nn.Linear(joint_attention_dim, self.inner_dim)
        self.x_embedder = torch.nn.Linear(in_channels, self.inner_dim)
        self.transformer_blocks = nn.ModuleList([
            BriaFiboTransformerBlock(dim=self.inner_dim, num_attention_heads=num_attention_heads,
                                     attention_head_dim=attention_head_dim) for _ in range(num_layers)])
        self.single_transformer_blocks = nn.ModuleList([
            BriaFiboSingleTransformerBlock(dim=self.inner_dim, num_attention_heads=num_attention_heads,
                                           attention_head_dim=attention_head_dim) for _ in range(num_single_layers)])
        self.norm_out = AdaLayerNormContinuous(self.inner_dim, self.inner_dim, elementwise_affine=False, eps=1e-6)
        self.proj_out = nn.Linear(self.inner_dim, patch_size * patch_size * self.out_channels, bias=True)
        self.caption_projection = nn.ModuleList([
            BriaFiboTextProjection(in_features=text_encoder_dim, hidden_size=self.inner_dim // 2)
            for _ in range(num_layers + num_single_layers)])

    def forward(self, hidden_states, encoder_hidden_states=None, text_encoder_layers=None, pooled_projections=None,
                timestep=None, img_ids=None, txt_ids=None, guidance=None, joint_attention_kwargs=None,
                return_dict=True):
        hidden_states = self.x_embedder(hidden_states)
        timestep = timestep.to(hidden_states.dtype)
        temb = self.time_embed(timestep, dtype=hidden_states.dtype)
        encoder_hidden_states = self.context_embedder(encoder_hidden_states)
        if len(txt_ids.shape) == 3:
            txt_ids = txt_ids[0]
        if len(img_ids.shape) == 3:
            img_ids = img_ids[0]
        ids = torch.cat((txt_ids, img_ids), dim=0)
        image_rotary_emb = self.pos_embed(ids)
        new_text_encoder_layers = []
        for i, text_encoder_layer in enumerate(text_encoder_layers):
            text_encoder_layer = self.caption_projection[i](text_encoder_layer)
            new_text_encoder_layers.append(text_encoder_layer)
        text_encoder_layers = new_text_encoder_layers
        block_id = 0
        for block in self.transformer_blocks:
            current_text_encoder_layer = text_encoder_layers[block_id]
            encoder_hidden_states = torch.cat(
                [encoder_hidden_states[:, :, : self.inner_dim // 2], current_text_encoder_layer], dim=-1)
            block_id += 1
            encoder_hidden_states, hidden_states = block(hidden_states=hidden_states,
                                                         encoder_hidden_states=encoder_hidden_states, temb=temb,
                                                         image_rotary_emb=image_rotary_emb,
                                                         joint_attention_kwargs=joint_attention_kwargs)
        for block in self.single_transformer_blocks:
            current_text_encoder_layer = text_encoder_layers[block_id]
            encoder_hidden_states = torch.cat(
                [encoder_hidden_states[:, :, : self.inner_dim // 2], current_text_encoder_layer], dim=-1)
            block_id += 1
            hidden_states = torch.cat([encoder_hidden_states, hidden_states], dim=1)
            hidden_states = block(hidden_states=hidden_states, temb=temb, image_rotary_emb=image_rotary_emb,
                                  joint_attention_kwargs=joint_attention_kwargs)
            encoder_hidden_states = hidden_states[:, : encoder_hidden_states.shape[1], ...]
            hidden_states = hidden_states[:, encoder_hidden_states.shape[1]:, ...]
        hidden_states = self.norm_out(hidden_states, temb)
        output = self.proj_out(hidden_states)
        return (output,)


NUM_LAYERS, NUM_SINGLE_LAYERS = 1, 2


def build():
    # Small FIBO: 2 heads of 16 (RoPE axes 4+6+6), one double- and two single-stream blocks (the second's caption
    # rebuilt from the first's joint output), 16 latent channels
    # (48 upstream: the Wan 2.2 VAE's, packed without patching), an 8-wide text encoder (prompt_embeds its last two
    # hidden states joined, 16 wide).
    return BriaFiboTransformer2DModel(patch_size=1, in_channels=16, num_layers=NUM_LAYERS,
                                      num_single_layers=NUM_SINGLE_LAYERS, attention_head_dim=16,
                                      num_attention_heads=2, joint_attention_dim=16, axes_dims_rope=(4, 6, 6),
                                      text_encoder_dim=8)


def prepare_attention_mask(attention_mask):
    """BriaFiboPipeline._prepare_attention_mask."""
    attention_matrix = torch.einsum("bi,bj->bij", attention_mask, attention_mask)
    return torch.where(attention_matrix == 1, 0.0, -float("inf"))


def inputs(g):
    n = 4
    # The text encoder's hidden states (embeddings + 3 layers), as output_hidden_states returns them.
    hidden = [torch.randn((1, n, 8), generator=g) for _ in range(4)]
    prompt_embeds = torch.cat([hidden[-1], hidden[-2]], dim=-1)
    prompt_mask = torch.ones(1, n)
    total = NUM_LAYERS + NUM_SINGLE_LAYERS
    prompt_layers = hidden[len(hidden) - total:]
    lat = torch.randn((1, 16, 2, 4), generator=g)
    latents = lat.permute(0, 2, 3, 1).reshape(1, 8, 16)  # _pack_latents_no_patch
    attention_mask = torch.cat([prompt_mask, torch.ones(1, latents.shape[1])], dim=1)
    attention_mask = prepare_attention_mask(attention_mask).unsqueeze(dim=1)
    c = {"encoder_hidden_states": prompt_embeds, "txt_ids": torch.zeros(n, 3), "img_ids": prepare_latent_image_ids(2, 4),
         "attention_mask": attention_mask, "noise": latents}
    for i, layer in enumerate(prompt_layers):
        c[f"text_encoder_layers.{i}"] = layer
    return c


def call(model, x, sigma, c):
    t = torch.tensor([sigma * 1000.0], dtype=torch.float32).expand(x.shape[0]).to(x.dtype)
    layers = [c[f"text_encoder_layers.{i}"] for i in range(NUM_LAYERS + NUM_SINGLE_LAYERS)]
    return model(hidden_states=x, timestep=t, encoder_hidden_states=c["encoder_hidden_states"],
                 text_encoder_layers=layers, joint_attention_kwargs={"attention_mask": c["attention_mask"]},
                 return_dict=False, txt_ids=c["txt_ids"], img_ids=c["img_ids"])[0]


PRODUCER = dict(
    library_source="replica of huggingface/diffusers transformer_bria_fibo.py@080e8d8a8c53 and the parts it "
                   "imports (torch 1.13)",
    timestep="sigma*1000 float32 as is (BriaFiboPipeline passes the scheduler's t)",
    velocity="model output as is (flow velocity), not negated",
    note="Bria FIBO MMDiT, one double- and two single-stream blocks, a 2x4 latent: before every block the caption is rebuilt as "
         "cat([caption[..., :D/2], caption_projection[i](text_encoder_layers[i])], -1) (a bias-free 8 -> 16 "
         "projection of one text-encoder hidden layer per block; prompt_embeds the last two hidden layers joined); "
         "AdaLayerNormZero (shift, scale, gate, shift, scale, gate) with (1 + scale), x + gate·y; joint [text, "
         "image] attention under the pipeline's additive [B, 1, S, S] mask (all 0 here), RMSNorm q/k (and added "
         "q/k) per head, RoPE interleaved from ids [text 0; image (0, h, w)], axes (4, 6, 6), theta 10000; "
         "gelu-tanh FFNs; single block over [caption, image] joined by the model: AdaLayerNormZeroSingle, proj_mlp + "
         "gelu-tanh beside the attention, proj_out over [attention, mlp], gate·proj_out + residual, split after; "
         "cos-first sinusoid of t (max period 10000) -> TimestepEmbedding; AdaLayerNormContinuous [scale, shift] + "
         "proj_out; latents packed without patching")

if __name__ == "__main__":
    capture("bria_fibo", build, inputs, call, sys.argv[1], PRODUCER)
