"""Wan 2.2 TI2V-5B video DiT, reimplemented for torch 1.13 (no diffusers here), captured small in f32 on CPU.

Follows huggingface/diffusers src/diffusers/models/transformers/transformer_wan.py at
b6bd8f1fb709d8ff1310d1a9b649f4225cf2ca47 (WanTransformer3DModel, WanTransformerBlock, WanAttention with
WanAttnProcessor's __call__ as its forward, WanRotaryPosEmbed, WanTimeTextImageEmbedding with timestep_seq_len) with
the parts it imports: attention.py (FeedForward "gelu-approximate", GELU), embeddings.py (Timesteps,
TimestepEmbedding, PixArtAlphaTextProjection act_fn "gelu_tanh", get_1d_rotary_pos_embed) and normalization.py
(FP32LayerNorm): the same module tree, parameter names and shapes, and call boundaries; the arithmetic line for line.
Stand-ins for what torch 1.13 lacks: torch.nn.RMSNorm (eps given) and dispatch_attention_fn (SDPA's math on [B, L,
H, D], default scale, no mask).

The construct it shows: the pipeline's expand_timesteps (Wan2.2-TI2V-5B's config): a timestep per token, [B, S], so
the sinusoid, the time embedder and time_proj run per token ([B, S, D], [B, S, 6·D]) and every block's and the output
norm's shift, scale and gate are per token (the [1, 6, D] table added to [B, S, 6, D]). Image to video
(WanImageToVideoPipeline with expand_timesteps, the default here): the first latent frame is replaced by the image's
latents before every call, (1 − mask)·condition + mask·latents, and its tokens take timestep 0 (mask[0][0][:, ::2,
::2]·t, flattened); --t2v: the text-to-video path (WanPipeline, mask all ones: every token's timestep t).

Pipeline as WanImageToVideoPipeline / WanPipeline call it (flow UniPC timesteps, float): t = σ·1000, velocity the
output as is; the loop's latents are all frames (the first frame's velocity is computed and overwritten on the next
call, as upstream).

usage: /usr/bin/python3 bench/unseen/replicas/wan22_ti2v.py OUTDIR [--t2v] [--small]
"""
import math
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

from parts import TorchRMSNorm
from run import capture, get_timestep_embedding, sdpa


class RMSNorm(TorchRMSNorm):
    """torch 2's nn.RMSNorm(dim, eps, elementwise_affine=True)."""


class FP32LayerNorm(nn.LayerNorm):
    def forward(self, inputs):
        origin_dtype = inputs.dtype
        return F.layer_norm(inputs.float(), self.normalized_shape,
                            self.weight.float() if self.weight is not None else None,
                            self.bias.float() if self.bias is not None else None, self.eps).to(origin_dtype)


