"""The Stable Diffusion x2 latent upscaler's U-Net (UNet2DConditionModel as stabilityai/sd-x2-latent-upscaler configures
it: k-diffusion's upscaler converted, KDownBlock2D / KCrossAttnDownBlock2D / KCrossAttnUpBlock2D / KUpBlock2D), with
the input and output arithmetic StableDiffusionLatentUpscalePipeline wraps around it, reimplemented for torch 1.13 (no
diffusers here), captured small in f32 on CPU.

Follows huggingface/diffusers src/diffusers/models/unets/unet_2d_condition.py at
00f354d14d00ed60cfce2ea7c5efceca2e4c4c3f line for line with the upscaler's configuration: time_embedding_type
"fourier" (_set_time_proj: time_embed_dim = block_out_channels[0] * 2, time_proj = GaussianFourierProjection(
time_embed_dim // 2, set_W_to_weight=False, log=False, flip_sin_to_cos=True), timestep_input_dim = time_embed_dim),
time_embedding = TimestepEmbedding(timestep_input_dim, time_embed_dim, act_fn="gelu", post_act_fn="gelu"
(timestep_post_act), cond_proj_dim=time_cond_proj_dim) so that timestep_cond is projected (cond_proj, no bias) and
added to the Fourier features before linear_1; conv_in_kernel = conv_out_kernel = 1; mid_block_type None (no mid
block); norm_num_groups None (no conv_norm_out / conv_act: the U-Net ends on conv_out alone); no class, addition or
encoder_hid embeddings; no masks; upsample_size None (the K up blocks ignore it). resnet_time_scale_shift is
"scale_shift" in the checkpoint's and the test's config, but the K blocks never read it: they build every resnet as
ResnetBlockCondNorm2D(time_embedding_norm="ada_group"). The blocks follow src/diffusers/models/unets/unet_2d_blocks.py
at 049ca3822f9eb3621c96c11bba58b8e579cb3cc1: get_down_block / get_up_block's K branches (KCrossAttnDownBlock2D gets
add_self_attention = not add_downsample, so only the deepest level's down block self-attends); KDownBlock2D and
KCrossAttnDownBlock2D (num_layers resnets, resnet_group_size 32 so groups = channels // 32, a KAttentionBlock after
each resnet of the cross-attention kind, KDownsample2D at the end of all but the last level; their output_states are
the resnet/attention outputs, (None,) · num_layers for the last level); KCrossAttnUpBlock2D and KUpBlock2D (num_layers
- 1 resnets; only res_hidden_states_tuple[-1] is joined, by channels, and not at all when it is None;
is_first_block = in_channels == out_channels == temb_channels (no skip joined in, k_in = out_channels, self-attention
added), is_middle_block = in_channels != out_channels (k_in = 2·out, the last resnet's conv2 and shortcut to
in_channels via conv_2d_out_channels, its attention as wide as in_channels), otherwise k_in = 2·out; KUpsample2D after
all but the last level); KAttentionBlock (optional self-attention: AdaGroupNorm norm1 of the map with the time
embedding, the map's cells as rows (_to_3d: permute(0, 2, 3, 1)), attn1, back to a map (_to_4d), plus the input;
then the cross-attention the same way through norm2 and attn2, whose Attention has cross_attention_norm "layer_norm":
norm_cross, a LayerNorm over the text states, applied by AttnProcessor2_0's norm_encoder_hidden_states before to_k /
to_v; attention_bias True: to_q / to_k / to_v with bias; no feed-forward). ResnetBlockCondNorm2D as
src/diffusers/models/resnet.py holds it (norm1 AdaGroupNorm(temb, in, groups), the activation, conv1 3x3, norm2
AdaGroupNorm(temb, out, groups_out), the activation, dropout, conv2 3x3 to conv_2d_out_channels, a bias-free 1x1
conv_shortcut where in_channels != conv_2d_out_channels, (input + h) / 1; the store holds resnet.py only at
00194089c74ad61e23cbdf6de51ace3fcbbfda1b, before "ada_group" moved out of ResnetBlock2D into this class: the same
parameters and arithmetic there, under ResnetBlock2D's ada_group branch). AdaGroupNorm from
src/diffusers/models/normalization.py at df9efaec266bb41dae8e93729a2c35716600d5bc (Linear(temb, 2·C) of the time
embedding, [:, :, None, None], chunk into scale and shift, F.group_norm without affine, x·(1 + scale) + shift).
KDownsample2D / KUpsample2D from src/diffusers/models/downsampling.py and upsampling.py at
0b011181c92d3e0bf236adf7709c677f5529215e (reflect pad by 1, then a stride-2 conv2d / conv_transpose2d (padding 3)
whose [C, C, 4, 4] weight is built per call: new_zeros, the [1, 3, 3, 1]/8 kernel's outer product (x2 per axis for
the upsampler) written on the channel diagonal by index_put). GaussianFourierProjection is unet1d.py's (embeddings.py
at 0002117e9fa1351a3c0ee988d9c13e683cfb273b): cat([cos, sin]) of x[:, None] · weight · 2π (the timestep f32, the
weight the model's dtype: f32 product, cast to the sample's dtype by get_time_embed). TimestepEmbedding is
lcm_unet.py's (embeddings.py at 0002117e, with cond_proj) given the gelu act and post_act. get_activation("gelu") is
activations.py's, a new nn.GELU per call (ACT2CLS; 86e62ae4c571's shared ACTIVATION_FUNCTIONS instance is older).
Attention is dit.py's (attention_processor.py's Attention with bias, AttnProcessor2_0 as its forward) with the
cross-attention LayerNorm added. Stand-ins for what torch 1.13 lacks: F.scaled_dot_product_attention (run.py's sdpa,
its math path), and in the bf16 run on the CPU F.pad(mode="reflect") and F.conv_transpose2d, which torch 1.13's CPU
has no BFloat16 kernels for: done in f32 on the bf16 values and cast back (the pad copies values, so exactly; the
transposed conv's weights are multiples of 1/16, exact in bf16, so only its accumulation differs from a bf16 kernel's
f32 accumulation).

Pipeline as StableDiffusionLatentUpscalePipeline
(src/diffusers/pipelines/stable_diffusion/pipeline_stable_diffusion_latent_upscale.py at
c4913011274e0cfff915e3bd63209a50577ec8b9) calls it with guidance_scale 0, as the pipeline's own docstring example and
its integration tests (test_latent_upscaler_fp16*) call it (the default 9.0 would double the batch: left out to keep
the trace small; do_classifier_free_guidance = guidance_scale > 1 is False, and guidance_scale == 0 replaces the
prompt by ""): _encode_prompt gives the CLIP text encoder's hidden_states[-1] and pooler_output (here drawn at random,
[1, 6, 24] and [1, 24]); the image is already latents (4 channels: no VAE encode), image.to(text_embeddings.dtype),
torch.cat([image] * 1). Before the loop (prepare): noise_level = tensor([0.0]) (f32) per batch row, inv_noise_level =
(noise_level² + 1)^-0.5, image_cond = F.interpolate(image, scale_factor=2, mode="nearest") · inv_noise_level[:, None,
None, None] (an f32 [1, 1, 1, 1] times the latents: f32 in the bf16 run too), .to(text_embeddings.dtype);
noise_level_embed = cat([ones(B, 64), zeros(B, 64)]) in the pooled output's dtype; timestep_condition =
cat([noise_level_embed, text_pooler_out], dim=1) [1, 152]. Each step (call): sigma = scheduler.sigmas[i] (an f32 0-d
tensor); latent_model_input = latents; scaled_model_input = scheduler.scale_model_input(latent_model_input, t) =
latent_model_input / (σ² + 1)^0.5 (EulerDiscreteScheduler: Karras's c_in); cat([scaled_model_input, image_cond],
dim=1) (8 channels in); timestep = log(σ) · 0.25 (Karras's c_noise, f32 0-d); self.unet(scaled_model_input, timestep,
encoder_hidden_states=text_embeddings, timestep_cond=timestep_condition).sample; noise_pred[:, :-1] (the variance
channel dropped: 5 out, 4 kept); noise_pred = inv_sigma · latent_model_input + scheduler.scale_model_input(σ, t) ·
noise_pred with inv_sigma = 1 / (σ² + 1) (c_skip) and scale_model_input(σ) = σ / (σ² + 1)^0.5 (c_out): the denoised
latents D(x; σ) (Karras et al. 2022 table 1, σ_data = 1), f32 0-d factors times the latents' dtype.

How its Karras-style σ maps onto run.py's loop x ← x + (σ_next − σ)·v: run.py's σ is taken as the scheduler's σ
itself (σ_K = σ = 1, 0.75, 0.4, then 0), and the velocity is the EulerDiscreteScheduler's own step with
prediction_type "sample" (the checkpoint's scheduler config, as the pipeline's fast test builds it:
EulerDiscreteScheduler(prediction_type="sample")): pred_original_sample = D, derivative = (x − D) / σ (the latents
upcast to f32 first, as the scheduler does), prev = x + (σ_next − σ) · derivative. So v = (x − D)/σ and run.py's
three steps are exactly the Euler scheduler's over sigmas (1, 0.75, 0.4, 0) (s_churn 0, so σ_hat = σ); the
pipeline's one difference left out is its initial latents · init_noise_sigma (run.py's noise enters as is). (The
store's scheduling_euler_discrete.py, 4635846c7c09, predates the "sample" branch and the f32 upcast.)

The constructs it shows: the model input a σ-dependent rescaling of the latents (c_in) joined by channels to a
nearest-×2 upsampled conditioning image made before the loop; the timestep log(σ)/4 through Gaussian Fourier features
plus a projected conditioning vector (constant ones / zeros and the pooled text) ahead of a GELU MLP with a GELU after
its last layer; every norm in the U-Net an AdaGroupNorm (affine-free GroupNorm whose per-channel scale and shift are a
Linear of the time embedding); attention blocks without feed-forward, their cross-attention reading LayerNormed text
through biased projections, self-attention only at the deepest level; fixed-kernel, reflect-padded ×2 down- and
up-sampling (a per-call diagonal [C, C, 4, 4] weight, conv2d stride 2 / conv_transpose2d); up blocks that join only
their level's last skip, one with no skip at all; no mid block, no output norm, 1x1 conv_in / conv_out, a variance
channel dropped; the output preconditioned c_skip·x + c_out·F and turned into the Euler derivative (x − D)/σ.

Tiny config, after tests/pipelines/stable_diffusion_2/test_stable_diffusion_latent_upscale.py's dummy U-Net (at
01a64996381e5bd3bdb1014276dcb3a1ea51f202: block_out_channels (32, 32, 64, 64), attention_head_dim 8, act_fn "gelu",
norm_num_groups None, time_cond_proj_dim 160 = 128 + its 32-wide CLIP, conv kernels 1, cross_attention_dim 32,
in_channels 8, out_channels 5, mid_block_type None, fourier, timestep_post_act "gelu", the four K down and up block
types): three levels instead of four, block_out_channels (32, 64, 64) (the resnets' groups are channels // 32, so no
level may be narrower than 32; the first up block self-attends only when the deepest two widths equal time_embed_dim
= 2·32 = 64), down (KDownBlock2D, KCrossAttnDownBlock2D, KCrossAttnDownBlock2D), up (KCrossAttnUpBlock2D,
KCrossAttnUpBlock2D, KUpBlock2D), layers_per_block 1 (the test's 2: one resnet a down block, num_layers 2 so one resnet
an up block), attention_head_dim 8 (heads of width 8: 4 heads at 32 channels, 8 at 64), cross_attention_dim 24 (text
unlike every query width), time_cond_proj_dim 152 = 128 + 24; time_embed_dim 64. Up 0 (64 in, 64 out = temb) is the
"first" kind (no skip, self-attention), up 1 (32 in, 64 out) the "middle" kind (the skip joined: 128 -> 64, conv2 and
a bias-free shortcut to 32, its attention 32 wide); the four-level "neither" kind (k_in = 2·out, out = in) is left out
with the fourth level. Low-res latents [1, 4, 8, 4] -> latents [1, 4, 16, 8] (the U-Net's input [1, 8, 16, 8]; maps of
16x8, 8x4, 4x2 by level: not square, and every map at least 2 wide for the reflect pads). 7.8 MB in f32 (417 captured
calls); four levels on a 16x16 latent with guidance made 20 MB, three levels at 16x8 with guidance 12.6 MB.

usage: /usr/bin/python3 bench/unseen/replicas/sd_latent_upscaler.py OUTDIR
REPLICA_DTYPE=bf16 [REPLICA_DEVICE=cuda] as run.py's replicas: the bf16 run, beside the f32 one.
"""
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

