"""Stable Cascade's UNets (StableCascadeUNet: stage C, the prior, and with --decoder stage B), reimplemented for
torch 1.13 (no diffusers here), captured small in f32 on CPU.

Follows huggingface/diffusers src/diffusers/models/unets/unet_stable_cascade.py (commit 0cd1a953): SDCascadeLayerNorm
(a LayerNorm over the channels of a channels-first map), SDCascadeTimestepBlock (x·(1 + a) + b, a and b the sums of
one Linear per conditioning over its chunk of the joined ratio embedding), SDCascadeResBlock (a depthwise conv, the
norm, the skip joined by channels, a channels-last Linear-GELU-GlobalResponseNorm-Linear, plus the input),
SDCascadeAttnBlock (SiLU-Linear over the CLIP states, self-attention keys joined before them, diffusers' Attention
with biases on a 4-D input), UpDownBlock2d, and StableCascadeUNet's forward: the timestep-ratio sinusoid made in the
forward (r·10000, frequencies exp(−i·ln 10⁴/(half − 1)), [sin, cos]) and joined with the sinusoids of the
conditionings not given (zeros_like(r)); the CLIP embeddings mapped, viewed as clip_seq rows each, joined and
normed; a PixelUnshuffle-conv-norm embedding; the way down and the way up with the repeat mappers (the same blocks
run again after a 1x1 conv); the classifier. The same module tree, parameter names and shapes, call boundaries and
arithmetic line for line. Stand-in for what torch 1.13 lacks: F.scaled_dot_product_attention (its math path).

Default, the prior (stage C's layout): two levels of equal resolution (switch_level [False]: a norm and a 1x1 conv
between them, the interpolation disabled), (ResBlock, TimestepBlock, AttnBlock) layers, conditionings sca and crp,
CLIP text, pooled text and image embeddings. --decoder (stage B's layout): patch size 2, two levels (a 2x2 conv of
stride 2 down, a ConvTranspose2d up), attention at the deeper level only, the EfficientNet map and the zero pixel
map each through their mapper and resized bilinear (align_corners) to the map, repeat mappers on the way up, the
sca conditioning only, the pooled text alone.

Pipeline as StableCascadePriorPipeline / StableCascadeDecoderPipeline call it without guidance: timestep_ratio the
scheduler's ratio (here σ, f32, expanded to the batch); the output taken as the velocity as is (the capture's flow
Euler loop).

usage: /usr/bin/python3 bench/unseen/replicas/stable_cascade.py OUTDIR [--decoder]
"""
import math
import sys

import torch
import torch.nn as nn

from run import capture, sdpa


class SDCascadeLayerNorm(nn.LayerNorm):
    def forward(self, x):
        x = x.permute(0, 2, 3, 1)
        x = super().forward(x)
        return x.permute(0, 3, 1, 2)


class SDCascadeTimestepBlock(nn.Module):
    def __init__(self, c, c_timestep, conds=()):
        super().__init__()
        self.mapper = nn.Linear(c_timestep, c * 2)
        self.conds = conds
        for cname in conds:
            setattr(self, f"mapper_{cname}", nn.Linear(c_timestep, c * 2))

    def forward(self, x, t):
        t = t.chunk(len(self.conds) + 1, dim=1)
        a, b = self.mapper(t[0])[:, :, None, None].chunk(2, dim=1)
        for i, c in enumerate(self.conds):
            ac, bc = getattr(self, f"mapper_{c}")(t[i + 1])[:, :, None, None].chunk(2, dim=1)
            a, b = a + ac, b + bc
        return x * (1 + a) + b


