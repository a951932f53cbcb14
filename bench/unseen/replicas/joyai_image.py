"""JoyAI-Image DiT, reimplemented for torch 1.13 (no diffusers here), captured small in f32 on CPU.

Follows huggingface/diffusers src/diffusers/models/transformers/transformer_joyai_image.py at
2ccc45fb474a7526d723e6bb48199bc353d0fcf0 (JoyAIImageTransformer3DModel with _get_meshgrid_nd,
_get_nd_rotary_pos_embed, get_rotary_pos_embed and unpatchify, JoyAIImageTransformerBlock, JoyAIJointAttention with
JoyAIJointAttnProcessor's __call__ as its forward, _WanModulation, JoyAITimeTextEmbedding) with the parts it
imports: attention.py (FeedForward "gelu-approximate", GELU), embeddings.py (Timesteps, TimestepEmbedding,
PixArtAlphaTextProjection act_fn "gelu_tanh", get_1d_rotary_pos_embed with use_real, apply_rotary_emb with use_real
and sequence_dim 1) and normalization.py (RMSNorm): the same module tree, parameter names and shapes, and call
boundaries; the arithmetic line for line. Stand-ins for what torch 1.13 lacks: dispatch_attention_fn (SDPA's math
on [B, L, H, D], default scale, the [B, L] bool mask broadcast over the keys).

The constructs it shows (beside JoyImage-Edit's, whose block it rewrites): the attention module sees only the
joined q, k, v (its call boundary is the attention itself); each stream's fused qkv linear lives in the block,
viewed [B, L, 3, heads, d] and permuted, per-head RMSNorm (diffusers' RMSNorm) on q and k cast back to v's dtype;
interleaved 3-D RoPE (θ 256) on the image rows only, applied per stream before the join; joint attention over
[image, text] rows with a bool key mask (ones for the image rows, the caption's mask after); Wan-style modulation
(a [1, 6, D] table plus the 6·D timestep projection unflattened to [B, 6, D], per stream); plain non-affine
LayerNorms; the text and image rows joined once more after the last block and the image rows cut back out.

Pipeline as JoyAIImagePipeline (pipeline_joyai_image.py at 2ccc45fb474a7526d723e6bb48199bc353d0fcf0) calls it for
text to image: latents (B, 1, C, 1, h, w) (one item), timestep t.repeat(B) with t = σ·1000 (float32, FlowMatch
Euler), the prompt's mask passed as encoder_hidden_states_mask, velocity the output's first element as is, no
guidance.

usage: /usr/bin/python3 bench/unseen/replicas/joyai_image.py OUTDIR
"""
import math
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

from run import capture, get_timestep_embedding, sdpa


class RMSNorm(nn.Module):
    """diffusers.models.normalization.RMSNorm(dim, eps, elementwise_affine=True)."""

    def __init__(self, dim, eps, elementwise_affine=True):
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


class GELU(nn.Module):
    def __init__(self, dim_in, dim_out, approximate="none", bias=True):
        super().__init__()
        self.proj = nn.Linear(dim_in, dim_out, bias=bias)
        self.approximate = approximate

    def forward(self, hidden_states):
        return F.gelu(self.proj(hidden_states), approximate=self.approximate)


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
        return self.linear_2(self.act(self.linear_1(sample)))


class PixArtAlphaTextProjection(nn.Module):
    def __init__(self, in_features, hidden_size, act_fn="gelu_tanh"):
        super().__init__()
        self.linear_1 = nn.Linear(in_features, hidden_size, bias=True)
        assert act_fn == "gelu_tanh"
        self.act_1 = nn.GELU(approximate="tanh")
        self.linear_2 = nn.Linear(hidden_size, hidden_size, bias=True)

    def forward(self, caption):
        return self.linear_2(self.act_1(self.linear_1(caption)))


