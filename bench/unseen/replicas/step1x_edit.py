"""Step1X-Edit image-editing DiT, reimplemented for torch 1.13 (no diffusers here), captured small in f32 on CPU.

Follows huggingface/diffusers src/diffusers/models/transformers/transformer_step1x_edit.py at
e8486345a17f019d77b9194a8381db9d525b837c (Step1XEditTransformer2DModel, Step1XEditTransformerBlock,
Step1XEditSingleTransformerBlock, Step1XEditAttention with Step1XEditAttnProcessor's __call__ as its forward,
Step1XEditPosEmbed, Step1XEditMLPEmbedder, Step1XEditConnector, Step1XEditSingleTokenRefiner,
Step1XEditIndividualTokenRefiner, Step1XEditIndividualTokenRefinerBlock, Step1XEditMLP, Step1XEditTimestepEmbedder,
Step1XEditTextProjection, apply_gate; the connector's cross-attention block is built only with need_CA, off by
default and here) with the parts it imports: attention.py (FeedForward with "gelu-approximate"), activations.py
(GELU), embeddings.py (get_1d_rotary_pos_embed with use_real and repeat_interleave_real in f64, apply_rotary_emb
with use_real and sequence_dim 1), normalization.py (AdaLayerNormZero, AdaLayerNormZeroSingle,
AdaLayerNormContinuous): the same module tree, parameter names and shapes, and call boundaries; the arithmetic line
for line, einops' rearrange written as view + permute. Stand-ins for what torch 1.13 lacks: torch.nn.RMSNorm
(x·rsqrt(mean x² + eps)·weight, as its composite does in f32), dispatch_attention_fn (SDPA's math on [B, L, H, D],
default scale, no mask) and F.scaled_dot_product_attention in the refiner (SDPA's math on [B, H, L, D], the bool
mask as -inf where False).

The constructs it shows: a Flux-style MMDiT (AdaLayerNormZero double blocks with joint [text, image] attention,
RMSNorm q/k and added q/k per head, RoPE from 3-axis ids, GELU-tanh FFNs; single blocks with attention beside a
GELU-tanh MLP and one proj_out over [attention, MLP]) whose caption first goes through a "connector" run inside the
model on every call: a masked mean of the raw caption rows (mask a long 0/1 tensor) -> global_proj_out to a fixed
768-wide pooled vector (vec_embed's input), and a HunyuanVideo-style single token refiner over the caption:
input_embedder, c = t_embedder(cos-first sinusoid of 1000·t, SiLU MLP) + c_embedder(masked mean), then a refiner
block (LayerNorm, fused qkv split "(K H D)", self-attention under the bool mask outer(mask, mask) with column 0
forced True, gated by adaLN_modulation(c) (SiLU -> Linear, [gate_msa, gate_mlp], no shift/scale), SiLU MLP). The
connector's output goes through context_embedder; temb = time_embed(cos-first sinusoid of 1000·t, MLPEmbedder
Linear-SiLU-Linear) + vec_embed(pooled). The joint attention has no mask: the caption's padding rows take part.
The refiner is constructed in bf16 by Step1XEditConnector's default dtype; build() casts the whole model to f32 as
from_pretrained(torch_dtype=torch.float32) would (without a torch_dtype the refiner would stay bf16 and fail on f32
inputs), and the bf16 run places all of it in bf16 as from_pretrained(torch_dtype=torch.bfloat16) does.

Pipeline as Step1XEditPipeline (pipeline_step1x_edit.py at 01310e78bf9862c563cd6f273560e6264b709ea7; the call is
the same at 3645b66aa25d) calls it for an edit with a reference image, prompt_embeds and prompt_embeds_mask given,
true_cfg_scale 1 (one call per step, no negative-prompt call and so no norm-rescaled CFG): latents packed 2x2
(B, C, H, W) -> (B, H/2·W/2, 4C); the reference image's VAE latents (drawn here) packed likewise and joined after
the noisy ones on every call; img_ids = [latent ids (0, h, w); reference ids (1, h + 1, w + 1)]; txt_ids zeros;
the caption zero past its valid rows (the Qwen2.5-VL embeddings are written into a zero buffer) with a long mask of
ones over the valid rows; timestep = t.expand(B).to(latents.dtype) / 1000 with t = σ·1000 (the model and its
connector multiply by 1000 again); guidance None (guidance_embeds False; the model ignores it anyway); velocity the
noisy rows of the output (noise_pred[:, :latents.size(1)]).

usage: /usr/bin/python3 bench/unseen/replicas/step1x_edit.py OUTDIR
"""
import math
import sys

