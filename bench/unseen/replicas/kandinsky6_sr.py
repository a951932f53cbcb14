"""Kandinsky 6 video super-resolution DiT (the dense-attention path), reimplemented for torch 1.13 (no diffusers
here), captured small in f32 on CPU.

Follows huggingface/diffusers src/diffusers/models/transformers/transformer_kandinsky6_sr.py at
002f4fb73401fc46cdb213f3643d98d1e228d993 (Kandinsky6SRTransformer3DModel, Kandinsky6SRTransformerBlock,
Kandinsky6SRAttention with Kandinsky6SRAttnProcessor's __call__ as its forward, Kandinsky6SRTimeEmbeddings,
Kandinsky6SRVisualEmbeddings, Kandinsky6SRModulation, Kandinsky6SRFeedForward, Kandinsky6SROutLayer,
Kandinsky6SRRoPE3D, get_freqs, apply_scale_shift, apply_gate_sum, apply_rotary) with the part it imports:
embeddings.py (get_timestep_embedding): the same module tree, parameter names and shapes, buffers and call
boundaries; the arithmetic line for line. Stand-ins for what torch 1.13 lacks: torch.nn.RMSNorm (eps None: the
dtype's machine epsilon) and dispatch_attention_fn (SDPA's math on [B, L, H, D], default scale, no mask).
nabla_threshold None: the dense self-attention the class offers beside NABLA (NABLA's BlockMask needs torch's flex
attention and 8x8-divisible token grids; it is a sparsity pattern over the same arithmetic).

The constructs it shows: a text-free DiT (no caption stream, no cross-attention): the conditioning is the timestep
MLP (a sinusoid as wide as the model, max_period 10000, [cos, sin]) plus a learned [time_dim] bias that stands for a
folded constant pooled caption; channels-last video latents joined on the last axis with an anchor latent and an
anchor-mask channel ([latents | anchor | mask], 2C+1 channels), patched channels last; 2x2-matrix RoPE (interleaved
pairs) from per-axis angle buffers gathered by positions, h and w angles divided by 2; per-head RMSNorm q/k in f32;
LayerNorm (non-affine, f32) then f32 scale/shift and f32 gated residuals (cast back to the stream's dtype); a
bias-free exact-GELU FFN; SiLU-then-Linear modulation (6 per block, chunked [attention | FFN] then [shift, scale,
gate]) and [shift, scale] at the output; the time MLP, the bias and every modulation kept f32 in a bf16 load.

Pipeline as Kandinsky6SRPipeline (pipeline_kandinsky6_sr.py at 04a043a91b46bb33ab2e72edb45aa4d3d64c7a7f) calls
it for one tile: latents (B, T, H, W, C) joined with a zero anchor and a zero anchor mask (the released checkpoints
are anchor-free), timestep t.expand(B) (sigma*1000 of the flow-matching scheduler), velocity the output as is. (The
pipeline starts from the low-resolution latents mixed with noise; the loop here starts from noise.)

usage: /usr/bin/python3 bench/unseen/replicas/kandinsky6_sr.py OUTDIR
"""
import math
import sys

import torch
from torch import nn

from parts import TorchRMSNorm
from run import capture, get_timestep_embedding, sdpa


def get_parameter_dtype(module):
    return next(module.parameters()).dtype


def get_freqs(dim, max_period=10000.0):
    return torch.exp(-math.log(max_period) * torch.arange(start=0, end=dim, dtype=torch.float32) / dim)


def apply_scale_shift(normed, x, scale, shift):
    if x.ndim > 2 and scale.ndim == 2:
        shape = (scale.shape[0],) + (1,) * (x.ndim - 2) + (scale.shape[-1],)
        scale, shift = scale.reshape(shape), shift.reshape(shape)
    return (normed * (scale.float() + 1.0) + shift.float()).to(dtype=x.dtype)


def apply_gate_sum(x, out, gate):
    if x.ndim > 2 and gate.ndim == 2:
        gate = gate.reshape((gate.shape[0],) + (1,) * (x.ndim - 2) + (gate.shape[-1],))
    return (x.float() + gate.float() * out.float()).to(dtype=x.dtype)


def apply_rotary(x, rope):
    x_ = x.reshape(*x.shape[:-1], -1, 1, 2).float()
    return (rope.float() * x_).sum(dim=-1).reshape(*x.shape).to(dtype=x.dtype)