def get_1d_rotary_pos_embed(dim, pos, theta=10000.0, use_real=True, freqs_dtype=torch.float32):
    """use_real=True, repeat_interleave_real=True: (cos, sin), each [len(pos), dim]."""
    assert dim % 2 == 0 and use_real
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=freqs_dtype, device=pos.device)[: (dim // 2)] / dim))
    freqs = torch.outer(pos, freqs)
    freqs_cos = freqs.cos().repeat_interleave(2, dim=1).float()
    freqs_sin = freqs.sin().repeat_interleave(2, dim=1).float()
    return freqs_cos, freqs_sin


def apply_rotary_emb(x, freqs_cis, sequence_dim=2):
    """use_real=True, use_real_unbind_dim=-1."""
    cos, sin = freqs_cis
    if sequence_dim == 2:
        cos, sin = cos[None, None, :, :], sin[None, None, :, :]
    elif sequence_dim == 1:
        cos, sin = cos[None, :, None, :], sin[None, :, None, :]
    else:
        raise ValueError(f"Sequence dimension must be 1 or 2, not {sequence_dim}")
    cos, sin = cos.to(x.device), sin.to(x.device)
    x_real, x_imag = x.reshape(*x.shape[:-1], -1, 2).unbind(-1)
    x_rotated = torch.stack([-x_imag, x_real], dim=-1).flatten(3)
    return (x.float() * cos + x_rotated.float() * sin).to(x.dtype)


class _WanModulation(nn.Module):
    def __init__(self, hidden_size, factor):
        super().__init__()
        self.factor = factor
        self.modulate_table = nn.Parameter(torch.zeros(1, factor, hidden_size) / hidden_size ** 0.5)

    def forward(self, x):
        if len(x.shape) != 3:
            x = x.unsqueeze(1)
        return [o.squeeze(1) for o in (self.modulate_table + x).chunk(self.factor, dim=1)]


class JoyAIJointAttention(nn.Module):
    """With JoyAIJointAttnProcessor's __call__ as its forward (the NATIVE backend's math)."""

    def __init__(self, backend="flash_attn"):
        super().__init__()
        self.backend = backend

    def forward(self, query, key, value, attention_mask=None, attention_kwargs=None):
        # dispatch_attention_fn on [B, L, H, D]; a [B, L] bool mask broadcasts over [B, H, Lq, Lk] as SDPA does.
        mask = attention_mask
        if mask is not None:
            mask = mask.expand(query.shape[0], -1) if mask.ndim == 1 else mask
            mask = mask[None, None] if mask.ndim == 2 else mask
        out = sdpa(query.transpose(1, 2), key.transpose(1, 2), value.transpose(1, 2), mask=mask)
        return out.transpose(1, 2)


class JoyAIImageTransformerBlock(nn.Module):
    def __init__(self, hidden_size, heads_num, mlp_width_ratio, dit_modulation_type="wanx", attn_backend="flash_attn"):
        super().__init__()
        self.dit_modulation_type = dit_modulation_type
        self.heads_num = heads_num
        head_dim = hidden_size // heads_num
        mlp_hidden_dim = int(hidden_size * mlp_width_ratio)

        self.img_mod = _WanModulation(hidden_size, factor=6)
        self.img_norm1 = nn.LayerNorm(hidden_size, elementwise_affine=False, eps=1e-6)
        self.img_attn_qkv = nn.Linear(hidden_size, hidden_size * 3, bias=True)
        self.img_attn_q_norm = RMSNorm(head_dim, elementwise_affine=True, eps=1e-6)
        self.img_attn_k_norm = RMSNorm(head_dim, elementwise_affine=True, eps=1e-6)
        self.img_attn_proj = nn.Linear(hidden_size, hidden_size, bias=True)
        self.img_norm2 = nn.LayerNorm(hidden_size, elementwise_affine=False, eps=1e-6)
        self.img_mlp = FeedForward(hidden_size, inner_dim=mlp_hidden_dim)

        self.txt_mod = _WanModulation(hidden_size, factor=6)
        self.txt_norm1 = nn.LayerNorm(hidden_size, elementwise_affine=False, eps=1e-6)
        self.txt_attn_qkv = nn.Linear(hidden_size, hidden_size * 3, bias=True)
        self.txt_attn_q_norm = RMSNorm(head_dim, elementwise_affine=True, eps=1e-6)
        self.txt_attn_k_norm = RMSNorm(head_dim, elementwise_affine=True, eps=1e-6)
        self.txt_attn_proj = nn.Linear(hidden_size, hidden_size, bias=True)
        self.attn = JoyAIJointAttention(attn_backend)
        self.txt_norm2 = nn.LayerNorm(hidden_size, elementwise_affine=False, eps=1e-6)
        self.txt_mlp = FeedForward(hidden_size, inner_dim=mlp_hidden_dim)

    @staticmethod
    def _modulate(hidden_states, shift=None, scale=None):
        if scale is None and shift is None:
            return hidden_states
        if shift is None:
            return hidden_states * (1 + scale.unsqueeze(1))
        if scale is None:
            return hidden_states + shift.unsqueeze(1)
        return hidden_states * (1 + scale.unsqueeze(1)) + shift.unsqueeze(1)

    @staticmethod
    def _apply_gate(hidden_states, gate=None, tanh=False):
        if gate is None:
            return hidden_states
        if tanh:
            return hidden_states * gate.unsqueeze(1).tanh()
        return hidden_states * gate.unsqueeze(1)

    def forward(self, img, txt, vec, vis_freqs_cis=None, txt_freqs_cis=None, attn_kwargs=None):
        (img_mod1_shift, img_mod1_scale, img_mod1_gate, img_mod2_shift, img_mod2_scale,
         img_mod2_gate) = self.img_mod(vec)
        (txt_mod1_shift, txt_mod1_scale, txt_mod1_gate, txt_mod2_shift, txt_mod2_scale,
         txt_mod2_gate) = self.txt_mod(vec)

        img_modulated = self.img_norm1(img)
        img_modulated = self._modulate(img_modulated, shift=img_mod1_shift, scale=img_mod1_scale)
        img_qkv = self.img_attn_qkv(img_modulated)
        batch_size, image_sequence_length, _ = img_qkv.shape
        img_qkv = img_qkv.view(batch_size, image_sequence_length, 3, self.heads_num, -1).permute(2, 0, 1, 3, 4)
        img_q, img_k, img_v = img_qkv.unbind(0)
        img_q = self.img_attn_q_norm(img_q).to(img_v)
        img_k = self.img_attn_k_norm(img_k).to(img_v)

        if vis_freqs_cis is not None:
            img_q = apply_rotary_emb(img_q, vis_freqs_cis, sequence_dim=1)
            img_k = apply_rotary_emb(img_k, vis_freqs_cis, sequence_dim=1)

        txt_modulated = self.txt_norm1(txt)
        txt_modulated = self._modulate(txt_modulated, shift=txt_mod1_shift, scale=txt_mod1_scale)
        txt_qkv = self.txt_attn_qkv(txt_modulated)
        _, text_sequence_length, _ = txt_qkv.shape
        txt_qkv = txt_qkv.view(batch_size, text_sequence_length, 3, self.heads_num, -1).permute(2, 0, 1, 3, 4)
        txt_q, txt_k, txt_v = txt_qkv.unbind(0)
        txt_q = self.txt_attn_q_norm(txt_q).to(txt_v)
        txt_k = self.txt_attn_k_norm(txt_k).to(txt_v)

        if txt_freqs_cis is not None:
            raise NotImplementedError("RoPE text is not supported for inference")

        attention_output = self.attn(
            torch.cat((img_q, txt_q), dim=1),
            torch.cat((img_k, txt_k), dim=1),
            torch.cat((img_v, txt_v), dim=1),
            attention_mask=attn_kwargs.get("attention_mask") if attn_kwargs is not None else None,
            attention_kwargs=attn_kwargs,
        )
        attention_output = attention_output.flatten(2, 3)
        image_attention_output = attention_output[:, : img.shape[1]]
        text_attention_output = attention_output[:, img.shape[1]:]

        img = img + self._apply_gate(self.img_attn_proj(image_attention_output), gate=img_mod1_gate)
        img = img + self._apply_gate(
            self.img_mlp(self._modulate(self.img_norm2(img), shift=img_mod2_shift, scale=img_mod2_scale)),
            gate=img_mod2_gate)

        txt = txt + self._apply_gate(self.txt_attn_proj(text_attention_output), gate=txt_mod1_gate)
        txt = txt + self._apply_gate(
            self.txt_mlp(self._modulate(self.txt_norm2(txt), shift=txt_mod2_shift, scale=txt_mod2_scale)),
            gate=txt_mod2_gate)
        return img, txt


class JoyAITimeTextEmbedding(nn.Module):
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
        timestep_embedding = self.time_embedder(timestep).type_as(encoder_hidden_states)
        modulation_states = self.time_proj(self.act_fn(timestep_embedding))
        encoder_hidden_states = self.text_embedder(encoder_hidden_states)
        return modulation_states, encoder_hidden_states


class JoyAIImageTransformer3DModel(nn.Module):
    def __init__(self, patch_size=(1, 2, 2), in_channels=4, out_channels=None, hidden_size=3072, heads_num=24,
                 text_states_dim=4096, mlp_width_ratio=4.0, mm_double_blocks_depth=20, rope_dim_list=(16, 56, 56),
                 rope_type="rope", dit_modulation_type="wanx", attn_backend="flash_attn", theta=256):
        self.out_channels = out_channels or in_channels
        self.patch_size = patch_size
        self.hidden_size = hidden_size
        self.heads_num = heads_num
        self.rope_dim_list = rope_dim_list
        self.dit_modulation_type = dit_modulation_type
        self.rope_type = rope_type
        self.theta = theta
        super().__init__()
        if hidden_size % heads_num != 0:
            raise ValueError(f"Hidden size {hidden_size} must be divisible by heads_num {heads_num}")
        self.img_in = nn.Conv3d(in_channels, hidden_size, kernel_size=patch_size, stride=patch_size)
        self.condition_embedder = JoyAITimeTextEmbedding(dim=hidden_size, time_freq_dim=256,
                                                         time_proj_dim=hidden_size * 6,
                                                         text_embed_dim=text_states_dim)
        self.double_blocks = nn.ModuleList([
            JoyAIImageTransformerBlock(self.hidden_size, self.heads_num, mlp_width_ratio=mlp_width_ratio,
                                       dit_modulation_type=self.dit_modulation_type, attn_backend=attn_backend)
            for _ in range(mm_double_blocks_depth)])
        self.norm_out = nn.LayerNorm(hidden_size, elementwise_affine=False, eps=1e-6)
        self.proj_out = nn.Linear(hidden_size, self.out_channels * math.prod(patch_size))

    @staticmethod
    def _get_meshgrid_nd(start, *args, dim=2):
        def as_tuple(value):
            if isinstance(value, int):
                return (value,) * dim
            if len(value) == dim:
                return value
            raise ValueError(f"Expected length {dim} or int, but got {value}")

        if len(args) == 0:
            num = as_tuple(start)
            start = (0,) * dim
            stop = num
        elif len(args) == 1:
            start = as_tuple(start)
            stop = as_tuple(args[0])
            num = [stop[i] - start[i] for i in range(dim)]
        elif len(args) == 2:
            start = as_tuple(start)
            stop = as_tuple(args[0])
            num = as_tuple(args[1])
        else:
            raise ValueError(f"len(args) should be 0, 1 or 2, but got {len(args)}")
        axis_grid = []
        for i in range(dim):
            a, b, n = start[i], stop[i], num[i]
            g = torch.linspace(a, b, n + 1, dtype=torch.float32)[:n]
            axis_grid.append(g)
        grid = torch.meshgrid(*axis_grid, indexing="ij")
        return torch.stack(grid, dim=0)

    @staticmethod
    def _get_nd_rotary_pos_embed(rope_dim_list, start, *args, theta=10000.0, use_real=False,
                                 text_sequence_length=None):
        grid = JoyAIImageTransformer3DModel._get_meshgrid_nd(start, *args, dim=len(rope_dim_list))
        embs = []
        for i in range(len(rope_dim_list)):
            emb = get_1d_rotary_pos_embed(rope_dim_list[i], grid[i].reshape(-1), theta=theta, use_real=use_real)
            embs.append(emb)
        cos = torch.cat([emb[0] for emb in embs], dim=1)
        sin = torch.cat([emb[1] for emb in embs], dim=1)
        vis_emb = (cos, sin)
        if text_sequence_length is not None:
            raise NotImplementedError("mrope text positions: not the pipeline's rope_type")
        return vis_emb, None

    def get_rotary_pos_embed(self, image_grid_size, text_sequence_length=None):
        target_ndim = 3
        if len(image_grid_size) != target_ndim:
            image_grid_size = [1] * (target_ndim - len(image_grid_size)) + image_grid_size
        head_dim = self.hidden_size // self.heads_num
        rope_dim_list = self.rope_dim_list
        if rope_dim_list is None:
            rope_dim_list = [head_dim // target_ndim for _ in range(target_ndim)]
        assert sum(rope_dim_list) == head_dim, "sum(rope_dim_list) should equal to head_dim of attention layer"
        return self._get_nd_rotary_pos_embed(rope_dim_list, image_grid_size,
                                             text_sequence_length=text_sequence_length, theta=self.theta,
                                             use_real=True)

    def forward(self, hidden_states, timestep, encoder_hidden_states=None, encoder_hidden_states_mask=None,
                return_dict=True):
        is_multi_item = len(hidden_states.shape) == 6
        num_items = 0
        if is_multi_item:
            num_items = hidden_states.shape[1]
            if num_items > 1:
                assert self.patch_size[0] == 1, "For multi-item input, patch_size[0] must be 1"
                hidden_states = torch.cat([hidden_states[:, -1:], hidden_states[:, :-1]], dim=1)
            batch_size, num_items, channels, frames_per_item, height, width = hidden_states.shape
            hidden_states = hidden_states.permute(0, 2, 1, 3, 4, 5).reshape(
                batch_size, channels, num_items * frames_per_item, height, width)

        _, _, output_frames, output_height, output_width = hidden_states.shape
        latent_frames, latent_height, latent_width = (output_frames // self.patch_size[0],
                                                      output_height // self.patch_size[1],
                                                      output_width // self.patch_size[2])
        image_hidden_states = self.img_in(hidden_states).flatten(2).transpose(1, 2)

        if encoder_hidden_states_mask is None:
            encoder_hidden_states_mask = torch.ones((encoder_hidden_states.shape[0], encoder_hidden_states.shape[1]),
                                                    dtype=torch.bool, device=image_hidden_states.device)
        else:
            encoder_hidden_states_mask = encoder_hidden_states_mask.to(device=image_hidden_states.device,
                                                                       dtype=torch.bool)
        modulation_states, text_hidden_states = self.condition_embedder(timestep, encoder_hidden_states)
        if modulation_states.shape[-1] > self.hidden_size:
            modulation_states = modulation_states.unflatten(1, (6, -1))

        text_seq_len = text_hidden_states.shape[1]
        image_seq_len = image_hidden_states.shape[1]
        image_rotary_emb, text_rotary_emb = self.get_rotary_pos_embed(
            image_grid_size=(latent_frames, latent_height, latent_width),
            text_sequence_length=text_seq_len if self.rope_type == "mrope" else None)

        attention_mask = torch.cat([
            torch.ones((encoder_hidden_states_mask.shape[0], image_seq_len), dtype=torch.bool,
                       device=encoder_hidden_states_mask.device),
            encoder_hidden_states_mask.bool()], dim=1)
        attention_kwargs = {"thw": [latent_frames, latent_height, latent_width], "txt_len": text_seq_len,
                            "attention_mask": attention_mask}

        for block in self.double_blocks:
            image_hidden_states, text_hidden_states = block(image_hidden_states, text_hidden_states,
                                                            modulation_states, image_rotary_emb, text_rotary_emb,
                                                            attention_kwargs)

        image_seq_len = image_hidden_states.shape[1]
        hidden_states = torch.cat((image_hidden_states, text_hidden_states), dim=1)
        image_hidden_states = hidden_states[:, :image_seq_len, ...]
        image_hidden_states = self.proj_out(self.norm_out(image_hidden_states))
        image_hidden_states = self.unpatchify(image_hidden_states, latent_frames, latent_height, latent_width)

        if is_multi_item:
            batch_size, channels, total_frames, height, width = image_hidden_states.shape
            image_hidden_states = image_hidden_states.reshape(
                batch_size, channels, num_items, total_frames // num_items, height, width).permute(0, 2, 1, 3, 4, 5)
            if num_items > 1:
                image_hidden_states = torch.cat([image_hidden_states[:, 1:], image_hidden_states[:, :1]], dim=1)

        if return_dict:
            return {"sample": image_hidden_states, "encoder_hidden_states": text_hidden_states}
        return image_hidden_states, text_hidden_states

    def unpatchify(self, hidden_states, latent_frames, latent_height, latent_width):
        channels = self.out_channels
        patch_frames, patch_height, patch_width = self.patch_size
        assert latent_frames * latent_height * latent_width == hidden_states.shape[1]
        hidden_states = hidden_states.reshape(shape=(hidden_states.shape[0], latent_frames, latent_height,
                                                     latent_width, patch_frames, patch_height, patch_width, channels))
        hidden_states = torch.einsum("nthwopqc->nctohpwq", hidden_states)
        return hidden_states.reshape(shape=(hidden_states.shape[0], channels, latent_frames * patch_frames,
                                            latent_height * patch_height, latent_width * patch_width))


def build():
    # 2 heads of 16 (RoPE t/h/w 4/6/6), 2 blocks, text 16 wide, MLP ratio 2; time_freq_dim is fixed at 256 upstream.
    return JoyAIImageTransformer3DModel(patch_size=(1, 2, 2), in_channels=4, hidden_size=32, heads_num=2,
                                        text_states_dim=16, mlp_width_ratio=2.0, mm_double_blocks_depth=2,
                                        rope_dim_list=(4, 6, 6), rope_type="rope", theta=256)


def inputs(g):
    return {"encoder_hidden_states": torch.randn((1, 5, 16), generator=g),
            "encoder_hidden_states_mask": torch.tensor([[1, 1, 1, 1, 0]], dtype=torch.long),
            "noise": torch.randn((1, 1, 4, 1, 4, 4), generator=g)}


def call(model, x, sigma, c):
    t = torch.tensor(sigma * 1000, dtype=torch.float32).repeat(x.shape[0])
    return model(hidden_states=x, timestep=t, encoder_hidden_states=c["encoder_hidden_states"],
                 encoder_hidden_states_mask=c["encoder_hidden_states_mask"], return_dict=False)[0]


PRODUCER = dict(
    library_source="replica of huggingface/diffusers transformer_joyai_image.py@2ccc45fb474a and the parts it "
                   "imports (torch 1.13)",
    timestep="sigma*1000 float32, t.repeat(B) (JoyAIImagePipeline, FlowMatch Euler timesteps)",
    velocity="model output [0] as is (flow prediction), not negated",
    note="JoyAI-Image dual-stream DiT, 2 blocks, text to image (one item of a 6-D latent): fused qkv linear per "
         "stream inside the block viewed [B, L, 3, H, d], per-head RMSNorm q/k cast to v's dtype, interleaved 3-D "
         "RoPE (theta 256, t/h/w 4/6/6) on image rows; an attention module whose inputs are the joined [image, text] "
         "q/k/v, bool key mask (the caption's last row masked out); Wan-style 6-way modulation ([1, 6, D] table + "
         "the 6*D timestep projection) over non-affine LayerNorms; GELU-tanh FFNs; final non-affine LayerNorm, no "
         "modulation; timestep sinusoid 256 wide")

if __name__ == "__main__":
    capture("joyai_image", build, inputs, call, sys.argv[1], PRODUCER)
