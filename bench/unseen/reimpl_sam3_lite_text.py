"""Faithful torch 1.13 reimplementation of transformers' "sam3_lite_text_text_model" (a case of capture_reimpl.py; its
docstring says how a case is built and captured): Sam3LiteTextTextModel, the MobileCLIP MCT text encoder of
EfficientSAM3 LiteText, as AutoModel.from_config builds it for that model type and as model(input_ids=ids) runs it.

It follows huggingface/transformers src/transformers/models/sam3_lite_text/modeling_sam3_lite_text.py at commit
694f6f0fc741cc93e02a5493d2b48fb3b1482418 (the text model's classes read the same at 1bc9f9e611bea53cae55bd341351a0054305129c)
and configuration_sam3_lite_text.py at commit 88e02afaa248fe5c660608eea9f0a4c364a6d085 (Sam3LiteTextTextConfig).
Sizes: the config's defaults (hidden_act gelu, layer_norm_eps 1e-5, projection_dim 512, use_repmixer_blocks True,
layer_scale_init_value 1e-5, repmixer_kernel_size 11, attention_dropout 0) but hidden_size 64, num_attention_heads 4,
num_hidden_layers 2, intermediate_size 96, vocab_size 128, max_position_embeddings 64; 12 ids (seq_len 12).
With use_repmixer_blocks the layers at positions {0, num_hidden_layers - 1} are RepMixer blocks, so at 2 layers both
are RepMixer blocks and no attention layer is built; the extra case sam3_lite_text_text_model_l4 (4 layers: RepMixer,
attention, attention, RepMixer) shows the attention layers too.

What it shows:
  - a learned position table [1, 1, 64, 64] (max_position_embeddings × hidden) resized to the sequence length by
    F.interpolate(table, size=(seq_len, hidden), mode="bilinear") (align_corners not passed: None, i.e. False;
    antialias False): along the position axis 64 → 12 with source coordinate (i + 0.5)·64/12 − 0.5 clamped at 0,
    linear between the two neighbouring rows; along the hidden axis 64 → 64 the identity. The result is reshaped to
    [1, 12, 64] and added to the token embedding rows;
  - RepMixer blocks on [B, C, 1, S] (hidden_states.transpose(1, 2).unsqueeze(2)): token mixer
    x + layer_scale·((BN_conv(dwconv_1x11(x)) + BN_skip(x)) − BN_ref(x)), layer_scale [C, 1, 1]; then a
    convolutional feed-forward x + layer_scale·fc2(gelu(fc1(BN(dwconv_1x11(x))))) with 1×1 convs fc1/fc2; the block
    hands back squeeze(2).transpose(1, 2). Depthwise convs: kernel (1, 11), padding (0, 5), groups C, no bias.
    BatchNorm2d in eval with the running stats from_config leaves (mean 0, var 1, eps 1e-5);
  - (4-layer case) CLIP-style pre-norm encoder layers: LayerNorm, k/v/q/out projections with biases, eager
    attention (scores·head_dim^-½, no mask: create_bidirectional_mask skips it for unpadded ids, f32 softmax),
    residual; LayerNorm, fc1, exact GELU, fc2, residual;
  - a final LayerNorm gives last_hidden_state; the EOT-pooled row (argmax of the ids) goes through a bias-free
    projection [512, 64] as pooler_output.
"""
import torch
from torch import nn
from torch.nn import functional as F


class Sam3LiteTextTextConfig:
    vocab_size, hidden_size, intermediate_size, projection_dim = 128, 64, 96, 512
    num_hidden_layers, num_attention_heads, max_position_embeddings = 2, 4, 64
    hidden_act, layer_norm_eps, attention_dropout = "gelu", 1e-5, 0.0
    use_repmixer_blocks, layer_scale_init_value, repmixer_kernel_size = True, 1e-5, 11
    seq_len = 12


class Sam3LiteTextTextConfigL4(Sam3LiteTextTextConfig):
    num_hidden_layers = 4


class GELUActivation(nn.Module):
    """ACT2FN["gelu"]: nn.functional.gelu (exact erf form), a module call of its own."""

    def forward(self, input):
        return F.gelu(input)


class Sam3LiteTextTextPositionEmbedding(nn.Module):
    """Learnable positional embedding with bilinear interpolation for variable sequence lengths."""

    def __init__(self, max_position_embeddings, hidden_size):
        super().__init__()
        self.position_embedding = nn.Parameter(torch.empty(1, 1, max_position_embeddings, hidden_size))

    def forward(self, seq_len):
        position_embedding = self.position_embedding
        if seq_len != position_embedding.shape[2]:
            position_embedding = F.interpolate(
                position_embedding,
                size=(seq_len, position_embedding.shape[-1]),
                mode="bilinear",
            )
        return position_embedding.reshape(1, seq_len, -1)