import dit
import lcm_unet
from run import capture, sdpa
from unet1d import GaussianFourierProjection


def get_activation(act_fn):
    """activations.get_activation: ACT2CLS[act_fn]() ("gelu" is nn.GELU)."""
    act_fn = act_fn.lower()
    ACT2CLS = {"swish": nn.SiLU, "silu": nn.SiLU, "mish": nn.Mish, "gelu": nn.GELU, "relu": nn.ReLU}
    return ACT2CLS[act_fn]()


def _lacks_bf16_kernel(x):
    """torch 1.13's CPU has no BFloat16 reflection_pad2d or slow_conv_transpose2d (torch 2 has both)."""
    return x.dtype == torch.bfloat16 and x.device.type == "cpu" and torch.__version__ < "2"


class TimestepEmbedding(lcm_unet.TimestepEmbedding):
    """embeddings.TimestepEmbedding with act_fn / post_act_fn from get_activation and cond_proj_dim."""

    def __init__(self, in_channels, time_embed_dim, act_fn="silu", out_dim=None, post_act_fn=None,
                 cond_proj_dim=None, sample_proj_bias=True):
        super().__init__(in_channels, time_embed_dim, out_dim=out_dim, cond_proj_dim=cond_proj_dim,
                         sample_proj_bias=sample_proj_bias)
        self.act = get_activation(act_fn)
        if post_act_fn is None:
            self.post_act = None
        else:
            self.post_act = get_activation(post_act_fn)


