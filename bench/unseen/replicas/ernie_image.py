"""ERNIE-Image DiT, reimplemented for torch 1.13 (no diffusers here), captured small in f32 on CPU.

Follows huggingface/diffusers src/diffusers/models/transformers/transformer_ernie_image.py at
76414aa97a7e64cbd4e35f7652634c64ca38da55 (ErnieImageTransformer2DModel, ErnieImageSharedAdaLNBlock,
ErnieImageAttention with ErnieImageSingleStreamAttnProcessor's __call__ as its forward, ErnieImageFeedForward,
ErnieImageAdaLNContinuous, ErnieImagePatchEmbedDynamic, ErnieImageEmbedND3, rope) with the parts it imports:
embeddings.py (Timesteps, TimestepEmbedding) and normalization.py (RMSNorm): the same module tree, parameter names and
shapes, and call boundaries; the arithmetic line for line. Stand-ins for what torch 1.13 lacks: torch.nn.RMSNorm
(the q/k norms) and dispatch_attention_fn (SDPA's math on [B, L, H, D], default scale, the bool key mask).

The constructs it shows: the sequence laid out [S, B, H] (sequence first) between the blocks, transposed to batch
first around each attention; the joint sequence [image, text] with one weight set over both (a single stream); one
modulation for the whole model (adaLN_modulation(c), six chunks broadcast over the rows, the same tensors passed to
every block); RoPE ids made from the request's shape and the caption's length: image rows (T, y, x), text rows (i, 0,
0), angles repeated per pair [θ0, θ0, θ1, θ1, ...] and applied rotate-half (x·cos + [−x2, x1]·sin); RMSNorm q/k per
head; a gated FFN up(x)·gelu(gate(x)) (erf GELU, no biases); a final AdaLN [scale, shift] of c without SiLU; the
velocity from the image rows of the final projection, unpatchified [B, Hp, Wp, p, p, C] → (0, 5, 1, 3, 2, 4).

Pipeline as ErnieImagePipeline (pipeline_ernie_image.py at f04afa90a4f78c0353c2e386f4d5ef94f6f4f1e3) calls it with
guidance scale 1 (no unconditional batch: text_lens the one caption's length, no padding) and no prompt enhancer:
latents (B, C, H, W) already patchified by the pipeline's 2x2 (the transformer's patch_size 1), timestep
torch.full((B,), t) with t the flow-matching scheduler's sigma*1000 (shift 1 here), velocity the output as is.

usage: /usr/bin/python3 bench/unseen/replicas/ernie_image.py OUTDIR
"""
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

from run import capture, get_timestep_embedding, sdpa


class Timesteps(nn.Module):
    def __init__(self, num_channels, flip_sin_to_cos, downscale_freq_shift, scale=1):
        super().__init__()
        self.num_channels, self.flip_sin_to_cos = num_channels, flip_sin_to_cos
        self.downscale_freq_shift, self.scale = downscale_freq_shift, scale

    def forward(self, timesteps):
        return get_timestep_embedding(timesteps, self.num_channels, flip_sin_to_cos=self.flip_sin_to_cos,
                                      downscale_freq_shift=self.downscale_freq_shift, scale=self.scale)


class TimestepEmbedding(nn.Module):
    def __init__(self, in_channels, time_embed_dim, sample_proj_bias=True):
        super().__init__()
        self.linear_1 = nn.Linear(in_channels, time_embed_dim, sample_proj_bias)
        self.act = nn.SiLU()
        self.linear_2 = nn.Linear(time_embed_dim, time_embed_dim, sample_proj_bias)

    def forward(self, sample):
        return self.linear_2(self.act(self.linear_1(sample)))


class RMSNorm(nn.Module):
    """diffusers.models.normalization.RMSNorm(dim, eps, elementwise_affine=True), f32 weights."""

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


