"""Qwen-Image with an InstantX-style Qwen-Image ControlNet (QwenImageControlNetModel feeding
QwenImageTransformer2DModel), reimplemented for torch 1.13 (no diffusers here), captured small in f32 on CPU.

Follows huggingface/diffusers src/diffusers/models/controlnets/controlnet_qwenimage.py at
071190daca865a4d04deac0e02cda5b8c5d6f6fa line for line (QwenImageControlNetModel, extra_condition_channels 0: the
transformer's own img_in, txt_norm, txt_in, time_text_embed, QwenEmbedRope and QwenImageTransformerBlocks, plus
controlnet_x_embedder over the packed control latent added to img_in's output (zero-initialised upstream, redrawn
here like every weight so that the control signal flows), each block's image stream through its own Linear
controlnet_blocks[i] (zero-initialised upstream, redrawn here), each multiplied by conditioning_scale; the blocks
are called with encoder_hidden_states_mask=<the bool mask> and no attention_mask, and
QwenDoubleStreamAttnProcessor2_0 takes encoder_hidden_states_mask without using it, so the ControlNet's joint
attention sees the caption's padding rows, where the transformer's masks them).

The transformer and the parts both import are src/diffusers/models/transformers/transformer_qwenimage.py at
0052f58c4afd1fd25c1c397f6e5061d32b1de6d8 (QwenImageTransformer2DModel with zero_cond_t, use_additional_t_cond and
use_layer3d_rope False, QwenImageTransformerBlock, QwenDoubleStreamAttnProcessor2_0 as its attention's forward,
QwenEmbedRope with scale_rope, QwenTimestepProjEmbeddings, apply_rotary_emb_qwen with use_real False,
compute_text_seq_len_from_mask): its forward builds the joint bool mask [caption mask, ones for the image] once and
passes it to every block as attention_mask, then adds the ControlNet residual after each block with
interval_control = int(np.ceil(len(self.transformer_blocks) / len(controlnet_block_samples))) and sample index
index_block // interval_control (here 3 blocks with 2 ControlNet samples: interval 2, blocks 0 and 1 add sample 0,
block 2 adds sample 1). attention_processor.Attention (qk_norm "rms_norm", added_kv_proj_dim, context_pre_only
False), normalization.RMSNorm, AdaLayerNormContinuous and FeedForward("gelu-approximate") are hunyuanimage21.py's
(the same upstream classes; Attention subclassed here only so that its forward passes encoder_hidden_states_mask on
to the processor, as upstream's kwargs filter does), Timesteps / TimestepEmbedding parts.py's, pack_latents
chroma.py's (QwenImagePipeline._pack_latents has the same lines). Stand-ins for what torch 1.13 lacks:
dispatch_attention_fn's native backend (SDPA's math on [B, L, H, D] permuted to [B, H, L, D], default scale; the
[B, L] bool mask passed as attn_mask as this attention_dispatch.py version (002e7ef841b1) does, broadcast over
heads and query rows at B = 1: True attends, False gets -inf).

The constructs it shows: two MMDiTs each step on the same latents, the ControlNet's per-block image-stream outputs
projected, scaled by 0.7 and added to the transformer's image stream after its blocks; the modulation computed in
each block (img_mod / txt_mod: SiLU then Linear to 6·dim, chunked [shift, scale, gate] x 2) over one timestep
embedding (sinusoid of 1000·σ, no pooled text); an RMSNorm over the caption before txt_in; complex RoPE (torch.polar
tables of 4096 positive and 4096 negative positions, scale_rope centring the image rows on 0: rows -1..0, columns
-2..0 for a 2x3 grid), the caption's positions continuing after the largest image index (max(h//2, w//2) = 1);
joint [text, image] attention with per-head RMSNorm q/k (diffusers RMSNorm, eps 1e-6) on both streams, the text
rotated by its own table; the caption's 0/1 mask masking padding keys in the transformer only; text dropped at
the end (only the image stream goes through norm_out and proj_out).

Pipeline as QwenImageControlNetPipeline (pipelines/qwenimage/pipeline_qwenimage_controlnet.py at
6b77b72fd35a4ba4c0011bf09f14731d468154e9) calls the two models with true_cfg_scale 1 (no negative call) and
prompt_embeds / prompt_embeds_mask given (a caption padded to 5 rows, 3 valid, the padding rows zero and the mask a
long 0/1 tensor as _get_qwen_prompt_embeds pads a batch): each step timestep = t.expand(B).to(latents.dtype) with
t = σ·1000, both models given timestep / 1000 (the time projection scales by 1000 again), img_shapes
[(1, H/2, W/2)] = [(1, 2, 3)], txt_seq_lens = prompt_embeds_mask.sum(dim=1).tolist() (deprecated, unused); the
ControlNet first with controlnet_cond = the packed normalised VAE latent of the control image ((latent - mean) /
std, drawn here as a latent [1, 4, 4, 6] packed 2x2 to [1, 6, 16]), conditioning_scale =
controlnet_conditioning_scale · controlnet_keep[i] = 0.7 · 1.0, return_dict False (a list of samples); then the
transformer with controlnet_block_samples and attention_kwargs {}; velocity the output as is. The two models are
held by one container module (the pipeline's attribute names: transformer, controlnet) that is never called
itself, so that run.py's one-model capture records both.

Tiny config: both 2 heads of 16 (d 32), patch 2, in_channels 16 (4 latent channels packed 2x2), out_channels 4,
a 24-wide caption, RoPE axes 4+6+6; the transformer 3 blocks, the ControlNet 2.

usage: /usr/bin/python3 bench/unseen/replicas/qwenimage_controlnet.py OUTDIR
"""
import functools
import sys

