"""EasyAnimate V5.1 video DiT (EasyAnimateTransformer3DModel), reimplemented for torch 1.13 (no diffusers here),
captured small in f32 on CPU in run.py's 3-step flow loop.

Follows huggingface/diffusers src/diffusers/models/transformers/transformer_easyanimate.py at
58edc804bd032964e0a688053cd84854cd5868dd (read in full): EasyAnimateLayerNormZero (SiLU, Linear to 6·D: shift,
scale, gate for video and for text, one FP32LayerNorm shared by both streams), EasyAnimateRotaryPosEmbed (the crop
region of the grid in a hard-coded 90x60 // patch base, get_3d_rotary_pos_embed over it, computed inside forward),
EasyAnimateAttnProcessor2_0 (MMDiT: video q/k/v and text add_q/add_k/add_v projections, per-head LayerNorm q/k norms
norm_q/norm_k and norm_added_q/norm_added_k, [text, video] joined on the sequence, RoPE written in place on the video
rows of q and k, SDPA, split, to_out on video and to_add_out on text), EasyAnimateTransformerBlock, and
EasyAnimateTransformer3DModel (Timesteps + TimestepEmbedding, per-frame Conv2d patch embedding over (B F), text_proj
Linear, blocks, norm_final LayerNorm, norm_out AdaLayerNorm chunk_dim 1 (shift, scale), proj_out, unpatchify). With
the parts it imports, each taken by import from the replica that already has it as upstream writes it: embeddings.py's
get_3d_rotary_pos_embed (grid_type "linspace"), get_1d_rotary_pos_embed (use_real, repeat_interleave), apply_rotary_emb
(use_real, unbind -1), Timesteps, TimestepEmbedding (act "silu"), normalization.py's AdaLayerNorm and attention.py's
FeedForward ("gelu-approximate", final_dropout True) from consisid.py; normalization.FP32LayerNorm from wan22_ti2v.py.
attention_processor.Attention is written here as EasyAnimateTransformerBlock builds it (qk_norm "layer_norm" eps 1e-6,
bias True, added_kv_proj_dim = dim, added_proj_bias True, context_pre_only False: to_q/to_k/to_v, add_k_proj,
add_v_proj, add_q_proj, to_out [Linear, Dropout], to_add_out, norm_added_q/k in upstream's order), its forward the
processor call. The same module tree, parameter names and shapes, call boundaries and arithmetic. Stand-in for what
torch 1.13 lacks: F.scaled_dot_product_attention (run.sdpa: its math, default scale, no mask).

Config: the class defaults' choices for every flag (add_norm_text_encoder False: text_proj a plain Linear;
text_embed_dim_t5 None: one text encoder, Qwen2-VL's hidden states, no text_proj_t5; mmdit_layers = num_layers: every
block MMDiT, with its own text FFN txt_ff; after_norm False: no norm3; activation "gelu-approximate", timestep
activation "silu", flip_sin_to_cos True, freq_shift 0, norm_eps 1e-5, affine norms; time_position_encoding_type
"3d_rope", resize_inpaint_mask_directly, enable_text_attention_mask, add_noise_in_inpaint_model: pipeline-side only,
no inpaint/control latents in the text-to-video pipeline), shrunk in width: 2 heads of 16 (inner 32; RoPE t/h/w dims
4/6/6), time_embed_dim 24 (512 upstream), text_embed_dim 20 (3584), 2 blocks (48), in/out channels 4 (16), patch 2.

Pipeline as EasyAnimatePipeline calls it (text-to-video, no CFG): t_expand = torch.tensor([t] * B).to(latent dtype)
of FlowMatchEuler timesteps (sigma*1000), transformer(latents, t_expand, encoder_hidden_states=prompt_embeds); the
prompt's attention mask goes to the text encoder only (enable_text_attention_mask), not to the transformer; the output
used as is (it has latent_channels channels, so no chunk). A [1, 4, 3, 8, 8] latent (3 frames of 4x4 patches: 48
video tokens; RoPE crop (0, 8)-(30, 38) of the 30x45 base) and 6 random prompt-embedding tokens 20 wide.

usage: /usr/bin/python3 bench/unseen/replicas/easyanimate.py OUTDIR
REPLICA_DTYPE=bf16 [REPLICA_DEVICE=cuda] as run.py's replicas: the bf16 run, beside the f32 one.
"""
import sys

import torch
import torch.nn as nn

