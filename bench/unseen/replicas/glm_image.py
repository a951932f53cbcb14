"""GLM-Image DiT, reimplemented for torch 1.13 (no diffusers here), captured small in f32 on CPU.

Follows huggingface/diffusers src/diffusers/models/transformers/transformer_glm_image.py at
1226fcbb81ceac0fe9a3295e8c1373eff8576890 (GlmImageTransformer2DModel, GlmImageTransformerBlock,
GlmImageAttnProcessor's __call__ as its Attention's forward (no KV cache), GlmImageCombinedTimestepSizeEmbeddings,
GlmImageImageProjector, GlmImageAdaLayerNormZero, GlmImageRotaryPosEmbed, GlmImageAdaLayerNormContinuous) with the
parts it imports: attention.py (FeedForward with "gelu", "linear-silu" and "gelu-approximate"), activations.py (GELU,
LinearActivation), attention_processor.py (Attention with qk_norm "layer_norm", elementwise_affine False),
embeddings.py (Timesteps, TimestepEmbedding, PixArtAlphaTextProjection with act_fn "silu", apply_rotary_emb with
use_real and use_real_unbind_dim -2): the same module tree, parameter names and shapes, and call boundaries; the
arithmetic line for line. Stand-in for what torch 1.13 lacks: dispatch_attention_fn (SDPA's math on [B, L, H, D],
default scale, no mask). The constructs it shows: the image tokens plus an embedding of the AR model's prior VQ ids
(one id per token, rows zeroed where a drop mask says, through a linear-silu MLP); the glyph caption through a GELU
(erf) MLP; the conditioning SiLU'd once after timestep embedding + an MLP of sinusoids of the crop and target sizes,
then read by linears with no activation before them (12-way modulation interleaving the two streams' chunks, a final
norm without SiLU); joint [text, image] attention with weightless LayerNorm q/k, half-layout RoPE on the image rows
only; one FFN module called on each stream; the timestep σ·1000 − 1.

Pipeline as GlmImagePipeline (pipeline_glm_image.py, its __call__ as the index holds it) calls it with guidance
scale 1 (no unconditional call, so prior_token_drop all False) and no image (no KV cache): latents (B, C, H, W),
timestep t − 1 with t = σ·1000, target_size (H·8, W·8) and crop_coords (0, 0), prior token ids from the AR stage
(random ids here), velocity the output as is.

usage: /usr/bin/python3 bench/unseen/replicas/glm_image.py OUTDIR
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


class PixArtAlphaTextProjection(nn.Module):
    def __init__(self, in_features, hidden_size, out_features=None, act_fn="gelu_tanh"):
        super().__init__()
        if out_features is None:
            out_features = hidden_size
        self.linear_1 = nn.Linear(in_features=in_features, out_features=hidden_size, bias=True)
        assert act_fn == "silu"
        self.act_1 = nn.SiLU()
        self.linear_2 = nn.Linear(in_features=hidden_size, out_features=out_features, bias=True)

    def forward(self, caption):
        hidden_states = self.linear_1(caption)
        hidden_states = self.act_1(hidden_states)
        return self.linear_2(hidden_states)


class GELU(nn.Module):
    def __init__(self, dim_in, dim_out, approximate="none", bias=True):
        super().__init__()
        self.proj = nn.Linear(dim_in, dim_out, bias=bias)
        self.approximate = approximate

    def forward(self, hidden_states):
        return F.gelu(self.proj(hidden_states), approximate=self.approximate)


class LinearActivation(nn.Module):
    def __init__(self, dim_in, dim_out, bias=True, activation="silu"):
        super().__init__()
        self.proj = nn.Linear(dim_in, dim_out, bias=bias)
        assert activation == "silu"
        self.activation = nn.SiLU()

    def forward(self, hidden_states):
        return self.activation(self.proj(hidden_states))


class FeedForward(nn.Module):
    """attention.FeedForward(dim, dim_out, mult 4, dropout 0, activation_fn, final_dropout False, inner_dim, bias)."""

    def __init__(self, dim, dim_out=None, mult=4, dropout=0.0, activation_fn="geglu", final_dropout=False,
                 inner_dim=None, bias=True):
        super().__init__()
        if inner_dim is None:
            inner_dim = int(dim * mult)
        dim_out = dim_out if dim_out is not None else dim
        if activation_fn == "gelu":
            act_fn = GELU(dim, inner_dim, bias=bias)
        elif activation_fn == "gelu-approximate":
            act_fn = GELU(dim, inner_dim, approximate="tanh", bias=bias)
        elif activation_fn == "linear-silu":
            act_fn = LinearActivation(dim, inner_dim, bias=bias, activation="silu")
        else:
            raise ValueError(activation_fn)
        self.net = nn.ModuleList([act_fn, nn.Dropout(dropout), nn.Linear(inner_dim, dim_out, bias=bias)])

    def forward(self, hidden_states):
        for module in self.net:
            hidden_states = module(hidden_states)
        return hidden_states


class GlmImageCombinedTimestepSizeEmbeddings(nn.Module):
    def __init__(self, embedding_dim, condition_dim, pooled_projection_dim, timesteps_dim=256):
        super().__init__()
        self.time_proj = Timesteps(num_channels=timesteps_dim, flip_sin_to_cos=True, downscale_freq_shift=0)
        self.condition_proj = Timesteps(num_channels=condition_dim, flip_sin_to_cos=True, downscale_freq_shift=0)
        self.timestep_embedder = TimestepEmbedding(in_channels=timesteps_dim, time_embed_dim=embedding_dim)
        self.condition_embedder = PixArtAlphaTextProjection(pooled_projection_dim, embedding_dim, act_fn="silu")

    def forward(self, timestep, target_size, crop_coords, hidden_dtype):
        timesteps_proj = self.time_proj(timestep)
        crop_coords_proj = self.condition_proj(crop_coords.flatten()).view(crop_coords.size(0), -1)
        target_size_proj = self.condition_proj(target_size.flatten()).view(target_size.size(0), -1)
        condition_proj = torch.cat([crop_coords_proj, target_size_proj], dim=1)
        timesteps_emb = self.timestep_embedder(timesteps_proj.to(dtype=hidden_dtype))
        condition_emb = self.condition_embedder(condition_proj.to(dtype=hidden_dtype))
        conditioning = timesteps_emb + condition_emb
        conditioning = F.silu(conditioning)
        return conditioning


class GlmImageImageProjector(nn.Module):
    def __init__(self, in_channels=16, hidden_size=2560, patch_size=2):
        super().__init__()
        self.patch_size = patch_size
        self.proj = nn.Linear(in_channels * patch_size ** 2, hidden_size)

    def forward(self, hidden_states):
        batch_size, channel, height, width = hidden_states.shape
        post_patch_height = height // self.patch_size
        post_patch_width = width // self.patch_size
        hidden_states = hidden_states.reshape(batch_size, channel, post_patch_height, self.patch_size,
                                              post_patch_width, self.patch_size)
        hidden_states = hidden_states.permute(0, 2, 4, 1, 3, 5).flatten(3, 5).flatten(1, 2)
        return self.proj(hidden_states)


class GlmImageAdaLayerNormZero(nn.Module):
    def __init__(self, embedding_dim, dim):
        super().__init__()
        self.norm = nn.LayerNorm(dim, elementwise_affine=False, eps=1e-5)
        self.norm_context = nn.LayerNorm(dim, elementwise_affine=False, eps=1e-5)
        self.linear = nn.Linear(embedding_dim, 12 * dim, bias=True)

    def forward(self, hidden_states, encoder_hidden_states, temb):
        dtype = hidden_states.dtype
        norm_hidden_states = self.norm(hidden_states).to(dtype=dtype)
        norm_encoder_hidden_states = self.norm_context(encoder_hidden_states).to(dtype=dtype)
        emb = self.linear(temb)
        (shift_msa, c_shift_msa, scale_msa, c_scale_msa, gate_msa, c_gate_msa, shift_mlp, c_shift_mlp, scale_mlp,
         c_scale_mlp, gate_mlp, c_gate_mlp) = emb.chunk(12, dim=1)
        hidden_states = norm_hidden_states * (1 + scale_msa.unsqueeze(1)) + shift_msa.unsqueeze(1)
        encoder_hidden_states = norm_encoder_hidden_states * (1 + c_scale_msa.unsqueeze(1)) + c_shift_msa.unsqueeze(1)
        return (hidden_states, gate_msa, shift_mlp, scale_mlp, gate_mlp, encoder_hidden_states, c_gate_msa,
                c_shift_mlp, c_scale_mlp, c_gate_mlp)


def apply_rotary_emb(x, freqs_cis, sequence_dim=2, use_real_unbind_dim=-1):
    """embeddings.apply_rotary_emb with use_real (the half layout: use_real_unbind_dim -2)."""
    cos, sin = freqs_cis
    if sequence_dim == 2:
        cos, sin = cos[None, None, :, :], sin[None, None, :, :]
    else:
        cos, sin = cos[None, :, None, :], sin[None, :, None, :]
    assert use_real_unbind_dim == -2
    x_real, x_imag = x.reshape(*x.shape[:-1], 2, -1).unbind(-2)
    x_rotated = torch.cat([-x_imag, x_real], dim=-1)
    return (x.float() * cos + x_rotated.float() * sin).to(x.dtype)


class Attention(nn.Module):
    """attention_processor.Attention(query_dim, heads, dim_head, out_dim, bias, qk_norm "layer_norm",
    elementwise_affine False, eps) with GlmImageAttnProcessor's __call__ as its forward."""

    def __init__(self, query_dim, heads=8, dim_head=64, out_dim=None, bias=False, qk_norm=None,
                 elementwise_affine=True, eps=1e-5, out_bias=True, dropout=0.0):
        super().__init__()
        self.inner_dim = out_dim if out_dim is not None else dim_head * heads
        self.out_dim = out_dim if out_dim is not None else query_dim
        self.heads = out_dim // dim_head if out_dim is not None else heads
        assert qk_norm == "layer_norm"
        self.norm_q = nn.LayerNorm(dim_head, eps=eps, elementwise_affine=elementwise_affine)
        self.norm_k = nn.LayerNorm(dim_head, eps=eps, elementwise_affine=elementwise_affine)
        self.to_q = nn.Linear(query_dim, self.inner_dim, bias=bias)
        self.to_k = nn.Linear(query_dim, self.inner_dim, bias=bias)
        self.to_v = nn.Linear(query_dim, self.inner_dim, bias=bias)
        self.to_out = nn.ModuleList([nn.Linear(self.inner_dim, self.out_dim, bias=out_bias), nn.Dropout(dropout)])

    def forward(self, hidden_states, encoder_hidden_states, attention_mask=None, image_rotary_emb=None,
                kv_cache=None):
        attn = self
        dtype = encoder_hidden_states.dtype
        batch_size, text_seq_length, embed_dim = encoder_hidden_states.shape
        batch_size, image_seq_length, embed_dim = hidden_states.shape
        hidden_states = torch.cat([encoder_hidden_states, hidden_states], dim=1)
        query = attn.to_q(hidden_states)
        key = attn.to_k(hidden_states)
        value = attn.to_v(hidden_states)
        query = query.unflatten(2, (attn.heads, -1))
        key = key.unflatten(2, (attn.heads, -1))
        value = value.unflatten(2, (attn.heads, -1))
        if attn.norm_q is not None:
            query = attn.norm_q(query).to(dtype=dtype)
        if attn.norm_k is not None:
            key = attn.norm_k(key).to(dtype=dtype)
        if image_rotary_emb is not None:
            query[:, text_seq_length:, :, :] = apply_rotary_emb(
                query[:, text_seq_length:, :, :], image_rotary_emb, sequence_dim=1, use_real_unbind_dim=-2)
            key[:, text_seq_length:, :, :] = apply_rotary_emb(
                key[:, text_seq_length:, :, :], image_rotary_emb, sequence_dim=1, use_real_unbind_dim=-2)
        assert kv_cache is None and attention_mask is None
        # dispatch_attention_fn on [B, L, H, D]
        hidden_states = sdpa(query.transpose(1, 2), key.transpose(1, 2), value.transpose(1, 2)).transpose(1, 2)
        hidden_states = hidden_states.flatten(2, 3)
        hidden_states = hidden_states.type_as(query)
        hidden_states = attn.to_out[0](hidden_states)
        hidden_states = attn.to_out[1](hidden_states)
        encoder_hidden_states, hidden_states = hidden_states.split(
            [text_seq_length, hidden_states.size(1) - text_seq_length], dim=1)
        return hidden_states, encoder_hidden_states


