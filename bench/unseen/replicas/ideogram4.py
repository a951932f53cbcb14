"""Ideogram 4 DiT, reimplemented for torch 1.13 (no diffusers here), captured small in f32 on CPU.

Follows huggingface/diffusers src/diffusers/models/transformers/transformer_ideogram4.py at
33c76774cc1ee693738d7efb861b7420f83fe972 (Ideogram4Transformer2DModel, Ideogram4TransformerBlock, Ideogram4Attention
with Ideogram4AttnProcessor's __call__ as its forward, Ideogram4MRoPE, Ideogram4MLP, Ideogram4EmbedScalar,
_sinusoidal_embedding, Ideogram4FinalLayer) with normalization.py's RMSNorm: the same module tree, parameter names and
shapes, and call boundaries; the arithmetic line for line. Stand-in for what torch 1.13 lacks: dispatch_attention_fn
(SDPA's math on [B, L, H, D], default scale, bool mask).

The constructs it shows: one packed sequence [left padding, text, image] whose roles an integer indicator names
(image tokens × (indicator == 2), text features × (indicator == 3), an embedding of (indicator == 2)); interleaved
multi-axis RoPE (frequency i rotated by the t, h or w position as i mod 3 says, within 3·section), image positions
offset by 65536; a block-diagonal mask from segment ids; a scalar embedding of 1e4·t (sinusoid [sin, cos], frequencies
over half − 1) through an MLP; scale-only modulation, tanh gates and sandwich RMSNorms; a final layer whose scale
reads silu(silu(·)).

Pipeline as Ideogram4Pipeline (pipeline_ideogram4.py at 0da154a1e561194afe76a07ea06145262bf992c8) calls it at
guidance 1 (gw = 1: v = pos_v, the unconditional transformer's weight 0, its call left out): pos_z = cat([zeros for
the text rows, latents]), timestep t_model = 1 − t/1000 with t = σ·1000 (model time, 0 = noise), the velocity the
image rows of the output, negated for the scheduler (step(−v)).

usage: /usr/bin/python3 bench/unseen/replicas/ideogram4.py OUTDIR
"""
import math
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

from run import capture, sdpa

SEQUENCE_PADDING_INDICATOR = -1
OUTPUT_IMAGE_INDICATOR = 2
LLM_TOKEN_INDICATOR = 3
IMAGE_POSITION_OFFSET = 65536


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


def _rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class Ideogram4MRoPE(nn.Module):
    def __init__(self, head_dim, base, mrope_section):
        super().__init__()
        inv_freq = 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)
        self.mrope_section = tuple(mrope_section)
        self.head_dim = head_dim

    def forward(self, position_ids):
        batch_size, seq_len, _ = position_ids.shape
        pos = position_ids.permute(2, 0, 1).to(dtype=torch.float32)
        inv_freq = self.inv_freq.to(dtype=torch.float32)[None, None, :, None].expand(3, batch_size, -1, 1)
        freqs = inv_freq @ pos.unsqueeze(2)
        freqs = freqs.transpose(2, 3)
        freqs_t = freqs[0].clone()
        for axis, offset in ((1, 1), (2, 2)):
            length = self.mrope_section[axis] * 3
            idx = torch.arange(offset, length, 3, device=freqs_t.device)
            freqs_t[..., idx] = freqs[axis][..., idx]
        emb = torch.cat((freqs_t, freqs_t), dim=-1)
        return emb.cos(), emb.sin()


class Ideogram4Attention(nn.Module):
    """With Ideogram4AttnProcessor's __call__ as its forward."""

    def __init__(self, hidden_size, num_heads, eps=1e-5):
        super().__init__()
        self.hidden_size = hidden_size
        self.num_heads = num_heads
        self.head_dim = hidden_size // num_heads
        self.use_bias = False
        self.to_q = nn.Linear(hidden_size, hidden_size, bias=False)
        self.to_k = nn.Linear(hidden_size, hidden_size, bias=False)
        self.to_v = nn.Linear(hidden_size, hidden_size, bias=False)
        self.norm_q = RMSNorm(self.head_dim, eps=eps, elementwise_affine=True)
        self.norm_k = RMSNorm(self.head_dim, eps=eps, elementwise_affine=True)
        self.to_out = nn.ModuleList([nn.Linear(hidden_size, hidden_size, bias=False), nn.Dropout(0.0)])

    def forward(self, hidden_states, attention_mask=None, image_rotary_emb=None):
        attn = self
        query = attn.to_q(hidden_states).unflatten(-1, (attn.num_heads, attn.head_dim))
        key = attn.to_k(hidden_states).unflatten(-1, (attn.num_heads, attn.head_dim))
        value = attn.to_v(hidden_states).unflatten(-1, (attn.num_heads, attn.head_dim))
        query = attn.norm_q(query)
        key = attn.norm_k(key)
        cos, sin = image_rotary_emb
        cos = cos.unsqueeze(2)
        sin = sin.unsqueeze(2)
        query = (query * cos) + (_rotate_half(query) * sin)
        key = (key * cos) + (_rotate_half(key) * sin)
        # dispatch_attention_fn on [B, L, H, D]: SDPA's math on [B, H, L, D], default scale, bool mask.
        hidden_states = sdpa(query.transpose(1, 2), key.transpose(1, 2), value.transpose(1, 2),
                             mask=attention_mask).transpose(1, 2)
        hidden_states = hidden_states.flatten(2, 3)
        return attn.to_out[0](hidden_states)