class TorchRMSNorm(nn.Module):
    """torch 2's nn.RMSNorm(dim, eps, elementwise_affine=True)."""

    def __init__(self, dim, eps=None, elementwise_affine=True):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim)) if elementwise_affine else None

    def forward(self, x):
        # aten's rms_norm composite: statistics and x̂ in f32 (the opmath type, whose epsilon is the
        # default), x̂ cast back to x's dtype, then ·weight (identical to the plain formula in f32)
        eps = torch.finfo(torch.float32).eps if self.eps is None else self.eps
        xf = x.float()
        y = (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).type_as(x)
        return y * self.weight if self.weight is not None else y


def rope(pos, dim, theta):
    assert dim % 2 == 0
    scale = torch.arange(0, dim, 2, dtype=torch.float32, device=pos.device) / dim
    omega = 1.0 / (theta ** scale)
    out = torch.einsum("...n,d->...nd", pos, omega)
    return out.float()


class ErnieImageEmbedND3(nn.Module):
    def __init__(self, dim, theta, axes_dim):
        super().__init__()
        self.dim = dim
        self.theta = theta
        self.axes_dim = list(axes_dim)

    def forward(self, ids):
        emb = torch.cat([rope(ids[..., i], self.axes_dim[i], self.theta) for i in range(3)], dim=-1)
        emb = emb.unsqueeze(2)
        return torch.stack([emb, emb], dim=-1).reshape(*emb.shape[:-1], -1)


class ErnieImagePatchEmbedDynamic(nn.Module):
    def __init__(self, in_channels, embed_dim, patch_size):
        super().__init__()
        self.patch_size = patch_size
        self.proj = nn.Conv2d(in_channels, embed_dim, kernel_size=patch_size, stride=patch_size, bias=True)

    def forward(self, x):
        x = self.proj(x)
        batch_size, dim, height, width = x.shape
        return x.reshape(batch_size, dim, height * width).transpose(1, 2).contiguous()


def ernie_image_attn(attn, hidden_states, attention_mask=None, freqs_cis=None):
    """ErnieImageSingleStreamAttnProcessor.__call__ (dispatch_attention_fn: SDPA's math on [B, L, H, D])."""
    query = attn.to_q(hidden_states)
    key = attn.to_k(hidden_states)
    value = attn.to_v(hidden_states)
    query = query.unflatten(-1, (attn.heads, -1))
    key = key.unflatten(-1, (attn.heads, -1))
    value = value.unflatten(-1, (attn.heads, -1))
    if attn.norm_q is not None:
        query = attn.norm_q(query)
    if attn.norm_k is not None:
        key = attn.norm_k(key)

    def apply_rotary_emb(x_in, freqs_cis):
        rot_dim = freqs_cis.shape[-1]
        x, x_pass = x_in[..., :rot_dim], x_in[..., rot_dim:]
        cos_ = torch.cos(freqs_cis).to(x.dtype)
        sin_ = torch.sin(freqs_cis).to(x.dtype)
        x1, x2 = x.chunk(2, dim=-1)
        x_rotated = torch.cat((-x2, x1), dim=-1)
        return torch.cat((x * cos_ + x_rotated * sin_, x_pass), dim=-1)

    if freqs_cis is not None:
        query = apply_rotary_emb(query, freqs_cis)
        key = apply_rotary_emb(key, freqs_cis)
    dtype = query.dtype
    query, key = query.to(dtype), key.to(dtype)
    if attention_mask is not None and attention_mask.ndim == 2:
        attention_mask = attention_mask[:, None, None, :]
    hidden_states = sdpa(query.transpose(1, 2), key.transpose(1, 2), value.transpose(1, 2),
                         mask=attention_mask).transpose(1, 2)
    hidden_states = hidden_states.flatten(2, 3)
    hidden_states = hidden_states.to(dtype)
    output = attn.to_out[0](hidden_states)
    return output


