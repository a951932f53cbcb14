"""Bria FIBO-2 (Z-Image blocks, a Perceiver over the text encoder, gated text injection), reimplemented for torch 1.13
(no diffusers here), captured small in f32 on CPU.

Follows huggingface/diffusers src/diffusers/models/transformers/transformer_bria_fibo2.py at
d883e2467e7d78507eec4de454bb6fb05f5d5927 (BriaFibo2Transformer2DModel with create_coordinate_grid and _patchify,
BriaFibo2TransformerBlock, BriaFibo2Attention with BriaFibo2AttnProcessor's __call__ as its forward,
BriaFibo2PerceiverLayer, BriaFibo2PerceiverResampler, compute_gist_count, select_per_token, and the Z-Image copies
TimestepEmbedder, FeedForward, FinalLayer, RopeEmbedder) with the parts it imports: normalization.py (RMSNorm): the
same module tree, parameter names and shapes, and call boundaries; the arithmetic line for line. Stand-ins for what
torch 1.13 lacks: dispatch_attention_fn (SDPA's math on [B, L, H, D], default scale, the bool key mask),
`with torch.device("cpu")` and torch.amp.autocast("cuda", enabled=False) (both dropped: no-ops on a CPU run), and
int32 index tensors (the RoPE gather indexes with ids.long(); the ids stay int32 as create_coordinate_grid makes
them).

The constructs it shows: a Perceiver resampler (learned latent queries cut to a gist count computed from the text
length, cross-attention to the first text-encoder bundle, self-attention, SwiGLU FFN, a final RMSNorm) whose gist
tokens are joined before the image tokens; a modulated noise refiner over the image rows; per-token modulation in
the main blocks: the image rows take the modulation of the real timestep's embedding, the gist rows that of t = 0
(select_per_token: torch.where over a 0/1 noise mask of the joined rows); injection blocks that cross-attend to a
bundle of their own (encoder_hidden_states[:, k]) through an RMSNorm sandwich, gated by tanh of a learned scalar;
Z-Image's sandwich RMSNorms, tanh gates and (1 + scale) modulation; 3-axis integer RoPE ids (gist (1 + i, 0, 0),
image (max_gist + 1, row, col)) gathering complex polar tables; the final layer over the image rows only.

Pipeline as BriaFibo2Pipeline (pipeline_bria_fibo2.py at d883e2467e7d78507eec4de454bb6fb05f5d5927) calls it for
text to image, guidance 1 (the turbo checkpoint's: no negative pass): timestep t / 1000 = σ, the prompt's bundles
unpadded (no mask), no context latents, velocity the output as is (scheduler.step).

usage: /usr/bin/python3 bench/unseen/replicas/bria_fibo2.py OUTDIR
"""
import math
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

from run import capture, sdpa

ADALN_EMBED_DIM = 256


class RMSNorm(nn.Module):
    """diffusers.models.normalization.RMSNorm(dim, eps, elementwise_affine=True)."""

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
        if weight_dtype.is_floating_point:
            t_freq = t_freq.to(weight_dtype)
        return self.mlp(t_freq)


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
        return self.linear(x)


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
        elif self.freqs_cis[0].device != device:
            self.freqs_cis = [freqs_cis.to(device) for freqs_cis in self.freqs_cis]
        result = []
        for i in range(len(self.axes_dims)):
            index = ids[:, i]
            result.append(self.freqs_cis[i][index.long()])  # torch 1.13 indexes with int64 only
        return torch.cat(result, dim=-1)


def compute_gist_count(text_lengths, min_gist, max_gist, gist_step, min_text_len, max_text_len):
    span = max_text_len - min_text_len
    counts = []
    for n in text_lengths:
        ratio = min(1.0, max(0.0, (float(n) - min_text_len) / span))
        raw = min_gist + ratio * (max_gist - min_gist)
        quantized = int(math.ceil(raw / gist_step)) * gist_step
        counts.append(max(min_gist, min(max_gist, quantized)))
    return counts


