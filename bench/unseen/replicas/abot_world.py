"""ABot-World causal action-conditioned video DiT, reimplemented for torch 1.13 (no diffusers here), captured small in
f32 on CPU.

Follows huggingface/diffusers src/diffusers/models/transformers/transformer_abot_world.py at
6ca0a9f61e1ebd0f4c3c254a352fcd1ee325768a (ABotWorldTransformer3DModel, ABotWorldTransformerBlock, ABotWorldAttention
with ABotWorldSelfAttnProcessor / ABotWorldCrossAttnProcessor, ABotWorldLayerKVCache, ABotWorldKVCache,
ABotWorldActionAdapter, ABotWorldResidualBlock, ABotWorldTimeTextEmbedding, rope_params, rope_apply,
reference_rope_freqs, reference_rope_apply) with the parts it imports: normalization.py (FP32LayerNorm): the same
module tree, parameter names and shapes, and call boundaries; the arithmetic line for line (the K/V-cache bookkeeping
included: the rolling-window eviction and the rope re-base branches are kept though the first block never takes them).
Stand-ins for what torch 1.13 lacks: torch.nn.RMSNorm (eps given) and dispatch_attention_fn (SDPA's math on [B, L, H,
D], default scale, no mask).

The constructs it shows: a per-frame timestep [B, F] (frame 0 at 0, the pinned clean start frame), the sinusoid in
f64, time_proj per frame, then, on the first block of a stream, made per token (repeat_interleave over the frame's
tokens) with reference tokens prepended at their own timestep-0 modulation ([B, L, 6, D]); reference-image slots
patch-embedded by the same Conv3d, scaled by a per-slot mask and prepended to the video tokens, their keys and values
pinned into a K/V cache; 3-D complex RoPE in f64 (temporal band, h, w) on the video rows, and a separate complex64
RoPE at negative temporal positions (−(K−i)·256) for the reference rows; q/k RMSNorm across all heads; keyboard
actions broadcast into 32 pixel-resolution planes, PixelUnshuffle(16) + a stride-2 conv + a conv residual block,
added onto the patch tokens; cross-attention to the zero-padded caption whose keys and values are projected once per
stream and cached: steps 2 and 3 reuse step 1's attn2 K/V (no to_k/to_v/norm_k calls there); the head modulated per
frame from the un-projected time embedding; the unpatchify an einsum.

Pipeline as the modular ABot-World blocks (modular_pipelines/abot_world, denoise.py at
5f7dc50603f7c2c522a40c72ba9270f8df28e6c8, before_denoise.py / encoders.py at e7fdfdb2bac0) call it on the first
rollout block (current_start 0): latents [B, C, F, h, w] drawn as [B, F, C, h, w] and permuted, frame 0 replaced by
the start frame's latent before every call; timestep t (float, σ·1000 on the flow grid) expanded to [B, F] with
[:, 0] = 0; prompt_embeds the caption padded to text_len with zero rows (the tokenizer's max_length, masked rows
zeroed); action planes action.view(1, 8, 1, 1, 1).repeat_interleave(4, 1).repeat(1, 1, F, H, W); reference latents
[B, K, C, 1, h, w] with a [B, K] mask of ones; one ABotWorldKVCache allocated before the loop (ref_token_len +
local_attn_size·frame_seqlen tokens) and passed to every call; velocity the output as is. The pipeline's x0 re-noise
update and its cache-update forward after the block are outside this capture (the shared Euler loop instead).

usage: /usr/bin/python3 bench/unseen/replicas/abot_world.py OUTDIR
"""
import math
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

from parts import TorchRMSNorm
from run import capture, sdpa


class RMSNorm(TorchRMSNorm):
    """torch 2's nn.RMSNorm(dim, eps, elementwise_affine=True)."""


class FP32LayerNorm(nn.LayerNorm):
    def forward(self, inputs):
        origin_dtype = inputs.dtype
        return F.layer_norm(inputs.float(), self.normalized_shape,
                            self.weight.float() if self.weight is not None else None,
                            self.bias.float() if self.bias is not None else None, self.eps).to(origin_dtype)


def dispatch_attention_fn(query, key, value, attn_mask=None):
    """SDPA's math on [B, L, H, D] (default scale, no mask)."""
    q, k, v = query.transpose(1, 2), key.transpose(1, 2), value.transpose(1, 2)
    return sdpa(q, k, v, mask=attn_mask).transpose(1, 2)


