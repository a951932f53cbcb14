"""Stable Diffusion's UNet (UNet2DConditionModel, SD 1.x layout), reimplemented for torch 1.13 (no diffusers
here), captured small in f32 on CPU.

Follows huggingface/diffusers src/diffusers/models/unets/unet_2d_condition.py (UNet2DConditionModel's forward
with the defaults SD 1.x leaves: no class, addition or encoder-hidden-state embeddings, no center_input_sample,
no FreeU) and the parts it imports: unet_2d_blocks.py (CrossAttnDownBlock2D, DownBlock2D,
UNetMidBlock2DCrossAttn, UpBlock2D, CrossAttnUpBlock2D), resnet.py (ResnetBlock2D with time_embedding_norm
"default", output_scale_factor 1, a 1x1 conv_shortcut where the widths differ), downsampling.py (Downsample2D: a
3x3 convolution of stride 2, padding 1), upsampling.py (Upsample2D: nearest ×2 by F.interpolate, in f32 for a
bf16 input, then a 3x3 convolution), transformers/transformer_2d.py (Transformer2DModel on continuous inputs:
GroupNorm ε 1e-6, a 1x1 conv proj_in, the map's cells as rows, BasicTransformerBlocks, back to a map, a 1x1 conv
proj_out, plus the input), attention.py (BasicTransformerBlock, norm_type "layer_norm": self-attention, cross-
attention to the text, a GEGLU FeedForward, each pre-norm with a residual), attention_processor.py (Attention
with AttnProcessor2_0: to_q/to_k/to_v without bias, to_out with bias) and embeddings.py (Timesteps with
flip_sin_to_cos and shift 0, TimestepEmbedding Linear-SiLU-Linear). The same module tree, parameter names and
shapes, call boundaries, and arithmetic line for line. Stand-in for what torch 1.13 lacks:
F.scaled_dot_product_attention (its math path).

The constructs it shows (none of them a transformer's block stack): a convolutional encoder-decoder; the
timestep embedding projected into every residual block (SiLU, Linear, added per channel to the map between
two GroupNorm-SiLU-conv steps); skip connections saved after every layer and downsampler of the way down and
joined by channels to the way up, in reverse; a transformer over each map's cells at some resolutions; one
SiLU module called several times per block.

Pipeline as StableDiffusionPipeline calls it without guidance: timestep = the scheduler's t (here σ·1000, f32,
one per batch); encoder_hidden_states the text encoder's states [1, 6, 32]; the output the noise prediction,
taken as the velocity as is (the capture's flow Euler loop).

usage: /usr/bin/python3 bench/unseen/replicas/sd_unet.py OUTDIR [--small] [--xl]
"""
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

from parts import TimestepEmbedding, Timesteps
from run import capture, sdpa


class Attention(nn.Module):
    def __init__(self, query_dim, cross_attention_dim=None, heads=8, dim_head=64):
        super().__init__()
        inner = heads * dim_head
        self.heads = heads
        self.to_q = nn.Linear(query_dim, inner, bias=False)
        self.to_k = nn.Linear(cross_attention_dim or query_dim, inner, bias=False)
        self.to_v = nn.Linear(cross_attention_dim or query_dim, inner, bias=False)
        self.to_out = nn.ModuleList([nn.Linear(inner, query_dim, bias=True), nn.Dropout(0.0)])

    def forward(self, hidden_states, encoder_hidden_states=None, attention_mask=None):
        batch_size = hidden_states.shape[0]
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
        return self.to_out[1](hidden_states)


class GEGLU(nn.Module):
    def __init__(self, dim_in, dim_out):
        super().__init__()
        self.proj = nn.Linear(dim_in, dim_out * 2)

    def forward(self, hidden_states):
        hidden_states, gate = self.proj(hidden_states).chunk(2, dim=-1)
        return hidden_states * F.gelu(gate)


class FeedForward(nn.Module):
    def __init__(self, dim, mult=4):
        super().__init__()
        self.net = nn.ModuleList([GEGLU(dim, dim * mult), nn.Dropout(0.0), nn.Linear(dim * mult, dim)])

    def forward(self, hidden_states):
        for module in self.net:
            hidden_states = module(hidden_states)
        return hidden_states


