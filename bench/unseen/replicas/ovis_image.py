"""Ovis-Image text-to-image DiT, reimplemented for torch 1.13 (no diffusers here), captured small in f32 on CPU.

Follows huggingface/diffusers src/diffusers/models/transformers/transformer_ovis_image.py at
311743206a0b8c5e1abb1d29812224675864670b (OvisImageTransformer2DModel, OvisImageTransformerBlock,
OvisImageSingleTransformerBlock, OvisImageAttention with OvisImageAttnProcessor's __call__ as its forward,
OvisImagePosEmbed) with the parts it imports: attention.py (FeedForward with "swiglu"), activations.py (SwiGLU),
embeddings.py (Timesteps, TimestepEmbedding, get_1d_rotary_pos_embed with use_real and repeat_interleave_real,
apply_rotary_emb with use_real and sequence_dim 1), normalization.py (AdaLayerNormZero, AdaLayerNormZeroSingle,
AdaLayerNormContinuous): the same module tree, parameter names and shapes, and call boundaries; the arithmetic line
for line. Stand-ins for what torch 1.13 lacks: torch.nn.RMSNorm (x·rsqrt(mean x² + eps)·weight, as its composite
does in f32) and dispatch_attention_fn (SDPA's math on [B, L, H, D], default scale, no mask). The constructs it
shows: a Flux-style MMDiT whose single-stream blocks gate their MLP (proj_mlp to 2× width split [value, gate],
silu(gate)·value) beside the attention before one proj_out over [attention, MLP]; SwiGLU FFNs (value first, gate
second, from one linear) in the double-stream blocks; an RMSNorm on the caption before its projection; text ids
(0, l, l) beside image ids (0, h, w).

Pipeline as OvisImagePipeline (pipeline_ovis_image.py at 04c89da6d7be3c9a3c96c9420eed528fe430542f) calls it with
guidance_scale 1 (no second, unconditional call): latents packed 2x2 (B, C, H, W) -> (B, H/2·W/2, 4C), timestep =
t / 1000 with t = σ·1000 (the model multiplies by 1000 again), text ids (0, l, l), image ids (0, h, w), the caption's
padding rows zero (prompt_embeds · attention_mask), velocity the output as is.

usage: /usr/bin/python3 bench/unseen/replicas/ovis_image.py OUTDIR
"""
import sys

import torch
import torch.nn as nn

from run import capture, get_timestep_embedding, sdpa
from flux2 import RMSNorm, apply_rotary_emb, attention, get_1d_rotary_pos_embed


class SwiGLU(nn.Module):
    """activations.SwiGLU(dim_in, dim_out, bias)."""

    def __init__(self, dim_in, dim_out, bias=True):
        super().__init__()
        self.proj = nn.Linear(dim_in, dim_out * 2, bias=bias)
        self.activation = nn.SiLU()

    def forward(self, hidden_states):
        hidden_states = self.proj(hidden_states)
        hidden_states, gate = hidden_states.chunk(2, dim=-1)
        return hidden_states * self.activation(gate)


class FeedForward(nn.Module):
    """attention.FeedForward(dim, dim_out, mult 4, dropout 0, activation_fn "swiglu", bias True)."""

    def __init__(self, dim, dim_out=None, mult=4, dropout=0.0, activation_fn="swiglu", bias=True):
        super().__init__()
        inner_dim = int(dim * mult)
        dim_out = dim_out if dim_out is not None else dim
        assert activation_fn == "swiglu"
        act_fn = SwiGLU(dim, inner_dim, bias=bias)
        self.net = nn.ModuleList([act_fn, nn.Dropout(dropout), nn.Linear(inner_dim, dim_out, bias=bias)])

    def forward(self, hidden_states):
        for module in self.net:
            hidden_states = module(hidden_states)
        return hidden_states


class Timesteps(nn.Module):
    def __init__(self, num_channels, flip_sin_to_cos, downscale_freq_shift, scale=1):
        super().__init__()
        self.num_channels, self.flip_sin_to_cos = num_channels, flip_sin_to_cos
        self.downscale_freq_shift, self.scale = downscale_freq_shift, scale

    def forward(self, timesteps):
        return get_timestep_embedding(timesteps, self.num_channels, flip_sin_to_cos=self.flip_sin_to_cos,
                                      downscale_freq_shift=self.downscale_freq_shift, scale=self.scale)


