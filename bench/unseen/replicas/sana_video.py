"""SANA-Video text-to-video DiT, reimplemented for torch 1.13 (no diffusers here), captured small in f32 on CPU.

Follows huggingface/diffusers src/diffusers/models/transformers/transformer_sana_video.py at
0ed7eeee7172b7a061ef3b8cf4a74f856fae923a (SanaVideoTransformer3DModel, SanaVideoTransformerBlock, GLUMBTempConv,
SanaLinearAttnProcessor3_0 and SanaAttnProcessor2_0 as the forwards of their Attention modules, WanRotaryPosEmbed,
SanaModulatedNorm) with the parts it imports: attention_processor.py (Attention with qk_norm "rms_norm_across_heads",
prepare_attention_mask), embeddings.py (PixArtAlphaTextProjection, TimestepEmbedding, Timesteps,
get_1d_rotary_pos_embed with use_real and repeat_interleave_real), normalization.py (AdaLayerNormSingle with
PixArtAlphaCombinedTimestepSizeEmbeddings, RMSNorm): the same module tree, parameter names and shapes, and call
boundaries; the arithmetic line for line. Stand-in for what torch 1.13 lacks: dispatch_attention_fn (SDPA's math on
[B, L, H, D], default scale, the additive mask). The constructs it shows: ReLU linear attention whose numerator reads
RoPE'd kernels (rope(relu(q)), rope(relu(k)), interleaved pairs, Wan's 3-D table) while its normaliser reads the
unrotated ones, z = 1/(Σ_j relu(k_j)·relu(q_n) + 1e-15), after RMSNorm q/k across heads; a GLU Mix-FFN (1×1 conv,
SiLU, depthwise 3×3, [value, gate] halves, value·silu(gate), 1×1 conv) per frame followed by a temporal residual
x + conv_(3,1)(x) over the frames (channels × frames × pixels); cross-attention reading the unnormalised residual
stream under the caption's (1 − mask)·−10000 bias; scale_shift_table + timestep modulation (6 chunks), a final
[shift, scale] table; a 3-D patch conv and a channels-first unpatchify.

Pipeline as SanaVideoPipeline (pipeline_sana_video.py at 071190daca865a4d04deac0e02cda5b8c5d6f6fa) calls it with
guidance_scale 1 (no unconditional call): latents (B, C, F, H, W), timestep t = σ·1000 as the flow scheduler gives
it, prompt_embeds with the tokenizer's 0/1 attention mask (the last caption row padding), velocity the output as is.

usage: /usr/bin/python3 bench/unseen/replicas/sana_video.py OUTDIR
"""
import math
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

from run import capture, sdpa
from allegro import AdaLayerNormSingle, PixArtAlphaTextProjection
from hunyuanimage21 import RMSNorm
from wanvace import get_1d_rotary_pos_embed


class GLUMBTempConv(nn.Module):
    def __init__(self, in_channels, out_channels, expand_ratio=4, norm_type=None, residual_connection=True):
        super().__init__()
        hidden_channels = int(expand_ratio * in_channels)
        self.norm_type = norm_type
        self.residual_connection = residual_connection
        self.nonlinearity = nn.SiLU()
        self.conv_inverted = nn.Conv2d(in_channels, hidden_channels * 2, 1, 1, 0)
        self.conv_depth = nn.Conv2d(hidden_channels * 2, hidden_channels * 2, 3, 1, 1, groups=hidden_channels * 2)
        self.conv_point = nn.Conv2d(hidden_channels, out_channels, 1, 1, 0, bias=False)
        self.norm = None
        assert norm_type is None
        self.conv_temp = nn.Conv2d(out_channels, out_channels, kernel_size=(3, 1), stride=1, padding=(1, 0),
                                   bias=False)

    def forward(self, hidden_states):
        if self.residual_connection:
            residual = hidden_states
        batch_size, num_frames, height, width, num_channels = hidden_states.shape
        hidden_states = hidden_states.view(batch_size * num_frames, height, width, num_channels).permute(0, 3, 1, 2)
        hidden_states = self.conv_inverted(hidden_states)
        hidden_states = self.nonlinearity(hidden_states)
        hidden_states = self.conv_depth(hidden_states)
        hidden_states, gate = torch.chunk(hidden_states, 2, dim=1)
        hidden_states = hidden_states * self.nonlinearity(gate)
        hidden_states = self.conv_point(hidden_states)
        # Temporal aggregation
        hidden_states_temporal = hidden_states.view(batch_size, num_frames, num_channels, height * width).permute(
            0, 2, 1, 3)
        hidden_states = hidden_states_temporal + self.conv_temp(hidden_states_temporal)
        hidden_states = hidden_states.permute(0, 2, 3, 1).view(batch_size, num_frames, height, width, num_channels)
        if self.residual_connection:
            hidden_states = hidden_states + residual
        return hidden_states