import torch
import torch.nn as nn

from run import capture, sdpa
from flux2 import RMSNorm, apply_rotary_emb, attention, get_1d_rotary_pos_embed
from chroma import FeedForward, FluxAttention
from ovis_image import AdaLayerNormContinuous, AdaLayerNormZero, AdaLayerNormZeroSingle


def get_activation_layer(act_type):
    if act_type == "gelu":
        return lambda: nn.GELU()
    elif act_type == "gelu_tanh":
        return lambda: nn.GELU(approximate="tanh")
    elif act_type == "relu":
        return nn.ReLU
    elif act_type == "silu":
        return nn.SiLU
    else:
        raise ValueError(f"Unknown activation type: {act_type}")


def apply_gate(x, gate=None, tanh=False):
    if gate is None:
        return x
    if tanh:
        return x * gate.unsqueeze(1).tanh()
    else:
        return x * gate.unsqueeze(1)


def get_norm_layer(norm_layer):
    if norm_layer == "layer":
        return nn.LayerNorm
    else:
        raise NotImplementedError(f"Norm layer {norm_layer} is not implemented")


class Step1XEditAttention(FluxAttention):
    """transformer_flux's attention with Step1XEditAttnProcessor's __call__ as its forward (unfused projections):
    the same module and arithmetic as chroma.py's FluxAttention, whose default eps here is 1e-6."""

    def __init__(self, *args, eps=1e-6, **kwargs):
        super().__init__(*args, eps=eps, **kwargs)


class Step1XEditSingleTransformerBlock(nn.Module):
    def __init__(self, dim, num_attention_heads, attention_head_dim, mlp_ratio=4.0):
        super().__init__()
        self.mlp_hidden_dim = int(dim * mlp_ratio)

        self.norm = AdaLayerNormZeroSingle(dim)
        self.proj_mlp = nn.Linear(dim, self.mlp_hidden_dim)
        self.act_mlp = nn.GELU(approximate="tanh")
        self.proj_out = nn.Linear(dim + self.mlp_hidden_dim, dim)

        self.attn = Step1XEditAttention(query_dim=dim, dim_head=attention_head_dim, heads=num_attention_heads,
                                        out_dim=dim, bias=True, eps=1e-6, pre_only=True)

    def forward(self, hidden_states, encoder_hidden_states, temb, image_rotary_emb=None, joint_attention_kwargs=None):
        text_seq_len = encoder_hidden_states.shape[1]
        hidden_states = torch.cat([encoder_hidden_states, hidden_states], dim=1)

        residual = hidden_states
        norm_hidden_states, gate = self.norm(hidden_states, emb=temb)
        mlp_hidden_states = self.act_mlp(self.proj_mlp(norm_hidden_states))

        joint_attention_kwargs = joint_attention_kwargs or {}
        attn_output = self.attn(hidden_states=norm_hidden_states, image_rotary_emb=image_rotary_emb,
                                **joint_attention_kwargs)

        hidden_states = torch.cat([attn_output, mlp_hidden_states], dim=2)
        gate = gate.unsqueeze(1)
        hidden_states = gate * self.proj_out(hidden_states)
        hidden_states = residual + hidden_states
        if hidden_states.dtype == torch.float16:
            hidden_states = hidden_states.clip(-65504, 65504)

        encoder_hidden_states, hidden_states = hidden_states[:, :text_seq_len], hidden_states[:, text_seq_len:]
        return encoder_hidden_states, hidden_states


