"""LLaDA2.0-Uni image decoder DiT (a Z-Image S3-DiT variant), reimplemented for torch 1.13 (no diffusers here),
captured small in f32 on CPU.

Follows huggingface/diffusers src/diffusers/models/transformers/transformer_llada2uni_image.py at
1ede365aa4b3a6ddbeb6a38a2e004b053346fbcc (LLaDA2UniImageTransformer2DModel with _patchify_image, _pad_with_ids,
patchify_and_embed, _prepare_sequence, _build_unified_sequence, unpatchify and create_coordinate_grid;
ZImageTransformerBlock, FeedForward, FinalLayer, TimestepEmbedder, RopeEmbedder, select_per_token, Attention with
ZSingleStreamAttnProcessor's __call__ as its forward) with the parts it imports: attention_processor.py (Attention:
to_q/to_k/to_v/to_out, qk_norm "rms_norm" = per-head RMSNorm, eps 1e-5) and normalization.py (RMSNorm): the same
module tree, parameter names and shapes, and call boundaries; the arithmetic line for line. The processor's
dispatch_attention_fn path is taken (flash_attn not installed, diffusers' default): the 2-D key mask lifted to
[B, 1, 1, S]. Stand-ins for what torch 1.13 lacks: dispatch_attention_fn (SDPA's math on [B, L, H, D], default scale,
bool mask), `with torch.device("cpu")` and torch.amp.autocast("cuda", enabled=False) (both dropped: no-ops on a CPU
f32 run), and int32 index tensors (the RoPE gather indexes with ids.long(); the ids stay int32 as
create_coordinate_grid makes them). Only the basic (non-omni) mode is written: the omni mode (lists of images per
sample, SigLIP features, per-token noisy/clean modulation) raises.

The constructs it shows: list inputs (one (C, F, H, W) latent and one (L, D) semantic-feature sequence per sample,
the SigVQ features of the LLM's image tokens taking the caption's place), each patchified and padded to a multiple of
32 rows by repeating its last row, the padding rows then overwritten with a learned pad token (x_pad_token,
cap_pad_token) by boolean index assignment; integer 3-axis position ids (semantic (1 + i, 0, 0) over the padded
length, image (cap_len + 1, row, col), image padding (0, 0, 0)) gathering rows of per-axis complex64 polar tables,
applied by complex multiply; a modulated noise refiner over the image rows and an unmodulated context refiner over
the semantic rows (semantic_embedder = RMSNorm + Linear), then joint [image, semantic] blocks under an all-True key
mask; sandwich RMSNorms, tanh gates, scale-only modulation (1 + scale); SiLU-gated FFN; cos-first sinusoid of
t·1000 into a 1024-wide MLP; final non-affine LayerNorm · (1 + scale), Linear, unpatchify of the image rows.

Caller: no diffusers pipeline uses this class at the indexed commits; the model's own decoder loop,
inclusionAI/LLaDA2.0-Uni decoder/decode.py at 03fa8284edd765eef4648e1765ce090948727bd4 (_create_decoder_model_fn,
the "decoder-turbo" path without CFG), calls it as model(x=list(x.unbind(0)), t=t, cap_feats=[features],
patch_size=2, f_patch_size=1, return_dict=False) on latents (1, C, 1, H, W), with t the Lumina "Linear" transport
time (t = 1 − σ, float32, shape (1,)), and integrates x += v·dt in t: the velocity in σ is the negated output,
stacked from the returned list.

usage: /usr/bin/python3 bench/unseen/replicas/llada2uni_image.py OUTDIR
"""
import math
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils.rnn import pad_sequence

from run import capture, sdpa

ADALN_EMBED_DIM = 256
SEQ_MULTI_OF = 32
X_PAD_DIM = 64


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