import numpy as np
import torch
import torch.nn as nn

from parts import TimestepEmbedding, Timesteps
from run import capture, sdpa
from chroma import pack_latents
from hunyuanimage21 import AdaLayerNormContinuous, Attention, FeedForward, RMSNorm


def zero_module(module):
    for p in module.parameters():
        nn.init.zeros_(p)
    return module


def apply_rotary_emb_qwen(x, freqs_cis, use_real=True, use_real_unbind_dim=-1):
    """use_real=False (the only branch the processor takes): complex multiply by the [S, D/2] table."""
    assert not use_real
    x_rotated = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
    freqs_cis = freqs_cis.unsqueeze(1)
    x_out = torch.view_as_real(x_rotated * freqs_cis).flatten(3)

    return x_out.type_as(x)


def compute_text_seq_len_from_mask(encoder_hidden_states, encoder_hidden_states_mask):
    """
    Compute text sequence length without assuming contiguous masks. Returns length for RoPE and a normalized bool mask.
    """
    batch_size, text_seq_len = encoder_hidden_states.shape[:2]
    if encoder_hidden_states_mask is None:
        return text_seq_len, None, None

    if encoder_hidden_states_mask.shape[:2] != (batch_size, text_seq_len):
        raise ValueError(
            f"`encoder_hidden_states_mask` shape {encoder_hidden_states_mask.shape} must match "
            f"(batch_size, text_seq_len)=({batch_size}, {text_seq_len}).")

    if encoder_hidden_states_mask.dtype != torch.bool:
        encoder_hidden_states_mask = encoder_hidden_states_mask.to(torch.bool)

    position_ids = torch.arange(text_seq_len, device=encoder_hidden_states.device, dtype=torch.long)
    active_positions = torch.where(encoder_hidden_states_mask, position_ids, position_ids.new_zeros(()))
    has_active = encoder_hidden_states_mask.any(dim=1)
    per_sample_len = torch.where(has_active, active_positions.max(dim=1).values + 1, torch.as_tensor(text_seq_len))
    return text_seq_len, per_sample_len, encoder_hidden_states_mask


def dispatch_attention_fn(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False):
    """native backend: SDPA over [B, H, L, D], attn_mask passed as given (bool: True attends)."""
    query, key, value = (x.permute(0, 2, 1, 3) for x in (query, key, value))
    out = sdpa(query, key, value, mask=attn_mask)
    return out.permute(0, 2, 1, 3)


class QwenTimestepProjEmbeddings(nn.Module):
    def __init__(self, embedding_dim, use_additional_t_cond=False):
        super().__init__()

        self.time_proj = Timesteps(num_channels=256, flip_sin_to_cos=True, downscale_freq_shift=0, scale=1000)
        self.timestep_embedder = TimestepEmbedding(in_channels=256, time_embed_dim=embedding_dim)
        self.use_additional_t_cond = use_additional_t_cond
        assert not use_additional_t_cond  # addition_t_embedding (nn.Embedding(2, dim)) is not replicated

    def forward(self, timestep, hidden_states, addition_t_cond=None):
        timesteps_proj = self.time_proj(timestep)
        timesteps_emb = self.timestep_embedder(timesteps_proj.to(dtype=hidden_states.dtype))  # (N, D)

        conditioning = timesteps_emb
        return conditioning


