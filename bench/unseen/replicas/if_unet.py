"""DeepFloyd IF's UNet (stage I: UNet2DConditionModel as IF-I configures it) and, with --kandinsky, Kandinsky 2.2's
decoder UNet, reimplemented for torch 1.13 (no diffusers here), captured small in f32 on CPU.

Follows huggingface/diffusers src/diffusers/models/unets/unet_2d_condition.py (UNet2DConditionModel's forward: the
timestep's Timesteps(flip_sin_to_cos, shift 0) through TimestepEmbedding with the config's act_fn, an addition
embedding added to it, the encoder states projected, conv_in, the blocks, GroupNorm-act-conv_out) and the parts the
two configurations use: unet_2d_blocks.py (ResnetDownsampleBlock2D, SimpleCrossAttnDownBlock2D,
UNetMidBlock2DSimpleCrossAttn, SimpleCrossAttnUpBlock2D, ResnetUpsampleBlock2D: resamplers that are ResnetBlock2Ds
pooling or upsampling inside the block), resnet.py (ResnetBlock2D with time_embedding_norm "scale_shift",
skip_time_act and output_scale_factor: sd_unet.py's class), attention_processor.py (Attention with
added_kv_proj_dim and AttnAddedKVProcessor2_0: the group-normed map's queries over the encoder states' add_k/add_v
projections joined before the map's own keys and values, the residual added; cross_attention_norm "group_norm"
normalising the encoder states first) and embeddings.py (TextTimeEmbedding and AttentionPooling for IF's
addition_embed_type "text"; ImageTimeEmbedding and ImageProjection for Kandinsky 2.2's "image" and "image_proj").
The same module tree, parameter names and shapes, call boundaries and arithmetic line for line. Stand-in for what
torch 1.13 lacks: F.scaled_dot_product_attention (its math path).

IF (default): act_fn gelu everywhere (the time embedding, the resnets, conv_act), resnets with skip_time_act and
output_scale_factor 1.414, T5 states [1, 6, 24] projected to the cross-attention width (encoder_hid_proj) and pooled
by the text-time embedding from their unprojected form, 3 channels in and 6 out (the first 3 the noise prediction,
the last 3 the learned variance the pipeline drops). Kandinsky 2.2: act_fn silu, output scale 1, no
cross-attention norm, the image embedding [1, 24] made the encoder states (32 rows) and the time embedding's
addend, 4 channels in and 8 out. Both with widths 16 and 32, attention heads of 8 channels, GroupNorm of 4 groups
(upstream's 32 need 32 channels), an 8x8 sample.

Pipeline as IFPipeline / KandinskyV22Pipeline call it without guidance: timestep = the scheduler's t (here
σ·1000, f32, one per batch); the output's first half of channels taken as the velocity (the pipelines' split).

usage: /usr/bin/python3 bench/unseen/replicas/if_unet.py OUTDIR [--kandinsky]
"""
import math
import sys

import torch
import torch.nn as nn

from parts import Timesteps
from run import capture, sdpa
from sd_unet import ResnetBlock2D


