"""HiDream-O1-Image (a Qwen3-VL language model as a pixel-space DiT), reimplemented for torch 1.13 (no diffusers or
transformers here), captured small in f32 on CPU.

Follows huggingface/diffusers src/diffusers/models/transformers/transformer_hidream_o1.py at
0d03dc7c5b1b6f0663585d920e1f7c8d77f94984 (HiDreamO1Transformer2DModel, HiDreamO1Qwen3VLModel._forward_generation
on its non-flash path, HiDreamO1TimestepEmbedder, HiDreamO1BottleneckPatchEmbed, HiDreamO1FinalLayer) with the
Qwen3-VL text decoder it runs: huggingface/transformers src/transformers/models/qwen3_vl/modeling_qwen3_vl.py at
68a7b7e272a36928120316249af3ee3cac595818 (Qwen3VLTextModel called with inputs_embeds, position ids [3, B, S] and a
4-D additive mask; Qwen3VLTextDecoderLayer, Qwen3VLTextAttention with eager_attention_forward, Qwen3VLTextMLP,
Qwen3VLTextRMSNorm, Qwen3VLTextRotaryEmbedding's interleaved MRoPE), the same module tree, parameter names and
shapes, and call boundaries; the arithmetic line for line. Left out: the vision tower (`model.visual`, not called
by text-to-image) and DeepStack (no image input). Attention is transformers' eager path (softmax in f32).

The constructs it shows: the timestep embedding written into the row whose input id is the timestep token
(torch.where over an id mask), not added; a patch embedding of two Linears with nothing between them (a
bottleneck, proj2(proj1(x))); [text ids' embeddings, patches] joined on rows; a mask made in the model from
token types (causal rows for the prompt, every row visible to the timestep and image rows: triu of finfo.min,
the generated rows zeroed); MRoPE positions with the image's t/h/w grid offset by a fixed 4096; the output
Linear over every row, the pipeline keeping only the image rows (x-prediction).

Pipeline: HiDreamO1ImagePipeline's sample (_build_text_to_image_sample: prompt ids ending in the boi and timestep
tokens, _get_rope_index_fix_point's positions, token types), timestep = 1 − σ, the model's x̂ read at the image rows;
as DiffSynth-Studio's model_fn_hidream_o1_image turns it into a flow velocity for the shared Euler loop,
v = (x − x̂) / σ (the diffusers pipeline feeds x̂ to UniPC instead). The latent is the patch sequence itself.

usage: /usr/bin/python3 bench/unseen/replicas/hidream_o1.py OUTDIR
"""
import math
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

from run import capture

TIMESTEP_TOKEN_NUM = 1
PATCH_SIZE = 4


class Qwen3VLTextConfig:
    hidden_size = 32
    num_attention_heads = 4
    num_key_value_heads = 2
    head_dim = 8
    intermediate_size = 48
    vocab_size = 64
    num_hidden_layers = 2
    rms_norm_eps = 1e-6
    rope_theta = 5e6
    mrope_section = [2, 1, 1]  # head_dim/2 = 4 frequencies: T, H at 1, W at 2


def rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim=1):
    cos = cos.unsqueeze(unsqueeze_dim)
    sin = sin.unsqueeze(unsqueeze_dim)
    return (q * cos) + (rotate_half(q) * sin), (k * cos) + (rotate_half(k) * sin)


def repeat_kv(hidden_states, n_rep):
    batch, num_key_value_heads, slen, head_dim = hidden_states.shape
    if n_rep == 1:
        return hidden_states
    hidden_states = hidden_states[:, :, None, :, :].expand(batch, num_key_value_heads, n_rep, slen, head_dim)
    return hidden_states.reshape(batch, num_key_value_heads * n_rep, slen, head_dim)


def eager_attention_forward(module, query, key, value, attention_mask, scaling):
    key_states = repeat_kv(key, module.num_key_value_groups)
    value_states = repeat_kv(value, module.num_key_value_groups)
    attn_weights = torch.matmul(query, key_states.transpose(2, 3)) * scaling
    if attention_mask is not None:
        attn_weights = attn_weights + attention_mask[:, :, :, : key_states.shape[-2]]
    attn_weights = F.softmax(attn_weights, dim=-1, dtype=torch.float32).to(query.dtype)
    attn_output = torch.matmul(attn_weights, value_states)
    return attn_output.transpose(1, 2).contiguous()