class QwenEmbedRope(nn.Module):
    def __init__(self, theta, axes_dim, scale_rope=False):
        super().__init__()
        self.theta = theta
        self.axes_dim = axes_dim
        pos_index = torch.arange(4096)
        neg_index = torch.arange(4096).flip(0) * -1 - 1
        self.pos_freqs = torch.cat([
            self.rope_params(pos_index, self.axes_dim[0], self.theta),
            self.rope_params(pos_index, self.axes_dim[1], self.theta),
            self.rope_params(pos_index, self.axes_dim[2], self.theta),
        ], dim=1)
        self.neg_freqs = torch.cat([
            self.rope_params(neg_index, self.axes_dim[0], self.theta),
            self.rope_params(neg_index, self.axes_dim[1], self.theta),
            self.rope_params(neg_index, self.axes_dim[2], self.theta),
        ], dim=1)

        # DO NOT USING REGISTER BUFFER HERE, IT WILL CAUSE COMPLEX NUMBERS LOSE ITS IMAGINARY PART
        self.scale_rope = scale_rope

    def rope_params(self, index, dim, theta=10000):
        """
        Args:
            index: [0, 1, 2, 3] 1D Tensor representing the position index of the token
        """
        assert dim % 2 == 0
        freqs = torch.outer(index, 1.0 / torch.pow(theta, torch.arange(0, dim, 2).to(torch.float32).div(dim)))
        freqs = torch.polar(torch.ones_like(freqs), freqs)
        return freqs

    def forward(self, video_fhw, txt_seq_lens=None, device=None, max_txt_seq_len=None):
        if txt_seq_lens is not None:
            # deprecated: the maximum is used only where max_txt_seq_len is not given
            if max_txt_seq_len is None:
                max_txt_seq_len = max(txt_seq_lens) if isinstance(txt_seq_lens, list) else txt_seq_lens

        if max_txt_seq_len is None:
            raise ValueError("Either `max_txt_seq_len` or `txt_seq_lens` (deprecated) must be provided.")

        if isinstance(video_fhw, list):
            video_fhw = video_fhw[0]
        if not isinstance(video_fhw, list):
            video_fhw = [video_fhw]

        vid_freqs = []
        max_vid_index = 0
        for idx, fhw in enumerate(video_fhw):
            frame, height, width = fhw
            # RoPE frequencies are cached via a lru_cache decorator on _compute_video_freqs
            video_freq = self._compute_video_freqs(frame, height, width, idx, device)
            vid_freqs.append(video_freq)

            if self.scale_rope:
                max_vid_index = max(height // 2, width // 2, max_vid_index)
            else:
                max_vid_index = max(height, width, max_vid_index)

        max_txt_seq_len_int = int(max_txt_seq_len)
        # Create device-specific copy for text freqs without modifying self.pos_freqs
        txt_freqs = self.pos_freqs.to(device)[max_vid_index: max_vid_index + max_txt_seq_len_int, ...]
        vid_freqs = torch.cat(vid_freqs, dim=0)

        return vid_freqs, txt_freqs

    @functools.lru_cache(maxsize=128)
    def _compute_video_freqs(self, frame, height, width, idx=0, device=None):
        seq_lens = frame * height * width
        pos_freqs = self.pos_freqs.to(device) if device is not None else self.pos_freqs
        neg_freqs = self.neg_freqs.to(device) if device is not None else self.neg_freqs

        freqs_pos = pos_freqs.split([x // 2 for x in self.axes_dim], dim=1)
        freqs_neg = neg_freqs.split([x // 2 for x in self.axes_dim], dim=1)

        freqs_frame = freqs_pos[0][idx: idx + frame].view(frame, 1, 1, -1).expand(frame, height, width, -1)
        if self.scale_rope:
            freqs_height = torch.cat([freqs_neg[1][-(height - height // 2):], freqs_pos[1][: height // 2]], dim=0)
            freqs_height = freqs_height.view(1, height, 1, -1).expand(frame, height, width, -1)
            freqs_width = torch.cat([freqs_neg[2][-(width - width // 2):], freqs_pos[2][: width // 2]], dim=0)
            freqs_width = freqs_width.view(1, 1, width, -1).expand(frame, height, width, -1)
        else:
            freqs_height = freqs_pos[1][:height].view(1, height, 1, -1).expand(frame, height, width, -1)
            freqs_width = freqs_pos[2][:width].view(1, 1, width, -1).expand(frame, height, width, -1)

        freqs = torch.cat([freqs_frame, freqs_height, freqs_width], dim=-1).reshape(seq_lens, -1)
        return freqs.clone().contiguous()


def qwen_double_stream_attn_processor(attn, hidden_states, encoder_hidden_states=None,
                                      encoder_hidden_states_mask=None, attention_mask=None, image_rotary_emb=None):
    """QwenDoubleStreamAttnProcessor2_0.__call__ (encoder_hidden_states_mask taken, not used)."""
    if encoder_hidden_states is None:
        raise ValueError("QwenDoubleStreamAttnProcessor2_0 requires encoder_hidden_states (text stream)")

    seq_txt = encoder_hidden_states.shape[1]

    # Compute QKV for image stream (sample projections)
    img_query = attn.to_q(hidden_states)
    img_key = attn.to_k(hidden_states)
    img_value = attn.to_v(hidden_states)

    # Compute QKV for text stream (context projections)
    txt_query = attn.add_q_proj(encoder_hidden_states)
    txt_key = attn.add_k_proj(encoder_hidden_states)
    txt_value = attn.add_v_proj(encoder_hidden_states)

    # Reshape for multi-head attention
    img_query = img_query.unflatten(-1, (attn.heads, -1))
    img_key = img_key.unflatten(-1, (attn.heads, -1))
    img_value = img_value.unflatten(-1, (attn.heads, -1))

    txt_query = txt_query.unflatten(-1, (attn.heads, -1))
    txt_key = txt_key.unflatten(-1, (attn.heads, -1))
    txt_value = txt_value.unflatten(-1, (attn.heads, -1))

    # Apply QK normalization
    if attn.norm_q is not None:
        img_query = attn.norm_q(img_query)
    if attn.norm_k is not None:
        img_key = attn.norm_k(img_key)
    if attn.norm_added_q is not None:
        txt_query = attn.norm_added_q(txt_query)
    if attn.norm_added_k is not None:
        txt_key = attn.norm_added_k(txt_key)

    # Apply RoPE
    if image_rotary_emb is not None:
        img_freqs, txt_freqs = image_rotary_emb
        img_query = apply_rotary_emb_qwen(img_query, img_freqs, use_real=False)
        img_key = apply_rotary_emb_qwen(img_key, img_freqs, use_real=False)
        txt_query = apply_rotary_emb_qwen(txt_query, txt_freqs, use_real=False)
        txt_key = apply_rotary_emb_qwen(txt_key, txt_freqs, use_real=False)

    # Concatenate for joint attention
    # Order: [text, image]
    joint_query = torch.cat([txt_query, img_query], dim=1)
    joint_key = torch.cat([txt_key, img_key], dim=1)
    joint_value = torch.cat([txt_value, img_value], dim=1)

    joint_hidden_states = dispatch_attention_fn(joint_query, joint_key, joint_value, attn_mask=attention_mask,
                                                dropout_p=0.0, is_causal=False)

    # Reshape back
    joint_hidden_states = joint_hidden_states.flatten(2, 3)
    joint_hidden_states = joint_hidden_states.to(joint_query.dtype)

    # Split attention outputs back
    txt_attn_output = joint_hidden_states[:, :seq_txt, :]  # Text part
    img_attn_output = joint_hidden_states[:, seq_txt:, :]  # Image part

    # Apply output projections
    img_attn_output = attn.to_out[0](img_attn_output)
    if len(attn.to_out) > 1:
        img_attn_output = attn.to_out[1](img_attn_output)  # dropout

    txt_attn_output = attn.to_add_out(txt_attn_output)

    return img_attn_output, txt_attn_output


class QwenAttention(Attention):
    """attention_processor.Attention with QwenDoubleStreamAttnProcessor2_0: its forward passes the kwargs the
    processor's signature names (encoder_hidden_states_mask, image_rotary_emb) on."""

    def forward(self, hidden_states, encoder_hidden_states=None, attention_mask=None, encoder_hidden_states_mask=None,
                image_rotary_emb=None):
        return self.processor(self, hidden_states, encoder_hidden_states=encoder_hidden_states,
                              attention_mask=attention_mask, encoder_hidden_states_mask=encoder_hidden_states_mask,
                              image_rotary_emb=image_rotary_emb)


class QwenImageTransformerBlock(nn.Module):
    def __init__(self, dim, num_attention_heads, attention_head_dim, qk_norm="rms_norm", eps=1e-6,
                 zero_cond_t=False):
        super().__init__()

        self.dim = dim
        self.num_attention_heads = num_attention_heads
        self.attention_head_dim = attention_head_dim

        # Image processing modules
        self.img_mod = nn.Sequential(
            nn.SiLU(),
            nn.Linear(dim, 6 * dim, bias=True),  # For scale, shift, gate for norm1 and norm2
        )
        self.img_norm1 = nn.LayerNorm(dim, elementwise_affine=False, eps=eps)
        self.attn = QwenAttention(
            query_dim=dim,
            cross_attention_dim=None,  # Enable cross attention for joint computation
            added_kv_proj_dim=dim,  # Enable added KV projections for text stream
            dim_head=attention_head_dim,
            heads=num_attention_heads,
            out_dim=dim,
            context_pre_only=False,
            bias=True,
            processor=qwen_double_stream_attn_processor,
            qk_norm=qk_norm,
            eps=eps,
        )
        self.img_norm2 = nn.LayerNorm(dim, elementwise_affine=False, eps=eps)
        self.img_mlp = FeedForward(dim=dim, dim_out=dim, activation_fn="gelu-approximate")

        # Text processing modules
        self.txt_mod = nn.Sequential(
            nn.SiLU(),
            nn.Linear(dim, 6 * dim, bias=True),  # For scale, shift, gate for norm1 and norm2
        )
        self.txt_norm1 = nn.LayerNorm(dim, elementwise_affine=False, eps=eps)
        # Text doesn't need separate attention - it's handled by img_attn joint computation
        self.txt_norm2 = nn.LayerNorm(dim, elementwise_affine=False, eps=eps)
        self.txt_mlp = FeedForward(dim=dim, dim_out=dim, activation_fn="gelu-approximate")

        self.zero_cond_t = zero_cond_t

    def _modulate(self, x, mod_params, index=None):
        """Apply modulation to input tensor"""
        # x: b l d, shift: b d, scale: b d, gate: b d
        shift, scale, gate = mod_params.chunk(3, dim=-1)
        assert index is None  # the zero_cond_t per-token selection is not replicated
        shift_result = shift.unsqueeze(1)
        scale_result = scale.unsqueeze(1)
        gate_result = gate.unsqueeze(1)

        return x * (1 + scale_result) + shift_result, gate_result

    def forward(self, hidden_states, encoder_hidden_states, encoder_hidden_states_mask, temb, image_rotary_emb=None,
                joint_attention_kwargs=None, modulate_index=None):
        # Get modulation parameters for both streams
        img_mod_params = self.img_mod(temb)  # [B, 6*dim]

        if self.zero_cond_t:
            temb = torch.chunk(temb, 2, dim=0)[0]
        txt_mod_params = self.txt_mod(temb)  # [B, 6*dim]

        # Split modulation parameters for norm1 and norm2
        img_mod1, img_mod2 = img_mod_params.chunk(2, dim=-1)  # Each [B, 3*dim]
        txt_mod1, txt_mod2 = txt_mod_params.chunk(2, dim=-1)  # Each [B, 3*dim]

        # Process image stream - norm1 + modulation
        img_normed = self.img_norm1(hidden_states)
        img_modulated, img_gate1 = self._modulate(img_normed, img_mod1, modulate_index)

        # Process text stream - norm1 + modulation
        txt_normed = self.txt_norm1(encoder_hidden_states)
        txt_modulated, txt_gate1 = self._modulate(txt_normed, txt_mod1)

        joint_attention_kwargs = joint_attention_kwargs or {}
        attn_output = self.attn(
            hidden_states=img_modulated,  # Image stream (will be processed as "sample")
            encoder_hidden_states=txt_modulated,  # Text stream (will be processed as "context")
            encoder_hidden_states_mask=encoder_hidden_states_mask,
            image_rotary_emb=image_rotary_emb,
            **joint_attention_kwargs,
        )

        # QwenAttnProcessor2_0 returns (img_output, txt_output) when encoder_hidden_states is provided
        img_attn_output, txt_attn_output = attn_output

        # Apply attention gates and add residual (like in Megatron)
        hidden_states = hidden_states + img_gate1 * img_attn_output
        encoder_hidden_states = encoder_hidden_states + txt_gate1 * txt_attn_output

        # Process image stream - norm2 + MLP
        img_normed2 = self.img_norm2(hidden_states)
        img_modulated2, img_gate2 = self._modulate(img_normed2, img_mod2, modulate_index)
        img_mlp_output = self.img_mlp(img_modulated2)
        hidden_states = hidden_states + img_gate2 * img_mlp_output

        # Process text stream - norm2 + MLP
        txt_normed2 = self.txt_norm2(encoder_hidden_states)
        txt_modulated2, txt_gate2 = self._modulate(txt_normed2, txt_mod2)
        txt_mlp_output = self.txt_mlp(txt_modulated2)
        encoder_hidden_states = encoder_hidden_states + txt_gate2 * txt_mlp_output

        # Clip to prevent overflow for fp16
        if encoder_hidden_states.dtype == torch.float16:
            encoder_hidden_states = encoder_hidden_states.clip(-65504, 65504)
        if hidden_states.dtype == torch.float16:
            hidden_states = hidden_states.clip(-65504, 65504)

        return encoder_hidden_states, hidden_states


class QwenImageTransformer2DModel(nn.Module):
    def __init__(self, patch_size=2, in_channels=64, out_channels=16, num_layers=60, attention_head_dim=128,
                 num_attention_heads=24, joint_attention_dim=3584, guidance_embeds=False, axes_dims_rope=(16, 56, 56),
                 zero_cond_t=False, use_additional_t_cond=False, use_layer3d_rope=False):
        super().__init__()
        self.out_channels = out_channels or in_channels
        self.inner_dim = num_attention_heads * attention_head_dim
        assert not (guidance_embeds or zero_cond_t or use_additional_t_cond or use_layer3d_rope)

        self.pos_embed = QwenEmbedRope(theta=10000, axes_dim=list(axes_dims_rope), scale_rope=True)

        self.time_text_embed = QwenTimestepProjEmbeddings(embedding_dim=self.inner_dim,
                                                          use_additional_t_cond=use_additional_t_cond)

        self.txt_norm = RMSNorm(joint_attention_dim, eps=1e-6)

        self.img_in = nn.Linear(in_channels, self.inner_dim)
        self.txt_in = nn.Linear(joint_attention_dim, self.inner_dim)

        self.transformer_blocks = nn.ModuleList([
            QwenImageTransformerBlock(dim=self.inner_dim, num_attention_heads=num_attention_heads,
                                      attention_head_dim=attention_head_dim, zero_cond_t=zero_cond_t)
            for _ in range(num_layers)])

        self.norm_out = AdaLayerNormContinuous(self.inner_dim, self.inner_dim, elementwise_affine=False, eps=1e-6)
        self.proj_out = nn.Linear(self.inner_dim, patch_size * patch_size * self.out_channels, bias=True)

        self.zero_cond_t = zero_cond_t

    def forward(self, hidden_states, encoder_hidden_states=None, encoder_hidden_states_mask=None, timestep=None,
                img_shapes=None, txt_seq_lens=None, guidance=None, attention_kwargs=None,
                controlnet_block_samples=None, additional_t_cond=None, return_dict=True):
        if attention_kwargs is not None:
            attention_kwargs = attention_kwargs.copy()
            attention_kwargs.pop("scale", 1.0)

        hidden_states = self.img_in(hidden_states)

        timestep = timestep.to(hidden_states.dtype)

        modulate_index = None  # zero_cond_t False

        encoder_hidden_states = self.txt_norm(encoder_hidden_states)
        encoder_hidden_states = self.txt_in(encoder_hidden_states)

        # Use the encoder_hidden_states sequence length for RoPE computation and normalize mask
        text_seq_len, _, encoder_hidden_states_mask = compute_text_seq_len_from_mask(
            encoder_hidden_states, encoder_hidden_states_mask)

        if guidance is not None:
            guidance = guidance.to(hidden_states.dtype) * 1000

        temb = (self.time_text_embed(timestep, hidden_states, additional_t_cond) if guidance is None
                else self.time_text_embed(timestep, guidance, hidden_states, additional_t_cond))

        image_rotary_emb = self.pos_embed(img_shapes, max_txt_seq_len=text_seq_len, device=hidden_states.device)

        # Construct joint attention mask once to avoid reconstructing in every block
        block_attention_kwargs = attention_kwargs.copy() if attention_kwargs is not None else {}
        if encoder_hidden_states_mask is not None:
            # Build joint mask: [text_mask, all_ones_for_image]
            batch_size, image_seq_len = hidden_states.shape[:2]
            image_mask = torch.ones((batch_size, image_seq_len), dtype=torch.bool, device=hidden_states.device)
            joint_attention_mask = torch.cat([encoder_hidden_states_mask, image_mask], dim=1)
            block_attention_kwargs["attention_mask"] = joint_attention_mask

        for index_block, block in enumerate(self.transformer_blocks):
            encoder_hidden_states, hidden_states = block(
                hidden_states=hidden_states,
                encoder_hidden_states=encoder_hidden_states,
                encoder_hidden_states_mask=None,  # Don't pass (using attention_mask instead)
                temb=temb,
                image_rotary_emb=image_rotary_emb,
                joint_attention_kwargs=block_attention_kwargs,
                modulate_index=modulate_index,
            )

            # controlnet residual
            if controlnet_block_samples is not None:
                interval_control = len(self.transformer_blocks) / len(controlnet_block_samples)
                interval_control = int(np.ceil(interval_control))
                hidden_states = hidden_states + controlnet_block_samples[index_block // interval_control]

        # Use only the image part (hidden_states) from the dual-stream blocks
        hidden_states = self.norm_out(hidden_states, temb)
        output = self.proj_out(hidden_states)
        return (output,)


class QwenImageControlNetModel(nn.Module):
    def __init__(self, patch_size=2, in_channels=64, out_channels=16, num_layers=60, attention_head_dim=128,
                 num_attention_heads=24, joint_attention_dim=3584, axes_dims_rope=(16, 56, 56),
                 extra_condition_channels=0):
        super().__init__()
        self.out_channels = out_channels or in_channels
        self.inner_dim = num_attention_heads * attention_head_dim

        self.pos_embed = QwenEmbedRope(theta=10000, axes_dim=list(axes_dims_rope), scale_rope=True)

        self.time_text_embed = QwenTimestepProjEmbeddings(embedding_dim=self.inner_dim)

        self.txt_norm = RMSNorm(joint_attention_dim, eps=1e-6)

        self.img_in = nn.Linear(in_channels, self.inner_dim)
        self.txt_in = nn.Linear(joint_attention_dim, self.inner_dim)

        self.transformer_blocks = nn.ModuleList([
            QwenImageTransformerBlock(dim=self.inner_dim, num_attention_heads=num_attention_heads,
                                      attention_head_dim=attention_head_dim)
            for _ in range(num_layers)])

        # controlnet_blocks
        self.controlnet_blocks = nn.ModuleList([])
        for _ in range(len(self.transformer_blocks)):
            self.controlnet_blocks.append(zero_module(nn.Linear(self.inner_dim, self.inner_dim)))
        self.controlnet_x_embedder = zero_module(
            torch.nn.Linear(in_channels + extra_condition_channels, self.inner_dim))

    def forward(self, hidden_states, controlnet_cond, conditioning_scale=1.0, encoder_hidden_states=None,
                encoder_hidden_states_mask=None, timestep=None, img_shapes=None, txt_seq_lens=None,
                joint_attention_kwargs=None, return_dict=True):
        # txt_seq_lens: deprecated, a warning only

        hidden_states = self.img_in(hidden_states)

        # add
        hidden_states = hidden_states + self.controlnet_x_embedder(controlnet_cond)

        temb = self.time_text_embed(timestep, hidden_states)

        # Use the encoder_hidden_states sequence length for RoPE computation and normalize mask
        text_seq_len, _, encoder_hidden_states_mask = compute_text_seq_len_from_mask(
            encoder_hidden_states, encoder_hidden_states_mask)

        image_rotary_emb = self.pos_embed(img_shapes, max_txt_seq_len=text_seq_len, device=hidden_states.device)

        timestep = timestep.to(hidden_states.dtype)
        encoder_hidden_states = self.txt_norm(encoder_hidden_states)
        encoder_hidden_states = self.txt_in(encoder_hidden_states)

        block_samples = ()
        for block in self.transformer_blocks:
            encoder_hidden_states, hidden_states = block(
                hidden_states=hidden_states,
                encoder_hidden_states=encoder_hidden_states,
                encoder_hidden_states_mask=encoder_hidden_states_mask,
                temb=temb,
                image_rotary_emb=image_rotary_emb,
                joint_attention_kwargs=joint_attention_kwargs,
            )
            block_samples = block_samples + (hidden_states,)

        # controlnet block
        controlnet_block_samples = ()
        for block_sample, controlnet_block in zip(block_samples, self.controlnet_blocks):
            block_sample = controlnet_block(block_sample)
            controlnet_block_samples = controlnet_block_samples + (block_sample,)

        # scaling
        controlnet_block_samples = [sample * conditioning_scale for sample in controlnet_block_samples]
        controlnet_block_samples = None if len(controlnet_block_samples) == 0 else controlnet_block_samples

        assert not return_dict
        return controlnet_block_samples


COMMON = dict(patch_size=2, in_channels=16, out_channels=4, attention_head_dim=16, num_attention_heads=2,
              joint_attention_dim=24, axes_dims_rope=(4, 6, 6))


class QwenImageControlNet(nn.Module):
    """The pipeline's two models under its attribute names (never called itself)."""

    def __init__(self):
        super().__init__()
        self.transformer = QwenImageTransformer2DModel(num_layers=3, **COMMON)
        self.controlnet = QwenImageControlNetModel(num_layers=2, **COMMON)


CONDITIONING_SCALE = 0.7  # controlnet_conditioning_scale (the pipeline's default 1.0)
LAT_H, LAT_W = 4, 6  # latent height and width: a 2x3 grid of packed 2x2 patches
IMG_SHAPES = [(1, LAT_H // 2, LAT_W // 2)]  # img_shapes = [(1, height // vae_scale_factor // 2, ...)] * batch_size


def inputs(g):
    n, valid = 5, 3  # caption rows, real tokens (then zero padding, as _get_qwen_prompt_embeds pads a batch)
    txt = torch.randn((1, n, 24), generator=g)
    mask = (torch.arange(n) < valid).long()[None]  # prompt_embeds_mask (torch.long)
    txt = txt * mask[..., None].to(txt.dtype)  # padding rows zero
    control = torch.randn((1, 4, LAT_H, LAT_W), generator=g)  # the control image's VAE latent, normalised
    control_image = pack_latents(control, 1, 4, LAT_H, LAT_W)
    lat = torch.randn((1, 4, LAT_H, LAT_W), generator=g)
    latents = pack_latents(lat, 1, 4, LAT_H, LAT_W)
    return {"encoder_hidden_states": txt, "encoder_hidden_states_mask": mask, "control_image": control_image,
            "noise": latents}


def call(model, x, sigma, c):
    # QwenImageControlNetPipeline, true_cfg_scale 1: the ControlNet then the transformer on the same latents and t
    t = torch.tensor(sigma * 1000.0, dtype=torch.float32, device=x.device)
    timestep = t.expand(x.shape[0]).to(x.dtype)
    cond_scale = CONDITIONING_SCALE * 1.0  # controlnet_keep[i]: 1.0 (control_guidance_start 0, end 1)
    prompt_embeds_mask = c["encoder_hidden_states_mask"]
    controlnet_block_samples = model.controlnet(
        hidden_states=x, controlnet_cond=c["control_image"], conditioning_scale=cond_scale, timestep=timestep / 1000,
        encoder_hidden_states=c["encoder_hidden_states"], encoder_hidden_states_mask=prompt_embeds_mask,
        img_shapes=IMG_SHAPES, txt_seq_lens=prompt_embeds_mask.sum(dim=1).tolist(), return_dict=False)
    return model.transformer(hidden_states=x, timestep=timestep / 1000,
                             encoder_hidden_states=c["encoder_hidden_states"],
                             encoder_hidden_states_mask=prompt_embeds_mask, img_shapes=IMG_SHAPES,
                             txt_seq_lens=prompt_embeds_mask.sum(dim=1).tolist(),
                             controlnet_block_samples=controlnet_block_samples, attention_kwargs={},
                             return_dict=False)[0]


PRODUCER = dict(
    library_source="replica of huggingface/diffusers controlnets/controlnet_qwenimage.py@071190daca86 and "
                   "transformers/transformer_qwenimage.py@0052f58c4afd (Qwen-Image + Qwen-Image ControlNet, "
                   "torch 1.13)",
    timestep="sigma float32 in the latents' dtype (QwenImageControlNetPipeline: t.expand(B).to(latents.dtype) / "
             "1000 of sigma*1000, the same to both models; Timesteps(scale=1000) inside); no guidance",
    velocity="the transformer's output as is (flow velocity), not negated",
    note="Qwen-Image MMDiT (3 blocks) with a 2-block QwenImageControlNetModel: the ControlNet's img_in(latents) + "
         "controlnet_x_embedder(packed control latent), per-block Linear controlnet_blocks over each block's image "
         "stream x conditioning_scale 0.7; the transformer adds sample index_block // ceil(3/2) after each block "
         "(0, 0, 1); per-block img_mod / txt_mod (SiLU, Linear to 6d, [shift, scale, gate] x 2) of one timestep "
         "embedding (sinusoid of 1000 sigma); txt_norm RMSNorm (eps 1e-6) then txt_in; complex RoPE from torch.polar "
         "tables, scale_rope centred image rows/cols (-1..0, -2..0 for the 2x3 grid), text positions from "
         "max(h//2, w//2) = 1 on; joint [text, image] attention, per-head RMSNorm q/k on both streams; the "
         "caption's long 0/1 mask (3 of 5 rows valid, padding rows zero) as a bool key mask in the transformer's "
         "attention only (the ControlNet's blocks get encoder_hidden_states_mask, which the processor ignores, so "
         "its attention includes the padding rows); only the image stream reaches norm_out / proj_out; latents "
         "(4x6) packed 2x2; each step the ControlNet then the transformer")

if __name__ == "__main__":
    capture("qwenimage_controlnet", QwenImageControlNet, inputs, call, sys.argv[1], PRODUCER)
