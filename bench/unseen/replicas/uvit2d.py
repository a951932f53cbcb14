"""aMUSEd's transformer (UVit2DModel, a masked-token image model: VQ token ids in, codebook logits out),
reimplemented for torch 1.13 (no diffusers here), captured small in f32 on CPU as one forward of a masked-token
step (some latent tokens still the mask id, the rest codebook ids already sampled).

Follows huggingface/diffusers src/diffusers/models/unets/uvit_2d.py at 06d4fb510fee2d769d19abf3b7eeb21d6dcf2590
(UVit2DModel, UVit2DConvEmbed, UVitBlock, ConvNextBlock, ConvMlmLayer) line for line, with the parts it imports:
attention.py (BasicTransformerBlock with norm_type "ada_norm_continuous": norm1 and norm2 AdaLayerNormContinuous
over "rms_norm", norm3 AdaLayerNormContinuous over "layer_norm", self-attention, cross-attention to the projected
text states, a GEGLU FeedForward with ff_inner_dim; SkipFFTransformerBlock: kv_mapper = Linear(SiLU(text)) where
the widths differ, RMSNorm(1e-6) before each of two attentions that both attend to the mapped text; FeedForward),
attention_processor.py at 001d4da0eb5809c779120c51f74ef73d6078b08c (Attention's constructor; AttnProcessor2_0's
__call__ as its forward, the output divided by rescale_output_factor 1.0), normalization.py at
04e9323055098220d57b84cfe68b6850b3b3fc0c (RMSNorm: variance of the f32 input, x * rsqrt(var + eps), cast to the
weight's dtype when that is half, * weight; AdaLayerNormContinuous: linear(SiLU(c).to(x.dtype)) chunked
scale, shift, norm(x) * (1 + scale)[:, None] + shift[:, None]; GlobalResponseNorm: gx = ||x||_2 over H, W,
nx = gx / (mean_C gx + 1e-6), gamma * (x * nx) + beta + x; LayerNorm: diffusers' own class for torch < 2.1, a
weight and no bias since ada_norm_bias = use_bias = False), activations.py at the same commit (GEGLU),
downsampling.py at 0b011181c92d3e0bf236adf7709c677f5529215e (Downsample2D with norm_type "rms_norm", a 2x2 stride-2
conv with padding 0, so the map is first F.pad-ed by (0, 1, 0, 1)), upsampling.py at
049ca3822f9eb3621c96c11bba58b8e579cb3cc1 (Upsample2D with norm_type "rms_norm" and use_conv_transpose: a 2x2
stride-2 ConvTranspose2d), embeddings.py (TimestepEmbedding with sample_proj_bias; get_timestep_embedding as
run.py has it). attention.py is the 2024 text holding SkipFFTransformerBlock and BasicTransformerBlock's
ada_norm_continuous branch (the index's diffusers copy of attention.py is an old one). The same module tree,
parameter names and shapes, call boundaries and arithmetic. Stand-in for what torch 1.13 lacks:
F.scaled_dot_product_attention (run.py's sdpa, its math path, no mask here); and nn.ConvTranspose2d, on the CPU in
bf16 only, computed in f32 and rounded once (torch 1.13's CPU bf16 conv_transpose2d returns a stride-2
convolution's shape; a GPU's bf16 kernel accumulates in f32 and rounds once).

The constructs it shows: integer token ids embedded by nn.Embedding, RMSNorm-ed, a 1x1 conv to the block width;
the micro-conditioning (5 numbers per image) through the sinusoidal embedding (flip_sin_to_cos, shift 0), joined
to the pooled text embedding, through a bias-free Linear-SiLU-Linear; ConvNeXt blocks (depthwise 3x3, RMSNorm
channels-last, Linear x4, GELU, GlobalResponseNorm, Linear, residual, then the conditioning as a (1 + scale),
shift modulation); the padded 2x2 stride-2 downsample and the ConvTranspose upsample each behind an RMSNorm; the
transformer stack modulated by the pooled embedding through adaptive RMS/Layer norms; an MLM head (1x1 conv,
RMSNorm, 1x1 conv to codebook logits). All linears and convs are bias-free (use_bias False), as aMUSEd's are.

Tiny config: diffusers' pipeline test layout (tests/pipelines/amused/test_amused.py: use_bias False, downsample
and upsample True, layer_norm_eps 1e-6, ln_elementwise_affine True, dropouts 0) at slightly larger widths:
hidden_size 32, cond_embed_dim 16 (the pooled text), micro_cond_encode_dim 4 (x 5 conditions = micro_cond_embed_dim
20), encoder_hidden_size 16, codebook_size 32, vocab_size 40 (codebook + the mask token, rounded up, as 8256 for
8192), in_channels 16, block_out_channels 16, num_res_blocks 2, block_num_heads 2, num_hidden_layers 2,
num_attention_heads 2, intermediate_size 64 (amused-256: 1024 hidden, 768 block width, 22 layers, no resampling).
Input: token ids [1, 16, 16] (amused-256's 16x16 latent grid), half of them the mask id 39; the CLIP penultimate
states [1, 8, 16]; the pooled text [1, 16]; micro_conds [[256, 256, 0, 0, 6]] (AmusedPipeline's width, height,
crop coordinates and aesthetic score 6). Output: logits [1, 32, 16, 16].

Pipeline as AmusedPipeline (pipeline_amused.py) calls it, guidance off: transformer(model_input,
micro_conds=micro_conds, pooled_text_emb=prompt_embeds, encoder_hidden_states=encoder_hidden_states); captured as
one forward (capture_once): the sampling loop around it is argmax/masking on integer ids, not a flow step.

usage: /usr/bin/python3 bench/unseen/replicas/uvit2d.py OUTDIR
REPLICA_DTYPE=bf16 [REPLICA_DEVICE=cuda] as run.py's replicas: the bf16 run, beside the f32 one.
"""
import numbers
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

