"""diffusers' PriorTransformer (the unCLIP / Kandinsky 2.2 prior: an image embedding denoised from text), reimplemented
for torch 1.13 (no diffusers here), captured small in f32 on CPU.

Follows huggingface/diffusers src/diffusers/models/transformers/prior_transformer.py (commit 06d4fb51) line for line,
with Kandinsky 2.2's configuration (norm_in_type "layer", embedding_proj_norm_type "layer", encoder_hid_proj_type
"linear", added_emb_type "prd", time_embed_act_fn "gelu"): the timestep's Timesteps(flip_sin_to_cos, shift 0)
through TimestepEmbedding; the text states, the projected text embedding, the time embedding, the noisy image
embedding and a learned prd token joined as rows, plus a learned position table; an additive mask made in the
forward from the text's padding mask ((1 − m)·−10000, padded by zeros over the four added rows, plus a causal buffer
of −10000 above the diagonal, repeated per head); a LayerNorm in, BasicTransformerBlocks (self-attention with
biases and the mask, a GELU FeedForward, each pre-norm with a residual), a LayerNorm out, the prd row's projection
the prediction. And the parts it imports: attention.py's BasicTransformerBlock and FeedForward, attention_processor.py
(Attention with AttnProcessor2_0: the mask viewed per head and added to the scores), embeddings.py. Stand-in for
what torch 1.13 lacks: F.scaled_dot_product_attention (its math path, an additive float mask).

2 heads of 8, 2 layers, embeddings of 12, 6 text rows of which the last 2 are padding.

Pipeline as KandinskyV22PriorPipeline calls it without guidance: timestep = the scheduler's t (here σ·1000, f32,
one per batch); latents [1, 12] (the image embedding); the predicted image embedding taken as the velocity as is.

usage: /usr/bin/python3 bench/unseen/replicas/prior_transformer.py OUTDIR
"""
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

from parts import Timesteps
from run import capture, sdpa


class Attention(nn.Module):
    def __init__(self, dim, heads, dim_head):
        super().__init__()
        inner = heads * dim_head
        self.heads = heads
        self.to_q = nn.Linear(dim, inner, bias=True)
        self.to_k = nn.Linear(dim, inner, bias=True)
        self.to_v = nn.Linear(dim, inner, bias=True)
        self.to_out = nn.ModuleList([nn.Linear(inner, dim, bias=True), nn.Dropout(0.0)])

    def forward(self, hidden_states, attention_mask=None):
        batch_size, sequence_length, _ = hidden_states.shape
        if attention_mask is not None:
            attention_mask = attention_mask.view(batch_size, self.heads, -1, attention_mask.shape[-1])
        query = self.to_q(hidden_states)
        key = self.to_k(hidden_states)
        value = self.to_v(hidden_states)
        head_dim = key.shape[-1] // self.heads
        query = query.view(batch_size, -1, self.heads, head_dim).transpose(1, 2)
        key = key.view(batch_size, -1, self.heads, head_dim).transpose(1, 2)
        value = value.view(batch_size, -1, self.heads, head_dim).transpose(1, 2)
        hidden_states = sdpa(query, key, value, mask=attention_mask)
        hidden_states = hidden_states.transpose(1, 2).reshape(batch_size, -1, self.heads * head_dim)
        hidden_states = hidden_states.to(query.dtype)
        hidden_states = self.to_out[0](hidden_states)
        return self.to_out[1](hidden_states)


class GELU(nn.Module):
    def __init__(self, dim_in, dim_out):
        super().__init__()
        self.proj = nn.Linear(dim_in, dim_out)

    def forward(self, hidden_states):
        return F.gelu(self.proj(hidden_states))


class FeedForward(nn.Module):
    def __init__(self, dim, mult=4):
        super().__init__()
        self.net = nn.ModuleList([GELU(dim, dim * mult), nn.Dropout(0.0), nn.Linear(dim * mult, dim)])

    def forward(self, hidden_states):
        for module in self.net:
            hidden_states = module(hidden_states)
        return hidden_states


class BasicTransformerBlock(nn.Module):
    """activation_fn "gelu", attention_bias, no cross-attention: norm1-attn1 and norm3-ff, each with a residual."""

    def __init__(self, dim, heads, dim_head):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn1 = Attention(dim, heads, dim_head)
        self.norm3 = nn.LayerNorm(dim)
        self.ff = FeedForward(dim)

    def forward(self, hidden_states, attention_mask=None):
        norm_hidden_states = self.norm1(hidden_states)
        attn_output = self.attn1(norm_hidden_states, attention_mask=attention_mask)
        hidden_states = attn_output + hidden_states
        norm_hidden_states = self.norm3(hidden_states)
        return self.ff(norm_hidden_states) + hidden_states


class TimestepEmbedding(nn.Module):
    def __init__(self, in_channels, time_embed_dim, out_dim):
        super().__init__()
        self.linear_1 = nn.Linear(in_channels, time_embed_dim)
        self.act = nn.GELU()
        self.linear_2 = nn.Linear(time_embed_dim, out_dim)

    def forward(self, sample):
        return self.linear_2(self.act(self.linear_1(sample)))


