"""JoyImage-Edit-Plus DiT (multi-image editing), reimplemented for torch 1.13 (no diffusers here), captured small
in f32 on CPU.

Follows huggingface/diffusers src/diffusers/models/transformers/transformer_joyimage_edit_plus.py at
071190daca865a4d04deac0e02cda5b8c5d6f6fa (JoyImageEditPlusTransformer3DModel with _get_rotary_pos_embed_for_range,
JoyImageEditPlusTransformerBlock, JoyImageEditPlusAttention with JoyImageEditPlusAttnProcessor's __call__ as its
forward, JoyImageEditPlusModulate, JoyImageEditPlusTimeTextImageEmbedding, _apply_rotary_emb_batched) with the parts
it imports: attention.py (FeedForward "gelu-approximate", GELU), embeddings.py (Timesteps, TimestepEmbedding,
PixArtAlphaTextProjection act_fn "gelu_tanh") and normalization.py (FP32LayerNorm): the same module tree, parameter
names and shapes, and call boundaries; the arithmetic line for line. Stand-ins for what torch 1.13 lacks:
torch.nn.RMSNorm (x̂ in f32, cast back, ·weight) and dispatch_attention_fn (SDPA's math on [B, L, H, D], default
scale, a boolean key mask).

The constructs it shows beside JoyImage-Edit: the latents arrive already patchified and padded, [B, max_patches, C,
pt, ph, pw] (each sample's target patches, then its reference images' patches, each image patchified on its own, then
zero patches up to the batch's longest); one Conv3d applied per patch (kernel = stride = the patch); a batched 3-D
RoPE table [B, S, D] built per sample from its shape_list, each item's frames offset after the previous item's
(target t = 0, the references t = 1, 2, ...), its padded rows cos 1, sin 0; a boolean key mask over [image patches |
text tokens] (padded patches and padded text tokens masked, queries not); the output reshaped back to patches.

Pipeline as JoyImageEditPlusPipeline (pipeline_joyimage_edit_plus.py at 3f2f704ba7f603de484d8fd9aa34cf4a2f3bc0f0)
calls it for a batch of two prompts, one reference image each, at different sizes: prepare_latents' padded patches
(the target's noise patches first), the reference and padding patches restored before every step (so only the target
patches evolve: the loop's latents are the target patches, joined before the request's padded reference patches
before each call, and the velocity's target patches taken back), timestep t.repeat(B) with t = sigma*1000 (float32),
the prompts' mask (the shorter prompt padded), velocity the output as is, no guidance (guidance_scale 1).

usage: /usr/bin/python3 bench/unseen/replicas/joyimage_edit_plus.py OUTDIR
"""
import math
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

from parts import TorchRMSNorm
from run import capture, get_timestep_embedding, sdpa


class RMSNorm(TorchRMSNorm):
    """torch 2's nn.RMSNorm(dim, eps, elementwise_affine=True)."""


class FP32LayerNorm(nn.LayerNorm):
    def forward(self, inputs):
        origin_dtype = inputs.dtype
        return F.layer_norm(inputs.float(), self.normalized_shape,
                            self.weight.float() if self.weight is not None else None,
                            self.bias.float() if self.bias is not None else None, self.eps).to(origin_dtype)


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


def _apply_rotary_emb_batched(xq, xk, freqs_cis):
    cos, sin = freqs_cis[0].to(xq.device), freqs_cis[1].to(xq.device)
    cos = cos.unsqueeze(2)
    sin = sin.unsqueeze(2)

    def _rotate_half(x):
        x_real, x_imag = x.float().reshape(*x.shape[:-1], -1, 2).unbind(-1)
        return torch.stack([-x_imag, x_real], dim=-1).flatten(3)

    xq_out = (xq.float() * cos + _rotate_half(xq) * sin).type_as(xq)
    xk_out = (xk.float() * cos + _rotate_half(xk) * sin).type_as(xk)
    return xq_out, xk_out


