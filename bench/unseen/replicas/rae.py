"""The Representation Autoencoder (AutoencoderRAE: a frozen DINOv2-with-registers ViT as the encoder, a ViT-MAE style
decoder), reimplemented for torch 1.13 (no diffusers, no transformers here), captured small in f32 on CPU as one
forward: the image encoded to the encoder's patch tokens as a latent map, then decoded back to pixels.

Follows huggingface/diffusers src/diffusers/models/autoencoders/autoencoder_rae.py at
03e757ca73863964b4c7c9a9cc2956373cb0b367 (the encoder built from its config with random weights, no download; the
decoder's attention diffusers' Attention; an older stored version, f06ea7a9012500a6ee82fd3cb1286973bcc0f37a, loaded
the encoder with from_pretrained and had its own ViTMAESelfAttention): AutoencoderRAE.forward = encode then decode
(use_slicing off, eval, so no _noising): _encode (_maybe_resize_and_normalize: F.interpolate bicubic,
align_corners=False, to encoder_input_size when the image is another size, then (x - encoder_mean) / encoder_std
with ImageNet's statistics as buffers cast to the image's dtype; the encoder's tokens; reshape_to_2d: tokens
transpose(1, 2).contiguous().view(B, C, side, side); _maybe_normalize_latents: (z - latents_mean) / (latents_std +
1e-5); scaling_factor 1.0, so no scaling) and _decode (_maybe_denormalize_latents z · (latents_std + 1e-5) +
latents_mean; view(B, C, h·w).transpose(1, 2).contiguous() back to tokens; RAEDecoder; unpatchify; x · encoder_std +
encoder_mean). Dinov2Encoder: Dinov2WithRegistersModel(Dinov2WithRegistersConfig(hidden_size, patch_size,
image_size=518 (Dinov2Encoder's default: AutoencoderRAE does not pass it), num_attention_heads=hidden_size // 64,
num_hidden_layers)), its final layernorm made non-affine (weight and bias None); forward: the model's
last_hidden_state without its first 5 tokens (CLS and 4 registers). RAEDecoder: decoder_embed Linear, (interpolate_latent
the identity: the token count equals num_patches), the trainable CLS token expanded and prepended, decoder_pos_embed
(a Parameter with requires_grad False: a 2-D sincos table from embeddings.get_2d_sincos_pos_embed at init, dit.py's
copy, redrawn here as every weight is) cast to the stream's dtype and added, ViTMAELayers (pre-norm: layernorm_before
-> Attention (biased to_q/to_k/to_v/to_out, AttnProcessor2_0: dit.py's Attention) + residual; layernorm_after ->
ViTMAEIntermediate (dense, get_activation("gelu") = nn.GELU) -> ViTMAEOutput (dense, dropout, + residual)),
decoder_norm (eps 1e-12), decoder_pred, the CLS row dropped, unpatchify (reshape [N, h, w, p, p, C],
einsum "nhwpqc->nchpwq", reshape [N, C, h·p, w·p]).

The encoder follows huggingface/transformers src/transformers/models/dinov2_with_registers/
modeling_dinov2_with_registers.py at 015e68769f9823df27f5f7372dc155277e6ff7e6 and configuration_dinov2_with_registers.py
at 053f59efe493c4f815f39f836494a1f2f73fbe0b (defaults: mlp_ratio 4, gelu, layer_norm_eps 1e-6, qkv_bias, layerscale 1.0,
drop_path 0 so drop_path is nn.Identity, no SwiGLU, 4 register tokens): Dinov2WithRegistersEmbeddings (pixels cast
to the projection's dtype; patch_embeddings.projection a Conv2d of kernel = stride = patch, flatten(2).transpose(1, 2);
no mask; CLS token expanded and prepended; interpolate_pos_encoding: the 37x37 table (518 // 14) of
position_embeddings minus its CLS row, reshaped and permuted to [1, D, 37, 37], F.interpolate in f32 to the image's
patch grid, mode bicubic, align_corners False, antialias True, cast back to the table's dtype, permuted back, the CLS
row prepended, added; then the 4 register tokens inserted after the CLS token; dropout), Dinov2WithRegistersLayer
(norm1 -> attention (query/key/value Linear, heads split by view/transpose, attention as the default
"sdpa" implementation, sdpa_attention_forward: F.scaled_dot_product_attention with scale head_dim^-0.5, not causal,
then transpose(1, 2).contiguous() and reshape) -> output.dense -> layer_scale1 (· lambda1) -> drop_path, + residual;
norm2 -> mlp (fc1, GELUActivation = F.gelu, fc2) -> layer_scale2 -> drop_path, + residual), the encoder's layer
list, the final non-affine layernorm. Stand-in for what torch 1.13 lacks: F.scaled_dot_product_attention (run.sdpa,
its math path), in both the encoder's attention and the decoder's.

The constructs it shows: an image resized by bicubic interpolation to the encoder's size and normalised per channel
by constant statistics; a ViT patch embed as a strided conv; a learned position table resampled to the patch grid
by antialiased bicubic interpolation, computed in f32 and cast back, every call; register tokens spliced between the
CLS token and the patches, then sliced off with the CLS token after the final non-affine LayerNorm; layer-scaled
pre-norm residual blocks; the tokens folded to a latent map and normalised per element (mean and std of shape
[C, h, w], the std offset by 1e-5), then unfolded again; a second ViT with its own CLS token and position table;
the per-patch pixel head unpatchified by einsum; the image de-normalised.

Tiny config: encoder_hidden_size 64 (the smallest the encoder allows: heads = hidden_size // 64, so one head of
64), encoder_patch_size 14, 2 encoder layers (MLP 256), encoder_input_size 42 (a 3x3 patch grid, so num_patches
9 and the 37x37 position table resampled to 3x3); decoder_hidden_size 32, 2 decoder layers, 2 heads of 16,
intermediate 64, patch_size 4 (image_size 12). latents_mean / latents_std as a checkpoint's statistics, of shape
[64, 3, 3] (0.5·N(0, 1) and 0.5 + U(0, 1) from their own seeded generator; the defaults, zeros(1) and ones(1), would
hide them). The image [1, 3, 40, 48] (not square and not 42, so the resize runs) -> [1, 3, 42, 42] -> 9 tokens of
64 -> latent [1, 64, 3, 3] -> [1, 3, 12, 12].

usage: /usr/bin/python3 bench/unseen/replicas/rae.py OUTDIR
REPLICA_DTYPE=bf16 [REPLICA_DEVICE=cuda] as run.py's replicas: the bf16 run, beside the f32 one.
"""
import collections.abc
import sys
from math import sqrt
from types import SimpleNamespace