def sana_linear_attn(attn, hidden_states, encoder_hidden_states=None, attention_mask=None, rotary_emb=None):
    """SanaLinearAttnProcessor3_0.__call__."""
    original_dtype = hidden_states.dtype
    if encoder_hidden_states is None:
        encoder_hidden_states = hidden_states
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
    query = F.relu(query)
    key = F.relu(key)
    if rotary_emb is not None:
        def apply_rotary_emb(hidden_states, freqs_cos, freqs_sin):
            x1, x2 = hidden_states.unflatten(-1, (-1, 2)).unbind(-1)
            cos = freqs_cos[..., 0::2]
            sin = freqs_sin[..., 1::2]
            out = torch.empty_like(hidden_states)
            out[..., 0::2] = x1 * cos - x2 * sin
            out[..., 1::2] = x1 * sin + x2 * cos
            return out.type_as(hidden_states)

        query_rotate = apply_rotary_emb(query, *rotary_emb)
        key_rotate = apply_rotary_emb(key, *rotary_emb)
    # B,H,C,N
    query = query.permute(0, 2, 3, 1)
    key = key.permute(0, 2, 3, 1)
    query_rotate = query_rotate.permute(0, 2, 3, 1)
    key_rotate = key_rotate.permute(0, 2, 3, 1)
    value = value.permute(0, 2, 3, 1)
    query_rotate, key_rotate, value = query_rotate.float(), key_rotate.float(), value.float()
    z = 1 / (key.sum(dim=-1, keepdim=True).transpose(-2, -1) @ query + 1e-15)
    scores = torch.matmul(value, key_rotate.transpose(-1, -2))
    hidden_states = torch.matmul(scores, query_rotate)
    hidden_states = hidden_states * z
    # B,H,C,N
    hidden_states = hidden_states.flatten(1, 2).transpose(1, 2)
    hidden_states = hidden_states.to(original_dtype)
    hidden_states = attn.to_out[0](hidden_states)
    hidden_states = attn.to_out[1](hidden_states)
    return hidden_states


def sana_attn(attn, hidden_states, encoder_hidden_states=None, attention_mask=None):
    """SanaAttnProcessor2_0.__call__."""
    batch_size, sequence_length, _ = (
        hidden_states.shape if encoder_hidden_states is None else encoder_hidden_states.shape)
    if attention_mask is not None:
        attention_mask = attn.prepare_attention_mask(attention_mask, sequence_length, batch_size)
        attention_mask = attention_mask.view(batch_size, attn.heads, -1, attention_mask.shape[-1])
    query = attn.to_q(hidden_states)
    if encoder_hidden_states is None:
        encoder_hidden_states = hidden_states
    key = attn.to_k(encoder_hidden_states)
    value = attn.to_v(encoder_hidden_states)
    if attn.norm_q is not None:
        query = attn.norm_q(query)
    if attn.norm_k is not None:
        key = attn.norm_k(key)
    inner_dim = key.shape[-1]
    head_dim = inner_dim // attn.heads
    query = query.view(batch_size, -1, attn.heads, head_dim)
    key = key.view(batch_size, -1, attn.heads, head_dim)
    value = value.view(batch_size, -1, attn.heads, head_dim)
    # dispatch_attention_fn on [B, L, H, D]
    hidden_states = sdpa(query.transpose(1, 2), key.transpose(1, 2), value.transpose(1, 2),
                         mask=attention_mask).transpose(1, 2)
    hidden_states = hidden_states.flatten(2, 3)
    hidden_states = hidden_states.type_as(query)
    hidden_states = attn.to_out[0](hidden_states)
    hidden_states = attn.to_out[1](hidden_states)
    hidden_states = hidden_states / attn.rescale_output_factor
    return hidden_states