class JoyImageEditPlusModulate(nn.Module):
    def __init__(self, hidden_size, factor):
        super().__init__()
        self.factor = factor
        self.modulate_table = nn.Parameter(torch.zeros(1, factor, hidden_size) / hidden_size ** 0.5)

    def forward(self, x):
        if x.ndim != 3:
            x = x.unsqueeze(1)
        return [o.squeeze(1) for o in (self.modulate_table + x).chunk(self.factor, dim=1)]


def dispatch_attention_fn(query, key, value, attn_mask=None):
    """SDPA's math on [B, L, H, D], default scale; a boolean mask (True attends)."""
    return sdpa(query.transpose(1, 2), key.transpose(1, 2), value.transpose(1, 2), mask=attn_mask).transpose(1, 2)


class JoyImageEditPlusAttention(nn.Module):
    """With JoyImageEditPlusAttnProcessor's __call__ as its forward."""

    def __init__(self, dim, num_attention_heads, attention_head_dim, eps=1e-6):
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

    def forward(self, hidden_states, encoder_hidden_states=None, image_rotary_emb=None, attention_mask=None):
        attn = self
        if encoder_hidden_states is None:
            raise ValueError("JoyImageEditPlusAttnProcessor requires encoder_hidden_states")
        heads = attn.heads
        img_qkv = attn.img_attn_qkv(hidden_states)
        img_query, img_key, img_value = img_qkv.chunk(3, dim=-1)
        txt_qkv = attn.txt_attn_qkv(encoder_hidden_states)
        txt_query, txt_key, txt_value = txt_qkv.chunk(3, dim=-1)

        img_query = img_query.unflatten(-1, (heads, -1))
        img_key = img_key.unflatten(-1, (heads, -1))
        img_value = img_value.unflatten(-1, (heads, -1))
        txt_query = txt_query.unflatten(-1, (heads, -1))
        txt_key = txt_key.unflatten(-1, (heads, -1))
        txt_value = txt_value.unflatten(-1, (heads, -1))

        img_query = attn.img_attn_q_norm(img_query)
        img_key = attn.img_attn_k_norm(img_key)
        txt_query = attn.txt_attn_q_norm(txt_query)
        txt_key = attn.txt_attn_k_norm(txt_key)

        if image_rotary_emb is not None:
            img_query, img_key = _apply_rotary_emb_batched(img_query, img_key, image_rotary_emb)

        joint_query = torch.cat([img_query, txt_query], dim=1)
        joint_key = torch.cat([img_key, txt_key], dim=1)
        joint_value = torch.cat([img_value, txt_value], dim=1)

        joint_hidden_states = dispatch_attention_fn(joint_query, joint_key, joint_value, attn_mask=attention_mask)
        joint_hidden_states = joint_hidden_states.flatten(2, 3)
        joint_hidden_states = joint_hidden_states.to(joint_query.dtype)

        img_attn_output = joint_hidden_states[:, : hidden_states.shape[1], :]
        txt_attn_output = joint_hidden_states[:, hidden_states.shape[1]:, :]
        img_attn_output = attn.img_attn_proj(img_attn_output)
        txt_attn_output = attn.txt_attn_proj(txt_attn_output)
        return img_attn_output, txt_attn_output