class TimestepEmbedding(nn.Module):
    def __init__(self, in_channels, time_embed_dim, sample_proj_bias=True):
        super().__init__()
        self.linear_1 = nn.Linear(in_channels, time_embed_dim, sample_proj_bias)
        self.act = nn.SiLU()
        self.linear_2 = nn.Linear(time_embed_dim, time_embed_dim, sample_proj_bias)

    def forward(self, sample):
        return self.linear_2(self.act(self.linear_1(sample)))


class AdaLayerNormZero(nn.Module):
    """norm_type "layer_norm", no class embedding."""

    def __init__(self, embedding_dim, norm_type="layer_norm", bias=True):
        super().__init__()
        self.silu = nn.SiLU()
        self.linear = nn.Linear(embedding_dim, 6 * embedding_dim, bias=bias)
        self.norm = nn.LayerNorm(embedding_dim, elementwise_affine=False, eps=1e-6)

    def forward(self, x, emb=None):
        emb = self.linear(self.silu(emb))
        shift_msa, scale_msa, gate_msa, shift_mlp, scale_mlp, gate_mlp = emb.chunk(6, dim=1)
        x = self.norm(x) * (1 + scale_msa[:, None]) + shift_msa[:, None]
        return x, gate_msa, shift_mlp, scale_mlp, gate_mlp


class AdaLayerNormZeroSingle(nn.Module):
    def __init__(self, embedding_dim, norm_type="layer_norm", bias=True):
        super().__init__()
        self.silu = nn.SiLU()
        self.linear = nn.Linear(embedding_dim, 3 * embedding_dim, bias=bias)
        self.norm = nn.LayerNorm(embedding_dim, elementwise_affine=False, eps=1e-6)

    def forward(self, x, emb=None):
        emb = self.linear(self.silu(emb))
        shift_msa, scale_msa, gate_msa = emb.chunk(3, dim=1)
        x = self.norm(x) * (1 + scale_msa[:, None]) + shift_msa[:, None]
        return x, gate_msa


class AdaLayerNormContinuous(nn.Module):
    def __init__(self, embedding_dim, conditioning_embedding_dim, elementwise_affine=True, eps=1e-5, bias=True):
        super().__init__()
        self.silu = nn.SiLU()
        self.linear = nn.Linear(conditioning_embedding_dim, embedding_dim * 2, bias=bias)
        self.norm = nn.LayerNorm(embedding_dim, eps, elementwise_affine)

    def forward(self, x, conditioning_embedding):
        emb = self.linear(self.silu(conditioning_embedding).to(x.dtype))
        scale, shift = torch.chunk(emb, 2, dim=1)
        return self.norm(x) * (1 + scale)[:, None, :] + shift[:, None, :]




