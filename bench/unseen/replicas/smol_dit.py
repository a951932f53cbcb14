"""SmolDiT (a small HunyuanDiT-derived DiT), reimplemented for torch 1.13 (no diffusers here), captured small in f32
on CPU.

Follows huggingface/diffusers src/diffusers/models/transformers/smol_dit_transformer_2d.py at
7312ae77c1774cd7e6a6bc972fef0b398595cb91 (SmolDiTAttention, SmolDiTBlock, SmolDiT2DModel) with the parts it
imports: hunyuan_transformer_2d.py (AdaLayerNormShift), attention.py (FeedForward "gelu-approximate", GELU),
embeddings.py (PatchEmbed with pos_embed_type None, Timesteps, TimestepEmbedding, PixArtAlphaTextProjection with
out_features and act_fn "silu_fp32", FP32SiLU) and normalization.py (AdaLayerNormContinuous, FP32LayerNorm): the
same module tree, parameter names and shapes, and call boundaries; the arithmetic line for line. Stand-in for what
torch 1.13 lacks: F.scaled_dot_product_attention (its math path, scale dim_head**-0.5, no mask). The block's debug
print is left out.

The constructs it shows: shift-only modulation (FP32 LayerNorm(x) + Linear(silu(temb in f32))), no
scale and no gate; a cross-attention under a plain FP32 LayerNorm, un-modulated; a feed-forward added to the
stream with no norm before it at all; grouped-query attention with k/v repeated per head
(unsqueeze/repeat/flatten: kv head j serves query heads j·n_rep … j·n_rep + n_rep − 1), also in the
cross-attention; bias-free q/k/v/out and feed-forward; the text projected by a 4x-wide SiLU-in-f32 MLP; the final
AdaLayerNormContinuous fed temb cast to f32 (its SiLU in f32, then cast back to the stream's dtype); an einsum
unpatchify. image_rotary_emb stays None (the model's default: upstream's apply_rotary_emb on [B, S, H, D] with
sequence_dim 2 broadcasts only when S equals the head count, and no pipeline passes one).

Pipeline (none upstream): one call per step on [B, C, H, W] latents, timestep = sigma·1000 (float32), the caption
[B, 6, 16], velocity the output as is.

usage: /usr/bin/python3 bench/unseen/replicas/smol_dit.py OUTDIR
"""
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

from parts import GELU, TimestepEmbedding, Timesteps
from run import capture, sdpa


class FP32LayerNorm(nn.LayerNorm):
    def forward(self, inputs):
        origin_dtype = inputs.dtype
        return F.layer_norm(inputs.float(), self.normalized_shape,
                            self.weight.float() if self.weight is not None else None,
                            self.bias.float() if self.bias is not None else None, self.eps).to(origin_dtype)


class FP32SiLU(nn.Module):
    def forward(self, inputs):
        return F.silu(inputs.float(), inplace=False).to(inputs.dtype)


class PixArtAlphaTextProjection(nn.Module):
    def __init__(self, in_features, hidden_size, out_features=None, act_fn="gelu_tanh"):
        super().__init__()
        if out_features is None:
            out_features = hidden_size
        self.linear_1 = nn.Linear(in_features, hidden_size, bias=True)
        if act_fn == "silu_fp32":
            self.act_1 = FP32SiLU()
        else:
            raise ValueError(act_fn)
        self.linear_2 = nn.Linear(hidden_size, out_features, bias=True)

    def forward(self, caption):
        hidden_states = self.linear_1(caption)
        hidden_states = self.act_1(hidden_states)
        return self.linear_2(hidden_states)


