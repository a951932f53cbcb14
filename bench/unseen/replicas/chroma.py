"""Chroma text-to-image DiT, reimplemented for torch 1.13 (no diffusers here), captured small in f32 on CPU.

Follows huggingface/diffusers src/diffusers/models/transformers/transformer_chroma.py at
3b0a540a934b18062e0051f35ce939e7fdd4f0cf (ChromaTransformer2DModel, ChromaTransformerBlock,
ChromaSingleTransformerBlock, ChromaAdaLayerNormZeroPruned, ChromaAdaLayerNormZeroSinglePruned,
ChromaAdaLayerNormContinuousPruned, ChromaCombinedTimestepTextProjEmbeddings, ChromaApproximator) with the parts it
imports: transformer_flux.py (FluxAttention with FluxAttnProcessor's __call__ as its forward: unfused projections,
per-head RMSNorm q/k and added q/k, [text, image] concatenation, RoPE, dispatch_attention_fn with the attention mask,
split and output projections; the index holds no upstream version of the FluxAttention-era file, so these lines
were read from a verbatim copy, index id 23450247907, the code ovis_image.py's processor also follows),
attention.py (FeedForward with "gelu-approximate"), activations.py (GELU), embeddings.py (Timesteps,
get_timestep_embedding, PixArtAlphaTextProjection with act_fn "silu", FluxPosEmbed: get_1d_rotary_pos_embed with
use_real and repeat_interleave_real in f64, apply_rotary_emb with use_real and sequence_dim 1): the same module tree,
parameter names and shapes, non-persistent buffer and call boundaries; the arithmetic line for line. Stand-ins for
what torch 1.13 lacks: torch.nn.RMSNorm (parts.TorchRMSNorm: x·rsqrt(mean x² + eps)·weight in f32, eps None = f32
machine epsilon, as the approximator's norms have it), dispatch_attention_fn (SDPA's math on [B, L, H, D], default
scale, the float mask added to the scores as torch 2's SDPA adds a float attn_mask), and nn.LayerNorm's bias
argument (dropped: the final norm is built without affine, so it has no parameters either way).

The constructs it shows: no per-block modulation Linear at all; the modulation comes from one "distilled guidance
layer" (ChromaApproximator: in_proj, residual RMSNorm -> Linear-SiLU-Linear layers, out_proj) run over a
[modulation slots, 4·C] input whose rows are [sinusoid(1000 t), sinusoid(0) (the guidance slot, always zero),
row i of a fixed sinusoidal table of 1000·i] (mod_proj, a non-persistent buffer), giving one inner_dim vector per
slot; each single block reads 3 rows (shift, scale, gate), each double block 6 image and 6 text rows further on, the
final norm the last 2 rows in (shift, scale) order; the pruned adaLN norms flatten their rows and chunk them (no
Linear, no SiLU); joint [text, image] attention whose mask is the outer product of the per-token 0/1 float mask,
passed as a float additive bias (+1 where both tokens are kept, +0 elsewhere: nothing is -inf); GELU-tanh FFNs;
single-stream blocks with attention and a GELU-tanh MLP beside it, concatenated into one proj_out.

Pipeline as ChromaPipeline (pipeline_chroma.py at 3052fa66f08b4682afacb02a70c855c1c11da838) calls it with
guidance_scale 1 (no negative-prompt call) and prompt_embeds given: latents (B, 4, 8, 8) packed 2x2 to
(B, 16, 16), img ids (0, h, w) over the packed 4x4 grid, text ids zeros, the prompt mask as _get_t5_prompt_embeds
makes it (ones up to and including the first padding token, in the text dtype) extended by _prepare_attention_mask
with ones for the image tokens, timestep = t.expand(B).to(latents.dtype) / 1000 with t = σ·1000 (the model
multiplies by 1000 again), velocity the output as is.

usage: /usr/bin/python3 bench/unseen/replicas/chroma.py OUTDIR
"""
import sys

import torch
import torch.nn as nn

from parts import FeedForward as _FeedForward, Timesteps, TorchRMSNorm
from run import capture, get_timestep_embedding
from flux2 import RMSNorm, apply_rotary_emb, attention, get_1d_rotary_pos_embed


