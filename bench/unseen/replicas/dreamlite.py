"""DreamLite's 2D transformer (DreamLiteTransformer2DModel, the attention stage of the DreamLite U-Net),
reimplemented for torch 1.13 (no diffusers here), captured small in f32 on CPU.

Follows huggingface/diffusers src/diffusers/models/transformers/transformer_2d_dreamlite.py at
032412cf065d788d674f87e57e26aa32b19c7827 (DreamLiteTransformer2DModel restricted to continuous inputs,
BasicTransformerBlockDreamLite with norm_type "layer_norm") with the parts it and its caller import:
unets/unet_dreamlite.py at 09e5dc029809adc2daeab83097cb086aaa611c36 (DreamLiteAttnProcessor2_0, which the U-Net
installs on every Attention; the DreamLite U-Net's defaults qk_norm "rms_norm", num_kv_heads 1, ff_mult 6,
use_linear_projection False, attention_head_dim = channels // heads), attention_processor.py (Attention with
qk_norm "rms_norm" = per-head RMSNorm of dim_head with ε 1e-5, kv_heads: to_k / to_v dim_head·kv_heads wide, bias
False, out_bias True; prepare_attention_mask), attention.py (FeedForward with activation "geglu", mult = ff_mult),
activations.py (GEGLU: one Linear to 2·inner, chunk, value·gelu(gate)), normalization.py (RMSNorm) and
attention_dispatch.py (the native backend of dispatch_attention_fn: SDPA on [B, L, H, D] permuted to [B, H, L, D]).
The same module tree, parameter names and shapes, call boundaries, and arithmetic line for line. Stand-in for what
torch 1.13 lacks: dispatch_attention_fn's native SDPA (its math path: default scale, the additive float mask).
The processor's __call__ is the Attention modules' forward.

The constructs it shows: a GroupNorm (ε 1e-6, affine) over the [B, C, H, W] map, a 1×1 conv proj_in, the map's
cells as rows (permute + reshape); per block a pre-LayerNorm self-attention (GQA: 4 query heads, 1 kv head, k and
v repeat_interleave'd up to 4 after a per-head RMSNorm on q and k of [B, L, H, D]) added to the residual, a
pre-LayerNorm cross-attention over the caption (same GQA and qk RMSNorm; the caption's 0/1 mask made an additive
(1 − mask)·−10000 bias, [B, 1, L] repeat_interleave'd over heads and viewed [B, H, 1, L]), a pre-LayerNorm GEGLU
feed-forward of 6·d (exact-erf GELU on the gate half); back to a map, a 1×1 conv proj_out, plus the block's input
(the global residual). No timestep and no modulation: DreamLite's U-Net never passes one to its transformers
(norm_type "layer_norm"; its time embedding conditions the resnets only). With DREAMLITE_SELF_ATTN=0 the model
is built as the U-Net's CrossAttn*NoSelfAttn* blocks build it (use_self_attention=False: no attn1, and the block
keeps norm1's output as its state, dropping the residual, before the cross-attention) — the DreamLite "remove
self-attention" path; the default is the self-attention variant (DreamLiteCrossAttnDownBlock2D, the mid block).

How it is called: DreamLitePipeline (pipelines/dreamlite/pipeline_dreamlite.py at 032412cf065d) calls
DreamLiteUNetModel (flow matching, timestep t = σ·1000 in the latents' dtype, CFG batch of uncond + cond, the
Qwen3-VL hidden states with their int64 0/1 mask); the U-Net turns that 2D mask into the (1 − mask)·−10000 bias
and calls each transformer as attn(hidden_states, encoder_hidden_states=…, cross_attention_kwargs=None,
attention_mask=None, encoder_attention_mask=…, return_dict=False)[0]. Here the transformer is the captured model
on its own: hidden_states the latent itself as a 32-channel 3×5 map (its feature map inside the U-Net), the 2D
int64 mask passed as is (the transformer converts a 2D mask exactly as the U-Net would), one sample (no CFG
batch), the output taken as the velocity as is.

usage: /usr/bin/python3 bench/unseen/replicas/dreamlite.py OUTDIR
"""
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

