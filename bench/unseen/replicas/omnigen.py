"""OmniGen (v1) transformer, reimplemented for torch 1.13 (no diffusers here), captured small in f32 on CPU.

Follows huggingface/diffusers src/diffusers/models/transformers/transformer_omnigen.py at
071190daca865a4d04deac0e02cda5b8c5d6f6fa (OmniGenTransformer2DModel, OmniGenBlock, OmniGenFeedForward,
OmniGenPatchEmbed, OmniGenSuScaledRotaryEmbedding, OmniGenAttnProcessor2_0) with the parts it imports:
attention_processor.py (Attention with kv_heads, bias=False, out_dim, out_bias=False; OmniGenAttnProcessor2_0's
__call__ as its forward), embeddings.py (Timesteps, TimestepEmbedding act "silu", get_2d_sincos_pos_embed
output_type "pt", apply_rotary_emb use_real=True with use_real_unbind_dim=-2) and normalization.py (AdaLayerNorm
with chunk_dim=1, RMSNorm): the same module tree, parameter names and shapes, and call boundaries (the
text-to-image path calls patch_embedding a second time with the empty list of input-image latents, as upstream
does; input_image_proj is never called); the arithmetic line for line. Stand-in for what torch 1.13 lacks:
F.scaled_dot_product_attention (its math, default scale, the additive float mask).

The constructs it shows: a Phi-3-style decoder over one sequence [text tokens (embed_tokens), a time token
(time_token MLP of the sinusoidal timestep), the image patches (conv patch embed + a 2-D sin-cos table over an
8×8 max grid, centre 4×4 cropped)]; a 3-D float mask from the processor turned additive as (1 − m)·finfo.min
(causal over the text and the time token, the image rows attending to everything, left padding masked); Phi-3
"su" scaled RoPE computed in the forward: inv_freq = 1/(short_factor · 10000^(2i/d)) (short, as max position + 1
≤ 4096), cos and sin of position · inv_freq from the FIRST batch row's position ids only (emb[0]), both
multiplied by sqrt(1 + ln(131072/4096)/ln 4096) ≈ 1.19024; applied half-split (unbind dim −2: [−x₂, x₁]) to q
and k; no q/k norm; fused gate_up SwiGLU (chunk: gate first); pre-RMSNorm residual blocks; a final RMSNorm,
then only the image rows, AdaLayerNorm (shift, scale from t_embedder's embedding, chunk_dim 1) and proj_out,
unpatchified.

Pipeline as OmniGenPipeline (pipelines/omnigen/pipeline_omnigen.py at 02d90b20f713, processor_omnigen.py at
071190daca86) calls it for text-to-image: always with classifier-free guidance, the batch [prompt, negative
prompt] (latents repeated twice), the processor's collator left-padding the shorter ids with 2 and building
position_ids (0 for padding, then 0..) and the 3-D mask; timestep = t.expand(2) where the scheduler
(FlowMatchEulerDiscreteScheduler(invert_sigmas=True, num_train_timesteps=1), as the conversion script builds
it) gives t = 1 − σ (float32); noise_pred = uncond + 2.5·(cond − uncond) (guidance_scale's default), stepped by
the inverted sigmas, so the velocity in σ is −noise_pred.

usage: /usr/bin/python3 bench/unseen/replicas/omnigen.py OUTDIR
"""
import math
import sys

import torch
import torch.nn as nn

from dit import get_2d_sincos_pos_embed
from hunyuanimage21 import RMSNorm
from parts import TimestepEmbedding, Timesteps
from run import capture, sdpa


def apply_rotary_emb(x, freqs_cis, use_real=True, use_real_unbind_dim=-1, sequence_dim=2):
    """embeddings.apply_rotary_emb, its use_real branch (x [B, H, S, D], cos/sin [S, D])."""
    assert use_real and sequence_dim == 2
    cos, sin = freqs_cis
    cos = cos[None, None, :, :]
    sin = sin[None, None, :, :]
    cos, sin = cos.to(x.device), sin.to(x.device)
    if use_real_unbind_dim == -1:
        x_real, x_imag = x.reshape(*x.shape[:-1], -1, 2).unbind(-1)
        x_rotated = torch.stack([-x_imag, x_real], dim=-1).flatten(3)
    elif use_real_unbind_dim == -2:
        x_real, x_imag = x.reshape(*x.shape[:-1], 2, -1).unbind(-2)
        x_rotated = torch.cat([-x_imag, x_real], dim=-1)
    else:
        raise ValueError(f"`use_real_unbind_dim={use_real_unbind_dim}` but should be -1 or -2.")
    return (x.float() * cos + x_rotated.float() * sin).to(x.dtype)