class FeedForward(_FeedForward):
    """attention.FeedForward(dim, dim_out=dim, activation_fn="gelu-approximate"): GELU(tanh) Linear, Dropout, Linear."""

    def __init__(self, dim, dim_out=None, mult=4, dropout=0.0, activation_fn="gelu-approximate", bias=True):
        assert activation_fn == "gelu-approximate" and (dim_out is None or dim_out == dim)
        super().__init__(dim, mult=mult, dropout=dropout, bias=bias)


class PixArtAlphaTextProjection(nn.Module):
    """embeddings.PixArtAlphaTextProjection(in_features, hidden_size, act_fn="silu")."""

    def __init__(self, in_features, hidden_size, out_features=None, act_fn="gelu_tanh"):
        super().__init__()
        if out_features is None:
            out_features = hidden_size
        self.linear_1 = nn.Linear(in_features=in_features, out_features=hidden_size, bias=True)
        if act_fn == "gelu_tanh":
            self.act_1 = nn.GELU(approximate="tanh")
        elif act_fn == "silu":
            self.act_1 = nn.SiLU()
        else:
            raise ValueError(f"Unknown activation function: {act_fn}")
        self.linear_2 = nn.Linear(in_features=hidden_size, out_features=out_features, bias=True)

    def forward(self, caption):
        hidden_states = self.linear_1(caption)
        hidden_states = self.act_1(hidden_states)
        hidden_states = self.linear_2(hidden_states)
        return hidden_states


class FluxPosEmbed(nn.Module):
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


class FluxAttention(nn.Module):
    """transformer_flux.FluxAttention with FluxAttnProcessor's __call__ as its forward (unfused projections)."""

    def __init__(self, query_dim, heads=8, dim_head=64, dropout=0.0, bias=False, added_kv_proj_dim=None,
                 added_proj_bias=True, out_bias=True, eps=1e-5, out_dim=None, context_pre_only=None, pre_only=False,
                 elementwise_affine=True):
        super().__init__()
        self.head_dim = dim_head
        self.inner_dim = out_dim if out_dim is not None else dim_head * heads
        self.query_dim = query_dim
        self.use_bias = bias
        self.dropout = dropout
        self.out_dim = out_dim if out_dim is not None else query_dim
        self.context_pre_only = context_pre_only
        self.pre_only = pre_only
        self.heads = out_dim // dim_head if out_dim is not None else heads
        self.added_kv_proj_dim = added_kv_proj_dim
        self.added_proj_bias = added_proj_bias

        self.norm_q = RMSNorm(dim_head, eps=eps, elementwise_affine=elementwise_affine)
        self.norm_k = RMSNorm(dim_head, eps=eps, elementwise_affine=elementwise_affine)
        self.to_q = nn.Linear(query_dim, self.inner_dim, bias=bias)
        self.to_k = nn.Linear(query_dim, self.inner_dim, bias=bias)
        self.to_v = nn.Linear(query_dim, self.inner_dim, bias=bias)

        if not self.pre_only:
            self.to_out = nn.ModuleList([])
            self.to_out.append(nn.Linear(self.inner_dim, self.out_dim, bias=out_bias))
            self.to_out.append(nn.Dropout(dropout))

        if added_kv_proj_dim is not None:
            self.norm_added_q = RMSNorm(dim_head, eps=eps)
            self.norm_added_k = RMSNorm(dim_head, eps=eps)
            self.add_q_proj = nn.Linear(added_kv_proj_dim, self.inner_dim, bias=added_proj_bias)
            self.add_k_proj = nn.Linear(added_kv_proj_dim, self.inner_dim, bias=added_proj_bias)
            self.add_v_proj = nn.Linear(added_kv_proj_dim, self.inner_dim, bias=added_proj_bias)
            self.to_add_out = nn.Linear(self.inner_dim, query_dim, bias=out_bias)

    def forward(self, hidden_states, encoder_hidden_states=None, attention_mask=None, image_rotary_emb=None):
        attn = self
        # _get_qkv_projections -> _get_projections (not fused)
        query = attn.to_q(hidden_states)
        key = attn.to_k(hidden_states)
        value = attn.to_v(hidden_states)
        encoder_query = encoder_key = encoder_value = None
        if encoder_hidden_states is not None and attn.added_kv_proj_dim is not None:
            encoder_query = attn.add_q_proj(encoder_hidden_states)
            encoder_key = attn.add_k_proj(encoder_hidden_states)
            encoder_value = attn.add_v_proj(encoder_hidden_states)

        query = query.unflatten(-1, (attn.heads, -1))
        key = key.unflatten(-1, (attn.heads, -1))
        value = value.unflatten(-1, (attn.heads, -1))

        query = attn.norm_q(query)
        key = attn.norm_k(key)

        if attn.added_kv_proj_dim is not None:
            encoder_query = encoder_query.unflatten(-1, (attn.heads, -1))
            encoder_key = encoder_key.unflatten(-1, (attn.heads, -1))
            encoder_value = encoder_value.unflatten(-1, (attn.heads, -1))

            encoder_query = attn.norm_added_q(encoder_query)
            encoder_key = attn.norm_added_k(encoder_key)

            query = torch.cat([encoder_query, query], dim=1)
            key = torch.cat([encoder_key, key], dim=1)
            value = torch.cat([encoder_value, value], dim=1)

        if image_rotary_emb is not None:
            query = apply_rotary_emb(query, image_rotary_emb, sequence_dim=1)
            key = apply_rotary_emb(key, image_rotary_emb, sequence_dim=1)

        hidden_states = attention(query, key, value, attn_mask=attention_mask)
        hidden_states = hidden_states.flatten(2, 3)
        hidden_states = hidden_states.to(query.dtype)

        if encoder_hidden_states is not None:
            encoder_hidden_states, hidden_states = hidden_states.split_with_sizes(
                [encoder_hidden_states.shape[1], hidden_states.shape[1] - encoder_hidden_states.shape[1]], dim=1)
            hidden_states = attn.to_out[0](hidden_states)
            hidden_states = attn.to_out[1](hidden_states)
            encoder_hidden_states = attn.to_add_out(encoder_hidden_states)

            return hidden_states, encoder_hidden_states
        else:
            return hidden_states


