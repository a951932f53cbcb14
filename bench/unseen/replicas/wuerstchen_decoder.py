"""Würstchen's decoder (WuerstchenDiffNeXt, stage B of Würstchen v2), reimplemented for torch 1.13 (no diffusers
here), captured small in f32 on CPU.

Follows huggingface/diffusers src/diffusers/pipelines/wuerstchen/modeling_wuerstchen_diffnext.py at
b593363cb4dbcc2b0a69541b83a4aa623189c89b (WuerstchenDiffNeXt, ResBlockStageB) with the blocks it imports from
modeling_wuerstchen_common.py at 5345e05bc41461f28675f958770ec66875ab681f (WuerstchenLayerNorm, TimestepBlock,
GlobalResponseNorm, AttnBlock, taken from wuerstchen_prior.py, which writes them) and attention_processor.py's
Attention(query_dim=c, heads=nhead, dim_head=c // nhead, bias=True) with its default processor AttnProcessor2_0 on a
4-D input (stable_cascade.py's, literally the same class): the same module tree (effnet_mappers a ModuleList with None
where a level takes no EfficientNet map), parameter names and shapes, call boundaries and arithmetic line for line.
_init_weights is left out: the capture redraws every weight. Stand-in for what torch 1.13 lacks:
F.scaled_dot_product_attention (run.sdpa, its math path). torch 1.13's antialiased bicubic interpolation was
checked against torch 2's kernel formula for float tensors (centre scale·(i + 0.5) with scale (in − 1)/(out − 1)
under align_corners, the Keys kernel at a = −0.5, weights normalised; no align_corners shift in the antialiased
float path): the same to 6e-7.

The constructs it shows: the CLIP text states through a Linear (clip_mapper) and a non-affine LayerNorm (seq_norm);
the ratio sinusoid made in the forward (r·10000, exp(−i·ln 10⁴/(half − 1)), [sin, cos]); a PixelUnshuffle(2) -
1x1 conv - channel LayerNorm embedding; four levels down (a channel LayerNorm + 2x2 conv of stride 2 between them)
and up (a channel LayerNorm + ConvTranspose2d 2x2 at each level's end), "C" = ResBlockStageB (depthwise 3x3 conv,
channel LayerNorm, then the skip joined by channels before a channels-last Linear-GELU-GRN-Linear, plus the input),
"T" = TimestepBlock (x·(1 + a) + b), "A" = AttnBlock (SiLU-Linear kv mapper over the normed CLIP rows, self keys
joined before them); at each level that injects it (inject_effnet [False, True, True, True], mirrored on the way up)
the EfficientNet map resized to the level's size by F.interpolate(effnet.float(), mode="bicubic", antialias=True,
align_corners=True) (upsampled to 8x8 and 4x4, downsampled to 2x2), through that level's 1x1 conv (effnet_mappers,
one per level and direction), computed once per level at its first ResBlock and joined as the ResBlock's skip (on the
way up after the level's saved output); the classifier (channel LayerNorm, 1x1 conv to 2·c_out·4, PixelShuffle(2))
chunked into a and b: b = sigmoid(b)·(1 − 2·1e-3) + 1e-3, the output (x_in − a) / b (return_noise True).

Config: warp-ai/wuerstchen's decoder layout (c_hidden [320, 640, 1280, 1280], nhead [-1, 10, 20, 20], blocks
[4, 4, 14, 4], level_config ["CT", "CTA", "CTA", "CTA"], inject_effnet [False, True, True, True], patch 2, c_r 64,
c_cond 1024, clip_embd 1024, effnet_embd 16) shrunk to c_hidden [4, 8, 16, 16], nhead [-1, 2, 2, 2], blocks
[1, 1, 1, 1], c_r 16, c_cond 12, clip_embd 10, effnet_embd 6 (dropout 0.1 as upstream's default, a no-op in eval);
a 3x3 EfficientNet map and the pipeline's latent size int(3·10.67) = 32 (levels at 16, 8, 4, 2), 5 CLIP rows.

Pipeline as WuerstchenDecoderPipeline (pipeline_wuerstchen.py at 40ef851bd52719f6b4382cef2e3fb670c0d29ad3) calls it at
its default guidance_scale 0.0 (no CFG batch): each step ratio = t.expand(latents.size(0)).to(dtype) (t the
DDPMWuerstchenScheduler's ratio, here σ; dtype the decoder's), decoder(latents, r=ratio, effnet=image_embeddings,
clip=text_encoder_hidden_states): image_embeddings the prior's output (a request input here), the text states CLIP's
last_hidden_state. The prediction (an ε estimate) is taken as the velocity as is (the capture's flow Euler loop, as
stable_cascade.py does; the DDPM-Würstchen step itself is not replayed).

usage: /usr/bin/python3 bench/unseen/replicas/wuerstchen_decoder.py OUTDIR
"""
import math
import sys