class Attention(nn.Module):
    """diffusers' Attention(query_dim=c, cross_attention_dim=c, heads, dim_head, added_kv_proj_dim, norm_num_groups,
    bias=True, upcast_softmax=True, cross_attention_norm) with AttnAddedKVProcessor2_0."""

    def __init__(self, query_dim, heads, dim_head, added_kv_proj_dim, groups, cross_attention_norm=None):
        super().__init__()
        inner = heads * dim_head
        self.heads = heads
        self.group_norm = nn.GroupNorm(num_channels=query_dim, num_groups=groups, eps=1e-5, affine=True)
        self.norm_cross = (nn.GroupNorm(num_channels=added_kv_proj_dim, num_groups=groups, eps=1e-5, affine=True)
                           if cross_attention_norm == "group_norm" else None)
        self.to_q = nn.Linear(query_dim, inner, bias=True)
        self.to_k = nn.Linear(query_dim, inner, bias=True)
        self.to_v = nn.Linear(query_dim, inner, bias=True)
        self.add_k_proj = nn.Linear(added_kv_proj_dim, inner)
        self.add_v_proj = nn.Linear(added_kv_proj_dim, inner)
        self.to_out = nn.ModuleList([nn.Linear(inner, query_dim, bias=True), nn.Dropout(0.0)])

    def head_to_batch_dim(self, tensor):
        batch_size, seq_len, dim = tensor.shape
        tensor = tensor.reshape(batch_size, seq_len, self.heads, dim // self.heads)
        return tensor.permute(0, 2, 1, 3)

    def forward(self, hidden_states, encoder_hidden_states=None):
        residual = hidden_states
        hidden_states = hidden_states.view(hidden_states.shape[0], hidden_states.shape[1], -1).transpose(1, 2)
        batch_size, sequence_length, _ = hidden_states.shape
        if encoder_hidden_states is None:
            encoder_hidden_states = hidden_states
        elif self.norm_cross is not None:
            encoder_hidden_states = self.norm_cross(encoder_hidden_states.transpose(1, 2)).transpose(1, 2)
        hidden_states = self.group_norm(hidden_states.transpose(1, 2)).transpose(1, 2)
        query = self.head_to_batch_dim(self.to_q(hidden_states))
        encoder_hidden_states_key_proj = self.head_to_batch_dim(self.add_k_proj(encoder_hidden_states))
        encoder_hidden_states_value_proj = self.head_to_batch_dim(self.add_v_proj(encoder_hidden_states))
        key = self.head_to_batch_dim(self.to_k(hidden_states))
        value = self.head_to_batch_dim(self.to_v(hidden_states))
        key = torch.cat([encoder_hidden_states_key_proj, key], dim=2)
        value = torch.cat([encoder_hidden_states_value_proj, value], dim=2)
        hidden_states = sdpa(query, key, value)
        hidden_states = hidden_states.transpose(1, 2).reshape(batch_size, -1, residual.shape[1])
        hidden_states = self.to_out[0](hidden_states)
        hidden_states = self.to_out[1](hidden_states)
        hidden_states = hidden_states.transpose(-1, -2).reshape(residual.shape)
        return hidden_states + residual


class AttentionPooling(nn.Module):
    """embeddings.py's AttentionPooling: the rows' mean plus a learned position as a class token, one query from it
    over [class, rows], q and k each scaled by d^(−1/4)."""

    def __init__(self, num_heads, embed_dim):
        super().__init__()
        self.positional_embedding = nn.Parameter(torch.randn(1, embed_dim) / embed_dim ** 0.5)
        self.k_proj = nn.Linear(embed_dim, embed_dim)
        self.q_proj = nn.Linear(embed_dim, embed_dim)
        self.v_proj = nn.Linear(embed_dim, embed_dim)
        self.num_heads = num_heads
        self.dim_per_head = embed_dim // self.num_heads

    def forward(self, x):
        bs, length, width = x.size()

        def shape(x):
            x = x.view(bs, -1, self.num_heads, self.dim_per_head)
            x = x.transpose(1, 2)
            x = x.reshape(bs * self.num_heads, -1, self.dim_per_head)
            return x.transpose(1, 2)

        class_token = x.mean(dim=1, keepdim=True) + self.positional_embedding.to(x.dtype)
        x = torch.cat([class_token, x], dim=1)
        q = shape(self.q_proj(class_token))
        k = shape(self.k_proj(x))
        v = shape(self.v_proj(x))
        scale = 1 / math.sqrt(math.sqrt(self.dim_per_head))
        weight = torch.einsum("bct,bcs->bts", q * scale, k * scale)
        weight = torch.softmax(weight.float(), dim=-1).type(weight.dtype)
        a = torch.einsum("bts,bcs->bct", weight, v)
        a = a.reshape(bs, -1, 1).transpose(1, 2)
        return a[:, 0, :]


class TextTimeEmbedding(nn.Module):
    def __init__(self, encoder_dim, time_embed_dim, num_heads=64):
        super().__init__()
        self.norm1 = nn.LayerNorm(encoder_dim)
        self.pool = AttentionPooling(num_heads, encoder_dim)
        self.proj = nn.Linear(encoder_dim, time_embed_dim)
        self.norm2 = nn.LayerNorm(time_embed_dim)

    def forward(self, hidden_states):
        return self.norm2(self.proj(self.pool(self.norm1(hidden_states))))


class ImageTimeEmbedding(nn.Module):
    def __init__(self, image_embed_dim, time_embed_dim):
        super().__init__()
        self.image_proj = nn.Linear(image_embed_dim, time_embed_dim)
        self.image_norm = nn.LayerNorm(time_embed_dim)

    def forward(self, image_embeds):
        return self.image_norm(self.image_proj(image_embeds))


class ImageProjection(nn.Module):
    def __init__(self, image_embed_dim, cross_attention_dim, num_image_text_embeds=32):
        super().__init__()
        self.num_image_text_embeds = num_image_text_embeds
        self.image_embeds = nn.Linear(image_embed_dim, num_image_text_embeds * cross_attention_dim)
        self.norm = nn.LayerNorm(cross_attention_dim)

    def forward(self, image_embeds):
        batch_size = image_embeds.shape[0]
        image_embeds = self.image_embeds(image_embeds.to(self.image_embeds.weight.dtype))
        image_embeds = image_embeds.reshape(batch_size, self.num_image_text_embeds, -1)
        return self.norm(image_embeds)


class TimestepEmbedding(nn.Module):
    def __init__(self, in_channels, time_embed_dim, act="silu"):
        super().__init__()
        self.linear_1 = nn.Linear(in_channels, time_embed_dim, True)
        self.act = nn.GELU() if act == "gelu" else nn.SiLU()
        self.linear_2 = nn.Linear(time_embed_dim, time_embed_dim, True)

    def forward(self, sample):
        return self.linear_2(self.act(self.linear_1(sample)))


class ResnetDownsampleBlock2D(nn.Module):
    def __init__(self, cin, cout, temb, groups, add_downsample, resnet, layers=1):
        super().__init__()
        self.resnets = nn.ModuleList([ResnetBlock2D(cin if i == 0 else cout, cout, temb, groups, **resnet)
                                      for i in range(layers)])
        self.downsamplers = (nn.ModuleList([ResnetBlock2D(cout, cout, temb, groups, down=True, **resnet)])
                             if add_downsample else None)

    def forward(self, hidden_states, temb=None):
        output_states = ()
        for resnet in self.resnets:
            hidden_states = resnet(hidden_states, temb)
            output_states += (hidden_states,)
        if self.downsamplers is not None:
            for downsampler in self.downsamplers:
                hidden_states = downsampler(hidden_states, temb)
            output_states += (hidden_states,)
        return hidden_states, output_states


class SimpleCrossAttnDownBlock2D(nn.Module):
    def __init__(self, cin, cout, temb, groups, add_downsample, resnet, head_dim, cross, norm, layers=1):
        super().__init__()
        heads = cout // head_dim
        self.resnets = nn.ModuleList([ResnetBlock2D(cin if i == 0 else cout, cout, temb, groups, **resnet)
                                      for i in range(layers)])
        self.attentions = nn.ModuleList([Attention(cout, heads, head_dim, cross, groups, norm) for _ in range(layers)])
        self.downsamplers = (nn.ModuleList([ResnetBlock2D(cout, cout, temb, groups, down=True, **resnet)])
                             if add_downsample else None)

    def forward(self, hidden_states, temb=None, encoder_hidden_states=None):
        output_states = ()
        for resnet, attn in zip(self.resnets, self.attentions):
            hidden_states = resnet(hidden_states, temb)
            hidden_states = attn(hidden_states, encoder_hidden_states=encoder_hidden_states)
            output_states += (hidden_states,)
        if self.downsamplers is not None:
            for downsampler in self.downsamplers:
                hidden_states = downsampler(hidden_states, temb)
            output_states += (hidden_states,)
        return hidden_states, output_states


class UNetMidBlock2DSimpleCrossAttn(nn.Module):
    def __init__(self, channels, temb, groups, resnet, head_dim, cross, norm, layers=1):
        super().__init__()
        heads = channels // head_dim
        self.resnets = nn.ModuleList([ResnetBlock2D(channels, channels, temb, groups, **resnet)
                                      for _ in range(layers + 1)])
        self.attentions = nn.ModuleList([Attention(channels, heads, head_dim, cross, groups, norm)
                                         for _ in range(layers)])

    def forward(self, hidden_states, temb=None, encoder_hidden_states=None):
        hidden_states = self.resnets[0](hidden_states, temb)
        for attn, resnet in zip(self.attentions, self.resnets[1:]):
            hidden_states = attn(hidden_states, encoder_hidden_states=encoder_hidden_states)
            hidden_states = resnet(hidden_states, temb)
        return hidden_states


class ResnetUpsampleBlock2D(nn.Module):
    def __init__(self, cin, prev, cout, temb, groups, add_upsample, resnet, layers=2):
        super().__init__()
        self.resnets = nn.ModuleList([
            ResnetBlock2D((prev if i == 0 else cout) + (cin if i == layers - 1 else cout), cout, temb, groups, **resnet)
            for i in range(layers)])
        self.upsamplers = (nn.ModuleList([ResnetBlock2D(cout, cout, temb, groups, up=True, **resnet)])
                           if add_upsample else None)

    def forward(self, hidden_states, res_hidden_states_tuple, temb=None):
        for resnet in self.resnets:
            res_hidden_states = res_hidden_states_tuple[-1]
            res_hidden_states_tuple = res_hidden_states_tuple[:-1]
            hidden_states = torch.cat([hidden_states, res_hidden_states], dim=1)
            hidden_states = resnet(hidden_states, temb)
        if self.upsamplers is not None:
            for upsampler in self.upsamplers:
                hidden_states = upsampler(hidden_states, temb)
        return hidden_states


class SimpleCrossAttnUpBlock2D(nn.Module):
    def __init__(self, cin, prev, cout, temb, groups, add_upsample, resnet, head_dim, cross, norm, layers=2):
        super().__init__()
        heads = cout // head_dim
        self.resnets = nn.ModuleList([
            ResnetBlock2D((prev if i == 0 else cout) + (cin if i == layers - 1 else cout), cout, temb, groups, **resnet)
            for i in range(layers)])
        self.attentions = nn.ModuleList([Attention(cout, heads, head_dim, cross, groups, norm) for _ in range(layers)])
        self.upsamplers = (nn.ModuleList([ResnetBlock2D(cout, cout, temb, groups, up=True, **resnet)])
                           if add_upsample else None)

    def forward(self, hidden_states, res_hidden_states_tuple, temb=None, encoder_hidden_states=None):
        for resnet, attn in zip(self.resnets, self.attentions):
            res_hidden_states = res_hidden_states_tuple[-1]
            res_hidden_states_tuple = res_hidden_states_tuple[:-1]
            hidden_states = torch.cat([hidden_states, res_hidden_states], dim=1)
            hidden_states = resnet(hidden_states, temb)
            hidden_states = attn(hidden_states, encoder_hidden_states=encoder_hidden_states)
        if self.upsamplers is not None:
            for upsampler in self.upsamplers:
                hidden_states = upsampler(hidden_states, temb)
        return hidden_states


class UNet2DConditionModel(nn.Module):
    """The IF-I / Kandinsky 2.2 configuration: down (ResnetDownsampleBlock2D, SimpleCrossAttnDownBlock2D), mid
    UNetMidBlock2DSimpleCrossAttn, up (SimpleCrossAttnUpBlock2D, ResnetUpsampleBlock2D), scale_shift resnets."""

    def __init__(self, in_channels, out_channels, block_out_channels=(16, 32), head_dim=8, cross_attention_dim=16,
                 encoder_hid_dim=24, groups=4, kandinsky=False, addition_heads=2):
        super().__init__()
        c0 = block_out_channels[0]
        temb = c0 * 4
        act = "silu" if kandinsky else "gelu"
        self.kandinsky = kandinsky
        resnet = dict(norm="scale_shift", act=act, skip_time_act=not kandinsky,
                      output_scale_factor=1.0 if kandinsky else 1.414)
        norm = None if kandinsky else "group_norm"
        self.conv_in = nn.Conv2d(in_channels, c0, kernel_size=3, padding=1)
        self.time_proj = Timesteps(c0, True, 0)
        self.time_embedding = TimestepEmbedding(c0, temb, act=act)
        if kandinsky:
            self.encoder_hid_proj = ImageProjection(encoder_hid_dim, cross_attention_dim)
            self.add_embedding = ImageTimeEmbedding(encoder_hid_dim, temb)
        else:
            self.encoder_hid_proj = nn.Linear(encoder_hid_dim, cross_attention_dim)
            self.add_embedding = TextTimeEmbedding(encoder_hid_dim, temb, num_heads=addition_heads)
        n = len(block_out_channels)
        self.down_blocks = nn.ModuleList()
        output_channel = c0
        for i in range(n):
            input_channel, output_channel = output_channel, block_out_channels[i]
            final = i == n - 1
            if i == 0:
                self.down_blocks.append(ResnetDownsampleBlock2D(input_channel, output_channel, temb, groups,
                                                                not final, resnet))
            else:
                self.down_blocks.append(SimpleCrossAttnDownBlock2D(input_channel, output_channel, temb, groups,
                                                                   not final, resnet, head_dim, cross_attention_dim,
                                                                   norm))
        self.mid_block = UNetMidBlock2DSimpleCrossAttn(block_out_channels[-1], temb, groups, resnet, head_dim,
                                                       cross_attention_dim, norm)
        rev = list(reversed(block_out_channels))
        self.up_blocks = nn.ModuleList()
        output_channel = rev[0]
        for i in range(n):
            prev, output_channel = output_channel, rev[i]
            input_channel = rev[min(i + 1, n - 1)]
            final = i == n - 1
            if final:
                self.up_blocks.append(ResnetUpsampleBlock2D(input_channel, prev, output_channel, temb, groups,
                                                            not final, resnet))
            else:
                self.up_blocks.append(SimpleCrossAttnUpBlock2D(input_channel, prev, output_channel, temb, groups,
                                                               not final, resnet, head_dim, cross_attention_dim, norm))
        self.conv_norm_out = nn.GroupNorm(num_channels=c0, num_groups=groups, eps=1e-5)
        self.conv_act = nn.SiLU() if kandinsky else nn.GELU()
        self.conv_out = nn.Conv2d(c0, out_channels, kernel_size=3, padding=1)

    def forward(self, sample, timestep, encoder_hidden_states=None, added_cond_kwargs=None, return_dict=False):
        timesteps = timestep
        if len(timesteps.shape) == 0:
            timesteps = timesteps[None]
        timesteps = timesteps.expand(sample.shape[0])
        t_emb = self.time_proj(timesteps).to(dtype=sample.dtype)
        emb = self.time_embedding(t_emb)
        if self.kandinsky:
            image_embs = added_cond_kwargs.get("image_embeds")
            aug_emb = self.add_embedding(image_embs)
        else:
            aug_emb = self.add_embedding(encoder_hidden_states)
        emb = emb + aug_emb
        if self.kandinsky:
            encoder_hidden_states = self.encoder_hid_proj(added_cond_kwargs.get("image_embeds"))
        else:
            encoder_hidden_states = self.encoder_hid_proj(encoder_hidden_states)
        sample = self.conv_in(sample)
        down_block_res_samples = (sample,)
        for downsample_block in self.down_blocks:
            if isinstance(downsample_block, SimpleCrossAttnDownBlock2D):
                sample, res_samples = downsample_block(hidden_states=sample, temb=emb,
                                                       encoder_hidden_states=encoder_hidden_states)
            else:
                sample, res_samples = downsample_block(hidden_states=sample, temb=emb)
            down_block_res_samples += res_samples
        sample = self.mid_block(sample, emb, encoder_hidden_states=encoder_hidden_states)
        for upsample_block in self.up_blocks:
            res_samples = down_block_res_samples[-len(upsample_block.resnets):]
            down_block_res_samples = down_block_res_samples[: -len(upsample_block.resnets)]
            if isinstance(upsample_block, SimpleCrossAttnUpBlock2D):
                sample = upsample_block(hidden_states=sample, temb=emb, res_hidden_states_tuple=res_samples,
                                        encoder_hidden_states=encoder_hidden_states)
            else:
                sample = upsample_block(hidden_states=sample, temb=emb, res_hidden_states_tuple=res_samples)
        sample = self.conv_norm_out(sample)
        sample = self.conv_act(sample)
        sample = self.conv_out(sample)
        return (sample,)


KANDINSKY = "--kandinsky" in sys.argv


def build():
    if KANDINSKY:
        return UNet2DConditionModel(4, 8, kandinsky=True)
    return UNet2DConditionModel(3, 6)


def inputs(g):
    if KANDINSKY:
        return {"image_embeds": torch.randn((1, 24), generator=g), "noise": torch.randn((1, 4, 8, 8), generator=g)}
    return {"encoder_hidden_states": torch.randn((1, 6, 24), generator=g), "noise": torch.randn((1, 3, 8, 8), generator=g)}


def call(model, x, sigma, c):
    # the scheduler's t for the whole batch; the pipelines split the output's channels and keep the first half
    t = torch.tensor([sigma * 1000.0], dtype=torch.float32, device=x.device)
    if KANDINSKY:
        out = model(x, t, encoder_hidden_states=None, added_cond_kwargs={"image_embeds": c["image_embeds"]})[0]
    else:
        out = model(x, t, encoder_hidden_states=c["encoder_hidden_states"])[0]
    noise_pred, _ = out.split(x.shape[1], dim=1)
    return noise_pred


PRODUCER = dict(
    library_source="replica of huggingface/diffusers unet_2d_condition.py (IF-I's configuration) and the parts it "
                   "imports (torch 1.13)",
    timestep="sigma*1000, f32 [1] expanded to the batch (IFPipeline: the scheduler's timesteps)",
    velocity="the output's first 3 of 6 channels (the noise prediction; the learned variance dropped)",
    note="DeepFloyd IF-I's UNet2DConditionModel at widths 16/32: ResnetDownsampleBlock2D and "
         "SimpleCrossAttnDownBlock2D (resamplers are ResnetBlock2Ds pooling inside), UNetMidBlock2DSimpleCrossAttn, "
         "SimpleCrossAttnUpBlock2D and ResnetUpsampleBlock2D; GELU everywhere, scale_shift resnets with "
         "skip_time_act and output scale 1.414; AttnAddedKVProcessor2_0 with the encoder states group-normed; "
         "TextTimeEmbedding's attention pooling over the unprojected T5 states added to the time embedding")

if KANDINSKY:
    PRODUCER = dict(PRODUCER, library_source="replica of huggingface/diffusers unet_2d_condition.py (Kandinsky "
                    "2.2 decoder's configuration) and the parts it imports (torch 1.13)",
                    timestep="sigma*1000, f32 [1] expanded to the batch (KandinskyV22Pipeline)",
                    velocity="the output's first 4 of 8 channels (the pipeline's split)",
                    note="Kandinsky 2.2's decoder UNet2DConditionModel at widths 16/32: the IF-I block layout with "
                    "SiLU, output scale 1, no cross-attention norm; the image embedding through ImageProjection (32 "
                    "rows, LayerNorm) as the encoder states and through ImageTimeEmbedding added to the time "
                    "embedding")

if __name__ == "__main__":
    capture("kandinsky22_unet" if KANDINSKY else "if_unet", build, inputs, call, sys.argv[1], PRODUCER)