class Ideogram4MLP(nn.Module):
    def __init__(self, dim, hidden_dim):
        super().__init__()
        self.w1 = nn.Linear(dim, hidden_dim, bias=False)
        self.w2 = nn.Linear(hidden_dim, dim, bias=False)
        self.w3 = nn.Linear(dim, hidden_dim, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class Ideogram4TransformerBlock(nn.Module):
    def __init__(self, hidden_size, intermediate_size, num_heads, norm_eps, adaln_dim):
        super().__init__()
        self.attention = Ideogram4Attention(hidden_size, num_heads, eps=1e-5)
        self.feed_forward = Ideogram4MLP(hidden_size, intermediate_size)
        self.attention_norm1 = RMSNorm(hidden_size, eps=norm_eps, elementwise_affine=True)
        self.ffn_norm1 = RMSNorm(hidden_size, eps=norm_eps, elementwise_affine=True)
        self.attention_norm2 = RMSNorm(hidden_size, eps=norm_eps, elementwise_affine=True)
        self.ffn_norm2 = RMSNorm(hidden_size, eps=norm_eps, elementwise_affine=True)
        self.adaln_modulation = nn.Linear(adaln_dim, 4 * hidden_size, bias=True)

    def forward(self, hidden_states, attention_mask, image_rotary_emb, adaln_input):
        mod = self.adaln_modulation(adaln_input)
        scale_msa, gate_msa, scale_mlp, gate_mlp = mod.chunk(4, dim=-1)
        gate_msa = torch.tanh(gate_msa)
        gate_mlp = torch.tanh(gate_mlp)
        scale_msa = 1.0 + scale_msa
        scale_mlp = 1.0 + scale_mlp
        attn_out = self.attention(self.attention_norm1(hidden_states) * scale_msa, attention_mask=attention_mask,
                                  image_rotary_emb=image_rotary_emb)
        hidden_states = hidden_states + gate_msa * self.attention_norm2(attn_out)
        hidden_states = hidden_states + gate_mlp * self.ffn_norm2(
            self.feed_forward(self.ffn_norm1(hidden_states) * scale_mlp))
        return hidden_states


def _sinusoidal_embedding(t, dim, scale=1e4):
    t = t.to(torch.float32)
    half = dim // 2
    freq = math.log(scale) / (half - 1)
    freq = torch.exp(torch.arange(half, dtype=torch.float32, device=t.device) * -freq)
    emb = t.unsqueeze(-1) * freq
    emb = torch.cat([torch.sin(emb), torch.cos(emb)], dim=-1)
    if dim % 2 == 1:
        emb = F.pad(emb, (0, 1))
    return emb


class Ideogram4EmbedScalar(nn.Module):
    def __init__(self, dim, input_range):
        super().__init__()
        self.dim = dim
        self.range_min, self.range_max = input_range
        self.mlp_in = nn.Linear(dim, dim, bias=True)
        self.mlp_out = nn.Linear(dim, dim, bias=True)

    def forward(self, x):
        in_dtype = x.dtype
        x = x.to(torch.float32)
        scaled = 1e4 * (x - self.range_min) / (self.range_max - self.range_min)
        emb = _sinusoidal_embedding(scaled, self.dim)
        emb = emb.to(in_dtype)
        emb = F.silu(self.mlp_in(emb))
        return self.mlp_out(emb)


class Ideogram4FinalLayer(nn.Module):
    def __init__(self, hidden_size, out_channels, adaln_dim):
        super().__init__()
        self.norm_final = nn.LayerNorm(hidden_size, eps=1e-6, elementwise_affine=False)
        self.linear = nn.Linear(hidden_size, out_channels, bias=True)
        self.adaln_modulation = nn.Linear(adaln_dim, hidden_size, bias=True)

    def forward(self, hidden_states, conditioning):
        scale = 1.0 + self.adaln_modulation(F.silu(conditioning))
        return self.linear(self.norm_final(hidden_states) * scale)


class Ideogram4Transformer2DModel(nn.Module):
    def __init__(self, in_channels=128, num_layers=34, attention_head_dim=256, num_attention_heads=18,
                 intermediate_size=12288, adaln_dim=512, llm_features_dim=53248, rope_theta=5_000_000,
                 mrope_section=(24, 20, 20), norm_eps=1e-5):
        super().__init__()
        hidden_size = attention_head_dim * num_attention_heads
        head_dim = attention_head_dim
        self.in_channels = in_channels
        self.out_channels = in_channels
        self.hidden_size = hidden_size
        self.input_proj = nn.Linear(in_channels, hidden_size, bias=True)
        self.llm_cond_norm = RMSNorm(llm_features_dim, eps=1e-6, elementwise_affine=True)
        self.llm_cond_proj = nn.Linear(llm_features_dim, hidden_size, bias=True)
        self.t_embedding = Ideogram4EmbedScalar(hidden_size, input_range=(0.0, 1.0))
        self.adaln_proj = nn.Linear(hidden_size, adaln_dim, bias=True)
        self.embed_image_indicator = nn.Embedding(2, hidden_size)
        self.rotary_emb = Ideogram4MRoPE(head_dim=head_dim, base=rope_theta, mrope_section=mrope_section)
        self.layers = nn.ModuleList([
            Ideogram4TransformerBlock(hidden_size=hidden_size, intermediate_size=intermediate_size,
                                      num_heads=num_attention_heads, norm_eps=norm_eps, adaln_dim=adaln_dim)
            for _ in range(num_layers)])
        self.final_layer = Ideogram4FinalLayer(hidden_size=hidden_size, out_channels=in_channels,
                                               adaln_dim=adaln_dim)

    def forward(self, hidden_states, timestep, encoder_hidden_states, position_ids, segment_ids, indicator,
                return_dict=True):
        batch_size, seq_len, in_channels = hidden_states.shape
        llm_token_mask = (indicator == LLM_TOKEN_INDICATOR).to(hidden_states.dtype).unsqueeze(-1)
        output_image_mask = (indicator == OUTPUT_IMAGE_INDICATOR).to(hidden_states.dtype).unsqueeze(-1)
        encoder_hidden_states = encoder_hidden_states * llm_token_mask
        hidden_states = hidden_states * output_image_mask
        hidden_states = self.input_proj(hidden_states) * output_image_mask
        t_cond = self.t_embedding(timestep)
        if timestep.dim() == 1:
            t_cond = t_cond.unsqueeze(1)
        adaln_input = F.silu(self.adaln_proj(t_cond))
        encoder_hidden_states = self.llm_cond_norm(encoder_hidden_states)
        encoder_hidden_states = self.llm_cond_proj(encoder_hidden_states) * llm_token_mask
        hidden_states = hidden_states + encoder_hidden_states
        image_indicator_embedding = self.embed_image_indicator((indicator == OUTPUT_IMAGE_INDICATOR).to(torch.long))
        hidden_states = hidden_states + image_indicator_embedding
        cos, sin = self.rotary_emb(position_ids)
        cos = cos.to(hidden_states.dtype)
        sin = sin.to(hidden_states.dtype)
        image_rotary_emb = (cos, sin)
        attention_mask = (segment_ids.unsqueeze(2) == segment_ids.unsqueeze(1)).unsqueeze(1)
        for block in self.layers:
            hidden_states = block(hidden_states, attention_mask, image_rotary_emb, adaln_input)
        output = self.final_layer(hidden_states, conditioning=adaln_input)
        return (output,)


def build():
    # 2 heads of 16 (MRoPE sections t/h/w 3/3/2 of 8 frequencies), 2 blocks, adaln 16, text features 24 wide.
    return Ideogram4Transformer2DModel(in_channels=16, num_layers=2, attention_head_dim=16, num_attention_heads=2,
                                       intermediate_size=64, adaln_dim=16, llm_features_dim=24,
                                       rope_theta=5_000_000, mrope_section=(3, 3, 2), norm_eps=1e-5)


MAX_TEXT, TEXT_LEN, GRID_H, GRID_W = 6, 4, 2, 4


def prepare_ids(text_lengths, grid_h, grid_w, max_text_tokens):
    """Ideogram4Pipeline._prepare_ids."""
    batch_size = len(text_lengths)
    num_image_tokens = grid_h * grid_w
    total_seq_len = max_text_tokens + num_image_tokens
    h_idx = torch.arange(grid_h).view(-1, 1).expand(grid_h, grid_w).reshape(-1)
    w_idx = torch.arange(grid_w).view(1, -1).expand(grid_h, grid_w).reshape(-1)
    t_idx = torch.zeros_like(h_idx)
    image_pos = torch.stack([t_idx, h_idx, w_idx], dim=1) + IMAGE_POSITION_OFFSET
    position_ids = torch.zeros(batch_size, total_seq_len, 3, dtype=torch.long)
    segment_ids = torch.full((batch_size, total_seq_len), SEQUENCE_PADDING_INDICATOR, dtype=torch.long)
    indicator = torch.zeros(batch_size, total_seq_len, dtype=torch.long)
    for b, num_text in enumerate(text_lengths):
        offset = max_text_tokens - num_text
        text_pos = torch.arange(num_text)
        position_ids[b, offset: offset + num_text] = torch.stack([text_pos, text_pos, text_pos], dim=1)
        position_ids[b, offset + num_text:] = image_pos
        indicator[b, offset: offset + num_text] = LLM_TOKEN_INDICATOR
        indicator[b, offset + num_text:] = OUTPUT_IMAGE_INDICATOR
        segment_ids[b, offset: offset + num_text + num_image_tokens] = 1
    return position_ids, segment_ids, indicator


def inputs(g):
    # encode_prompt: the tapped layers' features, left-padded and zeroed on the padding, then zeros for the image rows
    text_features = torch.randn((1, MAX_TEXT, 24), generator=g)
    attention_mask = torch.zeros(1, MAX_TEXT)
    attention_mask[:, MAX_TEXT - TEXT_LEN:] = 1
    text_features = text_features * attention_mask.unsqueeze(-1)
    prompt_embeds = torch.cat([text_features, torch.zeros(1, GRID_H * GRID_W, 24)], dim=1)
    position_ids, segment_ids, indicator = prepare_ids([TEXT_LEN], GRID_H, GRID_W, MAX_TEXT)
    return {"encoder_hidden_states": prompt_embeds, "position_ids": position_ids, "segment_ids": segment_ids,
            "indicator": indicator, "text_z_padding": torch.zeros(1, MAX_TEXT, 16),
            "noise": torch.randn((1, GRID_H * GRID_W, 16), generator=g)}


def call(model, x, sigma, c):
    t = torch.tensor(sigma * 1000, dtype=torch.float32)
    t_model = 1.0 - (t.float() / 1000)
    # the pipeline's .to(self.transformer.dtype) on both (f32 in the f32 run)
    dtype = next(model.parameters()).dtype
    t_model = t_model.expand(x.shape[0]).to(dtype)
    pos_z = torch.cat([c["text_z_padding"], x], dim=1).to(dtype)
    pos_out = model(hidden_states=pos_z, timestep=t_model, encoder_hidden_states=c["encoder_hidden_states"],
                    position_ids=c["position_ids"], segment_ids=c["segment_ids"], indicator=c["indicator"],
                    return_dict=False)[0]
    pos_v = pos_out[:, MAX_TEXT:].to(torch.float32)
    return -pos_v  # scheduler.step(-v, ...) with v = pos_v at guidance 1


PRODUCER = dict(
    library_source="replica of huggingface/diffusers transformer_ideogram4.py@33c76774cc1e and the parts it imports "
                   "(torch 1.13)",
    timestep="1 - sigma (model time t_model = 1 - t/1000, t = sigma*1000), in the model's dtype",
    velocity="the image rows of the output, negated (Ideogram4Pipeline: scheduler.step(-v)), guidance 1",
    note="Ideogram 4 single-sequence DiT, 2 blocks: [left pad 2, text 4, image 2x4] packed rows, roles from an "
         "integer indicator (image rows x (ind == 2), text features x (ind == 3), embedding of ind == 2); "
         "interleaved MRoPE (sections 3/3/2, freq i from axis i mod 3), image positions + 65536, theta 5e6; "
         "block-diagonal segment mask; scalar embedding of 1e4*t_model ([sin, cos], freqs over half - 1) + SiLU MLP;"
         " scale-only modulation, tanh gates, sandwich RMSNorms; final scale from silu(silu(adaln))")

if __name__ == "__main__":
    capture("ideogram4", build, inputs, call, sys.argv[1], PRODUCER)
