"""AudioLDM 2's U-Net (AudioLDM2UNet2DConditionModel), reimplemented for torch 1.13 (no diffusers here), captured
small in f32 on CPU.

Follows huggingface/diffusers src/diffusers/pipelines/audioldm2/modeling_audioldm2.py at
0356e18b09909d625e4cff5ac8e008719d9cb77c (checked against 01d97669173f9b0604dba81afbb160eb7fa9cb31; later versions
change only the gradient-checkpointing branch and the typing): AudioLDM2UNet2DConditionModel's __init__ and forward
(positional time embedding, no class embedding, time_embedding_act_fn None, the attention masks turned into additive
biases (1 - mask)·-10000 with a singleton query axis, upstream's upsample_size forwarded only when the latent is
not a multiple of 2**num_upsamplers: here None), its get_down_block / get_up_block, and its own CrossAttnDownBlock2D,
UNetMidBlock2DCrossAttn and CrossAttnUpBlock2D: several Transformer2DModels after each resnet, one per entry of the
block's cross_attention_dim list, the entry None giving a self-attention-only transformer (double_self_attention:
its attn2 attends to the map's own cells), entry idx <= 1 reading encoder_hidden_states with encoder_attention_mask,
idx > 1 encoder_hidden_states_1 with encoder_attention_mask_1 (upstream's encoder_attention_mask_1 fallback kept
line for line). Imported from sd_unet.py where they are upstream's: ResnetBlock2D (resnet.py, time_embedding_norm
"default"), Downsample2D (conv of stride 2, padding 1, name "op"), Upsample2D (nearest ×2 in f32 for bf16, then a
3x3 conv), DownBlock2D and UpBlock2D (unets/unet_2d_blocks.py), FeedForward with GEGLU (attention.py); from
parts.py: Timesteps and TimestepEmbedding (embeddings.py, Linear-SiLU-Linear). Written here because sd_unet.py's take
no mask: Transformer2DModel (transformers/transformer_2d.py, continuous input, GroupNorm ε 1e-6, 1x1 conv
proj_in/proj_out, the encoder_attention_mask passed through), BasicTransformerBlock (attention.py, norm_type
"layer_norm", double_self_attention) and Attention with AttnProcessor2_0 (attention_processor.py:
prepare_attention_mask repeating the bias per head with repeat_interleave, viewed [batch, heads, 1, keys], added to
the scores; to_out then / rescale_output_factor 1.0). Stand-in for what torch 1.13 lacks:
F.scaled_dot_product_attention (run.py's sdpa, its math path, the float mask added to the scaled scores).

The constructs it shows beyond sd_unet.py's SD 1.x UNet: three Transformer2DModels per attention stage, chained
(each one's output, the map plus its residual, the next one's input): a self-attention-only one (both attention
layers of its block self-attend), one cross-attending to the GPT-2 generated embeddings (encoder_hidden_states,
width 12, no mask), one cross-attending to the T5 text embeddings (encoder_hidden_states_1, width 16) under a padding
mask; two conditioning sequences of different widths and lengths read at every level and in the mid block; the int64
padding mask made an additive bias in the top-level forward, shared by every T5 cross-attention; a tall, narrow
latent (time by mel bins) of 8 channels.

Pipeline as AudioLDM2Pipeline (src/diffusers/pipelines/audioldm2/pipeline_audioldm2.py at
7ed3edbe286385083acdbbfba79c69cc46dd9d4b) calls it without guidance: each step self.unet(latent_model_input, t,
encoder_hidden_states=generated_prompt_embeds, encoder_hidden_states_1=prompt_embeds,
encoder_attention_mask_1=attention_mask, return_dict=False)[0]; generated_prompt_embeds the GPT-2 language model's
max_new_tokens (8) generated hidden states (cast to language_model.dtype, so bf16 in the bf16 run), prompt_embeds the
Flan-T5 encoder's last hidden states (cast to text_encoder_2.dtype), attention_mask the T5 tokenizer's int64 mask
(kept int64); here both drawn at random, the T5 mask 1 1 1 1 0 0 (the tokenizer's padding=True pads a batch of
prompts to its longest; a precomputed attention_mask is passed the same way); with guidance the pipeline would
double the batch and padding would come from the negative prompt's max_length padding. t is the scheduler's (DDIM,
epsilon prediction), a 0-d tensor: here σ·1000 as a 0-d f32 tensor (as the other UNet replicas pass σ·1000), not
DDIM's integer timesteps; the noise prediction is taken as the velocity as is (run.py's 3-step flow-matching Euler
loop over SIGMAS, not the pipeline's DDIM sampler).

Tiny config, after tests/pipelines/audioldm2/test_audioldm2.py's dummy U-Net (at
03c9178f0b3e3cb972ce745aeac104d444f294d7: block_out_channels (32, 64), layers_per_block 2, down (DownBlock2D,
CrossAttnDownBlock2D), up (CrossAttnUpBlock2D, UpBlock2D), cross_attention_dim ([None, 16, 32], [None, 16, 32]))
and the conversion script (scripts/convert_original_audioldm2_to_diffusers.py at
3c36d5d7384876b1b63ff2671616a20e7884ced7, which repeats the original context_dim list for every block):
block_out_channels (4, 8) (smaller than the usual 8/16: three transformers a stage make 1212 calls, and the
trace's per-entry overhead then dominates; 8/16 gave a 4.0 MB f32 trace, 4/8 gives 2.8 MB), layers_per_block 1 (two
resnets an up block), down (DownBlock2D, CrossAttnDownBlock2D), up (CrossAttnUpBlock2D, UpBlock2D),
cross_attention_dim ([None, 12, 16], [None, 12, 16]) (GPT-2 width 12, T5 width 16: the released 768 and 1024 in
ratio, both unlike the query width 8), attention_head_dim 2 (upstream reads it as the head count: 2 heads of width 4
at level 1 and in the mid block), norm_num_groups 2, norm_eps 1e-5, flip_sin_to_cos True, freq_shift 0,
time_embed_dim 16, in_channels = out_channels 8 (AudioLDM 2's VAE latent channels; the test's dummy uses 4); latents
[1, 8, 8, 4] (8 time frames by 4 mel bins; maps of 8x4 and 4x2), generated embeddings [1, 8, 12] (max_new_tokens
8), T5 embeddings [1, 6, 16] with mask [1, 6].

usage: /usr/bin/python3 bench/unseen/replicas/audioldm2_unet.py OUTDIR
REPLICA_DTYPE=bf16 [REPLICA_DEVICE=cuda] as run.py's replicas: the bf16 run, beside the f32 one.
"""
import sys

