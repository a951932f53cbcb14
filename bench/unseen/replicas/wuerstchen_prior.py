"""Würstchen's prior (WuerstchenPrior, stage C of Würstchen v2), reimplemented for torch 1.13 (no diffusers here),
captured small in f32 on CPU.

Follows huggingface/diffusers src/diffusers/pipelines/wuerstchen/modeling_wuerstchen_prior.py at
bc4eae95c5518ba87eb622dc0a6ddf2a995661e8 (WuerstchenPrior) with the blocks of modeling_wuerstchen_common.py at
5345e05bc41461f28675f958770ec66875ab681f (WuerstchenLayerNorm, TimestepBlock, ResBlock, GlobalResponseNorm,
AttnBlock) and attention_processor.py's Attention(query_dim=c, heads=nhead, dim_head=c // nhead, bias=True) with
its default processor AttnProcessor2_0 on a 4-D input: the same module tree, parameter names and shapes, call
boundaries and arithmetic line for line. The common file's LoRACompatibleLinear / LoRACompatibleConv are nn.Linear /
nn.Conv2d under USE_PEFT_BACKEND (and the same F.linear / conv without a LoRA layer either way). Where upstream's
classes are literally the same as Stable Cascade's they are imported from stable_cascade.py (Attention,
GlobalResponseNorm); the rest keep Würstchen's own names. Stand-in for what torch 1.13 lacks:
F.scaled_dot_product_attention (run.sdpa, its math path). (Later diffusers releases call
set_default_attn_processor() in WuerstchenPrior.__init__, which swaps in AttnProcessor: baddbmm(empty, q, kᵀ, beta 0,
alpha = scale), softmax, bmm; the same attention up to rounding. The stored commit cited here predates that.)

The constructs it shows: a 1x1 conv projection of the 16-channel EfficientNet-latent map; the CLIP text states
through Linear-LeakyReLU(0.2)-Linear (cond_mapper); the ratio sinusoid made in the forward (r·10000, frequencies
exp(−i·ln 10⁴/(half − 1)), [sin, cos], cast to r's dtype); depth × (ResBlock, TimestepBlock, AttnBlock) at one
resolution: ResBlock = a depthwise 3x3 conv, a LayerNorm over the channels of the channels-first map (permute,
LayerNorm, permute back), a channels-last Linear-GELU-GlobalResponseNorm-Linear (GRN: the L2 norm over H and W,
divided by its channel mean + 1e-6, γ·(x·n) + β + x), plus the input; TimestepBlock = x·(1 + a) + b with a, b the
chunks of one Linear of the ratio embedding; AttnBlock = SiLU-Linear over the mapped CLIP rows (kv_mapper), the
channel LayerNorm, self-attention keys joined before the CLIP rows (the normed map's pixels as rows), diffusers'
Attention with biases on the 4-D map, added to the input; the out head (channel LayerNorm, 1x1 conv to 2·c_in),
chunked into a and b, the output (x_in − a) / (|1 − b| + 1e-5).

Config: the warp-ai/wuerstchen-prior layout (c_in 16, c 1280, c_cond 1024, c_r 64, depth 16, nhead 16) shrunk to
c_in 4, c 16, c_cond 12, c_r 16, depth 2, nhead 2 (dropout 0.1 as upstream's default, a no-op in eval), over a 4x4
latent (the pipeline's ceil(1024 / 42.67) = 24 shrunk) and 5 CLIP rows of 12.

Pipeline as WuerstchenPriorPipeline (pipeline_wuerstchen_prior.py at 5345e05bc41461f28675f958770ec66875ab681f) calls
it at its default guidance_scale 8.0: text_encoder_hidden_states = cat([prompt_embeds, negative_prompt_embeds])
once before the loop (negative_prompt_embeds the CLIP states of the empty prompt, a request input here), then each
step ratio = t.expand(latents.size(0)).to(dtype) (t the DDPMWuerstchenScheduler's ratio, here σ; dtype the text
states'), prior(cat([latents] * 2), r=cat([ratio] * 2), c=text_encoder_hidden_states), chunk(2) into (text,
uncond), torch.lerp(uncond, text, 8.0). The guided prediction (an ε estimate) is taken as the velocity as is (the
capture's flow Euler loop, as stable_cascade.py does; the DDPM-Würstchen step itself is not replayed).

usage: /usr/bin/python3 bench/unseen/replicas/wuerstchen_prior.py OUTDIR
"""
import math
import sys

