"""F5-TTS's DiT (mel-spectrogram flow matching, text by character), reimplemented for torch 1.13 (no diffusers here),
captured small in f32 on CPU.

Follows huggingface/diffusers src/diffusers/models/transformers/f5tts_transformer.py at
0156dcbc586c69fb5cbbb028f879b3750f5678a1 (the version the read tool returns; a work-in-progress port of SWivid/F5-TTS
that is not in a diffusers release): DiT, DiTBlock, AdaLayerNorm2, Attention with AttnProcessor (attn_backend "torch",
pe_attn_head None), FeedForward (GELU tanh), TimestepEmbedding with SinusPositionEmbedding, TextEmbedding with
ConvNeXtV2Block and precompute_freqs_cis / get_pos_embed_indices, InputEmbedding with ConvPositionEmbedding,
rotate_half and apply_rotary_pos_emb: the same module tree, parameter names and shapes, and call boundaries; the
arithmetic line for line. Its einops rearranges are written as the reshapes they are (einops is not installed).

Upstream at that commit cannot run as written in three places, each a diffusers helper it imports in place of
F5-TTS's own (SWivid/F5-TTS src/f5_tts/model/modules.py and backbones/dit.py, which the file copies otherwise line
for line); each is repaired with F5-TTS's original, the one a converted F5 checkpoint's weights mean:
- rope: DiT.forward calls embeddings.get_1d_rotary_pos_embed(seq_len, self.dim, device=x.device), which takes
  (dim, pos, ...) and no device, returns no (freqs, xpos_scale) pair, and would span the model width, not a head.
  Here rotary_embed_from_seq_len(dim_head, seq_len) (a function, as upstream's call is) computes what F5-TTS's
  x_transformers RotaryEmbedding(dim_head).forward_from_seq_len(seq_len) returns: (angles [1, n, dim_head] in f32,
  each frequency repeated in adjacent pairs, as rotate_half pairs them; xpos scale 1.0).
- norm_out: normalization.AdaLayerNorm(dim) called as norm_out(x, t) takes t as its `timestep` (for an embedding
  table it does not have) and fails on temb None. Here F5-TTS's AdaLayerNorm_Final: the same children (silu, linear
  dim -> 2·dim, non-affine norm), scale then shift chunked on dim 1, eps 1e-6.
- ConvNeXtV2Block.grn: normalization.GlobalResponseNorm has [1, 1, 1, d] parameters and norms over dims (1, 2) of
  4-D [B, H, W, C]; on [b, n, d] it broadcasts to 4-D and the next block's Conv1d fails. Here F5-TTS's GRN:
  [1, 1, d] gamma and beta, the L2 norm over the sequence (dim 1), divided by its mean over channels + 1e-6.
Other stand-ins: nn.Mish's CPU bf16 kernel (computed in f32, rounded back, as torch 2's kernels do),
F.scaled_dot_product_attention (run.sdpa, its math path; no mask, as mask is None here), and Attention's ImportError
when torch lacks it left out. TextEmbedding.freqs_cis is registered persistent (upstream:
persistent=False), for the bf16 run only: from_pretrained's final model.to(bf16) (and F5-TTS's own loader's
model.to(dtype)) casts it, weights.place casts persistent buffers only, and an f32 table would promote the text to
f32 against the bf16 ConvNeXt weights. Buffers are not recorded in a trace, so the f32 trace is unaffected.

The constructs it shows: character ids (int64) shifted by +1, cut or right-padded with 0 to the mel length, an
nn.Embedding, a sinusoidal table ([cos | sin] halves, 4096 positions) gathered by position ids from
get_pos_embed_indices (float arange -> long, clamped by torch.where) and added, the padded rows zeroed by masked_fill
before and after each of 2 ConvNeXt-V2 blocks (depthwise Conv1d k7 by transpose, affine LayerNorm, Linear, GELU,
GRN, Linear, residual); the noisy mel, the masked reference mel and the text embedding concatenated on channels and
projected, plus a convolutional position embedding (two grouped Conv1d k31, 16 groups, each + Mish, by permute);
classifier-free guidance packed in the model (cfg_infer): the conditional and the unconditional input embeddings
(cond zeroed, text ids zeroed, the padding mask kept from the real ids) concatenated on batch, the time embedding
repeated; the time (0-dim, repeated to the batch) as sin|cos of 1000·t over 128 frequencies (log 10000 / 127) in
f32, cast to the time's dtype, through a SiLU MLP; DiT blocks with AdaLN-Zero modulation from one Linear of SiLU(t)
to 6·dim (shift, scale, gate for attention and for the MLP; (1 + scale), gated residuals), non-affine LayerNorms
eps 1e-6, self-attention with RoPE on every head (interleaved pairs, angles f32, x·cos + rotate_half(x)·sin, cast
back by .type), a GELU-tanh MLP; AdaLayerNorm_Final (scale, shift) + Linear out. The text embedding is cached on the
model (cache=True): step 0 computes it for both branches, steps 1 and 2 reuse the tensors held on the module.

Pipeline as F5-TTS calls it (SWivid/F5-TTS model/cfm.py CFM.sample, which the diffusers WIP pipeline_f5tts.py
follows): transformer(x=x, cond=step_cond, text=text, time=t, mask=None (one sample), cfg_infer=True, cache=True),
pred, null_pred = chunk(2) of the output, v = pred + (pred - null_pred) · cfg_strength (2.0). step_cond the
reference mel [1, 5, mel] zero-padded to the duration (8 frames), text the character ids [1, 6] (right-padded to
8 inside the model); x and cond in the model's dtype, the time in step_cond's dtype (F5's t linspace). F5's time
runs 0 (noise) -> 1 (data): time = 1 - sigma, and the loop's velocity is -v. Simplified: the capture loop's 3 Euler
steps over SIGMAS stand in for F5's 32 EPSS / sway-sampled steps; the final torch.where(cond_mask, cond, out) and the
vocoder are outside the model and left out.

usage: /usr/bin/python3 bench/unseen/replicas/f5tts.py OUTDIR
"""
import math
import sys

