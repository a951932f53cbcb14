"""Kandinsky 6 (text to video, the video path of the fused video/audio model), reimplemented for torch 1.13 (no
diffusers here), captured small in f32 on CPU.

Follows huggingface/diffusers src/diffusers/models/transformers/transformer_kandinsky6.py at
90bd8aa0ae10c4c49da5ee9c2c521d7a8dbab218 (Kandinsky6Transformer3DModel, Kandinsky6FusedTransformerDecoderBlock,
Kandinsky6TransformerDecoderBlock, Kandinsky6TransformerEncoderBlock, Kandinsky6Attention with
Kandinsky6AttnProcessor's __call__ as its forward, Kandinsky6Modulation, Kandinsky6TimeEmbeddings,
Kandinsky6TextEmbeddings, Kandinsky6VisualEmbeddings, Kandinsky6OutLayer, Kandinsky6OutLayerAudio, Kandinsky6RoPE1D,
Kandinsky6RoPE3D, get_freqs, apply_scale_shift, apply_gate_sum, apply_rotary) with the parts it imports:
attention.py (FeedForward with "gelu", no bias), activations.py (GELU) and embeddings.py (Timesteps,
TimestepEmbedding): the same module tree (the audio modules too, built and, but for the audio text branch, not
called), parameter names and shapes, and call boundaries; the arithmetic line for line. Stand-ins for what torch 1.13
lacks: torch.nn.RMSNorm (eps None: the dtype's machine epsilon) and dispatch_attention_fn (SDPA's math on [B, L, H,
D], default scale, no mask). The released checkpoints' flags (text_token_padding, ca_rope, cross_gates,
fix_modulation True); they change only the audio path's modules.

The constructs it shows beside Kandinsky 5: the text branch run twice (a video and an audio text encoder over the same
caption, each with its own time embedding plus pooled-text embedding); the audio text branch's result is passed to
every fused block and read by none on the video path (work whose result no output needs); channels-last video
latents joined with a zero condition and a zero mask channel ([latents | condition | mask] on the last axis), patched
channels last, unpatchified channels last; 2x2-matrix RoPE (interleaved pairs) from buffer tables gathered by
positions, the video's h and w angles divided by 2 (scale_factor (1, 2, 2)); RMSNorm q/k per head with torch's
default epsilon; 9-way modulation in the decoder blocks (self-attention, cross-attention, FFN; shift, scale, gate
each), [shift, scale] at the output.

Pipeline as Kandinsky6TI2VAPipeline (pipeline_kandinsky6_ti2va.py at 866e165141451772fb42235438a70f9803bfae2b)
calls it for text to video without audio (sample_audio False) and with its guider off (guidance 1): latents (B, T, H,
W, C) joined on the last axis with zeros and a zero mask channel, timestep t.expand(B) (sigma*1000 of the
flow-matching scheduler, shift 1 here), no prompt mask (one prompt, not padded), velocity the output as is.

usage: /usr/bin/python3 bench/unseen/replicas/kandinsky6.py OUTDIR
"""
import math
import sys

import torch
import torch.nn.functional as F
from torch import nn

from parts import TorchRMSNorm
from run import capture, get_timestep_embedding, sdpa


def get_freqs(dim, max_period=10000.0):
    return torch.exp(-math.log(max_period) * torch.arange(start=0, end=dim, dtype=torch.float32) / dim)


def apply_scale_shift(normed, x, scale, shift):
    if x.ndim > 2 and scale.ndim == 2:
        shape = (scale.shape[0],) + (1,) * (x.ndim - 2) + (scale.shape[-1],)
        scale, shift = scale.reshape(shape), shift.reshape(shape)
    return (normed * (scale.float() + 1.0) + shift.float()).to(dtype=x.dtype)


def apply_gate_sum(x, out, gate):
    if x.ndim > 2 and gate.ndim == 2:
        gate = gate.reshape((gate.shape[0],) + (1,) * (x.ndim - 2) + (gate.shape[-1],))
    return (x.float() + gate.float() * out.float()).to(dtype=x.dtype)


def apply_rotary(x, rope):
    x_ = x.reshape(*x.shape[:-1], -1, 1, 2).float()
    return (rope.float() * x_).sum(dim=-1).reshape(*x.shape).to(dtype=x.dtype)