class TimestepEmbedder(nn.Module):
    def __init__(self, out_size, mid_size=None, frequency_embedding_size=256):
        super().__init__()
        if mid_size is None:
            mid_size = out_size
        self.mlp = nn.Sequential(nn.Linear(frequency_embedding_size, mid_size, bias=True), nn.SiLU(),
                                 nn.Linear(mid_size, out_size, bias=True))
        self.frequency_embedding_size = frequency_embedding_size

    @staticmethod
    def timestep_embedding(t, dim, max_period=10000):
        half = dim // 2
        freqs = torch.exp(-math.log(max_period) * torch.arange(start=0, end=half, dtype=torch.float32,
                                                                device=t.device) / half)
        args = t[:, None].float() * freqs[None]
        embedding = torch.cat([torch.cos(args), torch.sin(args)], dim=-1)
        if dim % 2:
            embedding = torch.cat([embedding, torch.zeros_like(embedding[:, :1])], dim=-1)
        return embedding

    def forward(self, t):
        t_freq = self.timestep_embedding(t, self.frequency_embedding_size)
        weight_dtype = self.mlp[0].weight.dtype
        compute_dtype = getattr(self.mlp[0], "compute_dtype", None)
        if weight_dtype.is_floating_point:
            t_freq = t_freq.to(weight_dtype)
        elif compute_dtype is not None:
            t_freq = t_freq.to(compute_dtype)
        t_emb = self.mlp(t_freq)
        return t_emb


class Attention(nn.Module):
    """attention_processor.Attention as the blocks build it (bias False, out_bias False, qk_norm "rms_norm",
    eps 1e-5), with ZSingleStreamAttnProcessor's __call__ as its forward (the dispatch_attention_fn path)."""

    def __init__(self, query_dim, cross_attention_dim=None, dim_head=64, heads=8, qk_norm=None, eps=1e-5,
                 bias=False, out_bias=True):
        super().__init__()
        self.inner_dim = dim_head * heads
        self.heads = heads
        self.norm_q = RMSNorm(dim_head, eps=eps) if qk_norm == "rms_norm" else None
        self.norm_k = RMSNorm(dim_head, eps=eps) if qk_norm == "rms_norm" else None
        self.to_q = nn.Linear(query_dim, self.inner_dim, bias=bias)
        self.to_k = nn.Linear(query_dim, self.inner_dim, bias=bias)
        self.to_v = nn.Linear(query_dim, self.inner_dim, bias=bias)
        self.to_out = nn.ModuleList([nn.Linear(self.inner_dim, query_dim, bias=out_bias), nn.Dropout(0.0)])

    def forward(self, hidden_states, encoder_hidden_states=None, attention_mask=None, freqs_cis=None):
        attn = self
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
            x = torch.view_as_complex(x_in.float().reshape(*x_in.shape[:-1], -1, 2))
            freqs_cis = freqs_cis.unsqueeze(2)
            x_out = torch.view_as_real(x * freqs_cis).flatten(3)
            return x_out.type_as(x_in)

        if freqs_cis is not None:
            query = apply_rotary_emb(query, freqs_cis)
            key = apply_rotary_emb(key, freqs_cis)

        dtype = query.dtype
        query, key = query.to(dtype), key.to(dtype)

        if attention_mask is not None and attention_mask.ndim == 2:
            attention_mask = attention_mask[:, None, None, :]

        # dispatch_attention_fn on [B, L, H, D]: SDPA's math on [B, H, L, D], default scale, the bool key mask.
        hidden_states = sdpa(query.transpose(1, 2), key.transpose(1, 2), value.transpose(1, 2),
                             mask=attention_mask).transpose(1, 2)

        hidden_states = hidden_states.flatten(2, 3)
        hidden_states = hidden_states.to(dtype)

        output = attn.to_out[0](hidden_states)
        if len(attn.to_out) > 1:
            output = attn.to_out[1](output)
        return output


def select_per_token(value_noisy, value_clean, noise_mask, seq_len):
    noise_mask_expanded = noise_mask.unsqueeze(-1)
    return torch.where(noise_mask_expanded == 1, value_noisy.unsqueeze(1).expand(-1, seq_len, -1),
                       value_clean.unsqueeze(1).expand(-1, seq_len, -1))


