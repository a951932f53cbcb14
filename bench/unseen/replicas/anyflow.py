"""AnyFlow (bidirectional flow-map) video DiT, reimplemented for torch 1.13 (no diffusers here), captured small in f32
on CPU.

Follows huggingface/diffusers src/diffusers/models/transformers/transformer_anyflow.py at
0df6c051488d74bbdc78770ce8726d41933a08ea (AnyFlowTransformer3DModel, AnyFlowTransformerBlock, AnyFlowAttention with
AnyFlowAttnProcessor's bidirectional branch and AnyFlowCrossAttnProcessor as forwards, AnyFlowRotaryPosEmbed's full-frame
path, AnyFlowDualTimestepTextImageEmbedding's non-causal path, apply_rotary_emb; read in full) with the parts it
imports: embeddings.py (Timesteps, TimestepEmbedding, PixArtAlphaTextProjection "gelu_tanh", get_1d_rotary_pos_embed
use_real=False: complex128 cis from float64 frequencies), normalization.py (FP32LayerNorm, RMSNorm with a weight),
attention.py (FeedForward "gelu-approximate"): the same module tree, parameter names and shapes, and call boundaries;
the arithmetic line for line. Stand-in for what torch 1.13 lacks: dispatch_attention_fn (SDPA's math on [B, L, H, D],
default scale, no mask). The text-to-video path: no image context, no conditioning video.

The constructs it shows beside Wan's: latents laid out frames first [B, F, C, H, W]; two timesteps per frame, the
source t and the target r (the next sigma: a flow map Φ_{r←t}), both through one sinusoid module, t through
time_embedder and r through a delta_embedder, mixed as (1 − g)·temb + g·delta_emb with a fixed gate g = 0.25 (a
buffer, not a parameter), then repeated over each frame's tokens (a per-token modulation); RoPE applied in complex128
on [B, H, L, D]; an unpatchify whose patch order is (p_h, p_w, C) read as (C, h, p, w, p).

Pipeline as AnyFlowPipeline calls it (FlowMatchEuler timesteps, float): timestep = sigma_i*1000 repeated over the
frames, r_timestep = sigma_{i+1}*1000 (use_mean_velocity), the output used as the velocity as is.

usage: /usr/bin/python3 bench/unseen/replicas/anyflow.py OUTDIR [--small]
"""
import math
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

from parts import PixArtAlphaTextProjection, Timesteps, TimestepEmbedding
from run import capture, sdpa


class RMSNorm(nn.Module):
    """diffusers.models.normalization.RMSNorm(dim, eps, elementwise_affine=True)."""

    def __init__(self, dim, eps, elementwise_affine=True):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim)) if elementwise_affine else None

    def forward(self, hidden_states):
        input_dtype = hidden_states.dtype
        variance = hidden_states.to(torch.float32).pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.eps)
        if self.weight is not None:
            if self.weight.dtype in [torch.float16, torch.bfloat16]:
                hidden_states = hidden_states.to(self.weight.dtype)
            hidden_states = hidden_states * self.weight
        else:
            hidden_states = hidden_states.to(input_dtype)
        return hidden_states


class FP32LayerNorm(nn.LayerNorm):
    def forward(self, inputs):
        origin_dtype = inputs.dtype
        return F.layer_norm(inputs.float(), self.normalized_shape,
                            self.weight.float() if self.weight is not None else None,
                            self.bias.float() if self.bias is not None else None, self.eps).to(origin_dtype)