from consisid import (AdaLayerNorm, FeedForward, TimestepEmbedding, Timesteps, apply_rotary_emb,
                      get_3d_rotary_pos_embed)
from run import capture, sdpa
from wan22_ti2v import FP32LayerNorm


class EasyAnimateLayerNormZero(nn.Module):
    def __init__(self, conditioning_dim, embedding_dim, elementwise_affine=True, eps=1e-5, bias=True,
                 norm_type="fp32_layer_norm"):
        super().__init__()
        self.silu = nn.SiLU()
        self.linear = nn.Linear(conditioning_dim, 6 * embedding_dim, bias=bias)
        if norm_type == "layer_norm":
            self.norm = nn.LayerNorm(embedding_dim, elementwise_affine=elementwise_affine, eps=eps)
        elif norm_type == "fp32_layer_norm":
            self.norm = FP32LayerNorm(embedding_dim, elementwise_affine=elementwise_affine, eps=eps)
        else:
            raise ValueError(norm_type)

    def forward(self, hidden_states, encoder_hidden_states, temb):
        shift, scale, gate, enc_shift, enc_scale, enc_gate = self.linear(self.silu(temb)).chunk(6, dim=1)
        hidden_states = self.norm(hidden_states) * (1 + scale.unsqueeze(1)) + shift.unsqueeze(1)
        encoder_hidden_states = self.norm(encoder_hidden_states) * (1 + enc_scale.unsqueeze(1)) + enc_shift.unsqueeze(
            1
        )
        return hidden_states, encoder_hidden_states, gate, enc_gate


class EasyAnimateRotaryPosEmbed(nn.Module):
    def __init__(self, patch_size, rope_dim):
        super().__init__()
        self.patch_size = patch_size
        self.rope_dim = rope_dim

    def get_resize_crop_region_for_grid(self, src, tgt_width, tgt_height):
        tw = tgt_width
        th = tgt_height
        h, w = src
        r = h / w
        if r > (th / tw):
            resize_height = th
            resize_width = int(round(th / h * w))
        else:
            resize_width = tw
            resize_height = int(round(tw / w * h))

        crop_top = int(round((th - resize_height) / 2.0))
        crop_left = int(round((tw - resize_width) / 2.0))

        return (crop_top, crop_left), (crop_top + resize_height, crop_left + resize_width)

    def forward(self, hidden_states):
        bs, c, num_frames, grid_height, grid_width = hidden_states.size()
        grid_height = grid_height // self.patch_size
        grid_width = grid_width // self.patch_size
        base_size_width = 90 // self.patch_size
        base_size_height = 60 // self.patch_size

        grid_crops_coords = self.get_resize_crop_region_for_grid(
            (grid_height, grid_width), base_size_width, base_size_height
        )
        image_rotary_emb = get_3d_rotary_pos_embed(
            self.rope_dim,
            grid_crops_coords,
            grid_size=(grid_height, grid_width),
            temporal_size=hidden_states.size(2),
            use_real=True,
        )
        return image_rotary_emb


