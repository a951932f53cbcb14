"""FLUX.2 text-to-image DiT, reimplemented for torch 1.13 (no diffusers here), captured small in f32 on CPU.

Follows huggingface/diffusers src/diffusers/models/transformers/transformer_flux2.py at
0047da10a201600b65fbe3e1ceef6d19ac735f3c (Flux2Transformer2DModel, Flux2TransformerBlock, Flux2SingleTransformerBlock,
Flux2Attention with Flux2AttnProcessor's __call__ as its forward, Flux2ParallelSelfAttention with
Flux2ParallelSelfAttnProcessor's, Flux2FeedForward, Flux2SwiGLU, Flux2PosEmbed, Flux2TimestepGuidanceEmbeddings,
Flux2Modulation) with the parts it imports: embeddings.py (Timesteps, TimestepEmbedding, get_1d_rotary_pos_embed with
use_real and repeat_interleave_real, apply_rotary_emb with use_real and sequence_dim 1) and normalization.py
(AdaLayerNormContinuous): the same module tree, parameter names and shapes, and call boundaries; the arithmetic line
for line. Stand-ins for what torch 1.13 lacks: torch.nn.RMSNorm (x·rsqrt(mean x² + eps)·weight, as its composite
does in f32), dispatch_attention_fn (SDPA's math on [B, L, H, D], default scale, no mask), and LayerNorm(bias=False)
without affine (the same module, no parameters either way). The constructs it shows: the modulation is computed
once at model level (three Flux2Modulation linears over SiLU(temb)) and the same shift/scale/gate tensors are passed
to every block as tuples; the single-stream blocks project q/k/v and the SwiGLU MLP's input with one fused linear
and project [attention, MLP] with one fused output linear; SwiGLU MLPs whose gate and value come from one linear
split in halves; no biases anywhere; 4-axis RoPE ids (t, h, w, l) for text and image.

Pipeline as Flux2Pipeline (pipeline_flux2.py at 01f488e6d9c7ea53683fe26e067b82d6960e37f2) calls it: latents packed
(B, C, H, W) -> (B, H·W, C), timestep = t / 1000 with t = σ·1000 (the model multiplies by 1000 again), guidance
4.0 (also multiplied by 1000), txt_ids (0, 0, 0, l), img_ids (0, h, w, 0), velocity the output as is.

usage: /usr/bin/python3 bench/unseen/replicas/flux2.py OUTDIR
"""
import sys

import torch
import torch.nn as nn

from parts import TorchRMSNorm
from run import capture, get_timestep_embedding, sdpa


class RMSNorm(TorchRMSNorm):
    """torch.nn.RMSNorm(dim, eps, elementwise_affine=True) (torch >= 2.4), f32."""