from run import capture
from hunyuanimage21 import RMSNorm


def dispatch_attention_fn(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                          enable_gqa=False, backend=None, parallel_config=None):
    """attention_dispatch.dispatch_attention_fn, native backend: [B, L, H, D] permuted to [B, H, L, D], torch 2's
    F.scaled_dot_product_attention (math path: default scale, an additive float mask), permuted back."""
    query, key, value = (x.permute(0, 2, 1, 3) for x in (query, key, value))
    scale = 1.0 / (query.shape[-1] ** 0.5) if scale is None else scale
    s = (query @ key.transpose(-2, -1)) * scale
    if attn_mask is not None:
        s = s.masked_fill(~attn_mask, float("-inf")) if attn_mask.dtype == torch.bool else s + attn_mask
    out = torch.softmax(s, dim=-1) @ value
    out = out.permute(0, 2, 1, 3)
    return out


def dreamlite_attn(attn, hidden_states, encoder_hidden_states=None, attention_mask=None, temb=None):
    """unet_dreamlite.DreamLiteAttnProcessor2_0.__call__."""
    residual = hidden_states
    if attn.spatial_norm is not None:
        hidden_states = attn.spatial_norm(hidden_states, temb)

    input_ndim = hidden_states.ndim

    if input_ndim == 4:
        batch_size, channel, height, width = hidden_states.shape
        hidden_states = hidden_states.view(batch_size, channel, height * width).transpose(1, 2)

    batch_size, sequence_length, _ = (
        hidden_states.shape if encoder_hidden_states is None else encoder_hidden_states.shape
    )

    if attention_mask is not None:
        attention_mask = attn.prepare_attention_mask(attention_mask, sequence_length, batch_size)
        attention_mask = attention_mask.view(batch_size, attn.heads, -1, attention_mask.shape[-1])

    if attn.group_norm is not None:
        hidden_states = attn.group_norm(hidden_states.transpose(1, 2)).transpose(1, 2)

    query = attn.to_q(hidden_states)

    if encoder_hidden_states is None:
        encoder_hidden_states = hidden_states
    elif attn.norm_cross:
        encoder_hidden_states = attn.norm_encoder_hidden_states(encoder_hidden_states)

    key = attn.to_k(encoder_hidden_states)
    value = attn.to_v(encoder_hidden_states)

    # --- GQA-aware reshape ---
    head_dim = query.shape[-1] // attn.heads
    kv_heads = key.shape[-1] // head_dim

    query = query.view(batch_size, -1, attn.heads, head_dim)
    key = key.view(batch_size, -1, kv_heads, head_dim)
    value = value.view(batch_size, -1, kv_heads, head_dim)

    if attn.norm_q is not None:
        query = attn.norm_q(query)
    if attn.norm_k is not None:
        key = attn.norm_k(key)

    if kv_heads != attn.heads:
        heads_per_kv_head = attn.heads // kv_heads
        key = torch.repeat_interleave(key, heads_per_kv_head, dim=2, output_size=key.shape[2] * heads_per_kv_head)
        value = torch.repeat_interleave(
            value, heads_per_kv_head, dim=2, output_size=value.shape[2] * heads_per_kv_head
        )

    hidden_states = dispatch_attention_fn(query, key, value, attn_mask=attention_mask)

    hidden_states = hidden_states.flatten(2, 3)
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


