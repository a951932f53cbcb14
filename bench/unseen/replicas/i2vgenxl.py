"""I2VGen-XL's UNet (I2VGenXLUNet, ali-vilab/i2vgen-xl's layout), reimplemented for torch 1.13 (no diffusers here),
captured small in f32 on CPU in a 3-step denoising loop.

Follows huggingface/diffusers src/diffusers/models/unets/unet_i2vgen_xl.py (I2VGenXLTransformerTemporalEncoder and
I2VGenXLUNet's forward with no timestep_cond and no cross_attention_kwargs) line for line:
- I2VGenXLTransformerTemporalEncoder (image_latents_temporal_encoder): LayerNorm ε 1e-5, a self-attention (Attention,
  2 heads of in_channels, to_q/k/v without bias, to_out with bias), plus the input; then a FeedForward with
  activation "gelu" (GELU: Linear then exact gelu; Dropout; Linear, inner in_channels·4) on the sum, with no norm
  before it, plus the sum;
- image_latents_proj_in (Conv2d 4 -> 4·in, SiLU, Conv2d, SiLU, Conv2d -> in, all 3x3) on every frame of
  image_latents, then each cell's frames as a sequence [B·h·w, F, C] through the temporal encoder, back to
  [B, C, F, h, w], joined to the sample on channels before conv_in (in_channels + in_channels inputs);
- image_latents_context_embedding on the first frame of image_latents: Conv2d 4 -> 8·in 3x3, SiLU,
  AdaptiveAvgPool2d((32, 32)) (here an upsampling: the 6x4 map averaged over overlapping windows
  [⌊i·h/32⌋, ⌈(i+1)·h/32⌉) to 32x32), Conv2d stride 2 -> 16·in, SiLU, Conv2d stride 2 -> cross_attention_dim: an 8x8
  map whose 64 cells become context tokens (channels last);
- context_embedding (Linear, SiLU, Linear to cross_attention_dim·in_channels) of the image embeddings, viewed as
  in_channels tokens of cross_attention_dim; the context = [zeros(B, 0, D) ++ text states ++ 64 image-latent tokens
  ++ in_channels image-embedding tokens] on the sequence axis, repeat_interleave'd per frame, the key/value of every
  spatial cross-attention;
- fps_embedding (Linear, SiLU, Linear) of time_proj(fps) (the same Timesteps module called a second time), added to
  the timestep's TimestepEmbedding, repeat_interleave'd per frame.
The 3-D blocks are the same code upstream as UNet3DConditionModel's and come from unet3d.py (unets/unet_3d_blocks.py's
CrossAttnDownBlock3D, DownBlock3D, UNetMidBlock3DCrossAttn, UpBlock3D, CrossAttnUpBlock3D, with their ResnetBlock2D,
TemporalConvLayer, Transformer2DModel, TransformerTemporalModel; transformer_in is a TransformerTemporalModel of 8
heads of attention_head_dim); sd_unet.py gives Attention (attention_processor.py with AttnProcessor2_0) and parts.py
GELU, Timesteps, TimestepEmbedding (embeddings.py; TimestepEmbedding is called without its condition argument, None
upstream). The same module tree, parameter names and shapes, call boundaries, and arithmetic. Stand-in for what
torch 1.13 lacks: F.scaled_dot_product_attention (its math path).

Tiny config (released: block_out_channels (320, 640, 1280, 1280), CrossAttnDownBlock3D ×3 + DownBlock3D, UpBlock3D +
CrossAttnUpBlock3D ×3, layers_per_block 2, attention_head_dim 64, norm_num_groups 32, cross_attention_dim 1024,
in_channels 4): block_out_channels (16, 32), down (CrossAttnDownBlock3D, DownBlock3D), up (UpBlock3D,
CrossAttnUpBlock3D), layers_per_block 2 as released, attention_head_dim 4, norm_num_groups 4, cross_attention_dim 16,
in_channels 4 as released (the image-latent branch's widths 16, 32, 64 are upstream's multiples of it); 3 frames of
6x4 latents (as unet3d.py).

Pipeline as I2VGenXLPipeline calls it without guidance: latents [1, 4, 3, 6, 4]; t the scheduler's timestep, a 0-d
int64 tensor (here round(σ·1000)); encoder_hidden_states the text encoder's states [1, 6, 16]; fps the int64 tensor
[target_fps] = [16]; image_embeddings the CLIP image embeds unsqueezed, [1, 1, 16]; image_latents as
prepare_image_latents makes them: the VAE latent of the image as frame 0 (here random), then frames k = 1..F-1 filled
with the constant k/(F-1) (the frame position mask); the noise prediction [1, 4, 3, 6, 4] taken as the velocity as is
(the capture's flow Euler loop).

usage: /usr/bin/python3 bench/unseen/replicas/i2vgenxl.py OUTDIR
REPLICA_DTYPE=bf16 [REPLICA_DEVICE=cuda] as run.py's replicas: the bf16 run, beside the f32 one.
"""
import sys