class Qwen3VLTextRMSNorm(nn.Module):
    def __init__(self, hidden_size, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.variance_epsilon = eps

    def forward(self, hidden_states):
        input_dtype = hidden_states.dtype
        hidden_states = hidden_states.to(torch.float32)
        variance = hidden_states.pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
        return self.weight * hidden_states.to(input_dtype)


class Qwen3VLTextRotaryEmbedding(nn.Module):
    def __init__(self, c):
        super().__init__()
        dim = c.head_dim
        inv_freq = 1.0 / (c.rope_theta ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)
        self.mrope_section = c.mrope_section
        self.attention_scaling = 1.0

    def apply_interleaved_mrope(self, freqs, mrope_section):
        freqs_t = freqs[0]
        for dim, offset in enumerate((1, 2), start=1):
            length = mrope_section[dim] * 3
            idx = slice(offset, length, 3)
            freqs_t[..., idx] = freqs[dim, ..., idx]
        return freqs_t

    @torch.no_grad()
    def forward(self, x, position_ids):
        if position_ids.ndim == 2:
            position_ids = position_ids[None, ...].expand(3, position_ids.shape[0], -1)
        inv_freq_expanded = self.inv_freq[None, None, :, None].float().expand(3, position_ids.shape[1], -1, 1)
        position_ids_expanded = position_ids[:, :, None, :].float()
        freqs = (inv_freq_expanded.float() @ position_ids_expanded.float()).transpose(2, 3)
        freqs = self.apply_interleaved_mrope(freqs, self.mrope_section)
        emb = torch.cat((freqs, freqs), dim=-1)
        cos = emb.cos() * self.attention_scaling
        sin = emb.sin() * self.attention_scaling
        return cos.to(dtype=x.dtype), sin.to(dtype=x.dtype)


class Qwen3VLTextAttention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.head_dim = c.head_dim
        self.num_key_value_groups = c.num_attention_heads // c.num_key_value_heads
        self.scaling = self.head_dim ** -0.5
        self.q_proj = nn.Linear(c.hidden_size, c.num_attention_heads * c.head_dim, bias=False)
        self.k_proj = nn.Linear(c.hidden_size, c.num_key_value_heads * c.head_dim, bias=False)
        self.v_proj = nn.Linear(c.hidden_size, c.num_key_value_heads * c.head_dim, bias=False)
        self.o_proj = nn.Linear(c.num_attention_heads * c.head_dim, c.hidden_size, bias=False)
        self.q_norm = Qwen3VLTextRMSNorm(c.head_dim, eps=c.rms_norm_eps)
        self.k_norm = Qwen3VLTextRMSNorm(c.head_dim, eps=c.rms_norm_eps)

    def forward(self, hidden_states, position_embeddings, attention_mask=None):
        input_shape = hidden_states.shape[:-1]
        hidden_shape = (*input_shape, -1, self.head_dim)
        query_states = self.q_norm(self.q_proj(hidden_states).view(hidden_shape)).transpose(1, 2)
        key_states = self.k_norm(self.k_proj(hidden_states).view(hidden_shape)).transpose(1, 2)
        value_states = self.v_proj(hidden_states).view(hidden_shape).transpose(1, 2)
        cos, sin = position_embeddings
        query_states, key_states = apply_rotary_pos_emb(query_states, key_states, cos, sin)
        attn_output = eager_attention_forward(self, query_states, key_states, value_states, attention_mask,
                                              scaling=self.scaling)
        attn_output = attn_output.reshape(*input_shape, -1).contiguous()
        return self.o_proj(attn_output), None


class Qwen3VLTextMLP(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.gate_proj = nn.Linear(c.hidden_size, c.intermediate_size, bias=False)
        self.up_proj = nn.Linear(c.hidden_size, c.intermediate_size, bias=False)
        self.down_proj = nn.Linear(c.intermediate_size, c.hidden_size, bias=False)
        self.act_fn = nn.SiLU()

    def forward(self, x):
        return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))