class Attention(nn.Module):
    """attention_processor.Attention(query_dim, cross_attention_dim, heads, dim_head, dropout, bias,
    upcast_attention, out_bias, qk_norm "rms_norm" or None, kv_heads) as BasicTransformerBlockDreamLite builds it,
    with DreamLiteAttnProcessor2_0 (the U-Net's) as its processor. No group / spatial / cross norms."""

    def __init__(self, query_dim, cross_attention_dim=None, heads=8, kv_heads=None, dim_head=64, dropout=0.0,
                 bias=False, upcast_attention=False, qk_norm=None, out_bias=True, eps=1e-5,
                 rescale_output_factor=1.0, residual_connection=False, processor=None):
        super().__init__()
        assert qk_norm in (None, "rms_norm")
        self.inner_dim = dim_head * heads
        self.inner_kv_dim = self.inner_dim if kv_heads is None else dim_head * kv_heads
        self.query_dim = query_dim
        self.use_bias = bias
        self.is_cross_attention = cross_attention_dim is not None
        self.cross_attention_dim = cross_attention_dim if cross_attention_dim is not None else query_dim
        self.upcast_attention = upcast_attention
        self.rescale_output_factor = rescale_output_factor
        self.residual_connection = residual_connection
        self.dropout = dropout
        self.out_dim = query_dim
        self.scale = dim_head ** -0.5
        self.heads = heads
        self.group_norm = None
        self.spatial_norm = None
        if qk_norm is None:
            self.norm_q = None
            self.norm_k = None
        else:
            self.norm_q = RMSNorm(dim_head, eps=eps)
            self.norm_k = RMSNorm(dim_head, eps=eps)
        self.norm_cross = None
        self.to_q = nn.Linear(query_dim, self.inner_dim, bias=bias)
        self.to_k = nn.Linear(self.cross_attention_dim, self.inner_kv_dim, bias=bias)
        self.to_v = nn.Linear(self.cross_attention_dim, self.inner_kv_dim, bias=bias)
        self.to_out = nn.ModuleList([nn.Linear(self.inner_dim, self.out_dim, bias=out_bias), nn.Dropout(dropout)])
        self.processor = processor if processor is not None else dreamlite_attn

    def prepare_attention_mask(self, attention_mask, target_length, batch_size, out_dim=3):
        head_size = self.heads
        if attention_mask is None:
            return attention_mask
        current_length = attention_mask.shape[-1]
        if current_length != target_length:
            attention_mask = F.pad(attention_mask, (0, target_length), value=0.0)
        if out_dim == 3:
            if attention_mask.shape[0] < batch_size * head_size:
                attention_mask = attention_mask.repeat_interleave(
                    head_size, dim=0, output_size=attention_mask.shape[0] * head_size)
        elif out_dim == 4:
            attention_mask = attention_mask.unsqueeze(1)
            attention_mask = attention_mask.repeat_interleave(
                head_size, dim=1, output_size=attention_mask.shape[1] * head_size)
        return attention_mask

    def forward(self, hidden_states, encoder_hidden_states=None, attention_mask=None, **cross_attention_kwargs):
        return self.processor(self, hidden_states, encoder_hidden_states=encoder_hidden_states,
                              attention_mask=attention_mask, **cross_attention_kwargs)


class GEGLU(nn.Module):
    """activations.GEGLU(dim_in, dim_out, bias)."""

    def __init__(self, dim_in, dim_out, approximate="none", bias=True):
        super().__init__()
        self.proj = nn.Linear(dim_in, dim_out * 2, bias=bias)
        self.approximate = approximate

    def gelu(self, gate):
        return F.gelu(gate, approximate=self.approximate)

    def forward(self, hidden_states, *args, **kwargs):
        hidden_states = self.proj(hidden_states)
        hidden_states, gate = hidden_states.chunk(2, dim=-1)
        return hidden_states * self.gelu(gate)


class FeedForward(nn.Module):
    """attention.FeedForward(dim, dropout, activation_fn "geglu", final_dropout, inner_dim, bias, mult)."""

    def __init__(self, dim, dim_out=None, mult=4, dropout=0.0, activation_fn="geglu", final_dropout=False,
                 inner_dim=None, bias=True):
        super().__init__()
        assert activation_fn == "geglu"
        if inner_dim is None:
            inner_dim = int(dim * mult)
        dim_out = dim_out if dim_out is not None else dim
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