class ErnieImageAttention(nn.Module):
    def __init__(self, query_dim, heads=8, dim_head=64, dropout=0.0, bias=False, qk_norm="rms_norm",
                 added_proj_bias=True, out_bias=True, eps=1e-5, out_dim=None, elementwise_affine=True,
                 processor=None):
        super().__init__()
        self.head_dim = dim_head
        self.inner_dim = out_dim if out_dim is not None else dim_head * heads
        self.query_dim = query_dim
        self.out_dim = out_dim if out_dim is not None else query_dim
        self.heads = out_dim // dim_head if out_dim is not None else heads
        self.use_bias = bias
        self.dropout = dropout
        self.added_proj_bias = added_proj_bias
        self.to_q = nn.Linear(query_dim, self.inner_dim, bias=bias)
        self.to_k = nn.Linear(query_dim, self.inner_dim, bias=bias)
        self.to_v = nn.Linear(query_dim, self.inner_dim, bias=bias)
        if qk_norm == "rms_norm":
            self.norm_q = TorchRMSNorm(dim_head, eps=eps, elementwise_affine=elementwise_affine)
            self.norm_k = TorchRMSNorm(dim_head, eps=eps, elementwise_affine=elementwise_affine)
        else:
            raise ValueError(qk_norm)
        self.to_out = nn.ModuleList([])
        self.to_out.append(nn.Linear(self.inner_dim, self.out_dim, bias=out_bias))
        self.processor = ernie_image_attn

    def forward(self, hidden_states, encoder_hidden_states=None, attention_mask=None, image_rotary_emb=None):
        return self.processor(self, hidden_states, attention_mask, image_rotary_emb)


class ErnieImageFeedForward(nn.Module):
    def __init__(self, hidden_size, ffn_hidden_size):
        super().__init__()
        self.gate_proj = nn.Linear(hidden_size, ffn_hidden_size, bias=False)
        self.up_proj = nn.Linear(hidden_size, ffn_hidden_size, bias=False)
        self.linear_fc2 = nn.Linear(ffn_hidden_size, hidden_size, bias=False)

    def forward(self, x):
        return self.linear_fc2(self.up_proj(x) * F.gelu(self.gate_proj(x)))


class ErnieImageSharedAdaLNBlock(nn.Module):
    def __init__(self, hidden_size, num_heads, ffn_hidden_size, eps=1e-6, qk_layernorm=True):
        super().__init__()
        self.adaLN_sa_ln = RMSNorm(hidden_size, eps=eps)
        self.self_attention = ErnieImageAttention(query_dim=hidden_size, dim_head=hidden_size // num_heads,
                                                  heads=num_heads, qk_norm="rms_norm" if qk_layernorm else None,
                                                  eps=eps, bias=False, out_bias=False)
        self.adaLN_mlp_ln = RMSNorm(hidden_size, eps=eps)
        self.mlp = ErnieImageFeedForward(hidden_size, ffn_hidden_size)

    def forward(self, x, rotary_pos_emb, temb, attention_mask=None):
        shift_msa, scale_msa, gate_msa, shift_mlp, scale_mlp, gate_mlp = temb
        residual = x
        x = self.adaLN_sa_ln(x)
        x = (x.float() * (1 + scale_msa.float()) + shift_msa.float()).to(x.dtype)
        x_bsh = x.permute(1, 0, 2)
        attn_out = self.self_attention(x_bsh, attention_mask=attention_mask, image_rotary_emb=rotary_pos_emb)
        attn_out = attn_out.permute(1, 0, 2)
        x = residual + (gate_msa.float() * attn_out.float()).to(x.dtype)
        residual = x
        x = self.adaLN_mlp_ln(x)
        x = (x.float() * (1 + scale_mlp.float()) + shift_mlp.float()).to(x.dtype)
        return residual + (gate_mlp.float() * self.mlp(x).float()).to(x.dtype)