import torch
import torch.nn as nn

from parts import TimestepEmbedding, Timesteps
from run import capture, sdpa
from sd_unet import Downsample2D, DownBlock2D, FeedForward, ResnetBlock2D, Upsample2D, UpBlock2D


class Attention(nn.Module):
    """attention_processor.py's Attention (bias False, out_bias True) with AttnProcessor2_0."""

    def __init__(self, query_dim, cross_attention_dim=None, heads=8, dim_head=64):
        super().__init__()
        inner = heads * dim_head
        self.heads = heads
        self.rescale_output_factor = 1.0
        self.residual_connection = False
        self.to_q = nn.Linear(query_dim, inner, bias=False)
        self.to_k = nn.Linear(cross_attention_dim or query_dim, inner, bias=False)
        self.to_v = nn.Linear(cross_attention_dim or query_dim, inner, bias=False)
        self.to_out = nn.ModuleList([nn.Linear(inner, query_dim, bias=True), nn.Dropout(0.0)])

    def prepare_attention_mask(self, attention_mask, target_length, batch_size, out_dim=3):
        head_size = self.heads
        if attention_mask is None:
            return attention_mask
        current_length = attention_mask.shape[-1]
        if current_length != target_length:
            attention_mask = torch.nn.functional.pad(attention_mask, (0, target_length), value=0.0)
        if out_dim == 3:
            if attention_mask.shape[0] < batch_size * head_size:
                attention_mask = attention_mask.repeat_interleave(head_size, dim=0,
                                                                  output_size=attention_mask.shape[0] * head_size)
        elif out_dim == 4:
            attention_mask = attention_mask.unsqueeze(1)
            attention_mask = attention_mask.repeat_interleave(head_size, dim=1,
                                                              output_size=attention_mask.shape[1] * head_size)
        return attention_mask

    def forward(self, hidden_states, encoder_hidden_states=None, attention_mask=None):
        residual = hidden_states
        batch_size, sequence_length, _ = (
            hidden_states.shape if encoder_hidden_states is None else encoder_hidden_states.shape
        )
        if attention_mask is not None:
            attention_mask = self.prepare_attention_mask(attention_mask, sequence_length, batch_size)
            # scaled_dot_product_attention expects attention_mask shape (batch, heads, source_length, target_length)
            attention_mask = attention_mask.view(batch_size, self.heads, -1, attention_mask.shape[-1])
        query = self.to_q(hidden_states)
        if encoder_hidden_states is None:
            encoder_hidden_states = hidden_states
        key = self.to_k(encoder_hidden_states)
        value = self.to_v(encoder_hidden_states)
        inner_dim = key.shape[-1]
        head_dim = inner_dim // self.heads
        query = query.view(batch_size, -1, self.heads, head_dim).transpose(1, 2)
        key = key.view(batch_size, -1, self.heads, head_dim).transpose(1, 2)
        value = value.view(batch_size, -1, self.heads, head_dim).transpose(1, 2)
        hidden_states = sdpa(query, key, value, attention_mask)
        hidden_states = hidden_states.transpose(1, 2).reshape(batch_size, -1, self.heads * head_dim)
        hidden_states = hidden_states.to(query.dtype)
        hidden_states = self.to_out[0](hidden_states)
        hidden_states = self.to_out[1](hidden_states)
        if self.residual_connection:
            hidden_states = hidden_states + residual
        hidden_states = hidden_states / self.rescale_output_factor
        return hidden_states