class FeedForward(nn.Module):
    def __init__(self, dim, hidden_dim):
        super().__init__()
        self.w1 = nn.Linear(dim, hidden_dim, bias=False)
        self.w2 = nn.Linear(hidden_dim, dim, bias=False)
        self.w3 = nn.Linear(dim, hidden_dim, bias=False)

    def _forward_silu_gating(self, x1, x3):
        return F.silu(x1) * x3

    def forward(self, x):
        return self.w2(self._forward_silu_gating(self.w1(x), self.w3(x)))


class ZImageTransformerBlock(nn.Module):
    def __init__(self, layer_id, dim, n_heads, n_kv_heads, norm_eps, qk_norm, modulation=True):
        super().__init__()
        self.dim = dim
        self.head_dim = dim // n_heads
        self.attention = Attention(query_dim=dim, cross_attention_dim=None, dim_head=dim // n_heads, heads=n_heads,
                                   qk_norm="rms_norm" if qk_norm else None, eps=1e-5, bias=False, out_bias=False)
        self.feed_forward = FeedForward(dim=dim, hidden_dim=int(dim / 3 * 8))
        self.layer_id = layer_id
        self.attention_norm1 = RMSNorm(dim, eps=norm_eps)
        self.ffn_norm1 = RMSNorm(dim, eps=norm_eps)
        self.attention_norm2 = RMSNorm(dim, eps=norm_eps)
        self.ffn_norm2 = RMSNorm(dim, eps=norm_eps)
        self.modulation = modulation
        if modulation:
            self.adaLN_modulation = nn.Sequential(nn.Linear(min(dim, ADALN_EMBED_DIM), 4 * dim, bias=True))

    def forward(self, x, attn_mask, freqs_cis, adaln_input=None, noise_mask=None, adaln_noisy=None,
                adaln_clean=None):
        if self.modulation:
            seq_len = x.shape[1]
            if noise_mask is not None:
                mod_noisy = self.adaLN_modulation(adaln_noisy)
                mod_clean = self.adaLN_modulation(adaln_clean)
                scale_msa_noisy, gate_msa_noisy, scale_mlp_noisy, gate_mlp_noisy = mod_noisy.chunk(4, dim=1)
                scale_msa_clean, gate_msa_clean, scale_mlp_clean, gate_mlp_clean = mod_clean.chunk(4, dim=1)
                gate_msa_noisy, gate_mlp_noisy = gate_msa_noisy.tanh(), gate_mlp_noisy.tanh()
                gate_msa_clean, gate_mlp_clean = gate_msa_clean.tanh(), gate_mlp_clean.tanh()
                scale_msa_noisy, scale_mlp_noisy = 1.0 + scale_msa_noisy, 1.0 + scale_mlp_noisy
                scale_msa_clean, scale_mlp_clean = 1.0 + scale_msa_clean, 1.0 + scale_mlp_clean
                scale_msa = select_per_token(scale_msa_noisy, scale_msa_clean, noise_mask, seq_len)
                scale_mlp = select_per_token(scale_mlp_noisy, scale_mlp_clean, noise_mask, seq_len)
                gate_msa = select_per_token(gate_msa_noisy, gate_msa_clean, noise_mask, seq_len)
                gate_mlp = select_per_token(gate_mlp_noisy, gate_mlp_clean, noise_mask, seq_len)
            else:
                mod = self.adaLN_modulation(adaln_input)
                scale_msa, gate_msa, scale_mlp, gate_mlp = mod.unsqueeze(1).chunk(4, dim=2)
                gate_msa, gate_mlp = gate_msa.tanh(), gate_mlp.tanh()
                scale_msa, scale_mlp = 1.0 + scale_msa, 1.0 + scale_mlp

            attn_out = self.attention(self.attention_norm1(x) * scale_msa, attention_mask=attn_mask,
                                      freqs_cis=freqs_cis)
            x = x + gate_msa * self.attention_norm2(attn_out)
            x = x + gate_mlp * self.ffn_norm2(self.feed_forward(self.ffn_norm1(x) * scale_mlp))
        else:
            attn_out = self.attention(self.attention_norm1(x), attention_mask=attn_mask, freqs_cis=freqs_cis)
            x = x + self.attention_norm2(attn_out)
            x = x + self.ffn_norm2(self.feed_forward(self.ffn_norm1(x)))
        return x