class PatchEmbed(nn.Module):
    """embeddings.PatchEmbed(height, width, in_channels, embed_dim, patch_size, pos_embed_type=None): no layer
    norm, no position table."""

    def __init__(self, height=224, width=224, patch_size=16, in_channels=3, embed_dim=768, bias=True):
        super().__init__()
        self.flatten = True
        self.layer_norm = False
        self.pos_embed_max_size = None
        self.proj = nn.Conv2d(in_channels, embed_dim, kernel_size=(patch_size, patch_size), stride=patch_size,
                              bias=bias)
        self.patch_size = patch_size
        self.height, self.width = height // patch_size, width // patch_size
        self.pos_embed = None

    def forward(self, latent):
        latent = self.proj(latent)
        if self.flatten:
            latent = latent.flatten(2).transpose(1, 2)  # BCHW -> BNC
        return latent.to(latent.dtype)


class AdaLayerNormShift(nn.Module):
    def __init__(self, embedding_dim, elementwise_affine=True, eps=1e-6):
        super().__init__()
        self.silu = nn.SiLU()
        self.linear = nn.Linear(embedding_dim, embedding_dim)
        self.norm = FP32LayerNorm(embedding_dim, elementwise_affine=elementwise_affine, eps=eps)

    def forward(self, x, emb):
        shift = self.linear(self.silu(emb.to(torch.float32)).to(emb.dtype))
        x = self.norm(x) + shift.unsqueeze(dim=1)
        return x


class AdaLayerNormContinuous(nn.Module):
    def __init__(self, embedding_dim, conditioning_embedding_dim, elementwise_affine=True, eps=1e-5, bias=True):
        super().__init__()
        self.silu = nn.SiLU()
        self.linear = nn.Linear(conditioning_embedding_dim, embedding_dim * 2, bias=bias)
        self.norm = nn.LayerNorm(embedding_dim, eps, elementwise_affine)

    def forward(self, x, conditioning_embedding):
        emb = self.linear(self.silu(conditioning_embedding).to(x.dtype))
        scale, shift = torch.chunk(emb, 2, dim=1)
        return self.norm(x) * (1 + scale)[:, None, :] + shift[:, None, :]


class FeedForward(nn.Module):
    """attention.FeedForward(dim, activation_fn="gelu-approximate", inner_dim=..., bias=False)."""

    def __init__(self, dim, inner_dim, bias=True):
        super().__init__()
        self.net = nn.ModuleList([GELU(dim, inner_dim, approximate="tanh", bias=bias), nn.Dropout(0.0),
                                  nn.Linear(inner_dim, dim, bias=bias)])

    def forward(self, hidden_states):
        for module in self.net:
            hidden_states = module(hidden_states)
        return hidden_states


class SmolDiTAttention(nn.Module):
    def __init__(self, query_dim, cross_attention_dim, dim_head, num_heads, kv_heads):
        super().__init__()
        self.inner_dim = dim_head * num_heads
        self.inner_kv_dim = self.inner_dim if kv_heads is None else dim_head * kv_heads
        self.query_dim = query_dim
        self.num_heads = num_heads
        self.cross_attention_dim = cross_attention_dim if cross_attention_dim is not None else query_dim
        self.is_cross_attention = cross_attention_dim is not None
        self.scale = dim_head ** -0.5
        self.to_q = nn.Linear(query_dim, self.inner_dim, bias=False)
        self.to_k = nn.Linear(self.cross_attention_dim, self.inner_kv_dim, bias=False)
        self.to_v = nn.Linear(self.cross_attention_dim, self.inner_kv_dim, bias=False)
        self.to_out = nn.Linear(self.inner_dim, query_dim, bias=False)

    def forward(self, hidden_states, encoder_hidden_states=None, attention_mask=None, image_rotary_emb=None):
        batch_size, sequence_length, _ = hidden_states.shape
        encoder_hidden_states = hidden_states if encoder_hidden_states is None else encoder_hidden_states
        if attention_mask is not None:
            raise NotImplementedError("no mask in this replica")
        if image_rotary_emb is not None:
            raise NotImplementedError("no RoPE in this replica (see the docstring)")
        query = self.to_q(hidden_states)
        key = self.to_k(encoder_hidden_states)
        value = self.to_v(encoder_hidden_states)
        query_dim = query.shape[-1]
        inner_dim = key.shape[-1]
        head_dim = query_dim // self.num_heads
        dtype = query.dtype
        kv_heads = inner_dim // head_dim
        query = query.view(batch_size, -1, self.num_heads, head_dim)
        key = key.view(batch_size, -1, kv_heads, head_dim)
        value = value.view(batch_size, -1, kv_heads, head_dim)
        query, key = query.to(dtype), key.to(dtype)
        n_rep = self.num_heads // kv_heads
        if n_rep >= 1:
            key = key.unsqueeze(3).repeat(1, 1, 1, n_rep, 1).flatten(2, 3)
            value = value.unsqueeze(3).repeat(1, 1, 1, n_rep, 1).flatten(2, 3)
        query = query.transpose(1, 2)
        key = key.transpose(1, 2)
        value = value.transpose(1, 2)
        hidden_states = sdpa(query, key, value, mask=attention_mask, scale=self.scale)
        hidden_states = hidden_states.transpose(1, 2).reshape(batch_size, -1, self.num_heads * head_dim)
        hidden_states = hidden_states.to(query.dtype)
        return self.to_out(hidden_states)


