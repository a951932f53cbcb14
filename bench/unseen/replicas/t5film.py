"""Spectrogram Diffusion's FiLM-conditioned T5 decoder (T5FilmDecoder, google/music-spectrogram-diffusion), reimplemented
for torch 1.13 (no diffusers here), captured small in f32 on CPU.

Follows huggingface/diffusers src/diffusers/models/transformers/t5_film_transformer.py at
049ca3822f9eb3621c96c11bba58b8e579cb3cc1 (T5FilmDecoder, DecoderLayer, T5LayerSelfAttentionCond,
T5LayerCrossAttention, T5LayerFFCond, T5DenseGatedActDense, T5LayerNorm, NewGELUActivation, T5FiLMLayer) with the
parts it imports: embeddings.py's get_timestep_embedding (run.py's copy: flip_sin_to_cos False, shift 1, here
max_period = max_decoder_noise_time) and attention_processor.py at 001d4da0eb5809c779120c51f74ef73d6078b08c
(Attention(query_dim, heads, dim_head, out_bias=False, scale_qk=False): bias-free to_q/to_k/to_v/to_out[0] and
to_out[1] Dropout; scale_qk=False makes self.scale 1.0 and makes Attention pick AttnProcessor, never
AttnProcessor2_0, whatever the torch: prepare_attention_mask (repeat_interleave over heads to [B·H, Lq, Lk]),
head_to_batch_dim, get_attention_scores (torch.baddbmm(empty, q, kᵀ, beta=0, alpha=1) without a mask,
baddbmm(mask, q, kᵀ, beta=1, alpha=1) with one, softmax), bmm, batch_to_head_dim, to_out). The same module tree,
parameter names and shapes, call boundaries, and arithmetic line for line; nothing stands in for anything.

The constructs it shows: the noise time (in [0, 1)) ×2000 through a sinusoidal embedding with max_period 2000,
then a bias-free Linear-SiLU-Linear-SiLU to 4·d_model, used as a FiLM condition (x·(1 + scale) + shift from one
bias-free Linear chunked in two) after the pre-norm of the self-attention and of the feed-forward in every layer;
a learned absolute position table added to a bias-free projection of the noisy mel frames; T5 RMS norms (f32
variance, no mean, no bias); unscaled attention (no 1/√d); cross-attention over two concatenated encodings (the
notes encoder's and the continuous encoder's outputs) masked by an additive 0 / −1e10 mask made from their bool
masks by a product with an all-ones decoder mask, torch.where and a concatenation along the keys; a gated
tanh-GELU feed-forward (gelu(wi_0 x) · wi_1 x → wo); ungated residuals; a final RMS norm and bias-free spec_out.

Tiny config: T5FilmDecoder(input_dims=8, targets_length=16, max_decoder_noise_time=2000.0, d_model=32, num_layers=2,
num_heads=2, d_kv=16, d_ff=64, dropout_rate=0.1) (upstream 128 mel bins, 256 frames, d_model 768, 12 layers,
12 heads of 64, d_ff 2048; dropout is inert in eval). Inputs as SpectrogramDiffusionPipeline.decode passes them:
encodings_and_masks = [(notes encoding [1, 12, 32], notes mask bool [1, 12] = input_tokens > 0, here the last 3
padding), (continuous encoding [1, 16, 32], continuous mask bool [1, 16] all True: a chunk after the first, whose
context the pipeline marks full)], the two encodings drawn (the encoders are other models); decoder_input_tokens
the noisy mel chunk x [1, 16, 8]; decoder_noise_time = (t / num_train_timesteps)[None] * ones(B), f32, with t the
DDPM timestep round(σ·999) (an int64 0-d tensor, as the scheduler's timesteps are), so t / 1000 is f32 in every
dtype run and the decoder casts its embedding to its own dtype.

Called per step in its pipeline (the DDPM loop over scheduler.timesteps, the encodings made once per chunk): this
capture runs run.py's 3-step loop, the flow-matching Euler steps standing in for DDPM's (the output, the
predicted noise, taken as the velocity as is).

usage: /usr/bin/python3 bench/unseen/replicas/t5film.py OUTDIR
REPLICA_DTYPE=bf16 [REPLICA_DEVICE=cuda] as run.py's replicas: the bf16 run, beside the f32 one.
"""
import math
import sys