import torch
import torch.nn as nn

from parts import GELU, TimestepEmbedding, Timesteps
from run import capture
from sd_unet import Attention
from unet3d import (CrossAttnDownBlock3D, CrossAttnUpBlock3D, DownBlock3D, TransformerTemporalModel,
                    UNetMidBlock3DCrossAttn, UpBlock3D)


class FeedForward(nn.Module):
    """attention.py's FeedForward(dim, activation_fn="gelu", inner_dim=..., bias=True, final_dropout=False)."""

    def __init__(self, dim, dim_out=None, dropout=0.0, inner_dim=None, bias=True):
        super().__init__()
        inner_dim = inner_dim if inner_dim is not None else dim * 4
        dim_out = dim_out if dim_out is not None else dim
        self.net = nn.ModuleList([GELU(dim, inner_dim, bias=bias), nn.Dropout(dropout),
                                  nn.Linear(inner_dim, dim_out, bias=bias)])

    def forward(self, hidden_states):
        for module in self.net:
            hidden_states = module(hidden_states)
        return hidden_states


class I2VGenXLTransformerTemporalEncoder(nn.Module):
    def __init__(self, dim, num_attention_heads, attention_head_dim, activation_fn="geglu", ff_inner_dim=None,
                 dropout=0.0):
        super().__init__()
        assert activation_fn == "gelu"
        self.norm1 = nn.LayerNorm(dim, elementwise_affine=True, eps=1e-5)
        self.attn1 = Attention(dim, heads=num_attention_heads, dim_head=attention_head_dim)
        self.ff = FeedForward(dim, dropout=dropout, inner_dim=ff_inner_dim, bias=True)

    def forward(self, hidden_states):
        norm_hidden_states = self.norm1(hidden_states)
        attn_output = self.attn1(norm_hidden_states, encoder_hidden_states=None)
        hidden_states = attn_output + hidden_states
        if hidden_states.ndim == 4:
            hidden_states = hidden_states.squeeze(1)
        ff_output = self.ff(hidden_states)
        hidden_states = ff_output + hidden_states
        if hidden_states.ndim == 4:
            hidden_states = hidden_states.squeeze(1)
        return hidden_states