class ChromaAdaLayerNormZeroPruned(nn.Module):
    """num_embeddings None (no CombinedTimestepLabelEmbeddings), norm_type "layer_norm"."""

    def __init__(self, embedding_dim, num_embeddings=None, norm_type="layer_norm", bias=True):
        super().__init__()
        assert num_embeddings is None and norm_type == "layer_norm"
        self.emb = None
        self.norm = nn.LayerNorm(embedding_dim, elementwise_affine=False, eps=1e-6)

    def forward(self, x, timestep=None, class_labels=None, hidden_dtype=None, emb=None):
        shift_msa, scale_msa, gate_msa, shift_mlp, scale_mlp, gate_mlp = emb.flatten(1, 2).chunk(6, dim=1)
        x = self.norm(x) * (1 + scale_msa[:, None]) + shift_msa[:, None]
        return x, gate_msa, shift_mlp, scale_mlp, gate_mlp


class ChromaAdaLayerNormZeroSinglePruned(nn.Module):
    def __init__(self, embedding_dim, norm_type="layer_norm", bias=True):
        super().__init__()
        assert norm_type == "layer_norm"
        self.norm = nn.LayerNorm(embedding_dim, elementwise_affine=False, eps=1e-6)

    def forward(self, x, emb=None):
        shift_msa, scale_msa, gate_msa = emb.flatten(1, 2).chunk(3, dim=1)
        x = self.norm(x) * (1 + scale_msa[:, None]) + shift_msa[:, None]
        return x, gate_msa


class ChromaAdaLayerNormContinuousPruned(nn.Module):
    """norm_type "layer_norm"; upstream's nn.LayerNorm(embedding_dim, eps, elementwise_affine, bias) without the
    bias argument (torch 1.13's fourth positional is device; affine is off, so no parameters either way)."""

    def __init__(self, embedding_dim, conditioning_embedding_dim, elementwise_affine=True, eps=1e-5, bias=True,
                 norm_type="layer_norm"):
        super().__init__()
        assert norm_type == "layer_norm"
        self.norm = nn.LayerNorm(embedding_dim, eps, elementwise_affine)

    def forward(self, x, emb):
        shift, scale = torch.chunk(emb.flatten(1, 2).to(x.dtype), 2, dim=1)
        x = self.norm(x) * (1 + scale)[:, None, :] + shift[:, None, :]
        return x