class ErnieImageAdaLNContinuous(nn.Module):
    def __init__(self, hidden_size, eps=1e-6):
        super().__init__()
        self.norm = nn.LayerNorm(hidden_size, elementwise_affine=False, eps=eps)
        self.linear = nn.Linear(hidden_size, hidden_size * 2)

    def forward(self, x, conditioning):
        scale, shift = self.linear(conditioning).chunk(2, dim=-1)
        x = self.norm(x)
        x = x * (1 + scale.unsqueeze(0)) + shift.unsqueeze(0)
        return x


class ErnieImageTransformer2DModel(nn.Module):
    def __init__(self, hidden_size=3072, num_attention_heads=24, num_layers=24, ffn_hidden_size=8192,
                 in_channels=128, out_channels=128, patch_size=1, text_in_dim=2560, rope_theta=256,
                 rope_axes_dim=(32, 48, 48), eps=1e-6, qk_layernorm=True):
        super().__init__()
        self.hidden_size = hidden_size
        self.num_heads = num_attention_heads
        self.head_dim = hidden_size // num_attention_heads
        self.num_layers = num_layers
        self.patch_size = patch_size
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.text_in_dim = text_in_dim
        self.x_embedder = ErnieImagePatchEmbedDynamic(in_channels, hidden_size, patch_size)
        self.text_proj = nn.Linear(text_in_dim, hidden_size, bias=False) if text_in_dim != hidden_size else None
        self.time_proj = Timesteps(hidden_size, flip_sin_to_cos=False, downscale_freq_shift=0)
        self.time_embedding = TimestepEmbedding(hidden_size, hidden_size)
        self.pos_embed = ErnieImageEmbedND3(dim=self.head_dim, theta=rope_theta, axes_dim=rope_axes_dim)
        self.adaLN_modulation = nn.Sequential(nn.SiLU(), nn.Linear(hidden_size, 6 * hidden_size))
        nn.init.zeros_(self.adaLN_modulation[-1].weight)
        nn.init.zeros_(self.adaLN_modulation[-1].bias)
        self.layers = nn.ModuleList([
            ErnieImageSharedAdaLNBlock(hidden_size, num_attention_heads, ffn_hidden_size, eps,
                                       qk_layernorm=qk_layernorm)
            for _ in range(num_layers)])
        self.final_norm = ErnieImageAdaLNContinuous(hidden_size, eps)
        self.final_linear = nn.Linear(hidden_size, patch_size * patch_size * out_channels)
        nn.init.zeros_(self.final_linear.weight)
        nn.init.zeros_(self.final_linear.bias)

    def forward(self, hidden_states, timestep, text_bth, text_lens, return_dict=True):
        device, dtype = hidden_states.device, hidden_states.dtype
        B, C, H, W = hidden_states.shape
        p, Hp, Wp = self.patch_size, H // self.patch_size, W // self.patch_size
        N_img = Hp * Wp
        img_sbh = self.x_embedder(hidden_states).transpose(0, 1).contiguous()
        if self.text_proj is not None and text_bth.numel() > 0:
            text_bth = self.text_proj(text_bth)
        Tmax = text_bth.shape[1]
        text_sbh = text_bth.transpose(0, 1).contiguous()
        x = torch.cat([img_sbh, text_sbh], dim=0)
        S = x.shape[0]
        text_ids = (torch.cat([torch.arange(Tmax, device=device, dtype=torch.float32).view(1, Tmax, 1).expand(B, -1, -1),
                               torch.zeros((B, Tmax, 2), device=device)], dim=-1)
                    if Tmax > 0 else torch.zeros((B, 0, 3), device=device))
        grid_yx = torch.stack(torch.meshgrid(torch.arange(Hp, device=device, dtype=torch.float32),
                                             torch.arange(Wp, device=device, dtype=torch.float32), indexing="ij"),
                              dim=-1).reshape(-1, 2)
        image_ids = torch.cat([text_lens.float().view(B, 1, 1).expand(-1, N_img, -1),
                               grid_yx.view(1, N_img, 2).expand(B, -1, -1)], dim=-1)
        rotary_pos_emb = self.pos_embed(torch.cat([image_ids, text_ids], dim=1))
        valid_text = (torch.arange(Tmax, device=device).view(1, Tmax) < text_lens.view(B, 1)
                      if Tmax > 0 else torch.zeros((B, 0), device=device, dtype=torch.bool))
        attention_mask = torch.cat([torch.ones((B, N_img), device=device, dtype=torch.bool), valid_text],
                                   dim=1)[:, None, None, :]
        sample = self.time_proj(timestep)
        sample = sample.to(dtype=dtype)
        c = self.time_embedding(sample)
        shift_msa, scale_msa, gate_msa, shift_mlp, scale_mlp, gate_mlp = [
            t.unsqueeze(0).expand(S, -1, -1).contiguous() for t in self.adaLN_modulation(c).chunk(6, dim=-1)]
        for layer in self.layers:
            temb = [shift_msa, scale_msa, gate_msa, shift_mlp, scale_mlp, gate_mlp]
            x = layer(x, rotary_pos_emb, temb, attention_mask)
        x = self.final_norm(x, c).type_as(x)
        patches = self.final_linear(x)[:N_img].transpose(0, 1).contiguous()
        output = (patches.view(B, Hp, Wp, p, p, self.out_channels).permute(0, 5, 1, 3, 2, 4).contiguous()
                  .view(B, self.out_channels, H, W))
        return (output,)