class BasicTransformerBlock(nn.Module):
    """attention.py's BasicTransformerBlock, norm_type "layer_norm", activation_fn "geglu"; double_self_attention:
    attn2 built without a cross_attention_dim (its keys and values from the cells themselves)."""

    def __init__(self, dim, num_attention_heads, attention_head_dim, cross_attention_dim=None,
                 double_self_attention=False):
        super().__init__()
        self.only_cross_attention = False
        self.norm1 = nn.LayerNorm(dim, elementwise_affine=True, eps=1e-5)
        self.attn1 = Attention(query_dim=dim, heads=num_attention_heads, dim_head=attention_head_dim,
                               cross_attention_dim=None)
        self.norm2 = nn.LayerNorm(dim, eps=1e-5, elementwise_affine=True)
        self.attn2 = Attention(query_dim=dim,
                               cross_attention_dim=cross_attention_dim if not double_self_attention else None,
                               heads=num_attention_heads, dim_head=attention_head_dim)
        self.norm3 = nn.LayerNorm(dim, eps=1e-5, elementwise_affine=True)
        self.ff = FeedForward(dim)

    def forward(self, hidden_states, attention_mask=None, encoder_hidden_states=None, encoder_attention_mask=None):
        # 1. Self-Attention
        norm_hidden_states = self.norm1(hidden_states)
        attn_output = self.attn1(norm_hidden_states,
                                 encoder_hidden_states=encoder_hidden_states if self.only_cross_attention else None,
                                 attention_mask=attention_mask)
        hidden_states = attn_output + hidden_states
        if hidden_states.ndim == 4:
            hidden_states = hidden_states.squeeze(1)
        # 3. Cross-Attention
        norm_hidden_states = self.norm2(hidden_states)
        attn_output = self.attn2(norm_hidden_states, encoder_hidden_states=encoder_hidden_states,
                                 attention_mask=encoder_attention_mask)
        hidden_states = attn_output + hidden_states
        # 4. Feed-forward
        norm_hidden_states = self.norm3(hidden_states)
        ff_output = self.ff(norm_hidden_states)
        hidden_states = ff_output + hidden_states
        if hidden_states.ndim == 4:
            hidden_states = hidden_states.squeeze(1)
        return hidden_states


class Transformer2DModel(nn.Module):
    """transformers/transformer_2d.py on continuous inputs, use_linear_projection False (1x1 conv proj_in and
    proj_out)."""

    def __init__(self, num_attention_heads, attention_head_dim, in_channels, num_layers=1, cross_attention_dim=None,
                 norm_num_groups=32, double_self_attention=False):
        super().__init__()
        inner_dim = num_attention_heads * attention_head_dim
        self.norm = nn.GroupNorm(num_groups=norm_num_groups, num_channels=in_channels, eps=1e-6, affine=True)
        self.proj_in = nn.Conv2d(in_channels, inner_dim, kernel_size=1, stride=1, padding=0)
        self.transformer_blocks = nn.ModuleList([
            BasicTransformerBlock(inner_dim, num_attention_heads, attention_head_dim,
                                  cross_attention_dim=cross_attention_dim, double_self_attention=double_self_attention)
            for _ in range(num_layers)])
        self.proj_out = nn.Conv2d(inner_dim, in_channels, kernel_size=1, stride=1, padding=0)

    def forward(self, hidden_states, encoder_hidden_states=None, attention_mask=None, encoder_attention_mask=None,
                return_dict=True):
        if attention_mask is not None and attention_mask.ndim == 2:
            attention_mask = (1 - attention_mask.to(hidden_states.dtype)) * -10000.0
            attention_mask = attention_mask.unsqueeze(1)
        if encoder_attention_mask is not None and encoder_attention_mask.ndim == 2:
            encoder_attention_mask = (1 - encoder_attention_mask.to(hidden_states.dtype)) * -10000.0
            encoder_attention_mask = encoder_attention_mask.unsqueeze(1)
        # _operate_on_continuous_inputs
        batch_size, _, height, width = hidden_states.shape
        residual = hidden_states
        hidden_states = self.norm(hidden_states)
        hidden_states = self.proj_in(hidden_states)
        inner_dim = hidden_states.shape[1]
        hidden_states = hidden_states.permute(0, 2, 3, 1).reshape(batch_size, height * width, inner_dim)
        for block in self.transformer_blocks:
            hidden_states = block(hidden_states, attention_mask=attention_mask,
                                  encoder_hidden_states=encoder_hidden_states,
                                  encoder_attention_mask=encoder_attention_mask)
        # _get_output_for_continuous_inputs
        hidden_states = hidden_states.reshape(batch_size, height, width, inner_dim).permute(0, 3, 1, 2).contiguous()
        hidden_states = self.proj_out(hidden_states)
        output = hidden_states + residual
        return (output,)