class Timesteps(nn.Module):
    def __init__(self, num_channels, flip_sin_to_cos, downscale_freq_shift, scale=1):
        super().__init__()
        self.num_channels, self.flip_sin_to_cos = num_channels, flip_sin_to_cos
        self.downscale_freq_shift, self.scale = downscale_freq_shift, scale

    def forward(self, timesteps):
        return get_timestep_embedding(timesteps, self.num_channels, flip_sin_to_cos=self.flip_sin_to_cos,
                                      downscale_freq_shift=self.downscale_freq_shift, scale=self.scale)


class TimestepEmbedding(nn.Module):
    def __init__(self, in_channels, time_embed_dim, act_fn="silu", sample_proj_bias=True):
        super().__init__()
        self.linear_1 = nn.Linear(in_channels, time_embed_dim, sample_proj_bias)
        self.act = nn.SiLU()
        self.linear_2 = nn.Linear(time_embed_dim, time_embed_dim, sample_proj_bias)

    def forward(self, sample):
        return self.linear_2(self.act(self.linear_1(sample)))


class GELU(nn.Module):
    def __init__(self, dim_in, dim_out, approximate="none", bias=True):
        super().__init__()
        self.proj = nn.Linear(dim_in, dim_out, bias=bias)
        self.approximate = approximate

    def forward(self, hidden_states):
        return F.gelu(self.proj(hidden_states), approximate=self.approximate)


class FeedForward(nn.Module):
    """attention.FeedForward(dim, inner_dim=ff_dim, activation_fn="gelu", bias=False)."""

    def __init__(self, dim, inner_dim, activation_fn="gelu", bias=False, dropout=0.0):
        super().__init__()
        assert activation_fn == "gelu"
        self.net = nn.ModuleList([GELU(dim, inner_dim, bias=bias), nn.Dropout(dropout),
                                  nn.Linear(inner_dim, dim, bias=bias)])

    def forward(self, hidden_states):
        for module in self.net:
            hidden_states = module(hidden_states)
        return hidden_states