import torch
import torch.nn as nn
import torch.nn.functional as F

from dit import Attention, get_2d_sincos_pos_embed
from run import capture_once, sdpa


# ---- transformers: modeling_dinov2_with_registers.py ----

class GELUActivation(nn.Module):
    """transformers.activations.GELUActivation (ACT2FN["gelu"]): nn.functional.gelu."""

    def __init__(self):
        super().__init__()
        self.act = F.gelu

    def forward(self, input):
        return self.act(input)


class Dinov2WithRegistersConfig(SimpleNamespace):
    def __init__(self, hidden_size=768, num_hidden_layers=12, num_attention_heads=12, mlp_ratio=4, hidden_act="gelu",
                 hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, initializer_range=0.02,
                 layer_norm_eps=1e-6, image_size=224, patch_size=16, num_channels=3, qkv_bias=True,
                 layerscale_value=1.0, drop_path_rate=0.0, use_swiglu_ffn=False, num_register_tokens=4):
        super().__init__(hidden_size=hidden_size, num_hidden_layers=num_hidden_layers,
                         num_attention_heads=num_attention_heads, mlp_ratio=mlp_ratio, hidden_act=hidden_act,
                         hidden_dropout_prob=hidden_dropout_prob,
                         attention_probs_dropout_prob=attention_probs_dropout_prob,
                         initializer_range=initializer_range, layer_norm_eps=layer_norm_eps, image_size=image_size,
                         patch_size=patch_size, num_channels=num_channels, qkv_bias=qkv_bias,
                         layerscale_value=layerscale_value, drop_path_rate=drop_path_rate,
                         use_swiglu_ffn=use_swiglu_ffn, num_register_tokens=num_register_tokens,
                         _attn_implementation="sdpa")