class BasicTransformerBlock(nn.Module):
    def __init__(self, dim, heads, dim_head, cross_attention_dim):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn1 = Attention(dim, heads=heads, dim_head=dim_head)
        self.norm2 = nn.LayerNorm(dim)
        self.attn2 = Attention(dim, cross_attention_dim=cross_attention_dim, heads=heads, dim_head=dim_head)
        self.norm3 = nn.LayerNorm(dim)
        self.ff = FeedForward(dim)

    def forward(self, hidden_states, encoder_hidden_states=None):
        hidden_states = self.attn1(self.norm1(hidden_states)) + hidden_states
        hidden_states = self.attn2(self.norm2(hidden_states), encoder_hidden_states=encoder_hidden_states) + hidden_states
        return self.ff(self.norm3(hidden_states)) + hidden_states


class Transformer2DModel(nn.Module):
    """linear: use_linear_projection (SD 2.x, SDXL), proj_in and proj_out Linear over the cells as rows."""

    def __init__(self, heads, dim_head, in_channels, cross_attention_dim, groups, linear=False, layers=1):
        super().__init__()
        inner = heads * dim_head
        self.linear = linear
        self.norm = nn.GroupNorm(num_groups=groups, num_channels=in_channels, eps=1e-6, affine=True)
        if linear:
            self.proj_in = nn.Linear(in_channels, inner)
        else:
            self.proj_in = nn.Conv2d(in_channels, inner, kernel_size=1, stride=1, padding=0)
        self.transformer_blocks = nn.ModuleList([BasicTransformerBlock(inner, heads, dim_head, cross_attention_dim)
                                                 for _ in range(layers)])
        if linear:
            self.proj_out = nn.Linear(inner, in_channels)
        else:
            self.proj_out = nn.Conv2d(inner, in_channels, kernel_size=1, stride=1, padding=0)

    def forward(self, hidden_states, encoder_hidden_states=None, return_dict=False):
        batch, _, height, width = hidden_states.shape
        residual = hidden_states
        hidden_states = self.norm(hidden_states)
        if not self.linear:
            hidden_states = self.proj_in(hidden_states)
            inner_dim = hidden_states.shape[1]
            hidden_states = hidden_states.permute(0, 2, 3, 1).reshape(batch, height * width, inner_dim)
        else:
            inner_dim = hidden_states.shape[1]
            hidden_states = hidden_states.permute(0, 2, 3, 1).reshape(batch, height * width, inner_dim)
            hidden_states = self.proj_in(hidden_states)
        for block in self.transformer_blocks:
            hidden_states = block(hidden_states, encoder_hidden_states=encoder_hidden_states)
        if not self.linear:
            hidden_states = hidden_states.reshape(batch, height, width, inner_dim).permute(0, 3, 1, 2).contiguous()
            hidden_states = self.proj_out(hidden_states)
        else:
            hidden_states = self.proj_out(hidden_states)
            hidden_states = hidden_states.reshape(batch, height, width, inner_dim).permute(0, 3, 1, 2).contiguous()
        return (hidden_states + residual,)