def get_1d_rotary_pos_embed(dim, pos, theta=10000.0, use_real=False, linear_factor=1.0, ntk_factor=1.0,
                            repeat_interleave_real=True, freqs_dtype=torch.float32):
    assert dim % 2 == 0
    if isinstance(pos, int):
        pos = torch.arange(pos)
    theta = theta * ntk_factor
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=freqs_dtype, device=pos.device)[: (dim // 2)] / dim)) \
        / linear_factor
    freqs = torch.outer(pos, freqs)
    if use_real and repeat_interleave_real:
        freqs_cos = freqs.cos().repeat_interleave(2, dim=1).float()
        freqs_sin = freqs.sin().repeat_interleave(2, dim=1).float()
        return freqs_cos, freqs_sin
    raise NotImplementedError("only the real, interleaved table is used here")


class GELU(nn.Module):
    def __init__(self, dim_in, dim_out, approximate="none", bias=True):
        super().__init__()
        self.proj = nn.Linear(dim_in, dim_out, bias=bias)
        self.approximate = approximate

    def forward(self, hidden_states):
        hidden_states = self.proj(hidden_states)
        return F.gelu(hidden_states, approximate=self.approximate)


class FeedForward(nn.Module):
    """FeedForward(dim, inner_dim=ffn_dim, activation_fn="gelu-approximate"); approximate "none" with dim_out: the
    image embedder's FeedForward(in, out, mult=1, activation_fn="gelu")."""

    def __init__(self, dim, inner_dim, dropout=0.0, bias=True, out_features=None, approximate="tanh"):
        super().__init__()
        self.net = nn.ModuleList([GELU(dim, inner_dim, approximate=approximate, bias=bias), nn.Dropout(dropout),
                                  nn.Linear(inner_dim, out_features or dim, bias=bias)])

    def forward(self, hidden_states):
        for module in self.net:
            hidden_states = module(hidden_states)
        return hidden_states


class TimestepEmbedding(nn.Module):
    def __init__(self, in_channels, time_embed_dim):
        super().__init__()
        self.linear_1 = nn.Linear(in_channels, time_embed_dim, True)
        self.act = nn.SiLU()
        self.linear_2 = nn.Linear(time_embed_dim, time_embed_dim, True)

    def forward(self, sample):
        sample = self.linear_1(sample)
        sample = self.act(sample)
        return self.linear_2(sample)


class PixArtAlphaTextProjection(nn.Module):
    def __init__(self, in_features, hidden_size):
        super().__init__()
        self.linear_1 = nn.Linear(in_features, hidden_size, bias=True)
        self.act_1 = nn.GELU(approximate="tanh")
        self.linear_2 = nn.Linear(hidden_size, hidden_size, bias=True)

    def forward(self, caption):
        hidden_states = self.linear_1(caption)
        hidden_states = self.act_1(hidden_states)
        return self.linear_2(hidden_states)


class WanAttention(nn.Module):
    """With WanAttnProcessor's __call__ as its forward; added_kv_proj_dim (Wan 2.1 image to video): the encoder
    states' first rows past the 512 of the text are the image's, attended through add_k_proj and add_v_proj (keys
    RMS-normed across heads) and added to the text's attention."""

    def __init__(self, dim, heads=8, dim_head=64, eps=1e-5, dropout=0.0, added_kv_proj_dim=None,
                 cross_attention_dim_head=None, processor=None, is_cross_attention=None):
        super().__init__()
        self.inner_dim = dim_head * heads
        self.heads = heads
        self.added_kv_proj_dim = added_kv_proj_dim
        self.cross_attention_dim_head = cross_attention_dim_head
        self.kv_inner_dim = self.inner_dim if cross_attention_dim_head is None else cross_attention_dim_head * heads
        self.to_q = nn.Linear(dim, self.inner_dim, bias=True)
        self.to_k = nn.Linear(dim, self.kv_inner_dim, bias=True)
        self.to_v = nn.Linear(dim, self.kv_inner_dim, bias=True)
        self.to_out = nn.ModuleList([nn.Linear(self.inner_dim, dim, bias=True), nn.Dropout(dropout)])
        self.norm_q = RMSNorm(dim_head * heads, eps=eps, elementwise_affine=True)
        self.norm_k = RMSNorm(dim_head * heads, eps=eps, elementwise_affine=True)
        self.add_k_proj = self.add_v_proj = None
        if added_kv_proj_dim is not None:
            self.add_k_proj = nn.Linear(added_kv_proj_dim, self.inner_dim, bias=True)
            self.add_v_proj = nn.Linear(added_kv_proj_dim, self.inner_dim, bias=True)
            self.norm_added_k = RMSNorm(dim_head * heads, eps=eps)
        self.is_cross_attention = cross_attention_dim_head is not None

    def forward(self, hidden_states, encoder_hidden_states=None, attention_mask=None, rotary_emb=None):
        attn = self
        encoder_hidden_states_img = None
        if attn.add_k_proj is not None:
            # 512 is the context length of the text encoder, hardcoded upstream
            image_context_length = encoder_hidden_states.shape[1] - 512
            encoder_hidden_states_img = encoder_hidden_states[:, :image_context_length]
            encoder_hidden_states = encoder_hidden_states[:, image_context_length:]
        if encoder_hidden_states is None:
            encoder_hidden_states = hidden_states
        query = attn.to_q(hidden_states)
        key = attn.to_k(encoder_hidden_states)
        value = attn.to_v(encoder_hidden_states)

        query = attn.norm_q(query)
        key = attn.norm_k(key)

        query = query.unflatten(2, (attn.heads, -1))
        key = key.unflatten(2, (attn.heads, -1))
        value = value.unflatten(2, (attn.heads, -1))

        if rotary_emb is not None:
            def apply_rotary_emb(hidden_states, freqs_cos, freqs_sin):
                x1, x2 = hidden_states.unflatten(-1, (-1, 2)).unbind(-1)
                cos = freqs_cos[..., 0::2]
                sin = freqs_sin[..., 1::2]
                out = torch.empty_like(hidden_states)
                out[..., 0::2] = x1 * cos - x2 * sin
                out[..., 1::2] = x1 * sin + x2 * cos
                return out.type_as(hidden_states)

            query = apply_rotary_emb(query, *rotary_emb)
            key = apply_rotary_emb(key, *rotary_emb)

        hidden_states_img = None
        if encoder_hidden_states_img is not None:
            key_img = attn.add_k_proj(encoder_hidden_states_img)
            value_img = attn.add_v_proj(encoder_hidden_states_img)
            key_img = attn.norm_added_k(key_img)
            key_img = key_img.unflatten(2, (attn.heads, -1))
            value_img = value_img.unflatten(2, (attn.heads, -1))
            hidden_states_img = sdpa(query.transpose(1, 2), key_img.transpose(1, 2),
                                     value_img.transpose(1, 2)).transpose(1, 2)
            hidden_states_img = hidden_states_img.flatten(2, 3)
            hidden_states_img = hidden_states_img.type_as(query)

        # dispatch_attention_fn on [B, L, H, D]: SDPA's math on [B, H, L, D], default scale, no mask.
        hidden_states = sdpa(query.transpose(1, 2), key.transpose(1, 2), value.transpose(1, 2),
                             mask=attention_mask).transpose(1, 2)
        hidden_states = hidden_states.flatten(2, 3)
        hidden_states = hidden_states.type_as(query)
        if hidden_states_img is not None:
            hidden_states = hidden_states + hidden_states_img

        hidden_states = attn.to_out[0](hidden_states)
        hidden_states = attn.to_out[1](hidden_states)
        return hidden_states


class Timesteps(nn.Module):
    def __init__(self, num_channels, flip_sin_to_cos, downscale_freq_shift, scale=1):
        super().__init__()
        self.num_channels, self.flip_sin_to_cos = num_channels, flip_sin_to_cos
        self.downscale_freq_shift, self.scale = downscale_freq_shift, scale

    def forward(self, timesteps):
        return get_timestep_embedding(timesteps, self.num_channels, flip_sin_to_cos=self.flip_sin_to_cos,
                                      downscale_freq_shift=self.downscale_freq_shift, scale=self.scale)


class WanTimeTextImageEmbedding(nn.Module):
    def __init__(self, dim, time_freq_dim, time_proj_dim, text_embed_dim, image_embed_dim=None,
                 pos_embed_seq_len=None):
        super().__init__()
        self.timesteps_proj = Timesteps(num_channels=time_freq_dim, flip_sin_to_cos=True, downscale_freq_shift=0)
        self.time_embedder = TimestepEmbedding(in_channels=time_freq_dim, time_embed_dim=dim)
        self.act_fn = nn.SiLU()
        self.time_proj = nn.Linear(dim, time_proj_dim)
        self.text_embedder = PixArtAlphaTextProjection(text_embed_dim, dim)
        self.image_embedder = None
        if image_embed_dim is not None:
            self.image_embedder = WanImageEmbedding(image_embed_dim, dim, pos_embed_seq_len=pos_embed_seq_len)

    def forward(self, timestep, encoder_hidden_states, encoder_hidden_states_image=None, timestep_seq_len=None):
        timestep = self.timesteps_proj(timestep)
        if timestep_seq_len is not None:
            timestep = timestep.unflatten(0, (-1, timestep_seq_len))
        time_embedder_dtype = next(iter(self.time_embedder.parameters())).dtype  # get_parameter_dtype
        if timestep.dtype != time_embedder_dtype and time_embedder_dtype != torch.int8:
            timestep = timestep.to(time_embedder_dtype)
        temb = self.time_embedder(timestep).type_as(encoder_hidden_states)
        timestep_proj = self.time_proj(self.act_fn(temb))
        encoder_hidden_states = self.text_embedder(encoder_hidden_states)
        if encoder_hidden_states_image is not None:
            encoder_hidden_states_image = self.image_embedder(encoder_hidden_states_image)
        return temb, timestep_proj, encoder_hidden_states, encoder_hidden_states_image


class WanImageEmbedding(nn.Module):
    """FP32LayerNorm, FeedForward(in, out, mult=1, activation_fn "gelu"), FP32LayerNorm: the CLIP image tokens."""

    def __init__(self, in_features, out_features, pos_embed_seq_len=None):
        super().__init__()
        self.norm1 = FP32LayerNorm(in_features)
        self.ff = FeedForward(in_features, in_features, out_features=out_features, approximate="none")
        self.norm2 = FP32LayerNorm(out_features)
        assert pos_embed_seq_len is None
        self.pos_embed = None

    def forward(self, encoder_hidden_states_image):
        hidden_states = self.norm1(encoder_hidden_states_image)
        hidden_states = self.ff(hidden_states)
        return self.norm2(hidden_states)


class WanRotaryPosEmbed(nn.Module):
    def __init__(self, attention_head_dim, patch_size, max_seq_len, theta=10000.0):
        super().__init__()
        self.attention_head_dim = attention_head_dim
        self.patch_size = patch_size
        self.max_seq_len = max_seq_len
        h_dim = w_dim = 2 * (attention_head_dim // 6)
        t_dim = attention_head_dim - h_dim - w_dim
        freqs_dtype = torch.float64
        freqs_cos = []
        freqs_sin = []
        for dim in [t_dim, h_dim, w_dim]:
            freq_cos, freq_sin = get_1d_rotary_pos_embed(dim, max_seq_len, theta, use_real=True,
                                                         repeat_interleave_real=True, freqs_dtype=freqs_dtype)
            freqs_cos.append(freq_cos)
            freqs_sin.append(freq_sin)
        self.register_buffer("freqs_cos", torch.cat(freqs_cos, dim=1), persistent=False)
        self.register_buffer("freqs_sin", torch.cat(freqs_sin, dim=1), persistent=False)

    def forward(self, hidden_states):
        batch_size, num_channels, num_frames, height, width = hidden_states.shape
        p_t, p_h, p_w = self.patch_size
        ppf, pph, ppw = num_frames // p_t, height // p_h, width // p_w
        split_sizes = [self.attention_head_dim - 2 * (self.attention_head_dim // 3), self.attention_head_dim // 3,
                       self.attention_head_dim // 3]
        freqs_cos = self.freqs_cos.split(split_sizes, dim=1)
        freqs_sin = self.freqs_sin.split(split_sizes, dim=1)
        freqs_cos_f = freqs_cos[0][:ppf].view(ppf, 1, 1, -1).expand(ppf, pph, ppw, -1)
        freqs_cos_h = freqs_cos[1][:pph].view(1, pph, 1, -1).expand(ppf, pph, ppw, -1)
        freqs_cos_w = freqs_cos[2][:ppw].view(1, 1, ppw, -1).expand(ppf, pph, ppw, -1)
        freqs_sin_f = freqs_sin[0][:ppf].view(ppf, 1, 1, -1).expand(ppf, pph, ppw, -1)
        freqs_sin_h = freqs_sin[1][:pph].view(1, pph, 1, -1).expand(ppf, pph, ppw, -1)
        freqs_sin_w = freqs_sin[2][:ppw].view(1, 1, ppw, -1).expand(ppf, pph, ppw, -1)
        freqs_cos = torch.cat([freqs_cos_f, freqs_cos_h, freqs_cos_w], dim=-1).reshape(1, ppf * pph * ppw, 1, -1)
        freqs_sin = torch.cat([freqs_sin_f, freqs_sin_h, freqs_sin_w], dim=-1).reshape(1, ppf * pph * ppw, 1, -1)
        return freqs_cos, freqs_sin


class WanTransformerBlock(nn.Module):
    def __init__(self, dim, ffn_dim, num_heads, qk_norm="rms_norm_across_heads", cross_attn_norm=False, eps=1e-6,
                 added_kv_proj_dim=None):
        super().__init__()
        self.norm1 = FP32LayerNorm(dim, eps, elementwise_affine=False)
        self.attn1 = WanAttention(dim=dim, heads=num_heads, dim_head=dim // num_heads, eps=eps,
                                  cross_attention_dim_head=None)
        self.attn2 = WanAttention(dim=dim, heads=num_heads, dim_head=dim // num_heads, eps=eps,
                                  added_kv_proj_dim=added_kv_proj_dim, cross_attention_dim_head=dim // num_heads)
        self.norm2 = FP32LayerNorm(dim, eps, elementwise_affine=True) if cross_attn_norm else nn.Identity()
        self.ffn = FeedForward(dim, inner_dim=ffn_dim)
        self.norm3 = FP32LayerNorm(dim, eps, elementwise_affine=False)
        self.scale_shift_table = nn.Parameter(torch.randn(1, 6, dim) / dim ** 0.5)

    def forward(self, hidden_states, encoder_hidden_states, temb, rotary_emb):
        if temb.ndim == 4:
            # temb: batch_size, seq_len, 6, inner_dim (wan2.2 ti2v)
            shift_msa, scale_msa, gate_msa, c_shift_msa, c_scale_msa, c_gate_msa = (
                self.scale_shift_table.unsqueeze(0) + temb.float()).chunk(6, dim=2)
            shift_msa = shift_msa.squeeze(2)
            scale_msa = scale_msa.squeeze(2)
            gate_msa = gate_msa.squeeze(2)
            c_shift_msa = c_shift_msa.squeeze(2)
            c_scale_msa = c_scale_msa.squeeze(2)
            c_gate_msa = c_gate_msa.squeeze(2)
        else:
            # temb: batch_size, 6, inner_dim (wan2.1/wan2.2 14B)
            shift_msa, scale_msa, gate_msa, c_shift_msa, c_scale_msa, c_gate_msa = (
                self.scale_shift_table + temb.float()).chunk(6, dim=1)
        norm_hidden_states = (self.norm1(hidden_states.float()) * (1 + scale_msa) + shift_msa).type_as(hidden_states)
        attn_output = self.attn1(norm_hidden_states, None, None, rotary_emb)
        hidden_states = (hidden_states.float() + attn_output * gate_msa).type_as(hidden_states)
        norm_hidden_states = self.norm2(hidden_states.float()).type_as(hidden_states)
        attn_output = self.attn2(norm_hidden_states, encoder_hidden_states, None, None)
        hidden_states = hidden_states + attn_output
        norm_hidden_states = (self.norm3(hidden_states.float()) * (1 + c_scale_msa) + c_shift_msa).type_as(
            hidden_states)
        ff_output = self.ffn(norm_hidden_states)
        hidden_states = (hidden_states.float() + ff_output.float() * c_gate_msa).type_as(hidden_states)
        return hidden_states


class WanTransformer3DModel(nn.Module):
    _keep_in_fp32_modules = ["time_embedder", "scale_shift_table", "norm1", "norm2", "norm3"]

    def __init__(self, patch_size=(1, 2, 2), num_attention_heads=40, attention_head_dim=128, in_channels=16,
                 out_channels=16, text_dim=4096, freq_dim=256, ffn_dim=13824, num_layers=40, cross_attn_norm=True,
                 qk_norm="rms_norm_across_heads", eps=1e-6, image_dim=None, added_kv_proj_dim=None,
                 rope_max_seq_len=1024, pos_embed_seq_len=None):
        super().__init__()
        self.patch_size = patch_size
        inner_dim = num_attention_heads * attention_head_dim
        out_channels = out_channels or in_channels
        self.rope = WanRotaryPosEmbed(attention_head_dim, patch_size, rope_max_seq_len)
        self.patch_embedding = nn.Conv3d(in_channels, inner_dim, kernel_size=patch_size, stride=patch_size)
        self.condition_embedder = WanTimeTextImageEmbedding(dim=inner_dim, time_freq_dim=freq_dim,
                                                            time_proj_dim=inner_dim * 6, text_embed_dim=text_dim,
                                                            image_embed_dim=image_dim,
                                                            pos_embed_seq_len=pos_embed_seq_len)
        self.blocks = nn.ModuleList([WanTransformerBlock(inner_dim, ffn_dim, num_attention_heads, qk_norm,
                                                         cross_attn_norm, eps, added_kv_proj_dim)
                                     for _ in range(num_layers)])
        self.norm_out = FP32LayerNorm(inner_dim, eps, elementwise_affine=False)
        self.proj_out = nn.Linear(inner_dim, out_channels * math.prod(patch_size))
        self.scale_shift_table = nn.Parameter(torch.randn(1, 2, inner_dim) / inner_dim ** 0.5)

    def forward(self, hidden_states, timestep, encoder_hidden_states, encoder_hidden_states_image=None,
                return_dict=True, attention_kwargs=None):
        batch_size, num_channels, num_frames, height, width = hidden_states.shape
        p_t, p_h, p_w = self.patch_size
        post_patch_num_frames = num_frames // p_t
        post_patch_height = height // p_h
        post_patch_width = width // p_w

        rotary_emb = self.rope(hidden_states)

        hidden_states = self.patch_embedding(hidden_states)
        hidden_states = hidden_states.flatten(2).transpose(1, 2)

        # timestep shape: batch_size, or batch_size, seq_len (wan 2.2 ti2v)
        if timestep.ndim == 2:
            ts_seq_len = timestep.shape[1]
            timestep = timestep.flatten()  # batch_size * seq_len
        else:
            ts_seq_len = None

        temb, timestep_proj, encoder_hidden_states, encoder_hidden_states_image = self.condition_embedder(
            timestep, encoder_hidden_states, encoder_hidden_states_image, timestep_seq_len=ts_seq_len)
        if ts_seq_len is not None:
            timestep_proj = timestep_proj.unflatten(2, (6, -1))
        else:
            timestep_proj = timestep_proj.unflatten(1, (6, -1))

        if encoder_hidden_states_image is not None:
            encoder_hidden_states = torch.concat([encoder_hidden_states_image, encoder_hidden_states], dim=1)

        for block in self.blocks:
            hidden_states = block(hidden_states, encoder_hidden_states, timestep_proj, rotary_emb)

        if temb.ndim == 3:
            # batch_size, seq_len, inner_dim (wan 2.2 ti2v)
            shift, scale = (self.scale_shift_table.unsqueeze(0).to(temb.device) + temb.unsqueeze(2)).chunk(2, dim=2)
            shift = shift.squeeze(2)
            scale = scale.squeeze(2)
        else:
            shift, scale = (self.scale_shift_table.to(temb.device) + temb.unsqueeze(1)).chunk(2, dim=1)
        shift = shift.to(hidden_states.device)
        scale = scale.to(hidden_states.device)
        hidden_states = (self.norm_out(hidden_states.float()) * (1 + scale) + shift).type_as(hidden_states)
        hidden_states = self.proj_out(hidden_states)
        hidden_states = hidden_states.reshape(batch_size, post_patch_num_frames, post_patch_height, post_patch_width,
                                              p_t, p_h, p_w, -1)
        hidden_states = hidden_states.permute(0, 7, 1, 4, 2, 5, 3, 6)
        output = hidden_states.flatten(6, 7).flatten(4, 5).flatten(2, 3)
        return (output,)


SMALL = "--small" in sys.argv  # one block: the fixtures/unseen trace


def build():
    # Wan-sized like the skyreels_v2 replica: 2 heads of 18 (RoPE t/h/w 6/6/6), 2 blocks, text 16 wide, sinusoid 16
    # wide; latents of 4 channels (48 upstream) over 3 frames of 4x4.
    return WanTransformer3DModel(patch_size=(1, 2, 2), num_attention_heads=2, attention_head_dim=18, in_channels=4,
                                 out_channels=4, text_dim=16, freq_dim=16, ffn_dim=64, num_layers=1 if SMALL else 2,
                                 cross_attn_norm=True, qk_norm="rms_norm_across_heads", eps=1e-6,
                                 rope_max_seq_len=32)


T2V = "--t2v" in sys.argv


def inputs(g):
    c = {"encoder_hidden_states": torch.randn((1, 4, 16), generator=g),
         "noise": torch.randn((1, 4, 3, 4, 4), generator=g)}
    if not T2V:
        # prepare_latents with expand_timesteps: the image's latents in frame 0 of the condition
        c["condition"] = torch.randn((1, 4, 1, 4, 4), generator=g)
    return c


def call(model, x, sigma, c):
    t = torch.tensor(sigma * 1000, dtype=torch.float32)
    if T2V:
        mask = torch.ones(x.shape, dtype=torch.float32)
        latent_model_input = x
    else:
        first_frame_mask = torch.ones((1, 1) + tuple(x.shape[2:]), dtype=torch.float32)
        first_frame_mask[:, :, 0] = 0
        condition = torch.cat([c["condition"], torch.zeros_like(x[:, :, 1:])], dim=2)
        # the pipeline casts the model input to the transformer's dtype (a no-op in f32)
        latent_model_input = ((1 - first_frame_mask) * condition + first_frame_mask * x).to(x.dtype)
        mask = first_frame_mask
    temp_ts = (mask[0][0][:, ::2, ::2] * t).flatten()
    timestep = temp_ts.unsqueeze(0).expand(x.shape[0], -1)
    return model(hidden_states=latent_model_input, timestep=timestep, encoder_hidden_states=c["encoder_hidden_states"],
                 return_dict=False, attention_kwargs=None)[0]


PRODUCER = dict(
    library_source="replica of huggingface/diffusers transformer_wan.py@b6bd8f1fb709 and the parts it imports "
                   "(torch 1.13)",
    timestep="sigma*1000 float32 per token: (mask[0][0][:, ::2, ::2]*t).flatten() expanded to [B, S] "
             "(expand_timesteps)",
    velocity="model output as is (flow prediction), not negated",
    note="Wan 2.2 TI2V-5B DiT, 2 blocks: a timestep per token, the sinusoid, time embedder and time_proj per token "
         "and the 6-way modulation and the output norm's (shift, scale) per token ([1, 6, D] table + [B, S, 6, D]); "
         + ("text to video: every token's timestep t; " if T2V else
            "image to video: the first latent frame replaced by the image latents before each call, its tokens at "
            "timestep 0; ")
         + "3-D conv patchify, across-heads RMSNorm q/k, interleaved 3-D RoPE (f64 tables), cross-attention to the "
         "projected text, GELU-tanh FFN; 3 latent frames of 4x4")

if __name__ == "__main__":
    capture("wan22_ti2v_t2v" if T2V else "wan22_ti2v", build, inputs, call, sys.argv[1], PRODUCER)