class Sam3LiteTextMobileOneBlock(nn.Module):
    """Depthwise conv branch with batch norm on the skip path and after the conv (MobileOne-style)."""

    def __init__(self, hidden_size, kernel_size=3):
        super().__init__()
        self.batchnorm_skip = nn.BatchNorm2d(hidden_size)
        self.conv = nn.Conv2d(hidden_size, hidden_size, kernel_size=(1, kernel_size), stride=1,
                              padding=(0, kernel_size // 2), groups=hidden_size, bias=False)
        self.batchnorm_conv = nn.BatchNorm2d(hidden_size)

    def forward(self, hidden_states):
        residual = hidden_states
        hidden_states = self.batchnorm_conv(self.conv(hidden_states))
        hidden_states = hidden_states + self.batchnorm_skip(residual)
        return hidden_states


class Sam3LiteTextConvMLP(nn.Module):
    """Pointwise MLP using 1×1 convolutions, compatible with 4-D (B, C, H, W) feature maps."""

    def __init__(self, config):
        super().__init__()
        self.activation_fn = GELUActivation()
        self.fc1 = nn.Conv2d(config.hidden_size, config.intermediate_size, kernel_size=1)
        self.fc2 = nn.Conv2d(config.intermediate_size, config.hidden_size, kernel_size=1)

    def forward(self, hidden_states):
        hidden_states = self.fc1(hidden_states)
        hidden_states = self.activation_fn(hidden_states)
        hidden_states = self.fc2(hidden_states)
        return hidden_states


class Sam3LiteTextConvolutionalFeedForward(nn.Module):
    """Convolutional feed-forward network: depthwise conv + two pointwise projections."""

    def __init__(self, config):
        super().__init__()
        self.depthwise_conv = nn.Conv2d(config.hidden_size, config.hidden_size,
                                        kernel_size=(1, config.repmixer_kernel_size),
                                        padding=(0, config.repmixer_kernel_size // 2),
                                        groups=config.hidden_size, bias=False)
        self.depthwise_batchnorm = nn.BatchNorm2d(config.hidden_size)
        self.mlp = Sam3LiteTextConvMLP(config)

    def forward(self, hidden_states):
        hidden_states = self.depthwise_batchnorm(self.depthwise_conv(hidden_states))
        return self.mlp(hidden_states)


class Sam3LiteTextLayerScaledResidual(nn.Module):
    """Common layer-scale residual pattern shared by the RepMixer and feed-forward branches."""

    def __init__(self, hidden_size, layer_scale_init_value):
        super().__init__()
        self.layer_scale = nn.Parameter(layer_scale_init_value * torch.ones((hidden_size, 1, 1)), requires_grad=True)

    def layer_scale_residual(self, hidden_states, update):
        return hidden_states + self.layer_scale * update


class Sam3LiteTextRepMixer(Sam3LiteTextLayerScaledResidual):
    """Re-parameterisable depthwise-conv token mixer operating on 1D sequence data."""

    def __init__(self, config):
        super().__init__(config.hidden_size, config.layer_scale_init_value)
        self.reference_batchnorm = nn.BatchNorm2d(config.hidden_size)
        self.mixer = Sam3LiteTextMobileOneBlock(config.hidden_size, kernel_size=config.repmixer_kernel_size)

    def forward(self, hidden_states):
        return self.layer_scale_residual(
            hidden_states, self.mixer(hidden_states) - self.reference_batchnorm(hidden_states)
        )


class Sam3LiteTextRepMixerBlock(Sam3LiteTextLayerScaledResidual):
    """Token-mixing RepMixer plus a convolutional feed-forward path, each with layer scale."""

    def __init__(self, config):
        super().__init__(config.hidden_size, config.layer_scale_init_value)
        self.token_mixer = Sam3LiteTextRepMixer(config)
        self.conv_feed_forward = Sam3LiteTextConvolutionalFeedForward(config)

    def forward(self, hidden_states, attention_mask=None):
        hidden_states = hidden_states.transpose(1, 2).unsqueeze(2)
        hidden_states = self.token_mixer(hidden_states)
        hidden_states = self.layer_scale_residual(hidden_states, self.conv_feed_forward(hidden_states))
        return hidden_states.squeeze(2).transpose(1, 2)


def eager_attention_forward(module, query, key, value, attention_mask, scaling, dropout=0.0, **kwargs):
    attn_weights = torch.matmul(query, key.transpose(-1, -2)) * scaling
    if attention_mask is not None:
        attn_weights = attn_weights + attention_mask

    attn_weights = nn.functional.softmax(attn_weights, dim=-1, dtype=torch.float32).to(query.dtype)
    attn_weights = nn.functional.dropout(attn_weights, p=dropout, training=module.training)

    attn_output = torch.matmul(attn_weights, value)
    attn_output = attn_output.transpose(1, 2).contiguous()
    return attn_output, attn_weights


class Sam3LiteTextTextAttention(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.embed_dim = config.hidden_size
        self.num_heads = config.num_attention_heads
        self.head_dim = self.embed_dim // self.num_heads
        self.scale = self.head_dim ** -0.5
        self.dropout = config.attention_dropout
        self.is_causal = False
        self.k_proj = nn.Linear(self.embed_dim, self.embed_dim)
        self.v_proj = nn.Linear(self.embed_dim, self.embed_dim)
        self.q_proj = nn.Linear(self.embed_dim, self.embed_dim)
        self.out_proj = nn.Linear(self.embed_dim, self.embed_dim)

    def forward(self, hidden_states, attention_mask=None):
        input_shape = hidden_states.shape[:-1]
        hidden_shape = (*input_shape, -1, self.head_dim)
        queries = self.q_proj(hidden_states).view(hidden_shape).transpose(1, 2)
        keys = self.k_proj(hidden_states).view(hidden_shape).transpose(1, 2)
        values = self.v_proj(hidden_states).view(hidden_shape).transpose(1, 2)
        attn_output, attn_weights = eager_attention_forward(
            self, queries, keys, values, attention_mask, is_causal=self.is_causal, scaling=self.scale,
            dropout=0.0 if not self.training else self.dropout,
        )
        attn_output = attn_output.reshape(*input_shape, -1).contiguous()
        attn_output = self.out_proj(attn_output)
        return attn_output, attn_weights


class Sam3LiteTextTextMLP(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.activation_fn = GELUActivation()
        self.fc1 = nn.Linear(config.hidden_size, config.intermediate_size)
        self.fc2 = nn.Linear(config.intermediate_size, config.hidden_size)

    def forward(self, hidden_states):
        hidden_states = self.fc1(hidden_states)
        hidden_states = self.activation_fn(hidden_states)
        hidden_states = self.fc2(hidden_states)
        return hidden_states


class Sam3LiteTextTextEncoderLayer(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.embed_dim = config.hidden_size
        self.layer_norm1 = nn.LayerNorm(self.embed_dim, eps=config.layer_norm_eps)
        self.self_attn = Sam3LiteTextTextAttention(config)
        self.layer_norm2 = nn.LayerNorm(self.embed_dim, eps=config.layer_norm_eps)
        self.mlp = Sam3LiteTextTextMLP(config)

    def forward(self, hidden_states, attention_mask=None):
        residual = hidden_states
        hidden_states = self.layer_norm1(hidden_states)
        hidden_states, _ = self.self_attn(hidden_states=hidden_states, attention_mask=attention_mask)
        hidden_states = residual + hidden_states

        residual = hidden_states
        hidden_states = self.layer_norm2(hidden_states)
        hidden_states = self.mlp(hidden_states)
        hidden_states = residual + hidden_states
        return hidden_states


class Sam3LiteTextTextEmbeddings(nn.Module):
    """Token embedding + interpolatable positional embedding for the text encoder."""

    def __init__(self, config):
        super().__init__()
        self.token_embedding = nn.Embedding(config.vocab_size, config.hidden_size)
        self.position_embedding = Sam3LiteTextTextPositionEmbedding(config.max_position_embeddings, config.hidden_size)

    def forward(self, input_ids):
        hidden_states = self.token_embedding(input_ids)
        hidden_states = hidden_states + self.position_embedding(input_ids.shape[1]).to(hidden_states.dtype)
        return hidden_states


class Sam3LiteTextTextModel(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.embeddings = Sam3LiteTextTextEmbeddings(config)
        repmixer_positions = {0, config.num_hidden_layers - 1} if config.use_repmixer_blocks else set()
        self.layers = nn.ModuleList(
            [
                Sam3LiteTextRepMixerBlock(config) if i in repmixer_positions else Sam3LiteTextTextEncoderLayer(config)
                for i in range(config.num_hidden_layers)
            ]
        )
        self.final_layer_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.projection = nn.Linear(config.hidden_size, config.projection_dim, bias=False)

    def forward(self, input_ids=None, attention_mask=None):
        hidden_states = self.embeddings(input_ids)
        # create_bidirectional_mask(config, hidden_states, None): no padding, the eager mask is skipped (None)
        attention_mask = None

        for layer in self.layers:
            hidden_states = layer(hidden_states, attention_mask=attention_mask)

        hidden_states = self.final_layer_norm(hidden_states)

        pooled = hidden_states[torch.arange(hidden_states.shape[0], device=hidden_states.device), input_ids.argmax(dim=-1)]
        pooled = self.projection(pooled)
        return {"last_hidden_state": hidden_states, "pooler_output": pooled}


CASES = {"sam3_lite_text_text_model": (Sam3LiteTextTextModel, Sam3LiteTextTextConfig),
         "sam3_lite_text_text_model_l4": (Sam3LiteTextTextModel, Sam3LiteTextTextConfigL4)}