def get_1d_rotary_pos_embed(dim, pos, theta=10000.0, freqs_dtype=torch.float32):
    """use_real=True, repeat_interleave_real=True: (cos, sin), each [len(pos), dim]."""
    assert dim % 2 == 0
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=freqs_dtype, device=pos.device)[: (dim // 2)] / dim))
    freqs = torch.outer(pos, freqs)
    freqs_cos = freqs.cos().repeat_interleave(2, dim=1).float()
    freqs_sin = freqs.sin().repeat_interleave(2, dim=1).float()
    return freqs_cos, freqs_sin


def apply_rotary_emb(x, freqs_cis, sequence_dim=2):
    """use_real=True, use_real_unbind_dim=-1."""
    cos, sin = freqs_cis
    if sequence_dim == 2:
        cos = cos[None, None, :, :]
        sin = sin[None, None, :, :]
    elif sequence_dim == 1:
        cos = cos[None, :, None, :]
        sin = sin[None, :, None, :]
    else:
        raise ValueError(f"Sequence dimension must be 1 or 2, not {sequence_dim}")
    cos, sin = cos.to(x.device), sin.to(x.device)
    x_real, x_imag = x.reshape(*x.shape[:-1], -1, 2).unbind(-1)
    x_rotated = torch.stack([-x_imag, x_real], dim=-1).flatten(3)
    return (x.float() * cos + x_rotated.float() * sin).to(x.dtype)


def attention(query, key, value, attn_mask=None):
    """dispatch_attention_fn on [B, L, H, D] (native backend: SDPA over the heads-first transpose)."""
    out = sdpa(query.transpose(1, 2), key.transpose(1, 2), value.transpose(1, 2), mask=attn_mask)
    return out.transpose(1, 2)


class Flux2SwiGLU(nn.Module):
    def __init__(self):
        super().__init__()
        self.gate_fn = nn.SiLU()

    def forward(self, x):
        x1, x2 = x.chunk(2, dim=-1)
        return self.gate_fn(x1) * x2


class Flux2FeedForward(nn.Module):
    def __init__(self, dim, dim_out=None, mult=3.0, inner_dim=None, bias=False):
        super().__init__()
        if inner_dim is None:
            inner_dim = int(dim * mult)
        dim_out = dim_out or dim
        self.linear_in = nn.Linear(dim, inner_dim * 2, bias=bias)
        self.act_fn = Flux2SwiGLU()
        self.linear_out = nn.Linear(inner_dim, dim_out, bias=bias)

    def forward(self, x):
        return self.linear_out(self.act_fn(self.linear_in(x)))


class Flux2Attention(nn.Module):
    """With Flux2AttnProcessor's __call__ as its forward (unfused projections)."""

    def __init__(self, query_dim, heads=8, dim_head=64, bias=False, added_kv_proj_dim=None, added_proj_bias=True,
                 out_bias=True, eps=1e-5, out_dim=None, elementwise_affine=True):
        super().__init__()
        self.head_dim = dim_head
        self.inner_dim = out_dim if out_dim is not None else dim_head * heads
        self.query_dim = query_dim
        self.out_dim = out_dim if out_dim is not None else query_dim
        self.heads = out_dim // dim_head if out_dim is not None else heads
        self.added_kv_proj_dim = added_kv_proj_dim
        self.to_q = nn.Linear(query_dim, self.inner_dim, bias=bias)
        self.to_k = nn.Linear(query_dim, self.inner_dim, bias=bias)
        self.to_v = nn.Linear(query_dim, self.inner_dim, bias=bias)
        self.norm_q = RMSNorm(dim_head, eps=eps, elementwise_affine=elementwise_affine)
        self.norm_k = RMSNorm(dim_head, eps=eps, elementwise_affine=elementwise_affine)
        self.to_out = nn.ModuleList([nn.Linear(self.inner_dim, self.out_dim, bias=out_bias), nn.Dropout(0.0)])
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
            encoder_hidden_states = attn.to_add_out(encoder_hidden_states)

        hidden_states = attn.to_out[0](hidden_states)
        hidden_states = attn.to_out[1](hidden_states)
        if encoder_hidden_states is not None:
            return hidden_states, encoder_hidden_states
        return hidden_states


class Flux2ParallelSelfAttention(nn.Module):
    """With Flux2ParallelSelfAttnProcessor's __call__ as its forward."""

    def __init__(self, query_dim, heads=8, dim_head=64, bias=False, out_bias=True, eps=1e-5, out_dim=None,
                 elementwise_affine=True, mlp_ratio=4.0, mlp_mult_factor=2):
        super().__init__()
        self.head_dim = dim_head
        self.inner_dim = out_dim if out_dim is not None else dim_head * heads
        self.query_dim = query_dim
        self.out_dim = out_dim if out_dim is not None else query_dim
        self.heads = out_dim // dim_head if out_dim is not None else heads
        self.mlp_ratio = mlp_ratio
        self.mlp_hidden_dim = int(query_dim * self.mlp_ratio)
        self.mlp_mult_factor = mlp_mult_factor
        self.to_qkv_mlp_proj = nn.Linear(self.query_dim,
                                         self.inner_dim * 3 + self.mlp_hidden_dim * self.mlp_mult_factor, bias=bias)
        self.mlp_act_fn = Flux2SwiGLU()
        self.norm_q = RMSNorm(dim_head, eps=eps, elementwise_affine=elementwise_affine)
        self.norm_k = RMSNorm(dim_head, eps=eps, elementwise_affine=elementwise_affine)
        self.to_out = nn.Linear(self.inner_dim + self.mlp_hidden_dim, self.out_dim, bias=out_bias)

    def forward(self, hidden_states, attention_mask=None, image_rotary_emb=None):
        attn = self
        hidden_states = attn.to_qkv_mlp_proj(hidden_states)
        qkv, mlp_hidden_states = torch.split(
            hidden_states, [3 * attn.inner_dim, attn.mlp_hidden_dim * attn.mlp_mult_factor], dim=-1)
        query, key, value = qkv.chunk(3, dim=-1)
        query = query.unflatten(-1, (attn.heads, -1))
        key = key.unflatten(-1, (attn.heads, -1))
        value = value.unflatten(-1, (attn.heads, -1))
        query = attn.norm_q(query)
        key = attn.norm_k(key)
        if image_rotary_emb is not None:
            query = apply_rotary_emb(query, image_rotary_emb, sequence_dim=1)
            key = apply_rotary_emb(key, image_rotary_emb, sequence_dim=1)
        hidden_states = attention(query, key, value, attn_mask=attention_mask)
        hidden_states = hidden_states.flatten(2, 3)
        hidden_states = hidden_states.to(query.dtype)
        mlp_hidden_states = attn.mlp_act_fn(mlp_hidden_states)
        hidden_states = torch.cat([hidden_states, mlp_hidden_states], dim=-1)
        return attn.to_out(hidden_states)


class Flux2SingleTransformerBlock(nn.Module):
    def __init__(self, dim, num_attention_heads, attention_head_dim, mlp_ratio=3.0, eps=1e-6, bias=False):
        super().__init__()
        self.norm = nn.LayerNorm(dim, elementwise_affine=False, eps=eps)
        self.attn = Flux2ParallelSelfAttention(query_dim=dim, dim_head=attention_head_dim, heads=num_attention_heads,
                                               out_dim=dim, bias=bias, out_bias=bias, eps=eps, mlp_ratio=mlp_ratio,
                                               mlp_mult_factor=2)

    def forward(self, hidden_states, encoder_hidden_states, temb_mod_params, image_rotary_emb=None,
                joint_attention_kwargs=None, split_hidden_states=False, text_seq_len=None):
        if encoder_hidden_states is not None:
            text_seq_len = encoder_hidden_states.shape[1]
            hidden_states = torch.cat([encoder_hidden_states, hidden_states], dim=1)
        mod_shift, mod_scale, mod_gate = temb_mod_params
        norm_hidden_states = self.norm(hidden_states)
        norm_hidden_states = (1 + mod_scale) * norm_hidden_states + mod_shift
        joint_attention_kwargs = joint_attention_kwargs or {}
        attn_output = self.attn(hidden_states=norm_hidden_states, image_rotary_emb=image_rotary_emb,
                                **joint_attention_kwargs)
        hidden_states = hidden_states + mod_gate * attn_output
        if hidden_states.dtype == torch.float16:
            hidden_states = hidden_states.clip(-65504, 65504)
        if split_hidden_states:
            encoder_hidden_states, hidden_states = hidden_states[:, :text_seq_len], hidden_states[:, text_seq_len:]
            return encoder_hidden_states, hidden_states
        return hidden_states


class Flux2TransformerBlock(nn.Module):
    def __init__(self, dim, num_attention_heads, attention_head_dim, mlp_ratio=3.0, eps=1e-6, bias=False):
        super().__init__()
        self.mlp_hidden_dim = int(dim * mlp_ratio)
        self.norm1 = nn.LayerNorm(dim, elementwise_affine=False, eps=eps)
        self.norm1_context = nn.LayerNorm(dim, elementwise_affine=False, eps=eps)
        self.attn = Flux2Attention(query_dim=dim, added_kv_proj_dim=dim, dim_head=attention_head_dim,
                                   heads=num_attention_heads, out_dim=dim, bias=bias, added_proj_bias=bias,
                                   out_bias=bias, eps=eps)
        self.norm2 = nn.LayerNorm(dim, elementwise_affine=False, eps=eps)
        self.ff = Flux2FeedForward(dim=dim, dim_out=dim, mult=mlp_ratio, bias=bias)
        self.norm2_context = nn.LayerNorm(dim, elementwise_affine=False, eps=eps)
        self.ff_context = Flux2FeedForward(dim=dim, dim_out=dim, mult=mlp_ratio, bias=bias)

    def forward(self, hidden_states, encoder_hidden_states, temb_mod_params_img, temb_mod_params_txt,
                image_rotary_emb=None, joint_attention_kwargs=None):
        joint_attention_kwargs = joint_attention_kwargs or {}
        (shift_msa, scale_msa, gate_msa), (shift_mlp, scale_mlp, gate_mlp) = temb_mod_params_img
        (c_shift_msa, c_scale_msa, c_gate_msa), (c_shift_mlp, c_scale_mlp, c_gate_mlp) = temb_mod_params_txt

        norm_hidden_states = self.norm1(hidden_states)
        norm_hidden_states = (1 + scale_msa) * norm_hidden_states + shift_msa
        norm_encoder_hidden_states = self.norm1_context(encoder_hidden_states)
        norm_encoder_hidden_states = (1 + c_scale_msa) * norm_encoder_hidden_states + c_shift_msa

        attention_outputs = self.attn(hidden_states=norm_hidden_states,
                                      encoder_hidden_states=norm_encoder_hidden_states,
                                      image_rotary_emb=image_rotary_emb, **joint_attention_kwargs)
        attn_output, context_attn_output = attention_outputs

        attn_output = gate_msa * attn_output
        hidden_states = hidden_states + attn_output
        norm_hidden_states = self.norm2(hidden_states)
        norm_hidden_states = norm_hidden_states * (1 + scale_mlp) + shift_mlp
        ff_output = self.ff(norm_hidden_states)
        hidden_states = hidden_states + gate_mlp * ff_output

        context_attn_output = c_gate_msa * context_attn_output
        encoder_hidden_states = encoder_hidden_states + context_attn_output
        norm_encoder_hidden_states = self.norm2_context(encoder_hidden_states)
        norm_encoder_hidden_states = norm_encoder_hidden_states * (1 + c_scale_mlp) + c_shift_mlp
        context_ff_output = self.ff_context(norm_encoder_hidden_states)
        encoder_hidden_states = encoder_hidden_states + c_gate_mlp * context_ff_output
        if encoder_hidden_states.dtype == torch.float16:
            encoder_hidden_states = encoder_hidden_states.clip(-65504, 65504)
        return encoder_hidden_states, hidden_states


class Flux2PosEmbed(nn.Module):
    def __init__(self, theta, axes_dim):
        super().__init__()
        self.theta = theta
        self.axes_dim = axes_dim

    def forward(self, ids):
        cos_out = []
        sin_out = []
        pos = ids.float()
        freqs_dtype = torch.float64  # CPU (not mps / npu)
        for i in range(len(self.axes_dim)):
            cos, sin = get_1d_rotary_pos_embed(self.axes_dim[i], pos[..., i], theta=self.theta,
                                               freqs_dtype=freqs_dtype)
            cos_out.append(cos)
            sin_out.append(sin)
        freqs_cos = torch.cat(cos_out, dim=-1).to(ids.device)
        freqs_sin = torch.cat(sin_out, dim=-1).to(ids.device)
        return freqs_cos, freqs_sin


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


class Flux2TimestepGuidanceEmbeddings(nn.Module):
    """guidance_embeds (False: FLUX.2 [klein]) as 9668f24277718022aab2a66e77c1a0c8bf62a9ca has it; True is 0047da10's."""

    def __init__(self, in_channels=256, embedding_dim=6144, bias=False, guidance_embeds=True):
        super().__init__()
        self.time_proj = Timesteps(num_channels=in_channels, flip_sin_to_cos=True, downscale_freq_shift=0)
        self.timestep_embedder = TimestepEmbedding(in_channels=in_channels, time_embed_dim=embedding_dim,
                                                   sample_proj_bias=bias)
        if guidance_embeds:
            self.guidance_embedder = TimestepEmbedding(in_channels=in_channels, time_embed_dim=embedding_dim,
                                                       sample_proj_bias=bias)
        else:
            self.guidance_embedder = None

    def forward(self, timestep, guidance):
        timesteps_proj = self.time_proj(timestep)
        timesteps_emb = self.timestep_embedder(timesteps_proj.to(timestep.dtype))
        if guidance is not None and self.guidance_embedder is not None:
            guidance_proj = self.time_proj(guidance)
            guidance_emb = self.guidance_embedder(guidance_proj.to(guidance.dtype))
            return timesteps_emb + guidance_emb
        return timesteps_emb


class Flux2Modulation(nn.Module):
    def __init__(self, dim, mod_param_sets=2, bias=False):
        super().__init__()
        self.mod_param_sets = mod_param_sets
        self.linear = nn.Linear(dim, dim * 3 * self.mod_param_sets, bias=bias)
        self.act_fn = nn.SiLU()

    def forward(self, temb):
        mod = self.act_fn(temb)
        mod = self.linear(mod)
        if mod.ndim == 2:
            mod = mod.unsqueeze(1)
        mod_params = torch.chunk(mod, 3 * self.mod_param_sets, dim=-1)
        return tuple(mod_params[3 * i: 3 * (i + 1)] for i in range(self.mod_param_sets))


class AdaLayerNormContinuous(nn.Module):
    """normalization.AdaLayerNormContinuous, norm_type "layer_norm"."""

    def __init__(self, embedding_dim, conditioning_embedding_dim, elementwise_affine=True, eps=1e-5, bias=True):
        super().__init__()
        self.silu = nn.SiLU()
        self.linear = nn.Linear(conditioning_embedding_dim, embedding_dim * 2, bias=bias)
        self.norm = nn.LayerNorm(embedding_dim, eps, elementwise_affine)  # affine off: no parameters

    def forward(self, x, conditioning_embedding):
        emb = self.linear(self.silu(conditioning_embedding).to(x.dtype))
        scale, shift = torch.chunk(emb, 2, dim=1)
        return self.norm(x) * (1 + scale)[:, None, :] + shift[:, None, :]


class Flux2Transformer2DModel(nn.Module):
    def __init__(self, patch_size=1, in_channels=128, out_channels=None, num_layers=8, num_single_layers=48,
                 attention_head_dim=128, num_attention_heads=48, joint_attention_dim=15360,
                 timestep_guidance_channels=256, mlp_ratio=3.0, axes_dims_rope=(32, 32, 32, 32), rope_theta=2000,
                 eps=1e-6, guidance_embeds=True):
        super().__init__()
        self.out_channels = out_channels or in_channels
        self.inner_dim = num_attention_heads * attention_head_dim
        self.pos_embed = Flux2PosEmbed(theta=rope_theta, axes_dim=axes_dims_rope)
        self.time_guidance_embed = Flux2TimestepGuidanceEmbeddings(in_channels=timestep_guidance_channels,
                                                                   embedding_dim=self.inner_dim, bias=False,
                                                                   guidance_embeds=guidance_embeds)
        self.double_stream_modulation_img = Flux2Modulation(self.inner_dim, mod_param_sets=2, bias=False)
        self.double_stream_modulation_txt = Flux2Modulation(self.inner_dim, mod_param_sets=2, bias=False)
        self.single_stream_modulation = Flux2Modulation(self.inner_dim, mod_param_sets=1, bias=False)
        self.x_embedder = nn.Linear(in_channels, self.inner_dim, bias=False)
        self.context_embedder = nn.Linear(joint_attention_dim, self.inner_dim, bias=False)
        self.transformer_blocks = nn.ModuleList([
            Flux2TransformerBlock(dim=self.inner_dim, num_attention_heads=num_attention_heads,
                                  attention_head_dim=attention_head_dim, mlp_ratio=mlp_ratio, eps=eps, bias=False)
            for _ in range(num_layers)])
        self.single_transformer_blocks = nn.ModuleList([
            Flux2SingleTransformerBlock(dim=self.inner_dim, num_attention_heads=num_attention_heads,
                                        attention_head_dim=attention_head_dim, mlp_ratio=mlp_ratio, eps=eps,
                                        bias=False)
            for _ in range(num_single_layers)])
        self.norm_out = AdaLayerNormContinuous(self.inner_dim, self.inner_dim, elementwise_affine=False, eps=eps,
                                               bias=False)
        self.proj_out = nn.Linear(self.inner_dim, patch_size * patch_size * self.out_channels, bias=False)

    def forward(self, hidden_states, encoder_hidden_states=None, timestep=None, img_ids=None, txt_ids=None,
                guidance=None, joint_attention_kwargs=None, return_dict=True):
        num_txt_tokens = encoder_hidden_states.shape[1]
        timestep = timestep.to(hidden_states.dtype) * 1000
        if guidance is not None:
            guidance = guidance.to(hidden_states.dtype) * 1000
        temb = self.time_guidance_embed(timestep, guidance)

        double_stream_mod_img = self.double_stream_modulation_img(temb)
        double_stream_mod_txt = self.double_stream_modulation_txt(temb)
        single_stream_mod = self.single_stream_modulation(temb)[0]

        hidden_states = self.x_embedder(hidden_states)
        encoder_hidden_states = self.context_embedder(encoder_hidden_states)

        if img_ids.ndim == 3:
            img_ids = img_ids[0]
        if txt_ids.ndim == 3:
            txt_ids = txt_ids[0]
        image_rotary_emb = self.pos_embed(img_ids)
        text_rotary_emb = self.pos_embed(txt_ids)
        concat_rotary_emb = (torch.cat([text_rotary_emb[0], image_rotary_emb[0]], dim=0),
                             torch.cat([text_rotary_emb[1], image_rotary_emb[1]], dim=0))

        for block in self.transformer_blocks:
            encoder_hidden_states, hidden_states = block(
                hidden_states=hidden_states, encoder_hidden_states=encoder_hidden_states,
                temb_mod_params_img=double_stream_mod_img, temb_mod_params_txt=double_stream_mod_txt,
                image_rotary_emb=concat_rotary_emb, joint_attention_kwargs=joint_attention_kwargs)
        hidden_states = torch.cat([encoder_hidden_states, hidden_states], dim=1)

        for block in self.single_transformer_blocks:
            hidden_states = block(hidden_states=hidden_states, encoder_hidden_states=None,
                                  temb_mod_params=single_stream_mod, image_rotary_emb=concat_rotary_emb,
                                  joint_attention_kwargs=joint_attention_kwargs)
        hidden_states = hidden_states[:, num_txt_tokens:, ...]

        hidden_states = self.norm_out(hidden_states, temb)
        output = self.proj_out(hidden_states)
        return (output,)


def build():
    # Small FLUX.2: 2 heads of 16 (RoPE axes 4+4+4+4), two double-stream blocks (both read the one model-level
    # modulation) and one single-stream block, in_channels 16 (4 latent channels patchified 2x2 by the pipeline), a
    # 16-wide caption.
    return Flux2Transformer2DModel(patch_size=1, in_channels=16, num_layers=2, num_single_layers=1,
                                   attention_head_dim=16, num_attention_heads=2, joint_attention_dim=16,
                                   timestep_guidance_channels=256, mlp_ratio=3.0, axes_dims_rope=(4, 4, 4, 4),
                                   rope_theta=2000, eps=1e-6)


def build_ref():
    # The reference-image run at one double- and one single-stream block (its trace holds twice the rows).
    return Flux2Transformer2DModel(patch_size=1, in_channels=16, num_layers=1, num_single_layers=1,
                                   attention_head_dim=16, num_attention_heads=2, joint_attention_dim=16,
                                   timestep_guidance_channels=256, mlp_ratio=3.0, axes_dims_rope=(4, 4, 4, 4),
                                   rope_theta=2000, eps=1e-6)


def prepare_text_ids(x):
    """Flux2Pipeline._prepare_text_ids: (B, L, 4) = (0, 0, 0, l)."""
    B, L, _ = x.shape
    out_ids = []
    for i in range(B):
        coords = torch.cartesian_prod(torch.arange(1), torch.arange(1), torch.arange(1), torch.arange(L))
        out_ids.append(coords)
    return torch.stack(out_ids)


def prepare_latent_ids(latents):
    """Flux2Pipeline._prepare_latent_ids: (B, H·W, 4) = (0, h, w, 0)."""
    batch_size, _, height, width = latents.shape
    latent_ids = torch.cartesian_prod(torch.arange(1), torch.arange(height), torch.arange(width), torch.arange(1))
    return latent_ids.unsqueeze(0).expand(batch_size, -1, -1)


def pack_latents(latents):
    """Flux2Pipeline._pack_latents: (B, C, H, W) -> (B, H·W, C)."""
    batch_size, num_channels, height, width = latents.shape
    return latents.reshape(batch_size, num_channels, height * width).permute(0, 2, 1)


def inputs(g):
    n = 4
    txt = torch.randn((1, n, 16), generator=g)
    lat = torch.randn((1, 16, 4, 4), generator=g)
    return {"encoder_hidden_states": txt, "txt_ids": prepare_text_ids(txt), "img_ids": prepare_latent_ids(lat),
            "guidance": torch.full([1], 4.0, dtype=torch.float32), "noise": pack_latents(lat)}


KLEIN = "--klein" in sys.argv  # FLUX.2 [klein]: no guidance embedding, Flux2KleinPipeline passes guidance=None


def build_klein():
    return Flux2Transformer2DModel(patch_size=1, in_channels=16, num_layers=1, num_single_layers=1,
                                   attention_head_dim=16, num_attention_heads=2, joint_attention_dim=16,
                                   timestep_guidance_channels=256, mlp_ratio=3.0, axes_dims_rope=(4, 4, 4, 4),
                                   rope_theta=2000, eps=1e-6, guidance_embeds=False)


def call_klein(model, x, sigma, c):
    # Flux2KleinPipeline (pipeline_flux2_klein.py at 0256497cd8b1): guidance=None, guidance_scale 1 (no CFG call)
    t = torch.tensor([sigma * 1000.0], dtype=torch.float32).to(x.dtype)
    noise_pred = model(hidden_states=x, timestep=t / 1000, guidance=None,
                       encoder_hidden_states=c["encoder_hidden_states"], txt_ids=c["txt_ids"], img_ids=c["img_ids"],
                       joint_attention_kwargs=None, return_dict=False)[0]
    return noise_pred[:, : x.size(1):]


REF = "--ref" in sys.argv  # Flux2Pipeline given a reference image: its latents joined after the noisy ones


def prepare_image_ids(image_latents, scale=10):
    """Flux2Pipeline._prepare_image_ids: (1, N, 4) = (10 + 10 i, h, w, 0) over the reference images."""
    t_coords = [scale + scale * t for t in torch.arange(0, len(image_latents))]
    t_coords = [t.view(-1) for t in t_coords]
    image_latent_ids = []
    for x, t in zip(image_latents, t_coords):
        x = x.squeeze(0)
        _, height, width = x.shape
        image_latent_ids.append(torch.cartesian_prod(t, torch.arange(height), torch.arange(width), torch.arange(1)))
    return torch.cat(image_latent_ids, dim=0).unsqueeze(0)


def inputs_ref(g):
    c = inputs(g)
    # a reference image's latents as prepare_image_latents leaves them (VAE-encoded, patchified and normalised by
    # the VAE's batch-norm statistics: here drawn), packed and their ids made
    ref = torch.randn((1, 16, 4, 4), generator=g)  # of the output's size, as the pipeline makes it by default
    c["image_latents"] = pack_latents(ref)
    c["image_latent_ids"] = prepare_image_ids([ref])
    return c


def call_ref(model, x, sigma, c):
    t = torch.tensor([sigma * 1000.0], dtype=torch.float32).to(x.dtype)
    latent_model_input = torch.cat([x, c["image_latents"]], dim=1).to(x.dtype)
    latent_image_ids = torch.cat([c["img_ids"], c["image_latent_ids"]], dim=1)
    noise_pred = model(hidden_states=latent_model_input, timestep=t / 1000, guidance=c["guidance"],
                       encoder_hidden_states=c["encoder_hidden_states"], txt_ids=c["txt_ids"],
                       img_ids=latent_image_ids, joint_attention_kwargs=None, return_dict=False)[0]
    return noise_pred[:, : x.size(1):]


def call(model, x, sigma, c):
    t = torch.tensor([sigma * 1000.0], dtype=torch.float32).to(x.dtype)
    return model(hidden_states=x, timestep=t / 1000, guidance=c["guidance"],
                 encoder_hidden_states=c["encoder_hidden_states"], txt_ids=c["txt_ids"], img_ids=c["img_ids"],
                 joint_attention_kwargs=None, return_dict=False)[0]


PRODUCER = dict(
    library_source="replica of huggingface/diffusers transformer_flux2.py@0047da10a201 and the parts it imports "
                   "(torch 1.13)",
    timestep="sigma float32 (Flux2Pipeline: timestep / 1000 of sigma*1000; the model scales by 1000); guidance 4.0 "
             "scaled by 1000 likewise",
    velocity="model output as is (flow velocity), not negated",
    note="FLUX.2 MMDiT, two double-stream blocks and one single-stream block, no biases: the modulation is computed once at "
         "model level (double_stream_modulation_img/txt: 2 sets of (shift, scale, gate); single_stream_modulation: "
         "1 set; each SiLU(temb) -> Linear, chunked) and the same tensors are passed to every block; "
         "temb = timestep_embedder(sinusoid(1000 t)) + guidance_embedder(sinusoid(1000 g)), cos-first, shift 0; "
         "double block: non-affine LayerNorms, (1 + scale)·norm + shift, joint [text, image] attention with RMSNorm "
         "q/k (and added q/k) per head, RoPE interleaved from 4-axis ids (t, h, w, l) axes (4, 4, 4, 4) theta 2000, "
         "SwiGLU FFNs (linear_in -> silu(first half)·second half -> linear_out); single block over [text, image]: "
         "one to_qkv_mlp_proj split [q|k|v | mlp 2x], SwiGLU on the MLP part, to_out over [attention, mlp]; "
         "text rows dropped, AdaLayerNormContinuous [scale, shift] + proj_out; packed latents (B, H*W, C)")

if __name__ == "__main__":
    if KLEIN:
        capture("flux2_klein", build_klein, inputs, call_klein, sys.argv[1],
                dict(PRODUCER, timestep="sigma float32 (Flux2KleinPipeline: timestep / 1000 of sigma*1000; the model "
                                        "scales by 1000); no guidance",
                     note=PRODUCER["note"] + "; FLUX.2 [klein]: no guidance embedder (temb the time embedding alone)"))
    elif REF:
        capture("flux2_ref", build_ref, inputs_ref, call_ref, sys.argv[1],
                dict(PRODUCER, note=PRODUCER["note"].replace("two double-stream blocks and one single-stream block", "one double- and one single-stream block")
                     + "; with one reference image: its packed latents joined after "
                                                       "the noisy ones, ids (10, h, w, 0), the velocity the noisy "
                                                       "rows of the output"))
    else:
        capture("flux2", build, inputs, call, sys.argv[1], PRODUCER)
