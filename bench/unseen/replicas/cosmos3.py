"""Cosmos 3 (Omni) transformer, reimplemented for torch 1.13 (no diffusers here), captured small in f32 on CPU.

Follows huggingface/diffusers src/diffusers/models/transformers/transformer_cosmos3.py at
02f58124c7ad8ea6709575008b60550b74c0c521 (Cosmos3OmniTransformer with its vision path, Cosmos3VLTextMoTDecoderLayer,
Cosmos3PackedMoTAttention with Cosmos3AttnProcessor's __call__ and _run_attention as its forward,
Cosmos3VLTextRotaryEmbedding, Cosmos3VLTextMLP, _rotate_half) with the parts it imports: embeddings.py (Timesteps,
TimestepEmbedding), normalization.py (RMSNorm): the same module tree, parameter names and shapes, and call
boundaries; the arithmetic line for line. Left out: the sound and action paths (off by default: sound_gen and
action_gen False) and the context-parallel seams (None by default). Stand-ins for what torch 1.13 lacks:
dispatch_attention_fn (SDPA's math on [B, L, H, D], default scale, is_causal as a lower-triangular mask, enable_gqa as
repeat_interleave of the kv heads).

The constructs it shows: one packed sequence without a batch axis ([N, D]): text token embeddings and projected
latent patches written into a zero buffer at index lists, the timestep embedding of each noisy patch scatter-added
onto its token; the sequence cut into an understanding prefix and a generation rest, each with its own norms, q/k/v,
q/k norms, output projection and SwiGLU MLP in every layer (a mixture of tokens); the prefix attends causally to
itself, the rest bidirectionally to [prefix, rest] keys (GQA, 2 query heads over 1 kv head); interleaved multimodal
RoPE (three id rows, frequencies of the height and width sections placed every third channel), rotate-half layout,
θ 5e6; a final norm per pathway, the two joined, the latent rows read back by index, projected, unpatchified into a
zero tensor at the noisy frames.

Pipeline: the Cosmos 3 text-to-image call, stated here as the forward's docstring describes its arguments (the
pipeline file is not at hand): input_ids the caption's ids at text_indexes 0…L−1 (und_len L), the latent one noisy
frame [1, C, 1, H, W] at vision_sequence_indexes L…N−1 (vision_mse_loss_indexes the same), position ids text (i, i, i)
and image (L, h, w) with spatial ids reset (unified_3d_mrope_reset_spatial_ids), vision_timesteps t = σ·1000 per
patch (timestep_scale 0.001 inside), velocity preds_vision[0] as is.

usage: /usr/bin/python3 bench/unseen/replicas/cosmos3.py OUTDIR
"""
import math
import sys

import torch
import torch.nn as nn

from run import capture
from parts import TimestepEmbedding, Timesteps


class RMSNorm(nn.Module):
    """diffusers.models.normalization.RMSNorm(dim, eps, elementwise_affine=True, bias=False)."""

    def __init__(self, dim, eps, elementwise_affine=True, bias=False):
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