class Qwen3VLTextDecoderLayer(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.self_attn = Qwen3VLTextAttention(c)
        self.mlp = Qwen3VLTextMLP(c)
        self.input_layernorm = Qwen3VLTextRMSNorm(c.hidden_size, eps=c.rms_norm_eps)
        self.post_attention_layernorm = Qwen3VLTextRMSNorm(c.hidden_size, eps=c.rms_norm_eps)

    def forward(self, hidden_states, attention_mask=None, position_ids=None, position_embeddings=None):
        residual = hidden_states
        hidden_states = self.input_layernorm(hidden_states)
        hidden_states, _ = self.self_attn(hidden_states=hidden_states, attention_mask=attention_mask,
                                          position_embeddings=position_embeddings)
        hidden_states = residual + hidden_states
        residual = hidden_states
        hidden_states = self.post_attention_layernorm(hidden_states)
        hidden_states = self.mlp(hidden_states)
        return residual + hidden_states


class Qwen3VLTextModel(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.embed_tokens = nn.Embedding(c.vocab_size, c.hidden_size)
        self.layers = nn.ModuleList([Qwen3VLTextDecoderLayer(c) for _ in range(c.num_hidden_layers)])
        self.norm = Qwen3VLTextRMSNorm(c.hidden_size, eps=c.rms_norm_eps)
        self.rotary_emb = Qwen3VLTextRotaryEmbedding(c)

    def forward(self, inputs_embeds, position_ids, attention_mask):
        # position ids [3, B, S]: no text row of its own (shape[0] is 3), so the layers get position_ids[0];
        # a 4-D float mask passes create_causal_mask unchanged
        text_position_ids = position_ids[0]
        hidden_states = inputs_embeds
        position_embeddings = self.rotary_emb(hidden_states, position_ids)
        for decoder_layer in self.layers:
            hidden_states = decoder_layer(hidden_states, attention_mask=attention_mask,
                                          position_ids=text_position_ids, position_embeddings=position_embeddings)
        return self.norm(hidden_states)


class HiDreamO1BottleneckPatchEmbed(nn.Module):
    def __init__(self, patch_size=32, in_channels=3, pca_dim=768, embed_dim=768):
        super().__init__()
        self.proj1 = nn.Linear(patch_size * patch_size * in_channels, pca_dim, bias=False)
        self.proj2 = nn.Linear(pca_dim, embed_dim, bias=True)

    def forward(self, hidden_states):
        return self.proj2(self.proj1(hidden_states))


class HiDreamO1FinalLayer(nn.Module):
    def __init__(self, hidden_size, patch_size, out_channels):
        super().__init__()
        self.linear = nn.Linear(hidden_size, patch_size * patch_size * out_channels, bias=True)

    def forward(self, hidden_states):
        return self.linear(hidden_states)


class HiDreamO1TimestepEmbedder(nn.Module):
    def __init__(self, hidden_size, frequency_embedding_size=256):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(frequency_embedding_size, hidden_size, bias=True), nn.SiLU(),
                                 nn.Linear(hidden_size, hidden_size, bias=True))
        self.frequency_embedding_size = frequency_embedding_size

    @staticmethod
    def timestep_embedding(timesteps, dim, max_period=10000):
        half = dim // 2
        freqs = torch.exp(-math.log(max_period) * torch.arange(start=0, end=half, dtype=torch.float32) / half
                          ).to(device=timesteps.device)
        args = timesteps[:, None].float() * freqs[None]
        embedding = torch.cat([torch.cos(args), torch.sin(args)], dim=-1)
        if dim % 2:
            embedding = torch.cat([embedding, torch.zeros_like(embedding[:, :1])], dim=-1)
        return embedding

    def forward(self, timesteps):
        timestep_freq = self.timestep_embedding(timesteps * 1000, self.frequency_embedding_size)
        return self.mlp(timestep_freq.to(dtype=self.mlp[0].weight.dtype))


class HiDreamO1Qwen3VLModel(nn.Module):
    def __init__(self, config, patch_size=32, in_channels=3, tms_token_id=151673):
        super().__init__()
        self.language_model = Qwen3VLTextModel(config)
        hidden_size = config.hidden_size
        bottleneck_dim = hidden_size // 4
        self.patch_size = patch_size
        self.in_channels = in_channels
        self.t_embedder1 = HiDreamO1TimestepEmbedder(hidden_size)
        self.x_embedder = HiDreamO1BottleneckPatchEmbed(patch_size=patch_size, in_channels=in_channels,
                                                        pca_dim=bottleneck_dim, embed_dim=hidden_size)
        self.t_embedder2 = None
        self.final_layer2 = HiDreamO1FinalLayer(hidden_size=hidden_size, patch_size=patch_size,
                                                out_channels=in_channels)
        self.tms_token_id = tms_token_id

    def get_input_embeddings(self):
        return self.language_model.embed_tokens

    def forward(self, input_ids, position_ids, vinputs, timestep, token_types):
        inputs_embeds = self.get_input_embeddings()(input_ids)
        timestep = timestep.to(inputs_embeds.device)
        timestep_embeds = self.t_embedder1(timestep)
        tms_mask = input_ids == self.tms_token_id
        tms_mask = tms_mask.unsqueeze(-1).expand_as(inputs_embeds)
        timestep_embeds = timestep_embeds.unsqueeze(1).expand_as(inputs_embeds)
        inputs_embeds = torch.where(tms_mask, timestep_embeds, inputs_embeds)
        vinputs = vinputs.to(inputs_embeds.device)
        vinputs_embedded = self.x_embedder(vinputs).to(inputs_embeds.dtype)
        inputs_embeds = torch.cat([inputs_embeds, vinputs_embedded], dim=1)
        batch_size, total_seq_len, _ = inputs_embeds.shape
        if token_types.dim() == 1:
            token_types = token_types.unsqueeze(0)
        if token_types.shape[0] == 1 and batch_size > 1:
            token_types = token_types.expand(batch_size, -1)
        dtype = inputs_embeds.dtype
        min_val = torch.finfo(dtype).min
        attention_masks = []
        for batch_idx in range(batch_size):
            causal = torch.full((total_seq_len, total_seq_len), min_val, device=inputs_embeds.device, dtype=dtype)
            causal = torch.triu(causal, diagonal=1)
            gen_positions = token_types[batch_idx].bool()
            causal[gen_positions, :] = 0
            attention_masks.append(causal)
        attention_mask_4d = torch.stack(attention_masks, dim=0).unsqueeze(1)
        hidden_states = self.language_model(inputs_embeds=inputs_embeds, position_ids=position_ids,
                                            attention_mask=attention_mask_4d)
        return self.final_layer2(hidden_states)


class HiDreamO1Transformer2DModel(nn.Module):
    def __init__(self, qwen_config, patch_size=32, in_channels=3, tms_token_id=151673):
        super().__init__()
        self.qwen_config = qwen_config
        self.model = HiDreamO1Qwen3VLModel(qwen_config, patch_size=patch_size, in_channels=in_channels,
                                           tms_token_id=tms_token_id)
        self.lm_head = nn.Linear(qwen_config.hidden_size, qwen_config.vocab_size, bias=False)

    def forward(self, input_ids, position_ids, vinputs, timestep, token_types, return_dict=True):
        x_pred = self.model(input_ids=input_ids, position_ids=position_ids, vinputs=vinputs, timestep=timestep,
                            token_types=token_types)
        return (x_pred,)


TMS_TOKEN_ID = 60
BOI_TOKEN_ID = 59
IMAGE_TOKEN_ID = 58
VISION_START_TOKEN_ID = 57


def build():
    return HiDreamO1Transformer2DModel(Qwen3VLTextConfig(), patch_size=PATCH_SIZE, in_channels=3,
                                       tms_token_id=TMS_TOKEN_ID)


def rope_index_fix_point(text_len, grid_h, grid_w, fix_point=4096):
    """_get_rope_index_fix_point for one image after text_len prompt tokens, skip_vision_start_token=[1]:
    the prompt 0 … text_len−1 on all three axes, the image's (t, h, w) grid + fix_point."""
    text = torch.arange(text_len).view(1, -1).expand(3, -1)
    t_index = torch.arange(1).view(-1, 1).expand(-1, grid_h * grid_w).flatten()
    h_index = torch.arange(grid_h).view(1, -1, 1).expand(1, -1, grid_w).flatten()
    w_index = torch.arange(grid_w).view(1, 1, -1).expand(1, grid_h, -1).flatten()
    image = torch.stack([t_index, h_index, w_index]) + fix_point
    return torch.cat([text, image], dim=1).reshape(3, 1, -1)


def inputs(g):
    height, width = 16, 8
    image_len = (height // PATCH_SIZE) * (width // PATCH_SIZE)
    prompt = torch.randint(0, 50, (1, 5), generator=g)
    input_ids = torch.cat([prompt, torch.tensor([[BOI_TOKEN_ID, TMS_TOKEN_ID]])], dim=1)
    text_seq_len = input_ids.shape[-1]
    position_ids = rope_index_fix_point(text_seq_len, height // PATCH_SIZE, width // PATCH_SIZE)
    all_seq_len = position_ids.shape[-1]
    token_types = torch.zeros((1, all_seq_len), dtype=input_ids.dtype)
    start = text_seq_len - TIMESTEP_TOKEN_NUM
    token_types[0, start: start + image_len + TIMESTEP_TOKEN_NUM] = 1
    token_types[0, text_seq_len - TIMESTEP_TOKEN_NUM: text_seq_len] = 3
    image_noise = 8.0 * torch.randn((1, 3, height, width), generator=g)
    b, c, h, w = image_noise.shape
    patches = image_noise.reshape(b, c, h // PATCH_SIZE, PATCH_SIZE, w // PATCH_SIZE, PATCH_SIZE)
    patches = patches.permute(0, 2, 4, 1, 3, 5).reshape(b, -1, c * PATCH_SIZE * PATCH_SIZE)
    return {"input_ids": input_ids, "position_ids": position_ids, "token_types": (token_types > 0).to(token_types.dtype),
            "vinput_mask": token_types == 1, "noise": patches}


def call(model, x, sigma, c):
    step_t = torch.tensor(sigma * 1000, dtype=torch.float32)
    t_pixeldit = 1.0 - step_t / 1000.0
    out = model(input_ids=c["input_ids"], position_ids=c["position_ids"], vinputs=x.clone(),
                timestep=t_pixeldit.reshape(-1), token_types=c["token_types"], return_dict=False)[0]
    x_pred = out[0, c["vinput_mask"][0]].unsqueeze(0)
    return (x - x_pred) / sigma


PRODUCER = dict(
    library_source="replica of huggingface/diffusers transformer_hidream_o1.py@0d03dc7c5b1b (non-flash path) and "
                   "transformers modeling_qwen3_vl.py@68a7b7e272a3 (Qwen3VLTextModel, eager attention) (torch 1.13)",
    timestep="1 - sigma (float32; the model multiplies by 1000)",
    velocity="(x - x_pred[image rows]) / sigma: the model predicts the clean patches (DiffSynth-Studio's model_fn)",
    note="HiDream-O1: Qwen3-VL text decoder (2 layers, 4 q heads over 2 kv heads of 8, per-head q/k RMSNorm, "
         "interleaved MRoPE sections [2, 1, 1], θ 5e6, SiLU-gated MLP) over [7 prompt ids' embeddings, 8 patch "
         "tokens]; the timestep embedding (σ' = 1 − σ, ×1000, [cos, sin] sinusoid 256 wide, SiLU MLP) written into "
         "the timestep token's row by an id mask; patches (4×4×3) embedded by two Linears with nothing between; "
         "an additive mask from token types (prompt rows causal, timestep and image rows see everything); image "
         "positions (t, h, w) + 4096; output Linear on every row, x̂ kept at the image rows; v = (x − x̂)/σ")

if __name__ == "__main__":
    capture("hidream_o1", build, inputs, call, sys.argv[1], PRODUCER)