class GlmImageTransformerBlock(nn.Module):
    def __init__(self, dim=2560, num_attention_heads=64, attention_head_dim=40, time_embed_dim=512):
        super().__init__()
        self.norm1 = GlmImageAdaLayerNormZero(time_embed_dim, dim)
        self.attn1 = Attention(query_dim=dim, heads=num_attention_heads, dim_head=attention_head_dim, out_dim=dim,
                               bias=True, qk_norm="layer_norm", elementwise_affine=False, eps=1e-5)
        self.norm2 = nn.LayerNorm(dim, elementwise_affine=False, eps=1e-5)
        self.norm2_context = nn.LayerNorm(dim, elementwise_affine=False, eps=1e-5)
        self.ff = FeedForward(dim=dim, dim_out=dim, activation_fn="gelu-approximate")

    def forward(self, hidden_states, encoder_hidden_states, temb=None, image_rotary_emb=None, attention_mask=None,
                attention_kwargs=None, kv_cache=None):
        (norm_hidden_states, gate_msa, shift_mlp, scale_mlp, gate_mlp, norm_encoder_hidden_states, c_gate_msa,
         c_shift_mlp, c_scale_mlp, c_gate_mlp) = self.norm1(hidden_states, encoder_hidden_states, temb)
        attention_kwargs = attention_kwargs or {}
        attn_hidden_states, attn_encoder_hidden_states = self.attn1(
            hidden_states=norm_hidden_states, encoder_hidden_states=norm_encoder_hidden_states,
            image_rotary_emb=image_rotary_emb, attention_mask=attention_mask, kv_cache=kv_cache, **attention_kwargs)
        hidden_states = hidden_states + attn_hidden_states * gate_msa.unsqueeze(1)
        encoder_hidden_states = encoder_hidden_states + attn_encoder_hidden_states * c_gate_msa.unsqueeze(1)
        norm_hidden_states = self.norm2(hidden_states) * (1 + scale_mlp.unsqueeze(1)) + shift_mlp.unsqueeze(1)
        norm_encoder_hidden_states = self.norm2_context(encoder_hidden_states) * (
            1 + c_scale_mlp.unsqueeze(1)) + c_shift_mlp.unsqueeze(1)
        ff_output = self.ff(norm_hidden_states)
        ff_output_context = self.ff(norm_encoder_hidden_states)
        hidden_states = hidden_states + ff_output * gate_mlp.unsqueeze(1)
        encoder_hidden_states = encoder_hidden_states + ff_output_context * c_gate_mlp.unsqueeze(1)
        return hidden_states, encoder_hidden_states