class Step1XEditTransformerBlock(nn.Module):
    def __init__(self, dim, num_attention_heads, attention_head_dim, qk_norm="rms_norm", eps=1e-6):
        super().__init__()
        self.norm1 = AdaLayerNormZero(dim)
        self.norm1_context = AdaLayerNormZero(dim)

        self.attn = Step1XEditAttention(query_dim=dim, added_kv_proj_dim=dim, dim_head=attention_head_dim,
                                        heads=num_attention_heads, out_dim=dim, context_pre_only=False, bias=True,
                                        eps=eps)

        self.norm2 = nn.LayerNorm(dim, elementwise_affine=False, eps=1e-6)
        self.ff = FeedForward(dim=dim, dim_out=dim, activation_fn="gelu-approximate")

        self.norm2_context = nn.LayerNorm(dim, elementwise_affine=False, eps=1e-6)
        self.ff_context = FeedForward(dim=dim, dim_out=dim, activation_fn="gelu-approximate")

    def forward(self, hidden_states, encoder_hidden_states, temb, image_rotary_emb=None, joint_attention_kwargs=None):
        norm_hidden_states, gate_msa, shift_mlp, scale_mlp, gate_mlp = self.norm1(hidden_states, emb=temb)

        norm_encoder_hidden_states, c_gate_msa, c_shift_mlp, c_scale_mlp, c_gate_mlp = self.norm1_context(
            encoder_hidden_states, emb=temb)
        joint_attention_kwargs = joint_attention_kwargs or {}

        attention_outputs = self.attn(hidden_states=norm_hidden_states,
                                      encoder_hidden_states=norm_encoder_hidden_states,
                                      image_rotary_emb=image_rotary_emb, **joint_attention_kwargs)

        if len(attention_outputs) == 2:
            attn_output, context_attn_output = attention_outputs
        elif len(attention_outputs) == 3:
            attn_output, context_attn_output, ip_attn_output = attention_outputs

        attn_output = gate_msa.unsqueeze(1) * attn_output
        hidden_states = hidden_states + attn_output
        norm_hidden_states = self.norm2(hidden_states)
        norm_hidden_states = norm_hidden_states * (1 + scale_mlp[:, None]) + shift_mlp[:, None]

        ff_output = self.ff(norm_hidden_states)
        ff_output = gate_mlp.unsqueeze(1) * ff_output
        hidden_states = hidden_states + ff_output

        if len(attention_outputs) == 3:
            hidden_states = hidden_states + ip_attn_output

        context_attn_output = c_gate_msa.unsqueeze(1) * context_attn_output
        encoder_hidden_states = encoder_hidden_states + context_attn_output

        norm_encoder_hidden_states = self.norm2_context(encoder_hidden_states)
        norm_encoder_hidden_states = norm_encoder_hidden_states * (1 + c_scale_mlp[:, None]) + c_shift_mlp[:, None]

        context_ff_output = self.ff_context(norm_encoder_hidden_states)
        encoder_hidden_states = encoder_hidden_states + c_gate_mlp.unsqueeze(1) * context_ff_output
        if encoder_hidden_states.dtype == torch.float16:
            encoder_hidden_states = encoder_hidden_states.clip(-65504, 65504)

        return encoder_hidden_states, hidden_states


class Step1XEditPosEmbed(nn.Module):
    def __init__(self, theta, axes_dim):
        super().__init__()
        self.theta = theta
        self.axes_dim = axes_dim

    def forward(self, ids):
        n_axes = ids.shape[-1]
        cos_out = []
        sin_out = []
        pos = ids.float()
        freqs_dtype = torch.float64  # CPU (not mps / npu)
        for i in range(n_axes):
            cos, sin = get_1d_rotary_pos_embed(self.axes_dim[i], pos[:, i], theta=self.theta, freqs_dtype=freqs_dtype)
            cos_out.append(cos)
            sin_out.append(sin)
        freqs_cos = torch.cat(cos_out, dim=-1).to(ids.device)
        freqs_sin = torch.cat(sin_out, dim=-1).to(ids.device)
        return freqs_cos, freqs_sin


class Step1XEditMLP(nn.Module):
    def __init__(self, in_channels, hidden_channels=None, out_features=None, act_layer=nn.GELU, norm_layer=None,
                 bias=True, drop=0.0, use_conv=False, device=None, dtype=None):
        super().__init__()
        out_features = out_features or in_channels
        hidden_channels = hidden_channels or in_channels
        bias = (bias, bias)
        drop_probs = (drop, drop)
        assert not use_conv
        linear_layer = nn.Linear

        self.fc1 = linear_layer(in_channels, hidden_channels, bias=bias[0], device=device, dtype=dtype)
        self.act = act_layer()
        self.drop1 = nn.Dropout(drop_probs[0])
        self.norm = (norm_layer(hidden_channels, device=device, dtype=dtype) if norm_layer is not None
                     else nn.Identity())
        self.fc2 = linear_layer(hidden_channels, out_features, bias=bias[1], device=device, dtype=dtype)
        self.drop2 = nn.Dropout(drop_probs[1])

    def forward(self, x):
        x = self.fc1(x)
        x = self.act(x)
        x = self.drop1(x)
        x = self.norm(x)
        x = self.fc2(x)
        x = self.drop2(x)
        return x