class EasyAnimateAttnProcessor2_0:
    """Processor for implementing scaled dot-product attention, used in the EasyAnimateTransformer3DModel model."""

    def __call__(self, attn, hidden_states, encoder_hidden_states, attention_mask=None, image_rotary_emb=None):
        if attn.add_q_proj is None and encoder_hidden_states is not None:
            hidden_states = torch.cat([encoder_hidden_states, hidden_states], dim=1)

        # 1. QKV projections
        query = attn.to_q(hidden_states)
        key = attn.to_k(hidden_states)
        value = attn.to_v(hidden_states)

        query = query.unflatten(2, (attn.heads, -1)).transpose(1, 2)
        key = key.unflatten(2, (attn.heads, -1)).transpose(1, 2)
        value = value.unflatten(2, (attn.heads, -1)).transpose(1, 2)

        # 2. QK normalization
        if attn.norm_q is not None:
            query = attn.norm_q(query)
        if attn.norm_k is not None:
            key = attn.norm_k(key)

        # 3. Encoder condition QKV projection and normalization
        if attn.add_q_proj is not None and encoder_hidden_states is not None:
            encoder_query = attn.add_q_proj(encoder_hidden_states)
            encoder_key = attn.add_k_proj(encoder_hidden_states)
            encoder_value = attn.add_v_proj(encoder_hidden_states)

            encoder_query = encoder_query.unflatten(2, (attn.heads, -1)).transpose(1, 2)
            encoder_key = encoder_key.unflatten(2, (attn.heads, -1)).transpose(1, 2)
            encoder_value = encoder_value.unflatten(2, (attn.heads, -1)).transpose(1, 2)

            if attn.norm_added_q is not None:
                encoder_query = attn.norm_added_q(encoder_query)
            if attn.norm_added_k is not None:
                encoder_key = attn.norm_added_k(encoder_key)

            query = torch.cat([encoder_query, query], dim=2)
            key = torch.cat([encoder_key, key], dim=2)
            value = torch.cat([encoder_value, value], dim=2)

        if image_rotary_emb is not None:
            query[:, :, encoder_hidden_states.shape[1]:] = apply_rotary_emb(
                query[:, :, encoder_hidden_states.shape[1]:], image_rotary_emb
            )
            if not attn.is_cross_attention:
                key[:, :, encoder_hidden_states.shape[1]:] = apply_rotary_emb(
                    key[:, :, encoder_hidden_states.shape[1]:], image_rotary_emb
                )

        # 5. Attention
        hidden_states = sdpa(query, key, value, mask=attention_mask)
        hidden_states = hidden_states.transpose(1, 2).flatten(2, 3)
        hidden_states = hidden_states.to(query.dtype)

        # 6. Output projection
        if encoder_hidden_states is not None:
            encoder_hidden_states, hidden_states = (
                hidden_states[:, : encoder_hidden_states.shape[1]],
                hidden_states[:, encoder_hidden_states.shape[1]:],
            )

            if getattr(attn, "to_out", None) is not None:
                hidden_states = attn.to_out[0](hidden_states)
                hidden_states = attn.to_out[1](hidden_states)

            if getattr(attn, "to_add_out", None) is not None:
                encoder_hidden_states = attn.to_add_out(encoder_hidden_states)
        else:
            if getattr(attn, "to_out", None) is not None:
                hidden_states = attn.to_out[0](hidden_states)
                hidden_states = attn.to_out[1](hidden_states)

        return hidden_states, encoder_hidden_states


class Attention(nn.Module):
    """attention_processor.Attention, the parts EasyAnimateTransformerBlock's arguments build (no group norm,
    spatial norm or cross norm; qk_norm None or "layer_norm"), in upstream's registration order; forward hands
    everything to the processor."""

    def __init__(self, query_dim, cross_attention_dim=None, heads=8, dim_head=64, dropout=0.0, bias=False,
                 qk_norm=None, added_kv_proj_dim=None, added_proj_bias=True, out_bias=True, eps=1e-5, out_dim=None,
                 context_pre_only=None, pre_only=False, elementwise_affine=True, processor=None):
        super().__init__()
        self.inner_dim = out_dim if out_dim is not None else dim_head * heads
        self.inner_kv_dim = self.inner_dim
        self.query_dim = query_dim
        self.is_cross_attention = cross_attention_dim is not None
        self.cross_attention_dim = cross_attention_dim if cross_attention_dim is not None else query_dim
        self.out_dim = out_dim if out_dim is not None else query_dim
        self.out_context_dim = query_dim
        self.context_pre_only = context_pre_only
        self.pre_only = pre_only
        self.heads = out_dim // dim_head if out_dim is not None else heads
        self.added_kv_proj_dim = added_kv_proj_dim

        if qk_norm is None:
            self.norm_q = None
            self.norm_k = None
        elif qk_norm == "layer_norm":
            self.norm_q = nn.LayerNorm(dim_head, eps=eps, elementwise_affine=elementwise_affine)
            self.norm_k = nn.LayerNorm(dim_head, eps=eps, elementwise_affine=elementwise_affine)
        else:
            raise NotImplementedError(qk_norm)

        self.to_q = nn.Linear(query_dim, self.inner_dim, bias=bias)
        self.to_k = nn.Linear(self.cross_attention_dim, self.inner_kv_dim, bias=bias)
        self.to_v = nn.Linear(self.cross_attention_dim, self.inner_kv_dim, bias=bias)

        self.added_proj_bias = added_proj_bias
        if self.added_kv_proj_dim is not None:
            self.add_k_proj = nn.Linear(added_kv_proj_dim, self.inner_kv_dim, bias=added_proj_bias)
            self.add_v_proj = nn.Linear(added_kv_proj_dim, self.inner_kv_dim, bias=added_proj_bias)
            if self.context_pre_only is not None:
                self.add_q_proj = nn.Linear(added_kv_proj_dim, self.inner_dim, bias=added_proj_bias)
        else:
            self.add_q_proj = None
            self.add_k_proj = None
            self.add_v_proj = None

        if not self.pre_only:
            self.to_out = nn.ModuleList([])
            self.to_out.append(nn.Linear(self.inner_dim, self.out_dim, bias=out_bias))
            self.to_out.append(nn.Dropout(dropout))
        else:
            self.to_out = None

        if self.context_pre_only is not None and not self.context_pre_only:
            self.to_add_out = nn.Linear(self.inner_dim, self.out_context_dim, bias=out_bias)
        else:
            self.to_add_out = None

        if qk_norm is not None and added_kv_proj_dim is not None:
            self.norm_added_q = nn.LayerNorm(dim_head, eps=eps, elementwise_affine=elementwise_affine)
            self.norm_added_k = nn.LayerNorm(dim_head, eps=eps, elementwise_affine=elementwise_affine)
        else:
            self.norm_added_q = None
            self.norm_added_k = None

        self.processor = processor

    def forward(self, hidden_states, encoder_hidden_states=None, attention_mask=None, **cross_attention_kwargs):
        return self.processor(self, hidden_states, encoder_hidden_states=encoder_hidden_states,
                              attention_mask=attention_mask, **cross_attention_kwargs)