def dispatch_attention_fn(query, key, value, is_causal=False, enable_gqa=False):
    """SDPA's math on [B, L, H, D], default scale; is_causal a lower-triangular mask (top-left aligned)."""
    q, k, v = query.transpose(1, 2), key.transpose(1, 2), value.transpose(1, 2)
    if enable_gqa and k.shape[1] != q.shape[1]:
        k = k.repeat_interleave(q.shape[1] // k.shape[1], dim=1)
        v = v.repeat_interleave(q.shape[1] // v.shape[1], dim=1)
    s = (q @ k.transpose(-2, -1)) * (1.0 / (q.shape[-1] ** 0.5))
    if is_causal:
        keep = torch.ones(q.shape[2], k.shape[2], dtype=torch.bool).tril()
        s = s.masked_fill(~keep, float("-inf"))
    return (torch.softmax(s, dim=-1) @ v).transpose(1, 2)


def _rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class Cosmos3PackedMoTAttention(nn.Module):
    """With Cosmos3AttnProcessor's __call__ and _run_attention as its forward."""

    def __init__(self, hidden_size, head_dim, num_attention_heads, num_key_value_heads, attention_bias,
                 rms_norm_eps):
        super().__init__()
        self.hidden_size = hidden_size
        self.head_dim = head_dim
        self.num_attention_heads = num_attention_heads
        self.num_key_value_heads = num_key_value_heads
        self.num_key_value_groups = num_attention_heads // num_key_value_heads
        self.to_q = nn.Linear(hidden_size, num_attention_heads * head_dim, bias=attention_bias)
        self.to_k = nn.Linear(hidden_size, num_key_value_heads * head_dim, bias=attention_bias)
        self.to_v = nn.Linear(hidden_size, num_key_value_heads * head_dim, bias=attention_bias)
        self.to_out = nn.Linear(num_attention_heads * head_dim, hidden_size, bias=attention_bias)
        self.norm_q = RMSNorm(head_dim, eps=rms_norm_eps, elementwise_affine=True, bias=False)
        self.norm_k = RMSNorm(head_dim, eps=rms_norm_eps, elementwise_affine=True, bias=False)
        self.add_q_proj = nn.Linear(hidden_size, num_attention_heads * head_dim, bias=attention_bias)
        self.add_k_proj = nn.Linear(hidden_size, num_key_value_heads * head_dim, bias=attention_bias)
        self.add_v_proj = nn.Linear(hidden_size, num_key_value_heads * head_dim, bias=attention_bias)
        self.to_add_out = nn.Linear(num_attention_heads * head_dim, hidden_size, bias=attention_bias)
        self.norm_added_q = RMSNorm(head_dim, eps=rms_norm_eps, elementwise_affine=True, bias=False)
        self.norm_added_k = RMSNorm(head_dim, eps=rms_norm_eps, elementwise_affine=True, bias=False)

    def forward(self, und_seq, gen_seq, rotary_emb):
        attn = self
        q_und = attn.to_q(und_seq).view(-1, attn.num_attention_heads, attn.head_dim)
        k_und = attn.to_k(und_seq).view(-1, attn.num_key_value_heads, attn.head_dim)
        v_und = attn.to_v(und_seq).view(-1, attn.num_key_value_heads, attn.head_dim)
        q_gen = attn.add_q_proj(gen_seq).view(-1, attn.num_attention_heads, attn.head_dim)
        k_gen = attn.add_k_proj(gen_seq).view(-1, attn.num_key_value_heads, attn.head_dim)
        v_gen = attn.add_v_proj(gen_seq).view(-1, attn.num_key_value_heads, attn.head_dim)
        q_und = attn.norm_q(q_und)
        k_und = attn.norm_k(k_und)
        q_gen = attn.norm_added_q(q_gen)
        k_gen = attn.norm_added_k(k_gen)
        cos_und, sin_und, cos_gen, sin_gen = rotary_emb
        cos_und = cos_und.unsqueeze(1)
        sin_und = sin_und.unsqueeze(1)
        q_und = q_und * cos_und + _rotate_half(q_und) * sin_und
        k_und = k_und * cos_und + _rotate_half(k_und) * sin_und
        cos_gen = cos_gen.unsqueeze(1)
        sin_gen = sin_gen.unsqueeze(1)
        q_gen = q_gen * cos_gen + _rotate_half(q_gen) * sin_gen
        k_gen = k_gen * cos_gen + _rotate_half(k_gen) * sin_gen
        # _run_attention
        causal_out = dispatch_attention_fn(q_und.unsqueeze(0), k_und.unsqueeze(0), v_und.unsqueeze(0),
                                           is_causal=True, enable_gqa=True)
        causal_out = causal_out.squeeze(0).flatten(-2, -1)
        all_k = torch.cat([k_und, k_gen], dim=0)
        all_v = torch.cat([v_und, v_gen], dim=0)
        full_out = dispatch_attention_fn(q_gen.unsqueeze(0), all_k.unsqueeze(0), all_v.unsqueeze(0),
                                         is_causal=False, enable_gqa=True)
        full_out = full_out.squeeze(0).flatten(-2, -1)
        und_out = attn.to_out(causal_out)
        gen_out = attn.to_add_out(full_out)
        return und_out, gen_out


class Cosmos3VLTextRotaryEmbedding(nn.Module):
    def __init__(self, head_dim, rope_theta, rope_axes_dim):
        super().__init__()
        inv_freq = 1.0 / (rope_theta ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)
        self.rope_axes_dim = rope_axes_dim

    def apply_interleaved_mrope(self, freqs, rope_axes_dim):
        freqs_t = freqs[0]
        for dim, offset in enumerate((1, 2), start=1):
            length = rope_axes_dim[dim] * 3
            idx = slice(offset, length, 3)
            freqs_t[..., idx] = freqs[dim, ..., idx]
        return freqs_t

    def forward(self, position_ids, device, dtype):
        if position_ids.ndim == 2:
            position_ids = position_ids[None, ...].expand(3, position_ids.shape[0], -1)
        inv_freq_expanded = self.inv_freq[None, None, :, None].float().expand(3, position_ids.shape[1], -1, 1).to(device)
        position_ids_expanded = position_ids[:, :, None, :].float()
        freqs = inv_freq_expanded @ position_ids_expanded
        freqs = freqs.transpose(2, 3)
        freqs = self.apply_interleaved_mrope(freqs, self.rope_axes_dim)
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(dtype=dtype), emb.sin().to(dtype=dtype)


class Cosmos3VLTextMLP(nn.Module):
    def __init__(self, hidden_size, intermediate_size):
        super().__init__()
        self.gate_proj = nn.Linear(hidden_size, intermediate_size, bias=False)
        self.up_proj = nn.Linear(hidden_size, intermediate_size, bias=False)
        self.down_proj = nn.Linear(intermediate_size, hidden_size, bias=False)
        self.act_fn = nn.SiLU()

    def forward(self, x):
        return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))