def rope_params(max_seq_len, dim, theta=10000):
    freqs = torch.outer(
        torch.arange(max_seq_len),
        1.0 / torch.pow(theta, torch.arange(0, dim, 2).to(torch.float64).div(dim)),
    )
    return torch.polar(torch.ones_like(freqs), freqs)


def rope_apply(x, grid_sizes, freqs, start_frame=0):
    num_heads, c = x.size(2), x.size(3) // 2
    freqs = freqs.split([c - 2 * (c // 3), c // 3, c // 3], dim=1)

    output = []
    for i, (f, h, w) in enumerate(grid_sizes.tolist()):
        seq_len = f * h * w
        x_i = torch.view_as_complex(x[i, :seq_len].to(torch.float64).reshape(seq_len, num_heads, -1, 2))
        freqs_i = torch.cat(
            [
                freqs[0][start_frame: start_frame + f].view(f, 1, 1, -1).expand(f, h, w, -1),
                freqs[1][:h].view(1, h, 1, -1).expand(f, h, w, -1),
                freqs[2][:w].view(1, 1, w, -1).expand(f, h, w, -1),
            ],
            dim=-1,
        ).reshape(seq_len, 1, -1)
        x_i = torch.view_as_real(x_i * freqs_i).flatten(2)
        x_i = torch.cat([x_i, x[i, seq_len:]])
        output.append(x_i)
    return torch.stack(output).float()


def reference_rope_freqs(freqs, num_slots, tokens_per_slot, ref_grid, device):
    patch_t, patch_h, patch_w = ref_grid
    freq_dim = freqs.shape[1]
    f_band = freq_dim - 2 * (freq_dim // 3)

    temporal_step = max(tokens_per_slot, 256)
    neg_temporal = torch.tensor(
        [-(num_slots - i) * temporal_step for i in range(num_slots)], dtype=torch.float64, device=device
    )
    t_freqs = torch.outer(
        neg_temporal,
        1.0 / torch.pow(10000, torch.arange(0, 2 * f_band, 2, device=device, dtype=torch.float64).div(2 * f_band)),
    )
    t_freqs = torch.polar(torch.ones_like(t_freqs), t_freqs)

    freqs_split = freqs.split([f_band, freq_dim // 3, freq_dim // 3], dim=1)
    h_freqs = freqs_split[1][:patch_h].to(device)
    w_freqs = freqs_split[2][:patch_w].to(device)
    ref_freqs = torch.cat(
        [
            t_freqs[:, None, None, None, :].expand(num_slots, patch_t, patch_h, patch_w, f_band),
            h_freqs[None, None, :, None, :].expand(num_slots, patch_t, patch_h, patch_w, freq_dim // 3),
            w_freqs[None, None, None, :, :].expand(num_slots, patch_t, patch_h, patch_w, freq_dim // 3),
        ],
        dim=-1,
    ).reshape(num_slots * tokens_per_slot, 1, -1)
    return ref_freqs.to(torch.complex64)


def reference_rope_apply(x, freqs):
    x_out = torch.view_as_complex(x.to(torch.float32).reshape(x.shape[0], x.shape[1], x.shape[2], -1, 2))
    x_out = torch.view_as_real(x_out * freqs.to(x.device)).flatten(3)
    return x_out.to(x.dtype)


class ABotWorldLayerKVCache:
    def __init__(self, batch_size, num_tokens, num_heads, head_dim, device, dtype):
        self.key_raw = torch.zeros(batch_size, num_tokens, num_heads, head_dim, device=device, dtype=dtype)
        self.key_roped = torch.zeros_like(self.key_raw)
        self.value = torch.zeros_like(self.key_raw)
        self.global_end_index = 0
        self.local_end_index = 0
        self.rope_base_frame = 0
        self.cross_key = None
        self.cross_value = None

    def reset(self):
        self.global_end_index = 0
        self.local_end_index = 0
        self.rope_base_frame = 0
        self.cross_key = None
        self.cross_value = None


class ABotWorldKVCache:
    def __init__(self, num_layers, batch_size, num_tokens, ref_token_len, num_heads, head_dim, device, dtype):
        self.layer_caches = [
            ABotWorldLayerKVCache(batch_size, num_tokens, num_heads, head_dim, device, dtype)
            for _ in range(num_layers)
        ]
        self.ref_token_len = ref_token_len

    def get(self, layer_idx):
        return self.layer_caches[layer_idx]

    def reset(self):
        for cache in self.layer_caches:
            cache.reset()


class ABotWorldSelfAttnProcessor:
    _REBASE_MAX_POS = 256

    def __call__(self, attn, hidden_states, rotary_emb, grid_sizes, kv_cache, current_start, query_ref_token_len,
                 ref_token_len, ref_rotary_emb):
        query = attn.norm_q(attn.to_q(hidden_states))
        key = attn.norm_k(attn.to_k(hidden_states))
        value = attn.to_v(hidden_states)

        query = query.unflatten(2, (attn.heads, -1))
        key = key.unflatten(2, (attn.heads, -1))
        value = value.unflatten(2, (attn.heads, -1))

        frame_seqlen = int(math.prod(grid_sizes[0][1:]).item())
        video_token_len = query.shape[1] - query_ref_token_len
        num_video_frames = video_token_len // frame_seqlen
        video_grid_sizes = grid_sizes.clone()
        video_grid_sizes[:, 0] = num_video_frames

        cache_size = kv_cache.key_raw.shape[1]
        cache_current_end = ref_token_len + current_start + video_token_len

        if kv_cache.global_end_index == 0:
            kv_cache.rope_base_frame = 0

        if cache_current_end > kv_cache.global_end_index and video_token_len + kv_cache.local_end_index > cache_size:
            num_evicted = video_token_len + kv_cache.local_end_index - cache_size
            num_rolled = kv_cache.local_end_index - num_evicted - ref_token_len
            src = slice(ref_token_len + num_evicted, ref_token_len + num_evicted + num_rolled)
            dst = slice(ref_token_len, ref_token_len + num_rolled)
            kv_cache.key_raw[:, dst] = kv_cache.key_raw[:, src].clone()
            kv_cache.key_roped[:, dst] = kv_cache.key_roped[:, src].clone()
            kv_cache.value[:, dst] = kv_cache.value[:, src].clone()
            local_end_index = kv_cache.local_end_index + cache_current_end - kv_cache.global_end_index - num_evicted
        else:
            local_end_index = kv_cache.local_end_index + cache_current_end - kv_cache.global_end_index
        local_start_index = local_end_index - video_token_len

        if query_ref_token_len > 0:
            kv_cache.key_raw[:, :ref_token_len] = key[:, :query_ref_token_len]
            kv_cache.value[:, :ref_token_len] = value[:, :query_ref_token_len]
        kv_cache.key_raw[:, local_start_index:local_end_index] = key[:, query_ref_token_len:]
        kv_cache.value[:, local_start_index:local_end_index] = value[:, query_ref_token_len:]

        max_attention_tokens = attn.local_attn_size * frame_seqlen
        recent_start = max(ref_token_len, local_end_index - max_attention_tokens)
        recent_start += (local_end_index - recent_start) % frame_seqlen
        visible_video_frames = (local_end_index - recent_start) // frame_seqlen

        abs_frame_start = current_start // frame_seqlen
        new_start_pos = abs_frame_start - kv_cache.rope_base_frame
        rebase_limit = min(self._REBASE_MAX_POS, rotary_emb.shape[0] - attn.local_attn_size - num_video_frames)
        if visible_video_frames > 0 and (new_start_pos + num_video_frames > rebase_limit or new_start_pos < 0):
            kv_cache.rope_base_frame = abs_frame_start + num_video_frames - visible_video_frames
            window_grid = grid_sizes.clone()
            window_grid[:, 0] = visible_video_frames
            kv_cache.key_roped[:, recent_start:local_end_index] = rope_apply(
                kv_cache.key_raw[:, recent_start:local_end_index], window_grid, rotary_emb, start_frame=0
            ).type_as(value)
            new_start_pos = abs_frame_start - kv_cache.rope_base_frame
        else:
            kv_cache.key_roped[:, local_start_index:local_end_index] = rope_apply(
                key[:, query_ref_token_len:], video_grid_sizes, rotary_emb, start_frame=new_start_pos
            ).type_as(value)

        roped_query = rope_apply(
            query[:, query_ref_token_len:], video_grid_sizes, rotary_emb, start_frame=new_start_pos
        ).type_as(value)

        attn_key = kv_cache.key_roped[:, recent_start:local_end_index]
        attn_value = kv_cache.value[:, recent_start:local_end_index]
        if ref_token_len > 0:
            ref_key = reference_rope_apply(kv_cache.key_raw[:, :ref_token_len], ref_rotary_emb).type_as(value)
            attn_key = torch.cat([ref_key, attn_key], dim=1)
            attn_value = torch.cat([kv_cache.value[:, :ref_token_len], attn_value], dim=1)
            if query_ref_token_len > 0:
                ref_query = reference_rope_apply(query[:, :query_ref_token_len], ref_rotary_emb).type_as(value)
                roped_query = torch.cat([ref_query, roped_query], dim=1)

        hidden_states = dispatch_attention_fn(roped_query, attn_key, attn_value, attn_mask=None)

        kv_cache.global_end_index = cache_current_end
        kv_cache.local_end_index = local_end_index

        hidden_states = attn.to_out[0](hidden_states.flatten(2, 3))
        return hidden_states


class ABotWorldCrossAttnProcessor:
    def __call__(self, attn, hidden_states, encoder_hidden_states, kv_cache):
        query = attn.norm_q(attn.to_q(hidden_states)).unflatten(2, (attn.heads, -1))

        if kv_cache.cross_key is None:
            kv_cache.cross_key = attn.norm_k(attn.to_k(encoder_hidden_states)).unflatten(2, (attn.heads, -1))
            kv_cache.cross_value = attn.to_v(encoder_hidden_states).unflatten(2, (attn.heads, -1))

        hidden_states = dispatch_attention_fn(query, kv_cache.cross_key, kv_cache.cross_value, attn_mask=None)
        hidden_states = attn.to_out[0](hidden_states.flatten(2, 3))
        return hidden_states


class ABotWorldAttention(nn.Module):
    def __init__(self, dim, heads, eps, local_attn_size=None, is_cross_attention=False, processor=None):
        super().__init__()
        self.heads = heads
        self.local_attn_size = local_attn_size
        self.is_cross_attention = is_cross_attention

        self.to_q = nn.Linear(dim, dim, bias=True)
        self.to_k = nn.Linear(dim, dim, bias=True)
        self.to_v = nn.Linear(dim, dim, bias=True)
        self.to_out = nn.ModuleList([nn.Linear(dim, dim, bias=True)])
        self.norm_q = RMSNorm(dim, eps=eps, elementwise_affine=True)
        self.norm_k = RMSNorm(dim, eps=eps, elementwise_affine=True)

        self.processor = processor if processor is not None else ABotWorldSelfAttnProcessor()

    def forward(self, hidden_states, **kwargs):
        return self.processor(self, hidden_states, **kwargs)


class ABotWorldResidualBlock(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.conv1 = nn.Conv2d(dim, dim, kernel_size=3, padding=1)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(dim, dim, kernel_size=3, padding=1)

    def forward(self, x):
        return x + self.conv2(self.relu(self.conv1(x)))


class ABotWorldActionAdapter(nn.Module):
    def __init__(self, in_channels, dim, downscale_factor):
        super().__init__()
        self.pixel_unshuffle = nn.PixelUnshuffle(downscale_factor=downscale_factor)
        self.conv = nn.Conv2d(
            in_channels * downscale_factor * downscale_factor, dim, kernel_size=(2, 2), stride=(2, 2), padding=0
        )
        self.residual_blocks = nn.Sequential(ABotWorldResidualBlock(dim))

    def forward(self, x):
        batch_size, channels, num_frames, height, width = x.size()
        x = x.permute(0, 2, 1, 3, 4).contiguous().view(batch_size * num_frames, channels, height, width)
        x = self.residual_blocks(self.conv(self.pixel_unshuffle(x)))
        x = x.view(batch_size, num_frames, x.size(1), x.size(2), x.size(3))
        return x.permute(0, 2, 1, 3, 4)


class ABotWorldTimeTextEmbedding(nn.Module):
    def __init__(self, dim, time_freq_dim, text_embed_dim):
        super().__init__()
        self.time_freq_dim = time_freq_dim
        self.time_embedder = nn.Sequential(nn.Linear(time_freq_dim, dim), nn.SiLU(), nn.Linear(dim, dim))
        self.time_proj = nn.Sequential(nn.SiLU(), nn.Linear(dim, dim * 6))
        self.text_embedder = nn.Sequential(
            nn.Linear(text_embed_dim, dim), nn.GELU(approximate="tanh"), nn.Linear(dim, dim)
        )

    def sinusoidal_embedding(self, timestep):
        half = self.time_freq_dim // 2
        timestep = timestep.type(torch.float64)
        sinusoid = torch.outer(
            timestep, torch.pow(10000, -torch.arange(half, device=timestep.device).to(timestep.dtype).div(half))
        )
        return torch.cat([torch.cos(sinusoid), torch.sin(sinusoid)], dim=1)

    def forward(self, timestep, dtype):
        temb = self.time_embedder(self.sinusoidal_embedding(timestep.flatten()).to(dtype))
        temb_proj = self.time_proj(temb).unflatten(1, (6, -1)).unflatten(0, timestep.shape)
        return temb, temb_proj


class ABotWorldTransformerBlock(nn.Module):
    def __init__(self, dim, ffn_dim, num_heads, eps, local_attn_size):
        super().__init__()
        self.norm1 = FP32LayerNorm(dim, eps, elementwise_affine=False)
        self.attn1 = ABotWorldAttention(dim, num_heads, eps, local_attn_size=local_attn_size)
        self.attn2 = ABotWorldAttention(
            dim, num_heads, eps, is_cross_attention=True, processor=ABotWorldCrossAttnProcessor()
        )
        self.norm2 = FP32LayerNorm(dim, eps, elementwise_affine=True)
        self.ffn = nn.Sequential(nn.Linear(dim, ffn_dim), nn.GELU(approximate="tanh"), nn.Linear(ffn_dim, dim))
        self.norm3 = FP32LayerNorm(dim, eps, elementwise_affine=False)
        self.scale_shift_table = nn.Parameter(torch.randn(1, 6, dim) / dim ** 0.5)

    def forward(self, hidden_states, encoder_hidden_states, temb_proj, rotary_emb, grid_sizes, kv_cache,
                current_start, query_ref_token_len, ref_token_len, ref_rotary_emb):
        token_level = temb_proj.shape[1] == hidden_states.shape[1]
        if token_level:
            num_frames, frame_seqlen = hidden_states.shape[1], 1
        else:
            num_frames, frame_seqlen = temb_proj.shape[1], hidden_states.shape[1] // temb_proj.shape[1]

        e = (self.scale_shift_table.unsqueeze(0).float() + temb_proj.float()).chunk(6, dim=2)

        def modulate(normed, shift, scale):
            if token_level:
                return normed * (1 + scale.squeeze(2)) + shift.squeeze(2)
            return ((normed.unflatten(1, (num_frames, frame_seqlen)) * (1 + scale)) + shift).flatten(1, 2)

        def gate(value, g):
            if token_level:
                return value * g.squeeze(2)
            return (value.unflatten(1, (num_frames, frame_seqlen)) * g).flatten(1, 2)

        norm_hidden_states = modulate(self.norm1(hidden_states.float()), e[0], e[1]).type_as(hidden_states)
        attn_output = self.attn1(
            norm_hidden_states,
            rotary_emb=rotary_emb,
            grid_sizes=grid_sizes,
            kv_cache=kv_cache,
            current_start=current_start,
            query_ref_token_len=query_ref_token_len,
            ref_token_len=ref_token_len,
            ref_rotary_emb=ref_rotary_emb,
        )
        hidden_states = (hidden_states.float() + gate(attn_output.float(), e[2])).type_as(hidden_states)

        attn_output = self.attn2(
            self.norm2(hidden_states.float()).type_as(hidden_states),
            encoder_hidden_states=encoder_hidden_states,
            kv_cache=kv_cache,
        )
        hidden_states = hidden_states + attn_output

        norm_hidden_states = modulate(self.norm3(hidden_states.float()), e[3], e[4]).type_as(hidden_states)
        ffn_output = self.ffn(norm_hidden_states)
        hidden_states = (hidden_states.float() + gate(ffn_output.float(), e[5])).type_as(hidden_states)
        return hidden_states


class _Config(dict):
    __getattr__ = dict.__getitem__


class ABotWorldTransformer3DModel(nn.Module):
    def __init__(self, patch_size=(1, 2, 2), num_attention_heads=24, attention_head_dim=128, in_channels=48,
                 out_channels=48, text_dim=4096, text_len=512, freq_dim=256, ffn_dim=14336, num_layers=30, eps=1e-6,
                 local_attn_size=21, action_in_channels=32, action_downscale_factor=16, rope_max_seq_len=1024):
        super().__init__()
        self.config = _Config(patch_size=tuple(patch_size), num_attention_heads=num_attention_heads,
                              attention_head_dim=attention_head_dim, in_channels=in_channels,
                              out_channels=out_channels, text_dim=text_dim, text_len=text_len, freq_dim=freq_dim,
                              ffn_dim=ffn_dim, num_layers=num_layers, eps=eps, local_attn_size=local_attn_size,
                              action_in_channels=action_in_channels,
                              action_downscale_factor=action_downscale_factor, rope_max_seq_len=rope_max_seq_len)
        inner_dim = num_attention_heads * attention_head_dim

        self.patch_embedding = nn.Conv3d(in_channels, inner_dim, kernel_size=patch_size, stride=patch_size)
        self.act_control_adapter = ABotWorldActionAdapter(action_in_channels, inner_dim, action_downscale_factor)
        self.condition_embedder = ABotWorldTimeTextEmbedding(inner_dim, freq_dim, text_dim)

        self.blocks = nn.ModuleList(
            [
                ABotWorldTransformerBlock(inner_dim, ffn_dim, num_attention_heads, eps, local_attn_size)
                for _ in range(num_layers)
            ]
        )

        self.norm_out = FP32LayerNorm(inner_dim, eps, elementwise_affine=False)
        self.proj_out = nn.Linear(inner_dim, out_channels * math.prod(patch_size))
        self.scale_shift_table = nn.Parameter(torch.randn(1, 2, inner_dim) / inner_dim ** 0.5)

        head_dim = attention_head_dim
        self.rotary_freqs = torch.cat(
            [
                rope_params(rope_max_seq_len, head_dim - 4 * (head_dim // 6)),
                rope_params(rope_max_seq_len, 2 * (head_dim // 6)),
                rope_params(rope_max_seq_len, 2 * (head_dim // 6)),
            ],
            dim=1,
        )

        self.gradient_checkpointing = False

    def forward(self, hidden_states, timestep, encoder_hidden_states, action_hidden_states=None, action_scale=1.0,
                reference_hidden_states=None, reference_mask=None, kv_cache=None, current_start=0,
                return_dict=True):
        if kv_cache is None:
            raise ValueError("`kv_cache` is required: this model only runs block-causal rollout with a K/V cache.")
        if self.rotary_freqs.device != hidden_states.device:
            self.rotary_freqs = self.rotary_freqs.to(hidden_states.device)
        freqs = self.rotary_freqs

        hidden_states = self.patch_embedding(hidden_states)
        if action_hidden_states is not None:
            action_features = self.act_control_adapter(action_hidden_states)
            frames = hidden_states.shape[2]
            action_frames = action_features.shape[2]
            if frames > action_frames:
                offset = frames - action_frames
                hidden_states = torch.cat(
                    [hidden_states[:, :, :offset], hidden_states[:, :, offset:] + action_features * action_scale],
                    dim=2,
                )
            else:
                hidden_states = hidden_states + action_features * action_scale

        grid_sizes = torch.tensor(hidden_states.shape[2:], dtype=torch.long).unsqueeze(0)
        batch_size = hidden_states.shape[0]
        frame_seqlen = int(math.prod(hidden_states.shape[3:]))
        hidden_states = hidden_states.flatten(2).transpose(1, 2)

        temb, temb_proj = self.condition_embedder(timestep, hidden_states.dtype)

        seq = encoder_hidden_states.shape[1]
        if seq < self.config.text_len:
            encoder_hidden_states = torch.cat(
                [
                    encoder_hidden_states,
                    encoder_hidden_states.new_zeros(
                        batch_size, self.config.text_len - seq, encoder_hidden_states.shape[2]
                    ),
                ],
                dim=1,
            )
        encoder_hidden_states = self.condition_embedder.text_embedder(encoder_hidden_states)

        ref_token_len = kv_cache.ref_token_len
        query_ref_token_len = 0
        ref_rotary_emb = None
        if reference_hidden_states is not None and current_start == 0:
            batch, num_slots, channels, ref_t, ref_h, ref_w = reference_hidden_states.shape
            ref_features = self.patch_embedding(
                reference_hidden_states.reshape(batch * num_slots, channels, ref_t, ref_h, ref_w).to(
                    hidden_states.dtype
                )
            )
            patch_t, patch_h, patch_w = ref_features.shape[2:]
            tokens_per_slot = patch_t * patch_h * patch_w
            ref_tokens = ref_features.flatten(2).transpose(1, 2).reshape(batch, num_slots, tokens_per_slot, -1)
            if reference_mask is None:
                reference_mask = reference_hidden_states.new_ones(batch, num_slots)
            ref_tokens = ref_tokens * reference_mask[:, :, None, None].to(ref_tokens.dtype)
            ref_tokens = ref_tokens.reshape(batch, num_slots * tokens_per_slot, -1)

            query_ref_token_len = num_slots * tokens_per_slot
            if query_ref_token_len != ref_token_len:
                raise ValueError(
                    f"The KV cache was allocated for {ref_token_len} reference tokens but "
                    f"`reference_hidden_states` produced {query_ref_token_len}."
                )
            self._ref_grid = (int(patch_t), int(patch_h), int(patch_w))
            self._ref_num_slots = int(num_slots)
            self._ref_tokens_per_slot = int(tokens_per_slot)

            temb_proj = temb_proj.repeat_interleave(frame_seqlen, dim=1)
            ref_timestep = torch.zeros((batch_size, 1), dtype=torch.long, device=hidden_states.device)
            _, ref_temb_proj = self.condition_embedder(ref_timestep, hidden_states.dtype)
            temb_proj = torch.cat([ref_temb_proj.expand(-1, query_ref_token_len, -1, -1), temb_proj], dim=1)
            hidden_states = torch.cat([ref_tokens, hidden_states], dim=1)

        if ref_token_len > 0:
            ref_rotary_emb = reference_rope_freqs(
                freqs, self._ref_num_slots, self._ref_tokens_per_slot, self._ref_grid, hidden_states.device
            )

        for layer_idx, block in enumerate(self.blocks):
            hidden_states = block(
                hidden_states,
                encoder_hidden_states,
                temb_proj,
                freqs,
                grid_sizes,
                kv_cache.get(layer_idx),
                current_start,
                query_ref_token_len,
                ref_token_len,
                ref_rotary_emb,
            )

        if query_ref_token_len > 0:
            hidden_states = hidden_states[:, query_ref_token_len:]

        shift, scale = (
            self.scale_shift_table.unsqueeze(1).float() + temb.unflatten(0, timestep.shape).unsqueeze(2).float()
        ).chunk(2, dim=2)
        num_frames = timestep.shape[1]
        hidden_states = (
            self.norm_out(hidden_states.float()).unflatten(1, (num_frames, frame_seqlen)) * (1 + scale) + shift
        ).type_as(hidden_states)
        hidden_states = self.proj_out(hidden_states)

        p_t, p_h, p_w = self.config.patch_size
        _, latent_h, latent_w = grid_sizes[0].tolist()
        hidden_states = hidden_states.reshape(
            batch_size, num_frames, latent_h, latent_w, p_t, p_h, p_w, self.config.out_channels
        )
        hidden_states = torch.einsum("bfhwpqrc->bcfphqwr", hidden_states)
        hidden_states = hidden_states.reshape(
            batch_size, self.config.out_channels, num_frames * p_t, latent_h * p_h, latent_w * p_w
        )

        return (hidden_states,)


def build():
    # 2 heads of 16 (RoPE complex bands t/h/w 4/2/2), 2 blocks, local window 3 frames; caption 16 wide padded to 8
    # rows; sinusoid 16 wide; the action adapter at the upstream 32 planes and PixelUnshuffle(16).
    return ABotWorldTransformer3DModel(patch_size=(1, 2, 2), num_attention_heads=2, attention_head_dim=16,
                                       in_channels=4, out_channels=4, text_dim=16, text_len=8, freq_dim=16,
                                       ffn_dim=64, num_layers=2, eps=1e-6, local_attn_size=3, action_in_channels=32,
                                       action_downscale_factor=16, rope_max_seq_len=1024)


NUM_FRAMES = 2
LATENT_H = LATENT_W = 4
NUM_SLOTS = 2


def inputs(g):
    b, c = 1, 4
    # the text encoder's last hidden state, tokenized to max_length (text_len here) with masked rows zeroed
    prompt = torch.randn((b, 8, 16), generator=g)
    prompt[:, 6:] = 0
    # drawn in the reference's [B, F, C, h, w] layout, then permuted
    noise = torch.randn((b, NUM_FRAMES, c, LATENT_H, LATENT_W), generator=g).permute(0, 2, 1, 3, 4)
    first_frame = torch.randn((b, c, 1, LATENT_H, LATENT_W), generator=g)
    reference = torch.randn((b, NUM_SLOTS, c, 1, LATENT_H, LATENT_W), generator=g)
    # ABotWorldSetActionStep: [W, A, S, D, I, J, K, L] -> 32 constant planes at pixel resolution (latent · 16)
    action = torch.tensor([1, 0, 0, 0, 0, 0, 1, 0], dtype=torch.float32)
    planes = (action.view(1, 8, 1, 1, 1).repeat_interleave(4, dim=1)
              .repeat(1, 1, NUM_FRAMES, LATENT_H * 16, LATENT_W * 16))
    noise[:, :, :1] = first_frame  # ABotWorldPrepareNoiseStep pins frame 0 of the first block
    return {"encoder_hidden_states": prompt,
            "first_frame_latents": first_frame,
            "reference_latents": reference,
            "reference_mask": torch.ones((b, NUM_SLOTS)),
            "action_hidden_states": planes,
            "noise": noise}


def prepare(model, c):
    # ABotWorldPrepareStep: one rolling K/V cache for the rollout, the reference tokens pinned at its head
    cfg = model.config
    frame_seqlen = (LATENT_H // cfg.patch_size[1]) * (LATENT_W // cfg.patch_size[2])
    num_slots, _, ref_t, ref_h, ref_w = c["reference_latents"].shape[1:]
    ref_token_len = (num_slots * (ref_t // cfg.patch_size[0]) * (ref_h // cfg.patch_size[1])
                     * (ref_w // cfg.patch_size[2]))
    c["kv_cache"] = ABotWorldKVCache(num_layers=cfg.num_layers, batch_size=c["reference_latents"].shape[0],
                                     num_tokens=ref_token_len + cfg.local_attn_size * frame_seqlen,
                                     ref_token_len=ref_token_len, num_heads=cfg.num_attention_heads,
                                     head_dim=cfg.attention_head_dim, device=c["reference_latents"].device,
                                     dtype=model.proj_out.weight.dtype)


def call(model, x, sigma, c):
    # ABotWorldLoopDenoiser on the first block (current_start 0): the working latents carry the pinned start frame
    latents = x.clone()
    latents[:, :, :1] = c["first_frame_latents"].to(latents.dtype)
    batch_size, _, num_frames = latents.shape[:3]
    t = torch.tensor(sigma * 1000, dtype=torch.float32)
    timestep = t.expand(batch_size, num_frames).clone()
    timestep[:, 0] = 0
    return model(hidden_states=latents, timestep=timestep, encoder_hidden_states=c["encoder_hidden_states"],
                 action_hidden_states=c["action_hidden_states"], reference_hidden_states=c["reference_latents"],
                 reference_mask=c["reference_mask"], kv_cache=c["kv_cache"], current_start=0, return_dict=False)[0]


PRODUCER = dict(
    library_source="replica of huggingface/diffusers transformer_abot_world.py@6ca0a9f61e1e and the parts it "
                   "imports (torch 1.13)",
    timestep="sigma*1000 float32 per latent frame, [B, F], frame 0 (the pinned start frame) at 0",
    velocity="model output as is (flow prediction), not negated",
    note="ABot-World causal Wan2.2-TI2V finetune, 2 blocks, first rollout block (current_start 0): per-frame "
         "timesteps (f64 sinusoid), modulation made per token with 2 reference slots (8 tokens) prepended at "
         "timestep-0 modulation and scaled by a per-slot mask; reference K/V pinned in a K/V cache allocated once "
         "before the loop; video rows 3-D complex RoPE (f64), reference rows complex64 RoPE at temporal −512/−256; "
         "q/k RMSNorm across heads; 32 action planes at 64x64 pixels through PixelUnshuffle(16), a stride-2 conv and "
         "a conv residual block, added onto the patch tokens; caption padded to text_len 8 (2 zero rows), its "
         "cross-attention K/V projected on step 1 and reused from the cache on steps 2-3; the start frame pinned "
         "into frame 0 before each call; head modulated per frame from temb; 2 latent frames of 4x4")

if __name__ == "__main__":
    capture("abot_world", build, inputs, call, sys.argv[1], PRODUCER, prepare=prepare)