class BasicTransformerBlockDreamLite(nn.Module):
    """norm_type "layer_norm" (the branch DreamLite's U-Net builds): no positional embeddings, no GLIGEN fuser, no
    chunked feed-forward."""

    def __init__(self, dim, num_attention_heads, attention_head_dim, dropout=0.0, cross_attention_dim=None,
                 activation_fn="geglu", attention_bias=False, only_cross_attention=False,
                 double_self_attention=False, upcast_attention=False, norm_elementwise_affine=True,
                 norm_type="layer_norm", norm_eps=1e-5, final_dropout=False, ff_inner_dim=None, ff_bias=True,
                 attention_out_bias=True, use_self_attention=True, qk_norm=None, num_kv_heads=None, ff_mult=4):
        super().__init__()
        assert norm_type == "layer_norm"
        self.dim = dim
        self.num_attention_heads = num_attention_heads
        self.attention_head_dim = attention_head_dim
        self.only_cross_attention = only_cross_attention
        self.use_self_attention = use_self_attention
        self.norm_type = norm_type
        self.pos_embed = None

        # 1. Self-Attn (or its replacement)
        self.norm1 = nn.LayerNorm(dim, elementwise_affine=norm_elementwise_affine, eps=norm_eps)
        if use_self_attention:
            self.attn1 = Attention(
                query_dim=dim, heads=num_attention_heads, dim_head=attention_head_dim, dropout=dropout,
                bias=attention_bias, cross_attention_dim=cross_attention_dim if only_cross_attention else None,
                upcast_attention=upcast_attention, out_bias=attention_out_bias, qk_norm=qk_norm,
                kv_heads=num_kv_heads)
        else:
            self.attn1 = None

        # 2. Cross-Attn
        if cross_attention_dim is not None or double_self_attention:
            self.norm2 = nn.LayerNorm(dim, norm_eps, norm_elementwise_affine)
            self.attn2 = Attention(
                query_dim=dim, cross_attention_dim=cross_attention_dim if not double_self_attention else None,
                heads=num_attention_heads, dim_head=attention_head_dim, dropout=dropout, bias=attention_bias,
                upcast_attention=upcast_attention, out_bias=attention_out_bias, qk_norm=qk_norm,
                kv_heads=num_kv_heads)
        else:
            self.norm2 = None
            self.attn2 = None

        # 3. Feed-forward
        self.norm3 = nn.LayerNorm(dim, norm_eps, norm_elementwise_affine)
        self.ff = FeedForward(dim, dropout=dropout, activation_fn=activation_fn, final_dropout=final_dropout,
                              inner_dim=ff_inner_dim, bias=ff_bias, mult=ff_mult)

        self._chunk_size = None
        self._chunk_dim = 0

    def forward(self, hidden_states, attention_mask=None, encoder_hidden_states=None, encoder_attention_mask=None,
                timestep=None, cross_attention_kwargs=None, class_labels=None, added_cond_kwargs=None):
        # 0. Self-Attention norm
        batch_size = hidden_states.shape[0]
        norm_hidden_states = self.norm1(hidden_states)

        # 1. GLIGEN kwargs split
        cross_attention_kwargs = cross_attention_kwargs.copy() if cross_attention_kwargs is not None else {}
        cross_attention_kwargs.pop("gligen", None)

        if self.use_self_attention:
            attn_output = self.attn1(
                norm_hidden_states,
                encoder_hidden_states=encoder_hidden_states if self.only_cross_attention else None,
                attention_mask=attention_mask,
                **cross_attention_kwargs,
            )
            hidden_states = attn_output + hidden_states
            if hidden_states.ndim == 4:
                hidden_states = hidden_states.squeeze(1)
        else:
            # DreamLite "Remove self-attention" path
            hidden_states = norm_hidden_states
            if hidden_states.ndim == 4:
                hidden_states = hidden_states.squeeze(1)

        # 3. Cross-Attention
        if self.attn2 is not None:
            norm_hidden_states = self.norm2(hidden_states)
            attn_output = self.attn2(
                norm_hidden_states,
                encoder_hidden_states=encoder_hidden_states,
                attention_mask=encoder_attention_mask,
                **cross_attention_kwargs,
            )
            hidden_states = attn_output + hidden_states

        # 4. Feed-forward
        norm_hidden_states = self.norm3(hidden_states)
        ff_output = self.ff(norm_hidden_states)
        hidden_states = ff_output + hidden_states
        if hidden_states.ndim == 4:
            hidden_states = hidden_states.squeeze(1)

        return hidden_states