import torch
import torch.nn.functional as F
from torch import nn

from run import capture, sdpa


def rotate_half(x):
    x = x.reshape(*x.shape[:-1], -1, 2)  # rearrange(x, '... (d r) -> ... d r', r = 2)
    x1, x2 = x.unbind(dim=-1)
    x = torch.stack((-x2, x1), dim=-1)
    return x.reshape(*x.shape[:-2], -1)  # rearrange(x, '... d r -> ... (d r)')


def apply_rotary_pos_emb(t, freqs, scale=1):
    rot_dim, seq_len, orig_dtype = freqs.shape[-1], t.shape[-2], t.dtype

    freqs = freqs[:, -seq_len:, :]
    scale = scale[:, -seq_len:, :] if isinstance(scale, torch.Tensor) else scale

    if t.ndim == 4 and freqs.ndim == 3:
        freqs = freqs.reshape(freqs.shape[0], 1, freqs.shape[1], freqs.shape[2])  # 'b n d -> b 1 n d'

    # partial rotary embeddings, Wang et al. GPT-J
    t, t_unrotated = t[..., :rot_dim], t[..., rot_dim:]
    t = (t * freqs.cos() * scale) + (rotate_half(t) * freqs.sin() * scale)
    out = torch.cat((t, t_unrotated), dim=-1)

    return out.type(orig_dtype)


def rotary_embed_from_seq_len(dim, seq_len, base=10000, interpolation_factor=1.0, base_rescale_factor=1.0):
    """Repair of upstream's get_1d_rotary_pos_embed(seq_len, self.dim, device=...) call (see the docstring):
    x_transformers RotaryEmbedding(dim).forward_from_seq_len(seq_len), use_xpos False, as F5-TTS's DiT builds rope."""
    base *= base_rescale_factor ** (dim / (dim - 2))
    inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim))
    t = torch.arange(seq_len)
    if t.ndim == 1:
        t = t.reshape(1, -1)  # rearrange(t, "n -> 1 n")
    freqs = torch.einsum("b i , j -> b i j", t.type_as(inv_freq), inv_freq) / interpolation_factor
    freqs = torch.stack((freqs, freqs), dim=-1)
    freqs = freqs.reshape(*freqs.shape[:-2], -1)  # rearrange(freqs, "... d r -> ... (d r)")
    return freqs, 1.0


