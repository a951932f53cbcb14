"""JoyImage-Edit DiT, reimplemented for torch 1.13 (no diffusers here), captured small in f32 on CPU.

Follows huggingface/diffusers src/diffusers/models/transformers/transformer_joyimage.py at
071190daca865a4d04deac0e02cda5b8c5d6f6fa (JoyImageEditTransformer3DModel with get_rotary_pos_embed and unpatchify,
JoyImageTransformerBlock, JoyImageAttention with JoyImageAttnProcessor's __call__ as its forward, JoyImageModulate,
JoyImageTimeTextImageEmbedding, _apply_rotary_emb) with the parts it imports: attention.py (FeedForward
"gelu-approximate", GELU), embeddings.py (Timesteps, TimestepEmbedding, PixArtAlphaTextProjection act_fn
"gelu_tanh") and normalization.py (FP32LayerNorm): the same module tree, parameter names and shapes, and call
boundaries; the arithmetic line for line. Stand-ins for what torch 1.13 lacks: torch.nn.RMSNorm (x·rsqrt(mean x² +
eps)·weight) and dispatch_attention_fn (SDPA's math on [B, L, H, D], default scale, no mask).

The constructs it shows: an edit model whose latents hold the reference image and the noisy target as items of one
6-D tensor (B, items, C, T, H, W); the forward moves the last item first, lays the items along the frames (the
reference and the target get frame positions 1 and 0 of a 3-D RoPE grid), and moves it back after unpatchifying;
joint attention over [image, text] rows with per-head RMSNorm q/k from one fused qkv linear per stream and
interleaved RoPE (rotate-half on pairs, θ 256) on the image rows only (rope_type "rope"); Wan-style modulation (a
[1, 6, D] table plus the 6·D timestep projection, per stream); a final LayerNorm with no modulation.

Pipeline as JoyImageEditPipeline (pipeline_joyimage_edit.py at 001f7d3470556fd9d008ad63a54011478be04c5f) calls it
with one reference image: latents (B, 2, C, 1, h, w) = [reference latents, noise], the reference slot restored before
every step (so only the target slot evolves: the capture loop's latents are the target item, joined after the
reference before each call and the velocity's target item taken back), timestep t.repeat(B) with t = σ·1000
(float32), velocity the output as is, no guidance.

usage: /usr/bin/python3 bench/unseen/replicas/joyimage.py OUTDIR [--small]
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


def _apply_rotary_emb(xq, xk, freqs_cis):
    ndim = xq.ndim
    shape = [d if i == 1 or i == ndim - 1 else 1 for i, d in enumerate(xq.shape)]
    cos = freqs_cis[0].view(*shape).to(xq.device)
    sin = freqs_cis[1].view(*shape).to(xq.device)

    def _rotate_half(x):
        x_real, x_imag = x.float().reshape(*x.shape[:-1], -1, 2).unbind(-1)
        return torch.stack([-x_imag, x_real], dim=-1).flatten(3)

    xq_out = (xq.float() * cos + _rotate_half(xq) * sin).type_as(xq)
    xk_out = (xk.float() * cos + _rotate_half(xk) * sin).type_as(xk)
    return xq_out, xk_out


class JoyImageModulate(nn.Module):
    def __init__(self, hidden_size, factor):
        super().__init__()
        self.factor = factor
        self.modulate_table = nn.Parameter(torch.zeros(1, factor, hidden_size) / hidden_size ** 0.5)

    def forward(self, x):
        if x.ndim != 3:
            x = x.unsqueeze(1)
        return [o.squeeze(1) for o in (self.modulate_table + x).chunk(self.factor, dim=1)]


class JoyImageAttention(nn.Module):
    """With JoyImageAttnProcessor's __call__ as its forward."""

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

    def forward(self, hidden_states, encoder_hidden_states=None, image_rotary_emb=None):
        attn = self
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
            vis_freqs, txt_freqs = image_rotary_emb
            if vis_freqs is not None:
                img_query, img_key = _apply_rotary_emb(img_query, img_key, vis_freqs)
            if txt_freqs is not None:
                txt_query, txt_key = _apply_rotary_emb(txt_query, txt_key, txt_freqs)

        joint_query = torch.cat([img_query, txt_query], dim=1)
        joint_key = torch.cat([img_key, txt_key], dim=1)
        joint_value = torch.cat([img_value, txt_value], dim=1)

        # dispatch_attention_fn on [B, L, H, D]: SDPA's math on [B, H, L, D], default scale, no mask.
        joint_hidden_states = sdpa(joint_query.transpose(1, 2), joint_key.transpose(1, 2),
                                   joint_value.transpose(1, 2)).transpose(1, 2)
        joint_hidden_states = joint_hidden_states.flatten(2, 3)
        joint_hidden_states = joint_hidden_states.to(joint_query.dtype)

        img_attn_output = joint_hidden_states[:, : hidden_states.shape[1], :]
        txt_attn_output = joint_hidden_states[:, hidden_states.shape[1]:, :]
        img_attn_output = attn.img_attn_proj(img_attn_output)
        txt_attn_output = attn.txt_attn_proj(txt_attn_output)
        return img_attn_output, txt_attn_output