class Attention(nn.Module):
    """attention_processor.Attention(query_dim, cross_attention_dim, heads, kv_heads, dim_head, dropout, bias,
    out_bias, qk_norm "rms_norm_across_heads", eps 1e-5) with its processor's __call__ as its forward."""

    def __init__(self, query_dim, cross_attention_dim=None, heads=8, kv_heads=None, dim_head=64, dropout=0.0,
                 bias=False, qk_norm=None, out_bias=True, eps=1e-5, processor=None):
        super().__init__()
        self.inner_dim = dim_head * heads
        self.inner_kv_dim = self.inner_dim if kv_heads is None else dim_head * kv_heads
        self.cross_attention_dim = cross_attention_dim if cross_attention_dim is not None else query_dim
        self.rescale_output_factor = 1.0
        self.heads = heads
        assert qk_norm == "rms_norm_across_heads"
        self.norm_q = RMSNorm(dim_head * heads, eps=eps)
        self.norm_k = RMSNorm(dim_head * kv_heads, eps=eps)
        self.to_q = nn.Linear(query_dim, self.inner_dim, bias=bias)
        self.to_k = nn.Linear(self.cross_attention_dim, self.inner_kv_dim, bias=bias)
        self.to_v = nn.Linear(self.cross_attention_dim, self.inner_kv_dim, bias=bias)
        self.to_out = nn.ModuleList([nn.Linear(self.inner_dim, query_dim, bias=out_bias), nn.Dropout(dropout)])
        self.processor = processor

    def prepare_attention_mask(self, attention_mask, target_length, batch_size, out_dim=3):
        head_size = self.heads
        if attention_mask is None:
            return attention_mask
        current_length = attention_mask.shape[-1]
        if current_length != target_length:
            attention_mask = F.pad(attention_mask, (0, target_length), value=0.0)
        if out_dim == 3:
            if attention_mask.shape[0] < batch_size * head_size:
                attention_mask = attention_mask.repeat_interleave(head_size, dim=0)
        elif out_dim == 4:
            attention_mask = attention_mask.unsqueeze(1)
            attention_mask = attention_mask.repeat_interleave(head_size, dim=1)
        return attention_mask

    def forward(self, hidden_states, encoder_hidden_states=None, attention_mask=None, **kwargs):
        return self.processor(self, hidden_states, encoder_hidden_states=encoder_hidden_states,
                              attention_mask=attention_mask, **kwargs)


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


class SanaModulatedNorm(nn.Module):
    def __init__(self, dim, elementwise_affine=False, eps=1e-6):
        super().__init__()
        self.norm = nn.LayerNorm(dim, elementwise_affine=elementwise_affine, eps=eps)

    def forward(self, hidden_states, temb, scale_shift_table):
        hidden_states = self.norm(hidden_states)
        shift, scale = (scale_shift_table[None] + temb[:, None].to(scale_shift_table.device)).chunk(2, dim=1)
        hidden_states = hidden_states * (1 + scale) + shift
        return hidden_states


class SanaVideoTransformerBlock(nn.Module):
    def __init__(self, dim=2240, num_attention_heads=20, attention_head_dim=112, dropout=0.0,
                 num_cross_attention_heads=20, cross_attention_head_dim=112, cross_attention_dim=2240,
                 attention_bias=True, norm_elementwise_affine=False, norm_eps=1e-6, attention_out_bias=True,
                 mlp_ratio=3.0, qk_norm="rms_norm_across_heads", rope_max_seq_len=1024):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, elementwise_affine=False, eps=norm_eps)
        self.attn1 = Attention(query_dim=dim, heads=num_attention_heads, dim_head=attention_head_dim,
                               kv_heads=num_attention_heads if qk_norm is not None else None, qk_norm=qk_norm,
                               dropout=dropout, bias=attention_bias, cross_attention_dim=None,
                               processor=sana_linear_attn)
        self.attn2 = None
        if cross_attention_dim is not None:
            self.norm2 = nn.LayerNorm(dim, elementwise_affine=norm_elementwise_affine, eps=norm_eps)
            self.attn2 = Attention(query_dim=dim, qk_norm=qk_norm,
                                   kv_heads=num_cross_attention_heads if qk_norm is not None else None,
                                   cross_attention_dim=cross_attention_dim, heads=num_cross_attention_heads,
                                   dim_head=cross_attention_head_dim, dropout=dropout, bias=True,
                                   out_bias=attention_out_bias, processor=sana_attn)
        self.ff = GLUMBTempConv(dim, dim, mlp_ratio, norm_type=None, residual_connection=False)
        self.scale_shift_table = nn.Parameter(torch.randn(6, dim) / dim ** 0.5)

    def forward(self, hidden_states, attention_mask=None, encoder_hidden_states=None, encoder_attention_mask=None,
                timestep=None, frames=None, height=None, width=None, rotary_emb=None):
        batch_size = hidden_states.shape[0]
        shift_msa, scale_msa, gate_msa, shift_mlp, scale_mlp, gate_mlp = (
            self.scale_shift_table[None] + timestep.reshape(batch_size, 6, -1)).chunk(6, dim=1)
        norm_hidden_states = self.norm1(hidden_states)
        norm_hidden_states = norm_hidden_states * (1 + scale_msa) + shift_msa
        norm_hidden_states = norm_hidden_states.to(hidden_states.dtype)
        attn_output = self.attn1(norm_hidden_states, rotary_emb=rotary_emb)
        hidden_states = hidden_states + gate_msa * attn_output
        if self.attn2 is not None:
            attn_output = self.attn2(hidden_states, encoder_hidden_states=encoder_hidden_states,
                                     attention_mask=encoder_attention_mask)
            hidden_states = attn_output + hidden_states
        norm_hidden_states = self.norm2(hidden_states)
        norm_hidden_states = norm_hidden_states * (1 + scale_mlp) + shift_mlp
        norm_hidden_states = norm_hidden_states.unflatten(1, (frames, height, width))
        ff_output = self.ff(norm_hidden_states)
        ff_output = ff_output.flatten(1, 3)
        hidden_states = hidden_states + gate_mlp * ff_output
        return hidden_states