def build():
    # Small ERNIE-Image: 2 heads of 16, two blocks, 8 latent channels (the pipeline's 2x2-patchified latents; 128
    # upstream), patch 1, RoPE axes (4, 6, 6), a caption of 4 tokens 24 wide projected to 32, FFN 48 wide.
    return ErnieImageTransformer2DModel(hidden_size=32, num_attention_heads=2, num_layers=2, ffn_hidden_size=48,
                                        in_channels=8, out_channels=8, patch_size=1, text_in_dim=24, rope_theta=256,
                                        rope_axes_dim=(4, 6, 6), eps=1e-6, qk_layernorm=True)


def inputs(g):
    n = 4
    return {"text_bth": torch.randn((1, n, 24), generator=g), "text_lens": torch.tensor([n], dtype=torch.int64),
            "noise": torch.randn((1, 8, 4, 4), generator=g)}


def call(model, x, sigma, c):
    t = torch.full((x.shape[0],), sigma * 1000.0, dtype=x.dtype)
    return model(hidden_states=x, timestep=t, text_bth=c["text_bth"], text_lens=c["text_lens"], return_dict=False)[0]


PRODUCER = dict(
    library_source="replica of huggingface/diffusers transformer_ernie_image.py@76414aa97a7e and the parts it "
                   "imports (torch 1.13)",
    timestep="sigma*1000 float32 (ErnieImagePipeline: torch.full((B,), t), FlowMatchEulerDiscreteScheduler, shift 1)",
    velocity="model output as is (flow velocity), not negated",
    note="ERNIE-Image, two single-stream blocks: rows laid out [S, B, H] (sequence first), [image, text] joined on "
         "the rows, permuted to batch first around each attention; one model-level modulation (SiLU, Linear, 6 "
         "chunks: shift, scale, gate, shift, scale, gate) shared by every block; RMSNorm then x·(1 + scale) + shift, "
         "x + gate·y; RMSNorm q/k per head; RoPE from ids image (text_len, y, x), text (i, 0, 0), theta 256, axes "
         "(4, 6, 6), angles repeated per pair, rotate-half; bool key mask all ones (one caption); gated FFN "
         "up·gelu(gate) (erf), no biases; timestep sinusoid [sin, cos] as wide as the model; final LayerNorm "
         "[scale, shift] of c without SiLU; the image rows of final_linear, unpatchified (0, 5, 1, 3, 2, 4)")

if __name__ == "__main__":
    capture("ernie_image", build, inputs, call, sys.argv[1], PRODUCER)