class EasyAnimateTransformerBlock(nn.Module):
    def __init__(self, dim, num_attention_heads, attention_head_dim, time_embed_dim, dropout=0.0,
                 activation_fn="gelu-approximate", norm_elementwise_affine=True, norm_eps=1e-6, final_dropout=True,
                 ff_inner_dim=None, ff_bias=True, qk_norm=True, after_norm=False, norm_type="fp32_layer_norm",
                 is_mmdit_block=True):
        super().__init__()

        # Attention Part
        self.norm1 = EasyAnimateLayerNormZero(
            time_embed_dim, dim, norm_elementwise_affine, norm_eps, norm_type=norm_type, bias=True
        )

        self.attn1 = Attention(
            query_dim=dim,
            dim_head=attention_head_dim,
            heads=num_attention_heads,
            qk_norm="layer_norm" if qk_norm else None,
            eps=1e-6,
            bias=True,
            added_proj_bias=True,
            added_kv_proj_dim=dim if is_mmdit_block else None,
            context_pre_only=False if is_mmdit_block else None,
            processor=EasyAnimateAttnProcessor2_0(),
        )

        # FFN Part
        self.norm2 = EasyAnimateLayerNormZero(
            time_embed_dim, dim, norm_elementwise_affine, norm_eps, norm_type=norm_type, bias=True
        )
        self.ff = FeedForward(dim, dropout=dropout, activation_fn=activation_fn, final_dropout=final_dropout,
                              inner_dim=ff_inner_dim, bias=ff_bias)

        self.txt_ff = None
        if is_mmdit_block:
            self.txt_ff = FeedForward(dim, dropout=dropout, activation_fn=activation_fn, final_dropout=final_dropout,
                                      inner_dim=ff_inner_dim, bias=ff_bias)

        self.norm3 = None
        if after_norm:
            self.norm3 = FP32LayerNorm(dim, elementwise_affine=norm_elementwise_affine, eps=norm_eps)

    def forward(self, hidden_states, encoder_hidden_states, temb, image_rotary_emb=None):
        # 1. Attention
        norm_hidden_states, norm_encoder_hidden_states, gate_msa, enc_gate_msa = self.norm1(
            hidden_states, encoder_hidden_states, temb
        )
        attn_hidden_states, attn_encoder_hidden_states = self.attn1(
            hidden_states=norm_hidden_states,
            encoder_hidden_states=norm_encoder_hidden_states,
            image_rotary_emb=image_rotary_emb,
        )
        hidden_states = hidden_states + gate_msa.unsqueeze(1) * attn_hidden_states
        encoder_hidden_states = encoder_hidden_states + enc_gate_msa.unsqueeze(1) * attn_encoder_hidden_states

        # 2. Feed-forward
        norm_hidden_states, norm_encoder_hidden_states, gate_ff, enc_gate_ff = self.norm2(
            hidden_states, encoder_hidden_states, temb
        )
        if self.norm3 is not None:
            norm_hidden_states = self.norm3(self.ff(norm_hidden_states))
            if self.txt_ff is not None:
                norm_encoder_hidden_states = self.norm3(self.txt_ff(norm_encoder_hidden_states))
            else:
                norm_encoder_hidden_states = self.norm3(self.ff(norm_encoder_hidden_states))
        else:
            norm_hidden_states = self.ff(norm_hidden_states)
            if self.txt_ff is not None:
                norm_encoder_hidden_states = self.txt_ff(norm_encoder_hidden_states)
            else:
                norm_encoder_hidden_states = self.ff(norm_encoder_hidden_states)
        hidden_states = hidden_states + gate_ff.unsqueeze(1) * norm_hidden_states
        encoder_hidden_states = encoder_hidden_states + enc_gate_ff.unsqueeze(1) * norm_encoder_hidden_states
        return hidden_states, encoder_hidden_states


