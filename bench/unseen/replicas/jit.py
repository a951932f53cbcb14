"""JiT ("Just image Transformers", a class-conditional pixel-space DiT predicting the clean image), reimplemented for
torch 1.13 (no diffusers here), captured small in f32 on CPU.

Follows huggingface/diffusers src/diffusers/models/transformers/jit_transformer_2d.py at
4dbb67ff17f401c4debba1b6eb0f93c785712991 (JiTTransformer2DModel, JiTBlock, JiTAttention with JiTAttnProcessor's
__call__, JiTSwiGLUFFN, JiTRotaryEmbedding, JiTPatchEmbed, JiTTimestepEmbedder, JiTLabelEmbedder, the numpy
2-D sin-cos table) with the part it imports: normalization.py (RMSNorm without a weight, elementwise_affine False):
the same module tree, parameter names and shapes, and call boundaries; the arithmetic line for line. Stand-in for
what torch 1.13 lacks: dispatch_attention_fn (SDPA's math on [B, L, H, D], default scale, no mask).

The constructs it shows: tokens joined in the middle of the network (before block in_context_start, the class
embedding repeated in_context_len times plus a learned table, put before the image rows) and cut off after the
last block; RoPE applied by a module of its own on [B, L, H, D] with interleaved pairs, its tables buffers made at
init from a 2-D grid (h then w frequencies, each repeated twice), a second module with cos 1 / sin 0 rows for the
joined tokens used from that block on; a fixed 2-D sin-cos position table (a buffer, not a parameter) added to the
patches; a bottleneck patch embedding of two convolutions (patch-size kernel, then 1×1); weightless RMS norms;
adaLN modulation from SiLU(t_emb + y_emb) with (shift, scale, gate) × 2; a SwiGLU FFN whose w12 is chunked
[SiLU part | linear part]; fused qkv read as [B, L, 3, H, D]; the timestep 1 − σ without a ×1000.

Pipeline as JiTPipeline calls it without guidance (one call per step): timestep = (1 − σ) in the model's dtype,
the class label, and the model's clean-image prediction x̂ turned into the velocity
v = (x − x̂)/clamp(σ, 0.05) (σ ≥ 0.4 here, so the clamp does not act); the shared loop keeps x in the run's dtype
(the pipeline keeps its sample in f32 and casts the model's input).

usage: /usr/bin/python3 bench/unseen/replicas/jit.py OUTDIR [--small]
"""
import math
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from run import capture, sdpa


class RMSNorm(nn.Module):
    """diffusers normalization.RMSNorm(dim, eps) with elementwise_affine False: no weight."""

    def __init__(self, dim, eps, elementwise_affine=False):
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


def broadcat(tensors, dim=-1):
    num_tensors = len(tensors)
    shape_lens = {len(t.shape) for t in tensors}
    if len(shape_lens) != 1:
        raise ValueError("tensors must all have the same number of dimensions")
    shape_len = list(shape_lens)[0]
    dim = (dim + shape_len) if dim < 0 else dim
    dims = list(zip(*(list(t.shape) for t in tensors)))
    expandable_dims = [(i, val) for i, val in enumerate(dims) if i != dim]
    if not all(len(set(t[1])) <= 2 for t in expandable_dims):
        raise ValueError("invalid dimensions for broadcastable concatenation")
    max_dims = [(t[0], max(t[1])) for t in expandable_dims]
    expanded_dims = [(t[0], (t[1],) * num_tensors) for t in max_dims]
    expanded_dims.insert(dim, (dim, dims[dim]))
    expandable_shapes = list(zip(*(t[1] for t in expanded_dims)))
    tensors = [t[0].expand(*t[1]) for t in zip(tensors, expandable_shapes)]
    return torch.cat(tensors, dim=dim)