class ResnetBlock2D(nn.Module):
    """norm: time_embedding_norm, "default" (added before norm2) or "scale_shift" (the time projection twice as
    wide, chunked, norm2(x)·(1 + scale) + shift: Kandinsky's and DeepFloyd IF's). act: the non-linearity ("silu" or
    IF's "gelu"); skip_time_act: the time embedding projected without it first (IF); output_scale_factor: (x + h)
    divided by it (IF's 1.414); down / up: an average pool of 2 or a nearest ×2 (Downsample2D, Upsample2D without a
    conv) of both the input and the normed map inside the block, before conv1 (IF's and Kandinsky's resamplers).
    temb_channels None: no time embedding (a VAE's resnets)."""

    def __init__(self, in_channels, out_channels, temb_channels, groups, eps=1e-5, norm="default", act="silu",
                 skip_time_act=False, output_scale_factor=1.0, down=False, up=False):
        super().__init__()
        self.time_embedding_norm = norm
        self.skip_time_act, self.output_scale_factor = skip_time_act, output_scale_factor
        self.norm1 = nn.GroupNorm(num_groups=groups, num_channels=in_channels, eps=eps, affine=True)
        self.conv1 = nn.Conv2d(in_channels, out_channels, kernel_size=3, stride=1, padding=1)
        self.time_emb_proj = (nn.Linear(temb_channels, 2 * out_channels if norm == "scale_shift" else out_channels)
                              if temb_channels is not None else None)
        self.norm2 = nn.GroupNorm(num_groups=groups, num_channels=out_channels, eps=eps, affine=True)
        self.dropout = nn.Dropout(0.0)
        self.conv2 = nn.Conv2d(out_channels, out_channels, kernel_size=3, stride=1, padding=1)
        self.nonlinearity = nn.GELU() if act == "gelu" else nn.SiLU()
        self.upsample = Upsample2D(in_channels, use_conv=False) if up else None
        self.downsample = Downsample2D(in_channels, use_conv=False) if down else None
        self.conv_shortcut = nn.Conv2d(in_channels, out_channels, 1) if in_channels != out_channels else None

    def forward(self, input_tensor, temb):
        hidden_states = self.norm1(input_tensor)
        hidden_states = self.nonlinearity(hidden_states)
        if self.upsample is not None:
            input_tensor = self.upsample(input_tensor)
            hidden_states = self.upsample(hidden_states)
        elif self.downsample is not None:
            input_tensor = self.downsample(input_tensor)
            hidden_states = self.downsample(hidden_states)
        hidden_states = self.conv1(hidden_states)
        if self.time_emb_proj is not None:
            if not self.skip_time_act:
                temb = self.nonlinearity(temb)
            temb = self.time_emb_proj(temb)[:, :, None, None]
        if self.time_embedding_norm == "default":
            if temb is not None:
                hidden_states = hidden_states + temb
            hidden_states = self.norm2(hidden_states)
        else:
            time_scale, time_shift = torch.chunk(temb, 2, dim=1)
            hidden_states = self.norm2(hidden_states)
            hidden_states = hidden_states * (1 + time_scale) + time_shift
        hidden_states = self.nonlinearity(hidden_states)
        hidden_states = self.dropout(hidden_states)
        hidden_states = self.conv2(hidden_states)
        if self.conv_shortcut is not None:
            input_tensor = self.conv_shortcut(input_tensor.contiguous())
        return (input_tensor + hidden_states) / self.output_scale_factor


class Downsample2D(nn.Module):
    """use_conv: a 3x3 convolution of stride 2 (padding 1, or with padding 0 the map padded by one zero row and
    column at its end first: a VAE encoder's); else an average pool of 2 (diffusers' downsampling.py)."""

    def __init__(self, channels, use_conv=True, padding=1):
        super().__init__()
        self.use_conv, self.padding = use_conv, padding
        self.conv = (nn.Conv2d(channels, channels, kernel_size=3, stride=2, padding=padding) if use_conv
                     else nn.AvgPool2d(2, 2))

    def forward(self, hidden_states):
        if self.use_conv and self.padding == 0:
            hidden_states = F.pad(hidden_states, (0, 1, 0, 1), mode="constant", value=0)
        return self.conv(hidden_states)


class Upsample2D(nn.Module):
    """nearest ×2 (in f32 for a bf16 input), then with use_conv a 3x3 convolution (diffusers' upsampling.py)."""

    def __init__(self, channels, use_conv=True):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, kernel_size=3, padding=1) if use_conv else None

    def forward(self, hidden_states, output_size=None):
        dtype = hidden_states.dtype
        if dtype == torch.bfloat16:
            hidden_states = hidden_states.to(torch.float32)
        if output_size is None:
            hidden_states = F.interpolate(hidden_states, scale_factor=2.0, mode="nearest")
        else:
            hidden_states = F.interpolate(hidden_states, size=output_size, mode="nearest")
        if dtype == torch.bfloat16:
            hidden_states = hidden_states.to(dtype)
        return hidden_states if self.conv is None else self.conv(hidden_states)