class ChromaCombinedTimestepTextProjEmbeddings(nn.Module):
    def __init__(self, num_channels, out_dim):
        super().__init__()
        self.time_proj = Timesteps(num_channels=num_channels, flip_sin_to_cos=True, downscale_freq_shift=0)
        self.guidance_proj = Timesteps(num_channels=num_channels, flip_sin_to_cos=True, downscale_freq_shift=0)
        self.register_buffer(
            "mod_proj",
            get_timestep_embedding(torch.arange(out_dim) * 1000, 2 * num_channels, flip_sin_to_cos=True,
                                   downscale_freq_shift=0),
            persistent=False)

    def forward(self, timestep):
        mod_index_length = self.mod_proj.shape[0]
        batch_size = timestep.shape[0]

        timesteps_proj = self.time_proj(timestep).to(dtype=timestep.dtype)
        guidance_proj = self.guidance_proj(torch.tensor([0] * batch_size)).to(dtype=timestep.dtype,
                                                                               device=timestep.device)

        mod_proj = self.mod_proj.to(dtype=timesteps_proj.dtype, device=timesteps_proj.device).repeat(batch_size, 1, 1)
        timestep_guidance = torch.cat([timesteps_proj, guidance_proj], dim=1).unsqueeze(1).repeat(1, mod_index_length, 1)
        input_vec = torch.cat([timestep_guidance, mod_proj], dim=-1)
        return input_vec.to(timestep.dtype)


class ChromaApproximator(nn.Module):
    def __init__(self, in_dim, out_dim, hidden_dim, n_layers=5):
        super().__init__()
        self.in_proj = nn.Linear(in_dim, hidden_dim, bias=True)
        self.layers = nn.ModuleList(
            [PixArtAlphaTextProjection(hidden_dim, hidden_dim, act_fn="silu") for _ in range(n_layers)])
        self.norms = nn.ModuleList([TorchRMSNorm(hidden_dim) for _ in range(n_layers)])  # nn.RMSNorm(hidden_dim)
        self.out_proj = nn.Linear(hidden_dim, out_dim)

    def forward(self, x):
        x = self.in_proj(x)
        for layer, norms in zip(self.layers, self.norms):
            x = x + layer(norms(x))
        return self.out_proj(x)


class ChromaSingleTransformerBlock(nn.Module):
    def __init__(self, dim, num_attention_heads, attention_head_dim, mlp_ratio=4.0):
        super().__init__()
        self.mlp_hidden_dim = int(dim * mlp_ratio)
        self.norm = ChromaAdaLayerNormZeroSinglePruned(dim)
        self.proj_mlp = nn.Linear(dim, self.mlp_hidden_dim)
        self.act_mlp = nn.GELU(approximate="tanh")
        self.proj_out = nn.Linear(dim + self.mlp_hidden_dim, dim)
        self.attn = FluxAttention(query_dim=dim, dim_head=attention_head_dim, heads=num_attention_heads, out_dim=dim,
                                  bias=True, eps=1e-6, pre_only=True)

    def forward(self, hidden_states, temb, image_rotary_emb=None, attention_mask=None, joint_attention_kwargs=None):
        residual = hidden_states
        norm_hidden_states, gate = self.norm(hidden_states, emb=temb)
        mlp_hidden_states = self.act_mlp(self.proj_mlp(norm_hidden_states))
        joint_attention_kwargs = joint_attention_kwargs or {}

        if attention_mask is not None:
            attention_mask = attention_mask[:, None, None, :] * attention_mask[:, None, :, None]

        attn_output = self.attn(hidden_states=norm_hidden_states, image_rotary_emb=image_rotary_emb,
                                attention_mask=attention_mask, **joint_attention_kwargs)

        hidden_states = torch.cat([attn_output, mlp_hidden_states], dim=2)
        gate = gate.unsqueeze(1)
        hidden_states = gate * self.proj_out(hidden_states)
        hidden_states = residual + hidden_states
        if hidden_states.dtype == torch.float16:
            hidden_states = hidden_states.clip(-65504, 65504)

        return hidden_states