class BriaFibo2Attention(nn.Module):
    """With BriaFibo2AttnProcessor's __call__ as its forward."""

    def __init__(self, query_dim, heads, dim_head, kv_dim=None, eps=1e-5):
        super().__init__()
        self.heads = heads
        kv_dim = kv_dim or query_dim
        self.to_q = nn.Linear(query_dim, heads * dim_head, bias=False)
        self.to_k = nn.Linear(kv_dim, heads * dim_head, bias=False)
        self.to_v = nn.Linear(kv_dim, heads * dim_head, bias=False)
        self.to_out = nn.ModuleList([nn.Linear(heads * dim_head, query_dim, bias=False)])
        self.norm_q = RMSNorm(dim_head, eps=eps)
        self.norm_k = RMSNorm(dim_head, eps=eps)

    def forward(self, hidden_states, encoder_hidden_states=None, attention_mask=None, freqs_cis=None):
        attn = self
        query = attn.to_q(hidden_states)
        if encoder_hidden_states is None:
            encoder_hidden_states = hidden_states
        key = attn.to_k(encoder_hidden_states)
        value = attn.to_v(encoder_hidden_states)

        query = query.unflatten(-1, (attn.heads, -1))
        key = key.unflatten(-1, (attn.heads, -1))
        value = value.unflatten(-1, (attn.heads, -1))

        query = attn.norm_q(query)
        key = attn.norm_k(key)

        def apply_rotary_emb(x_in, freqs_cis):
            x = torch.view_as_complex(x_in.float().reshape(*x_in.shape[:-1], -1, 2))
            freqs_cis = freqs_cis.unsqueeze(2)
            x_out = torch.view_as_real(x * freqs_cis).flatten(3)
            return x_out.type_as(x_in)

        if freqs_cis is not None:
            query = apply_rotary_emb(query, freqs_cis)
            key = apply_rotary_emb(key, freqs_cis)

        if attention_mask is not None and attention_mask.ndim == 2:
            attention_mask = attention_mask[:, None, None, :]

        # dispatch_attention_fn on [B, L, H, D]: SDPA's math on [B, H, L, D], default scale, the bool key mask.
        hidden_states = sdpa(query.transpose(1, 2), key.transpose(1, 2), value.transpose(1, 2),
                             mask=attention_mask).transpose(1, 2)
        hidden_states = hidden_states.flatten(2, 3)
        return attn.to_out[0](hidden_states)