class EasyAnimateTransformer3DModel(nn.Module):
    _no_split_modules = ["EasyAnimateTransformerBlock"]

    def __init__(self, num_attention_heads=48, attention_head_dim=64, in_channels=None, out_channels=None,
                 patch_size=None, sample_width=90, sample_height=60, activation_fn="gelu-approximate",
                 timestep_activation_fn="silu", freq_shift=0, num_layers=48, mmdit_layers=48, dropout=0.0,
                 time_embed_dim=512, add_norm_text_encoder=False, text_embed_dim=3584, text_embed_dim_t5=None,
                 norm_eps=1e-5, norm_elementwise_affine=True, flip_sin_to_cos=True,
                 time_position_encoding_type="3d_rope", after_norm=False, resize_inpaint_mask_directly=True,
                 enable_text_attention_mask=True, add_noise_in_inpaint_model=True):
        super().__init__()
        self.patch_size = patch_size  # self.config.patch_size
        inner_dim = num_attention_heads * attention_head_dim

        # 1. Timestep embedding
        self.time_proj = Timesteps(inner_dim, flip_sin_to_cos, freq_shift)
        self.time_embedding = TimestepEmbedding(inner_dim, time_embed_dim, timestep_activation_fn)
        self.rope_embedding = EasyAnimateRotaryPosEmbed(patch_size, attention_head_dim)

        # 2. Patch embedding
        self.proj = nn.Conv2d(
            in_channels, inner_dim, kernel_size=(patch_size, patch_size), stride=patch_size, bias=True
        )

        # 3. Text refined embedding
        self.text_proj = None
        self.text_proj_t5 = None
        if not add_norm_text_encoder:
            self.text_proj = nn.Linear(text_embed_dim, inner_dim)
            if text_embed_dim_t5 is not None:
                self.text_proj_t5 = nn.Linear(text_embed_dim_t5, inner_dim)
        else:
            raise NotImplementedError("add_norm_text_encoder (RMSNorm before text_proj): not the default")

        # 4. Transformer blocks
        self.transformer_blocks = nn.ModuleList(
            [
                EasyAnimateTransformerBlock(
                    dim=inner_dim,
                    num_attention_heads=num_attention_heads,
                    attention_head_dim=attention_head_dim,
                    time_embed_dim=time_embed_dim,
                    dropout=dropout,
                    activation_fn=activation_fn,
                    norm_elementwise_affine=norm_elementwise_affine,
                    norm_eps=norm_eps,
                    after_norm=after_norm,
                    is_mmdit_block=True if _ < mmdit_layers else False,
                )
                for _ in range(num_layers)
            ]
        )
        self.norm_final = nn.LayerNorm(inner_dim, norm_eps, norm_elementwise_affine)

        # 5. Output norm & projection
        self.norm_out = AdaLayerNorm(
            embedding_dim=time_embed_dim,
            output_dim=2 * inner_dim,
            norm_elementwise_affine=norm_elementwise_affine,
            norm_eps=norm_eps,
            chunk_dim=1,
        )
        self.proj_out = nn.Linear(inner_dim, patch_size * patch_size * out_channels)

    def forward(self, hidden_states, timestep, timestep_cond=None, encoder_hidden_states=None,
                encoder_hidden_states_t5=None, inpaint_latents=None, control_latents=None, return_dict=True):
        batch_size, channels, video_length, height, width = hidden_states.size()
        p = self.patch_size
        post_patch_height = height // p
        post_patch_width = width // p

        # 1. Time embedding
        temb = self.time_proj(timestep).to(dtype=hidden_states.dtype)
        temb = self.time_embedding(temb, timestep_cond)
        image_rotary_emb = self.rope_embedding(hidden_states)

        # 2. Patch embedding
        if inpaint_latents is not None:
            hidden_states = torch.concat([hidden_states, inpaint_latents], 1)
        if control_latents is not None:
            hidden_states = torch.concat([hidden_states, control_latents], 1)

        hidden_states = hidden_states.permute(0, 2, 1, 3, 4).flatten(0, 1)  # [B, C, F, H, W] -> [BF, C, H, W]
        hidden_states = self.proj(hidden_states)
        hidden_states = hidden_states.unflatten(0, (batch_size, -1)).permute(
            0, 2, 1, 3, 4
        )  # [BF, C, H, W] -> [B, F, C, H, W]
        hidden_states = hidden_states.flatten(2, 4).transpose(1, 2)  # [B, F, C, H, W] -> [B, FHW, C]

        # 3. Text embedding
        encoder_hidden_states = self.text_proj(encoder_hidden_states)
        if encoder_hidden_states_t5 is not None:
            encoder_hidden_states_t5 = self.text_proj_t5(encoder_hidden_states_t5)
            encoder_hidden_states = torch.cat([encoder_hidden_states, encoder_hidden_states_t5], dim=1).contiguous()

        # 4. Transformer blocks
        for block in self.transformer_blocks:
            hidden_states, encoder_hidden_states = block(hidden_states, encoder_hidden_states, temb, image_rotary_emb)

        hidden_states = self.norm_final(hidden_states)

        # 5. Output norm & projection
        hidden_states = self.norm_out(hidden_states, temb=temb)
        hidden_states = self.proj_out(hidden_states)

        # 6. Unpatchify
        p = self.patch_size
        output = hidden_states.reshape(batch_size, video_length, post_patch_height, post_patch_width, channels, p, p)
        output = output.permute(0, 4, 1, 2, 5, 3, 6).flatten(5, 6).flatten(3, 4)
        return (output,)