def rotate_half(x):
    x = x.view(*x.shape[:-1], x.shape[-1] // 2, 2)
    x1, x2 = x.unbind(dim=-1)
    x = torch.stack((-x2, x1), dim=-1)
    return x.view(*x.shape[:-2], -1)


class JiTRotaryEmbedding(nn.Module):
    def __init__(self, dim, pt_seq_len=16, ft_seq_len=None, theta=10000, num_cls_token=0):
        super().__init__()
        freqs = 1.0 / (theta ** (torch.arange(0, dim, 2)[: (dim // 2)].float() / dim))
        if ft_seq_len is None:
            ft_seq_len = pt_seq_len
        t = torch.arange(ft_seq_len) / ft_seq_len * pt_seq_len
        freqs = torch.einsum("..., f -> ... f", t, freqs)
        freqs = freqs.repeat_interleave(2, dim=-1)
        freqs = broadcat((freqs[:, None, :], freqs[None, :, :]), dim=-1)
        if num_cls_token > 0:
            freqs_flat = freqs.view(-1, freqs.shape[-1])
            cos_img = freqs_flat.cos()
            sin_img = freqs_flat.sin()
            _, D = cos_img.shape
            cos_pad = torch.ones(num_cls_token, D, dtype=cos_img.dtype)
            sin_pad = torch.zeros(num_cls_token, D, dtype=sin_img.dtype)
            self.register_buffer("freqs_cos", torch.cat([cos_pad, cos_img], dim=0), persistent=False)
            self.register_buffer("freqs_sin", torch.cat([sin_pad, sin_img], dim=0), persistent=False)
        else:
            self.register_buffer("freqs_cos", freqs.cos().view(-1, freqs.shape[-1]), persistent=False)
            self.register_buffer("freqs_sin", freqs.sin().view(-1, freqs.shape[-1]), persistent=False)

    def forward(self, t):
        seq_len = t.shape[1]
        freqs_cos = self.freqs_cos[:seq_len].to(t.dtype)
        freqs_sin = self.freqs_sin[:seq_len].to(t.dtype)
        return t * freqs_cos[:, None, :] + rotate_half(t) * freqs_sin[:, None, :]


def modulate(x, shift, scale):
    return x * (1 + scale.unsqueeze(1)) + shift.unsqueeze(1)


class JiTPatchEmbed(nn.Module):
    def __init__(self, img_size=224, patch_size=16, in_chans=3, pca_dim=768, embed_dim=768, bias=True):
        super().__init__()
        img_size = (img_size, img_size)
        patch_size = (patch_size, patch_size)
        self.img_size = img_size
        self.patch_size = patch_size
        self.num_patches = (img_size[1] // patch_size[1]) * (img_size[0] // patch_size[0])
        self.proj1 = nn.Conv2d(in_chans, pca_dim, kernel_size=patch_size, stride=patch_size, bias=False)
        self.proj2 = nn.Conv2d(pca_dim, embed_dim, kernel_size=1, stride=1, bias=bias)

    def forward(self, x):
        return self.proj2(self.proj1(x)).flatten(2).transpose(1, 2)


class JiTTimestepEmbedder(nn.Module):
    def __init__(self, hidden_size, frequency_embedding_size=256):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(frequency_embedding_size, hidden_size, bias=True), nn.SiLU(),
                                 nn.Linear(hidden_size, hidden_size, bias=True))
        self.frequency_embedding_size = frequency_embedding_size

    @staticmethod
    def timestep_embedding(t, dim, max_period=10000):
        half = dim // 2
        freqs = torch.exp(-math.log(max_period) * torch.arange(start=0, end=half, dtype=torch.float32) / half).to(
            device=t.device)
        args = t[:, None].float() * freqs[None]
        embedding = torch.cat([torch.cos(args), torch.sin(args)], dim=-1)
        if dim % 2:
            embedding = torch.cat([embedding, torch.zeros_like(embedding[:, :1])], dim=-1)
        return embedding

    def forward(self, t, dtype=None):
        t_freq = self.timestep_embedding(t, self.frequency_embedding_size)
        if dtype is not None:
            t_freq = t_freq.to(dtype=dtype)
        return self.mlp(t_freq)


class JiTLabelEmbedder(nn.Module):
    def __init__(self, num_classes, hidden_size):
        super().__init__()
        self.embedding_table = nn.Embedding(num_classes + 1, hidden_size)
        self.num_classes = num_classes

    def forward(self, labels):
        return self.embedding_table(labels)


class JiTAttention(nn.Module):
    def __init__(self, dim, num_heads=8, qkv_bias=True, qk_norm=True, attn_drop=0.0, proj_drop=0.0, eps=1e-6):
        super().__init__()
        self.num_heads = num_heads
        self.heads = num_heads
        self.head_dim = dim // num_heads
        self.attn_drop = attn_drop
        self.q_norm = RMSNorm(self.head_dim, eps=eps) if qk_norm else nn.Identity()
        self.k_norm = RMSNorm(self.head_dim, eps=eps) if qk_norm else nn.Identity()
        self.qkv = nn.Linear(dim, dim * 3, bias=qkv_bias)
        self.proj = nn.Linear(dim, dim)
        self.proj_drop = nn.Dropout(proj_drop)

    def forward(self, x, rope=None):
        # JiTAttnProcessor.__call__
        hidden_states = x
        batch_size, seq_len, _ = hidden_states.shape
        qkv = self.qkv(hidden_states).reshape(batch_size, seq_len, 3, self.num_heads, self.head_dim)
        query, key, value = qkv.unbind(2)
        query = self.q_norm(query)
        key = self.k_norm(key)
        if rope is not None:
            query = rope(query)
            key = rope(key)
        hidden_states = sdpa(query.transpose(1, 2), key.transpose(1, 2), value.transpose(1, 2)).transpose(1, 2)
        hidden_states = hidden_states.flatten(2, 3)
        hidden_states = self.proj(hidden_states)
        return self.proj_drop(hidden_states)


class JiTSwiGLUFFN(nn.Module):
    def __init__(self, dim, hidden_dim, drop=0.0, bias=True):
        super().__init__()
        hidden_dim = int(hidden_dim * 2 / 3)
        self.w12 = nn.Linear(dim, 2 * hidden_dim, bias=bias)
        self.w3 = nn.Linear(hidden_dim, dim, bias=bias)
        self.ffn_dropout = nn.Dropout(drop)

    def forward(self, x):
        x12 = self.w12(x)
        x1, x2 = x12.chunk(2, dim=-1)
        hidden = F.silu(x1) * x2
        return self.w3(self.ffn_dropout(hidden))


class JiTBlock(nn.Module):
    def __init__(self, hidden_size, num_heads, mlp_ratio=4.0, attn_drop=0.0, proj_drop=0.0, eps=1e-6):
        super().__init__()
        self.norm1 = RMSNorm(hidden_size, eps=eps)
        self.attn = JiTAttention(hidden_size, num_heads=num_heads, qkv_bias=True, qk_norm=True, attn_drop=attn_drop,
                                 proj_drop=proj_drop, eps=eps)
        self.norm2 = RMSNorm(hidden_size, eps=eps)
        mlp_hidden_dim = int(hidden_size * mlp_ratio)
        self.mlp = JiTSwiGLUFFN(hidden_size, mlp_hidden_dim, drop=proj_drop)
        self.act = nn.SiLU()
        self.adaLN_modulation = nn.Linear(hidden_size, 6 * hidden_size, bias=True)

    def forward(self, x, c, feat_rope=None):
        c = self.act(c)
        shift_msa, scale_msa, gate_msa, shift_mlp, scale_mlp, gate_mlp = self.adaLN_modulation(c).chunk(6, dim=-1)
        norm_x = self.norm1(x)
        modulated_x = modulate(norm_x, shift_msa, scale_msa)
        attn_out = self.attn(modulated_x, rope=feat_rope)
        x = x + gate_msa.unsqueeze(1) * attn_out
        norm_x = self.norm2(x)
        modulated_x = modulate(norm_x, shift_mlp, scale_mlp)
        mlp_out = self.mlp(modulated_x)
        x = x + gate_mlp.unsqueeze(1) * mlp_out
        return x


def get_2d_sincos_pos_embed(embed_dim, grid_size, cls_token=False, extra_tokens=0):
    grid_h = np.arange(grid_size, dtype=np.float32)
    grid_w = np.arange(grid_size, dtype=np.float32)
    grid = np.meshgrid(grid_w, grid_h)
    grid = np.stack(grid, axis=0)
    grid = grid.reshape([2, 1, grid_size, grid_size])
    pos_embed = get_2d_sincos_pos_embed_from_grid(embed_dim, grid)
    if cls_token and extra_tokens > 0:
        pos_embed = np.concatenate([np.zeros([extra_tokens, embed_dim]), pos_embed], axis=0)
    return pos_embed


def get_2d_sincos_pos_embed_from_grid(embed_dim, grid):
    emb_h = get_1d_sincos_pos_embed_from_grid(embed_dim // 2, grid[0])
    emb_w = get_1d_sincos_pos_embed_from_grid(embed_dim // 2, grid[1])
    return np.concatenate([emb_h, emb_w], axis=1)


def get_1d_sincos_pos_embed_from_grid(embed_dim, pos):
    omega = np.arange(embed_dim // 2, dtype=np.float64)
    omega /= embed_dim / 2.0
    omega = 1.0 / 10000 ** omega
    pos = pos.reshape(-1)
    out = np.einsum("m,d->md", pos, omega)
    emb_sin = np.sin(out)
    emb_cos = np.cos(out)
    return np.concatenate([emb_sin, emb_cos], axis=1)


class JiTTransformer2DModel(nn.Module):
    _skip_layerwise_casting_patterns = ["pos_embed", "norm"]

    def __init__(self, sample_size=256, patch_size=16, in_channels=3, hidden_size=768, num_layers=12,
                 num_attention_heads=12, mlp_ratio=4.0, attention_dropout=0.0, dropout=0.0, num_classes=1000,
                 bottleneck_dim=128, in_context_len=32, in_context_start=4, norm_eps=1e-6):
        super().__init__()
        self.sample_size = sample_size
        self.patch_size = patch_size
        self.in_channels = in_channels
        self.out_channels = in_channels
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.num_attention_heads = num_attention_heads
        self.in_context_len = in_context_len
        self.in_context_start = in_context_start
        self.norm_eps = norm_eps
        self.t_embedder = JiTTimestepEmbedder(hidden_size)
        self.y_embedder = JiTLabelEmbedder(num_classes, hidden_size)
        self.x_embedder = JiTPatchEmbed(img_size=sample_size, patch_size=patch_size, in_chans=in_channels,
                                        pca_dim=bottleneck_dim, embed_dim=hidden_size, bias=True)
        num_patches = self.x_embedder.num_patches
        pos_embed = get_2d_sincos_pos_embed(hidden_size, int(num_patches ** 0.5))
        self.register_buffer("pos_embed", torch.from_numpy(pos_embed).float().unsqueeze(0), persistent=True)
        if self.in_context_len > 0:
            self.in_context_posemb = nn.Parameter(torch.zeros(1, self.in_context_len, hidden_size))
        half_head_dim = hidden_size // num_attention_heads // 2
        hw_seq_len = sample_size // patch_size
        self.feat_rope = JiTRotaryEmbedding(dim=half_head_dim, pt_seq_len=hw_seq_len, num_cls_token=0)
        self.feat_rope_incontext = JiTRotaryEmbedding(dim=half_head_dim, pt_seq_len=hw_seq_len,
                                                      num_cls_token=self.in_context_len)
        self.blocks = nn.ModuleList([
            JiTBlock(hidden_size, num_attention_heads, mlp_ratio=mlp_ratio,
                     attn_drop=attention_dropout if (num_layers // 4 * 3 > i >= num_layers // 4) else 0.0,
                     proj_drop=dropout if (num_layers // 4 * 3 > i >= num_layers // 4) else 0.0, eps=norm_eps)
            for i in range(num_layers)])
        self.norm_final = RMSNorm(hidden_size, eps=norm_eps)
        self.linear_final = nn.Linear(hidden_size, patch_size * patch_size * self.out_channels, bias=True)
        self.act_final = nn.SiLU()
        self.adaLN_modulation_final = nn.Linear(hidden_size, 2 * hidden_size, bias=True)

    def forward(self, hidden_states, timestep, class_labels, return_dict=True):
        t_emb = self.t_embedder(timestep, dtype=hidden_states.dtype)
        y_emb = self.y_embedder(class_labels)
        y_emb = y_emb.to(dtype=hidden_states.dtype)
        c = t_emb + y_emb
        x = self.x_embedder(hidden_states)
        x = x + self.pos_embed.to(x.dtype)
        for i, block in enumerate(self.blocks):
            if self.in_context_len > 0 and i == self.in_context_start:
                in_context_tokens = y_emb.unsqueeze(1).repeat(1, self.in_context_len, 1)
                in_context_tokens = in_context_tokens + self.in_context_posemb.to(in_context_tokens.dtype)
                x = torch.cat([in_context_tokens, x], dim=1)
            rope = self.feat_rope if i < self.in_context_start else self.feat_rope_incontext
            x = block(x, c, feat_rope=rope)
        if self.in_context_len > 0:
            x = x[:, self.in_context_len:]
        c = self.act_final(c)
        shift, scale = self.adaLN_modulation_final(c).chunk(2, dim=1)
        x = modulate(self.norm_final(x), shift, scale)
        x = self.linear_final(x)
        h = w = int(x.shape[1] ** 0.5)
        x = x.reshape(shape=(x.shape[0], h, w, self.patch_size, self.patch_size, self.out_channels))
        x = torch.einsum("nhwpqc->nchpwq", x)
        output = x.reshape(shape=(x.shape[0], self.out_channels, h * self.patch_size, w * self.patch_size))
        return (output,)


SMALL = "--small" in sys.argv  # two blocks: the fixtures/unseen trace


def build():
    # 16×16 pixels in 4×4 patches (16 tokens), hidden 32 in 2 heads of 16 (RoPE 8 + 8), 3 blocks (2 with --small),
    # 4 in-context tokens joined before block 1, bottleneck 8, SwiGLU 85 wide, 10 classes.
    return JiTTransformer2DModel(sample_size=16, patch_size=4, in_channels=3, hidden_size=32,
                                 num_layers=2 if SMALL else 3,
                                 num_attention_heads=2, mlp_ratio=4.0, num_classes=10, bottleneck_dim=8,
                                 in_context_len=4, in_context_start=1, norm_eps=1e-6)


def inputs(g):
    return {"class_labels": torch.tensor([3]), "noise": torch.randn((1, 3, 16, 16), generator=g)}


def call(model, x, sigma, c):
    sig = torch.tensor(sigma, dtype=torch.float32)
    timestep = (1.0 - sig).to(x.dtype).reshape(1).expand(x.shape[0])
    x_pred = model(x, timestep=timestep, class_labels=c["class_labels"], return_dict=False)[0]
    return (x - x_pred.float()) / torch.clamp(sig, min=0.05)


PRODUCER = dict(
    library_source="replica of huggingface/diffusers jit_transformer_2d.py@4dbb67ff17f4 and the parts it imports "
                   "(torch 1.13)",
    timestep="1 - sigma (in the model's dtype, not scaled)",
    velocity="(x - x_pred) / clamp(sigma, 0.05): the model predicts the clean image (JiTPipeline)",
    note="JiT, 3 blocks: class embedding + timestep embedding → SiLU → adaLN (shift, scale, gate) × 2; weightless "
         "RMS norms incl. per-head q/k; fused qkv; interleaved 2-D RoPE applied by a module (tables are buffers); "
         "4 in-context tokens (class embedding + learned table) joined before block 1 with a RoPE table whose "
         "first 4 rows are cos 1 / sin 0, cut off after the last block; fixed 2-D sin-cos positions (a buffer) "
         "added to a two-conv bottleneck patch embedding; SwiGLU [silu | linear] halves of one Linear; "
         "final adaLN (shift, scale); einsum unpatchify")

if __name__ == "__main__":
    capture("jit", build, inputs, call, sys.argv[1], PRODUCER)