class SmolDiTBlock(nn.Module):
    def __init__(self, dim, num_attention_heads, num_kv_heads, ff_inner_dim, cross_attention_dim=1024):
        super().__init__()
        self.norm1 = AdaLayerNormShift(dim, elementwise_affine=True, eps=1e-6)
        self.attn1 = SmolDiTAttention(query_dim=dim, cross_attention_dim=None, dim_head=dim // num_attention_heads,
                                      num_heads=num_attention_heads, kv_heads=num_kv_heads)
        self.norm2 = FP32LayerNorm(dim, eps=1e-6, elementwise_affine=True)
        self.attn2 = SmolDiTAttention(query_dim=dim, cross_attention_dim=cross_attention_dim,
                                      dim_head=dim // num_attention_heads, num_heads=num_attention_heads,
                                      kv_heads=num_kv_heads)
        self.ff = FeedForward(dim, inner_dim=ff_inner_dim, bias=False)

    def forward(self, hidden_states, encoder_hidden_states=None, temb=None, image_rotary_emb=None):
        norm_hidden_states = self.norm1(hidden_states, temb)
        attn_output = self.attn1(norm_hidden_states, image_rotary_emb=image_rotary_emb)
        hidden_states = hidden_states + attn_output
        hidden_states = hidden_states + self.attn2(self.norm2(hidden_states),
                                                   encoder_hidden_states=encoder_hidden_states,
                                                   image_rotary_emb=image_rotary_emb)
        hidden_states = hidden_states + self.ff(hidden_states)
        return hidden_states