class SanaVideoTransformer3DModel(nn.Module):
    def __init__(self, in_channels=16, out_channels=16, num_attention_heads=20, attention_head_dim=112, num_layers=20,
                 num_cross_attention_heads=20, cross_attention_head_dim=112, cross_attention_dim=2240,
                 caption_channels=2304, mlp_ratio=2.5, dropout=0.0, attention_bias=False, sample_size=30,
                 patch_size=(1, 2, 2), norm_elementwise_affine=False, norm_eps=1e-6, interpolation_scale=None,
                 guidance_embeds=False, guidance_embeds_scale=0.1, qk_norm="rms_norm_across_heads",
                 rope_max_seq_len=1024):
        super().__init__()
        assert not guidance_embeds
        self.patch_size = patch_size
        out_channels = out_channels or in_channels
        inner_dim = num_attention_heads * attention_head_dim
        self.rope = WanRotaryPosEmbed(attention_head_dim, patch_size, rope_max_seq_len)
        self.patch_embedding = nn.Conv3d(in_channels, inner_dim, kernel_size=patch_size, stride=patch_size)
        self.time_embed = AdaLayerNormSingle(inner_dim)
        self.caption_projection = PixArtAlphaTextProjection(in_features=caption_channels, hidden_size=inner_dim)
        self.caption_norm = RMSNorm(inner_dim, eps=1e-5, elementwise_affine=True)
        self.transformer_blocks = nn.ModuleList([
            SanaVideoTransformerBlock(inner_dim, num_attention_heads, attention_head_dim, dropout=dropout,
                                      num_cross_attention_heads=num_cross_attention_heads,
                                      cross_attention_head_dim=cross_attention_head_dim,
                                      cross_attention_dim=cross_attention_dim, attention_bias=attention_bias,
                                      norm_elementwise_affine=norm_elementwise_affine, norm_eps=norm_eps,
                                      mlp_ratio=mlp_ratio, qk_norm=qk_norm)
            for _ in range(num_layers)])
        self.scale_shift_table = nn.Parameter(torch.randn(2, inner_dim) / inner_dim ** 0.5)
        self.norm_out = SanaModulatedNorm(inner_dim, elementwise_affine=False, eps=1e-6)
        self.proj_out = nn.Linear(inner_dim, math.prod(patch_size) * out_channels)

    def forward(self, hidden_states, encoder_hidden_states, timestep, guidance=None, encoder_attention_mask=None,
                attention_mask=None, attention_kwargs=None, controlnet_block_samples=None, return_dict=True):
        if attention_mask is not None and attention_mask.ndim == 2:
            attention_mask = (1 - attention_mask.to(hidden_states.dtype)) * -10000.0
            attention_mask = attention_mask.unsqueeze(1)
        if encoder_attention_mask is not None and encoder_attention_mask.ndim == 2:
            encoder_attention_mask = (1 - encoder_attention_mask.to(hidden_states.dtype)) * -10000.0
            encoder_attention_mask = encoder_attention_mask.unsqueeze(1)
        batch_size, num_channels, num_frames, height, width = hidden_states.shape
        p_t, p_h, p_w = self.patch_size
        post_patch_num_frames = num_frames // p_t
        post_patch_height = height // p_h
        post_patch_width = width // p_w
        rotary_emb = self.rope(hidden_states)
        hidden_states = self.patch_embedding(hidden_states)
        hidden_states = hidden_states.flatten(2).transpose(1, 2)
        timestep, embedded_timestep = self.time_embed(timestep, batch_size=batch_size,
                                                      hidden_dtype=hidden_states.dtype)
        encoder_hidden_states = self.caption_projection(encoder_hidden_states)
        encoder_hidden_states = encoder_hidden_states.view(batch_size, -1, hidden_states.shape[-1])
        encoder_hidden_states = self.caption_norm(encoder_hidden_states)
        for block in self.transformer_blocks:
            hidden_states = block(hidden_states, attention_mask, encoder_hidden_states, encoder_attention_mask,
                                  timestep, post_patch_num_frames, post_patch_height, post_patch_width, rotary_emb)
        hidden_states = self.norm_out(hidden_states, embedded_timestep, self.scale_shift_table)
        hidden_states = self.proj_out(hidden_states)
        hidden_states = hidden_states.reshape(batch_size, post_patch_num_frames, post_patch_height, post_patch_width,
                                              p_t, p_h, p_w, -1)
        hidden_states = hidden_states.permute(0, 7, 1, 4, 2, 5, 3, 6)
        output = hidden_states.flatten(6, 7).flatten(4, 5).flatten(2, 3)
        return (output,)


