"""SkyReels-V2 (text to video) video DiT, reimplemented for torch 1.13 (no diffusers here), captured small in f32 on
CPU.

Follows huggingface/diffusers src/diffusers/models/transformers/transformer_skyreels_v2.py at
77eaf324e710d1f1edd42448b63f104daed674fc (SkyReelsV2Transformer3DModel, SkyReelsV2TransformerBlock,
SkyReelsV2Attention with SkyReelsV2AttnProcessor's __call__ as its forward, SkyReelsV2RotaryPosEmbed,
SkyReelsV2TimeTextImageEmbedding, SkyReelsV2Timesteps) with the parts it imports: attention.py (FeedForward
"gelu-approximate", GELU), embeddings.py (TimestepEmbedding, PixArtAlphaTextProjection, get_1d_rotary_pos_embed,
get_1d_sincos_pos_embed_from_grid) and normalization.py (FP32LayerNorm): the same module tree, parameter names and
shapes, and call boundaries; the arithmetic line for line. Stand-ins for what torch 1.13 lacks: torch.nn.RMSNorm
(eps given) and dispatch_attention_fn (SDPA's math on [B, L, H, D], default scale, no mask). The text-to-video
path: 1-D timesteps, num_frame_per_block 1 (no block-causal mask), no fps injection, no image context.

The construct it shows beside Wan's: the timestep sinusoid computed in float64 (get_1d_sincos_pos_embed_from_grid:
int64 timesteps times float64 frequencies 10000^(-i/(D/2)), [sin, cos] flipped to [cos, sin]) and cast to f32
before the time embedder.

Pipeline as SkyReelsV2Pipeline calls it (the UniPC flow scheduler's int64 timesteps, t.expand(B)): timestep
int(sigma*1000), velocity the output as is.

usage: /usr/bin/python3 bench/unseen/replicas/skyreels_v2.py OUTDIR
"""
import math
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

from parts import TorchRMSNorm
from run import capture, sdpa