class GlmImageRotaryPosEmbed(nn.Module):
    def __init__(self, dim, patch_size, theta=10000.0):
        super().__init__()
        self.dim = dim
        self.patch_size = patch_size
        self.theta = theta

    def forward(self, hidden_states):
        batch_size, num_channels, height, width = hidden_states.shape
        height, width = height // self.patch_size, width // self.patch_size
        dim_h, dim_w = self.dim // 2, self.dim // 2
        h_inv_freq = 1.0 / (self.theta ** (torch.arange(0, dim_h, 2, dtype=torch.float32)[: (dim_h // 2)].float()
                                           / dim_h))
        w_inv_freq = 1.0 / (self.theta ** (torch.arange(0, dim_w, 2, dtype=torch.float32)[: (dim_w // 2)].float()
                                           / dim_w))
        h_seq = torch.arange(height)
        w_seq = torch.arange(width)
        freqs_h = torch.outer(h_seq, h_inv_freq)
        freqs_w = torch.outer(w_seq, w_inv_freq)
        freqs_h = freqs_h.unsqueeze(1)
        freqs_w = freqs_w.unsqueeze(0)
        freqs_h = freqs_h.expand(height, width, -1)
        freqs_w = freqs_w.expand(height, width, -1)
        freqs = torch.cat([freqs_h, freqs_w], dim=-1)
        freqs = torch.cat([freqs, freqs], dim=-1)
        freqs = freqs.reshape(height * width, -1)
        return (freqs.cos(), freqs.sin())


class GlmImageAdaLayerNormContinuous(nn.Module):
    def __init__(self, embedding_dim, conditioning_embedding_dim, elementwise_affine=True, eps=1e-5, bias=True,
                 norm_type="layer_norm"):
        super().__init__()
        self.linear = nn.Linear(conditioning_embedding_dim, embedding_dim * 2, bias=bias)
        assert norm_type == "layer_norm"
        self.norm = nn.LayerNorm(embedding_dim, eps, elementwise_affine)  # normalization.LayerNorm on torch 2

    def forward(self, x, conditioning_embedding):
        emb = self.linear(conditioning_embedding.to(x.dtype))
        scale, shift = torch.chunk(emb, 2, dim=1)
        return self.norm(x) * (1 + scale)[:, None, :] + shift[:, None, :]


class GlmImageTransformer2DModel(nn.Module):
    def __init__(self, patch_size=2, in_channels=16, out_channels=16, num_layers=30, attention_head_dim=40,
                 num_attention_heads=64, text_embed_dim=1472, time_embed_dim=512, condition_dim=256,
                 prior_vq_quantizer_codebook_size=16384):
        super().__init__()
        self.patch_size = patch_size
        pooled_projection_dim = 2 * 2 * condition_dim
        inner_dim = num_attention_heads * attention_head_dim
        self.rope = GlmImageRotaryPosEmbed(attention_head_dim, patch_size, theta=10000.0)
        self.image_projector = GlmImageImageProjector(in_channels, inner_dim, patch_size)
        self.glyph_projector = FeedForward(text_embed_dim, inner_dim, inner_dim=inner_dim, activation_fn="gelu")
        self.prior_token_embedding = nn.Embedding(prior_vq_quantizer_codebook_size, inner_dim)
        self.prior_projector = FeedForward(inner_dim, inner_dim, inner_dim=inner_dim, activation_fn="linear-silu")
        self.time_condition_embed = GlmImageCombinedTimestepSizeEmbeddings(
            embedding_dim=time_embed_dim, condition_dim=condition_dim, pooled_projection_dim=pooled_projection_dim,
            timesteps_dim=time_embed_dim)
        self.transformer_blocks = nn.ModuleList([
            GlmImageTransformerBlock(inner_dim, num_attention_heads, attention_head_dim, time_embed_dim)
            for _ in range(num_layers)])
        self.norm_out = GlmImageAdaLayerNormContinuous(inner_dim, time_embed_dim, elementwise_affine=False)
        self.proj_out = nn.Linear(inner_dim, patch_size * patch_size * out_channels, bias=True)

    def forward(self, hidden_states, encoder_hidden_states, prior_token_id, prior_token_drop, timestep, target_size,
                crop_coords, attention_kwargs=None, return_dict=True, attention_mask=None, kv_caches=None,
                image_rotary_emb=None):
        batch_size, num_channels, height, width = hidden_states.shape
        if image_rotary_emb is None:
            image_rotary_emb = self.rope(hidden_states)
        p = self.patch_size
        post_patch_height = height // p
        post_patch_width = width // p
        hidden_states = self.image_projector(hidden_states)
        encoder_hidden_states = self.glyph_projector(encoder_hidden_states)
        prior_embedding = self.prior_token_embedding(prior_token_id)
        prior_embedding[prior_token_drop] *= 0.0
        prior_hidden_states = self.prior_projector(prior_embedding)
        hidden_states = hidden_states + prior_hidden_states
        temb = self.time_condition_embed(timestep, target_size, crop_coords, hidden_states.dtype)
        for block in self.transformer_blocks:
            hidden_states, encoder_hidden_states = block(hidden_states, encoder_hidden_states, temb, image_rotary_emb,
                                                         attention_mask, attention_kwargs, kv_cache=None)
        hidden_states = self.norm_out(hidden_states, temb)
        hidden_states = self.proj_out(hidden_states)
        hidden_states = hidden_states.reshape(batch_size, post_patch_height, post_patch_width, -1, p, p)
        output = hidden_states.permute(0, 3, 1, 4, 2, 5).flatten(4, 5).flatten(2, 3)
        return (output,)


def build():
    # Small GLM-Image: 2 heads of 16, one block, 4 latent channels in 2x2 patches, a 16-wide glyph caption, time
    # embedding 32 wide, size conditions of 16 channels each, a codebook of 64 prior ids (16384 upstream).
    return GlmImageTransformer2DModel(patch_size=2, in_channels=4, out_channels=4, num_layers=1, attention_head_dim=16,
                                      num_attention_heads=2, text_embed_dim=16, time_embed_dim=32, condition_dim=16,
                                      prior_vq_quantizer_codebook_size=64)


def inputs(g):
    n = 4
    lat = torch.randn((1, 4, 8, 8), generator=g)
    return {"encoder_hidden_states": torch.randn((1, n, 16), generator=g),
            "prior_token_id": torch.randint(0, 64, (1, 16), generator=g),
            "prior_token_drop": torch.zeros((1, 16), dtype=torch.bool),
            "target_size": torch.tensor([[64.0, 64.0]]), "crop_coords": torch.tensor([[0.0, 0.0]]),
            "noise": lat}


def call(model, x, sigma, c):
    t = torch.tensor([sigma * 1000.0], dtype=torch.float32)
    timestep = t.expand(x.shape[0]) - 1
    return model(hidden_states=x, encoder_hidden_states=c["encoder_hidden_states"],
                 prior_token_id=c["prior_token_id"], prior_token_drop=c["prior_token_drop"], timestep=timestep,
                 target_size=c["target_size"], crop_coords=c["crop_coords"], return_dict=False)[0]


PRODUCER = dict(
    library_source="replica of huggingface/diffusers transformer_glm_image.py@1226fcbb81ce and the parts it "
                   "imports (torch 1.13)",
    timestep="sigma*1000 - 1 float32 (GlmImagePipeline: t.expand(B) - 1)",
    velocity="model output as is (flow velocity), not negated",
    note="GLM-Image, one block: image patches (2x2, channels first) projected plus prior_projector (linear-silu "
         "MLP) of the prior ids' embedding (rows where prior_token_drop zeroed: none here); glyph caption through a "
         "GELU (erf) MLP; conditioning = silu(timestep MLP(sinusoid of t) + silu MLP([sinusoids of crop (0, 0), "
         "target (64, 64)])); 12-chunk modulation (image and text chunks interleaved) read without SiLU, (1 + "
         "scale), x + y·gate; joint [text, image] attention, weightless LayerNorm q/k, half RoPE (2-D, h then w "
         "frequencies, each twice) on the image rows; one gelu-tanh FFN called on each stream; final LayerNorm "
         "[scale, shift] without SiLU; unpatchify (B, h, w, C, p, p)")

if __name__ == "__main__":
    capture("glm_image", build, inputs, call, sys.argv[1], PRODUCER)
