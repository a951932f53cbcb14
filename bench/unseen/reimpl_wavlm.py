"""WavLM (transformers' src/transformers/models/wavlm/modeling_wavlm.py: WavLMModel's eager path), reimplemented for
torch 1.13 and captured small in f32 on CPU: the feature encoder (a grouped-norm conv, a plain conv), the feature
projection (LayerNorm, Linear), and the encoder: a positional convolution wrapped by torch.nn.utils.weight_norm over
dim 2 (a gain per tap: the hook makes the weight before each call), post-norm layers whose attention is WavLM's
gated relative position bias. The attention module calls F.multi_head_attention_forward over its q_proj, k_proj,
v_proj and out_proj weights (sub-modules it never calls); the first layer makes the bias from T5-style bidirectional
buckets through rel_attn_embed and hands it to the next; each layer gates it per head and query by σ of the sums
of gru_rel_pos_linear's two halves over each head's slice of the input, σ(a)·(σ(b)·c − 1) + 2. The same module
tree, parameter names and shapes, and arithmetic line for line; 16 wide, 2 heads, 2 layers, 16 buckets, 400 samples.

usage: /usr/bin/python3 bench/unseen/reimpl_wavlm.py OUTDIR   (writes OUTDIR/wavlm-f32.npz: fixtures/unseen/wavlm)
"""
import math
import os
import sys

import torch
from torch import nn

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "capture"))
import zflow_capture  # noqa: E402
from weights import randomize  # noqa: E402


class WavLMGroupNormConvLayer(nn.Module):
    def __init__(self, cin, cout, k, s):
        super().__init__()
        self.conv = nn.Conv1d(cin, cout, kernel_size=k, stride=s, bias=False)
        self.activation = nn.GELU()
        self.layer_norm = nn.GroupNorm(num_groups=cout, num_channels=cout, affine=True)

    def forward(self, hidden_states):
        return self.activation(self.layer_norm(self.conv(hidden_states)))


class WavLMNoLayerNormConvLayer(nn.Module):
    def __init__(self, cin, cout, k, s):
        super().__init__()
        self.conv = nn.Conv1d(cin, cout, kernel_size=k, stride=s, bias=False)
        self.activation = nn.GELU()

    def forward(self, hidden_states):
        return self.activation(self.conv(hidden_states))


class WavLMFeatureEncoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv_layers = nn.ModuleList([WavLMGroupNormConvLayer(1, 8, 10, 5), WavLMNoLayerNormConvLayer(8, 8, 3, 2)])

    def forward(self, input_values):
        hidden_states = input_values[:, None]
        for conv_layer in self.conv_layers:
            hidden_states = conv_layer(hidden_states)
        return hidden_states


class WavLMFeatureProjection(nn.Module):
    def __init__(self, conv_dim, hidden):
        super().__init__()
        self.layer_norm = nn.LayerNorm(conv_dim, eps=1e-5)
        self.projection = nn.Linear(conv_dim, hidden)
        self.dropout = nn.Dropout(0.0)

    def forward(self, hidden_states):
        norm_hidden_states = self.layer_norm(hidden_states)
        hidden_states = self.projection(norm_hidden_states)
        return self.dropout(hidden_states), norm_hidden_states


class WavLMSamePadLayer(nn.Module):
    def __init__(self, k):
        super().__init__()
        self.num_pad_remove = 1 if k % 2 == 0 else 0

    def forward(self, hidden_states):
        if self.num_pad_remove > 0:
            hidden_states = hidden_states[:, :, : -self.num_pad_remove]
        return hidden_states