import torch
from torch import nn

from run import capture, get_timestep_embedding


class AttnProcessor:
    """attention_processor.AttnProcessor.__call__ (the branches a 3-D input without spatial_norm, group_norm or
    norm_cross reaches)."""

    def __call__(self, attn, hidden_states, encoder_hidden_states=None, attention_mask=None, temb=None):
        residual = hidden_states

        input_ndim = hidden_states.ndim

        batch_size, sequence_length, _ = (
            hidden_states.shape if encoder_hidden_states is None else encoder_hidden_states.shape
        )
        attention_mask = attn.prepare_attention_mask(attention_mask, sequence_length, batch_size)

        query = attn.to_q(hidden_states)

        if encoder_hidden_states is None:
            encoder_hidden_states = hidden_states

        key = attn.to_k(encoder_hidden_states)
        value = attn.to_v(encoder_hidden_states)

        query = attn.head_to_batch_dim(query)
        key = attn.head_to_batch_dim(key)
        value = attn.head_to_batch_dim(value)

        attention_probs = attn.get_attention_scores(query, key, attention_mask)
        hidden_states = torch.bmm(attention_probs, value)
        hidden_states = attn.batch_to_head_dim(hidden_states)

        # linear proj
        hidden_states = attn.to_out[0](hidden_states)
        # dropout
        hidden_states = attn.to_out[1](hidden_states)

        if attn.residual_connection:
            hidden_states = hidden_states + residual

        hidden_states = hidden_states / attn.rescale_output_factor

        return hidden_states