class OvisImageAttention(nn.Module):
    """With OvisImageAttnProcessor's __call__ as its forward (unfused projections)."""

    def __init__(self, query_dim, heads=8, dim_head=64, dropout=0.0, bias=False, added_kv_proj_dim=None,
                 added_proj_bias=True, out_bias=True, eps=1e-5, out_dim=None, context_pre_only=None, pre_only=False,
                 elementwise_affine=True):
        super().__init__()
        self.head_dim = dim_head
        self.inner_dim = out_dim if out_dim is not None else dim_head * heads
        self.query_dim = query_dim
        self.out_dim = out_dim if out_dim is not None else query_dim
        self.context_pre_only = context_pre_only
        self.pre_only = pre_only
        self.heads = out_dim // dim_head if out_dim is not None else heads
        self.added_kv_proj_dim = added_kv_proj_dim
        self.norm_q = RMSNorm(dim_head, eps=eps, elementwise_affine=elementwise_affine)
        self.norm_k = RMSNorm(dim_head, eps=eps, elementwise_affine=elementwise_affine)
        self.to_q = nn.Linear(query_dim, self.inner_dim, bias=bias)
        self.to_k = nn.Linear(query_dim, self.inner_dim, bias=bias)
        self.to_v = nn.Linear(query_dim, self.inner_dim, bias=bias)
        if not self.pre_only:
            self.to_out = nn.ModuleList([nn.Linear(self.inner_dim, self.out_dim, bias=out_bias), nn.Dropout(dropout)])
        if added_kv_proj_dim is not None:
            self.norm_added_q = RMSNorm(dim_head, eps=eps)
            self.norm_added_k = RMSNorm(dim_head, eps=eps)
            self.add_q_proj = nn.Linear(added_kv_proj_dim, self.inner_dim, bias=added_proj_bias)
            self.add_k_proj = nn.Linear(added_kv_proj_dim, self.inner_dim, bias=added_proj_bias)
            self.add_v_proj = nn.Linear(added_kv_proj_dim, self.inner_dim, bias=added_proj_bias)
            self.to_add_out = nn.Linear(self.inner_dim, query_dim, bias=out_bias)

    def forward(self, hidden_states, encoder_hidden_states=None, attention_mask=None, image_rotary_emb=None):
        attn = self
        query = attn.to_q(hidden_states)
        key = attn.to_k(hidden_states)
        value = attn.to_v(hidden_states)
        encoder_query = encoder_key = encoder_value = None
        if encoder_hidden_states is not None and attn.added_kv_proj_dim is not None:
            encoder_query = attn.add_q_proj(encoder_hidden_states)
            encoder_key = attn.add_k_proj(encoder_hidden_states)
            encoder_value = attn.add_v_proj(encoder_hidden_states)
        query = query.unflatten(-1, (attn.heads, -1))
        key = key.unflatten(-1, (attn.heads, -1))
        value = value.unflatten(-1, (attn.heads, -1))
        query = attn.norm_q(query)
        key = attn.norm_k(key)
        if attn.added_kv_proj_dim is not None:
            encoder_query = encoder_query.unflatten(-1, (attn.heads, -1))
            encoder_key = encoder_key.unflatten(-1, (attn.heads, -1))
            encoder_value = encoder_value.unflatten(-1, (attn.heads, -1))
            encoder_query = attn.norm_added_q(encoder_query)
            encoder_key = attn.norm_added_k(encoder_key)
            query = torch.cat([encoder_query, query], dim=1)
            key = torch.cat([encoder_key, key], dim=1)
            value = torch.cat([encoder_value, value], dim=1)
        if image_rotary_emb is not None:
            query = apply_rotary_emb(query, image_rotary_emb, sequence_dim=1)
            key = apply_rotary_emb(key, image_rotary_emb, sequence_dim=1)
        hidden_states = attention(query, key, value, attn_mask=attention_mask)
        hidden_states = hidden_states.flatten(2, 3)
        hidden_states = hidden_states.to(query.dtype)
        if encoder_hidden_states is not None:
            encoder_hidden_states, hidden_states = hidden_states.split_with_sizes(
                [encoder_hidden_states.shape[1], hidden_states.shape[1] - encoder_hidden_states.shape[1]], dim=1)
            hidden_states = attn.to_out[0](hidden_states)
            hidden_states = attn.to_out[1](hidden_states)
            encoder_hidden_states = attn.to_add_out(encoder_hidden_states)
            return hidden_states, encoder_hidden_states
        return hidden_states


class OvisImageSingleTransformerBlock(nn.Module):
    def __init__(self, dim, num_attention_heads, attention_head_dim, mlp_ratio=4.0):
        super().__init__()
        self.mlp_hidden_dim = int(dim * mlp_ratio)
        self.norm = AdaLayerNormZeroSingle(dim)
        self.proj_mlp = nn.Linear(dim, self.mlp_hidden_dim * 2)
        self.act_mlp = nn.SiLU()
        self.proj_out = nn.Linear(dim + self.mlp_hidden_dim, dim)
        self.attn = OvisImageAttention(query_dim=dim, dim_head=attention_head_dim, heads=num_attention_heads,
                                       out_dim=dim, bias=True, eps=1e-6, pre_only=True)

    def forward(self, hidden_states, encoder_hidden_states, temb, image_rotary_emb=None, joint_attention_kwargs=None):
        text_seq_len = encoder_hidden_states.shape[1]
        hidden_states = torch.cat([encoder_hidden_states, hidden_states], dim=1)
        residual = hidden_states
        norm_hidden_states, gate = self.norm(hidden_states, emb=temb)
        mlp_hidden_states, mlp_hidden_gate = torch.split(self.proj_mlp(norm_hidden_states),
                                                         [self.mlp_hidden_dim, self.mlp_hidden_dim], dim=-1)
        mlp_hidden_states = self.act_mlp(mlp_hidden_gate) * mlp_hidden_states
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