class Dinov2WithRegistersPatchEmbeddings(nn.Module):
    def __init__(self, config):
        super().__init__()
        image_size, patch_size = config.image_size, config.patch_size
        num_channels, hidden_size = config.num_channels, config.hidden_size
        image_size = image_size if isinstance(image_size, collections.abc.Iterable) else (image_size, image_size)
        patch_size = patch_size if isinstance(patch_size, collections.abc.Iterable) else (patch_size, patch_size)
        num_patches = (image_size[1] // patch_size[1]) * (image_size[0] // patch_size[0])
        self.image_size = image_size
        self.patch_size = patch_size
        self.num_channels = num_channels
        self.num_patches = num_patches
        self.projection = nn.Conv2d(num_channels, hidden_size, kernel_size=patch_size, stride=patch_size)

    def forward(self, pixel_values):
        num_channels = pixel_values.shape[1]
        if num_channels != self.num_channels:
            raise ValueError("channel dimension mismatch")
        embeddings = self.projection(pixel_values).flatten(2).transpose(1, 2)
        return embeddings


class Dinov2WithRegistersEmbeddings(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.cls_token = nn.Parameter(torch.randn(1, 1, config.hidden_size))
        self.mask_token = nn.Parameter(torch.zeros(1, config.hidden_size))
        self.register_tokens = nn.Parameter(torch.zeros(1, config.num_register_tokens, config.hidden_size))
        self.patch_embeddings = Dinov2WithRegistersPatchEmbeddings(config)
        num_patches = self.patch_embeddings.num_patches
        self.position_embeddings = nn.Parameter(torch.randn(1, num_patches + 1, config.hidden_size))
        self.dropout = nn.Dropout(config.hidden_dropout_prob)
        self.patch_size = config.patch_size
        self.config = config

    def interpolate_pos_encoding(self, embeddings, height, width):
        num_patches = embeddings.shape[1] - 1
        num_positions = self.position_embeddings.shape[1] - 1
        if not torch.jit.is_tracing() and num_patches == num_positions and height == width:
            return self.position_embeddings
        class_pos_embed = self.position_embeddings[:, 0]
        patch_pos_embed = self.position_embeddings[:, 1:]
        dim = embeddings.shape[-1]
        height = height // self.config.patch_size
        width = width // self.config.patch_size
        sqrt_num_positions = int(num_positions ** 0.5)  # torch_int
        patch_pos_embed = patch_pos_embed.reshape(1, sqrt_num_positions, sqrt_num_positions, dim)
        patch_pos_embed = patch_pos_embed.permute(0, 3, 1, 2)
        target_dtype = patch_pos_embed.dtype
        patch_pos_embed = nn.functional.interpolate(
            patch_pos_embed.to(dtype=torch.float32),
            size=(int(height), int(width)),
            mode="bicubic",
            align_corners=False,
            antialias=True,
        ).to(dtype=target_dtype)
        if int(height) != patch_pos_embed.shape[-2] or int(width) != patch_pos_embed.shape[-1]:
            raise ValueError("Width or height does not match with the interpolated position embeddings")
        patch_pos_embed = patch_pos_embed.permute(0, 2, 3, 1).view(1, -1, dim)
        return torch.cat((class_pos_embed.unsqueeze(0), patch_pos_embed), dim=1)

    def forward(self, pixel_values, bool_masked_pos=None):
        batch_size, _, height, width = pixel_values.shape
        target_dtype = self.patch_embeddings.projection.weight.dtype
        embeddings = self.patch_embeddings(pixel_values.to(dtype=target_dtype))
        assert bool_masked_pos is None
        cls_tokens = self.cls_token.expand(batch_size, -1, -1)
        embeddings = torch.cat((cls_tokens, embeddings), dim=1)
        embeddings = embeddings + self.interpolate_pos_encoding(embeddings, height, width)
        embeddings = torch.cat(
            (embeddings[:, :1], self.register_tokens.expand(embeddings.shape[0], -1, -1), embeddings[:, 1:]), dim=1)
        embeddings = self.dropout(embeddings)
        return embeddings


def sdpa_attention_forward(module, query, key, value, attention_mask, dropout=0.0, scaling=None, is_causal=None,
                           **kwargs):
    """transformers.integrations.sdpa_attention.sdpa_attention_forward (no mask, no GQA, not causal)."""
    assert attention_mask is None and not is_causal and dropout == 0.0
    attn_output = sdpa(query, key, value, scale=scaling)  # F.scaled_dot_product_attention(..., scale=scaling)
    attn_output = attn_output.transpose(1, 2).contiguous()
    return attn_output, None


class Dinov2WithRegistersSelfAttention(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.num_attention_heads = config.num_attention_heads
        self.attention_head_size = int(config.hidden_size / config.num_attention_heads)
        self.all_head_size = self.num_attention_heads * self.attention_head_size
        self.dropout_prob = config.attention_probs_dropout_prob
        self.scaling = self.attention_head_size ** -0.5
        self.is_causal = False
        self.query = nn.Linear(config.hidden_size, self.all_head_size, bias=config.qkv_bias)
        self.key = nn.Linear(config.hidden_size, self.all_head_size, bias=config.qkv_bias)
        self.value = nn.Linear(config.hidden_size, self.all_head_size, bias=config.qkv_bias)

    def forward(self, hidden_states):
        batch_size = hidden_states.shape[0]
        new_shape = batch_size, -1, self.num_attention_heads, self.attention_head_size
        key_layer = self.key(hidden_states).view(*new_shape).transpose(1, 2)
        value_layer = self.value(hidden_states).view(*new_shape).transpose(1, 2)
        query_layer = self.query(hidden_states).view(*new_shape).transpose(1, 2)
        context_layer, attention_probs = sdpa_attention_forward(
            self, query_layer, key_layer, value_layer, None, is_causal=self.is_causal, scaling=self.scaling,
            dropout=0.0 if not self.training else self.dropout_prob)
        new_context_layer_shape = context_layer.size()[:-2] + (self.all_head_size,)
        context_layer = context_layer.reshape(new_context_layer_shape)
        return context_layer, attention_probs


class Dinov2WithRegistersSelfOutput(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, hidden_states, input_tensor):
        hidden_states = self.dense(hidden_states)
        hidden_states = self.dropout(hidden_states)
        return hidden_states


class Dinov2WithRegistersAttention(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.attention = Dinov2WithRegistersSelfAttention(config)
        self.output = Dinov2WithRegistersSelfOutput(config)

    def forward(self, hidden_states):
        self_attn_output, _ = self.attention(hidden_states)
        output = self.output(self_attn_output, hidden_states)
        return output


class Dinov2WithRegistersLayerScale(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.lambda1 = nn.Parameter(config.layerscale_value * torch.ones(config.hidden_size))

    def forward(self, hidden_state):
        return hidden_state * self.lambda1


class Dinov2WithRegistersMLP(nn.Module):
    def __init__(self, config):
        super().__init__()
        in_features = out_features = config.hidden_size
        hidden_features = int(config.hidden_size * config.mlp_ratio)
        self.fc1 = nn.Linear(in_features, hidden_features, bias=True)
        assert config.hidden_act == "gelu"
        self.activation = GELUActivation()
        self.fc2 = nn.Linear(hidden_features, out_features, bias=True)

    def forward(self, hidden_state):
        hidden_state = self.fc1(hidden_state)
        hidden_state = self.activation(hidden_state)
        hidden_state = self.fc2(hidden_state)
        return hidden_state


class Dinov2WithRegistersLayer(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.norm1 = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.attention = Dinov2WithRegistersAttention(config)
        self.layer_scale1 = Dinov2WithRegistersLayerScale(config)
        assert config.drop_path_rate == 0.0 and not config.use_swiglu_ffn
        self.drop_path = nn.Identity()
        self.norm2 = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.mlp = Dinov2WithRegistersMLP(config)
        self.layer_scale2 = Dinov2WithRegistersLayerScale(config)

    def forward(self, hidden_states):
        hidden_states_norm = self.norm1(hidden_states)
        self_attention_output = self.attention(hidden_states_norm)
        self_attention_output = self.layer_scale1(self_attention_output)
        hidden_states = self.drop_path(self_attention_output) + hidden_states
        layer_output = self.norm2(hidden_states)
        layer_output = self.mlp(layer_output)
        layer_output = self.layer_scale2(layer_output)
        layer_output = self.drop_path(layer_output) + hidden_states
        return layer_output


class Dinov2WithRegistersEncoder(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.layer = nn.ModuleList([Dinov2WithRegistersLayer(config) for _ in range(config.num_hidden_layers)])

    def forward(self, hidden_states, output_hidden_states=False):
        all_hidden_states = [hidden_states] if output_hidden_states else None
        for layer_module in self.layer:
            hidden_states = layer_module(hidden_states)
            if all_hidden_states:
                all_hidden_states.append(hidden_states)
        return SimpleNamespace(last_hidden_state=hidden_states,
                               hidden_states=tuple(all_hidden_states) if all_hidden_states else None)


class Dinov2WithRegistersModel(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.embeddings = Dinov2WithRegistersEmbeddings(config)
        self.encoder = Dinov2WithRegistersEncoder(config)
        self.layernorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)

    def forward(self, pixel_values=None, bool_masked_pos=None, output_hidden_states=None, **kwargs):
        embedding_output = self.embeddings(pixel_values, bool_masked_pos=bool_masked_pos)
        encoder_outputs = self.encoder(embedding_output, output_hidden_states=output_hidden_states)
        sequence_output = encoder_outputs.last_hidden_state
        sequence_output = self.layernorm(sequence_output)
        pooled_output = sequence_output[:, 0, :]
        return SimpleNamespace(last_hidden_state=sequence_output, pooler_output=pooled_output,
                               hidden_states=encoder_outputs.hidden_states)


# ---- diffusers: autoencoder_rae.py ----

class Dinov2Encoder(nn.Module):
    def __init__(self, hidden_size=768, patch_size=14, image_size=518, num_hidden_layers=12, **kwargs):
        super().__init__()
        num_attention_heads = hidden_size // 64  # all dinov2 variants use head_dim=64
        config = Dinov2WithRegistersConfig(hidden_size=hidden_size, patch_size=patch_size, image_size=image_size,
                                           num_attention_heads=num_attention_heads,
                                           num_hidden_layers=num_hidden_layers)
        self.model = Dinov2WithRegistersModel(config)
        self.model.requires_grad_(False)
        self.model.layernorm.elementwise_affine = False
        self.model.layernorm.weight = None
        self.model.layernorm.bias = None

    def forward(self, images):
        outputs = self.model(images, output_hidden_states=True)
        unused_token_num = 5  # 1 CLS + 4 register tokens
        image_features = outputs.last_hidden_state[:, unused_token_num:]
        return image_features


class ViTMAEIntermediate(nn.Module):
    def __init__(self, hidden_size, intermediate_size, hidden_act="gelu"):
        super().__init__()
        self.dense = nn.Linear(hidden_size, intermediate_size)
        assert hidden_act == "gelu"
        self.intermediate_act_fn = nn.GELU()  # get_activation("gelu")

    def forward(self, hidden_states):
        hidden_states = self.dense(hidden_states)
        hidden_states = self.intermediate_act_fn(hidden_states)
        return hidden_states


class ViTMAEOutput(nn.Module):
    def __init__(self, hidden_size, intermediate_size, hidden_dropout_prob=0.0):
        super().__init__()
        self.dense = nn.Linear(intermediate_size, hidden_size)
        self.dropout = nn.Dropout(hidden_dropout_prob)

    def forward(self, hidden_states, input_tensor):
        hidden_states = self.dense(hidden_states)
        hidden_states = self.dropout(hidden_states)
        hidden_states = hidden_states + input_tensor
        return hidden_states


class ViTMAELayer(nn.Module):
    def __init__(self, *, hidden_size, num_attention_heads, intermediate_size, qkv_bias=True, layer_norm_eps=1e-12,
                 hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, hidden_act="gelu"):
        super().__init__()
        self.attention = Attention(query_dim=hidden_size, heads=num_attention_heads,
                                   dim_head=hidden_size // num_attention_heads, dropout=attention_probs_dropout_prob,
                                   bias=qkv_bias)
        self.intermediate = ViTMAEIntermediate(hidden_size=hidden_size, intermediate_size=intermediate_size,
                                               hidden_act=hidden_act)
        self.output = ViTMAEOutput(hidden_size=hidden_size, intermediate_size=intermediate_size,
                                   hidden_dropout_prob=hidden_dropout_prob)
        self.layernorm_before = nn.LayerNorm(hidden_size, eps=layer_norm_eps)
        self.layernorm_after = nn.LayerNorm(hidden_size, eps=layer_norm_eps)

    def forward(self, hidden_states):
        attention_output = self.attention(self.layernorm_before(hidden_states))
        hidden_states = attention_output + hidden_states
        layer_output = self.layernorm_after(hidden_states)
        layer_output = self.intermediate(layer_output)
        layer_output = self.output(layer_output, hidden_states)
        return layer_output


class RAEDecoder(nn.Module):
    def __init__(self, config, num_patches):
        super().__init__()
        self.decoder_embed = nn.Linear(config.hidden_size, config.decoder_hidden_size, bias=True)
        self.decoder_pos_embed = nn.Parameter(torch.zeros(1, num_patches + 1, config.decoder_hidden_size),
                                              requires_grad=False)
        self.decoder_layers = nn.ModuleList([
            ViTMAELayer(hidden_size=config.decoder_hidden_size, num_attention_heads=config.decoder_num_attention_heads,
                        intermediate_size=config.decoder_intermediate_size, qkv_bias=config.qkv_bias,
                        layer_norm_eps=config.layer_norm_eps, hidden_dropout_prob=config.hidden_dropout_prob,
                        attention_probs_dropout_prob=config.attention_probs_dropout_prob,
                        hidden_act=config.hidden_act)
            for _ in range(config.decoder_num_hidden_layers)])
        self.decoder_norm = nn.LayerNorm(config.decoder_hidden_size, eps=config.layer_norm_eps)
        self.decoder_pred = nn.Linear(config.decoder_hidden_size, config.patch_size ** 2 * config.num_channels,
                                      bias=True)
        self.gradient_checkpointing = False
        self.config = config
        self.num_patches = num_patches
        self._initialize_weights(num_patches)
        self.set_trainable_cls_token()

    def set_trainable_cls_token(self, tensor=None):
        tensor = torch.zeros(1, 1, self.config.decoder_hidden_size) if tensor is None else tensor
        self.trainable_cls_token = nn.Parameter(tensor)

    def _initialize_weights(self, num_patches):
        grid_size = int(num_patches ** 0.5)
        pos_embed = get_2d_sincos_pos_embed(self.decoder_pos_embed.shape[-1], grid_size, cls_token=True,
                                            extra_tokens=1, output_type="pt", device=self.decoder_pos_embed.device)
        self.decoder_pos_embed.data.copy_(pos_embed.unsqueeze(0).to(dtype=self.decoder_pos_embed.dtype))

    def interpolate_latent(self, x):
        b, l, c = x.shape
        if l == self.num_patches:
            return x
        raise NotImplementedError("the token count equals num_patches here")

    def unpatchify(self, patchified_pixel_values, original_image_size=None):
        patch_size, num_channels = self.config.patch_size, self.config.num_channels
        original_image_size = (original_image_size if original_image_size is not None
                               else (self.config.image_size, self.config.image_size))
        original_height, original_width = original_image_size
        num_patches_h = original_height // patch_size
        num_patches_w = original_width // patch_size
        if num_patches_h * num_patches_w != patchified_pixel_values.shape[1]:
            raise ValueError("patch count mismatch")
        batch_size = patchified_pixel_values.shape[0]
        patchified_pixel_values = patchified_pixel_values.reshape(
            batch_size, num_patches_h, num_patches_w, patch_size, patch_size, num_channels)
        patchified_pixel_values = torch.einsum("nhwpqc->nchpwq", patchified_pixel_values)
        pixel_values = patchified_pixel_values.reshape(
            batch_size, num_channels, num_patches_h * patch_size, num_patches_w * patch_size)
        return pixel_values

    def forward(self, hidden_states, *, interpolate_pos_encoding=False, drop_cls_token=False, return_dict=True):
        x = self.decoder_embed(hidden_states)
        assert not drop_cls_token and not interpolate_pos_encoding
        x_ = self.interpolate_latent(x)
        cls_token = self.trainable_cls_token.expand(x_.shape[0], -1, -1)
        x = torch.cat([cls_token, x_], dim=1)
        decoder_pos_embed = self.decoder_pos_embed
        hidden_states = x + decoder_pos_embed.to(device=x.device, dtype=x.dtype)
        for layer_module in self.decoder_layers:
            hidden_states = layer_module(hidden_states)
        hidden_states = self.decoder_norm(hidden_states)
        logits = self.decoder_pred(hidden_states)
        logits = logits[:, 1:, :]
        return (logits,)  # RAEDecoderOutput(logits=logits)


class AutoencoderRAE(nn.Module):
    def __init__(self, encoder_type="dinov2", encoder_hidden_size=64, encoder_patch_size=14,
                 encoder_num_hidden_layers=2, decoder_hidden_size=32, decoder_num_hidden_layers=2,
                 decoder_num_attention_heads=2, decoder_intermediate_size=64, patch_size=4, encoder_input_size=42,
                 image_size=None, num_channels=3, encoder_norm_mean=None, encoder_norm_std=None, latents_mean=None,
                 latents_std=None, noise_tau=0.0, reshape_to_2d=True, use_encoder_loss=False, scaling_factor=1.0):
        super().__init__()
        assert encoder_type == "dinov2"

        def _as_optional_tensor(value):
            if value is None:
                return None
            if isinstance(value, torch.Tensor):
                return value.detach().clone()
            return torch.tensor(value, dtype=torch.float32)

        latents_std_tensor = _as_optional_tensor(latents_std)
        self.scaling_factor = scaling_factor  # self.config.scaling_factor
        self.encoder_input_size = encoder_input_size
        self.noise_tau = float(noise_tau)
        self.reshape_to_2d = bool(reshape_to_2d)
        self.use_encoder_loss = bool(use_encoder_loss)
        encoder_patch_size = int(encoder_patch_size)
        self.encoder = Dinov2Encoder(hidden_size=encoder_hidden_size, patch_size=encoder_patch_size,
                                     num_hidden_layers=encoder_num_hidden_layers)
        num_patches = (self.encoder_input_size // encoder_patch_size) ** 2
        decoder_patch_size = int(patch_size)
        grid = int(sqrt(num_patches))
        derived_image_size = decoder_patch_size * grid
        image_size = derived_image_size if image_size is None else int(image_size)
        if encoder_norm_mean is None:
            encoder_norm_mean = [0.485, 0.456, 0.406]
        if encoder_norm_std is None:
            encoder_norm_std = [0.229, 0.224, 0.225]
        encoder_mean_tensor = torch.tensor(encoder_norm_mean, dtype=torch.float32).view(1, 3, 1, 1)
        encoder_std_tensor = torch.tensor(encoder_norm_std, dtype=torch.float32).view(1, 3, 1, 1)
        self.register_buffer("encoder_mean", encoder_mean_tensor, persistent=True)
        self.register_buffer("encoder_std", encoder_std_tensor, persistent=True)
        latents_mean_tensor = _as_optional_tensor(latents_mean)
        if latents_mean_tensor is None:
            latents_mean_tensor = torch.zeros(1)
        self.register_buffer("_latents_mean", latents_mean_tensor, persistent=True)
        if latents_std_tensor is None:
            latents_std_tensor = torch.ones(1)
        self.register_buffer("_latents_std", latents_std_tensor, persistent=True)
        decoder_config = SimpleNamespace(
            hidden_size=int(encoder_hidden_size), decoder_hidden_size=int(decoder_hidden_size),
            decoder_num_hidden_layers=int(decoder_num_hidden_layers),
            decoder_num_attention_heads=int(decoder_num_attention_heads),
            decoder_intermediate_size=int(decoder_intermediate_size), patch_size=int(decoder_patch_size),
            image_size=int(image_size), num_channels=int(num_channels), qkv_bias=True, hidden_dropout_prob=0.0,
            attention_probs_dropout_prob=0.0, layer_norm_eps=1e-12, hidden_act="gelu")
        self.decoder = RAEDecoder(decoder_config, num_patches=int(num_patches))
        self.num_patches = int(num_patches)
        self.decoder_patch_size = int(decoder_patch_size)
        self.decoder_image_size = int(image_size)
        self.use_slicing = False

    def _maybe_resize_and_normalize(self, x):
        _, _, h, w = x.shape
        if h != self.encoder_input_size or w != self.encoder_input_size:
            x = F.interpolate(x, size=(self.encoder_input_size, self.encoder_input_size), mode="bicubic",
                              align_corners=False)
        mean = self.encoder_mean.to(device=x.device, dtype=x.dtype)
        std = self.encoder_std.to(device=x.device, dtype=x.dtype)
        return (x - mean) / std

    def _maybe_denormalize_image(self, x):
        mean = self.encoder_mean.to(device=x.device, dtype=x.dtype)
        std = self.encoder_std.to(device=x.device, dtype=x.dtype)
        return x * std + mean

    def _maybe_normalize_latents(self, z):
        latents_mean = self._latents_mean.to(device=z.device, dtype=z.dtype)
        latents_std = self._latents_std.to(device=z.device, dtype=z.dtype)
        return (z - latents_mean) / (latents_std + 1e-5)

    def _maybe_denormalize_latents(self, z):
        latents_mean = self._latents_mean.to(device=z.device, dtype=z.dtype)
        latents_std = self._latents_std.to(device=z.device, dtype=z.dtype)
        return z * (latents_std + 1e-5) + latents_mean

    def _encode(self, x):
        x = self._maybe_resize_and_normalize(x)
        tokens = self.encoder(x)  # (B, N, C)
        # eval: no _noising
        if self.reshape_to_2d:
            b, n, c = tokens.shape
            side = int(sqrt(n))
            z = tokens.transpose(1, 2).contiguous().view(b, c, side, side)  # (B, C, h, w)
        else:
            z = tokens
        z = self._maybe_normalize_latents(z)
        if self.scaling_factor != 1.0:
            z = z * self.scaling_factor
        return z

    def encode(self, x, return_dict=True):
        latents = self._encode(x)  # no slicing
        return (latents,)

    def _decode(self, z):
        if self.scaling_factor != 1.0:
            z = z / self.scaling_factor
        z = self._maybe_denormalize_latents(z)
        if self.reshape_to_2d:
            b, c, h, w = z.shape
            tokens = z.view(b, c, h * w).transpose(1, 2).contiguous()  # (B, N, C)
        else:
            tokens = z
        logits = self.decoder(tokens, return_dict=True)[0]  # .logits
        x_rec = self.decoder.unpatchify(logits)
        x_rec = self._maybe_denormalize_image(x_rec)
        return x_rec

    def decode(self, z, return_dict=True):
        decoded = self._decode(z)  # no slicing
        return (decoded,)

    def forward(self, sample, return_dict=True):
        latents = self.encode(sample, return_dict=False)[0]
        decoded = self.decode(latents, return_dict=False)[0]
        return decoded  # DecoderOutput(sample=decoded).sample


def build():
    g = torch.Generator().manual_seed(3)  # a checkpoint's latent statistics, [C, h, w]
    latents_mean = 0.5 * torch.randn((64, 3, 3), generator=g)
    latents_std = 0.5 + torch.rand((64, 3, 3), generator=g)
    return AutoencoderRAE(latents_mean=latents_mean, latents_std=latents_std)


if __name__ == "__main__":
    capture_once(
        "rae", build, lambda g: {"sample": torch.rand((1, 3, 40, 48), generator=g)}, sys.argv[1],
        dict(library_source="replica of huggingface/diffusers autoencoder_rae.py@03e757ca7386 (dit.py's Attention, "
                            "get_2d_sincos_pos_embed) and transformers modeling_dinov2_with_registers.py@015e68769f98 "
                            "(torch 1.13)",
             note="AutoencoderRAE.forward at a tiny config: bicubic resize 40x48 -> 42, ImageNet normalisation, a "
                  "DINOv2-with-registers ViT (64 wide, patch 14, 2 layers, the 37x37 position table resampled to 3x3 "
                  "by antialiased bicubic), registers and CLS dropped, tokens as a [64, 3, 3] map normalised by "
                  "per-element statistics; then de-normalised, a 2-layer ViT-MAE decoder (32 wide), einsum "
                  "unpatchify to 12x12, de-normalised image"))