class ChromaTransformerBlock(nn.Module):
    def __init__(self, dim, num_attention_heads, attention_head_dim, qk_norm="rms_norm", eps=1e-6):
        super().__init__()
        self.norm1 = ChromaAdaLayerNormZeroPruned(dim)
        self.norm1_context = ChromaAdaLayerNormZeroPruned(dim)

        self.attn = FluxAttention(query_dim=dim, added_kv_proj_dim=dim, dim_head=attention_head_dim,
                                  heads=num_attention_heads, out_dim=dim, context_pre_only=False, bias=True, eps=eps)

        self.norm2 = nn.LayerNorm(dim, elementwise_affine=False, eps=1e-6)
        self.ff = FeedForward(dim=dim, dim_out=dim, activation_fn="gelu-approximate")

        self.norm2_context = nn.LayerNorm(dim, elementwise_affine=False, eps=1e-6)
        self.ff_context = FeedForward(dim=dim, dim_out=dim, activation_fn="gelu-approximate")

    def forward(self, hidden_states, encoder_hidden_states, temb, image_rotary_emb=None, attention_mask=None,
                joint_attention_kwargs=None):
        temb_img, temb_txt = temb[:, :6], temb[:, 6:]
        norm_hidden_states, gate_msa, shift_mlp, scale_mlp, gate_mlp = self.norm1(hidden_states, emb=temb_img)

        norm_encoder_hidden_states, c_gate_msa, c_shift_mlp, c_scale_mlp, c_gate_mlp = self.norm1_context(
            encoder_hidden_states, emb=temb_txt)
        joint_attention_kwargs = joint_attention_kwargs or {}
        if attention_mask is not None:
            attention_mask = attention_mask[:, None, None, :] * attention_mask[:, None, :, None]

        # Attention.
        attention_outputs = self.attn(hidden_states=norm_hidden_states,
                                      encoder_hidden_states=norm_encoder_hidden_states,
                                      image_rotary_emb=image_rotary_emb, attention_mask=attention_mask,
                                      **joint_attention_kwargs)

        attn_output, context_attn_output = attention_outputs  # no IP-adapter output (len 2)

        # Process attention outputs for the `hidden_states`.
        attn_output = gate_msa.unsqueeze(1) * attn_output
        hidden_states = hidden_states + attn_output

        norm_hidden_states = self.norm2(hidden_states)
        norm_hidden_states = norm_hidden_states * (1 + scale_mlp[:, None]) + shift_mlp[:, None]

        ff_output = self.ff(norm_hidden_states)
        ff_output = gate_mlp.unsqueeze(1) * ff_output

        hidden_states = hidden_states + ff_output

        # Process attention outputs for the `encoder_hidden_states`.
        context_attn_output = c_gate_msa.unsqueeze(1) * context_attn_output
        encoder_hidden_states = encoder_hidden_states + context_attn_output

        norm_encoder_hidden_states = self.norm2_context(encoder_hidden_states)
        norm_encoder_hidden_states = norm_encoder_hidden_states * (1 + c_scale_mlp[:, None]) + c_shift_mlp[:, None]

        context_ff_output = self.ff_context(norm_encoder_hidden_states)
        encoder_hidden_states = encoder_hidden_states + c_gate_mlp.unsqueeze(1) * context_ff_output
        if encoder_hidden_states.dtype == torch.float16:
            encoder_hidden_states = encoder_hidden_states.clip(-65504, 65504)

        return encoder_hidden_states, hidden_states