class OvisImageTransformerBlock(nn.Module):
    def __init__(self, dim, num_attention_heads, attention_head_dim, qk_norm="rms_norm", eps=1e-6):
        super().__init__()
        self.norm1 = AdaLayerNormZero(dim)
        self.norm1_context = AdaLayerNormZero(dim)
        self.attn = OvisImageAttention(query_dim=dim, added_kv_proj_dim=dim, dim_head=attention_head_dim,
                                       heads=num_attention_heads, out_dim=dim, context_pre_only=False, bias=True,
                                       eps=eps)
        self.norm2 = nn.LayerNorm(dim, elementwise_affine=False, eps=1e-6)
        self.ff = FeedForward(dim=dim, dim_out=dim, activation_fn="swiglu")
        self.norm2_context = nn.LayerNorm(dim, elementwise_affine=False, eps=1e-6)
        self.ff_context = FeedForward(dim=dim, dim_out=dim, activation_fn="swiglu")

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


class OvisImagePosEmbed(nn.Module):
    def __init__(self, theta, axes_dim):
        super().__init__()
        self.theta = theta
        self.axes_dim = axes_dim

    def forward(self, ids):
        n_axes = ids.shape[-1]
        cos_out = []
        sin_out = []
        pos = ids.float()
        freqs_dtype = torch.float64  # CPU (not mps / npu)
        for i in range(n_axes):
            cos, sin = get_1d_rotary_pos_embed(self.axes_dim[i], pos[:, i], theta=self.theta, freqs_dtype=freqs_dtype)
            cos_out.append(cos)
            sin_out.append(sin)
        freqs_cos = torch.cat(cos_out, dim=-1).to(ids.device)
        freqs_sin = torch.cat(sin_out, dim=-1).to(ids.device)
        return freqs_cos, freqs_sin


class OvisImageTransformer2DModel(nn.Module):
    def __init__(self, patch_size=1, in_channels=64, out_channels=64, num_layers=6, num_single_layers=27,
                 attention_head_dim=128, num_attention_heads=24, joint_attention_dim=2048, axes_dims_rope=(16, 56, 56)):
        super().__init__()
        self.out_channels = out_channels or in_channels
        self.inner_dim = num_attention_heads * attention_head_dim
        self.pos_embed = OvisImagePosEmbed(theta=10000, axes_dim=axes_dims_rope)
        self.time_proj = Timesteps(num_channels=256, flip_sin_to_cos=True, downscale_freq_shift=0)
        self.timestep_embedder = TimestepEmbedding(in_channels=256, time_embed_dim=self.inner_dim)
        self.context_embedder_norm = RMSNorm(joint_attention_dim, eps=1e-6)
        self.context_embedder = nn.Linear(joint_attention_dim, self.inner_dim)
        self.x_embedder = nn.Linear(in_channels, self.inner_dim)
        self.transformer_blocks = nn.ModuleList([
            OvisImageTransformerBlock(dim=self.inner_dim, num_attention_heads=num_attention_heads,
                                      attention_head_dim=attention_head_dim) for _ in range(num_layers)])
        self.single_transformer_blocks = nn.ModuleList([
            OvisImageSingleTransformerBlock(dim=self.inner_dim, num_attention_heads=num_attention_heads,
                                            attention_head_dim=attention_head_dim) for _ in range(num_single_layers)])
        self.norm_out = AdaLayerNormContinuous(self.inner_dim, self.inner_dim, elementwise_affine=False, eps=1e-6)
        self.proj_out = nn.Linear(self.inner_dim, patch_size * patch_size * self.out_channels, bias=True)

    def forward(self, hidden_states, encoder_hidden_states=None, timestep=None, img_ids=None, txt_ids=None,
                return_dict=True):
        hidden_states = self.x_embedder(hidden_states)
        timestep = timestep.to(hidden_states.dtype) * 1000
        timesteps_proj = self.time_proj(timestep)
        temb = self.timestep_embedder(timesteps_proj.to(dtype=hidden_states.dtype))
        encoder_hidden_states = self.context_embedder_norm(encoder_hidden_states)
        encoder_hidden_states = self.context_embedder(encoder_hidden_states)
        if txt_ids.ndim == 3:
            txt_ids = txt_ids[0]
        if img_ids.ndim == 3:
            img_ids = img_ids[0]
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
    # Small Ovis-Image: 2 heads of 16 (RoPE axes 4+6+6), one double- and one single-stream block, in_channels 16 (4
    # latent channels packed 2x2), a 16-wide caption.
    return OvisImageTransformer2DModel(patch_size=1, in_channels=16, out_channels=16, num_layers=1, num_single_layers=1,
                                       attention_head_dim=16, num_attention_heads=2, joint_attention_dim=16,
                                       axes_dims_rope=(4, 6, 6))