def build():
    # the defaults' flags (every block MMDiT, no norm3, plain text_proj, one text encoder), widths shrunk: 2 heads of
    # 16 (RoPE t/h/w 4/6/6), time_embed_dim 24, text 20 wide, 2 blocks, 4 latent channels, patch 2.
    return EasyAnimateTransformer3DModel(num_attention_heads=2, attention_head_dim=16, in_channels=4, out_channels=4,
                                         patch_size=2, sample_width=8, sample_height=8, num_layers=2, mmdit_layers=2,
                                         time_embed_dim=24, text_embed_dim=20)


def inputs(g):
    # prompt_embeds: Qwen2-VL hidden_states[-2] of a padded prompt (6 tokens here), not masked in the transformer
    return {"encoder_hidden_states": torch.randn((1, 6, 20), generator=g),
            "noise": torch.randn((1, 4, 3, 8, 8), generator=g)}


def call(model, x, sigma, c):
    # EasyAnimatePipeline: t_expand = torch.tensor([t] * B).to(dtype=latent_model_input.dtype)
    t_expand = torch.tensor([sigma * 1000.0] * x.shape[0]).to(dtype=x.dtype)
    return model(x, t_expand, encoder_hidden_states=c["encoder_hidden_states"], return_dict=False)[0]


PRODUCER = dict(
    library_source="replica of huggingface/diffusers transformer_easyanimate.py@58edc804bd03 and the parts it "
                   "imports (torch 1.13)",
    timestep="sigma*1000 in the latents' dtype (EasyAnimatePipeline: torch.tensor([t] * B).to(latent dtype), "
             "FlowMatchEuler timesteps)",
    velocity="model output as is, not negated",
    note="EasyAnimate V5.1 video DiT, the defaults' flags: per-frame 2x2 patch Conv2d over (B F) frames; "
         "sinusoid (inner_dim wide) + SiLU MLP to time_embed_dim; plain Linear text_proj; every block MMDiT: "
         "EasyAnimateLayerNormZero (one FP32LayerNorm shared by both streams, 6-way shift/scale/gate for video and "
         "text) before attention and before the FFN, video q/k/v and text add_q/k/v projections, per-head LayerNorm "
         "q/k norms on both streams, joint [text, video] attention with interleaved 3-D RoPE (get_3d_rotary_pos_embed, "
         "dims 4/6/6 over t/h/w, grid crop region from a hard-coded 90x60 // patch base, computed in the model's "
         "forward) written in place on the video rows of q and k, to_out / to_add_out, gated residuals, separate "
         "GELU-tanh FFNs (ff, txt_ff); final LayerNorm then AdaLayerNorm (shift, scale); 3 latent frames of 8x8, "
         "6 text tokens")

if __name__ == "__main__":
    capture("easyanimate", build, inputs, call, sys.argv[1], PRODUCER)