class JoyImageTransformerBlock(nn.Module):
    def __init__(self, dim, num_attention_heads, attention_head_dim, mlp_width_ratio=4.0, eps=1e-6):
        super().__init__()
        self.dim = dim
        mlp_hidden_dim = int(dim * mlp_width_ratio)
        self.img_mod = JoyImageModulate(dim, factor=6)
        self.img_norm1 = FP32LayerNorm(dim, elementwise_affine=False, eps=eps)
        self.img_norm2 = FP32LayerNorm(dim, elementwise_affine=False, eps=eps)
        self.img_mlp = FeedForward(dim, inner_dim=mlp_hidden_dim)
        self.txt_mod = JoyImageModulate(dim, factor=6)
        self.txt_norm1 = FP32LayerNorm(dim, elementwise_affine=False, eps=eps)
        self.txt_norm2 = FP32LayerNorm(dim, elementwise_affine=False, eps=eps)
        self.txt_mlp = FeedForward(dim, inner_dim=mlp_hidden_dim)
        self.attn = JoyImageAttention(dim, num_attention_heads, attention_head_dim, eps=eps)

    def forward(self, hidden_states, encoder_hidden_states, temb, image_rotary_emb=None):
        (img_mod1_shift, img_mod1_scale, img_mod1_gate, img_mod2_shift, img_mod2_scale,
         img_mod2_gate) = self.img_mod(temb)
        (txt_mod1_shift, txt_mod1_scale, txt_mod1_gate, txt_mod2_shift, txt_mod2_scale,
         txt_mod2_gate) = self.txt_mod(temb)

        img_normed = self.img_norm1(hidden_states)
        txt_normed = self.txt_norm1(encoder_hidden_states)
        img_modulated = img_normed * (1 + img_mod1_scale.unsqueeze(1)) + img_mod1_shift.unsqueeze(1)
        txt_modulated = txt_normed * (1 + txt_mod1_scale.unsqueeze(1)) + txt_mod1_shift.unsqueeze(1)

        img_attn, txt_attn = self.attn(hidden_states=img_modulated, encoder_hidden_states=txt_modulated,
                                       image_rotary_emb=image_rotary_emb)

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


class JoyImageTimeTextImageEmbedding(nn.Module):
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