class JoyImageEditPlusTransformerBlock(nn.Module):
    def __init__(self, dim, num_attention_heads, attention_head_dim, mlp_width_ratio=4.0, eps=1e-6):
        super().__init__()
        self.dim = dim
        self.num_attention_heads = num_attention_heads
        self.attention_head_dim = attention_head_dim
        mlp_hidden_dim = int(dim * mlp_width_ratio)
        self.img_mod = JoyImageEditPlusModulate(dim, factor=6)
        self.img_norm1 = FP32LayerNorm(dim, elementwise_affine=False, eps=eps)
        self.img_norm2 = FP32LayerNorm(dim, elementwise_affine=False, eps=eps)
        self.img_mlp = FeedForward(dim, inner_dim=mlp_hidden_dim)
        self.txt_mod = JoyImageEditPlusModulate(dim, factor=6)
        self.txt_norm1 = FP32LayerNorm(dim, elementwise_affine=False, eps=eps)
        self.txt_norm2 = FP32LayerNorm(dim, elementwise_affine=False, eps=eps)
        self.txt_mlp = FeedForward(dim, inner_dim=mlp_hidden_dim)
        self.attn = JoyImageEditPlusAttention(dim, num_attention_heads, attention_head_dim, eps=eps)

    def forward(self, hidden_states, encoder_hidden_states, temb, image_rotary_emb=None, attention_mask=None):
        (img_mod1_shift, img_mod1_scale, img_mod1_gate, img_mod2_shift, img_mod2_scale,
         img_mod2_gate) = self.img_mod(temb)
        (txt_mod1_shift, txt_mod1_scale, txt_mod1_gate, txt_mod2_shift, txt_mod2_scale,
         txt_mod2_gate) = self.txt_mod(temb)

        img_normed = self.img_norm1(hidden_states)
        txt_normed = self.txt_norm1(encoder_hidden_states)
        img_modulated = img_normed * (1 + img_mod1_scale.unsqueeze(1)) + img_mod1_shift.unsqueeze(1)
        txt_modulated = txt_normed * (1 + txt_mod1_scale.unsqueeze(1)) + txt_mod1_shift.unsqueeze(1)

        img_attn, txt_attn = self.attn(hidden_states=img_modulated, encoder_hidden_states=txt_modulated,
                                       image_rotary_emb=image_rotary_emb, attention_mask=attention_mask)

        hidden_states = hidden_states + img_attn * img_mod1_gate.unsqueeze(1)
        encoder_hidden_states = encoder_hidden_states + txt_attn * txt_mod1_gate.unsqueeze(1)

        img_ffn_normed = self.img_norm2(hidden_states)
        txt_ffn_normed = self.txt_norm2(encoder_hidden_states)
        img_ffn_input = img_ffn_normed * (1 + img_mod2_scale.unsqueeze(1)) + img_mod2_shift.unsqueeze(1)
        txt_ffn_input = txt_ffn_normed * (1 + txt_mod2_scale.unsqueeze(1)) + txt_mod2_shift.unsqueeze(1)
        img_ffn_output = self.img_mlp(img_ffn_input)
        txt_ffn_output = self.txt_mlp(txt_ffn_input)
        hidden_states = hidden_states + img_ffn_output * img_mod2_gate.unsqueeze(1)
        encoder_hidden_states = encoder_hidden_states + txt_ffn_output * txt_mod2_gate.unsqueeze(1)
        return hidden_states, encoder_hidden_states


class JoyImageEditPlusTimeTextImageEmbedding(nn.Module):
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