class AdaGroupNorm(nn.Module):
    """normalization.AdaGroupNorm."""

    def __init__(self, embedding_dim, out_dim, num_groups, act_fn=None, eps=1e-5):
        super().__init__()
        self.num_groups = num_groups
        self.eps = eps
        if act_fn is None:
            self.act = None
        else:
            self.act = get_activation(act_fn)
        self.linear = nn.Linear(embedding_dim, out_dim * 2)

    def forward(self, x, emb):
        if self.act:
            emb = self.act(emb)
        emb = self.linear(emb)
        emb = emb[:, :, None, None]
        scale, shift = emb.chunk(2, dim=1)
        x = F.group_norm(x, self.num_groups, eps=self.eps)
        x = x * (1 + scale) + shift
        return x


class ResnetBlockCondNorm2D(nn.Module):
    """resnet.ResnetBlockCondNorm2D with time_embedding_norm "ada_group" (no up / down)."""

    def __init__(self, *, in_channels, out_channels=None, conv_shortcut=False, dropout=0.0, temb_channels=512,
                 groups=32, groups_out=None, eps=1e-6, non_linearity="swish", time_embedding_norm="ada_group",
                 output_scale_factor=1.0, use_in_shortcut=None, conv_shortcut_bias=True, conv_2d_out_channels=None):
        super().__init__()
        self.in_channels = in_channels
        out_channels = in_channels if out_channels is None else out_channels
        self.out_channels = out_channels
        self.use_conv_shortcut = conv_shortcut
        self.output_scale_factor = output_scale_factor
        self.time_embedding_norm = time_embedding_norm
        if groups_out is None:
            groups_out = groups
        assert self.time_embedding_norm == "ada_group"
        self.norm1 = AdaGroupNorm(temb_channels, in_channels, groups, eps=eps)
        self.conv1 = nn.Conv2d(in_channels, out_channels, kernel_size=3, stride=1, padding=1)
        self.norm2 = AdaGroupNorm(temb_channels, out_channels, groups_out, eps=eps)
        self.dropout = torch.nn.Dropout(dropout)
        conv_2d_out_channels = conv_2d_out_channels or out_channels
        self.conv2 = nn.Conv2d(out_channels, conv_2d_out_channels, kernel_size=3, stride=1, padding=1)
        self.nonlinearity = get_activation(non_linearity)
        self.upsample = self.downsample = None
        self.use_in_shortcut = self.in_channels != conv_2d_out_channels if use_in_shortcut is None else use_in_shortcut
        self.conv_shortcut = None
        if self.use_in_shortcut:
            self.conv_shortcut = nn.Conv2d(in_channels, conv_2d_out_channels, kernel_size=1, stride=1, padding=0,
                                           bias=conv_shortcut_bias)

    def forward(self, input_tensor, temb):
        hidden_states = input_tensor
        hidden_states = self.norm1(hidden_states, temb)
        hidden_states = self.nonlinearity(hidden_states)
        hidden_states = self.conv1(hidden_states)
        hidden_states = self.norm2(hidden_states, temb)
        hidden_states = self.nonlinearity(hidden_states)
        hidden_states = self.dropout(hidden_states)
        hidden_states = self.conv2(hidden_states)
        if self.conv_shortcut is not None:
            input_tensor = self.conv_shortcut(input_tensor)
        output_tensor = (input_tensor + hidden_states) / self.output_scale_factor
        return output_tensor


class KDownsample2D(nn.Module):
    """downsampling.KDownsample2D."""

    def __init__(self, pad_mode="reflect"):
        super().__init__()
        self.pad_mode = pad_mode
        kernel_1d = torch.tensor([[1 / 8, 3 / 8, 3 / 8, 1 / 8]])
        self.pad = kernel_1d.shape[1] // 2 - 1
        self.register_buffer("kernel", kernel_1d.T @ kernel_1d, persistent=False)

    def forward(self, inputs):
        if _lacks_bf16_kernel(inputs):  # stand-in: the reflect pad in f32, exact
            inputs = F.pad(inputs.float(), (self.pad,) * 4, self.pad_mode).to(inputs.dtype)
        else:
            inputs = F.pad(inputs, (self.pad,) * 4, self.pad_mode)
        weight = inputs.new_zeros([inputs.shape[1], inputs.shape[1], self.kernel.shape[0], self.kernel.shape[1]])
        indices = torch.arange(inputs.shape[1], device=inputs.device)
        kernel = self.kernel.to(weight)[None, :].expand(inputs.shape[1], -1, -1)
        weight[indices, indices] = kernel
        return F.conv2d(inputs, weight, stride=2)