class CrossAttnDownBlock2D(nn.Module):
    def __init__(self, in_channels, out_channels, temb_channels, num_layers=1, transformer_layers_per_block=1,
                 resnet_eps=1e-6, resnet_groups=32, num_attention_heads=1, cross_attention_dim=1280,
                 add_downsample=True, downsample_padding=1):
        super().__init__()
        resnets = []
        attentions = []
        self.has_cross_attention = True
        self.num_attention_heads = num_attention_heads
        if isinstance(cross_attention_dim, int):
            cross_attention_dim = (cross_attention_dim,)
        self.cross_attention_dim = cross_attention_dim
        for i in range(num_layers):
            in_channels = in_channels if i == 0 else out_channels
            resnets.append(ResnetBlock2D(in_channels, out_channels, temb_channels, resnet_groups, eps=resnet_eps))
            for j in range(len(cross_attention_dim)):
                attentions.append(Transformer2DModel(
                    num_attention_heads, out_channels // num_attention_heads, in_channels=out_channels,
                    num_layers=transformer_layers_per_block, cross_attention_dim=cross_attention_dim[j],
                    norm_num_groups=resnet_groups,
                    double_self_attention=True if cross_attention_dim[j] is None else False))
        self.attentions = nn.ModuleList(attentions)
        self.resnets = nn.ModuleList(resnets)
        self.downsamplers = (nn.ModuleList([Downsample2D(out_channels, use_conv=True, padding=downsample_padding)])
                             if add_downsample else None)

    def forward(self, hidden_states, temb=None, encoder_hidden_states=None, attention_mask=None,
                encoder_attention_mask=None, encoder_hidden_states_1=None, encoder_attention_mask_1=None):
        output_states = ()
        num_layers = len(self.resnets)
        num_attention_per_layer = len(self.attentions) // num_layers
        encoder_hidden_states_1 = (
            encoder_hidden_states_1 if encoder_hidden_states_1 is not None else encoder_hidden_states
        )
        encoder_attention_mask_1 = (
            encoder_attention_mask_1 if encoder_hidden_states_1 is not None else encoder_attention_mask
        )
        for i in range(num_layers):
            hidden_states = self.resnets[i](hidden_states, temb)
            for idx, cross_attention_dim in enumerate(self.cross_attention_dim):
                if cross_attention_dim is not None and idx <= 1:
                    forward_encoder_hidden_states = encoder_hidden_states
                    forward_encoder_attention_mask = encoder_attention_mask
                elif cross_attention_dim is not None and idx > 1:
                    forward_encoder_hidden_states = encoder_hidden_states_1
                    forward_encoder_attention_mask = encoder_attention_mask_1
                else:
                    forward_encoder_hidden_states = None
                    forward_encoder_attention_mask = None
                hidden_states = self.attentions[i * num_attention_per_layer + idx](
                    hidden_states,
                    attention_mask=attention_mask,
                    encoder_hidden_states=forward_encoder_hidden_states,
                    encoder_attention_mask=forward_encoder_attention_mask,
                    return_dict=False,
                )[0]
            output_states = output_states + (hidden_states,)
        if self.downsamplers is not None:
            for downsampler in self.downsamplers:
                hidden_states = downsampler(hidden_states)
            output_states = output_states + (hidden_states,)
        return hidden_states, output_states