from run import capture_once, get_timestep_embedding, sdpa


def get_activation(act_fn):
    act2cls = {"swish": nn.SiLU, "silu": nn.SiLU, "mish": nn.Mish, "gelu": nn.GELU, "relu": nn.ReLU}
    act_fn = act_fn.lower()
    if act_fn in act2cls:
        return act2cls[act_fn]()
    raise ValueError(f"activation function {act_fn} not found in ACT2FN mapping {list(act2cls.keys())}")


class ConvTranspose2d(nn.ConvTranspose2d):
    """nn.ConvTranspose2d; on the CPU in bf16 computed in f32 and rounded once (torch 1.13's CPU bf16
    conv_transpose2d returns a stride-2 convolution's shape; a GPU's bf16 kernel accumulates in f32 and rounds its
    result once, as this does)."""

    def forward(self, x, output_size=None):
        if x.dtype == torch.bfloat16 and x.device.type == "cpu":
            bias = None if self.bias is None else self.bias.float()
            return F.conv_transpose2d(x.float(), self.weight.float(), bias, self.stride, self.padding,
                                      self.output_padding, self.groups, self.dilation).to(x.dtype)
        return super().forward(x, output_size)


class RMSNorm(nn.Module):
    def __init__(self, dim, eps, elementwise_affine=True, bias=False):
        super().__init__()
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        if isinstance(dim, numbers.Integral):
            dim = (dim,)
        self.dim = torch.Size(dim)
        self.weight = None
        self.bias = None
        if elementwise_affine:
            self.weight = nn.Parameter(torch.ones(dim))
            if bias:
                self.bias = nn.Parameter(torch.zeros(dim))

    def forward(self, hidden_states):
        input_dtype = hidden_states.dtype
        variance = hidden_states.to(torch.float32).pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.eps)
        if self.weight is not None:
            # convert into half-precision if necessary
            if self.weight.dtype in [torch.float16, torch.bfloat16]:
                hidden_states = hidden_states.to(self.weight.dtype)
            hidden_states = hidden_states * self.weight
            if self.bias is not None:
                hidden_states = hidden_states + self.bias
        else:
            hidden_states = hidden_states.to(input_dtype)
        return hidden_states


class LayerNorm(nn.Module):
    """normalization.py's LayerNorm for torch < 2.1 (nn.LayerNorm with an optional bias)."""

    def __init__(self, dim, eps=1e-5, elementwise_affine=True, bias=True):
        super().__init__()
        self.eps = eps
        if isinstance(dim, numbers.Integral):
            dim = (dim,)
        self.dim = torch.Size(dim)
        if elementwise_affine:
            self.weight = nn.Parameter(torch.ones(dim))
            self.bias = nn.Parameter(torch.zeros(dim)) if bias else None
        else:
            self.weight = None
            self.bias = None

    def forward(self, input):
        return F.layer_norm(input, self.dim, self.weight, self.bias, self.eps)


