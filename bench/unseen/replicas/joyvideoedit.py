"""JoyAI-Video-Edit DiT, reimplemented for torch 1.13 (no diffusers here), captured small in f32 on CPU.

Follows huggingface/diffusers src/diffusers/models/transformers/transformer_joyvideoedit.py at
198ce00a6ad3ede6a2a5c76ef063ea0d4ce5e953 (JoyVideoEditTransformer3DModel with get_rotary_pos_embed_from_ids,
generate_source_id_rope, _get_patch_shape, _get_token_frame_ids, unpatchify and the KV-cache reader/writer it calls,
JoyVideoEditTransformerBlock, JoyVideoEditAttention with JoyVideoEditAttnProcessor's __call__ as its forward,
JoyVideoEditModulate, JoyVideoEditTimeTextImageEmbedding, _apply_rotary_emb, _concat_kv_entries) with the parts it
imports: attention.py (FeedForward "gelu-approximate", GELU), embeddings.py (Timesteps, TimestepEmbedding,
PixArtAlphaTextProjection act_fn "gelu_tanh", get_1d_rotary_pos_embed use_real with repeat_interleave_real, f32
frequencies): the same module tree, parameter names and shapes, and call boundaries; the arithmetic line for line.
Stand-ins for what torch 1.13 lacks: torch.nn.RMSNorm (parts.TorchRMSNorm) and dispatch_attention_fn (SDPA's math on
[B, L, H, D], default scale; the pipeline passes no mask for an all-valid prompt). The KV-cache hook's state
(hooks/joyvideoedit_kv_cache.py) is a plain dict of chunk stores: the first chunk reads an empty selection.

The constructs it shows: a streaming video-edit MM-DiT whose image stream is [noisy chunk tokens | source-video
chunk tokens] (both patchified by the same Conv3d img_in, the source video never denoised), joint attention over
[image, text] rows with one fused qkv linear and per-head RMSNorm q/k per stream; interleaved 3-D RoPE (θ 256) from
explicit per-frame temporal ids, computed per segment and concatenated, then composed with a per-token "source-id"
role rotation (target 0, edit condition 1) over the first source_id_rope_dim channels by the angle-addition formulas
(cos_3d·cos_role − sin_3d·sin_role, sin_3d·cos_role + cos_3d·sin_role), the rest identity; RoPE on the image rows only;
a pre-RoPE k-norm evaluated a second time for the (unused, pre_rope) cache key; Wan-style modulation (per-stream
[1, 6, D] table + the 6·D timestep projection); a final non-affine LayerNorm without modulation; the first
current_seq_len rows gathered back (torch.gather) and unpatchified with channels outermost in the patch
(B, T, H, W, C, pt, ph, pw) -> (B, C, T·pt, H·ph, W·pw).

Pipeline as JoyVideoEditPipeline (pipeline_joyvideoedit.py at 13f8aac48f431e9d5dd2a6f07cea7b45b7861c29) calls it for
the first chunk of a two-latent-frame video with chunk_size 2 (one chunk, no reference image): latents (B, C, 2, h, w)
f32, timestep t.repeat(B) with t = σ·1000 (float32), encoder_hidden_states_mask None (encode_prompt drops an all-True
mask), ref_video_latent the source latents of the chunk, current_temporal_ids arange(2) expanded to (B, 2),
cached_temporal_ids None, kv_cache_mode "reuse" with kv_cache_chunk_id 0 and an empty selection, kv_cache_pre_rope
True; velocity the output [0] as is (upcast), no guidance. The pipeline's after-loop "store" call (timestep 0,
skip_text_stream) that fills the cache for later chunks is not part of the 3-step capture.

usage: /usr/bin/python3 bench/unseen/replicas/joyvideoedit.py OUTDIR
"""
import math
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

from parts import TorchRMSNorm
from run import capture, get_timestep_embedding, sdpa

SOURCE_ID_TARGET = 0.0
SOURCE_ID_EDIT_CONDITION = 1.0
SOURCE_ID_EXTRA_REF_IMAGE = 2.0
TIME_FREQ_DIM = 256
NORM_EPS = 1e-6
NUM_MODULATION_CHUNKS = 6
SELF_ATTN_MODE_REF_IMAGE_CACHE = "ref_image_cache"


class RMSNorm(TorchRMSNorm):
    """torch 2's nn.RMSNorm(dim, eps, elementwise_affine=True)."""