import torch
import torch.nn as nn

from run import capture
from stable_cascade import Attention, GlobalResponseNorm

GUIDANCE_SCALE = 8.0  # WuerstchenPriorPipeline's default


class WuerstchenLayerNorm(nn.LayerNorm):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)

    def forward(self, x):
        x = x.permute(0, 2, 3, 1)
        x = super().forward(x)
        return x.permute(0, 3, 1, 2)


class TimestepBlock(nn.Module):
    def __init__(self, c, c_timestep):
        super().__init__()
        self.mapper = nn.Linear(c_timestep, c * 2)

    def forward(self, x, t):
        a, b = self.mapper(t)[:, :, None, None].chunk(2, dim=1)
        return x * (1 + a) + b


class ResBlock(nn.Module):
    def __init__(self, c, c_skip=0, kernel_size=3, dropout=0.0):
        super().__init__()
        self.depthwise = nn.Conv2d(c + c_skip, c, kernel_size=kernel_size, padding=kernel_size // 2, groups=c)
        self.norm = WuerstchenLayerNorm(c, elementwise_affine=False, eps=1e-6)
        self.channelwise = nn.Sequential(
            nn.Linear(c, c * 4), nn.GELU(), GlobalResponseNorm(c * 4), nn.Dropout(dropout), nn.Linear(c * 4, c)
        )

    def forward(self, x, x_skip=None):
        x_res = x
        if x_skip is not None:
            x = torch.cat([x, x_skip], dim=1)
        x = self.norm(self.depthwise(x)).permute(0, 2, 3, 1)
        x = self.channelwise(x).permute(0, 3, 1, 2)
        return x + x_res


class AttnBlock(nn.Module):
    def __init__(self, c, c_cond, nhead, self_attn=True, dropout=0.0):
        super().__init__()
        self.self_attn = self_attn
        self.norm = WuerstchenLayerNorm(c, elementwise_affine=False, eps=1e-6)
        self.attention = Attention(query_dim=c, heads=nhead, dim_head=c // nhead)  # dropout: a no-op in eval
        self.kv_mapper = nn.Sequential(nn.SiLU(), nn.Linear(c_cond, c))

    def forward(self, x, kv):
        kv = self.kv_mapper(kv)
        norm_x = self.norm(x)
        if self.self_attn:
            batch_size, channel, _, _ = x.shape
            kv = torch.cat([norm_x.view(batch_size, channel, -1).transpose(1, 2), kv], dim=1)
        x = x + self.attention(norm_x, encoder_hidden_states=kv)
        return x


class WuerstchenPrior(nn.Module):
    def __init__(self, c_in=16, c=1280, c_cond=1024, c_r=64, depth=16, nhead=16, dropout=0.1):
        super().__init__()
        self.c_r = c_r
        self.projection = nn.Conv2d(c_in, c, kernel_size=1)
        self.cond_mapper = nn.Sequential(
            nn.Linear(c_cond, c),
            nn.LeakyReLU(0.2),
            nn.Linear(c, c),
        )

        self.blocks = nn.ModuleList()
        for _ in range(depth):
            self.blocks.append(ResBlock(c, dropout=dropout))
            self.blocks.append(TimestepBlock(c, c_r))
            self.blocks.append(AttnBlock(c, c, nhead, self_attn=True, dropout=dropout))
        self.out = nn.Sequential(
            WuerstchenLayerNorm(c, elementwise_affine=False, eps=1e-6),
            nn.Conv2d(c, c_in * 2, kernel_size=1),
        )

    def gen_r_embedding(self, r, max_positions=10000):
        r = r * max_positions
        half_dim = self.c_r // 2
        emb = math.log(max_positions) / (half_dim - 1)
        emb = torch.arange(half_dim, device=r.device).float().mul(-emb).exp()
        emb = r[:, None] * emb[None, :]
        emb = torch.cat([emb.sin(), emb.cos()], dim=1)
        if self.c_r % 2 == 1:  # zero pad
            emb = nn.functional.pad(emb, (0, 1), mode="constant")
        return emb.to(dtype=r.dtype)

    def forward(self, x, r, c):
        x_in = x
        x = self.projection(x)
        c_embed = self.cond_mapper(c)
        r_embed = self.gen_r_embedding(r)
        for block in self.blocks:
            if isinstance(block, AttnBlock):
                x = block(x, c_embed)
            elif isinstance(block, TimestepBlock):
                x = block(x, r_embed)
            else:
                x = block(x)
        a, b = self.out(x).chunk(2, dim=1)
        return (x_in - a) / ((1 - b).abs() + 1e-5)


def build():
    return WuerstchenPrior(c_in=4, c=16, c_cond=12, c_r=16, depth=2, nhead=2)


def inputs(g):
    return {"prompt_embeds": torch.randn((1, 5, 12), generator=g),
            "negative_prompt_embeds": torch.randn((1, 5, 12), generator=g),
            "noise": torch.randn((1, 4, 4, 4), generator=g)}


def prepare(model, cond):
    """WuerstchenPriorPipeline, before its loop: the prompt and the empty prompt's states joined by batch."""
    cond["text_encoder_hidden_states"] = torch.cat([cond["prompt_embeds"], cond["negative_prompt_embeds"]])


def call(model, x, sigma, c):
    text_encoder_hidden_states = c["text_encoder_hidden_states"]
    dtype = text_encoder_hidden_states.dtype
    t = torch.tensor(sigma, dtype=torch.float32, device=x.device)  # the scheduler's ratio
    ratio = t.expand(x.size(0)).to(dtype)
    predicted_image_embedding = model(torch.cat([x] * 2), r=torch.cat([ratio] * 2), c=text_encoder_hidden_states)
    predicted_image_embedding_text, predicted_image_embedding_uncond = predicted_image_embedding.chunk(2)
    return torch.lerp(predicted_image_embedding_uncond, predicted_image_embedding_text, GUIDANCE_SCALE)


PRODUCER = dict(
    library_source="replica of huggingface/diffusers pipelines/wuerstchen/modeling_wuerstchen_prior.py@bc4eae95c551 "
                   "and modeling_wuerstchen_common.py@5345e05bc414 (torch 1.13)",
    timestep="r = sigma (the DDPMWuerstchenScheduler ratio), t.expand(B).to(text states' dtype), doubled for CFG",
    velocity="torch.lerp(uncond, text, 8.0) of the prediction's halves (WuerstchenPriorPipeline's guidance), as is",
    note="WuerstchenPrior, c 16, depth 2: 1x1 conv projection; CLIP states through Linear-LeakyReLU(0.2)-Linear; "
         "ratio sinusoid in the forward (r·1e4, ln 1e4/(half − 1), [sin, cos]); ResBlocks (depthwise conv, channel "
         "LayerNorm by permutes, channels-last Linear-GELU-GRN-Linear, residual); TimestepBlocks x·(1 + a) + b; "
         "AttnBlocks (SiLU-Linear kv mapper, self keys joined before the CLIP rows, Attention on the 4-D map); out "
         "head chunked into a, b: (x_in − a)/(|1 − b| + 1e-5); CFG batch [prompt, empty prompt] joined before the "
         "loop, lerp by 8")

if __name__ == "__main__":
    capture("wuerstchen_prior", build, inputs, call, sys.argv[1], PRODUCER, prepare=prepare)
