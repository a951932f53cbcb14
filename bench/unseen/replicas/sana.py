"""SANA (text-to-image linear DiT), reimplemented for torch 1.13 (no diffusers here), captured small in f32 on CPU.

Follows huggingface/diffusers src/diffusers/models/transformers/sana_transformer.py at
065628f582a780fb3ff7985c34edcf427a045733 (SanaTransformer2DModel, SanaTransformerBlock, GLUMBConv,
SanaModulatedNorm, SanaAttnProcessor2_0) with the parts it imports: attention_processor.py (Attention with qk_norm
None, prepare_attention_mask, SanaLinearAttnProcessor2_0), embeddings.py (PatchEmbed with interpolation_scale None,
so pos_embed_type None: a conv and no position table; PixArtAlphaTextProjection, TimestepEmbedding, Timesteps),
normalization.py (AdaLayerNormSingle with PixArtAlphaCombinedTimestepSizeEmbeddings, RMSNorm): the same module
tree, parameter names and shapes, and call boundaries; the arithmetic line for line. Stand-in for what torch 1.13
lacks: F.scaled_dot_product_attention (its math path, default scale, the additive mask) in the cross-attention.
The processors' __call__ are the Attention modules' forwards.

The constructs it shows: ReLU-kernel linear self-attention with no softmax and no RoPE: q, k relu'd, q/k/v cast
to f32, the value padded with a row of ones (F.pad(value, (0, 0, 0, 1), value=1)) so that one pair of matmuls
(v_pad·kᵀ then ·q) gives the numerator rows and, in the padded last row, the normaliser Σ_j k_j·q_n; the rows
divided by that last row + 1e-15, cast back; a GLU Mix-FFN on the token grid as [B, C, H, W] (1×1 conv to
2·hidden, SiLU, depthwise 3×3 conv, chunk into value and gate, value·silu(gate), bias-free 1×1 conv); adaLN-single
modulation: one 6·d projection of the timestep shared by all blocks plus each block's own scale_shift_table
(shift, scale, gate ×2, (1 + scale)); a cross-attention on the unnormalised residual stream (no norm before it,
added ungated) over the caption projected by a gelu-tanh MLP and RMSNormed, under the caption's (1 − mask)·−10000
bias; the final LayerNorm modulated by a [shift, scale] table plus the embedded timestep (not its 6·d projection);
a patch-1 conv embed with no position table, a permute unpatchify.

Pipeline as SanaPipeline (pipeline_sana.py) calls it with guidance_scale 1 (no unconditional call): latents
(B, C, H, W), timestep t = σ·1000 as the flow scheduler gives it, prompt_embeds with the tokenizer's 0/1 attention
mask (the last caption row padding), velocity the output as is.

usage: /usr/bin/python3 bench/unseen/replicas/sana.py OUTDIR
"""
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

from run import capture, sdpa
from allegro import AdaLayerNormSingle, PixArtAlphaTextProjection
from hunyuanimage21 import RMSNorm


class PatchEmbed(nn.Module):
    """embeddings.PatchEmbed(height, width, patch_size, in_channels, embed_dim, interpolation_scale=None,
    pos_embed_type=None): conv, flatten, no layer norm, no position table."""

    def __init__(self, height=224, width=224, patch_size=16, in_channels=3, embed_dim=768, layer_norm=False,
                 flatten=True, bias=True, interpolation_scale=1, pos_embed_type="sincos", pos_embed_max_size=None):
        super().__init__()
        assert pos_embed_type is None and not layer_norm and pos_embed_max_size is None
        self.flatten = flatten
        self.layer_norm = layer_norm
        self.pos_embed_max_size = pos_embed_max_size
        self.proj = nn.Conv2d(in_channels, embed_dim, kernel_size=(patch_size, patch_size), stride=patch_size,
                              bias=bias)
        self.norm = None
        self.patch_size = patch_size
        self.height, self.width = height // patch_size, width // patch_size
        self.base_size = height // patch_size
        self.interpolation_scale = interpolation_scale
        self.pos_embed = None

    def forward(self, latent):
        latent = self.proj(latent)
        if self.flatten:
            latent = latent.flatten(2).transpose(1, 2)  # BCHW -> BNC
        return latent.to(latent.dtype)


class GLUMBConv(nn.Module):
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

    def forward(self, hidden_states):
        if self.residual_connection:
            residual = hidden_states
        hidden_states = self.conv_inverted(hidden_states)
        hidden_states = self.nonlinearity(hidden_states)
        hidden_states = self.conv_depth(hidden_states)
        hidden_states, gate = torch.chunk(hidden_states, 2, dim=1)
        hidden_states = hidden_states * self.nonlinearity(gate)
        hidden_states = self.conv_point(hidden_states)
        if self.residual_connection:
            hidden_states = hidden_states + residual
        return hidden_states