def prepare_latent_image_ids(height, width):
    latent_image_ids = torch.zeros(height, width, 3)
    latent_image_ids[..., 1] = latent_image_ids[..., 1] + torch.arange(height)[:, None]
    latent_image_ids[..., 2] = latent_image_ids[..., 2] + torch.arange(width)[None, :]
    h, w, c = latent_image_ids.shape
    return latent_image_ids.reshape(h * w, c)


def pack_latents(latents, batch_size, num_channels_latents, height, width):
    latents = latents.view(batch_size, num_channels_latents, height // 2, 2, width // 2, 2)
    latents = latents.permute(0, 2, 4, 1, 3, 5)
    return latents.reshape(batch_size, (height // 2) * (width // 2), num_channels_latents * 4)


def inputs(g):
    n = 4
    txt = torch.randn((1, n, 16), generator=g)
    mask = torch.ones(1, n)
    mask[:, n - 1:] = 0
    txt = txt * mask[..., None]  # prompt_embeds * attention_mask[..., None]
    text_ids = torch.zeros(n, 3)
    text_ids[..., 1] = text_ids[..., 1] + torch.arange(n)[None, :]
    text_ids[..., 2] = text_ids[..., 2] + torch.arange(n)[None, :]
    lat = torch.randn((1, 4, 8, 8), generator=g)
    return {"encoder_hidden_states": txt, "txt_ids": text_ids, "img_ids": prepare_latent_image_ids(4, 4),
            "noise": pack_latents(lat, 1, 4, 8, 8)}


def call(model, x, sigma, c):
    t = torch.tensor([sigma * 1000.0], dtype=torch.float32).expand(x.shape[0]).to(x.dtype)
    return model(hidden_states=x, timestep=t / 1000, encoder_hidden_states=c["encoder_hidden_states"],
                 txt_ids=c["txt_ids"], img_ids=c["img_ids"], return_dict=False)[0]


PRODUCER = dict(
    library_source="replica of huggingface/diffusers transformer_ovis_image.py@311743206a0b and the parts it "
                   "imports (torch 1.13)",
    timestep="sigma float32 (OvisImagePipeline: timestep / 1000 of sigma*1000; the model scales by 1000)",
    velocity="model output as is (flow velocity), not negated",
    note="Ovis-Image MMDiT, one double- and one single-stream block: AdaLayerNormZero (shift, scale, gate, shift, "
         "scale, gate) with (1 + scale), x + gate·y; joint [text, image] attention, RMSNorm q/k (and added q/k) "
         "per head, RoPE interleaved from ids [text (0, l, l); image (0, h, w)], axes (4, 6, 6), theta 10000; "
         "SwiGLU FFNs (proj -> value·silu(gate), value first); single block: AdaLayerNormZeroSingle, proj_mlp to "
         "2x split [value, gate], silu(gate)·value beside the attention, proj_out over [attention, mlp], "
         "gate·proj_out + residual; RMSNorm (eps 1e-6) on the caption before context_embedder; cos-first sinusoid "
         "of 1000 t -> TimestepEmbedding; AdaLayerNormContinuous [scale, shift] + proj_out; packed 2x2 latents")

if __name__ == "__main__":
    capture("ovis_image", build, inputs, call, sys.argv[1], PRODUCER)