class Step1XEditMLPEmbedder(nn.Module):
    def __init__(self, in_dim, hidden_dim):
        super().__init__()
        self.in_layer = nn.Linear(in_dim, hidden_dim, bias=True)
        self.silu = nn.SiLU()
        self.out_layer = nn.Linear(hidden_dim, hidden_dim, bias=True)
        self.gradient_checkpointing = False

    def _forward(self, x):
        return self.out_layer(self.silu(self.in_layer(x)))

    def forward(self, *args, **kwargs):
        return self._forward(*args, **kwargs)


def _rearrange_k_b_h_l_d(t, K, H):
    """einops.rearrange(t, "B L (K H D) -> K B H L D", K=K, H=H)."""
    B, L, C = t.shape
    return t.view(B, L, K, H, C // (K * H)).permute(2, 0, 3, 1, 4)


class Step1XEditIndividualTokenRefinerBlock(nn.Module):
    def __init__(self, hidden_size, heads_num, mlp_width_ratio=4.0, mlp_drop_rate=0.0, act_type="silu",
                 qk_norm=False, qk_norm_type="layer", qkv_bias=True, need_CA=False, dtype=None, device=None):
        factory_kwargs = {"device": device, "dtype": dtype}
        super().__init__()
        assert not need_CA  # Step1XEditCrossAttnBlock: not built by the default config
        self.need_CA = need_CA
        self.heads_num = heads_num
        head_dim = hidden_size // heads_num
        mlp_hidden_dim = int(hidden_size * mlp_width_ratio)

        self.norm1 = nn.LayerNorm(hidden_size, elementwise_affine=True, eps=1e-6, **factory_kwargs)
        self.self_attn_qkv = nn.Linear(hidden_size, hidden_size * 3, bias=qkv_bias, **factory_kwargs)
        qk_norm_layer = get_norm_layer(qk_norm_type)
        self.self_attn_q_norm = (qk_norm_layer(head_dim, elementwise_affine=True, eps=1e-6, **factory_kwargs)
                                 if qk_norm else nn.Identity())
        self.self_attn_k_norm = (qk_norm_layer(head_dim, elementwise_affine=True, eps=1e-6, **factory_kwargs)
                                 if qk_norm else nn.Identity())
        self.self_attn_proj = nn.Linear(hidden_size, hidden_size, bias=qkv_bias, **factory_kwargs)
        self.norm2 = nn.LayerNorm(hidden_size, elementwise_affine=True, eps=1e-6, **factory_kwargs)
        act_layer = get_activation_layer(act_type)
        self.mlp = Step1XEditMLP(in_channels=hidden_size, hidden_channels=mlp_hidden_dim, act_layer=act_layer,
                                 drop=mlp_drop_rate, **factory_kwargs)

        self.adaLN_modulation = nn.Sequential(
            act_layer(),
            nn.Linear(hidden_size, 2 * hidden_size, bias=True, **factory_kwargs),
        )
        nn.init.zeros_(self.adaLN_modulation[1].weight)
        nn.init.zeros_(self.adaLN_modulation[1].bias)

    def forward(self, x, c, attn_mask=None, y=None):
        gate_msa, gate_mlp = self.adaLN_modulation(c).chunk(2, dim=1)

        norm_x = self.norm1(x)
        qkv = self.self_attn_qkv(norm_x)
        q, k, v = _rearrange_k_b_h_l_d(qkv, K=3, H=self.heads_num)
        q = self.self_attn_q_norm(q).to(v)
        k = self.self_attn_k_norm(k).to(v)

        attn = sdpa(q, k, v, mask=attn_mask).transpose(1, 2)  # F.scaled_dot_product_attention(q, k, v, attn_mask=)
        attn = attn.reshape(attn.size(0), attn.size(1), -1)

        x = x + apply_gate(self.self_attn_proj(attn), gate_msa)

        x = x + apply_gate(self.mlp(self.norm2(x)), gate_mlp)
        return x


class Step1XEditIndividualTokenRefiner(nn.Module):
    def __init__(self, hidden_size, heads_num, depth, mlp_width_ratio=4.0, mlp_drop_rate=0.0, act_type="silu",
                 qk_norm=False, qk_norm_type="layer", qkv_bias=True, need_CA=False, dtype=None, device=None):
        factory_kwargs = {"device": device, "dtype": dtype}
        super().__init__()
        self.need_CA = need_CA
        self.blocks = nn.ModuleList([
            Step1XEditIndividualTokenRefinerBlock(hidden_size=hidden_size, heads_num=heads_num,
                                                  mlp_width_ratio=mlp_width_ratio, mlp_drop_rate=mlp_drop_rate,
                                                  act_type=act_type, qk_norm=qk_norm, qk_norm_type=qk_norm_type,
                                                  qkv_bias=qkv_bias, need_CA=self.need_CA, **factory_kwargs)
            for _ in range(depth)])

    def forward(self, x, c, mask=None, y=None):
        self_attn_mask = None
        if mask is not None:
            batch_size = mask.shape[0]
            seq_len = mask.shape[1]
            mask = mask.to(x.device)
            self_attn_mask_1 = mask.view(batch_size, 1, 1, seq_len).repeat(1, 1, seq_len, 1)
            self_attn_mask_2 = self_attn_mask_1.transpose(2, 3)
            self_attn_mask = (self_attn_mask_1 & self_attn_mask_2).bool()
            self_attn_mask[:, :, :, 0] = True

        for block in self.blocks:
            x = block(x, c, self_attn_mask, y)
        return x


class Step1XEditTimestepEmbedder(nn.Module):
    def __init__(self, hidden_size, act_layer, frequency_embedding_size=256, max_period=10000, out_size=None,
                 dtype=None, device=None):
        factory_kwargs = {"dtype": dtype, "device": device}
        super().__init__()
        self.frequency_embedding_size = frequency_embedding_size
        self.max_period = max_period
        if out_size is None:
            out_size = hidden_size

        self.mlp = nn.Sequential(
            nn.Linear(frequency_embedding_size, hidden_size, bias=True, **factory_kwargs),
            act_layer(),
            nn.Linear(hidden_size, out_size, bias=True, **factory_kwargs),
        )
        nn.init.normal_(self.mlp[0].weight, std=0.02)
        nn.init.normal_(self.mlp[2].weight, std=0.02)

    @staticmethod
    def timestep_embedding(t, dim, max_period=10000):
        half = dim // 2
        freqs = torch.exp(-math.log(max_period) * torch.arange(start=0, end=half, dtype=torch.float32)
                          / half).to(device=t.device)
        args = t[:, None].float() * freqs[None]
        embedding = torch.cat([torch.cos(args), torch.sin(args)], dim=-1)
        if dim % 2:
            embedding = torch.cat([embedding, torch.zeros_like(embedding[:, :1])], dim=-1)
        return embedding

    def forward(self, t):
        t_freq = self.timestep_embedding(t, self.frequency_embedding_size, self.max_period).type(
            self.mlp[0].weight.dtype)
        t_emb = self.mlp(t_freq)
        return t_emb


class Step1XEditTextProjection(nn.Module):
    def __init__(self, in_channels, hidden_size, act_layer, dtype=None, device=None):
        factory_kwargs = {"dtype": dtype, "device": device}
        super().__init__()
        self.linear_1 = nn.Linear(in_features=in_channels, out_features=hidden_size, bias=True, **factory_kwargs)
        self.act_1 = act_layer()
        self.linear_2 = nn.Linear(in_features=hidden_size, out_features=hidden_size, bias=True, **factory_kwargs)

    def forward(self, caption):
        hidden_states = self.linear_1(caption)
        hidden_states = self.act_1(hidden_states)
        hidden_states = self.linear_2(hidden_states)
        return hidden_states


class Step1XEditSingleTokenRefiner(nn.Module):
    def __init__(self, in_channels, hidden_size, heads_num, depth, mlp_width_ratio=4.0, mlp_drop_rate=0.0,
                 act_type="silu", qk_norm=False, qk_norm_type="layer", qkv_bias=True, need_CA=False,
                 attn_mode="torch", dtype=None, device=None):
        factory_kwargs = {"device": device, "dtype": dtype}
        super().__init__()
        self.attn_mode = attn_mode
        self.need_CA = need_CA
        assert self.attn_mode == "torch", "Only support 'torch' mode for token refiner."

        self.input_embedder = nn.Linear(in_channels, hidden_size, bias=True, **factory_kwargs)
        if self.need_CA:
            self.input_embedder_CA = nn.Linear(in_channels, hidden_size, bias=True, **factory_kwargs)

        act_layer = get_activation_layer(act_type)
        self.t_embedder = Step1XEditTimestepEmbedder(hidden_size, act_layer, **factory_kwargs)
        self.c_embedder = Step1XEditTextProjection(in_channels, hidden_size, act_layer, **factory_kwargs)

        self.individual_token_refiner = Step1XEditIndividualTokenRefiner(
            hidden_size=hidden_size, heads_num=heads_num, depth=depth, mlp_width_ratio=mlp_width_ratio,
            mlp_drop_rate=mlp_drop_rate, act_type=act_type, qk_norm=qk_norm, qk_norm_type=qk_norm_type,
            qkv_bias=qkv_bias, need_CA=need_CA, **factory_kwargs)

    def forward(self, x, t, mask=None, y=None):
        timestep_aware_representations = self.t_embedder(t)

        if mask is None:
            context_aware_representations = x.mean(dim=1)
        else:
            mask_float = mask.unsqueeze(-1)  # [b, s1, 1]
            context_aware_representations = (x * mask_float).sum(dim=1) / mask_float.sum(dim=1)
        context_aware_representations = self.c_embedder(context_aware_representations)
        c = timestep_aware_representations + context_aware_representations

        x = self.input_embedder(x)
        if self.need_CA:
            y = self.input_embedder_CA(y)
            x = self.individual_token_refiner(x, c, mask, y)
        else:
            x = self.individual_token_refiner(x, c, mask)
        return x


class Step1XEditConnector(nn.Module):
    def __init__(self, in_channels=3584, hidden_size=4096, heads_num=32, depth=2, need_CA=False, device=None,
                 dtype=torch.bfloat16):
        super().__init__()
        factory_kwargs = {"device": device, "dtype": dtype}
        self.S = Step1XEditSingleTokenRefiner(in_channels=in_channels, hidden_size=hidden_size, heads_num=heads_num,
                                              depth=depth, need_CA=need_CA, **factory_kwargs)
        self.global_proj_out = nn.Linear(in_channels, 768)

    def forward(self, x, t, mask):
        t = t * 1000  # fix the times embedding bug
        mask_float = mask.unsqueeze(-1)  # [b, s1, 1]
        x_mean = (x * mask_float).sum(dim=1) / mask_float.sum(dim=1)
        global_out = self.global_proj_out(x_mean)
        encoder_hidden_states = self.S(x, t, mask)
        return encoder_hidden_states, global_out


class Step1XEditTransformer2DModel(nn.Module):
    def __init__(self, patch_size=1, in_channels=64, out_channels=None, num_layers=19, num_single_layers=38,
                 attention_head_dim=128, num_attention_heads=24, joint_attention_dim=4096, timestep_in_dim=256,
                 vector_in_dim=768, connector_in_channels=3584, connector_hidden_size=4096, connector_heads_num=32,
                 connector_depth=2, connector_need_CA=False, guidance_embeds=False, axes_dims_rope=(16, 56, 56)):
        super().__init__()
        self.out_channels = out_channels or in_channels
        self.inner_dim = num_attention_heads * attention_head_dim

        self.pos_embed = Step1XEditPosEmbed(theta=10000, axes_dim=axes_dims_rope)

        self.time_embed = Step1XEditMLPEmbedder(timestep_in_dim, self.inner_dim)
        self.vec_embed = Step1XEditMLPEmbedder(vector_in_dim, self.inner_dim)

        self.context_embedder = nn.Linear(joint_attention_dim, self.inner_dim)
        self.x_embedder = nn.Linear(in_channels, self.inner_dim)

        self.connector = Step1XEditConnector(connector_in_channels, connector_hidden_size, connector_heads_num,
                                             connector_depth, connector_need_CA)

        self.transformer_blocks = nn.ModuleList([
            Step1XEditTransformerBlock(dim=self.inner_dim, num_attention_heads=num_attention_heads,
                                       attention_head_dim=attention_head_dim)
            for _ in range(num_layers)])

        self.single_transformer_blocks = nn.ModuleList([
            Step1XEditSingleTransformerBlock(dim=self.inner_dim, num_attention_heads=num_attention_heads,
                                             attention_head_dim=attention_head_dim)
            for _ in range(num_single_layers)])

        self.norm_out = AdaLayerNormContinuous(self.inner_dim, self.inner_dim, elementwise_affine=False, eps=1e-6)
        self.proj_out = nn.Linear(self.inner_dim, patch_size * patch_size * self.out_channels, bias=True)

        self.gradient_checkpointing = False

    @staticmethod
    def timestep_embedding(t, dim=256, max_period=10000, time_factor=1000.0):
        t = time_factor * t
        half = dim // 2
        freqs = torch.exp(-math.log(max_period) * torch.arange(start=0, end=half, dtype=torch.float32)
                          / half).to(t.device)

        args = t[:, None].float() * freqs[None]
        embedding = torch.cat([torch.cos(args), torch.sin(args)], dim=-1)
        if dim % 2:
            embedding = torch.cat([embedding, torch.zeros_like(embedding[:, :1])], dim=-1)
        if torch.is_floating_point(t):
            embedding = embedding.to(t)
        return embedding

    def forward(self, hidden_states, encoder_hidden_states=None, prompt_embeds_mask=None, timestep=None,
                img_ids=None, txt_ids=None, guidance=None, joint_attention_kwargs=None, return_dict=True):
        if joint_attention_kwargs is not None:
            joint_attention_kwargs = joint_attention_kwargs.copy()
            joint_attention_kwargs.pop("scale", 1.0)

        encoder_hidden_states, y = self.connector(encoder_hidden_states, timestep, prompt_embeds_mask)
        hidden_states = self.x_embedder(hidden_states)

        temb = self.time_embed(self.timestep_embedding(timestep))
        temb = temb + self.vec_embed(y)
        encoder_hidden_states = self.context_embedder(encoder_hidden_states)

        if txt_ids.ndim == 3:
            txt_ids = txt_ids[0]
        if img_ids.ndim == 3:
            img_ids = img_ids[0]

        ids = torch.cat((txt_ids, img_ids), dim=0)
        image_rotary_emb = self.pos_embed(ids)

        for block in self.transformer_blocks:
            encoder_hidden_states, hidden_states = block(
                hidden_states=hidden_states, encoder_hidden_states=encoder_hidden_states, temb=temb,
                image_rotary_emb=image_rotary_emb, joint_attention_kwargs=joint_attention_kwargs)

        for block in self.single_transformer_blocks:
            encoder_hidden_states, hidden_states = block(
                hidden_states=hidden_states, encoder_hidden_states=encoder_hidden_states, temb=temb,
                image_rotary_emb=image_rotary_emb, joint_attention_kwargs=joint_attention_kwargs)

        hidden_states = self.norm_out(hidden_states, temb)
        output = self.proj_out(hidden_states)
        return (output,)


def build():
    # Small Step1X-Edit: 2 heads of 16 (RoPE axes 4+6+6), one double- and one single-stream block, in_channels 16
    # (4 latent channels packed 2x2); the connector over a 16-wide caption (the Qwen2.5-VL hidden size's stand-in)
    # to a 32-wide refiner (2 heads of 16, one refiner block), joint_attention_dim = that width. vector_in_dim stays
    # 768: the connector's global_proj_out is hard-wired to 768 outputs. The refiner is built in bf16 (the
    # connector's default dtype) and the whole model cast to f32, as from_pretrained(torch_dtype=torch.float32) does.
    model = Step1XEditTransformer2DModel(patch_size=1, in_channels=16, out_channels=None, num_layers=1,
                                         num_single_layers=1, attention_head_dim=16, num_attention_heads=2,
                                         joint_attention_dim=32, timestep_in_dim=256, vector_in_dim=768,
                                         connector_in_channels=16, connector_hidden_size=32, connector_heads_num=2,
                                         connector_depth=1, connector_need_CA=False, guidance_embeds=False,
                                         axes_dims_rope=(4, 6, 6))
    return model.to(torch.float32)


def prepare_latent_image_ids(height, width):
    """FluxPipeline._prepare_latent_image_ids: (H·W, 3) = (0, h, w)."""
    latent_image_ids = torch.zeros(height, width, 3)
    latent_image_ids[..., 1] = latent_image_ids[..., 1] + torch.arange(height)[:, None]
    latent_image_ids[..., 2] = latent_image_ids[..., 2] + torch.arange(width)[None, :]
    h, w, c = latent_image_ids.shape
    return latent_image_ids.reshape(h * w, c)


def pack_latents(latents, batch_size, num_channels_latents, height, width):
    latents = latents.view(batch_size, num_channels_latents, height // 2, 2, width // 2, 2)
    latents = latents.permute(0, 2, 4, 1, 3, 5)
    return latents.reshape(batch_size, (height // 2) * (width // 2), num_channels_latents * 4)


def inputs(g):
    # caption: 5 rows (max_token_length's stand-in), 3 valid, the rest zero as _get_qwenvl_embeds leaves them; the
    # mask long, ones over the valid rows
    n, valid = 5, 3
    txt = torch.zeros(1, n, 16)
    txt[:, :valid] = torch.randn((1, valid, 16), generator=g)
    mask = torch.zeros(1, n, dtype=torch.long)
    mask[:, :valid] = torch.ones(valid, dtype=torch.long)
    text_ids = torch.zeros(n, 3)
    lat = torch.randn((1, 4, 4, 6), generator=g)  # 4x6 latents: a 2x3 grid of packed tokens
    # the reference image's latents as _encode_vae_image leaves them ((z - shift)·scale: here drawn), of the
    # output's size, packed; their ids (1, h + 1, w + 1)
    ref = torch.randn((1, 4, 4, 6), generator=g)
    image_ids = prepare_latent_image_ids(2, 3)
    image_ids[..., 0] = 1
    image_ids[..., 1] = image_ids[..., 1] + 1
    image_ids[..., 2] = image_ids[..., 2] + 1
    latent_ids = torch.cat([prepare_latent_image_ids(2, 3), image_ids], dim=0)
    return {"encoder_hidden_states": txt, "prompt_embeds_mask": mask, "txt_ids": text_ids, "img_ids": latent_ids,
            "image_latents": pack_latents(ref, 1, 4, 4, 6), "noise": pack_latents(lat, 1, 4, 4, 6)}


def call(model, x, sigma, c):
    latent_model_input = torch.cat([x, c["image_latents"]], dim=1)
    t = torch.tensor([sigma * 1000.0], dtype=torch.float32)
    timestep = t.expand(x.shape[0]).to(x.dtype)
    noise_pred = model(hidden_states=latent_model_input, timestep=timestep / 1000, guidance=None,
                       encoder_hidden_states=c["encoder_hidden_states"], prompt_embeds_mask=c["prompt_embeds_mask"],
                       txt_ids=c["txt_ids"], img_ids=c["img_ids"], joint_attention_kwargs={}, return_dict=False)[0]
    return noise_pred[:, : x.size(1)]


PRODUCER = dict(
    library_source="replica of huggingface/diffusers transformer_step1x_edit.py@e8486345a17f and the parts it "
                   "imports (torch 1.13)",
    timestep="sigma float32 (Step1XEditPipeline: timestep / 1000 of sigma*1000; the model and its connector each "
             "scale by 1000)",
    velocity="the noisy rows of the model output (noise_pred[:, :latents.size(1)]), not negated; true_cfg_scale 1",
    note="Step1X-Edit MMDiT, one double- and one single-stream block, with a connector run inside the model: masked "
         "mean of the caption (long 0/1 mask) -> global_proj_out (768) -> vec_embed, added to time_embed(cos-first "
         "sinusoid of 1000 t); a single token refiner over the caption (input_embedder; c = t_embedder(sinusoid of "
         "1000 t) + c_embedder(masked mean); refiner block: LayerNorm, fused qkv '(K H D)', self-attention under "
         "the bool mask outer(mask, mask) with column 0 forced on, x + gate·proj, SiLU MLP, gates from "
         "adaLN_modulation(c)) -> context_embedder; double block: AdaLayerNormZero, joint [text, image] attention "
         "without mask, RMSNorm q/k (and added q/k) per head, RoPE interleaved from ids [text zeros; image (0, h, w); "
         "reference (1, h+1, w+1)] axes (4, 6, 6) theta 10000, GELU-tanh FFNs; single block: AdaLayerNormZeroSingle, "
         "proj_mlp GELU-tanh beside the attention, gate·proj_out over [attention, mlp] + residual; "
         "AdaLayerNormContinuous [scale, shift] + proj_out; packed 2x2 latents with the reference image's packed "
         "latents joined after them on every call")

if __name__ == "__main__":
    capture("step1x_edit", build, inputs, call, sys.argv[1], PRODUCER)