class WavLMPositionalConvEmbedding(nn.Module):
    def __init__(self, hidden, k, groups):
        super().__init__()
        self.conv = nn.Conv1d(hidden, hidden, kernel_size=k, padding=k // 2, groups=groups)
        self.conv = nn.utils.weight_norm(self.conv, name="weight", dim=2)
        self.padding = WavLMSamePadLayer(k)
        self.activation = nn.GELU()

    def forward(self, hidden_states):
        hidden_states = hidden_states.transpose(1, 2)
        hidden_states = self.conv(hidden_states)
        hidden_states = self.padding(hidden_states)
        hidden_states = self.activation(hidden_states)
        return hidden_states.transpose(1, 2)


class WavLMAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, num_buckets=320, max_distance=800, has_relative_position_bias=True):
        super().__init__()
        self.embed_dim, self.num_heads = embed_dim, num_heads
        self.head_dim = embed_dim // num_heads
        self.k_proj = nn.Linear(embed_dim, embed_dim)
        self.v_proj = nn.Linear(embed_dim, embed_dim)
        self.q_proj = nn.Linear(embed_dim, embed_dim)
        self.out_proj = nn.Linear(embed_dim, embed_dim)
        self.num_buckets, self.max_distance = num_buckets, max_distance
        self.gru_rel_pos_const = nn.Parameter(torch.ones(1, self.num_heads, 1, 1))
        self.gru_rel_pos_linear = nn.Linear(self.head_dim, 8)
        if has_relative_position_bias:
            self.rel_attn_embed = nn.Embedding(self.num_buckets, self.num_heads)

    def forward(self, hidden_states, attention_mask=None, position_bias=None, output_attentions=False, index=0):
        bsz, tgt_len, _ = hidden_states.size()
        if position_bias is None:
            position_bias = self.compute_bias(tgt_len, tgt_len)
            position_bias = position_bias.unsqueeze(0).repeat(bsz, 1, 1, 1).view(bsz * self.num_heads, tgt_len, tgt_len)
        gated_hidden_states = hidden_states.view(hidden_states.shape[:-1] + (self.num_heads, -1))
        gated_hidden_states = gated_hidden_states.permute(0, 2, 1, 3)
        relative_position_proj = self.gru_rel_pos_linear(gated_hidden_states)
        relative_position_proj = relative_position_proj.view(gated_hidden_states.shape[:-1] + (2, 4)).sum(-1)
        gate_a, gate_b = torch.sigmoid(relative_position_proj).chunk(2, dim=-1)
        gate_output = gate_a * (gate_b * self.gru_rel_pos_const - 1.0) + 2.0
        gated_position_bias = gate_output.view(bsz * self.num_heads, -1, 1) * position_bias
        gated_position_bias = gated_position_bias.view((-1, tgt_len, tgt_len))
        attn_output, attn_weights = self.torch_multi_head_self_attention(hidden_states, attention_mask, gated_position_bias, output_attentions)
        return attn_output, attn_weights, position_bias

    def torch_multi_head_self_attention(self, hidden_states, attention_mask, gated_position_bias, output_attentions):
        query = key = value = hidden_states.transpose(0, 1)
        key_padding_mask = attention_mask.ne(1) if attention_mask is not None else None
        attn_output, attn_weights = nn.functional.multi_head_attention_forward(
            query, key, value, self.embed_dim, self.num_heads, torch.empty([0]),
            torch.cat((self.q_proj.bias, self.k_proj.bias, self.v_proj.bias)), None, None, False, 0.0,
            self.out_proj.weight, self.out_proj.bias, self.training, key_padding_mask, output_attentions,
            gated_position_bias, use_separate_proj_weight=True, q_proj_weight=self.q_proj.weight,
            k_proj_weight=self.k_proj.weight, v_proj_weight=self.v_proj.weight)
        return attn_output.transpose(0, 1), attn_weights

    def compute_bias(self, query_length, key_length):
        context_position = torch.arange(query_length, dtype=torch.long)[:, None]
        memory_position = torch.arange(key_length, dtype=torch.long)[None, :]
        relative_position = memory_position - context_position
        relative_position_bucket = self._relative_positions_bucket(relative_position)
        values = self.rel_attn_embed(relative_position_bucket)
        return values.permute([2, 0, 1])

    def _relative_positions_bucket(self, relative_positions):
        num_buckets = self.num_buckets // 2
        relative_buckets = (relative_positions > 0).to(torch.long) * num_buckets
        relative_positions = torch.abs(relative_positions)
        max_exact = num_buckets // 2
        is_small = relative_positions < max_exact
        relative_positions_if_large = torch.log(relative_positions.float() / max_exact)
        relative_positions_if_large = relative_positions_if_large / math.log(self.max_distance / max_exact)
        relative_positions_if_large = relative_positions_if_large * (num_buckets - max_exact)
        relative_position_if_large = (max_exact + relative_positions_if_large).to(torch.long)
        relative_position_if_large = torch.min(relative_position_if_large, torch.full_like(relative_position_if_large, num_buckets - 1))
        relative_buckets += torch.where(is_small, relative_positions, relative_position_if_large)
        return relative_buckets