def get_1d_sincos_pos_embed_from_grid(embed_dim, pos, output_type="np", flip_sin_to_cos=False, dtype=None):
    assert output_type == "pt"
    if embed_dim % 2 != 0:
        raise ValueError("embed_dim must be divisible by 2")
    if dtype is None:
        dtype = torch.float32 if pos.device.type == "mps" else torch.float64
    omega = torch.arange(embed_dim // 2, device=pos.device, dtype=dtype)
    omega /= embed_dim / 2.0
    omega = 1.0 / 10000 ** omega
    pos = pos.reshape(-1)
    out = torch.outer(pos, omega)
    emb_sin = torch.sin(out)
    emb_cos = torch.cos(out)
    emb = torch.concat([emb_sin, emb_cos], dim=1)
    if flip_sin_to_cos:
        emb = torch.cat([emb[:, embed_dim // 2:], emb[:, : embed_dim // 2]], dim=1)
    return emb


class RMSNorm(TorchRMSNorm):
    """torch 2's nn.RMSNorm(dim, eps, elementwise_affine=True)."""


class FP32LayerNorm(nn.LayerNorm):
    def forward(self, inputs):
        origin_dtype = inputs.dtype
        return F.layer_norm(inputs.float(), self.normalized_shape,
                            self.weight.float() if self.weight is not None else None,
                            self.bias.float() if self.bias is not None else None, self.eps).to(origin_dtype)


def get_1d_rotary_pos_embed(dim, pos, theta=10000.0, use_real=False, linear_factor=1.0, ntk_factor=1.0,
                            repeat_interleave_real=True, freqs_dtype=torch.float32):
    assert dim % 2 == 0
    if isinstance(pos, int):
        pos = torch.arange(pos)
    theta = theta * ntk_factor
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=freqs_dtype, device=pos.device)[: (dim // 2)] / dim)) \
        / linear_factor
    freqs = torch.outer(pos, freqs)
    if use_real and repeat_interleave_real:
        freqs_cos = freqs.cos().repeat_interleave(2, dim=1).float()
        freqs_sin = freqs.sin().repeat_interleave(2, dim=1).float()
        return freqs_cos, freqs_sin
    raise NotImplementedError("only the real, interleaved table is used here")


class GELU(nn.Module):
    def __init__(self, dim_in, dim_out, approximate="none", bias=True):
        super().__init__()
        self.proj = nn.Linear(dim_in, dim_out, bias=bias)
        self.approximate = approximate

    def forward(self, hidden_states):
        hidden_states = self.proj(hidden_states)
        return F.gelu(hidden_states, approximate=self.approximate)


class FeedForward(nn.Module):
    """FeedForward(dim, inner_dim=ffn_dim, activation_fn="gelu-approximate")."""

    def __init__(self, dim, inner_dim, dropout=0.0, bias=True):
        super().__init__()
        self.net = nn.ModuleList([GELU(dim, inner_dim, approximate="tanh", bias=bias), nn.Dropout(dropout),
                                  nn.Linear(inner_dim, dim, bias=bias)])

    def forward(self, hidden_states):
        for module in self.net:
            hidden_states = module(hidden_states)
        return hidden_states


class TimestepEmbedding(nn.Module):
    def __init__(self, in_channels, time_embed_dim):
        super().__init__()
        self.linear_1 = nn.Linear(in_channels, time_embed_dim, True)
        self.act = nn.SiLU()
        self.linear_2 = nn.Linear(time_embed_dim, time_embed_dim, True)

    def forward(self, sample):
        sample = self.linear_1(sample)
        sample = self.act(sample)
        return self.linear_2(sample)


class PixArtAlphaTextProjection(nn.Module):
    def __init__(self, in_features, hidden_size):
        super().__init__()
        self.linear_1 = nn.Linear(in_features, hidden_size, bias=True)
        self.act_1 = nn.GELU(approximate="tanh")
        self.linear_2 = nn.Linear(hidden_size, hidden_size, bias=True)

    def forward(self, caption):
        hidden_states = self.linear_1(caption)
        hidden_states = self.act_1(hidden_states)
        return self.linear_2(hidden_states)


class SkyReelsV2Attention(nn.Module):
    """With SkyReelsV2AttnProcessor's __call__ as its forward (no added k/v: text to video)."""

    def __init__(self, dim, heads=8, dim_head=64, eps=1e-5, dropout=0.0, added_kv_proj_dim=None,
                 cross_attention_dim_head=None, processor=None, is_cross_attention=None):
        super().__init__()
        self.inner_dim = dim_head * heads
        self.heads = heads
        self.added_kv_proj_dim = added_kv_proj_dim
        self.cross_attention_dim_head = cross_attention_dim_head
        self.kv_inner_dim = self.inner_dim if cross_attention_dim_head is None else cross_attention_dim_head * heads
        self.to_q = nn.Linear(dim, self.inner_dim, bias=True)
        self.to_k = nn.Linear(dim, self.kv_inner_dim, bias=True)
        self.to_v = nn.Linear(dim, self.kv_inner_dim, bias=True)
        self.to_out = nn.ModuleList([nn.Linear(self.inner_dim, dim, bias=True), nn.Dropout(dropout)])
        self.norm_q = RMSNorm(dim_head * heads, eps=eps, elementwise_affine=True)
        self.norm_k = RMSNorm(dim_head * heads, eps=eps, elementwise_affine=True)
        self.add_k_proj = self.add_v_proj = None
        assert added_kv_proj_dim is None
        self.is_cross_attention = cross_attention_dim_head is not None

    def forward(self, hidden_states, encoder_hidden_states=None, attention_mask=None, rotary_emb=None):
        attn = self
        if encoder_hidden_states is None:
            encoder_hidden_states = hidden_states
        query = attn.to_q(hidden_states)
        key = attn.to_k(encoder_hidden_states)
        value = attn.to_v(encoder_hidden_states)

        query = attn.norm_q(query)
        key = attn.norm_k(key)

        query = query.unflatten(2, (attn.heads, -1))
        key = key.unflatten(2, (attn.heads, -1))
        value = value.unflatten(2, (attn.heads, -1))

        if rotary_emb is not None:
            def apply_rotary_emb(hidden_states, freqs_cos, freqs_sin):
                x1, x2 = hidden_states.unflatten(-1, (-1, 2)).unbind(-1)
                cos = freqs_cos[..., 0::2]
                sin = freqs_sin[..., 1::2]
                out = torch.empty_like(hidden_states)
                out[..., 0::2] = x1 * cos - x2 * sin
                out[..., 1::2] = x1 * sin + x2 * cos
                return out.type_as(hidden_states)

            query = apply_rotary_emb(query, *rotary_emb)
            key = apply_rotary_emb(key, *rotary_emb)

        # dispatch_attention_fn on [B, L, H, D]: SDPA's math on [B, H, L, D], default scale, no mask.
        hidden_states = sdpa(query.transpose(1, 2), key.transpose(1, 2), value.transpose(1, 2),
                             mask=attention_mask).transpose(1, 2)
        hidden_states = hidden_states.flatten(2, 3)
        hidden_states = hidden_states.type_as(query)

        hidden_states = attn.to_out[0](hidden_states)
        hidden_states = attn.to_out[1](hidden_states)
        return hidden_states


class SkyReelsV2Timesteps(nn.Module):
    def __init__(self, num_channels, flip_sin_to_cos, output_type="pt"):
        super().__init__()
        self.num_channels = num_channels
        self.output_type = output_type
        self.flip_sin_to_cos = flip_sin_to_cos

    def forward(self, timesteps):
        original_shape = timesteps.shape
        t_emb = get_1d_sincos_pos_embed_from_grid(self.num_channels, timesteps, output_type=self.output_type,
                                                  flip_sin_to_cos=self.flip_sin_to_cos)
        if len(original_shape) > 1:
            t_emb = t_emb.reshape(*original_shape, self.num_channels)
        return t_emb


class SkyReelsV2TimeTextImageEmbedding(nn.Module):
    def __init__(self, dim, time_freq_dim, time_proj_dim, text_embed_dim, image_embed_dim=None,
                 pos_embed_seq_len=None):
        super().__init__()
        self.timesteps_proj = SkyReelsV2Timesteps(num_channels=time_freq_dim, flip_sin_to_cos=True)
        self.time_embedder = TimestepEmbedding(in_channels=time_freq_dim, time_embed_dim=dim)
        self.act_fn = nn.SiLU()
        self.time_proj = nn.Linear(dim, time_proj_dim)
        self.text_embedder = PixArtAlphaTextProjection(text_embed_dim, dim)
        assert image_embed_dim is None
        self.image_embedder = None

    def forward(self, timestep, encoder_hidden_states, encoder_hidden_states_image=None):
        timestep = self.timesteps_proj(timestep)
        time_embedder_dtype = next(iter(self.time_embedder.parameters())).dtype  # get_parameter_dtype
        if timestep.dtype != time_embedder_dtype and time_embedder_dtype != torch.int8:
            timestep = timestep.to(time_embedder_dtype)
        temb = self.time_embedder(timestep).type_as(encoder_hidden_states)
        timestep_proj = self.time_proj(self.act_fn(temb))
        encoder_hidden_states = self.text_embedder(encoder_hidden_states)
        return temb, timestep_proj, encoder_hidden_states, encoder_hidden_states_image


class SkyReelsV2RotaryPosEmbed(nn.Module):
    def __init__(self, attention_head_dim, patch_size, max_seq_len, theta=10000.0):
        super().__init__()
        self.attention_head_dim = attention_head_dim
        self.patch_size = patch_size
        self.max_seq_len = max_seq_len
        h_dim = w_dim = 2 * (attention_head_dim // 6)
        t_dim = attention_head_dim - h_dim - w_dim
        freqs_dtype = torch.float64
        freqs_cos = []
        freqs_sin = []
        for dim in [t_dim, h_dim, w_dim]:
            freq_cos, freq_sin = get_1d_rotary_pos_embed(dim, max_seq_len, theta, use_real=True,
                                                         repeat_interleave_real=True, freqs_dtype=freqs_dtype)
            freqs_cos.append(freq_cos)
            freqs_sin.append(freq_sin)
        self.register_buffer("freqs_cos", torch.cat(freqs_cos, dim=1), persistent=False)
        self.register_buffer("freqs_sin", torch.cat(freqs_sin, dim=1), persistent=False)

    def forward(self, hidden_states):
        batch_size, num_channels, num_frames, height, width = hidden_states.shape
        p_t, p_h, p_w = self.patch_size
        ppf, pph, ppw = num_frames // p_t, height // p_h, width // p_w
        split_sizes = [self.attention_head_dim - 2 * (self.attention_head_dim // 3), self.attention_head_dim // 3,
                       self.attention_head_dim // 3]
        freqs_cos = self.freqs_cos.split(split_sizes, dim=1)
        freqs_sin = self.freqs_sin.split(split_sizes, dim=1)
        freqs_cos_f = freqs_cos[0][:ppf].view(ppf, 1, 1, -1).expand(ppf, pph, ppw, -1)
        freqs_cos_h = freqs_cos[1][:pph].view(1, pph, 1, -1).expand(ppf, pph, ppw, -1)
        freqs_cos_w = freqs_cos[2][:ppw].view(1, 1, ppw, -1).expand(ppf, pph, ppw, -1)
        freqs_sin_f = freqs_sin[0][:ppf].view(ppf, 1, 1, -1).expand(ppf, pph, ppw, -1)
        freqs_sin_h = freqs_sin[1][:pph].view(1, pph, 1, -1).expand(ppf, pph, ppw, -1)
        freqs_sin_w = freqs_sin[2][:ppw].view(1, 1, ppw, -1).expand(ppf, pph, ppw, -1)
        freqs_cos = torch.cat([freqs_cos_f, freqs_cos_h, freqs_cos_w], dim=-1).reshape(1, ppf * pph * ppw, 1, -1)
        freqs_sin = torch.cat([freqs_sin_f, freqs_sin_h, freqs_sin_w], dim=-1).reshape(1, ppf * pph * ppw, 1, -1)
        return freqs_cos, freqs_sin


class SkyReelsV2TransformerBlock(nn.Module):
    def __init__(self, dim, ffn_dim, num_heads, qk_norm="rms_norm_across_heads", cross_attn_norm=False, eps=1e-6,
                 added_kv_proj_dim=None):
        super().__init__()
        self.norm1 = FP32LayerNorm(dim, eps, elementwise_affine=False)
        self.attn1 = SkyReelsV2Attention(dim=dim, heads=num_heads, dim_head=dim // num_heads, eps=eps,
                                  cross_attention_dim_head=None)
        self.attn2 = SkyReelsV2Attention(dim=dim, heads=num_heads, dim_head=dim // num_heads, eps=eps,
                                  added_kv_proj_dim=added_kv_proj_dim, cross_attention_dim_head=dim // num_heads)
        self.norm2 = FP32LayerNorm(dim, eps, elementwise_affine=True) if cross_attn_norm else nn.Identity()
        self.ffn = FeedForward(dim, inner_dim=ffn_dim)
        self.norm3 = FP32LayerNorm(dim, eps, elementwise_affine=False)
        self.scale_shift_table = nn.Parameter(torch.randn(1, 6, dim) / dim ** 0.5)

    def forward(self, hidden_states, encoder_hidden_states, temb, rotary_emb, attention_mask):
        # temb [B, 6, D] (text to video; the 4-D diffusion-forcing branch is not taken)
        shift_msa, scale_msa, gate_msa, c_shift_msa, c_scale_msa, c_gate_msa = (
            self.scale_shift_table + temb.float()).chunk(6, dim=1)
        norm_hidden_states = (self.norm1(hidden_states.float()) * (1 + scale_msa) + shift_msa).type_as(hidden_states)
        attn_output = self.attn1(norm_hidden_states, None, attention_mask, rotary_emb)
        hidden_states = (hidden_states.float() + attn_output * gate_msa).type_as(hidden_states)
        norm_hidden_states = self.norm2(hidden_states.float()).type_as(hidden_states)
        attn_output = self.attn2(norm_hidden_states, encoder_hidden_states, None, None)
        hidden_states = hidden_states + attn_output
        norm_hidden_states = (self.norm3(hidden_states.float()) * (1 + c_scale_msa) + c_shift_msa).type_as(
            hidden_states)
        ff_output = self.ffn(norm_hidden_states)
        hidden_states = (hidden_states.float() + ff_output.float() * c_gate_msa).type_as(hidden_states)
        return hidden_states


class SkyReelsV2Transformer3DModel(nn.Module):
    _keep_in_fp32_modules = ["time_embedder", "scale_shift_table", "norm1", "norm2", "norm3"]

    def __init__(self, patch_size=(1, 2, 2), num_attention_heads=16, attention_head_dim=128, in_channels=16,
                 out_channels=16, text_dim=4096, freq_dim=256, ffn_dim=8192, num_layers=32, cross_attn_norm=True,
                 qk_norm="rms_norm_across_heads", eps=1e-6, image_dim=None, added_kv_proj_dim=None,
                 rope_max_seq_len=1024, pos_embed_seq_len=None, inject_sample_info=False, num_frame_per_block=1):
        super().__init__()
        self.patch_size = patch_size
        self.num_frame_per_block = num_frame_per_block
        assert not inject_sample_info
        inner_dim = num_attention_heads * attention_head_dim
        out_channels = out_channels or in_channels
        self.rope = SkyReelsV2RotaryPosEmbed(attention_head_dim, patch_size, rope_max_seq_len)
        self.patch_embedding = nn.Conv3d(in_channels, inner_dim, kernel_size=patch_size, stride=patch_size)
        self.condition_embedder = SkyReelsV2TimeTextImageEmbedding(dim=inner_dim, time_freq_dim=freq_dim,
                                                                   time_proj_dim=inner_dim * 6,
                                                                   text_embed_dim=text_dim,
                                                                   image_embed_dim=image_dim,
                                                                   pos_embed_seq_len=pos_embed_seq_len)
        self.blocks = nn.ModuleList([SkyReelsV2TransformerBlock(inner_dim, ffn_dim, num_attention_heads, qk_norm,
                                                                cross_attn_norm, eps, added_kv_proj_dim)
                                     for _ in range(num_layers)])
        self.norm_out = FP32LayerNorm(inner_dim, eps, elementwise_affine=False)
        self.proj_out = nn.Linear(inner_dim, out_channels * math.prod(patch_size))
        self.scale_shift_table = nn.Parameter(torch.randn(1, 2, inner_dim) / inner_dim ** 0.5)

    def forward(self, hidden_states, timestep, encoder_hidden_states, encoder_hidden_states_image=None,
                enable_diffusion_forcing=False, fps=None, return_dict=True, attention_kwargs=None):
        assert not enable_diffusion_forcing
        batch_size, num_channels, num_frames, height, width = hidden_states.shape
        p_t, p_h, p_w = self.patch_size
        post_patch_num_frames = num_frames // p_t
        post_patch_height = height // p_h
        post_patch_width = width // p_w

        rotary_emb = self.rope(hidden_states)

        hidden_states = self.patch_embedding(hidden_states)
        hidden_states = hidden_states.flatten(2).transpose(1, 2)

        causal_mask = None
        assert self.num_frame_per_block == 1  # the block-causal mask is built only above 1

        temb, timestep_proj, encoder_hidden_states, encoder_hidden_states_image = self.condition_embedder(
            timestep, encoder_hidden_states, encoder_hidden_states_image)
        timestep_proj = timestep_proj.unflatten(-1, (6, -1))

        for block in self.blocks:
            hidden_states = block(hidden_states, encoder_hidden_states, timestep_proj, rotary_emb, causal_mask)

        shift, scale = (self.scale_shift_table + temb.unsqueeze(1)).chunk(2, dim=1)
        shift = shift.to(hidden_states.device)
        scale = scale.to(hidden_states.device)
        hidden_states = (self.norm_out(hidden_states.float()) * (1 + scale) + shift).type_as(hidden_states)
        hidden_states = self.proj_out(hidden_states)
        hidden_states = hidden_states.reshape(batch_size, post_patch_num_frames, post_patch_height, post_patch_width,
                                              p_t, p_h, p_w, -1)
        hidden_states = hidden_states.permute(0, 7, 1, 4, 2, 5, 3, 6)
        output = hidden_states.flatten(6, 7).flatten(4, 5).flatten(2, 3)
        return (output,)


def build():
    # Wan-sized like the wanvace replica: 2 heads of 18 (RoPE t/h/w 6/6/6: the table's build and cut agree, as
    # at the real 128), 2 blocks, text 16 wide, sinusoid 16 wide.
    return SkyReelsV2Transformer3DModel(patch_size=(1, 2, 2), num_attention_heads=2, attention_head_dim=18,
                                        in_channels=4, out_channels=4, text_dim=16, freq_dim=16, ffn_dim=64,
                                        num_layers=2, cross_attn_norm=True, qk_norm="rms_norm_across_heads",
                                        eps=1e-6, rope_max_seq_len=32)


def inputs(g):
    return {"encoder_hidden_states": torch.randn((1, 4, 16), generator=g),
            "noise": torch.randn((1, 4, 2, 4, 8), generator=g)}


def call(model, x, sigma, c):
    t = torch.tensor([int(sigma * 1000)], dtype=torch.int64)
    return model(hidden_states=x, timestep=t, encoder_hidden_states=c["encoder_hidden_states"], return_dict=False,
                 attention_kwargs=None)[0]


PRODUCER = dict(
    library_source="replica of huggingface/diffusers transformer_skyreels_v2.py@77eaf324e710 and the parts it "
                   "imports (torch 1.13)",
    timestep="int(sigma*1000) int64 (SkyReelsV2Pipeline: t.expand(B), UniPCMultistep flow timesteps)",
    velocity="model output as is (flow prediction), not negated",
    note="SkyReels-V2 text-to-video DiT (Wan-shaped), 2 blocks: 3-D conv patchify; timestep sinusoid in float64 "
         "(int64 t times f64 frequencies 10000^(-i/(D/2)), [cos, sin]) cast to f32 before the SiLU MLP; 6-way "
         "scale_shift_table + timestep_proj modulation over FP32 non-affine LayerNorms; self-attn with across-heads "
         "RMSNorm q/k and interleaved 3-D RoPE (cos/sin tables), no mask (num_frame_per_block 1); affine-LayerNorm "
         "cross-attn to the projected text; GELU-tanh FFN; final (shift, scale) from scale_shift_table + temb; 2 "
         "latent frames")

if __name__ == "__main__":
    capture("skyreels_v2", build, inputs, call, sys.argv[1], PRODUCER)