class CrossAttnDownBlock2D(nn.Module):
    def __init__(self, cin, cout, temb, heads, cross, groups, add_downsample, linear=False, layers=1):
        super().__init__()
        self.resnets = nn.ModuleList([ResnetBlock2D(cin, cout, temb, groups)])
        self.attentions = nn.ModuleList([Transformer2DModel(heads, cout // heads, cout, cross, groups, linear, layers)])
        self.downsamplers = nn.ModuleList([Downsample2D(cout)]) if add_downsample else None

    def forward(self, hidden_states, temb=None, encoder_hidden_states=None):
        output_states = ()
        for resnet, attn in zip(self.resnets, self.attentions):
            hidden_states = resnet(hidden_states, temb)
            hidden_states = attn(hidden_states, encoder_hidden_states=encoder_hidden_states, return_dict=False)[0]
            output_states = output_states + (hidden_states,)
        if self.downsamplers is not None:
            for downsampler in self.downsamplers:
                hidden_states = downsampler(hidden_states)
            output_states = output_states + (hidden_states,)
        return hidden_states, output_states


class DownBlock2D(nn.Module):
    def __init__(self, cin, cout, temb, groups, add_downsample):
        super().__init__()
        self.resnets = nn.ModuleList([ResnetBlock2D(cin, cout, temb, groups)])
        self.downsamplers = nn.ModuleList([Downsample2D(cout)]) if add_downsample else None

    def forward(self, hidden_states, temb=None):
        output_states = ()
        for resnet in self.resnets:
            hidden_states = resnet(hidden_states, temb)
            output_states = output_states + (hidden_states,)
        if self.downsamplers is not None:
            for downsampler in self.downsamplers:
                hidden_states = downsampler(hidden_states)
            output_states = output_states + (hidden_states,)
        return hidden_states, output_states


class UNetMidBlock2DCrossAttn(nn.Module):
    def __init__(self, channels, temb, heads, cross, groups, linear=False, layers=1):
        super().__init__()
        self.attentions = nn.ModuleList([Transformer2DModel(heads, channels // heads, channels, cross, groups, linear,
                                                            layers)])
        self.resnets = nn.ModuleList([ResnetBlock2D(channels, channels, temb, groups),
                                      ResnetBlock2D(channels, channels, temb, groups)])

    def forward(self, hidden_states, temb=None, encoder_hidden_states=None):
        hidden_states = self.resnets[0](hidden_states, temb)
        for attn, resnet in zip(self.attentions, self.resnets[1:]):
            hidden_states = attn(hidden_states, encoder_hidden_states=encoder_hidden_states, return_dict=False)[0]
            hidden_states = resnet(hidden_states, temb)
        return hidden_states


class UpBlock2D(nn.Module):
    def __init__(self, cin, prev, cout, temb, groups, add_upsample, layers=2):
        super().__init__()
        self.resnets = nn.ModuleList([
            ResnetBlock2D((prev if i == 0 else cout) + (cin if i == layers - 1 else cout), cout, temb, groups)
            for i in range(layers)])
        self.upsamplers = nn.ModuleList([Upsample2D(cout)]) if add_upsample else None

    def forward(self, hidden_states, res_hidden_states_tuple, temb=None, upsample_size=None):
        for resnet in self.resnets:
            res_hidden_states = res_hidden_states_tuple[-1]
            res_hidden_states_tuple = res_hidden_states_tuple[:-1]
            hidden_states = torch.cat([hidden_states, res_hidden_states], dim=1)
            hidden_states = resnet(hidden_states, temb)
        if self.upsamplers is not None:
            for upsampler in self.upsamplers:
                hidden_states = upsampler(hidden_states, upsample_size)
        return hidden_states


class CrossAttnUpBlock2D(nn.Module):
    def __init__(self, cin, prev, cout, temb, heads, cross, groups, add_upsample, linear=False, tlayers=1, layers=2):
        super().__init__()
        self.resnets = nn.ModuleList([
            ResnetBlock2D((prev if i == 0 else cout) + (cin if i == layers - 1 else cout), cout, temb, groups)
            for i in range(layers)])
        self.attentions = nn.ModuleList([Transformer2DModel(heads, cout // heads, cout, cross, groups, linear, tlayers)
                                         for _ in range(layers)])
        self.upsamplers = nn.ModuleList([Upsample2D(cout)]) if add_upsample else None

    def forward(self, hidden_states, res_hidden_states_tuple, temb=None, encoder_hidden_states=None,
                upsample_size=None):
        for resnet, attn in zip(self.resnets, self.attentions):
            res_hidden_states = res_hidden_states_tuple[-1]
            res_hidden_states_tuple = res_hidden_states_tuple[:-1]
            hidden_states = torch.cat([hidden_states, res_hidden_states], dim=1)
            hidden_states = resnet(hidden_states, temb)
            hidden_states = attn(hidden_states, encoder_hidden_states=encoder_hidden_states, return_dict=False)[0]
        if self.upsamplers is not None:
            for upsampler in self.upsamplers:
                hidden_states = upsampler(hidden_states, upsample_size)
        return hidden_states


class UNet2DConditionModel(nn.Module):
    """xl: SDXL's layout (unet_2d_condition.py with addition_embed_type "text_time", use_linear_projection and two
    transformer layers per cross-attention block): the size and crop conditioning's six numbers each through
    Timesteps(8), joined to the pooled text embedding, through add_embedding, added to the time embedding."""

    def __init__(self, in_channels=4, out_channels=4, block_out_channels=(32, 64), heads=2, cross_attention_dim=32,
                 groups=8, xl=False):
        super().__init__()
        c0 = block_out_channels[0]
        temb = c0 * 4
        down_types = ("DownBlock2D", "CrossAttnDownBlock2D") if xl else ("CrossAttnDownBlock2D", "DownBlock2D")
        up_types = ("CrossAttnUpBlock2D", "UpBlock2D") if xl else ("UpBlock2D", "CrossAttnUpBlock2D")
        linear, layers = xl, 2 if xl else 1
        self.xl = xl
        self.conv_in = nn.Conv2d(in_channels, c0, kernel_size=3, padding=1)
        self.time_proj = Timesteps(c0, True, 0)
        self.time_embedding = TimestepEmbedding(c0, temb)
        if xl:
            self.add_time_proj = Timesteps(8, True, 0)
            self.add_embedding = TimestepEmbedding(cross_attention_dim + 6 * 8, temb)
        self.down_blocks = nn.ModuleList()
        output_channel = c0
        for i, kind in enumerate(down_types):
            input_channel, output_channel = output_channel, block_out_channels[i]
            final = i == len(block_out_channels) - 1
            if kind == "CrossAttnDownBlock2D":
                self.down_blocks.append(CrossAttnDownBlock2D(input_channel, output_channel, temb, heads,
                                                             cross_attention_dim, groups, not final, linear, layers))
            else:
                self.down_blocks.append(DownBlock2D(input_channel, output_channel, temb, groups, not final))
        self.mid_block = UNetMidBlock2DCrossAttn(block_out_channels[-1], temb, heads, cross_attention_dim, groups,
                                                 linear, layers)
        # up block i reads prev_output_channel, outputs reversed[i], and its last skip has reversed[i+1] channels
        rev = list(reversed(block_out_channels))
        self.up_blocks = nn.ModuleList()
        output_channel = rev[0]
        for i, kind in enumerate(up_types):
            prev, output_channel = output_channel, rev[i]
            input_channel = rev[min(i + 1, len(rev) - 1)]
            final = i == len(rev) - 1
            if kind == "CrossAttnUpBlock2D":
                self.up_blocks.append(CrossAttnUpBlock2D(input_channel, prev, output_channel, temb, heads,
                                                         cross_attention_dim, groups, not final, linear, layers))
            else:
                self.up_blocks.append(UpBlock2D(input_channel, prev, output_channel, temb, groups, not final))
        self.conv_norm_out = nn.GroupNorm(num_channels=c0, num_groups=groups, eps=1e-5)
        self.conv_act = nn.SiLU()
        self.conv_out = nn.Conv2d(c0, out_channels, kernel_size=3, padding=1)

    def forward(self, sample, timestep, encoder_hidden_states, added_cond_kwargs=None, return_dict=False):
        timesteps = timestep
        if len(timesteps.shape) == 0:
            timesteps = timesteps[None]
        timesteps = timesteps.expand(sample.shape[0])
        t_emb = self.time_proj(timesteps).to(dtype=sample.dtype)
        emb = self.time_embedding(t_emb)
        if self.xl:
            text_embeds = added_cond_kwargs.get("text_embeds")
            time_ids = added_cond_kwargs.get("time_ids")
            time_embeds = self.add_time_proj(time_ids.flatten())
            time_embeds = time_embeds.reshape((text_embeds.shape[0], -1))
            add_embeds = torch.concat([text_embeds, time_embeds], dim=-1)
            add_embeds = add_embeds.to(emb.dtype)
            aug_emb = self.add_embedding(add_embeds)
            emb = emb + aug_emb
        sample = self.conv_in(sample)
        down_block_res_samples = (sample,)
        for downsample_block in self.down_blocks:
            if isinstance(downsample_block, CrossAttnDownBlock2D):
                sample, res_samples = downsample_block(hidden_states=sample, temb=emb,
                                                       encoder_hidden_states=encoder_hidden_states)
            else:
                sample, res_samples = downsample_block(hidden_states=sample, temb=emb)
            down_block_res_samples += res_samples
        sample = self.mid_block(sample, emb, encoder_hidden_states=encoder_hidden_states)
        for i, upsample_block in enumerate(self.up_blocks):
            is_final_block = i == len(self.up_blocks) - 1
            res_samples = down_block_res_samples[-len(upsample_block.resnets):]
            down_block_res_samples = down_block_res_samples[: -len(upsample_block.resnets)]
            upsample_size = None
            if not is_final_block:
                upsample_size = down_block_res_samples[-1].shape[2:]
            if isinstance(upsample_block, CrossAttnUpBlock2D):
                sample = upsample_block(hidden_states=sample, temb=emb, res_hidden_states_tuple=res_samples,
                                        encoder_hidden_states=encoder_hidden_states, upsample_size=upsample_size)
            else:
                sample = upsample_block(hidden_states=sample, temb=emb, res_hidden_states_tuple=res_samples,
                                        upsample_size=upsample_size)
        sample = self.conv_norm_out(sample)
        sample = self.conv_act(sample)
        sample = self.conv_out(sample)
        return (sample,)


SMALL = "--small" in sys.argv
XL = "--xl" in sys.argv


def build():
    # widths 32 and 64, 2 heads, cross-attention to 32-wide text states, GroupNorm of 8 groups, on an 8x8 latent
    # (--small: widths 8 and 16, GroupNorm of 4 groups, 16-wide text: the fixtures/unseen trace)
    if SMALL:
        return UNet2DConditionModel(block_out_channels=(8, 16), cross_attention_dim=16, groups=4, xl=XL)
    return UNet2DConditionModel(xl=XL)


def inputs(g):
    width = 16 if SMALL else 32
    c = {"encoder_hidden_states": torch.randn((1, 6, width), generator=g), "noise": torch.randn((1, 4, 8, 8), generator=g)}
    if XL:
        # StableDiffusionXLPipeline: the pooled text embedding and (original size, crop corner, target size)
        c["text_embeds"] = torch.randn((1, width), generator=g)
        c["time_ids"] = torch.tensor([[64.0, 64.0, 0.0, 0.0, 64.0, 64.0]])
    return c


def call(model, x, sigma, c):
    # StableDiffusionPipeline: the scheduler's t for the whole batch; the noise prediction used as is
    t = torch.tensor([sigma * 1000.0], dtype=torch.float32, device=x.device)
    added = {"text_embeds": c["text_embeds"], "time_ids": c["time_ids"]} if XL else None
    return model(x, t, encoder_hidden_states=c["encoder_hidden_states"], added_cond_kwargs=added, return_dict=False)[0]


PRODUCER = dict(
    library_source="replica of huggingface/diffusers unet_2d_condition.py and the parts it imports (torch 1.13)",
    timestep="sigma*1000, f32 [1] expanded to the batch (StableDiffusionPipeline: the scheduler's timesteps)",
    velocity="the noise prediction as is",
    note="SD 1.x UNet2DConditionModel at widths 32/64: conv_in; CrossAttnDownBlock2D (ResnetBlock2D, "
         "Transformer2DModel, Downsample2D), DownBlock2D (a 1x1 conv shortcut); UNetMidBlock2DCrossAttn; "
         "UpBlock2D and CrossAttnUpBlock2D (the skips joined by channels in reverse, nearest ×2 then conv); "
         "GroupNorm-SiLU-conv_out; time embedding Timesteps(32, flip_sin_to_cos, shift 0) -> Linear-SiLU-Linear, "
         "SiLU -> time_emb_proj added per channel in every resnet; GEGLU FeedForward; self- and cross-attention")

if XL:
    PRODUCER = dict(PRODUCER, note="SDXL's UNet2DConditionModel layout at widths 32/64: DownBlock2D then "
                    "CrossAttnDownBlock2D with two transformer layers and linear projections; the size and crop "
                    "conditioning (six numbers through Timesteps(8)) joined to the pooled text embedding through "
                    "add_embedding and added to the time embedding; otherwise as SD 1.x")

if __name__ == "__main__":
    capture("sdxl_unet" if XL else "sd_unet", build, inputs, call, sys.argv[1], PRODUCER)