class Mish(nn.Mish):
    """nn.Mish; torch 1.13 has no CPU bf16 kernel for it: bf16 input computed in f32 and rounded back, as torch 2's
    CPU and CUDA kernels compute reduced-precision mish."""

    def forward(self, input):
        if input.dtype == torch.bfloat16:
            return F.mish(input.float()).to(input.dtype)
        return F.mish(input, inplace=self.inplace)


class AdaLayerNorm2(nn.Module):
    def __init__(self, dim):
        super().__init__()

        self.silu = nn.SiLU()
        self.linear = nn.Linear(dim, dim * 6)

        self.norm = nn.LayerNorm(dim, elementwise_affine=False, eps=1e-6)

    def forward(self, x, emb=None):
        emb = self.linear(self.silu(emb))
        shift_msa, scale_msa, gate_msa, shift_mlp, scale_mlp, gate_mlp = torch.chunk(emb, 6, dim=1)

        x = self.norm(x) * (1 + scale_msa[:, None]) + shift_msa[:, None]
        return x, gate_msa, shift_mlp, scale_mlp, gate_mlp


class AdaLayerNorm_Final(nn.Module):
    """Repair of upstream's norm_out = normalization.AdaLayerNorm(dim) (see the docstring): F5-TTS's own."""

    def __init__(self, dim):
        super().__init__()

        self.silu = nn.SiLU()
        self.linear = nn.Linear(dim, dim * 2)

        self.norm = nn.LayerNorm(dim, elementwise_affine=False, eps=1e-6)

    def forward(self, x, emb):
        emb = self.linear(self.silu(emb))
        scale, shift = torch.chunk(emb, 2, dim=1)

        x = self.norm(x) * (1 + scale)[:, None, :] + shift[:, None, :]
        return x


class GRN(nn.Module):
    """Repair of upstream's normalization.GlobalResponseNorm (see the docstring): F5-TTS's own, on [b, n, d]."""

    def __init__(self, dim):
        super().__init__()
        self.gamma = nn.Parameter(torch.zeros(1, 1, dim))
        self.beta = nn.Parameter(torch.zeros(1, 1, dim))

    def forward(self, x):
        Gx = torch.norm(x, p=2, dim=1, keepdim=True)
        Nx = Gx / (Gx.mean(dim=-1, keepdim=True) + 1e-6)
        return self.gamma * (x * Nx) + self.beta + x


class FeedForward(nn.Module):
    def __init__(self, dim, dim_out=None, mult=4, dropout=0.0, approximate: str = "none"):
        super().__init__()
        inner_dim = int(dim * mult)
        dim_out = dim_out if dim_out is not None else dim

        activation = nn.GELU(approximate=approximate)
        project_in = nn.Sequential(nn.Linear(dim, inner_dim), activation)
        self.ff = nn.Sequential(project_in, nn.Dropout(dropout), nn.Linear(inner_dim, dim_out))

    def forward(self, x):
        return self.ff(x)