class GlobalResponseNorm(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.gamma = nn.Parameter(torch.zeros(1, 1, 1, dim))
        self.beta = nn.Parameter(torch.zeros(1, 1, 1, dim))

    def forward(self, x):
        gx = torch.norm(x, p=2, dim=(1, 2), keepdim=True)
        nx = gx / (gx.mean(dim=-1, keepdim=True) + 1e-6)
        return self.gamma * (x * nx) + self.beta + x


class AdaLayerNormContinuous(nn.Module):
    def __init__(self, embedding_dim, conditioning_embedding_dim, elementwise_affine=True, eps=1e-5, bias=True,
                 norm_type="layer_norm"):
        super().__init__()
        self.silu = nn.SiLU()
        self.linear = nn.Linear(conditioning_embedding_dim, embedding_dim * 2, bias=bias)
        if norm_type == "layer_norm":
            self.norm = LayerNorm(embedding_dim, eps, elementwise_affine, bias)
        elif norm_type == "rms_norm":
            self.norm = RMSNorm(embedding_dim, eps, elementwise_affine)
        else:
            raise ValueError(f"unknown norm_type {norm_type}")

    def forward(self, x, conditioning_embedding):
        # convert back to the original dtype in case `conditioning_embedding`` is upcasted to float32 (needed for hunyuanDiT)
        emb = self.linear(self.silu(conditioning_embedding).to(x.dtype))
        scale, shift = torch.chunk(emb, 2, dim=1)
        x = self.norm(x) * (1 + scale)[:, None, :] + shift[:, None, :]
        return x


class Attention(nn.Module):
    """attention_processor.Attention (the arguments these models pass) with AttnProcessor2_0 as its forward."""

    def __init__(self, query_dim, cross_attention_dim=None, heads=8, dim_head=64, dropout=0.0, bias=False,
                 upcast_attention=False, out_bias=True, out_dim=None):
        super().__init__()
        self.inner_dim = out_dim if out_dim is not None else dim_head * heads
        self.query_dim = query_dim
        self.use_bias = bias
        self.is_cross_attention = cross_attention_dim is not None
        self.cross_attention_dim = cross_attention_dim if cross_attention_dim is not None else query_dim
        self.rescale_output_factor = 1.0
        self.residual_connection = False
        self.out_dim = out_dim if out_dim is not None else query_dim
        self.scale = dim_head**-0.5
        self.heads = out_dim // dim_head if out_dim is not None else heads
        self.group_norm = None
        self.spatial_norm = None
        self.norm_cross = None
        self.to_q = nn.Linear(query_dim, self.inner_dim, bias=bias)
        self.to_k = nn.Linear(self.cross_attention_dim, self.inner_dim, bias=bias)
        self.to_v = nn.Linear(self.cross_attention_dim, self.inner_dim, bias=bias)
        self.to_out = nn.ModuleList([])
        self.to_out.append(nn.Linear(self.inner_dim, self.out_dim, bias=out_bias))
        self.to_out.append(nn.Dropout(dropout))

    def prepare_attention_mask(self, attention_mask, target_length, batch_size, out_dim=3):
        head_size = self.heads
        if attention_mask is None:
            return attention_mask
        current_length = attention_mask.shape[-1]
        if current_length != target_length:
            attention_mask = F.pad(attention_mask, (0, target_length), value=0.0)
        if out_dim == 3:
            if attention_mask.shape[0] < batch_size * head_size:
                attention_mask = attention_mask.repeat_interleave(head_size, dim=0)
        elif out_dim == 4:
            attention_mask = attention_mask.unsqueeze(1)
            attention_mask = attention_mask.repeat_interleave(head_size, dim=1)
        return attention_mask

    def forward(self, hidden_states, encoder_hidden_states=None, attention_mask=None, **cross_attention_kwargs):
        attn = self
        residual = hidden_states
        input_ndim = hidden_states.ndim
        if input_ndim == 4:
            batch_size, channel, height, width = hidden_states.shape
            hidden_states = hidden_states.view(batch_size, channel, height * width).transpose(1, 2)
        batch_size, sequence_length, _ = (
            hidden_states.shape if encoder_hidden_states is None else encoder_hidden_states.shape
        )
        if attention_mask is not None:
            attention_mask = attn.prepare_attention_mask(attention_mask, sequence_length, batch_size)
            # scaled_dot_product_attention expects attention_mask shape to be
            # (batch, heads, source_length, target_length)
            attention_mask = attention_mask.view(batch_size, attn.heads, -1, attention_mask.shape[-1])
        query = attn.to_q(hidden_states)
        if encoder_hidden_states is None:
            encoder_hidden_states = hidden_states
        key = attn.to_k(encoder_hidden_states)
        value = attn.to_v(encoder_hidden_states)
        inner_dim = key.shape[-1]
        head_dim = inner_dim // attn.heads
        query = query.view(batch_size, -1, attn.heads, head_dim).transpose(1, 2)
        key = key.view(batch_size, -1, attn.heads, head_dim).transpose(1, 2)
        value = value.view(batch_size, -1, attn.heads, head_dim).transpose(1, 2)
        hidden_states = sdpa(query, key, value, mask=attention_mask)
        hidden_states = hidden_states.transpose(1, 2).reshape(batch_size, -1, attn.heads * head_dim)
        hidden_states = hidden_states.to(query.dtype)
        # linear proj
        hidden_states = attn.to_out[0](hidden_states)
        # dropout
        hidden_states = attn.to_out[1](hidden_states)
        if input_ndim == 4:
            hidden_states = hidden_states.transpose(-1, -2).reshape(batch_size, channel, height, width)
        if attn.residual_connection:
            hidden_states = hidden_states + residual
        hidden_states = hidden_states / attn.rescale_output_factor
        return hidden_states


class GEGLU(nn.Module):
    def __init__(self, dim_in, dim_out, bias=True):
        super().__init__()
        self.proj = nn.Linear(dim_in, dim_out * 2, bias=bias)

    def gelu(self, gate):
        return F.gelu(gate)

    def forward(self, hidden_states, *args, **kwargs):
        hidden_states = self.proj(hidden_states)
        hidden_states, gate = hidden_states.chunk(2, dim=-1)
        return hidden_states * self.gelu(gate)


class FeedForward(nn.Module):
    """attention.FeedForward with activation_fn "geglu" (BasicTransformerBlock's default)."""

    def __init__(self, dim, dim_out=None, mult=4, dropout=0.0, activation_fn="geglu", final_dropout=False,
                 inner_dim=None, bias=True):
        super().__init__()
        if inner_dim is None:
            inner_dim = int(dim * mult)
        dim_out = dim_out if dim_out is not None else dim
        assert activation_fn == "geglu"
        act_fn = GEGLU(dim, inner_dim, bias=bias)
        self.net = nn.ModuleList([])
        self.net.append(act_fn)
        self.net.append(nn.Dropout(dropout))
        self.net.append(nn.Linear(inner_dim, dim_out, bias=bias))
        if final_dropout:
            self.net.append(nn.Dropout(dropout))

    def forward(self, hidden_states, *args, **kwargs):
        for module in self.net:
            hidden_states = module(hidden_states)
        return hidden_states


class BasicTransformerBlock(nn.Module):
    """attention.BasicTransformerBlock, the norm_type "ada_norm_continuous" branches (no positional embedding,
    no GLIGEN fuser, no feed-forward chunking)."""

    def __init__(self, dim, num_attention_heads, attention_head_dim, dropout=0.0, cross_attention_dim=None,
                 activation_fn="geglu", attention_bias=False, only_cross_attention=False,
                 double_self_attention=False, upcast_attention=False, norm_elementwise_affine=True,
                 norm_type="layer_norm", norm_eps=1e-5, final_dropout=False,
                 ada_norm_continous_conditioning_embedding_dim=None, ada_norm_bias=None, ff_inner_dim=None,
                 ff_bias=True, attention_out_bias=True):
        super().__init__()
        assert norm_type == "ada_norm_continuous"
        self.only_cross_attention = only_cross_attention
        self.norm_type = norm_type
        self.pos_embed = None
        # 1. Self-Attn
        self.norm1 = AdaLayerNormContinuous(dim, ada_norm_continous_conditioning_embedding_dim,
                                            norm_elementwise_affine, norm_eps, ada_norm_bias, "rms_norm")
        self.attn1 = Attention(query_dim=dim, heads=num_attention_heads, dim_head=attention_head_dim,
                               dropout=dropout, bias=attention_bias,
                               cross_attention_dim=cross_attention_dim if only_cross_attention else None,
                               upcast_attention=upcast_attention, out_bias=attention_out_bias)
        # 2. Cross-Attn
        if cross_attention_dim is not None or double_self_attention:
            self.norm2 = AdaLayerNormContinuous(dim, ada_norm_continous_conditioning_embedding_dim,
                                                norm_elementwise_affine, norm_eps, ada_norm_bias, "rms_norm")
            self.attn2 = Attention(query_dim=dim,
                                   cross_attention_dim=cross_attention_dim if not double_self_attention else None,
                                   heads=num_attention_heads, dim_head=attention_head_dim, dropout=dropout,
                                   bias=attention_bias, upcast_attention=upcast_attention,
                                   out_bias=attention_out_bias)
        else:
            self.norm2 = None
            self.attn2 = None
        # 3. Feed-forward
        self.norm3 = AdaLayerNormContinuous(dim, ada_norm_continous_conditioning_embedding_dim,
                                            norm_elementwise_affine, norm_eps, ada_norm_bias, "layer_norm")
        self.ff = FeedForward(dim, dropout=dropout, activation_fn=activation_fn, final_dropout=final_dropout,
                              inner_dim=ff_inner_dim, bias=ff_bias)
        self._chunk_size = None
        self._chunk_dim = 0

    def forward(self, hidden_states, attention_mask=None, encoder_hidden_states=None, encoder_attention_mask=None,
                timestep=None, cross_attention_kwargs=None, class_labels=None, added_cond_kwargs=None):
        # 0. Self-Attention
        norm_hidden_states = self.norm1(hidden_states, added_cond_kwargs["pooled_text_emb"])
        cross_attention_kwargs = cross_attention_kwargs.copy() if cross_attention_kwargs is not None else {}
        attn_output = self.attn1(
            norm_hidden_states,
            encoder_hidden_states=encoder_hidden_states if self.only_cross_attention else None,
            attention_mask=attention_mask,
            **cross_attention_kwargs,
        )
        hidden_states = attn_output + hidden_states
        if hidden_states.ndim == 4:
            hidden_states = hidden_states.squeeze(1)
        # 3. Cross-Attention
        if self.attn2 is not None:
            norm_hidden_states = self.norm2(hidden_states, added_cond_kwargs["pooled_text_emb"])
            attn_output = self.attn2(
                norm_hidden_states,
                encoder_hidden_states=encoder_hidden_states,
                attention_mask=encoder_attention_mask,
                **cross_attention_kwargs,
            )
            hidden_states = attn_output + hidden_states
        # 4. Feed-forward
        norm_hidden_states = self.norm3(hidden_states, added_cond_kwargs["pooled_text_emb"])
        ff_output = self.ff(norm_hidden_states)
        hidden_states = ff_output + hidden_states
        if hidden_states.ndim == 4:
            hidden_states = hidden_states.squeeze(1)
        return hidden_states


class SkipFFTransformerBlock(nn.Module):
    def __init__(self, dim, num_attention_heads, attention_head_dim, kv_input_dim, kv_input_dim_proj_use_bias,
                 dropout=0.0, cross_attention_dim=None, attention_bias=False, attention_out_bias=True):
        super().__init__()
        if kv_input_dim != dim:
            self.kv_mapper = nn.Linear(kv_input_dim, dim, kv_input_dim_proj_use_bias)
        else:
            self.kv_mapper = None
        self.norm1 = RMSNorm(dim, 1e-06)
        self.attn1 = Attention(query_dim=dim, heads=num_attention_heads, dim_head=attention_head_dim,
                               dropout=dropout, bias=attention_bias, cross_attention_dim=cross_attention_dim,
                               out_bias=attention_out_bias)
        self.norm2 = RMSNorm(dim, 1e-06)
        self.attn2 = Attention(query_dim=dim, cross_attention_dim=cross_attention_dim, heads=num_attention_heads,
                               dim_head=attention_head_dim, dropout=dropout, bias=attention_bias,
                               out_bias=attention_out_bias)

    def forward(self, hidden_states, encoder_hidden_states, cross_attention_kwargs):
        cross_attention_kwargs = cross_attention_kwargs.copy() if cross_attention_kwargs is not None else {}
        if self.kv_mapper is not None:
            encoder_hidden_states = self.kv_mapper(F.silu(encoder_hidden_states))
        norm_hidden_states = self.norm1(hidden_states)
        attn_output = self.attn1(norm_hidden_states, encoder_hidden_states=encoder_hidden_states,
                                 **cross_attention_kwargs)
        hidden_states = attn_output + hidden_states
        norm_hidden_states = self.norm2(hidden_states)
        attn_output = self.attn2(norm_hidden_states, encoder_hidden_states=encoder_hidden_states,
                                 **cross_attention_kwargs)
        hidden_states = attn_output + hidden_states
        return hidden_states


class TimestepEmbedding(nn.Module):
    def __init__(self, in_channels, time_embed_dim, act_fn="silu", out_dim=None, post_act_fn=None,
                 cond_proj_dim=None, sample_proj_bias=True):
        super().__init__()
        self.linear_1 = nn.Linear(in_channels, time_embed_dim, sample_proj_bias)
        assert cond_proj_dim is None and post_act_fn is None
        self.cond_proj = None
        self.act = get_activation(act_fn)
        time_embed_dim_out = out_dim if out_dim is not None else time_embed_dim
        self.linear_2 = nn.Linear(time_embed_dim, time_embed_dim_out, sample_proj_bias)
        self.post_act = None

    def forward(self, sample, condition=None):
        if condition is not None:
            sample = sample + self.cond_proj(condition)
        sample = self.linear_1(sample)
        if self.act is not None:
            sample = self.act(sample)
        sample = self.linear_2(sample)
        if self.post_act is not None:
            sample = self.post_act(sample)
        return sample


class Downsample2D(nn.Module):
    def __init__(self, channels, use_conv=False, out_channels=None, padding=1, name="conv", kernel_size=3,
                 norm_type=None, eps=None, elementwise_affine=None, bias=True):
        super().__init__()
        self.channels = channels
        self.out_channels = out_channels or channels
        self.use_conv = use_conv
        self.padding = padding
        stride = 2
        self.name = name
        if norm_type == "rms_norm":
            self.norm = RMSNorm(channels, eps, elementwise_affine)
        elif norm_type is None:
            self.norm = None
        else:
            raise ValueError(f"unknown norm_type: {norm_type}")
        assert use_conv
        conv = nn.Conv2d(self.channels, self.out_channels, kernel_size=kernel_size, stride=stride, padding=padding,
                         bias=bias)
        if name == "conv":
            self.Conv2d_0 = conv
            self.conv = conv
        elif name == "Conv2d_0":
            self.conv = conv
        else:
            self.conv = conv

    def forward(self, hidden_states, *args, **kwargs):
        assert hidden_states.shape[1] == self.channels
        if self.norm is not None:
            hidden_states = self.norm(hidden_states.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)
        if self.use_conv and self.padding == 0:
            pad = (0, 1, 0, 1)
            hidden_states = F.pad(hidden_states, pad, mode="constant", value=0)
        assert hidden_states.shape[1] == self.channels
        hidden_states = self.conv(hidden_states)
        return hidden_states


class Upsample2D(nn.Module):
    def __init__(self, channels, use_conv=False, use_conv_transpose=False, out_channels=None, name="conv",
                 kernel_size=None, padding=1, norm_type=None, eps=None, elementwise_affine=None, bias=True,
                 interpolate=True):
        super().__init__()
        self.channels = channels
        self.out_channels = out_channels or channels
        self.use_conv = use_conv
        self.use_conv_transpose = use_conv_transpose
        self.name = name
        self.interpolate = interpolate
        if norm_type == "rms_norm":
            self.norm = RMSNorm(channels, eps, elementwise_affine)
        elif norm_type is None:
            self.norm = None
        else:
            raise ValueError(f"unknown norm_type: {norm_type}")
        assert use_conv_transpose
        if kernel_size is None:
            kernel_size = 4
        conv = ConvTranspose2d(channels, self.out_channels, kernel_size=kernel_size, stride=2, padding=padding,
                                  bias=bias)
        if name == "conv":
            self.conv = conv
        else:
            self.Conv2d_0 = conv

    def forward(self, hidden_states, output_size=None, *args, **kwargs):
        assert hidden_states.shape[1] == self.channels
        if self.norm is not None:
            hidden_states = self.norm(hidden_states.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)
        if self.use_conv_transpose:
            return self.conv(hidden_states)
        raise NotImplementedError("only the ConvTranspose2d path is built here")


class UVit2DConvEmbed(nn.Module):
    def __init__(self, in_channels, block_out_channels, vocab_size, elementwise_affine, eps, bias):
        super().__init__()
        self.embeddings = nn.Embedding(vocab_size, in_channels)
        self.layer_norm = RMSNorm(in_channels, eps, elementwise_affine)
        self.conv = nn.Conv2d(in_channels, block_out_channels, kernel_size=1, bias=bias)

    def forward(self, input_ids):
        embeddings = self.embeddings(input_ids)
        embeddings = self.layer_norm(embeddings)
        embeddings = embeddings.permute(0, 3, 1, 2)
        embeddings = self.conv(embeddings)
        return embeddings


class UVitBlock(nn.Module):
    def __init__(self, channels, num_res_blocks, hidden_size, hidden_dropout, ln_elementwise_affine, layer_norm_eps,
                 use_bias, block_num_heads, attention_dropout, downsample, upsample):
        super().__init__()
        if downsample:
            self.downsample = Downsample2D(channels, use_conv=True, padding=0, name="Conv2d_0", kernel_size=2,
                                           norm_type="rms_norm", eps=layer_norm_eps,
                                           elementwise_affine=ln_elementwise_affine, bias=use_bias)
        else:
            self.downsample = None
        self.res_blocks = nn.ModuleList([
            ConvNextBlock(channels, layer_norm_eps, ln_elementwise_affine, use_bias, hidden_dropout, hidden_size)
            for i in range(num_res_blocks)])
        self.attention_blocks = nn.ModuleList([
            SkipFFTransformerBlock(channels, block_num_heads, channels // block_num_heads, hidden_size, use_bias,
                                   attention_dropout, channels, attention_bias=use_bias,
                                   attention_out_bias=use_bias)
            for _ in range(num_res_blocks)])
        if upsample:
            self.upsample = Upsample2D(channels, use_conv_transpose=True, kernel_size=2, padding=0, name="conv",
                                       norm_type="rms_norm", eps=layer_norm_eps,
                                       elementwise_affine=ln_elementwise_affine, bias=use_bias, interpolate=False)
        else:
            self.upsample = None

    def forward(self, x, pooled_text_emb, encoder_hidden_states, cross_attention_kwargs):
        if self.downsample is not None:
            x = self.downsample(x)
        for res_block, attention_block in zip(self.res_blocks, self.attention_blocks):
            x = res_block(x, pooled_text_emb)
            batch_size, channels, height, width = x.shape
            x = x.view(batch_size, channels, height * width).permute(0, 2, 1)
            x = attention_block(x, encoder_hidden_states=encoder_hidden_states,
                                cross_attention_kwargs=cross_attention_kwargs)
            x = x.permute(0, 2, 1).view(batch_size, channels, height, width)
        if self.upsample is not None:
            x = self.upsample(x)
        return x


class ConvNextBlock(nn.Module):
    def __init__(self, channels, layer_norm_eps, ln_elementwise_affine, use_bias, hidden_dropout, hidden_size,
                 res_ffn_factor=4):
        super().__init__()
        self.depthwise = nn.Conv2d(channels, channels, kernel_size=3, padding=1, groups=channels, bias=use_bias)
        self.norm = RMSNorm(channels, layer_norm_eps, ln_elementwise_affine)
        self.channelwise_linear_1 = nn.Linear(channels, int(channels * res_ffn_factor), bias=use_bias)
        self.channelwise_act = nn.GELU()
        self.channelwise_norm = GlobalResponseNorm(int(channels * res_ffn_factor))
        self.channelwise_linear_2 = nn.Linear(int(channels * res_ffn_factor), channels, bias=use_bias)
        self.channelwise_dropout = nn.Dropout(hidden_dropout)
        self.cond_embeds_mapper = nn.Linear(hidden_size, channels * 2, use_bias)

    def forward(self, x, cond_embeds):
        x_res = x
        x = self.depthwise(x)
        x = x.permute(0, 2, 3, 1)
        x = self.norm(x)
        x = self.channelwise_linear_1(x)
        x = self.channelwise_act(x)
        x = self.channelwise_norm(x)
        x = self.channelwise_linear_2(x)
        x = self.channelwise_dropout(x)
        x = x.permute(0, 3, 1, 2)
        x = x + x_res
        scale, shift = self.cond_embeds_mapper(F.silu(cond_embeds)).chunk(2, dim=1)
        x = x * (1 + scale[:, :, None, None]) + shift[:, :, None, None]
        return x


class ConvMlmLayer(nn.Module):
    def __init__(self, block_out_channels, in_channels, use_bias, ln_elementwise_affine, layer_norm_eps,
                 codebook_size):
        super().__init__()
        self.conv1 = nn.Conv2d(block_out_channels, in_channels, kernel_size=1, bias=use_bias)
        self.layer_norm = RMSNorm(in_channels, layer_norm_eps, ln_elementwise_affine)
        self.conv2 = nn.Conv2d(in_channels, codebook_size, kernel_size=1, bias=use_bias)

    def forward(self, hidden_states):
        hidden_states = self.conv1(hidden_states)
        hidden_states = self.layer_norm(hidden_states.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)
        logits = self.conv2(hidden_states)
        return logits


class UVit2DModel(nn.Module):
    def __init__(
        self,
        # global config
        hidden_size=32,
        use_bias=False,
        hidden_dropout=0.0,
        # conditioning dimensions
        cond_embed_dim=16,
        micro_cond_encode_dim=4,
        micro_cond_embed_dim=20,
        encoder_hidden_size=16,
        # num tokens
        vocab_size=40,  # codebook_size + 1 (for the mask token) rounded
        codebook_size=32,
        # `UVit2DConvEmbed`
        in_channels=16,
        block_out_channels=16,
        num_res_blocks=2,
        downsample=True,
        upsample=True,
        block_num_heads=2,
        # `TransformerLayer`
        num_hidden_layers=2,
        num_attention_heads=2,
        # `Attention`
        attention_dropout=0.0,
        # `FeedForward`
        intermediate_size=64,
        # `Norm`
        layer_norm_eps=1e-6,
        ln_elementwise_affine=True,
        sample_size=16,
    ):
        super().__init__()
        self.micro_cond_encode_dim = micro_cond_encode_dim  # self.config.micro_cond_encode_dim upstream
        self.encoder_proj = nn.Linear(encoder_hidden_size, hidden_size, bias=use_bias)
        self.encoder_proj_layer_norm = RMSNorm(hidden_size, layer_norm_eps, ln_elementwise_affine)
        self.embed = UVit2DConvEmbed(in_channels, block_out_channels, vocab_size, ln_elementwise_affine,
                                     layer_norm_eps, use_bias)
        self.cond_embed = TimestepEmbedding(micro_cond_embed_dim + cond_embed_dim, hidden_size,
                                            sample_proj_bias=use_bias)
        self.down_block = UVitBlock(block_out_channels, num_res_blocks, hidden_size, hidden_dropout,
                                    ln_elementwise_affine, layer_norm_eps, use_bias, block_num_heads,
                                    attention_dropout, downsample, False)
        self.project_to_hidden_norm = RMSNorm(block_out_channels, layer_norm_eps, ln_elementwise_affine)
        self.project_to_hidden = nn.Linear(block_out_channels, hidden_size, bias=use_bias)
        self.transformer_layers = nn.ModuleList([
            BasicTransformerBlock(
                dim=hidden_size,
                num_attention_heads=num_attention_heads,
                attention_head_dim=hidden_size // num_attention_heads,
                dropout=hidden_dropout,
                cross_attention_dim=hidden_size,
                attention_bias=use_bias,
                norm_type="ada_norm_continuous",
                ada_norm_continous_conditioning_embedding_dim=hidden_size,
                norm_elementwise_affine=ln_elementwise_affine,
                norm_eps=layer_norm_eps,
                ada_norm_bias=use_bias,
                ff_inner_dim=intermediate_size,
                ff_bias=use_bias,
                attention_out_bias=use_bias,
            )
            for _ in range(num_hidden_layers)])
        self.project_from_hidden_norm = RMSNorm(hidden_size, layer_norm_eps, ln_elementwise_affine)
        self.project_from_hidden = nn.Linear(hidden_size, block_out_channels, bias=use_bias)
        self.up_block = UVitBlock(block_out_channels, num_res_blocks, hidden_size, hidden_dropout,
                                  ln_elementwise_affine, layer_norm_eps, use_bias, block_num_heads,
                                  attention_dropout, downsample=False, upsample=upsample)
        self.mlm_layer = ConvMlmLayer(block_out_channels, in_channels, use_bias, ln_elementwise_affine,
                                      layer_norm_eps, codebook_size)
        self.gradient_checkpointing = False

    @property
    def dtype(self):
        # ModelMixin.dtype: the first floating-point parameter's
        for p in self.parameters():
            if p.is_floating_point():
                return p.dtype
        return torch.float32

    def forward(self, input_ids, encoder_hidden_states, pooled_text_emb, micro_conds, cross_attention_kwargs=None):
        encoder_hidden_states = self.encoder_proj(encoder_hidden_states)
        encoder_hidden_states = self.encoder_proj_layer_norm(encoder_hidden_states)

        micro_cond_embeds = get_timestep_embedding(
            micro_conds.flatten(), self.micro_cond_encode_dim, flip_sin_to_cos=True, downscale_freq_shift=0
        )
        micro_cond_embeds = micro_cond_embeds.reshape((input_ids.shape[0], -1))

        pooled_text_emb = torch.cat([pooled_text_emb, micro_cond_embeds], dim=1)
        pooled_text_emb = pooled_text_emb.to(dtype=self.dtype)
        pooled_text_emb = self.cond_embed(pooled_text_emb).to(encoder_hidden_states.dtype)

        hidden_states = self.embed(input_ids)

        hidden_states = self.down_block(
            hidden_states,
            pooled_text_emb=pooled_text_emb,
            encoder_hidden_states=encoder_hidden_states,
            cross_attention_kwargs=cross_attention_kwargs,
        )

        batch_size, channels, height, width = hidden_states.shape
        hidden_states = hidden_states.permute(0, 2, 3, 1).reshape(batch_size, height * width, channels)

        hidden_states = self.project_to_hidden_norm(hidden_states)
        hidden_states = self.project_to_hidden(hidden_states)

        for layer in self.transformer_layers:
            hidden_states = layer(
                hidden_states,
                encoder_hidden_states=encoder_hidden_states,
                cross_attention_kwargs=cross_attention_kwargs,
                added_cond_kwargs={"pooled_text_emb": pooled_text_emb},
            )

        hidden_states = self.project_from_hidden_norm(hidden_states)
        hidden_states = self.project_from_hidden(hidden_states)

        hidden_states = hidden_states.reshape(batch_size, height, width, channels).permute(0, 3, 1, 2)

        hidden_states = self.up_block(
            hidden_states,
            pooled_text_emb=pooled_text_emb,
            encoder_hidden_states=encoder_hidden_states,
            cross_attention_kwargs=cross_attention_kwargs,
        )

        logits = self.mlm_layer(hidden_states)

        return logits


def inputs(g):
    # a masked-token step: half the 16x16 grid still the mask id (vocab_size - 1), the rest codebook ids
    ids = torch.randint(0, 32, (1, 16, 16), generator=g)
    masked = torch.rand((1, 16, 16), generator=g) < 0.5
    ids = torch.where(masked, torch.full_like(ids, 39), ids)
    return {
        "input_ids": ids,
        "encoder_hidden_states": torch.randn((1, 8, 16), generator=g),
        "pooled_text_emb": torch.randn((1, 16), generator=g),
        "micro_conds": torch.tensor([[256.0, 256.0, 0.0, 0.0, 6.0]]),
    }


if __name__ == "__main__":
    capture_once(
        "uvit2d", UVit2DModel, inputs, sys.argv[1],
        dict(library_source="replica of huggingface/diffusers unets/uvit_2d.py@06d4fb510fee and the parts it "
                            "imports (attention.py BasicTransformerBlock/SkipFFTransformerBlock, normalization.py, "
                            "downsampling.py, upsampling.py) (torch 1.13)",
             note="aMUSEd UVit2DModel at hidden 32, block width 16: token ids -> Embedding, RMSNorm, 1x1 conv; "
                  "RMSNorm + padded 2x2 stride-2 conv downsample; ConvNeXt blocks with GlobalResponseNorm and a "
                  "(1 + scale), shift conditioning; SkipFF blocks (two RMSNorm-ed attentions to SiLU-Linear-mapped "
                  "text); micro-conds sinusoidal + pooled text -> Linear-SiLU-Linear; ada_norm_continuous "
                  "transformer layers (RMS, RMS, Layer norms modulated by the pooled embedding, GEGLU FFN); "
                  "RMSNorm + 2x2 ConvTranspose upsample; MLM head to 32 codebook logits; no biases anywhere",
             timestep="none: a masked-token model (input_ids int64 [1, 16, 16], mask id 39)"),
        name="transformer", output="logits")