class Attention(nn.Module):
    """attention_processor.Attention as T5FilmDecoder builds it: Attention(query_dim=d_model, heads=num_heads,
    dim_head=d_kv, out_bias=False, scale_qk=False), everything else at its default."""

    def __init__(self, query_dim, cross_attention_dim=None, heads=8, dim_head=64, dropout=0.0, bias=False,
                 upcast_attention=False, upcast_softmax=False, out_bias=True, scale_qk=True,
                 rescale_output_factor=1.0, residual_connection=False, out_dim=None):
        super().__init__()
        self.inner_dim = out_dim if out_dim is not None else dim_head * heads
        self.query_dim = query_dim
        self.use_bias = bias
        self.is_cross_attention = cross_attention_dim is not None
        self.cross_attention_dim = cross_attention_dim if cross_attention_dim is not None else query_dim
        self.upcast_attention = upcast_attention
        self.upcast_softmax = upcast_softmax
        self.rescale_output_factor = rescale_output_factor
        self.residual_connection = residual_connection
        self.dropout = dropout
        self.out_dim = out_dim if out_dim is not None else query_dim

        self.scale_qk = scale_qk
        self.scale = dim_head**-0.5 if self.scale_qk else 1.0

        self.heads = out_dim // dim_head if out_dim is not None else heads

        self.to_q = nn.Linear(query_dim, self.inner_dim, bias=bias)
        self.to_k = nn.Linear(self.cross_attention_dim, self.inner_dim, bias=bias)
        self.to_v = nn.Linear(self.cross_attention_dim, self.inner_dim, bias=bias)

        self.to_out = nn.ModuleList([])
        self.to_out.append(nn.Linear(self.inner_dim, self.out_dim, bias=out_bias))
        self.to_out.append(nn.Dropout(dropout))

        # AttnProcessor2_0 only where F.scaled_dot_product_attention exists and scale_qk; here scale_qk is False
        if self.scale_qk:
            raise ValueError("this replica keeps the scale_qk=False path (AttnProcessor) only")
        self.processor = AttnProcessor()

    def forward(self, hidden_states, encoder_hidden_states=None, attention_mask=None):
        return self.processor(
            self,
            hidden_states,
            encoder_hidden_states=encoder_hidden_states,
            attention_mask=attention_mask,
        )

    def batch_to_head_dim(self, tensor):
        head_size = self.heads
        batch_size, seq_len, dim = tensor.shape
        tensor = tensor.reshape(batch_size // head_size, head_size, seq_len, dim)
        tensor = tensor.permute(0, 2, 1, 3).reshape(batch_size // head_size, seq_len, dim * head_size)
        return tensor

    def head_to_batch_dim(self, tensor, out_dim=3):
        head_size = self.heads
        if tensor.ndim == 3:
            batch_size, seq_len, dim = tensor.shape
            extra_dim = 1
        else:
            batch_size, extra_dim, seq_len, dim = tensor.shape
        tensor = tensor.reshape(batch_size, seq_len * extra_dim, head_size, dim // head_size)
        tensor = tensor.permute(0, 2, 1, 3)

        if out_dim == 3:
            tensor = tensor.reshape(batch_size * head_size, seq_len * extra_dim, dim // head_size)

        return tensor

    def get_attention_scores(self, query, key, attention_mask=None):
        dtype = query.dtype
        if self.upcast_attention:
            query = query.float()
            key = key.float()

        if attention_mask is None:
            baddbmm_input = torch.empty(
                query.shape[0], query.shape[1], key.shape[1], dtype=query.dtype, device=query.device
            )
            beta = 0
        else:
            baddbmm_input = attention_mask
            beta = 1

        attention_scores = torch.baddbmm(
            baddbmm_input,
            query,
            key.transpose(-1, -2),
            beta=beta,
            alpha=self.scale,
        )
        del baddbmm_input

        if self.upcast_softmax:
            attention_scores = attention_scores.float()

        attention_probs = attention_scores.softmax(dim=-1)
        del attention_scores

        attention_probs = attention_probs.to(dtype)

        return attention_probs

    def prepare_attention_mask(self, attention_mask, target_length, batch_size, out_dim=3):
        head_size = self.heads
        if attention_mask is None:
            return attention_mask

        current_length = attention_mask.shape[-1]
        if current_length != target_length:
            attention_mask = nn.functional.pad(attention_mask, (0, target_length), value=0.0)

        if out_dim == 3:
            if attention_mask.shape[0] < batch_size * head_size:
                attention_mask = attention_mask.repeat_interleave(head_size, dim=0)
        elif out_dim == 4:
            attention_mask = attention_mask.unsqueeze(1)
            attention_mask = attention_mask.repeat_interleave(head_size, dim=1)

        return attention_mask


class T5FilmDecoder(nn.Module):
    def __init__(
        self,
        input_dims=128,
        targets_length=256,
        max_decoder_noise_time=2000.0,
        d_model=768,
        num_layers=12,
        num_heads=12,
        d_kv=64,
        d_ff=2048,
        dropout_rate=0.1,
    ):
        super().__init__()
        self.max_decoder_noise_time = max_decoder_noise_time
        self.d_model = d_model

        self.conditioning_emb = nn.Sequential(
            nn.Linear(d_model, d_model * 4, bias=False),
            nn.SiLU(),
            nn.Linear(d_model * 4, d_model * 4, bias=False),
            nn.SiLU(),
        )

        self.position_encoding = nn.Embedding(targets_length, d_model)
        self.position_encoding.weight.requires_grad = False

        self.continuous_inputs_projection = nn.Linear(input_dims, d_model, bias=False)

        self.dropout = nn.Dropout(p=dropout_rate)

        self.decoders = nn.ModuleList()
        for lyr_num in range(num_layers):
            # FiLM conditional T5 decoder
            lyr = DecoderLayer(d_model=d_model, d_kv=d_kv, num_heads=num_heads, d_ff=d_ff, dropout_rate=dropout_rate)
            self.decoders.append(lyr)

        self.decoder_norm = T5LayerNorm(d_model)

        self.post_dropout = nn.Dropout(p=dropout_rate)
        self.spec_out = nn.Linear(d_model, input_dims, bias=False)

    @property
    def dtype(self):
        """ModelMixin.dtype: the parameters' dtype."""
        return next(self.parameters()).dtype

    def encoder_decoder_mask(self, query_input, key_input):
        mask = torch.mul(query_input.unsqueeze(-1), key_input.unsqueeze(-2))
        return mask.unsqueeze(-3)

    def forward(self, encodings_and_masks, decoder_input_tokens, decoder_noise_time):
        batch, _, _ = decoder_input_tokens.shape
        assert decoder_noise_time.shape == (batch,)

        # decoder_noise_time is in [0, 1), so rescale to expected timing range.
        time_steps = get_timestep_embedding(
            decoder_noise_time * self.max_decoder_noise_time,
            embedding_dim=self.d_model,
            max_period=self.max_decoder_noise_time,
        ).to(dtype=self.dtype)

        conditioning_emb = self.conditioning_emb(time_steps).unsqueeze(1)

        assert conditioning_emb.shape == (batch, 1, self.d_model * 4)

        seq_length = decoder_input_tokens.shape[1]

        # If we want to use relative positions for audio context, we can just offset
        # this sequence by the length of encodings_and_masks.
        decoder_positions = torch.broadcast_to(
            torch.arange(seq_length, device=decoder_input_tokens.device),
            (batch, seq_length),
        )

        position_encodings = self.position_encoding(decoder_positions)

        inputs = self.continuous_inputs_projection(decoder_input_tokens)
        inputs += position_encodings
        y = self.dropout(inputs)

        # decoder: No padding present.
        decoder_mask = torch.ones(
            decoder_input_tokens.shape[:2], device=decoder_input_tokens.device, dtype=inputs.dtype
        )

        # Translate encoding masks to encoder-decoder masks.
        encodings_and_encdec_masks = [(x, self.encoder_decoder_mask(decoder_mask, y)) for x, y in encodings_and_masks]

        # cross attend style: concat encodings
        encoded = torch.cat([x[0] for x in encodings_and_encdec_masks], dim=1)
        encoder_decoder_mask = torch.cat([x[1] for x in encodings_and_encdec_masks], dim=-1)

        for lyr in self.decoders:
            y = lyr(
                y,
                conditioning_emb=conditioning_emb,
                encoder_hidden_states=encoded,
                encoder_attention_mask=encoder_decoder_mask,
            )[0]

        y = self.decoder_norm(y)
        y = self.post_dropout(y)

        spec_out = self.spec_out(y)
        return spec_out


class DecoderLayer(nn.Module):
    def __init__(self, d_model, d_kv, num_heads, d_ff, dropout_rate, layer_norm_epsilon=1e-6):
        super().__init__()
        self.layer = nn.ModuleList()

        # cond self attention: layer 0
        self.layer.append(
            T5LayerSelfAttentionCond(d_model=d_model, d_kv=d_kv, num_heads=num_heads, dropout_rate=dropout_rate)
        )

        # cross attention: layer 1
        self.layer.append(
            T5LayerCrossAttention(
                d_model=d_model,
                d_kv=d_kv,
                num_heads=num_heads,
                dropout_rate=dropout_rate,
                layer_norm_epsilon=layer_norm_epsilon,
            )
        )

        # Film Cond MLP + dropout: last layer
        self.layer.append(
            T5LayerFFCond(d_model=d_model, d_ff=d_ff, dropout_rate=dropout_rate, layer_norm_epsilon=layer_norm_epsilon)
        )

    def forward(
        self,
        hidden_states,
        conditioning_emb=None,
        attention_mask=None,
        encoder_hidden_states=None,
        encoder_attention_mask=None,
        encoder_decoder_position_bias=None,
    ):
        hidden_states = self.layer[0](
            hidden_states,
            conditioning_emb=conditioning_emb,
            attention_mask=attention_mask,
        )

        if encoder_hidden_states is not None:
            encoder_extended_attention_mask = torch.where(encoder_attention_mask > 0, 0, -1e10).to(
                encoder_hidden_states.dtype
            )

            hidden_states = self.layer[1](
                hidden_states,
                key_value_states=encoder_hidden_states,
                attention_mask=encoder_extended_attention_mask,
            )

        # Apply Film Conditional Feed Forward layer
        hidden_states = self.layer[-1](hidden_states, conditioning_emb)

        return (hidden_states,)


class T5LayerSelfAttentionCond(nn.Module):
    def __init__(self, d_model, d_kv, num_heads, dropout_rate):
        super().__init__()
        self.layer_norm = T5LayerNorm(d_model)
        self.FiLMLayer = T5FiLMLayer(in_features=d_model * 4, out_features=d_model)
        self.attention = Attention(query_dim=d_model, heads=num_heads, dim_head=d_kv, out_bias=False, scale_qk=False)
        self.dropout = nn.Dropout(dropout_rate)

    def forward(self, hidden_states, conditioning_emb=None, attention_mask=None):
        # pre_self_attention_layer_norm
        normed_hidden_states = self.layer_norm(hidden_states)

        if conditioning_emb is not None:
            normed_hidden_states = self.FiLMLayer(normed_hidden_states, conditioning_emb)

        # Self-attention block
        attention_output = self.attention(normed_hidden_states)

        hidden_states = hidden_states + self.dropout(attention_output)

        return hidden_states


class T5LayerCrossAttention(nn.Module):
    def __init__(self, d_model, d_kv, num_heads, dropout_rate, layer_norm_epsilon):
        super().__init__()
        self.attention = Attention(query_dim=d_model, heads=num_heads, dim_head=d_kv, out_bias=False, scale_qk=False)
        self.layer_norm = T5LayerNorm(d_model, eps=layer_norm_epsilon)
        self.dropout = nn.Dropout(dropout_rate)

    def forward(self, hidden_states, key_value_states=None, attention_mask=None):
        normed_hidden_states = self.layer_norm(hidden_states)
        attention_output = self.attention(
            normed_hidden_states,
            encoder_hidden_states=key_value_states,
            attention_mask=attention_mask.squeeze(1),
        )
        layer_output = hidden_states + self.dropout(attention_output)
        return layer_output


class T5LayerFFCond(nn.Module):
    def __init__(self, d_model, d_ff, dropout_rate, layer_norm_epsilon):
        super().__init__()
        self.DenseReluDense = T5DenseGatedActDense(d_model=d_model, d_ff=d_ff, dropout_rate=dropout_rate)
        self.film = T5FiLMLayer(in_features=d_model * 4, out_features=d_model)
        self.layer_norm = T5LayerNorm(d_model, eps=layer_norm_epsilon)
        self.dropout = nn.Dropout(dropout_rate)

    def forward(self, hidden_states, conditioning_emb=None):
        forwarded_states = self.layer_norm(hidden_states)
        if conditioning_emb is not None:
            forwarded_states = self.film(forwarded_states, conditioning_emb)

        forwarded_states = self.DenseReluDense(forwarded_states)
        hidden_states = hidden_states + self.dropout(forwarded_states)
        return hidden_states


class T5DenseGatedActDense(nn.Module):
    def __init__(self, d_model, d_ff, dropout_rate):
        super().__init__()
        self.wi_0 = nn.Linear(d_model, d_ff, bias=False)
        self.wi_1 = nn.Linear(d_model, d_ff, bias=False)
        self.wo = nn.Linear(d_ff, d_model, bias=False)
        self.dropout = nn.Dropout(dropout_rate)
        self.act = NewGELUActivation()

    def forward(self, hidden_states):
        hidden_gelu = self.act(self.wi_0(hidden_states))
        hidden_linear = self.wi_1(hidden_states)
        hidden_states = hidden_gelu * hidden_linear
        hidden_states = self.dropout(hidden_states)

        hidden_states = self.wo(hidden_states)
        return hidden_states


class T5LayerNorm(nn.Module):
    def __init__(self, hidden_size, eps=1e-6):
        """
        Construct a layernorm module in the T5 style. No bias and no subtraction of mean.
        """
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.variance_epsilon = eps

    def forward(self, hidden_states):
        # T5 uses a layer_norm which only scales and doesn't shift, which is also known as Root Mean
        # Square Layer Normalization https://arxiv.org/abs/1910.07467 thus variance is calculated
        # w/o mean and there is no bias. Additionally we want to make sure that the accumulation for
        # half-precision inputs is done in fp32

        variance = hidden_states.to(torch.float32).pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)

        # convert into half-precision if necessary
        if self.weight.dtype in [torch.float16, torch.bfloat16]:
            hidden_states = hidden_states.to(self.weight.dtype)

        return self.weight * hidden_states


class NewGELUActivation(nn.Module):
    def forward(self, input):
        return 0.5 * input * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (input + 0.044715 * torch.pow(input, 3.0))))


class T5FiLMLayer(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.scale_bias = nn.Linear(in_features, out_features * 2, bias=False)

    def forward(self, x, conditioning_emb):
        emb = self.scale_bias(conditioning_emb)
        scale, shift = torch.chunk(emb, 2, -1)
        x = x * (1 + scale) + shift
        return x


D_MODEL, INPUT_DIMS, TARGETS, NOTES, NOTES_VALID = 32, 8, 16, 12, 9


def build():
    return T5FilmDecoder(input_dims=INPUT_DIMS, targets_length=TARGETS, max_decoder_noise_time=2000.0,
                         d_model=D_MODEL, num_layers=2, num_heads=2, d_kv=16, d_ff=64, dropout_rate=0.1)


def inputs(g):
    # SpectrogramDiffusionPipeline.encode: tokens_mask = input_tokens > 0 (trailing padding), the continuous mask
    # all ones after the first chunk; the encodings are the two encoders' outputs, drawn here.
    tokens_mask = torch.arange(NOTES)[None, :] < NOTES_VALID
    return {
        "tokens_encoded": torch.randn((1, NOTES, D_MODEL), generator=g),
        "tokens_mask": tokens_mask,
        "continuous_encoded": torch.randn((1, TARGETS, D_MODEL), generator=g),
        "continuous_mask": torch.ones((1, TARGETS), dtype=torch.bool),
        "noise": torch.randn((1, TARGETS, INPUT_DIMS), generator=g),
    }


def call(model, x, sigma, c):
    # SpectrogramDiffusionPipeline: noise_time = t / scheduler.config.num_train_timesteps (t the DDPM timestep, an
    # int64 0-d tensor); decode(): timesteps[None], times ones over the batch; decoder(...) by keywords.
    t = torch.tensor(int(round(sigma * 999)), dtype=torch.int64, device=x.device)
    timesteps = t / 1000
    timesteps = timesteps[None].to(x.device)
    timesteps = timesteps * torch.ones(x.shape[0], dtype=timesteps.dtype, device=timesteps.device)
    encodings_and_masks = [(c["tokens_encoded"], c["tokens_mask"]), (c["continuous_encoded"], c["continuous_mask"])]
    return model(encodings_and_masks=encodings_and_masks, decoder_input_tokens=x, decoder_noise_time=timesteps)


PRODUCER = dict(
    library_source="replica of huggingface/diffusers t5_film_transformer.py (049ca382) with attention_processor.py's "
                   "Attention/AttnProcessor (001d4da0) (torch 1.13)",
    timestep="decoder_noise_time = (round(sigma*999) / 1000)[None] * ones(B), f32 (SpectrogramDiffusionPipeline: "
             "DDPM t / num_train_timesteps)",
    velocity="the model output (predicted noise) as is",
    note="T5FilmDecoder d_model 32, 2 layers, 2 heads of 16, d_ff 64, 16 frames of 8 mel bins: sinusoidal noise-time "
         "embedding (max_period 2000) -> bias-free SiLU MLP -> FiLM x*(1+scale)+shift after the self-attention and FF "
         "pre-norms; learned positions; T5 RMS norms; unscaled baddbmm attention (AttnProcessor, scale_qk=False); "
         "cross-attention over notes (3 of 12 masked) + continuous encodings with an additive 0/-1e10 mask; "
         "gated tanh-GELU FF")

if __name__ == "__main__":
    capture("t5film", build, inputs, call, sys.argv[1], PRODUCER)