class Attention(nn.Module):
    def __init__(self, processor, dim, heads=8, dim_head=64, dropout=0.0, context_dim=None, context_pre_only=False,
                 qk_norm=None):
        super().__init__()

        # (upstream raises ImportError here when F lacks scaled_dot_product_attention; run.sdpa stands in)
        self.processor = processor

        self.dim = dim
        self.heads = heads
        self.inner_dim = dim_head * heads
        self.dropout = dropout

        self.context_dim = context_dim
        self.context_pre_only = context_pre_only

        self.to_q = nn.Linear(dim, self.inner_dim)
        self.to_k = nn.Linear(dim, self.inner_dim)
        self.to_v = nn.Linear(dim, self.inner_dim)

        if qk_norm is None:
            self.q_norm = None
            self.k_norm = None
        else:
            raise NotImplementedError("qk_norm rms_norm: not in this replica (F5TTS_v1_Base: qk_norm None)")
        assert self.context_dim is None  # the joint (MM-DiT) part is unused by DiT

        self.to_out = nn.ModuleList([])
        self.to_out.append(nn.Linear(self.inner_dim, dim))
        self.to_out.append(nn.Dropout(dropout))

    def forward(self, x, c=None, mask=None, rope=None, c_rope=None):
        if c is not None:
            return self.processor(self, x, c=c, mask=mask, rope=rope, c_rope=c_rope)
        else:
            return self.processor(self, x, mask=mask, rope=rope)


class AttnProcessor:
    def __init__(self, pe_attn_head=None, attn_backend="torch", attn_mask_enabled=True):
        assert attn_backend == "torch"
        self.pe_attn_head = pe_attn_head
        self.attn_backend = attn_backend
        self.attn_mask_enabled = attn_mask_enabled

    def __call__(self, attn, x, mask=None, rope=None):
        batch_size = x.shape[0]

        # `sample` projections
        query = attn.to_q(x)
        key = attn.to_k(x)
        value = attn.to_v(x)

        # attention
        inner_dim = key.shape[-1]
        head_dim = inner_dim // attn.heads
        query = query.view(batch_size, -1, attn.heads, head_dim).transpose(1, 2)
        key = key.view(batch_size, -1, attn.heads, head_dim).transpose(1, 2)
        value = value.view(batch_size, -1, attn.heads, head_dim).transpose(1, 2)

        # qk norm
        if attn.q_norm is not None:
            query = attn.q_norm(query)
        if attn.k_norm is not None:
            key = attn.k_norm(key)

        # apply rotary position embedding
        if rope is not None:
            freqs, xpos_scale = rope
            q_xpos_scale, k_xpos_scale = (xpos_scale, xpos_scale**-1.0) if xpos_scale is not None else (1.0, 1.0)

            if self.pe_attn_head is not None:
                pn = self.pe_attn_head
                query[:, :pn, :, :] = apply_rotary_pos_emb(query[:, :pn, :, :], freqs, q_xpos_scale)
                key[:, :pn, :, :] = apply_rotary_pos_emb(key[:, :pn, :, :], freqs, k_xpos_scale)
            else:
                query = apply_rotary_pos_emb(query, freqs, q_xpos_scale)
                key = apply_rotary_pos_emb(key, freqs, k_xpos_scale)

        if self.attn_backend == "torch":
            # mask. e.g. inference got a batch with different target durations, mask out the padding
            if self.attn_mask_enabled and mask is not None:
                attn_mask = mask
                attn_mask = attn_mask.unsqueeze(1).unsqueeze(1)  # 'b n -> b 1 1 n'
                attn_mask = attn_mask.expand(batch_size, attn.heads, query.shape[-2], key.shape[-2])
            else:
                attn_mask = None
            x = sdpa(query, key, value, mask=attn_mask)
            x = x.transpose(1, 2).reshape(batch_size, -1, attn.heads * head_dim)

        x = x.to(query.dtype)

        # linear proj
        x = attn.to_out[0](x)
        # dropout
        x = attn.to_out[1](x)

        if mask is not None:
            mask = mask.unsqueeze(-1)
            x = x.masked_fill(~mask, 0.0)

        return x