class I2VGenXLUNet(nn.Module):
    def __init__(self, in_channels=4, out_channels=4,
                 down_block_types=("CrossAttnDownBlock3D", "DownBlock3D"),
                 up_block_types=("UpBlock3D", "CrossAttnUpBlock3D"),
                 block_out_channels=(16, 32), layers_per_block=2, norm_num_groups=4, cross_attention_dim=16,
                 attention_head_dim=4):
        super().__init__()
        self.in_channels = in_channels  # self.config.in_channels
        self.cross_attention_dim = cross_attention_dim  # self.config.cross_attention_dim
        num_attention_heads = attention_head_dim  # upstream's naming fix-up
        # input
        self.conv_in = nn.Conv2d(in_channels + in_channels, block_out_channels[0], kernel_size=3, padding=1)
        self.transformer_in = TransformerTemporalModel(num_attention_heads=8, attention_head_dim=num_attention_heads,
                                                       in_channels=block_out_channels[0], num_layers=1,
                                                       norm_num_groups=norm_num_groups)
        # image embedding
        self.image_latents_proj_in = nn.Sequential(
            nn.Conv2d(4, in_channels * 4, 3, padding=1),
            nn.SiLU(),
            nn.Conv2d(in_channels * 4, in_channels * 4, 3, stride=1, padding=1),
            nn.SiLU(),
            nn.Conv2d(in_channels * 4, in_channels, 3, stride=1, padding=1),
        )
        self.image_latents_temporal_encoder = I2VGenXLTransformerTemporalEncoder(
            dim=in_channels, num_attention_heads=2, ff_inner_dim=in_channels * 4, attention_head_dim=in_channels,
            activation_fn="gelu")
        self.image_latents_context_embedding = nn.Sequential(
            nn.Conv2d(4, in_channels * 8, 3, padding=1),
            nn.SiLU(),
            nn.AdaptiveAvgPool2d((32, 32)),
            nn.Conv2d(in_channels * 8, in_channels * 16, 3, stride=2, padding=1),
            nn.SiLU(),
            nn.Conv2d(in_channels * 16, cross_attention_dim, 3, stride=2, padding=1),
        )
        # other embeddings -- time, context, fps
        time_embed_dim = block_out_channels[0] * 4
        self.time_proj = Timesteps(block_out_channels[0], True, 0)
        timestep_input_dim = block_out_channels[0]
        self.time_embedding = TimestepEmbedding(timestep_input_dim, time_embed_dim)
        self.context_embedding = nn.Sequential(
            nn.Linear(cross_attention_dim, time_embed_dim),
            nn.SiLU(),
            nn.Linear(time_embed_dim, cross_attention_dim * in_channels),
        )
        self.fps_embedding = nn.Sequential(
            nn.Linear(timestep_input_dim, time_embed_dim), nn.SiLU(), nn.Linear(time_embed_dim, time_embed_dim))
        # blocks
        self.down_blocks = nn.ModuleList([])
        self.up_blocks = nn.ModuleList([])
        num_attention_heads = (num_attention_heads,) * len(down_block_types)
        output_channel = block_out_channels[0]
        for i, down_block_type in enumerate(down_block_types):
            input_channel = output_channel
            output_channel = block_out_channels[i]
            is_final_block = i == len(block_out_channels) - 1
            if down_block_type == "CrossAttnDownBlock3D":
                block = CrossAttnDownBlock3D(input_channel, output_channel, time_embed_dim, layers_per_block, 1e-05,
                                             norm_num_groups, num_attention_heads[i], cross_attention_dim,
                                             not is_final_block)
            else:
                block = DownBlock3D(input_channel, output_channel, time_embed_dim, layers_per_block, 1e-05,
                                    norm_num_groups, not is_final_block)
            self.down_blocks.append(block)
        self.mid_block = UNetMidBlock3DCrossAttn(block_out_channels[-1], time_embed_dim, 1e-05, norm_num_groups,
                                                 num_attention_heads[-1], cross_attention_dim)
        self.num_upsamplers = 0
        reversed_block_out_channels = list(reversed(block_out_channels))
        reversed_num_attention_heads = list(reversed(num_attention_heads))
        output_channel = reversed_block_out_channels[0]
        for i, up_block_type in enumerate(up_block_types):
            is_final_block = i == len(block_out_channels) - 1
            prev_output_channel = output_channel
            output_channel = reversed_block_out_channels[i]
            input_channel = reversed_block_out_channels[min(i + 1, len(block_out_channels) - 1)]
            add_upsample = not is_final_block
            if add_upsample:
                self.num_upsamplers += 1
            if up_block_type == "CrossAttnUpBlock3D":
                block = CrossAttnUpBlock3D(input_channel, output_channel, prev_output_channel, time_embed_dim,
                                           layers_per_block + 1, 1e-05, norm_num_groups,
                                           reversed_num_attention_heads[i], cross_attention_dim, add_upsample)
            else:
                block = UpBlock3D(input_channel, prev_output_channel, output_channel, time_embed_dim,
                                  layers_per_block + 1, 1e-05, norm_num_groups, add_upsample)
            self.up_blocks.append(block)
        # out
        self.conv_norm_out = nn.GroupNorm(num_channels=block_out_channels[0], num_groups=norm_num_groups, eps=1e-05)
        self.conv_act = nn.SiLU()  # get_activation("silu")
        self.conv_out = nn.Conv2d(block_out_channels[0], out_channels, kernel_size=3, padding=1)

    @property
    def dtype(self):
        # ModelMixin.dtype: the first floating parameter's
        return next(p.dtype for p in self.parameters() if p.is_floating_point())

    def forward(self, sample, timestep, fps, image_latents, image_embeddings=None, encoder_hidden_states=None,
                return_dict=False):
        batch_size, channels, num_frames, height, width = sample.shape
        default_overall_up_factor = 2 ** self.num_upsamplers
        forward_upsample_size = False
        upsample_size = None
        if any(s % default_overall_up_factor != 0 for s in sample.shape[-2:]):
            forward_upsample_size = True
        # 1. time
        timesteps = timestep
        if not torch.is_tensor(timesteps):
            dtype = torch.float64 if isinstance(timesteps, float) else torch.int64
            timesteps = torch.tensor([timesteps], dtype=dtype, device=sample.device)
        elif len(timesteps.shape) == 0:
            timesteps = timesteps[None].to(sample.device)
        timesteps = timesteps.expand(sample.shape[0])
        t_emb = self.time_proj(timesteps)
        t_emb = t_emb.to(dtype=self.dtype)
        t_emb = self.time_embedding(t_emb)
        # 2. FPS
        fps = fps.expand(fps.shape[0])
        fps_emb = self.fps_embedding(self.time_proj(fps).to(dtype=self.dtype))
        # 3. time + FPS embeddings
        emb = t_emb + fps_emb
        emb = emb.repeat_interleave(repeats=num_frames, dim=0)
        # 4. context embeddings: text, the first image latent frame's tokens, the image embedding's tokens
        context_emb = sample.new_zeros(batch_size, 0, self.cross_attention_dim)
        context_emb = torch.cat([context_emb, encoder_hidden_states], dim=1)
        image_latents_for_context_embds = image_latents[:, :, :1, :]
        image_latents_context_embs = image_latents_for_context_embds.permute(0, 2, 1, 3, 4).reshape(
            image_latents_for_context_embds.shape[0] * image_latents_for_context_embds.shape[2],
            image_latents_for_context_embds.shape[1],
            image_latents_for_context_embds.shape[3],
            image_latents_for_context_embds.shape[4],
        )
        image_latents_context_embs = self.image_latents_context_embedding(image_latents_context_embs)
        _batch_size, _channels, _height, _width = image_latents_context_embs.shape
        image_latents_context_embs = image_latents_context_embs.permute(0, 2, 3, 1).reshape(
            _batch_size, _height * _width, _channels)
        context_emb = torch.cat([context_emb, image_latents_context_embs], dim=1)
        image_emb = self.context_embedding(image_embeddings)
        image_emb = image_emb.view(-1, self.in_channels, self.cross_attention_dim)
        context_emb = torch.cat([context_emb, image_emb], dim=1)
        context_emb = context_emb.repeat_interleave(repeats=num_frames, dim=0)
        image_latents = image_latents.permute(0, 2, 1, 3, 4).reshape(
            image_latents.shape[0] * image_latents.shape[2],
            image_latents.shape[1],
            image_latents.shape[3],
            image_latents.shape[4],
        )
        image_latents = self.image_latents_proj_in(image_latents)
        image_latents = (
            image_latents[None, :]
            .reshape(batch_size, num_frames, channels, height, width)
            .permute(0, 3, 4, 1, 2)
            .reshape(batch_size * height * width, num_frames, channels)
        )
        image_latents = self.image_latents_temporal_encoder(image_latents)
        image_latents = image_latents.reshape(batch_size, height, width, num_frames, channels).permute(0, 4, 3, 1, 2)
        # 5. pre-process
        sample = torch.cat([sample, image_latents], dim=1)
        sample = sample.permute(0, 2, 1, 3, 4).reshape((sample.shape[0] * num_frames, -1) + sample.shape[3:])
        sample = self.conv_in(sample)
        sample = self.transformer_in(sample, num_frames=num_frames, return_dict=False)[0]
        # 6. down
        down_block_res_samples = (sample,)
        for downsample_block in self.down_blocks:
            if hasattr(downsample_block, "has_cross_attention") and downsample_block.has_cross_attention:
                sample, res_samples = downsample_block(hidden_states=sample, temb=emb,
                                                       encoder_hidden_states=context_emb, num_frames=num_frames)
            else:
                sample, res_samples = downsample_block(hidden_states=sample, temb=emb, num_frames=num_frames)
            down_block_res_samples += res_samples
        # 7. mid
        if self.mid_block is not None:
            sample = self.mid_block(sample, emb, encoder_hidden_states=context_emb, num_frames=num_frames)
        # 8. up
        for i, upsample_block in enumerate(self.up_blocks):
            is_final_block = i == len(self.up_blocks) - 1
            res_samples = down_block_res_samples[-len(upsample_block.resnets):]
            down_block_res_samples = down_block_res_samples[: -len(upsample_block.resnets)]
            if not is_final_block and forward_upsample_size:
                upsample_size = down_block_res_samples[-1].shape[2:]
            if hasattr(upsample_block, "has_cross_attention") and upsample_block.has_cross_attention:
                sample = upsample_block(hidden_states=sample, temb=emb, res_hidden_states_tuple=res_samples,
                                        encoder_hidden_states=context_emb, upsample_size=upsample_size,
                                        num_frames=num_frames)
            else:
                sample = upsample_block(hidden_states=sample, temb=emb, res_hidden_states_tuple=res_samples,
                                        upsample_size=upsample_size, num_frames=num_frames)
        # 9. post-process
        sample = self.conv_norm_out(sample)
        sample = self.conv_act(sample)
        sample = self.conv_out(sample)
        sample = sample[None, :].reshape((-1, num_frames) + sample.shape[1:]).permute(0, 2, 1, 3, 4)
        return (sample,)