class UNetMidBlock2DCrossAttn(nn.Module):
    def __init__(self, in_channels, temb_channels, num_layers=1, transformer_layers_per_block=1, resnet_eps=1e-6,
                 resnet_groups=32, num_attention_heads=1, output_scale_factor=1.0, cross_attention_dim=1280):
        super().__init__()
        self.has_cross_attention = True
        self.num_attention_heads = num_attention_heads
        resnet_groups = resnet_groups if resnet_groups is not None else min(in_channels // 4, 32)
        if isinstance(cross_attention_dim, int):
            cross_attention_dim = (cross_attention_dim,)
        self.cross_attention_dim = cross_attention_dim
        # there is always at least one resnet
        resnets = [ResnetBlock2D(in_channels, in_channels, temb_channels, resnet_groups, eps=resnet_eps,
                                 output_scale_factor=output_scale_factor)]
        attentions = []
        for i in range(num_layers):
            for j in range(len(cross_attention_dim)):
                attentions.append(Transformer2DModel(
                    num_attention_heads, in_channels // num_attention_heads, in_channels=in_channels,
                    num_layers=transformer_layers_per_block, cross_attention_dim=cross_attention_dim[j],
                    norm_num_groups=resnet_groups,
                    double_self_attention=True if cross_attention_dim[j] is None else False))
            resnets.append(ResnetBlock2D(in_channels, in_channels, temb_channels, resnet_groups, eps=resnet_eps,
                                         output_scale_factor=output_scale_factor))
        self.attentions = nn.ModuleList(attentions)
        self.resnets = nn.ModuleList(resnets)

    def forward(self, hidden_states, temb=None, encoder_hidden_states=None, attention_mask=None,
                encoder_attention_mask=None, encoder_hidden_states_1=None, encoder_attention_mask_1=None):
        hidden_states = self.resnets[0](hidden_states, temb)
        num_attention_per_layer = len(self.attentions) // (len(self.resnets) - 1)
        encoder_hidden_states_1 = (
            encoder_hidden_states_1 if encoder_hidden_states_1 is not None else encoder_hidden_states
        )
        encoder_attention_mask_1 = (
            encoder_attention_mask_1 if encoder_hidden_states_1 is not None else encoder_attention_mask
        )
        for i in range(len(self.resnets[1:])):
            for idx, cross_attention_dim in enumerate(self.cross_attention_dim):
                if cross_attention_dim is not None and idx <= 1:
                    forward_encoder_hidden_states = encoder_hidden_states
                    forward_encoder_attention_mask = encoder_attention_mask
                elif cross_attention_dim is not None and idx > 1:
                    forward_encoder_hidden_states = encoder_hidden_states_1
                    forward_encoder_attention_mask = encoder_attention_mask_1
                else:
                    forward_encoder_hidden_states = None
                    forward_encoder_attention_mask = None
                hidden_states = self.attentions[i * num_attention_per_layer + idx](
                    hidden_states,
                    attention_mask=attention_mask,
                    encoder_hidden_states=forward_encoder_hidden_states,
                    encoder_attention_mask=forward_encoder_attention_mask,
                    return_dict=False,
                )[0]
            hidden_states = self.resnets[i + 1](hidden_states, temb)
        return hidden_states


class CrossAttnUpBlock2D(nn.Module):
    def __init__(self, in_channels, out_channels, prev_output_channel, temb_channels, num_layers=1,
                 transformer_layers_per_block=1, resnet_eps=1e-6, resnet_groups=32, num_attention_heads=1,
                 cross_attention_dim=1280, add_upsample=True):
        super().__init__()
        resnets = []
        attentions = []
        self.has_cross_attention = True
        self.num_attention_heads = num_attention_heads
        if isinstance(cross_attention_dim, int):
            cross_attention_dim = (cross_attention_dim,)
        self.cross_attention_dim = cross_attention_dim
        for i in range(num_layers):
            res_skip_channels = in_channels if (i == num_layers - 1) else out_channels
            resnet_in_channels = prev_output_channel if i == 0 else out_channels
            resnets.append(ResnetBlock2D(resnet_in_channels + res_skip_channels, out_channels, temb_channels,
                                         resnet_groups, eps=resnet_eps))
            for j in range(len(cross_attention_dim)):
                attentions.append(Transformer2DModel(
                    num_attention_heads, out_channels // num_attention_heads, in_channels=out_channels,
                    num_layers=transformer_layers_per_block, cross_attention_dim=cross_attention_dim[j],
                    norm_num_groups=resnet_groups,
                    double_self_attention=True if cross_attention_dim[j] is None else False))
        self.attentions = nn.ModuleList(attentions)
        self.resnets = nn.ModuleList(resnets)
        self.upsamplers = nn.ModuleList([Upsample2D(out_channels, use_conv=True)]) if add_upsample else None

    def forward(self, hidden_states, res_hidden_states_tuple, temb=None, encoder_hidden_states=None,
                upsample_size=None, attention_mask=None, encoder_attention_mask=None, encoder_hidden_states_1=None,
                encoder_attention_mask_1=None):
        num_layers = len(self.resnets)
        num_attention_per_layer = len(self.attentions) // num_layers
        encoder_hidden_states_1 = (
            encoder_hidden_states_1 if encoder_hidden_states_1 is not None else encoder_hidden_states
        )
        encoder_attention_mask_1 = (
            encoder_attention_mask_1 if encoder_hidden_states_1 is not None else encoder_attention_mask
        )
        for i in range(num_layers):
            # pop res hidden states
            res_hidden_states = res_hidden_states_tuple[-1]
            res_hidden_states_tuple = res_hidden_states_tuple[:-1]
            hidden_states = torch.cat([hidden_states, res_hidden_states], dim=1)
            hidden_states = self.resnets[i](hidden_states, temb)
            for idx, cross_attention_dim in enumerate(self.cross_attention_dim):
                if cross_attention_dim is not None and idx <= 1:
                    forward_encoder_hidden_states = encoder_hidden_states
                    forward_encoder_attention_mask = encoder_attention_mask
                elif cross_attention_dim is not None and idx > 1:
                    forward_encoder_hidden_states = encoder_hidden_states_1
                    forward_encoder_attention_mask = encoder_attention_mask_1
                else:
                    forward_encoder_hidden_states = None
                    forward_encoder_attention_mask = None
                hidden_states = self.attentions[i * num_attention_per_layer + idx](
                    hidden_states,
                    attention_mask=attention_mask,
                    encoder_hidden_states=forward_encoder_hidden_states,
                    encoder_attention_mask=forward_encoder_attention_mask,
                    return_dict=False,
                )[0]
        if self.upsamplers is not None:
            for upsampler in self.upsamplers:
                hidden_states = upsampler(hidden_states, upsample_size)
        return hidden_states


def get_down_block(down_block_type, num_layers, in_channels, out_channels, temb_channels, add_downsample,
                   resnet_eps, transformer_layers_per_block=1, num_attention_heads=None, resnet_groups=None,
                   cross_attention_dim=None, downsample_padding=None):
    if down_block_type == "DownBlock2D":
        # sd_unet.py's DownBlock2D: one resnet (num_layers 1), norm eps 1e-5 (its default, = norm_eps here)
        assert num_layers == 1 and resnet_eps == 1e-5 and downsample_padding == 1
        return DownBlock2D(in_channels, out_channels, temb_channels, resnet_groups, add_downsample)
    elif down_block_type == "CrossAttnDownBlock2D":
        return CrossAttnDownBlock2D(in_channels, out_channels, temb_channels, num_layers=num_layers,
                                    transformer_layers_per_block=transformer_layers_per_block,
                                    resnet_eps=resnet_eps, resnet_groups=resnet_groups,
                                    num_attention_heads=num_attention_heads, cross_attention_dim=cross_attention_dim,
                                    add_downsample=add_downsample, downsample_padding=downsample_padding)
    raise ValueError(f"{down_block_type} does not exist.")


def get_up_block(up_block_type, num_layers, in_channels, out_channels, prev_output_channel, temb_channels,
                 add_upsample, resnet_eps, transformer_layers_per_block=1, num_attention_heads=None,
                 resnet_groups=None, cross_attention_dim=None):
    if up_block_type == "UpBlock2D":
        assert resnet_eps == 1e-5
        return UpBlock2D(in_channels, prev_output_channel, out_channels, temb_channels, resnet_groups, add_upsample,
                         num_layers)
    elif up_block_type == "CrossAttnUpBlock2D":
        return CrossAttnUpBlock2D(in_channels, out_channels, prev_output_channel, temb_channels,
                                  num_layers=num_layers, transformer_layers_per_block=transformer_layers_per_block,
                                  resnet_eps=resnet_eps, resnet_groups=resnet_groups,
                                  num_attention_heads=num_attention_heads, cross_attention_dim=cross_attention_dim,
                                  add_upsample=add_upsample)
    raise ValueError(f"{up_block_type} does not exist.")


class AudioLDM2UNet2DConditionModel(nn.Module):
    def __init__(self, in_channels=8, out_channels=8, flip_sin_to_cos=True, freq_shift=0,
                 down_block_types=("DownBlock2D", "CrossAttnDownBlock2D"),
                 up_block_types=("CrossAttnUpBlock2D", "UpBlock2D"),
                 block_out_channels=(4, 8), layers_per_block=1, downsample_padding=1, mid_block_scale_factor=1,
                 norm_num_groups=2, norm_eps=1e-5, cross_attention_dim=([None, 12, 16], [None, 12, 16]),
                 transformer_layers_per_block=1, attention_head_dim=2):
        super().__init__()
        # upstream: num_attention_heads = num_attention_heads or attention_head_dim (the naming issue)
        num_attention_heads = attention_head_dim
        # input
        self.conv_in = nn.Conv2d(in_channels, block_out_channels[0], kernel_size=3, padding=1)
        # time ("positional")
        time_embed_dim = block_out_channels[0] * 4
        self.time_proj = Timesteps(block_out_channels[0], flip_sin_to_cos, freq_shift)
        timestep_input_dim = block_out_channels[0]
        self.time_embedding = TimestepEmbedding(timestep_input_dim, time_embed_dim)
        self.class_embedding = None
        self.time_embed_act = None

        self.down_blocks = nn.ModuleList([])
        self.up_blocks = nn.ModuleList([])
        if isinstance(num_attention_heads, int):
            num_attention_heads = (num_attention_heads,) * len(down_block_types)
        if isinstance(cross_attention_dim, int):
            cross_attention_dim = (cross_attention_dim,) * len(down_block_types)
        if isinstance(layers_per_block, int):
            layers_per_block = [layers_per_block] * len(down_block_types)
        if isinstance(transformer_layers_per_block, int):
            transformer_layers_per_block = [transformer_layers_per_block] * len(down_block_types)
        blocks_time_embed_dim = time_embed_dim

        # down
        output_channel = block_out_channels[0]
        for i, down_block_type in enumerate(down_block_types):
            input_channel = output_channel
            output_channel = block_out_channels[i]
            is_final_block = i == len(block_out_channels) - 1
            down_block = get_down_block(
                down_block_type, num_layers=layers_per_block[i],
                transformer_layers_per_block=transformer_layers_per_block[i], in_channels=input_channel,
                out_channels=output_channel, temb_channels=blocks_time_embed_dim, add_downsample=not is_final_block,
                resnet_eps=norm_eps, resnet_groups=norm_num_groups, cross_attention_dim=cross_attention_dim[i],
                num_attention_heads=num_attention_heads[i], downsample_padding=downsample_padding)
            self.down_blocks.append(down_block)

        # mid
        self.mid_block = UNetMidBlock2DCrossAttn(
            transformer_layers_per_block=transformer_layers_per_block[-1], in_channels=block_out_channels[-1],
            temb_channels=blocks_time_embed_dim, resnet_eps=norm_eps, output_scale_factor=mid_block_scale_factor,
            cross_attention_dim=cross_attention_dim[-1], num_attention_heads=num_attention_heads[-1],
            resnet_groups=norm_num_groups)

        # count how many layers upsample the images
        self.num_upsamplers = 0

        # up
        reversed_block_out_channels = list(reversed(block_out_channels))
        reversed_num_attention_heads = list(reversed(num_attention_heads))
        reversed_layers_per_block = list(reversed(layers_per_block))
        reversed_cross_attention_dim = list(reversed(cross_attention_dim))
        reversed_transformer_layers_per_block = list(reversed(transformer_layers_per_block))
        output_channel = reversed_block_out_channels[0]
        for i, up_block_type in enumerate(up_block_types):
            is_final_block = i == len(block_out_channels) - 1
            prev_output_channel = output_channel
            output_channel = reversed_block_out_channels[i]
            input_channel = reversed_block_out_channels[min(i + 1, len(block_out_channels) - 1)]
            # add upsample block for all BUT final layer
            if not is_final_block:
                add_upsample = True
                self.num_upsamplers += 1
            else:
                add_upsample = False
            up_block = get_up_block(
                up_block_type, num_layers=reversed_layers_per_block[i] + 1,
                transformer_layers_per_block=reversed_transformer_layers_per_block[i], in_channels=input_channel,
                out_channels=output_channel, prev_output_channel=prev_output_channel,
                temb_channels=blocks_time_embed_dim, add_upsample=add_upsample, resnet_eps=norm_eps,
                resnet_groups=norm_num_groups, cross_attention_dim=reversed_cross_attention_dim[i],
                num_attention_heads=reversed_num_attention_heads[i])
            self.up_blocks.append(up_block)
            prev_output_channel = output_channel

        # out
        self.conv_norm_out = nn.GroupNorm(num_channels=block_out_channels[0], num_groups=norm_num_groups, eps=norm_eps)
        self.conv_act = nn.SiLU()
        self.conv_out = nn.Conv2d(block_out_channels[0], out_channels, kernel_size=3, padding=1)

    def forward(self, sample, timestep, encoder_hidden_states, class_labels=None, timestep_cond=None,
                attention_mask=None, cross_attention_kwargs=None, encoder_attention_mask=None, return_dict=True,
                encoder_hidden_states_1=None, encoder_attention_mask_1=None):
        default_overall_up_factor = 2 ** self.num_upsamplers
        # upsample size should be forwarded when sample is not a multiple of `default_overall_up_factor`
        forward_upsample_size = False
        upsample_size = None
        if any(s % default_overall_up_factor != 0 for s in sample.shape[-2:]):
            forward_upsample_size = True

        # ensure attention_mask is a bias, and give it a singleton query_tokens dimension
        if attention_mask is not None:
            attention_mask = (1 - attention_mask.to(sample.dtype)) * -10000.0
            attention_mask = attention_mask.unsqueeze(1)
        # convert encoder_attention_mask to a bias the same way we do for attention_mask
        if encoder_attention_mask is not None:
            encoder_attention_mask = (1 - encoder_attention_mask.to(sample.dtype)) * -10000.0
            encoder_attention_mask = encoder_attention_mask.unsqueeze(1)
        if encoder_attention_mask_1 is not None:
            encoder_attention_mask_1 = (1 - encoder_attention_mask_1.to(sample.dtype)) * -10000.0
            encoder_attention_mask_1 = encoder_attention_mask_1.unsqueeze(1)

        # 1. time
        timesteps = timestep
        if not torch.is_tensor(timesteps):
            dtype = torch.float64 if isinstance(timestep, float) else torch.int64
            timesteps = torch.tensor([timesteps], dtype=dtype, device=sample.device)
        elif len(timesteps.shape) == 0:
            timesteps = timesteps[None].to(sample.device)
        # broadcast to batch dimension in a way that's compatible with ONNX/Core ML
        timesteps = timesteps.expand(sample.shape[0])
        t_emb = self.time_proj(timesteps)
        # `Timesteps` does not contain any weights and will always return f32 tensors
        t_emb = t_emb.to(dtype=sample.dtype)
        emb = self.time_embedding(t_emb)  # timestep_cond None: no cond_proj
        aug_emb = None
        emb = emb + aug_emb if aug_emb is not None else emb

        # 2. pre-process
        sample = self.conv_in(sample)

        # 3. down
        down_block_res_samples = (sample,)
        for downsample_block in self.down_blocks:
            if hasattr(downsample_block, "has_cross_attention") and downsample_block.has_cross_attention:
                sample, res_samples = downsample_block(
                    hidden_states=sample,
                    temb=emb,
                    encoder_hidden_states=encoder_hidden_states,
                    attention_mask=attention_mask,
                    encoder_attention_mask=encoder_attention_mask,
                    encoder_hidden_states_1=encoder_hidden_states_1,
                    encoder_attention_mask_1=encoder_attention_mask_1,
                )
            else:
                sample, res_samples = downsample_block(hidden_states=sample, temb=emb)
            down_block_res_samples += res_samples

        # 4. mid
        sample = self.mid_block(
            sample,
            emb,
            encoder_hidden_states=encoder_hidden_states,
            attention_mask=attention_mask,
            encoder_attention_mask=encoder_attention_mask,
            encoder_hidden_states_1=encoder_hidden_states_1,
            encoder_attention_mask_1=encoder_attention_mask_1,
        )

        # 5. up
        for i, upsample_block in enumerate(self.up_blocks):
            is_final_block = i == len(self.up_blocks) - 1
            res_samples = down_block_res_samples[-len(upsample_block.resnets):]
            down_block_res_samples = down_block_res_samples[: -len(upsample_block.resnets)]
            # if we have not reached the final block and need to forward the upsample size, we do it here
            if not is_final_block and forward_upsample_size:
                upsample_size = down_block_res_samples[-1].shape[2:]
            if hasattr(upsample_block, "has_cross_attention") and upsample_block.has_cross_attention:
                sample = upsample_block(
                    hidden_states=sample,
                    temb=emb,
                    res_hidden_states_tuple=res_samples,
                    encoder_hidden_states=encoder_hidden_states,
                    upsample_size=upsample_size,
                    attention_mask=attention_mask,
                    encoder_attention_mask=encoder_attention_mask,
                    encoder_hidden_states_1=encoder_hidden_states_1,
                    encoder_attention_mask_1=encoder_attention_mask_1,
                )
            else:
                sample = upsample_block(
                    hidden_states=sample, temb=emb, res_hidden_states_tuple=res_samples, upsample_size=upsample_size
                )

        # 6. post-process
        if self.conv_norm_out:
            sample = self.conv_norm_out(sample)
            sample = self.conv_act(sample)
        sample = self.conv_out(sample)
        # return_dict False as the pipeline calls it (upstream otherwise wraps it in UNet2DConditionOutput)
        return (sample,)


def build():
    return AudioLDM2UNet2DConditionModel()


def inputs(g):
    # encode_prompt: generated_prompt_embeds the GPT-2 language model's 8 generated hidden states; prompt_embeds
    # the Flan-T5 encoder's states with the tokenizer's int64 attention mask (two padding tokens at the end)
    return {"generated_prompt_embeds": torch.randn((1, 8, 12), generator=g),
            "prompt_embeds": torch.randn((1, 6, 16), generator=g),
            "attention_mask": torch.tensor([[1, 1, 1, 1, 0, 0]], dtype=torch.int64),
            "noise": torch.randn((1, 8, 8, 4), generator=g)}


def call(model, x, sigma, c):
    # AudioLDM2Pipeline: the scheduler's 0-d timestep t (here σ·1000 in f32); the noise prediction used as is
    t = torch.tensor(sigma * 1000.0, dtype=torch.float32, device=x.device)
    return model(x, t, encoder_hidden_states=c["generated_prompt_embeds"],
                 encoder_hidden_states_1=c["prompt_embeds"], encoder_attention_mask_1=c["attention_mask"],
                 return_dict=False)[0]


PRODUCER = dict(
    library_source="replica of huggingface/diffusers pipelines/audioldm2/modeling_audioldm2.py "
                   "(AudioLDM2UNet2DConditionModel) and the parts it imports (torch 1.13)",
    timestep="sigma*1000, f32 0-d, [None] then expanded to the batch (AudioLDM2Pipeline: the DDIM scheduler's t)",
    velocity="the noise prediction as is",
    note="AudioLDM 2's U-Net at widths 4/8 on an 8-channel 8x4 latent: DownBlock2D, then CrossAttnDownBlock2D; "
         "UNetMidBlock2DCrossAttn; CrossAttnUpBlock2D and UpBlock2D; every attention stage three chained "
         "Transformer2DModels: self-attention only (double_self_attention), cross-attention to the GPT-2 generated "
         "embeddings (encoder_hidden_states [1, 8, 12], no mask), cross-attention to the T5 embeddings "
         "(encoder_hidden_states_1 [1, 6, 16]) under the int64 padding mask made (1 - m)*-10000, unsqueezed, "
         "repeated per head and added to the scores; 2 heads of width 4; GEGLU FeedForward")

if __name__ == "__main__":
    capture("audioldm2_unet", build, inputs, call, sys.argv[1], PRODUCER)