class JoyImageEditPlusTransformer3DModel(nn.Module):
    _keep_in_fp32_modules = ["time_embedder", "norm1", "norm2", "norm_out"]

    def __init__(self, patch_size=(1, 2, 2), in_channels=16, out_channels=None, hidden_size=3072,
                 num_attention_heads=24, text_dim=4096, mlp_width_ratio=4.0, num_layers=20,
                 rope_dim_list=(16, 56, 56), rope_type="rope", theta=256):
        super().__init__()
        self.out_channels = out_channels or in_channels
        self.hidden_size = hidden_size
        self.num_attention_heads = num_attention_heads
        self.rope_dim_list = list(rope_dim_list)
        self.theta = theta
        attention_head_dim = hidden_size // num_attention_heads
        if hidden_size % num_attention_heads != 0:
            raise ValueError("hidden_size must be divisible by num_attention_heads")
        self.img_in = nn.Conv3d(in_channels, hidden_size, kernel_size=patch_size, stride=patch_size)
        self.condition_embedder = JoyImageEditPlusTimeTextImageEmbedding(dim=hidden_size, time_freq_dim=256,
                                                                         time_proj_dim=hidden_size * 6,
                                                                         text_embed_dim=text_dim)
        self.double_blocks = nn.ModuleList([
            JoyImageEditPlusTransformerBlock(dim=hidden_size, num_attention_heads=num_attention_heads,
                                             attention_head_dim=attention_head_dim, mlp_width_ratio=mlp_width_ratio)
            for _ in range(num_layers)])
        self.norm_out = FP32LayerNorm(hidden_size, elementwise_affine=False, eps=1e-6)
        self.proj_out = nn.Linear(hidden_size, self.out_channels * math.prod(patch_size))

    def _get_rotary_pos_embed_for_range(self, start, stop):
        head_dim = self.hidden_size // self.num_attention_heads
        rope_dim_list = self.rope_dim_list
        if rope_dim_list is None:
            rope_dim_list = [head_dim // 3] * 3
        grids = []
        for i in range(3):
            grids.append(torch.arange(start[i], stop[i], dtype=torch.float32))
        mesh = torch.stack(torch.meshgrid(*grids, indexing="ij"), dim=0)
        cos_parts, sin_parts = [], []
        for i, dim in enumerate(rope_dim_list):
            pos = mesh[i].reshape(-1)
            freqs = 1.0 / (self.theta ** (torch.arange(0, dim, 2, dtype=torch.float32)[: (dim // 2)] / dim))
            angles = torch.outer(pos, freqs)
            cos_parts.append(angles.cos().repeat_interleave(2, dim=1))
            sin_parts.append(angles.sin().repeat_interleave(2, dim=1))
        return torch.cat(cos_parts, dim=1), torch.cat(sin_parts, dim=1)

    def forward(self, hidden_states, timestep, encoder_hidden_states, encoder_hidden_states_mask=None,
                shape_list=None, return_dict=True):
        batch_size, max_num_patches, channels, pt, ph, pw = hidden_states.shape
        device = hidden_states.device

        _, vec, txt = self.condition_embedder(timestep, encoder_hidden_states)
        vec = vec.unflatten(1, (6, -1))

        x = hidden_states.reshape(batch_size * max_num_patches, channels, pt, ph, pw)
        x = self.img_in(x)
        img = x.reshape(batch_size, max_num_patches, -1)

        sample_cos_list, sample_sin_list = [], []
        for i in range(batch_size):
            s_cos_parts, s_sin_parts = [], []
            current_t_offset = 0
            for thw in shape_list[i]:
                t, h, w = thw
                start = (current_t_offset, 0, 0)
                stop = (current_t_offset + t, h, w)
                cos_emb, sin_emb = self._get_rotary_pos_embed_for_range(start, stop)
                s_cos_parts.append(cos_emb)
                s_sin_parts.append(sin_emb)
                current_t_offset += t
            s_cos = torch.cat(s_cos_parts, dim=0).to(device)
            s_sin = torch.cat(s_sin_parts, dim=0).to(device)
            actual_len = s_cos.shape[0]
            pad_len = max_num_patches - actual_len
            if pad_len > 0:
                s_cos = F.pad(s_cos, (0, 0, 0, pad_len), value=1.0)
                s_sin = F.pad(s_sin, (0, 0, 0, pad_len), value=0.0)
            sample_cos_list.append(s_cos)
            sample_sin_list.append(s_sin)
        vis_freqs = (torch.stack(sample_cos_list), torch.stack(sample_sin_list))

        attention_mask = None
        if encoder_hidden_states_mask is not None:
            img_mask = torch.zeros(batch_size, max_num_patches, device=device, dtype=encoder_hidden_states_mask.dtype)
            for i in range(batch_size):
                actual_len = sum(t * h * w for t, h, w in shape_list[i])
                img_mask[i, :actual_len] = 1.0
            full_mask = torch.cat([img_mask, encoder_hidden_states_mask], dim=1)
            attention_mask = full_mask.unsqueeze(1).unsqueeze(1).bool()

        for block in self.double_blocks:
            img, txt = block(hidden_states=img, encoder_hidden_states=txt, temb=vec, image_rotary_emb=vis_freqs,
                             attention_mask=attention_mask)

        img = self.proj_out(self.norm_out(img))
        img = img.reshape(batch_size, max_num_patches, pt, ph, pw, self.out_channels).permute(0, 1, 5, 2, 3, 4)
        return (img,)


def patchify(item, patch_size=(1, 2, 2)):
    """prepare_latents' per-item patchify: (C, T, H, W) -> (T'·H'·W', C, pt, ph, pw), and its (T', H', W')."""
    pt, ph, pw = patch_size
    c, t, h, w = item.shape
    l_t, l_h, l_w = t // pt, h // ph, w // pw
    patches = item.reshape(c, l_t, pt, l_h, ph, l_w, pw).permute(1, 3, 5, 0, 2, 4, 6).reshape(-1, c, pt, ph, pw)
    return patches, (l_t, l_h, l_w)


# two samples: a 4x4 target each (4 patches); sample 0's reference 4x4 (4 patches), sample 1's 2x4 (2 patches, so
# sample 1 is padded with 2 zero patches)
TARGET_SHAPE = (1, 2, 2)
REFERENCE_SHAPES = [(1, 2, 2), (1, 1, 2)]
NUM_TARGET = 4
MAX_PATCHES = 8


def build():
    # 2 heads of 16 (RoPE t/h/w 4/6/6), 2 blocks, text 16 wide, MLP ratio 2; time_freq_dim is fixed at 256 upstream.
    return JoyImageEditPlusTransformer3DModel(patch_size=(1, 2, 2), in_channels=4, hidden_size=32,
                                              num_attention_heads=2, text_dim=16, mlp_width_ratio=2.0, num_layers=2,
                                              rope_dim_list=(4, 6, 6), rope_type="rope", theta=256)


def inputs(g):
    refs = [torch.randn((4, 1, 4, 4), generator=g), torch.randn((4, 1, 2, 4), generator=g)]
    rest = torch.zeros((2, MAX_PATCHES - NUM_TARGET, 4, 1, 2, 2))
    for i, ref in enumerate(refs):
        patches, _ = patchify(ref)
        rest[i, : patches.shape[0]] = patches
    noise = torch.stack([patchify(torch.randn((4, 1, 4, 4), generator=g))[0] for _ in range(2)])
    return {"encoder_hidden_states": torch.randn((2, 4, 16), generator=g),
            "encoder_hidden_states_mask": torch.tensor([[1, 1, 1, 1], [1, 1, 1, 0]], dtype=torch.int64),
            "reference_patches": rest, "noise": noise}


def call(model, x, sigma, c):
    # prepare_latents' padded patches: each sample's target patches, then its reference's, then zeros; the
    # reference and padding patches restored before every step.
    latents = torch.cat([x, c["reference_patches"]], dim=1)
    shape_list = [[TARGET_SHAPE, ref] for ref in REFERENCE_SHAPES]
    t = torch.tensor(sigma * 1000, dtype=torch.float32).repeat(latents.shape[0])
    v = model(hidden_states=latents, timestep=t, encoder_hidden_states=c["encoder_hidden_states"],
              encoder_hidden_states_mask=c["encoder_hidden_states_mask"], shape_list=shape_list,
              return_dict=False)[0]
    return v[:, :NUM_TARGET]


PRODUCER = dict(
    library_source="replica of huggingface/diffusers transformer_joyimage_edit_plus.py@071190daca86 and the parts "
                   "it imports (torch 1.13)",
    timestep="sigma*1000 float32, t.repeat(B) (JoyImageEditPlusPipeline, FlowMatch Euler timesteps)",
    velocity="model output as is (flow prediction), not negated; the target patches of the padded patch sequence",
    note="JoyImage-Edit-Plus dual-stream DiT, 2 blocks, batch of 2: pre-patchified padded latents [B, 8, C, 1, 2, 2] "
         "(4 target patches, then 4 or 2 reference patches, then zero patches), a Conv3d per patch; a batched 3-D "
         "RoPE table per sample from its shape_list (reference frames offset after the target's, padded rows cos 1 "
         "sin 0), interleaved pairs, θ 256, t/h/w 4/6/6, on the image rows only; a boolean key mask over [patches | "
         "text] (padded patches and the shorter prompt's pad token masked); Wan-style 6-way modulation per stream; "
         "fused qkv per stream, per-head RMSNorm q/k; GELU-tanh FFNs; final non-affine LayerNorm, no modulation")

if __name__ == "__main__":
    capture("joyimage_edit_plus", build, inputs, call, sys.argv[1], PRODUCER)