class DiTBlock(nn.Module):
    def __init__(self, dim, heads, dim_head, ff_mult=4, dropout=0.1, qk_norm=None, pe_attn_head=None,
                 attn_backend="torch", attn_mask_enabled=True):
        super().__init__()

        self.attn_norm = AdaLayerNorm2(dim)
        self.attn = Attention(
            processor=AttnProcessor(pe_attn_head=pe_attn_head, attn_backend=attn_backend,
                                    attn_mask_enabled=attn_mask_enabled),
            dim=dim, heads=heads, dim_head=dim_head, dropout=dropout, qk_norm=qk_norm)

        self.ff_norm = nn.LayerNorm(dim, elementwise_affine=False, eps=1e-6)
        self.ff = FeedForward(dim=dim, mult=ff_mult, dropout=dropout, approximate="tanh")

    def forward(self, x, t, mask=None, rope=None):  # x: noised input, t: time embedding
        # pre-norm & modulation for attention input
        norm, gate_msa, shift_mlp, scale_mlp, gate_mlp = self.attn_norm(x, emb=t)

        # attention
        attn_output = self.attn(x=norm, mask=mask, rope=rope)

        # process attention output for input x
        x = x + gate_msa.unsqueeze(1) * attn_output

        norm = self.ff_norm(x) * (1 + scale_mlp[:, None]) + shift_mlp[:, None]
        ff_output = self.ff(norm)
        x = x + gate_mlp.unsqueeze(1) * ff_output

        return x