class DreamLiteTransformer2DModel(nn.Module):
    def __init__(self, num_attention_heads=16, attention_head_dim=88, in_channels=None, out_channels=None,
                 num_layers=1, dropout=0.0, norm_num_groups=32, cross_attention_dim=None, attention_bias=False,
                 activation_fn="geglu", num_embeds_ada_norm=None, use_linear_projection=False,
                 only_cross_attention=False, double_self_attention=False, upcast_attention=False,
                 norm_type="layer_norm", norm_elementwise_affine=True, norm_eps=1e-5, attention_type="default",
                 use_self_attention=True, qk_norm=None, num_kv_heads=None, ff_mult=4):
        super().__init__()
        assert in_channels is not None and attention_type == "default"
        self.use_linear_projection = use_linear_projection
        self.num_attention_heads = num_attention_heads
        self.attention_head_dim = attention_head_dim
        self.inner_dim = num_attention_heads * attention_head_dim
        self.in_channels = in_channels
        self.out_channels = in_channels if out_channels is None else out_channels
        self.gradient_checkpointing = False

        self.norm = torch.nn.GroupNorm(num_groups=norm_num_groups, num_channels=self.in_channels, eps=1e-6,
                                       affine=True)
        if self.use_linear_projection:
            self.proj_in = torch.nn.Linear(self.in_channels, self.inner_dim)
        else:
            self.proj_in = torch.nn.Conv2d(self.in_channels, self.inner_dim, kernel_size=1, stride=1, padding=0)

        self.transformer_blocks = nn.ModuleList([
            BasicTransformerBlockDreamLite(
                self.inner_dim, num_attention_heads, attention_head_dim, dropout=dropout,
                cross_attention_dim=cross_attention_dim, activation_fn=activation_fn,
                attention_bias=attention_bias, only_cross_attention=only_cross_attention,
                double_self_attention=double_self_attention, upcast_attention=upcast_attention,
                norm_type=norm_type, norm_elementwise_affine=norm_elementwise_affine, norm_eps=norm_eps,
                use_self_attention=use_self_attention, qk_norm=qk_norm, num_kv_heads=num_kv_heads,
                ff_mult=ff_mult)
            for _ in range(num_layers)])

        if self.use_linear_projection:
            self.proj_out = torch.nn.Linear(self.inner_dim, self.out_channels)
        else:
            self.proj_out = torch.nn.Conv2d(self.inner_dim, self.out_channels, kernel_size=1, stride=1, padding=0)

    def _operate_on_continuous_inputs(self, hidden_states):
        batch, _, height, width = hidden_states.shape
        hidden_states = self.norm(hidden_states)

        if not self.use_linear_projection:
            hidden_states = self.proj_in(hidden_states)
            inner_dim = hidden_states.shape[1]
            hidden_states = hidden_states.permute(0, 2, 3, 1).reshape(batch, height * width, inner_dim)
        else:
            inner_dim = hidden_states.shape[1]
            hidden_states = hidden_states.permute(0, 2, 3, 1).reshape(batch, height * width, inner_dim)
            hidden_states = self.proj_in(hidden_states)

        return hidden_states, inner_dim

    def _get_output_for_continuous_inputs(self, hidden_states, residual, batch_size, height, width, inner_dim):
        if not self.use_linear_projection:
            hidden_states = (
                hidden_states.reshape(batch_size, height, width, inner_dim).permute(0, 3, 1, 2).contiguous()
            )
            hidden_states = self.proj_out(hidden_states)
        else:
            hidden_states = self.proj_out(hidden_states)
            hidden_states = (
                hidden_states.reshape(batch_size, height, width, inner_dim).permute(0, 3, 1, 2).contiguous()
            )

        output = hidden_states + residual
        return output

    def forward(self, hidden_states, encoder_hidden_states=None, timestep=None, added_cond_kwargs=None,
                class_labels=None, cross_attention_kwargs=None, attention_mask=None, encoder_attention_mask=None,
                return_dict=True):
        # Convert masks to additive biases (broadcast-friendly).
        if attention_mask is not None and attention_mask.ndim == 2:
            attention_mask = (1 - attention_mask.to(hidden_states.dtype)) * -10000.0
            attention_mask = attention_mask.unsqueeze(1)

        if encoder_attention_mask is not None and encoder_attention_mask.ndim == 2:
            encoder_attention_mask = (1 - encoder_attention_mask.to(hidden_states.dtype)) * -10000.0
            encoder_attention_mask = encoder_attention_mask.unsqueeze(1)

        # 1. Input
        batch_size, _, height, width = hidden_states.shape
        residual = hidden_states
        hidden_states, inner_dim = self._operate_on_continuous_inputs(hidden_states)

        # 2. Blocks
        for block in self.transformer_blocks:
            hidden_states = block(
                hidden_states,
                attention_mask=attention_mask,
                encoder_hidden_states=encoder_hidden_states,
                encoder_attention_mask=encoder_attention_mask,
                timestep=timestep,
                cross_attention_kwargs=cross_attention_kwargs,
                class_labels=class_labels,
            )

        # 3. Output
        output = self._get_output_for_continuous_inputs(
            hidden_states=hidden_states, residual=residual, batch_size=batch_size, height=height, width=width,
            inner_dim=inner_dim)

        if not return_dict:
            return (output,)
        return output