class WavLMFeedForward(nn.Module):
    def __init__(self, hidden, inter):
        super().__init__()
        self.intermediate_dropout = nn.Dropout(0.0)
        self.intermediate_dense = nn.Linear(hidden, inter)
        self.intermediate_act_fn = nn.GELU()
        self.output_dense = nn.Linear(inter, hidden)
        self.output_dropout = nn.Dropout(0.0)

    def forward(self, hidden_states):
        hidden_states = self.intermediate_dropout(self.intermediate_act_fn(self.intermediate_dense(hidden_states)))
        return self.output_dropout(self.output_dense(hidden_states))


class WavLMEncoderLayer(nn.Module):
    def __init__(self, hidden, heads, inter, buckets, dist, has_rel):
        super().__init__()
        self.attention = WavLMAttention(hidden, heads, buckets, dist, has_rel)
        self.dropout = nn.Dropout(0.0)
        self.layer_norm = nn.LayerNorm(hidden, eps=1e-5)
        self.feed_forward = WavLMFeedForward(hidden, inter)
        self.final_layer_norm = nn.LayerNorm(hidden, eps=1e-5)

    def forward(self, hidden_states, attention_mask=None, position_bias=None, output_attentions=False, index=0):
        attn_residual = hidden_states
        hidden_states, attn_weights, position_bias = self.attention(hidden_states, attention_mask=attention_mask, position_bias=position_bias, output_attentions=output_attentions, index=index)
        hidden_states = self.dropout(hidden_states)
        hidden_states = attn_residual + hidden_states
        hidden_states = self.layer_norm(hidden_states)
        hidden_states = hidden_states + self.feed_forward(hidden_states)
        hidden_states = self.final_layer_norm(hidden_states)
        return hidden_states, position_bias


class WavLMEncoder(nn.Module):
    def __init__(self, hidden=16, heads=2, inter=32, layers=2, buckets=16, dist=40):
        super().__init__()
        self.pos_conv_embed = WavLMPositionalConvEmbedding(hidden, 4, 2)
        self.layer_norm = nn.LayerNorm(hidden, eps=1e-5)
        self.dropout = nn.Dropout(0.0)
        self.layers = nn.ModuleList([WavLMEncoderLayer(hidden, heads, inter, buckets, dist, i == 0) for i in range(layers)])

    def forward(self, hidden_states):
        position_embeddings = self.pos_conv_embed(hidden_states)
        hidden_states = hidden_states + position_embeddings
        hidden_states = self.layer_norm(hidden_states)
        hidden_states = self.dropout(hidden_states)
        position_bias = None
        for i, layer in enumerate(self.layers):
            hidden_states, position_bias = layer(hidden_states, position_bias=position_bias, index=i)
        return hidden_states


class WavLMModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.feature_extractor = WavLMFeatureEncoder()
        self.feature_projection = WavLMFeatureProjection(8, 16)
        self.encoder = WavLMEncoder()

    def forward(self, input_values):
        extract_features = self.feature_extractor(input_values)
        extract_features = extract_features.transpose(1, 2)
        hidden_states, extract_features = self.feature_projection(extract_features)
        return self.encoder(hidden_states)


if __name__ == "__main__":
    torch.manual_seed(0)
    model = WavLMModel()
    randomize(model, torch.Generator().manual_seed(1))
    model.eval()
    x = torch.randn(1, 400, generator=torch.Generator().manual_seed(2))
    path = os.path.join(sys.argv[1], "wavlm-f32.npz")
    prod = {"case": "wavlm", "library": "transformers (reimplemented, torch 1.13)", "model_type": "wavlm"}
    with zflow_capture.Capture(model, name="encoder", path=path, producer=prod) as cap:
        cap.input("input_values", x)
        with torch.no_grad():
            h = model(x)
        cap.output("last_hidden_state", h)
    print(f"wavlm: {cap.summary['calls']} calls -> {path} ({os.path.getsize(path)} bytes)")