def get_1d_rotary_pos_embed(dim, pos, theta=10000.0, use_real=False, linear_factor=1.0, ntk_factor=1.0,
                            repeat_interleave_real=True, freqs_dtype=torch.float32):
    assert dim % 2 == 0
    theta = theta * ntk_factor
    freqs = (1.0 / (theta ** (torch.arange(0, dim, 2, dtype=freqs_dtype, device=pos.device)[: (dim // 2)] / dim))
             / linear_factor)
    freqs = torch.outer(pos, freqs)
    assert use_real and repeat_interleave_real
    freqs_cos = freqs.cos().repeat_interleave(2, dim=1).float()
    freqs_sin = freqs.sin().repeat_interleave(2, dim=1).float()
    return freqs_cos, freqs_sin


def dispatch_attention_fn(query, key, value, attn_mask=None):
    """SDPA's math on [B, L, H, D], default scale; bool mask True attends."""
    return sdpa(query.transpose(1, 2), key.transpose(1, 2), value.transpose(1, 2), mask=attn_mask).transpose(1, 2)


class GELU(nn.Module):
    def __init__(self, dim_in, dim_out, approximate="none", bias=True):
        super().__init__()
        self.proj = nn.Linear(dim_in, dim_out, bias=bias)
        self.approximate = approximate

    def forward(self, hidden_states):
        hidden_states = self.proj(hidden_states)
        return F.gelu(hidden_states, approximate=self.approximate)


class FeedForward(nn.Module):
    """FeedForward(dim, inner_dim=..., activation_fn="gelu-approximate")."""

    def __init__(self, dim, inner_dim, dropout=0.0, bias=True):
        super().__init__()
        self.net = nn.ModuleList([GELU(dim, inner_dim, approximate="tanh", bias=bias), nn.Dropout(dropout),
                                  nn.Linear(inner_dim, dim, bias=bias)])

    def forward(self, hidden_states):
        for module in self.net:
            hidden_states = module(hidden_states)
        return hidden_states


class Timesteps(nn.Module):
    def __init__(self, num_channels, flip_sin_to_cos, downscale_freq_shift, scale=1):
        super().__init__()
        self.num_channels, self.flip_sin_to_cos = num_channels, flip_sin_to_cos
        self.downscale_freq_shift, self.scale = downscale_freq_shift, scale

    def forward(self, timesteps):
        return get_timestep_embedding(timesteps, self.num_channels, flip_sin_to_cos=self.flip_sin_to_cos,
                                      downscale_freq_shift=self.downscale_freq_shift, scale=self.scale)


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
    def __init__(self, in_features, hidden_size, act_fn="gelu_tanh"):
        super().__init__()
        self.linear_1 = nn.Linear(in_features, hidden_size, bias=True)
        assert act_fn == "gelu_tanh"
        self.act_1 = nn.GELU(approximate="tanh")
        self.linear_2 = nn.Linear(hidden_size, hidden_size, bias=True)

    def forward(self, caption):
        hidden_states = self.linear_1(caption)
        hidden_states = self.act_1(hidden_states)
        return self.linear_2(hidden_states)


def _apply_rotary_emb(x, freqs_cis):
    """Apply rotary embeddings to a (B, L, H, D) tensor."""
    cos = freqs_cis[0].unsqueeze(2).to(x.device)
    sin = freqs_cis[1].unsqueeze(2).to(x.device)
    x_real, x_imag = x.float().reshape(*x.shape[:-1], -1, 2).unbind(-1)
    x_rotated = torch.stack([-x_imag, x_real], dim=-1).flatten(-2)
    return (x.float() * cos + x_rotated * sin).type_as(x)


def _concat_kv_entries(entries, *, device, dtype, cached_freqs_cis=None):
    keys = []
    values = []
    pre_rope_offset = 0
    for entry in entries:
        if entry is None:
            continue
        key = entry.get("key")
        value = entry.get("value")
        if key is None or value is None:
            continue
        key = key.to(device=device, dtype=dtype)
        value = value.to(device=device, dtype=dtype)
        if entry.get("pre_rope", False) and cached_freqs_cis is not None:
            cos_all, sin_all = cached_freqs_cis
            seg_len = key.shape[1]
            cos_seg = cos_all[..., pre_rope_offset: pre_rope_offset + seg_len, :]
            sin_seg = sin_all[..., pre_rope_offset: pre_rope_offset + seg_len, :]
            key = _apply_rotary_emb(key, (cos_seg, sin_seg))
            pre_rope_offset += seg_len
        keys.append(key)
        values.append(value)
    if not keys:
        return None, None
    return torch.cat(keys, dim=1), torch.cat(values, dim=1)


def _clone_kv_tensor(tensor):
    if tensor is None:
        return None
    return tensor.detach().clone()


class JoyVideoEditModulate(nn.Module):
    def __init__(self, hidden_size, factor):
        super().__init__()
        self.factor = factor
        self.modulate_table = nn.Parameter(torch.randn(1, factor, hidden_size) / hidden_size ** 0.5)

    def forward(self, x):
        if x.ndim != 3:
            x = x.unsqueeze(1)
        return [o.squeeze(1) for o in (self.modulate_table + x).chunk(self.factor, dim=1)]


class JoyVideoEditAttention(nn.Module):
    """With JoyVideoEditAttnProcessor's __call__ as its forward."""

    def __init__(self, dim, num_attention_heads, attention_head_dim, eps=NORM_EPS):
        super().__init__()
        self.heads = num_attention_heads
        self.head_dim = attention_head_dim
        inner_dim = num_attention_heads * attention_head_dim
        self.img_attn_qkv = nn.Linear(dim, inner_dim * 3, bias=True)
        self.img_attn_q_norm = RMSNorm(attention_head_dim, eps=eps)
        self.img_attn_k_norm = RMSNorm(attention_head_dim, eps=eps)
        self.img_attn_proj = nn.Linear(inner_dim, dim, bias=True)
        self.txt_attn_qkv = nn.Linear(dim, inner_dim * 3, bias=True)
        self.txt_attn_q_norm = RMSNorm(attention_head_dim, eps=eps)
        self.txt_attn_k_norm = RMSNorm(attention_head_dim, eps=eps)
        self.txt_attn_proj = nn.Linear(inner_dim, dim, bias=True)

    def forward(self, hidden_states, encoder_hidden_states=None, image_rotary_emb=None,
                encoder_hidden_states_mask=None, skip_text_stream=False, kv_cache_reader=None, kv_cache_writer=None,
                layer_idx=None, kv_cache_pre_rope=False, cached_freqs_cis=None):
        attn = self
        heads = attn.heads

        img_qkv = attn.img_attn_qkv(hidden_states)
        img_query, img_key, img_value = img_qkv.chunk(3, dim=-1)
        img_query = img_query.unflatten(-1, (heads, -1))
        img_key = img_key.unflatten(-1, (heads, -1))
        img_value = img_value.unflatten(-1, (heads, -1))

        if kv_cache_pre_rope:
            img_key_for_cache = attn.img_attn_k_norm(img_key)
        img_query = attn.img_attn_q_norm(img_query)
        img_key = attn.img_attn_k_norm(img_key)
        if image_rotary_emb is not None:
            img_query, img_key = (_apply_rotary_emb(img_query, image_rotary_emb),
                                  _apply_rotary_emb(img_key, image_rotary_emb))
        if not kv_cache_pre_rope:
            img_key_for_cache = img_key

        if not skip_text_stream:
            txt_qkv = attn.txt_attn_qkv(encoder_hidden_states)
            txt_query, txt_key, txt_value = txt_qkv.chunk(3, dim=-1)
            txt_query = txt_query.unflatten(-1, (heads, -1))
            txt_key = txt_key.unflatten(-1, (heads, -1))
            txt_value = txt_value.unflatten(-1, (heads, -1))
            txt_query = attn.txt_attn_q_norm(txt_query)
            txt_key = attn.txt_attn_k_norm(txt_key)

        if skip_text_stream:
            query, key, value = img_query, img_key, img_value
        else:
            query = torch.cat((img_query, txt_query), dim=1)
            key = torch.cat((img_key, txt_key), dim=1)
            value = torch.cat((img_value, txt_value), dim=1)

        if kv_cache_writer is not None:
            kv_cache_writer(layer_idx, img_key_for_cache, img_value)

        if kv_cache_reader is not None:
            cached_key, cached_value = _concat_kv_entries(
                kv_cache_reader(layer_idx), device=query.device, dtype=query.dtype,
                cached_freqs_cis=cached_freqs_cis if kv_cache_pre_rope else None)
        else:
            cached_key = cached_value = None

        if cached_key is not None:
            key = torch.cat([cached_key, key], dim=1)
            value = torch.cat([cached_value, value], dim=1)

        attn_mask = None
        if not skip_text_stream and encoder_hidden_states_mask is not None:
            num_visual_keys = key.shape[1] - encoder_hidden_states.shape[1]
            visual_mask = encoder_hidden_states_mask.new_ones((key.shape[0], num_visual_keys))
            attn_mask = torch.cat([visual_mask, encoder_hidden_states_mask], dim=1)[:, None, None, :]

        joint_hidden_states = dispatch_attention_fn(query, key, value, attn_mask=attn_mask)
        joint_hidden_states = joint_hidden_states.flatten(2, 3).to(query.dtype)

        if skip_text_stream:
            img_attn_output = joint_hidden_states
            txt_attn_output = None
        else:
            img_attn_output = joint_hidden_states[:, : hidden_states.shape[1]]
            txt_attn_output = joint_hidden_states[:, hidden_states.shape[1]:]

        img_attn_output = attn.img_attn_proj(img_attn_output)
        if txt_attn_output is not None:
            txt_attn_output = attn.txt_attn_proj(txt_attn_output)
        return img_attn_output, txt_attn_output


class JoyVideoEditTransformerBlock(nn.Module):
    def __init__(self, dim, num_attention_heads, attention_head_dim, mlp_width_ratio=4.0, eps=NORM_EPS):
        super().__init__()
        mlp_hidden_dim = int(dim * mlp_width_ratio)
        self.img_mod = JoyVideoEditModulate(dim, factor=NUM_MODULATION_CHUNKS)
        self.img_norm1 = nn.LayerNorm(dim, elementwise_affine=False, eps=eps)
        self.img_norm2 = nn.LayerNorm(dim, elementwise_affine=False, eps=eps)
        self.img_mlp = FeedForward(dim, inner_dim=mlp_hidden_dim)
        self.txt_mod = JoyVideoEditModulate(dim, factor=NUM_MODULATION_CHUNKS)
        self.txt_norm1 = nn.LayerNorm(dim, elementwise_affine=False, eps=eps)
        self.txt_norm2 = nn.LayerNorm(dim, elementwise_affine=False, eps=eps)
        self.txt_mlp = FeedForward(dim, inner_dim=mlp_hidden_dim)
        self.attn = JoyVideoEditAttention(dim, num_attention_heads, attention_head_dim, eps=eps)

    def forward(self, hidden_states, encoder_hidden_states, temb, image_rotary_emb=None,
                encoder_hidden_states_mask=None, kv_cache_reader=None, kv_cache_writer=None, layer_idx=None,
                skip_text_stream=False, kv_cache_pre_rope=False, cached_freqs_cis=None):
        (img_mod1_shift, img_mod1_scale, img_mod1_gate, img_mod2_shift, img_mod2_scale,
         img_mod2_gate) = self.img_mod(temb)
        if not skip_text_stream:
            (txt_mod1_shift, txt_mod1_scale, txt_mod1_gate, txt_mod2_shift, txt_mod2_scale,
             txt_mod2_gate) = self.txt_mod(temb)

        img_modulated = self.img_norm1(hidden_states) * (1 + img_mod1_scale.unsqueeze(1)) + img_mod1_shift.unsqueeze(1)
        txt_modulated = None
        if not skip_text_stream:
            txt_modulated = self.txt_norm1(encoder_hidden_states) * (
                1 + txt_mod1_scale.unsqueeze(1)) + txt_mod1_shift.unsqueeze(1)

        img_attn, txt_attn = self.attn(
            hidden_states=img_modulated, encoder_hidden_states=txt_modulated, image_rotary_emb=image_rotary_emb,
            encoder_hidden_states_mask=encoder_hidden_states_mask, skip_text_stream=skip_text_stream,
            kv_cache_reader=kv_cache_reader, kv_cache_writer=kv_cache_writer, layer_idx=layer_idx,
            kv_cache_pre_rope=kv_cache_pre_rope, cached_freqs_cis=cached_freqs_cis)

        hidden_states = hidden_states + img_attn * img_mod1_gate.unsqueeze(1)
        img_mod2_modulated = self.img_norm2(hidden_states) * (
            1 + img_mod2_scale.unsqueeze(1)) + img_mod2_shift.unsqueeze(1)
        hidden_states = hidden_states + self.img_mlp(img_mod2_modulated) * img_mod2_gate.unsqueeze(1)

        if not skip_text_stream:
            encoder_hidden_states = encoder_hidden_states + txt_attn * txt_mod1_gate.unsqueeze(1)
            txt_mod2_modulated = self.txt_norm2(encoder_hidden_states) * (
                1 + txt_mod2_scale.unsqueeze(1)) + txt_mod2_shift.unsqueeze(1)
            encoder_hidden_states = encoder_hidden_states + self.txt_mlp(txt_mod2_modulated) * txt_mod2_gate.unsqueeze(
                1)
        return hidden_states, encoder_hidden_states


class JoyVideoEditTimeTextImageEmbedding(nn.Module):
    def __init__(self, dim, time_freq_dim, time_proj_dim, text_embed_dim):
        super().__init__()
        self.timesteps_proj = Timesteps(num_channels=time_freq_dim, flip_sin_to_cos=True, downscale_freq_shift=0)
        self.time_embedder = TimestepEmbedding(in_channels=time_freq_dim, time_embed_dim=dim)
        self.act_fn = nn.SiLU()
        self.time_proj = nn.Linear(dim, time_proj_dim)
        self.text_embedder = PixArtAlphaTextProjection(text_embed_dim, dim, act_fn="gelu_tanh")

    def forward(self, timestep, encoder_hidden_states):
        timestep = self.timesteps_proj(timestep)
        time_embedder_dtype = next(iter(self.time_embedder.parameters())).dtype
        if timestep.dtype != time_embedder_dtype and time_embedder_dtype != torch.int8:
            timestep = timestep.to(time_embedder_dtype)
        temb = self.time_embedder(timestep).type_as(encoder_hidden_states)
        timestep_proj = self.time_proj(self.act_fn(temb))
        encoder_hidden_states = self.text_embedder(encoder_hidden_states)
        return temb, timestep_proj, encoder_hidden_states


class JoyVideoEditTransformer3DModel(nn.Module):
    _keep_in_fp32_modules = ["time_embedder", "norm1", "norm2", "norm_out"]

    def __init__(self, patch_size=(1, 1, 1), in_channels=64, out_channels=None, hidden_size=4096,
                 num_attention_heads=32, text_dim=4096, mlp_width_ratio=4.0, num_layers=40,
                 rope_dim_list=(16, 56, 56), theta=256, chunk_size=1, local_window_size=3, global_sink_chunk=True,
                 source_id_rope_dim=128, source_id_rope_theta=256.0):
        super().__init__()
        self.out_channels = out_channels or in_channels
        self.patch_size = list(patch_size)
        self.hidden_size = hidden_size
        self.num_attention_heads = num_attention_heads
        self.rope_dim_list = list(rope_dim_list)
        self.theta = theta
        self.source_id_rope_dim = int(source_id_rope_dim)
        self.source_id_rope_theta = float(source_id_rope_theta)
        attention_head_dim = hidden_size // num_attention_heads
        self.img_in = nn.Conv3d(in_channels, hidden_size, kernel_size=patch_size, stride=patch_size)
        self.condition_embedder = JoyVideoEditTimeTextImageEmbedding(
            dim=hidden_size, time_freq_dim=TIME_FREQ_DIM, time_proj_dim=hidden_size * NUM_MODULATION_CHUNKS,
            text_embed_dim=text_dim)
        self.double_blocks = nn.ModuleList([
            JoyVideoEditTransformerBlock(dim=hidden_size, num_attention_heads=num_attention_heads,
                                         attention_head_dim=attention_head_dim, mlp_width_ratio=mlp_width_ratio)
            for _ in range(num_layers)])
        self.norm_out = nn.LayerNorm(hidden_size, elementwise_affine=False, eps=NORM_EPS)
        self.proj_out = nn.Linear(hidden_size, self.out_channels * math.prod(patch_size))
        self._kv_cache_chunk_id = None
        self._kv_cache_selected_chunk_ids = None
        self._kv_cache_pre_rope = False
        self._kv_chunk_cache = {}  # JoyVideoEditKVCacheState.chunk_cache, as the pipeline's enabled hook holds it

    # KV-cache bookkeeping
    def configure_inference_kv_cache(self, *, chunk_id=None, selected_chunk_ids=None, pre_rope=False):
        self._kv_cache_chunk_id = chunk_id
        self._kv_cache_selected_chunk_ids = list(selected_chunk_ids) if selected_chunk_ids is not None else None
        self._kv_cache_pre_rope = bool(pre_rope)

    def _read_layer_kv_cache(self, layer_idx):
        if layer_idx is None:
            return []
        chunk_cache = self._kv_chunk_cache
        selected_chunk_ids = self._kv_cache_selected_chunk_ids or []
        layer_entries = []
        for selected_chunk_id in selected_chunk_ids:
            chunk_store = chunk_cache.get(selected_chunk_id)
            if chunk_store is None:
                continue
            entry = chunk_store.get(layer_idx)
            if entry is not None:
                layer_entries.append(entry)
        return layer_entries

    def _write_layer_kv_cache(self, layer_idx, key, value):
        if layer_idx is None or self._kv_cache_chunk_id is None:
            return
        chunk_store = self._kv_chunk_cache.setdefault(self._kv_cache_chunk_id, {})
        chunk_store[layer_idx] = {"key": _clone_kv_tensor(key), "value": _clone_kv_tensor(value),
                                  "pre_rope": bool(self._kv_cache_pre_rope)}

    # RoPE helpers
    def get_rotary_pos_embed_from_ids(self, *, frame_ids, spatial_shape):
        post_patch_height, post_patch_width = spatial_shape
        device = frame_ids.device
        temporal_positions = frame_ids.to(dtype=torch.float32)
        spatial_tokens_per_frame = post_patch_height * post_patch_width
        if temporal_positions.shape[1] % spatial_tokens_per_frame != 0:
            raise ValueError("`frame_ids` length is not divisible by spatial token count")
        h_positions = torch.arange(post_patch_height, dtype=torch.float32, device=device)
        w_positions = torch.arange(post_patch_width, dtype=torch.float32, device=device)
        h_grid, w_grid = torch.meshgrid(h_positions, w_positions, indexing="ij")
        num_frames_in_grid = temporal_positions.shape[1] // spatial_tokens_per_frame
        batch_size = temporal_positions.shape[0]
        h_positions = h_grid.reshape(-1).repeat(num_frames_in_grid).unsqueeze(0).expand(batch_size, -1)
        w_positions = w_grid.reshape(-1).repeat(num_frames_in_grid).unsqueeze(0).expand(batch_size, -1)

        head_dim = self.hidden_size // self.num_attention_heads
        rope_dim_list = self.rope_dim_list
        if sum(rope_dim_list) != head_dim:
            raise ValueError("sum(rope_dim_list) should equal to head_dim of attention layer")
        cos_list = []
        sin_list = []
        for dim, positions in zip(rope_dim_list, (temporal_positions, h_positions, w_positions)):
            cos, sin = get_1d_rotary_pos_embed(dim, positions.reshape(-1), theta=self.theta, use_real=True)
            cos_list.append(cos.unflatten(0, (batch_size, -1)))
            sin_list.append(sin.unflatten(0, (batch_size, -1)))
        return torch.cat(cos_list, dim=2), torch.cat(sin_list, dim=2)

    def generate_source_id_rope(self, source_id, head_dim, device, dtype):
        role_dim = max(0, min(int(self.source_id_rope_dim), int(head_dim)))
        half_head = head_dim // 2
        cos_half = torch.ones(*source_id.shape, half_head, device=device, dtype=torch.float32)
        sin_half = torch.zeros(*source_id.shape, half_head, device=device, dtype=torch.float32)
        inv_freq = 1.0 / (
            self.source_id_rope_theta ** (torch.arange(0, role_dim, 2, device=device, dtype=torch.float32) / role_dim))
        angles = source_id.unsqueeze(-1) * inv_freq
        cos_half[..., : role_dim // 2] = torch.cos(angles)
        sin_half[..., : role_dim // 2] = torch.sin(angles)
        return (cos_half.repeat_interleave(2, dim=-1).to(dtype=dtype),
                sin_half.repeat_interleave(2, dim=-1).to(dtype=dtype))

    @staticmethod
    def _get_patch_shape(latent, patch_size):
        _, _, num_frames, height, width = latent.shape
        return num_frames // patch_size[0], height // patch_size[1], width // patch_size[2]

    @staticmethod
    def _get_token_frame_ids(post_patch_shape, device, temporal_ids=None):
        num_frames, post_patch_height, post_patch_width = post_patch_shape
        spatial_tokens_per_frame = post_patch_height * post_patch_width
        if temporal_ids is None:
            frame_ids = torch.arange(num_frames, device=device, dtype=torch.long).unsqueeze(0)
        else:
            frame_ids = torch.as_tensor(temporal_ids, device=device, dtype=torch.long)
            if frame_ids.ndim != 2 or frame_ids.shape[1] != num_frames:
                raise ValueError("`temporal_ids` must have shape `(batch_size, num_frames)`")
        return frame_ids.repeat_interleave(spatial_tokens_per_frame, dim=1)

    def unpatchify(self, x, t, h, w):
        c = self.out_channels
        pt, ph, pw = self.patch_size
        if t * h * w != x.shape[1]:
            raise ValueError(f"Expected t*h*w ({t * h * w}) to equal x.shape[1] ({x.shape[1]})")
        x = x.reshape(x.shape[0], t, h, w, c, pt, ph, pw)
        x = x.permute(0, 4, 1, 5, 2, 6, 3, 7)
        return x.reshape(x.shape[0], c, t * pt, h * ph, w * pw)

    def forward(self, hidden_states, timestep, encoder_hidden_states, encoder_hidden_states_mask=None,
                ref_video_latent=None, current_temporal_ids=None, cached_temporal_ids=None, kv_cache_mode=None,
                kv_cache_chunk_id=None, kv_cache_selected_chunk_ids=None, kv_cache_pre_rope=False,
                self_attn_input_mode=None, skip_text_stream=False, return_dict=True):
        if kv_cache_mode not in (None, "store", "reuse"):
            raise ValueError(f"Unsupported cache mode: {kv_cache_mode!r}.")
        if kv_cache_mode == "store" and kv_cache_chunk_id is None:
            raise ValueError("A cache chunk id is required in store mode.")
        if self_attn_input_mode not in (None, SELF_ATTN_MODE_REF_IMAGE_CACHE):
            raise ValueError(f"Unsupported self-attention input mode: {self_attn_input_mode!r}.")

        self.configure_inference_kv_cache(chunk_id=kv_cache_chunk_id, selected_chunk_ids=kv_cache_selected_chunk_ids,
                                          pre_rope=kv_cache_pre_rope)

        batch_size = hidden_states.shape[0]
        patch_size = tuple(self.patch_size)
        current_patch_shape = self._get_patch_shape(hidden_states, patch_size)
        current_seq_len = math.prod(current_patch_shape)
        device = hidden_states.device

        if encoder_hidden_states_mask is not None:
            encoder_hidden_states_mask = encoder_hidden_states_mask.to(device=encoder_hidden_states.device,
                                                                       dtype=torch.bool)

        hidden_tokens = self.img_in(hidden_states).flatten(2).transpose(1, 2).contiguous()
        temporal_ids = None
        if current_temporal_ids is not None:
            current_temporal_ids = torch.as_tensor(current_temporal_ids, device=device, dtype=torch.long)
            if current_temporal_ids.shape != (batch_size, current_patch_shape[0]):
                raise ValueError("`current_temporal_ids` has the wrong shape")
            temporal_ids = current_temporal_ids

        if self_attn_input_mode == SELF_ATTN_MODE_REF_IMAGE_CACHE:
            current_source_id = torch.full((current_seq_len,), SOURCE_ID_EXTRA_REF_IMAGE, device=device,
                                           dtype=torch.float32)
        else:
            current_source_id = torch.full((current_seq_len,), SOURCE_ID_TARGET, device=device, dtype=torch.float32)
        current_frame_ids = self._get_token_frame_ids(current_patch_shape, device, temporal_ids=temporal_ids)
        current_rotary = self.get_rotary_pos_embed_from_ids(
            frame_ids=current_frame_ids, spatial_shape=(current_patch_shape[1], current_patch_shape[2]))

        latent_segments = [hidden_tokens]
        rotary_segments = [current_rotary]
        source_id_segments = [current_source_id]

        if ref_video_latent is not None:
            if ref_video_latent.shape[0] != batch_size:
                raise ValueError("Ref video latent batch size does not match hidden states batch size.")
            ref_video_patch_shape = self._get_patch_shape(ref_video_latent, patch_size)
            if ref_video_patch_shape[1:] != current_patch_shape[1:]:
                raise ValueError("Ref video latent spatial patch shape must match noisy latent spatial patch shape")
            ref_video_tokens = self.img_in(ref_video_latent).flatten(2).transpose(1, 2).contiguous()
            video_frame_ids = self._get_token_frame_ids(ref_video_patch_shape, device, temporal_ids=temporal_ids)
            latent_segments.append(ref_video_tokens)
            rotary_segments.append(self.get_rotary_pos_embed_from_ids(
                frame_ids=video_frame_ids, spatial_shape=(ref_video_patch_shape[1], ref_video_patch_shape[2])))
            source_id_segments.append(torch.full((ref_video_tokens.shape[1],), SOURCE_ID_EDIT_CONDITION,
                                                 device=device, dtype=torch.float32))

        img = torch.cat(latent_segments, dim=1)
        visual_source_id = torch.cat(source_id_segments, dim=0).unsqueeze(0)
        current_indices = torch.arange(current_seq_len, device=device).unsqueeze(0).expand(batch_size, -1)
        vis_freqs_cis = (torch.cat([rotary[0] for rotary in rotary_segments], dim=1),
                         torch.cat([rotary[1] for rotary in rotary_segments], dim=1))

        head_dim = self.hidden_size // self.num_attention_heads
        cos_3d, sin_3d = vis_freqs_cis
        cos_role, sin_role = self.generate_source_id_rope(source_id=visual_source_id, head_dim=head_dim,
                                                          device=cos_3d.device, dtype=cos_3d.dtype)
        new_cos = cos_3d * cos_role - sin_3d * sin_role
        new_sin = sin_3d * cos_role + cos_3d * sin_role
        vis_freqs_cis = (new_cos, new_sin)

        _, vec, txt = self.condition_embedder(timestep, encoder_hidden_states)
        vec = vec.unflatten(-1, (NUM_MODULATION_CHUNKS, -1))

        cached_freqs_cis = None
        if kv_cache_pre_rope and cached_temporal_ids is not None:
            cached_ids_tensor = torch.as_tensor(cached_temporal_ids, device=device, dtype=torch.long)
            cached_frame_ids = self._get_token_frame_ids(
                (cached_ids_tensor.shape[1], current_patch_shape[1], current_patch_shape[2]), device,
                temporal_ids=cached_ids_tensor)
            cached_freqs_cis = self.get_rotary_pos_embed_from_ids(
                frame_ids=cached_frame_ids, spatial_shape=(current_patch_shape[1], current_patch_shape[2]))

        for layer_idx, block in enumerate(self.double_blocks):
            kv_cache_reader = self._read_layer_kv_cache if kv_cache_mode == "reuse" else None
            kv_cache_writer = self._write_layer_kv_cache if kv_cache_mode == "store" else None
            img, txt = block(hidden_states=img, encoder_hidden_states=txt, temb=vec, image_rotary_emb=vis_freqs_cis,
                             encoder_hidden_states_mask=encoder_hidden_states_mask, kv_cache_reader=kv_cache_reader,
                             kv_cache_writer=kv_cache_writer, layer_idx=layer_idx, skip_text_stream=skip_text_stream,
                             kv_cache_pre_rope=kv_cache_pre_rope, cached_freqs_cis=cached_freqs_cis)

        img = self.proj_out(self.norm_out(img))

        gather_index = current_indices.unsqueeze(-1).expand(-1, -1, img.shape[-1])
        img = torch.gather(img, dim=1, index=gather_index)
        img = self.unpatchify(img, current_patch_shape[0], current_patch_shape[1], current_patch_shape[2])

        if not return_dict:
            return (img, txt)
        return (img,)


def build():
    # 2 heads of 16 (RoPE t/h/w 4/6/6; the source-id role rotation on the first 8 channels), 2 double blocks, text
    # 16 wide, MLP ratio 2, patch 1x2x2 over 4 latent channels; chunk_size 2 (one chunk covers both latent frames);
    # time_freq_dim is fixed at 256 upstream.
    return JoyVideoEditTransformer3DModel(patch_size=(1, 2, 2), in_channels=4, hidden_size=32, num_attention_heads=2,
                                          text_dim=16, mlp_width_ratio=2.0, num_layers=2, rope_dim_list=(4, 6, 6),
                                          theta=256, chunk_size=2, local_window_size=3, global_sink_chunk=True,
                                          source_id_rope_dim=8, source_id_rope_theta=256.0)


def inputs(g):
    return {"encoder_hidden_states": torch.randn((1, 6, 16), generator=g),
            "ref_video_latent": torch.randn((1, 4, 2, 4, 4), generator=g),
            "current_temporal_ids": torch.arange(0, 2, dtype=torch.long).unsqueeze(0).expand(1, -1),
            "noise": torch.randn((1, 4, 2, 4, 4), generator=g)}


def call(model, x, sigma, c):
    # JoyVideoEditPipeline, chunk 0 of one: window ids [0, 1], no history, no reference image.
    t = torch.tensor(sigma * 1000, dtype=torch.float32).repeat(x.shape[0])
    return model(hidden_states=x, timestep=t, encoder_hidden_states=c["encoder_hidden_states"],
                 encoder_hidden_states_mask=None, ref_video_latent=c["ref_video_latent"],
                 current_temporal_ids=c["current_temporal_ids"], cached_temporal_ids=None, kv_cache_mode="reuse",
                 kv_cache_chunk_id=0, kv_cache_selected_chunk_ids=[], kv_cache_pre_rope=True,
                 return_dict=False)[0].float()


PRODUCER = dict(
    library_source="replica of huggingface/diffusers transformer_joyvideoedit.py@198ce00a6ad3 and the parts it "
                   "imports (torch 1.13)",
    timestep="sigma*1000 float32, t.repeat(B) (JoyVideoEditPipeline, FlowMatch Euler timesteps from sigmas)",
    velocity="model output [0] as is (flow prediction), not negated, upcast to f32",
    note="JoyAI-Video-Edit streaming MM-DiT, 2 double blocks, first chunk (2 latent frames): image stream = [noisy "
         "tokens | source-video tokens] both from the same Conv3d patchify (1x2x2); joint [image, text] attention, "
         "fused qkv per stream, per-head RMSNorm q/k (the image k-norm also evaluated once more for the pre-RoPE "
         "cache key, unused); interleaved 3-D RoPE (θ 256, t/h/w 4/6/6) from explicit temporal ids per segment, "
         "composed with a source-id role rotation (target 0, edit-condition 1; first 8 channels, θ 256) by the "
         "angle-addition formulas, image rows only; Wan-style 6-way modulation ([1, 6, D] table + 6·D timestep "
         "projection) over non-affine LayerNorms; GELU-tanh FFNs; final non-affine LayerNorm without modulation; "
         "the noisy rows gathered back by torch.gather, unpatchified channels-outermost in the patch")

if __name__ == "__main__":
    capture("joyvideoedit", build, inputs, call, sys.argv[1], PRODUCER)
