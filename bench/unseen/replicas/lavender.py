"""Lavender Flow (the pre-release name of AuraFlow) MMDiT + single DiT, reimplemented for torch 1.13 (no diffusers
here), captured small in f32 on CPU.

Follows huggingface/diffusers src/diffusers/models/transformers/lavender_transformer_2d.py at
005a8f6b2e25e7a86fe217097a3619fa12daf50c (LavenderFlowTransformer2DModel, LavenderFlowTransformerBlock,
LavenderFlowDiTTransformerBlock, LavenderFlowPatchEmbed, LavenderFlowFeedForward, LavenderFlowAttnProcessor2_0)
with the parts it imports: attention_processor.py (Attention with added_kv_proj_dim, context_pre_only False,
qk_norm / added_qk_norm "layer_norm" and use_fp32_layer_norm, bias False, out_bias False), embeddings.py
(Timesteps, TimestepEmbedding), normalization.py (AdaLayerNormZero, AdaLayerNormContinuous, FP32LayerNorm): the
same module tree, parameter names and shapes, and call boundaries; the arithmetic line for line.

The branch's helpers are not stored at that commit (the lavender file lived only on the AuraFlow PR branch; its
helper keywords use_fp32_layer_norm, added_qk_norm and AdaLayerNormContinuous's norm_type "no_norm" were renamed
before the merge), so they are taken as the merged AuraFlow gives them (attention_processor.py at
001d4da0eb5809c779120c51f74ef73d6078b08c, normalization.py, auraflow_transformer_2d.py): use_fp32_layer_norm is
the merged "fp32_layer_norm" (FP32LayerNorm, elementwise_affine False, bias False: no parameters; AdaLayerNormZero's
at the default eps 1e-5, the q/k norms at Attention's eps 1e-5), "no_norm" is AuraFlowPreFinalBlock's arithmetic
(no norm: x·(1 + scale) + shift from linear(silu(temb).to(x.dtype))) inside AdaLayerNormContinuous's module names
(silu, linear), and the added projections keep Attention's default bias (the file passes no added_proj_bias; the
merge later turned it off). Stand-ins for what torch 1.13 lacks: F.scaled_dot_product_attention (run.sdpa: its
math, scale = attn.scale passed, no mask) and nn.LayerNorm's bias argument (FP32LayerNorm here is never affine).

The constructs it shows: a patchify by view/permute + Linear (no conv) plus a learned position table added whole
(pos_embed_max_size = the patch count); the caption projected by a bias-free Linear and prefixed with 8 learned
register tokens (repeated over the batch); MMDiT joint blocks: two streams each with a bias-free adaLN-Zero
(6 chunks from silu(temb)) over a non-affine f32 LayerNorm, one joint attention over [context, image] rows (per-head
f32 LayerNorm q/k norms, the context's key normed by norm_added_q, upstream's slip: norm_added_k is built and never
called), split back by the context length, to_out / to_add_out; the post-attention residual re-normalised
(norm2 = f32 LayerNorm of residual + gate·attn) then modulated (1 + scale, shift) into a SwiGLU FFN (silu(fc1)·fc2,
hidden 2/3·4d rounded up to a multiple of 256) whose gated output is added to the block's input residual (not to
the post-attention stream); single DiT blocks over the concatenation [context, image] with the same structure and
one set of projections; the final modulation with no norm (x·(1 + scale) + shift), a bias-free Linear out and an
einsum unpatchify of the image rows.

Pipeline as LavenderFlowPipeline (pipeline_lavender_flow.py at 89bd27aa8a1ee3d2c3f3fa3f940e44d32ec2b780) calls it
with guidance_scale 1 (no unconditional call): latents (B, C, H, W), timestep = torch.tensor([t / 1000]) with t =
σ·1000 from the flow scheduler, cast to the latents' dtype (so σ itself; Timesteps' scale 1000 multiplies it
back), prompt_embeds the UMT5 output times its 0/1 attention mask (padded rows zero; no mask passed to the
transformer), velocity the output as is (scheduler.step on noise_pred).

usage: /usr/bin/python3 bench/unseen/replicas/lavender.py OUTDIR
"""
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