class SanaModulatedNorm(nn.Module):
    def __init__(self, dim, elementwise_affine=False, eps=1e-6):
        super().__init__()
        self.norm = nn.LayerNorm(dim, elementwise_affine=elementwise_affine, eps=eps)

    def forward(self, hidden_states, temb, scale_shift_table):
        hidden_states = self.norm(hidden_states)
        shift, scale = (scale_shift_table[None] + temb[:, None].to(scale_shift_table.device)).chunk(2, dim=1)
        hidden_states = hidden_states * (1 + scale) + shift
        return hidden_states


def sana_linear_attn(attn, hidden_states, encoder_hidden_states=None, attention_mask=None):
    """attention_processor.SanaLinearAttnProcessor2_0.__call__."""
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
    query = query.transpose(1, 2).unflatten(1, (attn.heads, -1))
    key = key.transpose(1, 2).unflatten(1, (attn.heads, -1)).transpose(2, 3)
    value = value.transpose(1, 2).unflatten(1, (attn.heads, -1))
    query = F.relu(query)
    key = F.relu(key)
    query, key, value = query.float(), key.float(), value.float()
    value = F.pad(value, (0, 0, 0, 1), mode="constant", value=1.0)
    scores = torch.matmul(value, key)
    hidden_states = torch.matmul(scores, query)
    hidden_states = hidden_states[:, :, :-1] / (hidden_states[:, :, -1:] + 1e-15)
    hidden_states = hidden_states.flatten(1, 2).transpose(1, 2)
    hidden_states = hidden_states.to(original_dtype)
    hidden_states = attn.to_out[0](hidden_states)
    hidden_states = attn.to_out[1](hidden_states)
    if original_dtype == torch.float16:
        hidden_states = hidden_states.clip(-65504, 65504)
    return hidden_states


def sana_attn(attn, hidden_states, encoder_hidden_states=None, attention_mask=None):
    """sana_transformer.SanaAttnProcessor2_0.__call__."""
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
    query = query.view(batch_size, -1, attn.heads, head_dim).transpose(1, 2)
    key = key.view(batch_size, -1, attn.heads, head_dim).transpose(1, 2)
    value = value.view(batch_size, -1, attn.heads, head_dim).transpose(1, 2)
    hidden_states = sdpa(query, key, value, mask=attention_mask)
    hidden_states = hidden_states.transpose(1, 2).reshape(batch_size, -1, attn.heads * head_dim)
    hidden_states = hidden_states.to(query.dtype)
    hidden_states = attn.to_out[0](hidden_states)
    hidden_states = attn.to_out[1](hidden_states)
    hidden_states = hidden_states / attn.rescale_output_factor
    return hidden_states


class Attention(nn.Module):
    """attention_processor.Attention(query_dim, cross_attention_dim, heads, kv_heads, dim_head, dropout, bias,
    out_bias, qk_norm None) with its processor's __call__ as its forward."""

    def __init__(self, query_dim, cross_attention_dim=None, heads=8, kv_heads=None, dim_head=64, dropout=0.0,
                 bias=False, qk_norm=None, out_bias=True, eps=1e-5, processor=None):
        super().__init__()
        assert qk_norm is None
        self.inner_dim = dim_head * heads
        self.inner_kv_dim = self.inner_dim if kv_heads is None else dim_head * kv_heads
        self.is_cross_attention = cross_attention_dim is not None
        self.cross_attention_dim = cross_attention_dim if cross_attention_dim is not None else query_dim
        self.rescale_output_factor = 1.0
        self.scale = dim_head ** -0.5
        self.heads = heads
        self.norm_q = None
        self.norm_k = None
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

    def forward(self, hidden_states, encoder_hidden_states=None, attention_mask=None):
        return self.processor(self, hidden_states, encoder_hidden_states=encoder_hidden_states,
                              attention_mask=attention_mask)