class SmolDiT2DModel(nn.Module):
    def __init__(self, sample_size=128, patch_size=2, num_attention_heads=16, num_kv_heads=8, attention_head_dim=88,
                 in_channels=4, out_channels=4, num_layers=28, mlp_ratio=4.0, cross_attention_dim=1024):
        super().__init__()
        self.inner_dim = num_attention_heads * attention_head_dim
        self.time_proj = Timesteps(num_channels=256, flip_sin_to_cos=True, downscale_freq_shift=0)
        self.timestep_embedder = TimestepEmbedding(in_channels=256, time_embed_dim=self.inner_dim)
        self.text_embedder = PixArtAlphaTextProjection(in_features=cross_attention_dim,
                                                       hidden_size=cross_attention_dim * 4,
                                                       out_features=cross_attention_dim, act_fn="silu_fp32")
        self.pos_embed = PatchEmbed(height=sample_size, width=sample_size, in_channels=in_channels,
                                    embed_dim=self.inner_dim, patch_size=patch_size)
        self.blocks = nn.ModuleList([
            SmolDiTBlock(dim=self.inner_dim, num_attention_heads=num_attention_heads, num_kv_heads=num_kv_heads,
                         ff_inner_dim=int(self.inner_dim * mlp_ratio), cross_attention_dim=cross_attention_dim)
            for _ in range(num_layers)])
        self.out_channels = out_channels
        self.norm_out = AdaLayerNormContinuous(self.inner_dim, self.inner_dim, elementwise_affine=False, eps=1e-6)
        self.proj_out = nn.Linear(self.inner_dim, patch_size * patch_size * out_channels)

    def forward(self, hidden_states, timestep, encoder_hidden_states=None, image_rotary_emb=None, return_dict=True):
        height, width = hidden_states.shape[-2:]
        hidden_dtype = hidden_states.dtype
        hidden_states = self.pos_embed(hidden_states)
        timesteps_proj = self.time_proj(timestep)
        temb = self.timestep_embedder(timesteps_proj.to(dtype=hidden_dtype))
        batch_size, sequence_length, _ = encoder_hidden_states.shape
        encoder_hidden_states = self.text_embedder(encoder_hidden_states.view(-1, encoder_hidden_states.shape[-1]))
        encoder_hidden_states = encoder_hidden_states.view(batch_size, sequence_length, -1)
        for _, block in enumerate(self.blocks):
            hidden_states = block(hidden_states=hidden_states, temb=temb, encoder_hidden_states=encoder_hidden_states,
                                  image_rotary_emb=image_rotary_emb)
        hidden_states = self.norm_out(hidden_states, temb.to(torch.float32))
        hidden_states = self.proj_out(hidden_states)
        patch_size = self.pos_embed.patch_size
        height = height // patch_size
        width = width // patch_size
        hidden_states = hidden_states.reshape(
            shape=(hidden_states.shape[0], height, width, patch_size, patch_size, self.out_channels))
        hidden_states = torch.einsum("nhwpqc->nchpwq", hidden_states)
        output = hidden_states.reshape(
            shape=(hidden_states.shape[0], self.out_channels, height * patch_size, width * patch_size))
        return (output,)


def build():
    # 4 query heads of 8 over 2 kv heads, 2 blocks, caption 16 wide (its MLP 64 wide), 4 latent channels, patch 2.
    return SmolDiT2DModel(sample_size=8, patch_size=2, num_attention_heads=4, num_kv_heads=2, attention_head_dim=8,
                          in_channels=4, out_channels=4, num_layers=2, mlp_ratio=4.0, cross_attention_dim=16)


def inputs(g):
    return {"encoder_hidden_states": torch.randn((1, 6, 16), generator=g),
            "noise": torch.randn((1, 4, 8, 8), generator=g)}


def call(model, x, sigma, c):
    t = torch.tensor([sigma * 1000], dtype=torch.float32).expand(x.shape[0])
    return model(x, t, encoder_hidden_states=c["encoder_hidden_states"], return_dict=False)[0]


PRODUCER = dict(
    library_source="replica of huggingface/diffusers smol_dit_transformer_2d.py@7312ae77c177 and the parts it "
                   "imports (torch 1.13)",
    timestep="sigma*1000 (float32)",
    velocity="model output as is (flow prediction), not negated",
    note="SmolDiT, 2 blocks: shift-only modulation (FP32 LayerNorm + Linear(silu(temb f32))), no scale, no gates; "
         "an un-modulated FP32-LayerNorm cross-attention; a feed-forward with no norm before it; GQA (4 q heads "
         "over 2 kv heads, k/v repeated per head) in both attentions; bias-free attention and FFN; caption MLP "
         "with SiLU in f32 and a 4x-wide hidden; final AdaLayerNormContinuous on temb cast to f32; conv patch "
         "embed, einsum unpatchify; no RoPE, no mask")

if __name__ == "__main__":
    capture("smol_dit", build, inputs, call, sys.argv[1], PRODUCER)