class BriaFibo2TransformerBlock(nn.Module):
    def __init__(self, dim, n_heads, norm_eps, cross_attention_dim=None):
        super().__init__()
        self.attention = BriaFibo2Attention(dim, n_heads, dim // n_heads, eps=norm_eps)
        self.feed_forward = FeedForward(dim=dim, hidden_dim=(dim * 8 // 3) // 64 * 64)
        self.attention_norm1 = RMSNorm(dim, eps=norm_eps)
        self.ffn_norm1 = RMSNorm(dim, eps=norm_eps)
        self.attention_norm2 = RMSNorm(dim, eps=norm_eps)
        self.ffn_norm2 = RMSNorm(dim, eps=norm_eps)
        self.adaLN_modulation = nn.Sequential(nn.Linear(min(dim, ADALN_EMBED_DIM), 4 * dim, bias=True))
        if cross_attention_dim is not None:
            self.cross_attn_norm1 = RMSNorm(dim, eps=norm_eps)
            self.cross_attention = BriaFibo2Attention(dim, n_heads, dim // n_heads, kv_dim=cross_attention_dim,
                                                      eps=norm_eps)
            self.cross_attn_norm2 = RMSNorm(dim, eps=norm_eps)
            self.cross_attn_gate = nn.Parameter(torch.zeros(1))
        else:
            self.cross_attention = None

    def forward(self, x, attn_mask, freqs_cis, adaln_input=None, noise_mask=None, adaln_noisy=None,
                adaln_clean=None, encoder_hidden_states=None, encoder_attention_mask=None):
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

        attn_out = self.attention(self.attention_norm1(x) * scale_msa, attention_mask=attn_mask, freqs_cis=freqs_cis)
        x = x + gate_msa * self.attention_norm2(attn_out)

        if self.cross_attention is not None:
            cross_out = self.cross_attention(self.cross_attn_norm1(x), encoder_hidden_states=encoder_hidden_states,
                                             attention_mask=encoder_attention_mask)
            x = x + self.cross_attn_gate.tanh() * self.cross_attn_norm2(cross_out)

        x = x + gate_mlp * self.ffn_norm2(self.feed_forward(self.ffn_norm1(x) * scale_mlp))
        return x


class BriaFibo2PerceiverLayer(nn.Module):
    def __init__(self, dim, n_heads, cross_attention_dim, norm_eps):
        super().__init__()
        self.cross_attn_norm = RMSNorm(dim, eps=norm_eps)
        self.cross_attention = BriaFibo2Attention(dim, n_heads, dim // n_heads, kv_dim=cross_attention_dim,
                                                  eps=norm_eps)
        self.self_attn_norm = RMSNorm(dim, eps=norm_eps)
        self.self_attention = BriaFibo2Attention(dim, n_heads, dim // n_heads, eps=norm_eps)
        self.ffn_norm = RMSNorm(dim, eps=norm_eps)
        self.ffn = FeedForward(dim=dim, hidden_dim=(dim * 8 // 3) // 64 * 64)

    def forward(self, latents, encoder_hidden_states, encoder_attention_mask=None, attention_mask=None):
        latents = latents + self.cross_attention(self.cross_attn_norm(latents),
                                                 encoder_hidden_states=encoder_hidden_states,
                                                 attention_mask=encoder_attention_mask)
        latents = latents + self.self_attention(self.self_attn_norm(latents), attention_mask=attention_mask)
        latents = latents + self.ffn(self.ffn_norm(latents))
        return latents


class BriaFibo2PerceiverResampler(nn.Module):
    def __init__(self, dim, n_heads, cross_attention_dim, num_queries, num_layers, norm_eps):
        super().__init__()
        self.latent_queries = nn.Parameter(torch.randn(num_queries, dim) * 0.02)
        self.layers = nn.ModuleList([BriaFibo2PerceiverLayer(dim, n_heads, cross_attention_dim, norm_eps)
                                     for _ in range(num_layers)])
        self.norm_out = RMSNorm(dim, eps=norm_eps)

    def forward(self, encoder_hidden_states, num_gist_tokens, encoder_attention_mask=None, attention_mask=None):
        batch_size = encoder_hidden_states.shape[0]
        latents = self.latent_queries[:num_gist_tokens].unsqueeze(0).expand(batch_size, -1, -1)
        for layer in self.layers:
            latents = layer(latents, encoder_hidden_states, encoder_attention_mask, attention_mask)
        return self.norm_out(latents)


class BriaFibo2Transformer2DModel(nn.Module):
    _skip_layerwise_casting_patterns = ["t_embedder"]

    def __init__(self, in_channels=32, patch_size=2, dim=3584, n_layers=44, n_refiner_layers=2, n_heads=28,
                 norm_eps=1e-5, cap_feat_dim=7680, injection_layer_ids=(6, 14, 22, 30, 38), perceiver_num_layers=2,
                 min_num_gist_tokens=256, max_num_gist_tokens=512, gist_step=64, gist_min_text_len=256,
                 gist_max_text_len=2048, rope_theta=256.0, t_scale=1000.0, axes_dims=(32, 48, 48),
                 axes_lens=(2048, 512, 512)):
        super().__init__()
        self.config = dict(in_channels=in_channels, patch_size=patch_size, injection_layer_ids=injection_layer_ids,
                           min_num_gist_tokens=min_num_gist_tokens, max_num_gist_tokens=max_num_gist_tokens,
                           gist_step=gist_step, gist_min_text_len=gist_min_text_len,
                           gist_max_text_len=gist_max_text_len, t_scale=t_scale)
        self.x_embedder = nn.Linear(patch_size * patch_size * in_channels, dim, bias=True)
        self.t_embedder = TimestepEmbedder(min(dim, ADALN_EMBED_DIM), mid_size=1024)
        self.rope_embedder = RopeEmbedder(theta=rope_theta, axes_dims=axes_dims, axes_lens=axes_lens)
        self.noise_refiner = nn.ModuleList([BriaFibo2TransformerBlock(dim, n_heads, norm_eps)
                                            for _ in range(n_refiner_layers)])
        self.perceiver = BriaFibo2PerceiverResampler(dim, n_heads, cap_feat_dim, max_num_gist_tokens,
                                                     perceiver_num_layers, norm_eps)
        self.layers = nn.ModuleList([
            BriaFibo2TransformerBlock(dim, n_heads, norm_eps,
                                      cross_attention_dim=cap_feat_dim if i in injection_layer_ids else None)
            for i in range(n_layers)])
        self.final_layer = FinalLayer(dim, patch_size * patch_size * in_channels)

    @staticmethod
    def create_coordinate_grid(size, start=None, device=None):
        if start is None:
            start = (0 for _ in size)
        axes = [torch.arange(x0, x0 + span, dtype=torch.int32, device=device) for x0, span in zip(start, size)]
        grids = torch.meshgrid(axes, indexing="ij")
        return torch.stack(grids, dim=-1)

    def _patchify(self, latents):
        batch_size, channels, height, width = latents.shape
        patch_size = self.config["patch_size"]
        latents = latents.view(batch_size, channels, height // patch_size, patch_size, width // patch_size,
                               patch_size)
        return latents.permute(0, 2, 4, 1, 3, 5).reshape(batch_size, (height // patch_size) * (width // patch_size),
                                                           -1)

    def forward(self, hidden_states, timestep, encoder_hidden_states, encoder_attention_mask=None,
                context_latents=None, return_dict=True):
        cfg = self.config
        batch_size, channels, height, width = hidden_states.shape
        patch_size = cfg["patch_size"]
        height_tokens, width_tokens = height // patch_size, width // patch_size
        num_image_tokens = height_tokens * width_tokens
        device = hidden_states.device

        adaln_noisy = self.t_embedder(timestep * cfg["t_scale"])
        adaln_clean = self.t_embedder(torch.zeros_like(timestep))

        image_plane = cfg["max_num_gist_tokens"] + 1
        tokens = [self._patchify(hidden_states)]
        ids = [self.create_coordinate_grid((1, height_tokens, width_tokens), (image_plane, 0, 0), device)]
        for k, latents in enumerate(context_latents or []):
            tokens.append(self._patchify(latents))
            context_size = (1, latents.shape[2] // patch_size, latents.shape[3] // patch_size)
            ids.append(self.create_coordinate_grid(context_size, (image_plane + k + 1, 0, 0), device))
        hidden_states = self.x_embedder(torch.cat(tokens, dim=1))
        image_freqs = self.rope_embedder(torch.cat([grid.flatten(0, 2) for grid in ids])).unsqueeze(0)

        refiner_noise_mask = None
        if context_latents:
            refiner_noise_mask = torch.zeros(batch_size, hidden_states.shape[1], dtype=torch.long, device=device)
            refiner_noise_mask[:, :num_image_tokens] = 1
        for block in self.noise_refiner:
            hidden_states = block(hidden_states, None, image_freqs, adaln_input=adaln_noisy,
                                  noise_mask=refiner_noise_mask, adaln_noisy=adaln_noisy, adaln_clean=adaln_clean)

        if encoder_attention_mask is not None:
            text_lengths = encoder_attention_mask.sum(dim=1).tolist()
        else:
            text_lengths = [encoder_hidden_states.shape[2]] * batch_size
        gist_counts = compute_gist_count(text_lengths, min_gist=cfg["min_num_gist_tokens"],
                                         max_gist=cfg["max_num_gist_tokens"], gist_step=cfg["gist_step"],
                                         min_text_len=cfg["gist_min_text_len"], max_text_len=cfg["gist_max_text_len"])
        num_gist_tokens = max(gist_counts)
        gist_mask = None
        if min(gist_counts) < num_gist_tokens:
            gist_mask = torch.arange(num_gist_tokens, device=device) < torch.tensor(gist_counts, device=device)[:, None]
        gist = self.perceiver(encoder_hidden_states[:, 0], num_gist_tokens, encoder_attention_mask, gist_mask)
        gist_ids = self.create_coordinate_grid((num_gist_tokens, 1, 1), (1, 0, 0), device).flatten(0, 2)

        num_context_tokens = hidden_states.shape[1] - num_image_tokens
        gist_freqs = self.rope_embedder(gist_ids).unsqueeze(0)
        attention_mask = None
        if gist_mask is None:
            image_start = num_gist_tokens
            hidden_states = torch.cat([gist, hidden_states], dim=1)
            freqs_cis = torch.cat([gist_freqs, image_freqs], dim=1)
        else:
            image_start = 0
            hidden_states = torch.cat([hidden_states, gist], dim=1)
            freqs_cis = torch.cat([image_freqs, gist_freqs], dim=1)
            image_mask = torch.ones(batch_size, num_image_tokens + num_context_tokens, dtype=torch.bool, device=device)
            attention_mask = torch.cat([image_mask, gist_mask], dim=1)
        noise_mask = torch.zeros(batch_size, hidden_states.shape[1], dtype=torch.long, device=device)
        noise_mask[:, image_start: image_start + num_image_tokens] = 1

        bundle_index = {layer_id: index + 1 for index, layer_id in enumerate(cfg["injection_layer_ids"])}
        for layer_id, block in enumerate(self.layers):
            text = encoder_hidden_states[:, bundle_index[layer_id]] if layer_id in bundle_index else None
            hidden_states = block(hidden_states, attention_mask, freqs_cis, noise_mask=noise_mask,
                                  adaln_noisy=adaln_noisy, adaln_clean=adaln_clean, encoder_hidden_states=text,
                                  encoder_attention_mask=encoder_attention_mask)

        hidden_states = self.final_layer(hidden_states[:, image_start: image_start + num_image_tokens], c=adaln_noisy)
        hidden_states = hidden_states.view(batch_size, height_tokens, width_tokens, channels, patch_size, patch_size)
        output = hidden_states.permute(0, 3, 1, 4, 2, 5).reshape(batch_size, channels, height, width)
        return (output,)


def build():
    # dim 32 = 2 heads of 16 = RoPE axes (4, 6, 6); one refiner, two main blocks (block 1 an injection block), one
    # Perceiver layer over 4 latent queries; gists 2..4 in steps of 1 over text lengths 2..10 (a 4-row prompt: 3
    # gists); the t-embedder's hidden width (1024) and the FFN width rule ((dim·8 // 3) // 64 · 64 = 64) are upstream's.
    return BriaFibo2Transformer2DModel(in_channels=4, patch_size=2, dim=32, n_layers=2, n_refiner_layers=1, n_heads=2,
                                       norm_eps=1e-5, cap_feat_dim=16, injection_layer_ids=(1,), perceiver_num_layers=1,
                                       min_num_gist_tokens=2, max_num_gist_tokens=4, gist_step=1, gist_min_text_len=2,
                                       gist_max_text_len=10, rope_theta=256.0, t_scale=1000.0, axes_dims=(4, 6, 6),
                                       axes_lens=(16, 8, 8))


def inputs(g):
    # the text encoder's bundles: [Perceiver's, injection block 1's], 4 rows of 16 each
    return {"encoder_hidden_states": torch.randn((1, 2, 4, 16), generator=g),
            "noise": torch.randn((1, 4, 8, 8), generator=g)}


def call(model, x, sigma, c):
    timestep = torch.tensor(sigma * 1000, dtype=torch.float32).expand(x.shape[0]) / 1000
    return model(hidden_states=x, timestep=timestep, encoder_hidden_states=c["encoder_hidden_states"],
                 return_dict=False)[0]


PRODUCER = dict(
    library_source="replica of huggingface/diffusers transformer_bria_fibo2.py@d883e2467e7d and the parts it imports "
                   "(torch 1.13)",
    timestep="sigma (BriaFibo2Pipeline: t / 1000; the model scales by t_scale 1000, its clean rows embed t = 0)",
    velocity="model output as is (scheduler.step)",
    note="Bria FIBO-2: Z-Image blocks (sandwich RMSNorms, tanh gates, 1 + scale, SwiGLU, complex RoPE from 3-axis "
         "integer ids), a modulated noise refiner on the image rows; a Perceiver (4 learned queries cut to 3 gists "
         "by the text length; cross-attention to bundle 0, self-attention, SwiGLU, RMSNorm) whose gists are joined "
         "before the image rows; per-token modulation in the main blocks (image rows t, gist rows t = 0, "
         "torch.where over a noise mask); injection block 1 cross-attends bundle 1 through an RMSNorm sandwich, "
         "gated by tanh of a learned scalar; final layer over the image rows")

if __name__ == "__main__":
    capture("bria_fibo2", build, inputs, call, sys.argv[1], PRODUCER)