FRAMES, H, W = 3, 6, 4


def build():
    return I2VGenXLUNet()


def inputs(g):
    # prepare_image_latents: the image's latent as frame 0, then the frame position mask k/(F-1) for k = 1..F-1
    image_latents = torch.randn((1, 4, H, W), generator=g).unsqueeze(2)
    frame_position_mask = []
    for frame_idx in range(FRAMES - 1):
        scale = (frame_idx + 1) / (FRAMES - 1)
        frame_position_mask.append(torch.ones_like(image_latents[:, :, :1]) * scale)
    image_latents = torch.cat([image_latents, torch.cat(frame_position_mask, dim=2)], dim=2)
    return {"encoder_hidden_states": torch.randn((1, 6, 16), generator=g),
            "image_embeddings": torch.randn((1, 1, 16), generator=g),
            "image_latents": image_latents,
            "fps": torch.tensor([16], dtype=torch.int64),
            "noise": torch.randn((1, 4, FRAMES, H, W), generator=g)}


def call(model, x, sigma, c):
    # I2VGenXLPipeline: the scheduler's timestep t (a 0-d int64 tensor) as is; the noise prediction used as is
    t = torch.tensor(int(round(sigma * 1000)), dtype=torch.int64, device=x.device)
    return model(x, t, encoder_hidden_states=c["encoder_hidden_states"], fps=c["fps"],
                 image_latents=c["image_latents"], image_embeddings=c["image_embeddings"], return_dict=False)[0]


PRODUCER = dict(
    library_source="replica of huggingface/diffusers unet_i2vgen_xl.py and the parts it imports (torch 1.13)",
    timestep="round(sigma*1000) int64 0-d (I2VGenXLPipeline: the scheduler's t), expanded to the batch",
    velocity="the noise prediction as is",
    note="I2VGen-XL UNet at widths 16/32, 3 frames of 6x4: UNet3DConditionModel's 3-D blocks, plus fps embedding "
         "(time_proj reused, Linear-SiLU-Linear) added to the time embedding; image latents through a 3-conv "
         "proj_in and a temporal encoder (LayerNorm, 2-head self-attention over frames, GELU FF) joined to the "
         "sample on channels before conv_in (8 -> 16); the cross-attention context = text ++ 64 tokens of the "
         "first image-latent frame (conv, AdaptiveAvgPool2d to 32x32, two stride-2 convs) ++ 4 tokens from "
         "the image embedding (Linear-SiLU-Linear viewed [B, 4, D]), repeated per frame")

if __name__ == "__main__":
    capture("i2vgenxl", build, inputs, call, sys.argv[1], PRODUCER)