import torch
import torch.nn as nn

from run import capture
from stable_cascade import GlobalResponseNorm
from wuerstchen_prior import AttnBlock, TimestepBlock, WuerstchenLayerNorm


class ResBlockStageB(nn.Module):
    def __init__(self, c, c_skip=0, kernel_size=3, dropout=0.0):
        super().__init__()
        self.depthwise = nn.Conv2d(c, c, kernel_size=kernel_size, padding=kernel_size // 2, groups=c)
        self.norm = WuerstchenLayerNorm(c, elementwise_affine=False, eps=1e-6)
        self.channelwise = nn.Sequential(
            nn.Linear(c + c_skip, c * 4),
            nn.GELU(),
            GlobalResponseNorm(c * 4),
            nn.Dropout(dropout),
            nn.Linear(c * 4, c),
        )

    def forward(self, x, x_skip=None):
        x_res = x
        x = self.norm(self.depthwise(x))
        if x_skip is not None:
            x = torch.cat([x, x_skip], dim=1)
        x = self.channelwise(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)
        return x + x_res


class WuerstchenDiffNeXt(nn.Module):
    def __init__(self, c_in=4, c_out=4, c_r=64, patch_size=2, c_cond=1024, c_hidden=[320, 640, 1280, 1280],
                 nhead=[-1, 10, 20, 20], blocks=[4, 4, 14, 4], level_config=["CT", "CTA", "CTA", "CTA"],
                 inject_effnet=[False, True, True, True], effnet_embd=16, clip_embd=1024, kernel_size=3, dropout=0.1):
        super().__init__()
        self.c_r = c_r
        self.c_cond = c_cond
        if not isinstance(dropout, list):
            dropout = [dropout] * len(c_hidden)

        # CONDITIONING
        self.clip_mapper = nn.Linear(clip_embd, c_cond)
        self.effnet_mappers = nn.ModuleList(
            [
                nn.Conv2d(effnet_embd, c_cond, kernel_size=1) if inject else None
                for inject in inject_effnet + list(reversed(inject_effnet))
            ]
        )
        self.seq_norm = nn.LayerNorm(c_cond, elementwise_affine=False, eps=1e-6)

        self.embedding = nn.Sequential(
            nn.PixelUnshuffle(patch_size),
            nn.Conv2d(c_in * (patch_size**2), c_hidden[0], kernel_size=1),
            WuerstchenLayerNorm(c_hidden[0], elementwise_affine=False, eps=1e-6),
        )

        def get_block(block_type, c_hidden, nhead, c_skip=0, dropout=0):
            if block_type == "C":
                return ResBlockStageB(c_hidden, c_skip, kernel_size=kernel_size, dropout=dropout)
            elif block_type == "A":
                return AttnBlock(c_hidden, c_cond, nhead, self_attn=True, dropout=dropout)
            elif block_type == "T":
                return TimestepBlock(c_hidden, c_r)
            else:
                raise ValueError(f"Block type {block_type} not supported")

        # BLOCKS
        # -- down blocks
        self.down_blocks = nn.ModuleList()
        for i in range(len(c_hidden)):
            down_block = nn.ModuleList()
            if i > 0:
                down_block.append(
                    nn.Sequential(
                        WuerstchenLayerNorm(c_hidden[i - 1], elementwise_affine=False, eps=1e-6),
                        nn.Conv2d(c_hidden[i - 1], c_hidden[i], kernel_size=2, stride=2),
                    )
                )
            for _ in range(blocks[i]):
                for block_type in level_config[i]:
                    c_skip = c_cond if inject_effnet[i] else 0
                    down_block.append(get_block(block_type, c_hidden[i], nhead[i], c_skip=c_skip, dropout=dropout[i]))
            self.down_blocks.append(down_block)

        # -- up blocks
        self.up_blocks = nn.ModuleList()
        for i in reversed(range(len(c_hidden))):
            up_block = nn.ModuleList()
            for j in range(blocks[i]):
                for k, block_type in enumerate(level_config[i]):
                    c_skip = c_hidden[i] if i < len(c_hidden) - 1 and j == k == 0 else 0
                    c_skip += c_cond if inject_effnet[i] else 0
                    up_block.append(get_block(block_type, c_hidden[i], nhead[i], c_skip=c_skip, dropout=dropout[i]))
            if i > 0:
                up_block.append(
                    nn.Sequential(
                        WuerstchenLayerNorm(c_hidden[i], elementwise_affine=False, eps=1e-6),
                        nn.ConvTranspose2d(c_hidden[i], c_hidden[i - 1], kernel_size=2, stride=2),
                    )
                )
            self.up_blocks.append(up_block)

        # OUTPUT
        self.clf = nn.Sequential(
            WuerstchenLayerNorm(c_hidden[0], elementwise_affine=False, eps=1e-6),
            nn.Conv2d(c_hidden[0], 2 * c_out * (patch_size**2), kernel_size=1),
            nn.PixelShuffle(patch_size),
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

    def gen_c_embeddings(self, clip):
        clip = self.clip_mapper(clip)
        clip = self.seq_norm(clip)
        return clip

    def _down_encode(self, x, r_embed, effnet, clip=None):
        level_outputs = []
        for i, down_block in enumerate(self.down_blocks):
            effnet_c = None
            for block in down_block:
                if isinstance(block, ResBlockStageB):
                    if effnet_c is None and self.effnet_mappers[i] is not None:
                        dtype = effnet.dtype
                        effnet_c = self.effnet_mappers[i](
                            nn.functional.interpolate(
                                effnet.float(), size=x.shape[-2:], mode="bicubic", antialias=True, align_corners=True
                            ).to(dtype)
                        )
                    skip = effnet_c if self.effnet_mappers[i] is not None else None
                    x = block(x, skip)
                elif isinstance(block, AttnBlock):
                    x = block(x, clip)
                elif isinstance(block, TimestepBlock):
                    x = block(x, r_embed)
                else:
                    x = block(x)
            level_outputs.insert(0, x)
        return level_outputs

    def _up_decode(self, level_outputs, r_embed, effnet, clip=None):
        x = level_outputs[0]
        for i, up_block in enumerate(self.up_blocks):
            effnet_c = None
            for j, block in enumerate(up_block):
                if isinstance(block, ResBlockStageB):
                    if effnet_c is None and self.effnet_mappers[len(self.down_blocks) + i] is not None:
                        dtype = effnet.dtype
                        effnet_c = self.effnet_mappers[len(self.down_blocks) + i](
                            nn.functional.interpolate(
                                effnet.float(), size=x.shape[-2:], mode="bicubic", antialias=True, align_corners=True
                            ).to(dtype)
                        )
                    skip = level_outputs[i] if j == 0 and i > 0 else None
                    if effnet_c is not None:
                        if skip is not None:
                            skip = torch.cat([skip, effnet_c], dim=1)
                        else:
                            skip = effnet_c
                    x = block(x, skip)
                elif isinstance(block, AttnBlock):
                    x = block(x, clip)
                elif isinstance(block, TimestepBlock):
                    x = block(x, r_embed)
                else:
                    x = block(x)
        return x

    def forward(self, x, r, effnet, clip=None, x_cat=None, eps=1e-3, return_noise=True):
        if x_cat is not None:
            x = torch.cat([x, x_cat], dim=1)
        # Process the conditioning embeddings
        r_embed = self.gen_r_embedding(r)
        if clip is not None:
            clip = self.gen_c_embeddings(clip)

        # Model Blocks
        x_in = x
        x = self.embedding(x)
        level_outputs = self._down_encode(x, r_embed, effnet, clip)
        x = self._up_decode(level_outputs, r_embed, effnet, clip)
        a, b = self.clf(x).chunk(2, dim=1)
        b = b.sigmoid() * (1 - eps * 2) + eps
        if return_noise:
            return (x_in - a) / b
        else:
            return a, b


def build():
    return WuerstchenDiffNeXt(c_in=4, c_out=4, c_r=16, patch_size=2, c_cond=12, c_hidden=[4, 8, 16, 16],
                              nhead=[-1, 2, 2, 2], blocks=[1, 1, 1, 1], level_config=["CT", "CTA", "CTA", "CTA"],
                              inject_effnet=[False, True, True, True], effnet_embd=6, clip_embd=10)


def inputs(g):
    image_embeddings = torch.randn((1, 6, 3, 3), generator=g)
    side = int(image_embeddings.size(2) * 10.67)  # latent_dim_scale
    return {"image_embeddings": image_embeddings, "text_encoder_hidden_states": torch.randn((1, 5, 10), generator=g),
            "noise": torch.randn((1, 4, side, side), generator=g)}


def call(model, x, sigma, c):
    dtype = next(model.parameters()).dtype  # self.decoder.dtype
    t = torch.tensor(sigma, dtype=torch.float32, device=x.device)  # the scheduler's ratio
    ratio = t.expand(x.size(0)).to(dtype)
    return model(x, r=ratio, effnet=c["image_embeddings"], clip=c["text_encoder_hidden_states"])


PRODUCER = dict(
    library_source="replica of huggingface/diffusers pipelines/wuerstchen/modeling_wuerstchen_diffnext.py@b593363cb4db "
                   "and modeling_wuerstchen_common.py@5345e05bc414 (torch 1.13)",
    timestep="r = sigma (the DDPMWuerstchenScheduler ratio), t.expand(B).to(the decoder's dtype)",
    velocity="the prediction as is (WuerstchenDecoderPipeline's default guidance 0: no CFG)",
    note="WuerstchenDiffNeXt, c_hidden [4, 8, 16, 16], one layer per level: CLIP rows Linear + LayerNorm; ratio "
         "sinusoid in the forward; PixelUnshuffle(2)-conv-LayerNorm embedding; levels down by LayerNorm + 2x2 conv "
         "stride 2, up by LayerNorm + ConvTranspose2d; ResBlockStageB (depthwise conv, LayerNorm, skip joined, "
         "channels-last Linear-GELU-GRN-Linear); TimestepBlocks; AttnBlocks at levels 1-3; the 3x3 EfficientNet map "
         "resized by antialiased bicubic (align_corners) to 8, 4, 2 and back, through per-level 1x1 convs, joined as "
         "the ResBlocks' skip; clf PixelShuffle(2), chunked: (x_in − a) / (sigmoid(b)·0.998 + 1e-3)")

if __name__ == "__main__":
    capture("wuerstchen_decoder", build, inputs, call, sys.argv[1], PRODUCER)