class FinalLayer(nn.Module):
    def __init__(self, hidden_size, out_channels):
        super().__init__()
        self.norm_final = nn.LayerNorm(hidden_size, elementwise_affine=False, eps=1e-6)
        self.linear = nn.Linear(hidden_size, out_channels, bias=True)
        self.adaLN_modulation = nn.Sequential(nn.SiLU(), nn.Linear(min(hidden_size, ADALN_EMBED_DIM), hidden_size,
                                                                   bias=True))

    def forward(self, x, c=None, noise_mask=None, c_noisy=None, c_clean=None):
        seq_len = x.shape[1]
        if noise_mask is not None:
            scale_noisy = 1.0 + self.adaLN_modulation(c_noisy)
            scale_clean = 1.0 + self.adaLN_modulation(c_clean)
            scale = select_per_token(scale_noisy, scale_clean, noise_mask, seq_len)
        else:
            assert c is not None, "Either c or (c_noisy, c_clean) must be provided"
            scale = 1.0 + self.adaLN_modulation(c)
            scale = scale.unsqueeze(1)
        x = self.norm_final(x) * scale
        x = self.linear(x)
        return x


class RopeEmbedder:
    def __init__(self, theta=256.0, axes_dims=(16, 56, 56), axes_lens=(64, 128, 128)):
        self.theta = theta
        self.axes_dims = axes_dims
        self.axes_lens = axes_lens
        assert len(axes_dims) == len(axes_lens), "axes_dims and axes_lens must have the same length"
        self.freqs_cis = None

    @staticmethod
    def precompute_freqs_cis(dim, end, theta=256.0):
        # upstream: inside `with torch.device("cpu")` (torch 2), a no-op here
        freqs_cis = []
        for i, (d, e) in enumerate(zip(dim, end)):
            freqs = 1.0 / (theta ** (torch.arange(0, d, 2, dtype=torch.float64, device="cpu") / d))
            timestep = torch.arange(e, device=freqs.device, dtype=torch.float64)
            freqs = torch.outer(timestep, freqs).float()
            freqs_cis_i = torch.polar(torch.ones_like(freqs), freqs).to(torch.complex64)
            freqs_cis.append(freqs_cis_i)
        return freqs_cis

    def __call__(self, ids):
        assert ids.ndim == 2
        assert ids.shape[-1] == len(self.axes_dims)
        device = ids.device
        if self.freqs_cis is None:
            self.freqs_cis = self.precompute_freqs_cis(self.axes_dims, self.axes_lens, theta=self.theta)
            self.freqs_cis = [freqs_cis.to(device) for freqs_cis in self.freqs_cis]
        else:
            if self.freqs_cis[0].device != device:
                self.freqs_cis = [freqs_cis.to(device) for freqs_cis in self.freqs_cis]
        result = []
        for i in range(len(self.axes_dims)):
            index = ids[:, i]
            result.append(self.freqs_cis[i][index.long()])  # torch 1.13 indexes with int64 only
        return torch.cat(result, dim=-1)