def dispatch_attention_fn(query, key, value, attn_mask=None):
    """SDPA's math on [B, L, H, D], default scale."""
    assert attn_mask is None
    return sdpa(query.transpose(1, 2), key.transpose(1, 2), value.transpose(1, 2)).transpose(1, 2)


class Kandinsky6SRAttention(nn.Module):
    """With Kandinsky6SRAttnProcessor's __call__ as its forward (sparse_params None: dense)."""

    def __init__(self, num_channels, head_dim):
        super().__init__()
        if num_channels % head_dim:
            raise ValueError("num_channels must be divisible by head_dim")
        self.num_heads = num_channels // head_dim
        self.to_query = nn.Linear(num_channels, num_channels)
        self.to_key = nn.Linear(num_channels, num_channels)
        self.to_value = nn.Linear(num_channels, num_channels)
        self.query_norm = TorchRMSNorm(head_dim)
        self.key_norm = TorchRMSNorm(head_dim)
        self.out_layer = nn.Linear(num_channels, num_channels)

    def forward(self, hidden_states, rotary_emb, sparse_params=None):
        attn = self
        query = attn.to_query(hidden_states).unflatten(-1, (attn.num_heads, -1))
        key = attn.to_key(hidden_states).unflatten(-1, (attn.num_heads, -1))
        value = attn.to_value(hidden_states).unflatten(-1, (attn.num_heads, -1))
        query = attn.query_norm(query.float()).type_as(query)
        key = attn.key_norm(key.float()).type_as(key)
        query = apply_rotary(query, rotary_emb)
        key = apply_rotary(key, rotary_emb)
        assert sparse_params is None
        hidden_states = dispatch_attention_fn(query, key, value, attn_mask=None)
        return attn.out_layer(hidden_states.flatten(2, 3))


class Kandinsky6SRTimeEmbeddings(nn.Module):
    def __init__(self, model_dim, time_dim, max_period=10000.0):
        super().__init__()
        if model_dim % 2:
            raise ValueError("model_dim must be even")
        self.model_dim = model_dim
        self.max_period = max_period
        self.in_layer = nn.Linear(model_dim, time_dim)
        self.activation = nn.SiLU()
        self.out_layer = nn.Linear(time_dim, time_dim)

    def forward(self, timestep):
        embed = get_timestep_embedding(timestep, self.model_dim, flip_sin_to_cos=True, downscale_freq_shift=0,
                                       max_period=self.max_period)
        embed = embed.to(get_parameter_dtype(self.in_layer))
        return self.out_layer(self.activation(self.in_layer(embed)))