class SanaTransformerBlock(nn.Module):
    def __init__(self, dim=2240, num_attention_heads=70, attention_head_dim=32, dropout=0.0,
                 num_cross_attention_heads=20, cross_attention_head_dim=112, cross_attention_dim=2240,
                 attention_bias=True, norm_elementwise_affine=False, norm_eps=1e-6, attention_out_bias=True,
                 mlp_ratio=2.5, qk_norm=None):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, elementwise_affine=False, eps=norm_eps)
        self.attn1 = Attention(query_dim=dim, heads=num_attention_heads, dim_head=attention_head_dim,
                               kv_heads=num_attention_heads if qk_norm is not None else None, qk_norm=qk_norm,
                               dropout=dropout, bias=attention_bias, cross_attention_dim=None,
                               processor=sana_linear_attn)
        if cross_attention_dim is not None:
            self.norm2 = nn.LayerNorm(dim, elementwise_affine=norm_elementwise_affine, eps=norm_eps)
            self.attn2 = Attention(query_dim=dim, qk_norm=qk_norm,
                                   kv_heads=num_cross_attention_heads if qk_norm is not None else None,
                                   cross_attention_dim=cross_attention_dim, heads=num_cross_attention_heads,
                                   dim_head=cross_attention_head_dim, dropout=dropout, bias=True,
                                   out_bias=attention_out_bias, processor=sana_attn)
        self.ff = GLUMBConv(dim, dim, mlp_ratio, norm_type=None, residual_connection=False)
        self.scale_shift_table = nn.Parameter(torch.randn(6, dim) / dim ** 0.5)

    def forward(self, hidden_states, attention_mask=None, encoder_hidden_states=None, encoder_attention_mask=None,
                timestep=None, height=None, width=None):
        batch_size = hidden_states.shape[0]
        # 1. Modulation
        shift_msa, scale_msa, gate_msa, shift_mlp, scale_mlp, gate_mlp = (
            self.scale_shift_table[None] + timestep.reshape(batch_size, 6, -1)).chunk(6, dim=1)
        # 2. Self Attention
        norm_hidden_states = self.norm1(hidden_states)
        norm_hidden_states = norm_hidden_states * (1 + scale_msa) + shift_msa
        norm_hidden_states = norm_hidden_states.to(hidden_states.dtype)
        attn_output = self.attn1(norm_hidden_states)
        hidden_states = hidden_states + gate_msa * attn_output
        # 3. Cross Attention
        if self.attn2 is not None:
            attn_output = self.attn2(hidden_states, encoder_hidden_states=encoder_hidden_states,
                                     attention_mask=encoder_attention_mask)
            hidden_states = attn_output + hidden_states
        # 4. Feed-forward
        norm_hidden_states = self.norm2(hidden_states)
        norm_hidden_states = norm_hidden_states * (1 + scale_mlp) + shift_mlp
        norm_hidden_states = norm_hidden_states.unflatten(1, (height, width)).permute(0, 3, 1, 2)
        ff_output = self.ff(norm_hidden_states)
        ff_output = ff_output.flatten(2, 3).permute(0, 2, 1)
        hidden_states = hidden_states + gate_mlp * ff_output
        return hidden_states


class SanaTransformer2DModel(nn.Module):
    def __init__(self, in_channels=32, out_channels=32, num_attention_heads=70, attention_head_dim=32, num_layers=20,
                 num_cross_attention_heads=20, cross_attention_head_dim=112, cross_attention_dim=2240,
                 caption_channels=2304, mlp_ratio=2.5, dropout=0.0, attention_bias=False, sample_size=32,
                 patch_size=1, norm_elementwise_affine=False, norm_eps=1e-6, interpolation_scale=None,
                 guidance_embeds=False, qk_norm=None):
        super().__init__()
        assert not guidance_embeds
        self.patch_size = patch_size
        out_channels = out_channels or in_channels
        inner_dim = num_attention_heads * attention_head_dim
        # 1. Patch Embedding
        self.patch_embed = PatchEmbed(height=sample_size, width=sample_size, patch_size=patch_size,
                                      in_channels=in_channels, embed_dim=inner_dim,
                                      interpolation_scale=interpolation_scale,
                                      pos_embed_type="sincos" if interpolation_scale is not None else None)
        # 2. Additional condition embeddings
        self.time_embed = AdaLayerNormSingle(inner_dim)
        self.caption_projection = PixArtAlphaTextProjection(in_features=caption_channels, hidden_size=inner_dim)
        self.caption_norm = RMSNorm(inner_dim, eps=1e-5, elementwise_affine=True)
        # 3. Transformer blocks
        self.transformer_blocks = nn.ModuleList([
            SanaTransformerBlock(inner_dim, num_attention_heads, attention_head_dim, dropout=dropout,
                                 num_cross_attention_heads=num_cross_attention_heads,
                                 cross_attention_head_dim=cross_attention_head_dim,
                                 cross_attention_dim=cross_attention_dim, attention_bias=attention_bias,
                                 norm_elementwise_affine=norm_elementwise_affine, norm_eps=norm_eps,
                                 mlp_ratio=mlp_ratio, qk_norm=qk_norm)
            for _ in range(num_layers)])
        # 4. Output blocks
        self.scale_shift_table = nn.Parameter(torch.randn(2, inner_dim) / inner_dim ** 0.5)
        self.norm_out = SanaModulatedNorm(inner_dim, elementwise_affine=False, eps=1e-6)
        self.proj_out = nn.Linear(inner_dim, patch_size * patch_size * out_channels)

    def forward(self, hidden_states, encoder_hidden_states, timestep, guidance=None, encoder_attention_mask=None,
                attention_mask=None, attention_kwargs=None, return_dict=True):
        if attention_mask is not None and attention_mask.ndim == 2:
            attention_mask = (1 - attention_mask.to(hidden_states.dtype)) * -10000.0
            attention_mask = attention_mask.unsqueeze(1)
        if encoder_attention_mask is not None and encoder_attention_mask.ndim == 2:
            encoder_attention_mask = (1 - encoder_attention_mask.to(hidden_states.dtype)) * -10000.0
            encoder_attention_mask = encoder_attention_mask.unsqueeze(1)
        # 1. Input
        batch_size, num_channels, height, width = hidden_states.shape
        p = self.patch_size
        post_patch_height, post_patch_width = height // p, width // p
        hidden_states = self.patch_embed(hidden_states)
        timestep, embedded_timestep = self.time_embed(timestep, batch_size=batch_size,
                                                      hidden_dtype=hidden_states.dtype)
        encoder_hidden_states = self.caption_projection(encoder_hidden_states)
        encoder_hidden_states = encoder_hidden_states.view(batch_size, -1, hidden_states.shape[-1])
        encoder_hidden_states = self.caption_norm(encoder_hidden_states)
        # 2. Transformer blocks
        for block in self.transformer_blocks:
            hidden_states = block(hidden_states, attention_mask, encoder_hidden_states, encoder_attention_mask,
                                  timestep, post_patch_height, post_patch_width)
        # 3. Normalization
        hidden_states = self.norm_out(hidden_states, embedded_timestep, self.scale_shift_table)
        hidden_states = self.proj_out(hidden_states)
        # 5. Unpatchify
        hidden_states = hidden_states.reshape(batch_size, post_patch_height, post_patch_width, p, p, -1)
        hidden_states = hidden_states.permute(0, 5, 1, 3, 2, 4)
        output = hidden_states.reshape(batch_size, -1, post_patch_height * p, post_patch_width * p)
        return (output,)