class LLaDA2UniImageTransformer2DModel(nn.Module):
    _skip_layerwise_casting_patterns = ["t_embedder", "semantic_embedder"]

    def __init__(self, all_patch_size=(2,), all_f_patch_size=(1,), in_channels=16, dim=3840, n_layers=30,
                 n_refiner_layers=2, n_heads=30, n_kv_heads=30, norm_eps=1e-5, qk_norm=True, cap_feat_dim=2560,
                 siglip_feat_dim=None, rope_theta=256.0, t_scale=1000.0, axes_dims=(32, 48, 48),
                 axes_lens=(1024, 512, 512)):
        super().__init__()
        self.in_channels = in_channels
        self.out_channels = in_channels
        self.all_patch_size = all_patch_size
        self.all_f_patch_size = all_f_patch_size
        self.dim = dim
        self.n_heads = n_heads
        self.rope_theta = rope_theta
        self.t_scale = t_scale
        assert len(all_patch_size) == len(all_f_patch_size)
        all_x_embedder = {}
        all_final_layer = {}
        for patch_idx, (patch_size, f_patch_size) in enumerate(zip(all_patch_size, all_f_patch_size)):
            x_embedder = nn.Linear(f_patch_size * patch_size * patch_size * in_channels, dim, bias=True)
            all_x_embedder[f"{patch_size}-{f_patch_size}"] = x_embedder
            final_layer = FinalLayer(dim, patch_size * patch_size * f_patch_size * self.out_channels)
            all_final_layer[f"{patch_size}-{f_patch_size}"] = final_layer
        self.all_x_embedder = nn.ModuleDict(all_x_embedder)
        self.all_final_layer = nn.ModuleDict(all_final_layer)
        self.noise_refiner = nn.ModuleList([ZImageTransformerBlock(1000 + layer_id, dim, n_heads, n_kv_heads,
                                                                   norm_eps, qk_norm, modulation=True)
                                            for layer_id in range(n_refiner_layers)])
        self.context_refiner = nn.ModuleList([ZImageTransformerBlock(layer_id, dim, n_heads, n_kv_heads, norm_eps,
                                                                     qk_norm, modulation=False)
                                              for layer_id in range(n_refiner_layers)])
        self.t_embedder = TimestepEmbedder(min(dim, ADALN_EMBED_DIM), mid_size=1024)
        self.semantic_embedder = nn.Sequential(RMSNorm(cap_feat_dim, eps=norm_eps),
                                               nn.Linear(cap_feat_dim, dim, bias=True))
        if siglip_feat_dim is not None:
            raise NotImplementedError("the omni (SigLIP) variant is not replicated")
        self.siglip_embedder = None
        self.siglip_refiner = None
        self.siglip_pad_token = None
        self.x_pad_token = nn.Parameter(torch.empty((1, dim)))
        self.cap_pad_token = nn.Parameter(torch.empty((1, dim)))
        self.layers = nn.ModuleList([ZImageTransformerBlock(layer_id, dim, n_heads, n_kv_heads, norm_eps, qk_norm)
                                     for layer_id in range(n_layers)])
        head_dim = dim // n_heads
        assert head_dim == sum(axes_dims)
        self.axes_dims = axes_dims
        self.axes_lens = axes_lens
        self.rope_embedder = RopeEmbedder(theta=rope_theta, axes_dims=axes_dims, axes_lens=axes_lens)

    def unpatchify(self, x, size, patch_size, f_patch_size, x_pos_offsets=None):
        pH = pW = patch_size
        pF = f_patch_size
        bsz = len(x)
        assert len(size) == bsz
        if x_pos_offsets is not None:
            raise NotImplementedError("omni mode")
        for i in range(bsz):
            F, H, W = size[i]
            ori_len = (F // pF) * (H // pH) * (W // pW)
            x[i] = (x[i][:ori_len].view(F // pF, H // pH, W // pW, pF, pH, pW, self.out_channels)
                    .permute(6, 0, 3, 1, 4, 2, 5).reshape(self.out_channels, F, H, W))
        return x

    @staticmethod
    def create_coordinate_grid(size, start=None, device=None):
        if start is None:
            start = (0 for _ in size)
        axes = [torch.arange(x0, x0 + span, dtype=torch.int32, device=device) for x0, span in zip(start, size)]
        grids = torch.meshgrid(axes, indexing="ij")
        return torch.stack(grids, dim=-1)

    def _patchify_image(self, image, patch_size, f_patch_size):
        pH, pW, pF = patch_size, patch_size, f_patch_size
        C, F, H, W = image.size()
        F_tokens, H_tokens, W_tokens = F // pF, H // pH, W // pW
        image = image.view(C, F_tokens, pF, H_tokens, pH, W_tokens, pW)
        image = image.permute(1, 3, 5, 2, 4, 6, 0).reshape(F_tokens * H_tokens * W_tokens, pF * pH * pW * C)
        return image, (F, H, W), (F_tokens, H_tokens, W_tokens)

    def _pad_with_ids(self, feat, pos_grid_size, pos_start, device, noise_mask_val=None):
        ori_len = len(feat)
        pad_len = (-ori_len) % SEQ_MULTI_OF
        total_len = ori_len + pad_len
        ori_pos_ids = self.create_coordinate_grid(size=pos_grid_size, start=pos_start, device=device).flatten(0, 2)
        if pad_len > 0:
            pad_pos_ids = (self.create_coordinate_grid(size=(1, 1, 1), start=(0, 0, 0), device=device)
                           .flatten(0, 2).repeat(pad_len, 1))
            pos_ids = torch.cat([ori_pos_ids, pad_pos_ids], dim=0)
            padded_feat = torch.cat([feat, feat[-1:].repeat(pad_len, 1)], dim=0)
            pad_mask = torch.cat([torch.zeros(ori_len, dtype=torch.bool, device=device),
                                  torch.ones(pad_len, dtype=torch.bool, device=device)])
        else:
            pos_ids = ori_pos_ids
            padded_feat = feat
            pad_mask = torch.zeros(ori_len, dtype=torch.bool, device=device)
        noise_mask = [noise_mask_val] * total_len if noise_mask_val is not None else None
        return padded_feat, pos_ids, pad_mask, total_len, noise_mask

    def patchify_and_embed(self, all_image, all_cap_feats, patch_size, f_patch_size):
        device = all_image[0].device
        all_img_out, all_img_size, all_img_pos_ids, all_img_pad_mask = [], [], [], []
        all_cap_out, all_cap_pos_ids, all_cap_pad_mask = [], [], []
        for image, cap_feat in zip(all_image, all_cap_feats):
            cap_out, cap_pos_ids, cap_pad_mask, cap_len, _ = self._pad_with_ids(
                cap_feat, (len(cap_feat) + (-len(cap_feat)) % SEQ_MULTI_OF, 1, 1), (1, 0, 0), device)
            all_cap_out.append(cap_out)
            all_cap_pos_ids.append(cap_pos_ids)
            all_cap_pad_mask.append(cap_pad_mask)

            img_patches, size, (F_t, H_t, W_t) = self._patchify_image(image, patch_size, f_patch_size)
            img_out, img_pos_ids, img_pad_mask, _, _ = self._pad_with_ids(
                img_patches, (F_t, H_t, W_t), (cap_len + 1, 0, 0), device)
            all_img_out.append(img_out)
            all_img_size.append(size)
            all_img_pos_ids.append(img_pos_ids)
            all_img_pad_mask.append(img_pad_mask)
        return (all_img_out, all_cap_out, all_img_size, all_img_pos_ids, all_cap_pos_ids, all_img_pad_mask,
                all_cap_pad_mask)

    def _prepare_sequence(self, feats, pos_ids, inner_pad_mask, pad_token, noise_mask=None, device=None):
        item_seqlens = [len(f) for f in feats]
        max_seqlen = max(item_seqlens)
        bsz = len(feats)

        feats_cat = torch.cat(feats, dim=0)
        feats_cat[torch.cat(inner_pad_mask)] = pad_token
        feats = list(feats_cat.split(item_seqlens, dim=0))

        freqs_cis = list(self.rope_embedder(torch.cat(pos_ids, dim=0)).split([len(p) for p in pos_ids], dim=0))

        feats = pad_sequence(feats, batch_first=True, padding_value=0.0)
        freqs_cis = pad_sequence(freqs_cis, batch_first=True, padding_value=0.0)[:, : feats.shape[1]]

        attn_mask = torch.zeros((bsz, max_seqlen), dtype=torch.bool, device=device)
        for i, seq_len in enumerate(item_seqlens):
            attn_mask[i, :seq_len] = 1

        noise_mask_tensor = None
        if noise_mask is not None:
            noise_mask_tensor = pad_sequence([torch.tensor(m, dtype=torch.long, device=device) for m in noise_mask],
                                             batch_first=True, padding_value=0)[:, : feats.shape[1]]
        return feats, freqs_cis, attn_mask, item_seqlens, noise_mask_tensor

    def _build_unified_sequence(self, x, x_freqs, x_seqlens, x_noise_mask, cap, cap_freqs, cap_seqlens,
                                cap_noise_mask, siglip, siglip_freqs, siglip_seqlens, siglip_noise_mask, omni_mode,
                                device):
        bsz = len(x_seqlens)
        unified = []
        unified_freqs = []
        if omni_mode:
            raise NotImplementedError("omni mode")
        for i in range(bsz):
            x_len, cap_len = x_seqlens[i], cap_seqlens[i]
            unified.append(torch.cat([x[i][:x_len], cap[i][:cap_len]]))
            unified_freqs.append(torch.cat([x_freqs[i][:x_len], cap_freqs[i][:cap_len]]))
        unified_seqlens = [a + b for a, b in zip(x_seqlens, cap_seqlens)]
        max_seqlen = max(unified_seqlens)

        unified = pad_sequence(unified, batch_first=True, padding_value=0.0)
        unified_freqs = pad_sequence(unified_freqs, batch_first=True, padding_value=0.0)

        attn_mask = torch.zeros((bsz, max_seqlen), dtype=torch.bool, device=device)
        for i, seq_len in enumerate(unified_seqlens):
            attn_mask[i, :seq_len] = 1
        noise_mask_tensor = None
        return unified, unified_freqs, attn_mask, noise_mask_tensor

    def forward(self, x, t, cap_feats, return_dict=True, controlnet_block_samples=None, siglip_feats=None,
                image_noise_mask=None, patch_size=2, f_patch_size=1):
        assert patch_size in self.all_patch_size and f_patch_size in self.all_f_patch_size
        omni_mode = isinstance(x[0], list)
        if omni_mode:
            raise NotImplementedError("omni mode")
        device = x[0].device

        adaln_input = self.t_embedder(t * self.t_scale).type_as(x[0])
        t_noisy = t_clean = None

        (x, cap_feats, x_size, x_pos_ids, cap_pos_ids, x_pad_mask,
         cap_pad_mask) = self.patchify_and_embed(x, cap_feats, patch_size, f_patch_size)
        x_pos_offsets = x_noise_mask = cap_noise_mask = siglip_noise_mask = None

        x_seqlens = [len(xi) for xi in x]
        x = self.all_x_embedder[f"{patch_size}-{f_patch_size}"](torch.cat(x, dim=0))
        x, x_freqs, x_mask, _, x_noise_tensor = self._prepare_sequence(
            list(x.split(x_seqlens, dim=0)), x_pos_ids, x_pad_mask, self.x_pad_token, x_noise_mask, device)

        for layer in self.noise_refiner:
            x = layer(x, x_mask, x_freqs, adaln_input, x_noise_tensor, t_noisy, t_clean)

        cap_seqlens = [len(ci) for ci in cap_feats]
        cap_feats = self.semantic_embedder(torch.cat(cap_feats, dim=0))
        cap_feats, cap_freqs, cap_mask, _, _ = self._prepare_sequence(
            list(cap_feats.split(cap_seqlens, dim=0)), cap_pos_ids, cap_pad_mask, self.cap_pad_token, None, device)

        for layer in self.context_refiner:
            cap_feats = layer(cap_feats, cap_mask, cap_freqs)

        siglip_seqlens = siglip_freqs = None

        unified, unified_freqs, unified_mask, unified_noise_tensor = self._build_unified_sequence(
            x, x_freqs, x_seqlens, x_noise_mask, cap_feats, cap_freqs, cap_seqlens, cap_noise_mask, siglip_feats,
            siglip_freqs, siglip_seqlens, siglip_noise_mask, omni_mode, device)

        for layer_idx, layer in enumerate(self.layers):
            unified = layer(unified, unified_mask, unified_freqs, adaln_input, unified_noise_tensor, t_noisy, t_clean)
            if controlnet_block_samples is not None and layer_idx in controlnet_block_samples:
                unified = unified + controlnet_block_samples[layer_idx]

        unified = self.all_final_layer[f"{patch_size}-{f_patch_size}"](unified, c=adaln_input)

        x = self.unpatchify(list(unified.unbind(dim=0)), x_size, patch_size, f_patch_size, x_pos_offsets)
        return (x,) if not return_dict else (x,)


def build():
    # dim 32 = 2 heads of 16 = RoPE axes (4, 6, 6), one refiner of each kind and two joint blocks, 4 latent channels,
    # semantic features 16 wide; the t-embedder's hidden width is fixed at 1024 in the code.
    return LLaDA2UniImageTransformer2DModel(all_patch_size=(2,), all_f_patch_size=(1,), in_channels=4, dim=32,
                                            n_layers=2, n_refiner_layers=1, n_heads=2, n_kv_heads=2, norm_eps=1e-5,
                                            qk_norm=True, cap_feat_dim=16, rope_theta=256.0, t_scale=1000.0,
                                            axes_dims=[4, 6, 6], axes_lens=[64, 16, 16])


def inputs(g):
    # decode.py: the semantic features of a 1x2 VQ grid upsampled x2 (8 tokens) from SigVQ, one (L, D) per sample;
    # latents (1, C, 1, H, W).
    return {"encoder_hidden_states": torch.randn((1, 8, 16), generator=g),
            "noise": torch.randn((1, 4, 1, 8, 8), generator=g)}


def call(model, x, sigma, c):
    # decode.py _create_decoder_model_fn, cfg_scale 0: t the transport time 1 - sigma, shape (1,), float32.
    t_t = torch.tensor([1.0 - sigma], dtype=torch.float32)
    out = model(x=list(x.unbind(0)), t=t_t, cap_feats=[c["encoder_hidden_states"][0]], patch_size=2,
                f_patch_size=1, return_dict=False)
    return -torch.stack([o.float() for o in out[0]])


PRODUCER = dict(
    library_source="replica of huggingface/diffusers transformer_llada2uni_image.py@1ede365aa4b3 and the parts it "
                   "imports (torch 1.13)",
    timestep="1 - sigma float32, shape (1,) (LLaDA2.0-Uni decode.py: Lumina Linear transport time; the model "
             "scales by t_scale 1000)",
    velocity="negated model output (the transport integrates x += v·dt in t = 1 - sigma); list-of-(C, 1, H, W) "
             "model I/O, stacked",
    note="LLaDA2.0-Uni image decoder (Z-Image S3-DiT variant), basic mode: list inputs patchified per image "
         "(Linear), image tokens and semantic-feature tokens each padded to a multiple of 32 (repeat-last then "
         "overwritten by learned x_pad_token / cap_pad_token via boolean index assignment) with integer 3-axis "
         "position ids (semantic (1+i, 0, 0) over the padded length, image (cap_len+1, row, col), image pads "
         "(0, 0, 0)); complex64 RoPE gathered from per-axis polar tables, applied by complex multiply; a modulated "
         "noise refiner and an unmodulated context refiner (semantic_embedder RMSNorm + Linear), then 2 joint "
         "[image, semantic] blocks with an all-True key mask; sandwich RMSNorms, tanh gates, scale-only modulation "
         "(1 + scale); SiLU-gated FFN; cos-first sinusoid of t*1000 -> 1024-wide MLP; final non-affine LayerNorm "
         "* (1 + scale), Linear, unpatchify of the image rows")

if __name__ == "__main__":
    capture("llada2uni_image", build, inputs, call, sys.argv[1], PRODUCER)