from parts import TimestepEmbedding, Timesteps
from run import capture, sdpa


def find_multiple(n: int, k: int) -> int:
    if n % k == 0:
        return n
    return n + k - (n % k)


class FP32LayerNorm(nn.LayerNorm):
    """normalization.FP32LayerNorm; the constructor takes torch 2.1's bias argument (torch 1.13's nn.LayerNorm
    lacks it; every one here is non-affine, so neither weight nor bias exists either way)."""

    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True, bias=True):
        super().__init__(normalized_shape, eps=eps, elementwise_affine=elementwise_affine)
        if elementwise_affine and not bias:
            self.bias = None

    def forward(self, inputs):
        origin_dtype = inputs.dtype
        return F.layer_norm(inputs.float(), self.normalized_shape,
                            self.weight.float() if self.weight is not None else None,
                            self.bias.float() if self.bias is not None else None, self.eps).to(origin_dtype)


class AdaLayerNormZero(nn.Module):
    """normalization.AdaLayerNormZero(embedding_dim, bias=False, use_fp32_layer_norm=True), num_embeddings None."""

    def __init__(self, embedding_dim, num_embeddings=None, use_fp32_layer_norm=False, bias=True):
        super().__init__()
        assert num_embeddings is None
        self.emb = None
        self.silu = nn.SiLU()
        self.linear = nn.Linear(embedding_dim, 6 * embedding_dim, bias=bias)
        if use_fp32_layer_norm:
            self.norm = FP32LayerNorm(embedding_dim, elementwise_affine=False, bias=False)
        else:
            self.norm = nn.LayerNorm(embedding_dim, elementwise_affine=False, eps=1e-6)

    def forward(self, x, timestep=None, class_labels=None, hidden_dtype=None, emb=None):
        emb = self.linear(self.silu(emb))
        shift_msa, scale_msa, gate_msa, shift_mlp, scale_mlp, gate_mlp = emb.chunk(6, dim=1)
        x = self.norm(x) * (1 + scale_msa[:, None]) + shift_msa[:, None]
        return x, gate_msa, shift_mlp, scale_mlp, gate_mlp


class AdaLayerNormContinuous(nn.Module):
    """normalization.AdaLayerNormContinuous(embedding_dim, conditioning_embedding_dim, norm_type="no_norm",
    bias=False): the [scale, shift] projection of silu(temb) with no norm before it."""

    def __init__(self, embedding_dim, conditioning_embedding_dim, elementwise_affine=True, eps=1e-5, bias=True,
                 norm_type="layer_norm", use_fp32_layer_norm=False):
        super().__init__()
        assert norm_type == "no_norm"
        self.silu = nn.SiLU()
        self.linear = nn.Linear(conditioning_embedding_dim, embedding_dim * 2, bias=bias)
        self.norm = None

    def forward(self, x, conditioning_embedding):
        emb = self.linear(self.silu(conditioning_embedding).to(x.dtype))
        scale, shift = torch.chunk(emb, 2, dim=1)
        x = x * (1 + scale)[:, None, :] + shift[:, None, :]
        return x