class PriorTransformer(nn.Module):
    def __init__(self, num_attention_heads=2, attention_head_dim=8, num_layers=2, embedding_dim=12, num_embeddings=6,
                 additional_embeddings=4):
        super().__init__()
        self.num_attention_heads = num_attention_heads
        inner_dim = num_attention_heads * attention_head_dim
        self.additional_embeddings = additional_embeddings
        self.time_proj = Timesteps(inner_dim, True, 0)
        self.time_embedding = TimestepEmbedding(inner_dim, inner_dim, inner_dim)
        self.proj_in = nn.Linear(embedding_dim, inner_dim)
        self.embedding_proj_norm = nn.LayerNorm(embedding_dim)
        self.embedding_proj = nn.Linear(embedding_dim, inner_dim)
        self.encoder_hidden_states_proj = nn.Linear(embedding_dim, inner_dim)
        self.positional_embedding = nn.Parameter(torch.zeros(1, num_embeddings + additional_embeddings, inner_dim))
        self.prd_embedding = nn.Parameter(torch.zeros(1, 1, inner_dim))
        self.transformer_blocks = nn.ModuleList([BasicTransformerBlock(inner_dim, num_attention_heads,
                                                                       attention_head_dim) for _ in range(num_layers)])
        self.norm_in = nn.LayerNorm(inner_dim)
        self.norm_out = nn.LayerNorm(inner_dim)
        self.proj_to_clip_embeddings = nn.Linear(inner_dim, embedding_dim)
        causal_attention_mask = torch.full([num_embeddings + additional_embeddings,
                                            num_embeddings + additional_embeddings], -10000.0)
        causal_attention_mask.triu_(1)
        self.register_buffer("causal_attention_mask", causal_attention_mask[None, ...], persistent=False)
        self.clip_mean = nn.Parameter(torch.zeros(1, embedding_dim))
        self.clip_std = nn.Parameter(torch.zeros(1, embedding_dim))

    def forward(self, hidden_states, timestep, proj_embedding, encoder_hidden_states=None, attention_mask=None,
                return_dict=False):
        batch_size = hidden_states.shape[0]
        timesteps = timestep
        if len(timesteps.shape) == 0:
            timesteps = timesteps[None]
        timesteps = timesteps * torch.ones(batch_size, dtype=timesteps.dtype, device=timesteps.device)
        timesteps_projected = self.time_proj(timesteps)
        timesteps_projected = timesteps_projected.to(dtype=self.proj_in.weight.dtype)
        time_embeddings = self.time_embedding(timesteps_projected)
        proj_embedding = self.embedding_proj_norm(proj_embedding)
        proj_embeddings = self.embedding_proj(proj_embedding)
        encoder_hidden_states = self.encoder_hidden_states_proj(encoder_hidden_states)
        hidden_states = self.proj_in(hidden_states)
        positional_embeddings = self.positional_embedding.to(hidden_states.dtype)
        additional_embeds = [encoder_hidden_states]
        additional_embeddings_len = encoder_hidden_states.shape[1]
        if len(proj_embeddings.shape) == 2:
            proj_embeddings = proj_embeddings[:, None, :]
        if len(hidden_states.shape) == 2:
            hidden_states = hidden_states[:, None, :]
        additional_embeds = additional_embeds + [proj_embeddings, time_embeddings[:, None, :], hidden_states]
        prd_embedding = self.prd_embedding.to(hidden_states.dtype).expand(batch_size, -1, -1)
        additional_embeds.append(prd_embedding)
        hidden_states = torch.cat(additional_embeds, dim=1)
        additional_embeddings_len = additional_embeddings_len + proj_embeddings.shape[1] + 1
        hidden_states = hidden_states + positional_embeddings
        if attention_mask is not None:
            attention_mask = (1 - attention_mask.to(hidden_states.dtype)) * -10000.0
            attention_mask = F.pad(attention_mask, (0, self.additional_embeddings), value=0.0)
            attention_mask = (attention_mask[:, None, :] + self.causal_attention_mask).to(hidden_states.dtype)
            attention_mask = attention_mask.repeat_interleave(self.num_attention_heads, dim=0)
        hidden_states = self.norm_in(hidden_states)
        for block in self.transformer_blocks:
            hidden_states = block(hidden_states, attention_mask=attention_mask)
        hidden_states = self.norm_out(hidden_states)
        hidden_states = hidden_states[:, -1]
        return (self.proj_to_clip_embeddings(hidden_states),)


def inputs(g):
    mask = torch.ones((1, 6), dtype=torch.bool)
    mask[:, 4:] = False
    return {"proj_embedding": torch.randn((1, 12), generator=g), "encoder_hidden_states": torch.randn((1, 6, 12), generator=g),
            "attention_mask": mask, "noise": torch.randn((1, 12), generator=g)}


def call(model, x, sigma, c):
    t = torch.tensor([sigma * 1000.0], dtype=torch.float32, device=x.device)
    return model(x, t, proj_embedding=c["proj_embedding"], encoder_hidden_states=c["encoder_hidden_states"],
                 attention_mask=c["attention_mask"])[0]


PRODUCER = dict(
    library_source="replica of huggingface/diffusers prior_transformer.py (Kandinsky 2.2's prior config, torch 1.13)",
    timestep="sigma*1000, f32 [1] (KandinskyV22PriorPipeline: the scheduler's timesteps)",
    velocity="the predicted image embedding as is",
    note="PriorTransformer: [text rows, projected text embedding, time embedding, noisy image embedding, prd token] "
         "plus a position table; an additive mask made from the text's padding and a causal −10000 buffer; the "
         "prd row's projection the output; 2-D latents")

if __name__ == "__main__":
    capture("prior_transformer", PriorTransformer, inputs, call, sys.argv[1], PRODUCER)