class Kandinsky6SRVisualEmbeddings(nn.Module):
    def __init__(self, visual_dim, model_dim, patch_size):
        super().__init__()
        self.patch_size = patch_size
        self.in_layer = nn.Linear(math.prod(patch_size) * visual_dim, model_dim)

    def forward(self, x):
        batch, duration, height, width, channels = x.shape
        p_t, p_h, p_w = self.patch_size
        x = (x.view(batch, duration // p_t, p_t, height // p_h, p_h, width // p_w, p_w, channels)
             .permute(0, 1, 3, 5, 2, 4, 6, 7).flatten(4, 7))
        return self.in_layer(x)


class Kandinsky6SRModulation(nn.Module):
    def __init__(self, time_dim, model_dim, num_params):
        super().__init__()
        self.activation = nn.SiLU()
        self.out_layer = nn.Linear(time_dim, num_params * model_dim)
        nn.init.zeros_(self.out_layer.weight)
        nn.init.zeros_(self.out_layer.bias)

    def forward(self, x):
        return self.out_layer(self.activation(x.to(get_parameter_dtype(self.out_layer))))


class Kandinsky6SRFeedForward(nn.Module):
    def __init__(self, dim, ff_dim):
        super().__init__()
        self.in_layer = nn.Linear(dim, ff_dim, bias=False)
        self.activation = nn.GELU()
        self.out_layer = nn.Linear(ff_dim, dim, bias=False)

    def forward(self, x):
        return self.out_layer(self.activation(self.in_layer(x)))


class Kandinsky6SROutLayer(nn.Module):
    def __init__(self, model_dim, time_dim, visual_dim, patch_size):
        super().__init__()
        self.patch_size = patch_size
        self.modulation = Kandinsky6SRModulation(time_dim, model_dim, 2)
        self.norm = nn.LayerNorm(model_dim, elementwise_affine=False)
        self.out_layer = nn.Linear(model_dim, math.prod(patch_size) * visual_dim)

    def forward(self, visual_embed, time_embed):
        shift, scale = torch.chunk(self.modulation(time_embed), 2, dim=-1)
        condition_shape = (scale.shape[0],) + (1,) * (visual_embed.ndim - 2) + (scale.shape[-1],)
        x = apply_scale_shift(self.norm(visual_embed.float()), visual_embed, scale.reshape(condition_shape),
                              shift.reshape(condition_shape))
        x = self.out_layer(x)
        batch, duration, height, width = x.shape[:4]
        p_t, p_h, p_w = self.patch_size
        return (x.view(batch, duration, height, width, -1, p_t, p_h, p_w).permute(0, 1, 5, 2, 6, 3, 7, 4)
                .flatten(1, 2).flatten(2, 3).flatten(3, 4))


class Kandinsky6SRRoPE3D(nn.Module):
    def __init__(self, axes_dims, max_pos=(128, 128, 128), max_period=10000.0):
        super().__init__()
        self.axes_dims = axes_dims
        self.max_pos = max_pos
        self.max_period = max_period
        for i, (d, mp) in enumerate(zip(axes_dims, max_pos)):
            freq = get_freqs(d // 2, max_period)
            self.register_buffer(f"args_{i}", torch.outer(torch.arange(mp, dtype=freq.dtype), freq),
                                 persistent=False)

    def forward(self, pos, scale_factor=(1.0, 1.0, 1.0)):
        num_frames, height, width = (int(axis_pos.shape[0]) for axis_pos in pos)
        args_t = self.args_0[pos[0]] / scale_factor[0]
        args_h = self.args_1[pos[1]] / scale_factor[1]
        args_w = self.args_2[pos[2]] / scale_factor[2]
        args = torch.cat([args_t.view(num_frames, 1, 1, -1).expand(num_frames, height, width, -1),
                          args_h.view(1, height, 1, -1).expand(num_frames, height, width, -1),
                          args_w.view(1, 1, width, -1).expand(num_frames, height, width, -1)], dim=-1)
        cos, sin = torch.cos(args), torch.sin(args)
        rope = torch.stack([cos, -sin, sin, cos], dim=-1)
        rope = rope.view(*rope.shape[:-1], 2, 2)
        return rope.unsqueeze(-4)


class Kandinsky6SRTransformerBlock(nn.Module):
    def __init__(self, model_dim, time_dim, ff_dim, head_dim):
        super().__init__()
        self.visual_modulation = Kandinsky6SRModulation(time_dim, model_dim, 6)
        self.self_attention_norm = nn.LayerNorm(model_dim, elementwise_affine=False)
        self.self_attention = Kandinsky6SRAttention(model_dim, head_dim)
        self.feed_forward_norm = nn.LayerNorm(model_dim, elementwise_affine=False)
        self.feed_forward = Kandinsky6SRFeedForward(model_dim, ff_dim)

    def forward(self, hidden_states, temb, rotary_emb, sparse_params=None):
        self_attention_params, feed_forward_params = torch.chunk(self.visual_modulation(temb), 2, dim=-1)
        shift, scale, gate = torch.chunk(self_attention_params, 3, dim=-1)
        hidden_states = apply_gate_sum(
            hidden_states,
            self.self_attention(
                apply_scale_shift(self.self_attention_norm(hidden_states.float()), hidden_states, scale, shift),
                rotary_emb, sparse_params),
            gate)
        shift, scale, gate = torch.chunk(feed_forward_params, 3, dim=-1)
        return apply_gate_sum(
            hidden_states,
            self.feed_forward(
                apply_scale_shift(self.feed_forward_norm(hidden_states.float()), hidden_states, scale, shift)),
            gate)


class Kandinsky6SRTransformer3DModel(nn.Module):
    _keep_in_fp32_modules = ["time_embeddings", "pooled_bias", "modulation"]

    def __init__(self, in_visual_dim=64, out_visual_dim=640, time_dim=512, patch_size=(1, 1, 1), model_dim=1792,
                 ff_dim=7168, num_visual_blocks=32, axes_dims=(16, 24, 24), scale_factor=(1.0, 2.0, 2.0),
                 nabla_threshold=0.8, nabla_window=(11, 7, 7),
                 tile_sizes=((512, 512), (512, 768), (768, 512))):
        super().__init__()
        head_dim = sum(axes_dims)
        self.scale_factor = scale_factor
        assert nabla_threshold is None
        self.nabla_threshold = nabla_threshold
        self.time_embeddings = Kandinsky6SRTimeEmbeddings(model_dim, time_dim)
        self.pooled_bias = nn.Parameter(torch.zeros(time_dim))
        self.visual_embeddings = Kandinsky6SRVisualEmbeddings(2 * in_visual_dim + 1, model_dim, patch_size)
        self.visual_rope_embeddings = Kandinsky6SRRoPE3D(axes_dims)
        self.visual_transformer_blocks = nn.ModuleList(
            [Kandinsky6SRTransformerBlock(model_dim, time_dim, ff_dim, head_dim) for _ in range(num_visual_blocks)])
        self.out_layer = Kandinsky6SROutLayer(model_dim, time_dim, out_visual_dim, patch_size)

    def forward(self, hidden_states, timestep, return_dict=True):
        device = hidden_states.device
        temb = self.time_embeddings(timestep) + self.pooled_bias
        visual_embed = self.visual_embeddings(hidden_states)
        visual_shape = visual_embed.shape[1:4]
        visual_rope_pos = tuple(torch.arange(size, device=device) for size in visual_shape)
        visual_rope = self.visual_rope_embeddings(visual_rope_pos, self.scale_factor)
        sparse_params = None
        visual_embed = visual_embed.flatten(1, 3)
        visual_rope = visual_rope.flatten(0, 2)
        for block in self.visual_transformer_blocks:
            visual_embed = block(visual_embed, temb, visual_rope, sparse_params)
        visual_embed = visual_embed.reshape(-1, *visual_shape, visual_embed.shape[-1])
        output = self.out_layer(visual_embed, temb)
        return (output,)


def build():
    # 4 latent channels (9 in with the anchor and its mask), width 32, 2 heads of 16 (RoPE t/h/w 4/6/6), time 24,
    # FFN 64, 2 blocks, patch 1x1x1 as released; out_visual_dim = in_visual_dim (a plain velocity checkpoint).
    return Kandinsky6SRTransformer3DModel(in_visual_dim=4, out_visual_dim=4, time_dim=24, patch_size=(1, 1, 1),
                                          model_dim=32, ff_dim=64, num_visual_blocks=2, axes_dims=(4, 6, 6),
                                          scale_factor=(1.0, 2.0, 2.0), nabla_threshold=None)


def inputs(g):
    return {"noise": torch.randn((1, 2, 4, 4, 4), generator=g)}


def call(model, x, sigma, c):
    anchor = torch.zeros_like(x)
    anchor_mask = torch.zeros((*x.shape[:-1], 1), dtype=x.dtype, device=x.device)
    latent_model_input = torch.cat([x, anchor, anchor_mask], dim=-1)
    t = torch.tensor(sigma * 1000, dtype=torch.float32, device=x.device)
    return model(hidden_states=latent_model_input, timestep=t.expand(x.shape[0]), return_dict=False)[0]


PRODUCER = dict(
    library_source="replica of huggingface/diffusers transformer_kandinsky6_sr.py@002f4fb73401 and the part it "
                   "imports (torch 1.13)",
    timestep="sigma*1000 float32, t.expand(B) (Kandinsky6SRPipeline, flow-matching scheduler)",
    velocity="model output as is (flow prediction), not negated",
    note="Kandinsky 6 video SR DiT, dense attention, 2 blocks, no text: temb = time MLP of a model-wide [cos, sin] "
         "sinusoid + a learned bias; channels-last latents joined with a zero anchor and a zero mask channel, "
         "patched channels last (1x1x1); 2x2-matrix RoPE from gathered angle buffers, h/w angles halved; per-head "
         "RMSNorm q/k (default eps) in f32; f32 LayerNorm + f32 scale/shift + f32 gated residuals; bias-free exact "
         "GELU FFN; SiLU+Linear modulation, 6 per block and 2 at the output; time MLP, bias and modulation f32 in "
         "bf16")

if __name__ == "__main__":
    capture("kandinsky6_sr", build, inputs, call, sys.argv[1], PRODUCER)