class Cosmos3VLTextMoTDecoderLayer(nn.Module):
    def __init__(self, hidden_size, head_dim, num_attention_heads, num_key_value_heads, intermediate_size,
                 attention_bias, rms_norm_eps):
        super().__init__()
        self.hidden_size = hidden_size
        self.self_attn = Cosmos3PackedMoTAttention(hidden_size=hidden_size, head_dim=head_dim,
                                                   num_attention_heads=num_attention_heads,
                                                   num_key_value_heads=num_key_value_heads,
                                                   attention_bias=attention_bias, rms_norm_eps=rms_norm_eps)
        self.mlp = Cosmos3VLTextMLP(hidden_size=hidden_size, intermediate_size=intermediate_size)
        self.mlp_moe_gen = Cosmos3VLTextMLP(hidden_size=hidden_size, intermediate_size=intermediate_size)
        self.input_layernorm = RMSNorm(hidden_size, eps=rms_norm_eps, elementwise_affine=True, bias=False)
        self.input_layernorm_moe_gen = RMSNorm(hidden_size, eps=rms_norm_eps, elementwise_affine=True, bias=False)
        self.post_attention_layernorm = RMSNorm(hidden_size, eps=rms_norm_eps, elementwise_affine=True, bias=False)
        self.post_attention_layernorm_moe_gen = RMSNorm(hidden_size, eps=rms_norm_eps, elementwise_affine=True,
                                                        bias=False)

    def forward(self, und_seq, gen_seq, rotary_emb):
        und_norm = self.input_layernorm(und_seq)
        gen_norm = self.input_layernorm_moe_gen(gen_seq)
        und_attn_out, gen_attn_out = self.self_attn(und_norm, gen_norm, rotary_emb)
        residual_und = und_seq + und_attn_out
        residual_gen = gen_seq + gen_attn_out
        mlp_out_und = self.mlp(self.post_attention_layernorm(residual_und))
        mlp_out_gen = self.mlp_moe_gen(self.post_attention_layernorm_moe_gen(residual_gen))
        return residual_und + mlp_out_und, residual_gen + mlp_out_gen