class KUpsample2D(nn.Module):
    """upsampling.KUpsample2D."""

    def __init__(self, pad_mode="reflect"):
        super().__init__()
        self.pad_mode = pad_mode
        kernel_1d = torch.tensor([[1 / 8, 3 / 8, 3 / 8, 1 / 8]]) * 2
        self.pad = kernel_1d.shape[1] // 2 - 1
        self.register_buffer("kernel", kernel_1d.T @ kernel_1d, persistent=False)

    def forward(self, inputs):
        stand_in = _lacks_bf16_kernel(inputs)
        if stand_in:  # stand-in: the reflect pad in f32, exact
            inputs = F.pad(inputs.float(), ((self.pad + 1) // 2,) * 4, self.pad_mode).to(inputs.dtype)
        else:
            inputs = F.pad(inputs, ((self.pad + 1) // 2,) * 4, self.pad_mode)
        weight = inputs.new_zeros([inputs.shape[1], inputs.shape[1], self.kernel.shape[0], self.kernel.shape[1]])
        indices = torch.arange(inputs.shape[1], device=inputs.device)
        kernel = self.kernel.to(weight)[None, :].expand(inputs.shape[1], -1, -1)
        weight[indices, indices] = kernel
        if stand_in:  # stand-in: the transposed conv in f32 on the bf16 values, rounded once to bf16
            return F.conv_transpose2d(inputs.float(), weight.float(), stride=2,
                                      padding=self.pad * 2 + 1).to(inputs.dtype)
        return F.conv_transpose2d(inputs, weight, stride=2, padding=self.pad * 2 + 1)


class Attention(dit.Attention):
    """attention_processor.Attention (dit.py's: biased projections as bias=True asks) with cross_attention_norm
    (None or "layer_norm": norm_cross, a LayerNorm over the encoder states, made before the projections); forward is
    AttnProcessor2_0.__call__ for a 3-d input and no mask, norm_encoder_hidden_states applied after to_q."""

    def __init__(self, query_dim, cross_attention_dim=None, heads=8, dim_head=64, dropout=0.0, bias=False,
                 upcast_attention=False, cross_attention_norm=None):
        super().__init__(query_dim, cross_attention_dim=cross_attention_dim, heads=heads, dim_head=dim_head,
                         dropout=dropout, bias=bias, upcast_attention=upcast_attention)
        if cross_attention_norm is None:
            self.norm_cross = None
        elif cross_attention_norm == "layer_norm":
            self.norm_cross = nn.LayerNorm(self.cross_attention_dim)
            # registered where upstream's __init__ makes it: before to_q / to_k / to_v / to_out
            for name in ("to_q", "to_k", "to_v", "to_out"):
                self._modules[name] = self._modules.pop(name)  # to the end (a dict in torch 2, an OrderedDict in 1.13)
        else:
            raise ValueError(cross_attention_norm)

    def norm_encoder_hidden_states(self, encoder_hidden_states):
        assert self.norm_cross is not None, "self.norm_cross must be defined to call self.norm_encoder_hidden_states"
        if isinstance(self.norm_cross, nn.LayerNorm):
            encoder_hidden_states = self.norm_cross(encoder_hidden_states)
        return encoder_hidden_states

    def forward(self, hidden_states, encoder_hidden_states=None, attention_mask=None, temb=None):
        attn = self
        residual = hidden_states
        input_ndim = hidden_states.ndim
        assert input_ndim == 3 and attention_mask is None
        batch_size, sequence_length, _ = (
            hidden_states.shape if encoder_hidden_states is None else encoder_hidden_states.shape)
        query = attn.to_q(hidden_states)
        if encoder_hidden_states is None:
            encoder_hidden_states = hidden_states
        elif attn.norm_cross:
            encoder_hidden_states = attn.norm_encoder_hidden_states(encoder_hidden_states)
        key = attn.to_k(encoder_hidden_states)
        value = attn.to_v(encoder_hidden_states)
        inner_dim = key.shape[-1]
        head_dim = inner_dim // attn.heads
        query = query.view(batch_size, -1, attn.heads, head_dim).transpose(1, 2)
        key = key.view(batch_size, -1, attn.heads, head_dim).transpose(1, 2)
        value = value.view(batch_size, -1, attn.heads, head_dim).transpose(1, 2)
        # the output of sdp = (batch, num_heads, seq_len, head_dim)
        hidden_states = sdpa(query, key, value, mask=attention_mask)
        hidden_states = hidden_states.transpose(1, 2).reshape(batch_size, -1, attn.heads * head_dim)
        hidden_states = hidden_states.to(query.dtype)
        # linear proj
        hidden_states = attn.to_out[0](hidden_states)
        # dropout
        hidden_states = attn.to_out[1](hidden_states)
        if attn.residual_connection:
            hidden_states = hidden_states + residual
        hidden_states = hidden_states / attn.rescale_output_factor
        return hidden_states


class KAttentionBlock(nn.Module):
    """unet_2d_blocks.KAttentionBlock."""

    def __init__(self, dim, num_attention_heads, attention_head_dim, dropout=0.0, cross_attention_dim=None,
                 attention_bias=False, upcast_attention=False, temb_channels=768, add_self_attention=False,
                 cross_attention_norm=None, group_size=32):
        super().__init__()
        self.add_self_attention = add_self_attention
        # 1. Self-Attn
        if add_self_attention:
            self.norm1 = AdaGroupNorm(temb_channels, dim, max(1, dim // group_size))
            self.attn1 = Attention(query_dim=dim, heads=num_attention_heads, dim_head=attention_head_dim,
                                   dropout=dropout, bias=attention_bias, cross_attention_dim=None,
                                   cross_attention_norm=None)
        # 2. Cross-Attn
        self.norm2 = AdaGroupNorm(temb_channels, dim, max(1, dim // group_size))
        self.attn2 = Attention(query_dim=dim, cross_attention_dim=cross_attention_dim, heads=num_attention_heads,
                               dim_head=attention_head_dim, dropout=dropout, bias=attention_bias,
                               upcast_attention=upcast_attention, cross_attention_norm=cross_attention_norm)

    def _to_3d(self, hidden_states, height, weight):
        return hidden_states.permute(0, 2, 3, 1).reshape(hidden_states.shape[0], height * weight, -1)

    def _to_4d(self, hidden_states, height, weight):
        return hidden_states.permute(0, 2, 1).reshape(hidden_states.shape[0], -1, height, weight)

    def forward(self, hidden_states, encoder_hidden_states=None, emb=None, attention_mask=None,
                cross_attention_kwargs=None, encoder_attention_mask=None):
        cross_attention_kwargs = cross_attention_kwargs if cross_attention_kwargs is not None else {}
        # 1. Self-Attention
        if self.add_self_attention:
            norm_hidden_states = self.norm1(hidden_states, emb)
            height, weight = norm_hidden_states.shape[2:]
            norm_hidden_states = self._to_3d(norm_hidden_states, height, weight)
            attn_output = self.attn1(norm_hidden_states, encoder_hidden_states=None, attention_mask=attention_mask,
                                     **cross_attention_kwargs)
            attn_output = self._to_4d(attn_output, height, weight)
            hidden_states = attn_output + hidden_states
        # 2. Cross-Attention/None
        norm_hidden_states = self.norm2(hidden_states, emb)
        height, weight = norm_hidden_states.shape[2:]
        norm_hidden_states = self._to_3d(norm_hidden_states, height, weight)
        attn_output = self.attn2(norm_hidden_states, encoder_hidden_states=encoder_hidden_states,
                                 attention_mask=attention_mask if encoder_hidden_states is None
                                 else encoder_attention_mask,
                                 **cross_attention_kwargs)
        attn_output = self._to_4d(attn_output, height, weight)
        hidden_states = attn_output + hidden_states
        return hidden_states


class KDownBlock2D(nn.Module):
    def __init__(self, in_channels, out_channels, temb_channels, dropout=0.0, num_layers=4, resnet_eps=1e-5,
                 resnet_act_fn="gelu", resnet_group_size=32, add_downsample=False):
        super().__init__()
        resnets = []
        for i in range(num_layers):
            in_channels = in_channels if i == 0 else out_channels
            groups = in_channels // resnet_group_size
            groups_out = out_channels // resnet_group_size
            resnets.append(ResnetBlockCondNorm2D(
                in_channels=in_channels, out_channels=out_channels, dropout=dropout, temb_channels=temb_channels,
                groups=groups, groups_out=groups_out, eps=resnet_eps, non_linearity=resnet_act_fn,
                time_embedding_norm="ada_group", conv_shortcut_bias=False))
        self.resnets = nn.ModuleList(resnets)
        if add_downsample:
            self.downsamplers = nn.ModuleList([KDownsample2D()])
        else:
            self.downsamplers = None

    def forward(self, hidden_states, temb=None):
        output_states = ()
        for resnet in self.resnets:
            hidden_states = resnet(hidden_states, temb)
            output_states += (hidden_states,)
        if self.downsamplers is not None:
            for downsampler in self.downsamplers:
                hidden_states = downsampler(hidden_states)
        return hidden_states, output_states


class KCrossAttnDownBlock2D(nn.Module):
    def __init__(self, in_channels, out_channels, temb_channels, cross_attention_dim, dropout=0.0, num_layers=4,
                 resnet_group_size=32, add_downsample=True, attention_head_dim=64, add_self_attention=False,
                 resnet_eps=1e-5, resnet_act_fn="gelu"):
        super().__init__()
        resnets = []
        attentions = []
        self.has_cross_attention = True
        for i in range(num_layers):
            in_channels = in_channels if i == 0 else out_channels
            groups = in_channels // resnet_group_size
            groups_out = out_channels // resnet_group_size
            resnets.append(ResnetBlockCondNorm2D(
                in_channels=in_channels, out_channels=out_channels, dropout=dropout, temb_channels=temb_channels,
                groups=groups, groups_out=groups_out, eps=resnet_eps, non_linearity=resnet_act_fn,
                time_embedding_norm="ada_group", conv_shortcut_bias=False))
            attentions.append(KAttentionBlock(
                out_channels, out_channels // attention_head_dim, attention_head_dim,
                cross_attention_dim=cross_attention_dim, temb_channels=temb_channels, attention_bias=True,
                add_self_attention=add_self_attention, cross_attention_norm="layer_norm",
                group_size=resnet_group_size))
        self.resnets = nn.ModuleList(resnets)
        self.attentions = nn.ModuleList(attentions)
        if add_downsample:
            self.downsamplers = nn.ModuleList([KDownsample2D()])
        else:
            self.downsamplers = None

    def forward(self, hidden_states, temb=None, encoder_hidden_states=None, attention_mask=None,
                cross_attention_kwargs=None, encoder_attention_mask=None):
        output_states = ()
        for resnet, attn in zip(self.resnets, self.attentions):
            hidden_states = resnet(hidden_states, temb)
            hidden_states = attn(hidden_states, encoder_hidden_states=encoder_hidden_states, emb=temb,
                                 attention_mask=attention_mask, cross_attention_kwargs=cross_attention_kwargs,
                                 encoder_attention_mask=encoder_attention_mask)
            if self.downsamplers is None:
                output_states += (None,)
            else:
                output_states += (hidden_states,)
        if self.downsamplers is not None:
            for downsampler in self.downsamplers:
                hidden_states = downsampler(hidden_states)
        return hidden_states, output_states


class KUpBlock2D(nn.Module):
    def __init__(self, in_channels, out_channels, temb_channels, resolution_idx, dropout=0.0, num_layers=5,
                 resnet_eps=1e-5, resnet_act_fn="gelu", resnet_group_size=32, add_upsample=True):
        super().__init__()
        resnets = []
        k_in_channels = 2 * out_channels
        k_out_channels = in_channels
        num_layers = num_layers - 1
        for i in range(num_layers):
            in_channels = k_in_channels if i == 0 else out_channels
            groups = in_channels // resnet_group_size
            groups_out = out_channels // resnet_group_size
            resnets.append(ResnetBlockCondNorm2D(
                in_channels=in_channels, out_channels=k_out_channels if (i == num_layers - 1) else out_channels,
                temb_channels=temb_channels, eps=resnet_eps, groups=groups, groups_out=groups_out, dropout=dropout,
                non_linearity=resnet_act_fn, time_embedding_norm="ada_group", conv_shortcut_bias=False))
        self.resnets = nn.ModuleList(resnets)
        if add_upsample:
            self.upsamplers = nn.ModuleList([KUpsample2D()])
        else:
            self.upsamplers = None
        self.resolution_idx = resolution_idx

    def forward(self, hidden_states, res_hidden_states_tuple, temb=None, upsample_size=None):
        res_hidden_states_tuple = res_hidden_states_tuple[-1]
        if res_hidden_states_tuple is not None:
            hidden_states = torch.cat([hidden_states, res_hidden_states_tuple], dim=1)
        for resnet in self.resnets:
            hidden_states = resnet(hidden_states, temb)
        if self.upsamplers is not None:
            for upsampler in self.upsamplers:
                hidden_states = upsampler(hidden_states)
        return hidden_states


class KCrossAttnUpBlock2D(nn.Module):
    def __init__(self, in_channels, out_channels, temb_channels, resolution_idx, dropout=0.0, num_layers=4,
                 resnet_eps=1e-5, resnet_act_fn="gelu", resnet_group_size=32, attention_head_dim=1,
                 cross_attention_dim=768, add_upsample=True, upcast_attention=False):
        super().__init__()
        resnets = []
        attentions = []
        is_first_block = in_channels == out_channels == temb_channels
        is_middle_block = in_channels != out_channels
        add_self_attention = True if is_first_block else False
        self.has_cross_attention = True
        self.attention_head_dim = attention_head_dim
        # in_channels, and out_channels for the block (k-unet)
        k_in_channels = out_channels if is_first_block else 2 * out_channels
        k_out_channels = in_channels
        num_layers = num_layers - 1
        for i in range(num_layers):
            in_channels = k_in_channels if i == 0 else out_channels
            groups = in_channels // resnet_group_size
            groups_out = out_channels // resnet_group_size
            if is_middle_block and (i == num_layers - 1):
                conv_2d_out_channels = k_out_channels
            else:
                conv_2d_out_channels = None
            resnets.append(ResnetBlockCondNorm2D(
                in_channels=in_channels, out_channels=out_channels, conv_2d_out_channels=conv_2d_out_channels,
                temb_channels=temb_channels, eps=resnet_eps, groups=groups, groups_out=groups_out, dropout=dropout,
                non_linearity=resnet_act_fn, time_embedding_norm="ada_group", conv_shortcut_bias=False))
            attentions.append(KAttentionBlock(
                k_out_channels if (i == num_layers - 1) else out_channels,
                k_out_channels // attention_head_dim if (i == num_layers - 1) else out_channels // attention_head_dim,
                attention_head_dim, cross_attention_dim=cross_attention_dim, temb_channels=temb_channels,
                attention_bias=True, add_self_attention=add_self_attention, cross_attention_norm="layer_norm",
                upcast_attention=upcast_attention))
        self.resnets = nn.ModuleList(resnets)
        self.attentions = nn.ModuleList(attentions)
        if add_upsample:
            self.upsamplers = nn.ModuleList([KUpsample2D()])
        else:
            self.upsamplers = None
        self.resolution_idx = resolution_idx

    def forward(self, hidden_states, res_hidden_states_tuple, temb=None, encoder_hidden_states=None,
                cross_attention_kwargs=None, upsample_size=None, attention_mask=None, encoder_attention_mask=None):
        res_hidden_states_tuple = res_hidden_states_tuple[-1]
        if res_hidden_states_tuple is not None:
            hidden_states = torch.cat([hidden_states, res_hidden_states_tuple], dim=1)
        for resnet, attn in zip(self.resnets, self.attentions):
            hidden_states = resnet(hidden_states, temb)
            hidden_states = attn(hidden_states, encoder_hidden_states=encoder_hidden_states, emb=temb,
                                 attention_mask=attention_mask, cross_attention_kwargs=cross_attention_kwargs,
                                 encoder_attention_mask=encoder_attention_mask)
        if self.upsamplers is not None:
            for upsampler in self.upsamplers:
                hidden_states = upsampler(hidden_states)
        return hidden_states


def get_down_block(down_block_type, num_layers, in_channels, out_channels, temb_channels, add_downsample,
                   resnet_eps, resnet_act_fn, cross_attention_dim=None, attention_head_dim=None, dropout=0.0):
    if down_block_type == "KDownBlock2D":
        return KDownBlock2D(num_layers=num_layers, in_channels=in_channels, out_channels=out_channels,
                            temb_channels=temb_channels, dropout=dropout, add_downsample=add_downsample,
                            resnet_eps=resnet_eps, resnet_act_fn=resnet_act_fn)
    elif down_block_type == "KCrossAttnDownBlock2D":
        return KCrossAttnDownBlock2D(num_layers=num_layers, in_channels=in_channels, out_channels=out_channels,
                                     temb_channels=temb_channels, dropout=dropout, add_downsample=add_downsample,
                                     resnet_eps=resnet_eps, resnet_act_fn=resnet_act_fn,
                                     cross_attention_dim=cross_attention_dim, attention_head_dim=attention_head_dim,
                                     add_self_attention=True if not add_downsample else False)
    raise ValueError(f"{down_block_type} does not exist.")


def get_up_block(up_block_type, num_layers, in_channels, out_channels, prev_output_channel, temb_channels,
                 add_upsample, resnet_eps, resnet_act_fn, resolution_idx=None, cross_attention_dim=None,
                 attention_head_dim=None, dropout=0.0):
    if up_block_type == "KUpBlock2D":
        return KUpBlock2D(num_layers=num_layers, in_channels=in_channels, out_channels=out_channels,
                          temb_channels=temb_channels, resolution_idx=resolution_idx, dropout=dropout,
                          add_upsample=add_upsample, resnet_eps=resnet_eps, resnet_act_fn=resnet_act_fn)
    elif up_block_type == "KCrossAttnUpBlock2D":
        return KCrossAttnUpBlock2D(num_layers=num_layers, in_channels=in_channels, out_channels=out_channels,
                                   temb_channels=temb_channels, resolution_idx=resolution_idx, dropout=dropout,
                                   add_upsample=add_upsample, resnet_eps=resnet_eps, resnet_act_fn=resnet_act_fn,
                                   cross_attention_dim=cross_attention_dim, attention_head_dim=attention_head_dim)
    raise ValueError(f"{up_block_type} does not exist.")


class UNet2DConditionModel(nn.Module):
    def __init__(self, in_channels=8, out_channels=5, flip_sin_to_cos=True, freq_shift=0,
                 down_block_types=("KDownBlock2D", "KCrossAttnDownBlock2D", "KCrossAttnDownBlock2D"),
                 mid_block_type=None,
                 up_block_types=("KCrossAttnUpBlock2D", "KCrossAttnUpBlock2D", "KUpBlock2D"),
                 block_out_channels=(32, 64, 64), layers_per_block=1, act_fn="gelu", norm_num_groups=None,
                 norm_eps=1e-5, cross_attention_dim=24, attention_head_dim=8, resnet_time_scale_shift="scale_shift",
                 time_embedding_type="fourier", timestep_post_act="gelu", time_cond_proj_dim=152, conv_in_kernel=1,
                 conv_out_kernel=1):
        super().__init__()
        assert mid_block_type is None and norm_num_groups is None and time_embedding_type == "fourier"
        # input
        conv_in_padding = (conv_in_kernel - 1) // 2
        self.conv_in = nn.Conv2d(in_channels, block_out_channels[0], kernel_size=conv_in_kernel,
                                 padding=conv_in_padding)
        # time (_set_time_proj, "fourier")
        time_embed_dim = block_out_channels[0] * 2
        self.time_proj = GaussianFourierProjection(time_embed_dim // 2, set_W_to_weight=False, log=False,
                                                   flip_sin_to_cos=flip_sin_to_cos)
        timestep_input_dim = time_embed_dim
        self.time_embedding = TimestepEmbedding(timestep_input_dim, time_embed_dim, act_fn=act_fn,
                                                post_act_fn=timestep_post_act, cond_proj_dim=time_cond_proj_dim)
        self.encoder_hid_proj = None
        self.class_embedding = None
        self.time_embed_act = None

        self.down_blocks = nn.ModuleList([])
        self.up_blocks = nn.ModuleList([])
        if isinstance(attention_head_dim, int):
            attention_head_dim = (attention_head_dim,) * len(down_block_types)
        if isinstance(cross_attention_dim, int):
            cross_attention_dim = (cross_attention_dim,) * len(down_block_types)
        if isinstance(layers_per_block, int):
            layers_per_block = [layers_per_block] * len(down_block_types)
        blocks_time_embed_dim = time_embed_dim

        # down
        output_channel = block_out_channels[0]
        for i, down_block_type in enumerate(down_block_types):
            input_channel = output_channel
            output_channel = block_out_channels[i]
            is_final_block = i == len(block_out_channels) - 1
            down_block = get_down_block(
                down_block_type, num_layers=layers_per_block[i], in_channels=input_channel,
                out_channels=output_channel, temb_channels=blocks_time_embed_dim, add_downsample=not is_final_block,
                resnet_eps=norm_eps, resnet_act_fn=act_fn, cross_attention_dim=cross_attention_dim[i],
                attention_head_dim=attention_head_dim[i] if attention_head_dim[i] is not None else output_channel)
            self.down_blocks.append(down_block)

        # mid (mid_block_type None: get_mid_block returns None)
        self.mid_block = None

        # count how many layers upsample the images
        self.num_upsamplers = 0

        # up
        reversed_block_out_channels = list(reversed(block_out_channels))
        reversed_layers_per_block = list(reversed(layers_per_block))
        reversed_cross_attention_dim = list(reversed(cross_attention_dim))
        output_channel = reversed_block_out_channels[0]
        for i, up_block_type in enumerate(up_block_types):
            is_final_block = i == len(block_out_channels) - 1
            prev_output_channel = output_channel
            output_channel = reversed_block_out_channels[i]
            input_channel = reversed_block_out_channels[min(i + 1, len(block_out_channels) - 1)]
            # add upsample block for all BUT final layer
            if not is_final_block:
                add_upsample = True
                self.num_upsamplers += 1
            else:
                add_upsample = False
            up_block = get_up_block(
                up_block_type, num_layers=reversed_layers_per_block[i] + 1, in_channels=input_channel,
                out_channels=output_channel, prev_output_channel=prev_output_channel,
                temb_channels=blocks_time_embed_dim, add_upsample=add_upsample, resnet_eps=norm_eps,
                resnet_act_fn=act_fn, resolution_idx=i, cross_attention_dim=reversed_cross_attention_dim[i],
                attention_head_dim=attention_head_dim[i] if attention_head_dim[i] is not None else output_channel)
            self.up_blocks.append(up_block)

        # out (norm_num_groups None)
        self.conv_norm_out = None
        self.conv_act = None
        conv_out_padding = (conv_out_kernel - 1) // 2
        self.conv_out = nn.Conv2d(block_out_channels[0], out_channels, kernel_size=conv_out_kernel,
                                  padding=conv_out_padding)

    def get_time_embed(self, sample, timestep):
        timesteps = timestep
        if len(timesteps.shape) == 0:
            timesteps = timesteps[None].to(sample.device)
        # broadcast to batch dimension in a way that's compatible with ONNX/Core ML
        timesteps = timesteps.expand(sample.shape[0])
        t_emb = self.time_proj(timesteps)
        # `Timesteps` does not contain any weights and will always return f32 tensors
        t_emb = t_emb.to(dtype=sample.dtype)
        return t_emb

    def forward(self, sample, timestep, encoder_hidden_states, class_labels=None, timestep_cond=None,
                attention_mask=None, cross_attention_kwargs=None, added_cond_kwargs=None, encoder_attention_mask=None,
                return_dict=True):
        default_overall_up_factor = 2 ** self.num_upsamplers
        # upsample size should be forwarded when sample is not a multiple of `default_overall_up_factor`
        forward_upsample_size = False
        upsample_size = None
        for dim in sample.shape[-2:]:
            if dim % default_overall_up_factor != 0:
                forward_upsample_size = True
                break
        # 1. time
        t_emb = self.get_time_embed(sample=sample, timestep=timestep)
        emb = self.time_embedding(t_emb, timestep_cond)
        # (no class, addition embedding, time_embed_act or encoder_hid_proj)
        # 2. pre-process
        sample = self.conv_in(sample)
        # 3. down
        down_block_res_samples = (sample,)
        for downsample_block in self.down_blocks:
            if hasattr(downsample_block, "has_cross_attention") and downsample_block.has_cross_attention:
                sample, res_samples = downsample_block(hidden_states=sample, temb=emb,
                                                       encoder_hidden_states=encoder_hidden_states,
                                                       attention_mask=attention_mask,
                                                       cross_attention_kwargs=cross_attention_kwargs,
                                                       encoder_attention_mask=encoder_attention_mask)
            else:
                sample, res_samples = downsample_block(hidden_states=sample, temb=emb)
            down_block_res_samples += res_samples
        # 4. mid: None
        # 5. up
        for i, upsample_block in enumerate(self.up_blocks):
            is_final_block = i == len(self.up_blocks) - 1
            res_samples = down_block_res_samples[-len(upsample_block.resnets):]
            down_block_res_samples = down_block_res_samples[: -len(upsample_block.resnets)]
            # if we have not reached the final block and need to forward the upsample size, we do it here
            if not is_final_block and forward_upsample_size:
                upsample_size = down_block_res_samples[-1].shape[2:]
            if hasattr(upsample_block, "has_cross_attention") and upsample_block.has_cross_attention:
                sample = upsample_block(hidden_states=sample, temb=emb, res_hidden_states_tuple=res_samples,
                                        encoder_hidden_states=encoder_hidden_states,
                                        cross_attention_kwargs=cross_attention_kwargs, upsample_size=upsample_size,
                                        attention_mask=attention_mask, encoder_attention_mask=encoder_attention_mask)
            else:
                sample = upsample_block(hidden_states=sample, temb=emb, res_hidden_states_tuple=res_samples,
                                        upsample_size=upsample_size)
        # 6. post-process
        if self.conv_norm_out:
            sample = self.conv_norm_out(sample)
            sample = self.conv_act(sample)
        sample = self.conv_out(sample)
        return (sample,)


def build():
    return UNet2DConditionModel()


GUIDANCE_SCALE = 0.0  # as the pipeline's own example and its integration tests call it (the default is 9.0)
SEQ_LEN, TEXT_DIM = 6, 24  # CLIP's sequence (77) and width (768), as cross_attention_dim


DO_CLASSIFIER_FREE_GUIDANCE = GUIDANCE_SCALE > 1.0
HEIGHT, WIDTH = 8, 4  # the low-res latents (4 channels); the latents are twice as tall and wide


def inputs(g):
    # _encode_prompt (guidance_scale 0: the prompt replaced by "", no negative): the text encoder's
    # hidden_states[-1] and pooler_output; image: the low-res latents (4 channels: used as they are); noise: the
    # 2x latents
    return {"text_embeddings": torch.randn((1, SEQ_LEN, TEXT_DIM), generator=g),
            "text_pooler_out": torch.randn((1, TEXT_DIM), generator=g),
            "image": torch.randn((1, 4, HEIGHT, WIDTH), generator=g),
            "noise": torch.randn((1, 4, 2 * HEIGHT, 2 * WIDTH), generator=g)}


def prepare(model, c):
    # __call__ before its loop
    assert not DO_CLASSIFIER_FREE_GUIDANCE
    device = c["image"].device
    text_embeddings = c["text_embeddings"]
    text_pooler_out = c["text_pooler_out"]
    image = c["image"].to(dtype=text_embeddings.dtype, device=device)
    batch_multiplier = 2 if DO_CLASSIFIER_FREE_GUIDANCE else 1
    image = image[None, :] if image.ndim == 3 else image
    image = torch.cat([image] * batch_multiplier)
    # 5. Add noise to image (set to be 0)
    noise_level = torch.tensor([0.0], dtype=torch.float32, device=device)
    noise_level = torch.cat([noise_level] * image.shape[0])
    inv_noise_level = (noise_level ** 2 + 1) ** (-0.5)
    image_cond = F.interpolate(image, scale_factor=2, mode="nearest") * inv_noise_level[:, None, None, None]
    image_cond = image_cond.to(text_embeddings.dtype)
    noise_level_embed = torch.cat([
        torch.ones(text_pooler_out.shape[0], 64, dtype=text_pooler_out.dtype, device=device),
        torch.zeros(text_pooler_out.shape[0], 64, dtype=text_pooler_out.dtype, device=device),
    ], dim=1)
    timestep_condition = torch.cat([noise_level_embed, text_pooler_out], dim=1)
    c["prompt_embeds"] = text_embeddings
    c["image_cond"] = image_cond
    c["timestep_condition"] = timestep_condition


def call(model, x, sigma_run, c):
    # the scheduler's sigmas are f32: run.py's σ taken as the Karras σ itself
    sigma = torch.tensor(sigma_run, dtype=torch.float32, device=x.device)
    latents = x
    # expand the latents if we are doing classifier free guidance
    latent_model_input = torch.cat([latents] * 2) if DO_CLASSIFIER_FREE_GUIDANCE else latents
    scaled_model_input = latent_model_input / ((sigma ** 2 + 1) ** 0.5)  # scheduler.scale_model_input
    scaled_model_input = torch.cat([scaled_model_input, c["image_cond"]], dim=1)
    # preconditioning parameter based on Karras et al. (2022) (table 1)
    timestep = torch.log(sigma) * 0.25
    noise_pred = model(scaled_model_input, timestep, encoder_hidden_states=c["prompt_embeds"],
                       timestep_cond=c["timestep_condition"], return_dict=False)[0]
    # in original repo, the output contains a variance channel that's not used
    noise_pred = noise_pred[:, :-1]
    # apply preconditioning, based on table 1 in Karras et al. (2022)
    inv_sigma = 1 / (sigma ** 2 + 1)
    noise_pred = inv_sigma * latent_model_input + (sigma / ((sigma ** 2 + 1) ** 0.5)) * noise_pred
    # perform guidance
    if DO_CLASSIFIER_FREE_GUIDANCE:
        noise_pred_uncond, noise_pred_text = noise_pred.chunk(2)
        noise_pred = noise_pred_uncond + GUIDANCE_SCALE * (noise_pred_text - noise_pred_uncond)
    # EulerDiscreteScheduler.step, prediction_type "sample": the ODE derivative (x - x0) / σ (σ_hat = σ)
    sample = latents.to(torch.float32)
    pred_original_sample = noise_pred
    derivative = (sample - pred_original_sample) / sigma
    return derivative


PRODUCER = dict(
    library_source="replica of huggingface/diffusers unet_2d_condition.py@00f354d14d00 (sd-x2-latent-upscaler "
                   "configuration: K blocks of unet_2d_blocks.py@049ca3822f9e, ResnetBlockCondNorm2D ada_group, "
                   "AdaGroupNorm, KDownsample2D/KUpsample2D, GaussianFourierProjection) and "
                   "pipeline_stable_diffusion_latent_upscale.py@c4913011274e (torch 1.13)",
    timestep="log(sigma)*0.25, f32 0-d (c_noise), [None] then expanded to the batch; sigma = run.py's sigma",
    velocity="EulerDiscreteScheduler's derivative (x - D)/sigma with D = x/(sigma^2+1) + sigma/sqrt(sigma^2+1) * "
             "out[:, :4], the U-Net fed cat(x/sqrt(sigma^2+1), image_cond); guidance_scale 0 (no CFG)",
    note="latent upscaler U-Net at widths 32/64/64 on [1, 8, 16, 8]: Fourier time features (cos, sin of "
         "t*w*2pi) plus cond_proj(timestep_condition = [ones64, zeros64, pooled text]) -> Linear-GELU-Linear-GELU; "
         "every resnet AdaGroupNorm-GELU-conv twice (scale/shift from the time embedding); KAttentionBlocks with "
         "AdaGroupNorm pre-norms, LayerNorm on the text, biased q/k/v, self-attention only at the deepest level "
         "(down 2, up 0); fixed-kernel reflect-padded down/up sampling; K up blocks join only the last skip; "
         "no mid block, no output norm, 1x1 conv_in/conv_out; the image latents nearest-upsampled x2 and joined")

if __name__ == "__main__":
    capture("sd_latent_upscaler", build, inputs, call, sys.argv[1], PRODUCER, prepare=prepare)
