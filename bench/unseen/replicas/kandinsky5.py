"""Kandinsky 5.0 video DiT, reimplemented for torch 1.13 (no diffusers here), captured small in f32 on CPU.

Follows huggingface/diffusers src/diffusers/models/transformers/transformer_kandinsky.py at
a1d659c5d57a016317f5747348a3c30980a637f0 (Kandinsky5Transformer3DModel, attention_type "regular",
sparse_params None): the same module tree, parameter names and shapes, and call boundaries; the arithmetic
line for line. Stand-ins for what torch 1.13 lacks: nn.RMSNorm (eps None: the dtype's machine epsilon) and
dispatch_attention_fn (SDPA's math on [B, L, H, D], default scale, no mask). The construct it shows: RoPE
applied by a 2x2-matrix multiply-sum and rounded to bfloat16 inside the attention (apply_rotary's
.to(torch.bfloat16), then .type_as(query)) although the run is f32.

Pipeline as Kandinsky5T2VPipeline calls it (bench/unseen/capture_dit.py's kandinsky5 case, --small sizes):
channels-last latents [B, F, H, W, C] joined on the last axis with a zero visual condition and a zero mask
channel; timestep sigma*1000; velocity is the output as is.

usage: /usr/bin/python3 bench/unseen/replicas/kandinsky5.py OUTDIR
"""
import math
import sys

import torch
import torch.nn as nn

from run import capture, sdpa


def get_freqs(dim, max_period=10000.0):
    return torch.exp(-math.log(max_period) * torch.arange(start=0, end=dim, dtype=torch.float32) / dim)


class RMSNorm(nn.Module):
    """torch 2's nn.RMSNorm(dim) (eps None, affine)."""

    def __init__(self, dim):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        # aten's rms_norm composite: f32 statistics and x̂ (f32's epsilon), x̂ cast back, then ·weight
        eps = torch.finfo(torch.float32).eps
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).type_as(x) * self.weight