def get_1d_rotary_pos_embed(dim, pos, theta=10000.0, use_real=False, linear_factor=1.0, ntk_factor=1.0,
                            repeat_interleave_real=True, freqs_dtype=torch.float32):
    """use_real=False: the complex cis table (complex128 from float64 frequencies)."""
    assert dim % 2 == 0 and not use_real
    if isinstance(pos, int):
        pos = torch.arange(pos)
    theta = theta * ntk_factor
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=freqs_dtype, device=pos.device)[: (dim // 2)] / dim)) \
        / linear_factor
    freqs = torch.outer(pos, freqs)
    return torch.polar(torch.ones_like(freqs), freqs)


def apply_rotary_emb(hidden_states, freqs):
    rotary_dtype = torch.float64  # the CPU / CUDA branch
    x_rotated = torch.view_as_complex(hidden_states.to(rotary_dtype).unflatten(3, (-1, 2)))
    x_out = torch.view_as_real(x_rotated * freqs).flatten(3, 4)
    return x_out.type_as(hidden_states)


class GELU(nn.Module):
    def __init__(self, dim_in, dim_out, approximate="none", bias=True):
        super().__init__()
        self.proj = nn.Linear(dim_in, dim_out, bias=bias)
        self.approximate = approximate

    def forward(self, hidden_states):
        return F.gelu(self.proj(hidden_states), approximate=self.approximate)


class FeedForward(nn.Module):
    """FeedForward(dim, inner_dim=ffn_dim, activation_fn="gelu-approximate")."""

    def __init__(self, dim, inner_dim, dropout=0.0, bias=True):
        super().__init__()
        self.net = nn.ModuleList([GELU(dim, inner_dim, approximate="tanh", bias=bias), nn.Dropout(dropout),
                                  nn.Linear(inner_dim, dim, bias=bias)])

    def forward(self, hidden_states):
        for module in self.net:
            hidden_states = module(hidden_states)
        return hidden_states


class AnyFlowAttention(nn.Module):
    """AnyFlowAttention; cross=False runs AnyFlowAttnProcessor (bidirectional: no mask, no KV cache), cross=True
    AnyFlowCrossAttnProcessor."""

    def __init__(self, dim, heads, dim_head, eps=1e-6, cross=False):
        super().__init__()
        self.heads = heads
        self.inner_dim = heads * dim_head
        self.cross = cross
        self.to_q = nn.Linear(dim, self.inner_dim, bias=True)
        self.to_k = nn.Linear(dim, self.inner_dim, bias=True)
        self.to_v = nn.Linear(dim, self.inner_dim, bias=True)
        self.to_out = nn.ModuleList([nn.Linear(self.inner_dim, dim, bias=True), nn.Dropout(0.0)])
        self.norm_q = RMSNorm(self.inner_dim, eps=eps)
        self.norm_k = RMSNorm(self.inner_dim, eps=eps)

    def forward(self, hidden_states, encoder_hidden_states=None, attention_mask=None, rotary_emb=None,
                kv_cache=None, kv_cache_flag=None):
        return (self._cross if self.cross else self._self)(hidden_states, encoder_hidden_states, attention_mask,
                                                           rotary_emb)

    def _self(self, hidden_states, encoder_hidden_states, attention_mask, rotary_emb):
        attn = self
        if encoder_hidden_states is None:
            encoder_hidden_states = hidden_states
        query = attn.to_q(hidden_states)
        key = attn.to_k(encoder_hidden_states)
        value = attn.to_v(encoder_hidden_states)
        if attn.norm_q is not None:
            query = attn.norm_q(query)
        if attn.norm_k is not None:
            key = attn.norm_k(key)
        query = query.unflatten(2, (attn.heads, -1)).transpose(1, 2)
        key = key.unflatten(2, (attn.heads, -1)).transpose(1, 2)
        value = value.unflatten(2, (attn.heads, -1)).transpose(1, 2)
        if rotary_emb is not None:
            query = apply_rotary_emb(query, rotary_emb["query"])
            key = apply_rotary_emb(key, rotary_emb["key"])
        assert attention_mask is None
        # dispatch_attention_fn on (B, L, H, D): SDPA's math on (B, H, L, D), default scale
        hidden_states = sdpa(query, key, value).transpose(1, 2)
        hidden_states = hidden_states.flatten(2, 3)
        hidden_states = hidden_states.type_as(query)
        hidden_states = attn.to_out[0](hidden_states)
        hidden_states = attn.to_out[1](hidden_states)
        return hidden_states

    def _cross(self, hidden_states, encoder_hidden_states, attention_mask, rotary_emb):
        attn = self
        query = attn.to_q(hidden_states)
        key = attn.to_k(encoder_hidden_states)
        value = attn.to_v(encoder_hidden_states)
        if attn.norm_q is not None:
            query = attn.norm_q(query)
        if attn.norm_k is not None:
            key = attn.norm_k(key)
        query = query.unflatten(2, (attn.heads, -1))
        key = key.unflatten(2, (attn.heads, -1))
        value = value.unflatten(2, (attn.heads, -1))
        hidden_states = sdpa(query.transpose(1, 2), key.transpose(1, 2), value.transpose(1, 2),
                             mask=attention_mask).transpose(1, 2)
        hidden_states = hidden_states.flatten(2, 3)
        hidden_states = hidden_states.type_as(query)
        hidden_states = attn.to_out[0](hidden_states)
        hidden_states = attn.to_out[1](hidden_states)
        return hidden_states


class AnyFlowDualTimestepTextImageEmbedding(nn.Module):
    def __init__(self, dim, gate_value, deltatime_type, time_freq_dim, time_proj_dim, text_embed_dim,
                 image_embed_dim=None):
        super().__init__()
        self.timesteps_proj = Timesteps(num_channels=time_freq_dim, flip_sin_to_cos=True, downscale_freq_shift=0)
        self.time_embedder = TimestepEmbedding(in_channels=time_freq_dim, time_embed_dim=dim)
        self.delta_embedder = TimestepEmbedding(in_channels=time_freq_dim, time_embed_dim=dim)
        self.act_fn = nn.SiLU()
        self.time_proj = nn.Linear(dim, time_proj_dim)
        self.text_embedder = PixArtAlphaTextProjection(text_embed_dim, dim)
        assert image_embed_dim is None
        self.image_embedder = None
        self.register_buffer("delta_emb_gate", torch.tensor([gate_value], dtype=torch.float32), persistent=False)
        self.deltatime_type = deltatime_type

    def forward_timestep(self, timestep, delta_timestep, encoder_hidden_states, token_per_frame):
        batch_size, num_frames = timestep.shape
        timestep = timestep.reshape(-1)
        delta_timestep = delta_timestep.reshape(-1)

        timestep = self.timesteps_proj(timestep)
        time_embedder_dtype = next(iter(self.time_embedder.parameters())).dtype
        if timestep.dtype != time_embedder_dtype and time_embedder_dtype != torch.int8:
            timestep = timestep.to(time_embedder_dtype)
        temb = self.time_embedder(timestep).type_as(encoder_hidden_states)

        delta_timestep = self.timesteps_proj(delta_timestep)
        delta_embedder_dtype = next(iter(self.delta_embedder.parameters())).dtype
        if delta_timestep.dtype != delta_embedder_dtype and delta_embedder_dtype != torch.int8:
            delta_timestep = delta_timestep.to(delta_embedder_dtype)
        delta_emb = self.delta_embedder(delta_timestep).type_as(encoder_hidden_states)

        gate = self.delta_emb_gate.to(delta_embedder_dtype)
        rt_emb = (1 - gate) * temb + gate * delta_emb
        timestep_proj = self.time_proj(self.act_fn(rt_emb))

        rt_emb = rt_emb.unflatten(0, (batch_size, num_frames)).repeat_interleave(token_per_frame, dim=1)
        timestep_proj = timestep_proj.unflatten(0, (batch_size, num_frames)).repeat_interleave(token_per_frame, dim=1)
        return rt_emb, timestep_proj

    def forward(self, timestep, r_timestep, encoder_hidden_states, encoder_hidden_states_image=None, far_cfg=None,
                clean_timestep=None, is_causal=True):
        if self.deltatime_type == "r":
            delta_timestep = r_timestep
        elif self.deltatime_type == "t-r":
            delta_timestep = timestep - r_timestep
        else:
            raise NotImplementedError
        assert not is_causal
        timestep, timestep_proj = self.forward_timestep(timestep, delta_timestep, encoder_hidden_states,
                                                        far_cfg["full_token_per_frame"])
        encoder_hidden_states = self.text_embedder(encoder_hidden_states)
        return timestep, timestep_proj, encoder_hidden_states, encoder_hidden_states_image


class AnyFlowRotaryPosEmbed(nn.Module):
    def __init__(self, attention_head_dim, patch_size, compressed_patch_size, max_seq_len, theta=10000.0):
        super().__init__()
        self.attention_head_dim = attention_head_dim
        self.patch_size = patch_size
        self.compressed_patch_size = compressed_patch_size
        self.max_seq_len = max_seq_len
        self.theta = theta
        self._freqs_cache = None

    def _build_freqs(self, device):
        cache_key = (device.type, str(device))
        if self._freqs_cache is not None and self._freqs_cache[0] == cache_key:
            return self._freqs_cache[1]
        freqs_dtype = torch.float64
        h_dim = w_dim = 2 * (self.attention_head_dim // 6)
        t_dim = self.attention_head_dim - h_dim - w_dim
        freqs_list = []
        for dim in (t_dim, h_dim, w_dim):
            f = get_1d_rotary_pos_embed(dim, self.max_seq_len, self.theta, use_real=False,
                                        repeat_interleave_real=False, freqs_dtype=freqs_dtype)
            freqs_list.append(f.to(device))
        freqs = torch.cat(freqs_list, dim=1)
        self._freqs_cache = (cache_key, freqs)
        return freqs

    def _forward_full_frame(self, num_frames, height, width, device):
        ppf, pph, ppw = num_frames, height, width
        freqs_full = self._build_freqs(device)
        freqs = freqs_full.split_with_sizes([self.attention_head_dim // 2 - 2 * (self.attention_head_dim // 6),
                                             self.attention_head_dim // 6, self.attention_head_dim // 6], dim=1)
        freqs_f = freqs[0][:ppf].view(ppf, 1, 1, -1).expand(ppf, pph, ppw, -1)
        freqs_h = freqs[1][:pph].view(1, pph, 1, -1).expand(ppf, pph, ppw, -1)
        freqs_w = freqs[2][:ppw].view(1, 1, ppw, -1).expand(ppf, pph, ppw, -1)
        return torch.cat([freqs_f, freqs_h, freqs_w], dim=-1)

    def forward(self, far_cfg, device, clean_hidden_states=None, is_causal=True):
        assert not is_causal
        freqs = self._forward_full_frame(num_frames=far_cfg["total_frames"], height=far_cfg["full_frame_shape"][0],
                                         width=far_cfg["full_frame_shape"][1], device=device)
        freqs = freqs.flatten(start_dim=0, end_dim=2)
        freqs = freqs[None, None, ...]
        return {"query": freqs, "key": freqs}


class AnyFlowTransformerBlock(nn.Module):
    def __init__(self, dim, ffn_dim, num_heads, cross_attn_norm=False, eps=1e-6):
        super().__init__()
        self.norm1 = FP32LayerNorm(dim, eps, elementwise_affine=False)
        self.attn1 = AnyFlowAttention(dim=dim, heads=num_heads, dim_head=dim // num_heads, eps=eps)
        self.attn2 = AnyFlowAttention(dim=dim, heads=num_heads, dim_head=dim // num_heads, eps=eps, cross=True)
        self.norm2 = FP32LayerNorm(dim, eps, elementwise_affine=True) if cross_attn_norm else nn.Identity()
        self.ffn = FeedForward(dim, inner_dim=ffn_dim)
        self.norm3 = FP32LayerNorm(dim, eps, elementwise_affine=False)
        self.scale_shift_table = nn.Parameter(torch.randn(1, 6, dim) / dim ** 0.5)

    def forward(self, hidden_states, encoder_hidden_states, temb, rotary_emb, attention_mask, kv_cache=None,
                kv_cache_flag=None):
        shift_msa, scale_msa, gate_msa, c_shift_msa, c_scale_msa, c_gate_msa = (
            self.scale_shift_table + temb.float()).chunk(6, dim=2)
        shift_msa, scale_msa, gate_msa, c_shift_msa, c_scale_msa, c_gate_msa = (
            shift_msa.squeeze(2), scale_msa.squeeze(2), gate_msa.squeeze(2), c_shift_msa.squeeze(2),
            c_scale_msa.squeeze(2), c_gate_msa.squeeze(2))

        norm_hidden_states = (self.norm1(hidden_states.float()) * (1 + scale_msa) + shift_msa).type_as(hidden_states)
        attn_output = self.attn1(hidden_states=norm_hidden_states, rotary_emb=rotary_emb,
                                 attention_mask=attention_mask, kv_cache=kv_cache, kv_cache_flag=kv_cache_flag)
        hidden_states = (hidden_states.float() + attn_output * gate_msa).type_as(hidden_states)

        norm_hidden_states = self.norm2(hidden_states.float()).type_as(hidden_states)
        attn_output = self.attn2(hidden_states=norm_hidden_states, encoder_hidden_states=encoder_hidden_states)
        hidden_states = hidden_states + attn_output

        norm_hidden_states = (self.norm3(hidden_states.float()) * (1 + c_scale_msa) + c_shift_msa).type_as(
            hidden_states)
        ff_output = self.ffn(norm_hidden_states)
        hidden_states = (hidden_states.float() + ff_output.float() * c_gate_msa).type_as(hidden_states)
        return hidden_states


class AnyFlowTransformer3DModel(nn.Module):
    _keep_in_fp32_modules = ["time_embedder", "scale_shift_table", "norm1", "norm2", "norm3"]

    def __init__(self, patch_size=(1, 2, 2), num_attention_heads=40, attention_head_dim=128, in_channels=16,
                 out_channels=16, text_dim=4096, freq_dim=256, ffn_dim=13824, num_layers=40, cross_attn_norm=True,
                 eps=1e-6, image_dim=None, rope_max_seq_len=1024, gate_value=0.25, deltatime_type="r"):
        super().__init__()
        self.patch_size = patch_size
        inner_dim = num_attention_heads * attention_head_dim
        out_channels = out_channels or in_channels
        self.rope = AnyFlowRotaryPosEmbed(attention_head_dim, patch_size, patch_size, rope_max_seq_len)
        self.patch_embedding = nn.Conv3d(in_channels, inner_dim, kernel_size=patch_size, stride=patch_size)
        self.condition_embedder = AnyFlowDualTimestepTextImageEmbedding(
            dim=inner_dim, gate_value=gate_value, deltatime_type=deltatime_type, time_freq_dim=freq_dim,
            time_proj_dim=inner_dim * 6, text_embed_dim=text_dim, image_embed_dim=image_dim)
        self.blocks = nn.ModuleList([AnyFlowTransformerBlock(inner_dim, ffn_dim, num_attention_heads,
                                                             cross_attn_norm, eps) for _ in range(num_layers)])
        self.norm_out = FP32LayerNorm(inner_dim, eps, elementwise_affine=False)
        self.proj_out = nn.Linear(inner_dim, out_channels * math.prod(patch_size))
        self.scale_shift_table = nn.Parameter(torch.randn(1, 2, inner_dim) / inner_dim ** 0.5)

    def _unpack_latent_sequence(self, latents, num_frames, height, width, patch_size):
        batch_size, num_patches, channels = latents.shape
        height, width = height // patch_size, width // patch_size
        latents = latents.view(batch_size * num_frames, height, width, patch_size, patch_size,
                               channels // (patch_size * patch_size))
        latents = latents.permute(0, 5, 1, 3, 2, 4)
        latents = latents.reshape(batch_size, num_frames, channels // (patch_size * patch_size), height * patch_size,
                                  width * patch_size)
        return latents

    def forward(self, hidden_states, timestep, r_timestep, encoder_hidden_states, encoder_hidden_states_image=None,
                attention_kwargs=None, return_dict=True):
        hidden_states = hidden_states.permute(0, 2, 1, 3, 4)
        batch_size, num_channels, num_frames, height, width = hidden_states.shape
        full_token_per_frame = (height * width) // (self.patch_size[1] * self.patch_size[2])
        far_cfg = {"total_frames": num_frames,
                   "full_frame_shape": (height // self.patch_size[1], width // self.patch_size[2]),
                   "full_token_per_frame": full_token_per_frame}

        rotary_emb = self.rope(far_cfg=far_cfg, device=hidden_states.device, is_causal=False)

        hidden_states = self.patch_embedding(hidden_states)
        hidden_states = hidden_states.flatten(2).transpose(1, 2)

        temb, timestep_proj, encoder_hidden_states, encoder_hidden_states_image = self.condition_embedder(
            timestep, r_timestep, encoder_hidden_states, encoder_hidden_states_image, is_causal=False,
            far_cfg=far_cfg)
        timestep_proj = timestep_proj.unflatten(2, (6, -1))

        attention_mask = None
        for block in self.blocks:
            hidden_states = block(hidden_states, encoder_hidden_states, timestep_proj, rotary_emb, attention_mask)

        if temb.ndim == 3:
            shift, scale = (self.scale_shift_table.unsqueeze(0) + temb.unsqueeze(2)).chunk(2, dim=2)
            shift = shift.squeeze(2)
            scale = scale.squeeze(2)
        else:
            shift, scale = (self.scale_shift_table + temb.unsqueeze(1)).chunk(2, dim=1)
        shift = shift.to(hidden_states.device)
        scale = scale.to(hidden_states.device)

        hidden_states = (self.norm_out(hidden_states.float()) * (1 + scale) + shift).type_as(hidden_states)
        hidden_states = self.proj_out(hidden_states)
        output = self._unpack_latent_sequence(hidden_states, num_frames=far_cfg["total_frames"], height=height,
                                              width=width, patch_size=self.patch_size[1])
        return (output,)


SMALL = "--small" in sys.argv  # one block: the fixtures/unseen trace


def build():
    # Wan-sized like the skyreels_v2 replica: 2 heads of 18 (RoPE t/h/w 6/6/6 as 3/3/3 complex pairs), 2 blocks,
    # text 16 wide, sinusoid 16 wide.
    return AnyFlowTransformer3DModel(patch_size=(1, 2, 2), num_attention_heads=2, attention_head_dim=18,
                                     in_channels=4, out_channels=4, text_dim=16, freq_dim=16, ffn_dim=64,
                                     num_layers=1 if SMALL else 2, cross_attn_norm=True, eps=1e-6, rope_max_seq_len=32,
                                     gate_value=0.25, deltatime_type="r")


def inputs(g):
    # AnyFlowPipeline's layout: latents (B, T, C, H, W), 2 latent frames of 4x8
    return {"encoder_hidden_states": torch.randn((1, 4, 16), generator=g),
            "noise": torch.randn((1, 2, 4, 4, 8), generator=g)}


SIGMAS = [1.0, 0.75, 0.4, 0.0]  # run.py's


def call(model, x, sigma, c):
    # AnyFlowPipeline: t = scheduler.timesteps[i] (sigma*1000, float32), r = sigmas[i + 1]*1000, each expanded to the
    # batch and repeated over the latent frames
    i = SIGMAS.index(sigma)
    t = torch.tensor(sigma, dtype=torch.float32) * 1000
    r = torch.tensor(SIGMAS[i + 1], dtype=torch.float32) * 1000
    timestep = t.expand(x.shape[0]).unsqueeze(-1).repeat((1, x.shape[1]))
    r_timestep = r.expand(x.shape[0]).unsqueeze(-1).repeat((1, x.shape[1]))
    return model(hidden_states=x, timestep=timestep, r_timestep=r_timestep,
                 encoder_hidden_states=c["encoder_hidden_states"], attention_kwargs=None, return_dict=False)[0]


PRODUCER = dict(
    library_source="replica of huggingface/diffusers transformer_anyflow.py@0df6c051488d and the parts it imports "
                   "(torch 1.13)",
    timestep="sigma*1000 float32 per frame [B, F]; r_timestep = next sigma*1000 per frame (AnyFlowPipeline, "
             "use_mean_velocity)",
    velocity="model output as is (flow-map mean velocity), not negated",
    note="AnyFlow bidirectional flow-map video DiT (Wan2.1 body), 2 blocks: frames-first latents permuted to "
         "[B, C, F, H, W], 3-D conv patchify; t and r through one sinusoid module, t via time_embedder, r via "
         "delta_embedder, mixed (1-g)*temb + g*delta_emb with a fixed gate buffer g=0.25, repeated over each "
         "frame's tokens (per-token 6-way modulation); FP32 LayerNorms; across-heads RMSNorm q/k; complex128 3-D "
         "RoPE on [B, H, L, D]; affine-LayerNorm cross-attention to the projected text; GELU-tanh FFN; final "
         "(shift, scale) per token; unpatchify (p_h, p_w, C) -> (C, h, p, w, p); 2 latent frames of 4x8")

if __name__ == "__main__":
    capture("anyflow", build, inputs, call, sys.argv[1], PRODUCER)