class Cosmos3OmniTransformer(nn.Module):
    _keep_in_fp32_modules = ["time_embedder"]

    def __init__(self, attention_bias=False, head_dim=128, hidden_size=4096, intermediate_size=12288,
                 latent_channel=48, latent_patch_size=2, num_attention_heads=32, num_hidden_layers=36,
                 num_key_value_heads=8, patch_latent_dim=192, rms_norm_eps=1e-6, rope_scaling=None,
                 rope_theta=5000000.0, timestep_scale=0.001, vocab_size=151936):
        super().__init__()
        rope_axes_dim = rope_scaling.get("mrope_section", [24, 20, 20]) if rope_scaling is not None else [24, 20, 20]
        self.latent_patch_size = latent_patch_size
        self.latent_channel = latent_channel
        self.hidden_size = hidden_size
        self.timestep_scale = timestep_scale
        self.embed_tokens = nn.Embedding(vocab_size, hidden_size)
        self.layers = nn.ModuleList([
            Cosmos3VLTextMoTDecoderLayer(hidden_size=hidden_size, head_dim=head_dim,
                                         num_attention_heads=num_attention_heads,
                                         num_key_value_heads=num_key_value_heads,
                                         intermediate_size=intermediate_size, attention_bias=attention_bias,
                                         rms_norm_eps=rms_norm_eps)
            for _ in range(num_hidden_layers)])
        self.norm = RMSNorm(hidden_size, eps=rms_norm_eps, elementwise_affine=True, bias=False)
        self.norm_moe_gen = RMSNorm(hidden_size, eps=rms_norm_eps, elementwise_affine=True, bias=False)
        self.rotary_emb = Cosmos3VLTextRotaryEmbedding(head_dim=head_dim, rope_theta=rope_theta,
                                                       rope_axes_dim=rope_axes_dim)
        self.vocab_size = vocab_size
        self.lm_head = nn.Linear(hidden_size, vocab_size, bias=False)
        self.proj_in = nn.Linear(patch_latent_dim, hidden_size, bias=True)
        self.proj_out = nn.Linear(hidden_size, patch_latent_dim, bias=True)
        self.time_proj = Timesteps(num_channels=256, flip_sin_to_cos=True, downscale_freq_shift=0)
        self.time_embedder = TimestepEmbedding(in_channels=256, time_embed_dim=hidden_size)

    def _apply_timestep_embeds_to_noisy_tokens(self, packed_tokens, packed_timestep_embeds, noisy_frame_indexes,
                                               token_shapes):
        start_noisy_index = 0
        flattened_noisy_frame_indexes = []
        for noisy_indexes_i, token_shape_i in zip(noisy_frame_indexes, token_shapes):
            spatial_numel_i = math.prod(token_shape_i[1:])
            spatial_indexes_i = torch.arange(spatial_numel_i, device=packed_tokens.device)
            frame_offsets = (noisy_indexes_i * spatial_numel_i).unsqueeze(-1) + spatial_indexes_i + start_noisy_index
            flattened_noisy_frame_indexes.append(frame_offsets.flatten())
            start_noisy_index += token_shape_i[0] * spatial_numel_i
        flattened = torch.cat(flattened_noisy_frame_indexes, dim=0).unsqueeze(-1).expand(-1, packed_tokens.shape[1])
        return packed_tokens.scatter_add(dim=0, index=flattened, src=packed_timestep_embeds)

    def _patchify_and_pack_latents(self, tokens_vision):
        p = self.latent_patch_size
        latent_channel = self.latent_channel
        packed_latent = []
        original_latent_shapes = []
        for latent in tokens_vision:
            latent = latent.squeeze(0)
            _, t_actual, h_actual, w_actual = latent.shape
            original_latent_shapes.append((t_actual, h_actual, w_actual))
            h_padded = ((h_actual + p - 1) // p) * p
            w_padded = ((w_actual + p - 1) // p) * p
            if h_padded != h_actual or w_padded != w_actual:
                padded = torch.zeros((latent_channel, t_actual, h_padded, w_padded), device=latent.device,
                                     dtype=latent.dtype)
                padded[:, :, :h_actual, :w_actual] = latent
                latent = padded
            h_patches = h_padded // p
            w_patches = w_padded // p
            latent = latent.reshape(latent_channel, t_actual, h_patches, p, w_patches, p)
            latent = torch.einsum("cthpwq->thwpqc", latent).reshape(-1, p * p * latent_channel)
            packed_latent.append(latent)
        return torch.cat(packed_latent, dim=0), original_latent_shapes

    def _unpatchify_and_unpack_latents(self, packed_mse_preds, token_shapes_vision, noisy_frame_indexes_vision,
                                       original_latent_shapes):
        p = self.latent_patch_size
        latent_channel = self.latent_channel
        unpatchified_latents = []
        start_idx = 0
        for token_shape, noisy_frame_indexes, original_shape in zip(token_shapes_vision, noisy_frame_indexes_vision,
                                                                    original_latent_shapes):
            t_c = token_shape[0]
            _, h_orig, w_orig = original_shape
            h_padded = ((h_orig + p - 1) // p) * p
            w_padded = ((w_orig + p - 1) // p) * p
            h_patches = h_padded // p
            w_patches = w_padded // p
            t_n = len(noisy_frame_indexes)
            output_tensor = torch.zeros((latent_channel, t_c, h_orig, w_orig), device=packed_mse_preds.device,
                                        dtype=packed_mse_preds.dtype)
            num_patches = t_n * h_patches * w_patches
            if num_patches > 0:
                end_idx = start_idx + num_patches
                latent_patches = packed_mse_preds[start_idx:end_idx]
                latent_patches = latent_patches.reshape(t_n, h_patches, w_patches, p, p, latent_channel)
                latent = torch.einsum("thwpqc->cthpwq", latent_patches)
                latent = latent.reshape(latent_channel, t_n, h_patches * p, w_patches * p)
                latent = latent[:, :, :h_orig, :w_orig]
                output_tensor[:, noisy_frame_indexes] = latent
                start_idx = end_idx
            unpatchified_latents.append(output_tensor.unsqueeze(0))
        return unpatchified_latents

    def forward(self, input_ids, text_indexes, position_ids, und_len, sequence_length, vision_tokens,
                vision_token_shapes, vision_sequence_indexes, vision_mse_loss_indexes, vision_timesteps,
                vision_noisy_frame_indexes):
        packed_text_embedding = self.embed_tokens(input_ids)
        target_dtype = packed_text_embedding.dtype
        hidden_states = packed_text_embedding.new_zeros(size=(sequence_length, self.hidden_size))
        hidden_states[text_indexes] = packed_text_embedding
        packed_tokens_vision, original_latent_shapes = self._patchify_and_pack_latents(vision_tokens)
        packed_tokens_vision = self.proj_in(packed_tokens_vision)
        timesteps_vision = vision_timesteps * self.timestep_scale
        packed_timestep_embeds_vision = self.time_embedder(self.time_proj(timesteps_vision))
        packed_timestep_embeds_vision = packed_timestep_embeds_vision.to(target_dtype)
        packed_tokens_vision = self._apply_timestep_embeds_to_noisy_tokens(
            packed_tokens=packed_tokens_vision, packed_timestep_embeds=packed_timestep_embeds_vision,
            noisy_frame_indexes=vision_noisy_frame_indexes, token_shapes=vision_token_shapes)
        hidden_states[vision_sequence_indexes] = packed_tokens_vision
        cos, sin = self.rotary_emb(
            position_ids=position_ids.unsqueeze(0) if position_ids.ndim == 1 else position_ids.unsqueeze(1),
            device=hidden_states.device, dtype=hidden_states.dtype)
        cos = cos.squeeze(0)
        sin = sin.squeeze(0)
        und_seq = hidden_states[:und_len]
        gen_seq = hidden_states[und_len:]
        rotary_emb = (cos[:und_len], sin[:und_len], cos[und_len:], sin[und_len:])
        for decoder_layer in self.layers:
            und_seq, gen_seq = decoder_layer(und_seq, gen_seq, rotary_emb)
        und_out = self.norm(und_seq)
        gen_out = self.norm_moe_gen(gen_seq)
        last_hidden_state = torch.cat([und_out, gen_out], dim=0)
        preds_vision_packed = self.proj_out(last_hidden_state[vision_mse_loss_indexes])
        preds_vision = self._unpatchify_and_unpack_latents(preds_vision_packed, token_shapes_vision=vision_token_shapes,
                                                           noisy_frame_indexes_vision=vision_noisy_frame_indexes,
                                                           original_latent_shapes=original_latent_shapes)
        return preds_vision, None, None


L, C, H, W, P = 5, 4, 4, 4, 2  # caption ids, latent channels, latent height and width, patch


def build():
    # 2 query heads of 16 over 1 kv head, width 32, 2 layers; mrope sections (t, h, w) = (4, 2, 2) pairs; 4 latent
    # channels in 2x2 patches; 64 ids.
    return Cosmos3OmniTransformer(head_dim=16, hidden_size=32, intermediate_size=64, latent_channel=C,
                                  latent_patch_size=P, num_attention_heads=2, num_hidden_layers=2,
                                  num_key_value_heads=1, patch_latent_dim=C * P * P,
                                  rope_scaling={"mrope_section": [4, 2, 2]}, vocab_size=64)


def inputs(g):
    hp, wp = H // P, W // P
    text = torch.arange(L)
    pos_text = torch.stack([text, text, text])
    hh, ww = torch.meshgrid(torch.arange(hp), torch.arange(wp), indexing="ij")
    pos_img = torch.stack([torch.full((hp * wp,), L), hh.flatten(), ww.flatten()])
    return {"input_ids": torch.randint(0, 64, (L,), generator=g),
            "position_ids": torch.cat([pos_text, pos_img], dim=1),
            "noise": torch.randn((1, C, 1, H, W), generator=g)}


def call(model, x, sigma, c):
    n = (H // P) * (W // P)
    t = torch.full((n,), sigma * 1000.0, dtype=torch.float32)
    preds, _, _ = model(input_ids=c["input_ids"], text_indexes=torch.arange(L), position_ids=c["position_ids"],
                        und_len=L, sequence_length=L + n, vision_tokens=[x],
                        vision_token_shapes=[(1, H // P, W // P)], vision_sequence_indexes=torch.arange(L, L + n),
                        vision_mse_loss_indexes=torch.arange(L, L + n), vision_timesteps=t,
                        vision_noisy_frame_indexes=[torch.tensor([0])])
    return preds[0]


PRODUCER = dict(
    library_source="replica of huggingface/diffusers transformer_cosmos3.py@02f58124c7ad (vision path) and the "
                   "parts it imports (torch 1.13)",
    timestep="vision_timesteps sigma*1000 per patch, float32 (the model scales by 0.001)",
    velocity="preds_vision[0] as is (flow velocity), not negated",
    note="Cosmos 3 mixture-of-tokens transformer, 2 layers, one packed [N, D] sequence (no batch axis): caption "
         "token embeddings and projected 2x2 latent patches written into a zero buffer at index lists, each noisy "
         "patch's timestep embedding scatter-added onto its token; understanding prefix (5 text rows) and "
         "generation rest (4 image rows) with their own norms, q/k/v, q/k norms, out projections and SwiGLU MLPs; "
         "prefix causal over itself, rest bidirectional over [prefix, rest] keys, GQA 2 q / 1 kv heads; "
         "interleaved MRoPE (ids [3, N], h and w frequencies every third channel), rotate-half, θ 5e6; per-pathway "
         "final norm, joined, image rows read back by index, proj_out, unpatchified into a zero tensor")

if __name__ == "__main__":
    capture("cosmos3", build, inputs, call, sys.argv[1], PRODUCER)