class AdaLayerNorm(nn.Module):
    """normalization.AdaLayerNorm(embedding_dim, norm_elementwise_affine=False, norm_eps, chunk_dim=1)."""

    def __init__(self, embedding_dim, num_embeddings=None, output_dim=None, norm_elementwise_affine=False,
                 norm_eps=1e-5, chunk_dim=0):
        super().__init__()
        assert num_embeddings is None
        self.chunk_dim = chunk_dim
        output_dim = output_dim or embedding_dim * 2
        self.emb = None
        self.silu = nn.SiLU()
        self.linear = nn.Linear(embedding_dim, output_dim)
        self.norm = nn.LayerNorm(output_dim // 2, norm_eps, norm_elementwise_affine)

    def forward(self, x, timestep=None, temb=None):
        temb = self.linear(self.silu(temb))
        if self.chunk_dim == 2:
            scale, shift = temb.chunk(2, dim=2)
        elif self.chunk_dim == 1:
            shift, scale = temb.chunk(2, dim=1)
            shift = shift[:, None, :]
            scale = scale[:, None, :]
        else:
            scale, shift = temb.chunk(2, dim=0)
        return self.norm(x) * (1 + scale) + shift


class OmniGenFeedForward(nn.Module):
    def __init__(self, hidden_size, intermediate_size):
        super().__init__()
        self.gate_up_proj = nn.Linear(hidden_size, 2 * intermediate_size, bias=False)
        self.down_proj = nn.Linear(intermediate_size, hidden_size, bias=False)
        self.activation_fn = nn.SiLU()

    def forward(self, hidden_states):
        up_states = self.gate_up_proj(hidden_states)
        gate, up_states = up_states.chunk(2, dim=-1)
        up_states = up_states * self.activation_fn(gate)
        return self.down_proj(up_states)


class OmniGenPatchEmbed(nn.Module):
    def __init__(self, patch_size=2, in_channels=4, embed_dim=768, bias=True, interpolation_scale=1,
                 pos_embed_max_size=192, base_size=64):
        super().__init__()
        self.output_image_proj = nn.Conv2d(in_channels, embed_dim, kernel_size=(patch_size, patch_size),
                                           stride=patch_size, bias=bias)
        self.input_image_proj = nn.Conv2d(in_channels, embed_dim, kernel_size=(patch_size, patch_size),
                                          stride=patch_size, bias=bias)
        self.patch_size = patch_size
        self.interpolation_scale = interpolation_scale
        self.pos_embed_max_size = pos_embed_max_size
        pos_embed = get_2d_sincos_pos_embed(embed_dim, self.pos_embed_max_size, base_size=base_size,
                                            interpolation_scale=self.interpolation_scale, output_type="pt")
        self.register_buffer("pos_embed", pos_embed.float().unsqueeze(0), persistent=True)

    def _cropped_pos_embed(self, height, width):
        height = height // self.patch_size
        width = width // self.patch_size
        if height > self.pos_embed_max_size or width > self.pos_embed_max_size:
            raise ValueError("larger than pos_embed_max_size")
        top = (self.pos_embed_max_size - height) // 2
        left = (self.pos_embed_max_size - width) // 2
        spatial_pos_embed = self.pos_embed.reshape(1, self.pos_embed_max_size, self.pos_embed_max_size, -1)
        spatial_pos_embed = spatial_pos_embed[:, top: top + height, left: left + width, :]
        return spatial_pos_embed.reshape(1, -1, spatial_pos_embed.shape[-1])

    def _patch_embeddings(self, hidden_states, is_input_image):
        if is_input_image:
            hidden_states = self.input_image_proj(hidden_states)
        else:
            hidden_states = self.output_image_proj(hidden_states)
        return hidden_states.flatten(2).transpose(1, 2)

    def forward(self, hidden_states, is_input_image, padding_latent=None):
        if isinstance(hidden_states, list):
            if padding_latent is None:
                padding_latent = [None] * len(hidden_states)
            patched_latents = []
            for sub_latent, padding in zip(hidden_states, padding_latent):
                height, width = sub_latent.shape[-2:]
                sub_latent = self._patch_embeddings(sub_latent, is_input_image)
                pos_embed = self._cropped_pos_embed(height, width)
                sub_latent = sub_latent + pos_embed
                if padding is not None:
                    sub_latent = torch.cat([sub_latent, padding.to(sub_latent.device)], dim=-2)
                patched_latents.append(sub_latent)
        else:
            height, width = hidden_states.shape[-2:]
            pos_embed = self._cropped_pos_embed(height, width)
            hidden_states = self._patch_embeddings(hidden_states, is_input_image)
            patched_latents = hidden_states + pos_embed
        return patched_latents


class OmniGenSuScaledRotaryEmbedding(nn.Module):
    def __init__(self, dim, max_position_embeddings=131072, original_max_position_embeddings=4096, base=10000,
                 rope_scaling=None):
        super().__init__()
        self.dim = dim
        self.max_position_embeddings = max_position_embeddings
        self.base = base
        inv_freq = 1.0 / (self.base ** (torch.arange(0, self.dim, 2, dtype=torch.int64).float() / self.dim))
        self.register_buffer("inv_freq", tensor=inv_freq, persistent=False)
        self.short_factor = rope_scaling["short_factor"]
        self.long_factor = rope_scaling["long_factor"]
        self.original_max_position_embeddings = original_max_position_embeddings

    def forward(self, hidden_states, position_ids):
        seq_len = torch.max(position_ids) + 1
        if seq_len > self.original_max_position_embeddings:
            ext_factors = torch.tensor(self.long_factor, dtype=torch.float32, device=hidden_states.device)
        else:
            ext_factors = torch.tensor(self.short_factor, dtype=torch.float32, device=hidden_states.device)
        inv_freq_shape = torch.arange(0, self.dim, 2, dtype=torch.int64, device=hidden_states.device).float() / self.dim
        self.inv_freq = 1.0 / (ext_factors * self.base ** inv_freq_shape)
        inv_freq_expanded = self.inv_freq[None, :, None].float().expand(position_ids.shape[0], -1, 1)
        position_ids_expanded = position_ids[:, None, :].float()
        device_type = hidden_states.device.type
        device_type = device_type if isinstance(device_type, str) and device_type != "mps" else "cpu"
        with torch.autocast(device_type=device_type, enabled=False):
            freqs = (inv_freq_expanded.float() @ position_ids_expanded.float()).transpose(1, 2)
            emb = torch.cat((freqs, freqs), dim=-1)[0]
            scale = self.max_position_embeddings / self.original_max_position_embeddings
            if scale <= 1.0:
                scaling_factor = 1.0
            else:
                scaling_factor = math.sqrt(1 + math.log(scale) / math.log(self.original_max_position_embeddings))
            cos = emb.cos() * scaling_factor
            sin = emb.sin() * scaling_factor
        return cos, sin


class Attention(nn.Module):
    """attention_processor.Attention as OmniGenBlock builds it (cross_attention_dim = query_dim, kv_heads,
    bias=False, out_dim, out_bias=False), OmniGenAttnProcessor2_0's __call__ as its forward."""

    def __init__(self, query_dim, cross_attention_dim, dim_head, heads, kv_heads, bias, out_dim, out_bias):
        super().__init__()
        self.inner_dim = out_dim if out_dim is not None else dim_head * heads
        self.inner_kv_dim = self.inner_dim if kv_heads is None else dim_head * kv_heads
        self.out_dim = out_dim if out_dim is not None else query_dim
        self.heads = out_dim // dim_head if out_dim is not None else heads
        self.scale = dim_head ** -0.5
        self.norm_q = None
        self.norm_k = None
        self.to_q = nn.Linear(query_dim, self.inner_dim, bias=bias)
        self.to_k = nn.Linear(cross_attention_dim, self.inner_kv_dim, bias=bias)
        self.to_v = nn.Linear(cross_attention_dim, self.inner_kv_dim, bias=bias)
        self.to_out = nn.ModuleList([nn.Linear(self.inner_dim, self.out_dim, bias=out_bias), nn.Dropout(0.0)])

    def forward(self, hidden_states, encoder_hidden_states=None, attention_mask=None, image_rotary_emb=None):
        attn = self
        batch_size, sequence_length, _ = hidden_states.shape
        query = attn.to_q(hidden_states)
        key = attn.to_k(encoder_hidden_states)
        value = attn.to_v(encoder_hidden_states)
        bsz, q_len, query_dim = query.size()
        inner_dim = key.shape[-1]
        head_dim = query_dim // attn.heads
        kv_heads = inner_dim // head_dim
        query = query.view(batch_size, -1, attn.heads, head_dim).transpose(1, 2)
        key = key.view(batch_size, -1, kv_heads, head_dim).transpose(1, 2)
        value = value.view(batch_size, -1, kv_heads, head_dim).transpose(1, 2)
        if image_rotary_emb is not None:
            query = apply_rotary_emb(query, image_rotary_emb, use_real_unbind_dim=-2)
            key = apply_rotary_emb(key, image_rotary_emb, use_real_unbind_dim=-2)
        hidden_states = sdpa(query, key, value, mask=attention_mask)
        hidden_states = hidden_states.transpose(1, 2).type_as(query)
        hidden_states = hidden_states.reshape(bsz, q_len, attn.out_dim)
        return attn.to_out[0](hidden_states)


class OmniGenBlock(nn.Module):
    def __init__(self, hidden_size, num_attention_heads, num_key_value_heads, intermediate_size, rms_norm_eps):
        super().__init__()
        self.input_layernorm = RMSNorm(hidden_size, eps=rms_norm_eps)
        self.self_attn = Attention(query_dim=hidden_size, cross_attention_dim=hidden_size,
                                   dim_head=hidden_size // num_attention_heads, heads=num_attention_heads,
                                   kv_heads=num_key_value_heads, bias=False, out_dim=hidden_size, out_bias=False)
        self.post_attention_layernorm = RMSNorm(hidden_size, eps=rms_norm_eps)
        self.mlp = OmniGenFeedForward(hidden_size, intermediate_size)

    def forward(self, hidden_states, attention_mask, image_rotary_emb):
        norm_hidden_states = self.input_layernorm(hidden_states)
        attn_output = self.self_attn(hidden_states=norm_hidden_states, encoder_hidden_states=norm_hidden_states,
                                     attention_mask=attention_mask, image_rotary_emb=image_rotary_emb)
        hidden_states = hidden_states + attn_output
        norm_hidden_states = self.post_attention_layernorm(hidden_states)
        ff_output = self.mlp(norm_hidden_states)
        return hidden_states + ff_output


class OmniGenTransformer2DModel(nn.Module):
    def __init__(self, in_channels=4, patch_size=2, hidden_size=3072, rms_norm_eps=1e-5, num_attention_heads=32,
                 num_key_value_heads=32, intermediate_size=8192, num_layers=32, pad_token_id=32000, vocab_size=32064,
                 max_position_embeddings=131072, original_max_position_embeddings=4096, rope_base=10000,
                 rope_scaling=None, pos_embed_max_size=192, time_step_dim=256, flip_sin_to_cos=True,
                 downscale_freq_shift=0, timestep_activation_fn="silu"):
        super().__init__()
        assert timestep_activation_fn == "silu"
        self.in_channels = in_channels
        self.out_channels = in_channels
        self.patch_size = patch_size
        self.patch_embedding = OmniGenPatchEmbed(patch_size=patch_size, in_channels=in_channels,
                                                 embed_dim=hidden_size, pos_embed_max_size=pos_embed_max_size)
        self.time_proj = Timesteps(time_step_dim, flip_sin_to_cos, downscale_freq_shift)
        self.time_token = TimestepEmbedding(time_step_dim, hidden_size)
        self.t_embedder = TimestepEmbedding(time_step_dim, hidden_size)
        self.embed_tokens = nn.Embedding(vocab_size, hidden_size, pad_token_id)
        self.rope = OmniGenSuScaledRotaryEmbedding(hidden_size // num_attention_heads,
                                                   max_position_embeddings=max_position_embeddings,
                                                   original_max_position_embeddings=original_max_position_embeddings,
                                                   base=rope_base, rope_scaling=rope_scaling)
        self.layers = nn.ModuleList([
            OmniGenBlock(hidden_size, num_attention_heads, num_key_value_heads, intermediate_size, rms_norm_eps)
            for _ in range(num_layers)])
        self.norm = RMSNorm(hidden_size, eps=rms_norm_eps)
        self.norm_out = AdaLayerNorm(hidden_size, norm_elementwise_affine=False, norm_eps=1e-6, chunk_dim=1)
        self.proj_out = nn.Linear(hidden_size, patch_size * patch_size * self.out_channels, bias=True)

    @property
    def dtype(self):  # ModelMixin.dtype
        return next(self.parameters()).dtype

    def _get_multimodal_embeddings(self, input_ids, input_img_latents, input_image_sizes):
        if input_ids is None:
            return None
        input_img_latents = [x.to(self.dtype) for x in input_img_latents]
        condition_tokens = self.embed_tokens(input_ids)
        input_img_inx = 0
        input_image_tokens = self.patch_embedding(input_img_latents, is_input_image=True)
        for b_inx in input_image_sizes.keys():
            for start_inx, end_inx in input_image_sizes[b_inx]:
                condition_tokens[b_inx, start_inx:end_inx] = input_image_tokens[input_img_inx].to(
                    condition_tokens.dtype)
                input_img_inx += 1
        return condition_tokens

    def forward(self, hidden_states, timestep, input_ids, input_img_latents, input_image_sizes, attention_mask,
                position_ids, return_dict=True):
        batch_size, num_channels, height, width = hidden_states.shape
        p = self.patch_size
        post_patch_height, post_patch_width = height // p, width // p

        hidden_states = self.patch_embedding(hidden_states, is_input_image=False)
        num_tokens_for_output_image = hidden_states.size(1)

        timestep_proj = self.time_proj(timestep).type_as(hidden_states)
        time_token = self.time_token(timestep_proj).unsqueeze(1)
        temb = self.t_embedder(timestep_proj)

        condition_tokens = self._get_multimodal_embeddings(input_ids, input_img_latents, input_image_sizes)
        if condition_tokens is not None:
            hidden_states = torch.cat([condition_tokens, time_token, hidden_states], dim=1)
        else:
            hidden_states = torch.cat([time_token, hidden_states], dim=1)

        seq_length = hidden_states.size(1)
        position_ids = position_ids.view(-1, seq_length).long()

        if attention_mask is not None and attention_mask.dim() == 3:
            dtype = hidden_states.dtype
            min_dtype = torch.finfo(dtype).min
            attention_mask = (1 - attention_mask) * min_dtype
            attention_mask = attention_mask.unsqueeze(1).type_as(hidden_states)

        image_rotary_emb = self.rope(hidden_states, position_ids)

        for block in self.layers:
            hidden_states = block(hidden_states, attention_mask=attention_mask, image_rotary_emb=image_rotary_emb)

        hidden_states = self.norm(hidden_states)
        hidden_states = hidden_states[:, -num_tokens_for_output_image:]
        hidden_states = self.norm_out(hidden_states, temb=temb)
        hidden_states = self.proj_out(hidden_states)
        hidden_states = hidden_states.reshape(batch_size, post_patch_height, post_patch_width, p, p, -1)
        output = hidden_states.permute(0, 5, 1, 3, 2, 4).flatten(4, 5).flatten(2, 3)
        return (output,)


# Phi-3's "su" factors (the conversion script's lists), every sixth entry for head_dim 16's 8 frequencies.
SHORT_FACTOR = [1.05, 1.2500000000000002, 1.9000000000000008, 2.000000000000001, 2.000000000000001,
                2.000000000000001, 2.1000000000000005, 2.3999999999999995]
LONG_FACTOR = [1.0299999713897705, 1.2999999523162842, 3.68999981880188, 15.65999984741211, 30.009998321533203,
               56.20000457763672, 61.96000671386719, 63.850006103515625]


def build():
    # OmniGen-v1's layout, small: hidden 32, 2 heads of 16 (no GQA, as Phi-3-mini), SwiGLU 64, 2 layers, vocab 64
    # (padding_idx 60), RoPE scaling as converted (131072 / 4096), a 8x8 sin-cos table (base_size 64) cropped to the
    # 4x4 patch grid, time_step_dim 256, 4 latent channels, patch 2.
    return OmniGenTransformer2DModel(in_channels=4, patch_size=2, hidden_size=32, rms_norm_eps=1e-5,
                                     num_attention_heads=2, num_key_value_heads=2, intermediate_size=64, num_layers=2,
                                     pad_token_id=60, vocab_size=64, max_position_embeddings=131072,
                                     original_max_position_embeddings=4096, rope_base=10000,
                                     rope_scaling={"short_factor": SHORT_FACTOR, "long_factor": LONG_FACTOR,
                                                   "type": "su"},
                                     pos_embed_max_size=8, time_step_dim=256)


def collate(ids_list, img_tokens, pad_token_id=2):
    """OmniGenCollator.pad_input_ids, create_position and create_mask (no input images)."""
    max_l = max(len(x) for x in ids_list)
    padded, amask = [], []
    for ids in ids_list:
        pad_l = max_l - len(ids)
        padded.append([pad_token_id] * pad_l + ids)
        amask.append([0] * pad_l + [1] * len(ids))
    attention_mask = torch.LongTensor(amask)
    position_ids = []
    for mask in attention_mask:
        temp_l = int(torch.sum(mask))
        position_ids.append([0] * (max_l - temp_l) + list(range(temp_l + img_tokens + 1)))
    seq_len = max_l + img_tokens + 1
    extended = []
    for mask in attention_mask:
        temp_l = torch.sum(mask)
        pad_l = max_l - temp_l
        temp_mask = torch.tril(torch.ones(size=(temp_l + 1, temp_l + 1)))
        temp_mask = torch.cat([temp_mask, torch.zeros(size=(temp_l + 1, img_tokens))], dim=-1)
        temp_mask = torch.cat([temp_mask, torch.ones(size=(img_tokens, temp_l + img_tokens + 1))], dim=0)
        if pad_l > 0:
            temp_mask = torch.cat([torch.zeros(size=(temp_l + 1 + img_tokens, pad_l)), temp_mask], dim=-1)
            temp_mask = torch.cat([torch.ones(size=(pad_l, seq_len)), temp_mask], dim=0)
        extended.append(temp_mask.unsqueeze(0))
    return torch.LongTensor(padded), torch.cat(extended, dim=0), torch.LongTensor(position_ids)


def inputs(g):
    # prompt 5 token ids, negative prompt 7 (the default negative prompt is the longer one): the prompt row is
    # left-padded by 2; 64x64 pixels -> 16 output-image tokens; sequence 7 + 1 + 16 = 24.
    prompt = torch.randint(3, 60, (5,), generator=g).tolist()
    negative = torch.randint(3, 60, (7,), generator=g).tolist()
    input_ids, attention_mask, position_ids = collate([prompt, negative], 64 * 64 // 16 // 16)
    return {"input_ids": input_ids, "attention_mask": attention_mask, "position_ids": position_ids,
            "noise": torch.randn((1, 4, 8, 8), generator=g)}


GUIDANCE_SCALE = 2.5


def call(model, x, sigma, c):
    latent_model_input = torch.cat([x] * 2)
    t = 1.0 - torch.tensor([sigma], dtype=torch.float32)  # the inverted scheduler's timestep (num_train_timesteps 1)
    timestep = t.expand(latent_model_input.shape[0])
    noise_pred = model(hidden_states=latent_model_input, timestep=timestep, input_ids=c["input_ids"],
                       input_img_latents=[], input_image_sizes={}, attention_mask=c["attention_mask"],
                       position_ids=c["position_ids"], return_dict=False)[0]
    cond, uncond = torch.split(noise_pred, len(noise_pred) // 2, dim=0)
    noise_pred = uncond + GUIDANCE_SCALE * (cond - uncond)
    return -noise_pred


PRODUCER = dict(
    library_source="replica of huggingface/diffusers transformer_omnigen.py@071190daca86 and the parts it imports "
                   "(torch 1.13)",
    timestep="1 - sigma float32, expanded to the CFG batch of 2 (FlowMatchEulerDiscreteScheduler(invert_sigmas=True, "
             "num_train_timesteps=1))",
    velocity="negated CFG combination: -(uncond + 2.5*(cond - uncond)) of the batch [prompt, negative prompt] "
             "(the inverted sigmas step +output in 1 - sigma)",
    note="OmniGen-v1, 2 layers: one causal/bidirectional decoder over [text tokens, time token, 16 image patches]; "
         "additive mask (1 - m)*finfo.min from the processor's 3-D mask (causal text+time rows, image rows see all, "
         "left padding masked); Phi-3 su-scaled RoPE from the first batch row's position ids, cos/sin times "
         "sqrt(1 + ln 32 / ln 4096), half-split rotation; fused gate_up SwiGLU; final RMSNorm, image rows, "
         "AdaLayerNorm (shift, scale) from t_embedder, proj_out; conv patch embed + centre-cropped 2-D sin-cos table")

if __name__ == "__main__":
    capture("omnigen", build, inputs, call, sys.argv[1], PRODUCER)