class LavenderFlowPatchEmbed(nn.Module):
    def __init__(self, height=224, width=224, patch_size=16, in_channels=3, embed_dim=768,
                 pos_embed_max_size=None):
        super().__init__()
        self.num_patches = (height // patch_size) * (width // patch_size)
        self.pos_embed_max_size = pos_embed_max_size
        self.proj = nn.Linear(patch_size * patch_size * in_channels, embed_dim)
        self.pos_embed = nn.Parameter(torch.randn(1, pos_embed_max_size, embed_dim) * 0.1)
        self.patch_size = patch_size
        self.height, self.width = height // patch_size, width // patch_size
        self.base_size = height // patch_size

    def forward(self, latent):
        batch_size, num_channels, height, width = latent.size()
        latent = latent.view(batch_size, num_channels, height // self.patch_size, self.patch_size,
                             width // self.patch_size, self.patch_size)
        latent = latent.permute(0, 2, 4, 1, 3, 5).flatten(-3).flatten(1, 2)
        latent = self.proj(latent)
        return latent + self.pos_embed


class LavenderFlowFeedForward(nn.Module):
    def __init__(self, dim, hidden_dim=None):
        super().__init__()
        if hidden_dim is None:
            hidden_dim = 4 * dim
        n_hidden = int(2 * hidden_dim / 3)
        n_hidden = find_multiple(n_hidden, 256)
        self.c_fc1 = nn.Linear(dim, n_hidden, bias=False)
        self.c_fc2 = nn.Linear(dim, n_hidden, bias=False)
        self.c_proj = nn.Linear(n_hidden, dim, bias=False)

    def forward(self, x):
        x = F.silu(self.c_fc1(x)) * self.c_fc2(x)
        x = self.c_proj(x)
        return x


def lavender_flow_attn(attn, hidden_states, encoder_hidden_states=None, i=0, *args, **kwargs):
    """LavenderFlowAttnProcessor2_0.__call__."""
    batch_size = hidden_states.shape[0]
    # `sample` projections.
    query = attn.to_q(hidden_states)
    key = attn.to_k(hidden_states)
    value = attn.to_v(hidden_states)
    # `context` projections.
    if encoder_hidden_states is not None:
        encoder_hidden_states_query_proj = attn.add_q_proj(encoder_hidden_states)
        encoder_hidden_states_key_proj = attn.add_k_proj(encoder_hidden_states)
        encoder_hidden_states_value_proj = attn.add_v_proj(encoder_hidden_states)
    # Reshape.
    inner_dim = key.shape[-1]
    head_dim = inner_dim // attn.heads
    query = query.view(batch_size, -1, attn.heads, head_dim)
    key = key.view(batch_size, -1, attn.heads, head_dim)
    value = value.view(batch_size, -1, attn.heads, head_dim)
    # Apply QK norm.
    if attn.norm_q is not None:
        query = attn.norm_q(query)
    if attn.norm_k is not None:
        key = attn.norm_k(key)
    # Concatenate the projections.
    if encoder_hidden_states is not None:
        encoder_hidden_states_query_proj = encoder_hidden_states_query_proj.view(batch_size, -1, attn.heads,
                                                                                 head_dim)
        encoder_hidden_states_key_proj = encoder_hidden_states_key_proj.view(batch_size, -1, attn.heads, head_dim)
        encoder_hidden_states_value_proj = encoder_hidden_states_value_proj.view(batch_size, -1, attn.heads,
                                                                                 head_dim)
        if attn.norm_added_q is not None:
            encoder_hidden_states_query_proj = attn.norm_added_q(encoder_hidden_states_query_proj)
        if attn.norm_added_k is not None:
            encoder_hidden_states_key_proj = attn.norm_added_q(encoder_hidden_states_key_proj)  # sic (upstream)
        query = torch.cat([encoder_hidden_states_query_proj, query], dim=1)
        key = torch.cat([encoder_hidden_states_key_proj, key], dim=1)
        value = torch.cat([encoder_hidden_states_value_proj, value], dim=1)
    query = query.transpose(1, 2)
    key = key.transpose(1, 2)
    value = value.transpose(1, 2)
    # Attention.
    hidden_states = sdpa(query, key, value, scale=attn.scale)
    hidden_states = hidden_states.transpose(1, 2).reshape(batch_size, -1, attn.heads * head_dim)
    hidden_states = hidden_states.to(query.dtype)
    # Split the attention outputs.
    if encoder_hidden_states is not None:
        hidden_states, encoder_hidden_states = (
            hidden_states[:, encoder_hidden_states.shape[1]:],
            hidden_states[:, : encoder_hidden_states.shape[1]],
        )
    # linear proj
    hidden_states = attn.to_out[0](hidden_states)
    # dropout
    hidden_states = attn.to_out[1](hidden_states)
    if encoder_hidden_states is not None:
        encoder_hidden_states = attn.to_add_out(encoder_hidden_states)
    if encoder_hidden_states is not None:
        return hidden_states, encoder_hidden_states
    else:
        return hidden_states


class Attention(nn.Module):
    """attention_processor.Attention(query_dim, cross_attention_dim None, added_kv_proj_dim, dim_head, heads,
    qk_norm "layer_norm", added_qk_norm "layer_norm", use_fp32_layer_norm True, out_dim, bias, out_bias,
    context_pre_only) with its processor's __call__ as its forward."""

    def __init__(self, query_dim, cross_attention_dim=None, heads=8, dim_head=64, dropout=0.0, bias=False,
                 qk_norm=None, added_kv_proj_dim=None, added_qk_norm=None, use_fp32_layer_norm=False,
                 out_bias=True, scale_qk=True, eps=1e-5, processor=None, out_dim=None, context_pre_only=None):
        super().__init__()
        self.inner_dim = out_dim if out_dim is not None else dim_head * heads
        self.query_dim = query_dim
        self.use_bias = bias
        self.is_cross_attention = cross_attention_dim is not None
        self.cross_attention_dim = cross_attention_dim if cross_attention_dim is not None else query_dim
        self.rescale_output_factor = 1.0
        self.out_dim = out_dim if out_dim is not None else query_dim
        self.context_pre_only = context_pre_only
        self.scale_qk = scale_qk
        self.scale = dim_head ** -0.5 if self.scale_qk else 1.0
        self.heads = out_dim // dim_head if out_dim is not None else heads
        self.added_kv_proj_dim = added_kv_proj_dim
        self.group_norm = None
        self.spatial_norm = None

        def qk_layer_norm():
            assert use_fp32_layer_norm
            return FP32LayerNorm(dim_head, elementwise_affine=False, bias=False, eps=eps)

        if qk_norm is None:
            self.norm_q = None
            self.norm_k = None
        else:
            assert qk_norm == "layer_norm"
            self.norm_q = qk_layer_norm()
            self.norm_k = qk_layer_norm()
        self.norm_cross = None
        self.to_q = nn.Linear(query_dim, self.inner_dim, bias=bias)
        self.to_k = nn.Linear(self.cross_attention_dim, self.inner_dim, bias=bias)
        self.to_v = nn.Linear(self.cross_attention_dim, self.inner_dim, bias=bias)
        if self.added_kv_proj_dim is not None:
            self.add_k_proj = nn.Linear(added_kv_proj_dim, self.inner_dim)
            self.add_v_proj = nn.Linear(added_kv_proj_dim, self.inner_dim)
            if self.context_pre_only is not None:
                self.add_q_proj = nn.Linear(added_kv_proj_dim, self.inner_dim)
        self.to_out = nn.ModuleList([nn.Linear(self.inner_dim, self.out_dim, bias=out_bias), nn.Dropout(dropout)])
        if self.context_pre_only is not None and not self.context_pre_only:
            self.to_add_out = nn.Linear(self.inner_dim, self.out_dim, bias=out_bias)
        if added_qk_norm is not None and added_kv_proj_dim is not None:
            assert added_qk_norm == "layer_norm"
            self.norm_added_q = qk_layer_norm()
            self.norm_added_k = qk_layer_norm()
        else:
            self.norm_added_q = None
            self.norm_added_k = None
        self.processor = processor

    def forward(self, hidden_states, encoder_hidden_states=None, attention_mask=None, **cross_attention_kwargs):
        return self.processor(self, hidden_states, encoder_hidden_states=encoder_hidden_states,
                              attention_mask=attention_mask, **cross_attention_kwargs)


class LavenderFlowDiTTransformerBlock(nn.Module):
    def __init__(self, dim, num_attention_heads, attention_head_dim):
        super().__init__()
        self.norm1 = AdaLayerNormZero(dim, bias=False, use_fp32_layer_norm=True)
        self.attn = Attention(query_dim=dim, cross_attention_dim=None, dim_head=attention_head_dim,
                              heads=num_attention_heads, qk_norm="layer_norm", use_fp32_layer_norm=True,
                              out_dim=dim, bias=False, out_bias=False, processor=lavender_flow_attn)
        self.norm2 = FP32LayerNorm(dim, elementwise_affine=False, bias=False)
        self.ff = LavenderFlowFeedForward(dim, dim * 4)

    def forward(self, hidden_states, temb, i=9999):
        residual = hidden_states
        # Norm + Projection.
        norm_hidden_states, gate_msa, shift_mlp, scale_mlp, gate_mlp = self.norm1(hidden_states, emb=temb)
        # Attention.
        attn_output = self.attn(hidden_states=norm_hidden_states, i=i)
        # Process attention outputs for the `hidden_states`.
        hidden_states = self.norm2(residual + gate_msa.unsqueeze(1) * attn_output)
        hidden_states = hidden_states * (1 + scale_mlp[:, None]) + shift_mlp[:, None]
        ff_output = self.ff(hidden_states)
        hidden_states = gate_mlp.unsqueeze(1) * ff_output
        hidden_states = residual + hidden_states
        return hidden_states


class LavenderFlowTransformerBlock(nn.Module):
    def __init__(self, dim, num_attention_heads, attention_head_dim, is_last=False):
        super().__init__()
        self.is_last = is_last
        context_norm_type = "ada_norm_continous" if is_last else "ada_norm_zero"
        self.norm1 = AdaLayerNormZero(dim, bias=False, use_fp32_layer_norm=True)
        if context_norm_type == "ada_norm_continous":
            raise NotImplementedError("is_last is never set by LavenderFlowTransformer2DModel")
        elif context_norm_type == "ada_norm_zero":
            self.norm1_context = AdaLayerNormZero(dim, bias=False, use_fp32_layer_norm=True)
        self.attn = Attention(query_dim=dim, cross_attention_dim=None, added_kv_proj_dim=dim,
                              dim_head=attention_head_dim, heads=num_attention_heads, qk_norm="layer_norm",
                              added_qk_norm="layer_norm", use_fp32_layer_norm=True, out_dim=dim, bias=False,
                              out_bias=False, processor=lavender_flow_attn, context_pre_only=False)
        self.norm2 = FP32LayerNorm(dim, elementwise_affine=False, bias=False)
        self.ff = LavenderFlowFeedForward(dim, dim * 4)
        self.norm2_context = FP32LayerNorm(dim, elementwise_affine=False, bias=False)
        if not is_last:
            self.ff_context = LavenderFlowFeedForward(dim, dim * 4)
        else:
            self.ff_context = None

    def forward(self, hidden_states, encoder_hidden_states, temb, i=0):
        residual = hidden_states
        residual_context = encoder_hidden_states
        # Norm + Projection.
        norm_hidden_states, gate_msa, shift_mlp, scale_mlp, gate_mlp = self.norm1(hidden_states, emb=temb)
        norm_encoder_hidden_states, c_gate_msa, c_shift_mlp, c_scale_mlp, c_gate_mlp = self.norm1_context(
            encoder_hidden_states, emb=temb)
        # Attention.
        attn_output, context_attn_output = self.attn(hidden_states=norm_hidden_states,
                                                     encoder_hidden_states=norm_encoder_hidden_states, i=i)
        # Process attention outputs for the `hidden_states`.
        hidden_states = self.norm2(residual + gate_msa.unsqueeze(1) * attn_output)
        hidden_states = hidden_states * (1 + scale_mlp[:, None]) + shift_mlp[:, None]
        hidden_states = gate_mlp.unsqueeze(1) * self.ff(hidden_states)
        hidden_states = residual + hidden_states
        # Process attention outputs for the `encoder_hidden_states`.
        encoder_hidden_states = self.norm2_context(residual_context + c_gate_msa.unsqueeze(1) * context_attn_output)
        encoder_hidden_states = encoder_hidden_states * (1 + c_scale_mlp[:, None]) + c_shift_mlp[:, None]
        encoder_hidden_states = c_gate_mlp.unsqueeze(1) * self.ff_context(encoder_hidden_states)
        encoder_hidden_states = residual_context + encoder_hidden_states
        return encoder_hidden_states, hidden_states


class LavenderFlowTransformer2DModel(nn.Module):
    def __init__(self, sample_size=64, patch_size=2, in_channels=4, num_mmdit_layers=4, num_single_dit_layers=32,
                 attention_head_dim=256, num_attention_heads=12, joint_attention_dim=2048,
                 caption_projection_dim=3072, out_channels=4, pos_embed_max_size=1024):
        super().__init__()
        self.config = dict(sample_size=sample_size, patch_size=patch_size, in_channels=in_channels,
                           num_mmdit_layers=num_mmdit_layers, num_single_dit_layers=num_single_dit_layers,
                           attention_head_dim=attention_head_dim, num_attention_heads=num_attention_heads,
                           joint_attention_dim=joint_attention_dim, caption_projection_dim=caption_projection_dim,
                           out_channels=out_channels, pos_embed_max_size=pos_embed_max_size)
        default_out_channels = in_channels
        self.out_channels = out_channels if out_channels is not None else default_out_channels
        self.inner_dim = num_attention_heads * attention_head_dim
        self.pos_embed = LavenderFlowPatchEmbed(height=sample_size, width=sample_size, patch_size=patch_size,
                                                in_channels=in_channels, embed_dim=self.inner_dim,
                                                pos_embed_max_size=pos_embed_max_size)
        self.context_embedder = nn.Linear(joint_attention_dim, caption_projection_dim, bias=False)
        self.time_step_embed = Timesteps(num_channels=256, downscale_freq_shift=0, scale=1000, flip_sin_to_cos=True)
        self.time_step_proj = TimestepEmbedding(in_channels=256, time_embed_dim=self.inner_dim)
        self.joint_transformer_blocks = nn.ModuleList([
            LavenderFlowTransformerBlock(dim=self.inner_dim, num_attention_heads=num_attention_heads,
                                         attention_head_dim=attention_head_dim)
            for i in range(num_mmdit_layers)])
        self.single_transformer_blocks = nn.ModuleList([
            LavenderFlowDiTTransformerBlock(dim=self.inner_dim, num_attention_heads=num_attention_heads,
                                            attention_head_dim=attention_head_dim)
            for _ in range(num_single_dit_layers)])
        self.norm_out = AdaLayerNormContinuous(self.inner_dim, self.inner_dim, norm_type="no_norm", bias=False)
        self.proj_out = nn.Linear(self.inner_dim, patch_size * patch_size * self.out_channels, bias=False)
        self.register_tokens = nn.Parameter(torch.randn(1, 8, self.inner_dim) * 0.02)
        self.gradient_checkpointing = False

    def forward(self, hidden_states, encoder_hidden_states=None, timestep=None, return_dict=True):
        height, width = hidden_states.shape[-2:]
        # Apply patch embedding, timestep embedding, and project the caption embeddings.
        hidden_states = self.pos_embed(hidden_states)  # takes care of adding positional embeddings too.
        temb = self.time_step_embed(timestep).to(dtype=next(self.parameters()).dtype)
        temb = self.time_step_proj(temb)
        encoder_hidden_states = self.context_embedder(encoder_hidden_states)
        encoder_hidden_states = torch.cat(
            [self.register_tokens.repeat(encoder_hidden_states.size(0), 1, 1), encoder_hidden_states], dim=1)
        # MMDiT blocks.
        for index_block, block in enumerate(self.joint_transformer_blocks):
            encoder_hidden_states, hidden_states = block(hidden_states=hidden_states,
                                                         encoder_hidden_states=encoder_hidden_states, temb=temb,
                                                         i=index_block)
        # Single DiT blocks that combine the `hidden_states` (image) and `encoder_hidden_states` (text)
        if len(self.single_transformer_blocks) > 0:
            encoder_seq_len = encoder_hidden_states.size(1)
            combined_hidden_states = torch.cat([encoder_hidden_states, hidden_states], dim=1)
            for index_block, block in enumerate(self.single_transformer_blocks):
                combined_hidden_states = block(hidden_states=combined_hidden_states, temb=temb)
            hidden_states = combined_hidden_states[:, encoder_seq_len:]
        hidden_states = self.norm_out(hidden_states, temb)
        hidden_states = self.proj_out(hidden_states)
        # unpatchify
        patch_size = self.config["patch_size"]
        out_channels = self.config["out_channels"]
        height = height // patch_size
        width = width // patch_size
        hidden_states = hidden_states.reshape(
            shape=(hidden_states.shape[0], height, width, patch_size, patch_size, out_channels))
        hidden_states = torch.einsum("nhwpqc->nchpwq", hidden_states)
        output = hidden_states.reshape(
            shape=(hidden_states.shape[0], out_channels, height * patch_size, width * patch_size))
        if not return_dict:
            return (output,)
        return output


def build():
    # Small Lavender Flow: 2 heads of 16 (d 32), 1 joint (MMDiT) block and 1 single DiT block (the SwiGLU hidden
    # is upstream's find_multiple(int(2·4d/3), 256) = 256 at any width, so its rows dominate the trace: 2 of each
    # kind came to 3.8 MB), patch 2 over a 6×6×4 latent (9 image rows, pos_embed_max_size 9 so the table adds
    # whole), a 24-wide caption of 4 tokens (1 padded) projected to 32.
    return LavenderFlowTransformer2DModel(sample_size=6, patch_size=2, in_channels=4, num_mmdit_layers=1,
                                          num_single_dit_layers=1, attention_head_dim=16, num_attention_heads=2,
                                          joint_attention_dim=24, caption_projection_dim=32, out_channels=4,
                                          pos_embed_max_size=9)


def inputs(g):
    n = 4
    txt = torch.randn((1, n, 24), generator=g)
    mask = torch.ones(1, n, dtype=torch.long)
    mask[:, n - 1:] = 0  # the tokenizer's padding
    txt = txt * mask.unsqueeze(-1).expand(txt.shape)  # encode_prompt: prompt_embeds * prompt_attention_mask
    return {"encoder_hidden_states": txt, "noise": torch.randn((1, 4, 6, 6), generator=g)}


def call(model, x, sigma, c):
    t = torch.tensor(sigma * 1000.0, dtype=torch.float32)  # the scheduler's timestep
    timestep = torch.tensor([t / 1000]).expand(x.shape[0])
    timestep = timestep.to(x.device, dtype=x.dtype)
    return model(x, encoder_hidden_states=c["encoder_hidden_states"], timestep=timestep, return_dict=False)[0]


PRODUCER = dict(
    library_source="replica of huggingface/diffusers lavender_transformer_2d.py@005a8f6b2e25 and the parts it "
                   "imports (torch 1.13)",
    timestep="sigma in the latents' dtype (LavenderFlowPipeline: torch.tensor([t / 1000]), t = sigma*1000); "
             "Timesteps' scale 1000 multiplies it back",
    velocity="model output as is (flow velocity), not negated",
    note="Lavender Flow (AuraFlow), 1 joint + 1 single block: Linear patchify + a learned position table added "
         "whole; bias-free caption Linear prefixed with 8 register tokens; adaLN-Zero (bias-free, 6 chunks) over "
         "non-affine f32 LayerNorms per stream; joint attention [context, image] with per-head f32 LayerNorm q/k "
         "norms (the context key normed by norm_added_q, upstream's slip), split back, to_out / to_add_out; "
         "post-attention f32 LayerNorm of residual + gate·attn, modulated (1 + scale, shift), SwiGLU FFN (hidden "
         "256), gated and added to the block input; single blocks over [context, image]; final no-norm modulation "
         "x·(1 + scale) + shift, bias-free Linear, einsum unpatchify; one padded caption row zeroed by the mask")

if __name__ == "__main__":
    capture("lavender", build, inputs, call, sys.argv[1], PRODUCER)