class GlobalResponseNorm(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.gamma = nn.Parameter(torch.zeros(1, 1, 1, dim))
        self.beta = nn.Parameter(torch.zeros(1, 1, 1, dim))

    def forward(self, x):
        agg_norm = torch.norm(x, p=2, dim=(1, 2), keepdim=True)
        stand_div_norm = agg_norm / (agg_norm.mean(dim=-1, keepdim=True) + 1e-6)
        return self.gamma * (x * stand_div_norm) + self.beta + x


class SDCascadeResBlock(nn.Module):
    def __init__(self, c, c_skip=0, kernel_size=3):
        super().__init__()
        self.depthwise = nn.Conv2d(c, c, kernel_size=kernel_size, padding=kernel_size // 2, groups=c)
        self.norm = SDCascadeLayerNorm(c, elementwise_affine=False, eps=1e-6)
        self.channelwise = nn.Sequential(nn.Linear(c + c_skip, c * 4), nn.GELU(), GlobalResponseNorm(c * 4),
                                         nn.Dropout(0.0), nn.Linear(c * 4, c))

    def forward(self, x, x_skip=None):
        x_res = x
        x = self.norm(self.depthwise(x))
        if x_skip is not None:
            x = torch.cat([x, x_skip], dim=1)
        x = self.channelwise(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)
        return x + x_res


class Attention(nn.Module):
    """diffusers' Attention(query_dim=c, heads, dim_head=c // heads, bias=True) with AttnProcessor2_0 on a 4-D input."""

    def __init__(self, query_dim, heads, dim_head):
        super().__init__()
        inner = heads * dim_head
        self.heads = heads
        self.to_q = nn.Linear(query_dim, inner, bias=True)
        self.to_k = nn.Linear(query_dim, inner, bias=True)
        self.to_v = nn.Linear(query_dim, inner, bias=True)
        self.to_out = nn.ModuleList([nn.Linear(inner, query_dim, bias=True), nn.Dropout(0.0)])

    def forward(self, hidden_states, encoder_hidden_states=None):
        batch_size, channel, height, width = hidden_states.shape
        hidden_states = hidden_states.view(batch_size, channel, height * width).transpose(1, 2)
        if encoder_hidden_states is None:
            encoder_hidden_states = hidden_states
        query = self.to_q(hidden_states)
        key = self.to_k(encoder_hidden_states)
        value = self.to_v(encoder_hidden_states)
        head_dim = key.shape[-1] // self.heads
        query = query.view(batch_size, -1, self.heads, head_dim).transpose(1, 2)
        key = key.view(batch_size, -1, self.heads, head_dim).transpose(1, 2)
        value = value.view(batch_size, -1, self.heads, head_dim).transpose(1, 2)
        hidden_states = sdpa(query, key, value)
        hidden_states = hidden_states.transpose(1, 2).reshape(batch_size, -1, self.heads * head_dim)
        hidden_states = hidden_states.to(query.dtype)
        hidden_states = self.to_out[0](hidden_states)
        hidden_states = self.to_out[1](hidden_states)
        return hidden_states.transpose(-1, -2).reshape(batch_size, channel, height, width)


class SDCascadeAttnBlock(nn.Module):
    def __init__(self, c, c_cond, nhead, self_attn=True):
        super().__init__()
        self.self_attn = self_attn
        self.norm = SDCascadeLayerNorm(c, elementwise_affine=False, eps=1e-6)
        self.attention = Attention(c, nhead, c // nhead)
        self.kv_mapper = nn.Sequential(nn.SiLU(), nn.Linear(c_cond, c))

    def forward(self, x, kv):
        kv = self.kv_mapper(kv)
        norm_x = self.norm(x)
        if self.self_attn:
            batch_size, channel, _, _ = x.shape
            kv = torch.cat([norm_x.view(batch_size, channel, -1).transpose(1, 2), kv], dim=1)
        return x + self.attention(norm_x, encoder_hidden_states=kv)


class UpDownBlock2d(nn.Module):
    def __init__(self, in_channels, out_channels, mode, enabled=True):
        super().__init__()
        interpolation = (nn.Upsample(scale_factor=2 if mode == "up" else 0.5, mode="bilinear", align_corners=True)
                         if enabled else nn.Identity())
        mapping = nn.Conv2d(in_channels, out_channels, kernel_size=1)
        self.blocks = nn.ModuleList([interpolation, mapping] if mode == "up" else [mapping, interpolation])

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return x


class StableCascadeUNet(nn.Module):
    def __init__(self, in_channels=16, out_channels=16, timestep_ratio_embedding_dim=64, patch_size=1,
                 conditioning_dim=2048, block_out_channels=(2048, 2048), num_attention_heads=(32, 32),
                 down_num_layers_per_block=(8, 24), up_num_layers_per_block=(24, 8),
                 down_blocks_repeat_mappers=(1, 1), up_blocks_repeat_mappers=(1, 1),
                 block_types_per_layer=(("SDCascadeResBlock", "SDCascadeTimestepBlock", "SDCascadeAttnBlock"),
                                        ("SDCascadeResBlock", "SDCascadeTimestepBlock", "SDCascadeAttnBlock")),
                 clip_text_in_channels=None, clip_text_pooled_in_channels=1280, clip_image_in_channels=None,
                 clip_seq=4, effnet_in_channels=None, pixel_mapper_in_channels=None, kernel_size=3, self_attn=True,
                 timestep_conditioning_type=("sca", "crp"), switch_level=None):
        super().__init__()
        self.timestep_ratio_embedding_dim = timestep_ratio_embedding_dim
        self.clip_seq = clip_seq
        self.timestep_conditioning_type = timestep_conditioning_type
        if isinstance(self_attn, bool):
            self_attn = (self_attn,) * len(block_out_channels)
        c0 = block_out_channels[0]
        if effnet_in_channels is not None:
            self.effnet_mapper = nn.Sequential(
                nn.Conv2d(effnet_in_channels, c0 * 4, kernel_size=1), nn.GELU(), nn.Conv2d(c0 * 4, c0, kernel_size=1),
                SDCascadeLayerNorm(c0, elementwise_affine=False, eps=1e-6))
        if pixel_mapper_in_channels is not None:
            self.pixels_mapper = nn.Sequential(
                nn.Conv2d(pixel_mapper_in_channels, c0 * 4, kernel_size=1), nn.GELU(),
                nn.Conv2d(c0 * 4, c0, kernel_size=1), SDCascadeLayerNorm(c0, elementwise_affine=False, eps=1e-6))
        self.clip_txt_pooled_mapper = nn.Linear(clip_text_pooled_in_channels, conditioning_dim * clip_seq)
        if clip_text_in_channels is not None:
            self.clip_txt_mapper = nn.Linear(clip_text_in_channels, conditioning_dim)
        if clip_image_in_channels is not None:
            self.clip_img_mapper = nn.Linear(clip_image_in_channels, conditioning_dim * clip_seq)
        self.clip_norm = nn.LayerNorm(conditioning_dim, elementwise_affine=False, eps=1e-6)
        self.embedding = nn.Sequential(
            nn.PixelUnshuffle(patch_size), nn.Conv2d(in_channels * (patch_size ** 2), c0, kernel_size=1),
            SDCascadeLayerNorm(c0, elementwise_affine=False, eps=1e-6))

        def get_block(block_type, in_channels, nhead, c_skip=0, self_attn=True):
            if block_type == "SDCascadeResBlock":
                return SDCascadeResBlock(in_channels, c_skip, kernel_size=kernel_size)
            if block_type == "SDCascadeAttnBlock":
                return SDCascadeAttnBlock(in_channels, conditioning_dim, nhead, self_attn=self_attn)
            return SDCascadeTimestepBlock(in_channels, timestep_ratio_embedding_dim, conds=timestep_conditioning_type)

        n = len(block_out_channels)
        self.down_blocks, self.down_downscalers, self.down_repeat_mappers = nn.ModuleList(), nn.ModuleList(), nn.ModuleList()
        for i in range(n):
            if i > 0:
                self.down_downscalers.append(nn.Sequential(
                    SDCascadeLayerNorm(block_out_channels[i - 1], elementwise_affine=False, eps=1e-6),
                    UpDownBlock2d(block_out_channels[i - 1], block_out_channels[i], mode="down", enabled=switch_level[i - 1])
                    if switch_level is not None
                    else nn.Conv2d(block_out_channels[i - 1], block_out_channels[i], kernel_size=2, stride=2)))
            else:
                self.down_downscalers.append(nn.Identity())
            down_block = nn.ModuleList()
            for _ in range(down_num_layers_per_block[i]):
                for block_type in block_types_per_layer[i]:
                    down_block.append(get_block(block_type, block_out_channels[i], num_attention_heads[i],
                                                self_attn=self_attn[i]))
            self.down_blocks.append(down_block)
            self.down_repeat_mappers.append(nn.ModuleList(
                nn.Conv2d(block_out_channels[i], block_out_channels[i], kernel_size=1)
                for _ in range(down_blocks_repeat_mappers[i] - 1)))
        self.up_blocks, self.up_upscalers, self.up_repeat_mappers = nn.ModuleList(), nn.ModuleList(), nn.ModuleList()
        for i in reversed(range(n)):
            if i > 0:
                self.up_upscalers.append(nn.Sequential(
                    SDCascadeLayerNorm(block_out_channels[i], elementwise_affine=False, eps=1e-6),
                    UpDownBlock2d(block_out_channels[i], block_out_channels[i - 1], mode="up", enabled=switch_level[i - 1])
                    if switch_level is not None
                    else nn.ConvTranspose2d(block_out_channels[i], block_out_channels[i - 1], kernel_size=2, stride=2)))
            else:
                self.up_upscalers.append(nn.Identity())
            up_block = nn.ModuleList()
            for j in range(up_num_layers_per_block[::-1][i]):
                for k, block_type in enumerate(block_types_per_layer[i]):
                    c_skip = block_out_channels[i] if i < n - 1 and j == k == 0 else 0
                    up_block.append(get_block(block_type, block_out_channels[i], num_attention_heads[i], c_skip=c_skip,
                                              self_attn=self_attn[i]))
            self.up_blocks.append(up_block)
            self.up_repeat_mappers.append(nn.ModuleList(
                nn.Conv2d(block_out_channels[i], block_out_channels[i], kernel_size=1)
                for _ in range(up_blocks_repeat_mappers[::-1][i] - 1)))
        self.clf = nn.Sequential(
            SDCascadeLayerNorm(c0, elementwise_affine=False, eps=1e-6),
            nn.Conv2d(c0, out_channels * (patch_size ** 2), kernel_size=1), nn.PixelShuffle(patch_size))

    def get_timestep_ratio_embedding(self, timestep_ratio, max_positions=10000):
        r = timestep_ratio * max_positions
        half_dim = self.timestep_ratio_embedding_dim // 2
        emb = math.log(max_positions) / (half_dim - 1)
        emb = torch.arange(half_dim, device=r.device).float().mul(-emb).exp()
        emb = r[:, None] * emb[None, :]
        emb = torch.cat([emb.sin(), emb.cos()], dim=1)
        if self.timestep_ratio_embedding_dim % 2 == 1:
            emb = nn.functional.pad(emb, (0, 1), mode="constant")
        return emb.to(dtype=r.dtype)

    def get_clip_embeddings(self, clip_txt_pooled, clip_txt=None, clip_img=None):
        clip_txt_pool = self.clip_txt_pooled_mapper(clip_txt_pooled).view(
            clip_txt_pooled.size(0), clip_txt_pooled.size(1) * self.clip_seq, -1)
        if clip_txt is not None and clip_img is not None:
            clip_txt = self.clip_txt_mapper(clip_txt)
            if len(clip_img.shape) == 2:
                clip_img = clip_img.unsqueeze(1)
            clip_img = self.clip_img_mapper(clip_img).view(clip_img.size(0), clip_img.size(1) * self.clip_seq, -1)
            clip = torch.cat([clip_txt, clip_txt_pool, clip_img], dim=1)
        else:
            clip = clip_txt_pool
        return self.clip_norm(clip)

    def _run(self, block, x, r_embed, clip, skip=None):
        if isinstance(block, SDCascadeResBlock):
            return block(x, skip)
        if isinstance(block, SDCascadeAttnBlock):
            return block(x, clip)
        return block(x, r_embed)

    def _down_encode(self, x, r_embed, clip):
        level_outputs = []
        for down_block, downscaler, repmap in zip(self.down_blocks, self.down_downscalers, self.down_repeat_mappers):
            x = downscaler(x)
            for i in range(len(repmap) + 1):
                for block in down_block:
                    x = self._run(block, x, r_embed, clip)
                if i < len(repmap):
                    x = repmap[i](x)
            level_outputs.insert(0, x)
        return level_outputs

    def _up_decode(self, level_outputs, r_embed, clip):
        x = level_outputs[0]
        for i, (up_block, upscaler, repmap) in enumerate(zip(self.up_blocks, self.up_upscalers, self.up_repeat_mappers)):
            for j in range(len(repmap) + 1):
                for k, block in enumerate(up_block):
                    skip = None
                    if isinstance(block, SDCascadeResBlock):
                        skip = level_outputs[i] if k == 0 and i > 0 else None
                        if skip is not None and (x.size(-1) != skip.size(-1) or x.size(-2) != skip.size(-2)):
                            orig_type = x.dtype
                            x = nn.functional.interpolate(x.float(), skip.shape[-2:], mode="bilinear", align_corners=True)
                            x = x.to(orig_type)
                    x = self._run(block, x, r_embed, clip, skip)
                if j < len(repmap):
                    x = repmap[j](x)
            x = upscaler(x)
        return x

    def forward(self, sample, timestep_ratio, clip_text_pooled, clip_text=None, clip_img=None, effnet=None,
                pixels=None, sca=None, crp=None, return_dict=True):
        if pixels is None:
            pixels = sample.new_zeros(sample.size(0), 3, 8, 8)
        timestep_ratio_embed = self.get_timestep_ratio_embedding(timestep_ratio)
        for c in self.timestep_conditioning_type:
            cond = sca if c == "sca" else crp if c == "crp" else None
            t_cond = cond or torch.zeros_like(timestep_ratio)
            timestep_ratio_embed = torch.cat([timestep_ratio_embed, self.get_timestep_ratio_embedding(t_cond)], dim=1)
        clip = self.get_clip_embeddings(clip_txt_pooled=clip_text_pooled, clip_txt=clip_text, clip_img=clip_img)
        x = self.embedding(sample)
        if hasattr(self, "effnet_mapper") and effnet is not None:
            x = x + self.effnet_mapper(
                nn.functional.interpolate(effnet, size=x.shape[-2:], mode="bilinear", align_corners=True))
        if hasattr(self, "pixels_mapper"):
            x = x + nn.functional.interpolate(self.pixels_mapper(pixels), size=x.shape[-2:], mode="bilinear",
                                              align_corners=True)
        level_outputs = self._down_encode(x, timestep_ratio_embed, clip)
        x = self._up_decode(level_outputs, timestep_ratio_embed, clip)
        return (self.clf(x),)


DECODER = "--decoder" in sys.argv
RES, TIME, ATTN = "SDCascadeResBlock", "SDCascadeTimestepBlock", "SDCascadeAttnBlock"


def build():
    if DECODER:
        # stage B's layout at widths 8/16: patch 2, attention at the second level only, a repeat mapper on the way up
        return StableCascadeUNet(in_channels=4, out_channels=4, timestep_ratio_embedding_dim=16, patch_size=2,
                                 conditioning_dim=16, block_out_channels=(8, 16), num_attention_heads=(-1, 2),
                                 down_num_layers_per_block=(1, 1), up_num_layers_per_block=(1, 1),
                                 down_blocks_repeat_mappers=(1, 1), up_blocks_repeat_mappers=(2, 1),
                                 block_types_per_layer=((RES, TIME), (RES, TIME, ATTN)),
                                 clip_text_pooled_in_channels=12, clip_seq=2, effnet_in_channels=6,
                                 pixel_mapper_in_channels=3, timestep_conditioning_type=("sca",))
    # stage C's layout at width 16: two levels of one resolution, a 1x1 mapping between them
    return StableCascadeUNet(in_channels=4, out_channels=4, timestep_ratio_embedding_dim=16, conditioning_dim=16,
                             block_out_channels=(16, 16), num_attention_heads=(2, 2), down_num_layers_per_block=(1, 1),
                             up_num_layers_per_block=(1, 1), clip_text_in_channels=12, clip_text_pooled_in_channels=12,
                             clip_image_in_channels=10, clip_seq=2, switch_level=(False,))


def inputs(g):
    side = 8 if DECODER else 4  # the maps at 4x4 and 2x2 (the decoder's patches of 2)
    c = {"clip_text_pooled": torch.randn((1, 1, 12), generator=g), "noise": torch.randn((1, 4, side, side), generator=g)}
    if DECODER:
        c["effnet"] = torch.randn((1, 6, 3, 3), generator=g)
    else:
        c["clip_text"] = torch.randn((1, 5, 12), generator=g)
        c["clip_img"] = torch.randn((1, 1, 10), generator=g)
    return c


def call(model, x, sigma, c):
    # the pipelines' timestep_ratio: the scheduler's ratio expanded to the batch, in the model's dtype
    ratio = torch.tensor([sigma], dtype=torch.float32, device=x.device).expand(x.size(0)).to(x.dtype)
    extra = {k: v for k, v in c.items() if k != "clip_text_pooled"}
    return model(x, ratio, c["clip_text_pooled"], return_dict=False, **extra)[0]


PRODUCER = dict(
    library_source="replica of huggingface/diffusers unet_stable_cascade.py (torch 1.13)",
    timestep="timestep_ratio = sigma, [1] expanded to the batch, in the model's dtype (the pipelines' ratio)",
    velocity="the prediction as is",
    note="StableCascadeUNet, stage C's layout at width 16: timestep-ratio sinusoids made in the forward "
         "(r·1e4, ln 1e4/(half − 1), [sin, cos]) for r and the zero sca and crp, joined; CLIP text, pooled and "
         "image embeddings mapped, joined, normed; ResBlocks (depthwise conv, channels-last MLP with GRN), "
         "TimestepBlocks (x·(1 + a) + b summed over three mappers), AttnBlocks (self keys joined before the CLIP rows)")

if DECODER:
    PRODUCER = dict(PRODUCER, note="StableCascadeUNet, stage B's layout at widths 8/16: PixelUnshuffle(2), "
                    "a 2x2 conv of stride 2 down, a ConvTranspose2d up, the EfficientNet map and the zero pixel map "
                    "through their mappers, resized bilinear (align_corners) and added, repeat mappers (the level's "
                    "blocks run twice), the sca conditioning only, pooled text alone")

if __name__ == "__main__":
    capture("stable_cascade_decoder" if DECODER else "stable_cascade", build, inputs, call, sys.argv[1], PRODUCER)