class Kandinsky5TimeEmbeddings(nn.Module):
    def __init__(self, model_dim, time_dim, max_period=10000.0):
        super().__init__()
        self.model_dim = model_dim
        self.max_period = max_period
        self.freqs = get_freqs(self.model_dim // 2, self.max_period)
        self.in_layer = nn.Linear(model_dim, time_dim, bias=True)
        self.activation = nn.SiLU()
        self.out_layer = nn.Linear(time_dim, time_dim, bias=True)

    @torch.autocast(device_type="cuda", dtype=torch.float32)  # upstream's: the bf16 run's time MLP in f32 on CUDA
    def forward(self, time):
        args = torch.outer(time, self.freqs.to(device=time.device))
        time_embed = torch.cat([torch.cos(args), torch.sin(args)], dim=-1)
        return self.out_layer(self.activation(self.in_layer(time_embed)))


class Kandinsky5TextEmbeddings(nn.Module):
    def __init__(self, text_dim, model_dim):
        super().__init__()
        self.in_layer = nn.Linear(text_dim, model_dim, bias=True)
        self.norm = nn.LayerNorm(model_dim, elementwise_affine=True)

    def forward(self, text_embed):
        text_embed = self.in_layer(text_embed)
        return self.norm(text_embed).type_as(text_embed)


class Kandinsky5VisualEmbeddings(nn.Module):
    def __init__(self, visual_dim, model_dim, patch_size):
        super().__init__()
        self.patch_size = patch_size
        self.in_layer = nn.Linear(math.prod(patch_size) * visual_dim, model_dim)

    def forward(self, x):
        batch_size, duration, height, width, dim = x.shape
        p = self.patch_size
        x = (x.view(batch_size, duration // p[0], p[0], height // p[1], p[1], width // p[2], p[2], dim)
             .permute(0, 1, 3, 5, 2, 4, 6, 7).flatten(4, 7))
        return self.in_layer(x)


class Kandinsky5RoPE1D(nn.Module):
    def __init__(self, dim, max_pos=1024, max_period=10000.0):
        super().__init__()
        freq = get_freqs(dim // 2, max_period)
        pos = torch.arange(max_pos, dtype=freq.dtype)
        self.register_buffer("args", torch.outer(pos, freq), persistent=False)

    def forward(self, pos):
        args = self.args[pos]
        cosine, sine = torch.cos(args), torch.sin(args)
        rope = torch.stack([cosine, -sine, sine, cosine], dim=-1)
        rope = rope.view(*rope.shape[:-1], 2, 2)
        return rope.unsqueeze(-4)


class Kandinsky5RoPE3D(nn.Module):
    def __init__(self, axes_dims, max_pos=(128, 128, 128), max_period=10000.0):
        super().__init__()
        for i, (axes_dim, ax_max_pos) in enumerate(zip(axes_dims, max_pos)):
            freq = get_freqs(axes_dim // 2, max_period)
            pos = torch.arange(ax_max_pos, dtype=freq.dtype)
            self.register_buffer(f"args_{i}", torch.outer(pos, freq), persistent=False)

    def forward(self, shape, pos, scale_factor=(1.0, 1.0, 1.0)):
        batch_size, duration, height, width = shape
        args_t = self.args_0[pos[0]] / scale_factor[0]
        args_h = self.args_1[pos[1]] / scale_factor[1]
        args_w = self.args_2[pos[2]] / scale_factor[2]
        args = torch.cat([
            args_t.view(1, duration, 1, 1, -1).repeat(batch_size, 1, height, width, 1),
            args_h.view(1, 1, height, 1, -1).repeat(batch_size, duration, 1, width, 1),
            args_w.view(1, 1, 1, width, -1).repeat(batch_size, duration, height, 1, 1),
        ], dim=-1)
        cosine, sine = torch.cos(args), torch.sin(args)
        rope = torch.stack([cosine, -sine, sine, cosine], dim=-1)
        rope = rope.view(*rope.shape[:-1], 2, 2)
        return rope.unsqueeze(-4)


class Kandinsky5Modulation(nn.Module):
    def __init__(self, time_dim, model_dim, num_params):
        super().__init__()
        self.activation = nn.SiLU()
        self.out_layer = nn.Linear(time_dim, num_params * model_dim)

    @torch.autocast(device_type="cuda", dtype=torch.float32)  # upstream's, as above
    def forward(self, x):
        return self.out_layer(self.activation(x))


def apply_rotary(x, rope):
    x_ = x.reshape(*x.shape[:-1], -1, 1, 2).to(torch.float32)
    x_out = (rope * x_).sum(dim=-1)
    return x_out.reshape(*x.shape).to(torch.bfloat16)


class Kandinsky5Attention(nn.Module):
    """With Kandinsky5AttnProcessor's __call__ as its forward."""

    def __init__(self, num_channels, head_dim):
        super().__init__()
        self.num_heads = num_channels // head_dim
        self.to_query = nn.Linear(num_channels, num_channels, bias=True)
        self.to_key = nn.Linear(num_channels, num_channels, bias=True)
        self.to_value = nn.Linear(num_channels, num_channels, bias=True)
        self.query_norm = RMSNorm(head_dim)
        self.key_norm = RMSNorm(head_dim)
        self.out_layer = nn.Linear(num_channels, num_channels, bias=True)

    def forward(self, hidden_states, encoder_hidden_states=None, sparse_params=None, rotary_emb=None):
        query = self.to_query(hidden_states)
        src = hidden_states if encoder_hidden_states is None else encoder_hidden_states
        key = self.to_key(src)
        value = self.to_value(src)
        shape, cond_shape = query.shape[:-1], key.shape[:-1]
        query = query.reshape(*shape, self.num_heads, -1)
        key = key.reshape(*cond_shape, self.num_heads, -1)
        value = value.reshape(*cond_shape, self.num_heads, -1)

        query = self.query_norm(query.float()).type_as(query)
        key = self.key_norm(key.float()).type_as(key)
        if rotary_emb is not None:
            query = apply_rotary(query, rotary_emb).type_as(query)
            key = apply_rotary(key, rotary_emb).type_as(key)

        # dispatch_attention_fn on [B, L, H, D], no mask, default scale
        hidden_states = sdpa(query.transpose(1, 2), key.transpose(1, 2), value.transpose(1, 2)).transpose(1, 2)
        hidden_states = hidden_states.flatten(-2, -1)
        return self.out_layer(hidden_states)


class Kandinsky5FeedForward(nn.Module):
    def __init__(self, dim, ff_dim):
        super().__init__()
        self.in_layer = nn.Linear(dim, ff_dim, bias=False)
        self.activation = nn.GELU()
        self.out_layer = nn.Linear(ff_dim, dim, bias=False)

    def forward(self, x):
        return self.out_layer(self.activation(self.in_layer(x)))


class Kandinsky5OutLayer(nn.Module):
    def __init__(self, model_dim, time_dim, visual_dim, patch_size):
        super().__init__()
        self.patch_size = patch_size
        self.modulation = Kandinsky5Modulation(time_dim, model_dim, 2)
        self.norm = nn.LayerNorm(model_dim, elementwise_affine=False)
        self.out_layer = nn.Linear(model_dim, math.prod(patch_size) * visual_dim, bias=True)

    def forward(self, visual_embed, text_embed, time_embed):
        shift, scale = torch.chunk(self.modulation(time_embed).unsqueeze(dim=1), 2, dim=-1)
        visual_embed = (self.norm(visual_embed.float()) * (scale.float()[:, None, None] + 1.0)
                        + shift.float()[:, None, None]).type_as(visual_embed)
        x = self.out_layer(visual_embed)
        batch_size, duration, height, width, _ = x.shape
        p = self.patch_size
        return (x.view(batch_size, duration, height, width, -1, p[0], p[1], p[2])
                .permute(0, 1, 5, 2, 6, 3, 7, 4).flatten(1, 2).flatten(2, 3).flatten(3, 4))


class Kandinsky5TransformerEncoderBlock(nn.Module):
    def __init__(self, model_dim, time_dim, ff_dim, head_dim):
        super().__init__()
        self.text_modulation = Kandinsky5Modulation(time_dim, model_dim, 6)
        self.self_attention_norm = nn.LayerNorm(model_dim, elementwise_affine=False)
        self.self_attention = Kandinsky5Attention(model_dim, head_dim)
        self.feed_forward_norm = nn.LayerNorm(model_dim, elementwise_affine=False)
        self.feed_forward = Kandinsky5FeedForward(model_dim, ff_dim)

    def forward(self, x, time_embed, rope):
        self_attn_params, ff_params = torch.chunk(self.text_modulation(time_embed).unsqueeze(dim=1), 2, dim=-1)
        shift, scale, gate = torch.chunk(self_attn_params, 3, dim=-1)
        out = (self.self_attention_norm(x.float()) * (scale.float() + 1.0) + shift.float()).type_as(x)
        out = self.self_attention(out, rotary_emb=rope)
        x = (x.float() + gate.float() * out.float()).type_as(x)
        shift, scale, gate = torch.chunk(ff_params, 3, dim=-1)
        out = (self.feed_forward_norm(x.float()) * (scale.float() + 1.0) + shift.float()).type_as(x)
        out = self.feed_forward(out)
        return (x.float() + gate.float() * out.float()).type_as(x)


class Kandinsky5TransformerDecoderBlock(nn.Module):
    def __init__(self, model_dim, time_dim, ff_dim, head_dim):
        super().__init__()
        self.visual_modulation = Kandinsky5Modulation(time_dim, model_dim, 9)
        self.self_attention_norm = nn.LayerNorm(model_dim, elementwise_affine=False)
        self.self_attention = Kandinsky5Attention(model_dim, head_dim)
        self.cross_attention_norm = nn.LayerNorm(model_dim, elementwise_affine=False)
        self.cross_attention = Kandinsky5Attention(model_dim, head_dim)
        self.feed_forward_norm = nn.LayerNorm(model_dim, elementwise_affine=False)
        self.feed_forward = Kandinsky5FeedForward(model_dim, ff_dim)

    def forward(self, visual_embed, text_embed, time_embed, rope, sparse_params):
        self_attn_params, cross_attn_params, ff_params = torch.chunk(
            self.visual_modulation(time_embed).unsqueeze(dim=1), 3, dim=-1)
        shift, scale, gate = torch.chunk(self_attn_params, 3, dim=-1)
        visual_out = (self.self_attention_norm(visual_embed.float()) * (scale.float() + 1.0)
                      + shift.float()).type_as(visual_embed)
        visual_out = self.self_attention(visual_out, rotary_emb=rope, sparse_params=sparse_params)
        visual_embed = (visual_embed.float() + gate.float() * visual_out.float()).type_as(visual_embed)
        shift, scale, gate = torch.chunk(cross_attn_params, 3, dim=-1)
        visual_out = (self.cross_attention_norm(visual_embed.float()) * (scale.float() + 1.0)
                      + shift.float()).type_as(visual_embed)
        visual_out = self.cross_attention(visual_out, encoder_hidden_states=text_embed)
        visual_embed = (visual_embed.float() + gate.float() * visual_out.float()).type_as(visual_embed)
        shift, scale, gate = torch.chunk(ff_params, 3, dim=-1)
        visual_out = (self.feed_forward_norm(visual_embed.float()) * (scale.float() + 1.0)
                      + shift.float()).type_as(visual_embed)
        visual_out = self.feed_forward(visual_out)
        return (visual_embed.float() + gate.float() * visual_out.float()).type_as(visual_embed)


class Kandinsky5Transformer3DModel(nn.Module):
    def __init__(self, in_visual_dim=4, in_text_dim=3584, in_text_dim2=768, time_dim=512, out_visual_dim=4,
                 patch_size=(1, 2, 2), model_dim=2048, ff_dim=5120, num_text_blocks=2, num_visual_blocks=32,
                 axes_dims=(16, 24, 24), visual_cond=False):
        super().__init__()
        head_dim = sum(axes_dims)
        visual_embed_dim = 2 * in_visual_dim + 1 if visual_cond else in_visual_dim
        self.time_embeddings = Kandinsky5TimeEmbeddings(model_dim, time_dim)
        self.text_embeddings = Kandinsky5TextEmbeddings(in_text_dim, model_dim)
        self.pooled_text_embeddings = Kandinsky5TextEmbeddings(in_text_dim2, time_dim)
        self.visual_embeddings = Kandinsky5VisualEmbeddings(visual_embed_dim, model_dim, patch_size)
        self.text_rope_embeddings = Kandinsky5RoPE1D(head_dim)
        self.visual_rope_embeddings = Kandinsky5RoPE3D(axes_dims)
        self.text_transformer_blocks = nn.ModuleList(
            [Kandinsky5TransformerEncoderBlock(model_dim, time_dim, ff_dim, head_dim) for _ in range(num_text_blocks)])
        self.visual_transformer_blocks = nn.ModuleList(
            [Kandinsky5TransformerDecoderBlock(model_dim, time_dim, ff_dim, head_dim)
             for _ in range(num_visual_blocks)])
        self.out_layer = Kandinsky5OutLayer(model_dim, time_dim, out_visual_dim, patch_size)

    def forward(self, hidden_states, encoder_hidden_states, timestep, pooled_projections, visual_rope_pos,
                text_rope_pos, scale_factor=(1.0, 1.0, 1.0), sparse_params=None):
        text_embed = self.text_embeddings(encoder_hidden_states)
        time_embed = self.time_embeddings(timestep)
        time_embed = time_embed + self.pooled_text_embeddings(pooled_projections)
        visual_embed = self.visual_embeddings(hidden_states)
        text_rope = self.text_rope_embeddings(text_rope_pos).unsqueeze(dim=0)
        for block in self.text_transformer_blocks:
            text_embed = block(text_embed, time_embed, text_rope)
        visual_shape = visual_embed.shape[:-1]
        visual_rope = self.visual_rope_embeddings(visual_shape, visual_rope_pos, scale_factor)
        visual_embed, visual_rope = visual_embed.flatten(1, 3), visual_rope.flatten(1, 3)  # fractal_flatten
        for block in self.visual_transformer_blocks:
            visual_embed = block(visual_embed, text_embed, time_embed, visual_rope, sparse_params)
        visual_embed = visual_embed.reshape(*visual_shape, *visual_embed.shape[2:])  # fractal_unflatten
        return self.out_layer(visual_embed, text_embed, time_embed)


def build():
    # capture_dit.py's kandinsky5 case at --small sizes: head_dim 16 = RoPE axes (4, 6, 6), 2 heads.
    return Kandinsky5Transformer3DModel(in_visual_dim=4, in_text_dim=16, in_text_dim2=16, time_dim=32,
                                        out_visual_dim=4, patch_size=(1, 2, 2), model_dim=32, ff_dim=64,
                                        num_text_blocks=1, num_visual_blocks=1, axes_dims=(4, 6, 6),
                                        visual_cond=True)


def inputs(g):
    n = 4
    return {"encoder_hidden_states": torch.randn((1, n, 16), generator=g),
            "pooled_projections": torch.randn((1, 16), generator=g),
            "visual_cond": torch.zeros(1, 2, 8, 8, 5), "text_rope_pos": torch.arange(n),
            "noise": torch.randn((1, 2, 8, 8, 4), generator=g)}


def call(model, x, sigma, c):
    t = torch.tensor([sigma * 1000.0], dtype=torch.float32)
    inp = torch.cat([x, c["visual_cond"]], dim=-1)
    pos = [torch.arange(2), torch.arange(4), torch.arange(4)]
    return model(hidden_states=inp, encoder_hidden_states=c["encoder_hidden_states"], timestep=t,
                 pooled_projections=c["pooled_projections"], visual_rope_pos=pos, text_rope_pos=c["text_rope_pos"],
                 scale_factor=(1.0, 2.0, 2.0), sparse_params=None)


PRODUCER = dict(
    library_source="replica of huggingface/diffusers transformer_kandinsky.py@a1d659c5d57a (torch 1.13)",
    timestep="sigma*1000 float32 (Kandinsky5T2VPipeline: t.unsqueeze(0).repeat(B))",
    velocity="model output as is (flow velocity); channels-last latents, model input = [latents, zero visual "
             "condition, zero mask] on the last axis",
    note="Kandinsky 5.0 video DiT: one modulated text encoder block (self-attn, 1-D RoPE), one visual decoder "
         "block (self-attn with 3-D RoPE whose angles are divided by scale_factor (1, 2, 2), cross-attn to the "
         "encoded text, bias-free GELU FFN), 6/9-way (shift, scale, gate) modulation from t + pooled text; RoPE "
         "as 2x2 rotation matrices applied by multiply-sum and rounded to bfloat16 in this f32 run; per-head "
         "RMSNorm (eps = f32 machine epsilon) q/k norms; channels-last Linear patchify (1x2x2); cos-first "
         "sinusoid; 2 latent frames")

if __name__ == "__main__":
    capture("kandinsky5", build, inputs, call, sys.argv[1], PRODUCER)