SELF_ATTN = os.environ.get("DREAMLITE_SELF_ATTN", "1") != "0"


def build():
    # Small DreamLite transformer as its U-Net builds one (num_attention_heads 4, attention_head_dim = channels //
    # heads, qk_norm "rms_norm", num_kv_heads 1, ff_mult 6, use_linear_projection False, activation geglu,
    # norm_num_groups = resnet groups): 32 channels (4 heads of 8), 8 groups, 2 layers, a 24-wide caption; a
    # 3×5 map (15 cells: the 6·d GEGLU over every cell dominates the trace).
    return DreamLiteTransformer2DModel(num_attention_heads=4, attention_head_dim=32 // 4, in_channels=32,
                                       num_layers=2, cross_attention_dim=24, norm_num_groups=8,
                                       use_linear_projection=False, upcast_attention=False,
                                       qk_norm="rms_norm", ff_mult=6, num_kv_heads=1,
                                       use_self_attention=SELF_ATTN)


def inputs(g):
    n = 5
    txt = torch.randn((1, n, 24), generator=g)
    mask = torch.ones(1, n, dtype=torch.long)
    mask[:, n - 1:] = 0  # pad_sequence's padding of the shorter prompt
    return {"encoder_hidden_states": txt, "encoder_attention_mask": mask,
            "noise": torch.randn((1, 32, 3, 5), generator=g)}


def call(model, x, sigma, c):
    return model(x, encoder_hidden_states=c["encoder_hidden_states"], cross_attention_kwargs=None,
                 attention_mask=None, encoder_attention_mask=c["encoder_attention_mask"], return_dict=False)[0]


PRODUCER = dict(
    library_source="replica of huggingface/diffusers transformer_2d_dreamlite.py@032412cf065d with "
                   "unet_dreamlite.py@09e5dc029809's DreamLiteAttnProcessor2_0 and the parts it imports (torch 1.13)",
    timestep="none: DreamLite's U-Net passes no timestep to its transformers (the step's sigma is unused)",
    velocity="model output as is (the map plus the transformer's residual), not negated",
    note="DreamLiteTransformer2DModel, 2 layers, " + ("self-attention kept" if SELF_ATTN else
                                                       "use_self_attention=False (norm1's output replaces the state)")
         + ": GroupNorm(8, ε 1e-6) + 1×1 conv in, cells as rows; per block LayerNorm → GQA self-attention (4 q "
         "heads, 1 kv head, per-head RMSNorm q/k, kv repeat_interleave) + residual, LayerNorm → GQA cross-attention "
         "over the caption with (1 − mask)·−10000 bias + residual, LayerNorm → GEGLU FF (6·d) + residual; back to a "
         "map, 1×1 conv out, + input")

if __name__ == "__main__":
    capture("dreamlite", build, inputs, call, sys.argv[1], PRODUCER)