class Kandinsky6RoPE1D(nn.Module):
    def __init__(self, dim, max_pos=2048, max_period=10000.0, freqs_scaling=1.0):
        super().__init__()
        self.dim = dim
        self.max_pos = max_pos
        self.max_period = max_period
        self.freqs_scaling = freqs_scaling
        freq = get_freqs(dim // 2, max_period) * freqs_scaling
        self.register_buffer("angles", torch.outer(torch.arange(max_pos, dtype=freq.dtype), freq), persistent=False)

    def forward(self, pos):
        angles = self.angles[pos]
        rope = torch.stack([torch.cos(angles), -torch.sin(angles), torch.sin(angles), torch.cos(angles)], dim=-1)
        return rope.view(*rope.shape[:-1], 2, 2).unsqueeze(-4)


class Kandinsky6RoPE3D(nn.Module):
    def __init__(self, axes_dims, max_pos=(128, 128, 128), max_period=10000.0):
        super().__init__()
        self.axes_dims = axes_dims
        self.max_pos = max_pos
        self.max_period = max_period
        for i, (d, mp) in enumerate(zip(axes_dims, max_pos)):
            freq = get_freqs(d // 2, max_period)
            self.register_buffer(f"angles_{i}", torch.outer(torch.arange(mp, dtype=freq.dtype), freq),
                                 persistent=False)

    def forward(self, pos, scale_factor=(1.0, 1.0, 1.0)):
        num_frames, height, width = (int(axis_pos.shape[0]) for axis_pos in pos)
        angles_t = self.angles_0[pos[0]] / scale_factor[0]
        angles_h = self.angles_1[pos[1]] / scale_factor[1]
        angles_w = self.angles_2[pos[2]] / scale_factor[2]
        angles = torch.cat([angles_t.view(num_frames, 1, 1, -1).expand(num_frames, height, width, -1),
                            angles_h.view(1, height, 1, -1).expand(num_frames, height, width, -1),
                            angles_w.view(1, 1, width, -1).expand(num_frames, height, width, -1)], dim=-1)
        cos, sin = torch.cos(angles), torch.sin(angles)
        rope = torch.stack([cos, -sin, sin, cos], dim=-1)
        rope = rope.view(*rope.shape[:-1], 2, 2)
        return rope.unsqueeze(-4)


def kandinsky6_attn(attn, hidden_states, encoder_hidden_states=None, rotary_emb=None, rotary_emb_kv=None,
                    attn_mask=None):
    """Kandinsky6AttnProcessor.__call__ (dispatch_attention_fn: SDPA's math on [B, L, H, D])."""
    query = attn.to_query(hidden_states)
    if encoder_hidden_states is None:
        key = attn.to_key(hidden_states)
        value = attn.to_value(hidden_states)
    else:
        key = attn.to_key(encoder_hidden_states)
        value = attn.to_value(encoder_hidden_states)
    query = query.reshape(*query.shape[:-1], attn.num_heads, -1)
    key = key.reshape(*key.shape[:-1], attn.num_heads, -1)
    value = value.reshape(*value.shape[:-1], attn.num_heads, -1)
    query = attn.query_norm(query)
    key = attn.key_norm(key)
    if rotary_emb is not None:
        query = apply_rotary(query, rotary_emb).to(dtype=query.dtype)
    if rotary_emb_kv is not None:
        key = apply_rotary(key, rotary_emb_kv).to(dtype=key.dtype)
    output = sdpa(query.transpose(1, 2), key.transpose(1, 2), value.transpose(1, 2), mask=attn_mask).transpose(1, 2)
    return attn.out_layer(output.flatten(-2, -1))


class Kandinsky6TimeEmbeddings(nn.Module):
    def __init__(self, model_dim, time_dim):
        super().__init__()
        self.time_proj = Timesteps(model_dim, flip_sin_to_cos=True, downscale_freq_shift=0)
        self.timestep_embedder = TimestepEmbedding(model_dim, time_dim, act_fn="silu")

    def forward(self, timestep):
        embed = self.time_proj(timestep)
        embed = embed.to(next(self.timestep_embedder.parameters()).dtype)
        return self.timestep_embedder(embed)


class Kandinsky6TextEmbeddings(nn.Module):
    def __init__(self, text_dim, model_dim):
        super().__init__()
        self.in_layer = nn.Linear(text_dim, model_dim)
        self.norm = nn.LayerNorm(model_dim, elementwise_affine=True)

    def forward(self, x):
        return self.norm(self.in_layer(x))


class Kandinsky6VisualEmbeddings(nn.Module):
    def __init__(self, visual_dim, model_dim, patch_size):
        super().__init__()
        self.patch_size = patch_size
        self.in_layer = nn.Linear(math.prod(patch_size) * visual_dim, model_dim)

    def forward(self, x):
        batch, duration, height, width, channels = x.shape
        p_t, p_h, p_w = self.patch_size
        x = (x.view(batch, duration // p_t, p_t, height // p_h, p_h, width // p_w, p_w, channels)
             .permute(0, 1, 3, 5, 2, 4, 6, 7).flatten(4, 7))
        return self.in_layer(x)


class Kandinsky6Modulation(nn.Module):
    def __init__(self, time_dim, model_dim, num_params):
        super().__init__()
        self.activation = nn.SiLU()
        self.out_layer = nn.Linear(time_dim, num_params * model_dim)

    def forward(self, x):
        return self.out_layer(self.activation(x.to(self.out_layer.weight.dtype)))


class Kandinsky6Attention(nn.Module):
    def __init__(self, num_channels, head_dim, kv_dim=None, processor=None):
        super().__init__()
        if num_channels % head_dim:
            raise ValueError("num_channels must be divisible by head_dim")
        kv_dim = kv_dim or num_channels
        self.num_heads = num_channels // head_dim
        self.to_query = nn.Linear(num_channels, num_channels)
        self.to_key = nn.Linear(kv_dim, num_channels)
        self.to_value = nn.Linear(kv_dim, num_channels)
        self.query_norm = TorchRMSNorm(head_dim)
        self.key_norm = TorchRMSNorm(head_dim)
        self.out_layer = nn.Linear(num_channels, num_channels)
        self.processor = kandinsky6_attn

    def forward(self, hidden_states, encoder_hidden_states=None, attn_mask=None, rotary_emb=None, rope_q=None,
                rope_kv=None):
        rotary_emb = rope_q if rope_q is not None else rotary_emb
        rotary_emb_kv = rope_kv if rope_kv is not None else rotary_emb
        return self.processor(self, hidden_states, encoder_hidden_states=encoder_hidden_states,
                              rotary_emb=rotary_emb, rotary_emb_kv=rotary_emb_kv, attn_mask=attn_mask)


class Kandinsky6OutLayer(nn.Module):
    def __init__(self, model_dim, time_dim, visual_dim, patch_size):
        super().__init__()
        self.patch_size = patch_size
        self.modulation = Kandinsky6Modulation(time_dim, model_dim, 2)
        self.norm = nn.LayerNorm(model_dim, elementwise_affine=False)
        self.out_layer = nn.Linear(model_dim, math.prod(patch_size) * visual_dim)

    def forward(self, visual_embed, time_embed):
        shift, scale = torch.chunk(self.modulation(time_embed), 2, dim=-1)
        condition_shape = (scale.shape[0],) + (1,) * (visual_embed.ndim - 2) + (scale.shape[-1],)
        x = apply_scale_shift(self.norm(visual_embed.float()), visual_embed, scale.reshape(condition_shape),
                              shift.reshape(condition_shape))
        x = self.out_layer(x)
        batch, duration, height, width = x.shape[:4]
        p_t, p_h, p_w = self.patch_size
        return (x.view(batch, duration, height, width, -1, p_t, p_h, p_w).permute(0, 1, 5, 2, 6, 3, 7, 4)
                .flatten(1, 2).flatten(2, 3).flatten(3, 4))


class Kandinsky6OutLayerAudio(nn.Module):
    def __init__(self, model_dim, time_dim, audio_dim):
        super().__init__()
        self.modulation = Kandinsky6Modulation(time_dim, model_dim, 2)
        self.norm = nn.LayerNorm(model_dim, elementwise_affine=False)
        self.out_layer = nn.Linear(model_dim, audio_dim)

    def forward(self, audio_embed, time_embed):
        shift, scale = torch.chunk(self.modulation(time_embed), 2, dim=-1)
        x = apply_scale_shift(self.norm(audio_embed.float()), audio_embed, scale, shift)
        x = self.norm(x)
        return self.out_layer(x)


class Kandinsky6TransformerEncoderBlock(nn.Module):
    def __init__(self, model_dim, time_dim, ff_dim, head_dim):
        super().__init__()
        self.text_modulation = Kandinsky6Modulation(time_dim, model_dim, 6)
        self.attn_norm = nn.LayerNorm(model_dim, elementwise_affine=False)
        self.attn = Kandinsky6Attention(model_dim, head_dim)
        self.feed_forward_norm = nn.LayerNorm(model_dim, elementwise_affine=False)
        self.feed_forward = FeedForward(model_dim, inner_dim=ff_dim, activation_fn="gelu", bias=False)

    def forward(self, x, time_embed, rope, attn_mask=None):
        sa_params, ff_params = torch.chunk(self.text_modulation(time_embed), 2, dim=-1)
        shift, scale, gate = torch.chunk(sa_params, 3, dim=-1)
        x = apply_gate_sum(x, self.attn(apply_scale_shift(self.attn_norm(x.float()), x, scale, shift),
                                        rotary_emb=rope, attn_mask=attn_mask), gate)
        shift, scale, gate = torch.chunk(ff_params, 3, dim=-1)
        return apply_gate_sum(x, self.feed_forward(apply_scale_shift(self.feed_forward_norm(x.float()), x, scale,
                                                                     shift)), gate)


class Kandinsky6TransformerDecoderBlock(nn.Module):
    def __init__(self, model_dim, time_dim, ff_dim, head_dim):
        super().__init__()
        self.visual_modulation = Kandinsky6Modulation(time_dim, model_dim, 9)
        self.self_attention_norm = nn.LayerNorm(model_dim, elementwise_affine=False)
        self.self_attention = Kandinsky6Attention(model_dim, head_dim)
        self.cross_attention_norm = nn.LayerNorm(model_dim, elementwise_affine=False)
        self.cross_attention = Kandinsky6Attention(model_dim, head_dim, kv_dim=model_dim)
        self.feed_forward_norm = nn.LayerNorm(model_dim, elementwise_affine=False)
        self.feed_forward = FeedForward(model_dim, inner_dim=ff_dim, activation_fn="gelu", bias=False)


class Kandinsky6FusedTransformerDecoderBlock(nn.Module):
    def __init__(self, model_dim, time_dim, ff_dim, head_dim, model_dim_a, time_dim_a, ff_dim_a, head_dim_a,
                 ca_rope=False, cross_gates=False, fix_modulation=False):
        super().__init__()
        self.video_dec_block = Kandinsky6TransformerDecoderBlock(model_dim, time_dim, ff_dim, head_dim)
        self.audio_dec_block = Kandinsky6TransformerDecoderBlock(model_dim_a, time_dim_a, ff_dim_a, head_dim_a)
        self.va_cross_attention = Kandinsky6Attention(model_dim, head_dim, kv_dim=model_dim_a)
        self.av_cross_attention = Kandinsky6Attention(model_dim_a, head_dim_a, kv_dim=model_dim)
        self.va_modulation = Kandinsky6Modulation(time_dim, model_dim if not cross_gates else
                                                  model_dim * 2 + model_dim_a, 1 if cross_gates else 3)
        self.av_modulation = Kandinsky6Modulation(time_dim_a, model_dim_a if not cross_gates else
                                                  model_dim_a * 2 + model_dim, 1 if cross_gates else 3)
        self.va_normalization = nn.LayerNorm(model_dim, elementwise_affine=False)
        self.av_normalization = nn.LayerNorm(model_dim_a, elementwise_affine=False)
        self.ca_rope = ca_rope
        self.cross_gates = cross_gates
        self.fix_modulation = fix_modulation
        self.model_dim = model_dim
        self.model_dim_a = model_dim_a

    def forward(self, vis, aud, text_v, text_a, time_embed, vis_rope, aud_rope, attn_mask=None):
        # The video path (aud is None: the pipeline's sample_audio False); the audio and cross-modal branches of
        # the upstream forward are not taken.
        assert aud is None
        t_v, t_a = time_embed
        if vis is not None:
            sa_p, ca_p, ff_p = torch.chunk(self.video_dec_block.visual_modulation(t_v), 3, dim=-1)
            shift, scale, gate = torch.chunk(sa_p, 3, dim=-1)
            vis = apply_gate_sum(vis, self.video_dec_block.self_attention(
                apply_scale_shift(self.video_dec_block.self_attention_norm(vis.float()), vis, scale, shift),
                rotary_emb=vis_rope), gate).type_as(vis)
            shift, scale, gate_v = torch.chunk(ca_p, 3, dim=-1)
            vis_pre_ca = apply_scale_shift(self.video_dec_block.cross_attention_norm(vis.float()), vis, scale, shift)
            vis_out_t = self.video_dec_block.cross_attention(vis_pre_ca, encoder_hidden_states=text_v,
                                                             attn_mask=attn_mask)
        if vis is not None:
            vis = apply_gate_sum(vis, vis_out_t, gate_v).type_as(vis)
        if vis is not None:
            shift, scale, gate = torch.chunk(ff_p, 3, dim=-1)
            vis = apply_gate_sum(vis, self.video_dec_block.feed_forward(
                apply_scale_shift(self.video_dec_block.feed_forward_norm(vis.float()), vis, scale, shift)),
                gate).type_as(vis)
        return vis, aud


class Kandinsky6Transformer3DModel(nn.Module):
    def __init__(self, in_visual_dim=16, out_visual_dim=16, in_text_dim=3584, in_text_dim2=768, time_dim=1024,
                 patch_size=(1, 2, 2), model_dim=4096, ff_dim=16384, num_text_blocks=4, num_visual_blocks=60,
                 axes_dims=(32, 48, 48), visual_cond=True, in_audio_dim=20, out_audio_dim=20, model_dim_a=None,
                 time_dim_a=None, ff_dim_a=None, axes_dims_a=None, audio_freqs_scaling=1.0,
                 scale_factor=(1.0, 2.0, 2.0), text_token_padding=False, ca_rope=False, cross_gates=False,
                 fix_modulation=False, visual_token_type_num_embeddings=0):
        super().__init__()
        self.patch_size = patch_size
        self.visual_cond = visual_cond
        self.in_visual_dim = in_visual_dim
        self.in_audio_dim = in_audio_dim
        self.text_token_padding = text_token_padding
        self.scale_factor = tuple(float(value) for value in scale_factor)
        self.visual_token_type_num_embeddings = int(visual_token_type_num_embeddings or 0)
        head_dim = sum(axes_dims)
        model_dim_a = model_dim_a or model_dim
        time_dim_a = time_dim_a or time_dim
        ff_dim_a = ff_dim_a or ff_dim
        axes_dims_a = axes_dims_a or axes_dims
        head_dim_a = sum(axes_dims_a)
        vis_in_dim = (2 * in_visual_dim + 1) if visual_cond else in_visual_dim
        self.visual_embeddings = Kandinsky6VisualEmbeddings(vis_in_dim, model_dim, patch_size)
        if self.visual_token_type_num_embeddings > 0:
            self.visual_token_type_embeddings = nn.Embedding(self.visual_token_type_num_embeddings, model_dim)
        self.visual_rope_embeddings = Kandinsky6RoPE3D(axes_dims)
        self.out_layer = Kandinsky6OutLayer(model_dim, time_dim, out_visual_dim, patch_size)
        self.audio_embeddings = Kandinsky6TextEmbeddings(in_audio_dim, model_dim_a)
        self.audio_rope_embeddings = Kandinsky6RoPE1D(head_dim_a, freqs_scaling=audio_freqs_scaling)
        self.audio_out_layer = Kandinsky6OutLayerAudio(model_dim_a, time_dim_a, out_audio_dim)
        for prefix, md, td, fd, hd in (("video", model_dim, time_dim, ff_dim, head_dim),
                                       ("audio", model_dim_a, time_dim_a, ff_dim_a, head_dim_a)):
            setattr(self, f"{prefix}_time_embeddings", Kandinsky6TimeEmbeddings(md, td))
            setattr(self, f"{prefix}_text_embeddings", Kandinsky6TextEmbeddings(in_text_dim, md))
            setattr(self, f"{prefix}_pooled_text_embeddings", Kandinsky6TextEmbeddings(in_text_dim2, td))
            setattr(self, f"{prefix}_text_rope_embeddings", Kandinsky6RoPE1D(hd))
            setattr(self, f"{prefix}_text_transformer_blocks",
                    nn.ModuleList([Kandinsky6TransformerEncoderBlock(md, td, fd, hd) for _ in range(num_text_blocks)]))
        self.visual_transformer_blocks = nn.ModuleList([
            Kandinsky6FusedTransformerDecoderBlock(model_dim, time_dim, ff_dim, head_dim, model_dim_a, time_dim_a,
                                                   ff_dim_a, head_dim_a, ca_rope, cross_gates, fix_modulation)
            for _ in range(num_visual_blocks)])

    def forward(self, hidden_states, encoder_hidden_states, pooled_projections, timestep, audio_hidden_states=None,
                visual_rope_pos=None, encoder_attention_mask=None, visual_token_type_ids=None, return_dict=True):
        device = hidden_states.device
        text_pos = torch.arange(encoder_hidden_states.shape[1], device=device)
        video_text_rope = self.video_text_rope_embeddings(text_pos)
        audio_text_rope = self.audio_text_rope_embeddings(text_pos)
        video_text_embed = self.video_text_embeddings(encoder_hidden_states)
        video_temb = self.video_time_embeddings(timestep) + self.video_pooled_text_embeddings(pooled_projections)
        for block in self.video_text_transformer_blocks:
            video_text_embed = block(video_text_embed, video_temb, video_text_rope, encoder_attention_mask)
        audio_text_embed = self.audio_text_embeddings(encoder_hidden_states)
        audio_temb = self.audio_time_embeddings(timestep) + self.audio_pooled_text_embeddings(pooled_projections)
        for block in self.audio_text_transformer_blocks:
            audio_text_embed = block(audio_text_embed, audio_temb, audio_text_rope, encoder_attention_mask)
        visual_embed = self.visual_embeddings(hidden_states)
        visual_shape = visual_embed.shape[1:4]
        if visual_rope_pos is None:
            visual_rope_pos = tuple(torch.arange(size, device=device) for size in visual_shape)
        visual_rope = self.visual_rope_embeddings(visual_rope_pos, self.scale_factor)
        visual_embed = visual_embed.flatten(1, 3)
        visual_rope = visual_rope.flatten(0, 2)
        audio_embed = audio_rope = None
        assert audio_hidden_states is None
        for block in self.visual_transformer_blocks:
            visual_embed, audio_embed = block(visual_embed, audio_embed, video_text_embed, audio_text_embed,
                                              (video_temb, audio_temb), visual_rope, audio_rope,
                                              encoder_attention_mask)
        visual_embed = visual_embed.reshape(-1, *visual_shape, visual_embed.shape[-1])
        video_out = self.out_layer(visual_embed, video_temb)
        return (video_out,)


def build():
    # Small Kandinsky 6: 2 heads of 16 (RoPE axes 4, 6, 6), one text block per branch, one fused block, 4 latent
    # channels (the model input 2*4 + 1), patch (1, 2, 2), a caption 16 wide, a pooled text 8 wide, time 32 wide, FFN
    # 48 wide; the audio side (its text branch runs) 16 wide, heads of 8 (axes 4, 2, 2), time 16, FFN 32.
    return Kandinsky6Transformer3DModel(in_visual_dim=4, out_visual_dim=4, in_text_dim=16, in_text_dim2=8,
                                        time_dim=32, patch_size=(1, 2, 2), model_dim=32, ff_dim=48, num_text_blocks=1,
                                        num_visual_blocks=1, axes_dims=(4, 6, 6), visual_cond=True, in_audio_dim=4,
                                        out_audio_dim=4, model_dim_a=16, time_dim_a=16, ff_dim_a=32,
                                        axes_dims_a=(4, 2, 2), scale_factor=(1.0, 2.0, 2.0), text_token_padding=True,
                                        ca_rope=True, cross_gates=True, fix_modulation=True)


def inputs(g):
    lat = torch.randn((1, 2, 4, 4, 4), generator=g)
    return {"encoder_hidden_states": torch.randn((1, 3, 16), generator=g),
            "pooled_projections": torch.randn((1, 8), generator=g), "cond_latents": torch.zeros_like(lat),
            "cond_mask": torch.zeros(lat.shape[:-1] + (1,)), "noise": lat}


def call(model, x, sigma, c):
    latent_model_input = torch.cat([x, c["cond_latents"], c["cond_mask"]], dim=-1)
    t = torch.tensor([sigma * 1000.0], dtype=torch.float32).expand(x.shape[0])
    return model(hidden_states=latent_model_input, audio_hidden_states=None,
                 encoder_hidden_states=c["encoder_hidden_states"], pooled_projections=c["pooled_projections"],
                 timestep=t, visual_rope_pos=None, encoder_attention_mask=None, visual_token_type_ids=None,
                 return_dict=False)[0]


PRODUCER = dict(
    library_source="replica of huggingface/diffusers transformer_kandinsky6.py@90bd8aa0ae10 and the parts it "
                   "imports (torch 1.13)",
    timestep="sigma*1000 float32 (Kandinsky6TI2VAPipeline: t.expand(B), flow-matching scheduler, shift 1)",
    velocity="model output as is (flow velocity), not negated",
    note="Kandinsky 6 text to video without audio, one text block per branch, one fused block (video path): "
         "latents (B, T, H, W, C) joined on the last axis with a zero condition and a zero mask channel, patched "
         "channels last (1, 2, 2) and projected; a video and an audio text branch over the same caption (Linear + "
         "LayerNorm, encoder blocks with 6-way modulation of time embedding + pooled-text embedding, 2x2-matrix "
         "RoPE of positions 0..L-1), the audio branch's result unused; decoder blocks: 9-way modulation (shift, "
         "scale, gate x self-attention, cross-attention, FFN), (scale + 1), x + gate·y, RMSNorm q/k per head (eps "
         "the f32 machine epsilon), 2x2-matrix 3-D RoPE (axes 4, 6, 6; h and w angles / 2) on q and k of the "
         "self-attention, cross-attention to the video text branch without RoPE or mask, GELU (erf) FFN without "
         "biases; output [shift, scale] modulation over the token grid, unpatchified channels last")

if __name__ == "__main__":
    capture("kandinsky6", build, inputs, call, sys.argv[1], PRODUCER)