class ChromaTransformer2DModel(nn.Module):
    def __init__(self, patch_size=1, in_channels=64, out_channels=None, num_layers=19, num_single_layers=38,
                 attention_head_dim=128, num_attention_heads=24, joint_attention_dim=4096, axes_dims_rope=(16, 56, 56),
                 approximator_num_channels=64, approximator_hidden_dim=5120, approximator_layers=5):
        super().__init__()
        self.out_channels = out_channels or in_channels
        self.inner_dim = num_attention_heads * attention_head_dim

        self.pos_embed = FluxPosEmbed(theta=10000, axes_dim=axes_dims_rope)

        self.time_text_embed = ChromaCombinedTimestepTextProjEmbeddings(
            num_channels=approximator_num_channels // 4,
            out_dim=3 * num_single_layers + 2 * 6 * num_layers + 2)
        self.distilled_guidance_layer = ChromaApproximator(in_dim=approximator_num_channels, out_dim=self.inner_dim,
                                                           hidden_dim=approximator_hidden_dim,
                                                           n_layers=approximator_layers)

        self.context_embedder = nn.Linear(joint_attention_dim, self.inner_dim)
        self.x_embedder = nn.Linear(in_channels, self.inner_dim)

        self.transformer_blocks = nn.ModuleList([
            ChromaTransformerBlock(dim=self.inner_dim, num_attention_heads=num_attention_heads,
                                   attention_head_dim=attention_head_dim) for _ in range(num_layers)])

        self.single_transformer_blocks = nn.ModuleList([
            ChromaSingleTransformerBlock(dim=self.inner_dim, num_attention_heads=num_attention_heads,
                                         attention_head_dim=attention_head_dim) for _ in range(num_single_layers)])

        self.norm_out = ChromaAdaLayerNormContinuousPruned(self.inner_dim, self.inner_dim, elementwise_affine=False,
                                                           eps=1e-6)
        self.proj_out = nn.Linear(self.inner_dim, patch_size * patch_size * self.out_channels, bias=True)

    def forward(self, hidden_states, encoder_hidden_states=None, timestep=None, img_ids=None, txt_ids=None,
                attention_mask=None, joint_attention_kwargs=None, controlnet_block_samples=None,
                controlnet_single_block_samples=None, return_dict=True, controlnet_blocks_repeat=False):
        hidden_states = self.x_embedder(hidden_states)

        timestep = timestep.to(hidden_states.dtype) * 1000

        input_vec = self.time_text_embed(timestep)
        pooled_temb = self.distilled_guidance_layer(input_vec)

        encoder_hidden_states = self.context_embedder(encoder_hidden_states)

        if txt_ids.ndim == 3:
            txt_ids = txt_ids[0]
        if img_ids.ndim == 3:
            img_ids = img_ids[0]

        ids = torch.cat((txt_ids, img_ids), dim=0)
        image_rotary_emb = self.pos_embed(ids)

        for index_block, block in enumerate(self.transformer_blocks):
            img_offset = 3 * len(self.single_transformer_blocks)
            txt_offset = img_offset + 6 * len(self.transformer_blocks)
            img_modulation = img_offset + 6 * index_block
            text_modulation = txt_offset + 6 * index_block
            temb = torch.cat((pooled_temb[:, img_modulation: img_modulation + 6],
                              pooled_temb[:, text_modulation: text_modulation + 6]), dim=1)
            encoder_hidden_states, hidden_states = block(hidden_states=hidden_states,
                                                         encoder_hidden_states=encoder_hidden_states, temb=temb,
                                                         image_rotary_emb=image_rotary_emb,
                                                         attention_mask=attention_mask,
                                                         joint_attention_kwargs=joint_attention_kwargs)
        hidden_states = torch.cat([encoder_hidden_states, hidden_states], dim=1)

        for index_block, block in enumerate(self.single_transformer_blocks):
            start_idx = 3 * index_block
            temb = pooled_temb[:, start_idx: start_idx + 3]
            hidden_states = block(hidden_states=hidden_states, temb=temb, image_rotary_emb=image_rotary_emb,
                                  attention_mask=attention_mask, joint_attention_kwargs=joint_attention_kwargs)

        hidden_states = hidden_states[:, encoder_hidden_states.shape[1]:, ...]

        temb = pooled_temb[:, -2:]
        hidden_states = self.norm_out(hidden_states, temb)
        output = self.proj_out(hidden_states)
        return (output,)


def build():
    # Small Chroma: 2 heads of 16 (RoPE axes 4+6+6), two double- and two single-stream blocks (3·2 + 2·6·2 + 2 = 32
    # modulation slots), in_channels 16 (4 latent channels packed 2x2), a 16-wide caption; the approximator over
    # 32 input channels (8-channel time and guidance sinusoids + a 16-channel slot-index sinusoid), 32 wide, 2
    # residual layers.
    return ChromaTransformer2DModel(patch_size=1, in_channels=16, num_layers=2, num_single_layers=2,
                                    attention_head_dim=16, num_attention_heads=2, joint_attention_dim=16,
                                    axes_dims_rope=(4, 6, 6), approximator_num_channels=32,
                                    approximator_hidden_dim=32, approximator_layers=2)


def prepare_latent_image_ids(height, width):
    """ChromaPipeline._prepare_latent_image_ids: (h·w, 3) = (0, row, col)."""
    latent_image_ids = torch.zeros(height, width, 3)
    latent_image_ids[..., 1] = latent_image_ids[..., 1] + torch.arange(height)[:, None]
    latent_image_ids[..., 2] = latent_image_ids[..., 2] + torch.arange(width)[None, :]
    latent_image_id_height, latent_image_id_width, latent_image_id_channels = latent_image_ids.shape
    return latent_image_ids.reshape(latent_image_id_height * latent_image_id_width, latent_image_id_channels)