class JoyImageEditTransformer3DModel(nn.Module):
    _keep_in_fp32_modules = ["time_embedder", "norm1", "norm2", "norm_out"]

    def __init__(self, patch_size=(1, 2, 2), in_channels=16, out_channels=None, hidden_size=3072,
                 num_attention_heads=24, text_dim=4096, mlp_width_ratio=4.0, num_layers=20,
                 rope_dim_list=(16, 56, 56), rope_type="rope", theta=256):
        super().__init__()
        self.out_channels = out_channels or in_channels
        self.patch_size = list(patch_size)
        self.hidden_size = hidden_size
        self.num_attention_heads = num_attention_heads
        self.rope_dim_list = list(rope_dim_list)
        self.rope_type = rope_type
        self.theta = theta
        attention_head_dim = hidden_size // num_attention_heads
        self.img_in = nn.Conv3d(in_channels, hidden_size, kernel_size=patch_size, stride=patch_size)
        self.condition_embedder = JoyImageTimeTextImageEmbedding(dim=hidden_size, time_freq_dim=256,
                                                                 time_proj_dim=hidden_size * 6,
                                                                 text_embed_dim=text_dim)
        self.double_blocks = nn.ModuleList([
            JoyImageTransformerBlock(dim=hidden_size, num_attention_heads=num_attention_heads,
                                     attention_head_dim=attention_head_dim, mlp_width_ratio=mlp_width_ratio)
            for _ in range(num_layers)])
        self.norm_out = FP32LayerNorm(hidden_size, elementwise_affine=False, eps=1e-6)
        self.proj_out = nn.Linear(hidden_size, self.out_channels * math.prod(patch_size))

    def get_rotary_pos_embed(self, vis_rope_size, txt_rope_size=None):
        target_ndim = 3
        if len(vis_rope_size) != target_ndim:
            vis_rope_size = [1] * (target_ndim - len(vis_rope_size)) + list(vis_rope_size)
        head_dim = self.hidden_size // self.num_attention_heads
        rope_dim_list = self.rope_dim_list
        if rope_dim_list is None:
            rope_dim_list = [head_dim // target_ndim for _ in range(target_ndim)]
        if sum(rope_dim_list) != head_dim:
            raise ValueError("sum(rope_dim_list) should equal head_dim")
        grid = torch.stack(torch.meshgrid(
            *[torch.linspace(0, s, s + 1, dtype=torch.float32)[:s] for s in vis_rope_size], indexing="ij"), dim=0)
        vis_cos, vis_sin = [], []
        for i, dim in enumerate(rope_dim_list):
            pos = grid[i].reshape(-1)
            freqs = 1.0 / (self.theta ** (torch.arange(0, dim, 2, dtype=torch.float32)[: (dim // 2)] / dim))
            freqs = torch.outer(pos.float(), freqs)
            vis_cos.append(freqs.cos().repeat_interleave(2, dim=1))
            vis_sin.append(freqs.sin().repeat_interleave(2, dim=1))
        vis_freqs = (torch.cat(vis_cos, dim=1), torch.cat(vis_sin, dim=1))
        if txt_rope_size is None:
            return vis_freqs, None
        grid_txt = torch.arange(txt_rope_size) + grid.view(-1).max().item() + 1
        txt_cos, txt_sin = [], []
        for i, dim in enumerate(rope_dim_list):
            freqs = 1.0 / (self.theta ** (torch.arange(0, dim, 2, dtype=torch.float32)[: (dim // 2)] / dim))
            freqs = torch.outer(grid_txt.float(), freqs)
            txt_cos.append(freqs.cos().repeat_interleave(2, dim=1))
            txt_sin.append(freqs.sin().repeat_interleave(2, dim=1))
        txt_freqs = (torch.cat(txt_cos, dim=1), torch.cat(txt_sin, dim=1))
        return vis_freqs, txt_freqs

    def unpatchify(self, x, t, h, w):
        c = self.out_channels
        pt, ph, pw = self.patch_size
        if t * h * w != x.shape[1]:
            raise ValueError(f"Expected t*h*w ({t * h * w}) to equal x.shape[1] ({x.shape[1]})")
        x = x.reshape(x.shape[0], t, h, w, pt, ph, pw, c)
        x = x.permute(0, 7, 1, 4, 2, 5, 3, 6)
        return x.reshape(x.shape[0], c, t * pt, h * ph, w * pw)

    def forward(self, hidden_states, timestep, encoder_hidden_states=None, return_dict=True):
        is_multi_item = hidden_states.ndim == 6
        num_items = 0
        if is_multi_item:
            num_items = hidden_states.shape[1]
            if num_items > 1:
                if self.patch_size[0] != 1:
                    raise ValueError("For multi-item input, patch_size[0] must be 1")
                hidden_states = torch.cat([hidden_states[:, -1:], hidden_states[:, :-1]], dim=1)
            b, n, c, t, h, w = hidden_states.shape
            hidden_states = hidden_states.permute(0, 2, 1, 3, 4, 5).reshape(b, c, n * t, h, w)

        batch_size, _, ot, oh, ow = hidden_states.shape
        tt = ot // self.patch_size[0]
        th = oh // self.patch_size[1]
        tw = ow // self.patch_size[2]

        img = self.img_in(hidden_states).flatten(2).transpose(1, 2)
        _, vec, txt = self.condition_embedder(timestep, encoder_hidden_states)
        if vec.shape[-1] > self.hidden_size:
            vec = vec.unflatten(1, (6, -1))
        txt_seq_len = txt.shape[1]
        vis_freqs, txt_freqs = self.get_rotary_pos_embed(
            vis_rope_size=[tt, th, tw], txt_rope_size=txt_seq_len if self.rope_type == "mrope" else None)

        for block in self.double_blocks:
            img, txt = block(hidden_states=img, encoder_hidden_states=txt, temb=vec,
                             image_rotary_emb=(vis_freqs, txt_freqs))

        img = self.proj_out(self.norm_out(img))
        img = self.unpatchify(img, tt, th, tw)

        if is_multi_item:
            c_out = img.shape[1]
            img = img.reshape(batch_size, c_out, num_items, -1, oh, ow)
            img = img.permute(0, 2, 1, 3, 4, 5)
            if num_items > 1:
                img = torch.cat([img[:, 1:], img[:, :1]], dim=1)
        return (img,)


SMALL = "--small" in sys.argv  # one block: the fixtures/unseen trace


def build():
    # 2 heads of 16 (RoPE t/h/w 4/6/6), 2 blocks, text 16 wide, MLP ratio 2; time_freq_dim is fixed at 256 upstream.
    return JoyImageEditTransformer3DModel(patch_size=(1, 2, 2), in_channels=4, hidden_size=32,
                                          num_attention_heads=2, text_dim=16, mlp_width_ratio=2.0,
                                          num_layers=1 if SMALL else 2,
                                          rope_dim_list=(4, 6, 6), rope_type="rope", theta=256)


def inputs(g):
    return {"encoder_hidden_states": torch.randn((1, 4, 16), generator=g),
            "reference_latents": torch.randn((1, 1, 4, 1, 4, 4), generator=g),
            "noise": torch.randn((1, 1, 4, 1, 4, 4), generator=g)}


def call(model, x, sigma, c):
    # JoyImageEditPipeline: latents = [reference, target]; latents[:, :1] = ref_latents before every step.
    latents = torch.cat([c["reference_latents"], x], dim=1)
    t = torch.tensor(sigma * 1000, dtype=torch.float32).repeat(latents.shape[0])
    v = model(hidden_states=latents, timestep=t, encoder_hidden_states=c["encoder_hidden_states"],
              return_dict=False)[0]
    return v[:, -1:]


PRODUCER = dict(
    library_source="replica of huggingface/diffusers transformer_joyimage.py@071190daca86 and the parts it imports "
                   "(torch 1.13)",
    timestep="sigma*1000 float32, t.repeat(B) (JoyImageEditPipeline, FlowMatch Euler timesteps)",
    velocity="model output as is (flow prediction), not negated; the target item of the [reference, target] latents",
    note="JoyImage-Edit dual-stream DiT, 2 blocks: a 6-D latent of [reference, target] items reordered target first "
         "and laid along the frames (3-D conv patchify, 1x2x2), the output reordered back; Wan-style 6-way "
         "modulation (per-stream [1, 6, D] table + the 6·D timestep projection) over FP32 non-affine LayerNorms; "
         "joint [image, text] attention, one fused qkv linear per stream, per-head RMSNorm q/k, interleaved 3-D RoPE "
         "(θ 256, t/h/w 4/6/6) on the image rows only; GELU-tanh FFNs; a final non-affine LayerNorm without "
         "modulation; timestep sinusoid 256 wide")

if __name__ == "__main__":
    capture("joyimage", build, inputs, call, sys.argv[1], PRODUCER)