class ConvPositionEmbedding(nn.Module):
    def __init__(self, dim, kernel_size=31, groups=16):
        super().__init__()
        assert kernel_size % 2 != 0
        self.conv1d = nn.Sequential(
            nn.Conv1d(dim, dim, kernel_size, groups=groups, padding=kernel_size // 2),
            Mish(),
            nn.Conv1d(dim, dim, kernel_size, groups=groups, padding=kernel_size // 2),
            Mish(),
        )

    def forward(self, x, mask=None):
        if mask is not None:
            mask = mask[..., None]
            x = x.masked_fill(~mask, 0.0)

        x = x.permute(0, 2, 1)
        x = self.conv1d(x)
        out = x.permute(0, 2, 1)

        if mask is not None:
            out = out.masked_fill(~mask, 0.0)

        return out


class SinusPositionEmbedding(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x, scale=1000):
        device = x.device
        half_dim = self.dim // 2
        emb = math.log(10000) / (half_dim - 1)
        emb = torch.exp(torch.arange(half_dim, device=device).float() * -emb)
        emb = scale * x.unsqueeze(1) * emb.unsqueeze(0)
        emb = torch.cat((emb.sin(), emb.cos()), dim=-1)
        return emb


class TimestepEmbedding(nn.Module):
    def __init__(self, dim, freq_embed_dim=256):
        super().__init__()
        self.time_embed = SinusPositionEmbedding(freq_embed_dim)
        self.time_mlp = nn.Sequential(nn.Linear(freq_embed_dim, dim), nn.SiLU(), nn.Linear(dim, dim))

    def forward(self, timestep):
        time_hidden = self.time_embed(timestep)
        time_hidden = time_hidden.to(timestep.dtype)
        time = self.time_mlp(time_hidden)  # b d
        return time


def precompute_freqs_cis(dim: int, end: int, theta: float = 10000.0, theta_rescale_factor=1.0):
    theta *= theta_rescale_factor ** (dim / (dim - 2))
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 2)[: (dim // 2)].float() / dim))
    t = torch.arange(end, device=freqs.device)  # type: ignore
    freqs = torch.outer(t, freqs).float()  # type: ignore
    freqs_cos = torch.cos(freqs)  # real part
    freqs_sin = torch.sin(freqs)  # imaginary part
    return torch.cat([freqs_cos, freqs_sin], dim=-1)


def get_pos_embed_indices(start, length, max_pos, scale=1.0):
    scale = scale * torch.ones_like(start, dtype=torch.float32)  # in case scale is a scalar
    pos = (
        start.unsqueeze(1)
        + (torch.arange(length, device=start.device, dtype=torch.float32).unsqueeze(0) * scale.unsqueeze(1)).long()
    )
    # avoid extra long error.
    pos = torch.where(pos < max_pos, pos, max_pos - 1)
    return pos


class ConvNeXtV2Block(nn.Module):
    def __init__(self, dim: int, intermediate_dim: int, dilation: int = 1):
        super().__init__()
        padding = (dilation * (7 - 1)) // 2
        self.dwconv = nn.Conv1d(
            dim, dim, kernel_size=7, padding=padding, groups=dim, dilation=dilation
        )  # depthwise conv
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.pwconv1 = nn.Linear(dim, intermediate_dim)  # pointwise/1x1 convs, implemented with linear layers
        self.act = nn.GELU()
        self.grn = GRN(intermediate_dim)
        self.pwconv2 = nn.Linear(intermediate_dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        residual = x
        x = x.transpose(1, 2)  # b n d -> b d n
        x = self.dwconv(x)
        x = x.transpose(1, 2)  # b d n -> b n d
        x = self.norm(x)
        x = self.pwconv1(x)
        x = self.act(x)
        x = self.grn(x)
        x = self.pwconv2(x)
        return residual + x


class TextEmbedding(nn.Module):
    def __init__(self, text_num_embeds, text_dim, mask_padding=True, conv_layers=0, conv_mult=2):
        super().__init__()
        self.text_embed = nn.Embedding(text_num_embeds + 1, text_dim)  # use 0 as filler token

        self.mask_padding = mask_padding  # mask filler and batch padding tokens or not

        if conv_layers > 0:
            self.extra_modeling = True
            self.precompute_max_pos = 4096  # ~44s of 24khz audio
            # persistent here (upstream: persistent=False): see the docstring, the bf16 run only
            self.register_buffer("freqs_cis", precompute_freqs_cis(text_dim, self.precompute_max_pos), persistent=True)
            self.text_blocks = nn.Sequential(
                *[ConvNeXtV2Block(text_dim, text_dim * conv_mult) for _ in range(conv_layers)]
            )
        else:
            self.extra_modeling = False

    def forward(self, text, seq_len, drop_text=False):
        text = text + 1  # use 0 as filler token. preprocess of batch pad -1, see list_str_to_idx()
        text = text[:, :seq_len]  # curtail if character tokens are more than the mel spec tokens
        batch, text_len = text.shape[0], text.shape[1]
        text = F.pad(text, (0, seq_len - text_len), value=0)
        if self.mask_padding:
            text_mask = text == 0

        if drop_text:  # cfg for text
            text = torch.zeros_like(text)

        text = self.text_embed(text)  # b n -> b n d

        # possible extra modeling
        if self.extra_modeling:
            # sinus pos emb
            batch_start = torch.zeros((batch,), dtype=torch.long)
            pos_idx = get_pos_embed_indices(batch_start, seq_len, max_pos=self.precompute_max_pos)
            text_pos_embed = self.freqs_cis[pos_idx]
            text = text + text_pos_embed

            # convnextv2 blocks
            if self.mask_padding:
                text = text.masked_fill(text_mask.unsqueeze(-1).expand(-1, -1, text.size(-1)), 0.0)
                for block in self.text_blocks:
                    text = block(text)
                    text = text.masked_fill(text_mask.unsqueeze(-1).expand(-1, -1, text.size(-1)), 0.0)
            else:
                text = self.text_blocks(text)

        return text


class InputEmbedding(nn.Module):
    def __init__(self, mel_dim, text_dim, out_dim):
        super().__init__()
        self.proj = nn.Linear(mel_dim * 2 + text_dim, out_dim)
        self.conv_pos_embed = ConvPositionEmbedding(dim=out_dim)

    def forward(self, x, cond, text_embed, drop_audio_cond=False):
        if drop_audio_cond:  # cfg for cond audio
            cond = torch.zeros_like(cond)

        x = self.proj(torch.cat((x, cond, text_embed), dim=-1))
        x = self.conv_pos_embed(x) + x
        return x


class DiT(nn.Module):
    def __init__(self, *, dim, depth=8, heads=8, dim_head=64, dropout=0.1, ff_mult=4, mel_dim=100, text_num_embeds=256,
                 text_dim=None, text_mask_padding=True, qk_norm=None, conv_layers=0, pe_attn_head=None,
                 attn_backend="torch", attn_mask_enabled=False, long_skip_connection=False,
                 checkpoint_activations=False):
        super().__init__()

        self.time_embed = TimestepEmbedding(dim)
        if text_dim is None:
            text_dim = mel_dim
        self.text_embed = TextEmbedding(
            text_num_embeds, text_dim, mask_padding=text_mask_padding, conv_layers=conv_layers
        )
        self.text_cond, self.text_uncond = None, None  # text cache
        self.input_embed = InputEmbedding(mel_dim, text_dim, dim)
        self.dim = dim
        self.dim_head = dim_head  # (for the rope repair: upstream passes self.dim)
        self.depth = depth

        self.transformer_blocks = nn.ModuleList(
            [
                DiTBlock(dim=dim, heads=heads, dim_head=dim_head, ff_mult=ff_mult, dropout=dropout, qk_norm=qk_norm,
                         pe_attn_head=pe_attn_head, attn_backend=attn_backend, attn_mask_enabled=attn_mask_enabled)
                for _ in range(depth)
            ]
        )
        self.long_skip_connection = nn.Linear(dim * 2, dim, bias=False) if long_skip_connection else None

        self.norm_out = AdaLayerNorm_Final(dim)  # final modulation (upstream: AdaLayerNorm(dim), see the docstring)
        self.proj_out = nn.Linear(dim, mel_dim)

        self.checkpoint_activations = checkpoint_activations

        self.initialize_weights()

    def initialize_weights(self):
        # Zero-out AdaLN layers in DiT blocks:
        for block in self.transformer_blocks:
            nn.init.constant_(block.attn_norm.linear.weight, 0)
            nn.init.constant_(block.attn_norm.linear.bias, 0)

        # Zero-out output layers:
        nn.init.constant_(self.norm_out.linear.weight, 0)
        nn.init.constant_(self.norm_out.linear.bias, 0)
        nn.init.constant_(self.proj_out.weight, 0)
        nn.init.constant_(self.proj_out.bias, 0)

    def get_input_embed(self, x, cond, text, drop_audio_cond=False, drop_text=False, cache=True):
        seq_len = x.shape[1]
        if cache:
            if drop_text:
                if self.text_uncond is None:
                    self.text_uncond = self.text_embed(text, seq_len, drop_text=True)
                text_embed = self.text_uncond
            else:
                if self.text_cond is None:
                    self.text_cond = self.text_embed(text, seq_len, drop_text=False)
                text_embed = self.text_cond
        else:
            text_embed = self.text_embed(text, seq_len, drop_text=drop_text)

        x = self.input_embed(x, cond, text_embed, drop_audio_cond=drop_audio_cond)

        return x

    def clear_cache(self):
        self.text_cond, self.text_uncond = None, None

    def forward(self, x, cond, text, time, mask=None, drop_audio_cond=False, drop_text=False, cfg_infer=False,
                cache=False):
        batch, seq_len = x.shape[0], x.shape[1]
        if time.ndim == 0:
            time = time.repeat(batch)

        # t: conditioning time, text: text, x: noised audio + cond audio + text
        t = self.time_embed(time)
        if cfg_infer:  # pack cond & uncond forward: b n d -> 2b n d
            x_cond = self.get_input_embed(x, cond, text, drop_audio_cond=False, drop_text=False, cache=cache)
            x_uncond = self.get_input_embed(x, cond, text, drop_audio_cond=True, drop_text=True, cache=cache)
            x = torch.cat((x_cond, x_uncond), dim=0)
            t = torch.cat((t, t), dim=0)
            mask = torch.cat((mask, mask), dim=0) if mask is not None else None
        else:
            x = self.get_input_embed(x, cond, text, drop_audio_cond=drop_audio_cond, drop_text=drop_text, cache=cache)

        # upstream: rope = get_1d_rotary_pos_embed(seq_len, self.dim, device=x.device), see the docstring
        rope = rotary_embed_from_seq_len(self.dim_head, seq_len)

        for block in self.transformer_blocks:
            x = block(x, t, mask=mask, rope=rope)

        x = self.norm_out(x, t)
        output = self.proj_out(x)

        return output


MEL_DIM = 8
SEQ_LEN = 8
REF_LEN = 5
TEXT_LEN = 6
TEXT_NUM_EMBEDS = 24
CFG_STRENGTH = 2.0


def build():
    # F5TTS_v1_Base's shape of config (dim 1024, depth 22, heads 16, ff_mult 2, text_dim 512, conv_layers 4, qk_norm
    # None, pe_attn_head None, attn_mask_enabled False) made tiny: dim 32 = 2 heads of 16 (the conv position
    # embedding's 16 groups need dim % 16 == 0), depth 2, text_dim 16 with 2 ConvNeXt blocks (inner 32), 8 mel
    # channels, 24 characters; the time embedding keeps its 256 sinusoid features.
    return DiT(dim=32, depth=2, heads=2, dim_head=16, dropout=0.1, ff_mult=2, mel_dim=MEL_DIM,
               text_num_embeds=TEXT_NUM_EMBEDS, text_dim=16, text_mask_padding=True, qk_norm=None, conv_layers=2,
               pe_attn_head=None, attn_backend="torch", attn_mask_enabled=False)


def inputs(g):
    ref = torch.randn((1, REF_LEN, MEL_DIM), generator=g)
    # CFM.sample: cond padded to the duration, step_cond = torch.where(cond_mask, cond, 0): the reference mel, zeros after
    step_cond = F.pad(ref, (0, 0, 0, SEQ_LEN - REF_LEN), value=0.0)
    text = torch.randint(0, TEXT_NUM_EMBEDS, (1, TEXT_LEN), generator=g)
    return {"cond": step_cond, "text": text, "noise": torch.randn((1, SEQ_LEN, MEL_DIM), generator=g)}


def call(model, x, sigma, c):
    t = torch.tensor(1.0 - sigma, dtype=x.dtype)  # F5's t: 0 noise -> 1 data, a 0-dim tensor in step_cond's dtype
    pred_cfg = model(x=x, cond=c["cond"], text=c["text"], time=t, mask=None, cfg_infer=True,
                     cache=True)
    pred, null_pred = torch.chunk(pred_cfg, 2, dim=0)
    v = pred + (pred - null_pred) * CFG_STRENGTH
    return -v


PRODUCER = dict(
    library_source="replica of huggingface/diffusers f5tts_transformer.py@0156dcbc586c (WIP port of SWivid/F5-TTS; "
                   "rope, norm_out and GRN repaired with F5-TTS's originals) (torch 1.13)",
    timestep="1 - sigma as a 0-dim tensor in the noise's dtype (F5's t: 0 is noise), repeated to the batch inside",
    velocity="negated CFG combination pred + (pred - null_pred) * 2.0 of the packed [cond, uncond] output",
    note="F5-TTS DiT, 2 blocks, dim 32 (2 heads of 16), mel 8 x 8 frames, 6 character ids: text +1, padded with 0 "
         "to 8, nn.Embedding, a sinusoidal table gathered by position ids and added, 2 ConvNeXt-V2 blocks "
         "(depthwise Conv1d k7, LayerNorm, GELU, GRN over the sequence) with the padded rows masked_fill'ed to 0; "
         "[x, cond, text] concatenated and projected, + grouped Conv1d k31 (16 groups) + Mish position embedding; "
         "CFG packed in the model (cfg_infer: cond zeroed and text ids zeroed for the second half of the batch); "
         "the text embeddings cached on the module at step 0 and reused at steps 1-2 (cache=True); sin|cos(1000 t) "
         "time features through a SiLU MLP; AdaLN-Zero blocks (6 chunks, gated residuals) with full-head "
         "interleaved RoPE (f32 angles, .type back) and a GELU-tanh MLP; AdaLayerNorm_Final (scale, shift) + Linear")

if __name__ == "__main__":
    capture("f5tts", build, inputs, call, sys.argv[1], PRODUCER)