def pack_latents(latents, batch_size, num_channels_latents, height, width):
    """ChromaPipeline._pack_latents: (B, C, H, W) -> (B, H/2·W/2, 4C)."""
    latents = latents.view(batch_size, num_channels_latents, height // 2, 2, width // 2, 2)
    latents = latents.permute(0, 2, 4, 1, 3, 5)
    return latents.reshape(batch_size, (height // 2) * (width // 2), num_channels_latents * 4)


def inputs(g):
    n, valid = 6, 3  # 6 text positions, 3 real tokens (then padding)
    txt = torch.randn((1, n, 16), generator=g)  # prompt_embeds (T5 output, padding rows included)
    # _get_t5_prompt_embeds: every token up to and including the first padding token kept, in the text dtype
    tokenizer_mask = (torch.arange(n) < valid).long()[None]
    seq_lengths = tokenizer_mask.sum(dim=1)
    mask_indices = torch.arange(tokenizer_mask.size(1)).unsqueeze(0).expand(1, -1)
    prompt_attention_mask = (mask_indices <= seq_lengths.unsqueeze(1)).to(dtype=txt.dtype)
    lat = torch.randn((1, 4, 8, 8), generator=g)
    latents = pack_latents(lat, 1, 4, 8, 8)
    # _prepare_attention_mask: ones (bool) for the image tokens appended, promoted to the mask's float dtype
    attention_mask = torch.cat([prompt_attention_mask, torch.ones(1, latents.shape[1], dtype=torch.bool)], dim=1)
    return {"encoder_hidden_states": txt, "txt_ids": torch.zeros(n, 3), "img_ids": prepare_latent_image_ids(4, 4),
            "attention_mask": attention_mask, "noise": latents}


def call(model, x, sigma, c):
    timestep = torch.tensor([sigma * 1000.0], dtype=torch.float32).expand(x.shape[0]).to(x.dtype)
    return model(hidden_states=x, timestep=timestep / 1000, encoder_hidden_states=c["encoder_hidden_states"],
                 txt_ids=c["txt_ids"], img_ids=c["img_ids"], attention_mask=c["attention_mask"],
                 joint_attention_kwargs={}, return_dict=False)[0]


PRODUCER = dict(
    library_source="replica of huggingface/diffusers transformer_chroma.py@3b0a540a934b and the parts it imports "
                   "(FluxAttention/FluxAttnProcessor of transformer_flux.py, embeddings, FeedForward; torch 1.13)",
    timestep="sigma float32 in the latents' dtype (ChromaPipeline: t.expand(B).to(latents.dtype) / 1000 of "
             "sigma*1000; the model multiplies by 1000); no guidance input (the guidance slot is sinusoid(0))",
    velocity="model output as is (flow velocity), not negated",
    note="Chroma MMDiT, two double- and two single-stream blocks, no modulation Linear in any block: "
         "time_text_embed builds a [32 slots, 32] input per sample (cos-first sinusoid of 1000 t (8), sinusoid of "
         "guidance 0 (8), row i of a fixed non-persistent table sinusoid(1000 i) (16)), distilled_guidance_layer "
         "(in_proj, 2 residual x + Linear-SiLU-Linear(RMSNorm x) layers, out_proj) maps it to one 32-wide vector per "
         "slot; single block i reads rows 3i..3i+2 (shift, scale, gate), double block i rows 6 + 6i.. (image) and "
         "18 + 6i.. (text), final norm the last 2 rows as (shift, scale); pruned adaLN: non-affine LayerNorm "
         "eps 1e-6, (1 + scale)·norm + shift, x + gate·y; joint [text, image] FluxAttention with per-head RMSNorm "
         "q/k and added q/k (eps 1e-6), interleaved 3-axis RoPE (f64 tables, axes 4+6+6, theta 10000, text ids 0, "
         "image ids (0, h, w)); the [text, image] 0/1 float mask's outer product added to the attention scores "
         "(+1 where both kept, not -inf; 2 padding text tokens masked, the first padding token kept); GELU-tanh "
         "FFNs; single block: proj_mlp + GELU-tanh beside the attention, proj_out over [attention, mlp]; text rows "
         "dropped before norm_out + proj_out; latents packed 2x2 (B, HW/4, 4C)")

if __name__ == "__main__":
    capture("chroma", build, inputs, call, sys.argv[1], PRODUCER)