def build():
    # Small SANA-Video: 2 heads of 32 (Wan RoPE sections 12/10/10: 32 keeps the table's t/h/w widths and the
    # forward's split sizes equal), one block, 4 latent channels, a 16-wide caption, mlp_ratio 1 (2.5 upstream: the
    # Mix-FFN's 2·2.5·d channels dominate the trace).
    return SanaVideoTransformer3DModel(in_channels=4, out_channels=4, num_attention_heads=2, attention_head_dim=32,
                                       num_layers=1, num_cross_attention_heads=2, cross_attention_head_dim=32,
                                       cross_attention_dim=64, caption_channels=16, mlp_ratio=1.0,
                                       patch_size=(1, 2, 2))


def inputs(g):
    n = 4
    txt = torch.randn((1, n, 16), generator=g)
    mask = torch.ones(1, n, dtype=torch.long)
    mask[:, n - 1:] = 0  # the tokenizer's padding
    lat = torch.randn((1, 4, 3, 4, 4), generator=g)  # 3 frames of a 2×2 token grid
    return {"encoder_hidden_states": txt, "encoder_attention_mask": mask, "noise": lat}


def call(model, x, sigma, c):
    t = torch.tensor([sigma * 1000.0], dtype=torch.float32).expand(x.shape[0])
    return model(x, encoder_hidden_states=c["encoder_hidden_states"],
                 encoder_attention_mask=c["encoder_attention_mask"], timestep=t, return_dict=False)[0]


PRODUCER = dict(
    library_source="replica of huggingface/diffusers transformer_sana_video.py@0ed7eeee7172 and the parts it "
                   "imports (torch 1.13)",
    timestep="sigma*1000 float32 as is (the flow scheduler's t)",
    velocity="model output as is (flow velocity), not negated",
    note="SANA-Video, one block: scale_shift_table + AdaLayerNormSingle's 6·d timestep projection (shift, scale, "
         "gate, shift, scale, gate), (1 + scale); self-attention: RMSNorm q/k across heads, ReLU kernels, numerator "
         "over rope(relu(q)), rope(relu(k)) (interleaved, Wan 3-D table of sections 12/10/10), normaliser over the "
         "unrotated kernels, eps 1e-15; cross-attention (SDPA) of the unnormalised residual over the RMSNormed "
         "caption projection (gelu-tanh MLP), (1 − mask)·−10000 bias, RMSNorm q/k across heads, added ungated; "
         "GLUMBTempConv: per frame 1×1 conv, SiLU, depthwise 3×3, value·silu(gate), 1×1 conv; then x + conv(3,1) "
         "over frames; x + gate·ff; final LayerNorm (table + embedded timestep) [shift, scale]; patch conv (1,2,2)")

if __name__ == "__main__":
    capture("sana_video", build, inputs, call, sys.argv[1], PRODUCER)