def build():
    # Small SANA: 2 linear-attention heads of 32 (d 64), 2 cross-attention heads of 32, 2 blocks, 4 latent
    # channels, patch 1 as SANA's, a 24-wide caption; mlp_ratio 1.5 (2.5 upstream: the Mix-FFN's 2·2.5·d channels
    # over every pixel dominate the trace), so the Mix-FFN is 96 wide, 192 before the gate split.
    return SanaTransformer2DModel(in_channels=4, out_channels=4, num_attention_heads=2, attention_head_dim=32,
                                  num_layers=2, num_cross_attention_heads=2, cross_attention_head_dim=32,
                                  cross_attention_dim=64, caption_channels=24, mlp_ratio=1.5, sample_size=8,
                                  patch_size=1)


def inputs(g):
    n = 5
    txt = torch.randn((1, n, 24), generator=g)
    mask = torch.ones(1, n, dtype=torch.long)
    mask[:, n - 1:] = 0  # the tokenizer's padding
    return {"encoder_hidden_states": txt, "encoder_attention_mask": mask,
            "noise": torch.randn((1, 4, 8, 8), generator=g)}


def call(model, x, sigma, c):
    t = torch.tensor([sigma * 1000.0], dtype=torch.float32).expand(x.shape[0])
    return model(x, encoder_hidden_states=c["encoder_hidden_states"],
                 encoder_attention_mask=c["encoder_attention_mask"], timestep=t, return_dict=False)[0]


PRODUCER = dict(
    library_source="replica of huggingface/diffusers sana_transformer.py@065628f582a7 and the parts it imports "
                   "(torch 1.13)",
    timestep="sigma*1000 float32 as is (the flow scheduler's t)",
    velocity="model output as is (flow velocity), not negated",
    note="SANA, 2 blocks: scale_shift_table + AdaLayerNormSingle's 6·d timestep projection (shift, scale, gate, "
         "shift, scale, gate), (1 + scale); self-attention: ReLU-kernel linear attention in f32, the value padded "
         "with a ones row so v_pad·kᵀ·q carries numerator and normaliser, rows / (last row + 1e-15), cast back; "
         "cross-attention (SDPA) of the unnormalised residual over the RMSNormed gelu-tanh caption projection, "
         "(1 − mask)·−10000 bias, added ungated; GLUMBConv (mlp_ratio 1.5) on [B, C, H, W]: 1×1 conv, SiLU, "
         "depthwise 3×3, value·silu(gate), bias-free 1×1 conv; x + gate·ff; final LayerNorm (table + embedded "
         "timestep) [shift, scale]; patch-1 conv, no position table")

if __name__ == "__main__":
    capture("sana", build, inputs, call, sys.argv[1], PRODUCER)
